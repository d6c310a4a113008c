// The engine inputs on the GPU (spec varlen=1 / paged=1) against the float64 reference: random
// ragged batches (empty and one-token sequences, queries longer and shorter than keys), K/V packed,
// dense with seqused_k, or paged (page sizes 1, 3, 16, 64, 128, 256; shuffled tables, shared
// pages; NHD, HND, K and V in one tensor), GQA ratios 1-16, head dims 64-256 and odd ones, fp16
// and bf16, causal or not, and one CUDA graph replayed after the lengths and the table change.
// Outputs are poisoned first; rows past the last sequence must stay untouched.
// Skips with the reason where no Hopper GPU is present.
#include <cstdio>

#include <gtest/gtest.h>

#include "support/feature_values.hpp"
#include "support/gpu_harness.hpp"
#include "support/test_seed.hpp"
#include "launch/merge_states.hpp"
#include "verify/engine_check.hpp"
#include "verify/reference.hpp"

#include <cmath>

namespace flashjit::testing {
namespace {

std::string engine_spec(const EngineProblem& p, const std::string& extra = "") {
  std::string spec = std::string("dtype=") + (p.bf16 ? "bf16" : "fp16") + ",head_dim=" + std::to_string(p.head_dim) +
                     (p.head_dim_v && p.head_dim_v != p.head_dim ? ",head_dim_v=" + std::to_string(p.head_dim_v) : std::string()) +
                     ",causal=" + (p.causal ? "1" : "0") + (p.dense_q ? "" : ",varlen=1");
  if (p.kv == KvSource::kPaged) spec += ",paged=1";
  return extra.empty() ? spec : spec + "," + extra;
}

struct EngineCase {
  std::string spec;
  EngineProblem problem;
  int max_ctas = -1;  // >= 0: launch on this grid bound instead of the SM count (0: one CTA per
                      // tile, and a split_kv launch then takes max_splits splits exactly)
};

bool report(const EngineCase& c, const EngineCheck& check) {
  const CheckResult& r = check.result;
  const bool ok = r.ran && r.error.empty() && r.unwritten == 0 && r.o_error <= o_error_bound(c.problem.bf16) &&
                  r.lse_error <= kLseErrorBound;
  std::printf("%s o_err %.2e lse_err %.2e unwritten %zu  %s  %s %s %s\n", ok ? "PASS" : "FAIL", r.o_error, r.lse_error,
              r.unwritten, c.spec.c_str(), c.problem.describe().c_str(), r.error.c_str(), check.detail.c_str());
  EXPECT_TRUE(r.ran) << r.error;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.unwritten, 0u) << check.detail;
  EXPECT_LE(r.o_error, o_error_bound(c.problem.bf16)) << check.detail;
  EXPECT_LE(r.lse_error, kLseErrorBound) << check.detail;
  return ok;
}

void run_all(const std::vector<EngineCase>& cases) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<std::string> specs;
  for (const EngineCase& c : cases) specs.push_back(c.spec);
  precompile(specs);
  auto rng = fresh_rng();
  int failed = 0;
  for (const EngineCase& c : cases) {
    SCOPED_TRACE(c.spec + " " + c.problem.describe());
    std::string error;
    auto kernel = get_test_kernel(c.spec, &error);
    ASSERT_TRUE(kernel) << error;
    EngineBuffers buffers(*env->api, c.problem, capacity_for(c.problem));
    CheckDevice device = env->device();
    if (c.max_ctas >= 0) device.max_ctas = c.max_ctas;
    failed += !report(c, check_engine_attention(device, {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, c.problem, buffers, rng));
  }
  std::printf("%zu cases, %d failed\n", cases.size(), failed);
}

EngineProblem ragged(std::mt19937_64& rng, bool bf16, int d, bool causal, int hq, int hkv, KvSource kv, int page_size,
                     int batch, int max_len) {
  EngineProblem p = random_engine_problem(rng, batch, max_len);
  p.bf16 = bf16, p.head_dim = d, p.causal = causal, p.heads_q = hq, p.heads_kv = hkv, p.kv = kv, p.page_size = page_size;
  return p;
}

TEST(AttentionEngineGpu, RaggedBatchesEveryHeadDimDtypeAndMask) {
  std::mt19937_64 shapes(11);
  std::vector<EngineCase> cases;
  for (bool bf16 : {false, true})
    for (int d : {64, 80, 128, 192, 256})
      for (bool causal : {false, true})
        for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
          EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, kv, 64, 7, 700);
          cases.push_back({engine_spec(p), p});
        }
  run_all(cases);
}

TEST(AttentionEngineGpu, PageSizesLayoutsAndSharedPages) {
  std::mt19937_64 shapes(12);
  std::vector<EngineCase> cases;
  for (int page_size : {1, 3, 16, 48, 64, 128, 256})
    for (int layout = 0; layout < 3; ++layout) {
      EngineProblem p = ragged(shapes, true, 128, true, 8, 2, KvSource::kPaged, page_size, 6, 600);
      p.head_major_pool = layout == 1;
      p.kv_in_one_tensor = layout == 2;
      cases.push_back({engine_spec(p), p});
    }
  run_all(cases);
}

TEST(AttentionEngineGpu, GroupedQueryRatiosAndMixedDecodeAndPrefill) {
  std::mt19937_64 shapes(13);
  std::vector<EngineCase> cases;
  for (auto [hq, hkv] : {std::pair{4, 4}, {8, 2}, {16, 2}, {16, 1}, {32, 8}})
    for (bool causal : {false, true}) {
      // Decode (1 query) and speculative (2-16) sequences among prefills, in one launch.
      EngineProblem p = ragged(shapes, true, 128, causal, hq, hkv, KvSource::kPaged, 16, 12, 1100);
      p.seqlen_q[0] = 1, p.seqlen_k[0] = 1000;
      p.seqlen_q[1] = 4, p.seqlen_k[1] = 900;
      p.seqlen_q[2] = 300, p.seqlen_k[2] = 1100;
      cases.push_back({engine_spec(p), p});
    }
  run_all(cases);
}

TEST(AttentionEngineGpu, ExplicitTilesAndStages) {
  std::mt19937_64 shapes(14);
  std::vector<EngineCase> cases;
  for (const char* tiles : {"consumer_wgs=1", "consumer_wgs=3,head_dim=64", "stages=1", "stages=4,head_dim=64", "block_n=64", "block_n=176,head_dim=64"}) {
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged}) {
      EngineProblem p = ragged(shapes, true, 128, true, 4, 2, kv, 32, 5, 500);
      std::string extra = tiles;
      if (extra.find("head_dim=64") != std::string::npos) {
        p.head_dim = 64;
        extra = extra.substr(0, extra.find(",head_dim"));
      }
      cases.push_back({engine_spec(p, extra), p});
    }
  }
  run_all(cases);
}

// paged=1 without varlen: dense queries (every sequence the same count: decode, speculative,
// a chunk) against a paged cache of per-sequence lengths.
TEST(AttentionEngineGpu, PagedCacheWithDenseQueries) {
  std::mt19937_64 shapes(15);
  std::vector<EngineCase> cases;
  for (int queries : {1, 4, 100})
    for (int page_size : {1, 16, 64})
      for (bool causal : {false, true}) {
        EngineProblem p = ragged(shapes, true, 128, causal, 8, 2, KvSource::kPaged, page_size, 5, 600);
        p.dense_q = true;
        p.spare_q_rows = 0;
        for (int& q : p.seqlen_q) q = queries;
        cases.push_back({engine_spec(p), p});
      }
  run_all(cases);
}

// Decode: sequences of `queries` queries against 0..max_keys keys (the first ones: no key, one
// key, a whole number of 128-key blocks, one past it), the rest random.
EngineProblem decode_batch(std::mt19937_64& rng, bool bf16, int d, bool causal, int hq, int hkv, KvSource kv, int page_size,
                           int batch, int queries, int max_keys) {
  EngineProblem p = ragged(rng, bf16, d, causal, hq, hkv, kv, page_size, batch, 8);
  const int special[] = {0, 1, 1024, 1025};
  for (int b = 0; b < batch; ++b) {
    p.seqlen_q[b] = queries;
    p.seqlen_k[b] = b < 4 ? std::min(special[b], max_keys) : 1 + int(rng() % max_keys);
  }
  return p;
}

