// NVRTC, loaded at run time: dlopen("libnvrtc.so.13") once, on the first compile, every function
// flashjit calls fetched with dlsym. NVRTC is never linked, so nothing needs it but compiling: a
// process that only parses specs, reads the cache or launches cached kernels runs without it (and
// the wheel's binaries depend on no library outside manylinux's list).
//
// NOTES: dlopen searches as the loader searched for a linked NEEDED entry: LD_LIBRARY_PATH, the
// RUNPATH of the binary that holds this code (libflashjit.so's or the tool's: the toolkit it was
// built with), the ld.so cache, the system folders. A library already in the process under the
// soname (the Python package loads the nvidia-cuda-nvrtc wheel's first) is the one found.
#pragma once
#include <nvrtc.h>

#include <string>
#include <vector>

#include "common/status.hpp"

namespace flashjit {

inline constexpr const char* kNvrtcLibraryEnv = "FLASHJIT_NVRTC";  // a path (or name) to load instead
// Tried in turn without $FLASHJIT_NVRTC: the soname (toolkit, nvidia-cuda-nvrtc wheel), then the
// toolkit's development link.
const std::vector<std::string>& default_nvrtc_libraries();

// Every NVRTC function flashjit calls, typed by nvrtc.h's own declarations.
struct NvrtcApi {
  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;

  int major = 0, minor = 0;  // nvrtcVersion
  std::string library;       // what was dlopen'ed
  std::string file;          // the file the dynamic loader took for it
};

// The process-wide table: loaded once, lazily, thread-safely, from $FLASHJIT_NVRTC or the default
// names. kDriverUnavailable (as a missing CUDA driver) when none loads, is not NVRTC, or is not
// NVRTC 13: the message names what was looked for, where, and how to provide it. The error is
// kept: later calls return it again without retrying.
Result<const NvrtcApi*> nvrtc();

// One load from an explicit path or name: dlopen, resolve, check the major version. A fresh table
// each call; used by nvrtc() and by the tests. The handle of a successful load is never closed.
Result<NvrtcApi> load_nvrtc_from(const std::string& path);

// Where dlopen looks for a bare library name from this code, for messages: LD_LIBRARY_PATH's and
// the RUNPATH's folders of the binary holding it, the system folders (dlinfo's list), the ld.so cache.
std::string nvrtc_search_folders();

// The NVRTC major version flashjit was built against (its headers' toolkit): the one it loads.
int built_nvrtc_major();
// "13.0": the toolkit version of the headers flashjit was built against.
std::string built_nvrtc_version();

}  // namespace flashjit
