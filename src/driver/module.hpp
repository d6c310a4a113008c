// Loaded kernels: a cubin loaded as a module into one context, its entry point looked up, its
// dynamic shared memory limit raised once. ModuleTable keeps one per (context, key) and loads each
// at most once, however many threads ask at the same time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driver/cuda_driver.hpp"

namespace flashjit {

class LoadedKernel {
 public:
  // What a loaded kernel consists of. Built by load(); tests may build one by hand.
  struct Parts {
    CUcontext context = nullptr;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::vector<CUfunction> more;  // the module's further entry points, where named (in order)
    std::string name;
    int dynamic_smem_bytes = 0;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, set at load
    int num_regs = 0;            // CU_FUNC_ATTRIBUTE_NUM_REGS, read back at load
    int local_size_bytes = 0;    // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (spills, stack), read back at load
  };

  // Loads `cubin` into `context` (pushed for the duration) and prepares entry point `kernel_name`
  // for launches with `dynamic_smem_bytes` of dynamic shared memory; and entry points
  // `more_names` (kernels of the same module, e.g. split-KV's combine and merge). With
  // `max_shared_carveout` the entry point asks for the largest shared-memory carveout (kernels
  // that run two CTAs an SM).
  static Result<std::shared_ptr<LoadedKernel>> load(const DriverApi& api, CUcontext context, std::string_view cubin,
                                                    const std::string& kernel_name, int dynamic_smem_bytes,
                                                    const std::vector<std::string>& more_names = {},
                                                    bool max_shared_carveout = false);

  // Takes ownership of parts.module; unloads it on destruction when api is not null.
  LoadedKernel(const DriverApi* api, Parts parts) : api_(api), parts_(std::move(parts)) {}
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();

  CUfunction function() const { return parts_.function; }
  // more_names[i]'s function (null where not loaded).
  CUfunction more(size_t i) const { return i < parts_.more.size() ? parts_.more[i] : nullptr; }
  CUcontext context() const { return parts_.context; }
  CUmodule module() const { return parts_.module; }
  const std::string& name() const { return parts_.name; }
  int dynamic_smem_bytes() const { return parts_.dynamic_smem_bytes; }
  int num_regs() const { return parts_.num_regs; }
  int local_size_bytes() const { return parts_.local_size_bytes; }

 private:
  const DriverApi* api_ = nullptr;
  Parts parts_;
};

using KernelResult = Result<std::shared_ptr<LoadedKernel>>;

// (context, key) -> loaded kernel. Thread-safe. The first caller for a pair runs the loader; other
// callers for the same pair wait for its result; callers for other pairs are not held up. A failed
// load is handed to everyone who waited on it and then forgotten, so a later call tries again.
class ModuleTable {
 public:
  using Loader = std::function<KernelResult(CUcontext context)>;

  KernelResult get_or_load(CUcontext context, const std::string& key, const Loader& load);

  // The usual loader: LoadedKernel::load of a cubin.
  KernelResult get_or_load(const DriverApi& api, CUcontext context, const std::string& key, std::string_view cubin,
                           const std::string& kernel_name, int dynamic_smem_bytes,
                           const std::vector<std::string>& more_names = {}, bool max_shared_carveout = false);

  // The kernel if it is loaded (null when absent, still loading, or failed).
  std::shared_ptr<LoadedKernel> find(CUcontext context, const std::string& key) const;

  // Forgets every kernel of a context (call before destroying that context). Returns how many.
  std::size_t drop_context(CUcontext context);

  // Entries, loaded or loading.
  std::size_t size() const;

 private:
  struct Slot;
  // NOTES: the context as an integer: std::pair's operator< on unrelated pointers is unspecified.
  using SlotKey = std::pair<std::uintptr_t, std::string>;
  static SlotKey slot_key_of(CUcontext context, const std::string& key);

  static KernelResult run_loader(const Loader& load, CUcontext context);
  void forget(const SlotKey& slot_key, const std::shared_ptr<Slot>& slot);

  mutable std::mutex mutex_;
  std::map<SlotKey, std::shared_ptr<Slot>> slots_;
};

}  // namespace flashjit
