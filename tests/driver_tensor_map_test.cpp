// Tensor maps: every rejection is caught before the driver and names the tensor, the field and
// the value; valid layouts (contiguous, packed QKV) pass; and the encode call gets exactly the
// 4-D tiled layout (checked with a fake cuTensorMapEncodeTiled).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "driver/tensor_map.hpp"

namespace flashjit {
namespace {

// [B, S, H, D] contiguous.
TensorMapRequest contiguous(const char* name, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  TensorMapRequest r;
  r.name = name;
  r.base = 0x7f0000000000;
  r.dtype = DType::kBf16;
  r.batch = b;
  r.seqlen = s;
  r.heads = h;
  r.head_dim = d;
  r.stride_heads = d;
  r.stride_seqlen = h * d;
  r.stride_batch = s * h * d;
  r.box_rows = 128;
  return r;
}

struct BadCase {
  const char* what;
  TensorMapRequest request;
  const char* field;
  std::vector<const char*> needles;  // all in the message
};

TensorMapRequest with(TensorMapRequest r, void (*edit)(TensorMapRequest&)) {
  edit(r);
  return r;
}

TEST(TensorMap, EveryRejectionNamesTensorFieldAndValue) {
  const TensorMapRequest q = contiguous("q", 2, 1024, 16, 128);
  const BadCase cases[] = {
      {"misaligned base", with(q, [](TensorMapRequest& r) { r.base += 8; }), "q.base",
       {"q: base pointer 0x7f0000000008 is not 16-byte aligned", "TMA needs 16-byte aligned rows"}},
      {"stride not a multiple of 16 bytes", with(q, [](TensorMapRequest& r) { r.stride_seqlen = 2052; }),
       "q.stride_seqlen", {"q: stride_seqlen = 2052 elements", "4104 bytes", "multiple of 16 bytes"}},
      {"odd head stride", with(q, [](TensorMapRequest& r) { r.stride_heads = 100; }), "q.stride_heads",
       {"stride_heads = 100", "multiple of 16 bytes"}},
      {"batch stride at 2^40 bytes", with(q, [](TensorMapRequest& r) { r.stride_batch = std::int64_t(1) << 39; }),
       "q.stride_batch", {"stride_batch = 549755813888 elements", "below 2^40 bytes"}},
      {"batch stride far above 2^40", with(q, [](TensorMapRequest& r) { r.stride_batch = std::int64_t(1) << 62; }),
       "q.stride_batch", {"stride_batch = 4611686018427387904", "below 2^40 bytes"}},
      {"zero stride", with(q, [](TensorMapRequest& r) { r.stride_heads = 0; }), "q.stride_heads",
       {"stride_heads = 0", "not positive"}},
      {"negative stride", with(q, [](TensorMapRequest& r) { r.stride_seqlen = -2048; }), "q.stride_seqlen",
       {"stride_seqlen = -2048", "not positive"}},
      {"zero seqlen", with(q, [](TensorMapRequest& r) { r.seqlen = 0; }), "q.seqlen", {"q: seqlen = 0", "1..2^32"}},
      {"zero batch", with(q, [](TensorMapRequest& r) { r.batch = 0; }), "q.batch", {"batch = 0", "1..2^32"}},
      {"zero heads", with(q, [](TensorMapRequest& r) { r.heads = 0; }), "q.heads", {"heads = 0", "1..2^32"}},
      {"zero head_dim", with(q, [](TensorMapRequest& r) { r.head_dim = 0; }), "q.head_dim", {"head_dim = 0"}},
      {"seqlen above 2^32", with(q, [](TensorMapRequest& r) { r.seqlen = (std::int64_t(1) << 32) + 1; }),
       "q.seqlen", {"seqlen = 4294967297", "1..2^32"}},
      {"box rows 0", with(q, [](TensorMapRequest& r) { r.box_rows = 0; }), "q.box_rows",
       {"q: box_rows = 0", "1..256"}},
      {"box rows 257", with(q, [](TensorMapRequest& r) { r.box_rows = 257; }), "q.box_rows",
       {"box_rows = 257", "1..256"}},
  };
  for (const BadCase& c : cases) {
    Status s = validate_tensor_map_request(c.request);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_EQ(s.error().field, c.field) << c.what;
    for (const char* needle : c.needles) {
      EXPECT_NE(s.error().message.find(needle), std::string::npos) << c.what << " -> " << s.error().message;
    }
  }
}

TEST(TensorMap, NameOfTheTensorStartsTheMessage) {
  TensorMapRequest v = contiguous("v", 1, 64, 1, 64);
  v.base = 0x1001;
  Status s = validate_tensor_map_request(v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.rfind("v: ", 0), 0u) << s.error().message;
  EXPECT_EQ(s.error().field, "v.base");
}

TEST(TensorMap, ValidLayoutsPass) {
  // Contiguous, every supported head dim, at the extremes of the box.
  for (std::int64_t d = 8; d <= 256; d += 8) {
    TensorMapRequest r = contiguous("q", 3, 777, 5, d);
    for (std::uint32_t rows : {1u, 64u, 256u}) {
      r.box_rows = rows;
      Status s = validate_tensor_map_request(r);
      EXPECT_TRUE(s.ok()) << "d=" << d << " rows=" << rows << ": " << s.error().message;
    }
  }
  // Packed QKV [B, S, 3, H, D], head dim 128: Q, K and V share the row stride 3*H*D.
  const std::int64_t B = 2, S = 4096, H = 32, D = 128;
  for (int which = 0; which < 3; ++which) {
    TensorMapRequest r = contiguous("qkv", B, S, H, D);
    r.base = 0x7f0000000000 + std::uint64_t(which * H * D * 2);
    r.stride_seqlen = 3 * H * D;
    r.stride_heads = D;
    r.stride_batch = S * 3 * H * D;
    Status s = validate_tensor_map_request(r);
    EXPECT_TRUE(s.ok()) << which << ": " << s.error().message;
  }
  // [B, H, S, D] memory order seen through the [B, S, H, D] map: strides need not be monotonic.
  TensorMapRequest bhsd = contiguous("k", 2, 1000, 8, 64);
  bhsd.stride_seqlen = 64;
  bhsd.stride_heads = 1000 * 64;
  bhsd.stride_batch = 8 * 1000 * 64;
  EXPECT_TRUE(validate_tensor_map_request(bhsd).ok());
  // Largest stride just under 2^40 bytes.
  TensorMapRequest big = contiguous("o", 1, 16, 1, 64);
  big.stride_batch = (std::int64_t(1) << 39) - 8;
  EXPECT_TRUE(validate_tensor_map_request(big).ok());
}

// ---- the encode call, with a fake driver ----

struct EncodeCall {
  int calls = 0;
  CUtensorMapDataType dtype{};
  cuuint32_t rank = 0;
  void* address = nullptr;
  cuuint64_t dims[4] = {};
  cuuint64_t strides[3] = {};
  cuuint32_t box[4] = {};
  cuuint32_t element_strides[4] = {};
  CUtensorMapInterleave interleave{};
  CUtensorMapSwizzle swizzle{};
  CUtensorMapL2promotion l2{};
  CUtensorMapFloatOOBfill oob{};
  CUresult answer = CUDA_SUCCESS;
};
EncodeCall g_encode;

CUresult fake_encode(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  EncodeCall& c = g_encode;
  ++c.calls;
  c.dtype = dtype;
  c.rank = rank;
  c.address = address;
  std::memcpy(c.dims, dims, sizeof(c.dims));
  std::memcpy(c.strides, strides, sizeof(c.strides));
  std::memcpy(c.box, box, sizeof(c.box));
  std::memcpy(c.element_strides, element_strides, sizeof(c.element_strides));
  c.interleave = interleave;
  c.swizzle = swizzle;
  c.l2 = l2;
  c.oob = oob;
  if (c.answer == CUDA_SUCCESS) map->opaque[0] = 0x1234;
  return c.answer;
}

CUresult fake_error_name(CUresult, const char** name) {
  *name = "CUDA_ERROR_INVALID_VALUE";
  return CUDA_SUCCESS;
}

DriverApi fake_driver() {
  DriverApi api;
  api.cuTensorMapEncodeTiled = &fake_encode;
  api.cuGetErrorName = &fake_error_name;
  return api;
}

TEST(TensorMap, EncodesFourDimensionalTiledMapInnermostFirst) {
  g_encode = EncodeCall{};
  const DriverApi api = fake_driver();
  TensorMapRequest r = contiguous("q", 2, 1024, 16, 128);
  r.dtype = DType::kFp16;
  r.stride_seqlen = 3 * 16 * 128;  // packed QKV rows
  r.stride_batch = 1024 * 3 * 16 * 128;
  r.box_rows = 128;
  auto map = make_tensor_map_bshd(api, r);
  ASSERT_TRUE(map.ok()) << map.error().message;
  EXPECT_EQ(map->opaque[0], 0x1234u);
  ASSERT_EQ(g_encode.calls, 1);
  EXPECT_EQ(g_encode.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(g_encode.rank, 4u);
  EXPECT_EQ(g_encode.address, reinterpret_cast<void*>(r.base));
  const cuuint64_t dims[4] = {128, 1024, 16, 2};
  const cuuint64_t strides[3] = {3 * 16 * 128 * 2, 128 * 2, 1024 * 3 * 16 * 128 * 2};
  const cuuint32_t box[4] = {64, 128, 1, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(g_encode.dims[i], dims[i]) << i;
    EXPECT_EQ(g_encode.box[i], box[i]) << i;
    EXPECT_EQ(g_encode.element_strides[i], 1u) << i;
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g_encode.strides[i], strides[i]) << i;
  EXPECT_EQ(g_encode.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  EXPECT_EQ(g_encode.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(g_encode.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  EXPECT_EQ(g_encode.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);

  r.dtype = DType::kBf16;
  ASSERT_TRUE(make_tensor_map_bshd(api, r).ok());
  EXPECT_EQ(g_encode.dtype, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
}

TEST(TensorMap, InvalidRequestNeverReachesTheDriver) {
  g_encode = EncodeCall{};
  TensorMapRequest r = contiguous("k", 1, 64, 1, 64);
  r.box_rows = 0;
  auto map = make_tensor_map_bshd(fake_driver(), r);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(map.error().field, "k.box_rows");
  EXPECT_EQ(g_encode.calls, 0);
  // The process-wide form validates first too, driver or not.
  auto global = make_tensor_map_bshd(r);
  ASSERT_FALSE(global.ok());
  EXPECT_EQ(global.error().code, ErrorCode::kInvalidArgument);
}

TEST(TensorMap, DriverRejectionIsCheckedAndDescribed) {
  g_encode = EncodeCall{};
  g_encode.answer = CUDA_ERROR_INVALID_VALUE;
  auto map = make_tensor_map_bshd(fake_driver(), contiguous("o", 2, 512, 4, 96));
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code, ErrorCode::kDriverError);
  const std::string& m = map.error().message;
  EXPECT_NE(m.find("cuTensorMapEncodeTiled(o: bf16"), std::string::npos) << m;
  EXPECT_NE(m.find("dims {96, 512, 4, 2}"), std::string::npos) << m;
  EXPECT_NE(m.find("box {64, 128, 1, 1}"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << m;
}

}  // namespace
}  // namespace flashjit
