/* flashjit from C: the call an inference engine makes every step, on the shape vLLM passes.
 *
 * One launch over a mixed batch: two decode sequences (one query each), a speculative one (four
 * queries), an empty slot and a prefill chunk of 200 queries, packed as Q [total_q, heads_q, dim]
 * (cu_seqlens_q), against a paged KV cache [num_pages, page_size, heads_kv, dim] through a block
 * table, with seqused_k keys per sequence. The CPU part checks the arguments and the metadata with
 * host copies (no GPU needed); where a Hopper GPU is present, the GPU part uploads the metadata,
 * launches once with Q = K = 0 and V = 1 (each row that sees a key must give 1, the rest 0) and
 * checks every row.
 *
 *   cc -std=c99 engine_step.c $(pkg-config --cflags --libs flashjit) -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <flashjit/flashjit.h>

static const char* kSpec = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1";
enum { kBatch = 5, kHeadsQ = 32, kHeadsKv = 8, kDim = 128, kPageSize = 16, kPagesPerSeq = 64, kPages = 160 };
enum { kMaxSeqlenQ = 256, kMaxSeqlenK = kPageSize * kPagesPerSeq, kTotalQ = 256 };

/* The step's metadata, as the engine's scheduler builds it (host copies). */
static const int32_t kCuSeqlensQ[kBatch + 1] = {0, 1, 2, 6, 6, 206};
static const int32_t kSequsedK[kBatch] = {700, 33, 517, 0, 1000};
static int32_t block_table[kBatch * kPagesPerSeq];

static void fill_block_table(void) {
  int b, i, next = 0;
  for (b = 0; b < kBatch; ++b)
    for (i = 0; i < kPagesPerSeq; ++i)
      block_table[b * kPagesPerSeq + i] = i < (kSequsedK[b] + kPageSize - 1) / kPageSize ? (next++ * 37) % kPages : -1;
}

/* The arguments; the metadata pointers are host or device addresses as the caller passes them. */
static flashjit_attention_args_t step_args(uint64_t q, uint64_t kv, uint64_t o, uint64_t cu_seqlens_q, uint64_t seqused_k,
                                           uint64_t table) {
  flashjit_attention_args_t a;
  const int64_t page_elems = (int64_t)kPageSize * kHeadsKv * kDim;
  flashjit_attention_args_init(&a);
  a.q = q;
  a.o = o;
  a.k = kv;                              /* K and V pages in one pool: [pages][2][page_size][heads][dim] */
  a.v = kv + (uint64_t)page_elems * 2;   /* V one page after K (bytes) */
  a.batch = kBatch;
  a.seqlen_q = kMaxSeqlenQ;              /* upper bounds: a graph captured with them replays any step within */
  a.seqlen_k = kMaxSeqlenK;
  a.heads_q = kHeadsQ;
  a.heads_kv = kHeadsKv;
  a.q_strides.row = a.o_strides.row = kHeadsQ * kDim;
  a.q_strides.head = a.o_strides.head = kDim;
  a.k_strides.batch = a.v_strides.batch = 2 * page_elems;  /* the page stride */
  a.k_strides.row = a.v_strides.row = kHeadsKv * kDim;
  a.k_strides.head = a.v_strides.head = kDim;
  a.cu_seqlens_q = cu_seqlens_q;
  a.total_q = kTotalQ;
  a.seqused_k = seqused_k;
  a.block_table = table;
  a.block_table_batch_stride = kPagesPerSeq;
  a.page_size = kPageSize;
  a.num_pages = kPages;
  return a;
}

static int fail(const char* what, flashjit_status_t status) {
  fprintf(stderr, "%s: %s: %s\n", what, flashjit_status_string(status), flashjit_last_error_message());
  return 1;
}

/* The CPU part: the arguments and the metadata against the contract (no GPU). */
static int cpu_part(void) {
  flashjit_attention_args_t a = step_args(0x10000, 0x20000, 0x30000, (uint64_t)(uintptr_t)kCuSeqlensQ,
                                          (uint64_t)(uintptr_t)kSequsedK, (uint64_t)(uintptr_t)block_table);
  flashjit_status_t status;
  if ((status = flashjit_validate_attention_args(kSpec, &a)) != FLASHJIT_SUCCESS) return fail("arguments", status);
  if ((status = flashjit_check_engine_metadata_host(kSpec, &a)) != FLASHJIT_SUCCESS) return fail("metadata", status);
  printf("step: %d sequences, %d query rows, arguments and metadata valid\n", kBatch, kCuSeqlensQ[kBatch]);
  /* A page index outside the pool is named by the check (the kernel would read zeros there). */
  block_table[3] = kPages;
  if (flashjit_check_engine_metadata_host(kSpec, &a) != FLASHJIT_ERROR_INVALID_ARGUMENT) return 1;
  printf("bad page: %s\n", flashjit_last_error_message());
  fill_block_table();
  return 0;
}

struct cuda {
  int (*ctx_set_current)(void* context);
  int (*ctx_synchronize)(void);
  int (*mem_alloc)(unsigned long long* ptr, size_t bytes);
  int (*mem_free)(unsigned long long ptr);
  int (*memset_d16)(unsigned long long ptr, unsigned short value, size_t count);
  int (*memcpy_htod)(unsigned long long dst, const void* src, size_t bytes);
  int (*memcpy_dtoh)(void* dst, unsigned long long src, size_t bytes);
};

