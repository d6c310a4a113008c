// GPU test harness: the device, buffers, kernels compiled and loaded for a spec, and one
// correctness case run end to end against the float64 GPU reference.
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
#include "support/attention_reference.hpp"

namespace flashjit::testing {

// The first device's primary context made current, and a stream. Null (with the reason) where no
// usable Hopper GPU is present: GPU tests skip with that reason.
struct GpuEnv {
  const DriverApi* api = nullptr;
  std::unique_ptr<PrimaryContext> context;
  CUstream stream = nullptr;
};
GpuEnv* gpu_env(std::string* why_not);

#define FLASHJIT_REQUIRE_GPU(env)                                          \
  std::string flashjit_why_no_gpu;                                         \
  ::flashjit::testing::GpuEnv* env = ::flashjit::testing::gpu_env(&flashjit_why_no_gpu); \
  if (!env) GTEST_SKIP() << "GPU test not run: " << flashjit_why_no_gpu

class DeviceBuffer {
 public:
  DeviceBuffer(const DriverApi& api, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* data, size_t bytes, size_t offset = 0);
  void download(void* data, size_t bytes, size_t offset = 0) const;
  void fill_bytes(unsigned char value);

 private:
  const DriverApi& api_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// A compiled and loaded attention kernel (compiled once per spec per process).
struct TestKernel {
  KernelConfig config;
  std::shared_ptr<LoadedKernel> loaded;
  int registers = 0;
  int spill_bytes = 0;
};
std::shared_ptr<TestKernel> get_test_kernel(const std::string& spec_text, std::string* error);
// Compiles many specs in parallel (all cores); errors show up later in get_test_kernel.
void precompile(const std::vector<std::string>& specs);

enum class Layout {
  kContiguous,  // [b, s, h, d]
  kPackedQKV,   // one [b, s, hq + 2 hkv, d] buffer, O contiguous
  kHeadMajor,   // [b, h, s, d] (row stride d, head stride s*d)
  kPadded,      // [b, s, h, d] with a padded row stride and head stride
};
const char* layout_name(Layout layout);

struct CaseResult {
  bool ran = false;
  std::string error;        // set when the case could not run (launch error, bad args)
  double o_error = 0;       // ||O - ref|| / ||ref||
  double lse_error = 0;     // max |lse - ref| / max(1, |ref|); -inf must match exactly
  size_t unwritten = 0;     // output elements still holding the poison (NaN)
};

struct Case {
  std::string spec;
  Problem problem;  // dtype, head_dim and causal must agree with the spec
  Layout layout = Layout::kContiguous;
  bool with_lse = true;
  std::string describe() const;
};

CaseResult run_case(const Case& c, std::mt19937_64& rng);

// The float64 GPU reference on device inputs (error set when it could not run).
Reference gpu_reference(const Problem& p, CUdeviceptr q, Strides qs, CUdeviceptr k, Strides ks, CUdeviceptr v,
                        Strides vs, std::string* error);

// Error bounds: the peers' own error (cuDNN ~2.7e-4 fp16, ~2.1e-3 bf16) with headroom.
double o_error_bound(bool bf16);
inline constexpr double kLseErrorBound = 1e-4;

}  // namespace flashjit::testing
