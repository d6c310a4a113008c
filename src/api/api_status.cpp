#include "api/api_status.hpp"

#include <cstring>

namespace flashjit::api {
namespace {

// NOTES: NVRTC logs can run to megabytes; the message keeps the head, which holds the first error.
constexpr size_t kMaxLogInMessage = 64 * 1024;

struct LastError {
  std::string message;
  std::string field;
  const char* fixed = nullptr;  // set when message could not be stored
};

LastError& last_error() {
  thread_local LastError error;
  return error;
}

bool starts_with_field(const std::string& message, const std::string& field) {
  return message.size() > field.size() && message.compare(0, field.size(), field) == 0 && message[field.size()] == ':';
}

// "<field>: <message>" unless the message already starts that way, then the NVRTC log if any.
std::string full_message(const Error& error) {
  std::string text;
  if (!error.field.empty() && !starts_with_field(error.message, error.field)) text = error.field + ": ";
  text += error.message;
  if (!error.log.empty()) {
    text += "\n";
    text.append(error.log, 0, kMaxLogInMessage);
  }
  return text;
}

}  // namespace

flashjit_status_t status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidSpec: return FLASHJIT_ERROR_INVALID_SPEC;
    case ErrorCode::kInvalidArgument: return FLASHJIT_ERROR_INVALID_ARGUMENT;
    case ErrorCode::kCompileFailed: return FLASHJIT_ERROR_COMPILE_FAILED;
    case ErrorCode::kResourceBudget: return FLASHJIT_ERROR_RESOURCE_BUDGET;
    case ErrorCode::kCacheIo: return FLASHJIT_ERROR_CACHE_IO;
    case ErrorCode::kNotCompiled: return FLASHJIT_ERROR_NOT_COMPILED;
    case ErrorCode::kDriverUnavailable: return FLASHJIT_ERROR_DRIVER_UNAVAILABLE;
    case ErrorCode::kDriverError: return FLASHJIT_ERROR_DRIVER;
    case ErrorCode::kInternal: return FLASHJIT_ERROR_INTERNAL;
  }
  return FLASHJIT_ERROR_INTERNAL;
}

ApiStatus null_argument(const char* field) {
  return Error::invalid_argument(field, std::string(field) + ": must not be NULL");
}

ApiStatus invalid_argument(std::string field, std::string message) {
  return Error::invalid_argument(std::move(field), std::move(message));
}

flashjit_status_t record(const ApiStatus& status) noexcept {
  LastError& last = last_error();
  last.fixed = nullptr;
  if (status.ok()) {
    // NOTES: clear() keeps the capacity and never allocates: this runs on the launch path.
    last.message.clear();
    last.field.clear();
    return FLASHJIT_SUCCESS;
  }
  try {
    last.message = full_message(status.error());
    last.field = status.error().field;
  } catch (...) {
    last.message.clear();
    last.field.clear();
    last.fixed = "out of host memory while recording an error";
  }
  return status.code();
}

flashjit_status_t record_exception(const char* function, flashjit_status_t status, const char* what) noexcept {
  LastError& last = last_error();
  last.fixed = nullptr;
  try {
    last.message = std::string(function) + ": " + (status == FLASHJIT_ERROR_INTERNAL ? "internal error: " : "") + what;
    last.field.clear();
  } catch (...) {
    last.message.clear();
    last.field.clear();
    last.fixed = "out of host memory while recording an error";
  }
  return status;
}

const char* last_error_message() noexcept {
  const LastError& last = last_error();
  return last.fixed ? last.fixed : last.message.c_str();
}

const char* last_error_field() noexcept { return last_error().field.c_str(); }

}  // namespace flashjit::api
