// Verify stage: float64 references for the attention forward: a CPU one (the definition) and a GPU one (the same
// algorithm as a plain NVRTC-compiled kernel, for shapes too large for the CPU), plus host-side
// fp16/bf16 conversion and random inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "verify/fp8_cache.hpp"

namespace flashjit {

// [batch, seqlen, heads, head_dim] with element strides; head_dim is contiguous.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;
};

// Issue 38's features as the float64 references take them; every one off by default
// (visibility.cuh's MaskRule and score_mod.cuh's rules state them).
struct AttentionFeatures {
  int window_left = -1, window_right = -1;  // sliding window: keys left / right of the diagonal; -1 unbounded
  int chunk = 0;                            // attention chunk (keys); 0: none
  double softcap = 0;                       // > 0: logit = softcap * tanh(logit / softcap)
  std::vector<double> sinks;                // empty, or one logit per query head (not scaled)
  std::vector<double> alibi_slopes;         // empty, [heads_q], or [batch, heads_q]
  std::string describe() const;  // "" when all are off
  // "" when the features fit a problem of `batch` sequences and `heads_q` query heads, else what
  // does not, naming the field ("alibi_slopes: 6 values; allowed: ...").
  std::string error(int batch, int heads_q) const;
  double slope(int batch_index, int head, int heads_q) const;  // 0 without ALiBi
};

struct Problem {
  bool bf16 = true;
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  int head_dim_v = 0;  // V's and O's; 0 = head_dim
  bool causal = false;
  double scale = 0;  // 0 = 1/sqrt(head_dim)
  // > 0: key j is scaled by 1 + key_growth * (seqlen_k - 1 - j) / seqlen_k, so the keys the kernel
  // reaches later (it walks the blocks from the last) score ever higher: a row's running max jumps
  // at every block (check_attention only).
  double key_growth = 0;
  AttentionFeatures features;
  // The FP8 cache (a kv_dtype=e4m3 spec; check_attention only): K and V launched as e4m3 codes with
  // float32 scales, the reference on their dequantised 16-bit copy (Fp8Cache's rule).
  Fp8Cache fp8;
  double effective_scale() const;
  int v_dim() const { return head_dim_v ? head_dim_v : head_dim; }
  std::string describe() const;
};

// Contiguous [b, s, h, d] strides.
Strides contiguous_strides(int seqlen, int heads, int head_dim);

uint16_t float_to_half_bits(float value, bool bf16);
float half_bits_to_float(uint16_t bits, bool bf16);

// fn(begin, end) over [0, count) in ranges on up to 32 threads, one a min_per_thread items or part of
// them (count <= min_per_thread: one range, on the calling thread): element-wise fills of large inputs.
void parallel_ranges(size_t count, size_t min_per_thread, const std::function<void(size_t, size_t)>& fn);

// Fills `data` with standard-normal samples (16-bit), from one seed drawn from `rng`.
void fill_random(std::vector<uint16_t>& data, bool bf16, std::mt19937_64& rng);

// One query row's float64 attention under a causal flag, a scale and the features' mask, softcap
// and ALiBi `slope` (0: none), with the row's head's sink when `sink` is not null: the softmax
// weight of each key it sees (keys first_key .. first_key + weight.size() - 1; the sink's share
// left out, so with a sink they sum to below 1) and its LSE (natural log, the sink included; -inf,
// or the sink's logit, when it sees no key). dot(j) is q . k_j, unscaled.
struct RowAttention {
  int first_key = 0;
  std::vector<double> weight;
  double lse = 0;
};
void attend_row(const AttentionFeatures& features, bool causal, double scale, double slope, const double* sink, int row,
                int seqlen_q, int seqlen_k, const std::function<double(int key)>& dot, RowAttention* out);

// Output of a reference: O as [b, s_q, h_q, d_v] contiguous, LSE as [b, h_q, s_q] (natural log,
// -inf for a row that sees no key; with sinks, see attend_row).
struct Reference {
  std::vector<double> o;
  std::vector<double> lse;
  // Per LSE entry, where asked for (FP8 operands' checks): scale x the largest sum over c of
  // |q_c k_c| among the row's visible keys, the magnitude FP8 Q K^T's accumulation error scales with
  // (fp8_lse_error); 0 for a row with no key.
  std::vector<double> magnitude;
};


Reference cpu_reference(const Problem& p, const uint16_t* q, Strides qs, const uint16_t* k, Strides ks,
                        const uint16_t* v, Strides vs);

// The GPU reference kernel's source (fp64 math; NVRTC, sm_90a). Entry point "reference_attention",
// one 128-thread block per (query row, head, batch), parameter struct RefParams below. It holds a
// query row of at most kReferenceMaxHeadDim elements in shared memory and each thread four of O's
// columns (head_dim_v at most kReferenceMaxHeadDimV); gpu_reference refuses larger head dims.
inline constexpr int kReferenceMaxHeadDim = 576, kReferenceMaxHeadDimV = 512;
std::string reference_kernel_source(bool bf16);

struct RefParams {
  uint64_t q, k, v;       // device pointers to 16-bit elements
  int64_t qs[3], ks[3], vs[3];  // batch, row, head strides (elements)
  uint64_t o;             // double [b, s_q, h_q, d]
  uint64_t lse;           // double [b, h_q, s_q]
  int seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal;
  double scale;
  // Issue 38's features (AttentionFeatures; off as initialised here).
  int window_left = -1, window_right = -1, chunk = 0, has_sinks = 0;
  double softcap = 0;
  uint64_t sinks = 0;              // double [heads_q] on the device, when has_sinks
  uint64_t alibi_slopes = 0;       // double [batch][alibi_batch_stride], 0: no ALiBi
  int64_t alibi_batch_stride = 0;  // 0: one slope per head for every sequence
  int head_dim_v = 0;              // V's and O's head dim (O: double [b, s_q, h_q, head_dim_v]); 0 = head_dim
  uint64_t magnitude = 0;          // double [b, h_q, s_q]: Reference::magnitude's, 0: not wanted
};

// ||a - b|| / ||b|| (or ||a - b|| when ||b|| is 0), over all elements.
double relative_l2_error(const std::vector<double>& actual, const std::vector<double>& expected);

}  // namespace flashjit
