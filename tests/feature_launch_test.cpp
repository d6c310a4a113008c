// Issue 38's windows and chunks on the host: the spec keys, the launch's feature inputs checked
// against them (messages name the field and the spec key), the parameters they fill, the split
// count and the tile deal's cost over the visible keys only.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "config/kernel_config.hpp"
#include "launch/attention_launch.hpp"
#include "launch/feature_args.hpp"
#include "launch/tile_schedule.hpp"
#include "spec/attention_spec.hpp"
#include "support/config_of.hpp"

namespace flashjit {
namespace {

std::string spec_error(const std::string& text) {
  auto spec = parse_spec(text);
  return spec ? std::string() : spec.error().message;
}

std::string feature_error(const std::string& spec, const FeatureInputs& f, int heads_q = 8) {
  AttentionArgs a = attention_extents(2, 128, 128, heads_q, heads_q);
  a.features = f;
  const Status st = check_feature_inputs(config_of(spec).spec, a);
  return st ? std::string() : st.error().message;
}

TEST(FeatureSpec, KeysPrintOnlyWhenOnAndRoundTrip) {
  const std::string plain = "dtype=bf16,head_dim=128,causal=1";
  EXPECT_EQ(to_string(*parse_spec(plain)), plain);  // every earlier text and cache key unchanged
  EXPECT_EQ(to_string(*parse_spec(plain + ",window=0,chunk=false")), plain);
  const AttentionSpec both = *parse_spec("chunk=1,window=true,dtype=bf16,head_dim=64");
  EXPECT_TRUE(both.window);
  EXPECT_TRUE(both.chunk);
  EXPECT_EQ(to_string(both), "dtype=bf16,head_dim=64,causal=0,window=1,chunk=1");
  EXPECT_EQ(*parse_spec(to_string(both)), both);
  EXPECT_NE(spec_error("dtype=bf16,window=2").find("spec field 'window': value '2' is not allowed"), std::string::npos)
      << spec_error("dtype=bf16,window=2");
}

TEST(FeatureSpec, WhatTheKernelCannotDoYetIsRefusedByName) {
  EXPECT_NE(spec_error("dtype=bf16,head_dim=128,causal=1,cluster=2,window=1").find("spec field 'cluster': value 2 is not allowed; allowed: 1 with window=1"),
            std::string::npos);
  EXPECT_NE(spec_error("dtype=bf16,head_dim=128,cluster=2,chunk=1").find("allowed: 1 with chunk=1"), std::string::npos);
}

TEST(FeatureSpec, KernelFeatureKeysAreAccepted) {
  for (const char* key : {"softcap", "sinks", "alibi", "softcap=1,sinks=1,alibi"}) {
    const std::string text = std::string("dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,") + key + "=1";
    EXPECT_EQ(spec_error(text), "") << key;
    EXPECT_EQ(to_string(*parse_spec(text)), text);
  }
}

// The refusal of a value whose spec key the kernel (of `spec`) lacks: field, value, key, the
// kernel's canonical spec and what the field may hold without the key.
std::string needs_key(const std::string& spec, const std::string& field_value, const std::string& key, const std::string& off) {
  return field_value + " needs spec key " + key + "=1 (this kernel's spec is " + to_string(config_of(spec).spec) + "); allowed without it: " + off;
}

TEST(FeatureArgs, ValuesWithoutTheirSpecKeyNameFieldAndKey) {
  const std::string plain = "dtype=bf16,head_dim=128,causal=1";
  EXPECT_EQ(feature_error(plain, {}), "");
  FeatureInputs f;
  f.window_left = 127;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "window_left: 127", "window", "-1 (off)"));
  f = {};
  f.window_right = 0;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "window_right: 0", "window", "-1 (off)"));
  f = {};
  f.chunk = 8192;
  EXPECT_EQ(feature_error(plain + ",window=1", f), needs_key(plain + ",window=1", "attention_chunk: 8192", "chunk", "0 (off)"));
  f = {};
  f.softcap = 50;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "softcap: 50", "softcap", "0 (off)"));
  f = {};
  f.sinks = 0x1000;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "sinks: 0x1000", "sinks", "0 (null)"));
  f = {};
  f.sinks_bf16 = true;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "sinks_dtype: bf16", "sinks", "0 (no sinks)"));
  f = {};
  f.alibi_slopes = 0x1000;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "alibi_slopes: 0x1000", "alibi", "0 (null)"));
  f = {};
  f.alibi_batch_stride = 8;
  EXPECT_EQ(feature_error(plain, f), needs_key(plain, "alibi_batch_stride: 8", "alibi", "0 (off)"));
}

