// Exported: flashjit_prewarm and flashjit_prewarm_report. Compiles (policy permitting) a list of
// specs into the context's cache on all cores, each with its long-sequence kernel where it has one,
// one kernel per job and the costliest first (runtime/prewarm_plan.hpp); loads nothing, so it needs
// no GPU. With a cache directory, a kernel that is not stored there fails its spec: prewarming
// exists to store kernels (a context that fell back to memory only used to report success).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "api/api_status.hpp"
#include "api/context.hpp"
#include "api/spec_list.hpp"
#include "api/struct_size.hpp"
#include "runtime/prewarm_plan.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

// The first published flashjit_prewarm_result_t.
constexpr uint32_t kPrewarmResultMinSize = sizeof(flashjit_prewarm_result_t);

struct SpecOutcome {
  ApiStatus status;
  size_t failed_kernel = SIZE_MAX;  // its own kernel (0) before its long-sequence kernel's (1)
  int kernels = 0, compiled = 0, hits = 0, stored = 0;

  void fail(size_t kernel_index, ApiStatus why) {
    if (kernel_index >= failed_kernel) return;
    status = std::move(why);
    failed_kernel = kernel_index;
  }
};

std::vector<SpecOutcome> prewarm_specs(const ContextState& state, const std::vector<AttentionSpec>& parsed) {
  Engine& engine = state.engine();
  const std::vector<PrewarmJob> plan = plan_prewarm(engine, parsed);
  std::vector<PreparedKernel> prepared(plan.size());
  const auto job_outcomes = run_on_all_cores(plan.size(), [&](size_t j) -> ApiStatus {
    auto kernel = engine.prepare(plan[j].spec, state.policy());
    if (!kernel) return kernel.take_error();
    prepared[j] = std::move(*kernel);
    return {};
  });
  const bool to_disk = !engine.options().memory_only;
  std::vector<SpecOutcome> outcomes(parsed.size());
  for (size_t j = 0; j < plan.size(); ++j) {
    SpecOutcome& o = outcomes[plan[j].spec_index];
    ++o.kernels;
    if (!job_outcomes[j].ok()) {
      o.fail(plan[j].kernel_index, job_outcomes[j]);
      continue;
    }
    (prepared[j].source == CacheLookup::Source::kCompiled ? o.compiled : o.hits)++;
    if (!to_disk) continue;
    if (engine.cache().stored(prepared[j].key)) {
      ++o.stored;
    } else {
      o.fail(plan[j].kernel_index,
             ApiStatus::make(FLASHJIT_ERROR_CACHE_IO, "cache_dir",
                             "kernel " + to_string(prepared[j].config.spec) + " not stored: " + engine.cache().why_not_stored()));
    }
  }
  return outcomes;
}

ApiStatus prewarm(flashjit_context_t context, const char* const* specs, size_t count, flashjit_prewarm_result_t* results) {
  if (!context) return null_argument("context");
  if (results && count > 0) {
    if (ApiStatus st = check_struct_size("results[0]", "flashjit_prewarm_result_t", results[0].struct_size,
                                         kPrewarmResultMinSize, sizeof(flashjit_prewarm_result_t));
        !st.ok()) {
      return st;
    }
  }
  std::vector<AttentionSpec> parsed;
  std::vector<std::string> texts;
  if (ApiStatus st = parse_spec_list(specs, count, &parsed, &texts); !st.ok()) return st;
  std::vector<SpecOutcome> outcomes = prewarm_specs(*context->state, parsed);
  if (results) {
    const uint32_t stride = results[0].struct_size;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const SpecOutcome& o = outcomes[i];
      flashjit_prewarm_result_t r{};
      r.struct_size = stride;
      r.status = o.status.code();
      r.kernels = o.kernels;
      r.compiled = o.compiled;
      r.hits = o.hits;
      r.stored = o.stored;
      if (!o.status.ok()) {
        const std::string& message = o.status.error().message;
        std::memcpy(r.message, message.data(), std::min(message.size(), sizeof(r.message) - 1));
      }
      auto* out = reinterpret_cast<flashjit_prewarm_result_t*>(reinterpret_cast<char*>(results) + i * stride);
      std::memcpy(static_cast<void*>(out), &r, std::min<size_t>(stride, sizeof(r)));
    }
  }
  std::vector<ApiStatus> statuses;
  for (SpecOutcome& o : outcomes) statuses.push_back(std::move(o.status));
  return summarise_failures(statuses, texts, "prewarm");
}

}  // namespace

extern "C" {

flashjit_status_t flashjit_prewarm(flashjit_context_t context, const char* const* specs, size_t count) {
  return guarded(__func__, [&]() -> ApiStatus { return prewarm(context, specs, count, nullptr); });
}

flashjit_status_t flashjit_prewarm_report(flashjit_context_t context, const char* const* specs, size_t count,
                                          flashjit_prewarm_result_t* results) {
  return guarded(__func__, [&]() -> ApiStatus { return prewarm(context, specs, count, results); });
}

}  // extern "C"
