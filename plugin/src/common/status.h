// Status and StatusOr: how every layer reports failure without exceptions.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace pjrt_neuron {

// Values match PJRT_Error_Code so the API layer converts without a table.
enum class ErrorCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with the caller's context, e.g. the PJRT function name.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(ErrorCode::kInvalidArgument, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(ErrorCode::kFailedPrecondition, std::move(m)); }
inline Status NotFound(std::string m) { return Status(ErrorCode::kNotFound, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(ErrorCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(ErrorCode::kInternal, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(ErrorCode::kUnavailable, std::move(m)); }

template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pjrt_neuron

#define PN_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::pjrt_neuron::Status _st = (expr);   \
    if (!_st.ok()) return _st;            \
  } while (0)

#define PN_CONCAT_INNER(a, b) a##b
#define PN_CONCAT(a, b) PN_CONCAT_INNER(a, b)
#define PN_ASSIGN_OR_RETURN(lhs, expr) PN_ASSIGN_OR_RETURN_IMPL(PN_CONCAT(_so_, __LINE__), lhs, expr)
#define PN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp.value())
