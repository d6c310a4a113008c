// The shared-memory tile layout (templates/tile_layout.cuh, compiled here as host code, as the kernel
// uses it): the 128-byte swizzle TMA writes.
#include <gtest/gtest.h>

#include <cstdint>

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

TEST(TileLayout, ByteOffsetsAreTmasSwizzleForBothElementTypes) {
  for (bool e4m3 : {false, true}) {
    const ElementType type = element_type(e4m3);
    EXPECT_EQ(type.bytes * type.chunk_columns, 128);  // a chunk is the swizzle span
    EXPECT_EQ(type.bytes * type.k_step, 32);          // a wgmma k step is 32 bytes
  }
  for (int rows : {16, 64, 96, 128, 256})
    for (int chunks : {1, 2})
      for (int row = 0; row < rows; ++row)
        for (int byte = 0; byte < 128 * chunks; ++byte) {
          const uint32_t linear = uint32_t((byte / 128) * rows * 128 + row * 128 + byte % 128);
          ASSERT_EQ(swizzled_byte_offset(row, byte, rows), tma_swizzle_128b(linear)) << rows << " " << row << " " << byte;
        }
}

}  // namespace
}  // namespace flashjit
