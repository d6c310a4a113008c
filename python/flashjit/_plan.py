"""Which kernel a call runs (its spec) and the most key splits its workspace holds: plain Python (no torch), so
build hosts can list the specs and CPU tests can check the rules."""

DECODE_MAX_QUERIES = 16  # pack_gqa=None: heads packed when no sequence has more queries (decode, speculative)
# What the library's split count is bounded by (flashjit.h, DECODE: the count gives every CTA slot of the device
# a tile): the C API's most splits (args.max_splits), the most CTAs an SM holds (spec key ctas_per_sm) and the
# most query rows a tile holds (spec key block_m).
MAX_SPLITS = 128
MAX_CTAS_PER_SM = 2
MAX_TILE_ROWS = 192


FEATURE_KEYS = ("window", "chunk", "softcap", "sinks", "alibi")  # flashjit.h, MASKS AND SCORES

# FA3's qv (the split MLA form) on the shared-scores kernels (spec key v_in_k=1: the latent block loaded once
# for K and V, each tile's scores computed once) where they take the call: head_dim_v 384 or 512, varlen or paged,
# 16-bit, no masks or score modifiers. On since the GPU suites passed with it (MlaDecodeGpu.SplitFormVInKThrough
# EveryKvSource, test_gpu.py's qv cases) and the absorbed form's v_in_k kernels ran 1.4-2x O in parts' speed
# (bench/NOTES.md, 2026-12-06); False keeps the O-in-parts kernels.
QV_V_IN_K = True
V_IN_K_HEAD_DIMS_V = (384, 512)

# Calls at head dim 384 or 512 with V as wide (Gemma 4's global layers) on the kernels that share the head dims out
# over a cluster's two CTAs (spec key dim_split=1) where they take the call: 16-bit, no split-KV, no FP8 cache, not
# the split form. On since the GPU suites passed with them (LargeHeadDimGpu.DimSplitEveryPairDtypeAndMask, test_gpu.py's
# "dim_split" case) and they ran 1.5x O in parts' speed at 512/512 prefill (bench/NOTES.md, 2026-12-06); False keeps
# the O-in-parts kernels.
DIM_SPLIT = True
DIM_SPLIT_HEAD_DIMS = (384, 512)

# The same calls without masks or score modifiers on the paired kernels with Q's first head dims in the scores
# warpgroup's registers (spec keys paired=1,q_reg_dims=N: a tile's two consumer warpgroups share its scores, each
# half of O), ahead of DIM_SPLIT: on an H100 (2 x 8k, 16/8 heads, varlen) 546-552 TFLOP/s against dim_split=1's
# 420-493, causal 498 against 436 (bench/NOTES.md, 2026-12-07); test_gpu.py's "paired q_regs" case passed with it.
# False leaves them to DIM_SPLIT.
PAIRED = True
PAIRED_Q_REG_DIMS = {384: 384, 512: 288}  # the most the library takes at 32-key blocks (max_q_reg_dims)


def qv_takes_v_in_k(dtype_name, head_dim_v, varlen, paged, feature_keys=(), kv_dtype=None):
    """Whether a qv call runs the shared-scores kernels (QV_V_IN_K and the call is one they take)."""
    return (QV_V_IN_K and head_dim_v in V_IN_K_HEAD_DIMS_V and bool(varlen or paged) and dtype_name in ("bf16", "fp16")
            and not feature_keys and kv_dtype is None)


def takes_paired(dtype_name, head_dim, head_dim_v, split_kv, kv_dtype=None, qv=False, feature_keys=()):
    """Whether a call runs the paired kernels with Q's first head dims in registers (PAIRED and the call is one they
    take)."""
    return (PAIRED and head_dim in PAIRED_Q_REG_DIMS and head_dim_v in (None, head_dim) and dtype_name in ("bf16", "fp16")
            and not split_kv and kv_dtype is None and not qv and not feature_keys)


def takes_dim_split(dtype_name, head_dim, head_dim_v, split_kv, kv_dtype=None, qv=False):
    """Whether a call runs the kernels that share the head dims out over a cluster (DIM_SPLIT and the call is one they
    take)."""
    return (DIM_SPLIT and head_dim in DIM_SPLIT_HEAD_DIMS and head_dim_v in (None, head_dim) and dtype_name in ("bf16", "fp16")
            and not split_kv and kv_dtype is None and not qv)


