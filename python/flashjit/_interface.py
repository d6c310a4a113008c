"""FA3's Python entry points (hopper/flash_attn_interface.py) with its argument names, positions, defaults
and return values, read as FA3 reads them (hopper/flash_api.cpp):
- an argument whose feature is off is ignored as FA3 ignores it: the FP8 descales on 16-bit tensors,
  rotary_seqlens and rotary_interleaved without rotary tensors, cu_seqlens_k_new without new keys, a window
  side that covers every key or query, softcap <= 0, scheduler_metadata (flashjit schedules each call on the
  device from its lengths: get_scheduler_metadata below);
- a feature flashjit does not have raises NotImplementedError naming it, whether it arrives as an argument,
  a dtype (FP8) or a shape (a V head dim apart from Q's, a head dim above 256);
- the performance hints (num_splits, pack_gqa) steer flashjit's own choices; deterministic is accepted (the
  forward pass is deterministic; there is no backward).
Needs torch only when called."""

MAX_HEAD_DIM = 256  # the largest head dim of flashjit's kernels (FA3's too)

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


def _check_common(fn, names, q, k, v, qv, softcap, attention_chunk, sm_margin):
    """What all three functions refuse alike: FP8 tensors, head dims flashjit has no kernel for, qv (MLA),
    softcap > 0, attention_chunk, sm_margin. names: how the function calls q, k and v."""
    for name, t in zip(names, (q, k, v)):
        dtype = getattr(t, "dtype", None)
        if dtype is not None and "float8" in str(dtype):
            raise NotImplementedError(f"flashjit.{fn}: {name}: dtype {dtype} (FP8) is not supported yet; flashjit "
                                      "computes in torch.float16 or torch.bfloat16")
    d = _dim(q, -1)
    if d is not None and d > MAX_HEAD_DIM:
        raise NotImplementedError(f"flashjit.{fn}: q: head dim {d} is not supported; flashjit's kernels take head "
                                  f"dims up to {MAX_HEAD_DIM}")
    dv = _dim(v, -1)
    if d is not None and dv is not None and dv != d:
        raise NotImplementedError(f"flashjit.{fn}: {names[2]}: head dim {dv} apart from q's {d} is not supported yet "
                                  "(V's head dim must equal Q's)")
    _refuse_given(fn, qv=(qv, "a separate V-side query (MLA)"))
    if softcap is not None and softcap > 0:
        _lacks(fn, "softcap", softcap, "soft capping", "0.0")
    if attention_chunk:
        _lacks(fn, "attention_chunk", attention_chunk, "chunked local attention", "0")
    if sm_margin:
        _lacks(fn, "sm_margin", sm_margin, "SMs left free", "0")


def causal_of(fn, causal, window_size, seqlen_q, seqlen_k):
    """causal as FA3 reads it with window_size (flash_api.cpp, mha_fwd): a left side at least seqlen_k - 1
    wide and a right side at least seqlen_q - 1 wide are no window (-1); causal is the window (-1, 0), so
    window_size=(-1, 0) is causal and causal=True with such a window is plain causal. A window that still
    masks keys is a sliding window: NotImplementedError. seqlen_q, seqlen_k: the call's upper bounds, None
    when unknown (then only -1 is no window)."""
    if window_size is None:  # vLLM's fork: None = no window
        return bool(causal)
    left, right = (int(x) for x in window_size)
    if left >= 0 and seqlen_k is not None and left >= seqlen_k - 1:
        left = -1
    if right >= 0 and seqlen_q is not None and right >= seqlen_q - 1:
        right = -1
    if causal:
        right = 0
    if left < 0 and right < 0:
        return False
    if left < 0 and right == 0:
        return True
    _lacks(fn, "window_size", tuple(window_size) if isinstance(window_size, tuple) else window_size,
           "sliding window", "(-1, -1)")


