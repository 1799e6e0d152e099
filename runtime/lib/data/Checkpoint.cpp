//===- Checkpoint.cpp - Saving and restoring training state ---------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// File format, version 3. All integers are little-endian.
//
//   offset  size  field
//        0     8  magic "MDRTCKPT"
//        8     4  u32 format version (3)
//       12     4  u32 header size (88)
//       16     8  u64 file size in bytes, the trailing checksum included
//       24     8  u64 plan fingerprint
//       32     8  i64 global step
//       40     8  i64 data epoch
//       48     8  i64 data index within the epoch
//       56     8  u64 run seed
//       64     4  u32 number of tensors
//       68     4  u32 flags: bit 0, the run shuffles its training data;
//                     bit 1, the data is synthetic; bit 2, its bytes are
//                     read unscaled (mdrun --raw-bytes)
//       72     8  i64 examples of the training data
//       80     8  u64 reserved, 0
//       88        the tensors, one after the other:
//                   u32 name length L, then L bytes of name (UTF-8)
//                   u8  dtype (mdrt::DType numbering: 1 float32, 2 float64,
//                       3 int32, 4 int64, 5 bool)
//                   u8  rank R
//                   u16 reserved, 0
//                   R x i64 dims
//                   u64 data size in bytes (product of dims x dtype size)
//                   zero bytes up to the next multiple of 8 (file offset)
//                   the data, row-major, little-endian
//      end-4     4  u32 CRC32 (zlib's crc32) of every byte before it
//
// Every version, past and future, ends in that checksum, so that a file of
// a newer version (which this reader refuses) is told from one whose
// version field was damaged.
//
// Version 2 (still read) is the same but for flag bit 2, which it does not
// define (the runtime of 2026-11-27 set it already: a version 2 file with
// it set reads bytes unscaled; one without it may have come from a runtime
// that did not record it). Version 1 (still read) has a header of 72 bytes:
// offset 68 is reserved and the tensors start at 72; it records no training
// data but the position in it.
//
// Readers check, in order: magic, version (a newer one with the checksum),
// header size, file size against the header (truncation), the checksum,
// then the tensors' structure.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mdrt;

namespace {

constexpr char Magic[8] = {'M', 'D', 'R', 'T', 'C', 'K', 'P', 'T'};
/// The header this runtime writes (versions 2 and 3), and version 1's.
constexpr size_t HeaderSize = 88;
constexpr size_t HeaderSizeV1 = 72;
constexpr size_t ChecksumSize = 4;

std::string quote(const std::string &S) { return "'" + S + "'"; }

std::string hex64(uint64_t V) {
  char Buf[32];
  std::snprintf(Buf, sizeof(Buf), "0x%016llx", (unsigned long long)V);
  return Buf;
}

std::string hex32(uint32_t V) {
  char Buf[16];
  std::snprintf(Buf, sizeof(Buf), "0x%08x", unsigned(V));
  return Buf;
}

uint32_t crc32Update(uint32_t Crc, const uint8_t *P, size_t N) {
  while (N > 0) {
    uInt Chunk = uInt(std::min<size_t>(N, 1u << 30));
    Crc = uint32_t(crc32(Crc, P, Chunk));
    P += Chunk;
    N -= Chunk;
  }
  return Crc;
}

template <typename T> void putLE(uint8_t *P, T V) {
  for (size_t I = 0; I < sizeof(T); ++I)
    P[I] = uint8_t(uint64_t(V) >> (8 * I));
}

template <typename T> T getLE(const uint8_t *P) {
  uint64_t V = 0;
  for (size_t I = 0; I < sizeof(T); ++I)
    V |= uint64_t(P[I]) << (8 * I);
  return T(V);
}

bool hostIsLittleEndian() {
  uint16_t One = 1;
  uint8_t First;
  std::memcpy(&First, &One, 1);
  return First == 1;
}

bool isKnownDType(uint8_t T) {
  return T >= uint8_t(DType::Float32) && T <= uint8_t(DType::Bool);
}

size_t padTo8(size_t Offset) { return (8 - Offset % 8) % 8; }

/// Receives the encoded bytes, keeping the offset and the running CRC.
class Sink {
public:
  virtual ~Sink() = default;
  Status write(const void *Data, size_t N) {
    const uint8_t *P = static_cast<const uint8_t *>(Data);
    Crc = crc32Update(Crc, P, N);
    Offset += N;
    return emit(P, N);
  }
  Status writeChecksum() {
    uint8_t Buf[4];
    putLE<uint32_t>(Buf, Crc);
    Offset += 4;
    return emit(Buf, 4);
  }
  uint64_t offset() const { return Offset; }

protected:
  virtual Status emit(const uint8_t *P, size_t N) = 0;

private:
  uint32_t Crc = uint32_t(crc32(0, nullptr, 0));
  uint64_t Offset = 0;
};

class VectorSink : public Sink {
public:
  std::vector<uint8_t> Bytes;

protected:
  Status emit(const uint8_t *P, size_t N) override {
    Bytes.insert(Bytes.end(), P, P + N);
    return Status::ok();
  }
};

/// Buffers small writes; large ones go straight to the file.
class FileSink : public Sink {
public:
  FileSink(int Fd, std::string Path) : Fd(Fd), Path(std::move(Path)) {}
  Status flush() {
    Status S = writeAll(Buffer.data(), Buffer.size());
    Buffer.clear();
    return S;
  }

protected:
  Status emit(const uint8_t *P, size_t N) override {
    if (Buffer.size() + N <= Capacity) {
      Buffer.insert(Buffer.end(), P, P + N);
      return Status::ok();
    }
    MDRT_RETURN_IF_ERROR(flush());
    if (N <= Capacity) {
      Buffer.insert(Buffer.end(), P, P + N);
      return Status::ok();
    }
    return writeAll(P, N);
  }

private:
  Status writeAll(const uint8_t *P, size_t N) {
    while (N > 0) {
      ssize_t W = ::write(Fd, P, std::min<size_t>(N, 1 << 30));
      if (W < 0) {
        if (errno == EINTR)
          continue;
        return Status::error("cannot write " + quote(Path) + ": " +
                             std::strerror(errno));
      }
      P += W;
      N -= size_t(W);
    }
    return Status::ok();
  }

