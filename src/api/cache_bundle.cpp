#include "api/cache_bundle.hpp"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include "cache/cache_key.hpp"

namespace flashjit::api {
namespace {

constexpr size_t kChecksumBytes = 32;
constexpr size_t kHeaderBytes = 8 + 4 + 4;

std::string sha256(std::string_view data) {
  const auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(llvm::StringRef(data.data(), data.size())));
  return std::string(digest.begin(), digest.end());
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

Error malformed(const std::string& what) {
  return Error::make(ErrorCode::kCacheIo, "malformed flashjit cache bundle: " + what);
}

// Reads fields front to back; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - at_; }
  bool u32(uint32_t* v) { return integer(4, v); }
  bool u64(uint64_t* v) { return integer(8, v); }
  bool take(uint64_t n, std::string_view* out) {
    if (n > left()) return false;
    *out = bytes_.substr(at_, size_t(n));
    at_ += size_t(n);
    return true;
  }

 private:
  template <class T>
  bool integer(size_t n, T* v) {
    if (n > left()) return false;
    *v = 0;
    for (size_t i = 0; i < n; ++i) *v |= T(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    at_ += n;
    return true;
  }
  std::string_view bytes_;
  size_t at_ = 0;
};

Result<BundleEntry> read_entry(Reader& r, uint32_t index) {
  const std::string which = "entry " + std::to_string(index);
  uint32_t key_size = 0;
  std::string_view key, bytes;
  uint64_t entry_size = 0;
  if (!r.u32(&key_size) || key_size != 64 || !r.take(key_size, &key)) return malformed(which + ": bad key length");
  if (!is_cache_key(key)) return malformed(which + ": key is not 64 lowercase hex characters");
  if (!r.u64(&entry_size) || !r.take(entry_size, &bytes)) return malformed(which + ": entry runs past the end");
  return BundleEntry{std::string(key), std::string(bytes)};
}

}  // namespace

std::string encode_bundle(const std::vector<BundleEntry>& entries) {
  std::string out(kBundleMagic);
  put_u32(out, kBundleFormatVersion);
  put_u32(out, uint32_t(entries.size()));
  for (const BundleEntry& e : entries) {
    put_u32(out, uint32_t(e.key.size()));
    out += e.key;
    put_u64(out, e.bytes.size());
    out += e.bytes;
  }
  out += sha256(out);
  return out;
}

Result<std::vector<BundleEntry>> decode_bundle(std::string_view bytes) {
  // 1. What it claims to be: magic, then format version (so a newer format is named as such).
  if (bytes.size() < kBundleMagic.size() || bytes.substr(0, kBundleMagic.size()) != kBundleMagic) {
    return Error::make(ErrorCode::kCacheIo, "not a flashjit cache bundle (bad magic)");
  }
  if (bytes.size() < kHeaderBytes + kChecksumBytes) return malformed("truncated (" + std::to_string(bytes.size()) + " bytes)");
  Reader header(bytes.substr(kBundleMagic.size()));
  uint32_t version = 0, count = 0;
  header.u32(&version);
  header.u32(&count);
  if (version != kBundleFormatVersion) {
    return malformed("format version " + std::to_string(version) + "; this flashjit reads version " +
                     std::to_string(kBundleFormatVersion));
  }
  // 2. Whole-file checksum: a flipped bit or a cut anywhere stops here.
  const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  if (sha256(body) != bytes.substr(body.size())) return malformed("checksum mismatch (corrupt or truncated)");
  // 3. The entries, exactly filling the body.
  if (count == 0 || count > kMaxBundleEntries) {
    return malformed("entry count " + std::to_string(count) + " is out of range 1.." + std::to_string(kMaxBundleEntries));
  }
  Reader r(body.substr(kHeaderBytes));
  std::vector<BundleEntry> entries;
  for (uint32_t i = 0; i < count; ++i) {
    auto entry = read_entry(r, i);
    if (!entry) return entry.take_error();
    entries.push_back(std::move(*entry));
  }
  if (r.left() != 0) return malformed(std::to_string(r.left()) + " bytes after the last entry");
  return entries;
}

}  // namespace flashjit::api
