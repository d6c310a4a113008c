#include "config/length_choice.hpp"

#include "config/kernel_config.hpp"

namespace flashjit {

std::optional<LongSequenceVariant> long_sequence_variant(const AttentionSpec& asked) {
  // NOTES: measured on the H200 (bench/NOTES.md, versions 14, 19a and 22): with a causal mask at
  // head dim <= 64, three consumer warpgroups (192-row tiles) beat two by 5-8 % at 4k, 8 % at 8k
  // and 11 % at 16k, and lose 20 % at 512-2k, where 192-row tiles waste much of the short diagonal.
  // Without a mask three win at every length (the table's default), above 64 they do not fit.
  if (asked.consumer_wgs != 0 || asked.block_m != 0) return std::nullopt;
  if (!asked.causal || asked.head_dim > 64) return std::nullopt;
  LongSequenceVariant variant{asked, 4096};
  variant.spec.consumer_wgs = 3;
  if (!make_config(variant.spec).ok()) return std::nullopt;  // explicit stages or block_n that do not fit
  return variant;
}

}  // namespace flashjit
