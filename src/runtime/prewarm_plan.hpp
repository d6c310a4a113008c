// Prewarm's order of work: every kernel of every spec's family is a job of its own, and the jobs
// go out costliest first (longest processing time first), so that a pool of one worker per core
// finishes together instead of waiting on the last family's two kernels (bench/NOTES.md, compile
// time, issue 22). Used by `flashjit prewarm` and flashjit_prewarm.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/engine.hpp"

namespace flashjit {

struct PrewarmJob {
  size_t spec_index;    // which of the specs asked for
  size_t kernel_index;  // which kernel of its family: 0 the spec's own, 1 its long-sequence variant
  AttentionSpec spec;   // what to pass to Engine::prepare
  double cost;          // estimated_compile_cost(spec)
};

// The jobs for `specs`, costliest first (ties in the order asked). Renders and compiles nothing.
std::vector<PrewarmJob> plan_prewarm(const Engine& engine, const std::vector<AttentionSpec>& specs);

// A kernel's compile time relative to others, from its resolved tiles (0 for a spec that does not
// resolve: it fails at once). Only the order matters.
double estimated_compile_cost(const AttentionSpec& spec);

// The engine specs (packed queries against a paged cache, causal, bf16) of the models whose masks
// or score modifiers need spec keys: gpt-oss (head dim 64: window + sinks, and sinks alone), Gemma
// (head dims 128 and 256: window + softcap) and Llama 4 (head dim 128: chunk). Text, because a
// spec parser without those keys cannot hold them.
std::vector<std::string> feature_prewarm_spec_texts();

// `prewarm --defaults`: the config stage's default specs, then each feature spec that parses;
// the others are listed in `skipped` with the parser's reason, so the default prewarm never fails
// on a key this build does not know.
struct DefaultPrewarmSet {
  std::vector<AttentionSpec> specs;
  std::vector<std::string> skipped;  // "<spec text>: <reason>"
};
DefaultPrewarmSet default_prewarm_set();

}  // namespace flashjit
