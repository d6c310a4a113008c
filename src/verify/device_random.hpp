// Fills device buffers of 16-bit floats with standard-normal values on the GPU (a counter-based
// hash and Box-Muller), so benchmarks get random data of any size without host traffic.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "common/status.hpp"
#include "driver/cuda_driver.hpp"

namespace flashjit {

// Launches on `stream` in the current context; does not synchronise.
Status fill_random_normal(const DriverApi& api, CUcontext context, CUstream stream, CUdeviceptr data, uint64_t count,
                          bool bf16, uint64_t seed);

// Fills `count` bytes with e4m3 codes of standard-normal values divided by `scale` (an FP8 K/V
// cache whose dequantised values are standard normal; cvt.rn.satfinite, never the NaN code).
Status fill_random_e4m3(const DriverApi& api, CUcontext context, CUstream stream, CUdeviceptr data, uint64_t count, float scale,
                        uint64_t seed);

// Unloads the fill kernels from a context: call before releasing it.
void drop_random_fill_kernels(CUcontext context);

}  // namespace flashjit
