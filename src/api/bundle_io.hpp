// Cache bundles as files: what flashjit_cache_export / flashjit_cache_import and the tool's
// `cache export` / `cache import` do (the byte layout is cache_bundle.hpp's).
//
// Import is all or nothing: every entry is checked first (bundle checksum, entry checksum and key,
// the entry being what this build would compile for its spec, the register budget), and only then
// is any of them added to the cache.
#pragma once
#include <string>
#include <vector>

#include "api/api_status.hpp"
#include "api/cache_bundle.hpp"
#include "runtime/engine.hpp"

namespace flashjit::api {

// The entries of specs' kernels (each spec's long-sequence kernel after it), compiling them where
// policy permits, in order, one per distinct key. Failures are summarised per spec (texts name them).
ApiStatus collect_bundle_entries(Engine& engine, CompilePolicy policy, const std::vector<AttentionSpec>& specs,
                                 const std::vector<std::string>& texts, std::vector<BundleEntry>* entries);

// Writes the bundle of entries to path, replacing it atomically (a reader sees the old file or the
// new one). CACHE_IO naming the path when it cannot.
ApiStatus write_bundle_file(const std::string& path, const std::vector<BundleEntry>& entries);

// Checks every entry of the bundle at path, then adds them all to engine's cache (memory, and its
// directory unless memory only). keys (may be null) receives the bundle's keys, in its order.
ApiStatus import_bundle_file(Engine& engine, const std::string& path, std::vector<std::string>* keys);

}  // namespace flashjit::api
