// The C API's GPU paths without a GPU: the same calls an engine makes, against the fake driver of
// api_fake_libcuda.hpp (loaded through FLASHJIT_LIBCUDA, set by main below). Kernels are compiled
// for real (NVRTC); module loads, tensor maps, launches and captures are the fake's.
//
// What this proves: contexts (device ordinal checks, non-Hopper devices, explicit CUcontexts,
// lifetime), kernel get/describe, the launch's grid and parameters, the launch-parameter cache,
// no allocation on the launch path, the wrong-context check, launching from a thread without a
// current context, stream capture and replay without capture-unsafe calls, cache-only misses, and
// 16 threads getting (and first-time compiling) kernels and launching at once.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "api/launch_args.hpp"
#include "../templates/tile_schedule.cuh"
#include "api_fake_libcuda.hpp"
#include "config/kernel_config.hpp"
#include "driver/cuda_driver.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_launch.hpp"
#include "verify/builtin_kernel.hpp"
#include "verify/check.hpp"

// ---- allocation counting: every operator new of this process, counted per thread when armed ----
namespace {
thread_local bool t_count_allocations = false;
thread_local size_t t_allocations = 0;
void* counted_alloc(size_t n, size_t align) {
  if (t_count_allocations) {
    ++t_allocations;
    if (std::getenv("FLASHJIT_TEST_ABORT_ON_ALLOCATION")) std::abort();  // for a debugger's backtrace
  }
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace
void* operator new(size_t n) { return counted_alloc(n, 0); }
void* operator new[](size_t n) { return counted_alloc(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted_alloc(n, size_t(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

extern "C" int flashjit_c_header_check(void);

namespace {

using flashjit::DriverApi;
using flashjit::KernelParams;

struct Fake {
  const DriverApi* api = nullptr;
  const FakeCudaStats* stats = nullptr;
  FakeCudaLastLaunchFn last_launch = nullptr;
};

const Fake& fake() {
  static const Fake f = [] {
    Fake out;
    auto api = flashjit::driver();
    if (!api) {
      std::fprintf(stderr, "fake driver did not load: %s\n", api.error().message.c_str());
      std::abort();
    }
    out.api = *api;
    void* handle = dlopen((*api)->library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!handle) std::abort();
    out.stats = reinterpret_cast<FakeCudaStatsFn>(dlsym(handle, "fake_cuda_stats"))();
    out.last_launch = reinterpret_cast<FakeCudaLastLaunchFn>(dlsym(handle, "fake_cuda_last_launch"));
    reinterpret_cast<FakeCudaSetParamBytesFn>(dlsym(handle, "fake_cuda_set_param_bytes"))(sizeof(KernelParams));
    return out;
  }();
  return f;
}

const char* kSpec = "dtype=bf16,head_dim=64";

std::string last_field() { return flashjit_last_error_field(); }
std::string last_message() { return flashjit_last_error_message(); }

flashjit_context_t make_context(flashjit_context_options_t o = [] {
  flashjit_context_options_t d;
  flashjit_context_options_init(&d);
  d.cache_mode = FLASHJIT_CACHE_MEMORY_ONLY;
  return d;
}()) {
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_SUCCESS) << last_message();
  return ctx;
}

CUcontext cu_context_of(flashjit_context_t ctx) {
  flashjit_context_info_t info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_SUCCESS);
  return static_cast<CUcontext>(info.cu_context);
}

flashjit_kernel_t get_kernel(flashjit_context_t ctx, const char* spec = kSpec) {
  flashjit_kernel_t k = nullptr;
  EXPECT_EQ(flashjit_kernel_get(ctx, spec, &k), FLASHJIT_SUCCESS) << last_message();
  return k;
}

// A stream in `context` (pushed for the call).
CUstream make_stream(CUcontext context) {
  const DriverApi& api = *fake().api;
  CUstream s = nullptr;
  EXPECT_EQ(api.cuCtxPushCurrent(context), CUDA_SUCCESS);
  EXPECT_EQ(api.cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUcontext popped;
  api.cuCtxPopCurrent(&popped);
  return s;
}

// Contiguous arguments at fake device addresses starting at `base`.
flashjit_attention_args_t make_args(uint64_t base, int64_t b = 2, int64_t sq = 300, int64_t sk = 200, int64_t hq = 8,
                                    int64_t hkv = 2, int64_t d = 64) {
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  const uint64_t tensor = uint64_t(1) << 28;
  a.q = base;
  a.k = base + tensor;
  a.v = base + 2 * tensor;
  a.o = base + 3 * tensor;
  a.lse = base + 4 * tensor;
  a.batch = b;
  a.seqlen_q = sq;
  a.seqlen_k = sk;
  a.heads_q = hq;
  a.heads_kv = hkv;
  a.q_strides = a.o_strides = flashjit_contiguous_bshd(sq, hq, d);
  a.k_strides = a.v_strides = flashjit_contiguous_bshd(sk, hkv, d);
  return a;
}

uint64_t encodes() { return fake().stats->tensor_map_encodes.load(); }
uint64_t launches() { return fake().stats->launches.load(); }

FakeCudaLaunch last_launch() {
  FakeCudaLaunch l{};
  fake().last_launch(&l);
  return l;
}
KernelParams params_of(const FakeCudaLaunch& l) {
  static_assert(sizeof(KernelParams) <= sizeof(l.params), "the fake driver keeps fewer parameter bytes than the kernel takes");
  KernelParams p;
  std::memcpy(&p, l.params, sizeof(p));
  return p;
}
uint64_t map_address(const flashjit::TensorMapBytes& map) { return map.opaque[0]; }

// Contexts -----------------------------------------------------------------------------------------

TEST(ApiFakeDriver, CHeaderCompilesAsC99AndItsHelpersWork) { EXPECT_EQ(flashjit_c_header_check(), 0); }

TEST(ApiFakeDriver, ContextOnADeviceRetainsAndReleasesItsPrimaryContext) {
  const uint64_t retains = fake().stats->primary_retains, releases = fake().stats->primary_releases;
  flashjit_context_t ctx = make_context();
  ASSERT_NE(ctx, nullptr);
  flashjit_context_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_context_describe(ctx, &info), FLASHJIT_SUCCESS);
  EXPECT_EQ(info.device, 0);
  EXPECT_NE(info.cu_context, nullptr);
  EXPECT_EQ(info.cache_mode, FLASHJIT_CACHE_MEMORY_ONLY);
  EXPECT_STREQ(info.cache_dir, "");
  EXPECT_EQ(fake().stats->primary_retains, retains + 1);
  EXPECT_EQ(flashjit_context_destroy(ctx), FLASHJIT_SUCCESS);
  EXPECT_EQ(fake().stats->primary_releases, releases + 1);
}

TEST(ApiFakeDriver, DeviceOrdinalOutOfRangeNamesTheDevice) {
  for (int device : {2, 7, 1000}) {
    flashjit_context_options_t o;
    flashjit_context_options_init(&o);
    o.device = device;
    flashjit_context_t ctx = reinterpret_cast<flashjit_context_t>(0x1);
    EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_EQ(last_field(), "options.device");
    EXPECT_NE(last_message().find("options.device: " + std::to_string(device) + " is out of range"), std::string::npos)
        << last_message();
    EXPECT_NE(last_message().find("2 CUDA devices (ordinals 0..1)"), std::string::npos) << last_message();
  }
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = -2;
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(last_field(), "options.device");
}

TEST(ApiFakeDriver, NonHopperDeviceIsRefusedNamingTheDevice) {
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = 1;  // FAKE_CUDA_CC_1=80
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(last_field(), "options.device");
  EXPECT_NE(last_message().find("sm_80"), std::string::npos) << last_message();
  EXPECT_NE(last_message().find("need sm_90"), std::string::npos) << last_message();
}

TEST(ApiFakeDriver, ExplicitCuContextIsUsedAndABogusOneIsRefused) {
  const DriverApi& api = *fake().api;
  CUcontext created = nullptr;
  ASSERT_EQ(api.cuCtxCreate(&created, nullptr, 0, 0), CUDA_SUCCESS);
  CUcontext popped;
  api.cuCtxPopCurrent(&popped);
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.cu_context = created;
  o.cache_mode = FLASHJIT_CACHE_MEMORY_ONLY;
  flashjit_context_t ctx = make_context(o);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(cu_context_of(ctx), created);
  flashjit_context_destroy(ctx);

  int not_a_context = 0;
  o.cu_context = &not_a_context;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(last_field(), "options.cu_context");
  EXPECT_NE(last_message().find("is not a usable CUDA context"), std::string::npos) << last_message();
  api.cuCtxDestroy(created);
}

// Kernels and launches ----------------------------------------------------------------------------

TEST(ApiFakeDriver, KernelDescribesItself) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  ASSERT_NE(k, nullptr);
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(k, &info), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(std::string(info.spec).rfind("dtype=bf16,head_dim=64,", 0), 0u) << info.spec;
  EXPECT_NE(std::string(info.spec).find("block_m="), std::string::npos) << info.spec;
  EXPECT_EQ(std::strlen(info.cache_key), 64u);
  EXPECT_GT(std::strlen(info.kernel_name), 0u);
  EXPECT_EQ(info.dtype, FLASHJIT_DTYPE_BF16);
  EXPECT_EQ(info.head_dim, 64);
  EXPECT_EQ(info.causal, 0);
  EXPECT_EQ(info.registers, 128);  // what the fake reports
  EXPECT_GT(info.threads_per_block, 0);
  EXPECT_GT(info.dynamic_smem_bytes, 0);
  EXPECT_GT(info.block_m, 0);
  EXPECT_GT(info.block_n, 0);
  EXPECT_EQ(info.device, 0);
  EXPECT_EQ(info.long_seqlen_spec, nullptr) << "no long-sequence kernel without a causal mask";
  EXPECT_EQ(info.long_seqlen_min, 0);

  // struct_size: too small is refused naming it; a larger struct gets the known part, its tail untouched.
  flashjit_kernel_info_t small{};
  small.struct_size = 8;
  EXPECT_EQ(flashjit_kernel_describe(k, &small), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(last_field(), "info.struct_size");
  struct Bigger {
    flashjit_kernel_info_t info;
    uint64_t newer_field;
  } bigger{};
  bigger.info.struct_size = sizeof(bigger);
  bigger.newer_field = 0x1234;
  EXPECT_EQ(flashjit_kernel_describe(k, &bigger.info), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(bigger.info.struct_size, sizeof(bigger));
  EXPECT_EQ(bigger.info.head_dim, 64);
  EXPECT_EQ(bigger.newer_field, 0x1234u);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, ForwardLaunchesTheGridAndParametersTheArgumentsAskFor) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  ASSERT_NE(k, nullptr);
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(k, &info), FLASHJIT_SUCCESS);
  CUstream stream = make_stream(cu_context_of(ctx));
  const flashjit_attention_args_t a = make_args(0x100000000ull);
  const uint64_t before = launches();
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
  EXPECT_STREQ(flashjit_last_error_message(), "");
  EXPECT_EQ(launches(), before + 1);
  const FakeCudaLaunch l = last_launch();
  // A 1-D grid walking query blocks x heads x batch: one CTA per tile while the tiles are fewer
  // than the SMs (the fake device has 132).
  const unsigned m_blocks = unsigned((300 + info.block_m - 1) / info.block_m);
  EXPECT_EQ(l.grid[0], m_blocks * 8u * 2u);
  EXPECT_EQ(l.grid[1], 1u);
  EXPECT_EQ(l.grid[2], 1u);
  EXPECT_EQ(l.block[0], unsigned(info.threads_per_block));
  EXPECT_EQ(l.shared_bytes, unsigned(info.dynamic_smem_bytes));
  EXPECT_EQ(l.stream, stream);
  const KernelParams p = params_of(l);
  EXPECT_EQ(map_address(p.q), a.q);
  EXPECT_EQ(map_address(p.k), a.k);
  EXPECT_EQ(map_address(p.v), a.v);
  EXPECT_EQ(map_address(p.o), a.o);
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.lse), a.lse);
  EXPECT_EQ(p.seqlen_q, 300);
  EXPECT_EQ(p.seqlen_k, 200);
  EXPECT_EQ(p.heads_q, 8);
  EXPECT_NEAR(p.scale_log2, 1.4426950408889634 / 8.0, 1e-6);  // 1/sqrt(64) * log2(e)
  EXPECT_EQ(p.batch, 2);
  // More tiles than SMs: a persistent grid of one CTA per SM.
  flashjit_attention_args_t big = a;
  big.batch = 40;
  ASSERT_EQ(flashjit_attention_forward(k, &big, stream), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(last_launch().grid[0], 132u);
  EXPECT_EQ(params_of(last_launch()).batch, 40);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// A caller with an older, N-byte flashjit_kernel_info_t (80: 0.0, 96: 0.1) gets the fields it
// knows and nothing past them; returns what it got (zero past N).
template <size_t N>
flashjit_kernel_info_t describe_in_older_layout(flashjit_kernel_t k) {
  struct Older {
    unsigned char bytes[N];
    uint64_t canary;
  } older{};
  older.canary = 0x5555;
  *reinterpret_cast<uint32_t*>(older.bytes) = N;
  EXPECT_EQ(flashjit_kernel_describe(k, reinterpret_cast<flashjit_kernel_info_t*>(older.bytes)), FLASHJIT_SUCCESS);
  EXPECT_EQ(older.canary, 0x5555u) << "a " << N << "-byte layout written past its end";
  flashjit_kernel_info_t info{};
  std::memcpy(&info, older.bytes, N);
  return info;
}

// The second kernel of handle k as describe names it: its spec holds `fields`, launches whose
// lengths both reach min_seqlen run it, and so do those from uneven_min whose deal is uneven.
void expect_long_kernel(flashjit_kernel_t k, const char* fields, int64_t min_seqlen, int64_t uneven_min = 0,
                        int uneven_use_percent = 0) {
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(k, &info), FLASHJIT_SUCCESS) << last_message();
  ASSERT_NE(info.long_seqlen_spec, nullptr);
  EXPECT_NE(std::string(info.long_seqlen_spec).find(fields), std::string::npos) << info.long_seqlen_spec;
  EXPECT_EQ(info.long_seqlen_min, min_seqlen);
  EXPECT_EQ(info.long_seqlen_min_uneven, uneven_min);
  EXPECT_EQ(info.long_uneven_use_percent, uneven_use_percent);
}

// A d64 causal spec left at auto holds two kernels (config/length_choice.hpp): three consumer
// warpgroups (512 threads) where seqlen_q and seqlen_k are both at least long_seqlen_min, two (384)
// below, each with its own parameters; describe names both. A spec with the warpgroups set holds one.
TEST(ApiFakeDriver, LongSequencesRunTheLongSequenceKernel) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx, "dtype=bf16,head_dim=64,causal=1");
  ASSERT_NE(k, nullptr);
  expect_long_kernel(k, "consumer_wgs=3,block_m=192", 4096);
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(k, &info), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(info.threads_per_block, 384);
  describe_in_older_layout<80>(k);

  CUstream stream = make_stream(cu_context_of(ctx));
  const auto threads_at = [&](int64_t sq, int64_t sk) {
    const flashjit_attention_args_t a = make_args(0x100000000ull, 1, sq, sk, 8, 8);
    EXPECT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    const FakeCudaLaunch l = last_launch();
    EXPECT_EQ(params_of(l).seqlen_q, sq);
    return l.block[0];
  };
  EXPECT_EQ(threads_at(4096, 4096), 512u);
  EXPECT_EQ(threads_at(8000, 5000), 512u);
  EXPECT_EQ(threads_at(4095, 4096), 384u);
  EXPECT_EQ(threads_at(4096, 4095), 384u);
  EXPECT_EQ(threads_at(300, 200), 384u);
  EXPECT_EQ(threads_at(4096, 4096), 512u) << "again, from its parameter cache";

  flashjit_kernel_t one = get_kernel(ctx, "dtype=bf16,head_dim=64,causal=1,consumer_wgs=2");
  ASSERT_EQ(flashjit_kernel_describe(one, &info), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(info.long_seqlen_spec, nullptr);
  EXPECT_EQ(info.long_seqlen_min, 0);
  flashjit_kernel_release(one);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// A d256 causal spec left at auto holds two kernels: the persistent grid, and 2-CTA clusters (one
// CTA per tile, config/length_choice.hpp) where seqlen_q and seqlen_k are both at least 16384, or
// both at least 8192 where the persistent grid's pairs (on the fake device's 132 SMs) would use
// less than 92 % of their rounds. The launch shows which ran: the cluster attribute and a grid
// of every (padded) tile, or the SMs; flashjit_kernel_launch_spec says the same without launching.
TEST(ApiFakeDriver, LongCausalHeadDim256RunsTheClusterKernel) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx, "dtype=bf16,head_dim=256,causal=1");
  ASSERT_NE(k, nullptr);
  expect_long_kernel(k, "cluster=2", 16384, 8192, 92);
  CUstream stream = make_stream(cu_context_of(ctx));
  const auto launch_at = [&](int64_t sq, int64_t sk, int64_t heads = 8) {
    const flashjit_attention_args_t a = make_args(0x100000000ull, 1, sq, sk, heads, heads, 256);
    const char* spec = nullptr;
    EXPECT_EQ(flashjit_kernel_launch_spec(k, &a, &spec), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    const FakeCudaLaunch l = last_launch();
    EXPECT_NE(std::string(spec ? spec : "").find(l.cluster_x == 2 ? "cluster=2" : "cluster=1"), std::string::npos) << spec;
    return std::pair{l.cluster_x, l.grid[0]};
  };
  EXPECT_EQ(launch_at(16384, 16384), (std::pair{2u, 128u * 8u}));  // 128 query blocks x 8 heads
  EXPECT_EQ(launch_at(16500, 20000), (std::pair{2u, 130u * 8u}));  // 129 blocks, padded to a pair
  EXPECT_EQ(launch_at(16383, 16384), (std::pair{1u, 132u}));       // 512 pairs in 4 rounds: 96 % used
  EXPECT_EQ(launch_at(16384, 16383), (std::pair{1u, 132u}));
  EXPECT_EQ(launch_at(16384, 16384), (std::pair{2u, 128u * 8u})) << "again, from its parameter cache";
  EXPECT_EQ(launch_at(9216, 9216), (std::pair{2u, 72u * 8u}));       // 288 pairs in 3 rounds: 72 %
  EXPECT_EQ(launch_at(10240, 10240, 16), (std::pair{1u, 132u}));     // 640 in 5: 96 %
  EXPECT_EQ(launch_at(8192, 8192, 10), (std::pair{2u, 64u * 10u}));  // 320 in 3: 80 %
  EXPECT_EQ(launch_at(8191, 8192, 10), (std::pair{1u, 132u}));       // below the range
  // Arguments forward would refuse are refused here too, naming the field, with no spec.
  flashjit_attention_args_t bad = make_args(0x100000000ull, 1, 9216, 9216, 8, 3, 256);
  const char* spec = "unset";
  EXPECT_EQ(flashjit_kernel_launch_spec(k, &bad, &spec), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(spec, nullptr);
  EXPECT_STREQ(flashjit_last_error_field(), "args.heads_kv");
  EXPECT_EQ(describe_in_older_layout<96>(k).long_seqlen_min, 16384);  // 0.1's layout
  flashjit_kernel_release(k);

  flashjit_kernel_t one = get_kernel(ctx, "dtype=bf16,head_dim=256,causal=1,cluster=1");
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(one, &info), FLASHJIT_SUCCESS) << last_message();
  EXPECT_EQ(info.long_seqlen_spec, nullptr);
  flashjit_kernel_release(one);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, InvalidArgumentsAreRefusedBeforeAnyDriverCall) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  const uint64_t launches_before = launches(), encodes_before = encodes();
  const uint64_t stream_queries = fake().stats->stream_get_ctx;
  struct Case {
    const char* field;
    void (*mutate)(flashjit_attention_args_t&);
  } cases[] = {
      {"args.q", [](flashjit_attention_args_t& a) { a.q = 0; }},
      {"args.k", [](flashjit_attention_args_t& a) { a.k += 8; }},
      {"args.seqlen_q", [](flashjit_attention_args_t& a) { a.seqlen_q = int64_t(1) << 31; }},
      {"args.q_strides.row", [](flashjit_attention_args_t& a) { a.q_strides.row = -512; }},
      {"args.v_strides.head", [](flashjit_attention_args_t& a) { a.v_strides.head = 12; }},
      {"args.heads_kv", [](flashjit_attention_args_t& a) { a.heads_kv = 3; }},
      {"args.window_left", [](flashjit_attention_args_t& a) { a.window_left = 128; }},  // no window=1
      {"args.window_left", [](flashjit_attention_args_t& a) { a.window_left = -5; }},
      {"args.alibi_slopes", [](flashjit_attention_args_t& a) { a.alibi_slopes = 0x1000; }},
      {"args.head_dim", [](flashjit_attention_args_t& a) { a.head_dim = 128; }},
  };
  for (const Case& c : cases) {
    flashjit_attention_args_t a = make_args(0x100000000ull);
    c.mutate(a);
    EXPECT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_ERROR_INVALID_ARGUMENT) << c.field;
    EXPECT_EQ(last_field(), c.field);
    EXPECT_EQ(last_message().rfind(std::string(c.field) + ":", 0), 0u) << last_message();
  }
  EXPECT_EQ(flashjit_attention_forward(k, nullptr, stream), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(last_field(), "args");
  EXPECT_EQ(launches(), launches_before);
  EXPECT_EQ(encodes(), encodes_before);
  EXPECT_EQ(fake().stats->stream_get_ctx, stream_queries);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, RepeatedArgumentsReuseTheirEncodedParameters) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  const flashjit_attention_args_t a = make_args(0x200000000ull);
  flashjit_attention_args_t b = a;
  b.o += 4096;
  uint64_t e = encodes();
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);
  EXPECT_EQ(encodes(), e + 4) << "first launch: four tensor maps";
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);
  EXPECT_EQ(encodes(), e + 4) << "same arguments: cached";
  ASSERT_EQ(flashjit_attention_forward(k, &b, stream), FLASHJIT_SUCCESS);
  EXPECT_EQ(encodes(), e + 8) << "another output pointer: encoded again";
  EXPECT_EQ(map_address(params_of(last_launch()).o), b.o);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);
  EXPECT_EQ(map_address(params_of(last_launch()).o), a.o) << "a cached entry is the right one";
  // A second handle for the same spec has its own cache (and shares the module).
  const uint64_t loads = fake().stats->module_loads;
  flashjit_kernel_t k2 = get_kernel(ctx);
  EXPECT_EQ(fake().stats->module_loads, loads);
  e = encodes();
  ASSERT_EQ(flashjit_attention_forward(k2, &a, stream), FLASHJIT_SUCCESS);
  EXPECT_EQ(encodes(), e + 4);
  flashjit_kernel_release(k2);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// A feature value is checked on every new argument set: arguments that differ from a cached set
