// The FP8 K/V cache of the verify stage (a kv_dtype=e4m3 spec): how random 16-bit K/V values
// become e4m3 codes with float32 scales, and the dequantised 16-bit copy the float64 references
// read. The one place both checks (check.cpp's dense inputs, engine_check.cpp's packed, dense and
// paged caches) and the timing tool quantise and dequantise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

// An FP8 K/V cache's codes and scales. Each element's code is its random value divided by its KV
// head's scale, rounded to e4m3 (templates/fp8.cuh's rule; saturating); the reference reads code x
// scale rounded once to the 16-bit dtype, as the kernel widens it. With power-of-two scales that
// value is exact in fp16 and bf16. Elements no sequence reads hold the NaN code 0x7F (the engine
// check's nan_padding; the dense check's bytes outside K and V).
struct Fp8Cache {
  bool on = false;
  // One scale per tensor (batch and head strides 0) or per KV head (head stride 1); then head
  // h's is the scale's times the h-th of these factors, cycling.
  bool per_head = false;
  std::vector<float> head_factors = {1.0f, 0.5f, 2.0f, 0.25f};
  float k_scale = 0.5f, v_scale = 0.25f;  // powers of two: exact dequantised values
  // Outliers: this many keys of each sequence (at random positions) scaled by 50 before they are
  // quantised, so their scores are about 50x the rest.
  int outlier_keys = 0;
  float scale_of(bool k, int head_kv) const {
    const float base = k ? k_scale : v_scale;
    return per_head ? base * head_factors[size_t(head_kv) % head_factors.size()] : base;
  }
  // K's (k) or V's scales of `heads_kv` heads as a launch reads them (float32 [heads_kv]; per
  // tensor every entry is the one scale, and the launch's head stride 0 reads the first).
  std::vector<float> scales(bool k, int heads_kv) const;
  int64_t scale_head_stride() const { return per_head ? 1 : 0; }
  // Whether every scale is a power of two (the dequantised copy then exact in fp16 and bf16).
  bool exact() const;
  std::string describe() const;  // "" when off, else " e4m3 k_scale=... v_scale=..."
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
