// FP8 operands (spec dtype=e4m3, issue 39: FlashAttention-3's FP8) on the GPU against the float64
// reference on the dequantised inputs: Q, K and V random e4m3 codes with float32 descales (per
// tensor, or FlashAttention-3's [batch, heads_kv]; powers of two, the bf16 copies the reference
// reads then exact, and not), O in bf16 or fp16 (out_dtype), LSE float32. Dense at head dims 64,
// 96, 128, 192 and 256, causal or not, lengths that are not tile multiples, rows that see no key
// (causal, seqlen_q > seqlen_k), outlier keys with 50x the scores; varlen with packed K/V, paged
// (pages of 1, 16 and 64 keys, shuffled tables with shared pages, NHD, HND and K and V in one
// tensor, the NaN code 0x7F in every slot no sequence reads), split-KV decode with packed GQA (the
// combine kernel and combine=inline), a sliding window with sinks, and a CUDA graph replayed after
// the lengths change. Outputs are poisoned first (NaN); O's bound is kFp8OperandsOErrorBound
// (2^-4: P is rounded to e4m3 for the P V GEMM, verify/check.hpp says why), LSE's the 16-bit one.
// Skips with the reason where no Hopper GPU is present; the seed is printed (FLASHJIT_TEST_SEED
// replays it). The descales' layout and the bound are checked on the CPU by Fp8Operands.*.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/gpu_harness.hpp"
#include "support/test_seed.hpp"
#include "verify/engine_check.hpp"
#include "verify/reference.hpp"

namespace flashjit::testing {
namespace {

// FP8 operands' inputs: the copies bf16, O `out_bf16`'s type, two outlier keys a sequence.
Fp8Cache operands(bool out_bf16, bool per_sequence = false, int outliers = 2) {
  Fp8Cache f;
  f.on = f.operands = true;
  f.out_bf16 = out_bf16;
  f.per_head = f.per_sequence = per_sequence;
  f.outlier_keys = outliers;
  return f;
}

void not_powers_of_two(Fp8Cache& f) {
  f.q_scale = 0.3f, f.k_scale = 0.37f, f.v_scale = 0.0913f;
  f.head_factors = {1.0f, 0.7f, 1.3f, 0.45f};
}

std::string base_spec(int d, bool causal, bool out_bf16) {
  return "dtype=e4m3,head_dim=" + std::to_string(d) + ",causal=" + (causal ? "1" : "0") + (out_bf16 ? "" : ",out_dtype=fp16");
}

// ---- dense Q/K/V (check_attention)

Case dense_case(int d, bool causal, bool out_bf16, int batch, int sq, int sk, int hq, int hkv, const std::string& extra = "") {
  Case c;
  c.problem = make_problem(true, d, causal, batch, sq, sk, hq, hkv);
  c.problem.fp8 = operands(out_bf16);
  c.spec = base_spec(d, causal, out_bf16) + (extra.empty() ? "" : "," + extra);
  return c;
}

bool report(const std::string& what, const CheckResult& r) {
  const bool ok = r.passed_within(kFp8OperandsOErrorBound);
  std::printf("%s o_err %.2e lse_err %.2e (per magnitude %.2e) unwritten %zu  %s %s\n", ok ? "PASS" : "FAIL", r.o_error, r.lse_error,
              r.lse_per_magnitude, r.unwritten, what.c_str(), r.error.c_str());
  EXPECT_TRUE(r.ran) << what << ": " << r.error;
  EXPECT_TRUE(r.error.empty()) << what << ": " << r.error;
  EXPECT_EQ(r.unwritten, 0u) << what;
  EXPECT_LE(r.o_error, kFp8OperandsOErrorBound) << what;
  EXPECT_LE(r.lse_error, kLseErrorBound) << what;
  return ok;
}

void run_dense(const std::vector<Case>& cases) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<std::string> specs;
  for (const Case& c : cases) specs.push_back(c.spec);
  precompile(specs);
  auto rng = fresh_rng();
  int failed = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    failed += !report(c.describe(), run_case(c, rng));
  }
  std::printf("%zu cases, %d failed\n", cases.size(), failed);
}

// Every head dim, causal or not, O in bf16 and fp16, lengths that are not tile multiples (555
// queries, 777 keys), GQA 8:2; every third case FlashAttention-3's [batch, heads_kv] descales.
TEST(AttentionFp8GpuDense, EveryHeadDimMaskAndOutDtype) {
  std::vector<Case> cases;
  int n = 0;
  for (int d : {64, 96, 128, 192, 256})
    for (bool causal : {false, true})
      for (bool out_bf16 : {true, false}) {
        Case c = dense_case(d, causal, out_bf16, 2, 555, 777, 8, 2);
        c.problem.fp8.per_head = c.problem.fp8.per_sequence = n++ % 3 == 2;
        cases.push_back(c);
      }
  run_dense(cases);
}

