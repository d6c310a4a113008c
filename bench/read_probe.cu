// read_probe.cu: how fast one SM's stream of K/V blocks can come from HBM by TMA, by cp.async and by
// plain loads, on the decode kernel's access pattern and nothing else (issue 24: the decode kernel
// reads at 96-100 % of torch.sum's rate, cuDNN's cp.async kernel at 105-108 %; two CTAs an SM,
// deeper rings and L2 prefetch did not move ours, bench/NOTES.md versions 59-61). If TMA alone tops
// out where our kernel does while cp.async reaches cuDNN's rate, the gap is the load path.
//
// K and V: [rows][heads][128] bf16 each (the NHD cache of decode_peers.py's cells, 2 KB a row at 8
// heads). CTA c streams head c % heads over rows [(c / heads) x R, + R), R = rows x heads / ctas, in
// blocks of --block rows through a ring of --stages stages (a stage = the block's K and V), as the
// decode kernel's producer does; one consumer warpgroup waits for each stage, touches it and frees it.
//   tma      one thread issues the block's 64-column boxes (2 for K, 2 for V), complete_tx barriers
//   cpasync  128 producer threads issue 16-byte cp.async.cg each (the same bytes, the same
//            swizzle-free layout), then cp.async.mbarrier.arrive.noinc
//   ldg      every thread of the grid sums 16-byte loads of both tensors (a torch.sum)
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -o read_probe bench/read_probe.cu
// Run:   ./read_probe [--gb-per-tensor 1] [--ctas 128] [--stages 3] [--block 128] [--reps 20]
//        prints GB/s for each mode and stage count (the table is the last lines).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../templates/ptx.cuh"

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

constexpr int kDim = 128;             // head dim (bf16): a row of one head is 256 bytes
constexpr int kMaxStages = 6;

struct ProbeArgs {
  TmaDesc k, v;
  const uint16_t* k_ptr;
  const uint16_t* v_ptr;
  long long rows;      // rows of each tensor
  int heads;           // heads a row
  long long rows_per_cta;
  int block;           // rows a block
  int stages;
  float* sink;         // one float a CTA (keeps the consumers' reads alive)
};

__device__ __forceinline__ uint32_t block_bytes(const ProbeArgs& a) { return (uint32_t)a.block * kDim * 2; }

// Shared memory: [stage][K block | V block], then full[stages], empty[stages].
struct Ring {
  uint32_t base, bars;
  __device__ uint32_t k(int s, const ProbeArgs& a) const { return base + 2u * s * block_bytes(a); }
  __device__ uint32_t v(int s, const ProbeArgs& a) const { return k(s, a) + block_bytes(a); }
  __device__ uint32_t full(int s) const { return bars + 8u * s; }
  __device__ uint32_t empty(int s) const { return bars + 8u * (kMaxStages + s); }
};

// 16 bytes global -> shared through L2 (.cg) with a 256-byte L2 fetch, as the TMA maps' L2 promotion.
__device__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
// An arrival on bar once this thread's earlier cp.async copies have landed (.noinc: the barrier is
// initialised with one arrival per copying thread).
__device__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}

