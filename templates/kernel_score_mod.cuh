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
// fast path against the running max (three consumer warpgroups) and the shared last PV
// (attention_fwd.cuh leaves them out there). row_registers(): it holds registers for a tile's rows
// through the main loop (the fast path and, at d256, the shared last PV are left out for it).

// No modifier: the scores as the GEMM left them, the scale folded into the exp2 step (the kernels
// from before issue 38).
struct NoScoreMod {
  static constexpr bool kScoreWork = false;
  __device__ static constexpr bool row_registers() { return false; }
  FJ_DEVICE static NoScoreMod make(const Params&, int, const int (&)[2], const int (&)[2]) { return {}; }
  template <typename Frag>
  FJ_DEVICE void apply(float (&)[kBlockN / 2], const Frag&, int, const Params&) const {}
};

// softcap (spec key softcap): S = tanh(q . k x scale / softcap), one FMUL and one MUFU.TANH a
// score; the exp2 step's folded scale is softcap x log2(e) (score_mod.cuh: kernel_score).
// NOTES: the factor is read from the parameters (constant memory) at each use, not held in a
// register: the d64 three-warpgroup and the d128 window engine kernels spilled 16-68 bytes with it.
// The score modifiers with work on every score share one kScoreWork.
// NOTES: every static constexpr member is a global of the module (cuobjdump -res-usage: GLOBAL),
// so the traits added since are functions or shared: one more member changed the resource usage
// of the kernels that use none of them.
struct PerScoreWork {
  static constexpr bool kScoreWork = true;
};

struct Softcap : PerScoreWork {
  __device__ static constexpr bool row_registers() { return false; }
  FJ_DEVICE static Softcap make(const Params&, int, const int (&)[2], const int (&)[2]) { return {}; }
  template <typename Frag>
  FJ_DEVICE void apply(float (&s)[kBlockN / 2], const Frag&, int, const Params& p) const {
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) s[i] = fast_tanh(s[i] * p.softcap_prescale);
  }
};

// ALiBi (spec key alibi): S += -slope / score_unit x |p - j| (score_mod.cuh: alibi_bias in the
// kernel's units), per score one FADD (the distance from a per-row, per-block float) and one FFMA
// (its absolute value is the FFMA's operand modifier). Slopes [heads_q], or [batch][stride].
// NOTES: distances in float are exact below 2^24 keys.
struct Alibi : PerScoreWork {
  __device__ static constexpr bool row_registers() { return true; }
  float neg_slope[2];  // the row's -slope in the units of the kernel's scores
  int position[2];     // the row's key position p
  FJ_DEVICE static Alibi make(const Params& p, int batch, const int (&head)[2], const int (&position)[2]) {
    Alibi a;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      a.neg_slope[r] = -__ldg(p.alibi_slopes + alibi_slope_index(batch, head[r], p.alibi_batch_stride)) * p.inv_score_unit;
      a.position[r] = position[r];
    }
    return a;
  }
  template <typename Frag>
  FJ_DEVICE void apply(float (&s)[kBlockN / 2], const Frag& f, int n, const Params&) const {
    // Without packed heads the two rows share the head, and the second sits 8 positions on: only
    // the first row's slope and position stay live (d256 spilled 164 bytes holding all four).
    float distance0[2], slope[2];  // p less this thread's first key in block n
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row_position = kPackGQA ? position[r] : position[0] + 8 * r;
      distance0[r] = float(row_position - (n * kBlockN + f.col(0)));
      slope[r] = kPackGQA ? neg_slope[r] : neg_slope[0];
    }
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) {
      const float distance = distance0[Frag::row_half(i)] - float(f.col(i) - f.col(0));
      s[i] = fmaf(slope[Frag::row_half(i)], fabsf(distance), s[i]);
    }
  }
};

// Softcap, then ALiBi (FlashAttention-2's order: the bias on the capped score).
struct SoftcapAlibi : Alibi {
  FJ_DEVICE static SoftcapAlibi make(const Params& p, int batch, const int (&head)[2], const int (&position)[2]) {
    SoftcapAlibi a;
    static_cast<Alibi&>(a) = Alibi::make(p, batch, head, position);
    return a;
  }
  template <typename Frag>
  FJ_DEVICE void apply(float (&s)[kBlockN / 2], const Frag& f, int n, const Params& p) const {
    Softcap{}.apply(s, f, n, p);
    Alibi::apply(s, f, n, p);
  }
};