// Causal with more queries than keys (bottom-right aligned): the first rows see no key (O 0, LSE
// -inf); one key, a block and one past it; self-attention shapes of odd lengths.
TEST(AttentionFp8GpuDense, FullyMaskedRowsAndShortSequences) {
  std::vector<Case> cases;
  const std::pair<int, int> lengths[] = {{300, 100}, {129, 1}, {1000, 129}, {1, 1}, {17, 17}, {1537, 1537}};
  int n = 0;
  for (auto [sq, sk] : lengths)
    for (int d : {128, 256}) {
      Case c = dense_case(d, true, n % 2 == 0, 2, sq, sk, 4, 4);
      c.problem.fp8.outlier_keys = sk > 4 ? 2 : 0;
      cases.push_back(c);
      ++n;
    }
  for (int d : {64, 192}) cases.push_back(dense_case(d, false, true, 1, 1, 1, 2, 1));  // one query, one key
  run_dense(cases);
}

// Outliers: a few keys a sequence 50x the rest (their scores about 50x, their codes saturating at
// 448), with descales that are not powers of two, per tensor and per (sequence, K/V head).
TEST(AttentionFp8GpuDense, OutlierScoresAndDescalesNotPowersOfTwo) {
  std::vector<Case> cases;
  for (int d : {64, 128, 256})
    for (bool per_sequence : {false, true}) {
      Case c = dense_case(d, d != 128, per_sequence, 3, 1000, 1000, 16, 4);
      c.problem.fp8 = operands(per_sequence, per_sequence, 5);
      not_powers_of_two(c.problem.fp8);
      cases.push_back(c);
    }
  run_dense(cases);
}

// Descales per tensor, per K/V head and per (sequence, K/V head), at 1:1, 4:1 and 8:1 GQA (a query
// head takes its K/V head's Q descale), with the softmax scale 1 and the default.
TEST(AttentionFp8GpuDense, DescalesPerTensorAndPerSequenceHead) {
  std::vector<Case> cases;
  int n = 0;
  for (auto [hq, hkv] : {std::pair{8, 8}, {8, 2}, {16, 2}})
    for (int layout = 0; layout < 3; ++layout) {  // per tensor, per K/V head, per (sequence, K/V head)
      Case c = dense_case(128, n % 2 == 0, true, 3, 700, 900, hq, hkv);
      c.problem.fp8.per_head = layout >= 1;
      c.problem.fp8.per_sequence = layout == 2;
      if (n % 3 == 1) c.problem.scale = 1.0 / 16;
      cases.push_back(c);
      ++n;
    }
  run_dense(cases);
}

// A sliding window with learnable sinks (issue 38's features on FP8 operands).
TEST(AttentionFp8GpuDense, WindowAndSinks) {
  std::vector<Case> cases;
  const std::pair<int, int> windows[] = {{127, 0}, {256, -1}, {0, 0}, {-1, 129}};
  int n = 0;
  for (auto [left, right] : windows)
    for (int d : {128, 256}) {
      const bool causal = right == 0;
      Case c = dense_case(d, causal, n % 2 == 0, 2, 900, 1100, 8, 2, "window=1,sinks=1");
      c.problem.features.window_left = left, c.problem.features.window_right = right;
      c.problem.features.sinks = {8.0, -50.0, 0.5, 2.0, 12.0, -1.0, 3.5, 0.0};
      c.problem.fp8.per_head = c.problem.fp8.per_sequence = n % 2 == 1;
      cases.push_back(c);
      ++n;
    }
  run_dense(cases);
}

// V narrower than Q (head_dim_v; DeepSeek's 192/128): Q and K 192 codes a row, V and O 128;
// causal or not, O in bf16 and fp16, GQA 8:2, lengths that are not tile multiples.
TEST(AttentionFp8GpuDense, HeadDimV192And128) {
  std::vector<Case> cases;
  int n = 0;
  for (bool causal : {false, true})
    for (bool out_bf16 : {true, false})
      for (auto [sq, sk] : {std::pair{555, 777}, {1, 1000}, {1000, 129}}) {
        Case c = dense_case(192, causal, out_bf16, 2, sq, sk, 8, 2, "head_dim_v=128");
        c.problem.head_dim_v = 128;
        c.problem.fp8.per_head = c.problem.fp8.per_sequence = n++ % 3 == 2;
        cases.push_back(c);
      }
  run_dense(cases);
}

