// V's head dim apart from Q's (spec key head_dim_v, issue 40) on the CPU: the key's range and
// refusals, the tiles it resolves to, and every variant compiled with NVRTC for sm_90a without a
// spill or a stack frame (tests/gpu/check_sass.sh reads their SASS: SassCheck.HeadDimVVariants).
#include <gtest/gtest.h>

#include <algorithm>

#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "config/kernel_config.hpp"
#include "runtime/engine.hpp"
#include "source/render.hpp"
#include "spec/attention_spec.hpp"
#include "support/variant_compile.hpp"
#include "verify/engine_check.hpp"
#include "verify/reference.hpp"

namespace flashjit {
namespace {

TEST(HeadDimVSpec, AnyMultipleOf8UpToHeadDimAndRoundTrips) {
  auto spec = parse_spec("dtype=bf16,head_dim=192,head_dim_v=128,causal=1");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->effective_head_dim_v(), 128);
  EXPECT_EQ(*parse_spec(to_string(*spec)), *spec);
  for (const char* text : {"dtype=bf16,head_dim=128,head_dim_v=136", "dtype=bf16,head_dim=192,head_dim_v=100",
                           "dtype=bf16,head_dim=64,head_dim_v=512"}) {  // (320: see below)
    auto bad = parse_spec(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().field, "head_dim_v") << bad.error().message;
    EXPECT_NE(bad.error().message.find("at most head_dim"), std::string::npos) << bad.error().message;
  }
}

TEST(HeadDimVSpec, AboveHeadDim256VStaysAtMost256OrComesInTwoParts) {
  auto spec = parse_spec("dtype=bf16,head_dim=320,head_dim_v=256");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  struct Case {
    const char* spec;
    const char* field;
  };
  for (const Case& c : {Case{"dtype=bf16,head_dim=320", "head_dim_v"}, Case{"dtype=bf16,head_dim=320,head_dim_v=320", "head_dim_v"},
                        Case{"dtype=bf16,head_dim=576,head_dim_v=576", "head_dim_v"}, Case{"dtype=bf16,head_dim=640", "head_dim"},
                        Case{"dtype=bf16,head_dim=512,head_dim_v=512,consumer_wgs=2", "consumer_wgs"},
                        Case{"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,split_kv=1,combine=inline", "combine"},
                        Case{"dtype=e4m3,head_dim=576,head_dim_v=512,varlen=1,paged=1", "head_dim"},
                        Case{"dtype=bf16,head_dim=512,head_dim_v=512,cluster=2", "cluster"}}) {
    auto bad = parse_spec(c.spec);
    ASSERT_FALSE(bad.ok()) << c.spec;
    EXPECT_EQ(bad.error().field, c.field) << c.spec << ": " << bad.error().message;
  }
  auto config = make_config(*spec);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->spec.block_n, 64);
  EXPECT_EQ(config->qk_k_steps, 20);
  EXPECT_EQ(config->o_parts, 1);
  EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec));
  // MLA's absorbed decode: O in two 256-column parts, one consumer warpgroup, 32-key blocks, two stages.
  auto mla = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"));
  ASSERT_TRUE(mla.ok()) << mla.error().message;
  EXPECT_EQ(mla->o_parts, 2);
  EXPECT_EQ(mla->v_cols, 256);
  EXPECT_EQ(mla->spec.consumer_wgs, 1);
  EXPECT_EQ(mla->spec.block_n, 32);
  EXPECT_EQ(mla->spec.stages, 2);
  EXPECT_LE(mla->smem_bytes, shared_memory_budget(mla->spec));
  EXPECT_NE(render_attention_source(*mla).find("constexpr int kOParts = 2;"), std::string::npos);
}

// qv=1 (FlashAttention-3's split MLA form): Q's and K's tiles loaded chunk by chunk from two
// tensors each, so both parts are whole 64-column chunks; off by default (every earlier spec's text
// and source unchanged but for the constant).
TEST(HeadDimVSpec, SplitMlaFormTakesWholeChunks) {
  auto mla = parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1");
  ASSERT_TRUE(mla.ok()) << mla.error().message;
  EXPECT_TRUE(mla->qv);
  EXPECT_EQ(to_string(*mla), "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1");
  auto config = make_config(*mla);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_NE(render_attention_source(*config).find("constexpr int kQvChunks = 8;"), std::string::npos);
  auto plain = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->spec.qv);
  EXPECT_EQ(to_string(plain->spec).find("qv"), std::string::npos);
  EXPECT_NE(render_attention_source(*plain).find("constexpr int kQvChunks = 0;"), std::string::npos);
  for (const char* bad : {"dtype=bf16,head_dim=96,qv=1", "dtype=bf16,head_dim=192,head_dim_v=120,qv=1",
                          "dtype=bf16,head_dim=544,head_dim_v=512,qv=1", "dtype=bf16,head_dim=128,head_dim_v=128,qv=1",
                          "dtype=bf16,head_dim=192,head_dim_v=128,kv_dtype=e4m3,qv=1", "dtype=e4m3,head_dim=192,head_dim_v=128,qv=1"}) {
    auto refused = parse_spec(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().field, "qv") << bad << ": " << refused.error().message;
  }
}

// Specs refused by name: each fails on its field, and the message names `key` (the key the
// refusal comes from) unless the field is one of `refused_anyway` (refused for other reasons too).
struct Refusal {
  const char* spec;
  const char* field;
};
void expect_refusals(std::initializer_list<Refusal> refusals, const std::string& key,
                     std::initializer_list<std::string> refused_anyway = {}) {
  for (const Refusal& r : refusals) {
    auto bad = parse_spec(r.spec);
    ASSERT_FALSE(bad.ok()) << r.spec;
    EXPECT_EQ(bad.error().field, r.field) << r.spec << ": " << bad.error().message;
    if (std::find(refused_anyway.begin(), refused_anyway.end(), r.field) == refused_anyway.end()) {
      EXPECT_NE(bad.error().message.find(key), std::string::npos) << r.spec << ": " << bad.error().message;
    }
  }
}