// only in a window, a softcap or a sink pointer are not that set (they would launch its
// parameters, without the feature).
TEST(ApiFakeDriver, ArgumentsThatDifferOnlyInAFeatureAreNotACachedSet) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  const flashjit_attention_args_t a = make_args(0x300000000ull);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);  // cached now
  const uint64_t launches_before = launches();
  struct Case {
    const char* field;
    void (*set)(flashjit_attention_args_t&);
  } cases[] = {
      {"args.window_left", [](flashjit_attention_args_t& x) { x.window_left = 128; }},
      {"args.window_right", [](flashjit_attention_args_t& x) { x.window_right = 0; }},
      {"args.softcap", [](flashjit_attention_args_t& x) { x.softcap = 30.0f; }},
      {"args.attention_chunk", [](flashjit_attention_args_t& x) { x.attention_chunk = 64; }},
      {"args.sinks", [](flashjit_attention_args_t& x) { x.sinks = 0x1000, x.sinks_dtype = FLASHJIT_DTYPE_FP32; }},
      {"args.alibi_slopes", [](flashjit_attention_args_t& x) { x.alibi_slopes = 0x1000; }},
  };
  for (const Case& c : cases) {
    flashjit_attention_args_t b = a;
    c.set(b);
    EXPECT_EQ(flashjit_attention_forward(k, &b, stream), FLASHJIT_ERROR_INVALID_ARGUMENT) << c.field;
    EXPECT_EQ(last_field(), c.field) << last_message();
  }
  EXPECT_EQ(launches(), launches_before);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// An engine's step: one launch a layer, each layer with its own buffers, the same every step. Once
