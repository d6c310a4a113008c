// The C launch arguments of the masks and score modifiers (MASKS AND SCORES in flashjit.h: softcap,
// window_left/right, attention_chunk, sinks_dtype, sinks, alibi_slopes, alibi_batch_stride) -> the
// core's FeatureInputs, with what the API layer can check alone (ranges, the sink dtype), and the
// rule that a value that is not off needs its spec key. Errors name the caller's field.
#pragma once
#include <string_view>

#include "api/api_status.hpp"
#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"

namespace flashjit::api {

// The fields' ranges and the sink dtype, into *out (sinks_dtype FP32 or BF16 -> sinks_bf16).
// Allocates only when it fails: it runs on every launch.
ApiStatus to_feature_inputs(const flashjit_attention_args_t& a, FeatureInputs* out);

// Whether the canonical spec text holds `key`=1 ("window", "chunk", "softcap", "sinks", "alibi"):
// those keys are printed only when on.
bool spec_has_key(std::string_view spec_text, std::string_view key);

// A feature value that is not off, where the spec did not compile its key in, is refused naming the
// field and the key ("args.window_left: 127 needs spec key window=1"). A spec this library cannot
// give the key refuses every such value alike.
ApiStatus feature_needs_spec_key(const KernelConfig& config, const FeatureInputs& features);

}  // namespace flashjit::api
