#include "verify/fp8_cache.hpp"

#include <cmath>
#include <cstdio>

#include "verify/reference.hpp"

// The e4m3 format's rules (the FP8 cache's codes and their dequantised values).
#include "../../templates/fp8.cuh"

namespace flashjit {

uint16_t dequantised_bits(unsigned char code, float scale, bool bf16) {
  if (e4m3_is_nan(code)) return bf16 ? 0x7FC0 : 0x7E00;  // float_to_half_bits need not keep a NaN a NaN
  return float_to_half_bits(dequantised<float>(code, scale), bf16);
}

unsigned char quantised_code(float value, float scale) { return e4m3_round(value / scale); }

unsigned char quantise_element(uint16_t& bits, float scale, bool bf16, bool outlier) {
  float value = half_bits_to_float(bits, bf16);
  if (outlier) value *= 50.0f;
  const unsigned char code = std::isnan(value) ? kE4m3Nan : quantised_code(value, scale);
  bits = dequantised_bits(code, scale, bf16);
  return code;
}

const Fp8Quantiser::Table& Fp8Quantiser::table(float scale, bool outlier) {
  if (last_ < tables_.size() && tables_[last_].scale == scale && tables_[last_].outlier == outlier) return tables_[last_];
  for (last_ = 0; last_ < tables_.size(); ++last_) {
    if (tables_[last_].scale == scale && tables_[last_].outlier == outlier) return tables_[last_];
  }
  Table t{scale, outlier, std::vector<unsigned char>(65536), std::vector<uint16_t>(256)};
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t value = uint16_t(bits);
    t.code[bits] = quantise_element(value, scale, bf16_, outlier);
  }
  for (uint32_t code = 0; code < 256; ++code) t.dequantised[code] = dequantised_bits((unsigned char)code, scale, bf16_);
  tables_.push_back(std::move(t));
  last_ = tables_.size() - 1;
  return tables_.back();
}

std::vector<float> Fp8Cache::scales(Fp8Tensor t, int batch, int heads_kv) const {
  const int heads = heads_kv > 0 ? heads_kv : 1, sequences = per_head && per_sequence && batch > 0 ? batch : 1;
  std::vector<float> out(size_t(sequences) * heads);
  for (int b = 0; b < sequences; ++b)
    for (int h = 0; h < heads; ++h) out[size_t(b) * heads + h] = scale_of(t, b, h);
  return out;
}

bool Fp8Cache::exact() const {
  auto pow2 = [](float x) {
    int e = 0;
    return x > 0 && std::frexp(x, &e) == 0.5f;
  };
  bool all = pow2(k_scale) && pow2(v_scale) && (!operands || pow2(q_scale));
  if (per_head) for (float f : head_factors) all = all && pow2(f);
  return all;
}

std::string Fp8Cache::describe() const {
  if (!on) return "";
  char text[160];
  char q_part[32] = "";
  if (operands) std::snprintf(q_part, sizeof(q_part), "q_scale=%g ", q_scale);
  std::snprintf(text, sizeof(text), " e4m3 %sk_scale=%g v_scale=%g%s%s%s", q_part, k_scale, v_scale,
                per_head ? (per_sequence ? " per-sequence-head" : " per-head") : "", operands ? (out_bf16 ? " out=bf16" : " out=fp16") : "",
                outlier_keys ? (" outliers=" + std::to_string(outlier_keys)).c_str() : "");
  return text;
}

}  // namespace flashjit
