#!/usr/bin/env python3
"""Decode at the memory-bandwidth limit (issue 24, Performance): flashjit's split-KV decode against its peers,
in one process, on the same data, as bytes of K/V read per second against the device's own read bandwidth.

  python3 bench/decode_peers.py --lib build/libflashjit.so --out decode.json [--cells decode,spec,...] [--smoke]
  python3 bench/decode_peers.py --dry-run [--smoke] [--cells ...]      # the cells and their sizes; no torch, no GPU

Read bandwidth: torch.sum over a --bw-gb (4) GB bf16 tensor, a CUDA graph of 5 sums replayed --reps times,
the median; measured before the cells (the figure every "% BW" uses) and again after them (drift, printed).

Cells (bf16; K/V per sequence contiguous [batch, seqlen_k, heads_kv, d] with seqused_k, or paged; every
sequence holds all its keys; queries packed [batch x queries, heads_q, d] with cu_seqlens_q):
  decode     d128, heads 32/8 and 64/8, batch 1 4 8 32 64 128 256, keys 1k 4k 16k 32k 64k 128k, 1 query.
  dims       d64 and d256, heads 32/8, batch/keys 1/32k 1/128k 8/4k 8/32k 64/4k 64/32k, 1 query.
  spec       speculative: 4 and 16 queries a sequence, causal (bottom-right), d128 32/8, batch/keys 1/32k 8/4k
             8/32k 64/4k 64/32k; flashjit's one-query time on the same K/V beside (flashjit_q1).
  paged      page 16 and 64, shuffled page table over the same storage, d128 32/8, batch/keys 1/32k 8/4k
             8/32k 64/4k 128/32k, 1 query; flashjit's contiguous kernel on the same storage beside (flashjit_contig).
  invariant  batch-invariant mode (args.split_keys = --split-keys, rounded up to the kernel's block_n), d128
             32/8, batch/keys 1/32k 1/128k 8/32k 64/4k 64/32k; the default mode beside (flashjit_default), its
             cost, and whether sequence 0's O and LSE are bitwise the same alone, in the batch, and in the batch
             with the other sequences' lengths changed (a mismatch in the invariant mode is a failure).
  Cells whose K/V exceed --max-kv-gb (40 GB) or the device's free memory are skipped. Cell ids look like
  decode/d128/h32-8/b8/q1/k32k (paged: .../p16; invariant: .../split4096); --cells takes group names and
  fnmatch patterns on ids, comma-separated ('decode/*/h64-8/*,paged').

flashjit: spec dtype=bf16,head_dim=D,varlen=1,pack_gqa=1,split_kv=1 (+,paged=1; +,causal=1 for spec cells);
--spec-extra key=value,... merges into it (a key with no value removes it: split_kv= runs without split-KV).
The workspace is sized with flashjit_attention_workspace_size once per cell and kernel (all launches of the
cell share it); max_splits --max-splits (64); launched with FLASHJIT_ATTENTION_FLAG_PDL unless --no-pdl.

Peers (same process, same tensors): torch SDPA with the cuDNN backend (sdpa_kernel(CUDNN_ATTENTION); GQA
with enable_gqa on strided views of the same K/V, and on a BHSD copy within --max-copy-gb; repeat_interleave
only where neither matches; speculative: is_causal, a bottom-right boolean mask, and the cudnn frontend's SDPA
with bottom-right alignment); torch SDPA with the FLASH backend (FlashAttention-2; also FA2 varlen through
aten._flash_attention_forward); cuDNN's paged SDPA through the cudnn frontend (nvidia-cudnn-frontend) for the
paged cells (NHD pools as strided containers; also an HND copy within 4 GB). Each variant is checked against
the reference; of those that match, the fastest is the peer's figure (--peer-variants first: the first that
matches); the JSON names it and keeps every variant's outcome.

Per cell: K/V bytes read (2 x keys held x heads_kv x d x 2 B: K and V of the keys the sequences hold),
microseconds per call (replay of a CUDA graph of --per-graph calls, median of --reps; each call of the graph
reads its own copy of Q/K/V, "layers", until the copies hold --rotate-mb, so small cells are not timed out of
a warm L2; --rotate-mb 0: one copy), TB/s, % of the measured read bandwidth, x best peer (best peer's time /
flashjit's). Before timing, each kernel runs once on poisoned outputs (O, LSE NaN; flashjit's workspace
NaN too) and O (flashjit: and LSE) of sampled sequences (first, last, one random; every query row, every
head) is compared with a float64 reference (bf16 O rel-L2 6e-3, LSE 1e-4); flashjit's O is checked again
after a graph replay. Any flashjit failure (check, launch, bitwise invariance) makes the exit status 1; a
peer's is reported beside it. Missed performance targets do not change the exit status.

Prints each result as it comes, then a short table and the issue's targets, and writes everything to --out.
DECODE_PEERS_TRACEBACK=1 prints a failing peer's traceback.
"""
import argparse
import fnmatch
import json
import math
import os
import random
import re
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
from attention_ctypes import (FLAG_PDL, Flashjit, default_lib,  # noqa: E402
                              engine_args, float32, reference_rows)
from peer_common import (compare_bf16, i32, klabel, measure_bandwidth, median,  # noqa: E402
                         print_check_line, short)

torch = None  # imported in main: --help and --dry-run work without it
F = None

ELEM = 2  # bytes of a bf16
KEY_ALIGN = 64  # keys a sequence's storage holds, rounded up to this: whole pages of 16 and of 64
K1 = 1024
GROUPS = ("decode", "dims", "spec", "paged", "invariant")
PEERS = ("cudnn", "fa2", "cudnn_paged")

FULL = dict(
    decode=dict(d=[128], heads=[(32, 8), (64, 8)], batch=[1, 4, 8, 32, 64, 128, 256],
                keys=[1 * K1, 4 * K1, 16 * K1, 32 * K1, 64 * K1, 128 * K1]),
    dims=dict(d=[64, 256], heads=[(32, 8)],
              shapes=[(1, 32 * K1), (1, 128 * K1), (8, 4 * K1), (8, 32 * K1), (64, 4 * K1), (64, 32 * K1)]),
    spec=dict(d=128, heads=(32, 8), queries=[4, 16],
              shapes=[(1, 32 * K1), (8, 4 * K1), (8, 32 * K1), (64, 4 * K1), (64, 32 * K1)]),
    paged=dict(d=128, heads=(32, 8), pages=[16, 64],
               shapes=[(1, 32 * K1), (8, 4 * K1), (8, 32 * K1), (64, 4 * K1), (128, 32 * K1)]),
    invariant=dict(d=128, heads=(32, 8),
                   shapes=[(1, 32 * K1), (1, 128 * K1), (8, 32 * K1), (64, 4 * K1), (64, 32 * K1)]),
    reps=10, per_graph=20, split_keys=4096,
)
SMOKE = dict(  # lengths that do not divide into pages or splits
    decode=dict(d=[128], heads=[(32, 8), (64, 8)], batch=[1, 3], keys=[1000, 2048]),
    dims=dict(d=[64, 256], heads=[(32, 8)], shapes=[(2, 700)]),
    spec=dict(d=128, heads=(32, 8), queries=[4, 16], shapes=[(2, 1000)]),
    paged=dict(d=128, heads=(32, 8), pages=[16, 64], shapes=[(2, 1000)]),
    invariant=dict(d=128, heads=(32, 8), shapes=[(3, 1000)]),
    reps=3, per_graph=3, split_keys=256,
)


