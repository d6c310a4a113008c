// Verify stage: float64 references for the attention forward: a CPU one (the definition) and a GPU one (the same
// algorithm as a plain NVRTC-compiled kernel, for shapes too large for the CPU), plus host-side
// fp16/bf16 conversion and random inputs.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace flashjit {

// [batch, seqlen, heads, head_dim] with element strides; head_dim is contiguous.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;
};

struct Problem {
  bool bf16 = true;
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  bool causal = false;
  double scale = 0;  // 0 = 1/sqrt(head_dim)
  // > 0: key j is scaled by 1 + key_growth * (seqlen_k - 1 - j) / seqlen_k, so the keys the kernel
  // reaches later (it walks the blocks from the last) score ever higher: a row's running max jumps
  // at every block (check_attention only).
  double key_growth = 0;
  double effective_scale() const;
  std::string describe() const;
};

// Contiguous [b, s, h, d] strides.
Strides contiguous_strides(int seqlen, int heads, int head_dim);

uint16_t float_to_half_bits(float value, bool bf16);
float half_bits_to_float(uint16_t bits, bool bf16);

// Fills `count` 16-bit values with standard-normal samples.
void fill_random(std::vector<uint16_t>& data, bool bf16, std::mt19937_64& rng);

// Output of a reference: O as [b, s_q, h_q, d] contiguous, LSE as [b, h_q, s_q] (natural log,
// -inf for a row that sees no key).
struct Reference {
  std::vector<double> o;
  std::vector<double> lse;
};

Reference cpu_reference(const Problem& p, const uint16_t* q, Strides qs, const uint16_t* k, Strides ks,
                        const uint16_t* v, Strides vs);

// The GPU reference kernel's source (fp64 math; NVRTC, sm_90a). Entry point "reference_attention",
// one 128-thread block per (query row, head, batch), parameter struct RefParams below.
std::string reference_kernel_source(bool bf16);

struct RefParams {
  uint64_t q, k, v;       // device pointers to 16-bit elements
  int64_t qs[3], ks[3], vs[3];  // batch, row, head strides (elements)
  uint64_t o;             // double [b, s_q, h_q, d]
  uint64_t lse;           // double [b, h_q, s_q]
  int seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal;
  double scale;
};

// ||a - b|| / ||b|| (or ||a - b|| when ||b|| is 0), over all elements.
double relative_l2_error(const std::vector<double>& actual, const std::vector<double>& expected);

}  // namespace flashjit
