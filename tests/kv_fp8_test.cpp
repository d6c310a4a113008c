// FP8 on the CPU (issue 39): the FP8 cache (spec key kv_dtype=e4m3) and FP8 operands (dtype=e4m3):
// the keys' text and their refusals, the tiles and shared memory they resolve to, and every variant
// compiled with NVRTC for sm_90a without a spill or a stack frame and within its register split
// (tests/gpu/check_sass.sh reads their SASS: SassCheck.KvFp8Variants, SassCheck.Fp8OperandVariants).
#include <gtest/gtest.h>

#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "config/kernel_config.hpp"
#include "runtime/engine.hpp"
#include "source/render.hpp"
#include "spec/attention_spec.hpp"
#include "support/variant_compile.hpp"

namespace flashjit {
namespace {

TEST(KvFp8Spec, KeyRoundTripsAndIsLeftOutWhenTheCacheIsTheQueriesType) {
  auto spec = parse_spec("dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,kv_dtype=e4m3");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->kv_fp8());
  EXPECT_EQ(to_string(*spec), "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,kv_dtype=e4m3");
  EXPECT_EQ(*parse_spec(to_string(*spec)), *spec);
  for (const char* word : {"E4M3", "fp8", "float8_e4m3fn"}) {
    auto other = parse_spec(std::string("dtype=fp16,head_dim=64,kv_dtype=") + word);
    ASSERT_TRUE(other.ok()) << word;
    EXPECT_TRUE(other->kv_fp8()) << word;
  }
  auto same = parse_spec("dtype=fp16,head_dim=64,kv_dtype=fp16");
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->kv_fp8());
  EXPECT_EQ(to_string(*same), "dtype=fp16,head_dim=64,causal=0");
}

TEST(KvFp8Spec, RefusalsNameTheFieldAndWhatIsAllowed) {
  struct Case {
    const char* spec;
    const char* field;
    const char* allowed;
  };
  for (const Case& c : {Case{"dtype=bf16,head_dim=128,kv_dtype=e5m2", "kv_dtype", "e4m3"},
                        Case{"dtype=bf16,head_dim=128,kv_dtype=fp16", "kv_dtype", "bf16"},
                        Case{"dtype=bf16,head_dim=72,kv_dtype=e4m3", "head_dim", "a multiple of 16"},
                        Case{"dtype=bf16,head_dim=128,cluster=2,kv_dtype=e4m3", "cluster", "allowed: 1"},
                        Case{"dtype=bf16,head_dim=128,ctas_per_sm=2,consumer_wgs=1,kv_dtype=e4m3", "ctas_per_sm", "allowed: 1"},
                        Case{"dtype=bf16,head_dim=64,consumer_wgs=3,kv_dtype=e4m3", "consumer_wgs", "1 or 2"},
                        Case{"dtype=bf16,head_dim=128,varlen=1,scheduler=dynamic,kv_dtype=e4m3", "scheduler", "static"}}) {
    auto spec = parse_spec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec;
    EXPECT_EQ(spec.error().field, c.field) << c.spec << ": " << spec.error().message;
    EXPECT_NE(spec.error().message.find(c.allowed), std::string::npos) << spec.error().message;
  }
}

