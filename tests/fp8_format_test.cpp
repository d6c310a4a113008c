// The e4m3 format (templates/fp8.cuh, compiled here as host code) against its definition written
// out here with ldexp: every one of the 256 codes, encode(decode) for every non-NaN code, ties to
// even at the midpoint of every pair of neighbours, saturation, NaN, subnormals and underflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "../templates/fp8.cuh"

namespace flashjit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The format's definition: sign, 4 exponent bits (bias 7), 3 mantissa bits, S.1111.111 NaN.
double defined_value(int code) {
  const int sign = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double magnitude = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -magnitude : magnitude;
}

bool is_nan_code(int code) { return (code & 0x7F) == 0x7F; }

std::string hex(int code) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", code);
  return text;
}

TEST(Fp8Format, EveryCodeDecodesToTheDefinition) {
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const double want = defined_value(code);
    EXPECT_EQ(e4m3_is_nan(code), is_nan_code(code)) << hex(code);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(e4m3_value(code)) && std::isnan(e4m3_to_float(code))) << hex(code);
      EXPECT_TRUE(std::isnan(e4m3_to_double(code))) << hex(code);
      continue;
    }
    ++finite;
    EXPECT_EQ(double(e4m3_value(code)), want) << hex(code);
    EXPECT_EQ(double(e4m3_to_float(code)), want) << hex(code);
    EXPECT_EQ(e4m3_to_double(code), want) << hex(code);
    EXPECT_EQ(std::signbit(e4m3_value(code)), bool(code & 0x80)) << hex(code);  // 0x80 is -0
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_value(kE4m3MaxCode), 448.0f);
  EXPECT_EQ(e4m3_value(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_value(0x07), 7 * std::ldexp(1.0f, -9));  // the largest subnormal
  EXPECT_EQ(e4m3_value(0x08), std::ldexp(1.0f, -6));      // the smallest normal
  EXPECT_EQ(e4m3_value(0x38), 1.0f);
  for (int code = 1; code <= kE4m3MaxCode; ++code) EXPECT_LT(e4m3_value(code - 1), e4m3_value(code)) << hex(code);
}

// Both zeros included: -0 encodes to 0x80.
TEST(Fp8Format, EncodeInvertsDecodeForEveryNonNanCode) {
  for (int code = 0; code < 256; ++code) {
    if (is_nan_code(code)) continue;
    EXPECT_EQ(e4m3_round(e4m3_value(code)), code) << hex(code);
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(code)), code) << hex(code);
  }
}

// Between every pair of neighbours (both signs, the subnormals, the subnormal-normal boundary and
// every binade's carry into the next): the midpoint goes to the even code, a float either side of
// it to the nearer code. Midpoints are exact in float (multiples of 2^-10 below 2^9).
TEST(Fp8Format, RoundsToNearestTiesToEvenBetweenEveryPairOfNeighbours) {
  for (int low = 0; low < kE4m3MaxCode; ++low) {
    const int high = low + 1;
    const double mid_exact = (defined_value(low) + defined_value(high)) / 2;
    const float mid = float(mid_exact);
    ASSERT_EQ(double(mid), mid_exact) << hex(low);
    const int even = low % 2 == 0 ? low : high;
    for (int sign : {0, 0x80}) {
      const float s = sign ? -1.0f : 1.0f;
      EXPECT_EQ(e4m3_round(s * mid), even | sign) << hex(low) << " " << s * mid;
      EXPECT_EQ(e4m3_round(s * std::nextafter(mid, 0.0f)), low | sign) << hex(low);
      EXPECT_EQ(e4m3_round(s * std::nextafter(mid, kInf)), high | sign) << hex(low);
      // a quarter of the way from either end
      EXPECT_EQ(e4m3_round(s * float((3 * defined_value(low) + defined_value(high)) / 4)), low | sign) << hex(low);
      EXPECT_EQ(e4m3_round(s * float((defined_value(low) + 3 * defined_value(high)) / 4)), high | sign) << hex(low);
    }
  }
}

TEST(Fp8Format, SaturatesFiniteValuesAndInfinityTo448) {
  for (float x : {448.0f, std::nextafter(448.0f, kInf), 449.0f, 460.0f, 464.0f, std::nextafter(464.0f, kInf), 480.0f, 1e6f,
                  std::numeric_limits<float>::max(), kInf}) {
    EXPECT_EQ(e4m3_round(x), kE4m3MaxCode) << x;
    EXPECT_EQ(e4m3_round(-x), 0x80 | kE4m3MaxCode) << -x;
  }
  EXPECT_EQ(e4m3_round(std::nextafter(448.0f, 0.0f)), kE4m3MaxCode);  // rounds to 448 without saturating
  EXPECT_EQ(e4m3_round(432.0f), kE4m3MaxCode);                         // 416 | 448 midpoint: 448 is even
  EXPECT_EQ(e4m3_round(std::nextafter(432.0f, 0.0f)), 0x7D);          // 416
}

TEST(Fp8Format, NanEncodesTo0x7F) {
  for (float x : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::signaling_NaN()}) {
    EXPECT_EQ(e4m3_round(x), kE4m3Nan);
  }
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)) && std::isnan(e4m3_value(0xFF)));
}

TEST(Fp8Format, SubnormalsAndUnderflowToZero) {
  const float min_subnormal = std::ldexp(1.0f, -9);
  EXPECT_EQ(e4m3_round(min_subnormal), 0x01);
  EXPECT_EQ(e4m3_round(min_subnormal / 2), 0x00);  // exactly half: ties to even, 0
  EXPECT_EQ(e4m3_round(std::nextafter(min_subnormal / 2, kInf)), 0x01);
  EXPECT_EQ(e4m3_round(-std::nextafter(min_subnormal / 2, kInf)), 0x81);
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  for (float x : {std::nextafter(min_subnormal / 2, 0.0f), min_subnormal / 4, 1e-30f, denorm_min, 0.0f}) {
    EXPECT_EQ(e4m3_round(x), 0x00) << x;
    EXPECT_EQ(e4m3_round(-x), 0x80) << -x;  // the sign kept
  }
  EXPECT_EQ(e4m3_round(1.5f * min_subnormal), 0x02);  // 1 | 2: 2 is even
  EXPECT_EQ(e4m3_round(2.5f * min_subnormal), 0x02);  // 2 | 3
  EXPECT_EQ(e4m3_round(7.5f * min_subnormal), 0x08);  // the largest subnormal | the smallest normal
  EXPECT_EQ(e4m3_round(7.25f * min_subnormal), 0x07);
}

TEST(Fp8Format, DescalesPerTensorPerKvHeadOrPerBatchAndKvHead) {
  EXPECT_EQ(descale_index(3, 5, 0, 0), 0);   // one value for the tensor
  EXPECT_EQ(descale_index(3, 5, 0, 1), 5);   // per KV head (vLLM's per-head scales)
  EXPECT_EQ(descale_index(3, 5, 8, 1), 29);  // [batch, heads_kv], heads_kv 8
  EXPECT_EQ(descale_index(100000, 7, 1 << 20, 1), 104857600007LL);  // no int overflow
  EXPECT_EQ(dequantised(0x38, 0.5f), 0.5f);                   // 1 x 0.5
  EXPECT_EQ(dequantised(0xFE, 2.0), -896.0);
  EXPECT_EQ(dequantised(0x01, 3.0), 3 * std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(dequantised(0x7F, 1.0f)));
}

}  // namespace
}  // namespace flashjit
