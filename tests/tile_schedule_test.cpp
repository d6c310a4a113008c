// The persistent grid's tile deal (templates/tile_schedule.cuh, compiled here as host code), the
// host's choice of which causal blocks it holds back (launch/tile_schedule.hpp), and the
// choice between a spec's kernels that depends on the deal (launch/kernel_choice.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../templates/tile_schedule.cuh"
#include "config/kernel_config.hpp"
#include "launch/attention_launch.hpp"
#include "launch/kernel_choice.hpp"
#include "launch/tile_schedule.hpp"
#include "spec/attention_spec.hpp"
#include "support/config_of.hpp"

namespace flashjit {
namespace {

// Every CTA's tiles, in order, until the deal says it has none left.
std::vector<std::vector<DealtTile>> walk(TileDeal d) {
  fit_tile_deal(d);
  std::vector<std::vector<DealtTile>> per_cta(d.ctas);
  for (uint32_t c = 0; c < d.ctas; ++c) {
    d.cta = c;
    for (uint32_t local = 0;; ++local) {
      const DealtTile t = deal_tile(d, local);
      if (!t.valid) break;
      per_cta[c].push_back(t);
    }
  }
  return per_cta;
}

// The deal before tiles were held back: units of one or two tiles in a snake, pairs heaviest and
// lightest of a head (the kernel's tile_index / tile_of up to f84769e).
DealtTile old_deal(const TileDeal& d, uint32_t local) {
  const uint32_t pair = d.unit - 1, round = local >> pair;
  const uint32_t unit = round * d.ctas + ((round & 1) ? d.ctas - 1 - d.cta : d.cta);
  const uint32_t t = (unit << pair) + (local & pair);
  if (t >= d.m_blocks * d.heads) return {false, 0, 0};
  const uint32_t pos = t % d.m_blocks;
  const uint32_t m_block = !pair ? d.m_blocks - 1 - pos : (pos & 1) ? pos / 2 : d.m_blocks - 1 - pos / 2;
  return {true, m_block, t / d.m_blocks};
}

TEST(TileDeal, EveryTileExactlyOnceWhateverTheGridAndHold) {
  int deals = 0;
  for (uint32_t unit : {1u, 2u})
    for (uint32_t m_blocks : {1u, 2u, 3u, 4u, 7u, 16u, 43u})
      for (uint32_t heads : {1u, 3u, 8u, 33u})
        for (uint32_t ctas : {1u, 2u, 5u, 7u, 64u, 132u, 500u})
          for (uint32_t fill : {0u, 1u, 2u, 3u, 6u, m_blocks - 1, m_blocks})
            for (uint32_t held : {0u, 1u, 2u, heads - 1, heads, heads + 3}) {
            if (fill > m_blocks) continue;
            const TileDeal d{ctas, 0, m_blocks, heads, unit, fill, held, 0, 0, 0};
            std::vector<int> seen(size_t(m_blocks) * heads, 0);
            for (const auto& tiles : walk(d))
              for (const DealtTile& t : tiles) {
                ASSERT_LT(t.m_block, m_blocks);
                ASSERT_LT(t.head, heads);
                ++seen[size_t(t.head) * m_blocks + t.m_block];
              }
            for (size_t i = 0; i < seen.size(); ++i)
              ASSERT_EQ(seen[i], 1) << "tile " << i << " unit " << unit << " m_blocks " << m_blocks << " heads " << heads
                                    << " ctas " << ctas << " fill " << fill << " held heads " << held;
            ++deals;
          }
  EXPECT_GT(deals, 10000);
}

TEST(TileDeal, NothingHeldBackIsTheOldDeal) {
  for (uint32_t unit : {1u, 2u})
    for (uint32_t m_blocks : {1u, 4u, 43u, 64u})
      for (uint32_t heads : {1u, 7u, 32u})
        for (uint32_t ctas : {1u, 13u, 132u}) {
          TileDeal d{ctas, 0, m_blocks, heads, unit, 0, 0, 0, 0, 0};
          fit_tile_deal(d);
          const auto per_cta = walk(d);
          for (uint32_t c = 0; c < ctas; ++c) {
            TileDeal mine = d;
            mine.cta = c;
            for (uint32_t local = 0; local <= per_cta[c].size(); ++local) {
              const DealtTile now = deal_tile(mine, local), then = old_deal(mine, local);
              ASSERT_EQ(now.valid, then.valid) << c << " " << local;
              if (!now.valid) break;
              EXPECT_EQ(now.m_block, then.m_block);
              EXPECT_EQ(now.head, then.head);
            }
          }
        }
}

// Only units of two (causal pairs) hold anything back.
TEST(TileDeal, SingleTileUnitsIgnoreTheHold) {
  const TileDeal held{7, 0, 16, 5, 1, 6, 0, 0, 0, 0}, whole{7, 0, 16, 5, 1, 16, 2, 0, 0, 0}, plain{7, 0, 16, 5, 1, 0, 0, 0, 0, 0};
  const auto b = walk(plain);
  for (const auto& a : {walk(held), walk(whole)})
    for (size_t c = 0; c < a.size(); ++c) {
      ASSERT_EQ(a[c].size(), b[c].size());
      for (size_t i = 0; i < a[c].size(); ++i) EXPECT_EQ(a[c][i].m_block, b[c][i].m_block);
    }
}

// ---------------------------------------------------------------- the host's choice
struct Cell {
  const char* spec;
  int seqlen, batch, heads;
};

AttentionArgs args_of(int batch, int seqlen_q, int seqlen_k, int heads) {
  AttentionArgs a;
  a.batch = batch;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.heads_q = a.heads_kv = heads;
  return a;
}

// The busiest CTA's work under a deal: its tiles' K/V blocks plus one per tile (the chooser's
// model), walked through the kernel's own deal.
int64_t busiest(const KernelConfig& c, const AttentionArgs& a, uint32_t ctas, CausalHold hold = {}) {
  const int64_t bm = c.spec.block_m, bn = c.spec.block_n;
  const uint32_t m_blocks = uint32_t((a.seqlen_q + bm - 1) / bm);
  const TileDeal d{ctas, 0, m_blocks, uint32_t(a.heads_q * a.batch), 2, uint32_t(hold.fill_blocks), uint32_t(hold.held_heads), 0, 0, 0};
  int64_t most = 0;
  for (const auto& tiles : walk(d)) {
    int64_t load = 0;
    for (const DealtTile& t : tiles) {
      const int64_t last_col = (t.m_block + 1) * bm - 1 + a.seqlen_k - a.seqlen_q;
      load += (last_col < 0 ? 0 : std::min<int64_t>((a.seqlen_k + bn - 1) / bn, last_col / bn + 1)) + 1;
    }
    most = std::max(most, load);
  }
  return most;
}

// set_tile_deal (what make_kernel_params hands the kernel): the deal the kernel rebuilds from the
// parameters, as tile_deal() in templates/attention_fwd.cuh does, walks every tile exactly once,
// holds back what was asked (clamped to the query blocks and heads; fewer heads only whole), and
// every divisor divides by its own number. A field or divisor swapped, or phase 1 fitted for
// another hold, fails here.
TEST(TileDeal, KernelParametersCarryTheFittedDeal) {
  const KernelConfig config = config_of("dtype=bf16,head_dim=128,causal=1");
  AttentionArgs a = args_of(2, 4000, 4000, 6);  // 32 query blocks, 12 heads x batch, 384 tiles
  a.heads_kv = 2;
  const auto quotient = [](uint32_t n, const uint32_t (&c)[2]) { return fast_div(n, FastDivisor{0, c[0], c[1]}); };
  const struct {
    CausalHold hold;
    uint32_t fill, held;  // what the kernel is to hold back
  } holds[] = {{{0, 0}, 0, 12}, {{3, 0}, 3, 12},  {{100, 0}, 32, 12}, {{32, 5}, 32, 5},
               {{100, 2}, 32, 2}, {{5, 4}, 5, 12}, {{32, 40}, 32, 12}};
  for (unsigned ctas : {7u, 132u})
    for (const auto& [hold, fill, held] : holds) {
      SCOPED_TRACE("ctas " + std::to_string(ctas) + " fill " + std::to_string(hold.fill_blocks) + " heads " +
                   std::to_string(hold.held_heads));
      KernelParams p{};
      set_tile_deal(p, config, a, ctas, hold);
      const uint32_t m_blocks = 32, heads = 12;
      EXPECT_EQ(p.fill_blocks, int(fill));
      EXPECT_EQ(p.held_heads, int(held));
      EXPECT_EQ(p.deal_ctas, int(ctas));
      const uint32_t paired = held == heads ? m_blocks - fill : m_blocks;
      for (uint32_t n = 0; n < 3000; ++n) {
        ASSERT_EQ(quotient(n, p.div_m_blocks), n / m_blocks) << n;
        if (paired > 0) ASSERT_EQ(quotient(n, p.div_paired), n / paired) << n;
        ASSERT_EQ(quotient(n, p.div_held_heads), n / held) << n;
        ASSERT_EQ(quotient(n, p.div_heads_q), n / 6) << n;
        ASSERT_EQ(quotient(n, p.div_group), n / 3) << n;
      }
      // The kernel's side: its deal from the parameters alone, on the grid they were fitted to.
      TileDeal d{};
      d.ctas = ctas;
      d.m_blocks = m_blocks;
      d.heads = heads;
      d.unit = 2;
      d.fill = uint32_t(p.fill_blocks);
      d.held_heads = uint32_t(p.held_heads);
      d.full_rounds = uint32_t(p.deal_full_rounds);
      d.last_units = uint32_t(p.deal_last_units);
      d.odd_cta = uint32_t(p.deal_odd_cta);
      d.by_paired = {phase1_blocks_per_head(d), p.div_paired[0], p.div_paired[1]};
      d.by_held_heads = {held_heads(d), p.div_held_heads[0], p.div_held_heads[1]};
      std::vector<int> seen(size_t(m_blocks) * heads, 0);
      size_t held_back = 0;
      for (d.cta = 0; d.cta < ctas; ++d.cta)
        for (uint32_t local = 0;; ++local) {
          const DealSlot at = deal_slot(d, local);
          const DealtTile t = deal_tile(d, local);
          if (!t.valid) break;
          ASSERT_LT(t.m_block, m_blocks);
          ASSERT_LT(t.head, heads);
          ++seen[size_t(t.head) * m_blocks + t.m_block];
          if (at.held_back) {
            ++held_back;
            EXPECT_LT(t.m_block, fill);
            EXPECT_GE(t.head, heads - held);
          }
        }
      for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "tile " << i;
      EXPECT_EQ(held_back, size_t(fill) * held);
    }
}

// Lengths read on the device (varlen, paged) deal causal tiles in pairs too, fitted with nothing
// held back, and the kernel's deal from those parameters balances the CTAs: at 1 x 16k x 16 heads
// (192/128, 128-row blocks: 128 a head) on 132 CTAs the busiest has at most 1.05x the mean cost
// (query block i costs i + 1 key blocks); the single-tile snake the device-length deal was before
// gave its busiest 1.54x.
TEST(TileDeal, DeviceLengthsDealBalancedCausalPairs) {
  for (const char* spec : {"dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1",
                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1"}) {
    SCOPED_TRACE(spec);
    const KernelConfig config = config_of(spec);
    AttentionArgs a = args_of(1, 16384, 16384, 16);
    a.engine.total_q = 16384;
    const CausalHold hold = causal_hold(config, a, 132);
    EXPECT_TRUE(hold.fill_blocks == 0 && hold.held_heads == 0);
    KernelParams p{};
    p.num_splits = 1;
    set_tile_deal(p, config, a, 132, CausalHold{8, 0});  // a hold asked for is dropped: the kernel holds nothing back
    EXPECT_EQ(p.fill_blocks, 0);
    TileDeal d{};
    d.ctas = 132;
    const uint32_t m_blocks = 16384 / uint32_t(config.spec.block_m), heads = 16;
    set_deal_shape(d, m_blocks, heads);
    d.unit = deal_unit(true, config.spec.cluster, d.ctas, m_blocks * heads);
    ASSERT_EQ(d.unit, 2u);
    fit_tile_deal(d);
    EXPECT_EQ(int(d.full_rounds), p.deal_full_rounds);
    EXPECT_EQ(int(d.last_units), p.deal_last_units);
    EXPECT_EQ(int(d.odd_cta), p.deal_odd_cta);
    std::vector<int> seen(size_t(m_blocks) * heads, 0);
    std::vector<double> cost(d.ctas, 0.0);
    double total = 0;
    const auto per_cta = walk(d);
    for (uint32_t c = 0; c < d.ctas; ++c) {
      for (const DealtTile& t : per_cta[c]) {
        ASSERT_LT(t.m_block, m_blocks);
        ASSERT_LT(t.head, heads);
        ++seen[size_t(t.head) * m_blocks + t.m_block];
        cost[c] += t.m_block + 1.0;
        total += t.m_block + 1.0;
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "tile " << i;
    const double busiest = *std::max_element(cost.begin(), cost.end());
    EXPECT_LT(busiest, 1.05 * total / d.ctas);
  }
}

bool holds_nothing(const CausalHold& h) { return h.fill_blocks == 0; }

TEST(CausalHold, NothingHeldBackWherePairsAreNotDealt) {
  const KernelConfig causal = config_of("dtype=bf16,head_dim=128,causal=1");
  const AttentionArgs big = args_of(2, 8192, 8192, 16);
  EXPECT_GT(causal_hold(causal, big, 132).fill_blocks, 0);
  EXPECT_TRUE(holds_nothing(causal_hold(config_of("dtype=bf16,head_dim=128,causal=0"), big, 132)));
  EXPECT_TRUE(holds_nothing(causal_hold(config_of("dtype=bf16,head_dim=128,causal=1,cluster=2"), big, 132)));
  EXPECT_TRUE(holds_nothing(causal_hold(config_of("dtype=bf16,head_dim=128,causal=1,varlen=1"), big, 132)));  // pairs, no hold
  EXPECT_TRUE(holds_nothing(causal_hold(causal, big, 0)));                            // no grid given
  EXPECT_TRUE(holds_nothing(causal_hold(causal, big, 2 * 64 * 16)));                  // a CTA per tile
  EXPECT_TRUE(holds_nothing(causal_hold(causal, args_of(2, 8192, 4096, 16), 132)));   // seqlen_k < seqlen_q
  EXPECT_TRUE(holds_nothing(causal_hold(causal, args_of(2, 8192, 65536, 16), 132)));  // costs nearly flat
}

// The FlashAttention-3 grid's causal cells on the H200's 132 SMs: where the pairs' last round
// leaves CTAs idle, holding some back shortens the busiest CTA (the model the chooser optimises,
// walked through the kernel's deal): light blocks of every head at 2k and from 8k up, the last
// heads whole at 512 and 1k, where four or eight query blocks a head leave no light ones to hold
// back, and at d64's 4k (22 query blocks of 192 rows, 10.7 rounds: 397 against 399 for the best
// light hold, 407 for the pairs alone).
TEST(CausalHold, ShortensTheBusiestCtaOnTheBenchmarkGrid) {
  const struct {
    const char* spec;
    int seqlen, batch, heads;
    bool whole_heads;
  } cells[] = {
      {"dtype=bf16,head_dim=64,causal=1", 512, 32, 32, true},
      {"dtype=bf16,head_dim=64,causal=1", 1024, 16, 32, true},
      {"dtype=bf16,head_dim=64,causal=1", 2048, 8, 32, false},
      {"dtype=bf16,head_dim=64,causal=1,consumer_wgs=3", 4096, 4, 32, true},  // 22 query blocks, 10.7 rounds
      {"dtype=bf16,head_dim=64,causal=1,consumer_wgs=3", 8192, 2, 32, false},
      {"dtype=bf16,head_dim=64,causal=1,consumer_wgs=3", 16384, 1, 32, false},
      {"dtype=bf16,head_dim=128,causal=1", 512, 32, 16, true},
      {"dtype=bf16,head_dim=128,causal=1", 1024, 16, 16, true},
      {"dtype=bf16,head_dim=128,causal=1", 4096, 4, 16, false},
      {"dtype=bf16,head_dim=128,causal=1", 8192, 2, 16, false},
      {"dtype=bf16,head_dim=128,causal=1", 16384, 1, 16, false},
  };
  for (const auto& cell : cells) {
    SCOPED_TRACE(std::string(cell.spec) + " seqlen " + std::to_string(cell.seqlen));
    const KernelConfig c = config_of(cell.spec);
    const AttentionArgs a = args_of(cell.batch, cell.seqlen, cell.seqlen, cell.heads);
    const CausalHold hold = causal_hold(c, a, 132);
    EXPECT_GT(hold.fill_blocks, 0);
    EXPECT_EQ(hold.held_heads > 0, cell.whole_heads);
    if (cell.whole_heads) EXPECT_EQ(hold.fill_blocks, int(attention_query_blocks(c, a)));
    EXPECT_LT(double(busiest(c, a, 132, hold)), 0.985 * double(busiest(c, a, 132)));
  }
  // d64 causal 512 (the cell below cuDNN in most runs): 2048 pairs of cost 7 are 15.5 rounds; 15
  // whole rounds, then the last 34 heads' 136 tiles one or two a CTA, heaviest first: 110 for the
  // busiest CTA instead of 112 (the mean 108.6).
  const KernelConfig d64 = config_of("dtype=bf16,head_dim=64,causal=1");
  const AttentionArgs short_cell = args_of(32, 512, 512, 32);
  const CausalHold hold = causal_hold(d64, short_cell, 132);
  EXPECT_EQ(hold.fill_blocks, 4);
  EXPECT_EQ(hold.held_heads, 34);
  EXPECT_EQ(busiest(d64, short_cell, 132, hold), 110);
  EXPECT_EQ(busiest(d64, short_cell, 132), 112);
  // The shapes AttentionGpu.CausalDealHoldsBackAnyNumberOfBlocks leaves to the launch's choice:
  // 512 x 80 heads are 160 pairs, one whole round and 14 heads whole.
  for (const char* spec : {"dtype=bf16,head_dim=64,causal=1", "dtype=fp16,head_dim=128,causal=1"}) {
    EXPECT_EQ(causal_hold(config_of(spec), args_of(5, 512, 512, 16), 132).held_heads, 14) << spec;
  }
  EXPECT_GT(causal_hold(config_of("dtype=bf16,head_dim=64,causal=1"), args_of(2, 4096, 4096, 16), 132).fill_blocks, 0);
  EXPECT_GT(causal_hold(config_of("dtype=bf16,head_dim=128,causal=1"), args_of(2, 4096, 4096, 16), 132).fill_blocks, 0);
  EXPECT_GT(causal_hold(config_of("dtype=bf16,head_dim=128,causal=1"), args_of(1, 8192, 8192, 16), 132).fill_blocks, 0);
  EXPECT_GT(causal_hold(config_of("dtype=bf16,head_dim=96,causal=1"), args_of(2, 4096, 4096, 16), 132).fill_blocks, 0);
  // One Q buffer (d192, d256): a held-back tile's Q would wait for the previous O store (measured
  // 12 % slower at d256 causal 4k): nothing held back.
  for (int seqlen : {512, 4096, 8192, 16384}) {
    EXPECT_TRUE(holds_nothing(causal_hold(config_of("dtype=bf16,head_dim=256,causal=1"), args_of(16384 / seqlen, seqlen, seqlen, 8), 132)));
  }
}

// Over random causal shapes (seqlen_k >= seqlen_q, any grid) the choice is a model, not an
// oracle: it may lose a little where its estimate of the pairs alone is off (odd query block
// counts), but it wins on average and never loses much.
TEST(CausalHold, RandomShapesGainOnAverageAndNeverLoseMuch) {
  const char* specs[] = {"dtype=bf16,head_dim=64,causal=1", "dtype=bf16,head_dim=64,causal=1,consumer_wgs=3",
                         "dtype=bf16,head_dim=128,causal=1", "dtype=bf16,head_dim=256,causal=1",
                         "dtype=fp16,head_dim=96,causal=1,block_n=64"};
  std::mt19937_64 rng(5);
  double log_gain = 0, worst = 1;
  int shapes = 0, whole_heads = 0;
  for (int i = 0; i < 600; ++i) {
    const KernelConfig c = config_of(specs[rng() % 5]);
    const int seqlen_q = 1 + int(rng() % (i % 2 ? 12000 : 1500));
    const int seqlen_k = rng() % 2 ? seqlen_q : seqlen_q + int(rng() % 4000);
    const AttentionArgs a = args_of(1 + int(rng() % 32), seqlen_q, seqlen_k, 1 + int(rng() % 24));
    const uint32_t ctas = 1 + uint32_t(rng() % 140);
    if (attention_tile_count(c, a) <= ctas) continue;
    const CausalHold hold = causal_hold(c, a, ctas);
    const double ratio = double(busiest(c, a, ctas)) / double(busiest(c, a, ctas, hold));
    log_gain += std::log(ratio);
    worst = std::min(worst, ratio);
    ++shapes;
    whole_heads += hold.held_heads > 0;
  }
  ASSERT_GT(shapes, 300);
  EXPECT_GT(whole_heads, 20);
  EXPECT_GT(std::exp(log_gain / shapes), 1.01);
  EXPECT_GT(worst, 0.93);
}

// How much of their rounds the pairs use, against the kernel's own deal walked tile by tile: the
// rounds are the most units any CTA gets, the units half the tiles dealt (a lone last tile is one).
TEST(PairsRoundUse, IsTheUnitsDealtOverRoundsTimesCtas) {
  const KernelConfig c = config_of("dtype=bf16,head_dim=256,causal=1");
  const struct {
    int batch, seqlen, heads;
    unsigned ctas;
  } shapes[] = {{1, 9216, 8, 132}, {1, 10240, 16, 132}, {2, 8192, 8, 132}, {1, 11264, 6, 132},  // 72, 96, 96, 100 %
                {1, 9300, 7, 132}, {3, 6144, 10, 132},  {1, 8192, 10, 160}, {1, 8192, 10, 100}, {2, 5000, 9, 77},
                {1, 6700, 5, 132}};  // 265 tiles: the 133rd unit is a lone tile, alone in its round: 50 %
  for (const auto& s : shapes) {
    SCOPED_TRACE("b" + std::to_string(s.batch) + " L" + std::to_string(s.seqlen) + " h" + std::to_string(s.heads) +
                 " ctas " + std::to_string(s.ctas));
    const AttentionArgs a = args_of(s.batch, s.seqlen, s.seqlen, s.heads);
    TileDeal d{};
    d.ctas = s.ctas;
    d.m_blocks = uint32_t(attention_query_blocks(c, a));
    d.heads = uint32_t(s.batch * s.heads);
    d.unit = 2;
    size_t rounds = 0, tiles = 0;
    for (const auto& dealt : walk(d)) rounds = std::max(rounds, (dealt.size() + 1) / 2), tiles += dealt.size();
    ASSERT_EQ(tiles, size_t(d.m_blocks) * d.heads);
    EXPECT_EQ(pairs_round_use_percent(c, a, s.ctas), int((tiles + 1) / 2 * 100 / (rounds * s.ctas)));
  }
  // No pairs dealt: without the mask, with clusters, or a CTA per tile.
  const AttentionArgs a = args_of(1, 9216, 9216, 8);
  EXPECT_EQ(pairs_round_use_percent(config_of("dtype=bf16,head_dim=256,causal=0"), a, 132), 100);
  EXPECT_EQ(pairs_round_use_percent(config_of("dtype=bf16,head_dim=256,causal=1,cluster=2"), a, 132), 100);
  EXPECT_EQ(pairs_round_use_percent(c, a, 72 * 8), 100);
  EXPECT_EQ(pairs_round_use_percent(c, a, 0), 100);
  EXPECT_EQ(pairs_round_use_percent(c, a, 132), 72);  // 288 pairs in 3 rounds of 132
}

// d192/d256 causal at auto (config/length_choice.hpp): the cluster kernel from 16384 always, and
// from 8192 where the persistent grid's pairs would use less than 92 % of their rounds, which
// depends on the batch, the heads and the device's SMs. The d64 kernel's rule is the lengths alone.
TEST(KernelChoice, UnevenDealsRunTheClusterKernelBelowItsLength) {
  const KernelConfig main = config_of("dtype=bf16,head_dim=256,causal=1");
  const auto variant = long_sequence_variant(*parse_spec("dtype=bf16,head_dim=256,causal=1"));
  ASSERT_TRUE(variant.has_value());
  const LongSequenceRule rule = variant->rule;
  const struct {
    int batch, seqlen_q, seqlen_k, heads, sm_count;
    bool clusters;
  } cases[] = {
      {1, 16384, 16384, 8, 132, true},    // 512 pairs in 4 rounds of 132, 96 % used: long enough anyway
      {1, 16384, 40000, 2, 132, true},
      {1, 9216, 9216, 8, 132, true},      // 2.18 rounds' worth in 3: 72 %
      {1, 9216, 9216, 6, 132, true},      // 1.64 in 2: 81 %
      {3, 9216, 9216, 6, 132, false},     // 4.91 in 5: 98 %
      {1, 10240, 10240, 16, 132, false},  // 4.85 in 5: 96 %
      {1, 11264, 11264, 11, 132, true},   // 3.67 in 4: 91 %, the last percent with
      {1, 9216, 9216, 17, 132, false},    // 4.64 in 5: 92 %, the first percent without
      {1, 11264, 11264, 6, 132, false},   // 2.00 in 2: whole rounds
      {1, 8192, 8192, 10, 132, true},     // 2.42 in 3: 80 %
      {1, 8191, 8191, 10, 132, false},    // shorter than the rule's range
      {1, 8192, 8191, 10, 132, false},
      {1, 6144, 6144, 12, 132, false},    // 72 %, but below 8192 the pairs stay
      {1, 20000, 8192, 2, 132, true},     // seqlen_q sets the tiles: 157 x 2 / 2 = 157 pairs in 2 rounds, 59 %
      {1, 8192, 8192, 10, 160, false},    // on 160 SMs 2.00: whole
      {1, 9216, 9216, 8, 0, false},       // SM count unknown: one CTA per tile, no pairs
      {1, 8192, 8192, 2, 132, false},     // 128 tiles: a CTA each, no pairs
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("b" + std::to_string(c.batch) + " sq" + std::to_string(c.seqlen_q) + " sk" + std::to_string(c.seqlen_k) +
                 " h" + std::to_string(c.heads) + " sms " + std::to_string(c.sm_count));
    EXPECT_EQ(runs_long_variant(rule, main, args_of(c.batch, c.seqlen_q, c.seqlen_k, c.heads), c.sm_count), c.clusters);
  }
  // d64: three warpgroups from 4096, whatever the deal.
  const KernelConfig d64 = config_of("dtype=bf16,head_dim=64,causal=1");
  const auto d64_variant = long_sequence_variant(*parse_spec("dtype=bf16,head_dim=64,causal=1"));
  ASSERT_TRUE(d64_variant.has_value());
  const LongSequenceRule d64_rule = d64_variant->rule;
  EXPECT_TRUE(runs_long_variant(d64_rule, d64, args_of(1, 4096, 4096, 8), 132));
  EXPECT_TRUE(runs_long_variant(d64_rule, d64, args_of(1, 16384, 5000, 8), 0));
  EXPECT_FALSE(runs_long_variant(d64_rule, d64, args_of(9, 4095, 16384, 37), 132));
  EXPECT_FALSE(runs_long_variant(d64_rule, d64, args_of(1, 1, 32768, 8), 132));  // decode
  EXPECT_FALSE(runs_long_variant(d64_rule, d64, args_of(1, 16384, 4095, 8), 132));
}

// ---------------------------------------------------------------- the dynamic scheduler's order
// A ragged batch as the dynamic scheduler sees it: query blocks per sequence and key splits per
// sequence (lengths on the device).
struct RaggedTiles {
  uint32_t m_blocks, tile_heads, batch, splits;
  std::vector<uint32_t> blocks_of, splits_of;  // per sequence
  uint32_t sequence(const DealtTile& t) const { return (t.head / tile_heads) % batch; }
  bool split_empty(const DealtTile& t) const { return (t.head / tile_heads) / batch >= splits_of[sequence(t)]; }
  bool empty(const DealtTile& t) const { return split_empty(t) || t.m_block >= blocks_of[sequence(t)]; }
  uint32_t first_real_block(const DealtTile& t) const { return split_empty(t) ? 0 : blocks_of[sequence(t)]; }
};

// CTAs take indices from one counter in a random interleaving (a take, and the atomicMax past the
// empty tiles, are separate steps, as in the kernel): returns how often each tile was taken, and
// fails on any skipped tile that had work.
std::vector<int> run_dynamic(const RaggedTiles& r, uint32_t ctas, std::mt19937_64& rng) {
  TileDeal shape{};
  set_deal_shape(shape, r.m_blocks, r.tile_heads * r.batch * r.splits);
  const FastDivisor by_row_tiles = fit_divisor(shape.m_blocks);
  const uint32_t tiles = shape.m_blocks * shape.heads;
  std::vector<int> taken(tiles, 0);
  uint32_t counter = 0;
  struct Cta { bool done = false; uint32_t skip_to = 0; };
  std::vector<Cta> cta(ctas);
  for (uint32_t running = ctas; running > 0;) {
    Cta& c = cta[rng() % ctas];
    if (c.done) continue;
    if (c.skip_to) { counter = std::max(counter, c.skip_to); c.skip_to = 0; continue; }
    const uint32_t index = counter++;
    if (index >= tiles) { c.done = true; --running; continue; }
    const DealtTile t = dynamic_order_tile(shape, by_row_tiles, index);
    EXPECT_TRUE(t.valid);
    ++taken[t.head * r.m_blocks + t.m_block];
    if (r.empty(t)) {
      const uint32_t end = dynamic_skip_to(index, t.m_block, r.first_real_block(t));
      EXPECT_GT(end, index);
      // Everything the skip passes over is empty too (the same head, lighter blocks down to the
      // sequence's last).
      for (uint32_t i = index + 1; i < end && i < tiles; ++i) {
        const DealtTile u = dynamic_order_tile(shape, by_row_tiles, i);
        EXPECT_TRUE(r.empty(u)) << "index " << i << " skipped from " << index;
        EXPECT_EQ(u.head, t.head);
      }
      c.skip_to = end;
    }
  }
  return taken;
}

// The order is head-major and heaviest first (each head's last query block first, heads in
// order, as the dense path walks them), and every tile with work is taken exactly once whatever
// the CTAs' interleaving, each run of empty tiles skipped with one atomicMax.
TEST(DynamicSchedule, EveryTileWithWorkTakenOnceAndOnlyEmptyRunsSkipped) {
  std::mt19937_64 rng(23);
  int cases = 0;
  for (bool ragged : {false, true})
    for (uint32_t m_blocks : {1u, 2u, 5u, 16u})
      for (uint32_t tile_heads : {1u, 3u, 8u})
        for (uint32_t batch : {1u, 4u, 7u})
          for (uint32_t splits : {1u, 3u})
            for (uint32_t ctas : {1u, 5u, 132u}) {
              RaggedTiles r{m_blocks, tile_heads, batch, splits, {}, {}};
              for (uint32_t b = 0; b < batch; ++b) {
                r.blocks_of.push_back(ragged ? uint32_t(rng() % (m_blocks + 1)) : m_blocks);
                r.splits_of.push_back(ragged ? uint32_t(rng() % (splits + 1)) : splits);
              }
              const std::vector<int> taken = run_dynamic(r, ctas, rng);
              for (uint32_t head = 0; head < tile_heads * batch * splits; ++head)
                for (uint32_t m = 0; m < m_blocks; ++m) {
                  const int n = taken[head * m_blocks + m];
                  if (!r.empty({true, m, head})) EXPECT_EQ(n, 1) << "tile " << m << "," << head;
                  else EXPECT_LE(n, 1);
                }
              ++cases;
            }
  EXPECT_EQ(cases, 432);
  // Heaviest first within a head, heads in order.
  TileDeal shape{};
  set_deal_shape(shape, 8, 6);
  EXPECT_EQ(dynamic_order_tile(shape, fit_divisor(8), 0).m_block, 7u);
  EXPECT_EQ(dynamic_order_tile(shape, fit_divisor(8), 0).head, 0u);
  EXPECT_EQ(dynamic_order_tile(shape, fit_divisor(8), 9).m_block, 6u);
  EXPECT_EQ(dynamic_order_tile(shape, fit_divisor(8), 9).head, 1u);
  EXPECT_FALSE(dynamic_order_tile(shape, fit_divisor(8), 48).valid);
  // A head whose sequence has 3 query blocks, met at block 7: the counter moves past blocks 7..3.
  EXPECT_EQ(dynamic_skip_to(100, 7, 3), 105u);
  EXPECT_EQ(dynamic_skip_to(100, 7, 0), 108u);  // a split the sequence does not have: the whole head
}

// What the kernel divides by: set_tile_deal's divisors for a varlen spec, dynamic or static, are
// the head-major order's (the query blocks per head), and the dynamic spec holds nothing back.
TEST(DynamicSchedule, KernelParametersCarryTheOrdersDivisors) {
  const KernelConfig config = config_of("dtype=bf16,head_dim=128,causal=1,varlen=1,scheduler=dynamic");
  AttentionArgs a = args_of(5, 3000, 3000, 12);
  a.heads_kv = 4;
  a.engine.total_q = 9000;
  KernelParams p{};
  p.num_splits = 1;
  set_tile_deal(p, config, a, 132, causal_hold(config, a, 132));
  EXPECT_EQ(p.fill_blocks, 0);
  const auto quotient = [](uint32_t n, const uint32_t (&c)[2]) { return fast_div(n, FastDivisor{0, c[0], c[1]}); };
  const uint32_t m_blocks = (3000 + 127) / 128;  // head-major: a row is one head's query blocks
  for (uint32_t n : {0u, 1u, 23u, 24u, 25u, 1439u, 100000u}) {
    EXPECT_EQ(quotient(n, p.div_m_blocks), n / m_blocks) << n;
    EXPECT_EQ(quotient(n, p.div_heads_q), n / 12) << n;
  }
  const KernelConfig fixed_varlen = config_of("dtype=bf16,head_dim=128,causal=1,varlen=1");
  KernelParams q{};
  q.num_splits = 1;
  set_tile_deal(q, fixed_varlen, a, 132, causal_hold(fixed_varlen, a, 132));
  EXPECT_EQ(quotient(120, q.div_m_blocks), 120u / m_blocks);  // head-major too: a row is one head's query blocks
  // A dense causal spec with the static deal holds blocks back here; the dynamic one does not.
  const KernelConfig dense = config_of("dtype=bf16,head_dim=128,causal=1,scheduler=dynamic");
  const AttentionArgs d = args_of(1, 8192, 8192, 32);
  EXPECT_EQ(causal_hold(dense, d, 132).fill_blocks, 0);
  EXPECT_EQ(causal_hold(dense, d, 132).held_heads, 0);
  const KernelConfig fixed = config_of("dtype=bf16,head_dim=128,causal=1");
  EXPECT_GT(causal_hold(fixed, d, 132).fill_blocks + causal_hold(fixed, d, 132).held_heads, 0);
}

}  // namespace
}  // namespace flashjit
