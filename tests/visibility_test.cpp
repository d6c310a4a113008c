// The visibility rule and the block ranges (templates/visibility.cuh, compiled here as host code:
// the kernels, the reference and the tile deal's cost model all use this header), checked
// against the definition on random shapes, random ragged batches and random page tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../templates/tile_schedule.cuh"
#include "../templates/visibility.cuh"
#include "launch/attention_args.hpp"

namespace flashjit {
namespace {

// The definition, written out without the header's helpers.
bool visible_by_definition(bool causal, int row, int key, int seqlen_q, int seqlen_k) {
  if (key < 0 || key >= seqlen_k) return false;
  return !causal || int64_t(key) <= int64_t(row) + seqlen_k - seqlen_q;
}

struct Shape {
  bool causal;
  int block_m, block_n, seqlen_q, seqlen_k;
};

Shape random_shape(std::mt19937& rng) {
  const int block_ms[] = {64, 128, 192};
  Shape s;
  s.causal = rng() % 2;
  s.block_m = block_ms[rng() % 3];
  s.block_n = 16 * (1 + rng() % 16);
  // Lengths around tile multiples, zero and one included; queries longer and shorter than keys.
  auto length = [&] {
    const int pick = rng() % 6;
    if (pick == 0) return int(rng() % 2);
    if (pick == 1) return int(64 * (1 + rng() % 8) + int(rng() % 3) - 1);
    return int(rng() % 700);
  };
  s.seqlen_q = std::max(1, length());
  s.seqlen_k = length();
  return s;
}

TEST(Visibility, KeyCountsAgreeWithTheDefinition) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 2000; ++trial) {
    const Shape s = random_shape(rng);
    for (int row = 0; row < s.seqlen_q; ++row) {
      int count = 0;
      for (int key = -1; key <= s.seqlen_k; ++key) {
        const bool v = visible_by_definition(s.causal, row, key, s.seqlen_q, s.seqlen_k);
        ASSERT_EQ(key_visible(s.causal, row, key, s.seqlen_q, s.seqlen_k), v) << row << " " << key;
        count += v;
      }
      // Visible keys are a prefix: 0 .. count - 1.
      ASSERT_EQ(visible_key_count(s.causal, row, s.seqlen_q, s.seqlen_k), count);
      if (count > 0) ASSERT_TRUE(visible_by_definition(s.causal, row, count - 1, s.seqlen_q, s.seqlen_k));
    }
  }
}

// Every block a query block's real rows need is visited; no visited block is invisible to all of
// them but the cluster or padding rows'; a block the kernel runs unmasked is whole for every row.
void expect_range_is_tight(const Shape& s, int m_block) {
  const BlockRange r = kv_block_range(s.causal, m_block, s.block_m, s.block_n, s.seqlen_q, s.seqlen_k);
  ASSERT_GE(r.n_min, 0);
  ASSERT_LE(r.n_min, r.n_max);
  ASSERT_GE(r.n_masked, 0);
  ASSERT_LE(r.n_masked, r.count());
  const int first_row = m_block * s.block_m, last_row = first_row + s.block_m - 1;  // padding rows included
  const int n_all = (s.seqlen_k + s.block_n - 1) / s.block_n;
  for (int n = 0; n < n_all + 1; ++n) {
    bool any = false, whole = true;
    for (int row = first_row; row <= last_row; ++row) {
      for (int key = n * s.block_n; key < (n + 1) * s.block_n; ++key) {
        const bool v = visible_by_definition(s.causal, row, key, s.seqlen_q, s.seqlen_k);
        any |= v;
        whole &= v;
      }
    }
    const bool visited = n >= r.n_min && n < r.n_max;
    ASSERT_EQ(visited, any) << "block " << n << " of m_block " << m_block;
    const bool unmasked = visited && n < r.n_max - r.n_masked;
    if (unmasked) ASSERT_TRUE(whole) << "block " << n << " runs unmasked but hides keys from some row";
    // The masked steps are the first ones (the right edge); only a block that is whole may skip the mask.
    if (visited && !whole) ASSERT_GE(n, r.n_max - r.n_masked) << "block " << n;
  }
}

TEST(Visibility, BlockRangesAreTightOnRandomShapes) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 600; ++trial) {
    const Shape s = random_shape(rng);
    const int m_blocks = (s.seqlen_q + s.block_m - 1) / s.block_m;
    for (int m = 0; m < m_blocks; ++m) expect_range_is_tight(s, m);
  }
}

