// Prewarm's order of work: every kernel of every spec's family is a job of its own, and the jobs
// go out costliest first (longest processing time first), so that a pool of one worker per core
// finishes together instead of waiting on the last family's two kernels (bench/NOTES.md, compile
// time, issue 22). Used by `flashjit prewarm` and flashjit_prewarm.
#pragma once
#include <cstddef>
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

}  // namespace flashjit
