#!/usr/bin/env python3
"""CPU tests of the package's cache functions (no GPU, no torch): prewarm()'s report and its failure when
nothing can be stored, and cache bundles (cache_export, cache_import). A few real NVRTC compiles of one
small kernel.

  python3 python/tests/test_cache_cpu.py [--lib build/libflashjit.so]

Exits 0 when every test passed."""
import argparse
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL = "dtype=fp16,head_dim=64,causal=0"
TWO_KERNELS = "dtype=fp16,head_dim=64,causal=1"  # it has a long-sequence kernel


def entries(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".entry"))


class Prewarm(unittest.TestCase):
    def test_returns_what_it_did_per_spec(self):
        import flashjit
        with tempfile.TemporaryDirectory() as cache:
            first = flashjit.prewarm([SMALL, TWO_KERNELS], cache_dir=cache)
            self.assertEqual([r["spec"] for r in first], [SMALL, TWO_KERNELS])
            self.assertEqual([r["status"] for r in first], ["compiled", "compiled"])
            self.assertEqual([(r["kernels"], r["compiled"], r["hits"], r["stored"]) for r in first], [(1, 1, 0, 1), (2, 2, 0, 2)])
            self.assertEqual(len(entries(cache)), 3)
            again = flashjit.prewarm(SMALL, cache_dir=cache)
            self.assertEqual(again, [{"spec": SMALL, "status": "hit", "kernels": 1, "compiled": 0, "hits": 1, "stored": 1,
                                      "error": ""}])

    def test_raises_naming_every_spec_when_nothing_can_be_stored(self):
        import flashjit
        with tempfile.TemporaryDirectory() as work:
            not_a_directory = os.path.join(work, "a-file")
            with open(not_a_directory, "w") as f:
                f.write("not a directory")
            with self.assertRaises(flashjit.FlashjitError) as caught:
                flashjit.prewarm([SMALL, TWO_KERNELS], cache_dir=os.path.join(not_a_directory, "cache"))
            message = str(caught.exception)
            self.assertIn("2 of 2 specs failed", message)
            self.assertIn(f"specs[0] '{SMALL}'", message)
            self.assertIn(f"specs[1] '{TWO_KERNELS}'", message)
            self.assertIn("not stored", message)
            self.assertEqual(caught.exception.status, "FLASHJIT_ERROR_CACHE_IO")
            self.assertEqual([r["status"] for r in caught.exception.results], ["failed", "failed"])
            self.assertEqual([r["stored"] for r in caught.exception.results], [0, 0])
            self.assertIn("not stored", caught.exception.results[1]["error"])

    def test_a_bad_spec_is_named(self):
        import flashjit
        with tempfile.TemporaryDirectory() as cache:
            with self.assertRaisesRegex(flashjit.FlashjitError, r"specs\[1\]\.head_dim"):
                flashjit.prewarm([SMALL, "dtype=fp16,head_dim=65"], cache_dir=cache)
            self.assertEqual(entries(cache), [])


class Bundles(unittest.TestCase):
    def test_export_then_import_into_another_directory(self):
        import flashjit
        with tempfile.TemporaryDirectory() as work:
            source, target = os.path.join(work, "source"), os.path.join(work, "target")
            bundle = os.path.join(work, "model.fjb")
            self.assertEqual(flashjit.cache_export(bundle, [TWO_KERNELS], cache_dir=source), bundle)
            self.assertTrue(os.path.isfile(bundle))
            self.assertEqual(flashjit.cache_import(bundle, cache_dir=target), 2)
            self.assertEqual(entries(target), entries(source))
            self.assertEqual([r["status"] for r in flashjit.prewarm(TWO_KERNELS, cache_dir=target)], ["hit"])

    def test_a_damaged_bundle_imports_nothing(self):
        import flashjit
        with tempfile.TemporaryDirectory() as work:
            bundle = os.path.join(work, "model.fjb")
            flashjit.cache_export(bundle, SMALL, cache_dir=os.path.join(work, "source"))
            with open(bundle, "r+b") as f:
                f.seek(os.path.getsize(bundle) // 2)
                byte = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([byte[0] ^ 0x20]))
            target = os.path.join(work, "target")
            with self.assertRaisesRegex(flashjit.FlashjitError, "nothing imported"):
                flashjit.cache_import(bundle, cache_dir=target)
            self.assertFalse(os.path.isdir(target) and entries(target))

    def test_bad_arguments_are_named(self):
        import flashjit
        with tempfile.TemporaryDirectory() as work:
            with self.assertRaises(TypeError):
                flashjit.cache_export(os.path.join(work, "b.fjb"), None, cache_dir=work)
            with self.assertRaisesRegex(flashjit.FlashjitError, "specs"):
                flashjit.cache_export(os.path.join(work, "b.fjb"), [], cache_dir=work)
            with self.assertRaisesRegex(flashjit.FlashjitError, "no-such-bundle"):
                flashjit.cache_import(os.path.join(work, "no-such-bundle"), cache_dir=work)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="libflashjit.so (default: $FLASHJIT_LIBRARY, else ../../build/libflashjit.so)")
    args, rest = parser.parse_known_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    lib = args.lib or os.environ.get("FLASHJIT_LIBRARY") or os.path.join(HERE, "..", "..", "build", "libflashjit.so")
    os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(lib)
    result = unittest.main(argv=[sys.argv[0], "-v"] + rest, exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
