// Source stage: config -> CUDA source. Renders the embedded templates with the config's constants
// and the wgmma shapes it needs. Deterministic: the same config gives byte-identical source.
#pragma once
#include <string>

#include "config/kernel_config.hpp"

namespace flashjit {

std::string render_attention_source(const KernelConfig& config);

// Text of one embedded template by file name (empty if there is none).
std::string_view embedded_template(std::string_view name);

}  // namespace flashjit
