// The `flashjit` tool: one subcommand per file, sharing the options declared here.
// Exit status: 0 success, 2 bad usage or an invalid spec (the message names the field), 1 other failures.
#pragma once
#include <optional>
#include <string>

#include <llvm/Support/CommandLine.h>

#include "common/status.hpp"
#include "runtime/engine.hpp"

namespace flashjit::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// NOTES: functions, not globals: options in other files register with a subcommand during static
// initialisation, whose order across files is unspecified.
llvm::cl::SubCommand& prewarm_command();
llvm::cl::SubCommand& cache_command();
llvm::cl::SubCommand& doctor_command();
llvm::cl::SubCommand& check_command();
llvm::cl::SubCommand& bench_command();
llvm::cl::SubCommand& tune_command();
llvm::cl::SubCommand& source_command();

// Every flashjit option is in this category; options outside it (LLVM's own) are hidden.
llvm::cl::OptionCategory& tool_category();

// Shared by several subcommands.
llvm::cl::opt<std::string>& cache_dir_option();
llvm::cl::opt<bool>& json_option();

int run_prewarm();
int run_cache();
int run_doctor();
int run_check();
int run_bench();
int run_tune();
int run_source();

// Sets prewarm --defaults's description to the specs it builds (computed, so it stays true).
void describe_prewarm_defaults();

// Why a command that needs --spec got none; the same wording for every command (LLVM's own,
// "must be specified at least once!", named no command).
int missing_spec(const char* command);

// Prints an error ("flashjit: <message>") and returns the exit status its code calls for; with
// --json the error is also a JSON object on stdout ({"error", "field", "exit_code"}).
int fail(const Error& error);
int usage_error(const std::string& message);

// --cache-dir's value, or nullopt when it was not given (for resolve_cache_dir).
std::optional<std::string> cache_dir_flag();

// Engine options from the shared flags.
EngineOptions engine_options();

}  // namespace flashjit::tool
