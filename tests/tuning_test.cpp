// Tuning records: what `flashjit tune` leaves behind is used for a spec left at auto, ignored when
// malformed or foreign, and never overrides fields a caller set.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/engine.hpp"
#include "runtime/tuning.hpp"

namespace flashjit {
namespace {

namespace fs = std::filesystem;

struct TempCache {
  std::string path;
  TempCache() {
    char pattern[] = "/tmp/flashjit-tuning-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempCache() { fs::remove_all(path); }
};

AttentionSpec spec(const char* text) { return *parse_spec(text); }

Engine engine_at(const std::string& dir, bool use_tuning = true) {
  EngineOptions o;
  o.cache_dir = dir;
  o.use_tuning = use_tuning;
  return Engine(o);
}

TEST(Tuning, AutoTilesAreThoseTuneMayChoose) {
  EXPECT_TRUE(has_auto_tiles(spec("dtype=bf16,head_dim=128,causal=1")));
  EXPECT_TRUE(has_auto_tiles(spec("dtype=bf16,head_dim=128,hang_trap=1")));
  for (const char* text : {"head_dim=128,block_n=64", "head_dim=128,stages=3", "head_dim=128,cluster=1",
                           "head_dim=128,overlap=1", "head_dim=128,pingpong=0", "head_dim=128,consumer_wgs=1"}) {
    EXPECT_FALSE(has_auto_tiles(spec(text))) << text;
  }
}

TEST(Tuning, RecordedWinnerIsUsedForTheAutoSpecOnly) {
  TempCache cache;
  const AttentionSpec base = spec("dtype=bf16,head_dim=64,causal=0");
  const std::string winner = "dtype=bf16,head_dim=64,causal=0,stages=2,consumer_wgs=2,block_m=128,block_n=64,cluster=1,ctas_per_sm=1,overlap=1,pingpong=0";
  ASSERT_TRUE(save_tuning_record(cache.path, base, {to_string(base), winner, 123.0, "b=1"}).ok());
  // The auto spec resolves to the winner.
  auto tuned = engine_at(cache.path).prepare(base);
  ASSERT_TRUE(tuned.ok()) << tuned.error().message;
  EXPECT_EQ(tuned->config.spec.block_n, 64);
  EXPECT_EQ(tuned->config.spec.overlap, 1);
  EXPECT_EQ(tuned->config.spec.pingpong, 0);
  EXPECT_EQ(tuned->config.spec, *parse_spec(winner + ",head_dim_v=64"));
  // Not with tuning off, and not for a spec that set a field itself, nor for another problem.
  auto untuned = engine_at(cache.path, false).prepare(base);
  ASSERT_TRUE(untuned.ok());
  EXPECT_EQ(untuned->config.spec.block_n, 128);
  auto explicit_tiles = engine_at(cache.path).prepare(spec("dtype=bf16,head_dim=64,causal=0,block_n=96"));
  ASSERT_TRUE(explicit_tiles.ok());
  EXPECT_EQ(explicit_tiles->config.spec.block_n, 96);
  auto causal = engine_at(cache.path).prepare(spec("dtype=bf16,head_dim=64,causal=1"));
  ASSERT_TRUE(causal.ok());
  EXPECT_EQ(causal->config.spec.block_n, 128);
}

// Launch extents: one sequence of 8 heads.
AttentionArgs extents(int seqlen_q, int seqlen_k) {
  AttentionArgs a;
  a.batch = 1;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.heads_q = a.heads_kv = 8;
  return a;
}

// A tuned spec runs its winner at every length: no long-sequence kernel beside it. Untuned, the
// same spec has one (config/length_choice.hpp), which the launch's arguments pick.
TEST(Tuning, TunedSpecHasNoLongSequenceKernel) {
  TempCache cache;
  const AttentionSpec base = spec("dtype=bf16,head_dim=64,causal=1");
  auto untuned = engine_at(cache.path).prepare_family(base, CompilePolicy::kJit);
  ASSERT_TRUE(untuned.ok()) << untuned.error().message;
  EXPECT_FALSE(untuned->main.tuned);
  ASSERT_TRUE(untuned->long_sequences.has_value());
  EXPECT_EQ(untuned->long_sequences->config.spec.consumer_wgs, 3);
  EXPECT_EQ(untuned->long_rule.min_seqlen, 4096);
  EXPECT_EQ(untuned->for_launch(extents(4096, 4096), 132).config.spec.consumer_wgs, 3);
  EXPECT_EQ(untuned->for_launch(extents(4096, 2048), 132).config.spec.consumer_wgs, 2);

  const std::string winner = "dtype=bf16,head_dim=64,causal=1,stages=2,consumer_wgs=2,block_m=128,block_n=64,cluster=1,ctas_per_sm=1,overlap=1,pingpong=1";
  ASSERT_TRUE(save_tuning_record(cache.path, base, {to_string(base), winner, 100.0, "b=1"}).ok());
  auto tuned = engine_at(cache.path).prepare_family(base, CompilePolicy::kJit);
  ASSERT_TRUE(tuned.ok()) << tuned.error().message;
  EXPECT_TRUE(tuned->main.tuned);
  EXPECT_FALSE(tuned->long_sequences.has_value());
  EXPECT_EQ(tuned->for_launch(extents(16384, 16384), 132).config.spec.block_n, 64);
}

TEST(Tuning, MalformedOrForeignRecordsAreIgnored) {
  TempCache cache;
  const AttentionSpec base = spec("dtype=fp16,head_dim=128,causal=1");
  const AttentionSpec other = spec("dtype=fp16,head_dim=96,causal=1");
  // A record for another base, copied under this base's name.
  ASSERT_TRUE(save_tuning_record(cache.path, other, {to_string(other), to_string(other) + ",block_n=64", 1.0, ""}).ok());
  fs::copy_file(tuning_record_path(cache.path, other), tuning_record_path(cache.path, base));
  EXPECT_FALSE(load_tuned_spec(cache.path, base).has_value());
  // A winner for another problem under the right base.
  ASSERT_TRUE(save_tuning_record(cache.path, base, {to_string(base), "dtype=fp16,head_dim=64,causal=1,block_n=64", 1.0, ""}).ok());
  EXPECT_FALSE(load_tuned_spec(cache.path, base).has_value());
  // Garbage, truncated JSON, an unparsable winner.
  for (const char* text : {"not a record", "flashjit-tuning 1\nbase_spec=dtype=fp16,head_dim=128,causal=1\n",
                           "flashjit-tuning 1\nbase_spec=dtype=fp16,head_dim=128,causal=1\nwinner_spec=head_dim=7\n",
                           "flashjit-tuning 2\nbase_spec=dtype=fp16,head_dim=128,causal=1\nwinner_spec=dtype=fp16,head_dim=128,causal=1\n", ""}) {
    std::ofstream(tuning_record_path(cache.path, base), std::ios::trunc) << text;
    EXPECT_FALSE(load_tuned_spec(cache.path, base).has_value()) << text;
    auto prepared = engine_at(cache.path).prepare(base);
    ASSERT_TRUE(prepared.ok()) << text;
    EXPECT_EQ(prepared->config.spec.block_n, 128) << text;
  }
  // No record and no directory: nothing.
  EXPECT_FALSE(load_tuned_spec(cache.path, spec("dtype=bf16,head_dim=256")).has_value());
  EXPECT_FALSE(load_tuned_spec("", base).has_value());
}

TEST(Tuning, RecordsAreKeyedByTheCanonicalBaseSpec) {
  TempCache cache;
  EXPECT_EQ(tuning_record_path(cache.path, spec("causal=1,head_dim=128,dtype=bf16")),
            tuning_record_path(cache.path, spec("dtype=bf16,head_dim=128,causal=1")));
  EXPECT_NE(tuning_record_path(cache.path, spec("dtype=bf16,head_dim=128,causal=1")),
            tuning_record_path(cache.path, spec("dtype=bf16,head_dim=128,causal=1,hang_trap=1")));
}

TEST(Tuning, TheFastestThatRanGoOnToTheConfirmRound) {
  // Candidate 1 did not run; 4 is fastest, then 2, 3, 0.
  const std::vector<double> first = {5.0, -1.0, 3.0, 4.0, 2.0};
  EXPECT_EQ(confirm_candidates(first, 3), (std::vector<std::size_t>{4, 2, 3}));
  EXPECT_EQ(confirm_candidates(first, 10), (std::vector<std::size_t>{4, 2, 3, 0}));
  EXPECT_EQ(confirm_candidates(first, 1), (std::vector<std::size_t>{4}));
  EXPECT_TRUE(confirm_candidates({-1.0, -1.0}, 3).empty());
  // Ties keep the candidates' order (the table's own choice comes first among the candidates).
  EXPECT_EQ(confirm_candidates({2.0, 1.0, 1.0}, 2), (std::vector<std::size_t>{1, 2}));
}

TEST(Tuning, TheLowestReTimedSumWinsEvenAgainstTheFirstRoundsOrder) {
  // The first round's fastest (position 0) re-times slower than the second: the second wins.
  EXPECT_EQ(confirmed_winner({3.02, 2.98, 3.40}), std::optional<std::size_t>(1));
  // A finalist that failed a re-time (below 0) cannot win; none left: no winner.
  EXPECT_EQ(confirmed_winner({-1.0, 3.1, 3.0}), std::optional<std::size_t>(2));
  EXPECT_EQ(confirmed_winner({-1.0, -1.0}), std::nullopt);
  EXPECT_EQ(confirmed_winner({}), std::nullopt);
}

}  // namespace
}  // namespace flashjit
