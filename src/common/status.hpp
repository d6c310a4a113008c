// Errors as values: every stage returns Result<T>; nothing throws across a stage boundary.
#pragma once
#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace flashjit {

enum class ErrorCode {
  kInvalidSpec,        // a descriptor field is out of range (field names it)
  kInvalidArgument,    // a launch/tool argument is out of range (field names it)
  kCompileFailed,      // NVRTC or ptxas rejected the source (log holds the NVRTC log)
  kResourceBudget,     // the compiled kernel breaks a resource rule (spills, register budget)
  kCacheIo,            // the cache could not read or write a file
  kNotCompiled,        // cache-only policy and the kernel is not in the cache
  kDriverUnavailable,  // no libcuda.so.1 or no device; or no NVRTC for a compile
  kDriverError,        // a driver call failed
  kInternal,
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // one line, says what is wrong and what is allowed
  std::string field;    // the offending field, when there is one
  std::string log;      // long detail (NVRTC log), may be empty

  static Error invalid_spec(std::string field, std::string message) {
    return {ErrorCode::kInvalidSpec, std::move(message), std::move(field), {}};
  }
  static Error invalid_argument(std::string field, std::string message) {
    return {ErrorCode::kInvalidArgument, std::move(message), std::move(field), {}};
  }
  static Error make(ErrorCode code, std::string message, std::string log = {}) {
    return {code, std::move(message), {}, std::move(log)};
  }
};

// A value or an Error. Small on purpose: value(), error(), ok().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}
  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(state_); }
  const T& value() const& { assert(ok()); return std::get<0>(state_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { assert(!ok()); return std::get<1>(state_); }
  Error take_error() { assert(!ok()); return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

// Result<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}
  static Status Ok() { return {}; }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(!ok()); return *error_; }
  Error take_error() { assert(!ok()); return std::move(*error_); }

 private:
  std::optional<Error> error_;
};

}  // namespace flashjit
