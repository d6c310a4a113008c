// flashjit: prewarm the kernel cache, inspect it, check the environment and the kernels.
#include <cstdio>

#include <llvm/Support/raw_ostream.h>

#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {

llvm::cl::SubCommand& prewarm_command() {
  static llvm::cl::SubCommand command("prewarm", "Compile kernels into the cache (no GPU needed)");
  return command;
}
llvm::cl::SubCommand& cache_command() {
  static llvm::cl::SubCommand command("cache", "Inspect or maintain the cache: list | stats | verify | clear | extract KEY FILE");
  return command;
}
llvm::cl::SubCommand& doctor_command() {
  static llvm::cl::SubCommand command("doctor", "Driver, devices, NVRTC version and cache directory");
  return command;
}
llvm::cl::SubCommand& check_command() {
  static llvm::cl::SubCommand command("check", "Run a kernel on random data on the GPU against the float64 reference");
  return command;
}
llvm::cl::SubCommand& bench_command() {
  static llvm::cl::SubCommand command("bench", "Time kernels on the GPU (idle-stream launch and CUDA-graph replay)");
  return command;
}

llvm::cl::SubCommand& tune_command() {
  static llvm::cl::SubCommand command("tune", "Time candidate tiles for a spec on the GPU and record the winner in the cache");
  return command;
}

llvm::cl::SubCommand& source_command() {
  static llvm::cl::SubCommand command("source", "Print the CUDA source a spec renders to and its NVRTC options (no GPU needed)");
  return command;
}

llvm::cl::opt<std::string>& cache_dir_option() {
  static llvm::cl::opt<std::string> option("cache-dir", llvm::cl::desc("Cache directory (default: $FLASHJIT_CACHE_DIR, $XDG_CACHE_HOME/flashjit, ~/.cache/flashjit)"),
                                    llvm::cl::value_desc("DIR"), llvm::cl::sub(prewarm_command()), llvm::cl::sub(cache_command()),
                                    llvm::cl::sub(doctor_command()), llvm::cl::sub(check_command()), llvm::cl::sub(bench_command()),
                                    llvm::cl::sub(tune_command()));
  return option;
}
llvm::cl::opt<bool>& json_option() {
  static llvm::cl::opt<bool> option("json", llvm::cl::desc("Machine-readable output"), llvm::cl::sub(prewarm_command()),
                         llvm::cl::sub(cache_command()), llvm::cl::sub(doctor_command()), llvm::cl::sub(check_command()),
                         llvm::cl::sub(bench_command()), llvm::cl::sub(tune_command()));
  return option;
}

int fail(const Error& error) {
  std::fprintf(stderr, "flashjit: %s\n", error.message.c_str());
  if (!error.log.empty()) std::fprintf(stderr, "%s\n", error.log.c_str());
  return error.code == ErrorCode::kInvalidSpec || error.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "flashjit: %s (see flashjit --help)\n", message.c_str());
  return kExitUsage;
}

EngineOptions engine_options() {
  EngineOptions o;
  if (!cache_dir_option().empty()) o.cache_dir = cache_dir_option().getValue();
  return o;
}

}  // namespace flashjit::tool

int main(int argc, char** argv) {
  using namespace flashjit::tool;
  cache_dir_option();  // register the shared options before parsing
  json_option();
  std::string errors;
  llvm::raw_string_ostream err(errors);
  // NOTES: with an error stream, ParseCommandLineOptions reports instead of exiting, so a usage
  // error exits 2 as documented.
  if (!llvm::cl::ParseCommandLineOptions(argc, argv, "flashjit: FlashAttention-3-style kernels for Hopper, compiled at run time\n", &err)) {
    err.flush();
    std::fprintf(stderr, "%s", errors.c_str());
    return kExitUsage;
  }
  if (prewarm_command()) return run_prewarm();
  if (cache_command()) return run_cache();
  if (doctor_command()) return run_doctor();
  if (check_command()) return run_check();
  if (bench_command()) return run_bench();
  if (tune_command()) return run_tune();
  if (source_command()) return run_source();
  return usage_error("no command given; commands: prewarm, cache, doctor, check, bench, tune, source");
}
