//===- Pool.cpp - Max pooling and its gradient ----------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// MaxPool and MaxPoolGrad on NHWC images; padding is never a window's
// maximum. A maximum starts from the lowest finite value, as oneDNN's and
// TensorFlow's CPU kernels start: a window of NaNs only (a NaN never wins)
// or of -infinity only gives that value, on every path.
//
// float32 runs oneDNN's pooling on NHWC. MaxPoolGrad gets the forward
// input rather than oneDNN's workspace, so it re-runs the forward (training
// mode, into scratch) for the workspace, then the backward: 10x faster than
// the loops here. Both break ties (common after ReLU) as docs/Ops.md says,
// towards the first maximum in row-major window order; the tests check it
// on both paths. oneDNN sends the dy of a window without a number to the
// window's centre, so a gradient whose y has such a window runs the loops.
// float64 and builds without oneDNN run the loops.
//
//===----------------------------------------------------------------------===//

#include "CpuCommon.h"

#include <atomic>
#include <cstring>
#include <limits>

using namespace mdrt;
using namespace mdrt::cpu;

namespace {

/// The shared geometry of MaxPool and MaxPoolGrad.
struct PoolGeometry {
  int64_t N = 0, H = 0, W = 0, C = 0, KH = 1, KW = 1, OH = 0, OW = 0;
  int64_t SH = 1, SW = 1, PT = 0, PL = 0, PB = 0, PR = 0;

