// The CUDA driver, loaded at run time: dlopen("libcuda.so.1") once, every entry point fetched
// through cuGetProcAddress with the ABI version we mean. The driver is never linked, so compiling
// and caching work on machines without one; only launching needs it.
//
// NOTES: cuda.h is included for types and enums only. Its macros rename some identifiers
// (cuMemAlloc -> cuMemAlloc_v2, cuCtxCreate -> cuCtxCreate_v4, ...). The table's fields are spelled
// with the plain names, so the macros rename the field and every use of it alike; the field's type
// is the PFN_ typedef of the exact ABI we ask cuGetProcAddress for (cudaTypedefs.h), which is what
// makes the call sites type-check against the right signature.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "common/status.hpp"

// NOTES: the per-thread-default-stream macros would rename fields such as cuStreamSynchronize to
// cuStreamSynchronize_ptsz in some translation units and not in others: one table, one spelling.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM) || defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "flashjit's driver table assumes the legacy default stream (no per-thread default stream macros)"
#endif

namespace flashjit {

inline constexpr const char* kDefaultDriverLibrary = "libcuda.so.1";
inline constexpr const char* kDriverLibraryEnv = "FLASHJIT_LIBCUDA";  // a path that replaces it

// Every driver function flashjit calls. The suffix of each type is the CUDA version whose ABI the
// pointer has (the cudaVersion passed to cuGetProcAddress).
struct DriverApi {
  // Initialisation, version, devices.
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetCount_v2000 cuDeviceGetCount = nullptr;
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem = nullptr;
  // Contexts.
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 cuCtxGetDevice = nullptr;     // not the 13.0 (device, ctx) form
  PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent = nullptr;
  PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent = nullptr;
  PFN_cuCtxSynchronize_v2000 cuCtxSynchronize = nullptr;  // not the 13.0 (ctx) form
  PFN_cuStreamGetCtx_v9020 cuStreamGetCtx = nullptr;      // not the 12.5 green-context form
  PFN_cuCtxCreate_v12050 cuCtxCreate = nullptr;           // null when the driver predates 12.5
  PFN_cuCtxDestroy_v4000 cuCtxDestroy = nullptr;
  // Modules and launch.
  PFN_cuModuleLoadData_v2000 cuModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuFuncSetAttribute_v9000 cuFuncSetAttribute = nullptr;
  PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute = nullptr;
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 cuTensorMapEncodeTiled = nullptr;
  // Errors.
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  // Memory.
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD = nullptr;
  PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH = nullptr;
  PFN_cuMemsetD8_v3020 cuMemsetD8 = nullptr;
  PFN_cuMemsetD32_v3020 cuMemsetD32 = nullptr;
  PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute = nullptr;
  // Streams, events, graphs.
  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  PFN_cuStreamSynchronize_v2000 cuStreamSynchronize = nullptr;
  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventRecord_v2000 cuEventRecord = nullptr;
  PFN_cuEventSynchronize_v2000 cuEventSynchronize = nullptr;
  PFN_cuEventElapsedTime_v12080 cuEventElapsedTime = nullptr;  // the 2.0 ABI (same signature) before 12.8
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture = nullptr;
  PFN_cuStreamEndCapture_v10000 cuStreamEndCapture = nullptr;
  PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiate = nullptr;  // cuGraphInstantiateWithFlags
  PFN_cuGraphLaunch_v10000 cuGraphLaunch = nullptr;
  PFN_cuGraphDestroy_v10000 cuGraphDestroy = nullptr;
  PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy = nullptr;

  int driver_version = 0;    // cuDriverGetVersion: 13000 = CUDA 13.0
  std::string library;       // what was dlopen'ed (empty for a table built by hand)
};

// cuGetProcAddress as we call it. The 12.0 ABI (cuGetProcAddress_v2) reports why a lookup failed;
// the 11.3 ABI (the symbol plainly named cuGetProcAddress in a 12.x/13.x driver) does not.
struct ProcAddressFn {
  PFN_cuGetProcAddress_v12000 v2 = nullptr;
  PFN_cuGetProcAddress_v11030 v1 = nullptr;
  CUresult operator()(const char* symbol, void** pfn, int cuda_version,
                      CUdriverProcAddressQueryResult* status) const;
};

// The process-wide table: loaded once, lazily, thread-safely, from $FLASHJIT_LIBCUDA or
// libcuda.so.1. kDriverUnavailable when the library is missing, is not a CUDA driver, is too old,
// or cuInit fails (no device). The error is kept: later calls return it again without retrying.
Result<const DriverApi*> driver();

// One load from an explicit path (or soname): dlopen, resolve, cuInit. A fresh table each call;
// used by driver() and by the tests. The library handle of a successful load is never closed.
Result<DriverApi> load_driver_from(const std::string& path);

// Resolves every entry point of DriverApi through get_proc (no cuInit). Split out so a fake
// cuGetProcAddress can check which ABI versions are asked for.
Result<DriverApi> resolve_driver_api(const ProcAddressFn& get_proc);

// Ok for CUDA_SUCCESS; otherwise kDriverError "<what>: CUDA_ERROR_NAME: description".
Status check(const DriverApi& api, CUresult result, const char* what);
// Same, with the process-wide table for the names (the numeric code when there is none).
Status check(CUresult result, const char* what);

// "CUDA_ERROR_NAME: description" for a result (never null, even with a partial table).
std::string describe(const DriverApi& api, CUresult result);

// "13.0" for 13000.
std::string cuda_version_string(int version);

// NOTES: at process exit the driver may be torn down before our static objects are destroyed; a
// call then returns CUDA_ERROR_DEINITIALIZED. note_deinitialized() records that (returns true for
// that code) and driver_shut_down() tells teardown code to make no further calls.
bool note_deinitialized(CUresult result);
bool driver_shut_down();

}  // namespace flashjit
