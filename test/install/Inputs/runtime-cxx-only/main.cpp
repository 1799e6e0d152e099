//===- main.cpp - Prints a plan through the exported runtime --------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Plan.h"

#include <iostream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: print-plan PLAN.mdp\n";
    return 2;
  }
  auto P = mdrt::PlanFile::load(argv[1]);
  if (!P.isOk()) {
    std::cerr << "print-plan: " << P.status().message() << "\n";
    return 1;
  }
  mdrt::printPlanText((*P)->plan(), std::cout);
  return 0;
}
