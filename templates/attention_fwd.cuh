// attention_fwd.cuh: warp-specialised attention forward (FlashAttention-3 design). Tiles are
// (query block, head, batch); a persistent grid of kCtasPerSm CTAs per SM walks them (the host launches
// one CTA per tile with clusters, or when the tiles are fewer than the SMs). Rendered after the
// generated constants (kBlockM, kBlockN, kStages, kQBuffers, kStageOInKV, kPingpong,
// kVarlen, kPaged, ...), ptx.cuh, attention_params.cuh (Params), visibility.cuh (the mask rule and
// block ranges), tile_schedule.cuh, tile_layout.cuh (the element-type seam and the swizzle) and the
// wgmma shapes (wgmma_qk, wgmma_pv, pack2).
//
// Seams, each the one place a feature enters: SeqlenInfo (a tile's sequence: offsets and lengths,
// from the parameters or the engine's device metadata), tile_block_range (the K/V blocks a tile
// visits, both bounds), load_tile (where a K/V block is: dense, packed or paged), ScoreRule (what
// scores go through before the softmax, on every softmax path: the rendered ScoreMod, then the
// Mask), write_output (the rendered Finalize: normalisation, sink, LSE; then TMA store, or row
// stores up to a packed sequence's end). FP8 (issue 39) enters at the element type (tile_layout.cuh:
// kChunkColumns, the GEMMs' k32 in the rendered wgmma shapes), the producer's K/V seam (load_k and
// load_v hand an FP8 cache's blocks to fp8_block: cp.async, then widened; FP8 operands' K straight
// in, V transposed), pack_probs and issue_pv (P in e4m3, V K-major) and the descales (ScoreRule's
// scale_log2, write_output's factor). head_dim_v (issue 40) is kHeadDimV / kVCols wherever V and O are.
// v_in_k=1 (kVInK, MLA's latent cache) enters at the producer (no V loads: V is K's slot) and at
// pv_slot; the pairing it implies (kPairedO, also spec key paired=1: V in its own ring) at the
// consumers' roles (consume_paired_first / _second: warpgroup 0 computes the scores and hands P to
// warpgroup 1 through shared memory, each computes half of O).
//
// Schedule: tile_schedule.cuh (rendered before this file): tiles in grid order (one head after
//           another, so the CTAs in flight share few heads' K/V in L2), dealt to the CTAs in a
//           snake; causal tiles in pairs of equal cost (lengths on the device too), with a few
//           light query blocks per head held back for the CTAs idle in the pairs' last round
//           where the host knows the lengths.
// Roles:    warpgroup 0 = producer (one thread issues every TMA load; with a paged cache up to four
//           warps share a block's page loads; with FP8 warp 0 loads K/V by cp.async and warps 1-3
//           widen or transpose them);
//           warpgroups 1..kConsumerWGs (1-3) = consumers, 64 query rows each.
// Pipeline: per tile, Q into one of kQBuffers buffers, then K and V blocks, right to left, into
//           kStages-deep rings with separate barriers (full: TMA transaction barriers; empty: one
//           arrival per consumer warpgroup), V one block behind K, the order in which the consumers
//           need them. Ring positions run on across a CTA's tiles, so the producer loads the next
//           tile while the consumers finish this one.
// Math:     S = Q K^T (wgmma; K from shared memory, Q from registers up to head dim 128 with two
//           warpgroups, else from shared memory); mask; online softmax in the exp2 domain;
//           O += P V (wgmma, P from registers, V MN-major). The softmax of block j runs while
//           the tensor cores do P(j-1) V(j-1); with kPingpong the consumer warpgroups
//           take turns issuing their GEMMs (named barriers, a ring), so one's softmax hides
//           behind the others' GEMMs.
// Epilogue: O / rowsum -> shared memory (this warpgroup's slice of the tile's Q buffer; with
//           kStageOInKV a slot of the tile's last K/V block, so Q could go early) -> TMA store,
//           then that memory is released for a later load; LSE from registers.
// Cluster:  with kCluster = 2, two CTAs on neighbouring query blocks share every K/V block: each
//           loads half of it and multicasts to both, halving the L2 -> shared memory traffic. A
//           slot is free once the consumers of both CTAs released it (empty barriers count both).
//           With kDimSplit = 2 (dim_split=1, head dims 384 and 512) the two CTAs of a cluster take
//           the same tile, each half of Q's, K's, V's and O's columns (Tile::part, its rank): each
//           computes its half of every block's scores and adds the peer's (add_peer_scores),
//           then both run the same mask and softmax, and each its half of O, as at head dim 192 or 256.
//
// Shared memory (1024-B aligned): Q [kQBuffers][kQKChunks][kBlockM][128 B]
//                                 | K ring [kStages][kQKChunks][kBlockN][128 B]
//                                 | V ring [kStages][kVChunks][kBlockN][128 B] (FP8 operands: V
//                                   transposed, [kVCols][kBlockN] in 128-key chunks)
//                                 | FP8 staging slots (K's with an FP8 cache, V's) | mbarriers.

// Params: attention_params.cuh (one definition for the host and the kernel).
// NOTES: NVRTC has no offsetof; the size check catches a host compiled against another layout.
static_assert(sizeof(Params) == kParamsBytes, "kernel Params differ from the host's KernelParams");

// Named barriers (id 0 is __syncthreads): 1..3 epilogue of consumer warpgroup 0..2, 4..6 the
// pingpong turn of consumer warpgroup 0..2, 11..13 the per-block vote of consumer warpgroup 0..2
// (probs_against_running_max), 7..10 (kStageOInKV) the last K and V slots handed to
// the warpgroup that stages O in them once the other one has finished reading them: 7 and 8 in
// even tiles, 9 and 10 in odd ones (without pingpong one warpgroup can run a tile ahead: it
// arrives for the next tile before the other has waited for this one; never two, since the next
// tile's Q needs both warpgroups).
constexpr uint32_t kEpilogueBarrier = 1;
constexpr uint32_t kTurnBarrier = 4;
constexpr uint32_t kVoteBarrier = 11;
// kPairedO: P (and its row factors) in the hand-over area (14: warpgroup 0 arrives once written,
// warpgroup 1 waits), and the area free again (15: warpgroup 1 arrives once its P V has read it).
constexpr uint32_t kPFullBarrier = 14;
constexpr uint32_t kPEmptyBarrier = 15;
// Seesaw (no pingpong, no vote, so their ids are free): warpgroup 0's block factor and the new
// running max written (4), warpgroup 1's (5), P(A) in its slot (14), P(B) in its slot (15), the
// tile's row sums exchanged (6). Each is arrived at by one warpgroup and waited for by the other
// (the sums' by both), once per pair: see consume_seesaw_a on why neither can run a use ahead.
constexpr uint32_t kSeesawMaxABarrier = 4;
constexpr uint32_t kSeesawMaxBBarrier = 5;
constexpr uint32_t kSeesawPABarrier = 14;
constexpr uint32_t kSeesawPBBarrier = 15;
constexpr uint32_t kSeesawSumsBarrier = 6;
// kPairedO with combine=inline: both warpgroups' partials of the tile stored (7: kStageOInKV's, never
// paired), then the merge's go-ahead.
constexpr uint32_t kPairedMergeBarrier = 7;
static_assert(!kPairedO || (kConsumerWGs == 2 && kBlockM == 64 && (kBlockN == 64 || kBlockN == 32) && !kPingpong && !kStageOInKV && kCluster == 1 &&
                         !kKvFp8 && !kFp8Operands),
              "v_in_k, paired: two consumer warpgroups on one 64-row tile, 32- or 64-key blocks (spec/ and config/ keep to these)");
static_assert(!kVInK || kPairedO, "v_in_k pairs the consumer warpgroups");
// The paired consumers' schedule, rendered as PairedConsumers (declared ahead of this file):
// HandOverPairs, warpgroup 0 computes every block's scores and hands P to warpgroup 1
// (consume_paired_first / _second); SeesawPairs (seesaw=1, v_in_k=1), the two take a tile's blocks
// in pairs, each the scores of one, and hand P both ways (consume_seesaw_a / _b).
struct HandOverPairs {
  static constexpr bool kAlternateBlocks = false;
};
struct SeesawPairs {
  static constexpr bool kAlternateBlocks = true;
};
constexpr bool kSeesaw = PairedConsumers::kAlternateBlocks;
// When v_in_k=1's scores may start on a K block (rendered as KWaits): SlotWaits, once the slot (or
// the seesaw's half slot) has landed, one barrier for all its chunks; ChunkWaits (chunk_waits=1),
// each 64-column chunk's products as soon as that chunk has landed, a barrier a chunk
// (SmemLayout::chunk_full), so that the scores run beside the loads of the block's later chunks.
struct SlotWaits {
  static constexpr bool kPerChunk = false;
};
struct ChunkWaits {
  static constexpr bool kPerChunk = true;
};
constexpr bool kChunkWaits = KWaits::kPerChunk;
static_assert(!kChunkWaits || kVInK, "chunk_waits: v_in_k=1's K ring (spec/ keeps to this)");
// When the hand-over's warpgroups give a latent slot back (rendered as SlotRelease): ReleaseAfterScores,
// warpgroup 0 once the whole of the next block's S has been issued (so after its last chunk has
// landed) and warpgroup 1 after the next block's S has completed where that block has landed;
// ReleaseEarly (early_release=1, with chunk_waits=1), warpgroup 0 after the next block's first
// chunk (its P V is done by then) and warpgroup 1 as soon as its P V is, so that the slot's next
// load runs beside the next block's later chunks rather than after them (paired_first_step);
// ReleaseHalves (half_release=1), as early, but each warpgroup gives back its own part of the slot
// (warpgroup 0 on empty_k: V's left columns and K's rest, seesaw half kHalfLateB; warpgroup 1 on
// empty_v: V's right columns, kHalfEarlyB) and warpgroup 1's P V waits for warpgroup 0's, so that
// the next block's first chunks load while the second P V still runs (load_k).
struct ReleaseAfterScores {
  static constexpr bool kEarly = false, kHalves = false;
};
struct ReleaseEarly {
  static constexpr bool kEarly = true, kHalves = false;
};
struct ReleaseHalves {
  static constexpr bool kEarly = true, kHalves = true;
};
constexpr bool kEarlyRelease = SlotRelease::kEarly;
constexpr bool kHalfRelease = SlotRelease::kHalves;
static_assert(!kEarlyRelease || (kChunkWaits && !kSeesaw), "early_release: chunk_waits=1's hand-over (spec/ keeps to this)");
static_assert(!kSeesaw || (kVInK && kBlockN == 64 && kStages == 2 && 2 * kVChunks < kQKChunks && kBlockM == kBlockN),
              "seesaw: v_in_k=1, two 64-key slots, a K chunk past V's columns for P (spec/ keeps to these)");
// Seesaw ring: one position per pair of blocks; the pair's first block (warpgroup 0's, "A") in
// slot 0, its second (warpgroup 1's, "B") in slot 1. Each slot loads in two halves with barriers
// of their own (K's and V's barriers of the slot, unused otherwise with v_in_k=1; with chunk_waits=1
// a half's chunks land on their own barriers, its release stays the half's): the early half,
// which its last reader is done with first, and the late half. A's early half is V's left columns
// (chunks [0, kVChunks): warpgroup 0's half of O), released by warpgroup 0 after its P V; its late
// half V's right columns and the rest, released by warpgroup 1 after P(A) V. B's mirror that:
// early the right columns (warpgroup 1's P V), late the left columns and the rest (warpgroup 0's
// P(B) V). A block's P crosses to the other warpgroup in its slot's first chunk past V (K's rotary
// columns, read only by that block's scores, in the late half, which the crossing's reader releases).
// (tile_layout.cuh: seesaw_chunk_in_half, the rule the CPU tests check)
constexpr int kWholeTile = -1;
constexpr int kHalfEarlyA = 0, kHalfLateA = 1, kHalfEarlyB = 2, kHalfLateB = 3;
FJ_DEVICE constexpr bool chunk_in_half(int half, int c) { return seesaw_chunk_in_half(half, c, kVChunks); }
FJ_DEVICE constexpr int chunks_in_half(int half, int chunks) {
  int n = 0;
  for (int c = 0; c < chunks; ++c) n += chunk_in_half(half, c) ? 1 : 0;
  return n;
}
constexpr int kSeesawPChunk = 2 * kVChunks;  // the slot's chunk that carries its block's P across
static_assert(kDimSplit == 1 || (kDimSplit == 2 && kConsumerWGs == 2 && kBlockM == 128 && kCluster == 1 && !kPairedO && !kSplitKV &&
                                 !kDynamicSchedule && !kKvFp8 && !kFp8Operands && kQvChunks == 0),
              "dim_split: a cluster of two CTAs on one tile, two consumer warpgroups, 16-bit (spec/ keeps to these)");
// The first of a consumer warpgroup's rows in its tile: its own 64, or with kPairedO the tile's
// (both warpgroups hold the same rows, each half of O's columns).
FJ_DEVICE int wg_first_row(int wg) { return kPairedO ? 0 : wg * 64; }
constexpr bool kSlotHandOff = kStageOInKV && kConsumerWGs == 2;
// The element seam: a tile row is 128-byte swizzled chunks of kChunkColumns elements (64 16-bit, or
// 128 e4m3 with FP8 operands); Q's load fills kQLoadBytes of its buffer (with FP8 operands the buffer
// is larger: it also stages the tile's 16-bit O).
constexpr int kChunkColumns = element_type(kFp8Operands).chunk_columns;
constexpr int kQLoadBytes = kBlockM * 128 * kQKChunks;
FJ_DEVICE uint32_t last_k_read_barrier(int local) { return 7 + 2 * (local & 1); }
FJ_DEVICE uint32_t last_v_read_barrier(int local) { return 8 + 2 * (local & 1); }
static_assert(kConsumerWGs <= 3, "named barrier ids are laid out for at most three consumer warpgroups");

struct SmemLayout {
  uint32_t q, k, v, staging, handover, bars;
  FJ_DEVICE uint32_t q_buffer(int b) const { return q + b * kQTileBytes; }
  FJ_DEVICE uint32_t k_stage(int s) const { return k + s * kKTileBytes; }
  FJ_DEVICE uint32_t v_stage(int s) const { return v + s * kVTileBytes; }
  // kPairedO: P [64 rows][kBlockN keys] (one 128-byte swizzled chunk, 1024-aligned: after whole tiles), then
  // per row the factor O owes before this P V, and the row's final max and sum (tile_layout.cuh:
  // paired_handover_bytes).
  FJ_DEVICE uint32_t p_tile() const { return handover; }
  FJ_DEVICE uint32_t row_factor(int row) const { return handover + paired_p_tile_bytes(kBlockM) + 4u * row; }
  FJ_DEVICE uint32_t row_final_max(int row) const { return row_factor(row) + 4u * kBlockM; }
  FJ_DEVICE uint32_t row_final_sum(int row) const { return row_factor(row) + 8u * kBlockM; }
  // One arrival per block when the first warpgroup's S(it) has completed (scores_done_phase).
  FJ_DEVICE uint32_t scores_done() const { return row_factor(0) + 12u * kBlockM; }
  // Seesaw (P crosses in the K slots, so the P tile's bytes are free): per row the running max
  // after the latest block (0), warpgroup 0's block factor (1), warpgroup 1's (2), and the tile's
  // row sums of warpgroup 0 and 1 (3, 4).
  FJ_DEVICE uint32_t seesaw_row_word(int array, int row) const { return handover + 4u * (kBlockM * array + row); }
  // Seesaw: the barriers of a slot half (kHalfEarlyA .. kHalfLateB): an early half has its slot's K
  // barriers, a late half its V barriers (see kSeesaw).
  FJ_DEVICE uint32_t half_full(int half) const { return (half & 1) ? full_v(half >= kHalfEarlyB) : full_k(half >= kHalfEarlyB); }
  // chunk_waits=1: K slot s's chunk c has landed (see KWaits), after the hand-over words.
  FJ_DEVICE uint32_t chunk_full(int s, int c) const { return handover + paired_chunk_bars_offset(kBlockM) + 8u * (s * kQKChunks + c); }
  FJ_DEVICE uint32_t half_empty(int half) const { return (half & 1) ? empty_v(half >= kHalfEarlyB) : empty_k(half >= kHalfEarlyB); }
  // kDimSplit: consumer warpgroup wg's inbox for the peer CTA's partial scores ([4 warps][kBlockN /
  // 8][32 lanes][16 B]: a warp's 16 rows together, its lanes' 16-byte units side by side, no bank
  // conflicts), a barrier per warp that says its rows are filled (the peer warp's bytes and our
  // warp's arrival), and one that says the peer has read what we put in its inbox (an arrival from
  // each of its four warps). `area`: the handover address (see ScoreExchange on why it is passed).
  FJ_DEVICE static uint32_t score_inbox(uint32_t area, int wg) { return area + wg * score_inbox_bytes(kBlockN); }
  FJ_DEVICE static uint32_t score_filled(uint32_t area, int wg, uint32_t warp) { return area + 2 * score_inbox_bytes(kBlockN) + 8u * (4u * wg + warp); }
  FJ_DEVICE static uint32_t score_taken(uint32_t area, int wg) { return area + 2 * score_inbox_bytes(kBlockN) + 64u + 8u * wg; }
  // Thread t's (of its warpgroup) first 16 bytes in an inbox; its next are 512 bytes apart.
  FJ_DEVICE static uint32_t score_unit(uint32_t t) { return (t / 32u) * (score_inbox_bytes(kBlockN) / 4) + (t % 32u) * 16u; }
  // Q buffer b: loaded (TMA transaction barrier); free again (one arrival per consumer warpgroup,
  // once the TMA store of its O slice has read the buffer).
  FJ_DEVICE uint32_t full_q(int b) const { return bars + 8u * b; }
  FJ_DEVICE uint32_t empty_q(int b) const { return bars + 8u * (kQBuffers + b); }
  FJ_DEVICE uint32_t full_k(int s) const { return bars + 8u * (2 * kQBuffers + s); }
  FJ_DEVICE uint32_t full_v(int s) const { return bars + 8u * (2 * kQBuffers + kStages + s); }
  FJ_DEVICE uint32_t empty_k(int s) const { return bars + 8u * (2 * kQBuffers + 2 * kStages + s); }
  FJ_DEVICE uint32_t empty_v(int s) const { return bars + 8u * (2 * kQBuffers + 3 * kStages + s); }
  // kv_dtype=e4m3: staging slot j of K and of V (FP8 blocks, [kBlockN][head dim] bytes), full (every
  // load of the issuing warp landed: cp_async_arrive) and empty (the widening warps are done).
  FJ_DEVICE uint32_t staging_k(int j) const { return staging + j * kKvStagingBytes; }
  FJ_DEVICE uint32_t staging_v(int j) const { return staging + ((kKvFp8 ? kKvStagingSlots : 0) + j) * kKvStagingBytes; }
  FJ_DEVICE uint32_t staging_full_k(int j) const { return bars + 8u * (2 * kQBuffers + 4 * kStages + j); }
  FJ_DEVICE uint32_t staging_full_v(int j) const { return bars + 8u * (2 * kQBuffers + 4 * kStages + kKvStagingSlots + j); }
  FJ_DEVICE uint32_t staging_empty_k(int j) const { return bars + 8u * (2 * kQBuffers + 4 * kStages + 2 * kKvStagingSlots + j); }
  FJ_DEVICE uint32_t staging_empty_v(int j) const { return bars + 8u * (2 * kQBuffers + 4 * kStages + 3 * kKvStagingSlots + j); }
  // One word per consumer warpgroup, written and never read (see Consumer::pin_wait_below).
  FJ_DEVICE uint32_t order_word(int wg) const { return bars + 8u * (2 * kQBuffers + 4 * kStages + 4 * kKvStagingSlots) + 4u * wg; }
  // The tile in Q buffer b: (query block, head + heads_q * batch), written by the producer before
  // the buffer's full barrier (load_q; publish_end after the last tile).
  // With lengths on the device also (seqlen_q, seqlen_k) and then the first query row (kTileWordBytes 32).
  FJ_DEVICE uint32_t tile_words(int b) const {
    constexpr uint32_t kAlign = kTileWordBytes == 8 ? 8u : 16u;
    return bars + ((8u * (2 * kQBuffers + 4 * kStages + 4 * kKvStagingSlots) + 4u * kConsumerWGs + kAlign - 1) & ~(kAlign - 1)) + kTileWordBytes * b;
  }
};

// ================================================================ sequences
// Where a tile's sequence sits and how long it is: the one source of lengths in the kernel, built
// per tile from the parameters (dense) or the device metadata (varlen: cu_seqlens_q; packed K/V:
// cu_seqlens_k; seqused_k; paged). Rows within the sequence are counted from 0 everywhere else.
struct SeqlenInfo {
  int seqlen_q, seqlen_k;
  int q_row0, q_batch;  // TMA coordinates of the sequence's first query row (packed: row offset, batch 0)
  int k_row0, k_batch;  // of its first key (paged: k_batch is the block table's row)
};

FJ_DEVICE SeqlenInfo seqlen_info(const Params& p, int batch) {
  SeqlenInfo s;
  s.seqlen_q = p.seqlen_q, s.q_row0 = 0, s.q_batch = batch;
  s.seqlen_k = p.seqlen_k, s.k_row0 = 0, s.k_batch = batch;
  if constexpr (kVarlen) {
    s.q_row0 = p.cu_seqlens_q[batch];
    s.seqlen_q = p.cu_seqlens_q[batch + 1] - s.q_row0;
    s.q_batch = 0;
    if (!kPaged && p.cu_seqlens_k != nullptr) {
      s.k_row0 = p.cu_seqlens_k[batch];
      s.seqlen_k = p.cu_seqlens_k[batch + 1] - s.k_row0;
      s.k_batch = 0;
    }
  }
  if constexpr (kVarlen || kPaged) {
    if (p.seqused_k != nullptr) s.seqlen_k = p.seqused_k[batch];
  }
  return s;
}

