// The general mask rule (templates/visibility.cuh's MaskRule: sliding windows, attention chunks,
// causal), its block ranges, key splits and block walks, compiled here as host code, against a
// brute-force definition written out below without the header's helpers: random rules over random
// lengths and ragged batches, packed heads and splits; and, with the window and chunk off, the
// general functions against the causal ones the kernel calls today, exhaustively over small shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../templates/visibility.cuh"
#include "support/test_seed.hpp"

namespace flashjit {
namespace {

int64_t floor_div_by_definition(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

// The definition: bottom-right aligned positions, the window's inclusive bounds (-1 unbounded),
// causal as a right bound of 0, the chunk by floor division.
bool visible_by_definition(const MaskRule& rule, int row, int key, int seqlen_q, int seqlen_k) {
  if (key < 0 || key >= seqlen_k) return false;
  const int64_t p = int64_t(row) + seqlen_k - seqlen_q;
  const int64_t right = rule.causal ? 0 : rule.window_right;
  if (right >= 0 && key > p + right) return false;
  if (rule.window_left >= 0 && key < p - rule.window_left) return false;
  if (rule.chunk > 0 && floor_div_by_definition(key, rule.chunk) != floor_div_by_definition(p, rule.chunk)) return false;
  return true;
}

int window_size(std::mt19937_64& rng) {
  const int sizes[] = {-1, -1, 0, 1, 2, 5, 127, 128, 129, 4096};
  return rng() % 4 == 0 ? int(rng() % 300) : sizes[rng() % 10];
}

int chunk_size(std::mt19937_64& rng) {
  const int sizes[] = {0, 0, 0, 1, 2, 3, 7, 64, 128, 129, 5000};
  return rng() % 4 == 0 ? 1 + int(rng() % 300) : sizes[rng() % 11];
}

MaskRule random_rule(std::mt19937_64& rng) {
  MaskRule rule{rng() % 2 == 0, window_size(rng), window_size(rng), chunk_size(rng)};
  switch (rng() % 5) {  // left only, right only, none (chunk or causal alone), both: all drawn
    case 0: rule.window_right = -1; break;
    case 1: rule.window_left = -1; break;
    case 2: rule.window_left = rule.window_right = -1; break;
    default: break;
  }
  return rule;
}

// Lengths around block multiples, zero and one included; queries longer and shorter than keys.
int random_length(std::mt19937_64& rng) {
  const int pick = rng() % 6;
  if (pick == 0) return int(rng() % 2);
  if (pick == 1) return int(64 * (1 + rng() % 6) + int(rng() % 3) - 1);
  return int(rng() % 450);
}

std::string describe(const MaskRule& rule) {
  return std::string(rule.causal ? "causal" : "non-causal") + " window " + std::to_string(rule.window_left) + "," +
         std::to_string(rule.window_right) + " chunk " + std::to_string(rule.chunk);
}

TEST(MaskRule, KeysAgreeWithTheDefinitionOverRandomRulesAndLengths) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 500; ++trial) {
    const MaskRule rule = random_rule(rng);
    const int seqlen_q = random_length(rng), seqlen_k = random_length(rng);
    for (int row = 0; row < seqlen_q; ++row) {
      int count = 0, lowest = -1, highest = -1;
      for (int key = -1; key <= seqlen_k; ++key) {
        const bool v = visible_by_definition(rule, row, key, seqlen_q, seqlen_k);
        ASSERT_EQ(key_visible(rule, row, key, seqlen_q, seqlen_k), v)
            << describe(rule) << " sq " << seqlen_q << " sk " << seqlen_k << " row " << row << " key " << key;
        if (v) {
          if (count == 0) lowest = key;
          highest = key;
          ++count;
        }
      }
      // The visible keys are one run from the first to the last visible key.
      const int first = first_visible_key(rule, row, seqlen_q, seqlen_k), last = last_visible_key(rule, row, seqlen_q, seqlen_k);
      ASSERT_EQ(visible_key_count(rule, row, seqlen_q, seqlen_k), count) << describe(rule) << " row " << row;
      if (count > 0) {
        ASSERT_EQ(highest - lowest + 1, count) << "not one run: " << describe(rule) << " row " << row;
        ASSERT_EQ(first, lowest) << describe(rule) << " sq " << seqlen_q << " sk " << seqlen_k << " row " << row;
        ASSERT_EQ(last, highest) << describe(rule) << " sq " << seqlen_q << " sk " << seqlen_k << " row " << row;
      } else {
        ASSERT_LT(last, first) << describe(rule) << " row " << row;
      }
    }
  }
}

// The edges the issue names, each against the definition at lengths where they bite: a row at p < 0
// (more queries than keys) sees nothing under causal or a chunk; a window of 0 is the diagonal; a
// window of 4096 over 9000 keys; the chunk boundary.
TEST(MaskRule, NamedEdges) {
  const MaskRule causal = causal_only_rule(true);
  EXPECT_EQ(visible_key_count(causal, 0, 10, 4), 0);  // p = -6
  EXPECT_EQ(visible_key_count(MaskRule{false, -1, -1, 4}, 0, 10, 4), 0);  // chunk of p = -6 is -2: keys -8..-5
  EXPECT_EQ(visible_key_count(MaskRule{false, -1, -1, 4}, 6, 10, 4), 4);  // p = 0: chunk 0
  EXPECT_EQ(visible_key_count(MaskRule{false, -1, 2, 0}, 0, 10, 4), 0);   // p + 2 = -4
  EXPECT_EQ(visible_key_count(MaskRule{false, -1, 6, 0}, 0, 10, 4), 1);   // p + 6 = 0: key 0
  EXPECT_EQ(visible_key_count(MaskRule{false, 0, 0, 0}, 5, 9, 9), 1);     // the diagonal
  EXPECT_EQ(first_visible_key(MaskRule{true, 4096, -1, 0}, 8999, 9000, 9000), 8999 - 4096);
  EXPECT_EQ(visible_key_count(MaskRule{true, 4096, -1, 0}, 8999, 9000, 9000), 4097);
  EXPECT_EQ(first_visible_key(MaskRule{true, -1, -1, 128}, 300, 1000, 1000), 256);
  EXPECT_EQ(last_visible_key(MaskRule{false, -1, -1, 128}, 300, 1000, 1000), 383);
  // Windows larger than the lengths allow (no p + window overflow).
  EXPECT_EQ(visible_key_count(MaskRule{false, 2147483647, 2147483647, 0}, 3, 5, 7), 7);
  EXPECT_EQ(visible_key_count(MaskRule{false, -1, -1, 2147483647}, 3, 5, 7), 7);
}

// With the window and chunk off, every general function is its causal namesake, exactly: the rule,
// the block ranges (padding and cluster blocks past the queries included), the key splits.
TEST(MaskRule, WindowAndChunkOffReduceToTheCausalFunctionsExhaustively) {
  for (bool causal : {false, true}) {
    const MaskRule rule = causal_only_rule(causal);
    for (int seqlen_q = 0; seqlen_q <= 24; ++seqlen_q) {
      for (int seqlen_k = 0; seqlen_k <= 24; ++seqlen_k) {
        for (int row = 0; row < seqlen_q + 8; ++row) {
          ASSERT_EQ(last_visible_key(rule, row, seqlen_q, seqlen_k), last_visible_key(causal, row, seqlen_q, seqlen_k));
          ASSERT_EQ(first_visible_key(rule, row, seqlen_q, seqlen_k), 0);
          ASSERT_EQ(visible_key_count(rule, row, seqlen_q, seqlen_k), visible_key_count(causal, row, seqlen_q, seqlen_k));
          for (int key = -2; key <= seqlen_k + 1; ++key)
            ASSERT_EQ(key_visible(rule, row, key, seqlen_q, seqlen_k), key_visible(causal, row, key, seqlen_q, seqlen_k));
        }
        for (int block_m : {1, 2, 3, 4, 8, 64}) {
          for (int block_n : {1, 2, 3, 5, 8, 16}) {
            const int m_blocks = (seqlen_q + block_m - 1) / block_m + 2;
            for (int m = 0; m < m_blocks; ++m) {
              const BlockRange old = kv_block_range(causal, m, block_m, block_n, seqlen_q, seqlen_k);
              const MaskBlockRange r = mask_block_range(rule, m, block_m, block_n, seqlen_q, seqlen_k);
              ASSERT_EQ(r.n_min, old.n_min) << seqlen_q << " " << seqlen_k << " " << block_m << " " << block_n << " " << m;
              ASSERT_EQ(r.n_max, old.n_max) << seqlen_q << " " << seqlen_k << " " << block_m << " " << block_n << " " << m;
              ASSERT_EQ(r.n_masked_right, old.n_masked) << seqlen_q << " " << seqlen_k << " " << block_m << " " << block_n << " " << m;
              ASSERT_EQ(r.n_masked_left, 0) << seqlen_q << " " << seqlen_k << " " << block_m << " " << block_n << " " << m;
              for (int num_splits = 1; num_splits <= 5; ++num_splits) {
                for (int split_blocks = 0; split_blocks <= 3; ++split_blocks) {
                  const KeySplit ks = key_split(seqlen_k, block_n, num_splits, split_blocks);
                  const VisibleKeySplit vs = visible_key_split(rule, seqlen_q, seqlen_k, block_n, num_splits, split_blocks);
                  ASSERT_EQ(vs.n_begin, 0);
                  ASSERT_EQ(vs.blocks_per_split, ks.blocks_per_split);
                  ASSERT_EQ(vs.splits, ks.splits);
                  for (int split = 0; split <= ks.splits; ++split) {
                    const BlockRange o = split_block_range(old, ks, split);
                    const MaskBlockRange s = split_block_range(r, vs, split);
                    ASSERT_EQ(s.n_min, o.n_min);
                    ASSERT_EQ(s.n_max, o.n_max);
                    ASSERT_EQ(s.n_masked_right, o.n_masked);
                    ASSERT_EQ(s.n_masked_left, 0);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// One tile's walk against brute force over the tile's rows: packed row r of the tile is query
// m_block x tokens + (r >> pack_shift); the rows are the queries inside the sequence (all of them
// for a tile past the sequence's queries). A visited block is one some row sees a key of; a block
// is walked unmasked exactly when every row sees every key of it; the walk visits n_max - 1 down.
void expect_tile_walk_is_exact(const MaskRule& rule, int m_block, int tile_rows, int pack_shift, int block_n, int seqlen_q,
                               int seqlen_k) {
  const int tokens = tile_rows >> pack_shift;
  const MaskBlockRange r = mask_block_range(rule, m_block, tokens, block_n, seqlen_q, seqlen_k);
  const std::string where = describe(rule) + " sq " + std::to_string(seqlen_q) + " sk " + std::to_string(seqlen_k) + " m_block " +
                            std::to_string(m_block) + " tokens " + std::to_string(tokens) + " block_n " + std::to_string(block_n);
  ASSERT_GE(r.n_min, 0) << where;
  ASSERT_LE(r.n_min, r.n_max) << where;
  ASSERT_GE(r.n_masked_left, 0) << where;
  ASSERT_GE(r.n_masked_right, 0) << where;
  ASSERT_LE(r.n_masked_left + r.n_masked_right, r.count()) << where;
  const bool has_rows = m_block * tokens < seqlen_q;
  const int n_all = (seqlen_k + block_n - 1) / block_n;
  for (int n = 0; n <= n_all; ++n) {
    bool any = false, whole = true;
    for (int tile_row = 0; tile_row < tile_rows; ++tile_row) {
      const int query = m_block * tokens + (tile_row >> pack_shift);
      if (has_rows && query >= seqlen_q) continue;
      for (int key = n * block_n; key < (n + 1) * block_n; ++key) {
        const bool v = visible_by_definition(rule, query, key, seqlen_q, seqlen_k);
        any |= v;
        whole &= v;
      }
    }
    const bool visited = n >= r.n_min && n < r.n_max;
    ASSERT_EQ(visited, any) << where << " block " << n;
    if (visited) ASSERT_EQ(!r.needs_mask(n), whole) << where << " block " << n;
  }
  // The walk: right to left, masked steps at both ends exactly where the range has them; a block
  // list walked the same way gives the same steps.
  const BlockWalk walk = block_walk(r);
  ASSERT_EQ(walk.steps, r.count()) << where;
  std::vector<int> list;
  for (int i = 0; i < walk.steps; ++i) {
    ASSERT_EQ(walk.block(i), r.n_max - 1 - i) << where;
    ASSERT_EQ(walk.needs_mask(i), r.needs_mask(walk.block(i))) << where << " step " << i;
    list.push_back(walk.block(i));
  }
  const BlockListWalk listed{list.data(), int(list.size()), walk.unmasked_begin, walk.unmasked_end};
  for (int i = 0; i < listed.steps; ++i) {
    ASSERT_EQ(listed.block(i), walk.block(i));
    ASSERT_EQ(listed.needs_mask(i), walk.needs_mask(i));
  }
}

TEST(MaskRule, TileRangesAndWalksAreExactOnRandomRulesWithPackedHeads) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 700; ++trial) {
    const MaskRule rule = random_rule(rng);
    const int tile_rows = 64 * (1 + int(rng() % 3)), block_n = 16 * (1 + int(rng() % 16));
    const int pack_shift = rng() % 2 ? 0 : int(rng() % 4);  // 1, 2, 4 or 8 heads a tile
    const int seqlen_q = std::max(1, random_length(rng) >> (rng() % 2 ? 0 : 4)), seqlen_k = random_length(rng);
    const int tokens = tile_rows >> pack_shift;
    const int m_blocks = (seqlen_q + tokens - 1) / tokens + 1;  // and a padding block past the queries
    for (int m = 0; m < m_blocks; ++m) expect_tile_walk_is_exact(rule, m, tile_rows, pack_shift, block_n, seqlen_q, seqlen_k);
  }
}

// A ragged batch as the kernel walks it with key splits: the grid covers the longest sequence's
// query blocks for every sequence and every split of the launch's count; a tile past its
// sequence's queries or splits is skipped, the others walk their split's part of their range.
// Every visible (row, key) pair of every sequence is computed exactly once, the splits cut the
// tile's range into disjoint parts, and each split holds some block a row of the sequence sees.
TEST(MaskRule, RaggedBatchesWithSplitsCoverEveryVisiblePairOnce) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 150; ++trial) {
    const MaskRule rule = random_rule(rng);
    const int tile_rows = 64 * (1 + int(rng() % 3)), block_n = 16 * (1 + int(rng() % 8)), batch = 1 + int(rng() % 6);
    const int pack_shift = int(rng() % 3), tokens = tile_rows >> pack_shift;
    const int num_splits = 1 + int(rng() % 6), split_blocks = rng() % 3 == 0 ? 1 + int(rng() % 4) : 0;
    std::vector<int> seqlen_q(batch), seqlen_k(batch);
    int max_q = 1;
    for (int b = 0; b < batch; ++b) {
      const int kind = rng() % 4;  // empty, decode, short, long
      seqlen_q[b] = kind == 0 ? 0 : kind == 1 ? 1 : int(rng() % (kind == 2 ? 70 : 300));
      seqlen_k[b] = std::max(0, rng() % 5 == 0 ? 0 : seqlen_q[b] + int(rng() % 400) - (rng() % 3 == 0 ? 60 : 0));
      max_q = std::max(max_q, seqlen_q[b]);
    }
    const int m_blocks = (max_q + tokens - 1) / tokens;
    for (int b = 0; b < batch; ++b) {
      const int sq = seqlen_q[b], sk = seqlen_k[b];
      const std::string where = describe(rule) + " sequence " + std::to_string(b) + " sq " + std::to_string(sq) + " sk " +
                                std::to_string(sk) + " tokens " + std::to_string(tokens) + " block_n " + std::to_string(block_n);
      const VisibleKeySplit ks = visible_key_split(rule, sq, sk, block_n, num_splits, split_blocks);
      ASSERT_GE(ks.splits, 1) << where;
      ASSERT_LE(ks.splits, num_splits) << where;
      // The blocks some row of the sequence sees, [seen_lo, seen_hi).
      int seen_lo = 1 << 30, seen_hi = 0;
      for (int row = 0; row < sq; ++row)
        for (int key = 0; key < sk; ++key)
          if (visible_by_definition(rule, row, key, sq, sk)) {
            seen_lo = std::min(seen_lo, key / block_n);
            seen_hi = std::max(seen_hi, key / block_n + 1);
          }
      // Fixed split sizes must hold the sequence's keys (the launch's contract: seqlen_k <= max_splits x split_keys).
      if (split_blocks > 0 && (sk + block_n - 1) / block_n > num_splits * split_blocks) continue;
      if (seen_hi > 0) {
        ASSERT_EQ(ks.n_begin, seen_lo) << where;
        for (int split = 0; split < ks.splits; ++split) {
          const int lo = ks.n_begin + split * ks.blocks_per_split;
          ASSERT_LT(lo, seen_hi) << where << ": split " << split << " holds no block any row sees";
        }
        ASSERT_GE(ks.n_begin + ks.splits * ks.blocks_per_split, seen_hi) << where << ": the splits miss the last blocks";
      }
      std::vector<int> computed(size_t(std::max(1, sq)) * std::max(1, sk), 0);
      for (int m = 0; m < m_blocks; ++m) {
        if (!query_block_has_rows(m, tokens, sq)) continue;
        const MaskBlockRange r = mask_block_range(rule, m, tokens, block_n, sq, sk);
        std::vector<int> walked(size_t(r.n_max) + 1, 0);
        for (int split = 0; split < num_splits; ++split) {
          if (split >= ks.splits) continue;
          const MaskBlockRange s = split_block_range(r, ks, split);
          ASSERT_LE(s.n_masked_left + s.n_masked_right, s.count()) << where;
          const BlockWalk walk = block_walk(s);
          for (int i = 0; i < walk.steps; ++i) {
            const int n = walk.block(i);
            ASSERT_GE(n, r.n_min) << where;
            ASSERT_LT(n, r.n_max) << where;
            ++walked[size_t(n)];
            ASSERT_EQ(walk.needs_mask(i), r.needs_mask(n)) << where << " split " << split << " block " << n;
            for (int tile_row = 0; tile_row < tile_rows; ++tile_row) {
              const int row = m * tokens + (tile_row >> pack_shift);
              if (row >= sq || (tile_row & ((1 << pack_shift) - 1)) != 0) continue;  // one head of the packed ones
              for (int key = n * block_n; key < std::min(sk, (n + 1) * block_n); ++key) {
                const bool v = walk.needs_mask(i) ? key_visible(rule, row, key, sq, sk) : true;
                if (!walk.needs_mask(i)) ASSERT_TRUE(visible_by_definition(rule, row, key, sq, sk)) << where << " unmasked block " << n;
                if (v) ++computed[size_t(row) * sk + key];
              }
            }
          }
        }
        for (int n = r.n_min; n < r.n_max; ++n) ASSERT_EQ(walked[size_t(n)], 1) << where << ": block " << n << " of query block " << m;
      }
      for (int row = 0; row < sq; ++row)
        for (int key = 0; key < sk; ++key)
          ASSERT_EQ(computed[size_t(row) * sk + key], visible_by_definition(rule, row, key, sq, sk) ? 1 : 0)
              << where << " row " << row << " key " << key;
    }
  }
}

// Cost follows the visible keys: a decode step (and a short speculative one) with a window of w
// keys visits and splits about w keys at any length, and a long prefill's tiles about w + block_m.
TEST(MaskRule, WindowCostDoesNotGrowWithTheSequence) {
  const int block_n = 128;
  for (int window : {127, 1024, 4095}) {
    const MaskRule rule{true, window, 0, 0};
    const int most_blocks = (window + 1 + block_n - 1) / block_n + 1;
    for (int seqlen_k : {window + 1, 9000, 32768, 1 << 20, (1 << 30) + 5}) {
      for (int seqlen_q : {1, 4}) {
        const MaskBlockRange r = mask_block_range(rule, 0, 64, block_n, seqlen_q, seqlen_k);
        EXPECT_LE(r.count(), most_blocks + 1) << window << " " << seqlen_k;
        const VisibleKeySplit ks = visible_key_split(rule, seqlen_q, seqlen_k, block_n, 64, 0);
        EXPECT_LE(ks.splits * ks.blocks_per_split, most_blocks + 1) << window << " " << seqlen_k;
        EXPECT_EQ(ks.n_begin, first_visible_key(rule, 0, seqlen_q, seqlen_k) / block_n);
      }
      if (seqlen_k > 40000) continue;
      for (int m = 0; m * 128 < seqlen_k; m += 7) {
        const MaskBlockRange r = mask_block_range(rule, m, 128, block_n, seqlen_k, seqlen_k);
        EXPECT_LE(r.count(), (window + 128 + block_n - 1) / block_n + 2) << window << " m_block " << m;
      }
    }
  }
}

}  // namespace
}  // namespace flashjit
