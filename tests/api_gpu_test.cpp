// The C API on a Hopper GPU (skipped, with the reason, elsewhere): flashjit_attention_forward
// against the float64 GPU reference, also through a handle's long-sequence kernel; 16 threads getting (first-time compiling) and launching
// kernels at once; capture in a CUDA graph and replay with new data in the same buffers; several
// CUDA contexts on one device, each with its own kernels, and a launch on another context's stream
// refused; an invalid device ordinal named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "flashjit/flashjit.h"
#include "support/gpu_harness.hpp"

namespace flashjit::testing {
namespace {

void expect_ok_cu(const DriverApi& api, CUresult r, const char* what) {
  ASSERT_EQ(r, CUDA_SUCCESS) << what << ": " << describe(api, r);
}

std::string last_message() { return flashjit_last_error_message(); }

// Device tensors of one problem, contiguous [b, s, h, d], with random inputs and poisoned outputs.
struct ApiProblem {
  Problem p;
  std::unique_ptr<DeviceBuffer> q, k, v, o, lse;
  Strides qs, ks;

  ApiProblem(const DriverApi& api, const Problem& problem) : p(problem) {
    qs = contiguous_strides(p.seqlen_q, p.heads_q, p.head_dim);
    ks = contiguous_strides(p.seqlen_k, p.heads_kv, p.head_dim);
    q = std::make_unique<DeviceBuffer>(api, q_elements() * 2);
    k = std::make_unique<DeviceBuffer>(api, kv_elements() * 2);
    v = std::make_unique<DeviceBuffer>(api, kv_elements() * 2);
    o = std::make_unique<DeviceBuffer>(api, q_elements() * 2);
    lse = std::make_unique<DeviceBuffer>(api, size_t(p.batch) * p.heads_q * p.seqlen_q * 4);
  }
  size_t q_elements() const { return size_t(p.batch) * p.seqlen_q * p.heads_q * p.head_dim; }
  size_t kv_elements() const { return size_t(p.batch) * p.seqlen_k * p.heads_kv * p.head_dim; }

  // New inputs in the same buffers; outputs set to NaN. Synchronised: the uploads are on the legacy
  // stream, the kernels on other streams.
  void randomize(const DriverApi& api, std::mt19937_64& rng) {
    for (DeviceBuffer* b : {q.get(), k.get(), v.get()}) {
      std::vector<uint16_t> host(b->bytes() / 2);
      fill_random(host, p.bf16, rng);
      b->upload(host.data(), b->bytes());
    }
    o->fill_bytes(0xFF);
    lse->fill_bytes(0xFF);
    api.cuCtxSynchronize();
  }

  flashjit_attention_args_t args() const {
    flashjit_attention_args_t a;
    flashjit_attention_args_init(&a);
    a.q = q->ptr();
    a.k = k->ptr();
    a.v = v->ptr();
    a.o = o->ptr();
    a.lse = lse->ptr();
    a.batch = p.batch;
    a.seqlen_q = p.seqlen_q;
    a.seqlen_k = p.seqlen_k;
    a.heads_q = p.heads_q;
    a.heads_kv = p.heads_kv;
    a.head_dim = p.head_dim;
    a.q_strides = a.o_strides = {qs.batch, qs.row, qs.head};
    a.k_strides = a.v_strides = {ks.batch, ks.row, ks.head};
    return a;
  }

  // O and LSE (after the launch has finished) against the float64 reference on the same inputs.
  CheckResult compare(const CheckDevice& device) const { return compare(device, q->ptr(), k->ptr(), v->ptr(), *o); }

