// The kernel parameters (four TMA descriptors and the scalars) last built for a kernel, keyed by
// every launch argument they depend on, so that a launch repeating earlier arguments (the usual
// case: an engine's per-layer buffers are reused every step) skips validation and the four
// cuTensorMapEncodeTiled calls.
//
// Invariants:
//  - a hit returns exactly what make_kernel_params returned for equal arguments (the key holds
//    every input of make_kernel_params other than the kernel's config and SM count, both fixed
//    per cache);
//  - no allocation, ever: a fixed array of slots inside the kernel object, filled in place;
//  - a key lives only in the kWindow slots from its hash's: a find looks there and nowhere else;
//  - no waiting: one spinlock guards the slots, taken with try-lock only. A thread that finds it
//    busy builds its parameters itself and does not store them; correctness never depends on the
//    cache, only speed does.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "launch/attention_args.hpp"
#include "launch/attention_launch.hpp"

namespace flashjit::api {

// Every field of AttentionArgs, widened so the struct has no padding (compared bytewise safely).
struct ParamsKey {
  uint64_t q = 0, k = 0, v = 0, o = 0, lse = 0;
  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0;
  int64_t strides[12] = {};
  uint32_t scale_bits = 0;
  uint32_t unused = 0;
  uint64_t engine_pointers[4] = {};  // cu_seqlens_q, cu_seqlens_k, seqused_k, block_table
  int64_t engine_extents[5] = {};    // block_table_stride, page_size, num_pages, total_q, total_k
  uint64_t workspace = 0, workspace_bytes = 0;
  int32_t max_splits = 0, split_keys = 0;
  // Masks and score modifiers: Params carries them, so arguments that differ only here differ.
  int32_t window_left = 0, window_right = 0, chunk = 0;
  uint32_t softcap_bits = 0;
  uint64_t sinks = 0, sinks_bf16 = 0, alibi_slopes = 0;
  int64_t alibi_batch_stride = 0;
  uint64_t k_scale = 0, v_scale = 0, q_scale = 0;
  int64_t scale_strides[6] = {};

  static ParamsKey of(const AttentionArgs& args);
  bool operator==(const ParamsKey&) const = default;
  uint64_t hash() const;
};
static_assert(std::has_unique_object_representations_v<ParamsKey>);

class ParamsCache {
 public:
  // NOTES: open addressing by hash over a window of kWindow slots, the least recently used one in
  // the window replaced when none is free. The direct-mapped cache it replaces (64 slots) let two
  // argument sets of one slot evict each other at every use: with an engine's 16-100 layers
  // cycling, 37-74 % of launches missed and paid validation and four tensor-map encodes (6 us of
  // the library's own time against 0.8 on a hit, fake driver; bench/NOTES.md, version 63). 128
  // slots hold 64 sets (one kernel's launches for 64 layers) without an eviction in the tests, at
  // about 140 KB per kernel.
  static constexpr std::size_t kSlots = 128;
  static constexpr std::size_t kWindow = 8;

  // Copies the cached parameters for key into *out and counts the use. False on a miss or when
  // the cache is busy.
  bool find(const ParamsKey& key, KernelParams* out);
  // Stores (replacing the window's least recently used entry when it is full). Skipped when the
  // cache is busy.
  void store(const ParamsKey& key, const KernelParams& params);

 private:
  struct Slot {
    KernelParams params;
    ParamsKey key;
    uint64_t hash = 0;
    uint64_t last_use = 0;  // 0: empty
  };
  bool try_lock() const { return !busy_.test_and_set(std::memory_order_acquire); }
  void unlock() const { busy_.clear(std::memory_order_release); }
  // Slot i (0..kWindow-1) of the window a key with this hash lives in.
  static std::size_t window_slot(uint64_t hash, std::size_t i) { return (hash + i) % kSlots; }
  // The slot holding key in its window, or kSlots. Called under the lock.
  std::size_t slot_holding(const ParamsKey& key, uint64_t hash) const;
  // The window's first free slot, else its least recently used one. Called under the lock.
  std::size_t free_or_least_recent(uint64_t hash) const;

  mutable std::atomic_flag busy_;  // clear on construction (C++20)
  uint64_t clock_ = 0;             // the last use's stamp (under the lock)
  std::array<Slot, kSlots> slots_{};
};

}  // namespace flashjit::api