// v_in_k=1 (MLA's latent cache): V read from K's ring slot, two consumer warpgroups on one 64-row
// tile (the first computes the scores and hands P to the second), O in two halves of the same tile.
TEST(HeadDimVSpec, VInKSharesOneTileBetweenTwoWarpgroups) {
  auto mla = parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1");
  ASSERT_TRUE(mla.ok()) << mla.error().message;
  EXPECT_TRUE(mla->v_in_k);
  EXPECT_EQ(to_string(*mla), "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1");
  EXPECT_EQ(*parse_spec(to_string(*mla)), *mla);
  auto config = make_config(*mla);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->spec.consumer_wgs, 2);
  EXPECT_EQ(config->spec.block_m, 64);  // both warpgroups on the tile's 64 rows
  EXPECT_EQ(config->spec.block_n, 64);
  EXPECT_EQ(config->spec.stages, 2);
  EXPECT_FALSE(config->spec.pingpong);
  EXPECT_EQ(config->threads, 384);
  EXPECT_EQ(config->o_parts, 1);  // one tile per query block: the halves are the warpgroups'
  EXPECT_EQ(config->v_cols, 256);
  EXPECT_EQ(config->v_tile_bytes, 0);  // no V ring
  EXPECT_FALSE(config->stage_o_in_kv);
  // Q's 64 rows, two stages of 64 keys x 576 columns, the hand-over area (P, three floats a row, an
  // mbarrier): within 227 KB.
  // (128: the ten mbarriers, two order words and the tile's words, rounded up)
  EXPECT_EQ(config->smem_bytes, 1024 + 64 * 576 * 2 + 2 * 64 * 576 * 2 + 64 * 64 * 2 + 3 * 64 * 4 + 8 + 128);
  EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec));
  const std::string source = render_attention_source(*config);
  EXPECT_NE(source.find("constexpr bool kVInK = 1;"), std::string::npos);
  EXPECT_NE(source.find("wgmma_pv_ss"), std::string::npos);
  // 32-key blocks: P fills the first half of its 128-byte rows (the same hand-over area), and the
  // ring takes as many stages as fit: four of 36 KB, the bytes of two 64-key ones.
  auto narrow = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,block_n=32,v_in_k=1"));
  ASSERT_TRUE(narrow.ok()) << narrow.error().message;
  EXPECT_EQ(narrow->spec.block_n, 32);
  EXPECT_EQ(narrow->spec.stages, 4);
  EXPECT_EQ(narrow->smem_bytes, 1024 + 64 * 576 * 2 + 4 * 32 * 576 * 2 + 64 * 128 + 3 * 64 * 4 + 8 + 256);  // (eight more mbarriers: 256)
  EXPECT_LE(narrow->smem_bytes, shared_memory_budget(narrow->spec));
  // FlashAttention-3's split form (qv=1): the K tile's first 512 columns come from V's own map, so V is
  // in K's slot as in the absorbed form: the same kernel plan, Q and K tiles from two maps each.
  auto split_form = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1"));
  ASSERT_TRUE(split_form.ok()) << split_form.error().message;
  EXPECT_TRUE(split_form->spec.qv && split_form->spec.v_in_k);
  EXPECT_EQ(*parse_spec(to_string(split_form->spec)), split_form->spec);
  EXPECT_EQ(split_form->smem_bytes, config->smem_bytes);
  EXPECT_EQ(split_form->v_tile_bytes, 0);
  EXPECT_EQ(split_form->spec.block_n, 64);
  EXPECT_EQ(split_form->spec.stages, 2);
  const std::string split_source = render_attention_source(*split_form);
  EXPECT_NE(split_source.find("constexpr bool kVInK = 1;"), std::string::npos);
  EXPECT_NE(split_source.find("constexpr int kQvChunks = 8;"), std::string::npos);
  // Off by default: the key is not printed and the kernel keeps its O parts.
  auto plain = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(to_string(plain->spec).find("v_in_k"), std::string::npos);
  EXPECT_NE(render_attention_source(*plain).find("constexpr bool kVInK = 0;"), std::string::npos);
  EXPECT_EQ(plain->o_parts, 2);
  expect_refusals({{"dtype=bf16,head_dim=256,head_dim_v=256,v_in_k=1", "head_dim_v"},
                   {"dtype=bf16,head_dim=576,head_dim_v=128,v_in_k=1", "head_dim_v"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,v_in_k=1", "v_in_k"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,kv_dtype=e4m3,v_in_k=1", "v_in_k"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,consumer_wgs=1,v_in_k=1", "consumer_wgs"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,block_m=128,v_in_k=1", "block_m"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,block_n=48,v_in_k=1", "block_n"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,pingpong=1,v_in_k=1", "pingpong"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,cluster=2,v_in_k=1", "cluster"}},
                  "v_in_k", {"cluster"});  // (refused above head dim 256 alike)
  // combine=inline: both halves of O's columns are in the CTA, so its last split merges them (O in column
  // parts, without v_in_k, stays refused: AboveHeadDim256VStaysAtMost256OrComesInTwoParts).
  for (const char* text : {"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,v_in_k=1",
                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,v_in_k=1,seesaw=1",
                           "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,paired=1"}) {
    auto inline_spec = parse_spec(text);
    ASSERT_TRUE(inline_spec.ok()) << text << ": " << inline_spec.error().message;
    EXPECT_TRUE(inline_spec->inline_combine) << text;
    auto inline_config = make_config(*inline_spec);
    ASSERT_TRUE(inline_config.ok()) << text << ": " << inline_config.error().message;
    EXPECT_NE(render_attention_source(*inline_config).find("constexpr bool kInlineCombine = 1;"), std::string::npos) << text;
  }
}

// seesaw=1 (v_in_k=1's second schedule): the two warpgroups take alternate blocks, each one's P
// crossing in its K slot's rotary chunk, each slot loaded in two halves: the same shared memory and
// ring as v_in_k=1's, the producer's registers raised for its pages.
TEST(HeadDimVSpec, SeesawTakesAlternateBlocksOnVInKsPlan) {
  const std::string text = "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1";
  auto spec = parse_spec(text);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->seesaw && spec->v_in_k);
  EXPECT_EQ(to_string(*spec), text);
  EXPECT_EQ(*parse_spec(to_string(*spec)), *spec);
  auto config = make_config(*spec);
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto handover = make_config(*parse_spec("dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1"));
  ASSERT_TRUE(handover.ok());
  EXPECT_EQ(config->smem_bytes, handover->smem_bytes);
  EXPECT_EQ(config->spec.block_n, 64);
  EXPECT_EQ(config->spec.stages, 2);
  EXPECT_EQ(config->producer_regs, 40u);
  EXPECT_EQ(config->consumer_regs, 232u);
  const std::string source = render_attention_source(*config);
  EXPECT_NE(source.find("using PairedConsumers = SeesawPairs;"), std::string::npos);
  EXPECT_NE(render_attention_source(*handover).find("using PairedConsumers = HandOverPairs;"), std::string::npos);
  // Off by default: not printed, and the cache key is the spec's text.
  EXPECT_EQ(to_string(handover->spec).find("seesaw"), std::string::npos);
  expect_refusals({{"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,seesaw=1", "seesaw"},
                   {"dtype=bf16,head_dim=512,causal=1,varlen=1,paired=1,seesaw=1", "seesaw"},
                   {"dtype=bf16,head_dim=512,head_dim_v=512,varlen=1,paged=1,v_in_k=1,seesaw=1", "head_dim"},
                   {"dtype=bf16,head_dim=384,head_dim_v=384,varlen=1,paged=1,v_in_k=1,seesaw=1", "head_dim"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,block_n=32,v_in_k=1,seesaw=1", "block_n"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,stages=1,v_in_k=1,seesaw=1", "stages"}},
                  "seesaw");
}

