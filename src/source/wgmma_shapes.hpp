// Generates the wgmma wrappers a variant needs: their operand lists (up to 128 accumulators) are
// written out by code, never by hand.
#pragma once
#include <string>

#include "config/kernel_config.hpp"

namespace flashjit {

// wgmma_qk (S = Q K^T, m64 n{block_n} k16, A and B from shared memory), wgmma_pv (O += P V,
// m64 n{v_cols} k16, A from registers, B MN-major) and pack2 for the spec's dtype.
std::string render_wgmma_shapes(const KernelConfig& config);

}  // namespace flashjit
