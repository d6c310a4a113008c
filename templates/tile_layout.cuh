// tile_layout.cuh: where a 16-bit element of a shared-memory tile sits. Tiles are [chunks][rows][64
// columns], each 128-byte row swizzled as TMA's SWIZZLE_128B writes it (16-byte unit j of row r at
// unit j ^ (r % 8); tiles 1024-byte aligned). The one statement of the layout: the kernel's
// ldmatrix and stmatrix addressing and kv_load=cpasync's copies (which must write exactly what TMA
// would) use it; rendered into every kernel after ptx.cuh, and compiled on the host by
// tests/tile_layout_test.cpp.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif

// Byte offset of element (row, col) of a [chunks][tile_rows][64] tile.
FJ_DEVICE uint32_t swizzled_offset(int row, int col, int tile_rows) {
  const int byte_in_row = (col % 64) * 2;
  return (col / 64) * (tile_rows * 128) + row * 128 + (((byte_in_row >> 4) ^ (row & 7)) << 4) + (byte_in_row & 15);
}

// kv_load=cpasync: 16-byte unit u of a [chunks][tile_rows][64] block copy. Consecutive units run
// along a row's columns (a row is chunks x 8 units), so consecutive threads read consecutive 16
// bytes of global memory: the unit's row, first column, and offset in the tile.
struct CopyUnit {
  int row, col;
  uint32_t offset;
};
FJ_DEVICE CopyUnit copy_unit(int u, int chunks, int tile_rows) {
  const int units_per_row = chunks * 8, row = u / units_per_row, col = (u % units_per_row) * 8;
  return {row, col, swizzled_offset(row, col, tile_rows)};
}
