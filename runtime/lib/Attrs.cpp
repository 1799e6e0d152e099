//===- Attrs.cpp - Kernel attributes --------------------------------------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//

#include "mdrt/Attrs.h"

using namespace mdrt;

template <typename T>
static const T *getAs(const std::map<std::string, AttrValue> &M,
                      const std::string &Name) {
  auto It = M.find(Name);
  if (It == M.end())
    return nullptr;
  return std::get_if<T>(&It->second);
}

int64_t AttrMap::getInt(const std::string &Name, int64_t Default) const {
  const int64_t *V = getAs<int64_t>(M, Name);
  return V ? *V : Default;
}

double AttrMap::getFloat(const std::string &Name, double Default) const {
  if (const double *V = getAs<double>(M, Name))
    return *V;
  if (const int64_t *V = getAs<int64_t>(M, Name))
    return double(*V);
  return Default;
}

bool AttrMap::getBool(const std::string &Name, bool Default) const {
  const bool *V = getAs<bool>(M, Name);
  return V ? *V : Default;
}

std::string AttrMap::getString(const std::string &Name,
                               const std::string &Default) const {
  const std::string *V = getAs<std::string>(M, Name);
  return V ? *V : Default;
}

DType AttrMap::getType(const std::string &Name, DType Default) const {
  const DType *V = getAs<DType>(M, Name);
  return V ? *V : Default;
}

std::vector<int64_t> AttrMap::getInts(const std::string &Name) const {
  const auto *V = getAs<std::vector<int64_t>>(M, Name);
  return V ? *V : std::vector<int64_t>();
}

std::vector<double> AttrMap::getFloats(const std::string &Name) const {
  if (const auto *V = getAs<std::vector<double>>(M, Name))
    return *V;
  if (const auto *V = getAs<std::vector<int64_t>>(M, Name))
    return std::vector<double>(V->begin(), V->end());
  return {};
}

std::vector<std::string> AttrMap::getStrings(const std::string &Name) const {
  const auto *V = getAs<std::vector<std::string>>(M, Name);
  return V ? *V : std::vector<std::string>();
}
