// visibility.cuh: which keys a query row sees, and which K/V blocks a query block visits. The one
// statement of the rule: rendered into every kernel (before the kernel), and compiled on the host
// by the float64 reference (src/verify/reference.cpp), the tile deal's cost model
// (src/launch/tile_schedule.cpp) and the tests (tests/visibility_test.cpp,
// tests/mask_rule_test.cpp), so they cannot disagree. Lengths are one sequence's (the kernel takes
// them from its SeqlenInfo). It holds the causal rule and its block ranges (what the kernel calls
// today), the paged-load and split rules, and the general rule (MaskRule: sliding windows and
// attention chunks, issue 38) with its block ranges, key splits and block walks.
//
// The rule (NOTES, correctness): key `key` of a sequence with seqlen_k keys is visible to query row
// `row` of its seqlen_q queries when 0 <= key < seqlen_k and, with the causal mask, key <= row +
// seqlen_k - seqlen_q: the mask is aligned to the bottom-right corner, so the last query sees every
// key and a chunk of new queries against a cached prefix sees the prefix. A row that sees no key
// (causal with seqlen_q > seqlen_k, or seqlen_k = 0) gives O = 0 and LSE = -inf.
// NOTES (correctness) guarding the rest: packed O's TMA boxes stay inside a sequence
// (rows_inside_sequence); the paged producer's read-ahead follows paged_load_per_thread; a
// MaskRule's visible keys are one run per row whose ends never move left (MaskRule below), which
// the block ranges, the key splits and the walks rest on.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif

FJ_DEVICE int fj_min(int a, int b) { return a < b ? a : b; }
FJ_DEVICE int fj_max(int a, int b) { return a > b ? a : b; }

// The last key row `row` sees (-1: none).
FJ_DEVICE int last_visible_key(bool causal, int row, int seqlen_q, int seqlen_k) {
  return causal ? fj_min(seqlen_k - 1, row + seqlen_k - seqlen_q) : seqlen_k - 1;
}

FJ_DEVICE bool key_visible(bool causal, int row, int key, int seqlen_q, int seqlen_k) {
  return key >= 0 && key <= last_visible_key(causal, row, seqlen_q, seqlen_k);
}

// How many keys row `row` sees (they are keys 0 .. count - 1).
FJ_DEVICE int visible_key_count(bool causal, int row, int seqlen_q, int seqlen_k) {
  return fj_max(0, last_visible_key(causal, row, seqlen_q, seqlen_k) + 1);
}

// Whether query block m_block of a sequence of seqlen_q queries holds any of them (the grid
// covers the longest sequence's blocks; a shorter one's tiles past its queries are skipped).
FJ_DEVICE bool query_block_has_rows(int m_block, int block_m, int seqlen_q) { return m_block * block_m < seqlen_q; }

// Whether query rows [first, first + rows) of a sequence all belong to it. Packed O's tensor map spans
// every sequence's rows ([total_q, heads]), so only such a run may be stored as one TMA box: a box
// reaching past the sequence's end would write the next sequence's first rows (NOTES, correctness).
FJ_DEVICE bool rows_inside_sequence(int first, int rows, int seqlen_q) { return first + rows <= seqlen_q; }

// Paged K/V: where key `key` sits, as (page index in the sequence's block-table row, row in the
// page). A load of `rows` keys from a multiple of `rows` stays in one page when rows divides
// page_size (paged_rows_per_load: gcd(page_size, block_n)).
struct PagedRow {
  int page_index, row_in_page;
};
FJ_DEVICE PagedRow paged_row(int key, int page_index, int page_size) { return {page_index, key - page_index * page_size}; }

// Paged K/V: the producer's threads share a block's block_n / rows loads. With `most` warps to
// hand, each warp in use takes two or more (a second warp with one load a block cost page 64
// 2-4 %: bench/NOTES.md, version 63); the others have none. Thread lane x warps + warp takes load
// t, then t + 32 x warps and so on; where every load has a thread of its own, each thread reads
// its page a block ahead (NOTES, correctness: the producer's read-ahead and its loads must both
// follow paged_load_per_thread, or a thread would load with page -1: zeros).
FJ_DEVICE int paged_producer_warps(int rows, int block_n, int most) {
  return most >= 4 && rows * 8 <= block_n ? 4 : most >= 2 && rows * 4 <= block_n ? 2 : 1;
}
FJ_DEVICE int paged_first_load(int lane, int warp, int warps) { return lane * warps + warp; }
FJ_DEVICE bool paged_load_per_thread(int rows, int block_n, int threads) { return block_n <= threads * rows; }

