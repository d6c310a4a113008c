// Helpers shared by the cache tests: per-test temp dirs, deterministic fake kernels, log capture,
// directory snapshots and child-process spawning.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cache/cache_key.hpp"
#include "common/log.hpp"
#include "compile/compiled_kernel.hpp"
#include "support/child_roles.hpp"

extern char** environ;

namespace flashjit::cache_test {

// A fresh directory under /tmp, removed (permissions restored first) when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/flashjit-cache-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "/tmp";
    ::chmod(path_.c_str(), 0755);  // an unprivileged child may need to traverse it
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string key_for(const std::string& seed) {
  return compute_cache_key({.source = "// kernel " + seed, .options = {"-arch=sm_90a"}, .nvrtc_version = "13.0", .arch = "sm_90a"});
}

// Deterministic in seed, so separate processes build identical kernels.
inline CompiledKernel fake_kernel(const std::string& seed, std::size_t cubin_bytes = 4096) {
  CompiledKernel k;
  k.spec_text = "dtype=bf16,head_dim=128,seed=" + seed;
  k.kernel_name = "flash_fwd_" + seed;
  std::uint64_t x = std::hash<std::string>{}(seed) | 1;
  k.cubin.resize(cubin_bytes);
  for (char& c : k.cubin) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = char(x & 0xff);
  }
  k.report = {.registers = 168, .spill_store_bytes = 4, .spill_load_bytes = 8, .stack_frame_bytes = 16,
              .static_smem_bytes = 0, .warnings = {"ptxas warning : C7508 example"}};
  k.nvrtc_version = "13.0";
  k.compile_ms = 1234.5;
  return k;
}

inline std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline void set_mtime(const std::string& path, std::int64_t seconds_ago) {
  timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

inline std::int64_t mtime_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Records what flashjit::logger() says while alive (level lowered to warn if it was higher).
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()), saved_level_(logger().level()) {
    if (saved_level_ > spdlog::level::warn) logger().set_level(spdlog::level::warn);
    logger().sinks().push_back(sink_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  ~LogCapture() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger().set_level(saved_level_);
  }
  // Warnings whose text contains needle (all warnings for an empty needle).
  int warnings(const std::string& needle = {}) const {
    std::lock_guard lock(sink_->mutex);
    int n = 0;
    for (const auto& [level, text] : sink_->lines) n += level == spdlog::level::warn && text.find(needle) != std::string::npos;
    return n;
  }
  std::string all() const {
    std::lock_guard lock(sink_->mutex);
    std::string out;
    for (const auto& line : sink_->lines) out += line.second + "\n";
    return out;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::mutex mutex;
    std::vector<std::pair<spdlog::level::level_enum, std::string>> lines;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard lock(mutex);
      lines.emplace_back(msg.level, std::string(msg.payload.data(), msg.payload.size()));
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
  spdlog::level::level_enum saved_level_;
};

// Starts this test binary as a child playing `role`, with extra environment variables.
inline pid_t spawn_child(const std::string& role, const std::map<std::string, std::string>& env) {
  std::vector<std::string> strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name != "FLASHJIT_TEST_CHILD" && !env.count(name)) strings.push_back(entry);
  }
  strings.push_back("FLASHJIT_TEST_CHILD=" + role);
  for (const auto& [name, value] : env) strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = ::flashjit::testing::self_executable_path();
  char* argv[] = {exe.data(), nullptr};
  // Everything is built before fork: the child only calls execve (async-signal-safe).
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(exe.c_str(), argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for a child at most timeout_s seconds (then kills it); returns its exit code, or -signal.
inline int wait_child(pid_t pid, int timeout_s = 30) {
  for (int waited_ms = 0;; waited_ms += 5) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    if (r < 0) return -1000;
    if (waited_ms > timeout_s * 1000) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -2000;
    }
    ::usleep(5000);
  }
}

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace flashjit::cache_test
