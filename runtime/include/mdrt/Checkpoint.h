//===- Checkpoint.h - Saving and restoring training state -------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A checkpoint is everything a run needs to continue exactly where it
// stopped: the plan it belongs to (a fingerprint), the global step, the
// input pipeline's position, the run seed, and named tensors (variables,
// optimizer slots, global_step).
//
// Files are written atomically (temporary file, fsync, rename, fsync of the
// directory) and carry a CRC32 over all their bytes, so a crash while
// writing leaves the previous checkpoint intact and a truncated or damaged
// file is refused. The format is described in Checkpoint.cpp and
// docs/Checkpoints.md.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_CHECKPOINT_H
#define MDRT_CHECKPOINT_H

#include "mdrt/Data.h"
#include "mdrt/Status.h"
#include "mdrt/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mdrt {

/// The version of the file format this runtime writes. It reads this one,
/// version 2 (which does not record whether the run scaled its bytes) and
/// version 1 (which records nothing of the training data but the position
/// in it).
constexpr uint32_t CheckpointFormatVersion = 3;

/// The scalar state of a run.
struct CheckpointState {
  /// Identifies the plan (its layout of variables); checked on restore.
  uint64_t PlanFingerprint = 0;
  /// The global step: the number of steps run so far.
  int64_t Step = 0;
  /// The input position of the next batch (BatchIterator::position()).
  DataPosition Data;
  /// The run seed (initializers, dropout, shuffling).
  uint64_t Seed = 0;
  /// The training data \p Data counts in: its number of examples, whether
  /// the run shuffles it and whether it is synthetic. -1: not recorded (a
  /// version 1 file).
  int64_t DataExamples = -1;
  bool Shuffled = false;
  bool Synthetic = false;
  /// Whether the run read its ubyte features unscaled (mdrun --raw-bytes).
  /// Recorded from format version 3 (and in some version 2 files, as true
  /// only); false in older files.
  bool RawBytes = false;
};

/// A named tensor to write; \p Data points at Desc.bytes() bytes.
struct CheckpointTensorRef {
  std::string Name;
  TensorDesc Desc;
  const void *Data = nullptr;
};

/// A named tensor read from a checkpoint.
struct CheckpointTensor {
  std::string Name;
  TensorDesc Desc;
  std::vector<uint8_t> Data;
};

/// A whole checkpoint in memory.
struct Checkpoint {
  /// The format version of the file it was read from.
  uint32_t Version = CheckpointFormatVersion;
  CheckpointState State;
  std::vector<CheckpointTensor> Tensors;

  /// The tensor named \p Name, or null.
  const CheckpointTensor *find(const std::string &Name) const;
};

/// A tensor's values at a glance (mdrun --checkpoint-summary).
struct TensorSummary {
  /// The number of values (the shape's).
  int64_t Elements = 0;
  /// The values that are NaN, and those that are infinite.
  int64_t NaNs = 0, Infinities = 0;
  /// The values equal to 0 (-0 included).
  int64_t Zeros = 0;
  /// Over the finite values (0 when there is none): the smallest and the
  /// largest (a zero as +0), their mean and root mean square (computed
  /// without overflow for any finite values).
  double Min = 0, Max = 0, Mean = 0, Rms = 0;
};

/// The summary of tensor \p T's values, read as its element type (bool as
/// 0 and 1). \p T's data holds Desc.bytes() bytes, as a checkpoint read
/// by readCheckpoint does.
TensorSummary summarizeTensor(const CheckpointTensor &T);

/// A tensor the restoring plan expects.
struct ExpectedTensor {
  std::string Name;
  TensorDesc Desc;
};

/// Encodes a checkpoint in the file format (for tests and tools; writing
/// goes through writeCheckpoint).
StatusOr<std::vector<uint8_t>>
encodeCheckpoint(const CheckpointState &State,
                 const std::vector<CheckpointTensorRef> &Tensors);

/// The temporary file writeCheckpoint writes \p Path through:
/// `<Path>.tmp.<host>.<pid>`, host this host's name (characters other than
/// letters, digits, '-' and '.' replaced by '_'), so that runs on several
/// hosts sharing a directory tell their files apart.
std::string checkpointTemporaryPath(const std::string &Path);

/// Writes a checkpoint atomically: checkpointTemporaryPath(\p Path), fsync,
/// rename over \p Path, fsync of the directory. Tensor names must be
/// unique.
Status writeCheckpoint(const std::string &Path, const CheckpointState &State,
                       const std::vector<CheckpointTensorRef> &Tensors);
Status writeCheckpoint(const std::string &Path, const Checkpoint &C);

/// Decodes and validates (magic, version, sizes, checksum) the bytes of a
/// checkpoint; \p Name is used in messages. On an error, \p Damaged (when
/// given) says whether the bytes are damaged (not a checkpoint, truncated,
/// corrupt) rather than of a format version this runtime does not read.
StatusOr<Checkpoint> parseCheckpoint(const uint8_t *Bytes, size_t Size,
                                     const std::string &Name,
                                     bool *Damaged = nullptr);

/// Reads and validates a checkpoint file; says nothing about whether it
/// fits a plan (see checkCheckpoint). \p Damaged as for parseCheckpoint
/// (false when the file cannot be read).
StatusOr<Checkpoint> readCheckpoint(const std::string &Path,
                                    bool *Damaged = nullptr);

/// Checks that \p C (read from \p Path, for messages) belongs to the plan
/// with fingerprint \p Fingerprint and holds exactly the tensors of
/// \p Expected (by name, with the same dtype and shape).
Status checkCheckpoint(const Checkpoint &C, const std::string &Path,
                       uint64_t Fingerprint,
                       const std::vector<ExpectedTensor> &Expected);

/// readCheckpoint followed by checkCheckpoint.
StatusOr<Checkpoint>
loadCheckpoint(const std::string &Path, uint64_t Fingerprint,
               const std::vector<ExpectedTensor> &Expected);

//===----------------------------------------------------------------------===//
// Checkpoint directories
//===----------------------------------------------------------------------===//

/// `ckpt-<step, 12 digits>.mdck`, the name a run gives the checkpoint of
/// step \p Step in its checkpoint directory.
std::string checkpointFileName(int64_t Step);

/// The checkpoints of directory \p Dir (files named by checkpointFileName),
/// as (step, path), by increasing step. A missing directory has none.
StatusOr<std::vector<std::pair<int64_t, std::string>>>
listCheckpoints(const std::string &Dir);

/// The path of the checkpoint of the highest step in \p Dir, or an empty
/// string when there is none.
StatusOr<std::string> latestCheckpoint(const std::string &Dir);

/// Removes all but the \p KeepLast checkpoints of highest step in \p Dir.
Status pruneCheckpoints(const std::string &Dir, int KeepLast);

/// Removes the temporary files (checkpointTemporaryPath) that writers
/// killed while writing left in \p Dir: those of this host of a process
/// that no longer runs. Another host's files stay (whether its writer runs
/// cannot be told from here), and so do those of the runtimes before the
/// host was in the name (`<checkpoint>.tmp.<pid>`). Returns how many it
/// removed.
StatusOr<int> removeStaleTemporaries(const std::string &Dir);

} // namespace mdrt

#endif // MDRT_CHECKPOINT_H
