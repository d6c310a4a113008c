// The kernel cache the rest of the library calls: an in-process map in front of a disk store,
// with single-flight compiles.
//
// get_or_compile(key, ...) in order: memory hit -> join the caller already loading/compiling the key
// -> disk hit -> (best-effort cross-process lock, then disk again) -> compile -> publish.
// Invariants:
//  - each key is compiled at most once at a time per process; callers arriving meanwhile wait for
//    that compile and receive its result (kernel or error);
//  - different keys load and compile in parallel: the map's mutex is never held across disk I/O
//    or a compile;
//  - a failed compile is returned to everyone waiting for it and is not remembered: the next call
//    compiles again; nothing is published for it;
//  - disk trouble never fails a call: a bad entry is a miss, a failed publish leaves the kernel in
//    memory, an unusable directory means memory only (one warning per KernelCache).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "cache/disk_store.hpp"
#include "common/status.hpp"
#include "compile/compiled_kernel.hpp"

namespace flashjit {

using CompileFn = std::function<Result<CompiledKernel>()>;

struct CacheLookup {
  enum class Source {
    kMemory,    // already in this process (including: waited for another caller's load/compile)
    kDisk,      // loaded from the cache directory by this call
    kCompiled,  // compiled by this call
  };
  std::shared_ptr<const CompiledKernel> kernel;
  Source source = Source::kMemory;
};

const char* cache_source_name(CacheLookup::Source source);  // "memory", "disk", "compiled"

enum class CacheMode {
  kMemoryOnly,     // no directory, or it could not be created
  kReadOnlyDisk,   // the directory serves hits; new kernels stay in memory
  kReadWriteDisk,
};

const char* cache_mode_name(CacheMode mode);

struct KernelCacheOptions {
  // The cache directory, usually from resolve_cache_dir(). nullopt: memory only, by choice.
  // An empty string (nothing resolved) or an unusable directory: memory only, with one warning.
  std::optional<std::string> dir;
  std::uint64_t max_bytes = 0;  // disk size cap; 0 = none
  bool cross_process_lock = true;
  std::chrono::milliseconds lock_timeout{60000};  // then compile anyway
};

class KernelCache {
 public:
  explicit KernelCache(KernelCacheOptions options = {});
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // key must be a cache key (compute_cache_key); spec_text is for logs, and fills the kernel's
  // spec_text when compile leaves it empty. Errors: kInvalidArgument for a malformed key, or
  // whatever compile returned.
  Result<CacheLookup> get_or_compile(const std::string& key, const std::string& spec_text, const CompileFn& compile);

  // Memory, then disk; never compiles. kNotCompiled on a miss. Waits for a compile in flight.
  Result<CacheLookup> lookup(const std::string& key);

  CacheMode mode() const { return mode_; }
  const std::string& dir() const;  // empty in memory-only mode
  // True when the cache directory holds key's entry (a regular file): what prewarm checks.
  bool stored(const std::string& key) const;
  // Why a kernel may be missing from the directory: memory only, the directory that could not be
  // used and why, a read-only directory, or the last failed write.
  std::string why_not_stored() const;
  DiskStore* disk() const { return disk_.get(); }  // nullptr in memory-only mode; for maintenance
  std::size_t memory_entries() const;              // kernels held in memory

 private:
  using SharedKernel = std::shared_ptr<const CompiledKernel>;
  using Outcome = Result<SharedKernel>;
  struct Slot {
    SharedKernel kernel;                  // set when ready: later calls are memory hits
    std::shared_future<Outcome> pending;  // valid while the first caller loads or compiles
  };

  Result<CacheLookup> load_or_compile(const std::string& key, const std::string& spec_text, const CompileFn& compile);
  SharedKernel load_from_disk(const std::string& key);
  Result<SharedKernel> run_compile(const std::string& key, const std::string& spec_text, const CompileFn& compile);
  void publish(const std::string& key, const CompiledKernel& kernel);
  void finish_flight(const std::string& key, std::promise<Outcome>& promise, const Result<CacheLookup>& result);
  static Result<CacheLookup> wait_for(const std::shared_future<Outcome>& pending);

  KernelCacheOptions options_;
  std::unique_ptr<DiskStore> disk_;
  CacheMode mode_ = CacheMode::kMemoryOnly;
  std::atomic<bool> publish_failure_logged_{false};
  std::string open_problem_;  // why the directory could not be used (memory-only mode)

  mutable std::mutex publish_error_mutex_;
  std::string last_publish_error_;

  mutable std::mutex mutex_;  // guards slots_ only
  std::unordered_map<std::string, Slot> slots_;
};

}  // namespace flashjit
