//===- deploy-fuzzer.cpp - Fuzzing the deployment config reader -----------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Input: a deployment config in the text format (mdplan --config). The
// target compares the reader's own text parser with protobuf's on it (as
// the model target does), reads and validates it, compiles a small model
// (model_deploy's BatchNormClassifier, examples/batchnorm_classifier.mdg:
// variables, update ops and an output to place) for it and runs the plan once
// on the CPU. A config the reader, the validation or a pass rejects is fine; a
// crash, a sanitizer report, an internal error, the parsers disagreeing or a
// hang is not.
//
//===----------------------------------------------------------------------===//

#include "FuzzCompile.h"
#include "TextProtoMutator.h"

#include "mdplan/Frontend/ModelReader.h"

using namespace mdplan;

static const char *const Model = R"(
name: "BatchNormClassifier"
training {
  batch_size: 16
  optimizer { kind: SGD learning_rate: 1.0 }
}
node { name: "inputs" op: "Input" data { feature: "x" shape: [4] } }
node { name: "labels" op: "Input" data { feature: "y" shape: [1] } }
scope {
  name: "BatchNormClassifier"
  scope {
    name: "BatchNorm"
    node {
      name: "beta" op: "Variable"
      variable { shape: [4] initializer { kind: ZEROS } }
    }
    node {
      name: "moving_mean" op: "Variable"
      variable { shape: [4] initializer { kind: ZEROS } trainable: false }
    }
    node {
      name: "moving_variance" op: "Variable"
      variable { shape: [4] initializer { kind: ONES } trainable: false }
    }
    node { name: "BatchNorm" op: "BatchNorm" input: "inputs" input: "beta" }
    node {
      name: "AssignMovingAvg" op: "AssignMovingAverage"
      input: "moving_mean" input: "BatchNorm:1"
      attr { name: "decay" f: 0.1 }
    }
    node {
      name: "AssignMovingAvg_1" op: "AssignMovingAverage"
      input: "moving_variance" input: "BatchNorm:2"
      attr { name: "decay" f: 0.1 }
    }
  }
  scope {
    name: "fully_connected"
    node { name: "weights" op: "Variable" variable { shape: [4, 1] } }
    node {
      name: "biases" op: "Variable"
      variable { shape: [1] initializer { kind: ZEROS } }
    }
    node {
      name: "MatMul" op: "MatMul"
      input: "BatchNorm/BatchNorm" input: "weights"
    }
    node { name: "BiasAdd" op: "BiasAdd" input: "MatMul" input: "biases" }
    node { name: "Sigmoid" op: "Sigmoid" input: "BiasAdd" }
  }
  scope {
    name: "log_loss"
    node {
      name: "LogLoss" op: "LogLoss"
      input: "fully_connected/Sigmoid" input: "labels"
    }
    node { name: "value" op: "Mean" input: "LogLoss" }
  }
  node {
    name: "accuracy" op: "Accuracy"
    input: "fully_connected/Sigmoid" input: "labels"
  }
}
loss: "BatchNormClassifier/log_loss/value"
update_op: "BatchNormClassifier/BatchNorm/AssignMovingAvg"
update_op: "BatchNormClassifier/BatchNorm/AssignMovingAvg_1"
output { name: "accuracy" tensor: "BatchNormClassifier/accuracy" }
)";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  std::string Difference = checkTextFastPath(Text, TextFileKind::Deployment);
  if (!Difference.empty())
    fuzz::bug("the text parsers disagree: " + Difference);
  DeploymentConfig C;
  llvm::Error E = readDeploymentBuffer(Text, "fuzz.cfg", C);
  if (!E)
    E = C.validate();
  if (E) {
    fuzz::rejected(std::move(E));
    return 0;
  }
  // Large counts only make the fuzzer slow.
  if (C.NumClones > 16 || C.NumPsTasks > 16 || C.NumReplicas > 16)
    return 0;
  auto G = readModelBuffer(Model, "model.mdg", {});
  if (!G)
    fuzz::bug("fuzz target bug: " + llvm::toString(G.takeError()));
  fuzz::compileAndRun(std::move(*G), C);
  return 0;
}

/// libFuzzer's own mutation (absent without libFuzzer: weak).
extern "C" size_t LLVMFuzzerMutate(uint8_t *Data, size_t Size, size_t MaxSize)
    __attribute__((weak));

/// Three mutations in four change the parsed message (TextProtoMutator.cpp);
/// the others, and inputs that do not parse, are libFuzzer's byte mutations.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *Data, size_t Size,
                                          size_t MaxSize, unsigned Seed) {
  static const std::vector<std::string> NoStrings;
  if (Seed % 4 != 0)
    if (size_t N = fuzz::mutateTextProto("mdplan.desc.Deployment", Data, Size,
                                         MaxSize, Seed, NoStrings))
      return N;
  return LLVMFuzzerMutate ? LLVMFuzzerMutate(Data, Size, MaxSize) : Size;
}