class Features:
    """A call's masks and score modifiers (flashjit.h, MASKS AND SCORES), each off by default: the window's two
    sides (-1 unbounded), the attention chunk (0 none), the soft cap (0 none), the sink logits [heads_q] and the
    ALiBi slopes ([heads_q] or [batch, heads_q]) as tensors. spec_keys: the spec keys they need."""
    __slots__ = ("window_left", "window_right", "chunk", "softcap", "sinks", "alibi_slopes")

    def __init__(self, window_left=-1, window_right=-1, chunk=0, softcap=0.0, sinks=None, alibi_slopes=None):
        self.window_left, self.window_right, self.chunk, self.softcap = window_left, window_right, chunk, softcap
        self.sinks, self.alibi_slopes = sinks, alibi_slopes

    def spec_keys(self):
        on = {"window": self.window_left >= 0 or self.window_right >= 0, "chunk": self.chunk > 0,
              "softcap": self.softcap > 0, "sinks": self.sinks is not None, "alibi": self.alibi_slopes is not None}
        return tuple(key for key in FEATURE_KEYS if on[key])

    def __bool__(self):
        return bool(self.spec_keys())

    def __repr__(self):
        return (f"Features(window=({self.window_left}, {self.window_right}), chunk={self.chunk}, softcap={self.softcap}, "
                f"sinks={self.sinks is not None}, alibi_slopes={self.alibi_slopes is not None})")


# The features' spec keys by the arguments that ask for them (NotImplementedError names the feature).
FEATURE_ARGUMENTS = {"window": "window_size (a sliding window)", "chunk": "attention_chunk (chunked local attention)",
                     "softcap": "softcap (soft capping)", "sinks": "s_aux (attention sinks)", "alibi": "alibi_slopes (ALiBi)"}


def require_feature_keys(lib, spec, feature_keys):
    """NotImplementedError naming the feature when the library's spec parser refuses its key (a build whose
    kernels do not have it yet); other refusals are left to the library's errors at kernel_get."""
    reason = lib.supported(spec)
    if reason is None:
        return
    for key in feature_keys:
        if f"'{key}'" in reason or reason.startswith(key + ":"):
            raise NotImplementedError(f"flashjit: {FEATURE_ARGUMENTS[key]} is not supported by this flashjit build "
                                      f"(spec '{spec}': {reason})")


# ---- FA3's qv (flashjit.h, MLA SPLIT FORM; spec key qv=1) ------------------------------------------------------
def qv_refusal(lib, spec):
    """None when the library takes spec, a spec with qv=1, else its reason with the field named once ("qv: value 1 is
    not allowed with head_dim=544 and head_dim_v=512; allowed: ...")."""
    reason = lib.supported(spec)
    if reason is None:
        return None
    field, sep, rest = reason.partition(": ")
    repeat = f"spec field '{field}': "
    return field + sep + rest[len(repeat):] if sep and rest.startswith(repeat) else reason


def require_qv(lib, spec, q_columns, qv_columns, fn=None):
    """NotImplementedError naming qv, with the library's reason, when the library does not take spec, the spec of a
    call with qv (its head_dim q's q_columns and qv's qv_columns together, head_dim_v qv's): both parts are multiples
    of 64 (MLA's 64 + 512), the sum at most 576, not with FP8. fn: the entry point the error names (None: the
    package)."""
    reason = qv_refusal(lib, spec)
    if reason is not None:
        raise NotImplementedError(f"{'flashjit' if fn is None else 'flashjit.' + fn}: qv: {q_columns} columns of q "
                                  f"with {qv_columns} of qv (head dims {q_columns + qv_columns}/{qv_columns}) are not "
                                  f"supported (spec '{spec}': {reason})")


# ---- the FP8 K/V cache and FP8 operands (flashjit.h, FP8 K/V CACHE, FP8 OPERANDS) ------------------------------
KV_DTYPE_E4M3 = "e4m3"  # spec key kv_dtype's value for K and V of torch.float8_e4m3fn
DTYPE_E4M3 = "e4m3"     # spec key dtype's value for Q, K and V all torch.float8_e4m3fn (O: out_dtype, bf16 default)


