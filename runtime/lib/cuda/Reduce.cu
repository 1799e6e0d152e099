//===- Reduce.cu - Reductions and batch normalization on GPUs -------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Sum, Mean, SumToShape, BiasAddGrad, L2Loss, BatchNorm, BatchNormInference
// and BatchNormGrad. Sums accumulate in double (int64 for integers) like the
// CPU kernels, in an order fixed at set-up (a fixed tree; bands of rows for
// column sums, ColumnSums; a resident grid for L2Loss), so they are
// deterministic (but added in another order than on the CPU). With
// MDRT_CUDA_KERNELS=reference, float Sum, Mean, SumToShape, BiasAddGrad
// and L2Loss run lib/cpu's steps in its order instead, and batch
// normalization's column sums lib/cpu's pieces (ReferenceMath.h).
//
//===----------------------------------------------------------------------===//

#include "BatchNormMath.h"
#include "CudaCommon.h"
#include "ReferenceMath.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace mdrt;
using namespace mdrt::cuda;

namespace {

constexpr int MaxRank = 8;
constexpr int BlockSize = 256;

template <typename T>
using AccType =
    std::conditional_t<std::is_floating_point<T>::value, double, int64_t>;

/// Block-wide sum of \p V (every thread gets it). \p Shared holds BlockSize
/// accumulators.
template <typename A> __device__ A blockSum(A V, A *Shared) {
  Shared[threadIdx.x] = V;
  __syncthreads();
  for (int S = BlockSize / 2; S > 0; S /= 2) {
    if (int(threadIdx.x) < S)
      Shared[threadIdx.x] += Shared[threadIdx.x + S];
    __syncthreads();
  }
  A R = Shared[0];
  __syncthreads();
  return R;
}

/// The kept and the reduced dimensions of a reduction with their input
/// strides (outermost first).
struct ReducePlan {
  int NK = 0, NR = 0;
  int64_t KDims[MaxRank], KStr[MaxRank], RDims[MaxRank], RStr[MaxRank];
  int64_t Out = 1, Count = 1;
};

__device__ inline int64_t offsetOf(int64_t Idx, int N, const int64_t *Dims,
                                   const int64_t *Str) {
  // One dimension (the usual case after merging): Idx is below its size, so
  // no 64-bit division.
  if (N == 1)
    return Idx * Str[0];
  int64_t Off = 0;
  for (int D = N - 1; D >= 0; --D) {
    Off += (Idx % Dims[D]) * Str[D];
    Idx /= Dims[D];
  }
  return Off;
}

template <typename T>
__device__ inline T finishSum(AccType<T> V, bool Mean, int64_t Count) {
  if constexpr (std::is_floating_point<T>::value)
    return Mean ? T(V / double(Count)) : T(V);
  else
    return T(Mean && Count ? V / Count : V);
}

/// One block per output element.
template <typename T>
__global__ void reduceKernel(ReducePlan P, const T *X, T *Y, bool Mean) {
  using A = AccType<T>;
  __shared__ A Shared[BlockSize];
  for (int64_t O = blockIdx.x; O < P.Out; O += gridDim.x) {
    int64_t Base = offsetOf(O, P.NK, P.KDims, P.KStr);
    A Acc = 0;
    for (int64_t R = threadIdx.x; R < P.Count; R += BlockSize)
      Acc += A(X[Base + offsetOf(R, P.NR, P.RDims, P.RStr)]);
    Acc = blockSum(Acc, Shared);
    if (threadIdx.x == 0)
      Y[O] = finishSum<T>(Acc, Mean, P.Count);
  }
}

/// One thread per output element (few elements summed into each).
template <typename T>
__global__ void reduceSmallKernel(ReducePlan P, const T *X, T *Y, bool Mean) {
  using A = AccType<T>;
  for (int64_t O = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; O < P.Out;
       O += int64_t(blockDim.x) * gridDim.x) {
    int64_t Base = offsetOf(O, P.NK, P.KDims, P.KStr);
    A Acc = 0;
    for (int64_t R = 0; R < P.Count; ++R)
      Acc += A(X[Base + offsetOf(R, P.NR, P.RDims, P.RStr)]);
    Y[O] = finishSum<T>(Acc, Mean, P.Count);
  }
}

/// Column sums of K values per element of a row-major [Rows, Cols] matrix
/// (BiasAddGrad, the sum over the batch of a broadcast's gradient, batch
/// normalization's statistics), first pass: block (X, Y), of
/// 32 x ColumnBlockY threads, sums the rows of band Y of columns
/// X * 32 .. X * 32 + 31 into K doubles per column; \p Load(r, c, v) gives
/// element (r, c)'s values. Consecutive threads read consecutive columns of
/// a row, so the reads are coalesced; the bands spread the rows over the
/// GPU. Partial is [K][Bands][Cols].
constexpr int ColumnBlockY = 16;
template <int K, typename LoadFn>
__global__ void columnPartialKernel(LoadFn Load, double *Partial, int64_t Rows,
                                    int64_t Cols, int64_t Band, int64_t Bands) {
  __shared__ double S[K][ColumnBlockY][33];
  int64_t C = int64_t(blockIdx.x) * 32 + threadIdx.x;
  int64_t R0 = int64_t(blockIdx.y) * Band;
  int64_t R1 = R0 + Band < Rows ? R0 + Band : Rows;
  double Acc[K] = {};
  if (C < Cols)
    for (int64_t R = R0 + threadIdx.y; R < R1; R += ColumnBlockY) {
      double V[K];
      Load(R, C, V);
      for (int J = 0; J < K; ++J)
        Acc[J] += V[J];
    }
  for (int J = 0; J < K; ++J)
    S[J][threadIdx.y][threadIdx.x] = Acc[J];
  __syncthreads();
  if (threadIdx.y == 0 && C < Cols)
    for (int J = 0; J < K; ++J) {
      double Sum = 0;
      for (int Y = 0; Y < ColumnBlockY; ++Y)
        Sum += S[J][Y][threadIdx.x];
      Partial[(J * Bands + int64_t(blockIdx.y)) * Cols + C] = Sum;
    }
}

/// Second pass: one warp per column adds its band sums of each value, lane
/// L the bands L, L + 32, ..., then the lanes in a fixed tree (the result
/// does not depend on the launch, so eager runs and graph replays agree),
/// and lane 0 calls \p Done(c, sums).
template <int K, typename DoneFn>
__global__ void columnFinishKernel(const double *Partial, DoneFn Done,
                                   int64_t Bands, int64_t Cols) {
  const int Lane = threadIdx.x % 32;
  for (int64_t C = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       C < Cols; C += int64_t(gridDim.x) * blockDim.x / 32) {
    double Sums[K];
    for (int J = 0; J < K; ++J) {
      double Sum = 0;
      for (int64_t B = Lane; B < Bands; B += 32)
        Sum += Partial[(J * Bands + B) * Cols + C];
      for (int S = 16; S > 0; S /= 2)
        Sum += __shfl_down_sync(0xffffffffu, Sum, S);
      Sums[J] = Sum;
    }
    if (Lane == 0)
      Done(C, Sums);
  }
}

/// Reference column sums (MDRT_CUDA_KERNELS=reference): piece \p Piece of
/// column \p Col's K sums into Partial[(Piece * K + j) * Cols + Col], one
/// thread each (ReferenceMath.h's refColumnPiece).
template <int K, typename LoadFn>
__global__ void refColumnPieceKernel(LoadFn Load, double *Partial, int64_t Rows,
                                     int64_t Cols, int64_t Pieces) {
  GRID_STRIDE(I, Pieces * Cols) {
    const int64_t Piece = I / Cols, Col = I % Cols;
    double Sums[K];
    refColumnPiece<K>(Load, Rows, Pieces, Piece, Col, Sums);
    for (int J = 0; J < K; ++J)
      Partial[(Piece * K + J) * Cols + Col] = Sums[J];
  }
}

/// A column's sums from its pieces', added in piece order, then Done.
template <int K, typename DoneFn>
__global__ void refColumnFinishKernel(const double *Partial, DoneFn Done,
                                      int64_t Pieces, int64_t Cols) {
  GRID_STRIDE(Col, Cols) {
    double Sums[K];
    refColumnAddPieces<K>(Partial, Pieces, Cols, Col, Sums);
    Done(Col, Sums);
  }
}

/// The two passes of column sums of K values over a [Rows, Cols] matrix,
/// with their band split (fixed at set-up) and partial sums; or, with
/// \p RefPieces (the CPU's BatchNormDims::Pieces, for the reference
/// kernels), the CPU's pieces and order.
template <int K> class ColumnSums {
public:
  Status init(int64_t R, int64_t C, int64_t RefPieces = 0) {
    Rows = R;
    Cols = C;
    if (Rows <= 0 || Cols <= 0)
      return Status::ok(); // Nothing to sum: run() launches nothing.
    if (RefPieces > 0) {
      Pieces = RefPieces;
      return Partial.allocate(size_t(K * Pieces * Cols) * sizeof(double));
    }
    // About 8 blocks of 512 threads per multiprocessor of an H100 in all,
    // at most 128 bands (a warp of the second pass adds a column's bands,
    // 4 per lane), at least 4 rows per thread of a band.
    int64_t ColBlocks = (Cols + 31) / 32;
    int64_t Bands = std::max<int64_t>(1, 1024 / ColBlocks);
    Bands = std::min<int64_t>(
        {Bands, 128, (Rows + 4 * ColumnBlockY - 1) / (4 * ColumnBlockY)});
    Bands = std::max<int64_t>(Bands, 1);
    Band = (Rows + Bands - 1) / Bands;
    NumBands = (Rows + Band - 1) / Band;
    return Partial.allocate(size_t(K * NumBands * Cols) * sizeof(double));
  }
  template <typename LoadFn, typename DoneFn>
  void run(cudaStream_t S, LoadFn Load, DoneFn Done) {
    double *Part = static_cast<double *>(Partial.get());
    if (Pieces) {
      refColumnPieceKernel<K><<<gridFor(Pieces * Cols, 64), 64, 0, S>>>(
          Load, Part, Rows, Cols, Pieces);
      refColumnFinishKernel<K>
          <<<gridFor(Cols, 64), 64, 0, S>>>(Part, Done, Pieces, Cols);
      return;
    }
    if (!NumBands)
      return;
    dim3 Grid(unsigned((Cols + 31) / 32), unsigned(NumBands));
    columnPartialKernel<K><<<Grid, dim3(32, ColumnBlockY), 0, S>>>(
        Load, Part, Rows, Cols, Band, NumBands);
    columnFinishKernel<K>
        <<<gridFor(Cols * 32), 256, 0, S>>>(Part, Done, NumBands, Cols);
  }

private:
  int64_t Rows = 0, Cols = 0, Band = 0, NumBands = 0;
  /// The reference kernels' pieces; 0 for the fast kernels.
  int64_t Pieces = 0;
  DeviceBuffer Partial;
};

/// y[c] = the sum, or the mean over Count.
template <typename T> struct StoreSum {
  T *Y;
  bool Mean;
  int64_t Count;
  __device__ void operator()(int64_t C, const double (&S)[1]) const {
    Y[C] = finishSum<T>(S[0], Mean, Count);
  }
};

template <typename T> class ReduceKernel : public CudaKernel {
public:
  ReduceKernel(const ReducePlan &P, bool Mean) : P(P), Mean(Mean) {}

  /// Chooses the column-sum kernels for a float reduction over the leading
  /// dimensions of a contiguous tensor (one kept and one reduced dimension
  /// after merging, the kept one innermost) and allocates their partial
  /// sums; the general kernels otherwise.
  Status init() {
    Column = std::is_floating_point<T>::value && P.Out && P.Count >= 64 &&
             P.NK == 1 && P.NR == 1 && P.KStr[0] == 1 &&
             P.RStr[0] == P.KDims[0];
    if (!Column)
      return Status::ok();
    return Sums.init(P.RDims[0], P.KDims[0]);
  }

  void run(const ExecContext &C) override {
    if (!P.Out)
      return;
    const T *X = static_cast<const T *>(C.In[0]);
    T *Y = static_cast<T *>(C.Out[0]);
    if (Column) {
      Sums.run(Ctx->Stream, LoadElement<T>{X, P.KDims[0]},
               StoreSum<T>{Y, Mean, P.Count});
      Ctx->checkLaunch("a column sum");
      return;
    }
    if (P.Count < 64)
      reduceSmallKernel<T>
          <<<gridFor(P.Out), 256, 0, Ctx->Stream>>>(P, X, Y, Mean);
    else
      reduceKernel<T><<<unsigned(std::min<int64_t>(P.Out, 65535)), BlockSize, 0,
                        Ctx->Stream>>>(P, X, Y, Mean);
    Ctx->checkLaunch("a reduction");
  }

private:
  ReducePlan P;
  bool Mean;
  bool Column = false;
  ColumnSums<1> Sums;
};

template <typename T>
KernelOr makeReduceKernel(const ReducePlan &P, bool Mean) {
  auto K = std::make_unique<ReduceKernel<T>>(P, Mean);
  MDRT_RETURN_IF_ERROR(K->init());
  return finish(std::move(K));
}

//===----------------------------------------------------------------------===//
// Reference reductions (MDRT_CUDA_KERNELS=reference): lib/cpu's steps and
// order of additions (planReduction, ReferenceMath.h)
//===----------------------------------------------------------------------===//

/// Element I of a step's sums in [A][K], or with pieces of its pieces' sums
/// in [Pieces][A][K] (lib/cpu's Partials): one thread each.
template <typename S>
__global__ void refStepKernel(cpu::ReduceStep St, const S *Src, double *Out) {
  GRID_STRIDE(I, St.Pieces * St.A * St.K) {
    const int64_t Kk = I % St.K, It = I / St.K;
    int64_t R0, R1;
    refPieceRows(St, It / St.A, R0, R1);
    Out[I] = refRowSum<double>(St, Src, It % St.A, R0, R1, Kk);
  }
}

/// A step's sums from its pieces' sums, added in piece order.
__global__ void refAddPiecesKernel(cpu::ReduceStep St, const double *Partial,
                                   double *Sums) {
  GRID_STRIDE(J, St.A * St.K) { Sums[J] = refAddPieces(St, Partial, J); }
}

template <typename T>
__global__ void refFinishKernel(const double *Sums, T *Y, int64_t N,
                                int64_t Divisor) {
  GRID_STRIDE(J, N) { Y[J] = refFinishSum<T>(Sums[J], 1.0, Divisor); }
}

/// A float sum (or mean) as a chain of planReduction's steps, each read
/// from the previous one's double sums.
template <typename T> class RefReduceKernel : public CudaKernel {
public:
  RefReduceKernel(std::vector<cpu::ReduceStep> Steps, int64_t Out,
                  int64_t Divisor)
      : Steps(std::move(Steps)), Out(Out), Divisor(Divisor) {}

  Status init() {
    size_t Sums = 0, Parts = 0;
    for (const cpu::ReduceStep &St : Steps) {
      Sums = std::max(Sums, size_t(St.A * St.K));
      if (St.Pieces > 1)
        Parts = std::max(Parts, size_t(St.Pieces * St.A * St.K));
    }
    for (int B = 0; B < (Steps.size() > 1 ? 2 : 1); ++B)
      MDRT_RETURN_IF_ERROR(Buf[B].allocate(Sums * sizeof(double)));
    if (Parts)
      MDRT_RETURN_IF_ERROR(Partial.allocate(Parts * sizeof(double)));
    return Status::ok();
  }

  void run(const ExecContext &C) override {
    cudaStream_t S = Ctx->Stream;
    double *Part = static_cast<double *>(Partial.get());
    const double *Prev = nullptr;
    for (size_t I = 0; I < Steps.size(); ++I) {
      const cpu::ReduceStep &St = Steps[I];
      double *Sums = static_cast<double *>(Buf[I % 2].get());
      double *Dst = St.Pieces > 1 ? Part : Sums;
      const int64_t N = St.Pieces * St.A * St.K;
      if (I == 0)
        refStepKernel<T><<<gridFor(N), 256, 0, S>>>(
            St, static_cast<const T *>(C.In[0]), Dst);
      else
        refStepKernel<double><<<gridFor(N), 256, 0, S>>>(St, Prev, Dst);
      if (St.Pieces > 1)
        refAddPiecesKernel<<<gridFor(St.A * St.K), 256, 0, S>>>(St, Part, Sums);
      Prev = Sums;
    }
    refFinishKernel<T><<<gridFor(Out), 256, 0, S>>>(
        Prev, static_cast<T *>(C.Out[0]), Out, Divisor);
    Ctx->checkLaunch("a reduction");
  }

private:
  std::vector<cpu::ReduceStep> Steps;
  int64_t Out, Divisor;
  DeviceBuffer Buf[2], Partial;
};

template <typename T>
KernelOr makeRefReduce(std::vector<cpu::ReduceStep> Steps, int64_t Out,
                       int64_t Divisor) {
  auto K = std::make_unique<RefReduceKernel<T>>(std::move(Steps), Out, Divisor);
  MDRT_RETURN_IF_ERROR(K->init());
  return finish(std::move(K));
}

/// Plans the sum of a tensor of \p Shape over the dimensions flagged in
/// \p Reduced, merging adjacent dimensions of the same kind.
Status planReduce(const std::vector<int64_t> &Shape,
                  const std::vector<bool> &Reduced, ReducePlan &P) {
  std::vector<int64_t> KD, KS, RD, RS;
  int64_t Stride = 1;
  // Innermost first.
  int LastKind = -1;
  for (size_t K = Shape.size(); K-- > 0;) {
    int64_t D = Shape[K];
    int Kind = Reduced[K] ? 1 : 0;
    if (D != 1) {
      auto &Dims = Kind ? RD : KD;
      auto &Str = Kind ? RS : KS;
      if (LastKind == Kind && !Dims.empty() &&
          Str.back() * Dims.back() == Stride)
        Dims.back() *= D;
      else {
        Dims.push_back(D);
        Str.push_back(Stride);
      }
      LastKind = Kind;
    }
    Stride *= D;
  }
  if (KD.size() > size_t(MaxRank) || RD.size() > size_t(MaxRank))
    return Status::error("reductions of this many dimensions are not "
                         "supported on GPUs");
  P.NK = int(KD.size());
  P.NR = int(RD.size());
  P.Out = 1;
  P.Count = 1;
  for (int D = 0; D < P.NK; ++D) {
    P.KDims[D] = KD[size_t(P.NK - 1 - D)];
    P.KStr[D] = KS[size_t(P.NK - 1 - D)];
    P.Out *= P.KDims[D];
  }
  for (int D = 0; D < P.NR; ++D) {
    P.RDims[D] = RD[size_t(P.NR - 1 - D)];
    P.RStr[D] = RS[size_t(P.NR - 1 - D)];
    P.Count *= P.RDims[D];
  }
  // A zero-sized kept or reduced dimension.
  for (int64_t D : Shape)
    if (D == 0) {
      bool AnyKeptZero = false;
      for (size_t K = 0; K < Shape.size(); ++K)
        AnyKeptZero |= Shape[K] == 0 && !Reduced[K];
      if (AnyKeptZero)
        P.Out = 0;
      else
        P.Count = 0;
      break;
    }
  return Status::ok();
}

KernelOr makeReduce(const KernelInfo &I, const std::vector<int64_t> &Shape,
                    const std::vector<bool> &Reduced, bool Mean,
                    bool FloatOnly) {
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  int64_t Kept = 1;
  for (size_t K = 0; K < Shape.size(); ++K)
    if (!Reduced[K])
      Kept *= Shape[K];
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[0], Kept, "output"));
  // The reference kernels where there is something to add (an empty mean
  // is NaN, and no step leaves a copy: the default kernels' results).
  std::vector<cpu::ReduceStep> Steps;
  if (isFloatType(I.Inputs[0].Type) && referenceKernels())
    Steps = cpu::planReduction(Shape, Reduced);
  if (!Steps.empty()) {
    int64_t Count = 1;
    for (size_t K = 0; K < Shape.size(); ++K)
      if (Reduced[K])
        Count *= Shape[K];
    const int64_t Divisor = Mean ? Count : 0;
    if (I.Inputs[0].Type == DType::Float32)
      return makeRefReduce<float>(std::move(Steps), Kept, Divisor);
    return makeRefReduce<double>(std::move(Steps), Kept, Divisor);
  }
  ReducePlan P;
  MDRT_RETURN_IF_ERROR(planReduce(Shape, Reduced, P));
  switch (I.Inputs[0].Type) {
  case DType::Float32:
    return makeReduceKernel<float>(P, Mean);
  case DType::Float64:
    return makeReduceKernel<double>(P, Mean);
  case DType::Int32:
    if (!FloatOnly)
      return makeReduceKernel<int32_t>(P, Mean);
    break;
  case DType::Int64:
    if (!FloatOnly)
      return makeReduceKernel<int64_t>(P, Mean);
    break;
  default:
    break;
  }
  return typeError(I, I.Inputs[0].Type);
}

