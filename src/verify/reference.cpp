#include "verify/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "source/render.hpp"

// The visibility rule the kernels mask by (MaskRule, first_visible_key, last_visible_key), and the
// score path's rules and finalize step (modified_logit, finalize_row).
#include "../../templates/visibility.cuh"
#include "../../templates/score_mod.cuh"

namespace flashjit {

std::string AttentionFeatures::describe() const {
  std::string out;
  if (window_left != -1 || window_right != -1) out += " window=" + std::to_string(window_left) + "," + std::to_string(window_right);
  if (chunk != 0) out += " chunk=" + std::to_string(chunk);
  if (softcap != 0) out += " softcap=" + std::to_string(softcap);
  if (!sinks.empty()) out += " sinks";
  if (!alibi_slopes.empty()) out += " alibi";
  return out;
}

std::string AttentionFeatures::error(int batch, int heads_q) const {
  if (window_left < -1) return "window_left: " + std::to_string(window_left) + " is not allowed; allowed: -1 (unbounded) or 0 and up";
  if (window_right < -1) return "window_right: " + std::to_string(window_right) + " is not allowed; allowed: -1 (unbounded) or 0 and up";
  if (chunk < 0) return "chunk: " + std::to_string(chunk) + " is not allowed; allowed: 0 (none) or 1 and up";
  if (!(softcap >= 0) || std::isinf(softcap)) return "softcap: " + std::to_string(softcap) + " is not allowed; allowed: 0 (off) or a finite positive value";
  if (!sinks.empty() && int64_t(sinks.size()) != heads_q)
    return "sinks: " + std::to_string(sinks.size()) + " values; allowed: none or heads_q (" + std::to_string(heads_q) + ")";
  if (!alibi_slopes.empty() && int64_t(alibi_slopes.size()) != heads_q && int64_t(alibi_slopes.size()) != int64_t(batch) * heads_q)
    return "alibi_slopes: " + std::to_string(alibi_slopes.size()) + " values; allowed: none, heads_q (" + std::to_string(heads_q) +
           ") or batch x heads_q (" + std::to_string(int64_t(batch) * heads_q) + ")";
  return "";
}

double AttentionFeatures::slope(int batch_index, int head, int heads_q) const {
  if (alibi_slopes.empty()) return 0;
  const int64_t batch_stride = int64_t(alibi_slopes.size()) == heads_q ? 0 : heads_q;
  return alibi_slopes[size_t(alibi_slope_index(batch_index, head, batch_stride))];
}

double Problem::effective_scale() const { return scale != 0 ? scale : 1.0 / std::sqrt(double(head_dim)); }

std::string Problem::describe() const {
  return std::string(bf16 ? "bf16" : "fp16") + " d=" + std::to_string(head_dim) + (head_dim_v && head_dim_v != head_dim ? "/" + std::to_string(head_dim_v) : std::string()) + (causal ? " causal" : "") +
         " b=" + std::to_string(batch) + " sq=" + std::to_string(seqlen_q) + " sk=" + std::to_string(seqlen_k) +
         " hq=" + std::to_string(heads_q) + " hkv=" + std::to_string(heads_kv) +
         (scale != 0 ? " scale=" + std::to_string(scale) : "") + (key_growth != 0 ? " key_growth=" + std::to_string(key_growth) : "") + features.describe() +
         fp8.describe();
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

namespace {
uint32_t hash32(uint64_t x) {  // verify/device_random.cpp's hash (a 64-bit finaliser)
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}
}  // namespace

void parallel_ranges(size_t count, size_t min_per_thread, const std::function<void(size_t, size_t)>& fn) {
  const size_t threads = std::min<size_t>(std::max(1u, std::min(32u, std::thread::hardware_concurrency())),
                                          (count + std::max<size_t>(1, min_per_thread) - 1) / std::max<size_t>(1, min_per_thread));
  if (threads <= 1) return fn(0, count);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(fn, count * t / threads, count * (t + 1) / threads);
  for (auto& t : pool) t.join();
}

// Values 2j and 2j + 1 from one Box-Muller pair of uniforms hashed from the seed and j alone, so
// the cores each fill a range: one sequential generator (std::normal_distribution, about 36 ns a
// value) spent about 19 s on the K and V of a 64 x 4k engine cell (bench/NOTES.md, 2026-12-06).
void fill_random(std::vector<uint16_t>& data, bool bf16, std::mt19937_64& rng) {
  const uint64_t seed = rng();
  const size_t pairs = (data.size() + 1) / 2;
  auto fill = [&](size_t begin, size_t end) {
    for (size_t j = begin; j < end; ++j) {
      const float u1 = (float(hash32(seed ^ (2 * j))) + 1.f) * 0x1p-32f, u2 = float(hash32(seed ^ (2 * j + 1))) * 0x1p-32f;
      const float r = std::sqrt(-2.f * std::log(u1)), angle = 6.2831853f * u2;
      data[2 * j] = float_to_half_bits(r * std::cos(angle), bf16);
      if (2 * j + 1 < data.size()) data[2 * j + 1] = float_to_half_bits(r * std::sin(angle), bf16);
    }
  };
  parallel_ranges(pairs, size_t(1) << 20, fill);  // the tests' small buffers: one thread
}

void attend_row(const AttentionFeatures& features, bool causal, double scale, double slope, const double* sink, int row,
                int seqlen_q, int seqlen_k, const std::function<double(int key)>& dot, RowAttention* out) {
  const MaskRule rule{causal, features.window_left, features.window_right, features.chunk};
  const int first = first_visible_key(rule, row, seqlen_q, seqlen_k), last = last_visible_key(rule, row, seqlen_q, seqlen_k);
  const int p = key_position(row, seqlen_q, seqlen_k);
  out->first_key = first;
  out->weight.assign(size_t(std::max(0, last - first + 1)), 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < out->weight.size(); ++i) {
    const int j = first + int(i);
    out->weight[i] = modified_logit(dot(j), scale, features.softcap, slope, p, j);
    mx = std::max(mx, out->weight[i]);
  }
  double sum = 0;
  for (double& w : out->weight) sum += (w = std::exp(w - mx));
  const RowNormaliser<double> fin = finalize_row(mx * kFjLog2E, sum, sink != nullptr, sink != nullptr ? *sink : 0.0);
  for (double& w : out->weight) w *= fin.o_scale;
  out->lse = fin.lse;
}

Reference cpu_reference(const Problem& p, const uint16_t* q, Strides qs, const uint16_t* k, Strides ks,
                        const uint16_t* v, Strides vs) {
  if (const std::string bad = p.features.error(p.batch, p.heads_q); !bad.empty()) {
    std::fprintf(stderr, "cpu_reference: %s\n", bad.c_str());
    std::abort();
  }
  Reference ref;
  const int d = p.head_dim, dv = p.v_dim();
  ref.o.assign(size_t(p.batch) * p.seqlen_q * p.heads_q * dv, 0.0);
  ref.lse.assign(size_t(p.batch) * p.heads_q * p.seqlen_q, -std::numeric_limits<double>::infinity());
  const double scale = p.effective_scale();
  const int group = p.heads_q / p.heads_kv;
  auto load = [&](const uint16_t* base, int64_t index) { return double(half_bits_to_float(base[index], p.bf16)); };
  auto work = [&](int first, int step) {
    std::vector<double> qrow(d);
    RowAttention row_attention;
    for (int task = first; task < p.batch * p.heads_q * p.seqlen_q; task += step) {
      const int row = task % p.seqlen_q, h = (task / p.seqlen_q) % p.heads_q, b = task / (p.seqlen_q * p.heads_q);
      const int kvh = h / group;
      for (int c = 0; c < d; ++c) qrow[c] = load(q, b * qs.batch + row * qs.row + h * qs.head + c);
      auto dot = [&](int j) {
        double sum = 0;
        for (int c = 0; c < d; ++c) sum += qrow[c] * load(k, b * ks.batch + j * ks.row + kvh * ks.head + c);
        return sum;
      };
      // The keys the row sees (visibility.cuh), their weights and the LSE (score_mod.cuh).
      const double* sink = p.features.sinks.empty() ? nullptr : &p.features.sinks[size_t(h)];
      attend_row(p.features, p.causal, scale, p.features.slope(b, h, p.heads_q), sink, row, p.seqlen_q, p.seqlen_k, dot,
                 &row_attention);
      double* out = &ref.o[((size_t(b) * p.seqlen_q + row) * p.heads_q + h) * dv];
      for (size_t i = 0; i < row_attention.weight.size(); ++i) {
        const int64_t j = row_attention.first_key + int64_t(i);
        const double w = row_attention.weight[i];
        for (int c = 0; c < dv; ++c) out[c] += w * load(v, b * vs.batch + j * vs.row + kvh * vs.head + c);
      }
      ref.lse[(size_t(b) * p.heads_q + h) * p.seqlen_q + row] = row_attention.lse;
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
  src += "#define REF_MAX_HEAD_DIM " + std::to_string(kReferenceMaxHeadDim) + "\n";  // q_row's room (head dims to 576)
  src += embedded_template("visibility.cuh");  // the rule the kernels mask by
  src += embedded_template("score_mod.cuh");   // the score path and the finalize step
  src += R"CUDA(
typedef unsigned short u16;
typedef long long i64;
typedef unsigned long long u64;
struct RefParams {
  u64 q, k, v; i64 qs[3], ks[3], vs[3]; u64 o, lse;
  int seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal; double scale;
  int window_left, window_right, chunk, has_sinks; double softcap;
  u64 sinks, alibi_slopes; i64 alibi_batch_stride;
  int head_dim_v;
  u64 magnitude;
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
  __shared__ double q_row[REF_MAX_HEAD_DIM], probs[128], red[128];  // V's columns: four a thread (to 512)
  const int row = blockIdx.x, h = blockIdx.y, b = blockIdx.z, t = threadIdx.x, d = p.head_dim;
  const int dv = p.head_dim_v ? p.head_dim_v : d;
  const int kvh = h / (p.heads_q / p.heads_kv);
  const MaskRule rule = {p.causal != 0, p.window_left, p.window_right, p.chunk};
  const int first = first_visible_key(rule, row, p.seqlen_q, p.seqlen_k);
  const int visible = visible_key_count(rule, row, p.seqlen_q, p.seqlen_k);
  const int pos = key_position(row, p.seqlen_q, p.seqlen_k);
  const double slope = p.alibi_slopes ? reinterpret_cast<const double*>(p.alibi_slopes)[alibi_slope_index(b, h, p.alibi_batch_stride)] : 0.0;
  for (int c = t; c < d; c += 128) q_row[c] = load(p.q, b * p.qs[0] + row * p.qs[1] + h * p.qs[2] + c);
  __syncthreads();
  double mx = -1.0 / 0.0, magnitude = 0;
  for (int i = t; i < visible; i += 128) {
    const int j = first + i;
    double dot = 0, dot_abs = 0; const i64 kb = b * p.ks[0] + (i64)j * p.ks[1] + kvh * p.ks[2];
    for (int c = 0; c < d; ++c) { const double e = q_row[c] * load(p.k, kb + c); dot += e; dot_abs += fabs(e); }
    mx = fmax(mx, modified_logit(dot, p.scale, p.softcap, slope, pos, j));
    magnitude = fmax(magnitude, dot_abs);
  }
  mx = block_max(mx, red);
  if (p.magnitude) magnitude = block_max(magnitude, red);
  double acc[4] = {0, 0, 0, 0}, sum = 0;
  for (int c0 = 0; c0 < visible; c0 += 128) {
    const int i = c0 + t, j = first + i;
    double pj = 0;
    if (i < visible) {
      double dot = 0; const i64 kb = b * p.ks[0] + (i64)j * p.ks[1] + kvh * p.ks[2];
      for (int c = 0; c < d; ++c) dot += q_row[c] * load(p.k, kb + c);
      pj = exp(modified_logit(dot, p.scale, p.softcap, slope, pos, j) - mx);
    }
    probs[t] = pj; __syncthreads();
    const int n = visible - c0 < 128 ? visible - c0 : 128;
    for (int jj = 0; jj < n; ++jj) {
      const double w = probs[jj]; const i64 vb = b * p.vs[0] + (i64)(first + c0 + jj) * p.vs[1] + kvh * p.vs[2];
      sum += w;
      for (int u = 0; u < 4; ++u)
        if (t + 128 * u < dv) acc[u] += w * load(p.v, vb + t + 128 * u);
    }
    __syncthreads();
  }
  const double sink = p.has_sinks ? reinterpret_cast<const double*>(p.sinks)[h] : 0.0;
  const RowNormaliser<double> fin = finalize_row(mx * kFjLog2E, sum, p.has_sinks != 0, sink);
  double* o = reinterpret_cast<double*>(p.o) + (((i64)b * p.seqlen_q + row) * p.heads_q + h) * dv;
  for (int u = 0; u < 4; ++u)
    if (t + 128 * u < dv) o[t + 128 * u] = acc[u] * fin.o_scale;
  if (t == 0) reinterpret_cast<double*>(p.lse)[((i64)b * p.heads_q + h) * p.seqlen_q + row] = fin.lse;
  if (t == 0 && p.magnitude) reinterpret_cast<double*>(p.magnitude)[((i64)b * p.heads_q + h) * p.seqlen_q + row] = magnitude * p.scale;
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
