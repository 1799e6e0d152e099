//===- CheckpointTest.cpp - Checkpoint files ------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Checkpoint.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

using namespace mdrt;
namespace fs = std::filesystem;

namespace {

class TempDir {
public:
  TempDir() {
    std::string Tmpl =
        (fs::temp_directory_path() / "mdrt-ckpt-test-XXXXXX").string();
    std::vector<char> Buf(Tmpl.begin(), Tmpl.end());
    Buf.push_back('\0');
    const char *P = mkdtemp(Buf.data());
    EXPECT_NE(P, nullptr);
    Path = P ? P : "";
  }
  ~TempDir() {
    std::error_code EC;
    fs::remove_all(Path, EC);
  }
  std::string file(const std::string &Name) const { return Path + "/" + Name; }
  std::string Path;
};

void writeBytes(const std::string &Path, const std::vector<uint8_t> &Bytes) {
  std::ofstream Out(Path, std::ios::binary);
  Out.write(reinterpret_cast<const char *>(Bytes.data()),
            std::streamsize(Bytes.size()));
}

std::vector<uint8_t> readBytes(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(In), {});
}

template <typename T> std::string errorOf(const StatusOr<T> &S) {
  return S.isOk() ? "<ok>" : S.status().message();
}
std::string errorOf(const Status &S) { return S.isOk() ? "<ok>" : S.message(); }

#define EXPECT_ERROR_HAS(Expr, Needle)                                         \
  EXPECT_NE(errorOf(Expr).find(Needle), std::string::npos)                     \
      << "message: " << errorOf(Expr) << "\nexpected to contain: " << (Needle)

/// A small model's state: two variables, an optimizer slot, global_step, and
/// odd cases (a scalar, an empty tensor, bools).
struct Fixture {
  std::vector<float> W = {1.5f, -2.25f, 3e-8f, 4, 5, 6};
  std::vector<double> B = {0.125};
  std::vector<float> Slot = {0.5f, 0.25f, 0.125f, 1, 2, 3};
  std::vector<int64_t> GlobalStep = {1234};
  std::vector<int32_t> Counts = {7, -8, 9};
  std::vector<uint8_t> Mask = {1, 0, 1, 1};
  CheckpointState State;

  Fixture() {
    State.PlanFingerprint = 0x0123456789abcdefull;
    State.Step = 1234;
    State.Data = {3, 448};
    State.Seed = 987654321;
    State.DataExamples = 60000;
    State.Shuffled = true;
    State.Synthetic = true;
    State.RawBytes = true;
  }

  std::vector<CheckpointTensorRef> refs() const {
    return {
        {"dense/w", {DType::Float32, {2, 3}}, W.data()},
        {"dense/b", {DType::Float64, {}}, B.data()},
        {"dense/w/momentum", {DType::Float32, {3, 2}}, Slot.data()},
        {"global_step", {DType::Int64, {1}}, GlobalStep.data()},
        {"counts", {DType::Int32, {3}}, Counts.data()},
        {"empty", {DType::Float32, {0, 4}}, nullptr},
        {"mask", {DType::Bool, {2, 2}}, Mask.data()},
    };
  }

  std::vector<ExpectedTensor> expected() const {
    std::vector<ExpectedTensor> E;
    for (const CheckpointTensorRef &R : refs())
      E.push_back({R.Name, R.Desc});
    return E;
  }
};

