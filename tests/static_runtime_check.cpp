// The static C++ runtime as libflashjit.so and the tool link it (-static-libstdc++ -static-libgcc with
// src/link's glibc functions, FLASHJIT_STATIC_RUNTIME_SOURCES): exceptions unwind through frames of
// this binary and are caught, and std::random_device draws (by arc4random where libstdc++ has that
// source). Prints PASS or what failed; exit 0 only when all held.
#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

namespace {

[[gnu::noinline]] int throw_at_depth(int depth) {
  if (depth == 0) throw std::runtime_error("thrown at depth 0");
  return throw_at_depth(depth - 1) + 1;  // not a tail call: every frame stays on the stack
}

bool exceptions_unwind() {
  for (int depth : {0, 1, 8, 64}) {
    try {
      throw_at_depth(depth);
      std::printf("FAIL: nothing thrown at depth %d\n", depth);
      return false;
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()) != "thrown at depth 0") {
        std::printf("FAIL: caught '%s' at depth %d\n", e.what(), depth);
        return false;
      }
    }
  }
  std::printf("ok: exceptions thrown through 0, 1, 8 and 64 frames are caught\n");
  return true;
}

bool random_device_draws(const char* token) {
  std::set<unsigned> seen;
  try {
    std::random_device device = token ? std::random_device(token) : std::random_device();
    for (int i = 0; i < 64; ++i) seen.insert(device());
  } catch (const std::exception& e) {
    // A source this libstdc++ was built without (e.g. "arc4random" before GCC 12) is not a failure.
    std::printf("ok: random_device(%s) is not offered here (%s)\n", token ? token : "default", e.what());
    return token != nullptr;
  }
  if (seen.size() < 60) {
    std::printf("FAIL: random_device(%s) gave %zu distinct values of 64\n", token ? token : "default", seen.size());
    return false;
  }
  std::printf("ok: random_device(%s) gave %zu distinct values of 64\n", token ? token : "default", seen.size());
  return true;
}

}  // namespace

int main() {
  bool ok = exceptions_unwind();
  ok = random_device_draws(nullptr) && ok;
  ok = random_device_draws("arc4random") && ok;
  std::printf(ok ? "PASS\n" : "FAIL\n");
  return ok ? 0 : 1;
}
