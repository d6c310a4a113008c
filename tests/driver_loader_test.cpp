// The driver loader without a driver: every way of not having one gives kDriverUnavailable with a
// message that names libcuda and says launching needs a driver; and, with a fake cuGetProcAddress,
// which entry points are asked for at which ABI version.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "driver/cuda_driver.hpp"
#include "driver/device_info.hpp"
#include "driver/tensor_map.hpp"
#include "driver_test_util.hpp"

namespace flashjit {
namespace {

void expect_unavailable(const Error& error, const std::string& path) {
  EXPECT_EQ(error.code, ErrorCode::kDriverUnavailable) << error.message;
  EXPECT_NE(error.message.find("libcuda"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(path), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("launching needs an NVIDIA driver"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("compiling and caching work without it"), std::string::npos) << error.message;
}

// A file that exists and is not a shared object.
std::string text_file() {
  std::string path = ::testing::TempDir() + "flashjit_not_a_library_" + std::to_string(getpid()) + ".so";
  std::ofstream(path) << "this is not an ELF file\n";
  return path;
}

TEST(DriverLoader, MissingLibraryIsUnavailable) {
  auto api = load_driver_from("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(api.ok());
  expect_unavailable(api.error(), "/nonexistent/libcuda.so.1");
  EXPECT_NE(api.error().message.find("CUDA driver not found (dlopen"), std::string::npos) << api.error().message;
}

TEST(DriverLoader, FileThatIsNotALibraryIsUnavailable) {
  std::vector<std::string> paths = {text_file()};
  if (access("/etc/hostname", R_OK) == 0) paths.push_back("/etc/hostname");
  for (const std::string& path : paths) {
    auto api = load_driver_from(path);
    ASSERT_FALSE(api.ok()) << path;
    expect_unavailable(api.error(), path);
    EXPECT_NE(api.error().message.find("CUDA driver not found (dlopen"), std::string::npos) << api.error().message;
  }
  std::remove(paths[0].c_str());
}

TEST(DriverLoader, SharedObjectWithoutDriverSymbolsIsUnavailable) {
  auto api = load_driver_from("libz.so.1");
  ASSERT_FALSE(api.ok());
  expect_unavailable(api.error(), "libz.so.1");
  EXPECT_NE(api.error().message.find("is not a usable CUDA driver"), std::string::npos) << api.error().message;
  EXPECT_NE(api.error().message.find("cuGetProcAddress"), std::string::npos) << api.error().message;
}

TEST(DriverLoader, DefaultLibraryLoadsOrSaysWhy) {
  auto api = load_driver_from(kDefaultDriverLibrary);
  if (api.ok()) {
    EXPECT_GE(api->driver_version, 12000);
    EXPECT_EQ(api->library, kDefaultDriverLibrary);
    GTEST_SKIP() << "a CUDA driver is present (CUDA " << cuda_version_string(api->driver_version) << ")";
  }
  expect_unavailable(api.error(), kDefaultDriverLibrary);
}

TEST(DriverLoader, ProcessWideTableIsLoadedOnceAndKeepsItsAnswer) {
  auto first = driver();
  auto second = driver();
  ASSERT_EQ(first.ok(), second.ok());
  if (first.ok()) {
    EXPECT_EQ(*first, *second);
  } else {
    EXPECT_EQ(first.error().code, ErrorCode::kDriverUnavailable);
    EXPECT_EQ(first.error().message, second.error().message);
    EXPECT_NE(first.error().message.find("libcuda"), std::string::npos) << first.error().message;
  }
}

// ---- FLASHJIT_LIBCUDA, through a child process (the process-wide table is loaded once) ----

void print_outcome(const char* what, const Status& status, bool* all_unavailable) {
  std::printf("%s: %s\n", what, status.ok() ? "ok" : status.error().message.c_str());
  *all_unavailable = *all_unavailable && !status.ok() && status.error().code == ErrorCode::kDriverUnavailable;
}

template <class T>
Status status_of(const Result<T>& result) {
  return result.ok() ? Status::Ok() : Status(result.error());
}

// Every public entry point that needs the process-wide driver, with a bad FLASHJIT_LIBCUDA.
int env_override_role(int, char**) {
  bool all_unavailable = true;
  print_outcome("driver", status_of(driver()), &all_unavailable);
  print_outcome("query_system", status_of(query_system()), &all_unavailable);
  TensorMapRequest request;
  request.name = "q";
  request.base = 0x10000;
  request.head_dim = 128;
  request.seqlen = 256;
  request.heads = 4;
  request.batch = 2;
  request.stride_seqlen = 4 * 128;
  request.stride_heads = 128;
  request.stride_batch = 256 * 4 * 128;
  print_outcome("make_tensor_map_bshd", status_of(make_tensor_map_bshd(request)), &all_unavailable);
  return all_unavailable ? 0 : 1;
}
FLASHJIT_REGISTER_CHILD_ROLE(driver_env_override, env_override_role);

TEST(DriverLoader, EnvOverrideIsUsedByEveryEntryPoint) {
  const std::string not_a_library = text_file();
  for (const std::string& path : {std::string("/nonexistent/libcuda.so.1"), not_a_library, std::string("libz.so.1")}) {
    auto run = testing::run_child_role("driver_env_override", {{kDriverLibraryEnv, path}});
    EXPECT_EQ(run.exit_code, 0) << path << "\n" << run.output;
    for (const char* line : {"driver: ", "query_system: ", "make_tensor_map_bshd: "}) {
      const size_t at = run.output.find(line);
      ASSERT_NE(at, std::string::npos) << run.output;
      const std::string text = run.output.substr(at, run.output.find('\n', at) - at);
      EXPECT_NE(text.find(path), std::string::npos) << text;
      EXPECT_NE(text.find("launching needs an NVIDIA driver"), std::string::npos) << text;
    }
  }
  std::remove(not_a_library.c_str());
}

// ---- the driver is loaded at run time, never linked ----

bool libcuda_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcuda.so") != std::string::npos) return true;
  }
  return false;
}

int not_linked_role(int, char**) {
  std::printf("at start: %s\n", libcuda_mapped() ? "libcuda mapped" : "no libcuda");
  auto api = driver();
  std::printf("after driver(): %s, %s\n", api.ok() ? "loaded" : "unavailable", libcuda_mapped() ? "libcuda mapped" : "no libcuda");
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(driver_not_linked, not_linked_role);

TEST(DriverLoader, DriverIsNotLinkedOnlyOpenedOnDemand) {
  // A process that never asks for the driver never maps it: the binary does not depend on it
  // (if it did, it would not even start on a machine without libcuda.so.1).
  auto run = testing::run_child_role("driver_not_linked", {});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("at start: no libcuda"), std::string::npos) << run.output;
  const bool loaded = run.output.find("after driver(): loaded, libcuda mapped") != std::string::npos;
  const bool absent = run.output.find("after driver(): unavailable, no libcuda") != std::string::npos;
  EXPECT_TRUE(loaded || absent) << run.output;
}

// ---- resolution through a fake cuGetProcAddress ----

struct FakeProcs {
  static inline int driver_version = 13000;
  static inline std::string missing;  // answered as not found
  static inline std::vector<std::pair<std::string, int>> asked;
  static inline bool bad_flags = false;

  static void reset(int version) {
    driver_version = version;
    missing.clear();
    asked.clear();
    bad_flags = false;
  }
  static CUresult get_version(int* version) {
    *version = driver_version;
    return CUDA_SUCCESS;
  }
  static CUresult error_name(CUresult, const char** name) {
    *name = "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
  }
  static CUresult any_function() { return CUDA_SUCCESS; }

  static void* lookup(const char* symbol, int version) {
    asked.emplace_back(symbol, version);
    if (version > driver_version || missing == symbol) return nullptr;
    if (!std::strcmp(symbol, "cuDriverGetVersion")) return reinterpret_cast<void*>(&get_version);
    if (!std::strcmp(symbol, "cuGetErrorName") || !std::strcmp(symbol, "cuGetErrorString")) {
      return reinterpret_cast<void*>(&error_name);
    }
    return reinterpret_cast<void*>(&any_function);
  }
  static CUresult get_proc_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                              CUdriverProcAddressQueryResult* status) {
    bad_flags = bad_flags || flags != CU_GET_PROC_ADDRESS_DEFAULT;
    *pfn = lookup(symbol, version);
    if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return version > driver_version ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  }
  static CUresult get_proc_v1(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    return get_proc_v2(symbol, pfn, version, flags, nullptr);
  }
};

ProcAddressFn fake_v2() {
  ProcAddressFn fn;
  fn.v2 = &FakeProcs::get_proc_v2;
  return fn;
}

// The function pointers of a table (every field before driver_version is one).
std::vector<void*> entry_points(const DriverApi& api) {
  const size_t count = size_t(reinterpret_cast<const char*>(&api.driver_version) - reinterpret_cast<const char*>(&api)) /
                       sizeof(void*);
  std::vector<void*> out(count);
  std::memcpy(out.data(), &api, count * sizeof(void*));
  return out;
}

// Written from cuda.h / cudaTypedefs.h of CUDA 13.0: the ABI each name means in that header.
const std::map<std::string, int> kExpectedVersions = {
    {"cuInit", 2000}, {"cuDriverGetVersion", 2020}, {"cuDeviceGet", 2000}, {"cuDeviceGetCount", 2000},
    {"cuDeviceGetName", 2000}, {"cuDeviceGetAttribute", 2000}, {"cuDeviceTotalMem", 3020},
    {"cuDevicePrimaryCtxRetain", 7000}, {"cuDevicePrimaryCtxRelease", 11000}, {"cuCtxGetCurrent", 4000},
    {"cuCtxSetCurrent", 4000}, {"cuCtxGetDevice", 2000}, {"cuCtxPushCurrent", 4000}, {"cuCtxPopCurrent", 4000},
    {"cuCtxSynchronize", 2000}, {"cuStreamGetCtx", 9020}, {"cuCtxCreate", 12050}, {"cuCtxDestroy", 4000},
    {"cuModuleLoadData", 2000}, {"cuModuleUnload", 2000}, {"cuModuleGetFunction", 2000},
    {"cuFuncSetAttribute", 9000}, {"cuFuncGetAttribute", 2020}, {"cuLaunchKernelEx", 11060},
    {"cuTensorMapEncodeTiled", 12000}, {"cuGetErrorName", 6000}, {"cuGetErrorString", 6000},
    {"cuMemAlloc", 3020}, {"cuMemFree", 3020}, {"cuMemcpyHtoD", 3020}, {"cuMemcpyDtoH", 3020},
    {"cuMemsetD8", 3020}, {"cuMemsetD32", 3020}, {"cuPointerGetAttribute", 4000}, {"cuStreamCreate", 2000},
    {"cuStreamDestroy", 4000}, {"cuStreamSynchronize", 2000}, {"cuEventCreate", 2000}, {"cuEventRecord", 2000},
    {"cuEventSynchronize", 2000}, {"cuEventElapsedTime", 12080}, {"cuEventDestroy", 4000},
    {"cuStreamBeginCapture", 10010}, {"cuStreamEndCapture", 10000}, {"cuGraphInstantiateWithFlags", 11040},
    {"cuGraphLaunch", 10000}, {"cuGraphDestroy", 10000}, {"cuGraphExecDestroy", 10000},
};

TEST(DriverResolve, AsksEveryEntryPointOnceAtItsAbiVersion) {
  FakeProcs::reset(13000);
  auto api = resolve_driver_api(fake_v2());
  ASSERT_TRUE(api.ok()) << api.error().message;
  EXPECT_EQ(api->driver_version, 13000);
  EXPECT_FALSE(FakeProcs::bad_flags) << "every lookup passes CU_GET_PROC_ADDRESS_DEFAULT";
  std::map<std::string, int> asked;
  for (const auto& [name, version] : FakeProcs::asked) {
    EXPECT_TRUE(asked.emplace(name, version).second) << name << " asked twice";
  }
  EXPECT_EQ(asked, kExpectedVersions);
  const auto pointers = entry_points(*api);
  EXPECT_EQ(pointers.size(), kExpectedVersions.size());
  for (size_t i = 0; i < pointers.size(); ++i) EXPECT_NE(pointers[i], nullptr) << "field " << i;
}

TEST(DriverResolve, OlderDriverNeverGetsAskedAboveItsVersion) {
  FakeProcs::reset(12040);
  auto api = resolve_driver_api(fake_v2());
  ASSERT_TRUE(api.ok()) << api.error().message;
  for (const auto& [name, version] : FakeProcs::asked) EXPECT_LE(version, 12040) << name;
  EXPECT_EQ(api->cuCtxCreate, nullptr) << "cuCtxCreate_v4 is 12.5: no same-signature fallback";
  EXPECT_NE(api->cuEventElapsedTime, nullptr) << "falls back to the 2.0 ABI (same signature)";
  bool elapsed_at_2000 = false;
  for (const auto& [name, version] : FakeProcs::asked) elapsed_at_2000 |= name == "cuEventElapsedTime" && version == 2000;
  EXPECT_TRUE(elapsed_at_2000);
}

TEST(DriverResolve, DriverOlderThan12IsUnavailable) {
  FakeProcs::reset(11080);
  auto api = resolve_driver_api(fake_v2());
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.error().code, ErrorCode::kDriverUnavailable);
  EXPECT_NE(api.error().message.find("supports CUDA 11.8"), std::string::npos) << api.error().message;
  EXPECT_NE(api.error().message.find("12.0 or newer"), std::string::npos) << api.error().message;
}

TEST(DriverResolve, MissingRequiredEntryPointIsNamed) {
  FakeProcs::reset(13000);
  FakeProcs::missing = "cuTensorMapEncodeTiled";
  auto api = resolve_driver_api(fake_v2());
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.error().code, ErrorCode::kDriverUnavailable);
  EXPECT_NE(api.error().message.find("lacks cuTensorMapEncodeTiled (ABI of CUDA 12.0): symbol not found"),
            std::string::npos)
      << api.error().message;
}

TEST(DriverResolve, LegacyGetProcAddressIsUsedWhenV2IsAbsent) {
  FakeProcs::reset(13000);
  ProcAddressFn legacy;
  legacy.v1 = &FakeProcs::get_proc_v1;
  auto api = resolve_driver_api(legacy);
  ASSERT_TRUE(api.ok()) << api.error().message;
  EXPECT_EQ(FakeProcs::asked.size(), kExpectedVersions.size());
  FakeProcs::missing = "cuMemAlloc";
  auto partial = resolve_driver_api(legacy);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("cuMemAlloc (ABI of CUDA 3.2): symbol not found"), std::string::npos)
      << partial.error().message;
}

}  // namespace
}  // namespace flashjit
