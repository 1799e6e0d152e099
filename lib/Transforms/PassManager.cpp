//===- PassManager.cpp - Pass registry and pipelines ----------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/Frontend/ModelWriter.h"
#include "mdplan/Transforms/Pass.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Timer.h"

using namespace llvm;
using namespace mdplan;

Pass::~Pass() = default;

Error Pass::setOption(StringRef Key, StringRef Value) {
  return makeError("pass '" + getName() + "' has no option '" + Key + "'");
}

ArrayRef<PassInfo> mdplan::registeredPasses() {
  static const std::vector<PassInfo> Infos = [] {
    std::vector<PassInfo> R;
#define MDPLAN_PASS(ARG, CLASS, SUMMARY)                                       \
  R.push_back(PassInfo{ARG, SUMMARY, {}, true});
#define MDPLAN_EXTRA_PASS(ARG, CLASS, SUMMARY)                                 \
  R.push_back(PassInfo{ARG, SUMMARY, {}, false});
#include "mdplan/Transforms/Passes.def"
#define MDPLAN_PASS_OPTION(ARG, OPTION, DOC)                                   \
  for (PassInfo & I : R)                                                       \
    if (I.Name == (ARG))                                                       \
      I.Options.emplace_back(OPTION, DOC);
#include "mdplan/Transforms/Passes.def"
    return R;
  }();
  return Infos;
}

Expected<std::unique_ptr<Pass>> mdplan::createPass(StringRef Name) {
#define MDPLAN_PASS(ARG, CLASS, SUMMARY)                                       \
  if (Name == (ARG))                                                           \
    return create##CLASS();
#include "mdplan/Transforms/Passes.def"
  std::string Known;
  for (const PassInfo &I : registeredPasses())
    Known += (Known.empty() ? "" : ", ") + I.Name.str();
  return makeError("unknown pass '" + Name + "' (passes: " + Known + ")");
}

std::string mdplan::defaultPipeline() {
  std::string P;
  for (const PassInfo &I : registeredPasses())
    if (I.InDefault)
      P += (P.empty() ? "" : ",") + I.Name.str();
  return P;
}

PassManager::PassManager(PassManagerOptions Opts) : Opts(Opts) {}
PassManager::~PassManager() = default;

Error PassManager::parsePipeline(StringRef Text) {
  Text = Text.trim();
  std::vector<std::unique_ptr<Pass>> Parsed;
  while (!Text.empty()) {
    size_t End = Text.find_first_of(",{");
    StringRef Name = Text.substr(0, End).trim();
    Text = End == StringRef::npos ? StringRef() : Text.substr(End);
    if (Name.empty())
      return makeError("empty pass name in pipeline");
    auto P = createPass(Name);
    if (!P)
      return P.takeError();
    if (Text.startswith("{")) {
      size_t Close = Text.find('}');
      if (Close == StringRef::npos)
        return makeError("missing '}' after the options of pass '" + Name +
                         "'");
      StringRef Opts = Text.substr(1, Close - 1);
      Text = Text.substr(Close + 1);
      SmallVector<StringRef, 4> Items;
      Opts.split(Items, ',', -1, false);
      for (StringRef Item : Items) {
        auto [K, V] = Item.split('=');
        K = K.trim();
        V = V.trim();
        if (K.empty() || !Item.contains('='))
          return makeError("pass option '" + Item.trim() +
                           "' must be written key=value");
        if (Error E = (*P)->setOption(K, V))
          return E;
      }
    }
    Text = Text.ltrim();
    if (Text.consume_front(",")) {
      Text = Text.ltrim();
      if (Text.empty())
        return makeError("empty pass name in pipeline");
    } else if (!Text.empty()) {
      return makeError("expected ',' in the pipeline before '" + Text + "'");
    }
    Parsed.push_back(std::move(*P));
  }
  for (auto &P : Parsed)
    addPass(std::move(P));
  return Error::success();
}

Error PassManager::run(Graph &G, PassContext &Ctx) {
  std::unique_ptr<TimerGroup> TG;
  std::vector<std::unique_ptr<Timer>> Timers;
  if (Opts.TimePasses)
    TG = std::make_unique<TimerGroup>("mdplan", "Pass execution timing report");
  for (auto &P : Passes) {
    Timer *T = nullptr;
    if (TG) {
      Timers.push_back(
          std::make_unique<Timer>(P->getName(), P->getName(), *TG));
      T = Timers.back().get();
      T->startTimer();
    }
    Error E = P->run(G, Ctx);
    if (T)
      T->stopTimer();
    if (E) {
      if (TG)
        TG->clear(); // no report, not even from ~TimerGroup
      return E;
    }
    if (Opts.PrintAfterAll) {
      *Opts.PrintAfterAll << "// ----- graph after " << P->getName()
                          << " -----\n";
      writeModel(G, *Opts.PrintAfterAll);
    }
  }
  // Reset the timers once printed: otherwise ~TimerGroup prints the same
  // report again, to stderr, when the timers are destroyed.
  if (TG)
    TG->print(*Opts.TimePasses, /*ResetAfterPrint=*/true);
  return Error::success();
}
