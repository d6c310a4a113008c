#include "runtime/engine.hpp"

#include <exception>
#include <system_error>
#include <thread>

#include "cache/cache_dir.hpp"
#include "cache/cache_key.hpp"
#include "common/log.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "runtime/tuning.hpp"
#include "source/render.hpp"

namespace flashjit {
namespace {

KernelCacheOptions cache_options(const EngineOptions& o) {
  KernelCacheOptions c;
  if (!o.memory_only) c.dir = resolve_cache_dir(o.cache_dir);
  c.max_bytes = o.max_cache_bytes;
  return c;
}

}  // namespace

CompileRequest make_compile_request(const KernelConfig& config) {
  return CompileRequest{render_attention_source(config), default_nvrtc_options(), config.kernel_name,
                        to_string(config.spec)};
}

std::string cache_key_for(const CompileRequest& request) {
  static const std::string version = nvrtc_version();
  return compute_cache_key({request.source, request.options, version, kTargetArch});
}

Status check_compiled_kernel(const KernelConfig& config, const CompiledKernel& kernel) {
  if (Status st = check_register_budget(config, kernel.report.registers); !st) return st;
  if (kernel.report.spill_bytes() > 0) {
    logger().warn("{}: {} bytes of register spills (slower, still correct)", kernel.spec_text, kernel.report.spill_bytes());
  }
  return {};
}

Engine::Engine(EngineOptions options) : options_(std::move(options)), cache_(cache_options(options_)) {}

Result<PreparedKernel> Engine::prepare(const AttentionSpec& spec) { return prepare(spec, options_.policy); }

AttentionSpec Engine::tuned_spec(const AttentionSpec& asked) const {
  if (options_.use_tuning && has_auto_tiles(asked)) {
    if (auto tuned = load_tuned_spec(cache_.dir(), asked)) return *tuned;
  }
  return asked;
}

Result<PreparedKernel> Engine::prepare(const AttentionSpec& asked, CompilePolicy policy) {
  // 0. A spec left at auto takes the tuned winner, where `flashjit tune` recorded one.
  const AttentionSpec spec = tuned_spec(asked);
  // 1. Resolve the spec against the tile table (errors name the field).
  auto config = make_config(spec);
  if (!config) return config.take_error();
  // 2. Render and key it.
  CompileRequest request = make_compile_request(*config);
  const std::string key = cache_key_for(request);
  // 3. Memory or disk; compile only where the policy allows.
  Result<CacheLookup> found = policy == CompilePolicy::kCacheOnly
                                  ? cache_.lookup(key)
                                  : cache_.get_or_compile(key, request.spec_text, [&]() -> Result<CompiledKernel> {
                                      auto kernel = compile_with_nvrtc(request);
                                      if (!kernel) return kernel;
                                      if (Status st = check_compiled_kernel(*config, *kernel); !st) return st.take_error();
                                      return kernel;
                                    });
  if (!found) {
    Error e = found.take_error();
    if (e.code == ErrorCode::kNotCompiled) e.message = "kernel for spec '" + request.spec_text + "' is not in the cache (cache-only policy)";
    return e;
  }
  return PreparedKernel{*config, key, found->kernel, found->source, !(spec == asked)};
}

Result<PreparedFamily> Engine::prepare_family(const AttentionSpec& spec, CompilePolicy policy) {
  const std::vector<AttentionSpec> kernels = family_specs(spec);
  // NOTES: a family's two kernels are prepared at once, so that a cold d192/d256 causal family
  // costs its longer compile rather than both (bench/NOTES.md, issue 22); on one core, in turn.
  std::optional<Result<PreparedKernel>> second;
  std::thread worker;
  struct JoinOnExit {  // also when the first prepare throws: a joinable thread must not be destroyed
    std::thread& thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{worker};
  bool at_once = kernels.size() == 2 && std::thread::hardware_concurrency() > 1;
  auto prepare_second = [&]() noexcept {
    try {
      second.emplace(prepare(kernels[1], policy));
    } catch (const std::exception& e) {
      second.emplace(Error{ErrorCode::kInternal, std::string("internal error: ") + e.what(), {}, {}});
    }
  };
  if (at_once) {
    try {
      worker = std::thread(prepare_second);
    } catch (const std::system_error&) {
      at_once = false;  // no thread to be had: in turn
    }
  }
  auto main = prepare(spec, policy);
  if (at_once) worker.join();
  if (!main) return main.take_error();
  PreparedFamily family{std::move(*main), std::nullopt, {}};
  if (kernels.size() == 1) return family;
  if (!at_once) prepare_second();
  if (!*second) return second->take_error();
  family.long_sequences = std::move(**second);
  family.long_rule = long_sequence_variant(spec)->rule;
  return family;
}

std::vector<AttentionSpec> Engine::family_specs(const AttentionSpec& spec) const {
  // As prepare_family: a tuned main kernel runs throughout, else the variant joins it.
  const auto variant = long_sequence_variant(spec);
  if (!variant || !(tuned_spec(spec) == spec)) return {spec};
  return {spec, variant->spec};
}

Result<std::shared_ptr<LoadedKernel>> Engine::load(const DriverApi& api, const PreparedKernel& kernel, CUcontext context) {
  return modules_.get_or_load(api, context, kernel.key, kernel.compiled->cubin, kernel.config.kernel_name,
                              kernel.config.smem_bytes, kernel.config.more_kernel_names, kernel.config.spec.ctas_per_sm == 2);
}

}  // namespace flashjit
