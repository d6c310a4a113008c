// Kernel choice: which of a spec's kernels a launch runs. config/length_choice.hpp names a spec's
// long-sequence variant and its rule; this applies the rule to one launch's arguments on a device
// of sm_count SMs. On the hot path: a few integer operations, no allocation.
#pragma once

#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// Whether a launch of `args` runs the long-sequence variant rather than `main` (the spec's own
// kernel). sm_count 0 (unknown) leaves main without a persistent grid: only the lengths decide.
bool runs_long_variant(const LongSequenceRule& rule, const KernelConfig& main, const AttentionArgs& args, int sm_count);

}  // namespace flashjit
