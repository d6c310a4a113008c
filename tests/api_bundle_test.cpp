// Cache bundles (src/api/cache_bundle.hpp) byte by byte: the round trip, every truncation and every
// flipped bit refused, malformed-but-checksummed contents refused with what is wrong, and, through
// flashjit_cache_import, entries that are intact but not what this build would compile refused
// with nothing imported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include "api/cache_bundle.hpp"
#include "cache/cache_key.hpp"
#include "cache/entry_format.hpp"
#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "runtime/engine.hpp"

namespace flashjit::api {
namespace {

namespace fs = std::filesystem;

std::string key_of(char c) { return std::string(64, c); }

CompiledKernel small_kernel(const std::string& seed) {
  CompiledKernel k;
  k.spec_text = "spec-" + seed;
  k.kernel_name = "kernel_" + seed;
  k.cubin = std::string(40, 'c') + seed;
  k.report.registers = 128;
  return k;
}

std::vector<BundleEntry> small_entries() {
  return {{key_of('a'), encode_entry(key_of('a'), small_kernel("1"))},
          {key_of('b'), encode_entry(key_of('b'), small_kernel("2"))}};
}

// The bytes with the trailing checksum recomputed, so only the content is wrong.
std::string rechecksummed(std::string bytes) {
  bytes.resize(bytes.size() - 32);
  const auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes));
  bytes.append(digest.begin(), digest.end());
  return bytes;
}

void put_u32_at(std::string& bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = char((v >> (8 * i)) & 0xff);
}

TEST(ApiBundle, RoundTrip) {
  const auto entries = small_entries();
  const std::string bytes = encode_bundle(entries);
  EXPECT_EQ(bytes.substr(0, 8), std::string(kBundleMagic));
  auto decoded = decode_bundle(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  ASSERT_EQ(decoded->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*decoded)[i].key, entries[i].key);
    EXPECT_EQ((*decoded)[i].bytes, entries[i].bytes);
    EXPECT_TRUE(decode_entry((*decoded)[i].bytes, (*decoded)[i].key).ok());
  }
}

TEST(ApiBundle, EveryTruncationIsRefused) {
  const std::string bytes = encode_bundle(small_entries());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = decode_bundle(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(decoded.ok()) << "accepted a bundle cut to " << n << " of " << bytes.size() << " bytes";
    EXPECT_EQ(decoded.error().code, ErrorCode::kCacheIo);
  }
}

TEST(ApiBundle, EveryFlippedBitIsRefused) {
  const std::string bytes = encode_bundle(small_entries());
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (int bit : {0, 7}) {
      std::string flipped = bytes;
      flipped[at] = char(flipped[at] ^ (1 << bit));
      ASSERT_FALSE(decode_bundle(flipped).ok()) << "accepted a flip of bit " << bit << " at byte " << at;
    }
  }
}

TEST(ApiBundle, MalformedContentsWithAValidChecksumSayWhatIsWrong) {
  const std::string bytes = encode_bundle(small_entries());
  auto expect = [](const std::string& b, const std::string& says) {
    auto decoded = decode_bundle(b);
    ASSERT_FALSE(decoded.ok()) << says;
    EXPECT_NE(decoded.error().message.find(says), std::string::npos) << decoded.error().message;
  };
  std::string version = bytes;
  put_u32_at(version, 8, 2);
  expect(rechecksummed(version), "format version 2");
  std::string zero = bytes;
  put_u32_at(zero, 12, 0);
  expect(rechecksummed(zero), "entry count 0");
  std::string more = bytes;
  put_u32_at(more, 12, 3);
  expect(rechecksummed(more), "entry 2");
  std::string fewer = bytes;
  put_u32_at(fewer, 12, 1);
  expect(rechecksummed(fewer), "bytes after the last entry");
  expect(encode_bundle({{"NOT-HEX", "x"}}), "bad key length");
  expect(encode_bundle({{std::string(64, 'G'), "x"}}), "not 64 lowercase hex");
  expect(bytes + "x", "checksum mismatch");
  expect("FJBUNDL", "not a flashjit cache bundle");
}

// Through the C API: intact bundles whose entries this build would never look up.
std::string write_file(const std::string& dir, const std::string& bytes) {
  const std::string path = dir + "/bundle.fjbundle";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

TEST(ApiBundle, ForeignEntriesAreRefusedAndNothingIsImported) {
  const std::string dir = ::testing::TempDir() + "flashjit_api_bundle_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir + "/cache");
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = FLASHJIT_DEVICE_NONE;
  const std::string cache = dir + "/cache";
  o.cache_dir = cache.c_str();
  flashjit_context_t ctx = nullptr;
  ASSERT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_SUCCESS);

  // What this build computes for a real spec.
  auto config = make_config(*parse_spec("dtype=bf16,head_dim=64"));
  ASSERT_TRUE(config.ok());
  const std::string real_key = cache_key_for(make_compile_request(*config));
  CompiledKernel kernel;
  kernel.spec_text = to_string(config->spec);
  kernel.kernel_name = config->kernel_name;
  kernel.cubin = "not a cubin";
  kernel.report.registers = 168;  // what ptxas gives these kernels: within the setmaxnreg budget

  // 1. The right spec under another key (another flashjit or NVRTC version).
  const std::string other_key = key_of('e');
  const BundleEntry good{real_key, encode_entry(real_key, kernel)};
  std::string path = write_file(dir, encode_bundle({good, {other_key, encode_entry(other_key, kernel)}}));
  size_t imported = 7;
  EXPECT_EQ(flashjit_cache_import(ctx, path.c_str(), &imported), FLASHJIT_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(imported, 0u);
  std::string message = flashjit_last_error_message();
  EXPECT_NE(message.find("entry 1"), std::string::npos) << message;
  EXPECT_NE(message.find("another build of flashjit or NVRTC"), std::string::npos) << message;
  // 2. A spec this build cannot parse.
  CompiledKernel unknown = kernel;
  unknown.spec_text = "dtype=bf16,head_dim=64,future_field=1";
  path = write_file(dir, encode_bundle({{other_key, encode_entry(other_key, unknown)}}));
  EXPECT_EQ(flashjit_cache_import(ctx, path.c_str(), &imported), FLASHJIT_ERROR_INVALID_BUNDLE);
  message = flashjit_last_error_message();
  EXPECT_NE(message.find("does not parse"), std::string::npos) << message;
  // 3. An entry filed under another key than its own.
  path = write_file(dir, encode_bundle({{other_key, good.bytes}}));
  EXPECT_EQ(flashjit_cache_import(ctx, path.c_str(), &imported), FLASHJIT_ERROR_INVALID_BUNDLE);
  // 4. A register count that breaks the setmaxnreg budget (the kernel would hang).
  CompiledKernel hangs = kernel;
  hangs.report.registers = 100;  // 100 x (1 + warpgroups) is short of any split
  path = write_file(dir, encode_bundle({{real_key, encode_entry(real_key, hangs)}}));
  EXPECT_EQ(flashjit_cache_import(ctx, path.c_str(), &imported), FLASHJIT_ERROR_INVALID_BUNDLE);
  message = flashjit_last_error_message();
  EXPECT_NE(message.find("would hang"), std::string::npos) << message;
  // Nothing of the valid first entry was published.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(cache)) entries += e.path().extension() == ".entry";
  EXPECT_EQ(entries, 0u);
  flashjit_context_destroy(ctx);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flashjit::api