template <bool IsMean> KernelOr createSumOrMean(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  std::vector<bool> Reduced;
  MDRT_RETURN_IF_ERROR(cpu::reductionAxes(I.Attrs.getInts("axes"),
                                          I.Inputs[0].Shape.size(), Reduced));
  return makeReduce(I, I.Inputs[0].Shape, Reduced, IsMean, false);
}

KernelOr createSumToShape(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  const std::vector<int64_t> &X = I.Inputs[0].Shape;
  const std::vector<int64_t> &Target = I.Outputs[0].Shape;
  if (I.Attrs.has("shape") && I.Attrs.getInts("shape") != Target)
    return Status::error("output " + I.Outputs[0].str() +
                         " does not have the 'shape' attribute's shape " +
                         cpu::shapeStr(I.Attrs.getInts("shape")));
  if (Target.size() > X.size())
    return Status::error("cannot sum " + cpu::shapeStr(X) + " down to " +
                         cpu::shapeStr(Target));
  std::vector<bool> Reduced(X.size(), false);
  size_t Off = X.size() - Target.size();
  for (size_t K = 0; K < X.size(); ++K) {
    if (K < Off || (Target[K - Off] == 1 && X[K] != 1)) {
      Reduced[K] = true;
      continue;
    }
    if (Target[K - Off] != X[K])
      return Status::error("cannot sum " + cpu::shapeStr(X) + " down to " +
                           cpu::shapeStr(Target));
  }
  return makeReduce(I, X, Reduced, false, false);
}

