#include "driver/launch.hpp"

#include <string>

namespace flashjit {
namespace {

Error bad_extent(const char* field, unsigned value, const char* allowed) {
  return Error::invalid_argument(field, std::string(field) + " = " + std::to_string(value) + "; " + allowed);
}

Status check_divides(const char* field, unsigned grid, unsigned cluster) {
  if (grid % cluster == 0) return Status::Ok();
  return Error::invalid_argument(field, std::string(field) + " = " + std::to_string(grid) +
                                            " is not a multiple of the cluster extent " + std::to_string(cluster));
}

}  // namespace

Status validate_launch_shape(const LaunchShape& s) {
  const struct {
    const char* field;
    unsigned value;
  } extents[] = {{"grid_x", s.grid_x},       {"grid_y", s.grid_y},       {"grid_z", s.grid_z},
                 {"block_x", s.block_x},     {"cluster_x", s.cluster_x}, {"cluster_y", s.cluster_y},
                 {"cluster_z", s.cluster_z}};
  for (const auto& e : extents) {
    if (e.value == 0) return bad_extent(e.field, e.value, "must be at least 1");
  }
  if (Status st = check_divides("grid_x", s.grid_x, s.cluster_x); !st) return st;
  if (Status st = check_divides("grid_y", s.grid_y, s.cluster_y); !st) return st;
  return check_divides("grid_z", s.grid_z, s.cluster_z);
}

Status launch_kernel(const DriverApi& api, CUfunction function, const LaunchShape& shape, CUstream stream,
                     void** args) {
  if (Status s = validate_launch_shape(shape); !s) return s;

  // NOTES: the attribute array lives on this stack frame; cuLaunchKernelEx reads it during the
  // call only, so nothing needs to outlive it (no static array shared between threads).
  CUlaunchAttribute attributes[2] = {};
  CUlaunchConfig config = {};
  config.gridDimX = shape.grid_x;
  config.gridDimY = shape.grid_y;
  config.gridDimZ = shape.grid_z;
  config.blockDimX = shape.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shape.dynamic_smem_bytes;
  config.hStream = stream;
  unsigned n = 0;
  if (shape.has_cluster()) {
    attributes[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[n].value.clusterDim.x = shape.cluster_x;
    attributes[n].value.clusterDim.y = shape.cluster_y;
    attributes[n].value.clusterDim.z = shape.cluster_z;
    ++n;
  }
  if (shape.programmatic) {
    attributes[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  config.attrs = n > 0 ? attributes : nullptr;
  config.numAttrs = n;
  return check(api, api.cuLaunchKernelEx(&config, function, args, nullptr), "cuLaunchKernelEx");
}

}  // namespace flashjit
