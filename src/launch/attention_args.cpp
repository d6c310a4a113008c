#include "launch/attention_args.hpp"

#include <cmath>
#include <string>

namespace flashjit {
namespace {

Error bad(const std::string& field, const std::string& what) { return Error::invalid_argument(field, field + ": " + what); }

std::string hex(uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)value);
  return buf;
}

Status check_pointer(const char* name, uint64_t ptr) {
  if (ptr == 0) return bad(name, "null device pointer");
  if (ptr % 16 != 0) return bad(name, "pointer " + hex(ptr) + " is not 16-byte aligned (TMA needs 16-byte aligned rows)");
  return {};
}

// TMA takes byte strides that are multiples of 16 and below 2^40.
Status check_strides(const std::string& tensor, const TensorStrides& s) {
  const std::pair<const char*, int64_t> strides[] = {{"batch", s.batch}, {"row", s.row}, {"head", s.head}};
  for (auto [name, value] : strides) {
    const std::string field = tensor + "_strides." + name;
    if (value <= 0) return bad(field, std::to_string(value) + " is not allowed; strides are positive element counts");
    if (value % 8 != 0) return bad(field, std::to_string(value) + " elements is not a multiple of 8 (16 bytes), which TMA needs");
    if (value >= (int64_t(1) << 39)) return bad(field, std::to_string(value) + " elements is too large (TMA strides are below 2^40 bytes)");
  }
  return {};
}

Status check_extent(const char* field, int value, int max_value, const char* what) {
  if (value < 1 || value > max_value) {
    return bad(field, std::to_string(value) + " is not allowed; allowed: 1.." + std::to_string(max_value) + what);
  }
  return {};
}

}  // namespace

TensorStrides contiguous_bshd(int seqlen, int heads, int head_dim) {
  return {int64_t(seqlen) * heads * head_dim, int64_t(heads) * head_dim, head_dim};
}

uint64_t attention_query_blocks(const KernelConfig& c, const AttentionArgs& a) {
  const uint64_t m_blocks = (uint64_t(a.seqlen_q) + c.spec.block_m - 1) / c.spec.block_m;
  const uint64_t cluster = uint64_t(c.spec.cluster);
  return (m_blocks + cluster - 1) / cluster * cluster;
}

uint64_t attention_tile_count(const KernelConfig& c, const AttentionArgs& a) {
  return attention_query_blocks(c, a) * uint64_t(a.heads_q) * uint64_t(a.batch);
}

Status validate_attention_args(const KernelConfig& config, const AttentionArgs& a) {
  // Shapes: heads and batch within 16 bits (the LSE and tensor-map index math), and the tiles
  // (query blocks x heads x batch) within a 1-D grid (checked below, once the seqlens are known).
  if (Status st = check_extent("batch", a.batch, 65535, ""); !st) return st;
  if (Status st = check_extent("heads_q", a.heads_q, 65535, ""); !st) return st;
  if (Status st = check_extent("heads_kv", a.heads_kv, a.heads_q, " (at most heads_q)"); !st) return st;
  if (a.heads_q % a.heads_kv != 0) {
    return bad("heads_kv", std::to_string(a.heads_kv) + " does not divide heads_q=" + std::to_string(a.heads_q) + " (MHA, GQA and MQA need heads_q % heads_kv == 0)");
  }
  if (Status st = check_extent("seqlen_q", a.seqlen_q, 0x7fffffff - 256, ""); !st) return st;
  if (Status st = check_extent("seqlen_k", a.seqlen_k, 0x7fffffff - 256, ""); !st) return st;
  if (const uint64_t tiles = attention_tile_count(config, a); tiles > 0x7fffffff) {
    return bad("batch", "batch x heads_q x query blocks (seqlen_q / " + std::to_string(config.spec.block_m) + ") = " +
                            std::to_string(tiles) + " tiles; allowed: at most 2^31 - 1 (one grid dimension)");
  }
  // Pointers and strides as TMA takes them.
  const std::pair<const char*, uint64_t> pointers[] = {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"o", a.o}};
  for (auto [name, ptr] : pointers) {
    if (Status st = check_pointer(name, ptr); !st) return st;
  }
  if (a.lse % 4 != 0) return bad("lse", "pointer " + hex(a.lse) + " is not 4-byte aligned");
  const std::pair<const char*, const TensorStrides*> strides[] = {
      {"q", &a.q_strides}, {"k", &a.k_strides}, {"v", &a.v_strides}, {"o", &a.o_strides}};
  for (auto [name, s] : strides) {
    if (Status st = check_strides(name, *s); !st) return st;
  }
  // NOTES: the kernel subtracts max(S) * scale as the row maximum, which holds for positive scales only.
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale < 0) {
    return bad("softmax_scale", std::to_string(a.softmax_scale) + " is not allowed; allowed: a finite positive scale, or 0 for 1/sqrt(head_dim)");
  }
  return {};
}

}  // namespace flashjit
