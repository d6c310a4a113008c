#include <gtest/gtest.h>

#include <set>

#include "cache/cache_key.hpp"

namespace flashjit {
namespace {

CacheKeyInputs base_inputs() {
  return {.source = "extern \"C\" __global__ void k() {}\n",
          .options = {"-arch=sm_90a", "-std=c++17", "--ptxas-options=-v"},
          .nvrtc_version = "13.0",
          .arch = "sm_90a"};
}

TEST(CacheKey, DeterministicAndHex) {
  const std::string key = compute_cache_key(base_inputs());
  EXPECT_TRUE(is_cache_key(key)) << key;
  EXPECT_EQ(compute_cache_key(base_inputs()), key);

  // Equal inputs built separately (different buffers, built piecewise) give the same key.
  CacheKeyInputs built;
  built.source = std::string("extern \"C\" __global__ ") + "void k() {}\n";
  for (const char* option : {"-arch=sm_90a", "-std=c++17", "--ptxas-options=-v"}) built.options.emplace_back(option);
  built.nvrtc_version = std::string("13.") + "0";
  built.arch = std::string("sm_") + "90a";
  EXPECT_EQ(compute_cache_key(built), key);
}

TEST(CacheKey, ChangesWithEachInput) {
  const CacheKeyInputs base = base_inputs();
  std::vector<CacheKeyInputs> variants;
  auto vary = [&](auto change) {
    CacheKeyInputs v = base;
    change(v);
    variants.push_back(v);
  };
  vary([](CacheKeyInputs& v) { v.source += " "; });
  vary([](CacheKeyInputs& v) { v.source[0] = 'E'; });
  vary([](CacheKeyInputs& v) { v.source.clear(); });
  vary([](CacheKeyInputs& v) { v.options[0] = "-arch=sm_90"; });
  vary([](CacheKeyInputs& v) { v.options[1] = "-std=c++20"; });
  vary([](CacheKeyInputs& v) { v.options[2] = "--ptxas-options=-v,-O2"; });
  vary([](CacheKeyInputs& v) { v.options.push_back("-lineinfo"); });
  vary([](CacheKeyInputs& v) { v.options.pop_back(); });
  vary([](CacheKeyInputs& v) { std::swap(v.options[0], v.options[1]); });  // order matters
  vary([](CacheKeyInputs& v) { v.options.push_back(""); });                // an empty option counts
  vary([](CacheKeyInputs& v) { v.nvrtc_version = "13.1"; });
  vary([](CacheKeyInputs& v) { v.nvrtc_version = ""; });
  vary([](CacheKeyInputs& v) { v.arch = "sm_90"; });
  vary([](CacheKeyInputs& v) { v.arch = "sm_100a"; });

  std::set<std::string> keys = {compute_cache_key(base)};
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_TRUE(keys.insert(compute_cache_key(variants[i])).second) << "variant " << i << " collides";
  }
}

TEST(CacheKey, LengthPrefixesPreventConcatenationCollisions) {
  auto key_with = [](std::vector<std::string> options, std::string source = "s", std::string version = "13.0",
                     std::string arch = "sm_90a") {
    return compute_cache_key({.source = source, .options = options, .nvrtc_version = version, .arch = arch});
  };
  EXPECT_NE(key_with({"ab", "c"}), key_with({"a", "bc"}));
  EXPECT_NE(key_with({"abc"}), key_with({"ab", "c"}));
  EXPECT_NE(key_with({}), key_with({""}));
  EXPECT_NE(key_with({"", ""}), key_with({""}));
  // Across field boundaries too.
  EXPECT_NE(key_with({}, "ab", "c"), key_with({}, "a", "bc"));
  EXPECT_NE(key_with({}, "s", "13.0s", "m_90a"), key_with({}, "s", "13.0", "sm_90a"));
  EXPECT_NE(key_with({"x"}, ""), key_with({}, "x"));
}

TEST(CacheKey, OnlyLowercaseHexOf64IsAKey) {
  const std::string key = compute_cache_key(base_inputs());
  EXPECT_TRUE(is_cache_key(key));
  EXPECT_FALSE(is_cache_key(key.substr(1)));
  EXPECT_FALSE(is_cache_key(key + "0"));
  std::string upper = key;
  for (char& c : upper) c = char(std::toupper(c));
  EXPECT_FALSE(is_cache_key(upper == key ? "X" + key.substr(1) : upper));
  EXPECT_FALSE(is_cache_key("../" + key.substr(3)));
  EXPECT_FALSE(is_cache_key(""));
  EXPECT_TRUE(is_cache_key_prefix("a"));
  EXPECT_TRUE(is_cache_key_prefix(key));
  EXPECT_FALSE(is_cache_key_prefix(""));
  EXPECT_FALSE(is_cache_key_prefix("g"));
  EXPECT_FALSE(is_cache_key_prefix(key + "0"));
}

}  // namespace
}  // namespace flashjit
