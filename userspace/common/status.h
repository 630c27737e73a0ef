// SPDX-License-Identifier: Apache-2.0
// The one error model of incin's userspace: Status (a code plus a message
// with context) and Expected<T> (a value or a Status). gRPC edges translate
// with ToGrpcStatus / FromGrpcStatus (rpc_status.h).
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace inc {

// Mirrors the gRPC canonical codes that incin uses, so the edge translation
// is one-to-one.
enum class Code {
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

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message", so errors read from the outside in.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(Code::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) {
  return Status(Code::kNotFound, std::move(m));
}
inline Status AlreadyExists(std::string m) {
  return Status(Code::kAlreadyExists, std::move(m));
}
inline Status FailedPrecondition(std::string m) {
  return Status(Code::kFailedPrecondition, std::move(m));
}
inline Status ResourceExhausted(std::string m) {
  return Status(Code::kResourceExhausted, std::move(m));
}
inline Status Unavailable(std::string m) {
  return Status(Code::kUnavailable, std::move(m));
}
inline Status Internal(std::string m) {
  return Status(Code::kInternal, std::move(m));
}
inline Status DeadlineExceeded(std::string m) {
  return Status(Code::kDeadlineExceeded, std::move(m));
}
inline Status Unimplemented(std::string m) {
  return Status(Code::kUnimplemented, std::move(m));
}
inline Status Aborted(std::string m) {
  return Status(Code::kAborted, std::move(m));
}
inline Status OutOfRange(std::string m) {
  return Status(Code::kOutOfRange, std::move(m));
}
inline Status PermissionDenied(std::string m) {
  return Status(Code::kPermissionDenied, std::move(m));
}
inline Status Unauthenticated(std::string m) {
  return Status(Code::kUnauthenticated, std::move(m));
}

// A failed system or libbpf call: err is a positive errno (libbpf returns
// negative ones; pass -ret). The code follows the errno's meaning.
Status ErrnoStatus(const std::string& what, int err);

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Expected built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace inc

// Propagate a failed Status from an expression returning Status.
#define INC_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::inc::Status inc_status_ = (expr);        \
    if (!inc_status_.ok()) return inc_status_; \
  } while (0)
