#include "launch/attention_args.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/number_text.hpp"
#include "launch/arg_error.hpp"
#include "launch/feature_args.hpp"

// The pack and split rules, compiled here as host code (the kernel's own).
#include "../../templates/visibility.cuh"

namespace flashjit {
namespace {

Status check_pointer(const char* name, uint64_t ptr) {
  if (ptr == 0) return bad_argument(name, "null device pointer");
  if (ptr % 16 != 0) return bad_argument(name, "pointer " + hex_text(ptr) + " is not 16-byte aligned (TMA needs 16-byte aligned rows)");
  return {};
}

// TMA takes byte strides that are multiples of 16 and below 2^40 (so do the FP8 cache's 16-byte
// loads: its elements are one byte).
// A packed tensor's batch stride is not used (flashjit.h: ignored for varlen), so it is not
// checked: a bad row stride is named as itself, never as the batch stride.
Status check_strides(const std::string& tensor, const TensorStrides& s, bool is_packed, int element_bytes = 2) {
  const int64_t per_16_bytes = 16 / element_bytes;
  const std::pair<const char*, int64_t> strides[] = {{"batch", s.batch}, {"row", s.row}, {"head", s.head}};
  for (auto [name, value] : strides) {
    if (is_packed && std::string_view(name) == "batch") continue;
    const std::string field = tensor + "_strides." + name;
    if (value <= 0) return bad_argument(field, std::to_string(value) + " is not allowed; strides are positive element counts");
    if (value % per_16_bytes != 0) {
      return bad_argument(field, std::to_string(value) + " elements is not a multiple of " + std::to_string(per_16_bytes) +
                            (element_bytes == 1 ? " (16 bytes of e4m3), which the FP8 loads need" : " (16 bytes), which TMA needs"));
    }
    if (value >= (int64_t(1) << 39)) return bad_argument(field, std::to_string(value) + " elements is too large (TMA strides are below 2^40 bytes)");
  }
  return {};
}

Status check_extent(const char* field, int value, int max_value, const char* what) {
  if (value < 1 || value > max_value) {
    return bad_argument(field, std::to_string(value) + " is not allowed; allowed: 1.." + std::to_string(max_value) + what);
  }
  return {};
}

Status check_metadata(const char* field, uint64_t ptr) {
  if (ptr == 0) return bad_argument(field, "null device pointer");
  if (ptr % 4 != 0) return bad_argument(field, "pointer " + hex_text(ptr) + " is not 4-byte aligned (int32 entries)");
  return {};
}

// The FP8 cache's scales: required with kv_dtype=e4m3, refused without it.
Status check_fp8_inputs(const AttentionSpec& spec, const Fp8Inputs& f) {
  if (!spec.kv_fp8() && !spec.fp8_operands()) {
    if (!f.any()) return {};
    // The first field set, as flashjit.h names it.
    const char* field = f.k_scale ? "k_scale" : f.v_scale ? "v_scale" : f.k_scale_batch_stride ? "k_scale_batch_stride"
                        : f.k_scale_head_stride ? "k_scale_head_stride" : f.v_scale_batch_stride ? "v_scale_batch_stride"
                        : f.v_scale_head_stride ? "v_scale_head_stride" : f.q_scale ? "q_scale"
                        : f.q_scale_batch_stride ? "q_scale_batch_stride" : "q_scale_head_stride";
    return bad_argument(field, "set, but it needs spec key kv_dtype=e4m3 (an FP8 K/V cache) or dtype=e4m3; 0 = off");
  }
  // Q's descale goes with FP8 queries only (optional: null is 1); K's and V's are required.
  if (!spec.fp8_operands() && (f.q_scale || f.q_scale_batch_stride || f.q_scale_head_stride)) {
    return bad_argument(f.q_scale ? "q_scale" : f.q_scale_batch_stride ? "q_scale_batch_stride" : "q_scale_head_stride",
                        "set, but it needs spec key dtype=e4m3 (16-bit queries take no descale); 0 = off");
  }
  if (f.q_scale % 4 != 0) return bad_argument("q_scale", "pointer " + hex_text(f.q_scale) + " is not 4-byte aligned (float32)");
  if (f.q_scale_batch_stride < 0) return bad_argument("q_scale_batch_stride", std::to_string(f.q_scale_batch_stride) + " is not allowed; allowed: 0 (one for every sequence) and up");
  if (f.q_scale_head_stride < 0) return bad_argument("q_scale_head_stride", std::to_string(f.q_scale_head_stride) + " is not allowed; allowed: 0 (one for every K/V head) and up");
  const struct {
    const char* name;
    uint64_t ptr;
    int64_t batch_stride, head_stride;
  } scales[] = {{"k_scale", f.k_scale, f.k_scale_batch_stride, f.k_scale_head_stride},
                {"v_scale", f.v_scale, f.v_scale_batch_stride, f.v_scale_head_stride}};
  for (const auto& s : scales) {
    if (s.ptr == 0) return bad_argument(s.name, std::string("null device pointer; ") + (spec.fp8_operands() ? "dtype" : "kv_dtype") +
                                                     "=e4m3 needs float32 dequantisation scales (1.0 for none)");
    if (s.ptr % 4 != 0) return bad_argument(s.name, "pointer " + hex_text(s.ptr) + " is not 4-byte aligned (float32)");
    if (s.batch_stride < 0) return bad_argument(std::string(s.name) + "_batch_stride", std::to_string(s.batch_stride) + " is not allowed; allowed: 0 (one for every sequence) and up");
    if (s.head_stride < 0) return bad_argument(std::string(s.name) + "_head_stride", std::to_string(s.head_stride) + " is not allowed; allowed: 0 (one for every K/V head) and up");
  }
  return {};
}

Status unwanted(const char* field, const std::string& value, const char* needs) {
  return bad_argument(field, value + " is not allowed here; it needs " + needs + " (0 = off)");
}

// The engine inputs the spec asks for are there, and those it does not are off.
Status check_engine_inputs(const AttentionSpec& spec, const AttentionArgs& a) {
  const EngineInputs& e = a.engine;
  constexpr int kMaxRows = 0x7fffffff - 256;
  if (spec.varlen) {
    if (Status st = check_metadata("cu_seqlens_q", e.cu_seqlens_q); !st) return st;
    if (Status st = check_extent("total_q", e.total_q, kMaxRows, " (rows of the packed Q and O)"); !st) return st;
  } else {
    if (e.cu_seqlens_q != 0) return unwanted("cu_seqlens_q", hex_text(e.cu_seqlens_q), "a varlen=1 spec");
    if (e.cu_seqlens_k != 0) return unwanted("cu_seqlens_k", hex_text(e.cu_seqlens_k), "a varlen=1 spec");
    if (e.total_q != 0) return unwanted("total_q", std::to_string(e.total_q), "a varlen=1 spec");
  }
  if (e.cu_seqlens_k != 0) {
    if (spec.paged) return unwanted("cu_seqlens_k", hex_text(e.cu_seqlens_k), "packed K/V (paged=0)");
    if (Status st = check_metadata("cu_seqlens_k", e.cu_seqlens_k); !st) return st;
    if (Status st = check_extent("total_k", e.total_k, kMaxRows, " (rows of the packed K and V)"); !st) return st;
  } else if (e.total_k != 0) {
    return unwanted("total_k", std::to_string(e.total_k), "packed K/V (cu_seqlens_k)");
  }
  if (e.seqused_k != 0 || spec.paged) {
    if (!spec.varlen && !spec.paged) return unwanted("seqused_k", hex_text(e.seqused_k), "a varlen=1 or paged=1 spec");
    if (Status st = check_metadata("seqused_k", e.seqused_k); !st) return st;
  }
  if (!spec.paged) {
    if (e.block_table != 0) return unwanted("block_table", hex_text(e.block_table), "a paged=1 spec");
    if (e.block_table_stride != 0) return unwanted("block_table_batch_stride", std::to_string(e.block_table_stride), "a paged=1 spec");
    if (e.page_size != 0) return unwanted("page_size", std::to_string(e.page_size), "a paged=1 spec");
    if (e.num_pages != 0) return unwanted("num_pages", std::to_string(e.num_pages), "a paged=1 spec");
    return {};
  }
  if (Status st = check_metadata("block_table", e.block_table); !st) return st;
  if (Status st = check_extent("page_size", e.page_size, 0x7fffffff, " keys per page"); !st) return st;
  if (Status st = check_extent("num_pages", e.num_pages, 0x7fffffff, " pages in the K/V pools"); !st) return st;
  const int64_t pages_needed = (int64_t(a.seqlen_k) + e.page_size - 1) / e.page_size;
  if (e.block_table_stride < pages_needed || e.block_table_stride > (int64_t(1) << 31)) {
    return bad_argument("block_table_batch_stride", std::to_string(e.block_table_stride) + " is not allowed; allowed: " +
                                                       std::to_string(pages_needed) + "..2^31 (at least ceil(seqlen_k / page_size) entries per sequence)");
  }
  return {};
}

// Bytes of `splits` splits' partials: O [splits][total_q][heads_q][head_dim_v] floats, then LSE
// [splits][heads_q][total_q] floats, each part 256-byte aligned.
uint64_t aligned_256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }
uint64_t partial_rows(const AttentionArgs& a, int splits) {
  return uint64_t(std::max(0, splits)) * uint64_t(std::max(0, a.engine.total_q)) * uint64_t(std::max(0, a.heads_q));
}
uint64_t partials_bytes(const KernelConfig& c, const AttentionArgs& a, int splits) {
  const uint64_t rows = partial_rows(a, splits);
  return aligned_256(rows * uint64_t(c.spec.effective_head_dim_v()) * 4) + aligned_256(rows * 4);
}

// The workspace is there where the spec needs one (split_kv=1, scheduler=dynamic), and off elsewhere.
Status check_workspace(const KernelConfig& c, const AttentionArgs& a) {
  const DecodeInputs& d = a.decode;
  if (!c.spec.split_kv && !c.spec.dynamic_schedule) {
    if (d.workspace != 0) return unwanted("workspace", hex_text(d.workspace), "a split_kv=1 or scheduler=dynamic spec");
    if (d.workspace_bytes != 0) return unwanted("workspace_bytes", std::to_string(d.workspace_bytes), "a split_kv=1 or scheduler=dynamic spec");
    return {};
  }
  const char* use = c.spec.split_kv ? " (split_kv=1 writes its partials there)" : " (scheduler=dynamic keeps its tile counter there)";
  if (d.workspace == 0) return bad_argument("workspace", std::string("null device pointer") + use);
  if (d.workspace % 256 != 0) return bad_argument("workspace", "pointer " + hex_text(d.workspace) + " is not 256-byte aligned");
  const uint64_t schedule = schedule_workspace_bytes(c, a);
  const uint64_t needed = schedule + (c.spec.split_kv ? partials_bytes(c, a, 1) : 0);
  if (d.workspace_bytes >= needed) return {};
  std::string parts = c.spec.dynamic_schedule ? "the tile counter: two words in 256 bytes, zeroed once by the caller" : "";
  if (c.spec.inline_combine) {
    parts += std::string(parts.empty() ? "" : ", ") + "the merge counters: batch x head groups x query blocks x consumer warpgroups words, zeroed once by the caller";
  }
  if (c.spec.split_kv) {
    parts += std::string(parts.empty() ? "" : ", and ") + "one split: total_q x heads_q x (head_dim + 1) floats; flashjit_attention_workspace_size gives max_splits' " +
             std::to_string(attention_workspace_bytes(c, a));
  }
  return bad_argument("workspace_bytes", std::to_string(d.workspace_bytes) + " is too small; allowed: at least " + std::to_string(needed) + " (" + parts + ")");
}

// The split-KV inputs are there for a split_kv spec (and fit), and off for any other.
Status check_decode_inputs(const KernelConfig& c, const AttentionArgs& a) {
  const DecodeInputs& d = a.decode;
  if (Status st = check_workspace(c, a); !st) return st;
  if (!c.spec.split_kv) {
    if (d.max_splits != 0) return unwanted("max_splits", std::to_string(d.max_splits), "a split_kv=1 spec");
    if (d.split_keys != 0) return unwanted("split_keys", std::to_string(d.split_keys), "a split_kv=1 spec");
    return {};
  }
  if (Status st = check_extent("max_splits", d.max_splits, 128, " (splits a sequence's keys may be cut into)"); !st) return st;
  const int block_n = c.spec.block_n;
  if (d.split_keys < 0 || d.split_keys % block_n != 0) {
    return bad_argument("split_keys", std::to_string(d.split_keys) + " is not allowed; allowed: 0 (splits from the launch's count) or a positive multiple of the kernel's block_n=" + std::to_string(block_n));
  }
  const int splits = split_capacity(c, a);
  if (d.split_keys > 0 && int64_t(a.seqlen_k) > int64_t(d.split_keys) * splits) {
    return bad_argument("split_keys", std::to_string(d.split_keys) + " keys a split x " + std::to_string(splits) + " splits (max_splits, or what workspace_bytes holds) " +
                                          "hold fewer than seqlen_k=" + std::to_string(a.seqlen_k) + "; allowed: at least ceil(seqlen_k / splits) rounded up to a multiple of " +
                                          std::to_string(block_n));
  }
  return {};
}

}  // namespace

