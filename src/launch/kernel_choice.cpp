#include "launch/kernel_choice.hpp"

#include "launch/attention_launch.hpp"
#include "launch/tile_schedule.hpp"

namespace flashjit {

bool runs_long_variant(const LongSequenceRule& rule, const KernelConfig& main, const AttentionArgs& args, int sm_count) {
  // 1. The lengths alone decide, unless they fall in the rule's range for uneven deals.
  const LengthRange range = length_range(rule, args.seqlen_q, args.seqlen_k);
  if (range != LengthRange::kDealDecides) return range == LengthRange::kLong;
  // 2. There, main's deal on this grid decides.
  const unsigned grid_ctas = deal_ctas(main, args, sm_count);
  return pairs_round_use_percent(main, args, grid_ctas) < rule.uneven_use_percent;
}

}  // namespace flashjit