KernelOr createBiasAddGrad(const KernelInfo &I) {
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  const std::vector<int64_t> &X = I.Inputs[0].Shape;
  if (X.empty())
    return Status::error("BiasAddGrad input must have rank >= 1, got " +
                         I.Inputs[0].str());
  std::vector<bool> Reduced(X.size(), true);
  Reduced.back() = false;
  return makeReduce(I, X, Reduced, false, true);
}

//===----------------------------------------------------------------------===//
// L2Loss
//===----------------------------------------------------------------------===//

/// Sum of squares, first pass: block B adds the squares of its grid-stride
/// share in double, in a fixed tree, into Partial[B].
template <typename T>
__global__ void l2PartialKernel(const T *X, double *Partial, int64_t N) {
  __shared__ double Shared[BlockSize];
  double Acc = 0;
  GRID_STRIDE(I, N) {
    double V = double(X[I]);
    Acc += V * V;
  }
  Acc = blockSum(Acc, Shared);
  if (threadIdx.x == 0)
    Partial[blockIdx.x] = Acc;
}

/// Second pass: one block adds the first pass's sums in a fixed order.
template <typename T>
__global__ void l2FinishKernel(const double *Partial, int Blocks, T *Y) {
  __shared__ double Shared[BlockSize];
  double Acc = 0;
  for (int I = threadIdx.x; I < Blocks; I += BlockSize)
    Acc += Partial[I];
  Acc = blockSum(Acc, Shared);
  if (threadIdx.x == 0)
    *Y = T(Acc / 2);
}

