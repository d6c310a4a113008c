"""FA3's Python entry points (hopper/flash_attn_interface.py) with its argument names, positions, defaults
and return values, read as FA3 reads them (hopper/flash_api.cpp):
- an argument whose feature is off is ignored as FA3 ignores it: the FP8 descales with a 16-bit q and cache,
  rotary_seqlens and rotary_interleaved without rotary tensors, cu_seqlens_k_new without new keys, a window
  side that covers every key or query, softcap <= 0, scheduler_metadata (flashjit schedules each call on the
  device from its lengths: get_scheduler_metadata below);
- window_size, attention_chunk, softcap, alibi_slopes and s_aux (vLLM's fork's sinks; FA4's learnable_sink)
  map onto flashjit's masks and score modifiers (flashjit.h, MASKS AND SCORES): the spec keys join the call's
  spec and the argument fields are filled; a bad value or tensor raises ValueError naming the argument, and a
  library that does not have the feature's spec key raises NotImplementedError naming the feature;
- K and V of torch.float8_e4m3fn under a 16-bit q are an FP8 K/V cache (flashjit.h, FP8 K/V CACHE; spec key
  kv_dtype=e4m3), which FA3 itself does not take (it needs Q, K and V of one dtype): k_descale and v_descale
  (float32: one element, [heads_kv] or FA3's [batch, heads_kv], strides as given, vLLM's expanded per-tensor
  scale included) dequantise it, a descale not given reads as 1.0 (as FA3 reads one); q_descale with the 16-bit q
  raises ValueError (there is no FP8 q for it to dequantise), as do K and V of different dtypes;
- Q, K and V all torch.float8_e4m3fn are FA3's FP8 (flashjit.h, FP8 OPERANDS; spec key dtype=e4m3): q_descale,
  k_descale and v_descale (the same shapes as above; None = 1.0) dequantise them, P is rounded to e4m3 for the
  P V GEMM as FA3 does, and O is torch.bfloat16 (or torch.float16 where the caller's out is); an FP8 q with 16-bit
  K and V raises ValueError naming them;
- qv (FA3's split MLA form; flashjit.h, MLA SPLIT FORM, spec key qv=1): q and k are the rotary columns, qv (q's
  shape with V's head dim, q's dtype) and v the latent ones (V is the values too; k and v may be two views of one
  latent cache, [.., 512:] and [.., :512]): scores (q.k + qv.v) x softmax_scale, O = P V, the default scale
  (q's + qv's columns)^-0.5 as FA3's; the spec's head_dim is q's and qv's columns together, head_dim_v qv's. Widths
  the library does not take (both parts multiples of 64, together at most 576) raise NotImplementedError naming qv
  with the library's reason (at the launch's plan), as does qv with FP8 (here); qv of another dtype raises
  TypeError, of another shape or with a strided last dimension ValueError;
- V (and out) may have a head dim below Q's and K's (FA3's head_dim_v: DeepSeek's 192/128 prefill; flashjit takes any
  multiple of 8 up to Q's and 256, or 384 and 512, with Q's up to 576: Mistral Small 4's 320/256, Gemma 4's 512/512,
  MLA's absorbed 576/512): the spec gets head_dim_v and O is [..., V's head dim];
- a feature flashjit does not have raises NotImplementedError naming it, whether it arrives as an argument,
  a dtype (an e5m2 q or cache) or a shape (a V head dim above Q's, Q's above 576, V's above 256 but for 384 and
  512);
- the performance hints (num_splits, pack_gqa) steer flashjit's own choices; deterministic is accepted (the
  forward pass is deterministic; there is no backward).
Needs torch only when called."""

import math

from ._plan import Features, KvScales, descale_strides, qv_refusal, spec_text

MAX_HEAD_DIM = 256  # V's largest in one piece of O (FA3's largest head dim too)
MAX_HEAD_DIM_QK = 576  # Q's and K's largest (MLA's absorbed 576/512), with V's at most Q's (spec key head_dim_v)
V_HEAD_DIMS_IN_PARTS = (384, 512)  # V's head dims above MAX_HEAD_DIM: O computed in two column parts

_backend = None
_backend_error = None


