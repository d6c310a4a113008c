#!/usr/bin/env python3
"""CPU tests of the flashjit package (no GPU; torch optional): the struct layouts, the NVRTC and library
search, supported(), prewarm() into a temporary cache (one real NVRTC compile), the launch plans, and the
errors of the attention functions (unsupported arguments; without torch, that torch is needed).

  python3 python/tests/test_cpu.py [--lib build/libflashjit.so]      # the source tree's package
  python3 python/tests/test_cpu.py --installed [--expect-nvrtc PATH]  # the installed wheel's (wheel_check.sh)

Exits 0 when every test passed (tests needing torch skip with the reason)."""
import argparse
import contextlib
import ctypes
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stand_ins import contiguous_strides, fake_pointer  # noqa: E402

OPTIONS = argparse.Namespace(lib=None, installed=False, expect_nvrtc=None)


REPO = os.path.join(HERE, "..", "..")
HEADER = os.path.join(REPO, "include", "flashjit", "flashjit.h")


def has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


class Layouts(unittest.TestCase):
    def test_packer_writes_what_setting_each_field_writes(self):
        from flashjit import _capi
        rng = random.Random(5)
        for _ in range(20):
            values, by_name = [], _capi.AttentionArgs()
            for name, ctype, _ in _capi._flat_fields(_capi.AttentionArgs):
                value = rng.random() if ctype is ctypes.c_float else rng.randrange(0, 2 ** 31)
                values.append(value)
                target = by_name
                *path, last = name.split(".")
                for part in path:
                    target = getattr(target, part)
                setattr(target, last, value)
            packed = _capi.AttentionArgs()
            _capi.ARGS_PACKER.pack_into(packed, 0, *values)
            self.assertEqual(bytes(packed), bytes(by_name))

    def test_the_backends_packer_call_passes_one_value_per_field(self):
        """The torch backend writes the args with one ARGS_PACKER.pack_into call (_PACK): its values must be one
        per field of AttentionArgs, or every call fails at run time ("pack_into expected N items"). Read from the
        call's text (this machine may have no torch): each plain argument is one value, each *strides one of the
        four Strides triplets (batch, row, head)."""
        import ast
        from flashjit import _capi
        path = os.path.join(os.path.dirname(_capi.__file__), "_torch_backend.py")
        calls = [node for node in ast.walk(ast.parse(open(path).read()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_PACK"]
        self.assertEqual(len(calls), 1, "one _PACK call in the backend")
        values = calls[0].args[2:]  # pack_into(buffer, offset, *values)
        count = sum(len(_capi.Strides._fields_) if isinstance(v, ast.Starred) else 1 for v in values)
        self.assertEqual(count, len(_capi.ARGS_FIELDS))

    def test_structs_are_the_headers(self):
        """Every field's name, offset and the size of each struct the package passes, against the C header's
        declarations laid out by C's rules (natural alignment), not against numbers written here."""
        if not os.path.isfile(HEADER):
            self.skipTest("the C header (a source tree's include/flashjit/flashjit.h)")
        from flashjit import _capi
        with open(HEADER) as f:
            header = f.read()
        for c_name, cls in (("flashjit_attention_args", _capi.AttentionArgs), ("flashjit_merge_args", _capi.MergeArgs),
                            ("flashjit_context_options", _capi.ContextOptions)):
            fields, size = c_layout(header, c_name)
            ours = [(name, offset) for name, _, offset in _capi._flat_fields(cls)]
            self.assertEqual(ours, fields, c_name)
            self.assertEqual(ctypes.sizeof(cls), size, c_name)
        args = _capi.new_args()
        self.assertEqual((args.struct_size, args.window_left, args.window_right),
                         (c_layout(header, "flashjit_attention_args")[1], -1, -1))


C_TYPES = {"uint32_t": 4, "int32_t": 4, "float": 4, "uint64_t": 8, "int64_t": 8, "void*": 8, "const char*": 8,
           "CUcontext": 8, "flashjit_compile_policy_t": 4, "flashjit_cache_mode_t": 4}


def c_layout(header, struct):
    """([(dotted field, offset)], size) of `typedef struct <struct> {...}` in the header: scalars at their natural
    alignment, nested structs of the header flattened, the size rounded to the largest alignment."""
    import re
    body = re.search(r"typedef struct " + struct + r" \{(.*?)\n\} " + struct + "_t;", header, re.S)
    assert body, f"{struct} not found in the header"
    text = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    fields, at, align = [], 0, 1
    for decl in text.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.match(r"((?:const )?[A-Za-z_0-9]+\*?) (.*)", decl)
        ctype, names = m.group(1), [n.strip() for n in m.group(2).split(",")]
        if ctype.endswith("_t") and ctype not in C_TYPES:  # a struct of the header
            inner, inner_size = c_layout(header, ctype[:-2])
            inner_align = 8
            for name in names:
                at = -(-at // inner_align) * inner_align
                fields += [(f"{name}.{n}", at + o) for n, o in inner]
                at += inner_size
            align = max(align, inner_align)
            continue
        size = C_TYPES[ctype]
        for name in names:
            at = -(-at // size) * size
            fields.append((name.lstrip("*"), at))
            at += size
        align = max(align, size)
    return fields, -(-at // align) * align


class NvrtcSearch(unittest.TestCase):
    def test_explicit_path_must_exist(self):
        from flashjit import _capi
        with self.assertRaisesRegex(_capi.FlashjitError, "FLASHJIT_NVRTC=/no/such/libnvrtc.so.13: no such file"):
            _capi.find_nvrtc(paths=[], environ={"FLASHJIT_NVRTC": "/no/such/libnvrtc.so.13"})

    def test_pip_wheel_layout_found_in_path_order_and_env_first(self):
        from flashjit import _capi
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for base in (a, b):
                os.makedirs(os.path.join(base, "nvidia", "cu13", "lib"))
                open(os.path.join(base, "nvidia", "cu13", "lib", "libnvrtc.so.13"), "w").close()
            self.assertEqual(_capi.find_nvrtc(paths=["/nonexistent", b, a], environ={}),
                             os.path.join(b, "nvidia", "cu13", "lib", "libnvrtc.so.13"))
            explicit = os.path.join(a, "nvidia", "cu13", "lib", "libnvrtc.so.13")
            self.assertEqual(_capi.find_nvrtc(paths=[b], environ={"FLASHJIT_NVRTC": explicit}), explicit)
            self.assertIsNone(_capi.find_nvrtc(paths=["/nonexistent"], environ={}))

    def test_missing_library_is_a_clear_error(self):
        from flashjit import _capi
        with self.assertRaisesRegex(_capi.FlashjitError, "FLASHJIT_LIBRARY=/no/lib.so: no such file"):
            _capi.find_library(environ={"FLASHJIT_LIBRARY": "/no/lib.so"})


class Library(unittest.TestCase):
    def test_loads_with_the_headers_version(self):
        import flashjit
        lib = flashjit.library()
        if not OPTIONS.installed:
            import re
            with open(os.path.join(HERE, "..", "..", "include", "flashjit", "flashjit.h")) as f:
                header = f.read()
            parts = [re.search(rf"#define FLASHJIT_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
            self.assertEqual(lib.version(), ".".join(parts))
        if OPTIONS.installed:
            self.assertEqual(os.path.dirname(os.path.dirname(lib.path)), os.path.dirname(flashjit.__file__))
            self.assertEqual(flashjit.__version__, lib.version())

    def test_supported_answers_none_or_the_reason(self):
        import flashjit
        self.assertIsNone(flashjit.supported("dtype=bf16,head_dim=128,causal=1"))
        self.assertIsNone(flashjit.supported("dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"))
        self.assertRegex(flashjit.supported("dtype=bf16,head_dim=65"), r"^head_dim: .*multiple of 8")
        self.assertRegex(flashjit.supported("dtype=bf16,split_kv=1"), r"^split_kv: ")

    def test_supported_names_the_field_once(self):
        import flashjit
        for spec, field in (("head_dim=65", "head_dim"), ("dtype=bf16,split_kv=1", "split_kv"),
                            ("dtype=fp32", "dtype")):
            reason = flashjit.supported(spec)
            self.assertTrue(reason.startswith(field + ": "), reason)
            self.assertEqual(reason.count(field), 1, reason)

    def test_supported_takes_text_only(self):
        import flashjit
        for spec in (None, b"dtype=bf16", 128):
            with self.assertRaisesRegex(TypeError, r"flashjit.supported: spec: expected a str"):
                flashjit.supported(spec)

    def test_prewarm_compiles_into_the_cache_dir(self):
        import flashjit
        with tempfile.TemporaryDirectory() as cache:
            flashjit.prewarm(["dtype=fp16,head_dim=64,causal=0"], cache_dir=cache)
            entries = [n for n in os.listdir(cache) if n.endswith(".entry")]
            self.assertGreaterEqual(len(entries), 1, os.listdir(cache))
            nvrtc = flashjit.library().nvrtc_loaded  # the library loads NVRTC to compile
            self.assertTrue(nvrtc and "libnvrtc.so" in nvrtc, nvrtc)
            if OPTIONS.expect_nvrtc:
                self.assertEqual(nvrtc, OPTIONS.expect_nvrtc)
            flashjit.prewarm("dtype=fp16,head_dim=64,causal=0", cache_dir=cache)  # a hit: no new entry
            self.assertEqual(sorted(n for n in os.listdir(cache) if n.endswith(".entry")), sorted(entries))
            with self.assertRaisesRegex(flashjit.FlashjitError, "head_dim"):
                flashjit.prewarm(["dtype=fp16,head_dim=65"], cache_dir=cache)

    def test_every_planned_spec_is_supported(self):
        import flashjit
        from flashjit import _plan
        for varlen in (0, 1):
            for paged in (0, 1):
                for num_splits in (0, 1, 4):
                    for pack in (-1, 0, 1):
                        for batch, sq, hq, hkv in ((1, 1, 32, 8), (64, 1, 32, 8), (2, 1000, 8, 8)):
                            spec, _ = _plan.plan(132, "bf16", 128, 1, varlen, paged, batch, sq, hq, hkv, num_splits, pack)
                            self.assertIsNone(flashjit.supported(spec), spec)


def library_split_count(sm_count, batch, seqlen_q, heads_q, heads_kv, block_m, ctas_per_sm, pack_heads, max_splits):
    """The split count flashjit.h's DECODE section states (the count gives every CTA slot of the device a tile,
    at most max_splits) for one tile geometry: tiles = query blocks x tile heads x batch."""
    tokens_per_tile = block_m // pack_heads
    tiles = -(-seqlen_q // tokens_per_tile) * (heads_q // pack_heads) * batch
    return max(1, min(max_splits, sm_count * ctas_per_sm // tiles))


def header_max_splits():
    import re
    with open(HEADER) as f:
        return int(re.search(r"int32_t max_splits;\s*/\*.*?1\.\.(\d+)", f.read()).group(1))


class Plans(unittest.TestCase):
    def plan(self, **kw):
        from flashjit import _plan
        a = dict(sm_count=132, dtype_name="bf16", head_dim=128, causal=True, varlen=True, paged=True, batch=4,
                 seqlen_q=1, heads_q=32, heads_kv=8, num_splits=0, pack_gqa=-1)
        a.update(kw)
        return _plan.plan(**a)

    def test_small_decode_splits_and_packs(self):
        spec, splits = self.plan()
        self.assertEqual(spec, "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1")
        self.assertGreater(splits, 1)

    def test_workspace_holds_every_split_count_the_library_can_choose(self):
        """num_splits=0 leaves the count to the library: max_splits (what the workspace is sized for) is at least
        the count the header's rule gives for every tile geometry a spec may resolve to (block_m 64, 128 or 192,
        one or two CTAs an SM, any power-of-two head packing): a launch runs unsplit only where every geometry gives
        one split. The cap is the header's."""
        if not os.path.isfile(HEADER):
            self.skipTest("the C header (a source tree's include/flashjit/flashjit.h)")
        most_allowed = header_max_splits()
        rng, unsplit = random.Random(9), 0
        shapes = [(132, 4, 1, 32, 8), (132, 64, 1, 32, 8), (132, 1, 1, 8, 1), (132, 2, 300, 32, 8), (78, 3, 4, 64, 8)]
        shapes += [(rng.choice((78, 114, 132)), rng.randint(1, 300), rng.choice((1, 2, 4, 16, 64, 700)),
                    *rng.choice(((32, 8), (8, 8), (64, 8), (16, 1), (128, 128)))) for _ in range(400)]
        for sm, batch, sq, hq, hkv in shapes:
            spec, max_splits = self.plan(sm_count=sm, batch=batch, seqlen_q=sq, heads_q=hq, heads_kv=hkv)
            group = hq // hkv
            packs = [p for p in (1, 2, 4, 8, 16, 32, 64, 128) if group % p == 0]
            wanted = max(library_split_count(sm, batch, sq, hq, hkv, bm, ctas, p, most_allowed)
                         for bm in (64, 128, 192) for ctas in (1, 2) for p in packs if p <= bm)
            shape = (sm, batch, sq, hq, hkv)
            if "split_kv=1" not in spec:
                self.assertEqual((max_splits, wanted), (0, 1), shape)
            else:
                self.assertGreaterEqual(max_splits, wanted, shape)
                self.assertLessEqual(max_splits, most_allowed, shape)
                unsplit += wanted == 1
        self.assertLess(unsplit, len(shapes) // 10)  # the bound is close: few split plans where one split is all

    def test_big_batches_and_num_splits_1_do_not_split(self):
        for kw in ({"batch": 256}, {"num_splits": 1}, {"batch": 8, "seqlen_q": 4000}):
            spec, splits = self.plan(**kw)
            self.assertNotIn("split_kv", spec, kw)
            self.assertEqual(splits, 0, kw)
        self.assertIn("pack_gqa=1", self.plan(batch=256)[0])  # decode packs heads without splitting

    def test_num_splits_caps_and_pack_gqa_false(self):
        if not os.path.isfile(HEADER):
            self.skipTest("the C header (a source tree's include/flashjit/flashjit.h)")
        self.assertEqual(self.plan(num_splits=1000, batch=512)[1], header_max_splits())
        self.assertEqual(self.plan(num_splits=5, batch=512)[1], 5)
        self.assertNotIn("pack_gqa", self.plan(pack_gqa=0)[0])
        self.assertNotIn("pack_gqa", self.plan(heads_q=8, heads_kv=8)[0])
        self.assertNotIn("pack_gqa", self.plan(seqlen_q=500, batch=64)[0])

    def test_dense_never_splits_or_packs(self):
        self.assertEqual(self.plan(varlen=False, paged=False, num_splits=8),
                         ("dtype=bf16,head_dim=128,causal=1", 0))

    def test_the_library_chooses_the_combine(self):
        """The package names no combine (nor scheduler): the library's default runs, and whether the workspace
        keeps counters is read from the kernel's resolved spec."""
        from flashjit import _plan
        self.assertFalse(hasattr(_plan, "COMBINE"))
        self.assertNotIn("combine", self.plan()[0])
        self.assertTrue(_plan.workspace_has_counters(self.plan()[0] + ",combine=inline"))
        self.assertTrue(_plan.workspace_has_counters("dtype=bf16,head_dim=128,causal=1,varlen=1,scheduler=dynamic"))
        self.assertFalse(_plan.workspace_has_counters(self.plan()[0] + ",block_m=64,block_n=128"))


class FakeTensor:
    """What the entry points read of a tensor before the torch half: its shape, dtype and strides (contiguous
    unless given)."""

    def __init__(self, *shape, dtype="torch.bfloat16", strides=None):
        self.shape, self.dtype = tuple(shape), dtype
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)

    def stride(self):
        return self.strides


class RecordingBackend:
    """Stands in for the torch half (flashjit._interface._backend): records the arguments each entry point
    hands it (name, positional arguments, keyword arguments), launches nothing."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return "launched"
        return record


@contextlib.contextmanager
def recording_backend():
    from flashjit import _interface
    saved, _interface._backend = _interface._backend, RecordingBackend()
    try:
        yield _interface._backend
    finally:
        _interface._backend = saved


def dense(b=2, sq=100, sk=300, hq=8, hkv=8, d=64, dtype="torch.bfloat16", dv=None):
    return (FakeTensor(b, sq, hq, d, dtype=dtype), FakeTensor(b, sk, hkv, d, dtype=dtype),
            FakeTensor(b, sk, hkv, d if dv is None else dv, dtype=dtype))


def varlen(total_q=40, pages=50, page=16, hq=32, hkv=8, d=128):
    q, pool = FakeTensor(total_q, hq, d), FakeTensor(pages, page, hkv, d)
    return q, pool, pool, FakeTensor(5), None, 16, 4096  # q, k, v, cu_seqlens_q, cu_seqlens_k, max q, max k


class EntryPoints(unittest.TestCase):
    def test_unsupported_arguments_are_named(self):
        import flashjit
        cases = [
            (flashjit.flash_attn_func, {"sm_margin": 4}, "sm_margin=4"),
            (flashjit.flash_attn_varlen_func, {"dropout_p": 0.1}, "dropout_p=0.1"),
            (flashjit.flash_attn_varlen_func, {"fa_version": 1}, "fa_version=1"),
            (flashjit.flash_attn_with_kvcache, {"k": object()}, "k=.*appending new keys"),
            (flashjit.flash_attn_with_kvcache, {"rotary_cos": object()}, "rotary_cos="),
            (flashjit.flash_attn_with_kvcache, {"cache_batch_idx": object()}, "cache_batch_idx="),
            (flashjit.flash_attn_with_kvcache, {"cache_leftpad": object()}, "cache_leftpad="),
            (flashjit.flash_attn_with_kvcache, {"window_size": [-1, 0], "causal": False, "cache_seqlens": 5},
             None),  # causal, as FA3 reads it: not refused
        ]
        for fn, kw, pattern in cases:
            positional = (None,) * (7 if fn is flashjit.flash_attn_varlen_func else 3)
            with recording_backend():
                if pattern is None:
                    self.assertEqual(fn(*positional, **kw), "launched", msg=f"{fn.__name__} {kw}")
                    continue
                with self.assertRaisesRegex(NotImplementedError, pattern, msg=f"{fn.__name__} {kw}"):
                    fn(*positional, **kw)

    def test_arguments_fa3_ignores_when_their_feature_is_off_are_ignored(self):
        """FA3 (flash_api.cpp) reads the descales only for FP8 tensors, rotary_seqlens and rotary_interleaved
        only with rotary tensors, cu_seqlens_k_new only with new keys, softcap only above 0; scheduler_metadata
        is a value flashjit does not need; vLLM's fork passes window_size=None and fa_version=2 or 3."""
        import flashjit
        one = FakeTensor(2, 8, dtype="torch.float32")
        calls = [
            ("flash_attn_with_kvcache", dense(), dict(rotary_seqlens=FakeTensor(2), rotary_interleaved=False,
                                                      cache_seqlens=FakeTensor(2))),
            ("flash_attn_with_kvcache", dense(), dict(cu_seqlens_k_new=FakeTensor(3), cache_seqlens=7)),
            ("flash_attn_with_kvcache", dense(), dict(q_descale=one, k_descale=one, v_descale=one,
                                                      scheduler_metadata=FakeTensor(0), softcap=0.0)),
            ("flash_attn_func", dense(), dict(q_descale=one, k_descale=one, v_descale=one, softcap=-1.0,
                                              deterministic=True)),
            ("flash_attn_varlen_func", varlen(), dict(seqused_k=FakeTensor(4), scheduler_metadata=FakeTensor(0),
                                                      window_size=None, fa_version=3, q_descale=one)),
            ("flash_attn_varlen_func", varlen(), dict(seqused_k=FakeTensor(4), fa_version=2)),
        ]
        for name, positional, kw in calls:
            with recording_backend() as fake:
                self.assertEqual(getattr(flashjit, name)(*positional, **kw), "launched", msg=f"{name} {list(kw)}")
                self.assertEqual(fake.calls[0][0], name)

    def test_seqused_q_reaches_the_launch(self):
        import flashjit
        used = FakeTensor(4)
        with recording_backend() as fake:
            flashjit.flash_attn_varlen_func(*varlen(), seqused_q=used, seqused_k=FakeTensor(4))
        self.assertIs(fake.calls[0][1][7], used)

    def test_window_size_reads_as_fa3_reads_it(self):
        """q 100 queries, k 300 keys: a left side of at least 299 keys and a right side of at least 99 queries are
        no window, and causal is the window (-1, 0) (flash_api.cpp, mha_fwd); a window that still masks keys is
        flashjit's sliding window, (left, 0) causal with a left bound."""
        import flashjit
        cases = [((-1, 0), False, True, None), ((299, 0), False, True, None), ((5000, 0), True, True, None),
                 ((-1, 99), False, False, None), ((1000, 1000), False, False, None), ((299, 7), True, True, None),
                 ((-1, -1), True, True, None), ((-1, 98), False, False, (-1, 98)), ((298, 0), False, True, (298, 0)),
                 ((298, -1), True, True, (298, 0)), ((0, 0), False, True, (0, 0)), ((127, 3), False, False, (127, 3))]
        for window, causal, want, sides in cases:
            with recording_backend() as fake:
                flashjit.flash_attn_func(*dense(), causal=causal, window_size=window)
            args = fake.calls[0][1]
            self.assertIs(args[4], want, msg=(window, causal))
            if sides is None:
                self.assertEqual(len(args), 6, msg=f"{window}: no features expected, got {args[6:]}")
            else:
                self.assertEqual((args[6].window_left, args[6].window_right), sides, msg=(window, causal))
                self.assertEqual(args[6].spec_keys(), ("window",))
        # the keys a paged cache reaches are its table's columns x the page size (FA3's seqlen_k)
        q, pool = FakeTensor(3, 1, 32, 128), FakeTensor(64, 16, 8, 128)
        with recording_backend() as fake:
            flashjit.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=FakeTensor(3), page_table=FakeTensor(3, 20),
                                             window_size=(319, 0))
        self.assertIs(fake.calls[0][1][8], False)  # one query: causal or not is the same mask; FA3's right side -1
        self.assertEqual(len(fake.calls[0][1]), 13)
        with recording_backend() as fake:
            flashjit.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=FakeTensor(3), page_table=FakeTensor(3, 20),
                                             window_size=(318, 0))
        self.assertEqual((fake.calls[0][1][13].window_left, fake.calls[0][1][13].window_right), (318, -1))

    def test_masks_and_score_modifiers_reach_the_launch(self):
        """window_size, attention_chunk, softcap, alibi_slopes and s_aux (learnable_sink) become the launch's
        Features in each function (flashjit.h, MASKS AND SCORES), in the spec keys' order."""
        import flashjit
        sinks, slopes = FakeTensor(8, dtype="torch.float32"), FakeTensor(2, 8, dtype="torch.float32")
        all_on = dict(window_size=(128, 0), attention_chunk=8192, softcap=50.0, alibi_slopes=slopes)
        calls = [
            ("flash_attn_func", dense(), dict(all_on, s_aux=sinks), 6, slopes),
            ("flash_attn_func", dense(), dict(all_on, learnable_sink=sinks), 6, slopes),
            ("flash_attn_varlen_func", varlen(hq=8, hkv=8), dict(all_on, s_aux=sinks, seqused_k=FakeTensor(4), block_table=FakeTensor(4, 300),
                                                                 alibi_slopes=FakeTensor(4, 8, dtype="torch.float32")),
             16, None),
            ("flash_attn_with_kvcache", dense(), dict(all_on, s_aux=sinks, cache_seqlens=5), 13, slopes),
        ]
        for name, positional, kw, at, want_slopes in calls:
            with recording_backend() as fake:
                getattr(flashjit, name)(*positional, **kw)
            args = fake.calls[0][1]
            self.assertEqual(len(args), at + 1, name)
            f = args[at]
            self.assertEqual(f.spec_keys(), ("window", "chunk", "softcap", "sinks", "alibi"), name)
            self.assertEqual((f.window_left, f.window_right, f.chunk, f.softcap), (128, 0, 8192, 50.0), name)
            self.assertIs(f.sinks, sinks, name)
            if want_slopes is not None:
                self.assertIs(f.alibi_slopes, want_slopes, name)
        # FA3's off values stay off: softcap <= 0, chunk 0, no tensors
        with recording_backend() as fake:
            flashjit.flash_attn_func(*dense(), softcap=-1.0, attention_chunk=0, alibi_slopes=None, s_aux=None)
        self.assertEqual(len(fake.calls[0][1]), 6)

    def test_bad_feature_values_raise_value_error_naming_the_argument(self):
        import flashjit
        f32 = "torch.float32"
        calls = [
            (dict(window_size=(-2, 0)), "window_size"),
            (dict(window_size=(5,)), "window_size"),
            (dict(attention_chunk=-1), "attention_chunk"),
            (dict(softcap=float("nan")), "softcap"),
            (dict(softcap=float("inf")), "softcap"),
            (dict(s_aux=FakeTensor(8, dtype="torch.float16")), r"s_aux: dtype torch.float16"),
            (dict(s_aux=FakeTensor(4, dtype=f32)), r"s_aux: shape \(4,\); expected \(8,\)"),
            (dict(learnable_sink=FakeTensor(8, 1, dtype=f32)), "learnable_sink: shape"),
            (dict(s_aux=FakeTensor(8, dtype=f32), learnable_sink=FakeTensor(8, dtype=f32)), "pass one"),
            (dict(alibi_slopes=FakeTensor(8, dtype="torch.bfloat16")), r"alibi_slopes: dtype torch.bfloat16"),
            (dict(alibi_slopes=FakeTensor(3, 8, dtype=f32)), r"alibi_slopes: shape \(3, 8\); expected \(8,\) or \(2, 8\)"),
            (dict(alibi_slopes=FakeTensor(2, 4, dtype=f32)), "alibi_slopes: shape"),
        ]
        for kw, pattern in calls:
            with recording_backend() as fake, self.assertRaisesRegex(ValueError, pattern, msg=kw):
                flashjit.flash_attn_func(*dense(), **kw)
            self.assertEqual(fake.calls, [], kw)

    def test_a_library_without_the_feature_key_raises_not_implemented_naming_it(self):
        """The library answers whether its spec parser has the key: until the kernels have the feature, the call
        raises NotImplementedError naming the argument; once they do, nothing is raised."""
        from flashjit import _capi, _plan
        lib = _capi.library()
        for key, argument in (("window", "window_size"), ("chunk", "attention_chunk"), ("softcap", "softcap"),
                              ("sinks", "s_aux"), ("alibi", "alibi_slopes")):
            spec = _plan.spec_text("bf16", 128, True, True, True, feature_keys=(key,))
            self.assertTrue(spec.endswith(f",{key}=1"), spec)
            if lib.supported(spec) is None:
                _plan.require_feature_keys(lib, spec, (key,))  # the kernel has it: nothing raised
                continue
            with self.assertRaisesRegex(NotImplementedError, f"flashjit: {argument} .*not supported by this flashjit build"):
                _plan.require_feature_keys(lib, spec, (key,))
        # another refusal (not a feature key) is left to kernel_get's error
        _plan.require_feature_keys(lib, "dtype=bf16,head_dim=7,window=1", ())

    def test_features_flashjit_lacks_raise_not_implemented_however_they_arrive(self):
        import flashjit
        fp8 = "torch.float8_e4m3fn"
        q8, k8, v8 = dense(dtype=fp8)
        calls = [
            ("an e5m2 q", lambda: flashjit.flash_attn_func(FakeTensor(*q8.shape, dtype="torch.float8_e5m2"), k8, v8),
             r"q: dtype torch.float8_e5m2 \(FP8\) is not supported yet; FP8 queries are torch.float8_e4m3fn"),
            ("an e5m2 cache", lambda: flashjit.flash_attn_with_kvcache(dense()[0], *dense(dtype="torch.float8_e5m2")[1:],
                                                                       cache_seqlens=3),
             r"k_cache: dtype torch.float8_e5m2 \(FP8\) is not supported yet; an FP8 K/V cache is torch.float8_e4m3fn"),
            ("FP8 operands at head dim 80", lambda: flashjit.flash_attn_varlen_func(
                FakeTensor(40, 8, 80, dtype=fp8), *dense(d=80, dtype=fp8)[1:], FakeTensor(3), None, 16, 300,
                q_descale=FakeTensor(2, 8, dtype="torch.float32")),
             r"q: head dim 80 with FP8 operands is not supported; .*multiples of 32"),
            ("V head dim 192 above Q's 128", lambda: flashjit.flash_attn_func(*dense(d=128, dv=192)),
             r"v: head dim 192 above q's 128"),
            ("v_cache head dim 512", lambda: flashjit.flash_attn_with_kvcache(*dense(d=64, dv=512), cache_seqlens=3),
             r"v_cache: head dim 512 above q's 64"),
            ("head dim 288", lambda: flashjit.flash_attn_varlen_func(*varlen(d=288)),
             r"v: head dim 288 \(with q's 288\) is not supported; V's head dim is at most 256, or 384 or 512"),
            ("head dim 584", lambda: flashjit.flash_attn_varlen_func(*varlen(d=584)), r"q: head dim 584 .*up to 576"),
            ("scheduling e5m2", lambda: flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 128, FakeTensor(4),
                                                                        qkv_dtype="torch.float8_e5m2"), r"qkv_dtype=.*FP8"),
            ("scheduling a V head dim above Q's", lambda: flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 128, FakeTensor(4),
                                                                                          headdim_v=200),
             r"headdim_v: head dim 200 above headdim's 128 .*split MLA form"),  # (64/512 is qv's: Qv below)
        ]
        for label, call, pattern in calls:
            with recording_backend() as fake:
                try:
                    call()
                    self.fail(f"{label}: no error (the backend got {fake.calls})")
                except NotImplementedError as e:
                    self.assertIs(type(e), NotImplementedError, label)
                    self.assertRegex(str(e), pattern, label)

    def test_fa3_signatures(self):
        """Names, positions and defaults against FA3's hopper/flash_attn_interface.py as written there (varlen's
        and kvcache's keyword-only extras are vLLM's fork's; get_scheduler_metadata's qkv_dtype=None reads as
        FA3's torch.bfloat16, which flashjit cannot name without torch)."""
        import inspect
        import flashjit
        fa3 = {
            "flash_attn_func": "q k v softmax_scale=None causal=False qv=None q_descale=None k_descale=None "
                               "v_descale=None window_size=(-1, -1) attention_chunk=0 softcap=0.0 num_splits=1 "
                               "pack_gqa=None deterministic=False sm_margin=0 return_attn_probs=False",
            "flash_attn_varlen_func": "q k v cu_seqlens_q cu_seqlens_k max_seqlen_q max_seqlen_k seqused_q=None "
                                      "seqused_k=None softmax_scale=None causal=False qv=None q_descale=None "
                                      "k_descale=None v_descale=None window_size=(-1, -1) attention_chunk=0 "
                                      "softcap=0.0 num_splits=1 pack_gqa=None deterministic=False sm_margin=0 "
                                      "return_attn_probs=False",
            "flash_attn_with_kvcache": "q k_cache v_cache k=None v=None qv=None rotary_cos=None rotary_sin=None "
                                       "cache_seqlens=None cache_batch_idx=None cache_leftpad=None page_table=None "
                                       "cu_seqlens_q=None cu_seqlens_k_new=None max_seqlen_q=None rotary_seqlens=None "
                                       "q_descale=None k_descale=None v_descale=None softmax_scale=None causal=False "
                                       "window_size=(-1, -1) attention_chunk=0 softcap=0.0 rotary_interleaved=True "
                                       "scheduler_metadata=None num_splits=0 pack_gqa=None sm_margin=0 "
                                       "return_softmax_lse=False",
            "flash_attn_combine": "out_partial lse_partial out=None out_dtype=None",
            "get_scheduler_metadata": "batch_size max_seqlen_q max_seqlen_k num_heads_q num_heads_kv headdim "
                                      "cache_seqlens qkv_dtype=None headdim_v=None cu_seqlens_q=None "
                                      "cu_seqlens_k_new=None cache_leftpad=None page_size=None max_seqlen_k_new=0 "
                                      "causal=False window_size=(-1, -1) attention_chunk=0 has_softcap=False "
                                      "num_splits=0 pack_gqa=None sm_margin=0",
        }
        for name, want in fa3.items():
            params = [p for p in inspect.signature(getattr(flashjit, name)).parameters.values()
                      if p.kind is p.POSITIONAL_OR_KEYWORD]
            got = " ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
            self.assertEqual(got, want, name)

    @unittest.skipIf(has_torch(), "torch is installed here: the no-torch error is not reachable")
    def test_without_torch_the_functions_say_so(self):
        import flashjit
        for fn, n in ((flashjit.flash_attn_func, 3), (flashjit.flash_attn_varlen_func, 7),
                      (flashjit.flash_attn_with_kvcache, 3)):
            with self.assertRaisesRegex(RuntimeError, rf"flashjit.{fn.__name__} needs PyTorch"):
                fn(*(None,) * n)
        self.assertEqual(flashjit.loaded_specs(), [])

    @unittest.skipUnless(has_torch(), "needs torch (not installed here)")
    def test_cpu_tensors_are_refused_naming_q(self):
        import torch
        import flashjit
        q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "flash_attn_func: q: is on cpu"):
            flashjit.flash_attn_func(q, q, q)


E4M3 = "torch.float8_e4m3fn"


def fp8_cache(kind, b=2, hq=32, hkv=8, d=128):
    """(positional arguments, keywords) of a call of the function kind on an FP8 cache: q bf16, K and V e4m3."""
    q = FakeTensor(b, 1, hq, d)
    if kind == "flash_attn_func":
        return (q, FakeTensor(b, 300, hkv, d, dtype=E4M3), FakeTensor(b, 300, hkv, d, dtype=E4M3)), {}
    pool = FakeTensor(64, 16, hkv, d, dtype=E4M3)
    if kind == "flash_attn_varlen_func":
        return ((FakeTensor(9, hq, d), pool, pool, FakeTensor(b + 1), None, 4, 4096),
                dict(seqused_k=FakeTensor(b), block_table=FakeTensor(b, 256)))
    return (q, pool, pool), dict(cache_seqlens=FakeTensor(b), page_table=FakeTensor(b, 256))


FUNCTIONS = ("flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache")


class Fp8Cache(unittest.TestCase):
    """K and V of torch.float8_e4m3fn under a 16-bit q (flashjit.h, FP8 K/V CACHE): the spec key kv_dtype=e4m3,
    FA3's k_descale / v_descale as the launch's k_scale / v_scale with their strides, and the errors."""

    def test_descale_shapes_map_to_batch_and_head_strides(self):
        """One element: one scale (0, 0); [heads_kv]: per head (0, stride); [batch, heads_kv] (FA3's): its strides,
        vLLM's expanded per-tensor scale (strides 0) reading as one scale; a dimension of size 1 broadcasts."""
        from flashjit._plan import descale_strides
        batch, heads = 4, 8
        cases = [
            ((), (), (0, 0)), ((1,), (1,), (0, 0)), ((1, 1), (1, 1), (0, 0)), ((1, 1), (77, 5), (0, 0)),
            ((8,), (1,), (0, 1)), ((8,), (3,), (0, 3)),
            ((4, 8), (8, 1), (8, 1)),           # FA3's [batch, heads_kv], contiguous
            ((4, 8), (0, 0), (0, 0)),           # vLLM: layer._k_scale.expand((batch, heads_kv))
            ((4, 8), (0, 1), (0, 1)),           # per-head scales expanded over the batch
            ((4, 8), (16, 2), (16, 2)),         # a strided view of a wider tensor
            ((1, 8), (8, 1), (0, 1)), ((4, 1), (1, 1), (1, 0)),
        ]
        for shape, strides, want in cases:
            self.assertEqual(descale_strides(shape, strides, batch, heads), want, (shape, strides))
        for shape in ((3, 8), (4, 7), (8, 4), (7,), (4,), (4, 8, 1), (2, 4, 8)):
            strides = FakeTensor(*shape).stride()
            self.assertIsNone(descale_strides(shape, strides, batch, heads), shape)
        # batch or heads unknown: not checked
        self.assertEqual(descale_strides((3, 8), (8, 1), None, None), (8, 1))

    def test_fp8_k_and_v_select_kv_dtype_e4m3_in_the_spec(self):
        from flashjit import _plan
        spec, _ = _plan.plan(132, "bf16", 128, False, True, True, 4, 1, 32, 8, 0, -1, (), _plan.KV_DTYPE_E4M3)
        self.assertEqual(spec, "dtype=bf16,head_dim=128,causal=0,varlen=1,paged=1,pack_gqa=1,split_kv=1,kv_dtype=e4m3")
        spec, _ = _plan.plan(132, "fp16", 64, True, False, False, 2, 500, 8, 8, 1, -1, ("window",), "e4m3")
        self.assertEqual(spec, "dtype=fp16,head_dim=64,causal=1,window=1,kv_dtype=e4m3")
        self.assertNotIn("kv_dtype", _plan.plan(132, "bf16", 128, False, True, True, 4, 1, 32, 8, 0, -1)[0])

    def test_every_planned_fp8_spec_is_supported(self):
        """The library takes every spec the package plans for an FP8 cache (dense, packed, paged, split-KV decode
        with packed heads; bf16 and fp16; head dims 64, 128, 256; with a mask's key)."""
        import flashjit
        from flashjit import _plan
        for dtype in ("bf16", "fp16"):
            for d in (64, 128, 256):
                for varlen, paged in ((0, 0), (1, 0), (1, 1)):
                    for num_splits, pack in ((0, -1), (1, -1), (4, 1)):
                        for batch, sq, hq, hkv in ((1, 1, 32, 8), (64, 1, 32, 8), (2, 1000, 8, 8)):
                            for features in ((), ("window",)):
                                spec, _ = _plan.plan(132, dtype, d, 1, varlen, paged, batch, sq, hq, hkv, num_splits,
                                                     pack, features, _plan.KV_DTYPE_E4M3)
                                self.assertIsNone(flashjit.supported(spec), spec)

    def test_descales_reach_the_launch_with_their_strides(self):
        """Each function hands the torch half a KvScales (keyword kv_scales): the descale tensors as given and
        their (batch, head) strides; a descale not given is None (1.0 at launch) with strides (0, 0)."""
        import flashjit
        f32 = "torch.float32"
        per_tensor, per_head = FakeTensor(1, dtype=f32), FakeTensor(8, dtype=f32)
        fa3 = FakeTensor(2, 8, dtype=f32)
        vllm = FakeTensor(2, 8, dtype=f32, strides=(0, 0))  # layer._v_scale.expand((batch, heads_kv))
        for name in FUNCTIONS:
            positional, kw = fp8_cache(name)
            for k_descale, v_descale, want in ((per_tensor, per_head, ((0, 0), (0, 1))), (fa3, vllm, ((8, 1), (0, 0))),
                                               (None, fa3, ((0, 0), (8, 1))), (None, None, ((0, 0), (0, 0)))):
                with recording_backend() as fake:
                    result = getattr(flashjit, name)(*positional, **kw, k_descale=k_descale, v_descale=v_descale)
                self.assertEqual(result, "launched", name)
                called, args, kwargs = fake.calls[0]
                self.assertEqual(called, name)
                scales = kwargs["kv_scales"]
                self.assertIs(scales.k, k_descale, name)
                self.assertIs(scales.v, v_descale, name)
                self.assertEqual((scales.k_strides, scales.v_strides), want, name)
                self.assertIsNone(args[-1], f"{name}: no features")  # the Features slot before the keyword

    def test_a_16_bit_cache_gets_no_scales(self):
        """bf16 K and V: the descales are ignored as FA3 ignores them, and no kv_scales reaches the torch half."""
        import flashjit
        one = FakeTensor(2, 8, dtype="torch.float32")
        with recording_backend() as fake:
            flashjit.flash_attn_func(*dense(), k_descale=one, v_descale=one, q_descale=one)
        self.assertEqual((len(fake.calls[0][1]), fake.calls[0][2]), (6, {}))

    def test_errors_name_the_argument(self):
        import flashjit
        f32 = "torch.float32"
        for name in FUNCTIONS:
            positional, kw = fp8_cache(name)
            q, k = positional[0], positional[1]
            names = ("k_cache", "v_cache") if name == "flash_attn_with_kvcache" else ("k", "v")
            mixed = list(positional)
            mixed[2] = FakeTensor(*k.shape)  # bf16 V with an FP8 K
            value_errors = [
                (dict(q_descale=FakeTensor(2, 8, dtype=f32)), r"q_descale: .*16-bit q and an FP8 cache.*q_descale=None"),
                (dict(k_descale=FakeTensor(2, 8, dtype="torch.float16")), r"k_descale: dtype torch.float16; expected torch.float32"),
                (dict(v_descale=FakeTensor(3, 8, dtype=f32)), r"v_descale: shape \(3, 8\); expected one element .*\(8,\).*\(2, 8\)"),
                (dict(k_descale=FakeTensor(4, dtype=f32)), r"k_descale: shape \(4,\)"),
                (dict(v_descale=FakeTensor(2, 8, 1, dtype=f32)), r"v_descale: shape \(2, 8, 1\)"),
            ]
            for extra, pattern in value_errors:
                with recording_backend() as fake, self.assertRaisesRegex(ValueError, pattern, msg=(name, extra)):
                    getattr(flashjit, name)(*positional, **kw, **extra)
                self.assertEqual(fake.calls, [], (name, extra))
            with recording_backend() as fake, self.assertRaisesRegex(
                    ValueError, rf"{names[0]} and {names[1]}: dtypes torch.float8_e4m3fn and torch.bfloat16 differ"):
                getattr(flashjit, name)(*mixed, **kw)
            mixed[1], mixed[2] = FakeTensor(*k.shape), k  # the other way round
            with recording_backend() as fake, self.assertRaisesRegex(
                    ValueError, rf"{names[0]} and {names[1]}: dtypes torch.bfloat16 and torch.float8_e4m3fn differ"):
                getattr(flashjit, name)(*mixed, **kw)
            fp8_q = list(positional)  # an FP8 q over the FP8 cache: FP8 operands, q_descale taken
            fp8_q[0] = FakeTensor(*q.shape, dtype=E4M3)
            with recording_backend() as fake:
                getattr(flashjit, name)(*fp8_q, **kw, q_descale=FakeTensor(2, 8, dtype=f32))
            self.assertEqual(fake.calls[0][2]["kv_scales"].q_strides, (8, 1), name)
        # a head dim FP8 rows cannot take (16 bytes at a time), refused before any padding
        q, k, v = dense(d=72)
        k8, v8 = FakeTensor(*k.shape, dtype=E4M3), FakeTensor(*v.shape, dtype=E4M3)
        with recording_backend(), self.assertRaisesRegex(NotImplementedError, r"k: head dim 72 with an FP8 cache"):
            flashjit.flash_attn_func(q, k8, v8)

    def test_get_scheduler_metadata_takes_the_fp8_cache_dtype(self):
        import flashjit
        with recording_backend() as fake:
            self.assertEqual(flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 128, FakeTensor(4), qkv_dtype=E4M3),
                             "launched")
        self.assertEqual(fake.calls[0][0], "scheduler_metadata")

    def test_the_fast_path_keys_and_launches_carry_the_descales(self):
        """The fast path (a remembered call's argument bytes, new pointers each call) must not keep one call's
        descale pointers for another's: read from the backend's text (this machine may have no torch), each
        function's fast-path key holds _scales_key's description of the descales, each remembered launch is
        handed the call's kv_scales, the plan's key and the recorded launch know whether the cache is FP8, and
        the launch writes the scale pointers at the args' k_scale field."""
        import ast
        from flashjit import _capi
        path = os.path.join(os.path.dirname(_capi.__file__), "_torch_backend.py")
        with open(path) as f:
            source = f.read()
        tree = ast.parse(source)
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}

        def names_in(node):
            return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for name in FUNCTIONS:
            fn = functions[name]
            keys = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "key" for t in n.targets)]
            self.assertEqual(len(keys), 1, name)
            self.assertIn("_scales_key", names_in(keys[0].value), name)
            launches = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                        and n.func.id == "launch"]
            self.assertEqual(len(launches), 1, name)
            self.assertEqual(launches[0].args[-1].id, "kv_scales", name)
            runs = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id == "run"]
            self.assertTrue(runs and all(r.args[-1].id == "kv_scales" for r in runs), name)
        forward = functions["forward"]
        plan_key = [n for n in ast.walk(forward) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "key" for t in n.targets)][0]
        self.assertIn("fp8", names_in(plan_key.value))
        self.assertIn("out", names_in(plan_key.value))  # FP8 operands: O's dtype picks out_dtype
        record = [n for n in ast.walk(forward) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                  and n.func.id == "_FastLaunch"][0]
        self.assertEqual(record.args[-1].id, "fp8")
        self.assertIn("_SCALES_AT = _capi.AttentionArgs.k_scale.offset", source)
        self.assertIn("_Q_SCALE_AT = _capi.AttentionArgs.q_scale.offset", source)
        key_of_scales = functions["_scales_key"]
        self.assertIn("q", names_in(key_of_scales))  # q_descale's shape and strides are in the key too
        self.assertEqual(_capi.AttentionArgs.v_scale.offset, _capi.AttentionArgs.k_scale.offset + 8)


