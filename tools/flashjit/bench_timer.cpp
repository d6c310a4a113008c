#include "tools/flashjit/bench_timer.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "config/kernel_config.hpp"
#include "driver/launch.hpp"
#include "launch/attention_launch.hpp"
#include "verify/builtin_kernel.hpp"
#include "verify/check.hpp"
#include "verify/device_random.hpp"
#include "verify/engine_check.hpp"

namespace flashjit::tool {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The launch floor: a kernel that returns at once, launched with an attention kernel's shape.
BuiltinKernel& launch_floor_kernel() {
  static BuiltinKernel* kernel = new BuiltinKernel(R"CUDA(extern "C" __global__ void flashjit_launch_floor() {})CUDA",
                                                   "flashjit_launch_floor", "launch floor", kMaxSharedMemoryBytes);  // see BuiltinKernel
  return *kernel;
}

AttentionArgs extent_args(const Cell& cell) {
  return attention_extents(cell.batch, cell.seqlen_q, cell.seqlen_k, cell.heads_q, cell.heads_kv);
}

}  // namespace

void drop_launch_floor(CUcontext context) { launch_floor_kernel().drop(context); }

double Bench::elapsed_ms() {
  float ms = 0;
  api.cuEventSynchronize(stop);
  api.cuEventElapsedTime(&ms, start, stop);
  return ms;
}

constexpr int kBenchReferenceRows = 32;

Fp8Cache Bench::fp8_of(const Cell& cell) {
  Fp8Cache fp8 = cell.fp8;
  fp8.on = cell.spec.kv_fp8() || cell.spec.fp8_operands();
  fp8.operands = cell.spec.fp8_operands();
  if (fp8.operands) fp8.out_bf16 = cell.spec.out_dtype == DType::kBf16;
  return fp8;
}

// An engine cell: one set of buffers (the lengths decide the work), checked once against the
// float64 reference, then its parameters built once and timed like a dense cell's.
Timing Bench::run_engine(const Cell& cell, const KernelConfig& config, const AttentionFunctions& fns, Timing t) {
  EngineProblem p;
  p.bf16 = config.spec.dtype != DType::kFp16;  // e4m3: the bf16 copies
  p.head_dim = config.spec.head_dim;
  p.head_dim_v = config.spec.effective_head_dim_v();  // V and O
  p.causal = config.spec.causal;
  p.heads_q = cell.heads_q, p.heads_kv = cell.heads_kv;
  p.seqlen_q = cell.engine_q, p.seqlen_k = cell.engine_k;
  p.kv = config.spec.paged ? KvSource::kPaged : KvSource::kPacked;
  p.page_size = cell.page_size;
  p.v_is_k_prefix = cell.v_in_k;
  p.qv_split = config.spec.qv;
  if (config.spec.split_kv) p.max_splits = 64;  // the launch picks its count from the SMs
  p.dynamic_schedule = config.spec.dynamic_schedule;
  p.inline_combine = config.spec.inline_combine;
  // NOTES: the check before timing covers 32 rows of each longer sequence: the float64 CPU
  // reference of every row took minutes at 8 x 512 x 8k (`flashjit check` covers every row).
  p.reference_rows = kBenchReferenceRows;
  p.features = cell.features;
  p.sinks_bf16 = cell.sinks_bf16;
  p.fp8 = fp8_of(cell);  // the check uploads the codes and the scales the timed launches read
  EngineBuffers buffers(api, p, capacity_for(p));
  t.features = buffers.args(p, false).features;  // the same before the check uploads the sinks and slopes
  t.fp8 = buffers.args(p, false).fp8;
  std::mt19937_64 rng(1234);
  const EngineCheck checked = check_engine_attention({&api, context, stream, sm_count}, fns, config, p, buffers, rng);
  if (!checked.result.passed_within(o_error_bound(p.bf16, p.fp8)) || !checked.result.error.empty()) {
    t.error = "check failed: " + checked.result.error + " " + checked.detail;
    return t;
  }
  const AttentionArgs args = buffers.args(p, false);
  auto params = make_kernel_params(api, config, args, sm_count);
  if (!params) { t.error = params.error().message; return t; }
  auto launch = [&](int) { return launch_attention_kernels(api, fns, config, args, *params, stream, sm_count, pdl); };
  for (int i = 0; i < 5; ++i) {
    if (Status st = launch(i); !st) { t.error = st.error().message; return t; }
  }
  if (Status st = time_two_ways(launch, t.idle_ms, t.graph_ms); !st) t.error = st.error().message;
  return t;
}

