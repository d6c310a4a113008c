#include "verify/device_random.hpp"

#include <mutex>

#include "compile/nvrtc_compiler.hpp"
#include "driver/launch.hpp"
#include "driver/module.hpp"

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
)CUDA";

ModuleTable& fill_modules() {
  static ModuleTable* modules = new ModuleTable;  // never destroyed: modules go with drop_context
  return *modules;
}

}  // namespace

void drop_random_fill_kernels(CUcontext context) { fill_modules().drop_context(context); }

Status fill_random_normal(const DriverApi& api, CUcontext context, CUstream stream, CUdeviceptr data, uint64_t count,
                          bool bf16, uint64_t seed) {
  static std::once_flag once;
  static Result<CompiledKernel> compiled = Error::make(ErrorCode::kInternal, "not compiled");
  std::call_once(once, [] { compiled = compile_with_nvrtc({kSource, default_nvrtc_options(), "fill_random_normal", "random fill"}); });
  if (!compiled) return compiled.error();
  auto loaded = fill_modules().get_or_load(api, context, "fill_random_normal", compiled->cubin, "fill_random_normal", 0);
  if (!loaded) return loaded.take_error();
  int flag = bf16;
  void* args[] = {&data, &count, &seed, &flag};
  LaunchShape shape;
  shape.grid_x = 132 * 8;
  shape.block_x = 256;
  return launch_kernel(api, (*loaded)->function(), shape, stream, args);
}

}  // namespace flashjit
