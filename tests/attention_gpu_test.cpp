// The attention forward on the GPU against the float64 reference: every head dim and dtype, causal
// or not, lengths that are not tile multiples, fully masked rows, GQA/MQA, packed QKV and other
// strides, 1 and 2 consumer warpgroups, stages 1..4, and random specs drawn fresh every run
// (FLASHJIT_TEST_SEED replays a run's draw).
// Skips with the reason where no Hopper GPU is present.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "support/feature_values.hpp"
#include "support/gpu_harness.hpp"
#include "support/test_seed.hpp"

namespace flashjit::testing {
namespace {

std::string spec_text(bool bf16, int d, bool causal, const std::string& extra = "") {
  return std::string("dtype=") + (bf16 ? "bf16" : "fp16") + ",head_dim=" + std::to_string(d) + ",causal=" +
         (causal ? "1" : "0") + (extra.empty() ? "" : "," + extra);
}

Problem problem(bool bf16, int d, bool causal, int sq, int sk, int batch = 1, int hq = 2, int hkv = 2) {
  return make_problem(bf16, d, causal, batch, sq, sk, hq, hkv);
}

// Runs every case, prints one line each, and fails each case that errs, leaves output unwritten
// or misses the error bounds.
void run_all(const std::vector<Case>& cases) {
  std::vector<std::string> specs;
  for (const Case& c : cases) specs.push_back(c.spec);
  precompile(specs);
  auto rng = fresh_rng();
  int failed = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    CheckResult r = run_case(c, rng);
    const bool ok = r.ran && r.unwritten == 0 && r.o_error <= o_error_bound(c.problem.bf16) && r.lse_error <= kLseErrorBound;
    std::printf("%s o_err %.2e lse_err %.2e unwritten %zu  %s %s\n", ok ? "PASS" : "FAIL", r.o_error, r.lse_error,
                r.unwritten, c.describe().c_str(), r.error.c_str());
    failed += !ok;
    EXPECT_TRUE(r.ran) << r.error;
    EXPECT_EQ(r.unwritten, 0u);
    EXPECT_LE(r.o_error, o_error_bound(c.problem.bf16));
    EXPECT_LE(r.lse_error, kLseErrorBound);
  }
  std::printf("%zu cases, %d failed\n", cases.size(), failed);
}

// A random test's seed comes from FLASHJIT_TEST_SEED when set, so that a failure can be replayed;
// a value that is not a decimal number fails the test naming the variable. Needs no GPU.
TEST(RandomSeed, FlashjitTestSeedReplaysARun) {
  const char* before = std::getenv("FLASHJIT_TEST_SEED");
  const std::string saved = before ? before : "";
  setenv("FLASHJIT_TEST_SEED", "18446744073709551557", 1);
  std::mt19937_64 replayed = fresh_rng(), expected(18446744073709551557ull);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(replayed(), expected());
  setenv("FLASHJIT_TEST_SEED", "12x", 1);
  EXPECT_NONFATAL_FAILURE(fresh_rng(), "FLASHJIT_TEST_SEED: '12x' is not allowed");
  setenv("FLASHJIT_TEST_SEED", "-1", 1);
  EXPECT_NONFATAL_FAILURE(fresh_rng(), "FLASHJIT_TEST_SEED: '-1' is not allowed");
  if (before) setenv("FLASHJIT_TEST_SEED", saved.c_str(), 1);
  else unsetenv("FLASHJIT_TEST_SEED");
}

TEST(AttentionGpu, ReferenceKernelMatchesCpuReference) {
  FLASHJIT_REQUIRE_GPU(env);
  // The GPU reference judges the large cases, so it is itself checked against the CPU definition.
  auto rng = fresh_rng();
  for (bool bf16 : {false, true}) {
    for (auto [sq, sk, causal] : {std::tuple{17, 33, true}, std::tuple{40, 7, true}, std::tuple{65, 130, false}}) {
      Problem p = problem(bf16, 72, causal, sq, sk, 2, 4, 2);
      p.scale = double(float(p.effective_scale()));
      std::string error;
      const ReferencePair r = references_on_random_inputs(*env, p, rng, &error);
      ASSERT_TRUE(error.empty()) << error;
      EXPECT_LT(relative_l2_error(r.gpu.o, r.cpu.o), 1e-12) << p.describe();
      ASSERT_EQ(r.gpu.lse.size(), r.cpu.lse.size());
      for (size_t i = 0; i < r.gpu.lse.size(); ++i) {
        if (std::isinf(r.cpu.lse[i])) EXPECT_TRUE(std::isinf(r.gpu.lse[i]) && r.gpu.lse[i] < 0);
        else EXPECT_NEAR(r.gpu.lse[i], r.cpu.lse[i], 1e-10);
      }
    }
  }
}

TEST(AttentionGpu, EveryHeadDimDtypeAndMask) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {32, 64, 80, 96, 128, 160, 192, 256})
      for (bool causal : {false, true})
        for (auto [sq, sk] : {std::pair{1, 1}, {17, 17}, {127, 127}, {128, 128}, {129, 129}, {1000, 1000},
                              {4097, 4097}, {128, 1000}, {1000, 129}, {1, 4097}, {17, 127}})
          cases.push_back({spec_text(bf16, d, causal), problem(bf16, d, causal, sq, sk)});
  run_all(cases);
}

