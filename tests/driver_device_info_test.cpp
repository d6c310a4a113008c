// Device info from a fake driver: every field is read from the attribute it should be.
#include <gtest/gtest.h>

#include <cstring>

#include "driver/device_info.hpp"

namespace flashjit {
namespace {

struct FakeDevices {
  static inline int count = 2;
  static inline CUresult attribute_answer = CUDA_SUCCESS;

  static CUresult get_count(int* n) {
    *n = count;
    return CUDA_SUCCESS;
  }
  static CUresult get(CUdevice* device, int ordinal) {
    *device = 10 + ordinal;
    return CUDA_SUCCESS;
  }
  static CUresult name(char* out, int length, CUdevice device) {
    std::snprintf(out, size_t(length), "Fake H200 #%d", device);
    return CUDA_SUCCESS;
  }
  static CUresult attribute(int* value, CUdevice_attribute attribute, CUdevice device) {
    switch (attribute) {
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132 + (device - 10); break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
      case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 50 * 1024 * 1024; break;
      default: *value = -1; break;
    }
    return attribute_answer;
  }
  static CUresult total_mem(size_t* bytes, CUdevice) {
    *bytes = size_t(140) << 30;
    return CUDA_SUCCESS;
  }
  static CUresult error_name(CUresult, const char** text) {
    *text = "CUDA_ERROR_INVALID_DEVICE";
    return CUDA_SUCCESS;
  }
};

DriverApi fake_driver() {
  DriverApi api;
  api.cuDeviceGetCount = &FakeDevices::get_count;
  api.cuDeviceGet = &FakeDevices::get;
  api.cuDeviceGetName = &FakeDevices::name;
  api.cuDeviceGetAttribute = &FakeDevices::attribute;
  api.cuDeviceTotalMem = &FakeDevices::total_mem;
  api.cuGetErrorName = &FakeDevices::error_name;
  return api;
}

TEST(DeviceInfo, ReadsEveryFieldFromItsAttribute) {
  FakeDevices::attribute_answer = CUDA_SUCCESS;
  auto devices = list_devices(fake_driver());
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  const DeviceInfo& d = (*devices)[1];
  EXPECT_EQ(d.ordinal, 1);
  EXPECT_EQ(d.name, "Fake H200 #11");
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_EQ(d.cc_minor, 0);
  EXPECT_TRUE(d.is_hopper());
  EXPECT_EQ(d.sm_count, 133);
  EXPECT_EQ(d.max_smem_optin_per_block, 232448);
  EXPECT_EQ(d.l2_bytes, 50 * 1024 * 1024);
  EXPECT_EQ(d.total_memory_bytes, size_t(140) << 30);
  EXPECT_EQ(describe_device(d), "1: Fake H200 #11, sm_90, 133 SMs, 227 KB smem/block (opt-in), 50 MB L2, 140.0 GiB");
}

TEST(DeviceInfo, AttributeFailureNamesTheAttribute) {
  FakeDevices::attribute_answer = CUDA_ERROR_INVALID_DEVICE;
  auto device = query_device(fake_driver(), 0);
  FakeDevices::attribute_answer = CUDA_SUCCESS;
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().code, ErrorCode::kDriverError);
  EXPECT_NE(device.error().message.find("compute capability major"), std::string::npos) << device.error().message;
  EXPECT_NE(device.error().message.find("CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << device.error().message;
}

TEST(DeviceInfo, SystemQueryWithoutDriverSaysWhy) {
  auto system = query_system();
  if (system.ok()) GTEST_SKIP() << "a CUDA driver is present: " << system->devices.size() << " device(s)";
  EXPECT_EQ(system.error().code, ErrorCode::kDriverUnavailable);
  EXPECT_NE(system.error().message.find("libcuda"), std::string::npos) << system.error().message;
}

}  // namespace
}  // namespace flashjit
