// Exported: flashjit_prewarm. Compiles (policy permitting) a list of specs into the context's
// cache on all cores, each with its long-sequence kernel where it has one, one kernel per job and
// the costliest first (runtime/prewarm_plan.hpp); loads nothing, so it needs no GPU.
#include <cstdint>

#include "api/api_status.hpp"
#include "api/context.hpp"
#include "api/spec_list.hpp"
#include "runtime/prewarm_plan.hpp"

using namespace flashjit;
using namespace flashjit::api;

extern "C" {

flashjit_status_t flashjit_prewarm(flashjit_context_t context, const char* const* specs, size_t count) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!context) return null_argument("context");
    std::vector<AttentionSpec> parsed;
    std::vector<std::string> texts;
    if (ApiStatus st = parse_spec_list(specs, count, &parsed, &texts); !st.ok()) return st;
    const ContextState& state = *context->state;
    const std::vector<PrewarmJob> plan = plan_prewarm(state.engine(), parsed);
    const auto job_outcomes = run_on_all_cores(plan.size(), [&](size_t j) -> ApiStatus {
      auto kernel = state.engine().prepare(plan[j].spec, state.policy());
      if (!kernel) return kernel.take_error();
      return {};
    });
    // A spec's outcome: its first kernel's failure, if any (its own kernel before its variant's).
    std::vector<ApiStatus> outcomes(parsed.size());
    std::vector<size_t> failed_kernel(parsed.size(), SIZE_MAX);
    for (size_t j = 0; j < plan.size(); ++j) {
      const size_t i = plan[j].spec_index;
      if (!job_outcomes[j].ok() && plan[j].kernel_index < failed_kernel[i]) {
        outcomes[i] = job_outcomes[j];
        failed_kernel[i] = plan[j].kernel_index;
      }
    }
    return summarise_failures(outcomes, texts, "prewarm");
  });
}

}  // extern "C"
