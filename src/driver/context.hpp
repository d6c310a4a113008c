// Contexts: which one a call runs in. A module belongs to the context it was loaded in, so every
// load/unload names its context explicitly and pushes it for the duration (ScopedContext).
#pragma once
#include "driver/cuda_driver.hpp"

namespace flashjit {

// Makes a context current on this thread for a scope: push on enter, pop on destruction.
class ScopedContext {
 public:
  static Result<ScopedContext> enter(const DriverApi& api, CUcontext context);
  ScopedContext(ScopedContext&& other) noexcept : api_(other.api_) { other.api_ = nullptr; }
  ScopedContext& operator=(ScopedContext&&) = delete;
  ~ScopedContext();

 private:
  explicit ScopedContext(const DriverApi* api) : api_(api) {}
  const DriverApi* api_ = nullptr;  // null: nothing to pop
};

// The primary context of a device, retained for the object's lifetime (released on destruction).
class PrimaryContext {
 public:
  static Result<PrimaryContext> retain(const DriverApi& api, int ordinal);
  PrimaryContext(PrimaryContext&& other) noexcept;
  PrimaryContext& operator=(PrimaryContext&&) = delete;
  ~PrimaryContext();

  CUcontext get() const { return context_; }
  CUdevice device() const { return device_; }

 private:
  PrimaryContext(const DriverApi* api, CUdevice device, CUcontext context)
      : api_(api), device_(device), context_(context) {}
  const DriverApi* api_ = nullptr;  // null: nothing to release
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

// The calling thread's current context (null when there is none).
Result<CUcontext> current_context(const DriverApi& api);

// The context a stream belongs to (for the legacy null stream: the current context).
Result<CUcontext> stream_context(const DriverApi& api, CUstream stream);

}  // namespace flashjit