template <bool kTma>
__global__ void __launch_bounds__(256, 1) stream_kernel(const __grid_constant__ ProbeArgs a) {
  extern __shared__ __align__(1024) unsigned char smem[];
  Ring ring;
  ring.base = (smem_u32(smem) + 1023u) & ~1023u;
  ring.bars = ring.base + 2u * a.stages * block_bytes(a);
  const int tid = threadIdx.x;
  const int head = blockIdx.x % a.heads;
  const long long row0 = (long long)(blockIdx.x / a.heads) * a.rows_per_cta;
  const int blocks = (int)(a.rows_per_cta / a.block);
  if (tid == 0) {
    for (int s = 0; s < a.stages; ++s) {
      mbar_init(ring.full(s), kTma ? 1 : 128);
      mbar_init(ring.empty(s), 1);
    }
    fence_mbar_init();
  }
  __syncthreads();
  if (tid < 128) {  // producer warpgroup (one thread of it with TMA)
    if (kTma && tid != 0) return;
    for (int b = 0; b < blocks; ++b) {
      const int s = b % a.stages;
      const uint32_t parity = (uint32_t)((b / a.stages) & 1);
      if (b >= a.stages) mbar_wait(ring.empty(s), parity ^ 1);
      const long long row = row0 + (long long)b * a.block;
      if constexpr (kTma) {
        mbar_arrive_expect_tx(ring.full(s), 2 * block_bytes(a));
        for (int c = 0; c < kDim / 64; ++c) {  // {column, row, head, -}: the decode kernel's boxes
          tma_load_4d(ring.k(s, a) + c * a.block * 128, &a.k, ring.full(s), c * 64, (int)row, head, 0);
          tma_load_4d(ring.v(s, a) + c * a.block * 128, &a.v, ring.full(s), c * 64, (int)row, head, 0);
        }
      } else {
        // 16-byte pieces: piece i of a block is row i / 16, bytes 16 (i % 16); a warp covers two rows.
        const int pieces = a.block * (kDim * 2 / 16);
        for (int i = tid; i < pieces; i += 128) {
          const long long at = ((row + i / 16) * a.heads + head) * kDim + (i % 16) * 8;
          cp_async_16(ring.k(s, a) + 16u * i, a.k_ptr + at);
          cp_async_16(ring.v(s, a) + 16u * i, a.v_ptr + at);
        }
        cp_async_arrive_noinc(ring.full(s));
      }
    }
    if constexpr (!kTma) asm volatile("cp.async.wait_all;" ::: "memory");  // not exit with copies in flight
  } else {  // consumer warpgroup: wait, touch one word a thread, free the stage
    const int t = tid - 128;
    float acc = 0.f;
    for (int b = 0; b < blocks; ++b) {
      const int s = b % a.stages;
      mbar_wait(ring.full(s), (uint32_t)((b / a.stages) & 1));
      uint32_t w;
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(w) : "r"(ring.k(s, a) + 4u * t) : "memory");
      acc += __uint_as_float(w << 16);
      asm volatile("bar.sync 1, 128;" ::: "memory");  // every consumer read the stage
      if (t == 0) mbar_arrive(ring.empty(s));
    }
    if (t == 0) a.sink[blockIdx.x] = acc;
  }
}

__global__ void sum_kernel(const uint4* k, const uint4* v, long long n16, float* sink) {
  float acc = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
    const uint4 a = __ldg(k + i), b = __ldg(v + i);
    acc += __uint_as_float(a.x << 16) + __uint_as_float(a.y << 16) + __uint_as_float(a.z << 16) + __uint_as_float(a.w << 16);
    acc += __uint_as_float(b.x << 16) + __uint_as_float(b.y << 16) + __uint_as_float(b.z << 16) + __uint_as_float(b.w << 16);
  }
  if (acc == 12345.f) sink[0] = acc;  // never: keeps the loads
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                 const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

TmaDesc encode(EncodeTiled fn, const void* base, long long rows, int heads, int block) {
  CUtensorMap map;
  // {column, row, head, 1}: the decode kernel's dims (row stride heads x 256 B, head stride 256 B).
  const cuuint64_t dims[4] = {kDim, (cuuint64_t)rows, (cuuint64_t)heads, 1};
  const cuuint64_t strides[3] = {(cuuint64_t)heads * kDim * 2, kDim * 2, (cuuint64_t)rows * heads * kDim * 2};
  const cuuint32_t box[4] = {64, (cuuint32_t)block, 1, 1};
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  CUresult r = fn(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims, strides, box, elem,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
    std::exit(1);
  }
  TmaDesc d;
  std::memcpy(&d, &map, sizeof(d));
  return d;
}

