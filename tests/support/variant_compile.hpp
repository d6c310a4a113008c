// The variant compile tests' shared check (tests/compile_test.cpp, kv_fp8_test.cpp,
// head_dim_v_test.cpp): a spec compiles for sm_90a with NVRTC without a spill or a stack frame,
// within its register budget; and the parameterised suites' test names from their specs.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>

#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "config/kernel_config.hpp"
#include "runtime/engine.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit {

inline std::string spec_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name) if (!std::isalnum((unsigned char)ch)) ch = '_';
  return name;
}

// `spec` compiles without a spill or a stack frame, within its register budget (and, where `symbol`
// is given, the cubin has that kernel); prints its registers and compile time.
inline void expect_compiles_without_spills(const std::string& spec, const char* symbol = nullptr) {
  auto parsed = parse_spec(spec);
  ASSERT_TRUE(parsed.ok()) << spec << ": " << parsed.error().message;
  auto config = make_config(*parsed);
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto kernel = compile_with_nvrtc(make_compile_request(*config));
  ASSERT_TRUE(kernel.ok()) << kernel.error().message << "\n" << kernel.error().log.substr(0, 4000);
  EXPECT_EQ(kernel->report.spill_bytes(), 0) << spec;
  EXPECT_EQ(kernel->report.stack_frame_bytes, 0) << spec;
  EXPECT_TRUE(check_register_budget(*config, kernel->report.registers).ok()) << kernel->report.registers;
  // C7520: ptxas serialised the wgmma (e.g. a fence it had to inject in a divergent path).
  for (const std::string& w : kernel->report.warnings) EXPECT_EQ(w.find("C7520"), std::string::npos) << spec << ": " << w;
  if (symbol != nullptr) EXPECT_NE(kernel->cubin.find(symbol), std::string::npos) << symbol;
  std::printf("  %-80s %3d regs, %.0f ms\n", spec.c_str(), kernel->report.registers, kernel->compile_ms);
}

}  // namespace flashjit