def _load_backend():
    """The torch half, imported at `import flashjit` when torch imports (so torch.compile finds the op
    registered before it traces)."""
    global _backend, _backend_error
    try:
        from . import _torch_backend
        _backend = _torch_backend
    except ImportError as e:  # no torch: the attention functions say so when called
        _backend_error = f"{type(e).__name__}: {e}"
    except OSError as e:  # a torch that does not load (its CUDA libraries)
        _backend_error = f"{type(e).__name__}: {e}"


def backend(fn):
    if _backend is None:
        raise RuntimeError(f"flashjit.{fn} needs PyTorch (2.x, CUDA build), which did not import here "
                           f"({_backend_error}); flashjit.supported() and flashjit.prewarm() work without it")
    return _backend


# ---- FA3's arguments, read as FA3 reads them -----------------------------------------------------
def _shown(value):
    shape = getattr(value, "shape", None)
    return f"<tensor of shape {tuple(shape)}>" if shape is not None else repr(value)


def _lacks(fn, name, value, what, off):
    raise NotImplementedError(f"flashjit.{fn}: {name}={_shown(value)} is not supported yet ({what}); "
                              f"only {name}={off}")


def _refuse_given(fn, **given):
    """Raises for the first argument that is not None; given maps names to (value, what it asks for)."""
    for name, (value, what) in given.items():
        if value is not None:
            _lacks(fn, name, value, what, "None")


def _check_common(fn, names, q, k, v, qv, sm_margin):
    """What all three functions refuse alike: FP8 dtypes flashjit does not take (_fp8_mode), head dims flashjit has
    no kernel for, a qv flashjit does not take (_check_qv), sm_margin. names: how the function calls q, k and v.
    Returns _fp8_mode's answer: None (16-bit), CACHE (an FP8 K/V cache) or OPERANDS (Q, K and V FP8)."""
    fp8 = _fp8_mode(fn, names, q, k, v)
    d, dv = _dim(q, -1), _dim(v, -1)
    if qv is not None:
        _check_qv(fn, names, fp8, q, v, qv)  # its head dims: the library's (the spec with qv=1)
        d = None
    check_head_dims(fn, d, dv, names[0], names[2])
    for dim, name in ((d, names[1]), (dv, names[2])):  # K's rows are Q's head dim wide, V's its own
        if fp8 == CACHE and dim is not None and dim % 16:
            raise NotImplementedError(f"flashjit.{fn}: {name}: head dim {dim} with an FP8 cache is not supported; "
                                      "FP8 K/V rows are read 16 bytes at a time: a multiple of 16 (as FA3's FP8)")
    for dim, name in ((d, names[0]), (dv, names[2])):
        if fp8 == OPERANDS and dim is not None and dim % 32:
            raise NotImplementedError(f"flashjit.{fn}: {name}: head dim {dim} with FP8 operands is not supported; "
                                      "the FP8 kernels take head dims that are multiples of 32 (FA3's FP8: 64, 96, "
                                      "128, 192, 256)")
    if sm_margin:
        _lacks(fn, "sm_margin", sm_margin, "SMs left free", "0")
    return fp8


def _check_qv(fn, names, fp8, q, v, qv):
    """FA3's qv (flashjit.h, MLA SPLIT FORM): a tensor of q's dtype (fp16 or bf16; FP8 raises NotImplementedError),
    shape q.shape[:-1] + (V's head dim,), its last dimension contiguous. Device and torch type are the torch half's
    checks; the head dims are the library's: the launch's plan asks it whether it takes the spec with qv=1 (head_dim
    q's and qv's columns, head_dim_v qv's; both parts multiples of 64) and raises NotImplementedError naming qv with
    its reason (_plan.require_qv; not here, where torch.compile traces: no library call in the trace)."""
    if fp8:
        what = "FP8 operands" if fp8 == OPERANDS else "an FP8 K/V cache"
        raise NotImplementedError(f"flashjit.{fn}: qv={_shown(qv)} with {what} is not supported (the split MLA form, "
                                  "spec key qv=1, runs fp16 and bf16); only qv=None there")
    shape, dtype = getattr(qv, "shape", None), getattr(qv, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"flashjit.{fn}: qv: expected a torch.Tensor (FA3's qv [..., heads, head_dim_v]), got "
                        f"{type(qv).__name__}")
    q_shape, dv = getattr(q, "shape", None), _dim(v, -1)
    if q_shape is None or dv is None:
        return  # the torch half names q or v
    q_dtype = str(getattr(q, "dtype", ""))
    if str(dtype) != q_dtype:
        raise TypeError(f"flashjit.{fn}: qv: dtype {dtype} differs from {names[0]}'s {q_dtype} (qv is of "
                        f"{names[0]}'s dtype, torch.float16 or torch.bfloat16)")
    want = tuple(q_shape[:-1]) + (dv,)
    if tuple(shape) != want:
        raise ValueError(f"flashjit.{fn}: qv: shape {tuple(shape)}; expected {want} ({names[0]}'s with {names[2]}'s "
                         f"head dim {dv}: FA3's qv [..., heads, head_dim_v])")
    strides = qv.stride()
    if len(strides) and strides[-1] != 1:
        raise ValueError(f"flashjit.{fn}: qv: the last dimension (head_dim_v) must be contiguous (stride 1); strides "
                         f"{tuple(strides)}")


