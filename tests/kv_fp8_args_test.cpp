// The FP8 cache's launch arguments (spec key kv_dtype=e4m3, issue 39) on the CPU, through the core
// (validate_attention_args) and the C API (flashjit_validate_attention_args): both scale pointers
// required with the key and refused without it, K/V strides in bytes and multiples of 16, scale
// strides not negative; each refusal names the field.
#include <gtest/gtest.h>

#include <string>

#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"
#include "spec/attention_spec.hpp"
#include "support/args_refusals.hpp"
#include "support/config_of.hpp"

namespace flashjit {
namespace {

const char* kFp8 = "dtype=bf16,head_dim=128,causal=1,kv_dtype=e4m3";
const char* kPlain = "dtype=bf16,head_dim=128,causal=1";

// Core arguments valid for kFp8: 16-bit Q/O strides in elements, e4m3 K/V strides in bytes
// (one byte an element: the same numbers), per-KV-head scales.
AttentionArgs core_fp8_args() {
  AttentionArgs a = attention_extents(2, 256, 256, 8, 2);
  a.q = a.o = 0x10000;
  a.k = 0x20000, a.v = 0x30000;
  a.q_strides = a.o_strides = contiguous_bshd(256, 8, 128);
  a.k_strides = a.v_strides = contiguous_bshd(256, 2, 128);
  a.fp8.k_scale = 0x40000, a.fp8.v_scale = 0x40010;
  a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = 1;
  return a;
}

std::string core_error(const char* spec, const AttentionArgs& a) {
  const Status st = validate_attention_args(config_of(spec), a);
  return st ? std::string() : st.error().message;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

TEST(KvFp8Args, ValidFp8ArgumentsPassTheCore) {
  AttentionArgs a = core_fp8_args();
  EXPECT_EQ(core_error(kFp8, a), "");
  a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = 0;  // one scale per tensor
  EXPECT_EQ(core_error(kFp8, a), "");
  a.fp8.k_scale_batch_stride = a.fp8.v_scale_batch_stride = 2;  // FA3's [batch, heads_kv]
  a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = 1;
  EXPECT_EQ(core_error(kFp8, a), "");
  a.k_strides.row = a.v_strides.row = 16;  // 16 bytes: the smallest row step the loads take
  EXPECT_EQ(core_error(kFp8, a), "");
}

TEST(KvFp8Args, TheCoreNamesEachRefusedField) {
  struct Case {
    const char* spec;
    const char* prefix;  // the message starts with the field
    const char* says;
    void (*set)(AttentionArgs&);
  } cases[] = {
      {kFp8, "k_scale:", "null device pointer", [](AttentionArgs& a) { a.fp8.k_scale = 0; }},
      {kFp8, "v_scale:", "null device pointer", [](AttentionArgs& a) { a.fp8.v_scale = 0; }},
      {kFp8, "k_scale:", "4-byte aligned", [](AttentionArgs& a) { a.fp8.k_scale = 0x40002; }},
      {kFp8, "k_strides.row:", "16 bytes of e4m3", [](AttentionArgs& a) { a.k_strides.row = 136; }},
      {kFp8, "v_strides.row:", "16 bytes of e4m3", [](AttentionArgs& a) { a.v_strides.row = 8; }},
      {kFp8, "k_strides.head:", "16 bytes of e4m3", [](AttentionArgs& a) { a.k_strides.head = 120; }},
      {kFp8, "k_scale_batch_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.k_scale_batch_stride = -2; }},
      {kFp8, "k_scale_head_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.k_scale_head_stride = -1; }},
      {kFp8, "v_scale_batch_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.v_scale_batch_stride = -1; }},
      {kFp8, "v_scale_head_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.v_scale_head_stride = -4; }},
      {kPlain, "k_scale:", "needs spec key kv_dtype=e4m3", [](AttentionArgs& a) { a.fp8.v_scale = 0; }},
      {kPlain, "v_scale:", "needs spec key kv_dtype=e4m3", [](AttentionArgs& a) { a.fp8.k_scale = 0; }},
      {kPlain, "k_scale_head_stride:", "needs spec key kv_dtype=e4m3",
       [](AttentionArgs& a) { a.fp8 = {}, a.fp8.k_scale_head_stride = 1; }},
      {kPlain, "v_scale_batch_stride:", "needs spec key kv_dtype=e4m3", [](AttentionArgs& a) { a.fp8 = {}, a.fp8.v_scale_batch_stride = 2; }},
  };
  for (const Case& c : cases) {
    AttentionArgs a = core_fp8_args();
    if (std::string(c.spec) == kPlain) a.k_strides = a.v_strides = contiguous_bshd(256, 2, 128);  // valid 16-bit strides too
    c.set(a);
    const std::string error = core_error(c.spec, a);
    EXPECT_TRUE(starts_with(error, c.prefix)) << c.spec << ": want " << c.prefix << " got '" << error << "'";
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
  // The 16-bit kernel's K strides stay element counts of 16 bytes: 8 elements pass there.
  AttentionArgs plain = core_fp8_args();
  plain.fp8 = {};
  plain.k_strides.row = 8;
  EXPECT_EQ(core_error(kPlain, plain).rfind("k_strides", 0), std::string::npos) << core_error(kPlain, plain);
}

// The C API: the same fields named as flashjit.h spells them, under args.
flashjit_attention_args_t c_fp8_args(const char* spec) {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x10000, a.k = 0x20000, a.v = 0x30000, a.o = 0x40000, a.lse = 0x50000;
  a.batch = 2, a.seqlen_q = 100, a.seqlen_k = 120, a.heads_q = 8, a.heads_kv = 2;
  a.q_strides = a.o_strides = flashjit_contiguous_bshd(100, 8, 128);
  a.k_strides = a.v_strides = flashjit_contiguous_bshd(120, 2, 128);  // bytes with kv_dtype=e4m3
  if (std::string(spec).find("kv_dtype=e4m3") != std::string::npos) {
    a.k_scale = 0x60000, a.v_scale = 0x60040;
    a.k_scale_head_stride = a.v_scale_head_stride = 1;
  }
  return a;
}

TEST(KvFp8Args, ValidFp8ArgumentsPassTheCApi) {
  flashjit_attention_args_t a = c_fp8_args(kFp8);
  EXPECT_EQ(flashjit_validate_attention_args(kFp8, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  a.k_scale_head_stride = a.v_scale_head_stride = 0;
  EXPECT_EQ(flashjit_validate_attention_args(kFp8, &a), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  const char* paged = "dtype=fp16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3";
  char reason[256] = "";
  ASSERT_EQ(flashjit_supported(paged, reason, sizeof(reason)), FLASHJIT_SUCCESS) << reason;
  // The plain arguments, without scales, are refused for the FP8 spec: the scales are what it adds.
  flashjit_attention_args_t plain = c_fp8_args(kPlain);
  EXPECT_EQ(flashjit_validate_attention_args(kPlain, &plain), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  EXPECT_EQ(flashjit_validate_attention_args(kFp8, &plain), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(flashjit_last_error_field()), "args.k_scale") << flashjit_last_error_message();
}

TEST(KvFp8Args, TheCApiNamesEachRefusedField) {
  expect_each_refused(c_fp8_args, {
      {kFp8, "args.k_scale", "null device pointer", [](flashjit_attention_args_t& a) { a.k_scale = 0; }},
      {kFp8, "args.v_scale", "null device pointer", [](flashjit_attention_args_t& a) { a.v_scale = 0; }},
      {kFp8, "args.v_scale", "4-byte aligned", [](flashjit_attention_args_t& a) { a.v_scale = 0x60041; }},
      {kFp8, "args.k_strides.row", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.k_strides.row = 264; }},
      {kFp8, "args.k_strides.row", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.k_strides.row = 8; }},
      {kFp8, "args.v_strides.batch", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.v_strides.batch += 4; }},
      {kFp8, "args.k_scale_batch_stride", "not allowed", [](flashjit_attention_args_t& a) { a.k_scale_batch_stride = -1; }},
      {kFp8, "args.k_scale_head_stride", "not allowed", [](flashjit_attention_args_t& a) { a.k_scale_head_stride = -1; }},
      {kFp8, "args.v_scale_batch_stride", "not allowed", [](flashjit_attention_args_t& a) { a.v_scale_batch_stride = -8; }},
      {kFp8, "args.v_scale_head_stride", "not allowed", [](flashjit_attention_args_t& a) { a.v_scale_head_stride = -1; }},
      {kPlain, "args.k_scale", "needs spec key kv_dtype=e4m3", [](flashjit_attention_args_t& a) { a.k_scale = 0x60000; }},
      {kPlain, "args.v_scale", "needs spec key kv_dtype=e4m3", [](flashjit_attention_args_t& a) { a.v_scale = 0x60000; }},
      {kPlain, "args.k_scale_head_stride", "needs spec key kv_dtype=e4m3", [](flashjit_attention_args_t& a) { a.k_scale_head_stride = 1; }},
      {kPlain, "args.v_scale_batch_stride", "needs spec key kv_dtype=e4m3", [](flashjit_attention_args_t& a) { a.v_scale_batch_stride = 2; }},
  });
  // The message starts with the field, as every C API refusal's does.
  flashjit_attention_args_t a = c_fp8_args(kFp8);
  a.k_scale = 0;
  ASSERT_EQ(flashjit_validate_attention_args(kFp8, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(starts_with(flashjit_last_error_message(), "args.k_scale:")) << flashjit_last_error_message();
}

}  // namespace
}  // namespace flashjit
