#include "verify/device_random.hpp"

#include "driver/launch.hpp"
#include "verify/builtin_kernel.hpp"

namespace flashjit {
namespace {

const char* kSource = R"CUDA(
typedef unsigned long long u64;
__device__ unsigned hash(u64 x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return (unsigned)x;
}
extern "C" __global__ void fill_random_normal(unsigned short* out, u64 count, u64 seed, int bf16) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < count; i += (u64)gridDim.x * blockDim.x) {
    const float u1 = (hash(seed ^ (2 * i)) + 1.0f) * 2.3283064e-10f, u2 = hash(seed ^ (2 * i + 1)) * 2.3283064e-10f;
    const float x = sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2);
    unsigned short bits;
    if (bf16) { unsigned u = __float_as_uint(x); bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16); }
    else { asm("{\n.reg .f16 h;\ncvt.rn.f16.f32 h, %1;\nmov.b16 %0, h;\n}" : "=h"(bits) : "f"(x)); }
    out[i] = bits;
  }
}
extern "C" __global__ void fill_random_e4m3(unsigned char* out, u64 count, u64 seed, float inv_scale) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < count; i += (u64)gridDim.x * blockDim.x) {
    const float u1 = (hash(seed ^ (2 * i)) + 1.0f) * 2.3283064e-10f, u2 = hash(seed ^ (2 * i + 1)) * 2.3283064e-10f;
    const float x = sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2) * inv_scale;
    unsigned short pair;  // the second source's code in the low byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(x));
    out[i] = (unsigned char)pair;
  }
}
)CUDA";

BuiltinKernel& fill_kernel() {
  static BuiltinKernel* kernel = new BuiltinKernel(kSource, "fill_random_normal", "random fill");  // see BuiltinKernel
  return *kernel;
}
BuiltinKernel& fill_e4m3_kernel() {
  static BuiltinKernel* kernel = new BuiltinKernel(kSource, "fill_random_e4m3", "random e4m3 fill");  // see BuiltinKernel
  return *kernel;
}

}  // namespace

void drop_random_fill_kernels(CUcontext context) {
  fill_kernel().drop(context);
  fill_e4m3_kernel().drop(context);
}

Status fill_random_normal(const DriverApi& api, CUcontext context, CUstream stream, CUdeviceptr data, uint64_t count,
                          bool bf16, uint64_t seed) {
  auto loaded = fill_kernel().load(api, context);
  if (!loaded) return loaded.take_error();
  int flag = bf16;
  void* args[] = {&data, &count, &seed, &flag};
  LaunchShape shape;
  shape.grid_x = 132 * 8;
  shape.block_x = 256;
  return launch_kernel(api, (*loaded)->function(), shape, stream, args);
}

Status fill_random_e4m3(const DriverApi& api, CUcontext context, CUstream stream, CUdeviceptr data, uint64_t count, float scale,
                        uint64_t seed) {
  auto loaded = fill_e4m3_kernel().load(api, context);
  if (!loaded) return loaded.take_error();
  float inv_scale = 1.0f / scale;
  void* args[] = {&data, &count, &seed, &inv_scale};
  LaunchShape shape;
  shape.grid_x = 132 * 8;
  shape.block_x = 256;
  return launch_kernel(api, (*loaded)->function(), shape, stream, args);
}

}  // namespace flashjit
