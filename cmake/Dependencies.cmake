# Third-party dependencies, gathered into one interface target: flashjit_deps.
# Every one is found here or the configure step stops with what to install.

find_package(Threads REQUIRED)

# NVRTC's and the CUDA driver's headers (nvrtc.h, and cuda.h for the driver's types); neither library is
# linked, both are dlopen'ed (src/compile/nvrtc_library.cpp, src/driver/cuda_driver.cpp).
# NOTES: CMake 3.25.0/3.25.1's FindCUDAToolkit asks for CUDA::nvToolsExt, which CUDA 13 no longer has.
if(CMAKE_VERSION VERSION_LESS 3.25.2 AND NOT TARGET CUDA::nvToolsExt)
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
endif()
find_package(CUDAToolkit REQUIRED)
# NOTES: NVRTC's library is found only for its folder, which goes into the binaries' RUNPATH (where
# dlopen looks first after LD_LIBRARY_PATH), and for the tests that run a compile.
find_library(NVRTC_LIB NAMES nvrtc HINTS ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
find_path(NVRTC_INCLUDE nvrtc.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
if(NOT NVRTC_LIB OR NOT NVRTC_INCLUDE)
  message(FATAL_ERROR "NVRTC not found: install the CUDA toolkit (13.x) or set CUDAToolkit_ROOT")
endif()

# LLVM ADT/Support, static. Debian/Ubuntu: llvm-14-dev (or newer).
set(FLASHJIT_LLVM_ROOT "" CACHE PATH "LLVM install prefix holding lib/libLLVMSupport.a")
find_path(LLVM_SUPPORT_INCLUDE llvm/Support/SHA256.h
  HINTS ${FLASHJIT_LLVM_ROOT}/include /usr/lib/llvm-18/include /usr/lib/llvm-17/include
        /usr/lib/llvm-16/include /usr/lib/llvm-15/include /usr/lib/llvm-14/include)
get_filename_component(_llvm_prefix ${LLVM_SUPPORT_INCLUDE} DIRECTORY)
find_library(LLVM_SUPPORT_LIB NAMES libLLVMSupport.a HINTS ${_llvm_prefix}/lib NO_DEFAULT_PATH)
find_library(LLVM_DEMANGLE_LIB NAMES libLLVMDemangle.a HINTS ${_llvm_prefix}/lib NO_DEFAULT_PATH)
if(NOT LLVM_SUPPORT_INCLUDE OR NOT LLVM_SUPPORT_LIB)
  message(FATAL_ERROR "LLVM Support (static) not found: apt-get install llvm-14-dev")
endif()

# spdlog header-only; Debian's spdlog uses an external fmt, which we also take header-only.
find_path(SPDLOG_INCLUDE spdlog/spdlog.h)
find_path(FMT_INCLUDE fmt/format.h)
if(NOT SPDLOG_INCLUDE OR NOT FMT_INCLUDE)
  message(FATAL_ERROR "spdlog/fmt headers not found: apt-get install libspdlog-dev libfmt-dev")
endif()

add_library(flashjit_deps INTERFACE)
target_include_directories(flashjit_deps SYSTEM INTERFACE
  ${LLVM_SUPPORT_INCLUDE} ${SPDLOG_INCLUDE} ${FMT_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
target_compile_definitions(flashjit_deps INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)
target_link_libraries(flashjit_deps INTERFACE
  ${LLVM_SUPPORT_LIB} ${LLVM_DEMANGLE_LIB} Threads::Threads ${CMAKE_DL_LIBS})
# LLVM Support pulls zlib when it was enabled in its build.
find_library(ZLIB_SO NAMES z)
if(ZLIB_SO)
  target_link_libraries(flashjit_deps INTERFACE ${ZLIB_SO})
endif()
# NOTES: and terminfo, for whether a terminal takes colours; a stand-in answers "no" instead of
# linking libtinfo.so.6, which a manylinux wheel may not need (src/link/no_terminfo.c). A static
# archive after LLVM's: its functions are linked only where LLVM Support refers to them.
add_library(flashjit_no_terminfo STATIC ${CMAKE_SOURCE_DIR}/src/link/no_terminfo.c)
target_link_libraries(flashjit_deps INTERFACE flashjit_no_terminfo)
set(CMAKE_BUILD_RPATH ${CUDAToolkit_LIBRARY_DIR})
set(CMAKE_INSTALL_RPATH ${CUDAToolkit_LIBRARY_DIR})