  Status init(const KernelInfo &I, const std::vector<int64_t> &X,
              const std::vector<int64_t> &Y) {
    std::vector<int64_t> K = I.Attrs.getInts("ksize");
    if (K.size() != 2)
      return Status::error("'ksize' must be two positive integers, got " +
                           shapeStr(K));
    Window2D G;
    MDRT_RETURN_IF_ERROR(windowGeometry(I, X, K[0], K[1], "VALID", G));
    N = G.N;
    C = G.C;
    H = G.H.In;
    W = G.W.In;
    KH = G.H.K;
    KW = G.W.K;
    OH = G.H.Out;
    OW = G.W.Out;
    SH = G.H.Stride;
    SW = G.W.Stride;
    PT = G.H.PadBefore;
    PB = G.H.PadAfter;
    PL = G.W.PadBefore;
    PR = G.W.PadAfter;
    if (Y != std::vector<int64_t>{N, OH, OW, C})
      return Status::error("pooling " + shapeStr(X) + " gives " +
                           shapeStr({N, OH, OW, C}) + ", got " + shapeStr(Y));
    return Status::ok();
  }
  bool empty() const { return !N || !C || !OH || !OW || !H || !W; }
};

//===----------------------------------------------------------------------===//
// MaxPool
//===----------------------------------------------------------------------===//

template <typename T> class MaxPoolKernel : public Kernel {
public:
  Status init(const KernelInfo &I);
  void run(const ExecContext &C) override;

private:
  PoolGeometry G;
  int Threads = 1;
#ifdef MDRT_HAVE_DNNL
  bool UseDnnl = false;
  dnnl::stream Stream;
  DnnlCall Pool;
  unsigned ArgX = 0, ArgY = 0;
#endif
};

template <typename T> Status MaxPoolKernel<T>::init(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(checkArity(I, 1, 1, 1));
  MDRT_RETURN_IF_ERROR(checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  MDRT_RETURN_IF_ERROR(G.init(I, I.Inputs[0].Shape, I.Outputs[0].Shape));
  Threads = I.NumThreads;
#ifdef MDRT_HAVE_DNNL
  if (std::is_same<T, float>::value && useDnnl() && !G.empty()) {
    using namespace dnnl;
    using tag = memory::format_tag;
    const auto F32 = memory::data_type::f32;
    memory::desc Src({G.N, G.C, G.H, G.W}, F32, tag::nhwc);
    memory::desc Dst({G.N, G.C, G.OH, G.OW}, F32, tag::nhwc);
    MDRT_RETURN_IF_ERROR(dnnlTry("pooling", [&] {
      OmpThreadsScope Scope(Threads);
      pooling_forward::primitive_desc PD(
          pooling_forward::desc(prop_kind::forward_inference,
                                algorithm::pooling_max, Src, Dst, {G.SH, G.SW},
                                {G.KH, G.KW}, {G.PT, G.PL}, {G.PB, G.PR}),
          dnnlAttr(), dnnlEngine());
      Pool.init(pooling_forward(PD), PD.scratchpad_desc());
      ArgX = Pool.arg(DNNL_ARG_SRC, dnnlUnbound(Src));
      ArgY = Pool.arg(DNNL_ARG_DST, dnnlUnbound(Dst));
      Stream = stream(dnnlEngine());
    }));
    UseDnnl = true;
  }
#endif
  return Status::ok();
}

template <typename T> void MaxPoolKernel<T>::run(const ExecContext &Ctx) {
  const T *X = static_cast<const T *>(Ctx.In[0]);
  T *Y = static_cast<T *>(Ctx.Out[0]);
  if (G.empty())
    return;
#ifdef MDRT_HAVE_DNNL
  if (UseDnnl) {
    OmpThreadsScope Scope(Threads);
    Pool.setHandle(ArgX, X);
    Pool.setHandle(ArgY, Y);
    Pool.exec(Stream);
    return;
  }
#endif
  const PoolGeometry P = G;
  const int64_t C = P.C;
  parallelFor(P.N * P.OH,
              std::max<int64_t>(1, GrainCheap / (P.OW * P.KH * P.KW * C)),
              Threads, [&](int64_t B, int64_t E) {
                for (int64_t R = B; R < E; ++R) {
                  int64_t Img = R / P.OH, Oh = R % P.OH;
                  for (int64_t Ow = 0; Ow < P.OW; ++Ow) {
                    T *YP = Y + (R * P.OW + Ow) * C;
                    for (int64_t Cc = 0; Cc < C; ++Cc)
                      YP[Cc] = std::numeric_limits<T>::lowest();
                    for (int64_t Kh = 0; Kh < P.KH; ++Kh) {
                      int64_t Ih = Oh * P.SH - P.PT + Kh;
                      if (Ih < 0 || Ih >= P.H)
                        continue;
                      for (int64_t Kw = 0; Kw < P.KW; ++Kw) {
                        int64_t Iw = Ow * P.SW - P.PL + Kw;
                        if (Iw < 0 || Iw >= P.W)
                          continue;
                        const T *XP = X + ((Img * P.H + Ih) * P.W + Iw) * C;
                        for (int64_t Cc = 0; Cc < C; ++Cc)
                          YP[Cc] = XP[Cc] > YP[Cc] ? XP[Cc] : YP[Cc];
                      }
                    }
                  }
                }
              });
}

//===----------------------------------------------------------------------===//
// MaxPoolGrad
//===----------------------------------------------------------------------===//

/// dx of one image for channels [C0, C1): each window's dy goes to its
/// first maximum. \p Best and \p Arg are scratch of C elements.
template <typename T>
MDRT_CPU_CLONES void maxPoolGradImage(const PoolGeometry P, const T *X,
                                      const T *DY, T *DX, int64_t C0,
                                      int64_t C1, T *Best, int32_t *Arg) {
  // Locals: the compiler then knows the stores below do not change them.
  const int64_t H = P.H, W = P.W, C = P.C, OH = P.OH, OW = P.OW, KH = P.KH,
                KW = P.KW, SH = P.SH, SW = P.SW, PT = P.PT, PL = P.PL;
  for (int64_t Pix = 0; Pix < H * W; ++Pix)
    for (int64_t Cc = C0; Cc < C1; ++Cc)
      DX[Pix * C + Cc] = T(0);
  for (int64_t Oh = 0; Oh < OH; ++Oh)
    for (int64_t Ow = 0; Ow < OW; ++Ow) {
      bool First = true;
      for (int64_t Kh = 0; Kh < KH; ++Kh) {
        int64_t Ih = Oh * SH - PT + Kh;
        if (Ih < 0 || Ih >= H)
          continue;
        for (int64_t Kw = 0; Kw < KW; ++Kw) {
          int64_t Iw = Ow * SW - PL + Kw;
          if (Iw < 0 || Iw >= W)
            continue;
          const int32_t Pix = int32_t(Ih * W + Iw);
          const T *XP = X + Pix * C;
          // From the lowest finite value, as the forward: a NaN never
          // wins, so dy goes to the pixel the forward took (the first one
          // when none is above it).
          if (First) {
            for (int64_t Cc = C0; Cc < C1; ++Cc) {
              Best[Cc] = std::numeric_limits<T>::lowest();
              Arg[Cc] = Pix;
            }
            First = false;
          }
          for (int64_t Cc = C0; Cc < C1; ++Cc) {
            bool Gt = XP[Cc] > Best[Cc];
            Best[Cc] = Gt ? XP[Cc] : Best[Cc];
            Arg[Cc] = Gt ? Pix : Arg[Cc];
          }
        }
      }
      if (First)
        continue; // A window of padding only.
      const T *G = DY + (Oh * OW + Ow) * C;
      for (int64_t Cc = C0; Cc < C1; ++Cc)
        DX[int64_t(Arg[Cc]) * C + Cc] += G[Cc];
    }
}

/// Inputs x, y (unused: the maxima are found again in x), dy.
template <typename T> class MaxPoolGradKernel : public Kernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(checkArity(I, 3, 3, 1));
    MDRT_RETURN_IF_ERROR(checkTypes(I, {0, 1, 2}, {0}, I.Inputs[0].Type));
    MDRT_RETURN_IF_ERROR(G.init(I, I.Inputs[0].Shape, I.Inputs[2].Shape));
    // Pixels are indexed in int32. (Dividing: an empty batch may have
    // dimensions whose product overflows.)
    if (G.H && G.W > INT32_MAX / G.H)
      return Status::error("MaxPoolGrad images of " + std::to_string(G.H) +
                           "x" + std::to_string(G.W) +
                           " pixels are not supported (at most 2^31-1 pixels)");
    if (I.Inputs[1].Shape != I.Inputs[2].Shape ||
        I.Outputs[0].Shape != I.Inputs[0].Shape)
      return Status::error("MaxPoolGrad shapes do not match: input " +
                           I.Inputs[0].str() + ", output " + I.Inputs[1].str() +
                           ", dy " + I.Inputs[2].str() + ", dx " +
                           I.Outputs[0].str());
    // Tasks are (image, channel block) pairs; windows of different images
    // or channels never write the same dx element.
    int64_t Work = G.N * G.H * G.W * G.C;
    Threads = threadsFor(Work, GrainCheap / 2, I.NumThreads);
    CBlocks = G.N >= Threads ? 1 : std::min<int64_t>(G.C, Threads);
    // (The loops' scratch also for oneDNN, which an input with a window
    // of no number falls back to.)
    BestBuf.resize(size_t(Threads) * size_t(G.C));
    ArgBuf.resize(size_t(Threads) * size_t(G.C));
#ifdef MDRT_HAVE_DNNL
    if (std::is_same<T, float>::value && useDnnl() && !G.empty())
      return initDnnl(Threads);
#endif
    return Status::ok();
  }

#ifdef MDRT_HAVE_DNNL
  /// oneDNN's backward needs the forward's workspace (the argmax of each
  /// window, first maximum on ties like the loops), so a run recomputes
  /// the forward into scratch first: together still several times faster
  /// than the loops.
  Status initDnnl(int NumThreads) {
    using namespace dnnl;
    using tag = memory::format_tag;
    const auto F32 = memory::data_type::f32;
    memory::desc Src({G.N, G.C, G.H, G.W}, F32, tag::nhwc);
    memory::desc Dst({G.N, G.C, G.OH, G.OW}, F32, tag::nhwc);
    Status S = dnnlTry("pooling", [&] {
      OmpThreadsScope Scope(NumThreads);
      engine &E = dnnlEngine();
      memory::dims Strides = {G.SH, G.SW}, Kernel = {G.KH, G.KW},
                   PadL = {G.PT, G.PL}, PadR = {G.PB, G.PR};
      pooling_forward::primitive_desc FPD(
          pooling_forward::desc(prop_kind::forward_training,
                                algorithm::pooling_max, Src, Dst, Strides,
                                Kernel, PadL, PadR),
          dnnlAttr(), E);
      pooling_backward::primitive_desc BPD(
          pooling_backward::desc(algorithm::pooling_max, Src, Dst, Strides,
                                 Kernel, PadL, PadR),
          dnnlAttr(), E, FPD);
      memory Workspace(FPD.workspace_desc(), E);
      Fwd.init(pooling_forward(FPD), FPD.scratchpad_desc());
      ArgX = Fwd.arg(DNNL_ARG_SRC, dnnlUnbound(Src));
      Fwd.arg(DNNL_ARG_DST, memory(Dst, E));
      Fwd.arg(DNNL_ARG_WORKSPACE, Workspace);
      Bwd.init(pooling_backward(BPD), BPD.scratchpad_desc());
      ArgDY = Bwd.arg(DNNL_ARG_DIFF_DST, dnnlUnbound(Dst));
      ArgDX = Bwd.arg(DNNL_ARG_DIFF_SRC, dnnlUnbound(Src));
      Bwd.arg(DNNL_ARG_WORKSPACE, Workspace);
      Stream = stream(E);
    });
    MDRT_RETURN_IF_ERROR(S);
    UseDnnl = true;
    return Status::ok();
  }
#endif

