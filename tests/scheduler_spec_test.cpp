// The spec key scheduler=static|dynamic without a GPU: its text, what it needs of the tiles, the
// tiles it picks, and the workspace its tile counter takes (size and the C API's checks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"
#include "spec/attention_spec.hpp"
#include "support/args_refusals.hpp"

namespace flashjit {
namespace {

TEST(SchedulerSpec, StaticIsTheDefaultAndOnlyDynamicIsPrinted) {
  auto dynamic = parse_spec("dtype=bf16,head_dim=128,causal=1,scheduler=dynamic");
  ASSERT_TRUE(dynamic.ok()) << dynamic.error().message;
  EXPECT_TRUE(dynamic->dynamic_schedule);
  EXPECT_EQ(to_string(*dynamic), "dtype=bf16,head_dim=128,causal=1,scheduler=dynamic");
  EXPECT_EQ(*parse_spec(to_string(*dynamic)), *dynamic);
  auto fixed = parse_spec("dtype=bf16,head_dim=128,causal=1,scheduler=static");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(*fixed, *parse_spec("dtype=bf16,head_dim=128,causal=1"));  // the same kernel, the same cache key
  EXPECT_EQ(to_string(*fixed), "dtype=bf16,head_dim=128,causal=1");
  for (const char* bad : {"scheduler=Dynamic", "scheduler=", "scheduler=1", "scheduler=longest"}) {
    auto parsed = parse_spec(std::string("dtype=bf16,head_dim=128,") + bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().field, "scheduler") << bad;
    EXPECT_NE(parsed.error().message.find("allowed: static or dynamic"), std::string::npos) << parsed.error().message;
  }
}

// The producer's take needs registers that two CTAs an SM and three consumer warpgroups do not
// leave, a cluster has nothing to schedule, and the consumers read the published tiles of two Q
// buffers: each refusal names the field and says what is allowed.
TEST(SchedulerSpec, DynamicNeedsTwoQBuffersAndTheProducersRegisters) {
  const struct {
    const char* spec;
    const char* says;
  } refused[] = {{"dtype=bf16,head_dim=128,ctas_per_sm=2,scheduler=dynamic", "with ctas_per_sm=2"},
                 {"dtype=bf16,head_dim=64,consumer_wgs=3,scheduler=dynamic", "with consumer_wgs=3"},
                 {"dtype=bf16,head_dim=128,cluster=2,scheduler=dynamic", "with cluster=2"},
                 {"dtype=bf16,head_dim=256,scheduler=dynamic", "two Q buffers"},
                 {"dtype=bf16,head_dim=192,causal=1,scheduler=dynamic", "two Q buffers"}};
  for (const auto& c : refused) {
    char reason[512] = {};
    EXPECT_EQ(flashjit_supported(c.spec, reason, sizeof(reason)), FLASHJIT_ERROR_INVALID_SPEC) << c.spec;
    EXPECT_NE(std::string(reason).find("'scheduler'"), std::string::npos) << reason;
    EXPECT_NE(std::string(reason).find(c.says), std::string::npos) << reason;
    EXPECT_NE(std::string(reason).find("allowed: static"), std::string::npos) << reason;
  }
  // At auto tiles the dynamic spec picks tiles it can run: two consumer warpgroups where the
  // static one takes three (d64 without a mask), one CTA an SM for paged decode.
  auto d64 = make_config(*parse_spec("dtype=bf16,head_dim=64,scheduler=dynamic"));
  ASSERT_TRUE(d64.ok()) << d64.error().message;
  EXPECT_EQ(d64->spec.consumer_wgs, 2);
  EXPECT_EQ(make_config(*parse_spec("dtype=bf16,head_dim=64"))->spec.consumer_wgs, 3);
  auto decode = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,scheduler=dynamic"));
  ASSERT_TRUE(decode.ok()) << decode.error().message;
  EXPECT_EQ(decode->spec.ctas_per_sm, 1);
  EXPECT_EQ(decode->q_buffers, 2);
  for (const char* spec : {"dtype=bf16,head_dim=128,causal=1,scheduler=dynamic", "dtype=fp16,head_dim=96,varlen=1,paged=1,causal=1,scheduler=dynamic",
                           "dtype=bf16,head_dim=64,causal=1,consumer_wgs=1,scheduler=dynamic"}) {
    auto config = make_config(*parse_spec(spec));
    ASSERT_TRUE(config.ok()) << spec << ": " << config.error().message;
    EXPECT_EQ(config->q_buffers, 2) << spec;
    EXPECT_TRUE(config->persistent) << spec;
    // The producer's take and publish need more than the static deal's 24 registers.
    EXPECT_GE(config->producer_regs, 40) << spec;
    EXPECT_LE(config->producer_regs + config->spec.consumer_wgs * config->consumer_regs, 128 * (1 + config->spec.consumer_wgs) * 168 / 128) << spec;
  }
  // No long-sequence variant: it balances its tiles itself.
  EXPECT_FALSE(long_sequence_variant(*parse_spec("dtype=bf16,head_dim=64,causal=1,scheduler=dynamic")).has_value());
  EXPECT_TRUE(long_sequence_variant(*parse_spec("dtype=bf16,head_dim=64,causal=1")).has_value());
}

flashjit_attention_args_t dense_step() {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x10000, a.k = 0x20000, a.v = 0x30000, a.o = 0x40000;
  a.batch = 2, a.seqlen_q = 1000, a.seqlen_k = 1000, a.heads_q = 16, a.heads_kv = 16;
  a.q_strides = a.o_strides = a.k_strides = a.v_strides = flashjit_contiguous_bshd(1000, 16, 128);
  return a;
}

TEST(SchedulerApi, TheTileCounterTakesTheWorkspacesFirst256Bytes) {
  const char* dynamic = "dtype=bf16,head_dim=128,causal=1,scheduler=dynamic";
  const char* fixed = "dtype=bf16,head_dim=128,causal=1";
  flashjit_attention_args_t a = dense_step();
  uint64_t bytes = 1;
  ASSERT_EQ(flashjit_attention_workspace_size(dynamic, &a, &bytes), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  EXPECT_EQ(bytes, 256u);
  ASSERT_EQ(flashjit_attention_workspace_size(fixed, &a, &bytes), FLASHJIT_SUCCESS);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(flashjit_validate_attention_args(fixed, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  EXPECT_EQ(flashjit_validate_attention_args(dynamic, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(flashjit_last_error_field(), "args.workspace");
  EXPECT_NE(std::string(flashjit_last_error_message()).find("tile counter"), std::string::npos) << flashjit_last_error_message();
  a.workspace = 0x100000, a.workspace_bytes = 256;
  EXPECT_EQ(flashjit_validate_attention_args(dynamic, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  expect_each_refused(a, {
      {dynamic, "args.workspace_bytes", "at least 256", [](auto& x) { x.workspace_bytes = 255; }},
      {dynamic, "args.workspace", "256-byte", [](auto& x) { x.workspace += 128; }},
      {fixed, "args.workspace", "scheduler=dynamic", [](auto& x) { x.workspace_bytes = 0; }},
      {fixed, "args.workspace_bytes", "scheduler=dynamic", [](auto& x) { x.workspace = 0; }},
      {dynamic, "args.max_splits", "split_kv=1", [](auto& x) { x.max_splits = 4; }},
  });
}

// With split_kv the counter comes first and the partials after it: the size is 256 more, and a
// workspace 256 bytes short of max_splits' holds one split fewer.
TEST(SchedulerApi, SplitPartialsFollowTheCounter) {
  auto fixed = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1"));
  auto dynamic = make_config(*parse_spec("dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,scheduler=dynamic"));
  ASSERT_TRUE(fixed.ok() && dynamic.ok());
  AttentionArgs a;
  a.batch = 4, a.seqlen_q = 1, a.seqlen_k = 8192, a.heads_q = 32, a.heads_kv = 8;
  a.engine.total_q = 4;
  a.decode.max_splits = 8;
  EXPECT_EQ(attention_workspace_bytes(*dynamic, a), 256 + attention_workspace_bytes(*fixed, a));
  EXPECT_EQ(split_workspace_bytes(*dynamic, a), split_workspace_bytes(*fixed, a));
  a.decode.workspace_bytes = attention_workspace_bytes(*dynamic, a);
  EXPECT_EQ(split_capacity(*dynamic, a), 8);
  EXPECT_EQ(split_capacity(*fixed, a), 8);
  a.decode.workspace_bytes -= 256;
  EXPECT_EQ(split_capacity(*dynamic, a), 7);
  EXPECT_EQ(split_capacity(*fixed, a), 8);
}

}  // namespace
}  // namespace flashjit
