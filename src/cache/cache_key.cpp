#include "cache/cache_key.hpp"

#include <cstdint>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

namespace flashjit {
namespace {

// NOTES: every item carries its length (8 bytes, little endian) in front, so no two different
// input lists concatenate to the same preimage ({"ab","c"} vs {"a","bc"}).
void append_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(char((value >> (8 * i)) & 0xff));
}

void append_item(std::string& out, std::string_view item) {
  append_u64(out, item.size());
  out.append(item);
}

std::string build_preimage(const CacheKeyInputs& inputs) {
  std::string preimage;
  preimage.reserve(inputs.source.size() + 256);
  append_item(preimage, kCacheSchema);
  append_item(preimage, FLASHJIT_VERSION_STRING);
  append_item(preimage, inputs.source);
  append_u64(preimage, inputs.options.size());
  for (const std::string& option : inputs.options) append_item(preimage, option);
  append_item(preimage, inputs.nvrtc_version);
  append_item(preimage, inputs.arch);
  return preimage;
}

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string compute_cache_key(const CacheKeyInputs& inputs) {
  const std::string preimage = build_preimage(inputs);
  const auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(preimage));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

bool is_cache_key_prefix(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  for (char c : text) {
    if (!is_lower_hex(c)) return false;
  }
  return true;
}

bool is_cache_key(std::string_view text) { return text.size() == 64 && is_cache_key_prefix(text); }

}  // namespace flashjit
