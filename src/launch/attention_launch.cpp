#include "launch/attention_launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <utility>

#include "driver/tensor_map.hpp"
#include "launch/feature_args.hpp"
#include "launch/tile_schedule.hpp"

// The kernel's deal and divisors, compiled here as host code: the host fits them with it.
#include "../../templates/tile_schedule.cuh"
#include "../../templates/score_mod.cuh"

namespace flashjit {
namespace {

// A tensor's columns: V, O and (qv=1) qv head_dim_v; Q and K head_dim, or with qv=1 the rest of
// it (the rotary part, q and k).
int map_columns(const AttentionSpec& s, std::string_view name) {
  if (name == "v" || name == "o" || name == "qv") return s.effective_head_dim_v();
  return s.qv ? s.head_dim - s.effective_head_dim_v() : s.head_dim;
}

TensorMapRequest map_request(const char* name, uint64_t base, const KernelConfig& c, int batch, int seqlen, int heads,
                             const TensorStrides& strides, int box_rows) {
  TensorMapRequest r;
  r.name = name;
  r.base = base;
  // O is 16-bit (out_dtype) also where Q, K and V are e4m3.
  r.dtype = name[0] == 'o' ? c.spec.output_dtype() : c.spec.dtype;
  r.batch = batch;
  r.seqlen = seqlen;
  r.heads = heads;
  r.head_dim = map_columns(c.spec, name);
  r.stride_seqlen = strides.row;
  r.stride_heads = strides.head;
  r.stride_batch = strides.batch;
  r.box_rows = uint32_t(box_rows);
  return r;
}

// The maps' extents by layout: dense [batch, seqlen, heads, d]; packed [1, rows, heads, d];
// paged [num_pages, page_size, heads, d] (engine inputs: launch/attention_args.hpp).
TensorMapRequest q_or_o_request(const char* name, uint64_t base, const KernelConfig& c, const AttentionArgs& a,
                                const TensorStrides& strides, int box_rows) {
  if (!c.spec.varlen) return map_request(name, base, c, a.batch, a.seqlen_q, a.heads_q, strides, box_rows);
  const TensorStrides packed = {strides.row, strides.row, strides.head};
  return map_request(name, base, c, 1, a.engine.total_q, a.heads_q, packed, box_rows);
}

// Packed GQA's Q: dims 1 and 2 swapped ([rows, heads] -> [heads, rows]) and a box of pack_heads
// heads x tokens_per_tile rows, so a tile's rows come out query-major (row = query x pack_heads +
// head), as the kernel's row_target reads them.
TensorMapRequest packed_heads_q_request(const char* name, uint64_t base, const KernelConfig& c, const AttentionArgs& a,
                                        const TensorStrides& strides, const TileGeometry& g) {
  TensorMapRequest r = map_request(name, base, c, 1, a.heads_q, a.engine.total_q, {strides.row, strides.head, strides.row}, g.pack_heads);
  r.box_heads = uint32_t(g.tokens_per_tile);
  return r;
}

// Q's map (or qv's, or with qv=1 q's): packed heads, or block_m rows.
TensorMapRequest q_request(const char* name, uint64_t base, const KernelConfig& c, const AttentionArgs& a, const TensorStrides& strides,
                           const TileGeometry& g) {
  return c.spec.pack_gqa ? packed_heads_q_request(name, base, c, a, strides, g) : q_or_o_request(name, base, c, a, strides, c.spec.block_m);
}

TensorMapRequest kv_request(const char* name, uint64_t base, const KernelConfig& c, const AttentionArgs& a,
                            const TensorStrides& strides) {
  const EngineInputs& e = a.engine;
  if (c.spec.paged) {
    return map_request(name, base, c, e.num_pages, e.page_size, a.heads_kv, strides, paged_rows_per_load(e.page_size, c.spec.block_n));
  }
  if (e.cu_seqlens_k != 0) {
    const TensorStrides packed = {strides.row, strides.row, strides.head};
    return map_request(name, base, c, 1, e.total_k, a.heads_kv, packed, c.spec.block_n);
  }
  return map_request(name, base, c, a.batch, a.seqlen_k, a.heads_kv, strides, c.spec.block_n / c.spec.cluster);
}

// The engine inputs into the parameters (null and 0 in a dense launch).
void set_engine_inputs(KernelParams& p, const KernelConfig& c, const AttentionArgs& a) {
  const EngineInputs& e = a.engine;
  p.cu_seqlens_q = reinterpret_cast<const int*>(e.cu_seqlens_q);
  p.cu_seqlens_k = reinterpret_cast<const int*>(e.cu_seqlens_k);
  p.seqused_k = reinterpret_cast<const int*>(e.seqused_k);
  p.block_table = reinterpret_cast<const int*>(e.block_table);
  p.block_table_stride = e.block_table_stride;
  p.total_q = e.total_q;
  p.page_size = e.page_size;
  p.num_pages = e.num_pages;
  p.kv_rows_per_load = c.spec.paged ? paged_rows_per_load(e.page_size, c.spec.block_n) : 0;
  const FastDivisor by_page = fit_divisor(uint32_t(c.spec.paged ? e.page_size : 1));
  p.div_page_size[0] = by_page.mul, p.div_page_size[1] = by_page.shift;
  p.o_rows = reinterpret_cast<uint16_t*>(a.o);
  p.o_row_stride = a.o_strides.row;
  p.o_head_stride = a.o_strides.head;
}

// Packed heads and key splits (the geometry) and the workspace's two parts.
void set_decode_inputs(KernelParams& p, const KernelConfig& c, const AttentionArgs& a, const TileGeometry& g) {
  p.pack_heads = g.pack_heads;
  p.pack_shift = g.pack_shift;
  p.tile_heads = g.tile_heads;
  p.num_splits = g.splits;
  p.split_blocks = a.decode.split_keys / c.spec.block_n;
  const FastDivisor by_split_heads = fit_divisor(uint32_t(g.tile_heads) * uint32_t(a.batch));
  p.div_split_heads[0] = by_split_heads.mul, p.div_split_heads[1] = by_split_heads.shift;
  if (c.spec.dynamic_schedule) p.tile_counter = reinterpret_cast<uint32_t*>(a.decode.workspace);
  if (!c.spec.split_kv) return;
  // combine=inline where a warpgroup's rows are few (merges_inline); else the counters stay unused
  // and the combine kernel runs (runs_combine).
  if (merges_splits_inline(c, a)) {
    p.merge_counters = reinterpret_cast<uint32_t*>(a.decode.workspace + merge_counters_offset(c));
  }
  const uint64_t partials = a.decode.workspace + schedule_workspace_bytes(c, a);
  p.o_partial = reinterpret_cast<float*>(partials);
  p.lse_partial = reinterpret_cast<float*>(partials + split_lse_offset(c, a));
}


}  // namespace

float launch_softmax_scale(const KernelConfig& c, const AttentionArgs& a) {
  return a.softmax_scale != 0 ? a.softmax_scale : 1.0f / std::sqrt(float(c.spec.head_dim));
}

// (validated: the args hold the off values for the features the spec did not compile in).
void set_feature_inputs(KernelParams& p, const KernelConfig& c, const AttentionArgs& a) {
  const WindowChunk w = launch_window_chunk(c.spec, a);
  p.window_left = w.window_left;
  p.window_right = w.window_right;
  p.chunk = w.chunk;
  const FeatureInputs& f = a.features;
  p.softcap = c.spec.softcap ? f.softcap : 0.f;
  p.sinks = c.spec.sinks ? reinterpret_cast<const void*>(f.sinks) : nullptr;
  p.sinks_bf16 = c.spec.sinks && f.sinks_bf16 ? 1 : 0;
  p.alibi_slopes = c.spec.alibi ? reinterpret_cast<const float*>(f.alibi_slopes) : nullptr;
  p.alibi_batch_stride = c.spec.alibi ? f.alibi_batch_stride : 0;
  // The kernel keeps scores in units of score_unit (templates/score_mod.cuh): with a cap the
  // softmax's own scale is 1, the tanh takes q . k x scale / softcap and the exp2 step folds in
  // softcap x log2(e); without one the scale stays folded into the exp2 step.
  const float scale = launch_softmax_scale(c, a);
  p.scale_log2 = exp2_scale(scale, p.softcap);
  p.softcap_prescale = p.softcap > 0 ? scale / p.softcap : 0.f;
  p.inv_score_unit = 1.f / score_unit(scale, p.softcap);
}

void set_tile_deal(KernelParams& p, const KernelConfig& c, const AttentionArgs& a, unsigned grid_ctas, CausalHold hold) {
  // The kernel's tile_deal as the kernel builds it on this grid; phase 1's rounds fitted by the
  // deal itself.
  TileDeal d{};
  d.ctas = grid_ctas > 0 ? grid_ctas : 1;
  const bool device_lengths = c.spec.varlen || c.spec.paged;
  const int splits = std::max(1, p.num_splits);  // set_decode_inputs first
  const TileGeometry g = tile_geometry(c, a, 0);
  set_deal_shape(d, uint32_t(attention_query_blocks(c, a)), uint32_t(g.tile_heads) * uint32_t(a.batch) * uint32_t(splits));
  d.unit = deal_unit(c.spec.causal, c.spec.cluster, d.ctas, uint32_t(attention_tile_count(c, a, splits)));  // below 2^31: validated
  // The kernel holds nothing back where it reads the lengths (kHoldBack): its rounds are fitted
  // without a hold there, whatever was asked.
  if (device_lengths) hold = CausalHold{};
  d.fill = uint32_t(std::clamp<int64_t>(hold.fill_blocks, 0, d.m_blocks));
  d.held_heads = uint32_t(std::clamp<int64_t>(hold.held_heads, 0, d.heads));
  fit_tile_deal(d);
  p.fill_blocks = int(d.fill);
  p.held_heads = int(held_heads(d));
  p.deal_ctas = int(grid_ctas);
  p.deal_full_rounds = int(d.full_rounds);
  p.deal_last_units = int(d.last_units);
  p.deal_odd_cta = int(d.odd_cta);
  // (multiplier, shift) pairs for the kernel's fast_div.
  const std::pair<uint32_t*, FastDivisor> divisors[] = {
      {p.div_m_blocks, fit_divisor(d.m_blocks)},         {p.div_paired, d.by_paired},
      {p.div_held_heads, d.by_held_heads},                {p.div_heads_q, fit_divisor(uint32_t(g.tile_heads))},
      {p.div_group, fit_divisor(uint32_t(a.heads_q / a.heads_kv / g.pack_heads))}};
  for (const auto& [to, from] : divisors) to[0] = from.mul, to[1] = from.shift;
}

int ctas_per_tile(const KernelConfig& c) { return c.spec.dim_split ? 2 : 1; }

unsigned deal_ctas(const KernelConfig& c, const AttentionArgs& a, int max_ctas) {
  return attention_launch_shape(c, a, max_ctas).grid_x / unsigned(ctas_per_tile(c));
}

LaunchShape attention_launch_shape(const KernelConfig& c, const AttentionArgs& a, int max_ctas) {
  LaunchShape shape;
  // Persistent (config.persistent): at most ctas_per_sm CTAs per SM, each walking several tiles (the
  // kernel's tile_index); else one CTA per tile (clusters, or a Q buffer that would wait for the O
  // store, where fresh CTAs measured faster: bench/NOTES.md, version 12).
  // dim_split=1: a cluster of two CTAs a tile (config.persistent is off), which the kernel's deal
  // counts as one (deal_ctas).
  const uint64_t tiles = attention_tile_count(c, a, tile_geometry(c, a, max_ctas).splits);
  const uint64_t resident = uint64_t(resident_ctas(c, max_ctas));
  const bool persistent = c.persistent && resident > 0 && tiles > resident;
  shape.grid_x = unsigned(persistent ? resident : tiles * uint64_t(ctas_per_tile(c)));
  shape.grid_y = shape.grid_z = 1;
  shape.cluster_x = unsigned(c.spec.dim_split ? 2 : c.spec.cluster);
  shape.block_x = unsigned(c.threads);
  shape.dynamic_smem_bytes = unsigned(c.smem_bytes);
  return shape;
}

// kv_dtype=e4m3: the caches' bases and strides (bytes), as the producer's row loads read them;
// both FP8 forms: the scales (FP8 operands read K and V through their byte maps).
void set_fp8_inputs(KernelParams& p, const KernelConfig& c, const AttentionArgs& a) {
  if (!c.spec.kv_fp8() && !c.spec.fp8_operands()) return;
  if (c.spec.kv_fp8()) {
    p.k_fp8 = reinterpret_cast<const unsigned char*>(a.k);
    p.v_fp8 = reinterpret_cast<const unsigned char*>(a.v);
    const TensorStrides* strides[] = {&a.k_strides, &a.v_strides};
    int64_t* out[] = {p.k_fp8_strides, p.v_fp8_strides};
    for (int i = 0; i < 2; ++i) {
      // A packed cache's batch stride is unused (rows counted from cu_seqlens_k): 0 keeps it so.
      out[i][0] = a.engine.cu_seqlens_k != 0 && !c.spec.paged ? 0 : strides[i]->batch;
      out[i][1] = strides[i]->row;
      out[i][2] = strides[i]->head;
    }
  }
  p.k_scale = reinterpret_cast<const float*>(a.fp8.k_scale);
  p.v_scale = reinterpret_cast<const float*>(a.fp8.v_scale);
  p.k_scale_strides[0] = a.fp8.k_scale_batch_stride;
  p.k_scale_strides[1] = a.fp8.k_scale_head_stride;
  p.v_scale_strides[0] = a.fp8.v_scale_batch_stride;
  p.v_scale_strides[1] = a.fp8.v_scale_head_stride;
  p.q_scale = reinterpret_cast<const float*>(a.fp8.q_scale);
  p.q_scale_strides[0] = a.fp8.q_scale_batch_stride;
  p.q_scale_strides[1] = a.fp8.q_scale_head_stride;
}

Result<KernelParams> make_kernel_params(const DriverApi& api, const KernelConfig& c, const AttentionArgs& a, int max_ctas) {
  if (Status st = validate_attention_args(c, a); !st) return st.take_error();
  KernelParams p{};
  const TileGeometry geometry = tile_geometry(c, a, max_ctas);
  // Q loads kBlockM rows, K and V kBlockN rows (split among the CTAs of a cluster), and each consumer warpgroup stores 64 rows of O.
  struct {
    TensorMapBytes* out;
    TensorMapRequest request;
  } maps[] = {
      {&p.q, q_request("q", a.q, c, a, a.q_strides, geometry)},
      {&p.k, kv_request("k", a.k, c, a, a.k_strides)},
      {&p.v, kv_request("v", a.v, c, a, a.v_strides)},
      {&p.o, q_or_o_request("o", a.o, c, a, a.o_strides, 64)},
      // qv=1: the Q and K tiles' first head_dim_v columns from qv and V (p.q, p.k), the rest from q
      // and k (p.q_tail, p.k_tail).
      {&p.q_tail, c.spec.qv ? q_request("q", a.q, c, a, a.q_strides, geometry) : TensorMapRequest{}},
      {&p.k_tail, c.spec.qv ? kv_request("k", a.k, c, a, a.k_strides) : TensorMapRequest{}},
  };
  if (c.spec.qv) {
    maps[0].request = q_request("qv", a.qv, c, a, a.qv_strides, geometry);
    maps[1].request = kv_request("v", a.v, c, a, a.v_strides);
  }
  for (const auto& m : maps) {
    // The FP8 cache's K and V are read without maps (FP8 operands' by their byte maps, as Q); the
    // tails only with qv=1.
    if (c.spec.kv_fp8() && (m.out == &p.k || m.out == &p.v)) continue;
    if (!c.spec.qv && (m.out == &p.q_tail || m.out == &p.k_tail)) continue;
    auto encoded = make_tensor_map_bshd(api, m.request);
    if (!encoded) return encoded.take_error();
    std::memcpy(m.out, &*encoded, sizeof(TensorMapBytes));
  }
  p.lse = reinterpret_cast<float*>(a.lse);
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.heads_q = a.heads_q;
  p.batch = a.batch;
  set_engine_inputs(p, c, a);
  set_decode_inputs(p, c, a, geometry);
  set_feature_inputs(p, c, a);
  set_fp8_inputs(p, c, a);
  const unsigned grid_ctas = deal_ctas(c, a, max_ctas);
  set_tile_deal(p, c, a, grid_ctas, causal_hold(c, a, grid_ctas));
  return p;
}

// combine=inline merges in the attention kernel (its merge counters set): no second launch.
bool runs_combine(const KernelParams& params) {
  return params.num_splits > 1 && params.o_partial != nullptr && params.merge_counters == nullptr;
}

LaunchShape warp_per_row_shape(uint64_t rows_times_heads) {
  LaunchShape shape;
  shape.grid_x = unsigned((rows_times_heads + kCombineRowsPerCta - 1) / kCombineRowsPerCta);
  shape.grid_y = shape.grid_z = 1;
  shape.cluster_x = 1;
  shape.block_x = unsigned(32 * kCombineRowsPerCta);
  shape.dynamic_smem_bytes = 0;
  return shape;
}

LaunchShape combine_launch_shape(const KernelParams& params) {
  LaunchShape shape = warp_per_row_shape(uint64_t(params.total_q) * uint64_t(params.heads_q));
  shape.programmatic = true;  // it waits for the attention kernel (griddepcontrol.wait) before reading
  return shape;
}

Status launch_attention_kernels(const DriverApi& api, const AttentionFunctions& functions, const KernelConfig& c,
                                const AttentionArgs& a, KernelParams& params, CUstream stream, int max_ctas, bool pdl) {
  void* args[] = {&params};
  LaunchShape shape = attention_launch_shape(c, a, max_ctas);
  shape.programmatic = pdl;
  if (Status st = launch_kernel(api, functions.attention, shape, stream, args); !st) return st;
  if (!runs_combine(params)) return {};
  if (functions.combine == nullptr) return Error::make(ErrorCode::kInternal, "split_kv launch without its combine kernel");
  return launch_kernel(api, functions.combine, combine_launch_shape(params), stream, args);
}

Status launch_attention(const DriverApi& api, const AttentionFunctions& functions, const KernelConfig& c,
                        const AttentionArgs& a, CUstream stream, int max_ctas) {
  auto params = make_kernel_params(api, c, a, max_ctas);
  if (!params) return params.take_error();
  return launch_attention_kernels(api, functions, c, a, *params, stream, max_ctas, false);
}

}  // namespace flashjit
