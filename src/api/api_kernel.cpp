// Exported: flashjit_kernel_get (the one call that compiles or loads), _release, _describe.
#include "api/api_status.hpp"
#include "api/kernel.hpp"
#include "api/struct_size.hpp"
#include "spec/attention_spec.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

static_assert(sizeof(flashjit_kernel_info_t) == 80);
constexpr uint32_t kKernelInfoMinSize = 80;

flashjit_kernel_source_t source_of(CacheLookup::Source source) {
  switch (source) {
    case CacheLookup::Source::kMemory: return FLASHJIT_KERNEL_FROM_MEMORY;
    case CacheLookup::Source::kDisk: return FLASHJIT_KERNEL_FROM_DISK;
    case CacheLookup::Source::kCompiled: return FLASHJIT_KERNEL_COMPILED;
  }
  return FLASHJIT_KERNEL_FROM_MEMORY;
}

ApiStatus get_kernel(const std::shared_ptr<ContextState>& context, const char* spec_text,
                     std::unique_ptr<flashjit_kernel_s>* out) {
  if (!context->has_device()) {
    return invalid_argument("context", "context: this context has no device (FLASHJIT_DEVICE_NONE); it can prewarm, export "
                                       "and import kernels but not load them");
  }
  // 1. Spec -> prepared kernel: memory, disk, or (policy permitting) NVRTC.
  auto spec = parse_spec(spec_text);
  if (!spec) return spec.take_error();
  auto prepared = context->engine().prepare(*spec, context->policy());
  if (!prepared) return prepared.take_error();
  // 2. Loaded into the context's CUDA context (once per context; later calls share the module).
  auto loaded = context->engine().load(*context->api(), *prepared, context->cu_context());
  if (!loaded) return loaded.take_error();
  // 3. The handle, with everything the launch path reads resolved now.
  auto kernel = std::make_unique<flashjit_kernel_s>();
  kernel->context = context;
  kernel->prepared = std::move(*prepared);
  kernel->loaded = std::move(*loaded);
  kernel->api = context->api();
  kernel->cu_context = context->cu_context();
  kernel->function = kernel->loaded->function();
  kernel->resolved_spec = to_string(kernel->prepared.config.spec);
  kernel->sm_count = context->sm_count();
  *out = std::move(kernel);
  return {};
}

flashjit_kernel_info_t describe(const flashjit_kernel_s& k) {
  const KernelConfig& c = k.config();
  const CompiledKernel& compiled = *k.prepared.compiled;
  flashjit_kernel_info_t info{};
  info.device = k.context->device();
  info.spec = k.resolved_spec.c_str();
  info.kernel_name = c.kernel_name.c_str();
  info.cache_key = k.prepared.key.c_str();
  info.dtype = c.spec.dtype == DType::kFp16 ? FLASHJIT_DTYPE_FP16 : FLASHJIT_DTYPE_BF16;
  info.head_dim = c.spec.head_dim;
  info.causal = c.spec.causal ? 1 : 0;
  info.block_m = c.spec.block_m;
  info.block_n = c.spec.block_n;
  info.threads_per_block = c.threads;
  info.registers = k.loaded->num_regs();
  info.local_bytes = k.loaded->local_size_bytes();
  info.spill_bytes = compiled.report.spill_bytes();
  info.dynamic_smem_bytes = c.smem_bytes;
  info.static_smem_bytes = compiled.report.static_smem_bytes;
  info.source = source_of(k.prepared.source);
  return info;
}

}  // namespace

extern "C" {

flashjit_status_t flashjit_kernel_get(flashjit_context_t context, const char* spec, flashjit_kernel_t* kernel) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!kernel) return null_argument("kernel");
    *kernel = nullptr;
    if (!context) return null_argument("context");
    if (!spec) return null_argument("spec");
    std::unique_ptr<flashjit_kernel_s> made;
    if (ApiStatus st = get_kernel(context->state, spec, &made); !st.ok()) return st;
    *kernel = made.release();
    return {};
  });
}

flashjit_status_t flashjit_kernel_release(flashjit_kernel_t kernel) {
  return guarded(__func__, [&]() -> ApiStatus {
    delete kernel;
    return {};
  });
}

flashjit_status_t flashjit_kernel_describe(flashjit_kernel_t kernel, flashjit_kernel_info_t* info) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!kernel) return null_argument("kernel");
    if (!info) return null_argument("info");
    return write_output_struct("info", "flashjit_kernel_info_t", info, kKernelInfoMinSize, describe(*kernel));
  });
}

}  // extern "C"
