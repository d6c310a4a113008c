#include "api/spec_list.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "config/kernel_config.hpp"

namespace flashjit::api {

ApiStatus parse_spec_list(const char* const* specs, size_t count, std::vector<AttentionSpec>* parsed,
                          std::vector<std::string>* texts) {
  if (count == 0) return invalid_argument("count", "count: 0 specs; pass at least one");
  if (count > kMaxSpecsPerCall) {
    return invalid_argument("count", "count: " + std::to_string(count) + " is not allowed; at most " +
                                         std::to_string(kMaxSpecsPerCall) + " specs per call");
  }
  if (!specs) return null_argument("specs");
  for (size_t i = 0; i < count; ++i) {
    const std::string field = "specs[" + std::to_string(i) + "]";
    if (!specs[i]) return null_argument(field.c_str());
    auto spec = parse_spec(specs[i]);
    if (!spec) {
      Error e = spec.take_error();
      e.message = field + " '" + specs[i] + "': " + e.message;
      e.field = field + "." + e.field;
      return e;
    }
    if (auto config = make_config(*spec); !config) {
      Error e = config.take_error();
      e.message = field + " '" + specs[i] + "': " + e.message;
      e.field = field + "." + e.field;
      return e;
    }
    parsed->push_back(*spec);
    texts->push_back(specs[i]);
  }
  return {};
}

ApiStatus summarise_failures(const std::vector<ApiStatus>& outcomes, const std::vector<std::string>& texts,
                             const char* what) {
  const ApiStatus* first = nullptr;
  size_t failed = 0;
  std::string list;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].ok()) continue;
    if (!first) first = &outcomes[i];
    ++failed;
    list += (list.empty() ? "" : "; ") + std::string("specs[") + std::to_string(i) + "] '" + texts[i] +
            "': " + outcomes[i].error().message;
  }
  if (!first) return {};
  Error error = first->error();  // keeps the first failure's field and NVRTC log
  error.message = std::string(what) + ": " + std::to_string(failed) + " of " + std::to_string(outcomes.size()) +
                  " specs failed: " + list;
  return ApiStatus::make(first->code(), std::move(error));
}

std::vector<ApiStatus> run_on_all_cores(size_t count, const std::function<ApiStatus(size_t)>& job) {
  std::vector<ApiStatus> outcomes(count);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < count;) {
      try {
        outcomes[i] = job(i);
      } catch (const std::exception& e) {
        outcomes[i] = ApiStatus::make(FLASHJIT_ERROR_INTERNAL, "", std::string("internal error: ") + e.what());
      } catch (...) {
        outcomes[i] = ApiStatus::make(FLASHJIT_ERROR_INTERNAL, "", "internal error: unknown exception");
      }
    }
  };
  const size_t threads = std::min<size_t>(count, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return outcomes;
}

}  // namespace flashjit::api
