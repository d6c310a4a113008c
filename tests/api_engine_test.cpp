// The engine inputs through the C API, no GPU: which fields a varlen / paged spec needs and which a
// dense one refuses (each error names the field), and flashjit_check_engine_metadata_host naming
// the first bad entry of the device metadata (checked here on host copies).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "flashjit/flashjit.h"
#include "support/args_refusals.hpp"

namespace {

const char* kDense = "dtype=bf16,head_dim=128,causal=1";
const char* kVarlen = "dtype=bf16,head_dim=128,causal=1,varlen=1";
const char* kPaged = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1";

std::string message() { return flashjit_last_error_message(); }
std::string field() { return flashjit_last_error_field(); }

// A vLLM-shaped step: 4 sequences, packed queries, a paged cache of 16-key pages (host arrays;
// the pointer checks only look at alignment, the metadata check reads them on the host).
struct Step {
  std::vector<int32_t> cu_seqlens_q{0, 1, 5, 5, 205};  // decode, speculative, empty, prefill
  std::vector<int32_t> seqused_k{300, 64, 0, 200};
  std::vector<int32_t> block_table;
  static constexpr int kPagesPerSequence = 32, kPageSize = 16, kPages = 100;
  Step() {
    block_table.assign(4 * kPagesPerSequence, -1);  // entries past a sequence's pages are never read
    for (int b = 0, next = 0; b < 4; ++b)
      for (int i = 0; i < (seqused_k[b] + kPageSize - 1) / kPageSize; ++i) block_table[b * kPagesPerSequence + i] = (next++ * 7) % kPages;
  }
  flashjit_attention_args_t args(bool paged) const {
    flashjit_attention_args_t a;
    flashjit_attention_args_init(&a);
    a.q = 0x10000, a.k = 0x20000, a.v = 0x30000, a.o = 0x40000, a.lse = 0x50000;
    a.batch = 4, a.seqlen_q = 200, a.seqlen_k = 512, a.heads_q = 32, a.heads_kv = 8;
    a.q_strides = a.o_strides = flashjit_tensor_strides_t{0, 32 * 128, 128};
    a.cu_seqlens_q = reinterpret_cast<uint64_t>(cu_seqlens_q.data());
    a.total_q = 210;
    a.seqused_k = reinterpret_cast<uint64_t>(seqused_k.data());
    if (paged) {
      a.k_strides = a.v_strides = flashjit_tensor_strides_t{kPageSize * 8 * 128, 8 * 128, 128};  // NHD pages
      a.block_table = reinterpret_cast<uint64_t>(block_table.data());
      a.block_table_batch_stride = kPagesPerSequence;
      a.page_size = kPageSize;
      a.num_pages = kPages;
    } else {
      a.k_strides = a.v_strides = flashjit_tensor_strides_t{512 * 8 * 128, 8 * 128, 128};  // [batch, 512, h, d]
    }
    return a;
  }
  // The same step as a dense launch (no engine inputs).
  flashjit_attention_args_t dense_args() const {
    flashjit_attention_args_t a = args(false);
    a.cu_seqlens_q = a.seqused_k = 0;
    a.total_q = 0;
    a.q_strides = a.o_strides = flashjit_contiguous_bshd(200, 32, 128);
    return a;
  }
};

TEST(ApiEngine, AStepValidatesForItsSpec) {
  const Step step;
  flashjit_attention_args_t paged = step.args(true), dense_kv = step.args(false), dense = step.dense_args();
  EXPECT_EQ(flashjit_validate_attention_args(kDense, &dense), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_validate_attention_args(kPaged, &paged), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_validate_attention_args(kVarlen, &dense_kv), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_check_engine_metadata_host(kPaged, &paged), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_check_engine_metadata_host(kVarlen, &dense_kv), FLASHJIT_SUCCESS) << message();
  // Page sizes engines use, and odd ones, with the table's width to match.
  for (int64_t page_size : {1, 3, 16, 64, 256}) {
    flashjit_attention_args_t a = step.args(true);
    a.page_size = page_size;
    a.block_table_batch_stride = (512 + page_size - 1) / page_size;
    EXPECT_EQ(flashjit_validate_attention_args(kPaged, &a), FLASHJIT_SUCCESS) << page_size << ": " << message();
  }
}

// Each engine input a spec does not take is refused by name, and each one it needs is required.
TEST(ApiEngine, FieldsTheSpecDoesNotTakeOrNeedsAreNamed) {
  const Step step;
  const auto valid_for = [&](const char* spec) { return std::string(spec) == kDense ? step.dense_args() : step.args(std::string(spec) == kPaged); };
  flashjit::expect_each_refused(valid_for, {
      {kDense, "args.cu_seqlens_q", "varlen=1", [](auto& a) { a.cu_seqlens_q = 0x1000; }},
      {kDense, "args.cu_seqlens_k", "varlen=1", [](auto& a) { a.cu_seqlens_k = 0x1000; }},
      {kDense, "args.seqused_k", "varlen=1 or paged=1", [](auto& a) { a.seqused_k = 0x1000; }},
      {kDense, "args.block_table", "paged=1", [](auto& a) { a.block_table = 0x1000; }},
      {kDense, "args.page_size", "paged=1", [](auto& a) { a.page_size = 16; }},
      {kDense, "args.num_pages", "paged=1", [](auto& a) { a.num_pages = 16; }},
      {kDense, "args.total_q", "varlen=1", [](auto& a) { a.total_q = 16; }},
      {kVarlen, "args.cu_seqlens_q", "null", [](auto& a) { a.cu_seqlens_q = 0; }},
      {kVarlen, "args.cu_seqlens_q", "4-byte", [](auto& a) { a.cu_seqlens_q += 2; }},
      {kVarlen, "args.total_q", "allowed: 1..", [](auto& a) { a.total_q = 0; }},
      {kVarlen, "args.total_k", "cu_seqlens_k", [](auto& a) { a.total_k = 100; }},
      {kVarlen, "args.block_table", "paged=1", [](auto& a) { a.block_table = 0x1000; }},
      {kPaged, "args.seqused_k", "null", [](auto& a) { a.seqused_k = 0; }},
      {kPaged, "args.block_table", "null", [](auto& a) { a.block_table = 0; }},
      {kPaged, "args.page_size", "allowed: 1..", [](auto& a) { a.page_size = 0; }},
      {kPaged, "args.num_pages", "allowed: 1..", [](auto& a) { a.num_pages = 0; }},
      {kPaged, "args.cu_seqlens_k", "packed K/V", [](auto& a) { a.cu_seqlens_k = 0x1000; }},
      {kPaged, "args.block_table_batch_stride", "ceil(seqlen_k / page_size)", [](auto& a) { a.block_table_batch_stride = 31; }},
      {kPaged, "args.k_strides.batch", "multiple of 8", [](auto& a) { a.k_strides.batch = 12; }},
      // Packed Q/O: a bad row stride is named as itself (it was named as the unused batch stride).
      {kVarlen, "args.q_strides.row", "multiple of 8", [](auto& a) { a.q_strides.row = 12; }},
      {kPaged, "args.o_strides.row", "positive", [](auto& a) { a.o_strides.row = -8; }},
  });
  // The batch stride of packed Q/O is not used, so any value passes.
  flashjit_attention_args_t a = step.args(true);
  a.q_strides.batch = -5;
  EXPECT_EQ(flashjit_validate_attention_args(kPaged, &a), FLASHJIT_SUCCESS) << message();
}

// Bad metadata entries, each named by index with what is allowed.
TEST(ApiEngine, MetadataCheckNamesTheFirstBadEntry) {
  struct Case {
    const char* field;
    const char* says;
    std::function<void(Step&)> spoil;
  } cases[] = {
      {"args.cu_seqlens_q[0]", "0 or more", [](Step& s) { s.cu_seqlens_q[0] = -1; }},
      {"args.cu_seqlens_q[3]", "never decrease", [](Step& s) { s.cu_seqlens_q[3] = 4; }},
      {"args.cu_seqlens_q[4]", "seqlen_q = 200", [](Step& s) { s.cu_seqlens_q[4] = 206; }},
      {"args.seqused_k[1]", "0..512", [](Step& s) { s.seqused_k[1] = 513; }},
      {"args.seqused_k[2]", "0..512", [](Step& s) { s.seqused_k[2] = -3; }},
      {"args.block_table[33]", "0..99", [](Step& s) { s.block_table[33] = 100; }},
      {"args.block_table[96]", "0..99", [](Step& s) { s.block_table[96] = -1; }},
  };
  for (const Case& c : cases) {
    Step step;
    c.spoil(step);
    flashjit_attention_args_t a = step.args(true);
    EXPECT_EQ(flashjit_check_engine_metadata_host(kPaged, &a), FLASHJIT_ERROR_INVALID_ARGUMENT) << c.field;
    EXPECT_EQ(field(), c.field) << message();
    EXPECT_NE(message().find(c.says), std::string::npos) << message();
  }
  // Rows past total_q, and entries past a sequence's pages (never read) are fine until used.
  Step step;
  step.cu_seqlens_q = {0, 1, 5, 5, 205};
  flashjit_attention_args_t a = step.args(true);
  a.total_q = 204;
  EXPECT_EQ(flashjit_check_engine_metadata_host(kPaged, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.cu_seqlens_q[4]") << message();
  EXPECT_NE(message().find("packed tensor's rows"), std::string::npos) << message();
}

// scheduler=dynamic: the check reads the tile counter at the workspace's start too, and names the
// workspace when a launch left it set.
TEST(ApiEngine, MetadataCheckSeesATileCounterLeftSet) {
  const char* dynamic = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic";
  Step step;
  alignas(256) static uint32_t counter[64] = {};
  flashjit_attention_args_t a = step.args(true);
  a.workspace = reinterpret_cast<uint64_t>(counter), a.workspace_bytes = sizeof(counter);
  EXPECT_EQ(flashjit_check_engine_metadata_host(dynamic, &a), FLASHJIT_SUCCESS) << message();
  counter[0] = 57, counter[1] = 3;  // a launch cut short: 57 tiles taken, 3 CTAs done
  EXPECT_EQ(flashjit_check_engine_metadata_host(dynamic, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.workspace") << message();
  EXPECT_NE(message().find("tile counter at its start is 57, 3; allowed: 0, 0"), std::string::npos) << message();
  // The static spec does not read it.
  a.workspace = a.workspace_bytes = 0;
  EXPECT_EQ(flashjit_check_engine_metadata_host(kPaged, &a), FLASHJIT_SUCCESS) << message();
  counter[0] = counter[1] = 0;
}

// combine=inline: the check reads the merge counters after the tile counter (or at the
// workspace's start) and names the first one a launch left set.
TEST(ApiEngine, MetadataCheckSeesAMergeCounterLeftSet) {
  const char* inline_combine = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline";
  Step step;
  flashjit_attention_args_t a = step.args(true);
  a.max_splits = 4;
  uint64_t bytes = 0;
  ASSERT_EQ(flashjit_attention_workspace_size(inline_combine, &a, &bytes), FLASHJIT_SUCCESS) << message();
  std::vector<uint32_t> workspace(bytes / 4 + 64, 0);
  uint32_t* const start = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(workspace.data()) + 255) / 256 * 256);
  a.workspace = reinterpret_cast<uint64_t>(start), a.workspace_bytes = bytes;
  EXPECT_EQ(flashjit_check_engine_metadata_host(inline_combine, &a), FLASHJIT_SUCCESS) << message();
  // 4 sequences x 8 head groups x 13 query blocks (200 queries, 16 a block: 4 packed heads in 64 rows) x 1 warpgroup
  start[4 * 8 * 13 - 1] = 2;
  EXPECT_EQ(flashjit_check_engine_metadata_host(inline_combine, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.workspace") << message();
  EXPECT_NE(message().find("merge counter 415 (at byte 1660) is 2; allowed: 0"), std::string::npos) << message();
  start[4 * 8 * 13 - 1] = 0;
  start[4 * 8 * 13] = 5;  // past the counters: the partials, not checked
  EXPECT_EQ(flashjit_check_engine_metadata_host(inline_combine, &a), FLASHJIT_SUCCESS) << message();
}

// flashjit_attention_workspace_counter_bytes: the counters' part at the workspace's start alone (what
// a fresh workspace in each graph capture needs zeroed), the partials after it; 0 without counters.
TEST(ApiEngine, WorkspaceCounterBytesAreTheCountersAlone) {
  const char* inline_combine = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline";
  const char* kernel_combine = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1";
  const char* dynamic = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic";
  Step step;
  flashjit_attention_args_t a = step.args(true);
  a.max_splits = 4;
  uint64_t whole = 0, counters = 7, partials = 0;
  ASSERT_EQ(flashjit_attention_workspace_size(inline_combine, &a, &whole), FLASHJIT_SUCCESS) << message();
  ASSERT_EQ(flashjit_attention_workspace_counter_bytes(inline_combine, &a, &counters), FLASHJIT_SUCCESS) << message();
  ASSERT_EQ(flashjit_attention_workspace_size(kernel_combine, &a, &partials), FLASHJIT_SUCCESS) << message();
  // 4 sequences x 8 head groups x 13 query blocks x 1 warpgroup words, 256-byte aligned
  EXPECT_EQ(counters, 1792u);
  EXPECT_GT(partials, 0u);
  EXPECT_EQ(whole, counters + partials);
  // Without counters: nothing to zero.
  EXPECT_EQ(flashjit_attention_workspace_counter_bytes(kernel_combine, &a, &counters), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(counters, 0u);
  counters = 7;
  EXPECT_EQ(flashjit_attention_workspace_counter_bytes(kPaged, &a, &counters), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(counters, 0u);
  // scheduler=dynamic: its tile counter is the whole workspace.
  a.max_splits = 0;
  ASSERT_EQ(flashjit_attention_workspace_size(dynamic, &a, &whole), FLASHJIT_SUCCESS) << message();
  ASSERT_EQ(flashjit_attention_workspace_counter_bytes(dynamic, &a, &counters), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(counters, 256u);
  EXPECT_EQ(whole, 256u);
  // Bad input is named.
  EXPECT_EQ(flashjit_attention_workspace_counter_bytes(dynamic, &a, nullptr), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "bytes") << message();
  EXPECT_EQ(flashjit_attention_workspace_counter_bytes(nullptr, &a, &counters), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "spec") << message();
  EXPECT_EQ(flashjit_attention_workspace_counter_bytes("dtype=bf16,head_dim=7", &a, &counters), FLASHJIT_ERROR_INVALID_SPEC);
  EXPECT_EQ(field(), "head_dim") << message();
}

}  // namespace

// The metadata check reads the sinks (float32 or bf16) and ALiBi slopes a launch would read and names
// the first that would turn a row into NaN: a NaN or +inf sink (-inf is a sink that never joins), a
// slope that is not finite; with a batch stride, only each sequence's heads_q slopes are read.
TEST(ApiEngine, MetadataCheckNamesABadSinkOrSlope) {
  const Step step;
  const char* spec = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,sinks=1,alibi=1";
  if (flashjit_supported(spec, nullptr, 0) != FLASHJIT_SUCCESS) GTEST_SKIP() << "this build: " << message();
  std::vector<float> sinks(32, 3.0f);
  sinks[5] = -INFINITY;  // allowed
  std::vector<float> slopes(4 * 40, 0.5f);
  for (int b = 0; b < 4; ++b)
    for (int h = 32; h < 40; ++h) slopes[size_t(b * 40 + h)] = NAN;  // past heads_q: never read
  flashjit_attention_args_t a = step.args(true);
  a.sinks = reinterpret_cast<uint64_t>(sinks.data());
  a.sinks_dtype = FLASHJIT_DTYPE_FP32;
  a.alibi_slopes = reinterpret_cast<uint64_t>(slopes.data());
  a.alibi_batch_stride = 40;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_SUCCESS) << message();
  sinks[7] = NAN;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.sinks[7]") << message();
  sinks[7] = INFINITY;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.sinks[7]") << message();
  sinks[7] = 1.0f;
  slopes[size_t(2 * 40 + 3)] = INFINITY;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.alibi_slopes[83]") << message();
  slopes[size_t(2 * 40 + 3)] = 0.25f;
  // bf16 sinks are widened: 0x7fc0 is a bf16 NaN.
  std::vector<uint16_t> bf16_sinks(32, 0x4040);  // 3.0
  bf16_sinks[9] = 0x7fc0;
  a.sinks = reinterpret_cast<uint64_t>(bf16_sinks.data());
  a.sinks_dtype = FLASHJIT_DTYPE_BF16;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(), "args.sinks[9]") << message();
  bf16_sinks[9] = 0x4040;
  EXPECT_EQ(flashjit_check_engine_metadata_host(spec, &a), FLASHJIT_SUCCESS) << message();
}

// FlashAttention-3's split MLA form (spec key qv=1, MLA SPLIT FORM): qv and its strides are
// required with the key and refused without it, each by name; q and k take the rotary columns'
// strides, qv and v the latent ones'.
TEST(ApiEngine, SplitMlaFormNeedsQvAndNoOtherSpecTakesIt) {
  const char* kSplit = "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,qv=1";
  const char* kAbsorbed = "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1";
  const Step step;
  auto split_args = [&](const char* spec) {
    flashjit_attention_args_t a = step.args(true);
    a.heads_q = 16, a.heads_kv = 1;
    const bool split = std::string(spec) == kSplit;
    const int64_t qk_cols = split ? 64 : 576;
    a.q_strides = flashjit_tensor_strides_t{0, 16 * qk_cols, qk_cols};
    a.o_strides = flashjit_tensor_strides_t{0, 16 * 512, 512};
    a.k_strides = flashjit_tensor_strides_t{Step::kPageSize * qk_cols, qk_cols, qk_cols};
    a.v_strides = split ? flashjit_tensor_strides_t{Step::kPageSize * 512, 512, 512} : a.k_strides;  // absorbed: V K's first columns
    if (split) a.qv = 0x60000, a.qv_strides = flashjit_tensor_strides_t{0, 16 * 512, 512};
    return a;
  };
  flashjit_attention_args_t split = split_args(kSplit), absorbed = split_args(kAbsorbed);
  EXPECT_EQ(flashjit_validate_attention_args(kSplit, &split), FLASHJIT_SUCCESS) << message();
  EXPECT_EQ(flashjit_validate_attention_args(kAbsorbed, &absorbed), FLASHJIT_SUCCESS) << message();
  flashjit::expect_each_refused(split_args, {
      {kSplit, "args.qv", "null device pointer", [](auto& a) { a.qv = 0; }},
      {kSplit, "args.qv", "16-byte aligned", [](auto& a) { a.qv = 0x60008; }},
      {kSplit, "args.qv_strides.row", "", [](auto& a) { a.qv_strides.row = 3; }},
      {kAbsorbed, "args.qv", "qv=1", [](auto& a) { a.qv = 0x60000; }},
      {kAbsorbed, "args.qv_strides", "qv=1", [](auto& a) { a.qv_strides.head = 512; }},
      {kPaged, "args.qv", "qv=1", [](auto& a) { a.qv = 0x60000; }},
  });
}

// V in K's rows (spec key v_in_k=1, MLA's latent cache): v must be k's pointer with k's strides (the
// kernel loads no V), each refused by name.
TEST(ApiEngine, VInKTakesKsOwnMemoryForV) {
  const char* kLatent = "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,v_in_k=1";
  const Step step;
  auto latent_args = [&](const char*) {
    flashjit_attention_args_t a = step.args(true);
    a.heads_q = 16, a.heads_kv = 1;
    a.q_strides = flashjit_tensor_strides_t{0, 16 * 576, 576};
    a.o_strides = flashjit_tensor_strides_t{0, 16 * 512, 512};
    a.k_strides = a.v_strides = flashjit_tensor_strides_t{Step::kPageSize * 576, 576, 576};
    a.v = a.k;
    return a;
  };
  flashjit_attention_args_t latent = latent_args(kLatent);
  EXPECT_EQ(flashjit_validate_attention_args(kLatent, &latent), FLASHJIT_SUCCESS) << message();
  flashjit::expect_each_refused(latent_args, {
      {kLatent, "args.v", "v_in_k=1", [](auto& a) { a.v = a.k + 0x10000; }},
      {kLatent, "args.v_strides", "v_in_k=1", [](auto& a) { a.v_strides.row = 512; }},
  });
  // FlashAttention-3's split form with v_in_k=1: the K tile's first 512 columns are loaded from v
  // itself, so v and k are two tensors of their own strides, as with qv=1 alone; qv stays required.
  const char* kSplitLatent = "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,qv=1,v_in_k=1";
  auto split_args = [&](const char*) {
    flashjit_attention_args_t a = step.args(true);
    a.heads_q = 16, a.heads_kv = 1;
    a.q_strides = flashjit_tensor_strides_t{0, 16 * 64, 64};
    a.o_strides = flashjit_tensor_strides_t{0, 16 * 512, 512};
    a.k_strides = flashjit_tensor_strides_t{Step::kPageSize * 64, 64, 64};
    a.v_strides = flashjit_tensor_strides_t{Step::kPageSize * 512, 512, 512};
    a.qv = 0x60000, a.qv_strides = flashjit_tensor_strides_t{0, 16 * 512, 512};
    return a;
  };
  flashjit_attention_args_t split = split_args(kSplitLatent);
  ASSERT_NE(split.v, split.k);
  EXPECT_EQ(flashjit_validate_attention_args(kSplitLatent, &split), FLASHJIT_SUCCESS) << message();
  flashjit::expect_each_refused(split_args, {
      {kSplitLatent, "args.qv", "null device pointer", [](auto& a) { a.qv = 0; }},
      {kSplitLatent, "args.v", "null device pointer", [](auto& a) { a.v = 0; }},
  });
}
