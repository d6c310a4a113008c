// split_combine.cuh: the second kernel of a split-KV launch (spec key split_kv). Rendered after
// attention_fwd.cuh, whose Params, seqlen_info and key split rule (visibility.cuh) it shares, so
// it merges exactly the splits the attention kernel wrote: for each query row and head,
//   LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s
// over the sequence's splits (key_split), O_s normalised by split s's own sums. A row whose
// splits saw no key gets O = 0 and LSE = -inf, like the attention kernel's.
//
// One warp per (query row, head), heads fastest: lane l holds splits l, l + 32, ...; each lane
// then sums four columns of O per pass, over the splits in order (a fixed order: the same
// inputs give the same bits). Launched with PDL after the attention kernel (the host's
// FLASHJIT_ATTENTION_FLAG_PDL): its set-up overlaps that kernel's tail, its reads wait for it.

constexpr int kCombineWarps = 8;
constexpr int kCombineMaxSplits = 128;
constexpr int kSplitsPerLane = kCombineMaxSplits / 32;

// The sequence of packed query row `row`: the last b with cu_seqlens_q[b] <= row (-1: none).
FJ_DEVICE int sequence_of_row(const Params& p, int row) {
  int lo = 0, hi = p.batch;  // cu_seqlens_q[lo] <= row < cu_seqlens_q[hi], if row is in a sequence
  if (row >= __ldg(p.cu_seqlens_q + hi)) return -1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (__ldg(p.cu_seqlens_q + mid) <= row) lo = mid; else hi = mid;
  }
  return lo;
}

constexpr int kPrefetchSplits = 4;  // partial O rows loaded before the weights are known