const char* kDecode = "pack_gqa=1,split_kv=1";

// Every split count exactly (a grid of one CTA per tile takes max_splits): 1, 2, an odd one and
// the most the kernel's lengths give, with key counts that do not divide into them.
TEST(AttentionEngineGpu, SplitKvDecodeEverySplitCount) {
  std::mt19937_64 shapes(21);
  std::vector<EngineCase> cases;
  for (int splits : {1, 2, 3, 16})
    for (KvSource kv : {KvSource::kPaged, KvSource::kDense})
      for (bool causal : {false, true}) {
        EngineProblem p = decode_batch(shapes, true, 128, causal, 32, 8, kv, 16, 7, causal ? 4 : 1, 2500);
        p.max_splits = splits;
        cases.push_back({engine_spec(p, kDecode), p, 0});
      }
  run_all(cases);
}

// GQA ratios 1-16 (3 and 6 pack 1 and 2 heads), 1-16 queries, pages 1/16/64/256, dense and packed
// K/V, both dtypes, head dims 64/80/128/256, with the split count the launch picks from the SMs.
TEST(AttentionEngineGpu, SplitKvDecodeGroupsQueriesPagesAndHeadDims) {
  std::mt19937_64 shapes(22);
  std::vector<EngineCase> cases;
  const std::pair<int, int> groups[] = {{8, 8}, {8, 4}, {12, 4}, {32, 8}, {24, 4}, {16, 2}, {16, 1}};
  int i = 0;
  for (auto [hq, hkv] : groups)
    for (int queries : {1, 2, 16}) {
      const int pages[] = {1, 16, 64, 256};
      const KvSource kv = i % 5 == 3 ? KvSource::kDense : i % 5 == 4 ? KvSource::kPacked : KvSource::kPaged;
      const int dims[] = {64, 80, 128, 256};
      const int d = dims[i % 4];
      EngineProblem p = decode_batch(shapes, i % 2 == 0, d, queries > 1, hq, hkv, kv, pages[(i / 2) % 4], 5 + i % 4, queries, 1800);
      p.max_splits = 8 + 8 * (i % 3);
      cases.push_back({engine_spec(p, kDecode), p});
      ++i;
    }
  run_all(cases);
}

// Two CTAs an SM (ctas_per_sm=2: half the shared memory and registers each, twice the resident
// CTAs and splits): decode at three K/V block sizes, packed and dense K/V (not paged: refused),
// one and four causal queries, and a prefill batch through the same key.
TEST(AttentionEngineGpu, TwoCtasAnSm) {
  std::mt19937_64 shapes(25);
  std::vector<EngineCase> cases;
  int i = 0;
  for (const char* tiles : {"ctas_per_sm=2", "ctas_per_sm=2,block_n=64", "ctas_per_sm=2,block_n=48"})
    for (int d : {64, 128}) {
      const KvSource kv = i % 2 == 0 ? KvSource::kPacked : KvSource::kDense;
      const int queries = i % 2 == 0 ? 1 : 4;
      EngineProblem p = decode_batch(shapes, i % 2 == 0, d, queries > 1, 32, 8, kv, i % 4 == 0 ? 16 : 64, 3 + i % 5, queries, 3000);
      p.max_splits = 32;
      cases.push_back({engine_spec(p, std::string(kDecode) + "," + tiles), p});
      ++i;
    }
  for (KvSource kv : {KvSource::kDense, KvSource::kPacked}) {
    EngineProblem p = ragged(shapes, true, 128, true, 8, 2, kv, 16, 6, 700);
    cases.push_back({engine_spec(p, "ctas_per_sm=2"), p});
  }
  run_all(cases);
}

// scheduler=dynamic on engine inputs: ragged batches (empty and one-token sequences, whose empty
// tiles the producers skip a run at a time) with packed, paged and dense K/V, odd page sizes, GQA,
// split-KV decode with the counter before the partials, one consumer warpgroup, and small grids
// where a few CTAs race for every tile. Each check fails if the counter is not back at zero.
TEST(AttentionEngineGpu, DynamicScheduler) {
  std::mt19937_64 shapes(26);
  std::vector<EngineCase> cases;
  int i = 0;
  for (int d : {64, 96, 128})
    for (bool causal : {false, true})
      for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
        EngineProblem p = ragged(shapes, i % 2 == 0, d, causal, 8 * (1 + i % 2), 2, kv, i % 3 == 0 ? 3 : i % 3 == 1 ? 16 : 64, 5 + i % 7, 900);
        p.dynamic_schedule = true;
        cases.push_back({engine_spec(p, "scheduler=dynamic"), p, i % 4 == 0 ? 3 : -1});
        ++i;
      }
  for (int page_size : {1, 128}) {
    EngineProblem p = ragged(shapes, true, 128, true, 16, 2, KvSource::kPaged, page_size, 12, 500);
    p.dynamic_schedule = true;
    cases.push_back({engine_spec(p, "scheduler=dynamic"), p, 1});
    cases.push_back({engine_spec(p, "scheduler=dynamic,consumer_wgs=1"), p});
  }
  for (KvSource kv : {KvSource::kPaged, KvSource::kPacked}) {
    EngineProblem p = decode_batch(shapes, true, 128, true, 32, 8, kv, 16, 6, 4, 3000);
    p.max_splits = 16;
    p.dynamic_schedule = true;
    cases.push_back({engine_spec(p, std::string(kDecode) + ",scheduler=dynamic"), p});
  }
  run_all(cases);
}

// Decode and speculative sequences among prefills in one varlen launch (the decode path's packing
// and splits for all of them), and packed heads without splits.
TEST(AttentionEngineGpu, PackedHeadsAndSplitsOnMixedBatches) {
  std::mt19937_64 shapes(23);
  std::vector<EngineCase> cases;
  for (const char* extra : {"pack_gqa=1", kDecode, "split_kv=1"})
    for (bool causal : {false, true})
      for (KvSource kv : {KvSource::kPaged, KvSource::kPacked}) {
        EngineProblem p = ragged(shapes, true, 128, causal, 16, 4, kv, 64, 9, 900);
        p.seqlen_q[0] = 1, p.seqlen_k[0] = 1000;
        p.seqlen_q[1] = 4, p.seqlen_k[1] = 900;
        if (std::string(extra).find("split_kv") != std::string::npos) p.max_splits = 12;
        cases.push_back({engine_spec(p, extra), p});
        if (p.max_splits == 0) continue;
        p.workspace_splits = 3;  // a workspace for three splits: the launch takes at most three
        cases.push_back({engine_spec(p, extra), p, 0});
      }
  run_all(cases);
}

// Batch-invariant mode (split_keys: a fixed split size): correct for every sequence length.
TEST(AttentionEngineGpu, SplitKvFixedSplitSize) {
  std::mt19937_64 shapes(24);
  std::vector<EngineCase> cases;
  for (int split_keys : {128, 384, 1024})
    for (bool causal : {false, true}) {
      EngineProblem p = decode_batch(shapes, true, 128, causal, 32, 8, KvSource::kPaged, 16, 6, causal ? 3 : 1, 2000);
      p.max_splits = (2000 + split_keys - 1) / split_keys;
      p.split_keys = split_keys;
      cases.push_back({engine_spec(p, kDecode), p});
    }
  run_all(cases);
}