TEST(AttentionGpu, GroupedQueryHeadsAndLayouts) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        for (auto [hq, hkv] : {std::pair{4, 4}, {8, 2}, {16, 2}, {8, 1}})
          cases.push_back({spec_text(bf16, d, causal), problem(bf16, d, causal, 300, 300, 2, hq, hkv)});
        for (Layout layout : {Layout::kPackedQKV, Layout::kHeadMajor, Layout::kPadded})
          cases.push_back({spec_text(bf16, d, causal), problem(bf16, d, causal, 257, 257, 3, 8, 2), layout});
        cases.push_back({spec_text(bf16, d, causal), problem(bf16, d, causal, 200, 333, 2, 4, 4), Layout::kContiguous, false});
      }
  run_all(cases);
}

TEST(AttentionGpu, ConsumerWarpgroupsStagesAndTiles) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int wgs : {1, 2})
          for (int stages : {1, 2, 3, 4}) {
            // Every pipeline variant: cluster 1/2, pingpong on and off.
            const int variant = stages - 1;
            const std::string extra = "consumer_wgs=" + std::to_string(wgs) + ",stages=" + std::to_string(stages) +
                                      (d == 128 && stages > 2 ? ",block_n=64" : "") + ",cluster=" + std::to_string(1 + (variant & 1)) +
                                      ",pingpong=" + std::to_string(wgs == 2 ? (variant + causal) & 1 : 0);
            cases.push_back({spec_text(bf16, d, causal, extra), problem(bf16, d, causal, 700, 1111, 2, 4, 2)});
          }
  run_all(cases);
}

// Two CTAs an SM (ctas_per_sm=2): one consumer warpgroup, the ring as deep as fits in 113 KB,
// clusters too; more tiles than resident CTAs, so the persistent grid walks several each.
TEST(AttentionGpu, TwoCtasAnSm) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (const char* extra : {"ctas_per_sm=2", "ctas_per_sm=2,block_n=64", "ctas_per_sm=2,cluster=2"})
          cases.push_back({spec_text(bf16, d, causal, extra), problem(bf16, d, causal, 1500, 1111, 3, 16, 4)});
  run_all(cases);
}

// Three consumer warpgroups: block_m 192, the pingpong turn passed round a ring of three, lengths
// around and below one 192-row tile.
TEST(AttentionGpu, ThreeConsumerWarpgroups) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {32, 64})
      for (bool causal : {false, true})
        for (int pingpong : {0, 1})
          for (auto [sq, sk] : {std::pair{700, 1111}, {193, 191}, {1, 300}, {1500, 700}}) {
            const std::string extra = "consumer_wgs=3,pingpong=" + std::to_string(pingpong) + (sq == 193 ? ",stages=3" : "");
            cases.push_back({spec_text(bf16, d, causal, extra), problem(bf16, d, causal, sq, sk, 2, 4, 2)});
          }
  run_all(cases);
}