def fp8_operands(kind, b=2, hq=32, hkv=8, d=128):
    """(positional arguments, keywords) of a call of the function kind on FP8 operands: Q, K and V e4m3."""
    positional, kw = fp8_cache(kind, b, hq, hkv, d)
    q = positional[0]
    return (FakeTensor(*q.shape, dtype=E4M3),) + tuple(positional[1:]), kw


class Fp8Operands(unittest.TestCase):
    """Q, K and V of torch.float8_e4m3fn (flashjit.h, FP8 OPERANDS; FA3's FP8): the spec key dtype=e4m3 with
    out_dtype, FA3's q_descale / k_descale / v_descale as the launch's q_scale / k_scale / v_scale with their
    strides (mapped as the FP8 cache maps k/v), and the errors."""

    def test_the_plan_selects_dtype_e4m3_and_out_dtype(self):
        from flashjit import _plan
        spec, _ = _plan.plan(132, _plan.DTYPE_E4M3, 128, True, False, False, 2, 1000, 8, 8, 1, -1)
        self.assertEqual(spec, "dtype=e4m3,head_dim=128,causal=1")
        spec, _ = _plan.plan(132, "e4m3", 128, False, True, True, 4, 1, 32, 8, 0, -1, ("window",), None, "fp16")
        self.assertEqual(spec, "dtype=e4m3,head_dim=128,causal=0,out_dtype=fp16,varlen=1,paged=1,pack_gqa=1,split_kv=1,"
                               "window=1")
        self.assertNotIn("out_dtype", _plan.plan(132, "e4m3", 64, 0, 0, 0, 2, 100, 8, 8, 1, -1, (), None, "bf16")[0])

    def test_every_planned_fp8_operands_spec_is_supported(self):
        """The library takes every spec the package plans for FP8 operands (dense, packed, paged, split-KV decode
        with packed heads; O bf16 and fp16; head dims 64 to 256; with a mask's key)."""
        import flashjit
        from flashjit import _plan
        for out_dtype in ("bf16", "fp16"):
            for d in (64, 96, 128, 192, 256):
                for varlen, paged in ((0, 0), (1, 0), (1, 1)):
                    for num_splits, pack in ((0, -1), (1, -1), (4, 1)):
                        for batch, sq, hq, hkv in ((1, 1, 32, 8), (2, 1000, 8, 8)):
                            for features in ((), ("window", "sinks")):
                                spec, _ = _plan.plan(132, _plan.DTYPE_E4M3, d, 1, varlen, paged, batch, sq, hq, hkv,
                                                     num_splits, pack, features, None, out_dtype)
                                self.assertIsNone(flashjit.supported(spec), spec)

    def test_descales_reach_the_launch_with_their_strides(self):
        """Each function hands the torch half a KvScales with q_descale too: the tensors as given and their (batch,
        head) strides, as the FP8 cache's k/v descales map; a descale not given is None (1.0) with strides (0, 0)."""
        import flashjit
        f32 = "torch.float32"
        per_tensor, per_head = FakeTensor(1, dtype=f32), FakeTensor(8, dtype=f32)
        fa3 = FakeTensor(2, 8, dtype=f32)
        expanded = FakeTensor(2, 8, dtype=f32, strides=(0, 0))
        for name in FUNCTIONS:
            positional, kw = fp8_operands(name)
            for q_descale, k_descale, v_descale, want in (
                    (fa3, fa3, fa3, ((8, 1), (8, 1), (8, 1))),
                    (per_tensor, per_head, expanded, ((0, 0), (0, 1), (0, 0))),
                    (None, fa3, None, ((0, 0), (8, 1), (0, 0))),
                    (None, None, None, ((0, 0), (0, 0), (0, 0)))):
                with recording_backend() as fake:
                    result = getattr(flashjit, name)(*positional, **kw, q_descale=q_descale, k_descale=k_descale,
                                                     v_descale=v_descale)
                self.assertEqual(result, "launched", name)
                called, args, kwargs = fake.calls[0]
                self.assertEqual(called, name)
                scales = kwargs["kv_scales"]
                self.assertIs(scales.q, q_descale, name)
                self.assertIs(scales.k, k_descale, name)
                self.assertIs(scales.v, v_descale, name)
                self.assertEqual((scales.q_strides, scales.k_strides, scales.v_strides), want, name)

    def test_errors_name_the_argument(self):
        import flashjit
        f32 = "torch.float32"
        for name in FUNCTIONS:
            positional, kw = fp8_operands(name)
            names = ("q", "k_cache", "v_cache") if name == "flash_attn_with_kvcache" else ("q", "k", "v")
            for extra, pattern in (
                    (dict(q_descale=FakeTensor(2, 8, dtype="torch.float16")), r"q_descale: dtype torch.float16; expected torch.float32"),
                    (dict(q_descale=FakeTensor(3, 8, dtype=f32)), r"q_descale: shape \(3, 8\); expected one element"),
                    (dict(q_descale=FakeTensor(32, dtype=f32)), r"q_descale: shape \(32,\)"),  # per query head: not FA3's
                    (dict(k_descale=FakeTensor(2, 8, 1, dtype=f32)), r"k_descale: shape \(2, 8, 1\)")):
                with recording_backend() as fake, self.assertRaisesRegex(ValueError, pattern, msg=(name, extra)):
                    getattr(flashjit, name)(*positional, **kw, **extra)
                self.assertEqual(fake.calls, [], (name, extra))
            # An FP8 q with 16-bit K and V: ValueError naming the three.
            sixteen = list(positional)
            sixteen[1] = sixteen[2] = FakeTensor(*positional[1].shape)
            with recording_backend() as fake, self.assertRaisesRegex(
                    ValueError, rf"{names[0]}, {names[1]} and {names[2]}: dtypes torch.float8_e4m3fn, torch.bfloat16 and "
                                r"torch.bfloat16; an FP8 q needs"):
                getattr(flashjit, name)(*sixteen, **kw, q_descale=FakeTensor(2, 8, dtype=f32))
            self.assertEqual(fake.calls, [], name)

    def test_the_backend_maps_q_descale_as_the_cache_maps_k_and_v(self):
        """Read from the backend's text (no torch here): forward packs q_scale and its strides from kv_scales.q
        (0 when not given: the C API's 1, no tensor made per call), the fast launch writes q_scale's pointer each
        call for FP8 operands, the op fwd takes q_descale, the plan picks dtype=e4m3 with O's dtype, and the
        16-bit q's launches pass 0 there."""
        import ast
        from flashjit import _capi
        path = os.path.join(os.path.dirname(_capi.__file__), "_torch_backend.py")
        with open(path) as f:
            source = f.read()
        tree = ast.parse(source)
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        forward = ast.unparse(functions["forward"])
        self.assertIn("q_scale, q_scale_batch, q_scale_head,", forward)
        self.assertIn("kv_scales.q.data_ptr()", forward)
        self.assertIn("_plan.DTYPE_E4M3", forward)
        self.assertIn("_DTYPES[out.dtype]", forward)
        self.assertNotIn("torch.ones", forward)
        fast = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_FastLaunch"][0]
        self.assertIn("_PACK_Q_SCALE(args, _Q_SCALE_AT", ast.unparse(fast))
        fwd = ast.unparse(functions["fwd"])
        self.assertIn("q_descale", fwd)
        self.assertIn("q_descale", ast.unparse(functions["_fwd_fake"]))
        self.assertIn("kv_scales.q", ast.unparse(functions["run"]))
        self.assertEqual(_capi.AttentionArgs.q_scale_batch_stride.offset, _capi.AttentionArgs.q_scale.offset + 8)

    def test_get_scheduler_metadata_takes_e4m3(self):
        import flashjit
        with recording_backend() as fake:
            self.assertEqual(flashjit.get_scheduler_metadata(2, 1000, 1000, 8, 8, 128, FakeTensor(2), qkv_dtype=E4M3),
                             "launched")
        self.assertEqual(fake.calls[0][0], "scheduler_metadata")


