// Division by a launch constant as a multiply-high and a shift (CUTLASS's FastDivmod): the host
// fits the two constants once per parameter build, and the kernel's tile decode, which runs at
// every tile boundary, costs a few instructions instead of a division's twenty-odd
// (bench/NOTES.md, version 39). The kernel's side is fast_div in templates/attention_fwd.cuh.
#pragma once
#include <array>
#include <bit>
#include <cstdint>

namespace flashjit {

// {multiplier, shift} for n / d with 0 <= n < 2^31 and 1 <= d < 2^31; multiplier 0 means d = 1.
using FastDivisor = std::array<uint32_t, 2>;

inline FastDivisor fit_fast_divisor(uint32_t d) {
  if (d <= 1) return {0, 0};
  const uint32_t log2 = uint32_t(std::bit_width(d - 1));  // ceil(log2(d))
  const uint64_t multiplier = ((uint64_t(1) << (31 + log2)) + d - 1) / d;  // < 2^32 since 2^log2 < 2d
  return {uint32_t(multiplier), log2 - 1};
}

// What the kernel computes: umulhi(n, multiplier) >> shift.
inline uint32_t fast_div(uint32_t n, const FastDivisor& f) {
  return f[0] ? uint32_t((uint64_t(n) * f[0]) >> 32) >> f[1] : n;
}

}  // namespace flashjit
