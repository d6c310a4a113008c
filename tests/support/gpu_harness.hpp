// GPU test harness: the device, and kernels compiled and loaded for a spec (once per process).
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "config/kernel_config.hpp"
#include "driver/context.hpp"
#include "driver/cuda_driver.hpp"
#include "driver/module.hpp"
#include "launch/attention_args.hpp"
#include "verify/check.hpp"
#include "verify/reference.hpp"

namespace flashjit::testing {

using flashjit::Problem;
using flashjit::Strides;
using flashjit::Reference;
using flashjit::Layout;

// The first device's primary context made current, and a stream. Null (with the reason) where no
// usable Hopper GPU is present: GPU tests skip with that reason.
struct GpuEnv {
  const DriverApi* api = nullptr;
  std::unique_ptr<PrimaryContext> context;
  CUstream stream = nullptr;
  int sm_count = 0;
  // Launches use a persistent grid of one CTA per SM, as the API and the tool do.
  CheckDevice device() const { return {api, context->get(), stream, sm_count}; }
};
GpuEnv* gpu_env(std::string* why_not);

#define FLASHJIT_REQUIRE_GPU(env)                                                        \
  std::string flashjit_why_no_gpu;                                                       \
  ::flashjit::testing::GpuEnv* env = ::flashjit::testing::gpu_env(&flashjit_why_no_gpu); \
  if (!env) GTEST_SKIP() << "GPU test not run: " << flashjit_why_no_gpu

// A compiled and loaded attention kernel (compiled once per spec per process, memory cache only).
struct TestKernel {
  KernelConfig config;
  std::shared_ptr<LoadedKernel> loaded;
  int registers = 0;
  int spill_bytes = 0;
};
std::shared_ptr<TestKernel> get_test_kernel(const std::string& spec_text, std::string* error);
// Compiles many specs in parallel (all cores); errors show up later in get_test_kernel.
void precompile(const std::vector<std::string>& specs);

// A problem of the given dtype, head dim, mask and shape.
Problem make_problem(bool bf16, int d, bool causal, int batch, int sq, int sk, int hq, int hkv);

struct Case {
  std::string spec;
  Problem problem;  // dtype, head_dim and causal must agree with the spec
  Layout layout = Layout::kContiguous;
  bool with_lse = true;
  int max_ctas = -1;     // persistent grid size; -1: the device's SM count, 0: one CTA per tile
  int fill_blocks = -1;  // causal blocks the tile deal holds back; -1: what the launch picks
  int held_heads = 0;    // with fill_blocks >= 0, the last heads they are held back from (0: all)
  std::string describe() const;
};

CheckResult run_case(const Case& c, std::mt19937_64& rng);

// The float64 GPU reference kernel and the CPU reference on the same random inputs: contiguous Q,
// K and V of p's shape (standard normal, rounded to p's dtype). With *error set (the GPU
// reference failed) cpu is left empty.
struct ReferencePair {
  Reference gpu, cpu;
};
ReferencePair references_on_random_inputs(const GpuEnv& env, const Problem& p, std::mt19937_64& rng, std::string* error);

}  // namespace flashjit::testing