// combine=inline: the last split of each tile's rows merges the partials in the attention kernel
// (no second kernel). Every split count exactly (one CTA per tile) and on grids of one to three
// persistent CTAs (one CTA then counts in several splits of the same rows), GQA 1-16 with 1-16
// queries, pages 1/16/64/256 and dense or packed K/V, head dims 64/80/128/256, both dtypes, mixed
// decode and prefill batches (a workspace for three splits too), fixed split sizes, the dynamic
// scheduler. Each check fails if a merge counter is not back at zero after the launch.
TEST(AttentionEngineGpu, SplitKvInlineCombine) {
  std::mt19937_64 shapes(27);
  std::vector<EngineCase> cases;
  const std::string inline_decode = std::string(kDecode) + ",combine=inline";
  for (int splits : {1, 2, 3, 16})
    for (bool causal : {false, true}) {
      const KvSource kv = splits % 2 == 0 ? KvSource::kPaged : KvSource::kDense;
      EngineProblem p = decode_batch(shapes, true, 128, causal, 32, 8, kv, 16, 7, causal ? 4 : 1, 2500);
      p.max_splits = splits;
      p.inline_combine = true;
      cases.push_back({engine_spec(p, inline_decode), p, 0});
      if (splits == 16) cases.push_back({engine_spec(p, inline_decode), p, causal ? 3 : 1});
    }
  const std::pair<int, int> groups[] = {{8, 8}, {12, 4}, {32, 8}, {16, 1}};
  int i = 0;
  for (auto [hq, hkv] : groups)
    for (int queries : {1, 16}) {
      const int pages[] = {1, 16, 64, 256};
      const KvSource kv = i % 4 == 3 ? KvSource::kPacked : KvSource::kPaged;
      const int dims[] = {64, 80, 128, 256};
      EngineProblem p = decode_batch(shapes, i % 2 == 0, dims[i % 4], queries > 1, hq, hkv, kv, pages[(i / 2) % 4], 5 + i % 4, queries, 1800);
      p.max_splits = 8 + 8 * (i % 3);
      p.inline_combine = true;
      cases.push_back({engine_spec(p, inline_decode), p});
      ++i;
    }
  for (const char* extra : {"pack_gqa=1,split_kv=1,combine=inline", "split_kv=1,combine=inline"})
    for (bool causal : {false, true}) {
      EngineProblem p = ragged(shapes, true, 128, causal, 16, 4, causal ? KvSource::kPaged : KvSource::kPacked, 64, 9, 900);
      p.seqlen_q[0] = 1, p.seqlen_k[0] = 1000;
      p.seqlen_q[1] = 4, p.seqlen_k[1] = 900;
      p.max_splits = 12;
      p.inline_combine = true;
      cases.push_back({engine_spec(p, extra), p});
      p.workspace_splits = 3;
      cases.push_back({engine_spec(p, extra), p, 0});
    }
  for (int split_keys : {128, 1024}) {
    EngineProblem p = decode_batch(shapes, true, 128, true, 32, 8, KvSource::kPaged, 16, 6, 3, 2000);
    p.max_splits = (2000 + split_keys - 1) / split_keys;
    p.split_keys = split_keys;
    p.inline_combine = true;
    cases.push_back({engine_spec(p, inline_decode), p});
  }
  for (KvSource kv : {KvSource::kPaged, KvSource::kPacked}) {
    EngineProblem p = decode_batch(shapes, true, 128, true, 32, 8, kv, 16, 6, 4, 3000);
    p.max_splits = 16;
    p.dynamic_schedule = true;
    p.inline_combine = true;
    cases.push_back({engine_spec(p, inline_decode + ",scheduler=dynamic"), p});
  }
  run_all(cases);
}

// The feature tests' ragged batches (8 query heads over 2, 7 sequences of up to 700 tokens): the
// dtype, head dim (64, 128, 256), causal mask and page size (1 to 256 keys) a case in turn, by n.
EngineProblem feature_batch(std::mt19937_64& shapes, int n, KvSource kv) {
  const int dims[] = {64, 128, 256}, pages[] = {1, 16, 64, 256};
  return ragged(shapes, n % 2 == 0, dims[n % 3], n % 4 != 1, 8, 2, kv, pages[n % 4], 7, 700);
}

// The feature tests' decode batches through split-KV (at most 16 splits; `combine` "" or
// ",combine=inline"), paged, 32 query heads over 8, 7 sequences of `queries` queries (causal when
// more than one) against up to 2500 keys: the dtype, head dim (64, 128) and page size a case in
// turn, by n.
EngineProblem feature_decode(std::mt19937_64& shapes, int n, const char* combine, int queries) {
  const int pages[] = {1, 16, 64, 256};
  EngineProblem p = decode_batch(shapes, n % 2 == 0, n % 3 == 0 ? 64 : 128, queries > 1, 32, 8, KvSource::kPaged, pages[n % 4], 7, queries, 2500);
  p.max_splits = 16;
  p.inline_combine = *combine != '\0';
  return p;
}

// A feature_decode batch's spec with the feature keys `keys`.
std::string decode_spec(const EngineProblem& p, const char* combine, const std::string& keys) {
  return engine_spec(p, std::string(kDecode) + combine + "," + keys);
}

// Sliding windows and attention chunks (issue 38) through the engine's inputs: ragged batches
// against packed, dense and paged K/V (pages of 1, 16, 64 and 256 keys: only the window's pages
// are read; unread K/V and pages hold NaN), split-KV decode with both combines (the splits cover
// only the visible keys) and packed heads, causal or not, head dims 64-256.
TEST(AttentionEngineGpu, SlidingWindowsAndChunksThroughEveryKvSourceAndSplit) {
  std::mt19937_64 shapes(38);
  std::vector<EngineCase> cases;
  const std::pair<int, int> windows[] = {{0, 0}, {1, -1}, {127, 0}, {128, -1}, {-1, 129}, {129, 128}, {4096, 0}};
  int i = 0;
  for (auto [left, right] : windows)
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
      EngineProblem p = feature_batch(shapes, i, kv);
      p.features.window_left = left, p.features.window_right = right;
      cases.push_back({engine_spec(p, "window=1"), p});
      ++i;
    }
  for (int chunk : {1, 64, 300})
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged}) {
      EngineProblem p = ragged(shapes, true, 128, chunk != 64, 8, 2, kv, 16, 7, 700);
      p.features.chunk = chunk;
      cases.push_back({engine_spec(p, "chunk=1"), p});
      p.features.window_left = 100;
      cases.push_back({engine_spec(p, "window=1,chunk=1"), p});
    }
  for (const char* combine : {"", ",combine=inline"})
    for (auto [left, right] : {std::pair{127, 0}, {128, -1}, {4096, 0}, {0, 0}})
      for (int queries : {1, 4}) {
        EngineProblem p = feature_decode(shapes, i, combine, queries);
        p.features.window_left = left, p.features.window_right = right;
        cases.push_back({decode_spec(p, combine, "window=1"), p});
        ++i;
      }
  run_all(cases);
}

// Softcap 30 and 50 (issue 38), alone and with a window, through packed, paged (pages of 1 to 256
// keys) and dense K/V, and decode batches through split-KV with both combines, at the default scale
// and at scale 1 (the cap bends the scores), against the float64 reference; outputs poisoned,
// unread K/V NaN.
TEST(AttentionEngineGpu, SoftcapThroughEveryKvSourceAndSplit) {
  std::mt19937_64 shapes(382);
  std::vector<EngineCase> cases;
  int i = 0;
  for (double cap : {30.0, 50.0})
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
      EngineProblem p = feature_batch(shapes, i, kv);
      p.features.softcap = cap;
      if (i % 2 == 1) p.scale = 1.0;
      cases.push_back({engine_spec(p, "softcap=1"), p});
      p.features.window_left = 127, p.features.window_right = p.causal ? 0 : 64;
      cases.push_back({engine_spec(p, "window=1,softcap=1"), p});
      ++i;
    }
  for (const char* combine : {"", ",combine=inline"})
    for (double cap : {30.0, 50.0})
      for (int queries : {1, 4}) {
        EngineProblem p = feature_decode(shapes, i, combine, queries);
        p.features.softcap = cap;
        if (queries == 1) p.scale = 1.0;
        cases.push_back({decode_spec(p, combine, "softcap=1"), p});
        p.features.window_left = 1000, p.features.window_right = 0;
        cases.push_back({decode_spec(p, combine, "window=1,softcap=1"), p});
        ++i;
      }
  run_all(cases);
}