static int load_cuda(struct cuda* cu) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  *(void**)&cu->ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
  *(void**)&cu->ctx_synchronize = dlsym(lib, "cuCtxSynchronize");
  *(void**)&cu->mem_alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void**)&cu->mem_free = dlsym(lib, "cuMemFree_v2");
  *(void**)&cu->memset_d16 = dlsym(lib, "cuMemsetD16_v2");
  *(void**)&cu->memcpy_htod = dlsym(lib, "cuMemcpyHtoD_v2");
  *(void**)&cu->memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  return cu->ctx_set_current && cu->ctx_synchronize && cu->mem_alloc && cu->mem_free && cu->memset_d16 && cu->memcpy_htod &&
         cu->memcpy_dtoh;
}

/* Row r of a sequence with sq queries and sk keys sees a key when sk > 0 and r + sk - sq >= 0. */
static int sees_a_key(int row, int sq, int sk) { return sk > 0 && row + sk - sq >= 0; }

static int gpu_part(void) {
  struct cuda cu;
  flashjit_context_t context = NULL;
  flashjit_kernel_t kernel = NULL;
  flashjit_context_info_t info = {0};
  flashjit_attention_args_t a;
  unsigned long long q = 0, kv = 0, o = 0, meta = 0;
  const size_t q_elems = (size_t)kTotalQ * kHeadsQ * kDim, page_elems = (size_t)kPageSize * kHeadsKv * kDim;
  unsigned short* host = NULL;
  size_t wrong = 0;
  int b, row, h, c;
  flashjit_status_t status = flashjit_context_create(NULL, &context);
  if (status == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || status == FLASHJIT_ERROR_UNSUPPORTED_DEVICE) {
    printf("no GPU: %s\n", flashjit_last_error_message());
    return 0;
  }
  if (status != FLASHJIT_SUCCESS) return fail("context", status);
  /* Before the step loop (and before any graph capture): compile or load the kernel. */
  if ((status = flashjit_kernel_get(context, kSpec, &kernel)) != FLASHJIT_SUCCESS) return fail("kernel", status);
  if (!load_cuda(&cu)) return fail("libcuda.so.1", FLASHJIT_ERROR_DRIVER_UNAVAILABLE);
  info.struct_size = sizeof(info);
  flashjit_context_describe(context, &info);
  cu.ctx_set_current(info.cu_context);
  if (cu.mem_alloc(&q, q_elems * 2) || cu.mem_alloc(&o, q_elems * 2) || cu.mem_alloc(&kv, 2 * kPages * page_elems * 2) ||
      cu.mem_alloc(&meta, sizeof(kCuSeqlensQ) + sizeof(kSequsedK) + sizeof(block_table))) {
    return fail("cuMemAlloc", FLASHJIT_ERROR_DRIVER);
  }
  cu.memset_d16(q, 0, q_elems);
  for (b = 0; b < kPages; ++b) {  /* K pages 0, V pages bf16 1.0 */
    cu.memset_d16(kv + (unsigned long long)(2 * b) * page_elems * 2, 0, page_elems);
    cu.memset_d16(kv + (unsigned long long)(2 * b + 1) * page_elems * 2, 0x3F80, page_elems);
  }
  cu.memset_d16(o, 0xFFFF, q_elems);  /* NaN until written */
  cu.memcpy_htod(meta, kCuSeqlensQ, sizeof(kCuSeqlensQ));
  cu.memcpy_htod(meta + sizeof(kCuSeqlensQ), kSequsedK, sizeof(kSequsedK));
  cu.memcpy_htod(meta + sizeof(kCuSeqlensQ) + sizeof(kSequsedK), block_table, sizeof(block_table));
  a = step_args(q, kv, o, meta, meta + sizeof(kCuSeqlensQ), meta + sizeof(kCuSeqlensQ) + sizeof(kSequsedK));
  if ((status = flashjit_check_engine_metadata(kernel, &a)) != FLASHJIT_SUCCESS) return fail("metadata", status);
  if ((status = flashjit_attention_forward(kernel, &a, NULL)) != FLASHJIT_SUCCESS) return fail("forward", status);
  if (cu.ctx_synchronize()) return fail("the kernel", FLASHJIT_ERROR_DRIVER);
  host = (unsigned short*)malloc(q_elems * 2);
  cu.memcpy_dtoh(host, o, q_elems * 2);
  for (b = 0; b < kBatch; ++b) {
    const int sq = kCuSeqlensQ[b + 1] - kCuSeqlensQ[b];
    for (row = 0; row < sq; ++row)
      for (h = 0; h < kHeadsQ; ++h)
        for (c = 0; c < kDim; ++c) {
          const unsigned short want = sees_a_key(row, sq, kSequsedK[b]) ? 0x3F80 : 0;
          wrong += host[((size_t)(kCuSeqlensQ[b] + row) * kHeadsQ + h) * kDim + c] != want;
        }
  }
  for (row = kCuSeqlensQ[kBatch]; row < kTotalQ; ++row)  /* rows past the last sequence: untouched */
    for (c = 0; c < kHeadsQ * kDim; ++c) wrong += host[(size_t)row * kHeadsQ * kDim + c] != 0xFFFF;
  printf("step: %zu of %zu outputs wrong\n", wrong, q_elems);
  free(host);
  cu.mem_free(q);
  cu.mem_free(o);
  cu.mem_free(kv);
  cu.mem_free(meta);
  flashjit_kernel_release(kernel);
  flashjit_context_destroy(context);
  return wrong == 0 ? 0 : 1;
}

int main(void) {
  int rc;
  fill_block_table();
  rc = cpu_part();
  if (rc == 0) rc = gpu_part();
  printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
