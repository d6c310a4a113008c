// tile_layout.cuh: where a 16-bit element of a shared-memory tile sits. Tiles are [chunks][rows][64
// columns], each 128-byte row swizzled as TMA's SWIZZLE_128B writes it (16-byte unit j of row r at
// unit j ^ (r % 8); tiles 1024-byte aligned). The one statement of the layout: the kernel's
// ldmatrix, stmatrix and O-row addressing use it; rendered into every kernel
// after ptx.cuh, and compiled on the host by tests/tile_layout_test.cpp.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif

// Byte offset of element (row, col) of a [chunks][tile_rows][64] tile.
FJ_DEVICE uint32_t swizzled_offset(int row, int col, int tile_rows) {
  const int byte_in_row = (col % 64) * 2;
  return (col / 64) * (tile_rows * 128) + row * 128 + (((byte_in_row >> 4) ^ (row & 7)) << 4) + (byte_in_row & 15);
}
