// Split-KV decode without a GPU: the key split and head packing rules (templates/visibility.cuh,
// compiled here as host code, as the kernel, the combine and the host use them), the launch's
// geometry and split count, the workspace size, and the C API's checks of the decode fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../templates/visibility.cuh"
#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"
#include "launch/attention_launch.hpp"
#include "support/args_refusals.hpp"

namespace flashjit {
namespace {

// Every visible block of a tile is in exactly one split below the sequence's split count, the
// masked ones stay masked (the range's top blocks), and no split starts past the keys.
TEST(KeySplit, SplitsCoverEveryVisibleBlockOnceAndKeepTheMask) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    const bool causal = rng() % 2;
    const int block_n = 16 * (1 + rng() % 16), block_m = 1 + rng() % 128;
    const int seqlen_k = rng() % 5 == 0 ? int(rng() % 3) : int(rng() % 5000);
    const int seqlen_q = 1 + int(rng() % 40);
    const int num_splits = 1 + int(rng() % 128);
    const int split_blocks = rng() % 3 == 0 ? 1 + int(rng() % 12) : 0;
    const KeySplit ks = key_split(seqlen_k, block_n, num_splits, split_blocks);
    const int blocks = (seqlen_k + block_n - 1) / block_n;
    ASSERT_GE(ks.splits, 1);
    ASSERT_LE(ks.splits, num_splits);
    if (split_blocks == 0 && blocks > 0) {  // runs of ceil(blocks / num_splits): the last one not empty
      const int per = (blocks + num_splits - 1) / num_splits;
      ASSERT_EQ(ks.blocks_per_split, per);
      ASSERT_EQ(ks.splits, (blocks + per - 1) / per);
      ASSERT_GT(blocks, (ks.splits - 1) * per);
    }
    if (split_blocks > 0 && blocks <= num_splits * split_blocks) ASSERT_EQ(ks.splits, std::max(1, (blocks + split_blocks - 1) / split_blocks));
    const int m_blocks = (seqlen_q + block_m - 1) / block_m;
    for (int m = 0; m < m_blocks; ++m) {
      const BlockRange whole = kv_block_range(causal, m, block_m, block_n, seqlen_q, seqlen_k);
      std::vector<int> seen(size_t(std::max(blocks, 1)), 0), masked(size_t(std::max(blocks, 1)), 0);
      for (int s = 0; s < ks.splits; ++s) {
        const BlockRange part = split_block_range(whole, ks, s);
        ASSERT_LE(part.n_min, part.n_max);
        ASSERT_GE(part.n_masked, 0);
        ASSERT_LE(part.n_masked, part.count());
        for (int n = part.n_min; n < part.n_max; ++n) {
          ++seen[size_t(n)];
          masked[size_t(n)] = n >= part.n_max - part.n_masked;
        }
      }
      if (split_blocks == 0 || blocks <= num_splits * split_blocks) {
        for (int n = 0; n < blocks; ++n) {
          const bool in_range = n >= whole.n_min && n < whole.n_max;
          ASSERT_EQ(seen[size_t(n)], in_range ? 1 : 0) << "block " << n << " trial " << trial;
          if (in_range) ASSERT_EQ(masked[size_t(n)] != 0, n >= whole.n_max - whole.n_masked) << "block " << n;
        }
      }
    }
  }
}

TEST(KeySplit, FixedSplitSizeDependsOnTheSequenceAlone) {
  // The same sequence in any launch: the same splits, whatever the launch's count.
  for (int seqlen_k : {1, 127, 128, 129, 4095, 4096, 30000}) {
    const KeySplit alone = key_split(seqlen_k, 128, 128, 4);
    for (int count : {8, 64, 128}) {
      const KeySplit in_batch = key_split(seqlen_k, 128, count, 4);
      if ((seqlen_k + 127) / 128 > 4 * count) continue;  // does not fit that launch (the host refuses it)
      EXPECT_EQ(in_batch.splits, alone.splits);
      EXPECT_EQ(in_batch.blocks_per_split, alone.blocks_per_split);
    }
  }
  EXPECT_EQ(key_split(0, 128, 16, 0).splits, 1);  // no keys: one split, which writes -inf
}