// ---- engine inputs (check_engine_attention)

std::string engine_spec(const EngineProblem& p, const std::string& extra = "") {
  std::string spec = base_spec(p.head_dim, p.causal, p.fp8.out_bf16) + (p.dense_q ? "" : ",varlen=1");
  if (p.kv == KvSource::kPaged) spec += ",paged=1";
  return extra.empty() ? spec : spec + "," + extra;
}

struct EngineCase {
  std::string spec;
  EngineProblem problem;
  int max_ctas = -1;  // >= 0: launch on this grid bound (0: one CTA per tile)
};

bool report(const EngineCase& c, const EngineCheck& check) {
  const std::string what = c.spec + "  " + c.problem.describe() + (check.detail.empty() ? "" : "  first bad: " + check.detail);
  return report(what, check.result);
}

void run_engine(const std::vector<EngineCase>& cases) {
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
    failed += !report(c, check_engine_attention(device, {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, c.problem,
                                                buffers, rng));
  }
  std::printf("%zu cases, %d failed\n", cases.size(), failed);
}

EngineProblem ragged(std::mt19937_64& rng, bool out_bf16, int d, bool causal, int hq, int hkv, KvSource kv, int page_size, int batch,
                     int max_len) {
  EngineProblem p = random_engine_problem(rng, batch, max_len);
  p.bf16 = true, p.head_dim = d, p.causal = causal, p.heads_q = hq, p.heads_kv = hkv, p.kv = kv, p.page_size = page_size;
  p.fp8 = operands(out_bf16);
  return p;
}

// Varlen: packed Q and packed K/V (cu_seqlens_k) in ragged batches (empty, one-token and longer
// sequences, keys fewer than queries), every head dim, causal or not.
TEST(AttentionFp8GpuEngine, VarlenPacked) {
  std::mt19937_64 shapes(390);
  std::vector<EngineCase> cases;
  int n = 0;
  for (int d : {64, 96, 128, 192, 256})
    for (bool causal : {false, true}) {
      EngineProblem p = ragged(shapes, n % 2 == 0, d, causal, 8, 2, KvSource::kPacked, 64, 7, 700);
      p.fp8.per_head = p.fp8.per_sequence = n % 3 == 1;
      cases.push_back({engine_spec(p), p});
      ++n;
    }
  run_engine(cases);
}

// Paged pools: pages of 1, 16 and 64 keys, shuffled tables with pages shared between sequences,
// NHD, HND and K and V in one tensor; every slot and page no sequence reads holds the NaN code 0x7F
// (EngineProblem::nan_padding), as do Q's rows past the last sequence.
TEST(AttentionFp8GpuEngine, PagedPageSizesAndLayouts) {
  std::mt19937_64 shapes(391);
  std::vector<EngineCase> cases;
  for (int page_size : {1, 16, 64})
    for (int layout = 0; layout < 3; ++layout) {
      EngineProblem p = ragged(shapes, layout != 1, page_size == 64 ? 256 : 128, layout != 2, 8, 2, KvSource::kPaged, page_size, 6, 600);
      p.head_major_pool = layout == 1;
      p.kv_in_one_tensor = layout == 2;
      p.fp8.per_head = p.fp8.per_sequence = layout == 1;  // shared pages dequantise by each sequence's descale
      cases.push_back({engine_spec(p), p});
    }
  // Dense queries against a paged pool (paged=1 without varlen), and dense K/V with seqused_k.
  EngineProblem dense_q = ragged(shapes, true, 128, true, 8, 2, KvSource::kPaged, 16, 4, 500);
  dense_q.dense_q = true;
  for (int& q : dense_q.seqlen_q) q = 200;
  cases.push_back({engine_spec(dense_q), dense_q});
  EngineProblem dense_kv = ragged(shapes, false, 128, false, 8, 2, KvSource::kDense, 16, 6, 700);
  cases.push_back({engine_spec(dense_kv), dense_kv});
  run_engine(cases);
}

// Decode: 1-4 queries against 0..max_keys keys (no key, one, whole blocks, one past), the rest random.
EngineProblem decode_batch(std::mt19937_64& rng, bool out_bf16, int hq, int hkv, KvSource kv, int page_size, int batch, int queries,
                           int max_keys) {
  EngineProblem p = ragged(rng, out_bf16, 128, queries > 1, hq, hkv, kv, page_size, batch, 8);
  const int special[] = {0, 1, 1024, 1025};
  for (int b = 0; b < batch; ++b) {
    p.seqlen_q[b] = queries;
    p.seqlen_k[b] = b < 4 ? std::min(special[b], max_keys) : 1 + int(rng() % max_keys);
  }
  return p;
}

