//===- Conv.cpp - 2-D convolution and its gradients -----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter on NHWC images and
// HWIO filters, padded as TensorFlow pads (SAME may pad one more row or
// column after than before).
//
// float32 runs oneDNN's direct convolution: activations stay NHWC (which
// its brgemm / jit kernels read directly) and filters are reordered to the
// primitive's preferred blocked layout per run (and the filter gradient
// back to HWIO), since filters change every step. float64, and builds
// without oneDNN, run the loops below.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <cstring>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

template <typename T> class ConvKernel : public Kernel {
public:
  explicit ConvKernel(ConvMode Mode) : Mode(Mode) {}
  Status init(const KernelInfo &I);
  void run(const ExecContext &C) override;

private:
  void forwardLoops(const T *X, const T *F, T *Y);
  void backwardDataLoops(const T *F, const T *DY, T *DX);
  void backwardFilterLoops(const T *X, const T *DY, T *DF);
#ifdef MDRT_HAVE_DNNL
  Status initDnnl();
#endif

  ConvMode Mode;
  int64_t N = 0, H = 0, W = 0, Ci = 0, KH = 0, KW = 0, Co = 0, OH = 0, OW = 0;
  int64_t SH = 1, SW = 1, PT = 0, PL = 0, PB = 0, PR = 0;
  int Threads = 1;
  /// Nothing to compute; the output (if any) is zero-filled.
  bool Degenerate = false;
  size_t OutBytes = 0;
#ifdef MDRT_HAVE_DNNL
  bool UseDnnl = false;
  dnnl::stream Stream;
  /// The filter (or filter gradient) reorder, and the convolution.
  DnnlCall Reorder, Conv;
  unsigned ArgUserF = 0, ArgIn = 0, ArgOut = 0;
#endif
};

template <typename T> Status ConvKernel<T>::init(const KernelInfo &I) {
  ConvGeometry CG;
  MDRT_RETURN_IF_ERROR(convGeometry(I, Mode, CG));
  const Window2D &G = CG.Win;
  N = G.N;
  H = G.H.In;
  W = G.W.In;
  Ci = G.C;
  KH = G.H.K;
  KW = G.W.K;
  Co = CG.Co;
  OH = G.H.Out;
  OW = G.W.Out;
  SH = G.H.Stride;
  SW = G.W.Stride;
  PT = G.H.PadBefore;
  PB = G.H.PadAfter;
  PL = G.W.PadBefore;
  PR = G.W.PadAfter;
  Threads = I.NumThreads;
  OutBytes = I.Outputs[0].bytes();
  Degenerate = !N || !H || !W || !Ci || !Co || !OH || !OW;
  if (Degenerate)
    return Status::ok();
#ifdef MDRT_HAVE_DNNL
  if (std::is_same<T, float>::value && useDnnl()) {
    MDRT_RETURN_IF_ERROR(initDnnl());
    UseDnnl = true;
  }
#endif
  return Status::ok();
}

