//===- checkpoint-fuzzer.cpp - Fuzzing the checkpoint reader --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: a checkpoint file (.mdck). The trailing CRC32 would stop nearly
// every mutation at the checksum, so the target usually recomputes it (as a
// writer that wrote the structure would) and sometimes keeps the input's.
// It parses the checkpoint, checks it against the tensors it holds and
// against a fixed set (model_deploy's LogisticClassifier: weights [4,1],
// biases [1], global_step), and reads every tensor. Rejected checkpoints are
// fine; a crash, a sanitizer report or a hang is not.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace mdrt;

/// Where the sum of the tensors' bytes goes, so that reading them stays.
volatile uint64_t CheckpointSink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::vector<uint8_t> Bytes(Data, Data + Size);
  // The low bit of the last byte before the checksum keeps the checksum as
  // given: a mutation of that byte tries both ways.
  bool Reseal = Size < 5 || (Data[Size - 5] & 1) == 0;
  if (Reseal && Size >= 4) {
    size_t N = Size - 4;
    uint32_t Crc = uint32_t(crc32(0L, Z_NULL, 0));
    // zlib takes at most uInt bytes at a time.
    for (size_t At = 0; At < N;) {
      uInt Chunk = uInt(std::min<size_t>(N - At, 1u << 30));
      Crc = uint32_t(crc32(Crc, Bytes.data() + At, Chunk));
      At += Chunk;
    }
    for (int I = 0; I < 4; ++I)
      Bytes[N + I] = uint8_t(Crc >> (8 * I));
  }
  auto C = parseCheckpoint(Bytes.data(), Bytes.size(), "fuzz.mdck");
  if (!C.isOk())
    return 0;
  const Checkpoint &Ck = *C;
  std::vector<ExpectedTensor> Own;
  uint64_t Sum = 0;
  for (const CheckpointTensor &T : Ck.Tensors) {
    Own.push_back({T.Name, T.Desc});
    for (uint8_t B : T.Data)
      Sum += B;
    (void)Ck.find(T.Name);
  }
  (void)checkCheckpoint(Ck, "fuzz.mdck", Ck.State.PlanFingerprint, Own);
  std::vector<ExpectedTensor> Fixed = {
      {"LogisticClassifier/fully_connected/weights", {DType::Float32, {4, 1}}},
      {"LogisticClassifier/fully_connected/biases", {DType::Float32, {1}}},
      {"global_step", {DType::Int64, {}}}};
  (void)checkCheckpoint(Ck, "fuzz.mdck", Ck.State.PlanFingerprint, Fixed);
  CheckpointSink = Sum; // Keeps the reads.
  return 0;
}
