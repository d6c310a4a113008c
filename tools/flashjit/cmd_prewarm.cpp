// flashjit prewarm: compile specs into the cache on all cores, then a summary table (or --json).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "cache/cache_dir.hpp"
#include "cache/disk_store.hpp"
#include "runtime/prewarm_plan.hpp"
#include "tools/flashjit/commands.hpp"
#include "tools/flashjit/text_table.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

// Its description is set by describe_prewarm_defaults() from the set itself.
static cl::opt<bool> Defaults("defaults", cl::desc("The default set"), cl::cat(tool_category()), cl::sub(prewarm_command()));
static cl::list<std::string> Specs("spec", cl::desc("A spec, e.g. dtype=bf16,head_dim=128,causal=1 (repeatable)"),
                                   cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(prewarm_command()));
static cl::opt<unsigned> Jobs("jobs", cl::desc("Parallel compiles (default: all cores)"), cl::init(0), cl::cat(tool_category()), cl::sub(prewarm_command()));
static cl::opt<bool> NoCache("no-cache", cl::desc("Compile everything, reading and writing no cache (for compile timing)"),
                             cl::cat(tool_category()), cl::sub(prewarm_command()));

namespace {

struct Row {
  std::string spec;
  std::string key;
  std::string status;  // "hit" | "compiled" | "failed"
  bool stored = false;  // in the cache directory after the run
  double compile_ms = 0;
  int registers = 0;
  int spill_bytes = 0;
  int smem_bytes = 0;
  std::vector<std::string> warnings;  // ptxas C75xx lines
  std::string error;
};

Row row_of(const PreparedKernel& prepared) {
  Row row;
  row.spec = to_string(prepared.config.spec);
  row.key = prepared.key;
  row.status = prepared.source == CacheLookup::Source::kCompiled ? "compiled" : "hit";
  row.compile_ms = prepared.source == CacheLookup::Source::kCompiled ? prepared.compiled->compile_ms : 0;
  row.registers = prepared.compiled->report.registers;
  row.spill_bytes = prepared.compiled->report.spill_bytes();
  row.smem_bytes = prepared.config.smem_bytes;
  row.warnings = prepared.compiled->report.warnings;
  return row;
}

// The compiler's first error line (NVRTC or ptxas) from a failed compile's log, so that the
// row says why without the whole log; empty when the log has none.
std::string first_error_line(const std::string& log) {
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find("error") != std::string::npos || line.find("fatal") != std::string::npos) return line.substr(0, 300);
    start = end + 1;
  }
  return {};
}

// One kernel of a family (runtime/prewarm_plan.hpp).
Row prewarm_one(Engine& engine, const AttentionSpec& spec) {
  auto prepared = engine.prepare(spec, engine.options().policy);
  if (prepared) return row_of(*prepared);
  Row row;
  row.spec = to_string(spec);
  row.status = "failed";
  row.error = prepared.error().message;
  if (const std::string why = first_error_line(prepared.error().log); !why.empty()) row.error += ": " + why;
  return row;
}

// Prewarm exists to store kernels: without a cache directory it can use, it fails before
// compiling anything (the engine would warn and keep them in memory), naming the directory and why.
Status check_cache_directory() {
  const std::string dir = resolve_cache_dir(cache_dir_flag());
  const char* memory_only = " (prewarm --no-cache compiles without storing)";
  if (dir.empty()) return Error::make(ErrorCode::kCacheIo, std::string("no cache directory to store kernels in: set --cache-dir, FLASHJIT_CACHE_DIR or HOME") + memory_only);
  auto store = DiskStore::open({dir, 0});
  if (!store) return Error::make(ErrorCode::kCacheIo, "cannot store kernels: " + store.error().message + memory_only);
  return {};
}

// A kernel not stored (a read-only directory, a failed write, something else under its entry's
// name) failed prewarm's purpose, whether compiled now or found in memory.
void fail_unstored(std::vector<Row>& rows, KernelCache& cache) {
  for (Row& r : rows) {
    if (r.status == "failed") continue;
    r.stored = cache.stored(r.key);
    if (r.stored) continue;
    r.error = r.status + " but not stored: " + cache.why_not_stored();
    r.status = "failed";
  }
}

