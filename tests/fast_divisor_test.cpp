// FastDivisor (templates/tile_schedule.cuh, compiled here as host code): the kernel's tile decode
// divides by multiplying; the constants must give n / d exactly for every n below 2^31 (tile
// indices are kept below it) and d from 1 up.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../templates/tile_schedule.cuh"

namespace {

TEST(FastDivisor, QuotientsMatchDivisionBelowTwoToThe31) {
  std::mt19937_64 rng(11);
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 43, 64, 86, 127, 128, 129, 1000, 65535, 65536, 0x40000001, 0x7fffffff};
  for (int i = 0; i < 300; ++i) divisors.push_back(1 + uint32_t(rng() % 0x7fffffff));
  for (int i = 0; i < 300; ++i) divisors.push_back(1 + uint32_t(rng() % 4096));
  for (uint32_t d : divisors) {
    const FastDivisor f = fit_divisor(d);
    std::vector<uint32_t> numerators = {0, 1, d - 1, d, d + 1, 2 * d - 1, 0x7ffffffe, 0x7fffffff};
    for (int i = 0; i < 3000; ++i) numerators.push_back(uint32_t(rng() % 0x80000000u));
    for (uint32_t n : numerators) {
      if (n > 0x7fffffff) continue;
      ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
    }
  }
}

// Every numerator for small divisors (the usual heads and query block counts).
TEST(FastDivisor, ExhaustiveForSmallDivisorsAndNumerators) {
  for (uint32_t d = 1; d <= 300; ++d) {
    const FastDivisor f = fit_divisor(d);
    for (uint32_t n = 0; n < 100000; ++n) ASSERT_EQ(fast_div(n, f), n / d) << n << " / " << d;
  }
}

TEST(FastDivisor, OneIsTheIdentity) {
  EXPECT_EQ(fit_divisor(1).mul, 0u);
  EXPECT_EQ(fast_div(0x7fffffff, fit_divisor(1)), 0x7fffffffu);
}

}  // namespace