  // The same for a launch that read Q, K, V at other addresses (same layouts) and wrote O into
  // `out` from byte `out_offset` on.
  CheckResult compare(const CheckDevice& device, CUdeviceptr q_at, CUdeviceptr k_at, CUdeviceptr v_at,
                      const DeviceBuffer& out, size_t out_offset = 0) const {
    CheckResult r;
    Reference ref = gpu_reference(device, p, q_at, qs, k_at, ks, v_at, ks, &r.error);
    if (!r.error.empty()) return r;
    std::vector<uint16_t> raw(q_elements());
    out.download(raw.data(), raw.size() * 2, out_offset);
    std::vector<double> got(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      got[i] = half_bits_to_float(raw[i], p.bf16);
      if (std::isnan(got[i])) ++r.unwritten;
    }
    r.o_error = relative_l2_error(got, ref.o);
    std::vector<float> lse_got(ref.lse.size());
    lse->download(lse_got.data(), lse_got.size() * 4);
    for (size_t i = 0; i < lse_got.size(); ++i) {
      double err = std::numeric_limits<double>::infinity();
      if (std::isinf(ref.lse[i])) err = std::isinf(lse_got[i]) && lse_got[i] < 0 ? 0 : err;
      else if (!std::isnan(lse_got[i])) err = std::fabs(lse_got[i] - ref.lse[i]) / std::max(1.0, std::fabs(ref.lse[i]));
      r.lse_error = std::max(r.lse_error, err);
    }
    r.ran = true;
    return r;
  }
};

std::string describe_result(const CheckResult& r) {
  return r.error.empty() ? "O error " + std::to_string(r.o_error) + ", LSE error " + std::to_string(r.lse_error) +
                               ", unwritten " + std::to_string(r.unwritten)
                         : r.error;
}

// A flashjit context on device 0's primary context (the harness's), its cache in `dir` ("" = default).
flashjit_context_t device_context(const std::string& dir = "", void* cu_context = nullptr) {
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.cache_dir = dir.empty() ? nullptr : dir.c_str();
  o.cu_context = cu_context;
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_SUCCESS) << last_message();
  return ctx;
}


std::string spec_of(const Problem& p) {
  return std::string("dtype=") + (p.bf16 ? "bf16" : "fp16") + ",head_dim=" + std::to_string(p.head_dim) +
         ",causal=" + (p.causal ? "1" : "0");
}

// One flashjit_attention_forward on env's stream, fresh inputs and poisoned outputs, against float64.
// ran: where given, the resolved spec of the kernel the launch ran (flashjit_kernel_launch_spec).
void expect_forward_matches_reference(GpuEnv& env, flashjit_kernel_t kernel, const Problem& p, std::mt19937_64& rng,
                                      std::string* ran = nullptr) {
  ApiProblem t(*env.api, p);
  t.randomize(*env.api, rng);
  const flashjit_attention_args_t a = t.args();
  if (ran) {
    const char* spec = nullptr;
    ASSERT_EQ(flashjit_kernel_launch_spec(kernel, &a, &spec), FLASHJIT_SUCCESS) << last_message();
    *ran = spec;
  }
  ASSERT_EQ(flashjit_attention_forward(kernel, &a, env.stream), FLASHJIT_SUCCESS) << last_message();
  expect_ok_cu(*env.api, env.api->cuStreamSynchronize(env.stream), "forward");
  const CheckResult r = t.compare(env.device());
  EXPECT_TRUE(r.passed(p.bf16)) << describe_result(r);
}

TEST(ApiGpu, ForwardMatchesTheFloat64Reference) {
  FLASHJIT_REQUIRE_GPU(env);
  flashjit_context_t ctx = device_context();
  std::mt19937_64 rng(11);
  for (const Problem& p : {make_problem(true, 128, true, 2, 300, 500, 8, 2), make_problem(false, 64, false, 1, 1000, 777, 4, 4),
                           make_problem(true, 256, false, 1, 129, 1024, 2, 1), make_problem(false, 96, true, 3, 64, 64, 6, 3)}) {
    SCOPED_TRACE(spec_of(p) + " | " + p.describe());
    flashjit_kernel_t kernel = nullptr;
    ASSERT_EQ(flashjit_kernel_get(ctx, spec_of(p).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
    expect_forward_matches_reference(*env, kernel, p, rng);
    flashjit_kernel_release(kernel);
  }
  flashjit_context_destroy(ctx);
}

// Where handle k's long-sequence kernel starts (both lengths at least this), 0 when it has none.
int64_t long_seqlen_min_of(flashjit_kernel_t k) {
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(flashjit_kernel_describe(k, &info), FLASHJIT_SUCCESS) << last_message();
  return info.long_seqlen_spec ? info.long_seqlen_min : 0;
}

// A d64 causal handle holds two kernels (config/length_choice.hpp); the long-sequence one (three
// consumer warpgroups) runs from 4096 on, both lengths, including ones that are not tile multiples
// and a bottom-right causal mask. Each launch against float64, and the handle's two kernels named.
TEST(ApiGpu, LongSequenceKernelMatchesTheFloat64Reference) {
  FLASHJIT_REQUIRE_GPU(env);
  flashjit_context_t ctx = device_context();
  std::mt19937_64 rng(12);
  for (bool bf16 : {true, false}) {
    const Problem base = make_problem(bf16, 64, true, 1, 64, 64, 2, 1);
    flashjit_kernel_t kernel = nullptr;
    ASSERT_EQ(flashjit_kernel_get(ctx, spec_of(base).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(long_seqlen_min_of(kernel), 4096);
    for (auto [sq, sk] : {std::pair{4096, 4096}, {4100, 4100}, {4097, 6001}, {4095, 4095}, {5000, 4096}}) {
      Problem p = base;
      p.seqlen_q = sq;
      p.seqlen_k = sk;
      SCOPED_TRACE(spec_of(p) + " | " + p.describe() + (sq >= 4096 && sk >= 4096 ? " | long-sequence kernel" : ""));
      expect_forward_matches_reference(*env, kernel, p, rng);
    }
    flashjit_kernel_release(kernel);
  }
  flashjit_context_destroy(ctx);
}

// A d192 or d256 causal handle holds the persistent kernel and 2-CTA clusters (config/length_choice.hpp)
// for launches whose lengths both reach 16384, and both reach 8192 where the persistent grid's
// causal pairs would use less than 92 % of their rounds: launches each side of both, against
// float64 (few heads: the reference is a plain kernel), each checked to run the kernel the rule
// names on this device (restated here: tiles = query blocks x heads, pairs dealt where tiles
// outnumber the SMs).
TEST(ApiGpu, LongCausalClusterKernelMatchesTheFloat64Reference) {
  FLASHJIT_REQUIRE_GPU(env);
  flashjit_context_t ctx = device_context();
  std::mt19937_64 rng(13);
  const struct {
    bool bf16;
    int d, sq, sk, heads;
  } cases[] = {{true, 256, 16384, 16384, 1}, {false, 192, 16385, 16500, 1}, {true, 256, 16383, 16384, 1},
               {true, 256, 8192, 8192, 3},   // 192 tiles, 96 pairs: on 132 SMs one round, 72 % used
               {false, 192, 8300, 8192, 4},  // 260 tiles, 130 pairs: 98 %
               {true, 256, 8191, 9000, 3}};
  int clusters_below = 0;
  for (const auto& c : cases) {
    Problem p = make_problem(c.bf16, c.d, true, 1, c.sq, c.sk, c.heads, 1);
    flashjit_kernel_t kernel = nullptr;
    ASSERT_EQ(flashjit_kernel_get(ctx, spec_of(p).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
    EXPECT_EQ(long_seqlen_min_of(kernel), 16384);
    const int64_t tiles = (c.sq + 127) / 128 * c.heads, pairs = (tiles + 1) / 2;
    const int64_t rounds = (pairs + env->sm_count - 1) / env->sm_count;
    const bool uneven = tiles > env->sm_count && pairs * 100 < 92 * rounds * env->sm_count;
    const bool clusters = (c.sq >= 16384 && c.sk >= 16384) || (c.sq >= 8192 && c.sk >= 8192 && uneven);
    clusters_below += clusters && c.sq < 16384;
    SCOPED_TRACE(spec_of(p) + " | " + p.describe() + (clusters ? " | cluster kernel" : ""));
    std::string ran;
    expect_forward_matches_reference(*env, kernel, p, rng, &ran);
    EXPECT_NE(ran.find(clusters ? "cluster=2" : "cluster=1"), std::string::npos) << ran;
    flashjit_kernel_release(kernel);
  }
  EXPECT_GT(clusters_below, 0) << "no launch below 16384 ran the cluster kernel on " << env->sm_count << " SMs";
  flashjit_context_destroy(ctx);
}

TEST(ApiGpu, NullStreamIsTheCurrentContextsDefaultStream) {
  FLASHJIT_REQUIRE_GPU(env);
  flashjit_context_t ctx = device_context();
  flashjit_kernel_t kernel = nullptr;
  const Problem p = make_problem(true, 64, true, 1, 200, 200, 2, 1);
  ASSERT_EQ(flashjit_kernel_get(ctx, spec_of(p).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
  std::mt19937_64 rng(12);
  ApiProblem t(*env->api, p);
  t.randomize(*env->api, rng);
  const flashjit_attention_args_t a = t.args();
  ASSERT_EQ(flashjit_attention_forward(kernel, &a, nullptr), FLASHJIT_SUCCESS) << last_message();
  expect_ok_cu(*env->api, env->api->cuCtxSynchronize(), "forward");
  const CheckResult r = t.compare(env->device());
  EXPECT_TRUE(r.passed(p.bf16)) << describe_result(r);
  flashjit_kernel_release(kernel);
  flashjit_context_destroy(ctx);
}

TEST(ApiGpu, SixteenThreadsGetCompileAndLaunchAtOnce) {
  FLASHJIT_REQUIRE_GPU(env);
  // A fresh cache directory: the first threads for each spec race to compile it.
  const std::string dir = ::testing::TempDir() + "flashjit_api_gpu_threads_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  flashjit_context_t ctx = device_context(dir);
  const Problem problems[] = {make_problem(true, 128, true, 1, 257, 300, 4, 2), make_problem(false, 128, false, 2, 100, 190, 4, 1),
                              make_problem(true, 64, false, 1, 384, 129, 8, 8), make_problem(false, 64, true, 1, 77, 500, 2, 2),
                              make_problem(true, 192, true, 1, 130, 130, 2, 1)};
  constexpr int kThreads = 16, kLaunches = 3;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const DriverApi& api = *env->api;
      const Problem& p = problems[t % 5];
      api.cuCtxSetCurrent(env->context->get());
      flashjit_kernel_t kernel = nullptr;
      if (flashjit_kernel_get(ctx, spec_of(p).c_str(), &kernel) != FLASHJIT_SUCCESS) {
        errors[t] = std::string("kernel_get: ") + flashjit_last_error_message();
        failures++;
        return;
      }
      CUstream stream = nullptr;
      api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
      std::mt19937_64 rng(100 + t);
      ApiProblem tensors(api, p);
      for (int i = 0; i < kLaunches && errors[t].empty(); ++i) {
        tensors.randomize(api, rng);
        const flashjit_attention_args_t a = tensors.args();
        if (flashjit_attention_forward(kernel, &a, stream) != FLASHJIT_SUCCESS) {
          errors[t] = std::string("forward: ") + flashjit_last_error_message();
        } else if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS) {
          errors[t] = "the kernel failed";
        } else if (const CheckResult r = tensors.compare({&api, env->context->get(), stream}); !r.passed(p.bf16)) {
          errors[t] = spec_of(p) + " launch " + std::to_string(i) + ": " + describe_result(r);
        }
      }
      if (!errors[t].empty()) failures++;
      api.cuStreamDestroy(stream);
      flashjit_kernel_release(kernel);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
  EXPECT_EQ(failures, 0);
  flashjit_context_destroy(ctx);
  std::filesystem::remove_all(dir);
}

TEST(ApiGpu, CapturedForwardReplaysWithNewDataInTheSameBuffers) {
  FLASHJIT_REQUIRE_GPU(env);
  const DriverApi& api = *env->api;
  flashjit_context_t ctx = device_context();
  const Problem p = make_problem(true, 128, true, 2, 333, 444, 8, 2);
  flashjit_kernel_t kernel = nullptr;
  ASSERT_EQ(flashjit_kernel_get(ctx, spec_of(p).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
  ApiProblem t(api, p);
  std::mt19937_64 rng(13);
  t.randomize(api, rng);
  const flashjit_attention_args_t a = t.args();

  CUstream stream = nullptr;
  expect_ok_cu(api, api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  expect_ok_cu(api, api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  const flashjit_status_t captured = flashjit_attention_forward(kernel, &a, stream);
  CUgraph graph = nullptr;
  expect_ok_cu(api, api.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture (the capture stayed valid)");
  ASSERT_EQ(captured, FLASHJIT_SUCCESS) << last_message();
  CUgraphExec exec = nullptr;
  expect_ok_cu(api, api.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");

  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    t.randomize(api, rng);  // new inputs, poisoned outputs, same addresses
    expect_ok_cu(api, api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    expect_ok_cu(api, api.cuStreamSynchronize(stream), "replay");
    const CheckResult r = t.compare({&api, env->context->get(), stream});
    EXPECT_TRUE(r.passed(p.bf16)) << describe_result(r);
  }
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy(stream);
  flashjit_kernel_release(kernel);
  flashjit_context_destroy(ctx);
}

// FLASHJIT_ATTENTION_FLAG_PDL: three kernels back to back on one stream, each allowed to start
// before the previous one has finished. A leaves SMs free while it runs (a persistent grid's last
// round; with clusters, a grid of fewer CTAs than SMs), where B and C (one short tile per head)
// can start early. B's Q is the rows of A's O
// that A writes in its last round (read after write); C writes its O over the rows of A's K that
// A's last tiles read last (write after read; A's K/V loop runs right to left). Without
// griddepcontrol.wait before any global access B reads poison or A reads C's output (checked
// with such a kernel). Launched directly, then replayed from a captured graph.
TEST(ApiGpu, PdlLaunchesWaitForThePreviousKernelsMemory) {
  FLASHJIT_REQUIRE_GPU(env);
  const DriverApi& api = *env->api;
  flashjit_context_t ctx = device_context();
  // Persistent: A is 2 x 8 heads x 32 query blocks = 512 tiles on 132 CTAs; its last round holds
  // batch 1's heads 4-7, whose query block 0 (rows 0-127) comes last in each head (heaviest
  // first). Clusters (the long causal kernel at d256, here by its spec): one CTA per tile, 128,
  // query block 0 last in each head, and the SMs A leaves free take B's and C's tiles early.
  for (auto [d, causal, sq, extra] : {std::tuple{128, false, 4000, ""}, {256, true, 1000, ",cluster=2"}}) {
    const Problem pa = make_problem(true, d, causal, 2, sq, sq, 8, 8);
    const Problem pb = make_problem(true, d, causal, 1, 128, 128, 8, 8);
    SCOPED_TRACE(spec_of(pa) + extra);
    flashjit_kernel_t kernel = nullptr;
    ASSERT_EQ(flashjit_kernel_get(ctx, (spec_of(pa) + extra).c_str(), &kernel), FLASHJIT_SUCCESS) << last_message();
    ApiProblem a(api, pa), b(api, pb), c(api, pb);
    DeviceBuffer a_keys(api, a.kv_elements() * 2);  // A's K as A must see it, for the reference
    const size_t batch1 = size_t(a.qs.batch) * 2;    // bytes to batch 1 of A's O (and of its K: same layout)
    std::mt19937_64 rng(21);
    CUstream stream = nullptr;
    expect_ok_cu(api, api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    flashjit_attention_args_t args[3] = {a.args(), b.args(), c.args()};
    args[1].q = a.o->ptr() + batch1;  // B's rows, heads and strides match A's batch 1
    args[2].o = a.k->ptr() + batch1;
    for (flashjit_attention_args_t& x : args) x.flags = FLASHJIT_ATTENTION_FLAG_PDL;
    auto launch_all = [&] {
      for (const flashjit_attention_args_t& x : args) ASSERT_EQ(flashjit_attention_forward(kernel, &x, stream), FLASHJIT_SUCCESS) << last_message();
    };
    auto check_all = [&] {
      const CheckDevice device{&api, env->context->get(), stream};
      const CheckResult ra = a.compare(device, a.q->ptr(), a_keys.ptr(), a.v->ptr(), *a.o);
      EXPECT_TRUE(ra.passed(pa.bf16)) << "A (its K overwritten by C afterwards): " << describe_result(ra);
      const CheckResult rb = b.compare(device, a.o->ptr() + batch1, b.k->ptr(), b.v->ptr(), *b.o);
      EXPECT_TRUE(rb.passed(pb.bf16)) << "B (Q = A's O): " << describe_result(rb);
      const CheckResult rc = c.compare(device, c.q->ptr(), c.k->ptr(), c.v->ptr(), *a.k, batch1);
      EXPECT_TRUE(rc.passed(pb.bf16)) << "C (O over A's K): " << describe_result(rc);
    };
    auto fresh_inputs = [&] {
      for (ApiProblem* t : {&a, &b, &c}) t->randomize(api, rng);
      std::vector<uint16_t> keys(a.kv_elements());
      a.k->download(keys.data(), keys.size() * 2);
      a_keys.upload(keys.data(), keys.size() * 2);
      api.cuCtxSynchronize();
    };
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("direct launches, round " + std::to_string(round));
      fresh_inputs();
      launch_all();
      expect_ok_cu(api, api.cuStreamSynchronize(stream), "launches");
      check_all();
    }
    expect_ok_cu(api, api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    launch_all();
    CUgraph graph = nullptr;
    expect_ok_cu(api, api.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture (the capture stayed valid)");
    CUgraphExec exec = nullptr;
    expect_ok_cu(api, api.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
    for (int replay = 0; replay < 3; ++replay) {
      SCOPED_TRACE("graph replay " + std::to_string(replay));
      fresh_inputs();
      expect_ok_cu(api, api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      expect_ok_cu(api, api.cuStreamSynchronize(stream), "replay");
      check_all();
    }
    api.cuGraphExecDestroy(exec);
    api.cuGraphDestroy(graph);
    api.cuStreamDestroy(stream);
    flashjit_kernel_release(kernel);
  }
  flashjit_context_destroy(ctx);
}

TEST(ApiGpu, SeveralContextsOnOneDeviceEachLaunchTheirOwnKernels) {
  FLASHJIT_REQUIRE_GPU(env);
  const DriverApi& api = *env->api;
  if (!api.cuCtxCreate) GTEST_SKIP() << "the driver predates cuCtxCreate_v4 (CUDA 12.5)";
  const Problem p = make_problem(false, 64, true, 1, 150, 260, 4, 2);
  struct PerContext {
    CUcontext cu = nullptr;
    CUstream stream = nullptr;
    flashjit_context_t ctx = nullptr;
    flashjit_kernel_t kernel = nullptr;
    std::unique_ptr<ApiProblem> tensors;
  } contexts[2];
  std::mt19937_64 rng(14);
  for (PerContext& c : contexts) {
    expect_ok_cu(api, api.cuCtxCreate(&c.cu, nullptr, 0, env->context->device()), "cuCtxCreate");  // current now
    expect_ok_cu(api, api.cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    c.ctx = device_context("", c.cu);
    ASSERT_EQ(flashjit_kernel_get(c.ctx, spec_of(p).c_str(), &c.kernel), FLASHJIT_SUCCESS) << last_message();
    c.tensors = std::make_unique<ApiProblem>(api, p);
    c.tensors->randomize(api, rng);
    CUcontext popped;
    api.cuCtxPopCurrent(&popped);
  }
  for (PerContext& c : contexts) {
    api.cuCtxPushCurrent(c.cu);
    const flashjit_attention_args_t a = c.tensors->args();
    EXPECT_EQ(flashjit_attention_forward(c.kernel, &a, c.stream), FLASHJIT_SUCCESS) << last_message();
    expect_ok_cu(api, api.cuStreamSynchronize(c.stream), "forward");
    const CheckResult r = c.tensors->compare({&api, c.cu, c.stream});
    EXPECT_TRUE(r.passed(p.bf16)) << describe_result(r);
    CUcontext popped;
    api.cuCtxPopCurrent(&popped);
  }
  // A kernel of context 0 on a stream of context 1: refused before anything is launched.
  api.cuCtxPushCurrent(contexts[1].cu);
  const flashjit_attention_args_t a = contexts[1].tensors->args();
  EXPECT_EQ(flashjit_attention_forward(contexts[0].kernel, &a, contexts[1].stream), FLASHJIT_ERROR_WRONG_CONTEXT);
  EXPECT_STREQ(flashjit_last_error_field(), "stream");
  EXPECT_NE(last_message().find("belongs to CUDA context"), std::string::npos) << last_message();
  // ... and on the NULL stream while context 1 is current.
  EXPECT_EQ(flashjit_attention_forward(contexts[0].kernel, &a, nullptr), FLASHJIT_ERROR_WRONG_CONTEXT);
  EXPECT_EQ(api.cuCtxSynchronize(), CUDA_SUCCESS) << "nothing faulted";
  CUcontext popped;
  api.cuCtxPopCurrent(&popped);

  for (PerContext& c : contexts) {
    api.cuCtxPushCurrent(c.cu);
    c.tensors.reset();
    api.cuStreamDestroy(c.stream);
    drop_verify_kernels(c.cu);
    api.cuCtxPopCurrent(&popped);
    flashjit_kernel_release(c.kernel);  // the last reference: the flashjit context unloads its modules now
    flashjit_context_destroy(c.ctx);
    api.cuCtxDestroy(c.cu);
  }
  api.cuCtxSetCurrent(env->context->get());
}

TEST(ApiGpu, InvalidDeviceOrdinalIsNamed) {
  FLASHJIT_REQUIRE_GPU(env);
  int count = 0;
  env->api->cuDeviceGetCount(&count);
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.device = count;
  flashjit_context_t ctx = nullptr;
  EXPECT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_STREQ(flashjit_last_error_field(), "options.device");
  EXPECT_NE(last_message().find("out of range"), std::string::npos) << last_message();
}

TEST(ApiGpu, CacheOnlyContextLoadsWhatPrewarmCompiled) {
  FLASHJIT_REQUIRE_GPU(env);
  const std::string dir = ::testing::TempDir() + "flashjit_api_gpu_cache_only_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  flashjit_context_options_t o;
  flashjit_context_options_init(&o);
  o.cache_dir = dir.c_str();
  o.compile_policy = FLASHJIT_COMPILE_POLICY_CACHE_ONLY;
  flashjit_context_t ctx = nullptr;
  ASSERT_EQ(flashjit_context_create(&o, &ctx), FLASHJIT_SUCCESS) << last_message();
  const char* spec = "dtype=bf16,head_dim=128,causal=1";
  flashjit_kernel_t kernel = nullptr;
  EXPECT_EQ(flashjit_kernel_get(ctx, spec, &kernel), FLASHJIT_ERROR_NOT_COMPILED);
  // Compile it elsewhere (a compile-only context on the same directory), then the get succeeds.
  flashjit_context_options_t compile_only = o;
  compile_only.device = FLASHJIT_DEVICE_NONE;
  compile_only.compile_policy = FLASHJIT_COMPILE_POLICY_JIT;
  flashjit_context_t compiler = nullptr;
  ASSERT_EQ(flashjit_context_create(&compile_only, &compiler), FLASHJIT_SUCCESS) << last_message();
  ASSERT_EQ(flashjit_prewarm(compiler, &spec, 1), FLASHJIT_SUCCESS) << last_message();
  ASSERT_EQ(flashjit_kernel_get(ctx, spec, &kernel), FLASHJIT_SUCCESS) << last_message();
  flashjit_kernel_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(flashjit_kernel_describe(kernel, &info), FLASHJIT_SUCCESS);
  EXPECT_GT(info.registers, 0);
  EXPECT_EQ(info.local_bytes, 0);
  flashjit_kernel_release(kernel);
  flashjit_context_destroy(compiler);
  flashjit_context_destroy(ctx);
  std::filesystem::remove_all(dir);
}


// Issue 6: every visible device in one process. All devices get the same spec at once (one compile
// for all: one shared disk cache), then several threads per device each get it and launch it
// repeatedly on fresh inputs, every result checked on its own device; a kernel of one device given
// a stream of another is refused with WRONG_CONTEXT. Skips below two devices.
TEST(ApiMultiGpu, EveryDeviceRunsTheSameSpecFromSeveralThreads) {
  FLASHJIT_REQUIRE_GPU(env);
  const DriverApi& api = *env->api;
  int count = 0;
  api.cuDeviceGetCount(&count);
  if (count < 2) GTEST_SKIP() << "multi-GPU test not run: " << count << " device visible, it needs 2 or more";
  char pattern[] = "/tmp/flashjit-multigpu-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const char* spec = "dtype=bf16,head_dim=128,causal=1";
  constexpr int kThreadsPerDevice = 4, kLaunchesPerThread = 3;

  // One flashjit context per device, all on one cache directory.
  std::vector<flashjit_context_t> contexts(count);
  std::vector<std::unique_ptr<PrimaryContext>> primaries;
  for (int d = 0; d < count; ++d) {
    flashjit_context_options_t o;
    flashjit_context_options_init(&o);
    o.device = d;
    o.cache_dir = dir.c_str();
    ASSERT_EQ(flashjit_context_create(&o, &contexts[d]), FLASHJIT_SUCCESS) << last_message();
    auto primary = PrimaryContext::retain(api, d);
    ASSERT_TRUE(primary.ok()) << primary.error().message;
    primaries.push_back(std::make_unique<PrimaryContext>(std::move(*primary)));
  }

  // Every device gets the spec at the same moment: the first gets race, one of them compiles and
  // the others load its cubin from the shared cache.
  std::vector<flashjit_kernel_t> kernels(count);
  std::vector<flashjit_kernel_info_t> infos(count);
  std::vector<flashjit_status_t> got(count, FLASHJIT_SUCCESS);
  std::atomic<int> ready{0};
  std::vector<std::thread> getters;
  for (int d = 0; d < count; ++d) {
    getters.emplace_back([&, d] {
      for (++ready; ready.load() < count;) std::this_thread::yield();
      got[d] = flashjit_kernel_get(contexts[d], spec, &kernels[d]);
      infos[d].struct_size = sizeof(infos[d]);
      if (got[d] == FLASHJIT_SUCCESS) got[d] = flashjit_kernel_describe(kernels[d], &infos[d]);
    });
  }
  for (auto& th : getters) th.join();
  int compiled = 0;
  for (int d = 0; d < count; ++d) {
    ASSERT_EQ(got[d], FLASHJIT_SUCCESS) << "device " << d;
    EXPECT_EQ(infos[d].device, d);
    compiled += infos[d].source == FLASHJIT_KERNEL_COMPILED;
  }
  EXPECT_EQ(compiled, 1) << "each cubin compiled once for all devices";
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries += e.path().extension() == ".entry";
  EXPECT_EQ(entries, 1u);

  // Several threads per device, each getting the kernel itself and launching it on its own stream
  // with fresh inputs each time, every result checked on that device.
  std::vector<std::string> errors(count * kThreadsPerDevice);
  std::vector<std::thread> threads;
  for (int d = 0; d < count; ++d) {
    for (int t = 0; t < kThreadsPerDevice; ++t) {
      threads.emplace_back([&, d, t] {
        std::string& error = errors[d * kThreadsPerDevice + t];
        CUcontext cu = primaries[d]->get();
        api.cuCtxSetCurrent(cu);
        flashjit_kernel_t kernel = nullptr;
        if (flashjit_kernel_get(contexts[d], spec, &kernel) != FLASHJIT_SUCCESS) {
          error = "get: " + last_message();
          return;
        }
        CUstream stream = nullptr;
        api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
        std::mt19937_64 rng(std::random_device{}() + 977 * d + t);
        for (int i = 0; i < kLaunchesPerThread && error.empty(); ++i) {
          const int len = 300 + 37 * t + 11 * i;
          ApiProblem prob(api, make_problem(true, 128, true, 2, len, len, 4, 2));
          prob.randomize(api, rng);
          const flashjit_attention_args_t a = prob.args();
          if (flashjit_attention_forward(kernel, &a, stream) != FLASHJIT_SUCCESS) error = "launch: " + last_message();
          else if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS) error = "synchronize failed";
          else if (const CheckResult r = prob.compare({&api, cu, stream}); !r.passed(true)) error = describe_result(r);
        }
        api.cuStreamDestroy(stream);
        flashjit_kernel_release(kernel);
      });
    }
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < errors.size(); ++i)
    EXPECT_TRUE(errors[i].empty()) << "device " << i / kThreadsPerDevice << " thread " << i % kThreadsPerDevice << ": " << errors[i];

  // A kernel of one device with a stream of the next: a clear error, no launch.
  for (int d = 0; d < count; ++d) {
    const int other_device = (d + 1) % count;
    api.cuCtxSetCurrent(primaries[other_device]->get());
    CUstream other = nullptr;
    api.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING);
    ApiProblem prob(api, make_problem(true, 128, true, 1, 64, 64, 2, 2));
    const flashjit_attention_args_t a = prob.args();
    EXPECT_EQ(flashjit_attention_forward(kernels[d], &a, other), FLASHJIT_ERROR_WRONG_CONTEXT) << "kernel of device " << d;
    EXPECT_FALSE(last_message().empty());
    api.cuStreamDestroy(other);
  }
  api.cuCtxSetCurrent(env->context->get());
  for (int d = 0; d < count; ++d) {
    flashjit_kernel_release(kernels[d]);
    flashjit_context_destroy(contexts[d]);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashjit::testing
