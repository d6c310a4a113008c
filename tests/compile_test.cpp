#include <time.h>

#include <gtest/gtest.h>

#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "runtime/engine.hpp"
#include "source/render.hpp"
#include "support/variant_compile.hpp"

namespace flashjit {
namespace {

CompileRequest request_for(const std::string& spec_text) {
  auto spec = parse_spec(spec_text);
  EXPECT_TRUE(spec.ok()) << spec_text;
  auto config = make_config(*spec);
  EXPECT_TRUE(config.ok()) << spec_text << ": " << config.error().message;
  return CompileRequest{render_attention_source(*config), default_nvrtc_options(), config->kernel_name,
                        to_string(config->spec)};
}

// A spec parameter's test name: the spec text, every character but letters and digits as '_'.
// The source as NVRTC reads it: the __CUDACC_RTC__ branches kept, the others (for nvcc, which
// compiles what `flashjit source` prints) dropped, and the conditional lines themselves.
std::string nvrtc_view(const std::string& source) {
  std::string out;
  enum { kOutside, kRtc, kOther } state = kOutside;
  size_t begin = 0;
  while (begin < source.size()) {
    const size_t end = std::min(source.find('\n', begin), source.size());
    const std::string line = source.substr(begin, end - begin);
    begin = end + 1;
    if (line.rfind("#ifdef __CUDACC_RTC__", 0) == 0) { state = kRtc; continue; }
    if (state != kOutside && line.rfind("#else", 0) == 0) { state = kOther; continue; }
    if (state != kOutside && line.rfind("#endif", 0) == 0) { state = kOutside; continue; }
    if (state != kOther) out += line + "\n";
  }
  return out;
}

TEST(Render, DeterministicAndSpecific) {
  const std::string a = request_for("dtype=bf16,head_dim=128,causal=1").source;
  const std::string b = request_for("dtype=bf16,head_dim=128,causal=1").source;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, request_for("dtype=fp16,head_dim=128,causal=1").source);
  EXPECT_NE(a, request_for("dtype=bf16,head_dim=128,causal=0").source);
  EXPECT_NE(a, request_for("dtype=bf16,head_dim=128,causal=1,stages=3").source);
  EXPECT_NE(a.find("m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(a.find("constexpr bool kCausal = 1;"), std::string::npos);
  EXPECT_EQ(nvrtc_view(a).find("#include"), std::string::npos) << "templates must not need headers";
}

// Each feature's rendered type names the one this variant compiled in, and only that one.
TEST(Render, FeatureTypesFollowTheSpec) {
  const std::string plain = request_for("dtype=bf16,head_dim=64,causal=1").source;
  EXPECT_NE(plain.find("using Finalize = PlainFinalize;"), std::string::npos);
  EXPECT_NE(plain.find("using ScoreMod = NoScoreMod;"), std::string::npos);
  const std::string sinks = request_for("dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,window=1,sinks=1").source;
  EXPECT_NE(sinks.find("using Finalize = SinkFinalize;"), std::string::npos);
  EXPECT_EQ(sinks.find("using Finalize = PlainFinalize;"), std::string::npos);
  EXPECT_NE(sinks.find("using Mask = WindowChunkMask;"), std::string::npos);
  EXPECT_NE(request_for("dtype=bf16,head_dim=64,alibi=1").source.find("using ScoreMod = Alibi;"), std::string::npos);
  EXPECT_NE(request_for("dtype=bf16,head_dim=64,softcap=1,alibi=1").source.find("using ScoreMod = SoftcapAlibi;"), std::string::npos);
  EXPECT_NE(request_for("dtype=bf16,head_dim=64,softcap=1").source.find("using ScoreMod = Softcap;"), std::string::npos);
}

// The branch for nvcc changes nothing NVRTC compiles: the cubin of the rendered source is the one
// of its NVRTC view (the text before that branch was added, bar the conditional lines).
TEST(Render, NvccBranchLeavesTheNvrtcCubinAsItWas) {
  const CompileRequest request = request_for("dtype=fp16,head_dim=64,causal=0");
  ASSERT_NE(request.source.find("#ifdef __CUDACC_RTC__"), std::string::npos);
  CompileRequest view = request;
  view.source = nvrtc_view(request.source);
  ASSERT_NE(view.source, request.source);
  auto rendered = compile_with_nvrtc(request);
  auto plain = compile_with_nvrtc(view);
  ASSERT_TRUE(rendered.ok() && plain.ok());
  EXPECT_TRUE(rendered->cubin == plain->cubin) << "the cubins differ";
  EXPECT_EQ(rendered->report, plain->report);
}

TEST(PtxasReport, ParsesRegistersSpillsAndWarnings) {
  const char* log =
      "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Used 12 registers\n"
      "ptxas info    : Compiling entry function 'flashjit_attention_fwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for flashjit_attention_fwd\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 32 bytes smem, 1024 bytes cmem[0]\n";
  PtxasReport r = parse_ptxas_report(log, "flashjit_attention_fwd");
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.stack_frame_bytes, 16);
  EXPECT_EQ(r.spill_store_bytes, 8);
  EXPECT_EQ(r.spill_load_bytes, 4);
  EXPECT_EQ(r.static_smem_bytes, 32);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("C7508"), std::string::npos);
}

// A module's other kernels (split_kv's combine) count towards its spills and stack: the
// zero-spill rule is the module's; registers and shared memory stay the named kernel's.
TEST(PtxasReport, SpillsOfEveryKernelInTheModuleCount) {
  const char* log =
      "ptxas info    : Compiling entry function 'flashjit_attention_combine' for 'sm_90a'\n"
      "ptxas info    : Function properties for flashjit_attention_combine\n"
      "    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 48 registers, used 0 barriers, 4096 bytes smem\n"
      "ptxas info    : Compiling entry function 'flashjit_attention_fwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for flashjit_attention_fwd\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 240 registers, used 16 barriers\n";
  PtxasReport r = parse_ptxas_report(log, "flashjit_attention_fwd");
  EXPECT_EQ(r.registers, 240);
  EXPECT_EQ(r.spill_bytes(), 12);
  EXPECT_EQ(r.stack_frame_bytes, 8);
  EXPECT_EQ(r.static_smem_bytes, 0);
}

TEST(Compile, FailureIsTypedAndCarriesLog) {
  CompileRequest request{"extern \"C\" __global__ void k() { this is not cuda; }", default_nvrtc_options(), "k", "test-spec"};
  auto result = compile_with_nvrtc(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kCompileFailed);
  EXPECT_NE(result.error().message.find("test-spec"), std::string::npos);
  EXPECT_NE(result.error().log.find("error"), std::string::npos);
}

// Compile time (README "Measured", bench/NOTES.md issue 22): one cold compile of the d128 causal
// kernel in this thread's CPU time (NVRTC compiles on the calling thread), so that other work on
// the machine does not count. The goal is 1.0 s on the 2-core development machine, where this
// read 1.1-1.8 s of CPU even at load average 12; the bound is 4 s, so that only a gross regression
// fails it (a debug or line-info option, a kernel grown to twice its size), never a busy machine.
TEST(Compile, ColdCompileOfTheD128CausalKernelStaysInItsBudget) {
  CompileRequest request = request_for("dtype=bf16,head_dim=128,causal=1");
  timespec start{}, end{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  auto kernel = compile_with_nvrtc(request);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
  ASSERT_TRUE(kernel.ok()) << kernel.error().message;
  const double cpu_ms = (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
  EXPECT_LT(cpu_ms, 4000.0) << "NVRTC took " << cpu_ms << " ms of CPU (" << kernel->compile_ms << " ms wall)";
  std::printf("  d128 causal: %.0f ms CPU, %.0f ms wall\n", cpu_ms, kernel->compile_ms);
}

// Every default variant (the default specs and their long-sequence kernels): compiles for sm_90a,
// zero spills, no local memory, setmaxnreg honoured and within the register budget.
class DefaultVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(DefaultVariant, CompilesWithoutSpills) {
  CompileRequest request = request_for(GetParam());
  auto kernel = compile_with_nvrtc(request);
  ASSERT_TRUE(kernel.ok()) << kernel.error().message << "\n" << kernel.error().log.substr(0, 4000);
  const PtxasReport& r = kernel->report;
  EXPECT_GT(kernel->cubin.size(), 1000u);
  EXPECT_GT(r.registers, 0);
  EXPECT_EQ(r.spill_bytes(), 0) << GetParam();
  EXPECT_EQ(r.stack_frame_bytes, 0) << GetParam();
  for (const std::string& w : r.warnings) EXPECT_EQ(w.find("C7508"), std::string::npos) << w;
  auto config = make_config(*parse_spec(GetParam()));
  EXPECT_TRUE(check_register_budget(*config, r.registers).ok()) << r.registers;
  std::printf("  %-48s %3d regs, %d spill, %.0f ms\n", GetParam().c_str(), r.registers, r.spill_bytes(), kernel->compile_ms);
}

std::vector<std::string> default_specs() {
  std::vector<std::string> out;
  for (const AttentionSpec& spec : default_prewarm_specs()) {
    out.push_back(to_string(spec));
    if (auto variant = long_sequence_variant(spec)) out.push_back(to_string(variant->spec));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, DefaultVariant, ::testing::ValuesIn(default_specs()),
                         spec_test_name);

}  // namespace
}  // namespace flashjit

namespace flashjit {
namespace {

// The decode variants (split_kv's module: the attention kernel and its combine) build without a
// spill or a stack frame in either kernel, at the head dims engines use and an odd one.
TEST(Compile, DecodeModulesHaveNoSpills) {
  for (const char* spec : {"dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1",
                           "dtype=fp16,head_dim=256,varlen=1,pack_gqa=1,split_kv=1,causal=1",
                           "dtype=bf16,head_dim=80,varlen=1,pack_gqa=1,split_kv=1"}) {
    auto config = make_config(*parse_spec(spec));
    ASSERT_TRUE(config) << config.error().message;
    auto kernel = compile_with_nvrtc(make_compile_request(*config));
    ASSERT_TRUE(kernel) << kernel.error().message;
    EXPECT_EQ(kernel->report.spill_bytes(), 0) << spec;
    EXPECT_EQ(kernel->report.stack_frame_bytes, 0) << spec;
    EXPECT_NE(kernel->cubin.find("flashjit_attention_combine"), std::string::npos) << spec;
  }
}

}  // namespace
}  // namespace flashjit

namespace flashjit {
namespace {

// Issue 38's window and chunk variants (a two-sided Mask): dense, varlen, paged, packed heads and
// split-KV (both combines), causal or not, both dtypes, head dims 64-256: each compiles for
// sm_90a without a spill or a stack frame (tests/gpu/check_sass.sh checks their SASS for HGMMA
// and local memory where cuobjdump is).
class MaskFeatureVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskFeatureVariant, CompilesWithoutSpills) { expect_compiles_without_spills(GetParam()); }

INSTANTIATE_TEST_SUITE_P(All, MaskFeatureVariant,
                         ::testing::Values("dtype=bf16,head_dim=64,causal=1,window=1", "dtype=fp16,head_dim=64,window=1",
                                           "dtype=bf16,head_dim=96,causal=1,chunk=1", "dtype=bf16,head_dim=128,causal=1,window=1",
                                           "dtype=fp16,head_dim=128,window=1,chunk=1", "dtype=bf16,head_dim=192,chunk=1",
                                           "dtype=bf16,head_dim=256,causal=1,window=1", "dtype=fp16,head_dim=256,window=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,window=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,window=1,chunk=1",
                                           "dtype=fp16,head_dim=256,causal=1,varlen=1,paged=1,window=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,window=1",
                                           "dtype=fp16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline,window=1,chunk=1",
                                           "dtype=bf16,head_dim=256,causal=1,varlen=1,pack_gqa=1,split_kv=1,window=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic,window=1"),
                         spec_test_name);

}  // namespace
}  // namespace flashjit

namespace flashjit {
namespace {

// Issue 38's score modifiers (a rendered ScoreMod: softcap, ALiBi) and sinks (a rendered Finalize) alone
// and with windows: dense, varlen, paged, packed heads and split-KV (both combines), causal or
// not, both dtypes, head dims 64-256: each compiles for sm_90a without a spill or a stack frame
// (tests/gpu/check_sass.sh checks their SASS for HGMMA and local memory where cuobjdump is).
class ScoreFeatureVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(ScoreFeatureVariant, CompilesWithoutSpills) { expect_compiles_without_spills(GetParam(), "flashjit_attention_fwd"); }

INSTANTIATE_TEST_SUITE_P(All, ScoreFeatureVariant,
                         ::testing::Values("dtype=bf16,head_dim=64,causal=1,softcap=1", "dtype=fp16,head_dim=64,softcap=1",
                                           "dtype=bf16,head_dim=96,softcap=1", "dtype=bf16,head_dim=128,causal=1,softcap=1",
                                           "dtype=fp16,head_dim=128,softcap=1", "dtype=bf16,head_dim=192,causal=1,softcap=1",
                                           "dtype=bf16,head_dim=256,causal=1,softcap=1", "dtype=fp16,head_dim=256,softcap=1",
                                           "dtype=bf16,head_dim=256,causal=1,window=1,softcap=1",
                                           "dtype=fp16,head_dim=128,window=1,chunk=1,softcap=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,window=1,softcap=1",
                                           "dtype=bf16,head_dim=256,causal=1,varlen=1,paged=1,window=1,softcap=1",
                                           "dtype=fp16,head_dim=64,varlen=1,paged=1,softcap=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,softcap=1",
                                           "dtype=fp16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline,window=1,softcap=1",
                                           "dtype=bf16,head_dim=256,causal=1,varlen=1,paged=1,split_kv=1,softcap=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic,softcap=1",
                                           // learnable sinks (a rendered Finalize): the epilogue, both merges
                                           "dtype=bf16,head_dim=64,causal=1,sinks=1", "dtype=fp16,head_dim=64,sinks=1",
                                           "dtype=bf16,head_dim=128,sinks=1", "dtype=fp16,head_dim=192,causal=1,sinks=1",
                                           "dtype=bf16,head_dim=256,causal=1,sinks=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,sinks=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,window=1,sinks=1",
                                           "dtype=fp16,head_dim=256,causal=1,varlen=1,paged=1,window=1,softcap=1,sinks=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,window=1,sinks=1",
                                           "dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,sinks=1",
                                           "dtype=fp16,head_dim=256,causal=1,varlen=1,split_kv=1,combine=inline,window=1,sinks=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic,sinks=1",
                                           // ALiBi (a rendered ScoreMod), alone and with softcap
                                           "dtype=bf16,head_dim=64,causal=1,alibi=1", "dtype=fp16,head_dim=64,alibi=1",
                                           "dtype=bf16,head_dim=96,alibi=1", "dtype=bf16,head_dim=128,causal=1,alibi=1",
                                           "dtype=fp16,head_dim=128,softcap=1,alibi=1", "dtype=bf16,head_dim=192,causal=1,alibi=1",
                                           "dtype=bf16,head_dim=256,causal=1,alibi=1", "dtype=fp16,head_dim=256,softcap=1,alibi=1",
                                           "dtype=bf16,head_dim=256,causal=1,window=1,alibi=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,alibi=1",
                                           "dtype=fp16,head_dim=64,varlen=1,paged=1,softcap=1,alibi=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,window=1,softcap=1,sinks=1,alibi=1",
                                           "dtype=bf16,head_dim=256,causal=1,varlen=1,paged=1,window=1,softcap=1,alibi=1",
                                           "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,alibi=1",
                                           "dtype=fp16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline,window=1,alibi=1",
                                           "dtype=bf16,head_dim=256,causal=1,varlen=1,paged=1,split_kv=1,sinks=1,alibi=1",
                                           "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,scheduler=dynamic,alibi=1"),
                         spec_test_name);

}  // namespace
}  // namespace flashjit
