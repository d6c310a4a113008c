// The pipeline end to end, minus the launch: spec -> config -> source -> (cache | NVRTC) -> cubin,
// and cubin -> module loaded in a context. Lifecycle of a kernel:
//   prepare(spec)   may render, compile and publish (policy permitting); the only step that compiles
//   prepare_family(spec)   prepare() for the spec and its long-sequence variant (config/length_choice.hpp)
//   load(prepared, context)   loads the module once per context
//   launch          src/launch: never allocates, synchronises or compiles
#pragma once
#include <cuda.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "driver/module.hpp"
#include "launch/kernel_choice.hpp"

namespace flashjit {

enum class CompilePolicy {
  kJit,        // compile on a miss (default)
  kCacheOnly,  // a miss is kNotCompiled at once, so an engine can fall back
};

struct EngineOptions {
  std::optional<std::string> cache_dir;  // explicit directory; else the usual resolution
  bool memory_only = false;              // no disk cache at all
  uint64_t max_cache_bytes = 0;          // disk size cap, 0 = none
  CompilePolicy policy = CompilePolicy::kJit;
  bool use_tuning = true;                // a spec left at auto takes `flashjit tune`'s recorded winner
};

struct PreparedKernel {
  KernelConfig config;
  std::string key;
  std::shared_ptr<const CompiledKernel> compiled;
  CacheLookup::Source source = CacheLookup::Source::kMemory;  // where this call found it
  bool tuned = false;  // the spec was left at auto and `flashjit tune`'s recorded winner replaced it
};

// What a kernel handle for one spec launches: its kernel, and for long sequences perhaps another.
struct PreparedFamily {
  PreparedKernel main;
  std::optional<PreparedKernel> long_sequences;  // runs where long_rule holds
  LongSequenceRule long_rule;

  // The kernel the C API launches for `args` (only the extents matter) on a device of sm_count SMs.
  const PreparedKernel& for_launch(const AttentionArgs& args, int sm_count) const {
    return long_sequences && runs_long_variant(long_rule, main.config, args, sm_count) ? *long_sequences : main;
  }
  // Every kernel of the family: main, then the long-sequence one if any.
  std::vector<const PreparedKernel*> kernels() const {
    if (long_sequences) return {&main, &*long_sequences};
    return {&main};
  }
};

// The compile request for a resolved config (rendered source, options, names).
CompileRequest make_compile_request(const KernelConfig& config);
std::string cache_key_for(const CompileRequest& request);

class Engine {
 public:
  explicit Engine(EngineOptions options = {});

  Result<PreparedKernel> prepare(const AttentionSpec& spec);
  Result<PreparedKernel> prepare(const AttentionSpec& spec, CompilePolicy policy);
  // Both kernels or an error; a tuned spec has no long-sequence variant (its winner runs throughout).
  // The two kernels are prepared at once, the second on a thread of its own.
  Result<PreparedFamily> prepare_family(const AttentionSpec& spec, CompilePolicy policy);
  // The kernels prepare_family(spec) prepares, in its order (main, then the long-sequence variant),
  // as the specs to pass to prepare(), without rendering or compiling anything: so that a pool can
  // compile a family's kernels on different cores (prewarm, runtime/prewarm_plan.hpp).
  std::vector<AttentionSpec> family_specs(const AttentionSpec& spec) const;
  Result<std::shared_ptr<LoadedKernel>> load(const DriverApi& api, const PreparedKernel& kernel, CUcontext context);

  KernelCache& cache() { return cache_; }
  ModuleTable& modules() { return modules_; }
  const EngineOptions& options() const { return options_; }

 private:
  // The spec prepare() compiles for `asked`: `flashjit tune`'s recorded winner where tuning is on,
  // the spec left its tiles at auto and a record exists; else `asked` itself.
  AttentionSpec tuned_spec(const AttentionSpec& asked) const;

  EngineOptions options_;
  KernelCache cache_;
  ModuleTable modules_;
};

// The variant checks every compiled kernel must pass before it is cached: setmaxnreg within the
// register budget (over budget hangs). Spills are reported, not refused.
Status check_compiled_kernel(const KernelConfig& config, const CompiledKernel& kernel);

}  // namespace flashjit
