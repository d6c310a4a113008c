"""The C API of libflashjit.so through ctypes: the structs (the one Python copy of the layouts in
include/flashjit/flashjit.h, checked against the offsets src/api/launch_args.cpp asserts), finding
NVRTC and the library, and the functions that need no torch (supported, prewarm, workspace size)."""
import ctypes
import glob
import os
import struct
import sys
import threading

ABI_VERSION = 1             # FLASHJIT_ABI_VERSION
FLAG_PDL = 1                # FLASHJIT_ATTENTION_FLAG_PDL
DEVICE_NONE = -1            # FLASHJIT_DEVICE_NONE: a context without a GPU (check, prewarm)
WORKSPACE_ALIGN = 256       # args.workspace: 256-byte aligned
STATUS_INVALID_SPEC = 2
DTYPE_BF16 = 2              # flashjit_dtype_t: the sinks_dtype values
DTYPE_FP32 = 3
STATUS_NOT_COMPILED = 3
MERGE_FLOAT32_STATES = 1    # FLASHJIT_MERGE_FLAG_FLOAT32_STATES
MERGE_FLOAT32_OUT = 2       # FLASHJIT_MERGE_FLAG_FLOAT32_OUT
NVRTC_SONAME = "libnvrtc.so.13"


# ---- the structs --------------------------------------------------------------------------------
class Strides(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("row", ctypes.c_int64), ("head", ctypes.c_int64)]


class AttentionArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("q", ctypes.c_uint64), ("k", ctypes.c_uint64), ("v", ctypes.c_uint64), ("o", ctypes.c_uint64),
                ("lse", ctypes.c_uint64),
                ("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64),
                ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("q_strides", Strides), ("k_strides", Strides), ("v_strides", Strides), ("o_strides", Strides),
                ("softmax_scale", ctypes.c_float),
                # masks and score modifiers (MASKS AND SCORES in flashjit.h); off: 0, window -1
                ("softcap", ctypes.c_float), ("window_left", ctypes.c_int32), ("window_right", ctypes.c_int32),
                # engine inputs (ENGINE INPUTS in flashjit.h); off: 0
                ("cu_seqlens_q", ctypes.c_uint64), ("cu_seqlens_k", ctypes.c_uint64), ("seqused_k", ctypes.c_uint64),
                ("block_table", ctypes.c_uint64), ("block_table_batch_stride", ctypes.c_int64),
                ("page_size", ctypes.c_int64),
                # the 280-byte layout
                ("num_pages", ctypes.c_int64), ("total_q", ctypes.c_int64), ("total_k", ctypes.c_int64),
                # the 304-byte layout: split-KV decode (DECODE in flashjit.h); off: 0. A library that knows only
                # the 280-byte layout accepts the larger struct while these bytes are zero.
                ("workspace", ctypes.c_uint64), ("workspace_bytes", ctypes.c_uint64),
                ("max_splits", ctypes.c_int32), ("split_keys", ctypes.c_int32),
                # the 336-byte layout: attention chunks, sinks, ALiBi (MASKS AND SCORES in flashjit.h); off: 0
                ("attention_chunk", ctypes.c_int32), ("sinks_dtype", ctypes.c_int32), ("sinks", ctypes.c_uint64),
                ("alibi_slopes", ctypes.c_uint64), ("alibi_batch_stride", ctypes.c_int64),
                # the 408-byte layout: FP8 scales (FP8 K/V CACHE and FP8 OPERANDS in flashjit.h); off: 0
                ("k_scale", ctypes.c_uint64), ("v_scale", ctypes.c_uint64),
                ("k_scale_batch_stride", ctypes.c_int64), ("k_scale_head_stride", ctypes.c_int64),
                ("v_scale_batch_stride", ctypes.c_int64), ("v_scale_head_stride", ctypes.c_int64),
                ("q_scale", ctypes.c_uint64), ("q_scale_batch_stride", ctypes.c_int64),
                ("q_scale_head_stride", ctypes.c_int64),
                # the 440-byte layout: qv=1's second query tensor (MLA SPLIT FORM in flashjit.h); off: 0
                ("qv", ctypes.c_uint64), ("qv_strides", Strides)]


class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("cu_context", ctypes.c_void_p),
                ("cache_dir", ctypes.c_char_p), ("compile_policy", ctypes.c_int32), ("cache_mode", ctypes.c_int32),
                ("max_cache_bytes", ctypes.c_uint64)]


