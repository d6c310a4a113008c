// Tuning records: the winner of `flashjit tune` for a spec whose tile and pipeline fields were left
// at auto, kept beside the cache entries as <cache dir>/tuned/<key>.tuned (a few key=value lines). Engine::prepare uses a
// record for such a spec, so a later process launches the winner without tuning.
// Invariants: a record is keyed by the base spec's canonical text, the NVRTC version and the cache
// schema (a new compiler or layout retunes); it is published atomically (temp file + rename); an
// unreadable, malformed or foreign record is ignored (logged once) and the table's tiles are used.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit {

struct TuningRecord {
  std::string base_spec;    // canonical text of the spec as asked (auto fields omitted)
  std::string winner_spec;  // canonical text of the resolved winner
  double kernel_us = 0;     // the winner's kernel time on the tuning shape
  std::string shape;        // the shape it was timed on, e.g. "b=2 sq=8192 sk=8192 hq=16 hkv=16"
};

// True when every field tuning may choose is at auto: stages, consumer_wgs, block_m, block_n,
// cluster, overlap, pingpong.
bool has_auto_tiles(const AttentionSpec& spec);

// The record's file for a base spec under a cache directory.
std::string tuning_record_path(const std::string& cache_dir, const AttentionSpec& base);

Status save_tuning_record(const std::string& cache_dir, const AttentionSpec& base, const TuningRecord& record);

// The winner for `base`, when a valid record exists; nullopt otherwise.
std::optional<AttentionSpec> load_tuned_spec(const std::string& cache_dir, const AttentionSpec& base);

// How `flashjit tune` chooses among timed candidates (the tool times; these decide). A time below 0
// marks a candidate that did not run.
// The first round's `keep` fastest that ran, fastest first: they are timed again.
std::vector<std::size_t> confirm_candidates(const std::vector<double>& first_round_ms, std::size_t keep);
// The position of the lowest re-timed sum among those that ran every time, or nullopt if none did.
std::optional<std::size_t> confirmed_winner(const std::vector<double>& summed_ms);

}  // namespace flashjit
