// KernelConfig: the spec resolved against the per-head-dim tile table, plus every size the
// template and the launcher derive from it. Second stage of the pipeline: spec -> config.
#pragma once
#include <string>
#include <vector>

#include "common/status.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit {

// H200/H100: the most dynamic shared memory one block may opt into (227 KB).
inline constexpr int kMaxSharedMemoryBytes = 232448;
// An SM's shared memory (228 KB), of which the driver reserves 1 KB for each resident CTA.
inline constexpr int kSharedMemoryPerSm = 233472;

// The dynamic shared memory one CTA of the spec may take: 227 KB, or with ctas_per_sm=2 half the
// SM less each CTA's reserved 1 KB (113 KB).
int shared_memory_budget(const AttentionSpec& spec);

struct KernelConfig {
  AttentionSpec spec;       // resolved: no field left at auto
  int threads = 0;          // 128 * (1 producer + consumer_wgs)
  int qk_chunks = 0;        // 64-column (128-byte) swizzle chunks of Q and K rows (dim_split=1: a CTA's half)
  int v_chunks = 0;         // 64-column chunks of V and O rows
  int qk_k_steps = 0;       // k16 steps of S = Q K^T (head_dim rounded up to 16)
  int v_cols = 0;           // N of O += P V: head_dim_v (a part's) rounded up to 64 (TMA zero-fills the pad)
  int o_parts = 1;          // O's column parts, each its own tile: 2 where head_dim_v passes 256 (one wgmma's N)
  int producer_regs = 0;    // setmaxnreg.dec for the producer warpgroup
  int consumer_regs = 0;    // setmaxnreg.inc for each consumer warpgroup but the first
  int first_consumer_regs = 0;  // setmaxnreg.inc for the first (256 with q_reg_dims, else consumer_regs)
  int q_reg_steps = 0;      // k16 steps of Q held in the scores warpgroup's registers (q_reg_dims / 16)
  int q_tile_bytes = 0;     // block_m rows
  int q_buffers = 0;        // Q tiles in shared memory: 2 where they fit (the next tile's Q loads early), else 1
  bool stage_o_in_kv = false;  // one Q buffer: O staged in the last K/V block's slots, so Q is freed early
  bool persistent = false;  // launched as a persistent grid (at most ctas_per_sm CTAs per SM walking the tiles)
  int k_tile_bytes = 0;     // block_n rows, one stage
  int v_tile_bytes = 0;     // block_n rows, one stage
  // kv_dtype=e4m3: K and V blocks land in FP8 in staging slots (kv_staging_slots each for K and V,
  // kv_staging_bytes each: block_n rows of max(head_dim, head_dim_v) bytes) and are widened into
  // the 16-bit ring by the producer warpgroup; dtype=e4m3: V's alone, transposed into the ring;
  // 0 otherwise.
  int kv_staging_slots = 0;
  int kv_staging_bytes = 0;
  int smem_bytes = 0;       // dynamic shared memory requested at launch (includes 1 KB alignment slack)
  std::string kernel_name;  // extern "C" entry point
  // split_kv: the module's further entry points, the combine of the splits and the merge of two
  // states (templates/split_combine.cuh); empty else. LoadedKernel::more(i) in this order.
  std::vector<std::string> more_kernel_names;
};

// The default prewarm set: fp16 and bf16 x head dims 64, 96, 128, 192, 256 x causal off/on (20
// specs; prewarm adds their long-sequence kernels: config/length_choice.hpp), and the engine's
// fp16 and bf16 x head dims 64, 128, 256, causal, varlen=1, paged=1 (6 more).
std::vector<AttentionSpec> default_prewarm_specs();

// Bytes per Q buffer in which the producer publishes the tile it holds (the kernel's
// kTileWordBytes): (query block, head) and, where lengths are read on the device, the sequence's
// lengths and first query row, so the consumers read them from shared memory, not global.
int tile_word_bytes(const AttentionSpec& spec);

// The default tiles for a head dim (the table; see NOTES in the .cpp).
AttentionSpec default_tiles(const AttentionSpec& spec);

// Resolves and checks a spec: fills auto fields from the table and rejects tiles and stages whose
// shared memory does not fit (error names the field, the value and what is allowed).
Result<KernelConfig> make_config(const AttentionSpec& spec);

// setmaxnreg over budget hangs silently: the per-warpgroup requests must fit the register count
// ptxas gave the kernel at entry. Checked on every compiled kernel.
Status check_register_budget(const KernelConfig& config, int registers_at_entry);

}  // namespace flashjit