// The K/V blocks (block_n keys each) that query block m_block (block_m rows) visits: [n_min,
// n_max), walked right to left from n_max - 1. The first n_masked of those steps (n_max - 1 down
// to n_max - n_masked) hold a key some row of the block does not see and need the mask; every
// other visited block is visible to every row of the block whole. A block no row sees is not
// visited (n_min = n_max when none is).
struct BlockRange {
  int n_min, n_max;
  int n_masked;
  FJ_DEVICE int count() const { return n_max - n_min; }
};

FJ_DEVICE BlockRange kv_block_range(bool causal, int m_block, int block_m, int block_n, int seqlen_q, int seqlen_k) {
  BlockRange r;
  r.n_min = 0;
  // The block's last row sees the most keys (the rule grows with the row), its first row the fewest.
  const int last_row = (m_block + 1) * block_m - 1;
  const int most = visible_key_count(causal, last_row, seqlen_q, seqlen_k);
  r.n_max = (most + block_n - 1) / block_n;
  // Blocks below the first row's visible keys, and below the key-length tail, are whole.
  const int fewest = causal ? visible_key_count(causal, m_block * block_m, seqlen_q, seqlen_k) : seqlen_k;
  const int whole = fj_min(fewest, seqlen_k - seqlen_k % block_n) / block_n;
  r.n_masked = r.n_max - fj_min(fj_max(whole, r.n_min), r.n_max);
  return r;
}

// ---- decode: packed heads and key splits
// Packed GQA (spec key pack_gqa): the query heads of one K/V head share a tile's rows, so a K/V
// block is read once for all of them. pack_heads (a power of two dividing heads_q / heads_kv, at
// most block_m) heads of tokens_per_tile = block_m / pack_heads queries each: packed row r of a
// tile is query r >> pack_shift, head (r & (pack_heads - 1)) of the tile's. Query blocks are then
// blocks of tokens_per_tile queries, and the rule above applies to the query, not the row.
FJ_DEVICE int pack_heads_for(int group, int block_m) {
  int heads = 1;
  while (heads * 2 <= block_m && group % (heads * 2) == 0) heads *= 2;
  return heads;
}

// Key splits (spec key split_kv): a sequence's K/V blocks cut into `splits` runs of
// blocks_per_split (the last one shorter), each done by its own tiles; split_blocks > 0 fixes
// the run length (batch-invariant: a sequence's splits do not depend on the rest of the batch),
// else the blocks are cut into num_splits runs. Every split below `splits` writes its partial
// (a tile whose rows see none of its keys writes LSE -inf); the combine merges exactly those.
// A sequence without keys has one split (O = 0, LSE = -inf).
struct KeySplit {
  int blocks_per_split, splits;
};

FJ_DEVICE KeySplit key_split(int seqlen_k, int block_n, int num_splits, int split_blocks) {
  const int blocks = (seqlen_k + block_n - 1) / block_n;
  const int per = fj_max(1, split_blocks > 0 ? split_blocks : (blocks + num_splits - 1) / fj_max(1, num_splits));
  return {per, fj_max(1, fj_min(num_splits, (blocks + per - 1) / per))};
}

// Partials are written only where a sequence has two splits or more: a sequence of one split
// writes its O and LSE directly, and neither combine reads it.
FJ_DEVICE bool split_writes_partials(int num_splits, int sequence_splits) { return num_splits > 1 && sequence_splits > 1; }

