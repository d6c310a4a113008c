// launch_kernel with a fake cuLaunchKernelEx: the config it builds (grid, block, shared memory,
// stream, arguments, and the cluster attribute only for clusters), and shape validation.
#include <gtest/gtest.h>

#include "driver/launch.hpp"

namespace flashjit {
namespace {

struct SeenLaunch {
  int calls = 0;
  CUlaunchConfig config{};
  CUlaunchAttribute attribute{};
  CUlaunchAttribute attributes[4]{};
  CUfunction function = nullptr;
  void** args = nullptr;
  void** extra = nullptr;
  CUresult answer = CUDA_SUCCESS;
};
SeenLaunch g_seen;

CUresult fake_launch(const CUlaunchConfig* config, CUfunction function, void** args, void** extra) {
  ++g_seen.calls;
  g_seen.config = *config;
  if (config->numAttrs > 0) g_seen.attribute = config->attrs[0];
  for (unsigned i = 0; i < config->numAttrs && i < 4; ++i) g_seen.attributes[i] = config->attrs[i];
  g_seen.function = function;
  g_seen.args = args;
  g_seen.extra = extra;
  return g_seen.answer;
}

CUresult fake_error_name(CUresult, const char** name) {
  *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  return CUDA_SUCCESS;
}

DriverApi fake_driver() {
  DriverApi api;
  api.cuLaunchKernelEx = &fake_launch;
  api.cuGetErrorName = &fake_error_name;
  return api;
}

const CUfunction kFunction = reinterpret_cast<CUfunction>(std::uintptr_t(0xf00));
const CUstream kStream = reinterpret_cast<CUstream>(std::uintptr_t(0x5700));

TEST(Launch, PlainLaunchHasNoAttributes) {
  g_seen = SeenLaunch{};
  int value = 7;
  void* args[] = {&value};
  LaunchShape shape;
  shape.grid_x = 32;
  shape.grid_y = 16;
  shape.grid_z = 2;
  shape.block_x = 384;
  shape.dynamic_smem_bytes = 200 * 1024;
  ASSERT_TRUE(launch_kernel(fake_driver(), kFunction, shape, kStream, args).ok());
  ASSERT_EQ(g_seen.calls, 1);
  const CUlaunchConfig& c = g_seen.config;
  EXPECT_EQ(c.gridDimX, 32u);
  EXPECT_EQ(c.gridDimY, 16u);
  EXPECT_EQ(c.gridDimZ, 2u);
  EXPECT_EQ(c.blockDimX, 384u);
  EXPECT_EQ(c.blockDimY, 1u);
  EXPECT_EQ(c.blockDimZ, 1u);
  EXPECT_EQ(c.sharedMemBytes, 200u * 1024);
  EXPECT_EQ(c.hStream, kStream);
  EXPECT_EQ(c.numAttrs, 0u);
  EXPECT_EQ(g_seen.function, kFunction);
  EXPECT_EQ(g_seen.args, args);
  EXPECT_EQ(g_seen.extra, nullptr);
}

TEST(Launch, ClusterAddsTheClusterAttribute) {
  g_seen = SeenLaunch{};
  LaunchShape shape;
  shape.grid_x = 8;
  shape.grid_y = 3;
  shape.block_x = 128;
  shape.cluster_x = 2;
  ASSERT_TRUE(launch_kernel(fake_driver(), kFunction, shape, nullptr, nullptr).ok());
  ASSERT_EQ(g_seen.config.numAttrs, 1u);
  EXPECT_EQ(g_seen.attribute.id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(g_seen.attribute.value.clusterDim.x, 2u);
  EXPECT_EQ(g_seen.attribute.value.clusterDim.y, 1u);
  EXPECT_EQ(g_seen.attribute.value.clusterDim.z, 1u);

  shape.cluster_x = 1;
  shape.cluster_y = 3;
  ASSERT_TRUE(launch_kernel(fake_driver(), kFunction, shape, nullptr, nullptr).ok());
  ASSERT_EQ(g_seen.config.numAttrs, 1u);
  EXPECT_EQ(g_seen.attribute.value.clusterDim.y, 3u);
}

// PDL is an attribute of its own, alone or beside the cluster's.
TEST(Launch, ProgrammaticAddsTheStreamSerializationAttribute) {
  g_seen = SeenLaunch{};
  LaunchShape shape;
  shape.grid_x = 8;
  shape.block_x = 128;
  shape.programmatic = true;
  ASSERT_TRUE(launch_kernel(fake_driver(), kFunction, shape, nullptr, nullptr).ok());
  ASSERT_EQ(g_seen.config.numAttrs, 1u);
  EXPECT_EQ(g_seen.attributes[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(g_seen.attributes[0].value.programmaticStreamSerializationAllowed, 1);

  shape.cluster_x = 2;
  ASSERT_TRUE(launch_kernel(fake_driver(), kFunction, shape, nullptr, nullptr).ok());
  ASSERT_EQ(g_seen.config.numAttrs, 2u);
  EXPECT_EQ(g_seen.attributes[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(g_seen.attributes[0].value.clusterDim.x, 2u);
  EXPECT_EQ(g_seen.attributes[1].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(g_seen.attributes[1].value.programmaticStreamSerializationAllowed, 1);
}

TEST(Launch, BadShapesAreRejectedBeforeTheDriver) {
  g_seen = SeenLaunch{};
  struct Case {
    LaunchShape shape;
    const char* field;
    const char* needle;
  };
  LaunchShape ok;
  ok.grid_x = 4;
  ok.block_x = 128;
  Case cases[] = {{ok, "grid_x", "must be at least 1"},
                  {ok, "block_x", "must be at least 1"},
                  {ok, "cluster_z", "must be at least 1"},
                  {ok, "grid_x", "not a multiple of the cluster extent 3"}};
  cases[0].shape.grid_x = 0;
  cases[1].shape.block_x = 0;
  cases[2].shape.cluster_z = 0;
  cases[3].shape.cluster_x = 3;
  for (const Case& c : cases) {
    Status s = launch_kernel(fake_driver(), kFunction, c.shape, nullptr, nullptr);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().field, c.field);
    EXPECT_NE(s.error().message.find(c.needle), std::string::npos) << s.error().message;
  }
  EXPECT_EQ(g_seen.calls, 0);
}

TEST(Launch, DriverFailureIsChecked) {
  g_seen = SeenLaunch{};
  g_seen.answer = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  LaunchShape shape;
  Status s = launch_kernel(fake_driver(), kFunction, shape, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kDriverError);
  EXPECT_EQ(s.error().message, "cuLaunchKernelEx: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
}

}  // namespace
}  // namespace flashjit