// The large sink logits (exact in bf16): at and above a row's log-sum over its keys.
const std::vector<double> kLargeSinks = {8.0, 3.5, 12.0, 0.0};

// Learnable sinks (issue 38), large and very negative, float32 and bf16, alone and with a window
// or softcap, through packed, paged (pages of 1 to 256 keys) and dense K/V, and decode batches
// (sequences of 0 keys: O = 0, LSE = the sink) through split-KV with both combines, where the sink
// counts once, in the merge, or in the attention kernel for a sequence of one split; against the
// float64 reference; outputs poisoned, unread K/V NaN.
TEST(AttentionEngineGpu, SinksThroughEveryKvSourceAndSplit) {
  std::mt19937_64 shapes(383);
  std::vector<EngineCase> cases;
  int i = 0;
  for (bool large : {true, false})
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
      EngineProblem p = feature_batch(shapes, i, kv);
      p.features.sinks = sink_logits(8, large, kLargeSinks);
      p.sinks_bf16 = i % 2 == 1;
      cases.push_back({engine_spec(p, "sinks=1"), p});
      p.features.window_left = 127, p.features.window_right = p.causal ? 0 : 64;
      cases.push_back({engine_spec(p, "window=1,sinks=1"), p});
      p.features.softcap = 50;
      cases.push_back({engine_spec(p, "window=1,softcap=1,sinks=1"), p});
      ++i;
    }
  for (const char* combine : {"", ",combine=inline"})
    for (bool large : {true, false})
      for (int queries : {1, 4}) {
        EngineProblem p = feature_decode(shapes, i, combine, queries);
        p.features.sinks = sink_logits(32, large, kLargeSinks);
        p.sinks_bf16 = queries > 1;
        cases.push_back({decode_spec(p, combine, "sinks=1"), p});
        p.features.window_left = 128, p.features.window_right = 0;
        cases.push_back({decode_spec(p, combine, "window=1,sinks=1"), p});
        ++i;
      }
  run_all(cases);
}

// ALiBi (issue 38), slopes per head and per sequence, alone and with a window, softcap or sinks,
// through packed, paged (pages of 1 to 256 keys) and dense K/V with ragged lengths (positions
// bottom-right aligned per sequence), packed heads (a row's head from the row), and decode
// batches through split-KV with both combines, against the float64 reference; outputs poisoned,
// unread K/V NaN.
TEST(AttentionEngineGpu, AlibiThroughEveryKvSourceAndSplit) {
  std::mt19937_64 shapes(384);
  std::vector<EngineCase> cases;
  int i = 0;
  for (bool per_batch : {false, true})
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged, KvSource::kDense}) {
      EngineProblem p = feature_batch(shapes, i, kv);
      p.features.alibi_slopes = alibi_slopes(8, 7, per_batch);
      cases.push_back({engine_spec(p, "alibi=1"), p});
      p.features.window_left = 127, p.features.window_right = p.causal ? 0 : 64;
      cases.push_back({engine_spec(p, "window=1,alibi=1"), p});
      p.features.softcap = 30;
      p.features.sinks = sink_logits(8, per_batch, kLargeSinks);
      cases.push_back({engine_spec(p, "window=1,softcap=1,sinks=1,alibi=1"), p});
      ++i;
    }
  for (const char* combine : {"", ",combine=inline"})
    for (bool per_batch : {false, true})
      for (int queries : {1, 4}) {
        EngineProblem p = feature_decode(shapes, i, combine, queries);
        p.features.alibi_slopes = alibi_slopes(32, 7, per_batch);
        cases.push_back({decode_spec(p, combine, "alibi=1"), p});
        p.features.window_left = 1000, p.features.window_right = 0;
        p.features.sinks = sink_logits(32, !per_batch, kLargeSinks);
        cases.push_back({decode_spec(p, combine, "window=1,sinks=1,alibi=1"), p});
        ++i;
      }
  run_all(cases);
}

// flashjit_merge_attention_states' kernel against float64: 16-bit and float32 states and outputs,
// padded strides, rows where one state or both saw no key (LSE -inf), head dims 64/128/256.
TEST(AttentionEngineGpu, MergeOfTwoStatesMatchesFloat64) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  const DriverApi& api = *env->api;
  int failed = 0;
  for (int d : {64, 128, 256})
    for (int mode = 0; mode < 4; ++mode) {  // bit 0: float32 states, bit 1: float32 out
      const bool bf16 = d != 64, f32_in = mode & 1, f32_out = mode & 2;
      const std::string spec = std::string("dtype=") + (bf16 ? "bf16" : "fp16") + ",head_dim=" + std::to_string(d) + ",varlen=1," + kDecode;
      std::string error;
      auto kernel = get_test_kernel(spec, &error);
      ASSERT_TRUE(kernel) << error;
      const int rows = 37, heads = 6;
      const int64_t row_stride = int64_t(heads) * d + 8, head_stride = d, lse_stride = rows + 3;
      const size_t elems = size_t(rows) * row_stride;
      std::uniform_real_distribution<float> value(-2.f, 2.f), logit(-4.f, 4.f);
      std::vector<float> oa(elems), ob(elems), la(size_t(heads) * lse_stride), lb(la.size());
      for (auto& x : oa) x = value(rng);
      for (auto& x : ob) x = value(rng);
      for (size_t i = 0; i < la.size(); ++i) {
        la[i] = i % 11 == 0 ? -INFINITY : logit(rng);
        lb[i] = i % 7 == 0 || i % 11 == 0 ? -INFINITY : logit(rng);  // some rows: both -inf
      }
      // The 16-bit inputs are rounded first, so the reference sees what the kernel reads.
      std::vector<uint16_t> ha(elems), hb(elems);
      for (size_t i = 0; i < elems; ++i) {
        ha[i] = float_to_half_bits(oa[i], bf16), hb[i] = float_to_half_bits(ob[i], bf16);
        if (!f32_in) oa[i] = half_bits_to_float(ha[i], bf16), ob[i] = half_bits_to_float(hb[i], bf16);
      }
      const size_t in_bytes = elems * (f32_in ? 4 : 2), out_bytes = elems * (f32_out ? 4 : 2);
      DeviceBuffer a(api, in_bytes), b(api, in_bytes), out(api, out_bytes), lsea(api, la.size() * 4), lseb(api, lb.size() * 4),
          lseo(api, la.size() * 4);
      a.upload(f32_in ? (const void*)oa.data() : (const void*)ha.data(), in_bytes);
      b.upload(f32_in ? (const void*)ob.data() : (const void*)hb.data(), in_bytes);
      lsea.upload(la.data(), la.size() * 4);
      lseb.upload(lb.data(), lb.size() * 4);
      out.fill_bytes(0xFF);
      lseo.fill_bytes(0xFF);
      MergeArgs m;
      m.o_a = a.ptr(), m.o_b = b.ptr(), m.o_out = out.ptr(), m.lse_a = lsea.ptr(), m.lse_b = lseb.ptr(), m.lse_out = lseo.ptr();
      m.rows = rows, m.heads = heads;
      m.a_row_stride = m.b_row_stride = m.out_row_stride = row_stride;
      m.a_head_stride = m.b_head_stride = m.out_head_stride = head_stride;
      m.lse_head_stride = lse_stride;
      m.float32_states = f32_in, m.float32_out = f32_out;
      ASSERT_TRUE(launch_merge_states(api, kernel->loaded->more(1), kernel->config, m, env->stream, false).ok());
      ASSERT_TRUE(check(api, api.cuStreamSynchronize(env->stream), "merge").ok());
      std::vector<uint16_t> got16(f32_out ? 0 : elems);
      std::vector<float> got32(f32_out ? elems : 0), got_lse(la.size());
      if (f32_out) out.download(got32.data(), out_bytes); else out.download(got16.data(), out_bytes);
      lseo.download(got_lse.data(), got_lse.size() * 4);
      double err = 0, norm = 0, lse_err = 0;
      int bad_lse = 0;
      for (int r = 0; r < rows; ++r)
        for (int h = 0; h < heads; ++h) {
          const double xa = la[size_t(h) * lse_stride + r], xb = lb[size_t(h) * lse_stride + r];
          const double top = std::max(xa, xb);
          const double wa = std::isinf(top) ? 0 : std::exp(xa - top), wb = std::isinf(top) ? 0 : std::exp(xb - top), sum = wa + wb;
          const double lse = sum > 0 ? top + std::log(sum) : -INFINITY;
          const float got = got_lse[size_t(h) * lse_stride + r];
          if (std::isinf(lse) ? !(std::isinf(got) && got < 0) : !(std::abs(got - lse) <= 1e-4 * std::max(1.0, std::abs(lse)))) ++bad_lse;
          if (!std::isinf(lse)) lse_err = std::max(lse_err, std::abs(got - lse));
          for (int c = 0; c < d; ++c) {
            const size_t i = size_t(r) * row_stride + size_t(h) * head_stride + c;
            const double want = sum > 0 ? (wa * oa[i] + wb * ob[i]) / sum : 0.0;
            const double have = f32_out ? got32[i] : half_bits_to_float(got16[i], bf16);
            err += (have - want) * (have - want), norm += want * want;
          }
        }
      const double rel = std::sqrt(err / std::max(norm, 1e-30));
      const double bound = f32_out ? 1e-5 : o_error_bound(bf16);
      const bool ok = rel <= bound && bad_lse == 0;
      failed += !ok;
      std::printf("%s merge %s f32_states=%d f32_out=%d rel_err %.2e (bound %.0e) lse_err %.2e bad_lse %d\n", ok ? "PASS" : "FAIL",
                  spec.c_str(), int(f32_in), int(f32_out), rel, bound, lse_err, bad_lse);
      EXPECT_LE(rel, bound) << spec;
      EXPECT_EQ(bad_lse, 0) << spec;
      // The padding between rows stays untouched (poisoned bytes).
      if (!f32_out) EXPECT_EQ(got16[size_t(heads) * d], 0xFFFFu);
    }
  std::printf("12 cases, %d failed\n", failed);
}