// each layer's parameters are built, no later step encodes a tensor map, up to 64 layers (the
// direct-mapped cache this replaced re-encoded 37-74 % of the launches at 16-100 layers: two
// layers whose keys share a slot evict each other at every step).
TEST(ApiFakeDriver, AnEnginesLayersKeepTheirParametersAcrossSteps) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx, "dtype=bf16,head_dim=128,causal=1");
  CUstream stream = make_stream(cu_context_of(ctx));
  for (int layers : {16, 40, 64}) {
    SCOPED_TRACE(layers);
    std::vector<flashjit_attention_args_t> step;
    for (int l = 0; l < layers; ++l) step.push_back(make_args(0x1000000000ull * uint64_t(layers) + uint64_t(l) * (uint64_t(1) << 31), 2, 700, 900, 32, 8, 128));
    uint64_t before = encodes();
    for (const auto& a : step) ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(encodes(), before + 4 * uint64_t(layers)) << "the first step builds every layer's parameters";
    before = encodes();
    for (int s = 0; s < 3; ++s)
      for (const auto& a : step) ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(encodes(), before) << "later steps reuse them";
    EXPECT_EQ(map_address(params_of(last_launch()).o), step.back().o);
  }
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// Allocations made by `calls` launches of k on stream, the arguments changed by `vary(i)`.
template <class Vary>
size_t allocations_during(flashjit_kernel_t k, CUstream stream, flashjit_attention_args_t a, int calls, Vary&& vary) {
  t_allocations = 0;
  t_count_allocations = true;
  for (int i = 0; i < calls; ++i) {
    vary(a, i);
    if (flashjit_attention_forward(k, &a, stream) != FLASHJIT_SUCCESS) break;
  }
  t_count_allocations = false;
  return t_allocations;
}

