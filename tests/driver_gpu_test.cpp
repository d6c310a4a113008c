// The driver stage on a real GPU: a tiny cubin compiled here with NVRTC, loaded, launched (plain,
// with a cluster, with more than 48 KB of dynamic shared memory), a TMA load through our tensor
// map checked element by element, several contexts, streams/events/graphs through the versioned
// entry points, and a clean process exit with modules still loaded. Skips with the reason where
// there is no driver or no Hopper GPU; the NVRTC part runs everywhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compile/nvrtc_library.hpp"
#include "driver/context.hpp"
#include "driver/device_info.hpp"
#include "driver/launch.hpp"
#include "driver/module.hpp"
#include "driver/tensor_map.hpp"
#include "driver_test_util.hpp"

namespace flashjit {
namespace {

// ---- the test kernels ----

constexpr const char* kSource = R"(
extern "C" __global__ void fill(int* p, int v) { p[threadIdx.x] = v; }

extern "C" __global__ void fill_blocks(int* p, int v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v + blockIdx.x; }

extern "C" __global__ void cluster_rank(int* p) {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) p[blockIdx.x] = int(rank);
}

extern "C" __global__ void smem_sum(int* out, int n) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long s = 0;
    for (int i = 0; i < n; ++i) s += buf[i];
    out[0] = int(s % 1000000007);
  }
}

struct alignas(64) TmaDesc { unsigned long long opaque[16]; };

// One TMA box {64 columns, rows, 1, 1} at (c0, c1, c2, c3), un-swizzled (128B) into out[rows][64].
extern "C" __global__ void tma_box(const __grid_constant__ TmaDesc map, unsigned short* out, int c0, int c1,
                                   int c2, int c3, int rows) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned base = unsigned(__cvta_generic_to_shared(raw));
  const unsigned tile = (base + 1023u) & ~1023u;
  const unsigned bar_addr = unsigned(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar_addr), "r"(1) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(rows * 128) : "memory");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 :: "r"(tile), "l"((unsigned long long)&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar_addr)
                 : "memory");
  }
  asm volatile("{\n.reg .pred P1;\nLAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" :: "r"(bar_addr), "r"(0) : "memory");
  const unsigned short* s = reinterpret_cast<const unsigned short*>(raw + (tile - base));
  for (int i = threadIdx.x; i < rows * 64; i += blockDim.x) {
    const int r = i / 64, col = i % 64;
    const int chunk = (col / 8) ^ (r & 7);  // 128B swizzle: 16-byte chunk j of row r sits at j ^ (r % 8)
    out[i] = s[r * 64 + chunk * 8 + col % 8];
  }
}
)";

Result<std::string> compile_test_cubin() {
  auto loaded = nvrtc();
  if (!loaded) return loaded.error();
  const NvrtcApi& api = **loaded;
  nvrtcProgram program = nullptr;
  if (api.nvrtcCreateProgram(&program, kSource, "driver_gpu_test.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    return Error::make(ErrorCode::kCompileFailed, "nvrtcCreateProgram failed");
  }
  const char* options[] = {"--gpu-architecture=sm_90a", "-std=c++17"};
  const nvrtcResult compiled = api.nvrtcCompileProgram(program, 2, options);
  size_t log_size = 0;
  api.nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size) api.nvrtcGetProgramLog(program, log.data());
  if (compiled != NVRTC_SUCCESS) {
    api.nvrtcDestroyProgram(&program);
    return Error::make(ErrorCode::kCompileFailed, api.nvrtcGetErrorString(compiled), log);
  }
  size_t size = 0;
  api.nvrtcGetCUBINSize(program, &size);
  std::string cubin(size, '\0');
  api.nvrtcGetCUBIN(program, cubin.data());
  api.nvrtcDestroyProgram(&program);
  return cubin;
}

const Result<std::string>& test_cubin() {
  static const Result<std::string> cubin = compile_test_cubin();
  return cubin;
}

TEST(GpuDriverCubin, TestKernelsCompileToSm90aCubinWithoutADriver) {
  const auto& cubin = test_cubin();
  ASSERT_TRUE(cubin.ok()) << cubin.error().message << "\n" << cubin.error().log;
  ASSERT_GT(cubin->size(), 4u);
  EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF"));
}

// ---- fixture: the driver, device 0 (Hopper) and its primary context made current ----

class GpuDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = driver();
    if (!api) GTEST_SKIP() << "no CUDA driver: " << api.error().message;
    api_ = *api;
    int count = 0;
    ASSERT_TRUE(check(*api_, api_->cuDeviceGetCount(&count), "cuDeviceGetCount").ok());
    if (count == 0) GTEST_SKIP() << "no CUDA device";
    auto device = query_device(*api_, 0);
    ASSERT_TRUE(device.ok()) << device.error().message;
    if (!device->is_hopper()) GTEST_SKIP() << "device 0 is " << describe_device(*device) << "; the test cubin is sm_90a";
    ASSERT_TRUE(test_cubin().ok()) << test_cubin().error().log;
    auto primary = PrimaryContext::retain(*api_, 0);
    ASSERT_TRUE(primary.ok()) << primary.error().message;
    primary_ = std::make_unique<PrimaryContext>(std::move(*primary));
    auto scope = ScopedContext::enter(*api_, primary_->get());
    ASSERT_TRUE(scope.ok()) << scope.error().message;
    scope_ = std::make_unique<ScopedContext>(std::move(*scope));
  }
  void TearDown() override {
    scope_.reset();
    primary_.reset();
  }

  std::shared_ptr<LoadedKernel> load(const char* name, int smem = 0, CUcontext context = nullptr) {
    auto kernel = LoadedKernel::load(*api_, context ? context : primary_->get(), *test_cubin(), name, smem);
    EXPECT_TRUE(kernel.ok()) << kernel.error().message;
    return kernel.ok() ? *kernel : nullptr;
  }

  const DriverApi* api_ = nullptr;
  std::unique_ptr<PrimaryContext> primary_;
  std::unique_ptr<ScopedContext> scope_;
};

// Device memory of the current context, freed on destruction.
struct DeviceMemory {
  const DriverApi& api;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceMemory(const DriverApi& a, size_t n) : api(a), bytes(n) {
    EXPECT_TRUE(check(api, api.cuMemAlloc(&ptr, n), "cuMemAlloc").ok());
  }
  ~DeviceMemory() {
    if (ptr) api.cuMemFree(ptr);
  }
  template <class T>
  std::vector<T> read(size_t count) const {
    std::vector<T> out(count);
    EXPECT_TRUE(check(api, api.cuMemcpyDtoH(out.data(), ptr, count * sizeof(T)), "cuMemcpyDtoH").ok());
    return out;
  }
};

TEST_F(GpuDriver, DeviceInfoDescribesAHopperGpu) {
  auto system = query_system();
  ASSERT_TRUE(system.ok()) << system.error().message;
  EXPECT_GE(system->driver_version, 12000);
  ASSERT_FALSE(system->devices.empty());
  std::printf("driver: %s (CUDA %s)\n", system->library.c_str(), cuda_version_string(system->driver_version).c_str());
  for (const DeviceInfo& d : system->devices) std::printf("%s\n", describe_device(d).c_str());
  const DeviceInfo& d = system->devices[0];
  EXPECT_FALSE(d.name.empty());
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GE(d.max_smem_optin_per_block, 227 * 1024);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_GT(d.total_memory_bytes, size_t(1) << 30);
}

TEST_F(GpuDriver, FillKernelLoadsLaunchesAndWrites) {
  auto fill = load("fill");
  ASSERT_NE(fill, nullptr);
  EXPECT_GT(fill->num_regs(), 0);
  EXPECT_EQ(fill->local_size_bytes(), 0);
  DeviceMemory out(*api_, 128 * sizeof(int));
  ASSERT_TRUE(check(*api_, api_->cuMemsetD32(out.ptr, 0xdeadbeef, 128), "cuMemsetD32").ok());
  int value = 1234567;
  void* args[] = {&out.ptr, &value};
  LaunchShape shape;
  shape.block_x = 96;
  ASSERT_TRUE(launch_kernel(*api_, fill->function(), shape, nullptr, args).ok());
  ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
  auto host = out.read<int>(128);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(host[i], i < 96 ? 1234567 : int(0xdeadbeef)) << i;
}

