#!/usr/bin/env python3
"""flashjit's C API from Python with ctypes, on PyTorch tensors, checked against PyTorch in float64.

  python3 examples/python/attention_ctypes.py --lib build/libflashjit.so

For each case: get the kernel (flashjit_kernel_get), launch it on torch tensors (data_ptr(), strides in
elements, torch.cuda.current_stream().cuda_stream), and compare O and LSE with attention computed in
float64 (causal masks aligned to the bottom-right corner, as flashjit's are). Dense cases: one reads Q, K
and V as strided views of a packed QKV tensor; one captures the launch in a torch CUDA graph and replays
it after writing new inputs into the same tensors. Engine cases (spec varlen=1,paged=1; ENGINE INPUTS in
flashjit.h): a vLLM-shaped mixed batch (decodes, a speculative sequence, a prefill chunk, a fresh prefill,
an empty sequence, one with more queries than keys) as packed queries against a paged KV cache (page size
16, shuffled page table, one page shared by two sequences); and one CUDA graph captured once and replayed
after the lengths, the block table and the active sequences change in place (same tensors, same addresses,
within the captured upper bounds). A decode case (spec ...,pack_gqa=1,split_kv=1; DECODE in flashjit.h):
a step loop over a paged cache with 32/8 heads, the workspace sized once, one graph replayed as sequences
grow, finish and start. O and LSE are poisoned (NaN) before each launch; rows past the last
sequence must stay untouched. Exits 1 on any mismatch or error; without a CUDA GPU (or PyTorch) it says
so and exits 0.

The bindings (AttentionArgs, engine_args, Flashjit, reference_rows) are imported by bench/peers.py,
bench/engine_peers.py, bench/decode_peers.py, bench/feature_peers.py and bench/fp8_peers.py; the structs
themselves come from the flashjit package (python/flashjit/_capi.py), the one copy of the layouts. Masks and score modifiers
(MASKS AND SCORES in flashjit.h): dense_args and engine_args take set_features' keywords (window,
attention_chunk, softcap, sinks, alibi_slopes), and reference_rows the same ones. Split-KV decode (spec
split_kv=1, DECODE in flashjit.h): engine_args(..., max_splits=, split_keys=), Flashjit.workspace_size
(flashjit_attention_workspace_size) and Flashjit.alloc_workspace / set_workspace for the caller-owned
workspace. FP8 (FP8 K/V CACHE and FP8 OPERANDS in flashjit.h; spec keys kv_dtype=e4m3 and dtype=e4m3): K and V
(and with dtype=e4m3, Q) are torch.float8_e4m3fn tensors, whose element strides are their byte strides as the
C API counts them, so strides_of serves them as it is; dense_args and engine_args take the float32 scales as
k_scale=, v_scale= and q_scale= (set_scales: one element, [heads_kv] or [batch, heads_kv]); quantize_e4m3 and
dequantize make and read e4m3 codes, and the float64 reference runs on the dequantised values (code x scale).
"""
import argparse
import ctypes
import math
import os
import random
import sys


# ---- the C API's structs: the flashjit package's (python/flashjit/_capi.py: one copy of the layouts) ---
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from flashjit._capi import (ABI_VERSION, DTYPE_BF16, DTYPE_FP32, FLAG_PDL, WORKSPACE_ALIGN,  # noqa: E402,F401
                            AttentionArgs, ContextOptions, FlashjitError, KernelInfo, Strides, new_args)
from flashjit._plan import descale_strides  # noqa: E402


def strides_of(t):
    """flashjit strides (elements) of a [batch, seqlen, heads, d] tensor, of a paged pool [pages, page_size,
    heads, d] (batch = the page stride), or of a packed [rows, heads, d] one (batch = row: not used)."""
    assert t.stride(-1) == 1, "head_dim must be contiguous"
    if t.dim() == 4:
        return Strides(t.stride(0), t.stride(1), t.stride(2))
    if t.dim() == 3:
        return Strides(t.stride(0), t.stride(0), t.stride(1))
    raise ValueError(f"expected a 3-D or 4-D tensor, got shape {tuple(t.shape)}")


def _dtype_name(t):
    return str(getattr(t, "dtype", "")).replace("torch.", "")


def set_features(args, *, window=None, attention_chunk=0, softcap=0.0, sinks=None, alibi_slopes=None):
    """The masks and score modifiers (MASKS AND SCORES in flashjit.h) in args; each needs its spec key.
    window: (left, right), keys left and right of the diagonal, -1 unbounded (window=1; with causal=1 the
    right side is 0 whatever it says); None: off. attention_chunk: keys per chunk (chunk=1); 0: off.
    softcap: c > 0 (softcap=1); 0: off. sinks: [heads_q] float32 or bfloat16 logits, not scaled (sinks=1).
    alibi_slopes: float32 [heads_q], or [batch, heads_q] with its row stride as the batch stride (alibi=1).
    Tensors are passed by address: keep them alive as long as args."""
    if window is not None:
        args.window_left, args.window_right = (int(x) for x in window)
    args.attention_chunk = int(attention_chunk or 0)
    args.softcap = float(softcap or 0.0)
    if sinks is not None:
        kind = _dtype_name(sinks)
        if kind not in ("float32", "bfloat16") or sinks.dim() != 1 or sinks.stride(0) != 1:
            raise ValueError(f"sinks: a contiguous 1-D float32 or bfloat16 tensor [heads_q], got {kind} "
                             f"{tuple(sinks.shape)}")
        args.sinks = sinks.data_ptr()
        args.sinks_dtype = DTYPE_BF16 if kind == "bfloat16" else DTYPE_FP32
    else:
        args.sinks, args.sinks_dtype = 0, 0
    if alibi_slopes is not None:
        kind = _dtype_name(alibi_slopes)
        if kind != "float32" or alibi_slopes.dim() not in (1, 2) or alibi_slopes.stride(-1) != 1:
            raise ValueError(f"alibi_slopes: float32 [heads_q] or [batch, heads_q] (heads contiguous), got {kind} "
                             f"{tuple(alibi_slopes.shape)}")
        args.alibi_slopes = alibi_slopes.data_ptr()
        args.alibi_batch_stride = alibi_slopes.stride(0) if alibi_slopes.dim() == 2 else 0
    else:
        args.alibi_slopes, args.alibi_batch_stride = 0, 0
    return args


