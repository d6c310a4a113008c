// The C API's launch-parameter cache (src/api/params_cache.hpp): a hit returns what was stored for
// that key, and a full window gives up its least recently used entry, never one just used.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "api/params_cache.hpp"

namespace flashjit::api {
namespace {

using Cache = ParamsCache;

ParamsKey key_for(uint64_t i) {
  ParamsKey key;
  key.q = 0x100000000ull + i * 4096;
  key.batch = 1;
  return key;
}

KernelParams params_for(uint64_t i) {
  KernelParams params{};
  params.batch = int(i) + 1;  // tells the entries apart
  return params;
}

// Keys whose window starts at the same slot: they compete for those kWindow slots alone.
std::vector<ParamsKey> keys_at_one_slot(size_t count) {
  std::vector<ParamsKey> out;
  const uint64_t home = key_for(0).hash() % Cache::kSlots;
  for (uint64_t i = 0; out.size() < count; ++i) {
    if (key_for(i).hash() % Cache::kSlots == home) out.push_back(key_for(i));
  }
  return out;
}

int stored_batch(Cache& cache, const ParamsKey& key) {
  KernelParams out{};
  return cache.find(key, &out) ? out.batch : 0;
}

TEST(ParamsCache, HitsReturnWhatWasStoredForEachKey) {
  auto cache = std::make_unique<Cache>();
  for (uint64_t i = 0; i < 64; ++i) cache->store(key_for(i), params_for(i));
  int hits = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    const int batch = stored_batch(*cache, key_for(i));
    if (batch != 0) {
      ++hits;
      EXPECT_EQ(batch, int(i) + 1) << "key " << i << " returned another key's parameters";
    }
  }
  EXPECT_EQ(hits, 64) << "64 keys in 128 slots: none evicted";
  EXPECT_EQ(stored_batch(*cache, key_for(1000)), 0) << "a key never stored misses";
}

// The kernel's Params carry the masks and score modifiers: arguments that differ only there have
// keys of their own.
TEST(ParamsCache, KeysTellFeatureValuesApart) {
  AttentionArgs plain;
  plain.batch = 1;
  const ParamsKey base = ParamsKey::of(plain);
  void (*changes[])(FeatureInputs&) = {
      [](FeatureInputs& f) { f.window_left = 127; },    [](FeatureInputs& f) { f.window_right = 0; },
      [](FeatureInputs& f) { f.chunk = 8192; },         [](FeatureInputs& f) { f.softcap = 50.0f; },
      [](FeatureInputs& f) { f.sinks = 0x1000; },       [](FeatureInputs& f) { f.sinks_bf16 = true; },
      [](FeatureInputs& f) { f.alibi_slopes = 0x1000; }, [](FeatureInputs& f) { f.alibi_batch_stride = 32; },
  };
  for (size_t i = 0; i < std::size(changes); ++i) {
    AttentionArgs changed = plain;
    changes[i](changed.features);
    EXPECT_FALSE(ParamsKey::of(changed) == base) << "feature change " << i;
  }
}

TEST(ParamsCache, AFullWindowGivesUpItsLeastRecentlyUsedEntry) {
  auto cache = std::make_unique<Cache>();
  const std::vector<ParamsKey> keys = keys_at_one_slot(Cache::kWindow + 2);
  for (size_t i = 0; i < Cache::kWindow; ++i) cache->store(keys[i], params_for(i));
  for (size_t i = 0; i < Cache::kWindow; ++i) ASSERT_EQ(stored_batch(*cache, keys[i]), int(i) + 1) << i;
  // Uses in the order 1, 2, ..., kWindow - 1, then 0: key 1 is now the least recently used.
  for (size_t i = 1; i < Cache::kWindow; ++i) ASSERT_NE(stored_batch(*cache, keys[i]), 0);
  ASSERT_NE(stored_batch(*cache, keys[0]), 0);
  cache->store(keys[Cache::kWindow], params_for(Cache::kWindow));
  EXPECT_EQ(stored_batch(*cache, keys[1]), 0) << "the least recently used entry goes";
  EXPECT_EQ(stored_batch(*cache, keys[0]), 1) << "the first stored but recently used entry stays";
  EXPECT_EQ(stored_batch(*cache, keys[Cache::kWindow]), int(Cache::kWindow) + 1);
  for (size_t i = 2; i < Cache::kWindow; ++i) EXPECT_EQ(stored_batch(*cache, keys[i]), int(i) + 1) << i;
  // Storing a key again replaces its own entry, not another one.
  cache->store(keys[0], params_for(77));
  EXPECT_EQ(stored_batch(*cache, keys[0]), 78);
  for (size_t i = 2; i <= Cache::kWindow; ++i) EXPECT_NE(stored_batch(*cache, keys[i]), 0) << i;
}

}  // namespace
}  // namespace flashjit::api