def check_head_dims(fn, d, dv, q_name, v_name):
    """Q's head dim d and V's dv (None where not known) as flashjit's kernels take them: V's at most Q's (below it:
    spec key head_dim_v), Q's up to MAX_HEAD_DIM_QK, V's up to MAX_HEAD_DIM or one of V_HEAD_DIMS_IN_PARTS.
    Raises NotImplementedError naming the argument."""
    if d is not None and d > MAX_HEAD_DIM_QK:
        raise NotImplementedError(f"flashjit.{fn}: {q_name}: head dim {d} is not supported; flashjit's kernels take "
                                  f"Q head dims up to {MAX_HEAD_DIM_QK} (MLA's 576/512)")
    if d is None or dv is None:
        return
    if dv > d:
        raise NotImplementedError(f"flashjit.{fn}: {v_name}: head dim {dv} above {q_name}'s {d} is not supported; "
                                  f"V's head dim may be {q_name}'s or below (e.g. 192/128), not above")
    if dv > MAX_HEAD_DIM and dv not in V_HEAD_DIMS_IN_PARTS:
        raise NotImplementedError(f"flashjit.{fn}: {v_name}: head dim {dv} (with {q_name}'s {d}) is not supported; "
                                  f"V's head dim is at most {MAX_HEAD_DIM}, or 384 or 512 (e.g. 320/256, 512/512, 576/512)")


# ---- the FP8 K/V cache and FP8 operands (flashjit.h, FP8 K/V CACHE, FP8 OPERANDS) ------------------------------
_E4M3 = "torch.float8_e4m3fn"
CACHE = "cache"        # K and V torch.float8_e4m3fn under a 16-bit q (spec key kv_dtype=e4m3)
OPERANDS = "operands"  # Q, K and V torch.float8_e4m3fn (spec key dtype=e4m3)


def _fp8_mode(fn, names, q, k, v):
    """None when q, k and v hold no FP8 (their 16-bit dtypes the torch half checks), CACHE when k and v are an FP8
    cache (both torch.float8_e4m3fn, q 16-bit), OPERANDS when q is torch.float8_e4m3fn too (FA3's FP8). An FP8 q
    with 16-bit K and V raises ValueError naming them (FA3's FP8 takes Q, K and V of one dtype); K and V of
    different dtypes, one of them FP8, raise ValueError naming both; an FP8 format other than e4m3 raises
    NotImplementedError."""
    qd, kd, vd = (str(getattr(t, "dtype", "")) for t in (q, k, v))
    k8, v8 = "float8" in kd, "float8" in vd
    if (k8 or v8) and kd != vd:
        raise ValueError(f"flashjit.{fn}: {names[1]} and {names[2]}: dtypes {kd} and {vd} differ; an FP8 cache has "
                         f"both of {_E4M3}")
    if "float8" in qd:
        if qd != _E4M3:
            raise NotImplementedError(f"flashjit.{fn}: {names[0]}: dtype {qd} (FP8) is not supported yet; FP8 "
                                      f"queries are {_E4M3} (e4m3)")
        if not k8:
            raise ValueError(f"flashjit.{fn}: {names[0]}, {names[1]} and {names[2]}: dtypes {qd}, {kd} and {vd}; an "
                             f"FP8 {names[0]} needs {names[1]} and {names[2]} of {_E4M3} too (FA3's FP8 takes Q, K and "
                             f"V of one dtype; a 16-bit {names[0]} goes with an FP8 cache)")
    if not k8:
        return None
    if kd != _E4M3:
        raise NotImplementedError(f"flashjit.{fn}: {names[1]}: dtype {kd} (FP8) is not supported yet; an FP8 K/V "
                                  f"cache is {_E4M3} (e4m3)")
    return OPERANDS if "float8" in qd else CACHE


