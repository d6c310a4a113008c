#include "source/wgmma_shapes.hpp"

#include <cstdint>

#include "../../templates/tile_layout.cuh"  // the element-type seam: the wgmma's k

namespace flashjit {
namespace {

std::string operand_list(int first, int count) {
  std::string out = "{";
  for (int i = 0; i < count; ++i) out += (i ? ", %" : "%") + std::to_string(first + i);
  return out + "}";
}

std::string accumulator_constraints(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? ", " : "") + std::string("\"+f\"(d[") + std::to_string(i) + "])";
  return out;
}

// One wgmma wrapper: D[64 x n] (+)= A[64 x 16] * B[16 x n], B from shared memory (K-major, or
// MN-major when b_mn_major), A from shared memory (a descriptor) or from four registers. With
// zero_first the wrapper takes `accumulate` (0: D = A B, else D += A B); without, it accumulates.
struct WgmmaForm {
  bool a_in_registers;
  bool b_mn_major;
  bool zero_first;
};

std::string wrapper(const char* name, int n, const char* type, WgmmaForm form) {
  const int acc = n / 2;
  const int b_operand = acc + (form.a_in_registers ? 4 : 1);
  // e4m3 (dtype=e4m3): k32 steps, both operands K-major (no transpose operands).
  const bool fp8 = std::string(type) == "e4m3";
  const std::string a_param = form.a_in_registers ? "const uint32_t (&a)[4]" : "uint64_t desc_a";
  const std::string a_operand = form.a_in_registers ? operand_list(acc, 4) : "%" + std::to_string(acc);
  const std::string a_input = form.a_in_registers ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3])" : "\"l\"(desc_a)";
  // Operand list tail: scale-d, scale-a, scale-b, [trans-a (A in shared memory only),] trans-b.
  const std::string tail = fp8 ? std::string(form.zero_first ? "p" : "1") + ", 1, 1"
                               : std::string(form.zero_first ? "p" : "1") + ", 1, 1, " + (form.a_in_registers ? "" : "0, ") +
                                     (form.b_mn_major ? "1" : "0");
  std::string s = "FJ_DEVICE void " + std::string(name) + "(float (&d)[" + std::to_string(acc) + "], " + a_param +
                  ", uint64_t desc_b" + (form.zero_first ? ", int accumulate" : "") + ") {\n  asm volatile(\n";
  if (form.zero_first) s += "    \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(b_operand + 1) + ", 0;\\n\"\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k" + std::to_string(element_type(fp8).k_step) + ".f32." + type + "." +
       type + " \"\n";
  s += "    \"" + operand_list(0, acc) + ", " + a_operand + ", %" + std::to_string(b_operand) + ", " + tail +
       (form.zero_first ? ";\\n}\\n\"\n" : ";\\n\"\n");
  s += "    : " + accumulator_constraints(acc) + "\n    : " + a_input + ", \"l\"(desc_b)" +
       (form.zero_first ? ", \"r\"(accumulate)" : "") + ");\n}\n";
  return s;
}

}  // namespace

std::string render_wgmma_shapes(const KernelConfig& c) {
  const char* type = c.spec.dtype == DType::kBf16 ? "bf16" : c.spec.dtype == DType::kFp16 ? "f16" : "e4m3";
  std::string out = "// ---- wgmma shapes of this variant (generated) ----\n";
  // Q K^T: Q from shared memory or registers, K K-major; P V: P from registers, V MN-major (e4m3:
  // K-major, V transposed in shared memory).
  out += wrapper("wgmma_qk", c.spec.block_n, type, {false, false, true});
  out += wrapper("wgmma_qk_rs", c.spec.block_n, type, {true, false, true});
  out += wrapper("wgmma_pv", c.v_cols, type, {true, !c.spec.fp8_operands(), false});
  // v_in_k=1: the second consumer warpgroup's P V reads P from shared memory (the first one's).
  // Rendered for every variant, as the kernel's paired consumers are compiled in each (used in none other).
  out += wrapper("wgmma_pv_ss", c.v_cols, type, {false, !c.spec.fp8_operands(), false});
  // pack2 / unpack2: O's 16-bit type (and P's, and the FP8 cache's widened K/V: the queries' type).
  const bool bf16_out = c.spec.output_dtype() == DType::kBf16;
  out += bf16_out ? "FJ_DEVICE uint32_t pack2(float lo, float hi) { return pack_bf16x2(lo, hi); }\n"
                  : "FJ_DEVICE uint32_t pack2(float lo, float hi) { return pack_fp16x2(lo, hi); }\n";
  out += bf16_out ? "FJ_DEVICE FloatPair unpack2(uint32_t v) { return unpack_bf16x2(v); }\n"
                  : "FJ_DEVICE FloatPair unpack2(uint32_t v) { return unpack_fp16x2(v); }\n";
  return out;
}

}  // namespace flashjit