def _scale_field(t, name, batch, heads_kv):
    """(pointer, batch stride, head stride) of a float32 scale tensor: one element (a scalar, [1], ...), [heads_kv]
    or [batch, heads_kv], any strides (flashjit._plan.descale_strides: a dimension of 1, or a stride of 0 from
    expand, reads as shared). ValueError naming the field otherwise."""
    kind = _dtype_name(t)
    strides = descale_strides(t.shape, t.stride(), batch, heads_kv) if kind == "float32" else None
    if strides is None:
        raise ValueError(f"{name}: float32 with one element, [heads_kv] ({heads_kv}) or [batch, heads_kv] "
                         f"({batch}, {heads_kv}), got {kind} {tuple(t.shape)}")
    return (t.data_ptr(),) + tuple(strides)


def set_scales(args, *, k_scale=None, v_scale=None, q_scale=None):
    """The FP8 scales in args (FP8 K/V CACHE and FP8 OPERANDS in flashjit.h); args.batch and args.heads_kv must be
    set. k_scale, v_scale: float32 tensors, required with spec key kv_dtype=e4m3 (K and V e4m3 under 16-bit Q and
    O: element = code x scale) and with dtype=e4m3 (FlashAttention-3's k_descale, v_descale); q_scale: dtype=e4m3
    only (q_descale; None reads as 1). Each is one element (strides 0: vLLM's per-tensor scale), [heads_kv] (per
    K/V head) or [batch, heads_kv] (FA3's descale), indexed by sequence and K/V head. None: 0 (off).
    Tensors are passed by address: keep them alive as long as args."""
    for name, t in (("k_scale", k_scale), ("v_scale", v_scale), ("q_scale", q_scale)):
        ptr, batch_stride, head_stride = (0, 0, 0) if t is None else _scale_field(t, name, args.batch, args.heads_kv)
        setattr(args, name, ptr)
        setattr(args, name + "_batch_stride", batch_stride)
        setattr(args, name + "_head_stride", head_stride)
    return args


def dense_args(q, k, v, o, lse=None, scale=0.0, flags=0, k_scale=None, v_scale=None, q_scale=None, **features):
    """Arguments of a dense call on [batch, seqlen, heads, head_dim] tensors (LSE [batch, heads_q, seqlen_q]).
    k_scale, v_scale, q_scale: the FP8 scales (set_scales). features: set_features' keywords (window,
    attention_chunk, softcap, sinks, alibi_slopes)."""
    args = new_args(flags)
    args.q, args.k, args.v, args.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    args.lse = lse.data_ptr() if lse is not None else 0
    args.batch, args.seqlen_q, args.heads_q, args.head_dim = q.shape
    args.seqlen_k, args.heads_kv = k.shape[1], k.shape[2]
    args.q_strides, args.k_strides, args.v_strides, args.o_strides = (strides_of(t) for t in (q, k, v, o))
    args.softmax_scale = scale
    set_scales(args, k_scale=k_scale, v_scale=v_scale, q_scale=q_scale)
    return set_features(args, **features)


def _metadata_ptr(t, name, dims):
    import torch
    assert t.dtype == torch.int32 and t.dim() == dims and t.is_cuda, f"{name}: int32, {dims}-D, on the GPU"
    assert t.stride(-1) == 1, f"{name}: the last dimension must be contiguous"
    return t.data_ptr()


def engine_args(q, k, v, o, lse=None, *, seqlen_q, seqlen_k, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None,
                block_table=None, batch=None, scale=0.0, flags=0, max_splits=0, split_keys=0, workspace=None,
                k_scale=None, v_scale=None, q_scale=None, **features):
    """Arguments of an engine call (ENGINE INPUTS in flashjit.h) on torch tensors.

    q, o: packed [total_q, heads_q, d] with cu_seqlens_q (spec varlen=1; LSE [heads_q, total_q]), or
    [batch, seqlen_q, heads_q, d] without. k, v: packed [total_k, heads_kv, d] with cu_seqlens_k; pools
    [num_pages, page_size, heads_kv, d] (any strides, d contiguous) with block_table [batch, pages] int32
    (spec paged=1; seqused_k required); or [batch, seqlen_k, heads_kv, d], with seqused_k or not.
    seqlen_q / seqlen_k are the upper bounds a captured graph keeps.
    Split-KV (spec split_kv=1): max_splits (1..128), split_keys (0, or keys per split: the batch-invariant
    mode) and workspace (a device tensor of at least Flashjit.workspace_size bytes; or set it later with
    set_workspace / Flashjit.alloc_workspace, since its size depends on these arguments).
    k_scale, v_scale, q_scale: the FP8 scales (set_scales; an e4m3 cache's pools or packed K/V are
    torch.float8_e4m3fn). features: set_features' keywords (window, attention_chunk, softcap, sinks,
    alibi_slopes)."""
    args = new_args(flags)
    args.q, args.k, args.v, args.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    args.lse = lse.data_ptr() if lse is not None else 0
    if cu_seqlens_q is not None:
        assert q.dim() == 3 and o.dim() == 3, "varlen: Q and O are [total_q, heads_q, d]"
        args.cu_seqlens_q = _metadata_ptr(cu_seqlens_q, "cu_seqlens_q", 1)
        args.total_q = q.shape[0]
        args.batch = cu_seqlens_q.shape[0] - 1 if batch is None else batch
    else:
        assert q.dim() == 4, "without cu_seqlens_q, Q and O are [batch, seqlen_q, heads_q, d]"
        args.batch = q.shape[0] if batch is None else batch
    args.seqlen_q, args.seqlen_k = seqlen_q, seqlen_k
    args.heads_q, args.heads_kv, args.head_dim = q.shape[-2], k.shape[-2], q.shape[-1]
    if cu_seqlens_k is not None:
        assert k.dim() == 3 and v.dim() == 3 and block_table is None, "packed K/V: [total_k, heads_kv, d]"
        args.cu_seqlens_k = _metadata_ptr(cu_seqlens_k, "cu_seqlens_k", 1)
        args.total_k = k.shape[0]
    if seqused_k is not None:
        args.seqused_k = _metadata_ptr(seqused_k, "seqused_k", 1)
    if block_table is not None:
        assert k.dim() == 4 and v.dim() == 4 and k.shape[:2] == v.shape[:2], "paged: pools [num_pages, page_size, heads_kv, d]"
        args.block_table = _metadata_ptr(block_table, "block_table", 2)
        args.block_table_batch_stride = block_table.stride(0)
        args.num_pages, args.page_size = k.shape[0], k.shape[1]
    args.q_strides, args.k_strides, args.v_strides, args.o_strides = (strides_of(t) for t in (q, k, v, o))
    args.softmax_scale = scale
    args.max_splits, args.split_keys = max_splits, split_keys
    if workspace is not None:
        set_workspace(args, workspace)
    set_scales(args, k_scale=k_scale, v_scale=v_scale, q_scale=q_scale)
    return set_features(args, **features)


