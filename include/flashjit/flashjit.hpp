// flashjit for C++: header-only RAII wrappers over the C API in flashjit.h, so the shared library
// exports C symbols only and imposes no C++ standard library ABI on its users. C++17 or newer.
//
// The lifecycle contract (what compiles, what allocates, what is graph-safe) is the C API's; read
// it at the top of flashjit.h. In short: Context::kernel may compile and load, Kernel::forward
// never allocates, synchronises or compiles and may be captured in a CUDA graph.
//
//   auto context = flashjit::Context::create(flashjit::ContextOptions().device(0));
//   if (!context) { std::cerr << context.error().message() << "\n"; return 1; }
//   auto kernel = context->kernel("dtype=bf16,head_dim=128,causal=1");
//   auto args = flashjit::AttentionArgs::contiguous(q, k, v, o, batch, seqlen_q, seqlen_k, heads_q, heads_kv, 128);
//   flashjit::Status launched = kernel->forward(args, stream);
//
// NOTES: everything lives in the inline namespace flashjit::v1, so these names never collide at
// link time with the library's internal C++ (which is hidden in the shared library anyway) and a
// future incompatible wrapper can move to v2.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "flashjit/flashjit.h"

namespace flashjit {
inline namespace v1 {

// An error: the C status and the message (and field) flashjit recorded for it.
class Error {
 public:
  Error() = default;
  Error(flashjit_status_t code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}
  // The error of the call that just returned `code` on this thread.
  static Error last(flashjit_status_t code) { return Error(code, flashjit_last_error_message(), flashjit_last_error_field()); }

  flashjit_status_t code() const { return code_; }
  const char* code_name() const { return flashjit_status_string(code_); }
  const std::string& message() const { return message_; }
  const std::string& field() const { return field_; }

 private:
  flashjit_status_t code_ = FLASHJIT_ERROR_INTERNAL;
  std::string message_;
  std::string field_;
};

// A value or an Error.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit on purpose
  Expected(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Success or an Error.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT
  // From a C status, taking the thread's last error when it failed.
  static Expected from(flashjit_status_t code) { return code == FLASHJIT_SUCCESS ? Expected() : Expected(Error::last(code)); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};
using Status = Expected<void>;

// ---- library -------------------------------------------------------------------------------------

inline uint32_t version() { return flashjit_get_version(); }
// Ok when the library implements the ABI this header describes.
inline Status check_abi() { return Status::from(flashjit_check_abi(FLASHJIT_ABI_VERSION)); }
// Ok when flashjit can build a kernel for spec; else the reason ("head_dim: ...").
inline Status supported(const std::string& spec) { return Status::from(flashjit_supported(spec.c_str(), nullptr, 0)); }

// ---- arguments -----------------------------------------------------------------------------------

using TensorStrides = flashjit_tensor_strides_t;

// flashjit_attention_args_t with a builder. Device addresses are CUdeviceptr values.
class AttentionArgs {
 public:
  AttentionArgs() { flashjit_attention_args_init(&args_); }

  // Contiguous [batch, seqlen, heads, head_dim] Q, K, V, O.
  static AttentionArgs contiguous(uint64_t q, uint64_t k, uint64_t v, uint64_t o, int64_t batch, int64_t seqlen_q,
                                  int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim) {
    AttentionArgs a;
    a.pointers(q, k, v, o).shape(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim);
    const TensorStrides qo = flashjit_contiguous_bshd(seqlen_q, heads_q, head_dim);
    const TensorStrides kv = flashjit_contiguous_bshd(seqlen_k, heads_kv, head_dim);
    return a.strides(qo, kv, kv, qo);
  }

  AttentionArgs& pointers(uint64_t q, uint64_t k, uint64_t v, uint64_t o) {
    args_.q = q;
    args_.k = k;
    args_.v = v;
    args_.o = o;
    return *this;
  }
  AttentionArgs& shape(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                       int64_t head_dim = 0) {
    args_.batch = batch;
    args_.seqlen_q = seqlen_q;
    args_.seqlen_k = seqlen_k;
    args_.heads_q = heads_q;
    args_.heads_kv = heads_kv;
    args_.head_dim = head_dim;
    return *this;
  }
  AttentionArgs& strides(TensorStrides q, TensorStrides k, TensorStrides v, TensorStrides o) {
    args_.q_strides = q;
    args_.k_strides = k;
    args_.v_strides = v;
    args_.o_strides = o;
    return *this;
  }
  // float [batch, heads_q, seqlen_q]; 0 = none.
  AttentionArgs& lse(uint64_t lse) {
    args_.lse = lse;
    return *this;
  }
  // 0 = 1/sqrt(head_dim).
  AttentionArgs& softmax_scale(float scale) {
    args_.softmax_scale = scale;
    return *this;
  }
  // Programmatic dependent launch (FLASHJIT_ATTENTION_FLAG_PDL); off by default.
  AttentionArgs& pdl(bool on = true) {
    args_.flags = on ? (args_.flags | FLASHJIT_ATTENTION_FLAG_PDL) : (args_.flags & ~FLASHJIT_ATTENTION_FLAG_PDL);
    return *this;
  }

  // Engine inputs (flashjit.h, ENGINE INPUTS): packed queries (a varlen=1 spec) with total_q rows.
  AttentionArgs& varlen_queries(uint64_t cu_seqlens_q, int64_t total_q) {
    args_.cu_seqlens_q = cu_seqlens_q;
    args_.total_q = total_q;
    return *this;
  }
  // Packed K/V with total_k rows (varlen=1 without paged=1).
  AttentionArgs& varlen_keys(uint64_t cu_seqlens_k, int64_t total_k) {
    args_.cu_seqlens_k = cu_seqlens_k;
    args_.total_k = total_k;
    return *this;
  }
  // Keys per sequence (varlen or paged; paged: required).
  AttentionArgs& seqused_k(uint64_t seqused_k) {
    args_.seqused_k = seqused_k;
    return *this;
  }
  // A paged cache (a paged=1 spec): k/v strides' batch is the page stride.
  AttentionArgs& pages(uint64_t block_table, int64_t block_table_batch_stride, int64_t page_size, int64_t num_pages) {
    args_.block_table = block_table;
    args_.block_table_batch_stride = block_table_batch_stride;
    args_.page_size = page_size;
    args_.num_pages = num_pages;
    return *this;
  }
  // Split-KV decode (a split_kv=1 spec): the workspace (workspace_size bytes at least), the most
  // splits a sequence, and 0 or the keys per split (batch-invariant mode).
  AttentionArgs& split_kv(uint64_t workspace, uint64_t workspace_bytes, int32_t max_splits, int32_t split_keys = 0) {
    args_.workspace = workspace;
    args_.workspace_bytes = workspace_bytes;
    args_.max_splits = max_splits;
    args_.split_keys = split_keys;
    return *this;
  }
  // Masks and score modifiers (MASKS AND SCORES in flashjit.h; each needs its spec key).
  // window=1: keys left and right of the diagonal a row sees; -1 unbounded.
  AttentionArgs& window(int32_t left, int32_t right) {
    args_.window_left = left;
    args_.window_right = right;
    return *this;
  }
  // chunk=1: keys per attention chunk.
  AttentionArgs& attention_chunk(int32_t keys) {
    args_.attention_chunk = keys;
    return *this;
  }
  // softcap=1: c in c * tanh(score * softmax_scale / c).
  AttentionArgs& softcap(float cap) {
    args_.softcap = cap;
    return *this;
  }
  // sinks=1: one logit per query head, [heads_q], float32 (FLASHJIT_DTYPE_FP32) or bf16.
  AttentionArgs& sinks(uint64_t logits, flashjit_dtype_t dtype = FLASHJIT_DTYPE_FP32) {
    args_.sinks = logits;
    args_.sinks_dtype = logits ? dtype : 0;
    return *this;
  }
  // alibi=1: float32 slopes, [heads_q] (batch_stride 0) or [batch][batch_stride].
  AttentionArgs& alibi(uint64_t slopes, int64_t batch_stride = 0) {
    args_.alibi_slopes = slopes;
    args_.alibi_batch_stride = batch_stride;
    return *this;
  }
  // kv_dtype=e4m3 or dtype=e4m3 (FP8 K/V CACHE, FP8 OPERANDS in flashjit.h): float32 K and V
  // (de)quantisation scales at batch x batch_stride + K/V head x head_stride (0, 0: one per tensor;
  // 0, 1: per K/V head; heads_kv, 1: FlashAttention-3's [batch, heads_kv]).
  AttentionArgs& kv_scales(uint64_t k_scale, uint64_t v_scale, int64_t batch_stride = 0, int64_t head_stride = 0) {
    args_.k_scale = k_scale;
    args_.v_scale = v_scale;
    args_.k_scale_batch_stride = args_.v_scale_batch_stride = batch_stride;
    args_.k_scale_head_stride = args_.v_scale_head_stride = head_stride;
    return *this;
  }
  // dtype=e4m3: Q's descale, indexed as the K/V scales (0: 1).
  AttentionArgs& q_scale(uint64_t scale, int64_t batch_stride = 0, int64_t head_stride = 0) {
    args_.q_scale = scale;
    args_.q_scale_batch_stride = batch_stride;
    args_.q_scale_head_stride = head_stride;
    return *this;
  }

  // qv=1 (MLA SPLIT FORM in flashjit.h): qv [.., heads_q, head_dim_v] beside q's rotary columns.
  AttentionArgs& qv(uint64_t ptr, const TensorStrides& strides) {
    args_.qv = ptr;
    args_.qv_strides = strides;
    return *this;
  }

  const flashjit_attention_args_t& c() const { return args_; }
  flashjit_attention_args_t& c() { return args_; }

 private:
  flashjit_attention_args_t args_;
};

// The workspace a split_kv=1 launch of these arguments needs (0 for other specs).
inline Status workspace_size(const std::string& spec, const AttentionArgs& args, uint64_t* bytes) {
  return Status::from(flashjit_attention_workspace_size(spec.c_str(), &args.c(), bytes));
}
// Its leading counters' part (scheduler=dynamic, combine=inline): zero these bytes before a first use.
inline Status workspace_counter_bytes(const std::string& spec, const AttentionArgs& args, uint64_t* bytes) {
  return Status::from(flashjit_attention_workspace_counter_bytes(spec.c_str(), &args.c(), bytes));
}

// Checks args against spec without a GPU, exactly as Kernel::forward would.
inline Status validate(const std::string& spec, const AttentionArgs& args) {
  return Status::from(flashjit_validate_attention_args(spec.c_str(), &args.c()));
}

// The engine metadata behind args, as host copies (its pointers are host addresses): the first
// bad entry is named. Kernel::check_engine_metadata reads device copies.
inline Status check_engine_metadata_host(const std::string& spec, const AttentionArgs& args) {
  return Status::from(flashjit_check_engine_metadata_host(spec.c_str(), &args.c()));
}

// ---- kernels -------------------------------------------------------------------------------------

struct KernelInfo {
  int device = 0;
  std::string spec, kernel_name, cache_key;
  flashjit_dtype_t dtype = FLASHJIT_DTYPE_BF16;
  int head_dim = 0, block_m = 0, block_n = 0, threads_per_block = 0;
  bool causal = false;
  int registers = 0, local_bytes = 0, spill_bytes = 0, dynamic_smem_bytes = 0, static_smem_bytes = 0;
  flashjit_kernel_source_t source = FLASHJIT_KERNEL_FROM_MEMORY;
  std::string long_seqlen_spec;  // empty: one kernel at every length
  int64_t long_seqlen_min = 0;   // launches with both lengths at least this run long_seqlen_spec
  // ...and those with both at least this whose persistent grid would use less than
  // long_uneven_use_percent % of its causal pairs' rounds (flashjit_kernel_info_t); 0: none.
  int64_t long_seqlen_min_uneven = 0;
  int long_uneven_use_percent = 0;
};

// A kernel loaded in its context (which it keeps alive). Move-only.
class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(flashjit_kernel_t handle) : handle_(handle) {}
  Kernel(Kernel&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Kernel& operator=(Kernel&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  ~Kernel() { reset(); }

  // The hot path: never allocates (an error's message excepted), synchronises or compiles.
  // stream is a CUstream of the kernel's CUDA context (nullptr: the current context's default).
  Status forward(const AttentionArgs& args, void* stream) const {
    const flashjit_status_t code = flashjit_attention_forward(handle_, &args.c(), stream);
    return code == FLASHJIT_SUCCESS ? Status() : Status(Error::last(code));
  }

  // Two attention states merged into one (a split_kv=1 kernel; flashjit_merge_attention_states).
  Status merge_states(const flashjit_merge_args_t& args, void* stream) const {
    const flashjit_status_t code = flashjit_merge_attention_states(handle_, &args, stream);
    return code == FLASHJIT_SUCCESS ? Status() : Status(Error::last(code));
  }

  // The engine metadata args points to on the device, off the hot path (it copies and waits).
  Status check_engine_metadata(const AttentionArgs& args) const {
    const flashjit_status_t code = flashjit_check_engine_metadata(handle_, &args.c());
    return code == FLASHJIT_SUCCESS ? Status() : Status(Error::last(code));
  }

  Expected<KernelInfo> describe() const {
    flashjit_kernel_info_t c{};
    c.struct_size = sizeof(c);
    if (flashjit_status_t code = flashjit_kernel_describe(handle_, &c); code != FLASHJIT_SUCCESS) return Error::last(code);
    KernelInfo info;
    info.device = c.device;
    info.spec = c.spec;
    info.kernel_name = c.kernel_name;
    info.cache_key = c.cache_key;
    info.dtype = c.dtype;
    info.head_dim = c.head_dim;
    info.causal = c.causal != 0;
    info.block_m = c.block_m;
    info.block_n = c.block_n;
    info.threads_per_block = c.threads_per_block;
    info.registers = c.registers;
    info.local_bytes = c.local_bytes;
    info.spill_bytes = c.spill_bytes;
    info.dynamic_smem_bytes = c.dynamic_smem_bytes;
    info.static_smem_bytes = c.static_smem_bytes;
    info.source = c.source;
    if (c.long_seqlen_spec) info.long_seqlen_spec = c.long_seqlen_spec;
    info.long_seqlen_min = c.long_seqlen_min;
    info.long_seqlen_min_uneven = c.long_seqlen_min_uneven;
    info.long_uneven_use_percent = c.long_uneven_use_percent;
    return info;
  }

  // The resolved spec of the kernel forward(args, ...) would launch, after forward's checks.
  Expected<std::string> launch_spec(const AttentionArgs& args) const {
    const char* spec = nullptr;
    if (flashjit_status_t code = flashjit_kernel_launch_spec(handle_, &args.c(), &spec); code != FLASHJIT_SUCCESS) {
      return Error::last(code);
    }
    return std::string(spec);
  }

  flashjit_kernel_t get() const { return handle_; }
  flashjit_kernel_t release() { return std::exchange(handle_, nullptr); }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  void reset() {
    if (handle_) flashjit_kernel_release(std::exchange(handle_, nullptr));
  }
  flashjit_kernel_t handle_ = nullptr;
};

// ---- contexts ------------------------------------------------------------------------------------

class ContextOptions {
 public:
  ContextOptions() { flashjit_context_options_init(&options_); }
  // A device ordinal, or FLASHJIT_DEVICE_NONE for a compile-only context.
  ContextOptions& device(int ordinal) {
    options_.device = ordinal;
    return *this;
  }
  // A CUcontext the caller keeps alive, instead of the device's primary context.
  ContextOptions& cu_context(void* context) {
    options_.cu_context = context;
    return *this;
  }
  ContextOptions& cache_dir(std::string dir) {
    cache_dir_ = std::move(dir);
    return *this;
  }
  ContextOptions& compile_policy(flashjit_compile_policy_t policy) {
    options_.compile_policy = policy;
    return *this;
  }
  ContextOptions& cache_only() { return compile_policy(FLASHJIT_COMPILE_POLICY_CACHE_ONLY); }
  ContextOptions& memory_only() {
    options_.cache_mode = FLASHJIT_CACHE_MEMORY_ONLY;
    return *this;
  }
  ContextOptions& max_cache_bytes(uint64_t bytes) {
    options_.max_cache_bytes = bytes;
    return *this;
  }

  // The C struct; valid while this object lives and is not changed.
  const flashjit_context_options_t& c() const {
    options_.cache_dir = cache_dir_.empty() ? nullptr : cache_dir_.c_str();
    return options_;
  }

 private:
  mutable flashjit_context_options_t options_;
  std::string cache_dir_;
};

// A CUDA context (or none), a kernel cache and a compile policy. Move-only.
class Context {
 public:
  static Expected<Context> create(const ContextOptions& options = ContextOptions()) {
    flashjit_context_t handle = nullptr;
    if (flashjit_status_t code = flashjit_context_create(&options.c(), &handle); code != FLASHJIT_SUCCESS) {
      return Error::last(code);
    }
    return Context(handle);
  }

  Context() = default;
  explicit Context(flashjit_context_t handle) : handle_(handle) {}
  Context(Context&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Context& operator=(Context&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { reset(); }

  // The only call that compiles (policy permitting) or loads.
  Expected<Kernel> kernel(const std::string& spec) const {
    flashjit_kernel_t handle = nullptr;
    if (flashjit_status_t code = flashjit_kernel_get(handle_, spec.c_str(), &handle); code != FLASHJIT_SUCCESS) {
      return Error::last(code);
    }
    return Kernel(handle);
  }

  Status prewarm(const std::vector<std::string>& specs) const {
    const std::vector<const char*> texts = c_strings(specs);
    return Status::from(flashjit_prewarm(handle_, texts.data(), texts.size()));
  }

  Status export_cache(const std::vector<std::string>& specs, const std::string& path) const {
    const std::vector<const char*> texts = c_strings(specs);
    return Status::from(flashjit_cache_export(handle_, texts.data(), texts.size(), path.c_str()));
  }

  // The number of kernels in the bundle.
  Expected<size_t> import_cache(const std::string& path) const {
    size_t imported = 0;
    if (flashjit_status_t code = flashjit_cache_import(handle_, path.c_str(), &imported); code != FLASHJIT_SUCCESS) {
      return Error::last(code);
    }
    return imported;
  }

  Expected<flashjit_context_info_t> describe() const {
    flashjit_context_info_t info{};
    info.struct_size = sizeof(info);
    if (flashjit_status_t code = flashjit_context_describe(handle_, &info); code != FLASHJIT_SUCCESS) return Error::last(code);
    return info;
  }

  flashjit_context_t get() const { return handle_; }
  flashjit_context_t release() { return std::exchange(handle_, nullptr); }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  static std::vector<const char*> c_strings(const std::vector<std::string>& specs) {
    std::vector<const char*> out;
    out.reserve(specs.size());
    for (const std::string& s : specs) out.push_back(s.c_str());
    return out;
  }
  void reset() {
    if (handle_) flashjit_context_destroy(std::exchange(handle_, nullptr));
  }
  flashjit_context_t handle_ = nullptr;
};

}  // namespace v1
}  // namespace flashjit
