// A small kernel of the project's own that checks and benchmarks launch beside the attention
// kernels (the float64 reference, the random fill, the launch floor): compiled by NVRTC once per
// process on first use, loaded once per context, unloaded from a context by drop().
#pragma once
#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>

#include "common/status.hpp"
#include "compile/compiled_kernel.hpp"
#include "driver/cuda_driver.hpp"
#include "driver/module.hpp"

namespace flashjit {

// Thread-safe. A failed compile is not kept: the next load() tries again.
// NOTES: users hold theirs in a never-destroyed static (new, no delete): modules must go with
// drop() before their context, not at process exit after the driver may be gone.
class BuiltinKernel {
 public:
  // kernel_name: the extern "C" __global__ function in `source`; label: how compile errors name it.
  BuiltinKernel(std::string source, std::string kernel_name, std::string label, int dynamic_smem_bytes = 0);

  KernelResult load(const DriverApi& api, CUcontext context);
  void drop(CUcontext context);

 private:
  const std::string source_, kernel_name_, label_;
  const int dynamic_smem_bytes_;
  std::mutex mutex_;
  std::shared_ptr<const CompiledKernel> compiled_;
  ModuleTable modules_;
};

}  // namespace flashjit