/// sum(x^2) / 2 over up to MaxBlocks blocks (a resident grid; the split is
/// fixed at set-up, so the sum is the same every step).
/// The reference L2Loss (MDRT_CUDA_KERNELS=reference): lib/cpu's pieces,
/// one thread each, then added in order by one thread.
template <typename T>
__global__ void refL2PiecesKernel(const T *X, double *Partial, int64_t N,
                                  int64_t Pieces) {
  GRID_STRIDE(P, Pieces) {
    Partial[P] = refSumSquares(X, N * P / Pieces, N * (P + 1) / Pieces);
  }
}
template <typename T>
__global__ void refL2FinishKernel(const double *Partial, int64_t Pieces, T *Y) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double Sum = Partial[0];
    for (int64_t P = 1; P < Pieces; ++P)
      Sum += Partial[P];
    *Y = T(Sum / 2);
  }
}

template <typename T> class L2LossKernel : public CudaKernel {
public:
  explicit L2LossKernel(int64_t N) : N(N) {}
  Status init() {
    if (referenceKernels()) {
      RefPieces = N ? cpu::reductionPieces(N, N) : 1;
      return Partial.allocate(size_t(RefPieces) * sizeof(double));
    }
    Blocks =
        int(std::min<int64_t>(residentGridFor(*Ctx, N, BlockSize), MaxBlocks));
    return Partial.allocate(size_t(Blocks) * sizeof(double));
  }
  void run(const ExecContext &C) override {
    double *P = static_cast<double *>(Partial.get());
    if (RefPieces) {
      refL2PiecesKernel<T><<<gridFor(RefPieces), 64, 0, Ctx->Stream>>>(
          static_cast<const T *>(C.In[0]), P, N, RefPieces);
      refL2FinishKernel<T>
          <<<1, 32, 0, Ctx->Stream>>>(P, RefPieces, static_cast<T *>(C.Out[0]));
      Ctx->checkLaunch("L2Loss");
      return;
    }
    l2PartialKernel<T><<<unsigned(Blocks), BlockSize, 0, Ctx->Stream>>>(
        static_cast<const T *>(C.In[0]), P, N);
    l2FinishKernel<T><<<1, BlockSize, 0, Ctx->Stream>>>(
        P, Blocks, static_cast<T *>(C.Out[0]));
    Ctx->checkLaunch("L2Loss");
  }

private:
  static constexpr int64_t MaxBlocks = 1024;
  int64_t N;
  int Blocks = 1;
  /// The reference kernels' pieces; 0 for the fast kernels.
  int64_t RefPieces = 0;
  DeviceBuffer Partial;
};