def kv_scales_of(fn, fp8, q_descale, k_descale, v_descale, batch, heads_kv, q_name="q"):
    """The launch's KvScales for an FP8 cache or FP8 operands (fp8 from _check_common), None for 16-bit K and V
    (whose descales FA3 ignores, and so does flashjit). q_descale (OPERANDS only), k_descale, v_descale: float32,
    one element, [heads_kv] or [batch, heads_kv] (descale_strides), any strides; None reads as 1.0. q_descale with
    a 16-bit q and an FP8 cache raises ValueError: FA3 reads it only for an FP8 q. batch, heads_kv: None where
    unknown (not checked)."""
    if not fp8:
        return None
    if q_descale is not None and fp8 != OPERANDS:
        raise ValueError(f"flashjit.{fn}: q_descale: {_shown(q_descale)} given with a 16-bit {q_name} and an FP8 "
                         f"cache; it dequantises an FP8 {q_name} (FA3 reads it only then): pass q_descale=None "
                         "(k_descale and v_descale dequantise the cache)")
    layouts = []
    given = (("k_descale", k_descale), ("v_descale", v_descale))
    if fp8 == OPERANDS:
        given += (("q_descale", q_descale),)
    for name, t in given:
        if t is None:
            layouts.append((0, 0))
            continue
        if _float_dtype(t) != "torch.float32":
            raise ValueError(f"flashjit.{fn}: {name}: dtype {_float_dtype(t) or type(t).__name__}; expected "
                             "torch.float32 (FA3's descales)")
        strides = descale_strides(t.shape, t.stride(), batch, heads_kv)
        if strides is None:
            raise ValueError(f"flashjit.{fn}: {name}: shape {tuple(t.shape)}; expected one element (one scale for the "
                             f"cache), ({'heads_kv' if heads_kv is None else heads_kv},) (one a K/V head) or "
                             f"({'batch' if batch is None else batch}, {'heads_kv' if heads_kv is None else heads_kv}) "
                             "(FA3's [batch, heads_kv])")
        layouts.append(strides)
    if fp8 == OPERANDS:
        return KvScales(k_descale, v_descale, layouts[0], layouts[1], q_descale, layouts[2])
    return KvScales(k_descale, v_descale, *layouts)


def _launch(fn, call, features, scales, qv=None):
    """The torch half's function fn with the call's arguments, its Features (if any), its KvScales (if any, by
    keyword) and qv (if given, by keyword; never with FP8)."""
    half = getattr(backend(fn), fn)
    if qv is not None:
        return half(*call, features, qv=qv)
    if scales is not None:
        return half(*call, features, kv_scales=scales)
    return half(*call) if features is None else half(*call, features)


def mask_of(fn, causal, window_size, seqlen_q, seqlen_k):
    """(causal, window_left, window_right) as FA3 reads causal with window_size (flash_api.cpp, mha_fwd): a left
    side at least seqlen_k - 1 wide and a right side at least seqlen_q - 1 wide are no window (-1); causal is
    the window (-1, 0), so window_size=(-1, 0) is causal and causal=True sets the right side to 0. A window that
    still masks keys is flashjit's sliding window (spec key window=1): (left, 0) is causal with a left bound,
    any other is a window without the causal flag. seqlen_q, seqlen_k: the call's upper bounds, None when
    unknown (then only -1 is no window)."""
    if window_size is None:  # vLLM's fork: None = no window
        return bool(causal), -1, -1
    try:
        left, right = (int(x) for x in window_size)
    except (TypeError, ValueError):
        raise ValueError(f"flashjit.{fn}: window_size: {window_size!r}; expected (left, right), each -1 (unbounded) "
                         "or a key count") from None
    if left < -1 or right < -1:
        raise ValueError(f"flashjit.{fn}: window_size: {(left, right)} is not allowed; each side is -1 (unbounded) "
                         "or 0 and up")
    if left >= 0 and seqlen_k is not None and left >= seqlen_k - 1:
        left = -1
    if right >= 0 and seqlen_q is not None and right >= seqlen_q - 1:
        right = -1
    if causal:
        right = 0
    if right == 0:
        return True, left, (0 if left >= 0 else -1)
    return False, left, right