  void run(const ExecContext &Ctx) override {
    const T *X = static_cast<const T *>(Ctx.In[0]);
    const T *DY = static_cast<const T *>(Ctx.In[2]);
    T *DX = static_cast<T *>(Ctx.Out[0]);
#ifdef MDRT_HAVE_DNNL
    // oneDNN sends the dy of a window of NaNs or -infinity only to the
    // window's centre, not to its first pixel (docs/Ops.md). Such a window
    // has the lowest finite value as its maximum (the forward's y, a
    // quarter of x's size for 2x2 windows): a y with one runs the loops,
    // which are right for any input.
    if (UseDnnl && !hasLowest(static_cast<const T *>(Ctx.In[1]),
                              G.N * G.OH * G.OW * G.C)) {
      OmpThreadsScope Scope(Threads);
      Fwd.setHandle(ArgX, X);
      Bwd.setHandle(ArgDY, DY);
      Bwd.setHandle(ArgDX, DX);
      Fwd.exec(Stream);
      Bwd.exec(Stream);
      return;
    }
#endif
    const PoolGeometry P0 = G;
    if (!P0.N || !P0.H || !P0.W || !P0.C)
      return;
    const int64_t Tasks = P0.N * CBlocks, NB = CBlocks;
    parallelTeam(Threads, [&](int Id, int Nt) {
      T *Best = BestBuf.data() + size_t(Id) * size_t(P0.C);
      int32_t *Arg = ArgBuf.data() + size_t(Id) * size_t(P0.C);
      const int64_t ImgSize = P0.H * P0.W * P0.C, DYSize = P0.OH * P0.OW * P0.C;
      for (int64_t Task = Tasks * Id / Nt; Task < Tasks * (Id + 1) / Nt;
           ++Task) {
        int64_t Img = Task / NB, Blk = Task % NB;
        maxPoolGradImage(P0, X + Img * ImgSize, DY + Img * DYSize,
                         DX + Img * ImgSize, P0.C * Blk / NB,
                         P0.C * (Blk + 1) / NB, Best, Arg);
      }
    });
  }

private:
  /// Whether one of the \p N values at \p Y is the lowest finite value
  /// or below it (or NaN). Read by every thread, without an early exit, so
  /// that it vectorizes.
  bool hasLowest(const T *Y, int64_t N) const {
    std::atomic<bool> Found{false};
    parallelTeam(Threads, [&](int Id, int Nt) {
      const T Low = std::numeric_limits<T>::lowest();
      bool Any = false;
      for (int64_t I = N * Id / Nt, E = N * (Id + 1) / Nt; I < E; ++I)
        Any |= !(Y[I] > Low);
      if (Any)
        Found.store(true, std::memory_order_relaxed);
    });
    return Found.load(std::memory_order_relaxed);
  }

  PoolGeometry G;
  int Threads = 1;
  int64_t CBlocks = 1;
  /// Per thread: the running maxima and their pixels.
  std::vector<T> BestBuf;
  std::vector<int32_t> ArgBuf;
#ifdef MDRT_HAVE_DNNL
  bool UseDnnl = false;
  dnnl::stream Stream;
  DnnlCall Fwd, Bwd;
  unsigned ArgX = 0, ArgDY = 0, ArgDX = 0;
#endif
};

KernelOr createMaxPool(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("MaxPool takes 1 input, got 0");
  return makeFloatKernel<MaxPoolKernel>(I, I.Inputs[0].Type);
}

KernelOr createMaxPoolGrad(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("MaxPoolGrad takes 3 inputs, got 0");
  return makeFloatKernel<MaxPoolGradKernel>(I, I.Inputs[0].Type);
}

} // namespace

void cpu::registerPoolKernels(KernelRegistry &R) {
  R.add(DeviceKind::CPU, "MaxPool", createMaxPool);
  R.add(DeviceKind::CPU, "MaxPoolGrad", createMaxPoolGrad);
}
