#include "launch/engine_metadata.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "launch/arg_error.hpp"

namespace flashjit {
namespace {

std::string entry(const char* array, int64_t index) { return std::string(array) + "[" + std::to_string(index) + "]"; }

Error bad_entry(const char* array, int64_t index, int64_t value, const std::string& allowed) {
  return bad_argument(entry(array, index), std::to_string(value) + " is not allowed; allowed: " + allowed);
}

Status check_size(const char* array, std::span<const int32_t> values, int64_t wanted) {
  if (int64_t(values.size()) == wanted) return {};
  return Error::invalid_argument(array, std::string(array) + ": " + std::to_string(values.size()) + " entries given, " +
                                           std::to_string(wanted) + " expected");
}

// Offsets into `rows` rows: non-decreasing from at least 0, each step at most `longest`.
Status check_offsets(const char* array, std::span<const int32_t> offsets, int rows, int longest, const char* longest_name) {
  if (offsets[0] < 0) return bad_entry(array, 0, offsets[0], "0 or more");
  for (size_t i = 1; i < offsets.size(); ++i) {
    const int64_t previous = offsets[i - 1], value = offsets[i];
    if (value < previous) {
      return bad_entry(array, int64_t(i), value, "at least " + entry(array, int64_t(i) - 1) + " = " + std::to_string(previous) + " (offsets never decrease)");
    }
    if (value - previous > longest) {
      return bad_entry(array, int64_t(i), value, "at most " + std::to_string(previous + longest) + " (a sequence of at most " +
                                                    longest_name + " = " + std::to_string(longest) + ")");
    }
    if (value > rows) return bad_entry(array, int64_t(i), value, "at most " + std::to_string(rows) + " (the packed tensor's rows)");
  }
  return {};
}

// The keys sequence b uses (what the kernel's seqlen_info computes).
int64_t keys_of(const AttentionArgs& a, const EngineMetadata& m, int b) {
  if (!m.seqused_k.empty()) return m.seqused_k[b];
  if (!m.cu_seqlens_k.empty()) return int64_t(m.cu_seqlens_k[b + 1]) - m.cu_seqlens_k[b];
  return a.seqlen_k;
}

Status check_pages(const AttentionArgs& a, const EngineMetadata& m) {
  const EngineInputs& e = a.engine;
  for (int b = 0; b < a.batch; ++b) {
    const int64_t pages = (keys_of(a, m, b) + e.page_size - 1) / e.page_size;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t index = b * e.block_table_stride + i;
      const int32_t page = m.block_table[size_t(index)];
      if (page < 0 || page >= e.num_pages) {
        return bad_entry("block_table", index, page, "0.." + std::to_string(e.num_pages - 1) + " (a page of the pools; sequence " +
                                                       std::to_string(b) + ", its page " + std::to_string(i) + ")");
      }
    }
  }
  return {};
}

}  // namespace

EngineMetadataSizes engine_metadata_sizes(const AttentionArgs& a) {
  const EngineInputs& e = a.engine;
  EngineMetadataSizes sizes;
  if (e.cu_seqlens_q != 0) sizes.cu_seqlens_q = int64_t(a.batch) + 1;
  if (e.cu_seqlens_k != 0) sizes.cu_seqlens_k = int64_t(a.batch) + 1;
  if (e.seqused_k != 0) sizes.seqused_k = a.batch;
  const FeatureInputs& f = a.features;
  if (f.sinks != 0) sizes.sinks = a.heads_q;
  if (f.alibi_slopes != 0) sizes.alibi_slopes = f.alibi_batch_stride > 0 ? int64_t(a.batch - 1) * f.alibi_batch_stride + a.heads_q : a.heads_q;
  if (e.block_table != 0) sizes.block_table = int64_t(a.batch) * e.block_table_stride;
  return sizes;
}

