#include "api/launch_args.hpp"

#include <cmath>
#include <cstddef>
#include <string>

#include "api/feature_args.hpp"
#include "api/struct_size.hpp"
#include "common/number_text.hpp"

namespace flashjit::api {

// NOTES: the layout is ABI. Any change to these numbers breaks every caller built against an older
// flashjit.h; fields may only be appended (and kAttentionArgsMinSize stays).
static_assert(sizeof(flashjit_attention_args_t) == 440);
static_assert(offsetof(flashjit_attention_args_t, qv) == 408);
static_assert(offsetof(flashjit_attention_args_t, q_scale) == 384);
static_assert(offsetof(flashjit_attention_args_t, k_scale) == 336);
static_assert(offsetof(flashjit_attention_args_t, v_scale_head_stride) == 376);
static_assert(offsetof(flashjit_attention_args_t, attention_chunk) == 304);
static_assert(offsetof(flashjit_attention_args_t, sinks) == 312);
static_assert(offsetof(flashjit_attention_args_t, alibi_batch_stride) == 328);
static_assert(offsetof(flashjit_attention_args_t, workspace) == 280);
static_assert(offsetof(flashjit_attention_args_t, max_splits) == 296);
static_assert(offsetof(flashjit_attention_args_t, num_pages) == 256);
static_assert(offsetof(flashjit_attention_args_t, total_k) == 272);
static_assert(offsetof(flashjit_attention_args_t, q) == 8);
static_assert(offsetof(flashjit_attention_args_t, batch) == 48);
static_assert(offsetof(flashjit_attention_args_t, q_strides) == 96);
static_assert(offsetof(flashjit_attention_args_t, softmax_scale) == 192);
static_assert(offsetof(flashjit_attention_args_t, window_left) == 200);
static_assert(offsetof(flashjit_attention_args_t, cu_seqlens_q) == 208);
static_assert(offsetof(flashjit_attention_args_t, page_size) == 248);
static_assert(sizeof(flashjit_tensor_strides_t) == 24);

namespace {

constexpr int64_t kMaxGridExtent = 65535;           // batch and heads are grid dimensions
constexpr int64_t kMaxSeqlen = 0x7fffffff - 256;    // as the core checks it

// Errors -----------------------------------------------------------------------------------------
// NOTES: only the failing branch builds strings: the checks run on every launch.

ApiStatus out_of_range(const char* field, int64_t value, int64_t max_value) {
  return args_not_allowed(field, std::to_string(value), "1.." + std::to_string(max_value));
}

// Checks -----------------------------------------------------------------------------------------

ApiStatus check_extent(const char* field, int64_t value, int64_t max_value, int* out) {
  if (value < 1 || value > max_value) return out_of_range(field, value, max_value);
  *out = static_cast<int>(value);
  return {};
}

ApiStatus check_flags(const flashjit_attention_args_t& a) {
  if (const uint32_t unknown = a.flags & ~FLASHJIT_ATTENTION_FLAG_PDL; unknown != 0) {
    return invalid_argument("args.flags", "args.flags: " + hex_text(unknown) + " is not a defined flag (allowed: FLASHJIT_ATTENTION_FLAG_PDL = 0x1)");
  }
  return {};
}

ApiStatus check_head_dim(const flashjit_attention_args_t& a, const KernelConfig& config) {
  if (a.head_dim == 0 || a.head_dim == config.spec.head_dim) return {};
  return invalid_argument("args.head_dim", "args.head_dim: " + std::to_string(a.head_dim) + " does not match the kernel's head_dim " +
                                               std::to_string(config.spec.head_dim) + " (0 = the kernel's)");
}

TensorStrides strides_of(const flashjit_tensor_strides_t& s) { return {s.batch, s.row, s.head}; }

}  // namespace

ApiStatus to_attention_args(const flashjit_attention_args_t* in, const KernelConfig& config, AttentionArgs* out) {
  // 1. The struct as this library knows it (unknown tail bytes zero).
  flashjit_attention_args_t a;
  flashjit_attention_args_init(&a);
  if (ApiStatus st = read_input_struct("args", "flashjit_attention_args_t", in, kAttentionArgsMinSize, &a); !st.ok()) return st;
  // 2. Defined flags only; head_dim agrees with the kernel.
  if (ApiStatus st = check_flags(a); !st.ok()) return st;
  if (ApiStatus st = check_head_dim(a, config); !st.ok()) return st;
  // 3. 64-bit extents into the core's ints, in range.
  AttentionArgs args;
  if (ApiStatus st = check_extent("batch", a.batch, kMaxGridExtent, &args.batch); !st.ok()) return st;
  if (ApiStatus st = check_extent("heads_q", a.heads_q, kMaxGridExtent, &args.heads_q); !st.ok()) return st;
  if (ApiStatus st = check_extent("heads_kv", a.heads_kv, kMaxGridExtent, &args.heads_kv); !st.ok()) return st;
  if (ApiStatus st = check_extent("seqlen_q", a.seqlen_q, kMaxSeqlen, &args.seqlen_q); !st.ok()) return st;
  if (ApiStatus st = check_extent("seqlen_k", a.seqlen_k, kMaxSeqlen, &args.seqlen_k); !st.ok()) return st;
  args.q = a.q;
  args.k = a.k;
  args.v = a.v;
  args.o = a.o;
  args.lse = a.lse;
  args.q_strides = strides_of(a.q_strides);
  args.k_strides = strides_of(a.k_strides);
  args.v_strides = strides_of(a.v_strides);
  args.o_strides = strides_of(a.o_strides);
  args.softmax_scale = a.softmax_scale;
  // 4. Engine inputs (which ones a spec needs: validate_attention_args); extents in range.
  EngineInputs& e = args.engine;
  e.cu_seqlens_q = a.cu_seqlens_q;
  e.cu_seqlens_k = a.cu_seqlens_k;
  e.seqused_k = a.seqused_k;
  e.block_table = a.block_table;
  e.block_table_stride = a.block_table_batch_stride;
  const struct {
    const char* field;
    int64_t value;
    int* to;
  } extents[] = {{"page_size", a.page_size, &e.page_size}, {"num_pages", a.num_pages, &e.num_pages},
                 {"total_q", a.total_q, &e.total_q}, {"total_k", a.total_k, &e.total_k}};
  for (const auto& x : extents) {
    if (x.value == 0) continue;  // off, or missing where needed: the core says which
    if (ApiStatus st = check_extent(x.field, x.value, kMaxSeqlen, x.to); !st.ok()) return st;
  }
  // 5. Split-KV decode inputs (which a spec needs: validate_attention_args).
  args.decode.workspace = a.workspace;
  args.decode.workspace_bytes = a.workspace_bytes;
  args.decode.max_splits = a.max_splits;
  args.decode.split_keys = a.split_keys;
  // 6. Masks and score modifiers (MASKS AND SCORES): their ranges here; whether the spec has their
  //    keys in the core checks (validate_launch_args: new arguments only, its message prints the spec).
  if (ApiStatus st = to_feature_inputs(a, &args.features); !st.ok()) return st;
  // 7. The FP8 cache's scales (FP8 K/V CACHE): whether the spec has kv_dtype=e4m3, and their values,
  //    in validate_attention_args.
  args.fp8.k_scale = a.k_scale;
  args.fp8.v_scale = a.v_scale;
  args.fp8.k_scale_batch_stride = a.k_scale_batch_stride;
  args.fp8.k_scale_head_stride = a.k_scale_head_stride;
  args.fp8.v_scale_batch_stride = a.v_scale_batch_stride;
  args.fp8.v_scale_head_stride = a.v_scale_head_stride;
  args.fp8.q_scale = a.q_scale;
  args.fp8.q_scale_batch_stride = a.q_scale_batch_stride;
  args.fp8.q_scale_head_stride = a.q_scale_head_stride;
  // 8. qv=1's second query tensor (MLA SPLIT FORM): whether the spec has the key in the core.
  args.qv = a.qv;
  args.qv_strides = strides_of(a.qv_strides);
  *out = args;
  return {};
}

ApiStatus validate_launch_args(const KernelConfig& config, const AttentionArgs& args) {
  if (Status st = validate_attention_args(config, args); !st.ok()) return as_args_error(st.take_error());
  return {};
}

ApiStatus args_not_allowed(const char* field, const std::string& value, const std::string& allowed) {
  const std::string name = std::string("args.") + field;
  return invalid_argument(name, name + ": " + value + " is not allowed; allowed: " + allowed);
}

ApiStatus as_args_error(Error error) {
  if (error.code == ErrorCode::kInvalidArgument && !error.field.empty()) {
    if (error.message.compare(0, error.field.size(), error.field) == 0) error.message = "args." + error.message;
    error.field = "args." + error.field;
  }
  return error;
}

}  // namespace flashjit::api
