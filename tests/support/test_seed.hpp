// The seed of a randomised test: FLASHJIT_TEST_SEED when set (a decimal number, to replay a run;
// anything else fails the test naming the variable), else a fresh one; printed either way, so a
// failure can be replayed.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace flashjit::testing {

inline uint64_t test_seed() {
  uint64_t seed = 0;
  if (const char* text = std::getenv("FLASHJIT_TEST_SEED"); text != nullptr && *text != '\0') {
    const char* end = text + std::strlen(text);
    const auto [stop, ec] = std::from_chars(text, end, seed);
    if (ec != std::errc() || stop != end) {
      ADD_FAILURE() << "FLASHJIT_TEST_SEED: '" << text << "' is not allowed; allowed: a decimal number below 2^64";
    }
  } else {
    std::random_device device;
    seed = (uint64_t(device()) << 32) ^ device();
  }
  std::printf("random seed %llu (FLASHJIT_TEST_SEED=%llu replays it)\n", (unsigned long long)seed, (unsigned long long)seed);
  return seed;
}

// A generator seeded by test_seed().
inline std::mt19937_64 fresh_rng() { return std::mt19937_64(test_seed()); }

}  // namespace flashjit::testing
