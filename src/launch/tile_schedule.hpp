// The host's choice for the persistent grid's tile deal (templates/tile_schedule.cuh): how many of
// each head's lightest causal query blocks to hold back for the CTAs that the pairs leave idle in
// their last round. A pure function of the shape and the grid: the params cache keeps its result.
// set_tile_deal (launch/attention_launch.hpp) puts the deal it fits into the kernel's parameters.
// Also how well the pairs alone use their rounds, which launch/kernel_choice.hpp weighs.
#pragma once

#include <cstdint>

#include "config/kernel_config.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// 0 (the pairs alone) unless the kernel deals causal pairs (causal, no clusters, fewer CTAs than
// tiles) over tiles whose cost grows with the query block (seqlen_k >= seqlen_q) and a modelled
// deal with some held back finishes at least 1 % sooner. Any value up to the query blocks is
// correct: the kernel covers every tile exactly once whatever it is given.
int causal_fill_blocks(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas);

// How much of the rounds that the kernel's causal pairs take on grid_ctas CTAs they use, in whole
// percent (rounded down): pairs / (rounds x CTAs), rounds = ceil(pairs / CTAs), with nothing held
// back (as the one-Q-buffer kernels deal). 100 where it deals no pairs.
int pairs_round_use_percent(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas);

}  // namespace flashjit
