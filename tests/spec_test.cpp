#include <gtest/gtest.h>

#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "launch/attention_launch.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit {
namespace {

TEST(Spec, ParsePrintRoundTrip) {
  const char* texts[] = {
      "dtype=bf16,head_dim=128,causal=1,stages=2",
      "dtype=fp16,head_dim=64,causal=0",
      "dtype=bf16,head_dim=256,head_dim_v=256,causal=0,stages=1,consumer_wgs=2,block_m=128,block_n=80",
      "dtype=fp16,head_dim=8,causal=1,hang_trap=1",
  };
  for (const char* text : texts) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.error().message;
    EXPECT_EQ(to_string(*spec), text);
    auto again = parse_spec(to_string(*spec));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *spec);
  }
}

TEST(Spec, AcceptsAnyKeyOrderAndSpaces) {
  auto spec = parse_spec(" causal=1 , head_dim=96,dtype=fp16 ");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(to_string(*spec), "dtype=fp16,head_dim=96,causal=1");
}

struct BadCase {
  const char* text;
  const char* field;
  const char* needle;  // part of the message: the value or what is allowed
};

TEST(Spec, EveryValidationErrorNamesFieldValueAndAllowed) {
  const BadCase cases[] = {
      {"dtype=fp32", "dtype", "fp16, bf16"},
      {"head_dim=100", "head_dim", "multiple of 8"},
      {"head_dim=0", "head_dim", "8..576"},
      {"head_dim=584", "head_dim", "8..576"}, {"head_dim=264", "head_dim_v", "at most 256, or 384 or 512"},
      {"head_dim=abc", "head_dim", "'abc'"},
      {"head_dim=64,head_dim_v=128", "head_dim_v", "at most head_dim"},
      {"causal=2", "causal", "0, 1, false or true"},
      {"stages=0x", "stages", "1..4"},
      {"stages=5", "stages", "1..4"},
      {"consumer_wgs=4", "consumer_wgs", "1, 2 or 3"},
      {"block_m=96", "block_m", "64, 128 or 192"},
      {"consumer_wgs=1,block_m=128", "block_m", "64"},
      {"block_n=24", "block_n", "multiple of 16"},
      {"block_n=272", "block_n", "16..256"},
      {"hang_trap=yes", "hang_trap", "0, 1, false or true"},
      {"warp_size=32", "warp_size", "known:"},
      {"causal=1,causal=0", "causal", "twice"},
      {"causal", "causal", "key=value"},
      {"", "spec", "empty"},
  };
  for (const BadCase& c : cases) {
    auto spec = parse_spec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidSpec) << c.text;
    EXPECT_EQ(spec.error().field, c.field) << c.text;
    EXPECT_NE(spec.error().message.find(c.needle), std::string::npos) << c.text << " -> " << spec.error().message;
  }
}

// Keys and values whose kernel paths left the library are refused, naming the field and what is
// allowed: kv_load (K/V blocks always come by TMA; copying them by the producer's threads measured
// 0.86x on the H200), overlap=0 (the serial step), and ctas_per_sm=2 with paged=1 (its one-thread
// paged producer). The same spec without them is accepted.
TEST(Spec, RemovedKeysAndValuesAreRefusedByName) {
  const BadCase cases[] = {
      {"head_dim=128,varlen=1,pack_gqa=1,split_kv=1,kv_load=cpasync", "kv_load", "unknown spec field 'kv_load'"},
      {"head_dim=128,kv_load=tma", "kv_load", "unknown spec field 'kv_load'"},
      {"head_dim=128,overlap=0", "overlap", "value 0 is not allowed; allowed: 1"},
      {"head_dim=64,overlap=false,pingpong=0", "overlap", "value 0 is not allowed; allowed: 1"},
      {"head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,ctas_per_sm=2", "ctas_per_sm", "allowed: 1 with paged=1"},
      {"head_dim=64,causal=1,paged=1,ctas_per_sm=2,block_n=64", "ctas_per_sm", "allowed: 1 with paged=1"},
  };
  for (const BadCase& c : cases) {
    auto spec = parse_spec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidSpec) << c.text;
    EXPECT_EQ(spec.error().field, c.field) << c.text;
    EXPECT_NE(spec.error().message.find(c.needle), std::string::npos) << c.text << " -> " << spec.error().message;
  }
  for (const char* kept : {"head_dim=128,overlap=1", "head_dim=128,varlen=1,pack_gqa=1,split_kv=1,ctas_per_sm=2",
                           "head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,ctas_per_sm=1"}) {
    auto spec = parse_spec(kept);
    ASSERT_TRUE(spec.ok()) << kept << ": " << spec.error().message;
    EXPECT_TRUE(make_config(*spec).ok()) << kept;
  }
}