TEST(CheckpointTest, RoundTrip) {
  TempDir Dir;
  Fixture F;
  std::string Path = Dir.file("a.mdck");
  ASSERT_TRUE(writeCheckpoint(Path, F.State, F.refs()).isOk());
  // Nothing temporary is left behind.
  EXPECT_EQ(
      std::distance(fs::directory_iterator(Dir.Path), fs::directory_iterator()),
      1);

  StatusOr<Checkpoint> C =
      loadCheckpoint(Path, F.State.PlanFingerprint, F.expected());
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_EQ(C->State.PlanFingerprint, F.State.PlanFingerprint);
  EXPECT_EQ(C->State.Step, 1234);
  EXPECT_EQ(C->State.Data, (DataPosition{3, 448}));
  EXPECT_EQ(C->State.Seed, 987654321u);
  EXPECT_EQ(C->State.DataExamples, 60000);
  EXPECT_TRUE(C->State.Shuffled);
  EXPECT_TRUE(C->State.Synthetic);
  EXPECT_TRUE(C->State.RawBytes);
  EXPECT_EQ(C->Version, CheckpointFormatVersion);
  std::vector<CheckpointTensorRef> Refs = F.refs();
  ASSERT_EQ(C->Tensors.size(), Refs.size());
  for (size_t I = 0; I < Refs.size(); ++I) {
    const CheckpointTensor &T = C->Tensors[I];
    EXPECT_EQ(T.Name, Refs[I].Name);
    EXPECT_EQ(T.Desc.Type, Refs[I].Desc.Type);
    EXPECT_EQ(T.Desc.Shape, Refs[I].Desc.Shape);
    ASSERT_EQ(T.Data.size(), Refs[I].Desc.bytes());
    if (!T.Data.empty()) {
      EXPECT_EQ(std::memcmp(T.Data.data(), Refs[I].Data, T.Data.size()), 0)
          << T.Name;
    }
  }
  const CheckpointTensor *Step = C->find("global_step");
  ASSERT_TRUE(Step);
  int64_t S;
  std::memcpy(&S, Step->Data.data(), 8);
  EXPECT_EQ(S, 1234);
  EXPECT_EQ(C->find("nope"), nullptr);

  // The file is exactly the encoding; the in-memory overload writes the
  // same bytes.
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  EXPECT_EQ(readBytes(Path), *Enc);
  ASSERT_TRUE(writeCheckpoint(Dir.file("b.mdck"), *C).isOk());
  EXPECT_EQ(readBytes(Dir.file("b.mdck")), *Enc);
}

/// A tensor of \p Values of type \p T.
template <typename T>
CheckpointTensor tensorOf(DType Type, std::vector<T> Values) {
  CheckpointTensor C;
  C.Name = "t";
  C.Desc = {Type, {int64_t(Values.size())}};
  C.Data.resize(Values.size() * sizeof(T));
  if (!Values.empty())
    std::memcpy(C.Data.data(), Values.data(), C.Data.size());
  return C;
}

TEST(CheckpointTest, SummarizeTensor) {
  // The statistics are over the finite values; NaNs and infinities are
  // counted apart, and zeros among the finite.
  TensorSummary S = summarizeTensor(tensorOf<float>(
      DType::Float32, {3.0f, -1.0f, 0.0f, NAN, INFINITY, -INFINITY, 2.0f}));
  EXPECT_EQ(S.Elements, 7);
  EXPECT_EQ(S.NaNs, 1);
  EXPECT_EQ(S.Infinities, 2);
  EXPECT_EQ(S.Zeros, 1);
  EXPECT_EQ(S.Min, -1.0);
  EXPECT_EQ(S.Max, 3.0);
  EXPECT_DOUBLE_EQ(S.Mean, 1.0);
  EXPECT_DOUBLE_EQ(S.Rms, std::sqrt(14.0 / 4));

  S = summarizeTensor(tensorOf<double>(DType::Float64, {-0.25, -0.75}));
  EXPECT_EQ(S.Min, -0.75);
  EXPECT_EQ(S.Max, -0.25);
  EXPECT_EQ(S.Mean, -0.5);
  EXPECT_EQ(S.Zeros, 0);

  // Integers as integers; a scalar's every statistic is its value.
  S = summarizeTensor(tensorOf<int64_t>(DType::Int64, {int64_t(1) << 40}));
  EXPECT_EQ(S.Min, double(int64_t(1) << 40));
  EXPECT_EQ(S.Rms, double(int64_t(1) << 40));
  S = summarizeTensor(tensorOf<int32_t>(DType::Int32, {-4, 0, 4}));
  EXPECT_EQ(S.Min, -4.0);
  EXPECT_EQ(S.Mean, 0.0);
  EXPECT_EQ(S.Zeros, 1);

  // Nothing finite: every statistic 0.
  S = summarizeTensor(tensorOf<float>(DType::Float32, {NAN, NAN}));
  EXPECT_EQ(S.NaNs, 2);
  EXPECT_EQ(S.Min, 0.0);
  EXPECT_EQ(S.Max, 0.0);
  EXPECT_EQ(S.Mean, 0.0);

  // No value at all.
  S = summarizeTensor(tensorOf<float>(DType::Float32, {}));
  EXPECT_EQ(S.Elements, 0);
  EXPECT_EQ(S.Rms, 0.0);

  // Bool as 0 and 1.
  S = summarizeTensor(tensorOf<uint8_t>(DType::Bool, {1, 0, 1, 1}));
  EXPECT_EQ(S.Zeros, 1);
  EXPECT_EQ(S.Max, 1.0);
  EXPECT_EQ(S.Mean, 0.75);

  // -0 counts as a zero and is +0 in the range.
  S = summarizeTensor(tensorOf<float>(DType::Float32, {-0.0f, -0.0f}));
  EXPECT_EQ(S.Zeros, 2);
  EXPECT_FALSE(std::signbit(S.Min));
  EXPECT_FALSE(std::signbit(S.Max));

  // Finite values whose squares (and sum) overflow a double.
  S = summarizeTensor(tensorOf<double>(DType::Float64, {1e300, 1e300, -1e300}));
  EXPECT_EQ(S.Infinities, 0);
  EXPECT_DOUBLE_EQ(S.Mean, 1e300 / 3);
  EXPECT_DOUBLE_EQ(S.Rms, 1e300);
  S = summarizeTensor(tensorOf<double>(DType::Float64, {1.7e308, 1.7e308}));
  EXPECT_DOUBLE_EQ(S.Mean, 1.7e308);
  EXPECT_DOUBLE_EQ(S.Rms, 1.7e308);
  // And subnormal ones, whose squares underflow.
  S = summarizeTensor(tensorOf<double>(DType::Float64, {1e-310, -1e-310}));
  EXPECT_EQ(S.Mean, 0.0);
  EXPECT_DOUBLE_EQ(S.Rms, 1e-310);
}