TEST(PackHeads, LargestPowerOfTwoDividingTheGroup) {
  const struct {
    int group, block_m, heads;
  } cases[] = {{1, 64, 1}, {2, 64, 2}, {3, 64, 1}, {4, 64, 4}, {6, 64, 2}, {8, 64, 8}, {12, 128, 4}, {16, 64, 16},
               {128, 64, 64}, {96, 64, 32}};
  for (const auto& c : cases) EXPECT_EQ(pack_heads_for(c.group, c.block_m), c.heads) << c.group;
}

AttentionArgs decode_args(const KernelConfig& c, int batch, int seqlen_k, int hq, int hkv, int max_splits) {
  AttentionArgs a = attention_extents(batch, 1, seqlen_k, hq, hkv);
  a.engine.total_q = batch;
  a.decode.max_splits = max_splits;
  (void)c;
  return a;
}

TEST(DecodeGeometry, PackedHeadsAndSplitsFillTheSMs) {
  auto config = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1"));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->spec.block_m, 64);  // one consumer warpgroup for decode
  EXPECT_EQ(config->spec.ctas_per_sm, 1);
  EXPECT_EQ(config->spec.stages, 3);    // the deepest ring that fits with two Q buffers
  EXPECT_EQ(config->more_kernel_names, (std::vector<std::string>{"flashjit_attention_combine", "flashjit_merge_states"}));
  // 32/8 heads: 4 heads a tile, 16 queries of them; 8 head groups a sequence.
  const TileGeometry g = tile_geometry(*config, decode_args(*config, 8, 32768, 32, 8, 64), 132);
  EXPECT_EQ(g.pack_heads, 4);
  EXPECT_EQ(g.pack_shift, 2);
  EXPECT_EQ(g.tokens_per_tile, 16);
  EXPECT_EQ(g.tile_heads, 8);
  EXPECT_EQ(g.splits, 2);  // 64 tiles without splits on 132 SMs
  EXPECT_EQ(tile_geometry(*config, decode_args(*config, 1, 32768, 32, 8, 64), 132).splits, 16);
  EXPECT_EQ(tile_geometry(*config, decode_args(*config, 1, 32768, 32, 8, 8), 132).splits, 8);       // at most max_splits
  EXPECT_EQ(tile_geometry(*config, decode_args(*config, 1, 300, 32, 8, 64), 132).splits, 3);        // at most the key blocks
  EXPECT_EQ(tile_geometry(*config, decode_args(*config, 64, 32768, 32, 8, 64), 132).splits, 1);     // enough tiles already
  EXPECT_EQ(tile_geometry(*config, decode_args(*config, 8, 32768, 32, 8, 64), 0).splits, 64);       // one CTA a tile: max_splits
  EXPECT_EQ(attention_tile_count(*config, decode_args(*config, 8, 32768, 32, 8, 64), 2), 8u * 8u * 2u);
  // The workspace: max_splits x total_q x heads_q rows of (128 + 1) floats, each part 256-aligned.
  const AttentionArgs a = decode_args(*config, 8, 32768, 32, 8, 64);
  EXPECT_EQ(split_workspace_bytes(*config, a), uint64_t(64 * 8 * 32) * 128 * 4 + uint64_t(64 * 8 * 32) * 4);
  EXPECT_EQ(split_lse_offset(*config, a) % 256, 0u);
}

// Two CTAs an SM: half the shared memory each (the ring as deep as fits in 113 KB), 128 registers
// at entry split 24 + 232, and the splits and the persistent grid counted in resident CTAs.
TEST(DecodeGeometry, TwoCtasAnSmHalveTheBudgetAndDoubleTheSlots) {
  auto config = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,ctas_per_sm=2,block_n=64"));
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->spec.consumer_wgs, 1);
  EXPECT_EQ(config->spec.stages, 2);  // 3 x 32 KB of K/V + two 16 KB Q buffers exceed 113 KB
  EXPECT_LE(config->smem_bytes, kSharedMemoryPerSm / 2 - 1024);
  EXPECT_EQ(config->producer_regs + config->consumer_regs, 2 * 128);
  EXPECT_TRUE(check_register_budget(*config, 128));
  EXPECT_FALSE(check_register_budget(*config, 120));
  const AttentionArgs a = decode_args(*config, 8, 32768, 32, 8, 64);
  EXPECT_EQ(resident_ctas(*config, 132), 264);
  EXPECT_EQ(tile_geometry(*config, a, 132).splits, 4);  // 64 tiles x 4 fill 264 slots
  EXPECT_EQ(attention_launch_shape(*config, decode_args(*config, 64, 32768, 32, 8, 64), 132).grid_x, 264u);
  auto one = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,block_n=64"));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->spec.ctas_per_sm, 1);
  EXPECT_EQ(tile_geometry(*one, a, 132).splits, 2);
  EXPECT_EQ(attention_launch_shape(*one, decode_args(*one, 64, 32768, 32, 8, 64), 132).grid_x, 132u);
}