// The persistent grid: any number of CTAs covers every tile exactly once (outputs are poisoned
// first), with the K/V ring, the two Q buffers and the pingpong turn (rings of two and three
// warpgroups, with and without pingpong) running on across tiles of different lengths, including
// tiles with no visible key (causal, seqlen_q > seqlen_k) and causal pairs over an odd number of
// query blocks (300 rows). One Q buffer (head dims 192 and 256, d128 with 3 stages) stages O in
// the last K/V block's slots and frees Q early (after the last Q K^T, or the first with Q in
// registers), with and without pingpong, one and two consumer warpgroups. Clusters launch one CTA
// per tile whatever the CTA limit.
TEST(AttentionGpu, PersistentGridOfAnySize) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  const std::pair<int, const char*> variants[] = {{64, ""},           {96, ""},        {128, ""},        {128, "pingpong=0"},
                                                  {128, "cluster=2"}, {128, "stages=3"}, {192, ""},      {256, ""},
                                                  {256, "pingpong=0"}, {256, "consumer_wgs=1"}, {192, "cluster=2"},
                                                  {256, "cluster=2"}};
  for (auto [d, extra] : variants)
    for (bool causal : {false, true})
      for (int ctas : {1, 3, 7, 0})
        for (auto [sq, sk] : {std::pair{1000, 1000}, {700, 130}, {129, 2000}, {300, 450}}) {
          Case c{spec_text(true, d, causal, extra), problem(true, d, causal, sq, sk, 2, 6, 3)};
          c.max_ctas = ctas;
          cases.push_back(c);
        }
  run_all(cases);
}

// scheduler=dynamic: tiles taken from the counter (check_attention zeroes it once and fails a
// launch that does not leave it at zero), heaviest first, on any grid: one CTA taking every tile,
// a few racing for them, the resident grid; fp16 and bf16, one and two consumer warpgroups.
TEST(AttentionGpu, DynamicSchedulerOnAnyGrid) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  const std::pair<int, const char*> variants[] = {{64, "scheduler=dynamic"}, {96, "scheduler=dynamic"}, {128, "scheduler=dynamic"},
                                                  {128, "scheduler=dynamic,consumer_wgs=1"}, {160, "scheduler=dynamic,block_n=64"}};
  int i = 0;
  for (auto [d, extra] : variants)
    for (bool causal : {false, true})
      for (int ctas : {1, 3, 7, 0})
        for (auto [sq, sk] : {std::pair{1000, 1000}, {700, 130}, {129, 2000}, {300, 450}}) {
          Case c{spec_text(i++ % 2 == 0, d, causal, extra), problem(true, d, causal, sq, sk, 2, 6, 3)};
          c.problem.bf16 = c.spec.find("bf16") != std::string::npos;
          c.max_ctas = ctas;
          cases.push_back(c);
        }
  run_all(cases);
}

// The causal deal's held-back blocks (templates/tile_schedule.cuh): whatever hold the parameters
// carry, on any grid, every tile is computed exactly once (poisoned outputs, float64 reference):
// pairs alone, a few blocks, every block, the last heads whole, over odd and even query block
// counts, causal lengths with seqlen_k > seqlen_q, where the CTA holding an odd last unit or a
// full last round decide where phase 2 starts. Then what the launch picks by itself on shapes
// where it holds some back (light blocks from 4k, the last heads whole at 512).
TEST(AttentionGpu, CausalDealHoldsBackAnyNumberOfBlocks) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (auto [d, extra] : {std::pair{64, ""}, {64, "consumer_wgs=3"}, {128, ""}, {256, ""}})
    for (auto [sq, sk, heads] : {std::tuple{1000, 1000, 3}, {1300, 1300, 5}, {700, 1500, 2}, {2048, 2048, 4}})
      for (int ctas : {1, 4, 7, 13})
        for (auto [fill, held_heads] : {std::pair{0, 0}, {1, 0}, {2, 0}, {5, 0}, {100, 0}, {100, 1}, {100, 3}}) {
          Case c{spec_text(true, d, true, extra), problem(true, d, true, sq, sk, 2, heads, heads)};
          c.max_ctas = ctas;
          c.fill_blocks = fill;  // clamped to the query blocks
          c.held_heads = held_heads;
          cases.push_back(c);
        }
  // What the launch picks (on the device's SMs): some held back at these lengths.
  for (bool bf16 : {false, true})
    for (auto [d, sq, batch, heads] : {std::tuple{64, 4096, 2, 16}, {128, 4096, 2, 16}, {128, 8192, 1, 16}, {96, 4096, 2, 16},
                                       {64, 512, 5, 16}, {128, 512, 5, 16}})
      cases.push_back({spec_text(bf16, d, true), problem(bf16, d, true, sq, sq, batch, heads, heads)});
  run_all(cases);
}

