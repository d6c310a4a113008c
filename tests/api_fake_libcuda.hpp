// A fake CUDA driver (libflashjit_fake_cuda.so, loaded through FLASHJIT_LIBCUDA) for testing the
// embedding API's GPU paths on machines without a GPU: devices, contexts (primary and created),
// streams, module loads, tensor-map encoding, launches and stream capture are modelled on the host;
// nothing runs. What it saw is counted in FakeCudaStats, read by the tests through
//   auto* stats = reinterpret_cast<const FakeCudaStats* (*)()>(dlsym(handle, "fake_cuda_stats"))();
//
// Environment, read once: FAKE_CUDA_DEVICE_COUNT (default 1), FAKE_CUDA_CC_<ordinal> (compute
// capability as "90", default 90). At exit (for the tool run in a child process):
// FAKE_CUDA_STATS_FILE gets the counts, FAKE_CUDA_TENSOR_MAPS_FILE every tensor map encoded (its
// address, dims and byte strides; api_fake_libcuda.cpp says the line's fields).
//
// The fake flags what a capturing stream forbids: memory allocation, host copies, synchronisation
// and module loads while any stream is capturing count as capture_violations.
#pragma once
#include <atomic>
#include <cstdint>

struct FakeCudaLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  void* stream;
  void* function;
  bool programmatic;  // the programmatic stream serialization attribute (PDL) was set
  unsigned cluster_x;  // the cluster dimension attribute's x (1 without it)
  unsigned char params[4096];  // the first fake_cuda_set_param_bytes() bytes of parameter 0 (4 KB: the launch's limit)
};

struct FakeCudaStats {
  std::atomic<uint64_t> tensor_map_encodes;
  std::atomic<uint64_t> launches;           // executed (direct or by a graph replay)
  std::atomic<uint64_t> launches_captured;  // recorded into a capture instead
  std::atomic<uint64_t> launches_programmatic;  // of those (executed or captured), launched with PDL
  std::atomic<uint64_t> stream_get_ctx;
  std::atomic<uint64_t> module_loads;
  std::atomic<uint64_t> module_unloads;
  std::atomic<uint64_t> primary_retains;
  std::atomic<uint64_t> primary_releases;
  std::atomic<uint64_t> capture_violations;
  std::atomic<uint64_t> launch_context_mismatches;  // a launch refused: function and stream contexts differ
  // A launch on a created stream while a legacy-stream memset or host-to-device copy may still be
  // running (none since the last cuCtxSynchronize): on a non-blocking stream, a race.
  std::atomic<uint64_t> launches_racing_legacy_writes;
};

extern "C" {
using FakeCudaStatsFn = const FakeCudaStats* (*)();
using FakeCudaLastLaunchFn = void (*)(FakeCudaLaunch* out);
using FakeCudaSetParamBytesFn = void (*)(unsigned bytes);
}
