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

struct AttentionArgs {
  uint64_t q = 0, k = 0, v = 0, o = 0;  // CUdeviceptr of 16-bit elements
  uint64_t lse = 0;                     // float [batch, heads_q, seqlen_q], or 0 for none
  int batch = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads_q = 0;
  int heads_kv = 0;
  TensorStrides q_strides, k_strides, v_strides, o_strides;
  float softmax_scale = 0;  // 0 = 1/sqrt(head_dim)
};

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

// The kernel's tiles: query blocks x heads_q x batch. The grid walks them in one dimension.
uint64_t attention_tile_count(const KernelConfig& config, const AttentionArgs& args);

// Everything a launch needs to be safe, checked up front: errors name the field and what is allowed.
Status validate_attention_args(const KernelConfig& config, const AttentionArgs& args);

}  // namespace flashjit
