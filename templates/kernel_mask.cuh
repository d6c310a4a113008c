// kernel_mask.cuh: the attention kernel's mask types. The renderer names one of them `Mask`
// (src/source/render.cpp), as FlashAttention-3 renders its Mask: the kernel asks it for the rule
// (visibility.cuh: MaskRule) and whether visited blocks may need the mask at both ends of a tile's
// range, and holds no flag of its own for windows or chunks. Rendered after attention_params.cuh
// and visibility.cuh (it reads kCausal and Params), before attention_fwd.cuh.

// The causal flag alone (or no mask): masked blocks only at the range's right end
// (kv_block_range), the kernels from before issue 38.
struct CausalMask {
  static constexpr bool kTwoSided = false;
  FJ_DEVICE static MaskRule rule(const Params&) { return causal_only_rule(kCausal); }
};

// Causal, sliding window and attention chunk (spec keys window, chunk), sizes from the
// parameters: blocks outside every row's window or chunk are not visited, and the blocks at both
// ends of the range may need the mask (mask_block_range).
struct WindowChunkMask {
  static constexpr bool kTwoSided = true;
  FJ_DEVICE static MaskRule rule(const Params& p) { return {kCausal, p.window_left, p.window_right, p.chunk}; }
};
