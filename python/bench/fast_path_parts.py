#!/usr/bin/env python3
"""Where the package's host time per call goes on the fast path (issue 25): each piece of a remembered
flash_attn_varlen_func call (vLLM's mixed batch against a paged cache, as in call_overhead.py) timed alone in a
loop, ns per piece, on an H200 host. The pieces that launch run behind a GPU spin, as call_overhead.py does.

  python3 python/bench/fast_path_parts.py --lib build/libflashjit.so [--loops 2000]"""
import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_key(t):
    """One tensor's part of a key as the package built it before 789d3e1 (a call and a nested tuple)."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


def per_call_ns(fn, loops):
    fn()
    best = None
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        ns = (time.perf_counter_ns() - start) / loops
        best = ns if best is None else min(best, ns)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--loops", type=int, default=2000)
    opts = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(opts.lib)
    import torch
    import flashjit
    from flashjit import _torch_backend as tb
    sys.path.insert(0, HERE)
    from call_overhead import GpuHold, paged_cache

    rng = random.Random(3)
    keys = [300 + 1000 * i for i in range(8)]
    kc, vc, table, used = paged_cache(torch, rng, keys, 16, 8, 128)
    lens = [1] * 6 + [300, 200]
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens), 32, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    max_k = table.shape[1] * 16

    def call():
        flashjit.flash_attn_varlen_func(q, kc, vc, cu, None, 300, max_k, seqused_k=used, causal=True, block_table=table,
                                        out=out)
    call()
    torch.cuda.synchronize()
    launch = next(iter(tb._fast.values()))
    key = next(iter(tb._fast.keys()))
    hold = GpuHold(torch)
    loops = opts.loops

    def behind_spin(fn):
        torch.cuda.synchronize()
        hold.hold(50.0)
        ns = per_call_ns(fn, 80)  # 401 launches: well inside the launch queue, all behind the spin
        torch.cuda.synchronize()
        return ns

    parts = [
        ("whole call (fast path)", behind_spin(call)),
        ("_FastLaunch call (pack + stream + C API)", behind_spin(lambda: launch(q.data_ptr(), kc.data_ptr(), vc.data_ptr(), out.data_ptr(), cu.data_ptr(), 0, used.data_ptr(), table.data_ptr()))),
        ("fast_path_open()", per_call_ns(tb.fast_path_open, loops)),
        ("torch.compiler.is_compiling()", per_call_ns(torch.compiler.is_compiling, loops)),
        ("stream capturing check", per_call_ns(tb._capturing, loops)),
        ("tensor_key(q)", per_call_ns(lambda: tensor_key(q), loops)),
        ("q.shape", per_call_ns(lambda: q.shape, loops)),
        ("q.stride()", per_call_ns(lambda: q.stride(), loops)),
        ("q.dtype", per_call_ns(lambda: q.dtype, loops)),
        ("q.get_device()", per_call_ns(lambda: q.get_device(), loops)),
        ("q.data_ptr()", per_call_ns(lambda: q.data_ptr(), loops)),
        ("_wants_grad(q, k, v)", per_call_ns(lambda: tb._wants_grad(q, kc, vc), loops)),
        ("the varlen key (as flash_attn_varlen_func builds it)", per_call_ns(lambda: (1, q.shape, q.stride(), q.dtype, q.get_device(), kc.shape, kc.stride(), kc.dtype, kc.get_device(), vc.shape, vc.stride(), vc.dtype, vc.get_device(), (cu.shape, cu.stride(), cu.dtype, cu.get_device()), None, 300, max_k, (used.shape, used.stride(), used.dtype, used.get_device()), None, True, 0, None, (table.shape, table.stride(), table.dtype, table.get_device()), (out.shape, out.stride(), out.dtype, out.get_device()), False), loops)),
        ("the varlen key, each tensor through tensor_key", per_call_ns(lambda: (1, tensor_key(q), tensor_key(kc), tensor_key(vc), tensor_key(cu), tensor_key(None), 300, max_k, tensor_key(used), None, True, 0, None, tensor_key(table), tensor_key(out), False), loops)),
        ("remembered(key) (no workspace: no capture check)", per_call_ns(lambda: tb.remembered(key), loops)),
        ("_fast.get(key)", per_call_ns(lambda: tb._fast.get(key), loops)),
        ("raw stream", per_call_ns(lambda: tb._raw_stream(0), loops)),
    ]
    print(f"flashjit {flashjit.__version__}, torch {torch.__version__}; ns per piece, best of 5 loops of {loops}")
    for name, ns in parts:
        print(f"  {name:<48} {ns:9.0f}")


if __name__ == "__main__":
    main()
