// Exported: versions, the ABI check, status names, the thread-local last error, flashjit_supported.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "api/api_status.hpp"
#include "config/kernel_config.hpp"
#include "spec/attention_spec.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

// The header's version macros must be the project's version (CMake's project(VERSION)).
constexpr uint32_t packed_version(std::string_view text) {
  uint32_t parts[3] = {0, 0, 0};
  size_t part = 0;
  for (char c : text) {
    if (c == '.') {
      if (++part == 3) break;
    } else if (c >= '0' && c <= '9') {
      parts[part] = parts[part] * 10 + uint32_t(c - '0');
    }
  }
  return FLASHJIT_MAKE_VERSION(parts[0], parts[1], parts[2]);
}
static_assert(packed_version(FLASHJIT_VERSION_STRING) == FLASHJIT_VERSION,
              "include/flashjit/flashjit.h FLASHJIT_VERSION_* disagree with the CMake project version");

// The ABI this library implements.
constexpr uint32_t kAbiVersion = 1;
static_assert(kAbiVersion == FLASHJIT_ABI_VERSION);

void copy_reason(const std::string& text, char* reason, size_t reason_size) {
  if (!reason || reason_size == 0) return;
  const size_t n = std::min(text.size(), reason_size - 1);
  std::memcpy(reason, text.data(), n);
  reason[n] = '\0';
}

}  // namespace

extern "C" {

uint32_t flashjit_get_version(void) { return FLASHJIT_VERSION; }

uint32_t flashjit_abi_version(void) { return kAbiVersion; }

flashjit_status_t flashjit_check_abi(uint32_t header_abi_version) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (header_abi_version == kAbiVersion) return {};
    return ApiStatus::make(FLASHJIT_ERROR_ABI_MISMATCH, "header_abi_version",
                           "header_abi_version: the caller was built against flashjit ABI " +
                               std::to_string(header_abi_version) + ", this library implements ABI " +
                               std::to_string(kAbiVersion) + " (" FLASHJIT_VERSION_STRING "); rebuild against its flashjit.h");
  });
}

const char* flashjit_status_string(flashjit_status_t status) {
  switch (status) {
    case FLASHJIT_SUCCESS: return "FLASHJIT_SUCCESS";
    case FLASHJIT_ERROR_INVALID_ARGUMENT: return "FLASHJIT_ERROR_INVALID_ARGUMENT";
    case FLASHJIT_ERROR_INVALID_SPEC: return "FLASHJIT_ERROR_INVALID_SPEC";
    case FLASHJIT_ERROR_NOT_COMPILED: return "FLASHJIT_ERROR_NOT_COMPILED";
    case FLASHJIT_ERROR_COMPILE_FAILED: return "FLASHJIT_ERROR_COMPILE_FAILED";
    case FLASHJIT_ERROR_RESOURCE_BUDGET: return "FLASHJIT_ERROR_RESOURCE_BUDGET";
    case FLASHJIT_ERROR_DRIVER_UNAVAILABLE: return "FLASHJIT_ERROR_DRIVER_UNAVAILABLE";
    case FLASHJIT_ERROR_UNSUPPORTED_DEVICE: return "FLASHJIT_ERROR_UNSUPPORTED_DEVICE";
    case FLASHJIT_ERROR_WRONG_CONTEXT: return "FLASHJIT_ERROR_WRONG_CONTEXT";
    case FLASHJIT_ERROR_DRIVER: return "FLASHJIT_ERROR_DRIVER";
    case FLASHJIT_ERROR_CACHE_IO: return "FLASHJIT_ERROR_CACHE_IO";
    case FLASHJIT_ERROR_INVALID_BUNDLE: return "FLASHJIT_ERROR_INVALID_BUNDLE";
    case FLASHJIT_ERROR_ABI_MISMATCH: return "FLASHJIT_ERROR_ABI_MISMATCH";
    case FLASHJIT_ERROR_OUT_OF_MEMORY: return "FLASHJIT_ERROR_OUT_OF_MEMORY";
    case FLASHJIT_ERROR_INTERNAL: return "FLASHJIT_ERROR_INTERNAL";
    default: return "FLASHJIT_STATUS_UNKNOWN";
  }
}

const char* flashjit_last_error_message(void) { return last_error_message(); }

const char* flashjit_last_error_field(void) { return last_error_field(); }

flashjit_status_t flashjit_supported(const char* spec, char* reason, size_t reason_size) {
  const flashjit_status_t status = guarded(__func__, [&]() -> ApiStatus {
    if (!spec) return null_argument("spec");
    if (!reason && reason_size > 0) return null_argument("reason");
    auto parsed = parse_spec(spec);
    if (!parsed) return parsed.take_error();
    auto config = make_config(*parsed);
    if (!config) return config.take_error();
    return {};
  });
  copy_reason(last_error_message(), reason, reason_size);
  return status;
}

}  // extern "C"
