// The fake CUDA driver described in api_fake_libcuda.hpp. Only cuGetProcAddress_v2 (and the fake_*
// inspection functions) are exported; every entry point flashjit resolves is a static function
// here, type-checked against the PFN_ typedef of the ABI flashjit asks for.
//
// NOTES: the functions the launch path calls (cuStreamGetCtx, cuCtxGetCurrent, push/pop,
// cuTensorMapEncodeTiled, cuLaunchKernelEx) never allocate, so the tests can count the library's
// own allocations around a launch.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api_fake_libcuda.hpp"

namespace {

constexpr int kMaxDevices = 8;

struct FakeContext {
  int device = 0;
  bool primary = false;
};
struct FakeGraph;
struct FakeStream {
  FakeContext* context = nullptr;
  FakeGraph* capture = nullptr;  // set while capturing
};
struct FakeModule {
  FakeContext* context = nullptr;
};
struct FakeFunction {
  FakeModule* module = nullptr;
};
struct FakeGraph {
  static constexpr int kMaxLaunches = 64;
  FakeCudaLaunch launches[kMaxLaunches];
  int count = 0;
};

FakeCudaStats g_stats{};
std::mutex g_mutex;  // guards the object sets and the primary contexts
std::set<const void*>* g_live = new std::set<const void*>;  // every live fake handle
// Destroyed handles: kept, not freed, so that no later object takes a destroyed one's address (a
// stale handle must stay "not live"), and held here so that LeakSanitizer sees them reachable.
std::vector<const void*>* g_retired = new std::vector<const void*>;
FakeContext g_primary[kMaxDevices];
int g_primary_refs[kMaxDevices] = {};
std::atomic<int> g_capturing{0};
std::mutex g_launch_mutex;
FakeCudaLaunch g_last_launch{};
std::atomic<unsigned> g_param_bytes{0};
std::atomic<uint64_t> g_next_address{0x7f0000000000ull};
std::atomic<bool> g_legacy_writes_pending{false};  // a memset or host-to-device copy not yet synchronised
// The first kMaxLoggedMaps tensor maps encoded (their readable words, below), for
// FAKE_CUDA_TENSOR_MAPS_FILE: fixed room, so that encoding never allocates.
constexpr unsigned kMaxLoggedMaps = 4096;
uint64_t g_logged_maps[kMaxLoggedMaps][10];
std::atomic<unsigned> g_logged_map_count{0};

thread_local FakeContext* t_stack[32];
thread_local int t_depth = 0;

int device_count() {
  static const int count = [] {
    const char* v = std::getenv("FAKE_CUDA_DEVICE_COUNT");
    const int n = v ? std::atoi(v) : 1;
    return n < 0 ? 0 : n > kMaxDevices ? kMaxDevices : n;
  }();
  return count;
}

int compute_capability(int ordinal) {
  const std::string name = "FAKE_CUDA_CC_" + std::to_string(ordinal);
  const char* v = std::getenv(name.c_str());
  return v ? std::atoi(v) : 90;
}

bool live(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_live->count(handle) != 0;
}
template <class T>
T* make_live(T* object) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_live->insert(object);
  return object;
}
void forget(const void* handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_live->erase(handle) != 0) g_retired->push_back(handle);
}

FakeContext* current() { return t_depth > 0 ? t_stack[t_depth - 1] : nullptr; }
void note_capture_unsafe() {
  if (g_capturing.load() > 0) g_stats.capture_violations++;
}

// Initialisation, version, errors ------------------------------------------------------------------

CUresult fake_cuInit(unsigned int) { return device_count() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE; }
CUresult fake_cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult fake_cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuGetErrorString(CUresult, const char** s) {
  *s = "fake CUDA driver error";
  return CUDA_SUCCESS;
}

// Devices ------------------------------------------------------------------------------------------

