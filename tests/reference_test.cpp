// The CPU reference is the definition the kernels are judged by: check it against cases whose
// answer is known in closed form, and its issue 38 features against a direct evaluation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "support/test_seed.hpp"
#include "verify/engine_check.hpp"
#include "verify/reference.hpp"

namespace flashjit {
namespace {

TEST(Reference, HalfConversionsRoundTrip) {
  for (float x : {0.f, 1.f, -2.5f, 0.333251953125f, 65504.f, 1e-5f, -3.0e-7f}) {
    EXPECT_NEAR(half_bits_to_float(float_to_half_bits(x, false), false), x, std::fabs(x) * 1e-3 + 1e-7);
    EXPECT_NEAR(half_bits_to_float(float_to_half_bits(x, true), true), x, std::fabs(x) * 8e-3);
  }
  EXPECT_EQ(float_to_half_bits(1.f, false), 0x3c00);
  EXPECT_EQ(float_to_half_bits(1.f, true), 0x3f80);
  EXPECT_EQ(float_to_half_bits(-2.f, false), 0xc000);
}

// The random inputs: standard normal, every element written (odd sizes too), and element i's value
// a function of the seed and i alone, whichever thread fills it: buffers of different sizes (one
// thread; two, split at other elements) agree where they overlap.
TEST(Reference, RandomFillIsStandardNormalAndIndependentOfTheThreads) {
  for (bool bf16 : {false, true}) {
    // 0xFFFF: NaN in both types. Two threads above 2^20 pairs: large splits at 750000 pairs, middle at 525000.
    std::vector<uint16_t> large(3'000'001, 0xFFFF), middle(2'100'001, 0xFFFF), small(1001, 0xFFFF);
    std::mt19937_64 a(42), b(42), m(42);
    fill_random(large, bf16, a);
    fill_random(middle, bf16, m);
    fill_random(small, bf16, b);
    EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin())) << "bf16=" << bf16;
    EXPECT_TRUE(std::equal(middle.begin(), middle.end(), large.begin())) << "bf16=" << bf16;
    double sum = 0, squares = 0, fourth = 0;
    for (uint16_t bits : large) {
      const double x = half_bits_to_float(bits, bf16);
      ASSERT_TRUE(std::isfinite(x)) << "bf16=" << bf16;
      sum += x, squares += x * x, fourth += x * x * x * x;
    }
    const double n = double(large.size()), mean = sum / n, var = squares / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 0.005) << "bf16=" << bf16;
    EXPECT_NEAR(var, 1.0, 0.01) << "bf16=" << bf16;
    EXPECT_NEAR(fourth / n, 3.0, 0.05) << "bf16=" << bf16;  // a normal's fourth moment (a uniform's would be 1.8)
    std::vector<uint16_t> other(large.size());
    std::mt19937_64 c(43);
    fill_random(other, bf16, c);
    EXPECT_LT(std::inner_product(other.begin(), other.begin() + 1000, large.begin(), 0, std::plus<>(),
                                 [](uint16_t x, uint16_t y) { return int(x == y); }),
              100)
        << "another seed gives other values";
  }
}

// Identical keys -> uniform attention -> O is the mean of the visible V rows, LSE = s + log(n).
TEST(Reference, UniformKeysAverageValuesWithCausalBottomRight) {
  Problem p;
  p.bf16 = false;
  p.seqlen_q = 2;
  p.seqlen_k = 4;
  p.head_dim = 8;
  p.causal = true;
  std::vector<uint16_t> q(2 * 8), k(4 * 8), v(4 * 8);
  for (auto& x : q) x = float_to_half_bits(1.f, false);
  for (auto& x : k) x = float_to_half_bits(0.5f, false);
  for (int j = 0; j < 4; ++j)
    for (int c = 0; c < 8; ++c) v[j * 8 + c] = float_to_half_bits(float(j + 1), false);
  Strides s = contiguous_strides(0, 1, 8);
  Reference ref = cpu_reference(p, q.data(), s, k.data(), s, v.data(), s);
  // Row 0 sees keys 0..2 (bottom-right aligned: 0 + 4 - 2), row 1 sees all 4.
  EXPECT_NEAR(ref.o[0], (1 + 2 + 3) / 3.0, 1e-12);
  EXPECT_NEAR(ref.o[8], (1 + 2 + 3 + 4) / 4.0, 1e-12);
  const double score = 8 * 0.5 / std::sqrt(8.0);
  EXPECT_NEAR(ref.lse[0], score + std::log(3.0), 1e-12);
  EXPECT_NEAR(ref.lse[1], score + std::log(4.0), 1e-12);
}

