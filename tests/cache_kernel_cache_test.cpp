#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <grp.h>
#include <latch>
#include <thread>

#include "cache/entry_format.hpp"
#include "cache/kernel_cache.hpp"
#include "cache_test_util.hpp"

namespace flashjit {
namespace {

using namespace cache_test;
using namespace std::chrono_literals;
using Source = CacheLookup::Source;

// A compile function that counts its calls.
struct FakeCompiler {
  std::string seed;
  std::chrono::milliseconds delay{0};
  std::atomic<int> calls{0};
  CompileFn fn() {
    return [this]() -> Result<CompiledKernel> {
      ++calls;
      std::this_thread::sleep_for(delay);
      return fake_kernel(seed);
    };
  }
};

std::vector<std::string> entries_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& name : names_in(dir)) {
    if (name.ends_with(".entry")) out.push_back(name);
  }
  return out;
}

// ---- single flight within a process ----

void run_sixteen_threads_one_key(KernelCacheOptions options) {
  KernelCache cache(std::move(options));
  const std::string key = key_for("one");
  FakeCompiler compiler{.seed = "one", .delay = 50ms};
  constexpr int kThreads = 16;
  std::latch start(kThreads);
  std::vector<std::optional<Result<CacheLookup>>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[std::size_t(i)] = cache.get_or_compile(key, "spec", compiler.fn());
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ(compiler.calls, 1);
  int compiled = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r && r->ok());
    compiled += (*r)->source == Source::kCompiled;
    EXPECT_EQ((*r)->kernel, (*results[0])->kernel);  // the very same kernel object
    EXPECT_EQ((*r)->kernel->cubin, fake_kernel("one").cubin);
  }
  EXPECT_EQ(compiled, 1);
  EXPECT_EQ(cache.memory_entries(), 1u);
}

TEST(CacheKernelCache, SixteenThreadsOneKeyCompileOnce) {
  TempDir tmp;
  run_sixteen_threads_one_key({.dir = tmp.path()});
  EXPECT_EQ(entries_in(tmp.path()).size(), 1u);
}

TEST(CacheKernelCache, SixteenThreadsOneKeyCompileOnceMemoryOnly) { run_sixteen_threads_one_key({}); }

TEST(CacheKernelCache, DifferentKeysCompileInParallel) {
  TempDir tmp;
  KernelCache cache({.dir = tmp.path()});
  constexpr int kKeys = 4;
  // Each compile waits until all four are inside a compile at once: a lock held across compiles
  // would leave the first one waiting alone until the timeout.
  std::mutex mutex;
  std::condition_variable cv;
  int inside = 0;
  std::atomic<bool> all_met{true};
  auto compile_for = [&](int i) -> CompileFn {
    return [&, i]() -> Result<CompiledKernel> {
      std::unique_lock lock(mutex);
      ++inside;
      cv.notify_all();
      if (!cv.wait_for(lock, 5s, [&] { return inside == kKeys; })) all_met = false;
      return fake_kernel(std::to_string(i));
    };
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kKeys; ++i) {
    threads.emplace_back([&, i] {
      auto r = cache.get_or_compile(key_for(std::to_string(i)), "spec", compile_for(i));
      EXPECT_TRUE(r.ok());
      EXPECT_EQ(r->source, Source::kCompiled);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(all_met) << "compiles of different keys did not overlap";
  EXPECT_EQ(entries_in(tmp.path()).size(), std::size_t(kKeys));
}

TEST(CacheKernelCache, CompileFailureReachesAllWaitersAndIsNotCached) {
  TempDir tmp;
  KernelCache cache({.dir = tmp.path()});
  const std::string key = key_for("fails");
  constexpr int kThreads = 8;
  std::atomic<int> calls{0}, arrived{0};
  auto failing = [&]() -> Result<CompiledKernel> {
    ++calls;
    // Stay in flight until every caller has arrived, and a little longer.
    while (arrived < kThreads) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    return Error::make(ErrorCode::kCompileFailed, "nvrtc: error in line 1", "full log");
  };
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      ++arrived;
      auto r = cache.get_or_compile(key, "spec", failing);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, ErrorCode::kCompileFailed);
      EXPECT_EQ(r.error().message, "nvrtc: error in line 1");
      EXPECT_EQ(r.error().log, "full log");
      ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(failures, kThreads);
  EXPECT_TRUE(entries_in(tmp.path()).empty());
  for (const std::string& name : names_in(tmp.path())) EXPECT_FALSE(name.starts_with(".tmp-")) << name;
  EXPECT_EQ(cache.memory_entries(), 0u);

  // The failure is not remembered: the next call compiles again, and may succeed.
  FakeCompiler ok{.seed = "fails"};
  auto r = cache.get_or_compile(key, "spec", ok.fn());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->source, Source::kCompiled);
  EXPECT_EQ(ok.calls, 1);
  EXPECT_EQ(entries_in(tmp.path()).size(), 1u);
}

// ---- disk layering ----

TEST(CacheKernelCache, SourcesMemoryDiskCompiled) {
  TempDir tmp;
  const std::string key = key_for("layers");
  FakeCompiler compiler{.seed = "layers"};
  {
    KernelCache first({.dir = tmp.path()});
    EXPECT_EQ(first.mode(), CacheMode::kReadWriteDisk);
    auto compiled = first.get_or_compile(key, "spec", compiler.fn());
    ASSERT_TRUE(compiled.ok());
    EXPECT_EQ(compiled->source, Source::kCompiled);
    EXPECT_EQ(compiled->kernel->compile_ms, fake_kernel("layers").compile_ms);
    auto again = first.get_or_compile(key, "spec", compiler.fn());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->source, Source::kMemory);
  }
  // A new cache (a new process) finds it on disk.
  KernelCache second({.dir = tmp.path()});
  auto hit = second.get_or_compile(key, "spec", compiler.fn());
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source, Source::kDisk);
  EXPECT_EQ(hit->kernel->cubin, fake_kernel("layers").cubin);
  EXPECT_EQ(hit->kernel->compile_ms, 0);  // nothing was compiled for this hit
  EXPECT_EQ(compiler.calls, 1);
}