def _float_dtype(t):
    return str(getattr(t, "dtype", ""))


def features_of(fn, window, attention_chunk, softcap, alibi_slopes, sinks, sinks_name, batch, heads_q):
    """The call's Features (None when all are off) from the window mask_of read, FA3's attention_chunk and
    softcap (<= 0: off), ALiBi slopes (float32 [heads_q] or [batch, heads_q]) and the sink logits (float32 or
    bfloat16 [heads_q], named sinks_name). Bad values raise ValueError naming the argument. batch, heads_q: None
    where unknown."""
    left, right = window
    if attention_chunk is None:
        attention_chunk = 0
    if int(attention_chunk) != attention_chunk or attention_chunk < 0:
        raise ValueError(f"flashjit.{fn}: attention_chunk: {attention_chunk!r} is not allowed; 0 (off) or a key "
                         "count from 1")
    cap = 0.0 if softcap is None else float(softcap)
    if math.isnan(cap) or math.isinf(cap):
        raise ValueError(f"flashjit.{fn}: softcap: {softcap!r} is not allowed; a finite value (0 or less: off)")
    cap = max(cap, 0.0)
    if sinks is not None:
        if _float_dtype(sinks) not in ("torch.float32", "torch.bfloat16"):
            raise ValueError(f"flashjit.{fn}: {sinks_name}: dtype {_float_dtype(sinks)}; expected torch.float32 or "
                             "torch.bfloat16 (one logit per query head)")
        if heads_q is not None and tuple(sinks.shape) != (heads_q,):
            raise ValueError(f"flashjit.{fn}: {sinks_name}: shape {tuple(sinks.shape)}; expected ({heads_q},) (one "
                             "logit per query head)")
    if alibi_slopes is not None:
        if _float_dtype(alibi_slopes) != "torch.float32":
            raise ValueError(f"flashjit.{fn}: alibi_slopes: dtype {_float_dtype(alibi_slopes)}; expected "
                             "torch.float32")
        shape = tuple(alibi_slopes.shape)
        if heads_q is not None and shape != (heads_q,) and (len(shape) != 2 or shape[1] != heads_q or
                                                           (batch is not None and shape[0] != batch)):
            raise ValueError(f"flashjit.{fn}: alibi_slopes: shape {shape}; expected ({heads_q},) or "
                             f"({'batch' if batch is None else batch}, {heads_q})")
    features = Features(left, right, int(attention_chunk), cap, sinks, alibi_slopes)
    return features if features else None


def _sinks_of(fn, s_aux, learnable_sink):
    """vLLM's s_aux or FA4's learnable_sink (one of them)."""
    if s_aux is not None and learnable_sink is not None:
        raise ValueError(f"flashjit.{fn}: s_aux and learnable_sink are the same sinks; pass one")
    return (s_aux, "s_aux") if s_aux is not None else (learnable_sink, "learnable_sink")


def _dim(t, i):
    """t.shape[i], None where t has no such dimension (not a tensor, or too few dimensions)."""
    try:
        return t.shape[i]
    except (AttributeError, IndexError, TypeError):
        return None


def _paged_keys(table, pool):
    """Keys a page table reaches (FA3's seqlen_k with a page table): its columns x the page size."""
    cols, page = _dim(table, 1), _dim(pool, 1)
    return None if cols is None or page is None else cols * page