TEST(Reference, FullyMaskedRowsGiveZeroAndMinusInfinity) {
  Problem p;
  p.seqlen_q = 5;
  p.seqlen_k = 2;
  p.head_dim = 8;
  p.causal = true;
  std::mt19937_64 rng(1);
  std::vector<uint16_t> q(5 * 8), k(2 * 8), v(2 * 8);
  fill_random(q, true, rng);
  fill_random(k, true, rng);
  fill_random(v, true, rng);
  Strides s = contiguous_strides(0, 1, 8);
  Reference ref = cpu_reference(p, q.data(), s, k.data(), s, v.data(), s);
  // Rows 0..2 see nothing (row + 2 - 5 < 0); row 3 sees key 0 only: O = V[0].
  for (int row = 0; row < 3; ++row) {
    EXPECT_TRUE(std::isinf(ref.lse[row]) && ref.lse[row] < 0);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(ref.o[row * 8 + c], 0.0);
  }
  for (int c = 0; c < 8; ++c) EXPECT_NEAR(ref.o[3 * 8 + c], half_bits_to_float(v[c], true), 1e-12);
}

// Issue 38's features, each and together, against a direct evaluation written out here: every key
// of the row through the definition of the mask (bottom-right aligned window, causal, floor-division
// chunk), the scaled score capped and biased, and a softmax over the visible keys and the sink column.
bool visible_by_definition(const Problem& p, int row, int key) {
  const int64_t pos = int64_t(row) + p.seqlen_k - p.seqlen_q;
  const AttentionFeatures& f = p.features;
  const int64_t right = p.causal ? 0 : f.window_right;
  if (right >= 0 && key > pos + right) return false;
  if (f.window_left >= 0 && key < pos - f.window_left) return false;
  if (f.chunk > 0 && std::floor(double(key) / f.chunk) != std::floor(double(pos) / f.chunk)) return false;
  return true;
}

Reference naive_reference(const Problem& p, const std::vector<uint16_t>& q, const std::vector<uint16_t>& k, const std::vector<uint16_t>& v) {
  const int d = p.head_dim, group = p.heads_q / p.heads_kv;
  const double scale = p.effective_scale();
  auto at = [&](const std::vector<uint16_t>& t, int b, int row, int h, int heads, int seqlen, int c) {
    return double(half_bits_to_float(t[((size_t(b) * seqlen + row) * heads + h) * d + c], p.bf16));
  };
  Reference ref;
  ref.o.assign(size_t(p.batch) * p.seqlen_q * p.heads_q * d, 0.0);
  ref.lse.assign(size_t(p.batch) * p.heads_q * p.seqlen_q, 0.0);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int row = 0; row < p.seqlen_q; ++row) {
        const int64_t pos = int64_t(row) + p.seqlen_k - p.seqlen_q;
        const double slope = p.features.alibi_slopes.empty() ? 0.0
                             : p.features.alibi_slopes.size() == size_t(p.heads_q) ? p.features.alibi_slopes[size_t(h)]
                                                                                  : p.features.alibi_slopes[size_t(b) * p.heads_q + h];
        std::vector<int> keys;
        std::vector<double> logits;  // the visible keys', then the sink's
        for (int j = 0; j < p.seqlen_k; ++j) {
          if (!visible_by_definition(p, row, j)) continue;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += at(q, b, row, h, p.heads_q, p.seqlen_q, c) * at(k, b, j, h / group, p.heads_kv, p.seqlen_k, c);
          double x = dot * scale;
          if (p.features.softcap > 0) x = p.features.softcap * std::tanh(x / p.features.softcap);
          x -= slope * std::fabs(double(pos - j));
          keys.push_back(j);
          logits.push_back(x);
        }
        if (!p.features.sinks.empty()) logits.push_back(p.features.sinks[size_t(h)]);
        double* o = &ref.o[((size_t(b) * p.seqlen_q + row) * p.heads_q + h) * d];
        double& lse = ref.lse[(size_t(b) * p.heads_q + h) * p.seqlen_q + row];
        if (logits.empty()) {
          lse = -std::numeric_limits<double>::infinity();
          continue;
        }
        const double top = *std::max_element(logits.begin(), logits.end());
        double denominator = 0;
        for (double x : logits) denominator += std::exp(x - top);
        for (size_t i = 0; i < keys.size(); ++i)
          for (int c = 0; c < d; ++c) o[c] += std::exp(logits[i] - top) / denominator * at(v, b, keys[i], h / group, p.heads_kv, p.seqlen_k, c);
        lse = top + std::log(denominator);
      }
  return ref;
}

