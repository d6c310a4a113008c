#include "cache/disk_store.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "cache/cache_key.hpp"
#include "cache/entry_format.hpp"
#include "common/log.hpp"
#include "common/quote.hpp"

namespace flashjit {
namespace {

constexpr std::int64_t kStaleTempNs = std::int64_t(3600) * 1000000000;  // an hour

enum class NameKind { kEntry, kLock, kTemp, kBad, kOther };

// What a name in the cache directory is. Only kEntry names are ever read as entries.
NameKind classify(std::string_view name, std::string* key = nullptr) {
  if (name.starts_with(kTempPrefix)) return NameKind::kTemp;
  if (name.find(kBadMarker) != std::string_view::npos) return NameKind::kBad;
  for (auto [suffix, kind] : {std::pair{kEntrySuffix, NameKind::kEntry}, std::pair{kLockSuffix, NameKind::kLock}}) {
    if (!name.ends_with(suffix)) continue;
    const std::string_view stem = name.substr(0, name.size() - suffix.size());
    if (!is_cache_key(stem)) return NameKind::kOther;
    if (key) *key = std::string(stem);
    return kind;
  }
  return NameKind::kOther;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Moves a bad file into quarantine/, or renames it in place when that folder cannot be made.
Result<std::string> move_aside(const std::string& dir, const std::string& name) {
  const std::string bad_name = name + std::string(kBadMarker) + posix::unique_suffix();
  const std::string quarantine = posix::join_path(dir, std::string(kQuarantineDir));
  if (posix::make_directories(quarantine).ok()) {
    const std::string dest = posix::join_path(quarantine, bad_name);
    if (posix::rename_path(posix::join_path(dir, name), dest).ok()) return dest;
  }
  const std::string dest = posix::join_path(dir, bad_name);
  if (Status st = posix::rename_path(posix::join_path(dir, name), dest); !st.ok()) return st.take_error();
  return dest;
}

// True the first time a bad file is reported in this process. NOTES: process-wide, not per store,
// so that a bad file that cannot be moved (read-only directory) is logged once even when several
// caches or tool commands open the same directory. Keyed by path alone: on the H200 machine's file
// system the inode seen for one unchanged file differed between two stats, which logged it twice.
bool first_report(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard lock(mutex);
  return reported.insert(path).second;
}

// A list() row with what the directory says (the decoded fields are filled in by the caller).
CacheEntryInfo row_for(const std::string& key, const std::string& path, const posix::FileStat& stat) {
  CacheEntryInfo info;
  info.key = key;
  info.path = path;
  info.file_bytes = stat.size;
  info.last_used_ns = stat.mtime_ns;
  return info;
}

void fill_from_kernel(CacheEntryInfo& info, CompiledKernel&& kernel) {
  info.valid = true;
  info.spec_text = std::move(kernel.spec_text);
  info.nvrtc_version = std::move(kernel.nvrtc_version);
  info.kernel_name = std::move(kernel.kernel_name);
  info.cubin_bytes = kernel.cubin.size();
  info.report = std::move(kernel.report);
  info.compile_ms = kernel.compile_ms;
}

}  // namespace

DiskStore::DiskStore(DiskStoreOptions options, bool writable) : options_(std::move(options)), writable_(writable) {}

Result<std::unique_ptr<DiskStore>> DiskStore::open(DiskStoreOptions options) {
  if (options.dir.empty()) return Error::make(ErrorCode::kCacheIo, "no cache directory given");
  if (!options.create) {
    auto st = posix::stat_following_links(options.dir);
    if (!st.ok() && st.error().code == ErrorCode::kNotCompiled) {
      return Error::make(ErrorCode::kNotCompiled, "cache directory " + options.dir + " does not exist");
    }
  }
  // Create the directory; an existing one is fine even when it cannot be written.
  if (Status st = posix::make_directories(options.dir); !st.ok()) return st.take_error();
  // Probe for write access by creating a file: permission bits alone miss read-only mounts and root.
  const std::string probe = posix::join_path(options.dir, std::string(kTempPrefix) + "probe-" + posix::unique_suffix());
  const bool writable = posix::probe_writable(probe);
  std::unique_ptr<DiskStore> store(new DiskStore(std::move(options), writable));
  if (writable) store->sweep_stale_temp_files();
  return store;
}

std::string DiskStore::entry_path(const std::string& key) const {
  return posix::join_path(options_.dir, key + std::string(kEntrySuffix));
}

Result<CompiledKernel> DiskStore::load(const std::string& key) {
  // Read the final name only: it holds a complete entry or nothing.
  const std::string path = entry_path(key);
  auto file = posix::read_file(path);
  if (!file.ok()) {
    // Something else under the entry's name (a directory): set aside like a corrupt entry, or no
    // compile of this key could ever publish it.
    if (auto st = posix::stat_path(path); st.ok() && !st->regular) {
      set_aside(key, st->identity, file.error().message, FoundBy::kLoad);
    }
    return file.take_error();
  }

  // Decode; a bad file is a miss and is set aside, so the recompiled entry can take its name.
  auto kernel = decode_entry(file->bytes, key);
  if (!kernel.ok()) {
    set_aside(key, file->identity, kernel.error().message, FoundBy::kLoad);
    return kernel.take_error();
  }

  // Refresh the last-used stamp; without write access this fails, silently, and the hit stands.
  posix::touch_now(path);
  return kernel;
}

Status DiskStore::publish(const std::string& key, const CompiledKernel& kernel) {
  if (!writable_) return Error::make(ErrorCode::kCacheIo, "cache directory " + options_.dir + " is read-only");
  if (kernel.cubin.empty()) return Error::invalid_argument("cubin", "refusing to publish an empty cubin");

  // Write the whole entry under a temporary name in the same directory (same filesystem, so the
  // rename below is atomic). The temporary name never looks like an entry.
  const std::string temp =
      posix::join_path(options_.dir, std::string(kTempPrefix) + key + "-" + posix::unique_suffix());
  const std::string bytes = encode_entry(key, kernel);
  if (Status st = posix::write_new_file_durably(temp, bytes); !st.ok()) return st;

  // Rename over the final name: readers see the previous file or this one, never part of one.
  // NOTES: a concurrent publisher of the same key is harmless: both files hold the same kernel and
  // the last rename wins; a reader holding the replaced file keeps reading it intact.
  const std::string path = entry_path(key);
  if (Status st = posix::rename_path(temp, path); !st.ok()) {
    (void)posix::remove_file(temp);
    return st;
  }

  // Make the rename durable; best effort, the entry is already whole and visible.
  if (Status st = posix::fsync_directory(options_.dir); !st.ok()) logger().debug("cache: {}", st.error().message);
  logger().debug("cache: published {} ({} bytes, {})", path, bytes.size(), kernel.spec_text);

  evict_to_cap(key);
  return Status::Ok();
}

KeyLock DiskStore::lock_key(const std::string& key, std::chrono::milliseconds timeout) const {
  if (!writable_) return {};
  return KeyLock::acquire(posix::join_path(options_.dir, key + std::string(kLockSuffix)), timeout);
}

bool DiskStore::set_aside(const std::string& key, const posix::FileIdentity& seen, const std::string& problem,
                          FoundBy found_by) {
  // Only the file that was read: a writer may have renamed a good entry over the name since.
  const std::string path = entry_path(key);
  auto now = posix::stat_path(path);
  if (!now.ok() || now->identity != seen) {
    logger().debug("cache: {} was replaced while being read; not set aside", path);
    return true;
  }

  // Move it aside; once moved, no reader sees it again, so this warning is its only one.
  const char* who = found_by == FoundBy::kVerify ? "cache verify" : "cache";
  const char* then = found_by == FoundBy::kVerify ? "" : "; treated as a miss";
  auto moved = move_aside(options_.dir, key + std::string(kEntrySuffix));
  if (moved.ok()) {
    logger().warn("{}: corrupt entry {} ({}); moved to {}{}", who, path, problem, *moved, then);
    return true;
  }

  // It stays (read-only directory): still a miss every time, but logged once per file.
  if (first_report(path)) {
    logger().warn("{}: corrupt entry {} ({}); cannot set it aside ({}){}", who, path, problem, moved.error().message, then);
  }
  return false;
}

Result<std::vector<DiskStore::EntryFile>> DiskStore::scan_entries() const {
  auto names = posix::list_directory(options_.dir);
  if (!names.ok()) return names.take_error();
  std::vector<EntryFile> entries;
  for (const std::string& name : *names) {
    std::string key;
    if (classify(name, &key) != NameKind::kEntry) continue;
    // NOTES: not only regular files: a directory under an entry's name must be seen to be set
    // aside or cleared (it was skipped: 0 checked, and no compile could publish the key).
    auto st = posix::stat_path(posix::join_path(options_.dir, name));
    if (st.ok()) entries.push_back({std::move(key), *st});  // gone meanwhile: skipped
  }
  std::sort(entries.begin(), entries.end(), [](const EntryFile& a, const EntryFile& b) { return a.key < b.key; });
  return entries;
}

void DiskStore::evict_to_cap(const std::string& keep_key) {
  if (options_.max_bytes == 0) return;
  std::lock_guard lock(evict_mutex_);
  auto entries = scan_entries();
  if (!entries.ok()) return;
  std::uint64_t total = 0;
  for (const EntryFile& e : *entries) total += e.stat.size;
  if (total <= options_.max_bytes) return;

  // Least recently used first; ties broken by key so that every process picks the same order. A
  // stamp in the future (a clock set back, a copied file) says nothing about use: it counts as the
  // oldest, or the entry would outrank every real one and never be evicted. A hit stamps it now.
  const std::int64_t now = now_ns();
  auto stamp = [now](const EntryFile& e) { return e.stat.mtime_ns > now ? std::int64_t(0) : e.stat.mtime_ns; };
  std::sort(entries->begin(), entries->end(), [&](const EntryFile& a, const EntryFile& b) {
    return stamp(a) != stamp(b) ? stamp(a) < stamp(b) : a.key < b.key;
  });
  for (const EntryFile& e : *entries) {
    if (total <= options_.max_bytes) break;
    if (e.key == keep_key) continue;
    // NOTES: a file another process evicted first (ENOENT) counts as gone too, so that two
    // processes evicting at once do not both remove an extra entry.
    if (!(e.stat.regular ? posix::remove_file(entry_path(e.key)) : posix::remove_tree(entry_path(e.key))).ok()) continue;
    total -= e.stat.size;
    logger().debug("cache: evicted {} ({} bytes); total {} of cap {}", e.key, e.stat.size, total, options_.max_bytes);
  }
}

void DiskStore::sweep_stale_temp_files() {
  auto names = posix::list_directory(options_.dir);
  if (!names.ok()) return;
  const std::int64_t cutoff = now_ns() - kStaleTempNs;
  for (const std::string& name : *names) {
    if (classify(name) != NameKind::kTemp) continue;
    const std::string path = posix::join_path(options_.dir, name);
    // Young temporary files may belong to a writer that is still running.
    if (auto st = posix::stat_path(path); st.ok() && st->mtime_ns < cutoff) (void)posix::remove_file(path);
  }
}

// ---- maintenance ----

Result<std::vector<CacheEntryInfo>> DiskStore::list() const {
  auto entries = scan_entries();
  if (!entries.ok()) return entries.take_error();
  std::vector<CacheEntryInfo> rows;
  for (const EntryFile& e : *entries) {
    CacheEntryInfo info = row_for(e.key, entry_path(e.key), e.stat);
    auto file = posix::read_file(info.path);
    auto kernel = file.ok() ? decode_entry(file->bytes, e.key) : Result<CompiledKernel>(file.take_error());
    if (kernel.ok()) fill_from_kernel(info, std::move(kernel).value());
    else info.problem = kernel.error().message;
    rows.push_back(std::move(info));
  }
  return rows;
}

Result<CacheStats> DiskStore::stats() const {
  auto names = posix::list_directory(options_.dir);
  if (!names.ok()) return names.take_error();
  CacheStats stats{.dir = options_.dir, .writable = writable_, .max_bytes = options_.max_bytes};
  for (const std::string& name : *names) {
    switch (classify(name)) {
      case NameKind::kEntry:
        if (auto st = posix::stat_path(posix::join_path(options_.dir, name)); st.ok()) {
          ++stats.entries;
          if (st->regular) stats.total_bytes += st->size;
        }
        break;
      case NameKind::kTemp: ++stats.temp_files; break;
      case NameKind::kBad: ++stats.quarantined; break;
      default: break;
    }
  }
  if (auto quarantined = posix::list_directory(posix::join_path(options_.dir, std::string(kQuarantineDir)));
      quarantined.ok()) {
    stats.quarantined += quarantined->size();
  }
  return stats;
}

Result<VerifyReport> DiskStore::verify() {
  auto entries = scan_entries();
  if (!entries.ok()) return entries.take_error();
  VerifyReport report;
  for (const EntryFile& e : *entries) {
    CacheEntryInfo info = row_for(e.key, entry_path(e.key), e.stat);
    auto file = posix::read_file(info.path);
    if (!file.ok() && file.error().code == ErrorCode::kNotCompiled) continue;  // evicted meanwhile
    ++report.checked;
    if (!file.ok()) {
      info.problem = file.error().message;
      // Not a file (a directory under the name): set aside. Unreadable (permissions): left where it is.
      if (!e.stat.regular) info.set_aside = set_aside(e.key, e.stat.identity, info.problem, FoundBy::kVerify);
      report.bad.push_back(std::move(info));
      continue;
    }
    auto kernel = decode_entry(file->bytes, e.key);
    if (kernel.ok()) {
      ++report.valid;
      continue;
    }
    info.problem = kernel.error().message;
    info.set_aside = set_aside(e.key, file->identity, info.problem, FoundBy::kVerify);
    report.bad.push_back(std::move(info));
  }
  return report;
}

Result<ClearReport> DiskStore::clear() {
  auto names = posix::list_directory(options_.dir);
  if (!names.ok()) return names.take_error();
  ClearReport report;
  std::optional<Error> first_error;
  auto remove = [&](const std::string& path, std::size_t& counter) {
    // A directory under one of our names (an entry path replaced by one) goes with what is in it.
    auto st = posix::stat_path(path);
    Status removed = st.ok() && st->directory ? posix::remove_tree(path) : posix::remove_file(path);
    if (removed.ok()) ++counter;
    else if (!first_error) first_error = removed.take_error();
  };

  // Our own names in the directory; anything else (the user's files) stays.
  for (const std::string& name : *names) {
    const std::string path = posix::join_path(options_.dir, name);
    switch (classify(name)) {
      case NameKind::kEntry: remove(path, report.entries); break;
      case NameKind::kTemp: remove(path, report.temp_files); break;
      case NameKind::kLock: remove(path, report.lock_files); break;
      case NameKind::kBad: remove(path, report.quarantined); break;
      case NameKind::kOther: break;
    }
  }

  // The quarantine folder and the bad files in it.
  const std::string quarantine = posix::join_path(options_.dir, std::string(kQuarantineDir));
  if (auto bad = posix::list_directory(quarantine); bad.ok()) {
    for (const std::string& name : *bad) {
      if (name.find(kBadMarker) != std::string::npos) remove(posix::join_path(quarantine, name), report.quarantined);
    }
    ::rmdir(quarantine.c_str());  // stays when something else is in it
  }
  if (first_error) return *first_error;
  return report;
}

Result<std::string> DiskStore::resolve_key(std::string_view key_or_prefix) const {
  std::string prefix(key_or_prefix);
  std::transform(prefix.begin(), prefix.end(), prefix.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (!is_cache_key_prefix(prefix)) {
    return Error::invalid_argument("key", quote_user_text(key_or_prefix) + " is not a key or key prefix (1..64 hex digits)");
  }
  auto entries = scan_entries();
  if (!entries.ok()) return entries.take_error();
  std::vector<std::string> matches;
  for (const EntryFile& e : *entries) {
    if (e.key.starts_with(prefix)) matches.push_back(e.key);
  }
  if (matches.empty()) return Error::make(ErrorCode::kNotCompiled, "no cache entry in " + options_.dir + " matches '" + prefix + "'");
  // NOTES: the same code as no match (the tool exits 1 for both): neither names one entry.
  if (matches.size() > 1) {
    std::string listed;
    for (const std::string& m : matches) listed += (listed.empty() ? "" : ", ") + m;
    return Error::make(ErrorCode::kNotCompiled, "key prefix '" + prefix + "' is ambiguous in " + options_.dir + ": " +
                                                    std::to_string(matches.size()) + " entries match: " + listed);
  }
  return matches.front();
}

Result<std::string> DiskStore::extract(std::string_view key_or_prefix) const {
  auto key = resolve_key(key_or_prefix);
  if (!key.ok()) return key.take_error();
  auto file = posix::read_file(entry_path(*key));
  if (!file.ok()) return file.take_error();
  auto kernel = decode_entry(file->bytes, *key);
  if (!kernel.ok()) return kernel.take_error();
  return std::move(kernel->cubin);
}

}  // namespace flashjit