// The K/V blocks query block m_block visits (visibility.cuh), by the rendered Mask
// (kernel_mask.cuh): the one block range the producer and the consumers walk (walk_blocks), its
// masked blocks at the right end and, with a two-sided mask (window, chunk), at the left end too.
// The two CTAs of a cluster load the same blocks: both take the longer range; the extra blocks
// are fully masked for the shorter one (they sit at the right, among the masked iterations;
// clusters take the causal mask alone: spec/).
// With packed heads a query block is tokens_per_tile queries (visibility.cuh); with key splits
// the range is cut to the tile's split, and the splits cut only the sequence's visible blocks.
FJ_DEVICE int tokens_per_tile(const Params& p) { return kPackGQA ? kBlockM >> p.pack_shift : kBlockM; }
FJ_DEVICE VisibleKeySplit tile_key_split(const Params& p, const SeqlenInfo& s) {
  if constexpr (Mask::kTwoSided) return visible_key_split(Mask::rule(p), s.seqlen_q, s.seqlen_k, kBlockN, p.num_splits, p.split_blocks);
  const KeySplit ks = key_split(s.seqlen_k, kBlockN, p.num_splits, p.split_blocks);
  return {0, ks.blocks_per_split, ks.splits};
}
static_assert(!Mask::kTwoSided || kCluster == 1, "a cluster's shared walk takes the causal mask alone");

FJ_DEVICE MaskBlockRange tile_block_range(const Params& p, const SeqlenInfo& s, int m_block, int split) {
  if constexpr (Mask::kTwoSided) {
    MaskBlockRange r = mask_block_range(Mask::rule(p), m_block, tokens_per_tile(p), kBlockN, s.seqlen_q, s.seqlen_k);
    if constexpr (kSplitKV) r = split_block_range(r, tile_key_split(p, s), split);
    return r;
  }
  BlockRange r = kv_block_range(kCausal, m_block, tokens_per_tile(p), kBlockN, s.seqlen_q, s.seqlen_k);
  if (kCausal && kCluster == 2) {
    const int whole = r.count() - r.n_masked;
    r.n_max = max(r.n_max, kv_block_range(kCausal, m_block ^ 1, kBlockM, kBlockN, s.seqlen_q, s.seqlen_k).n_max);
    r.n_masked = r.count() - whole;
  }
  if constexpr (kSplitKV) {
    const VisibleKeySplit ks = tile_key_split(p, s);
    r = split_block_range(r, KeySplit{ks.blocks_per_split, ks.splits}, split);
  }
  return {r.n_min, r.n_max, r.n_masked, 0};
}

// Ring position of a K/V block (counted over all of this CTA's tiles): stage and the parity of
// its use of that stage. The same for the Q buffers, by the CTA's tile count.
FJ_DEVICE int stage_of(int pos) { return pos % kStages; }
FJ_DEVICE uint32_t phase_of(int pos) { return (pos / kStages) & 1; }
FJ_DEVICE int q_buffer_of(int local) { return local % kQBuffers; }
FJ_DEVICE uint32_t q_phase_of(int local) { return (local / kQBuffers) & 1; }

// ================================================================ tiles
struct Tile {
  int m_block, head, batch;
  int split;  // split_kv: which of the sequence's key splits (else 0)
  int part;   // kOParts > 1 (head_dim_v above 256): which of O's column parts; with kPairedO the consumer
              // warpgroup's half (set for the epilogue alone); else not set (kDimSplit: the CTA's rank
              // in its cluster is its part, read where a column is needed: see v_col0)
  // The part's first column of V and O: its V loads, O stores and partials start there.
  // NOTES: with one part nothing reads `part` (not even a 0 written to it): the engine kernels'
  // SASS moved with the store.
  // NOTES: with kDimSplit the rank is read from its special register at each use, not kept in the
  // tile: held through the walk, the producer spilled 56 bytes of its 24 registers (512/512 causal).
  FJ_DEVICE int v_col0() const {
    if constexpr (kDimSplit > 1) return (int)cluster_cta_rank() * kVCols;
    if constexpr (kOParts > 1 || kPairedO) return part * kVCols;
    return 0;
  }
  // kDimSplit: the CTA's first column of Q and K (its half of the head dim).
  FJ_DEVICE int qk_col0() const {
    if constexpr (kDimSplit > 1) return (int)cluster_cta_rank() * (kQKChunks * 64);
    return 0;
  }
};

// The heads tiles go over (packed: groups of pack_heads query heads) and the key splits.
FJ_DEVICE int tile_heads(const Params& p) { return kPackGQA ? p.tile_heads : p.heads_q; }
FJ_DEVICE int tile_splits(const Params& p) { return kSplitKV ? p.num_splits : 1; }

// Query blocks padded to whole clusters (a padding CTA loads its share and stores nothing). With
// varlen, seqlen_q is an upper bound: a sequence's tiles past its own query blocks are skipped
// (tile_has_rows).
// With O in column parts (kOParts) each query block is kOParts tiles, the part the fastest index
// (tile_at), so that the deal and the tile count see kOParts times the query blocks.
FJ_DEVICE int padded_m_blocks(const Params& p) {
  const int m = (p.seqlen_q + tokens_per_tile(p) - 1) / tokens_per_tile(p);
  return (m + kCluster - 1) / kCluster * kCluster * kOParts;
}
// NOTES: tile indices are 32-bit unsigned: the host keeps the count below 2^31 (a 1-D grid), so an
// index one round past it still fits, and 64-bit division would cost compile time for nothing.
FJ_DEVICE uint32_t tile_count(const Params& p) { return (uint32_t)padded_m_blocks(p) * tile_heads(p) * p.batch * tile_splits(p); }

// Lengths read on the device (varlen, seqused_k, paged): tile costs the host cannot know. The
// static deal then walks single tiles, each head's query blocks heaviest first, and skips the
// tiles past their sequence's queries.
constexpr bool kDeviceLengths = kVarlen || kPaged;

// Key splits past the sequence's own count are skipped too (the combine merges only its own).
FJ_DEVICE bool tile_has_rows(const Params& p, const SeqlenInfo& s, const Tile& tile) {
  if (kSplitKV && tile.split >= tile_key_split(p, s).splits) return false;
  return !kVarlen || query_block_has_rows(tile.m_block, tokens_per_tile(p), s.seqlen_q);
}

// The persistent grid's deal (tile_schedule.cuh) seen from this CTA. Causal tiles cost from one
// K/V block to all of them: with fewer CTAs than tiles they go out in pairs of equal total cost,
// the lightest p.fill_blocks query blocks of each head (or the last p.held_heads heads whole)
// held back for the CTAs the pairs leave idle at the end; with a CTA per tile (clusters too) the
// hardware balances them. The host fits the hold to the grid it launches (p.deal_*); on any other
// grid nothing is held back.
FJ_DEVICE FastDivisor divisor(uint32_t d, const uint32_t (&constants)[2]) { return {d, constants[0], constants[1]}; }
// n / d from the constants alone, where the kernel needs only the quotient.
FJ_DEVICE uint32_t fast_div(uint32_t n, const uint32_t (&constants)[2]) { return fast_div(n, divisor(0u, constants)); }

// With two Q buffers the producer decodes each tile and publishes it beside Q (see load_q); with
// one, Q is released before the epilogue (kStageOInKV), so the consumers decode the deal
// themselves, and nothing is held back (launch/tile_schedule.cpp): a held-back tile's Q would
// wait for the previous O store. NOTES: with kHoldBack false at compile time the consumers' decode
// is phase 1's alone; the deal's second phase cost 2-6 % in the decode (version 38).
constexpr bool kPublishTiles = kQBuffers == 2;
constexpr bool kHoldBack = kPublishTiles && !kDeviceLengths && !kDynamicSchedule;
static_assert(!kDynamicSchedule || (kPublishTiles && kCluster == 1), "the dynamic scheduler publishes its tiles (two Q buffers, no cluster)");

FJ_DEVICE TileDeal tile_deal(const Params& p) {
  TileDeal d;
  d.ctas = gridDim.x / kDimSplit;  // kDimSplit: the clusters (a cluster's CTAs take the same tiles)
  d.cta = blockIdx.x / kDimSplit;
  set_deal_shape(d, (uint32_t)padded_m_blocks(p), (uint32_t)tile_heads(p) * (uint32_t)p.batch * tile_splits(p));
  d.unit = deal_unit(kCausal, kCluster, d.ctas, tile_count(p));
  const bool fitted = kHoldBack && (uint32_t)p.deal_ctas == d.ctas && (uint32_t)p.fill_blocks <= d.m_blocks;
  d.fill = fitted ? (uint32_t)p.fill_blocks : 0u;
  d.held_heads = fitted ? (uint32_t)p.held_heads : 0u;
  d.full_rounds = (uint32_t)p.deal_full_rounds;
  d.last_units = (uint32_t)p.deal_last_units;
  d.odd_cta = (uint32_t)p.deal_odd_cta;
  d.by_paired = fitted ? divisor(phase1_blocks_per_head(d), p.div_paired) : divisor(d.m_blocks, p.div_m_blocks);
  d.by_held_heads = divisor(held_heads(d), p.div_held_heads);
  return d;
}

FJ_DEVICE bool has_tile(const Params& p, int slot) { return deal_slot(tile_deal(p), (uint32_t)slot).valid; }

// The tile in this CTA's slot-th place of the deal. The two CTAs of a cluster take neighbouring
// query blocks (m_block and m_block ^ 1): with clusters the grid has one CTA per tile, dealt
// heaviest first.
// NOTES: consumers decode their tile twice, before the main loop and again for the epilogue, with
// the tile number hidden from the compiler in between: otherwise it keeps the coordinates live
// through the loop, where the d128 variant has no registers to spare (it spilled).
// (query block, head + tile_heads * (batch + batch count * split)) -> the tile (div_heads_q
// divides by tile_heads).
FJ_DEVICE Tile tile_at(const Params& p, const DealtTile& dealt) {
  Tile tile;
  tile.m_block = (int)dealt.m_block;
  if constexpr (kOParts > 1) {
    tile.part = tile.m_block % kOParts;
    tile.m_block /= kOParts;
  }
  uint32_t head_index = dealt.head;
  tile.split = 0;
  if constexpr (kSplitKV) {
    tile.split = (int)fast_div(head_index, p.div_split_heads);
    head_index -= (uint32_t)tile.split * (uint32_t)tile_heads(p) * (uint32_t)p.batch;
  }
  const uint32_t batch = fast_div(head_index, p.div_heads_q);
  tile.head = (int)(head_index - batch * (uint32_t)tile_heads(p));
  tile.batch = (int)batch;
  return tile;
}

FJ_DEVICE uint32_t head_index_of(const Params& p, const Tile& tile) {
  return (uint32_t)(tile.head + tile_heads(p) * (tile.batch + (kSplitKV ? p.batch * tile.split : 0)));
}

FJ_DEVICE Tile tile_of(const Params& p, int slot) { return tile_at(p, deal_tile(tile_deal(p), (uint32_t)slot)); }

// ---------------------------------------------------------------- the dynamic scheduler
// scheduler=dynamic: the producer takes tiles one at a time from a counter in the caller's
// workspace, head-major and heaviest first (tile_schedule.cuh: dynamic_order_tile), so that a CTA
// takes its next tile when its last is almost done, whatever the tiles cost: list scheduling,
// longest first within a head; a head's empty tiles (lengths on the device) are skipped with one
// atomicMax (dynamic_skip_to).
// NOTES (correctness): the counter is zero at launch and put back to zero by the last CTA: each
// CTA counts itself done (the second word) after its last take; the one that makes the count the
// grid's knows that no take is left. A graph replays with it as captured; a launch that faults
// leaves it set (flashjit_check_engine_metadata names it; zero the workspace again).
FJ_DEVICE DealtTile dynamic_tile(const Params& p, uint32_t index) {
  TileDeal shape;
  set_deal_shape(shape, (uint32_t)padded_m_blocks(p), (uint32_t)tile_heads(p) * (uint32_t)p.batch * tile_splits(p));
  return dynamic_order_tile(shape, divisor(shape.m_blocks, p.div_m_blocks), index);
}

// The first index past the empty tiles from this one (its sequence's query blocks, or none for a
// split the sequence does not have).
FJ_DEVICE uint32_t dynamic_skip(const Params& p, uint32_t index, const Tile& tile, const SeqlenInfo& seq) {
  const bool split_empty = kSplitKV && tile.split >= tile_key_split(p, seq).splits;
  const int blocks = split_empty ? 0 : (seq.seqlen_q + tokens_per_tile(p) - 1) / tokens_per_tile(p);
  return dynamic_skip_to(index, (uint32_t)tile.m_block, (uint32_t)blocks);
}

// The producer is one thread, or with a paged cache warps (kWarpProducer, see load_paged_tile):
// their lanes issue a block's paged loads; the leader (warp 0, lane 0) does everything else, and
// the threads agree on every tile (the static walk is computed alike, a dynamic take is broadcast:
// one warp then).
// With an FP8 cache (kKvFp8) or FP8 operands the whole warpgroup: warp 0 loads, warps 1-3 widen K/V
// or transpose V (see below).
constexpr bool kStagingProducer = kKvFp8 || kFp8Operands;
constexpr bool kWarpProducer = kPaged && !kStagingProducer;
constexpr int kProducerWarps = kStagingProducer || (kWarpProducer && !kDynamicSchedule) ? 4 : 1;
constexpr int kProducerThreads = kStagingProducer || kWarpProducer ? 32 * kProducerWarps : 1;
FJ_DEVICE int producer_lane() { return kWarpProducer || kStagingProducer ? (int)(threadIdx.x & 31) : 0; }
FJ_DEVICE int producer_warp() { return kProducerWarps > 1 ? (int)(threadIdx.x >> 5) : 0; }
FJ_DEVICE bool producer_leads() { return producer_lane() == 0 && producer_warp() == 0; }
// The warps that issue a block's paged loads (paged_producer_warps); the others leave at once (produce).
FJ_DEVICE int producer_warps_in_use(const Params& p) {
  if constexpr (kProducerWarps == 1) return 1;
  if constexpr (kStagingProducer) return kProducerWarps;
  return paged_producer_warps(p.kv_rows_per_load, kBlockN, kProducerWarps);
}
FJ_DEVICE int producer_threads(const Params& p) { return kWarpProducer ? 32 * producer_warps_in_use(p) : 1; }
// This thread's first load of a block: loads go round the warps first, so that every warp in use
// issues some of a block's few.
FJ_DEVICE int producer_load(const Params& p) { return paged_first_load(producer_lane(), producer_warp(), producer_warps_in_use(p)); }

FJ_DEVICE uint32_t take_tile(const Params& p) {
  uint32_t index = 0;
  if (producer_leads()) index = atomicAdd(p.tile_counter, 1u);
  return kWarpProducer ? __shfl_sync(0xffffffffu, index, 0) : index;
}
FJ_DEVICE void skip_tiles_to(const Params& p, uint32_t index) {
  if (producer_leads()) atomicMax(p.tile_counter, index);
}

FJ_DEVICE void release_tile_counter(const Params& p) {
  if (!producer_leads()) return;
  __threadfence();  // this CTA's takes before its count
  if (atomicAdd(p.tile_counter + 1, 1u) == gridDim.x - 1u) {
    atomicExch(p.tile_counter, 0u);
    atomicExch(p.tile_counter + 1, 0u);
  }
}

// ================================================================ K/V coordinates
// Where the producer finds a K/V block: the one seam between the kernel and the cache's layout.
// Dense [batch, seqlen_k, heads_kv, d] and packed [total_k, heads_kv, d] rows are one TMA per
// 64-column chunk at (k_row0 + key, head, k_batch). Paged [num_pages, page_size, heads_kv, d]
// rows go kv_rows_per_load at a time (a divisor of the page size: no load straddles a page) at
// (key % page_size, head, page), the page from the sequence's row of the block table.
// NOTES (correctness): keys from seqlen_k on are masked, so a load that starts past the sequence's
// last key reads page -1: out of the map's bounds, which TMA fills with zeros and still counts
// towards the barrier's bytes; the block table is never read past the sequence's pages. A page
// index outside [0, num_pages) likewise loads zeros: TMA bounds every load by the pool's extent.
// NOTES: with a paged cache the producer is up to four warps (kWarpProducer): thread t issues load
// t of a block (producer_load), its page read a block ahead (lane_page_of) and used for the block's K
// and then its V, so a block's page indices cost one round trip, off the producer's critical path.
// One thread reading them (three at a time) fell behind the consumers at page 16: 0.57-0.65x the
// contiguous kernel at chunked prefill (bench/NOTES.md, versions 58 and 62). One warp issuing a
// block's 16 TMAs (page 16) was still the bottleneck: TMA takes uniform operands, so a warp's
// loads with different pages issue one after another, ~150 cycles each (version 63); four warps
// issue theirs side by side (producer_warps_in_use: two loads or more a warp).
// NOTES (correctness): only the leader arms a full barrier, so another warp's load may land before
// the leader's expect_tx: the transaction count goes below zero meanwhile, which PTX allows, and
// the phase cannot complete before the leader's arrival (the only one counted). Each warp waits
// for a slot on its own, and none can fall a phase behind on an empty barrier: the slot is not
// refilled, so not released again, until that warp's own load has landed.
// Blocks of more loads than producer threads (one warp with the dynamic scheduler: pages of under
// 4 keys) read theirs as they go, producer_threads a round trip.

FJ_DEVICE int page_of_key(const Params& p, const SeqlenInfo& seq, int key) {
  if (key >= seq.seqlen_k) return -1;
  return __ldg(p.block_table + seq.k_batch * p.block_table_stride + fast_div((uint32_t)key, p.div_page_size));
}

// The page of this thread's load of block n when every load has a thread (else unused).
// NOTES (correctness): this test and load_paged_tile's are paged_load_per_thread (the rule the CPU
// tests check), spelled out: calling it in load_paged_tile changed the SASS of the GPU-tested
// kernels, so that waits until the new SASS has run on a GPU.
FJ_DEVICE int lane_page_of(const Params& p, const SeqlenInfo& seq, int n) {
  if constexpr (!kWarpProducer) return 0;
  const int r = producer_load(p) * p.kv_rows_per_load;
  if (r >= kBlockN || kBlockN > producer_threads(p) * p.kv_rows_per_load) return -1;
  return page_of_key(p, seq, n * kBlockN + r);
}

// `rows` keys (one load's) at row r of the tile, from page `page`.
// col0: the first column (V's for an O column part; else 0).
// qv=1 (FlashAttention-3's split MLA form): chunk c of a Q or K tile comes from qv's or V's map
// (`map`, columns from 0) for c < kQvChunks, else from q's or k's (`tail`, columns from 0 again);
// K's tiles only (kKeys): V's are V's own columns. Without qv every chunk is `map`'s.
template <bool kKeys>
FJ_DEVICE const TmaDesc* chunk_map(const TmaDesc* map, const TmaDesc* tail, int c, int* col) {
  if constexpr (kKeys && kQvChunks > 0) {
    if (c >= kQvChunks) {
      *col = (c - kQvChunks) * 64;
      return tail;
    }
  }
  return map;
}

template <int kChunks, bool kKeys, int kHalf, bool kChunkBars = false>
FJ_DEVICE void load_paged_rows(const Params& p, const TmaDesc* map, uint32_t tile, uint32_t full, int n, int r, int kv_head, int page,
                               int col0) {
  const int key = n * kBlockN + r;
  const PagedRow at = paged_row(key, (int)fast_div((uint32_t)key, p.div_page_size), p.page_size);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (!chunk_in_half(kHalf, c)) continue;
    int col = col0 + c * kChunkColumns;
    tma_load_4d(tile + c * kBlockN * 128 + r * 128, chunk_map<kKeys>(map, &p.k_tail, c, &col), kChunkBars ? full + 8u * c : full, col,
                at.row_in_page, kv_head, page);
  }
}

template <int kChunks, bool kKeys, int kHalf, bool kChunkBars = false>
FJ_DEVICE void load_paged_tile(const Params& p, const TmaDesc* map, uint32_t tile, uint32_t full, int n, int kv_head,
                               const SeqlenInfo& seq, int lane_page, int col0) {
  const int rows = p.kv_rows_per_load;
  if (kBlockN <= producer_threads(p) * rows) {  // paged_load_per_thread: its page read ahead (lane_page_of)
    const int r = producer_load(p) * rows;
    if (r < kBlockN) load_paged_rows<kChunks, kKeys, kHalf, kChunkBars>(p, map, tile, full, n, r, kv_head, lane_page, col0);
    return;
  }
#pragma unroll 1
  for (int r = producer_load(p) * rows; r < kBlockN; r += producer_threads(p) * rows) {
    load_paged_rows<kChunks, kKeys, kHalf, kChunkBars>(p, map, tile, full, n, r, kv_head, page_of_key(p, seq, n * kBlockN + r), col0);
  }
}

// One K or V tile [chunks][kBlockN][64] of block n into a ring slot (kKeys: K's, chunk_map's
// split with qv=1), or with kHalf the chunks of one seesaw half (chunk_in_half). In a cluster, this
// CTA loads its share of the rows and multicasts it to both CTAs; each CTA's full barrier expects
// the whole tile. kChunkBars (chunk_waits=1): chunk c lands on a barrier of its own, full + 8 c.
template <int kChunks, bool kKeys, int kHalf = kWholeTile, bool kChunkBars = false>
FJ_DEVICE void load_tile(const Params& p, const TmaDesc* map, uint32_t tile, uint32_t full, int n, int kv_head,
                         const SeqlenInfo& seq, uint32_t rank, int lane_page, int col0 = 0) {
  constexpr int kRows = kBlockN / kCluster;
  if (producer_leads()) {
    if constexpr (kChunkBars) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if (chunk_in_half(kHalf, c)) mbar_arrive_expect_tx(full + 8u * c, kBlockN * 128);
      }
    } else {
      mbar_arrive_expect_tx(full, chunks_in_half(kHalf, kChunks) * kBlockN * 128);
    }
  }
  if constexpr (kPaged) {
    load_paged_tile<kChunks, kKeys, kHalf, kChunkBars>(p, map, tile, full, n, kv_head, seq, lane_page, col0);
    return;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (!chunk_in_half(kHalf, c)) continue;
    const uint32_t dst = tile + c * kBlockN * 128 + rank * kRows * 128;
    const int row = seq.k_row0 + n * kBlockN + rank * kRows;
    int col = col0 + c * kChunkColumns;
    const TmaDesc* from = chunk_map<kKeys>(map, &p.k_tail, c, &col);
    const uint32_t bar = kChunkBars ? full + 8u * c : full;
    if (kCluster == 1) tma_load_4d(dst, from, bar, col, row, kv_head, seq.k_batch);
    else tma_load_4d_multicast(dst, from, bar, kQvChunks > 0 ? col : c * kChunkColumns, row, kv_head, seq.k_batch, (uint16_t)((1u << kCluster) - 1));
  }
}

