// flashjit doctor: what this machine offers: driver, devices and their arch, NVRTC, cache directory.
#include <cstdio>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "cache/cache_dir.hpp"
#include "cache/disk_store.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "compile/nvrtc_library.hpp"
#include "driver/device_info.hpp"
#include "tools/flashjit/commands.hpp"

namespace flashjit::tool {

int run_doctor() {
  // 1. Driver and devices (absent is a finding, not a failure: compiling works without them).
  auto system = query_system();
  auto compiler = nvrtc();  // absent is a finding too: cache hits load without it
  // 2. Cache directory and whether it takes writes.
  CacheDirSource source = CacheDirSource::kNone;
  const std::string dir = resolve_cache_dir(cache_dir_flag(), &source);
  bool writable = false;
  std::string cache_problem;
  if (dir.empty()) {
    cache_problem = "no directory resolved: memory only";
  } else if (auto store = DiskStore::open({dir, 0}); store) {
    writable = (*store)->writable();
  } else {
    cache_problem = store.error().message;
  }
  if (json_option()) {
    llvm::json::Array devices;
    if (system) {
      for (const auto& d : system->devices) {
        devices.push_back(llvm::json::Object{{"ordinal", d.ordinal}, {"name", d.name}, {"arch", "sm_" + std::to_string(d.cc_major * 10 + d.cc_minor)},
                                             {"sm_count", d.sm_count}, {"supported", d.is_hopper()}});
      }
    }
    llvm::json::Object out{{"driver", system ? cuda_version_string(system->driver_version) : std::string()},
                           {"driver_error", system ? std::string() : system.error().message},
                           {"devices", std::move(devices)},
                           {"nvrtc", compiler ? nvrtc_version() : std::string()},
                           {"nvrtc_error", compiler ? std::string() : compiler.error().message},
                           {"target", kTargetArch},
                           {"cache_dir", dir},
                           {"cache_dir_source", cache_dir_source_name(source)},
                           {"cache_writable", writable},
                           {"cache_problem", cache_problem}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
    return kExitOk;
  }
  if (system) {
    std::printf("driver      CUDA %s (%s)\n", cuda_version_string(system->driver_version).c_str(), system->library.c_str());
    for (const auto& d : system->devices) {
      std::printf("device      %s%s\n", describe_device(d).c_str(), d.is_hopper() ? "" : "  (not sm_90: flashjit kernels need Hopper)");
    }
    if (system->devices.empty()) std::printf("device      none\n");
  } else {
    std::printf("driver      none: %s\n", system.error().message.c_str());
  }
  if (compiler) {
    std::printf("nvrtc       %s (%s, target %s)\n", nvrtc_version().c_str(), (*compiler)->file.c_str(), kTargetArch);
  } else {
    std::printf("nvrtc       none: %s\n", compiler.error().message.c_str());
  }
  std::printf("cache       %s (from %s), %s\n", dir.empty() ? "-" : dir.c_str(), cache_dir_source_name(source),
              !cache_problem.empty() ? cache_problem.c_str() : writable ? "writable" : "read-only: hits only");
  return kExitOk;
}

}  // namespace flashjit::tool
