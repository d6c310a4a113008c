#!/usr/bin/env python3
"""Issue 40 (V narrower than Q, large head dims, DeepSeek's MLA) in one process, three parts:

  python3 bench/mla_peers.py --lib build/libflashjit.so --out mla.json [--parts prefill,large,decode]
                             [--cells 8k,16k] [--reps 7] [--per-graph 5] [--decode-per-graph 20] [--heads 16]
                             [--max-splits 64] [--decode-forms parts,vink] [--decode-keys 4096]
                             [--decode-splits 0] [--pdl] [--only REGEX] [--bw-gb 4] [--rows 16]
                             [--smoke] [--dry-run]

--parts picks the parts (comma list; default all three), --cells the prefill part's cells, --only the cells (of
those) whose names a regular expression finds. --dry-run lists every
cell of the chosen parts (sizes, spec, bytes, FLOPs) and exits without torch; --smoke runs every cell at a tiny
size (names unchanged; its bandwidth figures mean little: most of the data fits in L2). Every kernel of the
chosen cells is compiled in parallel first (flashjit_prewarm; the decode part's specs as the package plans them).

prefill: DeepSeek's MLA prefill in MHA form, Q/K head dim 192 (128 + 64 rotary) and V/O head dim 128,
flashjit's varlen kernel ("dtype=bf16,head_dim=192,head_dim_v=128,causal=0|1,varlen=1") against cuDNN's bf16
SDPA through PyTorch (torch.nn.functional.scaled_dot_product_attention restricted to SDPBackend.CUDNN_ATTENTION,
on [b, h, s, d] views of the same tensors, d_qk 192 and d_v 128). Cells mla_prefill8k (2 sequences of 8192
tokens) and mla_prefill16k (1 of 16384), queries = keys, --heads (16: one GPU's share of DeepSeek V3's 128 under
8-way tensor parallelism) query and K/V heads, each also _causal. flashjit runs packed (cu_seqlens of the equal
lengths, the varlen path a serving engine calls); cuDNN the dense batch of the same lengths. A peer that refuses
the shape (a cuDNN build without d_qk != d_v) is reported with its reason while flashjit goes on.

large: flashjit's head dim 512 against its own 256 (targets: d512 prefill >= 0.9x d256's TFLOP/s; d512 decode
>= 85 % of the read bandwidth).
  large_prefill8k_d256, large_prefill8k_d512 (and _causal): varlen prefill, "dtype=bf16,head_dim=D[,causal=1],
    varlen=1", 2 sequences of 8192 (queries = keys), 16 query heads over 8 K/V heads (GQA);
    large_prefill8k_d512_paired (and _causal) the same with spec key paired=1 (two warpgroups sharing each
    tile's scores, where the default computes O in two parts), large_prefill8k_d512_paired_q288 (and _causal) with
    q_reg_dims=288 as well (Q's first 288 head dims in the scores warpgroup's registers),
    large_prefill8k_d512_dimsplit (and _causal) with spec key dim_split=1 (a cluster's two CTAs sharing out the head
    dims, the scores' halves added).
  large_decode_d512: split-KV decode, "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1",
    8 sequences x 1 query x 32768 keys, 16 query heads over 4 K/V heads, K and V each a pool [pages, 64, 4, 512]
    under one shuffled block table; the workspace sized once (flashjit_attention_workspace_size at --max-splits),
    launched with FLASHJIT_ATTENTION_FLAG_PDL (as bench/decode_peers.py does).
decode: DeepSeek's absorbed MLA decode through the package's FlashMLA drop-in (python/flashjit/flash_mla.py:
  get_mla_metadata once, flash_mla_with_kvcache(..., causal=True) timed; the package loads --lib through
  FLASHJIT_LIBRARY). A latent cache pool [pages, 64, 1, 576] bf16 (K = its 576 columns, V = its first 512: the
  same memory), q [batch, s_q, heads, 576], a shuffled block table, every cache_seqlens equal; batch 64 x 4096
  keys. Cells mla_decode_hH_qS: h16_q1, h16_q2, h32_q1 (memory-bound: heads x queries < 64; target >= 90 % of
  the read bandwidth) and h64_q2, h128_q1, h128_q2 (compute-bound: heads x queries >= 128; target >= 600
  TFLOP/s). The spec is the package's (mla_plan: "dtype=bf16,head_dim=576,head_dim_v=512[,causal=1],varlen=1,
  paged=1,pack_gqa=1[,split_kv=1]", causal where s_q > 1, split_kv where its plan splits). Each cell twice: O in
  two parts (flash_mla.V_IN_K = False), then mla_decode_hH_qS_vink, the package's kernels (spec key v_in_k=1: two
  warpgroups share each tile's scores, the latent block loaded once for both halves of O; the hand-over schedule,
  flash_mla.SEESAW = False); --decode-forms vink keeps the second alone (an A/B of the kernel, bench/ab_mla.sh),
  seesaw adds mla_decode_hH_qS_seesaw (the same kernels' seesaw schedule, spec key seesaw=1: flash_mla.SEESAW =
  True), auto adds mla_decode_hH_qS_auto (flash_mla.SEESAW = None, the schedule by shape: the seesaw on unsplit
  launches of 65-128 rows a sequence, else the hand-over), fp8 adds mla_decode_hH_qS_fp8: an FP8 latent cache
  (flashjit's extension: k_cache of e4m3 codes, kv_descale 0.5; the O-in-parts kernels; bytes and % BW in FP8
  bytes, no target); --decode-keys sets the keys a sequence, --decode-splits passes flash_mla_with_kvcache an int
  num_splits (1 never splits). --pdl launches the decode cells with programmatic dependent launch (flash_mla.PDL =
  True), as large_decode_d512 always is.

Smoke sizes: prefill 2 x 512 and 1 x 1024; large prefill 2 x 1000; large decode 3 x 5000 keys; decode 3 x 1000.

Read bandwidth (large and decode parts): torch.sum over a --bw-gb (4) GB bf16 tensor in a CUDA graph of 5,
median (peer_common.measure_bandwidth, as bench/decode_peers.py), measured once before the cells and printed.

Checks: every kernel first runs once on poisoned outputs (NaN; the FlashMLA drop-in allocates its own: NaN blocks
are freed into torch's allocator just before) and O (decode cells: and LSE) is compared with float64
(attention_ctypes.reference_rows; GQA there groups query heads per K/V head; MLA: K = the latent rows, V = their
first 512 columns): prefill on --rows sampled query rows of each sequence, decode on every row of the first,
middle and last sequences. A flashjit check that misses the bound (bf16 O rel-L2 6e-3; LSE 1e-4 where checked)
or a flashjit cell that raises makes the exit status 1 (listed after `flashjit failures`); a peer's check is
printed beside its timing. Missed performance targets do not change the exit status.

Timings: replay of a CUDA graph of --per-graph calls (prefill cells) or --decode-per-graph calls (decode cells:
short kernels), medians of --reps. Counting:
  prefill TFLOP/s: useful FLOPs 2 x (d + d_v) x query heads x visible (query, key) pairs (Q K^T and P V; pairs
    s^2 a sequence, s (s + 1) / 2 causal); d + d_v = 192 + 128, 256 + 256 or 512 + 512.
  large decode TB/s: bytes of K and V read, keys x heads_kv x (d + d_v) x 2 B (all sequences' keys) / time.
  decode TB/s: batch x keys x 576 x 2 B (the latent cache read once: V is the same memory) + q and O bytes
    (batch x s_q x heads x (576 + 512) x 2 B) / time; TFLOP/s: 2 x (576 + 512) x heads x visible pairs x batch,
    query i of s_q seeing keys - (s_q - 1 - i) (bottom-right causal).
  % BW: TB/s against the read bandwidth measured in the same run.

Prints one line a cell as it runs, then per part a table and its targets: `target CELL RATIO` (prefill: flashjit
/ cuDNN graph TFLOP/s, target >= 1.0x; e.g. `target mla_prefill8k 0.987`) and the non-causal TFLOP/s against
issue 40's 750; `target large_prefill_d512_vs_d256 RATIO` and `target large_prefill_d512_vs_d256_causal RATIO`
(>= 0.9), `target large_decode_d512_bw_pct PCT` (>= 85); `target mla_decode_hH_qS_bw_pct PCT` (memory-bound
cells, >= 90) and `target mla_decode_hH_qS_tflops TF` (compute-bound cells, >= 600), these new ones only where
the cells' flashjit checks pass. --out: JSON of every row
(each with its part), the read bandwidth and the kernels compiled.
"""
import argparse
import json
import math
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))  # the flashjit package (the decode part's FlashMLA drop-in)
from attention_ctypes import (FLAG_PDL, O_BOUND, ErrorSum, Flashjit, engine_args, float32,  # noqa: E402
                              reference_rows)