// combine=inline: each consumer warpgroup of a tile that writes partials counts itself in at its
// rows' counter, one per (sequence, head group, query block, warpgroup) of the launch's upper
// bounds, [batch][tile_heads][m_blocks][wgs]; the arrival that brings it to the sequence's split
// count merges them and puts it back to zero.
// The merge is a warp a row, each warp's rows one after another (a chain of L2 round trips a row),
// while the second kernel merges every row at once: so a launch merges inline only where a
// warpgroup holds few rows (at most kInlineMergeRows: decode and short speculative steps, whose
// queries x packed heads are few), and otherwise leaves its counters unused and runs the combine
// kernel. rows_per_warpgroup: min(64, the launch's seqlen_q x pack_heads).
constexpr int kInlineMergeRows = 16;
FJ_DEVICE bool merges_inline(long long seqlen_q, int pack_heads) { return seqlen_q * pack_heads <= kInlineMergeRows; }
// (long long: this header also goes into kernels without the fixed-width types, the reference's.)
FJ_DEVICE long long merge_counter_count(int batch, int tile_heads, int m_blocks, int wgs) {
  return (long long)batch * tile_heads * m_blocks * wgs;
}
FJ_DEVICE long long merge_counter_index(int batch, int head, int m_block, int wg, int tile_heads, int m_blocks, int wgs) {
  return (((long long)batch * tile_heads + head) * m_blocks + m_block) * wgs + wg;
}

// The part of a tile's block range in split `split`: blocks [split x per, (split + 1) x per). The
// masked blocks stay the range's top ones (those at or above n_max - n_masked).
FJ_DEVICE BlockRange split_block_range(const BlockRange& r, const KeySplit& ks, int split) {
  BlockRange s;
  const int lo = split * ks.blocks_per_split, hi = lo + ks.blocks_per_split;
  s.n_min = fj_max(r.n_min, lo);
  s.n_max = fj_max(s.n_min, fj_min(r.n_max, hi));
  s.n_masked = fj_max(0, s.n_max - fj_max(s.n_min, r.n_max - r.n_masked));
  return s;
}

// ---- the general rule: sliding windows and attention chunks (issue 38)
// A mask rule holds every way a key is hidden from a query row. Positions are bottom-right
// aligned per sequence: row `row` of seqlen_q queries sits at key position p = row + seqlen_k -
// seqlen_q, and sees key j (0 <= j < seqlen_k) when
//   window: p - window_left <= j <= p + window_right (bounds inclusive; -1: that side unbounded,
//           even when the other side is bounded, as FA3's kernel reads it);
//   causal: j <= p, i.e. window_right = 0 whatever window_right says; it composes with any left
//           bound (FA3's causal window is (left, 0));
//   chunk:  chunk > 0: j / chunk == p / chunk, floor division (Llama 4's attention chunks). A row
//           at p < 0 (seqlen_q > seqlen_k) is in a chunk below key 0 and sees no key.
// Every part bounds j by a non-decreasing function of p, so a row's visible keys are one run
// [first_visible_key, last_visible_key] (empty when first > last) whose ends never move left as the
// row grows: the block ranges below rest on that (NOTES, correctness: a rule that breaks it, a
// tree mask, needs a block list, not a range). Rows that see no key lie only before the rows that
// do (p < 0), or past the sequence's queries (a tile's padding rows).
// With window_left = window_right = -1 and chunk = 0 the rule is the causal flag alone, and every
// function below returns what its causal-only namesake above returns (tests/mask_rule_test.cpp
// checks that exhaustively over small shapes).
struct MaskRule {
  bool causal;
  int window_left;   // keys left of the diagonal a row sees; -1: unbounded
  int window_right;  // keys right of it; -1: unbounded (causal: 0)
  int chunk;         // keys per attention chunk; 0: no chunks
};
FJ_DEVICE MaskRule causal_only_rule(bool causal) { return {causal, -1, -1, 0}; }
FJ_DEVICE bool rule_has_window_or_chunk(const MaskRule& rule) {
  return rule.window_left >= 0 || rule.window_right >= 0 || rule.chunk > 0;
}

// floor(a / b) for b > 0 (C++ division truncates toward zero: -1 / 4 is 0, floor is -1).
FJ_DEVICE int fj_floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The row's position on the key axis (bottom-right alignment).
FJ_DEVICE int key_position(int row, int seqlen_q, int seqlen_k) { return row + seqlen_k - seqlen_q; }