TEST(KvFp8Config, StagingFitsBesideTheRingAndTheProducerGetsItsRegisters) {
  for (const char* text : {"dtype=bf16,head_dim=64,kv_dtype=e4m3", "dtype=bf16,head_dim=128,causal=1,kv_dtype=e4m3",
                           "dtype=bf16,head_dim=256,causal=1,kv_dtype=e4m3",
                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3"}) {
    auto config = make_config(*parse_spec(text));
    ASSERT_TRUE(config.ok()) << text << ": " << config.error().message;
    const KernelConfig& c = *config;
    EXPECT_GE(c.kv_staging_slots, 1) << text;
    EXPECT_EQ(c.kv_staging_bytes % 128, 0) << text;
    EXPECT_GE(c.kv_staging_bytes, c.spec.block_n * c.spec.head_dim) << text;
    EXPECT_LE(c.smem_bytes, shared_memory_budget(c.spec)) << text;
    EXPECT_LE(c.spec.consumer_wgs, 2) << text << ": three warpgroups leave the widening producer no registers";
    EXPECT_GE(c.producer_regs, 32) << text;
    // The staging slots are counted: the same spec without the FP8 cache takes less shared memory.
    AttentionSpec plain = c.spec;
    plain.kv_dtype = KvDType::kSame;
    auto plain_config = make_config(plain);
    ASSERT_TRUE(plain_config.ok());
    EXPECT_EQ(plain_config->kv_staging_slots, 0);
    EXPECT_LT(plain_config->smem_bytes, c.smem_bytes) << text;
    EXPECT_NE(render_attention_source(c).find("constexpr bool kKvFp8 = 1;"), std::string::npos);
    EXPECT_NE(render_attention_source(*plain_config).find("constexpr bool kKvFp8 = 0;"), std::string::npos);
  }
}

// Every FP8-cache variant the engine needs: dense, packed and paged K/V, packed heads and split-KV
// with both combines, both dtypes, head dims 64-256 (96: a padded chunk), with a window, sinks, a
// softcap.
class KvFp8Variant : public ::testing::TestWithParam<std::string> {};

TEST_P(KvFp8Variant, CompilesWithoutSpills) { expect_compiles_without_spills(GetParam()); }

// The list tests/CMakeLists.txt hands check_sass.sh as well (KV_FP8_SASS_SPECS there).
INSTANTIATE_TEST_SUITE_P(All, KvFp8Variant,
                         ::testing::Values(// Head dims above 256: MLA's e4m3 latent cache (576/512, O in two parts: V's
                                           // staged columns the part's), Gemma 4's 512/512, 384/384, 320/256
                                           "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3",
                                           "dtype=fp16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=384,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=320,head_dim_v=256,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3", "dtype=fp16,head_dim=64,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=96,kv_dtype=e4m3", "dtype=bf16,head_dim=128,kv_dtype=e4m3",
                                           "dtype=fp16,head_dim=128,causal=1,kv_dtype=e4m3", "dtype=bf16,head_dim=192,causal=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=256,causal=1,kv_dtype=e4m3", "dtype=fp16,head_dim=256,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=fp16,head_dim=256,causal=1,varlen=1,paged=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3",
                                           "dtype=fp16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,kv_dtype=e4m3",
                                           "dtype=fp16,head_dim=256,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,window=1,sinks=1,kv_dtype=e4m3",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,window=1,softcap=1,kv_dtype=e4m3"),
                         spec_test_name);

TEST(Fp8OperandSpec, DtypeE4m3TakesAnOutputTypeAndRoundTrips) {
  auto spec = parse_spec("dtype=e4m3,head_dim=128,causal=1");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->fp8_operands());
  EXPECT_EQ(spec->output_dtype(), DType::kBf16);
  EXPECT_EQ(to_string(*spec), "dtype=e4m3,head_dim=128,causal=1,out_dtype=bf16");
  auto fp16_out = parse_spec("dtype=e4m3,head_dim=64,out_dtype=fp16,varlen=1,paged=1");
  ASSERT_TRUE(fp16_out.ok()) << fp16_out.error().message;
  EXPECT_EQ(fp16_out->output_dtype(), DType::kFp16);
  EXPECT_EQ(*parse_spec(to_string(*fp16_out)), *fp16_out);
  // 16-bit specs keep their text (no out_dtype printed).
  EXPECT_EQ(to_string(*parse_spec("dtype=bf16,head_dim=64")), "dtype=bf16,head_dim=64,causal=0");
}

TEST(Fp8OperandSpec, RefusalsNameTheFieldAndWhatIsAllowed) {
  struct Case {
    const char* spec;
    const char* field;
    const char* allowed;
  };
  for (const Case& c : {Case{"dtype=e4m3,head_dim=80", "head_dim", "a multiple of 32"},
                        Case{"dtype=e4m3,head_dim=128,kv_dtype=e4m3", "kv_dtype", "leave it out"},
                        Case{"dtype=e4m3,head_dim=128,cluster=2", "cluster", "allowed: 1"},
                        Case{"dtype=e4m3,head_dim=64,consumer_wgs=3", "consumer_wgs", "1 or 2"},
                        Case{"dtype=e4m3,head_dim=128,block_n=80", "block_n", "a multiple of 32"},
                        Case{"dtype=e4m3,head_dim=128,softcap=1", "softcap", "not with FP8 operands yet"},
                        Case{"dtype=e4m3,head_dim=128,alibi=1", "alibi", "not with FP8 operands yet"},
                        Case{"dtype=e4m3,head_dim=128,out_dtype=e4m3", "out_dtype", "fp16 or bf16"},
                        Case{"dtype=bf16,head_dim=128,out_dtype=fp16", "out_dtype", "goes with dtype=e4m3"}}) {
    auto spec = parse_spec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec;
    EXPECT_EQ(spec.error().field, c.field) << c.spec << ": " << spec.error().message;
    EXPECT_NE(spec.error().message.find(c.allowed), std::string::npos) << spec.error().message;
  }
}

TEST(Fp8OperandConfig, TilesHoldHalfTheBytesAndTheQBufferHoldsO) {
  for (int d : {64, 96, 128, 192, 256}) {
    const std::string text = "dtype=e4m3,head_dim=" + std::to_string(d);
    auto config = make_config(*parse_spec(text));
    ASSERT_TRUE(config.ok()) << text << ": " << config.error().message;
    const KernelConfig& c = *config;
    EXPECT_EQ(c.qk_k_steps, d / 32) << text;                      // k32 steps
    EXPECT_EQ(c.qk_chunks, (d + 127) / 128) << text;              // 128 e4m3 columns a chunk
    EXPECT_GE(c.q_tile_bytes, c.spec.block_m * d * 2) << text;    // the 16-bit O staged there
    EXPECT_EQ(c.v_tile_bytes, c.v_cols * 128 * ((c.spec.block_n + 127) / 128)) << text;  // V transposed
    EXPECT_EQ(c.spec.block_n % 32, 0) << text;
    EXPECT_FALSE(c.stage_o_in_kv) << text;
    EXPECT_GE(c.kv_staging_slots, 1) << text;
    EXPECT_LE(c.smem_bytes, shared_memory_budget(c.spec)) << text;
    const std::string source = render_attention_source(c);
    EXPECT_NE(source.find("constexpr bool kFp8Operands = 1;"), std::string::npos);
    EXPECT_NE(source.find("k32.f32.e4m3.e4m3"), std::string::npos);
  }
}

// Every FP8-operand variant: dense, packed and paged, split-KV with both combines, both output
// types, head dims 64-256, causal or not, with a window and sinks.
class Fp8OperandVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8OperandVariant, CompilesWithoutSpills) { expect_compiles_without_spills(GetParam()); }

INSTANTIATE_TEST_SUITE_P(All, Fp8OperandVariant,
                         ::testing::Values("dtype=e4m3,head_dim=64", "dtype=e4m3,head_dim=64,causal=1,out_dtype=fp16",
                                           "dtype=e4m3,head_dim=96", "dtype=e4m3,head_dim=128", "dtype=e4m3,head_dim=128,causal=1",
                                           "dtype=e4m3,head_dim=192,causal=1", "dtype=e4m3,head_dim=256",
                                           "dtype=e4m3,head_dim=256,causal=1,out_dtype=fp16",
                                           "dtype=e4m3,head_dim=128,causal=1,varlen=1",
                                           "dtype=e4m3,head_dim=128,causal=1,varlen=1,paged=1",
                                           "dtype=e4m3,head_dim=256,causal=1,varlen=1,paged=1",
                                           "dtype=e4m3,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                                           "dtype=e4m3,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline",
                                           "dtype=e4m3,head_dim=64,causal=1,varlen=1,paged=1,window=1,sinks=1"),
                         spec_test_name);

}  // namespace
}  // namespace flashjit