class KernelInfo(ctypes.Structure):  # the 0.2 layout (the library fills what the caller's struct_size holds)
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("spec", ctypes.c_char_p),
                ("kernel_name", ctypes.c_char_p), ("cache_key", ctypes.c_char_p)] + \
               [(name, ctypes.c_int32) for name in ("dtype", "head_dim", "causal", "block_m", "block_n",
                                                    "threads_per_block", "registers", "local_bytes", "spill_bytes",
                                                    "dynamic_smem_bytes", "static_smem_bytes", "source")] + \
               [("long_seqlen_spec", ctypes.c_char_p), ("long_seqlen_min", ctypes.c_int64),
                ("long_seqlen_min_uneven", ctypes.c_int64), ("long_uneven_use_percent", ctypes.c_int32),
                ("reserved1", ctypes.c_int32)]


class MergeArgs(ctypes.Structure):  # flashjit_merge_args_t
    _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32)] + \
               [(name, ctypes.c_uint64) for name in ("o_a", "lse_a", "o_b", "lse_b", "o_out", "lse_out")] + \
               [(name, ctypes.c_int64) for name in ("rows", "heads", "a_row_stride", "a_head_stride", "b_row_stride",
                                                    "b_head_stride", "out_row_stride", "out_head_stride",
                                                    "lse_head_stride")]


PREWARM_MESSAGE_SIZE = 512  # FLASHJIT_PREWARM_MESSAGE_SIZE


class PrewarmResult(ctypes.Structure):  # flashjit_prewarm_result_t
    _fields_ = [("struct_size", ctypes.c_uint32), ("status", ctypes.c_int32), ("kernels", ctypes.c_int32),
                ("compiled", ctypes.c_int32), ("hits", ctypes.c_int32), ("stored", ctypes.c_int32),
                ("message", ctypes.c_char * PREWARM_MESSAGE_SIZE)]


assert ctypes.sizeof(AttentionArgs) == 440 and ctypes.sizeof(ContextOptions) == 40 and ctypes.sizeof(KernelInfo) == 112
# the offsets src/api/launch_args.cpp asserts for flashjit_attention_args_t (and those of the 304- and 336-byte fields)
assert (AttentionArgs.q.offset, AttentionArgs.batch.offset, AttentionArgs.q_strides.offset,
        AttentionArgs.softmax_scale.offset, AttentionArgs.window_left.offset, AttentionArgs.cu_seqlens_q.offset,
        AttentionArgs.page_size.offset, AttentionArgs.num_pages.offset, AttentionArgs.total_k.offset,
        AttentionArgs.workspace.offset, AttentionArgs.workspace_bytes.offset, AttentionArgs.max_splits.offset,
        AttentionArgs.split_keys.offset, AttentionArgs.attention_chunk.offset, AttentionArgs.sinks.offset,
        AttentionArgs.alibi_batch_stride.offset, AttentionArgs.k_scale.offset, AttentionArgs.v_scale_head_stride.offset,
        AttentionArgs.q_scale.offset) == \
       (8, 48, 96, 192, 200, 208, 248, 256, 272, 280, 288, 296, 300, 304, 312, 328, 336, 376, 384)


def new_args(flags=0):
    """flashjit_attention_args_init: struct_size set, everything off."""
    return AttentionArgs(struct_size=ctypes.sizeof(AttentionArgs), flags=flags, window_left=-1, window_right=-1)


def _flat_fields(cls, prefix=""):
    """(dotted name, ctypes type, offset) of every scalar in a Structure, nested ones flattened, in order."""
    out = []
    for name, ctype in cls._fields_:
        offset = getattr(cls, name).offset
        if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
            out += [(prefix + name + "." + n, t, offset + o) for n, t, o in _flat_fields(ctype)]
        else:
            out.append((prefix + name, ctype, offset))
    return out


_CODES = {ctypes.c_uint32: "I", ctypes.c_int32: "i", ctypes.c_uint64: "Q", ctypes.c_int64: "q", ctypes.c_float: "f"}


def packer_of(cls):
    """A struct.Struct that writes every field of cls in one call (pack_into(instance, 0, *values), values in
    ARGS_FIELDS order): the hot path's faster form of setting each field, derived from the ctypes layout."""
    fmt, at = "<", 0
    for name, ctype, offset in _flat_fields(cls):
        fmt += "x" * (offset - at) + _CODES[ctype]
        at = offset + ctypes.sizeof(ctype)
    fmt += "x" * (ctypes.sizeof(cls) - at)
    packer = struct.Struct(fmt)
    assert packer.size == ctypes.sizeof(cls), (packer.size, ctypes.sizeof(cls))
    return packer


