// The C API's error channel: what an API body returns (ApiStatus), how it becomes a
// flashjit_status_t plus the thread-local message, and the guard every exported function runs its
// body in, so that no exception crosses the C boundary.
#pragma once
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.hpp"
#include "flashjit/flashjit.h"

namespace flashjit::api {

// The C status for a core error code.
flashjit_status_t status_of(ErrorCode code);

// Success, or a C status with the core Error describing it. Unlike Status it can carry the
// statuses only the API has (wrong context, unsupported device, invalid bundle, ABI mismatch).
class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(Status status) {  // NOLINT: implicit on purpose, bodies return core Status as is
    if (!status.ok()) set(status_of(status.error().code), status.take_error());
  }
  ApiStatus(Error error) { set(status_of(error.code), std::move(error)); }  // NOLINT
  static ApiStatus make(flashjit_status_t code, std::string field, std::string message) {
    return make(code, Error{ErrorCode::kInternal, std::move(message), std::move(field), {}});
  }
  static ApiStatus make(flashjit_status_t code, Error error) {
    ApiStatus s;
    s.set(code, std::move(error));
    return s;
  }
  bool ok() const { return code_ == FLASHJIT_SUCCESS; }
  flashjit_status_t code() const { return code_; }
  const Error& error() const { return *error_; }

 private:
  void set(flashjit_status_t code, Error error) {
    code_ = code;
    error_.emplace(std::move(error));
  }
  flashjit_status_t code_ = FLASHJIT_SUCCESS;
  std::optional<Error> error_;
};

// "<field>: must not be NULL".
ApiStatus null_argument(const char* field);
// kInvalidArgument naming field.
ApiStatus invalid_argument(std::string field, std::string message);

// Records the outcome for flashjit_last_error_message/_field and returns its status. Never throws:
// when even the message cannot be stored, a fixed text says so.
flashjit_status_t record(const ApiStatus& status) noexcept;
flashjit_status_t record_exception(const char* function, flashjit_status_t status, const char* what) noexcept;

const char* last_error_message() noexcept;
const char* last_error_field() noexcept;

// Runs an API body: its ApiStatus is recorded and returned; any exception becomes
// FLASHJIT_ERROR_OUT_OF_MEMORY (std::bad_alloc) or FLASHJIT_ERROR_INTERNAL.
template <class Body>
flashjit_status_t guarded(const char* function, Body&& body) noexcept {
  try {
    return record(body());
  } catch (const std::bad_alloc&) {
    return record_exception(function, FLASHJIT_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return record_exception(function, FLASHJIT_ERROR_INTERNAL, e.what());
  } catch (...) {
    return record_exception(function, FLASHJIT_ERROR_INTERNAL, "unknown exception");
  }
}

}  // namespace flashjit::api