def descale_strides(shape, strides, batch=None, heads_kv=None):
    """(batch stride, head stride), in elements, of a float32 descale tensor the kernel reads at batch x batch
    stride + K/V head x head stride (args k_scale / v_scale), from the tensor's shape and strides; None for a shape
    that is none of these:
    - one element, of any dimensions (a scalar, [1], [1, 1]): one scale for the cache, (0, 0);
    - [heads_kv]: one a K/V head, (0, its stride) (vLLM's per-head scales);
    - [batch, heads_kv] (FA3's descale shape): its strides; vLLM's per-tensor scale expanded to that shape has
      strides (0, 0) and reads as one scale.
    A dimension of size 1 broadcasts (stride 0): [1, heads_kv] is per head, [batch, 1] per sequence. batch,
    heads_kv: None where not known (not checked)."""
    shape, strides = tuple(shape), tuple(strides)
    count = 1
    for n in shape:
        count *= n
    if count == 1:
        return 0, 0
    if len(shape) == 1:
        if heads_kv is not None and shape[0] != heads_kv:
            return None
        return 0, strides[0]
    if len(shape) == 2:
        rows, cols = shape
        if (batch is not None and rows not in (batch, 1)) or (heads_kv is not None and cols not in (heads_kv, 1)):
            return None
        return (strides[0] if rows != 1 else 0), (strides[1] if cols != 1 else 0)
    return None


class KvScales:
    """An FP8 K/V cache's dequantisation scales (spec key kv_dtype=e4m3), or FP8 operands' (spec key dtype=e4m3):
    the float32 k_descale and v_descale tensors (None: 1.0 for every element, as FA3 reads a descale not given),
    with FP8 operands q_descale too (None: 1.0; always None for an FP8 cache), and each one's (batch stride, head
    stride) from descale_strides ((0, 0) for None)."""
    __slots__ = ("k", "v", "k_strides", "v_strides", "q", "q_strides")

    def __init__(self, k=None, v=None, k_strides=(0, 0), v_strides=(0, 0), q=None, q_strides=(0, 0)):
        self.k, self.v, self.k_strides, self.v_strides = k, v, tuple(k_strides), tuple(v_strides)
        self.q, self.q_strides = q, tuple(q_strides)

    def __repr__(self):
        return (f"KvScales(q={'1.0' if self.q is None else 'tensor'} {self.q_strides}, "
                f"k={'1.0' if self.k is None else 'tensor'} {self.k_strides}, "
                f"v={'1.0' if self.v is None else 'tensor'} {self.v_strides})")


def spec_text(dtype_name, head_dim, causal, varlen=False, paged=False, pack_gqa=False, split_kv=False, feature_keys=(),
              kv_dtype=None, out_dtype=None, head_dim_v=None, qv=False, v_in_k=False, dim_split=False, paired=False,
              q_reg_dims=0):
    """The spec a launch runs, in the canonical key order ("dtype=bf16,head_dim=128,causal=1,varlen=1"; V's head dim
    head_dim_v after head_dim where it is not Q's: "dtype=bf16,head_dim=192,head_dim_v=128,causal=1"), with the
    spec keys of its masks and score modifiers (Features.spec_keys) after, then qv=1 (FA3's split MLA form: head_dim
    is q's and qv's columns together, head_dim_v qv's and V's), then v_in_k=1 (the shared-scores kernels), then
    paired=1 (the paired kernels), then dim_split=1 (the head dims shared out over a cluster's two CTAs), then
    q_reg_dims=N (Q's first N head dims in the scores warpgroup's registers; 0: left out), then kv_dtype (None: K and V of dtype; "e4m3": an
    FP8 cache). dtype_name "e4m3" is FP8 operands, whose O is out_dtype ("fp16"; None or "bf16": the library's
    default, bf16, not spelled out). Keys the package does not choose (tiles, scheduler, combine) are left to the
    library's defaults."""
    spec = f"dtype={dtype_name},head_dim={head_dim}"
    if head_dim_v is not None and head_dim_v != head_dim:
        spec += f",head_dim_v={head_dim_v}"
    spec += f",causal={int(bool(causal))}"
    if out_dtype not in (None, "bf16"):
        spec += f",out_dtype={out_dtype}"
    for key, on in (("varlen", varlen), ("paged", paged), ("pack_gqa", pack_gqa), ("split_kv", split_kv)):
        if on:
            spec += f",{key}=1"
    for key in feature_keys:
        spec += f",{key}=1"
    if qv:  # the library prints it after the masks' keys (alibi) and before out_dtype and kv_dtype
        spec += ",qv=1"
    if v_in_k:
        spec += ",v_in_k=1"
    if paired:
        spec += ",paired=1"
    if dim_split:
        spec += ",dim_split=1"
    if q_reg_dims:
        spec += f",q_reg_dims={q_reg_dims}"
    if kv_dtype is not None:
        spec += f",kv_dtype={kv_dtype}"
    return spec