// chunk_waits=1 (v_in_k=1's scores issued chunk by chunk as a block lands): a barrier per 64-column
// chunk of each K slot at the hand-over area's end, on either schedule and any block_n; off by default.
TEST(HeadDimVSpec, ChunkWaitsPutsABarrierOnEachChunkOfTheKSlots) {
  for (const char* base : {"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1",
                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1",
                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=0,block_n=32,varlen=1,paged=1,v_in_k=1"}) {
    const std::string text = std::string(base) + ",chunk_waits=1";
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(spec->chunk_waits);
    EXPECT_EQ(to_string(*spec), text);
    auto config = make_config(*spec);
    auto slot_waits = make_config(*parse_spec(base));
    ASSERT_TRUE(config.ok() && slot_waits.ok()) << text;
    EXPECT_EQ(config->spec.stages, slot_waits->spec.stages) << text;
    EXPECT_EQ(config->spec.block_n, slot_waits->spec.block_n) << text;
    EXPECT_EQ(config->smem_bytes, slot_waits->smem_bytes + config->spec.stages * 9 * 8) << text;  // 576 columns: 9 chunks a slot
    EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec)) << text;
    EXPECT_NE(render_attention_source(*config).find("using KWaits = ChunkWaits;"), std::string::npos) << text;
    EXPECT_NE(render_attention_source(*slot_waits).find("using KWaits = SlotWaits;"), std::string::npos) << base;
    EXPECT_EQ(to_string(slot_waits->spec).find("chunk_waits"), std::string::npos);
  }
  expect_refusals({{"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,chunk_waits=1", "chunk_waits"},
                   {"dtype=bf16,head_dim=512,head_dim_v=512,varlen=1,paged=1,paired=1,chunk_waits=1", "chunk_waits"}},
                  "chunk_waits");
}

