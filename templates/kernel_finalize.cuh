// kernel_finalize.cuh: the attention kernel's finalize step (normalisation, sink, LSE). The
// renderer names one of them `Finalize` (src/source/render.cpp), as it names the Mask and the
// ScoreMod: the epilogue (attention_fwd.cuh: write_output) and the split merge (split_merge.cuh:
// merge_split_row, called by the combine kernel and the inline merge) ask it for a row's O scale
// and LSE, and hold no flag of their own for a sink. The rules are score_mod.cuh's finalize_row
// and finalize_merge (the sink counted once, in the LSE). Rendered after attention_params.cuh and
// score_mod.cuh, before split_merge.cuh.
//
// Each type, for the epilogue: o_scale(p, head, m2, sum, with_sink) and lse(p, head, m2, sum,
// o_scale, with_sink) from a row's running state (m2 the exp2-domain max it subtracted, sum its
// quad-reduced sum; with_sink false for a split's partial, which leaves the sink to the merge);
// for the split merge: merge_o_scale and merge_lse(p, head, top, sum) from a row's splits (top
// the max of their LSEs, sum the sum of exp(LSE_s - top)). A row that saw no key gets O = 0 and LSE = -inf, or the sink's logit with a
// sink. The LSE is asked for apart from O's factor, only by the threads that store it.

// No sink: the kernels from before issue 38 (the fast __logf; the same SASS as then).
struct PlainFinalize {
  FJ_DEVICE static float o_scale(const Params&, int, float, float sum, bool) {
    return (sum == 0.f || sum != sum) ? 0.f : 1.f / sum;  // fully masked row: sum 0
  }
  FJ_DEVICE static float lse(const Params&, int, float m2, float sum, float o_scale, bool) {
    return o_scale == 0.f ? FJ_NEG_INF : m2 * 0.69314718055994531f + __logf(sum);
  }
  FJ_DEVICE static float merge_o_scale(const Params&, int, float, float sum) { return sum > 0.f ? 1.f / sum : 0.f; }
  FJ_DEVICE static float merge_lse(const Params&, int, float top, float sum) { return sum > 0.f ? top + __logf(sum) : FJ_NEG_INF; }
};

// Learnable sinks (spec key sinks): one logit a query head, float32 or bf16 (Params.sinks_bf16),
// joining the row's denominator as a key with no value. Once a row, in the epilogue or the merge.
struct SinkFinalize {
  FJ_DEVICE static float sink(const Params& p, int head) {
    if (p.sinks_bf16) return __uint_as_float((uint32_t)__ldg(static_cast<const unsigned short*>(p.sinks) + head) << 16);
    return __ldg(static_cast<const float*>(p.sinks) + head);
  }
  FJ_DEVICE static float o_scale(const Params& p, int head, float m2, float sum, bool with_sink) {
    if (!with_sink) return PlainFinalize::o_scale(p, head, m2, sum, false);
    return finalize_row(m2, sum, true, sink(p, head)).o_scale;
  }
  FJ_DEVICE static float lse(const Params& p, int head, float m2, float sum, float o_scale, bool with_sink) {
    if (!with_sink) return PlainFinalize::lse(p, head, m2, sum, o_scale, false);
    return finalize_row(m2, sum, true, sink(p, head)).lse;
  }
  FJ_DEVICE static float merge_o_scale(const Params& p, int head, float top, float sum) {
    return finalize_merge(top, sum, true, sink(p, head)).o_scale;
  }
  FJ_DEVICE static float merge_lse(const Params& p, int head, float top, float sum) {
    return finalize_merge(top, sum, true, sink(p, head)).lse;
  }
};