// A kernel's launch as one CUDA graph: captured at the first launch (its arguments then fixed, as
// an engine's are) and replayed at every launch after; check_engine_attention's launch hook.
class CapturedGraph {
 public:
  CapturedGraph(const GpuEnv& env, const TestKernel& kernel) : env_(env), kernel_(kernel) {}
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_) env_.api->cuGraphExecDestroy(exec_);
  }
  Status launch(const AttentionArgs& args) {
    const DriverApi& api = *env_.api;
    if (exec_ == nullptr) {
      auto params = make_kernel_params(api, kernel_.config, args, env_.sm_count);
      if (!params) return params.take_error();
      CUgraph graph = nullptr;
      if (Status st = check(api, api.cuStreamBeginCapture(env_.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture"); !st) return st;
      Status launched = launch_attention_kernels(api, {kernel_.loaded->function(), kernel_.loaded->more(0)}, kernel_.config, args,
                                                 *params, env_.stream, env_.sm_count, false);
      if (Status st = check(api, api.cuStreamEndCapture(env_.stream, &graph), "end capture"); !st) return st;
      if (!launched) return launched;
      if (Status st = check(api, api.cuGraphInstantiate(&exec_, graph, 0), "instantiate"); !st) return st;
      api.cuGraphDestroy(graph);
    }
    return check(api, api.cuGraphLaunch(exec_, env_.stream), "graph launch");
  }

 private:
  const GpuEnv& env_;
  const TestKernel& kernel_;
  CUgraphExec exec_ = nullptr;
};

// One capture, replays after the lengths, the block table, the data and the active sequences
// changed within the captured bounds: every replay is checked against its own reference (six
// replays, fewer active sequences some steps). Modes: paged, packed, paged split-KV decode, paged
// with the dynamic scheduler, decode steps of 1-4 queries (32/8 heads: at most 16 rows a tile, so
// they merge inline) with combine=inline, the same decode steps with gpt-oss's 128-key window and
// sinks through the combine kernel (the window as captured; the sinks' values new at every step, read
// from the same buffer), and Gemma 4's 512/512 paged with the head dims shared out over a cluster
// (dim_split=1).
void replay_after_the_lengths_change(GpuEnv* env, std::mt19937_64& rng, int mode) {
  const KvSource kv = mode == 1 ? KvSource::kPacked : KvSource::kPaged;
  const bool decode_steps = mode == 4 || mode == 5;
  const int most_q = decode_steps ? 4 : 400, most_k = decode_steps ? 3000 : 800;
  EngineProblem bounds = ragged(rng, true, mode == 6 ? 512 : 128, true, decode_steps ? 32 : 8, decode_steps ? 8 : 2, kv, 16, 9, 800);
  bounds.max_seqlen_q = decode_steps ? most_q : 800, bounds.max_seqlen_k = most_k;
  for (int b = 0; b < 9; ++b) bounds.seqlen_q[b] = most_q, bounds.seqlen_k[b] = most_k;  // room for every step below
  if (mode == 2 || mode == 4 || mode == 5) bounds.max_splits = 6;
  bounds.dynamic_schedule = mode == 3;  // the counters are zeroed once, before the capture
  bounds.inline_combine = mode == 4;
  if (mode == 5) bounds.features.window_left = 127, bounds.features.window_right = 0;
  const EngineCapacity capacity = capacity_for(bounds);
  const std::string spec = engine_spec(bounds, mode == 2 ? kDecode : mode == 3 ? "scheduler=dynamic" : mode == 4 ? "pack_gqa=1,split_kv=1,combine=inline"
                                             : mode == 5 ? "pack_gqa=1,split_kv=1,window=1,sinks=1" : mode == 6 ? "dim_split=1" : "");
  std::string error;
  auto kernel = get_test_kernel(spec, &error);
  ASSERT_TRUE(kernel) << error;
  EngineBuffers buffers(*env->api, bounds, capacity);
  CapturedGraph graph(*env, *kernel);
  auto replay = [&](const AttentionArgs& args) { return graph.launch(args); };
  for (int step = 0; step < 6; ++step) {
    EngineProblem p = random_engine_problem(rng, 3 + int(rng() % 7), 400);  // fewer active sequences some steps
    if (decode_steps) {  // 0-4 queries against 0-3000 keys
      for (size_t b = 0; b < p.seqlen_q.size(); ++b) p.seqlen_q[b] = int(rng() % 5), p.seqlen_k[b] = int(rng() % (most_k + 1));
    }
    p.bf16 = bounds.bf16, p.head_dim = bounds.head_dim, p.causal = bounds.causal, p.heads_q = bounds.heads_q;
    p.heads_kv = bounds.heads_kv, p.kv = kv, p.page_size = bounds.page_size, p.max_splits = bounds.max_splits;
    p.dynamic_schedule = bounds.dynamic_schedule;
    p.inline_combine = bounds.inline_combine;
    if (mode == 5) {
      p.features.window_left = bounds.features.window_left, p.features.window_right = bounds.features.window_right;
      p.features.sinks = sink_logits(bounds.heads_q, step % 2 == 0, kLargeSinks);
    }
    EngineCase c{spec + " (replay " + std::to_string(step) + ")", p};
    report(c, check_engine_attention(env->device(), {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, p, buffers, rng, replay));
  }
}

TEST(AttentionEngineGpu, GraphReplayedAfterTheLengthsChange) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  for (int mode = 0; mode < 6; ++mode) replay_after_the_lengths_change(env, rng, mode);
}

// V and O narrower than Q and K (spec key head_dim_v; DeepSeek's prefill 192/128, Mistral Small
// 4's 320/256, 128/64): ragged batches through packed, dense and paged K/V (pages of 16 and 64;
// NHD, HND, K and V in one tensor: each page K's 192 columns then V's 128), dense queries on a
// paged cache, both dtypes, causal or not. V's pools and O's rows have their own strides.
TEST(AttentionEngineGpu, HeadDimVThroughEveryKvSource) {
  std::mt19937_64 shapes(41);
  std::vector<EngineCase> cases;
  auto with_v = [](EngineProblem p, int dv) {
    p.head_dim_v = dv;
    return p;
  };
  for (bool bf16 : {false, true})
    for (bool causal : {false, true}) {
      for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged})
        for (int page_size : {16, 64}) {
          if (kv != KvSource::kPaged && page_size == 64) continue;
          EngineProblem p = with_v(ragged(shapes, bf16, 192, causal, 8, 2, kv, page_size, 7, 700), 128);
          cases.push_back({engine_spec(p), p});
        }
      for (KvSource kv : {KvSource::kPacked, KvSource::kPaged}) {
        EngineProblem p = with_v(ragged(shapes, bf16, 320, causal, 8, 2, kv, 64, 6, 600), 256);
        cases.push_back({engine_spec(p), p});
      }
      EngineProblem small = with_v(ragged(shapes, bf16, 128, causal, 8, 2, KvSource::kPaged, 16, 6, 600), 64);
      cases.push_back({engine_spec(small), small});
    }
  for (int page_size : {16, 64})
    for (int layout = 1; layout < 3; ++layout) {  // HND, K and V in one tensor
      EngineProblem p = with_v(ragged(shapes, true, 192, true, 8, 2, KvSource::kPaged, page_size, 6, 600), 128);
      p.head_major_pool = layout == 1;
      p.kv_in_one_tensor = layout == 2;
      cases.push_back({engine_spec(p), p});
    }
  for (int queries : {1, 100}) {  // a paged cache with dense queries
    EngineProblem p = with_v(ragged(shapes, true, 192, true, 8, 2, KvSource::kPaged, 64, 5, 600), 128);
    p.dense_q = true;
    p.spare_q_rows = 0;
    for (int& q : p.seqlen_q) q = queries;
    cases.push_back({engine_spec(p), p});
  }
  run_all(cases);
}

