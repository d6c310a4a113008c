#include "runtime/prewarm_plan.hpp"

#include <algorithm>

#include "config/kernel_config.hpp"

namespace flashjit {

double estimated_compile_cost(const AttentionSpec& spec) {
  auto config = make_config(spec);
  if (!config) return 0;
  const AttentionSpec& s = config->spec;
  // NOTES: fitted to the NVRTC times of the 26 default kernels (bench/NOTES.md, issue 22; within
  // 10 % of each, 0.95 to 2.25 times the cheapest): the loop bodies grow with the S and O
  // accumulators (block_n and v_cols columns), the causal mask adds its masked step instances, and
  // a cluster its multicast loads.
  double cost = s.block_n + config->v_cols;
  if (s.causal) cost *= 1.3;
  if (s.cluster == 2) cost *= 1.05;
  return cost;
}

std::vector<PrewarmJob> plan_prewarm(const Engine& engine, const std::vector<AttentionSpec>& specs) {
  std::vector<PrewarmJob> jobs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<AttentionSpec> kernels = engine.family_specs(specs[i]);
    for (size_t k = 0; k < kernels.size(); ++k) jobs.push_back({i, k, kernels[k], estimated_compile_cost(kernels[k])});
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const PrewarmJob& a, const PrewarmJob& b) { return a.cost > b.cost; });
  return jobs;
}

std::vector<std::string> feature_prewarm_spec_texts() {
  const std::string engine = "dtype=bf16,causal=1,varlen=1,paged=1";
  return {
      "head_dim=64," + engine + ",window=1,sinks=1",    // gpt-oss: sliding layers (128 keys) with sinks
      "head_dim=64," + engine + ",sinks=1",             // gpt-oss: full layers with sinks
      "head_dim=128," + engine + ",window=1,softcap=1", // Gemma 2 (d128 variants)
      "head_dim=256," + engine + ",window=1,softcap=1", // Gemma 2 / 3 (d256)
      "head_dim=128," + engine + ",chunk=1",            // Llama 4: 8k attention chunks
  };
}

DefaultPrewarmSet default_prewarm_set() {
  DefaultPrewarmSet set;
  set.specs = default_prewarm_specs();
  for (const std::string& text : feature_prewarm_spec_texts()) {
    auto spec = parse_spec(text);
    if (!spec) {
      set.skipped.push_back(text + ": " + spec.error().message);
      continue;
    }
    if (auto config = make_config(*spec); !config) {
      set.skipped.push_back(text + ": " + config.error().message);
      continue;
    }
    set.specs.push_back(*spec);
  }
  return set;
}

}  // namespace flashjit
