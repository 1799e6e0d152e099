//===- Status.h - Errors of the runtime -------------------------*- C++ -*-===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// The runtime links neither LLVM nor Protobuf, so it has its own small error
// type: a Status is ok or carries a lower-case message; StatusOr<T> is a
// value or a Status.
//
//===----------------------------------------------------------------------===//

#ifndef MDRT_STATUS_H
#define MDRT_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace mdrt {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string Message) {
    Status S;
    S.Msg = std::move(Message);
    S.Failed = true;
    return S;
  }

  bool isOk() const { return !Failed; }
  explicit operator bool() const { return Failed; } // true on error
  const std::string &message() const { return Msg; }

  /// Prefixes the message with context: "reading plan: <message>".
  Status withContext(const std::string &Context) const {
    if (!Failed)
      return *this;
    return error(Context + ": " + Msg);
  }

private:
  std::string Msg;
  bool Failed = false;
};

template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T Value) : Value(std::move(Value)) {}
  StatusOr(Status S) : S(std::move(S)) {
    assert(!this->S.isOk() && "StatusOr from an ok status");
  }

  bool isOk() const { return S.isOk(); }
  explicit operator bool() const { return S.isOk(); } // true on success
  const Status &status() const { return S; }
  T &operator*() { return *Value; }
  const T &operator*() const { return *Value; }
  T *operator->() { return &*Value; }
  const T *operator->() const { return &*Value; }
  T take() { return std::move(*Value); }

private:
  std::optional<T> Value;
  Status S;
};

/// Returns from the enclosing function when \p Expr is an error status.
#define MDRT_RETURN_IF_ERROR(Expr)                                             \
  do {                                                                         \
    ::mdrt::Status _S = (Expr);                                                \
    if (!_S.isOk())                                                            \
      return _S;                                                               \
  } while (false)

} // namespace mdrt

#endif // MDRT_STATUS_H
