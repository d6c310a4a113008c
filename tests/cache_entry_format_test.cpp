#include <gtest/gtest.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>
#include <random>

#include "cache/entry_format.hpp"
#include "cache_test_util.hpp"

namespace flashjit {
namespace {

using cache_test::fake_kernel;
using cache_test::key_for;

// Recomputes the trailing checksum, so a test can forge an entry that is consistent but wrong.
std::string reseal(std::string bytes) {
  const std::size_t body = bytes.size() - kEntryChecksumBytes;
  const auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(llvm::StringRef(bytes.data(), body)));
  bytes.replace(body, kEntryChecksumBytes, reinterpret_cast<const char*>(digest.data()), digest.size());
  return bytes;
}

void expect_rejected(const std::string& bytes, const std::string& key, const std::string& what,
                     const std::string& needle = {}) {
  auto decoded = decode_entry(bytes, key);
  ASSERT_FALSE(decoded.ok()) << what;
  EXPECT_EQ(decoded.error().code, ErrorCode::kCacheIo) << what;
  if (!needle.empty()) {
    EXPECT_NE(decoded.error().message.find(needle), std::string::npos) << what << ": " << decoded.error().message;
  }
}

TEST(CacheEntryFormat, RoundTrip) {
  const std::string key = key_for("rt");
  CompiledKernel kernel = fake_kernel("rt", 1000);
  for (int i = 0; i < 256; ++i) kernel.cubin[std::size_t(i)] = char(i);  // every byte value, NULs included
  kernel.report.warnings.push_back("second warning");
  kernel.compile_ms = 0.1 + 1e-9;

  const std::string bytes = encode_entry(key, kernel);
  EXPECT_EQ(bytes.substr(0, kEntryMagic.size()), kEntryMagic);
  auto decoded = decode_entry(bytes, key);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(*decoded, kernel);

  // Empty texts and no warnings are valid too; encoding is deterministic.
  CompiledKernel bare;
  bare.cubin = "x";
  auto bare_decoded = decode_entry(encode_entry(key, bare), key);
  ASSERT_TRUE(bare_decoded.ok()) << bare_decoded.error().message;
  EXPECT_EQ(*bare_decoded, bare);
  EXPECT_EQ(encode_entry(key, kernel), bytes);
}

// Entries written before the NVRTC version was recorded (format 1: no such field) still decode,
// with no version: the key schema is the same, so they hold the same kernels.
TEST(CacheEntryFormat, DecodesFormatOneEntriesWithoutAnNvrtcVersion) {
  const std::string key = key_for("v1");
  CompiledKernel kernel = fake_kernel("v1", 500);
  kernel.nvrtc_version.clear();
  std::string bytes = encode_entry(key, kernel);
  // Format 1's layout: the same fields without the NVRTC version's (empty) string.
  const std::size_t nvrtc_at = kEntryVersionOffset + 4 + (4 + key.size()) + (4 + kernel.spec_text.size()) + (4 + kernel.kernel_name.size());
  ASSERT_EQ(bytes.substr(nvrtc_at, 4), std::string(4, '\0'));
  bytes.erase(nvrtc_at, 4);
  bytes[kEntryVersionOffset] = char(kEntryFormatVersionWithoutNvrtc);
  auto decoded = decode_entry(reseal(bytes), key);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(*decoded, kernel);
  // And format 2 keeps the version.
  auto current = decode_entry(encode_entry(key, fake_kernel("v1", 500)), key);
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->nvrtc_version, "13.0");
}

TEST(CacheEntryFormat, RejectsEveryTruncation) {
  const std::string key = key_for("trunc");
  const std::string small = encode_entry(key, fake_kernel("trunc", 64));
  for (std::size_t n = 0; n < small.size(); ++n) expect_rejected(small.substr(0, n), key, "small truncated to " + std::to_string(n));

  const std::string big = encode_entry(key, fake_kernel("trunc", 64 * 1024));
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(8), std::size_t(12), std::size_t(100),
                        big.size() / 2, big.size() - kEntryChecksumBytes - 1, big.size() - kEntryChecksumBytes, big.size() - 1}) {
    expect_rejected(big.substr(0, n), key, "big truncated to " + std::to_string(n));
  }
}