template <typename T> KernelOr makeL2Loss(int64_t N) {
  auto K = std::make_unique<L2LossKernel<T>>(N);
  MDRT_RETURN_IF_ERROR(K->bind());
  MDRT_RETURN_IF_ERROR(K->init());
  return std::unique_ptr<Kernel>(std::move(K));
}

KernelOr createL2Loss(const KernelInfo &I) {
  if (I.Inputs.empty())
    return Status::error("L2Loss takes 1 input, got 0");
  MDRT_RETURN_IF_ERROR(cpu::checkArity(I, 1, 1, 1));
  MDRT_RETURN_IF_ERROR(cpu::checkTypes(I, {0}, {0}, I.Inputs[0].Type));
  MDRT_RETURN_IF_ERROR(cpu::checkElements(I, I.Outputs[0], 1, "output"));
  int64_t N = I.Inputs[0].numElements();
  if (I.Inputs[0].Type == DType::Float32)
    return makeL2Loss<float>(N);
  if (I.Inputs[0].Type == DType::Float64)
    return makeL2Loss<double>(N);
  return typeError(I, I.Inputs[0].Type);
}

//===----------------------------------------------------------------------===//
// Batch normalization (x viewed as [M, C])
//===----------------------------------------------------------------------===//

/// y = (x - mean) * factor + beta; with \p Var, the factor is computed
/// here from gamma and the variance (BatchNormInference).
template <typename T>
__global__ void bnNormalizeKernel(const T *X, T *Y, const T *Mean,
                                  const T *Factor, const T *Beta,
                                  const T *Gamma, const T *Var, double Eps,
                                  int64_t N, int64_t C) {
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < N;
       I += int64_t(blockDim.x) * gridDim.x) {
    Y[I] = bnNormalizeAt(X, Mean, Factor, Beta, Gamma, Var, Eps, I, I % C);
  }
}

