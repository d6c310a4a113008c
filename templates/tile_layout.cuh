// tile_layout.cuh: the element-type seam and where an element of a shared-memory tile sits. Tiles
// are [chunks][rows][128 bytes], each 128-byte row swizzled as TMA's SWIZZLE_128B writes it (16-byte
// unit j of row r at unit j ^ (r % 8); tiles 1024-byte aligned); a chunk holds 64 16-bit or 128 e4m3
// columns. The one statement of both: the kernel's ldmatrix, stmatrix, cp.async, transpose and
// O-row addressing, its GEMMs' k steps and TMA boxes, the host's tile sizes and shared-memory
// accounting (src/config), its tensor maps (src/driver) and the renderer's wgmma shapes read them.
// Rendered into every kernel after ptx.cuh, and compiled on the host by tests/tile_layout_test.cpp.

#ifndef FJ_TILE_LAYOUT_CUH
#define FJ_TILE_LAYOUT_CUH
#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif

// An operand element type: 16-bit (fp16, bf16) or e4m3 (dtype=e4m3's Q, K and V).
struct ElementType {
  int bytes;          // per element
  int chunk_columns;  // columns per 128-byte swizzle chunk (a TMA box's width)
  int k_step;         // the wgmma's k: 16 (16-bit) or 32 (e4m3), 32 bytes either way
};
FJ_DEVICE constexpr ElementType element_type(bool e4m3) { return e4m3 ? ElementType{1, 128, 32} : ElementType{2, 64, 16}; }

// Byte offset of byte `byte` of row `row` in a [chunks][tile_rows][128 bytes] tile.
FJ_DEVICE uint32_t swizzled_byte_offset(int row, int byte, int tile_rows) {
  const int byte_in_row = byte % 128;
  return (byte / 128) * (tile_rows * 128) + row * 128 + (((byte_in_row >> 4) ^ (row & 7)) << 4) + (byte_in_row & 15);
}

// Byte offset of 16-bit element (row, col) of a [chunks][tile_rows][64] tile (e4m3 tiles are
// addressed in pairs of elements the same way, as ldmatrix reads them): swizzled_byte_offset(row,
// 2 col, tile_rows), spelled out. NOTES: written through swizzled_byte_offset, every default
// kernel grew by 8-24 instructions (its address arithmetic reordered; the main loops the same).
FJ_DEVICE uint32_t swizzled_offset(int row, int col, int tile_rows) {
  const int byte_in_row = (col % 64) * 2;
  return (col / 64) * (tile_rows * 128) + row * 128 + (((byte_in_row >> 4) ^ (row & 7)) << 4) + (byte_in_row & 15);
}
// The tensors the producer stages in e4m3 before they reach the ring (staging slots each): K and V
// with an FP8 cache (widened), V alone with FP8 operands (transposed; K goes straight into the
// ring), none otherwise. NOTES (correctness): the kernel's barriers sit after this many tensors'
// slots and the host allocates exactly that; each side once counted its own (the kernel two
// tensors, the host one with FP8 operands: the barriers fell outside the allocation).
FJ_DEVICE constexpr int staged_tensors(bool kv_fp8, bool fp8_operands) { return kv_fp8 ? 2 : fp8_operands ? 1 : 0; }
// An FP8-cache staging slot [rows][pieces x 16 bytes] (attention_fwd.cuh: staged_fp8_piece): the unit
// (16 bytes) that piece c of row r occupies. Rows written whole (plain: bulk copies) in order; rows
// by cp.async of 4 pieces or a multiple of 8 with each 128-byte line's units XOR 2 x (the line's row
// mod 4: r, or r / 2 at two rows a line), other widths in order. NOTES: the XOR keeps the loading
// warp's cp.async (eight lanes: four rows x a pair of units) and the widening warps' loads (eight
// lanes: eight units of a row) on distinct banks (tests/tile_layout_test.cpp counts both); in order,
// 128-byte rows put the loader's four rows on the same banks.
FJ_DEVICE constexpr uint32_t staged_fp8_unit(int r, int c, int pieces, bool plain) {
  const uint32_t unit = (uint32_t)(r * pieces + c);
  if (plain || (pieces != 4 && pieces % 8 != 0)) return unit;
  return unit ^ ((((uint32_t)(pieces == 4 ? r >> 1 : r)) & 3u) << 1);
}
// v_in_k=1's hand-over area between the ring (or the staging slots) and the barriers: P, the tile's
// [block_m][block_n] 16-bit probabilities in one chunk of 128-byte swizzled rows (block_n 64 fills
// a row, 32 its first half), then three floats a row: the factor O owes before this block's P V,
// and the row's final max and sum; then an mbarrier (8 bytes): the first warpgroup's scores done;
// then chunk_bars mbarriers (v_in_k=1: one a 64-column chunk of each K slot, that chunk landed).
// NOTES (correctness): the kernel places its barriers after these bytes and the host allocates them
// (one rule, as staged_tensors).
FJ_DEVICE constexpr int paired_p_tile_bytes(int block_m) { return block_m * 128; }
FJ_DEVICE constexpr int paired_chunk_bars_offset(int block_m) { return paired_p_tile_bytes(block_m) + 3 * block_m * 4 + 8; }
FJ_DEVICE constexpr int paired_handover_bytes(bool pairs_o, int block_m, int chunk_bars) {
  return pairs_o ? paired_chunk_bars_offset(block_m) + 8 * chunk_bars : 0;
}
// dim_split=1's score exchange between the two CTAs of a cluster (attention_fwd.cuh: kDimSplit), in
// the same place: per consumer warpgroup an inbox for the peer's partial scores of its 64 rows
// (fp32, block_n columns), then the mbarriers: each warp's rows filled (four a warpgroup), and per
// warpgroup one that says the peer has read the inbox this CTA filled. NOTES (correctness): the
// kernel's barriers sit after these bytes and the host allocates them (one rule, as
// paired_handover_bytes).
FJ_DEVICE constexpr int score_inbox_bytes(int block_n) { return 64 * block_n * 4; }
FJ_DEVICE constexpr int score_exchange_bytes(bool dim_split, int block_n) { return dim_split ? 2 * score_inbox_bytes(block_n) + 10 * 8 : 0; }
// seesaw=1's halves of a K slot (attention_fwd.cuh: kSeesaw): which of the slot's 64-column chunks
// (V's left v_chunks, V's right v_chunks, then K's rest) a half load carries. Half 0 is the pair's
// first block's early half (V's left columns), 1 its late half (V's right and the rest), 2 the
// second block's early half (V's right), 3 its late half (V's left and the rest); -1 the whole tile.
// A block's P crosses in its slot's chunk 2 v_chunks, in both late halves.
FJ_DEVICE constexpr bool seesaw_chunk_in_half(int half, int c, int v_chunks) {
  if (half < 0) return true;
  const bool second = half >= 2, late = (half & 1) != 0;
  if (c < v_chunks) return second == late;
  if (c < 2 * v_chunks) return second != late;
  return late;
}
#endif  // FJ_TILE_LAYOUT_CUH