from peer_common import (compare_bf16, compile_specs, device_state, measure_bandwidth,  # noqa: E402
                         print_check_line, short, time_graph)

torch = None  # imported in main: --help and --dry-run work without it

PARTS = ("prefill", "large", "decode")
ELEM = 2  # bytes of a bf16

# ---- prefill: DeepSeek's 192/128 against cuDNN ---------------------------------------------------------------
D, DV = 192, 128
CELLS = {"8k": (2, 8192), "16k": (1, 16384)}
SMOKE_CELLS = {"8k": (2, 512), "16k": (1, 1024)}
TFLOPS_TARGET = 750.0

# ---- large: head dim 512 against 256 ---------------------------------------------------------------------------
LARGE_PREFILL = dict(batch=2, seqlen=8192, heads_q=16, heads_kv=8, dims=(256, 512))
LARGE_PREFILL_SMOKE = dict(LARGE_PREFILL, seqlen=1000)
LARGE_DECODE = dict(d=512, batch=8, keys=32768, heads_q=16, heads_kv=4, page=64)
LARGE_DECODE_SMOKE = dict(LARGE_DECODE, batch=3, keys=5000)  # keys that do not fill the last page
LARGE_DECODE_SPEC = "dtype=bf16,head_dim=512,causal=1,varlen=1,paged=1,pack_gqa=1,split_kv=1"
LARGE_RATIO_TARGET = 0.9
LARGE_BW_TARGET = 85.0

# ---- decode: DeepSeek's absorbed MLA decode through the FlashMLA drop-in ------------------------------------
MLA_D, MLA_DV = 576, 512  # the latent row: 512 latent + 64 rotary columns; V is its first 512
MLA_SHAPES = [(16, 1), (16, 2), (32, 1), (64, 2), (128, 1), (128, 2)]  # (heads, queries a sequence)
MLA_SIZE = dict(batch=64, keys=4096, page=64)
MLA_SIZE_SMOKE = dict(MLA_SIZE, batch=3, keys=1000)
MLA_BW_TARGET = 90.0       # memory-bound cells (heads x queries < 64): % of the read bandwidth
MLA_TFLOPS_TARGET = 600.0  # compute-bound cells (heads x queries >= 128)


# ---- cells (no torch) ------------------------------------------------------------------------------------------
def spec_of(causal):
    return f"dtype=bf16,head_dim={D},head_dim_v={DV},causal={int(causal)},varlen=1"