ARGS_FIELDS = tuple(name for name, _, _ in _flat_fields(AttentionArgs))
ARGS_PACKER = packer_of(AttentionArgs)
ARGS_SIZE = ctypes.sizeof(AttentionArgs)


class FlashjitError(RuntimeError):
    """A flashjit call failed: status (name), the library's message, and the field it names."""

    def __init__(self, message, status=None, field=""):
        super().__init__(message)
        self.status = status
        self.field = field


# ---- finding NVRTC and the library --------------------------------------------------------------
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
BUNDLED_LIBRARY = (sorted(glob.glob(os.path.join(_PACKAGE_DIR, "_lib", "libflashjit.so.*"))) or
                   [os.path.join(_PACKAGE_DIR, "_lib", "libflashjit.so.1")])[0]  # its soname file
BUNDLED_TOOL = os.path.join(_PACKAGE_DIR, "_bin", "flashjit")


def pip_nvrtc_candidates(paths=None):
    """libnvrtc.so.13 of the nvidia-cuda-nvrtc wheel (nvidia/cu13/lib, its CUDA 13 layout) in each folder of
    paths (default sys.path), in order."""
    found = []
    for base in (sys.path if paths is None else paths):
        for sub in (("nvidia", "cu13", "lib"), ("nvidia", "cuda_nvrtc", "lib")):
            path = os.path.join(base or ".", *sub, NVRTC_SONAME)
            if os.path.isfile(path) and path not in found:
                found.append(path)
    return found


def file_from_environment(environ, name, what=""):
    """The file the environment variable `name` names, None when it is unset or empty; an error naming
    the variable when there is no such file."""
    explicit = (os.environ if environ is None else environ).get(name, "")
    if explicit and not os.path.isfile(explicit):
        raise FlashjitError(f"{name}={explicit}: no such file{what}")
    return explicit or None


def find_nvrtc(paths=None, environ=None):
    """The NVRTC to load before libflashjit.so, or None to leave it to the library's own search (its
    RUNPATH: the toolkit it was built with; then LD_LIBRARY_PATH and the system's): $FLASHJIT_NVRTC (a file),
    else the nvidia-cuda-nvrtc wheel's."""
    explicit = file_from_environment(environ, "FLASHJIT_NVRTC", " (it names libnvrtc.so.13 to load)")
    if explicit:
        return explicit
    candidates = pip_nvrtc_candidates(paths)
    return candidates[0] if candidates else None


def find_library(environ=None):
    """$FLASHJIT_LIBRARY, else the library this package carries."""
    explicit = file_from_environment(environ, "FLASHJIT_LIBRARY")
    if explicit:
        return explicit
    if os.path.isfile(BUNDLED_LIBRARY):
        return BUNDLED_LIBRARY
    raise FlashjitError(f"no libflashjit.so: this package carries none ({BUNDLED_LIBRARY}); build the wheel with "
                        "python/build_wheel.sh, or set FLASHJIT_LIBRARY or call flashjit.load_library(path)")


