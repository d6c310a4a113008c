#include "cache/kernel_cache.hpp"

#include "cache/cache_key.hpp"
#include "common/log.hpp"

namespace flashjit {
namespace {

Error bad_key(const std::string& key) {
  return Error::invalid_argument("key", "'" + key.substr(0, 80) + "' is not a cache key (64 lowercase hex digits)");
}

Error not_compiled(const std::string& key) {
  return Error::make(ErrorCode::kNotCompiled, "kernel " + key + " is not in the cache");
}

}  // namespace

const char* cache_source_name(CacheLookup::Source source) {
  switch (source) {
    case CacheLookup::Source::kMemory: return "memory";
    case CacheLookup::Source::kDisk: return "disk";
    case CacheLookup::Source::kCompiled: return "compiled";
  }
  return "?";
}

const char* cache_mode_name(CacheMode mode) {
  switch (mode) {
    case CacheMode::kMemoryOnly: return "memory-only";
    case CacheMode::kReadOnlyDisk: return "read-only disk";
    case CacheMode::kReadWriteDisk: return "read-write disk";
  }
  return "?";
}

KernelCache::KernelCache(KernelCacheOptions options) : options_(std::move(options)) {
  if (!options_.dir) return;  // memory only, as asked
  if (options_.dir->empty()) {
    open_problem_ = "no cache directory (set FLASHJIT_CACHE_DIR or HOME)";
    logger().warn("cache: no cache directory (set FLASHJIT_CACHE_DIR or HOME); kernels are kept in memory only");
    return;
  }
  // The one warning of this cache about its directory, if any, is logged here.
  auto store = DiskStore::open({.dir = *options_.dir, .max_bytes = options_.max_bytes});
  if (!store.ok()) {
    open_problem_ = store.error().message;
    logger().warn("cache: {}; kernels are kept in memory only", store.error().message);
    return;
  }
  disk_ = std::move(store).value();
  mode_ = disk_->writable() ? CacheMode::kReadWriteDisk : CacheMode::kReadOnlyDisk;
  if (mode_ == CacheMode::kReadOnlyDisk) {
    logger().warn("cache: {} is not writable; its entries are used, new kernels are kept in memory only", disk_->dir());
  }
}

const std::string& KernelCache::dir() const {
  static const std::string kNone;
  return disk_ ? disk_->dir() : kNone;
}

bool KernelCache::stored(const std::string& key) const {
  if (!disk_ || !is_cache_key(key)) return false;
  auto st = posix::stat_path(disk_->entry_path(key));
  return st.ok() && st->regular;
}

std::string KernelCache::why_not_stored() const {
  if (!options_.dir) return "the cache is memory only";
  if (!disk_) return "the cache directory could not be used: " + open_problem_;
  if (mode_ == CacheMode::kReadOnlyDisk) return "the cache directory " + disk_->dir() + " is not writable";
  std::lock_guard lock(publish_error_mutex_);
  if (!last_publish_error_.empty()) return "writing to " + disk_->dir() + " failed: " + last_publish_error_;
  return "it is not in " + disk_->dir();
}

std::size_t KernelCache::memory_entries() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, slot] : slots_) n += slot.kernel ? 1 : 0;
  return n;
}

Result<CacheLookup> KernelCache::get_or_compile(const std::string& key, const std::string& spec_text,
                                                const CompileFn& compile) {
  if (!is_cache_key(key)) return bad_key(key);

  // A memory hit, or join the caller already loading/compiling this key, or become that caller.
  std::promise<Outcome> promise;
  {
    std::unique_lock lock(mutex_);
    auto [it, inserted] = slots_.try_emplace(key);
    if (!inserted) {
      if (it->second.kernel) return CacheLookup{it->second.kernel, CacheLookup::Source::kMemory};
      std::shared_future<Outcome> pending = it->second.pending;
      lock.unlock();
      return wait_for(pending);
    }
    it->second.pending = promise.get_future().share();
  }

  // This caller leads: disk, then compile, outside the lock; then hand the result to the waiters.
  Result<CacheLookup> result = load_or_compile(key, spec_text, compile);
  finish_flight(key, promise, result);
  return result;
}

