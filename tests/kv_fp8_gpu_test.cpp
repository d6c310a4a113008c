// The FP8 cache (spec key kv_dtype=e4m3, issue 39) on the GPU against the float64 reference on the
// dequantised cache: random e4m3 K/V codes (the NaN code 0x7F in every element no sequence reads:
// rows past a sequence, unused page slots and pages), scales per tensor or per KV head, powers of
// two (the dequantised values exact in fp16 and bf16) and not, outlier keys with 50x the scores;
// dense K/V with seqused_k, packed (varlen), paged (pages of 1, 16 and 64, shuffled tables), split-KV
// decode with packed GQA (the combine kernel and combine=inline), and a CUDA graph replayed after
// the lengths change. Outputs are poisoned first. Skips with the reason where no Hopper GPU is
// present. The codes and their dequantised values (verify/engine_check's Fp8Cache) are checked on
// the CPU by KvFp8Cache.*.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "support/gpu_harness.hpp"
#include "verify/engine_check.hpp"
#include "verify/reference.hpp"
#include "../templates/fp8.cuh"

namespace flashjit::testing {
namespace {

// A fresh seed each run, or FLASHJIT_TEST_SEED's (a decimal number) to replay one; printed either way.
std::mt19937_64 fresh_rng() {
  uint64_t seed = 0;
  if (const char* text = std::getenv("FLASHJIT_TEST_SEED"); text != nullptr && *text != '\0') {
    const char* end = text + std::strlen(text);
    const auto [stop, ec] = std::from_chars(text, end, seed);
    if (ec != std::errc() || stop != end) {
      ADD_FAILURE() << "FLASHJIT_TEST_SEED: '" << text << "' is not allowed; allowed: a decimal number below 2^64";
    }
  } else {
    std::random_device rd;
    seed = (uint64_t(rd()) << 32) ^ rd();
  }
  std::printf("random seed %llu (FLASHJIT_TEST_SEED=%llu replays it)\n", (unsigned long long)seed, (unsigned long long)seed);
  return std::mt19937_64(seed);
}

std::string fp8_spec(const EngineProblem& p, const std::string& extra = "") {
  std::string spec = std::string("dtype=") + (p.bf16 ? "bf16" : "fp16") + ",head_dim=" + std::to_string(p.head_dim) +
                     ",causal=" + (p.causal ? "1" : "0") + (p.dense_q ? "" : ",varlen=1");
  if (p.kv == KvSource::kPaged) spec += ",paged=1";
  if (!extra.empty()) spec += "," + extra;
  return spec + ",kv_dtype=e4m3";
}

struct Fp8Case {
  std::string spec;
  EngineProblem problem;
  int max_ctas = -1;  // >= 0: launch on this grid bound (0: one CTA per tile)
};

// The 16-bit kernel's bound: the reference runs on exactly the values the kernel widens to
// (code x scale in float, one rounding to the dtype). A scale that is not a power of two rounds
// there; the bound is doubled for it, in case the widening's float product and the host's differ
// by the last bit of the dtype on a tie.
double fp8_bound(const EngineProblem& p) { return o_error_bound(p.bf16, p.fp8); }

bool report(const Fp8Case& c, const EngineCheck& check) {
  const CheckResult& r = check.result;
  const double bound = fp8_bound(c.problem);
  const bool ok = r.ran && r.error.empty() && r.unwritten == 0 && r.o_error <= bound && r.lse_error <= kLseErrorBound;
  std::printf("%s o_err %.2e lse_err %.2e unwritten %zu  %s  %s %s %s\n", ok ? "PASS" : "FAIL", r.o_error, r.lse_error,
              r.unwritten, c.spec.c_str(), c.problem.describe().c_str(), r.error.c_str(), check.detail.c_str());
  EXPECT_TRUE(r.ran) << r.error;
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.unwritten, 0u) << check.detail;
  EXPECT_LE(r.o_error, bound) << check.detail;
  EXPECT_LE(r.lse_error, kLseErrorBound) << check.detail;
  return ok;
}

void run_all(const std::vector<Fp8Case>& cases) {
  FLASHJIT_REQUIRE_GPU(env);
  std::vector<std::string> specs;
  for (const Fp8Case& c : cases) specs.push_back(c.spec);
  precompile(specs);
  auto rng = fresh_rng();
  int failed = 0;
  for (const Fp8Case& c : cases) {
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

EngineProblem ragged(std::mt19937_64& rng, bool bf16, int d, bool causal, int hq, int hkv, KvSource kv, int page_size, int batch,
                     int max_len) {
  EngineProblem p = random_engine_problem(rng, batch, max_len);
  p.bf16 = bf16, p.head_dim = d, p.causal = causal, p.heads_q = hq, p.heads_kv = hkv, p.kv = kv, p.page_size = page_size;
  p.fp8.on = true;
  p.fp8.outlier_keys = 2;
  return p;
}

// Dense K/V ([batch, keys, heads_kv, d] with seqused_k; rows past each sequence NaN codes) at
// every head dim, mask and dtype; every third case per-head scales.
TEST(AttentionKvFp8Gpu, DenseCacheEveryHeadDimDtypeAndMask) {
  std::mt19937_64 shapes(39);
  std::vector<Fp8Case> cases;
  int n = 0;
  for (bool bf16 : {false, true})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, KvSource::kDense, 64, 6, 700);
        p.fp8.per_head = n++ % 3 == 2;
        cases.push_back({fp8_spec(p), p});
      }
  run_all(cases);
}

// Packed K/V (cu_seqlens_k) in a ragged batch, both dtypes, causal or not.
TEST(AttentionKvFp8Gpu, VarlenPackedCache) {
  std::mt19937_64 shapes(40);
  std::vector<Fp8Case> cases;
  for (bool bf16 : {false, true})
    for (bool causal : {false, true})
      for (int d : {64, 128}) {
        EngineProblem p = ragged(shapes, bf16, d, causal, 8, 2, KvSource::kPacked, 64, 7, 700);
        p.fp8.per_head = causal;
        cases.push_back({fp8_spec(p), p});
      }
  run_all(cases);
}

// Paged pools, pages of 1, 16 and 64 keys, shuffled tables with shared pages, NHD and HND, K and
// V in one tensor; unused slots and pages hold NaN codes.
TEST(AttentionKvFp8Gpu, PagedCachePageSizesAndLayouts) {
  std::mt19937_64 shapes(41);
  std::vector<Fp8Case> cases;
  for (int page_size : {1, 16, 64})
    for (int layout = 0; layout < 3; ++layout) {
      EngineProblem p = ragged(shapes, layout != 1, 128, layout != 2, 8, 2, KvSource::kPaged, page_size, 6, 600);
      p.head_major_pool = layout == 1;
      p.kv_in_one_tensor = layout == 2;
      p.fp8.per_head = layout == 1;
      cases.push_back({fp8_spec(p), p});
    }
  run_all(cases);
}

// Scales that are not powers of two (one rounding to the dtype when widened), per tensor and per
// KV head, with outliers.
TEST(AttentionKvFp8Gpu, ScalesNotPowersOfTwo) {
  std::mt19937_64 shapes(42);
  std::vector<Fp8Case> cases;
  for (bool bf16 : {false, true})
    for (bool per_head : {false, true}) {
      EngineProblem p = ragged(shapes, bf16, 128, true, 16, 4, KvSource::kPaged, 16, 6, 700);
      p.fp8.k_scale = 0.37f, p.fp8.v_scale = 0.0913f;
      p.fp8.per_head = per_head;
      p.fp8.head_factors = {1.0f, 0.7f, 1.3f, 0.45f};
      p.fp8.outlier_keys = 3;
      cases.push_back({fp8_spec(p), p});
    }
  run_all(cases);
}

// Decode: 1-4 queries against 0..max_keys keys (no key, one, whole blocks, one past), the rest random.
EngineProblem decode_batch(std::mt19937_64& rng, bool bf16, int hq, int hkv, KvSource kv, int page_size, int batch, int queries,
                           int max_keys) {
  EngineProblem p = ragged(rng, bf16, 128, queries > 1, hq, hkv, kv, page_size, batch, 8);
  const int special[] = {0, 1, 1024, 1025};
  for (int b = 0; b < batch; ++b) {
    p.seqlen_q[b] = queries;
    p.seqlen_k[b] = b < 4 ? std::min(special[b], max_keys) : 1 + int(rng() % max_keys);
  }
  return p;
}

// Split-KV decode with packed GQA: split counts 1, 3 and 16 (one CTA per tile takes max_splits),
// the combine kernel and combine=inline, per-tensor and per-head scales.
TEST(AttentionKvFp8Gpu, SplitKvDecodePackedGqa) {
  std::mt19937_64 shapes(43);
  std::vector<Fp8Case> cases;
  for (bool inline_combine : {false, true})
    for (int splits : {1, 3, 16})
      for (bool per_head : {false, true}) {
        EngineProblem p = decode_batch(shapes, splits != 3, 32, 8, splits == 3 ? KvSource::kDense : KvSource::kPaged, 16, 7,
                                       per_head ? 4 : 1, 2500);
        p.max_splits = splits;
        p.inline_combine = inline_combine;
        p.fp8.per_head = per_head;
        cases.push_back({fp8_spec(p, inline_combine ? "pack_gqa=1,split_kv=1,combine=inline" : "pack_gqa=1,split_kv=1"), p, 0});
      }
  run_all(cases);
}

// V narrower than Q (head_dim_v; DeepSeek's 192/128) in an FP8 cache: V's codes head_dim_v to a
// row and key. Dense, packed and paged K/V (pages of 16 and 64; NHD, HND, K and V in one tensor),
// both dtypes, scales per tensor and per head; split-KV decode through both combines.
TEST(AttentionKvFp8Gpu, HeadDimV192And128) {
  std::mt19937_64 shapes(44);
  std::vector<Fp8Case> cases;
  int n = 0;
  for (KvSource kv : {KvSource::kDense, KvSource::kPacked, KvSource::kPaged})
    for (bool bf16 : {false, true}) {
      EngineProblem p = ragged(shapes, bf16, 192, n % 2 == 0, 8, 2, kv, n % 2 == 0 ? 64 : 16, 6, 700);
      p.head_dim_v = 128;
      p.fp8.per_head = n++ % 3 == 2;
      cases.push_back({fp8_spec(p, "head_dim_v=128"), p});
    }
  for (int layout = 1; layout < 3; ++layout) {  // HND; K and V in one tensor
    EngineProblem p = ragged(shapes, true, 192, true, 8, 2, KvSource::kPaged, 16, 6, 600);
    p.head_dim_v = 128;
    p.head_major_pool = layout == 1;
    p.kv_in_one_tensor = layout == 2;
    cases.push_back({fp8_spec(p, "head_dim_v=128"), p});
  }
  for (bool inline_combine : {false, true}) {
    EngineProblem p = decode_batch(shapes, true, 32, 8, KvSource::kPaged, 64, 7, inline_combine ? 4 : 1, 2500);
    p.head_dim = 192, p.head_dim_v = 128;
    p.max_splits = 16;
    p.inline_combine = inline_combine;
    p.fp8.per_head = inline_combine;
    cases.push_back({fp8_spec(p, std::string("head_dim_v=128,pack_gqa=1,split_kv=1") + (inline_combine ? ",combine=inline" : "")), p});
  }
  run_all(cases);
}
// Head dims above 256 on an FP8 cache: MLA's e4m3 latent cache (576/512, V the latent rows' first
// 512 columns, the same codes: one scale for K and V, per tensor or per head), 16-128 heads, 1-4
// queries, pages 64/16/1, split-KV; Gemma 4's 512/512 decode and ragged prefill; 384/384; 320/256.
TEST(AttentionKvFp8Gpu, LargeHeadDimsAndTheMlaLatentCache) {
  std::mt19937_64 shapes(47);
  std::vector<Fp8Case> cases;
  int n = 0;
  for (int heads : {16, 128})
    for (int queries : {1, 4}) {
      EngineProblem p = decode_batch(shapes, n % 2 == 0, heads, 1, KvSource::kPaged, std::vector<int>{64, 16, 1}[size_t(n % 3)], 6, queries, 3000);
      p.head_dim = 576, p.head_dim_v = 512;
      p.causal = true;
      p.v_is_k_prefix = true;
      p.fp8.v_scale = p.fp8.k_scale;  // V's codes are K's
      p.fp8.per_head = n % 2 == 1;
      p.max_splits = 16;
      cases.push_back({fp8_spec(p, "head_dim_v=512,pack_gqa=1,split_kv=1"), p});
      ++n;
    }
  {
    EngineProblem p = decode_batch(shapes, true, 16, 4, KvSource::kPaged, 64, 7, 2, 3000);
    p.head_dim = 512, p.causal = true, p.max_splits = 16;
    cases.push_back({fp8_spec(p, "pack_gqa=1,split_kv=1"), p});
  }
  for (auto [d, dv] : {std::pair{512, 512}, {384, 384}, {320, 256}}) {
    EngineProblem p = ragged(shapes, d != 384, d, true, 8, 2, KvSource::kPaged, 16, 5, 500);
    p.head_dim_v = dv;
    cases.push_back({fp8_spec(p, dv != d ? "head_dim_v=" + std::to_string(dv) : ""), p});
  }
  run_all(cases);
}


// One graph captured on the first step and replayed as the lengths change (paged split-KV decode).
TEST(AttentionKvFp8Gpu, GraphReplayedAfterTheLengthsChange) {
  FLASHJIT_REQUIRE_GPU(env);
  auto rng = fresh_rng();
  for (bool decode : {false, true}) {
    const int most_q = decode ? 4 : 400, most_k = decode ? 3000 : 800;
    EngineProblem bounds = ragged(rng, true, 128, true, decode ? 32 : 8, decode ? 8 : 2, KvSource::kPaged, 16, 9, 800);
    bounds.max_seqlen_q = decode ? most_q : 800, bounds.max_seqlen_k = most_k;
    for (int b = 0; b < 9; ++b) bounds.seqlen_q[b] = most_q, bounds.seqlen_k[b] = most_k;
    if (decode) bounds.max_splits = 6;
    bounds.fp8.per_head = decode;
    const EngineCapacity capacity = capacity_for(bounds);
    const std::string spec = fp8_spec(bounds, decode ? "pack_gqa=1,split_kv=1" : "");
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
      Fp8Case c{spec + " (replay " + std::to_string(step) + ")", p};
      report(c, check_engine_attention(env->device(), {kernel->loaded->function(), kernel->loaded->more(0)}, kernel->config, p, buffers, rng, replay));
    }
    if (exec) api.cuGraphExecDestroy(exec);
  }
}

