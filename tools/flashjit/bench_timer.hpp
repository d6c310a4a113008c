// Timing one attention cell on the GPU two ways, both with device events (shared by `bench` and
// `tune`):
//   idle  - one launch from an idle stream (what a caller sees: params, tensor maps, launch, kernel)
//   graph - replay of a CUDA graph of launches (kernel time)
// Median of `iters` after warm-up, rotating among input sets larger than L2 in total, random data.
#pragma once
#include <cuda.h>

#include <string>
#include <vector>

#include "runtime/engine.hpp"

namespace flashjit::tool {

struct Cell {
  std::string group;  // fa3 | gqa | decode | custom
  AttentionSpec spec;
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1;
};

struct Timing {
  double idle_ms = 0, graph_ms = 0;
  int registers = 0;
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

  double elapsed_ms();
  Timing run(Engine& engine, const Cell& cell);
};

}  // namespace flashjit::tool