TEST_F(GpuDriver, ClusterLaunchGivesClusterRanks) {
  auto kernel = load("cluster_rank");
  ASSERT_NE(kernel, nullptr);
  DeviceMemory out(*api_, 8 * sizeof(int));
  void* args[] = {&out.ptr};
  LaunchShape shape;
  shape.grid_x = 8;
  shape.block_x = 32;
  shape.cluster_x = 2;
  ASSERT_TRUE(launch_kernel(*api_, kernel->function(), shape, nullptr, args).ok());
  ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
  auto ranks = out.read<int>(8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ranks[i], i % 2) << i;
  // Without a cluster every block is rank 0 of its own cluster.
  shape.cluster_x = 1;
  ASSERT_TRUE(launch_kernel(*api_, kernel->function(), shape, nullptr, args).ok());
  ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
  ranks = out.read<int>(8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ranks[i], 0) << i;
}

TEST_F(GpuDriver, DynamicSharedMemoryAbove48KBNeedsTheLoadTimeAttribute) {
  const int n = 50000;  // 200000 bytes
  const unsigned smem = n * sizeof(int);
  DeviceMemory out(*api_, sizeof(int));
  int count = n;
  void* args[] = {&out.ptr, &count};
  LaunchShape shape;
  shape.block_x = 256;
  shape.dynamic_smem_bytes = smem;

  auto big = load("smem_sum", int(smem));
  ASSERT_NE(big, nullptr);
  ASSERT_TRUE(launch_kernel(*api_, big->function(), shape, nullptr, args).ok());
  ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
  const long long expected = (long long)(n - 1) * n / 2 % 1000000007;
  EXPECT_EQ(out.read<int>(1)[0], int(expected));

  // Loaded without the opt-in, the same launch is refused by the driver.
  auto small = load("smem_sum", 0);
  ASSERT_NE(small, nullptr);
  Status refused = launch_kernel(*api_, small->function(), shape, nullptr, args);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kDriverError);
  EXPECT_NE(refused.error().message.find("cuLaunchKernelEx: CUDA_ERROR_"), std::string::npos) << refused.error().message;
}

