#include "api/feature_args.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace flashjit::api {
namespace {

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string number(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", double(value));
  return text;
}

ApiStatus not_allowed(const char* field, const std::string& value, const char* allowed) {
  const std::string name = std::string("args.") + field;
  return invalid_argument(name, name + ": " + value + " is not allowed; allowed: " + allowed);
}

bool known_sinks_dtype(int32_t dtype) { return dtype == FLASHJIT_DTYPE_FP32 || dtype == FLASHJIT_DTYPE_BF16; }

}  // namespace

ApiStatus to_feature_inputs(const flashjit_attention_args_t& a, FeatureInputs* out) {
  const char* window_allowed = "-1 (unbounded) or 0 and up (keys on that side of the diagonal)";
  if (a.window_left < -1) return not_allowed("window_left", std::to_string(a.window_left), window_allowed);
  if (a.window_right < -1) return not_allowed("window_right", std::to_string(a.window_right), window_allowed);
  if (a.attention_chunk < 0) return not_allowed("attention_chunk", std::to_string(a.attention_chunk), "0 (off) or 1 and up (keys per chunk)");
  if (!std::isfinite(a.softcap) || a.softcap < 0) return not_allowed("softcap", number(a.softcap), "0 (off) or a finite value above 0");
  if (a.sinks_dtype != 0 && !known_sinks_dtype(a.sinks_dtype)) {
    return not_allowed("sinks_dtype", std::to_string(a.sinks_dtype),
                       "FLASHJIT_DTYPE_FP32 (3) or FLASHJIT_DTYPE_BF16 (2) with sinks; 0 with no sinks");
  }
  if (a.sinks != 0 && a.sinks_dtype == 0) {
    return invalid_argument("args.sinks_dtype", "args.sinks_dtype: 0 with args.sinks set (" + hex(a.sinks) +
                                                    "); allowed: FLASHJIT_DTYPE_FP32 (3) or FLASHJIT_DTYPE_BF16 (2)");
  }
  if (a.alibi_batch_stride < 0) {
    return not_allowed("alibi_batch_stride", std::to_string(a.alibi_batch_stride),
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
