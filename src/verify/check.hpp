// Verify stage: runs a compiled kernel on fresh random inputs on the GPU and compares it with the
// float64 GPU reference (itself checked against the CPU definition in the tests). Used by the
// GPU test suite and by `flashjit check`.
#pragma once
#include <cuda.h>

#include <random>
#include <string>

#include "config/kernel_config.hpp"
#include "driver/cuda_driver.hpp"
#include "launch/attention_args.hpp"
#include "verify/reference.hpp"

namespace flashjit {

// Device memory for a check (RAII; aborts on allocation failure, which a check cannot recover from).
// upload and fill_bytes have finished when they return, and download waits for all of the
// context's work first: the kernels under test run on non-blocking streams, which the legacy
// stream's memset and copies do not wait for (nor those streams for them).
class DeviceBuffer {
 public:
  DeviceBuffer(const DriverApi& api, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* data, size_t bytes, size_t offset = 0);
  void download(void* data, size_t bytes, size_t offset = 0) const;
  void fill_bytes(unsigned char value, size_t from = 0);  // bytes [from, size)

 private:
  const DriverApi& api_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// scheduler=dynamic: the two words of the tile counter at `offset` in `buffer` after a launch;
// empty when they are back at 0, 0, else what they are.
std::string tile_counter_error(const DeviceBuffer& buffer, size_t offset = 0);
// combine=inline: "" when all `words` merge counters at `offset` are back at zero, else the first that is not.
std::string merge_counters_error(const DeviceBuffer& buffer, size_t offset, size_t words);

// The reference's window, chunk and softcap into a launch's feature inputs (a spec with the keys
// window, chunk or softcap reads them; one without refuses them when set).
void set_mask_features(FeatureInputs& inputs, const AttentionFeatures& features);

// The features' sinks and slopes on the device as a launch reads them: sinks float32 or bf16
// `[heads_q]` (the reference's values should be exact in that type), slopes float32 `[heads_q]` or
// `[batch][heads_q]`. Sized once for up to `batch` sequences of `heads_q` heads (set-up, not a
// timed path); upload replaces the values, so one set of buffers serves every problem checked on it.
class FeatureBuffers {
 public:
  FeatureBuffers(const DriverApi& api, int batch, int heads_q);
  // "" when uploaded, else what does not fit (AttentionFeatures::error's words, or the room).
  std::string upload(const AttentionFeatures& features, bool sinks_bf16);
  // set_mask_features, then the sink and slope pointers and their type and stride where
  // `features` has sinks or slopes (they must have been uploaded).
  void set_launch_features(FeatureInputs& inputs, const AttentionFeatures& features, bool sinks_bf16) const;