Status check_engine_metadata(const KernelConfig& config, const AttentionArgs& a, const EngineMetadata& m) {
  if (Status st = validate_attention_args(config, a); !st) return st;
  const EngineMetadataSizes sizes = engine_metadata_sizes(a);
  const struct {
    const char* name;
    std::span<const int32_t> values;
    int64_t wanted;
  } arrays[] = {{"cu_seqlens_q", m.cu_seqlens_q, sizes.cu_seqlens_q},
                {"cu_seqlens_k", m.cu_seqlens_k, sizes.cu_seqlens_k},
                {"seqused_k", m.seqused_k, sizes.seqused_k},
                {"block_table", m.block_table, sizes.block_table}};
  for (const auto& array : arrays) {
    if (Status st = check_size(array.name, array.values, array.wanted); !st) return st;
  }
  const EngineInputs& e = a.engine;
  if (!m.cu_seqlens_q.empty()) {
    if (Status st = check_offsets("cu_seqlens_q", m.cu_seqlens_q, e.total_q, a.seqlen_q, "seqlen_q"); !st) return st;
  }
  if (!m.cu_seqlens_k.empty()) {
    // With seqused_k the packed sequences may be longer than the keys used (seqlen_k bounds those).
    const int longest = m.seqused_k.empty() ? a.seqlen_k : e.total_k;
    if (Status st = check_offsets("cu_seqlens_k", m.cu_seqlens_k, e.total_k, longest, m.seqused_k.empty() ? "seqlen_k" : "total_k"); !st) return st;
  }
  for (size_t b = 0; b < m.seqused_k.size(); ++b) {
    const int64_t used = m.seqused_k[b];
    int64_t most = a.seqlen_k;
    if (!m.cu_seqlens_k.empty()) most = std::min<int64_t>(most, int64_t(m.cu_seqlens_k[b + 1]) - m.cu_seqlens_k[b]);
    if (used < 0 || used > most) return bad_entry("seqused_k", int64_t(b), used, "0.." + std::to_string(most));
  }
  if (!m.block_table.empty()) {
    if (Status st = check_pages(a, m); !st) return st;
  }
  // Sinks and ALiBi slopes: a NaN or an infinite slope would turn whole rows into NaN; a sink of -inf
  // is a sink that never joins (the row's softmax without it), +inf or NaN are neither.
  if (int64_t(m.sinks.size()) != sizes.sinks || int64_t(m.alibi_slopes.size()) != sizes.alibi_slopes) {
    return Error::invalid_argument(sizes.sinks != int64_t(m.sinks.size()) ? "sinks" : "alibi_slopes",
                                   "sinks / alibi_slopes: not read (" + std::to_string(sizes.sinks) + " and " +
                                       std::to_string(sizes.alibi_slopes) + " values expected)");
  }
  for (size_t h = 0; h < m.sinks.size(); ++h) {
    const float sink = m.sinks[h];
    if (std::isnan(sink) || sink == INFINITY) {
      return bad_argument(entry("sinks", int64_t(h)), std::string(std::isnan(sink) ? "nan" : "inf") +
                                                          " is not allowed; allowed: a finite logit, or -inf (a sink that never joins)");
    }
  }
  const int64_t slope_stride = a.features.alibi_batch_stride;
  for (size_t i = 0; i < m.alibi_slopes.size(); ++i) {
    // With a batch stride only the heads_q slopes of each sequence are read.
    if (slope_stride > 0 && int64_t(i) % slope_stride >= a.heads_q) continue;
    if (std::isfinite(m.alibi_slopes[i])) continue;
    return bad_argument(entry("alibi_slopes", int64_t(i)), std::to_string(m.alibi_slopes[i]) + " is not allowed; allowed: a finite slope");
  }
  if (config.spec.dynamic_schedule) {
    if (m.tile_counter.size() != 2) return Error::invalid_argument("workspace", "workspace: the tile counter was not read (2 words expected)");
    if (m.tile_counter[0] != 0 || m.tile_counter[1] != 0) {
      return Error::invalid_argument("workspace", "workspace: the dynamic scheduler's tile counter at its start is " + std::to_string(m.tile_counter[0]) + ", " +
                                                      std::to_string(m.tile_counter[1]) + "; allowed: 0, 0 (zero it once when it is allocated; every completed launch "
                                                      "leaves it so, one that faulted or was cut short does not, and one still running shows its count)");
    }
  }
  if (config.spec.inline_combine) {
    const int64_t words = merge_counter_words(config, a);
    if (int64_t(m.merge_counters.size()) != words) {
      return Error::invalid_argument("workspace", "workspace: the merge counters were not read (" + std::to_string(words) + " words expected)");
    }
    for (size_t i = 0; i < m.merge_counters.size(); ++i) {
      if (m.merge_counters[i] == 0) continue;
      return Error::invalid_argument("workspace", "workspace: combine=inline's merge counter " + std::to_string(i) + " (at byte " +
                                                      std::to_string(merge_counters_offset(config) + 4 * i) + ") is " + std::to_string(m.merge_counters[i]) +
                                                      "; allowed: 0 (zero the counters once when the workspace is allocated; every completed launch "
                                                      "leaves them so, one that faulted or was cut short does not)");
    }
  }
  return {};
}

}  // namespace flashjit