TEST(ApiFakeDriver, LaunchWithCachedParametersAllocatesNothing) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  const flashjit_attention_args_t a = make_args(0x300000000ull);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);  // warm: parameters, thread-local storage
  EXPECT_EQ(allocations_during(k, stream, a, 1000, [](flashjit_attention_args_t&, int) {}), 0u);
  EXPECT_STREQ(flashjit_last_error_message(), "");
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, LaunchWithNewParametersAllocatesNothing) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  const flashjit_attention_args_t a = make_args(0x380000000ull);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS);
  auto vary = [](flashjit_attention_args_t& args, int) { args.o += 16 * 1024; };
  const size_t n = allocations_during(k, stream, a, 100, vary);
  EXPECT_STREQ(flashjit_last_error_message(), "");
  // The same 100 parameter builds by the core alone (make_kernel_params, what a miss calls).
  auto config = flashjit::make_config(*flashjit::parse_spec(kSpec));
  flashjit_attention_args_t c_args = a;
  size_t core = 0;
  for (int i = 0; i < 100; ++i) {
    vary(c_args, i);
    flashjit::AttentionArgs core_args;
    ASSERT_TRUE(flashjit::api::to_attention_args(&c_args, *config, &core_args).ok());
    t_allocations = 0;
    t_count_allocations = true;
    (void)flashjit::make_kernel_params(*fake().api, *config, core_args, 132);
    t_count_allocations = false;
    core += t_allocations;
  }
  EXPECT_EQ(n, core) << "the API adds allocations of its own to a launch with new arguments";
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
  // The launch path never allocates, new arguments included (tensor-map validation builds its
  // messages only on failure).
  EXPECT_EQ(n, 0u) << "allocations in 100 launches with new arguments";
}

