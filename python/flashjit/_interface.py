"""FA3's Python entry points (hopper/flash_attn_interface.py) with its argument names, positions, defaults
and return values. Arguments for what flashjit does not have raise NotImplementedError naming them; the
performance hints FA3 takes (num_splits, pack_gqa) steer flashjit's own choices; deterministic is accepted
(the forward pass is deterministic; there is no backward). Needs torch only when called."""

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


def _unsupported(fn, **given):
    """Raises for the first argument not at its off value; given maps names to (value, off value, what)."""
    for name, (value, off, what) in given.items():
        if off is None:
            bad = value is not None
        elif isinstance(off, tuple):
            bad = tuple(value) != off
        else:
            bad = value != off
        if bad:
            raise NotImplementedError(f"flashjit.{fn}: {name}={value!r} is not supported yet ({what}); "
                                      f"only {name}={off!r}")


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1, pack_gqa=None,
                    deterministic=False, sm_margin=0, return_attn_probs=False):
    """FA3's flash_attn_func: q [batch, seqlen_q, heads, d], k/v [batch, seqlen_k, heads_kv, d]; returns out
    [batch, seqlen_q, heads, d], and with return_attn_probs=True (out, softmax_lse [batch, heads, seqlen_q]).
    Causal masks are bottom-right aligned. num_splits and pack_gqa are hints a dense launch does not need."""
    if (qv is not None or q_descale is not None or k_descale is not None or v_descale is not None or
            window_size[0] != -1 or window_size[1] != -1 or attention_chunk or softcap or sm_margin):
        _unsupported("flash_attn_func", qv=(qv, None, "a separate V-side query (MLA)"),
                     q_descale=(q_descale, None, "FP8"), k_descale=(k_descale, None, "FP8"),
                     v_descale=(v_descale, None, "FP8"), window_size=(window_size, (-1, -1), "sliding window"),
                     attention_chunk=(attention_chunk, 0, "chunked local attention"),
                     softcap=(softcap, 0.0, "soft capping"), sm_margin=(sm_margin, 0, "SMs left free"))
    return backend("flash_attn_func").flash_attn_func(q, k, v, softmax_scale, causal, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                           v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False, *,
                           block_table=None, out=None, return_softmax_lse=False, alibi_slopes=None, dropout_p=0.0,
                           s_aux=None, scheduler_metadata=None, fa_version=None):
    """FA3's flash_attn_varlen_func: q [total_q, heads, d] with cu_seqlens_q int32 [batch + 1] and
    max_seqlen_q; K/V packed [total_k, heads_kv, d] with cu_seqlens_k, or [batch, seqlen_k, heads_kv, d]
    (seqused_k optional), or (keyword block_table, as vLLM's fork takes it) paged [num_pages, page_size,
    heads_kv, d] with seqused_k. Returns out [total_q, heads, d], and with return_attn_probs or
    return_softmax_lse (out, softmax_lse [heads, total_q]). Keyword-only extras from vLLM's fork: block_table,
    out (written in place), return_softmax_lse; alibi_slopes, dropout_p, s_aux, scheduler_metadata must be off
    and fa_version None or 3."""
    if (seqused_q is not None or qv is not None or q_descale is not None or k_descale is not None or
            v_descale is not None or window_size[0] != -1 or window_size[1] != -1 or attention_chunk or softcap or
            sm_margin or alibi_slopes is not None or dropout_p or s_aux is not None or scheduler_metadata is not None
            or fa_version not in (None, 3)):
        _unsupported("flash_attn_varlen_func", seqused_q=(seqused_q, None, "query counts apart from cu_seqlens_q"),
                     qv=(qv, None, "a separate V-side query (MLA)"), q_descale=(q_descale, None, "FP8"),
                     k_descale=(k_descale, None, "FP8"), v_descale=(v_descale, None, "FP8"),
                     window_size=(window_size, (-1, -1), "sliding window"),
                     attention_chunk=(attention_chunk, 0, "chunked local attention"),
                     softcap=(softcap, 0.0, "soft capping"), sm_margin=(sm_margin, 0, "SMs left free"),
                     alibi_slopes=(alibi_slopes, None, "ALiBi"), dropout_p=(dropout_p, 0.0, "dropout"),
                     s_aux=(s_aux, None, "attention sinks"),
                     scheduler_metadata=(scheduler_metadata, None, "FA3's precomputed schedule; flashjit schedules on "
                                                                   "the device from the lengths"),
                     fa_version=(fa_version, 3, "flashjit is an FA3-style kernel"))
    return backend("flash_attn_varlen_func").flash_attn_varlen_func(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, softmax_scale, causal, num_splits,
        pack_gqa, block_table, out, return_attn_probs or return_softmax_lse)


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
    if (k is not None or v is not None or qv is not None or rotary_cos is not None or rotary_sin is not None or
            cache_batch_idx is not None or cache_leftpad is not None or cu_seqlens_k_new is not None or
            rotary_seqlens is not None or q_descale is not None or k_descale is not None or v_descale is not None or
            window_size[0] != -1 or window_size[1] != -1 or attention_chunk or softcap or
            scheduler_metadata is not None or sm_margin):
        _unsupported("flash_attn_with_kvcache", k=(k, None, "appending new keys to the cache"),
                     v=(v, None, "appending new values to the cache"), qv=(qv, None, "a separate V-side query (MLA)"),
                     rotary_cos=(rotary_cos, None, "rotary embedding"), rotary_sin=(rotary_sin, None, "rotary embedding"),
                     cache_batch_idx=(cache_batch_idx, None, "cache rows chosen per sequence"),
                     cache_leftpad=(cache_leftpad, None, "left padding"),
                     cu_seqlens_k_new=(cu_seqlens_k_new, None, "appending new keys"),
                     rotary_seqlens=(rotary_seqlens, None, "rotary embedding"), q_descale=(q_descale, None, "FP8"),
                     k_descale=(k_descale, None, "FP8"), v_descale=(v_descale, None, "FP8"),
                     window_size=(window_size, (-1, -1), "sliding window"),
                     attention_chunk=(attention_chunk, 0, "chunked local attention"),
                     softcap=(softcap, 0.0, "soft capping"),
                     scheduler_metadata=(scheduler_metadata, None, "FA3's precomputed schedule; flashjit schedules on "
                                                                   "the device from the lengths"),
                     sm_margin=(sm_margin, 0, "SMs left free"))
    return backend("flash_attn_with_kvcache").flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, page_table, cu_seqlens_q, max_seqlen_q, softmax_scale, causal, num_splits,
        pack_gqa, out, return_softmax_lse)
