// Length choice: a spec may run a second kernel for long sequences. Part of the config stage: the
// tile table says what a spec runs per head dim, this says what changes with the lengths.
//
// Contract: a spec that leaves the consumer warpgroups and block_m at auto may name one
// long-sequence variant, a complete spec of its own. Everything that prepares kernels for a spec
// (flashjit_kernel_get, prewarm, cache export, `flashjit bench`) prepares both; a launch runs the
// variant when seqlen_q and seqlen_k are both at least min_seqlen (one comparison on the hot path).
// A spec with the warpgroups or block_m set (or the field a variant would change), or with a
// `flashjit tune` winner, runs one kernel.
#pragma once
#include <cstdint>
#include <optional>

#include "spec/attention_spec.hpp"

namespace flashjit {

struct LongSequenceVariant {
  AttentionSpec spec;
  int64_t min_seqlen = 0;  // launches with seqlen_q and seqlen_k both at least this run `spec`
};

std::optional<LongSequenceVariant> long_sequence_variant(const AttentionSpec& asked);

// Whether a launch of these lengths runs the variant whose min_seqlen is given.
inline bool runs_long_variant(int64_t min_seqlen, int64_t seqlen_q, int64_t seqlen_k) {
  return seqlen_q >= min_seqlen && seqlen_k >= min_seqlen;
}

}  // namespace flashjit
