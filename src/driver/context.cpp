#include "driver/context.hpp"

#include "common/log.hpp"

namespace flashjit {

Result<ScopedContext> ScopedContext::enter(const DriverApi& api, CUcontext context) {
  if (Status s = check(api, api.cuCtxPushCurrent(context), "cuCtxPushCurrent"); !s) return s.take_error();
  return ScopedContext(&api);
}

ScopedContext::~ScopedContext() {
  if (!api_ || driver_shut_down()) return;
  CUcontext popped = nullptr;
  CUresult r = api_->cuCtxPopCurrent(&popped);
  if (r != CUDA_SUCCESS && !note_deinitialized(r)) {
    logger().warn("cuCtxPopCurrent failed: {}", describe(*api_, r));
  }
}

Result<PrimaryContext> PrimaryContext::retain(const DriverApi& api, int ordinal) {
  CUdevice device = 0;
  if (Status s = check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet"); !s) return s.take_error();
  CUcontext context = nullptr;
  if (Status s = check(api, api.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain"); !s) {
    return s.take_error();
  }
  return PrimaryContext(&api, device, context);
}

PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept
    : api_(other.api_), device_(other.device_), context_(other.context_) {
  other.api_ = nullptr;
  other.context_ = nullptr;
}

PrimaryContext::~PrimaryContext() {
  if (!api_ || driver_shut_down()) return;
  CUresult r = api_->cuDevicePrimaryCtxRelease(device_);
  if (r != CUDA_SUCCESS && !note_deinitialized(r)) {
    logger().warn("cuDevicePrimaryCtxRelease failed: {}", describe(*api_, r));
  }
}

Result<CUcontext> current_context(const DriverApi& api) {
  CUcontext context = nullptr;
  if (Status s = check(api, api.cuCtxGetCurrent(&context), "cuCtxGetCurrent"); !s) return s.take_error();
  return context;
}

Result<CUcontext> stream_context(const DriverApi& api, CUstream stream) {
  CUcontext context = nullptr;
  if (Status s = check(api, api.cuStreamGetCtx(stream, &context), "cuStreamGetCtx"); !s) return s.take_error();
  return context;
}

}  // namespace flashjit