// Choosing between a handle's kernels by the persistent grid's deal (d256 causal between 8192 and
// 16384: launch/kernel_choice.hpp) allocates nothing either, with cached and with new arguments,
// on both sides of the rule.
TEST(ApiFakeDriver, ChoosingTheKernelByTheDealAllocatesNothing) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx, "dtype=bf16,head_dim=256,causal=1");
  ASSERT_NE(k, nullptr);
  CUstream stream = make_stream(cu_context_of(ctx));
  for (auto [seqlen, heads, cluster] : {std::tuple{9216, 8, 2u}, {10240, 16, 1u}}) {
    const flashjit_attention_args_t a = make_args(0x100000000ull, 1, seqlen, seqlen, heads, heads, 256);
    ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(last_launch().cluster_x, cluster) << seqlen;
    EXPECT_EQ(allocations_during(k, stream, a, 100, [](flashjit_attention_args_t&, int) {}), 0u) << seqlen << ", cached";
    EXPECT_EQ(allocations_during(k, stream, a, 100, [](flashjit_attention_args_t& x, int) { x.o += 16 * 1024; }), 0u)
        << seqlen << ", new arguments";
    EXPECT_EQ(last_launch().cluster_x, cluster) << seqlen;
  }
  EXPECT_STREQ(flashjit_last_error_message(), "");
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

// Fitting the causal deal (launch/tile_schedule.cpp) on a launch with new arguments allocates
// nothing either, where the host models each head's light blocks held back (4k) and the last
// heads held back whole (512: 80 heads x 4 query blocks are 160 pairs on 132 SMs, one whole
// round and 14 heads whole); the parameters carry the hold it picked.
TEST(ApiFakeDriver, FittingTheCausalHoldAllocatesNothing) {
  flashjit_context_t ctx = make_context();
  for (const char* spec : {"dtype=bf16,head_dim=64,causal=1", "dtype=fp16,head_dim=128,causal=1"}) {
    flashjit_kernel_t k = get_kernel(ctx, spec);
    ASSERT_NE(k, nullptr) << spec;
    CUstream stream = make_stream(cu_context_of(ctx));
    const int64_t d = std::string(spec).find("head_dim=64") != std::string::npos ? 64 : 128;
    // Light blocks at the benchmark grid's d64 causal 2k and d128 causal 4k cells.
    for (auto [seqlen, batch, heads, whole_heads] : {std::tuple{512, 5, 16, true}, {d == 64 ? 2048 : 4096, d == 64 ? 8 : 4, d == 64 ? 32 : 16, false}}) {
      SCOPED_TRACE(std::string(spec) + " seqlen " + std::to_string(seqlen));
      const flashjit_attention_args_t a = make_args(0x100000000ull, batch, seqlen, seqlen, heads, heads, d);
      ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
      const KernelParams p = params_of(last_launch());
      EXPECT_GT(p.fill_blocks, 0);
      EXPECT_EQ(p.held_heads, whole_heads ? 14 : batch * heads);
      EXPECT_EQ(allocations_during(k, stream, a, 100, [](flashjit_attention_args_t& x, int) { x.o += 16 * 1024; }), 0u)
          << "new arguments";
    }
    flashjit_kernel_release(k);
  }
  EXPECT_STREQ(flashjit_last_error_message(), "");
  flashjit_context_destroy(ctx);
}

