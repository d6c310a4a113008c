#include "launch/merge_states.hpp"

#include <string>

#include "driver/launch.hpp"
#include "launch/arg_error.hpp"

namespace flashjit {
namespace {

Status check_pointer(const char* field, uint64_t ptr, uint64_t alignment) {
  if (ptr == 0) return bad_argument(field, "null device pointer");
  if (ptr % alignment != 0) return bad_argument(field, "pointer is not " + std::to_string(alignment) + "-byte aligned");
  return {};
}

Status check_stride(const char* field, int64_t stride, int64_t least) {
  if (stride < least || stride % 8 != 0 || stride >= (int64_t(1) << 39)) {
    return bad_argument(field, std::to_string(stride) + " is not allowed; allowed: a multiple of 8 elements, at least " + std::to_string(least));
  }
  return {};
}

}  // namespace

Status validate_merge_args(const KernelConfig& c, const MergeArgs& a) {
  if (!c.spec.split_kv) return Error::invalid_argument("kernel", "kernel: the merge of attention states is a kernel of split_kv=1 specs; get one with split_kv=1");
  if (a.rows < 1 || a.rows > 0x7fffffff - 256) return bad_argument("rows", std::to_string(a.rows) + " is not allowed; allowed: 1..2^31-257");
  if (a.heads < 1 || a.heads > 65535) return bad_argument("heads", std::to_string(a.heads) + " is not allowed; allowed: 1..65535");
  if (int64_t(a.rows) * a.heads / 8 >= 0x7fffffff) return bad_argument("rows", "rows x heads / 8 must stay below 2^31 (one grid dimension)");
  const int64_t d = c.spec.effective_head_dim_v();
  const struct {
    const char* field;
    uint64_t ptr;
  } tensors[] = {{"o_a", a.o_a}, {"o_b", a.o_b}, {"o_out", a.o_out}};
  for (const auto& t : tensors) {
    if (Status st = check_pointer(t.field, t.ptr, 16); !st) return st;
  }
  for (const auto& [field, ptr] : {std::pair<const char*, uint64_t>{"lse_a", a.lse_a}, {"lse_b", a.lse_b}}) {
    if (Status st = check_pointer(field, ptr, 4); !st) return st;
  }
  if (a.lse_out % 4 != 0) return bad_argument("lse_out", "pointer is not 4-byte aligned");
  const struct {
    const char* field;
    int64_t value, least;
  } strides[] = {{"a_head_stride", a.a_head_stride, d}, {"a_row_stride", a.a_row_stride, d},
                 {"b_head_stride", a.b_head_stride, d}, {"b_row_stride", a.b_row_stride, d},
                 {"out_head_stride", a.out_head_stride, d}, {"out_row_stride", a.out_row_stride, d}};
  for (const auto& s : strides) {
    if (Status st = check_stride(s.field, s.value, s.least); !st) return st;
  }
  if (a.lse_head_stride != 0 && a.lse_head_stride < a.rows) {
    return bad_argument("lse_head_stride", std::to_string(a.lse_head_stride) + " is not allowed; allowed: 0 (= rows) or at least rows=" + std::to_string(a.rows));
  }
  return {};
}

MergeParams make_merge_params(const MergeArgs& a) {
  MergeParams m{};
  m.o_a = reinterpret_cast<const void*>(a.o_a);
  m.o_b = reinterpret_cast<const void*>(a.o_b);
  m.o_out = reinterpret_cast<void*>(a.o_out);
  m.lse_a = reinterpret_cast<const float*>(a.lse_a);
  m.lse_b = reinterpret_cast<const float*>(a.lse_b);
  m.lse_out = reinterpret_cast<float*>(a.lse_out);
  m.a_row_stride = a.a_row_stride, m.a_head_stride = a.a_head_stride;
  m.b_row_stride = a.b_row_stride, m.b_head_stride = a.b_head_stride;
  m.out_row_stride = a.out_row_stride, m.out_head_stride = a.out_head_stride;
  m.lse_head_stride = a.lse_head_stride != 0 ? a.lse_head_stride : a.rows;
  m.rows = a.rows, m.heads = a.heads;
  m.float32_states = a.float32_states, m.float32_out = a.float32_out;
  return m;
}

LaunchShape merge_launch_shape(const MergeArgs& a) { return warp_per_row_shape(uint64_t(a.rows) * uint64_t(a.heads)); }

Status launch_merge_states(const DriverApi& api, CUfunction merge, const KernelConfig& c, const MergeArgs& a, CUstream stream,
                           bool pdl) {
  if (Status st = validate_merge_args(c, a); !st) return st;
  if (merge == nullptr) return Error::make(ErrorCode::kInternal, "split_kv kernel loaded without its merge entry point");
  MergeParams params = make_merge_params(a);
  void* args[] = {&params};
  LaunchShape shape = merge_launch_shape(a);
  shape.programmatic = pdl;
  return launch_kernel(api, merge, shape, stream, args);
}

}  // namespace flashjit
