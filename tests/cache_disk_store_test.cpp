#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cache/disk_store.hpp"
#include "cache/entry_format.hpp"
#include "cache_test_util.hpp"

namespace flashjit {
namespace {

using namespace cache_test;

std::unique_ptr<DiskStore> open_store(const std::string& dir, std::uint64_t max_bytes = 0) {
  auto store = DiskStore::open({.dir = dir, .max_bytes = max_bytes});
  EXPECT_TRUE(store.ok()) << store.error().message;
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(CacheDiskStore, PublishIsVisibleWholeAndLeavesNoTempFiles) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");  // created by open
  auto store = open_store(dir);
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->writable());
  const std::string key = key_for("a");
  const CompiledKernel kernel = fake_kernel("a");

  ASSERT_TRUE(store->publish(key, kernel).ok());
  EXPECT_EQ(names_in(dir), std::vector<std::string>{key + ".entry"});  // no temp file left
  auto decoded = decode_entry(read_bytes(store->entry_path(key)), key);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(*decoded, kernel);
  auto loaded = store->load(key);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(*loaded, kernel);

  // Publishing again (a lost race, as seen from the other publisher) is no error.
  ASSERT_TRUE(store->publish(key, kernel).ok());
  EXPECT_EQ(names_in(dir), std::vector<std::string>{key + ".entry"});

  auto miss = store->load(key_for("absent"));
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.error().code, ErrorCode::kNotCompiled);
}

TEST(CacheDiskStore, ReadersNeverSeeAPartialEntry) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  const std::string key = key_for("race");
  const std::string path = store->entry_path(key);
  std::atomic<bool> stop{false};
  std::atomic<int> valid_reads{0}, bad_reads{0};
  std::string first_problem;

  // The reader opens the final name as fast as it can, never through the store (no set-aside).
  std::thread reader([&] {
    while (!stop) {
      auto file = posix::read_file(path);
      if (!file.ok()) continue;  // not published yet
      auto decoded = decode_entry(file->bytes, key);
      if (decoded.ok()) {
        ++valid_reads;
      } else if (bad_reads++ == 0) {
        first_problem = decoded.error().message;
      }
    }
  });
  // Two writers publish large entries (distinct contents) over and over.
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 20; ++i) {
        CompiledKernel k = fake_kernel("race" + std::to_string(w), 512 * 1024);
        k.compile_ms = w * 1000 + i;
        EXPECT_TRUE(store->publish(key, k).ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  while (valid_reads < 5) std::this_thread::yield();
  stop = true;
  reader.join();
  EXPECT_EQ(bad_reads, 0) << first_problem;
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{key + ".entry"});
}

TEST(CacheDiskStore, TemporaryAndOtherFilesAreNeverEntries) {
  TempDir tmp;
  const std::string key = key_for("tmp");
  const std::string bytes = encode_entry(key, fake_kernel("tmp"));
  // A complete entry under a temporary name (a writer died before its rename), and lookalikes.
  write_bytes(tmp.sub(".tmp-" + key + "-1-2-0123456789abcdef"), bytes);
  write_bytes(tmp.sub(key + ".lock"), "");
  write_bytes(tmp.sub(key + ".entry.bak"), bytes);
  write_bytes(tmp.sub("README"), "the user's file");
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);

  auto loaded = store->load(key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kNotCompiled);
  auto rows = store->list();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
  auto stats = store->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 0u);
  EXPECT_EQ(stats->temp_files, 1u);

  // clear() takes the temp and lock files, and leaves files that are not ours.
  auto cleared = store->clear();
  ASSERT_TRUE(cleared.ok()) << cleared.error().message;
  EXPECT_EQ(cleared->temp_files, 1u);
  EXPECT_EQ(cleared->lock_files, 1u);
  std::vector<std::string> kept = {"README", key + ".entry.bak"};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(names_in(tmp.path()), kept);
}

