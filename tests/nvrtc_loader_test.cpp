// NVRTC is loaded at run time, never linked: a process maps libnvrtc only once something compiles,
// and where NVRTC cannot be loaded ($FLASHJIT_NVRTC naming something that is not it) every compile
// fails with a message that names what was looked for and how to provide it, while what does not
// compile (the tool's cache commands, doctor, --help, a cache hit) works as before.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "compile/nvrtc_compiler.hpp"
#include "compile/nvrtc_library.hpp"
#include "config/kernel_config.hpp"
#include "spec/attention_spec.hpp"
#include "driver_test_util.hpp"
#include "flashjit/flashjit.h"
#include "runtime/engine.hpp"

namespace flashjit {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNvrtcEnv = "FLASHJIT_NVRTC";
constexpr const char* kMissingNvrtc = "/nonexistent/flashjit-test/libnvrtc.so.13";
// Small kernels, quick to compile.
constexpr const char* kSmallSpec = "dtype=fp16,head_dim=64,causal=0";
constexpr const char* kOtherSpec = "dtype=bf16,head_dim=64,causal=0";

// A file that exists and is not a shared object.
std::string text_file() {
  std::string path = ::testing::TempDir() + "flashjit_not_nvrtc_" + std::to_string(getpid()) + ".so";
  std::ofstream(path) << "this is not an ELF file\n";
  return path;
}

// The ways of not having NVRTC: no such file, a file that is no library, a library that is not NVRTC.
std::vector<std::string> unusable_nvrtc_paths(const std::string& not_a_library) {
  return {kMissingNvrtc, not_a_library, "libz.so.1"};
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/flashjit-nvrtc-test-XXXXXX";
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

 private:
  std::string path_;
};

// The message of a compile that could not load NVRTC from path: what, where, and how to provide it.
void expect_names_nvrtc_and_the_way_out(const std::string& text, const std::string& path) {
  EXPECT_NE(text.find(path), std::string::npos) << text;
  EXPECT_NE(text.find("NVRTC"), std::string::npos) << text;
  EXPECT_NE(text.find(kNvrtcEnv), std::string::npos) << text;
  EXPECT_NE(text.find("pip install"), std::string::npos) << text;
}

bool libnvrtc_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libnvrtc.so") != std::string::npos) return true;
  }
  return false;
}

CompileRequest small_request() {
  auto config = make_config(*parse_spec(kSmallSpec));
  return make_compile_request(*config);
}

// ---- the loader ----

TEST(NvrtcLoader, LoadsNvrtcOfTheBuildsMajorVersionBySoname) {
  auto api = load_nvrtc_from("libnvrtc.so." + std::to_string(built_nvrtc_major()));
  ASSERT_TRUE(api.ok()) << api.error().message;
  EXPECT_EQ(api->major, built_nvrtc_major());
  EXPECT_FALSE(api->file.empty());
  for (const void* fn : {reinterpret_cast<const void*>(api->nvrtcVersion), reinterpret_cast<const void*>(api->nvrtcGetErrorString),
                         reinterpret_cast<const void*>(api->nvrtcCreateProgram), reinterpret_cast<const void*>(api->nvrtcDestroyProgram),
                         reinterpret_cast<const void*>(api->nvrtcCompileProgram), reinterpret_cast<const void*>(api->nvrtcGetProgramLogSize),
                         reinterpret_cast<const void*>(api->nvrtcGetProgramLog), reinterpret_cast<const void*>(api->nvrtcGetCUBINSize),
                         reinterpret_cast<const void*>(api->nvrtcGetCUBIN)}) {
    EXPECT_NE(fn, nullptr);
  }
  // The process-wide table is the same NVRTC, and its version is the one in the cache key.
  auto process_wide = nvrtc();
  ASSERT_TRUE(process_wide.ok()) << process_wide.error().message;
  EXPECT_EQ(nvrtc_version(), std::to_string((*process_wide)->major) + "." + std::to_string((*process_wide)->minor));
}