  static constexpr size_t Capacity = 1 << 16;
  int Fd;
  std::string Path;
  std::vector<uint8_t> Buffer;
};

Status checkTensors(const std::vector<CheckpointTensorRef> &Tensors) {
  std::set<std::string> Names;
  for (const CheckpointTensorRef &T : Tensors) {
    if (!Names.insert(T.Name).second)
      return Status::error("tensor " + quote(T.Name) + " is given twice");
    if (T.Name.size() > UINT32_MAX)
      return Status::error("tensor name too long");
    if (!isKnownDType(uint8_t(T.Desc.Type)))
      return Status::error("tensor " + quote(T.Name) + " has unknown dtype " +
                           std::to_string(unsigned(T.Desc.Type)));
    if (T.Desc.Shape.size() > 255)
      return Status::error("tensor " + quote(T.Name) + " has rank " +
                           std::to_string(T.Desc.Shape.size()) +
                           ", more than 255");
    for (int64_t D : T.Desc.Shape)
      if (D < 0)
        return Status::error("tensor " + quote(T.Name) +
                             " has a negative dim: " + T.Desc.str());
    if (!T.Data && T.Desc.bytes() > 0)
      return Status::error("tensor " + quote(T.Name) + " has no data");
  }
  return Status::ok();
}

uint64_t encodedSize(const std::vector<CheckpointTensorRef> &Tensors) {
  uint64_t Size = HeaderSize;
  for (const CheckpointTensorRef &T : Tensors) {
    Size += 4 + T.Name.size() + 4 + 8 * T.Desc.Shape.size() + 8;
    Size += padTo8(size_t(Size));
    Size += T.Desc.bytes();
  }
  return Size + ChecksumSize;
}

Status encodeTo(Sink &S, const CheckpointState &State,
                const std::vector<CheckpointTensorRef> &Tensors) {
  MDRT_RETURN_IF_ERROR(checkTensors(Tensors));
  uint8_t H[HeaderSize] = {};
  std::memcpy(H, Magic, 8);
  putLE<uint32_t>(H + 8, CheckpointFormatVersion);
  putLE<uint32_t>(H + 12, uint32_t(HeaderSize));
  putLE<uint64_t>(H + 16, encodedSize(Tensors));
  putLE<uint64_t>(H + 24, State.PlanFingerprint);
  putLE<int64_t>(H + 32, State.Step);
  putLE<int64_t>(H + 40, State.Data.Epoch);
  putLE<int64_t>(H + 48, State.Data.Index);
  putLE<uint64_t>(H + 56, State.Seed);
  putLE<uint32_t>(H + 64, uint32_t(Tensors.size()));
  putLE<uint32_t>(H + 68, (State.Shuffled ? 1u : 0u) |
                              (State.Synthetic ? 2u : 0u) |
                              (State.RawBytes ? 4u : 0u));
  putLE<int64_t>(H + 72, State.DataExamples);
  putLE<uint64_t>(H + 80, 0);
  MDRT_RETURN_IF_ERROR(S.write(H, HeaderSize));
  static const uint8_t Zeros[8] = {};
  std::vector<uint8_t> Swapped;
  for (const CheckpointTensorRef &T : Tensors) {
    std::vector<uint8_t> E(4 + T.Name.size() + 4 + 8 * T.Desc.Shape.size() + 8);
    uint8_t *P = E.data();
    putLE<uint32_t>(P, uint32_t(T.Name.size()));
    P += 4;
    std::memcpy(P, T.Name.data(), T.Name.size());
    P += T.Name.size();
    P[0] = uint8_t(T.Desc.Type);
    P[1] = uint8_t(T.Desc.Shape.size());
    P[2] = P[3] = 0;
    P += 4;
    for (int64_t D : T.Desc.Shape) {
      putLE<int64_t>(P, D);
      P += 8;
    }
    putLE<uint64_t>(P, T.Desc.bytes());
    MDRT_RETURN_IF_ERROR(S.write(E.data(), E.size()));
    MDRT_RETURN_IF_ERROR(S.write(Zeros, padTo8(size_t(S.offset()))));
    const uint8_t *Data = static_cast<const uint8_t *>(T.Data);
    size_t Bytes = T.Desc.bytes();
    size_t Elem = dtypeSize(T.Desc.Type);
    if (!hostIsLittleEndian() && Elem > 1) {
      Swapped.resize(Bytes);
      for (size_t I = 0; I < Bytes; I += Elem)
        for (size_t B = 0; B < Elem; ++B)
          Swapped[I + B] = Data[I + Elem - 1 - B];
      Data = Swapped.data();
    }
    if (Bytes)
      MDRT_RETURN_IF_ERROR(S.write(Data, Bytes));
  }
  return S.writeChecksum();
}

std::string directoryOf(const std::string &Path) {
  size_t Slash = Path.rfind('/');
  if (Slash == std::string::npos)
    return ".";
  if (Slash == 0)
    return "/";
  return Path.substr(0, Slash);
}

Status fsyncDirectory(const std::string &Dir) {
  int Fd = ::open(Dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (Fd < 0)
    return Status::error("cannot open directory " + quote(Dir) + ": " +
                         std::strerror(errno));
  int Ret = ::fsync(Fd);
  int Err = errno;
  ::close(Fd);
  if (Ret != 0 && Err != EINVAL) // Some file systems cannot sync directories.
    return Status::error("cannot sync directory " + quote(Dir) + ": " +
                         std::strerror(Err));
  return Status::ok();
}

} // namespace

TensorSummary mdrt::summarizeTensor(const CheckpointTensor &T) {
  TensorSummary S;
  S.Elements = T.Desc.numElements();
  assert(T.Data.size() >= T.Desc.bytes() && "a tensor shorter than its shape");
  // The values as doubles, read as their element type.
  auto ForEach = [&](auto &&F) {
    auto Each = [&](auto Type) {
      using E = decltype(Type);
      for (int64_t I = 0; I < S.Elements; ++I) {
        E V;
        std::memcpy(&V, T.Data.data() + size_t(I) * sizeof(E), sizeof(E));
        F(double(V));
      }
    };
    switch (T.Desc.Type) {
    case DType::Float32:
      return Each(float());
    case DType::Float64:
      return Each(double());
    case DType::Int32:
      return Each(int32_t());
    case DType::Int64:
      return Each(int64_t());
    default:
      return Each(uint8_t());
    }
  };
  // First the counts and the range; then the sums, scaled by the power of
  // two at or below the largest magnitude, so that no square or sum of finite
  // values overflows and, the scaling being exact, the results are those
  // of the plain sums wherever those do not overflow.
  int64_t Finite = 0;
  ForEach([&](double V) {
    if (std::isnan(V)) {
      ++S.NaNs;
    } else if (std::isinf(V)) {
      ++S.Infinities;
    } else {
      if (V == 0) {
        ++S.Zeros;
        V = 0; // -0 as +0
      }
      S.Min = Finite ? std::min(S.Min, V) : V;
      S.Max = Finite ? std::max(S.Max, V) : V;
      ++Finite;
    }
  });
  const double Largest = std::max(std::fabs(S.Min), std::fabs(S.Max));
  if (Finite == 0 || Largest == 0)
    return S;
  int Exponent = 0;
  std::frexp(Largest, &Exponent);
  // Largest / Scale in [1, 2): 2^1023 at most, which a double holds.
  const double Scale = std::ldexp(1.0, Exponent - 1);
  double Sum = 0, Squares = 0;
  ForEach([&](double V) {
    if (std::isfinite(V)) {
      double X = V / Scale;
      Sum += X;
      Squares += X * X;
    }
  });
  S.Mean = Sum / double(Finite) * Scale;
  S.Rms = std::sqrt(Squares / double(Finite)) * Scale;
  return S;
}

const CheckpointTensor *Checkpoint::find(const std::string &Name) const {
  for (const CheckpointTensor &T : Tensors)
    if (T.Name == Name)
      return &T;
  return nullptr;
}

StatusOr<std::vector<uint8_t>>
mdrt::encodeCheckpoint(const CheckpointState &State,
                       const std::vector<CheckpointTensorRef> &Tensors) {
  VectorSink S;
  MDRT_RETURN_IF_ERROR(encodeTo(S, State, Tensors));
  return std::move(S.Bytes);
}

/// This host's name as checkpoint temporaries carry it.
static std::string hostTag() {
  char Buf[256] = {};
  if (::gethostname(Buf, sizeof(Buf) - 1) != 0 || !Buf[0])
    return "unknown-host";
  // Host names are letters, digits, '-' and '.' (the pid follows the last
  // '.'); anything else a file name should not hold becomes '_'.
  std::string Host(Buf);
  for (char &C : Host)
    if (!std::isalnum(static_cast<unsigned char>(C)) && C != '-' && C != '.')
      C = '_';
  return Host;
}

std::string mdrt::checkpointTemporaryPath(const std::string &Path) {
  return Path + ".tmp." + hostTag() + "." + std::to_string(::getpid());
}

Status mdrt::writeCheckpoint(const std::string &Path,
                             const CheckpointState &State,
                             const std::vector<CheckpointTensorRef> &Tensors) {
  std::string Tmp = checkpointTemporaryPath(Path);
  int Fd = ::open(Tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (Fd < 0)
    return Status::error("cannot create " + quote(Tmp) + ": " +
                         std::strerror(errno));
  auto Fail = [&](const Status &S) {
    if (Fd >= 0)
      ::close(Fd);
    ::unlink(Tmp.c_str());
    return S.withContext("writing checkpoint " + quote(Path));
  };
  FileSink Sink(Fd, Tmp);
  Status S = encodeTo(Sink, State, Tensors);
  if (!S.isOk())
    return Fail(S);
  S = Sink.flush();
  if (!S.isOk())
    return Fail(S);
  if (::fsync(Fd) != 0)
    return Fail(Status::error("cannot sync " + quote(Tmp) + ": " +
                              std::strerror(errno)));
  int Ret = ::close(Fd);
  Fd = -1;
  if (Ret != 0)
    return Fail(Status::error("cannot close " + quote(Tmp) + ": " +
                              std::strerror(errno)));
  if (::rename(Tmp.c_str(), Path.c_str()) != 0)
    return Fail(Status::error("cannot rename " + quote(Tmp) + " to " +
                              quote(Path) + ": " + std::strerror(errno)));
  return fsyncDirectory(directoryOf(Path))
      .withContext("writing checkpoint " + quote(Path));
}

Status mdrt::writeCheckpoint(const std::string &Path, const Checkpoint &C) {
  std::vector<CheckpointTensorRef> Refs;
  for (const CheckpointTensor &T : C.Tensors) {
    if (T.Data.size() != T.Desc.bytes())
      return Status::error("writing checkpoint " + quote(Path) + ": tensor " +
                           quote(T.Name) + " " + T.Desc.str() + " has " +
                           std::to_string(T.Data.size()) + " bytes of data");
    Refs.push_back({T.Name, T.Desc, T.Data.data()});
  }
  return writeCheckpoint(Path, C.State, Refs);
}

/// parseCheckpoint's work; \p VersionError set when the file is of a newer
/// format (refused, but not damaged).
static StatusOr<Checkpoint> parseBytes(const uint8_t *Bytes, size_t Size,
                                       const std::string &Name,
                                       bool &VersionError) {
  std::string What = "checkpoint " + quote(Name);
  if (Size > 0 && std::memcmp(Bytes, Magic, std::min<size_t>(Size, 8)) != 0)
    return Status::error(What + " is not a checkpoint (bad magic)");
  if (Size < HeaderSizeV1 + ChecksumSize)
    return Status::error(What + " is truncated: " + std::to_string(Size) +
                         " bytes, fewer than the smallest checkpoint (" +
                         std::to_string(HeaderSizeV1 + ChecksumSize) + ")");
  uint32_t Version = getLE<uint32_t>(Bytes + 8);
  // Version 0, or a number no format will reach, is a damaged field.
  if (Version < 1 || Version > 255)
    return Status::error(What + " is corrupt: format version " +
                         std::to_string(Version));
  if (Version > CheckpointFormatVersion) {
    // Every version ends in the checksum of the bytes before it: a newer
    // runtime's file is whole, a version field damaged in an older file
    // is not.
    uint32_t Stored = getLE<uint32_t>(Bytes + Size - ChecksumSize);
    uint32_t Computed = crc32Update(uint32_t(crc32(0, nullptr, 0)), Bytes,
                                    Size - ChecksumSize);
    if (Stored != Computed)
      return Status::error(What + " is corrupt: format version " +
                           std::to_string(Version) +
                           " and a checksum mismatch (stored " +
                           hex32(Stored) + ", computed " + hex32(Computed) +
                           ")");
    VersionError = true;
    return Status::error(What + " has format version " +
                         std::to_string(Version) +
                         "; this runtime reads versions 1 to " +
                         std::to_string(CheckpointFormatVersion));
  }
  const size_t Header = Version == 1 ? HeaderSizeV1 : HeaderSize;
  uint32_t HSize = getLE<uint32_t>(Bytes + 12);
  if (HSize != Header)
    return Status::error(What + " is corrupt: header size " +
                         std::to_string(HSize) + ", expected " +
                         std::to_string(Header));
  if (Size < Header + ChecksumSize)
    return Status::error(What + " is truncated: " + std::to_string(Size) +
                         " bytes, fewer than its header and checksum (" +
                         std::to_string(Header + ChecksumSize) + ")");
  uint64_t FileSize = getLE<uint64_t>(Bytes + 16);
  if (Size < FileSize)
    return Status::error(What + " is truncated: " + std::to_string(Size) +
                         " bytes of " + std::to_string(FileSize));
  if (Size > FileSize)
    return Status::error(What + " is corrupt: " + std::to_string(Size) +
                         " bytes, but its header says " +
                         std::to_string(FileSize));
  uint32_t Stored = getLE<uint32_t>(Bytes + Size - ChecksumSize);
  uint32_t Computed =
      crc32Update(uint32_t(crc32(0, nullptr, 0)), Bytes, Size - ChecksumSize);
  if (Stored != Computed)
    return Status::error(What + " is corrupt: checksum mismatch (stored " +
                         hex32(Stored) + ", computed " + hex32(Computed) + ")");

  Checkpoint C;
  C.Version = Version;
  C.State.PlanFingerprint = getLE<uint64_t>(Bytes + 24);
  C.State.Step = getLE<int64_t>(Bytes + 32);
  C.State.Data.Epoch = getLE<int64_t>(Bytes + 40);
  C.State.Data.Index = getLE<int64_t>(Bytes + 48);
  C.State.Seed = getLE<uint64_t>(Bytes + 56);
  uint32_t Count = getLE<uint32_t>(Bytes + 64);
  if (Version >= 2) {
    uint32_t Flags = getLE<uint32_t>(Bytes + 68);
    // Bit 2 is defined from version 3, but the runtime of 2026-11-27
    // wrote it in version 2 files already.
    if (Flags & ~7u)
      return Status::error(What + " is corrupt: unknown flags " + hex32(Flags));
    C.State.Shuffled = Flags & 1;
    C.State.Synthetic = Flags & 2;
    C.State.RawBytes = Flags & 4;
    C.State.DataExamples = getLE<int64_t>(Bytes + 72);
    if (C.State.DataExamples < -1) // -1: not recorded.
      return Status::error(
          What + " is corrupt: " + std::to_string(C.State.DataExamples) +
          " training examples");
  }
  // A writer never records these (a file written wrong, or edited).
  if (C.State.Step < 0)
    return Status::error(What + " is corrupt: step " +
                         std::to_string(C.State.Step));
  if (C.State.Data.Epoch < 0 || C.State.Data.Index < 0)
    return Status::error(What + " is corrupt: data position " +
                         C.State.Data.str());

  // The checksum matched, so what follows only fails for a file written
  // wrong; still, never read out of bounds.
  size_t End = Size - ChecksumSize;
  size_t Off = Header;
  auto Corrupt = [&](const std::string &Why) {
    return Status::error(What + " is corrupt: " + Why + " (at offset " +
                         std::to_string(Off) + ")");
  };
  std::set<std::string> Names;
  for (uint32_t I = 0; I < Count; ++I) {
    std::string Entry = "tensor " + std::to_string(I);
    if (End - Off < 4)
      return Corrupt(Entry + " is cut off");
    uint32_t NameLen = getLE<uint32_t>(Bytes + Off);
    Off += 4;
    if (End - Off < size_t(NameLen) + 4)
      return Corrupt(Entry + " is cut off");
    CheckpointTensor T;
    T.Name.assign(reinterpret_cast<const char *>(Bytes + Off), NameLen);
    Off += NameLen;
    Entry = "tensor " + quote(T.Name);
    uint8_t Type = Bytes[Off];
    unsigned Rank = Bytes[Off + 1];
    Off += 4;
    if (!isKnownDType(Type))
      return Corrupt(Entry + " has unknown dtype " + std::to_string(Type));
    T.Desc.Type = DType(Type);
    if (End - Off < 8 * size_t(Rank) + 8)
      return Corrupt(Entry + " is cut off");
    unsigned __int128 Elements = 1;
    for (unsigned R = 0; R < Rank; ++R) {
      int64_t D = getLE<int64_t>(Bytes + Off);
      Off += 8;
      if (D < 0)
        return Corrupt(Entry + " has a negative dim");
      T.Desc.Shape.push_back(D);
      Elements *= uint64_t(D);
      if (Elements > (uint64_t(1) << 60))
        return Corrupt(Entry + " is too large");
    }
    uint64_t DataBytes = getLE<uint64_t>(Bytes + Off);
    Off += 8;
    if (DataBytes != uint64_t(Elements) * dtypeSize(T.Desc.Type))
      return Corrupt(Entry + " " + T.Desc.str() + " says it has " +
                     std::to_string(DataBytes) + " bytes of data");
    Off += padTo8(Off);
    if (Off > End || End - Off < DataBytes)
      return Corrupt(Entry + " is cut off");
    T.Data.assign(Bytes + Off, Bytes + Off + DataBytes);
    Off += size_t(DataBytes);
    size_t Elem = dtypeSize(T.Desc.Type);
    if (!hostIsLittleEndian() && Elem > 1)
      for (size_t J = 0; J < T.Data.size(); J += Elem)
        std::reverse(T.Data.begin() + J, T.Data.begin() + J + Elem);
    if (!Names.insert(T.Name).second)
      return Corrupt(Entry + " appears twice");
    C.Tensors.push_back(std::move(T));
  }
  if (Off != End)
    return Corrupt(std::to_string(End - Off) +
                   " unused bytes before the checksum");
  return C;
}

StatusOr<Checkpoint> mdrt::parseCheckpoint(const uint8_t *Bytes, size_t Size,
                                           const std::string &Name,
                                           bool *Damaged) {
  bool VersionError = false;
  StatusOr<Checkpoint> C = parseBytes(Bytes, Size, Name, VersionError);
  if (Damaged)
    *Damaged = !C.isOk() && !VersionError;
  return C;
}

StatusOr<Checkpoint> mdrt::readCheckpoint(const std::string &Path,
                                          bool *Damaged) {
  if (Damaged)
    *Damaged = false;
  // Opened without waiting for a writer: a FIFO that has none (one named
  // as a checkpoint in a checkpoint directory) reads as empty rather than
  // blocking the run where no signal can stop it. Reads then block as
  // usual (a pipe with a writer).
  int Fd = ::open(Path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (Fd < 0)
    return Status::error("cannot open checkpoint " + quote(Path) + ": " +
                         std::strerror(errno));
  int Flags = ::fcntl(Fd, F_GETFL);
  if (Flags >= 0)
    ::fcntl(Fd, F_SETFL, Flags & ~O_NONBLOCK);
  std::vector<uint8_t> Bytes;
  struct stat St;
  if (::fstat(Fd, &St) == 0 && St.st_size > 0)
    Bytes.reserve(size_t(St.st_size));
  uint8_t Buf[1 << 16];
  while (true) {
    ssize_t R = ::read(Fd, Buf, sizeof(Buf));
    if (R < 0) {
      if (errno == EINTR)
        continue;
      int Err = errno;
      ::close(Fd);
      return Status::error("cannot read checkpoint " + quote(Path) + ": " +
                           std::strerror(Err));
    }
    if (R == 0)
      break;
    Bytes.insert(Bytes.end(), Buf, Buf + R);
  }
  ::close(Fd);
  return parseCheckpoint(Bytes.data(), Bytes.size(), Path, Damaged);
}

Status mdrt::checkCheckpoint(const Checkpoint &C, const std::string &Path,
                             uint64_t Fingerprint,
                             const std::vector<ExpectedTensor> &Expected) {
  std::string What = "checkpoint " + quote(Path);
  if (C.State.PlanFingerprint != Fingerprint)
    return Status::error(What + " was written for another plan (fingerprint " +
                         hex64(C.State.PlanFingerprint) + ", this plan has " +
                         hex64(Fingerprint) + ")");
  std::vector<std::string> Problems;
  std::map<std::string, const CheckpointTensor *> Have;
  for (const CheckpointTensor &T : C.Tensors)
    Have.emplace(T.Name, &T);
  std::set<std::string> Wanted;
  for (const ExpectedTensor &E : Expected) {
    Wanted.insert(E.Name);
    auto It = Have.find(E.Name);
    const CheckpointTensor *T = It == Have.end() ? nullptr : It->second;
    if (!T)
      Problems.push_back(What + " has no tensor " + quote(E.Name) +
                         " (the plan has " + E.Desc.str() + ")");
    else if (T->Desc.Type != E.Desc.Type || T->Desc.Shape != E.Desc.Shape)
      Problems.push_back("tensor " + quote(E.Name) + " is " + T->Desc.str() +
                         " in " + What + ", but the plan has " + E.Desc.str());
  }
  for (const CheckpointTensor &T : C.Tensors)
    if (!Wanted.count(T.Name))
      Problems.push_back(What + " has tensor " + quote(T.Name) + " " +
                         T.Desc.str() + " that the plan does not have");
  if (Problems.empty())
    return Status::ok();
  std::string Msg = Problems.front();
  if (Problems.size() > 1)
    Msg += " (and " + std::to_string(Problems.size() - 1) + " more mismatch" +
           (Problems.size() > 2 ? "es" : "") + ")";
  return Status::error(Msg);
}

StatusOr<Checkpoint>
mdrt::loadCheckpoint(const std::string &Path, uint64_t Fingerprint,
                     const std::vector<ExpectedTensor> &Expected) {
  StatusOr<Checkpoint> C = readCheckpoint(Path);
  if (!C)
    return C.status();
  MDRT_RETURN_IF_ERROR(checkCheckpoint(*C, Path, Fingerprint, Expected));
  return C.take();
}

//===----------------------------------------------------------------------===//
// Checkpoint directories
//===----------------------------------------------------------------------===//

std::string mdrt::checkpointFileName(int64_t Step) {
  char Buf[64];
  std::snprintf(Buf, sizeof(Buf), "ckpt-%012lld.mdck", (long long)Step);
  return Buf;
}

StatusOr<std::vector<std::pair<int64_t, std::string>>>
mdrt::listCheckpoints(const std::string &Dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> Found;
  std::error_code EC;
  if (!fs::exists(Dir, EC))
    return Found;
  fs::directory_iterator It(Dir, EC);
  if (EC)
    return Status::error("cannot read checkpoint directory " + quote(Dir) +
                         ": " + EC.message());
  for (fs::directory_iterator End; It != End; It.increment(EC)) {
    if (EC)
      return Status::error("cannot read checkpoint directory " + quote(Dir) +
                           ": " + EC.message());
    std::string Name = It->path().filename().string();
    // ckpt-<digits>.mdck, exactly.
    const std::string Prefix = "ckpt-", Suffix = ".mdck";
    if (Name.size() <= Prefix.size() + Suffix.size() ||
        Name.compare(0, Prefix.size(), Prefix) != 0 ||
        Name.compare(Name.size() - Suffix.size(), Suffix.size(), Suffix) != 0)
      continue;
    std::string Digits =
        Name.substr(Prefix.size(), Name.size() - Prefix.size() - Suffix.size());
    if (Digits.size() > 18 ||
        !std::all_of(Digits.begin(), Digits.end(),
                     [](char C) { return C >= '0' && C <= '9'; }))
      continue;
    Found.emplace_back(std::stoll(Digits), It->path().string());
  }
  std::sort(Found.begin(), Found.end());
  return Found;
}

StatusOr<std::string> mdrt::latestCheckpoint(const std::string &Dir) {
  auto Found = listCheckpoints(Dir);
  if (!Found)
    return Found.status();
  if (Found->empty())
    return std::string();
  return Found->back().second;
}

StatusOr<int> mdrt::removeStaleTemporaries(const std::string &Dir) {
  namespace fs = std::filesystem;
  std::error_code EC;
  if (!fs::exists(Dir, EC))
    return 0;
  fs::directory_iterator It(Dir, EC);
  std::vector<std::string> Stale;
  const std::string Host = hostTag();
  for (fs::directory_iterator End; !EC && It != End; It.increment(EC)) {
    // ckpt-<digits>.mdck.tmp.<host>.<pid>, as writeCheckpoint names them.
    std::string Name = It->path().filename().string();
    const std::string Prefix = "ckpt-", Mid = ".mdck.tmp.";
    size_t At = Name.find(Mid);
    if (Name.compare(0, Prefix.size(), Prefix) != 0 || At == std::string::npos)
      continue;
    std::string Owner = Name.substr(At + Mid.size());
    size_t Dot = Owner.rfind('.');
    if (Dot == std::string::npos || Owner.substr(0, Dot) != Host)
      continue;
    std::string Pid = Owner.substr(Dot + 1);
    if (Pid.empty() || Pid.size() > 9 ||
        !std::all_of(Pid.begin(), Pid.end(),
                     [](char C) { return C >= '0' && C <= '9'; }))
      continue;
    pid_t P = pid_t(std::stol(Pid));
    // A live writer's file (another run's, or this process's) stays.
    if (P == ::getpid() || ::kill(P, 0) == 0 || errno != ESRCH)
      continue;
    Stale.push_back(It->path().string());
  }
  if (EC)
    return Status::error("cannot read checkpoint directory " + quote(Dir) +
                         ": " + EC.message());
  std::sort(Stale.begin(), Stale.end());
  for (const std::string &Path : Stale)
    if (::unlink(Path.c_str()) != 0 && errno != ENOENT)
      return Status::error("cannot remove unfinished checkpoint " +
                           quote(Path) + ": " + std::strerror(errno));
  return int(Stale.size());
}

Status mdrt::pruneCheckpoints(const std::string &Dir, int KeepLast) {
  if (KeepLast < 1)
    return Status::error("keeping " + std::to_string(KeepLast) +
                         " checkpoints: keep at least 1");
  auto Found = listCheckpoints(Dir);
  if (!Found)
    return Found.status();
  size_t Remove =
      Found->size() > size_t(KeepLast) ? Found->size() - size_t(KeepLast) : 0;
  for (size_t I = 0; I < Remove; ++I)
    if (::unlink((*Found)[I].second.c_str()) != 0 && errno != ENOENT)
      return Status::error("cannot remove old checkpoint " +
                           quote((*Found)[I].second) + ": " +
                           std::strerror(errno));
  return Status::ok();
}