def head_dims_call(kind, d, dv, dtype="torch.bfloat16", b=2, hq=8, hkv=2):
    """(positional arguments, keywords) of a call of the function kind with q and k of head dim d and v of dv."""
    if kind == "flash_attn_func":
        return (FakeTensor(b, 100, hq, d, dtype=dtype), FakeTensor(b, 300, hkv, d, dtype=dtype),
                FakeTensor(b, 300, hkv, dv, dtype=dtype)), {}
    k_pool, v_pool = FakeTensor(64, 16, hkv, d, dtype=dtype), FakeTensor(64, 16, hkv, dv, dtype=dtype)
    if kind == "flash_attn_varlen_func":
        return ((FakeTensor(9, hq, d, dtype=dtype), k_pool, v_pool, FakeTensor(b + 1), None, 4, 4096),
                dict(seqused_k=FakeTensor(b), block_table=FakeTensor(b, 256)))
    return (FakeTensor(b, 1, hq, d, dtype=dtype), k_pool, v_pool), dict(cache_seqlens=FakeTensor(b), page_table=FakeTensor(b, 256))


class HeadDimV(unittest.TestCase):
    """V (and out) with a head dim below Q's and K's (FA3's head_dim_v; spec key head_dim_v): the entry points take
    it, plans name it, the library takes every spec planned, and the head dims the kernels lack are refused naming
    the argument."""

    def test_v_narrower_than_q_reaches_the_torch_half(self):
        import flashjit
        for name in FUNCTIONS:
            for d, dv in ((192, 128), (320, 256), (128, 64), (64, 40), (256, 8), (512, 512), (576, 512)):
                positional, kw = head_dims_call(name, d, dv)
                with recording_backend() as fake:
                    self.assertEqual(getattr(flashjit, name)(*positional, **kw), "launched", (name, d, dv))
                called, args, _ = fake.calls[0]
                self.assertEqual(called, name)
                self.assertIs(args[2], positional[2], (name, d, dv))  # v as given: its head dim goes with it
        # FP8 with V narrower: an FP8 cache (head dims multiples of 16) and FP8 operands (of 32)
        for name in FUNCTIONS:
            positional, kw = head_dims_call(name, 192, 128, dtype=E4M3)
            q = positional[0]
            for fp8_q in (False, True):
                call = list(positional)
                call[0] = FakeTensor(*q.shape, dtype=E4M3 if fp8_q else "torch.bfloat16")
                with recording_backend() as fake:
                    self.assertEqual(getattr(flashjit, name)(*call, **kw), "launched", (name, fp8_q))
        with recording_backend() as fake:
            self.assertEqual(flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 192, FakeTensor(4), headdim_v=128), "launched")
            self.assertEqual(flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 320, FakeTensor(4), headdim_v=256), "launched")

    def test_head_dims_the_kernels_lack_are_refused_naming_the_argument(self):
        import flashjit
        for name in FUNCTIONS:
            v_name = "v_cache" if name == "flash_attn_with_kvcache" else "v"
            cases = [
                ((128, 136), NotImplementedError, rf"{v_name}: head dim 136 above q's 128 is not supported"),
                ((320, 320), NotImplementedError, rf"{v_name}: head dim 320 \(with q's 320\) is not supported"),
                ((584, 512), NotImplementedError, r"q: head dim 584 is not supported; .*up to 576"),
            ]
            for (d, dv), exc, pattern in cases:
                positional, kw = head_dims_call(name, d, dv)
                with recording_backend() as fake, self.assertRaisesRegex(exc, pattern, msg=(name, d, dv)):
                    getattr(flashjit, name)(*positional, **kw)
                self.assertEqual(fake.calls, [], (name, d, dv))
            # FP8: V's rows too (an FP8 cache's 16 bytes at a time; FP8 operands' multiples of 32)
            positional, kw = head_dims_call(name, 192, 120, dtype=E4M3)
            call = list(positional)
            call[0] = FakeTensor(*positional[0].shape)  # a bf16 q over the FP8 cache
            with recording_backend(), self.assertRaisesRegex(NotImplementedError, rf"{v_name}: head dim 120 with an FP8 cache"):
                getattr(flashjit, name)(*call, **kw)
            positional, kw = head_dims_call(name, 192, 112, dtype=E4M3)
            call = list(positional)
            call[0] = FakeTensor(*positional[0].shape, dtype=E4M3)
            with recording_backend(), self.assertRaisesRegex(NotImplementedError, rf"{v_name}: head dim 112 with FP8 operands"):
                getattr(flashjit, name)(*call, **kw)
        with recording_backend(), self.assertRaisesRegex(NotImplementedError, r"headdim_v: head dim 320 \(with headdim's 320\)"):
            flashjit.get_scheduler_metadata(4, 1, 4096, 32, 8, 320, FakeTensor(4))

    def test_plans_name_head_dim_v_and_the_library_takes_them(self):
        import flashjit
        from flashjit import _plan
        spec, _ = _plan.plan(132, "bf16", 192, True, True, False, 2, 8192, 16, 16, 1, -1, head_dim_v=128)
        self.assertEqual(spec, "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1")
        for same in (None, 192):  # V as wide as Q: no key
            self.assertEqual(_plan.plan(132, "bf16", 192, True, False, False, 2, 8192, 16, 16, 1, -1, head_dim_v=same)[0],
                             "dtype=bf16,head_dim=192,causal=1")
        spec, _ = _plan.plan(132, _plan.DTYPE_E4M3, 192, False, True, True, 64, 1, 32, 8, 4, -1, (), None, "fp16", 128)
        self.assertEqual(spec, "dtype=e4m3,head_dim=192,head_dim_v=128,causal=0,out_dtype=fp16,varlen=1,paged=1,pack_gqa=1,"
                               "split_kv=1")
        for d, dv, dtypes in ((192, 128, ("bf16", "fp16", "e4m3", "bf16/e4m3")), (320, 256, ("bf16", "fp16")),
                              (128, 64, ("bf16",)), (64, 40, ("fp16",))):
            for dtype in dtypes:
                dtype_name, kv_dtype = (dtype.split("/")[0], _plan.KV_DTYPE_E4M3) if "/" in dtype else (dtype, None)
                for varlen, paged in ((0, 0), (1, 0), (1, 1)):
                    for num_splits, pack in ((0, -1), (1, -1), (4, 1)):
                        for batch, sq, hq, hkv in ((1, 1, 32, 8), (2, 1000, 8, 8)):
                            spec, _ = _plan.plan(132, dtype_name, d, 1, varlen, paged, batch, sq, hq, hkv, num_splits, pack,
                                                 (), kv_dtype, None, dv)
                            self.assertIn(f"head_dim={d},head_dim_v={dv},", spec)
                            self.assertIsNone(flashjit.supported(spec), spec)


