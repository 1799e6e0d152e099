//===- GraphMutator.cpp - Graph-level mutations of a model ----------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The field-level mutator (TextProtoMutator.cpp) changes one field at a
// time, so most of what it makes fails in the reader or in infer-shapes and
// the passes after them see little. This one edits the model as a graph and
// keeps it mostly valid: it splices an op between a node and a consumer,
// combines two tensors with a binary op, reroutes an input, adds a loss or
// a control edge, colocates or places a node, or removes a node and
// reconnects its consumers. New nodes are top-level and named fz_N; inputs
// are written as full names (unless a scope holds a node of the same
// name, which the reader would find first).
//
//===----------------------------------------------------------------------===//

#include "GraphMutator.h"
#include "RandomEdits.h"
#include "TextProtoMutator.h"

#include "ModelDesc.pb.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace pb = google::protobuf;
namespace desc = mdplan::desc;

namespace {

class GraphMutator : mdplan::fuzz::RandomEdits {
public:
  GraphMutator(unsigned Seed, desc::Model &M) : RandomEdits(Seed), M(M) {
    collect(*M.mutable_node(), *M.mutable_scope(), "");
    sortProducersFirst();
  }
  bool mutate();

private:
  struct Entry {
    desc::Node *N;
    std::string Full;   // the node's name with its scopes' prefix
    std::string Prefix; // "cnn/conv1/", the scopes' prefix
  };

  void collect(pb::RepeatedPtrField<desc::Node> &Nodes,
               pb::RepeatedPtrField<desc::Scope> &Scopes,
               const std::string &Prefix) {
    for (desc::Node &N : Nodes)
      add({&N, Prefix + N.name(), Prefix});
    for (desc::Scope &S : Scopes)
      collect(*S.mutable_node(), *S.mutable_scope(),
              S.name().empty() ? Prefix : Prefix + S.name() + "/");
  }

  /// Orders All so that a node comes after the nodes it reads (the message
  /// keeps a container's nodes apart from its scopes, so file order is
  /// lost); nodes of a cycle keep their place after the others.
  void sortProducersFirst() {
    std::map<std::string, size_t> Index;
    for (size_t I = 0; I < All.size(); ++I)
      Index[All[I].Full] = I;
    std::vector<int> State(All.size(), 0); // 0 new, 1 visiting, 2 done
    std::vector<Entry> Sorted;
    std::function<void(size_t)> Visit = [&](size_t I) {
      if (State[I])
        return;
      State[I] = 1;
      for (const std::string &In : All[I].N->input()) {
        std::string Full = resolve(All[I], In);
        if (!Full.empty() && Full[0] == '^')
          Full.erase(0, 1);
        auto It = Index.find(Full.substr(0, Full.find(':')));
        if (It != Index.end())
          Visit(It->second);
      }
      State[I] = 2;
      Sorted.push_back(All[I]);
    };
    for (size_t I = 0; I < All.size(); ++I)
      Visit(I);
    All = std::move(Sorted);
  }

  /// A tensor of the graph: the full name of one of the first \p Bound
  /// nodes (all by default), sometimes with an output. Nodes come
  /// producers first (sortProducersFirst): a bound keeps edits acyclic.
  std::string tensor(size_t Bound = SIZE_MAX) {
    std::string T =
        All[pick(std::max<size_t>(1, std::min(Bound, All.size())))].Full;
    if (pick(8) == 0)
      T += ":" + std::to_string(pick(3));
    return T;
  }
  bool exists(const std::string &Full) { return Names.count(Full) != 0; }
  /// Input \p In of \p E as a full name (the reader looks a name up in
  /// the innermost scope first); \p In itself if nothing matches.
  std::string resolve(const Entry &E, const std::string &In) {
    bool Control = !In.empty() && In[0] == '^';
    std::string Name = Control ? In.substr(1) : In;
    std::string Node = Name.substr(0, Name.find(':'));
    for (std::string P = E.Prefix;;) {
      if (exists(P + Node))
        return (Control ? "^" : "") + P + Name;
      if (P.empty())
        return In;
      // The enclosing scope's prefix: drop the last "name/" (scope names
      // may hold slashes, even be one; every step makes P shorter).
      P.pop_back();
      size_t Slash = P.find_last_of('/');
      P = Slash == std::string::npos ? "" : P.substr(0, Slash + 1);
    }
  }
  std::string freshName() {
    for (unsigned I = 0;; ++I) {
      std::string Name = "fz_" + std::to_string(pick(1000) + I);
      bool Taken = false;
      for (const Entry &E : All)
        Taken |= E.Full == Name;
      if (!Taken)
        return Name;
    }
  }
  desc::Node *addNode(const std::string &Op) {
    desc::Node *N = M.add_node();
    N->set_name(freshName());
    N->set_op(Op);
    add({N, N->name(), ""});
    return N;
  }
  /// A consumer of \p Full: a node and the index of the input that reads
  /// it; {nullptr, 0} if none.
  std::pair<desc::Node *, int> consumerOf(const std::string &Full) {
    std::vector<std::pair<desc::Node *, int>> Uses;
    for (const Entry &E : All)
      for (int I = 0; I < E.N->input_size(); ++I)
        if (resolve(E, E.N->input(I)) == Full)
          Uses.push_back({E.N, I});
    if (Uses.empty())
      return {nullptr, 0};
    return any(Uses);
  }

