// tile_schedule.cuh: which tiles a CTA of the persistent grid takes, and in what order. Plain
// integer code, rendered into every kernel after ptx.cuh and compiled on the host by the tests
// (tests/tile_schedule_test.cpp), which check that any deal covers every tile exactly once.
//
// Tiles are (query block, head): `heads` counts heads_q x batch, `m_blocks` query blocks each.
// Phase 1 walks the tiles in grid order (one head after another, so the CTAs in flight share few
// heads' K/V in L2) in units of `unit` tiles: CTA c of P takes unit r * P + c in even rounds r and
// r * P + (P - 1 - c) in odd ones (a snake). Units of two are causal pairs: a head's heaviest and
// lightest remaining query blocks, equal in cost, so a static deal stays balanced...
// ...except in the last round, which is partly filled: with d128 causal 8k, 1024 pairs go to 132
// CTAs in 7.76 rounds, and a quarter of the CTAs idle through the last one (3 % of the kernel).
// Phase 2 fills that hole: the `fill` lightest query blocks of every head (a few K/V blocks each)
// are held back from phase 1 and dealt, heaviest first and in a snake, to the CTAs idle in
// phase 1's last round. Where heads have too few query blocks to hold light ones back (seqlen 512:
// four), the last `held_heads` heads are held back whole instead (fill = m_blocks): phase 1 pairs
// the other heads and phase 2 deals the last heads' tiles one by one, heaviest first, to the CTAs
// idle after it; the host holds back as many heads as leave phase 1 whole rounds, so that every
// CTA is idle then and the partly filled last round of pairs becomes a round of single tiles.
// The host picks both (launch/tile_schedule.cpp); fill 0 is phase 1 alone.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif

// n / d for n < 2^31 as a multiply-high and a shift (CUTLASS's FastDivmod), the constants fitted
// once on the host: a tile decode in the kernel costs a few instructions instead of a division's
// twenty-odd, which short tiles paid for at every tile boundary (bench/NOTES.md, versions 38-39).
struct FastDivisor {
  uint32_t d, mul, shift;  // mul = 0: d = 1
};

