//===- OpRegistry.cpp - Op registry and attribute checks ------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdplan/IR/OpRegistry.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace llvm;
using namespace mdplan;

namespace mdplan {
/// Defined in Ops.cpp: fills the definition of every op.
void registerAllOps(std::vector<OpDef> &Ops);
} // namespace mdplan

const TensorType &InferContext::input(unsigned I) const {
  return N.getInput(I).type();
}

Error InferContext::error(const Twine &Message) const {
  return N.error(Message);
}

const AttrDef *OpDef::findAttr(StringRef AttrName) const {
  for (const AttrDef &A : Attrs)
    if (A.Name == AttrName)
      return &A;
  return nullptr;
}

std::string OpDef::checkArity(unsigned NumInputs) const {
  unsigned Fixed = InputNames.size();
  if (Variadic) {
    if (NumInputs < MinInputs)
      return (Name + " takes at least " + Twine(MinInputs) + " input" +
              (MinInputs == 1 ? "" : "s") + ", got " + Twine(NumInputs))
          .str();
    return "";
  }
  if (NumInputs != Fixed)
    return (Name + " takes " + Twine(Fixed) + " input" +
            (Fixed == 1 ? "" : "s") + ", got " + Twine(NumInputs))
        .str();
  return "";
}

OpRegistry::OpRegistry() {
  Ops.resize(unsigned(OpKind::NumOps));
  registerAllOps(Ops);
#ifndef NDEBUG
  for (unsigned I = 0, E = Ops.size(); I != E; ++I)
    assert(unsigned(Ops[I].Kind) == I && Ops[I].Shape && "op not registered");
#endif
}

const OpRegistry &OpRegistry::get() {
  static const OpRegistry R;
  return R;
}

const OpDef *OpRegistry::lookup(StringRef Name) const {
  static const StringMap<unsigned> Index = [this] {
    StringMap<unsigned> M;
    for (unsigned I = 0, E = Ops.size(); I != E; ++I)
      M[Ops[I].Name] = I;
    return M;
  }();
  auto It = Index.find(Name);
  return It == Index.end() ? nullptr : &Ops[It->second];
}

static bool isEmptyShape(const Attr &V) {
  return V.kind() == AttrKind::Shape && V.getShape().rank() == 0;
}

/// True when \p V may be stored in an attribute declared as \p K, after the
/// conversions the format allows (int to float, int list to shape or float
/// list).
static bool convertAttr(AttrKind K, Attr &V) {
  AttrKind Have = V.kind();
  if (Have == K)
    return true;
  if (K == AttrKind::Float && Have == AttrKind::Int) {
    V = Attr(double(V.getInt()));
    return true;
  }
  if (K == AttrKind::Shape && Have == AttrKind::IntList) {
    V = Attr(Shape(ArrayRef<int64_t>(V.getInts())));
    return true;
  }
  if (K == AttrKind::FloatList && Have == AttrKind::IntList) {
    std::vector<double> F(V.getInts().begin(), V.getInts().end());
    V = Attr(std::move(F));
    return true;
  }
  if (Have == AttrKind::Shape && isEmptyShape(V) &&
      (K == AttrKind::FloatList || K == AttrKind::StringList)) {
    // `shape {}` is how the text format writes an empty list.
    if (K == AttrKind::FloatList)
      V = Attr(std::vector<double>());
    else
      V = Attr(std::vector<std::string>());
    return true;
  }
  if (K == AttrKind::IntList && Have == AttrKind::Shape) {
    auto D = V.getShape().dims();
    V = Attr(std::vector<int64_t>(D.begin(), D.end()));
    return true;
  }
  return false;
}

/// "an int list", "a float".
static std::string withArticle(StringRef Noun) {
  bool Vowel = !Noun.empty() && StringRef("aeiou").contains(Noun.front());
  return (Vowel ? "an " : "a ") + Noun.str();
}

