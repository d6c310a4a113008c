"""flashjit: FlashAttention-3's Python interface on flashjit's JIT-compiled Hopper kernels.

  import flashjit
  out = flashjit.flash_attn_varlen_func(q, k_cache, v_cache, cu_seqlens_q, None, max_q, max_k,
                                        seqused_k=seq_lens, causal=True, block_table=block_table)

The attention functions need torch (any 2.x with CUDA) and a Hopper GPU; supported() and prewarm() need
neither (build hosts). python/README.md has the details."""
from ._capi import FlashjitError, load_library, library
from ._cache import cache_export, cache_import
from ._interface import (flash_attn_combine, flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache,
                         get_scheduler_metadata)
from . import _interface

try:
    from ._version import version as __version__  # written by python/build_wheel.py
except ImportError:  # the source tree
    __version__ = "0+source"
__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache", "flash_attn_combine",
           "get_scheduler_metadata", "supported", "prewarm", "loaded_specs", "load_library", "library", "FlashjitError",
           "cache_export", "cache_import", "__version__"]
from .flash_mla import flash_mla_with_kvcache, get_mla_metadata  # FlashMLA's interface too (module flashjit.flash_mla)
__all__ += ["flash_mla_with_kvcache", "get_mla_metadata"]


def supported(spec):
    """None when flashjit can build a kernel for spec (e.g. "dtype=bf16,head_dim=128,causal=1"), else the
    reason (starting with the field: "head_dim: value 65 is not allowed; ..."). Compiles nothing; no GPU."""
    if not isinstance(spec, str):
        raise TypeError(f"flashjit.supported: spec: expected a str such as 'dtype=bf16,head_dim=128,causal=1', got "
                        f"{type(spec).__name__}")
    reason = library().supported(spec)
    return None if reason is None else _said_once(reason)


def _said_once(reason):
    """The library's reason with its field named once: "head_dim: spec field 'head_dim': value ..." reads
    "head_dim: value ..."."""
    field, sep, rest = reason.partition(": ")
    repeat = f"spec field '{field}': "
    return field + sep + rest[len(repeat):] if sep and rest.startswith(repeat) else reason


def prewarm(specs, cache_dir=None, load=None):
    """Compiles specs into the kernel cache (cache_dir, else $FLASHJIT_CACHE_DIR, else ~/.cache/flashjit):
    NVRTC only, no GPU or driver. load: also fetch them onto the current CUDA device, so that the first call,
    and a CUDA graph capture, find them loaded; None = when torch is imported, a GPU is there and cache_dir is
    the default (the one calls use). Returns what it did, per spec: a dict of spec, status ("compiled", "hit"),
    kernels, compiled, hits, stored (in the cache directory) and error. Raises FlashjitError naming each spec
    that failed, a kernel not stored in the cache directory included (its .results: the same dicts)."""
    specs = [specs] if isinstance(specs, str) else list(specs)
    results = library().prewarm(specs, cache_dir)
    if load is None:
        import sys
        torch = sys.modules.get("torch")
        load = cache_dir is None and torch is not None and _interface._backend is not None and torch.cuda.is_available()
    if load:
        _interface.backend("prewarm(load=True)").prewarm_load(specs)
    return results


def loaded_specs():
    """The specs fetched so far in this process (every device): what to prewarm on a build host."""
    return _interface._backend.loaded_specs() if _interface._backend is not None else []


_interface._load_backend()