TEST(CacheKernelCache, LookupNeverCompiles) {
  TempDir tmp;
  const std::string key = key_for("lookup");
  KernelCache cache({.dir = tmp.path()});
  auto miss = cache.lookup(key);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.error().code, ErrorCode::kNotCompiled);

  FakeCompiler compiler{.seed = "lookup"};
  ASSERT_TRUE(KernelCache({.dir = tmp.path()}).get_or_compile(key, "spec", compiler.fn()).ok());
  auto disk = cache.lookup(key);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ(disk->source, Source::kDisk);
  auto memory = cache.lookup(key);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->source, Source::kMemory);
  EXPECT_EQ(memory->kernel, disk->kernel);

  KernelCache memory_only(KernelCacheOptions{});
  EXPECT_EQ(memory_only.mode(), CacheMode::kMemoryOnly);
  EXPECT_EQ(memory_only.lookup(key).error().code, ErrorCode::kNotCompiled);
  ASSERT_TRUE(memory_only.get_or_compile(key, "spec", compiler.fn()).ok());
  EXPECT_EQ(memory_only.lookup(key)->source, Source::kMemory);
}

TEST(CacheKernelCache, RejectsMalformedKeys) {
  KernelCache cache(KernelCacheOptions{});
  FakeCompiler compiler{.seed = "k"};
  for (const std::string& key : {std::string("../../etc/passwd"), std::string(""), key_for("k").substr(1),
                                 key_for("k") + "/"}) {
    auto r = cache.get_or_compile(key, "spec", compiler.fn());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(cache.lookup(key).ok());
  }
  EXPECT_EQ(compiler.calls, 0);
}

// ---- corruption on disk ----

struct Corruption {
  const char* name;
  std::function<std::string(const std::string& good, const std::string& key)> apply;
};

std::string flip(std::string bytes, std::size_t at) {
  bytes[at] = char(bytes[at] ^ 0x04);
  return bytes;
}

const Corruption kCorruptions[] = {
    {"truncated_header", [](const std::string& g, const std::string&) { return g.substr(0, 10); }},
    {"truncated_cubin", [](const std::string& g, const std::string&) { return g.substr(0, g.size() / 2); }},
    {"truncated_checksum", [](const std::string& g, const std::string&) { return g.substr(0, g.size() - 1); }},
    {"empty", [](const std::string&, const std::string&) { return std::string(); }},
    {"zeroed", [](const std::string& g, const std::string&) { return std::string(g.size(), '\0'); }},
    {"bitflip_header", [](const std::string& g, const std::string&) { return flip(g, 30); }},
    {"bitflip_cubin", [](const std::string& g, const std::string&) { return flip(g, g.size() - 2000); }},
    {"bitflip_checksum", [](const std::string& g, const std::string&) { return flip(g, g.size() - 5); }},
    {"random_bytes", [](const std::string& g, const std::string&) {
       std::string r(g.size(), '\0');
       for (std::size_t i = 0; i < r.size(); ++i) r[i] = char((i * 2654435761u) >> 13);
       return r;
     }},
    {"other_key", [](const std::string&, const std::string&) { return encode_entry(key_for("other"), fake_kernel("c")); }},
    {"wrong_magic", [](const std::string& g, const std::string&) { return "ELF\x7f" + g.substr(4); }},
    {"other_format_version", [](const std::string& g, const std::string&) {
       std::string v = g;
       v[kEntryVersionOffset] = char(kEntryFormatVersion + 1);
       return v;
     }},
};