TEST_F(GpuDriver, TensorMapLoadsTheRightBoxFromPackedQkv) {
  // K of a packed [B, S, 3, H, D] bf16 tensor, head_dim 96 (the 64-wide box runs past it: zeros),
  // seqlen 70 (the 64-row box at row 40 runs past it: zeros).
  const int B = 2, S = 70, H = 3, D = 96, rows = 64;
  auto value = [](int b, int s, int w, int h, int d) {
    return std::uint16_t((b * 40503u + s * 2654435761u + w * 97u + h * 7919u + d * 31u) >> 3 | 1u);
  };
  std::vector<std::uint16_t> host(size_t(B) * S * 3 * H * D);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s)
      for (int w = 0; w < 3; ++w)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) host[(((size_t(b) * S + s) * 3 + w) * H + h) * D + d] = value(b, s, w, h, d);
  DeviceMemory qkv(*api_, host.size() * 2);
  ASSERT_TRUE(check(*api_, api_->cuMemcpyHtoD(qkv.ptr, host.data(), host.size() * 2), "cuMemcpyHtoD").ok());

  TensorMapRequest k;
  k.name = "k";
  k.base = qkv.ptr + size_t(1) * H * D * 2;  // w = 1
  k.dtype = DType::kBf16;
  k.batch = B;
  k.seqlen = S;
  k.heads = H;
  k.head_dim = D;
  k.stride_seqlen = 3 * H * D;
  k.stride_heads = D;
  k.stride_batch = S * 3 * H * D;
  k.box_rows = rows;
  auto map = make_tensor_map_bshd(*api_, k);
  ASSERT_TRUE(map.ok()) << map.error().message;

  auto kernel = load("tma_box", rows * 128 + 1024);
  ASSERT_NE(kernel, nullptr);
  DeviceMemory out(*api_, size_t(rows) * 64 * 2);
  struct Box {
    int c0, c1, c2, c3;
  };
  for (const Box box : {Box{0, 0, 0, 0}, Box{64, 40, 2, 1}, Box{0, 17, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "box at {" << box.c0 << ", " << box.c1 << ", " << box.c2 << ", " << box.c3 << "}");
    int c0 = box.c0, c1 = box.c1, c2 = box.c2, c3 = box.c3, r = rows;
    void* args[] = {&*map, &out.ptr, &c0, &c1, &c2, &c3, &r};
    LaunchShape shape;
    shape.block_x = 128;
    shape.dynamic_smem_bytes = unsigned(kernel->dynamic_smem_bytes());
    ASSERT_TRUE(launch_kernel(*api_, kernel->function(), shape, nullptr, args).ok());
    ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
    auto got = out.read<std::uint16_t>(size_t(rows) * 64);
    int wrong = 0;
    for (int row = 0; row < rows; ++row) {
      for (int col = 0; col < 64; ++col) {
        const int s = box.c1 + row, d = box.c0 + col;
        const std::uint16_t want = s < S && d < D ? value(box.c3, s, 1, box.c2, d) : 0;
        if (got[size_t(row) * 64 + col] != want && wrong++ < 5) {
          ADD_FAILURE() << "row " << row << " col " << col << ": got " << got[size_t(row) * 64 + col] << ", want " << want;
        }
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST_F(GpuDriver, ModuleTableLoadsOncePerContextAndEachWorksInItsOwn) {
  if (!api_->cuCtxCreate) GTEST_SKIP() << "cuCtxCreate_v4 needs a CUDA 12.5+ driver";
  CUdevice device = 0;
  ASSERT_TRUE(check(*api_, api_->cuCtxGetDevice(&device), "cuCtxGetDevice").ok());
  CUcontext created = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuCtxCreate(&created, nullptr, 0, device), "cuCtxCreate").ok());
  CUcontext popped = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuCtxPopCurrent(&popped), "cuCtxPopCurrent").ok());  // cuCtxCreate pushed it
  EXPECT_EQ(popped, created);

  ModuleTable table;
  std::vector<std::shared_ptr<LoadedKernel>> got(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      CUcontext ctx = i % 2 ? created : primary_->get();
      auto k = table.get_or_load(*api_, ctx, "fill_blocks", *test_cubin(), "fill_blocks", 0);
      if (k.ok()) got[i] = *k;
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(table.size(), 2u);
  ASSERT_NE(got[0], nullptr);
  ASSERT_NE(got[1], nullptr);
  EXPECT_NE(got[0]->module(), got[1]->module());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], got[i % 2]) << i;

  for (int which = 0; which < 2; ++which) {
    auto scope = ScopedContext::enter(*api_, got[which]->context());
    ASSERT_TRUE(scope.ok());
    CUcontext current = nullptr;
    ASSERT_TRUE(check(*api_, api_->cuCtxGetCurrent(&current), "cuCtxGetCurrent").ok());
    EXPECT_EQ(current, which ? created : primary_->get());
    DeviceMemory out(*api_, 4 * 32 * sizeof(int));
    CUcontext owner = nullptr;
    ASSERT_TRUE(check(*api_, api_->cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, out.ptr),
                      "cuPointerGetAttribute")
                    .ok());
    EXPECT_EQ(owner, current);
    int base = 100 * (which + 1);
    void* args[] = {&out.ptr, &base};
    LaunchShape shape;
    shape.grid_x = 4;
    shape.block_x = 32;
    ASSERT_TRUE(launch_kernel(*api_, got[which]->function(), shape, nullptr, args).ok());
    ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());
    auto host = out.read<int>(4 * 32);
    for (int i = 0; i < 4 * 32; ++i) ASSERT_EQ(host[i], base + i / 32) << "context " << which << " element " << i;
  }

  got.clear();
  EXPECT_EQ(table.drop_context(created), 1u);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(check(*api_, api_->cuCtxDestroy(created), "cuCtxDestroy").ok());
}