# ---- FA3's qv (flashjit.h, MLA SPLIT FORM; spec key qv=1) ---------------------------------------------------------
SPEC_SOURCE = os.path.join(REPO, "src", "spec", "attention_spec.cpp")


def spec_key_order():
    """The spec keys in the order the library prints them (to_string walks src/spec/attention_spec.cpp's fields()
    table), None outside a source tree."""
    import re
    if not os.path.isfile(SPEC_SOURCE):
        return None
    with open(SPEC_SOURCE) as f:
        source = f.read()
    table = source[source.index("fields() {"):]
    table = table[:table.index("\n  };")]
    return [a or b for a, b in re.findall(r'(?:printed_when_on\("(\w+)"|^\s*\{"(\w+)",)', table, re.M)]


def qv_call(kind, dq=64, dv=512, dtype="torch.bfloat16", b=2, hq=16, hkv=1, page=64):
    """(positional arguments, keywords with qv) of a call of the function kind in FA3's split MLA form: q and k of
    dq columns (the rotary part), qv and v of dv (the latent part); kvcache's cache is one latent tensor
    [pages, page, hkv, dv + dq] with v_cache and k_cache its two views."""
    if kind == "flash_attn_func":
        q, qv = FakeTensor(b, 3, hq, dq, dtype=dtype), FakeTensor(b, 3, hq, dv, dtype=dtype)
        return (q, FakeTensor(b, 300, hkv, dq, dtype=dtype), FakeTensor(b, 300, hkv, dv, dtype=dtype)), dict(qv=qv)
    if kind == "flash_attn_varlen_func":
        q, qv = FakeTensor(9, hq, dq, dtype=dtype), FakeTensor(9, hq, dv, dtype=dtype)
        return ((q, FakeTensor(700, hkv, dq, dtype=dtype), FakeTensor(700, hkv, dv, dtype=dtype), FakeTensor(b + 1),
                 FakeTensor(b + 1), 4, 500), dict(qv=qv))
    row = hkv * (dq + dv)
    strides = (page * row, row, dq + dv, 1)  # views of the latent cache: rows dq + dv wide
    k_cache = FakeTensor(40, page, hkv, dq, dtype=dtype, strides=strides)
    v_cache = FakeTensor(40, page, hkv, dv, dtype=dtype, strides=strides)
    q, qv = FakeTensor(b, 1, hq, dq, dtype=dtype), FakeTensor(b, 1, hq, dv, dtype=dtype)
    return (q, k_cache, v_cache), dict(qv=qv, cache_seqlens=FakeTensor(b), page_table=FakeTensor(b, 30), causal=True)


