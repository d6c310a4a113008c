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
  const FeatureInputs& f = a.features;
  key.window_left = f.window_left;
  key.window_right = f.window_right;
  key.chunk = f.chunk;
  std::memcpy(&key.softcap_bits, &f.softcap, sizeof(key.softcap_bits));
  key.sinks = f.sinks;
  key.sinks_bf16 = f.sinks_bf16;
  key.alibi_slopes = f.alibi_slopes;
  key.alibi_batch_stride = f.alibi_batch_stride;
  key.k_scale = a.fp8.k_scale;
  key.v_scale = a.fp8.v_scale;
  key.q_scale = a.fp8.q_scale;
  const int64_t scale_strides[] = {a.fp8.k_scale_batch_stride, a.fp8.k_scale_head_stride, a.fp8.v_scale_batch_stride,
                                   a.fp8.v_scale_head_stride, a.fp8.q_scale_batch_stride, a.fp8.q_scale_head_stride};
  std::memcpy(key.scale_strides, scale_strides, sizeof(scale_strides));
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

std::size_t ParamsCache::slot_holding(const ParamsKey& key, uint64_t hash) const {
  for (std::size_t i = 0; i < kWindow; ++i) {
    const std::size_t at = window_slot(hash, i);
    const Slot& slot = slots_[at];
    if (slot.last_use != 0 && slot.hash == hash && slot.key == key) return at;
  }
  return kSlots;
}

std::size_t ParamsCache::free_or_least_recent(uint64_t hash) const {
  std::size_t oldest = window_slot(hash, 0);
  for (std::size_t i = 0; i < kWindow; ++i) {
    const std::size_t at = window_slot(hash, i);
    if (slots_[at].last_use == 0) return at;
    if (slots_[at].last_use < slots_[oldest].last_use) oldest = at;
  }
  return oldest;
}

bool ParamsCache::find(const ParamsKey& key, KernelParams* out) {
  if (!try_lock()) return false;
  const std::size_t at = slot_holding(key, key.hash());
  if (at != kSlots) {
    *out = slots_[at].params;
    slots_[at].last_use = ++clock_;
  }
  unlock();
  return at != kSlots;
}

void ParamsCache::store(const ParamsKey& key, const KernelParams& params) {
  if (!try_lock()) return;
  const uint64_t hash = key.hash();
  std::size_t at = slot_holding(key, hash);  // another thread may have stored it since our miss
  if (at == kSlots) at = free_or_least_recent(hash);
  Slot& slot = slots_[at];
  slot.key = key;
  slot.params = params;
  slot.hash = hash;
  slot.last_use = ++clock_;
  unlock();
}

}  // namespace flashjit::api
