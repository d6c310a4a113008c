// The score path's rules and the finalize step (templates/score_mod.cuh, compiled here as host
// code) against direct evaluations written out here: softcap 30 and 50 and the kernel's split of
// it (the folded exp2 scale), ALiBi per head and per batch, and the finalize step of random rows
// in float and double with sinks from very negative to large, rows with no visible key, and the
// merge of split partials with the sink counted once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../templates/score_mod.cuh"
#include "support/test_seed.hpp"

namespace flashjit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ScoreMod, SoftcapIsTheCappedTanhBeforeTheSoftmax) {
  for (double cap : {30.0, 50.0}) {
    for (double x : {-1e4, -200.0, -31.0, -1.0, 0.0, 0.5, 29.0, 49.0, 77.0, 1e4}) {
      EXPECT_NEAR(softcap_logit(x, cap), cap * std::tanh(x / cap), 1e-12) << cap << " " << x;
      EXPECT_LE(std::fabs(softcap_logit(x, cap)), cap);
      EXPECT_NEAR(double(softcap_logit(float(x), float(cap))), cap * std::tanh(x / cap), 1e-5 * cap);
    }
  }
  EXPECT_EQ(softcap_logit(123.5, 0.0), 123.5);  // off
}

// The kernel keeps S = kernel_score and folds score_unit x log2(e) into the exp2 step: S x
// exp2_scale is the logit in log2 units, with and without a cap, and ALiBi enters S divided by the
// score unit.
TEST(ScoreMod, KernelSplitFoldsTheScaleIntoTheExp2Step) {
  for (double cap : {0.0, 30.0, 50.0}) {
    for (double scale : {0.125, 1.0 / std::sqrt(144.0), 0.0883883}) {
      for (double dot : {-900.0, -3.0, 0.0, 2.5, 640.0}) {
        const double logit = modified_logit(dot, scale, cap, 0.0, 0, 0);
        EXPECT_NEAR(kernel_score(dot, scale, cap) * exp2_scale(scale, cap), logit * kFjLog2E, 1e-9) << cap << " " << dot;
        const double slope = 0.25;
        const double with_alibi = modified_logit(dot, scale, cap, slope, 100, 37);
        const double s = kernel_score(dot, scale, cap) + alibi_bias(slope, 100, 37) / score_unit(scale, cap);
        EXPECT_NEAR(s * exp2_scale(scale, cap), with_alibi * kFjLog2E, 1e-9) << cap << " " << dot;
      }
    }
  }
}

TEST(ScoreMod, AlibiBiasAndSlopesPerHeadOrPerBatch) {
  EXPECT_EQ(alibi_bias(0.5, 10, 4), -3.0);
  EXPECT_EQ(alibi_bias(0.5, 4, 10), -3.0);  // keys right of the diagonal too: |p - j|
  EXPECT_EQ(alibi_bias(0.5, 7, 7), 0.0);
  EXPECT_EQ(alibi_bias(1.0, -2000000000, 2000000000), -4e9);  // no int overflow
  EXPECT_EQ(alibi_slope_index(3, 5, 0), 5);                    // [heads_q]
  EXPECT_EQ(alibi_slope_index(3, 5, 8), 29);                   // [batch, heads_q]
  EXPECT_NEAR(modified_logit(2.0, 0.5, 0.0, 0.125, 9, 1), 1.0 - 1.0, 1e-15);
}

// A row's running state as the kernel keeps it (a max in log2 units, possibly stale by up to 8,
// the sum and O accumulator relative to it), finalized, against the softmax over the row's logits
// and the sink column evaluated directly.
struct RowCase {
  std::vector<double> logits, values;  // one value column is enough: O is linear in V
};

struct Expected {
  double o, lse;
};

Expected softmax_with_sink_column(const RowCase& row, bool has_sink, double sink) {
  std::vector<double> columns = row.logits;
  if (has_sink) columns.push_back(sink);
  if (columns.empty()) return {0.0, -kInf};
  const double top = *std::max_element(columns.begin(), columns.end());
  if (top == -kInf) return {0.0, -kInf};
  double denominator = 0, numerator = 0;
  for (double x : columns) denominator += std::exp(x - top);
  for (size_t j = 0; j < row.logits.size(); ++j) numerator += std::exp(row.logits[j] - top) * row.values[j];  // the sink has no value
  return {numerator / denominator, top + std::log(denominator)};
}

template <typename T>
Expected finalized(const RowCase& row, bool has_sink, double sink, double staleness) {
  T m2 = fj_minus_infinity<T>();
  for (double x : row.logits) m2 = std::max(m2, T(x * kFjLog2E));
  if (m2 != fj_minus_infinity<T>()) m2 -= T(staleness);
  T l = 0, o = 0;
  for (size_t j = 0; j < row.logits.size(); ++j) {
    const T p = fj_exp2(T(row.logits[j] * kFjLog2E) - m2);
    l += p;
    o += p * T(row.values[j]);
  }
  const RowNormaliser<T> fin = finalize_row(m2, l, has_sink, T(sink));
  return {double(o * fin.o_scale), double(fin.lse)};
}