// Split-KV decode with packed GQA: split counts 1, 3 and 16 (one CTA per tile takes max_splits),
// the combine kernel and combine=inline, descales per tensor and per (sequence, K/V head).
TEST(AttentionFp8GpuEngine, SplitKvDecodePackedGqa) {
  std::mt19937_64 shapes(392);
  std::vector<EngineCase> cases;
  for (bool inline_combine : {false, true})
    for (int splits : {1, 3, 16})
      for (bool per_sequence : {false, true}) {
        EngineProblem p = decode_batch(shapes, splits != 3, 32, 8, splits == 3 ? KvSource::kDense : KvSource::kPaged, 16, 7,
                                       per_sequence ? 4 : 1, 2500);
        p.max_splits = splits;
        p.inline_combine = inline_combine;
        p.fp8.per_head = p.fp8.per_sequence = per_sequence;
        cases.push_back({engine_spec(p, inline_combine ? "pack_gqa=1,split_kv=1,combine=inline" : "pack_gqa=1,split_kv=1"), p, 0});
      }
  run_engine(cases);
}

// V narrower than Q (head_dim_v; DeepSeek's 192/128) through the engine's inputs: packed and paged
// (pages of 16 and 64) K/V in ragged batches, and split-KV decode through both combines.
TEST(AttentionFp8GpuEngine, HeadDimV192And128) {
  std::mt19937_64 shapes(394);
  std::vector<EngineCase> cases;
  int n = 0;
  for (KvSource kv : {KvSource::kPacked, KvSource::kPaged})
    for (bool causal : {false, true}) {
      EngineProblem p = ragged(shapes, n % 2 == 0, 192, causal, 8, 2, kv, n % 2 == 0 ? 16 : 64, 6, 700);
      p.head_dim_v = 128;
      p.fp8.per_head = p.fp8.per_sequence = n++ % 3 == 1;
      cases.push_back({engine_spec(p, "head_dim_v=128"), p});
    }
  for (bool inline_combine : {false, true}) {
    EngineProblem p = decode_batch(shapes, !inline_combine, 32, 8, KvSource::kPaged, 64, 7, inline_combine ? 4 : 1, 2500);
    p.head_dim = 192, p.head_dim_v = 128;
    p.max_splits = 16;
    p.inline_combine = inline_combine;
    cases.push_back({engine_spec(p, std::string("head_dim_v=128,pack_gqa=1,split_kv=1") + (inline_combine ? ",combine=inline" : "")), p});
  }
  run_engine(cases);
}

// A sliding window with sinks through the engine's inputs, paged and split-KV decode.
TEST(AttentionFp8GpuEngine, WindowAndSinks) {
  std::mt19937_64 shapes(393);
  std::vector<EngineCase> cases;
  const std::vector<double> sinks = {8.0, -50.0, 0.5, 2.0, 12.0, -1.0, 3.5, 0.0};
  for (auto [left, right] : {std::pair{127, 0}, {300, -1}})
    for (KvSource kv : {KvSource::kPacked, KvSource::kPaged}) {
      EngineProblem p = ragged(shapes, kv == KvSource::kPaged, 128, right == 0, 8, 2, kv, 16, 6, 700);
      p.features.window_left = left, p.features.window_right = right;
      p.features.sinks = sinks;
      cases.push_back({engine_spec(p, "window=1,sinks=1"), p});
    }
  for (const char* combine : {"pack_gqa=1,split_kv=1", "pack_gqa=1,split_kv=1,combine=inline"}) {
    EngineProblem p = decode_batch(shapes, true, 8, 2, KvSource::kPaged, 16, 6, 1, 2500);
    p.max_splits = 8;
    p.inline_combine = std::string(combine).find("inline") != std::string::npos;
    p.features.window_left = 1000, p.features.window_right = 0;
    p.features.sinks = sinks;
    p.fp8.per_head = p.fp8.per_sequence = true;
    cases.push_back({engine_spec(p, std::string(combine) + ",window=1,sinks=1"), p, 0});
  }
  run_engine(cases);
}

