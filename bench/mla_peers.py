#!/usr/bin/env python3
"""V narrower than Q (issue 40): DeepSeek's MLA prefill in MHA form, Q/K head dim 192 (128 + 64 rotary) and
V/O head dim 128, flashjit's varlen kernel ("dtype=bf16,head_dim=192,head_dim_v=128,varlen=1") against
cuDNN's bf16 SDPA through PyTorch (torch.nn.functional.scaled_dot_product_attention restricted to
SDPBackend.CUDNN_ATTENTION, on [b, h, s, d] views of the same tensors, d_qk 192 and d_v 128), in one process
on the same inputs.

  python3 bench/mla_peers.py --lib build/libflashjit.so --out mla.json [--cells 8k,16k] [--reps 7]
                             [--per-graph 5] [--heads 16] [--smoke] [--dry-run]

Cells: 2 sequences of 8192 tokens and 1 of 16384 (queries = keys), 16 heads (one GPU's share of DeepSeek
V3's 128 under 8-way tensor parallelism), causal and not. flashjit runs packed (cu_seqlens of the equal
lengths, the varlen path a serving engine calls); cuDNN the dense batch of the same lengths.

Every kernel is first checked on the same inputs: outputs poisoned (NaN), one call, O on sampled query rows
of each sequence against float64 (attention_ctypes.reference_rows: O's columns are V's 128). A flashjit
check that misses the bound (bf16 O rel-L2 6e-3) makes the exit status 1; a peer's is printed beside its
timing, and a peer that refuses the shape (a cuDNN build without d_qk != d_v, or head dims above 128) is
reported with its reason while flashjit goes on.

Timings: graph = replay of a CUDA graph of --per-graph calls (kernel time), medians of --reps. TFLOP/s count
useful FLOPs: 2 x (192 + 128) x heads x visible (query, key) pairs (Q K^T and P V). Prints one line a cell,
a table, then `target CELL RATIO` lines (flashjit / cuDNN graph TFLOP/s; the target is >= 1.0x) and the
non-causal TFLOP/s against issue 40's 750.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))
from attention_ctypes import O_BOUND, ErrorSum, Flashjit, engine_args, float32, reference_rows  # noqa: E402
from peer_common import time_graph  # noqa: E402

torch = None  # imported in main: --help and --dry-run work without it

D, DV = 192, 128
CELLS = {"8k": (2, 8192), "16k": (1, 16384)}
SMOKE_CELLS = {"8k": (2, 512), "16k": (1, 1024)}
TFLOPS_TARGET = 750.0


def spec_of(causal):
    return f"dtype=bf16,head_dim={D},head_dim_v={DV},causal={int(causal)},varlen=1"


def visible_pairs(s, causal):
    return s * (s + 1) // 2 if causal else s * s


def useful_flops(batch, s, heads, causal):
    return 2.0 * (D + DV) * heads * batch * visible_pairs(s, causal)


def check_rows(o, q, k, v, batch, s, causal, scale, rows):
    """O [batch * s, h, DV] against float64 on `rows` rows of each sequence."""
    errs = ErrorSum()
    picks = sorted({0, s // 2, s - 1} | set(range(0, s, max(1, s // max(1, rows - 3)))))
    for b in range(batch):
        lo = b * s
        ref_o, _ = reference_rows(q[lo:lo + s], k[lo:lo + s], v[lo:lo + s], picks, causal=causal, scale=scale)
        errs.add(o[lo:lo + s][picks], None, ref_o, None)
    return errs


def run_cell(fj, name, batch, s, heads, causal, args):
    total = batch * s
    scale = float32(1.0 / math.sqrt(D))
    q = torch.randn(total, heads, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, heads, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(total, heads, DV, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(total, heads, DV, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, total + 1, s, device="cuda", dtype=torch.int32)
    flops = useful_flops(batch, s, heads, causal)
    row = dict(cell=name, batch=batch, seqlen=s, heads=heads, causal=causal, head_dim=D, head_dim_v=DV, flops=flops)
    spec = spec_of(causal)
    fargs = engine_args(q, k, v, o, seqlen_q=s, seqlen_k=s, cu_seqlens_q=cu, cu_seqlens_k=cu, scale=scale)
    o.fill_(float("nan"))
    fj.launch(spec, fargs)
    torch.cuda.synchronize()
    errs = check_rows(o, q, k, v, batch, s, causal, scale, args.rows)
    row["flashjit_o_err"] = errs.o
    row["flashjit_passed"] = errs.passed(O_BOUND["bf16"])
    ms = time_graph(fj.launcher(spec, fargs, keep=(q, k, v, o, cu)), args.reps, args.per_graph)
    row["flashjit_ms"], row["flashjit_tflops"] = ms, flops / (ms * 1e9)
    # cuDNN: [b, h, s, d] views of the same packed tensors.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q4, k4, v4 = (t.view(batch, s, heads, t.shape[-1]).transpose(1, 2) for t in (q, k, v))

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal, scale=scale)
    try:
        out = cudnn().transpose(1, 2).reshape(total, heads, DV)
        torch.cuda.synchronize()
        row["cudnn_o_err"] = check_rows(out, q, k, v, batch, s, causal, scale, args.rows).o
        ms = time_graph(cudnn, args.reps, args.per_graph)
        row["cudnn_ms"], row["cudnn_tflops"] = ms, flops / (ms * 1e9)
        row["ratio"] = row["flashjit_tflops"] / row["cudnn_tflops"]
    except Exception as e:  # noqa: BLE001: a peer that refuses the shape is reported, flashjit goes on
        row["cudnn_error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:200]
    print(f"{name:20s} flashjit {row['flashjit_tflops']:7.1f} TF/s (O err {row['flashjit_o_err']:.2e}"
          f"{'' if row['flashjit_passed'] else ' FAIL'})  cuDNN "
          + (f"{row['cudnn_tflops']:7.1f} TF/s (O err {row['cudnn_o_err']:.2e})  {row['ratio']:.2f}x"
             if "cudnn_tflops" in row else f"- ({row['cudnn_error']})"), flush=True)
    return row


def main():
    global torch
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libflashjit.so"))
    ap.add_argument("--out", default=None, help="JSON of every cell")
    ap.add_argument("--cells", default="8k,16k", help="comma list of " + ", ".join(CELLS))
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--per-graph", type=int, default=5)
    ap.add_argument("--rows", type=int, default=16, help="query rows a sequence checked against float64")
    ap.add_argument("--smoke", action="store_true", help="every cell at a tiny size")
    ap.add_argument("--dry-run", action="store_true", help="list the cells and exit")
    args = ap.parse_args()
    table = SMOKE_CELLS if args.smoke else CELLS
    names = [c for c in args.cells.split(",") if c]
    unknown = [c for c in names if c not in table]
    if unknown:
        ap.error(f"--cells: unknown {', '.join(unknown)}; allowed: {', '.join(table)}")
    cells = [(f"mla_prefill{n}{'_causal' if causal else ''}", *table[n], causal) for n in names for causal in (False, True)]
    if args.dry_run:
        for name, batch, s, causal in cells:
            print(f"{name} batch={batch} seqlen={s} heads={args.heads} {spec_of(causal)}")
        print(f"{len(cells)} cells")
        return 0
    import torch as torch_module
    torch = torch_module
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    fj = Flashjit(args.lib, torch.cuda.current_device())
    torch.manual_seed(40)
    rows = [run_cell(fj, name, batch, s, args.heads, causal, args) for name, batch, s, causal in cells]
    print("\nmla_prefill (TF/s, graph)  flashjit   cuDNN   ratio")
    for r in rows:
        print(f"{r['cell']:26s} {r['flashjit_tflops']:8.1f} {r.get('cudnn_tflops', float('nan')):7.1f} "
              f"{r.get('ratio', float('nan')):6.2f}x")
    for r in rows:
        if "ratio" in r:
            print(f"target {r['cell']} {r['ratio']:.3f}")
    for r in rows:
        if not r["causal"]:
            print(f"{r['cell']}: {r['flashjit_tflops']:.1f} TF/s non-causal (target >= {TFLOPS_TARGET:.0f}): "
                  f"{'met' if r['flashjit_tflops'] >= TFLOPS_TARGET else 'miss'}")
    failed = [r["cell"] for r in rows if not r["flashjit_passed"]]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           cudnn=torch.backends.cudnn.version(), rows=rows), f, indent=1)
        print(f"wrote {args.out}")
    if failed:
        print("flashjit failures")
        print(" ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