 private:
  int batch_, heads_q_;
  DeviceBuffer sinks_, slopes_;
};

enum class Layout {
  kContiguous,  // [b, s, h, d]
  kPackedQKV,   // one [b, s, hq + 2 hkv, d] buffer (needs seqlen_q == seqlen_k), O contiguous
  kHeadMajor,   // [b, h, s, d] (row stride d, head stride s*d)
  kPadded,      // [b, s, h, d] with a padded row stride and head stride
};
const char* layout_name(Layout layout);

// Where the GPU work runs: a current context and a stream on it.
struct CheckDevice {
  const DriverApi* api = nullptr;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  int max_ctas = 0;      // persistent grid size (the SM count), 0: one CTA per tile
  int fill_blocks = -1;  // causal blocks held back by the tile deal; -1: what the launch picks
  int held_heads = 0;    // with fill_blocks >= 0, the last heads they are held back from (0: all)
};

struct CheckResult {
  bool ran = false;
  std::string error;        // set when the check could not run (launch error, bad args)
  double o_error = 0;       // ||O - ref|| / ||ref||
  double lse_error = 0;     // max |lse - ref| / max(1, |ref|); -inf must match exactly (FP8 operands: fp8_lse_error)
  double lse_per_magnitude = 0;  // FP8 operands: max |lse - ref| / the row's score magnitude (Reference::magnitude)
  size_t unwritten = 0;     // output elements still holding the poison (NaN)
  FeatureInputs launched;   // the launch's feature inputs (window, chunk, softcap, sink and slope pointers)
  Fp8Inputs launched_fp8;   // the launch's FP8 cache inputs (scale pointers and strides; 0 without the cache)
  bool passed(bool bf16) const;
  bool passed_within(double o_bound) const;  // passed with this O bound (o_error_bound's, or the FP8 cache's)
};

// Error bounds: the peers' own error (cuDNN ~2.7e-4 fp16, ~2.1e-3 bf16 at seqlen 1536) with headroom.
double o_error_bound(bool bf16);
// FP8 operands (dtype=e4m3): O's relative L2 error against float64 on the dequantised Q, K and V
// is at most 2^-4. The kernel rounds P to e4m3 for the P V GEMM (as FlashAttention-3 does);
// everything else is float32 or finer than P's rounding (Q K^T's FP8 accumulation about 2^-14 of
// its summed magnitudes, the descales and the softmax float32, O's one rounding to bf16 2^-9). e4m3
// keeps 3 mantissa bits: a normal P_j rounds with a relative error |d_j| <= 2^-4. O's error is then
// sum_j P_j d_j v_j / l against O = sum_j P_j v_j / l; over values with independent zero-mean
// entries its mean square relative to O's is the P_j^2-weighted mean of d_j^2, at most (2^-4)^2
// (about 0.027 expected, P spread over its binades). P below e4m3's normal range (2^-6 of the
// running max's weight) rounds on the subnormals' step 2^-9, a larger relative error on weights
// each below 2^-6 of the row's largest: simulated (N(0, s^2) scores, s 0.5 to 4, 1k to 8k keys,
// P <= 1 and P <= 2^8) 0.013 to 0.029, under half the bound. The same bound and argument as
// examples/python/attention_ctypes.py's FP8_O_BOUND (bench/fp8_peers.py). LSE comes from the
// scores and float32 sums, never from the rounded P, but the scores carry the FP8 accumulation's
// error: fp8_lse_error below.
inline constexpr double kFp8OperandsOErrorBound = 0.0625;
// With FP8 inputs (fp8.on): an FP8 cache's, the 16-bit bound doubled where a scale is not a power
// of two (the dequantised copy then rounds once to the dtype; the kernel's float product and the
// host's may differ by the dtype's last bit on a tie); FP8 operands' (fp8.operands),
// kFp8OperandsOErrorBound whatever the scales (a copy's rounding, 2^-9, is far below it).
double o_error_bound(bool bf16, const Fp8Cache& fp8);
inline constexpr double kLseErrorBound = 1e-4;
// An FP8 operands kernel's LSE error in units of kLseErrorBound's: |got - want| against
// max(1, |want|) + magnitude x c / kLseErrorBound, magnitude the row's (Reference::magnitude: scale
// x the largest sum of |q_c k_c| among its keys). The LSE follows the row's largest scores, and each
// score carries two errors proportional to its summed |q_c k_c|: Hopper's FP8 wgmma sums at reduced
// precision (about 14 bits, DeepSeek-V3's report 3.3.2; measured on an H100 over 114 cases with
// power-of-two descales, |dLSE| / magnitude at most 2.6e-4, 2^-11.9): 2^-10; and where a descale is
// not a power of two (exact_copies false) the reference's 16-bit dequantised copies round each q_c
// and k_c by up to 2^-9, the kernel's codes x descales do not: 2^-8 more (the same H100: at most
// 1.9e-3, 2^-9.1). A wrong descale or key is off by a large part of the magnitude and still fails.
double fp8_lse_error(double got, double want, double magnitude, bool exact_copies);
// One LSE entry against the float64 reference, in kLseErrorBound's units, for both checks: NaN (an
// entry left unwritten: counted in result.unwritten) and anything but -inf where the reference has
// -inf are infinite; an FP8 operands row (magnitude >= 0: Reference::magnitude's) by fp8_lse_error,
// noting |got - want| / magnitude in result.lse_per_magnitude; any other row (magnitude < 0) by
// |got - want| / max(1, |want|).
double lse_entry_error(double got, double want, double magnitude, bool exact_copies, CheckResult& result);

// Fresh random inputs in `layout`, poisoned outputs, one launch of `function` (a kernel of
// `config`), then the float64 reference on the same inputs. The problem's features go to the
// launch too, its sinks as bf16 with `sinks_bf16`, else float32. With Problem::fp8 (a
// kv_dtype=e4m3 spec) K and V are launched as e4m3 codes with their scales and the reference
// reads the dequantised 16-bit copy (Fp8Cache's rule; the layout's strides multiples of 16 bytes);
// with fp8.operands (a dtype=e4m3 spec) Q too, with its descale, the copies bf16 whatever
// Problem::bf16, and O read in fp8.out_bf16's type.
CheckResult check_attention(const CheckDevice& device, CUfunction function, const KernelConfig& config,
                            const Problem& problem, Layout layout, bool with_lse, std::mt19937_64& rng,
                            bool sinks_bf16 = false);

// Unloads the helper kernels (reference, random fill) from a context: call before releasing it.
void drop_verify_kernels(CUcontext context);

// The float64 GPU reference on device inputs (error set when it could not run).
Reference gpu_reference(const CheckDevice& device, const Problem& p, CUdeviceptr q, Strides qs, CUdeviceptr k,
                        Strides ks, CUdeviceptr v, Strides vs, std::string* error);

}  // namespace flashjit
