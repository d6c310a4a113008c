// The disk side of the cache: one directory of self-describing entry files.
//
// Directory layout (nothing else in the directory is touched, not even by clear()):
//   <key>.entry                      one entry (see entry_format.hpp), key = 64 lowercase hex
//   <key>.lock                       best-effort cross-process compile lock, empty, never an entry
//   .tmp-<key>-<pid>-<tid>-<random>  an entry being written; renamed to <key>.entry when complete
//   quarantine/<key>.entry.bad-...   corrupt entries set aside (or <key>.entry.bad-... in place)
//
// Invariants:
//  - readers open final names only, and a final name only ever appears by rename of a complete,
//    fsynced file, so a reader sees a whole entry or none (across threads and processes);
//  - a corrupt entry is never returned: it is a miss, set aside (not deleted) and logged once;
//  - a hit needs read access only; refreshing its last-used stamp (mtime) fails silently;
//  - with a size cap, the entries' total stays under it after each publish, evicting by
//    least-recent stamp and never the entry just published.
// All methods are thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key_lock.hpp"
#include "cache/posix_file.hpp"
#include "common/status.hpp"
#include "compile/compiled_kernel.hpp"

namespace flashjit {

inline constexpr std::string_view kEntrySuffix = ".entry";
inline constexpr std::string_view kLockSuffix = ".lock";
inline constexpr std::string_view kTempPrefix = ".tmp-";
inline constexpr std::string_view kBadMarker = ".bad-";
inline constexpr std::string_view kQuarantineDir = "quarantine";

struct DiskStoreOptions {
  std::string dir;
  std::uint64_t max_bytes = 0;  // cap on the entries' total size; 0 = no cap
  bool create = true;           // false: a missing directory is kNotCompiled (the tool's read-only commands)
};

// One row of list().
struct CacheEntryInfo {
  std::string key;
  std::string path;
  std::uint64_t file_bytes = 0;
  std::int64_t last_used_ns = 0;  // the stamp: file mtime, ns since the Unix epoch
  bool valid = false;
  std::string problem;  // why not valid
  bool set_aside = false;  // verify(): the bad file was moved aside (a read-only directory keeps it)
  // From the decoded entry; empty when not valid.
  std::string spec_text;
  std::string nvrtc_version;  // of the compile; empty for entries written before it was recorded
  std::string kernel_name;
  std::uint64_t cubin_bytes = 0;
  PtxasReport report;
  double compile_ms = 0;
};

struct CacheStats {
  std::string dir;
  bool writable = false;
  std::uint64_t max_bytes = 0;
  std::size_t entries = 0;
  std::uint64_t total_bytes = 0;  // of the entries
  std::size_t quarantined = 0;
  std::size_t temp_files = 0;
};

struct VerifyReport {
  std::size_t checked = 0;
  std::size_t valid = 0;
  std::vector<CacheEntryInfo> bad;  // each says whether it was set aside
};

struct ClearReport {
  std::size_t entries = 0;
  std::size_t temp_files = 0;
  std::size_t quarantined = 0;
  std::size_t lock_files = 0;
};

class DiskStore {
 public:
  // Creates the directory when missing (unless options.create is false: then kNotCompiled naming
  // it). kCacheIo when it cannot be created or is not a directory (a symlink to one is one).
  // An existing directory that cannot be written opens read-only (hits only, publish refused).
  // A writable one is swept of temporary files left by crashed writers (older than an hour).
  static Result<std::unique_ptr<DiskStore>> open(DiskStoreOptions options);

  const std::string& dir() const { return options_.dir; }
  bool writable() const { return writable_; }
  std::uint64_t max_bytes() const { return options_.max_bytes; }
  std::string entry_path(const std::string& key) const;

  // The entry for key: kNotCompiled when absent, kCacheIo when unreadable or corrupt (a corrupt
  // file is set aside and logged once). A hit refreshes the last-used stamp when permitted.
  Result<CompiledKernel> load(const std::string& key);

  // Writes the entry atomically, then evicts down to the cap. Refused when read-only.
  Status publish(const std::string& key, const CompiledKernel& kernel);

  // The best-effort cross-process lock for compiling key (not held when read-only).
  KeyLock lock_key(const std::string& key, std::chrono::milliseconds timeout) const;

  // ---- maintenance (the tool) ----
  // An entry name that is not a regular file (a directory put there) is listed, verified and
  // cleared like a bad entry, never skipped.
  Result<std::vector<CacheEntryInfo>> list() const;  // sorted by key; decodes every entry, changes nothing
  Result<CacheStats> stats() const;                  // from file sizes only
  Result<VerifyReport> verify();                     // decodes every entry, sets bad ones aside
  Result<ClearReport> clear();                       // entries, temp and lock files, quarantine
  // The unique key starting with key_or_prefix: kInvalidArgument when not hex; kNotCompiled when
  // no entry or several match (the message lists them).
  Result<std::string> resolve_key(std::string_view key_or_prefix) const;
  Result<std::string> extract(std::string_view key_or_prefix) const;  // the cubin bytes

 private:
  struct EntryFile {
    std::string key;
    posix::FileStat stat;
  };

  explicit DiskStore(DiskStoreOptions options, bool writable);
  Result<std::vector<EntryFile>> scan_entries() const;
  // Who met a bad entry decides its warning's wording: load() treats it as a miss (the caller may
  // compile it again), verify() only reports it.
  enum class FoundBy { kLoad, kVerify };
  // True when the file was moved aside (or was already replaced by another writer).
  bool set_aside(const std::string& key, const posix::FileIdentity& seen, const std::string& problem, FoundBy found_by);
  void evict_to_cap(const std::string& keep_key);
  void sweep_stale_temp_files();

  DiskStoreOptions options_;
  bool writable_ = false;
  std::mutex evict_mutex_;  // one eviction pass at a time through this store
};

}  // namespace flashjit
