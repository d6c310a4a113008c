// End-to-end tests of the `flashjit` binary (tool_path()): each test runs it as a child
// process and checks its exit status (0 success, 2 bad usage or an invalid spec, 1 other failures),
// what it prints on stdout and stderr, and the shape of its --json output. Every test uses its own
// temporary cache directory (--cache-dir) and compiles at most one small kernel.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include "cache/cache_key.hpp"
#include "cache/disk_store.hpp"
#include "cache/entry_format.hpp"
#include "config/length_choice.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "runtime/engine.hpp"
#include "runtime/tuning.hpp"
#include "verify/check.hpp"
#include "verify/reference.hpp"

extern char** environ;

namespace flashjit {
namespace {

namespace fs = std::filesystem;
namespace json = llvm::json;

// A small kernel: the fastest default-like spec to compile.
constexpr const char* kSmallSpec = "dtype=fp16,head_dim=64,causal=0";
// A path where no CUDA driver library can be: the tool then runs as on a machine without a driver.
constexpr const char* kNoDriver = "/nonexistent/flashjit-test/libcuda.so.1";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/flashjit-tool-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "/tmp";
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ToolRun {
  int exit_code = -1;  // -1: did not exit normally (signal) or could not be started
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const ToolRun& r) {
  return os << "exit " << r.exit_code << "\n--- stdout ---\n" << r.out << "\n--- stderr ---\n" << r.err;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The build tree's tool and fake libcuda, or the copies named by FLASHJIT_TEST_TOOL and
// FLASHJIT_TEST_FAKE_LIBCUDA where this binary runs from a copied build (tests/gpu/run_h200.sh
// with a carried BIN_DIR, whose build tree is not there).
std::string from_env_or(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value && *value ? value : built;
}
std::string tool_path() { return from_env_or("FLASHJIT_TEST_TOOL", FLASHJIT_TOOL_PATH); }

// Environment changes for a run: a name mapped to a value sets it, to nullopt removes it.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

// Runs the tool with args, stdin from /dev/null, stdout and stderr captured (through files, so a
// large output can never block the child).
ToolRun run_tool(const std::vector<std::string>& args, const EnvChanges& env = {}) {
  TempDir io;
  const std::string out_path = io.sub("stdout"), err_path = io.sub("stderr");
  std::vector<std::string> arg_storage{tool_path()};
  arg_storage.insert(arg_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : arg_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (!env.count(name)) env_storage.push_back(entry);
  }
  for (const auto& [name, value] : env) {
    if (value) env_storage.push_back(name + "=" + *value);
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ToolRun run;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << std::strerror(spawned);
    return run;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_all(out_path);
  run.err = read_all(err_path);
  return run;
}

// Parses the run's stdout as JSON (a test failure when it is not).
json::Value parse_json(const ToolRun& run) {
  auto parsed = json::parse(run.out);
  if (!parsed) {
    ADD_FAILURE() << "stdout is not JSON: " << llvm::toString(parsed.takeError()) << "\n" << run;
    return json::Value(nullptr);
  }
  return std::move(*parsed);
}

bool is_hex(llvm::StringRef s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == llvm::StringRef::npos;
}

// Checks that an object has each key with a value of the given kind.
enum class Kind { kString, kNumber, kInteger, kBool, kArray };
void expect_fields(const json::Object& o, std::initializer_list<std::pair<const char*, Kind>> fields) {
  for (const auto& [key, kind] : fields) {
    const json::Value* v = o.get(key);
    ASSERT_NE(v, nullptr) << "missing field '" << key << "' in " << llvm::formatv("{0:2}", json::Value(json::Object(o))).str();
    switch (kind) {
      case Kind::kString: EXPECT_TRUE(bool(v->getAsString())) << key; break;
      case Kind::kNumber: EXPECT_TRUE(bool(v->getAsNumber())) << key; break;
      case Kind::kInteger: EXPECT_TRUE(bool(v->getAsInteger())) << key; break;
      case Kind::kBool: EXPECT_TRUE(bool(v->getAsBoolean())) << key; break;
      case Kind::kArray: EXPECT_NE(v->getAsArray(), nullptr) << key; break;
    }
  }
}

// Field readers that work with LLVM 14's Optional and later LLVMs' std::optional alike.
std::string str(const json::Object& o, const char* key) {
  auto v = o.getString(key);
  return v ? v->str() : "<absent>";
}
int64_t num(const json::Object& o, const char* key) {
  auto v = o.getInteger(key);
  return v ? *v : -1;
}
double real(const json::Object& o, const char* key) {
  auto v = o.getNumber(key);
  return v ? *v : -1;
}
int boolean(const json::Object& o, const char* key) {  // 1 true, 0 false, -1 absent
  auto v = o.getBoolean(key);
  return v ? int(*v) : -1;
}

// Prewarms kSmallSpec into dir and returns the one row of its --json output.
json::Object prewarm_small(const std::string& dir) {
  ToolRun r = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", dir, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  const json::Array* rows = v.getAsArray();
  if (!rows || rows->size() != 1 || !(*rows)[0].getAsObject()) {
    ADD_FAILURE() << "expected a one-row array\n" << r;
    return {};
  }
  return *(*rows)[0].getAsObject();
}

// The lines of a table: from the header to the row before the summary line, without the indented
// notes under a row (errors, ptxas warnings).
std::vector<std::string> table_lines(const std::string& out) {
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(out).split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::vector<std::string> table;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {  // the last line is the summary
    if (!lines[i].startswith(" ")) table.push_back(lines[i].str());
  }
  return table;
}

// Every column lines up: its cells (no spaces in them) all start at one offset (left-aligned) or
// all end at one (right-aligned), in the header and in every row.
void expect_columns_line_up(const std::vector<std::string>& lines) {
  ASSERT_GE(lines.size(), 2u);
  std::vector<std::vector<std::pair<size_t, size_t>>> cells;  // per line: [start, end) of each cell
  for (const std::string& line : lines) {
    auto& row = cells.emplace_back();
    for (size_t i = 0; i < line.size();) {
      if (line[i] == ' ') { ++i; continue; }
      const size_t end = std::min(line.find(' ', i), line.size());
      row.push_back({i, end});
      i = end;
    }
    ASSERT_EQ(row.size(), cells.front().size()) << "cells in\n" << line << "\nand\n" << lines.front();
  }
  for (size_t c = 0; c < cells.front().size(); ++c) {
    bool starts = true, ends = true;
    for (const auto& row : cells) {
      starts = starts && row[c].first == cells.front()[c].first;
      ends = ends && row[c].second == cells.front()[c].second;
    }
    std::string all;
    for (const std::string& line : lines) all += line + "\n";
    EXPECT_TRUE(starts || ends) << "column " << c << " does not line up:\n" << all;
  }
}

// A stand-in cache entry (no compile): what the tool reads from an entry but a real cubin.
CompiledKernel fake_entry(const std::string& spec_text) {
  CompiledKernel k;
  k.spec_text = spec_text;
  k.kernel_name = "flashjit_attention_fwd";
  k.cubin = std::string("\x7f" "ELF", 4) + std::string(1000, 'x');
  k.report.registers = 128;
  return k;
}

// Stores a fake entry under the key the engine computes for spec, so that the tool finds it (a hit).
std::string publish_fake_entry_for(const std::string& dir, const std::string& spec_text) {
  auto config = make_config(*parse_spec(spec_text));
  EXPECT_TRUE(config.ok()) << spec_text;
  const std::string key = cache_key_for(make_compile_request(*config));
  auto store = DiskStore::open({dir, 0});
  if (!store.ok()) {
    ADD_FAILURE() << store.error().message;
    return key;
  }
  EXPECT_TRUE((*store)->publish(key, fake_entry(to_string(config->spec))).ok());
  return key;
}

// ---- exit codes and messages ----

TEST(Tool, NoCommandIsAUsageError) {
  ToolRun r = run_tool({});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("prewarm"), std::string::npos) << r;
}

TEST(Tool, HelpListsTheCommandsAndSucceeds) {
  ToolRun r = run_tool({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const char* command : {"prewarm", "cache", "doctor", "check", "bench", "tune", "source"}) EXPECT_NE(r.out.find(command), std::string::npos) << command << "\n" << r;
}

TEST(Tool, UnknownCommandIsAUsageError) {
  ToolRun r = run_tool({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r;
}

TEST(Tool, UnknownFlagIsAUsageError) {
  TempDir cache;
  ToolRun r = run_tool({"prewarm", "--spec", kSmallSpec, "--frobnicate", "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r;
}

TEST(Tool, PrewarmWithoutSpecOrDefaultsIsAUsageError) {
  TempDir cache;
  ToolRun r = run_tool({"prewarm", "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("--defaults"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--spec"), std::string::npos) << r;
}

TEST(Tool, InvalidSpecIsAUsageErrorNamingTheField) {
  TempDir cache;
  const std::pair<const char*, const char*> cases[] = {
      {"dtype=fp16,head_dim=65", "head_dim"},      // out of range
      {"dtype=fp8,head_dim=64", "dtype"},          // unknown value
      {"dtype=fp16,head_dim=abc", "head_dim"},     // not a number
      {"dtype=fp16,bogus_field=1", "bogus_field"},  // unknown key
      {"head_dim=64,causal=2", "causal"},          // not a bool
      {"head_dim=64,consumer_wgs=1,block_m=128", "block_m"},  // inconsistent fields
  };
  for (const auto& [spec, field] : cases) {
    ToolRun r = run_tool({"prewarm", "--spec", spec, "--cache-dir", cache.path()});
    EXPECT_EQ(r.exit_code, 2) << spec << "\n" << r;
    EXPECT_NE(r.err.find(field), std::string::npos) << spec << " should name " << field << "\n" << r;
  }
  // check parses the spec before it looks for a driver: the same error, the same exit status.
  ToolRun r = run_tool({"check", "--spec", "dtype=bf16,head_dim=65", "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("head_dim"), std::string::npos) << r;
  EXPECT_TRUE(fs::is_empty(cache.path())) << "an invalid spec compiled nothing";
}

// ---- source ----
TEST(Tool, SourcePrintsTheResolvedSpecOptionsAndKernel) {
  ToolRun r = run_tool({"source", "--spec", "dtype=fp16,head_dim=64,causal=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  // The header names the spec as resolved by the tile table and the NVRTC options.
  EXPECT_EQ(r.out.rfind("// flashjit source: dtype=fp16,head_dim=64,head_dim_v=64,causal=1,", 0), 0u) << r;
  EXPECT_NE(r.out.find("// nvrtc options: --gpu-architecture=sm_90a"), std::string::npos) << r;
  // The rendered constants and the entry point.
  EXPECT_NE(r.out.find("constexpr int kHeadDim = 64;"), std::string::npos) << r;
  EXPECT_NE(r.out.find("constexpr bool kCausal = 1;"), std::string::npos) << r;
  EXPECT_NE(r.out.find("extern \"C\" __global__"), std::string::npos) << r;
  ToolRun bad = run_tool({"source", "--spec", "dtype=fp16,head_dim=65"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("head_dim"), std::string::npos) << bad;
  EXPECT_TRUE(bad.out.empty()) << bad;
}

// ---- prewarm ----

TEST(Tool, PrewarmJsonCompilesFirstThenHits) {
  TempDir cache;
  json::Object first = prewarm_small(cache.path());
  expect_fields(first, {{"spec", Kind::kString}, {"key", Kind::kString}, {"status", Kind::kString}, {"compile_ms", Kind::kNumber},
                        {"registers", Kind::kInteger}, {"spill_bytes", Kind::kInteger}, {"smem_bytes", Kind::kInteger}});
  EXPECT_EQ(str(first, "status"), "compiled");
  EXPECT_NE(str(first, "spec").find("head_dim=64"), std::string::npos) << str(first, "spec");
  EXPECT_TRUE(is_hex(str(first, "key"))) << str(first, "key");
  EXPECT_GT(real(first, "compile_ms"), 0.0);
  EXPECT_GT(num(first, "registers"), 0);
  EXPECT_GE(num(first, "spill_bytes"), 0);
  EXPECT_GT(num(first, "smem_bytes"), 0);
  // ptxas warnings are reported with the kernel; a default variant has none (no C7508, no C751x).
  const json::Array* warnings = first.getArray("warnings");
  ASSERT_NE(warnings, nullptr);
  EXPECT_TRUE(warnings->empty());

  json::Object second = prewarm_small(cache.path());
  EXPECT_EQ(str(second, "status"), "hit");
  EXPECT_EQ(str(second, "key"), str(first, "key"));
  EXPECT_EQ(str(second, "spec"), str(first, "spec"));
  EXPECT_EQ(num(second, "registers"), num(first, "registers"));
  EXPECT_EQ(real(second, "compile_ms"), 0.0);

  // The table form says the same in its summary line.
  ToolRun table = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", cache.path()});
  EXPECT_EQ(table.exit_code, 0) << table;
  EXPECT_NE(table.out.find("1 kernels: 0 compiled, 1 hits, 0 failed"), std::string::npos) << table;
}

TEST(Tool, PrewarmNoCacheCompilesAndWritesNothing) {
  TempDir cache;
  ToolRun r = run_tool({"prewarm", "--no-cache", "--spec", kSmallSpec, "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  ASSERT_TRUE(v.getAsArray() && v.getAsArray()->size() == 1) << r;
  EXPECT_EQ(str(*(*v.getAsArray())[0].getAsObject(), "status"), "compiled");
  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(list.exit_code, 0) << list;
  json::Value entries = parse_json(list);
  ASSERT_NE(entries.getAsArray(), nullptr) << list;
  EXPECT_TRUE(entries.getAsArray()->empty()) << list;
}

// ---- cache ----

TEST(Tool, CacheCommandsOnAnEmptyDirectory) {
  TempDir cache;
  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(list.exit_code, 0) << list;
  json::Value entries = parse_json(list);
  ASSERT_NE(entries.getAsArray(), nullptr) << list;
  EXPECT_TRUE(entries.getAsArray()->empty());

  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(stats.exit_code, 0) << stats;
  json::Value s = parse_json(stats);
  ASSERT_NE(s.getAsObject(), nullptr) << stats;
  EXPECT_EQ(num(*s.getAsObject(), "entries"), 0);

  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(verify.exit_code, 0) << verify;
  json::Value ver = parse_json(verify);
  ASSERT_NE(ver.getAsObject(), nullptr) << verify;
  EXPECT_EQ(num(*ver.getAsObject(), "checked"), 0);
}

TEST(Tool, CacheActionsAndArgumentsAreChecked) {
  TempDir cache;
  ToolRun unknown = run_tool({"cache", "frobnicate", "--cache-dir", cache.path()});
  EXPECT_EQ(unknown.exit_code, 2) << unknown;
  EXPECT_NE(unknown.err.find("frobnicate"), std::string::npos) << unknown;
  ToolRun none = run_tool({"cache", "--cache-dir", cache.path()});
  EXPECT_EQ(none.exit_code, 2) << none;
  ToolRun extract_no_file = run_tool({"cache", "extract", "0123abcd", "--cache-dir", cache.path()});
  EXPECT_EQ(extract_no_file.exit_code, 2) << extract_no_file;
  ToolRun list_extra = run_tool({"cache", "list", "extra", "--cache-dir", cache.path()});
  EXPECT_EQ(list_extra.exit_code, 2) << list_extra;
}

TEST(Tool, CacheListStatsAndVerifyShowThePrewarmedKernel) {
  TempDir cache;
  json::Object row = prewarm_small(cache.path());
  const std::string key = str(row, "key");

  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(list.exit_code, 0) << list;
  json::Value entries = parse_json(list);
  ASSERT_TRUE(entries.getAsArray() && entries.getAsArray()->size() == 1) << list;
  const json::Object& e = *(*entries.getAsArray())[0].getAsObject();
  expect_fields(e, {{"key", Kind::kString}, {"spec", Kind::kString}, {"kernel", Kind::kString}, {"valid", Kind::kBool},
                    {"problem", Kind::kString}, {"file_bytes", Kind::kInteger}, {"cubin_bytes", Kind::kInteger},
                    {"registers", Kind::kInteger}, {"spill_bytes", Kind::kInteger}, {"compile_ms", Kind::kNumber},
                    {"last_used_ns", Kind::kInteger}});
  EXPECT_EQ(str(e, "key"), key);
  EXPECT_EQ(str(e, "spec"), str(row, "spec"));
  EXPECT_EQ(boolean(e, "valid"), 1);
  EXPECT_GT(num(e, "cubin_bytes"), 0);
  EXPECT_GE(num(e, "file_bytes"), num(e, "cubin_bytes"));
  EXPECT_EQ(num(e, "registers"), num(row, "registers"));

  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats;
  json::Value s = parse_json(stats);
  ASSERT_NE(s.getAsObject(), nullptr) << stats;
  expect_fields(*s.getAsObject(), {{"dir", Kind::kString}, {"writable", Kind::kBool}, {"entries", Kind::kInteger},
                                   {"total_bytes", Kind::kInteger}, {"max_bytes", Kind::kInteger},
                                   {"quarantined", Kind::kInteger}, {"temp_files", Kind::kInteger}});
  EXPECT_EQ(str(*s.getAsObject(), "dir"), cache.path());
  EXPECT_EQ(boolean(*s.getAsObject(), "writable"), 1);
  EXPECT_EQ(num(*s.getAsObject(), "entries"), 1);
  EXPECT_EQ(num(*s.getAsObject(), "total_bytes"), num(e, "file_bytes"));

  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(verify.exit_code, 0) << verify;
  json::Value ver = parse_json(verify);
  ASSERT_NE(ver.getAsObject(), nullptr) << verify;
  expect_fields(*ver.getAsObject(), {{"checked", Kind::kInteger}, {"valid", Kind::kInteger}, {"bad", Kind::kArray}});
  EXPECT_EQ(num(*ver.getAsObject(), "checked"), 1);
  EXPECT_EQ(num(*ver.getAsObject(), "valid"), 1);
  EXPECT_TRUE(ver.getAsObject()->getArray("bad")->empty());

  // The table forms name the kernel too.
  ToolRun table = run_tool({"cache", "list", "--cache-dir", cache.path()});
  EXPECT_EQ(table.exit_code, 0) << table;
  EXPECT_NE(table.out.find(key.substr(0, 16)), std::string::npos) << table;
  EXPECT_NE(table.out.find("1 entries"), std::string::npos) << table;
}

TEST(Tool, CacheVerifyReportsACorruptEntryAndFails) {
  TempDir cache;
  json::Object row = prewarm_small(cache.path());
  // Flip bytes in the middle of every file in the cache that holds the key in its name.
  int corrupted = 0;
  for (const auto& f : fs::recursive_directory_iterator(cache.path())) {
    if (!f.is_regular_file() || f.path().filename().string().find(str(row, "key")) == std::string::npos) continue;
    std::fstream file(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(f.path());
    file.seekp(std::streamoff(size / 2));
    const char junk[8] = {'\x55', '\x55', '\x55', '\x55', '\x55', '\x55', '\x55', '\x55'};
    file.write(junk, sizeof junk);
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0) << "no cache file is named after key " << str(row, "key");
  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(verify.exit_code, 1) << verify;
  json::Value ver = parse_json(verify);
  ASSERT_NE(ver.getAsObject(), nullptr) << verify;
  EXPECT_EQ(num(*ver.getAsObject(), "valid"), 0) << verify;
  ASSERT_NE(ver.getAsObject()->getArray("bad"), nullptr);
  EXPECT_EQ(ver.getAsObject()->getArray("bad")->size(), 1u) << verify;
}

TEST(Tool, CacheExtractWritesTheCubin) {
  TempDir cache;
  json::Object row = prewarm_small(cache.path());
  const std::string out = cache.sub("kernel.cubin");
  ToolRun r = run_tool({"cache", "extract", str(row, "key"), out, "--cache-dir", cache.path()});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string cubin = read_all(out);
  ASSERT_GE(cubin.size(), 64u) << r;
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF", 4));

  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path(), "--json"});
  json::Value entries = parse_json(list);
  ASSERT_TRUE(entries.getAsArray() && entries.getAsArray()->size() == 1) << list;
  EXPECT_EQ(int64_t(cubin.size()), num(*(*entries.getAsArray())[0].getAsObject(), "cubin_bytes"));
}

TEST(Tool, CacheExtractOfAnUnknownKeyFails) {
  TempDir cache;
  const std::string out = cache.sub("kernel.cubin");
  ToolRun r = run_tool({"cache", "extract", "00000000deadbeef", out, "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.err.find("00000000deadbeef"), std::string::npos) << r;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Tool, CacheClearRemovesEverything) {
  TempDir cache;
  prewarm_small(cache.path());
  ToolRun clear = run_tool({"cache", "clear", "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(clear.exit_code, 0) << clear;
  json::Value c = parse_json(clear);
  ASSERT_NE(c.getAsObject(), nullptr) << clear;
  expect_fields(*c.getAsObject(), {{"entries", Kind::kInteger}, {"temp_files", Kind::kInteger},
                                   {"quarantined", Kind::kInteger}, {"lock_files", Kind::kInteger}});
  EXPECT_EQ(num(*c.getAsObject(), "entries"), 1);

  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", cache.path(), "--json"});
  json::Value s = parse_json(stats);
  ASSERT_NE(s.getAsObject(), nullptr) << stats;
  EXPECT_EQ(num(*s.getAsObject(), "entries"), 0);
  EXPECT_EQ(num(*s.getAsObject(), "total_bytes"), 0);
  // And the next prewarm compiles again.
  EXPECT_EQ(str(prewarm_small(cache.path()), "status"), "compiled");
}

// ---- doctor ----

TEST(Tool, DoctorWithoutADriverReportsItAbsentAndSucceeds) {
  TempDir cache;
  ToolRun r = run_tool({"doctor", "--cache-dir", cache.path(), "--json"}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
  ASSERT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  ASSERT_NE(v.getAsObject(), nullptr) << r;
  const json::Object& d = *v.getAsObject();
  expect_fields(d, {{"driver", Kind::kString}, {"driver_error", Kind::kString}, {"devices", Kind::kArray}, {"nvrtc", Kind::kString},
                    {"target", Kind::kString}, {"cache_dir", Kind::kString}, {"cache_dir_source", Kind::kString},
                    {"cache_writable", Kind::kBool}, {"cache_problem", Kind::kString}});
  EXPECT_EQ(str(d, "driver"), "");
  EXPECT_NE(str(d, "driver_error").find("driver"), std::string::npos) << r;
  EXPECT_TRUE(d.getArray("devices")->empty());
  EXPECT_EQ(str(d, "target"), "sm_90a");
  EXPECT_FALSE(str(d, "nvrtc").empty());
  EXPECT_EQ(str(d, "cache_dir"), cache.path());
  EXPECT_EQ(str(d, "cache_dir_source"), "explicit");
  EXPECT_EQ(boolean(d, "cache_writable"), 1);

  ToolRun text = run_tool({"doctor", "--cache-dir", cache.path()}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
  EXPECT_EQ(text.exit_code, 0) << text;
  EXPECT_NE(text.out.find("driver      none"), std::string::npos) << text;
  EXPECT_NE(text.out.find("nvrtc"), std::string::npos) << text;
  EXPECT_NE(text.out.find(cache.path()), std::string::npos) << text;
}

TEST(Tool, DoctorReportsThisMachinesDriverEitherWay) {
  TempDir cache;
  ToolRun r = run_tool({"doctor", "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  ASSERT_NE(v.getAsObject(), nullptr) << r;
  const json::Object& d = *v.getAsObject();
  if (str(d, "driver").empty()) {  // no driver here: says why, lists no device
    EXPECT_FALSE(str(d, "driver_error").empty()) << r;
    EXPECT_TRUE(d.getArray("devices")->empty()) << r;
  } else {  // a driver: each device has its fields
    EXPECT_EQ(str(d, "driver_error"), "") << r;
    for (const json::Value& dev : *d.getArray("devices")) {
      ASSERT_NE(dev.getAsObject(), nullptr) << r;
      expect_fields(*dev.getAsObject(), {{"ordinal", Kind::kInteger}, {"name", Kind::kString}, {"arch", Kind::kString},
                                         {"sm_count", Kind::kInteger}, {"supported", Kind::kBool}});
    }
  }
}

TEST(Tool, CacheDirectoryResolutionOrder) {
  TempDir home;
  auto source_and_dir = [&](const EnvChanges& env, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"doctor", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolRun r = run_tool(args, env);
    EXPECT_EQ(r.exit_code, 0) << r;
    json::Value v = parse_json(r);
    if (!v.getAsObject()) return std::pair<std::string, std::string>{};
    return std::pair{str(*v.getAsObject(), "cache_dir_source"), str(*v.getAsObject(), "cache_dir")};
  };
  const EnvChanges all{{"FLASHJIT_CACHE_DIR", home.sub("env")}, {"XDG_CACHE_HOME", home.sub("xdg")},
                       {"HOME", home.path()}, {"FLASHJIT_LIBCUDA", kNoDriver}};
  EXPECT_EQ(source_and_dir(all, {"--cache-dir", home.sub("flag")}), std::pair(std::string("explicit"), home.sub("flag")));
  EXPECT_EQ(source_and_dir(all), std::pair(std::string("FLASHJIT_CACHE_DIR"), home.sub("env")));
  EnvChanges no_env = all;
  no_env["FLASHJIT_CACHE_DIR"] = std::nullopt;
  EXPECT_EQ(source_and_dir(no_env), std::pair(std::string("XDG_CACHE_HOME"), home.sub("xdg") + "/flashjit"));
  no_env["XDG_CACHE_HOME"] = std::nullopt;
  EXPECT_EQ(source_and_dir(no_env), std::pair(std::string("HOME"), home.path() + "/.cache/flashjit"));
}

// ---- check ----

TEST(Tool, CheckWithoutADriverFailsSayingSo) {
  TempDir cache;
  ToolRun r = run_tool({"check", "--spec", kSmallSpec, "--cache-dir", cache.path()}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.err.find("driver"), std::string::npos) << r;
}

TEST(Tool, CheckNeedsASpec) {
  TempDir cache;
  ToolRun r = run_tool({"check", "--cache-dir", cache.path()}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("spec"), std::string::npos) << r;
}

TEST(Tool, TuneNeedsAnAutoSpecAndADriver) {
  TempDir cache;
  ToolRun fixed = run_tool({"tune", "--spec", "dtype=fp16,head_dim=64,block_n=64", "--cache-dir", cache.path()},
                           {{"FLASHJIT_LIBCUDA", kNoDriver}});
  EXPECT_EQ(fixed.exit_code, 2) << fixed;
  EXPECT_NE(fixed.err.find("block_n"), std::string::npos) << fixed;
  ToolRun no_driver = run_tool({"tune", "--spec", kSmallSpec, "--cache-dir", cache.path()}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
  EXPECT_EQ(no_driver.exit_code, 1) << no_driver;
  EXPECT_NE(no_driver.err.find("driver"), std::string::npos) << no_driver;
  EXPECT_FALSE(fs::exists(fs::path(cache.path()) / "tuned")) << "nothing recorded without a measurement";
}

// ---- issue 22: spec values, version, help, source, prewarm, cache ----

TEST(Tool, ExplicitZeroIsAnInvalidSpec) {
  for (const char* field : {"stages", "consumer_wgs", "block_m", "block_n", "cluster", "head_dim_v"}) {
    ToolRun r = run_tool({"source", "--spec", std::string("dtype=fp16,head_dim=64,") + field + "=0"});
    EXPECT_EQ(r.exit_code, 2) << field << "\n" << r;
    EXPECT_NE(r.err.find(std::string("spec field '") + field + "'"), std::string::npos) << r;
    EXPECT_TRUE(r.out.empty()) << field;
  }
}

TEST(Tool, VersionNamesFlashjitNvrtcAndTheCacheFormat) {
  ToolRun r = run_tool({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("flashjit " FLASHJIT_VERSION_STRING), std::string::npos) << r;
  EXPECT_NE(r.out.find("NVRTC " + nvrtc_version()), std::string::npos) << r;
  EXPECT_NE(r.out.find("cache entry format " + std::to_string(kEntryFormatVersion)), std::string::npos) << r;
  EXPECT_EQ(r.out.find("LLVM"), std::string::npos) << r;
  EXPECT_EQ(r.out.find("Host CPU"), std::string::npos) << r;
}

// LLVM's own options (statistics, debug counters, crash diagnostics, colours) are not flashjit's:
// no help shows them, not even --help-hidden; flashjit's options still show.
TEST(Tool, HelpShowsNoLlvmInternalOptions) {
  const char* llvm_options[] = {"rng-seed", "debug-counter", "--stats", "track-memory", "info-output-file", "sort-timers",
                                "crash-diagnostics-dir", "disable-symbolication", "scalable", "--color", "print-all-options"};
  std::vector<std::vector<std::string>> runs = {{"--help"}, {"--help-hidden"}, {"--help-list-hidden"}};
  for (const char* command : {"prewarm", "cache", "doctor", "check", "bench", "tune", "source"}) {
    runs.push_back({command, "--help"});
    runs.push_back({command, "--help-hidden"});
  }
  for (const auto& args : runs) {
    ToolRun r = run_tool(args);
    const std::string what = args.size() == 1 ? args[0] : args[0] + " " + args[1];
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r;
    for (const char* option : llvm_options) EXPECT_EQ(r.out.find(option), std::string::npos) << what << ": " << option << "\n" << r;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << what << "\n" << r;
  }
  ToolRun prewarm = run_tool({"prewarm", "--help-hidden"});
  for (const char* option : {"--spec", "--defaults", "--jobs", "--no-cache", "--cache-dir", "--json"}) {
    EXPECT_NE(prewarm.out.find(option), std::string::npos) << option << "\n" << prewarm;
  }
}

// source takes --json and --cache-dir like every command: JSON gives the spec, the entry point, the
// NVRTC options and the source; the cache directory's tuning record for the spec applies, as it
// does for the kernel the engine compiles; nothing is written there.
TEST(Tool, SourceTakesJsonAndCacheDir) {
  TempDir cache;
  ToolRun r = run_tool({"source", "--spec", kSmallSpec, "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  ASSERT_NE(v.getAsObject(), nullptr) << r;
  const json::Object& o = *v.getAsObject();
  expect_fields(o, {{"spec", Kind::kString}, {"kernel", Kind::kString}, {"options", Kind::kArray}, {"source", Kind::kString}});
  auto table = make_config(*parse_spec(kSmallSpec));
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(str(o, "spec"), to_string(table->spec));
  EXPECT_EQ(str(o, "kernel"), "flashjit_attention_fwd");
  const CompileRequest request = make_compile_request(*table);
  EXPECT_EQ(str(o, "source"), request.source);
  const json::Array& options = *o.getArray("options");
  ASSERT_EQ(options.size(), request.options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    auto option = options[i].getAsString();
    EXPECT_EQ(option ? option->str() : "<not a string>", request.options[i]);
  }
  EXPECT_TRUE(fs::is_empty(cache.path())) << "source wrote to the cache directory";

  // A tuning record for the spec: source shows the winner's kernel, as prepare() would compile it.
  const AttentionSpec base = *parse_spec(kSmallSpec);
  const std::string winner = "dtype=fp16,head_dim=64,causal=0,stages=2,consumer_wgs=2,block_m=128,block_n=64,cluster=1,ctas_per_sm=1,overlap=1,pingpong=0";
  ASSERT_TRUE(save_tuning_record(cache.path(), base, {to_string(base), winner, 1.0, "b=1"}).ok());
  ToolRun tuned = run_tool({"source", "--spec", kSmallSpec, "--cache-dir", cache.path(), "--json"});
  ASSERT_EQ(tuned.exit_code, 0) << tuned;
  json::Value t = parse_json(tuned);
  ASSERT_NE(t.getAsObject(), nullptr) << tuned;
  EXPECT_EQ(str(*t.getAsObject(), "spec"), to_string(make_config(*parse_spec(winner))->spec)) << tuned;
  ToolRun text = run_tool({"source", "--spec", kSmallSpec, "--cache-dir", cache.path()});
  EXPECT_EQ(text.exit_code, 0) << text;
  EXPECT_NE(text.out.find("tuning record"), std::string::npos) << text.out.substr(0, 1000);

  // A directory that does not exist is not created.
  ToolRun missing = run_tool({"source", "--spec", kSmallSpec, "--cache-dir", cache.sub("absent")});
  EXPECT_EQ(missing.exit_code, 0) << missing;
  EXPECT_FALSE(fs::exists(cache.sub("absent")));
}

// nvcc, for CUDA toolkit use of the printed source: $FLASHJIT_TEST_NVCC, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH.
std::string find_nvcc() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("FLASHJIT_TEST_NVCC"); env && *env) candidates.push_back(env);
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) candidates.push_back(std::string(home) + "/bin/nvcc");
  candidates.push_back("/usr/local/cuda/bin/nvcc");
  if (const char* path = std::getenv("PATH")) {
    llvm::SmallVector<llvm::StringRef, 16> dirs;
    llvm::StringRef(path).split(dirs, ':', -1, false);
    for (llvm::StringRef dir : dirs) candidates.push_back(dir.str() + "/nvcc");
  }
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return {};
}

// Runs a program (argv[0] a path) with output to files; returns its exit status and output.
ToolRun run_program(const std::vector<std::string>& args) {
  TempDir io;
  const std::string out_path = io.sub("stdout"), err_path = io.sub("stderr");
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ToolRun run;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << std::strerror(spawned);
    return run;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_all(out_path);
  run.err = read_all(err_path);
  return run;
}

// What `source` prints compiles with the CUDA toolkit's nvcc, with the nvcc options its header
// gives (it failed: ptx.cuh's int64_t typedef for NVRTC clashes with the host headers nvcc includes).
TEST(Tool, SourceCompilesWithNvcc) {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc here (FLASHJIT_TEST_NVCC, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH): NVRTC alone is installed";
  TempDir dir;
  ToolRun r = run_tool({"source", "--spec", "dtype=bf16,head_dim=64,causal=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::string source = dir.sub("k.cu"), cubin = dir.sub("k.cubin");
  std::ofstream(source, std::ios::binary) << r.out;
  // The header's nvcc options line, e.g. "// nvcc options: -gencode=arch=compute_90a,code=sm_90a ...".
  const std::string tag = "\n// nvcc options: ";
  const size_t at = r.out.find(tag);
  ASSERT_NE(at, std::string::npos) << r.out.substr(0, 600);
  const size_t begin = at + tag.size();
  const std::string line = r.out.substr(begin, r.out.find('\n', begin) - begin);
  std::vector<std::string> args{nvcc};
  llvm::SmallVector<llvm::StringRef, 8> options;
  llvm::StringRef(line).split(options, ' ', -1, false);
  for (llvm::StringRef o : options) args.push_back(o.str());
  for (const char* a : {"-cubin", "-o"}) args.push_back(a);
  args.push_back(cubin);
  args.push_back(source);
  ToolRun compiled = run_program(args);
  ASSERT_EQ(compiled.exit_code, 0) << line << "\n" << compiled;
  EXPECT_EQ(read_all(cubin).substr(0, 4), std::string("\x7f" "ELF", 4));
  EXPECT_EQ(compiled.err.find("error"), std::string::npos) << compiled;
}

// Prewarm exists to store kernels: a cache directory that cannot be used is a failure naming it
// and why (it warned, said "compiled" and exited 0), unless the user asked for memory only.
TEST(Tool, PrewarmIntoAnUnusableCacheDirectoryFails) {
  TempDir dir;
  const std::string file = dir.sub("a-file");
  std::ofstream(file) << "not a directory";
  for (const std::string& cache : {file, file + "/cache"}) {
    ToolRun r = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", cache});
    EXPECT_EQ(r.exit_code, 1) << cache << "\n" << r;
    EXPECT_NE(r.err.find(cache), std::string::npos) << r;
    EXPECT_NE(r.err.find(std::strerror(ENOTDIR)), std::string::npos) << r;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r;
  }
  ToolRun memory = run_tool({"prewarm", "--no-cache", "--spec", kSmallSpec, "--cache-dir", file, "--json"});
  EXPECT_EQ(memory.exit_code, 0) << memory;
}

// verify recompiles nothing: its warning about a bad entry must not say "recompiling".
TEST(Tool, CacheVerifyWarningSaysWhatVerifyDid) {
  TempDir cache;
  const std::string key = publish_fake_entry_for(cache.path(), kSmallSpec);
  std::ofstream(cache.sub(key + ".entry"), std::ios::binary | std::ios::trunc) << "garbage";
  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", cache.path()});
  EXPECT_EQ(verify.exit_code, 1) << verify;
  EXPECT_NE(verify.err.find("corrupt entry"), std::string::npos) << verify;
  EXPECT_NE(verify.err.find("moved to"), std::string::npos) << verify;
  EXPECT_EQ(verify.err.find("recompil"), std::string::npos) << verify;
}

TEST(Tool, CacheWithoutAnActionListsTheActions) {
  TempDir cache;
  ToolRun r = run_tool({"cache", "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 2) << r;
  for (const char* action : {"list", "stats", "verify", "clear", "extract KEY FILE"}) EXPECT_NE(r.err.find(action), std::string::npos) << action << "\n" << r;
  EXPECT_EQ(r.err.find("positional"), std::string::npos) << r;
}

TEST(Tool, CacheExtractToAnUnwritablePathSaysWhy) {
  TempDir cache;
  const std::string key = publish_fake_entry_for(cache.path(), kSmallSpec);
  const std::string out = "/nonexistent/flashjit-test/x.cubin";
  ToolRun r = run_tool({"cache", "extract", key, out, "--cache-dir", cache.path()});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.err.find(out), std::string::npos) << r;
  EXPECT_NE(r.err.find(std::strerror(ENOENT)), std::string::npos) << r;
}

// Columns are as wide as their widest cell, so every row lines up with the header whatever the
// spec's length (the spec column was 78 wide, resolved specs 110 and more).
TEST(Tool, TablesLineUpWhateverTheSpecWidth) {
  TempDir cache;
  publish_fake_entry_for(cache.path(), "dtype=fp16,head_dim=64,causal=0,hang_trap=1");  // a hit, longer spec
  ToolRun prewarm = run_tool({"prewarm", "--spec", kSmallSpec, "--spec", "dtype=fp16,head_dim=64,causal=0,hang_trap=1",
                              "--cache-dir", cache.path()});
  ASSERT_EQ(prewarm.exit_code, 0) << prewarm;
  const std::vector<std::string> rows = table_lines(prewarm.out);
  EXPECT_EQ(rows.size(), 3u) << prewarm;
  expect_columns_line_up(rows);

  // cache list: those two, and a bad entry (its problem on a line of its own under the row).
  std::ofstream(cache.sub(std::string(64, 'a') + ".entry"), std::ios::binary) << "garbage";
  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path()});
  ASSERT_EQ(list.exit_code, 0) << list;
  const std::vector<std::string> entries = table_lines(list.out);
  EXPECT_EQ(entries.size(), 4u) << list;
  expect_columns_line_up(entries);
}

#ifdef FLASHJIT_FAKE_LIBCUDA
std::string fake_libcuda() { return from_env_or("FLASHJIT_TEST_FAKE_LIBCUDA", FLASHJIT_FAKE_LIBCUDA); }

// The counts the fake libcuda wrote at the tool's exit (FAKE_CUDA_STATS_FILE): "name value" lines.
std::map<std::string, uint64_t> read_fake_stats(const std::string& path) {
  std::map<std::string, uint64_t> counts;
  std::ifstream in(path);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value) counts[name] = value;
  return counts;
}

// `flashjit bench` against the fake driver (nothing runs; the fake counts what the tool asked of
// it and writes the counts when the tool exits): the timed launches reuse parameters built once
// per input set, as the C API's cached launches do, so the four tensor maps are encoded once per
// set however many launches are timed (before: once per launch, 72 encodes at 3 iterations).
TEST(Tool, BenchEncodesTensorMapsOncePerInputSet) {
  TempDir dir;
  const std::string stats_file = dir.sub("fake-stats.txt");
  uint64_t launches_before = 0;
  for (int iters : {3, 9}) {
    ToolRun r = run_tool({"bench", "--iters", std::to_string(iters), "--spec", kSmallSpec, "--batch", "1", "--seqlen-q", "512",
                          "--seqlen-k", "512", "--heads-q", "2", "--cache-dir", dir.sub("cache")},
                         {{"FLASHJIT_LIBCUDA", fake_libcuda()}, {"FAKE_CUDA_STATS_FILE", stats_file}});
    ASSERT_EQ(r.exit_code, 0) << r;
    std::map<std::string, uint64_t> counts = read_fake_stats(stats_file);
    // Eight input sets: the fake's 60 MB L2 three times over in 1 MB sets, capped at eight.
    EXPECT_EQ(counts["tensor_map_encodes"], 4u * 8) << "iters " << iters;
    EXPECT_GT(counts["launches"], launches_before) << "iters " << iters;  // more timed launches, no more encodes
    launches_before = counts["launches"];
  }
}

// bench runs the kernel the C API would launch for the cell on this device (here the fake's 132
// SMs) and says which: d256 causal at 9216 x 8 heads deals 288 pairs into 3 rounds (72 % used:
// the cluster kernel, config/length_choice.hpp), at 10240 x 16 heads 640 into 5 (96 %: the pairs).
TEST(Tool, BenchRunsAndNamesTheKernelTheApiWouldLaunch) {
  TempDir dir;
  for (auto [seqlen, heads, long_kernel] : {std::tuple{"9216", "8", true}, {"10240", "16", false}}) {
    ToolRun r = run_tool({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=256,causal=1", "--batch", "1", "--seqlen-q", seqlen,
                          "--seqlen-k", seqlen, "--heads-q", heads, "--cache-dir", dir.sub("cache"), "--json"},
                         {{"FLASHJIT_LIBCUDA", fake_libcuda()}});
    ASSERT_EQ(r.exit_code, 0) << r;
    json::Value v = parse_json(r);
    const json::Array* rows = v.getAsArray();
    ASSERT_TRUE(rows && rows->size() == 1) << r;
    const json::Object* row = (*rows)[0].getAsObject();
    ASSERT_TRUE(row) << r;
    const auto ran_long = row->getBoolean("long_kernel");
    ASSERT_TRUE(ran_long) << r;
    EXPECT_EQ(*ran_long, long_kernel) << r;
    const auto spec = row->getString("kernel_spec");
    ASSERT_TRUE(spec) << r;
    EXPECT_TRUE(spec->contains(long_kernel ? "cluster=2" : "cluster=1")) << spec->str();
  }
}

// bench --pdl launches with PDL, direct and captured launches alike, the attention kernel and the
// launch-floor kernel (timed with the cell's launch shape, attributes included); without it, none.
TEST(Tool, BenchPdlLaunchesWithProgrammaticSerialization) {
  TempDir dir;
  const std::string stats_file = dir.sub("fake-stats.txt");
  for (bool pdl : {false, true}) {
    std::vector<std::string> args = {"bench", "--iters", "3", "--spec", kSmallSpec, "--batch", "1", "--seqlen-q", "512",
                                     "--seqlen-k", "512", "--heads-q", "2", "--cache-dir", dir.sub("cache")};
    if (pdl) args.push_back("--pdl");
    ToolRun r = run_tool(args, {{"FLASHJIT_LIBCUDA", fake_libcuda()}, {"FAKE_CUDA_STATS_FILE", stats_file}});
    ASSERT_EQ(r.exit_code, 0) << r;
    std::map<std::string, uint64_t> counts = read_fake_stats(stats_file);
    if (pdl) {
      // Each kernel: 5 warm-up + 3 idle + 10 captured.
      EXPECT_EQ(counts["launches_programmatic"], 2u * (5u + 3u + 10u));
    } else {
      EXPECT_EQ(counts["launches_programmatic"], 0u);
    }
  }
}
#endif

// check and bench take each sequence's lengths for varlen/paged specs: malformed lengths, and
// lengths for a dense spec, are bad usage (exit 2) found before any device is needed.
TEST(Tool, EngineLengthsAreCheckedBeforeTheDevice) {
  for (const char* command : {"check", "bench"}) {
    const struct {
      const char* spec;
      const char* seqlens;
      const char* says;
    } cases[] = {{"dtype=bf16,varlen=1", "3:4,x", "'x' is not Q:K"},
                 {"dtype=bf16,varlen=1,paged=1", "3:-1", "'3:-1' is not Q:K"},
                 {"dtype=bf16,varlen=1", "3:4,,5:6", "'' is not Q:K"},
                 {"dtype=bf16,head_dim=64", "3:4", "needs a varlen=1 or paged=1 spec"}};
    for (const auto& c : cases) {
      ToolRun r = run_tool({command, "--spec", c.spec, "--seqlens", c.seqlens}, {{"FLASHJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}});
      EXPECT_EQ(r.exit_code, 2) << command << " " << c.seqlens << "\n" << r;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << r;
    }
    ToolRun r = run_tool({command, "--spec", "dtype=bf16,varlen=1,paged=1", "--seqlens", "1:9", "--page-size", "0"},
                         {{"FLASHJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}});
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_NE(r.err.find("--page-size must be at least 1"), std::string::npos) << r;
  }
}


// ---- issue 37: bundles, read-only commands, lock files, errors, source, odd directories ----

// The names in a directory (not recursive).
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  return names;
}

// cache export writes the directory's entries (or --spec's kernels) as one bundle; cache import
// checks it and stores every entry in another directory, where it is a hit.
TEST(Tool, CacheExportAndImportCarryKernelsBetweenDirectories) {
  TempDir work;
  const std::string from = work.sub("from"), to = work.sub("to"), bundle = work.sub("kernels.fjb");
  const std::string key = publish_fake_entry_for(from, kSmallSpec);
  ToolRun exported = run_tool({"cache", "export", bundle, "--cache-dir", from, "--json"});
  ASSERT_EQ(exported.exit_code, 0) << exported;
  json::Value e = parse_json(exported);
  ASSERT_NE(e.getAsObject(), nullptr) << exported;
  EXPECT_EQ(num(*e.getAsObject(), "entries"), 1) << exported;
  ASSERT_TRUE(fs::exists(bundle));

  ToolRun imported = run_tool({"cache", "import", bundle, "--cache-dir", to});
  ASSERT_EQ(imported.exit_code, 0) << imported;
  EXPECT_NE(imported.out.find("imported 1 entries"), std::string::npos) << imported;
  EXPECT_NE(imported.out.find("1 stored in " + to), std::string::npos) << imported;
  EXPECT_EQ(read_all(to + "/" + key + ".entry"), read_all(from + "/" + key + ".entry"));
  EXPECT_EQ(str(prewarm_small(to), "status"), "hit");

  // A damaged bundle imports nothing (exit 1, saying so); an export of an empty directory fails.
  std::string bytes = read_all(bundle);
  bytes[bytes.size() / 2] ^= 0x20;
  std::ofstream(bundle, std::ios::binary | std::ios::trunc) << bytes;
  const std::string third = work.sub("third");
  ToolRun refused = run_tool({"cache", "import", bundle, "--cache-dir", third});
  EXPECT_EQ(refused.exit_code, 1) << refused;
  EXPECT_NE(refused.err.find("nothing imported"), std::string::npos) << refused;
  EXPECT_TRUE(names_in(third).empty() || !fs::exists(third + "/" + key + ".entry"));
  ToolRun empty = run_tool({"cache", "export", work.sub("none.fjb"), "--cache-dir", third});
  EXPECT_EQ(empty.exit_code, 1) << empty;
  ToolRun usage = run_tool({"cache", "import", "--cache-dir", third});
  EXPECT_EQ(usage.exit_code, 2) << usage;
  EXPECT_NE(usage.err.find("takes FILE"), std::string::npos) << usage;
}

// cache list names each entry's NVRTC (the cache key changes with it, so a cache filled by another
// NVRTC misses: the list says why), and a bad entry's reason under its row.
TEST(Tool, CacheListShowsEachEntrysNvrtcAndWhyAnEntryIsInvalid) {
  TempDir cache;
  const json::Object row = prewarm_small(cache.path());
  std::ofstream(cache.sub(std::string(64, 'a') + ".entry")) << "garbage";
  ToolRun table = run_tool({"cache", "list", "--cache-dir", cache.path()});
  ASSERT_EQ(table.exit_code, 0) << table;
  EXPECT_NE(table.out.find("nvrtc"), std::string::npos) << table;
  EXPECT_NE(table.out.find(" " + nvrtc_version() + " "), std::string::npos) << table;
  EXPECT_NE(table.out.find("INVALID"), std::string::npos) << table;
  EXPECT_NE(table.out.find("problem: cache entry truncated"), std::string::npos) << table;
  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path(), "--json"});
  json::Value entries = parse_json(list);
  ASSERT_TRUE(entries.getAsArray() && entries.getAsArray()->size() == 2) << list;
  for (const json::Value& v : *entries.getAsArray()) {
    const json::Object& o = *v.getAsObject();
    EXPECT_EQ(str(o, "nvrtc"), str(o, "key") == str(row, "key") ? nvrtc_version() : "") << list;
  }
}

// list, stats, verify and clear read or remove; none creates a missing directory, each says it is
// missing and exits 0 (there is nothing there, which is not a failure).
TEST(Tool, ReadOnlyCacheCommandsDoNotCreateAMissingDirectory) {
  TempDir work;
  const std::string missing = work.sub("not-yet");
  for (const char* action : {"list", "stats", "verify", "clear"}) {
    ToolRun r = run_tool({"cache", action, "--cache-dir", missing});
    EXPECT_EQ(r.exit_code, 0) << action << "\n" << r;
    EXPECT_NE(r.out.find("does not exist"), std::string::npos) << action << "\n" << r;
    EXPECT_FALSE(fs::exists(missing)) << action << " created " << missing;
  }
  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", missing, "--json"});
  json::Value s = parse_json(stats);
  ASSERT_NE(s.getAsObject(), nullptr) << stats;
  EXPECT_EQ(boolean(*s.getAsObject(), "exists"), 0) << stats;
  EXPECT_FALSE(fs::exists(missing));
}

// A prefix that names no entry and one that names several both fail to name one: the same exit
// status, and the ambiguous message lists every match, with no "..." standing for them.
TEST(Tool, AmbiguousAndUnknownKeyPrefixesExitAlike) {
  TempDir cache;
  const std::string a = "ab" + std::string(62, '1'), b = "ab" + std::string(62, '2'), c = "ab" + std::string(62, '3');
  auto store = DiskStore::open({cache.path(), 0});
  ASSERT_TRUE(store.ok());
  for (const std::string& key : {a, b, c}) ASSERT_TRUE((*store)->publish(key, fake_entry(kSmallSpec)).ok());
  ToolRun ambiguous = run_tool({"cache", "extract", "ab", cache.sub("k.cubin"), "--cache-dir", cache.path()});
  ToolRun unknown = run_tool({"cache", "extract", "cd", cache.sub("k.cubin"), "--cache-dir", cache.path()});
  EXPECT_EQ(ambiguous.exit_code, 1) << ambiguous;
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  for (const std::string& key : {a, b, c}) EXPECT_NE(ambiguous.err.find(key), std::string::npos) << ambiguous;
  EXPECT_EQ(ambiguous.err.find("..."), std::string::npos) << ambiguous;
}

// The per-key lock files go with the compile that took them: none is left beside the entries.
TEST(Tool, PrewarmLeavesNoLockFiles) {
  TempDir cache;
  prewarm_small(cache.path());
  const std::vector<std::string> names = names_in(cache.path());
  ASSERT_EQ(names.size(), 1u) << ::testing::PrintToString(names);
  EXPECT_TRUE(llvm::StringRef(names[0]).endswith(".entry")) << names[0];
}

// prewarm --defaults --help says what --defaults builds: every spec of the set, the engine's too.
TEST(Tool, PrewarmDefaultsHelpListsEverySpecItBuilds) {
  ToolRun r = run_tool({"prewarm", "--defaults", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r;
  for (const AttentionSpec& spec : default_prewarm_specs()) EXPECT_NE(r.out.find(to_string(spec)), std::string::npos) << to_string(spec) << "\n" << r;
  EXPECT_NE(r.out.find("paged=1"), std::string::npos) << r;
}

// With --json an error is JSON on stdout too ({"error", "field", "exit_code"}), whatever found it:
// a spec, the command's own checks, or the option parser.
TEST(Tool, JsonErrorsGoToStdoutAsJson) {
  TempDir cache;
  const std::vector<std::vector<std::string>> runs = {
      {"prewarm", "--spec", "head_dim=65", "--json", "--cache-dir", cache.path()},
      {"prewarm", "--json", "--cache-dir", cache.path()},
      {"cache", "frobnicate", "--json", "--cache-dir", cache.path()},
      {"prewarm", "--no-such-flag", "--json"},
  };
  for (const auto& args : runs) {
    ToolRun r = run_tool(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    json::Value v = parse_json(r);
    ASSERT_NE(v.getAsObject(), nullptr) << r;
    EXPECT_NE(str(*v.getAsObject(), "error"), "<absent>") << r;
    EXPECT_EQ(num(*v.getAsObject(), "exit_code"), 2) << r;
  }
  ToolRun spec = run_tool(runs[0]);
  EXPECT_EQ(str(*parse_json(spec).getAsObject(), "field"), "head_dim") << spec;
}

// A missing --spec is said in flashjit's words, naming the command; LLVM's do not leak.
TEST(Tool, MissingSpecIsSaidInFlashjitsWords) {
  for (const char* command : {"source", "check", "tune"}) {
    ToolRun r = run_tool({command}, {{"FLASHJIT_LIBCUDA", kNoDriver}});
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r;
    EXPECT_NE(r.err.find(std::string(command) + " needs --spec"), std::string::npos) << r;
    EXPECT_EQ(r.err.find("must be specified"), std::string::npos) << r;
  }
}

// Options that cannot apply are refused before any device is needed: --page-size on a spec that
// is not paged (it was ignored), and bench's --grid with --spec (the grid won silently).
TEST(Tool, OptionsThatCannotApplyAreRefused) {
  const EnvChanges no_driver = {{"FLASHJIT_LIBCUDA", kNoDriver}};
  for (const char* command : {"check", "bench"}) {
    ToolRun r = run_tool({command, "--spec", "dtype=bf16,head_dim=64", "--page-size", "32"}, no_driver);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_NE(r.err.find("--page-size needs a paged=1 spec"), std::string::npos) << r;
  }
  ToolRun both = run_tool({"bench", "--grid", "headline", "--spec", "dtype=bf16,head_dim=64"}, no_driver);
  EXPECT_EQ(both.exit_code, 2) << both;
  EXPECT_NE(both.err.find("--grid and --spec"), std::string::npos) << both;
}

// A spec with a long-sequence kernel: source says so, and --all-kernels prints both.
TEST(Tool, SourceOfASpecWithTwoKernelsSaysSoAndPrintsBoth) {
  TempDir cache;
  const std::string spec = "dtype=bf16,head_dim=64,causal=1";  // its long-sequence kernel: three warpgroups
  auto variant = long_sequence_variant(*parse_spec(spec));
  ASSERT_TRUE(variant.has_value());
  const std::string long_spec = to_string(make_config(variant->spec)->spec);
  ToolRun one = run_tool({"source", "--spec", spec, "--cache-dir", cache.path()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("has two kernels"), std::string::npos);
  EXPECT_NE(one.out.find(long_spec), std::string::npos);
  ToolRun both = run_tool({"source", "--spec", spec, "--all-kernels", "--cache-dir", cache.path()});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_NE(both.out.find("// flashjit source: " + long_spec), std::string::npos);
  ToolRun json_both = run_tool({"source", "--spec", spec, "--all-kernels", "--json", "--cache-dir", cache.path()});
  json::Value v = parse_json(json_both);
  ASSERT_TRUE(v.getAsArray() && v.getAsArray()->size() == 2) << json_both.err;
  EXPECT_EQ(str(*(*v.getAsArray())[1].getAsObject(), "spec"), long_spec);
  EXPECT_EQ(str(*(*v.getAsArray())[1].getAsObject(), "role"), "long");
  // A spec with one kernel says nothing of a second.
  ToolRun single = run_tool({"source", "--spec", "dtype=bf16,head_dim=128", "--cache-dir", cache.path()});
  EXPECT_EQ(single.out.find("two kernels"), std::string::npos);
}

// A cache directory that is a symlink to a directory (~/.cache/flashjit onto another disk) is a
// directory: prewarm stores through it, the cache commands read it.
TEST(Tool, ASymlinkedCacheDirectoryIsADirectory) {
  TempDir work;
  fs::create_directory(work.sub("real"));
  fs::create_directory_symlink(work.sub("real"), work.sub("link"));
  ToolRun r = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", work.sub("link")});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(names_in(work.sub("real")).size(), 1u);
  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", work.sub("link"), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats;
  EXPECT_EQ(num(*parse_json(stats).getAsObject(), "entries"), 1) << stats;
}

// A directory where an entry belongs: prewarm sets it aside and stores the kernel (it said
// "compiled" and stored nothing); verify, list and stats count it (they skipped it); clear
// removes it (it failed).
TEST(Tool, ADirectoryInAnEntrysPlaceIsNeitherSkippedNorKept) {
  TempDir cache;
  const std::string key = publish_fake_entry_for(cache.path(), kSmallSpec);
  const std::string entry = cache.sub(key + ".entry");
  auto put_directory = [&] {
    fs::remove_all(entry);
    fs::create_directories(entry + "/inside");
  };
  put_directory();
  ToolRun list = run_tool({"cache", "list", "--cache-dir", cache.path()});
  EXPECT_NE(list.out.find("INVALID"), std::string::npos) << list;
  EXPECT_NE(list.out.find("1 entries"), std::string::npos) << list;
  ToolRun stats = run_tool({"cache", "stats", "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(num(*parse_json(stats).getAsObject(), "entries"), 1) << stats;
  ToolRun verify = run_tool({"cache", "verify", "--cache-dir", cache.path()});
  EXPECT_EQ(verify.exit_code, 1) << verify;
  EXPECT_NE(verify.out.find("1 checked, 0 valid, 1 bad"), std::string::npos) << verify;
  EXPECT_FALSE(fs::exists(entry)) << verify;

  put_directory();
  ToolRun clear = run_tool({"cache", "clear", "--cache-dir", cache.path()});
  EXPECT_EQ(clear.exit_code, 0) << clear;
  EXPECT_FALSE(fs::exists(entry)) << clear;

  put_directory();
  ToolRun prewarm = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", cache.path(), "--json"});
  EXPECT_EQ(prewarm.exit_code, 0) << prewarm;
  EXPECT_TRUE(fs::is_regular_file(entry)) << prewarm;
}

// The key lock's log line names the error of its own open (it showed the errno the logger's
// first use left behind).
TEST(Tool, KeyLockLogLineNamesItsOwnError) {
  TempDir cache;
  auto config = make_config(*parse_spec(kSmallSpec));
  ASSERT_TRUE(config.ok());
  const std::string key = cache_key_for(make_compile_request(*config));
  fs::create_directories(cache.sub(key + ".lock"));  // open(O_RDWR) of a directory: EISDIR
  ToolRun r = run_tool({"prewarm", "--spec", kSmallSpec, "--cache-dir", cache.path()}, {{"FLASHJIT_LOG_LEVEL", "debug"}});
  EXPECT_EQ(r.exit_code, 0) << r;
  const size_t line = r.err.find("no lock file");
  ASSERT_NE(line, std::string::npos) << r;
  EXPECT_NE(r.err.substr(line, r.err.find('\n', line) - line).find(std::strerror(EISDIR)), std::string::npos) << r;
}


// ---- issue 38: masks and scores in check and bench ----

// Each mask or score flag needs its spec key; without it the flag is refused naming both (exit
// 2), before any device is needed.
TEST(Tool, FeatureFlagsNeedTheirSpecKeys) {
  const EnvChanges no_driver = {{"FLASHJIT_LIBCUDA", kNoDriver}};
  const std::vector<std::pair<std::vector<std::string>, std::string>> flags = {
      {{"--window-left", "127"}, "window=1"}, {{"--window-right", "0"}, "window=1"}, {{"--chunk", "8192"}, "chunk=1"},
      {{"--softcap", "30"}, "softcap=1"},    {{"--sinks"}, "sinks=1"},            {{"--sinks=1.5"}, "sinks=1"},
      {{"--alibi"}, "alibi=1"},              {{"--alibi-per-batch"}, "alibi=1"}};
  for (const char* command : {"check", "bench"}) {
    for (const auto& [flag, key] : flags) {
      std::vector<std::string> args = {command, "--spec", "dtype=bf16,head_dim=64,causal=1"};
      args.insert(args.end(), flag.begin(), flag.end());
      ToolRun r = run_tool(args, no_driver);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flag[0] << "\n" << r;
      const std::string name = flag[0].substr(0, flag[0].find('='));
      EXPECT_NE(r.err.find(name + " needs spec key " + key), std::string::npos) << r;
    }
  }
  // A key whose run-time value no flag gives (the launch would refuse a chunk of 0).
  ToolRun chunk = run_tool({"check", "--spec", "dtype=bf16,head_dim=64,chunk=1"}, no_driver);
  EXPECT_EQ(chunk.exit_code, 2) << chunk;
  EXPECT_NE(chunk.err.find("spec key chunk=1 needs --chunk"), std::string::npos) << chunk;
  // A grid's cells have no feature keys: the flags need --spec.
  ToolRun grid = run_tool({"bench", "--grid", "headline", "--window-left", "127"}, no_driver);
  EXPECT_EQ(grid.exit_code, 2) << grid;
  EXPECT_NE(grid.err.find("--window-left needs --spec"), std::string::npos) << grid;
}

// Bad values are refused naming the flag and what is allowed, whatever the spec.
TEST(Tool, FeatureFlagValuesAreChecked) {
  const EnvChanges no_driver = {{"FLASHJIT_LIBCUDA", kNoDriver}};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--window-left", "-2"}, "--window-left: -2 is not allowed; allowed: -1 (unbounded)"},
      {{"--window-right", "-5"}, "--window-right: -5 is not allowed"},
      {{"--chunk", "0"}, "--chunk: 0 is not allowed; allowed: 1 or more"},
      {{"--softcap", "-1"}, "--softcap: -1.000000 is not allowed; allowed: a finite cap above 0"},
      {{"--softcap", "inf"}, "--softcap: inf is not allowed"},
      {{"--sinks=large"}, "--sinks: 'large' is not allowed"},
      {{"--sinks", "--sinks-dtype", "fp16"}, "--sinks-dtype: 'fp16' is not allowed; allowed: fp32, bf16"},
      {{"--sinks-dtype", "bf16"}, "--sinks-dtype needs --sinks"}};
  for (const char* command : {"check", "bench"}) {
    for (const auto& [flags, says] : cases) {
      std::vector<std::string> args = {command, "--spec", "dtype=bf16,head_dim=64,window=1,chunk=1"};
      args.insert(args.end(), flags.begin(), flags.end());
      ToolRun r = run_tool(args, no_driver);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flags[0] << "\n" << r;
      EXPECT_NE(r.err.find(says), std::string::npos) << r;
    }
  }
}

// The FP8 cache's flags (--kv-scales, --kv-scale-per-head) need a kv_dtype=e4m3 spec and take
// K,V (or one) finite scales above 0: refused otherwise naming the flag and what is allowed, before
// any device or compile (exit 2); bench applies them to its kv_dtype=e4m3 specs (a bf16-cache twin
// in the same run takes none) and refuses them on a grid. Accepted, a run gets past its arguments
// (no driver, no NVRTC here: exit 1).
TEST(Tool, Fp8FlagsNeedKvDtypeE4m3AndValidScales) {
  const EnvChanges nothing = {{"FLASHJIT_LIBCUDA", kNoDriver}, {"FLASHJIT_NVRTC", "/nonexistent/flashjit-test/libnvrtc.so"}};
  TempDir dir;
  for (const char* command : {"check", "bench"}) {
    for (const std::vector<std::string>& flag : {std::vector<std::string>{"--kv-scales", "0.5,0.25"}, {"--kv-scale-per-head"}}) {
      std::vector<std::string> args = {command, "--spec", "dtype=bf16,head_dim=64,causal=1", "--cache-dir", dir.sub("cache")};
      args.insert(args.end(), flag.begin(), flag.end());
      ToolRun r = run_tool(args, nothing);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flag[0] << "\n" << r;
      EXPECT_NE(r.err.find(flag[0] + " needs spec key kv_dtype=e4m3, which the spec lacks"), std::string::npos) << r;
    }
    for (const char* value : {"0,1", "-0.5", "inf", "0.5,nan", "abc", "0.5,", "1,2,3", ""}) {
      ToolRun r = run_tool({command, "--spec", "dtype=bf16,head_dim=64,kv_dtype=e4m3", "--kv-scales", value, "--cache-dir", dir.sub("cache")},
                           nothing);
      EXPECT_EQ(r.exit_code, 2) << command << " --kv-scales '" << value << "'\n" << r;
      EXPECT_NE(r.err.find("--kv-scales: '" + std::string(value) + "' is not allowed; allowed: K,V or one scale for both"), std::string::npos)
          << r;
    }
    for (const char* value : {"0.5,0.25", "0.37,0.0913", "1"}) {
      ToolRun r = run_tool({command, "--spec", "dtype=bf16,head_dim=64,kv_dtype=e4m3", "--kv-scales", value, "--kv-scale-per-head",
                            "--cache-dir", dir.sub("cache")},
                           nothing);
      EXPECT_EQ(r.exit_code, 1) << command << " --kv-scales " << value << "\n" << r;
    }
  }
  // bench: the flags go to the run's e4m3 specs; the bf16-cache twin beside them is not refused.
  ToolRun pair = run_tool({"bench", "--spec", "dtype=bf16,head_dim=64", "--spec", "dtype=bf16,head_dim=64,kv_dtype=e4m3",
                           "--kv-scale-per-head", "--cache-dir", dir.sub("cache")},
                          nothing);
  EXPECT_EQ(pair.exit_code, 1) << pair;
  ToolRun grid = run_tool({"bench", "--grid", "decode", "--kv-scales", "0.5"}, nothing);
  EXPECT_EQ(grid.exit_code, 2) << grid;
  EXPECT_NE(grid.err.find("--kv-scales needs --spec"), std::string::npos) << grid;
  // --help names both flags under check and bench.
  for (const char* command : {"check", "bench"}) {
    ToolRun help = run_tool({command, "--help"}, nothing);
    EXPECT_NE(help.out.find("--kv-scales"), std::string::npos) << help;
    EXPECT_NE(help.out.find("--kv-scale-per-head"), std::string::npos) << help;
  }
}

// FP8 operands' flags (--descale-per-head, --descale-non-pow2) need a dtype=e4m3 spec, as the
// cache's need kv_dtype=e4m3: refused otherwise naming the flag and the key, before any device or
// compile (exit 2); accepted, a run gets past its arguments (no driver, no NVRTC here: exit 1).
TEST(Tool, Fp8OperandFlagsNeedDtypeE4m3) {
  const EnvChanges nothing = {{"FLASHJIT_LIBCUDA", kNoDriver}, {"FLASHJIT_NVRTC", "/nonexistent/flashjit-test/libnvrtc.so"}};
  TempDir dir;
  for (const char* command : {"check", "bench"}) {
    for (const char* flag : {"--descale-per-head", "--descale-non-pow2"}) {
      for (const char* spec : {"dtype=bf16,head_dim=64,causal=1", "dtype=bf16,head_dim=64,kv_dtype=e4m3"}) {
        ToolRun r = run_tool({command, "--spec", spec, flag, "--cache-dir", dir.sub("cache")}, nothing);
        EXPECT_EQ(r.exit_code, 2) << command << " " << spec << " " << flag << "\n" << r;
        EXPECT_NE(r.err.find(std::string(flag) + " needs spec key dtype=e4m3, which the spec lacks"), std::string::npos) << r;
      }
    }
    // The cache's flags on FP8 operands name their own key.
    for (const std::vector<std::string>& flag : {std::vector<std::string>{"--kv-scales", "0.5,0.25"}, {"--kv-scale-per-head"}}) {
      std::vector<std::string> args = {command, "--spec", "dtype=e4m3,head_dim=64,causal=1", "--cache-dir", dir.sub("cache")};
      args.insert(args.end(), flag.begin(), flag.end());
      ToolRun r = run_tool(args, nothing);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flag[0] << "\n" << r;
      EXPECT_NE(r.err.find(flag[0] + " needs spec key kv_dtype=e4m3, which the spec lacks"), std::string::npos) << r;
    }
    for (const std::vector<std::string>& flags : {std::vector<std::string>{}, {"--descale-per-head"}, {"--descale-non-pow2"},
                                                  {"--descale-per-head", "--descale-non-pow2"}}) {
      std::vector<std::string> args = {command, "--spec", "dtype=e4m3,head_dim=128,causal=1,out_dtype=fp16", "--cache-dir", dir.sub("cache")};
      args.insert(args.end(), flags.begin(), flags.end());
      ToolRun r = run_tool(args, nothing);
      EXPECT_EQ(r.exit_code, 1) << command << "\n" << r;
    }
  }
  // bench: the flags go to the run's dtype=e4m3 specs; the bf16 twin beside them is not refused;
  // a grid (16-bit cells) refuses them.
  ToolRun pair = run_tool({"bench", "--spec", "dtype=bf16,head_dim=64", "--spec", "dtype=e4m3,head_dim=64", "--descale-per-head",
                           "--cache-dir", dir.sub("cache")},
                          nothing);
  EXPECT_EQ(pair.exit_code, 1) << pair;
  ToolRun grid = run_tool({"bench", "--grid", "fa3", "--descale-non-pow2"}, nothing);
  EXPECT_EQ(grid.exit_code, 2) << grid;
  EXPECT_NE(grid.err.find("--descale-non-pow2 needs --spec"), std::string::npos) << grid;
  for (const char* command : {"check", "bench"}) {
    ToolRun help = run_tool({command, "--help"}, nothing);
    EXPECT_NE(help.out.find("--descale-per-head"), std::string::npos) << help;
    EXPECT_NE(help.out.find("--descale-non-pow2"), std::string::npos) << help;
  }
}

#ifdef FLASHJIT_FAKE_LIBCUDA
// The "features" object of a check's or a bench row's JSON: what the reference took and, under
// "launch", what the launch's arguments held.
const json::Object* features_of(const json::Object& o) { return o.getObject("features"); }
const json::Object* launch_of(const json::Object& o) {
  const json::Object* f = features_of(o);
  return f ? f->getObject("launch") : nullptr;
}

// check --window-left/--window-right/--chunk reach the float64 reference and the launch, dense
// and engine cells alike (the fake driver runs nothing; the dense check of zeros against zeros
// passes, the engine one fails against the CPU reference: only the JSON is read here).
TEST(Tool, CheckPassesWindowsAndChunksToTheReferenceAndTheLaunch) {
  TempDir dir;
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}};
  const std::vector<std::string> common = {"--heads-q", "4", "--heads-kv", "2", "--cache-dir", dir.sub("cache"), "--json"};
  struct Case {
    std::vector<std::string> args;
    int left, right, chunk;
  };
  const Case cases[] = {
      {{"--spec", "dtype=bf16,head_dim=64,causal=1,window=1", "--window-left", "127", "--batch", "1", "--seqlen-q", "300",
        "--seqlen-k", "500"}, 127, -1, 0},
      {{"--spec", "dtype=bf16,head_dim=64,window=1,chunk=1", "--window-left", "3", "--window-right", "9", "--chunk", "64",
        "--batch", "1", "--seqlen-q", "200", "--seqlen-k", "200"}, 3, 9, 64},
      {{"--spec", "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,window=1", "--window-left", "16", "--seqlens", "1:40,3:20",
        "--page-size", "16"}, 16, -1, 0},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), common.begin(), common.end());
    ToolRun r = run_tool(args, fake);
    ASSERT_NE(r.exit_code, 2) << r;
    json::Value v = parse_json(r);
    const json::Object* out = v.getAsObject();
    ASSERT_TRUE(out && features_of(*out) && launch_of(*out)) << r;
    for (const json::Object* side : {features_of(*out), launch_of(*out)}) {
      EXPECT_EQ(num(*side, "window_left"), c.left) << r;
      EXPECT_EQ(num(*side, "window_right"), c.right) << r;
      EXPECT_EQ(num(*side, "chunk"), c.chunk) << r;
    }
    EXPECT_EQ(boolean(*launch_of(*out), "sinks"), 0) << r;
    EXPECT_EQ(boolean(*launch_of(*out), "alibi_slopes"), 0) << r;
    EXPECT_NE(str(*out, "shape").find(" window=" + std::to_string(c.left) + "," + std::to_string(c.right)), std::string::npos) << r;
  }
}

// The visible (query, key) pairs of one sequence under a window and causal mask, by the
// definition: row i at p = i + sk - sq sees key j when p - left <= j <= p (causal) or p + right.
double brute_force_pairs(int sq, int sk, bool causal, int left, int right) {
  double pairs = 0;
  for (int i = 0; i < sq; ++i) {
    const int p = i + sk - sq;
    for (int j = 0; j < sk; ++j) {
      const bool left_ok = left < 0 || j >= p - left;
      const bool right_ok = causal ? j <= p : right < 0 || j <= p + right;
      pairs += left_ok && right_ok;
    }
  }
  return pairs;
}

// bench times a window like any cell, its FLOPs counted over the visible pairs (4 x head_dim a
// pair and head) and its K/V bytes over the keys some row sees; the launch gets the window.
TEST(Tool, BenchCountsAWindowsFlopsOverTheVisiblePairs) {
  TempDir dir;
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}};
  ToolRun r = run_tool({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=64,causal=1,window=1", "--window-left", "127", "--batch",
                        "2", "--seqlen-q", "1024", "--seqlen-k", "1024", "--heads-q", "4", "--heads-kv", "2", "--cache-dir",
                        dir.sub("cache"), "--json"},
                       fake);
  ASSERT_EQ(r.exit_code, 0) << r;
  json::Value v = parse_json(r);
  const json::Array* rows = v.getAsArray();
  ASSERT_TRUE(rows && rows->size() == 1) << r;
  const json::Object* row = (*rows)[0].getAsObject();
  ASSERT_TRUE(row && launch_of(*row)) << r;
  EXPECT_EQ(real(*row, "flops"), 4.0 * 2 * 4 * 64 * brute_force_pairs(1024, 1024, true, 127, -1)) << r;
  EXPECT_EQ(real(*row, "kv_bytes"), 2.0 * 2 * 2 * 2 * 1024 * 64) << r;  // every key is some row's
  EXPECT_EQ(num(*launch_of(*row), "window_left"), 127) << r;
  // An engine cell: decode rows see only the window's keys, and so does the K/V count.
  ToolRun engine = run_tool({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=64,causal=1,varlen=1,window=1", "--window-left",
                             "127", "--seqlens", "1:4000,2:300", "--heads-q", "4", "--heads-kv", "2", "--cache-dir", dir.sub("cache"),
                             "--json"},
                            fake);
  json::Value ev = parse_json(engine);
  const json::Array* erows = ev.getAsArray();
  ASSERT_TRUE(erows && erows->size() == 1) << engine;
  const json::Object* erow = (*erows)[0].getAsObject();
  ASSERT_TRUE(erow && launch_of(*erow)) << engine;
  const double pairs = brute_force_pairs(1, 4000, true, 127, -1) + brute_force_pairs(2, 300, true, 127, -1);
  EXPECT_EQ(real(*erow, "flops"), 4.0 * 4 * 64 * pairs) << engine;
  EXPECT_EQ(real(*erow, "kv_bytes"), 2.0 * 2 * 2 * 64 * (128 + 129)) << engine;
  EXPECT_EQ(num(*launch_of(*erow), "window_left"), 127) << engine;
}

// The spec keys softcap, sinks and alibi, where the kernel has them: the flags' values reach the
// reference and the launch (sink and slope pointers set, their type and stride), random sinks mix
// large and very negative logits exact in their type, ALiBi's slopes are MPT's, per batch varied.
TEST(Tool, SoftcapSinksAndAlibiReachTheReferenceAndTheLaunch) {
  const char* spec = "dtype=bf16,head_dim=64,causal=1,softcap=1,sinks=1,alibi=1";
  if (auto parsed = parse_spec(spec); !parsed) GTEST_SKIP() << "this build's kernels lack the keys: " << parsed.error().message;
  TempDir dir;
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}};
  const int heads = 6, batch = 3;
  for (const char* command : {"check", "bench"}) {
    for (bool per_batch : {false, true}) {
      for (const char* sinks : {"--sinks", "--sinks=2.5"}) {
        std::vector<std::string> args = {command, "--spec", spec, "--softcap", "30", sinks, "--sinks-dtype", per_batch ? "bf16" : "fp32",
                                         per_batch ? "--alibi-per-batch" : "--alibi", "--batch", std::to_string(batch), "--seqlen-q",
                                         "128", "--seqlen-k", "256", "--heads-q", std::to_string(heads), "--heads-kv", "2",
                                         "--cache-dir", dir.sub("cache"), "--json"};
        if (std::string(command) == "bench") args.insert(args.end(), {"--iters", "3"});
        ToolRun r = run_tool(args, fake);
        ASSERT_NE(r.exit_code, 2) << r;
        json::Value v = parse_json(r);
        const json::Object* out = v.getAsObject();
        if (const json::Array* rows = v.getAsArray(); rows && rows->size() == 1) out = (*rows)[0].getAsObject();
        ASSERT_TRUE(out && features_of(*out) && launch_of(*out)) << r;
        const json::Object& ref = *features_of(*out);
        const json::Object& launch = *launch_of(*out);
        EXPECT_EQ(real(ref, "softcap"), 30.0) << r;
        EXPECT_EQ(real(launch, "softcap"), 30.0) << r;
        // Sinks: one a head, in the type asked for, the launch's pointer set.
        EXPECT_EQ(boolean(launch, "sinks"), 1) << r;
        EXPECT_EQ(str(launch, "sinks_dtype"), per_batch ? "bf16" : "fp32") << r;
        const json::Array* sink_values = ref.getArray("sinks");
        ASSERT_TRUE(sink_values && int(sink_values->size()) == heads) << r;
        double largest = -1e300, lowest = 1e300;
        for (const json::Value& s : *sink_values) {
          const double value = *s.getAsNumber();
          largest = std::max(largest, value), lowest = std::min(lowest, value);
          EXPECT_EQ(value, per_batch ? double(half_bits_to_float(float_to_half_bits(float(value), true), true)) : double(float(value)))
              << "not exact in its type: " << value;
          if (std::string(sinks) != "--sinks") EXPECT_EQ(value, 2.5) << r;
        }
        if (std::string(sinks) == "--sinks") {
          EXPECT_GE(largest, 8.0) << r;   // a sink that outweighs every key
          EXPECT_LE(lowest, -30.0) << r;  // and one that counts for nothing
        }
        // ALiBi: MPT's slopes per head, or per sequence and head, varied across sequences.
        EXPECT_EQ(boolean(launch, "alibi_slopes"), 1) << r;
        EXPECT_EQ(num(launch, "alibi_batch_stride"), per_batch ? heads : 0) << r;
        const json::Array* slopes = ref.getArray("alibi_slopes");
        ASSERT_TRUE(slopes && int(slopes->size()) == (per_batch ? batch * heads : heads)) << r;
        for (int h = 0; h < heads; ++h) {
          const double mpt = double(float(std::exp2(-8.0 * (h + 1) / heads)));
          if (!per_batch) EXPECT_EQ(*(*slopes)[size_t(h)].getAsNumber(), mpt) << "head " << h << "\n" << r;
          else EXPECT_NE(*(*slopes)[size_t(h)].getAsNumber(), *(*slopes)[size_t(heads + h)].getAsNumber()) << "head " << h << "\n" << r;
        }
      }
    }
  }
}
// check and bench on an FP8-cache spec (the fake driver runs nothing; only the JSON is read): the
// flags' scales reach the run and the launch (scale pointers set, head stride 1 per K/V head, 0
// per tensor), a scale that is not a power of two doubles the O bound (tests/kv_fp8_gpu_test.cpp's
// rule), and bench counts K/V bytes in FP8 bytes: half the bf16 cache's of the same cell.
TEST(Tool, CheckAndBenchGiveTheFp8CacheItsScales) {
  TempDir dir;
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}};
  const std::vector<std::string> shape = {"--batch", "1", "--seqlen-q", "128", "--seqlen-k", "256", "--heads-q", "4", "--heads-kv", "2",
                                          "--cache-dir", dir.sub("cache"), "--json"};
  for (bool per_head : {false, true}) {
    std::vector<std::string> args = {"check", "--spec", "dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3"};
    if (per_head) args.insert(args.end(), {"--kv-scale-per-head", "--kv-scales", "0.37,0.0913"});
    args.insert(args.end(), shape.begin(), shape.end());
    ToolRun r = run_tool(args, fake);
    ASSERT_NE(r.exit_code, 2) << r;
    json::Value v = parse_json(r);
    const json::Object* out = v.getAsObject();
    ASSERT_TRUE(out && out->getObject("fp8") && out->getObject("fp8")->getObject("launch")) << r;
    const json::Object& fp8 = *out->getObject("fp8");
    const json::Object& launch = *fp8.getObject("launch");
    EXPECT_EQ(str(fp8, "kv_dtype"), "e4m3") << r;
    EXPECT_EQ(real(fp8, "k_scale"), per_head ? double(0.37f) : 0.5) << r;
    EXPECT_EQ(real(fp8, "v_scale"), per_head ? double(0.0913f) : 0.25) << r;
    EXPECT_EQ(boolean(fp8, "per_head"), per_head ? 1 : 0) << r;
    EXPECT_EQ(boolean(fp8, "exact"), per_head ? 0 : 1) << r;
    EXPECT_EQ(boolean(launch, "k_scale"), 1) << r;
    EXPECT_EQ(boolean(launch, "v_scale"), 1) << r;
    EXPECT_EQ(num(launch, "k_scale_head_stride"), per_head ? 1 : 0) << r;
    EXPECT_EQ(num(launch, "v_scale_head_stride"), per_head ? 1 : 0) << r;
    EXPECT_EQ(real(*out, "o_bound"), (per_head ? 2 : 1) * o_error_bound(true)) << r;
    EXPECT_NE(str(*out, "shape").find(" e4m3 k_scale="), std::string::npos) << r;
  }
  // A 16-bit cache's check has no fp8 object.
  std::vector<std::string> plain = {"check", "--spec", "dtype=bf16,head_dim=64,causal=1"};
  plain.insert(plain.end(), shape.begin(), shape.end());
  ToolRun r16 = run_tool(plain, fake);
  json::Value v16 = parse_json(r16);
  ASSERT_TRUE(v16.getAsObject()) << r16;
  EXPECT_EQ(v16.getAsObject()->getObject("fp8"), nullptr) << r16;

  // bench: the same cell with a bf16 and an e4m3 cache in one run.
  std::vector<std::string> bench = {"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=64,causal=1", "--spec",
                                    "dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3", "--kv-scale-per-head"};
  bench.insert(bench.end(), shape.begin(), shape.end());
  ToolRun b = run_tool(bench, fake);
  ASSERT_EQ(b.exit_code, 0) << b;
  json::Value bv = parse_json(b);
  const json::Array* rows = bv.getAsArray();
  ASSERT_TRUE(rows && rows->size() == 2) << b;
  const json::Object* bf16 = (*rows)[0].getAsObject();
  const json::Object* e4m3 = (*rows)[1].getAsObject();
  ASSERT_TRUE(bf16 && e4m3 && e4m3->getObject("fp8") && e4m3->getObject("fp8")->getObject("launch")) << b;
  EXPECT_EQ(str(*bf16, "kv_dtype"), "bf16") << b;
  EXPECT_EQ(str(*e4m3, "kv_dtype"), "e4m3") << b;
  EXPECT_EQ(real(*bf16, "kv_bytes"), 2.0 * 2 * 2 * 256 * 64) << b;  // K and V, 2 bytes, 2 KV heads, 256 keys, d 64
  EXPECT_EQ(real(*e4m3, "kv_bytes"), 2.0 * 1 * 2 * 256 * 64) << b;
  EXPECT_EQ(boolean(*e4m3->getObject("fp8"), "per_head"), 1) << b;
  EXPECT_EQ(boolean(*e4m3->getObject("fp8")->getObject("launch"), "k_scale"), 1) << b;
  EXPECT_EQ(num(*e4m3->getObject("fp8")->getObject("launch"), "k_scale_head_stride"), 1) << b;
  EXPECT_EQ(boolean(*bf16->getObject("fp8")->getObject("launch"), "k_scale"), 0) << b;
  // An engine cell: the K/V bytes of every sequence's keys, in FP8 bytes.
  ToolRun engine = run_tool({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=64,causal=1,varlen=1,paged=1,kv_dtype=e4m3", "--seqlens",
                             "1:300,2:100", "--heads-q", "4", "--heads-kv", "2", "--cache-dir", dir.sub("cache"), "--json"},
                            fake);
  json::Value ev = parse_json(engine);
  const json::Array* erows = ev.getAsArray();
  ASSERT_TRUE(erows && erows->size() == 1 && (*erows)[0].getAsObject()) << engine;
  EXPECT_EQ(real(*(*erows)[0].getAsObject(), "kv_bytes"), 2.0 * 1 * 2 * 64 * (300 + 100)) << engine;
}

// check and bench on FP8 operands (dtype=e4m3; the fake driver runs nothing, only the JSON is
// read): Q's, K's and V's descales reach the run and the launch (per tensor: strides 0;
// --descale-per-head: FlashAttention-3's [batch, heads_kv], batch stride heads_kv, head stride 1),
// the O bound is 2^-4 whatever the descales, O's type is the spec's out_dtype, and bench counts
// K/V bytes in FP8 bytes. Dense and engine (paged) specs.
TEST(Tool, CheckAndBenchGiveFp8OperandsTheirDescales) {
  TempDir dir;
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}};
  const std::vector<std::string> shape = {"--batch", "2", "--seqlen-q", "128", "--seqlen-k", "256", "--heads-q", "4", "--heads-kv", "2",
                                          "--cache-dir", dir.sub("cache"), "--json"};
  for (const char* spec : {"dtype=e4m3,head_dim=64,causal=1", "dtype=e4m3,head_dim=64,causal=1,out_dtype=fp16,varlen=1,paged=1"}) {
    for (int variant = 0; variant < 3; ++variant) {  // defaults, per head, per head and not powers of two
      const bool per_head = variant >= 1, non_pow2 = variant == 2;
      std::vector<std::string> args = {"check", "--spec", spec};
      if (per_head) args.push_back("--descale-per-head");
      if (non_pow2) args.push_back("--descale-non-pow2");
      args.insert(args.end(), shape.begin(), shape.end());
      ToolRun r = run_tool(args, fake);
      ASSERT_NE(r.exit_code, 2) << r;
      json::Value v = parse_json(r);
      const json::Object* out = v.getAsObject();
      ASSERT_TRUE(out && out->getObject("fp8") && out->getObject("fp8")->getObject("launch")) << r;
      const json::Object& fp8 = *out->getObject("fp8");
      const json::Object& launch = *fp8.getObject("launch");
      EXPECT_EQ(str(fp8, "dtype"), "e4m3") << r;
      EXPECT_EQ(str(fp8, "out_dtype"), std::string(spec).find("out_dtype=fp16") != std::string::npos ? "fp16" : "bf16") << r;
      EXPECT_EQ(real(fp8, "q_scale"), non_pow2 ? double(0.3f) : 0.25) << r;
      EXPECT_EQ(real(fp8, "k_scale"), non_pow2 ? double(0.37f) : 0.5) << r;
      EXPECT_EQ(real(fp8, "v_scale"), non_pow2 ? double(0.0913f) : 0.25) << r;
      EXPECT_EQ(boolean(fp8, "per_head"), per_head ? 1 : 0) << r;
      EXPECT_EQ(boolean(fp8, "per_sequence"), per_head ? 1 : 0) << r;
      EXPECT_EQ(boolean(fp8, "exact"), non_pow2 ? 0 : 1) << r;
      for (const char* scale : {"q_scale", "k_scale", "v_scale"}) {
        EXPECT_EQ(boolean(launch, scale), 1) << scale << "\n" << r;
        EXPECT_EQ(num(launch, (std::string(scale) + "_head_stride").c_str()), per_head ? 1 : 0) << scale << "\n" << r;
        EXPECT_EQ(num(launch, (std::string(scale) + "_batch_stride").c_str()), per_head ? 2 : 0) << scale << "\n" << r;
      }
      EXPECT_EQ(real(*out, "o_bound"), kFp8OperandsOErrorBound) << r;
      EXPECT_EQ(real(*out, "lse_bound"), kLseErrorBound) << r;
      EXPECT_NE(str(*out, "shape").find(" e4m3 q_scale="), std::string::npos) << r;
    }
  }
  // bench: the same cell with bf16 and e4m3 operands in one run; K/V bytes in FP8 bytes.
  std::vector<std::string> bench = {"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=64,causal=1", "--spec",
                                    "dtype=e4m3,head_dim=64,causal=1", "--descale-per-head"};
  bench.insert(bench.end(), shape.begin(), shape.end());
  ToolRun b = run_tool(bench, fake);
  ASSERT_EQ(b.exit_code, 0) << b;
  json::Value bv = parse_json(b);
  const json::Array* rows = bv.getAsArray();
  ASSERT_TRUE(rows && rows->size() == 2) << b;
  const json::Object* bf16 = (*rows)[0].getAsObject();
  const json::Object* e4m3 = (*rows)[1].getAsObject();
  ASSERT_TRUE(bf16 && e4m3 && e4m3->getObject("fp8") && e4m3->getObject("fp8")->getObject("launch")) << b;
  EXPECT_EQ(str(*e4m3, "dtype"), "e4m3") << b;
  EXPECT_EQ(real(*bf16, "kv_bytes"), 2 * 2.0 * 2 * 2 * 256 * 64) << b;  // batch 2, K and V, 2 bytes, 2 KV heads, 256 keys, d 64
  EXPECT_EQ(real(*e4m3, "kv_bytes"), 2 * 2.0 * 1 * 2 * 256 * 64) << b;
  EXPECT_EQ(real(*bf16, "flops"), real(*e4m3, "flops")) << b;  // FLOPs as usual
  const json::Object& launch = *e4m3->getObject("fp8")->getObject("launch");
  EXPECT_EQ(boolean(launch, "q_scale"), 1) << b;
  EXPECT_EQ(num(launch, "q_scale_batch_stride"), 2) << b;
  EXPECT_EQ(num(launch, "k_scale_head_stride"), 1) << b;
  EXPECT_EQ(boolean(*bf16->getObject("fp8")->getObject("launch"), "k_scale"), 0) << b;
  // An engine cell (paged): every sequence's keys in FP8 bytes, Q's descale launched.
  ToolRun engine = run_tool({"bench", "--iters", "3", "--spec", "dtype=e4m3,head_dim=64,causal=1,varlen=1,paged=1", "--seqlens", "1:300,2:100",
                             "--heads-q", "4", "--heads-kv", "2", "--cache-dir", dir.sub("cache"), "--json"},
                            fake);
  json::Value ev = parse_json(engine);
  const json::Array* erows = ev.getAsArray();
  ASSERT_TRUE(erows && erows->size() == 1 && (*erows)[0].getAsObject()) << engine;
  EXPECT_EQ(real(*(*erows)[0].getAsObject(), "kv_bytes"), 2.0 * 1 * 2 * 64 * (300 + 100)) << engine;
  const json::Object* efp8 = (*erows)[0].getAsObject()->getObject("fp8");
  ASSERT_TRUE(efp8 && efp8->getObject("launch")) << engine;
  EXPECT_EQ(boolean(*efp8->getObject("launch"), "q_scale"), 1) << engine;
}

// The tensor maps a run of the tool encoded (the fake's FAKE_CUDA_TENSOR_MAPS_FILE), in order.
struct EncodedMap {
  uint64_t address = 0, dims[4] = {}, strides[3] = {}, box[2] = {};
};
std::vector<EncodedMap> read_tensor_maps(const std::string& path) {
  std::vector<EncodedMap> maps;
  std::ifstream in(path);
  EncodedMap m;
  while (in >> m.address >> m.dims[0] >> m.dims[1] >> m.dims[2] >> m.dims[3] >> m.strides[0] >> m.strides[1] >> m.strides[2] >> m.box[0] >>
         m.box[1]) {
    maps.push_back(m);
  }
  return maps;
}
// "{a, b, c, d} strides {e, f, g}" of a map, for the messages.
std::string describe_map(const EncodedMap& m) {
  return llvm::formatv("{{{0}, {1}, {2}, {3}} strides {{{4}, {5}, {6}}", m.dims[0], m.dims[1], m.dims[2], m.dims[3], m.strides[0],
                       m.strides[1], m.strides[2]).str();
}

// check and bench on a head_dim_v spec (DeepSeek's 192/128; the fake driver runs nothing): V and
// O reach the launch 128 columns wide with their own strides (Q's and K's rows 192 wide), dense
// and engine (paged varlen, split-KV) alike; the JSON names both head dims; bench counts
// 2 x (192 + 128) FLOPs a visible pair and head and K's and V's own columns in the K/V bytes.
TEST(Tool, CheckAndBenchGiveVAndOTheirHeadDimV) {
  TempDir dir;
  const std::string maps_file = dir.sub("maps.txt");
  const EnvChanges fake = {{"FLASHJIT_LIBCUDA", fake_libcuda()}, {"FAKE_CUDA_TENSOR_MAPS_FILE", maps_file}};
  const std::vector<std::string> heads = {"--heads-q", "4", "--heads-kv", "2", "--cache-dir", dir.sub("cache"), "--json"};
  auto with_heads = [&](std::vector<std::string> args) {
    args.insert(args.end(), heads.begin(), heads.end());
    return args;
  };
  auto expect_map = [](const EncodedMap& m, std::vector<uint64_t> dims, std::vector<uint64_t> strides, const char* what) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(m.dims[i], dims[size_t(i)]) << what << ": " << describe_map(m);
    for (int i = 0; i < 3; ++i) {
      if (strides[size_t(i)] != 0) EXPECT_EQ(m.strides[i], strides[size_t(i)]) << what << ": " << describe_map(m);  // 0: not checked
    }
  };

  // Dense [batch, seqlen, heads, d]: Q and K 192 columns, V and O 128 (bytes: bf16).
  const int sq = 128, sk = 256;
  ToolRun dense = run_tool(with_heads({"check", "--spec", "dtype=bf16,head_dim=192,head_dim_v=128,causal=1", "--batch", "2", "--seqlen-q",
                                       std::to_string(sq), "--seqlen-k", std::to_string(sk)}),
                           fake);
  ASSERT_EQ(dense.exit_code, 0) << dense;  // zeros against zeros
  {
    json::Value v = parse_json(dense);
    const json::Object* out = v.getAsObject();
    ASSERT_TRUE(out) << dense;
    EXPECT_EQ(num(*out, "head_dim"), 192) << dense;
    EXPECT_EQ(num(*out, "head_dim_v"), 128) << dense;
    EXPECT_NE(str(*out, "shape").find("d=192/128"), std::string::npos) << dense;
    const std::vector<EncodedMap> maps = read_tensor_maps(maps_file);
    ASSERT_EQ(maps.size(), 4u) << dense;  // Q, K, V, O
    expect_map(maps[0], {192, sq, 4, 2}, {4 * 192 * 2, 192 * 2, sq * 4 * 192 * 2}, "Q");
    expect_map(maps[1], {192, sk, 2, 2}, {2 * 192 * 2, 192 * 2, sk * 2 * 192 * 2}, "K");
    expect_map(maps[2], {128, sk, 2, 2}, {2 * 128 * 2, 128 * 2, sk * 2 * 128 * 2}, "V");
    expect_map(maps[3], {128, sq, 4, 2}, {4 * 128 * 2, 128 * 2, sq * 4 * 128 * 2}, "O");
    EXPECT_EQ(maps[2].address - maps[1].address, uint64_t(2) * sk * 2 * 192 * 2) << "V follows K's 192-wide rows";
  }

  // Engine: paged varlen (pools [pages, 16, heads, d]) and split-KV with packed heads.
  for (const char* spec : {"dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1",
                           "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"}) {
    const bool split = std::string(spec).find("split_kv=1") != std::string::npos;
    ToolRun r = run_tool(with_heads({"check", "--spec", spec, "--seqlens", split ? "1:400,1:200" : "5:40,3:20", "--page-size", "16"}), fake);
    ASSERT_NE(r.exit_code, 2) << r;  // the fake's zeros fail against the CPU reference: the JSON and the maps are read
    json::Value v = parse_json(r);
    const json::Object* out = v.getAsObject();
    ASSERT_TRUE(out) << r;
    EXPECT_EQ(num(*out, "head_dim_v"), 128) << r;
    EXPECT_NE(str(*out, "shape").find("d=192/128"), std::string::npos) << r;
    EXPECT_EQ(str(*out, "error").find("launch"), std::string::npos) << r;  // launched
    const std::vector<EncodedMap> maps = read_tensor_maps(maps_file);
    ASSERT_EQ(maps.size(), 4u) << r;
    const uint64_t pages = maps[1].dims[3];
    expect_map(maps[1], {192, 16, 2, pages}, {2 * 192 * 2, 192 * 2, 16 * 2 * 192 * 2}, "K pool");
    expect_map(maps[2], {128, 16, 2, pages}, {2 * 128 * 2, 128 * 2, 16 * 2 * 128 * 2}, "V pool");
    EXPECT_EQ(maps[3].dims[0], 128u) << "O: " << describe_map(maps[3]);
    EXPECT_EQ(maps[3].strides[0], uint64_t(4 * 128 * 2)) << "O's rows: " << describe_map(maps[3]);
    EXPECT_EQ(maps[0].dims[0], 192u) << "Q: " << describe_map(maps[0]);
  }

  // FP8, dense; O 128 wide. An FP8 cache's K and V are read without maps; FP8 operands' K and V have
  // byte maps (e4m3: strides in bytes), K 192 columns and V 128.
  for (const char* spec : {"dtype=bf16,head_dim=192,head_dim_v=128,causal=1,kv_dtype=e4m3", "dtype=e4m3,head_dim=192,head_dim_v=128,causal=1"}) {
    ToolRun r = run_tool(with_heads({"check", "--spec", spec, "--batch", "1", "--seqlen-q", "64", "--seqlen-k", "96"}), fake);
    ASSERT_EQ(r.exit_code, 0) << r;
    json::Value v = parse_json(r);
    ASSERT_TRUE(v.getAsObject() && v.getAsObject()->getObject("fp8")) << r;
    EXPECT_EQ(num(*v.getAsObject(), "head_dim_v"), 128) << r;
    const std::vector<EncodedMap> maps = read_tensor_maps(maps_file);
    const bool operands = std::string(spec).rfind("dtype=e4m3", 0) == 0;
    ASSERT_EQ(maps.size(), operands ? 4u : 2u) << r;  // Q (K, V) and O
    if (operands) {
      expect_map(maps[1], {192, 96, 2, 1}, {2 * 192, 192, 0}, "K bytes");
      expect_map(maps[2], {128, 96, 2, 1}, {2 * 128, 128, 0}, "V bytes");
    }
    expect_map(maps.back(), {128, 64, 4, 1}, {4 * 128 * 2, 128 * 2, 0}, "O");
  }

  // bench: FLOPs 2 x (192 + 128) a pair and head (causal: half of sq x sk at sq == sk), K/V bytes
  // 192 + 128 columns a key and KV head; the timed sets' V and O maps 128 wide.
  ToolRun b = run_tool(with_heads({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=192,head_dim_v=128,causal=1", "--spec",
                                   "dtype=bf16,head_dim=192,head_dim_v=128", "--batch", "2", "--seqlen-q", "512", "--seqlen-k", "512"}),
                       fake);
  ASSERT_EQ(b.exit_code, 0) << b;
  {
    json::Value v = parse_json(b);
    const json::Array* rows = v.getAsArray();
    ASSERT_TRUE(rows && rows->size() == 2 && (*rows)[0].getAsObject() && (*rows)[1].getAsObject()) << b;
    const double full = 2.0 * (192 + 128) * 2 * 4 * 512 * 512;
    EXPECT_EQ(real(*(*rows)[0].getAsObject(), "flops"), full / 2) << b;
    EXPECT_EQ(real(*(*rows)[1].getAsObject(), "flops"), full) << b;
    for (int i = 0; i < 2; ++i) {
      const json::Object& row = *(*rows)[size_t(i)].getAsObject();
      EXPECT_EQ(num(row, "head_dim"), 192) << b;
      EXPECT_EQ(num(row, "head_dim_v"), 128) << b;
      EXPECT_EQ(real(row, "kv_bytes"), 2.0 * 2 * 2 * 512 * (192 + 128)) << b;  // batch 2, 2 bytes, 2 KV heads, 512 keys
      EXPECT_EQ(str(row, "error"), "") << b;
    }
    const std::vector<EncodedMap> maps = read_tensor_maps(maps_file);
    ASSERT_FALSE(maps.empty()) << b;
    ASSERT_EQ(maps.size() % 4, 0u) << b;
    for (size_t i = 0; i < maps.size(); i += 4) {
      expect_map(maps[i + 2], {128, 512, 2, 2}, {2 * 128 * 2, 128 * 2, 512 * 2 * 128 * 2}, "bench V");
      expect_map(maps[i + 3], {128, 512, 4, 2}, {4 * 128 * 2, 128 * 2, 512 * 4 * 128 * 2}, "bench O");
      EXPECT_EQ(maps[i + 1].dims[0], 192u) << "bench K: " << describe_map(maps[i + 1]);
    }
  }
  // An engine cell (varlen): every sequence's visible pairs, K's and V's columns per key.
  ToolRun engine = run_tool(with_heads({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1",
                                        "--seqlens", "1:300,2:100"}),
                            fake);
  json::Value ev = parse_json(engine);
  const json::Array* erows = ev.getAsArray();
  ASSERT_TRUE(erows && erows->size() == 1 && (*erows)[0].getAsObject()) << engine;
  const json::Object& erow = *(*erows)[0].getAsObject();
  EXPECT_EQ(real(erow, "flops"), 2.0 * (192 + 128) * 4 * (brute_force_pairs(1, 300, true, -1, -1) + brute_force_pairs(2, 100, true, -1, -1)))
      << engine;
  EXPECT_EQ(real(erow, "kv_bytes"), 2.0 * 2 * (300 + 100) * (192 + 128)) << engine;
  EXPECT_EQ(num(erow, "head_dim_v"), 128) << engine;
  // A square spec's count is unchanged: 4 x head_dim a pair and head.
  ToolRun square = run_tool(with_heads({"bench", "--iters", "3", "--spec", "dtype=bf16,head_dim=128", "--batch", "1", "--seqlen-q", "256",
                                        "--seqlen-k", "256"}),
                            fake);
  json::Value sv = parse_json(square);
  ASSERT_TRUE(sv.getAsArray() && sv.getAsArray()->size() == 1 && (*sv.getAsArray())[0].getAsObject()) << square;
  EXPECT_EQ(real(*(*sv.getAsArray())[0].getAsObject(), "flops"), 4.0 * 128 * 4 * 256 * 256) << square;
  EXPECT_EQ(num(*(*sv.getAsArray())[0].getAsObject(), "head_dim_v"), 128) << square;
}
#endif

}  // namespace
}  // namespace flashjit