FJ_DEVICE void load_partial(const Params& p, int split, int row, int head, int col, float (&v)[4]) {
  const float* src = p.o_partial + (((int64_t)split * p.total_q + row) * p.heads_q + head) * kHeadDimV + col;
  asm("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(src));
}

extern "C" __global__ void __launch_bounds__(32 * kCombineWarps) flashjit_attention_combine(const __grid_constant__ Params p) {
  const int lane = threadIdx.x % 32;
  const int64_t item = (int64_t)blockIdx.x * kCombineWarps + threadIdx.x / 32;
  if (item >= (int64_t)p.total_q * p.heads_q) return;
  const int row = (int)(item / p.heads_q), head = (int)(item - (int64_t)row * p.heads_q);
  // NOTES (correctness): the sequence metadata is read before the wait for the attention kernel,
  // which does not write it: this grid starts only once every attention CTA has passed its own
  // wait for the kernels before it (which wrote the metadata, if any did). The partials are read
  // after the wait. Small decode cells are a chain of dependent reads: this takes two off it.
  const int batch = sequence_of_row(p, row);
  if (batch < 0) return;  // a row past the last sequence: no output
  const int splits = key_split(seqlen_info(p, batch).seqlen_k, kBlockN, p.num_splits, p.split_blocks).splits;
  griddep_wait();  // the attention kernel's partials are complete and visible
  // The first splits' partial O (first 128 columns), in flight while the LSEs are read.
  float first[kPrefetchSplits][4];
#pragma unroll
  for (int s = 0; s < kPrefetchSplits; ++s) {
    if (s < splits && 4 * lane < kHeadDimV) load_partial(p, s, row, head, 4 * lane, first[s]);
    else first[s][0] = first[s][1] = first[s][2] = first[s][3] = 0.f;
  }

  // The splits' LSEs, their max and the weights exp(LSE_s - max).
  float lse[kSplitsPerLane], top = FJ_NEG_INF;
#pragma unroll
  for (int j = 0; j < kSplitsPerLane; ++j) {
    const int s = lane + 32 * j;
    lse[j] = s < splits ? p.lse_partial[((int64_t)s * p.heads_q + head) * p.total_q + row] : FJ_NEG_INF;
    top = fmaxf(top, lse[j]);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kSplitsPerLane; ++j) {
    lse[j] = top == FJ_NEG_INF ? 0.f : __expf(lse[j] - top);  // now the weight (0 for -inf)
    sum += lse[j];
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float inv_sum = sum > 0.f ? 1.f / sum : 0.f;
  if (p.lse != nullptr && lane == 0) p.lse[(int64_t)head * p.total_q + row] = sum > 0.f ? top + __logf(sum) : FJ_NEG_INF;

  // O: four columns a lane per pass, the weights read from shared memory (a split's weight by its
  // index: a register array indexed so would go to local memory).
  __shared__ float weights[kCombineWarps][kCombineMaxSplits];
  float* const my_weights = weights[threadIdx.x / 32];
#pragma unroll
  for (int j = 0; j < kSplitsPerLane; ++j) my_weights[lane + 32 * j] = lse[j] * inv_sum;
  __syncwarp();
  uint16_t* const out = p.o_rows + (int64_t)row * p.o_row_stride + (int64_t)head * p.o_head_stride;
#pragma unroll
  for (int c0 = 0; c0 < kHeadDimV; c0 += 128) {
    const int col = c0 + 4 * lane;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int s = 0;
    if (c0 == 0) {  // the prefetched splits (a weight of 0: that split's O is 0 or unused)
#pragma unroll
      for (; s < kPrefetchSplits; ++s)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += (s < splits ? my_weights[s] : 0.f) * first[s][i];
    }
#pragma unroll 4
    for (; s < splits && col < kHeadDimV; ++s) {  // four loads in flight
      const float w = my_weights[s];
      if (w == 0.f) continue;
      float v[4];
      load_partial(p, s, row, head, col, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += w * v[i];
    }
    if (col < kHeadDimV) {
      const uint32_t lo = pack2(acc[0], acc[1]), hi = pack2(acc[2], acc[3]);
      asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(out + col), "r"(lo), "r"(hi) : "memory");
    }
  }
}

// ---------------------------------------------------------------- merge of two attention states
// flashjit_merge_attention_states: O = (w_a O_a + w_b O_b) / (w_a + w_b) with w = exp(LSE - max),
// LSE = max + log(w_a + w_b), per (row, head); a row whose two LSEs are -inf gets O = 0, LSE = -inf
// (vLLM's merge_attn_states). A warp per (row, head), four columns a lane per pass.
FJ_DEVICE void load4(const void* base, int64_t offset, bool float32, float (&v)[4]) {
  if (float32) {
    asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"((const float*)base + offset));
    return;
  }
  uint32_t lo, hi;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "l"((const uint16_t*)base + offset));
  const FloatPair a = unpack2(lo), b = unpack2(hi);
  v[0] = a.lo, v[1] = a.hi, v[2] = b.lo, v[3] = b.hi;
}

extern "C" __global__ void __launch_bounds__(32 * kCombineWarps) flashjit_merge_states(const __grid_constant__ MergeParams m) {
  griddep_wait();
  const int lane = threadIdx.x % 32;
  const int64_t item = (int64_t)blockIdx.x * kCombineWarps + threadIdx.x / 32;
  if (item >= (int64_t)m.rows * m.heads) return;
  const int row = (int)(item / m.heads), head = (int)(item - (int64_t)row * m.heads);
  const float la = m.lse_a[(int64_t)head * m.lse_head_stride + row], lb = m.lse_b[(int64_t)head * m.lse_head_stride + row];
  const float top = fmaxf(la, lb);
  const float wa = top == FJ_NEG_INF ? 0.f : __expf(la - top), wb = top == FJ_NEG_INF ? 0.f : __expf(lb - top);
  const float sum = wa + wb, inv = sum > 0.f ? 1.f / sum : 0.f;
  if (m.lse_out != nullptr && lane == 0) m.lse_out[(int64_t)head * m.lse_head_stride + row] = sum > 0.f ? top + __logf(sum) : FJ_NEG_INF;
  const float ca = wa * inv, cb = wb * inv;
#pragma unroll
  for (int c0 = 0; c0 < kHeadDimV; c0 += 128) {
    const int col = c0 + 4 * lane;
    if (col >= kHeadDimV) continue;
    float a[4] = {0.f, 0.f, 0.f, 0.f}, b[4] = {0.f, 0.f, 0.f, 0.f};
    if (ca != 0.f) load4(m.o_a, row * m.a_row_stride + head * m.a_head_stride + col, m.float32_states, a);
    if (cb != 0.f) load4(m.o_b, row * m.b_row_stride + head * m.b_head_stride + col, m.float32_states, b);
    float o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = ca * a[i] + cb * b[i];
    const int64_t at = row * m.out_row_stride + head * m.out_head_stride + col;
    if (m.float32_out) {
      asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"((float*)m.o_out + at), "f"(o[0]), "f"(o[1]), "f"(o[2]), "f"(o[3]) : "memory");
    } else {
      asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"((uint16_t*)m.o_out + at), "r"(pack2(o[0], o[1])), "r"(pack2(o[2], o[3])) : "memory");
    }
  }
}