// A ragged batch as the kernel walks it: the grid covers the longest sequence's query blocks for
// every sequence, a tile past its sequence's queries is skipped, the rest visit their block
// range. Every visible (row, key) pair of every sequence is computed exactly once.
TEST(Visibility, RaggedBatchesCoverEveryVisiblePairOnce) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const bool causal = rng() % 2;
    const int block_m = 64 * (1 + rng() % 3), block_n = 16 * (1 + rng() % 8), batch = 1 + rng() % 9;
    std::vector<int> seqlen_q(batch), seqlen_k(batch);
    int max_q = 1;
    for (int b = 0; b < batch; ++b) {
      const int kind = rng() % 4;  // empty, decode, short, long
      seqlen_q[b] = kind == 0 ? 0 : kind == 1 ? 1 : int(rng() % (kind == 2 ? 70 : 400));
      seqlen_k[b] = rng() % 5 == 0 ? 0 : seqlen_q[b] + int(rng() % 300) - (rng() % 3 == 0 ? 40 : 0);
      seqlen_k[b] = std::max(0, seqlen_k[b]);
      max_q = std::max(max_q, seqlen_q[b]);
    }
    const int m_blocks = (max_q + block_m - 1) / block_m;
    for (int b = 0; b < batch; ++b) {
      std::vector<int> computed(size_t(std::max(1, seqlen_q[b])) * std::max(1, seqlen_k[b]), 0);
      for (int m = 0; m < m_blocks; ++m) {
        if (!query_block_has_rows(m, block_m, seqlen_q[b])) {
          ASSERT_GE(m * block_m, seqlen_q[b]);
          continue;
        }
        const BlockRange r = kv_block_range(causal, m, block_m, block_n, seqlen_q[b], seqlen_k[b]);
        for (int n = r.n_min; n < r.n_max; ++n)
          for (int row = m * block_m; row < std::min(seqlen_q[b], (m + 1) * block_m); ++row)
            for (int key = n * block_n; key < std::min(seqlen_k[b], (n + 1) * block_n); ++key)
              if (key_visible(causal, row, key, seqlen_q[b], seqlen_k[b])) ++computed[size_t(row) * seqlen_k[b] + key];
      }
      for (int row = 0; row < seqlen_q[b]; ++row)
        for (int key = 0; key < seqlen_k[b]; ++key)
          ASSERT_EQ(computed[size_t(row) * seqlen_k[b] + key], visible_by_definition(causal, row, key, seqlen_q[b], seqlen_k[b]) ? 1 : 0)
              << "sequence " << b << " row " << row << " key " << key;
    }
  }
}

// Packed O as the kernel stores it: per tile, each warpgroup's 64 rows as one TMA box over the packed
// rows where rows_inside_sequence allows, else by threads up to the sequence's end. Every packed row of
// a random ragged batch is written exactly once, by its own sequence, and every warpgroup whose rows
// all lie in its sequence takes the box (fails with a rule that lets a box cross a sequence's end, and
// with one that never takes the box).
TEST(Visibility, PackedOutputRowsWrittenOnceByTheirOwnSequence) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int block_m = 64 * (1 + rng() % 3), batch = 1 + rng() % 9;
    std::vector<int> seqlen_q(batch), q_row0(batch + 1, 0);
    int max_q = 1;
    for (int b = 0; b < batch; ++b) {
      const int kind = rng() % 4;  // empty, one row, short, long
      seqlen_q[b] = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? int(rng() % 130) : 64 * int(rng() % 6) + int(rng() % 3);
      q_row0[b + 1] = q_row0[b] + seqlen_q[b];
      max_q = std::max(max_q, seqlen_q[b]);
    }
    const int total_q = q_row0[batch];
    std::vector<int> writer(size_t(total_q) + 64, -1), writes(size_t(total_q) + 64, 0);  // + 64: a box past the end
    for (int b = 0; b < batch; ++b) {
      int boxes = 0;
      for (int m = 0; m * block_m < max_q; ++m) {
        if (!query_block_has_rows(m, block_m, seqlen_q[b])) continue;
        for (int first = m * block_m; first < (m + 1) * block_m; first += 64) {
          const bool box = rows_inside_sequence(first, 64, seqlen_q[b]);
          boxes += box;
          const int end = box ? first + 64 : std::min(first + 64, seqlen_q[b]);
          for (int row = first; row < end; ++row) {
            writer[size_t(q_row0[b] + row)] = b;
            ++writes[size_t(q_row0[b] + row)];
          }
        }
      }
      EXPECT_EQ(boxes, seqlen_q[b] / 64) << "sequence " << b;  // every whole 64-row run by TMA
    }
    for (int b = 0; b < batch; ++b)
      for (int row = 0; row < seqlen_q[b]; ++row) {
        ASSERT_EQ(writes[size_t(q_row0[b] + row)], 1) << "trial " << trial << " sequence " << b << " row " << row;
        ASSERT_EQ(writer[size_t(q_row0[b] + row)], b) << "trial " << trial << " sequence " << b << " row " << row;
      }
    for (size_t row = size_t(total_q); row < writes.size(); ++row) ASSERT_EQ(writes[row], 0) << "past total_q";
  }
}