// ================================================================ the FP8 cache (kv_dtype=e4m3)
// K and V come in e4m3 and go into the ring in the queries' 16 bits, so that the consumers are the
// 16-bit kernel's: the producer warpgroup loads a block into a staging slot (warp 0: cp.async, 16
// bytes a lane, a page looked up per row, keys past the sequence zero-filled without a read) and
// widens it into the ring slot (warps 1-3: e4m3 -> f16 exactly, times the scale in float, rounded
// to the dtype once), then arrives on the slot's full barrier as TMA would. K and V each have
// kKvStagingSlots staging slots, so the next loads are in flight while one block is widened.
// NOTES (correctness): the widened tile is written by the generic proxy and read by wgmma (the async
// proxy): each widening thread fences (fence.proxy.async) before its warp's arrival. Rows past the
// sequence are zeros, never the cache's bytes (NaN there stays out of P V); so are the pad
// columns of a head dim that is not a multiple of 64 (written with every block).
constexpr int kKvIssueThreads = 32;  // warp 0 of the producer warpgroup
constexpr int kKvWidenThreads = 96;  // warps 1-3

FJ_DEVICE float kv_fp8_scale(const float* scale, const int64_t (&strides)[2], int batch, int kv_head) {
  return scale ? __ldg(scale + batch * strides[0] + kv_head * strides[1]) : 1.f;
}

// Row r of block n of an e4m3 tensor (base, strides: batch or page, row, head): the one address
// rule of the FP8 loads (contiguous, packed or paged), in two steps so that a loader can have its
// rows' block-table reads in flight together and keep one word a row. fp8_row_page: the row's page
// (paged; else 0), or -1 for a key past the sequence or a row past the block (a negative page in the
// block table reads as such: zeros, never a read outside the pool). fp8_row_address: where the row
// starts, or nullptr for page -1.
FJ_DEVICE int fp8_row_page(const Params& p, const SeqlenInfo& seq, int n, int r) {
  const int key = n * kBlockN + r;
  if (r >= kBlockN || key >= seq.seqlen_k) return -1;
  if constexpr (kPaged) return page_of_key(p, seq, key);
  return 0;
}
FJ_DEVICE const unsigned char* fp8_row_address(const Params& p, const unsigned char* base, const int64_t* strides, const SeqlenInfo& seq,
                                               int n, int r, int kv_head, int page) {
  if (page < 0) return nullptr;
  const int key = n * kBlockN + r;
  if constexpr (kPaged) {
    const PagedRow at = paged_row(key, (int)fast_div((uint32_t)key, p.div_page_size), p.page_size);
    return base + page * strides[0] + at.row_in_page * strides[1] + kv_head * strides[2];
  }
  return base + seq.k_batch * strides[0] + (int64_t)(seq.k_row0 + key) * strides[1] + kv_head * strides[2];
}
// Both steps at once; a row found adds row_bytes to bytes.
FJ_DEVICE const unsigned char* fp8_row_source(const Params& p, const unsigned char* base, const int64_t* strides, const SeqlenInfo& seq,
                                              int n, int r, int kv_head, uint32_t& bytes, uint32_t row_bytes) {
  const unsigned char* src = fp8_row_address(p, base, strides, seq, n, r, kv_head, fp8_row_page(p, seq, n, r));
  if (src != nullptr) bytes += row_bytes;
  return src;
}

// Block n's rows of the FP8 cache into a staging slot [rows][kDim bytes] (dst), a bulk copy a row by
// the TMA engine, counted on `full` as transaction bytes: each lane takes rows lane, lane + 32, ...
// and arrives once with their bytes (the barrier counts kKvIssueThreads arrivals, as with cp.async).
// Rows past the sequence are written zeros by the lane instead (the widening reads them as keys
// of value 0: never the cache's bytes, so NaN there stays out of P V).
// Head dims above 256 only (kBulkFp8Rows): there a row is 320-576 bytes (V's part 192-256) and the
// bulk copies took MLA's latent cache from 587 to 386 us (cp.async of 16 bytes a lane from the one
// loading warp keeps too few bytes in flight); at d128, 128-byte rows, they were 1.8x slower
// (bench/NOTES.md, 2026-12-06).
// NOTES (correctness): the zeros are generic-proxy writes into rows a later block's bulk copy (the
// async proxy) may fill: the lane fences the proxies after them, before its arrival.
constexpr bool kBulkFp8Rows = kKvFp8 && kHeadDim > 256;
template <int kDim>
FJ_DEVICE void bulk_fp8_rows(const Params& p, const unsigned char* base, const int64_t* strides, const SeqlenInfo& seq, int n,
                             int kv_head, int lane, uint32_t dst, uint32_t full) {
  constexpr int kGroups = (kBlockN + 31) / 32;
  const unsigned char* row_src[kGroups];  // nullptr: a key past the sequence (or a row past the block)
  uint32_t bytes = 0;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) row_src[g] = fp8_row_source(p, base, strides, seq, n, 32 * g + lane, kv_head, bytes, kDim);
  bool zeroed = false;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int r = 32 * g + lane;
    if (r >= kBlockN || row_src[g] != nullptr) continue;
#pragma unroll 1
    for (int c = 0; c < kDim; c += 16) asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" :: "r"(dst + r * kDim + c), "r"(0u) : "memory");
    zeroed = true;
  }
  if (zeroed) fence_proxy_async_shared();
  mbar_arrive_expect_tx(full, bytes);
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    if (row_src[g] != nullptr) bulk_load(dst + (32 * g + lane) * kDim, row_src[g], kDim, full);
  }
}

// Where piece c (16 bytes) of row r of a staged FP8-cache block lies in its staging slot
// (tile_layout.cuh: staged_fp8_unit; rows by bulk copies plain).
template <int kDim>
FJ_DEVICE uint32_t staged_fp8_piece(uint32_t slot, int r, int c) {
  return slot + 16u * staged_fp8_unit(r, c, kDim / 16, kBulkFp8Rows);
}

// Block n's rows of the FP8 cache into a staging slot (staged_fp8_piece's layout) by cp.async, two
// lanes a row: pass g takes rows 16 g .. 16 g + 15, lane l row 16 g + l / 2 (its address found by the
// lane itself: a block-table read a row, the pair reading the same word) and its pieces 2 k + (l & 1),
// so a warp's copy is 16 rows' 32-byte sectors and needs no shuffle. Keys past the sequence are
// zero-filled without a read. (Shuffling each row's address from one lane to the lanes copying it
// made the loading warp the FP8 cache's bottleneck at d128: bench/NOTES.md, 2026-12-06.)
template <int kDim>
FJ_DEVICE void cp_async_fp8_row_pairs(const Params& p, const unsigned char* base, const int64_t* strides, const SeqlenInfo& seq,
                                      int n, int kv_head, int lane, uint32_t slot) {
  constexpr int kPieces = kDim / 16;
  constexpr int kPasses = kBlockN / 16;  // block_n: a multiple of 16
  // Passes whose pages are read together: fewer where the producer has under 64 registers or rows
  // of more than 128 bytes (more spilled 12-120 bytes in some of those producers).
  constexpr int kAheadWanted = kProducerRegs >= 64 && kPieces <= 8 ? 4 : kProducerRegs >= 64 || kPieces <= 8 ? 2 : 1;
  constexpr int kAhead = kPasses < kAheadWanted ? kPasses : kAheadWanted;
#pragma unroll 1
  for (int g0 = 0; g0 < kPasses; g0 += kAhead) {
    int page[kAhead];  // -1: a key past the sequence
#pragma unroll
    for (int q = 0; q < kAhead; ++q) page[q] = fp8_row_page(p, seq, n, 16 * (g0 + q) + lane / 2);
#pragma unroll
    for (int q = 0; q < kAhead; ++q) {
      if (kPasses % kAhead != 0 && g0 + q >= kPasses) break;  // the last group's passes past the block
      const int r = 16 * (g0 + q) + lane / 2;
      const unsigned char* row = fp8_row_address(p, base, strides, seq, n, r, kv_head, page[q]);
      // This lane's first piece (base: read by nobody, 0 bytes), then every other one (immediate offsets).
      const unsigned char* src = (row != nullptr ? row : base) + 16 * (lane & 1);
      const uint32_t bytes = row != nullptr ? 16u : 0u;
#pragma unroll
      for (int k = 0; k < (kPieces + 1) / 2; ++k) {
        const int c = 2 * k + (lane & 1);
        if (kPieces % 2 == 0 || c < kPieces) cp_async_16(staged_fp8_piece<kDim>(slot, r, c), src + 32 * k, bytes);
      }
    }
  }
}

// FP8 operands' K and V: block n by TMA (byte maps, 128-column boxes, as Q's) into a tile of
// [kChunks][kBlockN][128 bytes], issued by the loading warp's first lane. (By the warp's cp.async,
// 16 bytes a lane with each row's address shuffled from the lane that found it, the loading warp
// was the FP8 cache's bottleneck: bench/NOTES.md, 2026-12-06.) With a page of block_n keys or more
// the block is one page, read here (lane_page_of reads none for a staging producer).
template <int kChunks, bool kKeys>
FJ_DEVICE void load_fp8_tile(const Params& p, const TmaDesc* map, uint32_t tile, uint32_t full, int n, int kv_head, const SeqlenInfo& seq) {
  const int page = kPaged && p.kv_rows_per_load >= kBlockN ? page_of_key(p, seq, n * kBlockN) : 0;
  load_tile<kChunks, kKeys>(p, map, tile, full, n, kv_head, seq, 0u, page);
}

// The columns of a staged block: K's head_dim; V's head_dim_v, or with O in column parts (V wider
// than 256: MLA's latent cache) the part's kVCols, read from the part's first column.
template <bool kIsV>
constexpr int kStagedColumns = !kIsV ? kHeadDim : kOParts > 1 ? kVCols : kHeadDimV;

// The FP8 cache's block n of K (kIsV false) or V at ring position pos into its staging slot (rows of kDim bytes);
// col0: V's first column (an O column part's).
template <bool kIsV>
FJ_DEVICE void issue_fp8_block(const Params& p, const SmemLayout& sm, int pos, int n, int kv_head, const SeqlenInfo& seq, int lane,
                               int col0) {
  constexpr int kDim = kStagedColumns<kIsV>;
  const int j = pos % kKvStagingSlots;
  if (pos >= kKvStagingSlots) mbar_wait(kIsV ? sm.staging_empty_v(j) : sm.staging_empty_k(j), ((pos / kKvStagingSlots) & 1) ^ 1);
  const uint32_t dst = kIsV ? sm.staging_v(j) : sm.staging_k(j);
  const unsigned char* base = kIsV ? p.v_fp8 + (kOParts > 1 ? col0 : 0) : p.k_fp8;  // one byte a column
  if constexpr (kBulkFp8Rows) {
    bulk_fp8_rows<kDim>(p, base, kIsV ? p.v_fp8_strides : p.k_fp8_strides, seq, n, kv_head, lane, dst,
                        kIsV ? sm.staging_full_v(j) : sm.staging_full_k(j));
  } else {  // narrower rows
    cp_async_fp8_row_pairs<kDim>(p, base, kIsV ? p.v_fp8_strides : p.k_fp8_strides, seq, n, kv_head, lane, dst);
    cp_async_arrive(kIsV ? sm.staging_full_v(j) : sm.staging_full_k(j));
  }
}

// Four e4m3 values (one word, the lowest byte first) times the scale, as two words of the dtype.
FJ_DEVICE void widen_e4m3x4(uint32_t packed, float scale, uint32_t& lo, uint32_t& hi) {
  float v[4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    asm("{\n.reg .b16 a, l, u;\n.reg .b32 x;\n"
        "mov.b32 {a, u}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 x, a;\n"
        "mov.b32 {l, u}, x;\n"
        "cvt.f32.f16 %0, l;\n"
        "cvt.f32.f16 %1, u;\n}"
        : "=f"(v[2 * h]), "=f"(v[2 * h + 1]) : "r"(h ? packed >> 16 : packed));
  }
  lo = pack2(v[0] * scale, v[1] * scale);
  hi = pack2(v[2] * scale, v[3] * scale);
}

// The staged block into the ring slot of position pos, widened (warps 1-3, t = 0..95).
template <bool kIsV>
FJ_DEVICE void widen_fp8_block(const SmemLayout& sm, int pos, float scale, int t) {
  constexpr int kDim = kStagedColumns<kIsV>;
  constexpr int kPieces = kDim / 16;
  constexpr int kPadPieces = ((kDim + 63) / 64 * 64 - kDim) / 16;  // zero columns up to the 64-column chunk
  const int j = pos % kKvStagingSlots, s = stage_of(pos);
  mbar_wait(kIsV ? sm.staging_full_v(j) : sm.staging_full_k(j), (pos / kKvStagingSlots) & 1);
  if (pos >= kStages) mbar_wait(kIsV ? sm.empty_v(s) : sm.empty_k(s), phase_of(pos) ^ 1);
  const uint32_t src = kIsV ? sm.staging_v(j) : sm.staging_k(j);
  const uint32_t tile = kIsV ? sm.v_stage(s) : sm.k_stage(s);
  // kAtOnce pieces a thread at a time, their loads issued together: their latency (and the
  // conversions' chains) overlap where the producer's registers allow it. Not for rows by bulk copies
  // (MLA's latent cache): there two at once measured 386.1 -> 408.5 us (bench/NOTES.md, 2026-12-06).
  constexpr int kTotal = kBlockN * kPieces, kAtOnce = kProducerRegs >= 64 && !kBulkFp8Rows ? 2 : 1;
  // A piece's row: u is never negative, so at a power-of-two row width an unsigned shift (the signed
  // division's sign fix-ups were a third of the loop's instructions) where the producer has 64
  // registers; else the plain division (unsigned, 40-register producers spilled 4-8 bytes).
  constexpr bool kShift = (kPieces & (kPieces - 1)) == 0 && kAtOnce > 1;
  const auto row_of = [](int u) { return kShift ? (int)((uint32_t)u / kPieces) : u / kPieces; };
  const auto piece_of = [](int u) { return kShift ? (int)((uint32_t)u % kPieces) : u % kPieces; };
#pragma unroll 1
  for (int u0 = t; u0 < kTotal; u0 += kAtOnce * kKvWidenThreads) {
    uint32_t w[kAtOnce][4];
#pragma unroll
    for (int i = 0; i < kAtOnce; ++i) {  // past the end: the last piece again, read, not stored
      const int u = kAtOnce > 1 ? min(u0 + i * kKvWidenThreads, kTotal - 1) : u0;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(w[i][0]), "=r"(w[i][1]), "=r"(w[i][2]), "=r"(w[i][3])
                   : "r"(staged_fp8_piece<kDim>(src, row_of(u), piece_of(u))));
    }
#pragma unroll
    for (int i = 0; i < kAtOnce; ++i) {
      const int u = u0 + i * kKvWidenThreads;
      if (i > 0 && u >= kTotal) break;
      const int r = row_of(u), c = piece_of(u);
      uint32_t out[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) widen_e4m3x4(w[i][q], scale, out[2 * q], out[2 * q + 1]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(tile + swizzled_offset(r, c * 16 + 8 * h, kBlockN)),
                     "r"(out[4 * h]), "r"(out[4 * h + 1]), "r"(out[4 * h + 2]), "r"(out[4 * h + 3]) : "memory");
      }
    }
  }
  if constexpr (kPadPieces > 0) {
#pragma unroll 1
    for (int u = t; u < kBlockN * kPadPieces * 2; u += kKvWidenThreads) {
      const int r = u / (kPadPieces * 2), col = kDim + 8 * (u % (kPadPieces * 2));
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" :: "r"(tile + swizzled_offset(r, col, kBlockN)), "r"(0u) : "memory");
    }
  }
  fence_proxy_async_shared();
  __syncwarp();
  if ((t & 31) == 0) {
    mbar_arrive(kIsV ? sm.full_v(s) : sm.full_k(s));
    mbar_arrive(kIsV ? sm.staging_empty_v(j) : sm.staging_empty_k(j));
  }
}

// ---------------------------------------------------------------- FP8 operands (dtype=e4m3)
// Q K^T and P V run as e4m3 GEMMs, which take K-major operands only. K is K-major as it comes: TMA
// puts it straight into the ring slot's swizzled rows. V comes [keys][d] and the P V GEMM wants it
// [d][keys]: TMA puts it into a staging slot (swizzled rows, as K's) and warps 1-3 transpose it into
// the ring slot, 4 x 4 bytes at a time.
// NOTES (correctness): P's registers are used as the GEMM's A operand as they are (no shuffles), so
// their order of keys is not the accumulator's: a thread holds keys {2l, 2l+1, 8+2l, 9+2l} (l its
// lane in the quad) of each 16 where the e4m3 A layout puts keys 4l..4l+3. The transpose writes key
// kv_position_key(pos) at position pos, the same permutation, so P V sums the right pairs (P V sums
// over keys: any order both operands share gives the same O). Keys past the sequence are written
// zeros by the transpose (TMA brings whatever the cache holds there), so NaN in the cache stays out
// of P V; K needs none (the mask selects -inf over any score).
FJ_DEVICE int transposed_key(int position) {  // key at a position of a 16-key group
  const int l = (position & 15) >> 2, k = position & 3;
  return (position & ~15) + (k < 2 ? 2 * l + k : 8 + 2 * l + (k - 2));
}

// FP8 operands' block n at ring position pos, by the loading warp's first lane (load_fp8_tile): K
// straight into its ring slot; V into its staging slot as 128-byte swizzled rows, which
// transpose_fp8_v reads.
template <bool kIsV>
FJ_DEVICE void load_fp8_operand(const Params& p, const SmemLayout& sm, int pos, int n, int kv_head, const SeqlenInfo& seq, int lane) {
  if (lane != 0) return;
  constexpr int kSlots = kIsV ? kKvStagingSlots : kStages;
  const int j = pos % kSlots;
  if (pos >= kSlots) mbar_wait(kIsV ? sm.staging_empty_v(j) : sm.empty_k(j), ((pos / kSlots) & 1) ^ 1);
  if constexpr (kIsV) load_fp8_tile<(kHeadDimV + 127) / 128, false>(p, &p.v, sm.staging_v(j), sm.staging_full_v(j), n, kv_head, seq);
  else load_fp8_tile<kQKChunks, true>(p, &p.k, sm.k_stage(j), sm.full_k(j), n, kv_head, seq);
}

// The staged V block into the ring slot of position pos, transposed: [kVCols rows (d)][kBlockN
// keys] in 128-key chunks of 128-byte swizzled rows, d rows past kHeadDimV zero.
FJ_DEVICE void transpose_fp8_v(const SmemLayout& sm, int pos, int t, int valid_keys) {
  constexpr int kQuads = kHeadDimV / 4;  // 4-byte column groups of a staged row
  const int j = pos % kKvStagingSlots, s = stage_of(pos);
  mbar_wait(sm.staging_full_v(j), (pos / kKvStagingSlots) & 1);
  if (pos >= kStages) mbar_wait(sm.empty_v(s), phase_of(pos) ^ 1);
  const uint32_t src = sm.staging_v(j), tile = sm.v_stage(s);
#pragma unroll 1
  for (int u = t; u < (kBlockN / 4) * kQuads; u += kKvWidenThreads) {
    const int position = 4 * (u / kQuads), col = 4 * (u % kQuads);  // 4 key positions x 4 d columns
    uint32_t r[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int key = transposed_key(position + k);
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(r[k]) : "r"(src + swizzled_byte_offset(key, col, kBlockN)));
      if (key >= valid_keys) r[k] = 0u;  // past the sequence: the cache's bytes (NaN there stays out of P V)
    }
    const uint32_t lo01 = __byte_perm(r[0], r[1], 0x5140), hi01 = __byte_perm(r[0], r[1], 0x7362);
    const uint32_t lo23 = __byte_perm(r[2], r[3], 0x5140), hi23 = __byte_perm(r[2], r[3], 0x7362);
    const uint32_t w[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632), __byte_perm(hi01, hi23, 0x5410),
                           __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t at = tile + swizzled_byte_offset(col + m, position, kVCols);
      asm volatile("st.shared.u32 [%0], %1;" :: "r"(at), "r"(w[m]) : "memory");
    }
  }
  if constexpr (kVCols > kHeadDimV) {  // the pad rows of O's last 64-column chunk
#pragma unroll 1
    for (int u = t; u < (kVCols - kHeadDimV) * (kBlockN / 16); u += kKvWidenThreads) {
      const int row = kHeadDimV + u / (kBlockN / 16), unit = u % (kBlockN / 16);
      const uint32_t at = tile + swizzled_byte_offset(row, 16 * unit, kVCols);
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" :: "r"(at), "r"(0u) : "memory");
    }
  }
  fence_proxy_async_shared();
  __syncwarp();
  if ((t & 31) == 0) {
    mbar_arrive(sm.full_v(s));
    mbar_arrive(sm.staging_empty_v(j));
  }
}

// One K or V block's part for this producer thread: its loads (warp 0), or its widening (FP8
// cache) or transpose (FP8 operands: V).
template <bool kIsV>
FJ_DEVICE void fp8_block(const Params& p, const SmemLayout& sm, int pos, int n, int kv_head, const SeqlenInfo& seq, float scale,
                         int col0 = 0) {
  const int t = (int)threadIdx.x;
  if constexpr (kFp8Operands) {
    if (t < kKvIssueThreads) load_fp8_operand<kIsV>(p, sm, pos, n, kv_head, seq, t);
    else if constexpr (kIsV) transpose_fp8_v(sm, pos, t - kKvIssueThreads, seq.seqlen_k - n * kBlockN);
  } else if (t < kKvIssueThreads) {
    issue_fp8_block<kIsV>(p, sm, pos, n, kv_head, seq, t, col0);
  } else {
    widen_fp8_block<kIsV>(sm, pos, scale, t - kKvIssueThreads);
  }
}