// early_release=1 (the hand-over's latent slots given back as soon as their P V's are done): chunk_waits=1's
// hand-over only, the same shared memory, rendered as its own type; off by default.
TEST(HeadDimVSpec, EarlyReleaseIsChunkWaitsHandOverWithItsOwnReleaseType) {
  for (const char* base : {"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1",
                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=0,block_n=32,varlen=1,paged=1,v_in_k=1,chunk_waits=1"}) {
    const std::string text = std::string(base) + ",early_release=1";
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(spec->early_release);
    EXPECT_EQ(to_string(*spec), text);
    auto config = make_config(*spec);
    auto after_scores = make_config(*parse_spec(base));
    ASSERT_TRUE(config.ok() && after_scores.ok()) << text;
    EXPECT_EQ(config->smem_bytes, after_scores->smem_bytes) << text;
    EXPECT_EQ(config->spec.stages, after_scores->spec.stages) << text;
    const std::string source = render_attention_source(*config);
    EXPECT_NE(source.find("using SlotRelease = ReleaseEarly;"), std::string::npos) << text;
    EXPECT_NE(source.find("using KWaits = ChunkWaits;"), std::string::npos) << text;
    EXPECT_NE(render_attention_source(*after_scores).find("using SlotRelease = ReleaseAfterScores;"), std::string::npos) << base;
    EXPECT_EQ(to_string(after_scores->spec).find("early_release"), std::string::npos);
  }
  expect_refusals({{"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,early_release=1", "early_release"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,seesaw=1,chunk_waits=1,early_release=1", "early_release"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,early_release=1", "early_release"}},
                  "early_release");
}

// half_release=1 (each warpgroup's part of a latent slot given back on its own): early_release=1's
// hand-over only, the same shared memory, its own release type, a producer of 40 registers (it keeps
// the block's pages across the wait for the second part); off by default.
TEST(HeadDimVSpec, HalfReleaseIsEarlyReleaseWithItsOwnReleaseType) {
  for (const char* base : {"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,"
                           "early_release=1",
                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=0,block_n=32,varlen=1,paged=1,v_in_k=1,chunk_waits=1,early_release=1"}) {
    const std::string text = std::string(base) + ",half_release=1";
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_TRUE(spec->half_release && spec->early_release);
    EXPECT_EQ(to_string(*spec), text);
    auto config = make_config(*spec);
    auto whole = make_config(*parse_spec(base));
    ASSERT_TRUE(config.ok() && whole.ok()) << text;
    EXPECT_EQ(config->smem_bytes, whole->smem_bytes) << text;
    EXPECT_EQ(config->spec.stages, whole->spec.stages) << text;
    EXPECT_EQ(config->producer_regs, 40) << text;
    EXPECT_EQ(config->consumer_regs, 232) << text;
    EXPECT_NE(render_attention_source(*config).find("using SlotRelease = ReleaseHalves;"), std::string::npos) << text;
    EXPECT_NE(render_attention_source(*whole).find("using SlotRelease = ReleaseEarly;"), std::string::npos) << base;
    EXPECT_EQ(to_string(whole->spec).find("half_release"), std::string::npos);
  }
  expect_refusals({{"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,chunk_waits=1,half_release=1", "half_release"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,half_release=1", "half_release"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,seesaw=1,chunk_waits=1,half_release=1", "half_release"}},
                  "half_release");
}

// q_reg_dims=N: the hand-over's scores warpgroup (paired=1, v_in_k=1) holds Q's first N head dims
// in registers; it takes 256 registers and the other warpgroup the rest of 3 x 168. Off by default;
// up to what 256 registers hold beside S, P and half of O (max_q_reg_dims, by the resolved tile).
TEST(HeadDimVSpec, QRegDimsPutQInTheScoresWarpgroupsRegisters) {
  struct Case {
    const char* base;
    int dims, most, producer;
  };
  for (const Case& k : {Case{"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,"
                             "early_release=1",
                             192, 192, 32},
                        Case{"dtype=bf16,head_dim=576,head_dim_v=512,causal=0,block_n=32,varlen=1,paged=1,pack_gqa=1,v_in_k=1,chunk_waits=1,"
                             "early_release=1,half_release=1",
                             288, 288, 40},
                        Case{"dtype=fp16,head_dim=512,causal=1,paired=1", 256, 288, 24},
                        Case{"dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,paired=1", 16, 288, 40},
                        Case{"dtype=bf16,head_dim=384,causal=0,varlen=1,paired=1", 384, 384, 24},
                        // ALiBi with a window: 4 registers fewer for Q
                        Case{"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,window=1,alibi=1,v_in_k=1,chunk_waits=1,"
                             "early_release=1",
                             176, 176, 32},
                        // and 4 fewer again where the split launch merges inline
                        Case{"dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,"
                             "chunk=1,alibi=1,v_in_k=1,chunk_waits=1,early_release=1",
                             160, 160, 32}}) {
    const std::string text = std::string(k.base) + ",q_reg_dims=" + std::to_string(k.dims);
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.error().message;
    EXPECT_EQ(spec->q_reg_dims, k.dims);
    EXPECT_EQ(to_string(*spec), text);
    auto config = make_config(*spec);
    auto plain = make_config(*parse_spec(k.base));
    ASSERT_TRUE(config.ok() && plain.ok()) << text;
    EXPECT_EQ(max_q_reg_dims(config->spec), k.most) << text;
    EXPECT_EQ(config->q_reg_steps, k.dims / 16) << text;
    EXPECT_EQ(config->smem_bytes, plain->smem_bytes) << text;  // the same shared memory: Q's tile stays whole
    EXPECT_EQ(config->producer_regs, k.producer) << text;
    EXPECT_EQ(config->first_consumer_regs, 256) << text;
    EXPECT_EQ(config->consumer_regs, 3 * 168 - k.producer - 256) << text;
    EXPECT_TRUE(check_register_budget(*config, 168).ok()) << text;
    EXPECT_FALSE(check_register_budget(*config, 160).ok()) << text;
    EXPECT_EQ(plain->first_consumer_regs, plain->consumer_regs) << k.base;
    EXPECT_EQ(plain->q_reg_steps, 0) << k.base;
    EXPECT_NE(render_attention_source(*config).find("kQRegSteps = " + std::to_string(k.dims / 16) + ";"), std::string::npos) << text;
    EXPECT_NE(render_attention_source(*plain).find("kQRegSteps = 0;"), std::string::npos) << k.base;
    EXPECT_EQ(to_string(plain->spec).find("q_reg_dims"), std::string::npos) << k.base;
    // One step past the most is refused once the tile is known (make_config resolves block_n).
    auto over = parse_spec(std::string(k.base) + ",q_reg_dims=" + std::to_string(k.most + 16));
    if (over.ok()) {
      auto refused = make_config(*over);
      ASSERT_FALSE(refused.ok()) << k.base;
      EXPECT_EQ(refused.error().field, "q_reg_dims");
      EXPECT_NE(refused.error().message.find("0.." + std::to_string(k.most)), std::string::npos) << refused.error().message;
    }
  }
  expect_refusals({{"dtype=bf16,head_dim=512,head_dim_v=512,causal=1,q_reg_dims=64", "q_reg_dims"},  // O in parts
                   {"dtype=bf16,head_dim=128,q_reg_dims=64", "q_reg_dims"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,seesaw=1,q_reg_dims=64", "q_reg_dims"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,q_reg_dims=24", "q_reg_dims"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,q_reg_dims=-16", "q_reg_dims"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,block_n=64,q_reg_dims=208", "q_reg_dims"},
                   {"dtype=bf16,head_dim=384,paired=1,q_reg_dims=400", "q_reg_dims"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,v_in_k=1,q_reg_dims=x", "q_reg_dims"}},
                  "q_reg_dims");
}

// paired=1: the same two warpgroups on one 64-row tile for V wider than 256 in its own ring (Gemma
// 4's 512/512, 384/384): no score computed twice, where O in parts computes Q K^T once per part.
TEST(HeadDimVSpec, PairedSharesOneTileWithVInItsOwnRing) {
  auto spec = parse_spec("dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,paired=1");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->paired && spec->pairs_o() && !spec->v_in_k);
  EXPECT_EQ(to_string(*spec), "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,paired=1");
  EXPECT_EQ(*parse_spec(to_string(*spec)), *spec);
  auto config = make_config(*spec);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->spec.consumer_wgs, 2);
  EXPECT_EQ(config->spec.block_m, 64);
  EXPECT_EQ(config->spec.block_n, 32);
  EXPECT_EQ(config->spec.stages, 2);
  EXPECT_EQ(config->o_parts, 1);
  EXPECT_EQ(config->v_cols, 256);
  EXPECT_EQ(config->v_tile_bytes, 32 * 512 * 2);  // both halves of V
  EXPECT_EQ(config->consumer_regs, 232u);
  EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec));
  const std::string source = render_attention_source(*config);
  EXPECT_NE(source.find("constexpr bool kPairedO = 1;"), std::string::npos);
  EXPECT_NE(source.find("constexpr bool kVInK = 0;"), std::string::npos);
  // 384/384 takes a third stage.
  auto narrow = make_config(*parse_spec("dtype=bf16,head_dim=384,causal=1,varlen=1,paired=1"));
  ASSERT_TRUE(narrow.ok()) << narrow.error().message;
  EXPECT_EQ(narrow->spec.stages, 3);
  EXPECT_LE(narrow->smem_bytes, shared_memory_budget(narrow->spec));
  // Off: O in parts, one consumer warpgroup.
  auto plain = make_config(*parse_spec("dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->o_parts, 2);
  EXPECT_EQ(plain->spec.consumer_wgs, 1);
  EXPECT_NE(render_attention_source(*plain).find("constexpr bool kPairedO = 0;"), std::string::npos);
  expect_refusals({{"dtype=bf16,head_dim=256,paired=1", "head_dim_v"},
                   {"dtype=bf16,head_dim=512,head_dim_v=256,paired=1", "head_dim_v"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,v_in_k=1,paired=1", "paired"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,qv=1,paired=1", "qv"},
                   {"dtype=bf16,head_dim=512,varlen=1,paged=1,kv_dtype=e4m3,paired=1", "paired"},
                   {"dtype=bf16,head_dim=512,consumer_wgs=1,paired=1", "consumer_wgs"},
                   {"dtype=bf16,head_dim=512,block_n=48,paired=1", "block_n"},
                   {"dtype=bf16,head_dim=512,pingpong=1,paired=1", "pingpong"}},
                  "paired");
}

// dim_split=1: a cluster's two CTAs share out the head dims of one tile (Gemma 4's 512/512 global
// layers, 384/384), each with the tiles and GEMMs of head dim 256 (192), two consumer warpgroups and
// the peer's partial scores in two inboxes; O in parts' scores are not computed twice.
TEST(HeadDimVSpec, DimSplitSharesOutTheHeadDimsOverACluster) {
  const std::string text = "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,dim_split=1";
  auto spec = parse_spec(text);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->dim_split);
  EXPECT_EQ(to_string(*spec), text);
  EXPECT_EQ(*parse_spec(to_string(*spec)), *spec);
  auto config = make_config(*spec);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->spec.consumer_wgs, 2);
  EXPECT_EQ(config->spec.block_m, 128);
  EXPECT_EQ(config->spec.block_n, 48);  // lengths on the device: 48 (64 spilled)
  EXPECT_EQ(config->spec.stages, 2);
  EXPECT_TRUE(config->spec.pingpong);
  EXPECT_EQ(config->qk_chunks, 4);  // each CTA's 256 columns of Q and K
  EXPECT_EQ(config->qk_k_steps, 16);
  EXPECT_EQ(config->v_chunks, 4);
  EXPECT_EQ(config->v_cols, 256);
  EXPECT_EQ(config->o_parts, 1);
  EXPECT_EQ(config->q_tile_bytes, 128 * 256 * 2);
  EXPECT_EQ(config->k_tile_bytes, 48 * 256 * 2);
  EXPECT_EQ(config->v_tile_bytes, 48 * 256 * 2);
  EXPECT_FALSE(config->persistent);
  // Head dim 256's plan with one Q buffer, plus the two inboxes (64 rows x 48 fp32 scores each) and
  // their ten barriers (each warp's rows filled, each warpgroup's inbox read): 1 KB alignment slack,
  // Q, two stages of K and V, the inboxes and their barriers, then the ring's barriers and tile words
  // (10 mbarriers, 2 order words, one 32-byte tile record: 128 bytes).
  EXPECT_EQ(config->q_buffers, 1);
  EXPECT_EQ(config->smem_bytes, 1024 + 128 * 256 * 2 + 2 * (2 * 48 * 256 * 2) + (2 * 64 * 48 * 4 + 10 * 8) + 128);
  // Dense: 64-key blocks, 226 KB.
  auto dense = make_config(*parse_spec("dtype=bf16,head_dim=512,head_dim_v=512,causal=1,dim_split=1"));
  ASSERT_TRUE(dense.ok()) << dense.error().message;
  EXPECT_EQ(dense->spec.block_n, 64);
  EXPECT_LE(dense->smem_bytes, shared_memory_budget(dense->spec));
  EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec));
  const std::string source = render_attention_source(*config);
  EXPECT_NE(source.find("constexpr int kDimSplit = 2;"), std::string::npos);
  EXPECT_NE(source.find("constexpr int kHeadDim = 512;"), std::string::npos);  // the softmax scale's head dim
  EXPECT_NE(source.find("constexpr int kQKChunks = 4;"), std::string::npos);
  auto narrow = make_config(*parse_spec("dtype=fp16,head_dim=384,head_dim_v=384,dim_split=1"));
  ASSERT_TRUE(narrow.ok()) << narrow.error().message;
  EXPECT_EQ(narrow->qk_chunks, 3);
  EXPECT_EQ(narrow->v_cols, 192);
  EXPECT_LE(narrow->smem_bytes, shared_memory_budget(narrow->spec));
  // Registers: 24 + 2 x 240, but with packed K/V at 384, or at 512 with a window or chunks, 32 + 2 x 232
  // (the producer spilled at 24; at 232 the 512 causal consumers spilled).
  EXPECT_EQ(dense->producer_regs, 24);
  EXPECT_EQ(config->producer_regs, 32);  // paged
  for (const char* text : {"dtype=bf16,head_dim=384,head_dim_v=384,varlen=1,dim_split=1",
                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,window=1,dim_split=1"}) {
    auto packed = make_config(*parse_spec(text));
    ASSERT_TRUE(packed.ok()) << text;
    EXPECT_EQ(packed->producer_regs, 32) << text;
    EXPECT_EQ(packed->consumer_regs, 232) << text;
  }
  auto packed_512 = make_config(*parse_spec("dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,dim_split=1"));
  ASSERT_TRUE(packed_512.ok());
  EXPECT_EQ(packed_512->producer_regs, 24);
  EXPECT_EQ(packed_512->consumer_regs, 240);
  // Off by default: O in parts, one consumer warpgroup, not printed.
  auto plain = make_config(*parse_spec("dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->o_parts, 2);
  EXPECT_EQ(to_string(plain->spec).find("dim_split"), std::string::npos);
  EXPECT_NE(render_attention_source(*plain).find("constexpr int kDimSplit = 1;"), std::string::npos);
  expect_refusals({{"dtype=bf16,head_dim=256,dim_split=1", "head_dim"},
                   {"dtype=bf16,head_dim=512,head_dim_v=256,dim_split=1", "head_dim"},
                   {"dtype=bf16,head_dim=576,head_dim_v=512,dim_split=1", "head_dim"},
                   {"dtype=bf16,head_dim=512,paired=1,dim_split=1", "paired"},
                   {"dtype=bf16,head_dim=512,varlen=1,paged=1,kv_dtype=e4m3,dim_split=1", "dim_split"},
                   {"dtype=bf16,head_dim=512,varlen=1,split_kv=1,dim_split=1", "split_kv"},
                   {"dtype=bf16,head_dim=512,consumer_wgs=1,dim_split=1", "consumer_wgs"},
                   {"dtype=bf16,head_dim=512,block_m=64,dim_split=1", "block_m"},
                   {"dtype=bf16,head_dim=512,block_n=80,dim_split=1", "block_n"}},
                  "dim_split");
  expect_refusals({{"dtype=bf16,head_dim=512,cluster=2,dim_split=1", "cluster"},
                   {"dtype=bf16,head_dim=512,scheduler=dynamic,dim_split=1", "scheduler"}},
                  "head_dim above 256");
}

TEST(HeadDimVConfig, VAndOTakeTheirOwnColumns) {
  auto config = make_config(*parse_spec("dtype=bf16,head_dim=192,head_dim_v=128,causal=1"));
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->qk_chunks, 3);
  EXPECT_EQ(config->v_chunks, 2);
  EXPECT_EQ(config->v_cols, 128);
  EXPECT_EQ(config->spec.block_n, 128);  // FlashAttention-3's tile for 192/128
  EXPECT_EQ(config->v_tile_bytes, config->spec.block_n * 128 * 2);
  EXPECT_LE(config->smem_bytes, shared_memory_budget(config->spec));
  const std::string source = render_attention_source(*config);
  EXPECT_NE(source.find("constexpr int kHeadDimV = 128;"), std::string::npos);
  EXPECT_NE(source.find("constexpr int kHeadDim = 192;"), std::string::npos);
  // The same spec without head_dim_v: V as wide as Q.
  auto square = make_config(*parse_spec("dtype=bf16,head_dim=192,causal=1"));
  ASSERT_TRUE(square.ok());
  EXPECT_EQ(square->v_cols, 192);
}

// The float64 reference with V narrower than Q: O's columns are those of the same attention over a
// V as wide as Q whose first head_dim_v columns are V (the weights depend on Q and K alone).
TEST(HeadDimVReference, ONarrowsWithVAndTheWeightsStay) {
  std::mt19937_64 rng(7);
  Problem wide;
  wide.seqlen_q = 37, wide.seqlen_k = 53, wide.heads_q = 4, wide.heads_kv = 2, wide.head_dim = 96, wide.causal = true;
  Problem narrow = wide;
  narrow.head_dim_v = 40;
  std::vector<uint16_t> q(size_t(37) * 4 * 96), k(size_t(53) * 2 * 96), v_wide(size_t(53) * 2 * 96);
  fill_random(q, true, rng);
  fill_random(k, true, rng);
  fill_random(v_wide, true, rng);
  std::vector<uint16_t> v_narrow(size_t(53) * 2 * 40);
  for (int j = 0; j < 53; ++j)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 40; ++c) v_narrow[(size_t(j) * 2 + h) * 40 + c] = v_wide[(size_t(j) * 2 + h) * 96 + c];
  const Reference a = cpu_reference(wide, q.data(), contiguous_strides(37, 4, 96), k.data(), contiguous_strides(53, 2, 96),
                                    v_wide.data(), contiguous_strides(53, 2, 96));
  const Reference b = cpu_reference(narrow, q.data(), contiguous_strides(37, 4, 96), k.data(), contiguous_strides(53, 2, 96),
                                    v_narrow.data(), contiguous_strides(53, 2, 40));
  ASSERT_EQ(b.o.size(), size_t(37) * 4 * 40);
  for (int r = 0; r < 37 * 4; ++r)
    for (int c = 0; c < 40; ++c) ASSERT_EQ(b.o[size_t(r) * 40 + c], a.o[size_t(r) * 96 + c]) << r << " " << c;
  EXPECT_EQ(b.lse, a.lse);
  EXPECT_NE(narrow.describe().find("d=96/40"), std::string::npos) << narrow.describe();
}