// Leaving a key out is the only way to ask for the table's value: an explicit 0 is out of range
// like any other value (it used to build the default silently).
TEST(Spec, ExplicitZeroIsAnErrorNamingTheField) {
  for (const char* key : {"head_dim_v", "stages", "consumer_wgs", "block_m", "block_n", "cluster"}) {
    const std::string text = std::string("head_dim=64,") + key + "=0";
    auto spec = parse_spec(text);
    ASSERT_FALSE(spec.ok()) << text << " was accepted as " << to_string(*spec);
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidSpec) << text;
    EXPECT_EQ(spec.error().field, key) << text;
    EXPECT_NE(spec.error().message.find("value 0 is not allowed"), std::string::npos) << spec.error().message;
  }
  // Specs written by the library (configs, tuning winners) hold no 0: they still parse back.
  for (const char* text : {"head_dim=64", "head_dim=256,causal=1", "dtype=fp16,head_dim=8"}) {
    auto config = make_config(*parse_spec(text));
    ASSERT_TRUE(config.ok()) << text;
    auto again = parse_spec(to_string(config->spec));
    ASSERT_TRUE(again.ok()) << to_string(config->spec) << ": " << again.error().message;
    EXPECT_EQ(*again, config->spec);
  }
}

// A message quotes at most a short prefix of what the user wrote, and says how long it was: a
// 100,000-character value gave a 100,040-byte message.
TEST(Spec, ErrorsQuoteAShortPrefixOfLongUserText) {
  const std::string long_text(100000, '7');
  const struct {
    std::string text;
    const char* field;
  } cases[] = {{"head_dim=" + long_text, "head_dim"},
               {"dtype=" + long_text, "dtype"},
               {"causal=" + long_text, "causal"},
               {long_text + "=1", ""},             // an unknown key
               {"head_dim=64," + long_text, ""}};  // an item that is not key=value
  // The longest message a short text gets (an unknown key's, which lists every known key: it grows with
  // the spec), plus room for the quoted prefix and the length.
  auto short_unknown = parse_spec("x=1");
  ASSERT_FALSE(short_unknown.ok());
  const size_t bound = short_unknown.error().message.size() + 120;
  for (const auto& c : cases) {
    auto spec = parse_spec(c.text);
    ASSERT_FALSE(spec.ok());
    const std::string& message = spec.error().message;
    EXPECT_LT(message.size(), bound) << message.substr(0, 200);
    EXPECT_NE(message.find("100000 characters"), std::string::npos) << message.substr(0, 400);
    EXPECT_NE(message.find("7777777777777777"), std::string::npos) << message.substr(0, 400);  // the prefix
    EXPECT_LT(spec.error().field.size(), 80u);
    if (*c.field) EXPECT_EQ(spec.error().field, c.field);
  }
  // Short text is quoted whole, as before.
  auto spec = parse_spec("dtype=fp32");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("'fp32'"), std::string::npos) << spec.error().message;
  EXPECT_EQ(spec.error().message.find("characters"), std::string::npos) << spec.error().message;
}