TEST(CheckpointTest, Layout) {
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  const std::vector<uint8_t> &B = *Enc;
  ASSERT_GE(B.size(), 92u);
  EXPECT_EQ(std::string(B.begin(), B.begin() + 8), "MDRTCKPT");
  EXPECT_EQ(B[8], 3); // Version, little-endian.
  EXPECT_EQ(B[12], 88);
  uint64_t Size;
  std::memcpy(&Size, B.data() + 16, 8);
  EXPECT_EQ(Size, B.size());
  EXPECT_EQ(B[24], 0xef); // Fingerprint, little-endian.
  // The training data: flags (bit 0: shuffled, bit 1: synthetic, bit 2:
  // bytes unscaled), then the examples.
  EXPECT_EQ(B[68], 7);
  int64_t Examples;
  std::memcpy(&Examples, B.data() + 72, 8);
  EXPECT_EQ(Examples, 60000);
  // The first tensor's data sits at an 8-byte aligned offset: 88 + 4 + 7
  // (name) + 4 + 2 * 8 (dims) + 8 (size) = 127, padded to 128.
  float W0;
  std::memcpy(&W0, B.data() + 128, 4);
  EXPECT_EQ(W0, 1.5f);
  // An empty checkpoint is just the header and the checksum.
  StatusOr<std::vector<uint8_t>> Empty = encodeCheckpoint({}, {});
  ASSERT_TRUE(Empty.isOk());
  EXPECT_EQ(Empty->size(), 92u);
  StatusOr<Checkpoint> C = parseCheckpoint(Empty->data(), Empty->size(), "e");
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_TRUE(C->Tensors.empty());
}

TEST(CheckpointTest, EveryFlippedByteIsDetected) {
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  for (size_t I = 0; I < Enc->size(); ++I) {
    for (uint8_t Mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::vector<uint8_t> Bad = *Enc;
      Bad[I] ^= Mask;
      StatusOr<Checkpoint> C = parseCheckpoint(Bad.data(), Bad.size(), "x");
      EXPECT_FALSE(C.isOk()) << "byte " << I << " mask " << int(Mask);
    }
  }
  // Past the header, a flip is a checksum mismatch.
  std::vector<uint8_t> Bad = *Enc;
  Bad[200] ^= 4;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "x"),
                   "checkpoint 'x' is corrupt: checksum mismatch (stored 0x");
  Bad = *Enc;
  Bad.back() ^= 4;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "x"),
                   "checksum mismatch");

  // On disk too.
  TempDir Dir;
  std::string Path = Dir.file("c.mdck");
  ASSERT_TRUE(writeCheckpoint(Path, F.State, F.refs()).isOk());
  std::vector<uint8_t> Disk = readBytes(Path);
  Disk[Disk.size() / 2] ^= 0x10;
  writeBytes(Path, Disk);
  EXPECT_ERROR_HAS(readCheckpoint(Path),
                   "checkpoint '" + Path + "' is corrupt: checksum mismatch");
}