// ---- on the CPU: the codes and the dequantised copy the GPU cases' reference reads
TEST(KvFp8Cache, PowerOfTwoScalesDequantiseExactlyToBothDtypes) {
  for (int code = 0; code < 256; ++code) {
    if (e4m3_is_nan((unsigned char)code)) continue;
    for (float scale : {1.0f, 0.5f, 0.25f, 0.125f, 2.0f, 1.0f / 64}) {
      const double exact = double(e4m3_value((unsigned char)code)) * scale;
      for (bool bf16 : {false, true}) {
        EXPECT_EQ(double(half_bits_to_float(dequantised_bits((unsigned char)code, scale, bf16), bf16)), exact)
            << "code " << code << " scale " << scale << (bf16 ? " bf16" : " fp16");
      }
    }
  }
}

TEST(KvFp8Cache, CodesRoundTripAndNaNStaysNaN) {
  for (int code = 0; code < 256; ++code) {
    if (e4m3_is_nan((unsigned char)code)) continue;
    const float value = e4m3_value((unsigned char)code) * 0.25f;
    EXPECT_EQ(quantised_code(value, 0.25f), code == 0x80 ? 0x80 : code) << code;
  }
  EXPECT_EQ(quantised_code(1e6f, 0.5f), kE4m3MaxCode);  // saturates
  EXPECT_TRUE(std::isnan(half_bits_to_float(dequantised_bits(kE4m3Nan, 0.5f, true), true)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(dequantised_bits(0xFF, 2.0f, false), false)));
  // A scale that is not a power of two: one rounding to the dtype of the float product.
  const float product = e4m3_value(0x5B) * 0.37f;
  EXPECT_EQ(dequantised_bits(0x5B, 0.37f, true), float_to_half_bits(product, true));
}

