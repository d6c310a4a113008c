// Exported: flashjit_context_create, _destroy, _describe.
#include "api/api_status.hpp"
#include "api/context.hpp"
#include "api/struct_size.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

static_assert(sizeof(flashjit_context_info_t) == 40);
constexpr uint32_t kContextInfoMinSize = 40;

flashjit_cache_mode_t cache_mode_of(CacheMode mode) {
  return mode == CacheMode::kMemoryOnly ? FLASHJIT_CACHE_MEMORY_ONLY : FLASHJIT_CACHE_DISK;
}

}  // namespace

extern "C" {

flashjit_status_t flashjit_context_create(const flashjit_context_options_t* options, flashjit_context_t* context) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!context) return null_argument("context");
    *context = nullptr;
    flashjit_context_options_t o;
    flashjit_context_options_init(&o);
    if (options) {
      if (ApiStatus st = read_input_struct("options", "flashjit_context_options_t", options, kContextOptionsMinSize, &o);
          !st.ok()) {
        return st;
      }
    }
    std::shared_ptr<ContextState> state;
    if (ApiStatus st = ContextState::create(o, &state); !st.ok()) return st;
    auto handle = std::make_unique<flashjit_context_s>();
    handle->cache_dir = state->engine().cache().dir();
    handle->state = std::move(state);
    *context = handle.release();
    return {};
  });
}

flashjit_status_t flashjit_context_destroy(flashjit_context_t context) {
  return guarded(__func__, [&]() -> ApiStatus {
    delete context;
    return {};
  });
}

flashjit_status_t flashjit_context_describe(flashjit_context_t context, flashjit_context_info_t* info) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!context) return null_argument("context");
    if (!info) return null_argument("info");
    const ContextState& state = *context->state;
    const KernelCache& cache = state.engine().cache();
    flashjit_context_info_t out{};
    out.device = state.device();
    out.cu_context = state.cu_context();
    out.cache_dir = context->cache_dir.c_str();
    out.compile_policy = state.policy() == CompilePolicy::kCacheOnly ? FLASHJIT_COMPILE_POLICY_CACHE_ONLY : FLASHJIT_COMPILE_POLICY_JIT;
    out.cache_mode = cache_mode_of(cache.mode());
    out.cache_writable = cache.mode() == CacheMode::kReadWriteDisk ? 1 : 0;
    return write_output_struct("info", "flashjit_context_info_t", info, kContextInfoMinSize, out);
  });
}

}  // extern "C"