TEST(CheckpointTest, TruncationIsDetected) {
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  size_t N = Enc->size();
  for (size_t Len = 0; Len < N; ++Len) {
    StatusOr<Checkpoint> C = parseCheckpoint(Enc->data(), Len, "t");
    ASSERT_FALSE(C.isOk()) << "length " << Len;
    EXPECT_ERROR_HAS(C, "checkpoint 't' is truncated") << "length " << Len;
  }
  EXPECT_ERROR_HAS(parseCheckpoint(Enc->data(), 0, "t"),
                   "checkpoint 't' is truncated: 0 bytes, fewer than the "
                   "smallest checkpoint (76)");
  // Longer than the smallest (a version 1 header), shorter than this
  // version's header and checksum.
  EXPECT_ERROR_HAS(parseCheckpoint(Enc->data(), 80, "t"),
                   "checkpoint 't' is truncated: 80 bytes, fewer than its "
                   "header and checksum (92)");
  EXPECT_ERROR_HAS(parseCheckpoint(Enc->data(), N - 1, "t"),
                   "checkpoint 't' is truncated: " + std::to_string(N - 1) +
                       " bytes of " + std::to_string(N));

  TempDir Dir;
  std::string Path = Dir.file("t.mdck");
  for (size_t Len : {size_t(5), size_t(72), N / 3, N - 4}) {
    writeBytes(Path,
               std::vector<uint8_t>(Enc->begin(), Enc->begin() + long(Len)));
    EXPECT_ERROR_HAS(readCheckpoint(Path),
                     "checkpoint '" + Path + "' is truncated")
        << "length " << Len;
  }
  // Bytes appended are refused too.
  std::vector<uint8_t> Long = *Enc;
  Long.push_back(0);
  EXPECT_ERROR_HAS(parseCheckpoint(Long.data(), Long.size(), "l"),
                   "checkpoint 'l' is corrupt: " + std::to_string(N + 1) +
                       " bytes, but its header says " + std::to_string(N));
}

/// \p V2 rewritten as a version 1 file: a 72-byte header without the data
/// description, the file size and checksum redone.
static std::vector<uint8_t> asVersion1(const std::vector<uint8_t> &V2) {
  std::vector<uint8_t> V1(V2.begin(), V2.begin() + 68);
  V1.insert(V1.end(), 4, 0); // reserved
  V1.insert(V1.end(), V2.begin() + 88, V2.end() - 4);
  uint32_t Version = 1, Header = 72;
  uint64_t Size = V1.size() + 4;
  std::memcpy(V1.data() + 8, &Version, 4);
  std::memcpy(V1.data() + 12, &Header, 4);
  std::memcpy(V1.data() + 16, &Size, 8);
  uint32_t Crc = uint32_t(crc32(0, V1.data(), uInt(V1.size())));
  for (int I = 0; I < 4; ++I)
    V1.push_back(uint8_t(Crc >> (8 * I)));
  return V1;
}

TEST(CheckpointTest, ReadsVersion1) {
  // Written by runtimes before the data description: the same state and
  // tensors, the training data not recorded. Tensor data stays 8-aligned
  // (the header shrinks by 16).
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  std::vector<uint8_t> V1 = asVersion1(*Enc);
  StatusOr<Checkpoint> C = parseCheckpoint(V1.data(), V1.size(), "v1");
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_EQ(C->State.Step, 1234);
  EXPECT_EQ(C->State.Data, (DataPosition{3, 448}));
  EXPECT_EQ(C->State.DataExamples, -1);
  ASSERT_EQ(C->Tensors.size(), F.refs().size());
  EXPECT_EQ(C->find("dense/w")->Data.size(), 24u);
  EXPECT_EQ(std::memcmp(C->find("dense/w")->Data.data(), F.W.data(), 24), 0);
  // Its smallest file is the smallest checkpoint.
  EXPECT_ERROR_HAS(parseCheckpoint(V1.data(), 75, "v1"),
                   "checkpoint 'v1' is truncated: 75 bytes, fewer than the "
                   "smallest checkpoint (76)");
}

/// Little-endian field of \p Bytes at \p Off.
template <typename T> void putLE(std::vector<uint8_t> &Bytes, size_t Off, T V) {
  for (size_t I = 0; I < sizeof(T); ++I)
    Bytes[Off + I] = uint8_t(uint64_t(V) >> (8 * I));
}

/// Recomputes the trailing CRC32, as a writer that wrote the structure
/// wrong would have: what parseCheckpoint finds is then past the checksum.
void reseal(std::vector<uint8_t> &Bytes) {
  size_t N = Bytes.size() - 4;
  uint32_t Crc = uint32_t(crc32(crc32(0, nullptr, 0), Bytes.data(), uInt(N)));
  putLE<uint32_t>(Bytes, N, Crc);
}

