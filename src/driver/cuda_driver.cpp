#include "driver/cuda_driver.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

#include "common/log.hpp"

namespace flashjit {
namespace {

// NOTES: flashjit needs CUDA 12.0 at least: cuTensorMapEncodeTiled (TMA, Hopper) and
// cuGetProcAddress_v2 both came with it.
constexpr int kMinDriverVersion = 12000;

std::atomic<bool> g_driver_shut_down{false};

Error unavailable(const std::string& what) {
  return Error::make(ErrorCode::kDriverUnavailable,
                     what + "; compiling and caching work without it, launching needs an NVIDIA driver");
}

// How a library is named in messages: always mentions libcuda so the reader knows what was meant.
std::string library_label(const std::string& path) {
  if (path == kDefaultDriverLibrary) return path;
  return path + " (in place of " + std::string(kDefaultDriverLibrary) + ")";
}

std::string dl_error_text() {
  const char* text = dlerror();
  return text ? text : "unknown dlerror";
}

// Step 1: the library itself.
Result<void*> open_library(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const std::string place = path == kDefaultDriverLibrary ? path : path + " in place of " + kDefaultDriverLibrary;
    return unavailable("CUDA driver not found (dlopen " + place + ": " + dl_error_text() + ")");
  }
  return handle;
}

// Step 2: cuGetProcAddress, the one symbol taken with dlsym.
// NOTES: since CUDA 12.0 the export named "cuGetProcAddress" keeps the 11.3 ABI (4 arguments) and
// the 5-argument one is "cuGetProcAddress_v2"; the header's macro hides that, dlsym does not.
Result<ProcAddressFn> find_get_proc_address(void* handle, const std::string& path) {
  ProcAddressFn fn;
  dlerror();
  fn.v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!fn.v2) fn.v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(handle, "cuGetProcAddress"));
  if (!fn.v2 && !fn.v1) {
    return unavailable(library_label(path) +
                       " is not a usable CUDA driver: it exports neither cuGetProcAddress_v2 nor cuGetProcAddress (" +
                       dl_error_text() + ")");
  }
  return fn;
}

const char* lookup_status_text(CUdriverProcAddressQueryResult status) {
  switch (status) {
    case CU_GET_PROC_ADDRESS_SUCCESS: return "found but null";
    case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: return "symbol not found";
    case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: return "not available for that CUDA version";
  }
  return "unknown lookup status";
}

// Fetches entry points into a table; remembers the first required one that is missing.
class Resolver {
 public:
  Resolver(const ProcAddressFn& get_proc, DriverApi& api) : get_proc_(get_proc), api_(api) {}

  // A function flashjit cannot work without, at exactly this ABI.
  template <class Fn>
  void required(Fn& slot, const char* name, int version) {
    std::string why;
    slot = reinterpret_cast<Fn>(fetch(name, version, &why));
    if (!slot && missing_.empty()) {
      missing_ = std::string(name) + " (ABI of CUDA " + cuda_version_string(version) + "): " + why;
    }
  }

  // A function whose newer ABI the driver may predate. fallback_version names an older ABI with
  // the same signature (0: none, the slot stays null).
  template <class Fn>
  void optional(Fn& slot, const char* name, int version, int fallback_version = 0) {
    std::string why;
    void* pfn = fetch(name, version, &why);
    if (!pfn && fallback_version) pfn = fetch(name, fallback_version, &why);
    slot = reinterpret_cast<Fn>(pfn);
    if (!slot) logger().debug("CUDA driver: {} unavailable ({}); leaving it null", name, why);
  }

  const std::string& first_missing() const { return missing_; }

 private:
  void* fetch(const char* name, int version, std::string* why) {
    // NOTES: asking for a version newer than the driver is CUDA_ERROR_INVALID_VALUE by contract;
    // say so plainly instead.
    if (api_.driver_version && version > api_.driver_version) {
      *why = "the driver supports CUDA " + cuda_version_string(api_.driver_version) + " only";
      return nullptr;
    }
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult result = get_proc_(name, &pfn, version, &status);
    if (result != CUDA_SUCCESS) {
      *why = "cuGetProcAddress: " + describe(api_, result);
      return nullptr;
    }
    if (!pfn) *why = lookup_status_text(status);
    return pfn;
  }

