// The GPU tests' learnable sinks and ALiBi slopes (spec keys sinks and alibi), exact in bf16 and
// float32 so that the float64 reference sees what the kernel reads.
#pragma once
#include <cmath>
#include <vector>

namespace flashjit::testing {

// One sink logit per query head: `large` ones taken in turn from `large_values` (a test's logits at
// and above a row's log-sum over its keys), else very negative ones (-96 and -8192: no share at all).
inline std::vector<double> sink_logits(int heads, bool large, const std::vector<double>& large_values) {
  const double small[] = {-96.0, -8192.0};
  std::vector<double> sinks;
  for (int h = 0; h < heads; ++h) sinks.push_back(large ? large_values[size_t(h) % large_values.size()] : small[h % 2]);
  return sinks;
}

// ALiBi slopes: FlashAttention-2's geometric 2^(-8 (h + 1) / heads) rounded to powers of two,
// [heads]; or per sequence, [batch][heads], sequence b's scaled by (b + 1) / 2.
inline std::vector<double> alibi_slopes(int heads, int batch, bool per_batch) {
  std::vector<double> slopes;
  for (int b = 0; b < (per_batch ? batch : 1); ++b)
    for (int h = 0; h < heads; ++h) slopes.push_back(std::ldexp(per_batch ? (b + 1) / 2.0 : 1.0, -8 * (h + 1) / heads));
  return slopes;
}

}  // namespace flashjit::testing