void PrintTo(const Corruption& c, std::ostream* os) { *os << c.name; }

class CacheCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(CacheCorruption, IsAMissSetAsideRecompiledAndLoggedOnce) {
  TempDir tmp;
  const std::string key = key_for("c");
  const std::string path = tmp.sub(key + ".entry");
  FakeCompiler first{.seed = "c"};
  ASSERT_TRUE(KernelCache({.dir = tmp.path()}).get_or_compile(key, "spec", first.fn()).ok());
  const std::string good = read_bytes(path);
  write_bytes(path, GetParam().apply(good, key));

  LogCapture logs;
  FakeCompiler compiler{.seed = "c"};
  {
    KernelCache cache({.dir = tmp.path()});
    auto r = cache.get_or_compile(key, "spec", compiler.fn());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->source, Source::kCompiled);
    EXPECT_EQ(compiler.calls, 1);
    EXPECT_EQ(r->kernel->cubin, fake_kernel("c").cubin);
    EXPECT_EQ(cache.get_or_compile(key, "spec", compiler.fn())->source, Source::kMemory);
  }
  // Set aside, not deleted; the republished entry is whole.
  EXPECT_EQ(names_in(tmp.sub("quarantine")).size(), 1u);
  EXPECT_EQ(read_bytes(path), good);
  EXPECT_EQ(logs.warnings(key), 1) << logs.all();
  EXPECT_EQ(logs.warnings(), 1) << logs.all();

  // The next process hits the new entry, with no further warning.
  KernelCache next({.dir = tmp.path()});
  EXPECT_EQ(next.get_or_compile(key, "spec", compiler.fn())->source, Source::kDisk);
  EXPECT_EQ(compiler.calls, 1);
  EXPECT_EQ(logs.warnings(), 1) << logs.all();
}

INSTANTIATE_TEST_SUITE_P(EachKind, CacheCorruption, ::testing::ValuesIn(kCorruptions),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

// ---- unusable and read-only directories ----

TEST(CacheKernelCache, UncreatableDirectoryMeansMemoryOnlyWithOneWarning) {
  // NOTES: tests run as root here, where permission bits do not stop writes; a path below a
  // regular file cannot be created by anyone.
  TempDir tmp;
  write_bytes(tmp.sub("file"), "x");
  LogCapture logs;
  KernelCache cache({.dir = tmp.sub("file/sub")});
  EXPECT_EQ(cache.mode(), CacheMode::kMemoryOnly);
  EXPECT_EQ(cache.disk(), nullptr);
  FakeCompiler compiler{.seed = "m"};
  for (int i = 0; i < 3; ++i) {
    auto r = cache.get_or_compile(key_for("m" + std::to_string(i)), "spec", compiler.fn());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, Source::kCompiled);
    EXPECT_EQ(cache.get_or_compile(key_for("m" + std::to_string(i)), "spec", compiler.fn())->source, Source::kMemory);
  }
  EXPECT_EQ(compiler.calls, 3);
  EXPECT_EQ(logs.warnings(), 1) << logs.all();
  EXPECT_EQ(logs.warnings("memory only"), 1) << logs.all();
}

TEST(CacheKernelCache, UnresolvedDirectoryMeansMemoryOnlyWithOneWarning) {
  LogCapture logs;
  KernelCache cache({.dir = std::string()});
  EXPECT_EQ(cache.mode(), CacheMode::kMemoryOnly);
  FakeCompiler compiler{.seed = "u"};
  ASSERT_TRUE(cache.get_or_compile(key_for("u"), "spec", compiler.fn()).ok());
  EXPECT_EQ(logs.warnings(), 1) << logs.all();
}

// The child: drops root if it has it (root ignores permission bits), proves it cannot write, then
// uses the cache. Exit codes say which step failed.
int read_only_child(int, char**) {
  const std::string dir = env_or_empty("FLASHJIT_TEST_CACHE_DIR");
  const std::string stored = env_or_empty("FLASHJIT_TEST_KEY");
  const std::string corrupt = env_or_empty("FLASHJIT_TEST_CORRUPT_KEY");
  if (::geteuid() == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) return 90;
  }
  if (::geteuid() == 0) return 90;
  if (posix::probe_writable(dir + "/.tmp-probe")) return 91;  // the test would prove nothing

  LogCapture logs;
  KernelCache cache({.dir = dir});
  if (cache.mode() != CacheMode::kReadOnlyDisk) return 92;
  FakeCompiler compiler{.seed = "new"};
  auto hit = cache.get_or_compile(stored, "spec", compiler.fn());
  if (!hit.ok() || hit->source != Source::kDisk || compiler.calls != 0) return 93;
  if (hit->kernel->cubin != fake_kernel("stored").cubin) return 93;
  for (const char* seed : {"new1", "new2"}) {
    auto fresh = cache.get_or_compile(key_for(seed), "spec", compiler.fn());
    if (!fresh.ok() || fresh->source != Source::kCompiled) return 94;
    if (cache.get_or_compile(key_for(seed), "spec", compiler.fn())->source != Source::kMemory) return 94;
  }
  if (compiler.calls != 2) return 94;
  if (logs.warnings() != 1) return 95;

  // A corrupt entry that cannot be moved aside: a miss, compiled, logged once per process even
  // when a second cache (with its own read-only warning) meets it again.
  auto first = cache.get_or_compile(corrupt, "spec", compiler.fn());
  if (!first.ok() || first->source != Source::kCompiled) return 96;
  KernelCache second({.dir = dir});
  auto again = second.get_or_compile(corrupt, "spec", compiler.fn());
  if (!again.ok() || again->source != Source::kCompiled || compiler.calls != 4) return 96;
  if (logs.warnings("corrupt") != 1 || logs.warnings("not writable") != 2) return 97;
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(cache_read_only_child, read_only_child);

