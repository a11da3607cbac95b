// SPDX-License-Identifier: Apache-2.0
// Host-side checks of the Hopper layout functions (tile_sm90.h) against addresses worked out
// by hand from the PTX ISA's 128-byte swizzle (9.7.15.5.1.2) and descriptor format
// (9.7.15.5.1.2.2). They need no GPU: a wrong swizzle or descriptor field fails here, in CI,
// before it can scramble a tile on the device.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "flashsteps/tile_sm90.h"

namespace flashsteps {
namespace {

using sm90::swizzle_128b;

TEST(Sm90Layout, SwizzleRowZeroIsPlainRowMajor) {
  // Row 0: unit u ^ 0 = u, so column c sits at byte 2 c.
  for (int c = 0; c < 64; ++c) EXPECT_EQ(swizzle_128b(64, 0, c), 2u * c);
}

TEST(Sm90Layout, SwizzleXorsTheSixteenByteUnitWithTheRow) {
  // Row 1, column 0 (unit 0): unit 0 ^ 1 = 1 -> byte 128 + 16.
  EXPECT_EQ(swizzle_128b(64, 1, 0), 128u + 16u);
  // Row 3, column 21 (unit 2, element 5 of it): unit 2 ^ 3 = 1 -> 3 * 128 + 16 + 10.
  EXPECT_EQ(swizzle_128b(64, 3, 21), 3u * 128 + 16 + 10);
  // Row 7, column 63 (unit 7, element 7): unit 7 ^ 7 = 0 -> 7 * 128 + 14.
  EXPECT_EQ(swizzle_128b(64, 7, 63), 7u * 128 + 14);
  // The pattern repeats every 8 rows (1024 bytes): row 9 is row 1 moved by 1024.
  EXPECT_EQ(swizzle_128b(64, 9, 0), 1024u + 128u + 16u);
}

TEST(Sm90Layout, ColumnsPastSixtyFourGoToTheNextChunk) {
  // A 128-row tile: chunk 1 starts after 128 rows of 128 bytes.
  EXPECT_EQ(swizzle_128b(128, 0, 64), 128u * 128);
  EXPECT_EQ(swizzle_128b(128, 5, 64 + 8), 128u * 128 + 5 * 128 + (1 ^ 5) * 16);
}

TEST(Sm90Layout, EightRowsOfOneColumnHitEightBankGroups) {
  // What the swizzle is for: the 16-byte units holding column c of rows 0..7 are 8 distinct
  // 16-byte bank groups (byte offset / 16 mod 8), so a column read has no bank conflict.
  for (int c = 0; c < 64; c += 8) {
    std::set<unsigned> groups;
    for (int r = 0; r < 8; ++r) groups.insert(swizzle_128b(64, r, c) / 16 % 8);
    EXPECT_EQ(groups.size(), 8u) << "column " << c;
  }
}

TEST(Sm90Layout, EveryElementHasItsOwnByte) {
  // A bijection: 128 rows x 128 columns cover the tile's bytes exactly once.
  std::set<unsigned> seen;
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 128; ++c) EXPECT_TRUE(seen.insert(swizzle_128b(128, r, c)).second) << r << ", " << c;
  EXPECT_EQ(*seen.rbegin(), 128u * 128 * 2 - 2);
}

TEST(Sm90Layout, DescriptorFields) {
  // Start address 0x1A400 (a 1024-byte boundary, plus 32 bytes: k-step 1 of a K-major tile).
  const std::uint64_t k = sm90::desc_k_major(0x1A400 + 32);
  EXPECT_EQ(k & 0x3FFF, (0x1A400u + 32) >> 4);   // bits 0-13: address >> 4
  EXPECT_EQ((k >> 16) & 0x3FFF, 1u);              // bits 16-29: leading offset, unused (1)
  EXPECT_EQ((k >> 32) & 0x3FFF, 1024u >> 4);      // bits 32-45: 8-row groups 1024 bytes apart
  EXPECT_EQ((k >> 49) & 0x7, 0u);                 // bits 49-51: base offset 0
  EXPECT_EQ(k >> 62, 1u);                         // bits 62-63: 128-byte swizzle
  // MN-major V of a 128-key tile: 64-column chunks 128 * 128 bytes apart.
  const std::uint64_t v = sm90::desc_mn_major(0x8000, 128 * 128);
  EXPECT_EQ(v & 0x3FFF, 0x8000u >> 4);
  EXPECT_EQ((v >> 16) & 0x3FFF, (128u * 128) >> 4);
  EXPECT_EQ((v >> 32) & 0x3FFF, 1024u >> 4);
  EXPECT_EQ(v >> 62, 1u);
}

TEST(Sm90Layout, AdvancingADescriptorIsEncodingTheMovedAddress) {
  // Every k-step offset the Hopper steps use (S: chunk * rows * 128 + 32 * (k % 4) for up to
  // 256 rows and 4 chunks; P V: 16 keys * 128 bytes for up to 256 keys), from tile bases on
  // 1024-byte boundaries anywhere in the 227 KiB a block may use.
  for (std::uint32_t base = 0; base + 64 * 1024 <= 227 * 1024; base += 1024 * 7) {
    for (std::uint32_t bytes = 0; bytes < 64 * 1024; bytes += 32) {
      ASSERT_EQ(sm90::desc_advance(sm90::desc_k_major(base), bytes), sm90::desc_k_major(base + bytes))
          << "base " << base << " + " << bytes;
      ASSERT_EQ(sm90::desc_advance(sm90::desc_mn_major(base, 176 * 128), bytes), sm90::desc_mn_major(base + bytes, 176 * 128))
          << "base " << base << " + " << bytes;
    }
  }
}

TEST(Sm90TensorMap, ZeroStrideIsNamedBeforeTheDriverIsAsked) {
  // A broadcast view (stride 0 over 2 heads): TMA takes no zero stride, so the map is refused
  // with the field's name before any driver call (no GPU needed).
  TensorView k;
  k.data = reinterpret_cast<void*>(0x1000000);  // never dereferenced
  k.dtype = DType::bf16;
  k.shape[0] = 1, k.shape[1] = 2, k.shape[2] = 16, k.shape[3] = 64;
  k.stride[0] = 2 * 16 * 64, k.stride[1] = 0, k.stride[2] = 64, k.stride[3] = 1;
  try {
    sm90::make_tensor_map(k, "k", 128);
    ADD_FAILURE() << "accepted a zero stride";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("k.stride[1] = 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashsteps
