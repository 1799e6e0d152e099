//===- Data.h - Datasets, IDX files and batch iteration ---------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The input pipeline of the runtime:
//
//  - IDX files (the format of MNIST and Fashion-MNIST), gzipped or raw, are
//    read into IdxArrays;
//  - a Dataset is a set of named features (one IdxArray each, all with the
//    same number of examples), loaded from a directory by naming convention,
//    from explicit files, or generated (synthetic data for benchmarks);
//  - a FeatureRequest says what the plan wants for one input (feature name,
//    element type, per-example shape); binding checks the data fits it;
//  - a BatchIterator produces global batches for a list of requests, with
//    per-epoch shuffling that is a pure function of (seed, epoch), an exact
//    position for checkpoint resume and a background prefetch thread.
//
// docs/Data.md describes the conventions.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_DATA_H
#define MDRT_DATA_H

#include "mdrt/Status.h"
#include "mdrt/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mdrt {

//===----------------------------------------------------------------------===//
// IDX files
//===----------------------------------------------------------------------===//

/// Element types of IDX files; the values are the type byte of the magic.
enum class IdxType : uint8_t {
  UInt8 = 0x08,
  Int8 = 0x09,
  Int16 = 0x0B,
  Int32 = 0x0C,
  Float32 = 0x0D,
  Float64 = 0x0E,
};

/// "ubyte", "sbyte", "int16", "int32", "float32", "float64".
const char *idxTypeName(IdxType T);
/// Bytes per element.
size_t idxTypeSize(IdxType T);
/// True for the six type bytes the format defines.
bool isValidIdxType(uint8_t Byte);

/// An IDX array in memory. Elements are stored in host byte order (the file
/// is big-endian), row-major.
struct IdxArray {
  IdxType Type = IdxType::UInt8;
  std::vector<uint32_t> Dims;
  std::vector<uint8_t> Data;

  int64_t numElements() const;
  size_t bytes() const { return size_t(numElements()) * idxTypeSize(Type); }
  /// Typed view of the data; T must match Type.
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(Data.data());
  }
  template <typename T> T *as() { return reinterpret_cast<T *>(Data.data()); }
  /// `ubyte[60000,28,28]`.
  std::string str() const;
};

/// Reads an IDX file, gzipped (detected by its magic bytes) or raw. \p Path
/// appears in every error message.
StatusOr<IdxArray> readIdxFile(const std::string &Path);

/// Parses the bytes of a (decompressed) IDX file; \p Name is used in
/// messages.
StatusOr<IdxArray> parseIdx(const uint8_t *Bytes, size_t Size,
                            const std::string &Name);

/// Encodes \p A as IDX bytes (big-endian). \p A must be consistent
/// (1 to 255 dims, A.Data.size() == A.bytes()); writeIdxFile checks it.
std::vector<uint8_t> encodeIdx(const IdxArray &A);

/// Writes \p A as an IDX file, gzipped when \p Gzip.
Status writeIdxFile(const std::string &Path, const IdxArray &A,
                    bool Gzip = false);

/// Reads a whole file, inflating it when it is gzipped (several concatenated
/// gzip members are accepted).
StatusOr<std::vector<uint8_t>> readMaybeGzippedFile(const std::string &Path);

//===----------------------------------------------------------------------===//
// Datasets
//===----------------------------------------------------------------------===//

/// One feature of a dataset: Array.Dims[0] is the number of examples, the
/// remaining dims are the per-example shape.
struct Feature {
  std::string Name;
  /// Where it came from, for messages: a file path or "<synthetic>".
  std::string Source;
  IdxArray Array;

  int64_t numExamples() const { return Array.Dims.empty() ? 0 : Array.Dims[0]; }
  /// The per-example shape (empty for a scalar per example, e.g. a label).
  std::vector<int64_t> exampleShape() const;
  /// Elements per example.
  int64_t exampleElements() const;
};