// The engine checks' buffers with V narrower than Q (192/128): Q and K rows 192 wide, V and O 128,
// each with its own strides, in every K/V source and pool layout.
TEST(HeadDimVEngineLayout, VAndOHaveTheirOwnColumnsInEveryKvSource) {
  EngineProblem p;
  p.head_dim = 192, p.head_dim_v = 128, p.heads_q = 8, p.heads_kv = 2;
  p.seqlen_q = {5, 0, 17}, p.seqlen_k = {40, 7, 33};
  EXPECT_EQ(p.v_dim(), 128);
  for (KvSource kv : {KvSource::kPacked, KvSource::kDense, KvSource::kPaged}) {
    p.kv = kv, p.page_size = 16;
    const EngineCapacity cap = capacity_for(p);
    const EngineLayout l = engine_layout(p, cap);
    SCOPED_TRACE(kv_source_name(kv));
    EXPECT_EQ(l.q_elems, int64_t(cap.total_q) * 8 * 192);
    EXPECT_EQ(l.o_elems, int64_t(cap.total_q) * 8 * 128);
    EXPECT_EQ(l.q_strides.row, 8 * 192);
    EXPECT_EQ(l.q_strides.head, 192);
    EXPECT_EQ(l.o_strides.row, 8 * 128);
    EXPECT_EQ(l.o_strides.head, 128);
    EXPECT_EQ(l.k_strides.row, 2 * 192);
    EXPECT_EQ(l.k_strides.head, 192);
    EXPECT_EQ(l.v_strides.row, 2 * 128);
    EXPECT_EQ(l.v_strides.head, 128);
    EXPECT_EQ(l.v_in_k, -1);
    switch (kv) {
      case KvSource::kPacked:
        EXPECT_EQ(l.k_elems, int64_t(cap.total_k) * 2 * 192);
        EXPECT_EQ(l.v_elems, int64_t(cap.total_k) * 2 * 128);
        break;
      case KvSource::kDense:
        EXPECT_EQ(l.k_strides.batch, int64_t(cap.max_seqlen_k) * 2 * 192);
        EXPECT_EQ(l.v_strides.batch, int64_t(cap.max_seqlen_k) * 2 * 128);
        EXPECT_EQ(l.v_elems, int64_t(cap.batch) * cap.max_seqlen_k * 2 * 128);
        break;
      case KvSource::kPaged:
        EXPECT_EQ(l.page_stride, 16 * 2 * 192);
        EXPECT_EQ(l.k_strides.batch, 16 * 2 * 192);  // the page strides
        EXPECT_EQ(l.v_strides.batch, 16 * 2 * 128);
        EXPECT_EQ(l.k_elems, int64_t(cap.num_pages) * 16 * 2 * 192);
        EXPECT_EQ(l.v_elems, int64_t(cap.num_pages) * 16 * 2 * 128);
        break;
    }
  }
  // HND pools: [pages][heads][page_size][columns].
  p.kv = KvSource::kPaged, p.page_size = 64, p.head_major_pool = true;
  EngineLayout hnd = engine_layout(p, capacity_for(p));
  EXPECT_EQ(hnd.k_strides.row, 192);
  EXPECT_EQ(hnd.k_strides.head, 64 * 192);
  EXPECT_EQ(hnd.v_strides.row, 128);
  EXPECT_EQ(hnd.v_strides.head, 64 * 128);
  EXPECT_EQ(hnd.v_strides.batch, 64 * 2 * 128);
  // K and V in one tensor: each page K's 192-wide page, then V's 128-wide one.
  p.head_major_pool = false, p.kv_in_one_tensor = true;
  const EngineCapacity cap = capacity_for(p);
  EngineLayout one = engine_layout(p, cap);
  EXPECT_EQ(one.page_stride, 64 * 2 * (192 + 128));
  EXPECT_EQ(one.k_strides.batch, one.page_stride);
  EXPECT_EQ(one.v_strides.batch, one.page_stride);
  EXPECT_EQ(one.v_in_k, 64 * 2 * 192);
  EXPECT_EQ(one.k_elems, int64_t(cap.num_pages) * one.page_stride);
  EXPECT_EQ(one.v_elems, 0);
  // Dense queries (a paged=1 spec without varlen): the batch strides are max_seqlen_q rows.
  p.kv_in_one_tensor = false, p.dense_q = true, p.seqlen_q = {4, 4, 4};
  EngineLayout dense_q = engine_layout(p, capacity_for(p));
  EXPECT_EQ(dense_q.q_strides.batch, 4 * 8 * 192);
  EXPECT_EQ(dense_q.o_strides.batch, 4 * 8 * 128);
  // Without head_dim_v, V is K's width.
  p.head_dim_v = 0;
  EngineLayout square = engine_layout(p, capacity_for(p));
  EXPECT_EQ(square.v_strides.row, square.k_strides.row);
  EXPECT_EQ(square.o_strides.row, square.q_strides.row);
  p.head_dim_v = 128;
  EXPECT_NE(p.describe().find("d=192/128"), std::string::npos) << p.describe();
}