TEST(CacheKernelCache, ReadOnlyDirectoryServesHitsWithoutWriting) {
  // How: the entries are made read-only (0555 dir, 0444 files). Root ignores those bits, so the
  // cache runs in a child that first drops to uid/gid 65534 (nobody); the child checks that it
  // really cannot create a file there before it tests anything. The parent then checks that the
  // directory is byte-for-byte and stamp-for-stamp unchanged.
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  const std::string key = key_for("stored");
  FakeCompiler compiler{.seed = "stored"};
  ASSERT_TRUE(KernelCache({.dir = dir, .cross_process_lock = false}).get_or_compile(key, "spec", compiler.fn()).ok());
  const std::string corrupt_key = key_for("corrupt");
  write_bytes(dir + "/" + corrupt_key + ".entry", "garbage");
  const std::string entry = dir + "/" + key + ".entry";
  const std::vector<std::string> names_before = names_in(dir);
  const std::string bytes_before = read_bytes(entry);
  set_mtime(entry, 1000);
  const std::int64_t stamp_before = mtime_ns(entry);
  ASSERT_EQ(::chmod(entry.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);

  const pid_t pid = spawn_child("cache_read_only_child", {{"FLASHJIT_TEST_CACHE_DIR", dir},
                                                         {"FLASHJIT_TEST_KEY", key},
                                                         {"FLASHJIT_TEST_CORRUPT_KEY", corrupt_key}});
  const int code = wait_child(pid);
  ::chmod(dir.c_str(), 0755);
  if (code == 90) GTEST_SKIP() << "cannot drop root privileges here, so a read-only directory cannot be made";
  EXPECT_EQ(code, 0) << "91: writable after all, 92: not read-only mode, 93: no disk hit, 94: compile path, "
                        "95: not exactly one warning, 96: corrupt entry not recompiled, 97: warnings not once each";
  EXPECT_EQ(names_in(dir), names_before);
  EXPECT_EQ(read_bytes(entry), bytes_before);
  EXPECT_EQ(mtime_ns(entry), stamp_before);  // the stamp could not be refreshed, silently
}

// verify in a read-only directory: the bad entry is reported as not set aside (the tool said
// "(set aside)" for an entry it had left in place).
int verify_read_only_child(int, char**) {
  const std::string dir = env_or_empty("FLASHJIT_TEST_CACHE_DIR");
  if (::geteuid() == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) return 90;
  }
  if (::geteuid() == 0) return 90;
  if (posix::probe_writable(dir + "/.tmp-probe")) return 91;
  LogCapture logs;
  auto store = DiskStore::open({.dir = dir});
  if (!store.ok() || (*store)->writable()) return 92;
  auto report = (*store)->verify();
  if (!report.ok() || report->checked != 1 || report->bad.size() != 1) return 93;
  if (report->bad[0].set_aside) return 94;
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(cache_verify_read_only_child, verify_read_only_child);

TEST(CacheKernelCache, VerifyInAReadOnlyDirectorySaysTheBadEntryStayed) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  ASSERT_TRUE(posix::make_directories(dir).ok());
  const std::string entry = dir + "/" + key_for("corrupt") + ".entry";
  write_bytes(entry, "garbage");
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  const int code = wait_child(spawn_child("cache_verify_read_only_child", {{"FLASHJIT_TEST_CACHE_DIR", dir}}));
  ::chmod(dir.c_str(), 0755);
  if (code == 90) GTEST_SKIP() << "cannot drop root privileges here, so a read-only directory cannot be made";
  EXPECT_EQ(code, 0) << "91: writable after all, 92: not read-only, 93: not one bad entry, 94: said set aside";
  EXPECT_EQ(read_bytes(entry), "garbage");  // still there, unchanged
}

}  // namespace
}  // namespace flashjit
