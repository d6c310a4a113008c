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
// a pass, over the splits in order (a fixed order: the same inputs give the same bits, whichever
// combine runs it). The weights go from lane to lane by shuffles (a register array indexed by a
// split would go to local memory, and the attention kernel has no shared memory to spare).
// NOTES (correctness): the partials are read through L2 (ld.global.cg, volatile): with
// combine=inline other CTAs of the same grid wrote them, and the non-coherent path could serve
// stale lines; the caller has already ordered the reads after the writers' counts.

constexpr int kMergeMaxSplits = 128;  // max_splits' bound (launch/attention_args.cpp)
constexpr int kMergeSplitsPerLane = kMergeMaxSplits / 32;
constexpr int kMergePrefetch = 4;  // partial O rows loaded before the weights are known

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
  // The first splits' partial O (first 128 columns), in flight while the LSEs are read.
  float first[kMergePrefetch][4];
#pragma unroll
  for (int s = 0; s < kMergePrefetch; ++s) {
    if (s < splits && 4 * lane < kHeadDimV) load_partial_o(p, s, row, head, 4 * lane, first[s]);
    else first[s][0] = first[s][1] = first[s][2] = first[s][3] = 0.f;
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

  uint16_t* const out = p.o_rows + (int64_t)row * p.o_row_stride + (int64_t)head * p.o_head_stride;
#pragma unroll
  for (int c0 = 0; c0 < kHeadDimV; c0 += 128) {
    const int col = c0 + 4 * lane;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (c0 == 0) {  // the prefetched splits (a weight of 0: that split's O is 0 or unused)
#pragma unroll
      for (int s = 0; s < kMergePrefetch; ++s) {
        const float w = __shfl_sync(0xffffffffu, weight[0], s);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += w * first[s][i];
      }
    }
#pragma unroll 4
    for (int s = c0 == 0 ? kMergePrefetch : 0; s < splits; ++s) {  // four loads in flight
      const float w = __shfl_sync(0xffffffffu, weight_of(weight, s >> 5), s & 31);
      if (w == 0.f || col >= kHeadDimV) continue;
      float v[4];
      load_partial_o(p, s, row, head, col, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += w * v[i];
    }
    if (col < kHeadDimV) {
      const uint32_t lo = pack2(acc[0], acc[1]), hi = pack2(acc[2], acc[3]);
      asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(out + col), "r"(lo), "r"(hi) : "memory");
    }
  }
}