// Split-KV with head_dim_v (the partials and the merge head_dim_v wide): decode of 1 and 4 queries
// with packed heads through the combine kernel and combine=inline, pages of 16 and 64, every split
// count exactly (one CTA per tile) and the launch's own, 192/128 and 320/256; mixed prefill and
// decode batches with splits; the dynamic scheduler before the partials.
TEST(AttentionEngineGpu, HeadDimVSplitKvBothCombines) {
  std::mt19937_64 shapes(42);
  std::vector<EngineCase> cases;
  for (auto [d, dv] : {std::pair{192, 128}, {320, 256}})
    for (const char* combine : {"", ",combine=inline"})
      for (int page_size : {16, 64})
        for (int queries : {1, 4}) {
          EngineProblem p = decode_batch(shapes, page_size == 16, d, queries > 1, 32, 8, KvSource::kPaged, page_size, 7, queries, 2500);
          p.head_dim_v = dv;
          p.max_splits = 16;
          p.inline_combine = *combine != '\0';
          cases.push_back({engine_spec(p, std::string(kDecode) + combine), p});
          for (int splits : {1, 3}) {
            p.max_splits = splits;
            cases.push_back({engine_spec(p, std::string(kDecode) + combine), p, 0});
          }
        }
  for (const char* extra : {"split_kv=1", "pack_gqa=1,split_kv=1,combine=inline"})
    for (KvSource kv : {KvSource::kPaged, KvSource::kPacked}) {
      EngineProblem p = ragged(shapes, true, 192, true, 16, 4, kv, 64, 9, 900);
      p.head_dim_v = 128;
      p.seqlen_q[0] = 1, p.seqlen_k[0] = 1000;
      p.seqlen_q[1] = 4, p.seqlen_k[1] = 900;
      p.max_splits = 12;
      p.inline_combine = std::string(extra).find("inline") != std::string::npos;
      cases.push_back({engine_spec(p, extra), p});
    }
  {
    EngineProblem p = decode_batch(shapes, true, 192, true, 32, 8, KvSource::kPaged, 16, 6, 4, 3000);
    p.head_dim_v = 128;
    p.max_splits = 16;
    p.dynamic_schedule = true;
    cases.push_back({engine_spec(p, std::string(kDecode) + ",scheduler=dynamic"), p});
  }
  run_all(cases);
}

// Head dims above 256 through the engine's inputs (one consumer warpgroup, 32-key blocks; O's 512
// columns in two parts; and with paired=1): Gemma 4's global 512/512 and 384/384
// ragged through packed, dense and paged K/V (pages 16 and 64, NHD and HND), MLA's 576/512 with V K's first 512 columns (the same
// memory) through every source, both dtypes, causal or not; Gemma's 512/512 decode with packed
// heads and splits.
TEST(LargeHeadDimEngineGpu, RaggedThroughEveryKvSource) {
  std::mt19937_64 shapes(44);
  std::vector<EngineCase> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true}) {
      for (auto [d, dv] : {std::pair{512, 512}, {384, 384}})
        for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
          EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, kv, d == 512 ? 64 : 16, 6, 500);
          p.head_dim_v = dv;
          p.head_major_pool = kv == KvSource::kPaged && !causal;
          cases.push_back({engine_spec(p), p});
          cases.push_back({engine_spec(p, "paired=1"), p});  // the two warpgroups sharing each tile's scores
        }
      for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
        EngineProblem p = ragged(shapes, bf16, 576, causal, 16, 1, kv, 64, 6, 500);
        p.head_dim_v = 512;
        p.v_is_k_prefix = true;
        cases.push_back({engine_spec(p), p});
      }
    }
  for (int queries : {1, 3}) {
    EngineProblem p = decode_batch(shapes, true, 512, true, 16, 4, KvSource::kPaged, 64, 7, queries, 3000);
    p.max_splits = 16;
    cases.push_back({engine_spec(p, kDecode), p});
    cases.push_back({engine_spec(p, std::string(kDecode) + ",paired=1"), p});
    p.max_splits = 3;
    cases.push_back({engine_spec(p, kDecode), p, 0});
  }
  run_all(cases);
}

// dim_split=1 (the head dims shared out over a cluster's two CTAs, the scores' halves added through
// distributed shared memory): Gemma 4's 512/512 and 384/384 ragged through packed, dense and paged K/V
// (pages 16 and 64, NHD and HND), both dtypes, causal or not; then a graph captured once at 512/512
// paged and replayed with new lengths. Their own suite (*DimSplit*): run_h200.sh's gate-dimsplit runs
// them in the hang-trap mode, in a command of their own.
TEST(LargeHeadDimEngineGpu, DimSplitRaggedThroughEveryKvSource) {
  std::mt19937_64 shapes(45);
  std::vector<EngineCase> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (int d : {512, 384})
        for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
          EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, kv, d == 512 ? 64 : 16, 6, 500);
          p.head_major_pool = kv == KvSource::kPaged && !causal;
          cases.push_back({engine_spec(p, "dim_split=1"), p});
        }
  run_all(cases);
}

TEST(LargeHeadDimEngineGpu, DimSplitGraphReplayedAfterTheLengthsChange) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  replay_after_the_lengths_change(env, rng, 6);
}

// DeepSeek's absorbed MLA decode: one latent K/V head of 576 columns whose first 512 are V (the
// same memory: no copy), 16-128 query heads packed into the tiles, 1-4 queries a sequence with the
// causal mask, pages of 64, 16 and 1 (NaN in every slot no sequence reads), sequences of 0, 1,
// 1024, 1025 and random keys to 3000, split counts 1 and 3 exactly and the launch's own, both
// dtypes; `extra` the spec keys beyond the decode's.
void run_absorbed_decode(uint64_t seed, const std::string& extra) {
  std::mt19937_64 shapes(seed);
  std::vector<EngineCase> cases;
  int i = 0;
  for (int heads : {16, 32, 64, 128})
    for (int queries : {1, 2, 4}) {
      const int page_size = std::vector<int>{64, 16, 1}[size_t(i % 3)];
      EngineProblem p = decode_batch(shapes, i % 2 == 0, 576, true, heads, 1, KvSource::kPaged, page_size, 6, queries, 3000);
      p.head_dim_v = 512;
      p.v_is_k_prefix = true;
      p.max_splits = 16;
      cases.push_back({engine_spec(p, std::string(kDecode) + extra), p});
      for (int splits : {1, 3}) {
        p.max_splits = splits;
        cases.push_back({engine_spec(p, std::string(kDecode) + extra), p, 0});
      }
      ++i;
    }
  run_all(cases);
}