TEST(CheckpointTest, HeaderErrors) {
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  std::vector<uint8_t> Bad = *Enc;
  Bad[0] = 'X';
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "m"),
                   "checkpoint 'm' is not a checkpoint (bad magic)");
  // A newer version's file is whole (its checksum holds); the same field
  // changed in this version's file is damage.
  Bad = *Enc;
  Bad[8] = 4;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "v"),
                   "checkpoint 'v' is corrupt: format version 4 and a "
                   "checksum mismatch (stored 0x");
  reseal(Bad);
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "v"),
                   "checkpoint 'v' has format version 4; this runtime reads "
                   "versions 1 to 3");
  Bad[8] = 0;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "v"),
                   "checkpoint 'v' is corrupt: format version 0");
  Bad = *Enc;
  Bad[12] = 72;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "h"),
                   "checkpoint 'h' is corrupt: header size 72, expected 88");

  // Damage, told from a version this runtime does not read.
  bool Damaged = false;
  EXPECT_FALSE(parseCheckpoint(Bad.data(), Bad.size(), "h", &Damaged).isOk());
  EXPECT_TRUE(Damaged);
  Bad = *Enc;
  Bad[8] = 4;
  EXPECT_FALSE(parseCheckpoint(Bad.data(), Bad.size(), "v", &Damaged).isOk());
  EXPECT_TRUE(Damaged);
  reseal(Bad);
  EXPECT_FALSE(parseCheckpoint(Bad.data(), Bad.size(), "v", &Damaged).isOk());
  EXPECT_FALSE(Damaged);
  // Version 0, or one no format reaches (a damaged field): damaged.
  Bad[8] = 0;
  EXPECT_FALSE(parseCheckpoint(Bad.data(), Bad.size(), "v", &Damaged).isOk());
  EXPECT_TRUE(Damaged);
  Bad[8] = 3;
  Bad[11] = 0x10;
  EXPECT_ERROR_HAS(parseCheckpoint(Bad.data(), Bad.size(), "v", &Damaged),
                   "checkpoint 'v' is corrupt: format version 268435459");
  EXPECT_TRUE(Damaged);
  EXPECT_FALSE(parseCheckpoint(Enc->data(), 50, "t", &Damaged).isOk());
  EXPECT_TRUE(Damaged);
  EXPECT_TRUE(parseCheckpoint(Enc->data(), Enc->size(), "ok", &Damaged).isOk());
  EXPECT_FALSE(Damaged);

  TempDir Dir;
  Damaged = true;
  EXPECT_ERROR_HAS(readCheckpoint(Dir.file("none"), &Damaged),
                   "cannot open checkpoint '" + Dir.file("none") +
                       "': No such file or directory");
  EXPECT_FALSE(Damaged);
}

TEST(CheckpointTest, ReadsVersion2) {
  // Version 2 has the layout of version 3. Flag bit 2 (bytes read
  // unscaled) is version 3's, but the runtime of 2026-11-27 wrote it in
  // version 2 files: read either way.
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  std::vector<uint8_t> V2 = *Enc;
  ASSERT_GE(V2.size(), 92u);
  V2[8] = 2; // The version, little-endian.
  ASSERT_EQ(V2[68], 7);
  reseal(V2);
  StatusOr<Checkpoint> C = parseCheckpoint(V2.data(), V2.size(), "v2");
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_EQ(C->Version, 2u);
  EXPECT_TRUE(C->State.RawBytes);
  V2[68] = 3;
  reseal(V2);
  C = parseCheckpoint(V2.data(), V2.size(), "v2");
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_EQ(C->Version, 2u);
  EXPECT_TRUE(C->State.Shuffled);
  EXPECT_TRUE(C->State.Synthetic);
  EXPECT_FALSE(C->State.RawBytes);
  EXPECT_EQ(C->State.DataExamples, 60000);
  EXPECT_EQ(C->State.Step, 1234);
  V2[68] = 11;
  reseal(V2);
  EXPECT_ERROR_HAS(parseCheckpoint(V2.data(), V2.size(), "v2"),
                   "checkpoint 'v2' is corrupt: unknown flags 0x0000000b");
}

