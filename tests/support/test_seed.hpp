// The seed of a randomised CPU test: FLASHJIT_TEST_SEED when set (to repeat a run), else a fresh
// one; printed either way, so a failure can be repeated.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace flashjit::testing {

inline uint64_t test_seed() {
  uint64_t seed;
  if (const char* text = std::getenv("FLASHJIT_TEST_SEED"); text != nullptr && *text != '\0') {
    seed = std::strtoull(text, nullptr, 10);
  } else {
    std::random_device device;
    seed = (uint64_t(device()) << 32) ^ device();
  }
  std::printf("random seed %llu (FLASHJIT_TEST_SEED=%llu repeats it)\n", (unsigned long long)seed, (unsigned long long)seed);
  return seed;
}

}  // namespace flashjit::testing
