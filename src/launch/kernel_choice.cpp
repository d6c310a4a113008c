#include "launch/kernel_choice.hpp"

#include "launch/attention_launch.hpp"
#include "launch/tile_schedule.hpp"

namespace flashjit {

bool runs_long_variant(const LongSequenceRule& rule, const KernelConfig& main, const AttentionArgs& args, int sm_count) {
  // 1. Long enough: always.
  if (both_at_least(rule.min_seqlen, args.seqlen_q, args.seqlen_k)) return true;
  // 2. Shorter: where the rule has a range for uneven deals, and main's deal on this grid is uneven.
  if (rule.uneven_min_seqlen == 0 || !both_at_least(rule.uneven_min_seqlen, args.seqlen_q, args.seqlen_k)) return false;
  const unsigned grid_ctas = attention_launch_shape(main, args, sm_count).grid_x;
  return pairs_round_use_percent(main, args, grid_ctas) < rule.uneven_use_percent;
}

}  // namespace flashjit
