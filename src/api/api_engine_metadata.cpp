// Exported: flashjit_check_engine_metadata and flashjit_check_engine_metadata_host: the engine's
// device metadata checked off the hot path (launch/engine_metadata.hpp holds the rules).
#include <cstring>
#include <vector>

#include "api/api_status.hpp"
#include "api/kernel.hpp"
#include "api/launch_args.hpp"
#include "launch/engine_metadata.hpp"
#include "spec/attention_spec.hpp"

using namespace flashjit;
using namespace flashjit::api;

namespace {

// Host copies of the metadata arrays, read by `copy` (device or host memory).
struct MetadataCopies {
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k, seqused_k, block_table;
  std::vector<uint32_t> tile_counter, merge_counters;
  std::vector<float> sinks, alibi_slopes;
  EngineMetadata view() const {
    return {cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, tile_counter, merge_counters, sinks, alibi_slopes};
  }
};

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

template <class Copy>
ApiStatus read_metadata(const KernelConfig& config, const AttentionArgs& args, MetadataCopies* out, Copy copy) {
  if (config.spec.dynamic_schedule && args.decode.workspace != 0) {  // validated: present and aligned
    out->tile_counter.resize(2);
    if (ApiStatus st = copy("args.workspace", args.decode.workspace, out->tile_counter.data(), 2 * sizeof(uint32_t)); !st.ok()) return st;
  }
  if (const int64_t words = merge_counter_words(config, args); words > 0 && args.decode.workspace != 0) {
    out->merge_counters.resize(size_t(words));
    if (ApiStatus st = copy("args.workspace", args.decode.workspace + merge_counters_offset(config), out->merge_counters.data(), size_t(words) * sizeof(uint32_t));
        !st.ok()) {
      return st;
    }
  }
  const EngineMetadataSizes sizes = engine_metadata_sizes(args);
  const struct {
    const char* field;
    uint64_t address;
    int64_t count;
    std::vector<int32_t>* to;
  } arrays[] = {{"args.cu_seqlens_q", args.engine.cu_seqlens_q, sizes.cu_seqlens_q, &out->cu_seqlens_q},
                {"args.cu_seqlens_k", args.engine.cu_seqlens_k, sizes.cu_seqlens_k, &out->cu_seqlens_k},
                {"args.seqused_k", args.engine.seqused_k, sizes.seqused_k, &out->seqused_k},
                {"args.block_table", args.engine.block_table, sizes.block_table, &out->block_table}};
  for (const auto& a : arrays) {
    a.to->resize(size_t(a.count));
    if (a.count == 0) continue;
    if (ApiStatus st = copy(a.field, a.address, a.to->data(), size_t(a.count) * sizeof(int32_t)); !st.ok()) return st;
  }
  // Sinks (float32, or bf16 widened here) and ALiBi slopes (float32).
  out->sinks.resize(size_t(sizes.sinks));
  if (sizes.sinks > 0 && args.features.sinks_bf16) {
    std::vector<uint16_t> bits(size_t(sizes.sinks));
    if (ApiStatus st = copy("args.sinks", args.features.sinks, bits.data(), bits.size() * sizeof(uint16_t)); !st.ok()) return st;
    for (size_t h = 0; h < bits.size(); ++h) out->sinks[h] = bf16_to_float(bits[h]);
  } else if (sizes.sinks > 0) {
    if (ApiStatus st = copy("args.sinks", args.features.sinks, out->sinks.data(), out->sinks.size() * sizeof(float)); !st.ok()) return st;
  }
  out->alibi_slopes.resize(size_t(sizes.alibi_slopes));
  if (sizes.alibi_slopes > 0) {
    if (ApiStatus st = copy("args.alibi_slopes", args.features.alibi_slopes, out->alibi_slopes.data(), out->alibi_slopes.size() * sizeof(float));
        !st.ok()) {
      return st;
    }
  }
  return {};
}

ApiStatus check_with(const KernelConfig& config, const flashjit_attention_args_t* in, auto copy) {
  AttentionArgs args;
  if (ApiStatus st = to_attention_args(in, config, &args); !st.ok()) return st;
  if (ApiStatus st = validate_launch_args(config, args); !st.ok()) return st;
  MetadataCopies copies;
  if (ApiStatus st = read_metadata(config, args, &copies, copy); !st.ok()) return st;
  if (Status st = check_engine_metadata(config, args, copies.view()); !st.ok()) return as_args_error(st.take_error());
  return {};
}

ApiStatus check_on_device(flashjit_kernel_s& kernel, const flashjit_attention_args_t* in) {
  const DriverApi& api = *kernel.api;
  if (CUresult r = api.cuCtxPushCurrent(kernel.cu_context); r != CUDA_SUCCESS) {
    return ApiStatus::make(FLASHJIT_ERROR_DRIVER, "kernel", "cuCtxPushCurrent failed: " + describe(api, r));
  }
  auto from_device = [&](const char* field, uint64_t address, void* to, size_t bytes) -> ApiStatus {
    if (CUresult r = api.cuMemcpyDtoH(to, CUdeviceptr(address), bytes); r != CUDA_SUCCESS) {
      return ApiStatus::make(FLASHJIT_ERROR_DRIVER, field, std::string(field) + ": cuMemcpyDtoH of " + std::to_string(bytes) +
                                                               " bytes failed: " + describe(api, r));
    }
    return {};
  };
  ApiStatus status = check_with(kernel.config(), in, from_device);
  CUcontext popped = nullptr;
  api.cuCtxPopCurrent(&popped);
  return status;
}

ApiStatus check_on_host(const char* spec_text, const flashjit_attention_args_t* in) {
  auto spec = parse_spec(spec_text);
  if (!spec) return spec.take_error();
  auto config = make_config(*spec);
  if (!config) return config.take_error();
  auto from_host = [](const char*, uint64_t address, void* to, size_t bytes) -> ApiStatus {
    std::memcpy(to, reinterpret_cast<const void*>(address), bytes);
    return {};
  };
  return check_with(*config, in, from_host);
}

}  // namespace

extern "C" {

flashjit_status_t flashjit_check_engine_metadata(flashjit_kernel_t kernel, const flashjit_attention_args_t* args) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!kernel) return null_argument("kernel");
    if (!args) return null_argument("args");
    return check_on_device(*kernel, args);
  });
}

flashjit_status_t flashjit_check_engine_metadata_host(const char* spec, const flashjit_attention_args_t* args) {
  return guarded(__func__, [&]() -> ApiStatus {
    if (!spec) return null_argument("spec");
    if (!args) return null_argument("args");
    return check_on_host(spec, args);
  });
}

}  // extern "C"
