"""Which kernel a call runs (its spec) and how many key splits it may use: plain Python (no torch), so
build hosts can list the specs and CPU tests can check the rules."""

SPLIT_MIN_KEYS = 512       # num_splits=0 (heuristic): no split below this many keys
SPLIT_HEURISTIC_CAP = 128  # most splits the heuristic asks for (the library fits them to the SMs)
DECODE_MAX_QUERIES = 16    # pack_gqa=None: heads packed when no sequence has more queries (decode, speculative)
SPLIT_TILE_ROWS = 64       # query rows per tile of the split-KV kernel (one consumer warpgroup)
# How split launches merge their splits (spec key combine): "kernel", a second kernel (the library's default),
# or "inline", the attention kernel's last split of each tile (one launch a call; its workspace holds counters
# and is kept apart per launch layout, zeroed once). Set before the first call.
COMBINE = "kernel"


def spec_text(dtype_name, head_dim, causal, varlen=False, paged=False, pack_gqa=False, split_kv=False, combine="kernel"):
    """The spec a launch runs, in the canonical key order ("dtype=bf16,head_dim=128,causal=1,varlen=1")."""
    spec = f"dtype={dtype_name},head_dim={head_dim},causal={int(bool(causal))}"
    for key, on in (("varlen", varlen), ("paged", paged), ("pack_gqa", pack_gqa), ("split_kv", split_kv)):
        if on:
            spec += f",{key}=1"
    if split_kv and combine == "inline":
        spec += ",combine=inline"
    return spec


def workspace_has_counters(spec):
    """Whether a launch of spec keeps counters in its workspace (they must start at zero, and no other launch
    layout may share that workspace)."""
    return spec.endswith(",combine=inline")


def plan(sm_count, dtype_name, head_dim, causal, varlen, paged, batch, seqlen_q, seqlen_k, heads_q, heads_kv,
         num_splits, pack_gqa):
    """(spec, max_splits) of a launch (max_splits 0: no split). Split-KV and packed heads are varlen kernels
    (the library's rule). num_splits: 1 = no split, > 1 = at most that many, 0 = split when the launch's tiles
    would leave a fifth of the SMs idle and there are SPLIT_MIN_KEYS keys or more (FA3's heuristic in spirit;
    the library picks the count, up to max_splits, from the SMs). pack_gqa: -1 (None) packs heads for
    decode-sized queries and for split launches, 0 never, 1 always (when heads_q > heads_kv)."""
    split, max_splits, pack = False, 0, False
    if varlen:
        group = heads_q // heads_kv
        want_pack = group > 1 and pack_gqa != 0
        if num_splits > 1:
            split, max_splits = True, min(num_splits, 128)
        elif num_splits == 0 and seqlen_k >= SPLIT_MIN_KEYS:
            rows = seqlen_q * group if want_pack else seqlen_q
            tiles = batch * (heads_kv if want_pack else heads_q) * -(-rows // SPLIT_TILE_ROWS)
            if tiles * 5 < sm_count * 4:
                split, max_splits = True, min(SPLIT_HEURISTIC_CAP, max(2, -(-2 * sm_count // tiles)))
        pack = want_pack and (pack_gqa == 1 or split or seqlen_q <= DECODE_MAX_QUERIES)
    return spec_text(dtype_name, head_dim, causal, varlen, paged, pack, split, COMBINE), max_splits