# ---- cells (no torch) --------------------------------------------------------------------------------------
def round_up(x, m):
    return -(-x // m) * m


def kv_bytes_of(b, sk, hkv, d):
    """K and V of the keys the sequences hold (all b sequences hold sk keys)."""
    return 2 * b * sk * hkv * d * ELEM


def new_cell(group, d, hq, hkv, b, sq, sk, page=None, split_keys=0, causal=False):
    cid = f"{group}/d{d}/h{hq}-{hkv}/b{b}/q{sq}/k{klabel(sk)}"
    if page:
        cid += f"/p{page}"
    if split_keys:
        cid += f"/split{split_keys}"
    return dict(id=cid, group=group, d=d, hq=hq, hkv=hkv, b=b, sq=sq, sk=sk, page=page, split_keys=split_keys,
                causal=causal, kv_bytes=kv_bytes_of(b, sk, hkv, d), skip=None)


def make_cells(cfg, split_keys):
    cells = []
    c = cfg["decode"]
    for d in c["d"]:  # heads innermost: cells one after another share their K/V storage (heads_kv 8 both)
        for b in c["batch"]:
            for sk in c["keys"]:
                for hq, hkv in c["heads"]:
                    cells.append(new_cell("decode", d, hq, hkv, b, 1, sk))
    c = cfg["dims"]
    for d in c["d"]:
        for b, sk in c["shapes"]:
            for hq, hkv in c["heads"]:
                cells.append(new_cell("dims", d, hq, hkv, b, 1, sk))
    c = cfg["spec"]
    for b, sk in c["shapes"]:
        for sq in c["queries"]:
            cells.append(new_cell("spec", c["d"], c["heads"][0], c["heads"][1], b, sq, sk, causal=True))
    c = cfg["paged"]
    for b, sk in c["shapes"]:
        for page in c["pages"]:
            cells.append(new_cell("paged", c["d"], c["heads"][0], c["heads"][1], b, 1, sk, page=page))
    c = cfg["invariant"]
    for b, sk in c["shapes"]:
        cells.append(new_cell("invariant", c["d"], c["heads"][0], c["heads"][1], b, 1, sk, split_keys=split_keys))
    return cells


def select_cells(cells, patterns):
    if not patterns:
        return cells
    return [c for c in cells if any(p == c["group"] or fnmatch.fnmatchcase(c["id"], p) for p in patterns)]


def mark_skips(cells, max_kv_gb, max_splits, spec_extra, kv_layout="bshd"):
    for c in cells:
        if kv_layout != "bshd" and c["group"] == "paged":
            c["skip"] = f"--kv-layout {kv_layout}: the paged cells' pools are views of [b, s, h, d] storage"
        elif c["kv_bytes"] > max_kv_gb * 1e9:
            c["skip"] = f"K/V {c['kv_bytes'] / 1e9:.1f} GB > --max-kv-gb {max_kv_gb:g}"
        elif c["split_keys"] and "split_kv" in spec_parts(spec_extra) and spec_parts(spec_extra)["split_kv"] != "1":
            c["skip"] = "--spec-extra turns split_kv off: no batch-invariant mode"


def contract_workspace(c, max_splits):
    """The workspace DECODE in flashjit.h describes: max_splits x total_q x heads_q rows of head_dim + 1 floats."""
    return max_splits * c["b"] * c["sq"] * c["hq"] * (c["d"] + 1) * 4


def counter_bytes(nbytes, partial_bytes):
    """The workspace's leading bytes that hold counters (scheduler=dynamic's tile counter, combine=inline's
    merge counters): flashjit.h puts them before the split partials and asks the caller to zero them once.
    Everything past them is partials (partial_bytes, the header's formula; 0 without split_kv)."""
    return max(0, nbytes - partial_bytes)


def spec_parts(extra):
    parts = {}
    for item in (extra or "").split(","):
        item = item.strip()
        if item:
            key, _, value = item.partition("=")
            parts[key.strip()] = value.strip()
    return parts


def build_spec(d, *, paged=False, causal=False, extra=""):
    parts = {"dtype": "bf16", "head_dim": str(d), "varlen": "1", "pack_gqa": "1", "split_kv": "1"}
    if paged:
        parts["paged"] = "1"
    if causal:
        parts["causal"] = "1"
    for key, value in spec_parts(extra).items():
        if value == "":
            parts.pop(key, None)
        else:
            parts[key] = value
    return ",".join(f"{k}={v}" for k, v in parts.items())


def is_split(spec):
    return spec_parts(spec).get("split_kv") == "1"


def layers_for(c, per_graph, rotate_mb):
    """Copies of Q/K/V the calls of one graph cycle through, so that they read more than L2 holds."""
    if rotate_mb <= 0:
        return 1
    one = kv_bytes_of(c["b"], round_up(c["sk"], KEY_ALIGN), c["hkv"], c["d"])
    return max(1, min(per_graph, -(-int(rotate_mb * 1e6) // one)))


def print_cells(cells, max_splits, per_graph, rotate_mb, split=True):
    run = [c for c in cells if not c["skip"]]
    print(f"{len(cells)} cells, {len(run)} to run, {len(cells) - len(run)} skipped "
          f"(K/V bytes = 2 x keys held x heads_kv x d x 2 B; workspace as DECODE in flashjit.h at max_splits {max_splits})")
    print(f"  {'cell':<44} {'K/V MB':>10} {'workspace MB':>13} {'layers':>6}")
    for c in cells:
        tail = f"  skip: {c['skip']}" if c["skip"] else ""
        ws = contract_workspace(c, max_splits) if split else 0
        print(f"  {c['id']:<44} {c['kv_bytes'] / 1e6:10.1f} {ws / 1e6:13.1f} "
              f"{layers_for(c, per_graph, rotate_mb):6d}{tail}")
    total = sum(c["kv_bytes"] for c in run)
    largest = max((c["kv_bytes"] for c in run), default=0)
    print(f"K/V of the cells that run: {total / 1e9:.2f} GB in all, the largest {largest / 1e6:.1f} MB")


# ---- helpers (torch) ---------------------------------------------------------------------------------------
def time_graph(calls, reps, after=None):
    """ms a call: a CUDA graph of the calls (each run once outside it first), replayed reps times, median.
    after(graph), if given, runs before the graph goes (a check of what a replay writes)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        seen = set()
        for fn in calls:  # first-call work (plans, workspaces) outside the capture
            if id(fn) not in seen:
                seen.add(id(fn))
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in calls:
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / len(calls))
    extra = after(g) if after is not None else None
    del g
    return median(times), extra


def bottom_right_mask(sq, sk):
    i = torch.arange(sq, device="cuda").view(-1, 1)
    j = torch.arange(sk, device="cuda").view(1, -1)
    return (j <= i + (sk - sq)).view(1, 1, sq, sk)


# ---- cuDNN through the frontend's Python graph API ------------------------------------------------------------
class Cudnn:
    """cuDNN SDPA forward graphs (nvidia-cudnn-frontend, `import cudnn`), built once a cell from the first
    layer's tensors and bound to each layer's tensors (same shapes and strides)."""

    def __init__(self):
        import cudnn
        self.c = cudnn
        self.handle = cudnn.create_handle()
        self.backend = cudnn.backend_version()
        self.frontend = getattr(cudnn, "__version__", "?")

    def _graph(self):
        dt = self.c.data_type
        return self.c.pygraph(io_data_type=dt.BFLOAT16, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT,
                              handle=self.handle)

    def _sdpa(self, g, q, k, v, lq, lk, causal, scale, **paged):
        c = self.c
        try:  # 1.14's names: generate_stats, diagonal_alignment + diagonal_band_right_bound = 0
            mask = dict(diagonal_alignment=c.diagonal_alignment.BOTTOM_RIGHT, diagonal_band_right_bound=0) if causal else {}
            return g.sdpa(name="sdpa", q=q, k=k, v=v, generate_stats=False, attn_scale=scale, use_padding_mask=True,
                          seq_len_q=lq, seq_len_kv=lk, **mask, **paged)
        except (TypeError, AttributeError):  # an older frontend's
            return g.sdpa(name="sdpa", q=q, k=k, v=v, is_inference=True, attn_scale=scale, use_padding_mask=True,
                          seq_len_q=lq, seq_len_kv=lk, use_causal_mask_bottom_right=causal, **paged)

    def _bhsd(self, g, name, t, dims):
        """A [n, s, h, d] tensor (d contiguous) as cuDNN's [n, h, s, d]."""
        return g.tensor(name=name, dim=dims, stride=[t.stride(0), t.stride(2), t.stride(1), 1],
                        data_type=self.c.data_type.BFLOAT16)

    def _lengths(self, g, name, b):
        return g.tensor(name=name, dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=self.c.data_type.INT32)

    def _finish(self, g, fixed, o_handle, q_handle, k_handle, v_handle):
        c = self.c
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([c.heur_mode.A, c.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        workspace = torch.empty(max(1, g.get_workspace_size()), device="cuda", dtype=torch.uint8)
        handle = self.handle

        def bind(q, k, v, o):
            pack = dict(fixed)
            pack.update({q_handle: q, k_handle: k, v_handle: v, o_handle: o})

            def run():
                c.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
                g.execute(pack, workspace, handle=handle)
            run.held = (g, pack, workspace)
            return run
        return bind

    def dense(self, q4, k4, o4, seq_q, seq_kv, causal, scale):
        """q4, o4 [b, s_q, hq, d]; k4 (and v4) [b, s_k, hkv, d], strided; seq_q, seq_kv int32 [b].
        Returns bind(q4, k4, v4, o4) -> a zero-argument launch."""
        b, sq, hq, d = q4.shape
        sk, hkv = k4.shape[1], k4.shape[2]
        g = self._graph()
        tq = self._bhsd(g, "Q", q4, [b, hq, sq, d])
        tk = self._bhsd(g, "K", k4, [b, hkv, sk, d])
        tv = self._bhsd(g, "V", k4, [b, hkv, sk, d])
        lq, lk = self._lengths(g, "seq_len_q", b), self._lengths(g, "seq_len_kv", b)
        to, _ = self._sdpa(g, tq, tk, tv, lq, lk, causal, scale)
        to.set_output(True).set_dim([b, hq, sq, d]).set_stride([o4.stride(0), o4.stride(2), o4.stride(1), 1])
        to.set_data_type(self.c.data_type.BFLOAT16)
        fixed = {lq: seq_q.view(b, 1, 1, 1).contiguous(), lk: seq_kv.view(b, 1, 1, 1).contiguous()}
        return self._finish(g, fixed, to, tq, tk, tv)

    def paged(self, q4, pool, o4, table, seq_q, seq_kv, max_k, causal, scale):
        """q4, o4 [b, s_q, hq, d]; pools [pages, page_size, hkv, d] (any strides, d contiguous: cuDNN sees
        containers [pages, hkv, page_size, d]); table int32 [b, pages a sequence] contiguous."""
        dt = self.c.data_type
        b, sq, hq, d = q4.shape
        pages, page_size, hkv = pool.shape[0], pool.shape[1], pool.shape[2]
        per_seq = table.shape[1]
        assert table.is_contiguous() and table.dtype == torch.int32
        g = self._graph()
        tq = self._bhsd(g, "Q", q4, [b, hq, sq, d])
        tk = self._bhsd(g, "K_container", pool, [pages, hkv, page_size, d])
        tv = self._bhsd(g, "V_container", pool, [pages, hkv, page_size, d])
        tables = [g.tensor(name=n, dim=[b, 1, per_seq, 1], stride=[per_seq, per_seq, 1, 1], data_type=dt.INT32)
                  for n in ("page_table_k", "page_table_v")]
        lq, lk = self._lengths(g, "seq_len_q", b), self._lengths(g, "seq_len_kv", b)
        to, _ = self._sdpa(g, tq, tk, tv, lq, lk, causal, scale, paged_attention_k_table=tables[0],
                           paged_attention_v_table=tables[1], paged_attention_max_seq_len_kv=int(max_k))
        to.set_output(True).set_dim([b, hq, sq, d]).set_stride([o4.stride(0), o4.stride(2), o4.stride(1), 1])
        to.set_data_type(dt.BFLOAT16)
        table4 = table.view(b, 1, per_seq, 1)
        fixed = {tables[0]: table4, tables[1]: table4, lq: seq_q.view(b, 1, 1, 1).contiguous(),
                 lk: seq_kv.view(b, 1, 1, 1).contiguous()}
        return self._finish(g, fixed, to, tq, tk, tv)


# ---- one cell's tensors ------------------------------------------------------------------------------------------
class Storage:
    """K and V [layers, b, keys rounded up to KEY_ALIGN, hkv, d], random normal; kept while consecutive cells ask
    for the same shape (the 32/8 and 64/8 cells of one batch and length share it). layout "bhsd": stored
    [layers, b, hkv, keys, d] (each head's keys contiguous) and handed out as the same-shaped strided view."""

    def __init__(self, layout="bshd"):
        self.key, self.k, self.v = None, None, None
        self.layout = layout

    def get(self, d, hkv, b, sk_alloc, layers):
        key = (d, hkv, b, sk_alloc, layers)
        if key != self.key:
            self.release()
            need = 2 * layers * b * sk_alloc * hkv * d * ELEM
            free = torch.cuda.mem_get_info()[0]
            if need + 4e9 > free:  # room for Q/O, the workspace, references and the peers
                raise MemoryError(f"K/V {need / 1e9:.1f} GB do not fit: {free / 1e9:.1f} GB free")
            if self.layout == "bhsd":
                self.k = torch.empty(layers, b, hkv, sk_alloc, d, device="cuda", dtype=torch.bfloat16).transpose(2, 3)
                self.v = torch.empty(layers, b, hkv, sk_alloc, d, device="cuda", dtype=torch.bfloat16).transpose(2, 3)
            else:
                self.k = torch.empty(layers, b, sk_alloc, hkv, d, device="cuda", dtype=torch.bfloat16)
                self.v = torch.empty_like(self.k)
            self.k.normal_()
            self.v.normal_()
            self.key = key
        return self.k, self.v

    def release(self):
        self.key, self.k, self.v = None, None, None
        torch.cuda.empty_cache()


def new_row(c, layers):
    return dict(id=c["id"], group=c["group"], shape={k: c[k] for k in ("d", "hq", "hkv", "b", "sq", "sk", "page",
                                                                           "causal", "split_keys")},
                kv_bytes=c["kv_bytes"], layers=layers, specs={}, kernels={}, workspace={}, checks={}, impls={},
                variants={}, variants_tried={}, ratios={}, bitwise={}, notes=[], skipped=None, error=None)


class Bench:
    def __init__(self, fj, opts, bandwidth_gbps):
        self.fj, self.opts, self.bw = fj, opts, bandwidth_gbps
        self.rng = random.Random(opts.seed)
        self.storage = Storage(opts.kv_layout)
        self.failed = []  # flashjit failures: exit status 1
        self._cudnn = None
        self.flags = 0 if opts.no_pdl else FLAG_PDL

    def cudnn(self):
        if self._cudnn is None:
            try:
                self._cudnn = Cudnn()
                print(f"cuDNN frontend {self._cudnn.frontend}, backend {self._cudnn.backend}", flush=True)
            except Exception as e:  # noqa: BLE001
                self._cudnn = e
        if isinstance(self._cudnn, Exception):
            raise self._cudnn
        return self._cudnn

    # -- checks --
    def references(self, seqs, causal, scale):
        """[(sequence, rows, ref O, ref LSE)] for seqs = [(index, q [s_q, hq, d], k [s_k, hkv, d], v)]: every row."""
        out = []
        for i, q, k, v in seqs:
            rows = torch.arange(q.shape[0], device="cuda")
            out.append((i, rows) + reference_rows(q, k, v, rows, causal, scale))
        torch.cuda.synchronize()
        return out

    compare = staticmethod(compare_bf16)

    @staticmethod
    def print_check(name, chk):
        print_check_line(name, chk, 26)

    def timing(self, ms, kv_bytes):
        tbps = kv_bytes / ms / 1e9
        return {"us": round(ms * 1e3, 2), "tbps": round(tbps, 3), "pct_bw": round(100.0 * tbps * 1e3 / self.bw, 1)}

    def fail(self, row, what):
        self.failed.append(f"{row['id']} {what}")

    # -- flashjit --
    def split_fields(self, spec, split_keys=0):
        return dict(max_splits=self.opts.max_splits, split_keys=split_keys) if is_split(spec) else {}

    def ours(self, row, name, spec, make_args, layers, samples, get, poison, poison_o, kv_bytes):
        """A flashjit kernel: make_args(layer, with_lse) -> args. Workspace sized and allocated once (shared by
        the cell's launches), metadata checked, one launch with LSE on poisoned outputs against the reference,
        a graph of --per-graph calls (without LSE, layer by layer) timed, then O checked after one more replay.
        Returns dict(args=check args, workspace=tensor) for further launches, or None on failure."""
        try:
            row["specs"][name] = spec
            self.fj.kernel(spec)  # compiles or loads: never inside a capture
            a_check = make_args(0, True)
            a_time = [make_args(layer, False) for layer in range(layers)]
            ws = self.fj.alloc_workspace(spec, a_check, *a_time)
            nbytes = a_check.workspace_bytes
            row["workspace"][name] = nbytes
            if is_split(spec):  # the size DECODE in flashjit.h describes, for comparison (informational)
                formula = a_check.max_splits * a_check.total_q * a_check.heads_q * (row["shape"]["d"] + 1) * 4
                row["workspace"][name + " (header formula)"] = formula
                if nbytes != formula:
                    row["notes"].append(f"{name}: workspace_size {nbytes} bytes, the header's formula {formula}")
            if ws is not None:
                ws.fill_(255)  # NaN floats: partials read but never written show up in O
                ws[:counter_bytes(nbytes, formula if is_split(spec) else 0)].zero_()
            self.fj.check_metadata(spec, a_check)
            poison()
            self.fj.launch(spec, a_check)
            torch.cuda.synchronize()
            chk = row["checks"][name] = self.compare(samples, get, True)
            self.print_check(name, chk)
            if not chk["ok"]:
                self.fail(row, f"{name}: check failed")
            row["kernels"][name] = self.fj.launch_spec(spec, a_time[0])
            launchers = [self.fj.launcher(spec, a, (ws,)) for a in a_time]
            calls = [launchers[i % layers] for i in range(self.opts.per_graph)]

            def after(g):
                poison_o()
                g.replay()
                torch.cuda.synchronize()
                return self.compare(samples, get, False)
            ms, post = time_graph(calls, self.opts.reps, after)
            row["impls"][name] = self.timing(ms, kv_bytes)
            row["checks"][name + " (graph)"] = post
            if not post["ok"]:
                self.print_check(name + " after a replay", post)
                self.fail(row, f"{name}: O after a graph replay differs from the reference")
            p = row["impls"][name]
            ws_text = f", workspace {nbytes / 1e6:.2f} MB" if nbytes else ""
            print(f"    {name:<20} {p['us']:10.2f} us  {p['tbps']:6.3f} TB/s  {p['pct_bw']:5.1f} % BW{ws_text}  "
                  f"[{row['kernels'][name]}]", flush=True)
            return dict(args=a_check, workspace=ws, time_args=a_time)
        except Exception as e:  # noqa: BLE001
            row["impls"][name] = {"error": short(e, 600)}
            self.fail(row, f"{name}: {short(e)}")
            print(f"    {name}: FAILED {short(e, 600)}", flush=True)
            if os.environ.get("DECODE_PEERS_TRACEBACK"):
                traceback.print_exc()
            return None

    # -- peers --
    def peer(self, row, name, variants, samples, kv_bytes):
        """variants = [(label, build)] or [(label, build, fallback)], build() -> (calls per layer, poison, get);
        a fallback is tried only where no variant before it matched. Each is built, run once on
        poisoned outputs and checked against the reference; one that matches is timed. --peer-variants fastest
        (default): every variant that matches is timed and the fastest is the peer's figure; first: the first
        that matches. Every variant's outcome is kept in row["variants_tried"]."""
        fastest = self.opts.peer_variants == "fastest"
        tried = row["variants_tried"].setdefault(name, {})
        best, last_check, last_error = None, None, None
        for label, build, *fallback in variants:
            if fallback and fallback[0] and best is not None:
                tried[label] = "not tried (a variant before it matched)"
                continue
            title = f"{name} ({label})"
            fns = poison = get = None
            try:
                fns, poison, get = build()
                poison()
                fns[0]()
                torch.cuda.synchronize()
                chk = self.compare(samples, get, False)
                self.print_check(title, chk)
                if not chk["ok"]:
                    tried[label] = f"differs from the reference (O err {chk['o_err']:.2e})"
                    last_check = chk
                    continue
                calls = [fns[i % len(fns)] for i in range(self.opts.per_graph)]
                ms, _ = time_graph(calls, self.opts.reps)
                p = self.timing(ms, kv_bytes)
                tried[label] = p["us"]
                print(f"    {name:<20} {p['us']:10.2f} us  {p['tbps']:6.3f} TB/s  {p['pct_bw']:5.1f} % BW  [{label}]",
                      flush=True)
                if best is None or p["us"] < best[0]["us"]:
                    best = (p, label, chk)
                if not fastest:
                    break
            except Exception as e:  # noqa: BLE001
                tried[label] = short(e, 400)
                last_error = e
                print(f"    {title}: {short(e, 400)}", flush=True)
                if os.environ.get("DECODE_PEERS_TRACEBACK"):
                    traceback.print_exc()
            finally:
                fns = poison = get = None  # a variant's copies go before the next one is built
                torch.cuda.synchronize()
        if best is not None:
            row["impls"][name], row["variants"][name], row["checks"][name] = best
            if fastest and len([v for v in tried.values() if isinstance(v, float)]) > 1:
                print(f"    {name}: fastest variant {best[1]}", flush=True)
        else:
            if last_check is not None:
                row["checks"][name] = last_check
            row["impls"][name] = {"error": short(last_error, 600) if last_error is not None and last_check is None
                                  else "no variant matched the reference"}

    def sdpa_variants(self, backend_name, t, causal, scale):
        """torch SDPA peers (backend 'cudnn' or 'flash') on the cell's tensors t."""
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = SDPBackend.CUDNN_ATTENTION if backend_name == "cudnn" else SDPBackend.FLASH_ATTENTION
        b, sq, sk, hq, hkv, d, layers = t["b"], t["sq"], t["sk"], t["hq"], t["hkv"], t["d"], t["layers"]
        group = hq // hkv
        kv_all = 2 * layers * b * sk * hkv * d * ELEM
        cap = self.opts.max_copy_gb * 1e9
        layouts = [("enable_gqa, strided views", "view")]
        if kv_all <= cap:
            layouts.append(("enable_gqa, BHSD copy", "copy"))
        if group > 1 and kv_all * group <= cap:
            layouts.append(("repeat_interleave", "repeat"))
        masks = [("", "none")]
        if causal:
            masks = [("is_causal", "is_causal")] + ([("bottom-right mask", "mask")] if backend_name == "cudnn" else [])

        def build_for(layout, mask_mode):
            def build():
                held = {}
                mask = bottom_right_mask(sq, sk) if mask_mode == "mask" else None
                views = []
                for layer in range(layers):
                    qt = t["q"][layer].view(b, sq, hq, d).transpose(1, 2)
                    kt = t["k"][layer][:, :sk].transpose(1, 2)
                    vt = t["v"][layer][:, :sk].transpose(1, 2)
                    if layout == "copy":
                        kt, vt = kt.contiguous(), vt.contiguous()
                    elif layout == "repeat":
                        kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
                    views.append((qt, kt, vt))
                kw = dict(scale=scale, enable_gqa=group > 1 and layout != "repeat")
                if mask_mode == "is_causal":
                    kw["is_causal"] = True
                elif mask_mode == "mask":
                    kw["attn_mask"] = mask

                def make(layer):
                    qt, kt, vt = views[layer]

                    def fn():
                        with sdpa_kernel([backend]):
                            held[layer] = F.scaled_dot_product_attention(qt, kt, vt, **kw)
                    fn.held = (views, mask)
                    return fn
                fns = [make(layer) for layer in range(layers)]
                return fns, held.clear, lambda i, r: (held[0][i][:, r].transpose(0, 1), None)
            return build

        variants = []
        for layout_label, layout in layouts:
            for mask_label, mask_mode in masks:
                label = f"sdpa {backend_name}, {layout_label}" + (f", {mask_label}" if mask_label else "")
                variants.append((label, build_for(layout, mask_mode), layout == "repeat"))
        return variants

    def fa2_varlen_variant(self, t, causal, scale):
        """FlashAttention-2 varlen (aten._flash_attention_forward) on the packed Q and the K/V storage."""
        b, sq, sk, hkv, d, layers, sk_alloc = t["b"], t["sq"], t["sk"], t["hkv"], t["d"], t["layers"], t["sk_alloc"]

        def build():
            held = {}
            cu_k = i32(list(range(0, b * sk_alloc + 1, sk_alloc)))
            extra = {} if sk_alloc == sk else dict(seqused_k=t["used"])

            def make(layer):
                q = t["q"][layer]
                k, v = t["k"][layer].view(b * sk_alloc, hkv, d), t["v"][layer].view(b * sk_alloc, hkv, d)

                def fn():
                    held[layer] = torch.ops.aten._flash_attention_forward(
                        q, k, v, t["cu_q"], cu_k, sq, sk, 0.0, causal, False, scale=scale, **extra)[0]
                fn.held = cu_k
                return fn
            fns = [make(layer) for layer in range(layers)]
            return fns, held.clear, lambda i, r: (held[0][i * sq + r], None)
        return ("fa2 varlen, aten._flash_attention_forward" + (", causal" if causal else ""), build)

    def cudnn_dense_variant(self, t, causal, scale):
        b, sq, sk, hq, d, layers = t["b"], t["sq"], t["sk"], t["hq"], t["d"], t["layers"]

        def build():
            o = torch.empty(layers, b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
            q4 = [t["q"][layer].view(b, sq, hq, d) for layer in range(layers)]
            bind = self.cudnn().dense(q4[0], t["k"][0][:, :sk], o[0], t["seq_q"], t["used"], causal, scale)
            fns = [bind(q4[layer], t["k"][layer][:, :sk], t["v"][layer][:, :sk], o[layer]) for layer in range(layers)]
            for fn in fns:
                fn.held = (fn.held, o)
            return fns, lambda: o.fill_(float("nan")), lambda i, r: (o[0][i][r], None)
        return ("cudnn frontend sdpa" + (", bottom-right" if causal else ""), build)

    def cudnn_paged_variants(self, t, pools, table, causal, scale):
        b, sq, sk, hq, d, layers = t["b"], t["sq"], t["sk"], t["hq"], t["d"], t["layers"]

        def build_for(copy):
            def build():
                o = torch.empty(layers, b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
                q4 = [t["q"][layer].view(b, sq, hq, d) for layer in range(layers)]
                kv = pools
                if copy:  # HND pages, the layout cuDNN's samples use, seen through the same NHD-shaped view
                    kv = [tuple(p.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3) for p in lp) for lp in pools]
                bind = self.cudnn().paged(q4[0], kv[0][0], o[0], table, t["seq_q"], t["used"], sk, causal, scale)
                fns = [bind(q4[layer], kv[layer][0], kv[layer][1], o[layer]) for layer in range(layers)]
                for fn in fns:
                    fn.held = (fn.held, o, kv)
                return fns, lambda: o.fill_(float("nan")), lambda i, r: (o[0][i][r], None)
            return build
        variants = [("cudnn frontend paged, NHD pools as strided containers", build_for(False))]
        if 2 * layers * b * t["sk_alloc"] * t["hkv"] * d * ELEM <= 4e9:
            variants.append(("cudnn frontend paged, HND copy of the pools", build_for(True)))
        return variants

    # -- a cell --
    def run(self, c):
        o = self.opts
        layers = layers_for(c, o.per_graph, o.rotate_mb)
        row = new_row(c, layers)
        if c["skip"]:
            row["skipped"] = c["skip"]
            print(f"{c['id']}: skipped ({c['skip']})", flush=True)
            return row
        b, sk, hkv, d = c["b"], c["sk"], c["hkv"], c["d"]
        sk_alloc = round_up(sk, KEY_ALIGN)
        scale = float32(1.0 / math.sqrt(d))
        kv_bytes = c["kv_bytes"]
        print(f"{c['id']}: K/V {kv_bytes / 1e6:.1f} MB, {layers} layer(s) a graph", flush=True)
        try:
            k_all, v_all = self.storage.get(d, hkv, b, sk_alloc, layers)
        except MemoryError as e:
            row["skipped"] = str(e)
            print(f"    skipped: {e}", flush=True)
            return row
        try:
            self._run(c, row, layers, k_all, v_all, sk_alloc, scale)
        except Exception as e:  # noqa: BLE001 -- a cell that breaks is reported; the next one runs
            traceback.print_exc()
            row["error"] = short(e, 600)
            self.fail(row, f"cell: {short(e)}")
        self.summarise(row)
        torch.cuda.synchronize()
        return row

    def _run(self, c, row, layers, k_all, v_all, sk_alloc, scale):
        o = self.opts
        b, sq, sk, hq, hkv, d = c["b"], c["sq"], c["sk"], c["hq"], c["hkv"], c["d"]
        kv_bytes = c["kv_bytes"]
        total_q = b * sq
        q = torch.randn(layers, total_q, hq, d, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(q)
        lse = torch.empty(hq, total_q, device="cuda", dtype=torch.float32)
        cu_q = list(range(0, total_q + 1, sq))
        t = dict(b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, layers=layers, sk_alloc=sk_alloc, q=q, k=k_all, v=v_all,
                 cu_q=i32(cu_q), used=i32([sk] * b), seq_q=i32([sq] * b))
        picks = sorted({0, b - 1, self.rng.randrange(b)})
        causal = c["causal"]

        def poison():
            out[0].fill_(float("nan"))
            lse.fill_(float("nan"))

        def poison_o():
            out[0].fill_(float("nan"))

        def get(i, r):
            return out[0][i * sq + r], lse[:, i * sq + r].t()

        def contiguous_samples(qq, nq):
            return self.references([(i, qq[0][i * nq:(i + 1) * nq], k_all[0][i, :sk], v_all[0][i, :sk]) for i in picks],
                                   causal and nq > 1, scale)

        def contig_args(spec, qq, oo, nq, cu, split_keys=0):
            def make(layer, with_lse):
                return engine_args(qq[layer], k_all[layer][:, :sk], v_all[layer][:, :sk], oo[layer],
                                   lse if with_lse else None, seqlen_q=nq, seqlen_k=sk, cu_seqlens_q=cu,
                                   seqused_k=t["used"], scale=scale, flags=self.flags,
                                   **self.split_fields(spec, split_keys))
            return make

        base_spec = build_spec(d, extra=o.spec_extra)
        group = c["group"]

        if group == "paged":
            page = c["page"]
            per_seq = sk_alloc // page
            pages = b * per_seq
            perm = torch.randperm(pages, generator=torch.Generator().manual_seed(o.seed * 1000 + page))
            table = perm.to(device="cuda", dtype=torch.int32).view(b, per_seq).contiguous()
            pools = [(k_all[layer].view(pages, page, hkv, d), v_all[layer].view(pages, page, hkv, d)) for layer in range(layers)]
            gathered = []
            for i in picks:
                idx = table[i][:-(-sk // page)].long()
                gathered.append((i, q[0][i * sq:(i + 1) * sq], pools[0][0][idx].reshape(-1, hkv, d)[:sk],
                                 pools[0][1][idx].reshape(-1, hkv, d)[:sk]))
            samples = self.references(gathered, False, scale)
            spec = build_spec(d, paged=True, extra=o.spec_extra)

            def paged_args(layer, with_lse):
                return engine_args(q[layer], pools[layer][0], pools[layer][1], out[layer], lse if with_lse else None,
                                   seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=t["cu_q"], seqused_k=t["used"],
                                   block_table=table, scale=scale, flags=self.flags, **self.split_fields(spec))
            self.ours(row, "flashjit", spec, paged_args, layers, samples, get, poison, poison_o, kv_bytes)
            self.ours(row, "flashjit_contig", base_spec, contig_args(base_spec, q, out, sq, t["cu_q"]), layers,
                      contiguous_samples(q, sq), get, poison, poison_o, kv_bytes)
            if not o.no_peers:
                self.peer(row, "cudnn_paged", self.cudnn_paged_variants(t, pools, table, False, scale), samples, kv_bytes)
            return

        samples = contiguous_samples(q, sq)
        if group == "invariant":
            self.invariant(c, row, t, layers, samples, get, poison, poison_o, contig_args, base_spec, out, lse)
            return

        spec = build_spec(d, causal=causal, extra=o.spec_extra)
        self.ours(row, "flashjit", spec, contig_args(spec, q, out, sq, t["cu_q"]), layers, samples, get, poison,
                  poison_o, kv_bytes)
        if group == "spec":  # flashjit's one-query time on the same K/V (the decode spec)
            q1 = torch.randn(layers, b, hq, d, device="cuda", dtype=torch.bfloat16)
            o1 = torch.empty_like(q1)
            lse1 = torch.empty(hq, b, device="cuda", dtype=torch.float32)
            cu1 = i32(list(range(b + 1)))
            samples1 = self.references([(i, q1[0][i:i + 1], k_all[0][i, :sk], v_all[0][i, :sk]) for i in picks], False, scale)

            def make1(layer, with_lse):
                return engine_args(q1[layer], k_all[layer][:, :sk], v_all[layer][:, :sk], o1[layer],
                                   lse1 if with_lse else None, seqlen_q=1, seqlen_k=sk, cu_seqlens_q=cu1,
                                   seqused_k=t["used"], scale=scale, flags=self.flags, **self.split_fields(base_spec))

            def poison1():
                o1[0].fill_(float("nan"))
                lse1.fill_(float("nan"))
            self.ours(row, "flashjit_q1", base_spec, make1, layers, samples1,
                      lambda i, r: (o1[0][i + r], lse1[:, i + r].t()), poison1, lambda: o1[0].fill_(float("nan")), kv_bytes)
        if o.no_peers:
            return
        cudnn_variants = self.sdpa_variants("cudnn", t, causal, scale)
        if causal:  # where torch's cuDNN path does not align the mask bottom-right
            cudnn_variants.append(self.cudnn_dense_variant(t, causal, scale))
        self.peer(row, "cudnn", cudnn_variants, samples, kv_bytes)
        self.peer(row, "fa2", self.sdpa_variants("flash", t, causal, scale) + [self.fa2_varlen_variant(t, causal, scale)],
                  samples, kv_bytes)

    def invariant(self, c, row, t, layers, samples, get, poison, poison_o, contig_args, spec, out, lse):
        """The batch-invariant mode (split_keys) against the default mode, and bitwise invariance of sequence 0."""
        o = self.opts
        sq, sk = t["sq"], t["sk"]
        kv_bytes = c["kv_bytes"]
        if not is_split(spec):
            row["skipped"] = "spec without split_kv=1"
            return
        wanted = c["split_keys"]
        probe = contig_args(spec, t["q"], out, sq, t["cu_q"])(0, False)
        probe_ws = self.fj.alloc_workspace(spec, probe)  # launch_spec checks the arguments as a launch would
        block_n = self.block_n(spec, probe)
        del probe, probe_ws
        split_keys = round_up(wanted, block_n) if block_n else wanted
        row["shape"]["split_keys_used"] = split_keys
        row["shape"]["block_n"] = block_n
        if split_keys != wanted:
            row["notes"].append(f"split_keys {wanted} rounded up to {split_keys} (a multiple of block_n {block_n})")
            print(f"    split_keys {wanted} -> {split_keys}: a multiple of the kernel's block_n {block_n}", flush=True)
        if sk > o.max_splits * split_keys:
            row["skipped"] = f"{sk} keys > max_splits {o.max_splits} x split_keys {split_keys}"
            print(f"    skipped: {row['skipped']}", flush=True)
            return
        inv = self.ours(row, "flashjit", spec, contig_args(spec, t["q"], out, sq, t["cu_q"], split_keys), layers,
                        samples, get, poison, poison_o, kv_bytes)
        dflt = self.ours(row, "flashjit_default", spec, contig_args(spec, t["q"], out, sq, t["cu_q"]), layers, samples,
                         get, poison, poison_o, kv_bytes)
        for name, state, must in (("flashjit", inv, True), ("flashjit_default", dflt, False)):
            if state is None:
                continue
            try:
                result = self.bitwise(spec, t, state, out, lse, split_keys if must else 0)
            except Exception as e:  # noqa: BLE001
                result = {"error": short(e)}
            row["bitwise"][name] = result
            same = result.get("same")
            print(f"    bitwise {name:<18} sequence 0 alone / in the batch / others' lengths changed: "
                  f"{result.get('detail', result.get('error'))}{'' if must else '  (informational)'}", flush=True)
            if must and not same:
                self.fail(row, f"{name}: batch-invariant mode not bitwise invariant: {result.get('detail', result.get('error'))}")

    def block_n(self, spec, args):
        """block_n of the kernel these arguments run (its resolved spec), else of the handle's own kernel."""
        try:
            m = re.search(r"(?:^|,)block_n=(\d+)", self.fj.launch_spec(spec, args))
            if m:
                return int(m.group(1))
        except Exception:  # noqa: BLE001
            pass
        try:
            return int(self.fj.describe(spec)["block_n"])
        except Exception:  # noqa: BLE001
            return 0

    def bitwise(self, spec, t, state, out, lse, split_keys):
        """Sequence 0's O and LSE (layer 0) from the batch, alone (batch 1, same pointers), and with every other
        sequence's length changed: bitwise equal?"""
        b, sq, sk = t["b"], t["sq"], t["sk"]
        args, ws = state["args"], state["workspace"]

        def launch(a):
            out[0].fill_(float("nan"))
            lse.fill_(float("nan"))
            self.fj.launch(spec, a)
            torch.cuda.synchronize()
            return out[0][:sq].clone(), lse[:, :sq].clone()

        in_batch = launch(args)
        # batch 1 on the same pointers; its LSE is [heads_q, sq] contiguous (its own tensor: the batch's rows are not)
        lse1 = torch.empty(t["hq"], sq, device="cuda", dtype=torch.float32)
        cu1 = i32([0, sq])  # alive until the launch below: args hold its address only
        alone_args = engine_args(t["q"][0][:sq], t["k"][0][:1, :sk], t["v"][0][:1, :sk], out[0][:sq], lse1,
                                 seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=cu1, seqused_k=t["used"][:1],
                                 scale=args.softmax_scale, flags=args.flags, max_splits=args.max_splits,
                                 split_keys=split_keys)
        if ws is not None:
            need = self.fj.workspace_size(spec, alone_args)
            assert need <= args.workspace_bytes, f"batch 1 needs {need} bytes of workspace, more than the batch's"
            alone_args.workspace, alone_args.workspace_bytes = args.workspace, args.workspace_bytes
        out[0].fill_(float("nan"))
        lse1.fill_(float("nan"))
        self.fj.launch(spec, alone_args)
        torch.cuda.synchronize()
        alone = (out[0][:sq].clone(), lse1.clone())
        results = {"alone": bool(torch.equal(alone[0], in_batch[0]) and torch.equal(alone[1], in_batch[1]))}
        if b > 1:
            used = t["used"]
            try:
                used[1:] = max(1, sk // 3)
                changed = launch(args)
            finally:
                used.fill_(sk)
                torch.cuda.synchronize()
            results["others_changed"] = bool(torch.equal(changed[0], in_batch[0]) and torch.equal(changed[1], in_batch[1]))
        same = all(results.values())
        detail = ", ".join(f"{k} {'same' if v else 'DIFFERS'}" for k, v in results.items())
        return dict(same=same, detail=detail, **results)

    # -- ratios --
    def summarise(self, row):
        imp, chk = row["impls"], row["checks"]

        def us(name):
            p = imp.get(name, {})
            return p.get("us") if chk.get(name, {}).get("ok") else None

        ours = us("flashjit")
        best = None
        for name in PEERS:
            u = us(name)
            if u is not None and (best is None or u < best[1]):
                best = (name, u)
        r = row["ratios"]
        r["best_peer"] = best[0] if best else None
        r["x_best_peer"] = round(best[1] / ours, 3) if best and ours else None
        cud = us("cudnn_paged" if row["group"] == "paged" else "cudnn")
        r["x_cudnn"] = round(cud / ours, 3) if cud and ours else None
        fa2 = us("fa2")
        r["x_fa2"] = round(fa2 / ours, 3) if fa2 and ours else None
        if row["group"] == "spec":
            q1 = us("flashjit_q1")
            r["over_q1"] = round(ours / q1, 3) if ours and q1 else None
        if row["group"] == "paged":
            contig = us("flashjit_contig")
            r["contig_over_paged"] = round(contig / ours, 3) if ours and contig else None
        if row["group"] == "invariant":
            dflt = us("flashjit_default")
            r["invariant_cost"] = round(ours / dflt, 3) if ours and dflt else None
        parts = [f"{k} {v}" for k, v in r.items() if v is not None]
        if parts:
            print("    " + "  ".join(parts), flush=True)


# ---- the summary ---------------------------------------------------------------------------------------------
def fmt(x, spec, width):
    return f"{x:{width}{spec}}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def check_mark(row):
    names = [n for n in row["checks"] if n.startswith("flashjit")]
    if not names:
        return "-"
    bad = [n for n in names if not row["checks"][n].get("ok")]
    bad += [f"bitwise {n}" for n, v in row["bitwise"].items() if n == "flashjit" and not v.get("same")]
    return "ok" if not bad else "FAIL " + ",".join(bad)


def table(rows):
    lines = [f"{'cell':<44} {'K/V MB':>9} {'us':>9} {'TB/s':>6} {'%BW':>5} {'best peer':>12} {'us':>9} "
             f"{'x best':>6} {'x cuDNN':>7}  {'extra':<22} check"]
    for r in rows:
        if r["skipped"]:
            lines.append(f"{r['id']:<44} {r['kv_bytes'] / 1e6:9.1f}  skipped: {r['skipped']}")
            continue
        p = r["impls"].get("flashjit", {})
        ratios = r["ratios"]
        best = ratios.get("best_peer")
        best_us = r["impls"].get(best, {}).get("us") if best else None
        extra = ""
        if r["group"] == "spec":
            extra = f"/q1 {fmt(ratios.get('over_q1'), '.3f', 5).strip()}"
        elif r["group"] == "paged":
            extra = f"contig/paged {fmt(ratios.get('contig_over_paged'), '.3f', 5).strip()}"
        elif r["group"] == "invariant":
            bw = r["bitwise"].get("flashjit", {})
            extra = (f"cost {fmt(ratios.get('invariant_cost'), '.3f', 5).strip()} "
                     f"bitwise {'yes' if bw.get('same') else ('NO' if bw else '-')}")
        lines.append(f"{r['id']:<44} {r['kv_bytes'] / 1e6:9.1f} {fmt(p.get('us'), '.1f', 9)} {fmt(p.get('tbps'), '.2f', 6)} "
                     f"{fmt(p.get('pct_bw'), '.1f', 5)} {best or '-':>12} {fmt(best_us, '.1f', 9)} "
                     f"{fmt(ratios.get('x_best_peer'), '.2f', 6)} {fmt(ratios.get('x_cudnn'), '.2f', 7)}  {extra:<22} "
                     f"{check_mark(r)}")
    return lines


def targets(rows):
    """The issue's Performance targets over the cells measured; each line names the worst cell."""
    ok_rows = [r for r in rows if not r["skipped"] and r["checks"].get("flashjit", {}).get("ok")]
    out = []

    def pct(r):
        return r["impls"].get("flashjit", {}).get("pct_bw")

    def line(what, items, goal, lowest=True, unit=""):
        items = [(v, r["id"]) for v, r in items if v is not None]
        if not items:
            out.append(f"  {what}: no figure")
            return
        worst = min(items) if lowest else max(items)
        met = worst[0] >= goal if lowest else worst[0] <= goal
        out.append(f"  {what}: {'min' if lowest else 'max'} {worst[0]:.3f}{unit} ({worst[1]}; {len(items)} cells) "
                   f"target {'>=' if lowest else '<='} {goal}{unit}: {'met' if met else 'MISSED'}")

    big = [r for r in ok_rows if r["group"] in ("decode", "dims") and r["kv_bytes"] >= 256e6]
    line("contiguous decode cells >= 256 MB of K/V: % of read bandwidth", [(pct(r), r) for r in big], 90.0, unit=" %")
    line("contiguous decode cells >= 256 MB of K/V: x cuDNN (torch SDPA)", [(r["ratios"].get("x_cudnn"), r) for r in big], 1.0)
    paged_big = [r for r in ok_rows if r["group"] == "paged" and r["kv_bytes"] >= 256e6]
    line("paged cells >= 256 MB of K/V: % of read bandwidth", [(pct(r), r) for r in paged_big], 90.0, unit=" %")
    line("paged cells >= 256 MB of K/V: x cuDNN paged (frontend)", [(r["ratios"].get("x_cudnn"), r) for r in paged_big], 1.0)
    b1 = [r for r in ok_rows if r["group"] in ("decode", "dims") and r["shape"]["b"] == 1 and r["shape"]["hq"] == 32
          and r["shape"]["hkv"] == 8 and r["shape"]["sk"] >= 32 * K1]
    line("batch 1, 32/8 heads, 32k-128k keys: % of read bandwidth", [(pct(r), r) for r in b1], 80.0, unit=" %")
    small = [r for r in ok_rows if r["group"] == "decode" and r["shape"]["b"] <= 4 and r["shape"]["sk"] <= 4 * K1]
    line("small cells (batch 1-4, 1k-4k keys): cuDNN us / flashjit us", [(r["ratios"].get("x_cudnn"), r) for r in small], 1.0)
    spec = [r for r in ok_rows if r["group"] == "spec"]
    line("speculative (4, 16 queries, causal): time / one-query time", [(r["ratios"].get("over_q1"), r) for r in spec],
         1.10, lowest=False)
    paged = [r for r in ok_rows if r["group"] == "paged"]
    line("paged (16, 64): contiguous time / paged time", [(r["ratios"].get("contig_over_paged"), r) for r in paged], 0.95)
    inv = [r for r in rows if r["group"] == "invariant" and not r["skipped"]]
    costs = [(r["ratios"].get("invariant_cost"), r["id"]) for r in inv if r["ratios"].get("invariant_cost")]
    if costs:
        bit = all(r["bitwise"].get("flashjit", {}).get("same") for r in inv)
        out.append(f"  batch-invariant mode: cost {min(costs)[0]:.3f}..{max(costs)[0]:.3f} x the default mode "
                   f"(worst {max(costs)[1]}); bitwise invariant: {'yes' if bit else 'NO'} (reported; no target)")
    elif inv:
        out.append("  batch-invariant mode: no figure")
    return out


# ---- main ------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    first, _, rest = __doc__.partition("\n\n")
    ap = argparse.ArgumentParser(description=first, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    ap.add_argument("--lib", default=None, help="path to libflashjit.so (default: build/libflashjit.so if there)")
    ap.add_argument("--out", default="decode.json", help="JSON results (default decode.json)")
    ap.add_argument("--cells", default="", help="comma-separated groups (" + ",".join(GROUPS) + ") and fnmatch patterns "
                    "on cell ids, e.g. 'decode/d128/h32-8/b8/*,paged'; default all")
    ap.add_argument("--smoke", action="store_true", help="tiny cells of every group (seconds)")
    ap.add_argument("--dry-run", action="store_true", help="list the cells and their byte sizes and exit (no torch)")
    ap.add_argument("--reps", type=int, default=None, help="graph replays a kernel, median (default 10; smoke 3)")
    ap.add_argument("--per-graph", type=int, default=None, help="calls captured per graph (default 20; smoke 3)")
    ap.add_argument("--rotate-mb", type=float, default=512.0,
                    help="calls of a graph cycle through copies of Q/K/V ('layers', at most --per-graph) until the copies "
                         "hold this many MB; 0: every call reads the same K/V (default 512)")
    ap.add_argument("--max-splits", type=int, default=64, help="args.max_splits (default 64)")
    ap.add_argument("--split-keys", type=int, default=None,
                    help="args.split_keys of the invariant cells (default 4096; smoke 256), rounded up to block_n")
    ap.add_argument("--spec-extra", default="", help="key=value,... merged into every flashjit spec (key= removes a key)")
    ap.add_argument("--max-kv-gb", type=float, default=40.0, help="skip cells whose K/V exceed this many GB (default 40)")
    ap.add_argument("--max-copy-gb", type=float, default=16.0,
                    help="peers' K/V copies (BHSD copy, repeat_interleave) only within this many GB (default 16)")
    ap.add_argument("--bw-gb", type=float, default=4.0, help="GB of the tensor the read bandwidth is measured on (default 4)")
    ap.add_argument("--no-peers", action="store_true", help="flashjit only")
    ap.add_argument("--kv-layout", choices=("bshd", "bhsd"), default="bshd",
                    help="contiguous K/V storage: [b, s, h, d] (default; engines' NHD) or [b, h, s, d] (each head's keys "
                         "contiguous), passed as strided [b, s, h, d] views; paged cells need bshd")
    ap.add_argument("--peer-variants", choices=("fastest", "first"), default="fastest",
                    help="time every variant of a peer that matches the reference and keep the fastest (default), or "
                         "only the first that matches")
    ap.add_argument("--no-pdl", action="store_true", help="launch flashjit without FLASHJIT_ATTENTION_FLAG_PDL")
    ap.add_argument("--seed", type=int, default=24)
    opts = ap.parse_args(argv)
    cfg = SMOKE if opts.smoke else FULL
    opts.reps = opts.reps or cfg["reps"]
    opts.per_graph = opts.per_graph or cfg["per_graph"]
    opts.split_keys = opts.split_keys or cfg["split_keys"]
    if not 1 <= opts.max_splits <= 128:
        ap.error("--max-splits: 1..128 (DECODE in flashjit.h)")
    if opts.reps < 1 or opts.per_graph < 1:
        ap.error("--reps and --per-graph: at least 1")
    opts.patterns = [p.strip() for p in opts.cells.split(",") if p.strip()]
    return opts, cfg


def main(argv=None):
    global torch, F
    opts, cfg = parse_args(argv)
    cells = select_cells(make_cells(cfg, opts.split_keys), opts.patterns)
    if not cells:
        print(f"no cell matches --cells {opts.cells!r}")
        return 2
    mark_skips(cells, opts.max_kv_gb, opts.max_splits, opts.spec_extra, opts.kv_layout)
    if opts.dry_run:
        print(f"specs: {build_spec(128, extra=opts.spec_extra)} (+,paged=1 paged; +,causal=1 spec); "
              f"max_splits {opts.max_splits}, split_keys {opts.split_keys}, reps {opts.reps}, per graph {opts.per_graph}")
        print_cells(cells, opts.max_splits, opts.per_graph, opts.rotate_mb, is_split(build_spec(128, extra=opts.spec_extra)))
        return 0

    try:
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError as e:
        print(f"PyTorch is needed to run the cells ({e}); --dry-run lists them without it")
        return 1
    torch, F = torch_module, functional
    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 1
    import warnings
    warnings.simplefilter("once")
    torch.manual_seed(opts.seed)
    lib = opts.lib or default_lib()
    fj = Flashjit(lib, torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {lib} on {torch.cuda.get_device_name()} "
          f"({props.multi_processor_count} SMs; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}); "
          f"reps {opts.reps}, per graph {opts.per_graph}, max_splits {opts.max_splits}, PDL {'off' if opts.no_pdl else 'on'}"
          f"{', smoke' if opts.smoke else ''}", flush=True)
    bw_start = measure_bandwidth(opts.bw_gb, opts.reps)
    print(f"read bandwidth: {bw_start['gbps']:.1f} GB/s (torch.sum over {bw_start['bytes'] / 1e9:.2f} GB of bf16, "
          f"{bw_start['ms'] * 1e3:.1f} us a sum; every % BW below is of this figure)", flush=True)

    bench = Bench(fj, opts, bw_start["gbps"])
    rows = []
    t0 = time.time()
    for c in cells:
        rows.append(bench.run(c))
    bench.storage.release()
    bw_end = measure_bandwidth(opts.bw_gb, opts.reps)
    print(f"read bandwidth after the cells: {bw_end['gbps']:.1f} GB/s ({100.0 * bw_end['gbps'] / bw_start['gbps']:.1f} % "
          f"of the first figure); cells took {time.time() - t0:.0f} s", flush=True)

    print()
    print(f"decode, bf16: flashjit against its peers; read bandwidth {bw_start['gbps']:.1f} GB/s; us per call "
          f"(graph of {opts.per_graph}), x = peer us / flashjit us")
    print("\n".join(table(rows)))
    tl = targets(rows)
    print("targets (issue 24):")
    print("\n".join(tl) if tl else "  none measured")
    cud = bench._cudnn if not isinstance(bench._cudnn, Exception) else None
    with open(opts.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "sms": props.multi_processor_count, "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "cudnn_frontend": getattr(cud, "frontend", None),
                   "cudnn_backend": getattr(cud, "backend", None), "flashjit": version, "lib": lib,
                   "bandwidth": {"start": bw_start, "end": bw_end, "reference_gbps": bw_start["gbps"]},
                   "options": {k: v for k, v in vars(opts).items() if k != "patterns"},
                   "cells": rows, "targets": tl, "failed": bench.failed}, f, indent=1)
    print(f"wrote {opts.out}")
    fj.close()
    if bench.failed:
        print("flashjit failures:\n  " + "\n  ".join(bench.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