// The first key row `row` sees (0 when no left bound applies). The comparisons keep every
// intermediate within int for lengths below 2^31 (no p + window overflow).
FJ_DEVICE int first_visible_key(const MaskRule& rule, int row, int seqlen_q, int seqlen_k) {
  const int p = key_position(row, seqlen_q, seqlen_k);
  int first = rule.window_left >= 0 && rule.window_left < p ? p - rule.window_left : 0;
  if (rule.chunk > 0 && p >= 0) first = fj_max(first, p / rule.chunk * rule.chunk);
  return first;
}

// The last key row `row` sees; below first_visible_key when it sees none (with the causal flag
// alone exactly last_visible_key(causal, ...): min(seqlen_k - 1, p), which may be below -1).
FJ_DEVICE int last_visible_key(const MaskRule& rule, int row, int seqlen_q, int seqlen_k) {
  const int p = key_position(row, seqlen_q, seqlen_k);
  const int right = rule.causal ? 0 : rule.window_right;
  // p + right <= seqlen_k - 1 written as right <= seqlen_q - 1 - row.
  int last = right >= 0 && right <= seqlen_q - 1 - row ? p + right : seqlen_k - 1;
  if (rule.chunk > 0) {
    if (p < 0) return fj_min(last, -1);  // its chunk lies below key 0
    const int chunk_first = p / rule.chunk * rule.chunk;
    if (rule.chunk - 1 < last - chunk_first) last = chunk_first + rule.chunk - 1;
  }
  return last;
}

FJ_DEVICE bool key_visible(const MaskRule& rule, int row, int key, int seqlen_q, int seqlen_k) {
  return key >= first_visible_key(rule, row, seqlen_q, seqlen_k) && key <= last_visible_key(rule, row, seqlen_q, seqlen_k) &&
         key >= 0 && key < seqlen_k;
}

// How many keys row `row` sees (first_visible_key .. last_visible_key).
FJ_DEVICE int visible_key_count(const MaskRule& rule, int row, int seqlen_q, int seqlen_k) {
  return fj_max(0, last_visible_key(rule, row, seqlen_q, seqlen_k) - first_visible_key(rule, row, seqlen_q, seqlen_k) + 1);
}

// The K/V blocks query block m_block (block_m queries: with packed heads, tokens_per_tile) visits
// under a rule: [n_min, n_max), with the blocks that need the mask at both ends. Walked right to
// left as kv_block_range's: the first n_masked_right steps (n_max - 1 down) and the last
// n_masked_left (n_min + n_masked_left - 1 down to n_min) need the mask; a block between them is
// visible whole to every row of the query block. The rows are the block's queries inside the
// sequence (a block past the sequence's queries, a cluster's padding CTA, counts all its rows).
// A block no row sees is never visited, on either side: a window of w keys visits about
// w / block_n + 1 blocks a row at any length.
struct MaskBlockRange {
  int n_min, n_max;
  int n_masked_right;  // top blocks that need the mask
  int n_masked_left;   // bottom blocks that need the mask
  FJ_DEVICE int count() const { return n_max - n_min; }
  FJ_DEVICE bool needs_mask(int n) const { return n >= n_max - n_masked_right || n < n_min + n_masked_left; }
};

FJ_DEVICE MaskBlockRange mask_block_range(const MaskRule& rule, int m_block, int block_m, int block_n, int seqlen_q, int seqlen_k) {
  const int first_row = m_block * block_m;
  const int last_row = first_row < seqlen_q ? fj_min((m_block + 1) * block_m, seqlen_q) - 1 : (m_block + 1) * block_m - 1;
  // The run of visible keys grows with the row at both ends (above): the block's first row has the
  // lowest first and last keys, its last row the highest. Rows that see nothing lead (p < 0, first
  // key 0: they never pull the range below its lowest visible key) or trail (padding rows past the
  // keys, last key seqlen_k - 1: a block of them alone may see nothing, lowest > highest).
  const int lowest = first_visible_key(rule, first_row, seqlen_q, seqlen_k);
  const int highest = fj_min(seqlen_k - 1, last_visible_key(rule, last_row, seqlen_q, seqlen_k));
  MaskBlockRange r;
  r.n_max = lowest <= highest ? (highest + block_n) / block_n : 0;  // highest + 1 keys, rounded up
  r.n_min = fj_min(lowest / block_n, r.n_max);
  // A block is whole for every row when it lies inside the last row's first key and the first row's
  // last key (and below the key-length tail): blocks [whole_lo, whole_hi).
  const int whole_first = first_visible_key(rule, last_row, seqlen_q, seqlen_k);
  const int whole_last = fj_min(last_visible_key(rule, first_row, seqlen_q, seqlen_k), seqlen_k - 1);
  const int whole_lo = fj_min(fj_max((whole_first + block_n - 1) / block_n, r.n_min), r.n_max);
  const int whole_hi = fj_min(fj_max((whole_last + 1) / block_n, whole_lo), r.n_max);
  r.n_masked_right = r.n_max - whole_hi;
  r.n_masked_left = whole_hi > whole_lo ? whole_lo - r.n_min : r.count() - r.n_masked_right;
  return r;
}

