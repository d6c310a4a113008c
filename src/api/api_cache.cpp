// Exported: flashjit_cache_export and flashjit_cache_import (api/bundle_io.hpp does the work).
#include "api/api_status.hpp"
#include "api/bundle_io.hpp"
#include "api/context.hpp"
#include "api/spec_list.hpp"

using namespace flashjit;
using namespace flashjit::api;

extern "C" {

flashjit_status_t flashjit_cache_export(flashjit_context_t context, const char* const* specs, size_t count, const char* path) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!context) return null_argument("context");
    if (!path) return null_argument("path");
    if (!*path) return invalid_argument("path", "path: empty");
    std::vector<AttentionSpec> parsed;
    std::vector<std::string> texts;
    if (ApiStatus st = parse_spec_list(specs, count, &parsed, &texts); !st.ok()) return st;
    const ContextState& state = *context->state;
    std::vector<BundleEntry> entries;
    if (ApiStatus st = collect_bundle_entries(state.engine(), state.policy(), parsed, texts, &entries); !st.ok()) return st;
    return write_bundle_file(path, entries);
  });
}

flashjit_status_t flashjit_cache_import(flashjit_context_t context, const char* path, size_t* imported) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (imported) *imported = 0;
    if (!context) return null_argument("context");
    if (!path) return null_argument("path");
    if (!*path) return invalid_argument("path", "path: empty");
    std::vector<std::string> keys;
    if (ApiStatus st = import_bundle_file(context->state->engine(), path, &keys); !st.ok()) return st;
    if (imported) *imported = keys.size();
    return ApiStatus();
  });
}

}  // extern "C"