// Paged decode resolves to the tiles contiguous decode does (one CTA an SM, 128-key blocks at
// d <= 128, the deepest ring that fits): the two-CTA default of version 60 is gone (version 62).
TEST(DecodeSpec, PagedDecodeTakesTheContiguousDecodeTiles) {
  auto resolved = [](const char* text) { return to_string(make_config(*parse_spec(text))->spec); };
  for (auto [paged, contiguous] : {std::pair{"dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1", "dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1"},
                                   std::pair{"dtype=fp16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1", "dtype=fp16,head_dim=64,causal=1,varlen=1,pack_gqa=1,split_kv=1"}}) {
    std::string tiles = resolved(paged);
    tiles.erase(tiles.find(",paged=1"), 8);
    EXPECT_EQ(tiles, resolved(contiguous)) << paged;
    EXPECT_NE(tiles.find("ctas_per_sm=1"), std::string::npos) << tiles;
  }
  EXPECT_NE(resolved("dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1").find("block_n=128"), std::string::npos);
}

TEST(DecodeSpec, TwoCtasAnSmNeedOneConsumerWarpgroupAndFitHalfTheSharedMemory) {
  for (const char* spec : {"dtype=bf16,head_dim=128,ctas_per_sm=2,consumer_wgs=2", "dtype=bf16,head_dim=128,ctas_per_sm=3",
                           "dtype=bf16,head_dim=128,ctas_per_sm=2,stages=3", "dtype=bf16,head_dim=256,ctas_per_sm=2,block_n=64"}) {
    char reason[512] = {};
    EXPECT_EQ(flashjit_supported(spec, reason, sizeof(reason)), FLASHJIT_ERROR_INVALID_SPEC) << spec;
    const std::string why(reason);
    EXPECT_TRUE(why.find("ctas_per_sm") != std::string::npos || why.find("stages") != std::string::npos) << why;
  }
  char reason[512] = {};
  flashjit_supported("dtype=bf16,head_dim=128,ctas_per_sm=2,stages=3", reason, sizeof(reason));
  EXPECT_NE(std::string(reason).find("with ctas_per_sm=2"), std::string::npos) << reason;
  EXPECT_NE(std::string(reason).find("at most 1 stages"), std::string::npos) << reason;
  EXPECT_EQ(flashjit_supported("dtype=bf16,head_dim=128,ctas_per_sm=2", reason, sizeof(reason)), FLASHJIT_SUCCESS) << reason;
  auto config = make_config(*parse_spec("dtype=bf16,head_dim=128,ctas_per_sm=2"));
  ASSERT_TRUE(config);
  EXPECT_EQ(config->spec.block_m, 64);
  EXPECT_EQ(config->spec.stages, 1);  // block_n 128: one 64 KB stage with two Q buffers
}

TEST(DecodeSpec, PackedHeadsAndSplitsNeedPackedQueries) {
  for (const char* spec : {"dtype=bf16,head_dim=128,pack_gqa=1", "dtype=bf16,head_dim=128,paged=1,split_kv=1"}) {
    char reason[256] = {};
    EXPECT_EQ(flashjit_supported(spec, reason, sizeof(reason)), FLASHJIT_ERROR_INVALID_SPEC) << spec;
    EXPECT_NE(std::string(reason).find("varlen=1"), std::string::npos) << reason;
  }
  char reason[256] = {};
  EXPECT_EQ(flashjit_supported("dtype=fp16,head_dim=64,varlen=1,pack_gqa=1,split_kv=1", reason, sizeof(reason)), FLASHJIT_SUCCESS) << reason;
}

