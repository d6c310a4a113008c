#include "config/kernel_config.hpp"

#include <algorithm>
#include <cstdint>

// The element-type seam (bytes, chunk columns, k step), the kernel's own.
#include "../../templates/tile_layout.cuh"

namespace flashjit {

int tile_word_bytes(const AttentionSpec& s) { return s.varlen || s.paged ? 32 : 8; }

int shared_memory_budget(const AttentionSpec& s) {
  return s.ctas_per_sm == 2 ? kSharedMemoryPerSm / 2 - 1024 : kMaxSharedMemoryBytes;
}

namespace {

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// Shared memory of a resolved spec with q_buffers Q tiles: 1 KB slack to align tiles to the
// 1024-byte swizzle atom, then Q (two buffers where they fit: the next tile's Q loads while this
// tile's O, staged in its own Q buffer, is stored), the K/V ring, and the mbarriers (full and
// empty per Q buffer, full and empty for K and for V per stage), 8 bytes each, then one 4-byte
// order word per consumer warpgroup (see pin_wait_below in the template), then, 8-byte aligned,
// two words per Q buffer: the tile the producer loaded into it (see tile_words in the template).
// kv_dtype=e4m3: after the ring, staging_slots FP8 blocks each for K and for V (block_n rows of
// max(head_dim, head_dim_v) bytes, in tile_layout.cuh's staged_fp8_unit order), with a full and an
// empty mbarrier each, before the others; dtype=e4m3: staging slots for V alone (the producer
// transposes it), K straight into the ring.
// A staging slot holds a block's K rows or V's (with O in column parts, one part's 256 columns).
// FP8 operands' V lands by TMA in 128-byte swizzled rows of 128 columns (its transpose reads them).
int kv_staging_bytes(const AttentionSpec& s) {
  if (s.fp8_operands()) return s.block_n * 128 * ((s.effective_head_dim_v() + 127) / 128);
  return s.kv_fp8() ? round_up(s.block_n * std::max(s.head_dim, s.effective_head_dim_v()), 128) : 0;
}
int staged_tensors(const AttentionSpec& s) { return ::staged_tensors(s.kv_fp8(), s.fp8_operands()); }

// The tiles' bytes: rows of 128-byte swizzled chunks (64 16-bit or 128 e4m3 columns). With FP8
// operands V is held transposed ([head_dim_v rounded to 64][block_n keys] in 128-key chunks), and a
// Q buffer also holds the tile's 16-bit O slices (the epilogue stages them there).
struct TileBytes {
  int qk_chunks, v_chunks, q, k, v;
};
// O's column shares: a V wider than 256 columns (one wgmma's N) is computed in two halves, each its
// own tile (o_parts), or with v_in_k=1 or paired=1 each one consumer warpgroup's of the same tile,
// or with dim_split=1 each one CTA's of its cluster (as are Q's and K's columns: cta_head_dim).
int o_shares(const AttentionSpec& s) { return s.effective_head_dim_v() > 256 ? 2 : 1; }
int o_parts(const AttentionSpec& s) { return s.pairs_o() || s.dim_split ? 1 : o_shares(s); }
int cta_head_dim(const AttentionSpec& s) { return s.dim_split ? s.head_dim / 2 : s.head_dim; }
TileBytes tile_bytes(const AttentionSpec& s) {
  const ElementType type = element_type(s.fp8_operands());
  TileBytes t;
  t.qk_chunks = (cta_head_dim(s) + type.chunk_columns - 1) / type.chunk_columns;
  t.v_chunks = (s.effective_head_dim_v() / o_shares(s) + 63) / 64;  // of O's share (and of a 16-bit V's)
  t.q = s.block_m * 128 * (s.fp8_operands() ? std::max(t.qk_chunks, t.v_chunks) : t.qk_chunks);
  t.k = s.block_n * 128 * t.qk_chunks;
  // v_in_k=1: V is read from K's slot, no V ring; paired=1: V's slot holds both warpgroups' halves.
  t.v = s.v_in_k ? 0 : s.fp8_operands() ? 64 * t.v_chunks * 128 * ((s.block_n + 127) / 128) : s.block_n * 128 * t.v_chunks * (s.paired ? 2 : 1);
  return t;
}

int shared_memory_bytes(const AttentionSpec& s, int q_buffers, int staging_slots) {
  const TileBytes t = tile_bytes(s);
  const int words = tile_word_bytes(s);  // the tile each Q buffer holds, as the producer publishes it
  const int barrier_bytes = round_up(8 * (2 * q_buffers + 4 * s.stages + 4 * staging_slots) + 4 * s.consumer_wgs, words == 8 ? 8 : 16) +
                            words * q_buffers;
  return 1024 + q_buffers * t.q + s.stages * (t.k + t.v) + staged_tensors(s) * staging_slots * kv_staging_bytes(s) +
         paired_handover_bytes(s.pairs_o(), s.block_m, s.chunk_waits ? s.stages * t.qk_chunks : 0) + score_exchange_bytes(s.dim_split, s.block_n) + round_up(barrier_bytes, 128);
}

// The staging depth (FP8 cache, FP8 operands): two slots each where they fit (the next blocks in
// flight while the producer widens or transposes the previous ones), else one.
int kv_staging_slots(const AttentionSpec& s, int q_buffers) {
  if (!s.kv_fp8() && !s.fp8_operands()) return 0;
  return shared_memory_bytes(s, q_buffers, 2) <= shared_memory_budget(s) ? 2 : 1;
}

int shared_memory_bytes(const AttentionSpec& s, int q_buffers) {
  return shared_memory_bytes(s, q_buffers, kv_staging_slots(s, q_buffers));
}

bool fits(const AttentionSpec& s) { return shared_memory_bytes(s, 1) <= shared_memory_budget(s); }

// The most stages that fit with the spec's tiles; 0 when not even one does.
int most_stages_that_fit(AttentionSpec s) {
  for (s.stages = 4; s.stages >= 1 && !fits(s); --s.stages) {
  }
  return s.stages;
}

// The largest block_n (a multiple of 16) that fits with the spec's other fields; 0 when none does.
int largest_block_n_that_fits(AttentionSpec s) {
  for (s.block_n = 256; s.block_n >= 16 && !fits(s); s.block_n -= 16) {
  }
  return s.block_n >= 16 ? s.block_n : 0;
}

// Register split (FlashAttention-3): the producer keeps few registers, consumers take the rest
// of the 64K: 1 consumer warpgroup 40 + 240 (of 2 x 168), 2: 24 + 2 x 240 (of 3 x 168),
// 3: 32 + 3 x 160 (of 4 x 128); two CTAs an SM (one consumer warpgroup each): 24 + 232 (of 2 x 128).
// The dynamic scheduler's producer (its take, skip and count) needs more: 40 + 2 x 232, with a
// paged cache 56 + 2 x 224 (at 40 it spilled 40 bytes at head dims 96 and 128), and 56 + 240
// with one consumer warpgroup. A paged cache's producer is up to four warps whose threads hold a
// block's pages (attention_fwd.cuh, load_paged_tile): 32 + 2 x 232 with two consumer warpgroups
// (at 24 the one warp spilled 60-68 bytes, the four warps 120).
struct RegisterSplit {
  int producer, consumer;
};
RegisterSplit register_split(const AttentionSpec& s) {
  // The FP8 cache's producer: one warp issues a block's loads (a page per row), three widen it.
  if (s.kv_fp8() && s.head_dim > 512) return {64, 248};  // as the 16-bit kernels' below
  if (s.kv_fp8() || s.fp8_operands()) return s.consumer_wgs == 1 ? RegisterSplit{64, 240} : RegisterSplit{40, 232};
  if (s.ctas_per_sm == 2) return {24, 232};
  if (s.dynamic_schedule) return s.consumer_wgs == 1 ? RegisterSplit{56, 240} : s.paged ? RegisterSplit{56, 224} : RegisterSplit{40, 232};
  // NOTES: above head_dim 512 (MLA's 576) the dense causal kernel spilled 16 bytes at 240; 248
  // holds it (the paged producer keeps its 40: at 32 it spilled 36).
  if (s.consumer_wgs == 1 && s.head_dim > 512) return {40, 248};
  // v_in_k=1, paired=1: the first consumer warpgroup holds S, P and its half of O (the paged producer
  // as below; paired=1's also pages in V's both halves: at 32 its 512/512 split-KV kernel spilled 8 bytes).
  // With qv=1 the producer loads Q and K tiles from two maps each: at 24 the packed (varlen) kernel
  // spilled 24 bytes.
  // seesaw=1's producer keeps two blocks' pages and the next pair's (at 32 the paged kernel spilled 16 bytes).
  // half_release=1's producer keeps the block's pages across the wait for the slot's second part (at
  // 32 it spilled 8 bytes of its tile loop).
  if (s.seesaw || s.half_release) return {40, 232};
  if (s.pairs_o()) return s.paged || s.qv ? RegisterSplit{s.v_in_k ? 32 : 40, 232} : RegisterSplit{24, 240};
  if (s.consumer_wgs == 1) return {40, 240};
  // dim_split=1 with packed K/V (varlen=1, not paged): at 24 the producer spilled 8-16 bytes at 384
  // and, with a window or chunks, 12 at 512; at 232 the 512 causal consumers spilled 4 bytes.
  const bool split_producer = s.dim_split && s.varlen && !s.paged && (s.head_dim == 384 || s.masks_window_or_chunk());
  if (s.consumer_wgs == 2) return s.paged || split_producer ? RegisterSplit{32, 232} : RegisterSplit{24, 240};
  return {32, 160};
}

// What to change when the shared memory does not fit: the stages where the user set them and one
// fits, else block_n, saying the value that fits.
Error shared_memory_error(const AttentionSpec& asked, const KernelConfig& c) {
  const AttentionSpec& s = c.spec;
  const int max_stages = most_stages_that_fit(s);
  const bool name_stages = asked.stages != 0 && max_stages >= 1;
  const int max_block_n = largest_block_n_that_fits(s);
  const char* field = name_stages ? "stages" : "block_n";
  const std::string allowed =
      name_stages ? "at most " + std::to_string(max_stages) + " stages with block_n=" + std::to_string(s.block_n)
      : max_block_n ? "at most " + std::to_string(max_block_n) + " (the largest multiple of 16 that fits)"
                    : "none fits with block_m=" + std::to_string(s.block_m) + " and stages=" + std::to_string(s.stages);
  return Error::invalid_spec(field, "spec needs " + std::to_string(c.smem_bytes) + " bytes of shared memory (head_dim=" +
                                        std::to_string(s.head_dim) + ", block_m=" + std::to_string(s.block_m) +
                                        ", block_n=" + std::to_string(s.block_n) + ", stages=" + std::to_string(s.stages) +
                                        "), more than the " + std::to_string(shared_memory_budget(s)) + " allowed" + (s.ctas_per_sm == 2 ? std::string(" with ctas_per_sm=2") : std::string()) + "; " + field +
                                        ": " + allowed);
}

}  // namespace

std::vector<AttentionSpec> default_prewarm_specs() {
  std::vector<AttentionSpec> specs;
  for (DType dtype : {DType::kFp16, DType::kBf16})
    for (int head_dim : {64, 96, 128, 192, 256})
      for (bool causal : {false, true}) {
        AttentionSpec s;
        s.dtype = dtype;
        s.head_dim = head_dim;
        s.causal = causal;
        specs.push_back(s);
      }
  // The engine's call (a vLLM-shaped step: packed queries against a paged cache, causal), at the
  // head dims models use most.
  for (DType dtype : {DType::kFp16, DType::kBf16})
    for (int head_dim : {64, 128, 256}) {
      AttentionSpec s;
      s.dtype = dtype;
      s.head_dim = head_dim;
      s.causal = true;
      s.varlen = s.paged = true;
      specs.push_back(s);
    }
  return specs;
}

AttentionSpec default_tiles(const AttentionSpec& in) {
  // NOTES: start from FlashAttention-3's table (hopper/tile_size.h) restricted to what this kernel
  // does: 64 query rows per consumer warpgroup, at most three of them, PV over head_dim_v rounded up
  // to 64. block_n shrinks with the head dim so that the K/V ring fits 227 KB at two stages.
  AttentionSpec s = in;
  const int d = s.head_dim;
  // Measured on the H200 (bench/NOTES.md, versions 7 and 14): at head dim <= 64 three consumer
  // warpgroups (block_m 192, FlashAttention-3's choice) beat two by 10 % without a causal mask;
  // with one, two (block_m 128) win by 10-20 % at seqlen 512-2k (192-row tiles waste a third of
  // the short diagonal) and trail by 5-12 % from 4k up, where config/length_choice.hpp adds a
  // three-warpgroup kernel (versions 19a and 22). block_n 144 at head dim 128 won 1 % at 8k but
  // lost 5-11 % at 512-2k, where it does not divide the length: 128 stays (flashjit tune picks
  // per shape).
  // A V head dim below Q's (192/128) leaves room for FlashAttention-3's 128 at d192.
  int block_n = d <= 128 ? 128 : d <= 192 ? (s.effective_head_dim_v() <= 128 ? 128 : 112) : d <= 256 ? 80 : 64;
  // The FP8 cache's staging slots take shared memory beside the 16-bit ring: shorter blocks above
  // head dim 128.
  if (s.kv_fp8() && d > 128) block_n = d <= 192 ? 80 : d <= 256 ? 64 : 48;  // 320/256: 64 did not fit
  // FP8 operands: a k32 multiple; their tiles take half the bytes (d256: 96, at 128 the consumers
  // spilled 152 bytes and ptxas serialised the wgmma, C7512; 64 with lengths on the device, where 96
  // spilled 32).
  if (s.fp8_operands()) block_n = d <= 192 ? 128 : s.varlen || s.paged ? 64 : 96;
  // Above head dim 320 or with O in parts (V wider than 256): one consumer warpgroup and 32-key
  // blocks (512/512 causal spilled 96 bytes at 48; MLA's 576/512 fits two stages beside one Q buffer).
  const bool large = d > 320 || s.effective_head_dim_v() > 256;
  // v_in_k=1 (MLA's latent cache): two consumer warpgroups on one 64-row tile, each half of O, and
  // 64-key blocks (a 128-byte row of P), two stages of K alone (V is read from K's slot); with
  // block_n=32 as many stages as fit (four: the same bytes in flight, each slot freed sooner).
  // paired=1: the same warpgroups with V in its own ring, 32-key blocks (512/512: K's and V's 32 KB
  // a stage beside Q's 64 KB).
  if (s.pairs_o()) {
    if (s.consumer_wgs == 0) s.consumer_wgs = 2;
    if (s.block_m == 0) s.block_m = 64;
    if (s.pingpong < 0) s.pingpong = 0;
  }
  // dim_split=1: each CTA of the cluster holds half of every head dim, two consumer warpgroups as at
  // head dim 256, and 64-key blocks (two stages of K's and V's 32 KB halves beside Q's 64 KB and the
  // peer's two 16 KB score inboxes: 226 KB at 512/512); 48 at 512 with lengths on the device, a
  // window or chunks, or a score modifier, whose consumers spilled 80-150 bytes at 64 beside the
  // peer's scores.
  if (s.dim_split) {
    if (s.consumer_wgs == 0) s.consumer_wgs = 2;
    if (s.block_m == 0) s.block_m = 128;
  }
  if (large && !s.dim_split && s.consumer_wgs == 0 && s.block_m == 0) s.consumer_wgs = 1;
  if (large) block_n = s.v_in_k || s.dim_split ? 64 : 32;
  if (s.dim_split && d == 512 && (s.varlen || s.paged || s.masks_window_or_chunk() || s.softcap || s.alibi)) block_n = 48;
  // Decode (split_kv): a tile holds a few useful rows (packed heads x 1-16 queries) and streams K/V:
  // one consumer warpgroup (64 rows), and as deep a ring as fits with two Q buffers.
  // Paged decode takes the same tiles as contiguous decode. Version 60 (bench/NOTES.md) had made
  // it two CTAs an SM with 64-key blocks, against one producer thread waiting out the block
  // table's reads; with the warp producer (version 62) one CTA with 128-key blocks is 9 % faster at
  // batch 1 and 1.5 % in geomean over the ten paged d128 cells (3 % slower at 8 x 4k).
  // ctas_per_sm=2 stays a key for contiguous K/V; with paged=1 it is refused (spec/).
  // Two CTAs an SM (ctas_per_sm=2) hold one consumer warpgroup each.
  if (s.ctas_per_sm == 0) s.ctas_per_sm = 1;
  if ((s.split_kv || s.ctas_per_sm == 2) && s.consumer_wgs == 0 && s.block_m == 0) s.consumer_wgs = 1;
  // The dynamic scheduler's producer needs registers three consumer warpgroups do not leave; nor
  // does the softcap's tanh with lengths on the device (228 bytes spilled in 128 registers).
  const bool three_wgs = d <= 64 && !s.causal && !s.dynamic_schedule && !(s.softcap && (s.varlen || s.paged)) && !s.kv_fp8() &&
                         !s.fp8_operands();
  if (s.consumer_wgs == 0) s.consumer_wgs = s.block_m ? s.block_m / 64 : three_wgs ? 3 : 2;
  if (s.block_m == 0) s.block_m = 64 * s.consumer_wgs;
  if (s.block_n == 0) s.block_n = block_n;
  if (s.head_dim_v == 0) s.head_dim_v = s.head_dim;
  // (Large head dims keep two stages and one Q buffer: a one-stage ring cannot overlap the loads.)
  if (s.stages == 0 && (s.split_kv || s.ctas_per_sm == 2) && !large) {
    for (s.stages = 4; s.stages > 1 && shared_memory_bytes(s, 2) > shared_memory_budget(s); --s.stages) {
    }
  }
  if (s.stages == 0 && s.pairs_o()) s.stages = std::max(2, most_stages_that_fit(s));  // (two that do not fit: refused below)
  if (s.stages == 0) s.stages = 2;
  // Overlap always (FlashAttention-3; bench/NOTES.md, versions 3-4a, 6). Pingpong wherever there
  // are two or more consumer warpgroups (round a ring of three at 64): FlashAttention-3 stops at
  // head dim 128, and so did we while d192 spilled with it and d256 measured the same; since the
  // per-block instruction cuts (versions 17-18) neither spills and d256 gains 2-4 % (version 19).
  if (s.overlap < 0) s.overlap = 1;
  if (s.pingpong < 0) s.pingpong = s.consumer_wgs >= 2;
  // Two CTAs sharing each K/V block through TMA multicast (cluster=2) halves the L2 traffic per
  // FLOP but measured neutral on the large shapes and halves the useful CTAs when there is one
  // query block (decode: 1.2 -> 0.65 TB/s): off by default (bench/NOTES.md, versions 2 and 5).
  if (s.cluster == 0) s.cluster = 1;
  return s;
}

Result<KernelConfig> make_config(const AttentionSpec& spec) {
  if (Status st = validate_spec(spec); !st) return st.take_error();
  KernelConfig c;
  c.spec = default_tiles(spec);
  const AttentionSpec& s = c.spec;
  if (Status st = validate_spec(s); !st) return st.take_error();

  // Geometry: rows of 128-byte swizzled chunks (64 16-bit or 128 e4m3 columns); the Q K^T GEMM's
  // k steps are 32 bytes (k16 of 16 bits, k32 of e4m3).
  const TileBytes tiles = tile_bytes(s);
  c.threads = 128 * (1 + s.consumer_wgs);
  c.qk_chunks = tiles.qk_chunks;
  c.v_chunks = tiles.v_chunks;
  c.qk_k_steps = round_up(cta_head_dim(s), element_type(s.fp8_operands()).k_step) / element_type(s.fp8_operands()).k_step;
  c.v_cols = 64 * c.v_chunks;
  c.o_parts = o_parts(s);
  c.q_tile_bytes = tiles.q;
  c.k_tile_bytes = tiles.k;
  c.v_tile_bytes = tiles.v;

  // Shared memory (shared_memory_bytes): two Q buffers where they fit, else one.
  c.q_buffers = shared_memory_bytes(s, 2) <= shared_memory_budget(s) ? 2 : 1;
  c.smem_bytes = shared_memory_bytes(s, c.q_buffers);
  c.kv_staging_slots = kv_staging_slots(s, c.q_buffers);
  c.kv_staging_bytes = kv_staging_bytes(s);
  // With one Q buffer, each consumer warpgroup stages its O slice in a slot of the tile's last K/V
  // block instead (warpgroup 0 in K's, 1 in V's: block_n >= 64 rows hold its 64), so that the
  // next tile's Q can load during this tile's last blocks. Not with clusters (one tile per CTA).
  // Not with v_in_k=1 or paired=1 either (the warpgroups stage their halves in the Q buffer).
  c.stage_o_in_kv = c.q_buffers == 1 && s.consumer_wgs <= 2 && s.cluster == 1 && s.block_n >= 64 && !s.fp8_operands() && !s.pairs_o();
  // A persistent grid pays where the next tile's Q loads early (two buffers, or Q freed early).
  // dim_split=1: a cluster a tile, as with cluster=2.
  c.persistent = s.cluster == 1 && !s.dim_split && (c.q_buffers == 2 || c.stage_o_in_kv);
  if (c.smem_bytes > shared_memory_budget(s)) return shared_memory_error(spec, c);
  // NOTES: the dynamic scheduler's producer publishes each tile beside its Q buffer for the
  // consumers (kPublishTiles): with one Q buffer the consumers decode the deal themselves.
  if (s.dynamic_schedule && c.q_buffers != 2) {
    return Error::invalid_spec("scheduler", "spec field 'scheduler': value dynamic is not allowed; allowed: static with head_dim=" +
                                                std::to_string(s.head_dim) + ", block_m=" + std::to_string(s.block_m) + ", block_n=" +
                                                std::to_string(s.block_n) + ", stages=" + std::to_string(s.stages) +
                                                " (the dynamic scheduler needs two Q buffers: " + std::to_string(shared_memory_bytes(s, 2)) +
                                                " bytes, more than the " + std::to_string(shared_memory_budget(s)) + " allowed)");
  }

  const RegisterSplit regs = register_split(s);
  c.producer_regs = regs.producer;
  c.consumer_regs = regs.consumer;
  c.first_consumer_regs = regs.consumer;
  c.q_reg_steps = s.q_reg_dims / 16;
  // q_reg_dims: the scores warpgroup takes 256 and the other the rest of the 3 x 168 ptxas gives the
  // three warpgroups at entry (208-224: its peak is half of O, P and about 40, 184 measured with
  // 576/512's early release).
  if (s.q_reg_dims > 0) {
    c.first_consumer_regs = 256;
    c.consumer_regs = 3 * 168 - regs.producer - 256;
  }
  c.kernel_name = "flashjit_attention_fwd";
  if (s.split_kv) c.more_kernel_names = {"flashjit_attention_combine", "flashjit_merge_states"};
  return c;
}

Status check_register_budget(const KernelConfig& c, int registers_at_entry) {
  const int wgs = c.spec.consumer_wgs;
  const int requested = c.producer_regs + c.first_consumer_regs + (wgs - 1) * c.consumer_regs;
  const int available = registers_at_entry * (1 + wgs);
  if (requested > available) {
    return Error::make(ErrorCode::kResourceBudget,
                       "setmaxnreg requests " + std::to_string(requested) + " registers per thread over " +
                           std::to_string(1 + wgs) + " warpgroups but ptxas gave " + std::to_string(registers_at_entry) +
                           " at entry (budget " + std::to_string(available) + "): the kernel would hang");
  }
  return {};
}

}  // namespace flashjit