int main(int argc, char** argv) {
  double gb = 1.0;
  int ctas = 128, block = 128, reps = 20, heads = 8;
  std::vector<int> stage_list = {2, 3, 4};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--gb-per-tensor") gb = std::atof(argv[i + 1]);
    else if (k == "--ctas") ctas = std::atoi(argv[i + 1]);
    else if (k == "--block") block = std::atoi(argv[i + 1]);
    else if (k == "--reps") reps = std::atoi(argv[i + 1]);
    else if (k == "--stages") stage_list = {std::atoi(argv[i + 1])};
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (ctas % heads != 0 || block % 16 != 0 || block > 256) { std::fprintf(stderr, "ctas must be a multiple of 8, block a multiple of 16 up to 256\n"); return 2; }
  const long long row_bytes = (long long)heads * kDim * 2;
  const long long per_cta = (long long)(gb * 1e9 / row_bytes) / (ctas / heads) / block * block;
  const long long rows = per_cta * (ctas / heads);
  const size_t bytes = (size_t)rows * row_bytes;
  uint16_t *k = nullptr, *v = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&k, bytes));
  CHECK(cudaMalloc(&v, bytes));
  CHECK(cudaMalloc(&sink, 4096 * sizeof(float)));
  CHECK(cudaMemset(k, 0x3c, bytes));
  CHECK(cudaMemset(v, 0x3c, bytes));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr) { std::fprintf(stderr, "no cuTensorMapEncodeTiled\n"); return 1; }
  ProbeArgs a{};
  a.k = encode(reinterpret_cast<EncodeTiled>(fn), k, rows, heads, block);
  a.v = encode(reinterpret_cast<EncodeTiled>(fn), v, rows, heads, block);
  a.k_ptr = k, a.v_ptr = v, a.rows = rows, a.heads = heads, a.rows_per_cta = per_cta, a.block = block, a.sink = sink;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("read_probe: K and V %.3f GB each ([%lld rows][%d heads][%d] bf16), %d CTAs on %d SMs, %lld rows a CTA, blocks of %d rows\n",
              bytes / 1e9, rows, heads, kDim, ctas, sms, per_cta, block);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  auto time_us = [&](auto launch) {
    launch();  // warm-up
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(start));
    for (int r = 0; r < reps; ++r) launch();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    CHECK(cudaGetLastError());
    return 1000.0 * ms / reps;
  };
  struct Row { std::string mode; int stages; double us, gbs; };
  std::vector<Row> table;
  const double total = 2.0 * bytes;
  const double sum_us = time_us([&] { sum_kernel<<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(k), reinterpret_cast<const uint4*>(v), (long long)(bytes / 16), sink); });
  table.push_back({"ldg (sum of both)", 0, sum_us, total / sum_us / 1e3});
  for (int stages : stage_list) {
    if (stages < 1 || stages > kMaxStages) continue;
    a.stages = stages;
    const size_t smem = 1024 + 2ull * stages * block * kDim * 2 + 16 * kMaxStages;
    if (smem > 227 * 1024) { std::printf("stages %d: %zu bytes of shared memory, too many\n", stages, smem); continue; }
    CHECK(cudaFuncSetAttribute(stream_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CHECK(cudaFuncSetAttribute(stream_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const double tma_us = time_us([&] { stream_kernel<true><<<ctas, 256, smem>>>(a); });
    table.push_back({"tma", stages, tma_us, total / tma_us / 1e3});
    const double cp_us = time_us([&] { stream_kernel<false><<<ctas, 256, smem>>>(a); });
    table.push_back({"cpasync", stages, cp_us, total / cp_us / 1e3});
  }
  std::printf("\n%-20s %7s %10s %9s %9s\n", "mode", "stages", "us", "GB/s", "x ldg");
  for (const Row& r : table) std::printf("%-20s %7d %10.1f %9.0f %9.3f\n", r.mode.c_str(), r.stages, r.us, r.gbs, r.gbs / table[0].gbs);
  return 0;
}
