#include "verify/check.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>

#include "driver/launch.hpp"
#include "launch/attention_launch.hpp"
#include "verify/builtin_kernel.hpp"
#include "verify/device_random.hpp"

// The NaN code the FP8 cache's bytes outside K and V hold.
#include "../../templates/fp8.cuh"

namespace flashjit {
namespace {

void expect_ok(Status st, const char* what) {
  if (!st) {
    std::fprintf(stderr, "flashjit check: %s: %s\n", what, st.error().message.c_str());
    std::abort();
  }
}

// The float64 reference kernel of each dtype (fp16, bf16).
BuiltinKernel& reference_kernel(bool bf16) {
  static BuiltinKernel* kernels[2] = {  // see BuiltinKernel
      new BuiltinKernel(reference_kernel_source(false), "reference_attention", "reference fp16"),
      new BuiltinKernel(reference_kernel_source(true), "reference_attention", "reference bf16")};
  return *kernels[bf16];
}

// Element strides of Q, K, V, O for a layout, and the buffer sizes they need.
struct Placement {
  Strides q, k, v, o;
  size_t q_offset = 0, k_offset = 0, v_offset = 0;  // elements, inside the input buffer
  size_t input_elems = 0, output_elems = 0;
};

// Q and K are head_dim wide, V and O head_dim_v wide (Problem::v_dim), each with its own strides.
Placement place(const Problem& p, Layout layout) {
  const int64_t d = p.head_dim, dv = p.v_dim(), b = p.batch, sq = p.seqlen_q, sk = p.seqlen_k, hq = p.heads_q, hkv = p.heads_kv;
  Placement pl;
  switch (layout) {
    case Layout::kContiguous: {
      pl.q = contiguous_strides(sq, hq, d);
      pl.k = contiguous_strides(sk, hkv, d);
      pl.v = contiguous_strides(sk, hkv, dv);
      pl.k_offset = b * sq * hq * d;
      pl.v_offset = pl.k_offset + b * sk * hkv * d;
      pl.input_elems = pl.v_offset + b * sk * hkv * dv;
      pl.o = contiguous_strides(sq, hq, dv);
      pl.output_elems = b * sq * hq * dv;
      break;
    }
    case Layout::kPackedQKV: {  // self-attention shape: seqlen_q == seqlen_k; a row holds Q's heads, K's, then V's
      const int64_t width = (hq + hkv) * d + hkv * dv;
      pl.q = pl.k = {sq * width, width, d};
      pl.v = {sq * width, width, dv};
      pl.k_offset = hq * d;
      pl.v_offset = (hq + hkv) * d;
      pl.input_elems = b * sq * width;
      pl.o = contiguous_strides(sq, hq, dv);
      pl.output_elems = b * sq * hq * dv;
      break;
    }
    case Layout::kHeadMajor: {
      pl.q = {hq * sq * d, d, sq * d};
      pl.k = {hkv * sk * d, d, sk * d};
      pl.v = {hkv * sk * dv, dv, sk * dv};
      pl.k_offset = b * sq * hq * d;
      pl.v_offset = pl.k_offset + b * sk * hkv * d;
      pl.input_elems = pl.v_offset + b * sk * hkv * dv;
      pl.o = {hq * sq * dv, dv, sq * dv};
      pl.output_elems = b * sq * hq * dv;
      break;
    }
    case Layout::kPadded: {  // rows padded by 8 elements per head, heads by 16 per row
      const int64_t head = d + 8, head_v = dv + 8;
      const int64_t row = hq * head + 16, rowk = hkv * head + 16, rowv = hkv * head_v + 16, rowo = hq * head_v + 16;
      pl.q = {sq * row, row, head};
      pl.k = {sk * rowk, rowk, head};
      pl.v = {sk * rowv, rowv, head_v};
      pl.k_offset = b * sq * row;
      pl.v_offset = pl.k_offset + b * sk * rowk;
      pl.input_elems = pl.v_offset + b * sk * rowv;
      pl.o = {sq * rowo, rowo, head_v};
      pl.output_elems = b * sq * rowo;
      break;
    }
  }
  return pl;
}

TensorStrides to_args(const Strides& s) { return {s.batch, s.row, s.head}; }

}  // namespace

DeviceBuffer::DeviceBuffer(const DriverApi& api, size_t bytes) : api_(api), bytes_(bytes) {
  expect_ok(check(api_, api_.cuMemAlloc(&ptr_, bytes ? bytes : 16), "cuMemAlloc"), "DeviceBuffer");
}
DeviceBuffer::~DeviceBuffer() { if (ptr_) api_.cuMemFree(ptr_); }
// NOTES: cuMemsetD8 and cuMemcpyHtoD return before the device has finished them (a pageable copy
// once it is staged), in the legacy stream, which a CU_STREAM_NON_BLOCKING stream does not wait
// for: without the context sync a kernel could read half-uploaded inputs, or the output poison
// could land after the kernel wrote (seen on the H200: a check's LSE reported unwritten;
// fixed in 1b020ce). Checks are not the hot path; synchronising costs nothing that matters here.
void DeviceBuffer::upload(const void* data, size_t bytes, size_t offset) {
  expect_ok(check(api_, api_.cuMemcpyHtoD(ptr_ + offset, data, bytes), "cuMemcpyHtoD"), "upload");
  expect_ok(check(api_, api_.cuCtxSynchronize(), "cuCtxSynchronize"), "upload");
}
void DeviceBuffer::download(void* data, size_t bytes, size_t offset) const {
  expect_ok(check(api_, api_.cuCtxSynchronize(), "cuCtxSynchronize"), "download");
  expect_ok(check(api_, api_.cuMemcpyDtoH(data, ptr_ + offset, bytes), "cuMemcpyDtoH"), "download");
}
void DeviceBuffer::fill_bytes(unsigned char value, size_t from) {
  if (from >= bytes_) return;
  expect_ok(check(api_, api_.cuMemsetD8(ptr_ + from, value, bytes_ - from), "cuMemsetD8"), "fill_bytes");
  expect_ok(check(api_, api_.cuCtxSynchronize(), "cuCtxSynchronize"), "fill_bytes");
}

void set_mask_features(FeatureInputs& inputs, const AttentionFeatures& features) {
  inputs.window_left = features.window_left;
  inputs.window_right = features.window_right;
  inputs.chunk = features.chunk;
  inputs.softcap = float(features.softcap);
}

FeatureBuffers::FeatureBuffers(const DriverApi& api, int batch, int heads_q)
    : batch_(batch), heads_q_(heads_q), sinks_(api, size_t(heads_q) * 4), slopes_(api, size_t(batch) * heads_q * 4) {}

std::string FeatureBuffers::upload(const AttentionFeatures& features, bool sinks_bf16) {
  if (std::string bad = features.error(batch_, heads_q_); !bad.empty()) return bad;
  if (!features.sinks.empty()) {
    if (sinks_bf16) {
      std::vector<uint16_t> bits;
      for (double sink : features.sinks) bits.push_back(float_to_half_bits(float(sink), true));
      sinks_.upload(bits.data(), bits.size() * 2);
    } else {
      const std::vector<float> values(features.sinks.begin(), features.sinks.end());
      sinks_.upload(values.data(), values.size() * 4);
    }
  }
  if (!features.alibi_slopes.empty()) {
    const std::vector<float> values(features.alibi_slopes.begin(), features.alibi_slopes.end());
    slopes_.upload(values.data(), values.size() * 4);
  }
  return "";
}

void FeatureBuffers::set_launch_features(FeatureInputs& inputs, const AttentionFeatures& features, bool sinks_bf16) const {
  set_mask_features(inputs, features);
  if (!features.sinks.empty()) inputs.sinks = sinks_.ptr(), inputs.sinks_bf16 = sinks_bf16;
  if (!features.alibi_slopes.empty()) {
    inputs.alibi_slopes = slopes_.ptr();
    // AttentionFeatures::slope's reading: [heads_q] for every sequence, else [batch][heads_q].
    inputs.alibi_batch_stride = int64_t(features.alibi_slopes.size()) == heads_q_ ? 0 : heads_q_;
  }
}

std::string tile_counter_error(const DeviceBuffer& buffer, size_t offset) {
  uint32_t words[2] = {1, 1};
  buffer.download(words, sizeof(words), offset);
  if (words[0] == 0 && words[1] == 0) return {};
  return "the dynamic scheduler's tile counter is " + std::to_string(words[0]) + ", " + std::to_string(words[1]) +
         " after the launch, not 0, 0";
}

std::string merge_counters_error(const DeviceBuffer& buffer, size_t offset, size_t words) {
  std::vector<uint32_t> counters(words, 1);
  if (words > 0) buffer.download(counters.data(), words * sizeof(uint32_t), offset);
  for (size_t i = 0; i < words; ++i) {
    if (counters[i] != 0) return "combine=inline's merge counter " + std::to_string(i) + " is " + std::to_string(counters[i]) + " after the launch, not 0";
  }
  return {};
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "bshd";
    case Layout::kPackedQKV: return "packed-qkv";
    case Layout::kHeadMajor: return "bhsd";
    case Layout::kPadded: return "padded";
  }
  return "?";
}