// combine=kernel (the second kernel) is the default and is not printed; combine=inline needs
// splits to merge.
TEST(DecodeSpec, CombineKernelIsTheDefaultAndInlineNeedsSplits) {
  auto merged = parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline");
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  EXPECT_TRUE(merged->inline_combine);
  EXPECT_EQ(to_string(*merged), "dtype=bf16,head_dim=128,causal=0,varlen=1,pack_gqa=1,split_kv=1,combine=inline");
  EXPECT_EQ(*parse_spec(to_string(*merged)), *merged);
  EXPECT_EQ(*parse_spec("dtype=bf16,head_dim=128,varlen=1,split_kv=1,combine=kernel"), *parse_spec("dtype=bf16,head_dim=128,varlen=1,split_kv=1"));
  auto alone = parse_spec("dtype=bf16,head_dim=128,varlen=1,combine=inline");
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().field, "combine");
  EXPECT_NE(alone.error().message.find("without split_kv=1"), std::string::npos) << alone.error().message;
  auto bad = parse_spec("dtype=bf16,head_dim=128,varlen=1,split_kv=1,combine=fused");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "combine");
  EXPECT_NE(bad.error().message.find("kernel or inline"), std::string::npos) << bad.error().message;
}

// combine=inline's counters, stated from the header's definitions (DECODE in flashjit.h) by
// enumerating keys and query rows, against the counting the kernel does (the tile walk's
// conditions and merge_counter_index from templates/visibility.cuh, compiled here).
// The definitions: a sequence's keys are cut into runs of whole K/V blocks, split_keys keys each
// when given, else ceil(blocks / S) blocks each (S the launch's split count); its splits are the
// runs that hold a key (one for a sequence without keys), and only a sequence of two or more, in a
// launch of two or more, writes partials. A packed row is token x pack_heads + the head's place in
// its group of pack_heads consecutive query heads (pack_heads: the largest power of two dividing
// heads_q / heads_kv, at most block_m); block_m packed rows make a query block, 64 a warpgroup.
// Every warpgroup of a query block that holds a row of a sequence with partials counts in once per
// split, at a counter of its own; every other counter gets nothing.
int pack_heads_by_definition(const AttentionSpec& s, int heads_q, int heads_kv) {
  int heads = 1;
  while (s.pack_gqa && heads * 2 <= s.block_m && (heads_q / heads_kv) % (heads * 2) == 0) heads *= 2;
  return heads;
}

int splits_by_enumeration(int keys, int block_n, int launch_splits, int split_keys) {
  const int blocks = (keys + block_n - 1) / block_n;
  const int run_keys = split_keys > 0 ? split_keys : block_n * std::max(1, (blocks + launch_splits - 1) / launch_splits);
  std::set<int> runs;
  for (int key = 0; key < keys; ++key) runs.insert(key / run_keys);
  return std::max<int>(1, int(runs.size()));
}

