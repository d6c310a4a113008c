/* flashjit from C: version and ABI check, flashjit_supported, a compile-only prewarm (no GPU
 * needed), then, where a Hopper GPU is present, one attention forward on device buffers.
 *
 * The program links libflashjit only. The few CUDA driver functions it needs for device memory are
 * taken from libcuda.so.1 with dlsym at run time, as flashjit itself does, so it builds and runs on
 * machines without CUDA (it then prints "no GPU: ..." after the CPU part and exits 0).
 *
 *   cc -std=c99 main.c $(pkg-config --cflags --libs flashjit) -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <flashjit/flashjit.h>

static const char* kSpec = "dtype=bf16,head_dim=64";
enum { kBatch = 2, kSeqlen = 128, kHeads = 4, kHeadDim = 64 };

/* The CUDA driver functions used below, with their C signatures spelled out (no cuda.h needed). */
struct cuda {
  int (*ctx_set_current)(void* context);
  int (*ctx_synchronize)(void);
  int (*mem_alloc)(unsigned long long* ptr, size_t bytes);
  int (*mem_free)(unsigned long long ptr);
  int (*memset_d16)(unsigned long long ptr, unsigned short value, size_t count);
  int (*memcpy_dtoh)(void* dst, unsigned long long src, size_t bytes);
};

static int load_cuda(struct cuda* cu) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  /* NOTES: ISO C has no cast from void* to a function pointer; copying the bytes is the portable way. */
  *(void**)&cu->ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
  *(void**)&cu->ctx_synchronize = dlsym(lib, "cuCtxSynchronize");
  *(void**)&cu->mem_alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void**)&cu->mem_free = dlsym(lib, "cuMemFree_v2");
  *(void**)&cu->memset_d16 = dlsym(lib, "cuMemsetD16_v2");
  *(void**)&cu->memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  return cu->ctx_set_current && cu->ctx_synchronize && cu->mem_alloc && cu->mem_free && cu->memset_d16 && cu->memcpy_dtoh;
}

static int fail(const char* what, flashjit_status_t status) {
  fprintf(stderr, "%s: %s: %s\n", what, flashjit_status_string(status), flashjit_last_error_message());
  return 1;
}

/* The CPU part: works on any machine. */
static int cpu_part(void) {
  char reason[256];
  flashjit_context_options_t options;
  flashjit_context_t compile_only = NULL;
  const char* specs[1];
  flashjit_status_t status;
  const unsigned version = flashjit_get_version();

  printf("flashjit %u.%u.%u (ABI %u)\n", version / 10000, version / 100 % 100, version % 100, flashjit_abi_version());
  if ((status = flashjit_check_abi(FLASHJIT_ABI_VERSION)) != FLASHJIT_SUCCESS) return fail("ABI", status);
  printf("supported(%s): %s\n", kSpec, flashjit_supported(kSpec, reason, sizeof(reason)) == FLASHJIT_SUCCESS ? "yes" : reason);
  if (flashjit_supported("dtype=bf16,head_dim=300", reason, sizeof(reason)) != FLASHJIT_ERROR_INVALID_SPEC) return 1;
  printf("supported(dtype=bf16,head_dim=300): no, %s\n", reason);

  flashjit_context_options_init(&options);
  options.device = FLASHJIT_DEVICE_NONE;
  if ((status = flashjit_context_create(&options, &compile_only)) != FLASHJIT_SUCCESS) return fail("compile-only context", status);
  specs[0] = kSpec;
  if ((status = flashjit_prewarm(compile_only, specs, 1)) != FLASHJIT_SUCCESS) return fail("prewarm", status);
  printf("prewarm(%s): in the cache\n", kSpec);
  flashjit_context_destroy(compile_only);
  return 0;
}

/* The GPU part: one forward with Q = K = 0 and V = 1, so every output element must be 1. */
static int gpu_part(void) {
  struct cuda cu;
  flashjit_context_t context = NULL;
  flashjit_kernel_t kernel = NULL;
  flashjit_context_info_t context_info = {0};
  flashjit_kernel_info_t kernel_info = {0};
  flashjit_attention_args_t args;
  unsigned long long qkv = 0, o = 0;
  const size_t elements = (size_t)kBatch * kSeqlen * kHeads * kHeadDim;
  unsigned short* host = NULL;
  size_t i, wrong = 0;
  flashjit_status_t status = flashjit_context_create(NULL, &context); /* device 0, its primary context */

  if (status == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || status == FLASHJIT_ERROR_UNSUPPORTED_DEVICE) {
    printf("no GPU: %s\n", flashjit_last_error_message());
    return 0;
  }
  if (status != FLASHJIT_SUCCESS) return fail("context", status);
  if ((status = flashjit_kernel_get(context, kSpec, &kernel)) != FLASHJIT_SUCCESS) return fail("kernel", status);
  kernel_info.struct_size = sizeof(kernel_info);
  flashjit_kernel_describe(kernel, &kernel_info);
  printf("kernel: %s (%d registers, %d bytes shared memory)\n", kernel_info.spec, kernel_info.registers,
         kernel_info.dynamic_smem_bytes);

  if (!load_cuda(&cu)) return fail("libcuda.so.1", FLASHJIT_ERROR_DRIVER_UNAVAILABLE);
  context_info.struct_size = sizeof(context_info);
  flashjit_context_describe(context, &context_info);
  cu.ctx_set_current(context_info.cu_context); /* allocate in the kernel's CUDA context */
  if (cu.mem_alloc(&qkv, 3 * elements * 2) || cu.mem_alloc(&o, elements * 2)) return fail("cuMemAlloc", FLASHJIT_ERROR_DRIVER);
  cu.memset_d16(qkv, 0, 2 * elements);                   /* Q and K: 0 */
  cu.memset_d16(qkv + 4 * elements, 0x3F80, elements);   /* V: bf16 1.0 */
  cu.memset_d16(o, 0xFFFF, elements);                    /* O: NaN until written */

  flashjit_attention_args_init(&args);
  args.q = qkv;
  args.k = qkv + 2 * elements;
  args.v = qkv + 4 * elements;
  args.o = o;
  args.batch = kBatch;
  args.seqlen_q = args.seqlen_k = kSeqlen;
  args.heads_q = args.heads_kv = kHeads;
  args.q_strides = args.k_strides = args.v_strides = args.o_strides = flashjit_contiguous_bshd(kSeqlen, kHeads, kHeadDim);
  /* NULL stream: the legacy default stream of the current context, which is the kernel's. */
  if ((status = flashjit_attention_forward(kernel, &args, NULL)) != FLASHJIT_SUCCESS) return fail("forward", status);
  if (cu.ctx_synchronize()) return fail("the kernel", FLASHJIT_ERROR_DRIVER);

  host = (unsigned short*)malloc(elements * 2);
  cu.memcpy_dtoh(host, o, elements * 2);
  for (i = 0; i < elements; ++i) wrong += host[i] != 0x3F80;
  printf("forward: %zu of %zu outputs wrong\n", wrong, elements);
  free(host);
  cu.mem_free(qkv);
  cu.mem_free(o);
  flashjit_kernel_release(kernel);
  flashjit_context_destroy(context);
  return wrong == 0 ? 0 : 1;
}

int main(void) {
  int rc = cpu_part();
  if (rc == 0) rc = gpu_part();
  printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
