// What a flashjit_kernel_t is: a prepared kernel loaded in its context's CUDA context, everything
// the launch path needs resolved up front (function, config, driver table), and its own cache of
// encoded launch parameters.
#pragma once
#include <memory>
#include <string>

#include "api/context.hpp"
#include "api/params_cache.hpp"
#include "driver/module.hpp"
#include "runtime/engine.hpp"

struct flashjit_kernel_s {
  std::shared_ptr<flashjit::api::ContextState> context;  // keeps the CUDA context and engine alive
  flashjit::PreparedKernel prepared;
  std::shared_ptr<flashjit::LoadedKernel> loaded;
  // Resolved once, read on every launch.
  const flashjit::DriverApi* api = nullptr;
  CUcontext cu_context = nullptr;
  CUfunction function = nullptr;
  std::string resolved_spec;  // for flashjit_kernel_info_t.spec
  int sm_count = 0;           // the device's SMs: the persistent grid (0 if unknown: one CTA per tile)
  flashjit::api::ParamsCache params;

  const flashjit::KernelConfig& config() const { return prepared.config; }
};
