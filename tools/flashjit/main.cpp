// flashjit: prewarm the kernel cache, inspect it, check the environment and the kernels.
#include <cstdio>
#include <string_view>
#include <vector>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "cache/cache_key.hpp"
#include "cache/entry_format.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {

llvm::cl::OptionCategory& tool_category() {
  static llvm::cl::OptionCategory category("flashjit options");
  return category;
}

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
                                    llvm::cl::value_desc("DIR"), llvm::cl::cat(tool_category()), llvm::cl::sub(prewarm_command()), llvm::cl::sub(cache_command()),
                                    llvm::cl::sub(doctor_command()), llvm::cl::sub(check_command()), llvm::cl::sub(bench_command()),
                                    llvm::cl::sub(tune_command()), llvm::cl::sub(source_command()));
  return option;
}
llvm::cl::opt<bool>& json_option() {
  static llvm::cl::opt<bool> option("json", llvm::cl::desc("Machine-readable output"), llvm::cl::cat(tool_category()), llvm::cl::sub(prewarm_command()),
                         llvm::cl::sub(cache_command()), llvm::cl::sub(doctor_command()), llvm::cl::sub(check_command()),
                         llvm::cl::sub(bench_command()), llvm::cl::sub(tune_command()), llvm::cl::sub(source_command()));
  return option;
}

namespace {

// With --json, an error is also a JSON object on stdout, where a script reads the output:
// {"error": message, "field": the field it names or "", "exit_code": the exit status}.
int report_error(const std::string& message, const std::string& field, int exit_code, bool as_json) {
  if (as_json) {
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                               {"error", message}, {"field", field}, {"exit_code", exit_code}}))
                 << "\n";
    llvm::outs().flush();
  }
  return exit_code;
}

}  // namespace

int fail(const Error& error) {
  std::fprintf(stderr, "flashjit: %s\n", error.message.c_str());
  if (!error.log.empty()) std::fprintf(stderr, "%s\n", error.log.c_str());
  const int exit_code = error.code == ErrorCode::kInvalidSpec || error.code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
  return report_error(error.message, error.field, exit_code, json_option());
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "flashjit: %s (see flashjit --help)\n", message.c_str());
  return report_error(message, "", kExitUsage, json_option());
}

int missing_spec(const char* command) { return usage_error(std::string(command) + " needs --spec SPEC"); }

std::optional<std::string> cache_dir_flag() {
  if (cache_dir_option().empty()) return std::nullopt;
  return cache_dir_option().getValue();
}

EngineOptions engine_options() {
  EngineOptions o;
  if (!cache_dir_option().empty()) o.cache_dir = cache_dir_option().getValue();
  return o;
}

namespace {

// --version: flashjit's own versions, not LLVM's (the default printer names the LLVM build).
void print_version(llvm::raw_ostream& out) {
  out << "flashjit " << FLASHJIT_VERSION_STRING << "\n"
      << "  NVRTC " << nvrtc_version() << ", target " << kTargetArch << "\n"
      << "  cache entry format " << kEntryFormatVersion << ", key schema " << kCacheSchema << "\n";
}

// NOTES: libLLVMSupport registers options of its own (statistics, debug counters, crash
// diagnostics, colours); ReallyHidden keeps them out of every help, --help-hidden included. Of
// LLVM's generic options, help and version stay visible.
void hide_llvm_options() {
  llvm::cl::HideUnrelatedOptions(tool_category(), *llvm::cl::TopLevelSubCommand);
  for (llvm::cl::SubCommand* sub : llvm::cl::getRegisteredSubcommands()) {
    llvm::cl::HideUnrelatedOptions(tool_category(), *sub);
    auto& options = llvm::cl::getRegisteredOptions(*sub);
    for (const char* name : {"help-list-hidden", "print-options", "print-all-options"}) {
      if (auto it = options.find(name); it != options.end()) it->second->setHiddenFlag(llvm::cl::ReallyHidden);
    }
  }
}

// True when the command line asks for --json, read before the options are parsed (a parse error
// is reported before json_option() holds anything).
bool json_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "--json" || a == "-json" || a == "--json=true" || a == "--json=1") return true;
  }
  return false;
}

// argv with --help-hidden read as --help (and --help-list-hidden as --help-list). NOTES: flashjit
// hides none of its own options, so both show the same; LLVM's --help-hidden would also list every
// option category, LLVM's own included, each saying "This option category has no options".
std::vector<char*> without_hidden_help(int argc, char** argv) {
  static char help[] = "--help", help_list[] = "--help-list";
  std::vector<char*> args(argv, argv + argc);
  for (char*& arg : args) {
    const std::string_view a(arg);
    if (a == "--help-hidden" || a == "-help-hidden") arg = help;
    if (a == "--help-list-hidden" || a == "-help-list-hidden") arg = help_list;
  }
  return args;
}

}  // namespace

}  // namespace flashjit::tool

int main(int argc, char** argv) {
  using namespace flashjit::tool;
  cache_dir_option();  // register the shared options before parsing
  json_option();
  hide_llvm_options();
  llvm::cl::SetVersionPrinter(print_version);
  std::string errors;
  llvm::raw_string_ostream err(errors);
  // NOTES: with an error stream, ParseCommandLineOptions reports instead of exiting, so a usage
  // error exits 2 as documented.
  std::vector<char*> args = without_hidden_help(argc, argv);
  describe_prewarm_defaults();
  if (!llvm::cl::ParseCommandLineOptions(int(args.size()), args.data(), "flashjit: FlashAttention-3-style kernels for Hopper, compiled at run time\n", &err)) {
    err.flush();
    std::fprintf(stderr, "%s", errors.c_str());
    std::string first_line = errors.substr(0, errors.find('\n'));
    if (first_line.rfind("flashjit: ", 0) == 0) first_line.erase(0, 10);
    return report_error(first_line, "", kExitUsage, json_asked(argc, argv));
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
