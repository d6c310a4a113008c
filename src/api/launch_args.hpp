// The C launch arguments -> the core AttentionArgs, checked on the way: the struct_size rule, the
// defined flags, the 64-bit lengths in range, head_dim equal to the kernel's, the masks' and score
// modifiers' ranges (api/feature_args.hpp); and then the core checks (pointers, strides, shapes,
// the features' spec keys). Errors name the field as the caller spells it ("args.q_strides.row").
// Pure: no driver call; allocates only when it fails.
#pragma once
#include <string>

#include "api/api_status.hpp"
#include "config/kernel_config.hpp"
#include "flashjit/flashjit.h"
#include "launch/attention_args.hpp"

namespace flashjit::api {

// The first published flashjit_attention_args_t (ABI 1): what struct_size must at least be.
inline constexpr uint32_t kAttentionArgsMinSize = 256;

// Reads and checks `in` for a kernel of `config` into *out: everything but the core checks, which
// the launch path runs only for arguments it has not seen before (see params_cache.hpp).
ApiStatus to_attention_args(const flashjit_attention_args_t* in, const KernelConfig& config, AttentionArgs* out);

// The core checks (validate_attention_args: shapes, engine and split inputs, the features' spec
// keys and ranges, pointers, strides), errors renamed to the caller's fields.
ApiStatus validate_launch_args(const KernelConfig& config, const AttentionArgs& args);

// A value the API layer refuses by itself: "args.<field>: <value> is not allowed; allowed: <allowed>".
ApiStatus args_not_allowed(const char* field, const std::string& value, const std::string& allowed);

// A core error about the launch arguments, renamed to the caller's field ("q_strides.row" ->
// "args.q_strides.row").
ApiStatus as_args_error(Error error);

}  // namespace flashjit::api