// The one spec-key check (the C API adds none of its own): every key alone, with the others on,
// leaves the other fields' values refused and its own accepted; the message prints the spec as
// the kernel has it (every field resolved, the feature keys that are on).
TEST(FeatureArgs, EachSpecKeyAdmitsItsOwnFieldsOnly) {
  FeatureInputs all;
  all.window_left = 127, all.window_right = 0, all.chunk = 64, all.softcap = 30;
  all.sinks = 0x1000, all.sinks_bf16 = true, all.alibi_slopes = 0x2000, all.alibi_batch_stride = 8;
  const std::string base = "dtype=bf16,head_dim=64,causal=1";
  EXPECT_EQ(feature_error(base + ",window=1,chunk=1,softcap=1,sinks=1,alibi=1", all), "");
  EXPECT_EQ(feature_error(base + ",chunk=1,softcap=1,sinks=1,alibi=1", all).rfind("window_left: 127 needs spec key window=1", 0), 0u);
  EXPECT_EQ(feature_error(base + ",window=1,softcap=1,sinks=1,alibi=1", all).rfind("attention_chunk: 64 needs spec key chunk=1", 0), 0u);
  EXPECT_EQ(feature_error(base + ",window=1,chunk=1,sinks=1,alibi=1", all).rfind("softcap: 30 needs spec key softcap=1", 0), 0u);
  EXPECT_EQ(feature_error(base + ",window=1,chunk=1,softcap=1,alibi=1", all).rfind("sinks: 0x1000 needs spec key sinks=1", 0), 0u);
  EXPECT_EQ(feature_error(base + ",window=1,chunk=1,softcap=1,sinks=1", all).rfind("alibi_slopes: 0x2000 needs spec key alibi=1", 0), 0u);
  const std::string text = feature_error(base + ",window=1", all);
  EXPECT_NE(text.find("(this kernel's spec is dtype=bf16,head_dim=64,head_dim_v=64,causal=1,"), std::string::npos) << text;
  EXPECT_NE(text.find(",window=1); allowed without it: 0 (off)"), std::string::npos) << text;
}

TEST(FeatureArgs, WindowAndChunkRanges) {
  const std::string window = "dtype=bf16,head_dim=128,window=1", chunk = "dtype=bf16,head_dim=128,chunk=1";
  for (auto [left, right] : {std::pair{-1, -1}, {0, 0}, {127, 0}, {0, 127}, {4096, -1}, {-1, 4096}}) {
    FeatureInputs f;
    f.window_left = left, f.window_right = right;
    EXPECT_EQ(feature_error(window, f), "") << left << "," << right;
    EXPECT_EQ(feature_error(window + ",causal=1", f), "") << left << "," << right;  // causal: the right bound is 0
  }
  FeatureInputs f;
  f.window_left = -2;
  EXPECT_EQ(feature_error(window, f), "window_left: -2 is not allowed; allowed: -1 (unbounded) or 0 and more keys");
  f = {};
  f.window_right = -5;
  EXPECT_EQ(feature_error(window, f), "window_right: -5 is not allowed; allowed: -1 (unbounded) or 0 and more keys");
  f = {};
  EXPECT_EQ(feature_error(chunk, f), "attention_chunk: 0 is not allowed; allowed: 1 or more keys per chunk (spec key chunk=1)");
  f.chunk = -3;
  EXPECT_NE(feature_error(chunk, f).find("attention_chunk: -3 is not allowed"), std::string::npos);
  f.chunk = 1;
  EXPECT_EQ(feature_error(chunk, f), "");
}