// Every spec the head_dim_v GPU cases run (attention_gpu_test.cpp, attention_engine_gpu_test.cpp,
// kv_fp8_gpu_test.cpp, fp8_operands_gpu_test.cpp) parses and resolves: a spec the GPU run would
// refuse fails here first.
TEST(HeadDimVCases, TheSpecsResolve) {
  std::vector<std::string> specs;
  for (const char* dt : {"fp16", "bf16"})
    for (const char* causal : {"0", "1"}) {
      const std::string head = std::string("dtype=") + dt;
      for (auto [d, dv] : {std::pair{192, 128}, {128, 64}, {128, 96}, {256, 128}, {64, 32}, {320, 256}})
        specs.push_back(head + ",head_dim=" + std::to_string(d) + ",causal=" + causal + ",head_dim_v=" + std::to_string(dv));
      for (auto [d, dv] : {std::pair{192, 128}, {320, 256}, {128, 64}}) {
        const std::string pair = head + ",head_dim=" + std::to_string(d) + ",head_dim_v=" + std::to_string(dv) + ",causal=" + causal;
        specs.push_back(pair + ",varlen=1");
        specs.push_back(pair + ",varlen=1,paged=1");
        if (d != 128) {
          specs.push_back(pair + ",varlen=1,paged=1,pack_gqa=1,split_kv=1");
          specs.push_back(pair + ",varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline");
        }
      }
      for (const char* kv : {",varlen=1", ",varlen=1,paged=1"}) {
        specs.push_back(head + ",head_dim=192,causal=" + causal + kv + ",head_dim_v=128,kv_dtype=e4m3");
        specs.push_back(head + ",head_dim=192,causal=" + causal + kv + ",head_dim_v=128,pack_gqa=1,split_kv=1,combine=inline,kv_dtype=e4m3");
      }
      for (const char* out : {"", ",out_dtype=fp16"}) {
        const std::string e4m3 = std::string("dtype=e4m3,head_dim=192,causal=") + causal + out;
        specs.push_back(e4m3 + ",head_dim_v=128");
        for (const char* kv : {",varlen=1", ",varlen=1,paged=1"}) {
          specs.push_back(e4m3 + kv + ",head_dim_v=128");
          specs.push_back(e4m3 + kv + ",head_dim_v=128,pack_gqa=1,split_kv=1");
          specs.push_back(e4m3 + kv + ",head_dim_v=128,pack_gqa=1,split_kv=1,combine=inline");
        }
      }
    }
  specs.push_back("dtype=bf16,head_dim=192,head_dim_v=128,causal=1,paged=1");
  for (const char* kv : {"", ",paged=1"}) {
    specs.push_back(std::string("dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1") + kv + ",split_kv=1");
    specs.push_back(std::string("dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1") + kv + ",pack_gqa=1,split_kv=1,combine=inline");
  }
  specs.push_back("dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,scheduler=dynamic");
  for (const std::string& text : specs) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.error().message;
    EXPECT_LT(spec->effective_head_dim_v(), spec->head_dim) << text;
    auto config = make_config(*spec);
    EXPECT_TRUE(config.ok()) << text << ": " << config.error().message;
  }
}

class HeadDimVVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(HeadDimVVariant, CompilesWithoutSpills) { expect_compiles_without_spills(GetParam()); }

// DeepSeek's 192/128 prefill through every path, and other pairs FlashAttention-3 takes (V at most
// Q's head dim), with an FP8 cache and FP8 operands.
INSTANTIATE_TEST_SUITE_P(All, HeadDimVVariant,
                         ::testing::Values("dtype=bf16,head_dim=192,head_dim_v=128", "dtype=bf16,head_dim=192,head_dim_v=128,causal=1",
                                           "dtype=fp16,head_dim=192,head_dim_v=128,causal=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline",
                                           "dtype=bf16,head_dim=256,head_dim_v=128,causal=1", "dtype=bf16,head_dim=128,head_dim_v=64",
                                           "dtype=fp16,head_dim=128,head_dim_v=96,causal=1", "dtype=bf16,head_dim=64,head_dim_v=32",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,window=1,sinks=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=e4m3,head_dim=192,head_dim_v=128,causal=1",
                                           // Mistral Small 4's 320/256: Q K^T above 256, O at 256
                                           "dtype=bf16,head_dim=320,head_dim_v=256", "dtype=fp16,head_dim=320,head_dim_v=256,causal=1",
                                           "dtype=bf16,head_dim=320,head_dim_v=256,causal=1,varlen=1,paged=1",
                                           "dtype=bf16,head_dim=320,head_dim_v=256,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           // O in two column parts: Gemma 4's 512/512, MLA's absorbed 576/512 (V = the
                                           // latent cache's first 512 columns), 384/384
                                           "dtype=bf16,head_dim=512,head_dim_v=512", "dtype=fp16,head_dim=512,head_dim_v=512,causal=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           "dtype=bf16,head_dim=384,head_dim_v=384,causal=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1", "dtype=fp16,head_dim=576,head_dim_v=384",
                                           // the head dims shared out over a cluster's two CTAs (dim_split=1)
                                           "dtype=bf16,head_dim=512,head_dim_v=512,dim_split=1", "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,dim_split=1",
                                           "dtype=fp16,head_dim=512,head_dim_v=512,causal=1,varlen=1,dim_split=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,dim_split=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,varlen=1,paged=1,dim_split=1",
                                           "dtype=bf16,head_dim=384,head_dim_v=384,dim_split=1", "dtype=fp16,head_dim=384,head_dim_v=384,causal=1,varlen=1,paged=1,dim_split=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,window=1,sinks=1,dim_split=1",
                                           "dtype=fp16,head_dim=512,head_dim_v=512,causal=1,softcap=1,alibi=1,dim_split=1",
                                           // packed K/V: the producer's 32 registers (at 24 it spilled)
                                           "dtype=bf16,head_dim=384,head_dim_v=384,causal=1,varlen=1,window=1,dim_split=1",
                                           "dtype=fp16,head_dim=384,head_dim_v=384,varlen=1,dim_split=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,chunk=1,dim_split=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,varlen=1,window=1,dim_split=1",
                                           // FlashAttention-3's split MLA form (qv=1): Q's and K's chunks from two tensors each
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,qv=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,qv=1",
                                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,qv=1",
                                           // V in K's rows (v_in_k=1): two warpgroups share a tile's scores, each half of O
                                           "dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,v_in_k=1", "dtype=fp16,head_dim=512,head_dim_v=512,causal=1,paged=1,v_in_k=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,v_in_k=1",
                                           "dtype=bf16,head_dim=384,head_dim_v=384,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,softcap=1,sinks=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,window=1,alibi=1,varlen=1,paged=1,v_in_k=1",
                                           // the split form on the shared-scores kernels (qv=1 with v_in_k=1)
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,qv=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,qv=1,v_in_k=1",
                                           // the seesaw (seesaw=1): the warpgroups take alternate blocks
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,v_in_k=1,seesaw=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1,seesaw=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,softcap=1,sinks=1,v_in_k=1,seesaw=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,window=1,alibi=1,varlen=1,paged=1,v_in_k=1,seesaw=1",
                                           // chunk_waits=1: the scores chunk by chunk as a block lands, on both schedules
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,block_n=32,v_in_k=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,v_in_k=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,v_in_k=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1,chunk_waits=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,pack_gqa=1,split_kv=1,v_in_k=1,seesaw=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1,seesaw=1,chunk_waits=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,window=1,alibi=1,varlen=1,paged=1,v_in_k=1,seesaw=1,chunk_waits=1",
                                           // early_release=1: the hand-over's slots back as soon as their P V's are done
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,early_release=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,block_n=32,v_in_k=1,chunk_waits=1,early_release=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,combine=inline,v_in_k=1,chunk_waits=1,early_release=1",
                                           // half_release=1: each warpgroup's part of a slot back on its own
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,early_release=1,half_release=1",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,block_n=32,v_in_k=1,chunk_waits=1,early_release=1,half_release=1",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,early_release=1,half_release=1",
                                           // q_reg_dims: Q's first head dims in the scores warpgroup's registers (256 of them)
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,early_release=1,q_reg_dims=192",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,block_n=32,v_in_k=1,chunk_waits=1,early_release=1,half_release=1,q_reg_dims=288",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1,q_reg_dims=192",
                                           "dtype=bf16,head_dim=512,head_dim_v=512,causal=1,varlen=1,paged=1,paired=1,q_reg_dims=288",
                                           "dtype=fp16,head_dim=512,head_dim_v=512,paired=1,q_reg_dims=288",
                                           "dtype=bf16,head_dim=384,head_dim_v=384,causal=1,varlen=1,paired=1,q_reg_dims=384",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,window=1,alibi=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1,chunk_waits=1,early_release=1,q_reg_dims=176",
                                           "dtype=bf16,head_dim=576,head_dim_v=512,chunk=1,alibi=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,v_in_k=1,chunk_waits=1,early_release=1,q_reg_dims=160",
                                           // the sweep's peak, 253 of 256 registers (bench/NOTES.md, 2026-12-07: every q_reg_dims variant)
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,window=1,varlen=1,paged=1,pack_gqa=1,v_in_k=1,chunk_waits=1,early_release=1,half_release=1,q_reg_dims=192"),
                         spec_test_name);

}  // namespace
}  // namespace flashjit