// ================================================================ producer
// K or V block `block` into the ring slot of ring position `pos` (positions run on across this
// CTA's tiles). A slot is waited for only once the ring has gone round: the consumers' release of
// position pos - kStages.
FJ_DEVICE void load_k(const Params& p, const SmemLayout& sm, int pos, int block, int kv_head, const SeqlenInfo& seq, uint32_t rank,
                      int lane_page, float fp8_scale = 1.f, int col0 = 0) {
  if constexpr (kStagingProducer) return fp8_block<false>(p, sm, pos, block, kv_head, seq, fp8_scale);
  const int s = stage_of(pos);
  if (pos >= kStages) mbar_wait(sm.empty_k(s), phase_of(pos) ^ 1);
  if constexpr (kHalfRelease) {
    // Warpgroup 0's part as soon as it is free, then warpgroup 1's (see ReleaseHalves).
    load_tile<kQKChunks, true, kHalfLateB, true>(p, &p.k, sm.k_stage(s), sm.chunk_full(s, 0), block, kv_head, seq, rank, lane_page, col0);
    if (pos >= kStages) mbar_wait(sm.empty_v(s), phase_of(pos) ^ 1);
    load_tile<kQKChunks, true, kHalfEarlyB, true>(p, &p.k, sm.k_stage(s), sm.chunk_full(s, 0), block, kv_head, seq, rank, lane_page, col0);
  } else if constexpr (kChunkWaits) {
    load_tile<kQKChunks, true, kWholeTile, true>(p, &p.k, sm.k_stage(s), sm.chunk_full(s, 0), block, kv_head, seq, rank, lane_page, col0);
  } else {
    load_tile<kQKChunks, true>(p, &p.k, sm.k_stage(s), sm.full_k(s), block, kv_head, seq, rank, lane_page, col0);
  }
}

FJ_DEVICE void load_v(const Params& p, const SmemLayout& sm, int pos, int block, int kv_head, const SeqlenInfo& seq, uint32_t rank,
                      int lane_page, float fp8_scale = 1.f, int col0 = 0) {
  if constexpr (kStagingProducer) return fp8_block<true>(p, sm, pos, block, kv_head, seq, fp8_scale, col0);
  const int s = stage_of(pos);
  if (pos >= kStages) mbar_wait(sm.empty_v(s), phase_of(pos) ^ 1);
  // kPairedO: the slot holds both consumer warpgroups' halves (the first's chunks, then the second's).
  load_tile<kPairedO ? 2 * kVChunks : kVChunks, false>(p, &p.v, sm.v_stage(s), sm.full_v(s), block, kv_head, seq, rank, lane_page, col0);
}

// With two Q buffers the producer publishes each tile beside its Q, so that the consumers read two
// words instead of computing the deal: the words are written once the buffer is free and before
// its full barrier's arrival, whose release (and the consumers' acquiring wait) orders them. After
// the last tile it publishes kNoTile with a plain arrival (kPublishTiles: two Q buffers).
constexpr uint32_t kNoTile = 0xffffffffu;

FJ_DEVICE void store_tile_words(const SmemLayout& sm, int b, uint32_t m_block, uint32_t head_index) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(sm.tile_words(b)), "r"(m_block), "r"(head_index) : "memory");
}

// Lengths on the device: the tile's sequence beside its coordinates, so that the consumers take
// it from shared memory (a read of cu_seqlens at every tile start stalled them for a global load).
FJ_DEVICE void store_sequence_words(const SmemLayout& sm, int b, const SeqlenInfo& seq) {
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(sm.tile_words(b) + 8), "r"(seq.seqlen_q), "r"(seq.seqlen_k) : "memory");
  asm volatile("st.shared.u32 [%0], %1;" :: "r"(sm.tile_words(b) + 16), "r"(seq.q_row0) : "memory");
}

FJ_DEVICE void publish_end(const SmemLayout& sm, int local) {
  if (!producer_leads()) return;
  const int b = q_buffer_of(local);
  if (local >= kQBuffers) mbar_wait(sm.empty_q(b), q_phase_of(local) ^ 1);
  store_tile_words(sm, b, kNoTile, 0);
  mbar_arrive(sm.full_q(b));
}

// Q into the tile's buffer, once the consumers have stored the O they staged there kQBuffers tiles ago.
FJ_DEVICE void load_q(const Params& p, const SmemLayout& sm, const Tile& tile, const SeqlenInfo& seq, int local) {
  if (!producer_leads()) return;
  const int b = q_buffer_of(local);
  if (local >= kQBuffers) mbar_wait(sm.empty_q(b), q_phase_of(local) ^ 1);
  if (kPublishTiles) store_tile_words(sm, b, (uint32_t)(kOParts > 1 ? tile.m_block * kOParts + tile.part : tile.m_block), head_index_of(p, tile));
  if (kPublishTiles && kDeviceLengths) store_sequence_words(sm, b, seq);
  mbar_arrive_expect_tx(sm.full_q(b), kQLoadBytes);
  // Packed heads: the map's dims 1 and 2 are swapped (heads, then rows) and its box is pack_heads
  // heads x tokens_per_tile rows: the tile's rows come out query-major, as row_target reads them.
#pragma unroll
  for (int c = 0; c < kQKChunks; ++c) {
    int col = tile.qk_col0() + c * kChunkColumns;
    const TmaDesc* from = chunk_map<true>(&p.q, &p.q_tail, c, &col);  // qv=1: qv's chunks, then q's
    if constexpr (kPackGQA) {
      tma_load_4d(sm.q_buffer(b) + c * kBlockM * 128, from, sm.full_q(b), col, tile.head * p.pack_heads,
                  seq.q_row0 + tile.m_block * tokens_per_tile(p), seq.q_batch);
    } else {
      tma_load_4d(sm.q_buffer(b) + c * kBlockM * 128, from, sm.full_q(b), col, seq.q_row0 + tile.m_block * kBlockM,
                  tile.head, seq.q_batch);
    }
  }
}

// How many ring positions a tile of n_blocks K/V blocks takes: one a block, or with the seesaw one
// a pair (an odd count's last pair has no second block).
FJ_DEVICE int ring_positions(int n_blocks) { return kSeesaw ? (n_blocks + 1) / 2 : n_blocks; }

// Seesaw: the half kHalf (chunk_in_half) of block `block` into its slot at pair position pp, once
// the half's readers have released it from the previous pair. A pair without a second block (the
// last of an odd count) has the leader arrive on B's halves instead, loading nothing, so that every
// barrier's phases still go one a pair.
template <int kHalf>
FJ_DEVICE void load_seesaw_half(const Params& p, const SmemLayout& sm, int pp, int block, int kv_head, const SeqlenInfo& seq,
                                int lane_page) {
  if (pp >= 1) mbar_wait(sm.half_empty(kHalf), (pp & 1) ^ 1);
  constexpr int kSlot = kHalf >= kHalfEarlyB;
  load_tile<kQKChunks, true, kHalf, kChunkWaits>(p, &p.k, sm.k_stage(kSlot), kChunkWaits ? sm.chunk_full(kSlot, 0) : sm.half_full(kHalf), block,
                                                 kv_head, seq, 0u, lane_page);
}
template <int kHalf>
FJ_DEVICE void skip_seesaw_half(const SmemLayout& sm, int pp) {
  if (!producer_leads()) return;
  if (pp >= 1) mbar_wait(sm.half_empty(kHalf), (pp & 1) ^ 1);
  if constexpr (kChunkWaits) {
#pragma unroll
    for (int c = 0; c < kQKChunks; ++c) {
      if (chunk_in_half(kHalf, c)) mbar_arrive(sm.chunk_full(kHalf >= kHalfEarlyB, c));
    }
  } else {
    mbar_arrive(sm.half_full(kHalf));
  }
}

// The seesaw's loads of one tile, a pair at a time in the order the halves are released: A's early
// half (warpgroup 0's first P V), B's early (warpgroup 1's), A's late, B's late, so the producer
// never waits on a half while one released before it could load. The pages of the next pair are
// read between the early and the late halves (their round trip behind two waits).
FJ_DEVICE void produce_seesaw_tile(const Params& p, const SmemLayout& sm, const Tile& tile, const SeqlenInfo& seq, int local,
                                   int ring, const MaskBlockRange& range) {
  const int kv_head = (int)fast_div((uint32_t)tile.head, p.div_group);
  const int n_blocks = range.count();
  const int top = range.n_max - 1;  // the pairs' blocks go right to left: (top, top - 1), (top - 2, top - 3), ...
  int page_a = n_blocks > 0 ? lane_page_of(p, seq, top) : 0;
  int page_b = n_blocks > 1 ? lane_page_of(p, seq, top - 1) : 0;
  if (kQBuffers == 2 || n_blocks == 0) load_q(p, sm, tile, seq, local);
  for (int j = 0; 2 * j < n_blocks; ++j) {
    const int pp = ring + j, a = top - 2 * j;
    const bool has_b = 2 * j + 1 < n_blocks;
    load_seesaw_half<kHalfEarlyA>(p, sm, pp, a, kv_head, seq, page_a);
    if (kQBuffers == 1 && j == 0) load_q(p, sm, tile, seq, local);  // after K's first half (see produce_tile)
    if (has_b) load_seesaw_half<kHalfEarlyB>(p, sm, pp, a - 1, kv_head, seq, page_b);
    else skip_seesaw_half<kHalfEarlyB>(sm, pp);
    const int next_a = 2 * j + 2 < n_blocks ? lane_page_of(p, seq, a - 2) : 0;
    const int next_b = 2 * j + 3 < n_blocks ? lane_page_of(p, seq, a - 3) : 0;
    load_seesaw_half<kHalfLateA>(p, sm, pp, a, kv_head, seq, page_a);
    if (has_b) load_seesaw_half<kHalfLateB>(p, sm, pp, a - 1, kv_head, seq, page_b);
    else skip_seesaw_half<kHalfLateB>(sm, pp);
    page_a = next_a;
    page_b = next_b;
  }
}

// One tile's loads. Q is loaded for every tile, also one with no visible key: its consumers still
// stage O (zeros) in the buffer and release it.
// NOTES: with one Q buffer, Q waits for the previous tile's O store; K(0) goes first so that its
// slot's wait and load overlap that store.
FJ_DEVICE void produce_tile(const Params& p, const SmemLayout& sm, const Tile& tile, const SeqlenInfo& seq, int local,
                            int ring, const MaskBlockRange& range, uint32_t rank) {
  if constexpr (kSeesaw) return produce_seesaw_tile(p, sm, tile, seq, local, ring, range);
  const int kv_head = (int)fast_div((uint32_t)tile.head, p.div_group);
  const int n_blocks = range.count();
  const int last = ring + n_blocks - 1;  // ring position of the tile's last load, K/V block n_min (right to left)
  const int top = range.n_max - 1;       // the block loaded at ring position `ring`
  int page = n_blocks > 0 ? lane_page_of(p, seq, top) : 0;
  int next = n_blocks > 1 ? lane_page_of(p, seq, top - 1) : 0;
  // The FP8 cache's scales for this tile's K/V head (the widening warps multiply by them).
  const float k_scale = kKvFp8 ? kv_fp8_scale(p.k_scale, p.k_scale_strides, tile.batch, kv_head) : 1.f;
  const float v_scale = kKvFp8 ? kv_fp8_scale(p.v_scale, p.v_scale_strides, tile.batch, kv_head) : 1.f;
  if (kQBuffers == 2) load_q(p, sm, tile, seq, local);
  if (n_blocks > 0) load_k(p, sm, ring, top, kv_head, seq, rank, page, k_scale, tile.qk_col0());
  if (kQBuffers == 1) load_q(p, sm, tile, seq, local);
  // K(pos) then V(pos - 1): the order in which the overlapped consumers use them.
  for (int pos = ring + 1; pos <= last; ++pos) {
    const int prev = page;
    page = next;
    next = pos < last ? lane_page_of(p, seq, top - (pos - ring) - 1) : 0;
    load_k(p, sm, pos, top - (pos - ring), kv_head, seq, rank, page, k_scale, tile.qk_col0());
    if (!kVInK) load_v(p, sm, pos - 1, top - (pos - 1 - ring), kv_head, seq, rank, prev, v_scale, tile.v_col0());
  }
  if (n_blocks > 0 && !kVInK) load_v(p, sm, last, range.n_min, kv_head, seq, rank, page, v_scale, tile.v_col0());  // kVInK: V is K's slot
}

// The dynamic scheduler's walk (two Q buffers: the consumers read the tiles it publishes).
FJ_DEVICE void produce_dynamic(const Params& p, const SmemLayout& sm) {
  const uint32_t tiles = tile_count(p);
  int ring = 0, local = 0;
  for (;;) {
    const uint32_t index = take_tile(p);
    if (index >= tiles) break;
    const Tile tile = tile_at(p, dynamic_tile(p, index));
    const SeqlenInfo seq = seqlen_info(p, tile.batch);
    if (!tile_has_rows(p, seq, tile)) {
      if (kDeviceLengths) skip_tiles_to(p, dynamic_skip(p, index, tile, seq));
      continue;
    }
    const MaskBlockRange range = tile_block_range(p, seq, tile.m_block, tile.split);
    produce_tile(p, sm, tile, seq, local, ring, range, 0u);
    ring += ring_positions(range.count());
    ++local;
  }
  publish_end(sm, local);
  release_tile_counter(p);
}

FJ_DEVICE void produce(const Params& p, const SmemLayout& sm, uint32_t rank) {
  // NOTES: with clusters the grid has one CTA per tile (query blocks padded to whole clusters), so
  // there is no walk to carry: the walk's state spilled 16 bytes of the producer's 24 registers
  // at head dims 192 and 256. The end is still published where consumers wait for it.
  if constexpr (kCluster == 2) {
    const Tile tile = tile_of(p, 0);
    const SeqlenInfo seq = seqlen_info(p, tile.batch);
    produce_tile(p, sm, tile, seq, 0, 0, tile_block_range(p, seq, tile.m_block, tile.split), rank);
    if (kPublishTiles) publish_end(sm, 1);
    return;
  }
  if constexpr (kDynamicSchedule) {
    produce_dynamic(p, sm);
    return;
  }
  // A warp not in use leaves at once rather than wait on every slot with the others (warp 0, the
  // leader, is always in use).
  if (kProducerWarps > 1 && producer_warp() >= producer_warps_in_use(p)) return;
  // kDimSplit: a cluster a tile too (the walk's state spilled 52 bytes of the producer's 24
  // registers at 512/512); a tile past its sequence's queries (varlen) loads nothing, as the walk's.
  if constexpr (kDimSplit > 1) {
    const Tile tile = tile_of(p, 0);
    const SeqlenInfo seq = seqlen_info(p, tile.batch);
    const bool rows = tile_has_rows(p, seq, tile);
    if (rows) produce_tile(p, sm, tile, seq, 0, 0, tile_block_range(p, seq, tile.m_block, tile.split), rank);
    if (kPublishTiles) publish_end(sm, rows ? 1 : 0);
    return;
  }
  int ring = 0, local = 0;
  for (int slot = 0; has_tile(p, slot); ++slot) {
    const Tile tile = tile_of(p, slot);
    const SeqlenInfo seq = seqlen_info(p, tile.batch);
    if (!tile_has_rows(p, seq, tile)) continue;
    const MaskBlockRange range = tile_block_range(p, seq, tile.m_block, tile.split);
    produce_tile(p, sm, tile, seq, local, ring, range, rank);
    ring += ring_positions(range.count());
    ++local;
  }
  if (kPublishTiles) publish_end(sm, local);
}

// ================================================================ consumer
// Per-thread view of the m64 accumulator fragment: this thread owns rows row0 and row0 + 8 of its
// warpgroup's 64 rows; element i sits in row (i/2)%2 and column 8*(i/4) + 2*(lane%4) + i%2.
struct Fragment {
  int lane;
  int row0;  // global query row of accumulator row 0
  FJ_DEVICE static int row_half(int i) { return (i >> 1) & 1; }
  FJ_DEVICE int col(int i) const { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }
};

// How far (log2 units) a block's max may pass the running max before the max moves and O is
// rescaled (FlashAttention-4's conditional rescale): P stays <= 2^8, exact in relative terms.
constexpr float kRescaleSlack = 8.f;

struct SoftmaxState {
  float row_max[2];  // what the exponentials subtract: the running max of S * scale_log2, or up to
                     // kRescaleSlack below it (-inf until a row sees a visible key)
  float row_sum[2];  // this thread's share of the running sum; quad-reduced in the epilogue
};

// Pingpong: a consumer warpgroup issues its GEMMs only in its turn, then passes the turn to the
// next one (a ring of kConsumerWGs). Each turn barrier counts its owner (sync) and the warpgroup
// before it in the ring (arrive): 256 threads.
struct Turn {
  int wg;
  FJ_DEVICE void take() const {
    if (kPingpong) named_barrier_sync(kTurnBarrier + wg, 256);
  }
  FJ_DEVICE void pass() const {
    if (kPingpong) named_barrier_arrive(kTurnBarrier + (wg + 1) % kConsumerWGs, 256);
  }
};

// swizzled_offset: tile_layout.cuh (rendered before this file).

// Q as the A operand of Q K^T. With kQInRegisters its fragments are read from shared memory once
// per tile and each Q K^T reads only K from shared memory (a third fewer bytes); the registers
// (kQKSteps * 4 per thread) fit beside S, O and P up to head dim 128 with two warpgroups and
// block_n 128 (FlashAttention-3's block_n 176 at d128 spilled 512 bytes with them).
// q_reg_dims (kQRegSteps): the paired consumers' scores warpgroup holds Q's first kQRegSteps k16
// steps in registers the same way and reads the rest from shared memory. At 512/512 a 32-key S step
// with both operands in shared memory reads 3 KB for 16 clocks of tensor work, more than shared
// memory's 128 bytes a clock; with Q from registers 1 KB.
constexpr bool kQInRegisters = kConsumerWGs <= 2 && kHeadDim <= 128 && kBlockN <= 128;
static_assert(kQRegSteps == 0 || (kPairedO && !kSeesaw && !kQInRegisters && kQRegSteps <= kQKSteps && kFirstConsumerRegs == 256),
              "q_reg_dims: the hand-over's scores warpgroup, with 256 registers (spec/ and config/ keep to this)");
constexpr int kQFragSteps = kQInRegisters ? kQKSteps : kQRegSteps;  // the k16 steps whose Q is in registers
struct QOperand {
  uint32_t slice;  // this warpgroup's 64 rows of the tile's Q buffer in shared memory
  uint32_t frag[kQFragSteps > 0 ? kQFragSteps : 1][4];

  // The A-operand layout is the accumulator layout: register q of k16 step j holds row
  // row0 + 8 * (q & 1), columns 16 j + 8 * (q >> 1) + 2 (lane % 4) and the next: one ldmatrix.x4
  // per step, lane l addressing row l % 8 + 8 * ((l / 8) & 1) of the warp's 16, columns + 8 * (l / 16).
  // NOTES: t is hidden from the compiler here, else it hoists the swizzled addresses out of the
  // tile walk and keeps them in registers through every main loop (the d128 variant spilled).
  FJ_DEVICE void load(uint32_t q_tile, int wg, int t) {
    if (kQFragSteps == 0) return;
    asm volatile("" : "+r"(t));
    const int lane = t % 32;
    const int row = wg * 64 + (t / 32) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int j = 0; j < kQFragSteps; ++j)
      ldmatrix_x4(frag[j], q_tile + swizzled_offset(row, 16 * j + 8 * (lane >> 4), kBlockM));
  }
};

// S = Q K^T, issued and committed (not waited for). kLanding (chunk_waits=1): each 64-column chunk's
// products once that chunk has landed (chunk_bars: the slot's chunk_full(., 0), this parity); the
// fence follows each wait's branch (else ptxas puts its own in that path and serialises every
// wgmma: C7520).
// [kStepBegin, kStepEnd): the k steps issued (all of them but where a caller issues S in parts; the
// first part starts the accumulation).
template <bool kLanding = false, int kStepBegin = 0, int kStepEnd = kQKSteps>
FJ_DEVICE void issue_scores(float (&s)[kBlockN / 2], const QOperand& q, uint32_t k_tile, uint32_t chunk_bars = 0, uint32_t parity = 0) {
  static_assert(!kLanding || !kQInRegisters, "chunk_waits: Q from shared memory");
  if constexpr (kLanding) asm volatile("" : "+r"(chunk_bars));
  const TileDesc k_desc(k_tile, 16, 1024), q_desc(q.slice, 16, 1024);
  if constexpr (!kLanding) wgmma_fence();
#pragma unroll
  for (int k = kStepBegin; k < kStepEnd; ++k) {
    if (kLanding && k % 4 == 0) {
      mbar_wait(chunk_bars + 8u * (k / 4), parity);
      wgmma_fence();
    }
    // K-major, 128-byte swizzle: a k16 step is +32 B inside the 128-B row; every 4 steps the next chunk.
    const uint32_t k_off = (k / 4) * (kBlockN * 128) + (k % 4) * 32;
    if (k < kQFragSteps) {
      wgmma_qk_rs(s, q.frag[k < kQFragSteps ? k : 0], k_desc.at(k_off), k > 0);
    } else {
      const uint32_t q_off = (k / 4) * (kBlockM * 128) + (k % 4) * 32;
      wgmma_qk(s, q_desc.at(q_off), k_desc.at(k_off), k > 0);
    }
  }
  wgmma_commit();
}

// P as the P V GEMM's A operand: a k16 step's four registers (16-bit), or a k32 step's (e4m3).
constexpr int kPvSteps = kFp8Operands ? kBlockN / 32 : kBlockN / 16;
using PvOperand = uint32_t[kPvSteps][4];

// O += P V, issued and committed (not waited for). P is already in the A-operand layout.
FJ_DEVICE void issue_pv(float (&o)[kVCols / 2], const PvOperand& p, uint32_t v_tile) {
  if constexpr (kFp8Operands) {
    // V transposed [kVCols][128-key chunks] is K-major for B, as K is for Q K^T: a k32 step is +32 B
    // inside the 128-byte row, every 4 steps the next chunk.
    const TileDesc v_desc(v_tile, 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) wgmma_pv(o, p[j], v_desc.at((j / 4) * (kVCols * 128) + (j % 4) * 32));
    wgmma_commit();
    return;
  }
  const TileDesc v_desc(v_tile, kBlockN * 128, 1024);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < kBlockN / 16; ++j) {
    // V [kBlockN][64-col chunks] is MN-major for B: leading offset = chunk stride, k16 step = 16 rows.
    wgmma_pv(o, p[j], v_desc.at(j * 2048));
  }
  wgmma_commit();
}

// ================================================================ scores -> probabilities
// What a block's scores go through before the exponentials, for every softmax path (the full
// online softmax, the fast path against the running max and its recompute): the rendered score
// modifier (kernel_score_mod.cuh: softcap, ALiBi) on every block, then the visibility rule on the
// blocks that need it.
struct ScoreRule {
  int seqlen_q, seqlen_k;  // the tile's sequence
  int pack_shift;          // packed heads: a row's query is row >> pack_shift
  MaskRule mask_rule;      // the rendered Mask's rule (read only where Mask::kTwoSided)
  ScoreMod score_mod;      // this thread's rows' (consume_tile: tile_score_mod)
  float qk_descale;        // FP8 operands: the tile's q_descale x k_descale (FlashAttention-3's)

