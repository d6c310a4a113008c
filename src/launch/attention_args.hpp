// What one attention forward call takes: raw device pointers, shapes and element strides.
// Layout [batch, seqlen, heads, head_dim], head_dim contiguous; any batch/row/head strides whose
// byte values TMA accepts (multiples of 16), so a packed QKV tensor works as it is.
#pragma once
#include <cstdint>

#include "common/status.hpp"
#include "config/kernel_config.hpp"

namespace flashjit {

struct TensorStrides {
  int64_t batch = 0;  // elements between batches
  int64_t row = 0;    // elements between sequence positions
  int64_t head = 0;   // elements between heads
};

// The engine's inputs (spec varlen=1 / paged=1): device metadata the kernel reads per sequence,
// and the host extents of the packed and paged tensors. All 0 in a dense launch.
//   varlen: Q and O are [total_q, heads, dim] (the batch stride is ignored), cu_seqlens_q int32
//           [batch + 1]; LSE float [heads_q, total_q]. K/V packed [total_k, heads_kv, dim] with
//           cu_seqlens_k, else [batch, seqlen_k, ...] as in a dense launch (or paged).
//   paged:  K and V pools [num_pages, page_size, heads_kv, dim] (k/v_strides.batch = the page
//           stride), block_table int32 [batch][block_table_stride], seqused_k int32 [batch].
//   seqused_k (either): keys per sequence; seqlen_q and seqlen_k are then upper bounds.
struct EngineInputs {
  uint64_t cu_seqlens_q = 0, cu_seqlens_k = 0, seqused_k = 0, block_table = 0;  // CUdeviceptr
  int64_t block_table_stride = 0;
  int page_size = 0, num_pages = 0;
  int total_q = 0, total_k = 0;
};

// The caller's workspace (spec keys split_kv, scheduler=dynamic): the dynamic scheduler's tile
// counter, then the splits' float32 partials; and the bounds of the split count (split_kv). All 0
// for specs that need neither.
struct DecodeInputs {
  uint64_t workspace = 0, workspace_bytes = 0;  // CUdeviceptr, 256-byte aligned; its size
  int max_splits = 0;  // 1..128: the most splits a sequence (the grid's split count, at most)
  int split_keys = 0;  // 0: each sequence's keys cut into the launch's splits; else keys per split
};

// Masks and score modifiers (spec keys window, chunk, softcap, sinks, alibi; MASKS AND SCORES in
// flashjit.h): run-time values, each read only by a kernel that compiled its feature in; off values
// below. Positions are bottom-right aligned (templates/visibility.cuh, MaskRule).
struct FeatureInputs {
  int window_left = -1, window_right = -1;  // keys left / right of a row's position; -1: unbounded
  int chunk = 0;                            // keys per attention chunk; 0: none
  float softcap = 0;                        // c in c * tanh(s * scale / c); 0: none
  uint64_t sinks = 0;                       // CUdeviceptr [heads_q] sink logits (not scaled); 0: none
  bool sinks_bf16 = false;                  // their type: float32, or bf16
  uint64_t alibi_slopes = 0;                // CUdeviceptr float32 [heads_q] or [batch][alibi_batch_stride]
  int64_t alibi_batch_stride = 0;           // elements between sequences' slopes; 0: one [heads_q] for all
};

// The FP8 cache (spec key kv_dtype=e4m3): K and V are e4m3 (one byte an element; their strides
// count bytes), dequantised as value x scale. Scales float32 at batch x batch_stride + K/V head x
// head_stride: one per tensor (both strides 0, vLLM's k_scale), per K/V head (0, 1) or FA3's
// descale [batch, heads_kv]. Required with the key, refused without it.
// FP8 operands (spec dtype=e4m3): Q, K and V e4m3 (strides in bytes), the same k_scale and v_scale
// (FlashAttention-3's k_descale, v_descale) and q_scale (q_descale) indexed the same way.
struct Fp8Inputs {
  uint64_t k_scale = 0, v_scale = 0;  // CUdeviceptr float32
  int64_t k_scale_batch_stride = 0, k_scale_head_stride = 0;
  int64_t v_scale_batch_stride = 0, v_scale_head_stride = 0;
  uint64_t q_scale = 0;  // dtype=e4m3 only
  int64_t q_scale_batch_stride = 0, q_scale_head_stride = 0;
  bool any() const {
    return k_scale || v_scale || k_scale_batch_stride || k_scale_head_stride || v_scale_batch_stride || v_scale_head_stride ||
           q_scale || q_scale_batch_stride || q_scale_head_stride;
  }
};

struct AttentionArgs {
  uint64_t q = 0, k = 0, v = 0, o = 0;  // CUdeviceptr of 16-bit elements (K and V: e4m3 with kv_dtype=e4m3)
  uint64_t lse = 0;                     // float [batch, heads_q, seqlen_q] (varlen: [heads_q, total_q]), or 0
  int batch = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads_q = 0;
  int heads_kv = 0;
  TensorStrides q_strides, k_strides, v_strides, o_strides;
  float softmax_scale = 0;  // 0 = 1/sqrt(head_dim)
  EngineInputs engine;
  DecodeInputs decode;
  FeatureInputs features;
  Fp8Inputs fp8;
  // qv=1 (FlashAttention-3's split MLA form, MLA SPLIT FORM in flashjit.h): qv [.., heads_q,
  // head_dim_v] beside q, whose rows are then the other head_dim - head_dim_v columns (rotary), as
  // k's are beside v; scores q.k + qv.v. 0 without the key.
  uint64_t qv = 0;
  TensorStrides qv_strides;
};

// How a launch's tiles cover the heads and keys (the kernel's Params of the same names): with
// packed GQA (pack_gqa) pack_heads query heads of tokens_per_tile queries share a tile's block_m
// rows, tiles go over tile_heads head groups; with split_kv each sequence's keys are cut into at
// most `splits` splits, each its own tiles. Without either: 1 head, block_m queries, heads_q, 1.
struct TileGeometry {
  int pack_heads = 1, pack_shift = 0, tokens_per_tile = 0, tile_heads = 0;
  int splits = 1;
};

// The CTAs the device holds at once for the kernel: sm_count x ctas_per_sm (0 without a device).
int resident_ctas(const KernelConfig& config, int sm_count);

// sm_count: the device's SMs, from which the split count is chosen so that every resident CTA has
// a tile (at most max_splits; 0: max_splits, as in a launch of one CTA per tile).
TileGeometry tile_geometry(const KernelConfig& config, const AttentionArgs& args, int sm_count);

// Bytes of the split partials a split_kv launch writes (0 for other specs): max_splits x total_q x
// heads_q rows of head_dim_v floats (O, first) and as many floats (LSE), each part 256-byte aligned.
uint64_t split_workspace_bytes(const KernelConfig& config, const AttentionArgs& args);
// The dynamic scheduler's tile counter (scheduler=dynamic): kTileCounterBytes at the workspace's
// start, zeroed once by the caller (every launch leaves it at zero).
constexpr uint64_t kTileCounterBytes = 256;  // two words, what follows them 256-byte aligned
// combine=inline's merge counters (visibility.cuh: merge_counter_count words; 0 for combine=kernel),
// after the tile counter (merge_counters_offset), zeroed once by the caller like it.
int64_t merge_counter_words(const KernelConfig& config, const AttentionArgs& args);
uint64_t merge_counters_offset(const KernelConfig& config);
// Whether a combine=inline launch merges its splits in the attention kernel: where a warpgroup
// holds few rows (visibility.cuh: merges_inline); the others run the combine kernel.
bool merges_splits_inline(const KernelConfig& config, const AttentionArgs& args);
// The counters' part of the workspace, before the partials: the tile counter and the merge
// counters, 256-byte aligned; 0 for the static deal with combine=kernel.
uint64_t schedule_workspace_bytes(const KernelConfig& config, const AttentionArgs& args);
// The whole workspace a launch needs (flashjit_attention_workspace_size): the counters, then the
// split partials.
uint64_t attention_workspace_bytes(const KernelConfig& config, const AttentionArgs& args);
// The splits the workspace holds: max_splits, or fewer where workspace_bytes holds fewer (a
// mixed batch's total_q can make max_splits' workspace large; a smaller one caps the split count).
// The partials are laid out for this many splits.
int split_capacity(const KernelConfig& config, const AttentionArgs& args);
// Where the LSE part starts in the split partials (which start schedule_workspace_bytes in).
uint64_t split_lse_offset(const KernelConfig& config, const AttentionArgs& args);

// Arguments with the extents only (no tensors): what the kernel choice and the tile deal read.
inline AttentionArgs attention_extents(int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv) {
  AttentionArgs a;
  a.batch = batch;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  return a;
}

// Contiguous [batch, seqlen, heads, head_dim] strides.
TensorStrides contiguous_bshd(int seqlen, int heads, int head_dim);

// Query blocks per head, rounded up to whole clusters (a padding CTA loads its share and stores
// nothing); the kernel's padded_m_blocks.
uint64_t attention_query_blocks(const KernelConfig& config, const AttentionArgs& args);

// The kernel's tiles: query blocks x tile heads x batch x splits (the geometry's; without pack_gqa
// and split_kv: query blocks x heads_q x batch). The grid walks them in one dimension.
uint64_t attention_tile_count(const KernelConfig& config, const AttentionArgs& args, int splits = 1);

// Rows per K/V load of a paged kernel: gcd(page_size, block_n), so no load straddles a page.
int paged_rows_per_load(int page_size, int block_n);

// Everything a launch needs to be safe, checked up front: errors name the field and what is allowed.
// Device metadata (cu_seqlens, seqused_k, block tables) is trusted here; its host-side fields are checked.
Status validate_attention_args(const KernelConfig& config, const AttentionArgs& args);

}  // namespace flashjit
