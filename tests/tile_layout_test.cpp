// The shared-memory tile layout (templates/tile_layout.cuh, compiled here as host code, as the kernel
// uses it): the 128-byte swizzle TMA writes.
#include <gtest/gtest.h>

#include <algorithm>
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

// seesaw=1's slot halves (MLA's 576 columns: V's 512 in 4 + 4 chunks, then the rotary chunk): each
// block's early and late halves cover its slot once; warpgroup 0's half of V (the left chunks) is in
// the first block's early half and the second block's late half, warpgroup 1's the other way round,
// and the chunk P crosses in is in both late halves (released by the warpgroup reading that P).
TEST(TileLayout, SeesawHalvesSplitEachSlotOnceWithPInTheLateHalves) {
  for (int v_chunks : {4, 2})
    for (int chunks : {2 * v_chunks + 1, 2 * v_chunks + 2}) {
      for (int first : {0, 2}) {
        int early = 0, late = 0;
        for (int c = 0; c < chunks; ++c) {
          const bool in_early = seesaw_chunk_in_half(first, c, v_chunks), in_late = seesaw_chunk_in_half(first + 1, c, v_chunks);
          EXPECT_NE(in_early, in_late) << v_chunks << " " << chunks << " " << first << " " << c;
          early += in_early, late += in_late;
          EXPECT_TRUE(seesaw_chunk_in_half(-1, c, v_chunks));
        }
        EXPECT_EQ(early, v_chunks);
        EXPECT_EQ(late, chunks - v_chunks);
      }
      for (int c = 0; c < v_chunks; ++c) {
        EXPECT_TRUE(seesaw_chunk_in_half(0, c, v_chunks) && seesaw_chunk_in_half(3, c, v_chunks)) << c;
        EXPECT_TRUE(seesaw_chunk_in_half(1, v_chunks + c, v_chunks) && seesaw_chunk_in_half(2, v_chunks + c, v_chunks)) << c;
      }
      EXPECT_TRUE(seesaw_chunk_in_half(1, 2 * v_chunks, v_chunks) && seesaw_chunk_in_half(3, 2 * v_chunks, v_chunks));
      EXPECT_FALSE(seesaw_chunk_in_half(0, 2 * v_chunks, v_chunks) || seesaw_chunk_in_half(2, 2 * v_chunks, v_chunks));
    }
}

// An FP8-cache staging slot's layout (staged_fp8_unit): every (row, piece) has its own unit inside the
// slot, and both sides' shared-memory accesses fall on distinct banks where the NOTES say so. A
// 16-byte access by 32 lanes goes in four phases of eight lanes; a phase takes as many wavefronts as
// the most lanes on one bank group (unit % 8). Loader: cp_async_fp8_row_pairs (lane l, pass g: row
// 16 g + l / 2, piece 2 k + (l & 1)); widening: widen_fp8_block (consecutive lanes, consecutive
// pieces of the block).
int wavefronts(const uint32_t (&units)[32]) {
  int total = 0;
  for (int phase = 0; phase < 4; ++phase) {
    int on_group[8] = {}, most = 0;
    for (int l = 8 * phase; l < 8 * phase + 8; ++l) most = std::max(most, ++on_group[units[l] % 8]);
    total += most;
  }
  return total;
}

TEST(TileLayout, Fp8StagingUnitsAreOnePerPieceAndConflictFree) {
  for (bool plain : {false, true})
    for (int pieces = 4; pieces <= 36; pieces += 1)
      for (int rows : {16, 48, 64, 128, 256}) {
        std::vector<int> seen(size_t(rows * pieces), 0);
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < pieces; ++c) {
            const uint32_t u = staged_fp8_unit(r, c, pieces, plain);
            ASSERT_LT(u, uint32_t(rows * pieces)) << pieces << " " << rows << " " << r << " " << c;
            ++seen[u];
          }
        for (int count : seen) ASSERT_EQ(count, 1) << pieces << " " << rows << " plain " << plain;
      }
  // The cp.async layout's banks: 64-, 128- and 256-byte rows conflict-free on both sides (4 wavefronts
  // an access), 96-byte rows too in order; the widening side conflict-free at every width.
  for (int pieces : {4, 6, 8, 12, 16})
    for (int rows : {64, 128}) {
      int loader = 0, widening = 0;
      for (int g = 0; g < rows / 16; ++g)
        for (int k = 0; k < pieces / 2; ++k) {
          uint32_t units[32];
          for (int l = 0; l < 32; ++l) units[l] = staged_fp8_unit(16 * g + l / 2, 2 * k + (l & 1), pieces, false);
          loader = std::max(loader, wavefronts(units));
        }
      for (int u0 = 0; u0 < rows * pieces; u0 += 32) {
        uint32_t units[32];
        for (int l = 0; l < 32; ++l) {
          const int u = (u0 + l) % (rows * pieces);
          units[l] = staged_fp8_unit(u / pieces, u % pieces, pieces, false);
        }
        widening = std::max(widening, wavefronts(units));
      }
      EXPECT_EQ(widening, 4) << pieces << " " << rows;
      EXPECT_EQ(loader, pieces == 12 ? 8 : 4) << pieces << " " << rows;  // 192-byte rows: 2-way on the loader's side
    }
  // In order (as bulk copies write), 128-byte rows would put the loader's four rows on one bank pair.
  uint32_t plain_units[32];
  for (int l = 0; l < 32; ++l) plain_units[l] = staged_fp8_unit(l / 2, l & 1, 8, true);
  EXPECT_EQ(wavefronts(plain_units), 16);
}

}  // namespace
}  // namespace flashjit