void print_table(const std::vector<Row>& rows, double wall_ms, const std::string& stored_in) {
  using Align = TextTable::Align;
  TextTable table({{"spec"}, {"status"}, {"compile_ms", Align::kRight}, {"regs", Align::kRight}, {"spill", Align::kRight},
                   {"smem", Align::kRight}});
  for (const Row& r : rows) {
    std::vector<std::string> notes;
    if (!r.error.empty()) notes.push_back("    error: " + r.error);
    for (const std::string& w : r.warnings) notes.push_back("    ptxas: " + w);
    table.add_row({r.spec, r.status, cell("%.0f", r.compile_ms), cell(r.registers), cell(r.spill_bytes), cell(r.smem_bytes)},
                  std::move(notes));
  }
  table.print(stdout);
  size_t compiled = 0, hits = 0, failed = 0, stored = 0;
  for (const Row& r : rows) {
    (r.status == "compiled" ? compiled : r.status == "hit" ? hits : failed)++;
    stored += r.stored ? 1 : 0;
  }
  std::printf("%zu kernels: %zu compiled, %zu hits, %zu failed in %.0f ms; ", rows.size(), compiled, hits, failed, wall_ms);
  if (stored_in.empty()) std::printf("none stored (--no-cache)\n");
  else std::printf("%zu stored in %s\n", stored, stored_in.c_str());
}

void print_json(const std::vector<Row>& rows) {
  llvm::json::Array array;
  for (const Row& r : rows) {
    llvm::json::Object o{{"spec", r.spec}, {"key", r.key}, {"status", r.status}, {"stored", r.stored}, {"compile_ms", r.compile_ms},
                         {"registers", r.registers}, {"spill_bytes", r.spill_bytes}, {"smem_bytes", r.smem_bytes}};
    if (!r.error.empty()) o["error"] = r.error;
    llvm::json::Array warnings;
    for (const std::string& w : r.warnings) warnings.push_back(w);
    o["warnings"] = std::move(warnings);
    array.push_back(std::move(o));
  }
  llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(array))) << "\n";
}

}  // namespace

void describe_prewarm_defaults() {
  static std::string description;
  const DefaultPrewarmSet set = default_prewarm_set();
  description = "The default set, " + std::to_string(set.specs.size()) +
                " specs, each with its long-sequence kernel where it has one:";
  for (const AttentionSpec& spec : set.specs) {
    description += "\n    " + to_string(spec);
  }
  // gpt-oss's, Gemma's and Llama 4's specs whose keys this build does not have (runtime/prewarm_plan.hpp).
  for (const std::string& why : set.skipped) description += "\n    skipped: " + why.substr(0, why.find(": "));
  Defaults.setDescription(description);
}

int run_prewarm() {
  // 1. Which specs: --defaults and every --spec (parse errors exit 2 naming the field).
  std::vector<AttentionSpec> specs;
  if (Defaults) {
    DefaultPrewarmSet set = default_prewarm_set();
    specs = std::move(set.specs);
    for (const std::string& why : set.skipped) std::fprintf(stderr, "flashjit: prewarm --defaults skips %s\n", why.c_str());
  }
  for (const std::string& text : Specs) {
    auto spec = parse_spec(text);
    if (!spec) return fail(spec.error());
    if (auto config = make_config(*spec); !config) return fail(config.error());
    specs.push_back(*spec);
  }
  if (specs.empty()) return usage_error("prewarm needs --defaults or at least one --spec");

  if (!NoCache) {
    if (Status st = check_cache_directory(); !st) return fail(st.error());
  }

  // 2. Compile on a pool of workers, one kernel at a time each, the costliest first; the rows come
  // out per spec as asked, each spec's kernel before its long-sequence kernel.
  EngineOptions options = engine_options();
  options.memory_only = NoCache;
  Engine engine(options);
  const std::vector<PrewarmJob> plan = plan_prewarm(engine, specs);
  const unsigned jobs = Jobs ? Jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<Row>> rows_per_spec(specs.size());
  for (const PrewarmJob& job : plan) {
    if (rows_per_spec[job.spec_index].size() <= job.kernel_index) rows_per_spec[job.spec_index].resize(job.kernel_index + 1);
  }
  std::atomic<size_t> next{0}, done{0};
  const bool progress = !json_option() && isatty(STDERR_FILENO);
  std::mutex print_mutex;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < std::min<size_t>(jobs, plan.size()); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < plan.size();) {
        Row& row = rows_per_spec[plan[i].spec_index][plan[i].kernel_index];
        row = prewarm_one(engine, plan[i].spec);
        const size_t finished = ++done;
        if (progress) {
          std::lock_guard<std::mutex> lock(print_mutex);
          std::fprintf(stderr, "\r[%zu/%zu] %-90.90s", finished, plan.size(), row.spec.c_str());
          std::fflush(stderr);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  if (progress) std::fprintf(stderr, "\r%*s\r", 100, "");
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  // 3. Report.
  std::vector<Row> rows;
  for (std::vector<Row>& r : rows_per_spec) rows.insert(rows.end(), r.begin(), r.end());
  if (!NoCache) fail_unstored(rows, engine.cache());
  if (json_option()) print_json(rows); else print_table(rows, wall_ms, NoCache ? std::string() : engine.cache().dir());
  for (const Row& r : rows)
    if (r.status == "failed") return kExitFailure;
  return kExitOk;
}

}  // namespace flashjit::tool
