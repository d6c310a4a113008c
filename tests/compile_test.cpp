#include <time.h>

#include <gtest/gtest.h>

#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "config/kernel_config.hpp"
#include "config/length_choice.hpp"
#include "source/render.hpp"

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

TEST(Render, DeterministicAndSpecific) {
  const std::string a = request_for("dtype=bf16,head_dim=128,causal=1").source;
  const std::string b = request_for("dtype=bf16,head_dim=128,causal=1").source;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, request_for("dtype=fp16,head_dim=128,causal=1").source);
  EXPECT_NE(a, request_for("dtype=bf16,head_dim=128,causal=0").source);
  EXPECT_NE(a, request_for("dtype=bf16,head_dim=128,causal=1,stages=3").source);
  EXPECT_NE(a.find("m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(a.find("constexpr bool kCausal = 1;"), std::string::npos);
  EXPECT_EQ(a.find("#include"), std::string::npos) << "templates must not need headers";
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
  for (const char* dtype : {"fp16", "bf16"})
    for (int d : {64, 96, 128, 192, 256})
      for (int causal : {0, 1}) {
        out.push_back(std::string("dtype=") + dtype + ",head_dim=" + std::to_string(d) + ",causal=" + std::to_string(causal));
        if (auto variant = long_sequence_variant(*parse_spec(out.back()))) out.push_back(to_string(variant->spec));
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, DefaultVariant, ::testing::ValuesIn(default_specs()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) if (!isalnum((unsigned char)ch)) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace flashjit
