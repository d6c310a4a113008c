// The cache key: a content address for one compiled kernel.
//
// key = hex(SHA-256(preimage)), where the preimage is, in this order, each item length-prefixed:
//   kCacheSchema, FLASHJIT_VERSION_STRING, source, option count, each option (in order),
//   nvrtc_version, arch.
// Invariants: same inputs give the same key in any process on any machine; the key never depends
// on absolute paths, timestamps, the cache directory or the environment; changing any input
// (including the order of options) changes the key.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace flashjit {

// Bump when anything the key does not see changes what a compile produces (the embedded headers
// are covered by the rendered source; the on-disk layout has its own version in entry_format).
inline constexpr std::string_view kCacheSchema = "flashjit-cache-v1";

struct CacheKeyInputs {
  std::string source;                // rendered CUDA source (headers embedded, so covered here)
  std::vector<std::string> options;  // normalised NVRTC options, order significant
  std::string nvrtc_version;         // e.g. "13.0" (major.minor, plus build when known)
  std::string arch;                  // e.g. "sm_90a"
};

// 64 lowercase hex characters.
std::string compute_cache_key(const CacheKeyInputs& inputs);

// True for exactly 64 lowercase hex characters: the only strings accepted as keys (keys name files).
bool is_cache_key(std::string_view text);

// True for 1..64 lowercase hex characters (a key or a prefix of one).
bool is_cache_key_prefix(std::string_view text);

}  // namespace flashjit