// Fully masked rows: bottom-right causal with seqlen_q > seqlen_k leaves the first rows with no key.
// Sliding windows and attention chunks (spec keys window, chunk; issue 38): windows 0, 1, 127,
// 128, 129 and 4096 keys on the left, the right or both, chunks of 1, 64, 100 and 1024 keys alone and
// with a window, causal or not, queries longer and shorter than keys (rows that see no key: O = 0,
// LSE = -inf), both dtypes, head dims 64-256, against the float64 reference with the same rule.
TEST(AttentionGpu, SlidingWindowsAndAttentionChunks) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  const std::pair<int, int> windows[] = {{0, 0}, {1, -1}, {127, 0}, {128, -1}, {-1, 129}, {129, 128}, {4096, 0}, {4096, 4096}, {-1, 0}};
  const std::pair<int, int> shapes[] = {{1000, 1000}, {4097, 4097}, {128, 1000}, {1000, 129}, {1, 4097}, {300, 17}};
  int i = 0;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (auto [left, right] : windows) {
          const auto [sq, sk] = shapes[i++ % 6];
          Problem p = problem(bf16, d, causal, sq, sk, 2, 4, 2);
          p.features.window_left = left, p.features.window_right = right;
          cases.push_back({spec_text(bf16, d, causal, "window=1"), p});
        }
  for (int chunk : {1, 64, 100, 1024})
    for (bool causal : {false, true})
      for (int d : {64, 128, 192}) {
        const auto [sq, sk] = shapes[i++ % 6];
        Problem p = problem(i % 2 == 0, d, causal, sq, sk, 2, 4, 1);
        p.features.chunk = chunk;
        cases.push_back({spec_text(i % 2 == 0, d, causal, "chunk=1"), p});
        Problem both = p;
        both.features.window_left = 127;
        cases.push_back({spec_text(i % 2 == 0, d, causal, "window=1,chunk=1"), both});
      }
  run_all(cases);
}

// The score feature tests' problems, a shape a case in turn: queries as many as, fewer and more
// than keys, a decode row, and causal rows that see no key; batch 2, 4 query heads over 2.
Problem feature_problem(bool bf16, int d, bool causal, int n) {
  const std::pair<int, int> shapes[] = {{1000, 1000}, {128, 1000}, {1000, 129}, {1, 4097}, {300, 17}};
  const auto [sq, sk] = shapes[n % 5];
  return problem(bf16, d, causal, sq, sk, 2, 4, 2);
}

// p's case with a sliding window as well (spec keys window=1 and `keys`): 1 or 128 keys on the left
// (by n), the diagonal (causal) or 128 keys on the right.
Case with_window(const Problem& p, int n, const std::string& keys) {
  Problem windowed = p;
  windowed.features.window_left = n % 3 == 0 ? 0 : 127, windowed.features.window_right = p.causal ? 0 : 128;
  return {spec_text(p.bf16, p.head_dim, p.causal, "window=1," + keys), windowed};
}

// Softcap 30 and 50 (spec key softcap; issue 38), alone and with windows, causal or not, both
// dtypes, head dims 64-256, at the default scale and at scale 1 (scaled scores of tens of units:
// the cap bends them), queries longer and shorter than keys, against the float64 reference.
TEST(AttentionGpu, SoftcapAloneAndWithWindows) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  int i = 0;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (double cap : {30.0, 50.0}) {
          Problem p = feature_problem(bf16, d, causal, i++);
          p.features.softcap = cap;
          if (i % 2 == 0) p.scale = 1.0;
          cases.push_back({spec_text(bf16, d, causal, "softcap=1"), p});
          cases.push_back(with_window(p, i, "softcap=1"));
        }
  run_all(cases);
}

// The large sink logits (exact in bf16): at and far above a row's log-sum over its keys (about 7
// with 1000 keys; at 20, O shrinks some e^-13-fold, which bf16 holds and fp16's subnormals would
// not, so fp16 takes 10).
std::vector<double> large_sinks(bool bf16) { return {bf16 ? 20.0 : 10.0, 8.0, 3.5, 0.0}; }

// Learnable sinks (spec key sinks; issue 38), large and very negative, alone, with windows and
// with softcap, causal or not, both dtypes, head dims 64-256, queries longer than keys (causal
// rows that see no key: O = 0, LSE = the sink), against the float64 reference.
TEST(AttentionGpu, SinksAloneAndWithWindows) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  int i = 0;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (bool large : {true, false}) {
          Problem p = feature_problem(bf16, d, causal, i++);
          p.features.sinks = sink_logits(4, large, large_sinks(bf16));
          cases.push_back({spec_text(bf16, d, causal, "sinks=1"), p});
          cases.push_back(with_window(p, i, "sinks=1"));
          Problem capped = p;
          capped.features.softcap = 30;
          cases.push_back({spec_text(bf16, d, causal, "softcap=1,sinks=1"), capped});
        }
  run_all(cases);
}

