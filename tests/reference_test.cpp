// The CPU reference is the definition the kernels are judged by: check it against cases whose
// answer is known in closed form.
#include <cmath>

#include <gtest/gtest.h>

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
