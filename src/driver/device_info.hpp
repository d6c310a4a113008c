// What the driver says about the machine: driver version and, per device, the numbers the kernels
// and the tool's `doctor` command care about.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "driver/cuda_driver.hpp"

namespace flashjit {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;                  // compute capability, 9.0 for H100/H200
  int cc_minor = 0;
  int sm_count = 0;                  // multiprocessors
  int max_smem_optin_per_block = 0;  // bytes a block may opt into (232448 on H200)
  int l2_bytes = 0;
  std::size_t total_memory_bytes = 0;

  bool is_hopper() const { return cc_major == 9 && cc_minor == 0; }  // sm_90a targets exactly 9.0
};

struct SystemInfo {
  int driver_version = 0;  // 13000 = CUDA 13.0
  std::string library;     // the libcuda that was loaded
  std::vector<DeviceInfo> devices;
};

Result<DeviceInfo> query_device(const DriverApi& api, int ordinal);
Result<std::vector<DeviceInfo>> list_devices(const DriverApi& api);

// Driver version and every device, through the process-wide driver (kDriverUnavailable without one).
Result<SystemInfo> query_system();

// One line per device for `doctor`:
// "<ordinal>: <name>, sm_<major><minor>, <n> SMs, <k> KB smem/block (opt-in), <m> MB L2, <g> GiB".
std::string describe_device(const DeviceInfo& device);

}  // namespace flashjit
