#include "config/length_choice.hpp"

#include "config/kernel_config.hpp"

namespace flashjit {
namespace {

// NOTES: measured on the H200 (bench/NOTES.md, versions 14, 19a and 22): with a causal mask at
// head dim <= 64, three consumer warpgroups (192-row tiles) beat two by 5-8 % at 4k, 8 % at 8k
// and 11 % at 16k, and lose 20 % at 512-2k, where 192-row tiles waste much of the short diagonal.
// Without a mask three win at every length (the table's default), above 64 they do not fit.
LongSequenceVariant three_warpgroups(const AttentionSpec& asked) {
  LongSequenceVariant variant{asked, {.min_seqlen = 4096}};
  variant.spec.consumer_wgs = 3;
  return variant;
}

// NOTES: measured on the H200 (bench/NOTES.md, versions 55 and 56): with a causal mask and one Q
// buffer (head dims 192 and 256) the persistent grid's causal pairs hold nothing back for the CTAs
// its last round leaves idle, while 2-CTA clusters (one CTA per tile, K/V multicast) let the
// hardware balance the tiles but pay each tile's start. From 16k they won at every shape measured
// (+1-9 %). From 8k to 16k they won at 37 of the 42 shapes whose pairs used less than 92 % of the
// rounds they take (pairs / (rounds x SMs); -7 to +18 %, +5.3 % on average, +4.1 % over the 10
// fresh shapes measured after the rule was set; over 16 random shapes of 8k-16k the rule gives
// +6.3 % against the pairs alone, the better kernel per shape +7.4 %), and ranged from -8 % to
// +5 % above that (about level on average). Below 8k the outcome at like use swung from -15 % to
// +19 % (e.g. 7168: +7.6 % at 71 % used, -8.7 % at 85 %): the rule leaves those lengths to the
// pairs.
LongSequenceVariant clusters(const AttentionSpec& asked) {
  LongSequenceVariant variant{asked, {.min_seqlen = 16384, .uneven_min_seqlen = 8192, .uneven_use_percent = 92}};
  variant.spec.cluster = 2;
  return variant;
}

}  // namespace

std::optional<LongSequenceVariant> long_sequence_variant(const AttentionSpec& asked) {
  if (asked.consumer_wgs != 0 || asked.block_m != 0 || !asked.causal) return std::nullopt;
  // Lengths read on the device: the host cannot pick by them (and clusters do not take them).
  if (asked.varlen || asked.paged) return std::nullopt;
  // The dynamic scheduler balances the tiles itself, and neither variant takes it.
  if (asked.dynamic_schedule) return std::nullopt;
  // Masks and score modifiers: both variants were measured on plain causal attention only, clusters
  // do not take a window or chunk, and d256's cluster kernel with a softcap spilled 8 bytes.
  if (asked.window || asked.chunk || asked.softcap || asked.sinks || asked.alibi) return std::nullopt;
  const Result<KernelConfig> config = make_config(asked);
  if (!config.ok()) return std::nullopt;
  std::optional<LongSequenceVariant> variant;
  if (asked.head_dim <= 64) variant = three_warpgroups(asked);
  else if (asked.cluster == 0 && asked.head_dim > 128 && config->q_buffers == 1) variant = clusters(asked);
  if (variant && !make_config(variant->spec).ok()) return std::nullopt;  // explicit stages or block_n that do not fit
  return variant;
}

}  // namespace flashjit
