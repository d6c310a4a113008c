#include "driver/device_info.hpp"

#include <cstdio>

namespace flashjit {
namespace {

Status read_attribute(const DriverApi& api, CUdevice device, CUdevice_attribute attribute, const char* what,
                      int* out) {
  return check(api, api.cuDeviceGetAttribute(out, attribute, device), what);
}

}  // namespace

Result<DeviceInfo> query_device(const DriverApi& api, int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  CUdevice device = 0;
  if (Status s = check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet"); !s) return s.take_error();

  char name[256] = {};
  if (Status s = check(api, api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName"); !s) {
    return s.take_error();
  }
  info.name = name;

  struct Wanted {
    CUdevice_attribute attribute;
    const char* what;
    int* out;
  };
  const Wanted wanted[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(compute capability major)", &info.cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(compute capability minor)", &info.cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(multiprocessor count)", &info.sm_count},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "cuDeviceGetAttribute(max shared memory per block opt-in)",
       &info.max_smem_optin_per_block},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute(L2 cache size)", &info.l2_bytes},
  };
  for (const Wanted& w : wanted) {
    if (Status s = read_attribute(api, device, w.attribute, w.what, w.out); !s) return s.take_error();
  }

  size_t bytes = 0;
  if (Status s = check(api, api.cuDeviceTotalMem(&bytes, device), "cuDeviceTotalMem"); !s) return s.take_error();
  info.total_memory_bytes = bytes;
  return info;
}

Result<std::vector<DeviceInfo>> list_devices(const DriverApi& api) {
  int count = 0;
  if (Status s = check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return s.take_error();
  std::vector<DeviceInfo> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto device = query_device(api, ordinal);
    if (!device) return device.take_error();
    devices.push_back(std::move(*device));
  }
  return devices;
}

Result<SystemInfo> query_system() {
  auto api = driver();
  if (!api) return api.take_error();
  SystemInfo info;
  info.driver_version = (*api)->driver_version;
  info.library = (*api)->library;
  auto devices = list_devices(**api);
  if (!devices) return devices.take_error();
  info.devices = std::move(*devices);
  return info;
}

std::string describe_device(const DeviceInfo& d) {
  char line[512];
  std::snprintf(line, sizeof(line), "%d: %s, sm_%d%d, %d SMs, %d KB smem/block (opt-in), %d MB L2, %.1f GiB",
                d.ordinal, d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count, d.max_smem_optin_per_block / 1024,
                d.l2_bytes / (1024 * 1024), double(d.total_memory_bytes) / double(1ull << 30));
  return line;
}

}  // namespace flashjit
