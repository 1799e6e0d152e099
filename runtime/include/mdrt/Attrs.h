//===- Attrs.h - Kernel attributes ------------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The attributes of one kernel, copied out of the plan at load time so that
// kernels do not depend on the plan's encoding.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_ATTRS_H
#define MDRT_ATTRS_H

#include "mdrt/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace mdrt {

using AttrValue = std::variant<int64_t, double, bool, std::string, DType,
                               std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>>;

/// Attributes by name. Getters return the default when the attribute is
/// missing or of another kind (the compiler validated kinds already).
class AttrMap {
public:
  void set(const std::string &Name, AttrValue V) { M[Name] = std::move(V); }
  bool has(const std::string &Name) const { return M.count(Name) != 0; }

  int64_t getInt(const std::string &Name, int64_t Default = 0) const;
  double getFloat(const std::string &Name, double Default = 0) const;
  bool getBool(const std::string &Name, bool Default = false) const;
  std::string getString(const std::string &Name,
                        const std::string &Default = "") const;
  DType getType(const std::string &Name, DType Default = DType::Invalid) const;
  /// Int lists (shapes are int lists too).
  std::vector<int64_t> getInts(const std::string &Name) const;
  std::vector<double> getFloats(const std::string &Name) const;
  std::vector<std::string> getStrings(const std::string &Name) const;

  const std::map<std::string, AttrValue> &all() const { return M; }

private:
  std::map<std::string, AttrValue> M;
};

} // namespace mdrt

#endif // MDRT_ATTRS_H
