//===- LearningRate.h - The Apply ops' learning rate at a step --*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// Private to the runtime's kernel libraries. The learning rate an Apply op
// (ApplyGradientDescent, ApplyMomentum, ...) uses at a global step, from
// its attributes learning_rate, decay_steps, decay_rate, decay_type,
// staircase, end_learning_rate and power (docs/Ops.md, "State updates"),
// computed in double by the same code on the CPU and, compiled by nvcc, on
// the GPU, which rounds it once to the variable's type. The staircase
// exponential decay (the default) and a polynomial decay of power 1 use
// products only, which round alike on both; a smooth exponential decay and
// other powers call pow, whose CPU and GPU results may differ in the last
// bit of the double.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_LIB_LEARNINGRATE_H
#define MDRT_LIB_LEARNINGRATE_H

#include "KernelChecks.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace mdrt {

struct LearningRate {
  double Rate = 0, DecayRate = 1, End = 1e-4, Power = 1;
  int64_t DecaySteps = 0;
  bool Polynomial = false, Staircase = true;

  /// Reads the attributes (host code).
  Status init(const KernelInfo &I) {
    Rate = I.Attrs.getFloat("learning_rate", 0);
    DecaySteps = I.Attrs.getInt("decay_steps", 0);
    DecayRate = I.Attrs.getFloat("decay_rate", 1.0);
    Staircase = I.Attrs.getBool("staircase", true);
    End = I.Attrs.getFloat("end_learning_rate", 1e-4);
    Power = I.Attrs.getFloat("power", 1.0);
    std::string Type = I.Attrs.getString("decay_type", "exponential");
    if (Type != "exponential" && Type != "polynomial")
      return Status::error("unknown decay_type '" + Type +
                           "' (use exponential or polynomial)");
    Polynomial = Type == "polynomial";
    // mdplan's checks of the optimizer's fields, for a plan made otherwise:
    // each written so that NaN fails it.
    struct {
      const char *Name;
      double Value;
      bool Ok;
      const char *Rule;
    } Checks[] = {
        {"learning_rate", Rate, Rate >= 0, "not negative"},
        {"decay_steps", double(DecaySteps), DecaySteps >= 0, "not negative"},
        {"decay_rate", DecayRate, DecayRate > 0, "positive"},
        {"end_learning_rate", End, End >= 0, "not negative"},
        {"power", Power, Power > 0, "positive"},
    };
    for (const auto &C : Checks)
      if (!C.Ok || !std::isfinite(C.Value)) {
        char Got[32];
        snprintf(Got, sizeof(Got), "%g", C.Value);
        return Status::error(std::string(C.Name) + " must be " + C.Rule +
                             " and finite, got " + Got);
      }
    return Status::ok();
  }

  /// tf.train.exponential_decay (staircase: whole periods) or, polynomial,
  /// tf.train.polynomial_decay without cycles; constant without
  /// decay_steps.
  MDRT_HOST_DEVICE double at(int64_t Step) const {
    if (DecaySteps <= 0)
      return Rate;
    if (Polynomial) {
      int64_t S = Step < DecaySteps ? Step : DecaySteps;
      double Left = 1.0 - double(S) / double(DecaySteps);
      double Scale = Power == 1.0 ? Left : ::pow(Left, Power);
      return (Rate - End) * Scale + End;
    }
    if (Staircase)
      return Rate * integerPower(DecayRate, Step / DecaySteps);
    return Rate * ::pow(DecayRate, double(Step) / double(DecaySteps));
  }
};

} // namespace mdrt

#endif // MDRT_LIB_LEARNINGRATE_H
