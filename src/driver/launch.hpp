// One kernel launch through cuLaunchKernelEx. The hot path: no allocation, no synchronisation.
#pragma once
#include "driver/cuda_driver.hpp"

namespace flashjit {

struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1;                        // threads per block (1-D blocks)
  unsigned dynamic_smem_bytes = 0;             // must not exceed what the kernel was loaded with
  unsigned cluster_x = 1, cluster_y = 1, cluster_z = 1;  // thread-block cluster; 1x1x1 = none
  // Programmatic dependent launch: the kernel may start before the previous kernel in the stream
  // completes; it must wait (griddepcontrol.wait) before it touches memory that kernel uses.
  bool programmatic = false;

  bool has_cluster() const { return cluster_x > 1 || cluster_y > 1 || cluster_z > 1; }
};

// Checks the shape (kInvalidArgument naming the field): every extent at least 1, each grid
// extent a multiple of the cluster extent. Allocates only when it returns an error.
Status validate_launch_shape(const LaunchShape& shape);

// Launches `function` on `stream` with `args` (one pointer per kernel parameter, as cuLaunchKernelEx
// takes them). The cluster attribute is passed only when the cluster has more than one block, the
// programmatic stream serialization attribute only when shape.programmatic.
Status launch_kernel(const DriverApi& api, CUfunction function, const LaunchShape& shape, CUstream stream,
                     void** args);

}  // namespace flashjit