// The tile decode's divisors that make_kernel_params hands the kernel (FastDivisor in
// templates/tile_schedule.cuh):
// query blocks per head padded to whole clusters (800 rows in 128-row blocks: 7, padded to 8),
// heads_q and the GQA group. Wrong constants would decode tiles to the wrong head or block.
TEST(ApiFakeDriver, KernelParametersCarryTheTileDecodeDivisors) {
  const struct {
    const char* spec;
    int64_t seqlen_q, heads_q, heads_kv;
    uint32_t m_blocks, group;
  } cases[] = {{"dtype=bf16,head_dim=64,consumer_wgs=2,cluster=2", 800, 6, 2, 8, 3},
               {"dtype=bf16,head_dim=64,consumer_wgs=2", 800, 6, 2, 7, 3},
               {"dtype=bf16,head_dim=64,consumer_wgs=2", 300, 5, 5, 3, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    auto config = flashjit::make_config(*flashjit::parse_spec(c.spec));
    ASSERT_TRUE(config.ok());
    flashjit::AttentionArgs args;
    const flashjit_attention_args_t c_args = make_args(0x200000000ull, 3, c.seqlen_q, 200, c.heads_q, c.heads_kv);
    ASSERT_TRUE(flashjit::api::to_attention_args(&c_args, *config, &args).ok());
    auto params = flashjit::make_kernel_params(*fake().api, *config, args, 132);
    ASSERT_TRUE(params.ok()) << params.error().message;
    const auto quotient = [](uint32_t n, const uint32_t (&constants)[2]) { return fast_div(n, FastDivisor{0, constants[0], constants[1]}); };
    for (uint32_t n = 0; n < 5000; ++n) {
      ASSERT_EQ(quotient(n, params->div_m_blocks), n / c.m_blocks) << n;
      ASSERT_EQ(quotient(n, params->div_heads_q), n / uint32_t(c.heads_q)) << n;
      ASSERT_EQ(quotient(n, params->div_group), n / c.group) << n;
    }
  }
}

// The workspace's parts as make_kernel_params hands them to the kernel: scheduler=dynamic's tile
// counter at the start, combine=inline's merge counters after its 256 bytes (or at the start),
// the split partials after both (each part 256-byte aligned).
TEST(ApiFakeDriver, KernelParametersPointAtTheWorkspacesParts) {
  const uint64_t workspace = 0x700000000ull;
  constexpr uint64_t kNone = ~0ull;
  const struct {
    const char* spec;
    bool counter;
    uint64_t merge;     // offset of the merge counters; kNone: none
    uint64_t partials;  // offset of the O partials; kNone: none
  } cases[] = {{"dtype=bf16,head_dim=128,causal=1,scheduler=dynamic", true, kNone, kNone},
               {"dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,scheduler=dynamic", true, kNone, 256},
               {"dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1", false, kNone, 0},
               // one query of 32/8 heads: 8 head groups x 1 query block x 1 warpgroup = 8 words
               {"dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,combine=inline", false, 0, 256},
               {"dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1,scheduler=dynamic,combine=inline", true, 256, 512},
               {"dtype=bf16,head_dim=128,causal=1", false, kNone, kNone}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    auto config = flashjit::make_config(*flashjit::parse_spec(c.spec));
    ASSERT_TRUE(config.ok()) << config.error().message;
    flashjit_attention_args_t c_args = make_args(0x600000000ull, 1, 1, 4096, 32, 8, 128);
    flashjit::AttentionArgs args;
    ASSERT_TRUE(flashjit::api::to_attention_args(&c_args, *config, &args).ok());
    if (config->spec.varlen) {
      static std::vector<int32_t> metadata(64, 0);
      args.engine.cu_seqlens_q = reinterpret_cast<uint64_t>(metadata.data());
      args.engine.seqused_k = reinterpret_cast<uint64_t>(metadata.data() + 16);
      args.engine.total_q = 1;
      args.q_strides.batch = args.o_strides.batch = 0;
    }
    if (config->spec.split_kv) args.decode.max_splits = 16;
    if (c.counter || config->spec.split_kv) {
      args.decode.workspace = workspace;
      args.decode.workspace_bytes = flashjit::attention_workspace_bytes(*config, args);
    }
    auto params = flashjit::make_kernel_params(*fake().api, *config, args, 132);
    ASSERT_TRUE(params.ok()) << params.error().message;
    EXPECT_EQ(reinterpret_cast<uint64_t>(params->tile_counter), c.counter ? workspace : 0);
    EXPECT_EQ(reinterpret_cast<uint64_t>(params->merge_counters), c.merge == kNone ? 0 : workspace + c.merge);
    EXPECT_EQ(flashjit::merge_counter_words(*config, args), c.merge == kNone ? 0 : 8);
    if (c.partials == kNone) {
      EXPECT_EQ(params->o_partial, nullptr);
      continue;
    }
    EXPECT_EQ(reinterpret_cast<uint64_t>(params->o_partial), workspace + c.partials);
    EXPECT_EQ(reinterpret_cast<uint64_t>(params->lse_partial), workspace + c.partials + flashjit::split_lse_offset(*config, args));
    // The whole workspace: the counters and max_splits' partials.
    EXPECT_EQ(flashjit::attention_workspace_bytes(*config, args), c.partials + flashjit::split_workspace_bytes(*config, args));
    // combine=kernel launches the combine after the attention kernel; combine=inline does not.
    EXPECT_EQ(flashjit::runs_combine(*params), !config->spec.inline_combine);
  }
}

// combine=inline merges the splits in the attention kernel: one launch a call, against two; where
// a warpgroup's rows are many (16 queries of 4 packed heads: 64), the combine kernel still runs.
TEST(ApiFakeDriver, InlineCombineIsOneLaunch) {
  flashjit_context_t ctx = make_context();
  CUstream stream = make_stream(cu_context_of(ctx));
  static std::vector<int32_t> metadata(64, 0);
  const struct {
    const char* spec;
    int queries;
    uint64_t launches;
  } cases[] = {{"dtype=bf16,head_dim=64,varlen=1,pack_gqa=1,split_kv=1", 1, 2},
               {"dtype=bf16,head_dim=64,varlen=1,pack_gqa=1,split_kv=1,combine=inline", 1, 1},
               {"dtype=bf16,head_dim=64,varlen=1,pack_gqa=1,split_kv=1,combine=inline", 4, 1},
               {"dtype=bf16,head_dim=64,varlen=1,pack_gqa=1,split_kv=1,combine=inline", 16, 2}};
  for (const auto& [spec, queries, expected] : cases) {
    SCOPED_TRACE(std::string(spec) + " queries " + std::to_string(queries));
    flashjit_kernel_t k = get_kernel(ctx, spec);
    flashjit_attention_args_t a = make_args(0x700000000ull, 1, queries, 4096, 32, 8, 64);
    a.q_strides.batch = a.o_strides.batch = 0;
    a.cu_seqlens_q = reinterpret_cast<uint64_t>(metadata.data());
    a.seqused_k = reinterpret_cast<uint64_t>(metadata.data() + 16);
    a.total_q = queries;
    a.max_splits = 16;
    uint64_t bytes = 0;
    ASSERT_EQ(flashjit_attention_workspace_size(spec, &a, &bytes), FLASHJIT_SUCCESS) << last_message();
    a.workspace = 0x7f0000000ull;
    a.workspace_bytes = bytes;
    const uint64_t before = launches();
    ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(launches(), before + expected);
    flashjit_kernel_release(k);
  }
  flashjit_context_destroy(ctx);
}

// FLASHJIT_ATTENTION_FLAG_PDL launches with programmatic stream serialization, per call (the
// flag is not part of the cached parameters); without it, a plain launch; unknown bits are refused.
TEST(ApiFakeDriver, PdlFlagLaunchesWithProgrammaticSerializationPerCall) {
  flashjit_context_t ctx = make_context();
  flashjit_kernel_t k = get_kernel(ctx);
  CUstream stream = make_stream(cu_context_of(ctx));
  flashjit_attention_args_t a = make_args(0x700000000ull);
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
  EXPECT_FALSE(last_launch().programmatic);
  a.flags = FLASHJIT_ATTENTION_FLAG_PDL;
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
  EXPECT_TRUE(last_launch().programmatic);
  a.flags = 0;
  ASSERT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
  EXPECT_FALSE(last_launch().programmatic) << "the flag of an earlier call with the same tensors";
  a.flags = FLASHJIT_ATTENTION_FLAG_PDL | 2u;
  const uint64_t before = launches();
  EXPECT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(flashjit_last_error_message()).find("args.flags: 0x2"), std::string::npos) << flashjit_last_error_message();
  EXPECT_EQ(launches(), before);
  flashjit_kernel_release(k);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, KernelKeepsItsContextAliveAndTheLastOneTearsItDown) {
  const uint64_t unloads = fake().stats->module_unloads, releases = fake().stats->primary_releases;
  flashjit_context_t ctx = make_context();
  const CUcontext cu = cu_context_of(ctx);
  flashjit_kernel_t k = get_kernel(ctx, "dtype=fp16,head_dim=64,causal=1");
  CUstream stream = make_stream(cu);
  ASSERT_EQ(flashjit_context_destroy(ctx), FLASHJIT_SUCCESS);
  EXPECT_EQ(fake().stats->primary_releases, releases) << "the kernel still holds the context";
  const flashjit_attention_args_t a = make_args(0x700000000ull);
  EXPECT_EQ(flashjit_attention_forward(k, &a, stream), FLASHJIT_SUCCESS) << last_message();
  ASSERT_EQ(flashjit_kernel_release(k), FLASHJIT_SUCCESS);
  EXPECT_EQ(fake().stats->module_unloads, unloads + 2) << "its kernel and its long-sequence kernel";
  EXPECT_EQ(fake().stats->primary_releases, releases + 1);
  EXPECT_EQ(flashjit_kernel_release(nullptr), FLASHJIT_SUCCESS);
  EXPECT_EQ(flashjit_context_destroy(nullptr), FLASHJIT_SUCCESS);
}