TEST(FeatureArgs, ValidateAttentionArgsChecksTheFeatures) {
  const KernelConfig config = config_of("dtype=bf16,head_dim=128,causal=1");
  AttentionArgs a = attention_extents(1, 256, 256, 8, 8);
  a.q = a.k = a.v = a.o = 0x10000;
  a.q_strides = a.o_strides = a.k_strides = a.v_strides = contiguous_bshd(256, 8, 128);
  EXPECT_TRUE(validate_attention_args(config, a));
  a.features.window_left = 127;
  const Status st = validate_attention_args(config, a);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().field, "window_left");
  EXPECT_EQ(st.error().message, needs_key("dtype=bf16,head_dim=128,causal=1", "window_left: 127", "window", "-1 (off)"));
}

TEST(FeatureParams, WindowAndChunkReachTheParametersOnlyWhereCompiledIn) {
  AttentionArgs a = attention_extents(1, 256, 256, 8, 8);
  a.features.window_left = 127, a.features.window_right = 3, a.features.chunk = 64;
  KernelParams p{};
  set_feature_inputs(p, config_of("dtype=bf16,head_dim=128,causal=1,window=1,chunk=1"), a);
  EXPECT_EQ(p.window_left, 127);
  EXPECT_EQ(p.window_right, 3);  // the kernel's rule reads causal as a right bound of 0
  EXPECT_EQ(p.chunk, 64);
  KernelParams w{};
  set_feature_inputs(w, config_of("dtype=bf16,head_dim=128,window=1"), a);
  EXPECT_EQ(w.window_left, 127);
  EXPECT_EQ(w.chunk, 0);
  KernelParams off{};
  set_feature_inputs(off, config_of("dtype=bf16,head_dim=128,causal=1"), attention_extents(1, 256, 256, 8, 8));
  EXPECT_EQ(off.window_left, -1);
  EXPECT_EQ(off.window_right, -1);
  EXPECT_EQ(off.chunk, 0);
  EXPECT_EQ(off.softcap, 0.f);
  EXPECT_EQ(off.sinks, nullptr);
  EXPECT_EQ(off.alibi_slopes, nullptr);
}

// The kernel keeps scores in units of the cap with softcap (templates/score_mod.cuh): the exp2
// step folds softcap x log2(e), the tanh takes scale / softcap; without it the scale stays folded.
TEST(FeatureParams, SoftcapSplitsTheScaleFromTheExp2Step) {
  AttentionArgs a = attention_extents(1, 256, 256, 8, 8);
  a.softmax_scale = 0.125f;
  a.features.softcap = 50;
  KernelParams cap{};
  set_feature_inputs(cap, config_of("dtype=bf16,head_dim=64,causal=1,softcap=1"), a);
  EXPECT_EQ(cap.softcap, 50.f);
  EXPECT_FLOAT_EQ(cap.scale_log2, 50.f * 1.4426950408889634f);
  EXPECT_FLOAT_EQ(cap.softcap_prescale, 0.125f / 50.f);
  EXPECT_FLOAT_EQ(cap.inv_score_unit, 1.f / 50.f);
  KernelParams off{};
  a.features.softcap = 0;
  set_feature_inputs(off, config_of("dtype=bf16,head_dim=64,causal=1"), a);
  EXPECT_EQ(off.softcap, 0.f);
  EXPECT_EQ(off.scale_log2, 0.125f * 1.4426950408889634f);  // as before issue 38
  EXPECT_EQ(off.softcap_prescale, 0.f);
  EXPECT_FLOAT_EQ(off.inv_score_unit, 8.f);
  KernelParams default_scale{};
  a.softmax_scale = 0;
  set_feature_inputs(default_scale, config_of("dtype=bf16,head_dim=64,causal=1"), a);
  EXPECT_FLOAT_EQ(default_scale.scale_log2, 1.4426950408889634f / 8.f);  // 1 / sqrt(64)
}