#ifdef MDRT_HAVE_DNNL
template <typename T> Status ConvKernel<T>::initDnnl() {
  using namespace dnnl;
  using tag = memory::format_tag;
  const auto F32 = memory::data_type::f32;
  memory::desc Src({N, Ci, H, W}, F32, tag::nhwc);
  memory::desc Dst({N, Co, OH, OW}, F32, tag::nhwc);
  memory::desc UserF({Co, Ci, KH, KW}, F32, tag::hwio);
  memory::desc AnyF({Co, Ci, KH, KW}, F32, tag::any);
  memory::dims Strides = {SH, SW}, PadL = {PT, PL}, PadR = {PB, PR};
  return dnnlTry("convolution", [&] {
    OmpThreadsScope Scope(Threads);
    engine &E = dnnlEngine();
    Stream = stream(E);
    convolution_forward::primitive_desc FwdPD(
        convolution_forward::desc(prop_kind::forward_training,
                                  algorithm::convolution_direct, Src, AnyF, Dst,
                                  Strides, PadL, PadR),
        dnnlAttr(), E);
    // The filter in the primitive's layout, when it differs from HWIO.
    memory::desc PrimF;
    switch (Mode) {
    case ConvMode::Forward:
      PrimF = FwdPD.weights_desc();
      Conv.init(convolution_forward(FwdPD), FwdPD.scratchpad_desc());
      ArgIn = Conv.arg(DNNL_ARG_SRC, dnnlUnbound(Src));
      ArgOut = Conv.arg(DNNL_ARG_DST, dnnlUnbound(Dst));
      break;
    case ConvMode::BackwardData: {
      convolution_backward_data::primitive_desc PD(
          convolution_backward_data::desc(algorithm::convolution_direct, Src,
                                          AnyF, Dst, Strides, PadL, PadR),
          dnnlAttr(), E, FwdPD);
      PrimF = PD.weights_desc();
      Conv.init(convolution_backward_data(PD), PD.scratchpad_desc());
      ArgIn = Conv.arg(DNNL_ARG_DIFF_DST, dnnlUnbound(Dst));
      ArgOut = Conv.arg(DNNL_ARG_DIFF_SRC, dnnlUnbound(Src));
      break;
    }
    case ConvMode::BackwardFilter: {
      convolution_backward_weights::primitive_desc PD(
          convolution_backward_weights::desc(algorithm::convolution_direct, Src,
                                             AnyF, Dst, Strides, PadL, PadR),
          dnnlAttr(), E, FwdPD);
      PrimF = PD.diff_weights_desc();
      Conv.init(convolution_backward_weights(PD), PD.scratchpad_desc());
      ArgIn = Conv.arg(DNNL_ARG_SRC, dnnlUnbound(Src));
      Conv.arg(DNNL_ARG_DIFF_DST, dnnlUnbound(Dst)); // Index ArgIn + 1.
      break;
    }
    }
    int FArg = Mode == ConvMode::BackwardFilter ? DNNL_ARG_DIFF_WEIGHTS
                                                : DNNL_ARG_WEIGHTS;
    if (PrimF == UserF) {
      ArgUserF = Conv.arg(FArg, dnnlUnbound(UserF));
      return;
    }
    memory Blocked(PrimF, E);
    Conv.arg(FArg, Blocked);
    bool ToUser = Mode == ConvMode::BackwardFilter;
    reorder::primitive_desc RPD =
        ToUser ? reorder::primitive_desc(E, PrimF, E, UserF, dnnlAttr())
               : reorder::primitive_desc(E, UserF, E, PrimF, dnnlAttr());
    Reorder.init(reorder(RPD), RPD.scratchpad_desc());
    if (ToUser) {
      Reorder.arg(DNNL_ARG_FROM, Blocked);
      ArgUserF = Reorder.arg(DNNL_ARG_TO, dnnlUnbound(UserF));
    } else {
      ArgUserF = Reorder.arg(DNNL_ARG_FROM, dnnlUnbound(UserF));
      Reorder.arg(DNNL_ARG_TO, Blocked);
    }
  });
}
#endif

template <typename T> void ConvKernel<T>::run(const ExecContext &C) {
  const T *In0 = static_cast<const T *>(C.In[0]);
  const T *In1 = static_cast<const T *>(C.In[1]);
  T *Out = static_cast<T *>(C.Out[0]);
  if (Degenerate) {
    std::memset(Out, 0, OutBytes);
    return;
  }
#ifdef MDRT_HAVE_DNNL
  if (UseDnnl) {
    OmpThreadsScope Scope(Threads);
    DnnlCall &FHolder = Reorder ? Reorder : Conv;
    switch (Mode) {
    case ConvMode::Forward:
      FHolder.setHandle(ArgUserF, In1);
      Conv.setHandle(ArgIn, In0);
      Conv.setHandle(ArgOut, Out);
      if (Reorder)
        Reorder.exec(Stream);
      Conv.exec(Stream);
      return;
    case ConvMode::BackwardData:
      FHolder.setHandle(ArgUserF, In0);
      Conv.setHandle(ArgIn, In1);
      Conv.setHandle(ArgOut, Out);
      if (Reorder)
        Reorder.exec(Stream);
      Conv.exec(Stream);
      return;
    case ConvMode::BackwardFilter:
      FHolder.setHandle(ArgUserF, Out);
      Conv.setHandle(ArgIn, In0);
      Conv.setHandle(ArgIn + 1, In1);
      Conv.exec(Stream);
      if (Reorder)
        Reorder.exec(Stream);
      return;
    }
  }
#endif
  switch (Mode) {
  case ConvMode::Forward:
    forwardLoops(In0, In1, Out);
    return;
  case ConvMode::BackwardData:
    backwardDataLoops(In0, In1, Out);
    return;
  case ConvMode::BackwardFilter:
    backwardFilterLoops(In0, In1, Out);
    return;
  }
}

template <typename T>
void ConvKernel<T>::forwardLoops(const T *X, const T *F, T *Y) {
  const int64_t Work = KH * KW * Ci * Co * OW;
  parallelFor(N * OH, std::max<int64_t>(1, GrainCheap / Work), Threads,
              [&](int64_t B, int64_t E) {
                for (int64_t R = B; R < E; ++R) {
                  int64_t Img = R / OH, Oh = R % OH;
                  for (int64_t Ow = 0; Ow < OW; ++Ow) {
                    T *YP = Y + (R * OW + Ow) * Co;
                    for (int64_t O = 0; O < Co; ++O)
                      YP[O] = T(0);
                    for (int64_t Kh = 0; Kh < KH; ++Kh) {
                      int64_t Ih = Oh * SH - PT + Kh;
                      if (Ih < 0 || Ih >= H)
                        continue;
                      for (int64_t Kw = 0; Kw < KW; ++Kw) {
                        int64_t Iw = Ow * SW - PL + Kw;
                        if (Iw < 0 || Iw >= W)
                          continue;
                        const T *XP = X + ((Img * H + Ih) * W + Iw) * Ci;
                        const T *FP = F + (Kh * KW + Kw) * Ci * Co;
                        for (int64_t Cc = 0; Cc < Ci; ++Cc) {
                          const T XV = XP[Cc];
                          const T *FR = FP + Cc * Co;
                          for (int64_t O = 0; O < Co; ++O)
                            YP[O] += XV * FR[O];
                        }
                      }
                    }
                  }
                }
              });
}

