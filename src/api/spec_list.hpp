// A C array of spec strings, as flashjit_prewarm and flashjit_cache_export take it: parsed up
// front (the first bad one is an error naming "specs[i]"), worked on in parallel, and the per-spec
// outcomes summarised into one status.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "api/api_status.hpp"
#include "spec/attention_spec.hpp"

namespace flashjit::api {

// NOTES: a bound, so a garbage count is refused before it is used to walk the array.
inline constexpr size_t kMaxSpecsPerCall = 65536;

ApiStatus parse_spec_list(const char* const* specs, size_t count, std::vector<AttentionSpec>* parsed,
                          std::vector<std::string>* texts);

// Ok when every outcome is; otherwise the first failure's status, with a message listing every
// failing spec ("prewarm: 2 of 5 specs failed: specs[1] 'dtype=...': ...; specs[3] ...").
ApiStatus summarise_failures(const std::vector<ApiStatus>& outcomes, const std::vector<std::string>& texts,
                             const char* what);

// Runs job(i) for i in [0, count) on up to one thread per core; job's exceptions become that
// index's error (a worker thread must not let one escape: std::terminate).
std::vector<ApiStatus> run_on_all_cores(size_t count, const std::function<ApiStatus(size_t)>& job);

}  // namespace flashjit::api
