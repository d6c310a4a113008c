// The FP8 inputs of the verify stage: an FP8 K/V cache (a kv_dtype=e4m3 spec) or FP8 operands (a
// dtype=e4m3 spec: Q too). How random 16-bit values become e4m3 codes with float32 scales
// (descales), and the dequantised 16-bit copy the float64 references read. The one place both
// checks (check.cpp's dense inputs, engine_check.cpp's packed, dense and paged inputs) and the
// timing tool quantise and dequantise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

// Which tensor a scale belongs to (Q's only with FP8 operands).
enum class Fp8Tensor { kQ, kK, kV };

// The FP8 inputs' codes and scales (the name from the FP8 K/V cache, which came first). Each element's code is its random value divided by its KV
// head's scale, rounded to e4m3 (templates/fp8.cuh's rule; saturating); the reference reads code x
// scale rounded once to the 16-bit dtype, as the kernel widens it. With power-of-two scales that
// value is exact in fp16 and bf16. Elements no sequence reads hold the NaN code 0x7F (the engine
// check's nan_padding; the dense check's bytes outside K and V).
struct Fp8Cache {
  bool on = false;
  // FP8 operands (dtype=e4m3): Q is quantised too, by q_scale (FlashAttention-3's q_descale), the
  // 16-bit copies the references read are bf16 (e4m3 x a power of two is exact there), and O is
  // out_bf16's type. Off: an FP8 K/V cache, Q and O in the spec's dtype.
  bool operands = false;
  bool out_bf16 = true;  // operands: O's type (the spec's out_dtype)
  // One scale per tensor (batch and head strides 0) or per KV head (head stride 1); then head
  // h's is the scale's times the h-th of these factors, cycling.
  bool per_head = false;
  // With per_head: one scale per sequence and KV head (FlashAttention-3's descales [batch,
  // heads_kv]: batch stride heads_kv, head stride 1); sequence b's head h takes factor b + h.
  bool per_sequence = false;
  std::vector<float> head_factors = {1.0f, 0.5f, 2.0f, 0.25f};
  float k_scale = 0.5f, v_scale = 0.25f;  // powers of two: exact dequantised values
  float q_scale = 0.25f;                  // operands only
  // Outliers: this many keys of each sequence (at random positions) scaled by 50 before they are
  // quantised, so their scores are about 50x the rest.
  int outlier_keys = 0;
  float scale_of(Fp8Tensor t, int batch, int head_kv) const {
    const float base = t == Fp8Tensor::kQ ? q_scale : t == Fp8Tensor::kK ? k_scale : v_scale;
    if (!per_head) return base;
    return base * head_factors[size_t(head_kv + (per_sequence ? batch : 0)) % head_factors.size()];
  }
  float scale_of(bool k, int head_kv) const { return scale_of(k ? Fp8Tensor::kK : Fp8Tensor::kV, 0, head_kv); }
  // A tensor's scales for `batch` sequences of `heads_kv` heads as a launch reads them: float32
  // [batch][heads_kv] per sequence, else [heads_kv] (per tensor every entry is the one scale, and
  // the launch's head stride 0 reads the first).
  std::vector<float> scales(Fp8Tensor t, int batch, int heads_kv) const;
  std::vector<float> scales(bool k, int heads_kv) const { return scales(k ? Fp8Tensor::kK : Fp8Tensor::kV, 1, heads_kv); }
  int64_t scale_head_stride() const { return per_head ? 1 : 0; }
  int64_t scale_batch_stride(int heads_kv) const { return per_head && per_sequence ? heads_kv : 0; }
  // Whether the references' 16-bit copies are bf16 (FP8 operands), else the spec dtype's (`bf16`).
  bool copies_bf16(bool bf16) const { return operands || bf16; }
  // Whether every scale is a power of two (the dequantised copy then exact in fp16 and bf16).
  bool exact() const;
  std::string describe() const;  // "" when off, else " e4m3 [q_scale=... ]k_scale=... v_scale=..."
};

// The 16-bit bits of code x scale (the dequantised value, rounded once to the dtype); NaN for a
// NaN code. `quantised_code`: value / scale, rounded to e4m3 (saturating).
uint16_t dequantised_bits(unsigned char code, float scale, bool bf16);
unsigned char quantised_code(float value, float scale);

// One element of the cache: the 16-bit `bits` (a random value; NaN: the NaN code), times 50 when
// `outlier`, quantised by `scale`; `bits` becomes its dequantised copy. Returns the code.
unsigned char quantise_element(uint16_t& bits, float scale, bool bf16, bool outlier = false);

// quantise_element by table: its result for each of the 65536 inputs under a (scale, outlier),
// worked out on first use (the checks quantise up to a billion elements; a few scales each).
class Fp8Quantiser {
 public:
  explicit Fp8Quantiser(bool bf16) : bf16_(bf16) {}
  unsigned char operator()(uint16_t& bits, float scale, bool outlier = false) {
    const Table& t = table(scale, outlier);
    const unsigned char code = t.code[bits];
    bits = t.dequantised[code];
    return code;
  }

 private:
  struct Table {
    float scale;
    bool outlier;
    std::vector<unsigned char> code;    // [65536]
    std::vector<uint16_t> dequantised;  // [256]
  };
  const Table& table(float scale, bool outlier);
  bool bf16_;
  std::vector<Table> tables_;
  size_t last_ = 0;
};

}  // namespace flashjit
