// Exported: flashjit_prewarm. Compiles (policy permitting) a list of specs into the context's
// cache on all cores, each with its long-sequence kernel where it has one; loads nothing, so it
// needs no GPU.
#include "api/api_status.hpp"
#include "api/context.hpp"
#include "api/spec_list.hpp"

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
    const auto outcomes = run_on_all_cores(parsed.size(), [&](size_t i) -> ApiStatus {
      auto family = state.engine().prepare_family(parsed[i], state.policy());
      if (!family) return family.take_error();
      return {};
    });
    return summarise_failures(outcomes, texts, "prewarm");
  });
}

}  // extern "C"
