// Reads ptxas's verbose report (registers, spills, stack, shared memory, C75xx warnings) out of an
// NVRTC log.
#pragma once
#include <string_view>

#include "compile/compiled_kernel.hpp"

namespace flashjit {

PtxasReport parse_ptxas_report(std::string_view log, std::string_view kernel_name);

}  // namespace flashjit