/// True when \p A holds every attribute of \p Op, each of its declared
/// kind and allowed value, and nothing else: complete already.
static bool isComplete(const OpDef &Op, const AttrDict &A) {
  if (A.size() != Op.Attrs.size())
    return false;
  for (const auto &[Name, Value] : A) {
    const AttrDef *D = Op.findAttr(Name);
    if (!D || D->Kind != Value.kind())
      return false;
    if (!D->Allowed.empty() &&
        !llvm::is_contained(D->Allowed, Value.getString()))
      return false;
  }
  // Names are distinct and each is the op's: all of the op's are there.
  return true;
}

Error mdplan::verifyAndCompleteAttrs(Node &N) {
  const OpDef &Op = N.getOp();
  // Most nodes are complete (made by a pass, or checked before): leave
  // their attributes, and a storage they may share, as they are.
  if (isComplete(Op, N.attrs()))
    return Error::success();
  // Every attribute of the op ends up set (given or defaulted), the
  // dictionary made at once from the list.
  SmallVector<std::pair<StringRef, Attr>, 16> Fixed;
  Fixed.reserve(Op.Attrs.size());
  SmallBitVector Given(Op.Attrs.size());
  for (const auto &[Name, Value] : N.attrs()) {
    const AttrDef *D = Op.findAttr(Name);
    if (!D) {
      std::string Known;
      for (const AttrDef &A : Op.Attrs)
        Known += (Known.empty() ? "" : ", ") + A.Name.str();
      return N.error(
          "unknown attribute '" + Name + "' for op " + Op.Name +
          (Known.empty() ? " (it takes none)" : " (it takes " + Known + ")"));
    }
    Attr V = Value;
    if (!convertAttr(D->Kind, V))
      return N.error("attribute '" + Name + "' of " + Op.Name + " must be " +
                     withArticle(attrKindName(D->Kind)) + ", got " +
                     withArticle(attrKindName(Value.kind())));
    if (!D->Allowed.empty()) {
      bool Ok = false;
      for (StringRef A : D->Allowed)
        Ok |= A == V.getString();
      if (!Ok)
        return N.error("attribute '" + Name + "' of " + Op.Name +
                       " must be one of " + join(D->Allowed, ", ") + ", got '" +
                       V.getString() + "'");
    }
    // The dictionary's names are distinct: each op attribute once.
    Given.set(unsigned(D - Op.Attrs.data()));
    Fixed.emplace_back(D->Name, std::move(V));
  }
  for (unsigned I = 0; I < Op.Attrs.size(); ++I) {
    const AttrDef &D = Op.Attrs[I];
    if (Given.test(I))
      continue;
    if (!D.Default)
      return N.error("missing attribute '" + D.Name + "' of " + Op.Name);
    Fixed.emplace_back(D.Name, *D.Default);
  }
  N.attrs() = AttrDict(Fixed);
  return Error::success();
}

Error mdplan::inferNodeShapes(Node &N) {
  const OpDef &Op = N.getOp();
  std::string Arity = Op.checkArity(N.getNumInputs());
  if (!Arity.empty())
    return N.error(Arity);
  for (const TensorRef &In : N.getInputs()) {
    if (In.Index >= In.N->getNumOutputs())
      return N.error("input '" + In.str() + "' does not exist: " +
                     In.N->getName() + " has " + Twine(In.N->getNumOutputs()) +
                     " output" + (In.N->getNumOutputs() == 1 ? "" : "s"));
    if (In.type().Elt == DType::Invalid)
      return N.error("input '" + In.str() + "' has no type yet");
  }
  N.setNumOutputs(Op.numOutputs(N.attrs(), N.getNumInputs()));
  InferContext C(N);
  if (Error E = Op.Shape(C))
    return E;
  // Element counts and byte sizes are int64 everywhere after this.
  for (unsigned I = 0, E = N.getNumOutputs(); I != E; ++I) {
    const TensorType &T = N.getOutputType(I);
    std::string Why = T.Dims.whyTooLarge();
    if (!Why.empty())
      return N.error("output " + Twine(I) + " of type " + T.str() +
                     " is too large: " + Why);
  }
  return Error::success();
}
