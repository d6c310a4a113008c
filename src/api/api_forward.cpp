// Exported: flashjit_attention_forward (the hot path), flashjit_kernel_launch_spec and
// flashjit_validate_attention_args.
//
// One launch, in steps: read and check the C arguments -> the handle's kernel for their shape ->
// parameters from that kernel's cache, or validated (before any driver call) -> check the stream
// belongs to the kernel's CUDA context -> encode new parameters -> cuLaunchKernelEx.
// Nothing here allocates, synchronises, copies from the host or compiles (an error message is
// the one exception: it is built only when the call fails).
// NOTES: a parameter-cache miss allocates nothing either: the tensor-map checks build their
// messages only on failure (tests/api_fake_driver_suite.cpp counts allocations over 100 launches
// with new arguments and expects none).
#include <cstdio>
#include <cstring>

#include "api/api_status.hpp"
#include "api/kernel.hpp"
#include "api/launch_args.hpp"
#include "api/struct_size.hpp"
#include "config/length_choice.hpp"
#include "driver/context.hpp"
#include "driver/launch.hpp"
#include "launch/attention_launch.hpp"
#include "launch/merge_states.hpp"
#include "spec/attention_spec.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

// NOTES: launching a kernel into a stream of another CUDA context is undefined at best (the
// function handle means nothing there); one cuStreamGetCtx per launch finds it first. It is a host
// lookup, allowed during stream capture. Not cached: a destroyed stream's handle can come back as
// another context's stream, and a cache could not tell.
ApiStatus check_stream_context(const flashjit_kernel_s& kernel, CUstream stream) {
  CUcontext stream_context = nullptr;
  if (CUresult r = kernel.api->cuStreamGetCtx(stream, &stream_context); r != CUDA_SUCCESS) {
    return ApiStatus::make(FLASHJIT_ERROR_DRIVER, "stream",
                           "stream: cuStreamGetCtx(" + pointer_text(stream) + ") failed: " + describe(*kernel.api, r) +
                               (stream ? "" : " (the NULL stream means the current context's, and this thread may have none)"));
  }
  if (stream_context == kernel.cu_context) return {};
  return ApiStatus::make(FLASHJIT_ERROR_WRONG_CONTEXT, "stream",
                         "stream: " + pointer_text(stream) + " belongs to CUDA context " + pointer_text(stream_context) +
                             ", but kernel '" + kernel.main.resolved_spec + "' was loaded in CUDA context " +
                             pointer_text(kernel.cu_context) + " (device " + std::to_string(kernel.context->device()) +
                             "); get the kernel from a flashjit context made for the stream's CUDA context");
}

// Makes the kernel's CUDA context current for the launch when it is not already (a thread with no
// current context, or with another one, may still launch on a stream of the kernel's context).
class CurrentContextForLaunch {
 public:
  CurrentContextForLaunch(const DriverApi& api, CUcontext wanted) : api_(api) {
    CUcontext current = nullptr;
    if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == wanted) return;
    pushed_ = api.cuCtxPushCurrent(wanted) == CUDA_SUCCESS;
  }
  ~CurrentContextForLaunch() {
    CUcontext popped = nullptr;
    if (pushed_) api_.cuCtxPopCurrent(&popped);
  }
  CurrentContextForLaunch(const CurrentContextForLaunch&) = delete;
  CurrentContextForLaunch& operator=(const CurrentContextForLaunch&) = delete;

 private:
  const DriverApi& api_;
  bool pushed_ = false;
};

