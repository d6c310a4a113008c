// What a flashjit_kernel_t is: the kernels prepared for one spec (its own, and for long sequences
// perhaps another: config/length_choice.hpp), loaded in its context's CUDA context, everything the
// launch path needs resolved up front (functions, configs, driver table), each kernel with its own
// cache of encoded launch parameters.
#pragma once
#include <memory>
#include <string>

#include "api/context.hpp"
#include "api/params_cache.hpp"
#include "driver/module.hpp"
#include "launch/kernel_choice.hpp"
#include "runtime/engine.hpp"

namespace flashjit::api {

// One kernel a handle may launch. Built in place (the parameter cache does not move).
struct KernelVariant {
  flashjit::PreparedKernel prepared;
  std::shared_ptr<flashjit::LoadedKernel> loaded;
  CUfunction function = nullptr;
  CUfunction combine = nullptr;  // split_kv: the second kernel (templates/split_combine.cuh)
  CUfunction merge = nullptr;    // split_kv: the merge of two attention states
  std::string resolved_spec;  // every tile field filled in
  ParamsCache params;

  const flashjit::KernelConfig& config() const { return prepared.config; }
};

}  // namespace flashjit::api

struct flashjit_kernel_s {
  std::shared_ptr<flashjit::api::ContextState> context;  // keeps the CUDA context and engine alive
  flashjit::api::KernelVariant main;
  std::unique_ptr<flashjit::api::KernelVariant> long_sequences;  // null: `main` runs at every length
  flashjit::LongSequenceRule long_rule;
  // Resolved once, read on every launch.
  const flashjit::DriverApi* api = nullptr;
  CUcontext cu_context = nullptr;
  int sm_count = 0;  // the device's SMs: the persistent grid (0 if unknown: one CTA per tile)

  const flashjit::KernelConfig& config() const { return main.config(); }
  // The kernel a launch of these (converted, not yet validated) arguments runs.
  flashjit::api::KernelVariant& variant_for(const flashjit::AttentionArgs& args) {
    return long_sequences && flashjit::runs_long_variant(long_rule, main.config(), args, sm_count) ? *long_sequences : main;
  }
};