TEST(ApiFakeDriver, CacheOnlyMissIsNotCompiledAndLoadsNothing) {
  const std::string dir = ::testing::TempDir() + "flashjit_api_fake_cache_only_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.cache_dir = dir.c_str();
  o.compile_policy = FLASHJIT_COMPILE_POLICY_CACHE_ONLY;
  flashjit_context_t ctx = make_context(o);
  const uint64_t loads = fake().stats->module_loads;
  flashjit_kernel_t k = reinterpret_cast<flashjit_kernel_t>(0x1);
  EXPECT_EQ(flashjit_kernel_get(ctx, "dtype=bf16,head_dim=96,causal=1", &k), FLASHJIT_ERROR_NOT_COMPILED);
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(last_message().find("not in the cache"), std::string::npos) << last_message();
  EXPECT_EQ(fake().stats->module_loads, loads);
  flashjit_context_destroy(ctx);
  std::filesystem::remove_all(dir);
}

TEST(ApiFakeDriver, SixteenThreadsGetCompileAndLaunchAtOnce) {
  const DriverApi& api = *fake().api;
  flashjit_context_t ctx = make_context();
  const CUcontext cu = cu_context_of(ctx);
  // Specs no other test compiled: the first threads race to compile them.
  const char* specs[] = {"dtype=bf16,head_dim=32", "dtype=fp16,head_dim=32,causal=1", "dtype=bf16,head_dim=80",
                         "dtype=fp16,head_dim=96"};
  const int dims[] = {32, 32, 80, 96};
  constexpr int kThreads = 16, kLaunches = 50;
  std::atomic<int> failures{0};
  const uint64_t before = launches();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      flashjit_kernel_t k = nullptr;
      if (flashjit_kernel_get(ctx, specs[t % 4], &k) != FLASHJIT_SUCCESS) {
        std::fprintf(stderr, "thread %d: %s\n", t, flashjit_last_error_message());
        failures++;
        return;
      }
      api.cuCtxPushCurrent(cu);
      CUstream stream = nullptr;
      api.cuStreamCreate(&stream, 0);
      for (int i = 0; i < kLaunches; ++i) {
        const flashjit_attention_args_t a =
            make_args(0x10000000000ull * uint64_t(t + 1) + uint64_t(i % 3) * 4096, 1, 64 + i, 64, 4, 2, dims[t % 4]);
        if (flashjit_attention_forward(k, &a, stream) != FLASHJIT_SUCCESS) {
          std::fprintf(stderr, "thread %d launch %d: %s\n", t, i, flashjit_last_error_message());
          failures++;
        }
      }
      CUcontext popped;
      api.cuCtxPopCurrent(&popped);
      flashjit_kernel_release(k);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(launches(), before + kThreads * kLaunches);
  flashjit_context_destroy(ctx);
}

TEST(ApiFakeDriver, ContextsWithTheSameCacheShareCompiledKernels) {
  flashjit_context_t first = make_context();
  flashjit_kernel_t k1 = get_kernel(first, "dtype=bf16,head_dim=160");
  flashjit_context_t second = make_context();
  flashjit_kernel_t k2 = get_kernel(second, "dtype=bf16,head_dim=160");
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(k2, &info), FLASHJIT_SUCCESS);
  EXPECT_EQ(info.source, FLASHJIT_KERNEL_FROM_MEMORY);
  flashjit_kernel_release(k1);
  flashjit_kernel_release(k2);
  flashjit_context_destroy(first);
  flashjit_context_destroy(second);
}