RowCase random_row(std::mt19937_64& rng, int keys) {
  std::normal_distribution<double> normal(0.0, 1.0);
  RowCase row;
  const double spread = rng() % 2 ? 1.0 : 12.0;
  for (int j = 0; j < keys; ++j) {
    row.logits.push_back(spread * normal(rng));
    row.values.push_back(normal(rng));
  }
  return row;
}

const double kSinks[] = {-kInf, -1e30, -1e4, -80.0, -5.0, 0.0, 0.7, 3.0, 40.0, 1e4, 1e30};

void expect_close(const Expected& got, const Expected& want, double tolerance, const std::string& where) {
  EXPECT_NEAR(got.o, want.o, tolerance * (1 + std::fabs(want.o))) << where;
  if (std::isinf(want.lse)) EXPECT_EQ(got.lse, want.lse) << where;
  else EXPECT_NEAR(got.lse, want.lse, tolerance * std::max(1.0, std::fabs(want.lse))) << where;
}

TEST(ScoreMod, FinalizeMatchesTheSoftmaxWithTheSinkColumn) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const RowCase row = random_row(rng, 1 + int(rng() % 200));
    for (double sink : kSinks) {
      for (bool has_sink : {false, true}) {
        const Expected want = softmax_with_sink_column(row, has_sink, sink);
        const std::string where = "trial " + std::to_string(trial) + " sink " + std::to_string(sink) + (has_sink ? "" : " (off)");
        for (double staleness : {0.0, 7.5}) {
          expect_close(finalized<double>(row, has_sink, sink, staleness), want, 1e-12, where);
          expect_close(finalized<float>(row, has_sink, sink, staleness), want, 2e-5, where + " float");
        }
      }
    }
  }
}

// A row that sees no key: O = 0 and LSE -inf; with a sink, O = 0 and LSE the sink's logit.
TEST(ScoreMod, RowWithNoVisibleKey) {
  for (double sink : {-80.0, 0.0, 3.5, 1e4}) {
    const RowNormaliser<double> with_sink = finalize_row(-kInf, 0.0, true, sink);
    EXPECT_EQ(with_sink.o_scale, 0.0);
    EXPECT_EQ(with_sink.lse, sink);
    const RowNormaliser<float> in_float = finalize_row(-std::numeric_limits<float>::infinity(), 0.f, true, float(sink));
    EXPECT_EQ(in_float.o_scale, 0.f);
    EXPECT_EQ(in_float.lse, float(sink));
  }
  const RowNormaliser<double> none = finalize_row(-kInf, 0.0, false, 0.0);
  EXPECT_EQ(none.o_scale, 0.0);
  EXPECT_EQ(none.lse, -kInf);
  EXPECT_EQ(finalize_row(-kInf, std::nan(""), false, 0.0).o_scale, 0.0);  // an all -inf row's 0 x inf
}

// Split-KV: the keys cut into splits (some empty), each split's partial normalised by its own sum
// with its LSE without the sink, merged as split_merge.cuh does with the sink counted once in
// finalize_merge: the unsplit row's O and LSE.
TEST(ScoreMod, MergeOfSplitPartialsCountsTheSinkOnce) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    const int keys = int(rng() % 300);
    const RowCase row = random_row(rng, keys);
    const int splits = 1 + int(rng() % 9);
    std::vector<int> cut = {0, keys};
    for (int s = 1; s < splits; ++s) cut.push_back(int(rng() % (keys + 1)));
    std::sort(cut.begin(), cut.end());
    std::vector<double> o_part, lse_part;
    for (size_t s = 0; s + 1 < cut.size(); ++s) {
      RowCase part;
      part.logits.assign(row.logits.begin() + cut[s], row.logits.begin() + cut[s + 1]);
      part.values.assign(row.values.begin() + cut[s], row.values.begin() + cut[s + 1]);
      const Expected e = finalized<double>(part, false, 0.0, 0.0);
      o_part.push_back(e.o);
      lse_part.push_back(e.lse);
    }
    for (double sink : kSinks) {
      for (bool has_sink : {false, true}) {
        const double top = *std::max_element(lse_part.begin(), lse_part.end());
        double sum = 0;
        for (double lse : lse_part) sum += top == -kInf ? 0.0 : std::exp(lse - top);
        const RowNormaliser<double> fin = finalize_merge(top, sum, has_sink, sink);
        double o = 0;
        for (size_t s = 0; s < o_part.size(); ++s) o += (top == -kInf ? 0.0 : std::exp(lse_part[s] - top)) * fin.o_scale * o_part[s];
        const std::string where = "trial " + std::to_string(trial) + " keys " + std::to_string(keys) + " splits " +
                                  std::to_string(o_part.size()) + " sink " + std::to_string(sink) + (has_sink ? "" : " (off)");
        expect_close({o, fin.lse}, softmax_with_sink_column(row, has_sink, sink), 1e-11, where);
      }
    }
  }
}

}  // namespace
}  // namespace flashjit