// ALiBi (spec key alibi; issue 38), slopes per head and per sequence, alone, with windows, with
// softcap and with sinks, causal or not, both dtypes, head dims 64-256, at the default scale and
// at scale 1, queries longer and shorter than keys (the bias from bottom-right aligned positions),
// against the float64 reference.
TEST(AttentionGpu, AlibiAloneAndWithWindowsSoftcapAndSinks) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  int i = 0;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (bool per_batch : {false, true}) {
          Problem p = feature_problem(bf16, d, causal, i++);
          p.features.alibi_slopes = alibi_slopes(4, 2, per_batch);
          if (i % 2 == 0) p.scale = 1.0;
          cases.push_back({spec_text(bf16, d, causal, "alibi=1"), p});
          cases.push_back(with_window(p, i, "alibi=1"));
          Problem capped = p;
          capped.features.softcap = 50;
          cases.push_back({spec_text(bf16, d, causal, "softcap=1,alibi=1"), capped});
          capped.features.sinks = sink_logits(4, i % 2 == 0, large_sinks(bf16));
          cases.push_back({spec_text(bf16, d, causal, "softcap=1,sinks=1,alibi=1"), capped});
        }
  run_all(cases);
}

TEST(AttentionGpu, FullyMaskedRowsAreZeroWithMinusInfinityLse) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (auto [sq, sk] : {std::pair{300, 17}, {1000, 1}, {129, 128}})
        cases.push_back({spec_text(bf16, d, true), problem(bf16, d, true, sq, sk)});
  run_all(cases);
}

// Large softmax scales: a row's scores spread over tens of units in the log2 domain, so its
// running max passes the old one by more than the kernel's rescale slack (2^8) many times (O
// rescaled, max moved) and by less many more (max kept stale, exponentials up to 2^8). Peaked
// rows (scale 4) stress the fp16 range of P.
TEST(AttentionGpu, RunningMaxJumpsPastTheRescaleSlack) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (double scale : {0.3, 1.0, 4.0}) {
          Problem p = problem(bf16, d, causal, 1000, 1000, 2, 4, 2);
          p.scale = scale;
          cases.push_back({spec_text(bf16, d, causal), p});
        }
  run_all(cases);
}

// Keys that score higher the earlier they sit (the kernel walks blocks from the last): a row's
// max passes the running one at every block, by about 10 (log2 units: past the slack, so the
// exponentials against the running max overflow the sum bound and the block is recomputed) or by
// hundreds (they overflow to inf), in unmasked blocks as well as masked ones.
TEST(AttentionGpu, EveryBlockRaisesTheRunningMax) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (double growth : {20.0, 400.0}) {
          Problem p = problem(bf16, d, causal, 700, 1000, 1, 4, 2);
          p.key_growth = growth;
          cases.push_back({spec_text(bf16, d, causal), p});
        }
  run_all(cases);
}

// Random specs and shapes, drawn fresh each run (the seed is printed; FLASHJIT_TEST_SEED replays it).
TEST(AttentionGpu, RandomSpecsAndShapes) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  std::vector<Case> cases;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  while (cases.size() < 120) {
    const bool bf16 = pick(0, 1);
    const int d = 8 * pick(1, 32);
    const bool causal = pick(0, 1);
    const int wgs = d <= 96 ? pick(1, 3) : pick(1, 2);  // three warpgroups spill above 96
    std::string extra = "consumer_wgs=" + std::to_string(wgs) + ",stages=" + std::to_string(pick(1, 4)) +
                        ",cluster=" + std::to_string(pick(1, 2)) +
                        ",pingpong=" + std::to_string(wgs >= 2 ? pick(0, 1) : 0);
    if (pick(0, 2) == 0) extra += ",block_n=" + std::to_string(16 * pick(1, d <= 128 ? 8 : 5));
    const std::string spec = spec_text(bf16, d, causal, extra);
    auto parsed = parse_spec(spec);
    if (!parsed || !make_config(*parsed)) continue;  // over the shared-memory limit: draw again
    const int sq = pick(1, 2500), sk = pick(1, 2500);
    const int hkv = pick(1, 3), group = std::vector<int>{1, 2, 4, 8}[pick(0, 3)];
    Problem p = problem(bf16, d, causal, sq, sk, pick(1, 3), hkv * group, hkv);
    if (pick(0, 4) == 0) p.scale = 0.05 + 0.3 * pick(0, 10) / 10.0;
    const Layout layout = sq == sk && pick(0, 3) == 0 ? Layout::kPackedQKV : Layout(pick(0, 1) * 2);
    cases.push_back({spec, p, layout, pick(0, 5) != 0});
  }
  run_all(cases);
}