// Every bool key takes 0/1 and the words true/false in any case, and its error says exactly that
// (it said "allowed: 0 or 1" while accepting "true"). overlap reads them too but allows only 1
// (Spec.RemovedKeysAndValuesAreRefusedByName).
TEST(Spec, BoolKeysTakeZeroOneAndTrueFalseInAnyCase) {
  for (const char* key : {"causal", "overlap", "pingpong", "hang_trap"}) {
    SCOPED_TRACE(key);
    const bool false_allowed = std::string(key) != "overlap";
    for (const char* word : {"1", "true", "TRUE", "True"}) {
      auto spec = parse_spec(std::string("head_dim=64,") + key + "=" + word);
      ASSERT_TRUE(spec.ok()) << word << ": " << spec.error().message;
      EXPECT_EQ(*spec, *parse_spec(std::string("head_dim=64,") + key + "=1")) << word;
    }
    for (const char* word : {"0", "false", "FALSE", "False"}) {
      if (!false_allowed) break;
      auto spec = parse_spec(std::string("head_dim=64,") + key + "=" + word);
      ASSERT_TRUE(spec.ok()) << word << ": " << spec.error().message;
      EXPECT_EQ(*spec, *parse_spec(std::string("head_dim=64,") + key + "=0")) << word;
    }
    for (const char* word : {"yes", "2", "truex", ""}) {
      auto spec = parse_spec(std::string("head_dim=64,") + key + "=" + word);
      ASSERT_FALSE(spec.ok()) << word;
      EXPECT_EQ(spec.error().field, key);
      EXPECT_NE(spec.error().message.find("allowed: 0, 1, false or true (any case)"), std::string::npos) << spec.error().message;
    }
  }
}

TEST(Config, DefaultsFromTableAndSharedMemoryFits) {
  for (int d = 8; d <= 256; d += 8) {
    for (int causal = 0; causal < 2; ++causal) {
      AttentionSpec spec;
      spec.head_dim = d;
      spec.causal = causal;
      auto config = make_config(spec);
      ASSERT_TRUE(config.ok()) << d << ": " << config.error().message;
      EXPECT_LE(config->smem_bytes, kMaxSharedMemoryBytes);
      EXPECT_EQ(config->spec.block_m, 64 * config->spec.consumer_wgs);
      EXPECT_NE(config->spec.block_n, 0);
      EXPECT_EQ(config->spec.head_dim_v, d);
      // Every field resolved: nothing left at auto.
      EXPECT_TRUE(config->spec.cluster == 1 || config->spec.cluster == 2) << config->spec.cluster;
      EXPECT_EQ(config->spec.overlap, 1);
      EXPECT_TRUE(config->spec.pingpong == 0 || config->spec.pingpong == 1);
      EXPECT_GE(config->spec.stages, 1);
      EXPECT_EQ(config->v_cols % 64, 0);
      EXPECT_GE(config->v_cols, d);
    }
  }
}

// Two Q buffers (the persistent grid loads the next tile's Q early) wherever they fit the 227 KB
// beside the K/V ring, else one; the shared memory accounts for every buffer and barrier.
TEST(Config, QBuffersWhereTheyFit) {
  const std::pair<const char*, int> cases[] = {{"head_dim=64", 2}, {"head_dim=128", 2}, {"head_dim=128,stages=3", 1},
                                               {"head_dim=192", 1}, {"head_dim=256", 1}, {"head_dim=256,block_n=48", 2}};
  for (auto [text, buffers] : cases) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text;
    auto config = make_config(*spec);
    ASSERT_TRUE(config.ok()) << text << ": " << config.error().message;
    EXPECT_EQ(config->q_buffers, buffers) << text;
    // One buffer: O goes to the last K/V block's slots instead, and the grid is persistent either way.
    EXPECT_EQ(config->stage_o_in_kv, buffers == 1) << text;
    EXPECT_TRUE(config->persistent) << text;
    const int s = config->spec.stages;
    const int barriers = 8 * (2 * buffers + 4 * s) + 4 * config->spec.consumer_wgs;
    EXPECT_EQ(config->smem_bytes, 1024 + buffers * config->q_tile_bytes + s * (config->k_tile_bytes + config->v_tile_bytes) +
                                      (barriers + 127) / 128 * 128)
        << text;
    EXPECT_LE(config->smem_bytes, kMaxSharedMemoryBytes) << text;
  }
}