TEST(MlaDecodeGpu, AbsorbedHeadsQueriesPagesAndSplits) { run_absorbed_decode(45, ""); }

// The same with V read from K's rows by two warpgroups sharing each tile's scores (spec key
// v_in_k=1: one hand-over of P a block, the latent block loaded once for both halves of O).
TEST(MlaDecodeGpu, VInKHeadsQueriesPagesAndSplits) { run_absorbed_decode(47, ",v_in_k=1"); }

// v_in_k=1 with 32-key blocks (four stages; P the first half of its hand-over rows): a sequence's
// last block is short more often (every 32 keys), and pages of 64 hold two blocks.
TEST(MlaDecodeGpu, VInK32KeyBlocksHeadsQueriesPagesAndSplits) { run_absorbed_decode(49, ",block_n=32,v_in_k=1"); }

// v_in_k=1 with the seesaw (seesaw=1): the two warpgroups take alternate blocks, P crossing both
// ways in the K slots' rotary chunks, each slot loaded in two halves; tiles of odd block counts (a
// last pair of one block) and even, one CTA's tiles one after another with the ring's pairs running on.
TEST(MlaDecodeGpu, SeesawHeadsQueriesPagesAndSplits) { run_absorbed_decode(51, ",v_in_k=1,seesaw=1"); }

// chunk_waits=1 (each 64-column chunk of a latent block on a barrier of its own, the scores issued
// chunk by chunk as they land) on both schedules and on 32-key blocks (four stages of chunk barriers).
TEST(MlaDecodeGpu, ChunkWaitsHeadsQueriesPagesAndSplits) {
  run_absorbed_decode(57, ",v_in_k=1,chunk_waits=1");
  run_absorbed_decode(59, ",v_in_k=1,seesaw=1,chunk_waits=1");
  run_absorbed_decode(61, ",block_n=32,v_in_k=1,chunk_waits=1");
  // early_release=1: the hand-over's slots back as soon as their P V's are done (64- and 32-key blocks).
  run_absorbed_decode(65, ",v_in_k=1,chunk_waits=1,early_release=1");
  run_absorbed_decode(67, ",block_n=32,v_in_k=1,chunk_waits=1,early_release=1");
  // half_release=1: each warpgroup's part of a slot back on its own, the producer reloading each part.
  run_absorbed_decode(69, ",v_in_k=1,chunk_waits=1,early_release=1,half_release=1");
  run_absorbed_decode(71, ",block_n=32,v_in_k=1,chunk_waits=1,early_release=1,half_release=1");
}

// q_reg_dims: the hand-over's scores warpgroup holds Q's first head dims in registers (256 of them,
// the other warpgroup 208-224), on each of its schedules: the slot waits, the early release with
// its chunk waits, and 32-key blocks with half_release=1.
TEST(MlaDecodeGpu, QRegDimsHeadsQueriesPagesAndSplits) {
  run_absorbed_decode(73, ",v_in_k=1,q_reg_dims=128");
  run_absorbed_decode(75, ",v_in_k=1,chunk_waits=1,early_release=1,q_reg_dims=192");
  run_absorbed_decode(77, ",block_n=32,v_in_k=1,chunk_waits=1,early_release=1,half_release=1,q_reg_dims=288");
}

// One launch of `spec` on `bounds` captured in a CUDA graph, then five replays with new lengths (3-8
// sequences active, each queries() queries and 0-3000 keys), each checked against float64. bounds:
// room for every step (its lengths the largest).
template <typename Queries>
void replay_decode_after_lengths_change(GpuEnv* env, const std::string& spec, const EngineProblem& bounds, std::mt19937_64& rng,
                                        Queries queries) {
  std::string error;
  auto kernel = get_test_kernel(spec, &error);
  ASSERT_TRUE(kernel) << error;
  EngineBuffers buffers(*env->api, bounds, capacity_for(bounds));
  CapturedGraph graph(*env, *kernel);
  auto replay = [&](const AttentionArgs& args) { return graph.launch(args); };
  for (int step = 0; step < 5; ++step) {
    EngineProblem p = bounds;
    p.seqlen_q.resize(size_t(3 + int(rng() % 6)));  // fewer active sequences some steps
    p.seqlen_k.resize(p.seqlen_q.size());
    for (size_t b = 0; b < p.seqlen_q.size(); ++b) p.seqlen_q[b] = queries(), p.seqlen_k[b] = int(rng() % 3001);
    p.max_seqlen_q = 0, p.max_seqlen_k = 0;
    EngineCase c{spec + " (replay " + std::to_string(step) + ")", p};
    report(c, check_engine_attention(env->device(), {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, p, buffers, rng, replay));
  }
}

// combine=inline on the shared-scores kernels (v_in_k=1, and its seesaw): both warpgroups' halves of O
// stored, the tile counted once, its last split's eight warps merging the rows. Launches whose tiles
// hold at most kInlineMergeRows (16) rows merge in the attention kernel: 16 and 8 heads with one
// query, 8 with two; pages of 64, 16 and 1; 16, 3 and 2 splits, each on one CTA a tile where the
// launch would give fewer (max_ctas 0); then CUDA graph replays with new lengths (the counters back
// at zero after each launch: the check reads them).
TEST(MlaDecodeGpu, VInKInlineCombine) {
  FLASHJIT_REQUIRE_GPU(env);
  std::mt19937_64 shapes(53);
  std::vector<EngineCase> cases;
  int i = 0;
  for (const char* extra : {",v_in_k=1,combine=inline", ",v_in_k=1,seesaw=1,combine=inline"})
    for (const auto& [heads, queries] : {std::pair{16, 1}, std::pair{8, 1}, std::pair{8, 2}}) {
      const int page_size = std::vector<int>{64, 16, 1}[size_t(i % 3)];
      EngineProblem p = decode_batch(shapes, i % 2 == 0, 576, true, heads, 1, KvSource::kPaged, page_size, 6, queries, 3000);
      p.head_dim_v = 512;
      p.v_is_k_prefix = true;
      p.inline_combine = true;  // the merge counters in the workspace, zeroed once
      for (int splits : {16, 3, 2}) {
        p.max_splits = splits;
        cases.push_back({engine_spec(p, std::string(kDecode) + extra), p, splits == 16 ? -1 : 0});
      }
      ++i;
    }
  run_all(cases);

  auto rng = fresh_rng();
  EngineProblem bounds = decode_batch(rng, true, 576, true, 16, 1, KvSource::kPaged, 64, 8, 1, 3000);
  bounds.head_dim_v = 512;
  bounds.v_is_k_prefix = true;
  bounds.max_splits = 8;
  bounds.inline_combine = true;
  bounds.max_seqlen_q = 1, bounds.max_seqlen_k = 3000;
  for (size_t b = 0; b < bounds.seqlen_q.size(); ++b) bounds.seqlen_q[b] = 1, bounds.seqlen_k[b] = 3000;
  replay_decode_after_lengths_change(env, engine_spec(bounds, std::string(kDecode) + ",v_in_k=1,combine=inline"), bounds, rng,
                                     [&] { return int(rng() % 4 != 0); });  // 0 or 1 query a sequence
}

// The seesaw beyond decode: MLA's 576/512 ragged (many query blocks a sequence, masked pairs on the
// causal diagonal) through packed, dense and paged K/V, causal or not, both dtypes.
TEST(MlaDecodeGpu, SeesawRaggedThroughEveryKvSource) {
  std::mt19937_64 shapes(52);
  std::vector<EngineCase> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
        EngineProblem p = ragged(shapes, bf16, 576, causal, 16, 1, kv, kv == KvSource::kPaged && causal ? 16 : 64, 6, 700);
        p.head_dim_v = 512;
        p.v_is_k_prefix = true;
        cases.push_back({engine_spec(p, "v_in_k=1,seesaw=1"), p});
      }
  run_all(cases);
}