def set_workspace(args, workspace, nbytes=None):
    """args.workspace / workspace_bytes from a device tensor (its bytes, or nbytes), or None/0 for none."""
    if workspace is None or (isinstance(workspace, int) and workspace == 0):
        args.workspace, args.workspace_bytes = 0, 0
        return args
    ptr = workspace if isinstance(workspace, int) else workspace.data_ptr()
    size = nbytes if nbytes is not None else workspace.numel() * workspace.element_size()
    assert ptr % WORKSPACE_ALIGN == 0, f"workspace: {ptr:#x} is not {WORKSPACE_ALIGN}-byte aligned"
    args.workspace, args.workspace_bytes = ptr, size
    return args


class Flashjit:
    """A flashjit context on the current torch device (its primary CUDA context, which torch uses too)."""

    def __init__(self, lib_path, device):
        L = self.lib = ctypes.CDLL(lib_path)
        L.flashjit_get_version.restype = ctypes.c_uint32
        L.flashjit_check_abi.argtypes = [ctypes.c_uint32]
        L.flashjit_last_error_message.restype = ctypes.c_char_p
        L.flashjit_status_string.restype = ctypes.c_char_p
        L.flashjit_status_string.argtypes = [ctypes.c_int32]
        L.flashjit_context_create.argtypes = [ctypes.POINTER(ContextOptions), ctypes.POINTER(ctypes.c_void_p)]
        L.flashjit_context_destroy.argtypes = [ctypes.c_void_p]
        L.flashjit_kernel_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.flashjit_kernel_release.argtypes = [ctypes.c_void_p]
        L.flashjit_kernel_describe.argtypes = [ctypes.c_void_p, ctypes.POINTER(KernelInfo)]
        L.flashjit_attention_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionArgs), ctypes.c_void_p]
        L.flashjit_kernel_launch_spec.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionArgs),
                                                  ctypes.POINTER(ctypes.c_char_p)]
        self.check(L.flashjit_check_abi(ABI_VERSION), "check_abi")
        options = ContextOptions(struct_size=ctypes.sizeof(ContextOptions), device=device)
        self.context = ctypes.c_void_p()
        self.check(L.flashjit_context_create(ctypes.byref(options), ctypes.byref(self.context)), "context_create")
        self.kernels = {}

    def check(self, status, what):
        if status != 0:
            name = self.lib.flashjit_status_string(status).decode()
            raise FlashjitError(f"flashjit {what}: {name}: {self.lib.flashjit_last_error_message().decode()}")

    def kernel(self, spec):
        """(handle, resolved spec); compiles or loads on first use (never inside a graph capture)."""
        if spec not in self.kernels:
            handle = ctypes.c_void_p()
            self.check(self.lib.flashjit_kernel_get(self.context, spec.encode(), ctypes.byref(handle)), f"kernel_get({spec})")
            info = KernelInfo(struct_size=ctypes.sizeof(KernelInfo))
            self.check(self.lib.flashjit_kernel_describe(handle, ctypes.byref(info)), "kernel_describe")
            self.kernels[spec] = (handle, info.spec.decode())
        return self.kernels[spec]

    def prewarm(self, specs):
        """flashjit_prewarm: compiles specs into the context's cache, in parallel (nothing loaded, no GPU work),
        so that kernel() only loads them. Raises FlashjitError listing each spec that failed."""
        L = self.lib
        if not hasattr(self, "_prewarm"):
            fn = L.flashjit_prewarm
            fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
            fn.restype = ctypes.c_int32
            self._prewarm = fn
        specs = list(specs)
        array = (ctypes.c_char_p * len(specs))(*(spec.encode() for spec in specs))
        self.check(self._prewarm(self.context, array, len(specs)), "prewarm")

    def launch_spec(self, spec, args):
        """The resolved spec of the kernel these arguments run (the handle's own or its long-sequence one)."""
        handle, _ = self.kernel(spec)
        out = ctypes.c_char_p()
        self.check(self.lib.flashjit_kernel_launch_spec(handle, ctypes.byref(args), ctypes.byref(out)), "kernel_launch_spec")
        return out.value.decode()

    def launch(self, spec, args, stream=None):
        """flashjit_attention_forward on the current torch stream (or `stream`, a CUstream as an int)."""
        handle, _ = self.kernel(spec)
        if stream is None:
            import torch
            stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.flashjit_attention_forward(handle, ctypes.byref(args), ctypes.c_void_p(stream)),
                   f"attention_forward({spec})")

    def launcher(self, spec, args, keep=()):
        """A zero-argument callable launching `args` on the current torch stream; it holds `args` and the
        tensors in `keep` (those the pointers in args point to) alive."""
        import torch
        handle, _ = self.kernel(spec)
        fwd, check, byref = self.lib.flashjit_attention_forward, self.check, ctypes.byref(args)
        held = (args, tuple(keep))

        def call():
            status = fwd(handle, byref, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            if status != 0:
                check(status, f"attention_forward({spec})")
        call.held = held
        return call

    def check_metadata(self, spec, args):
        """flashjit_check_engine_metadata: the device metadata args points to, against the contract (off the
        hot path: it copies and waits; not capture-safe). Raises FlashjitError naming the first bad entry."""
        L = self.lib
        if not hasattr(self, "_check_metadata"):
            fn = L.flashjit_check_engine_metadata
            fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttentionArgs)]
            self._check_metadata = fn
        handle, _ = self.kernel(spec)
        self.check(self._check_metadata(handle, ctypes.byref(args)), f"check_engine_metadata({spec})")

    def describe(self, spec):
        """The kernel's flashjit_kernel_info_t as a dict (strings decoded; long_seqlen_spec None without one)."""
        handle, _ = self.kernel(spec)
        info = KernelInfo(struct_size=ctypes.sizeof(KernelInfo))
        self.check(self.lib.flashjit_kernel_describe(handle, ctypes.byref(info)), "kernel_describe")
        return {name: (getattr(info, name).decode() if isinstance(getattr(info, name), bytes) else getattr(info, name))
                for name, _ in KernelInfo._fields_}

    def workspace_size(self, spec, args):
        """flashjit_attention_workspace_size: bytes of workspace a split_kv=1 launch with args needs (0 for other
        specs); a function of the upper bounds (max_splits, total_q, heads_q) only. Needs no GPU and no kernel.
        Raises FlashjitError where the library predates it (0.4)."""
        if not hasattr(self, "_workspace_size"):
            try:
                fn = self.lib.flashjit_attention_workspace_size
            except AttributeError:
                raise FlashjitError("flashjit_attention_workspace_size: not in this library (split-KV needs flashjit 0.4)") \
                    from None
            fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(AttentionArgs), ctypes.POINTER(ctypes.c_uint64)]
            fn.restype = ctypes.c_int32
            self._workspace_size = fn
        out = ctypes.c_uint64(0)
        self.check(self._workspace_size(spec.encode(), ctypes.byref(args), ctypes.byref(out)),
                   f"attention_workspace_size({spec})")
        return out.value

    def alloc_workspace(self, spec, args, *more_args):
        """Sizes the workspace for args (workspace_size), allocates it as a torch uint8 tensor on the current
        device (the caching allocator's blocks are 512-byte aligned) and sets it in args and in every one of
        more_args (launches with the same upper bounds, run one after another on one stream). Returns the tensor
        (keep it alive as long as the arguments), or None when the spec needs none. Zeroed once: the tile
        counter of scheduler=dynamic must start at zero (each launch leaves it so)."""
        import torch
        nbytes = self.workspace_size(spec, args)
        if nbytes == 0:
            for a in (args,) + more_args:
                set_workspace(a, None)
            return None
        ws = torch.zeros(nbytes, device="cuda", dtype=torch.uint8)  # scheduler=dynamic's tile counter starts at zero
        for a in (args,) + more_args:
            set_workspace(a, ws, nbytes)
        return ws

    def forward(self, spec, q, k, v, o, lse=None, scale=0.0):
        """O (and LSE) of attention over [batch, seqlen, heads, head_dim] tensors, on the current stream."""
        self.launch(spec, dense_args(q, k, v, o, lse, scale))

    def close(self):
        for handle, _ in self.kernels.values():
            self.lib.flashjit_kernel_release(handle)
        self.kernels = {}
        self.lib.flashjit_context_destroy(self.context)