// V (and O) narrower than Q and K (spec key head_dim_v): DeepSeek's prefill 192/128, Mistral
// Small 4's 320/256 and other pairs.
std::string spec_text_v(bool bf16, int d, int dv, bool causal, const std::string& extra = "") {
  return spec_text(bf16, d, causal, "head_dim_v=" + std::to_string(dv) + (extra.empty() ? "" : "," + extra));
}
Problem problem_v(bool bf16, int d, int dv, bool causal, int sq, int sk, int batch = 1, int hq = 2, int hkv = 2) {
  Problem p = problem(bf16, d, causal, sq, sk, batch, hq, hkv);
  p.head_dim_v = dv;
  return p;
}

// The GPU reference with O narrower than Q (head_dim_v), and at head_dim 320 (its query row's
// room), against the CPU definition.
TEST(AttentionGpu, ReferenceKernelMatchesCpuReferenceWithHeadDimV) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  for (auto [d, dv] : {std::pair{192, 128}, {72, 40}, {320, 256}, {320, 64}}) {
    for (auto [sq, sk, causal] : {std::tuple{17, 33, true}, std::tuple{65, 130, false}}) {
      Problem p = problem_v(d != 72, d, dv, causal, sq, sk, 2, 4, 2);
      p.scale = double(float(p.effective_scale()));
      std::string error;
      const ReferencePair r = references_on_random_inputs(*env, p, rng, &error);
      ASSERT_TRUE(error.empty()) << error;
      ASSERT_EQ(r.gpu.o.size(), size_t(2) * sq * 4 * dv) << p.describe();
      EXPECT_LT(relative_l2_error(r.gpu.o, r.cpu.o), 1e-12) << p.describe();
      ASSERT_EQ(r.gpu.lse.size(), r.cpu.lse.size());
      for (size_t i = 0; i < r.gpu.lse.size(); ++i) {
        if (std::isinf(r.cpu.lse[i])) EXPECT_TRUE(std::isinf(r.gpu.lse[i]) && r.gpu.lse[i] < 0);
        else EXPECT_NEAR(r.gpu.lse[i], r.cpu.lse[i], 1e-10);
      }
    }
  }
}

// 192/128 both dtypes, causal or not, lengths that are not tile multiples, GQA, every layout (V's
// and O's strides their own: packed QKV rows hold Q's, K's and V's heads), no LSE; 128/64,
// 128/96, 256/128, 64/32; 320/256 causal or not.
TEST(AttentionGpu, HeadDimVNarrowerThanQ) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true}) {
      for (auto [sq, sk] : {std::pair{1, 1}, {17, 17}, {128, 128}, {129, 129}, {1000, 1000}, {4097, 4097}, {128, 1000}, {1000, 129}, {1, 4097}})
        cases.push_back({spec_text_v(bf16, 192, 128, causal), problem_v(bf16, 192, 128, causal, sq, sk)});
      cases.push_back({spec_text_v(bf16, 192, 128, causal), problem_v(bf16, 192, 128, causal, 300, 300, 2, 16, 2)});
      for (Layout layout : {Layout::kPackedQKV, Layout::kHeadMajor, Layout::kPadded})
        cases.push_back({spec_text_v(bf16, 192, 128, causal), problem_v(bf16, 192, 128, causal, 257, 257, 3, 8, 2), layout});
      cases.push_back({spec_text_v(bf16, 192, 128, causal), problem_v(bf16, 192, 128, causal, 200, 333, 2, 4, 4), Layout::kContiguous, false});
      for (auto [d, dv] : {std::pair{128, 64}, {128, 96}, {256, 128}, {64, 32}})
        for (auto [sq, sk] : {std::pair{129, 129}, {1000, 1000}, {17, 700}})
          cases.push_back({spec_text_v(bf16, d, dv, causal), problem_v(bf16, d, dv, causal, sq, sk, 2, 4, 2)});
      for (auto [sq, sk] : {std::pair{1, 1}, {129, 129}, {1000, 1000}, {2048, 2048}, {128, 1000}, {1000, 129}})
        cases.push_back({spec_text_v(bf16, 320, 256, causal), problem_v(bf16, 320, 256, causal, sq, sk, 2, 4, 2)});
      for (Layout layout : {Layout::kPackedQKV, Layout::kHeadMajor, Layout::kPadded})
        cases.push_back({spec_text_v(bf16, 320, 256, causal), problem_v(bf16, 320, 256, causal, 257, 257, 2, 4, 2), layout});
    }
  run_all(cases);
}