TEST(Reference, FeaturesMatchADirectEvaluation) {
  std::mt19937_64 rng(testing::test_seed());
  const int windows[] = {-1, -1, 0, 1, 3, 7, 127, 128, 129, 4096};
  const int chunks[] = {0, 0, 1, 2, 5, 16, 5000};
  const double sinks[] = {-1e4, -80.0, -3.0, 0.0, 2.0, 40.0, 1e4};
  int with_empty_rows = 0;
  for (int trial = 0; trial < 250; ++trial) {
    Problem p;
    p.bf16 = rng() % 2;
    p.batch = 1 + int(rng() % 3);
    p.heads_kv = 1 + int(rng() % 2);
    p.heads_q = p.heads_kv * (1 + int(rng() % 3));
    p.head_dim = 8 * (1 + int(rng() % 2));
    p.seqlen_q = 1 + int(rng() % 30);
    p.seqlen_k = int(rng() % 40);
    p.causal = rng() % 2;
    p.scale = rng() % 3 == 0 ? 8.0 : 0.0;  // large logits, where the cap bites
    AttentionFeatures& f = p.features;
    f.window_left = windows[rng() % 10];
    f.window_right = windows[rng() % 10];
    f.chunk = chunks[rng() % 7];
    f.softcap = rng() % 3 == 0 ? 30.0 : rng() % 2 ? 50.0 : 0.0;
    if (rng() % 2)
      for (int h = 0; h < p.heads_q; ++h) f.sinks.push_back(sinks[rng() % 7]);
    const int slopes = rng() % 3 == 0 ? 0 : rng() % 2 ? p.heads_q : p.batch * p.heads_q;
    for (int i = 0; i < slopes; ++i) f.alibi_slopes.push_back(std::ldexp(1.0, -int(rng() % 9)));
    ASSERT_EQ(f.error(p.batch, p.heads_q), "");
    std::vector<uint16_t> q(size_t(p.batch) * p.seqlen_q * p.heads_q * p.head_dim);
    std::vector<uint16_t> k(size_t(p.batch) * p.seqlen_k * p.heads_kv * p.head_dim), v(k.size());
    fill_random(q, p.bf16, rng);
    fill_random(k, p.bf16, rng);
    fill_random(v, p.bf16, rng);
    const Strides qs = contiguous_strides(p.seqlen_q, p.heads_q, p.head_dim), ks = contiguous_strides(p.seqlen_k, p.heads_kv, p.head_dim);
    const Reference got = cpu_reference(p, q.data(), qs, k.data(), ks, v.data(), ks);
    const Reference want = naive_reference(p, q, k, v);
    ASSERT_EQ(got.o.size(), want.o.size());
    for (size_t i = 0; i < want.o.size(); ++i) ASSERT_NEAR(got.o[i], want.o[i], 1e-10) << p.describe() << " element " << i;
    for (size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        ++with_empty_rows;
        ASSERT_EQ(got.lse[i], want.lse[i]) << p.describe() << " row " << i;
      } else {
        ASSERT_NEAR(got.lse[i], want.lse[i], 1e-10 * std::max(1.0, std::fabs(want.lse[i]))) << p.describe() << " row " << i;
      }
    }
  }
  EXPECT_GT(with_empty_rows, 0);  // the draws include rows that see no key
}

// A row that sees no key: O = 0 and LSE -inf, or the sink's logit with a sink; its neighbours still
// see theirs.
TEST(Reference, RowWithNoVisibleKeyWithAndWithoutASink) {
  Problem p;
  p.seqlen_q = 6;
  p.seqlen_k = 4;
  p.head_dim = 8;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.features.chunk = 2;  // rows 0 and 1 sit at p = -2, -1: a chunk below key 0
  std::mt19937_64 rng(7);
  std::vector<uint16_t> q(6 * 2 * 8), k(4 * 8), v(4 * 8);
  fill_random(q, true, rng);
  fill_random(k, true, rng);
  fill_random(v, true, rng);
  const Strides qs = contiguous_strides(6, 2, 8), ks = contiguous_strides(4, 1, 8);
  for (bool with_sinks : {false, true}) {
    p.features.sinks = with_sinks ? std::vector<double>{-1.5, 25.0} : std::vector<double>{};
    const Reference ref = cpu_reference(p, q.data(), qs, k.data(), ks, v.data(), ks);
    for (int h = 0; h < 2; ++h) {
      for (int row = 0; row < 2; ++row) {
        const double lse = ref.lse[size_t(h) * 6 + row];
        if (with_sinks) EXPECT_EQ(lse, p.features.sinks[size_t(h)]);
        else EXPECT_TRUE(std::isinf(lse) && lse < 0);
        for (int c = 0; c < 8; ++c) EXPECT_EQ(ref.o[(size_t(row) * 2 + h) * 8 + c], 0.0);
      }
      for (int row = 2; row < 6; ++row) EXPECT_TRUE(std::isfinite(ref.lse[size_t(h) * 6 + row]));
    }
  }
}

