// Exported: flashjit_kernel_get (the one call that compiles or loads), _release, _describe.
#include "api/api_status.hpp"
#include "api/kernel.hpp"
#include "api/struct_size.hpp"
#include "spec/attention_spec.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

static_assert(sizeof(flashjit_kernel_info_t) == 112);
constexpr uint32_t kKernelInfoMinSize = 80;

flashjit_kernel_source_t source_of(CacheLookup::Source source) {
  switch (source) {
    case CacheLookup::Source::kMemory: return FLASHJIT_KERNEL_FROM_MEMORY;
    case CacheLookup::Source::kDisk: return FLASHJIT_KERNEL_FROM_DISK;
    case CacheLookup::Source::kCompiled: return FLASHJIT_KERNEL_COMPILED;
  }
  return FLASHJIT_KERNEL_FROM_MEMORY;
}

// Loads one prepared kernel into the context's CUDA context (once per context; later calls share
// the module).
ApiStatus load_variant(ContextState& context, PreparedKernel prepared, KernelVariant* out) {
  auto loaded = context.engine().load(*context.api(), prepared, context.cu_context());
  if (!loaded) return loaded.take_error();
  out->resolved_spec = to_string(prepared.config.spec);
  out->prepared = std::move(prepared);
  out->loaded = std::move(*loaded);
  out->function = out->loaded->function();
  out->combine = out->loaded->more(0);
  out->merge = out->loaded->more(1);
  return {};
}

ApiStatus get_kernel(const std::shared_ptr<ContextState>& context, const char* spec_text,
                     std::unique_ptr<flashjit_kernel_s>* out) {
  if (!context->has_device()) {
    return invalid_argument("context", "context: this context has no device (FLASHJIT_DEVICE_NONE); it can prewarm, export "
                                       "and import kernels but not load them");
  }
  // 1. Spec -> its kernels (and a long-sequence one): memory, disk, or (policy permitting) NVRTC.
  auto spec = parse_spec(spec_text);
  if (!spec) return spec.take_error();
  auto family = context->engine().prepare_family(*spec, context->policy());
  if (!family) return family.take_error();
  // 2. Each loaded into the context's CUDA context.
  auto kernel = std::make_unique<flashjit_kernel_s>();
  if (ApiStatus st = load_variant(*context, std::move(family->main), &kernel->main); !st.ok()) return st;
  if (family->long_sequences) {
    kernel->long_sequences = std::make_unique<KernelVariant>();
    if (ApiStatus st = load_variant(*context, std::move(*family->long_sequences), kernel->long_sequences.get()); !st.ok()) return st;
    kernel->long_rule = family->long_rule;
  }
  // 3. The handle, with everything the launch path reads resolved now.
  kernel->context = context;
  kernel->api = context->api();
  kernel->cu_context = context->cu_context();
  kernel->sm_count = context->sm_count();
  *out = std::move(kernel);
  return {};
}

flashjit_kernel_info_t describe(const flashjit_kernel_s& k) {
  const KernelVariant& main = k.main;
  const KernelConfig& c = main.config();
  const CompiledKernel& compiled = *main.prepared.compiled;
  flashjit_kernel_info_t info{};
  info.device = k.context->device();
  info.spec = main.resolved_spec.c_str();
  info.kernel_name = c.kernel_name.c_str();
  info.cache_key = main.prepared.key.c_str();
  info.dtype = c.spec.dtype == DType::kFp16 ? FLASHJIT_DTYPE_FP16 : c.spec.dtype == DType::kBf16 ? FLASHJIT_DTYPE_BF16 : FLASHJIT_DTYPE_E4M3;
  info.head_dim = c.spec.head_dim;
  info.causal = c.spec.causal ? 1 : 0;
  info.block_m = c.spec.block_m;
  info.block_n = c.spec.block_n;
  info.threads_per_block = c.threads;
  info.registers = main.loaded->num_regs();
  info.local_bytes = main.loaded->local_size_bytes();
  info.spill_bytes = compiled.report.spill_bytes();
  info.dynamic_smem_bytes = c.smem_bytes;
  info.static_smem_bytes = compiled.report.static_smem_bytes;
  info.source = source_of(main.prepared.source);
  info.long_seqlen_spec = k.long_sequences ? k.long_sequences->resolved_spec.c_str() : nullptr;
  if (k.long_sequences) {
    info.long_seqlen_min = k.long_rule.min_seqlen;
    info.long_seqlen_min_uneven = k.long_rule.uneven_min_seqlen;
    info.long_uneven_use_percent = k.long_rule.uneven_use_percent;
  }
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