  const ProcAddressFn& get_proc_;
  DriverApi& api_;
  std::string missing_;
};

// Step 3a: what the driver says about itself, needed to pick what to ask for.
Status resolve_version(Resolver& resolve, DriverApi& api) {
  resolve.required(api.cuGetErrorName, "cuGetErrorName", 6000);
  resolve.required(api.cuGetErrorString, "cuGetErrorString", 6000);
  resolve.required(api.cuDriverGetVersion, "cuDriverGetVersion", 2020);
  if (!resolve.first_missing().empty()) {
    return unavailable("not a usable CUDA driver: cuGetProcAddress has no " + resolve.first_missing());
  }
  int version = 0;
  if (CUresult r = api.cuDriverGetVersion(&version); r != CUDA_SUCCESS) {
    return unavailable("cuDriverGetVersion failed: " + describe(api, r));
  }
  if (version < kMinDriverVersion) {
    return unavailable("the NVIDIA driver supports CUDA " + cuda_version_string(version) + "; flashjit needs " +
                       cuda_version_string(kMinDriverVersion) + " or newer (tensor maps, Hopper)");
  }
  api.driver_version = version;
  return Status::Ok();
}

// Step 3b: everything else, each at the ABI its field's type names (see cuda_driver.hpp).
void resolve_entry_points(Resolver& r, DriverApi& api) {
  r.required(api.cuInit, "cuInit", 2000);
  r.required(api.cuDeviceGet, "cuDeviceGet", 2000);
  r.required(api.cuDeviceGetCount, "cuDeviceGetCount", 2000);
  r.required(api.cuDeviceGetName, "cuDeviceGetName", 2000);
  r.required(api.cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  r.required(api.cuDeviceTotalMem, "cuDeviceTotalMem", 3020);
  r.required(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  r.required(api.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000);
  r.required(api.cuCtxGetCurrent, "cuCtxGetCurrent", 4000);
  r.required(api.cuCtxSetCurrent, "cuCtxSetCurrent", 4000);
  r.required(api.cuCtxGetDevice, "cuCtxGetDevice", 2000);
  r.required(api.cuCtxPushCurrent, "cuCtxPushCurrent", 4000);
  r.required(api.cuCtxPopCurrent, "cuCtxPopCurrent", 4000);
  r.required(api.cuCtxSynchronize, "cuCtxSynchronize", 2000);
  r.required(api.cuStreamGetCtx, "cuStreamGetCtx", 9020);
  r.optional(api.cuCtxCreate, "cuCtxCreate", 12050);
  r.required(api.cuCtxDestroy, "cuCtxDestroy", 4000);
  r.required(api.cuModuleLoadData, "cuModuleLoadData", 2000);
  r.required(api.cuModuleUnload, "cuModuleUnload", 2000);
  r.required(api.cuModuleGetFunction, "cuModuleGetFunction", 2000);
  r.required(api.cuFuncSetAttribute, "cuFuncSetAttribute", 9000);
  r.required(api.cuFuncGetAttribute, "cuFuncGetAttribute", 2020);
  r.required(api.cuLaunchKernelEx, "cuLaunchKernelEx", 11060);
  r.required(api.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", 12000);
  r.required(api.cuMemAlloc, "cuMemAlloc", 3020);
  r.required(api.cuMemFree, "cuMemFree", 3020);
  r.required(api.cuMemcpyHtoD, "cuMemcpyHtoD", 3020);
  r.required(api.cuMemcpyDtoH, "cuMemcpyDtoH", 3020);
  r.required(api.cuMemsetD8, "cuMemsetD8", 3020);
  r.required(api.cuMemsetD32, "cuMemsetD32", 3020);
  r.required(api.cuPointerGetAttribute, "cuPointerGetAttribute", 4000);
  r.required(api.cuStreamCreate, "cuStreamCreate", 2000);
  r.required(api.cuStreamDestroy, "cuStreamDestroy", 4000);
  r.required(api.cuStreamSynchronize, "cuStreamSynchronize", 2000);
  r.required(api.cuEventCreate, "cuEventCreate", 2000);
  r.required(api.cuEventRecord, "cuEventRecord", 2000);
  r.required(api.cuEventSynchronize, "cuEventSynchronize", 2000);
  r.optional(api.cuEventElapsedTime, "cuEventElapsedTime", 12080, 2000);
  r.required(api.cuEventDestroy, "cuEventDestroy", 4000);
  r.required(api.cuStreamBeginCapture, "cuStreamBeginCapture", 10010);
  r.required(api.cuStreamEndCapture, "cuStreamEndCapture", 10000);
  // NOTES: asked for by its own name; cuda.h maps cuGraphInstantiate to it since 12.0.
  r.required(api.cuGraphInstantiate, "cuGraphInstantiateWithFlags", 11040);
  r.required(api.cuGraphLaunch, "cuGraphLaunch", 10000);
  r.required(api.cuGraphDestroy, "cuGraphDestroy", 10000);
  r.required(api.cuGraphExecDestroy, "cuGraphExecDestroy", 10000);
}

// Step 4: cuInit, where a machine without a GPU says so.
Status initialise(const DriverApi& api, const std::string& path) {
  CUresult r = api.cuInit(0);
  if (r == CUDA_SUCCESS) return Status::Ok();
  return unavailable("CUDA driver loaded (" + library_label(path) + ", CUDA " + cuda_version_string(api.driver_version) +
                     ") but cuInit failed: " + describe(api, r));
}

std::string driver_library_path() {
  const char* override_path = std::getenv(kDriverLibraryEnv);
  return override_path && *override_path ? override_path : kDefaultDriverLibrary;
}

}  // namespace

CUresult ProcAddressFn::operator()(const char* symbol, void** pfn, int cuda_version,
                                   CUdriverProcAddressQueryResult* status) const {
  if (v2) return v2(symbol, pfn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, status);
  CUresult r = v1(symbol, pfn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT);
  if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return r;
}

Result<DriverApi> resolve_driver_api(const ProcAddressFn& get_proc) {
  DriverApi api;
  Resolver resolve(get_proc, api);
  if (Status s = resolve_version(resolve, api); !s) return s.take_error();
  resolve_entry_points(resolve, api);
  if (!resolve.first_missing().empty()) {
    return unavailable("the NVIDIA driver (CUDA " + cuda_version_string(api.driver_version) + ") lacks " +
                       resolve.first_missing());
  }
  return api;
}

Result<DriverApi> load_driver_from(const std::string& path) {
  auto handle = open_library(path);
  if (!handle) return handle.take_error();
  auto get_proc = find_get_proc_address(*handle, path);
  if (!get_proc) {
    // NOTES: nothing of it was called, so closing is safe. A library we did call into stays
    // loaded (a driver may have started threads or registered exit handlers).
    dlclose(*handle);
    return get_proc.take_error();
  }
  auto api = resolve_driver_api(*get_proc);
  if (!api) {
    Error error = api.take_error();
    error.message = library_label(path) + ": " + error.message;
    return error;
  }
  api->library = path;
  if (Status s = initialise(*api, path); !s) return s.take_error();
  return api;
}

Result<const DriverApi*> driver() {
  // NOTES: allocated and never freed, so static destructors that run after this one (a module
  // table unloading at exit) can still ask for the table. The initialisation is thread-safe.
  static const Result<DriverApi>* loaded = [] {
    auto* result = new Result<DriverApi>(load_driver_from(driver_library_path()));
    if (result->ok()) {
      logger().info("CUDA driver loaded: {} (CUDA {})", (*result)->library, cuda_version_string((*result)->driver_version));
    } else {
      logger().info("{}", result->error().message);
    }
    return result;
  }();
  if (!loaded->ok()) return loaded->error();
  return &loaded->value();
}

std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (!api.cuGetErrorName || api.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) name = nullptr;
  if (!api.cuGetErrorString || api.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text) text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(int(result));
  if (text) out += std::string(": ") + text;
  return out;
}

Status check(const DriverApi& api, CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  note_deinitialized(result);
  return Error::make(ErrorCode::kDriverError, std::string(what) + ": " + describe(api, result));
}

Status check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  auto api = driver();
  return check(api.ok() ? **api : DriverApi{}, result, what);
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

bool note_deinitialized(CUresult result) {
  if (result != CUDA_ERROR_DEINITIALIZED) return false;
  g_driver_shut_down.store(true, std::memory_order_relaxed);
  return true;
}

bool driver_shut_down() { return g_driver_shut_down.load(std::memory_order_relaxed); }

}  // namespace flashjit
