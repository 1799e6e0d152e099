//===- data-fuzzer.cpp - Fuzzing the IDX reader and example conversion ----===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: an IDX file (the Fashion-MNIST format, uncompressed). The target
// parses it and, when it loads, feeds it to a float32 input of the same
// per-example size (bytes scaled to [0, 1]) and to an int32 label input
// with 10 classes, converting the last examples as the batch iterator
// would. Rejected files are fine; a crash, a sanitizer report or a hang is
// not.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Data.h"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace mdrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  auto A = parseIdx(Data, Size, "fuzz-idx1-ubyte");
  if (!A.isOk())
    return 0;
  Feature F;
  F.Name = "x";
  F.Source = "fuzz-idx1-ubyte";
  F.Array = A.take();
  (void)F.Array.str();
  Dataset D;
  if (!D.addFeature(F).isOk())
    return 0;
  FeatureRequest Float;
  Float.Feature = "x";
  Float.Type = DType::Float32;
  Float.Shape = F.exampleShape();
  FeatureRequest Label = Float;
  Label.Type = DType::Int32;
  Label.NumClasses = 10;
  int64_t Count = std::min<int64_t>(F.numExamples(), 4);
  std::vector<int64_t> Indices;
  for (int64_t I = 0; I < Count; ++I)
    Indices.push_back(F.numExamples() - 1 - I);
  for (const FeatureRequest &R : {Float, Label}) {
    if (!D.checkRequest(R).isOk())
      continue;
    std::vector<uint8_t> Out(R.exampleBytes() * size_t(Count));
    convertExamples(*D.find("x"), R, Indices.data(), Count, Out.data());
  }
  return 0;
}