TEST(InlineCombine, EachRowsCounterGetsItsSequencesSplitCountOnce) {
  std::mt19937 rng(31);
  for (const char* spec : {"dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline",
                           "dtype=fp16,head_dim=64,varlen=1,split_kv=1,consumer_wgs=2,combine=inline",
                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline"}) {
    SCOPED_TRACE(spec);
    auto config = make_config(*parse_spec(spec));
    ASSERT_TRUE(config) << config.error().message;
    const int block_n = config->spec.block_n, block_m = config->spec.block_m, wgs = config->spec.consumer_wgs;
    int64_t merged = 0;  // warpgroups' rows merged in all trials: the test covers many
    for (int trial = 0; trial < 300; ++trial) {
      const int batch = 1 + int(rng() % 12), hkv = 1 << (rng() % 3), hq = hkv * (1 + int(rng() % 8));
      std::vector<int> seqlen_q(batch), seqlen_k(batch);
      for (int b = 0; b < batch; ++b) {
        seqlen_q[b] = rng() % 6 == 0 ? 0 : rng() % 3 == 0 ? 1 + int(rng() % 300) : 1 + int(rng() % 16);
        seqlen_k[b] = rng() % 8 == 0 ? int(rng() % 3) : int(rng() % 6000);
      }
      AttentionArgs a = attention_extents(batch, std::max(1, *std::max_element(seqlen_q.begin(), seqlen_q.end())), 6000, hq, hkv);
      a.engine.total_q = std::max(1, int(std::accumulate(seqlen_q.begin(), seqlen_q.end(), 0)));
      a.decode.max_splits = 1 + int(rng() % 40);
      a.decode.split_keys = rng() % 4 == 0 ? block_n * (1 + int(rng() % 20)) : 0;
      const TileGeometry g = tile_geometry(*config, a, rng() % 2 ? 132 : 0);  // 0: max_splits, one CTA a tile
      // The contract with split_keys: a sequence's keys fit the launch's splits.
      if (a.decode.split_keys > 0)
        for (int& keys : seqlen_k) keys = std::min(keys, g.splits * a.decode.split_keys);
      const int pack = pack_heads_by_definition(config->spec, hq, hkv);
      ASSERT_EQ(g.pack_heads, pack);
      const int m_blocks = int(attention_query_blocks(*config, a));
      const int64_t words = merge_counter_words(*config, a);
      ASSERT_EQ(words, int64_t(batch) * (hq / pack) * m_blocks * wgs);  // a word per sequence, head group, query block, warpgroup

      // What the header says each counter gets, keyed by (sequence, head group, query block, warpgroup).
      std::map<std::array<int, 4>, int> expected;
      for (int b = 0; b < batch; ++b) {
        const int splits = splits_by_enumeration(seqlen_k[b], block_n, g.splits, a.decode.split_keys);
        if (g.splits < 2 || splits < 2) continue;
        for (int token = 0; token < seqlen_q[b]; ++token)
          for (int head = 0; head < hq; ++head) {
            const int row = token * pack + head % pack;
            for (int wg = 0; wg < wgs; ++wg) expected[{b, head / pack, row / block_m, wg}] = splits;
          }
      }
      // What the kernel's walk does: each tile it runs (a split below the sequence's count, a query
      // block with rows) that writes partials counts each warpgroup in at its counter.
      std::vector<int> arrivals(size_t(words), 0);
      std::map<int64_t, std::array<int, 4>> owner;
      for (int b = 0; b < batch; ++b) {
        const int splits = key_split(seqlen_k[b], block_n, g.splits, a.decode.split_keys / block_n).splits;
        for (int head = 0; head < g.tile_heads; ++head)
          for (int m = 0; m < m_blocks; ++m)
            for (int split = 0; split < g.splits; ++split) {
              if (split >= splits || !query_block_has_rows(m, g.tokens_per_tile, seqlen_q[b])) continue;  // tile_has_rows
              if (!split_writes_partials(g.splits, splits)) continue;
              for (int wg = 0; wg < wgs; ++wg) {
                const int64_t at = merge_counter_index(b, head, m, wg, g.tile_heads, m_blocks, wgs);
                ASSERT_GE(at, 0);
                ASSERT_LT(at, words);
                const std::array<int, 4> rows = {b, head, m, wg};
                auto [it, inserted] = owner.emplace(at, rows);
                ASSERT_TRUE(inserted || it->second == rows) << "two warpgroups' rows share counter " << at;
                ++arrivals[size_t(at)];
              }
            }
      }
      for (const auto& [rows, splits] : expected) {
        const int64_t at = merge_counter_index(rows[0], rows[1], rows[2], rows[3], g.tile_heads, m_blocks, wgs);
        ASSERT_EQ(arrivals[size_t(at)], splits) << "sequence " << rows[0] << " head group " << rows[1] << " block " << rows[2] << " warpgroup " << rows[3];
        arrivals[size_t(at)] = 0;
        ++merged;
      }
      for (int64_t at = 0; at < words; ++at) ASSERT_EQ(arrivals[size_t(at)], 0) << "counter " << at << " counted rows the header gives none";
    }
    EXPECT_GT(merged, 1000);
  }
}

// ---- the C API's decode fields
const char* kDecodeSpec = "dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1";
const char* kPrefillSpec = "dtype=bf16,head_dim=128,varlen=1";

std::vector<int32_t> g_metadata(64, 0);

flashjit_attention_args_t decode_step(uint64_t workspace_bytes) {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x10000, a.k = 0x20000, a.v = 0x30000, a.o = 0x40000, a.lse = 0x50000;
  a.batch = 8, a.seqlen_q = 1, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8;
  a.q_strides = a.o_strides = flashjit_tensor_strides_t{0, 32 * 128, 128};
  a.k_strides = a.v_strides = flashjit_tensor_strides_t{4096 * 8 * 128, 8 * 128, 128};
  a.cu_seqlens_q = reinterpret_cast<uint64_t>(g_metadata.data());
  a.seqused_k = reinterpret_cast<uint64_t>(g_metadata.data() + 16);
  a.total_q = 8;
  a.workspace = 0x100000;
  a.workspace_bytes = workspace_bytes;
  a.max_splits = 16;
  return a;
}

TEST(DecodeApi, WorkspaceSizeAndItsChecks) {
  flashjit_attention_args_t a = decode_step(0);
  uint64_t bytes = 1;
  ASSERT_EQ(flashjit_attention_workspace_size(kDecodeSpec, &a, &bytes), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  EXPECT_EQ(bytes, uint64_t(16 * 8 * 32) * 128 * 4 + uint64_t(16 * 8 * 32) * 4);
  ASSERT_EQ(flashjit_attention_workspace_size(kPrefillSpec, &a, &bytes), FLASHJIT_SUCCESS);
  EXPECT_EQ(bytes, 0u);
  ASSERT_EQ(flashjit_attention_workspace_size(kDecodeSpec, &a, &bytes), FLASHJIT_SUCCESS);
  a.workspace_bytes = bytes;
  EXPECT_EQ(flashjit_validate_attention_args(kDecodeSpec, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();

  expect_each_refused(a, {
      {kDecodeSpec, "args.workspace_bytes", "one split", [](auto& a) { a.workspace_bytes = 8 * 32 * 129 * 4 - 4; }},
      {kDecodeSpec, "args.workspace", "null", [](auto& a) { a.workspace = 0; }},
      {kDecodeSpec, "args.workspace", "256-byte", [](auto& a) { a.workspace += 16; }},
      {kDecodeSpec, "args.max_splits", "1..128", [](auto& a) { a.max_splits = 0; }},
      {kDecodeSpec, "args.max_splits", "1..128", [](auto& a) { a.max_splits = 129; }},
      {kDecodeSpec, "args.split_keys", "multiple of the kernel's block_n=128", [](auto& a) { a.split_keys = 100; }},
      {kDecodeSpec, "args.split_keys", "seqlen_k=4096", [](auto& a) { a.split_keys = 128; }},  // 16 x 128 < 4096
      {kPrefillSpec, "args.workspace", "split_kv=1", [](auto& a) { a.max_splits = 0, a.workspace_bytes = 0; }},
      {kPrefillSpec, "args.max_splits", "split_kv=1", [](auto& a) { a.workspace = 0, a.workspace_bytes = 0; }},
  });
  // A fixed split size that holds the keys (batch-invariant mode) passes.
  flashjit_attention_args_t fixed = a;
  fixed.split_keys = 256;
  EXPECT_EQ(flashjit_validate_attention_args(kDecodeSpec, &fixed), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  // A workspace that holds fewer splits caps the count: 16 x 256 keys fit, 15 do not.
  fixed.workspace_bytes -= 4;
  EXPECT_EQ(flashjit_validate_attention_args(kDecodeSpec, &fixed), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(flashjit_last_error_field()), "args.split_keys") << flashjit_last_error_message();
}

// The workspace of combine=inline: the merge counters (256-byte aligned) before the partials.
TEST(DecodeApi, InlineCombineWorkspaceHoldsTheCountersFirst) {
  const char* spec = "dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline";
  flashjit_attention_args_t a = decode_step(0);
  uint64_t bytes = 0;
  ASSERT_EQ(flashjit_attention_workspace_size(spec, &a, &bytes), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  // 8 sequences x 8 head groups x 1 query block x 1 warpgroup = 64 words in 256 bytes, then the partials
  EXPECT_EQ(bytes, 256u + uint64_t(16 * 8 * 32) * 128 * 4 + uint64_t(16 * 8 * 32) * 4);
  a.workspace_bytes = 256 + 8 * 32 * 129 * 4 - 4;  // the counters and less than one split
  EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(flashjit_last_error_field()), "args.workspace_bytes");
  EXPECT_NE(std::string(flashjit_last_error_message()).find("the merge counters"), std::string::npos) << flashjit_last_error_message();
  a.workspace_bytes = bytes;
  EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();
}

// A mixed batch's total_q makes max_splits' workspace large: a smaller one caps the split count,
// and the partials are laid out for the splits it holds.
TEST(DecodeGeometry, ASmallerWorkspaceCapsTheSplits) {
  auto config = make_config(*parse_spec(kDecodeSpec));
  ASSERT_TRUE(config);
  AttentionArgs a = decode_args(*config, 1, 32768, 32, 8, 64);
  const uint64_t one = uint64_t(32) * 129 * 4;  // one split of the one row: 32 heads
  a.decode.workspace_bytes = 3 * (32 * 128 * 4) + 256 + 256;  // three splits, each part aligned
  EXPECT_EQ(split_capacity(*config, a), 3);
  EXPECT_EQ(tile_geometry(*config, a, 132).splits, 3);
  EXPECT_EQ(split_lse_offset(*config, a), uint64_t(3 * 32 * 128 * 4));
  a.decode.workspace_bytes = one + 512;
  EXPECT_EQ(split_capacity(*config, a), 1);
  a.decode.workspace_bytes = 0;  // sizing: max_splits
  EXPECT_EQ(split_capacity(*config, a), 64);
  EXPECT_EQ(split_workspace_bytes(*config, a), uint64_t(64 * 32 * 128 * 4) + uint64_t(64 * 32 * 4));
}

}  // namespace
}  // namespace flashjit

#include "launch/merge_states.hpp"

namespace flashjit {
namespace {

MergeArgs merge_args() {
  MergeArgs m;
  m.o_a = 0x10000, m.o_b = 0x20000, m.o_out = 0x30000, m.lse_a = 0x40000, m.lse_b = 0x50000;
  m.rows = 100, m.heads = 8;
  m.a_row_stride = m.b_row_stride = m.out_row_stride = 8 * 128;
  m.a_head_stride = m.b_head_stride = m.out_head_stride = 128;
  return m;
}

TEST(MergeStates, ArgumentsAreCheckedByName) {
  auto decode = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1"));
  auto prefill = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1"));
  ASSERT_TRUE(decode && prefill);
  EXPECT_TRUE(validate_merge_args(*decode, merge_args()).ok());
  EXPECT_EQ(validate_merge_args(*prefill, merge_args()).error().field, "kernel");
  const struct {
    const char* field;
    void (*set)(MergeArgs&);
  } cases[] = {
      {"o_a", [](MergeArgs& m) { m.o_a = 0; }},
      {"o_out", [](MergeArgs& m) { m.o_out += 8; }},
      {"lse_b", [](MergeArgs& m) { m.lse_b = 0; }},
      {"lse_out", [](MergeArgs& m) { m.lse_out = 0x60002; }},
      {"rows", [](MergeArgs& m) { m.rows = 0; }},
      {"heads", [](MergeArgs& m) { m.heads = 70000; }},
      {"a_head_stride", [](MergeArgs& m) { m.a_head_stride = 64; }},  // below head_dim
      {"out_row_stride", [](MergeArgs& m) { m.out_row_stride = 1001; }},
      {"lse_head_stride", [](MergeArgs& m) { m.lse_head_stride = 99; }},
  };
  for (const auto& c : cases) {
    MergeArgs m = merge_args();
    c.set(m);
    const Status st = validate_merge_args(*decode, m);
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_EQ(st.error().field, c.field) << st.error().message;
  }
  const MergeParams p = make_merge_params(merge_args());
  EXPECT_EQ(p.lse_head_stride, 100);  // 0 = rows
  EXPECT_EQ(merge_launch_shape(merge_args()).grid_x, 100u);  // 800 (row, head) pairs, 8 a CTA
}

}  // namespace
}  // namespace flashjit
