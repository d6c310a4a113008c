// Several processes share one cache directory and race on one key.
#include <gtest/gtest.h>

#include <atomic>
#include <fcntl.h>
#include <map>
#include <sstream>
#include <thread>

#include "cache/entry_format.hpp"
#include "cache/kernel_cache.hpp"
#include "cache_test_util.hpp"

namespace flashjit {
namespace {

using namespace cache_test;
using namespace std::chrono_literals;

constexpr int kChildren = 6;
constexpr int kThreadsPerChild = 4;
constexpr std::size_t kCubinBytes = 256 * 1024;  // large, so a torn write would have room to show

// Appends "<pid>\n" to the shared compile log (O_APPEND: one write, never interleaved).
void record_compile(const std::string& log_path) {
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  const std::string line = std::to_string(::getpid()) + "\n";
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

// Reads every entry file it sees, over and over: each must decode or be absent.
class EntryWatcher {
 public:
  EntryWatcher(std::string dir, std::string key) : dir_(std::move(dir)), key_(std::move(key)), thread_([this] { run(); }) {}
  ~EntryWatcher() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int bad() const { return bad_; }

 private:
  void run() {
    while (!stop_) {
      for (const std::string& name : names_in(dir_)) {
        if (!name.ends_with(".entry")) continue;  // temp, lock and quarantine names are not entries
        auto file = posix::read_file(dir_ + "/" + name);
        if (!file.ok()) continue;  // renamed away meanwhile
        if (name != key_ + ".entry" || !decode_entry(file->bytes, key_).ok()) ++bad_;
      }
    }
  }
  std::string dir_, key_;
  std::atomic<bool> stop_{false};
  std::atomic<int> bad_{0};
  std::thread thread_;
};

int race_child(int, char**) {
  const std::string dir = env_or_empty("FLASHJIT_TEST_CACHE_DIR");
  const std::string work = env_or_empty("FLASHJIT_TEST_WORK_DIR");
  const std::string key = env_or_empty("FLASHJIT_TEST_KEY");
  const bool use_lock = env_or_empty("FLASHJIT_TEST_LOCK") == "1";

  // Start together: wait for the parent's go file.
  for (int i = 0; ::access((work + "/go").c_str(), F_OK) != 0; ++i) {
    if (i > 10000) return 80;
    std::this_thread::sleep_for(1ms);
  }
  EntryWatcher watcher(dir, key);
  KernelCache cache({.dir = dir, .cross_process_lock = use_lock});
  if (cache.mode() != CacheMode::kReadWriteDisk) return 86;
  const CompileFn compile = [&]() -> Result<CompiledKernel> {
    record_compile(work + "/compiles");
    std::this_thread::sleep_for(100ms);
    return fake_kernel("shared", kCubinBytes);
  };

  // Several threads per process, so single flight is exercised inside each process too.
  std::vector<std::optional<Result<CacheLookup>>> results(kThreadsPerChild);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreadsPerChild; ++i) {
    threads.emplace_back([&, i] { results[std::size_t(i)] = cache.get_or_compile(key, "spec", compile); });
  }
  for (auto& t : threads) t.join();
  std::this_thread::sleep_for(20ms);  // let the watcher see the others' publishes too
  watcher.stop();

  const std::string expected = fake_kernel("shared", kCubinBytes).cubin;
  for (const auto& r : results) {
    if (!r || !r->ok()) return 81;
    if ((*r)->kernel->cubin != expected) return 84;
  }
  if (watcher.bad() != 0) return 82;
  auto final_entry = posix::read_file(cache.disk()->entry_path(key));
  if (!final_entry.ok() || !decode_entry(final_entry->bytes, key).ok()) return 83;
  if (decode_entry(final_entry->bytes, key)->cubin != expected) return 84;
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(cache_race_child, race_child);

// Runs the children; returns how many compiles each pid logged.
std::map<std::string, int> run_race(const TempDir& tmp, bool use_lock) {
  const std::string dir = tmp.sub("cache");
  const std::string key = key_for("shared");
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    pids.push_back(spawn_child("cache_race_child", {{"FLASHJIT_TEST_CACHE_DIR", dir},
                                                    {"FLASHJIT_TEST_WORK_DIR", tmp.path()},
                                                    {"FLASHJIT_TEST_KEY", key},
                                                    {"FLASHJIT_TEST_LOCK", use_lock ? "1" : "0"}}));
  }
  write_bytes(tmp.sub("go"), "");
  for (pid_t pid : pids) {
    EXPECT_EQ(wait_child(pid), 0) << "80: no start, 81: get failed, 82: saw a bad entry, 83: final entry bad, "
                                     "84: wrong bytes, 86: cache not writable";
  }

  // Exactly one whole entry is left, and no temporary file and no lock file (its holder removes it).
  EXPECT_EQ(names_in(dir), std::vector<std::string>{key + ".entry"});
  auto entry = decode_entry(read_bytes(dir + "/" + key + ".entry"), key);
  EXPECT_TRUE(entry.ok());

  std::map<std::string, int> per_pid;
  std::istringstream lines(read_bytes(tmp.sub("compiles")));
  for (std::string line; std::getline(lines, line);) ++per_pid[line];
  return per_pid;
}

TEST(CacheProcesses, RaceWithoutLocksCompilesAtMostOncePerProcess) {
  TempDir tmp;
  const auto per_pid = run_race(tmp, /*use_lock=*/false);
  EXPECT_GE(per_pid.size(), 1u);
  EXPECT_LE(per_pid.size(), std::size_t(kChildren));
  for (const auto& [pid, count] : per_pid) EXPECT_EQ(count, 1) << "pid " << pid;
}

TEST(CacheProcesses, RaceWithLocksCompilesOnceInAll) {
  TempDir tmp;
  const auto per_pid = run_race(tmp, /*use_lock=*/true);
  ASSERT_EQ(per_pid.size(), 1u);
  EXPECT_EQ(per_pid.begin()->second, 1);
}

}  // namespace
}  // namespace flashjit