  bool splice();
  bool combine();
  bool reroute();
  bool addLoss();
  bool addControl();
  bool colocate();
  bool place();
  bool remove();

  void add(Entry E) {
    Names.insert(E.Full);
    All.push_back(std::move(E));
  }

  desc::Model &M;
  std::vector<Entry> All;
  std::unordered_set<std::string> Names; // the full names in All
};

bool GraphMutator::mutate() {
  if (All.empty())
    return false;
  switch (pick(10)) {
  case 0:
  case 1:
    return splice();
  case 2:
  case 3:
    return combine();
  case 4:
    return reroute();
  case 5:
    return addLoss();
  case 6:
    return addControl();
  case 7:
    return colocate();
  case 8:
    return place();
  default:
    return remove();
  }
}

/// x -> consumer becomes x -> op -> consumer.
bool GraphMutator::splice() {
  static const char *const Unary[] = {
      "Relu",   "Tanh",    "Sigmoid", "Identity", "Neg", "Square",
      "Sqrt",   "Softmax", "Dropout", "Mean",     "Sum", "Cast",
      "L2Loss", "Reshape", "MaxPool", "Slice",    "Pad", "OneHot"};
  Entry X = any(All);
  desc::Node *N = addNode(Unary[pick(std::size(Unary))]);
  N->add_input(X.Full);
  if (N->op() == "Dropout") {
    desc::Attr *A = N->add_attr();
    A->set_name("rate");
    A->set_f(pick(4) * 0.25);
  } else if (N->op() == "Cast") {
    desc::Attr *A = N->add_attr();
    A->set_name("dtype");
    A->set_type(coin() ? desc::FLOAT64 : desc::INT32);
  } else if (N->op() == "Reshape") {
    desc::Attr *A = N->add_attr();
    A->set_name("shape");
    A->add_ints(-1);
    if (coin())
      A->add_ints(int64_t(1) << pick(4));
  } else if (N->op() == "MaxPool") {
    for (const char *Name : {"ksize", "strides"}) {
      desc::Attr *A = N->add_attr();
      A->set_name(Name);
      A->add_ints(2);
      A->add_ints(2);
    }
  } else if (N->op() == "Slice") {
    // A box of a tensor of rank 1 to 3 (the rank is a guess).
    desc::Attr *B = N->add_attr(), *S = N->add_attr();
    B->set_name("begin");
    S->set_name("size");
    for (size_t K = 0, R = 1 + pick(3); K < R; ++K) {
      B->add_ints(int64_t(pick(3)));
      S->add_ints(coin() ? -1 : int64_t(pick(4)));
    }
  } else if (N->op() == "Pad") {
    desc::Attr *A = N->add_attr();
    A->set_name("paddings");
    for (size_t K = 0, R = 2 * (1 + pick(3)); K < R; ++K)
      A->add_ints(int64_t(pick(3)));
  } else if (N->op() == "OneHot") {
    desc::Attr *A = N->add_attr();
    A->set_name("depth");
    A->set_i(int64_t(pick(6)));
  } else if ((N->op() == "Mean" || N->op() == "Sum") && coin()) {
    desc::Attr *A = N->add_attr();
    A->set_name("axes");
    A->add_ints(int64_t(pick(3)));
  }
  auto [C, I] = consumerOf(X.Full);
  if (C && C != N)
    C->set_input(I, N->name());
  return true;
}

/// A binary op of two tensors, read by a consumer of the first.
bool GraphMutator::combine() {
  static const char *const Binary[] = {"Add",      "Sub",
                                       "Mul",      "Div",
                                       "Maximum",  "Minimum",
                                       "MatMul",   "AddN",
                                       "BiasAdd",  "Conv2D",
                                       "LogLoss",  "SparseSoftmaxCrossEntropy",
                                       "Accuracy", "SoftmaxCrossEntropy",
                                       "Concat"};
  size_t XI = pick(All.size());
  Entry X = All[XI];
  // x op x always has matching shapes; another tensor seldom does.
  std::string Y = coin() ? X.Full : tensor(XI + 1);
  desc::Node *N =
      addNode(pick(3) ? Binary[pick(4)] : Binary[pick(std::size(Binary))]);
  N->add_input(X.Full);
  N->add_input(Y);
  if ((N->op() == "AddN" || N->op() == "Concat") && coin())
    N->add_input(X.Full);
  if (N->op() == "Concat") {
    desc::Attr *A = N->add_attr();
    A->set_name("axis");
    A->set_i(int64_t(pick(4)) - 2);
  }
  auto [C, I] = consumerOf(X.Full);
  if (C && C != N)
    C->set_input(I, N->name());
  else if (coin())
    M.add_loss(N->name());
  return true;
}

/// One input now reads another tensor (a cycle now and then).
bool GraphMutator::reroute() {
  std::vector<desc::Node *> WithInputs;
  for (const Entry &E : All)
    if (E.N->input_size())
      WithInputs.push_back(E.N);
  if (WithInputs.empty())
    return false;
  desc::Node *N = any(WithInputs);
  size_t Index = 0;
  while (All[Index].N != N)
    ++Index;
  // An earlier tensor; now and then any, a cycle (the first node has no
  // earlier one).
  N->set_input(int(pick(size_t(N->input_size()))),
               tensor(Index && pick(16) ? Index : SIZE_MAX));
  return true;
}

bool GraphMutator::addLoss() {
  desc::Node *N = addNode(coin() ? "Mean" : "Sum");
  N->add_input(tensor());
  if (pick(4) == 0)
    M.add_regularization_loss(N->name());
  else
    M.add_loss(N->name());
  return true;
}

bool GraphMutator::addControl() {
  Entry To = any(All);
  To.N->add_input("^" + any(All).Full);
  return true;
}

bool GraphMutator::colocate() {
  Entry N = any(All);
  N.N->set_colocate_with(any(All).Full);
  return true;
}

bool GraphMutator::place() {
  static const char *const Devices[] = {
      "/device:CPU:0",
      "/device:GPU:1",
      "/job:ps/task:0",
      "/job:ps/task:1",
      "/job:worker",
      "/replica:1",
      "/device:GPU:*",
      "/task:0/device:CPU:0",
      "/job:worker/replica:0/task:0/device:GPU:0",
      ""};
  any(All).N->set_device(Devices[pick(std::size(Devices))]);
  return true;
}

/// Removes a node; what read it (consumers, the loss and output lists)
/// reads its first input instead, or loses the input.
bool GraphMutator::remove() {
  size_t XI = pick(All.size());
  Entry X = All[XI];
  std::string Replacement =
      X.N->input_size() ? resolve(X, X.N->input(0)) : std::string();
  if (!Replacement.empty() && Replacement[0] == '^')
    Replacement.clear();
  auto Reads = [&](const Entry &E, const std::string &In) {
    std::string Full = resolve(E, In);
    if (!Full.empty() && Full[0] == '^')
      Full.erase(0, 1);
    return Full == X.Full || Full.rfind(X.Full + ":", 0) == 0;
  };
  for (const Entry &E : All) {
    for (int I = 0; I < E.N->input_size(); ++I)
      if (Reads(E, E.N->input(I))) {
        // Control inputs go; data inputs read the replacement.
        if (!Replacement.empty() && E.N->input(I)[0] != '^')
          E.N->set_input(I, Replacement);
        else
          E.N->mutable_input()->DeleteSubrange(I--, 1);
      }
    if (!E.N->colocate_with().empty() && Reads(E, E.N->colocate_with()))
      E.N->clear_colocate_with();
  }
  Entry Top{nullptr, "", ""};
  for (auto *List : {M.mutable_loss(), M.mutable_regularization_loss(),
                     M.mutable_update_op(), M.mutable_summary()})
    for (int I = 0; I < List->size(); ++I)
      if (Reads(Top, List->Get(I))) {
        if (!Replacement.empty())
          *List->Mutable(I) = Replacement;
        else
          List->DeleteSubrange(I--, 1);
      }
  for (desc::NamedOutput &O : *M.mutable_output())
    if (Reads(Top, O.tensor()) && !Replacement.empty())
      O.set_tensor(Replacement);
  // Cleared rather than erased: entries point into the lists.
  X.N->Clear();
  X.N->set_name(X.Full.substr(X.Prefix.size()) + "_removed");
  X.N->set_op("NoOp");
  Names.erase(X.Full);
  All[XI].Full = X.Prefix + X.N->name();
  Names.insert(All[XI].Full);
  return true;
}

} // namespace

size_t mdplan::fuzz::mutateModelGraph(uint8_t *Data, size_t Size,
                                      size_t MaxSize, unsigned Seed) {
  desc::Model M;
  std::unique_ptr<GraphMutator> Mut;
  return editTextProto(M, Data, Size, MaxSize, Seed, [&](pb::Message &) {
    // Parsed by now: the node lists are there to collect.
    if (!Mut)
      Mut = std::make_unique<GraphMutator>(Seed, M);
    return Mut->mutate();
  });
}
