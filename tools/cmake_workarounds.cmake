# Included through -DCMAKE_PROJECT_INCLUDE=... by tools/bootstrap.sh's cmake hints, only where needed.
# CMake 3.25.0/3.25.1 (Debian 12's) FindCUDAToolkit sets a property on CUDA::nvToolsExt without
# checking that the target exists; CUDA 12.9+ has no libnvToolsExt, so find_package(CUDAToolkit)
# stops with "set_property could not find TARGET CUDA::nvToolsExt". An empty stand-in target lets it
# pass (flashjit links only NVRTC). Fixed in CMake 3.25.2.
if(NOT TARGET CUDA::nvToolsExt)
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
endif()