class Qv(unittest.TestCase):
    """FA3's qv (flashjit.h, MLA SPLIT FORM): the spec key qv=1 in the library's place, head_dim q's and qv's columns
    together, qv handed to the torch half, and the interface's refusals (dtypes, FP8, shapes, strides), each naming
    qv; get_scheduler_metadata's headdim_v above headdim."""

    def test_the_spec_has_qv_where_the_library_prints_it(self):
        from flashjit import _plan
        spec, splits = _plan.plan(132, "bf16", 576, True, True, True, 4, 1, 128, 1, 0, -1, head_dim_v=512, qv=True)
        self.assertEqual(spec, "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,"
                               "v_in_k=1")
        self.assertGreater(splits, 1)
        spec, _ = _plan.plan(132, "fp16", 192, False, False, False, 2, 300, 16, 4, 1, -1, head_dim_v=128, qv=True)
        self.assertEqual(spec, "dtype=fp16,head_dim=192,head_dim_v=128,causal=0,qv=1")
        spec, _ = _plan.plan(132, "bf16", 576, True, True, True, 4, 1, 128, 1, 0, -1, ("window", "sinks", "alibi"),
                             head_dim_v=512, qv=True)
        self.assertEqual(spec, "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,"
                               "window=1,sinks=1,alibi=1,qv=1")
        self.assertNotIn("qv", _plan.plan(132, "bf16", 576, True, True, True, 4, 1, 128, 1, 0, -1, head_dim_v=512)[0])
        order = spec_key_order()
        if order is None:
            self.skipTest("the library's key order (a source tree's src/spec/attention_spec.cpp)")
        self.assertLess(order.index("alibi"), order.index("qv"))
        self.assertLess(order.index("qv"), order.index("kv_dtype"))
        for text in (spec, _plan.spec_text("bf16", 192, True, True, False, False, True, ("chunk", "softcap"),
                                           head_dim_v=128, qv=True)):
            keys = [part.split("=")[0] for part in text.split(",")]
            self.assertEqual(keys, sorted(keys, key=order.index), text)  # to_string's order: the text round-trips

    def test_qv_takes_the_shared_scores_kernels_only_when_switched_on(self):
        """_plan.QV_V_IN_K (on by default; off, the plan keeps O in parts): the MLA split form's plan adds v_in_k=1
        after qv=1 where the library's shared-scores kernels take the call (head_dim_v 384 or 512, varlen or paged,
        16-bit, no masks or score modifiers), and the library takes every such spec."""
        import flashjit
        from flashjit import _plan
        call = (132, "bf16", 576, True, True, True, 4, 1, 128, 1, 0, -1)
        self.assertTrue(_plan.QV_V_IN_K)
        saved, _plan.QV_V_IN_K = _plan.QV_V_IN_K, False
        try:
            self.assertNotIn("v_in_k", _plan.plan(*call, head_dim_v=512, qv=True)[0])
        finally:
            _plan.QV_V_IN_K = saved
        saved, _plan.QV_V_IN_K = _plan.QV_V_IN_K, True
        try:
            spec, splits = _plan.plan(*call, head_dim_v=512, qv=True)
            self.assertEqual(spec, "dtype=bf16,head_dim=576,head_dim_v=512,causal=1,varlen=1,paged=1,pack_gqa=1,"
                                   "split_kv=1,qv=1,v_in_k=1")
            self.assertGreater(splits, 1)
            order = spec_key_order()
            if order is not None:
                keys = [part.split("=")[0] for part in spec.split(",")]
                self.assertEqual(keys, sorted(keys, key=order.index), spec)
            for dtype in ("bf16", "fp16"):
                for dq, dv in ((64, 512), (64, 384)):
                    for varlen, paged in ((1, 0), (1, 1)):
                        for num_splits, pack in ((0, -1), (1, -1), (4, 1)):
                            for batch, sq, hq, hkv in ((1, 1, 128, 1), (64, 2, 16, 1), (2, 300, 8, 8)):
                                spec, _ = _plan.plan(132, dtype, dq + dv, 1, varlen, paged, batch, sq, hq, hkv,
                                                     num_splits, pack, head_dim_v=dv, qv=True)
                                self.assertTrue(spec.endswith(",qv=1,v_in_k=1"), spec)
                                self.assertIsNone(flashjit.supported(spec), spec)
            # Where the shared-scores kernels do not apply the plan keeps O in parts (or one piece of O).
            for dv, varlen, paged, features in ((128, 1, 1, ()), (256, 1, 0, ()), (512, 0, 0, ()),
                                                (512, 1, 1, ("window",))):
                spec, _ = _plan.plan(132, "bf16", 64 + dv, True, varlen, paged, 4, 1, 16, 1, 0, -1, features,
                                     head_dim_v=dv, qv=True)
                self.assertNotIn("v_in_k", spec)
                self.assertIsNone(flashjit.supported(spec), spec)
            self.assertNotIn("v_in_k", _plan.plan(*call, head_dim_v=512)[0], "the absorbed form's FA3 call: no qv")
        finally:
            _plan.QV_V_IN_K = saved

    def check_large_head_dim_plans(self, suffix, absent):
        """The plans at head dims 384 and 512 with V as wide (both 16-bit types, dense, varlen and paged, with and
        without masks and score modifiers) end with suffix(d, features), never split, are specs the library takes,
        in its key order; where those kernels do not apply (other head dims, V narrower, split-KV, an FP8 cache, the
        split form) the plan has no key `absent` and the library takes it."""
        import flashjit
        from flashjit import _plan
        order = spec_key_order()
        for dtype in ("bf16", "fp16"):
            for d in (384, 512):
                for varlen, paged in ((0, 0), (1, 0), (1, 1)):
                    for features in ((), ("window", "sinks"), ("softcap",)):
                        spec, splits = _plan.plan(132, dtype, d, 1, varlen, paged, 4, 700, 8, 2, 1, -1, features)
                        self.assertTrue(spec.endswith(suffix(d, features)), spec)
                        self.assertEqual(splits, 0)
                        self.assertIsNone(flashjit.supported(spec), spec)
                        if order is not None:
                            keys = [part.split("=")[0] for part in spec.split(",")]
                            self.assertEqual(keys, sorted(keys, key=order.index), spec)
        for args, kwargs in (((132, "bf16", 256, 1, 0, 0, 2, 700, 8, 2, 1, -1), {}),
                             ((132, "bf16", 512, 1, 0, 0, 2, 700, 8, 2, 1, -1), {"head_dim_v": 256}),
                             ((132, "bf16", 512, 1, 1, 1, 1, 1, 16, 4, 0, -1), {}),
                             ((132, "bf16", 512, 1, 1, 1, 4, 700, 8, 2, 1, -1), {"kv_dtype": "e4m3"}),
                             ((132, "bf16", 576, 1, 1, 1, 4, 1, 16, 1, 0, -1), {"head_dim_v": 512, "qv": True})):
            spec, _ = _plan.plan(*args, **kwargs)
            self.assertNotIn(absent, spec)
            self.assertIsNone(flashjit.supported(spec), spec)

    def test_dim_split_only_when_switched_on_and_where_it_applies(self):
        """_plan.DIM_SPLIT (on by default; off, the plan keeps O in parts): the plan adds dim_split=1 at head dims 384
        and 512 with V as wide, 16-bit, without split-KV, an FP8 cache or the split form, in the library's key order,
        and the library takes every such spec; elsewhere the plan is what it was."""
        from flashjit import _plan
        self.assertTrue(_plan.DIM_SPLIT)
        call = (132, "bf16", 512, True, False, False, 2, 8192, 16, 8, 1, -1)
        saved = _plan.DIM_SPLIT, _plan.PAIRED
        _plan.PAIRED = False  # (PAIRED goes first where it applies: see the test below)
        try:
            _plan.DIM_SPLIT = False
            self.assertNotIn("dim_split", _plan.plan(*call)[0])
            _plan.DIM_SPLIT = True
            self.assertEqual(_plan.plan(*call), ("dtype=bf16,head_dim=512,causal=1,dim_split=1", 0))
            self.check_large_head_dim_plans(lambda d, features: ",dim_split=1", "dim_split")
        finally:
            _plan.DIM_SPLIT, _plan.PAIRED = saved

    def test_paired_with_q_in_registers_ahead_of_dim_split_where_it_applies(self):
        """_plan.PAIRED (on by default): at head dims 384 and 512 with V as wide, 16-bit, without split-KV, an FP8
        cache, the split form or a mask or score modifier, the plan is paired=1 with q_reg_dims at the most the
        library takes (384 at 384, 288 at 512), in the library's key order, and the library takes every such spec;
        with a mask or score modifier it stays dim_split=1; off, dim_split=1 everywhere it applies."""
        from flashjit import _plan
        self.assertTrue(_plan.PAIRED and _plan.DIM_SPLIT)
        call = (132, "bf16", 512, True, False, False, 2, 8192, 16, 8, 1, -1)
        self.assertEqual(_plan.plan(*call), ("dtype=bf16,head_dim=512,causal=1,paired=1,q_reg_dims=288", 0))
        self.check_large_head_dim_plans(
            lambda d, features: ",dim_split=1" if features else f",paired=1,q_reg_dims={_plan.PAIRED_Q_REG_DIMS[d]}",
            "q_reg_dims")
        saved, _plan.PAIRED = _plan.PAIRED, False
        try:
            self.assertEqual(_plan.plan(*call), ("dtype=bf16,head_dim=512,causal=1,dim_split=1", 0))
        finally:
            _plan.PAIRED = saved

    def test_every_planned_qv_spec_is_supported(self):
        import flashjit
        from flashjit import _plan
        for dtype in ("bf16", "fp16"):
            for dq, dv in ((64, 512), (64, 128), (64, 64), (128, 128), (64, 256), (64, 384)):
                for varlen, paged in ((0, 0), (1, 0), (1, 1)):
                    for num_splits, pack in ((0, -1), (1, -1), (4, 1)):
                        for batch, sq, hq, hkv in ((1, 1, 128, 1), (64, 2, 16, 1), (2, 1000, 8, 8)):
                            spec, _ = _plan.plan(132, dtype, dq + dv, 1, varlen, paged, batch, sq, hq, hkv, num_splits,
                                                 pack, head_dim_v=dv, qv=True)
                            shared = _plan.qv_takes_v_in_k(dtype, dv, varlen, paged)
                            self.assertTrue(spec.endswith(",qv=1,v_in_k=1" if shared else ",qv=1"), spec)
                            self.assertIsNone(flashjit.supported(spec), spec)

    def test_qv_reaches_the_torch_half(self):
        """Each function hands the torch half qv by keyword, q, k and v as given (kvcache's k_cache and v_cache two
        views of one latent cache), the Features slot None, no kv_scales."""
        import flashjit
        for name in FUNCTIONS:
            for dq, dv in ((64, 512), (64, 128), (128, 64)):
                positional, kw = qv_call(name, dq, dv)
                with recording_backend() as fake:
                    self.assertEqual(getattr(flashjit, name)(*positional, **kw), "launched", (name, dq, dv))
                called, args, kwargs = fake.calls[0]
                self.assertEqual(called, name)
                self.assertEqual(list(kwargs), ["qv"], name)
                self.assertIs(kwargs["qv"], kw["qv"], name)
                self.assertIs(args[0], positional[0], name)
                self.assertIs(args[2], positional[2], name)
                self.assertIsNone(args[-1], f"{name}: the Features slot")
            positional, kw = qv_call(name, dtype="torch.float16")  # fp16 too
            with recording_backend():
                self.assertEqual(getattr(flashjit, name)(*positional, **kw), "launched", name)

    def test_refusals_name_qv(self):
        import flashjit
        for name in FUNCTIONS:
            positional, kw = qv_call(name)
            q, v = positional[0], positional[2]
            cases = []  # (widths the library refuses are refused at the launch's plan: QvLaunch)
            fp16_qv = FakeTensor(*kw["qv"].shape, dtype="torch.float16")
            cases.append((positional, dict(kw, qv=fp16_qv), TypeError,
                          r"qv: dtype torch.float16 differs from q's torch.bfloat16"))
            e4m3_qv = FakeTensor(*kw["qv"].shape, dtype=E4M3)
            cases.append((positional, dict(kw, qv=e4m3_qv), TypeError, r"qv: dtype torch.float8_e4m3fn differs"))
            cache8 = (q, FakeTensor(*positional[1].shape, dtype=E4M3), FakeTensor(*v.shape, dtype=E4M3)) + positional[3:]
            cases.append((cache8, kw, NotImplementedError, r"qv=<tensor of shape .*> with an FP8 K/V cache is not supported"))
            operands = (FakeTensor(*q.shape, dtype=E4M3),) + cache8[1:]
            cases.append((operands, dict(kw, qv=e4m3_qv), NotImplementedError, r"qv=.* with FP8 operands is not supported"))
            other_heads = FakeTensor(*q.shape[:-2], q.shape[-2] * 2, v.shape[-1])
            cases.append((positional, dict(kw, qv=other_heads), ValueError, r"qv: shape .*; expected"))
            other_width = FakeTensor(*q.shape[:-1], 256)
            cases.append((positional, dict(kw, qv=other_width), ValueError,
                          rf"qv: shape .*256\); expected .*head dim {v.shape[-1]}"))
            shape = kw["qv"].shape
            strided = FakeTensor(*shape, strides=tuple(2 * s for s in FakeTensor(*shape).stride()))
            cases.append((positional, dict(kw, qv=strided), ValueError, r"qv: the last dimension \(head_dim_v\) must be contiguous"))
            cases.append((positional, dict(kw, qv=object()), TypeError, r"qv: expected a torch.Tensor"))
            if name == "flash_attn_with_kvcache":  # appending new keys is not supported, with qv as without
                cases.append((positional, dict(kw, k=FakeTensor(2, 1, 1, 64), v=FakeTensor(2, 1, 1, 512)),
                              NotImplementedError, r"k=<tensor of shape \(2, 1, 1, 64\)> is not supported yet \(appending"))
            for call, call_kw, exc, pattern in cases:
                with recording_backend() as fake:
                    with self.assertRaisesRegex(exc, rf"^flashjit.{name}: " + pattern, msg=(name, pattern)) as caught:
                        getattr(flashjit, name)(*call, **call_kw)
                self.assertIs(type(caught.exception), exc, (name, pattern))
                self.assertEqual(fake.calls, [], (name, pattern))

    def test_get_scheduler_metadata_takes_the_split_form(self):
        """FA3's get_scheduler_metadata with headdim_v above headdim: the split MLA form's shapes (vLLM's FlashAttention
        MLA backend passes headdim 64, headdim_v 512), taken where the library takes the spec with qv=1."""
        import flashjit
        for headdim, headdim_v, dtype in ((64, 512, None), (64, 512, "torch.float16"), (64, 128, "torch.bfloat16")):
            with recording_backend() as fake:
                self.assertEqual(flashjit.get_scheduler_metadata(4, 1, 4096, 128, 1, headdim, FakeTensor(4), dtype,
                                                                 headdim_v, page_size=64, causal=True), "launched")
            self.assertEqual(fake.calls[0][0], "scheduler_metadata")
        for headdim, headdim_v, dtype, pattern in (
                (32, 512, None, r"headdim_v: head dim 512 above headdim's 32 .*qv: value 1 is not allowed"),
                (64, 512, E4M3, r"headdim_v: head dim 512 above headdim's 64 .*qkv_dtype=torch.float8_e4m3fn")):
            with recording_backend() as fake, self.assertRaisesRegex(NotImplementedError, pattern):
                flashjit.get_scheduler_metadata(4, 1, 4096, 128, 1, headdim, FakeTensor(4), dtype, headdim_v)
            self.assertEqual(fake.calls, [])


