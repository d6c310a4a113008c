// ptx.cuh: the small PTX wrappers the attention kernel is built from (sm_90a).
// No CUDA headers: NVRTC compiles this file alone, so a variant builds in well under a second.
// Facts (operand orders, descriptor bits, fences) are from NVIDIA's PTX ISA (wgmma, cp.async.bulk, mbarrier).

#ifdef __CUDACC_RTC__  // NVRTC: no host headers
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef unsigned short uint16_t;
#else  // nvcc, on what `flashjit source` prints: its implicit host headers declare some of these
#include <stdint.h>
#endif

#define FJ_DEVICE __device__ __forceinline__
#define FJ_NEG_INF (-__int_as_float(0x7f800000))

// Layout-compatible with the host's CUtensorMap (128 opaque bytes, 64-byte aligned).
struct alignas(64) TmaDesc { uint64_t opaque[16]; };

FJ_DEVICE uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// ---------------------------------------------------------------- conversions and math
// Two floats -> one register of two 16-bit values (low half = first argument).
FJ_DEVICE uint32_t pack_fp16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
FJ_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// Four floats -> one register of four e4m3 (lowest byte = a0), rounded to nearest, saturating to
// +-448 (P in the FP8 P V GEMM: at most 2^8, the rescale slack).
FJ_DEVICE uint32_t pack_e4m3x4(float a0, float a1, float a2, float a3) {
  uint32_t r;
  asm("{\n.reg .b16 lo, hi;\n"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}" : "=r"(r) : "f"(a0), "f"(a1), "f"(a2), "f"(a3));
  return r;
}
// One register of two 16-bit values -> two floats (low half first).
struct FloatPair {
  float lo, hi;
};
FJ_DEVICE FloatPair unpack_bf16x2(uint32_t v) { return {__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u)}; }
FJ_DEVICE FloatPair unpack_fp16x2(uint32_t v) {
  FloatPair f;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi;\n}" : "=f"(f.lo), "=f"(f.hi) : "r"(v));
  return f;
}
FJ_DEVICE float fast_exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// One MUFU.TANH; relative error below 2^-10.9 (PTX ISA), FlashAttention-3's softcap tanh too.
FJ_DEVICE float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---------------------------------------------------------------- hang trap (debug build mode)
// A wait that spins past the limit traps: the launch fails (an illegal instruction) instead of
// hanging, and compute-sanitizer names the trapping thread and block. No message: a call there
// (vprintf) sits inside the wgmma pipelines (the chunk waits between a block's wgmmas, the waits
// between a wgmma's issue and its wait), so ptxas serialised every wgmma of the kernel (C7510) and
// it spilled; the mode would not have run the schedule it is there to test.
#ifdef FLASHJIT_HANG_TRAP
constexpr uint32_t kHangTrapSpins = 1u << 28;
#endif

// ---------------------------------------------------------------- mbarrier
FJ_DEVICE void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
// Programmatic dependent launch (PDL). wait: until the grids this one depends on have completed
// and their memory is visible (returns at once without PDL); launch_dependents: the next grid
// launched with PDL may start (it waits in turn before touching memory).
FJ_DEVICE void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
FJ_DEVICE void griddep_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
FJ_DEVICE void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
FJ_DEVICE void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
FJ_DEVICE void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Waits until the phase with this parity has completed. A fresh barrier is in phase 0, so a wait on
// parity 1 returns at once.
FJ_DEVICE void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef FLASHJIT_HANG_TRAP
  // The count in the asm, as the plain wait's loop: C++ around it cost the d128 and dim_split
  // kernels registers (spills, wgmma serialised: C7512).
  asm volatile("{\n.reg .pred P1;\n.reg .b32 n;\nmov.b32 n, 0;\nFJ_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra FJ_DONE;\nadd.u32 n, n, 1;\nsetp.eq.u32 P1, n, %2;\n@P1 trap;\nbra FJ_WAIT;\nFJ_DONE:\n}\n"
               :: "r"(bar), "r"(parity), "n"(kHangTrapSpins) : "memory");
#else
  asm volatile("{\n.reg .pred P1;\nFJ_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra FJ_DONE;\nbra FJ_WAIT;\nFJ_DONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
#endif
}

// Whether the phase with this parity has completed, without waiting.
FJ_DEVICE bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.b32 %0, 1, 0, p;\n}\n"
               : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

// ---------------------------------------------------------------- cp.async (the FP8 cache's loads)
// 16 bytes global -> shared, bypassing L1; src_bytes 0 reads nothing and writes zeros.
FJ_DEVICE void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned) from global to this
// CTA's shared memory by the TMA engine (no tensor map), counted on `bar` as transaction bytes.
FJ_DEVICE void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// One arrival on the barrier once every cp.async this thread issued before it has landed (the
// barrier's count includes it: .noinc).
FJ_DEVICE void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}
// Generic-proxy writes to shared memory made visible to the async proxy (wgmma, TMA) of later
// operations ordered after this fence.
FJ_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Arrive on the barrier at the same shared-memory offset in another CTA of the cluster.
FJ_DEVICE void mbar_arrive_cluster(uint32_t bar, uint32_t cta_rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" :: "r"(bar), "r"(cta_rank) : "memory");
}

