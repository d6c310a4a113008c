"""The torch side: tensor checks, the custom op flashjit::fwd (torch.compile traces it, CUDA graphs capture
it), and the launch. Imported by flashjit when torch imports; nothing here runs without torch.

The launch path (forward) is the hot path: one dict lookup for the kernel and its plan, the argument struct
written with one struct.pack_into, one ctypes call on the current stream. A call like an earlier checked one
(the same shapes, strides, dtypes, devices and scalar arguments) takes the fast path: one dict lookup on that
signature, the remembered argument bytes with the new pointers, the ctypes call. Kernels are fetched
(compiled or loaded) on the first call for a plan, never inside a CUDA graph capture."""
import ctypes
import struct
import threading
from typing import Optional

import torch

from . import _capi, _plan
from ._capi import FlashjitError
from ._plan import plan

_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
_FP8 = getattr(torch, "float8_e4m3fn", None)  # K and V of an FP8 cache (kv_dtype=e4m3), or Q, K and V (dtype=e4m3)
_E4M3_CACHE, _E4M3_OPERANDS = 1, 2  # forward's fp8: an FP8 K/V cache under a 16-bit q; FP8 Q, K and V
_PACK = _capi.ARGS_PACKER.pack_into
_ARGS_SIZE = _capi.ARGS_SIZE
_byref = ctypes.byref
_MAX_PLANS = 4096  # plans cached per device before the cache starts over (engines vary max_seqlen_q)

try:
    _raw_stream = torch._C._cuda_getCurrentRawStream  # what Inductor's generated code calls: an int, no object
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

# The C fields' names, as the Python arguments call them (errors name both).
_FIELD_NAMES = {"q": "q", "k": "k (k_cache)", "v": "v (v_cache)", "o": "out", "lse": "softmax_lse",
                "cu_seqlens_q": "cu_seqlens_q", "cu_seqlens_k": "cu_seqlens_k",
                "seqused_k": "seqused_k (cache_seqlens)", "block_table": "block_table (page_table)",
                "page_size": "the page size (k_cache.shape[1])", "num_pages": "the page count (k_cache.shape[0])",
                "seqlen_q": "max_seqlen_q", "seqlen_k": "max_seqlen_k", "heads_q": "q's heads",
                "heads_kv": "k's heads", "head_dim": "head_dim", "batch": "the batch size", "workspace": "workspace",
                "k_scale": "k_descale", "v_scale": "v_descale", "q_scale": "q_descale", "qv": "qv"}


def _python_name(field):
    name = field[5:] if field.startswith("args.") else field
    base = name.split(".")[0].split("[")[0]
    for suffix in ("_strides",):
        base = base[:-len(suffix)] if base.endswith(suffix) else base
    return _FIELD_NAMES.get(base, name)


class _Device:
    """One CUDA device: its flashjit context (the primary context, which torch uses too), the kernels
    fetched for it, the launch plans, the split workspaces by stream."""

    def __init__(self, index):
        lib = _capi.library()
        self.index = index
        self.lib = lib
        self.context = lib.create_context(index)
        self.sm_count = torch.cuda.get_device_properties(index).multi_processor_count
        self.kernels = {}      # spec -> handle
        self.resolved = {}     # spec -> the library's resolved spec of its kernel (what it defaults to, spelled out)
        self.plans = {}        # launch key -> (handle, spec, max_splits)
        self.workspaces = {}   # slot -> uint8 tensor: a raw stream (the largest asked for on that stream), or
                               # (stream, layout) for a workspace with counters (zeroed, its own per layout)
        self.sizes = {}        # _workspace_bytes: (spec, bounds, counters) -> workspace (or counter) bytes
        self.lock = threading.Lock()
        self.ones = None       # float32 [1] = 1.0: an FP8 cache's scale where no descale is given (unit_scale)
        with torch.cuda.device(index):
            if not torch.cuda.is_current_stream_capturing():
                self.unit_scale()

    def unit_scale(self):
        """The device pointer of a float32 1.0 on this device, made once (outside captures; the launches never
        allocate it): the scale of an FP8 cache's K or V given no descale, as FA3 reads a missing descale."""
        if self.ones is None:
            with torch.cuda.device(self.index):
                if torch.cuda.is_current_stream_capturing():
                    raise FlashjitError(
                        f"flashjit: an FP8 cache without k_descale or v_descale needs a 1.0 on cuda:{self.index}, made "
                        "outside a CUDA graph capture (the graph's pool would own it): call the attention function "
                        "once before capturing, or pass the descales")
                ones = torch.ones(1, dtype=torch.float32, device=torch.device("cuda", self.index))
                torch.cuda.current_stream().synchronize()  # written on this stream, read from any
            self.ones = ones
        return self.ones.data_ptr()

    def kernel(self, spec):
        handle = self.kernels.get(spec)
        if handle is not None:
            return handle
        with torch.cuda.device(self.index):
            capturing = torch.cuda.is_current_stream_capturing()
        if capturing:
            raise FlashjitError(
                f"flashjit: kernel '{spec}' is not loaded on cuda:{self.index} and a CUDA graph capture is running: "
                "loading a module inside a capture breaks it. Call the attention function once with these shapes "
                f"before capturing, or flashjit.prewarm(['{spec}']) on this device first.")
        with self.lock:
            if spec not in self.kernels:
                handle, self.resolved[spec] = self.lib.kernel_get(self.context, spec)
                self.kernels[spec] = handle
        return self.kernels[spec]


_devices = {}
_devices_lock = threading.Lock()


def device(index):
    dev = _devices.get(index)
    if dev is None:
        with _devices_lock:
            dev = _devices.get(index)
            if dev is None:
                dev = _devices[index] = _Device(index)
    return dev


def _workspace_bytes(dev, spec, max_splits, args, total_q, heads_q, counters=False):
    """The workspace a launch needs (flashjit_attention_workspace_size), or with counters its leading counters'
    part (flashjit_attention_workspace_counter_bytes), remembered by what they depend on: the spec and the upper
    bounds, the batch and seqlen_q among them (combine=inline's merge counters are a word per sequence and query
    block)."""
    key = (spec, max_splits, total_q, heads_q, args.batch, args.seqlen_q, counters)
    nbytes = dev.sizes.get(key)
    if nbytes is None:
        if len(dev.sizes) > _MAX_PLANS:
            dev.sizes.clear()
        size = dev.lib.workspace_counter_bytes if counters else dev.lib.workspace_size
        nbytes = dev.sizes[key] = size(spec, args)
    return nbytes


def _workspace_layout(dev, spec, max_splits, total_q, heads_q, batch, seqlen_q):
    """None for a plain split workspace (any launch on the stream may use it), else what the layout of its
    counters and partials depends on (a kernel whose resolved spec keeps counters there: launches share it only
    with the same layout)."""
    counters = _plan.workspace_has_counters(dev.resolved.get(spec, spec))
    return (spec, max_splits, total_q, heads_q, batch, seqlen_q) if counters else None


def _stream_workspace(dev, stream, nbytes, layout=None):
    """The stream's split workspace, grown to nbytes where it is smaller (outside captures); with a layout, the
    stream's workspace for that layout, zeroed when made (the kernels leave its counters at zero)."""
    slot = stream if layout is None else (stream, layout)
    ws = dev.workspaces.get(slot)
    if ws is None or ws.numel() < nbytes:
        make = torch.empty if layout is None else torch.zeros
        ws = dev.workspaces[slot] = make(nbytes, dtype=torch.uint8, device=torch.device("cuda", dev.index))
    return ws.data_ptr(), ws.numel()