template <typename T>
void ConvKernel<T>::backwardDataLoops(const T *F, const T *DY, T *DX) {
  // Scatter within each image; images are independent.
  const int64_t Work = OH * OW * KH * KW * Ci * Co;
  parallelFor(N, std::max<int64_t>(1, GrainCheap / Work), Threads,
              [&](int64_t B, int64_t E) {
                std::memset(DX + B * H * W * Ci, 0,
                            size_t((E - B) * H * W * Ci) * sizeof(T));
                for (int64_t Img = B; Img < E; ++Img)
                  for (int64_t Oh = 0; Oh < OH; ++Oh)
                    for (int64_t Ow = 0; Ow < OW; ++Ow) {
                      const T *G = DY + ((Img * OH + Oh) * OW + Ow) * Co;
                      for (int64_t Kh = 0; Kh < KH; ++Kh) {
                        int64_t Ih = Oh * SH - PT + Kh;
                        if (Ih < 0 || Ih >= H)
                          continue;
                        for (int64_t Kw = 0; Kw < KW; ++Kw) {
                          int64_t Iw = Ow * SW - PL + Kw;
                          if (Iw < 0 || Iw >= W)
                            continue;
                          T *D = DX + ((Img * H + Ih) * W + Iw) * Ci;
                          const T *FP = F + (Kh * KW + Kw) * Ci * Co;
                          // The sum over co in laneSum's fixed order
                          // (the GPU's reference kernels add it so).
                          for (int64_t Cc = 0; Cc < Ci; ++Cc) {
                            const T *FR = FP + Cc * Co;
                            D[Cc] += laneSum<T>(0, Co, [FR, G](int64_t O) {
                              return FR[O] * G[O];
                            });
                          }
                        }
                      }
                    }
              });
}

template <typename T>
void ConvKernel<T>::backwardFilterLoops(const T *X, const T *DY, T *DF) {
  // One task per filter tap: no two tasks write the same gradient.
  parallelFor(KH * KW, 1, Threads, [&](int64_t B, int64_t E) {
    for (int64_t Tap = B; Tap < E; ++Tap) {
      int64_t Kh = Tap / KW, Kw = Tap % KW;
      T *D = DF + Tap * Ci * Co;
      for (int64_t J = 0; J < Ci * Co; ++J)
        D[J] = T(0);
      for (int64_t Img = 0; Img < N; ++Img)
        for (int64_t Oh = 0; Oh < OH; ++Oh) {
          int64_t Ih = Oh * SH - PT + Kh;
          if (Ih < 0 || Ih >= H)
            continue;
          for (int64_t Ow = 0; Ow < OW; ++Ow) {
            int64_t Iw = Ow * SW - PL + Kw;
            if (Iw < 0 || Iw >= W)
              continue;
            const T *XP = X + ((Img * H + Ih) * W + Iw) * Ci;
            const T *G = DY + ((Img * OH + Oh) * OW + Ow) * Co;
            for (int64_t Cc = 0; Cc < Ci; ++Cc) {
              const T XV = XP[Cc];
              T *DR = D + Cc * Co;
              for (int64_t O = 0; O < Co; ++O)
                DR[O] += XV * G[O];
            }
          }
        }
    }
  });
}

template <ConvMode Mode> KernelOr createConv(const KernelInfo &I) {
  if (I.Outputs.empty())
    return Status::error(I.Op + " has 1 output, got 0");
  DType T = I.Outputs[0].Type;
  if (T == DType::Float32) {
    auto K = std::make_unique<ConvKernel<float>>(Mode);
    MDRT_RETURN_IF_ERROR(K->init(I));
    return wrap(std::move(K));
  }
  if (T == DType::Float64) {
    auto K = std::make_unique<ConvKernel<double>>(Mode);
    MDRT_RETURN_IF_ERROR(K->init(I));
    return wrap(std::move(K));
  }
  return typeError(I, T);
}

} // namespace

void cpu::registerConvKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "Conv2D", createConv<ConvMode::Forward>);
  R.add(DeviceKind::CPU, "Conv2DBackpropInput",
        createConv<ConvMode::BackwardData>);
  R.add(DeviceKind::CPU, "Conv2DBackpropFilter",
        createConv<ConvMode::BackwardFilter>);
}
