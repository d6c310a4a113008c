// attention_params.cuh: the attention kernel's parameters, defined once for both sides: rendered
// into every kernel (after ptx.cuh, which defines TmaDesc and the fixed-width integers) and
// included by the host (src/launch/attention_launch.hpp, which defines them the same way), so a
// field cannot be added, moved or retyped on one side only. Built per launch by
// make_kernel_params (src/launch/attention_launch.cpp).

struct Params {
  TmaDesc q, k, v;   // 4-D maps over [batch, seqlen, heads, head_dim] (packed: batch 1, seqlen the rows;
                     // paged K/V: [num_pages, page_size, heads, head_dim]); box rows kBlockM (q),
                     // kBlockN / kCluster (k, v; paged: kv_rows_per_load)
  TmaDesc o;         // box rows 64: each consumer warpgroup stores its own slice (dense O)
  float* lse;        // dense: [batch, heads_q, seqlen_q]; varlen: [heads_q, total_q]; natural log; or null
  int seqlen_q;      // dense: every sequence's; varlen: an upper bound
  int seqlen_k;      // dense K/V: every sequence's; with seqused_k or paged: an upper bound
  int heads_q;
  float scale_log2;  // softmax scale * log2(e)
  int batch;
  // The tile deal (tile_schedule.cuh), fitted by the host to a grid of deal_ctas CTAs, and the
  // tile decode's divisors as (multiplier, shift): query blocks per head (all of them, and phase
  // 1's), the heads blocks are held back from, heads_q, and query heads per K/V head.
  int fill_blocks, held_heads, deal_ctas, deal_full_rounds, deal_last_units, deal_odd_cta;
  uint32_t div_m_blocks[2], div_paired[2], div_held_heads[2], div_heads_q[2], div_group[2];
  // Engine inputs (spec keys varlen, paged), read on the device per tile by seqlen_info; null
  // where not given. Device metadata is trusted here (flashjit_check_engine_metadata checks it).
  const int* cu_seqlens_q;  // varlen: [batch + 1] query row offsets into Q, O and LSE
  const int* cu_seqlens_k;  // varlen, packed K/V: [batch + 1] key row offsets
  const int* seqused_k;     // [batch] keys per sequence (paged: always)
  const int* block_table;   // paged: [batch][block_table_stride] page indices
  int64_t block_table_stride;
  int total_q;              // varlen: rows of Q and O (LSE's row count per head)
  int page_size;            // paged: keys per page
  int kv_rows_per_load;     // paged: rows per K/V load, gcd(page_size, kBlockN): no load straddles a page
  int num_pages;            // paged: the pool's pages (the K/V maps' outer extent: TMA bounds every load)
  uint32_t div_page_size[2];
  // varlen O, stored row by row up to each sequence's end (a TMA store of a packed tensor would
  // write into the next sequence): base and element strides.
  uint16_t* o_rows;
  int64_t o_row_stride, o_head_stride;
  // Decode (spec keys pack_gqa, split_kv; visibility.cuh's pack and split rules).
  // pack_gqa: a tile holds pack_heads query heads (a power of two, 2^pack_shift, dividing heads_q /
  // heads_kv) of tokens_per_tile = kBlockM / pack_heads queries each, packed row r = token x
  // pack_heads + head; tiles go over tile_heads = heads_q / pack_heads heads (1, heads_q, heads_q
  // without packing).
  int pack_heads, pack_shift, tile_heads;
  // split_kv: num_splits splits a sequence at most (the grid's), split_blocks K/V blocks each (0:
  // each sequence's blocks cut into num_splits); with num_splits > 1 the kernel writes float32
  // partials [split][total_q][heads_q][head_dim_v] and LSE [split][heads_q][total_q] (natural log),
  // and flashjit_attention_combine merges them (combine=inline: the last split's warpgroup). A
  // sequence of one split writes O and LSE directly. div_split_heads: tile_heads x batch.
  int num_splits, split_blocks;
  uint32_t div_split_heads[2];
  float* o_partial;
  float* lse_partial;
  // scheduler=dynamic: two words at the workspace's start, zero between launches: the next tile to
  // take, and the CTAs done (the last one puts both back to zero).
  uint32_t* tile_counter;
  // combine=inline: merge_counter_count words after the tile counter's 256 bytes (when there is
  // one), zero between launches: each warpgroup's rows count their splits in, and the last one
  // merges the partials and puts its counter back to zero (attention_fwd.cuh: merge_if_last_split).
  uint32_t* merge_counters;
  // Masks and score modifiers (spec keys window, chunk, softcap, sinks, alibi), each read only by a
  // kernel that compiled its feature in (kernel_mask.cuh); the off values otherwise. Positions are
  // bottom-right aligned (visibility.cuh: MaskRule).
  int window_left, window_right;  // keys left / right of a row's position a row sees; -1: unbounded
  int chunk;                      // keys per attention chunk; 0: none
  float softcap;                  // 0: none
  const void* sinks;              // [heads_q] sink logits, float32 or (sinks_bf16) bf16; null: none
  int sinks_bf16;
  const float* alibi_slopes;      // [heads_q], or [batch][alibi_batch_stride]; null: none
  int64_t alibi_batch_stride;
  // The kernel's split of the score path (score_mod.cuh: score_unit): with softcap, tanh's factor
  // scale / softcap per q . k (scale_log2 is then softcap x log2(e)); 1 / score_unit, a logit in
  // the units of the kernel's scores (ALiBi's slopes).
  float softcap_prescale;
  float inv_score_unit;
  // kv_dtype=e4m3 (issue 39): K and V in FP8 e4m3fn, read by the producer warpgroup itself (the k
  // and v maps are unused), widened to the queries' dtype in shared memory and multiplied by their
  // scales on the way. Layouts as the maps': contiguous [batch, seqlen_k, heads_kv, d], packed
  // [total_k, heads_kv, d] (k_row0 + key) or paged [num_pages, page_size, heads_kv, d]; strides in
  // elements (bytes): batch (paged: page), row, head. Scales float32 at batch x [0] + K/V head x [1]
  // (vLLM's per-tensor k_scale: both 0; FA3's descale [batch, heads_kv]); null: 1.
  const unsigned char* k_fp8;
  const unsigned char* v_fp8;
  int64_t k_fp8_strides[3], v_fp8_strides[3];
  const float* k_scale;
  const float* v_scale;
  int64_t k_scale_strides[2], v_scale_strides[2];
  // dtype=e4m3 (FP8 operands): Q, K and V e4m3 with FlashAttention-3's descales; K and V by their
  // byte maps (k, v; K into the ring, V staged and transposed), their descales k_scale and v_scale,
  // Q's here (same indexing; null: 1). O in out_dtype.
  const float* q_scale;
  int64_t q_scale_strides[2];
  // qv=1 (FlashAttention-3's split MLA form): q and k maps over the two tensors' last head_dim -
  // head_dim_v columns (the rotary part); the q and k maps above are then over qv and V. Last, so
  // that no field before them moves.
  TmaDesc q_tail, k_tail;
};

// flashjit_merge_states (split_combine.cuh; flashjit_merge_attention_states): two attention states
// of the same rows and heads merged into one, as cascade and shared-prefix attention need them.
// O tensors [rows, heads, head_dim_v] with element strides, float32 or the kernel's 16-bit dtype;
// LSE float [heads][lse_head_stride] (natural log), row r at r. Built by make_merge_params
// (src/launch/merge_states.cpp).
struct MergeParams {
  const void* o_a;
  const void* o_b;
  void* o_out;
  const float* lse_a;
  const float* lse_b;
  float* lse_out;  // or null
  int64_t a_row_stride, a_head_stride, b_row_stride, b_head_stride, out_row_stride, out_head_stride;
  int64_t lse_head_stride;
  int rows, heads;
  int float32_states, float32_out;  // 1: that side is float32; 0: the kernel's dtype
};
