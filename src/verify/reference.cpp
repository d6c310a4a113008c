#include "verify/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "source/render.hpp"

// The visibility rule the kernels mask by (key_visible, visible_key_count).
#include "../../templates/visibility.cuh"

namespace flashjit {

double Problem::effective_scale() const { return scale != 0 ? scale : 1.0 / std::sqrt(double(head_dim)); }

std::string Problem::describe() const {
  return std::string(bf16 ? "bf16" : "fp16") + " d=" + std::to_string(head_dim) + (causal ? " causal" : "") +
         " b=" + std::to_string(batch) + " sq=" + std::to_string(seqlen_q) + " sk=" + std::to_string(seqlen_k) +
         " hq=" + std::to_string(heads_q) + " hkv=" + std::to_string(heads_kv) +
         (scale != 0 ? " scale=" + std::to_string(scale) : "") + (key_growth != 0 ? " key_growth=" + std::to_string(key_growth) : "");
}

Strides contiguous_strides(int seqlen, int heads, int head_dim) {
  return {int64_t(seqlen) * heads * head_dim, int64_t(heads) * head_dim, head_dim};
}

uint16_t float_to_half_bits(float value, bool bf16) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if (bf16) {
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);  // round to nearest even
  }
  // fp16, round to nearest even; inputs here are modest normals, but handle the ranges anyway.
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = int((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return uint16_t(half);
}

float half_bits_to_float(uint16_t bits, bool bf16) {
  uint32_t x;
  if (bf16) {
    x = uint32_t(bits) << 16;
  } else {
    const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    int exp = (bits >> 10) & 0x1f;
    uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) {
      x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        x = sign;
      } else {
        exp = 1;
        while (!(mant & 0x400u)) { mant <<= 1; --exp; }
        mant &= 0x3ffu;
        x = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
      }
    } else {
      x = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
    }
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void fill_random(std::vector<uint16_t>& data, bool bf16, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  for (uint16_t& x : data) x = float_to_half_bits(normal(rng), bf16);
}

Reference cpu_reference(const Problem& p, const uint16_t* q, Strides qs, const uint16_t* k, Strides ks,
                        const uint16_t* v, Strides vs) {
  Reference ref;
  const int d = p.head_dim;
  ref.o.assign(size_t(p.batch) * p.seqlen_q * p.heads_q * d, 0.0);
  ref.lse.assign(size_t(p.batch) * p.heads_q * p.seqlen_q, -std::numeric_limits<double>::infinity());
  const double scale = p.effective_scale();
  const int group = p.heads_q / p.heads_kv;
  auto load = [&](const uint16_t* base, int64_t index) { return double(half_bits_to_float(base[index], p.bf16)); };
  auto work = [&](int first, int step) {
    std::vector<double> s(p.seqlen_k), qrow(d);
    for (int task = first; task < p.batch * p.heads_q * p.seqlen_q; task += step) {
      const int row = task % p.seqlen_q, h = (task / p.seqlen_q) % p.heads_q, b = task / (p.seqlen_q * p.heads_q);
      const int kvh = h / group;
      // A row sees keys 0 .. visible - 1 (visibility.cuh: bottom-right aligned causal).
      const int visible = visible_key_count(p.causal, row, p.seqlen_q, p.seqlen_k);
      if (visible == 0) continue;
      for (int c = 0; c < d; ++c) qrow[c] = load(q, b * qs.batch + row * qs.row + h * qs.head + c);
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < visible; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += qrow[c] * load(k, b * ks.batch + j * ks.row + kvh * ks.head + c);
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < visible; ++j) sum += (s[j] = std::exp(s[j] - mx));
      double* out = &ref.o[((size_t(b) * p.seqlen_q + row) * p.heads_q + h) * d];
      for (int j = 0; j < visible; ++j)
        for (int c = 0; c < d; ++c) out[c] += s[j] * load(v, b * vs.batch + j * vs.row + kvh * vs.head + c);
      for (int c = 0; c < d; ++c) out[c] /= sum;
      ref.lse[(size_t(b) * p.heads_q + h) * p.seqlen_q + row] = mx + std::log(sum);
    }
  };
  const int threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
  for (auto& t : pool) t.join();
  return ref;
}

