// flashjit cache list | stats | verify | clear | extract KEY FILE | export FILE | import FILE
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "api/bundle_io.hpp"
#include "cache/cache_dir.hpp"
#include "cache/disk_store.hpp"
#include "cache/posix_file.hpp"
#include "common/quote.hpp"
#include "tools/flashjit/commands.hpp"
#include "tools/flashjit/text_table.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

// NOTES: ZeroOrMore, checked in run_cache: with OneOrMore, a bare `flashjit cache` got LLVM's "Not
// enough positional command line arguments" instead of the list of actions.
static cl::list<std::string> Args(cl::Positional, cl::desc("list | stats | verify | clear | extract KEY FILE | export FILE | import FILE"),
                                  cl::ZeroOrMore, cl::cat(tool_category()), cl::sub(cache_command()));
static cl::list<std::string> ExportSpecs("spec", cl::desc("export: the kernels of this spec (repeatable; compiled when missing); "
                                                          "without --spec, every valid entry in the directory"),
                                         cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(cache_command()));

constexpr const char* kActions = "list, stats, verify, clear, extract KEY FILE, export FILE, import FILE";

namespace {

void print(llvm::json::Value value) { llvm::outs() << llvm::formatv("{0:2}", value) << "\n"; }

llvm::json::Object entry_json(const CacheEntryInfo& e) {
  return llvm::json::Object{{"key", e.key},
                            {"spec", e.spec_text},
                            {"nvrtc", e.nvrtc_version},
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
  TextTable table({{"key"}, {"nvrtc"}, {"spec"}, {"regs", Align::kRight}, {"spill", Align::kRight}, {"bytes", Align::kRight}});
  for (const auto& e : *entries) {
    // A bad entry: INVALID in the spec column, why on a line of its own (a long message would
    // widen the column for every row). NVRTC "-": not known (a bad entry, or one written before
    // entries recorded it).
    std::vector<std::string> notes;
    if (!e.valid) notes.push_back("    problem: " + e.problem);
    table.add_row({e.key.substr(0, 16), e.nvrtc_version.empty() ? "-" : e.nvrtc_version, e.valid ? e.spec_text : "INVALID",
                   cell(e.report.registers), cell(e.report.spill_bytes()), cell((long long)e.file_bytes)},
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
    for (const auto& e : report->bad) {
      llvm::json::Object o = entry_json(e);
      o["set_aside"] = e.set_aside;
      bad.push_back(std::move(o));
    }
    print(llvm::json::Object{{"checked", int64_t(report->checked)}, {"valid", int64_t(report->valid)}, {"bad", std::move(bad)}});
  } else {
    for (const auto& e : report->bad) {
      std::printf("bad entry %s: %s (%s)\n", e.key.c_str(), e.problem.c_str(),
                  e.set_aside ? "set aside" : "left in place: it could not be set aside");
    }
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

// export FILE: a bundle of the --spec kernels (compiled when missing), or of every valid entry.
int export_bundle(const std::string& dir, const std::string& file) {
  std::vector<api::BundleEntry> entries;
  if (!ExportSpecs.empty()) {
    std::vector<AttentionSpec> specs;
    for (const std::string& text : ExportSpecs) {
      auto spec = parse_spec(text);
      if (!spec) return fail(spec.error());
      specs.push_back(*spec);
    }
    EngineOptions options = engine_options();
    options.cache_dir = dir;
    Engine engine(options);
    if (api::ApiStatus st = api::collect_bundle_entries(engine, options.policy, specs, ExportSpecs, &entries); !st.ok()) {
      return fail(st.error());
    }
  } else {
    auto store = DiskStore::open({.dir = dir, .create = false});
    if (!store) return fail(store.error());
    auto listed = (*store)->list();
    if (!listed) return fail(listed.error());
    for (const CacheEntryInfo& e : *listed) {
      if (!e.valid) continue;  // list() decoded it; a bad entry has no place in a bundle
      auto file_bytes = posix::read_file(e.path);
      if (file_bytes) entries.push_back({e.key, std::move(file_bytes->bytes)});
    }
    if (entries.empty()) return fail(Error::make(ErrorCode::kNotCompiled, "nothing to export: no valid entry in " + dir));
  }
  if (api::ApiStatus st = api::write_bundle_file(file, entries); !st.ok()) return fail(st.error());
  if (json_option()) {
    llvm::json::Array keys;
    for (const api::BundleEntry& e : entries) keys.push_back(e.key);
    print(llvm::json::Object{{"file", file}, {"entries", int64_t(entries.size())}, {"keys", std::move(keys)}});
  } else {
    std::printf("exported %zu entries to %s\n", entries.size(), file.c_str());
  }
  return kExitOk;
}

// import FILE: every entry checked, then all stored in the directory; one not stored is a failure.
int import_bundle(const std::string& dir, const std::string& file) {
  EngineOptions options = engine_options();
  options.cache_dir = dir;
  Engine engine(options);
  std::vector<std::string> keys;
  if (api::ApiStatus st = api::import_bundle_file(engine, file, &keys); !st.ok()) return fail(st.error());
  size_t stored = 0;
  for (const std::string& key : keys) stored += engine.cache().stored(key) ? 1 : 0;
  if (json_option()) {
    print(llvm::json::Object{{"file", file}, {"entries", int64_t(keys.size())}, {"stored", int64_t(stored)}, {"dir", dir}});
  } else {
    std::printf("imported %zu entries from %s; %zu stored in %s\n", keys.size(), file.c_str(), stored, dir.c_str());
  }
  if (stored == keys.size()) return kExitOk;
  std::fprintf(stderr, "flashjit: %zu of %zu entries not stored: %s\n", keys.size() - stored, keys.size(),
               engine.cache().why_not_stored().c_str());
  return kExitFailure;
}

// list, stats, verify and clear on a directory that does not exist: said, nothing created.
int on_missing_directory(const std::string& action, const std::string& dir) {
  if (action == "stats" && json_option()) {
    print(llvm::json::Object{{"dir", dir}, {"exists", false}, {"writable", false}, {"entries", 0}, {"total_bytes", 0},
                             {"max_bytes", 0}, {"quarantined", 0}, {"temp_files", 0}});
    return kExitOk;
  }
  if (action == "list" && json_option()) {
    print(llvm::json::Array{});
    return kExitOk;
  }
  if (action == "stats") std::printf("dir          %s (does not exist)\n", dir.c_str());
  else std::printf("cache directory %s does not exist: nothing to %s\n", dir.c_str(), action.c_str());
  return kExitOk;
}

}  // namespace

int run_cache() {
  if (Args.empty()) return usage_error(std::string("cache needs an action: ") + kActions);
  const std::string action = Args[0];
  const bool takes_file = action == "export" || action == "import";
  const size_t want = action == "extract" ? 3 : takes_file ? 2 : 1;
  if (action != "list" && action != "stats" && action != "verify" && action != "clear" && action != "extract" && !takes_file) {
    return usage_error("unknown cache action " + quote_user_text(action) + "; allowed: " + kActions);
  }
  if (Args.size() != want) {
    return usage_error("cache " + action + (want == 3 ? " takes KEY FILE" : want == 2 ? " takes FILE" : " takes no arguments"));
  }
  if (!ExportSpecs.empty() && action != "export") return usage_error("--spec is for cache export only");
  CacheDirSource source;
  const std::string dir = resolve_cache_dir(cache_dir_flag(), &source);
  if (dir.empty()) return fail(Error::make(ErrorCode::kCacheIo, "no cache directory: set --cache-dir, FLASHJIT_CACHE_DIR or HOME"));
  if (action == "export") return export_bundle(dir, Args[1]);
  if (action == "import") return import_bundle(dir, Args[1]);
  // Only import (and export with --spec) store anything: the others never create the directory.
  auto store = DiskStore::open({.dir = dir, .create = false});
  if (!store && store.error().code == ErrorCode::kNotCompiled && action != "extract") return on_missing_directory(action, dir);
  if (!store) return fail(store.error());
  if (action == "list") return list(**store);
  if (action == "stats") return stats(**store);
  if (action == "verify") return verify(**store);
  if (action == "clear") return clear(**store);
  return extract(**store, Args[1], Args[2]);
}

}  // namespace flashjit::tool
