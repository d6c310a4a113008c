// The host's half of the persistent grid's tile deal (templates/tile_schedule.cuh): how many of
// each head's lightest causal query blocks to hold back for the CTAs that the pairs leave idle in
// their last round. A pure function of the shape and the grid: the params cache keeps its result.
#pragma once

#include <array>
#include <cstdint>

#include "config/kernel_config.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// 0 (the pairs alone) unless the kernel deals causal pairs (causal, no clusters, fewer CTAs than
// tiles) over tiles whose cost grows with the query block (seqlen_k >= seqlen_q) and a modelled
// deal with some held back finishes at least 1 % sooner. Any value up to the query blocks is
// correct: the kernel covers every tile exactly once whatever it is given.
int causal_fill_blocks(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas);

// The kernel's deal and tile-decode parameters (KernelParams::fill_blocks, deal_*, div_*) for
// `fill_blocks` held back on a grid of grid_ctas CTAs: phase 1's rounds and every divisor of the
// decode, fitted once here so that the kernel divides by multiplying.
struct TileDealParams {
  using Divisor = std::array<uint32_t, 2>;  // multiplier, shift (templates/tile_schedule.cuh, FastDivisor)
  int fill_blocks = 0, ctas = 0, full_rounds = 0, last_units = 0, odd_cta = 0;
  Divisor m_blocks{}, paired{}, heads{}, heads_q{}, group{};  // query blocks per head (all, phase 1's), heads_q x batch, heads_q, heads_q / heads_kv
};
TileDealParams tile_deal_params(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas, int fill_blocks);

}  // namespace flashjit
