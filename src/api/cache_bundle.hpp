// A cache bundle: several cache entries in one file, so an engine can ship its kernels with its
// model (flashjit_cache_export / flashjit_cache_import). Pure functions from entries to bytes and
// back; the files and the cache are api_cache.cpp's business.
//
// Layout (integers little endian):
//   magic           8 bytes  kBundleMagic
//   format version  u32      kBundleFormatVersion
//   entry count     u32      1..kMaxBundleEntries
//   per entry:      u32 key length (64), key (lowercase hex),
//                   u64 entry length, entry bytes (entry_format.hpp's encode_entry, itself checksummed)
//   checksum        32 bytes SHA-256 over every byte before it
// Invariant: decode_bundle accepts exactly what encode_bundle produced; anything else (truncated,
// one bit flipped, trailing bytes, another format version) is an error saying what is wrong. The
// entries themselves are checked by decode_entry when imported.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace flashjit::api {

inline constexpr std::string_view kBundleMagic{"FJBUNDLE", 8};
inline constexpr std::uint32_t kBundleFormatVersion = 1;
inline constexpr std::uint32_t kMaxBundleEntries = 65536;

struct BundleEntry {
  std::string key;    // the cache key
  std::string bytes;  // encode_entry(key, kernel)
};

std::string encode_bundle(const std::vector<BundleEntry>& entries);

// Errors are kCacheIo and start with "not a flashjit cache bundle" or say what is malformed.
Result<std::vector<BundleEntry>> decode_bundle(std::string_view bytes);

}  // namespace flashjit::api