# ---- the torch half on a stand-in torch: what forward packs, checked by the library -------------------------------
class _StubDtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


class _StubDevice:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index

    def __eq__(self, other):
        return isinstance(other, _StubDevice) and (self.type, self.index) == (other.type, other.index)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class _StubTensor:
    """What the torch half reads of a tensor: shape, stride(), dtype, device, data_ptr() and the views it makes
    (select, view / reshape of [b, s, h, d] into rows, the last dimension sliced); a copy is a new pointer."""

    def __init__(self, shape, dtype, strides=None, ptr=None, device=None):
        self.shape, self.dtype = tuple(shape), dtype
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)
        self.ptr = fake_pointer() if ptr is None else ptr
        self.device = device or _StubDevice("cuda", 0)
        self.is_cuda, self.requires_grad = self.device.type == "cuda", False

    def stride(self, i=None):
        return self.strides if i is None else self.strides[i]

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return self.device.index

    def data_ptr(self):
        return self.ptr

    def numel(self):
        n = 1
        for size in self.shape:
            n *= size
        return n

    def select(self, dim, index):
        return _StubTensor(self.shape[:dim] + self.shape[dim + 1:], self.dtype, self.strides[:dim] + self.strides[dim + 1:],
                           self.ptr + index * self.strides[dim] * self.dtype.itemsize, self.device)

    def view(self, *shape):
        if len(shape) == 3 and len(self.shape) == 4 and self.strides[0] == self.shape[1] * self.strides[1]:
            return _StubTensor(shape, self.dtype, self.strides[1:], self.ptr, self.device)
        raise RuntimeError(f"view {shape} of strides {self.strides}")

    def reshape(self, *shape):
        try:
            return self.view(*shape)
        except RuntimeError:
            return _StubTensor(shape, self.dtype, device=self.device)  # a copy

    def __getitem__(self, key):  # t[..., a:b]: the last dimension's columns a..b (t[a:b] of a 1-D tensor)
        cols = key[-1] if isinstance(key, tuple) else key
        start, stop, _ = cols.indices(self.shape[-1])
        return _StubTensor(self.shape[:-1] + (stop - start,), self.dtype, self.strides,
                           self.ptr + start * self.dtype.itemsize, self.device)

    def __mul__(self, n):
        return _StubTensor(self.shape, self.dtype, device=self.device)

    zeroed = []  # (pointer, bytes) of each zero_(), in order

    def zero_(self):
        _StubTensor.zeroed.append((self.ptr, self.numel() * self.dtype.itemsize))
        return self


def _stub_torch():
    """A module named torch with what _torch_backend reads at import and on its launch path (no GPU)."""
    import types
    torch = types.ModuleType("torch")
    for name, size in (("float16", 2), ("bfloat16", 2), ("float32", 4), ("int32", 4), ("uint8", 1),
                       ("float8_e4m3fn", 1)):
        setattr(torch, name, _StubDtype(name, size))
    torch.Tensor, torch.device = _StubTensor, _StubDevice

    def empty(shape, dtype=None, device=None):
        return _StubTensor((shape,) if isinstance(shape, int) else shape, dtype, device=device)
    torch.empty = torch.zeros = empty
    torch.full = lambda shape, value, dtype=None, device=None: empty(shape, dtype, device)
    torch.arange = lambda n, dtype=None, device=None: empty((n,), dtype, device)
    torch.is_grad_enabled = lambda: False
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
    torch.cuda = types.SimpleNamespace(is_current_stream_capturing=lambda: False)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x5000,
                                     _cuda_isCurrentStreamCapturing=lambda: False)

    class CustomOp:
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

        def register_fake(self, fn):
            return fn
    torch.library = types.SimpleNamespace(custom_op=lambda name, mutates_args=(), device_types=None: CustomOp)
    return torch


class ValidatingLibrary:
    """Stands in for the library on the torch half's device: a launch (the full path's forward or the fast path's
    forward_at) is flashjit_validate_attention_args, the library's full argument check against the spec (no GPU);
    every launch recorded as (spec, a copy of its arguments, fast path or not)."""

    def __init__(self, lib):
        self.real, self.lib, self.launches = lib, lib.lib, []

    def supported(self, spec):
        return self.real.supported(spec)

    def workspace_size(self, spec, args):
        return self.real.workspace_size(spec, args)

    def workspace_counter_bytes(self, spec, args):
        return self.real.workspace_counter_bytes(spec, args)

    def error(self, status, what):
        return self.real.error(status, what)

    def forward(self, handle, args_ref, stream):
        return self._validate(handle, args_ref._obj, False)

    def forward_at(self, handle, at, stream):
        from flashjit import _capi
        return self._validate(handle, _capi.AttentionArgs.from_address(at), True)

    def _validate(self, spec, args, fast):
        from flashjit import _capi
        self.launches.append((spec, _capi.AttentionArgs.from_buffer_copy(bytes(args)), fast))
        return self.lib.flashjit_validate_attention_args(spec.encode(), ctypes.byref(args))


class StubDevice:
    """The torch half's _Device for device 0: the kernel is its spec (fetches recorded), the library validates."""

    def __init__(self, lib):
        self.index, self.lib, self.sm_count = 0, ValidatingLibrary(lib), 132
        self.kernels, self.resolved, self.plans, self.workspaces, self.sizes, self.ones = {}, {}, {}, {}, {}, None
        self.fetched = []

    def kernel(self, spec):
        self.fetched.append(spec)
        return spec

    def unit_scale(self):
        return fake_pointer()


