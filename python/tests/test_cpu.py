#!/usr/bin/env python3
"""CPU tests of the flashjit package (no GPU; torch optional): the struct layouts, the NVRTC and library
search, supported(), prewarm() into a temporary cache (one real NVRTC compile), the launch plans, and the
errors of the attention functions (unsupported arguments; without torch, that torch is needed).

  python3 python/tests/test_cpu.py [--lib build/libflashjit.so]      # the source tree's package
  python3 python/tests/test_cpu.py --installed [--expect-nvrtc PATH]  # the installed wheel's (wheel_check.sh)

Exits 0 when every test passed (tests needing torch skip with the reason)."""
import argparse
import ctypes
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = argparse.Namespace(lib=None, installed=False, expect_nvrtc=None)


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

    def test_field_order_is_the_headers(self):
        from flashjit import _capi
        self.assertEqual(len(_capi.ARGS_FIELDS), 42)
        self.assertEqual(_capi.ARGS_FIELDS[:7], ("struct_size", "flags", "q", "k", "v", "o", "lse"))
        self.assertEqual(_capi.ARGS_FIELDS[-4:], ("workspace", "workspace_bytes", "max_splits", "split_keys"))
        args = _capi.new_args()
        self.assertEqual((args.struct_size, args.window_left, args.window_right), (304, -1, -1))


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
        self.assertTrue(lib.nvrtc_loaded and "libnvrtc.so" in lib.nvrtc_loaded, lib.nvrtc_loaded)
        if OPTIONS.installed:
            self.assertEqual(os.path.dirname(os.path.dirname(lib.path)), os.path.dirname(flashjit.__file__))
            self.assertEqual(flashjit.__version__, lib.version())
        if OPTIONS.expect_nvrtc:
            self.assertEqual(lib.nvrtc_loaded, OPTIONS.expect_nvrtc)

    def test_supported_answers_none_or_the_reason(self):
        import flashjit
        self.assertIsNone(flashjit.supported("dtype=bf16,head_dim=128,causal=1"))
        self.assertIsNone(flashjit.supported("dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"))
        self.assertRegex(flashjit.supported("dtype=bf16,head_dim=65"), r"^head_dim: .*multiple of 8")
        self.assertRegex(flashjit.supported("dtype=bf16,split_kv=1"), r"^split_kv: ")

    def test_prewarm_compiles_into_the_cache_dir(self):
        import flashjit
        with tempfile.TemporaryDirectory() as cache:
            flashjit.prewarm(["dtype=fp16,head_dim=64,causal=0"], cache_dir=cache)
            entries = [n for n in os.listdir(cache) if n.endswith(".entry")]
            self.assertGreaterEqual(len(entries), 1, os.listdir(cache))
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
                        for batch, sq, sk, hq, hkv in ((1, 1, 4096, 32, 8), (64, 1, 4096, 32, 8), (2, 1000, 1000, 8, 8)):
                            spec, _ = _plan.plan(132, "bf16", 128, 1, varlen, paged, batch, sq, sk, hq, hkv, num_splits,
                                                 pack)
                            self.assertIsNone(flashjit.supported(spec), spec)
                            if "split_kv" in spec:  # and the inline combine's spec of the same launch
                                self.assertIsNone(flashjit.supported(spec + ",combine=inline"), spec)