  // The exp2 step's factor: the scale (and log2 e), with FP8 operands times the tile's descales.
  FJ_DEVICE float scale_log2(const Params& p) const { return kFp8Operands ? p.scale_log2 * qk_descale : p.scale_log2; }

  // Per row: the last visible key (visibility.cuh), and with a two-sided mask the first,
  // relative to this thread's first column in the block, so each element compares a constant
  // offset against one or two of four registers.
  FJ_DEVICE void mask(float (&s)[kBlockN / 2], const Fragment& f, int n) const {
    const int first_col = n * kBlockN + f.col(0);
    int last_visible[2], first_visible[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // NOTES: the shift written out here, not as a member function: calling one kept the rule's
      // fields in memory and the d64 three-warpgroup kernel spilled 8 bytes.
      const int query = kPackGQA ? (f.row0 + 8 * r) >> pack_shift : f.row0 + 8 * r;
      if constexpr (Mask::kTwoSided) {
        last_visible[r] = last_visible_key(mask_rule, query, seqlen_q, seqlen_k) - first_col;
        first_visible[r] = first_visible_key(mask_rule, query, seqlen_q, seqlen_k) - first_col;
      } else {
        last_visible[r] = last_visible_key(kCausal, query, seqlen_q, seqlen_k) - first_col;
      }
    }
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) {
      const int offset = f.col(i) - f.col(0);
      if (offset > last_visible[Fragment::row_half(i)]) s[i] = FJ_NEG_INF;
      if constexpr (Mask::kTwoSided) {
        if (offset < first_visible[Fragment::row_half(i)]) s[i] = FJ_NEG_INF;
      }
    }
  }

  template <bool kMasked>
  FJ_DEVICE void apply(float (&s)[kBlockN / 2], const Fragment& f, int n, const Params& p) const {
    score_mod.apply(s, f, n, p);
    if (kMasked) mask(s, f, n);
  }
};

// Online softmax of one block: updates the running max and sum, turns S into P (in place) and
// returns the factor by which O must be rescaled.
template <bool kMasked>
FJ_DEVICE void online_softmax(float (&s)[kBlockN / 2], SoftmaxState& st, float scale_log2, float (&correction)[2],
                              float slack = kRescaleSlack) {
  // Row maxima over this thread's elements in two independent chains per row (a single chain is
  // kBlockN / 4 dependent instructions long, and two warps per scheduler cannot hide that).
  float partial[2][2] = {{FJ_NEG_INF, FJ_NEG_INF}, {FJ_NEG_INF, FJ_NEG_INF}};
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) partial[Fragment::row_half(i)][(i >> 2) & 1] = fmaxf(partial[Fragment::row_half(i)][(i >> 2) & 1], s[i]);
  float block_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) block_max[r] = fmaxf(partial[r][0], partial[r][1]);
  float offset[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // A row is spread over the 4 lanes of a quad.
    block_max[r] = fmaxf(block_max[r], __shfl_xor_sync(0xffffffffu, block_max[r], 1));
    block_max[r] = fmaxf(block_max[r], __shfl_xor_sync(0xffffffffu, block_max[r], 2));
    // The running max moves only when the block's max passes it by more than kRescaleSlack
    // (log2 units): below that the stale max keeps every exponential <= 2^kRescaleSlack, which
    // the fp32 sums and the 16-bit P hold with their usual relative precision, and O needs no
    // rescale. With a row's first visible key it always moves (-inf + slack = -inf).
    const float block_top = block_max[r] * scale_log2;
    const bool moves = block_top > st.row_max[r] + slack;
    const float new_max = moves ? block_top : st.row_max[r];
    // NOTES: a row with no visible key yet keeps max -inf; subtracting 0 instead keeps exp2 at 0
    // rather than NaN (-inf - -inf). Unmasked blocks always give a finite max, so only masked ones check.
    offset[r] = (kMasked && new_max == FJ_NEG_INF) ? 0.f : new_max;
    correction[r] = moves ? fast_exp2(st.row_max[r] - new_max) : 1.f;
    st.row_max[r] = new_max;
    st.row_sum[r] *= correction[r];
  }
  float sums[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const int r = Fragment::row_half(i);
    s[i] = fast_exp2(fmaf(s[i], scale_log2, -offset[r]));  // the scale folded into one FFMA
    sums[r][(i >> 2) & 1] += s[i];
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) st.row_sum[r] += sums[r][0] + sums[r][1];
}

// Unmasked blocks: the exponentials against the running max as it stands, without the block's
// max (64 FMNMX, 4 shuffles and the rescale bookkeeping per block at block_n 128). Each P is at
// most this thread's partial row sum, so when every partial sum in the warpgroup is at most
// 2^kRescaleSlack every P is what the slack allows, exactly as if the max had been taken and had
// not moved: the block is done (true, and O owes no factor). Otherwise (a max that jumped past the
// slack; a row's first keys: -inf gives inf) P has overwritten S, and the caller recomputes S
// and takes the full path (false, state untouched).
// NOTES: the verdict is the whole warpgroup's (a named-barrier vote, not a warp vote): the
// recompute is a wgmma, which all four warps must issue together (a warp-level verdict hung the
// causal kernels, whose first unmasked block often moves a max set by a few keys).
// At head dim 256 (O takes 128 registers) the recompute path spilled 60-72 bytes until it hid its
// operands' addresses (see recompute_scores_and_probs); there it runs without the causal mask only:
// on the H200 it gained 0-3 % without the mask and was level with it (bench/NOTES.md, 51).
// With a two-sided mask (window, chunk) its masked steps at both ends leave no registers for it at
// head dim 256 either (168 bytes spilled without the causal mask).
// A score modifier's per-score work leaves no registers for it with three consumer warpgroups (d64:
// 16 bytes spilled with the softcap), nor does one that holds registers for its rows (ALiBi's
// slopes and positions: 128-590 bytes spilled at head dims 96-256). With the softcap and two
// warpgroups it fits, and the hot path of a block is 85-320 instructions shorter (d64-d256).
// kDimSplit: not there (a recompute would need the peer's half of the scores again).
constexpr bool kExpAgainstRunningMax = (kVCols < 256 || !(kCausal || Mask::kTwoSided)) && !(ScoreMod::kScoreWork && (kConsumerWGs > 2 || ScoreMod::row_registers())) &&
                                       kDimSplit == 1;
FJ_DEVICE bool probs_against_running_max(float (&s)[kBlockN / 2], const ScoreRule& rule, const Fragment& f, int n,
                                         SoftmaxState& st, const Params& p, float (&correction)[2], int wg) {
  const float scale_log2 = rule.scale_log2(p);
  rule.apply<false>(s, f, n, p);
  float sums[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) {
    const int r = Fragment::row_half(i);
    s[i] = fast_exp2(fmaf(s[i], scale_log2, -st.row_max[r]));
    sums[r][(i >> 2) & 1] += s[i];
  }
  const float block_sum[2] = {sums[0][0] + sums[0][1], sums[1][0] + sums[1][1]};
  constexpr float kLargestSum = float(1u << int(kRescaleSlack));  // inf and NaN fail the test too
  if (!named_barrier_all(kVoteBarrier + wg, 128, block_sum[0] <= kLargestSum && block_sum[1] <= kLargestSum)) return false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.row_sum[r] += block_sum[r];
    correction[r] = 1.f;
  }
  return true;
}

// The full path: the rule, then the online softmax (slack 0: the max moves to the block's own).
template <bool kMasked>
FJ_DEVICE void scores_to_probs(float (&s)[kBlockN / 2], const ScoreRule& rule, const Fragment& f, int n,
                               SoftmaxState& st, const Params& p, float (&correction)[2], float slack = kRescaleSlack) {
  rule.apply<kMasked>(s, f, n, p);
  online_softmax<kMasked>(s, st, rule.scale_log2(p), correction, slack);
}

// P in the accumulator layout is already the A-operand layout: k16 chunk j = p[8j .. 8j+7]. With
// FP8 operands a k32 step's register q (rows 8 (q & 1) on, positions 16 (q >> 1) + 4 l ..) takes
// this thread's keys {2l, 2l+1, 8+2l, 9+2l} of that 16 as they are (see transposed_key).
FJ_DEVICE void pack_probs(PvOperand& a, const float (&p)[kBlockN / 2]) {
  if constexpr (kFp8Operands) {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = 16 * j + 8 * (q >> 1) + 2 * (q & 1);
        a[j][q] = pack_e4m3x4(p[i], p[i + 1], p[i + 4], p[i + 5]);
      }
    return;
  }
#pragma unroll
  for (int j = 0; j < kBlockN / 16; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) a[j][q] = pack2(p[8 * j + 2 * q], p[8 * j + 2 * q + 1]);
}

// NOTES: the running maxima move rarely (only by more than kRescaleSlack), so most blocks' factor is
// exactly 1; the warp then skips the kVCols/2 multiplies (a uniform branch, same result).
FJ_DEVICE void rescale(float (&o)[kVCols / 2], const float (&correction)[2]) {
  if (!__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) return;
#pragma unroll
  for (int i = 0; i < kVCols / 2; ++i) o[i] *= correction[Fragment::row_half(i)];
}

// Zeroes the rows of a V slot ([kChunks][kBlockN][128 B]) from its block's first key past the
// sequence's end (valid: the block's keys in it, below kBlockN), the warpgroup's 128 threads
// together, then the fence for the P Vs' async-proxy reads and the warpgroup's barrier (every
// thread's zeros before its own P V). Consumer::clear_v_past_keys says why.
template <int kChunks>
FJ_DEVICE void zero_slot_rows_past_keys(uint32_t slot, int valid, uint32_t barrier) {
  const int first = max(valid, 0), units = (kBlockN - first) * 8;  // 16-byte units of whole rows
#pragma unroll 1
  for (int u = (int)(threadIdx.x % 128); u < kChunks * units; u += 128) {
    const int chunk = u / units, unit = u - chunk * units;
    const uint32_t at = slot + chunk * (kBlockN * 128) + (first + unit / 8) * 128 + (unit % 8) * 16;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" :: "r"(at), "r"(0u) : "memory");
  }
  fence_proxy_async_smem();  // the zeros, then the P Vs' async-proxy reads (and the ring's next TMA)
  named_barrier_sync(barrier, 128);
}

// kDimSplit: this CTA's partial scores of a block (its half of the head dim) plus the peer CTA's,
// which took the other half for the same rows and keys: each thread sends its fragment to the
// peer's inbox (send_partial_scores: st.async, counted on the peer warp's filled barrier), then adds
// the peer's from its own (add_peer_scores), in the same order of operands on both sides (own +
// peer: fp32 addition commutes), so both CTAs hold the same scores, masks, maxima and sums, and
// each its half of O from them.
// NOTES (correctness): exchange number e (the block's ring position: both CTAs walk the same
// tiles) completes phase e of each warp's filled barrier: our warp's arrival with its rows' bytes
// expected and the peer warp's bytes, in either order (the transaction count may go below zero
// meanwhile); a warp waits for its own rows alone (one barrier a warpgroup measured 3 % slower). Before
// sending exchange e we wait for phase e - 1 of our taken barrier, the peer's four warps arriving
// once each has read its inbox (each warp after __syncwarp, its lanes' reads before its arrival),
// so no send overwrites scores not yet read; exchange 0 waits on parity 1, which a fresh barrier
// passes. Both waits and the arrival take the barriers' default (CTA-scope) semantics, as cluster=2's
// multicast ring does: the peer's bytes count on our own barrier, and our arrival follows our reads
// of the inbox in program order. Cluster scope cost 40 % of the speed (H100, 2026-12-06): the
// acquire invalidated L1 (CCTL.IVALL) at every wait, and the release waited at ERRBAR for the
// warp's st.async to the peer.
// NOTES: the area's address and the thread's index are hidden from ptxas in each, else it keeps
// the inbox and barrier addresses through the main loops and the consumers spilled 40-68 bytes.
struct ScoreExchange {
  uint32_t area, t;
  FJ_DEVICE static ScoreExchange at(const SmemLayout& sm) {
    ScoreExchange x{sm.handover, threadIdx.x};
    asm volatile("" : "+r"(x.area), "+r"(x.t));
    x.t %= 128u;
    return x;
  }
};

FJ_DEVICE void send_partial_scores(const SmemLayout& sm, const float (&s)[kBlockN / 2], int wg, int exchange) {
  const ScoreExchange x = ScoreExchange::at(sm);
  const uint32_t peer = cluster_cta_rank() ^ 1u, filled = SmemLayout::score_filled(x.area, wg, x.t / 32u);
  mbar_wait(SmemLayout::score_taken(x.area, wg), ((uint32_t)exchange & 1u) ^ 1u);
  const uint32_t to = map_to_cta(SmemLayout::score_inbox(x.area, wg) + SmemLayout::score_unit(x.t), peer), to_filled = map_to_cta(filled, peer);
#pragma unroll
  for (int k = 0; k < kBlockN / 8; ++k) st_async_v4(to + k * 512u, s[4 * k], s[4 * k + 1], s[4 * k + 2], s[4 * k + 3], to_filled);
  if (x.t % 32u == 0) mbar_arrive_expect_tx(filled, (uint32_t)score_inbox_bytes(kBlockN) / 4);
}

FJ_DEVICE void add_peer_scores(const SmemLayout& sm, float (&s)[kBlockN / 2], int wg, int exchange) {
  const ScoreExchange x = ScoreExchange::at(sm);
  const uint32_t inbox = SmemLayout::score_inbox(x.area, wg) + SmemLayout::score_unit(x.t);
  mbar_wait(SmemLayout::score_filled(x.area, wg, x.t / 32u), (uint32_t)exchange & 1u);
#pragma unroll
  for (int k = 0; k < kBlockN / 8; ++k) {
    float a, b, c, d;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "r"(inbox + k * 512u) : "memory");
    s[4 * k] += a, s[4 * k + 1] += b, s[4 * k + 2] += c, s[4 * k + 3] += d;
  }
  __syncwarp();
  if (x.t % 32 == 0) mbar_arrive_cluster(SmemLayout::score_taken(x.area, wg), cluster_cta_rank() ^ 1u);
}

struct Consumer {
  const Params& p;
  const SmemLayout& sm;
  Fragment f;
  Turn turn;
  QOperand q;
  bool leader;  // thread 0 of the warpgroup: releases ring slots for it
  int n_blocks;
  int ring;       // ring position of this tile's first K/V block
  uint32_t rank;  // this CTA's rank in its cluster
  int local;      // this CTA's tile number (which hand-off barriers)
  int n_max;      // the tile's blocks are n_max - n_blocks .. n_max - 1, walked right to left
  ScoreRule rule;

  FJ_DEVICE int block_of(int it) const { return n_max - 1 - it; }
  FJ_DEVICE int stage(int it) const { return stage_of(ring + it); }
  FJ_DEVICE uint32_t phase(int it) const { return phase_of(ring + it); }

  // Frees a ring slot: in a cluster, in every CTA, since every CTA's producer writes into it.
  FJ_DEVICE void release(uint32_t empty_bar) const {
    if (!leader) return;
    mbar_arrive(empty_bar);
    if (kCluster == 2) mbar_arrive_cluster(empty_bar, rank ^ 1);
  }
  // K(it) and V(it) once this warpgroup is done with them, except the last block's slot in which
  // it stages O (kStageOInKV: warpgroup 0 in the K slot, 1 in the V slot): the epilogue frees that
  // one, after the other warpgroup has said it is done reading it (kSlotHandOff).
  FJ_DEVICE void release_k(int it) const {
    const bool last = kStageOInKV && it == n_blocks - 1;
    if (!(last && turn.wg == 0)) release(sm.empty_k(stage(it)));
    if (kSlotHandOff && last && turn.wg == 1) named_barrier_arrive(last_k_read_barrier(local), 256);
  }
  FJ_DEVICE void release_v(int it) const {
    const bool last = kStageOInKV && it == n_blocks - 1;
    if (!(last && turn.wg == 1)) release(sm.empty_v(stage(it)));
    if (kSlotHandOff && last && turn.wg == 0) named_barrier_arrive(last_v_read_barrier(local), 256);
  }
  // kStageOInKV: the tile's Q buffer is free once its last Q K^T is done (with Q in registers, its
  // first: that wgmma completing means all four warps have read their fragments), so the next
  // tile's Q loads during this tile's last blocks and epilogue.
  FJ_DEVICE void release_q_after_scores(int it) const {
    if (kStageOInKV && it == (kQInRegisters ? 0 : n_blocks - 1) && leader) mbar_arrive(sm.empty_q(0));
  }

  // NOTES: ptxas takes the PV wait for free and hoisted it to just after the row max, so the whole
  // softmax ran after the PV had finished: no overlap at all (seen in SASS, every head dim). It keeps
  // the wait below an earlier shared-memory store, and this one (one thread per warpgroup, to a word
  // of its own that nobody reads) needs every exponential through the row sums.
  FJ_DEVICE void pin_wait_below(const SoftmaxState& st) const {
    if (leader) asm volatile("st.shared.f32 [%0], %1;" :: "r"(sm.order_word(turn.wg)), "f"(st.row_sum[0] + st.row_sum[1]) : "memory");
  }

  // Block it's scores complete: with kDimSplit, the peer CTA's half added (send_partial_scores,
  // add_peer_scores).
  FJ_DEVICE void complete_scores(int it, float (&probs)[kBlockN / 2]) const {
    if constexpr (kDimSplit > 1) {
      send_partial_scores(sm, probs, turn.wg, ring + it);
      add_peer_scores(sm, probs, turn.wg, ring + it);
    }
  }

  // The rare unmasked block whose exponentials against the running max did not fit the slack:
  // S(it) again from K(it), still in its slot (out of turn, and waiting for the PV in flight too),
  // then the full softmax. The max moves to the block's own (no slack), so that the blocks after
  // it, like it, take the short path again.
  // NOTES: at head dim 256 the operands' addresses are hidden from ptxas here, else it keeps this
  // path's descriptors live through the whole loop and spills five loop-invariant words there.
  FJ_DEVICE void recompute_scores_and_probs(int it, float (&probs)[kBlockN / 2], SoftmaxState& st,
                                            float (&pending)[2]) const {
    if constexpr (kVCols >= 256) {
      uint32_t k_tile = sm.k_stage(stage(it));
      QOperand q_again = q;
      asm volatile("" : "+r"(k_tile), "+r"(q_again.slice));
      issue_scores(probs, q_again, k_tile);
    } else {
      issue_scores(probs, q, sm.k_stage(stage(it)));
    }
    wgmma_wait<0>();
    fence_registers(probs);
    scores_to_probs<false>(probs, rule, f, block_of(it), st, p, pending, 0.f);
  }

  // NOTES (correctness): V rows past the sequence's last key in its last block hold whatever the
  // cache holds there (a dense cache past seqused_k, a page's unused slots, packed rows past the
  // last sequence): P is 0 there, but 0 x NaN is NaN in the PV GEMM. So the warpgroup zeroes those
  // rows of the slot before the block's PV (FlashAttention-2 zero-fills them as it loads;
  // FlashAttention-3 does not: flash-attention issues 1745 and 2374). K needs nothing: the mask
  // selects -inf over any score. Only with lengths on the device: a dense launch's rows past
  // seqlen_k lie outside the tensor map, which TMA fills with zeros. The block is a tile's first
  // (right to left) and masked, so the unmasked loop does not see this. With two warpgroups both
  // zero the same rows (each before its own PV): the later one writes zeros over zeros.
  FJ_DEVICE void clear_v_past_keys(int it) const {
    if constexpr (kDeviceLengths && !kFp8Operands) {  // FP8 operands: the producer's staged zeros
      const int valid = rule.seqlen_k - block_of(it) * kBlockN;  // this block's keys in the sequence
      if (valid >= kBlockN) return;
      mbar_wait(sm.full_v(stage(it)), phase(it));
      zero_slot_rows_past_keys<kVChunks>(sm.v_stage(stage(it)), valid, kEpilogueBarrier + turn.wg);
    }
  }

  // S(it) alone, nothing overlapping it: the first block, and the masked blocks after it (see
  // consume_tile). Leaves P(it) in probs (fp32) and in pending the factor O owes before P(it) V(it).
  template <bool kMasked>
  FJ_DEVICE void scores_alone(int it, float (&probs)[kBlockN / 2], float (&pending)[2], SoftmaxState& st) {
    turn.take();
    mbar_wait(sm.full_k(stage(it)), phase(it));
    issue_scores(probs, q, sm.k_stage(stage(it)));
    turn.pass();
    wgmma_wait<0>();
    fence_registers(probs);
    release_k(it);
    release_q_after_scores(it);
    complete_scores(it, probs);
    scores_to_probs<kMasked>(probs, rule, f, block_of(it), st, p, pending);
    if constexpr (kMasked) clear_v_past_keys(it);
  }

  // Block it: O += P(it-1) V(it-1) and S(it) = Q K(it) in flight together; the softmax of S(it)
  // runs while the PV does. On entry probs holds P(it-1) (fp32) and pending the factor O still
  // owes for it; on exit probs holds P(it) and pending its factor.
  // NOTES: between the PV's issue and its wait nothing may write a register the PV reads: P(it-1)
  // is packed before the turn and O rescaled before the PV's issue (behind the Q K^T, which does
  // not touch O). Packing P(it) into the PV's operand registers after the softmax made ptxas put
  // the PV wait above the softmax (seen in the SASS).
  template <bool kMasked>
  FJ_DEVICE void overlapped_block(int it, float (&o)[kVCols / 2], float (&probs)[kBlockN / 2], float (&pending)[2],
                                  SoftmaxState& st) {
    const int s = stage(it), sv = stage(it - 1);
    PvOperand prev_p;
    pack_probs(prev_p, probs);  // before our turn (ptxas moves part of it past the barrier)
    turn.take();
    mbar_wait(sm.full_k(s), phase(it));
    issue_scores(probs, q, sm.k_stage(s));  // probs' registers now hold S(it)
    rescale(o, pending);                    // behind Q K^T, which does not touch O
    mbar_wait(sm.full_v(sv), phase(it - 1));
    issue_pv(o, prev_p, sm.v_stage(sv));
    turn.pass();
    wgmma_wait<1>();  // S(it) done, PV still running
    fence_registers(probs);
    if constexpr (kDimSplit > 1) {
      // The peer's half of S(it) arrives while P(it-1) V(it-1) finishes; P(it-1)'s operand
      // registers are free before the peer's scores are read (at 64-key blocks the consumers spilled
      // 100-260 bytes with both live).
      release_k(it);
      release_q_after_scores(it);
      send_partial_scores(sm, probs, turn.wg, ring + it);
      wgmma_wait<0>();  // PV(it-1) done
      fence_registers(o);
      release_v(it - 1);
      add_peer_scores(sm, probs, turn.wg, ring + it);
      scores_to_probs<kMasked>(probs, rule, f, block_of(it), st, p, pending);
      return;
    } else if constexpr (kMasked || !kExpAgainstRunningMax) {
      release_k(it);
      release_q_after_scores(it);
      scores_to_probs<kMasked>(probs, rule, f, block_of(it), st, p, pending);
    } else {
      // K(it) stays until the exponentials pass: the rare block that fails recomputes S from it.
      if (!probs_against_running_max(probs, rule, f, block_of(it), st, p, pending, turn.wg)) recompute_scores_and_probs(it, probs, st, pending);
      release_k(it);
      release_q_after_scores(it);
    }
    pin_wait_below(st);
    wgmma_wait<0>();  // PV(it-1) done
    fence_registers(o);
    release_v(it - 1);
  }

