#include "source/wgmma_shapes.hpp"

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

// D[64 x n] (+)= A[64 x 16] * B[16 x n], A (K-major) and B (K-major) from shared memory.
std::string ss_wrapper(const char* name, int n, const char* type) {
  const int acc = n / 2;
  std::string s = "FJ_DEVICE void " + std::string(name) + "(float (&d)[" + std::to_string(acc) +
                  "], uint64_t desc_a, uint64_t desc_b, int accumulate) {\n  asm volatile(\n";
  s += "    \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(acc + 2) + ", 0;\\n\"\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + type + "." + type + " \"\n";
  s += "    \"" + operand_list(0, acc) + ", %" + std::to_string(acc) + ", %" + std::to_string(acc + 1) + ", p, 1, 1, 0, 0;\\n}\\n\"\n";
  s += "    : " + accumulator_constraints(acc) + "\n    : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n}\n";
  return s;
}

// D[64 x n] (+)= A[64 x 16] (registers) * B[16 x n] (shared memory, K-major).
std::string rs_k_major_wrapper(const char* name, int n, const char* type) {
  const int acc = n / 2;
  std::string s = "FJ_DEVICE void " + std::string(name) + "(float (&d)[" + std::to_string(acc) +
                  "], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {\n  asm volatile(\n";
  s += "    \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(acc + 5) + ", 0;\\n\"\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + type + "." + type + " \"\n";
  s += "    \"" + operand_list(0, acc) + ", " + operand_list(acc, 4) + ", %" + std::to_string(acc + 4) + ", p, 1, 1, 0;\\n}\\n\"\n";
  s += "    : " + accumulator_constraints(acc) + "\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), \"r\"(accumulate));\n}\n";
  return s;
}

// D[64 x n] += A[64 x 16] (registers) * B[16 x n] (shared memory, MN-major: trans-b = 1).
std::string rs_wrapper(const char* name, int n, const char* type) {
  const int acc = n / 2;
  std::string s = "FJ_DEVICE void " + std::string(name) + "(float (&d)[" + std::to_string(acc) +
                  "], const uint32_t (&a)[4], uint64_t desc_b) {\n  asm volatile(\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + type + "." + type + " \"\n";
  s += "    \"" + operand_list(0, acc) + ", " + operand_list(acc, 4) + ", %" + std::to_string(acc + 4) + ", 1, 1, 1, 1;\\n\"\n";
  s += "    : " + accumulator_constraints(acc) + "\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b));\n}\n";
  return s;
}

}  // namespace

std::string render_wgmma_shapes(const KernelConfig& c) {
  const char* type = c.spec.dtype == DType::kBf16 ? "bf16" : "f16";
  std::string out = "// ---- wgmma shapes of this variant (generated) ----\n";
  out += ss_wrapper("wgmma_qk", c.spec.block_n, type);
  out += rs_k_major_wrapper("wgmma_qk_rs", c.spec.block_n, type);
  out += rs_wrapper("wgmma_pv", c.v_cols, type);
  out += c.spec.dtype == DType::kBf16 ? "FJ_DEVICE uint32_t pack2(float lo, float hi) { return pack_bf16x2(lo, hi); }\n"
                                      : "FJ_DEVICE uint32_t pack2(float lo, float hi) { return pack_fp16x2(lo, hi); }\n";
  return out;
}

}  // namespace flashjit
