// The engine's device metadata (cu_seqlens_q/k, seqused_k, block tables) checked off the hot path.
// The kernel trusts it (reading it is all the launch does with it); this names the first entry
// that breaks the contract (include/flashjit/flashjit.h, ENGINE INPUTS), by index, from host copies
// (flashjit_check_engine_metadata copies them from the device).
#pragma once
#include <cstdint>
#include <span>

#include "common/status.hpp"
#include "config/kernel_config.hpp"
#include "launch/attention_args.hpp"

namespace flashjit {

// Host copies of the arrays args.engine points to (empty where the pointer is 0): cu_seqlens
// batch + 1 entries, seqused_k batch, block_table batch x block_table_stride.
// tile_counter: scheduler=dynamic, the two words at the workspace's start (empty otherwise);
// merge_counters: combine=inline, merge_counter_words(config, args) words (empty otherwise).
// sinks: the sink logits as floats (bf16 ones widened), heads_q of them; alibi_slopes: the slopes
// the launch reads (engine_metadata_sizes), both empty where the spec or args have none.
struct EngineMetadata {
  std::span<const int32_t> cu_seqlens_q, cu_seqlens_k, seqused_k, block_table;
  std::span<const uint32_t> tile_counter;
  std::span<const uint32_t> merge_counters;
  std::span<const float> sinks, alibi_slopes;
};

// How many int32 entries each array of args holds (0 where not given).
struct EngineMetadataSizes {
  int64_t cu_seqlens_q = 0, cu_seqlens_k = 0, seqused_k = 0, block_table = 0;
  int64_t sinks = 0, alibi_slopes = 0;  // elements (sinks: float32 or bf16; slopes: float32)
};
EngineMetadataSizes engine_metadata_sizes(const AttentionArgs& args);

// Offsets start at 0 or more and never decrease; each sequence's queries are at most seqlen_q
// and its keys at most seqlen_k; the offsets stay within total_q / total_k; seqused_k is within
// 0..seqlen_k (and within the packed keys); every page a sequence's keys need is in
// [0, num_pages); scheduler=dynamic's tile counter and combine=inline's merge counters are back at
// zero (a launch that did not complete leaves them set, and the next one would skip tiles or merge
// early); each sink is finite or -inf (a sink that never joins), each ALiBi slope finite. Errors name the entry
// ("cu_seqlens_q[3]") and what is allowed.
Status check_engine_metadata(const KernelConfig& config, const AttentionArgs& args, const EngineMetadata& metadata);

}  // namespace flashjit