void drop_verify_kernels(CUcontext context) {
  reference_kernel(false).drop(context);
  reference_kernel(true).drop(context);
  drop_random_fill_kernels(context);
}

double o_error_bound(bool bf16) { return bf16 ? 6e-3 : 1e-3; }

double o_error_bound(bool bf16, const Fp8Cache& fp8) {
  if (fp8.on && fp8.operands) return kFp8OperandsOErrorBound;
  return o_error_bound(bf16) * (fp8.on && !fp8.exact() ? 2.0 : 1.0);
}

bool CheckResult::passed(bool bf16) const { return passed_within(o_error_bound(bf16)); }

bool CheckResult::passed_within(double o_bound) const {
  return ran && error.empty() && unwritten == 0 && o_error <= o_bound && lse_error <= kLseErrorBound;
}

Reference gpu_reference(const CheckDevice& device, const Problem& p, CUdeviceptr q, Strides qs, CUdeviceptr k,
                        Strides ks, CUdeviceptr v, Strides vs, std::string* error) {
  const DriverApi& api = *device.api;
  Reference ref;
  if (std::string bad = p.features.error(p.batch, p.heads_q); !bad.empty()) { *error = bad; return ref; }
  auto loaded = reference_kernel(p.bf16).load(api, device.context);
  if (!loaded) { *error = "reference kernel: " + loaded.error().message + "\n" + loaded.error().log; return ref; }
  if (p.head_dim > kReferenceMaxHeadDim || p.v_dim() > kReferenceMaxHeadDimV) {
    *error = "reference kernel: head dims " + std::to_string(p.head_dim) + "/" + std::to_string(p.v_dim()) + " exceed its " +
             std::to_string(kReferenceMaxHeadDim) + "/" + std::to_string(kReferenceMaxHeadDimV);
    return ref;
  }
  const size_t o_count = size_t(p.batch) * p.seqlen_q * p.heads_q * p.v_dim();
  const size_t lse_count = size_t(p.batch) * p.heads_q * p.seqlen_q;
  DeviceBuffer o(api, o_count * 8), lse(api, lse_count * 8);
  RefParams rp{};
  rp.q = q; rp.k = k; rp.v = v;
  const Strides* ss[3] = {&qs, &ks, &vs};
  int64_t* dst[3] = {rp.qs, rp.ks, rp.vs};
  for (int i = 0; i < 3; ++i) { dst[i][0] = ss[i]->batch; dst[i][1] = ss[i]->row; dst[i][2] = ss[i]->head; }
  rp.o = o.ptr();
  rp.lse = lse.ptr();
  // FP8 operands: each row's score magnitude, for the LSE's bound (fp8_lse_error).
  std::optional<DeviceBuffer> magnitude;
  if (p.fp8.on && p.fp8.operands) {
    magnitude.emplace(api, lse_count * 8);
    rp.magnitude = magnitude->ptr();
  }
  rp.seqlen_q = p.seqlen_q; rp.seqlen_k = p.seqlen_k; rp.heads_q = p.heads_q; rp.heads_kv = p.heads_kv;
  rp.head_dim = p.head_dim; rp.causal = p.causal;
  rp.head_dim_v = p.v_dim();  // O [b, s_q, h_q, head_dim_v]
  // The kernel takes the scale as a float: the reference uses the same rounded value.
  rp.scale = double(float(p.effective_scale()));
  // Issue 38's features: the sinks and slopes as double arrays beside the inputs.
  const AttentionFeatures& f = p.features;
  rp.window_left = f.window_left, rp.window_right = f.window_right, rp.chunk = f.chunk, rp.softcap = f.softcap;
  std::optional<DeviceBuffer> sinks, slopes;
  if (!f.sinks.empty()) {
    sinks.emplace(api, f.sinks.size() * 8);
    sinks->upload(f.sinks.data(), f.sinks.size() * 8);
    rp.has_sinks = 1, rp.sinks = sinks->ptr();
  }
  if (!f.alibi_slopes.empty()) {
    slopes.emplace(api, f.alibi_slopes.size() * 8);
    slopes->upload(f.alibi_slopes.data(), f.alibi_slopes.size() * 8);
    rp.alibi_slopes = slopes->ptr(), rp.alibi_batch_stride = int64_t(f.alibi_slopes.size()) == p.heads_q ? 0 : p.heads_q;
  }
  void* ref_args[] = {&rp};
  LaunchShape shape;
  shape.grid_x = p.seqlen_q; shape.grid_y = p.heads_q; shape.grid_z = p.batch; shape.block_x = 128;
  if (Status st = launch_kernel(api, (*loaded)->function(), shape, device.stream, ref_args); !st) {
    *error = "reference launch: " + st.error().message;
    return ref;
  }
  expect_ok(check(api, api.cuStreamSynchronize(device.stream), "reference kernel"), "reference");
  ref.o.resize(o_count);
  ref.lse.resize(lse_count);
  o.download(ref.o.data(), o_count * 8);
  lse.download(ref.lse.data(), lse_count * 8);
  if (magnitude) {
    ref.magnitude.resize(lse_count);
    magnitude->download(ref.magnitude.data(), lse_count * 8);
  }
  return ref;
}

