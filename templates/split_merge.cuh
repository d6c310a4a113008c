// split_merge.cuh: the merge of one query row's split-KV partials (spec key split_kv), the one
// statement of it, used by both combines: the second kernel (split_combine.cuh) and, with
// combine=inline, the attention kernel's last split of each tile (attention_fwd.cuh:
// merge_if_last_split). Rendered into every kernel (only split_kv ones call it) after
// attention_params.cuh and the wgmma shapes (pack2), before attention_fwd.cuh. For query row `row`
// (packed) and head `head`:
//   LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s
// over the sequence's `splits` splits, O_s normalised by split s's own sums, and the rendered
// Finalize's sink (kernel_finalize.cuh) counted once, here; a row whose splits saw no key gets
// O = 0 and LSE = -inf (with a sink, the sink's logit), like the attention kernel's.
//
// One warp a (row, head): lane l holds splits l, l + 32, ...; each lane then sums four columns of O
// in each 128-column pass, over the splits in order (a fixed order: the same inputs give the same
// bits, whichever combine runs it). The weights go from lane to lane by shuffles (a register array
// indexed by a split would go to local memory, and the attention kernel has no shared memory to
// spare). A split's passes are loaded together and the first splits' before the weights are known:
// a small decode's merge is a chain of L2 round trips (one a pass at head_dim_v 512 before), and it
// ends the call (the combine kernel after the attention kernel, or the last split's CTA).
// NOTES (correctness): the partials are read through L2 (ld.global.cg, volatile): with
// combine=inline other CTAs of the same grid wrote them, and the non-coherent path could serve
// stale lines; the caller has already ordered the reads after the writers' counts.

constexpr int kMergeMaxSplits = 128;  // max_splits' bound (launch/attention_args.cpp)
constexpr int kMergeSplitsPerLane = kMergeMaxSplits / 32;
constexpr int kMergePasses = (kHeadDimV + 127) / 128;  // four columns a lane a pass
// Splits whose partial O (every pass) is loaded before the weights are known: 4 at one pass, at
// more at most 32 floats a lane (the attention kernel merges with combine=inline, after its O).
constexpr int kMergePrefetch = kMergePasses <= 2 ? 4 : 2;
constexpr int kMergeUnroll = kMergePasses == 1 ? 4 : 2;  // later splits in flight together

FJ_DEVICE void load_partial_o(const Params& p, int split, int row, int head, int col, float (&v)[4]) {
  const float* src = p.o_partial + (((int64_t)split * p.total_q + row) * p.heads_q + head) * kHeadDimV + col;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(src) : "memory");
}

FJ_DEVICE float load_partial_lse(const Params& p, int split, int row, int head) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p.lse_partial + ((int64_t)split * p.heads_q + head) * p.total_q + row) : "memory");
  return v;
}

// weight[j] for a j known only at run time, by selects (indexing the array would put it in local memory).
FJ_DEVICE float weight_of(const float (&weight)[kMergeSplitsPerLane], int j) {
  float w = weight[0];
#pragma unroll
  for (int i = 1; i < kMergeSplitsPerLane; ++i) w = j == i ? weight[i] : w;
  return w;
}

FJ_DEVICE void merge_split_row(const Params& p, int row, int head, int splits, int lane) {
  // The first splits' partial O, in flight while the LSEs are read.
  float first[kMergePrefetch][kMergePasses][4];
#pragma unroll
  for (int s = 0; s < kMergePrefetch; ++s) {
#pragma unroll
    for (int k = 0; k < kMergePasses; ++k) {
      if (s < splits && 128 * k + 4 * lane < kHeadDimV) load_partial_o(p, s, row, head, 128 * k + 4 * lane, first[s][k]);
      else first[s][k][0] = first[s][k][1] = first[s][k][2] = first[s][k][3] = 0.f;
    }
  }

  // The splits' LSEs, their max and the weights exp(LSE_s - max) / sum.
  float weight[kMergeSplitsPerLane], top = FJ_NEG_INF;
#pragma unroll
  for (int j = 0; j < kMergeSplitsPerLane; ++j) {
    const int s = lane + 32 * j;
    weight[j] = s < splits ? load_partial_lse(p, s, row, head) : FJ_NEG_INF;
    top = fmaxf(top, weight[j]);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kMergeSplitsPerLane; ++j) {
    weight[j] = top == FJ_NEG_INF ? 0.f : __expf(weight[j] - top);  // 0 for -inf
    sum += weight[j];
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  // The row's factor and LSE (kernel_finalize.cuh): the sink, if any, counts here, once.
  const float inv_sum = Finalize::merge_o_scale(p, head, top, sum);
#pragma unroll
  for (int j = 0; j < kMergeSplitsPerLane; ++j) weight[j] *= inv_sum;
  if (p.lse != nullptr && lane == 0) p.lse[(int64_t)head * p.total_q + row] = Finalize::merge_lse(p, head, top, sum);

  // The prefetched splits (a weight of 0: that split's O is 0 or unused), then the rest.
  float acc[kMergePasses][4];
#pragma unroll
  for (int k = 0; k < kMergePasses; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.f;
#pragma unroll
  for (int s = 0; s < kMergePrefetch; ++s) {
    const float w = __shfl_sync(0xffffffffu, weight[0], s);
#pragma unroll
    for (int k = 0; k < kMergePasses; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[k][i] += w * first[s][k][i];
    }
  }
#pragma unroll kMergeUnroll
  for (int s = kMergePrefetch; s < splits; ++s) {
    const float w = __shfl_sync(0xffffffffu, weight_of(weight, s >> 5), s & 31);
    if (w == 0.f) continue;
#pragma unroll
    for (int k = 0; k < kMergePasses; ++k) {
      if (128 * k + 4 * lane >= kHeadDimV) continue;
      float v[4];
      load_partial_o(p, s, row, head, 128 * k + 4 * lane, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[k][i] += w * v[i];
    }
  }
  uint16_t* const out = p.o_rows + (int64_t)row * p.o_row_stride + (int64_t)head * p.o_head_stride;
#pragma unroll
  for (int k = 0; k < kMergePasses; ++k) {
    const int col = 128 * k + 4 * lane;
    if (col < kHeadDimV) {
      const uint32_t lo = pack2(acc[k][0], acc[k][1]), hi = pack2(acc[k][2], acc[k][3]);
      asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(out + col), "r"(lo), "r"(hi) : "memory");
    }
  }
}
