// The e4m3 format (templates/fp8.cuh, compiled here as host code) against its definition written
// out here with ldexp: every one of the 256 codes, encode(decode) for every non-NaN code, ties to
// even at the midpoint of every pair of neighbours, saturation, NaN, subnormals and underflow; the
// same against cuda_fp8.h's host conversions (every code, a few million random floats); and the
// device form through NVRTC: the hardware's conversions in its SASS (where cuobjdump is).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

#include "../templates/fp8.cuh"
#include "compile/nvrtc_compiler.hpp"
#include "source/render.hpp"
#include "support/test_seed.hpp"

// cuda_fp8.h needs the toolkit's crt/ headers, which PyPI's CUDA headers (the bootstrap's
// fallback) lack: the comparison is skipped without them.
#if __has_include(<cuda_fp8.h>) && __has_include(<crt/host_defines.h>)
#include <cuda_fp8.h>
#define FLASHJIT_HAVE_CUDA_FP8 1
#endif

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

#ifdef FLASHJIT_HAVE_CUDA_FP8
uint8_t cuda_encode(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
float cuda_decode(uint8_t code) {
  __nv_fp8_e4m3 value;
  value.__x = code;
  return float(value);
}

// cuda_fp8.h's host conversions (the reference for __nv_fp8_e4m3 and torch.float8_e4m3fn): every
// code, every midpoint and the floats beside it, and random floats: every bit pattern alike (NaN,
// inf and subnormals included) and values log-uniform over [2^-12, 2^10) of either sign. A NaN's
// sign: cuda_fp8.h keeps it (0xFF), we do not; both are NaN.
TEST(Fp8Format, MatchesCudaFp8HostConversions) {
  for (int code = 0; code < 256; ++code) {
    const float want = cuda_decode(code);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(e4m3_to_float(code))) << hex(code);
    else EXPECT_EQ(std::bit_cast<uint32_t>(e4m3_to_float(code)), std::bit_cast<uint32_t>(want)) << hex(code);
  }
  std::vector<float> midpoints;  // of every pair of neighbours, 448 | 480 included, and a float either side
  for (int low = 0; low <= kE4m3MaxCode; ++low) {
    const float mid = float((defined_value(low) + (low == kE4m3MaxCode ? 480.0 : defined_value(low + 1))) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) midpoints.insert(midpoints.end(), {x, -x});
  }
  std::mt19937_64 rng(testing::test_seed());
  std::uniform_real_distribution<float> exponent(-12.0f, 10.0f);
  int mismatches = 0;
  for (int i = 0; i < 4000000; ++i) {
    float x;
    if (size_t(i) < midpoints.size()) {
      x = midpoints[i];
    } else if (i % 2 == 0) {
      const uint32_t bits = uint32_t(rng());
      std::memcpy(&x, &bits, 4);
    } else {
      x = std::exp2(exponent(rng)) * (rng() % 2 ? -1.0f : 1.0f);
    }
    const int got = float_to_e4m3(x), want = cuda_encode(x);
    const bool same = std::isnan(x) ? got == kE4m3Nan && is_nan_code(want) : got == want;
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << "x " << x << " (bits " << std::hex << std::bit_cast<uint32_t>(x) << std::dec << "): " << hex(got)
                    << ", cuda_fp8.h " << hex(want);
    }
  }
  EXPECT_EQ(mismatches, 0);
}
#else
TEST(Fp8Format, MatchesCudaFp8HostConversions) { GTEST_SKIP() << "cuda_fp8.h (with the toolkit's crt/host_defines.h) not found"; }
#endif

