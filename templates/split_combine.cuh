// split_combine.cuh: the second kernel of a split-KV launch (spec key split_kv, combine=kernel).
// Rendered after attention_fwd.cuh, whose Params, seqlen_info and key split rule (visibility.cuh)
// it shares, so it merges exactly the splits the attention kernel wrote, by the row merge of
// split_merge.cuh. A sequence of one split has no partials: the attention kernel wrote its O and
// LSE. One warp per (query row, head), heads fastest. Launched with PDL after the attention kernel
// (the host's FLASHJIT_ATTENTION_FLAG_PDL): its set-up overlaps that kernel's tail, its reads wait
// for it.

constexpr int kCombineWarps = 8;

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
  const int splits = tile_key_split(p, seqlen_info(p, batch)).splits;  // the attention kernel's
  if (!split_writes_partials(p.num_splits, splits)) return;  // the attention kernel wrote this row
  griddep_wait();  // the attention kernel's partials are complete and visible
  merge_split_row(p, row, head, splits, lane);
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