def _workspace(dev, spec, max_splits, args, total_q, heads_q, stream, layout=None):
    """(pointer, bytes) of a split workspace: per stream, the largest asked for there (reused: launches on one
    stream run in order); inside a capture a fresh one from the graph's pool, owned by the graph."""
    nbytes = _workspace_bytes(dev, spec, max_splits, args, total_q, heads_q)
    if torch.cuda.is_current_stream_capturing():
        # From the graph's private pool: the graph keeps that memory for its replays (FA3 allocates its split
        # partials the same way), and later allocations of the same capture reuse it in stream order. Counters
        # are zeroed in the graph (a memset node before the launch), they alone: not the partials after them.
        ws = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", dev.index))
        if layout is not None:
            counters = _workspace_bytes(dev, spec, max_splits, args, total_q, heads_q, counters=True)
            if counters:
                ws[:counters].zero_()
        return ws.data_ptr(), nbytes
    return _stream_workspace(dev, stream, nbytes, layout)


def _rows(t):
    """(batch, row, head) strides of a packed [rows, heads, d] tensor (the batch stride is not used)."""
    s = t.stride()
    return s[0], s[0], s[1]


def forward(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
            softmax_scale, causal, num_splits, pack_gqa, return_lse, record=None, features=None, kv_scales=None,
            qv=None):
    """One launch on the current stream of q's device. Tensors were checked by the caller (check_* below);
    returns the LSE tensor, or None when not wanted. record (a list): gets the launch's _FastLaunch, for the
    fast path of later calls like this one. features: the call's masks and score modifiers (_plan.Features,
    checked by check_features), None when off. kv_scales: an FP8 cache's descales (_plan.KvScales, checked by
    check_kv_scales; None with K and V of torch.float8_e4m3fn: 1.0 for both). qv: FA3's split MLA form (spec key
    qv=1; flashjit.h, MLA SPLIT FORM), laid out as q (packed rows with cu_seqlens_q) with V's head dim; q and k are
    then the rotary columns, and the spec's head_dim is q's and qv's columns together."""
    index = q.get_device()
    dev = _devices.get(index) or device(index)
    dtype = q.dtype  # FP8 operands: e4m3 (O's type is out's)
    heads_q, head_dim = q.shape[-2], q.shape[-1]
    heads_kv, head_dim_v = k.shape[-2], v.shape[-1]  # V's (and O's) head dim: Q's or below (spec key head_dim_v)
    qv_width, qvs = 0, (0, 0, 0)
    if qv is not None:  # the spec's head_dim: q's and qv's columns (576 = 64 + 512); head_dim_v: qv's and V's
        qv_width = qv.shape[-1]
        head_dim += qv_width
    varlen = cu_seqlens_q is not None
    paged = block_table is not None
    total_q = total_k = num_pages = page_size = bt_stride = 0
    if varlen:
        total_q, batch, seqlen_q = q.shape[0], cu_seqlens_q.shape[0] - 1, max_seqlen_q
        qs, os_ = _rows(q), _rows(out)
        if qv is not None:
            qvs = _rows(qv)
    else:
        batch, seqlen_q = q.shape[0], q.shape[1]
        qs, os_ = q.stride()[:3], out.stride()[:3]
        if qv is not None:
            qvs = qv.stride()[:3]
    if paged:
        num_pages, page_size, seqlen_k = k.shape[0], k.shape[1], max_seqlen_k
        ks, vs, bt_stride = k.stride()[:3], v.stride()[:3], block_table.stride(0)
    elif cu_seqlens_k is not None:
        total_k, seqlen_k = k.shape[0], max_seqlen_k
        ks, vs = _rows(k), _rows(v)
    else:
        seqlen_k = k.shape[1]
        ks, vs = k.stride()[:3], v.stride()[:3]
    if batch == 0 or seqlen_q == 0 or seqlen_k == 0 or q.shape[0] == 0:
        return _without_launch(q, out, varlen, batch, seqlen_q, seqlen_k, heads_q, total_q, return_lse)
    feature_keys = features.spec_keys() if features is not None else ()
    fp8 = (_E4M3_OPERANDS if dtype is _FP8 else _E4M3_CACHE) if k.dtype is _FP8 else 0
    key = (dtype, head_dim, head_dim_v, causal, varlen, paged, batch, seqlen_q, heads_q, heads_kv, num_splits, pack_gqa,
           feature_keys, fp8, out.dtype, qv_width, qv_width and _plan.QV_V_IN_K)
    planned = dev.plans.get(key)
    if planned is None:
        if len(dev.plans) > _MAX_PLANS:
            dev.plans.clear()
        if fp8 == _E4M3_OPERANDS:  # FA3's FP8: spec dtype=e4m3, O bf16 (the default) or fp16
            spec, max_splits = plan(dev.sm_count, _plan.DTYPE_E4M3, head_dim, causal, varlen, paged, batch, seqlen_q,
                                    heads_q, heads_kv, num_splits, pack_gqa, feature_keys, None, _DTYPES[out.dtype],
                                    head_dim_v, bool(qv_width))
        else:
            spec, max_splits = plan(dev.sm_count, _DTYPES[dtype], head_dim, causal, varlen, paged, batch, seqlen_q,
                                    heads_q, heads_kv, num_splits, pack_gqa, feature_keys,
                                    _plan.KV_DTYPE_E4M3 if fp8 else None, None, head_dim_v, bool(qv_width))
        if feature_keys:
            _plan.require_feature_keys(dev.lib, spec, feature_keys)
        if qv_width:  # a width the split form does not take: NotImplementedError naming qv, the library's reason
            _plan.require_qv(dev.lib, spec, head_dim - qv_width, qv_width)
        planned = dev.plans[key] = (dev.kernel(spec), spec, max_splits)
    handle, spec, max_splits = planned
    lse = None
    if return_lse:
        shape = (heads_q, total_q) if varlen else (batch, heads_q, seqlen_q)
        lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    k_scale = v_scale = k_scale_batch = k_scale_head = v_scale_batch = v_scale_head = 0
    q_scale = q_scale_batch = q_scale_head = 0
    if fp8:  # strides in bytes: K and V's (and FP8 Q's) strides above are, at one byte an element
        k_scale, v_scale = _scale_pointers(dev, kv_scales)
        if kv_scales is not None:
            (k_scale_batch, k_scale_head), (v_scale_batch, v_scale_head) = kv_scales.k_strides, kv_scales.v_strides
            if fp8 == _E4M3_OPERANDS and kv_scales.q is not None:  # q_descale; none: q_scale 0, which reads as 1
                q_scale, (q_scale_batch, q_scale_head) = kv_scales.q.data_ptr(), kv_scales.q_strides
    args = _capi.AttentionArgs()
    stream = _raw_stream(index)
    _PACK(args, 0, _ARGS_SIZE, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
          lse.data_ptr() if lse is not None else 0,
          batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, *qs, *ks, *vs, *os_,
          softmax_scale, 0.0, -1, -1,
          cu_seqlens_q.data_ptr() if varlen else 0, cu_seqlens_k.data_ptr() if cu_seqlens_k is not None else 0,
          seqused_k.data_ptr() if seqused_k is not None else 0, block_table.data_ptr() if paged else 0,
          bt_stride, page_size, num_pages, total_q, total_k, 0, 0, max_splits, 0,
          0, 0, 0, 0, 0,  # attention_chunk, sinks_dtype, sinks, alibi_slopes, alibi_batch_stride: _fill_features
          k_scale, v_scale, k_scale_batch, k_scale_head, v_scale_batch, v_scale_head,
          q_scale, q_scale_batch, q_scale_head,
          qv.data_ptr() if qv is not None else 0, *qvs)  # qv, qv_strides (off: 0)
    if features is not None:
        _fill_features(args, features, heads_q)
    layout = _workspace_layout(dev, spec, max_splits, total_q, heads_q, batch, seqlen_q) if max_splits else None
    if record is not None and features is None:  # the fast path's argument bytes hold no feature pointers
        record.append(_FastLaunch(dev, handle, spec, bytes(args), max_splits and _workspace_bytes(dev, spec, max_splits, args, total_q, heads_q),
                                  layout, fp8, qv=qv is not None))
    if max_splits:
        args.workspace, args.workspace_bytes = _workspace(dev, spec, max_splits, args, total_q, heads_q, stream, layout)
    status = dev.lib.forward(handle, _byref(args), stream)
    if status != 0:
        raise library_error(dev.lib, status, f"attention_forward({spec})")
    return lse