// One graph captured on the first step and replayed as the lengths change (varlen paged prefill,
// and paged split-KV decode); the descales change with the data between replays, their pointers not.
TEST(AttentionFp8GpuEngine, GraphReplayedAfterTheLengthsChange) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  for (bool decode : {false, true}) {
    const int most_q = decode ? 4 : 400, most_k = decode ? 3000 : 800;
    EngineProblem bounds = ragged(rng, !decode, 128, true, decode ? 32 : 8, decode ? 8 : 2, KvSource::kPaged, 16, 9, 800);
    bounds.max_seqlen_q = decode ? most_q : 800, bounds.max_seqlen_k = most_k;
    for (int b = 0; b < 9; ++b) bounds.seqlen_q[b] = most_q, bounds.seqlen_k[b] = most_k;
    if (decode) bounds.max_splits = 6;
    bounds.fp8.per_head = bounds.fp8.per_sequence = decode;
    const EngineCapacity capacity = capacity_for(bounds);
    const std::string spec = engine_spec(bounds, decode ? "pack_gqa=1,split_kv=1" : "");
    std::string error;
    auto kernel = get_test_kernel(spec, &error);
    ASSERT_TRUE(kernel) << error;
    EngineBuffers buffers(*env->api, bounds, capacity);
    const DriverApi& api = *env->api;
    CUgraphExec exec = nullptr;
    auto replay = [&](const AttentionArgs& args) -> Status {
      if (exec == nullptr) {  // the first step captures
        auto params = make_kernel_params(api, kernel->config, args, env->sm_count);
        if (!params) return params.take_error();
        CUgraph graph = nullptr;
        if (Status st = check(api, api.cuStreamBeginCapture(env->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture"); !st) return st;
        Status launched = launch_attention_kernels(api, {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, args,
                                                   *params, env->stream, env->sm_count, false);
        if (Status st = check(api, api.cuStreamEndCapture(env->stream, &graph), "end capture"); !st) return st;
        if (!launched) return launched;
        if (Status st = check(api, api.cuGraphInstantiate(&exec, graph, 0), "instantiate"); !st) return st;
        api.cuGraphDestroy(graph);
      }
      return check(api, api.cuGraphLaunch(exec, env->stream), "graph launch");
    };
    for (int step = 0; step < 5; ++step) {
      EngineProblem p = random_engine_problem(rng, 3 + int(rng() % 7), 400);
      if (decode) {
        for (size_t b = 0; b < p.seqlen_q.size(); ++b) p.seqlen_q[b] = int(rng() % 5), p.seqlen_k[b] = int(rng() % (most_k + 1));
      }
      p.bf16 = bounds.bf16, p.head_dim = bounds.head_dim, p.causal = bounds.causal, p.heads_q = bounds.heads_q;
      p.heads_kv = bounds.heads_kv, p.kv = bounds.kv, p.page_size = bounds.page_size, p.max_splits = bounds.max_splits;
      p.fp8 = bounds.fp8;
      if (step % 2 == 1) not_powers_of_two(p.fp8);  // new descale values behind the same pointers
      EngineCase c{spec + " (replay " + std::to_string(step) + ")", p};
      report(c, check_engine_attention(env->device(), {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, p, buffers,
                                       rng, replay));
    }
    if (exec) api.cuGraphExecDestroy(exec);
  }
}

// ---- on the CPU: every GPU case's spec resolves (a spec the GPU run would refuse fails here first)
TEST(Fp8OperandsCases, TheSpecsResolve) {
  for (const char* text : {"dtype=e4m3,head_dim=64,causal=0", "dtype=e4m3,head_dim=96,causal=1,out_dtype=fp16",
                           "dtype=e4m3,head_dim=192,causal=0,out_dtype=fp16", "dtype=e4m3,head_dim=256,causal=1",
                           "dtype=e4m3,head_dim=128,causal=1,window=1,sinks=1", "dtype=e4m3,head_dim=256,causal=0,out_dtype=fp16,window=1,sinks=1",
                           "dtype=e4m3,head_dim=96,causal=1,varlen=1", "dtype=e4m3,head_dim=256,causal=1,varlen=1,paged=1",
                           "dtype=e4m3,head_dim=128,causal=1,paged=1", "dtype=e4m3,head_dim=128,causal=0,out_dtype=fp16,varlen=1,paged=1",
                           "dtype=e4m3,head_dim=128,causal=0,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                           "dtype=e4m3,head_dim=128,causal=1,out_dtype=fp16,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline",
                           "dtype=e4m3,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,window=1,sinks=1",
                           "dtype=e4m3,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,window=1,sinks=1"}) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec) << text << ": " << spec.error().message;
    EXPECT_TRUE(spec->fp8_operands()) << text;
    auto config = make_config(*spec);
    EXPECT_TRUE(config) << text << ": " << config.error().message;
  }
}

}  // namespace
}  // namespace flashjit::testing