TEST(CheckpointTest, StructureErrorsBehindAValidChecksum) {
  Fixture F;
  StatusOr<std::vector<uint8_t>> Enc = encodeCheckpoint(F.State, F.refs());
  ASSERT_TRUE(Enc.isOk());
  // The first tensor, "dense/w" float32[2,3], starts at offset 88: its
  // name length (4 bytes), name (7), dtype, rank, 2 reserved bytes, dims
  // (2 x 8), data size (8).
  const size_t Tensor0 = 88, DType0 = Tensor0 + 4 + 7, Dims0 = DType0 + 4,
               Size0 = Dims0 + 16;
  auto Parse = [](std::vector<uint8_t> B) {
    reseal(B);
    return errorOf(parseCheckpoint(B.data(), B.size(), "c"));
  };
  std::vector<uint8_t> B = *Enc;
  EXPECT_EQ(Parse(B), "<ok>");

  B = *Enc;
  putLE<uint32_t>(B, 12, 80);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: header size 80, expected 88");
  // Header fields no writer records.
  B = *Enc;
  putLE<int64_t>(B, 32, -5);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: step -5");
  B = *Enc;
  putLE<int64_t>(B, 48, -1);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: data position epoch 3, "
                      "index -1");
  B = *Enc;
  putLE<uint32_t>(B, 68, 9);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: unknown flags 0x00000009");
  B = *Enc;
  putLE<int64_t>(B, 72, -2);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: -2 training examples");
  B = *Enc;
  B[DType0] = 9;
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: tensor 'dense/w' has "
                      "unknown dtype 9 (at offset 103)");
  B = *Enc;
  putLE<int64_t>(B, Dims0, -2);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: tensor 'dense/w' has a "
                      "negative dim (at offset 111)");
  B = *Enc;
  putLE<int64_t>(B, Dims0, int64_t(1) << 59);
  putLE<int64_t>(B, Dims0 + 8, 64);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: tensor 'dense/w' is too "
                      "large (at offset 119)");
  B = *Enc;
  putLE<uint64_t>(B, Size0, 20);
  EXPECT_EQ(Parse(B), "checkpoint 'c' is corrupt: tensor 'dense/w' "
                      "float32[2,3] says it has 20 bytes of data (at offset "
                      "127)");
  // "dense/b" (the second tensor) renamed "dense/w".
  B = *Enc;
  auto At = std::search(B.begin(), B.end(), std::begin("dense/b"),
                        std::end("dense/b") - 1);
  ASSERT_NE(At, B.end());
  *(At + 6) = 'w';
  EXPECT_EQ(Parse(B).rfind("checkpoint 'c' is corrupt: tensor 'dense/w' "
                           "appears twice (at offset ",
                           0),
            0u)
      << Parse(B);
  // A tensor count that disagrees with the tensors.
  B = *Enc;
  putLE<uint32_t>(B, 64, uint32_t(F.refs().size() - 1));
  EXPECT_EQ(Parse(B).rfind("checkpoint 'c' is corrupt: ", 0), 0u);
  EXPECT_NE(Parse(B).find(" unused bytes before the checksum (at offset "),
            std::string::npos)
      << Parse(B);
  B = *Enc;
  putLE<uint32_t>(B, 64, uint32_t(F.refs().size() + 1));
  EXPECT_EQ(Parse(B).rfind("checkpoint 'c' is corrupt: tensor " +
                               std::to_string(F.refs().size()) +
                               " is cut off (at offset ",
                           0),
            0u)
      << Parse(B);
}

TEST(CheckpointTest, PlanMismatches) {
  TempDir Dir;
  Fixture F;
  std::string Path = Dir.file("p.mdck");
  ASSERT_TRUE(writeCheckpoint(Path, F.State, F.refs()).isOk());
  StatusOr<Checkpoint> C = readCheckpoint(Path);
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  std::string What = "checkpoint '" + Path + "'";

  EXPECT_TRUE(
      checkCheckpoint(*C, Path, F.State.PlanFingerprint, F.expected()).isOk());
  EXPECT_ERROR_HAS(loadCheckpoint(Path, 0x42, F.expected()),
                   What + " was written for another plan (fingerprint "
                          "0x0123456789abcdef, this plan has "
                          "0x0000000000000042)");

  uint64_t FP = F.State.PlanFingerprint;
  std::vector<ExpectedTensor> E = F.expected();
  E[0].Desc.Type = DType::Float64;
  EXPECT_ERROR_HAS(checkCheckpoint(*C, Path, FP, E),
                   "tensor 'dense/w' is float32[2,3] in " + What +
                       ", but the plan has float64[2,3]");
  E = F.expected();
  E[2].Desc.Shape = {2, 3};
  EXPECT_ERROR_HAS(checkCheckpoint(*C, Path, FP, E),
                   "tensor 'dense/w/momentum' is float32[3,2] in " + What +
                       ", but the plan has float32[2,3]");
  E = F.expected();
  E.push_back({"dense2/w", {DType::Float32, {4}}});
  EXPECT_ERROR_HAS(checkCheckpoint(*C, Path, FP, E),
                   What + " has no tensor 'dense2/w' (the plan has "
                          "float32[4])");
  E = F.expected();
  E.erase(E.begin() + 3);
  EXPECT_ERROR_HAS(checkCheckpoint(*C, Path, FP, E),
                   What + " has tensor 'global_step' int64[1] that the plan "
                          "does not have");
  // Several problems: the first is named, the others counted.
  E = F.expected();
  E[0].Desc.Shape = {6};
  E[1].Desc.Type = DType::Float32;
  E.pop_back();
  EXPECT_ERROR_HAS(checkCheckpoint(*C, Path, FP, E),
                   "tensor 'dense/w' is float32[2,3] in " + What +
                       ", but the plan has float32[6] (and 2 more "
                       "mismatches)");
  // Order does not matter.
  E = F.expected();
  std::reverse(E.begin(), E.end());
  EXPECT_TRUE(checkCheckpoint(*C, Path, FP, E).isOk());
}

