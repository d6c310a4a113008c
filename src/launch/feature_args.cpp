#include "launch/feature_args.hpp"

#include <cmath>
#include <string>

#include "common/number_text.hpp"
#include "launch/arg_error.hpp"

namespace flashjit {
namespace {

// A value that is not off, where the spec did not compile its key in: the field, the key, the
// kernel's spec and the value the field may take without the key.
Status needs_key(const AttentionSpec& spec, const char* field, const std::string& value, const char* key, const char* off) {
  return bad_argument(field, value + " needs spec key " + key + "=1 (this kernel's spec is " + to_string(spec) + "); allowed without it: " + off);
}

Status check_device_pointer(const char* field, uint64_t ptr, uint64_t alignment, const char* what) {
  if (ptr == 0) return bad_argument(field, std::string("null device pointer (") + what + ")");
  if (ptr % alignment != 0) return bad_argument(field, "pointer " + hex_text(ptr) + " is not " + std::to_string(alignment) + "-byte aligned (" + what + ")");
  return {};
}

Status check_window_side(const char* field, int value) {
  if (value < -1) return bad_argument(field, std::to_string(value) + " is not allowed; allowed: -1 (unbounded) or 0 and more keys");
  return {};
}

}  // namespace

WindowChunk launch_window_chunk(const AttentionSpec& spec, const AttentionArgs& args) {
  WindowChunk w;
  if (spec.window) w.window_left = args.features.window_left, w.window_right = args.features.window_right;
  if (spec.chunk) w.chunk = args.features.chunk;
  return w;
}

Status check_feature_inputs(const AttentionSpec& spec, const AttentionArgs& a) {
  const FeatureInputs& f = a.features;
  if (!spec.window) {
    if (f.window_left != -1) return needs_key(spec, "window_left", std::to_string(f.window_left), "window", "-1 (off)");
    if (f.window_right != -1) return needs_key(spec, "window_right", std::to_string(f.window_right), "window", "-1 (off)");
  } else {
    if (Status st = check_window_side("window_left", f.window_left); !st) return st;
    if (Status st = check_window_side("window_right", f.window_right); !st) return st;
  }
  if (!spec.chunk) {
    if (f.chunk != 0) return needs_key(spec, "attention_chunk", std::to_string(f.chunk), "chunk", "0 (off)");
  } else if (f.chunk < 1) {
    return bad_argument("attention_chunk", std::to_string(f.chunk) + " is not allowed; allowed: 1 or more keys per chunk (spec key chunk=1)");
  }
  if (!spec.softcap) {
    if (f.softcap != 0) return needs_key(spec, "softcap", float_text(f.softcap), "softcap", "0 (off)");
  } else if (!std::isfinite(f.softcap) || !(f.softcap > 0)) {
    return bad_argument("softcap", float_text(f.softcap) + " is not allowed; allowed: a finite cap above 0 (spec key softcap=1)");
  }
  if (!spec.sinks) {
    if (f.sinks != 0) return needs_key(spec, "sinks", hex_text(f.sinks), "sinks", "0 (null)");
    if (f.sinks_bf16) return needs_key(spec, "sinks_dtype", "bf16", "sinks", "0 (no sinks)");
  } else if (Status st = check_device_pointer("sinks", f.sinks, f.sinks_bf16 ? 2 : 4, f.sinks_bf16 ? "bf16 [heads_q] sink logits" : "float32 [heads_q] sink logits"); !st) {
    return st;
  }
  if (!spec.alibi) {
    if (f.alibi_slopes != 0) return needs_key(spec, "alibi_slopes", hex_text(f.alibi_slopes), "alibi", "0 (null)");
    if (f.alibi_batch_stride != 0) return needs_key(spec, "alibi_batch_stride", std::to_string(f.alibi_batch_stride), "alibi", "0 (off)");
  } else {
    if (Status st = check_device_pointer("alibi_slopes", f.alibi_slopes, 4, "float32 slopes [heads_q] or [batch][alibi_batch_stride]"); !st) return st;
    if (f.alibi_batch_stride != 0 && f.alibi_batch_stride < a.heads_q) {
      return bad_argument("alibi_batch_stride", std::to_string(f.alibi_batch_stride) + " is not allowed; allowed: 0 (one [heads_q] row of slopes for every sequence) or at least heads_q=" +
                                                    std::to_string(a.heads_q) + " (a row per sequence)");
    }
  }
  return {};
}

}  // namespace flashjit