LARGE_VARIANTS = {"": "", "_paired": ",paired=1", "_paired_q288": ",paired=1,q_reg_dims=288", "_dimsplit": ",dim_split=1"}  # d512 cell suffix: its spec keys


def large_prefill_spec(d, causal, variant=""):
    return f"dtype=bf16,head_dim={d}{',causal=1' if causal else ''},varlen=1{LARGE_VARIANTS[variant]}"


def visible_pairs(s, causal):
    return s * (s + 1) // 2 if causal else s * s


def useful_flops(batch, s, heads, causal, d=D, dv=DV):
    return 2.0 * (d + dv) * heads * batch * visible_pairs(s, causal)


def mla_visible_pairs(sq, sk):
    """(query, key) pairs of one sequence under bottom-right causal: query i of sq sees sk - (sq - 1 - i) keys."""
    return sum(max(0, sk - (sq - 1 - i)) for i in range(sq))


def mla_bound(heads, sq):
    """What limits an MLA decode cell: memory below 64 query rows a latent head, compute from 128 (issue 40)."""
    rows = heads * sq
    return "memory" if rows < 64 else "compute" if rows >= 128 else None


def prefill_cells(args):
    table = SMOKE_CELLS if args.smoke else CELLS
    names = [c for c in args.cells.split(",") if c]
    return [dict(part="prefill", kind="prefill", name=f"mla_prefill{n}{'_causal' if causal else ''}", batch=table[n][0],
                 seqlen=table[n][1], heads=args.heads, causal=causal, spec=spec_of(causal),
                 flops=useful_flops(*table[n], args.heads, causal))
            for n in names for causal in (False, True)]


def large_cells(args):
    p = LARGE_PREFILL_SMOKE if args.smoke else LARGE_PREFILL
    # (head dim, variant): each head dim as it is, the largest also with paired=1 and dim_split=1
    variants = [(d, "") for d in p["dims"]] + [(p["dims"][-1], v) for v in LARGE_VARIANTS if v]
    cells = [dict(part="large", kind="large_prefill",
                  name=f"large_prefill8k_d{d}{variant}{'_causal' if causal else ''}",
                  batch=p["batch"], seqlen=p["seqlen"], heads_q=p["heads_q"], heads_kv=p["heads_kv"], d=d,
                  causal=causal, spec=large_prefill_spec(d, causal, variant),
                  flops=useful_flops(p["batch"], p["seqlen"], p["heads_q"], causal, d, d))
             for causal in (False, True) for d, variant in variants]
    c = LARGE_DECODE_SMOKE if args.smoke else LARGE_DECODE
    cells.append(dict(part="large", kind="large_decode", name=f"large_decode_d{c['d']}", spec=LARGE_DECODE_SPEC,
                      kv_bytes=c["batch"] * c["keys"] * c["heads_kv"] * (c["d"] + c["d"]) * ELEM, **c))
    return cells


DECODE_FORMS = {"parts": "", "vink": "_vink", "inline": "_vink_inline", "seesaw": "_seesaw", "auto": "_auto",
                "fp8": "_fp8"}  # --decode-forms: name suffixes
EARLY_RELEASE_SWITCH = {"on": True, "off": False, "shape": None}  # --early-release: flash_mla.EARLY_RELEASE


def mla_cells(args):
    from flashjit.flash_mla import INLINE_MERGE_ROWS  # plain Python: no torch, no library
    size = MLA_SIZE_SMOKE if args.smoke else dict(MLA_SIZE, keys=args.decode_keys or MLA_SIZE["keys"])
    b, sk = size["batch"], size["keys"]
    cells = []
    for heads, sq in MLA_SHAPES:
        io_bytes = b * sq * heads * (MLA_D + MLA_DV) * ELEM  # q read, O written
        # O in two parts, the shared-scores kernels (the package's; _auto its schedule by shape), an FP8 latent cache
        for form in args.decode_forms:
            if form == "inline" and sq * heads > INLINE_MERGE_ROWS:
                continue  # the package merges inline only tiles of that many rows: the cell would be vink's
            fp8 = form == "fp8"
            cache_bytes = b * sk * MLA_D * (1 if fp8 else ELEM)  # read once: V is the same memory
            cells.append(dict(part="decode", kind="mla_decode", name=f"mla_decode_h{heads}_q{sq}" + DECODE_FORMS[form],
                              heads=heads, sq=sq, v_in_k=form in ("vink", "inline", "seesaw", "auto"),
                              seesaw=None if form == "auto" else form == "seesaw",
                              inline_combine=form == "inline", kv_fp8=fp8, chunk_waits=bool(args.chunk_waits),
                              early_release=EARLY_RELEASE_SWITCH[args.early_release],
                              half_release=bool(args.half_release), q_regs=args.q_regs == "on",
                              **size, bytes=cache_bytes + io_bytes,
                              flops=2.0 * (MLA_D + MLA_DV) * heads * b * mla_visible_pairs(sq, sk),
                              bound=None if fp8 else mla_bound(heads, sq)))
    return cells


DRY_RUN_SMS = 132  # --dry-run plans the decode cells for an H100 SXM or H200 (the run plans for its own card)


