// check(): a failed CUresult becomes kDriverError "<what>: <CUDA_ERROR_NAME>: <description>",
// using the table's cuGetErrorName/cuGetErrorString (fakes here).
#include <gtest/gtest.h>

#include "driver/cuda_driver.hpp"

namespace flashjit {
namespace {

CUresult fake_error_name(CUresult result, const char** name) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fake_error_string(CUresult result, const char** text) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; return CUDA_SUCCESS;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

DriverApi fake_table() {
  DriverApi api;
  api.cuGetErrorName = &fake_error_name;
  api.cuGetErrorString = &fake_error_string;
  return api;
}

TEST(DriverCheck, SuccessIsOk) {
  EXPECT_TRUE(check(fake_table(), CUDA_SUCCESS, "cuInit").ok());
  EXPECT_TRUE(check(CUDA_SUCCESS, "cuInit").ok());
}

TEST(DriverCheck, FailureNamesWhatAndTheError) {
  Status s = check(fake_table(), CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(4096 bytes)");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDriverError);
  EXPECT_EQ(s.error().message, "cuMemAlloc(4096 bytes): CUDA_ERROR_OUT_OF_MEMORY: out of memory");

  Status t = check(fake_table(), CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "cuTensorMapEncodeTiled: CUDA_ERROR_INVALID_VALUE: invalid argument");
}

TEST(DriverCheck, UnknownCodeOrNoNameFunctionsFallBackToTheNumber) {
  Status s = check(fake_table(), CUresult(12345), "cuLaunchKernelEx");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDriverError);
  EXPECT_EQ(s.error().message, "cuLaunchKernelEx: CUDA error 12345");

  Status e = check(DriverApi{}, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "cuMemAlloc: CUDA error 2");
}

TEST(DriverCheck, ProcessWideCheckReportsTheCode) {
  Status s = check(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDriverError);
  EXPECT_EQ(s.error().message.rfind("cuFuncSetAttribute: ", 0), 0u) << s.error().message;
  // With a driver: the real name; without one: the number.
  const bool named = s.error().message.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos;
  const bool numbered = s.error().message.find("CUDA error 1") != std::string::npos;
  EXPECT_TRUE(named || numbered) << s.error().message;
}

TEST(DriverCheck, VersionText) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(11040), "11.4");
  EXPECT_EQ(cuda_version_string(3020), "3.2");
}

}  // namespace
}  // namespace flashjit