TEST(KvFp8Cache, ScalesPerTensorAndPerHead) {
  Fp8Cache f;
  f.on = true;
  EXPECT_EQ(f.scale_of(true, 3), f.k_scale);
  EXPECT_EQ(f.scale_of(false, 5), f.v_scale);
  f.per_head = true;
  EXPECT_EQ(f.scale_of(true, 1), f.k_scale * f.head_factors[1]);
  EXPECT_EQ(f.scale_of(false, 6), f.v_scale * f.head_factors[2]);
  EXPECT_NE(f.describe().find("per-head"), std::string::npos) << f.describe();
}

// The checks' table (Fp8Quantiser) gives quantise_element's code and dequantised copy for every
// 16-bit input, NaN included, under power-of-two and other scales, outliers or not; and the scales
// as a launch reads them, and whether they are exact.
TEST(KvFp8Cache, TheTableQuantisesAsTheDefinition) {
  for (bool bf16 : {false, true}) {
    Fp8Quantiser table(bf16);
    for (float scale : {0.5f, 0.37f, 0.25f}) {
      for (bool outlier : {false, true}) {
        for (uint32_t bits = 0; bits < 65536; bits += 7) {
          uint16_t by_table = uint16_t(bits), by_definition = uint16_t(bits);
          const unsigned char code = table(by_table, scale, outlier);
          ASSERT_EQ(code, quantise_element(by_definition, scale, bf16, outlier)) << bits << " scale " << scale;
          ASSERT_EQ(by_table, by_definition) << bits << " scale " << scale;
        }
      }
    }
  }
  Fp8Cache f;
  f.on = true;
  EXPECT_TRUE(f.exact());
  EXPECT_EQ(f.scales(true, 3), std::vector<float>(3, f.k_scale));
  EXPECT_EQ(f.scale_head_stride(), 0);
  f.per_head = true;
  EXPECT_EQ(f.scales(false, 2), (std::vector<float>{f.v_scale, f.v_scale * f.head_factors[1]}));
  EXPECT_EQ(f.scale_head_stride(), 1);
  f.k_scale = 0.37f;
  EXPECT_FALSE(f.exact());
  EXPECT_EQ(o_error_bound(true, f), 2 * o_error_bound(true));
  f.on = false;
  EXPECT_EQ(o_error_bound(true, f), o_error_bound(true));
}

// The GPU cases' specs parse and resolve to a kernel configuration with the FP8 cache.
TEST(KvFp8Cache, TheCasesSpecsResolve) {
  EngineProblem p;
  p.kv = KvSource::kPaged;
  p.fp8.on = true;
  EXPECT_EQ(fp8_spec(p), "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,kv_dtype=e4m3");
  for (const std::string& spec : {fp8_spec(p), fp8_spec(p, "pack_gqa=1,split_kv=1"), fp8_spec(p, "pack_gqa=1,split_kv=1,combine=inline")}) {
    auto parsed = parse_spec(spec);
    ASSERT_TRUE(parsed) << spec << ": " << parsed.error().message;
    EXPECT_TRUE(parsed->kv_fp8());
    auto config = make_config(*parsed);
    EXPECT_TRUE(config) << spec << ": " << config.error().message;
  }
}

}  // namespace
}  // namespace flashjit::testing
