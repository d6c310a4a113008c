// Timing one attention cell on the GPU two ways, both with device events (shared by `bench` and
// `tune`):
//   idle  - one launch from an idle stream (what a caller sees with repeated arguments: launch and kernel;
//           the parameters, tensor maps included, are built once per input set, as the C API caches them)
//   graph - replay of a CUDA graph of launches (kernel time)
// Median of `iters` after warm-up, rotating among input sets larger than L2 in total, random data.
// Both ways again for a kernel that returns at once, launched with the cell's grid, block and
// shared memory: its idle minus graph time is what launching from an idle stream costs on this
// machine and driver (the floor under the cell's own idle minus graph).
#pragma once
#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include "launch/attention_launch.hpp"
#include "runtime/engine.hpp"
#include "verify/reference.hpp"

namespace flashjit::tool {

struct Cell {
  std::string group;  // fa3 | gqa | decode | custom
  AttentionSpec spec;
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1;
  // varlen / paged specs: each sequence's query and key counts (K/V packed, or paged with
  // page_size keys a page); checked against the float64 reference once, then timed.
  std::vector<int> engine_q, engine_k;
  int page_size = 16;
  bool v_in_k = false;  // V is K's first head_dim_v columns (MLA's latent cache)
  // Masks and scores (spec keys window, chunk, softcap, sinks, alibi): the launch's values, the
  // sinks as bf16 with sinks_bf16, else float32; slopes [heads_q] or [batch][heads_q].
  AttentionFeatures features;
  bool sinks_bf16 = false;
  // The FP8 cache (spec key kv_dtype=e4m3): K and V e4m3 with these scales (a spec with the key
  // and a cache left off gets Fp8Cache's defaults); 1-byte K/V elements in kv_bytes. FP8 operands
  // (dtype=e4m3): Q, K and V e4m3 with these descales (fp8_of sets operands and O's type).
  Fp8Cache fp8;
  bool engine() const { return spec.varlen || spec.paged; }
};

struct Timing {
  double idle_ms = 0, graph_ms = 0;
  double floor_idle_ms = 0, floor_graph_ms = 0;  // the empty kernel, same launch shape
  int registers = 0;
  std::string kernel_spec;    // the resolved spec of the kernel that ran
  bool long_kernel = false;   // it was the spec's long-sequence kernel (config/length_choice.hpp)
  FeatureInputs features;     // what the timed launches read (window, chunk, softcap, sink and slope pointers)
  Fp8Inputs fp8;              // the FP8 cache's scale pointers and strides the timed launches read
  std::string error;
};

// Times cell.spec on the cell's shape (prepare, load, fill, warm up, time).
struct Bench {
  const DriverApi& api;
  CUcontext context;
  CUstream stream;
  CUevent start, stop;
  size_t l2_bytes;
  int iters = 30;  // timed runs per method; the median is reported
  int sm_count = 0;  // persistent grid size
  bool launch_floor = true;  // also time the empty kernel (Timing::floor_*); tune does without
  bool pdl = false;          // launch with programmatic dependent launch (FLASHJIT_ATTENTION_FLAG_PDL)

  double elapsed_ms();
  Timing run(Engine& engine, const Cell& cell);
  Timing run_engine(const Cell& cell, const KernelConfig& config, const AttentionFunctions& fns, Timing t);
  // The cell's FP8 inputs as timed: cell.fp8, or with kv_dtype=e4m3 or dtype=e4m3 and the inputs
  // off, the defaults (operands and O's type from the spec).
  static Fp8Cache fp8_of(const Cell& cell);
  // Idle-stream and graph-replay medians of launch(i) (i counts the launches).
  Status time_two_ways(const std::function<Status(int)>& launch, double& idle_ms, double& graph_ms);
};

// Unloads the launch-floor kernel from a context (before the context goes).
void drop_launch_floor(CUcontext context);

}  // namespace flashjit::tool
