// Merge of two attention states (flashjit_merge_attention_states): the arguments, their checks and
// the launch of templates/split_combine.cuh's flashjit_merge_states, a kernel of every split_kv
// module. The hot path: no allocation, no synchronisation, no compilation.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "config/kernel_config.hpp"
#include "driver/cuda_driver.hpp"
#include "launch/attention_launch.hpp"

namespace flashjit {

// O tensors [rows, heads, head_dim_v] (element strides, head_dim contiguous), float32 or the
// kernel's 16-bit dtype; LSE float [heads][lse_head_stride], natural log (-inf: a row that saw no key).
struct MergeArgs {
  uint64_t o_a = 0, o_b = 0, o_out = 0;        // CUdeviceptr, 16-byte aligned
  uint64_t lse_a = 0, lse_b = 0, lse_out = 0;  // CUdeviceptr of float; lse_out 0 = not wanted
  int rows = 0, heads = 0;
  int64_t a_row_stride = 0, a_head_stride = 0, b_row_stride = 0, b_head_stride = 0, out_row_stride = 0, out_head_stride = 0;
  int64_t lse_head_stride = 0;  // 0 = rows
  bool float32_states = false, float32_out = false;
};

// Every field, named in the error with what is allowed. The kernel must be a split_kv one (its
// module holds the merge).
Status validate_merge_args(const KernelConfig& config, const MergeArgs& args);

MergeParams make_merge_params(const MergeArgs& args);
LaunchShape merge_launch_shape(const MergeArgs& args);

// validate + one launch on `stream` (with PDL where asked).
Status launch_merge_states(const DriverApi& api, CUfunction merge, const KernelConfig& config, const MergeArgs& args,
                           CUstream stream, bool pdl);

}  // namespace flashjit