int paged_rows_per_load(int page_size, int block_n) {
  int a = page_size, b = block_n;
  while (b != 0) {
    const int r = a % b;
    a = b;
    b = r;
  }
  return a;
}

TensorStrides contiguous_bshd(int seqlen, int heads, int head_dim) {
  return {int64_t(seqlen) * heads * head_dim, int64_t(heads) * head_dim, head_dim};
}

namespace {

// The packed heads and their tiles (visibility.cuh's pack_heads_for): no split chosen.
TileGeometry packed_geometry(const KernelConfig& c, const AttentionArgs& a) {
  TileGeometry g;
  if (c.spec.pack_gqa && a.heads_kv > 0 && a.heads_q % a.heads_kv == 0) {
    g.pack_heads = pack_heads_for(a.heads_q / a.heads_kv, c.spec.block_m);
    while ((1 << g.pack_shift) < g.pack_heads) ++g.pack_shift;
  }
  g.tokens_per_tile = c.spec.block_m / g.pack_heads;
  g.tile_heads = a.heads_q / g.pack_heads;
  return g;
}

}  // namespace

int resident_ctas(const KernelConfig& c, int sm_count) { return sm_count > 0 ? sm_count * c.spec.ctas_per_sm : 0; }

TileGeometry tile_geometry(const KernelConfig& c, const AttentionArgs& a, int sm_count) {
  TileGeometry g = packed_geometry(c, a);
  if (!c.spec.split_kv) return g;
  // NOTES: the count is the launch's (the grid's), from the upper bounds; each sequence cuts its
  // own keys into at most that many on the device (key_split), so a captured graph stays right.
  const int most = split_capacity(c, a);
  if (a.decode.split_keys > 0 || sm_count <= 0) {
    g.splits = most;
    return g;
  }
  const uint64_t tiles = attention_query_blocks(c, a) * uint64_t(g.tile_heads) * uint64_t(a.batch);
  // The blocks the launch's rows see (a window of w keys: about w / block_n + 1 at any length),
  // as the kernel's visible_key_split cuts them.
  const WindowChunk w = launch_window_chunk(c.spec, a);
  const MaskRule rule = {c.spec.causal, w.window_left, w.window_right, w.chunk};
  const int key_blocks = visible_key_split(rule, a.seqlen_q, a.seqlen_k, c.spec.block_n, 1, 0).blocks_per_split;
  const uint64_t fill = tiles > 0 ? uint64_t(resident_ctas(c, sm_count)) / tiles : 1;  // splits that give every CTA slot a tile
  g.splits = int(std::clamp<uint64_t>(fill, 1, uint64_t(std::min(most, std::max(1, key_blocks)))));
  return g;
}

