// flashjit from C++ (flashjit/flashjit.hpp, header-only over the C API): version and ABI check,
// supported(), a compile-only prewarm and a cache bundle round trip (no GPU needed), then, where a
// Hopper GPU is present, one attention forward on device buffers.
//
// Device memory comes from the CUDA driver loaded with dlopen (no CUDA library is linked), so this
// builds and runs anywhere; without a GPU it prints "no GPU: ..." after the CPU part and exits 0.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <flashjit/flashjit.hpp>

namespace {

const std::string kSpec = "dtype=bf16,head_dim=64";
constexpr int kBatch = 2, kSeqlen = 128, kHeads = 4, kHeadDim = 64;

int fail(const std::string& what, const flashjit::Error& error) {
  std::fprintf(stderr, "%s: %s: %s\n", what.c_str(), error.code_name(), error.message().c_str());
  return 1;
}

// The CUDA driver functions used below (signatures spelled out: no cuda.h needed).
struct Cuda {
  int (*ctx_set_current)(void*) = nullptr;
  int (*ctx_synchronize)() = nullptr;
  int (*mem_alloc)(unsigned long long*, size_t) = nullptr;
  int (*mem_free)(unsigned long long) = nullptr;
  int (*memset_d16)(unsigned long long, unsigned short, size_t) = nullptr;
  int (*memcpy_dtoh)(void*, unsigned long long, size_t) = nullptr;

  bool load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    auto get = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
    get(ctx_set_current, "cuCtxSetCurrent");
    get(ctx_synchronize, "cuCtxSynchronize");
    get(mem_alloc, "cuMemAlloc_v2");
    get(mem_free, "cuMemFree_v2");
    get(memset_d16, "cuMemsetD16_v2");
    get(memcpy_dtoh, "cuMemcpyDtoH_v2");
    return ctx_set_current && ctx_synchronize && mem_alloc && mem_free && memset_d16 && memcpy_dtoh;
  }
};

int cpu_part() {
  const uint32_t v = flashjit::version();
  std::printf("flashjit %u.%u.%u\n", v / 10000, v / 100 % 100, v % 100);
  if (auto abi = flashjit::check_abi(); !abi) return fail("ABI", abi.error());
  std::printf("supported(%s): %s\n", kSpec.c_str(), flashjit::supported(kSpec) ? "yes" : "no");
  if (auto why_not = flashjit::supported("dtype=bf16,head_dim=300"); !why_not) {
    std::printf("supported(dtype=bf16,head_dim=300): no, %s\n", why_not.error().message().c_str());
  }
  // A compile-only context: prewarm, export a bundle, import it into a memory-only context.
  auto compile_only = flashjit::Context::create(flashjit::ContextOptions().device(FLASHJIT_DEVICE_NONE));
  if (!compile_only) return fail("compile-only context", compile_only.error());
  if (auto st = compile_only->prewarm({kSpec}); !st) return fail("prewarm", st.error());
  const char* tmp = std::getenv("TMPDIR");
  const std::string bundle = std::string(tmp ? tmp : "/tmp") + "/flashjit_example_" + std::to_string(getpid()) + ".fjbundle";
  if (auto st = compile_only->export_cache({kSpec}, bundle); !st) return fail("export", st.error());
  auto memory = flashjit::Context::create(flashjit::ContextOptions().device(FLASHJIT_DEVICE_NONE).memory_only().cache_only());
  if (!memory) return fail("memory-only context", memory.error());
  auto imported = memory->import_cache(bundle);
  std::remove(bundle.c_str());
  if (!imported) return fail("import", imported.error());
  std::printf("prewarm, export and import of %s: %zu kernel(s) in the bundle\n", kSpec.c_str(), *imported);
  return 0;
}

// Q = K = 0 and V = 1: every output element must be 1.
int gpu_part() {
  auto context = flashjit::Context::create();  // device 0, its primary context
  if (!context) {
    const flashjit_status_t code = context.error().code();
    if (code == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || code == FLASHJIT_ERROR_UNSUPPORTED_DEVICE) {
      std::printf("no GPU: %s\n", context.error().message().c_str());
      return 0;
    }
    return fail("context", context.error());
  }
  auto kernel = context->kernel(kSpec);
  if (!kernel) return fail("kernel", kernel.error());
  auto info = kernel->describe();
  if (!info) return fail("describe", info.error());
  std::printf("kernel: %s (%d registers, %d bytes shared memory)\n", info->spec.c_str(), info->registers,
              info->dynamic_smem_bytes);

  Cuda cu;
  if (!cu.load()) return fail("libcuda.so.1", flashjit::Error(FLASHJIT_ERROR_DRIVER_UNAVAILABLE, "cannot load"));
  cu.ctx_set_current(context->describe()->cu_context);  // allocate in the kernel's CUDA context
  const size_t elements = size_t(kBatch) * kSeqlen * kHeads * kHeadDim;
  unsigned long long qkv = 0, o = 0;
  if (cu.mem_alloc(&qkv, 3 * elements * 2) || cu.mem_alloc(&o, elements * 2)) {
    return fail("cuMemAlloc", flashjit::Error(FLASHJIT_ERROR_DRIVER, "failed"));
  }
  cu.memset_d16(qkv, 0, 2 * elements);
  cu.memset_d16(qkv + 4 * elements, 0x3F80, elements);  // bf16 1.0
  cu.memset_d16(o, 0xFFFF, elements);

  const auto args = flashjit::AttentionArgs::contiguous(qkv, qkv + 2 * elements, qkv + 4 * elements, o, kBatch, kSeqlen,
                                                        kSeqlen, kHeads, kHeads, kHeadDim);
  if (auto st = kernel->forward(args, nullptr); !st) return fail("forward", st.error());
  if (cu.ctx_synchronize()) return fail("the kernel", flashjit::Error(FLASHJIT_ERROR_DRIVER, "failed"));
  std::vector<unsigned short> host(elements);
  cu.memcpy_dtoh(host.data(), o, elements * 2);
  size_t wrong = 0;
  for (unsigned short bits : host) wrong += bits != 0x3F80;
  std::printf("forward: %zu of %zu outputs wrong\n", wrong, elements);
  cu.mem_free(qkv);
  cu.mem_free(o);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main() {
  int rc = cpu_part();
  if (rc == 0) rc = gpu_part();
  std::printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