std::string reference_kernel_source(bool bf16) {
  std::string src = bf16 ? "#define REF_BF16 1\n" : "";
  src += "#define FJ_DEVICE __device__ inline\n";
  src += embedded_template("visibility.cuh");  // the rule the kernels mask by
  src += R"CUDA(
typedef unsigned short u16;
typedef long long i64;
typedef unsigned long long u64;
struct RefParams {
  u64 q, k, v; i64 qs[3], ks[3], vs[3]; u64 o, lse;
  int seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal; double scale;
};
__device__ double load(u64 base, i64 index) {
  const u16 bits = reinterpret_cast<const u16*>(base)[index];
#ifdef REF_BF16
  return (double)__uint_as_float(((unsigned)bits) << 16);
#else
  float f;
  asm("{\n.reg .f16 h;\nmov.b16 h, %1;\ncvt.f32.f16 %0, h;\n}" : "=f"(f) : "h"(bits));
  return (double)f;
#endif
}
__device__ double block_max(double x, double* red) {
  red[threadIdx.x] = x; __syncthreads();
  for (int s = 64; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + s]); __syncthreads(); }
  double r = red[0]; __syncthreads(); return r;
}
extern "C" __global__ void __launch_bounds__(128) reference_attention(const RefParams p) {
  __shared__ double q_row[256], probs[128], red[128];
  const int row = blockIdx.x, h = blockIdx.y, b = blockIdx.z, t = threadIdx.x, d = p.head_dim;
  const int kvh = h / (p.heads_q / p.heads_kv);
  const int visible = visible_key_count(p.causal != 0, row, p.seqlen_q, p.seqlen_k);
  for (int c = t; c < d; c += 128) q_row[c] = load(p.q, b * p.qs[0] + row * p.qs[1] + h * p.qs[2] + c);
  __syncthreads();
  double mx = -1.0 / 0.0;
  for (int j = t; j < visible; j += 128) {
    double dot = 0; const i64 kb = b * p.ks[0] + j * p.ks[1] + kvh * p.ks[2];
    for (int c = 0; c < d; ++c) dot += q_row[c] * load(p.k, kb + c);
    mx = fmax(mx, dot * p.scale);
  }
  mx = block_max(mx, red);
  double o0 = 0, o1 = 0, sum = 0;
  for (int c0 = 0; c0 < visible; c0 += 128) {
    const int j = c0 + t;
    double pj = 0;
    if (j < visible) {
      double dot = 0; const i64 kb = b * p.ks[0] + j * p.ks[1] + kvh * p.ks[2];
      for (int c = 0; c < d; ++c) dot += q_row[c] * load(p.k, kb + c);
      pj = exp(dot * p.scale - mx);
    }
    probs[t] = pj; __syncthreads();
    const int n = visible - c0 < 128 ? visible - c0 : 128;
    for (int jj = 0; jj < n; ++jj) {
      const double w = probs[jj]; const i64 vb = b * p.vs[0] + (i64)(c0 + jj) * p.vs[1] + kvh * p.vs[2];
      sum += w;
      if (t < d) o0 += w * load(p.v, vb + t);
      if (t + 128 < d) o1 += w * load(p.v, vb + t + 128);
    }
    __syncthreads();
  }
  double* o = reinterpret_cast<double*>(p.o) + (((i64)b * p.seqlen_q + row) * p.heads_q + h) * d;
  if (t < d) o[t] = visible ? o0 / sum : 0.0;
  if (t + 128 < d) o[t + 128] = visible ? o1 / sum : 0.0;
  if (t == 0) reinterpret_cast<double*>(p.lse)[((i64)b * p.heads_q + h) * p.seqlen_q + row] = visible ? mx + log(sum) : -1.0 / 0.0;
}
)CUDA";
  return src;
}

double relative_l2_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = i < actual.size() ? actual[i] : std::nan("");
    diff += (a - expected[i]) * (a - expected[i]);
    norm += expected[i] * expected[i];
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace flashjit