# ---- the entry points --------------------------------------------------------------------------------
def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1, pack_gqa=None,
                    deterministic=False, sm_margin=0, return_attn_probs=False, *, alibi_slopes=None, s_aux=None,
                    learnable_sink=None):
    """FA3's flash_attn_func: q [batch, seqlen_q, heads, d], k [batch, seqlen_k, heads_kv, d], v [batch, seqlen_k,
    heads_kv, dv] (dv: d or below, e.g. 192/128); returns out [batch, seqlen_q, heads, dv], and with
    return_attn_probs=True (out, softmax_lse [batch, heads, seqlen_q]).
    Causal masks are bottom-right aligned. num_splits and pack_gqa are hints a dense launch does not need.
    Keyword-only: alibi_slopes (float32 [heads] or [batch, heads]) and s_aux / learnable_sink (sink logits,
    float32 or bfloat16 [heads]; the LSE includes the sink). k and v of torch.float8_e4m3fn are an FP8 cache,
    dequantised by k_descale / v_descale (float32: one element, [heads_kv] or [batch, heads_kv]; None = 1.0); with
    q of torch.float8_e4m3fn too they are FA3's FP8 operands, q_descale dequantising q, out torch.bfloat16. qv (FA3's
    split MLA form): [batch, seqlen_q, heads, dv] of q's dtype beside q and k (the rotary columns, d), scores
    (q.k + qv.v) x softmax_scale, the default scale (d + dv)^-0.5."""
    fn = "flash_attn_func"
    fp8 = _check_common(fn, ("q", "k", "v"), q, k, v, qv, sm_margin)
    scales = kv_scales_of(fn, fp8, q_descale, k_descale, v_descale, _dim(q, 0), _dim(k, 2))
    causal, *window = mask_of(fn, causal, window_size, _dim(q, 1), _dim(k, 1))
    features = features_of(fn, window, attention_chunk, softcap, alibi_slopes, *_sinks_of(fn, s_aux, learnable_sink),
                           _dim(q, 0), _dim(q, 2))
    return _launch(fn, (q, k, v, softmax_scale, bool(causal), return_attn_probs), features, scales, qv)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, *,
                           block_table=None, out=None, return_softmax_lse=False, alibi_slopes=None, dropout_p=0.0,
                           s_aux=None, scheduler_metadata=None, fa_version=None, learnable_sink=None):
    """FA3's flash_attn_varlen_func: q [total_q, heads, d] with cu_seqlens_q int32 [batch + 1] and
    max_seqlen_q (seqused_q int32 [batch]: only that many of each sequence's queries are used and their
    output rows written); K/V packed [total_k, heads_kv, d] with cu_seqlens_k, or [batch, seqlen_k, heads_kv,
    d] (seqused_k optional), or (keyword block_table, as vLLM's fork takes it) paged [num_pages, page_size,
    heads_kv, d] with seqused_k (V's head dim dv: d or below). max_seqlen_k = 0 (no sequence has keys) gives O = 0
    and LSE = -inf. Returns out [total_q, heads, dv], and with return_attn_probs or return_softmax_lse (out, softmax_lse [heads,
    total_q]). Keyword-only extras from vLLM's fork: block_table, out (written in place), return_softmax_lse,
    scheduler_metadata (accepted, not needed), fa_version (2 or 3: flashjit runs either call), alibi_slopes
    (float32 [heads] or [batch, heads]), s_aux (sink logits, float32 or bfloat16 [heads]; FA4's name
    learnable_sink also); dropout_p must be off. k and v of torch.float8_e4m3fn (packed, [batch, seqlen_k] or
    paged) are an FP8 cache, dequantised by k_descale / v_descale (float32: one element, [heads_kv] or [batch,
    heads_kv], e.g. vLLM's layer scale expanded; None = 1.0); with q of torch.float8_e4m3fn too they are FA3's FP8
    operands, q_descale dequantising q, out torch.bfloat16 (or torch.float16 where the out given is). qv (FA3's split
    MLA form): [total_q, heads, dv] of q's dtype beside q and k (the rotary columns, d), scores (q.k + qv.v) x
    softmax_scale, the default scale (d + dv)^-0.5."""
    fn = "flash_attn_varlen_func"
    fp8 = _check_common(fn, ("q", "k", "v"), q, k, v, qv, sm_margin)
    if dropout_p:
        _lacks(fn, "dropout_p", dropout_p, "dropout", "0.0")
    if fa_version not in (None, 2, 3):
        _lacks(fn, "fa_version", fa_version, "FlashAttention versions other than 2 and 3", "2 or 3")
    if cu_seqlens_k is not None:
        keys = max_seqlen_k
    else:
        keys = _paged_keys(block_table, k) if block_table is not None else _dim(k, 1)
    causal, *window = mask_of(fn, causal, window_size, max_seqlen_q, keys)
    cu_len = _dim(cu_seqlens_q, 0)
    batch = None if cu_len is None else cu_len - 1
    scales = kv_scales_of(fn, fp8, q_descale, k_descale, v_descale, batch, _dim(k, -2))
    features = features_of(fn, window, attention_chunk, softcap, alibi_slopes, *_sinks_of(fn, s_aux, learnable_sink),
                           batch, _dim(q, 1))
    call = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k, softmax_scale,
            bool(causal), num_splits, pack_gqa, block_table, out, return_attn_probs or return_softmax_lse)
    return _launch(fn, call, features, scales, qv)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False, *, out=None, alibi_slopes=None, s_aux=None, learnable_sink=None):
    """FA3's flash_attn_with_kvcache, without appending k/v or rotary: q [batch, seqlen_q, heads, d] (or
    [total_q, heads, d] with cu_seqlens_q and max_seqlen_q) against k_cache/v_cache [batch, seqlen_cache,
    heads_kv, d], or paged [num_pages, page_size, heads_kv, d] with page_table int32 [batch, max_pages] (v_cache's
    head dim dv: d or below; out's is dv);
    cache_seqlens (int, or int32 [batch]) keys per sequence. num_splits 0 (default) lets flashjit split long
    caches across SMs (split-KV decode). Returns out, and with return_softmax_lse (out, softmax_lse [batch,
    heads, seqlen_q], or [heads, total_q] with cu_seqlens_q). Keyword-only: out (written in place), alibi_slopes
    (float32 [heads] or [batch, heads]), s_aux / learnable_sink (sink logits, float32 or bfloat16 [heads]).
    k_cache and v_cache of torch.float8_e4m3fn (dense or paged) are an FP8 cache, dequantised by k_descale /
    v_descale (float32: one element, [heads_kv] or [batch, heads_kv]; None = 1.0); with q of torch.float8_e4m3fn
    too they are FA3's FP8 operands, q_descale dequantising q, out torch.bfloat16 (or torch.float16 where the out
    given is). qv (FA3's split MLA form): q's shape with v_cache's head dim dv, of q's dtype; q and k_cache are the
    rotary columns (d, e.g. 64), qv and v_cache the latent ones (dv, e.g. 512; V is the values too), scores (q.k +
    qv.v) x softmax_scale, the default scale (d + dv)^-0.5; k_cache and v_cache may be two views of one latent cache
    [num_pages, page_size, heads_kv, dv + d] (v_cache = latent[..., :dv], k_cache = latent[..., dv:]). Appending k / v
    is refused with qv as without it."""
    fn = "flash_attn_with_kvcache"
    fp8 = _check_common(fn, ("q", "k_cache", "v_cache"), q, k_cache, v_cache, qv, sm_margin)
    # FA3 reads rotary_seqlens and rotary_interleaved only with rotary tensors, which need k (its check: "If
    # rotary cos/sin are provided, new key / value to be appended to KV cache must also be provided"), and
    # cu_seqlens_k_new only with k.
    _refuse_given(fn, k=(k, "appending new keys to the cache"), v=(v, "appending new values to the cache"),
                  rotary_cos=(rotary_cos, "rotary embedding"), rotary_sin=(rotary_sin, "rotary embedding"),
                  cache_batch_idx=(cache_batch_idx, "cache rows chosen per sequence"),
                  cache_leftpad=(cache_leftpad, "left padding"))
    queries = max_seqlen_q if cu_seqlens_q is not None else _dim(q, 1)
    keys = _paged_keys(page_table, k_cache) if page_table is not None else _dim(k_cache, 1)
    causal, *window = mask_of(fn, causal, window_size, queries, keys)
    if cu_seqlens_q is not None:
        cu_len = _dim(cu_seqlens_q, 0)
        batch, heads_q = None if cu_len is None else cu_len - 1, _dim(q, 1)
    else:
        batch, heads_q = _dim(q, 0), _dim(q, 2)
    scales = kv_scales_of(fn, fp8, q_descale, k_descale, v_descale, batch, _dim(k_cache, -2))
    features = features_of(fn, window, attention_chunk, softcap, alibi_slopes, *_sinks_of(fn, s_aux, learnable_sink),
                           batch, heads_q)
    call = (q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, softmax_scale, bool(causal),
            num_splits, pack_gqa, out, return_softmax_lse)
    return _launch(fn, call, features, scales, qv)


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """FA3's flash_attn_combine: merges attention states computed over disjoint key ranges. out_partial float32
    [num_splits, batch, seqlen, heads, d], lse_partial float32 [num_splits, batch, seqlen, heads]; returns (out
    [batch, seqlen, heads, d] in out_dtype (default float32; float16, bfloat16), softmax_lse float32 [batch,
    seqlen, heads]). Rows whose every split has LSE -inf get O = 0 and LSE = -inf. On flashjit's merge of two
    states (flashjit_merge_attention_states), applied split after split."""
    return backend("flash_attn_combine").flash_attn_combine(out_partial, lse_partial, out, out_dtype)