// ---- the device form
std::string cuobjdump_path() {
  if (const char* set = std::getenv("CUOBJDUMP"); set && *set) return access(set, X_OK) == 0 ? set : "";
  FILE* pipe = popen("command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null || python3 -c 'import nvidia, os; "
                     "print(os.path.join(nvidia.__path__[0], \"cu13\", \"bin\", \"cuobjdump\"))' 2>/dev/null",
                     "r");
  if (!pipe) return "";
  char line[4096] = {};
  const bool read = std::fgets(line, sizeof line, pipe) != nullptr;
  pclose(pipe);
  std::string path = read ? line : "";
  while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

// The SASS of one kernel of a cubin, or "" when cuobjdump fails.
std::string kernel_sass(const std::string& cuobjdump, const std::string& cubin, const std::string& kernel) {
  char path[] = "/tmp/flashjit-fp8-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "";
  const bool written = write(fd, cubin.data(), cubin.size()) == ssize_t(cubin.size());
  close(fd);
  std::string sass;
  if (written) {
    FILE* pipe = popen((cuobjdump + " --dump-sass --function " + kernel + " " + path + " 2>&1").c_str(), "r");
    if (pipe) {
      char buffer[4096];
      for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) sass.append(buffer, n);
      if (pclose(pipe) != 0) sass.clear();
    }
  }
  unlink(path);
  return sass;
}

const char* kDeviceKernels = R"CUDA(
// The hardware's conversions, as the kernels call them, and the definition, for a device check.
extern "C" __global__ void fp8_hardware(const float* x, const float* descale, unsigned char* codes, float* values) {
  const int i = threadIdx.x;
  codes[i] = float_to_e4m3(x[i]);
  values[i] = dequantised(codes[i], descale[descale_index(blockIdx.x, i / 8, 32, 1)]);
}
extern "C" __global__ void fp8_definition(const float* x, unsigned char* codes, float* values) {
  const int i = threadIdx.x;
  codes[i] = e4m3_round(x[i]);
  values[i] = e4m3_value(codes[i]);
}
)CUDA";

// NVRTC compiles the header for sm_90a as the attention kernels render it (after ptx.cuh) and as
// the GPU reference does (FJ_DEVICE alone), without a spill or a stack frame; the hardware form's
// SASS converts with F2FP (f32 -> e4m3 packed with satfinite, e4m3 -> f16 unpacked).
TEST(Fp8Format, DeviceFormCompilesToTheHardwareConversions) {
  const std::string fp8(embedded_template("fp8.cuh"));
  ASSERT_FALSE(fp8.empty());
  const std::string cuobjdump = cuobjdump_path();
  const std::string as_attention_kernel(embedded_template("ptx.cuh")), as_reference("#define FJ_DEVICE __device__ inline\n");
  for (const std::string& prefix : {as_attention_kernel, as_reference}) {
    SCOPED_TRACE(prefix == as_reference ? "as the reference kernel" : "as the attention kernels");
    const std::string source = prefix + fp8 + kDeviceKernels;
    auto kernel = compile_with_nvrtc({source, default_nvrtc_options(), "fp8_hardware", "fp8 format check"});
    ASSERT_TRUE(kernel.ok()) << kernel.error().message << "\n" << kernel.error().log.substr(0, 4000);
    EXPECT_EQ(kernel->report.spill_bytes(), 0);
    EXPECT_EQ(kernel->report.stack_frame_bytes, 0);
    if (cuobjdump.empty()) continue;
    const std::string hardware = kernel_sass(cuobjdump, kernel->cubin, "fp8_hardware");
    ASSERT_FALSE(hardware.empty());
    for (size_t at = hardware.find("F2FP"); at != std::string::npos; at = hardware.find("F2FP", at + 1)) {
      std::printf("  %s\n", hardware.substr(at, hardware.find(';', at) - at).c_str());
    }
    EXPECT_NE(hardware.find("F2FP.SATFINITE.E4M3.F32.PACK_AB"), std::string::npos) << hardware;
    EXPECT_NE(hardware.find("F2FP.F16.E4M3.UNPACK_B"), std::string::npos) << hardware;
    const std::string definition = kernel_sass(cuobjdump, kernel->cubin, "fp8_definition");
    ASSERT_FALSE(definition.empty());
    EXPECT_EQ(definition.find("E4M3"), std::string::npos) << "the definition uses no conversion of the hardware's";
  }
  if (cuobjdump.empty()) GTEST_SKIP() << "cuobjdump not found: compiled, the SASS not checked";
}

}  // namespace
}  // namespace flashjit