TEST(CacheEntryFormat, RejectsZeroedFiles) {
  const std::string key = key_for("zero");
  const std::string bytes = encode_entry(key, fake_kernel("zero", 4096));
  expect_rejected(std::string(bytes.size(), '\0'), key, "all zero", "magic");
  std::string tail_zeroed = bytes;
  std::fill(tail_zeroed.begin() + std::ptrdiff_t(bytes.size() / 2), tail_zeroed.end(), '\0');
  expect_rejected(tail_zeroed, key, "second half zeroed", "checksum");
  std::string block_zeroed = bytes;  // a zeroed page in the middle of the cubin, as after a crash
  std::fill(block_zeroed.begin() + 1024, block_zeroed.begin() + 2048, '\0');
  expect_rejected(block_zeroed, key, "one block zeroed", "checksum");
}

TEST(CacheEntryFormat, RejectsAnySingleBitFlip) {
  // Every byte of a small entry, magic and version and checksum included.
  const std::string key = key_for("flip");
  const std::string small = encode_entry(key, fake_kernel("flip", 64));
  for (std::size_t i = 0; i < small.size(); ++i) {
    std::string flipped = small;
    flipped[i] = char(flipped[i] ^ (1 << (i % 8)));
    expect_rejected(flipped, key, "bit flip at " + std::to_string(i));
  }
  // Chosen places of a large one: header, key, middle of the cubin, last cubin byte, checksum.
  const std::string big = encode_entry(key, fake_kernel("flip", 256 * 1024));
  const std::size_t cubin_end = big.size() - kEntryChecksumBytes;
  for (std::size_t i : {std::size_t(3), kEntryVersionOffset, std::size_t(20), std::size_t(80), big.size() / 2,
                        cubin_end - 1, cubin_end, big.size() - 1}) {
    std::string flipped = big;
    flipped[i] = char(flipped[i] ^ 0x10);
    expect_rejected(flipped, key, "big bit flip at " + std::to_string(i));
  }
}

TEST(CacheEntryFormat, RejectsForeignFiles) {
  const std::string key = key_for("foreign");
  const std::string bytes = encode_entry(key, fake_kernel("foreign"));

  // Random bytes of several sizes, and random bytes behind a correct magic.
  std::mt19937 rng(42);
  for (std::size_t n : {0, 10, 44, 100, 5000}) {
    std::string noise(n, '\0');
    for (char& c : noise) c = char(rng());
    expect_rejected(noise, key, "noise of " + std::to_string(n));
    expect_rejected(std::string(kEntryMagic) + noise, key, "magic + noise of " + std::to_string(n));
  }

  // A valid entry of another key under this key's name.
  expect_rejected(encode_entry(key_for("other"), fake_kernel("foreign")), key, "another key's entry", "key");

  // Wrong magic, even with a consistent checksum.
  std::string magic = bytes;
  magic[0] = 'X';
  expect_rejected(reseal(magic), key, "wrong magic", "magic");

  // Another format version (an older or newer flashjit), consistent otherwise.
  std::string version = bytes;
  version[kEntryVersionOffset] = char(kEntryFormatVersion + 1);
  expect_rejected(reseal(version), key, "other format version", "format version");

  // Extra bytes after the checksum, or after the cubin (resealed).
  expect_rejected(bytes + "x", key, "appended byte");
  std::string longer = bytes;
  longer.insert(bytes.size() - kEntryChecksumBytes, "extra");
  expect_rejected(reseal(longer), key, "trailing bytes inside the seal", "trailing");
}

TEST(CacheEntryFormat, RejectsConsistentButMalformedFields) {
  const std::string key = key_for("fields");
  const std::string bytes = encode_entry(key, fake_kernel("fields", 128));
  const std::size_t key_length_at = kEntryVersionOffset + 4;

  // A length running past the end, with a checksum that matches: the parser must stop, not read on.
  std::string huge_length = bytes;
  huge_length[key_length_at + 3] = char(0x7f);
  expect_rejected(reseal(huge_length), key, "key length past the end", "past its end");

  // A cubin length one too long and one too short.
  const std::size_t cubin_length_at = bytes.size() - kEntryChecksumBytes - 128 - 8;
  std::string longer = bytes, shorter = bytes;
  longer[cubin_length_at] = char(129);
  shorter[cubin_length_at] = char(127);
  expect_rejected(reseal(longer), key, "cubin length too long");
  expect_rejected(reseal(shorter), key, "cubin length too short");

  // An empty cubin is never a valid entry.
  CompiledKernel empty = fake_kernel("fields");
  empty.cubin.clear();
  expect_rejected(encode_entry(key, empty), key, "empty cubin", "empty");
}

}  // namespace
}  // namespace flashjit