TEST(Reference, FeatureErrorsNameTheField) {
  AttentionFeatures f;
  EXPECT_EQ(f.error(2, 4), "");
  f.window_left = -2;
  EXPECT_EQ(f.error(2, 4).rfind("window_left:", 0), 0u);
  f = {};
  f.chunk = -1;
  EXPECT_EQ(f.error(2, 4).rfind("chunk:", 0), 0u);
  f = {};
  f.softcap = std::numeric_limits<double>::infinity();
  EXPECT_EQ(f.error(2, 4).rfind("softcap:", 0), 0u);
  f = {};
  f.sinks.assign(3, 0.0);
  EXPECT_EQ(f.error(2, 4).rfind("sinks:", 0), 0u);
  f = {};
  f.alibi_slopes.assign(4, 0.5);
  EXPECT_EQ(f.error(2, 4), "");
  f.alibi_slopes.assign(8, 0.5);
  EXPECT_EQ(f.error(2, 4), "");
  f.alibi_slopes.assign(6, 0.5);
  EXPECT_EQ(f.error(2, 4).rfind("alibi_slopes:", 0), 0u);
}

TEST(Reference, RelativeErrorCatchesNaN) {
  EXPECT_TRUE(std::isinf(relative_l2_error({std::nan("")}, {1.0})));
  EXPECT_NEAR(relative_l2_error({1.1}, {1.0}), 0.1, 1e-12);
}

}  // namespace
}  // namespace flashjit

#include "compile/nvrtc_compiler.hpp"

namespace flashjit {
namespace {
TEST(Reference, GpuReferenceKernelCompiles) {
  for (bool bf16 : {false, true}) {
    auto k = compile_with_nvrtc({reference_kernel_source(bf16), default_nvrtc_options(), "reference_attention", "reference"});
    ASSERT_TRUE(k.ok()) << k.error().log;
    EXPECT_GT(k->cubin.size(), 0u);
  }
}
// The GPU reference holds a query row of every head dim a spec takes (to 576 with head_dim_v 512):
// its shared row was 256 doubles, so a 320-wide row wrote past it.
TEST(Reference, GpuReferenceHoldsEveryHeadDimASpecTakes) {
  static_assert(kReferenceMaxHeadDim >= 576 && kReferenceMaxHeadDimV >= 512);  // the spec's largest (MLA 576/512)
  const std::string source = reference_kernel_source(true);
  EXPECT_NE(source.find("#define REF_MAX_HEAD_DIM " + std::to_string(kReferenceMaxHeadDim) + "\n"), std::string::npos);
  EXPECT_NE(source.find("q_row[REF_MAX_HEAD_DIM]"), std::string::npos);
  EXPECT_EQ(source.find("q_row[256]"), std::string::npos);
}
}  // namespace
}  // namespace flashjit

// The timing tool's engine check covers a sample of each long sequence's rows: both ends (where
// the causal mask and the packed sequence ends bite) and rows spread between, each once.
TEST(EngineReferenceRows, CoverBothEndsAndSpreadEvenly) {
  EXPECT_TRUE(flashjit::checked_rows_of(0, 32).empty());
  EXPECT_EQ(flashjit::checked_rows_of(5, 0), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(flashjit::checked_rows_of(5, 32), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(flashjit::checked_rows_of(9, 3), (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(flashjit::checked_rows_of(7, 1), (std::vector<int>{0}));
  for (int rows : {33, 100, 513, 2048, 16384}) {
    for (int limit : {2, 7, 32}) {
      const std::vector<int> got = flashjit::checked_rows_of(rows, limit);
      ASSERT_EQ(int(got.size()), limit) << rows << " " << limit;
      EXPECT_EQ(got.front(), 0);
      EXPECT_EQ(got.back(), rows - 1);
      for (size_t i = 1; i < got.size(); ++i) {
        EXPECT_GT(got[i], got[i - 1]) << rows << " " << limit;
        EXPECT_LE(got[i] - got[i - 1], (rows - 1) / (limit - 1) + 1) << "evenly spread: " << rows << " " << limit;
      }
    }
  }
}