Timing Bench::run(Engine& engine, const Cell& cell) {
  Timing t;
  auto family = engine.prepare_family(cell.spec, engine.options().policy);
  if (!family) { t.error = family.error().message; return t; }
  const PreparedKernel* prepared = &family->for_launch(extent_args(cell), sm_count);  // what the C API would launch
  t.long_kernel = prepared != &family->main;
  t.registers = prepared->compiled->report.registers;
  t.kernel_spec = to_string(prepared->config.spec);
  auto loaded = engine.load(api, *prepared, context);
  if (!loaded) { t.error = loaded.error().message; return t; }
  const KernelConfig& config = prepared->config;
  const CUfunction fn = (*loaded)->function();
  if (cell.engine()) return run_engine(cell, config, {fn, (*loaded)->more(0)}, t);
  // Input sets: enough that together they exceed L2 three times over (at most 8). A set: Q, K, V,
  // O (Q and K head_dim wide, V and O head_dim_v); K and V e4m3 (1 byte an element) with an FP8
  // cache, Q, K and V with FP8 operands (O 16-bit), whose scales all sets share.
  const size_t d = size_t(cell.spec.head_dim), dv = size_t(cell.spec.effective_head_dim_v());
  const size_t q_elems = size_t(cell.batch) * cell.seqlen_q * cell.heads_q * d;
  const size_t o_elems = size_t(cell.batch) * cell.seqlen_q * cell.heads_q * dv;
  const size_t k_elems = size_t(cell.batch) * cell.seqlen_k * cell.heads_kv * d;
  const size_t v_elems = size_t(cell.batch) * cell.seqlen_k * cell.heads_kv * dv;
  const Fp8Cache fp8 = fp8_of(cell);
  const bool operands = fp8.on && fp8.operands;
  const size_t kv_elem_bytes = fp8.on ? 1 : 2, q_elem_bytes = operands ? 1 : 2;
  const size_t set_bytes = q_elem_bytes * q_elems + 2 * o_elems + kv_elem_bytes * (k_elems + v_elems);
  std::optional<DeviceBuffer> q_scale, k_scale, v_scale;
  auto upload_scales = [&](std::optional<DeviceBuffer>& buffer, Fp8Tensor t) {
    const std::vector<float> scales = fp8.scales(t, cell.batch, cell.heads_kv);
    buffer.emplace(api, scales.size() * 4);
    buffer->upload(scales.data(), scales.size() * 4);
  };
  if (fp8.on) {
    upload_scales(k_scale, Fp8Tensor::kK);
    upload_scales(v_scale, Fp8Tensor::kV);
    if (operands) upload_scales(q_scale, Fp8Tensor::kQ);
  }
  const int sets = int(std::clamp<size_t>((3 * l2_bytes + set_bytes - 1) / set_bytes, 1, 8));
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<AttentionArgs> args(sets);
  // The sinks and slopes: one copy for every input set, uploaded here, before anything is timed.
  FeatureBuffers features(api, cell.batch, cell.heads_q);
  if (std::string bad = features.upload(cell.features, cell.sinks_bf16); !bad.empty()) { t.error = bad; return t; }
  // scheduler=dynamic: one tile counter (zeroed once; every launch leaves it at zero) for all sets.
  std::optional<DeviceBuffer> counter;
  if (config.spec.dynamic_schedule) {
    counter.emplace(api, 256);
    counter->fill_bytes(0);
  }
  for (int s = 0; s < sets; ++s) {
    buffers.push_back(std::make_unique<DeviceBuffer>(api, set_bytes));
    const CUdeviceptr base = buffers.back()->ptr();
    AttentionArgs& a = args[s] = extent_args(cell);
    a.q = base;
    a.k = a.q + q_elem_bytes * q_elems;
    a.v = a.k + kv_elem_bytes * k_elems;
    a.o = a.v + kv_elem_bytes * v_elems;
    // (The 16-bit values of an FP8 cache's Q, or of O's poison-free start, in the spec's dtype.)
    Status filled = operands ? fill_random_e4m3(api, context, stream, a.q, q_elems, fp8.q_scale, 3456 + s)
                    : fp8.on ? fill_random_normal(api, context, stream, a.q, q_elems, cell.spec.dtype == DType::kBf16, 1234 + s)
                             : fill_random_normal(api, context, stream, base, set_bytes / 2, cell.spec.dtype == DType::kBf16, 1234 + s);
    if (filled && fp8.on) filled = fill_random_e4m3(api, context, stream, a.k, k_elems, fp8.k_scale, 5678 + s);
    if (filled && fp8.on) filled = fill_random_e4m3(api, context, stream, a.v, v_elems, fp8.v_scale, 9012 + s);
    if (!filled) {
      t.error = filled.error().message;
      return t;
    }
    a.q_strides = contiguous_bshd(cell.seqlen_q, cell.heads_q, int(d));
    a.o_strides = contiguous_bshd(cell.seqlen_q, cell.heads_q, int(dv));
    a.k_strides = contiguous_bshd(cell.seqlen_k, cell.heads_kv, int(d));
    a.v_strides = contiguous_bshd(cell.seqlen_k, cell.heads_kv, int(dv));
    if (counter) a.decode.workspace = counter->ptr(), a.decode.workspace_bytes = counter->bytes();
    if (fp8.on) {
      a.fp8.k_scale = k_scale->ptr(), a.fp8.v_scale = v_scale->ptr();
      a.fp8.k_scale_head_stride = a.fp8.v_scale_head_stride = fp8.scale_head_stride();
      a.fp8.k_scale_batch_stride = a.fp8.v_scale_batch_stride = fp8.scale_batch_stride(cell.heads_kv);
    }
    if (operands) {
      a.fp8.q_scale = q_scale->ptr();
      a.fp8.q_scale_head_stride = fp8.scale_head_stride();
      a.fp8.q_scale_batch_stride = fp8.scale_batch_stride(cell.heads_kv);
    }
    features.set_launch_features(a.features, cell.features, cell.sinks_bf16);
  }
  t.features = args[0].features;
  t.fp8 = args[0].fp8;
  // Parameters built once per input set, as the C API keeps them for repeated arguments (its
  // params cache): the timed launches are what an engine's steady state pays, no tensor-map
  // encoding in them.
  std::vector<KernelParams> params;
  for (const AttentionArgs& a : args) {
    auto built = make_kernel_params(api, config, a, sm_count);
    if (!built) { t.error = built.error().message; return t; }
    params.push_back(*built);
  }
  LaunchShape shape = attention_launch_shape(config, args[0], sm_count);
  shape.programmatic = pdl;
  auto launch = [&](int i) {
    void* kernel_args[] = {&params[size_t(i % sets)]};
    return launch_kernel(api, fn, shape, stream, kernel_args);
  };
  // Warm-up.
  for (int i = 0; i < 5; ++i) {
    if (Status st = launch(i); !st) { t.error = st.error().message; return t; }
  }
  if (Status st = check(api, api.cuStreamSynchronize(stream), "warm-up"); !st) { t.error = st.error().message; return t; }
  if (Status st = time_two_ways(launch, t.idle_ms, t.graph_ms); !st) { t.error = st.error().message; return t; }
  if (!launch_floor) return t;
  // The same launch shape (PDL too) with a kernel that returns at once: what launching alone costs here.
  auto empty = launch_floor_kernel().load(api, context);
  if (!empty) { t.error = empty.error().message; return t; }
  auto launch_empty = [&](int) { return launch_kernel(api, (*empty)->function(), shape, stream, nullptr); };
  for (int i = 0; i < 5; ++i) (void)launch_empty(i);  // warm-up
  if (Status st = time_two_ways(launch_empty, t.floor_idle_ms, t.floor_graph_ms); !st) t.error = st.error().message;
  return t;
}

