#include "support/gpu_harness.hpp"

#include <cstdlib>
#include <future>
#include <map>
#include <mutex>

#include "driver/device_info.hpp"
#include "runtime/engine.hpp"

namespace flashjit::testing {
namespace {

void expect_ok(Status st, const char* what) {
  if (!st) {
    std::fprintf(stderr, "%s: %s\n", what, st.error().message.c_str());
    std::abort();
  }
}

Engine& engine() {
  static Engine instance([] {
    EngineOptions o;
    o.memory_only = true;
    return o;
  }());
  return instance;
}

// FLASHJIT_TEST_HANG_TRAP=1 builds every kernel in the hang-trap mode: a hang becomes an error.
std::string test_spec(const std::string& text) {
  const char* trap = std::getenv("FLASHJIT_TEST_HANG_TRAP");
  return trap && *trap == '1' ? text + ",hang_trap=1" : text;
}

Result<PreparedKernel> prepare(const std::string& text) {
  auto spec = parse_spec(test_spec(text));
  if (!spec) return spec.take_error();
  return engine().prepare(*spec);
}

}  // namespace

GpuEnv* gpu_env(std::string* why_not) {
  static std::string reason;
  static GpuEnv* env = []() -> GpuEnv* {
    auto api = driver();
    if (!api) { reason = api.error().message; return nullptr; }
    int count = 0;
    (*api)->cuDeviceGetCount(&count);
    if (count == 0) { reason = "no CUDA device"; return nullptr; }
    auto dev = query_device(**api, 0);
    if (!dev) { reason = dev.error().message; return nullptr; }
    if (!dev->is_hopper()) { reason = "device 0 is " + dev->name + ", not sm_90 (Hopper)"; return nullptr; }
    auto ctx = PrimaryContext::retain(**api, 0);
    if (!ctx) { reason = ctx.error().message; return nullptr; }
    auto* e = new GpuEnv;
    e->api = *api;
    e->context = std::make_unique<PrimaryContext>(std::move(*ctx));
    e->sm_count = dev->sm_count;
    expect_ok(check(*e->api, e->api->cuCtxSetCurrent(e->context->get()), "cuCtxSetCurrent"), "gpu_env");
    expect_ok(check(*e->api, e->api->cuStreamCreate(&e->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"), "gpu_env");
    return e;
  }();
  if (!env && why_not) *why_not = reason;
  return env;
}

void precompile(const std::vector<std::string>& specs) {
  std::vector<std::future<void>> pending;
  for (const std::string& s : specs) pending.push_back(std::async(std::launch::async, [s] { (void)prepare(s); }));
  for (auto& f : pending) f.wait();
}

std::shared_ptr<TestKernel> get_test_kernel(const std::string& spec_text, std::string* error) {
  GpuEnv* env = gpu_env(nullptr);
  auto prepared = prepare(spec_text);
  if (!prepared) { *error = prepared.error().message + "\n" + prepared.error().log.substr(0, 2000); return nullptr; }
  auto loaded = engine().load(*env->api, *prepared, env->context->get());
  if (!loaded) { *error = loaded.error().message; return nullptr; }
  auto k = std::make_shared<TestKernel>();
  k->config = prepared->config;
  k->loaded = *loaded;
  k->registers = prepared->compiled->report.registers;
  k->spill_bytes = prepared->compiled->report.spill_bytes();
  return k;
}

Problem make_problem(bool bf16, int d, bool causal, int batch, int sq, int sk, int hq, int hkv) {
  Problem p;
  p.bf16 = bf16;
  p.head_dim = d;
  p.causal = causal;
  p.batch = batch;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.heads_q = hq;
  p.heads_kv = hkv;
  return p;
}

std::string Case::describe() const {
  return spec + " | " + problem.describe() + " | " + layout_name(layout) + (with_lse ? "" : " no-lse") +
         (max_ctas >= 0 ? " | " + std::to_string(max_ctas) + " CTAs" : "") +
         (fill_blocks >= 0 ? " | fill " + std::to_string(fill_blocks) : "") +
         (fill_blocks >= 0 && held_heads > 0 ? " of the last " + std::to_string(held_heads) + " heads" : "");
}

CheckResult run_case(const Case& c, std::mt19937_64& rng) {
  std::string error;
  auto kernel = get_test_kernel(c.spec, &error);
  if (!kernel) {
    CheckResult r;
    r.error = "kernel: " + error;
    return r;
  }
  CheckDevice device = gpu_env(nullptr)->device();
  if (c.max_ctas >= 0) device.max_ctas = c.max_ctas;
  device.fill_blocks = c.fill_blocks;
  device.held_heads = c.held_heads;
  return check_attention(device, kernel->loaded->function(), kernel->config, c.problem, c.layout, c.with_lse, rng);
}

ReferencePair references_on_random_inputs(const GpuEnv& env, const Problem& p, std::mt19937_64& rng, std::string* error) {
  const int d = p.head_dim, dv = p.v_dim();  // V: head_dim_v columns
  const Strides qs = contiguous_strides(p.seqlen_q, p.heads_q, d), ks = contiguous_strides(p.seqlen_k, p.heads_kv, d);
  const Strides vs = contiguous_strides(p.seqlen_k, p.heads_kv, dv);
  std::vector<uint16_t> q(size_t(p.batch) * p.seqlen_q * p.heads_q * d), k(size_t(p.batch) * p.seqlen_k * p.heads_kv * d);
  std::vector<uint16_t> v(size_t(p.batch) * p.seqlen_k * p.heads_kv * dv);
  fill_random(q, p.bf16, rng);
  fill_random(k, p.bf16, rng);
  fill_random(v, p.bf16, rng);
  DeviceBuffer dq(*env.api, q.size() * 2), dk(*env.api, k.size() * 2), dvb(*env.api, v.size() * 2);
  dq.upload(q.data(), q.size() * 2);
  dk.upload(k.data(), k.size() * 2);
  dvb.upload(v.data(), v.size() * 2);
  ReferencePair r;
  r.gpu = gpu_reference(env.device(), p, dq.ptr(), qs, dk.ptr(), ks, dvb.ptr(), vs, error);
  if (error->empty()) r.cpu = cpu_reference(p, q.data(), qs, k.data(), ks, v.data(), vs);
  return r;
}

}  // namespace flashjit::testing
