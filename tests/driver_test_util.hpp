// Helpers for the driver tests: re-running this test binary as a child process with extra
// environment variables (for the once-per-process driver table and the exit-time paths).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "support/child_roles.hpp"

namespace flashjit::testing {

struct ChildRun {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string output;  // stdout and stderr together
};

inline std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs this binary as child role `role` with `env` added to the environment.
inline ChildRun run_child_role(const std::string& role, const std::vector<std::pair<std::string, std::string>>& env) {
  std::string command = "env";
  for (const auto& [name, value] : env) command += " " + name + "=" + shell_quote(value);
  command += " FLASHJIT_TEST_CHILD=" + role + " " + shell_quote(self_executable_path()) + " 2>&1";
  ChildRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return run;
}

}  // namespace flashjit::testing