def _scale_pointers(dev, kv_scales):
    """(k_scale, v_scale) device pointers of an FP8 launch: the descales given, else the device's 1.0 (made once; a
    missing q_descale is q_scale 0 instead, which the C API reads as 1)."""
    k = kv_scales.k if kv_scales is not None else None
    v = kv_scales.v if kv_scales is not None else None
    return (k.data_ptr() if k is not None else dev.unit_scale(), v.data_ptr() if v is not None else dev.unit_scale())


def _fill_features(args, features, heads_q):
    """The C fields of the masks and score modifiers (flashjit.h, MASKS AND SCORES)."""
    args.window_left, args.window_right = features.window_left, features.window_right
    args.attention_chunk, args.softcap = features.chunk, features.softcap
    if features.sinks is not None:
        args.sinks = features.sinks.data_ptr()
        args.sinks_dtype = _capi.DTYPE_BF16 if features.sinks.dtype == torch.bfloat16 else _capi.DTYPE_FP32
    if features.alibi_slopes is not None:
        args.alibi_slopes = features.alibi_slopes.data_ptr()
        args.alibi_batch_stride = features.alibi_slopes.stride(0) if features.alibi_slopes.dim() == 2 else 0


def check_features(fn, features, where):
    """The sink and slope tensors (shapes and dtypes checked by the interface) on q's device, contiguous."""
    if features is None:
        return
    for name, t in (("s_aux", features.sinks), ("alibi_slopes", features.alibi_slopes)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            _fail(fn, name, f"expected a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.device != where:
            _fail(fn, name, f"is on {t.device}; expected {where} (where q is)")
        if t.stride(-1) != 1:
            _fail(fn, name, f"the last dimension must be contiguous; strides {t.stride()}")


def check_kv_scales(fn, kv_scales, where):
    """An FP8 launch's descale tensors (dtypes and shapes checked by the interface) are torch tensors on q's
    device."""
    if kv_scales is None:
        return
    for name, t in (("k_descale", kv_scales.k), ("v_descale", kv_scales.v), ("q_descale", kv_scales.q)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            _fail(fn, name, f"expected a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.device != where:
            _fail(fn, name, f"is on {t.device}; expected {where} (where q is)")


def library_error(lib, status, what):
    """The library's last error on this thread as a FlashjitError that names the argument once: "flashjit: q:
    pointer 0x... is not 16-byte aligned (...) [attention_forward(spec): FLASHJIT_ERROR_INVALID_ARGUMENT]"."""
    err = lib.error(status, what)  # reads the status name, the message and the field
    message = lib.lib.flashjit_last_error_message().decode()
    if not err.field:
        return err
    message = message[len(err.field) + 2:] if message.startswith(err.field + ": ") else message
    return FlashjitError(f"flashjit: {_python_name(err.field)}: {message} [{what}: {err.status}]", status=err.status,
                         field=err.field)


def _without_launch(q, out, varlen, batch, seqlen_q, seqlen_k, heads_q, total_q, return_lse):
    """A call with nothing to launch, as FA3 answers it: no key (seqlen_k 0) gives O = 0 and LSE = -inf for
    every row; no query (or no sequence) writes nothing. Device operations only: capturable, no
    synchronisation. Returns the LSE as forward does."""
    if seqlen_k == 0:
        out.zero_()
    if not return_lse:
        return None
    shape = (heads_q, total_q) if varlen else (batch, heads_q, seqlen_q)
    return torch.full(shape, float("-inf"), dtype=torch.float32, device=q.device)


# ---- the fast path -------------------------------------------------------------------------------
# NOTES: an eager call pays for its Python checks and plan more than for the launch (36 us against the C
# API's 10 on the H200, issue 25). A call whose tensors have the shapes, strides, dtypes and devices, and
# whose other arguments the values, of an earlier call that passed the checks reuses that call's plan and
# argument bytes: only the pointers and the stream are new. The checks it skips depend on nothing else; the
# C API still checks every argument (pointer alignment included) on each new set. Not inside a torch.compile
# trace, nor for calls that return the LSE (they take the full path); inside a capture only plans without a
# split workspace (remembered). NOTES: the keys read each tensor's shape, strides, dtype and device inline:
# a function call and a nested tuple per tensor cost about 1 us of the key's 4 (eight tensors) on an H200
# host.
_fast = {}
_ARGS_FROM = _capi.AttentionArgs.from_buffer_copy
_PACK_IO = struct.Struct("<QQQQQ").pack_into       # q, k, v, o, lse at offset 8
_PACK_ENGINE = struct.Struct("<QQQQ").pack_into   # cu_seqlens_q, cu_seqlens_k, seqused_k, block_table
_ENGINE_AT = _capi.AttentionArgs.cu_seqlens_q.offset
_PACK_SCALES = struct.Struct("<QQ").pack_into    # k_scale, v_scale
_SCALES_AT = _capi.AttentionArgs.k_scale.offset
_PACK_Q_SCALE = struct.Struct("<Q").pack_into    # q_scale (FP8 operands)
_Q_SCALE_AT = _capi.AttentionArgs.q_scale.offset
_PACK_QV = _PACK_Q_SCALE                         # qv (FA3's split MLA form): one pointer too
_QV_AT = _capi.AttentionArgs.qv.offset
try:
    _capturing = torch._C._cuda_isCurrentStreamCapturing  # torch.cuda.is_current_stream_capturing's core
except AttributeError:  # pragma: no cover - older torch
    _capturing = torch.cuda.is_current_stream_capturing


def fast_path_open():
    return not torch.compiler.is_compiling()


def remembered(key):
    """The plan remembered for key if it may launch now, else None. A plan with a split workspace not inside a
    CUDA graph capture: the stream's workspace may be replaced after the capture (the full path takes one from
    the graph's pool). The capture check costs 0.3 us a call, so plans without a workspace skip it."""
    launch = _fast.get(key)
    return launch if launch is not None and (not launch.nbytes or not _capturing()) else None


class _FastLaunch:
    """A checked call's plan: the kernel, its argument bytes (pointers aside), the split workspace's size.
    NOTES: each call writes the new pointers into one argument buffer kept for the thread that made the plan
    and passes its address (no struct copy, no byref object per call); the C API copies the arguments before
    it returns. Another thread gets a fresh copy per call, so two threads never share a buffer. An FP8 plan (fp8:
    an FP8 cache, or FP8 operands) writes the scale pointers each call too (the call's descales, else the device's
    1.0; FP8 operands' q_descale, else 0, which reads as 1); their strides are the template's, from descales of
    the shapes and strides the call's key holds. A plan with qv (FA3's split MLA form) writes qv's pointer each call
    (its strides are the template's: the key holds qv's shape and strides)."""
    __slots__ = ("dev", "handle", "spec", "template", "nbytes", "layout", "forward", "index", "keep", "args", "at",
                 "owner", "workspace", "fp8", "qv")

    def __init__(self, dev, handle, spec, template, nbytes, layout=None, fp8=0, qv=False):
        self.dev, self.handle, self.spec, self.template, self.nbytes = dev, handle, spec, template, nbytes
        self.layout = layout  # _workspace_layout's: None, or the key of a workspace with counters
        self.fp8 = fp8  # forward's: 0, _E4M3_CACHE or _E4M3_OPERANDS
        self.qv = qv  # whether the launch has qv (its pointer written each call)
        self.forward, self.index, self.keep = dev.lib.forward_at, dev.index, None
        self.args = _ARGS_FROM(template)
        self.at = ctypes.addressof(self.args)
        self.owner = threading.get_ident()
        self.workspace = None  # the workspace tensor whose pointer self.args holds

    def __call__(self, q, k, v, o, cu_q, cu_k, used, table, kv_scales=None, qv=0):
        if threading.get_ident() == self.owner:
            args, at = self.args, self.at
        else:
            args = _ARGS_FROM(self.template)
            at = ctypes.addressof(args)
        _PACK_IO(args, 8, q, k, v, o, 0)
        _PACK_ENGINE(args, _ENGINE_AT, cu_q, cu_k, used, table)
        if self.qv:
            _PACK_QV(args, _QV_AT, qv)
        if self.fp8:
            _PACK_SCALES(args, _SCALES_AT, *_scale_pointers(self.dev, kv_scales))
            if self.fp8 == _E4M3_OPERANDS:
                _PACK_Q_SCALE(args, _Q_SCALE_AT, 0 if kv_scales is None or kv_scales.q is None else kv_scales.q.data_ptr())
        stream = _raw_stream(self.index)
        if self.nbytes:
            slot = stream if self.layout is None else (stream, self.layout)
            ws = self.dev.workspaces.get(slot)
            if ws is None or ws is not self.workspace or args is not self.args:
                args.workspace, args.workspace_bytes = _stream_workspace(self.dev, stream, self.nbytes, self.layout)
                if args is self.args:
                    self.workspace = self.dev.workspaces.get(slot)
        status = self.forward(self.handle, at, stream)
        if status != 0:
            raise library_error(self.dev.lib, status, f"attention_forward({self.spec})")


def remember(key, record, keep=None):
    """Stores the plan forward recorded for key (keep: tensors the plan's pointers need alive)."""
    if not record:
        return
    if len(_fast) > _MAX_PLANS:
        _fast.clear()
    record[0].keep = keep
    _fast[key] = record[0]


def prewarm_load(specs, index=None):
    """Fetches (compiles or loads) specs on a device (default: the current one), so that later calls, and
    captures, find them loaded."""
    dev = device(torch.cuda.current_device() if index is None else index)
    for spec in specs:
        dev.kernel(spec)


def loaded_specs():
    return sorted({spec for dev in _devices.values() for spec in dev.kernels})


# ---- the custom op: what torch.compile traces -----------------------------------------------------
@torch.library.custom_op("flashjit::fwd", mutates_args=("out",), device_types="cuda")
def fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, cu_seqlens_q: Optional[torch.Tensor],
        cu_seqlens_k: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor], block_table: Optional[torch.Tensor],
        max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, causal: bool, num_splits: int, pack_gqa: int,
        return_lse: bool, window_left: int = -1, window_right: int = -1, attention_chunk: int = 0, softcap: float = 0.0,
        sinks: Optional[torch.Tensor] = None, alibi_slopes: Optional[torch.Tensor] = None,
        k_descale: Optional[torch.Tensor] = None, v_descale: Optional[torch.Tensor] = None,
        q_descale: Optional[torch.Tensor] = None, qv: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Writes attention into out; returns the LSE (an empty tensor when return_lse is False). No checks here
    (the entry points checked; what the op adds in eager is torch's dispatch: its autograd and
    ADInplaceOrView kernels, the aliasing check), no synchronisation, no allocation per call but the LSE or
    that empty tensor. The masks and score modifiers default to off (the calls written before them pass 15
    arguments); k_descale, v_descale: an FP8 cache's or FP8 operands' (K and V of torch.float8_e4m3fn; None =
    1.0); q_descale: FP8 operands' (q of torch.float8_e4m3fn too; None = 1.0); qv: FA3's split MLA form's second
    query tensor (None: off)."""
    features = _plan.Features(window_left, window_right, attention_chunk, softcap, sinks, alibi_slopes)
    kv_scales = None
    if k.dtype is _FP8:
        def strides(t):
            return (0, 0) if t is None else _plan.descale_strides(t.shape, t.stride())
        kv_scales = _plan.KvScales(k_descale, v_descale, strides(k_descale), strides(v_descale),
                                   q_descale if q.dtype is _FP8 else None, strides(q_descale if q.dtype is _FP8 else None))
    lse = forward(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, num_splits, pack_gqa, return_lse, None, features if features else None, kv_scales,
                  qv)
    return lse if lse is not None else q.new_empty((0,), dtype=torch.float32)  # as the fake: no torch.device made


@fwd.register_fake
def _fwd_fake(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
              softmax_scale, causal, num_splits, pack_gqa, return_lse, window_left=-1, window_right=-1, attention_chunk=0,
              softcap=0.0, sinks=None, alibi_slopes=None, k_descale=None, v_descale=None, q_descale=None, qv=None):
    if not return_lse:
        return q.new_empty((0,), dtype=torch.float32)
    if cu_seqlens_q is not None:
        return q.new_empty((q.shape[-2], q.shape[0]), dtype=torch.float32)
    return q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


def _compiling():
    return torch.compiler.is_compiling()


def run(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
        softmax_scale, causal, num_splits, pack_gqa, return_lse, record=None, features=None, kv_scales=None, qv=None):
    """The op when torch.compile traces; in eager the same launch without the dispatcher (its cost per call
    is what engines calling once per layer pay)."""
    if _compiling():
        f = features if features is not None else _plan.Features()
        lse = fwd(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, int(max_seqlen_q),
                  int(max_seqlen_k), float(softmax_scale), bool(causal), int(num_splits), int(pack_gqa),
                  bool(return_lse), int(f.window_left), int(f.window_right), int(f.chunk), float(f.softcap), f.sinks,
                  f.alibi_slopes, None if kv_scales is None else kv_scales.k, None if kv_scales is None else kv_scales.v,
                  None if kv_scales is None else kv_scales.q, qv)
        return lse if return_lse else None
    return forward(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
                   softmax_scale, causal, num_splits, pack_gqa, return_lse, record, features, kv_scales, qv)


# ---- tensor checks (clear messages naming the argument) ------------------------------------------
def _fail(fn, name, what, exc=ValueError):
    raise exc(f"flashjit.{fn}: {name}: {what}")


def check_attention_tensors(fn, q, k, v, names, q_dims, kv_dims, qv=None):
    """q, k, v: tensors of q_dims / kv_dims dimensions on one CUDA device, fp16 or bf16 alike (or K and V an FP8
    cache: both torch.float8_e4m3fn; or all three torch.float8_e4m3fn, FP8 operands), head_dim contiguous, K's
    head_dim Q's and V's at most that (the interface checked the head dims' range), K and V alike in shape but for
    the head dim, heads_q a multiple of heads_kv. qv (FA3's split MLA form; None: off): a tensor like q (dtype,
    device, dimensions) with V's head dim, contiguous in it; V's head dim is then at most q's and qv's together."""
    tensors = ((q, names[0], q_dims), (k, names[1], kv_dims), (v, names[2], kv_dims))
    if qv is not None:
        tensors += ((qv, "qv", q_dims),)
    for t, name, dims in tensors:
        if not isinstance(t, torch.Tensor):
            _fail(fn, name, f"expected a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.dim() != dims:
            _fail(fn, name, f"expected {dims} dimensions ({_LAYOUTS[dims]}), got shape {tuple(t.shape)}")
        if t.stride(-1) != 1:
            _fail(fn, name, f"the last dimension (head_dim) must be contiguous (stride 1); strides {t.stride()}")
    dtype = q.dtype
    if _FP8 is not None and dtype == _FP8:  # FP8 operands: K and V too
        if k.dtype != _FP8 or v.dtype != _FP8:
            _fail(fn, f"{names[0]}, {names[1]} and {names[2]}", f"dtypes {dtype}, {k.dtype} and {v.dtype}; an FP8 "
                  f"{names[0]} needs {names[1]} and {names[2]} of {dtype} too (FA3's FP8 takes Q, K and V of one dtype)")
    elif dtype not in _DTYPES:
        _fail(fn, names[0], f"dtype {dtype} is not supported; flashjit takes torch.float16 or torch.bfloat16 (or "
                            "torch.float8_e4m3fn with K and V of it)", TypeError)
    elif k.dtype == _FP8:  # an FP8 cache: V too (the interface names both when they differ)
        if v.dtype != _FP8:
            _fail(fn, names[2], f"dtype {v.dtype} differs from {names[1]}'s {k.dtype} (an FP8 cache has both)", TypeError)
    elif k.dtype != dtype or v.dtype != dtype:
        bad = names[1] if k.dtype != dtype else names[2]
        _fail(fn, bad, f"dtype {(k if bad == names[1] else v).dtype} differs from {names[0]}'s {dtype}", TypeError)
    if qv is not None:
        if k.dtype == _FP8:
            raise NotImplementedError(f"flashjit.{fn}: qv: not supported with FP8 {names[1]} and {names[2]} (the split "
                                      "MLA form, spec key qv=1, runs fp16 and bf16)")
        if qv.dtype != dtype:
            _fail(fn, "qv", f"dtype {qv.dtype} differs from {names[0]}'s {dtype}", TypeError)
    if not q.is_cuda:
        _fail(fn, names[0], f"is on {q.device}; flashjit runs on CUDA devices")
    where = q.device  # (not get_device(): these checks are traced by torch.compile too)
    if k.device != where or v.device != where:
        bad = names[1] if k.device != where else names[2]
        _fail(fn, bad, f"is on {(k if bad == names[1] else v).device}, {names[0]} on {where}")
    d = q.shape[-1]
    if k.shape[-1] != d:
        _fail(fn, names[1], f"head_dim {k.shape[-1]} differs from {names[0]}'s {d}")
    if qv is not None:
        if qv.device != where:
            _fail(fn, "qv", f"is on {qv.device}, {names[0]} on {where}")
        want = (*q.shape[:-1], v.shape[-1])
        if tuple(qv.shape) != want:
            _fail(fn, "qv", f"shape {tuple(qv.shape)}; expected {want} ({names[0]}'s with {names[2]}'s head dim)")
        d += qv.shape[-1]  # the spec's head_dim: q's and qv's columns
    if v.shape[-1] > d:
        _fail(fn, names[2], f"head_dim {v.shape[-1]} is above {names[0]}'s {d} (V's head dim may be Q's or below)")
    if k.shape[:-1] != v.shape[:-1]:
        _fail(fn, names[2], f"shape {tuple(v.shape)} differs from {names[1]}'s {tuple(k.shape)} (but for the head dim, "
                            "which may be below)")
    heads_q, heads_kv = q.shape[-2], k.shape[-2]
    if heads_q % heads_kv:
        _fail(fn, names[0], f"{heads_q} heads is not a multiple of {names[1]}'s {heads_kv} (GQA/MQA need one)")
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or
                                    (qv is not None and qv.requires_grad)):
        _fail(fn, names[0], "requires grad, but flashjit has no backward pass (forward only): call it under "
                            "torch.no_grad() or torch.inference_mode()", RuntimeError)


_LAYOUTS = {3: "[total_tokens, heads, head_dim]", 4: "[batch, seqlen, heads, head_dim]"}


def check_metadata(fn, t, name, dims, where, length=None):
    """An int32 tensor of dims dimensions on the device, last dimension contiguous (and of length, if given)."""
    if not isinstance(t, torch.Tensor):
        _fail(fn, name, f"expected an int32 torch.Tensor, got {type(t).__name__}", TypeError)
    if t.dtype != torch.int32:
        _fail(fn, name, f"dtype {t.dtype}; expected torch.int32", TypeError)
    if t.device != where:
        _fail(fn, name, f"is on {t.device}; expected {where} (where q is)")
    if t.dim() != dims:
        _fail(fn, name, f"expected {dims} dimension(s), got shape {tuple(t.shape)}")
    if t.stride(-1) != 1:
        _fail(fn, name, f"the last dimension must be contiguous; strides {t.stride()}")
    if length is not None and t.shape[0] != length:
        _fail(fn, name, f"has {t.shape[0]} entries; expected {length}")


def check_out(fn, out, shape, like):
    """out: a tensor of shape on like's device, of like's dtype (FP8 operands' like, an e4m3 q: torch.bfloat16 or
    torch.float16, the kernel's out_dtype), its last dimension contiguous."""
    if not isinstance(out, torch.Tensor):
        _fail(fn, "out", f"expected a torch.Tensor, got {type(out).__name__}", TypeError)
    if tuple(out.shape) != tuple(shape):
        _fail(fn, "out", f"shape {tuple(out.shape)}; expected {tuple(shape)}")
    if _FP8 is not None and like.dtype == _FP8:
        if out.dtype not in _DTYPES or out.device != like.device:
            _fail(fn, "out", f"{out.dtype} on {out.device}; expected torch.bfloat16 or torch.float16 on {like.device} "
                             "(FP8 operands' output)", TypeError)
    elif out.dtype != like.dtype or out.device != like.device:
        _fail(fn, "out", f"{out.dtype} on {out.device}; expected {like.dtype} on {like.device}", TypeError)
    if out.stride(-1) != 1:
        _fail(fn, "out", f"the last dimension must be contiguous; strides {out.stride()}")


# ---- the FA3 entry points' torch halves (argument checks for unsupported features: _interface) ----
_dense_cu_seqlens = {}


def _cu_seqlens_dense(batch, seqlen, dev):
    """int32 [batch + 1] offsets 0, seqlen, 2 seqlen, ...: dense queries as packed ones. Cached outside
    captures and compiles (inside, a fresh one: the graph owns it)."""
    if _compiling() or torch.cuda.is_current_stream_capturing():
        return torch.arange(batch + 1, dtype=torch.int32, device=dev) * seqlen
    key = (dev, batch, seqlen)
    t = _dense_cu_seqlens.get(key)
    if t is None:
        t = _dense_cu_seqlens[key] = torch.arange(batch + 1, dtype=torch.int32, device=dev) * seqlen
    return t


def _scales_key(kv_scales):
    """What the fast path's key holds of an FP8 launch's descales (K's, V's and FP8 operands' Q's): each one's shape,
    strides, dtype and device (the strides the template keeps follow from them), None for a descale not given."""
    k, v, q = kv_scales.k, kv_scales.v, kv_scales.q
    return (None if k is None else (k.shape, k.stride(), k.dtype, k.get_device()),
            None if v is None else (v.shape, v.stride(), v.dtype, v.get_device()),
            None if q is None else (q.shape, q.stride(), q.dtype, q.get_device()))


def _o_shape(q, v):
    """O's shape: q's with V's head dim (spec key head_dim_v where it is below Q's)."""
    return (*q.shape[:-1], v.shape[-1])


def _o_dtype(q):
    """O's dtype where the caller gives no out: q's, or torch.bfloat16 for FP8 operands (FA3's FP8 output)."""
    return torch.bfloat16 if q.dtype is _FP8 else q.dtype


def flash_attn_func(q, k, v, softmax_scale, causal, return_lse, features=None, kv_scales=None, qv=None):
    fast = not return_lse and features is None and fast_path_open()
    if fast:
        try:
            key = (0, q.shape, q.stride(), q.dtype, q.get_device(), k.shape, k.stride(), k.dtype, k.get_device(),
                   v.shape, v.stride(), v.dtype, v.get_device(), softmax_scale, causal, _wants_grad(q, k, v, qv),
                   None if kv_scales is None else _scales_key(kv_scales),
                   None if qv is None else (qv.shape, qv.stride(), qv.dtype, qv.get_device()))
        except AttributeError:  # an argument that is not a tensor: the full path names it
            fast = False
        else:
            launch = remembered(key)
            if launch is not None:
                out = torch.empty(_o_shape(q, v), dtype=_o_dtype(q), device=q.device)
                launch(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 0, 0, 0, 0, kv_scales,
                       qv=0 if qv is None else qv.data_ptr())
                return out
    fn = "flash_attn_func"
    check_attention_tensors(fn, q, k, v, ("q", "k", "v"), 4, 4, qv)
    if k.shape[0] != q.shape[0]:
        _fail(fn, "k", f"batch {k.shape[0]} differs from q's {q.shape[0]}")
    check_features(fn, features, q.device)
    check_kv_scales(fn, kv_scales, q.device)
    scale = _default_scale(q, qv) if softmax_scale is None else softmax_scale
    if qv is None and (q.shape[-1] % 8 or v.shape[-1] % 8):
        return _unpadded(flash_attn_func(*_padded(q, k, v), scale, causal, return_lse, features, kv_scales), v.shape[-1],
                         None, return_lse)
    out = torch.empty(_o_shape(q, v), dtype=_o_dtype(q), device=q.device)
    record = [] if fast else None
    lse = run(q, k, v, out, None, None, None, None, q.shape[1], k.shape[1], scale, causal, 1, -1, return_lse, record,
              features, kv_scales, qv=qv)
    if fast:
        remember(key, record)
    return (out, lse) if return_lse else out


def _wants_grad(q, k, v, qv=None):
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or
                                        (qv is not None and qv.requires_grad))


def _default_scale(q, qv):
    """FA3's default softmax scale: 1/sqrt of Q's head dim, with qv q's and qv's columns together (the spec's
    head_dim)."""
    return (q.shape[-1] + (0 if qv is None else qv.shape[-1])) ** -0.5


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                           softmax_scale, causal, num_splits, pack_gqa, block_table, out, return_lse, features=None,
                           kv_scales=None, qv=None):
    fast = not return_lse and seqused_q is None and features is None and fast_path_open()
    if fast:
        try:
            key = (1, q.shape, q.stride(), q.dtype, q.get_device(), k.shape, k.stride(), k.dtype, k.get_device(),
                   v.shape, v.stride(), v.dtype, v.get_device(),
                   None if cu_seqlens_q is None else (cu_seqlens_q.shape, cu_seqlens_q.stride(), cu_seqlens_q.dtype, cu_seqlens_q.get_device()),
                   None if cu_seqlens_k is None else (cu_seqlens_k.shape, cu_seqlens_k.stride(), cu_seqlens_k.dtype, cu_seqlens_k.get_device()),
                   max_seqlen_q, max_seqlen_k,
                   None if seqused_k is None else (seqused_k.shape, seqused_k.stride(), seqused_k.dtype, seqused_k.get_device()),
                   softmax_scale, causal, num_splits, pack_gqa,
                   None if block_table is None else (block_table.shape, block_table.stride(), block_table.dtype, block_table.get_device()),
                   None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()),
                   _wants_grad(q, k, v, qv), None if kv_scales is None else _scales_key(kv_scales),
                   None if qv is None else (qv.shape, qv.stride(), qv.dtype, qv.get_device()))
        except AttributeError:  # an argument that is not a tensor: the full path names it
            fast = False
        else:
            launch = remembered(key)
            if launch is not None:
                if out is None:
                    out = torch.empty(_o_shape(q, v), dtype=_o_dtype(q), device=q.device)
                launch(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), cu_seqlens_q.data_ptr(),
                       0 if cu_seqlens_k is None else cu_seqlens_k.data_ptr(), 0 if seqused_k is None else seqused_k.data_ptr(),
                       0 if block_table is None else block_table.data_ptr(), kv_scales,
                       qv=0 if qv is None else qv.data_ptr())
                return out
    fn = "flash_attn_varlen_func"
    paged = block_table is not None
    kv_dims = 4 if paged or cu_seqlens_k is None else 3
    check_attention_tensors(fn, q, k, v, ("q", "k", "v"), 3, kv_dims, qv)
    index = q.device
    if cu_seqlens_q is None:
        _fail(fn, "cu_seqlens_q", "is required (int32 [batch + 1] query offsets)")
    check_metadata(fn, cu_seqlens_q, "cu_seqlens_q", 1, index)
    batch = cu_seqlens_q.shape[0] - 1
    if max_seqlen_q is None or max_seqlen_k is None:
        _fail(fn, "max_seqlen_q" if max_seqlen_q is None else "max_seqlen_k", "is required (an upper bound)")
    if paged:
        if cu_seqlens_k is not None:
            _fail(fn, "cu_seqlens_k", "must be None with block_table (paged K/V: seqused_k gives the keys)")
        if seqused_k is None:
            _fail(fn, "seqused_k", "is required with block_table (keys per sequence)")
        check_metadata(fn, block_table, "block_table", 2, index, batch)
    elif cu_seqlens_k is not None:
        check_metadata(fn, cu_seqlens_k, "cu_seqlens_k", 1, index, batch + 1)
    elif k.shape[0] != batch:
        _fail(fn, "k", f"batch {k.shape[0]} differs from cu_seqlens_q's {batch} (K/V [batch, seqlen_k, heads, d] "
                       "without cu_seqlens_k)")
    if seqused_k is not None:
        check_metadata(fn, seqused_k, "seqused_k", 1, index, batch)
    if seqused_q is not None:
        check_metadata(fn, seqused_q, "seqused_q", 1, index, batch)
    if out is not None:
        check_out(fn, out, _o_shape(q, v), q)
    check_features(fn, features, index)
    check_kv_scales(fn, kv_scales, index)
    scale = _default_scale(q, qv) if softmax_scale is None else softmax_scale
    if qv is None and (q.shape[-1] % 8 or v.shape[-1] % 8):
        return _unpadded(flash_attn_varlen_func(*_padded(q, k, v), cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                seqused_q, seqused_k, scale, causal, num_splits, pack_gqa, block_table,
                                                None, return_lse, features, kv_scales), v.shape[-1], out, return_lse)
    if seqused_q is not None and batch > 0:
        return _varlen_used_queries(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q,
                                    seqused_k, scale, causal, num_splits, pack_gqa, block_table, out, return_lse,
                                    features, kv_scales, qv)
    if out is None:
        out = torch.empty(_o_shape(q, v), dtype=_o_dtype(q), device=q.device)
    max_k = max_seqlen_k if (paged or cu_seqlens_k is not None) else k.shape[1]
    record = [] if fast else None
    lse = run(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, max_seqlen_q, max_k, scale, causal,
              num_splits, _pack_code(pack_gqa), return_lse, record, features, kv_scales, qv=qv)
    if fast:
        remember(key, record)
    return (out, lse) if return_lse else out


def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, softmax_scale,
                            causal, num_splits, pack_gqa, out, return_lse, features=None, kv_scales=None, qv=None):
    # The fast path takes cache_seqlens as a tensor only (an int or None makes a tensor per call).
    fast = not return_lse and type(cache_seqlens) is torch.Tensor and features is None and fast_path_open()
    if fast:
        try:
            key = (2, q.shape, q.stride(), q.dtype, q.get_device(), k_cache.shape, k_cache.stride(), k_cache.dtype,
                   k_cache.get_device(), v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.get_device(),
                   cache_seqlens.shape, cache_seqlens.stride(), cache_seqlens.dtype, cache_seqlens.get_device(),
                   None if page_table is None else (page_table.shape, page_table.stride(), page_table.dtype, page_table.get_device()),
                   None if cu_seqlens_q is None else (cu_seqlens_q.shape, cu_seqlens_q.stride(), cu_seqlens_q.dtype, cu_seqlens_q.get_device()),
                   max_seqlen_q, softmax_scale, causal, num_splits, pack_gqa,
                   None if out is None else (out.shape, out.stride(), out.dtype, out.get_device()),
                   _wants_grad(q, k_cache, v_cache, qv), None if kv_scales is None else _scales_key(kv_scales),
                   None if qv is None else (qv.shape, qv.stride(), qv.dtype, qv.get_device()))
        except AttributeError:  # an argument that is not a tensor: the full path names it
            fast = False
        else:
            launch = remembered(key)
            if launch is not None:
                if out is None:
                    out = torch.empty(_o_shape(q, v_cache), dtype=_o_dtype(q), device=q.device)
                launch(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out.data_ptr(),
                       launch.keep.data_ptr() if cu_seqlens_q is None else cu_seqlens_q.data_ptr(), 0,
                       cache_seqlens.data_ptr(), 0 if page_table is None else page_table.data_ptr(), kv_scales,
                       qv=0 if qv is None else qv.data_ptr())
                return out
    fn = "flash_attn_with_kvcache"
    varlen = cu_seqlens_q is not None
    check_attention_tensors(fn, q, k_cache, v_cache, ("q", "k_cache", "v_cache"), 3 if varlen else 4, 4, qv)
    index = q.device
    if varlen:
        check_metadata(fn, cu_seqlens_q, "cu_seqlens_q", 1, index)
        if max_seqlen_q is None:
            _fail(fn, "max_seqlen_q", "is required with cu_seqlens_q (an upper bound)")
        batch, queries = cu_seqlens_q.shape[0] - 1, max_seqlen_q
    else:
        batch, queries = q.shape[0], q.shape[1]
    paged = page_table is not None
    if paged:
        check_metadata(fn, page_table, "page_table", 2, index, batch)
        max_k = page_table.shape[1] * k_cache.shape[1]
    else:
        if k_cache.shape[0] != batch:
            _fail(fn, "k_cache", f"batch {k_cache.shape[0]} differs from q's {batch} (cache_batch_idx is not supported)")
        max_k = k_cache.shape[1]
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    elif cache_seqlens is None and paged:  # every key the table holds, as FA3 reads it
        cache_seqlens = torch.full((batch,), max_k, dtype=torch.int32, device=q.device)
    if cache_seqlens is not None:
        check_metadata(fn, cache_seqlens, "cache_seqlens", 1, index, batch)
    if out is not None:
        check_out(fn, out, _o_shape(q, v_cache), q)
    check_features(fn, features, index)
    check_kv_scales(fn, kv_scales, index)
    if qv is None and (q.shape[-1] % 8 or v_cache.shape[-1] % 8):
        scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
        return _unpadded(flash_attn_with_kvcache(*_padded(q, k_cache, v_cache), cache_seqlens, page_table, cu_seqlens_q,
                                                 max_seqlen_q, scale, causal, num_splits, pack_gqa, None, return_lse,
                                                 features, kv_scales), v_cache.shape[-1], out, return_lse)
    if out is None:
        out = torch.empty(_o_shape(q, v_cache), dtype=_o_dtype(q), device=q.device)
    # Dense queries run as packed ones ([batch * seqlen, heads, d], offsets every seqlen rows): split-KV and
    # packed heads, what decode needs, are varlen kernels.
    if varlen:
        q_rows, out_rows, cu, qv_rows = q, out, cu_seqlens_q, qv
    else:
        q_rows, out_rows = _as_rows(q), _as_rows(out, fn)
        qv_rows = None if qv is None else _as_rows(qv)
        cu = _cu_seqlens_dense(batch, queries, q.device)
    scale = _default_scale(q, qv) if softmax_scale is None else softmax_scale
    # The fast path passes q's, qv's and out's pointers for their row views: only where the views are views.
    fast = (fast and q_rows.data_ptr() == q.data_ptr() and out_rows.data_ptr() == out.data_ptr() and
            (qv is None or qv_rows.data_ptr() == qv.data_ptr()))
    record = [] if fast else None
    lse = run(q_rows, k_cache, v_cache, out_rows, cu, None, cache_seqlens, page_table, queries, max_k, scale, causal,
              num_splits, _pack_code(pack_gqa), return_lse, record, features, kv_scales, qv=qv_rows)
    if fast:
        remember(key, record, None if varlen else cu)  # the dense queries' offsets: the plan keeps them alive
    if not return_lse:
        return out
    if not varlen:  # [heads, batch * seqlen] -> FA3's [batch, heads, seqlen]
        lse = lse.view(q.shape[2], batch, queries).transpose(0, 1).contiguous()
    return out, lse


