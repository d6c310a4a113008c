// Length choice: a spec may run a second kernel for long sequences. Part of the config stage: the
// tile table says what a spec runs per head dim, this says what changes with the lengths.
//
// Contract: a spec that leaves the consumer warpgroups and block_m at auto may name one
// long-sequence variant, a complete spec of its own. Everything that prepares kernels for a spec
// (flashjit_kernel_get, prewarm, cache export, `flashjit bench`) prepares both; a launch runs the
// variant when its lengths meet the variant's rule (launch/kernel_choice.hpp applies it: a few
// integer operations on the hot path). A spec with the warpgroups or block_m set (or the field a
// variant would change), or with a `flashjit tune` winner, runs one kernel.
#pragma once
#include <cstdint>
#include <optional>

#include "spec/attention_spec.hpp"

namespace flashjit {

// Which launches run the variant; "both lengths" means seqlen_q and seqlen_k.
struct LongSequenceRule {
  int64_t min_seqlen = 0;  // both lengths at least this: always
  // Both lengths at least uneven_min_seqlen (0: no such rule) and below min_seqlen: where the main
  // kernel's persistent grid on the launch's device would use less than uneven_use_percent % of
  // the rounds its causal tile pairs take (launch/tile_schedule.hpp: pairs_round_use_percent).
  int64_t uneven_min_seqlen = 0;
  int uneven_use_percent = 0;
};

struct LongSequenceVariant {
  AttentionSpec spec;
  LongSequenceRule rule;
};

std::optional<LongSequenceVariant> long_sequence_variant(const AttentionSpec& asked);

// Where a launch's lengths fall in the rule: below its ranges (the main kernel), in the range where
// the deal decides (launch/kernel_choice.hpp), or long enough for the variant whatever the deal.
enum class LengthRange { kShort, kDealDecides, kLong };
inline LengthRange length_range(const LongSequenceRule& rule, int64_t seqlen_q, int64_t seqlen_k) {
  const int64_t shorter = seqlen_q < seqlen_k ? seqlen_q : seqlen_k;
  if (shorter >= rule.min_seqlen) return LengthRange::kLong;
  if (rule.uneven_min_seqlen > 0 && shorter >= rule.uneven_min_seqlen) return LengthRange::kDealDecides;
  return LengthRange::kShort;
}

}  // namespace flashjit