double fp8_lse_error(double got, double want, double magnitude, bool exact_copies) {
  const double per_magnitude = 1.0 / 1024 + (exact_copies ? 0.0 : 1.0 / 256);  // see check.hpp
  return std::fabs(got - want) / (std::max(1.0, std::fabs(want)) + magnitude * per_magnitude / kLseErrorBound);
}

double lse_entry_error(double got, double want, double magnitude, bool exact_copies, CheckResult& result) {
  if (std::isnan(got)) {
    ++result.unwritten;
    return std::numeric_limits<double>::infinity();
  }
  if (std::isinf(want)) return (std::isinf(got) && got < 0) ? 0 : std::numeric_limits<double>::infinity();
  if (magnitude < 0) return std::fabs(got - want) / std::max(1.0, std::fabs(want));
  if (magnitude > 0) result.lse_per_magnitude = std::max(result.lse_per_magnitude, std::fabs(got - want) / magnitude);
  return fp8_lse_error(got, want, magnitude, exact_copies);
}

namespace {

// Problem::key_growth: key j scaled by 1 + growth * (seqlen_k - 1 - j) / seqlen_k, in place.
void grow_keys(const Problem& p, const Placement& pl, std::vector<uint16_t>& input) {
  for (int b = 0; b < p.batch; ++b)
    for (int j = 0; j < p.seqlen_k; ++j) {
      const float factor = float(1.0 + p.key_growth * (p.seqlen_k - 1 - j) / p.seqlen_k);
      for (int h = 0; h < p.heads_kv; ++h) {
        uint16_t* key = &input[pl.k_offset + b * pl.k.batch + j * pl.k.row + h * pl.k.head];
        for (int e = 0; e < p.head_dim; ++e) key[e] = float_to_half_bits(half_bits_to_float(key[e], p.bf16) * factor, p.bf16);
      }
    }
}

// Problem::fp8: K's and V's elements of `input` (the layout's, 16-bit), and Q's with FP8 operands,
// become e4m3 codes by their sequence's and KV head's scale, `outlier_keys` random keys of each
// sequence's K 50x first; `input` is left holding the dequantised copy the reference reads. The
// codes sit in a byte buffer of the same layout (the strides the same numbers, in bytes); its
// other bytes (Q's with a cache, padding) hold the NaN code.
std::vector<unsigned char> quantise_dense(const Problem& p, const Placement& pl, std::vector<uint16_t>& input, std::mt19937_64& rng) {
  std::vector<unsigned char> codes(input.size(), kE4m3Nan);
  Fp8Quantiser quantise(p.bf16);
  const Fp8Cache& f = p.fp8;
  const int group = p.heads_q / p.heads_kv;
  for (int b = 0; b < p.batch; ++b) {
    std::vector<char> outlier(size_t(p.seqlen_k), 0);
    for (int n = 0; n < f.outlier_keys; ++n) outlier[size_t(rng() % uint64_t(p.seqlen_k))] = 1;
    for (int j = 0; j < p.seqlen_k; ++j)
      for (int h = 0; h < p.heads_kv; ++h) {
        const float ks = f.scale_of(Fp8Tensor::kK, b, h), vs = f.scale_of(Fp8Tensor::kV, b, h);
        for (int e = 0; e < p.head_dim; ++e) {
          const size_t ki = pl.k_offset + b * pl.k.batch + j * pl.k.row + h * pl.k.head + e;
          codes[ki] = quantise(input[ki], ks, outlier[size_t(j)] != 0);
        }
        for (int e = 0; e < p.v_dim(); ++e) {  // V: head_dim_v columns
          const size_t vi = pl.v_offset + b * pl.v.batch + j * pl.v.row + h * pl.v.head + e;
          codes[vi] = quantise(input[vi], vs);
        }
      }
    if (!f.operands) continue;
    for (int i = 0; i < p.seqlen_q; ++i)
      for (int h = 0; h < p.heads_q; ++h) {
        const float qs = f.scale_of(Fp8Tensor::kQ, b, h / group);
        for (int e = 0; e < p.head_dim; ++e) {
          const size_t qi = pl.q_offset + b * pl.q.batch + i * pl.q.row + h * pl.q.head + e;
          codes[qi] = quantise(input[qi], qs);
        }
      }
  }
  return codes;
}

// "" when a layout's FP8 tensors (K and V; Q too with FP8 operands) can be e4m3 (offsets and
// strides multiples of 16 bytes), else why not.
std::string fp8_layout_error(const Placement& pl, Layout layout, bool operands) {
  std::vector<int64_t> numbers = {int64_t(pl.k_offset), int64_t(pl.v_offset), pl.k.batch, pl.k.row, pl.k.head, pl.v.batch, pl.v.row, pl.v.head};
  if (operands) numbers.insert(numbers.end(), {int64_t(pl.q_offset), pl.q.batch, pl.q.row, pl.q.head});
  for (int64_t n : numbers) {
    if (n % 16 != 0) {
      return std::string(operands ? "FP8 operands need Q/K/V" : "the FP8 cache needs K/V") + " offsets and strides in multiples of 16 bytes; layout " +
             layout_name(layout) + " has " + std::to_string(n);
    }
  }
  return "";
}

}  // namespace

