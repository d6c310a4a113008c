// AttentionSpec: the problem descriptor, the first stage of the pipeline.
// One canonical text form: key=value pairs joined by commas, in the fixed key order below; fields
// left at "auto" (0) are omitted and later filled from the per-head-dim table (config stage).
//   dtype=bf16,head_dim=128,causal=1,stages=2
#pragma once
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace flashjit {

// kE4m3 (dtype=e4m3, issue 39): Q, K and V in FP8 e4m3fn with descales, O in out_dtype (16 bits).
enum class DType { kFp16, kBf16, kE4m3 };
const char* dtype_name(DType dtype);

// The K/V cache's element type: the queries' (dtype), or e4m3 (FP8, with scales) widened to the
// queries' 16 bits in shared memory (templates/attention_fwd.cuh: the FP8 cache's producer).
enum class KvDType { kSame, kE4m3 };

struct AttentionSpec {
  DType dtype = DType::kBf16;
  int head_dim = 128;        // QK head dim: multiple of 8 in 8..320 (above 256 with head_dim_v <= 256)
  int head_dim_v = 0;        // V/O head dim, a multiple of 8 up to head_dim (and 256); 0 = head_dim
  // qv=1 (FlashAttention-3's split MLA form): Q and K come in two tensors each, qv and V holding
  // their first head_dim_v columns (V's own), q and k the other head_dim - head_dim_v (rotary);
  // scores q.k + qv.v, O = P V. Needs head_dim_v and head_dim - head_dim_v multiples of 64.
  bool qv = false;
  // v_in_k=1 (an MLA latent cache): V is K's first head_dim_v columns, the same memory (args.v is
  // args.k, with k's strides). Each K/V block is loaded once and read as both; with head_dim_v above
  // 256 a tile's two consumer warpgroups share its 64 rows, the first computing the scores and each
  // one half of O (P through shared memory): no score is computed twice. Needs head_dim_v 384 or 512.
  bool v_in_k = false;
  // paired=1: V and O wider than 256 (384 or 512) computed as with v_in_k=1, by a tile's two consumer
  // warpgroups on the same 64 rows, each one half of O, P handed from the first to the second
  // (V from its own ring). Off: O in two parts, each its own tile computing the scores again.
  bool paired = false;
  // seesaw=1 (with v_in_k=1 at head_dim_v 512): the two warpgroups take a tile's blocks in turns
  // (FlashMLA's seesaw): each computes the scores of every other block and both halves of O see
  // every block, P crossing in both directions; the ring is two slots, each loaded in two halves
  // with barriers of their own so that a half reloads as soon as its last reader is done. Off: the
  // first warpgroup computes every block's scores and hands P to the second.
  bool seesaw = false;
  // chunk_waits=1 (with v_in_k=1): a K block's scores start on its first 64-column chunk, each
  // chunk's products issued as soon as that chunk has landed (a barrier a chunk), so that the
  // scores run beside the loads of the block's later chunks. Off: they wait for the whole slot (the
  // seesaw: for each half of it).
  bool chunk_waits = false;
  // early_release=1 (with chunk_waits=1, the hand-over schedule): the two warpgroups give a latent
  // slot back as soon as their P V's on it are done (the first after the next block's first chunk of
  // scores, the second without waiting for the next block's scores), so that the slot's next load
  // runs beside the next block's later chunks. Off: after the next block's scores.
  bool early_release = false;
  // half_release=1 (with early_release=1): each warpgroup gives back its own part of a latent slot,
  // the first V's left columns and the rest of K's, the second V's right columns, the second's P V
  // issued once the first's is done; the producer reloads each part as soon as it is free, so the
  // next block's first chunks load while the second P V still runs. Off: one release of the whole
  // slot, once both P V's are done.
  bool half_release = false;
  // dim_split=1 (head_dim = head_dim_v = 384 or 512, Gemma 4's global layers): the head dims shared
  // out over the two CTAs of a cluster on the same query tile, each holding half of Q's, K's and V's
  // columns and computing half of O; the two halves of each block's scores are added through
  // distributed shared memory, so each CTA's tiles and GEMMs are those of head dim 192 or 256 and no
  // score is computed twice. Off: O in two parts, each its own tile computing the scores again.
  bool dim_split = false;
  // q_reg_dims=N (with paired=1 or v_in_k=1, not seesaw=1): the warpgroup that computes the scores
  // holds Q's first N head dims (a multiple of 16, up to max_q_reg_dims) in registers for the whole
  // tile, so those k16 steps of Q K^T read only K from shared memory; that warpgroup then takes 256
  // registers and the other what is left. 0: Q read from shared memory at every step.
  int q_reg_dims = 0;
  // Whether a tile's two consumer warpgroups share its rows and split O's columns (paired=1, or
  // v_in_k=1, which implies it).
  bool pairs_o() const { return paired || v_in_k; }
  // Whether the caller's v is k's own memory (v_in_k=1 in the absorbed form: args.v = args.k, k's
  // strides). With qv=1 the K tile's first head_dim_v columns are loaded from v, so v is its own tensor.
  bool v_is_k_rows() const { return v_in_k && !qv; }
  bool causal = false;       // bottom-right aligned when seqlen_q != seqlen_k
  int stages = 0;            // K/V ring depth 1..4; 0 = from the table
  int consumer_wgs = 0;      // consumer warpgroups (64 query rows each) 1..2; 0 = from the table
  int block_m = 0;           // query rows per CTA = 64 * consumer_wgs; 0 = derived
  int block_n = 0;           // keys per K/V block: multiple of 16 in 16..256; 0 = from the table
  int overlap = -1;          // softmax(j) overlapped with P(j-1) V(j-1) in a warpgroup: 0/1; -1 = table
  int cluster = 0;           // CTAs sharing K/V loads by TMA multicast: 1 or 2; 0 = table
  int pingpong = -1;         // two consumer warpgroups take turns issuing GEMMs: 0/1; -1 = table
  int ctas_per_sm = 0;       // CTAs resident on an SM: 1, or 2 (one consumer warpgroup, half the shared
                             // memory and 128 registers a thread at entry each); 0 = table
  bool hang_trap = false;    // debug build: an mbarrier wait that spins past a limit traps
  bool varlen = false;       // packed variable-length queries (cu_seqlens_q); K/V packed too or paged
  bool paged = false;        // K/V through a block table of pages (with seqused_k)
  bool pack_gqa = false;     // decode: the query heads of a K/V head share a tile's rows (varlen=1)
  bool split_kv = false;     // decode: keys cut into splits, partials merged by a second kernel (varlen=1)
  bool dynamic_schedule = false;  // scheduler=dynamic: tiles taken from a counter in the caller's workspace,
                                  // heaviest first, instead of the static deal (scheduler=static)
  bool inline_combine = false;    // combine=inline (split_kv): the last split of each tile merges the partials in the
                                  // attention kernel (counters in the caller's workspace), no second kernel
  // Masks and score modifiers compiled in (templates/visibility.cuh, score_mod.cuh); their values
  // come at run time (AttentionArgs.features). Off: today's kernels, text and cache key unchanged.
  bool window = false;   // sliding window: window_left / window_right keys around a row's position
  bool chunk = false;    // attention chunks (Llama 4): a row sees only its own chunk's keys
  bool softcap = false;  // softcap * tanh(score * scale / softcap) before the mask
  bool sinks = false;    // learnable sinks: one logit per query head in every row's denominator
  bool alibi = false;    // ALiBi: -slope * |position - key| added to the scaled score
  // kv_dtype=e4m3 (issue 39): K and V in FP8 (e4m3fn) with scales per tensor or per K/V head
  // (AttentionArgs.fp8), Q and O 16-bit. Off: K/V in dtype, today's kernels.
  KvDType kv_dtype = KvDType::kSame;
  // dtype=e4m3: O's element type, fp16 or bf16 (printed with dtype=e4m3 only).
  DType out_dtype = DType::kBf16;

  int effective_head_dim_v() const { return head_dim_v ? head_dim_v : head_dim; }
  bool masks_window_or_chunk() const { return window || chunk; }
  bool kv_fp8() const { return kv_dtype == KvDType::kE4m3; }
  bool fp8_operands() const { return dtype == DType::kE4m3; }
  // The 16-bit type of O (and of Q with an FP8 cache): dtype, or out_dtype with FP8 operands.
  DType output_dtype() const { return fp8_operands() ? out_dtype : dtype; }
  bool operator==(const AttentionSpec&) const = default;
};

// Parses the text form. Unknown keys, duplicates, malformed values and out-of-range values are
// errors that name the field, the value and what is allowed. Validates the field ranges.
Result<AttentionSpec> parse_spec(std::string_view text);

// The canonical text form (fields at auto omitted). parse_spec(to_string(s)) == s.
std::string to_string(const AttentionSpec& spec);

// Field-range checks (not the resource checks, which need the resolved tiles: see config/).
Status validate_spec(const AttentionSpec& spec);

// The most head dims of Q that q_reg_dims may put in the scores warpgroup's registers, a multiple
// of 16 (0 where block_n is not yet resolved: the check waits for the resolved tile).
int max_q_reg_dims(const AttentionSpec& spec);

}  // namespace flashjit