def float32(x):
    """x rounded to float32, as the kernel receives softmax_scale."""
    return ctypes.c_float(x).value


# ---- the float64 references ------------------------------------------------------------------------
def reference(q, k, v, causal, scale):
    """O [b, s_q, h_q, d] and LSE [b, h_q, s_q] in float64, GQA by repeating K/V heads."""
    import torch
    import torch.nn.functional as F
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vd = v.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    mask = None
    if causal:  # bottom-right aligned: query i sees keys j <= i + (sk - sq)
        i = torch.arange(sq, device=q.device).unsqueeze(1)
        j = torch.arange(sk, device=q.device).unsqueeze(0)
        mask = j <= i + (sk - sq)
    o = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, scale=scale)
    scores = (qd @ kd.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return o.transpose(1, 2), lse


def reference_rows(q, k, v, rows=None, causal=True, scale=None, chunk=32, *, window=None, attention_chunk=0,
                   softcap=0.0, sinks=None, alibi_slopes=None):
    """Float64 attention of one sequence, q [s_q, h_q, d] against k, v [s_k, h_kv, d], for the query rows
    `rows` (indices; None: all). Bottom-right causal: query i sees keys j <= i + s_k - s_q; a row that sees
    no key has O = 0 and LSE = -inf. Returns O [rows, h_q, d_v] (V's head dim, which may be below Q's) and
    LSE [rows, h_q], float64. Computed
    `chunk` rows at a time (scores: h_q x chunk x s_k doubles).
    The masks and score modifiers as MASKS AND SCORES in flashjit.h defines them, row i at key position
    p = i + s_k - s_q: window (left, right) keeps keys p - left <= j <= p + right (-1: that side unbounded;
    causal makes the right side 0); attention_chunk C > 0 keeps j // C == p // C (floor); softcap c > 0
    turns each scaled score s into c tanh(s / c), before the mask; alibi_slopes ([h_q], this sequence's)
    adds -slope |p - j| to the (capped) score; sinks ([h_q], not scaled) join each row's softmax as a key
    with no value, so they are in the LSE (a row that sees no key: O = 0, LSE = the sink)."""
    import torch
    sq, hq, d = q.shape
    sk, hkv, dv = k.shape[0], k.shape[1], v.shape[-1]
    group = hq // hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if causal:
        right = 0
    rows = torch.arange(sq, device=q.device) if rows is None else torch.as_tensor(rows, device=q.device, dtype=torch.long)
    r = rows.numel()
    sink = sinks.double().view(hkv, group, 1, 1) if sinks is not None else None
    o = torch.zeros(r, hq, dv, dtype=torch.float64, device=q.device)
    lse = torch.full((r, hq), float("-inf"), dtype=torch.float64, device=q.device)
    if sink is not None:
        lse[:] = sinks.double().view(1, hq)  # the value of a row that sees no key
    if r == 0 or sk == 0:
        return o, lse
    kd = k.double().permute(1, 0, 2).unsqueeze(1)  # [h_kv, 1, s_k, d]
    vd = v.double().permute(1, 0, 2).unsqueeze(1)
    keys = torch.arange(sk, device=q.device).view(1, -1)
    slopes = alibi_slopes.double().view(hkv, group, 1, 1) if alibi_slopes is not None else None
    for start in range(0, r, chunk):
        idx = rows[start:start + chunk]
        c = idx.numel()
        qd = q[idx].double().view(c, hkv, group, d).permute(1, 2, 0, 3)  # [h_kv, group, c, d]; head = kv * group + g
        s = torch.matmul(qd, kd.transpose(-1, -2)) * scale  # [h_kv, group, c, s_k]
        if softcap and softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        p = idx.view(-1, 1) + (sk - sq)  # [c, 1] key positions of the rows
        if slopes is not None:
            s = s - slopes * (p - keys).abs().double()
        seen = torch.ones(c, sk, dtype=torch.bool, device=q.device)
        if right >= 0:
            seen &= keys <= p + right
        if left >= 0:
            seen &= keys >= p - left
        if attention_chunk and attention_chunk > 0:
            seen &= torch.div(keys, attention_chunk, rounding_mode="floor") == torch.div(p, attention_chunk,
                                                                                            rounding_mode="floor")
        s = s.masked_fill(~seen, float("-inf"))
        m = torch.logsumexp(s, dim=-1)  # -inf for a row that sees no key
        if sink is not None:
            m = torch.logaddexp(m, sink.squeeze(-1).expand_as(m))
        p_ = torch.nan_to_num(torch.exp(s - m.unsqueeze(-1)), nan=0.0)
        o[start:start + c] = torch.matmul(p_, vd).permute(2, 0, 1, 3).reshape(c, hq, dv)
        lse[start:start + c] = m.permute(2, 0, 1).reshape(c, hq)
        del s, p_
    return o, lse


class ErrorSum:
    """O's relative L2 error and LSE's largest relative error (1 below |LSE| = 1) over the rows added.
    A NaN anywhere (an unwritten row: outputs are poisoned) makes the error NaN or inf: never a pass."""

    def __init__(self):
        self.diff2 = self.ref2 = self.lse = 0.0
        self.rows = 0
        self.nan_rows = 0

    def add(self, o, lse, ref_o, ref_lse):
        """o [r, h, d] as the kernel wrote it, lse [r, h] (or None), ref_* from reference_rows."""
        import torch
        od = o.double()
        self.rows += o.shape[0]
        self.nan_rows += int(torch.isnan(od).flatten(1).any(dim=1).sum().item())
        self.diff2 += float(((od - ref_o) ** 2).sum().item())
        self.ref2 += float((ref_o ** 2).sum().item())
        if lse is not None and lse.numel():
            got = lse.double()
            finite = torch.isfinite(ref_lse)
            err = torch.where(finite, (got - ref_lse).abs() / ref_lse.abs().clamp(min=1.0),
                              torch.where(got == float("-inf"), 0.0, float("inf")))
            err = torch.where(torch.isnan(got), float("inf"), err)
            self.lse = max(self.lse, float(err.max().item()))

    @property
    def o(self):
        return math.sqrt(self.diff2 / self.ref2) if self.ref2 > 0 else math.sqrt(self.diff2)

    def passed(self, o_bound, lse_bound=None):
        ok = self.o <= o_bound and self.nan_rows == 0  # False for NaN
        return ok and (lse_bound is None or self.lse <= lse_bound)


def errors(o, lse, ref_o, ref_lse):
    o_err = ((o.double() - ref_o).norm() / ref_o.norm()).item()
    lse_err = ((lse.double() - ref_lse).abs() / ref_lse.abs().clamp(min=1.0)).max().item()
    return o_err, lse_err


O_BOUND = {"bf16": 6e-3, "fp16": 1e-3}  # as src/verify/check.hpp
LSE_BOUND = 1e-4
# FP8 operands (spec dtype=e4m3): O's relative L2 error against float64 on the dequantised Q, K and V. The kernel
# rounds P to e4m3 for the P V GEMM (as FlashAttention-3 does); everything else is float32 (Q K^T of e4m3 codes is
# exact in its float32 products, the descales and the softmax are float32) or finer than P's rounding (O's one
# rounding to bf16, 2^-9). e4m3 keeps 3 mantissa bits: a normal P_j rounds with a relative error |d_j| <= 2^-4
# (half its 2^-3 step). O's error is then sum_j P_j d_j v_j / l against O = sum_j P_j v_j / l; over values v with
# independent zero-mean entries its mean square relative to O's is the P_j^2-weighted mean of d_j^2, at most
# (2^-4)^2, so the rel-L2 error stays below 2^-4 = 0.0625 (about 0.027 for P's spread over its binades, the mean of
# d^2 being (2^-4)^2 / 3 x E[1/m^2] for mantissas m in [1, 2)). The P's below e4m3's normal range (2^-6 of the
# running max's weight; flashjit's P is at most 1 there, 2^8 with a stale max) round on the subnormals' absolute
# step of 2^-9, a larger relative error each, on weights each below 2^-6 of the row's largest: a simulation of
# this rounding (N(0, s^2) scores, s 0.5 to 4, 1k to 8k keys, P <= 1 and P <= 2^8) gives 0.013 to 0.029, under
# half the bound. LSE comes from the float32 scores and sums, never from the rounded P: the 16-bit LSE_BOUND holds.
FP8_O_BOUND = 2.0 ** -4
E4M3_MAX = 448.0  # float8_e4m3fn's largest finite value


# ---- e4m3 codes -------------------------------------------------------------------------------------
def quantize_e4m3(x, descale=None):
    """x (a float tensor) as e4m3 codes with one scale for the tensor: (codes torch.float8_e4m3fn, descale float32
    [1]) with x ~ codes x descale. The descale is 2^ceil(log2(amax / 448)), the inverse of the scale the cuDNN
    frontend's FP8 guide suggests (448 / amax rounded down to a power of two): a power of two, so code x descale is
    exact in float32, bf16 and fp16 and every kernel, 16-bit or FP8, sees the same values. descale: a float to use
    instead. Codes are rounded to nearest (torch's cast), saturated at +-448."""
    import torch
    if descale is None:
        amax = float(x.abs().max().item())
        descale = 2.0 ** math.ceil(math.log2(amax / E4M3_MAX)) if amax > 0 else 1.0
    codes = (x.float() / descale).clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes, torch.tensor([descale], device=x.device, dtype=torch.float32)


def dequantize(codes, scale, dtype=None):
    """The values e4m3 codes [..., heads, d] stand for, code x scale (FP8 K/V CACHE in flashjit.h), in float64 (or
    dtype): scale a float, a one-element tensor or [heads] (one a head; index [batch, heads_kv] scales by the
    sequence first). float64 holds code x float32 scale exactly: the float64 reference's input."""
    values = codes.float().double()  # through float32, which holds every e4m3 value
    if isinstance(scale, (int, float)):
        values = values * float(scale)
    elif scale.numel() == 1:
        values = values * float(scale.reshape(-1)[0].item())
    else:
        values = values * scale.double().reshape(-1, 1)
    return values if dtype is None else values.to(dtype)


# ---- dense cases -----------------------------------------------------------------------------------
def run_case(fj, name, dtype, d, causal, b, sq, sk, hq, hkv, packed=False, graph=False):
    import torch
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    spec = f"dtype={dtype},head_dim={d},causal={int(causal)}"
    gen = torch.Generator(device="cuda").manual_seed(1234)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(tdtype)

    if packed:  # one [b, s, hq + 2 hkv, d] tensor; Q, K, V are strided views of it
        qkv = rand(b, sq, hq + 2 * hkv, d)
        q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
    else:
        q, k, v = rand(b, sq, hq, d), rand(b, sk, hkv, d), rand(b, sk, hkv, d)
    o = torch.full((b, sq, hq, d), float("nan"), device="cuda", dtype=tdtype)
    lse = torch.full((b, hq, sq), float("nan"), device="cuda", dtype=torch.float32)
    scale = 1.0 / math.sqrt(d)

    runs = []
    if graph:
        fj.forward(spec, q, k, v, o, lse, scale)  # first launch outside the capture (kernel loaded already)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fj.forward(spec, q, k, v, o, lse, scale)
        for replay in range(3):
            with torch.no_grad():
                for t in (q, k, v):
                    t.copy_(rand(*t.shape))
                o.fill_(float("nan"))
                lse.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            runs.append((f"replay {replay}", errors(o, lse, *reference(q, k, v, causal, scale))))
    else:
        fj.forward(spec, q, k, v, o, lse, scale)
        torch.cuda.synchronize()
        runs.append(("", errors(o, lse, *reference(q, k, v, causal, scale))))

    ok = True
    for label, (o_err, lse_err) in runs:
        passed = o_err <= O_BOUND[dtype] and lse_err <= LSE_BOUND and not math.isnan(o_err) and not math.isnan(lse_err)
        ok &= passed
        print(f"{'ok  ' if passed else 'FAIL'} {name:<34} {spec:<32} b={b} sq={sq} sk={sk} hq={hq} hkv={hkv} "
              f"{label:<9} O err {o_err:.2e}  LSE err {lse_err:.2e}")
    return ok


CASES = [
    # name, dtype, head_dim, causal, batch, seqlen_q, seqlen_k, heads_q, heads_kv, extra
    ("mha", "bf16", 128, False, 2, 512, 512, 8, 8, {}),
    ("gqa causal, seqlen_q < seqlen_k", "bf16", 128, True, 2, 300, 1000, 16, 4, {}),
    ("mqa fp16", "fp16", 64, True, 1, 777, 777, 8, 1, {}),
    ("head_dim 256", "bf16", 256, False, 1, 200, 333, 4, 2, {}),
    ("packed qkv (strided views)", "fp16", 128, True, 2, 384, 384, 8, 2, {"packed": True}),
    ("cuda graph, new data each replay", "bf16", 64, True, 2, 256, 640, 8, 2, {"graph": True}),
]


# ---- engine cases: packed queries against a paged KV cache ------------------------------------------
ENGINE_SPEC = "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1"


class PagedBatch:
    """Device buffers for mixed batches within fixed upper bounds (what a captured graph keeps): packed
    Q/O [total_q, hq, d] (rows past the last sequence stay untouched), LSE [hq, total_q], K/V pools
    [num_pages, page_size, hkv, d] (two tensors, or K and V of each page side by side in one
    [num_pages, 2, page_size, hkv, d] cache), cu_seqlens_q [batch + 1], seqused_k [batch] and
    block_table [batch, ceil(max_k / page_size)]. load() rewrites their contents in place."""

    def __init__(self, *, batch, max_q, max_k, total_q, num_pages, page_size, hq, hkv, d, dtype, kv_in_one_tensor=False):
        import torch
        self.batch, self.max_q, self.max_k, self.page_size = batch, max_q, max_k, page_size
        self.hq, self.hkv, self.d, self.dtype = hq, hkv, d, dtype
        self.pages_per_sequence = -(-max_k // page_size)
        self.q = torch.empty(total_q, hq, d, device="cuda", dtype=dtype)
        self.o = torch.empty_like(self.q)
        self.lse = torch.empty(hq, total_q, device="cuda", dtype=torch.float32)
        if kv_in_one_tensor:
            self.kv = torch.empty(num_pages, 2, page_size, hkv, d, device="cuda", dtype=dtype)
            self.k, self.v = self.kv[:, 0], self.kv[:, 1]
        else:
            self.kv = None
            self.k = torch.empty(num_pages, page_size, hkv, d, device="cuda", dtype=dtype)
            self.v = torch.empty_like(self.k)
        self.cu_seqlens_q = torch.zeros(batch + 1, device="cuda", dtype=torch.int32)
        self.seqused_k = torch.zeros(batch, device="cuda", dtype=torch.int32)
        self.block_table = torch.full((batch, self.pages_per_sequence), -1, device="cuda", dtype=torch.int32)
        self.addresses = self._addresses()

    def _addresses(self):
        return tuple(t.data_ptr() for t in (self.q, self.o, self.lse, self.k, self.v, self.cu_seqlens_q,
                                            self.seqused_k, self.block_table))

    def args(self, scale, max_splits=0):
        return engine_args(self.q, self.k, self.v, self.o, self.lse, seqlen_q=self.max_q, seqlen_k=self.max_k,
                           cu_seqlens_q=self.cu_seqlens_q, seqused_k=self.seqused_k, block_table=self.block_table,
                           scale=scale, max_splits=max_splits)

    def load(self, seqs, rng, gen, share=None):
        """A batch written in place: seqs = [(queries, keys), ...], the sequences past len(seqs) inactive
        (no queries, no keys); pages drawn from a shuffled pool, sequence share[1]'s first page replaced by
        sequence share[0]'s (a shared page); unused table entries -1; fresh random Q, K, V everywhere; O and
        LSE poisoned (NaN). Returns the host copy of the metadata (cu_seqlens_q, keys, table)."""
        import torch
        assert len(seqs) <= self.batch
        seqs = list(seqs) + [(0, 0)] * (self.batch - len(seqs))
        cu = [0]
        for sq, sk in seqs:
            assert 0 <= sq <= self.max_q and 0 <= sk <= self.max_k, (sq, sk)
            cu.append(cu[-1] + sq)
        assert cu[-1] < self.q.shape[0], "no spare row past the last sequence"
        pool = list(range(self.k.shape[0]))
        rng.shuffle(pool)
        table = [[-1] * self.pages_per_sequence for _ in seqs]
        used = 0
        for b, (_, sk) in enumerate(seqs):
            for i in range(-(-sk // self.page_size)):
                table[b][i] = pool[used]
                used += 1
        assert used <= len(pool), "not enough pages"
        if share is not None and table[share[0]][0] >= 0 and table[share[1]][0] >= 0:
            table[share[1]][0] = table[share[0]][0]
        keys = [sk for _, sk in seqs]

        def rand(t):
            t.copy_(torch.randn(t.shape, generator=gen, device="cuda", dtype=torch.float32).to(t.dtype))

        with torch.no_grad():
            self.cu_seqlens_q.copy_(torch.tensor(cu, dtype=torch.int32))
            self.seqused_k.copy_(torch.tensor(keys, dtype=torch.int32))
            self.block_table.copy_(torch.tensor(table, dtype=torch.int32))
            rand(self.q)
            for t in ((self.kv,) if self.kv is not None else (self.k, self.v)):
                rand(t)
            self.o.fill_(float("nan"))
            self.lse.fill_(float("nan"))
        assert self._addresses() == self.addresses, "a tensor moved"
        return cu, keys, table

    def check(self, cu, keys, table, scale, causal=True):
        """O and LSE of every sequence against reference_rows (K/V gathered through the table), and the rows
        past the last sequence untouched (still NaN). Returns (ErrorSum, problem or "")."""
        import torch
        errs = ErrorSum()
        for b, sk in enumerate(keys):
            r0, r1 = cu[b], cu[b + 1]
            if r1 == r0:
                continue
            pages = torch.tensor(table[b][:-(-sk // self.page_size)], dtype=torch.long, device="cuda")
            k = self.k[pages].reshape(-1, self.hkv, self.d)[:sk]
            v = self.v[pages].reshape(-1, self.hkv, self.d)[:sk]
            ref_o, ref_lse = reference_rows(self.q[r0:r1], k, v, None, causal, scale)
            errs.add(self.o[r0:r1], self.lse[:, r0:r1].t(), ref_o, ref_lse)
        problem = ""
        if not (torch.isnan(self.o[cu[-1]:]).all() and torch.isnan(self.lse[:, cu[-1]:]).all()):
            problem = f"rows past the last sequence (from {cu[-1]}) were written"
        return errs, problem


def describe(seqs):
    return " ".join(f"{sq}/{sk}" for sq, sk in seqs)


def report_engine(name, label, seqs, errs, problem):
    passed = errs.passed(O_BOUND["bf16"], LSE_BOUND) and not problem
    print(f"{'ok  ' if passed else 'FAIL'} {name:<34} {label:<9} q/k: {describe(seqs)}  "
          f"O err {errs.o:.2e}  LSE err {errs.lse:.2e}" + (f"  unwritten rows {errs.nan_rows}" if errs.nan_rows else "")
          + (f"  {problem}" if problem else ""))
    return passed


def engine_step_case(fj, name):
    """One engine step: decodes (1 query), a speculative sequence (4), a prefill chunk against a cached
    prefix (300 against 812 keys), a fresh prefill (129/129), an empty sequence and one with more queries
    than keys (its first row sees no key), packed, against a paged cache (page 16, shuffled, one page
    shared by the first decode and the speculative sequence)."""
    import torch
    seqs = [(1, 1000), (1, 37), (4, 517), (0, 0), (300, 812), (129, 129), (3, 2)]
    page = 16
    pages = sum(-(-sk // page) for _, sk in seqs)
    batch = PagedBatch(batch=len(seqs), max_q=320, max_k=1024, total_q=sum(sq for sq, _ in seqs) + 3,
                       num_pages=pages + 5, page_size=page, hq=8, hkv=2, d=128, dtype=torch.bfloat16)
    rng, gen = random.Random(23), torch.Generator(device="cuda").manual_seed(23)
    scale = float32(1.0 / math.sqrt(128))
    cu, keys, table = batch.load(seqs, rng, gen, share=(0, 2))
    args = batch.args(scale)
    fj.check_metadata(ENGINE_SPEC, args)
    fj.launch(ENGINE_SPEC, args)
    torch.cuda.synchronize()
    return report_engine(name, "", seqs, *batch.check(cu, keys, table, scale))


def engine_graph_case(fj, name):
    """One launch captured in a CUDA graph with capacity for 8 sequences (320 queries, 1024 keys each, 400
    rows, 300 pages of 16 in one K/V cache tensor), replayed after new lengths, a new block table, other
    active sequences and new data were written into the same tensors."""
    import torch
    problems = [
        [(1, 700), (4, 64), (250, 1024), (1, 1), (0, 0), (17, 300)],
        [(1, 1024), (1, 900), (1, 15), (320, 320), (0, 0), (4, 1000), (60, 100), (2, 1)],
        [(0, 0), (128, 1000)],
    ]
    batch = PagedBatch(batch=8, max_q=320, max_k=1024, total_q=400, num_pages=300, page_size=16, hq=8, hkv=2, d=128,
                       dtype=torch.bfloat16, kv_in_one_tensor=True)
    rng, gen = random.Random(24), torch.Generator(device="cuda").manual_seed(24)
    scale = float32(1.0 / math.sqrt(128))
    batch.load(problems[0], rng, gen, share=(0, 2))
    args = batch.args(scale)  # bounds and addresses frozen here
    fj.check_metadata(ENGINE_SPEC, args)
    fj.launch(ENGINE_SPEC, args)  # first launch outside the capture (kernel loaded already)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fj.launch(ENGINE_SPEC, args)
    ok = True
    for replay, seqs in enumerate(problems):
        cu, keys, table = batch.load(seqs, rng, gen, share=(0, 1))
        fj.check_metadata(ENGINE_SPEC, args)
        g.replay()
        torch.cuda.synchronize()
        ok &= report_engine(name, f"replay {replay}", seqs, *batch.check(cu, keys, table, scale))
    return ok


DECODE_SPEC = "dtype=bf16,head_dim=128,varlen=1,paged=1,pack_gqa=1,split_kv=1"


def decode_graph_case(fj, name):
    """A decode step loop as an engine runs it (DECODE in flashjit.h): 32 query heads over 8 K/V heads
    packed into one tile per K/V head, each sequence's keys split across CTAs into a workspace sized once,
    the step captured once in a CUDA graph and replayed as the sequences grow, finish and start."""
    import torch
    steps = [
        [(1, 3000), (1, 17), (1, 1), (1, 2048), (1, 500)],
        [(1, 3001), (1, 18), (1, 2), (1, 2049)],  # one sequence finished
        [(1, 3002), (0, 0), (1, 3), (1, 2050), (1, 4000), (1, 64)],  # one empty slot, two new
    ]
    batch = PagedBatch(batch=6, max_q=1, max_k=4096, total_q=8, num_pages=1600, page_size=16, hq=32, hkv=8, d=128,
                       dtype=torch.bfloat16)
    rng, gen = random.Random(25), torch.Generator(device="cuda").manual_seed(25)
    scale = float32(1.0 / math.sqrt(128))
    batch.load(steps[0], rng, gen)
    args = batch.args(scale, max_splits=16)
    workspace = fj.alloc_workspace(DECODE_SPEC, args)  # once, for the upper bounds
    fj.launch(DECODE_SPEC, args)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fj.launch(DECODE_SPEC, args)
    ok = True
    for step, seqs in enumerate(steps):
        cu, keys, table = batch.load(seqs, rng, gen)
        g.replay()
        torch.cuda.synchronize()
        errs, problem = batch.check(cu, keys, table, scale, causal=False)
        ok &= report_engine(name, f"step {step}", seqs, errs, problem)
    del workspace
    return ok


ENGINE_CASES = [
    ("engine step: mixed batch, paged 16", engine_step_case),
    ("engine graph: new lengths in place", engine_graph_case),
    ("decode graph: split-KV, packed GQA", decode_graph_case),
]


def default_lib():
    here = os.path.dirname(os.path.abspath(__file__))
    for build in ("build", "build-api", "build-gpu"):
        path = os.path.join(here, "..", "..", build, "libflashjit.so")
        if os.path.exists(path):
            return os.path.normpath(path)
    return "libflashjit.so"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", default=default_lib(), help="path to libflashjit.so")
    args = parser.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"skipped: PyTorch is not installed ({e})")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no GPU (torch.cuda.is_available() is False)")
        return 0
    torch.cuda.init()
    fj = Flashjit(args.lib, torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {args.lib} on "
          f"{torch.cuda.get_device_name()} (torch {torch.__version__})")
    failed = 0
    for name, dtype, d, causal, b, sq, sk, hq, hkv, extra in CASES:
        try:
            failed += not run_case(fj, name, dtype, d, causal, b, sq, sk, hq, hkv, **extra)
        except FlashjitError as e:
            print(f"FAIL {name}: {e}")
            failed += 1
    try:
        print(f"engine spec {ENGINE_SPEC}: resolved {fj.kernel(ENGINE_SPEC)[1]}")
    except FlashjitError as e:
        print(f"engine spec {ENGINE_SPEC}: {e}")  # the engine cases fail below with the same error
    for name, case in ENGINE_CASES:
        try:
            failed += not case(fj, name)
        except Exception as e:  # noqa: BLE001 -- a failing case is reported, the others still run
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            failed += 1
    fj.close()
    total = len(CASES) + len(ENGINE_CASES)
    print(f"{total - failed} of {total} cases match the float64 reference" + ("" if failed else ": ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