def loaded_path(soname_part):
    """The file this process mapped whose name contains soname_part (from /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if soname_part in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def _prototype(L, name, restype, argtypes):
    fn = getattr(L, name)
    fn.restype, fn.argtypes = restype, argtypes
    return fn


class Library:
    """libflashjit.so loaded, its functions typed. One per process (flashjit.library())."""

    def __init__(self, path, nvrtc=None):
        self.nvrtc = nvrtc
        if nvrtc:  # loaded first, so the library's NEEDED libnvrtc.so.13 is this one (matched by soname)
            try:
                self._nvrtc = ctypes.CDLL(nvrtc, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            except OSError as e:
                raise FlashjitError(f"NVRTC {nvrtc}: {e}") from None
        try:
            L = self.lib = ctypes.CDLL(path, mode=os.RTLD_NOW)
        except OSError as e:
            hint = ("" if "nvrtc" not in str(e) else
                    "; install NVRTC 13 (pip install 'nvidia-cuda-nvrtc>=13,<14', or a CUDA 13 toolkit) or set FLASHJIT_NVRTC")
            raise FlashjitError(f"cannot load {path}: {e}{hint}") from None
        self.path = path
        vp, i32, u32, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32, ctypes.c_char_p
        args_p = ctypes.POINTER(AttentionArgs)
        _prototype(L, "flashjit_get_version", u32, [])
        _prototype(L, "flashjit_check_abi", i32, [u32])
        _prototype(L, "flashjit_status_string", cp, [i32])
        _prototype(L, "flashjit_last_error_message", cp, [])
        _prototype(L, "flashjit_last_error_field", cp, [])
        _prototype(L, "flashjit_supported", i32, [cp, ctypes.c_char_p, ctypes.c_size_t])
        _prototype(L, "flashjit_validate_attention_args", i32, [cp, args_p])
        _prototype(L, "flashjit_attention_workspace_size", i32, [cp, args_p, ctypes.POINTER(ctypes.c_uint64)])
        _prototype(L, "flashjit_attention_workspace_counter_bytes", i32, [cp, args_p, ctypes.POINTER(ctypes.c_uint64)])
        _prototype(L, "flashjit_context_create", i32, [ctypes.POINTER(ContextOptions), ctypes.POINTER(vp)])
        _prototype(L, "flashjit_context_destroy", i32, [vp])
        _prototype(L, "flashjit_prewarm", i32, [vp, ctypes.POINTER(cp), ctypes.c_size_t])
        _prototype(L, "flashjit_prewarm_report", i32, [vp, ctypes.POINTER(cp), ctypes.c_size_t,
                                                       ctypes.POINTER(PrewarmResult)])
        _prototype(L, "flashjit_cache_export", i32, [vp, ctypes.POINTER(cp), ctypes.c_size_t, cp])
        _prototype(L, "flashjit_cache_import", i32, [vp, cp, ctypes.POINTER(ctypes.c_size_t)])
        _prototype(L, "flashjit_kernel_get", i32, [vp, cp, ctypes.POINTER(vp)])
        _prototype(L, "flashjit_kernel_release", i32, [vp])
        _prototype(L, "flashjit_kernel_describe", i32, [vp, ctypes.POINTER(KernelInfo)])
        _prototype(L, "flashjit_check_engine_metadata", i32, [vp, args_p])
        self.forward = _prototype(L, "flashjit_attention_forward", i32, [vp, args_p, vp])
        self.merge = _prototype(L, "flashjit_merge_attention_states", i32, [vp, ctypes.POINTER(MergeArgs), vp])
        # The same function taking the arguments' address as an int (the fast path's persistent buffers):
        # a second function object, so that forward keeps its typed pointer argument.
        self.forward_at = L["flashjit_attention_forward"]
        self.forward_at.restype, self.forward_at.argtypes = i32, [vp, vp, vp]
        self.check(L.flashjit_check_abi(ABI_VERSION), "check_abi")

    @property
    def nvrtc_loaded(self):
        """The NVRTC file this process has mapped, or None: the one loaded above, else the one the library
        loads itself on its first compile."""
        return loaded_path("libnvrtc.so")

    def version(self):
        v = self.lib.flashjit_get_version()
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"

    def error(self, status, what):
        name = self.lib.flashjit_status_string(status).decode()
        message = self.lib.flashjit_last_error_message().decode()
        field = self.lib.flashjit_last_error_field().decode()
        return FlashjitError(f"flashjit {what}: {name}: {message}", status=name, field=field)

    def check(self, status, what):
        if status != 0:
            raise self.error(status, what)

    def supported(self, spec):
        reason = ctypes.create_string_buffer(1024)
        status = self.lib.flashjit_supported(spec.encode(), reason, len(reason))
        if status == 0:
            return None
        if status == STATUS_INVALID_SPEC:
            return reason.value.decode() or self.lib.flashjit_last_error_message().decode()
        raise self.error(status, f"supported({spec})")

    def create_context(self, device=DEVICE_NONE, cache_dir=None):
        options = ContextOptions(struct_size=ctypes.sizeof(ContextOptions), device=device,
                                 cache_dir=os.fsencode(cache_dir) if cache_dir else None)
        context = ctypes.c_void_p()
        self.check(self.lib.flashjit_context_create(ctypes.byref(options), ctypes.byref(context)),
                   f"context_create(device {device})")
        return context

    def prewarm(self, specs, cache_dir=None):
        """Compiles specs into cache_dir (None: the default cache directory) with no GPU: prewarm_report."""
        return self.prewarm_report(specs, cache_dir)

    def prewarm_report(self, specs, cache_dir=None):
        """flashjit_prewarm_report: per spec (in order) a dict of spec, status ("compiled" when any of its kernels
        was compiled, "hit" when all were found, "failed"), kernels, compiled, hits, stored (in the cache directory)
        and error ("" unless failed). Raises FlashjitError naming every spec that failed (a kernel not stored in
        the cache directory fails its spec), the results on the error's .results."""
        specs = list(specs)
        context = self.create_context(DEVICE_NONE, cache_dir)
        try:
            encoded = [s.encode() for s in specs]
            array = (ctypes.c_char_p * len(encoded))(*encoded)
            results = (PrewarmResult * max(1, len(encoded)))()
            for r in results:
                r.struct_size = ctypes.sizeof(PrewarmResult)
            status = self.lib.flashjit_prewarm_report(context, array, len(encoded), results)
            error = self.error(status, "prewarm") if status != 0 else None
        finally:
            self.lib.flashjit_context_destroy(context)
        report = []
        for spec, r in zip(specs, results):
            failed = r.status != 0
            report.append({"spec": spec, "status": "failed" if failed else "compiled" if r.compiled else "hit",
                           "kernels": r.kernels, "compiled": r.compiled, "hits": r.hits, "stored": r.stored,
                           "error": r.message.decode(errors="replace") if failed else ""})
        if error is not None:
            error.results = report if any(r["kernels"] for r in report) else []
            raise error
        return report

    def cache_export(self, specs, path, cache_dir=None):
        """flashjit_cache_export: the kernels of specs (compiled into cache_dir when missing) as one bundle file."""
        specs = list(specs)
        context = self.create_context(DEVICE_NONE, cache_dir)
        try:
            encoded = [s.encode() for s in specs]
            array = (ctypes.c_char_p * len(encoded))(*encoded)
            self.check(self.lib.flashjit_cache_export(context, array, len(encoded), os.fsencode(path)), "cache_export")
        finally:
            self.lib.flashjit_context_destroy(context)

    def cache_import(self, path, cache_dir=None):
        """flashjit_cache_import: every entry of the bundle checked, then added to cache_dir; returns how many."""
        context = self.create_context(DEVICE_NONE, cache_dir)
        try:
            imported = ctypes.c_size_t(0)
            self.check(self.lib.flashjit_cache_import(context, os.fsencode(path), ctypes.byref(imported)), "cache_import")
            return imported.value
        finally:
            self.lib.flashjit_context_destroy(context)

    def kernel_get(self, context, spec):
        """(handle, resolved spec) of spec in context: the only call that compiles or loads."""
        handle = ctypes.c_void_p()
        self.check(self.lib.flashjit_kernel_get(context, spec.encode(), ctypes.byref(handle)), f"kernel_get({spec})")
        info = KernelInfo(struct_size=ctypes.sizeof(KernelInfo))
        self.check(self.lib.flashjit_kernel_describe(handle, ctypes.byref(info)), "kernel_describe")
        return handle, info.spec.decode()

    def workspace_size(self, spec, args):
        nbytes = ctypes.c_uint64(0)
        self.check(self.lib.flashjit_attention_workspace_size(spec.encode(), ctypes.byref(args), ctypes.byref(nbytes)),
                   f"attention_workspace_size({spec})")
        return nbytes.value

    def workspace_counter_bytes(self, spec, args):
        """The workspace's leading bytes that hold counters (scheduler=dynamic, combine=inline): zeroed before a
        first use; 0 for other specs."""
        nbytes = ctypes.c_uint64(0)
        self.check(self.lib.flashjit_attention_workspace_counter_bytes(spec.encode(), ctypes.byref(args),
                                                                       ctypes.byref(nbytes)),
                   f"attention_workspace_counter_bytes({spec})")
        return nbytes.value


_library = None
_library_lock = threading.Lock()


def load_library(path=None, nvrtc=None):
    """Loads libflashjit.so (path, else $FLASHJIT_LIBRARY, else the package's) after NVRTC (nvrtc, else
    $FLASHJIT_NVRTC, else the nvidia-cuda-nvrtc wheel's, else the library's own search). Once per process:
    a second call with another path is an error."""
    global _library
    with _library_lock:
        if _library is not None:
            if path and os.path.realpath(path) != os.path.realpath(_library.path):
                raise FlashjitError(f"flashjit is already loaded from {_library.path}; cannot load {path} too")
            return _library
        _library = Library(path or find_library(), nvrtc or find_nvrtc())
        return _library


def library():
    return _library if _library is not None else load_library()
