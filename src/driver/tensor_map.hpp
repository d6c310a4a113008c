// TMA tensor maps for the 16-bit [batch, seqlen, heads, head_dim] tensors (Q, K, V, O) with any
// element strides (packed QKV included): a 4-D tiled map, innermost first
// {head_dim, seqlen, heads, batch}, box {64 columns, box_rows, box_heads, 1}, 128-byte swizzle.
#pragma once
#include <cstdint>

#include "driver/cuda_driver.hpp"
#include "spec/attention_spec.hpp"

#include "../../templates/tile_layout.cuh"

namespace flashjit {

inline constexpr std::uint32_t kTensorMapBoxColumns = 64;  // 64 x 16 bit = 128 B, the 128B-swizzle span
// Bytes per element and columns per box by element type: the box is always the 128-byte swizzle
// span (64 16-bit or 128 e4m3 columns).
// (templates/tile_layout.cuh's ElementType, the kernel's).
inline constexpr std::int64_t tensor_map_element_bytes(DType dtype) { return element_type(dtype == DType::kE4m3).bytes; }
inline constexpr std::uint32_t tensor_map_box_columns(DType dtype) { return uint32_t(element_type(dtype == DType::kE4m3).chunk_columns); }

struct TensorMapRequest {
  const char* name = "tensor";  // "q", "k", "v", "o": starts every message and field name
  CUdeviceptr base = 0;         // element [0, 0, 0, 0]
  DType dtype = DType::kBf16;
  std::int64_t batch = 1;
  std::int64_t seqlen = 1;
  std::int64_t heads = 1;
  std::int64_t head_dim = 1;
  // Element strides; head_dim is contiguous. Packed QKV [B, S, 3, H, D]: stride_seqlen = 3*H*D.
  std::int64_t stride_seqlen = 0;
  std::int64_t stride_heads = 0;
  std::int64_t stride_batch = 0;
  std::uint32_t box_rows = 64;  // seqlen rows per TMA box, 1..256
  std::uint32_t box_heads = 1;  // heads per TMA box, 1..256 (packed GQA's Q: more than one)
};

// Everything the driver would reject, checked without it: kInvalidArgument whose field is
// "<name>.<field>" and whose message names the tensor, the value and what is allowed.
Status validate_tensor_map_request(const TensorMapRequest& request);

// Validates, then encodes with cuTensorMapEncodeTiled (swizzle 128B, L2 promotion 256B,
// out-of-bounds elements read as zeros, no interleave).
Result<CUtensorMap> make_tensor_map_bshd(const DriverApi& api, const TensorMapRequest& request);
// Same, through the process-wide driver (kDriverUnavailable without one; validation comes first).
Result<CUtensorMap> make_tensor_map_bshd(const TensorMapRequest& request);

}  // namespace flashjit