// O fits a K/V slot only from block_n 64, for at most two warpgroups, and clusters keep one CTA per
// tile: then O is staged in the Q buffer and the grid is not persistent.
TEST(Config, OStagingAndPersistentGrid) {
  const struct {
    const char* text;
    bool in_kv, persistent;
  } cases[] = {{"head_dim=256,block_n=48,stages=3", false, false},
               {"head_dim=256,cluster=2", false, false},
               {"head_dim=128,cluster=2", false, false},
               {"head_dim=256", true, true}};
  for (const auto& c : cases) {
    auto spec = parse_spec(c.text);
    ASSERT_TRUE(spec.ok()) << c.text;
    auto config = make_config(*spec);
    ASSERT_TRUE(config.ok()) << c.text << ": " << config.error().message;
    EXPECT_EQ(config->stage_o_in_kv, c.in_kv) << c.text;
    EXPECT_EQ(config->persistent, c.persistent) << c.text;
  }
}

// Long-sequence kernels, only with a causal mask and the warpgroups left at auto: up to head dim 64
// a three-warpgroup spec from 4096, and where the table's tiles leave one Q buffer (head dims 192
// and 256) a 2-CTA cluster spec from 16384, and from 8192 where the deal is uneven (its pairs
// using less than 92 % of their rounds: tests/tile_schedule_test.cpp applies the rule), unless
// the cluster is set. Each keeps every
// other field (hang_trap, block_n).
TEST(LengthChoice, CausalSpecsAtAutoHaveTheMeasuredLongSequenceKernel) {
  const struct {
    const char* spec;
    const char* long_spec;
    LongSequenceRule rule;
  } cases[] = {
      {"dtype=bf16,head_dim=64,causal=1", "dtype=bf16,head_dim=64,causal=1,consumer_wgs=3", {4096}},
      {"dtype=fp16,head_dim=32,causal=1,hang_trap=1", "dtype=fp16,head_dim=32,causal=1,consumer_wgs=3,hang_trap=1", {4096}},
      {"head_dim=64,causal=1,block_n=64", "head_dim=64,causal=1,consumer_wgs=3,block_n=64", {4096}},
      {"head_dim=64,causal=1,cluster=2", "head_dim=64,causal=1,consumer_wgs=3,cluster=2", {4096}},
      {"dtype=bf16,head_dim=256,causal=1", "dtype=bf16,head_dim=256,causal=1,cluster=2", {16384, 8192, 92}},
      {"dtype=fp16,head_dim=192,causal=1,hang_trap=1", "dtype=fp16,head_dim=192,causal=1,cluster=2,hang_trap=1", {16384, 8192, 92}},
      {"head_dim=256,causal=1,block_n=64", "head_dim=256,causal=1,cluster=2,block_n=64", {16384, 8192, 92}},
      {"head_dim=64", nullptr, {}},                          // three warpgroups already, at every length
      {"head_dim=96,causal=1", nullptr, {}},                 // three do not fit above 64; two Q buffers
      {"head_dim=128,causal=1", nullptr, {}},                // two Q buffers: the deal holds light tiles back
      {"head_dim=256", nullptr, {}},                         // no mask: every tile costs the same
      {"head_dim=256,causal=1,cluster=1", nullptr, {}},      // set by the caller
      {"head_dim=64,causal=1,consumer_wgs=2", nullptr, {}},  // set by the caller
      {"head_dim=256,causal=1,consumer_wgs=2", nullptr, {}},
      {"head_dim=64,causal=1,block_m=128", nullptr, {}},
      {"dtype=bf16,head_dim=256,causal=1,softcap=1", nullptr, {}},  // masks and score modifiers: not measured
      {"dtype=bf16,head_dim=64,causal=1,sinks=1", nullptr, {}},
      {"dtype=bf16,head_dim=256,causal=1,alibi=1", nullptr, {}},
      {"dtype=bf16,head_dim=64,causal=1,window=1", nullptr, {}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    auto spec = parse_spec(c.spec);
    ASSERT_TRUE(spec.ok());
    const auto variant = long_sequence_variant(*spec);
    ASSERT_EQ(variant.has_value(), c.long_spec != nullptr);
    if (!variant) continue;
    EXPECT_EQ(variant->spec, *parse_spec(c.long_spec));
    EXPECT_EQ(variant->rule.min_seqlen, c.rule.min_seqlen);
    EXPECT_EQ(variant->rule.uneven_min_seqlen, c.rule.uneven_min_seqlen);
    EXPECT_EQ(variant->rule.uneven_use_percent, c.rule.uneven_use_percent);
    EXPECT_TRUE(make_config(variant->spec).ok());
  }
  // The lengths' ranges, by the shorter of the two.
  const LongSequenceRule lengths_only{4096}, with_deal{16384, 8192, 92};
  EXPECT_EQ(length_range(lengths_only, 4096, 4096), LengthRange::kLong);
  EXPECT_EQ(length_range(lengths_only, 16384, 5000), LengthRange::kLong);
  EXPECT_EQ(length_range(lengths_only, 4095, 16384), LengthRange::kShort);
  EXPECT_EQ(length_range(lengths_only, 16384, 4095), LengthRange::kShort);
  EXPECT_EQ(length_range(with_deal, 16384, 20000), LengthRange::kLong);
  EXPECT_EQ(length_range(with_deal, 16383, 20000), LengthRange::kDealDecides);
  EXPECT_EQ(length_range(with_deal, 9000, 8192), LengthRange::kDealDecides);
  EXPECT_EQ(length_range(with_deal, 9000, 8191), LengthRange::kShort);
}

// The grid: 1-D over query blocks (padded to whole clusters) x heads x batch; capped at max_ctas
// (the SM count) where the config is persistent, one CTA per tile otherwise or without a cap.
TEST(AttentionLaunch, GridWalksTheTiles) {
  const struct {
    const char* spec;
    int seqlen_q, heads, batch, max_ctas;
    unsigned grid, cluster;
  } cases[] = {
      {"head_dim=128", 1000, 8, 2, 132, 8 * 8 * 2, 1},            // 128 tiles: fewer than the SMs
      {"head_dim=128", 1000, 8, 40, 132, 132, 1},                 // 2560 tiles: persistent
      {"head_dim=128", 1000, 8, 40, 0, 8 * 8 * 40, 1},            // no cap given: one CTA per tile
      {"head_dim=256", 4096, 8, 4, 132, 132, 1},                  // one Q buffer, O in K/V slots: persistent
      {"head_dim=128,cluster=2", 1000, 8, 40, 132, 8 * 8 * 40, 2},  // clusters: one CTA per tile
      {"head_dim=128,cluster=2", 800, 3, 1, 132, 8 * 3, 2},       // 7 query blocks, padded to whole pairs
      {"head_dim=64", 1000, 8, 2, 132, 6 * 8 * 2, 1},             // three WGs: 192-row query blocks
      // dim_split=1: a cluster of two CTAs a tile (128-row query blocks), never persistent
      {"head_dim=512,head_dim_v=512,dim_split=1", 1000, 8, 40, 132, 2 * 8 * 8 * 40, 2},
      {"head_dim=384,head_dim_v=384,causal=1,dim_split=1", 129, 3, 1, 0, 2 * 2 * 3, 2},
  };
  for (const auto& c : cases) {
    auto spec = parse_spec(c.spec);
    ASSERT_TRUE(spec.ok()) << c.spec;
    auto config = make_config(*spec);
    ASSERT_TRUE(config.ok()) << c.spec;
    AttentionArgs a;
    a.batch = c.batch;
    a.seqlen_q = a.seqlen_k = c.seqlen_q;
    a.heads_q = a.heads_kv = c.heads;
    const LaunchShape shape = attention_launch_shape(*config, a, c.max_ctas);
    EXPECT_EQ(shape.grid_x, c.grid) << c.spec << " batch " << c.batch << " cap " << c.max_ctas;
    EXPECT_EQ(shape.grid_y, 1u);
    EXPECT_EQ(shape.grid_z, 1u);
    EXPECT_EQ(shape.cluster_x, c.cluster) << c.spec;
    EXPECT_EQ(shape.block_x, unsigned(config->threads));
    EXPECT_EQ(shape.dynamic_smem_bytes, unsigned(config->smem_bytes));
    // The deal counts the tiles' takers: clusters with dim_split=1, else CTAs.
    EXPECT_EQ(deal_ctas(*config, a, c.max_ctas), shape.grid_x / (spec->dim_split ? 2u : 1u)) << c.spec;
  }
}

TEST(Config, SharedMemoryOverflowNamesStagesOrBlockN) {
  auto stages = parse_spec("head_dim=256,stages=4");
  ASSERT_TRUE(stages.ok());
  auto config = make_config(*stages);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "stages");
  EXPECT_NE(config.error().message.find("at most 2 stages"), std::string::npos) << config.error().message;

  auto block = parse_spec("head_dim=256,block_n=256");
  ASSERT_TRUE(block.ok());
  config = make_config(*block);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "block_n");
  EXPECT_NE(config.error().message.find("232448"), std::string::npos);
}

