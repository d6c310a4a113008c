// The launch checks' refusal: kInvalidArgument naming the core field, its message "field: what"
// (the C API renames both to the caller's field: api/launch_args.hpp's as_args_error).
#pragma once
#include <string>

#include "common/status.hpp"

namespace flashjit {

inline Error bad_argument(const std::string& field, const std::string& what) { return Error::invalid_argument(field, field + ": " + what); }

}  // namespace flashjit