def _as_rows(t, out_of=None):
    """[b, s, h, d] as [b * s, h, d]: a view where the strides allow, else (q only) a copy."""
    b, s = t.shape[0], t.shape[1]
    if s == 1:
        return t.select(1, 0)
    if b == 1:
        return t.select(0, 0)
    if out_of is None:
        return t.reshape(b * s, t.shape[2], t.shape[3])
    try:
        return t.view(b * s, t.shape[2], t.shape[3])
    except RuntimeError:
        _fail(out_of, "out", f"strides {t.stride()} do not let [batch, seqlen] merge into one row dimension")


def _pack_code(pack_gqa):
    return -1 if pack_gqa is None else int(bool(pack_gqa))


# ---- what FA3 does that the kernels do not take as it comes ------------------------------------------
def _padded(*tensors):
    """Q, K, V with their head dims padded with zeros to the next multiple of 8 (the kernels' head dims; as FA2's
    interface pads), Q's and K's to Q's, V's to its own (below Q's where head_dim_v is): zero columns add nothing
    to Q K^T, and O's extra columns (V's zero columns) are dropped (_unpadded). A copy of each, every call."""
    return tuple(torch.nn.functional.pad(t, (0, -t.shape[-1] % 8)) for t in tensors)


def _unpadded(result, head_dim, out, return_lse):
    """A padded call's result with O cut back to head_dim columns (V's head dim; into out when given)."""
    o, lse = result if return_lse else (result, None)
    o = o[..., :head_dim]
    if out is not None:
        out.copy_(o)
        o = out
    else:
        o = o.contiguous()
    return (o, lse) if return_lse else o


