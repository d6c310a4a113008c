#include "verify/builtin_kernel.hpp"

#include "compile/nvrtc_compiler.hpp"

namespace flashjit {

BuiltinKernel::BuiltinKernel(std::string source, std::string kernel_name, std::string label, int dynamic_smem_bytes)
    : source_(std::move(source)),
      kernel_name_(std::move(kernel_name)),
      label_(std::move(label)),
      dynamic_smem_bytes_(dynamic_smem_bytes) {}

KernelResult BuiltinKernel::load(const DriverApi& api, CUcontext context) {
  // 1. The cubin, compiled by the first caller.
  std::shared_ptr<const CompiledKernel> cubin;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!compiled_) {
      auto compiled = compile_with_nvrtc({source_, default_nvrtc_options(), kernel_name_, label_});
      if (!compiled) return compiled.take_error();
      compiled_ = std::make_shared<const CompiledKernel>(std::move(*compiled));
    }
    cubin = compiled_;
  }
  // 2. Its module in this context, loaded by the first caller there.
  return modules_.get_or_load(api, context, kernel_name_, cubin->cubin, kernel_name_, dynamic_smem_bytes_);
}

void BuiltinKernel::drop(CUcontext context) { modules_.drop_context(context); }

}  // namespace flashjit