  // O += P(it) V(it) alone, waited for: the tile's last block, and a masked block before the next.
  FJ_DEVICE void pv_alone(int it, float (&o)[kVCols / 2], const float (&probs)[kBlockN / 2], const float (&pending)[2]) {
    PvOperand prev_p;
    pack_probs(prev_p, probs);
    rescale(o, pending);
    turn.take();
    mbar_wait(sm.full_v(stage(it)), phase(it));
    issue_pv(o, prev_p, sm.v_stage(stage(it)));
    turn.pass();
    wgmma_wait<0>();
    fence_registers(o);
    release_v(it);
  }
};

// ================================================================ paired consumers (v_in_k=1, paired=1)
// MLA's absorbed decode: the tile's 64 rows (packed heads x queries) against a latent K whose first
// kHeadDimV columns are V. O (512 columns) is two wgmma N's: warpgroup 0 computes S = Q K^T, the
// softmax and O's first half from P in registers, and hands P (16-bit) and each row's rescale factor
// to warpgroup 1 through shared memory, which computes O's second half from them; both read V from
// K's slot (pv_slot). No score is computed twice (with O in parts each part's tile recomputes Q K^T:
// 1.53x the useful FLOPs at 576/512) and each block is loaded once for both halves. paired=1 is the
// same with V in its own ring (head dims 384 and 512): warpgroup 0 frees K's slot once S is done,
// warpgroup 1 once it has P (it never reads K); each frees V's slot after its P V.
// Per block it, warpgroup 0: S(it) and P(it-1) V(it-1) in flight together, the softmax of S(it)
// while that P V runs, then P(it) into the hand-over area once warpgroup 1 has read P(it-1)
// (kPEmptyBarrier), and kPFullBarrier. Warpgroup 1: kPFullBarrier, P(it) and its factors read into
// registers (ldmatrix), kPEmptyBarrier, rescale, P(it) V(it) with P from registers. A slot is free
// once both warpgroups are done with it (two empty arrivals: with v_in_k=1 K's after each P V, or
// with half_release=1 one each on its own part's barrier; with paired=1 K's after S and the
// hand-over, V's after each P V).
// NOTES (correctness): warpgroup 1 arrives on kPEmptyBarrier once before its first tile and
// warpgroup 0 syncs once more after its last (consume), so every hand-over waits for the previous
// one's reader, across tiles too.

// Where block it's V is for the paired consumers: K's slot (v_in_k=1: its first kHeadDimV columns)
// or V's; its full barrier (with v_in_k=1 K's, which warpgroup 0 waited for before the scores);
// this warpgroup's release of it.
FJ_DEVICE uint32_t pv_slot(const Consumer& c, int it) { return kVInK ? c.sm.k_stage(c.stage(it)) : c.sm.v_stage(c.stage(it)); }
FJ_DEVICE void wait_pv_slot(const Consumer& c, int it) {
  if constexpr (kChunkWaits) {  // warpgroup 1's columns' chunks
#pragma unroll
    for (int k = kVChunks; k < 2 * kVChunks; ++k) mbar_wait(c.sm.chunk_full(c.stage(it), k), c.phase(it));
  } else {
    mbar_wait(kVInK ? c.sm.full_k(c.stage(it)) : c.sm.full_v(c.stage(it)), c.phase(it));
  }
}
// A barrier that says block it's K has landed (chunk_waits=1: its last chunk's).
FJ_DEVICE uint32_t k_landed(const Consumer& c, int it) {
  return kChunkWaits ? c.sm.chunk_full(c.stage(it), kQKChunks - 1) : c.sm.full_k(c.stage(it));
}
// half_release=1: warpgroup 1's part of the latent slot has its own barrier (see ReleaseHalves).
FJ_DEVICE void release_pv_slot(const Consumer& c, int it, bool second = false) {
  c.release(kVInK && !(kHalfRelease && second) ? c.sm.empty_k(c.stage(it)) : c.sm.empty_v(c.stage(it)));
}

// V's rows past the sequence's last key (see Consumer::clear_v_past_keys): warpgroup 0 zeroes them
// (with v_in_k=1 once its Q K^T has read them: the mask took their scores) before either P V reads
// them (warpgroup 1's after the hand-over, which orders these stores). Only a tile's first block
// (right to left) can be short.
FJ_DEVICE void clear_slot_rows_past_keys(const Consumer& c, int it) {
  if constexpr (kDeviceLengths) {
    const int valid = c.rule.seqlen_k - c.block_of(it) * kBlockN;  // this block's keys in the sequence
    if (valid >= kBlockN) return;
    if (!kVInK) wait_pv_slot(c, it);
    zero_slot_rows_past_keys<2 * kVChunks>(pv_slot(c, it), valid, kEpilogueBarrier);  // V's columns: both halves
  }
}

// The seesaw's first block (A of the first pair, in slot 0): the same, by warpgroup 0 before its
// P V, after its S(A); warpgroup 1 reads V(A)_R after the P(A) hand-over, which orders these stores.
FJ_DEVICE void clear_first_block_rows_past_keys(const Consumer& c) {
  if constexpr (kDeviceLengths) {
    const int valid = c.rule.seqlen_k - c.block_of(0) * kBlockN;
    if (valid >= kBlockN) return;
    zero_slot_rows_past_keys<2 * kVChunks>(c.sm.k_stage(0), valid, kEpilogueBarrier);
  }
}

// Warpgroup 0: P(it) (16-bit, swizzled as a K-major A operand: [64 rows][64 keys], as O is staged)
// and the factor O owes before P(it) V(it) into the hand-over area; with the tile's last block also
// the rows' final max and sum, for warpgroup 1's epilogue.
// P (16-bit) into a [64 rows][kBlockN keys] tile of one 128-byte swizzled chunk, as a K-major A
// operand (the layout O is staged in), by this warpgroup's 128 threads.
FJ_DEVICE void store_probs_tile(uint32_t tile, const float (&probs)[kBlockN / 2], int t) {
  const int lane = t % 32;
  const int row = (t / 32) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
  for (int g = 0; g < kBlockN / 16; ++g) {
    uint32_t packed[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) packed[m] = pack2(probs[8 * g + 2 * m], probs[8 * g + 2 * m + 1]);
    stmatrix_x4(tile + swizzled_offset(row, 16 * g + 8 * (lane >> 4), kBlockM), packed[0], packed[1], packed[2], packed[3]);
  }
}

// Warpgroup 1: P back from the hand-over tile into registers, in the A-operand layout: each thread
// reads what the same thread of warpgroup 0 stored (ldmatrix undoes stmatrix at the same address),
// which is that thread's pack_probs of P.
FJ_DEVICE void load_probs_tile(PvOperand& a, uint32_t tile, int t) {
  const int lane = t % 32;
  const int row = (t / 32) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
  for (int g = 0; g < kBlockN / 16; ++g) ldmatrix_x4(a[g], tile + swizzled_offset(row, 16 * g + 8 * (lane >> 4), kBlockM));
}

FJ_DEVICE void hand_over_probs(const Consumer& c, const float (&probs)[kBlockN / 2], const float (&pending)[2],
                               const SoftmaxState& st, bool last, int t) {
  named_barrier_sync(kPEmptyBarrier, 256);  // warpgroup 1's P V has read the previous P
  store_probs_tile(c.sm.p_tile(), probs, t);
  const int lane = t % 32;
  const int my_row = (t / 32) * 16 + lane / 4;  // this thread's accumulator rows: my_row, my_row + 8
  float sum[2] = {0.f, 0.f};
  if (last) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] = st.row_sum[r];
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
    }
  }
  if ((lane & 3) == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      asm volatile("st.shared.f32 [%0], %1;" :: "r"(c.sm.row_factor(my_row + 8 * r)), "f"(pending[r]) : "memory");
      if (last) {
        asm volatile("st.shared.f32 [%0], %1;" :: "r"(c.sm.row_final_max(my_row + 8 * r)), "f"(st.row_max[r]) : "memory");
        asm volatile("st.shared.f32 [%0], %1;" :: "r"(c.sm.row_final_sum(my_row + 8 * r)), "f"(sum[r]) : "memory");
      }
    }
  }
  // No proxy fence: warpgroup 1 reads P with ldmatrix (the generic proxy), ordered by the barrier;
  // V's rows zeroed past the keys were fenced where they were written (zero_slot_rows_past_keys).
  // (A wgmma reading P from shared memory needs the fence, and its wait sits on this warpgroup's path
  // every block: bench/NOTES.md, 2026-12-07.)
  named_barrier_arrive(kPFullBarrier, 256);
}

// Warpgroup 0's block it > 0: P(it-1) V(it-1) (V's first kVCols columns of K's slot) and S(it) in
// flight together, the P V first: its slot is released as soon as it completes, while S(it) still
// runs, then the softmax of S(it) and P(it) handed over. On entry probs holds P(it-1) and pending
// its factor; on exit P(it) and its.
// NOTES: the slot's release is what paces the ring (two 72 KB stages: K(it+1) loads only once slot
// it-1 is free); releasing it after the softmax of S(it), with the P V issued behind S(it), left the
// next block's load no time (the measured H100 decode ran at 40 % of the tensor cores). No branch
// between a wgmma's issue and its wait (the masked and unmasked blocks are separate instances, as in
// Consumer::overlapped_block): a branch there made ptxas serialise every wgmma of the kernel (C7518).
// Q's address is hidden from ptxas each block, else it keeps the 36 k steps' descriptors live
// through the loop (spilled, as in recompute_scores_and_probs).
template <bool kMasked>
FJ_DEVICE void paired_first_step(Consumer& c, int it, float (&o)[kVCols / 2], float (&probs)[kBlockN / 2], float (&pending)[2],
                                 SoftmaxState& st, int t) {
  const int s = c.stage(it);
  PvOperand prev_p;
  pack_probs(prev_p, probs);
  rescale(o, pending);
  if (!kVInK) wait_pv_slot(c, it - 1);
  issue_pv(o, prev_p, pv_slot(c, it - 1));  // V(it-1): the first kVChunks chunks of its slot
  if constexpr (kEarlyRelease) {
    // S(it)'s first chunk, then slot it-1 back once P(it-1) V(it-1) is done, then the rest of S(it)
    // as it lands: the slot's next load (K(it+1)) runs beside S(it)'s later chunks. Released after
    // the whole of S(it) has been issued (below), K(it+1)'s load cannot start before K(it) has landed.
    QOperand q = c.q;
    asm volatile("" : "+r"(q.slice));  // (see above)
    issue_scores<true, 0, 4>(probs, q, c.sm.k_stage(s), c.sm.chunk_full(s, 0), c.phase(it));  // probs' registers now hold S(it)
    wgmma_wait<1>();  // P(it-1) V(it-1) done, S(it)'s first chunk still running
    fence_registers(o);
    release_pv_slot(c, it - 1);
    issue_scores<true, 4>(probs, q, c.sm.k_stage(s), c.sm.chunk_full(s, 0), c.phase(it));
  } else {
    if constexpr (kChunkWaits) {
      QOperand q = c.q;
      asm volatile("" : "+r"(q.slice));  // (see above)
      issue_scores<true>(probs, q, c.sm.k_stage(s), c.sm.chunk_full(s, 0), c.phase(it));  // probs' registers now hold S(it)
    } else {
      mbar_wait(c.sm.full_k(s), c.phase(it));
      QOperand q = c.q;
      asm volatile("" : "+r"(q.slice));         // (see above)
      issue_scores(probs, q, c.sm.k_stage(s));  // probs' registers now hold S(it)
    }
    wgmma_wait<1>();  // P(it-1) V(it-1) done, S(it) still running
    fence_registers(o);
    release_pv_slot(c, it - 1);
  }
  wgmma_wait<0>();
  fence_registers(probs);
  if (c.leader) mbar_arrive(c.sm.scores_done());  // (see consume_paired_second)
  if (!kVInK) c.release(c.sm.empty_k(s));  // paired=1: K(it) read
  scores_to_probs<kMasked>(probs, c.rule, c.f, c.block_of(it), st, c.p, pending);
  hand_over_probs(c, probs, pending, st, it == c.n_blocks - 1, t);
}

// Warpgroup 0's tile: the scores, the softmax, P handed over, and O's first half. Masked blocks: the
// first (right to left), the causal diagonal's and key tail's (below n_masked_right), a two-sided
// mask's left end (from unmasked_end).
FJ_DEVICE void consume_paired_first(Consumer& c, float (&o)[kVCols / 2], SoftmaxState& st, int t, int n_masked_right,
                                    int unmasked_end) {
  float probs[kBlockN / 2], pending[2];
  const int n = c.n_blocks;
  if constexpr (kChunkWaits) {
    issue_scores<true>(probs, c.q, c.sm.k_stage(c.stage(0)), c.sm.chunk_full(c.stage(0), 0), c.phase(0));
  } else {
    mbar_wait(c.sm.full_k(c.stage(0)), c.phase(0));
    issue_scores(probs, c.q, c.sm.k_stage(c.stage(0)));
  }
  wgmma_wait<0>();
  fence_registers(probs);
  if (c.leader) mbar_arrive(c.sm.scores_done());
  if (!kVInK) c.release(c.sm.empty_k(c.stage(0)));  // paired=1: K(0) read
  scores_to_probs<true>(probs, c.rule, c.f, c.block_of(0), st, c.p, pending);
  pending[0] = pending[1] = 1.f;  // O is still zero: it owes no factor
  clear_slot_rows_past_keys(c, 0);
  hand_over_probs(c, probs, pending, st, n == 1, t);
  int it = 1;
  if constexpr (kCausal || Mask::kTwoSided) {
#pragma unroll 1
    for (; it < n_masked_right; ++it) paired_first_step<true>(c, it, o, probs, pending, st, t);
  }
#pragma unroll 1
  for (; it < unmasked_end; ++it) paired_first_step<false>(c, it, o, probs, pending, st, t);
  if constexpr (Mask::kTwoSided) {
#pragma unroll 1
    for (; it < n; ++it) paired_first_step<true>(c, it, o, probs, pending, st, t);
  }
  PvOperand last_p;
  pack_probs(last_p, probs);
  rescale(o, pending);
  if (!kVInK) wait_pv_slot(c, n - 1);
  issue_pv(o, last_p, pv_slot(c, n - 1));
  wgmma_wait<0>();
  fence_registers(o);
  release_pv_slot(c, n - 1);
}

// Warpgroup 1's tile: per block P(it) and its factor from warpgroup 0, O's second half += P(it) V(it)
// (V's columns from kVCols on, in pv_slot; P in registers, read from the hand-over tile). Leaves the rows'
// final max and sum in st (the sum whole in the quad's first lane) for the epilogue.
FJ_DEVICE void consume_paired_second(Consumer& c, float (&o)[kVCols / 2], SoftmaxState& st, int t) {
  const int my_row = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll 1
  for (int it = 0; it < c.n_blocks; ++it) {
    named_barrier_sync(kPFullBarrier, 256);  // P(it) and its factors are in the hand-over area
    PvOperand p_regs;  // P(it) in registers: the hand-over tile is free again once the words below are read
    load_probs_tile(p_regs, c.sm.p_tile(), t);
    if (!kVInK) c.release(c.sm.empty_k(c.stage(it)));  // paired=1: S(it) is done (this warpgroup never reads K)
    float factor[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) asm volatile("ld.shared.f32 %0, [%1];" : "=f"(factor[r]) : "r"(c.sm.row_factor(my_row + 8 * r)) : "memory");
    if (it == c.n_blocks - 1) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float sum;
        asm volatile("ld.shared.f32 %0, [%1];" : "=f"(st.row_max[r]) : "r"(c.sm.row_final_max(my_row + 8 * r)) : "memory");
        asm volatile("ld.shared.f32 %0, [%1];" : "=f"(sum) : "r"(c.sm.row_final_sum(my_row + 8 * r)) : "memory");
        st.row_sum[r] = (t & 3) == 0 ? sum : 0.f;  // the epilogue sums the quad
      }
    }
    // P and its words read: warpgroup 0 may write the next P. early_release=1: at once; else after the
    // wait below (see its NOTES).
    if constexpr (kEarlyRelease) named_barrier_arrive(kPEmptyBarrier, 256);
    rescale(o, factor);
    wait_pv_slot(c, it);  // v_in_k=1: long complete (warpgroup 0 waited for it): the slot's bytes for this warpgroup
    // Scheduling alone (the results do not depend on it): both warpgroups' GEMMs share the SM's
    // tensor cores, so a P V issued beside warpgroup 0's S(it+1) slows it, and warpgroup 0's
    // softmax of S(it+1) then runs with the tensor cores idle. Where K(it+1) has landed (S(it+1) is
    // about to run, or runs), this P V waits for S(it+1) to complete and runs beside that softmax
    // instead; where it has not (a memory-bound walk), it goes at once and frees its slot sooner.
    // NOTES (correctness, no hang): warpgroup 0 arrives once per block after its S (arrival ring +
    // it), so this waits for arrival ring + it + 1 by its parity; warpgroup 0 cannot arrive for
    // S(it+2) before this warpgroup has passed the wait (its hand-over of P(it+1) waits for
    // kPEmptyBarrier, arrived only after it), so no later phase of the same parity can be mistaken
    // for it. (paired=1 frees K's slot before this P V: the ring alone would not keep S(it+2) back.)
    // early_release=1: at once, always (its slot goes back sooner; see ReleaseEarly).
    if constexpr (!kEarlyRelease) {
      if (it + 1 < c.n_blocks && __any_sync(0xffffffffu, mbar_test(k_landed(c, it + 1), c.phase(it + 1)))) {
        mbar_wait(c.sm.scores_done(), (uint32_t)(c.ring + it + 1) & 1u);
      }
      named_barrier_arrive(kPEmptyBarrier, 256);
    }
    // half_release=1: after warpgroup 0's P V on this slot (its release), so that warpgroup 0's part
    // frees first. NOTES (correctness, no hang): warpgroup 0 releases block it's part before it waits
    // for anything of this warpgroup's but the hand-over of P(it+1), which needs only kPEmptyBarrier
    // (arrived above: early_release=1); and its next release of the slot (block it + 2) needs K(it +
    // 2), which needs this warpgroup's release below, so no later phase of the same parity is
    // mistaken for it.
    if constexpr (kHalfRelease) mbar_wait(c.sm.empty_k(c.stage(it)), c.phase(it));
    issue_pv(o, p_regs, pv_slot(c, it) + kVChunks * (kBlockN * 128));
    wgmma_wait<0>();
    fence_registers(o);
    release_pv_slot(c, it, true);
  }
}

// ================================================================ seesaw consumers (seesaw=1)
// FlashMLA's schedule for MLA's absorbed decode: the two warpgroups take the tile's blocks in pairs
// (A = it 2j, warpgroup 0's; B = it 2j + 1, warpgroup 1's). Each computes its block's scores and
// softmax, so one's softmax runs while the other's GEMMs hold the tensor cores, and each still
// computes its half of O from both blocks (warpgroup 0 the left kVCols columns, 1 the right):
//   warpgroup 0: softmax(S(A)) against the running max -> max and factor out (barrier MaxA);
//                O_L += P(A) V(A)_L; then B's max and factor in (MaxB): P(A) and O_L rescaled to it;
//                P(A) into A's slot (PA); O_L += P(B) V(B)_L once P(B) is in B's slot (PB);
//                the next pair's S(A), its early half while that P V runs.
//   warpgroup 1: A's max and factor in (MaxA), O_R rescaled; softmax(S(B)) against it -> max and
//                factor out (MaxB); P(B) into B's slot (PB); O_R += P(B) V(B)_R; O_R += P(A) V(A)_R
//                once P(A) is in A's slot (PA); the next pair's S(B).
// Both halves of O and both row sums are then relative to B's max. The slots' halves are released
// by their last readers (kSeesaw), the producer reloading each as soon as it is free. The tile's row
// sums are each warpgroup's share: the epilogue adds them (seesaw_row_sums).
// NOTES (correctness): every named barrier here is arrived at by one warpgroup and waited for by
// the other once a pair, and neither can arrive for pair j + 1 before the other has waited for
// pair j: warpgroup 0 arrives at MaxA(j + 1) and PA(j + 1) only after waiting for MaxB(j) and PB(j),
// which warpgroup 1 arrives at after waiting for MaxA(j) and before waiting for PA(j)... and
// symmetrically. So the 256-thread counts never mix two pairs. The row words (max, factors) are
// rewritten only after the reader's next barrier: the same argument. P(A) goes into A's slot only
// after warpgroup 0's own S(A) read it, and the slot's late half is released by warpgroup 1 after
// P(A) V(A)_R; B's mirror that.
constexpr int kSeesawGoesOn = 0, kSeesawEndsWithB = 1, kSeesawEndsAlone = 2;  // what follows a pair
constexpr uint32_t kSeesawPOffset = kSeesawPChunk * kBlockN * 128;               // P's chunk in a slot

template <int kHalf>
FJ_DEVICE constexpr int first_chunk_in_half() {
  int c = 0;
  while (!chunk_in_half(kHalf, c)) ++c;
  return c;
}