class Plans(unittest.TestCase):
    def plan(self, **kw):
        from flashjit import _plan
        a = dict(sm_count=132, dtype_name="bf16", head_dim=128, causal=True, varlen=True, paged=True, batch=4,
                 seqlen_q=1, seqlen_k=4096, heads_q=32, heads_kv=8, num_splits=0, pack_gqa=-1)
        a.update(kw)
        return _plan.plan(**a)

    def test_small_decode_splits_and_packs(self):
        spec, splits = self.plan()
        self.assertEqual(spec, "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1")
        self.assertEqual(splits, 9)  # 4 x 8 tiles: ceil(2 x 132 / 32)

    def test_big_batches_short_caches_and_num_splits_1_do_not_split(self):
        for kw in ({"batch": 256}, {"seqlen_k": 256}, {"num_splits": 1}):
            spec, splits = self.plan(**kw)
            self.assertNotIn("split_kv", spec, kw)
            self.assertEqual(splits, 0, kw)
        self.assertIn("pack_gqa=1", self.plan(batch=256)[0])  # decode packs heads without splitting

    def test_num_splits_caps_and_pack_gqa_false(self):
        self.assertEqual(self.plan(num_splits=200, batch=512)[1], 128)
        self.assertNotIn("pack_gqa", self.plan(pack_gqa=0)[0])
        self.assertNotIn("pack_gqa", self.plan(heads_q=8, heads_kv=8)[0])
        self.assertNotIn("pack_gqa", self.plan(seqlen_q=500, seqlen_k=500)[0])

    def test_dense_never_splits_or_packs(self):
        self.assertEqual(self.plan(varlen=False, paged=False, num_splits=8),
                         ("dtype=bf16,head_dim=128,causal=1", 0))

    def test_inline_combine_marks_split_specs_only(self):
        from flashjit import _plan
        saved = _plan.COMBINE
        try:
            _plan.COMBINE = "inline"
            spec, splits = self.plan()
            self.assertEqual(spec, "dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1,combine=inline")
            self.assertTrue(_plan.workspace_has_counters(spec))
            self.assertNotIn("combine", self.plan(num_splits=1)[0])  # no split, nothing to merge
        finally:
            _plan.COMBINE = saved
        self.assertFalse(_plan.workspace_has_counters(self.plan()[0]))


class EntryPoints(unittest.TestCase):
    def test_unsupported_arguments_are_named(self):
        import flashjit
        cases = [
            (flashjit.flash_attn_func, {"window_size": (128, 0)}, r"window_size=\(128, 0\) is not supported yet"),
            (flashjit.flash_attn_func, {"softcap": 30.0}, "softcap=30.0"),
            (flashjit.flash_attn_func, {"q_descale": object()}, "q_descale="),
            (flashjit.flash_attn_func, {"sm_margin": 4}, "sm_margin=4"),
            (flashjit.flash_attn_varlen_func, {"alibi_slopes": object()}, "alibi_slopes="),
            (flashjit.flash_attn_varlen_func, {"dropout_p": 0.1}, "dropout_p=0.1"),
            (flashjit.flash_attn_varlen_func, {"s_aux": object()}, "s_aux="),
            (flashjit.flash_attn_varlen_func, {"seqused_q": object()}, "seqused_q="),
            (flashjit.flash_attn_varlen_func, {"fa_version": 2}, "fa_version=2"),
            (flashjit.flash_attn_with_kvcache, {"k": object()}, "k=.*appending new keys"),
            (flashjit.flash_attn_with_kvcache, {"rotary_cos": object()}, "rotary_cos="),
            (flashjit.flash_attn_with_kvcache, {"cache_batch_idx": object()}, "cache_batch_idx="),
            (flashjit.flash_attn_with_kvcache, {"window_size": [-1, 0]}, r"window_size=\[-1, 0\]"),
        ]
        for fn, kw, pattern in cases:
            positional = (None,) * (7 if fn is flashjit.flash_attn_varlen_func else 3)
            with self.assertRaisesRegex(NotImplementedError, pattern, msg=f"{fn.__name__} {kw}"):
                fn(*positional, **kw)

    def test_fa3_positions(self):
        import inspect
        import flashjit
        names = list(inspect.signature(flashjit.flash_attn_varlen_func).parameters)
        self.assertEqual(names[:11], ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
                                      "seqused_q", "seqused_k", "softmax_scale", "causal"])
        names = list(inspect.signature(flashjit.flash_attn_with_kvcache).parameters)
        self.assertEqual(names[:12], ["q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin",
                                      "cache_seqlens", "cache_batch_idx", "cache_leftpad", "page_table"])

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
