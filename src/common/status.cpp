#include "common/status.hpp"

namespace flashjit {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidSpec: return "invalid spec";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kCompileFailed: return "compile failed";
    case ErrorCode::kResourceBudget: return "resource budget";
    case ErrorCode::kCacheIo: return "cache i/o";
    case ErrorCode::kNotCompiled: return "not compiled";
    case ErrorCode::kDriverUnavailable: return "driver unavailable";
    case ErrorCode::kDriverError: return "driver error";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace flashjit
