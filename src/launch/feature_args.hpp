// The launch's masks and score modifiers (AttentionArgs.features) against what the kernel
// compiled in (spec keys window, chunk, softcap, sinks, alibi): checked by validate_attention_args,
// and read by the parameters, the split count and the tile deal's cost model.
#pragma once

#include "common/status.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// The window and chunk a launch runs with (templates/visibility.cuh's MaskRule, less the causal
// flag): the args' values where the spec compiled the feature in, else off (-1, -1, 0).
struct WindowChunk {
  int window_left = -1, window_right = -1;
  int chunk = 0;
};
WindowChunk launch_window_chunk(const AttentionSpec& spec, const AttentionArgs& args);

// Every feature the spec did not compile in is off in args.features (the error names the field,
// the spec key it needs, the kernel's spec and the field's off value: "window_left: 127 needs spec
// key window=1 (this kernel's spec is ...); allowed without it: -1 (off)"; the C API's
// validate_launch_args prefixes "args."); every one it did is in range: window_left and window_right -1 or more
// (with causal=1 the right bound is 0 whatever is passed: FlashAttention-3's causal window is
// (left, 0)), chunk 1 or more, softcap finite and positive, sinks and alibi_slopes non-null and
// aligned, alibi_batch_stride 0 (one [heads_q] row for every sequence) or at least heads_q.
Status check_feature_inputs(const AttentionSpec& spec, const AttentionArgs& args);

}  // namespace flashjit