template <typename T> __global__ void bnNanKernel(T *Mean, T *Var, int64_t C) {
  for (int64_t J = threadIdx.x; J < C; J += blockDim.x)
    Mean[J] = Var[J] = T(__longlong_as_double(0x7ff8000000000000ll));
}

using cpu::BatchNormDims;
using cpu::BatchNormOp;

/// Inputs x, beta, gamma (with scale); outputs y, mean, variance.
template <typename T> class BatchNormKernel : public CudaKernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(cpu::batchNormDims(I, BatchNormOp::Train, S));
    MDRT_RETURN_IF_ERROR(Scratch.allocate(size_t(2 * S.C) * sizeof(T)));
    MDRT_RETURN_IF_ERROR(MeanD.allocate(size_t(S.C) * sizeof(double)));
    return Sums.init(S.M, S.C, referenceKernels() ? S.Pieces : 0);
  }
  void run(const ExecContext &X) override {
    const int64_t M = S.M, C = S.C;
    if (!C)
      return;
    T *Mean = static_cast<T *>(X.Out[1]), *Var = static_cast<T *>(X.Out[2]);
    if (!M) {
      bnNanKernel<T><<<1, 256, 0, Ctx->Stream>>>(Mean, Var, C);
      Ctx->checkLaunch("BatchNorm");
      return;
    }
    T *Factor = static_cast<T *>(Scratch.get()), *MeanT = Factor + C;
    const T *Gamma = S.Scale ? static_cast<const T *>(X.In[2]) : nullptr;
    const T *In = static_cast<const T *>(X.In[0]);
    double *MD = static_cast<double *>(MeanD.get());
    Sums.run(Ctx->Stream, LoadElement<T>{In, C}, StoreMean{MD, M});
    Sums.run(Ctx->Stream, LoadSquaredDeviation<T>{In, MD, C},
             StoreBatchStats<T>{MD, Gamma, Mean, Var, Factor, MeanT, M, S.Eps});
    bnNormalizeKernel<T><<<gridFor(M * C), 256, 0, Ctx->Stream>>>(
        static_cast<const T *>(X.In[0]), static_cast<T *>(X.Out[0]), MeanT,
        Factor, static_cast<const T *>(X.In[1]), nullptr, nullptr, S.Eps, M * C,
        C);
    Ctx->checkLaunch("BatchNorm");
  }

