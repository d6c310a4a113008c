#include "api/context.hpp"

#include <cstdio>
#include <map>
#include <mutex>

#include "cache/cache_dir.hpp"
#include "common/log.hpp"
#include "driver/device_info.hpp"

namespace flashjit::api {

static_assert(sizeof(flashjit_context_options_t) == kContextOptionsMinSize);

namespace {

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

// Steps of create --------------------------------------------------------------------------------

ApiStatus check_options(const flashjit_context_options_t& o) {
  if (o.device < FLASHJIT_DEVICE_NONE) {
    return invalid_argument("options.device", "options.device: " + std::to_string(o.device) +
                                                  " is not allowed; a device ordinal is 0 or more (or FLASHJIT_DEVICE_NONE)");
  }
  if (o.compile_policy != FLASHJIT_COMPILE_POLICY_JIT && o.compile_policy != FLASHJIT_COMPILE_POLICY_CACHE_ONLY) {
    return invalid_argument("options.compile_policy", "options.compile_policy: " + std::to_string(o.compile_policy) +
                                                          " is not a flashjit_compile_policy_t (JIT = 0, CACHE_ONLY = 1)");
  }
  if (o.cache_mode != FLASHJIT_CACHE_DISK && o.cache_mode != FLASHJIT_CACHE_MEMORY_ONLY) {
    return invalid_argument("options.cache_mode", "options.cache_mode: " + std::to_string(o.cache_mode) +
                                                      " is not a flashjit_cache_mode_t (DISK = 0, MEMORY_ONLY = 1)");
  }
  return {};
}

EngineOptions engine_options_of(const flashjit_context_options_t& o) {
  EngineOptions e;
  e.memory_only = o.cache_mode == FLASHJIT_CACHE_MEMORY_ONLY;
  if (o.cache_dir && *o.cache_dir) e.cache_dir = std::string(o.cache_dir);
  e.max_cache_bytes = o.max_cache_bytes;
  return e;
}

Result<const DriverApi*> driver_for(const std::string& why) {
  auto api = driver();
  if (!api) {
    Error e = api.take_error();
    e.message = why + ": " + e.message;
    return e;
  }
  return api;
}

// The ordinal of a CUdevice (the driver's handle need not equal the ordinal).
Result<int> ordinal_of(const DriverApi& api, CUdevice device) {
  int count = 0;
  if (Status s = check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return s.take_error();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice d = 0;
    if (api.cuDeviceGet(&d, ordinal) == CUDA_SUCCESS && d == device) return ordinal;
  }
  return Error::make(ErrorCode::kInternal, "CUdevice " + std::to_string(device) + " matches no device ordinal");
}

// options.cu_context: a context the caller made (and keeps alive). Its device is read back.
ApiStatus check_explicit_context(const DriverApi& api, CUcontext context, int* device) {
  auto scope = ScopedContext::enter(api, context);
  if (!scope) {
    return invalid_argument("options.cu_context", "options.cu_context: " + pointer_text(context) +
                                                      " is not a usable CUDA context (" + scope.error().message + ")");
  }
  CUdevice handle = 0;
  if (CUresult r = api.cuCtxGetDevice(&handle); r != CUDA_SUCCESS) {
    return invalid_argument("options.cu_context", "options.cu_context: " + pointer_text(context) +
                                                      " is not a usable CUDA context (cuCtxGetDevice: " + describe(api, r) + ")");
  }
  auto ordinal = ordinal_of(api, handle);
  if (!ordinal) return ordinal.take_error();
  *device = *ordinal;
  return {};
}

ApiStatus check_device_ordinal(const DriverApi& api, int device) {
  int count = 0;
  if (Status s = check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return s;
  if (count == 0) return Error::make(ErrorCode::kDriverUnavailable, "the CUDA driver reports no device");
  if (device >= count) {
    return invalid_argument("options.device", "options.device: " + std::to_string(device) + " is out of range; this machine has " +
                                                  std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
                                                  " (ordinals 0.." + std::to_string(count - 1) + ")");
  }
  return {};
}

// flashjit's kernels are sm_90a cubins: only a compute capability 9.0 device can load them. Also
// reads its SM count (the persistent grid's size), once per context.
ApiStatus check_hopper(const DriverApi& api, int device, int* sm_count) {
  auto info = query_device(api, device);
  if (!info) return info.take_error();
  *sm_count = info->sm_count;
  if (info->is_hopper()) return {};
  return ApiStatus::make(FLASHJIT_ERROR_UNSUPPORTED_DEVICE, "options.device",
                         "options.device: device " + std::to_string(device) + " is " + info->name + " (sm_" +
                             std::to_string(info->cc_major) + std::to_string(info->cc_minor) +
                             "); flashjit's kernels need sm_90 (Hopper: H100, H200, H800, H20)");
}

}  // namespace

std::shared_ptr<Engine> shared_engine(const EngineOptions& options) {
  // NOTES: keyed by the directory as resolved now (the environment may differ between calls), so
  // two contexts share a cache exactly when they would read and write the same files.
  const std::string dir = options.memory_only ? std::string() : resolve_cache_dir(options.cache_dir);
  const std::string key = options.memory_only ? "memory" : "disk:" + dir + "|" + std::to_string(options.max_cache_bytes);
  static std::mutex mutex;
  static auto* engines = new std::map<std::string, std::weak_ptr<Engine>>;  // NOTES: never destroyed (exit order)
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = (*engines)[key].lock()) return existing;
  // Forget engines no context uses any more, so a process cycling through directories does not grow.
  std::erase_if(*engines, [](const auto& entry) { return entry.second.expired(); });
  EngineOptions resolved = options;
  if (!options.memory_only) resolved.cache_dir = dir;
  auto engine = std::make_shared<Engine>(resolved);
  (*engines)[key] = engine;
  return engine;
}

ApiStatus ContextState::create(const flashjit_context_options_t& options, std::shared_ptr<ContextState>* out) {
  // 1. The options alone.
  if (ApiStatus st = check_options(options); !st.ok()) return st;
  std::shared_ptr<ContextState> state(new ContextState);
  state->policy_ = options.compile_policy == FLASHJIT_COMPILE_POLICY_CACHE_ONLY ? CompilePolicy::kCacheOnly : CompilePolicy::kJit;
  // 2. The CUDA context: none, the caller's, or the device's primary context (retained).
  if (options.cu_context) {
    auto api = driver_for("options.cu_context needs the CUDA driver");
    if (!api) return api.take_error();
    state->api_ = *api;
    auto context = static_cast<CUcontext>(options.cu_context);
    if (ApiStatus st = check_explicit_context(**api, context, &state->device_); !st.ok()) return st;
    if (ApiStatus st = check_hopper(**api, state->device_, &state->sm_count_); !st.ok()) return st;
    state->cu_context_ = context;
  } else if (options.device != FLASHJIT_DEVICE_NONE) {
    const std::string why = "a context for device " + std::to_string(options.device) +
                            " needs the CUDA driver (FLASHJIT_DEVICE_NONE makes a compile-only context)";
    auto api = driver_for(why);
    if (!api) return api.take_error();
    state->api_ = *api;
    if (ApiStatus st = check_device_ordinal(**api, options.device); !st.ok()) return st;
    if (ApiStatus st = check_hopper(**api, options.device, &state->sm_count_); !st.ok()) return st;
    auto primary = PrimaryContext::retain(**api, options.device);
    if (!primary) return primary.take_error();
    state->primary_ = std::make_unique<PrimaryContext>(std::move(*primary));
    state->cu_context_ = state->primary_->get();
    state->device_ = options.device;
  }
  // 3. The engine for these cache settings.
  state->engine_ = shared_engine(engine_options_of(options));
  *out = std::move(state);
  return {};
}

ContextState::~ContextState() {
  // NOTES: every kernel of this context is gone (each held a reference), so dropping the context's
  // modules here unloads them while the CUDA context still exists, before the release below.
  if (cu_context_ && engine_ && !driver_shut_down()) engine_->modules().drop_context(cu_context_);
  primary_.reset();
}

}  // namespace flashjit::api