Result<CacheLookup> KernelCache::lookup(const std::string& key) {
  if (!is_cache_key(key)) return bad_key(key);

  // A memory hit, or wait for the load/compile in flight.
  {
    std::unique_lock lock(mutex_);
    if (auto it = slots_.find(key); it != slots_.end()) {
      if (it->second.kernel) return CacheLookup{it->second.kernel, CacheLookup::Source::kMemory};
      std::shared_future<Outcome> pending = it->second.pending;
      lock.unlock();
      return wait_for(pending);
    }
  }

  // The disk, without joining or starting a flight (a read is cheap and changes nothing).
  SharedKernel kernel = load_from_disk(key);
  if (!kernel) return not_compiled(key);
  std::lock_guard lock(mutex_);
  Slot& slot = slots_[key];
  if (!slot.kernel && !slot.pending.valid()) slot.kernel = kernel;
  return CacheLookup{kernel, CacheLookup::Source::kDisk};
}

Result<CacheLookup> KernelCache::load_or_compile(const std::string& key, const std::string& spec_text,
                                                 const CompileFn& compile) {
  // Disk hit: an earlier run or another process compiled it.
  if (SharedKernel hit = load_from_disk(key)) return CacheLookup{hit, CacheLookup::Source::kDisk};

  // Take the cross-process lock when we can, then look again: while we waited, the holder has
  // probably published it. NOTES: held until this compile is published, released on return.
  KeyLock lock;
  if (disk_ && options_.cross_process_lock) {
    lock = disk_->lock_key(key, options_.lock_timeout);
    if (lock.held()) {
      if (SharedKernel hit = load_from_disk(key)) return CacheLookup{hit, CacheLookup::Source::kDisk};
    }
  }

  // Compile, then publish (a publish failure is logged and the kernel still returned).
  auto compiled = run_compile(key, spec_text, compile);
  if (!compiled.ok()) return compiled.take_error();
  publish(key, **compiled);
  return CacheLookup{*compiled, CacheLookup::Source::kCompiled};
}

KernelCache::SharedKernel KernelCache::load_from_disk(const std::string& key) {
  if (!disk_) return nullptr;
  auto loaded = disk_->load(key);
  if (!loaded.ok()) {
    // A corrupt entry was already logged (warn) and set aside by the store; a plain miss is normal.
    if (loaded.error().code != ErrorCode::kNotCompiled) logger().debug("cache: miss for {}: {}", key, loaded.error().message);
    return nullptr;
  }
  // NOTES: compile_ms is the cost of producing this kernel in this process: zero for a cache hit
  // (the stored value stays on disk, for list()).
  loaded->compile_ms = 0;
  return std::make_shared<const CompiledKernel>(std::move(loaded).value());
}

Result<KernelCache::SharedKernel> KernelCache::run_compile(const std::string& key, const std::string& spec_text,
                                                           const CompileFn& compile) {
  logger().debug("cache: compiling {} ({})", key, spec_text);
  Result<CompiledKernel> compiled = Error::make(ErrorCode::kInternal, "compile function threw");
  // NOTES: nothing in flashjit throws, but a waiter must never be left waiting on an exception.
  try {
    compiled = compile();
  } catch (...) {
  }
  if (!compiled.ok()) return compiled.take_error();
  if (compiled->spec_text.empty()) compiled->spec_text = spec_text;
  return std::make_shared<const CompiledKernel>(std::move(compiled).value());
}

void KernelCache::publish(const std::string& key, const CompiledKernel& kernel) {
  if (mode_ != CacheMode::kReadWriteDisk) return;  // memory only: already warned once at construction
  Status st = disk_->publish(key, kernel);
  if (st.ok()) return;
  {
    std::lock_guard lock(publish_error_mutex_);
    last_publish_error_ = st.error().message;
  }
  // Disk full or similar: warn once per cache, then quietly keep kernels in memory.
  if (!publish_failure_logged_.exchange(true)) {
    logger().warn("cache: cannot publish to {} ({}); kernels are kept in memory", disk_->dir(), st.error().message);
  } else {
    logger().debug("cache: cannot publish {}: {}", key, st.error().message);
  }
}

void KernelCache::finish_flight(const std::string& key, std::promise<Outcome>& promise,
                                const Result<CacheLookup>& result) {
  {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key);
    if (result.ok()) {
      it->second.kernel = result->kernel;
      it->second.pending = {};
    } else {
      slots_.erase(it);  // not remembered: the next call compiles again
    }
  }
  promise.set_value(result.ok() ? Outcome(result->kernel) : Outcome(result.error()));
}

Result<CacheLookup> KernelCache::wait_for(const std::shared_future<Outcome>& pending) {
  const Outcome& outcome = pending.get();
  if (!outcome.ok()) return outcome.error();
  return CacheLookup{*outcome, CacheLookup::Source::kMemory};
}

}  // namespace flashjit