def _scheduling_qv(fn, headdim, headdim_v, qkv_dtype):
    """get_scheduler_metadata's headdim_v above headdim: FA3's split MLA form (its attention calls pass qv; vLLM's
    FlashAttention MLA backend schedules headdim 64 with headdim_v 512), taken where the library takes the spec with
    qv=1 (head_dim headdim + headdim_v, head_dim_v headdim_v); else NotImplementedError naming headdim_v with the
    library's reason."""
    if "float8" in str(qkv_dtype):
        raise NotImplementedError(f"flashjit.{fn}: headdim_v: head dim {headdim_v} above headdim's {headdim} (FA3's "
                                  f"split MLA form, qv) with qkv_dtype={qkv_dtype} is not supported; qv runs fp16 and "
                                  "bf16")
    from . import _capi
    spec = spec_text("fp16" if str(qkv_dtype) == "torch.float16" else "bf16", headdim + headdim_v, False,
                     head_dim_v=headdim_v, qv=True)
    reason = qv_refusal(_capi.library(), spec)
    if reason is not None:
        raise NotImplementedError(f"flashjit.{fn}: headdim_v: head dim {headdim_v} above headdim's {headdim} is not "
                                  f"supported; V's head dim above Q's is FA3's split MLA form (qv), whose spec "
                                  f"'{spec}' the library refuses: {reason}")


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv, headdim, cache_seqlens,
                           qkv_dtype=None, headdim_v=None, cu_seqlens_q=None, cu_seqlens_k_new=None,
                           cache_leftpad=None, page_size=None, max_seqlen_k_new=0, causal=False, window_size=(-1, -1),
                           attention_chunk=0, has_softcap=False, num_splits=0, pack_gqa=None, sm_margin=0):
    """FA3's get_scheduler_metadata (qkv_dtype None = torch.bfloat16). flashjit needs no per-step schedule: its
    kernels read every length on the device and the launch plan is cached per shape, so the value returned, an
    empty int32 tensor on cache_seqlens' device, is one that scheduler_metadata accepts and every layer of the
    step may pass; it computes nothing and does not synchronise (windows, chunks and soft caps need no schedule
    either). Features flashjit does not have raise NotImplementedError as the attention functions do; qkv_dtype
    torch.float8_e4m3fn is taken (an engine with an FP8 cache or FP8 operands names that dtype; the value does not
    depend on it), other FP8 formats are not. headdim_v above headdim is FA3's split MLA form (the calls pass qv:
    vLLM's FlashAttention MLA backend schedules headdim 64, headdim_v 512), taken where the library takes its spec."""
    fn = "get_scheduler_metadata"
    if qkv_dtype is not None and "float8" in str(qkv_dtype) and str(qkv_dtype) != _E4M3:
        raise NotImplementedError(f"flashjit.{fn}: qkv_dtype={qkv_dtype} (FP8) is not supported yet; flashjit's FP8 "
                                  f"is {_E4M3} (FP8 operands, or an FP8 cache under a 16-bit q)")
    if headdim_v is not None and headdim is not None and headdim_v > headdim:
        _scheduling_qv(fn, headdim, headdim_v, qkv_dtype)
    else:
        check_head_dims(fn, headdim, headdim if headdim_v is None else headdim_v, "headdim", "headdim_v")
    _refuse_given(fn, cache_leftpad=(cache_leftpad, "left padding"))
    if max_seqlen_k_new:
        _lacks(fn, "max_seqlen_k_new", max_seqlen_k_new, "appending new keys to the cache", "0")
    if sm_margin:
        _lacks(fn, "sm_margin", sm_margin, "SMs left free", "0")
    mask_of(fn, causal, window_size, max_seqlen_q, max_seqlen_k)  # its errors: a window that is not one
    return backend(fn).scheduler_metadata(cache_seqlens)
