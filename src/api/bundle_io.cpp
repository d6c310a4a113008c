#include "api/bundle_io.hpp"

#include <set>

#include "api/spec_list.hpp"
#include "cache/entry_format.hpp"
#include "cache/posix_file.hpp"
#include "config/kernel_config.hpp"

namespace flashjit::api {
namespace {

ApiStatus invalid_bundle(const std::string& path, const std::string& what) {
  return ApiStatus::make(FLASHJIT_ERROR_INVALID_BUNDLE, "path", "path: bundle '" + path + "' refused, nothing imported: " + what);
}

// File errors are CACHE_IO, a missing file included (posix reports that as a cache miss).
ApiStatus file_error(Error error) {
  return ApiStatus::make(FLASHJIT_ERROR_CACHE_IO, Error{ErrorCode::kCacheIo, std::move(error.message), "path", {}});
}

// Why an entry is not exactly what this build of flashjit would compile for its spec ("" when it
// is): otherwise its key could never be looked up (another flashjit or NVRTC version), or it was
// tampered with and checksummed again.
std::string why_foreign(const std::string& key, const CompiledKernel& kernel) {
  const std::string spec_text = "spec '" + kernel.spec_text + "'";
  auto spec = parse_spec(kernel.spec_text);
  if (!spec) return spec_text + " does not parse: " + spec.error().message;
  auto config = make_config(*spec);
  if (!config) return spec_text + " is not supported: " + config.error().message;
  if (cache_key_for(make_compile_request(*config)) != key || kernel.kernel_name != config->kernel_name) {
    return spec_text + " was compiled by another build of flashjit or NVRTC (this build computes another key for "
           "it); export the bundle again with this version";
  }
  if (Status st = check_compiled_kernel(*config, kernel); !st) return spec_text + ": " + st.error().message;
  return {};
}

ApiStatus decode_and_check(const std::string& path, const std::vector<BundleEntry>& entries,
                           std::vector<CompiledKernel>* kernels) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string which = "entry " + std::to_string(i);
    auto kernel = decode_entry(entries[i].bytes, entries[i].key);
    if (!kernel) return invalid_bundle(path, which + ": " + kernel.error().message);
    if (std::string why = why_foreign(entries[i].key, *kernel); !why.empty()) return invalid_bundle(path, which + ": " + why);
    kernels->push_back(std::move(*kernel));
  }
  return {};
}

// Adds checked kernels to the cache: memory, and disk unless memory only. A key already present is
// left as it is (same key, same bytes).
ApiStatus add_to_cache(Engine& engine, const std::vector<BundleEntry>& entries, const std::vector<CompiledKernel>& kernels) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const CompiledKernel& kernel = kernels[i];
    auto added = engine.cache().get_or_compile(entries[i].key, kernel.spec_text,
                                               [&]() -> Result<CompiledKernel> { return kernel; });
    if (!added) return added.take_error();
  }
  return {};
}

}  // namespace

ApiStatus collect_bundle_entries(Engine& engine, CompilePolicy policy, const std::vector<AttentionSpec>& specs,
                                 const std::vector<std::string>& texts, std::vector<BundleEntry>* out) {
  std::vector<std::vector<BundleEntry>> entries(specs.size());
  const auto outcomes = run_on_all_cores(specs.size(), [&](size_t i) -> ApiStatus {
    auto family = engine.prepare_family(specs[i], policy);
    if (!family) return family.take_error();
    for (const PreparedKernel* p : family->kernels()) entries[i].push_back({p->key, encode_entry(p->key, *p->compiled)});
    return {};
  });
  if (ApiStatus st = summarise_failures(outcomes, texts, "cache export"); !st.ok()) return st;
  std::set<std::string> seen;
  for (std::vector<BundleEntry>& family : entries) {
    for (BundleEntry& e : family) {
      if (seen.insert(e.key).second) out->push_back(std::move(e));
    }
  }
  return {};
}

ApiStatus write_bundle_file(const std::string& path, const std::vector<BundleEntry>& entries) {
  const std::string temp = path + ".tmp-" + posix::unique_suffix();
  if (Status st = posix::write_new_file_durably(temp, encode_bundle(entries)); !st) return file_error(st.take_error());
  if (Status st = posix::rename_path(temp, path); !st) {
    (void)posix::remove_file(temp);
    return file_error(st.take_error());
  }
  return {};
}

ApiStatus import_bundle_file(Engine& engine, const std::string& path, std::vector<std::string>* keys) {
  auto file = posix::read_file(path);
  if (!file) return file_error(file.take_error());
  auto entries = decode_bundle(file->bytes);
  if (!entries) return invalid_bundle(path, entries.error().message);
  std::vector<CompiledKernel> kernels;
  if (ApiStatus st = decode_and_check(path, *entries, &kernels); !st.ok()) return st;
  if (ApiStatus st = add_to_cache(engine, *entries, kernels); !st.ok()) return st;
  if (keys) {
    for (const BundleEntry& e : *entries) keys->push_back(e.key);
  }
  return {};
}

}  // namespace flashjit::api
