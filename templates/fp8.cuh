// fp8.cuh: the FP8 E4M3 format and its dequantisation (issue 39), the one statement of them for
// host and device, beside score_mod.cuh: compiled on the host by the tests (tests/fp8_format_test.cpp)
// and, with the FP8 paths, the float64 reference; on the device it uses the hardware's conversions.
// Not rendered into the 16-bit kernels (their source, and so their cache keys, stay as they are).
//
// The format: OCP FP8 E4M3 ("e4m3fn": NVIDIA's __nv_fp8_e4m3, torch.float8_e4m3fn). Bit 7 the sign,
// bits 6-3 the exponent e (bias 7), bits 2-0 the mantissa m:
//   e > 0: (-1)^s x (1 + m / 8) x 2^(e - 7)      e = 0: (-1)^s x m x 2^-9 (subnormals)
//   S.1111.111 (0x7F, 0xFF) is NaN; there is no infinity, so S.1111.110 = +-448 is the largest finite.
// So every value is an integer multiple of 2^-9 below 2^18 (e4m3_value's form, exact in float),
// and every value is exact in fp16 and bf16 too: K/V widened to 16 bits lose nothing.
// Encoding (float_to_e4m3) is cvt.rn.satfinite.e4m3x2.f32's: round to nearest, ties to even;
// finite values past 448 and +-inf saturate to +-448 (464, the midpoint of 448 and the 480 that
// S.1111.111 would be, rounds to even: 448; past it rounding alone would leave the range); NaN
// gives 0x7F (the sign of a NaN is not kept); a value that rounds to zero keeps its sign.
//
// Dequantisation (FA3's q_descale, k_descale, v_descale): the value an input code stands for is
// e4m3_to_float(code) x descale, one float32 descale per (batch, KV head) of each of Q, K and V
// ([batch, heads_kv] with strides; a query head takes its KV head's; stride 0: one value for the
// whole tensor). vLLM's k_scale and v_scale (per tensor, or per KV head) are the same rule: K and
// V descales with batch stride 0, head stride 0 or 1; its 16-bit queries take no descale. The
// float64 reference computes attention on these values; a kernel may fold q_descale x k_descale
// into the score scale and v_descale into O's normaliser (the same values in exact arithmetic).
//
// NOTES (correctness): encoding saturates before it rounds (e4m3_round): with no infinity, a
// value past 464 that rounded up would land on 0x7F, NaN, the one code a finite input must never
// give. The descales scale the dot product itself, so with a softcap they sit inside the tanh
// (softcap x tanh(scale x q_descale x k_descale x q.k / softcap), FA3's softcap_val x q_descale x
// k_descale); ALiBi and sinks are not descaled. A 16-bit widening must leave the descale out
// (448 x descale may pass fp16's 65504, a small descale push values into its subnormals): it is
// applied in float, as the score scale and O's.

#ifndef FJ_DEVICE
#define FJ_DEVICE inline
#endif
// No header is included (a rendered kernel takes none) and no fixed-width type is needed: a code
// is an unsigned char. The host's arithmetic below is exact in float, without library calls.

constexpr unsigned char kE4m3Nan = 0x7F;       // S.1111.111, either sign
constexpr unsigned char kE4m3MaxCode = 0x7E;   // 448
constexpr float kE4m3Max = 448.0f;
constexpr float kE4m3MinSubnormal = 1.0f / 512;  // 2^-9

FJ_DEVICE bool e4m3_is_nan(unsigned char code) { return (code & 0x7F) == kE4m3Nan; }

// ---- the definition (host, and a device check against the hardware)
// The value of a code: its magnitude in units of 2^-9 is the significand (8 + m, or m for a
// subnormal) shifted left by e - 1, at most 15 x 2^14 (exact in float).
FJ_DEVICE float e4m3_value(unsigned char code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return 0.0f / 0.0f;
  const int units = e == 0 ? m : (8 + m) << (e - 1);
  const float magnitude = float(units) * kE4m3MinSubnormal;
  return code & 0x80 ? -magnitude : magnitude;
}

// The code of a float: |x| in units of 2^-9 is divided by its binade's step (1 below 16 units,
// the subnormals and e = 1; 2^k for [8, 16) x 2^k), rounded to an integer n, ties to even, and
// the code is 8k + n (n = 16 carries into the next exponent: 8(k + 1) + 8, m = 0). Every step
// is exact in float.
FJ_DEVICE unsigned char e4m3_round(float x) {
  if (x != x) return kE4m3Nan;
  const bool negative = x < 0.0f || (x == 0.0f && 1.0f / x < 0.0f);  // -0 kept
  const float magnitude = negative ? -x : x;
  const unsigned char sign = negative ? 0x80 : 0;
  if (magnitude >= kE4m3Max) return sign | kE4m3MaxCode;  // saturation, before rounding (NOTES)
  const float units = magnitude * 512.0f;
  int k = 0;
  float step = 1.0f;
  while (units >= 16.0f * step) {
    step *= 2.0f;
    ++k;
  }
  const float quotient = units / step;  // < 16
  int n = int(quotient);
  const float rest = quotient - float(n);
  if (rest > 0.5f || (rest == 0.5f && (n & 1))) ++n;
  return (unsigned char)(sign | (8 * k + n));  // k <= 14, so no rounding reaches 0x7F
}

// ---- what the code calls: the hardware's conversions on the device (sm_89 and later), the
// definition on the host. The x2 instructions convert two values; one half is left unused here.
FJ_DEVICE float e4m3_to_float(unsigned char code) {
#ifdef __CUDA_ARCH__
  unsigned int halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"((unsigned short)code));
  float value;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.f32.f16 %0, lo;\n}" : "=f"(value) : "r"(halves));
  return value;
#else
  return e4m3_value(code);
#endif
}

FJ_DEVICE unsigned char float_to_e4m3(float x) {
#ifdef __CUDA_ARCH__
  unsigned short pair;  // first source in the high byte, second in the low
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(x));
  return (unsigned char)pair;
#else
  return e4m3_round(x);
#endif
}

FJ_DEVICE double e4m3_to_double(unsigned char code) { return double(e4m3_to_float(code)); }  // exact

// ---- dequantisation
// Where a (batch, KV head)'s descale is: batch x batch_stride + head_kv x head_stride
// ([batch, heads_kv]: heads_kv and 1; per KV head for all sequences: 0 and 1; per tensor: 0 and 0).
FJ_DEVICE long long descale_index(int batch, int head_kv, long long batch_stride, long long head_stride) {
  return batch * batch_stride + head_kv * head_stride;
}

// The value a code stands for: float in the kernel, double in the reference.
template <typename T>
FJ_DEVICE T dequantised(unsigned char code, T descale) {
  return T(e4m3_to_float(code)) * descale;
}
