// The C launch arguments of the masks and score modifiers (MASKS AND SCORES in flashjit.h: softcap,
// window_left/right, attention_chunk, sinks_dtype, sinks, alibi_slopes, alibi_batch_stride) -> the
// core's FeatureInputs, with what the API layer can check alone (ranges, the sink dtype). Errors
// name the caller's field. The rule that a value that is not off needs its spec key is the core's
// (launch/feature_args.hpp, through validate_launch_args).
#pragma once
#include "api/api_status.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"

namespace flashjit::api {

// The fields' ranges and the sink dtype, into *out (sinks_dtype FP32 or BF16 -> sinks_bf16).
// Allocates only when it fails: it runs on every launch.
ApiStatus to_feature_inputs(const flashjit_attention_args_t& a, FeatureInputs* out);

}  // namespace flashjit::api