ApiStatus forward(flashjit_kernel_s& kernel, const flashjit_attention_args_t* in, CUstream stream) {
  // 1. The C arguments, checked and converted; the kernel for their shape (the two a handle may
  //    hold differ only in tiles, so the conversion's checks hold for either).
  AttentionArgs args;
  if (ApiStatus st = to_attention_args(in, kernel.config(), &args); !st.ok()) return st;
  KernelVariant& variant = kernel.variant_for(args);
  // 2. Arguments seen before have their parameters cached; new ones get the core checks, before
  //    any driver call.
  const ParamsKey key = ParamsKey::of(args);
  KernelParams params;
  const bool cached = variant.params.find(key, &params);
  if (!cached) {
    if (ApiStatus st = validate_launch_args(variant.config(), args); !st.ok()) return st;
  }
  // 3. The stream is in the kernel's CUDA context.
  if (ApiStatus st = check_stream_context(kernel, stream); !st.ok()) return st;
  // 4. New arguments: encode the four tensor maps, and remember them.
  if (!cached) {
    auto built = make_kernel_params(*kernel.api, variant.config(), args, kernel.sm_count);
    if (!built) return as_args_error(built.take_error());
    params = *built;
    variant.params.store(key, params);
  }
  // 5. One launch on the caller's stream (split_kv: and its combine, with PDL).
  CurrentContextForLaunch current(*kernel.api, kernel.cu_context);
  const bool pdl = (in->flags & FLASHJIT_ATTENTION_FLAG_PDL) != 0;
  return launch_attention_kernels(*kernel.api, {variant.function, variant.combine}, variant.config(), args, params, stream,
                                  kernel.sm_count, pdl);
}

// The merge of two attention states: the C struct, checked, then one launch.
ApiStatus merge_states(flashjit_kernel_s& kernel, const flashjit_merge_args_t* in, CUstream stream) {
  flashjit_merge_args_t a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  if (ApiStatus st = read_input_struct("args", "flashjit_merge_args_t", in, sizeof(flashjit_merge_args_t), &a); !st.ok()) return st;
  if (const uint32_t unknown = a.flags & ~7u; unknown != 0) {
    return invalid_argument("args.flags", "args.flags: " + std::to_string(unknown) + " holds bits that are not FLASHJIT_MERGE_FLAG_*");
  }
  MergeArgs m;
  m.o_a = a.o_a, m.o_b = a.o_b, m.o_out = a.o_out, m.lse_a = a.lse_a, m.lse_b = a.lse_b, m.lse_out = a.lse_out;
  if (a.rows < 1 || a.rows > 0x7fffffff - 256) return invalid_argument("args.rows", "args.rows: " + std::to_string(a.rows) + " is not allowed; allowed: 1..2^31-257");
  if (a.heads < 1 || a.heads > 65535) return invalid_argument("args.heads", "args.heads: " + std::to_string(a.heads) + " is not allowed; allowed: 1..65535");
  m.rows = int(a.rows), m.heads = int(a.heads);
  m.a_row_stride = a.a_row_stride, m.a_head_stride = a.a_head_stride, m.b_row_stride = a.b_row_stride;
  m.b_head_stride = a.b_head_stride, m.out_row_stride = a.out_row_stride, m.out_head_stride = a.out_head_stride;
  m.lse_head_stride = a.lse_head_stride;
  m.float32_states = (a.flags & FLASHJIT_MERGE_FLAG_FLOAT32_STATES) != 0;
  m.float32_out = (a.flags & FLASHJIT_MERGE_FLAG_FLOAT32_OUT) != 0;
  if (Status st = validate_merge_args(kernel.config(), m); !st) return as_args_error(st.take_error());
  if (ApiStatus st = check_stream_context(kernel, stream); !st.ok()) return st;
  CurrentContextForLaunch current(*kernel.api, kernel.cu_context);
  return launch_merge_states(*kernel.api, kernel.main.merge, kernel.config(), m, stream, (a.flags & FLASHJIT_MERGE_FLAG_PDL) != 0);
}