// Random head dim pairs (V any multiple of 8 up to Q's), tiles, shapes and layouts, drawn fresh
// each run (the seed is printed; FLASHJIT_TEST_SEED replays it).
TEST(AttentionGpu, HeadDimVRandomPairsAndShapes) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  std::vector<Case> cases;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  while (cases.size() < 40) {
    const bool bf16 = pick(0, 1);
    const int d = 8 * pick(2, 40);
    const int dv = 8 * pick(1, std::min(d, 256) / 8);
    const bool causal = pick(0, 1);
    std::string extra;
    if (pick(0, 2) == 0) extra = "consumer_wgs=" + std::to_string(pick(1, 2));
    const std::string spec = spec_text_v(bf16, d, dv, causal, extra);
    auto parsed = parse_spec(spec);
    if (!parsed || !make_config(*parsed)) continue;  // a pair or tile the spec refuses: draw again
    const int sq = pick(1, 2000), sk = pick(1, 2000);
    const int hkv = pick(1, 3), group = std::vector<int>{1, 2, 4}[pick(0, 2)];
    Problem p = problem_v(bf16, d, dv, causal, sq, sk, pick(1, 2), hkv * group, hkv);
    const Layout layout = sq == sk && pick(0, 3) == 0 ? Layout::kPackedQKV : Layout(pick(0, 1) * 2);
    cases.push_back({spec, p, layout, pick(0, 5) != 0});
  }
  run_all(cases);
}

// Head dims above 256 (one consumer warpgroup, 32-key blocks, two stages; V's 384 and 512 columns
// in two 256-column parts of O, each its own tile): Gemma 4's global 512/512, MLA's absorbed
// 576/512 (V its own tensor here; MlaDecodeGpu reads it from K's rows), 384/384, 576/384,
// 512/256, 400/256; both dtypes, causal or not, lengths around the 32-key blocks and the 64-row
// query blocks, fully masked rows (causal, more queries than keys).
TEST(LargeHeadDimGpu, EveryPairDtypeAndMask) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (auto [d, dv] : {std::pair{512, 512}, {576, 512}, {384, 384}, {576, 384}, {512, 256}, {400, 256}})
        for (auto [sq, sk] : {std::pair{1, 1}, {31, 33}, {129, 129}, {1000, 700}, {700, 1000}, {1, 2049}, {300, 17}})
          cases.push_back({spec_text_v(bf16, d, dv, causal), problem_v(bf16, d, dv, causal, sq, sk, 2, 4, 2)});
  run_all(cases);
}

// paired=1: the tile's two consumer warpgroups share its 64 rows, the first computing the scores
// and handing P to the second, each computing half of O (V from its own ring): every pair with V
// wider than 256, both dtypes, causal or not, lengths that are not block multiples, GQA and MQA.
TEST(LargeHeadDimGpu, PairedWarpgroupsEveryPairDtypeAndMask) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (auto [d, dv] : {std::pair{512, 512}, {576, 512}, {384, 384}, {576, 384}})
        for (auto [sq, sk] : {std::pair{1, 1}, {31, 33}, {129, 129}, {1000, 700}, {700, 1000}, {1, 2049}, {300, 17}})
          cases.push_back({spec_text_v(bf16, d, dv, causal, "paired=1"), problem_v(bf16, d, dv, causal, sq, sk, 2, 4, 2)});
  for (auto [hq, hkv] : {std::pair{8, 2}, {16, 1}})
    cases.push_back({spec_text_v(true, 512, 512, true, "paired=1"), problem_v(true, 512, 512, true, 300, 300, 2, hq, hkv)});
  run_all(cases);
}

