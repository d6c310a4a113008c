#include "api/params_cache.hpp"

#include <cstring>

namespace flashjit::api {

ParamsKey ParamsKey::of(const AttentionArgs& a) {
  ParamsKey key;
  key.q = a.q;
  key.k = a.k;
  key.v = a.v;
  key.o = a.o;
  key.lse = a.lse;
  key.batch = a.batch;
  key.seqlen_q = a.seqlen_q;
  key.seqlen_k = a.seqlen_k;
  key.heads_q = a.heads_q;
  key.heads_kv = a.heads_kv;
  const TensorStrides* strides[] = {&a.q_strides, &a.k_strides, &a.v_strides, &a.o_strides};
  for (int i = 0; i < 4; ++i) {
    key.strides[3 * i + 0] = strides[i]->batch;
    key.strides[3 * i + 1] = strides[i]->row;
    key.strides[3 * i + 2] = strides[i]->head;
  }
  std::memcpy(&key.scale_bits, &a.softmax_scale, sizeof(key.scale_bits));
  const EngineInputs& e = a.engine;
  const uint64_t pointers[] = {e.cu_seqlens_q, e.cu_seqlens_k, e.seqused_k, e.block_table};
  const int64_t extents[] = {e.block_table_stride, e.page_size, e.num_pages, e.total_q, e.total_k};
  std::memcpy(key.engine_pointers, pointers, sizeof(pointers));
  std::memcpy(key.engine_extents, extents, sizeof(extents));
  key.workspace = a.decode.workspace;
  key.workspace_bytes = a.decode.workspace_bytes;
  key.max_splits = a.decode.max_splits;
  key.split_keys = a.decode.split_keys;
  return key;
}

uint64_t ParamsKey::hash() const {
  // FNV-1a over the 64-bit words, then a final mix so the low bits (the slot) depend on all of them.
  uint64_t words[sizeof(ParamsKey) / 8];
  std::memcpy(words, this, sizeof(words));
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t w : words) h = (h ^ w) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}
static_assert(sizeof(ParamsKey) % 8 == 0);

bool ParamsCache::find(const ParamsKey& key, KernelParams* out) const {
  if (!try_lock()) return false;
  const Slot& slot = slots_[slot_of(key)];
  const bool hit = slot.filled && slot.key == key;
  if (hit) *out = slot.params;
  unlock();
  return hit;
}

void ParamsCache::store(const ParamsKey& key, const KernelParams& params) {
  if (!try_lock()) return;
  Slot& slot = slots_[slot_of(key)];
  slot.key = key;
  slot.params = params;
  slot.filled = true;
  unlock();
}

}  // namespace flashjit::api