CUresult fake_cuDeviceGetCount(int* n) {
  *n = device_count();
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetName(char* name, int len, CUdevice d) {
  std::snprintf(name, size_t(len), "Fake GPU %d (sm_%d)", int(d), compute_capability(d));
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = compute_capability(d) / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = compute_capability(d) % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 60 << 20; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t(141) << 30;
  return CUDA_SUCCESS;
}

// Contexts -----------------------------------------------------------------------------------------

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_primary[d].device = d;
    g_primary[d].primary = true;
    if (g_primary_refs[d]++ == 0) g_live->insert(&g_primary[d]);
  }
  g_stats.primary_retains++;
  *c = reinterpret_cast<CUcontext>(&g_primary[d]);
  return CUDA_SUCCESS;
}
CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_primary_refs[d] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--g_primary_refs[d] == 0) g_live->erase(&g_primary[d]);
  g_stats.primary_releases++;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxGetCurrent(CUcontext* c) {
  *c = reinterpret_cast<CUcontext>(current());
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxSetCurrent(CUcontext c) {
  auto* ctx = reinterpret_cast<FakeContext*>(c);
  if (ctx && !live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_depth == 0) {
    if (ctx) t_stack[t_depth++] = ctx;
  } else {
    t_stack[t_depth - 1] = ctx;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxGetDevice(CUdevice* d) {
  FakeContext* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *d = ctx->device;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxPushCurrent(CUcontext c) {
  auto* ctx = reinterpret_cast<FakeContext*>(c);
  if (!ctx || !live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_depth == 32) return CUDA_ERROR_INVALID_VALUE;
  t_stack[t_depth++] = ctx;
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxPopCurrent(CUcontext* c) {
  if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  FakeContext* ctx = t_stack[--t_depth];
  if (c) *c = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxSynchronize() {
  note_capture_unsafe();
  g_legacy_writes_pending = false;
  return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
CUresult fake_cuCtxCreate(CUcontext* c, CUctxCreateParams*, unsigned int, CUdevice d) {
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  auto* ctx = make_live(new FakeContext{d, false});
  if (t_depth < 32) t_stack[t_depth++] = ctx;  // like the real one: the new context becomes current
  *c = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}
CUresult fake_cuCtxDestroy(CUcontext c) {
  auto* ctx = reinterpret_cast<FakeContext*>(c);
  if (!ctx || ctx->primary || !live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  forget(ctx);
  for (int i = 0; i < t_depth; ++i) {
    if (t_stack[i] == ctx) t_stack[i] = nullptr;
  }
  return CUDA_SUCCESS;
}

// Streams ------------------------------------------------------------------------------------------

// The context a stream handle stands for; null streams (0, legacy, per-thread) mean the current one.
FakeContext* context_of(CUstream s, CUresult* error) {
  const auto value = reinterpret_cast<uintptr_t>(s);
  if (value <= 2) {
    FakeContext* ctx = current();
    *error = ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return ctx;
  }
  auto* stream = reinterpret_cast<FakeStream*>(s);
  if (!live(stream)) {
    *error = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  *error = CUDA_SUCCESS;
  return stream->context;
}

CUresult fake_cuStreamGetCtx(CUstream s, CUcontext* c) {
  g_stats.stream_get_ctx++;
  CUresult error = CUDA_SUCCESS;
  FakeContext* ctx = context_of(s, &error);
  if (error != CUDA_SUCCESS) return error;
  *c = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamCreate(CUstream* s, unsigned int) {
  FakeContext* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *s = reinterpret_cast<CUstream>(make_live(new FakeStream{ctx, nullptr}));
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamDestroy(CUstream s) {
  if (!live(s)) return CUDA_ERROR_INVALID_HANDLE;
  forget(s);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamSynchronize(CUstream) {
  note_capture_unsafe();
  return CUDA_SUCCESS;
}

// Modules ------------------------------------------------------------------------------------------

CUresult fake_cuModuleLoadData(CUmodule* m, const void* image) {
  note_capture_unsafe();
  FakeContext* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  g_stats.module_loads++;
  *m = reinterpret_cast<CUmodule>(make_live(new FakeModule{ctx}));
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleUnload(CUmodule m) {
  if (!live(m)) return CUDA_ERROR_INVALID_HANDLE;
  forget(m);
  g_stats.module_unloads++;
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (!live(m) || !name || !*name) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<CUfunction>(make_live(new FakeFunction{reinterpret_cast<FakeModule*>(m)}));
  return CUDA_SUCCESS;
}
CUresult fake_cuFuncSetAttribute(CUfunction f, CUfunction_attribute, int) {
  return live(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult fake_cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  if (!live(f)) return CUDA_ERROR_INVALID_HANDLE;
  *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 128 : 0;
  return CUDA_SUCCESS;
}

// Launch -------------------------------------------------------------------------------------------

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle swizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  if (rank < 1 || rank > 5 || reinterpret_cast<uintptr_t>(address) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  g_stats.tensor_map_encodes++;
  // Readable by the tests: word 0 the address, 1..4 the dims, 5..7 the byte strides, 8 the box.
  uint64_t words[16] = {};
  words[0] = reinterpret_cast<uintptr_t>(address);
  for (cuuint32_t i = 0; i < rank && i < 4; ++i) words[1 + i] = dims[i];
  for (cuuint32_t i = 0; i + 1 < rank && i < 3; ++i) words[5 + i] = strides[i];
  words[8] = uint64_t(box[0]) | (uint64_t(rank > 1 ? box[1] : 1) << 32);
  words[9] = uint64_t(type) | (uint64_t(swizzle) << 16);
  std::memcpy(map, words, sizeof(words));
  if (const unsigned n = g_logged_map_count.fetch_add(1); n < kMaxLoggedMaps) std::memcpy(g_logged_maps[n], words, sizeof(g_logged_maps[n]));
  return CUDA_SUCCESS;
}

// The launch's attribute `id`, or null when it sets none.
const CUlaunchAttribute* find_attribute(const CUlaunchConfig* c, CUlaunchAttributeID id) {
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == id) return &c->attrs[i];
  return nullptr;
}

// The launch asks for programmatic stream serialization (PDL).
bool is_programmatic(const CUlaunchConfig* c) {
  const CUlaunchAttribute* a = find_attribute(c, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  return a && a->value.programmaticStreamSerializationAllowed != 0;
}

// The cluster's x extent the launch asks for (1 without the attribute).
unsigned cluster_x(const CUlaunchConfig* c) {
  const CUlaunchAttribute* a = find_attribute(c, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  return a ? a->value.clusterDim.x : 1;
}

void record(FakeCudaLaunch* out, const CUlaunchConfig* c, CUfunction f, void** params) {
  out->grid[0] = c->gridDimX;
  out->grid[1] = c->gridDimY;
  out->grid[2] = c->gridDimZ;
  out->block[0] = c->blockDimX;
  out->block[1] = c->blockDimY;
  out->block[2] = c->blockDimZ;
  out->shared_bytes = c->sharedMemBytes;
  out->stream = c->hStream;
  out->function = f;
  out->programmatic = is_programmatic(c);
  out->cluster_x = cluster_x(c);
  const unsigned n = g_param_bytes.load();
  std::memset(out->params, 0, sizeof(out->params));
  if (params && params[0] && n) std::memcpy(out->params, params[0], n < sizeof(out->params) ? n : sizeof(out->params));
}

CUresult fake_cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void**) {
  if (!c || !live(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (is_programmatic(c)) g_stats.launches_programmatic++;
  CUresult error = CUDA_SUCCESS;
  FakeContext* stream_ctx = context_of(c->hStream, &error);
  if (error != CUDA_SUCCESS) return error;
  if (reinterpret_cast<FakeFunction*>(f)->module->context != stream_ctx) {
    g_stats.launch_context_mismatches++;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const auto value = reinterpret_cast<uintptr_t>(c->hStream);
  FakeStream* stream = value > 2 ? reinterpret_cast<FakeStream*>(c->hStream) : nullptr;
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  if (stream && stream->capture) {
    FakeGraph* g = stream->capture;
    if (g->count == FakeGraph::kMaxLaunches) return CUDA_ERROR_INVALID_VALUE;
    record(&g->launches[g->count++], c, f, params);
    g_stats.launches_captured++;
    return CUDA_SUCCESS;
  }
  record(&g_last_launch, c, f, params);
  g_stats.launches++;
  if (stream && g_legacy_writes_pending.load()) g_stats.launches_racing_legacy_writes++;
  return CUDA_SUCCESS;
}

// Memory (addresses only: nothing is ever stored) --------------------------------------------------

CUresult fake_cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  note_capture_unsafe();
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *p = g_next_address.fetch_add((bytes + 1023) / 512 * 512);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemFree(CUdeviceptr) {
  note_capture_unsafe();
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyHtoD(CUdeviceptr, const void*, size_t) {
  note_capture_unsafe();
  g_legacy_writes_pending = true;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyDtoH(void* dst, CUdeviceptr, size_t bytes) {
  note_capture_unsafe();
  std::memset(dst, 0, bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD8(CUdeviceptr, unsigned char, size_t) {
  note_capture_unsafe();
  g_legacy_writes_pending = true;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD32(CUdeviceptr, unsigned int, size_t) {
  note_capture_unsafe();
  g_legacy_writes_pending = true;
  return CUDA_SUCCESS;
}
CUresult fake_cuPointerGetAttribute(void*, CUpointer_attribute, CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; }

// Events -------------------------------------------------------------------------------------------

CUresult fake_cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(make_live(new int(0)));
  return CUDA_SUCCESS;
}
CUresult fake_cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult fake_cuEventSynchronize(CUevent) {
  note_capture_unsafe();
  return CUDA_SUCCESS;
}
CUresult fake_cuEventElapsedTime(float* ms, CUevent, CUevent) {
  *ms = 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuEventDestroy(CUevent e) {
  forget(e);
  return CUDA_SUCCESS;
}

// Capture and graphs -------------------------------------------------------------------------------

CUresult fake_cuStreamBeginCapture(CUstream s, CUstreamCaptureMode) {
  const auto value = reinterpret_cast<uintptr_t>(s);
  if (value <= 2) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!live(s)) return CUDA_ERROR_INVALID_HANDLE;
  auto* stream = reinterpret_cast<FakeStream*>(s);
  if (stream->capture) return CUDA_ERROR_INVALID_VALUE;
  stream->capture = make_live(new FakeGraph);
  g_capturing++;
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamEndCapture(CUstream s, CUgraph* graph) {
  if (!live(s)) return CUDA_ERROR_INVALID_HANDLE;
  auto* stream = reinterpret_cast<FakeStream*>(s);
  if (!stream->capture) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(stream->capture);
  stream->capture = nullptr;
  g_capturing--;
  return CUDA_SUCCESS;
}
CUresult fake_cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (!live(graph)) return CUDA_ERROR_INVALID_HANDLE;
  auto* copy = make_live(new FakeGraph(*reinterpret_cast<FakeGraph*>(graph)));
  *exec = reinterpret_cast<CUgraphExec>(copy);
  return CUDA_SUCCESS;
}
CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream) {
  if (!live(exec)) return CUDA_ERROR_INVALID_HANDLE;
  const auto* g = reinterpret_cast<const FakeGraph*>(exec);
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  for (int i = 0; i < g->count; ++i) {
    g_last_launch = g->launches[i];
    g_stats.launches++;
  }
  return CUDA_SUCCESS;
}
CUresult fake_cuGraphDestroy(CUgraph graph) {
  forget(graph);
  return CUDA_SUCCESS;
}
CUresult fake_cuGraphExecDestroy(CUgraphExec exec) {
  forget(exec);
  return CUDA_SUCCESS;
}

// The table ----------------------------------------------------------------------------------------

struct Entry {
  const char* name;
  void* fn;
};

// NOTES: each entry assigns the function to the exact PFN_ type flashjit resolves it as, so a
// signature that drifted from the driver's fails to compile here.
#define FAKE_ENTRY(name, pfn, fn) \
  Entry { name, reinterpret_cast<void*>(static_cast<pfn>(fn)) }

const Entry kEntries[] = {
    FAKE_ENTRY("cuInit", PFN_cuInit_v2000, fake_cuInit),
    FAKE_ENTRY("cuDriverGetVersion", PFN_cuDriverGetVersion_v2020, fake_cuDriverGetVersion),
    FAKE_ENTRY("cuGetErrorName", PFN_cuGetErrorName_v6000, fake_cuGetErrorName),
    FAKE_ENTRY("cuGetErrorString", PFN_cuGetErrorString_v6000, fake_cuGetErrorString),
    FAKE_ENTRY("cuDeviceGet", PFN_cuDeviceGet_v2000, fake_cuDeviceGet),
    FAKE_ENTRY("cuDeviceGetCount", PFN_cuDeviceGetCount_v2000, fake_cuDeviceGetCount),
    FAKE_ENTRY("cuDeviceGetName", PFN_cuDeviceGetName_v2000, fake_cuDeviceGetName),
    FAKE_ENTRY("cuDeviceGetAttribute", PFN_cuDeviceGetAttribute_v2000, fake_cuDeviceGetAttribute),
    FAKE_ENTRY("cuDeviceTotalMem", PFN_cuDeviceTotalMem_v3020, fake_cuDeviceTotalMem),
    FAKE_ENTRY("cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000, fake_cuDevicePrimaryCtxRetain),
    FAKE_ENTRY("cuDevicePrimaryCtxRelease", PFN_cuDevicePrimaryCtxRelease_v11000, fake_cuDevicePrimaryCtxRelease),
    FAKE_ENTRY("cuCtxGetCurrent", PFN_cuCtxGetCurrent_v4000, fake_cuCtxGetCurrent),
    FAKE_ENTRY("cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000, fake_cuCtxSetCurrent),
    FAKE_ENTRY("cuCtxGetDevice", PFN_cuCtxGetDevice_v2000, fake_cuCtxGetDevice),
    FAKE_ENTRY("cuCtxPushCurrent", PFN_cuCtxPushCurrent_v4000, fake_cuCtxPushCurrent),
    FAKE_ENTRY("cuCtxPopCurrent", PFN_cuCtxPopCurrent_v4000, fake_cuCtxPopCurrent),
    FAKE_ENTRY("cuCtxSynchronize", PFN_cuCtxSynchronize_v2000, fake_cuCtxSynchronize),
    FAKE_ENTRY("cuStreamGetCtx", PFN_cuStreamGetCtx_v9020, fake_cuStreamGetCtx),
    FAKE_ENTRY("cuCtxCreate", PFN_cuCtxCreate_v12050, fake_cuCtxCreate),
    FAKE_ENTRY("cuCtxDestroy", PFN_cuCtxDestroy_v4000, fake_cuCtxDestroy),
    FAKE_ENTRY("cuModuleLoadData", PFN_cuModuleLoadData_v2000, fake_cuModuleLoadData),
    FAKE_ENTRY("cuModuleUnload", PFN_cuModuleUnload_v2000, fake_cuModuleUnload),
    FAKE_ENTRY("cuModuleGetFunction", PFN_cuModuleGetFunction_v2000, fake_cuModuleGetFunction),
    FAKE_ENTRY("cuFuncSetAttribute", PFN_cuFuncSetAttribute_v9000, fake_cuFuncSetAttribute),
    FAKE_ENTRY("cuFuncGetAttribute", PFN_cuFuncGetAttribute_v2020, fake_cuFuncGetAttribute),
    FAKE_ENTRY("cuLaunchKernelEx", PFN_cuLaunchKernelEx_v11060, fake_cuLaunchKernelEx),
    FAKE_ENTRY("cuTensorMapEncodeTiled", PFN_cuTensorMapEncodeTiled_v12000, fake_cuTensorMapEncodeTiled),
    FAKE_ENTRY("cuMemAlloc", PFN_cuMemAlloc_v3020, fake_cuMemAlloc),
    FAKE_ENTRY("cuMemFree", PFN_cuMemFree_v3020, fake_cuMemFree),
    FAKE_ENTRY("cuMemcpyHtoD", PFN_cuMemcpyHtoD_v3020, fake_cuMemcpyHtoD),
    FAKE_ENTRY("cuMemcpyDtoH", PFN_cuMemcpyDtoH_v3020, fake_cuMemcpyDtoH),
    FAKE_ENTRY("cuMemsetD8", PFN_cuMemsetD8_v3020, fake_cuMemsetD8),
    FAKE_ENTRY("cuMemsetD32", PFN_cuMemsetD32_v3020, fake_cuMemsetD32),
    FAKE_ENTRY("cuPointerGetAttribute", PFN_cuPointerGetAttribute_v4000, fake_cuPointerGetAttribute),
    FAKE_ENTRY("cuStreamCreate", PFN_cuStreamCreate_v2000, fake_cuStreamCreate),
    FAKE_ENTRY("cuStreamDestroy", PFN_cuStreamDestroy_v4000, fake_cuStreamDestroy),
    FAKE_ENTRY("cuStreamSynchronize", PFN_cuStreamSynchronize_v2000, fake_cuStreamSynchronize),
    FAKE_ENTRY("cuEventCreate", PFN_cuEventCreate_v2000, fake_cuEventCreate),
    FAKE_ENTRY("cuEventRecord", PFN_cuEventRecord_v2000, fake_cuEventRecord),
    FAKE_ENTRY("cuEventSynchronize", PFN_cuEventSynchronize_v2000, fake_cuEventSynchronize),
    FAKE_ENTRY("cuEventElapsedTime", PFN_cuEventElapsedTime_v12080, fake_cuEventElapsedTime),
    FAKE_ENTRY("cuEventDestroy", PFN_cuEventDestroy_v4000, fake_cuEventDestroy),
    FAKE_ENTRY("cuStreamBeginCapture", PFN_cuStreamBeginCapture_v10010, fake_cuStreamBeginCapture),
    FAKE_ENTRY("cuStreamEndCapture", PFN_cuStreamEndCapture_v10000, fake_cuStreamEndCapture),
    FAKE_ENTRY("cuGraphInstantiateWithFlags", PFN_cuGraphInstantiateWithFlags_v11040, fake_cuGraphInstantiate),
    FAKE_ENTRY("cuGraphLaunch", PFN_cuGraphLaunch_v10000, fake_cuGraphLaunch),
    FAKE_ENTRY("cuGraphDestroy", PFN_cuGraphDestroy_v10000, fake_cuGraphDestroy),
    FAKE_ENTRY("cuGraphExecDestroy", PFN_cuGraphExecDestroy_v10000, fake_cuGraphExecDestroy),
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                                                     CUdriverProcAddressQueryResult* status) {
  *pfn = nullptr;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) == 0) *pfn = e.fn;
  }
  if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) const FakeCudaStats* fake_cuda_stats() { return &g_stats; }

// FAKE_CUDA_STATS_FILE: what a process saw, written when it unloads the fake (for tests that run
// the flashjit tool against it in a child process).
__attribute__((destructor)) static void fake_cuda_write_stats_file() {
  const char* path = std::getenv("FAKE_CUDA_STATS_FILE");
  if (FILE* f = path ? std::fopen(path, "w") : nullptr) {
    std::fprintf(f, "tensor_map_encodes %llu\nlaunches %llu\nlaunches_captured %llu\nlaunches_programmatic %llu\n",
                 (unsigned long long)g_stats.tensor_map_encodes.load(), (unsigned long long)g_stats.launches.load(),
                 (unsigned long long)g_stats.launches_captured.load(), (unsigned long long)g_stats.launches_programmatic.load());
    std::fclose(f);
  }
  // FAKE_CUDA_TENSOR_MAPS_FILE: each tensor map encoded, in order, one a line: "address dim0 dim1
  // dim2 dim3 stride1 stride2 stride3 box0 box1" (the dims innermost first, the byte strides of
  // dims 1..3; attention maps: head_dim, rows, heads, batch).
  if (const char* maps = std::getenv("FAKE_CUDA_TENSOR_MAPS_FILE")) {
    if (FILE* f = std::fopen(maps, "w")) {
      const unsigned count = std::min(g_logged_map_count.load(), kMaxLoggedMaps);
      for (unsigned i = 0; i < count; ++i) {
        const uint64_t* w = g_logged_maps[i];
        std::fprintf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", (unsigned long long)w[0], (unsigned long long)w[1],
                     (unsigned long long)w[2], (unsigned long long)w[3], (unsigned long long)w[4], (unsigned long long)w[5],
                     (unsigned long long)w[6], (unsigned long long)w[7], (unsigned long long)(w[8] & 0xFFFFFFFFu),
                     (unsigned long long)(w[8] >> 32));
      }
      std::fclose(f);
    }
  }
}

__attribute__((visibility("default"))) void fake_cuda_last_launch(FakeCudaLaunch* out) {
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  *out = g_last_launch;
}

__attribute__((visibility("default"))) void fake_cuda_set_param_bytes(unsigned bytes) { g_param_bytes = bytes; }

}  // extern "C"