// One half of S = Q K^T (the chunks chunk_in_half gives), issued and committed; the early half
// starts the accumulation.
// Once the half has landed (bar: its half_full barrier, this parity), or with chunk_waits=1 each
// chunk's products once that chunk has (bar: the slot's chunk_full(., 0); as in issue_scores).
template <int kHalf>
FJ_DEVICE void issue_scores_half(float (&s)[kBlockN / 2], uint32_t q_slice, uint32_t k_tile, uint32_t bar, uint32_t parity) {
  if constexpr (!kChunkWaits) mbar_wait(bar, parity);
  constexpr bool kEarly = (kHalf & 1) == 0;
  constexpr int kFirst = first_chunk_in_half<kHalf>();
  // NOTES: the seesaw's slots are fixed, so every step's descriptors are loop-invariant: hidden
  // here, else ptxas hoists all of them out of the tile's loop and spills them.
  asm volatile("" : "+r"(q_slice), "+r"(k_tile));
  if constexpr (kChunkWaits) asm volatile("" : "+r"(bar));
  const TileDesc k_desc(k_tile, 16, 1024), q_desc(q_slice, 16, 1024);
  if constexpr (!kChunkWaits) wgmma_fence();
#pragma unroll
  for (int c = 0; c < kQKChunks; ++c) {
    if (!chunk_in_half(kHalf, c)) continue;
    if constexpr (kChunkWaits) {
      mbar_wait(bar + 8u * c, parity);
      wgmma_fence();
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      wgmma_qk(s, q_desc.at(c * (kBlockM * 128) + k * 32), k_desc.at(c * (kBlockN * 128) + k * 32), !(kEarly && c == kFirst && k == 0));
    }
  }
  wgmma_commit();
}

// The barrier issue_scores_half waits on for half kHalf: the half's, or its slot's first chunk's.
template <int kHalf>
FJ_DEVICE uint32_t scores_bar(const SmemLayout& sm) { return kChunkWaits ? sm.chunk_full(kHalf >= kHalfEarlyB, 0) : sm.half_full(kHalf); }

// Block A's (kB false) or B's scores at pair position pp, each half once it has landed.
// Q's address is hidden from ptxas (see paired_first_step).
template <bool kB>
FJ_DEVICE void seesaw_scores(const Consumer& c, float (&s)[kBlockN / 2], int pp) {
  const uint32_t tile = c.sm.k_stage(kB ? 1 : 0);
  uint32_t q = c.q.slice;
  asm volatile("" : "+r"(q));
  issue_scores_half<kB ? kHalfEarlyB : kHalfEarlyA>(s, q, tile, scores_bar<kB ? kHalfEarlyB : kHalfEarlyA>(c.sm), (uint32_t)pp & 1u);
  issue_scores_half<kB ? kHalfLateB : kHalfLateA>(s, q, tile, scores_bar<kB ? kHalfLateB : kHalfLateA>(c.sm), (uint32_t)pp & 1u);
  wgmma_wait<0>();
  fence_registers(s);
}

// The rows' running max and this warpgroup's block factor out (array 1: A's, 2: B's), or the other
// warpgroup's in. A quad's lanes hold the same values (online_softmax's shuffles); its first writes.
FJ_DEVICE void publish_row_max(const SmemLayout& sm, const SoftmaxState& st, const float (&factor)[2], int array, int t) {
  if ((t & 3) != 0) return;
  const int row = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(sm.seesaw_row_word(0, row + 8 * r)), "f"(st.row_max[r]) : "memory");
    asm volatile("st.shared.f32 [%0], %1;" :: "r"(sm.seesaw_row_word(array, row + 8 * r)), "f"(factor[r]) : "memory");
  }
}
FJ_DEVICE void take_row_max(const SmemLayout& sm, SoftmaxState& st, float (&factor)[2], int array, int t) {
  const int row = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(st.row_max[r]) : "r"(sm.seesaw_row_word(0, row + 8 * r)) : "memory");
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(factor[r]) : "r"(sm.seesaw_row_word(array, row + 8 * r)) : "memory");
    st.row_sum[r] *= factor[r];
  }
}

// O += P V with P from a slot's P chunk and V's columns from col_chunk on of that or another slot
// (both operands in shared memory), issued and committed.
FJ_DEVICE void issue_pv_from_slot(float (&o)[kVCols / 2], uint32_t p_tile, uint32_t v_tile) {
  asm volatile("" : "+r"(p_tile), "+r"(v_tile));  // the descriptors per pair, not kept through the loop
  const TileDesc p_desc(p_tile, 16, 1024), v_desc(v_tile, kBlockN * 128, 1024);
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < kBlockN / 16; ++j) wgmma_pv_ss(o, p_desc.at(j * 32), v_desc.at(j * 2048));
  wgmma_commit();
}

// Warpgroup 0's pair j (S(A) in probs on entry; the next pair's S(A) on exit where one follows).
template <bool kMasked, int kEnd>
FJ_DEVICE void seesaw_step_a(Consumer& c, int j, float (&o)[kVCols / 2], float (&probs)[kBlockN / 2], SoftmaxState& st, int t) {
  constexpr bool kHasB = kEnd != kSeesawEndsAlone;
  uint32_t slot_a = c.sm.k_stage(0), slot_b = c.sm.k_stage(1);
  asm volatile("" : "+r"(slot_a), "+r"(slot_b));  // (see issue_scores_half)
  float factor[2];
  scores_to_probs<kMasked>(probs, c.rule, c.f, c.block_of(2 * j), st, c.p, factor);
  publish_row_max(c.sm, st, factor, 1, t);
  named_barrier_arrive(kSeesawMaxABarrier, 256);
  rescale(o, factor);
  if (j == 0) clear_first_block_rows_past_keys(c);
  PvOperand pa;
  pack_probs(pa, probs);
  issue_pv(o, pa, slot_a);  // V(A)'s left columns: chunks [0, kVChunks)
  wgmma_wait<0>();
  fence_registers(o);
  c.release(c.sm.half_empty(kHalfEarlyA));  // A's early half: read by S(A) and this P V alone
  if constexpr (kHasB) {
    named_barrier_sync(kSeesawMaxBBarrier, 256);
    take_row_max(c.sm, st, factor, 2, t);  // B's max: P(A) and O_L move to it
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) probs[i] *= factor[Fragment::row_half(i)];
  }
  store_probs_tile(slot_a + kSeesawPOffset, probs, t);
  fence_proxy_async_smem();  // P(A)'s stores, then warpgroup 1's wgmma reads of them
  named_barrier_arrive(kSeesawPABarrier, 256);
  if constexpr (kHasB) {
    named_barrier_sync(kSeesawPBBarrier, 256);
    rescale(o, factor);
    issue_pv_from_slot(o, slot_b + kSeesawPOffset, slot_b);  // P(B) V(B)'s left columns
  }
  if constexpr (kEnd == kSeesawGoesOn) {
    // The next pair's S(A), its early half beside P(B) V: B's late half is free once that is done.
    const int pp = c.ring + j + 1;
    uint32_t q = c.q.slice;
    asm volatile("" : "+r"(q));
    issue_scores_half<kHalfEarlyA>(probs, q, slot_a, scores_bar<kHalfEarlyA>(c.sm), (uint32_t)pp & 1u);
    issue_scores_half<kHalfLateA>(probs, q, slot_a, scores_bar<kHalfLateA>(c.sm), (uint32_t)pp & 1u);
    wgmma_wait<2>();
    fence_registers(o);
    c.release(c.sm.half_empty(kHalfLateB));
    wgmma_wait<0>();
    fence_registers(probs);
  } else if constexpr (kHasB) {
    wgmma_wait<0>();
    fence_registers(o);
    c.release(c.sm.half_empty(kHalfLateB));
  }
}

// Warpgroup 1's pair j (S(B) in probs on entry where the pair has a B; the next pair's on exit).
template <bool kMasked, int kEnd>
FJ_DEVICE void seesaw_step_b(Consumer& c, int j, float (&o)[kVCols / 2], float (&probs)[kBlockN / 2], SoftmaxState& st, int t) {
  constexpr bool kHasB = kEnd != kSeesawEndsAlone;
  uint32_t slot_a = c.sm.k_stage(0), slot_b = c.sm.k_stage(1);
  asm volatile("" : "+r"(slot_a), "+r"(slot_b));  // (see issue_scores_half)
  const int pp = c.ring + j;
  float factor_a[2];
  named_barrier_sync(kSeesawMaxABarrier, 256);
  take_row_max(c.sm, st, factor_a, 1, t);  // A's max: O_R moves to it
  if constexpr (kHasB) {
    float factor_b[2];
    scores_to_probs<kMasked>(probs, c.rule, c.f, c.block_of(2 * j + 1), st, c.p, factor_b);
    publish_row_max(c.sm, st, factor_b, 2, t);
    named_barrier_arrive(kSeesawMaxBBarrier, 256);
    const float factor[2] = {factor_a[0] * factor_b[0], factor_a[1] * factor_b[1]};
    rescale(o, factor);
    PvOperand pb;
    pack_probs(pb, probs);
    store_probs_tile(slot_b + kSeesawPOffset, probs, t);
    issue_pv(o, pb, slot_b + kVChunks * (kBlockN * 128));  // V(B)'s right columns
    fence_proxy_async_smem();  // P(B)'s stores, then warpgroup 0's wgmma reads of them
    named_barrier_arrive(kSeesawPBBarrier, 256);
  } else {
    rescale(o, factor_a);
  }
  named_barrier_sync(kSeesawPABarrier, 256);  // P(A) in A's slot (its rows past the keys zeroed)
  issue_pv_from_slot(o, slot_a + kSeesawPOffset, slot_a + kVChunks * (kBlockN * 128));  // P(A) V(A)'s right columns
  if constexpr (kHasB) {
    wgmma_wait<1>();
    fence_registers(o);
    c.release(c.sm.half_empty(kHalfEarlyB));  // B's early half: read by S(B) and P(B) V(B)_R alone
  }
  wgmma_wait<0>();
  fence_registers(o);
  c.release(c.sm.half_empty(kHalfLateA));  // A's late half: P(A) V(A)_R was its last reader
  if constexpr (!kHasB) {
    // No block B: the producer's arrivals on B's halves (nothing loaded), released unread, so
    // that their phases go one a pair (each after its arrival: never a phase early).
    if constexpr (kChunkWaits) {
#pragma unroll
      for (int k = 0; k < kQKChunks; ++k) mbar_wait(c.sm.chunk_full(1, k), (uint32_t)pp & 1u);
      c.release(c.sm.half_empty(kHalfEarlyB));
      c.release(c.sm.half_empty(kHalfLateB));
    } else {
      mbar_wait(c.sm.half_full(kHalfEarlyB), (uint32_t)pp & 1u);
      c.release(c.sm.half_empty(kHalfEarlyB));
      mbar_wait(c.sm.half_full(kHalfLateB), (uint32_t)pp & 1u);
      c.release(c.sm.half_empty(kHalfLateB));
    }
  }
  // The next pair's S(B), where it has a B (the S's issue and wait both inside the branch).
  if constexpr (kEnd == kSeesawGoesOn) {
    if (2 * j + 3 < c.n_blocks) seesaw_scores<true>(c, probs, pp + 1);
  }
}

template <bool kB, bool kMasked, int kEnd>
FJ_DEVICE void seesaw_step(Consumer& c, int j, float (&o)[kVCols / 2], float (&probs)[kBlockN / 2], SoftmaxState& st, int t) {
  if constexpr (kB) seesaw_step_b<kMasked, kEnd>(c, j, o, probs, st, t);
  else seesaw_step_a<kMasked, kEnd>(c, j, o, probs, st, t);
}

// A warpgroup's tile. Masked pairs: those holding a masked block (the first, right to left; the
// causal diagonal's and the key tail's below n_masked_right; a two-sided mask's left end from
// unmasked_end) and the last pair, which also ends the tile.
// NOTES: the last pair is its own instance (the next S or none after its P V), so that no branch
// sits between a wgmma's issue and its wait (see paired_first_step).
template <bool kB>
FJ_DEVICE void consume_seesaw(Consumer& c, float (&o)[kVCols / 2], SoftmaxState& st, int t, int n_masked_right, int unmasked_end) {
  const int n = c.n_blocks, last = (n - 1) / 2;
  float probs[kBlockN / 2];
  if (!kB || n > 1) seesaw_scores<kB>(c, probs, c.ring);
  int j = 0;
#pragma unroll 1
  for (; j < last && 2 * j < max(n_masked_right, 1); ++j) seesaw_step<kB, true, kSeesawGoesOn>(c, j, o, probs, st, t);
#pragma unroll 1
  for (; j < last && 2 * j + 1 < unmasked_end; ++j) seesaw_step<kB, false, kSeesawGoesOn>(c, j, o, probs, st, t);
  if constexpr (Mask::kTwoSided) {
#pragma unroll 1
    for (; j < last; ++j) seesaw_step<kB, true, kSeesawGoesOn>(c, j, o, probs, st, t);
  }
  if (2 * last + 1 < n) seesaw_step<kB, true, kSeesawEndsWithB>(c, last, o, probs, st, t);
  else seesaw_step<kB, true, kSeesawEndsAlone>(c, last, o, probs, st, t);
}

// The tile's row sums: each warpgroup's share (its blocks' P, relative to the final max) to the
// other, so both hold the whole, in the quad's first lane (the epilogue sums the quad).
FJ_DEVICE void seesaw_row_sums(const SmemLayout& sm, SoftmaxState& st, int wg, int t) {
  const int row = (t / 32) * 16 + (t % 32) / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 1);
    st.row_sum[r] += __shfl_xor_sync(0xffffffffu, st.row_sum[r], 2);
    if ((t & 3) == 0) asm volatile("st.shared.f32 [%0], %1;" :: "r"(sm.seesaw_row_word(3 + wg, row + 8 * r)), "f"(st.row_sum[r]) : "memory");
  }
  named_barrier_sync(kSeesawSumsBarrier, 256);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float other;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(other) : "r"(sm.seesaw_row_word(4 - wg, row + 8 * r)) : "memory");
    st.row_sum[r] = (t & 3) == 0 ? st.row_sum[r] + other : 0.f;
  }
}

// ================================================================ epilogue
// Where a warpgroup stages its O slice for the TMA store: a [kVChunks][rows][64] tile at base, its
// 64 rows from row0. Usually its rows of the tile's Q buffer, freed afterwards for a later tile's Q;
// with kStageOInKV (one Q buffer, freed early) the last K/V block's slot it kept (warpgroup 0: K's,
// 1: V's), freed afterwards for the ring. A tile with no K/V block keeps its Q buffer for O.
struct OStaging {
  uint32_t base;
  int rows, row0;
  uint32_t release_bar;
};

// NOTES: holding a slot keeps the producer off it, not the other warpgroup: the stager waits for
// its word that it has read the slot (with pingpong that read was issued earlier and is long done).
FJ_DEVICE OStaging o_staging(const SmemLayout& sm, int wg, int local, int n_blocks, int last_stage) {
  if (kStageOInKV && n_blocks > 0) {
    if (kSlotHandOff) named_barrier_sync(wg == 0 ? last_k_read_barrier(local) : last_v_read_barrier(local), 256);
    return wg == 0 ? OStaging{sm.k_stage(last_stage), 64, 0, sm.empty_k(last_stage)}
                   : OStaging{sm.v_stage(last_stage), 64, 0, sm.empty_v(last_stage)};
  }
  const int b = q_buffer_of(local);
  // kPairedO: both warpgroups' rows are the tile's 64, each its half of the columns (chunks).
  if constexpr (kPairedO) return OStaging{sm.q_buffer(b) + wg * (kVChunks * kBlockM * 128), kBlockM, 0, sm.empty_q(b)};
  return OStaging{sm.q_buffer(b), kBlockM, wg * 64, sm.empty_q(b)};
}

// Where a tile row's output goes: its query in the sequence and its query head (packed heads:
// row = query x pack_heads + head of the tile's group, visibility.cuh).
struct RowTarget {
  int query, head;
};
FJ_DEVICE RowTarget row_target(const Params& p, const Tile& tile, int row) {
  if constexpr (kPackGQA) return {row >> p.pack_shift, tile.head * p.pack_heads + (row & (p.pack_heads - 1))};
  return {row, tile.head};
}

// Split partials (split_kv, a sequence of two splits or more): float32 O and LSE in the caller's
// workspace; a sequence of one split writes its O and LSE as without splits.
// NOTES: the test is a vote, so that ptxas sees a warp-uniform branch (see write_output).
FJ_DEVICE bool writes_partials(const Params& p, const SeqlenInfo& seq) {
  if constexpr (!kSplitKV) return false;
  return __all_sync(0xffffffffu, split_writes_partials(p.num_splits, tile_key_split(p, seq).splits));
}

// Where query 0 of the sequence and head `head` sits in LSE: dense [batch, heads_q, seqlen_q],
// varlen [heads_q, total_q] (split partials: [split][heads_q][total_q], from lse_partial).
FJ_DEVICE int64_t lse_offset(const Params& p, const Tile& tile, const SeqlenInfo& seq, int head) {
  if (kVarlen) return (int64_t)head * p.total_q + seq.q_row0;
  return ((int64_t)tile.batch * p.heads_q + head) * p.seqlen_q;
}

// The partial O of split tile.split: this thread's two rows, straight from the accumulator
// (float pairs; nothing staged), normalised by the split's own row sums.
FJ_DEVICE void store_partial_o(const Params& p, const Fragment& f, const float (&o)[kVCols / 2], const float (&inv_sum)[2],
                               const Tile& tile, const SeqlenInfo& seq) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const RowTarget at = row_target(p, tile, f.row0 + 8 * r);
    if (at.query >= seq.seqlen_q) continue;
    float* const row = p.o_partial + (((int64_t)tile.split * p.total_q + seq.q_row0 + at.query) * p.heads_q + at.head) * kHeadDimV +
                       tile.v_col0();
#pragma unroll
    for (int g = 0; g < kVCols / 8; ++g) {
      const int i = 4 * g + 2 * r;  // elements i and i + 1: row half r, columns col(i) and col(i) + 1
      if (tile.v_col0() + f.col(i) >= kHeadDimV) continue;
      asm volatile("st.global.v2.f32 [%0], {%1, %2};" :: "l"(row + f.col(i)), "f"(o[i] * inv_sum[r]), "f"(o[i + 1] * inv_sum[r]) : "memory");
    }
  }
}

// combine=inline: the warpgroup's partials are out; the last of its rows' splits to count itself
// in (merge_counter_index: one counter a warpgroup's rows) merges every split's partials of those
// rows into O and LSE, a warp a row (split_merge.cuh), and puts the counter back to zero. No
// second kernel, so no second launch on the host and no wait for this grid's end.
// NOTES (correctness): release and acquire as in a last-block reduction (CUTLASS's semaphore):
// the barrier orders the warpgroup's partial stores before thread 0's fence, which (cumulative)
// orders them before its count; the last arrival's thread 0 fences after its count, the barrier
// hands that on, and the warpgroup reads the partials through L2.
// Each of a sequence's `splits` tiles of these rows counts once (tile_has_rows: exactly the splits
// below the sequence's count run), so the count reaches `splits` once a launch, and the last
// arrival leaves the counter at zero for the next launch or graph replay.
// kPairedO: the two warpgroups hold one tile's rows, each half of O's columns (and warpgroup 0 the
// LSE), so the tile counts once, at warpgroup 0's counter, after both have stored theirs (a barrier
// of both), and the last arrival's eight warps merge its rows.
FJ_DEVICE void merge_if_last_split(const Params& p, const Tile& tile, const SeqlenInfo& seq, int wg, int t) {
  const int splits = tile_key_split(p, seq).splits;
  constexpr int kMergeWarps = kPairedO ? 8 : 4;
  const uint32_t barrier = kPairedO ? kPairedMergeBarrier : kEpilogueBarrier + wg;
  const int counter_wg = kPairedO ? 0 : wg;
  named_barrier_sync(barrier, 32 * kMergeWarps);  // the partials are stored
  bool last = false;
  if (t == 0 && counter_wg == wg) {
    const long long at = merge_counter_index(tile.batch, tile.head, tile.m_block, counter_wg, tile_heads(p), padded_m_blocks(p), kConsumerWGs);
    __threadfence();
    last = atomicAdd(p.merge_counters + at, 1u) == (uint32_t)splits - 1u;
    if (last) {
      atomicExch(p.merge_counters + at, 0u);
      __threadfence();
    }
  }
  if (!named_barrier_any(barrier, 32 * kMergeWarps, last)) return;
  const int first = tile.m_block * kBlockM + (kPairedO ? 0 : wg * 64);  // the warpgroup's (or the pair's) first (packed) row
#pragma unroll 1
  for (int r = (kPairedO ? 4 * wg : 0) + t / 32; r < 64; r += kMergeWarps) {
    const RowTarget at = row_target(p, tile, first + r);
    if (at.query >= seq.seqlen_q) break;  // rows are query-major: the rest are past the sequence too
    merge_split_row(p, seq.q_row0 + at.query, at.head, splits, t % 32);
  }
}

// varlen: the warpgroup's 64 rows of O from the staging tile to global memory up to the
// sequence's end (a TMA store would write the rows past it, the next sequence's), 16 bytes per
// thread and step, 8 threads per 128-byte row.
FJ_DEVICE void store_o_rows(const Params& p, const OStaging& out, const Tile& tile, const SeqlenInfo& seq, int wg, int t) {
  const int first = tile.m_block * kBlockM + wg_first_row(wg);  // the warpgroup's first row in its sequence
  const int rows = min(64, seq.seqlen_q - first);
  // NOTES: an O column part's offset goes into the base alone (written into the expressions below,
  // even as a constant 0 it moved the engine kernels' SASS).
  uint16_t* const o_rows = kOParts > 1 || kPairedO || kDimSplit > 1 ? p.o_rows + tile.v_col0() : p.o_rows;
  uint16_t* const head_base = o_rows + (int64_t)tile.head * p.o_head_stride;
#pragma unroll
  for (int u = t; u < kVChunks * 64 * 8; u += 128) {
    const int chunk = u / (64 * 8), r = (u / 8) % 64, unit = u % 8;
    const RowTarget at = row_target(p, tile, first + r);
    if ((kPackGQA ? at.query >= seq.seqlen_q : r >= rows) || chunk * 64 + unit * 8 >= kHeadDimV) continue;  // PV runs over kVCols, O has kHeadDimV
    if constexpr (kOParts > 1 || kPairedO || kDimSplit > 1) {
      if (tile.v_col0() + chunk * 64 + unit * 8 >= kHeadDimV) continue;
    }
    uint32_t v0, v1, v2, v3;
    const uint32_t src = out.base + swizzled_offset(out.row0 + r, chunk * 64 + unit * 8, out.rows);
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(src) : "memory");
    uint16_t* dst = (kPackGQA ? o_rows + (int64_t)at.head * p.o_head_stride : head_base) +
                    (int64_t)(seq.q_row0 + at.query) * p.o_row_stride + chunk * 64 + unit * 8;
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(dst), "r"(v0), "r"(v1), "r"(v2), "r"(v3) : "memory");
  }
}