CheckResult check_attention(const CheckDevice& device, CUfunction function, const KernelConfig& config,
                            const Problem& problem, Layout layout, bool with_lse, std::mt19937_64& rng, bool sinks_bf16) {
  CheckResult result;
  // The inputs' 16-bit type (and the reference's): bf16 copies with FP8 operands; O's type apart.
  Problem p = problem;
  p.bf16 = p.fp8.copies_bf16(p.bf16);
  const bool o_bf16 = p.fp8.on && p.fp8.operands ? p.fp8.out_bf16 : p.bf16;
  const DriverApi& api = *device.api;
  if (layout == Layout::kPackedQKV && p.seqlen_q != p.seqlen_k) { result.error = "packed QKV needs seqlen_q == seqlen_k"; return result; }
  const size_t elem = 2;
  const Placement pl = place(p, layout);

  // Inputs: fresh standard-normal values everywhere in the buffer (padding included).
  std::vector<uint16_t> input(pl.input_elems);
  fill_random(input, p.bf16, rng);
  if (p.key_growth > 0) grow_keys(p, pl, input);
  if (p.fp8.on != (config.spec.kv_fp8() || config.spec.fp8_operands()) || (p.fp8.on && p.fp8.operands != config.spec.fp8_operands())) {
    result.error = "the problem's FP8 inputs differ from the spec's dtype and kv_dtype";
    return result;
  }
  if (p.fp8.on && p.fp8.operands && p.fp8.out_bf16 != (config.spec.out_dtype == DType::kBf16)) {
    result.error = "the problem's FP8 output type differs from the spec's out_dtype";
    return result;
  }
  // FP8 inputs: codes in Q/K/V's layout, scales [heads_kv] or [batch][heads_kv].
  std::optional<DeviceBuffer> codes, q_scale, k_scale, v_scale;
  if (p.fp8.on) {
    if (std::string bad = fp8_layout_error(pl, layout, p.fp8.operands); !bad.empty()) { result.error = bad; return result; }
    const std::vector<unsigned char> bytes = quantise_dense(p, pl, input, rng);  // input: the dequantised copy
    codes.emplace(api, bytes.size());
    codes->upload(bytes.data(), bytes.size());
    auto upload_scales = [&](std::optional<DeviceBuffer>& buffer, Fp8Tensor t) {
      const std::vector<float> scales = p.fp8.scales(t, p.batch, p.heads_kv);
      buffer.emplace(api, scales.size() * 4);
      buffer->upload(scales.data(), scales.size() * 4);
    };
    upload_scales(k_scale, Fp8Tensor::kK);
    upload_scales(v_scale, Fp8Tensor::kV);
    if (p.fp8.operands) upload_scales(q_scale, Fp8Tensor::kQ);
  }
  DeviceBuffer in(api, input.size() * elem);
  in.upload(input.data(), input.size() * elem);
  // Outputs poisoned: 0xFFFF is NaN in fp16 and bf16, 0xFFFFFFFF is NaN in float32.
  DeviceBuffer out(api, pl.output_elems * elem);
  out.fill_bytes(0xFF);
  const size_t lse_count = size_t(p.batch) * p.heads_q * p.seqlen_q;
  DeviceBuffer lse(api, lse_count * 4);
  lse.fill_bytes(0xFF);

  AttentionArgs args;
  args.q = in.ptr() + pl.q_offset * elem;
  args.k = in.ptr() + pl.k_offset * elem;
  args.v = in.ptr() + pl.v_offset * elem;
  if (codes) {  // K and V (and Q) from the codes (1-byte elements: the byte offsets and strides are the element counts)
    args.k = codes->ptr() + pl.k_offset;
    args.v = codes->ptr() + pl.v_offset;
    args.fp8.k_scale = k_scale->ptr();
    args.fp8.v_scale = v_scale->ptr();
    args.fp8.k_scale_head_stride = args.fp8.v_scale_head_stride = p.fp8.scale_head_stride();
    args.fp8.k_scale_batch_stride = args.fp8.v_scale_batch_stride = p.fp8.scale_batch_stride(p.heads_kv);
    if (q_scale) {
      args.q = codes->ptr() + pl.q_offset;
      args.fp8.q_scale = q_scale->ptr();
      args.fp8.q_scale_head_stride = p.fp8.scale_head_stride();
      args.fp8.q_scale_batch_stride = p.fp8.scale_batch_stride(p.heads_kv);
    }
  }
  args.o = out.ptr();
  args.lse = with_lse ? lse.ptr() : 0;
  args.batch = p.batch;
  args.seqlen_q = p.seqlen_q;
  args.seqlen_k = p.seqlen_k;
  args.heads_q = p.heads_q;
  args.heads_kv = p.heads_kv;
  args.q_strides = to_args(pl.q);
  args.k_strides = to_args(pl.k);
  args.v_strides = to_args(pl.v);
  args.o_strides = to_args(pl.o);
  args.softmax_scale = float(p.scale);
  FeatureBuffers features(api, p.batch, p.heads_q);
  if (std::string bad = features.upload(p.features, sinks_bf16); !bad.empty()) { result.error = bad; return result; }
  features.set_launch_features(args.features, p.features, sinks_bf16);
  result.launched = args.features;
  result.launched_fp8 = args.fp8;
  // scheduler=dynamic: the tile counter, zeroed as a caller does once; the launch must leave it so.
  std::optional<DeviceBuffer> counter;
  if (config.spec.dynamic_schedule) {
    counter.emplace(api, 256);
    counter->fill_bytes(0);
    args.decode.workspace = counter->ptr(), args.decode.workspace_bytes = counter->bytes();
  }
  auto params = make_kernel_params(api, config, args, device.max_ctas);
  if (!params) {
    result.error = "launch: " + params.error().message;
    return result;
  }
  const LaunchShape shape = attention_launch_shape(config, args, device.max_ctas);
  if (device.fill_blocks >= 0) set_tile_deal(*params, config, args, shape.grid_x / unsigned(ctas_per_tile(config)), {device.fill_blocks, device.held_heads});
  void* kernel_args[] = {&*params};
  if (Status st = launch_kernel(api, function, shape, device.stream, kernel_args); !st) {
    result.error = "launch: " + st.error().message;
    return result;
  }
  if (Status st = check(api, api.cuStreamSynchronize(device.stream), "attention kernel"); !st) {
    result.error = st.error().message;
    return result;
  }

  if (counter) {
    result.error = tile_counter_error(*counter);
    if (!result.error.empty()) return result;
  }

  // Reference on the same device buffers (FP8 inputs' dequantised copies: K and V, and Q, of `in`).
  Reference ref = gpu_reference(device, p, in.ptr() + pl.q_offset * elem, pl.q, in.ptr() + pl.k_offset * elem, pl.k, in.ptr() + pl.v_offset * elem, pl.v,
                                &result.error);
  if (!result.error.empty()) return result;
  const size_t ref_o_count = ref.o.size();
  const std::vector<double>& expected = ref.o;
  std::vector<double> actual(ref_o_count);

  // Compare O (gathered from the output layout into [b, s, h, head_dim_v]).
  std::vector<uint16_t> o_raw(pl.output_elems);
  out.download(o_raw.data(), o_raw.size() * elem);
  size_t idx = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int s = 0; s < p.seqlen_q; ++s)
      for (int h = 0; h < p.heads_q; ++h)
        for (int d = 0; d < p.v_dim(); ++d, ++idx) {
          const float v = half_bits_to_float(o_raw[b * pl.o.batch + s * pl.o.row + h * pl.o.head + d], o_bf16);
          if (std::isnan(v)) ++result.unwritten;
          actual[idx] = v;
        }
  result.o_error = relative_l2_error(actual, expected);
  // Compare LSE.
  if (with_lse) {
    const bool fp8_operands = ref.magnitude.size() == lse_count;  // filled for FP8 operands alone
    const bool exact = p.fp8.exact();
    std::vector<float> got(lse_count);
    lse.download(got.data(), lse_count * 4);
    for (size_t i = 0; i < lse_count; ++i) {
      const double err = lse_entry_error(got[i], ref.lse[i], fp8_operands ? ref.magnitude[i] : -1.0, exact, result);
      result.lse_error = std::max(result.lse_error, err);
    }
  } else {
    std::vector<uint32_t> untouched(lse_count);
    lse.download(untouched.data(), lse_count * 4);
    for (uint32_t bits : untouched) if (bits != 0xFFFFFFFFu) { result.error = "lse written although not requested"; break; }
  }
  result.ran = true;
  return result;
}

}  // namespace flashjit