FJ_DEVICE uint32_t mul_hi(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

FJ_DEVICE uint32_t fast_div(uint32_t n, const FastDivisor& f) { return f.mul ? mul_hi(n, f.mul) >> f.shift : n; }

// The constants for 1 <= d < 2^31 (host side: a 64-bit division).
FJ_DEVICE FastDivisor fit_divisor(uint32_t d) {
  FastDivisor f = {d, 0, 0};
  if (d <= 1) return f;
  uint32_t log2 = 0;  // ceil(log2(d))
  while ((1ull << log2) < d) ++log2;
  f.mul = (uint32_t)(((1ull << (31 + log2)) + d - 1) / d);
  f.shift = log2 - 1;
  return f;
}

struct TileDeal {
  uint32_t ctas, cta;  // the grid's CTAs and this one
  uint32_t m_blocks;   // query blocks per head
  uint32_t heads;      // heads_q x batch
  uint32_t unit;       // tiles per phase-1 unit: 1, or 2 (causal pairs)
  uint32_t fill;       // query blocks per head held back for phase 2 (pairs only; at most m_blocks)
  uint32_t held_heads; // the heads they are held back from, the last ones: 0 (or heads) every head;
                       // fewer only with fill = m_blocks (those heads whole, the rest all in phase 1)
  // Fitted by fit_tile_deal: phase 1's whole rounds of units, the units of its last, partly
  // filled round, the CTA whose last unit is half a unit (an odd tile count; else ctas), and the
  // divisors by phase 1's query blocks per head and by the heads held back from.
  // NOTES: the host fits them once per launch and the kernel reads them from its parameters:
  // dividing by the CTA count in the kernel kept the divisor's reciprocal live through the
  // producer's loop, and the producer (24 registers) spilled.
  uint32_t full_rounds, last_units, odd_cta;
  FastDivisor by_paired, by_held_heads;
};

// Tiles per phase-1 unit: causal pairs where a persistent grid has fewer CTAs than tiles (no
// clusters: with them every tile gets its own CTA and the hardware balances them); else one.
// Pairs (a head's heaviest query block with its lightest) also where the lengths are read on the
// device (varlen, seqused_k, paged): a sequence's query block i costs its diagonal's offset plus i
// blocks whatever its length, so a pair of one sequence costs the same as any other of it. A shorter sequence's blocks past its queries are skipped, pair or not.
// NOTES: device lengths once took single tiles in a snake, heaviest first: its rounds (the CTA
// count) drift against a head's query blocks, and at 1 x 16k x 16 heads (128 blocks a head, 132
// CTAs) the busiest CTA had 1.54x the mean work, the pairs 1.03x (192/128 causal on the H200:
// bench/NOTES.md, 2026-12-05). Nothing is held back there (causal_hold: the costs are the host's
// upper bounds only).
FJ_DEVICE uint32_t deal_unit(bool causal, int cluster, uint32_t ctas, uint32_t tiles) {
  return causal && cluster == 1 && ctas < tiles ? 2u : 1u;
}

// The deal's shape: tiles go [heads][query blocks], each head's blocks heaviest first, also where
// the lengths are read on the device (there a head's blocks past its sequence's queries are
// skipped), so that the CTAs in flight share few heads' K/V in L2.
// NOTES: the device-length deal went rows first once ([query-block rows][heads], every head's last
// row first, the heaviest tiles anywhere first); at 4 x 4k with 32/8 heads one row of tiles needs
// 32 K/V heads' keys, more than L2 holds, and head-major was faster: ragged batch +2.4 %, equal
// lengths 4 x 4k +4.6 %, 16 x 1k and 2 x 8k level (bench/NOTES.md, 2026-12-04, cf036f5).
FJ_DEVICE void set_deal_shape(TileDeal& d, uint32_t m_blocks, uint32_t heads) {
  d.m_blocks = m_blocks;
  d.heads = heads;
}

FJ_DEVICE uint32_t held_fill(const TileDeal& d) { return d.unit == 2 ? d.fill : 0; }
FJ_DEVICE uint32_t held_heads(const TileDeal& d) {
  return d.held_heads == 0 || d.held_heads >= d.heads || held_fill(d) != d.m_blocks ? d.heads : d.held_heads;
}
// Phase 1's query blocks per head: those not held back where every head holds some back, all of
// them where the last heads are held back whole (phase 1 then stops before those heads).
FJ_DEVICE uint32_t phase1_blocks_per_head(const TileDeal& d) {
  return held_heads(d) == d.heads ? d.m_blocks - held_fill(d) : d.m_blocks;
}
FJ_DEVICE uint32_t phase1_tiles(const TileDeal& d) { return d.m_blocks * d.heads - held_fill(d) * held_heads(d); }

FJ_DEVICE void fit_tile_deal(TileDeal& d) {
  const uint32_t tiles1 = phase1_tiles(d), units = (tiles1 + d.unit - 1) / d.unit;
  d.full_rounds = units / d.ctas;
  d.last_units = units - d.full_rounds * d.ctas;
  d.odd_cta = d.ctas;
  if (tiles1 % d.unit != 0) {
    const uint32_t round = (units - 1) / d.ctas, slot = (units - 1) - round * d.ctas;
    d.odd_cta = (round & 1) ? d.ctas - 1 - slot : slot;
  }
  d.by_paired = fit_divisor(phase1_blocks_per_head(d) ? phase1_blocks_per_head(d) : 1);
  d.by_held_heads = fit_divisor(held_heads(d));
}

struct DealtTile {
  bool valid;         // false: this CTA has no local-th tile (nor any later one)
  uint32_t m_block;   // query block
  uint32_t head;      // head x batch index: head + heads_q * batch
};

// Where the local-th tile of CTA d.cta sits: tile t of phase 1 ([head][position], positions
// paired heaviest/lightest) or held-back block f of phase 2 ([row][held head], rows heaviest
// first). The kernel's loops test it every tile.
struct DealSlot {
  bool valid, held_back;
  uint32_t index;
};

FJ_DEVICE DealSlot deal_slot(const TileDeal& d, uint32_t local) {
  const uint32_t fill = held_fill(d);
  // Phase 1: this CTA's unit in round `local / unit`; its tiles are a prefix of its walk.
  const uint32_t round = d.unit == 2 ? local >> 1 : local;
  const uint32_t slot = (round & 1) ? d.ctas - 1 - d.cta : d.cta;
  const uint32_t t = (round * d.ctas + slot) * d.unit + (d.unit == 2 ? (local & 1) : 0);
  if (t < phase1_tiles(d)) return {true, false, t};
  // Phase 2: only CTAs idle in phase 1's last round take held-back blocks, heaviest first.
  const uint32_t last_slot = (d.full_rounds & 1) ? d.ctas - 1 - d.cta : d.cta;
  if (fill == 0 || last_slot < d.last_units) return {false, false, 0};
  const uint32_t idle = d.ctas - d.last_units, i = last_slot - d.last_units;
  const uint32_t j = local - (d.unit * d.full_rounds - (d.cta == d.odd_cta ? 1 : 0));  // its j-th phase-2 tile
  const uint32_t f = j * idle + ((j & 1) ? idle - 1 - i : i);
  return {f < fill * held_heads(d), true, f};
}

// The local-th tile of CTA d.cta (d fitted by fit_tile_deal).
FJ_DEVICE DealtTile deal_tile(const TileDeal& d, uint32_t local) {
  const DealSlot at = deal_slot(d, local);
  DealtTile out = {at.valid, 0, 0};
  if (!at.valid) return out;
  if (at.held_back) {
    const uint32_t held = held_heads(d);
    const uint32_t row = fast_div(at.index, d.by_held_heads);  // held-back blocks go row by row, heaviest first
    out.m_block = d.fill - 1 - row;
    out.head = (d.heads - held) + (at.index - row * held);
    return out;
  }
  const uint32_t paired = d.by_paired.d;
  out.head = fast_div(at.index, d.by_paired);
  const uint32_t pos = at.index - out.head * paired;
  // Pairs: heaviest, lightest, second heaviest, ...; single tiles heaviest first.
  out.m_block = d.unit == 1 ? d.m_blocks - 1 - pos : (d.m_blocks - paired) + ((pos & 1) ? pos / 2 : paired - 1 - pos / 2);
  return out;
}

// ---------------------------------------------------------------- the dynamic scheduler's order
// scheduler=dynamic: the CTAs take tile indices from a counter, one at a time, and index i is the
// i-th tile head-major: the deal shape's rows (heads x batch x splits) one after another, each
// row's query blocks from the last (heaviest first), as the dense path walks them, so that the
// CTAs in flight share few heads' K/V in L2 also where the lengths are read on the device.
// (Rows first, the last query-block row of every head first, took the ragged batch 1.6 % past the
// static deal; head-major 6 %: bench/NOTES.md, version 61.) `shape` holds the deal shape only
// (m_blocks, heads: set_deal_shape); by_row_tiles divides by its m_blocks.
FJ_DEVICE DealtTile dynamic_order_tile(const TileDeal& shape, const FastDivisor& by_row_tiles, uint32_t index) {
  const uint32_t row = fast_div(index, by_row_tiles), pos = index - row * shape.m_blocks;
  DealtTile out = {row < shape.heads, shape.m_blocks - 1u - pos, row};
  return out;
}

// With lengths on the device a head's tiles past its sequence's query blocks are empty, and they
// come first in its run (heaviest first); a key split the sequence does not have is empty whole
// (first_real_block 0). The first index past the empty tiles from `index` (query block m_block)
// on: the CTA that finds an empty tile moves the counter there (atomicMax), so a short sequence
// costs one take a head, not one a query block.
FJ_DEVICE uint32_t dynamic_skip_to(uint32_t index, uint32_t m_block, uint32_t first_real_block) {
  return m_block >= first_real_block ? index + (m_block - first_real_block) + 1u : index + 1u;
}
