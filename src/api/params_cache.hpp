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

  static ParamsKey of(const AttentionArgs& args);
  bool operator==(const ParamsKey&) const = default;
  uint64_t hash() const;
};
static_assert(std::has_unique_object_representations_v<ParamsKey>);

class ParamsCache {
 public:
  // NOTES: direct-mapped by hash. 64 slots hold one kernel's launches for 64 distinct argument
  // sets (an engine's layers x buffers) at ~48 KB per kernel handle.
  static constexpr std::size_t kSlots = 64;

  // Copies the cached parameters for key into *out. False on a miss or when the cache is busy.
  bool find(const ParamsKey& key, KernelParams* out) const;
  // Stores (replacing the slot's previous entry). Skipped when the cache is busy.
  void store(const ParamsKey& key, const KernelParams& params);

 private:
  struct Slot {
    KernelParams params;
    ParamsKey key;
    bool filled = false;
  };
  bool try_lock() const { return !busy_.test_and_set(std::memory_order_acquire); }
  void unlock() const { busy_.clear(std::memory_order_release); }
  static std::size_t slot_of(const ParamsKey& key) { return key.hash() % kSlots; }

  mutable std::atomic_flag busy_;  // clear on construction (C++20)
  std::array<Slot, kSlots> slots_{};
};

}  // namespace flashjit::api