// Paged K/V: the loads of a block (kv_rows_per_load rows each, from multiples of it) stay inside
// one page, and resolve every key of a random page table to its page and row.
TEST(Visibility, PagedLoadsStayInOnePageAndFindEveryKey) {
  std::mt19937 rng(4);
  for (int page_size = 1; page_size <= 300; ++page_size) {
    for (int block_n = 16; block_n <= 256; block_n += 16) {
      const int rows = paged_rows_per_load(page_size, block_n);
      ASSERT_GE(rows, 1);
      ASSERT_LE(rows, 256);  // a TMA box extent
      ASSERT_EQ(page_size % rows, 0);
      ASSERT_EQ(block_n % rows, 0);
    }
    const int block_n = 16 * (1 + rng() % 16), rows = paged_rows_per_load(page_size, block_n);
    const int seqlen_k = 1 + rng() % 900, pages = (seqlen_k + page_size - 1) / page_size;
    std::vector<int> table(pages);  // shuffled, some shared
    for (int& page : table) page = rng() % (pages + 3);
    const FastDivisor by_page = fit_divisor(uint32_t(page_size));
    const int n_blocks = (seqlen_k + block_n - 1) / block_n;
    std::vector<int> seen(seqlen_k, 0);
    for (int n = 0; n < n_blocks; ++n) {
      for (int r = 0; r < block_n; r += rows) {
        const int key = n * block_n + r;
        const PagedRow at = paged_row(key, int(fast_div(uint32_t(key), by_page)), page_size);
        ASSERT_EQ(at.page_index, key / page_size);
        ASSERT_EQ(at.page_index, (key + rows - 1) / page_size) << "a load straddles a page";
        for (int i = 0; i < rows && key + i < seqlen_k; ++i) {
          ASSERT_EQ(table[at.page_index] * page_size + at.row_in_page + i, table[(key + i) / page_size] * page_size + (key + i) % page_size);
          ++seen[key + i];
        }
      }
    }
    for (int key = 0; key < seqlen_k; ++key) ASSERT_EQ(seen[key], 1) << "key " << key;
  }
}

// Paged K/V: the producer's threads, dealt a block's loads by the kernel's rule (paged_producer_warps,
// paged_first_load, paged_load_per_thread), issue each load exactly once, the leader (warp 0, lane 0)
// load 0, every warp in use two or more, and where each thread reads its page ahead, one load at most.
TEST(Visibility, PagedLoadsDealtToTheProducersThreadsOnceEach) {
  for (int most : {1, 4}) {
    for (int page_size = 1; page_size <= 300; ++page_size) {
      for (int block_n = 16; block_n <= 256; block_n += 16) {
        const int rows = paged_rows_per_load(page_size, block_n), loads = block_n / rows;
        const int warps = paged_producer_warps(rows, block_n, most), threads = 32 * warps;
        ASSERT_GE(warps, 1);
        ASSERT_LE(warps, most);
        const bool ahead = paged_load_per_thread(rows, block_n, threads);
        ASSERT_EQ(ahead, loads <= threads) << "page " << page_size << " block_n " << block_n;
        std::vector<int> issued(loads, 0), per_warp(warps, 0);
        for (int warp = 0; warp < warps; ++warp) {
          for (int lane = 0; lane < 32; ++lane) {
            int mine = 0;
            for (int t = paged_first_load(lane, warp, warps); t < loads; t += threads) {
              ++issued[t];
              ++per_warp[warp];
              ++mine;
            }
            if (ahead) ASSERT_LE(mine, 1) << "page " << page_size << " block_n " << block_n << " lane " << lane;
          }
        }
        ASSERT_EQ(paged_first_load(0, 0, warps), 0);  // the leader has load 0
        for (int t = 0; t < loads; ++t) ASSERT_EQ(issued[t], 1) << "page " << page_size << " block_n " << block_n << " load " << t;
        if (warps > 1)
          for (int warp = 0; warp < warps; ++warp) ASSERT_GE(per_warp[warp], 2) << "page " << page_size << " block_n " << block_n;
      }
    }
  }
}

}  // namespace
}  // namespace flashjit
