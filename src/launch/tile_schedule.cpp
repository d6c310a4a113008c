#include "launch/tile_schedule.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "launch/feature_args.hpp"

// deal_unit: the rule the kernel deals by; mask_block_range: the blocks a tile visits.
#include "../../templates/tile_schedule.cuh"
#include "../../templates/visibility.cuh"

namespace flashjit {
namespace {

// NOTES: the model. A tile costs its K/V blocks plus one block's worth for its Q load and O store
// (the persistent grid overlaps most of both). Phase 1 deals pairs of about equal cost B, so its
// busiest CTA takes ceil(units / P) of them; each CTA idle in the last round takes its held-back
// blocks on top of its full rounds. The estimate is exact for equal pairs (block_n divides
// block_m) up to rounding; block_n = 80 (d256) pairs differ by a block, hence `slack`.
// Short sequences have too few query blocks per head to hold light ones back (four at 512: the
// lightest cost about a pair's third), so there the last heads go to phase 2 whole: phase 1 stops
// after whole rounds and every CTA takes one or two of those heads' tiles, heaviest first, in
// place of the partly filled last round of pairs (d64 / d128 causal 512: 3 % over the mean -> 1 %).
constexpr int kTileOverheadBlocks = 1;
constexpr int kMaxFill = 128;        // deeper holds never paid in the model (fill ~ m_blocks / 3 at most)
constexpr int64_t kMaxFillRows = 16;  // snake rows of held-back blocks per idle CTA worth modelling

struct Shape {
  int64_t block_m, block_n, seqlen_q, seqlen_k, m_blocks, heads, ctas;
  MaskRule rule;  // causal, with the launch's window and chunk
  // The K/V blocks the kernel visits (visibility.cuh: only those inside some row's window or
  // chunk) plus the per-tile overhead.
  int64_t cost(int64_t m_block) const {
    return mask_block_range(rule, int(m_block), int(block_m), int(block_n), int(seqlen_q), int(seqlen_k)).count() + kTileOverheadBlocks;
  }
};

// The load of the idle CTA at position i (of `idle`) once the held-back blocks (heaviest first:
// query block fill - 1 of each of the last `held` heads, then fill - 2, ...) have gone round the
// idle CTAs in a snake, as the kernel deals them.
int64_t held_back_load(const Shape& s, int64_t fill, int64_t held, int64_t idle, int64_t i) {
  const int64_t n = fill * held, rows = (n + idle - 1) / idle;
  int64_t load = 0;
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t f = j * idle + ((j & 1) ? idle - 1 - i : i);
    if (f < n) load += s.cost(fill - 1 - f / held);
  }
  return load;
}

// The last heads held back whole after `rounds` whole rounds of pairs over the others (phase 1
// must end on a head, so 2 x rounds x CTAs tiles must be whole heads, and every CTA is idle after
// it): the busiest CTA's estimate, and the heads held (0: no such deal).
std::pair<double, int64_t> whole_heads_estimate(const Shape& s, int64_t rounds, double pair, int64_t slack) {
  const int64_t phase1_tiles = 2 * rounds * s.ctas;
  if (rounds < 1 || phase1_tiles % s.m_blocks != 0 || phase1_tiles >= s.m_blocks * s.heads) return {0, 0};
  const int64_t held = s.heads - phase1_tiles / s.m_blocks;
  if (held * s.m_blocks > 4 * s.ctas) return {0, 0};  // more than a few rows of single tiles: nothing left to balance
  // NOTES: every CTA, not only the snake's ends: rows mix query blocks, so the busiest may sit anywhere.
  int64_t most = 0;
  for (int64_t i = 0; i < s.ctas; ++i) most = std::max(most, held_back_load(s, s.m_blocks, held, s.ctas, i));
  return {double(rounds) * pair + double(slack) + double(most), held};
}

}  // namespace

