// The shared-memory tile layout (templates/tile_layout.cuh, compiled here as host code, as the kernel
// uses it): the 128-byte swizzle TMA writes, and kv_load=cpasync's copy units, which must put every
// 16 bytes of a K/V block exactly where TMA would.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../templates/tile_layout.cuh"

namespace flashjit {
namespace {

// TMA's SWIZZLE_128B, from its definition: within each 1024-byte group of eight 128-byte rows,
// address bits 4-6 (the 16-byte unit) are XOR-ed with bits 7-9 (the row in the group).
uint32_t tma_swizzle_128b(uint32_t linear) { return linear ^ (((linear >> 7) & 7u) << 4); }

TEST(TileLayout, SwizzledOffsetIsTmasSwizzleOfTheLinearLayout) {
  for (int rows : {16, 64, 80, 128, 192, 256})
    for (int chunks : {1, 2, 3, 4})
      for (int row = 0; row < rows; ++row)
        for (int col = 0; col < 64 * chunks; ++col) {
          const uint32_t linear = uint32_t((col / 64) * rows * 128 + row * 128 + (col % 64) * 2);
          ASSERT_EQ(swizzled_offset(row, col, rows), tma_swizzle_128b(linear)) << rows << " " << chunks << " " << row << " " << col;
        }
}

// Every unit of a block lands on the 16 bytes TMA gives its (row, column), each 16 bytes of the tile
// once, and consecutive units read consecutive 16 bytes of a row (the coalesced order).
TEST(TileLayout, CopyUnitsCoverTheTileOnceWhereTmaWouldWrite) {
  for (int rows : {16, 48, 64, 80, 112, 128, 176, 256})
    for (int chunks : {1, 2, 3, 4}) {
      const int units = rows * chunks * 8;
      std::vector<int> hits(size_t(units), 0);
      for (int u = 0; u < units; ++u) {
        const CopyUnit at = copy_unit(u, chunks, rows);
        ASSERT_EQ(at.offset, swizzled_offset(at.row, at.col, rows)) << u;
        ASSERT_EQ(at.offset % 16, 0u);
        ASSERT_LT(at.offset / 16, uint32_t(units));
        ++hits[at.offset / 16];
        if (u > 0 && u % (chunks * 8) != 0) {  // same row: the next 8 columns
          const CopyUnit before = copy_unit(u - 1, chunks, rows);
          ASSERT_EQ(at.row, before.row);
          ASSERT_EQ(at.col, before.col + 8);
        }
      }
      for (int i = 0; i < units; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "16-byte unit " << i << " of " << rows << " x " << chunks;
    }
}

}  // namespace
}  // namespace flashjit