TEST_F(GpuDriver, StreamsEventsAndGraphsThroughVersionedEntryPoints) {
  auto fill = load("fill_blocks");
  ASSERT_NE(fill, nullptr);
  CUstream stream = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate").ok());
  auto ctx = stream_context(*api_, stream);
  ASSERT_TRUE(ctx.ok());
  EXPECT_EQ(*ctx, primary_->get());
  CUevent start = nullptr, stop = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate").ok());
  ASSERT_TRUE(check(*api_, api_->cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate").ok());
  DeviceMemory out(*api_, 2 * 64 * sizeof(int));
  ASSERT_TRUE(check(*api_, api_->cuMemsetD8(out.ptr, 0, out.bytes), "cuMemsetD8").ok());
  // The legacy stream's memset is not ordered before work on a non-blocking stream: finish it.
  ASSERT_TRUE(check(*api_, api_->cuCtxSynchronize(), "cuCtxSynchronize").ok());

  int base = 7;
  void* args[] = {&out.ptr, &base};
  LaunchShape shape;
  shape.grid_x = 2;
  shape.block_x = 64;
  ASSERT_TRUE(check(*api_, api_->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                    "cuStreamBeginCapture").ok());
  ASSERT_TRUE(launch_kernel(*api_, fill->function(), shape, stream, args).ok());
  CUgraph graph = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture").ok());
  CUgraphExec exec = nullptr;
  ASSERT_TRUE(check(*api_, api_->cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiateWithFlags").ok());
  EXPECT_EQ(out.read<int>(1)[0], 0) << "captured, not run";

  ASSERT_TRUE(check(*api_, api_->cuEventRecord(start, stream), "cuEventRecord").ok());
  ASSERT_TRUE(check(*api_, api_->cuGraphLaunch(exec, stream), "cuGraphLaunch").ok());
  ASSERT_TRUE(check(*api_, api_->cuEventRecord(stop, stream), "cuEventRecord").ok());
  ASSERT_TRUE(check(*api_, api_->cuEventSynchronize(stop), "cuEventSynchronize").ok());
  ASSERT_TRUE(check(*api_, api_->cuStreamSynchronize(stream), "cuStreamSynchronize").ok());
  float ms = -1;
  ASSERT_NE(api_->cuEventElapsedTime, nullptr);
  ASSERT_TRUE(check(*api_, api_->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime").ok());
  EXPECT_GE(ms, 0.0f);
  auto host = out.read<int>(2 * 64);
  for (int i = 0; i < 2 * 64; ++i) ASSERT_EQ(host[i], 7 + i / 64) << i;

  EXPECT_TRUE(check(*api_, api_->cuGraphExecDestroy(exec), "cuGraphExecDestroy").ok());
  EXPECT_TRUE(check(*api_, api_->cuGraphDestroy(graph), "cuGraphDestroy").ok());
  EXPECT_TRUE(check(*api_, api_->cuEventDestroy(start), "cuEventDestroy").ok());
  EXPECT_TRUE(check(*api_, api_->cuEventDestroy(stop), "cuEventDestroy").ok());
  EXPECT_TRUE(check(*api_, api_->cuStreamDestroy(stream), "cuStreamDestroy").ok());
}

TEST_F(GpuDriver, BadCubinAndMissingKernelAreDriverErrors) {
  auto garbage = LoadedKernel::load(*api_, primary_->get(), std::string(256, 'x'), "fill", 0);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().code, ErrorCode::kDriverError);
  EXPECT_NE(garbage.error().message.find("cuModuleLoadData(fill): CUDA_ERROR_"), std::string::npos)
      << garbage.error().message;
  auto missing = LoadedKernel::load(*api_, primary_->get(), *test_cubin(), "no_such_kernel", 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cuModuleGetFunction(no_such_kernel): CUDA_ERROR_NOT_FOUND"), std::string::npos)
      << missing.error().message;
}

// ---- exit with modules still loaded (a namespace-scope table outlives main) ----

ModuleTable g_table_alive_at_exit;

int exit_with_loaded_modules_role(int, char**) {
  auto api = driver();
  if (!api) return 0;  // nothing to test without a driver
  auto primary = PrimaryContext::retain(**api, 0);
  const auto& cubin = test_cubin();
  if (!primary || !cubin.ok()) return 2;
  auto kernel = g_table_alive_at_exit.get_or_load(**api, primary->get(), "fill", *cubin, "fill", 0);
  if (!kernel) {
    std::printf("load failed: %s\n", kernel.error().message.c_str());
    return 3;
  }
  std::printf("loaded, exiting with the module still in the table\n");
  // NOTES: the primary context is deliberately left retained and the table alive: teardown order at
  // exit is the driver's business, our destructors must cope either way.
  new PrimaryContext(std::move(*primary));
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(driver_exit_with_modules, exit_with_loaded_modules_role);

TEST_F(GpuDriver, ProcessExitsCleanlyWithModulesLoaded) {
  auto run = testing::run_child_role("driver_exit_with_modules", {{"FLASHJIT_LOG_LEVEL", "warn"}});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("loaded, exiting"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("warn"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace flashjit