// Built-in kernels (reference, random fill, launch floor) ----------------------------------------

TEST(BuiltinKernelFake, LoadsOncePerContextAndDropUnloadsThatContextOnly) {
  const DriverApi& api = *fake().api;
  CUcontext a = nullptr, b = nullptr, popped = nullptr;
  ASSERT_EQ(api.cuCtxCreate(&a, nullptr, 0, 0), CUDA_SUCCESS);
  api.cuCtxPopCurrent(&popped);
  ASSERT_EQ(api.cuCtxCreate(&b, nullptr, 0, 0), CUDA_SUCCESS);
  api.cuCtxPopCurrent(&popped);
  flashjit::BuiltinKernel kernel(R"(extern "C" __global__ void builtin_probe() {})", "builtin_probe", "probe", 100 * 1024);
  const uint64_t loads = fake().stats->module_loads, unloads = fake().stats->module_unloads;

  auto first = kernel.load(api, a);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto again = kernel.load(api, a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first->get()) << "the same module for the same context";
  EXPECT_EQ((*first)->dynamic_smem_bytes(), 100 * 1024);
  auto other = kernel.load(api, b);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->get(), first->get());
  EXPECT_EQ(fake().stats->module_loads - loads, 2u) << "one load per context";

  // Dropping a context unloads its module once nobody holds it, and only its own.
  first = flashjit::Error::make(flashjit::ErrorCode::kInternal, "released");
  again = flashjit::Error::make(flashjit::ErrorCode::kInternal, "released");
  kernel.drop(a);
  EXPECT_EQ(fake().stats->module_unloads - unloads, 1u);
  auto reloaded = kernel.load(api, a);
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ(fake().stats->module_loads - loads, 3u) << "loaded again after the drop";
  auto still = kernel.load(api, b);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->get(), other->get()) << "the other context's module survived the drop";
  reloaded = flashjit::Error::make(flashjit::ErrorCode::kInternal, "released");
  still = other = flashjit::Error::make(flashjit::ErrorCode::kInternal, "released");
  kernel.drop(a);
  kernel.drop(b);
  EXPECT_EQ(fake().stats->module_unloads - unloads, 3u);
  api.cuCtxDestroy(a);
  api.cuCtxDestroy(b);
}

// A check poisons its outputs and uploads its inputs with the legacy stream's memset and copy, then
// launches on a non-blocking stream, which does not wait for them: DeviceBuffer must have finished
// them before it returns (the fake counts a launch while such writes may still be running).
TEST(DeviceBufferFake, FillAndUploadFinishBeforeALaunchOnAnotherStream) {
  const DriverApi& api = *fake().api;
  CUcontext ctx = nullptr, popped = nullptr;
  ASSERT_EQ(api.cuCtxCreate(&ctx, nullptr, 0, 0), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  flashjit::BuiltinKernel kernel(R"(extern "C" __global__ void buffer_probe() {})", "buffer_probe", "probe", 0);
  auto loaded = kernel.load(api, ctx);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  flashjit::LaunchShape shape;
  const auto racing = [&] { return fake().stats->launches_racing_legacy_writes.load(); };
  const uint64_t before = racing();

  // The fake sees the race: a bare memset, then a launch.
  CUdeviceptr raw = 0;
  ASSERT_EQ(api.cuMemAlloc(&raw, 64), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD8(raw, 0xFF, 64), CUDA_SUCCESS);
  ASSERT_TRUE(flashjit::launch_kernel(api, (*loaded)->function(), shape, stream, nullptr).ok());
  EXPECT_EQ(racing() - before, 1u) << "the fake must count an unordered launch";
  ASSERT_EQ(api.cuCtxSynchronize(), CUDA_SUCCESS);

  // DeviceBuffer's poison and upload are done before the launch.
  {
    flashjit::DeviceBuffer out(api, 256), in(api, 256);
    out.fill_bytes(0xFF);
    ASSERT_TRUE(flashjit::launch_kernel(api, (*loaded)->function(), shape, stream, nullptr).ok());
    const std::vector<unsigned char> host(256, 1);
    in.upload(host.data(), host.size());
    ASSERT_TRUE(flashjit::launch_kernel(api, (*loaded)->function(), shape, stream, nullptr).ok());
  }
  EXPECT_EQ(racing() - before, 1u) << "a launch ran while DeviceBuffer's memset or copy might still be running";
  loaded = flashjit::Error::make(flashjit::ErrorCode::kInternal, "released");
  kernel.drop(ctx);
  api.cuMemFree(raw);
  api.cuStreamDestroy(stream);
  api.cuCtxPopCurrent(&popped);
  api.cuCtxDestroy(ctx);
}

TEST(BuiltinKernelFake, CompileErrorNamesTheKernelAndLoadsNothing) {
  const DriverApi& api = *fake().api;
  CUcontext a = nullptr, popped = nullptr;
  ASSERT_EQ(api.cuCtxCreate(&a, nullptr, 0, 0), CUDA_SUCCESS);
  api.cuCtxPopCurrent(&popped);
  flashjit::BuiltinKernel kernel("extern \"C\" __global__ void broken() { not_declared(); }", "broken", "broken probe");
  const uint64_t loads = fake().stats->module_loads;
  for (int attempt = 0; attempt < 2; ++attempt) {  // every load reports it (nothing half-made is kept)
    auto loaded = kernel.load(api, a);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.error().code, flashjit::ErrorCode::kCompileFailed);
    EXPECT_NE(loaded.error().message.find("broken probe"), std::string::npos) << loaded.error().message;
    EXPECT_NE(loaded.error().log.find("not_declared"), std::string::npos) << loaded.error().log;
  }
  EXPECT_EQ(fake().stats->module_loads, loads);
  api.cuCtxDestroy(a);
}

}  // namespace

int main(int argc, char** argv) {
  // The fake driver and its devices, before anything loads a driver: device 1 is an sm_80 part.
  setenv("FLASHJIT_LIBCUDA", FLASHJIT_FAKE_LIBCUDA, 1);
  setenv("FAKE_CUDA_DEVICE_COUNT", "2", 1);
  setenv("FAKE_CUDA_CC_1", "80", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