def workspace_has_counters(resolved_spec):
    """Whether a launch of the kernel (its resolved spec, as the library describes it) keeps counters in its
    workspace: scheduler=dynamic's tile counter, combine=inline's merge counters. They must start at zero, and
    no launch of another layout may share that workspace (flashjit.h, SCHEDULER)."""
    parts = resolved_spec.split(",")
    return "scheduler=dynamic" in parts or "combine=inline" in parts


def most_splits(sm_count, batch, seqlen_q, heads_q, heads_kv):
    """The most splits the library can choose for a launch: it gives every CTA slot a tile, splits = CTA slots /
    tiles, and a launch has at least batch x heads_kv tiles (packed heads share one) and at least
    batch x heads_q x seqlen_q / MAX_TILE_ROWS (a tile's rows). The workspace is sized for this many; the library
    picks the count."""
    slots = sm_count * MAX_CTAS_PER_SM
    by_heads = slots // max(1, batch * heads_kv)
    by_rows = slots * MAX_TILE_ROWS // max(1, batch * heads_q * seqlen_q)
    return max(1, min(MAX_SPLITS, by_heads, by_rows))


def plan(sm_count, dtype_name, head_dim, causal, varlen, paged, batch, seqlen_q, heads_q, heads_kv, num_splits,
         pack_gqa, feature_keys=(), kv_dtype=None, out_dtype=None, head_dim_v=None, qv=False):
    """(spec, max_splits) of a launch (max_splits 0: no split). Split-KV and packed heads are varlen kernels
    (the library's rule). num_splits: 1 = no split, > 1 = at most that many, <= 0 = as many as the library
    chooses (most_splits; a launch it could give only one runs unsplit). pack_gqa: -1 (None) packs heads for
    decode-sized queries and for split launches, 0 never, 1 always (when heads_q > heads_kv). kv_dtype: "e4m3"
    for an FP8 K/V cache (KvScales), None for K and V of dtype. dtype_name "e4m3": FP8 operands, O in out_dtype
    (spec_text). head_dim_v: V's and O's head dim (None or head_dim: V as wide as Q). qv: FA3's split MLA form (spec
    key qv=1; head_dim q's and qv's columns together, head_dim_v qv's; with QV_V_IN_K also v_in_k=1 where it applies).
    With PAIRED, paired=1 with q_reg_dims where it applies (takes_paired); elsewhere with DIM_SPLIT, dim_split=1 where
    it applies (takes_dim_split)."""
    split, max_splits, pack = False, 0, False
    if varlen:
        if num_splits > 1:
            split, max_splits = True, min(num_splits, MAX_SPLITS)
        elif num_splits <= 0:
            most = most_splits(sm_count, batch, seqlen_q, heads_q, heads_kv)
            split, max_splits = most > 1, (most if most > 1 else 0)
        pack = heads_q > heads_kv and pack_gqa != 0 and (pack_gqa == 1 or split or seqlen_q <= DECODE_MAX_QUERIES)
    v_in_k = qv and qv_takes_v_in_k(dtype_name, head_dim_v, varlen, paged, feature_keys, kv_dtype)
    paired = takes_paired(dtype_name, head_dim, head_dim_v, split, kv_dtype, qv, feature_keys)
    dim_split = not paired and takes_dim_split(dtype_name, head_dim, head_dim_v, split, kv_dtype, qv)
    return (spec_text(dtype_name, head_dim, causal, varlen, paged, pack, split, feature_keys, kv_dtype, out_dtype, head_dim_v,
                      qv, v_in_k, dim_split, paired, PAIRED_Q_REG_DIMS[head_dim] if paired else 0),
            max_splits)
