#include "compile/nvrtc_compiler.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/log.hpp"
#include "compile/nvrtc_library.hpp"
#include "compile/ptxas_report.hpp"

namespace flashjit {
namespace {

// An NVRTC program, destroyed with the table that created it.
class Program {
 public:
  explicit Program(const NvrtcApi& api) : api_(api) {}
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (program_) api_.nvrtcDestroyProgram(&program_);
  }
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram operator*() const { return program_; }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  api.nvrtcGetProgramLog(program, log.data());
  log.resize(size - 1);
  return log;
}

Error compile_error(const CompileRequest& request, std::string what, std::string log) {
  return Error::make(ErrorCode::kCompileFailed, "NVRTC " + what + " for spec '" + request.spec_text + "'", std::move(log));
}

}  // namespace

std::vector<std::string> default_nvrtc_options() {
  // NOTES: --no-cache keeps NVRTC's own result cache out of our timings (we cache cubins ourselves);
  // -v makes ptxas report registers and spills into the log.
  return {std::string("--gpu-architecture=") + kTargetArch, "-std=c++17", "--ptxas-options=-v", "--no-cache", "--diag-suppress=177"};
}

std::string nvrtc_version() {
  // NOTES: without a loadable NVRTC nothing can be compiled, but kernels compiled by the NVRTC of
  // flashjit's own build can still be found in the cache: their key names that version.
  auto api = nvrtc();
  if (!api) return built_nvrtc_version();
  return std::to_string((*api)->major) + "." + std::to_string((*api)->minor);
}

Result<CompiledKernel> compile_with_nvrtc(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto loaded = nvrtc();
  if (!loaded) {
    Error error = loaded.error();
    error.message = "cannot compile spec '" + request.spec_text + "': " + error.message;
    return error;
  }
  const NvrtcApi& api = **loaded;
  // 1. Create the program from the rendered source.
  Program program(api);
  if (nvrtcResult r = api.nvrtcCreateProgram(program.out(), request.source.c_str(), "flashjit_kernel.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS) {
    return compile_error(request, std::string("create failed: ") + api.nvrtcGetErrorString(r), {});
  }
  // 2. Compile for sm_90a. FLASHJIT_NVRTC_TIME_TRACE=DIR writes NVRTC's time trace of each compile
  // to DIR/<spec>.json (front end, NVVM optimiser and code generation, ptxas; a Chrome trace): a
  // measuring aid (tools/measure_compile.sh), not part of the options the cache key covers.
  std::vector<const char*> options;
  for (const std::string& option : request.options) options.push_back(option.c_str());
  std::string trace_option;
  if (const char* dir = std::getenv(kTimeTraceEnv); dir != nullptr && *dir != '\0') {
    const std::string path = std::string(dir) + "/" + request.spec_text;
    std::remove((path + ".json").c_str());  // NVRTC appends .json, and to an existing file (no longer JSON)
    trace_option = "--fdevice-time-trace=" + path;
    options.push_back(trace_option.c_str());
  }
  const nvrtcResult compiled = api.nvrtcCompileProgram(*program, int(options.size()), options.data());
  std::string log = program_log(api, *program);
  if (compiled != NVRTC_SUCCESS) return compile_error(request, std::string("compile failed: ") + api.nvrtcGetErrorString(compiled), log);
  // 3. Take the cubin (a PTX-only target would give 0 bytes: treat that as a failure).
  size_t cubin_size = 0;
  api.nvrtcGetCUBINSize(*program, &cubin_size);
  if (cubin_size == 0) return compile_error(request, "produced no cubin (is the target a real sm_ arch?)", log);
  CompiledKernel kernel;
  kernel.cubin.resize(cubin_size);
  api.nvrtcGetCUBIN(*program, kernel.cubin.data());
  // 4. Keep what ptxas said about it.
  kernel.spec_text = request.spec_text;
  kernel.kernel_name = request.kernel_name;
  kernel.report = parse_ptxas_report(log, request.kernel_name);
  kernel.nvrtc_version = nvrtc_version();
  kernel.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  logger().info("compiled {} in {:.0f} ms: {} registers, {} spill bytes", request.spec_text, kernel.compile_ms,
                kernel.report.registers, kernel.report.spill_bytes());
  return kernel;
}

}  // namespace flashjit
