// FP8 operands (spec dtype=e4m3, issue 39) on the CPU: the launch arguments through the core
// (validate_attention_args) and the C API (flashjit_validate_attention_args) - k_scale and v_scale
// required, q_scale optional (0 = 1) and refused on 16-bit specs naming the field and the key, Q's,
// K's and V's strides in bytes and multiples of 16 while O's stay 16-bit elements, scale strides not
// negative - and the verify stage's FP8 inputs (Fp8Cache with operands): the descales' layout per
// tensor and per (sequence, K/V head), the bf16 copies, the O bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"
#include "spec/attention_spec.hpp"
#include "support/args_refusals.hpp"
#include "verify/check.hpp"
#include "verify/fp8_cache.hpp"
#include "support/config_of.hpp"

namespace flashjit {
namespace {

// The FP8 operands' LSE bound (verify/check.hpp: fp8_lse_error): the relative error of the 16-bit
// kernels where a row's scores are small, widened by 2^-10 of the row's summed |q_c k_c| (the FP8
// GEMM's accumulation), 2^-8 more where the reference's dequantised copies are rounded; the H100's
// measured errors pass it, a wrong descale or key does not.
TEST(Fp8OperandsCheck, LseBoundScalesWithTheRowsScoreMagnitude) {
  EXPECT_NEAR(fp8_lse_error(10.001, 10.0, 0.0, true), 1e-4, 1e-12);  // no magnitude: the plain relative error
  EXPECT_LE(fp8_lse_error(0.5005, 0.5, 7.0, true), kLseErrorBound);   // one key, as measured: 5e-4 at magnitude ~7
  EXPECT_LE(fp8_lse_error(52.0 + 0.09, 52.0, 350.0, true), kLseErrorBound);  // outlier keys (x 50): 2.6e-4 of 350
  EXPECT_GT(fp8_lse_error(52.0 + 0.6, 52.0, 350.0, true), kLseErrorBound);   // 1.9e-3 of it: only with rounded copies
  EXPECT_LE(fp8_lse_error(52.0 + 0.6, 52.0, 350.0, false), kLseErrorBound);
  EXPECT_GT(fp8_lse_error(10.0 * 1.1, 10.0, 7.0, false), kLseErrorBound);  // a descale 10 % off
  EXPECT_GT(fp8_lse_error(3.0, 4.0, 20.0, false), kLseErrorBound);         // another key's score
  // Both checks' entry rule: NaN unwritten, -inf matched exactly, the FP8 rows' ratio noted.
  CheckResult r;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(lse_entry_error(std::nan(""), 1.0, -1.0, true, r), inf);
  EXPECT_EQ(r.unwritten, 1u);
  EXPECT_EQ(lse_entry_error(-inf, -inf, 5.0, true, r), 0.0);
  EXPECT_EQ(lse_entry_error(0.0, -inf, 5.0, true, r), inf);
  EXPECT_NEAR(lse_entry_error(10.001, 10.0, -1.0, true, r), 1e-4, 1e-12);  // a 16-bit row: relative
  EXPECT_EQ(r.lse_per_magnitude, 0.0);
  EXPECT_LE(lse_entry_error(0.5005, 0.5, 7.0, true, r), kLseErrorBound);
  EXPECT_NEAR(r.lse_per_magnitude, 5e-4 / 7.0, 1e-12);
}

const char* kFp8 = "dtype=e4m3,head_dim=128,causal=1";
const char* kFp8Fp16 = "dtype=e4m3,head_dim=128,causal=1,out_dtype=fp16";
const char* kCache = "dtype=bf16,head_dim=128,causal=1,kv_dtype=e4m3";
const char* kPlain = "dtype=bf16,head_dim=128,causal=1";

// Core arguments valid for kFp8: e4m3 Q/K/V strides in bytes (one byte an element: the same
// numbers as the element counts), O's in 16-bit elements, FlashAttention-3's [batch, heads_kv]
// descales for Q, K and V.
AttentionArgs core_args() {
  AttentionArgs a = attention_extents(2, 256, 256, 8, 2);
  a.q = 0x10000, a.o = 0x80000;
  a.k = 0x20000, a.v = 0x30000;
  a.q_strides = a.o_strides = contiguous_bshd(256, 8, 128);
  a.k_strides = a.v_strides = contiguous_bshd(256, 2, 128);
  a.fp8.k_scale = 0x40000, a.fp8.v_scale = 0x40010, a.fp8.q_scale = 0x40020;
  a.fp8.k_scale_batch_stride = a.fp8.v_scale_batch_stride = a.fp8.q_scale_batch_stride = 2;
  a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = a.fp8.q_scale_head_stride = 1;
  return a;
}

std::string core_error(const char* spec, const AttentionArgs& a) {
  const Status st = validate_attention_args(config_of(spec), a);
  return st ? std::string() : st.error().message;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

TEST(Fp8OperandsArgs, ValidArgumentsPassTheCore) {
  for (const char* spec : {kFp8, kFp8Fp16}) {
    AttentionArgs a = core_args();
    EXPECT_EQ(core_error(spec, a), "") << spec;
    a.fp8.q_scale = 0, a.fp8.q_scale_batch_stride = a.fp8.q_scale_head_stride = 0;  // no Q descale: 1
    EXPECT_EQ(core_error(spec, a), "") << spec;
    a.fp8.k_scale_batch_stride = a.fp8.v_scale_batch_stride = 0;  // one per tensor
    a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = 0;
    EXPECT_EQ(core_error(spec, a), "") << spec;
    a = core_args();
    a.q_strides.row = a.k_strides.row = a.v_strides.row = 16;  // 16 bytes: the smallest row step e4m3 loads take
    EXPECT_EQ(core_error(spec, a), "") << spec;
    a = core_args();
    a.o_strides.row = 8;  // O is 16-bit: 8 elements are its 16 bytes
    EXPECT_EQ(core_error(spec, a), "") << spec;
  }
  // Varlen and paged FP8 operands take the same fields.
  AttentionArgs paged = core_args();
  paged.engine.cu_seqlens_q = 0x90000, paged.engine.total_q = 300;
  paged.engine.seqused_k = 0x91000, paged.engine.block_table = 0x92000, paged.engine.block_table_stride = 16;
  paged.engine.page_size = 16, paged.engine.num_pages = 40;
  paged.q_strides = paged.o_strides = {0, 8 * 128, 128};
  paged.k_strides = paged.v_strides = {16 * 2 * 128, 2 * 128, 128};
  EXPECT_EQ(core_error("dtype=e4m3,head_dim=128,causal=1,varlen=1,paged=1", paged), "");
}

TEST(Fp8OperandsArgs, TheCoreNamesEachRefusedField) {
  struct Case {
    const char* spec;
    const char* prefix;  // the message starts with the field
    const char* says;
    void (*set)(AttentionArgs&);
  } cases[] = {
      {kFp8, "k_scale:", "null device pointer; dtype=e4m3 needs", [](AttentionArgs& a) { a.fp8.k_scale = 0; }},
      {kFp8, "v_scale:", "null device pointer; dtype=e4m3 needs", [](AttentionArgs& a) { a.fp8.v_scale = 0; }},
      {kFp8, "q_scale:", "4-byte aligned", [](AttentionArgs& a) { a.fp8.q_scale = 0x40022; }},
      {kFp8, "k_scale:", "4-byte aligned", [](AttentionArgs& a) { a.fp8.k_scale = 0x40001; }},
      {kFp8, "q_scale_batch_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.q_scale_batch_stride = -2; }},
      {kFp8, "q_scale_head_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.q_scale_head_stride = -1; }},
      {kFp8, "k_scale_batch_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.k_scale_batch_stride = -1; }},
      {kFp8, "v_scale_head_stride:", "not allowed", [](AttentionArgs& a) { a.fp8.v_scale_head_stride = -3; }},
      {kFp8, "q_strides.row:", "16 bytes of e4m3", [](AttentionArgs& a) { a.q_strides.row = 8 * 128 + 8; }},
      {kFp8, "q_strides.row:", "16 bytes of e4m3", [](AttentionArgs& a) { a.q_strides.row = 8; }},
      {kFp8, "q_strides.head:", "16 bytes of e4m3", [](AttentionArgs& a) { a.q_strides.head = 136; }},
      {kFp8, "q_strides.batch:", "16 bytes of e4m3", [](AttentionArgs& a) { a.q_strides.batch += 4; }},
      {kFp8, "k_strides.row:", "16 bytes of e4m3", [](AttentionArgs& a) { a.k_strides.row = 264; }},
      {kFp8, "v_strides.head:", "16 bytes of e4m3", [](AttentionArgs& a) { a.v_strides.head = 120; }},
      {kFp8, "o_strides.row:", "16 bytes", [](AttentionArgs& a) { a.o_strides.row = 4; }},  // 8 bytes of 16-bit O
      // Q's descale on 16-bit queries: refused naming the field and the key it needs.
      {kCache, "q_scale:", "needs spec key dtype=e4m3", [](AttentionArgs& a) {}},
      {kCache, "q_scale_batch_stride:", "needs spec key dtype=e4m3", [](AttentionArgs& a) { a.fp8.q_scale = 0, a.fp8.q_scale_head_stride = 0; }},
      {kCache, "q_scale_head_stride:", "needs spec key dtype=e4m3", [](AttentionArgs& a) { a.fp8.q_scale = 0, a.fp8.q_scale_batch_stride = 0; }},
      {kPlain, "q_scale:", "dtype=e4m3", [](AttentionArgs& a) { a.fp8 = {}, a.fp8.q_scale = 0x40020; }},
      {kPlain, "q_scale_head_stride:", "dtype=e4m3", [](AttentionArgs& a) { a.fp8 = {}, a.fp8.q_scale_head_stride = 1; }},
      {kPlain, "k_scale:", "dtype=e4m3", [](AttentionArgs& a) { a.fp8.q_scale = 0; }},
  };
  for (const Case& c : cases) {
    AttentionArgs a = core_args();
    if (std::string(c.spec) != kFp8) a.q_strides = a.o_strides = contiguous_bshd(256, 8, 128);  // valid 16-bit strides
    c.set(a);
    const std::string error = core_error(c.spec, a);
    EXPECT_TRUE(starts_with(error, c.prefix)) << c.spec << ": want " << c.prefix << " got '" << error << "'";
    EXPECT_NE(error.find(c.says), std::string::npos) << c.spec << ": " << error;
  }
  // 16-bit queries' strides stay element counts of 16 bytes: 8 elements pass there, not with e4m3.
  AttentionArgs plain = core_args();
  plain.fp8 = {};
  plain.q_strides.row = 8;
  EXPECT_EQ(core_error(kPlain, plain).rfind("q_strides", 0), std::string::npos) << core_error(kPlain, plain);
}

// The C API: the same fields named as flashjit.h spells them, under args.
flashjit_attention_args_t c_args(const char* spec) {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  a.q = 0x10000, a.k = 0x20000, a.v = 0x30000, a.o = 0x40000, a.lse = 0x50000;
  a.batch = 2, a.seqlen_q = 100, a.seqlen_k = 120, a.heads_q = 8, a.heads_kv = 2;
  a.q_strides = a.o_strides = flashjit_contiguous_bshd(100, 8, 128);  // Q's in bytes with dtype=e4m3
  a.k_strides = a.v_strides = flashjit_contiguous_bshd(120, 2, 128);
  const std::string text = spec;
  if (text.find("e4m3") != std::string::npos) {
    a.k_scale = 0x60000, a.v_scale = 0x60040;
    a.k_scale_batch_stride = a.v_scale_batch_stride = 2;
    a.k_scale_head_stride = a.v_scale_head_stride = 1;
  }
  if (text.rfind("dtype=e4m3", 0) == 0) {
    a.q_scale = 0x60080;
    a.q_scale_batch_stride = 2, a.q_scale_head_stride = 1;
  }
  return a;
}

TEST(Fp8OperandsArgs, ValidArgumentsPassTheCApi) {
  for (const char* spec : {kFp8, kFp8Fp16}) {
    flashjit_attention_args_t a = c_args(spec);
    EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_SUCCESS) << spec << ": " << flashjit_last_error_message();
    a.q_scale = 0, a.q_scale_batch_stride = a.q_scale_head_stride = 0;  // optional: 1
    EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_SUCCESS) << spec << ": " << flashjit_last_error_message();
    a.k_scale_batch_stride = a.v_scale_batch_stride = a.k_scale_head_stride = a.v_scale_head_stride = 0;  // per tensor
    EXPECT_EQ(flashjit_validate_attention_args(spec, &a), FLASHJIT_SUCCESS) << spec << ": " << flashjit_last_error_message();
  }
  for (const char* spec : {"dtype=e4m3,head_dim=128,causal=1,varlen=1,paged=1", "dtype=e4m3,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                           "dtype=e4m3,head_dim=256,causal=1,out_dtype=fp16"}) {
    char reason[256] = "";
    EXPECT_EQ(flashjit_supported(spec, reason, sizeof(reason)), FLASHJIT_SUCCESS) << spec << ": " << reason;
  }
  // The 16-bit arguments (no scales) are refused for the FP8 spec: K's and V's descales are required.
  flashjit_attention_args_t plain = c_args(kPlain);
  EXPECT_EQ(flashjit_validate_attention_args(kPlain, &plain), FLASHJIT_SUCCESS) << flashjit_last_error_message();
  EXPECT_EQ(flashjit_validate_attention_args(kFp8, &plain), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(flashjit_last_error_field()), "args.k_scale") << flashjit_last_error_message();
}

TEST(Fp8OperandsArgs, TheCApiNamesEachRefusedField) {
  expect_each_refused(c_args, {
      {kFp8, "args.k_scale", "null device pointer", [](flashjit_attention_args_t& a) { a.k_scale = 0; }},
      {kFp8, "args.v_scale", "null device pointer", [](flashjit_attention_args_t& a) { a.v_scale = 0; }},
      {kFp8, "args.q_scale", "4-byte aligned", [](flashjit_attention_args_t& a) { a.q_scale = 0x60082; }},
      {kFp8, "args.q_scale_batch_stride", "not allowed", [](flashjit_attention_args_t& a) { a.q_scale_batch_stride = -1; }},
      {kFp8, "args.q_scale_head_stride", "not allowed", [](flashjit_attention_args_t& a) { a.q_scale_head_stride = -1; }},
      {kFp8, "args.q_strides.row", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.q_strides.row = 8; }},
      {kFp8, "args.q_strides.head", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.q_strides.head = 136; }},
      {kFp8, "args.k_strides.row", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.k_strides.row = 264; }},
      {kFp8, "args.v_strides.batch", "16 bytes of e4m3", [](flashjit_attention_args_t& a) { a.v_strides.batch += 4; }},
      {kCache, "args.q_scale", "needs spec key dtype=e4m3", [](flashjit_attention_args_t& a) { a.q_scale = 0x60080; }},
      {kCache, "args.q_scale_head_stride", "needs spec key dtype=e4m3", [](flashjit_attention_args_t& a) { a.q_scale_head_stride = 1; }},
      {kPlain, "args.q_scale", "dtype=e4m3", [](flashjit_attention_args_t& a) { a.q_scale = 0x60080; }},
      {kPlain, "args.q_scale_batch_stride", "dtype=e4m3", [](flashjit_attention_args_t& a) { a.q_scale_batch_stride = 2; }},
  });
  flashjit_attention_args_t a = c_args(kFp8);
  a.v_scale = 0;
  ASSERT_EQ(flashjit_validate_attention_args(kFp8, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(starts_with(flashjit_last_error_message(), "args.v_scale:")) << flashjit_last_error_message();
}

// The verify stage's FP8 operands: the descales' layout as the launch reads them.
TEST(Fp8Operands, DescalesPerTensorAndPerSequenceAndHead) {
  Fp8Cache f;
  f.on = f.operands = true;
  EXPECT_EQ(f.scales(Fp8Tensor::kQ, 3, 2), (std::vector<float>{0.25f, 0.25f}));
  EXPECT_EQ(f.scale_head_stride(), 0);
  EXPECT_EQ(f.scale_batch_stride(2), 0);
  EXPECT_TRUE(f.exact());
  f.per_head = true;  // per K/V head only
  EXPECT_EQ(f.scales(Fp8Tensor::kK, 3, 2), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(f.scale_batch_stride(2), 0);
  f.per_sequence = true;  // FlashAttention-3's [batch, heads_kv]
  EXPECT_EQ(f.scale_head_stride(), 1);
  EXPECT_EQ(f.scale_batch_stride(2), 2);
  EXPECT_EQ(f.scales(Fp8Tensor::kV, 3, 2), (std::vector<float>{0.25f, 0.125f, 0.125f, 0.5f, 0.5f, 0.0625f}));
  for (int b = 0; b < 3; ++b)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(f.scales(Fp8Tensor::kQ, 3, 2)[size_t(b * 2 + h)], f.scale_of(Fp8Tensor::kQ, b, h));
  EXPECT_TRUE(f.exact());
  f.q_scale = 0.3f;  // Q's descale counts with operands
  EXPECT_FALSE(f.exact());
  f.operands = false;
  EXPECT_TRUE(f.exact());
}

TEST(Fp8Operands, TheCopiesAreBf16AndTheBoundIsTwoToTheMinusFour) {
  Fp8Cache f;
  EXPECT_FALSE(f.copies_bf16(false));
  f.on = f.operands = true;
  EXPECT_TRUE(f.copies_bf16(false));
  EXPECT_EQ(kFp8OperandsOErrorBound, std::ldexp(1.0, -4));
  for (bool bf16 : {false, true}) {
    EXPECT_EQ(o_error_bound(bf16, f), kFp8OperandsOErrorBound);
    f.q_scale = 0.3f;  // not a power of two: still the same bound (a copy's rounding, 2^-9, is far below it)
    EXPECT_EQ(o_error_bound(bf16, f), kFp8OperandsOErrorBound);
    f.q_scale = 0.25f;
  }
  Fp8Cache cache;
  cache.on = true;
  EXPECT_EQ(o_error_bound(true, cache), o_error_bound(true));
  // e4m3 x a power-of-two descale is exact in bf16: every finite code under the defaults.
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    for (float scale : {f.q_scale, f.k_scale, f.v_scale}) {
      const uint16_t bits = dequantised_bits((unsigned char)code, scale, true);
      const float back = half_bits_to_float(bits, true);
      EXPECT_EQ(quantised_code(back, scale), (unsigned char)code) << code << " " << scale;
    }
  }
  // describe() names Q's descale and O's type.
  f.out_bf16 = false;
  EXPECT_EQ(f.describe(), " e4m3 q_scale=0.25 k_scale=0.5 v_scale=0.25 out=fp16");
}

}  // namespace
}  // namespace flashjit