def describe(c):
    """A cell's line for --dry-run."""
    if c["kind"] == "prefill":
        return (f"{c['name']} batch={c['batch']} seqlen={c['seqlen']} heads={c['heads']} {c['spec']} "
                f"flops={c['flops']:.3e}")
    if c["kind"] == "large_prefill":
        return (f"{c['name']} batch={c['batch']} seqlen={c['seqlen']} heads={c['heads_q']}/{c['heads_kv']} {c['spec']} "
                f"flops={c['flops']:.3e}")
    if c["kind"] == "large_decode":
        return (f"{c['name']} batch={c['batch']} queries=1 keys={c['keys']} heads={c['heads_q']}/{c['heads_kv']} "
                f"page={c['page']} {c['spec']} kv_bytes={c['kv_bytes'] / 1e6:.1f}MB")
    import flashjit.flash_mla as fm  # plain Python: no torch, no library
    spec, _ = mla_plan_of(fm, c, DRY_RUN_SMS, 0)
    return (f"{c['name']} batch={c['batch']} queries={c['sq']} keys={c['keys']} heads={c['heads']}/1 page={c['page']} "
            f"{spec} (the package's plan at {DRY_RUN_SMS} SMs) bytes={c['bytes'] / 1e6:.1f}MB "
            f"flops={c['flops']:.3e} {c['bound'] + '-bound' if c['bound'] else 'report only'}")


