#include "driver/module.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <vector>

#include "common/log.hpp"
#include "driver/context.hpp"

namespace flashjit {
namespace {

Status validate_load(std::string_view cubin, const std::string& kernel_name, int dynamic_smem_bytes) {
  if (cubin.empty()) return Error::invalid_argument("cubin", "cubin for '" + kernel_name + "' is empty");
  if (kernel_name.empty()) return Error::invalid_argument("kernel_name", "kernel name is empty");
  if (dynamic_smem_bytes < 0) {
    return Error::invalid_argument("dynamic_smem_bytes", "dynamic shared memory " + std::to_string(dynamic_smem_bytes) +
                                                             " bytes is negative");
  }
  return Status::Ok();
}

// NOTES: the driver parses the cubin as an ELF image in place; a view into the middle of a larger
// buffer may be misaligned for its 8-byte fields, so such an image is copied first.
const void* aligned_image(std::string_view cubin, std::vector<std::uint64_t>* copy) {
  if (reinterpret_cast<std::uintptr_t>(cubin.data()) % alignof(std::uint64_t) == 0) return cubin.data();
  copy->resize((cubin.size() + 7) / 8);
  std::memcpy(copy->data(), cubin.data(), cubin.size());
  return copy->data();
}

Status read_function_attribute(const DriverApi& api, CUfunction function, CUfunction_attribute attribute,
                               const std::string& what, int* out) {
  return check(api, api.cuFuncGetAttribute(out, attribute, function), what.c_str());
}

}  // namespace

Result<std::shared_ptr<LoadedKernel>> LoadedKernel::load(const DriverApi& api, CUcontext context, std::string_view cubin,
                                                         const std::string& kernel_name, int dynamic_smem_bytes,
                                                         const std::vector<std::string>& more_names, bool max_shared_carveout) {
  if (Status s = validate_load(cubin, kernel_name, dynamic_smem_bytes); !s) return s.take_error();
  auto scope = ScopedContext::enter(api, context);
  if (!scope) return scope.take_error();

  Parts parts;
  parts.context = context;
  parts.name = kernel_name;
  parts.dynamic_smem_bytes = dynamic_smem_bytes;
  std::vector<std::uint64_t> copy;
  if (Status s = check(api, api.cuModuleLoadData(&parts.module, aligned_image(cubin, &copy)),
                       ("cuModuleLoadData(" + kernel_name + ")").c_str());
      !s) {
    return s.take_error();
  }
  // From here the kernel owns the module: any early return below unloads it.
  auto kernel = std::make_shared<LoadedKernel>(&api, std::move(parts));
  Parts& p = kernel->parts_;

  if (Status s = check(api, api.cuModuleGetFunction(&p.function, p.module, kernel_name.c_str()),
                       ("cuModuleGetFunction(" + kernel_name + ")").c_str());
      !s) {
    return s.take_error();
  }
  for (const std::string& name : more_names) {
    CUfunction f = nullptr;
    if (Status s = check(api, api.cuModuleGetFunction(&f, p.module, name.c_str()), ("cuModuleGetFunction(" + name + ")").c_str()); !s) {
      return s.take_error();
    }
    p.more.push_back(f);
  }
  // NOTES: set once here, never per launch: the limit belongs to the function, and setting it on
  // the launch path would be a driver call per launch for nothing.
  if (Status s = check(api,
                       api.cuFuncSetAttribute(p.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              dynamic_smem_bytes),
                       ("cuFuncSetAttribute(" + kernel_name + ", max dynamic shared memory " +
                        std::to_string(dynamic_smem_bytes) + " bytes)")
                           .c_str());
      !s) {
    return s.take_error();
  }
  // NOTES: the carveout is a hint the driver otherwise takes from one CTA's need; two CTAs an SM
  // (ctas_per_sm=2) need the whole 228 KB configuration, or only one fits. Only they ask: the
  // other kernels keep the driver's choice they were measured with.
  if (max_shared_carveout) {
    if (Status s = check(api,
                         api.cuFuncSetAttribute(p.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                                CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
                         ("cuFuncSetAttribute(" + kernel_name + ", shared memory carveout)").c_str());
        !s) {
      return s.take_error();
    }
  }
  if (Status s = read_function_attribute(api, p.function, CU_FUNC_ATTRIBUTE_NUM_REGS,
                                         "cuFuncGetAttribute(" + kernel_name + ", registers)", &p.num_regs);
      !s) {
    return s.take_error();
  }
  if (Status s = read_function_attribute(api, p.function, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                         "cuFuncGetAttribute(" + kernel_name + ", local size)", &p.local_size_bytes);
      !s) {
    return s.take_error();
  }
  logger().debug("loaded {} into context {}: {} registers, {} bytes local, {} bytes dynamic smem", kernel_name,
                 static_cast<void*>(context), p.num_regs, p.local_size_bytes, dynamic_smem_bytes);
  return kernel;
}

LoadedKernel::~LoadedKernel() {
  // NOTES: at process exit the driver may already be gone (CUDA_ERROR_DEINITIALIZED); its modules
  // went with it, so there is nothing to unload and no call to make.
  if (!api_ || !parts_.module || driver_shut_down()) return;
  CUresult r = api_->cuCtxPushCurrent(parts_.context);
  if (r != CUDA_SUCCESS) {
    if (!note_deinitialized(r)) logger().warn("unloading {}: cuCtxPushCurrent: {}", parts_.name, describe(*api_, r));
    return;
  }
  r = api_->cuModuleUnload(parts_.module);
  if (r != CUDA_SUCCESS && !note_deinitialized(r)) {
    logger().warn("unloading {}: cuModuleUnload: {}", parts_.name, describe(*api_, r));
  }
  CUcontext popped = nullptr;
  r = api_->cuCtxPopCurrent(&popped);
  if (r != CUDA_SUCCESS && !note_deinitialized(r)) {
    logger().warn("unloading {}: cuCtxPopCurrent: {}", parts_.name, describe(*api_, r));
  }
}

// ---- ModuleTable ----

struct ModuleTable::Slot {
  std::shared_future<KernelResult> result;
};

ModuleTable::SlotKey ModuleTable::slot_key_of(CUcontext context, const std::string& key) {
  return {reinterpret_cast<std::uintptr_t>(context), key};
}

KernelResult ModuleTable::run_loader(const Loader& load, CUcontext context) {
  // NOTES: nothing in flashjit throws, but a throwing loader (bad_alloc) must not leave waiters
  // blocked on a promise that is never fulfilled.
  try {
    return load(context);
  } catch (const std::exception& e) {
    return Error::make(ErrorCode::kInternal, std::string("kernel loader threw: ") + e.what());
  } catch (...) {
    return Error::make(ErrorCode::kInternal, "kernel loader threw");
  }
}

KernelResult ModuleTable::get_or_load(CUcontext context, const std::string& key, const Loader& load) {
  const SlotKey slot_key = slot_key_of(context, key);
  std::promise<KernelResult> promise;
  std::shared_ptr<Slot> slot;
  bool is_loader = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = slots_.try_emplace(slot_key, nullptr);
    if (inserted) {
      it->second = std::make_shared<Slot>();
      it->second->result = promise.get_future().share();
      is_loader = true;
    }
    slot = it->second;
  }
  // NOTES: the load runs outside the table lock, so loads of other pairs proceed meanwhile;
  // callers of this pair block on the shared future instead.
  if (!is_loader) return slot->result.get();

  KernelResult result = run_loader(load, context);
  if (!result.ok()) forget(slot_key, slot);
  promise.set_value(result);
  return result;
}

KernelResult ModuleTable::get_or_load(const DriverApi& api, CUcontext context, const std::string& key,
                                      std::string_view cubin, const std::string& kernel_name, int dynamic_smem_bytes,
                                      const std::vector<std::string>& more_names, bool max_shared_carveout) {
  return get_or_load(context, key, [&](CUcontext ctx) {
    return LoadedKernel::load(api, ctx, cubin, kernel_name, dynamic_smem_bytes, more_names, max_shared_carveout);
  });
}

void ModuleTable::forget(const SlotKey& slot_key, const std::shared_ptr<Slot>& slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(slot_key);
  // Only our own slot: drop_context may have removed it and a new caller put a fresh one there.
  if (it != slots_.end() && it->second == slot) slots_.erase(it);
}

std::shared_ptr<LoadedKernel> ModuleTable::find(CUcontext context, const std::string& key) const {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(slot_key_of(context, key));
    if (it == slots_.end()) return nullptr;
    slot = it->second;
  }
  if (slot->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  const KernelResult& result = slot->result.get();
  return result.ok() ? result.value() : nullptr;
}

std::size_t ModuleTable::drop_context(CUcontext context) {
  std::vector<std::shared_ptr<Slot>> dropped;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uintptr_t id = slot_key_of(context, {}).first;
  for (auto it = slots_.lower_bound(SlotKey{id, std::string()}); it != slots_.end() && it->first.first == id;) {
    dropped.push_back(std::move(it->second));
    it = slots_.erase(it);
  }
  return dropped.size();
}

std::size_t ModuleTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

}  // namespace flashjit