// A size of the workspace a launch of spec with these arguments needs: the whole of it, or its
// counters' part (attention_args.hpp: attention_workspace_bytes, schedule_workspace_bytes).
// The bytes first (zeroed), then the inputs, each named where NULL.
ApiStatus workspace_part_for_spec(const char* spec_text, const flashjit_attention_args_t* in, bool counters_only, uint64_t* bytes) {
  if (!bytes) return null_argument("bytes");
  *bytes = 0;
  if (!spec_text) return null_argument("spec");
  if (!in) return null_argument("args");
  auto spec = parse_spec(spec_text);
  if (!spec) return spec.take_error();
  auto config = make_config(*spec);
  if (!config) return config.take_error();
  AttentionArgs args;
  if (ApiStatus st = to_attention_args(in, *config, &args); !st.ok()) return st;
  *bytes = counters_only ? schedule_workspace_bytes(*config, args) : attention_workspace_bytes(*config, args);
  return {};
}

// The checks forward() makes on new arguments, for the kernel a handle for this spec would run at
// these lengths (a `flashjit tune` winner aside: this needs no cache). Where the device's SM count
// would decide (length_choice's rule for uneven deals), both kernels' checks.
ApiStatus validate_for_spec(const char* spec_text, const flashjit_attention_args_t* in) {
  auto spec = parse_spec(spec_text);
  if (!spec) return spec.take_error();
  auto config = make_config(*spec);
  if (!config) return config.take_error();
  AttentionArgs args;
  if (ApiStatus st = to_attention_args(in, *config, &args); !st.ok()) return st;
  const auto variant = long_sequence_variant(*spec);
  const LengthRange range = variant ? length_range(variant->rule, args.seqlen_q, args.seqlen_k) : LengthRange::kShort;
  if (range != LengthRange::kLong) {
    if (ApiStatus st = validate_launch_args(*config, args); !st.ok() || range == LengthRange::kShort) return st;
  }
  auto long_config = make_config(variant->spec);
  if (!long_config) return long_config.take_error();
  return validate_launch_args(*long_config, args);
}

// The resolved spec of the kernel forward() would launch for these arguments, after its checks.
ApiStatus launch_spec(flashjit_kernel_s& kernel, const flashjit_attention_args_t* in, const char** spec) {
  AttentionArgs args;
  if (ApiStatus st = to_attention_args(in, kernel.config(), &args); !st.ok()) return st;
  const KernelVariant& variant = kernel.variant_for(args);
  if (ApiStatus st = validate_launch_args(variant.config(), args); !st.ok()) return st;
  *spec = variant.resolved_spec.c_str();
  return {};
}

}  // namespace

extern "C" {

flashjit_status_t flashjit_attention_forward(flashjit_kernel_t kernel, const flashjit_attention_args_t* args, void* stream) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!kernel) return null_argument("kernel");
    if (!args) return null_argument("args");
    return forward(*kernel, args, static_cast<CUstream>(stream));
  });
}

flashjit_status_t flashjit_kernel_launch_spec(flashjit_kernel_t kernel, const flashjit_attention_args_t* args, const char** spec) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!spec) return null_argument("spec");
    *spec = nullptr;
    if (!kernel) return null_argument("kernel");
    if (!args) return null_argument("args");
    return launch_spec(*kernel, args, spec);
  });
}

flashjit_status_t flashjit_merge_attention_states(flashjit_kernel_t kernel, const flashjit_merge_args_t* args, void* stream) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!kernel) return null_argument("kernel");
    if (!args) return null_argument("args");
    return merge_states(*kernel, args, static_cast<CUstream>(stream));
  });
}

flashjit_status_t flashjit_attention_workspace_size(const char* spec, const flashjit_attention_args_t* args, uint64_t* bytes) {
  return guarded(__func__, [&] { return workspace_part_for_spec(spec, args, false, bytes); });
}

flashjit_status_t flashjit_attention_workspace_counter_bytes(const char* spec, const flashjit_attention_args_t* args, uint64_t* bytes) {
  return guarded(__func__, [&] { return workspace_part_for_spec(spec, args, true, bytes); });
}

flashjit_status_t flashjit_validate_attention_args(const char* spec, const flashjit_attention_args_t* args) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!spec) return null_argument("spec");
    if (!args) return null_argument("args");
    return validate_for_spec(spec, args);
  });
}

}  // extern "C"