TEST(CheckpointTest, WriteErrors) {
  TempDir Dir;
  Fixture F;
  std::string Missing = Dir.file("no/such/dir/x.mdck");
  Status S = writeCheckpoint(Missing, F.State, F.refs());
  EXPECT_ERROR_HAS(S, "cannot create '" + Missing + ".tmp.");

  std::vector<CheckpointTensorRef> Twice = F.refs();
  Twice.push_back(Twice.front());
  std::string Path = Dir.file("d.mdck");
  EXPECT_ERROR_HAS(writeCheckpoint(Path, F.State, Twice),
                   "writing checkpoint '" + Path +
                       "': tensor 'dense/w' is given twice");
  // A failed write leaves neither the file nor a temporary.
  EXPECT_TRUE(fs::is_empty(Dir.Path));

  std::vector<CheckpointTensorRef> NoData = F.refs();
  NoData[0].Data = nullptr;
  EXPECT_ERROR_HAS(encodeCheckpoint(F.State, NoData),
                   "tensor 'dense/w' has no data");

  // Tensors the format cannot describe.
  std::vector<CheckpointTensorRef> Bad = F.refs();
  Bad[0].Desc.Type = DType::Invalid;
  EXPECT_EQ(errorOf(encodeCheckpoint(F.State, Bad)),
            "tensor 'dense/w' has unknown dtype 0");
  Bad = F.refs();
  Bad[0].Desc.Shape.assign(256, 1);
  EXPECT_EQ(errorOf(encodeCheckpoint(F.State, Bad)),
            "tensor 'dense/w' has rank 256, more than 255");
  Bad = F.refs();
  Bad[0].Desc.Shape = {2, -3};
  EXPECT_EQ(errorOf(encodeCheckpoint(F.State, Bad)),
            "tensor 'dense/w' has a negative dim: float32[2,-3]");

  // A directory where the checkpoint goes: the rename fails, and the
  // temporary is removed.
  std::string Taken = Dir.file("taken.mdck");
  ASSERT_TRUE(fs::create_directory(Taken));
  std::string Tmp = checkpointTemporaryPath(Taken);
  EXPECT_EQ(Tmp.rfind(Taken + ".tmp.", 0), 0u) << Tmp;
  EXPECT_EQ(Tmp.substr(Tmp.rfind('.') + 1), std::to_string(getpid()));
  EXPECT_EQ(errorOf(writeCheckpoint(Taken, F.State, F.refs())),
            "writing checkpoint '" + Taken + "': cannot rename '" + Tmp +
                "' to '" + Taken + "': Is a directory");
  EXPECT_FALSE(fs::exists(Tmp));
  fs::remove(Taken);

  // Overwriting replaces the old checkpoint.
  ASSERT_TRUE(writeCheckpoint(Path, F.State, F.refs()).isOk());
  CheckpointState Later = F.State;
  Later.Step = 2000;
  ASSERT_TRUE(writeCheckpoint(Path, Later, F.refs()).isOk());
  StatusOr<Checkpoint> C = readCheckpoint(Path);
  ASSERT_TRUE(C.isOk()) << errorOf(C);
  EXPECT_EQ(C->State.Step, 2000);
}