// A spec whose block_n does not fit is told the largest that does (a multiple of 16, for its head
// dim, block_m and stages); it said "a smaller block_n".
TEST(Config, SharedMemoryOverflowNamesTheLargestBlockNThatFits) {
  const struct {
    const char* text;
    int largest;  // 227 KB - 1 KB slack - Q - barriers over one stage's K and V rows, x stages
  } cases[] = {{"head_dim=256,block_n=256", 80},                  // 64 KB of Q, 2 x 1 KB per row
               {"head_dim=256,consumer_wgs=3", 64},               // the table's 80 with 96 KB of Q
               {"head_dim=256,consumer_wgs=3,stages=4,block_n=256", 32},  // no stage count fits: block_n
               {"head_dim=128,block_n=256", 192}};                // 32 KB of Q, 2 x 512 B per row
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto spec = parse_spec(c.text);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto config = make_config(*spec);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().field, "block_n");
    const std::string says = "block_n: at most " + std::to_string(c.largest);
    EXPECT_NE(config.error().message.find(says), std::string::npos) << config.error().message;
    // It is the largest: it fits, 16 more does not.
    AttentionSpec fits = *spec;
    fits.block_n = c.largest;
    EXPECT_TRUE(make_config(fits).ok()) << to_string(fits);
    fits.block_n = c.largest + 16;
    EXPECT_FALSE(make_config(fits).ok()) << to_string(fits);
  }
}

TEST(Config, RegisterBudget) {
  auto config = make_config(*parse_spec("head_dim=128,consumer_wgs=2"));
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(check_register_budget(*config, 168).ok());   // 24 + 2*240 = 504 = 3*168
  auto st = check_register_budget(*config, 160);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceBudget);
  // Three consumer warpgroups: 512 threads, 128 registers each at entry, 32 + 3 * 160 = 512.
  auto three = make_config(*parse_spec("head_dim=64,consumer_wgs=3"));
  ASSERT_TRUE(three.ok()) << three.error().message;
  EXPECT_EQ(three->threads, 512);
  EXPECT_EQ(three->spec.block_m, 192);
  EXPECT_TRUE(check_register_budget(*three, 128).ok());
  EXPECT_FALSE(check_register_budget(*three, 120).ok());
}

}  // namespace
}  // namespace flashjit