def _varlen_used_queries(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k, scale,
                         causal, num_splits, pack_gqa, block_table, out, return_lse, features=None, kv_scales=None,
                         qv=None):
    """seqused_q as FA3 reads it: sequence b's queries are rows cu_seqlens_q[b] .. + seqused_q[b] (the rest of
    its rows are neither read nor written), its causal mask aligned to seqused_q[b] queries. The used rows are
    gathered into a packed Q (offsets: the running sum of seqused_q), run, and their O rows put back; rows not
    used keep out's values (zeros when out is None). Device operations only: capturable, no synchronisation."""
    total, batch, dev = q.shape[0], cu_seqlens_q.shape[0] - 1, q.device
    counts = torch.minimum(seqused_q, cu_seqlens_q[1:] - cu_seqlens_q[:-1]).clamp_(min=0)
    cu_used = torch.zeros(batch + 1, dtype=torch.int32, device=dev)
    cu_used[1:] = torch.cumsum(counts, 0, dtype=torch.int32)
    rows = torch.arange(total, dtype=torch.int32, device=dev)
    # Packed row r belongs to the sequence whose used rows hold it; its query is that sequence's row r - cu_used[b].
    seq = torch.searchsorted(cu_used[1:], rows, right=True).clamp_(max=batch - 1)
    source = torch.where(rows < cu_used[-1], cu_seqlens_q[seq] + rows - cu_used[seq], 0).clamp_(0, max(total - 1, 0))
    # (FP8 operands' q gathered as bytes: index_select may not take torch.float8_e4m3fn.)
    used_q = q.view(torch.uint8).index_select(0, source).view(q.dtype) if q.dtype is _FP8 else q.index_select(0, source)
    used_qv = None if qv is None else qv.index_select(0, source)  # qv's rows gathered as q's
    result = flash_attn_varlen_func(used_q, k, v, cu_used, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    None, seqused_k, scale, causal, num_splits, pack_gqa, block_table, None, return_lse,
                                    features, kv_scales, used_qv)
    o_used, lse_used = result if return_lse else (result, None)
    # Row r of sequence b (position p = r - cu_seqlens_q[b]) is used when p < counts[b]; its O is packed row
    # cu_used[b] + p.
    seq = torch.searchsorted(cu_seqlens_q[1:], rows, right=True).clamp_(max=batch - 1)
    position = rows - cu_seqlens_q[seq]
    used = (position >= 0) & (position < counts[seq]) & (rows < cu_seqlens_q[-1])
    packed = torch.where(used, cu_used[seq] + position, 0).clamp_(0, max(total - 1, 0))
    kept = out if out is not None else torch.zeros_like(o_used)  # O's dtype (bf16 for FP8 operands)
    o = torch.where(used.view(-1, 1, 1), o_used.index_select(0, packed), kept)
    if out is not None:
        out.copy_(o)
        o = out
    if not return_lse:
        return o
    return o, torch.where(used.view(1, -1), lse_used.index_select(1, packed), float("-inf"))