TEST(CheckpointTest, Directories) {
  TempDir Dir;
  Fixture F;
  EXPECT_EQ(checkpointFileName(1200), "ckpt-000000001200.mdck");
  StatusOr<std::string> Latest = latestCheckpoint(Dir.file("absent"));
  ASSERT_TRUE(Latest.isOk());
  EXPECT_EQ(*Latest, "");
  for (int64_t Step : {300, 100, 1000, 200}) {
    CheckpointState S = F.State;
    S.Step = Step;
    ASSERT_TRUE(writeCheckpoint(Dir.file(checkpointFileName(Step)), S, F.refs())
                    .isOk());
  }
  // Not checkpoints of the directory.
  writeBytes(Dir.file("ckpt-000000005000.mdck.tmp.77"), {1});
  writeBytes(Dir.file("ckpt-abc.mdck"), {1});
  writeBytes(Dir.file("notes.txt"), {1});

  auto List = listCheckpoints(Dir.Path);
  ASSERT_TRUE(List.isOk()) << errorOf(List);
  ASSERT_EQ(List->size(), 4u);
  EXPECT_EQ((*List)[0].first, 100);
  EXPECT_EQ((*List)[3].first, 1000);
  Latest = latestCheckpoint(Dir.Path);
  ASSERT_TRUE(Latest.isOk());
  EXPECT_EQ(*Latest, Dir.file("ckpt-000000001000.mdck"));

  ASSERT_TRUE(pruneCheckpoints(Dir.Path, 2).isOk());
  List = listCheckpoints(Dir.Path);
  ASSERT_TRUE(List.isOk());
  ASSERT_EQ(List->size(), 2u);
  EXPECT_EQ((*List)[0].first, 300);
  EXPECT_EQ((*List)[1].first, 1000);
  EXPECT_TRUE(fs::exists(Dir.file("notes.txt")));
  EXPECT_EQ(errorOf(pruneCheckpoints(Dir.Path, 0)),
            "keeping 0 checkpoints: keep at least 1");

  // A directory named like the oldest checkpoint cannot be removed.
  std::string Old = Dir.file(checkpointFileName(10));
  ASSERT_TRUE(fs::create_directory(Old));
  EXPECT_EQ(errorOf(pruneCheckpoints(Dir.Path, 2)),
            "cannot remove old checkpoint '" + Old + "': Is a directory");

  // A file where the directory should be.
  std::string File = Dir.file("notes.txt");
  EXPECT_EQ(errorOf(listCheckpoints(File)),
            "cannot read checkpoint directory '" + File + "': Not a directory");
  EXPECT_EQ(errorOf(latestCheckpoint(File)),
            "cannot read checkpoint directory '" + File + "': Not a directory");
}

TEST(CheckpointTest, StaleTemporaries) {
  TempDir Dir;
  // A process that has exited: its pid names no process (until reused,
  // which the test cannot rule out but which takes a full pid cycle).
  pid_t Dead = fork();
  ASSERT_GE(Dead, 0);
  if (Dead == 0)
    _exit(0);
  ASSERT_EQ(waitpid(Dead, nullptr, 0), Dead);
  // Named as this host's writers name them: <checkpoint>.tmp.<host>.<pid>.
  auto Temp = [&](const std::string &Checkpoint, pid_t Pid) {
    std::string T = checkpointTemporaryPath(Dir.file(Checkpoint));
    return T.substr(0, T.rfind('.') + 1) + std::to_string(Pid);
  };
  std::string Gone = Temp("ckpt-000000000004.mdck", Dead);
  std::string Mine = Temp("ckpt-000000000008.mdck", getpid());
  std::string Parent = Temp("ckpt-000000000012.mdck", getppid());
  // Another host's writer (its pid means nothing here), and a file of the
  // runtimes before the host was in the name.
  std::string OtherHost =
      Dir.file("ckpt-000000000016.mdck.tmp.elsewhere." + std::to_string(Dead));
  std::string Legacy =
      Dir.file("ckpt-000000000020.mdck.tmp." + std::to_string(Dead));
  std::vector<std::string> Kept = {Mine,
                                   Parent,
                                   OtherHost,
                                   Legacy,
                                   Dir.file("ckpt-000000000004.mdck"),
                                   Dir.file("ckpt-1.mdck.tmp.x"),
                                   Dir.file("other.tmp.1")};
  writeBytes(Gone, {1});
  for (const std::string &P : Kept)
    writeBytes(P, {1});
  StatusOr<int> Removed = removeStaleTemporaries(Dir.Path);
  ASSERT_TRUE(Removed.isOk()) << errorOf(Removed);
  EXPECT_EQ(*Removed, 1);
  EXPECT_FALSE(fs::exists(Gone));
  for (const std::string &P : Kept)
    EXPECT_TRUE(fs::exists(P)) << P;
  Removed = removeStaleTemporaries(Dir.file("absent"));
  ASSERT_TRUE(Removed.isOk());
  EXPECT_EQ(*Removed, 0);
  std::string File = Dir.file("other.tmp.1");
  EXPECT_EQ(errorOf(removeStaleTemporaries(File)),
            "cannot read checkpoint directory '" + File + "': Not a directory");
}

} // namespace