TEST(CacheDiskStore, OpenSweepsOnlyStaleTempFiles) {
  TempDir tmp;
  const std::string stale = tmp.sub(".tmp-" + key_for("s") + "-1-1-00");
  const std::string fresh = tmp.sub(".tmp-" + key_for("f") + "-1-1-00");
  write_bytes(stale, "partial");
  write_bytes(fresh, "partial");
  set_mtime(stale, 2 * 3600);
  ASSERT_TRUE(open_store(tmp.path()));
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{fresh.substr(tmp.path().size() + 1)});
}

TEST(CacheDiskStore, OpenFailsWhenTheDirectoryCannotBeMade) {
  TempDir tmp;
  write_bytes(tmp.sub("file"), "x");
  auto store = DiskStore::open({.dir = tmp.sub("file/sub")});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, ErrorCode::kCacheIo);
  EXPECT_FALSE(DiskStore::open({.dir = tmp.sub("file")}).ok());  // a file, not a directory
}

TEST(CacheDiskStore, EvictsLeastRecentlyUsedDownToTheCap) {
  TempDir tmp;
  const std::string a = key_for("a"), b = key_for("b"), c = key_for("c"), d = key_for("d");
  std::uint64_t entry_bytes = 0;
  {
    auto unlimited = open_store(tmp.path());
    for (const std::string& k : {a, b, c}) ASSERT_TRUE(unlimited->publish(k, fake_kernel("x", 10000)).ok());
    entry_bytes = encode_entry(a, fake_kernel("x", 10000)).size();
  }
  // Stamps: a oldest, then b, then c.
  auto store = open_store(tmp.path(), entry_bytes * 5 / 2);  // room for two entries
  set_mtime(store->entry_path(a), 300);
  set_mtime(store->entry_path(b), 200);
  set_mtime(store->entry_path(c), 100);
  // A hit on b makes it the most recently used.
  ASSERT_TRUE(store->load(b).ok());
  EXPECT_GT(mtime_ns(store->entry_path(b)), mtime_ns(store->entry_path(c)));

  // Publishing d goes over the cap: a, then c go; b (used) and d (just published) stay.
  ASSERT_TRUE(store->publish(d, fake_kernel("x", 10000)).ok());
  EXPECT_EQ(names_in(tmp.path()), (std::vector<std::string>{std::min(b, d) + ".entry", std::max(b, d) + ".entry"}));
  auto stats = store->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_LE(stats->total_bytes, store->max_bytes());
  EXPECT_EQ(stats->entries, 2u);
}

// A stamp in the future (a clock set back, a copied file) would outrank every real one: such an
// entry counts as the least recently used (it was never evicted).
TEST(CacheDiskStore, AFutureDatedEntryIsEvictedFirst) {
  TempDir tmp;
  const std::string a = key_for("a"), b = key_for("b"), c = key_for("c");
  const std::uint64_t entry_bytes = encode_entry(a, fake_kernel("x", 10000)).size();
  auto store = open_store(tmp.path(), entry_bytes * 5 / 2);  // room for two entries
  ASSERT_TRUE(store->publish(a, fake_kernel("x", 10000)).ok());
  ASSERT_TRUE(store->publish(b, fake_kernel("x", 10000)).ok());
  set_mtime(store->entry_path(a), -86400 * 365);  // a year ahead
  set_mtime(store->entry_path(b), 100);
  ASSERT_TRUE(store->publish(c, fake_kernel("x", 10000)).ok());
  EXPECT_EQ(names_in(tmp.path()), (std::vector<std::string>{std::min(b, c) + ".entry", std::max(b, c) + ".entry"}));
}

TEST(CacheDiskStore, NeverEvictsTheEntryJustPublished) {
  TempDir tmp;
  auto store = open_store(tmp.path(), 1);  // smaller than any entry
  const std::string a = key_for("a"), b = key_for("b");
  ASSERT_TRUE(store->publish(a, fake_kernel("a")).ok());
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{a + ".entry"});
  ASSERT_TRUE(store->publish(b, fake_kernel("b")).ok());
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{b + ".entry"});
  EXPECT_TRUE(store->load(b).ok());
}

