// Launch stage for the attention forward: args -> kernel parameters (four TMA tensor maps) ->
// cuLaunchKernelEx. The hot path: no allocation, no synchronisation, no compilation.
#pragma once
#include <cuda.h>

#include "config/kernel_config.hpp"
#include "driver/cuda_driver.hpp"
#include "driver/launch.hpp"
#include "launch/attention_args.hpp"
#include "launch/tile_schedule.hpp"

namespace flashjit {

// The kernel's parameters: one definition for both sides (templates/attention_params.cuh), with
// TmaDesc defined here as templates/ptx.cuh defines it for the kernel.
// NOTES: CUtensorMap is alignas(128) in CUDA 13's cuda.h, but TMA needs 64 and the kernel's param
// space aligns to 64: a 64-aligned copy keeps both sides at the same layout.
struct alignas(64) TmaDesc {
  uint64_t opaque[16];
};
static_assert(sizeof(TmaDesc) == sizeof(CUtensorMap));
#include "../../templates/attention_params.cuh"
using KernelParams = Params;
using TensorMapBytes = TmaDesc;

// The launch's masks and score modifiers (AttentionArgs.features) into the parameters: the values
// of the features the spec compiled in, the off values for the others.
// Also the score path's split (scale_log2, softcap_prescale, inv_score_unit: templates/score_mod.cuh).
void set_feature_inputs(KernelParams& params, const KernelConfig& config, const AttentionArgs& args);
// The FP8 cache's bases, byte strides and scales (AttentionArgs.fp8; kv_dtype=e4m3 only).
void set_fp8_inputs(KernelParams& params, const KernelConfig& config, const AttentionArgs& args);

// The softmax scale a launch runs with: args.softmax_scale, or 1 / sqrt(head_dim) where it is 0.
float launch_softmax_scale(const KernelConfig& config, const AttentionArgs& args);

// Block = config.threads, dynamic shared memory = config.smem_bytes. Grid (1-D, the kernel walks
// the tiles = query blocks x heads_q x batch): persistent, min(tiles, max_ctas) CTAs (pass the
// device's SM count: one CTA fits per SM) where config.persistent; else, or when max_ctas is 0,
// one CTA per tile.
LaunchShape attention_launch_shape(const KernelConfig& config, const AttentionArgs& args, int max_ctas = 0);
// The CTAs that take one tile together: 2 with dim_split=1 (a cluster sharing out the head dims), else 1.
int ctas_per_tile(const KernelConfig& config);
// The deal's CTAs on that grid (the kernel's tile_deal): its CTAs, or with dim_split=1 its clusters.
unsigned deal_ctas(const KernelConfig& config, const AttentionArgs& args, int max_ctas = 0);

// Validates the args, encodes the tensor maps and fits the tile deal to the grid that
// attention_launch_shape gives for the same max_ctas (no default: a launch on another grid is
// correct but holds nothing back).
Result<KernelParams> make_kernel_params(const DriverApi& api, const KernelConfig& config, const AttentionArgs& args,
                                        int max_ctas);

// Fits the tile deal with `hold` (its fill clamped to the query blocks, its heads to the heads)
// to a grid of grid_ctas CTAs and puts it, with every divisor of the kernel's tile decode, into
// the parameters (make_kernel_params fits its own with causal_hold; tests force others).
void set_tile_deal(KernelParams& params, const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas,
                   CausalHold hold);

// A module's entry points: the attention kernel and, for split_kv, the combine
// (templates/split_combine.cuh; LoadedKernel::more(0)).
struct AttentionFunctions {
  CUfunction attention = nullptr;
  CUfunction combine = nullptr;
};

// Whether a launch with these parameters runs the combine after the attention kernel (split_kv
// with more than one split), and its shape: a warp per (query row, head), with PDL.
inline constexpr int kCombineRowsPerCta = 8;  // templates/split_combine.cuh's kCombineWarps
bool runs_combine(const KernelParams& params);
// The grid of split_combine.cuh's kernels: a warp per (row, head), kCombineRowsPerCta warps a CTA.
LaunchShape warp_per_row_shape(uint64_t rows_times_heads);
LaunchShape combine_launch_shape(const KernelParams& params);

// The launch's kernels on `stream`: the attention kernel (with PDL where asked), then the combine
// where runs_combine. No allocation, no synchronisation.
Status launch_attention_kernels(const DriverApi& api, const AttentionFunctions& functions, const KernelConfig& config,
                                const AttentionArgs& args, KernelParams& params, CUstream stream, int max_ctas, bool pdl);

// make_kernel_params + launch_attention_kernels on `stream` (max_ctas as for attention_launch_shape).
Status launch_attention(const DriverApi& api, const AttentionFunctions& functions, const KernelConfig& config,
                        const AttentionArgs& args, CUstream stream, int max_ctas = 0);

}  // namespace flashjit
