// What a flashjit_context_t is: the CUDA context kernels load into, the engine (kernel cache and
// module table) it shares with every context of the same cache settings, and its compile policy.
//
// Lifetime: the C handle and every kernel got from it hold a shared_ptr to the ContextState; the
// last one to go unloads the context's modules and releases the primary context it retained.
#pragma once
#include <memory>
#include <string>

#include "api/api_status.hpp"
#include "driver/context.hpp"
#include "driver/cuda_driver.hpp"
#include "flashjit/flashjit.h"
#include "runtime/engine.hpp"

namespace flashjit::api {

// The first published flashjit_context_options_t (ABI 1).
inline constexpr uint32_t kContextOptionsMinSize = 40;

class ContextState {
 public:
  // Checks the options, finds the device (no driver needed for FLASHJIT_DEVICE_NONE) and joins the
  // engine for the cache settings.
  static ApiStatus create(const flashjit_context_options_t& options, std::shared_ptr<ContextState>* out);
  ~ContextState();
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;

  bool has_device() const { return cu_context_ != nullptr; }
  const DriverApi* api() const { return api_; }  // null without a device
  CUcontext cu_context() const { return cu_context_; }
  int device() const { return device_; }
  int sm_count() const { return sm_count_; }  // the device's SMs; 0 without a device
  CompilePolicy policy() const { return policy_; }
  Engine& engine() const { return *engine_; }

 private:
  ContextState() = default;

  std::shared_ptr<Engine> engine_;  // NOTES: declared first, so it outlives the modules dropped below
  CompilePolicy policy_ = CompilePolicy::kJit;
  const DriverApi* api_ = nullptr;
  std::unique_ptr<PrimaryContext> primary_;  // set when we retained the device's primary context
  CUcontext cu_context_ = nullptr;
  int device_ = FLASHJIT_DEVICE_NONE;
  int sm_count_ = 0;
};

// The process's engine for these cache settings, shared while any context uses it.
std::shared_ptr<Engine> shared_engine(const EngineOptions& options);

}  // namespace flashjit::api

// The C handle.
struct flashjit_context_s {
  std::shared_ptr<flashjit::api::ContextState> state;
  std::string cache_dir;  // for flashjit_context_info_t.cache_dir
};
