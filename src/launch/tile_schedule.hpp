// The host's choice for the persistent grid's tile deal (templates/tile_schedule.cuh): which of
// the causal query blocks to hold back from the pairs for the CTAs that the pairs leave idle in
// their last round: each head's lightest few, or the last few heads whole. A pure function of the
// shape and the grid: the params cache keeps its result. set_tile_deal
// (launch/attention_launch.hpp) puts the deal it fits into the kernel's parameters.
// Also how well the pairs alone use their rounds, which launch/kernel_choice.hpp weighs.
#pragma once

#include <cstdint>

#include "config/kernel_config.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// What the deal holds back from phase 1's pairs: the `fill_blocks` lightest query blocks of the
// last `held_heads` heads (0: of every head; fewer only with fill_blocks = all query blocks).
struct CausalHold {
  int fill_blocks = 0;
  int held_heads = 0;
};

// Nothing held back (the pairs alone) unless the kernel deals causal pairs (causal, no clusters,
// fewer CTAs than tiles, two Q buffers) over tiles whose cost grows with the query block
// (seqlen_k >= seqlen_q), the host knows the lengths (not varlen or paged: there the kernel holds
// nothing back) and a modelled deal with some held back finishes at least 1 % sooner.
// Any hold is correct: the kernel covers every tile exactly once whatever it is given.
CausalHold causal_hold(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas);

// How much of the rounds that the kernel's causal pairs take on grid_ctas CTAs they use, in whole
// percent (rounded down): pairs / (rounds x CTAs), rounds = ceil(pairs / CTAs), with nothing held
// back (as the one-Q-buffer kernels deal). 100 where it deals no pairs.
int pairs_round_use_percent(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas);

}  // namespace flashjit
