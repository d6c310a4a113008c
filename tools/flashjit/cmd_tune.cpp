// flashjit tune: for a spec left at auto, time candidate tiles and pipelines on the GPU once and
// record the winner beside the cache entries, so later processes launch it without tuning.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "driver/context.hpp"
#include "driver/device_info.hpp"
#include "runtime/tuning.hpp"
#include "tools/flashjit/bench_timer.hpp"
#include "tools/flashjit/commands.hpp"
#include "verify/check.hpp"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<std::string> TuneSpec("spec", cl::desc("The spec to tune, tile fields left out"),
                                     cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> TBatch("batch", cl::desc("Batch of the tuning shape"), cl::init(2), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> TSeqQ("seqlen-q", cl::desc("Query length of the tuning shape"), cl::init(8192), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> TSeqK("seqlen-k", cl::desc("Key length of the tuning shape"), cl::init(8192), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> THeadsQ("heads-q", cl::desc("Query heads (default 2048 / head_dim)"), cl::init(0), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> THeadsKv("heads-kv", cl::desc("KV heads (default heads-q)"), cl::init(0), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> TIters("iters", cl::desc("Timed runs per candidate (median)"), cl::init(10), cl::cat(tool_category()), cl::sub(tune_command()));
static cl::opt<int> TDevice("device", cl::desc("Device ordinal"), cl::init(0), cl::cat(tool_category()), cl::sub(tune_command()));

namespace {

constexpr size_t kConfirmed = 3;  // candidates timed again before the winner is chosen

// The candidates: the table's own choice, then block_n x pingpong on and off with two consumer
// warpgroups (and three up to head dim 96, where they fit in 160 registers), two stages and no
// cluster; whatever does not fit shared memory is dropped, spills are dropped after compiling.
std::vector<AttentionSpec> candidates(const AttentionSpec& base) {
  std::vector<AttentionSpec> out;
  std::set<std::string> seen;
  auto add = [&](const AttentionSpec& s) {
    auto config = make_config(s);
    if (config && seen.insert(to_string(config->spec)).second) out.push_back(config->spec);
  };
  add(base);
  for (int wgs : {2, 3}) {
    if (wgs == 3 && base.head_dim > 96) break;
    for (int block_n : {64, 80, 96, 112, 128, 144, 160, 176, 192})
      for (int pingpong : {1, 0}) {
        AttentionSpec s = base;
        s.block_n = block_n;
        s.overlap = 1;
        s.pingpong = pingpong;
        s.consumer_wgs = wgs;
        s.stages = 2;
        s.cluster = 1;
        add(s);
      }
  }
  return out;
}

// Compiles every candidate on all cores; keeps those that compiled without spills.
std::vector<AttentionSpec> compile_all(Engine& engine, const std::vector<AttentionSpec>& specs) {
  std::vector<char> keep(specs.size(), 0);
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < std::max(1u, std::thread::hardware_concurrency()); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < specs.size();) {
        auto prepared = engine.prepare(specs[i]);
        keep[i] = prepared && prepared->compiled->report.spill_bytes() == 0;
      }
    });
  }
  for (auto& w : workers) w.join();
  std::vector<AttentionSpec> out;
  for (size_t i = 0; i < specs.size(); ++i)
    if (keep[i]) out.push_back(specs[i]);
  return out;
}

}  // namespace

int run_tune() {
  // 1. The base spec: tune chooses the tile and pipeline fields, so they must be left out.
  if (TuneSpec.getNumOccurrences() == 0) return missing_spec("tune");
  auto base = parse_spec(TuneSpec);
  if (!base) return fail(base.error());
  if (!has_auto_tiles(*base)) {
    return usage_error("tune chooses stages, consumer_wgs, block_m, block_n, cluster, overlap and pingpong: leave them out of --spec");
  }
  if (TIters < 1 || TBatch < 1 || TSeqQ < 1 || TSeqK < 1) return usage_error("--iters, --batch and the lengths must be at least 1");
  Engine engine(engine_options());
  if (engine.cache().dir().empty()) return fail(Error::make(ErrorCode::kCacheIo, "tune records its winner in the cache directory, and there is none"));
  // 2. The device (first: without one there is nothing to time).
  auto api = driver();
  if (!api) return fail(api.error());
  auto info = query_device(**api, TDevice);
  if (!info) return fail(info.error());
  auto context = PrimaryContext::retain(**api, TDevice);
  if (!context) return fail(context.error());
  // 3. Candidates, compiled in parallel.
  std::vector<AttentionSpec> specs = compile_all(engine, candidates(*base));
  if (specs.empty()) return fail(Error::make(ErrorCode::kCompileFailed, "no candidate compiled without spills"));
  (*api)->cuCtxSetCurrent(context->get());
  Bench bench{**api, context->get(), nullptr, nullptr, nullptr, size_t(info->l2_bytes), TIters, info->sm_count};
  bench.launch_floor = false;  // tune compares candidates' kernel times only
  (*api)->cuStreamCreate(&bench.stream, CU_STREAM_NON_BLOCKING);
  (*api)->cuEventCreate(&bench.start, CU_EVENT_DEFAULT);
  (*api)->cuEventCreate(&bench.stop, CU_EVENT_DEFAULT);
  // 4. Time each candidate on the tuning shape (kernel time, graph replay).
  Cell cell;
  cell.group = "tune";
  cell.batch = TBatch;
  cell.seqlen_q = TSeqQ;
  cell.seqlen_k = TSeqK;
  cell.heads_q = THeadsQ ? THeadsQ : std::max(1, 2048 / base->head_dim);
  cell.heads_kv = THeadsKv ? THeadsKv : cell.heads_q;
  const std::string shape = "b=" + std::to_string(cell.batch) + " sq=" + std::to_string(cell.seqlen_q) + " sk=" +
                            std::to_string(cell.seqlen_k) + " hq=" + std::to_string(cell.heads_q) + " hkv=" + std::to_string(cell.heads_kv);
  llvm::json::Array rows;
  std::vector<double> first_ms(specs.size(), -1);  // below 0: did not run
  for (size_t i = 0; i < specs.size(); ++i) {
    cell.spec = specs[i];
    Timing t = bench.run(engine, cell);
    if (t.error.empty()) first_ms[i] = t.graph_ms;
    if (json_option()) rows.push_back(llvm::json::Object{{"spec", to_string(specs[i])}, {"graph_ms", t.graph_ms}, {"error", t.error}});
    else std::printf("%9.1f us  %s %s\n", t.graph_ms * 1e3, to_string(specs[i]).c_str(), t.error.c_str());
  }
  // 5. The fastest few again, interleaved over two rounds: the card's clocks drift during the first
  //    round (at the power cap one cell moves by up to ~10 % between runs), and neighbours in it
  //    are often closer than that. The winner has the lowest sum of its two re-timed medians.
  const std::vector<size_t> finalists = confirm_candidates(first_ms, kConfirmed);
  if (finalists.empty()) return fail(Error::make(ErrorCode::kDriverError, "no candidate ran"));
  std::vector<double> confirm_ms(finalists.size(), 0);
  for (int round = 0; round < 2; ++round) {
    for (size_t j = 0; j < finalists.size(); ++j) {
      cell.spec = specs[finalists[j]];
      Timing t = bench.run(engine, cell);
      if (!t.error.empty()) confirm_ms[j] = -1;
      else if (confirm_ms[j] >= 0) confirm_ms[j] += t.graph_ms;
    }
  }
  const std::optional<size_t> win = confirmed_winner(confirm_ms);
  if (!win) return fail(Error::make(ErrorCode::kDriverError, "no candidate ran again"));
  const std::string best = to_string(specs[finalists[*win]]);
  const double best_ms = confirm_ms[*win] / 2;
  llvm::json::Array confirmed;
  for (size_t j = 0; j < finalists.size(); ++j) {
    const std::string spec = to_string(specs[finalists[j]]);
    const bool ran = confirm_ms[j] >= 0;
    if (json_option()) confirmed.push_back(llvm::json::Object{{"spec", spec}, {"graph_ms", ran ? confirm_ms[j] / 2 : -1.0}});
    else if (ran) std::printf("confirm %9.1f us  %s\n", confirm_ms[j] / 2 * 1e3, spec.c_str());
    else std::printf("confirm    failed  %s\n", spec.c_str());
  }
  engine.modules().drop_context(context->get());
  drop_verify_kernels(context->get());
  // 6. Record the winner beside the cache entries.
  TuningRecord record{to_string(*base), best, best_ms * 1e3, shape};
  if (Status st = save_tuning_record(engine.cache().dir(), *base, record); !st) return fail(st.error());
  if (json_option()) {
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                               {"spec", record.base_spec}, {"winner", best}, {"kernel_us", record.kernel_us},
                                               {"shape", shape}, {"candidates", std::move(rows)},
                                               {"confirmed", std::move(confirmed)}}))
                 << "\n";
  } else {
    std::printf("winner for %s on %s: %s (%.1f us), recorded in %s\n", record.base_spec.c_str(), shape.c_str(), best.c_str(),
                record.kernel_us, tuning_record_path(engine.cache().dir(), *base).c_str());
  }
  return kExitOk;
}

}  // namespace flashjit::tool