# ---- checks (torch) ----------------------------------------------------------------------------------------------
def check_rows(o, q, k, v, batch, s, causal, scale, rows):
    """O [batch * s, h, d_v] against float64 on `rows` rows of each sequence (K/V heads may be fewer: GQA)."""
    errs = ErrorSum()
    picks = sorted({0, s // 2, s - 1} | set(range(0, s, max(1, s // max(1, rows - 3)))))
    for b in range(batch):
        lo = b * s
        ref_o, _ = reference_rows(q[lo:lo + s], k[lo:lo + s], v[lo:lo + s], picks, causal=causal, scale=scale)
        errs.add(o[lo:lo + s][picks], None, ref_o, None)
    return errs


def sampled_sequences(batch):
    """The sequences a decode check compares: the first, the middle and the last."""
    return sorted({0, batch // 2, batch - 1})


def paged_rows(pool, table, b, keys, page):
    """Sequence b's rows of a paged pool [pages, page, ...] through its block table: [keys, ...]."""
    pages = table[b][:-(-keys // page)].long()
    return pool[pages].reshape(-1, *pool.shape[2:])[:keys]


def poison_allocator(nbytes):
    """Frees a NaN block of nbytes and a small one into torch's caching allocator, so that outputs the next call
    allocates (the FlashMLA drop-in makes its own) likely start as NaN: a row the kernel does not write shows."""
    big = torch.full((max(1, nbytes // 4),), float("nan"), device="cuda", dtype=torch.float32)
    small = torch.full((200 << 10,), float("nan"), device="cuda", dtype=torch.float32)
    del big, small


# ---- prefill cells -------------------------------------------------------------------------------------------
def flashjit_prefill(fj, row, spec, q, k, v, o, cu, batch, s, causal, scale, args):
    """flashjit's varlen prefill on packed q, k, v (cu: the sequences' offsets): one launch on poisoned O checked
    against float64 on sampled rows, then timed; fills the row's flashjit_* fields."""
    fargs = engine_args(q, k, v, o, seqlen_q=s, seqlen_k=s, cu_seqlens_q=cu, cu_seqlens_k=cu, scale=scale)
    o.fill_(float("nan"))
    fj.launch(spec, fargs)
    torch.cuda.synchronize()
    errs = check_rows(o, q, k, v, batch, s, causal, scale, args.rows)
    row["flashjit_o_err"] = errs.o
    row["flashjit_passed"] = errs.passed(O_BOUND["bf16"])
    ms = time_graph(fj.launcher(spec, fargs, keep=(q, k, v, o, cu)), args.reps, args.per_graph)
    row["flashjit_ms"], row["flashjit_tflops"] = ms, row["flops"] / (ms * 1e9)


def packed_inputs(total, s, hq, hkv, d, dv):
    """Packed bf16 q [total, hq, d], k [total, hkv, d], v [total, hkv, dv], O (empty) and cu_seqlens of
    sequences of s tokens (queries = keys)."""
    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(total, hq, dv, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, total + 1, s, device="cuda", dtype=torch.int32)
    return rand(total, hq, d), rand(total, hkv, d), rand(total, hkv, dv), o, cu


def run_cell(fj, c, args):
    """A prefill cell: flashjit's 192/128 kernel, then cuDNN's SDPA on views of the same tensors."""
    name, batch, s, heads, causal = c["name"], c["batch"], c["seqlen"], c["heads"], c["causal"]
    total = batch * s
    scale = float32(1.0 / math.sqrt(D))
    q, k, v, o, cu = packed_inputs(total, s, heads, heads, D, DV)
    flops = c["flops"]
    row = dict(part="prefill", cell=name, batch=batch, seqlen=s, heads=heads, causal=causal, head_dim=D, head_dim_v=DV,
               spec=c["spec"], flops=flops)
    flashjit_prefill(fj, row, c["spec"], q, k, v, o, cu, batch, s, causal, scale, args)
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


# ---- large cells -----------------------------------------------------------------------------------------------
def run_large_prefill(fj, c, args):
    """flashjit's varlen prefill at head dim 256 or 512 (V as wide), GQA 16/8: checked, timed."""
    name, batch, s, hq, hkv, d, causal = (c[k] for k in ("name", "batch", "seqlen", "heads_q", "heads_kv", "d", "causal"))
    total = batch * s
    scale = float32(1.0 / math.sqrt(d))
    q, k, v, o, cu = packed_inputs(total, s, hq, hkv, d, d)
    row = dict(part="large", cell=name, batch=batch, seqlen=s, heads_q=hq, heads_kv=hkv, causal=causal, head_dim=d,
               head_dim_v=d, spec=c["spec"], flops=c["flops"])
    flashjit_prefill(fj, row, c["spec"], q, k, v, o, cu, batch, s, causal, scale, args)
    print(f"{name:28s} flashjit {row['flashjit_tflops']:7.1f} TF/s  {row['flashjit_ms']:8.3f} ms "
          f"(O err {row['flashjit_o_err']:.2e}{'' if row['flashjit_passed'] else ' FAIL'})", flush=True)
    return row


def bandwidth_fields(row, nbytes, ms, bw):
    """TB/s of nbytes in ms, and its % of the read bandwidth bw (GB/s)."""
    tbps = nbytes / ms / 1e9
    row["flashjit_ms"], row["flashjit_tbps"] = ms, tbps
    row["flashjit_pct_bw"] = 100.0 * tbps * 1e3 / bw["gbps"]


def run_large_decode(fj, c, args, bw):
    """flashjit's split-KV paged decode at head dim 512 (16/4 heads, pages of 64, shuffled table): the workspace
    sized once for the launch (as bench/decode_peers.py), one launch on poisoned O and LSE checked, then timed."""
    name, spec, d, b, sk, hq, hkv, page = (c[k] for k in ("name", "spec", "d", "batch", "keys", "heads_q", "heads_kv",
                                                          "page"))
    scale = float32(1.0 / math.sqrt(d))
    per_seq = -(-sk // page)
    pages = b * per_seq
    k_pool = torch.randn(pages, page, hkv, d, device="cuda", dtype=torch.bfloat16)
    v_pool = torch.randn_like(k_pool)
    table = torch.randperm(pages, device="cuda").to(torch.int32).view(b, per_seq).contiguous()
    q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16)  # packed rows: one query a sequence
    o = torch.empty_like(q)
    lse = torch.empty(hq, b, device="cuda", dtype=torch.float32)
    cu = torch.arange(b + 1, device="cuda", dtype=torch.int32)
    used = torch.full((b,), sk, device="cuda", dtype=torch.int32)
    fargs = engine_args(q, k_pool, v_pool, o, lse, seqlen_q=1, seqlen_k=sk, cu_seqlens_q=cu, seqused_k=used,
                        block_table=table, scale=scale, flags=FLAG_PDL, max_splits=args.max_splits)
    ws = fj.alloc_workspace(spec, fargs)  # once, for these upper bounds; zeroed (counters start at zero)
    fj.check_metadata(spec, fargs)
    row = dict(part="large", cell=name, batch=b, queries=1, keys=sk, heads_q=hq, heads_kv=hkv, head_dim=d,
               head_dim_v=d, page_size=page, spec=spec, max_splits=args.max_splits,
               workspace_bytes=fargs.workspace_bytes, kernel=fj.launch_spec(spec, fargs), kv_bytes=c["kv_bytes"])
    samples = []
    for i in sampled_sequences(b):
        rows = torch.arange(1, device="cuda")
        ref_o, ref_lse = reference_rows(q[i:i + 1], paged_rows(k_pool, table, i, sk, page),
                                        paged_rows(v_pool, table, i, sk, page), None, True, scale)
        samples.append((i, rows, ref_o, ref_lse))
    o.fill_(float("nan"))
    lse.fill_(float("nan"))
    fj.launch(spec, fargs)
    torch.cuda.synchronize()
    chk = compare_bf16(samples, lambda i, rows: (o[i + rows], lse[:, i + rows].t()), True)
    print_check_line(name, chk, 28)
    row["check"], row["flashjit_o_err"], row["flashjit_passed"] = chk, chk["o_err"], chk["ok"]
    ms = time_graph(fj.launcher(spec, fargs, keep=(q, k_pool, v_pool, o, lse, cu, used, table, ws)), args.reps,
                    args.decode_per_graph)
    bandwidth_fields(row, c["kv_bytes"], ms, bw)
    print(f"{name:28s} flashjit {ms * 1e3:9.1f} us  {row['flashjit_tbps']:6.3f} TB/s  {row['flashjit_pct_bw']:5.1f} % BW  "
          f"K/V {c['kv_bytes'] / 1e6:.1f} MB  [{row['kernel']}]", flush=True)
    return row


# ---- decode cells: the FlashMLA drop-in ------------------------------------------------------------------------
def load_flash_mla(lib):
    """The package's FlashMLA module, on the library --lib names (the package reads FLASHJIT_LIBRARY when it first
    loads its library: on the first call)."""
    os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(lib)
    import flashjit.flash_mla as flash_mla
    return flash_mla


def mla_plan_of(fm, c, sm_count, splits):
    """(spec, max_splits) the package plans for a cell (flash_mla.mla_plan, as flash_mla_with_kvcache calls it;
    splits: its num_splits hint, 0 = the package's choice)."""
    return fm.mla_plan(sm_count, "bf16", MLA_D, MLA_DV, True, c["batch"], c["sq"], c["heads"], 1, splits,
                       v_in_k=c["v_in_k"], kv_fp8=c["kv_fp8"], seesaw=c["seesaw"],
                       inline_combine=c["inline_combine"], chunk_waits=c["chunk_waits"],
                       early_release=c["early_release"], half_release=c["half_release"], q_regs=c["q_regs"])


def run_mla_decode(fm, c, args, bw, sm_count):
    """One absorbed-MLA decode cell through flash_mla_with_kvcache: checked once against float64 on sampled
    sequences, then a graph of --decode-per-graph calls timed (the metadata computed once, outside)."""
    name, heads, sq, b, sk, page = (c[k] for k in ("name", "heads", "sq", "batch", "keys", "page"))
    scale = float32(MLA_D ** -0.5)  # FlashMLA's default, rounded as the kernel receives it
    per_seq = -(-sk // page)
    pages = b * per_seq
    pool = torch.randn(pages, page, 1, MLA_D, device="cuda", dtype=torch.bfloat16)
    kv_descale, reference_pool = None, pool
    if c["kv_fp8"]:  # e4m3 codes, one descale (a power of two: the dequantised values are exact in bf16)
        pool = pool.to(torch.float8_e4m3fn)
        kv_descale = torch.tensor([0.5], device="cuda")
        reference_pool = (pool.float() * 0.5).to(torch.bfloat16)
    table = torch.randperm(pages, device="cuda").to(torch.int32).view(b, per_seq).contiguous()
    lens = torch.full((b,), sk, device="cuda", dtype=torch.int32)
    q = torch.randn(b, sq, heads, MLA_D, device="cuda", dtype=torch.bfloat16)
    meta, splits = fm.get_mla_metadata(lens, sq * heads, 1)  # s_q x h_q / h_kv query rows a latent head
    if args.decode_splits:
        splits = args.decode_splits  # the package's extension: a Python int caps the split count

    def call():
        return fm.flash_mla_with_kvcache(q, pool, table, lens, MLA_DV, meta, splits, softmax_scale=scale, causal=True,
                                         kv_descale=kv_descale)
    fm.V_IN_K = c["v_in_k"]  # read at each call (the package's extension); every decode cell sets its own
    fm.SEESAW = c["seesaw"]
    fm.INLINE_COMBINE = c["inline_combine"]
    fm.PDL = bool(args.pdl)
    fm.CHUNK_WAITS = c["chunk_waits"]
    fm.EARLY_RELEASE = c["early_release"]
    fm.HALF_RELEASE = c["half_release"]
    fm.Q_REG_DIMS = c["q_regs"]
    spec, max_splits = mla_plan_of(fm, c, sm_count, args.decode_splits)
    row = dict(part="decode", cell=name, batch=b, queries=sq, keys=sk, heads=heads, head_dim=MLA_D, head_dim_v=MLA_DV,
               page_size=page, spec=spec, max_splits=max_splits, bound=c["bound"], bytes=c["bytes"], flops=c["flops"],
               pdl=bool(args.pdl), kv_fp8=c["kv_fp8"])
    samples = []
    for i in sampled_sequences(b):
        kv = paged_rows(reference_pool, table, i, sk, page)  # [keys, 1, 576]
        ref_o, ref_lse = reference_rows(q[i], kv, kv[..., :MLA_DV], None, True, scale)
        samples.append((i, torch.arange(sq, device="cuda"), ref_o, ref_lse))
    poison_allocator(b * sq * heads * MLA_DV * ELEM)
    out, lse = call()
    torch.cuda.synchronize()
    # out [batch, s_q, heads, 512]; lse [batch, heads, s_q] (FlashMLA's shapes)
    chk = compare_bf16(samples, lambda i, rows: (out[i][rows], lse[i][:, rows].t()), True)
    print_check_line(name, chk, 28)
    row["check"], row["flashjit_o_err"], row["flashjit_passed"] = chk, chk["o_err"], chk["ok"]
    ms = time_graph(call, args.reps, args.decode_per_graph)
    bandwidth_fields(row, c["bytes"], ms, bw)
    row["flashjit_tflops"] = c["flops"] / (ms * 1e9)
    print(f"{name:28s} flashjit {ms * 1e3:9.1f} us  {row['flashjit_tbps']:6.3f} TB/s  {row['flashjit_pct_bw']:5.1f} % BW  "
          f"{row['flashjit_tflops']:7.1f} TF/s  ({c['bound'] + '-bound' if c['bound'] else 'report only'})  [{spec}]", flush=True)
    return row


# ---- summaries ---------------------------------------------------------------------------------------------------
def num(x, spec):
    """x formatted, or '-' where the cell has no figure (it failed)."""
    return "-" if x is None else format(x, spec)


def summary_prefill(rows):
    print("\nmla_prefill (TF/s, graph)  flashjit   cuDNN   ratio")
    for r in rows:
        print(f"{r['cell']:26s} {r.get('flashjit_tflops', float('nan')):8.1f} {r.get('cudnn_tflops', float('nan')):7.1f} "
              f"{r.get('ratio', float('nan')):6.2f}x")
    for r in rows:
        if "ratio" in r:
            print(f"target {r['cell']} {r['ratio']:.3f}")
    for r in rows:
        if not r.get("causal") and "flashjit_tflops" in r:
            print(f"{r['cell']}: {r['flashjit_tflops']:.1f} TF/s non-causal (target >= {TFLOPS_TARGET:.0f}): "
                  f"{'met' if r['flashjit_tflops'] >= TFLOPS_TARGET else 'miss'}")


def met(value, goal):
    return "met" if value >= goal else "miss"


def summary_large(rows):
    print("\nlarge (graph)                    ms      TF/s     us    TB/s   %BW  check")
    for r in rows:
        check = "error" if "error" in r else "ok" if r.get("flashjit_passed") else "FAIL"
        ms = r.get("flashjit_ms")
        print(f"{r['cell']:28s} {num(ms, '8.3f'):>8} {num(r.get('flashjit_tflops'), '8.1f'):>8} "
              f"{num(ms * 1e3 if ms is not None else None, '8.1f'):>8} {num(r.get('flashjit_tbps'), '6.3f'):>6} "
              f"{num(r.get('flashjit_pct_bw'), '5.1f'):>5}  {check}")
    by_name = {r["cell"]: r for r in rows}
    for variant in LARGE_VARIANTS:
        for suffix in ("", "_causal"):
            d256 = by_name.get(f"large_prefill8k_d256{suffix}", {})
            d512 = by_name.get(f"large_prefill8k_d512{variant}{suffix}", {})
            if "flashjit_tflops" not in d256 or "flashjit_tflops" not in d512:
                if d256 or d512:
                    print(f"large_prefill8k{suffix} d512{variant} / d256: no figure (a cell failed)")
                continue
            ratio = d512["flashjit_tflops"] / d256["flashjit_tflops"]
            checked = d256.get("flashjit_passed") and d512.get("flashjit_passed")
            print(f"large_prefill8k{suffix} d512{variant} / d256: {ratio:.3f}x (d512 {d512['flashjit_tflops']:.1f} TF/s, "
                  f"d256 {d256['flashjit_tflops']:.1f} TF/s; target >= {LARGE_RATIO_TARGET}): "
                  f"{met(ratio, LARGE_RATIO_TARGET)}{'' if checked else ' (a check FAILED)'}")
            if checked:
                print(f"target large_prefill_d512{variant}_vs_d256{suffix} {ratio:.3f}")
    for r in rows:
        if "flashjit_pct_bw" in r:
            print(f"{r['cell']}: {r['flashjit_pct_bw']:.1f} % of the read bandwidth (target >= {LARGE_BW_TARGET:.0f}): "
                  f"{met(r['flashjit_pct_bw'], LARGE_BW_TARGET)}{'' if r.get('flashjit_passed') else ' (check FAILED)'}")
            if r.get("flashjit_passed"):
                print(f"target {r['cell']}_bw_pct {r['flashjit_pct_bw']:.1f}")


def decode_goal(r):
    """(field, goal, unit) of an MLA decode cell's target: % BW where memory-bound, TFLOP/s where compute-bound."""
    if r.get("bound") == "memory":
        return "flashjit_pct_bw", MLA_BW_TARGET, "bw_pct"
    if r.get("bound") == "compute":
        return "flashjit_tflops", MLA_TFLOPS_TARGET, "tflops"
    return None, None, None


def summary_decode(rows):
    print("\nmla_decode (graph)                us    TB/s   %BW    TF/s  bound    target             check")
    for r in rows:
        check = "error" if "error" in r else "ok" if r.get("flashjit_passed") else "FAIL"
        ms = r.get("flashjit_ms")
        key, goal, _ = decode_goal(r)
        target = f">= {goal:.0f} {'%' if key == 'flashjit_pct_bw' else 'TF/s'}: {met(r[key], goal)}" if key and key in r else "-"
        print(f"{r['cell']:28s} {num(ms * 1e3 if ms is not None else None, '8.1f'):>8} "
              f"{num(r.get('flashjit_tbps'), '6.3f'):>6} {num(r.get('flashjit_pct_bw'), '5.1f'):>5} "
              f"{num(r.get('flashjit_tflops'), '7.1f'):>7}  {r.get('bound') or '-':8s} {target:18s} {check}")
    for r in rows:
        key, _, unit = decode_goal(r)
        if key and key in r and r.get("flashjit_passed"):  # a kernel that fails its check has no figure to target
            print(f"target {r['cell']}_{unit} {r[key]:.1f}")


# ---- main --------------------------------------------------------------------------------------------------------
def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libflashjit.so"))
    ap.add_argument("--out", default=None, help="JSON of every cell")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma list of " + ", ".join(PARTS) + " (default all)")
    ap.add_argument("--cells", default="8k,16k", help="the prefill part's cells: comma list of " + ", ".join(CELLS))
    ap.add_argument("--heads", type=int, default=16, help="the prefill part's heads (query and K/V)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--per-graph", type=int, default=5, help="calls a graph holds (prefill cells)")
    ap.add_argument("--decode-per-graph", type=int, default=20,
                    help="calls a graph holds in the decode cells (large_decode_d512, mla_decode_*): short kernels")
    ap.add_argument("--max-splits", type=int, default=64, help="args.max_splits of large_decode_d512 (1..128)")
    ap.add_argument("--decode-forms", default="parts,vink",
                    help="the decode part's kernels: comma list of parts (O in two parts), vink (v_in_k=1), seesaw "
                         "(v_in_k=1,seesaw=1: flash_mla.SEESAW), auto (flash_mla.SEESAW = None, by "
                         "shape), inline (v_in_k=1 merging its splits in the attention "
                         "kernel: flash_mla.INLINE_COMBINE; cells of at most 16 rows a tile), fp8 (an FP8 latent cache: kv_dtype=e4m3, report only); "
                         "default parts,vink")
    ap.add_argument("--only", default="", help="keep the chosen parts' cells whose names this regular expression finds")
    ap.add_argument("--decode-keys", type=int, default=0, help="the decode part's keys a sequence (default 4096)")
    ap.add_argument("--decode-splits", type=int, default=0,
                    help="the decode part's num_splits hint (1: never split, n: at most n; default 0: the package's plan)")
    ap.add_argument("--pdl", action="store_true", help="decode cells: flash_mla.PDL = True (programmatic dependent launch)")
    ap.add_argument("--chunk-waits", type=int, choices=(0, 1), default=1,
                    help="decode cells: flash_mla.CHUNK_WAITS (v_in_k=1's scores chunk by chunk as a block lands; default 1, "
                         "the package's; 0: the slot waits)")
    ap.add_argument("--early-release", nargs="?", const="on", default="shape", choices=sorted(EARLY_RELEASE_SWITCH),
                    help="decode cells: flash_mla.EARLY_RELEASE (the hand-over's latent slots back as soon as their P V's "
                         "are done; with --chunk-waits 1): on (True; the flag alone), off (False), shape (None, the "
                         "package's default: by shape)")
    ap.add_argument("--half-release", action="store_true",
                    help="decode cells: flash_mla.HALF_RELEASE (each warpgroup's part of a latent slot back on its own, "
                         "wherever early_release=1 goes)")
    ap.add_argument("--q-regs", choices=("on", "off"), default="on",
                    help="decode cells: flash_mla.Q_REG_DIMS (the hand-over's scores warpgroup holds Q's first 192 head "
                         "dims in registers): on (the package's default) or off")
    ap.add_argument("--bw-gb", type=float, default=4.0, help="GB of the tensor the read bandwidth is measured on")
    ap.add_argument("--rows", type=int, default=16, help="query rows a prefill sequence checked against float64")
    ap.add_argument("--smoke", action="store_true", help="every cell at a tiny size")
    ap.add_argument("--dry-run", action="store_true", help="list the cells and exit")
    args = ap.parse_args()
    args.part_list = [p for p in args.parts.split(",") if p]
    forms = [f for f in args.decode_forms.split(",") if f]
    if not forms or any(f not in DECODE_FORMS for f in forms):
        ap.error(f"--decode-forms: {args.decode_forms!r}; allowed: a comma list of {', '.join(DECODE_FORMS)}")
    args.decode_forms = [f for f in DECODE_FORMS if f in forms]
    try:
        re.compile(args.only)
    except re.error as e:
        ap.error(f"--only: {e}")
    if args.decode_keys < 0 or args.decode_splits < 0:
        ap.error("--decode-keys and --decode-splits: 0 (the default) or more")
    unknown = [p for p in args.part_list if p not in PARTS]
    if unknown or not args.part_list:
        ap.error(f"--parts: unknown {', '.join(unknown) or '(none given)'}; allowed: {', '.join(PARTS)}")
    table = SMOKE_CELLS if args.smoke else CELLS
    unknown = [c for c in args.cells.split(",") if c and c not in table]
    if unknown:
        ap.error(f"--cells: unknown {', '.join(unknown)}; allowed: {', '.join(table)}")
    if not 1 <= args.max_splits <= 128:
        ap.error("--max-splits: 1..128 (DECODE in flashjit.h)")
    if min(args.reps, args.per_graph, args.decode_per_graph) < 1:
        ap.error("--reps, --per-graph and --decode-per-graph: at least 1")
    return args


def all_cells(args):
    makers = dict(prefill=prefill_cells, large=large_cells, decode=mla_cells)
    keep = re.compile(args.only) if args.only else None
    return [c for part in PARTS if part in args.part_list for c in makers[part](args) if not keep or keep.search(c["name"])]


def run_guarded(fn, c, *more):
    """A cell that raises is reported (a flashjit failure) and the next one runs."""
    try:
        return fn(c, *more)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print(f"{c['name']:28s} FAILED {short(e, 400)}", flush=True)
        return dict(part=c["part"], cell=c["name"], spec=c.get("spec"), error=short(e, 600), flashjit_passed=False)


def main():
    global torch
    args = parse_args()
    cells = all_cells(args)
    if args.dry_run:
        for c in cells:
            print(describe(c))
        print(f"parts: {', '.join(args.part_list)}")
        print(f"{len(cells)} cells")  # the line tests/gpu/dry_run_check.sh reads
        return 0
    import torch as torch_module
    torch = torch_module
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    fj = Flashjit(args.lib, torch.cuda.current_device())
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {args.lib} on "
          f"{torch.cuda.get_device_name()} ({props.multi_processor_count} SMs; torch {torch.__version__}); parts "
          f"{', '.join(args.part_list)}{', smoke' if args.smoke else ''}", flush=True)
    torch.manual_seed(40)
    fm = load_flash_mla(args.lib) if "decode" in args.part_list else None
    specs = [mla_plan_of(fm, c, props.multi_processor_count, args.decode_splits)[0] if c["kind"] == "mla_decode" else c["spec"]
             for c in cells]
    kernels = compile_specs(fj, specs)  # every kernel compiled in parallel first (a no-op for those in the cache)
    bw = None
    if any(c["kind"] in ("large_decode", "mla_decode") for c in cells):
        bw = measure_bandwidth(args.bw_gb, args.reps)
        print(f"read bandwidth: {bw['gbps']:.1f} GB/s (torch.sum over {bw['bytes'] / 1e9:.2f} GB of bf16, "
              f"{bw['ms'] * 1e3:.1f} us a sum; every % BW below is of this figure)", flush=True)
    runners = dict(prefill=lambda c: run_cell(fj, c, args), large_prefill=lambda c: run_large_prefill(fj, c, args),
                   large_decode=lambda c: run_large_decode(fj, c, args, bw),
                   mla_decode=lambda c: run_mla_decode(fm, c, args, bw, props.multi_processor_count))
    rows = []
    for c in cells:
        start = time.time()
        row = run_guarded(runners[c["kind"]], c)
        # Wall times line up with run_h200.sh's gpu_clocks.csv; the state is the card's as the cell ends.
        row.update(wall=[round(start, 3), round(time.time(), 3)], state=device_state())
        if row["state"]:
            print(f"    state after {c['name']}: " + ", ".join(f"{k} {v}" for k, v in row["state"].items()), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()  # the next cell's tensors (up to a few GB) find the memory this one held
    summaries = dict(prefill=summary_prefill, large=summary_large, decode=summary_decode)
    for part in PARTS:
        part_rows = [r for r in rows if r["part"] == part]
        if part_rows:
            summaries[part](part_rows)
    failed = [r["cell"] for r in rows if not r["flashjit_passed"]]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), sms=props.multi_processor_count, torch=torch.__version__,
                           cudnn=torch.backends.cudnn.version(), flashjit=version, lib=args.lib, parts=args.part_list,
                           smoke=args.smoke, bandwidth=bw, kernels=kernels, rows=rows), f, indent=1)
        print(f"wrote {args.out}")
    if failed:
        print("flashjit failures")
        print(" ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
