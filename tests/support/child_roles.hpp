// Roles a test binary can play as a child process, chosen by the FLASHJIT_TEST_CHILD variable.
// Each test file that needs one registers it with FLASHJIT_REGISTER_CHILD_ROLE.
#pragma once
#include <functional>
#include <string>

namespace flashjit::testing {

// Returns true (and the exit code) when this process was started as a child role.
bool run_child_role_if_requested(int argc, char** argv, int* exit_code);

// Registers a role: fn(argc, argv) -> exit code.
bool register_child_role(const std::string& name, std::function<int(int, char**)> fn);

// Path of the running test binary (for re-executing it).
std::string self_executable_path();

}  // namespace flashjit::testing

#define FLASHJIT_REGISTER_CHILD_ROLE(name, fn) \
  static const bool flashjit_child_role_##name = ::flashjit::testing::register_child_role(#name, fn)
