// score_mod.cuh: the score path's rules and the softmax's finalize step (issue 38), the one
// statement of them for host and device, beside visibility.cuh's mask rule: compiled on the host
// by the float64 reference (src/verify/reference.cpp, which also renders it into the GPU
// reference kernel) and the tests (tests/score_mod_test.cpp). Plain functions on float (the
// kernel's fragment values) or double (the reference), so the kernel's epilogue, the split merge
// (split_merge.cuh) and the inline merge can call the same code.
//
// The logit of query row `row` (key position p, visibility.cuh) and key j, in this order (FA3's
// and FlashAttention-2's):
//   x = scale * q . k_j                      the scaled score
//   x = softcap * tanh(x / softcap)          softcap > 0 (Gemma 2: 50), before the mask
//   x = x - slope * |p - j|                  ALiBi (FlashAttention-2's definition), slopes [heads_q]
//                                            or [batch, heads_q]
//   masked keys (visibility.cuh) drop out; the softmax then takes x with scale 1.
// A learnable sink s_h (one logit per query head, not scaled) joins every row's denominator as a
// key with no value: O = sum_j exp(x_j) v_j / (sum_j exp(x_j) + exp(s_h)).
//
// LSE convention: the sink is in the LSE, LSE = log(sum_j exp(x_j) + exp(s_h)) (vLLM's fork's
// s_aux, FA4's learnable_sink; gpt-oss's Triton kernel leaves it out). Then (O, LSE) is the
// attention state over the keys and a zero-valued sink key: the backward pass's P = exp(x - LSE)
// is the forward's, and merging it with another state (cascade attention, the split merge) is
// the usual merge, provided the sink sits in exactly one of the states. A row with no visible key
// gets O = 0 and LSE = -inf; with a sink, O = 0 and LSE = s_h. Split partials leave the sink out;
// the merge counts it once (finalize_merge).
//
// NOTES (correctness): the cap comes before the mask, so a masked key's -inf is set after tanh
// (tanh(-inf) = -1 would leave it visible); finalize_row takes the max over the sink and the
// running max before any exponential (a sink far above the scores overflows exp otherwise); a
// row whose running sum is 0 (no visible key) gets O = 0, never 0 / 0.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif
// The host includes <cmath> before this header (the reference, the tests): a rendered kernel takes no
// headers (Render.DeterministicAndSpecific), so none is included here.

// Math by the value's type: float in the kernel, double in the reference. (The kernel may use the
// hardware's approximate tanh and exp2 for the same formulas.)
FJ_DEVICE float fj_exp2(float x) { return exp2f(x); }
FJ_DEVICE double fj_exp2(double x) { return exp2(x); }
FJ_DEVICE float fj_log2(float x) { return log2f(x); }
FJ_DEVICE double fj_log2(double x) { return log2(x); }
FJ_DEVICE float fj_tanh(float x) { return tanhf(x); }
FJ_DEVICE double fj_tanh(double x) { return tanh(x); }
template <typename T>
FJ_DEVICE T fj_minus_infinity() {
  return -T(1) / T(0);
}

constexpr double kFjLog2E = 1.4426950408889634;  // log2(e)
constexpr double kFjLn2 = 0.6931471805599453;    // ln(2)

// ---- the score modifiers
// softcap > 0: the capped logit; else the scaled score as it is.
template <typename T>
FJ_DEVICE T softcap_logit(T scaled_score, T softcap) {
  return softcap > T(0) ? softcap * fj_tanh(scaled_score / softcap) : scaled_score;
}

// ALiBi: the bias of key j for the row at key position p.
template <typename T>
FJ_DEVICE T alibi_bias(T slope, int p, int j) {
  const T distance = T(p) - T(j);  // in T: |p - j| may pass int's range
  return -slope * (distance < T(0) ? -distance : distance);
}

// Where a sequence's slopes are: [heads_q] (batch_stride 0) or [batch, heads_q] (batch_stride heads_q).
FJ_DEVICE long long alibi_slope_index(int batch, int head, long long batch_stride) { return batch * batch_stride + head; }

// The logit by the definition above, before the mask (slope 0: no ALiBi).
template <typename T>
FJ_DEVICE T modified_logit(T dot, T scale, T softcap, T slope, int p, int j) {
  return softcap_logit(dot * scale, softcap) + alibi_bias(slope, p, j);
}

// The kernel's split of the same path. It keeps a block's scores as S, in units of
// score_unit(scale, softcap), and folds the unit and log2(e) into the exp2 step, exp2(S x
// exp2_scale - m): without a cap S is q . k and the folded scale is scale x log2(e), as today;
// with a cap S = tanh(q . k x scale / softcap) (kernel_score) and the folded scale is softcap x
// log2(e), the softmax's own scale being 1. ALiBi adds alibi_bias / score_unit to S (FA2 divides
// the slope by the scale for the same reason); the mask then sets S to -inf. The running max m
// stays in the exp2 domain (log2 units of the logit), as finalize_row takes it.
template <typename T>
FJ_DEVICE T score_unit(T scale, T softcap) {
  return softcap > T(0) ? softcap : scale;
}
template <typename T>
FJ_DEVICE T exp2_scale(T scale, T softcap) {
  return score_unit(scale, softcap) * T(kFjLog2E);
}
template <typename T>
FJ_DEVICE T kernel_score(T dot, T scale, T softcap) {
  return softcap > T(0) ? fj_tanh(dot * (scale / softcap)) : dot;
}

// ---- the finalize step
// From a row's running state in the exp2 domain: m2, the max it subtracted (the running max of
// logit x log2(e), or a stale one below it: any value the sum is relative to; -inf while the row
// has seen no key), and l = sum_j exp2(logit_j x log2(e) - m2) over its visible keys (the
// kernel's O accumulator is the same sum of v_j), with the sink when has_sink: O = O_acc x
// o_scale and the row's LSE (natural log, the sink included as stated above).
template <typename T>
struct RowNormaliser {
  T o_scale;
  T lse;
};

template <typename T>
FJ_DEVICE RowNormaliser<T> finalize_row(T m2, T l, bool has_sink, T sink) {
  RowNormaliser<T> r;
  if (!(l > T(0))) {  // no visible key (0, and the NaN of an all -inf row, alike)
    r.o_scale = T(0);
    r.lse = has_sink ? sink : fj_minus_infinity<T>();
    return r;
  }
  if (!has_sink) {
    r.o_scale = T(1) / l;
    r.lse = (m2 + fj_log2(l)) * T(kFjLn2);
    return r;
  }
  const T sink2 = sink * T(kFjLog2E);
  const T top = m2 > sink2 ? m2 : sink2;
  const T keys = l * fj_exp2(m2 - top);
  const T total = keys + fj_exp2(sink2 - top);
  r.o_scale = fj_exp2(m2 - top) / total;
  r.lse = (top + fj_log2(total)) * T(kFjLn2);
  return r;
}

// The merge of a row's split partials (each normalised by its own sum, its LSE without the sink):
// top = max_s LSE_s, sum = sum_s exp(LSE_s - top). Split s weighs exp(LSE_s - top) x o_scale;
// the sink is counted here, once. No split with a key (top -inf, sum 0): O = 0, LSE -inf or s_h.
template <typename T>
FJ_DEVICE RowNormaliser<T> finalize_merge(T top, T sum, bool has_sink, T sink) {
  return finalize_row(top * T(kFjLog2E), sum, has_sink, sink);
}