def backend_on_stub_torch():
    """flashjit/_torch_backend.py loaded as its own module against a stand-in torch (sys.modules is restored: the
    package itself still has no torch half here)."""
    import importlib.util
    from flashjit import _capi
    path = os.path.join(os.path.dirname(_capi.__file__), "_torch_backend.py")
    saved = sys.modules.get("torch")
    stub = sys.modules["torch"] = _stub_torch()
    try:
        spec = importlib.util.spec_from_file_location("flashjit._torch_backend_on_stub_torch", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved
    return module, stub


class SplitWorkspace(unittest.TestCase):
    """The torch half's split workspace (on a stand-in torch, sized by the library): remembered per batch and
    seqlen_q too (combine=inline's merge counters are a word per sequence and query block, so two calls of the
    same total_q need different sizes); made zeroed outside a capture where its kernel keeps counters; inside a CUDA
    graph capture a fresh one whose counters alone are zeroed (flashjit_attention_workspace_counter_bytes), not the
    split partials after them."""
    INLINE = ("dtype=bf16,head_dim=576,head_dim_v=512,causal=0,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline,"
              "v_in_k=1,chunk_waits=1")

    def setUp(self):
        import flashjit
        self.tb, self.torch = backend_on_stub_torch()
        self.dev = StubDevice(flashjit.library())
        _StubTensor.zeroed = []
        self.made_zeroed = []
        empty = self.torch.empty

        def zeros(shape, dtype=None, device=None):
            t = empty(shape, dtype, device)
            self.made_zeroed.append((t.ptr, t.numel()))
            return t
        self.torch.zeros = zeros

    def args(self, batch, seqlen_q):
        from flashjit import _capi
        a = _capi.new_args()
        a.batch, a.seqlen_q, a.seqlen_k, a.heads_q, a.heads_kv, a.head_dim = batch, seqlen_q, 4096, 16, 1, 576
        a.total_q, a.max_splits = batch * seqlen_q, 2
        return a

    def workspace(self, spec, a, capturing):
        self.torch.cuda.is_current_stream_capturing = lambda: capturing
        layout = self.tb._workspace_layout(self.dev, spec, a.max_splits, a.total_q, a.heads_q, a.batch, a.seqlen_q)
        return self.tb._workspace(self.dev, spec, a.max_splits, a, a.total_q, a.heads_q, 0x5000, layout)

    def test_sizes_follow_the_batch_and_seqlen_q(self):
        lib = self.dev.lib
        two_queries, one_query = self.args(32, 2), self.args(64, 1)  # the same total_q, heads_q and max_splits
        self.assertLess(lib.workspace_size(self.INLINE, two_queries), lib.workspace_size(self.INLINE, one_query))
        for a in (two_queries, one_query, two_queries):
            self.assertEqual(self.workspace(self.INLINE, a, True)[1], lib.workspace_size(self.INLINE, a))

    def test_outside_a_capture_the_workspace_is_made_zeroed_once(self):
        a = self.args(64, 1)
        ptr, nbytes = self.workspace(self.INLINE, a, False)
        self.assertEqual(self.made_zeroed, [(ptr, nbytes)])
        self.assertEqual(self.workspace(self.INLINE, a, False), (ptr, nbytes))  # reused, not zeroed again
        self.assertEqual(len(self.made_zeroed), 1)
        self.assertEqual(_StubTensor.zeroed, [])

    def test_a_capture_zeroes_the_counters_alone(self):
        a = self.args(64, 1)
        counters = self.dev.lib.workspace_counter_bytes(self.INLINE, a)
        ptr, nbytes = self.workspace(self.INLINE, a, True)
        self.assertGreater(counters, 0)
        self.assertLess(counters, nbytes // 1000)  # 512 bytes of counters before about 4 MB of partials
        self.assertEqual(_StubTensor.zeroed, [(ptr, counters)])
        self.assertEqual(self.made_zeroed, [])
        plain = self.INLINE.replace(",combine=inline", "")  # no counters: nothing zeroed, in a capture or not
        self.assertEqual(self.dev.lib.workspace_counter_bytes(plain, a), 0)
        self.workspace(plain, a, True)
        self.workspace(plain, a, False)
        self.assertEqual((_StubTensor.zeroed, self.made_zeroed), ([(ptr, counters)], []))


class QvLaunch(unittest.TestCase):
    """The torch half's launches with qv on a stand-in torch, from the FA3 entry points: qv's pointer and strides in
    the argument struct, q's strides the rotary tensor's, head_dim q's and qv's columns, FA3's default scale, the
    library's argument check passing; the fast path writing the new qv pointer; the library's errors naming qv."""

    def setUp(self):
        import flashjit
        from flashjit import _interface
        self.tb, self.torch = backend_on_stub_torch()
        self.dev = StubDevice(flashjit.library())
        self.tb._devices[0] = self.dev
        self.saved, _interface._backend = _interface._backend, self.tb

    def tearDown(self):
        from flashjit import _interface
        _interface._backend = self.saved

    def tensor(self, *shape, dtype=None, strides=None, ptr=None):
        return _StubTensor(shape, dtype or self.torch.bfloat16, strides, ptr)

    def launched(self):
        spec, args, fast = self.dev.lib.launches[-1]
        return spec, args, fast

    def strides(self, s):
        return s.batch, s.row, s.head

    def latent_call(self, batch=3, queries=1, heads=16, page=64, pages=40, max_pages=30, q_views=True):
        """flash_attn_with_kvcache's MLA decode arguments: the latent cache [pages, page, 1, 576] with v_cache its
        first 512 columns and k_cache its last 64; q_nope (qv) and q_rope (q) views of one [.., 576] buffer, or two
        tensors."""
        i32 = self.torch.int32
        latent = self.tensor(pages, page, 1, 576)
        k_cache, v_cache = latent[..., 512:], latent[..., :512]
        if q_views:
            q_full = self.tensor(batch, queries, heads, 576)
            qv, q = q_full[..., :512], q_full[..., 512:]
        else:
            qv, q = self.tensor(batch, queries, heads, 512), self.tensor(batch, queries, heads, 64)
        return latent, q, k_cache, v_cache, qv, self.tensor(batch, max_pages, dtype=i32), self.tensor(batch, dtype=i32)

    def test_kvcache_paged_latent_views(self):
        import flashjit
        latent, q, k_cache, v_cache, qv, table, lens = self.latent_call()
        out = flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=qv, cache_seqlens=lens, page_table=table,
                                               causal=True)
        spec, a, fast = self.launched()
        self.assertEqual(self.dev.fetched, [spec])
        self.assertTrue(spec.startswith("dtype=bf16,head_dim=576,head_dim_v=512,causal="), spec)
        self.assertTrue(spec.endswith(",varlen=1,paged=1,pack_gqa=1,split_kv=1,qv=1,v_in_k=1"), spec)
        self.assertFalse(fast)
        self.assertEqual((a.q, a.qv, a.k, a.v, a.o), (q.ptr, qv.ptr, latent.ptr + 512 * 2, latent.ptr, out.ptr))
        self.assertEqual(q.ptr, qv.ptr + 512 * 2)
        # q's strides are the rotary tensor's (rows of the [.., 576] buffer), qv's its own; packed rows
        self.assertEqual(self.strides(a.q_strides), (16 * 576, 16 * 576, 576))
        self.assertEqual(self.strides(a.qv_strides), (16 * 576, 16 * 576, 576))
        self.assertEqual(self.strides(a.k_strides), (64 * 576, 576, 576))
        self.assertEqual(self.strides(a.v_strides), (64 * 576, 576, 576))
        self.assertEqual(self.strides(a.o_strides), (16 * 512, 16 * 512, 512))
        self.assertEqual((a.head_dim, a.heads_q, a.heads_kv, a.batch, a.seqlen_q, a.total_q), (576, 16, 1, 3, 1, 3))
        self.assertEqual((a.page_size, a.num_pages, a.block_table, a.seqused_k), (64, 40, table.ptr, lens.ptr))
        self.assertAlmostEqual(a.softmax_scale, 576 ** -0.5, places=7)  # FA3's default: (64 + 512)^-0.5
        self.assertNotEqual(a.workspace, 0)
        self.assertEqual(out.shape, (3, 1, 16, 512))
        # the fast path: the same shapes, new tensors; the plan and bytes kept, every pointer new, qv's included
        latent2, q2, k2, v2, qv2, table2, lens2 = self.latent_call()
        out2 = flashjit.flash_attn_with_kvcache(q2, k2, v2, qv=qv2, cache_seqlens=lens2, page_table=table2, causal=True)
        spec2, a2, fast = self.launched()
        self.assertTrue(fast, "the second call takes the fast path")
        self.assertEqual((spec2, self.dev.fetched), (spec, [spec]))
        self.assertEqual((a2.q, a2.qv, a2.k, a2.v, a2.o, a2.block_table, a2.seqused_k),
                         (q2.ptr, qv2.ptr, k2.ptr, v2.ptr, out2.ptr, table2.ptr, lens2.ptr))
        for name in _capi_fields():
            if name not in ("q", "k", "v", "o", "qv", "block_table", "seqused_k", "workspace"):
                self.assertEqual(field_of(a2, name), field_of(a, name), name)
        # qv (and q) as tensors of their own: another key, the full path, their strides
        _, q3, k3, v3, qv3, table3, lens3 = self.latent_call(q_views=False)
        flashjit.flash_attn_with_kvcache(q3, k3, v3, qv=qv3, cache_seqlens=lens3, page_table=table3, causal=True)
        spec3, a3, fast = self.launched()
        self.assertFalse(fast)
        self.assertEqual((spec3, a3.qv, a3.q), (spec, qv3.ptr, q3.ptr))
        self.assertEqual(self.strides(a3.q_strides), (16 * 64, 16 * 64, 64))
        self.assertEqual(self.strides(a3.qv_strides), (16 * 512, 16 * 512, 512))

    def test_kvcache_two_queries_and_more_heads(self):
        import flashjit
        latent, q, k_cache, v_cache, qv, table, lens = self.latent_call(batch=2, queries=2, heads=128)
        flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=qv, cache_seqlens=lens, page_table=table, causal=True,
                                         softmax_scale=0.125)
        spec, a, _ = self.launched()
        self.assertIn(",causal=1,", spec)
        self.assertTrue(spec.endswith(",qv=1,v_in_k=1"), spec)
        self.assertEqual((a.q, a.qv, a.total_q, a.seqlen_q, a.softmax_scale), (q.ptr, qv.ptr, 4, 2, 0.125))
        self.assertEqual(self.strides(a.q_strides)[1:], (128 * 576, 576))
        self.assertEqual(self.strides(a.qv_strides)[1:], (128 * 576, 576))

    def test_varlen_packed(self):
        """flash_attn_varlen_func, q 64 + qv 128 against k 64 + v 128 (packed, ragged): head dims 192/128."""
        import flashjit
        i32 = self.torch.int32
        q, qv = self.tensor(37, 16, 64), self.tensor(37, 16, 128)
        k, v = self.tensor(900, 4, 64), self.tensor(900, 4, 128)
        cu_q, cu_k = self.tensor(4, dtype=i32), self.tensor(4, dtype=i32)
        out = flashjit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 30, 500, causal=True, qv=qv)
        spec, a, fast = self.launched()
        self.assertEqual(spec, "dtype=bf16,head_dim=192,head_dim_v=128,causal=1,varlen=1,qv=1")
        self.assertEqual((a.q, a.qv, a.k, a.v, a.o, a.total_q, a.total_k, a.head_dim),
                         (q.ptr, qv.ptr, k.ptr, v.ptr, out.ptr, 37, 900, 192))
        self.assertEqual(self.strides(a.q_strides)[1:], (16 * 64, 64))
        self.assertEqual(self.strides(a.qv_strides)[1:], (16 * 128, 128))
        self.assertEqual(self.strides(a.k_strides)[1:], (4 * 64, 64))
        self.assertAlmostEqual(a.softmax_scale, 192 ** -0.5, places=7)
        self.assertEqual(out.shape, (37, 16, 128))
        qv2 = self.tensor(37, 16, 128)
        flashjit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 30, 500, causal=True, qv=qv2)
        _, a2, fast = self.launched()
        self.assertTrue(fast)
        self.assertEqual(a2.qv, qv2.ptr)

    def test_dense_func(self):
        import flashjit
        q, qv = self.tensor(2, 100, 8, 64), self.tensor(2, 100, 8, 512)
        k, v = self.tensor(2, 300, 1, 64), self.tensor(2, 300, 1, 512)
        flashjit.flash_attn_func(q, k, v, qv=qv)
        spec, a, _ = self.launched()
        self.assertEqual(spec, "dtype=bf16,head_dim=576,head_dim_v=512,causal=0,qv=1")
        self.assertEqual(self.strides(a.q_strides), (100 * 8 * 64, 8 * 64, 64))
        self.assertEqual(self.strides(a.qv_strides), (100 * 8 * 512, 8 * 512, 512))
        qv2 = self.tensor(2, 100, 8, 512)
        flashjit.flash_attn_func(q, k, v, qv=qv2)
        _, a2, fast = self.launched()
        self.assertEqual((fast, a2.qv), (True, qv2.ptr))

    def test_without_qv_the_fields_stay_off_and_the_plans_differ(self):
        """A call without qv of the same q, k and v is another key and another plan (q 576 wide: no qv=1)."""
        import flashjit
        latent, q, k_cache, v_cache, qv, table, lens = self.latent_call()
        flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=qv, cache_seqlens=lens, page_table=table)
        q576 = self.tensor(3, 1, 16, 576)
        flashjit.flash_attn_with_kvcache(q576, latent, latent[..., :512], cache_seqlens=lens, page_table=table)
        spec, a, fast = self.launched()
        self.assertFalse(fast)
        self.assertNotIn("qv", spec)
        self.assertEqual((a.qv, self.strides(a.qv_strides)), (0, (0, 0, 0)))
        self.assertEqual(len(self.dev.fetched), 2)

    def test_the_librarys_errors_name_qv(self):
        import flashjit
        latent, q, k_cache, v_cache, qv, table, lens = self.latent_call()
        bad = _StubTensor(qv.shape, qv.dtype, qv.strides, qv.ptr + 2)  # not 16-byte aligned
        with self.assertRaisesRegex(flashjit.FlashjitError, r"^flashjit: qv: pointer 0x[0-9a-f]+ is not 16-byte aligned"):
            flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=bad, cache_seqlens=lens, page_table=table)
        odd = _StubTensor(qv.shape, qv.dtype, (16 * 576 + 4, 16 * 576 + 4, 576, 1))  # rows 8 bytes off 16
        with self.assertRaisesRegex(flashjit.FlashjitError, rf"^flashjit: qv: {16 * 576 + 4} elements is not a multiple of 8"):
            flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=odd, cache_seqlens=lens, page_table=table)

    def test_widths_the_library_refuses_name_qv(self):
        """q's and qv's widths the library does not take for qv=1 (both multiples of 64, together at most 576, V's
        at most 256 or 384 / 512): NotImplementedError naming qv with the library's reason, before any kernel is
        fetched, in each function."""
        import flashjit
        i32 = self.torch.int32
        for dq, dv, reason in ((32, 512, "qv: value 1 is not allowed"), (64, 320, "head_dim_v: value 320"),
                               (128, 512, "head_dim: value 640"), (72, 128, "qv: value 1 is not allowed")):
            pattern = rf"^flashjit: qv: {dq} columns of q with {dv} of qv \(head dims {dq + dv}/{dv}\) are not supported .*{reason}"
            calls = {
                "flash_attn_func": lambda: flashjit.flash_attn_func(
                    self.tensor(2, 5, 8, dq), self.tensor(2, 9, 1, dq), self.tensor(2, 9, 1, dv), qv=self.tensor(2, 5, 8, dv)),
                "flash_attn_varlen_func": lambda: flashjit.flash_attn_varlen_func(
                    self.tensor(7, 8, dq), self.tensor(9, 1, dq), self.tensor(9, 1, dv), self.tensor(3, dtype=i32),
                    self.tensor(3, dtype=i32), 5, 5, qv=self.tensor(7, 8, dv)),
                "flash_attn_with_kvcache": lambda: flashjit.flash_attn_with_kvcache(
                    self.tensor(2, 1, 8, dq), self.tensor(10, 64, 1, dq), self.tensor(10, 64, 1, dv),
                    qv=self.tensor(2, 1, 8, dv), cache_seqlens=self.tensor(2, dtype=i32),
                    page_table=self.tensor(2, 5, dtype=i32)),
            }
            for name, call in calls.items():
                with self.assertRaisesRegex(NotImplementedError, pattern, msg=(name, dq, dv)):
                    call()
        self.assertEqual((self.dev.fetched, self.dev.lib.launches), ([], []))

    def test_the_torch_half_checks_qv(self):
        """What the interface cannot see: qv's device (and its torch type); the torch half names qv."""
        import flashjit
        latent, q, k_cache, v_cache, qv, table, lens = self.latent_call()
        elsewhere = _StubTensor(qv.shape, qv.dtype, device=_StubDevice("cuda", 1))
        with self.assertRaisesRegex(ValueError, r"flash_attn_with_kvcache: qv: is on cuda:1, q on cuda:0"):
            flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=elsewhere, cache_seqlens=lens, page_table=table)
        with self.assertRaisesRegex(TypeError, r"flash_attn_with_kvcache: qv: expected a torch.Tensor"):
            flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=FakeTensor(*qv.shape), cache_seqlens=lens,
                                             page_table=table)
        self.assertEqual(self.dev.lib.launches, [])

    def test_the_op_takes_qv(self):
        """torch.compile's op flashjit::fwd (fwd) takes qv and hands it to forward; run passes it to the op."""
        import inspect
        self.assertIn("qv", inspect.signature(self.tb.fwd.fn).parameters)
        self.assertIn("qv", inspect.signature(self.tb._fwd_fake).parameters)
        self.assertIn("qv", inspect.signature(self.tb.run).parameters)


