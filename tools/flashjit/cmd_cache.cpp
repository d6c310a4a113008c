// flashjit cache list | stats | verify | clear | extract KEY FILE
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "cache/cache_dir.hpp"
#include "cache/disk_store.hpp"
#include "common/quote.hpp"
#include "tools/flashjit/commands.hpp"
#include "tools/flashjit/text_table.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

// NOTES: ZeroOrMore, checked in run_cache: with OneOrMore, a bare `flashjit cache` got LLVM's "Not
// enough positional command line arguments" instead of the list of actions.
static cl::list<std::string> Args(cl::Positional, cl::desc("list | stats | verify | clear | extract KEY FILE"),
                                  cl::ZeroOrMore, cl::cat(tool_category()), cl::sub(cache_command()));

constexpr const char* kActions = "list, stats, verify, clear, extract KEY FILE";

namespace {

void print(llvm::json::Value value) { llvm::outs() << llvm::formatv("{0:2}", value) << "\n"; }

llvm::json::Object entry_json(const CacheEntryInfo& e) {
  return llvm::json::Object{{"key", e.key},
                            {"spec", e.spec_text},
                            {"kernel", e.kernel_name},
                            {"valid", e.valid},
                            {"problem", e.problem},
                            {"file_bytes", int64_t(e.file_bytes)},
                            {"cubin_bytes", int64_t(e.cubin_bytes)},
                            {"registers", e.report.registers},
                            {"spill_bytes", e.report.spill_bytes()},
                            {"compile_ms", e.compile_ms},
                            {"last_used_ns", e.last_used_ns}};
}

int list(DiskStore& store) {
  auto entries = store.list();
  if (!entries) return fail(entries.error());
  if (json_option()) {
    llvm::json::Array array;
    for (const auto& e : *entries) array.push_back(entry_json(e));
    print(std::move(array));
    return kExitOk;
  }
  using Align = TextTable::Align;
  TextTable table({{"key"}, {"spec"}, {"regs", Align::kRight}, {"spill", Align::kRight}, {"bytes", Align::kRight}});
  for (const auto& e : *entries) {
    // A bad entry: INVALID in the spec column, why on a line of its own (a long message would
    // widen the column for every row).
    std::vector<std::string> notes;
    if (!e.valid) notes.push_back("    problem: " + e.problem);
    table.add_row({e.key.substr(0, 16), e.valid ? e.spec_text : "INVALID", cell(e.report.registers), cell(e.report.spill_bytes()),
                   cell((long long)e.file_bytes)},
                  std::move(notes));
  }
  table.print(stdout);
  std::printf("%zu entries in %s\n", entries->size(), store.dir().c_str());
  return kExitOk;
}

int stats(DiskStore& store) {
  auto s = store.stats();
  if (!s) return fail(s.error());
  if (json_option()) {
    print(llvm::json::Object{{"dir", s->dir}, {"writable", s->writable}, {"entries", int64_t(s->entries)},
                             {"total_bytes", int64_t(s->total_bytes)}, {"max_bytes", int64_t(s->max_bytes)},
                             {"quarantined", int64_t(s->quarantined)}, {"temp_files", int64_t(s->temp_files)}});
    return kExitOk;
  }
  std::printf("dir          %s\nwritable     %s\nentries      %zu\ntotal bytes  %llu\nquarantined  %zu\ntemp files   %zu\n",
              s->dir.c_str(), s->writable ? "yes" : "no", s->entries, (unsigned long long)s->total_bytes, s->quarantined,
              s->temp_files);
  return kExitOk;
}

int verify(DiskStore& store) {
  auto report = store.verify();
  if (!report) return fail(report.error());
  if (json_option()) {
    llvm::json::Array bad;
    for (const auto& e : report->bad) bad.push_back(entry_json(e));
    print(llvm::json::Object{{"checked", int64_t(report->checked)}, {"valid", int64_t(report->valid)}, {"bad", std::move(bad)}});
  } else {
    for (const auto& e : report->bad) std::printf("bad entry %s: %s (set aside)\n", e.key.c_str(), e.problem.c_str());
    std::printf("%zu checked, %zu valid, %zu bad\n", report->checked, report->valid, report->bad.size());
  }
  return report->bad.empty() ? kExitOk : kExitFailure;
}

int clear(DiskStore& store) {
  auto report = store.clear();
  if (!report) return fail(report.error());
  if (json_option()) {
    print(llvm::json::Object{{"entries", int64_t(report->entries)}, {"temp_files", int64_t(report->temp_files)},
                             {"quarantined", int64_t(report->quarantined)}, {"lock_files", int64_t(report->lock_files)}});
  } else {
    std::printf("removed %zu entries, %zu temp files, %zu quarantined, %zu lock files\n", report->entries,
                report->temp_files, report->quarantined, report->lock_files);
  }
  return kExitOk;
}

// Writes bytes to path (created or truncated); the error names the path and errno's text.
Status write_file(const std::string& path, const std::string& bytes) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) return Error::make(ErrorCode::kCacheIo, "cannot write " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  const int write_errno = errno;
  if (std::fclose(out) != 0 || !written) {
    return Error::make(ErrorCode::kCacheIo, "cannot write " + path + ": " + std::strerror(written ? errno : write_errno));
  }
  return {};
}

int extract(DiskStore& store, const std::string& key, const std::string& file) {
  auto cubin = store.extract(key);
  if (!cubin) return fail(cubin.error());
  if (Status st = write_file(file, *cubin); !st) return fail(st.error());
  if (!json_option()) std::printf("wrote %zu bytes of cubin to %s\n", cubin->size(), file.c_str());
  return kExitOk;
}

}  // namespace

int run_cache() {
  if (Args.empty()) return usage_error(std::string("cache needs an action: ") + kActions);
  const std::string action = Args[0];
  const size_t want = action == "extract" ? 3 : 1;
  if (action != "list" && action != "stats" && action != "verify" && action != "clear" && action != "extract") {
    return usage_error("unknown cache action " + quote_user_text(action) + "; allowed: " + kActions);
  }
  if (Args.size() != want) return usage_error("cache " + action + (want == 3 ? " takes KEY FILE" : " takes no arguments"));
  CacheDirSource source;
  const std::string dir = resolve_cache_dir(cache_dir_flag(), &source);
  if (dir.empty()) return fail(Error::make(ErrorCode::kCacheIo, "no cache directory: set --cache-dir, FLASHJIT_CACHE_DIR or HOME"));
  auto store = DiskStore::open({dir, 0});
  if (!store) return fail(store.error());
  if (action == "list") return list(**store);
  if (action == "stats") return stats(**store);
  if (action == "verify") return verify(**store);
  if (action == "clear") return clear(**store);
  return extract(**store, Args[1], Args[2]);
}

}  // namespace flashjit::tool