/// What the plan wants for one input: a feature's examples converted to
/// \p Type and reshaped to \p Shape (per example, without the batch
/// dimension). Shapes match by element count: a 28x28 image can feed a
/// [784] or a [28,28,1] input.
struct FeatureRequest {
  std::string Feature;
  /// Float32, Float64, Int32 or Int64.
  DType Type = DType::Float32;
  std::vector<int64_t> Shape;
  /// When positive, every value of the feature must be an integer in
  /// [0, NumClasses) (checked once, at binding).
  int64_t NumClasses = 0;
  /// Scale ubyte data fed to a float input to [0, 1] (x / 255).
  bool ScaleBytes = true;

  int64_t exampleElements() const;
  size_t exampleBytes() const {
    return size_t(exampleElements()) * dtypeSize(Type);
  }
};

/// A set of named features with the same number of examples.
class Dataset {
public:
  Dataset() = default;

  /// Loads features of split \p Split ("train", "t10k") from directory
  /// \p Dir. Feature F comes from `<Split>-<F>s-idx<N>-ubyte[.gz]` or
  /// `<Split>-<F>-idx<N>-ubyte[.gz]` (see findFeatureFile). With an empty
  /// \p Features, every IDX file of the split is loaded, named after the
  /// middle part of its file name without a trailing 's' ("images" ->
  /// "image").
  static StatusOr<Dataset> load(const std::string &Dir,
                                const std::string &Split,
                                const std::vector<std::string> &Features = {});

  /// Loads the given (feature name, file path) pairs.
  static StatusOr<Dataset>
  loadFiles(const std::vector<std::pair<std::string, std::string>> &Files);

  /// \p NumExamples random examples for \p Requests, a pure function of
  /// \p Seed: float inputs get values uniform in [0, 1), integer inputs
  /// values uniform in [0, NumClasses) (the request's NumClasses when set,
  /// else \p NumClasses).
  static StatusOr<Dataset>
  synthetic(const std::vector<FeatureRequest> &Requests, int64_t NumExamples,
            uint64_t Seed, int64_t NumClasses = 10);

  /// Adds a feature; its example count must match the others'.
  Status addFeature(Feature F);

  /// Number of examples (0 for an empty dataset).
  int64_t size() const { return Size; }
  const std::vector<Feature> &features() const { return Features; }
  /// The feature named \p Name, or null.
  const Feature *find(const std::string &Name) const;

  /// Checks that \p R can be fed from this dataset: the feature exists, its
  /// per-example element count matches, the types convert, and (for integer
  /// inputs) every value fits the requested type and NumClasses.
  Status checkRequest(const FeatureRequest &R) const;

private:
  std::vector<Feature> Features;
  int64_t Size = 0;
};

/// Whether \p Dir holds any IDX file of split \p Split (named
/// `<Split>-<anything>-idx<N>-ubyte[.gz]`); an error when \p Dir cannot be
/// read.
StatusOr<bool> hasSplitFiles(const std::string &Dir, const std::string &Split);

/// The file for feature \p Feature of split \p Split in \p Dir (see
/// Dataset::load). When both a raw and a gzipped file exist, the raw one is
/// used; files with different names that both match are an error.
StatusOr<std::string> findFeatureFile(const std::string &Dir,
                                      const std::string &Split,
                                      const std::string &Feature);

/// Converts examples \p Indices[0..Count) of \p F into \p Dst as requested by
/// \p R (one row of R.exampleBytes() per index). \p R must have passed
/// Dataset::checkRequest.
void convertExamples(const Feature &F, const FeatureRequest &R,
                     const int64_t *Indices, int64_t Count, void *Dst);

//===----------------------------------------------------------------------===//
// Batches
//===----------------------------------------------------------------------===//

/// Where a batch iterator stands: the epoch, and the offset within that
/// epoch's example order of the first example of the next batch.
struct DataPosition {
  int64_t Epoch = 0;
  int64_t Index = 0;

  bool operator==(const DataPosition &O) const {
    return Epoch == O.Epoch && Index == O.Index;
  }
  bool operator!=(const DataPosition &O) const { return !(*this == O); }
  /// `epoch 3, index 128`.
  std::string str() const;
};

/// The example order of epoch \p Epoch: a permutation of [0, N) that is a
/// pure function of (Seed, Epoch) (Fisher-Yates driven by mdrt::randomBits).
std::vector<uint32_t> shufflePermutation(int64_t N, uint64_t Seed,
                                         int64_t Epoch);

