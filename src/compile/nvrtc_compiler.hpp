// Compile stage: source -> sm_90a cubin with NVRTC (loaded on the first compile: nvrtc_library.hpp).
// Options are normalised (fixed order, no absolute paths); the ptxas report is parsed and kept; a
// failure returns kCompileFailed with the NVRTC log and the spec (kDriverUnavailable when NVRTC
// cannot be loaded), and produces nothing to cache.
#pragma once
#include <string>
#include <vector>

#include "common/status.hpp"
#include "compile/compiled_kernel.hpp"

namespace flashjit {

inline constexpr const char* kTargetArch = "sm_90a";

// The options every attention variant is compiled with (part of the cache key).
std::vector<std::string> default_nvrtc_options();

// "13.0": part of the cache key, since ptxas versions change code quality. The loaded NVRTC's; where
// none can be loaded, the version flashjit was built against (what its cache hits were compiled by).
std::string nvrtc_version();

// An environment variable naming a directory for NVRTC's time trace of every compile (see the .cpp).
inline constexpr const char* kTimeTraceEnv = "FLASHJIT_NVRTC_TIME_TRACE";

// Compiles request.source; never throws. The result carries the ptxas report and compile time.
Result<CompiledKernel> compile_with_nvrtc(const CompileRequest& request);

}  // namespace flashjit
