// The mask and score flags `check` and `bench` share (spec keys window, chunk, softcap, sinks,
// alibi): --window-left, --window-right, --chunk, --softcap, --sinks[=VALUE], --sinks-dtype,
// --alibi, --alibi-per-batch. They become the float64 reference's AttentionFeatures, which the
// verify stage uploads and passes to the launch (FeatureBuffers), so both see the same values.
#pragma once
#include <string>

#include <llvm/Support/JSON.h>

#include "launch/attention_args.hpp"
#include "spec/attention_spec.hpp"
#include "verify/fp8_cache.hpp"
#include "verify/reference.hpp"

namespace flashjit::tool {

struct FeatureChoice {
  AttentionFeatures features;
  bool sinks_bf16 = false;  // --sinks-dtype bf16 (the sink values are then exact in bf16)
};

// The flags' features for `batch` sequences of `heads_q` query heads under `spec`; "" when they
// apply, else the usage error: a bad value naming the flag and what is allowed, a flag whose spec
// key the spec lacks naming both, or a spec key whose value no flag gave.
std::string features_from_flags(const AttentionSpec& spec, int batch, int heads_q, FeatureChoice* out);

// The first mask or score flag given ("--chunk"), or "" when none was.
std::string first_feature_flag();

// The FP8 cache's flags (spec key kv_dtype=e4m3): --kv-scales K,V (default 0.5,0.25, powers of
// two: the dequantised cache exact in the dtype; others round the reference's copy once) and
// --kv-scale-per-head (one scale per K/V head: the scale times 1, 0.5, 2, 0.25, cycling). The
// cache `spec` asks for ("" when it applies, else the usage error: a bad value naming the flag and
// what is allowed, or a flag without kv_dtype=e4m3 in the spec). Off (on = false) without the key.
// FP8 operands (spec dtype=e4m3): Q, K and V e4m3 with descales 0.25, 0.5, 0.25 (powers of two:
// the bf16 copies the reference reads exact), --descale-per-head for FlashAttention-3's [batch,
// heads_kv] descales (the tensor's times 1, 0.5, 2, 0.25 cycling over sequence + head), and
// --descale-non-pow2 for descales that are not powers of two; those two flags need dtype=e4m3.
// v_in_k (--v-in-k, an FP8 latent cache): one scale for K and V (V's codes are K's).
std::string fp8_from_flags(const AttentionSpec& spec, Fp8Cache* out, bool v_in_k = false);
// "--kv-scales", "--kv-scale-per-head", "--descale-per-head" or "--descale-non-pow2" when given, else "".
std::string first_fp8_flag();

// What a run used, for --json: the cache's dtype and scales and what the launch read (scale
// pointers set, head strides); with FP8 operands also Q's descale, the batch strides, out_dtype.
llvm::json::Object fp8_json(const Fp8Cache& cache, const Fp8Inputs& launched);

// What a run used, for --json: the reference's features (window, chunk, softcap, sink values and
// their type, slopes) and what the launch read (its FeatureInputs: sizes, whether each pointer is
// set, the slopes' batch stride).
llvm::json::Object features_json(const FeatureChoice& choice, const FeatureInputs& launched);

// ALiBi slopes as MPT sets them: head h of heads_q gets 2^(-8 (h + 1) / heads_q).
double mpt_alibi_slope(int head, int heads_q);

}  // namespace flashjit::tool