/// What happens to the examples left over at the end of an epoch.
enum class LastBatch : uint8_t {
  /// Training: the partial batch is dropped; every batch is full.
  Drop,
  /// Evaluation: the partial batch is padded by repeating the epoch's last
  /// example; the batch reports how many rows are valid and which example
  /// the padding repeats.
  Pad,
};

struct BatchOptions {
  /// The global batch size (all clones and replicas together).
  int64_t BatchSize = 1;
  /// Shuffle each epoch (training); otherwise examples come in order.
  bool Shuffle = true;
  uint64_t Seed = 0;
  LastBatch Last = LastBatch::Drop;
  /// Batches prepared ahead by a background thread; 0 prepares them in
  /// next() on the caller's thread.
  int Prefetch = 2;
  /// Where to start (for resume).
  DataPosition Start;
  /// Produce only the rows [ShardIndex * BatchSize / NumShards,
  /// (ShardIndex + 1) * BatchSize / NumShards) of each global batch (one
  /// process's part when replicas run in several processes).
  int64_t NumShards = 1;
  int64_t ShardIndex = 0;
};

/// What next() produced.
struct BatchInfo {
  /// The position of this batch (of its first row in the global batch).
  DataPosition Position;
  /// Rows of this (shard's) batch that hold real examples; the rest are
  /// padding. Always all rows with LastBatch::Drop.
  int64_t Valid = 0;
  /// True when this batch is the last of its epoch.
  bool EndOfEpoch = false;
  /// The dataset index of the example every padding row repeats (the
  /// epoch's last), or -1 when the batch has no padding.
  int64_t PaddingExample = -1;
};

/// Produces batches of a dataset for a list of requests, forever (epoch
/// after epoch). Not thread-safe: call it from one thread.
class BatchIterator {
public:
  /// Checks every request against the dataset and the options and, when
  /// Prefetch > 0, starts the prefetch thread.
  static StatusOr<std::unique_ptr<BatchIterator>>
  create(std::shared_ptr<const Dataset> Data,
         std::vector<FeatureRequest> Requests, const BatchOptions &Options);

  /// Whether \p Prefetch batches of \p Rows rows of \p Requests fit in
  /// memory (what create() checks before it allocates them).
  static Status checkPrefetch(const std::vector<FeatureRequest> &Requests,
                              int64_t Rows, int Prefetch);

  ~BatchIterator();
  BatchIterator(const BatchIterator &) = delete;
  BatchIterator &operator=(const BatchIterator &) = delete;

  /// Fills the next batch: \p Dst[I] receives rows() * request I's example
  /// bytes (see batchBytes()).
  BatchInfo next(void *const *Dst);
  BatchInfo next(const std::vector<void *> &Dst) { return next(Dst.data()); }

  /// Fills every row of \p Dst with the padding example of \p Info, a batch
  /// this iterator produced with padding. A loss that is a mean over the
  /// rows plus terms that do not depend on them gives, on this batch, the
  /// value that corrects \p Info's batch for its padding rows (see
  /// Trainer's evaluation). Does not move the iterator.
  void fillPadding(const BatchInfo &Info, void *const *Dst) const;

  /// The position of the batch the next call to next() returns (what a
  /// checkpoint saves).
  DataPosition position() const;

  /// Moves to \p P, so the following batches are exactly those that
  /// followed when position() was \p P. Index must be within the epoch (and
  /// leave a full batch with LastBatch::Drop).
  Status seek(DataPosition P);

  /// Rows per produced batch: BatchSize / NumShards.
  int64_t rows() const;
  /// Bytes of request \p I's destination buffer.
  size_t batchBytes(size_t I) const;
  /// Batches per epoch: N / BatchSize (Drop) or ceil(N / BatchSize) (Pad).
  int64_t batchesPerEpoch() const;
  const std::vector<FeatureRequest> &requests() const;
  const BatchOptions &options() const;

  class Impl;

private:
  explicit BatchIterator(std::unique_ptr<Impl> I);
  std::unique_ptr<Impl> P;
};

} // namespace mdrt

#endif // MDRT_DATA_H