// Keys chosen by hand so that prefixes collide: any 64-hex string is a valid key to the store.
TEST(CacheDiskStore, MaintenanceListStatsVerifyExtractClear) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::string k1 = "aaaa" + std::string(59, '0') + "1";
  const std::string k2 = "aaaa" + std::string(59, '0') + "2";
  const std::string k3 = "bbbb" + std::string(60, '0');
  const std::string bad = "cccc" + std::string(60, '0');
  ASSERT_TRUE(store->publish(k1, fake_kernel("1", 1000)).ok());
  ASSERT_TRUE(store->publish(k2, fake_kernel("2", 2000)).ok());
  ASSERT_TRUE(store->publish(k3, fake_kernel("3", 3000)).ok());
  write_bytes(store->entry_path(bad), "not an entry");

  // list: every entry, sorted by key, decoded; the bad one marked invalid and left in place.
  auto rows = store->list();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].key, k1);
  EXPECT_TRUE((*rows)[0].valid);
  EXPECT_EQ((*rows)[0].spec_text, fake_kernel("1").spec_text);
  EXPECT_EQ((*rows)[0].kernel_name, "flash_fwd_1");
  EXPECT_EQ((*rows)[0].cubin_bytes, 1000u);
  EXPECT_EQ((*rows)[0].file_bytes, encode_entry(k1, fake_kernel("1", 1000)).size());
  EXPECT_EQ((*rows)[0].report.registers, 168);
  EXPECT_EQ((*rows)[0].report.spill_bytes(), 12);
  EXPECT_GT((*rows)[0].last_used_ns, 0);
  EXPECT_EQ((*rows)[2].cubin_bytes, 3000u);
  EXPECT_EQ((*rows)[3].key, bad);
  EXPECT_FALSE((*rows)[3].valid);
  EXPECT_FALSE((*rows)[3].problem.empty());

  // stats: counts and bytes of entries.
  auto stats = store->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 4u);
  EXPECT_EQ(stats->dir, tmp.path());
  EXPECT_TRUE(stats->writable);
  std::uint64_t total = 0;
  for (const auto& row : *rows) total += row.file_bytes;
  EXPECT_EQ(stats->total_bytes, total);

  // extract: full key, unique prefix (any case); ambiguous, unknown and non-hex prefixes fail.
  auto full = store->extract(k2);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(*full, fake_kernel("2", 2000).cubin);
  auto prefix = store->extract("BB");
  ASSERT_TRUE(prefix.ok()) << prefix.error().message;
  EXPECT_EQ(*prefix, fake_kernel("3", 3000).cubin);
  auto ambiguous = store->extract("aaaa");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.error().code, ErrorCode::kNotCompiled);  // as an unknown prefix: neither names one entry
  EXPECT_NE(ambiguous.error().message.find("ambiguous"), std::string::npos);
  auto unknown = store->extract("d");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotCompiled);
  EXPECT_FALSE(store->extract("xyz").ok());
  EXPECT_FALSE(store->extract("").ok());
  auto corrupt = store->extract("cc");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, ErrorCode::kCacheIo);

  // verify: decodes all, reports the bad one and sets it aside (logged once).
  LogCapture logs;
  auto report = store->verify();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->checked, 4u);
  EXPECT_EQ(report->valid, 3u);
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_EQ(report->bad[0].key, bad);
  EXPECT_EQ(logs.warnings(bad), 1);
  EXPECT_EQ(names_in(tmp.sub("quarantine")).size(), 1u);
  stats = store->stats();
  EXPECT_EQ(stats->entries, 3u);
  EXPECT_EQ(stats->quarantined, 1u);
  auto again = store->verify();
  EXPECT_EQ(again->bad.size(), 0u);

  // clear: entries, quarantine and all.
  auto cleared = store->clear();
  ASSERT_TRUE(cleared.ok()) << cleared.error().message;
  EXPECT_EQ(cleared->entries, 3u);
  EXPECT_EQ(cleared->quarantined, 1u);
  EXPECT_TRUE(names_in(tmp.path()).empty());
  stats = store->stats();
  EXPECT_EQ(stats->entries, 0u);
  EXPECT_EQ(stats->total_bytes, 0u);
}

}  // namespace
}  // namespace flashjit
