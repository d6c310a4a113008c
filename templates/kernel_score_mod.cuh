// kernel_score_mod.cuh: the attention kernel's score modifiers. The renderer names one of them
// `ScoreMod` (src/source/render.cpp), as it names the Mask: the kernel's ScoreRule applies it to a
// block's scores before the mask (FlashAttention-3's order: a masked key's -inf is set after the
// cap), on every softmax path, and holds no flag of its own for a cap. The rules are
// score_mod.cuh's; here is the kernel's split of them: scores in units of score_unit, the unit
// and log2(e) folded into the exp2 step by the host (Params.scale_log2). Rendered after
// attention_params.cuh and score_mod.cuh, before attention_fwd.cuh.
//
// Each type: make(params, batch, head, position) once a tile for this thread's two rows (their
// query heads and key positions p, visibility.cuh's bottom-right alignment), and apply(s, f, n)
// on block n's scores s in the accumulator layout (f: attention_fwd.cuh's Fragment). kScoreWork:
// it adds work to every score, whose registers the kernel's tightest variants do not have for the
// fast path against the running max and the shared last PV (attention_fwd.cuh leaves them out).

// No modifier: the scores as the GEMM left them, the scale folded into the exp2 step (the kernels
// from before issue 38).
struct NoScoreMod {
  static constexpr bool kScoreWork = false;
  FJ_DEVICE static NoScoreMod make(const Params&, int, const int (&)[2], const int (&)[2]) { return {}; }
  template <typename Frag>
  FJ_DEVICE void apply(float (&)[kBlockN / 2], const Frag&, int, const Params&) const {}
};

// softcap (spec key softcap): S = tanh(q . k x scale / softcap), one FMUL and one MUFU.TANH a
// score; the exp2 step's folded scale is softcap x log2(e) (score_mod.cuh: kernel_score).
// NOTES: the factor is read from the parameters (constant memory) at each use, not held in a
// register: the d64 three-warpgroup and the d128 window engine kernels spilled 16-68 bytes with it.
struct Softcap {
  static constexpr bool kScoreWork = true;
  FJ_DEVICE static Softcap make(const Params&, int, const int (&)[2], const int (&)[2]) { return {}; }
  template <typename Frag>
  FJ_DEVICE void apply(float (&s)[kBlockN / 2], const Frag&, int, const Params& p) const {
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) s[i] = fast_tanh(s[i] * p.softcap_prescale);
  }
};