TEST(NvrtcLoader, WhatIsNotNvrtcIsRefusedWithTheWayOut) {
  const std::string not_a_library = text_file();
  for (const std::string& path : unusable_nvrtc_paths(not_a_library)) {
    auto api = load_nvrtc_from(path);
    ASSERT_FALSE(api.ok()) << path;
    EXPECT_EQ(api.error().code, ErrorCode::kDriverUnavailable) << api.error().message;
    expect_names_nvrtc_and_the_way_out(api.error().message, path);
  }
  auto libz = load_nvrtc_from("libz.so.1");
  ASSERT_FALSE(libz.ok());
  EXPECT_NE(libz.error().message.find("libz.so.1 is not NVRTC: it exports no nvrtcVersion"), std::string::npos)
      << libz.error().message;
  std::remove(not_a_library.c_str());
}

// ---- linked or loaded ----

int not_linked_role(int, char**) {
  std::printf("at start: %s\n", libnvrtc_mapped() ? "libnvrtc mapped" : "no libnvrtc");
  auto kernel = compile_with_nvrtc(small_request());
  std::printf("after a compile: %s, %s\n", kernel.ok() ? "compiled" : kernel.error().message.c_str(),
              libnvrtc_mapped() ? "libnvrtc mapped" : "no libnvrtc");
  return 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(nvrtc_not_linked, not_linked_role);

TEST(NvrtcLoader, NvrtcIsNotLinkedOnlyOpenedToCompile) {
  // A process that never compiles never maps NVRTC: the binary does not depend on it (if it did, it
  // would not even start where there is no libnvrtc.so.13).
  auto run = testing::run_child_role("nvrtc_not_linked", {});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("at start: no libnvrtc"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("after a compile: compiled, libnvrtc mapped"), std::string::npos) << run.output;
}

// ---- a compile without NVRTC ----

int compile_without_nvrtc_role(int, char**) {
  auto kernel = compile_with_nvrtc(small_request());
  std::printf("compile: %s\n", kernel.ok() ? "ok" : kernel.error().message.c_str());
  const bool compile_unavailable = !kernel.ok() && kernel.error().code == ErrorCode::kDriverUnavailable;
  // The C API: prewarm in a context without a GPU, into a fresh directory.
  TempDir dir;
  flashjit_context_options_t options;
  flashjit_context_options_init(&options);
  options.device = FLASHJIT_DEVICE_NONE;
  options.cache_dir = dir.path().c_str();
  flashjit_context_t context = nullptr;
  if (flashjit_context_create(&options, &context) != FLASHJIT_SUCCESS) {
    std::printf("context: %s\n", flashjit_last_error_message());
    return 1;
  }
  const char* specs[] = {kSmallSpec};
  const flashjit_status_t status = flashjit_prewarm(context, specs, 1);
  std::printf("prewarm: %s: %s\n", flashjit_status_string(status), flashjit_last_error_message());
  flashjit_context_destroy(context);
  return compile_unavailable && status == FLASHJIT_ERROR_DRIVER_UNAVAILABLE ? 0 : 1;
}
FLASHJIT_REGISTER_CHILD_ROLE(nvrtc_compile_without_nvrtc, compile_without_nvrtc_role);

TEST(NvrtcLoader, CompileWithoutNvrtcSaysWhatWasLookedForAndHowToProvideIt) {
  const std::string not_a_library = text_file();
  for (const std::string& path : unusable_nvrtc_paths(not_a_library)) {
    auto run = testing::run_child_role("nvrtc_compile_without_nvrtc", {{kNvrtcEnv, path}});
    EXPECT_EQ(run.exit_code, 0) << path << "\n" << run.output;
    for (const char* line : {"compile: ", "prewarm: FLASHJIT_ERROR_DRIVER_UNAVAILABLE: "}) {
      const size_t at = run.output.find(line);
      ASSERT_NE(at, std::string::npos) << line << "\n" << run.output;
      expect_names_nvrtc_and_the_way_out(run.output.substr(at, run.output.find('\n', at) - at), path);
    }
  }
  std::remove(not_a_library.c_str());
}

int bare_name_role(int, char**) {
  auto kernel = compile_with_nvrtc(small_request());
  std::printf("compile: %s\n", kernel.ok() ? "ok" : kernel.error().message.c_str());
  return kernel.ok() ? 1 : 0;
}
FLASHJIT_REGISTER_CHILD_ROLE(nvrtc_bare_name, bare_name_role);

TEST(NvrtcLoader, BareNameIsLookedForWhereTheDynamicLoaderLooksAndTheMessageSaysWhere) {
  TempDir folder;  // an existing folder: the loader lists the folders it may search
  const std::string name = "libflashjit-test-absent-nvrtc.so.13";
  auto run = testing::run_child_role("nvrtc_bare_name", {{kNvrtcEnv, name}, {"LD_LIBRARY_PATH", folder.path()}});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  expect_names_nvrtc_and_the_way_out(run.output, name);
  EXPECT_NE(run.output.find("searched " + folder.path()), std::string::npos) << run.output;  // LD_LIBRARY_PATH first
  EXPECT_NE(run.output.find("and the ld.so cache"), std::string::npos) << run.output;
}

// ---- the tool without NVRTC ----

struct ToolRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string tool_path() {
  const char* copied = std::getenv("FLASHJIT_TEST_TOOL");  // as tool_test.cpp: a copied build's tool
  return copied && *copied ? copied : FLASHJIT_TOOL_PATH;
}

ToolRun run_tool(const std::string& args, const std::string& nvrtc = "") {
  std::string command = "env FLASHJIT_LIBCUDA=/nonexistent/flashjit-test/libcuda.so.1";
  if (!nvrtc.empty()) command += " " + std::string(kNvrtcEnv) + "=" + testing::shell_quote(nvrtc);
  command += " " + testing::shell_quote(tool_path()) + " " + args + " </dev/null 2>&1";
  ToolRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(NvrtcLoader, ToolWithoutNvrtcServesTheCacheAndRefusesOnlyToCompile) {
  TempDir cache;
  const std::string dir = " --cache-dir " + testing::shell_quote(cache.path());
  ToolRun warm = run_tool("prewarm --spec " + std::string(kSmallSpec) + dir);  // with NVRTC
  ASSERT_EQ(warm.exit_code, 0) << warm.output;

  const std::string not_a_library = text_file();
  for (const std::string& nvrtc : unusable_nvrtc_paths(not_a_library)) {
    SCOPED_TRACE(nvrtc);
    ToolRun help = run_tool("--help", nvrtc);
    EXPECT_EQ(help.exit_code, 0) << help.output;
    for (const char* command : {"cache list", "cache stats", "cache verify"}) {
      ToolRun r = run_tool(command + dir, nvrtc);
      EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
    }
    ToolRun list = run_tool("cache list" + dir, nvrtc);
    EXPECT_NE(list.output.find("head_dim=64"), std::string::npos) << list.output;
    // doctor reports the missing NVRTC as a finding, as it does a missing driver.
    ToolRun doctor = run_tool("doctor" + dir, nvrtc);
    EXPECT_EQ(doctor.exit_code, 0) << doctor.output;
    EXPECT_NE(doctor.output.find(nvrtc), std::string::npos) << doctor.output;
    // The kernel compiled before is a hit; a new one cannot be compiled, and the tool says why.
    ToolRun hit = run_tool("prewarm --spec " + std::string(kSmallSpec) + dir, nvrtc);
    EXPECT_EQ(hit.exit_code, 0) << hit.output;
    EXPECT_NE(hit.output.find("0 compiled, 1 hits, 0 failed"), std::string::npos) << hit.output;
    ToolRun compile = run_tool("prewarm --spec " + std::string(kOtherSpec) + dir, nvrtc);
    EXPECT_EQ(compile.exit_code, 1) << compile.output;
    expect_names_nvrtc_and_the_way_out(compile.output, nvrtc);
  }
  std::remove(not_a_library.c_str());
}

}  // namespace
}  // namespace flashjit