// ---------------------------------------------------------------- distributed shared memory
// The address of this shared-memory offset in the cluster's CTA cta_rank (a shared::cluster address).
FJ_DEVICE uint32_t map_to_cta(uint32_t addr, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(cta_rank));
  return remote;
}
// 16 bytes into another CTA's shared memory; its barrier (the same CTA's) counts them as
// transaction bytes, with release semantics at cluster scope.
FJ_DEVICE void st_async_v4(uint32_t remote, float a, float b, float c, float d, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(remote), "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(__float_as_uint(c)), "r"(__float_as_uint(d)),
                  "r"(remote_bar) : "memory");
}
// ---------------------------------------------------------------- clusters
FJ_DEVICE uint32_t cluster_cta_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every CTA in the cluster: arrive (release) and wait (acquire).
FJ_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// ---------------------------------------------------------------- TMA (bulk tensor copies)
FJ_DEVICE void tma_prefetch_desc(const TmaDesc* d) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(d)) : "memory");
}
// 4-D tile load {c0 = column, c1 = row, c2 = head, c3 = batch} into shared memory, completing on bar.
FJ_DEVICE void tma_load_4d(uint32_t dst, const TmaDesc* d, uint32_t bar, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(d)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
// The same load written into every CTA of the cluster in cta_mask (same shared-memory offset), each
// CTA's barrier at bar's offset receiving the bytes that land in it.
FJ_DEVICE void tma_load_4d_multicast(uint32_t dst, const TmaDesc* d, uint32_t bar, int c0, int c1, int c2, int c3,
                                     uint16_t cta_mask) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(d)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(cta_mask)
               : "memory");
}
// 4-D tile store; the tensor map clips rows and columns past the tensor's end.
FJ_DEVICE void tma_store_4d(const TmaDesc* d, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
               :: "l"(reinterpret_cast<uint64_t>(d)), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
FJ_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
FJ_DEVICE void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Generic-proxy shared-memory writes -> visible to the async proxy (TMA store, wgmma operands).
FJ_DEVICE void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ---------------------------------------------------------------- warpgroup sync and registers
FJ_DEVICE void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
FJ_DEVICE void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
// True in every thread iff pred holds in all `threads` threads meeting at named barrier id.
FJ_DEVICE bool named_barrier_all(uint32_t id, uint32_t threads, bool pred) {
  uint32_t all;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
               : "=r"(all) : "r"(uint32_t(pred)), "r"(id), "r"(threads) : "memory");
  return all != 0;
}
// True in every thread iff pred holds in any of the `threads` threads meeting at named barrier id.
FJ_DEVICE bool named_barrier_any(uint32_t id, uint32_t threads, bool pred) {
  uint32_t any;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
               : "=r"(any) : "r"(uint32_t(pred)), "r"(id), "r"(threads) : "memory");
  return any != 0;
}
template <uint32_t N> FJ_DEVICE void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N)); }
template <uint32_t N> FJ_DEVICE void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N)); }

// ---------------------------------------------------------------- 8x8 matrix moves
// Four 8x8 16-bit matrices between shared memory and a warp's registers: lane l gives the address
// of row l % 8 of matrix l / 8 (16 contiguous bytes); register i of every lane holds its two
// elements (row lane / 4, columns 2 (lane % 4) and the next) of matrix i. That is the layout of
// the wgmma accumulator and A-operand fragments, so one instruction moves what took four 32-bit
// accesses.
FJ_DEVICE void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
FJ_DEVICE void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// ---------------------------------------------------------------- wgmma
FJ_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
FJ_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> FJ_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// Keeps the compiler from moving accumulator accesses across the asynchronous region.
template <int N> FJ_DEVICE void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: bits 0-13 address>>4, 16-29 leading byte
// offset>>4, 32-45 stride byte offset>>4, 62-63 layout (1 = 128B swizzle). Tiles are 1024-B aligned,
// so the base offset (bits 49-51) stays 0.
FJ_DEVICE uint64_t smem_desc(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((leading_bytes & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((stride_bytes & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// The descriptor of a tile, built once; a k-step inside the tile is then one add to the low word.
// NOTES: built per wgmma, a descriptor cost ptxas about seven instructions (mask, shift, or, moves
// to uniform registers): a hundred per K/V block at head dim 256. The add cannot carry out of the
// address field: shared-memory offsets stay below 2^18 (228 KB), so address>>4 below 2^14.
struct TileDesc {
  uint32_t lo, hi;
  FJ_DEVICE TileDesc(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
    const uint64_t d = smem_desc(addr, leading_bytes, stride_bytes);
    lo = (uint32_t)d;
    hi = (uint32_t)(d >> 32);
  }
  FJ_DEVICE uint64_t at(uint32_t byte_offset) const {
    return ((uint64_t)hi << 32) | (uint64_t)(lo + (byte_offset >> 4));
  }
};
