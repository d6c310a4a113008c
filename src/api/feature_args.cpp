#include "api/feature_args.hpp"

#include <cmath>
#include <string>

#include "api/launch_args.hpp"
#include "common/number_text.hpp"

namespace flashjit::api {
namespace {

bool known_sinks_dtype(int32_t dtype) { return dtype == FLASHJIT_DTYPE_FP32 || dtype == FLASHJIT_DTYPE_BF16; }

}  // namespace

ApiStatus to_feature_inputs(const flashjit_attention_args_t& a, FeatureInputs* out) {
  const char* window_allowed = "-1 (unbounded) or 0 and up (keys on that side of the diagonal)";
  if (a.window_left < -1) return args_not_allowed("window_left", std::to_string(a.window_left), window_allowed);
  if (a.window_right < -1) return args_not_allowed("window_right", std::to_string(a.window_right), window_allowed);
  if (a.attention_chunk < 0) return args_not_allowed("attention_chunk", std::to_string(a.attention_chunk), "0 (off) or 1 and up (keys per chunk)");
  if (!std::isfinite(a.softcap) || a.softcap < 0) return args_not_allowed("softcap", float_text(a.softcap), "0 (off) or a finite value above 0");
  if (a.sinks_dtype != 0 && !known_sinks_dtype(a.sinks_dtype)) {
    return args_not_allowed("sinks_dtype", std::to_string(a.sinks_dtype),
                            "FLASHJIT_DTYPE_FP32 (3) or FLASHJIT_DTYPE_BF16 (2) with sinks; 0 with no sinks");
  }
  if (a.sinks != 0 && a.sinks_dtype == 0) {
    return invalid_argument("args.sinks_dtype", "args.sinks_dtype: 0 with args.sinks set (" + hex_text(a.sinks) +
                                                    "); allowed: FLASHJIT_DTYPE_FP32 (3) or FLASHJIT_DTYPE_BF16 (2)");
  }
  if (a.alibi_batch_stride < 0) {
    return args_not_allowed("alibi_batch_stride", std::to_string(a.alibi_batch_stride),
                            "0 (one [heads_q] for every sequence) or at least heads_q (per sequence)");
  }
  FeatureInputs f;
  f.window_left = a.window_left;
  f.window_right = a.window_right;
  f.chunk = a.attention_chunk;
  f.softcap = a.softcap;
  f.sinks = a.sinks;
  f.sinks_bf16 = a.sinks_dtype == FLASHJIT_DTYPE_BF16;
  f.alibi_slopes = a.alibi_slopes;
  f.alibi_batch_stride = a.alibi_batch_stride;
  *out = f;
  return {};
}

}  // namespace flashjit::api