private:
  BatchNormDims S;
  DeviceBuffer Scratch, MeanD;
  ColumnSums<1> Sums;
};

/// Inputs x, beta, gamma (with scale), mean, variance.
template <typename T> class BatchNormInferenceKernel : public CudaKernel {
public:
  Status init(const KernelInfo &I) {
    return cpu::batchNormDims(I, BatchNormOp::Inference, S);
  }
  void run(const ExecContext &X) override {
    if (!S.C || !S.M)
      return;
    unsigned K = S.Scale ? 3 : 2;
    bnNormalizeKernel<T><<<gridFor(S.M * S.C), 256, 0, Ctx->Stream>>>(
        static_cast<const T *>(X.In[0]), static_cast<T *>(X.Out[0]),
        static_cast<const T *>(X.In[K]), nullptr,
        static_cast<const T *>(X.In[1]),
        S.Scale ? static_cast<const T *>(X.In[2]) : nullptr,
        static_cast<const T *>(X.In[K + 1]), S.Eps, S.M * S.C, S.C);
    Ctx->checkLaunch("BatchNormInference");
  }

private:
  BatchNormDims S;
};

/// 1 / sqrt(var + eps) per column, in double.
template <typename T>
__global__ void bnInvStdKernel(const T *Var, double *Inv, int64_t C,
                               double Eps) {
  GRID_STRIDE(J, C) { Inv[J] = bnInvStd(Var[J], Eps); }
}