CausalHold causal_hold(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas) {
  const AttentionSpec& spec = config.spec;
  const uint32_t tiles = uint32_t(attention_tile_count(config, args));  // below 2^31: validated
  if (grid_ctas == 0 || deal_unit(spec.causal, spec.cluster, grid_ctas, tiles) != 2) return {};  // no pairs dealt
  if (spec.varlen || spec.paged) return {};  // the lengths are the device's: costs unknown here (the kernel holds nothing back)
  if (args.seqlen_k < args.seqlen_q) return {};
  if (config.q_buffers < 2) return {};  // a held-back tile's Q load would wait for the last O store
  if (spec.dynamic_schedule) return {};  // the tiles are taken from a counter, not dealt
  const WindowChunk w = launch_window_chunk(spec, args);
  Shape s{spec.block_m, spec.block_n, args.seqlen_q, args.seqlen_k, int64_t(attention_query_blocks(config, args)),
          int64_t(args.heads_q) * args.batch, grid_ctas, MaskRule{true, w.window_left, w.window_right, w.chunk}};
  const int64_t slack = s.block_m % s.block_n ? 1 : 0;
  // Total cost, every head alike.
  int64_t per_head = 0;
  for (int64_t i = 0; i < s.m_blocks; ++i) per_head += s.cost(i);
  const double total = double(per_head) * double(s.heads);

  // Phase 1 alone; over an odd number of query blocks some pairs straddle two heads: a quarter pair more.
  const int64_t units0 = (s.m_blocks * s.heads + 1) / 2;
  const double pair0 = total / double(units0);
  const double alone = double((units0 + s.ctas - 1) / s.ctas) * pair0 + double(slack) + (s.m_blocks % 2 ? pair0 / 4 : 0);

  double best = alone;
  CausalHold best_hold;
  int64_t held_per_head = 0;  // cost of the held-back blocks of one head
  const int64_t max_fill = std::min<int64_t>(s.m_blocks, kMaxFill);
  for (int64_t fill = 1; fill < max_fill; ++fill) {
    held_per_head += s.cost(fill - 1);
    const int64_t paired = s.m_blocks - fill;
    if (paired % 2) continue;  // whole pairs per head only
    const int64_t units = paired * s.heads / 2, full_rounds = units / s.ctas, last_units = units % s.ctas;
    const double pair = (total - double(held_per_head) * double(s.heads)) / double(units);
    // Stop once a CTA has no full round or the held-back blocks are no longer light; skip holds
    // that would pile up on few idle CTAs.
    const int64_t idle = s.ctas - last_units;
    if (full_rounds < 1 || 4.0 * double(s.cost(fill - 1)) > pair) break;
    if ((fill * s.heads + idle - 1) / idle > kMaxFillRows) continue;
    const double busiest_paired = double(full_rounds + (last_units > 0)) * pair + double(slack);
    const double busiest_idle = double(full_rounds) * pair + double(slack) +
                                double(std::max(held_back_load(s, fill, s.heads, idle, 0), held_back_load(s, fill, s.heads, idle, idle - 1)));
    const double estimate = std::max(busiest_paired, busiest_idle);
    if (estimate < best) best = estimate, best_hold = {int(fill), 0};
  }
  // The last heads whole, after phase 1's last or second-to-last whole round (equal pairs only:
  // an even number of query blocks per head).
  if (s.m_blocks % 2 == 0) {
    const int64_t full_rounds = s.m_blocks * s.heads / 2 / s.ctas;
    for (int64_t rounds : {full_rounds, full_rounds - 1}) {
      const auto [estimate, held] = whole_heads_estimate(s, rounds, pair0, slack);
      if (held > 0 && estimate < best) best = estimate, best_hold = {int(s.m_blocks), int(held)};
    }
  }
  return best < 0.99 * alone ? best_hold : CausalHold{};
}

int pairs_round_use_percent(const KernelConfig& config, const AttentionArgs& args, unsigned grid_ctas) {
  const uint64_t tiles = attention_tile_count(config, args);
  // Unvalidated arguments may come here (the kernel is chosen first): past 2^31 tiles none runs.
  if (grid_ctas == 0 || tiles > 0x7fffffffu || deal_unit(config.spec.causal, config.spec.cluster, grid_ctas, uint32_t(tiles)) != 2) return 100;
  // fit_tile_deal's phase 1 with fill 0: units of two tiles, the last one half where tiles are odd.
  const uint64_t units = (tiles + 1) / 2, rounds = (units + grid_ctas - 1) / grid_ctas;
  return int(units * 100 / (rounds * grid_ctas));
}

}  // namespace flashjit