FJ_DEVICE void write_output(const Params& p, const Fragment& f, float (&o)[kVCols / 2], SoftmaxState& st, int wg, int t,
                            const Tile& tile, const SeqlenInfo& seq, const OStaging& out) {
  const bool partials = writes_partials(p, seq);
  float inv_sum[2];  // O's factor (kernel_finalize.cuh: the row's normalisation, and its sink)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = st.row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    // A split's partial leaves the sink to the merge; a sequence of one split counts it here.
    // NOTES: the row's head is computed in the call, the row target again where the LSE is
    // stored: one RowTarget for both (or a lambda for the head) changed the default kernels'
    // register allocation.
    inv_sum[r] = Finalize::o_scale(p, row_target(p, tile, f.row0 + 8 * r).head, st.row_max[r], sum, !partials);
    if constexpr (kFp8Operands) {  // V's descale, once a row (P V ran on the e4m3 values)
      inv_sum[r] *= kv_fp8_scale(p.v_scale, p.v_scale_strides, tile.batch, (int)fast_div((uint32_t)tile.head, p.div_group));
    }
    float* const lse_base = partials ? p.lse_partial + (int64_t)tile.split * p.heads_q * p.total_q : p.lse;
    // kPairedO: the rows' LSE once; kDimSplit: by the cluster's first CTA (the second's is the same).
    if (lse_base != nullptr && (f.lane & 3) == 0 && (!kPairedO || wg == 0) && (kDimSplit == 1 || cluster_cta_rank() == 0)) {
      const RowTarget at = row_target(p, tile, f.row0 + 8 * r);
      if (at.query < seq.seqlen_q) lse_base[lse_offset(p, tile, seq, at.head) + at.query] = Finalize::lse(p, at.head, st.row_max[r], sum, inv_sum[r], !partials);
    }
  }
  // Split partials go out from the registers; the staging memory is released unused.
  if (partials) {
    store_partial_o(p, f, o, inv_sum, tile, seq);
    if constexpr (kInlineCombine) {
      if (p.merge_counters != nullptr) merge_if_last_split(p, tile, seq, wg, t);  // else the combine kernel merges
    }
    named_barrier_sync(kEpilogueBarrier + wg, 128);  // the warpgroup's last reads of the slot are done
    if (t == 0) mbar_arrive(out.release_bar);
    return;
  }
  // O -> the staging tile (its last reader, a wgmma, is complete), swizzled like TMA: per 16
  // columns one stmatrix.x4 of the warp's 16 rows (o[8g .. 8g+7] are its four 8x8 matrices:
  // rows 0-7 and 8-15 of columns 16g .. 16g+7, then of 16g+8 .. 16g+15).
  // NOTES: t hidden as in QOperand::load: else ptxas computes the addresses once per kernel and
  // keeps them through the main loops (d256 spilled 48 bytes).
  asm volatile("" : "+r"(t));
  const int lane = t % 32;
  const int row = out.row0 + (t / 32) * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
  for (int g = 0; g < kVCols / 16; ++g) {
    uint32_t packed[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float scale = inv_sum[m & 1];
      packed[m] = pack2(o[8 * g + 2 * m] * scale, o[8 * g + 2 * m + 1] * scale);
    }
    stmatrix_x4(out.base + swizzled_offset(row, 16 * g + 8 * (lane >> 4), out.rows), packed[0], packed[1], packed[2], packed[3]);
  }
  fence_proxy_async_smem();
  named_barrier_sync(kEpilogueBarrier + wg, 128);  // this warpgroup only
  // Packed O: a warpgroup whose 64 rows reach past its sequence's end (rows_inside_sequence, the last
  // query block's), and packed heads' rows (query-major), store by threads; every other one by TMA,
  // as the dense kernel does: the threads' 16 KB copy held the whole warpgroup up at every tile's end.
  // NOTES: the test is a vote, so that ptxas sees a warp-uniform branch: as a plain compare of the
  // (shared-memory) length it moved the main loop's wgmma descriptors out of uniform registers (33
  // more instructions a block at d128, paged).
  if constexpr (kVarlen) {
    const int first = tile.m_block * kBlockM + wg_first_row(wg);  // the warpgroup's first row in its sequence
    if (kPackGQA || !__all_sync(0xffffffffu, rows_inside_sequence(first, 64, seq.seqlen_q))) {
      store_o_rows(p, out, tile, seq, wg, t);
      named_barrier_sync(kEpilogueBarrier + wg, 128);  // every thread has read the staging tile
      if (t == 0) mbar_arrive(out.release_bar);
      return;
    }
  }
  if (t == 0) {
#pragma unroll
    for (int c = 0; c < kVChunks; ++c) {
      tma_store_4d(&p.o, out.base + c * (out.rows * 128) + out.row0 * 128, tile.v_col0() + c * 64,
                   seq.q_row0 + tile.m_block * kBlockM + wg_first_row(wg), tile.head, seq.q_batch);
    }
    tma_store_commit();
    tma_store_wait_read();       // shared memory must stay valid until TMA has read it,
    mbar_arrive(out.release_bar);  // then it may be loaded over
  }
}

// The tile in this local's Q buffer as the producer published it (after its full barrier).
FJ_DEVICE uint32_t published_m_block(const SmemLayout& sm, int local) {
  uint32_t m_block;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(m_block) : "r"(sm.tile_words(q_buffer_of(local))) : "memory");
  return m_block;
}

// The tile's sequence: published beside the tile where lengths are on the device (the Q buffer's
// words; only the lengths and first query row the consumers use), else from the parameters.
FJ_DEVICE SeqlenInfo consumer_seqlen(const Params& p, const SmemLayout& sm, int which, const Tile& tile) {
  if constexpr (kPublishTiles && kDeviceLengths) {
    SeqlenInfo s = {};
    const uint32_t words = sm.tile_words(q_buffer_of(which));
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(s.seqlen_q), "=r"(s.seqlen_k) : "r"(words + 8) : "memory");
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(s.q_row0) : "r"(words + 16) : "memory");
    s.q_batch = kVarlen ? 0 : tile.batch;  // a dense Q (paged=1 alone) is stored by TMA at its batch
    return s;
  }
  return seqlen_info(p, tile.batch);
}

// `which`: the tile number with published tiles (its Q buffer), else the deal slot.
FJ_DEVICE Tile consumer_tile(const Params& p, const SmemLayout& sm, int which) {
  if (!kPublishTiles) return tile_of(p, which);
  const int local = which;
  DealtTile published = {true, 0, 0};
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(published.m_block), "=r"(published.head) : "r"(sm.tile_words(q_buffer_of(local))) : "memory");
  return tile_at(p, published);
}

// The score modifier for this thread's two rows (accumulator rows row0 and row0 + 8): their query
// heads and key positions (bottom-right aligned).
FJ_DEVICE ScoreMod tile_score_mod(const Params& p, const Tile& tile, const SeqlenInfo& seq, int row0) {
  int head[2], position[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const RowTarget at = row_target(p, tile, row0 + 8 * r);
    head[r] = at.head;
    position[r] = at.query + seq.seqlen_k - seq.seqlen_q;
  }
  return ScoreMod::make(p, tile.batch, head, position);
}

// One tile: the main loop over its K/V blocks, then the epilogue. `ring` is the ring position of
// its first K/V block; returns how many it used.
// Consumers that walk the deal with skips (lengths on the device, one Q buffer) decode a tile by
// its slot; everywhere else the slot is the tile number.
constexpr bool kWalkBySlot = !kPublishTiles && kDeviceLengths;

FJ_DEVICE int consume_tile(const Params& p, const SmemLayout& sm, int wg, int t, int local, int slot, int ring) {
  int which = kWalkBySlot ? slot : local;
  const Tile tile = consumer_tile(p, sm, which);
  const SeqlenInfo seq = consumer_seqlen(p, sm, which, tile);
  const MaskBlockRange range = tile_block_range(p, seq, tile.m_block, tile.split);
  const int n_blocks = range.count();
  const uint32_t q_tile = sm.q_buffer(q_buffer_of(local));
  Consumer c{p,    sm,       {}, {wg}, {q_tile + wg * 64 * 128, {}}, t == 0, n_blocks, ring, kCluster == 2 ? cluster_cta_rank() : 0u,
             local, range.n_max, ScoreRule{seq.seqlen_q, seq.seqlen_k, kPackGQA ? p.pack_shift : 0, Mask::rule(p), {}, 1.f}};
  c.f.lane = t % 32;
  c.f.row0 = tile.m_block * kBlockM + wg_first_row(wg) + (t / 32) * 16 + c.f.lane / 4;
  c.rule.score_mod = tile_score_mod(p, tile, seq, c.f.row0);
  if constexpr (kFp8Operands) {
    const int kv_head = (int)fast_div((uint32_t)tile.head, p.div_group);
    c.rule.qk_descale = kv_fp8_scale(p.q_scale, p.q_scale_strides, tile.batch, kv_head) *
                        kv_fp8_scale(p.k_scale, p.k_scale_strides, tile.batch, kv_head);
  }

  float o[kVCols / 2];
#pragma unroll
  for (int i = 0; i < kVCols / 2; ++i) o[i] = 0.f;
  SoftmaxState st = {{FJ_NEG_INF, FJ_NEG_INF}, {0.f, 0.f}};

  // Every tile waits for its Q, also one with no visible key: its O (zeros) goes out through Q's buffer.
  mbar_wait(sm.full_q(q_buffer_of(local)), q_phase_of(local));
  if constexpr (kSeesaw) {
    c.q.slice = q_tile;  // both warpgroups compute scores, of the tile's same 64 rows
    if (n_blocks > 0) {
      const int unmasked_end = Mask::kTwoSided ? n_blocks - range.n_masked_left : n_blocks;
      if (wg == 0) consume_seesaw<false>(c, o, st, t, range.n_masked_right, unmasked_end);
      else consume_seesaw<true>(c, o, st, t, range.n_masked_right, unmasked_end);
      seesaw_row_sums(sm, st, wg, t);
    }
  } else if constexpr (kPairedO) {
    if (kQRegSteps > 0 && n_blocks > 0 && wg == 0) c.q.load(q_tile, 0, t);  // (q_reg_dims) Q landed: full_q above
    if (n_blocks > 0 && wg == 0) consume_paired_first(c, o, st, t, range.n_masked_right, Mask::kTwoSided ? n_blocks - range.n_masked_left : n_blocks);
    if (n_blocks > 0 && wg == 1) consume_paired_second(c, o, st, t);
  } else if (n_blocks > 0) {
    c.q.load(q_tile, wg, t);
    // Masked blocks (key-length tail, causal diagonal) come first; the rest do no mask work.
    // NOTES: only the step instances a variant can need, for compile time (each is a copy of the
    // GEMMs and the softmax): without the causal mask only the first block can be masked, and a
    // causal tile's first block is the diagonal's, always masked but where seqlen_k runs far past
    // seqlen_q (then its mask passes everything). The first block always takes the masked step,
    // also without the causal mask (issue 22: one copy fewer, 12 % of a d128 compile; a whole block
    // passes the mask unchanged, once per tile). Not at d256 without the causal mask, where ptxas
    // spilled 48 bytes without the unmasked first block (d256 causal did 8 bytes in the loop
    // structure before issue 22's, none in today's).
    constexpr bool kFirstBlockMasked = kCausal || kVCols < 256;
    // NOTES (compile time, issue 22): the masked blocks after the first (a causal diagonal across
    // two or three blocks, the key-length tail) run one at a time, S then P V, through the first
    // block's step and the last block's PV, not through an overlapped masked step of their own:
    // that copy of the GEMMs and the masked softmax was 26 % of the compile at d128 causal. The
    // outer loop shares the last PV with them (another 10 %); at d256 with lengths on the device the
    // masked steps' state, live through the unmasked loop there, spilled 8 bytes, so that variant
    // gives them a PV of their own ahead of the unmasked loop. The unmasked blocks keep the
    // overlapped step; without the causal mask both forms fold to first block, loop, last PV.
    // A two-sided mask at d256 takes the separate form everywhere (the shared one spilled 28-32 bytes),
    // and so does a score modifier with either (the softcap: 68 bytes at d128, window, paged), and
    // at d256 one holding per-row registers (ALiBi: 88 bytes, causal).
    constexpr bool kShareLastPV = !(kVCols >= 256 && ((kCausal && kDeviceLengths) || Mask::kTwoSided)) &&
                                  !(ScoreMod::kScoreWork && (kDeviceLengths || Mask::kTwoSided)) && !(ScoreMod::row_registers() && kVCols >= 256);
    // The walk (visibility.cuh: BlockWalk): steps [0, n_masked_right) and, with a two-sided mask,
    // [unmasked_end, n_blocks) need the mask; the steps between are whole blocks. Masked steps
    // after the first (either end) run one at a time, as the causal diagonal's do.
    constexpr bool kMaskedSteps = kCausal || Mask::kTwoSided;  // masked blocks may follow the first
    const int unmasked_end = Mask::kTwoSided ? n_blocks - range.n_masked_left : n_blocks;
    float probs[kBlockN / 2], pending[2];
    int it = 0;
    if constexpr (kShareLastPV) {
#pragma unroll 1
      for (;;) {
        if (kFirstBlockMasked || it < range.n_masked_right || (Mask::kTwoSided && it >= unmasked_end)) c.scores_alone<true>(it, probs, pending, st);
        else c.scores_alone<false>(it, probs, pending, st);
        if (it == 0) pending[0] = pending[1] = 1.f;  // O is still zero: it owes no factor
        ++it;
        if (!kMaskedSteps || it >= range.n_masked_right) {
#pragma unroll 1
          for (; it < unmasked_end; ++it) c.overlapped_block<false>(it, o, probs, pending, st);
        }
        c.pv_alone(kMaskedSteps ? it - 1 : n_blocks - 1, o, probs, pending);  // the last block's, or a masked one's
        if (!kMaskedSteps || it >= n_blocks) break;
      }
    } else {
      const int masked_end = max(range.n_masked_right, 1);
#pragma unroll 1
      for (; it < masked_end; ++it) {
        if (it > 0) c.pv_alone(it - 1, o, probs, pending);
        if (kFirstBlockMasked || it < range.n_masked_right || (Mask::kTwoSided && it >= unmasked_end)) c.scores_alone<true>(it, probs, pending, st);
        else c.scores_alone<false>(it, probs, pending, st);
        if (it == 0) pending[0] = pending[1] = 1.f;
      }
#pragma unroll 1
      for (; it < unmasked_end; ++it) c.overlapped_block<false>(it, o, probs, pending, st);
      if constexpr (Mask::kTwoSided) {
#pragma unroll 1
        for (; it < n_blocks; ++it) {  // the left end's masked blocks
          c.pv_alone(it - 1, o, probs, pending);
          c.scores_alone<true>(it, probs, pending, st);
        }
      }
      c.pv_alone(n_blocks - 1, o, probs, pending);
    }
  }
  asm volatile("" : "+r"(which));  // decode the tile again rather than keep it (see tile_of)
  Tile again = consumer_tile(p, sm, which);
  if constexpr (kPairedO) again.part = wg;  // the warpgroup's half of O's columns
  write_output(p, c.f, o, st, wg, t, again, consumer_seqlen(p, sm, which, again),
               o_staging(sm, wg, kWalkBySlot ? local : which, n_blocks, c.stage(n_blocks - 1)));
  return n_blocks;
}

// NOTES: the pingpong turn runs on across tiles (every warpgroup takes the same number of turns per
// tile), so warpgroup 0 starts its next tile as soon as the last one has issued its final PV, not
// after that one's epilogue. The ring is opened once and balanced once, around the whole walk.
FJ_DEVICE void consume(const Params& p, const SmemLayout& sm, int wg, int t) {
  // The first turn belongs to warpgroup 0: the last one in the ring hands it over once.
  if (kPingpong && wg == kConsumerWGs - 1) named_barrier_arrive(kTurnBarrier, 256);
  if (kPairedO && !kSeesaw && wg == 1) named_barrier_arrive(kPEmptyBarrier, 256);  // the hand-over area starts free
  int ring = 0, local = 0;
#pragma unroll 1
  for (int slot = 0;; ++slot) {
    if (kPublishTiles) {  // the producer's word says whether there is a tile
      mbar_wait(sm.full_q(q_buffer_of(local)), q_phase_of(local));
      if (published_m_block(sm, local) == kNoTile) break;
    } else {  // the same walk as the producer's
      if (!has_tile(p, slot)) break;
      if (kDeviceLengths) {
        const Tile tile = tile_of(p, slot);
        if (!tile_has_rows(p, seqlen_info(p, tile.batch), tile)) continue;
      }
    }
    ring += ring_positions(consume_tile(p, sm, wg, t, local, slot, ring));
    ++local;
  }
  // Balance the turn barrier: the last warpgroup's final pass (or the opening hand-over, if no
  // turn was taken) is taken here, so none is left pending.
  if (kPingpong && wg == 0) named_barrier_sync(kTurnBarrier, 256);
  if (kPairedO && !kSeesaw && wg == 0) named_barrier_sync(kPEmptyBarrier, 256);  // warpgroup 1's last release (see the paired consumers)
}

// ================================================================ kernel
extern "C" __global__ void __launch_bounds__(kThreads, kCtasPerSm) flashjit_attention_fwd(const __grid_constant__ Params p) {
  extern __shared__ unsigned char smem_raw[];
  SmemLayout sm;
  sm.q = (smem_u32(smem_raw) + 1023u) & ~1023u;  // 128B-swizzle tiles must sit on 1024-B boundaries
  sm.k = sm.q + kQBuffers * kQTileBytes;
  sm.v = sm.k + kStages * kKTileBytes;
  sm.staging = sm.v + kStages * kVTileBytes;
  sm.handover = sm.staging + staged_tensors(kKvFp8, kFp8Operands) * kKvStagingSlots * kKvStagingBytes;
  sm.bars = sm.handover + paired_handover_bytes(kPairedO, kBlockM, kChunkWaits ? kStages * kQKChunks : 0) + score_exchange_bytes(kDimSplit > 1, kBlockN);  // as the host allocates
  const int tid = threadIdx.x;

  if (tid == 0) {
    for (int b = 0; b < kQBuffers; ++b) {
      mbar_init(sm.full_q(b), 1);
      mbar_init(sm.empty_q(b), kConsumerWGs);
    }
    if (kPairedO) mbar_init(sm.scores_done(), 1);
    for (int w = 0; w < (kDimSplit > 1 ? kConsumerWGs : 0); ++w) {
      for (uint32_t j = 0; j < 4; ++j) mbar_init(SmemLayout::score_filled(sm.handover, w, j), 1);  // our warp's arrival (with the bytes expected) and the peer warp's bytes
      mbar_init(SmemLayout::score_taken(sm.handover, w), 4);   // the peer warpgroup's four warps, once each has read its inbox
    }
    // A ring slot is full with the TMA's bytes and the producer's one arrival, or (FP8 cache) with
    // one arrival per widening warp.
    // FP8 operands: K lands by TMA (the loading warp's one arrival with its bytes), V transposed.
    constexpr uint32_t kFullArrivals = kStagingProducer ? kKvWidenThreads / 32 : 1;
    for (int s = 0; s < kStages; ++s) {
      mbar_init(sm.full_k(s), kFp8Operands ? 1 : kFullArrivals);
      mbar_init(sm.full_v(s), kFullArrivals);
      // Seesaw: each half of a slot has one reader that releases it (see kSeesaw).
      mbar_init(sm.empty_k(s), kSeesaw || kHalfRelease ? 1 : kConsumerWGs * kCluster);
      mbar_init(sm.empty_v(s), kSeesaw || kHalfRelease ? 1 : kConsumerWGs * kCluster);
    }
    for (int c = 0; c < (kChunkWaits ? kStages * kQKChunks : 0); ++c) mbar_init(sm.chunk_full(c / kQKChunks, c % kQKChunks), 1);
    for (int j = 0; j < kKvStagingSlots; ++j) {
      mbar_init(sm.staging_full_k(j), kKvIssueThreads);
      mbar_init(sm.staging_full_v(j), kFp8Operands ? 1 : kKvIssueThreads);  // FP8 operands' V: TMA
      mbar_init(sm.staging_empty_k(j), kKvWidenThreads / 32);
      mbar_init(sm.staging_empty_v(j), kKvWidenThreads / 32);
    }
    fence_mbar_init();
    tma_prefetch_desc(&p.q);
    if (!kStagingProducer) { tma_prefetch_desc(&p.k); tma_prefetch_desc(&p.v); }  // read without maps there
    tma_prefetch_desc(&p.o);
    if constexpr (kQvChunks > 0) { tma_prefetch_desc(&p.q_tail); tma_prefetch_desc(&p.k_tail); }
  }
  // The last CTA-wide barrier: after the role split only named barriers. In a cluster, the peer's
  // barriers must be initialised before our multicasts (kDimSplit: our scores) reach them.
  if (kCluster == 1 && kDimSplit == 1) __syncthreads(); else cluster_sync();
  // With PDL (a launch flag) this CTA may start while the previous kernel in the stream still
  // runs: only the set-up above overlaps it. Every thread waits here, before any global read or
  // write (a tile that loads no K/V block still writes O); the next PDL kernel may then start its
  // own set-up on the SMs this grid frees.
  griddep_wait();
  griddep_launch_dependents();

  const int wg = tid / 128;
  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (kWarpProducer || kStagingProducer ? tid < kProducerThreads : tid == 0) produce(p, sm, kCluster == 2 ? cluster_cta_rank() : 0u);
  } else if (kFirstConsumerRegs != kConsumerRegs) {
    // Uneven consumers (q_reg_dims): each warpgroup's walk is its own inlined copy, the role a
    // constant, so that ptxas gives each copy its own register budget.
    if (wg == 1) {
      setmaxnreg_inc<kFirstConsumerRegs>();
      consume(p, sm, 0, tid - 128);
    } else {
      setmaxnreg_inc<kConsumerRegs>();
      consume(p, sm, 1, tid - 256);
    }
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    consume(p, sm, wg - 1, tid - 128 * wg);
  }
  // NOTES: a CTA of a cluster must not exit while its peer may still multicast (or st.async) into
  // its shared memory or arrive on its barriers: everyone meets once more before exit.
  if (kCluster == 2 || kDimSplit > 1) cluster_sync();
}