Status Bench::time_two_ways(const std::function<Status(int)>& launch, double& idle_ms, double& graph_ms) {
  // 1. One launch from an idle stream.
  std::vector<double> idle;
  for (int i = 0; i < iters; ++i) {
    api.cuStreamSynchronize(stream);
    api.cuEventRecord(start, stream);
    (void)launch(i);
    api.cuEventRecord(stop, stream);
    idle.push_back(elapsed_ms());
  }
  // 2. Graph replay: a graph of `per_graph` launches, per-launch time = replay time / per_graph.
  const int per_graph = 10;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  if (Status st = check(api, api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture"); !st) return st;
  for (int i = 0; i < per_graph; ++i) (void)launch(i);
  if (Status st = check(api, api.cuStreamEndCapture(stream, &graph), "end capture"); !st) return st;
  if (Status st = check(api, api.cuGraphInstantiate(&exec, graph, 0), "instantiate"); !st) {
    api.cuGraphDestroy(graph);
    return st;
  }
  api.cuGraphLaunch(exec, stream);
  std::vector<double> replay;
  for (int i = 0; i < iters; ++i) {
    api.cuEventRecord(start, stream);
    api.cuGraphLaunch(exec, stream);
    api.cuEventRecord(stop, stream);
    replay.push_back(elapsed_ms() / per_graph);
  }
  Status synced = check(api, api.cuStreamSynchronize(stream), "bench");
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  idle_ms = median(idle);
  graph_ms = median(replay);
  return synced;
}



}  // namespace flashjit::tool