def _windowed(window_size):
    return window_size is not None and tuple(window_size) != (-1, -1)


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
                    deterministic=False, sm_margin=0, return_attn_probs=False):
    """FA3's flash_attn_func: q [batch, seqlen_q, heads, d], k/v [batch, seqlen_k, heads_kv, d]; returns out
    [batch, seqlen_q, heads, d], and with return_attn_probs=True (out, softmax_lse [batch, heads, seqlen_q]).
    Causal masks are bottom-right aligned. num_splits and pack_gqa are hints a dense launch does not need."""
    fn = "flash_attn_func"
    _check_common(fn, ("q", "k", "v"), q, k, v, qv, softcap, attention_chunk, sm_margin)
    if _windowed(window_size):
        causal = causal_of(fn, causal, window_size, _dim(q, 1), _dim(k, 1))
    return backend(fn).flash_attn_func(q, k, v, softmax_scale, bool(causal), return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, *,
                           block_table=None, out=None, return_softmax_lse=False, alibi_slopes=None, dropout_p=0.0,
                           s_aux=None, scheduler_metadata=None, fa_version=None):
    """FA3's flash_attn_varlen_func: q [total_q, heads, d] with cu_seqlens_q int32 [batch + 1] and
    max_seqlen_q (seqused_q int32 [batch]: only that many of each sequence's queries are used and their
    output rows written); K/V packed [total_k, heads_kv, d] with cu_seqlens_k, or [batch, seqlen_k, heads_kv,
    d] (seqused_k optional), or (keyword block_table, as vLLM's fork takes it) paged [num_pages, page_size,
    heads_kv, d] with seqused_k. max_seqlen_k = 0 (no sequence has keys) gives O = 0 and LSE = -inf. Returns
    out [total_q, heads, d], and with return_attn_probs or return_softmax_lse (out, softmax_lse [heads,
    total_q]). Keyword-only extras from vLLM's fork: block_table, out (written in place), return_softmax_lse,
    scheduler_metadata (accepted, not needed), fa_version (2 or 3: flashjit runs either call); alibi_slopes,
    dropout_p and s_aux must be off."""
    fn = "flash_attn_varlen_func"
    _check_common(fn, ("q", "k", "v"), q, k, v, qv, softcap, attention_chunk, sm_margin)
    _refuse_given(fn, alibi_slopes=(alibi_slopes, "ALiBi"), s_aux=(s_aux, "attention sinks"))
    if dropout_p:
        _lacks(fn, "dropout_p", dropout_p, "dropout", "0.0")
    if fa_version not in (None, 2, 3):
        _lacks(fn, "fa_version", fa_version, "FlashAttention versions other than 2 and 3", "2 or 3")
    if _windowed(window_size):
        if cu_seqlens_k is not None:
            keys = max_seqlen_k
        else:
            keys = _paged_keys(block_table, k) if block_table is not None else _dim(k, 1)
        causal = causal_of(fn, causal, window_size, max_seqlen_q, keys)
    return backend(fn).flash_attn_varlen_func(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k, softmax_scale,
        bool(causal), num_splits, pack_gqa, block_table, out, return_attn_probs or return_softmax_lse)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False, *, out=None):
    """FA3's flash_attn_with_kvcache, without appending k/v or rotary: q [batch, seqlen_q, heads, d] (or
    [total_q, heads, d] with cu_seqlens_q and max_seqlen_q) against k_cache/v_cache [batch, seqlen_cache,
    heads_kv, d], or paged [num_pages, page_size, heads_kv, d] with page_table int32 [batch, max_pages];
    cache_seqlens (int, or int32 [batch]) keys per sequence. num_splits 0 (default) lets flashjit split long
    caches across SMs (split-KV decode). Returns out, and with return_softmax_lse (out, softmax_lse [batch,
    heads, seqlen_q], or [heads, total_q] with cu_seqlens_q). Keyword out: written in place."""
    fn = "flash_attn_with_kvcache"
    _check_common(fn, ("q", "k_cache", "v_cache"), q, k_cache, v_cache, qv, softcap, attention_chunk, sm_margin)
    # FA3 reads rotary_seqlens and rotary_interleaved only with rotary tensors, which need k (its check: "If
    # rotary cos/sin are provided, new key / value to be appended to KV cache must also be provided"), and
    # cu_seqlens_k_new only with k.
    _refuse_given(fn, k=(k, "appending new keys to the cache"), v=(v, "appending new values to the cache"),
                  rotary_cos=(rotary_cos, "rotary embedding"), rotary_sin=(rotary_sin, "rotary embedding"),
                  cache_batch_idx=(cache_batch_idx, "cache rows chosen per sequence"),
                  cache_leftpad=(cache_leftpad, "left padding"))
    if _windowed(window_size):
        queries = max_seqlen_q if cu_seqlens_q is not None else _dim(q, 1)
        keys = _paged_keys(page_table, k_cache) if page_table is not None else _dim(k_cache, 1)
        causal = causal_of(fn, causal, window_size, queries, keys)
    return backend(fn).flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, softmax_scale, bool(causal),
        num_splits, pack_gqa, out, return_softmax_lse)


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """FA3's flash_attn_combine: merges attention states computed over disjoint key ranges. out_partial float32
    [num_splits, batch, seqlen, heads, d], lse_partial float32 [num_splits, batch, seqlen, heads]; returns (out
    [batch, seqlen, heads, d] in out_dtype (default float32; float16, bfloat16), softmax_lse float32 [batch,
    seqlen, heads]). Rows whose every split has LSE -inf get O = 0 and LSE = -inf. On flashjit's merge of two
    states (flashjit_merge_attention_states), applied split after split."""
    return backend("flash_attn_combine").flash_attn_combine(out_partial, lse_partial, out, out_dtype)


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv, headdim, cache_seqlens,
                           qkv_dtype=None, headdim_v=None, cu_seqlens_q=None, cu_seqlens_k_new=None,
                           cache_leftpad=None, page_size=None, max_seqlen_k_new=0, causal=False, window_size=(-1, -1),
                           attention_chunk=0, has_softcap=False, num_splits=0, pack_gqa=None, sm_margin=0):
    """FA3's get_scheduler_metadata (qkv_dtype None = torch.bfloat16). flashjit needs no per-step schedule: its
    kernels read every length on the device and the launch plan is cached per shape, so the value returned, an
    empty int32 tensor on cache_seqlens' device, is one that scheduler_metadata accepts and every layer of the
    step may pass; it computes nothing and does not synchronise. Features flashjit does not have raise
    NotImplementedError as the attention functions do."""
    fn = "get_scheduler_metadata"
    if qkv_dtype is not None and "float8" in str(qkv_dtype):
        raise NotImplementedError(f"flashjit.{fn}: qkv_dtype={qkv_dtype} (FP8) is not supported yet; flashjit "
                                  "computes in torch.float16 or torch.bfloat16")
    if headdim > MAX_HEAD_DIM:
        raise NotImplementedError(f"flashjit.{fn}: headdim={headdim} is not supported; flashjit's kernels take head "
                                  f"dims up to {MAX_HEAD_DIM}")
    if headdim_v is not None and headdim_v != headdim:
        _lacks(fn, "headdim_v", headdim_v, "a V head dim apart from Q's", f"None or {headdim}")
    _refuse_given(fn, cache_leftpad=(cache_leftpad, "left padding"))
    if max_seqlen_k_new:
        _lacks(fn, "max_seqlen_k_new", max_seqlen_k_new, "appending new keys to the cache", "0")
    if has_softcap:
        _lacks(fn, "has_softcap", has_softcap, "soft capping", "False")
    if attention_chunk:
        _lacks(fn, "attention_chunk", attention_chunk, "chunked local attention", "0")
    if sm_margin:
        _lacks(fn, "sm_margin", sm_margin, "SMs left free", "0")
    if _windowed(window_size):
        causal_of(fn, causal, window_size, max_seqlen_q, max_seqlen_k)
    return backend(fn).scheduler_metadata(cache_seqlens)