// v_in_k=1 beyond decode: MLA's 576/512 ragged (prefill-like, many query blocks a sequence) through
// packed, dense and paged K/V, causal or not, both dtypes; 512/512 and 384/384 with V = K (the whole
// rows), paged and packed.
TEST(MlaDecodeGpu, VInKRaggedThroughEveryKvSource) {
  std::mt19937_64 shapes(48);
  std::vector<EngineCase> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true}) {
      for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
        EngineProblem p = ragged(shapes, bf16, 576, causal, 16, 1, kv, 64, 6, 500);
        p.head_dim_v = 512;
        p.v_is_k_prefix = true;
        cases.push_back({engine_spec(p, "v_in_k=1"), p});
        cases.push_back({engine_spec(p, "block_n=32,v_in_k=1"), p});
      }
      for (int d : {512, 384}) {
        EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, causal ? KvSource::kPaged : KvSource::kPacked, 16, 5, 400);
        p.v_is_k_prefix = true;
        cases.push_back({engine_spec(p, "v_in_k=1"), p});
      }
    }
  run_all(cases);
}

// A decode step's graph replayed after the lengths and the block table change (FlashMLA's use:
// one capture, every step's lengths new): 16 and 128 heads, 1-4 queries, 0-3000 keys, pages of
// 64, split-KV with the combine; O in parts, v_in_k=1 and its seesaw (each `extra` in turn).
void replay_absorbed_decode(std::initializer_list<const char*> extras) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  for (const char* extra : extras)
  for (int heads : {16, 128}) {
    EngineProblem bounds = decode_batch(rng, true, 576, true, heads, 1, KvSource::kPaged, 64, 8, 4, 3000);
    bounds.head_dim_v = 512;
    bounds.v_is_k_prefix = true;
    bounds.max_splits = 8;
    bounds.max_seqlen_q = 4, bounds.max_seqlen_k = 3000;
    for (size_t b = 0; b < bounds.seqlen_q.size(); ++b) bounds.seqlen_q[b] = 4, bounds.seqlen_k[b] = 3000;  // room for every step
    replay_decode_after_lengths_change(env, engine_spec(bounds, std::string(kDecode) + extra), bounds, rng,
                                       [&] { return 1 + int(rng() % 4); });
  }
}

TEST(MlaDecodeGpu, GraphReplayedAfterTheLengthsChange) { replay_absorbed_decode({"", ",v_in_k=1", ",v_in_k=1,seesaw=1"}); }

// The same on chunk_waits=1's kernels (their own test: gate-mla's command is full).
TEST(MlaDecodeGpu, ChunkWaitsGraphReplayedAfterTheLengthsChange) {
  replay_absorbed_decode({",v_in_k=1,chunk_waits=1", ",v_in_k=1,seesaw=1,chunk_waits=1", ",v_in_k=1,chunk_waits=1,early_release=1",
                          ",v_in_k=1,chunk_waits=1,early_release=1,half_release=1"});
}

// FlashAttention-3's split form's decode cases (q, qv, k and V four tensors; spec keys kDecode, qv=1 and
// `more`): each head count with 1, 2 and 4 queries, pages of 64, 16 and 1 in turn, max_splits 16 and (every
// second, or every one with all_splits) 3 on one CTA a tile; then a dense and a packed cache (max_splits 8).
std::vector<EngineCase> split_form_decode_cases(std::mt19937_64& shapes, const std::vector<int>& heads_list,
                                                const std::string& more, bool all_splits, int dense_heads, bool dense_q_varlen) {
  std::vector<EngineCase> cases;
  const std::string spec_keys = std::string(kDecode) + ",qv=1" + more;
  int i = 0;
  for (int heads : heads_list)
    for (int queries : {1, 2, 4}) {
      const int page_size = std::vector<int>{64, 16, 1}[size_t(i % 3)];
      EngineProblem p = decode_batch(shapes, i % 2 == 0, 576, true, heads, 1, KvSource::kPaged, page_size, 6, queries, 3000);
      p.head_dim_v = 512;
      p.qv_split = true;
      p.max_splits = 16;
      cases.push_back({engine_spec(p, spec_keys), p});
      if (all_splits || i % 2 == 0) {
        p.max_splits = 3;
        cases.push_back({engine_spec(p, spec_keys), p, 0});
      }
      ++i;
    }
  for (KvSource kv : {KvSource::kDense, KvSource::kPacked}) {
    EngineProblem p = decode_batch(shapes, dense_q_varlen, 576, true, dense_heads, 1, kv, 16, 5, 2, 2000);
    p.head_dim_v = 512;
    p.qv_split = true;
    p.max_splits = 8;
    cases.push_back({engine_spec(p, spec_keys), p});
  }
  return cases;
}

// FlashAttention-3's split MLA form (qv=1): Q in q (64 rotary columns) and qv (512), the latent
// cache in k (64) and V (512), scores q.k + qv.v, against the float64 reference of the 576-column
// rows: 16-128 heads, 1-4 queries, pages of 64, 16 and 1, dense and packed caches, splits 1, 3 and
// the launch's; and DeepSeek's prefill shape 192/128 split the same way (64 + 128), ragged.
TEST(MlaDecodeGpu, SplitFormQvThroughEveryKvSource) {
  std::mt19937_64 shapes(46);
  std::vector<EngineCase> cases = split_form_decode_cases(shapes, {16, 128}, "", true, 32, true);
  for (bool causal : {false, true}) {
    EngineProblem p = ragged(shapes, true, 192, causal, 8, 2, KvSource::kPaged, 64, 6, 600);
    p.head_dim_v = 128;
    p.qv_split = true;
    cases.push_back({engine_spec(p, "qv=1"), p});
  }
  run_all(cases);
}

// The split form on the shared-scores kernels (qv=1 with v_in_k=1): the K tile's first 512 columns
// are loaded from V's map, so V is read from K's slot as in the absorbed form; q, k, qv and V four
// tensors. 16-128 heads, 1-4 queries, pages of 64, 16 and 1, dense and packed caches, splits 1, 3
// and the launch's, NaN in the slots past each sequence.
TEST(MlaDecodeGpu, SplitFormVInKThroughEveryKvSource) {
  std::mt19937_64 shapes(48);
  run_all(split_form_decode_cases(shapes, {16, 32, 64, 128}, ",v_in_k=1", false, 64, false));
}

// The split form through the seesaw (qv=1, v_in_k=1, seesaw=1): the K slots' halves come from two
// maps (V's columns, then k's rotary ones, where the other block's P crosses).
TEST(MlaDecodeGpu, SplitFormSeesawThroughEveryKvSource) {
  std::mt19937_64 shapes(53);
  run_all(split_form_decode_cases(shapes, {16, 64, 128}, ",v_in_k=1,seesaw=1", false, 64, false));
}

// The split form with chunk_waits=1: a K slot's chunks from two maps, each on its own barrier.
TEST(MlaDecodeGpu, ChunkWaitsSplitFormThroughEveryKvSource) {
  std::mt19937_64 shapes(63);
  run_all(split_form_decode_cases(shapes, {16, 128}, ",v_in_k=1,chunk_waits=1", false, 64, false));
  run_all(split_form_decode_cases(shapes, {64, 128}, ",v_in_k=1,seesaw=1,chunk_waits=1", false, 64, false));
  run_all(split_form_decode_cases(shapes, {16, 128}, ",v_in_k=1,chunk_waits=1,early_release=1", false, 64, false));
  run_all(split_form_decode_cases(shapes, {16, 128}, ",v_in_k=1,chunk_waits=1,early_release=1,half_release=1", false, 64, false));
}

}  // namespace
}  // namespace flashjit::testing