def flash_attn_combine(out_partial, lse_partial, out, out_dtype):
    """FA3's fwd_combine on flashjit's merge of two states (flashjit_merge_attention_states): the splits folded
    in one after another, in float32, the last merge writing out_dtype. Device operations only."""
    fn = "flash_attn_combine"
    for t, name, dims in ((out_partial, "out_partial", 5), (lse_partial, "lse_partial", 4)):
        if not isinstance(t, torch.Tensor):
            _fail(fn, name, f"expected a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.dtype != torch.float32:
            _fail(fn, name, f"dtype {t.dtype}; expected torch.float32 (FA3's combine takes float32 partials)", TypeError)
        if not t.is_cuda:
            _fail(fn, name, f"is on {t.device}; flashjit runs on CUDA devices")
        if t.dim() != dims:
            _fail(fn, name, f"expected {dims} dimensions, got shape {tuple(t.shape)}")
    splits, batch, seqlen, heads, head_dim = out_partial.shape
    if tuple(lse_partial.shape) != (splits, batch, seqlen, heads):
        _fail(fn, "lse_partial", f"shape {tuple(lse_partial.shape)}; expected {(splits, batch, seqlen, heads)} "
                                 "(out_partial's without the head dim)")
    if lse_partial.device != out_partial.device:
        _fail(fn, "lse_partial", f"is on {lse_partial.device}, out_partial on {out_partial.device}")
    out_dtype = torch.float32 if out_dtype is None else out_dtype
    if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        _fail(fn, "out_dtype", f"{out_dtype}; expected torch.float32, torch.float16 or torch.bfloat16", TypeError)
    padded_dim = head_dim + (-head_dim % 8)
    if padded_dim > 256:
        raise NotImplementedError(f"flashjit.{fn}: out_partial: head dim {head_dim} is not supported; flashjit's "
                                  "kernels take head dims up to 256")
    if out is not None:
        check_out(fn, out, (batch, seqlen, heads, head_dim), out_partial.new_empty(0, dtype=out_dtype))
    rows = batch * seqlen
    lse = torch.empty(batch, heads, seqlen, dtype=torch.float32, device=out_partial.device)
    result = torch.empty(rows, heads, padded_dim, dtype=out_dtype, device=out_partial.device)
    if rows and heads:
        if splits == 0:
            result.zero_()
            lse.fill_(float("-inf"))
        else:
            _merge_splits(out_partial, lse_partial, result, lse, padded_dim)
    o = result.view(batch, seqlen, heads, padded_dim)[..., :head_dim]
    if out is not None:
        out.copy_(o)
        o = out
    elif padded_dim != head_dim:
        o = o.contiguous()
    return o, lse.transpose(1, 2)


def _merge_splits(out_partial, lse_partial, result, lse, padded_dim):
    """Folds the splits into result [rows, heads, padded_dim] and lse [batch, heads, seqlen]: state = merge(state,
    split i), float32 in between."""
    splits, batch, seqlen, heads, head_dim = out_partial.shape
    rows, index = batch * seqlen, out_partial.get_device()
    dev = device(index)
    # The states as the merge takes them: O [rows, heads, padded_dim] (element strides multiples of 8), LSE
    # [heads, rows].
    parts = torch.nn.functional.pad(out_partial, (0, padded_dim - head_dim)).reshape(splits, rows, heads, padded_dim)
    lses = lse_partial.permute(0, 3, 1, 2).reshape(splits, heads, rows).contiguous()
    lse_rows = lse.view(batch, heads, seqlen).permute(1, 0, 2)  # [heads, batch, seqlen]: merged LSE, row-major
    if splits == 1:  # nothing to merge; a row with LSE -inf saw no key: O = 0, as the merge gives it
        result.copy_(parts[0].masked_fill((lses[0] == float("-inf")).t().unsqueeze(-1), 0.0))
        lse_rows.copy_(lses[0].view(heads, batch, seqlen))
        return
    dtype_name = _DTYPES.get(result.dtype, "bf16")  # the kernel's 16-bit dtype (unused for float32 output)
    handle = dev.kernel(f"dtype={dtype_name},head_dim={padded_dim},causal=0,varlen=1,split_kv=1")
    states = [torch.empty(rows, heads, padded_dim, dtype=torch.float32, device=out_partial.device) for _ in range(2)]
    state_lses = [torch.empty(heads, rows, dtype=torch.float32, device=out_partial.device) for _ in range(2)]
    merged_lse = torch.empty(heads, rows, dtype=torch.float32, device=out_partial.device)
    o_a, lse_a = parts[0], lses[0]
    stream = _raw_stream(index)
    for i in range(1, splits):
        last = i == splits - 1
        o_out = result if last else states[i % 2]
        lse_out = merged_lse if last else state_lses[i % 2]
        flags = _capi.MERGE_FLOAT32_STATES | (_capi.MERGE_FLOAT32_OUT if o_out.dtype == torch.float32 else 0)
        args = _capi.MergeArgs(struct_size=ctypes.sizeof(_capi.MergeArgs), flags=flags, o_a=o_a.data_ptr(),
                               lse_a=lse_a.data_ptr(), o_b=parts[i].data_ptr(), lse_b=lses[i].data_ptr(),
                               o_out=o_out.data_ptr(), lse_out=lse_out.data_ptr(), rows=rows, heads=heads,
                               a_row_stride=heads * padded_dim, a_head_stride=padded_dim,
                               b_row_stride=heads * padded_dim, b_head_stride=padded_dim,
                               out_row_stride=heads * padded_dim, out_head_stride=padded_dim, lse_head_stride=rows)
        status = dev.lib.merge(handle, _byref(args), stream)
        if status != 0:
            raise library_error(dev.lib, status, "merge_attention_states")
        o_a, lse_a = o_out, lse_out
    lse_rows.copy_(merged_lse.view(heads, batch, seqlen))


def scheduler_metadata(cache_seqlens):
    """get_scheduler_metadata's value: flashjit has no per-step schedule to share, so an empty int32 tensor on
    cache_seqlens' device (what scheduler_metadata accepts)."""
    if not isinstance(cache_seqlens, torch.Tensor):
        _fail("get_scheduler_metadata", "cache_seqlens", f"expected an int32 torch.Tensor, got "
                                                         f"{type(cache_seqlens).__name__}", TypeError)
    return torch.empty(0, dtype=torch.int32, device=cache_seqlens.device)