// paired=1 with q_reg_dims at its most for each pair (Q's first head dims in the scores warpgroup's
// registers, the rest from shared memory; 384/384 all of them): every pair, dtype and mask.
TEST(LargeHeadDimGpu, PairedQRegDimsEveryPairDtypeAndMask) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (auto [d, dv, dims] : {std::tuple{512, 512, 288}, {576, 512, 288}, {384, 384, 384}, {576, 384, 416}})
        for (auto [sq, sk] : {std::pair{1, 1}, {31, 33}, {129, 129}, {1000, 700}, {700, 1000}, {1, 2049}, {300, 17}})
          cases.push_back({spec_text_v(bf16, d, dv, causal, "paired=1,q_reg_dims=" + std::to_string(dims)), problem_v(bf16, d, dv, causal, sq, sk, 2, 4, 2)});
  cases.push_back({spec_text_v(true, 512, 512, true, "paired=1,q_reg_dims=128"), problem_v(true, 512, 512, true, 300, 300, 2, 16, 1)});
  run_all(cases);
}

// dim_split=1: the two CTAs of a cluster share out the head dims of one tile and add their halves
// of each block's scores through distributed shared memory: 512/512 and 384/384, both dtypes,
// causal or not, lengths that are not block multiples (fully masked rows where the queries
// outnumber the keys under the causal mask), GQA and MQA, every layout, no LSE, and grids capped
// (a cluster a tile whatever max_ctas says).
TEST(LargeHeadDimGpu, DimSplitEveryPairDtypeAndMask) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (int d : {512, 384})
        for (auto [sq, sk] : {std::pair{1, 1}, {31, 33}, {129, 129}, {1000, 700}, {700, 1000}, {1, 2049}, {300, 17}})
          cases.push_back({spec_text_v(bf16, d, d, causal, "dim_split=1"), problem_v(bf16, d, d, causal, sq, sk, 2, 4, 2)});
  for (bool causal : {false, true}) {
    for (auto [hq, hkv] : {std::pair{8, 2}, {16, 1}})
      cases.push_back({spec_text_v(true, 512, 512, causal, "dim_split=1"), problem_v(true, 512, 512, causal, 300, 300, 2, hq, hkv)});
    for (Layout layout : {Layout::kPackedQKV, Layout::kHeadMajor, Layout::kPadded})
      cases.push_back({spec_text_v(true, 512, 512, causal, "dim_split=1"), problem_v(true, 512, 512, causal, 257, 257, 2, 4, 2), layout});
    cases.push_back({spec_text_v(false, 512, 512, causal, "dim_split=1"), problem_v(false, 512, 512, causal, 200, 333, 2, 4, 4), Layout::kContiguous, false});
    Case capped{spec_text_v(true, 512, 512, causal, "dim_split=1"), problem_v(true, 512, 512, causal, 700, 450, 2, 4, 2)};
    capped.max_ctas = 3;
    cases.push_back(capped);
  }
  run_all(cases);
}

// The same kernels with GQA and MQA (16 query heads on 1 K/V head), every layout (packed QKV rows
// hold Q's, K's and V's heads at their own widths), no LSE, and persistent grids of 1, 3 and one
// CTA per tile (both O parts of a query block then on different CTAs).
TEST(LargeHeadDimGpu, GroupedHeadsLayoutsAndGrids) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<Case> cases;
  for (auto [d, dv] : {std::pair{512, 512}, {576, 512}, {384, 384}})
    for (bool causal : {false, true}) {
      for (auto [hq, hkv] : {std::pair{8, 2}, {16, 1}})
        cases.push_back({spec_text_v(true, d, dv, causal), problem_v(true, d, dv, causal, 300, 300, 2, hq, hkv)});
      for (Layout layout : {Layout::kPackedQKV, Layout::kHeadMajor, Layout::kPadded})
        cases.push_back({spec_text_v(true, d, dv, causal), problem_v(true, d, dv, causal, 257, 257, 2, 4, 2), layout});
      cases.push_back({spec_text_v(false, d, dv, causal), problem_v(false, d, dv, causal, 200, 333, 2, 4, 4), Layout::kContiguous, false});
      for (int ctas : {1, 3, 0}) {
        Case c{spec_text_v(true, d, dv, causal), problem_v(true, d, dv, causal, 700, 450, 2, 4, 2)};
        c.max_ctas = ctas;
        cases.push_back(c);
      }
    }
  run_all(cases);
}

}  // namespace
}  // namespace flashjit::testing