template <typename T>
__global__ void bnGradKernel(const T *DY, const T *X, const T *Mean, const T *A,
                             const T *B, const T *CC, T *DX, int64_t N,
                             int64_t C) {
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < N;
       I += int64_t(blockDim.x) * gridDim.x) {
    DX[I] = bnGradAt(DY, X, Mean, A, B, CC, I, I % C);
  }
}

/// Inputs dy, x, mean, variance, gamma (with scale); outputs dx, dbeta,
/// dgamma.
template <typename T> class BatchNormGradKernel : public CudaKernel {
public:
  Status init(const KernelInfo &I) {
    MDRT_RETURN_IF_ERROR(cpu::batchNormDims(I, BatchNormOp::Grad, S));
    MDRT_RETURN_IF_ERROR(Scratch.allocate(size_t(3 * S.C) * sizeof(T)));
    MDRT_RETURN_IF_ERROR(Inv.allocate(size_t(S.C) * sizeof(double)));
    return Sums.init(S.M, S.C, referenceKernels() ? S.Pieces : 0);
  }
  void run(const ExecContext &X) override {
    const int64_t M = S.M, C = S.C;
    if (!C)
      return;
    const T *DY = static_cast<const T *>(X.In[0]);
    const T *XX = static_cast<const T *>(X.In[1]);
    const T *Mean = static_cast<const T *>(X.In[2]);
    T *DBeta = static_cast<T *>(X.Out[1]), *DGamma = static_cast<T *>(X.Out[2]);
    if (!M) {
      // No rows: the sums are 0 and dx is empty.
      cudaError_t E =
          cudaMemsetAsync(DBeta, 0, size_t(C) * sizeof(T), Ctx->Stream);
      if (E == cudaSuccess)
        E = cudaMemsetAsync(DGamma, 0, size_t(C) * sizeof(T), Ctx->Stream);
      if (E != cudaSuccess)
        Ctx->fail(cudaStatus(E, "cudaMemsetAsync"));
      return;
    }
    T *FA = static_cast<T *>(Scratch.get()), *FB = FA + C, *FC = FB + C;
    double *InvD = static_cast<double *>(Inv.get());
    bnInvStdKernel<T><<<gridFor(C), 256, 0, Ctx->Stream>>>(
        static_cast<const T *>(X.In[3]), InvD, C, S.Eps);
    Sums.run(Ctx->Stream, LoadBatchGrad<T>{DY, XX, Mean, InvD, C},
             StoreBatchGrad<T>{
                 InvD, S.Scale ? static_cast<const T *>(X.In[4]) : nullptr,
                 DBeta, DGamma, FA, FB, FC, M});
    bnGradKernel<T><<<gridFor(M * C), 256, 0, Ctx->Stream>>>(
        DY, XX, Mean, FA, FB, FC, static_cast<T *>(X.Out[0]), M * C, C);
    Ctx->checkLaunch("BatchNormGrad");
  }

private:
  BatchNormDims S;
  DeviceBuffer Scratch, Inv;
  ColumnSums<2> Sums;
};

template <template <typename> class KT>
KernelOr makeFloat(const KernelInfo &I, const char *Takes) {
  if (I.Inputs.empty())
    return Status::error(I.Op + " takes " + Takes + " inputs, got 0");
  DType T = I.Inputs[0].Type;
  if (T == DType::Float32) {
    auto K = std::make_unique<KT<float>>();
    MDRT_RETURN_IF_ERROR(K->init(I));
    return finish(std::move(K));
  }
  if (T == DType::Float64) {
    auto K = std::make_unique<KT<double>>();
    MDRT_RETURN_IF_ERROR(K->init(I));
    return finish(std::move(K));
  }
  return typeError(I, T);
}

KernelOr createBatchNorm(const KernelInfo &I) {
  return makeFloat<BatchNormKernel>(I, "2 or 3");
}
KernelOr createBatchNormInference(const KernelInfo &I) {
  return makeFloat<BatchNormInferenceKernel>(I, "4 or 5");
}
KernelOr createBatchNormGrad(const KernelInfo &I) {
  return makeFloat<BatchNormGradKernel>(I, "4 or 5");
}

} // namespace

void cuda::registerReduceKernels(KernelRegistry &R) {
  const DeviceKind GPU = DeviceKind::GPU;
  R.add(GPU, "Sum", createSumOrMean<false>);
  R.add(GPU, "Mean", createSumOrMean<true>);
  R.add(GPU, "SumToShape", createSumToShape);
  R.add(GPU, "BiasAddGrad", createBiasAddGrad);
  R.add(GPU, "L2Loss", createL2Loss);
  R.add(GPU, "BatchNorm", createBatchNorm);
  R.add(GPU, "BatchNormInference", createBatchNormInference);
  R.add(GPU, "BatchNormGrad", createBatchNormGrad);
}
