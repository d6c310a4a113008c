#include "support/child_roles.hpp"

#include <cstdlib>
#include <map>
#include <unistd.h>

namespace flashjit::testing {
namespace {
std::map<std::string, std::function<int(int, char**)>>& roles() {
  static std::map<std::string, std::function<int(int, char**)>> table;
  return table;
}
}  // namespace

bool register_child_role(const std::string& name, std::function<int(int, char**)> fn) {
  roles()[name] = std::move(fn);
  return true;
}

bool run_child_role_if_requested(int argc, char** argv, int* exit_code) {
  const char* role = std::getenv("FLASHJIT_TEST_CHILD");
  if (!role || !*role) return false;
  auto it = roles().find(role);
  *exit_code = it == roles().end() ? 97 : it->second(argc, argv);
  return true;
}

std::string self_executable_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

}  // namespace flashjit::testing