// The sink and slope pointers, the sinks' dtype and the slopes' per-batch stride reach the
// kernel where their spec keys compiled them in; ALiBi's slopes are read in the kernel's score
// units (1 / scale, or 1 / softcap with a cap: templates/score_mod.cuh).
TEST(FeatureParams, SinksAndSlopesReachTheParametersWhereCompiledIn) {
  AttentionArgs a = attention_extents(2, 256, 256, 8, 8);
  a.softmax_scale = 0.125f;
  a.features.sinks = 0x2000, a.features.sinks_bf16 = 1;
  a.features.alibi_slopes = 0x3000, a.features.alibi_batch_stride = 8;
  KernelParams p{};
  set_feature_inputs(p, config_of("dtype=bf16,head_dim=64,causal=1,sinks=1,alibi=1"), a);
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.sinks), 0x2000u);
  EXPECT_EQ(p.sinks_bf16, 1);
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.alibi_slopes), 0x3000u);
  EXPECT_EQ(p.alibi_batch_stride, 8);
  EXPECT_FLOAT_EQ(p.inv_score_unit, 8.f);
  EXPECT_FLOAT_EQ(p.scale_log2, 0.125f * 1.4426950408889634f);
  a.features.softcap = 30;
  KernelParams capped{};
  set_feature_inputs(capped, config_of("dtype=bf16,head_dim=64,causal=1,softcap=1,alibi=1"), a);
  EXPECT_EQ(capped.sinks, nullptr);
  EXPECT_EQ(capped.sinks_bf16, 0);
  EXPECT_FLOAT_EQ(capped.inv_score_unit, 1.f / 30.f);
  EXPECT_FLOAT_EQ(capped.scale_log2, 30.f * 1.4426950408889634f);
}

AttentionArgs decode_args(int batch, int seqlen_k, int max_splits) {
  AttentionArgs a = attention_extents(batch, 1, seqlen_k, 32, 8);
  a.engine.total_q = batch;
  a.decode.max_splits = max_splits;
  return a;
}

TEST(FeatureSplits, AWindowSplitsOnlyItsVisibleBlocks) {
  const KernelConfig plain = config_of("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1");
  const KernelConfig window = config_of("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,window=1");
  AttentionArgs a = decode_args(1, 32768, 64);
  EXPECT_EQ(tile_geometry(plain, a, 132).splits, 16);
  a.features.window_left = 127;  // the decode row sees keys 32640..32767: block 255 alone (block_n 128)
  EXPECT_EQ(tile_geometry(window, a, 132).splits, 1);
  a.features.window_left = 128;  // from key 32639: blocks 254 and 255
  EXPECT_EQ(tile_geometry(window, a, 132).splits, 2);
  a.features.window_left = 1000;  // from key 31767: blocks 248..255
  EXPECT_EQ(tile_geometry(window, a, 132).splits, 8);
  a.features.window_left = -1;  // unbounded: as without the key
  EXPECT_EQ(tile_geometry(window, a, 132).splits, 16);
  const KernelConfig chunk = config_of("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,chunk=1");
  AttentionArgs c = decode_args(1, 32768, 64);
  c.features.chunk = 8192;  // the last row's chunk: keys 24576..32767, 64 blocks
  EXPECT_EQ(tile_geometry(chunk, c, 132).splits, 16);
  c.features.chunk = 300;  // keys 32700..32767: one block
  EXPECT_EQ(tile_geometry(chunk, c, 132).splits, 1);
}

TEST(FeatureCost, AWindowsTilesCostItsVisibleBlocks) {
  // Causal tiles cost from one block to all of them: the deal holds light ones back. Under a
  // window of 128 keys every tile costs two or three blocks: nothing is worth holding back.
  const KernelConfig causal = config_of("dtype=bf16,head_dim=128,causal=1");
  const KernelConfig window = config_of("dtype=bf16,head_dim=128,causal=1,window=1");
  AttentionArgs a = attention_extents(1, 8192, 8192, 16, 16);
  EXPECT_GT(causal_hold(causal, a, 132).fill_blocks, 0);
  a.features.window_left = -1;
  EXPECT_GT(causal_hold(window, a, 132).fill_blocks, 0);  // an unbounded window is the causal mask
  a.features.window_left = 127;
  EXPECT_EQ(causal_hold(window, a, 132).fill_blocks, 0);
  EXPECT_EQ(causal_hold(window, a, 132).held_heads, 0);
}

}  // namespace
}  // namespace flashjit