// Key splits under a rule: a sequence's splits cut only the blocks its rows see, from its first
// row's first visible key (the lowest of any row) to its last key (the last row always sees key
// seqlen_k - 1), so the split count and each split's blocks follow the visible keys: a decode
// step with a window of w keys splits w keys at any length. Split s holds blocks n_begin + s x
// blocks_per_split onward; the count is key_split's over those blocks (split_blocks and
// num_splits as there). A sequence without queries keeps key_split's (its splits write nothing).
struct VisibleKeySplit {
  int n_begin;  // the sequence's lowest visible block
  int blocks_per_split, splits;
};

FJ_DEVICE VisibleKeySplit visible_key_split(const MaskRule& rule, int seqlen_q, int seqlen_k, int block_n, int num_splits,
                                            int split_blocks) {
  const int blocks = (seqlen_k + block_n - 1) / block_n;
  const int n_begin = seqlen_q > 0 ? fj_min(first_visible_key(rule, 0, seqlen_q, seqlen_k) / block_n, blocks) : 0;
  const KeySplit ks = key_split(seqlen_k - n_begin * block_n, block_n, num_splits, split_blocks);
  return {n_begin, ks.blocks_per_split, ks.splits};
}

// The part of a tile's range in split `split`: each end's masked blocks stay masked.
FJ_DEVICE MaskBlockRange split_block_range(const MaskBlockRange& r, const VisibleKeySplit& ks, int split) {
  const int lo = ks.n_begin + split * ks.blocks_per_split, hi = lo + ks.blocks_per_split;
  MaskBlockRange s;
  s.n_min = fj_max(r.n_min, lo);
  s.n_max = fj_max(s.n_min, fj_min(r.n_max, hi));
  s.n_masked_right = fj_max(0, s.n_max - fj_max(s.n_min, r.n_max - r.n_masked_right));
  s.n_masked_left = fj_max(0, fj_min(s.n_max, r.n_min + r.n_masked_left) - s.n_min);
  return s;
}

// The walk over a tile's blocks, one description for the producer (which loads block(i) at step
// i) and the consumers (which also mask where needs_mask(i)): right to left as today, the masked
// steps first ([0, unmasked_begin): the right edge), then the unmasked ones, then the masked
// left edge ([unmasked_end, steps)). The consumers can keep one loop per part, each with its mask
// fixed at compile time. A block list (block sparsity) walks the same way: BlockListWalk.
struct BlockWalk {
  int n_top;  // the first step's block (n_max - 1)
  int steps, unmasked_begin, unmasked_end;
  FJ_DEVICE int block(int i) const { return n_top - i; }
  FJ_DEVICE bool needs_mask(int i) const { return i < unmasked_begin || i >= unmasked_end; }
};
FJ_DEVICE BlockWalk block_walk(const MaskBlockRange& r) {
  return {r.n_max - 1, r.count(), r.n_masked_right, r.count() - r.n_masked_left};
}

// A list of blocks in walk order, the ones that need the mask at either end as in BlockWalk.
struct BlockListWalk {
  const int* blocks;
  int steps, unmasked_begin, unmasked_end;
  FJ_DEVICE int block(int i) const { return blocks[i]; }
  FJ_DEVICE bool needs_mask(int i) const { return i < unmasked_begin || i >= unmasked_end; }
};
