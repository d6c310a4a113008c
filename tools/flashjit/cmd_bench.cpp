// flashjit bench: times kernels on the GPU two ways per cell, both with device events:
//   idle  - one launch from an idle stream (what a caller sees with repeated arguments: launch and kernel;
//           the parameters, tensor maps included, are built once per input set, as the C API caches them)
//   graph - replay of a CUDA graph of launches (kernel time)
// Median of --iters after warm-up, rotating among input sets larger than L2 in total, random data.
//   floor - idle minus graph time of a kernel that returns at once, launched with the cell's shape:
//           the part of idle - graph that launching from an idle stream costs on this machine
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "driver/context.hpp"
#include "driver/device_info.hpp"
#include "launch/attention_launch.hpp"
#include "tools/flashjit/bench_timer.hpp"
#include "tools/flashjit/commands.hpp"
#include "tools/flashjit/feature_flags.hpp"
#include "verify/check.hpp"
#include "verify/device_random.hpp"
#include "verify/engine_check.hpp"

// The mask rule (keys_read), as the kernels and the reference apply it.
#include "../../templates/visibility.cuh"

namespace flashjit::tool {
namespace cl = llvm::cl;

static cl::opt<std::string> Grid("grid", cl::desc("Cells: fa3 (the FlashAttention-3 paper's grid), headline, gqa, decode, all"),
                                 cl::init(""), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::list<std::string> BenchSpecs("spec", cl::desc("Bench this spec on the shape given by the shape flags (repeatable)"),
                                        cl::value_desc("SPEC"), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BBatch("batch", cl::desc("Batch (with --spec)"), cl::init(2), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BSeqQ("seqlen-q", cl::desc("Query length (with --spec)"), cl::init(8192), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BSeqK("seqlen-k", cl::desc("Key length (with --spec)"), cl::init(8192), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BHeadsQ("heads-q", cl::desc("Query heads (with --spec)"), cl::init(16), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BHeadsKv("heads-kv", cl::desc("KV heads (with --spec; default heads-q)"), cl::init(0), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> Iters("iters", cl::desc("Timed runs per cell and method (median reported)"), cl::init(30), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BDevice("device", cl::desc("Device ordinal"), cl::init(0), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<std::string> BSeqlens("seqlens", cl::desc("varlen/paged specs: each sequence's query and key counts, Q:K,Q:K,... "
                                                        "(default: --batch sequences of --seqlen-q:--seqlen-k)"),
                                     cl::value_desc("Q:K,..."), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<int> BPageSize("page-size", cl::desc("paged specs: keys per page"), cl::init(16), cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<bool> BVInK("v-in-k", cl::desc("varlen/paged specs: V is K's first head_dim_v columns, the same memory (MLA's latent cache; TB/s counts K alone)"),
                           cl::cat(tool_category()), cl::sub(bench_command()));
static cl::opt<bool> BPdl("pdl", cl::desc("Launch with programmatic dependent launch (the C API's FLASHJIT_ATTENTION_FLAG_PDL)"),
                          cl::init(false), cl::cat(tool_category()), cl::sub(bench_command()));

namespace {

Cell make_cell(const std::string& group, DType dtype, int d, bool causal, int batch, int sq, int sk, int hq, int hkv) {
  Cell c;
  c.group = group;
  c.spec.dtype = dtype;
  c.spec.head_dim = d;
  c.spec.causal = causal;
  c.batch = batch; c.seqlen_q = sq; c.seqlen_k = sk; c.heads_q = hq; c.heads_kv = hkv;
  return c;
}

std::vector<Cell> cells_for(const std::string& grid) {
  std::vector<Cell> cells;
  const bool all = grid == "all";
  if (grid == "fa3" || all) {  // 16k tokens, hidden 2048
    for (DType dt : {DType::kBf16, DType::kFp16})
      for (int d : {64, 128, 256})
        for (bool causal : {false, true})
          for (int s : {512, 1024, 2048, 4096, 8192, 16384})
            cells.push_back(make_cell("fa3", dt, d, causal, 16384 / s, s, s, 2048 / d, 2048 / d));
  }
  if (grid == "headline") {
    cells.push_back(make_cell("fa3", DType::kBf16, 128, false, 2, 8192, 8192, 16, 16));
    cells.push_back(make_cell("fa3", DType::kBf16, 256, false, 4, 4096, 4096, 8, 8));
    cells.push_back(make_cell("fa3", DType::kBf16, 64, false, 1, 16384, 16384, 32, 32));
    cells.push_back(make_cell("fa3", DType::kBf16, 128, true, 2, 8192, 8192, 16, 16));
  }
  if (grid == "gqa" || all || grid == "headline") {
    for (bool causal : {false, true})
      for (int s : {2048, 8192}) cells.push_back(make_cell("gqa", DType::kBf16, 128, causal, 16384 / s, s, s, 32, 8));
  }
  if (grid == "decode" || all) {
    for (int sq : {1, 16})
      for (int sk : {4096, 32768}) cells.push_back(make_cell("decode", DType::kBf16, 128, false, sk == 4096 ? 32 : 8, sq, sk, 32, 8));
  }
  return cells;
}

// The engine cell as the reference sees it (lengths, mask), for its useful FLOPs.
EngineProblem engine_problem(const Cell& c) {
  EngineProblem p;
  p.causal = c.spec.causal;
  p.seqlen_q = c.engine_q;
  p.seqlen_k = c.engine_k;
  p.features = c.features;
  return p;
}

bool has_window_or_chunk(const AttentionFeatures& f) { return f.window_left != -1 || f.window_right != -1 || f.chunk != 0; }

// The keys some row of a sequence sees (a row's keys are one run whose ends never move left:
// visibility.cuh, MaskRule), which are the keys the kernel reads.
double keys_read(const AttentionFeatures& f, bool causal, int seqlen_q, int seqlen_k) {
  const MaskRule rule{causal, f.window_left, f.window_right, f.chunk};
  int first = seqlen_k, last = -1;
  for (int row = 0; row < seqlen_q; ++row) {
    if (visible_key_count(rule, row, seqlen_q, seqlen_k) <= 0) continue;
    first = std::min(first, first_visible_key(rule, row, seqlen_q, seqlen_k));
    last = std::max(last, last_visible_key(rule, row, seqlen_q, seqlen_k));
  }
  return last >= first ? last - first + 1 : 0;
}

// Multiply-adds of a visible query-key pair and head, twice: Q K^T's head_dim and P V's head_dim_v
// (4 x head_dim where they are equal).
double flops_per_pair(const Cell& c) { return 2.0 * (c.spec.head_dim + c.spec.effective_head_dim_v()); }

// Useful FLOPs (2 x (head_dim + head_dim_v) a visible query-key pair and head): a window or a
// chunk counts the pairs its rule leaves visible; a causal mask alone counts half of seqlen_q x
// seqlen_k where they are equal (FlashAttention-3's count; the exact pairs are (s + 1) / s of it),
// an engine cell every sequence's visible pairs.
double flops(const Cell& c) {
  if (c.engine()) return flops_per_pair(c) * c.heads_q * visible_pairs(engine_problem(c));
  if (has_window_or_chunk(c.features)) {
    EngineProblem one = engine_problem(c);
    one.seqlen_q = {c.seqlen_q};
    one.seqlen_k = {c.seqlen_k};
    return flops_per_pair(c) * c.batch * c.heads_q * visible_pairs(one);
  }
  const double f = flops_per_pair(c) * c.batch * c.heads_q * double(c.seqlen_q) * c.seqlen_k;
  return c.spec.causal && c.seqlen_q == c.seqlen_k ? f / 2 : f;
}

// Bytes of K and V read (the decode figure of merit): every key of a sequence, or with a window
// or a chunk the keys some row sees, K's head_dim and V's head_dim_v columns; 2 bytes an element,
// 1 in an FP8 cache (kv_dtype=e4m3) or with FP8 operands (dtype=e4m3).
double kv_bytes(const Cell& c) {
  const bool masked = has_window_or_chunk(c.features);
  double keys = 0;
  if (c.engine()) {
    for (size_t b = 0; b < c.engine_k.size(); ++b)
      keys += masked ? keys_read(c.features, c.spec.causal, c.engine_q[b], c.engine_k[b]) : c.engine_k[b];
  } else {
    keys = c.batch * (masked ? keys_read(c.features, c.spec.causal, c.seqlen_q, c.seqlen_k) : double(c.seqlen_k));
  }
  const double element_bytes = c.spec.kv_fp8() || c.spec.fp8_operands() ? 1.0 : 2.0;
  // V in K's rows (--v-in-k), or qv=1's k and V (head_dim columns together): the latent rows once.
  const int v_columns = c.v_in_k || c.spec.qv ? 0 : c.spec.effective_head_dim_v();
  return element_bytes * c.heads_kv * keys * double(c.spec.head_dim + v_columns);
}

// The text row's last column: V's head dim where it is not Q's, the masks and scores, the FP8
// cache (kv=e4m3 and its scales), the error.
std::string row_note(const Cell& c, const std::string& error) {
  const int dv = c.spec.effective_head_dim_v();
  std::string note = (dv != c.spec.head_dim ? " dv=" + std::to_string(dv) : std::string()) + (c.v_in_k ? " v=k-prefix" : "") + c.features.describe() + (c.spec.kv_fp8() ? " kv=e4m3" + Bench::fp8_of(c).describe().substr(5) : "") +
                     (c.spec.fp8_operands() ? " qkv=e4m3" + Bench::fp8_of(c).describe().substr(5) : "");
  if (!error.empty()) note += " " + error;
  return note.empty() ? note : note.substr(1);
}

}  // namespace

int run_bench() {
  // 1. Cells: a named grid, or --spec on the shape flags.
  // NOTES: one or the other: --spec's cells take the shape flags, a grid's cells their own shapes.
  if (!Grid.empty() && !BenchSpecs.empty()) return usage_error("--grid and --spec do not go together: bench a grid, or specs on the shape flags");
  std::vector<Cell> cells = cells_for(Grid.empty() && BenchSpecs.empty() ? "all" : Grid.getValue());
  if (!Grid.empty() && cells.empty()) return usage_error("unknown --grid '" + Grid + "'; allowed: fa3, headline, gqa, decode, all");
  if (BenchSpecs.empty() && !first_feature_flag().empty()) return usage_error(first_feature_flag() + " needs --spec (a grid's cells have no masks or scores)");
  if (BenchSpecs.empty() && !first_fp8_flag().empty()) return usage_error(first_fp8_flag() + " needs --spec (a grid's cells have 16-bit Q, K and V)");
  // The FP8 flags apply to the specs with kv_dtype=e4m3 or dtype=e4m3 (their 16-bit twins in the
  // same run take none); refused when no spec has the key (each flag naming the key it needs).
  bool any_fp8 = false;
  for (const std::string& text : BenchSpecs) {
    if (auto spec = parse_spec(text)) any_fp8 = any_fp8 || spec->kv_fp8() || spec->fp8_operands();
  }
  for (const std::string& text : BenchSpecs) {
    auto spec = parse_spec(text);
    if (!spec) return fail(spec.error());
    Cell c;
    c.group = "custom";
    c.spec = *spec;
    c.batch = BBatch; c.seqlen_q = BSeqQ; c.seqlen_k = BSeqK; c.heads_q = BHeadsQ; c.heads_kv = BHeadsKv ? BHeadsKv : BHeadsQ;
    if (c.engine()) {  // each sequence's lengths: --seqlens, or --batch copies of the shape flags
      std::string error;
      if (BSeqlens.empty()) {
        c.engine_q.assign(size_t(c.batch), c.seqlen_q);
        c.engine_k.assign(size_t(c.batch), c.seqlen_k);
      } else if (!parse_engine_lengths(BSeqlens, &c.engine_q, &c.engine_k, &error)) {
        return usage_error("--seqlens: " + error);
      }
      if (BPageSize < 1) return usage_error("--page-size must be at least 1, got " + std::to_string(BPageSize));
      c.page_size = BPageSize;
      c.batch = int(c.engine_q.size());
      c.seqlen_q = *std::max_element(c.engine_q.begin(), c.engine_q.end());
      c.seqlen_k = *std::max_element(c.engine_k.begin(), c.engine_k.end());
    } else if (!BSeqlens.empty()) {
      return usage_error("--seqlens needs a varlen=1 or paged=1 spec");
    }
    if (BPageSize.getNumOccurrences() > 0 && !c.spec.paged) return usage_error("--page-size needs a paged=1 spec");
    if (BVInK && !c.engine()) return usage_error("--v-in-k needs a varlen=1 or paged=1 spec");
    if (c.spec.qv && !c.engine()) return usage_error("bench of a qv=1 spec needs varlen=1 or paged=1");
    if (c.spec.qv && BVInK) return usage_error("--v-in-k does not go with qv=1 (V is its own tensor there)");
    if (BVInK && c.spec.fp8_operands()) return usage_error("--v-in-k needs 16-bit or kv_dtype=e4m3 K and V (not dtype=e4m3)");
    c.v_in_k = BVInK || c.spec.v_is_k_rows();  // spec key v_in_k=1 (absorbed form) takes V in K's rows: implied
    FeatureChoice features;
    if (std::string bad = features_from_flags(c.spec, c.batch, c.heads_q, &features); !bad.empty()) return usage_error(bad);
    c.features = features.features;
    c.sinks_bf16 = features.sinks_bf16;
    if (c.spec.kv_fp8() || c.spec.fp8_operands() || !any_fp8) {
      if (std::string bad = fp8_from_flags(c.spec, &c.fp8, c.v_in_k); !bad.empty()) return usage_error(bad);
    }
    cells.push_back(c);
  }
  if (Iters < 1) return usage_error("--iters must be at least 1");
  // 2. Device.
  auto api = driver();
  if (!api) return fail(api.error());
  auto info = query_device(**api, BDevice);
  if (!info) return fail(info.error());
  auto context = PrimaryContext::retain(**api, BDevice);
  if (!context) return fail(context.error());
  (*api)->cuCtxSetCurrent(context->get());
  Bench bench{**api, context->get(), nullptr, nullptr, nullptr, size_t(info->l2_bytes), Iters, info->sm_count};
  bench.pdl = BPdl;
  (*api)->cuStreamCreate(&bench.stream, CU_STREAM_NON_BLOCKING);
  (*api)->cuEventCreate(&bench.start, CU_EVENT_DEFAULT);
  (*api)->cuEventCreate(&bench.stop, CU_EVENT_DEFAULT);
  Engine engine(engine_options());

  // 3. Time every cell.
  llvm::json::Array rows;
  if (!json_option()) {
    std::printf("%-6s %-4s %3s %3s %5s %6s %6s %4s %4s %9s %9s %8s %8s %5s %8s %-6s\n", "group", "dt", "d", "cau", "batch", "sq", "sk",
                "hq", "hkv", "graph_us", "idle_us", "TFLOP/s", "TB/s", "regs", "floor_us", "kernel");
  }
  int failures = 0;
  for (const Cell& c : cells) {
    Timing t = bench.run(engine, c);
    const double tflops = t.graph_ms > 0 ? flops(c) / (t.graph_ms * 1e9) : 0;
    const double tflops_idle = t.idle_ms > 0 ? flops(c) / (t.idle_ms * 1e9) : 0;
    const double tbps = t.graph_ms > 0 ? kv_bytes(c) / (t.graph_ms * 1e9) : 0;
    failures += !t.error.empty();
    if (json_option()) {
      rows.push_back(llvm::json::Object{{"group", c.group}, {"spec", to_string(c.spec)}, {"dtype", dtype_name(c.spec.dtype)},
                                        {"head_dim", c.spec.head_dim}, {"head_dim_v", c.spec.effective_head_dim_v()},
                                        {"causal", c.spec.causal}, {"batch", c.batch},
                                        {"seqlen_q", c.seqlen_q}, {"seqlen_k", c.seqlen_k}, {"heads_q", c.heads_q},
                                        {"heads_kv", c.heads_kv}, {"graph_ms", t.graph_ms}, {"idle_ms", t.idle_ms},
                                        {"tflops", tflops}, {"tflops_idle", tflops_idle}, {"kv_tbps", tbps},
                                        {"registers", t.registers}, {"floor_idle_ms", t.floor_idle_ms},
                                        {"floor_graph_ms", t.floor_graph_ms}, {"kernel_spec", t.kernel_spec},
                                        {"long_kernel", t.long_kernel}, {"flops", flops(c)}, {"kv_bytes", kv_bytes(c)}, {"v_in_k", c.v_in_k},
                                        {"features", features_json({c.features, c.sinks_bf16}, t.features)},
                                        {"kv_dtype", c.spec.kv_fp8() ? "e4m3" : dtype_name(c.spec.dtype)},
                                        {"fp8", fp8_json(Bench::fp8_of(c), t.fp8)}, {"error", t.error}});
    } else {
      std::printf("%-6s %-4s %3d %3d %5d %6d %6d %4d %4d %9.1f %9.1f %8.1f %8.2f %5d %8.1f %-6s %s\n", c.group.c_str(),
                  dtype_name(c.spec.dtype), c.spec.head_dim, int(c.spec.causal), c.batch, c.seqlen_q, c.seqlen_k, c.heads_q,
                  c.heads_kv, t.graph_ms * 1e3, t.idle_ms * 1e3, tflops, tbps, t.registers,
                  (t.floor_idle_ms - t.floor_graph_ms) * 1e3, t.error.empty() ? (t.long_kernel ? "long" : "main") : "-",
                  row_note(c, t.error).c_str());
      std::fflush(stdout);
    }
  }
  engine.modules().drop_context(context->get());
  drop_verify_kernels(context->get());
  drop_launch_floor(context->get());
  if (json_option()) llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(rows))) << "\n";
  return failures ? kExitFailure : kExitOk;
}

}  // namespace flashjit::tool
