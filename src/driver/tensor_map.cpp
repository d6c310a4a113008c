#include "driver/tensor_map.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>

#include "common/number_text.hpp"

namespace flashjit {
namespace {

constexpr std::int64_t kMaxDim = std::int64_t(1) << 32;
constexpr std::int64_t kMaxStrideBytes = std::int64_t(1) << 40;  // exclusive
constexpr std::uint32_t kMaxBoxRows = 256;

std::string field_of(const TensorMapRequest& r, const char* field) { return std::string(r.name) + "." + field; }

Status check_base(const TensorMapRequest& r) {
  if (r.base % 16 == 0) return Status::Ok();
  return Error::invalid_argument(field_of(r, "base"), std::string(r.name) + ": base pointer " + hex_text(r.base) +
                                                          " is not 16-byte aligned; TMA needs 16-byte aligned rows");
}

Status check_dim(const TensorMapRequest& r, const char* field, std::int64_t value) {
  if (value >= 1 && value <= kMaxDim) return Status::Ok();
  return Error::invalid_argument(field_of(r, field), std::string(r.name) + ": " + field + " = " +
                                                         std::to_string(value) +
                                                         " is out of range; a tensor map dimension must be 1..2^32");
}

Status check_stride(const TensorMapRequest& r, const char* field, std::int64_t elements) {
  // NOTES: the message is built only on failure: this runs on the launch path, which never allocates.
  auto head = [&] { return std::string(r.name) + ": " + field + " = " + std::to_string(elements) + " elements"; };
  if (elements < 1) return Error::invalid_argument(field_of(r, field), head() + " is not positive");
  // NOTES: compared in elements first so the byte count cannot overflow.
  const std::int64_t element_bytes = tensor_map_element_bytes(r.dtype);
  if (elements >= kMaxStrideBytes / element_bytes) {
    return Error::invalid_argument(field_of(r, field),
                                   head() + " is 2^40 bytes or more; TMA strides must be below 2^40 bytes");
  }
  const std::int64_t bytes = elements * element_bytes;
  if (bytes % 16 != 0) {
    return Error::invalid_argument(field_of(r, field), head() + " (" + std::to_string(bytes) +
                                                           " bytes) is not a multiple of 16 bytes; TMA needs 16-byte "
                                                           "aligned rows (a multiple of " + std::to_string(16 / element_bytes) + " elements)");
  }
  return Status::Ok();
}

Status check_box_rows(const TensorMapRequest& r) {
  for (const auto& [field, extent] : {std::pair<const char*, std::uint32_t>{"box_rows", r.box_rows}, {"box_heads", r.box_heads}}) {
    if (extent >= 1 && extent <= kMaxBoxRows) continue;
    return Error::invalid_argument(field_of(r, field), std::string(r.name) + ": " + field + " = " + std::to_string(extent) +
                                                           " is out of range; a TMA box extent must be 1..256");
  }
  return Status::Ok();
}

CUtensorMapDataType data_type(DType dtype) {
  if (dtype == DType::kE4m3) return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA moves bytes; the GEMM reads them as e4m3
  return dtype == DType::kFp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// The arrays cuTensorMapEncodeTiled takes, innermost dimension first.
struct Layout {
  cuuint64_t dims[4];
  cuuint64_t byte_strides[3];  // of dims 1..3
  cuuint32_t box[4];
  cuuint32_t element_strides[4];
};

Layout layout_of(const TensorMapRequest& r) {
  return Layout{
      {cuuint64_t(r.head_dim), cuuint64_t(r.seqlen), cuuint64_t(r.heads), cuuint64_t(r.batch)},
      {cuuint64_t(r.stride_seqlen * tensor_map_element_bytes(r.dtype)), cuuint64_t(r.stride_heads * tensor_map_element_bytes(r.dtype)),
       cuuint64_t(r.stride_batch * tensor_map_element_bytes(r.dtype))},
      {tensor_map_box_columns(r.dtype), r.box_rows, r.box_heads, 1},
      {1, 1, 1, 1},
  };
}

std::string describe_layout(const TensorMapRequest& r, const Layout& l) {
  char text[512];
  std::snprintf(text, sizeof(text),
                "cuTensorMapEncodeTiled(%s: %s, base %s, dims {%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                "}, byte strides {%" PRIu64 ", %" PRIu64 ", %" PRIu64 "}, box {%u, %u, %u, 1})",
                r.name, dtype_name(r.dtype), hex_text(r.base).c_str(), std::uint64_t(l.dims[0]), std::uint64_t(l.dims[1]),
                std::uint64_t(l.dims[2]), std::uint64_t(l.dims[3]), std::uint64_t(l.byte_strides[0]),
                std::uint64_t(l.byte_strides[1]), std::uint64_t(l.byte_strides[2]), l.box[0], l.box[1], l.box[2]);
  return text;
}

}  // namespace

Status validate_tensor_map_request(const TensorMapRequest& r) {
  if (Status s = check_base(r); !s) return s;
  const struct {
    const char* field;
    std::int64_t value;
  } dims[] = {{"head_dim", r.head_dim}, {"seqlen", r.seqlen}, {"heads", r.heads}, {"batch", r.batch}};
  for (const auto& d : dims) {
    if (Status s = check_dim(r, d.field, d.value); !s) return s;
  }
  const struct {
    const char* field;
    std::int64_t value;
  } strides[] = {{"stride_seqlen", r.stride_seqlen}, {"stride_heads", r.stride_heads}, {"stride_batch", r.stride_batch}};
  for (const auto& st : strides) {
    if (Status s = check_stride(r, st.field, st.value); !s) return s;
  }
  return check_box_rows(r);
}

Result<CUtensorMap> make_tensor_map_bshd(const DriverApi& api, const TensorMapRequest& r) {
  if (Status s = validate_tensor_map_request(r); !s) return s.take_error();
  const Layout l = layout_of(r);
  CUtensorMap map = {};
  CUresult result = api.cuTensorMapEncodeTiled(
      &map, data_type(r.dtype), 4, reinterpret_cast<void*>(r.base), l.dims, l.byte_strides, l.box, l.element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) return check(api, result, describe_layout(r, l).c_str()).take_error();
  return map;
}

Result<CUtensorMap> make_tensor_map_bshd(const TensorMapRequest& r) {
  if (Status s = validate_tensor_map_request(r); !s) return s.take_error();
  auto api = driver();
  if (!api) return api.take_error();
  return make_tensor_map_bshd(**api, r);
}

}  // namespace flashjit