uint64_t split_workspace_bytes(const KernelConfig& c, const AttentionArgs& a) {
  return c.spec.split_kv ? partials_bytes(c, a, a.decode.max_splits) : 0;
}

int64_t merge_counter_words(const KernelConfig& c, const AttentionArgs& a) {
  if (!c.spec.inline_combine) return 0;
  return merge_counter_count(std::max(0, a.batch), packed_geometry(c, a).tile_heads, int(attention_query_blocks(c, a)), c.spec.consumer_wgs);
}

bool merges_splits_inline(const KernelConfig& c, const AttentionArgs& a) {
  return c.spec.inline_combine && merges_inline(a.seqlen_q, packed_geometry(c, a).pack_heads);
}

uint64_t merge_counters_offset(const KernelConfig& c) { return c.spec.dynamic_schedule ? kTileCounterBytes : 0; }

uint64_t schedule_workspace_bytes(const KernelConfig& c, const AttentionArgs& a) {
  return merge_counters_offset(c) + aligned_256(uint64_t(merge_counter_words(c, a)) * 4);
}

uint64_t attention_workspace_bytes(const KernelConfig& c, const AttentionArgs& a) {
  return schedule_workspace_bytes(c, a) + split_workspace_bytes(c, a);
}

int split_capacity(const KernelConfig& c, const AttentionArgs& a) {
  const int most = std::max(1, a.decode.max_splits);
  if (a.decode.workspace_bytes == 0) return most;  // sizing, not launching
  const uint64_t schedule = schedule_workspace_bytes(c, a);
  const uint64_t bytes = a.decode.workspace_bytes > schedule ? a.decode.workspace_bytes - schedule : 0;
  // An estimate from the unaligned size, then at most a step or two for the alignment.
  const uint64_t per_split = std::max<uint64_t>(1, partial_rows(a, 1) * (uint64_t(c.spec.effective_head_dim_v()) + 1) * 4);
  int splits = int(std::clamp<uint64_t>(bytes / per_split, 1, uint64_t(most)));
  while (splits > 1 && partials_bytes(c, a, splits) > bytes) --splits;
  return splits;
}