def _capi_fields():
    from flashjit import _capi
    return _capi.ARGS_FIELDS


def field_of(args, name):
    value = args
    for part in name.split("."):
        value = getattr(value, part)
    return value


class Examples(unittest.TestCase):
    def test_both_examples_skip_alike_without_torch(self):
        """Each example in examples/python, where torch does not import, says it skipped and why, in the same
        words, and exits 0."""
        folder = os.path.join(REPO, "examples", "python")
        if not os.path.isdir(folder):
            self.skipTest("the source tree's examples/python")
        with tempfile.TemporaryDirectory() as fake:
            os.makedirs(os.path.join(fake, "torch"))
            with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
                f.write('raise ImportError("torch withheld from this test")\n')
            env = dict(os.environ, PYTHONPATH=fake)
            outputs = {}
            for name in sorted(os.listdir(folder)):
                if name.endswith(".py"):
                    run = subprocess.run([sys.executable, os.path.join(folder, name)], capture_output=True, text=True,
                                         env=env, timeout=60)
                    self.assertEqual(run.returncode, 0, f"{name}: {run.stdout}{run.stderr}")
                    outputs[name] = run.stdout.strip()
        self.assertEqual(len(outputs), 2, outputs)
        for name, text in outputs.items():
            self.assertEqual(text, "skipped: PyTorch is not installed (torch withheld from this test)", name)


class DeviceTensor:
    """What the example's packers read of a torch tensor: shape, dim(), stride(), dtype, data_ptr() (contiguous)."""

    def __init__(self, shape, dtype="torch.bfloat16", ptr=0x7f0000000000):
        self.shape, self.dtype, self.ptr = tuple(shape), dtype, ptr
        strides, step = [], 1
        for n in reversed(self.shape):
            strides.insert(0, step)
            step *= n
        self.strides = tuple(strides)

    def dim(self):
        return len(self.shape)

    def stride(self, i=None):
        return self.strides if i is None else self.strides[i]

    def data_ptr(self):
        return self.ptr


class CtypesExampleArgs(unittest.TestCase):
    """examples/python/attention_ctypes.py's packers (the benchmarks' bindings): the masks and score modifiers
    land in their fields, and the library accepts what they write for a spec with the keys, and names the field
    for a spec without."""

    def setUp(self):
        folder = os.path.join(REPO, "examples", "python")
        if not os.path.isdir(folder):
            self.skipTest("the source tree's examples/python")
        if folder not in sys.path:
            sys.path.insert(0, folder)
        import attention_ctypes
        self.m = attention_ctypes

    def dense(self, **features):
        b, sq, sk, hq, hkv, d = 2, 300, 1000, 8, 2, 64
        q, o = DeviceTensor((b, sq, hq, d), ptr=0x10000), DeviceTensor((b, sq, hq, d), ptr=0x20000)
        k, v = DeviceTensor((b, sk, hkv, d), ptr=0x30000), DeviceTensor((b, sk, hkv, d), ptr=0x40000)
        return self.m.dense_args(q, k, v, o, **features)

    def validate(self, spec, args):
        import flashjit
        lib = flashjit.library()
        status = lib.lib.flashjit_validate_attention_args(spec.encode(), ctypes.byref(args))
        return status, lib.lib.flashjit_last_error_field().decode()

    def test_features_off_by_default(self):
        args = self.dense()
        self.assertEqual((args.window_left, args.window_right, args.attention_chunk, args.softcap), (-1, -1, 0, 0.0))
        self.assertEqual((args.sinks, args.sinks_dtype, args.alibi_slopes, args.alibi_batch_stride), (0, 0, 0, 0))

    def test_every_feature_lands_in_its_field(self):
        from flashjit import _capi
        sinks = DeviceTensor((8,), "torch.bfloat16", 0x50000)
        slopes = DeviceTensor((2, 8), "torch.float32", 0x60000)
        args = self.dense(window=(127, 0), attention_chunk=512, softcap=50.0, sinks=sinks, alibi_slopes=slopes)
        self.assertEqual((args.window_left, args.window_right, args.attention_chunk, args.softcap), (127, 0, 512, 50.0))
        self.assertEqual((args.sinks, args.sinks_dtype), (0x50000, _capi.DTYPE_BF16))
        self.assertEqual((args.alibi_slopes, args.alibi_batch_stride), (0x60000, 8))
        args = self.dense(sinks=DeviceTensor((8,), "torch.float32"), alibi_slopes=DeviceTensor((8,), "torch.float32"))
        self.assertEqual((args.sinks_dtype, args.alibi_batch_stride), (_capi.DTYPE_FP32, 0))
        status, _ = self.validate("dtype=bf16,head_dim=64,causal=1,window=1,chunk=1,softcap=1,sinks=1,alibi=1",
                                  self.dense(window=(127, 0), attention_chunk=512, softcap=50.0, sinks=sinks,
                                             alibi_slopes=slopes))
        self.assertEqual(status, 0)

    def test_a_spec_without_the_key_names_the_field(self):
        status, field = self.validate("dtype=bf16,head_dim=64,causal=1", self.dense(window=(127, 0)))
        self.assertNotEqual(status, 0)
        self.assertEqual(field, "args.window_left")
        status, field = self.validate("dtype=bf16,head_dim=64,causal=1", self.dense(sinks=DeviceTensor((8,), "torch.float32")))
        self.assertNotEqual(status, 0)
        self.assertIn("sinks", field)

    def test_engine_args_take_the_features_too(self):
        q, o = DeviceTensor((2, 1, 8, 64)), DeviceTensor((2, 1, 8, 64), ptr=0x20000)
        k, v = DeviceTensor((2, 700, 2, 64), ptr=0x30000), DeviceTensor((2, 700, 2, 64), ptr=0x40000)
        args = self.m.engine_args(q, k, v, o, seqlen_q=1, seqlen_k=700, window=(127, 0),
                                  sinks=DeviceTensor((8,), "torch.float32", 0x50000))
        self.assertEqual((args.window_left, args.window_right, args.sinks), (127, 0, 0x50000))

    def test_wrong_dtypes_are_refused_naming_the_tensor(self):
        with self.assertRaisesRegex(ValueError, "^sinks: "):
            self.dense(sinks=DeviceTensor((8,), "torch.float16"))
        with self.assertRaisesRegex(ValueError, "^alibi_slopes: "):
            self.dense(alibi_slopes=DeviceTensor((8,), "torch.bfloat16"))

    # ---- FP8 (FP8 K/V CACHE and FP8 OPERANDS in flashjit.h) ----
    def fp8_dense(self, operands=True, **scales):
        """dense_args of e4m3 K and V (and Q with operands, O bf16): b 2, 300 queries against 1000 keys, 8/2 heads, d64."""
        b, sq, sk, hq, hkv, d = 2, 300, 1000, 8, 2, 64
        e4m3 = "torch.float8_e4m3fn"
        q = DeviceTensor((b, sq, hq, d), e4m3 if operands else "torch.bfloat16", ptr=0x10000)
        o = DeviceTensor((b, sq, hq, d), ptr=0x20000)
        k, v = DeviceTensor((b, sk, hkv, d), e4m3, ptr=0x30000), DeviceTensor((b, sk, hkv, d), e4m3, ptr=0x40000)
        return self.m.dense_args(q, k, v, o, **scales)

    def test_fp8_scales_off_by_default(self):
        args = self.dense()
        self.assertEqual([getattr(args, f"{n}{part}") for n in ("k_scale", "v_scale", "q_scale")
                          for part in ("", "_batch_stride", "_head_stride")], [0] * 9)

    def test_fp8_scales_land_with_the_strides_of_their_layout(self):
        f32 = "torch.float32"
        one, per_head = DeviceTensor((1,), f32, 0x50000), DeviceTensor((2,), f32, 0x60000)
        fa3 = DeviceTensor((2, 2), f32, 0x70000)
        expanded = DeviceTensor((2, 2), f32, 0x80000)
        expanded.strides = (0, 0)  # vLLM's per-tensor scale expanded to [batch, heads_kv]
        strided = DeviceTensor((2, 4), f32, 0x90000)
        strided.shape, strided.strides = (2, 2), (4, 2)  # FA3's [batch, heads_kv] as a strided view
        for t, want in ((one, (0, 0)), (per_head, (0, 1)), (fa3, (2, 1)), (expanded, (0, 0)), (strided, (4, 2))):
            args = self.fp8_dense(k_scale=t, v_scale=t, q_scale=t)
            for name in ("k_scale", "v_scale", "q_scale"):
                got = (getattr(args, name), getattr(args, name + "_batch_stride"), getattr(args, name + "_head_stride"))
                self.assertEqual(got, (t.ptr,) + want, (name, t.shape, t.strides))
        args = self.fp8_dense(k_scale=one, v_scale=per_head)
        self.assertEqual((args.k_scale, args.v_scale, args.q_scale, args.v_scale_head_stride), (one.ptr, per_head.ptr, 0, 1))

    def test_fp8_strides_are_the_codes_byte_strides(self):
        args = self.fp8_dense(k_scale=DeviceTensor((1,), "torch.float32"), v_scale=DeviceTensor((1,), "torch.float32"))
        self.assertEqual((args.k_strides.batch, args.k_strides.row, args.k_strides.head), (1000 * 2 * 64, 2 * 64, 64))
        self.assertEqual((args.q_strides.row, args.o_strides.row), (8 * 64, 8 * 64))

    def test_fp8_engine_args_take_the_scales(self):
        e4m3, f32 = "torch.float8_e4m3fn", "torch.float32"
        q, o = DeviceTensor((2, 1, 32, 128)), DeviceTensor((2, 1, 32, 128), ptr=0x20000)
        k, v = DeviceTensor((2, 700, 8, 128), e4m3, ptr=0x30000), DeviceTensor((2, 700, 8, 128), e4m3, ptr=0x40000)
        ks, vs = DeviceTensor((8,), f32, 0x50000), DeviceTensor((1,), f32, 0x60000)
        args = self.m.engine_args(q, k, v, o, seqlen_q=1, seqlen_k=700, k_scale=ks, v_scale=vs)
        self.assertEqual((args.k_scale, args.k_scale_batch_stride, args.k_scale_head_stride), (0x50000, 0, 1))
        self.assertEqual((args.v_scale, args.v_scale_batch_stride, args.v_scale_head_stride), (0x60000, 0, 0))
        self.assertEqual((args.k_strides.batch, args.k_strides.row, args.k_strides.head), (700 * 8 * 128, 8 * 128, 128))

    def test_fp8_scales_of_a_wrong_dtype_or_shape_are_refused_naming_the_field(self):
        f32 = "torch.float32"
        with self.assertRaisesRegex(ValueError, "^k_scale: float32"):
            self.fp8_dense(k_scale=DeviceTensor((1,), "torch.float16"))
        with self.assertRaisesRegex(ValueError, r"^v_scale: .*got float32 \(3,\)"):
            self.fp8_dense(k_scale=DeviceTensor((1,), f32), v_scale=DeviceTensor((3,), f32))
        with self.assertRaisesRegex(ValueError, "^q_scale: "):
            self.fp8_dense(q_scale=DeviceTensor((5, 2), f32))

    def test_the_library_takes_the_fp8_packing_and_names_a_missing_or_stray_scale(self):
        f32 = "torch.float32"
        one, fa3 = DeviceTensor((1,), f32, 0x50000), DeviceTensor((2, 2), f32, 0x60000)
        operands = self.fp8_dense(k_scale=fa3, v_scale=one, q_scale=fa3)
        self.assertEqual(self.validate("dtype=e4m3,head_dim=64,causal=1", operands), (0, ""))
        cache = self.fp8_dense(operands=False, k_scale=one, v_scale=fa3)
        self.assertEqual(self.validate("dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3", cache), (0, ""))
        status, field = self.validate("dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3", self.fp8_dense(operands=False, v_scale=one))
        self.assertNotEqual(status, 0)
        self.assertIn("k_scale", field)
        status, field = self.validate("dtype=bf16,head_dim=64,causal=1,kv_dtype=e4m3",
                                      self.fp8_dense(operands=False, k_scale=one, v_scale=one, q_scale=one))
        self.assertNotEqual(status, 0)
        self.assertIn("q_scale", field)
        status, field = self.validate("dtype=bf16,head_dim=64,causal=1", self.fp8_dense(operands=False, k_scale=one, v_scale=one))
        self.assertNotEqual(status, 0)
        self.assertIn("k_scale", field)


class Tool(unittest.TestCase):
    def test_command_runs_the_bundled_tool(self):
        if not OPTIONS.installed:
            self.skipTest("the wheel's `flashjit` command (--installed)")
        exe = os.path.join(os.path.dirname(sys.executable), "flashjit")
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("flashjit", out.stdout + out.stderr)
        with tempfile.TemporaryDirectory() as cache:
            out = subprocess.run([exe, "prewarm", "--cache-dir", cache, "--spec", "dtype=bf16,head_dim=64,causal=0"],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="libflashjit.so for the source tree's package (default: $FLASHJIT_LIBRARY, "
                                      "else ../../build/libflashjit.so)")
    parser.add_argument("--installed", action="store_true", help="test the installed package (not python/)")
    parser.add_argument("--expect-nvrtc", help="the NVRTC file the package must have loaded")
    args, rest = parser.parse_known_args()
    OPTIONS.__dict__.update(vars(args))
    if args.installed:
        sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.abspath(os.path.join(HERE, ".."))]
    else:
        sys.path.insert(0, os.path.join(HERE, ".."))
        lib = args.lib or os.environ.get("FLASHJIT_LIBRARY") or os.path.join(HERE, "..", "..", "build", "libflashjit.so")
        os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(lib)
    import flashjit
    print(f"flashjit package {flashjit.__file__}")
    result = unittest.main(argv=[sys.argv[0], "-v"] + rest, exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
