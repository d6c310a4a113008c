"""Cache bundles from Python: a model's kernels as one file, shipped with it and imported on the serving host
(flashjit_cache_export / flashjit_cache_import; the tool's `cache export` / `cache import`). No GPU or torch."""
import os

from ._capi import FlashjitError, library


def _spec_list(specs):
    if isinstance(specs, str):
        return [specs]
    if specs is None:
        raise TypeError("specs: expected a spec string or a list of them, got None")
    return list(specs)


def cache_export(path, specs, cache_dir=None):
    """Writes the kernels of specs (each with its long-sequence kernel) to the bundle file at path, replacing it
    atomically; kernels missing from the cache (cache_dir, else the default) are compiled into it first.
    Returns path. Raises FlashjitError naming every spec that failed."""
    specs = _spec_list(specs)
    if not specs:
        raise FlashjitError("cache_export: specs: give at least one spec", field="specs")
    library().cache_export(specs, os.fspath(path), cache_dir)
    return path


def cache_import(path, cache_dir=None):
    """Checks every entry of the bundle at path (checksums, and that this flashjit would compile each one so),
    then adds them all to the cache (cache_dir, else the default). Returns how many entries the bundle held.
    A corrupt or foreign bundle imports nothing and raises FlashjitError."""
    return library().cache_import(os.fspath(path), cache_dir)