uint64_t split_lse_offset(const KernelConfig& c, const AttentionArgs& a) {
  return aligned_256(partial_rows(a, split_capacity(c, a)) * uint64_t(c.spec.effective_head_dim_v()) * 4);
}

uint64_t attention_query_blocks(const KernelConfig& c, const AttentionArgs& a) {
  const uint64_t rows = uint64_t(packed_geometry(c, a).tokens_per_tile);
  const uint64_t m_blocks = (uint64_t(a.seqlen_q) + rows - 1) / rows;
  const uint64_t cluster = uint64_t(c.spec.cluster);
  // O in column parts (head_dim_v above 256): each query block is o_parts tiles (the kernel's
  // padded_m_blocks).
  return (m_blocks + cluster - 1) / cluster * cluster * uint64_t(c.o_parts);
}

uint64_t attention_tile_count(const KernelConfig& c, const AttentionArgs& a, int splits) {
  return attention_query_blocks(c, a) * uint64_t(packed_geometry(c, a).tile_heads) * uint64_t(a.batch) * uint64_t(splits);
}

Status validate_attention_args(const KernelConfig& config, const AttentionArgs& a) {
  // Shapes: heads and batch within 16 bits (the LSE and tensor-map index math), and the tiles
  // (query blocks x heads x batch) within a 1-D grid (checked below, once the seqlens are known).
  if (Status st = check_extent("batch", a.batch, 65535, ""); !st) return st;
  if (Status st = check_extent("heads_q", a.heads_q, 65535, ""); !st) return st;
  if (Status st = check_extent("heads_kv", a.heads_kv, a.heads_q, " (at most heads_q)"); !st) return st;
  if (a.heads_q % a.heads_kv != 0) {
    return bad_argument("heads_kv", std::to_string(a.heads_kv) + " does not divide heads_q=" + std::to_string(a.heads_q) + " (MHA, GQA and MQA need heads_q % heads_kv == 0)");
  }
  if (Status st = check_extent("seqlen_q", a.seqlen_q, 0x7fffffff - 256, ""); !st) return st;
  if (Status st = check_extent("seqlen_k", a.seqlen_k, 0x7fffffff - 256, ""); !st) return st;
  if (Status st = check_decode_inputs(config, a); !st) return st;
  // dim_split=1: two CTAs a tile (a cluster).
  const uint64_t ctas_per_tile = config.spec.dim_split ? 2 : 1;
  if (const uint64_t tiles = attention_tile_count(config, a, std::max(1, a.decode.max_splits)); tiles * ctas_per_tile > 0x7fffffff) {
    return bad_argument("batch", "batch x heads_q x query blocks (seqlen_q / " + std::to_string(config.spec.block_m) + ")" +
                                     (config.spec.split_kv ? " x max_splits" : "") + (ctas_per_tile > 1 ? " x 2 CTAs (dim_split=1)" : "") +
                                     " = " + std::to_string(tiles * ctas_per_tile) + (ctas_per_tile > 1 ? " CTAs" : " tiles") +
                                     "; allowed: at most 2^31 - 1 (one grid dimension)");
  }
  if (Status st = check_engine_inputs(config.spec, a); !st) return st;
  if (Status st = check_feature_inputs(config.spec, a); !st) return st;
  if (Status st = check_fp8_inputs(config.spec, a.fp8); !st) return st;
  // Pointers and strides as TMA takes them (a packed tensor's batch stride is not used).
  const std::pair<const char*, uint64_t> pointers[] = {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"o", a.o}};
  for (auto [name, ptr] : pointers) {
    if (Status st = check_pointer(name, ptr); !st) return st;
  }
  // qv=1: qv beside q (FlashAttention-3's split MLA form); refused without the key.
  if (config.spec.qv) {
    if (Status st = check_pointer("qv", a.qv); !st) return st;
    if (Status st = check_strides("qv", a.qv_strides, config.spec.varlen); !st) return st;
  } else if (a.qv != 0 || a.qv_strides.batch != 0 || a.qv_strides.row != 0 || a.qv_strides.head != 0) {
    return bad_argument(a.qv != 0 ? "qv" : "qv_strides", "set, but it needs spec key qv=1 (FlashAttention-3's split MLA form); 0 = off");
  }
  // v_in_k=1: the kernel reads V from K's rows (it loads no V): v must be that memory, k's pointer
  // with k's strides (a view of K's first head_dim_v columns, as FlashMLA's callers pass the latent
  // cache). With qv=1 the K tile's first head_dim_v columns come from v itself (FlashAttention-3's
  // split form: K = [v | k]), so v and k are two tensors there.
  if (config.spec.v_is_k_rows()) {
    if (a.v != a.k) {
      return bad_argument("v", "pointer " + hex_text(a.v) + " is not k's (" + hex_text(a.k) +
                                   "); with spec key v_in_k=1 V is K's first head_dim_v columns: pass k's pointer");
    }
    if (a.v_strides.batch != a.k_strides.batch || a.v_strides.row != a.k_strides.row || a.v_strides.head != a.k_strides.head) {
      return bad_argument("v_strides", "differ from k_strides; with spec key v_in_k=1 V is K's first head_dim_v columns: pass k's strides");
    }
  }
  if (a.lse % 4 != 0) return bad_argument("lse", "pointer " + hex_text(a.lse) + " is not 4-byte aligned");
  const bool packed_q = config.spec.varlen, packed_kv = a.engine.cu_seqlens_k != 0;
  const struct {
    const char* name;
    TensorStrides strides;
    bool packed;
  } strides[] = {{"q", a.q_strides, packed_q}, {"k", a.k_strides, packed_kv}, {"v", a.v_strides, packed_kv}, {"o", a.o_strides, packed_q}};
  for (const auto& s : strides) {
    const bool fp8 = (config.spec.kv_fp8() && (s.name[0] == 'k' || s.name[0] == 'v')) || (config.spec.fp8_operands() && s.name[0] != 'o');
    if (Status st = check_strides(s.name, s.strides, s.packed, fp8 ? 1 : 2); !st) return st;
  }
  // NOTES: the kernel subtracts max(S) * scale as the row maximum, which holds for positive scales only.
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale < 0) {
    return bad_argument("softmax_scale", std::to_string(a.softmax_scale) + " is not allowed; allowed: a finite positive scale, or 0 for 1/sqrt(head_dim)");
  }
  return {};
}

}  // namespace flashjit
