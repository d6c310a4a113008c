// What the compile stage produces and the cache stage stores: a cubin and what ptxas said of it.
#pragma once
#include <string>
#include <vector>

namespace flashjit {

// Parsed from NVRTC's log with --ptxas-options=-v.
struct PtxasReport {
  int registers = 0;           // "Used N registers"
  int spill_store_bytes = 0;   // "N bytes spill stores"
  int spill_load_bytes = 0;    // "N bytes spill loads"
  int stack_frame_bytes = 0;   // "N bytes stack frame" (local memory)
  int static_smem_bytes = 0;   // "N bytes smem"
  std::vector<std::string> warnings;  // C7508 / C751x lines, verbatim

  int spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
  bool operator==(const PtxasReport&) const = default;
};

// Everything needed to rebuild the request that gives a cubin: the inputs of the cache key.
struct CompileRequest {
  std::string source;                // rendered CUDA source
  std::vector<std::string> options;  // normalised NVRTC options (order fixed, no absolute paths)
  std::string kernel_name;           // extern "C" entry point
  std::string spec_text;             // canonical resolved spec, for logs and the cache entry
};

struct CompiledKernel {
  std::string spec_text;
  std::string kernel_name;
  std::string cubin;     // bytes
  PtxasReport report;
  std::string nvrtc_version;  // of the NVRTC that compiled it ("13.0"); kept in the cache entry
  double compile_ms = 0;  // wall time of the NVRTC compile that produced it (0 for a cache hit)
  bool operator==(const CompiledKernel&) const = default;
};

}  // namespace flashjit
