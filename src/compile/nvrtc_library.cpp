#include "compile/nvrtc_library.hpp"

#include <cuda.h>  // CUDA_VERSION: the toolkit whose nvrtc.h this was built against
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.hpp"

namespace flashjit {
namespace {

// How to get a usable NVRTC, at the end of every message that says there is none.
std::string way_out() {
  return "; compiling needs NVRTC " + std::to_string(built_nvrtc_major()) + ".x: pip install 'nvidia-cuda-nvrtc==" +
         built_nvrtc_version() + ".*', or a CUDA " + std::to_string(built_nvrtc_major()) + " toolkit, or set " +
         kNvrtcLibraryEnv + " to its libnvrtc.so." + std::to_string(built_nvrtc_major()) +
         " (kernels already in the cache load without it)";
}

Error unavailable(const std::string& what) { return Error::make(ErrorCode::kDriverUnavailable, what + way_out()); }

std::string dl_error_text() {
  const char* text = dlerror();
  return text ? text : "unknown dlerror";
}

}  // namespace

std::string nvrtc_search_folders() {
  Dl_info self{};
  void* handle = nullptr;
  if (dladdr(reinterpret_cast<void*>(&nvrtc_search_folders), &self) && self.dli_fname) {
    handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }
  if (!handle) handle = dlopen(nullptr, RTLD_LAZY);  // this code is in the executable
  if (!handle) return "the dynamic loader's search path";
  std::string folders;
  Dl_serinfo size{};
  if (dlinfo(handle, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size >= sizeof(Dl_serinfo)) {
    std::unique_ptr<char[]> storage(new char[size.dls_size]);
    auto* info = reinterpret_cast<Dl_serinfo*>(storage.get());
    *info = size;  // dls_size and dls_cnt tell RTLD_DI_SERINFO how much room there is
    if (dlinfo(handle, RTLD_DI_SERINFO, info) == 0) {
      for (unsigned i = 0; i < info->dls_cnt; ++i) {
        std::string folder = info->dls_serpath[i].dls_name;
        if (folder.size() > 1 && folder.back() == '/') folder.pop_back();
        folders += (folders.empty() ? "" : ", ") + folder;
      }
    }
  }
  dlclose(handle);
  return folders.empty() ? "the dynamic loader's search path" : folders + " and the ld.so cache";
}

namespace {

// Step 1: the library itself.
Result<void*> open_library(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error::make(ErrorCode::kDriverUnavailable, dl_error_text());  // it names the path
  return handle;
}

// Step 2: every function, by its plain name (NVRTC's exports carry no version suffix).
template <class Fn>
void resolve(void* handle, Fn& slot, const char* name, std::string* missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!slot && missing->empty()) *missing = name;
}

std::string resolve_functions(void* handle, NvrtcApi& api) {
  std::string missing;
  resolve(handle, api.nvrtcVersion, "nvrtcVersion", &missing);
  resolve(handle, api.nvrtcGetErrorString, "nvrtcGetErrorString", &missing);
  resolve(handle, api.nvrtcCreateProgram, "nvrtcCreateProgram", &missing);
  resolve(handle, api.nvrtcDestroyProgram, "nvrtcDestroyProgram", &missing);
  resolve(handle, api.nvrtcCompileProgram, "nvrtcCompileProgram", &missing);
  resolve(handle, api.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", &missing);
  resolve(handle, api.nvrtcGetProgramLog, "nvrtcGetProgramLog", &missing);
  resolve(handle, api.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", &missing);
  resolve(handle, api.nvrtcGetCUBIN, "nvrtcGetCUBIN", &missing);
  return missing;
}

// One candidate: opened, resolved and of the major version the headers describe, or why not.
Result<NvrtcApi> load(const std::string& path) {
  auto handle = open_library(path);
  if (!handle) return handle.take_error();
  NvrtcApi api;
  if (std::string missing = resolve_functions(*handle, api); !missing.empty()) {
    dlclose(*handle);  // nothing of it was called
    return Error::make(ErrorCode::kDriverUnavailable, path + " is not NVRTC: it exports no " + missing);
  }
  if (api.nvrtcVersion(&api.major, &api.minor) != NVRTC_SUCCESS) {
    return Error::make(ErrorCode::kDriverUnavailable, path + ": nvrtcVersion failed");
  }
  // NOTES: flashjit's options and sources are written for the NVRTC major its headers came with;
  // another major may reject them (and its C API is only promised within a major).
  if (api.major != built_nvrtc_major()) {
    return Error::make(ErrorCode::kDriverUnavailable, path + " is NVRTC " + std::to_string(api.major) +
                                                          "." + std::to_string(api.minor) + "; flashjit was built against NVRTC " +
                                                          built_nvrtc_version());
  }
  api.library = path;
  if (link_map* map = nullptr; dlinfo(*handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    api.file = map->l_name;
  }
  return api;
}

Result<NvrtcApi> load_process_wide() {
  if (const char* path = std::getenv(kNvrtcLibraryEnv); path && *path) {
    auto api = load(path);
    if (api) return api;
    // A bare name is searched for as the default ones are; a path is only itself.
    const std::string searched = std::strchr(path, '/') ? "" : "; searched " + nvrtc_search_folders();
    return unavailable("NVRTC not loaded from $" + std::string(kNvrtcLibraryEnv) + " (" + api.error().message + searched + ")");
  }
  // Each default name in turn; the message keeps why each failed, and where a bare name was looked for.
  std::string why;
  for (const std::string& name : default_nvrtc_libraries()) {
    auto api = load(name);
    if (api) return api;
    why += (why.empty() ? "" : "; ") + api.error().message;
  }
  return unavailable("NVRTC not found (" + why + "; searched " + nvrtc_search_folders() + ")");
}

}  // namespace

const std::vector<std::string>& default_nvrtc_libraries() {
  static const std::vector<std::string> names = {"libnvrtc.so." + std::to_string(built_nvrtc_major()), "libnvrtc.so"};
  return names;
}

int built_nvrtc_major() { return CUDA_VERSION / 1000; }

std::string built_nvrtc_version() {
  return std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
}

Result<NvrtcApi> load_nvrtc_from(const std::string& path) {
  auto api = load(path);
  if (!api) return unavailable("NVRTC not loaded (" + api.error().message + ")");
  return api;
}

Result<const NvrtcApi*> nvrtc() {
  // NOTES: allocated and never freed, like the driver's table: a compile running while the process
  // exits still finds it.
  static const Result<NvrtcApi>* loaded = [] {
    auto* result = new Result<NvrtcApi>(load_process_wide());
    if (result->ok()) {
      logger().info("NVRTC loaded: {} ({}, {}.{})", (*result)->library, (*result)->file, (*result)->major, (*result)->minor);
    } else {
      logger().info("{}", result->error().message);
    }
    return result;
  }();
  if (!loaded->ok()) return loaded->error();
  return &loaded->value();
}

}  // namespace flashjit
