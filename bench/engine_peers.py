#!/usr/bin/env python3
"""Engine-shaped attention (issue 23): flashjit's varlen and paged kernels against their peers, in one
process, on the same inputs (bf16, head dim 128, 32 query heads / 8 KV heads, causal, bottom-right aligned).

  python3 bench/engine_peers.py --lib build/libflashjit.so --out engine.json [--cases ragged,equal,chunked,decode]
                                [--reps 10] [--per-graph 10] [--smoke]

Cases:
  ragged   packed prefill: seeded log-uniform sequence lengths in 64..16384 summing to 65536 tokens
           (queries = keys per sequence). flashjit "...,varlen=1" (packed K/V, cu_seqlens_k) against
           FlashAttention-2 varlen (torch.ops.aten._flash_attention_forward with cumulative lengths) and
           cuDNN's ragged SDPA (cudnn frontend: ragged offsets on Q/K/V/O, padding mask, causal).
  equal    varlen with equal lengths against flashjit's dense kernel on the same tensors (b x s: 4 x 4096,
           16 x 1024, 2 x 8192): the cost of the varlen path where it buys nothing.
  chunked  chunked prefill against a paged cache: 512 or 2048 queries a sequence against 8192 or 32768
           keys (8 sequences at 512, 4 at 2048), page sizes 1, 16, 64, 256 with a shuffled page table,
           "...,varlen=1,paged=1" against flashjit's contiguous kernels on the same shape (labelled
           contig: varlen with K/V [b, s_k, h, d] and seqused_k; dense: the dense kernel with seqlen_q <
           seqlen_k), cuDNN's paged SDPA (containers [pages, h, page_size, d]: first a strided view of the
           same NHD pools, else an HND copy) and, at page 256 only, FlashAttention-2 paged (block_table).
  decode   batch 8, 64, 128 with 1, 4, 16 queries against 4096 and 32768 keys, page 16: microseconds a
           call and K/V bytes read per second (bytes of the K and V each sequence's keys occupy / time);
           cuDNN's paged SDPA beside where it takes page 16 (--no-decode-peers to skip it).

Timings: graph = replay of a CUDA graph of --per-graph calls (kernel time), idle = one call from an idle
stream (CUDA events around it: the host's launch cost included); medians of --reps. TFLOP/s count useful
FLOPs only: 4 x d x heads_q x visible (query, key) pairs per sequence. flashjit is timed without LSE.

Every kernel is first checked on the same inputs: outputs poisoned (NaN), one launch, O (and flashjit's
LSE) on sampled query rows of a few sequences against a float64 torch reference (attention_ctypes.
reference_rows); a flashjit check that misses the bound (bf16 O rel-L2 6e-3, LSE 1e-4) makes the exit
status 1, so a fast wrong kernel cannot pass; a peer's is reported beside its timing. A peer that fails
(API mismatch, unsupported shape) prints why and the others go on. Prints each result as it comes, a
short table per case last, and writes everything to --out (JSON). --smoke runs every case at a tiny size.
ENGINE_PEERS_TRACEBACK=1 prints a failing peer's traceback.
"""
import argparse
import json
import math
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
from attention_ctypes import (Flashjit, dense_args, engine_args,  # noqa: E402
                              float32, reference_rows)
from peer_common import compare_bf16, i32, median, print_check_line, sample_rows, short, time_graph  # noqa: E402

torch = None  # imported in main: the module loads (and --help works) without it

HQ, HKV, D = 32, 8, 128
SPEC_DENSE = "dtype=bf16,head_dim=128,causal=1"
SPEC_VARLEN = SPEC_DENSE + ",varlen=1"
SPEC_PAGED = SPEC_VARLEN + ",paged=1"
SCALE = float32(1.0 / math.sqrt(D))
ELEM = 2  # bytes of a bf16

FULL = dict(
    ragged=dict(total=65536, lo=64, hi=16384),
    equal=[(4, 4096), (16, 1024), (2, 8192)],
    chunked=dict(shapes=[(512, 8192), (512, 32768), (2048, 8192), (2048, 32768)], batch={512: 8, 2048: 4},
                 pages=[1, 16, 64, 256]),
    decode=dict(batch=[8, 64, 128], sq=[1, 4, 16], sk=[4096, 32768], page=16),
    rows=64, reps=10,
)
SMOKE = dict(
    ragged=dict(total=2048, lo=16, hi=1024),
    equal=[(2, 256), (4, 128)],
    chunked=dict(shapes=[(64, 512)], batch={64: 2}, pages=[1, 16, 64, 256]),
    decode=dict(batch=[4], sq=[1, 4], sk=[512], page=16),
    rows=16, reps=3,
)
CASES = ("ragged", "equal", "chunked", "decode")


# ---- shapes and counts -------------------------------------------------------------------------------
def visible_pairs(sq, sk, causal=True):
    """(query, key) pairs a sequence's mask lets through; bottom-right causal: row i sees keys j <= i + sk - sq."""
    if sq <= 0 or sk <= 0:
        return 0
    if not causal:
        return sq * sk
    first_row = max(0, sq - sk)  # rows before it see no key
    rows = sq - first_row
    first = first_row + sk - sq + 1  # keys the first such row sees; the last row sees sk
    return rows * (first + sk) // 2


def useful_flops(pairs):
    return 4.0 * D * HQ * pairs


def ragged_lengths(rng, total, lo, hi):
    """Log-uniform lengths in [lo, hi] summing to total (needs total >= lo and hi >= 2 lo)."""
    lengths, rest = [], total
    while rest > 0:  # invariant: rest is 0 or at least lo
        n = min(max(int(round(math.exp(rng.uniform(math.log(lo), math.log(hi))))), lo), hi)
        if n >= rest:
            n = rest
        elif rest - n < lo:
            n = rest if rest <= hi else rest - lo
        lengths.append(n)
        rest -= n
    return lengths


def offsets(lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def randn(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


# ---- timing ------------------------------------------------------------------------------------------
def time_idle(fn, reps, warm=3):
    """ms of one call from an idle stream (events around the call: the host's launch cost included)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return median(times)


# ---- cuDNN through the frontend's Python graph API -----------------------------------------------------
class Cudnn:
    """cuDNN SDPA forward graphs (nvidia-cudnn-frontend, `import cudnn`): ragged (packed) and paged."""

    def __init__(self):
        import cudnn
        self.cudnn = cudnn
        self.handle = cudnn.create_handle()
        self.backend = cudnn.backend_version()
        self.frontend = getattr(cudnn, "__version__", "?")

    def _graph(self):
        dt = self.cudnn.data_type
        return self.cudnn.pygraph(io_data_type=dt.BFLOAT16, intermediate_data_type=dt.FLOAT,
                                  compute_data_type=dt.FLOAT, handle=self.handle)

    def _sdpa(self, g, q, k, v, seq_q, seq_kv, bottom_right, **paged):
        c = self.cudnn
        try:  # 1.14's preferred arguments: generate_stats, diagonal_alignment + diagonal_band_right_bound=0
            return g.sdpa(name="sdpa", q=q, k=k, v=v, generate_stats=False, attn_scale=SCALE,
                          use_padding_mask=True, seq_len_q=seq_q, seq_len_kv=seq_kv,
                          diagonal_alignment=(c.diagonal_alignment.BOTTOM_RIGHT if bottom_right
                                              else c.diagonal_alignment.TOP_LEFT),
                          diagonal_band_right_bound=0, **paged)
        except TypeError:  # an older frontend's names
            return g.sdpa(name="sdpa", q=q, k=k, v=v, is_inference=True, attn_scale=SCALE, use_padding_mask=True,
                          seq_len_q=seq_q, seq_len_kv=seq_kv, use_causal_mask=not bottom_right,
                          use_causal_mask_bottom_right=bottom_right, **paged)

    def _run(self, g, pack):
        c = self.cudnn
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([c.heur_mode.A, c.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        workspace = torch.empty(max(1, g.get_workspace_size()), device="cuda", dtype=torch.uint8)
        handle = self.handle

        def run():
            c.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
            g.execute(pack, workspace, handle=handle)
        run.held = (g, pack, workspace)
        return run

    def _lengths(self, g, name, b):
        return g.tensor(name=name, dim=[b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=self.cudnn.data_type.INT32)

    def ragged(self, q, k, v, o, cu_q, cu_k, max_q, max_k, bottom_right=False):
        """q, o packed [total_q, hq, d]; k, v packed [total_k, hkv, d]; cu_* int32 [b + 1] on the device.
        cuDNN sees [b, h, max_s, d] tensors with element offsets (int64 from cuDNN 9.6) to each sequence."""
        dt = self.cudnn.data_type
        b, hq, d, hkv = cu_q.numel() - 1, q.shape[1], q.shape[2], k.shape[1]
        off_torch, off_dt = (torch.int64, dt.INT64) if self.backend >= 90600 else (torch.int32, dt.INT32)
        seq_q = (cu_q[1:] - cu_q[:-1]).to(torch.int32).view(b, 1, 1, 1).contiguous()
        seq_k = (cu_k[1:] - cu_k[:-1]).to(torch.int32).view(b, 1, 1, 1).contiguous()
        off_q = (cu_q.to(off_torch) * (hq * d)).view(b + 1, 1, 1, 1).contiguous()
        off_k = (cu_k.to(off_torch) * (hkv * d)).view(b + 1, 1, 1, 1).contiguous()
        g = self._graph()

        def offset_tensor(name):
            return g.tensor(name=name, dim=[b + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=off_dt)

        tq = g.tensor(name="Q", dim=[b, hq, max_q, d], stride=[max_q * hq * d, d, hq * d, 1], data_type=dt.BFLOAT16)
        tk = g.tensor(name="K", dim=[b, hkv, max_k, d], stride=[max_k * hkv * d, d, hkv * d, 1], data_type=dt.BFLOAT16)
        tv = g.tensor(name="V", dim=[b, hkv, max_k, d], stride=[max_k * hkv * d, d, hkv * d, 1], data_type=dt.BFLOAT16)
        rq, rk, rv, ro = (offset_tensor(n) for n in ("ragged_q", "ragged_k", "ragged_v", "ragged_o"))
        tq.set_ragged_offset(rq)
        tk.set_ragged_offset(rk)
        tv.set_ragged_offset(rv)
        lq, lk = self._lengths(g, "seq_len_q", b), self._lengths(g, "seq_len_kv", b)
        to, _ = self._sdpa(g, tq, tk, tv, lq, lk, bottom_right)
        to.set_output(True).set_dim([b, hq, max_q, d]).set_stride([max_q * hq * d, d, hq * d, 1])
        to.set_data_type(dt.BFLOAT16)
        to.set_ragged_offset(ro)
        pack = {tq: q, tk: k, tv: v, to: o, lq: seq_q, lk: seq_k, rq: off_q, rk: off_k, rv: off_k, ro: off_q}
        return self._run(g, pack)

    def paged(self, q4, k_pool, v_pool, o4, table, seq_q, seq_kv, max_k):
        """q4, o4 [b, s_q, hq, d] and pools [pages, page_size, hkv, d], any strides with d contiguous (cuDNN
        sees them as [b, h, s, d] and containers [pages, h, page_size, d]); table int32 [b, pages] contiguous;
        seq_q, seq_kv int32 [b]. Bottom-right causal."""
        dt = self.cudnn.data_type
        b, sq, hq, d = q4.shape
        pages, page_size, hkv = k_pool.shape[0], k_pool.shape[1], k_pool.shape[2]
        per_seq = table.shape[1]
        assert table.is_contiguous() and table.dtype == torch.int32
        g = self._graph()

        def bhsd(t, name, dims):
            return g.tensor(name=name, dim=dims, stride=[t.stride(0), t.stride(2), t.stride(1), 1], data_type=dt.BFLOAT16)

        tq = bhsd(q4, "Q", [b, hq, sq, d])
        tk = bhsd(k_pool, "K_container", [pages, hkv, page_size, d])
        tv = bhsd(v_pool, "V_container", [pages, hkv, page_size, d])
        tables = [g.tensor(name=n, dim=[b, 1, per_seq, 1], stride=[per_seq, per_seq, 1, 1], data_type=dt.INT32)
                  for n in ("page_table_k", "page_table_v")]
        lq, lk = self._lengths(g, "seq_len_q", b), self._lengths(g, "seq_len_kv", b)
        to, _ = self._sdpa(g, tq, tk, tv, lq, lk, True, paged_attention_k_table=tables[0],
                           paged_attention_v_table=tables[1], paged_attention_max_seq_len_kv=int(max_k))
        to.set_output(True).set_dim([b, hq, sq, d]).set_stride([o4.stride(0), o4.stride(2), o4.stride(1), 1])
        to.set_data_type(dt.BFLOAT16)
        table4 = table.view(b, 1, per_seq, 1)
        pack = {tq: q4, tk: k_pool, tv: v_pool, to: o4, tables[0]: table4, tables[1]: table4,
                lq: seq_q.view(b, 1, 1, 1).contiguous(), lk: seq_kv.view(b, 1, 1, 1).contiguous()}
        return self._run(g, pack)


def fa2_varlen(q, k, v, cu_q, cu_k, max_q, max_k, **extra):
    """FlashAttention-2 varlen as PyTorch ships it: aten::_flash_attention_forward(query, key, value,
    cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, *, scale, ...); returns
    (output, logsumexp, rng_state, unused, debug_attn_mask). extra: seqused_k=, block_table= (paged)."""
    return torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, 0.0, True, False,
                                                   scale=SCALE, **extra)[0]


# ---- the harness ---------------------------------------------------------------------------------------
class Bench:
    def __init__(self, fj, reps, per_graph, rows, seed, decode_peers):
        self.fj, self.reps, self.per_graph, self.rows = fj, reps, per_graph, rows
        self.rng = random.Random(seed)
        self.decode_peers = decode_peers
        self.failed = []  # flashjit checks or launches that failed
        self._cudnn = None
        self.workspaces = []  # flashjit's workspaces (scheduler=dynamic: the tile counter), alive to the end

    def cudnn(self):
        if self._cudnn is None:
            try:
                self._cudnn = Cudnn()
                print(f"cuDNN frontend {self._cudnn.frontend}, backend {self._cudnn.backend}", flush=True)
            except Exception as e:  # noqa: BLE001
                self._cudnn = RuntimeError(f"cudnn frontend unavailable: {short(e)}")
        if isinstance(self._cudnn, Exception):
            raise self._cudnn
        return self._cudnn

    def time(self, fn, flops, kv_bytes=None):
        out = {}
        for kind, timer in (("idle", lambda: time_idle(fn, self.reps)),
                            ("graph", lambda: time_graph(fn, self.reps, self.per_graph))):
            try:
                ms = timer()
                out[kind + "_us"] = round(ms * 1e3, 2)
                out["tflops" if kind == "graph" else "tflops_idle"] = round(flops / ms / 1e9, 1)
                if kv_bytes and kind == "graph":
                    out["kv_tbps"] = round(kv_bytes / ms / 1e9, 3)
            except Exception as e:  # noqa: BLE001
                out[kind + "_error"] = short(e)
                print(f"    {kind} timing failed: {short(e)}", flush=True)
        return out

    def references(self, seqs):
        """[(sequence, rows, ref O, ref LSE)] for seqs = [(index, q [s_q, hq, d], k [s_k, hkv, d], v)]."""
        out = []
        for b, q, k, v in seqs:
            rows = torch.tensor(sample_rows(q.shape[0], self.rows, self.rng), device="cuda", dtype=torch.long)
            out.append((b, rows) + reference_rows(q, k, v, rows, True, SCALE))
        torch.cuda.synchronize()
        return out

    compare = staticmethod(compare_bf16)

    @staticmethod
    def print_check(name, chk):
        print_check_line(name, chk, 14, ", float64 reference")

    def ours(self, row, name, spec, args_check, args_time, keep, poison, get, samples, kv_bytes=None):
        """A flashjit kernel: metadata checked, one launch with LSE on poisoned outputs against the reference,
        then timed without LSE. A failure marks the run failed (exit status 1)."""
        try:
            self.workspaces.append(self.fj.alloc_workspace(spec, args_check, args_time))  # zeroed: the tile counter
            if ",varlen=1" in spec or ",paged=1" in spec:
                self.fj.check_metadata(spec, args_check)
            poison()
            self.fj.launch(spec, args_check)
            torch.cuda.synchronize()
            chk = row["checks"][name] = self.compare(samples, get, True)
            self.print_check(name, chk)
            if not chk["ok"]:
                self.failed.append(f"{row['case']} {row['label']} {name}: check failed")
            row["kernels"][name] = self.fj.launch_spec(spec, args_time)
            timing = row["peers"][name] = self.time(self.fj.launcher(spec, args_time, keep), row["flops"], kv_bytes)
            for kind in ("idle", "graph"):
                if kind + "_error" in timing:
                    self.failed.append(f"{row['case']} {row['label']} {name}: {kind} timing: {timing[kind + '_error']}")
        except Exception as e:  # noqa: BLE001
            row["peers"][name] = {"error": short(e, 600)}
            self.failed.append(f"{row['case']} {row['label']} {name}: {short(e)}")
            print(f"    {name}: FAILED {short(e, 600)}", flush=True)

    def peer(self, row, name, builds, samples, kv_bytes=None):
        """A peer: builds = a build() -> (fn, poison, get), or [(variant, build), ...] tried in order until one
        builds and matches the reference (the last one is reported whatever its check says). One call checked
        against the reference (O only), then timed. Any failure is printed and recorded; the others go on."""
        if callable(builds):
            builds = [(None, builds)]
        for n, (variant, build) in enumerate(builds):
            last = n == len(builds) - 1
            title = name + (f" ({variant})" if variant else "")
            try:
                fn, poison, get = build()
                poison()
                fn()
                torch.cuda.synchronize()
                chk = self.compare(samples, get, False)
                self.print_check(title, chk)
                if not chk["ok"] and not last:
                    print(f"    {title}: output differs from the reference; trying {builds[n + 1][0]}", flush=True)
                    continue
                row["checks"][name] = chk
                if variant:
                    row["variants"][name] = variant
                row["peers"][name] = self.time(fn, row["flops"], kv_bytes)
                return
            except Exception as e:  # noqa: BLE001
                print(f"    {title}: {short(e, 600)}", flush=True)
                if os.environ.get("ENGINE_PEERS_TRACEBACK"):
                    traceback.print_exc()
                if last:
                    row["peers"][name] = {"error": short(e, 600)}


def cudnn_paged_builds(bench, q4, pk, pv, table, sq_t, used_t, sk, allow_copy):
    """cuDNN paged on the same NHD pools seen as strided [pages, h, page_size, d] containers, then (when
    allow_copy) on an HND copy of them, the layout cuDNN's own samples use."""
    def build(copy):
        def run():
            oc = torch.empty_like(q4)
            k, v = pk, pv
            if copy:
                k, v = (t.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3) for t in (pk, pv))
            fn = bench.cudnn().paged(q4, k, v, oc, table, sq_t, used_t, sk)
            fn.held = (fn.held, k, v)
            return fn, lambda: oc.fill_(float("nan")), lambda i, r: (oc[i][r], None)
        return run
    builds = [("nhd pools, strided", build(False))]
    if allow_copy:
        builds.append(("hnd copy of the pools", build(True)))
    return builds


def new_row(case, label, flops, **shape):
    return dict(case=case, label=label, flops=flops, shape=shape, checks={}, peers={}, kernels={}, ratios={}, variants={})


def tflops(row, name):
    return row["peers"].get(name, {}).get("tflops")


def ratio(row, key, a, b):
    """TF/s of a over b (graph replay); None where either is missing or failed its check (then kept as key_raw)."""
    x, y = tflops(row, a), tflops(row, b)
    value = round(x / y, 3) if x and y else None
    if value is not None and any(row["checks"].get(n, {}).get("ok") is False for n in (a, b)):
        row["ratios"][key + "_raw"] = value
        value = None
    row["ratios"][key] = value
    return value


def print_timing(row, names):
    parts = []
    for n in names:
        p = row["peers"].get(n)
        if not p:
            continue
        if "tflops" in p:
            parts.append(f"{n} {p['tflops']:.1f} TF/s ({p['graph_us']:.1f} us"
                         + (f", idle {p['idle_us']:.1f}" if "idle_us" in p else "") + ")")
        else:
            parts.append(f"{n} -")
    print("    " + "; ".join(parts), flush=True)


# ---- (a) ragged prefill ------------------------------------------------------------------------------------
def case_ragged(bench, cfg):
    c = cfg["ragged"]
    lengths = ragged_lengths(bench.rng, c["total"], c["lo"], c["hi"])
    cu = offsets(lengths)
    total, longest = cu[-1], max(lengths)
    flops = sum(useful_flops(visible_pairs(n, n)) for n in lengths)
    label = f"{len(lengths)} seqs, {total} tokens"
    row = new_row("ragged", label, flops, lengths=lengths)
    print(f"ragged: {label}, lengths {min(lengths)}..{longest}: {' '.join(map(str, lengths))}", flush=True)
    cu_t = i32(cu)
    q, k, v = randn(total, HQ, D), randn(total, HKV, D), randn(total, HKV, D)
    o, lse = torch.empty_like(q), torch.empty(HQ, total, device="cuda", dtype=torch.float32)
    order = sorted(range(len(lengths)), key=lambda b: lengths[b])
    picks = sorted({order[0], order[-1], bench.rng.choice(order)})  # shortest, longest, one more
    samples = bench.references([(b, q[cu[b]:cu[b + 1]], k[cu[b]:cu[b + 1]], v[cu[b]:cu[b + 1]]) for b in picks])

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))

    bounds = dict(seqlen_q=longest, seqlen_k=longest, cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, scale=SCALE)
    bench.ours(row, "flashjit", SPEC_VARLEN, engine_args(q, k, v, o, lse, **bounds), engine_args(q, k, v, o, None, **bounds),
               (q, k, v, o, lse, cu_t), poison, lambda b, r: (o[cu[b] + r], lse[:, cu[b] + r].t()), samples)

    def build_fa2():
        held = {}

        def fn():
            held["o"] = fa2_varlen(q, k, v, cu_t, cu_t, longest, longest)
        return fn, lambda: held.clear(), lambda b, r: (held["o"][cu[b] + r], None)
    bench.peer(row, "fa2", build_fa2, samples)

    def build_cudnn():
        oc = torch.empty_like(q)
        fn = bench.cudnn().ragged(q, k, v, oc, cu_t, cu_t, longest, longest, bottom_right=False)
        return fn, lambda: oc.fill_(float("nan")), lambda b, r: (oc[cu[b] + r], None)
    bench.peer(row, "cudnn", build_cudnn, samples)
    ratio(row, "x_cudnn", "flashjit", "cudnn")
    ratio(row, "x_fa2", "flashjit", "fa2")
    print_timing(row, ("flashjit", "cudnn", "fa2"))
    print(f"    flashjit / cuDNN {row['ratios']['x_cudnn']}  flashjit / FA2 {row['ratios']['x_fa2']}", flush=True)
    return [row]


# ---- (b) varlen with equal lengths against the dense kernel ---------------------------------------------------
def case_equal(bench, cfg):
    rows = []
    for b, s in cfg["equal"]:
        rows.append(equal_shape(bench, b, s))
        torch.cuda.empty_cache()  # the shape's tensors went with the call
    return rows


def equal_shape(bench, b, s):
    flops = b * useful_flops(visible_pairs(s, s))
    row = new_row("equal", f"{b} x {s}", flops, batch=b, seqlen=s)
    print(f"equal: batch {b} x {s}", flush=True)
    q4, k4, v4 = randn(b, s, HQ, D), randn(b, s, HKV, D), randn(b, s, HKV, D)
    q, k, v = q4.view(b * s, HQ, D), k4.view(b * s, HKV, D), v4.view(b * s, HKV, D)
    o, o4 = torch.empty_like(q), torch.empty_like(q4)
    lse, lse4 = torch.empty(HQ, b * s, device="cuda"), torch.empty(b, HQ, s, device="cuda")
    cu = list(range(0, b * s + 1, s))
    cu_t = i32(cu)
    samples = bench.references([(i, q4[i], k4[i], v4[i]) for i in sorted({0, b - 1})])

    def poison(*ts):
        return lambda: [t.fill_(float("nan")) for t in ts]

    bounds = dict(seqlen_q=s, seqlen_k=s, cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, scale=SCALE)
    bench.ours(row, "varlen", SPEC_VARLEN, engine_args(q, k, v, o, lse, **bounds),
               engine_args(q, k, v, o, None, **bounds), (q4, k4, v4, o, lse, cu_t), poison(o, lse),
               lambda i, r: (o[cu[i] + r], lse[:, cu[i] + r].t()), samples)
    bench.ours(row, "dense", SPEC_DENSE, dense_args(q4, k4, v4, o4, lse4, SCALE), dense_args(q4, k4, v4, o4, None, SCALE),
               (q4, k4, v4, o4, lse4), poison(o4, lse4), lambda i, r: (o4[i][r], lse4[i][:, r].t()), samples)
    try:  # the same kernel body on the same data: how far apart the two outputs are (both last written unpoisoned)
        row["varlen_vs_dense_max_abs"] = float((o.view_as(o4).float() - o4.float()).abs().max().item())
    except Exception as e:  # noqa: BLE001
        row["varlen_vs_dense_max_abs"] = short(e)
    ratio(row, "varlen_over_dense", "varlen", "dense")
    print_timing(row, ("varlen", "dense"))
    print(f"    varlen / dense {row['ratios']['varlen_over_dense']}  (max |O varlen - O dense| "
          f"{row['varlen_vs_dense_max_abs']})", flush=True)
    return row


# ---- (c) chunked prefill against a paged cache ----------------------------------------------------------------
def case_chunked(bench, cfg):
    c = cfg["chunked"]
    rows = []
    for sq, sk in c["shapes"]:
        rows += chunked_shape(bench, sq, sk, c["batch"][sq], c["pages"])
        torch.cuda.empty_cache()
    return rows


def chunked_shape(bench, sq, sk, b, page_sizes):
    flops = b * useful_flops(visible_pairs(sq, sk))
    kv_bytes = 2.0 * b * sk * HKV * D * ELEM
    print(f"chunked: {b} sequences, {sq} queries against {sk} keys (K+V {kv_bytes / 2**30:.2f} GiB)", flush=True)
    q = randn(b * sq, HQ, D)
    q4 = q.view(b, sq, HQ, D)
    kc, vc = randn(b, sk, HKV, D), randn(b, sk, HKV, D)  # the contiguous cache: what the pools hold, in order
    o, lse = torch.empty_like(q), torch.empty(HQ, b * sq, device="cuda")
    o4, lse4 = o.view(b, sq, HQ, D), torch.empty(b, HQ, sq, device="cuda")
    cu_q = list(range(0, b * sq + 1, sq))
    cu_q_t, used_t, sq_t = i32(cu_q), i32([sk] * b), i32([sq] * b)
    samples = bench.references([(i, q4[i], kc[i], vc[i]) for i in sorted({0, b - 1})])

    def get_packed(i, r):
        return o[cu_q[i] + r], lse[:, cu_q[i] + r].t()

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))
        lse4.fill_(float("nan"))

    # the contiguous kernels on the same shape, once a shape
    base = new_row("chunked", f"{sq}/{sk} b={b} contiguous", flops, batch=b, seqlen_q=sq, seqlen_k=sk, page_size=None)
    bounds = dict(seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=cu_q_t, seqused_k=used_t, scale=SCALE)
    bench.ours(base, "contig", SPEC_VARLEN, engine_args(q, kc, vc, o, lse, **bounds),
               engine_args(q, kc, vc, o, None, **bounds), (q, kc, vc, o, lse, cu_q_t, used_t), poison, get_packed,
               samples, kv_bytes)
    bench.ours(base, "dense", SPEC_DENSE, dense_args(q4, kc, vc, o4, lse4, SCALE), dense_args(q4, kc, vc, o4, None, SCALE),
               (q4, kc, vc, o4, lse4), poison, lambda i, r: (o4[i][r], lse4[i][:, r].t()), samples, kv_bytes)
    print_timing(base, ("contig", "dense"))
    rows = [base]

    pool_k = torch.empty(b * sk, HKV, D, device="cuda", dtype=torch.bfloat16)  # the pools, one view a page size
    pool_v = torch.empty_like(pool_k)
    cu_k_t = i32(list(range(0, b * sk + 1, sk)))
    for page in page_sizes:
        assert sk % page == 0
        per_seq, pages = sk // page, b * sk // page
        label = f"{sq}/{sk} b={b} page {page}"
        print(f"  page {page}: {pages} pages, shuffled", flush=True)
        row = new_row("chunked", label, flops, batch=b, seqlen_q=sq, seqlen_k=sk, page_size=page)
        perm = torch.randperm(pages, generator=torch.Generator().manual_seed(1000 + page)).to("cuda")
        pk, pv = pool_k.view(pages, page, HKV, D), pool_v.view(pages, page, HKV, D)
        with torch.no_grad():  # logical page j of sequence i (index i * per_seq + j) lives at perm[i * per_seq + j]
            pk[perm] = kc.view(pages, page, HKV, D)
            pv[perm] = vc.view(pages, page, HKV, D)
        table = perm.to(torch.int32).view(b, per_seq).contiguous()
        del perm
        pbounds = dict(bounds, block_table=table)
        bench.ours(row, "paged", SPEC_PAGED, engine_args(q, pk, pv, o, lse, **pbounds),
                   engine_args(q, pk, pv, o, None, **pbounds), (q, pk, pv, o, lse, cu_q_t, used_t, table),
                   poison, get_packed, samples, kv_bytes)

        bench.peer(row, "cudnn", cudnn_paged_builds(bench, q4, pk, pv, table, sq_t, used_t, sk, True), samples, kv_bytes)

        if page % 256 == 0:  # FlashAttention-2 takes pages in multiples of 256 only
            def build_fa2(pk=pk, pv=pv, table=table):
                held = {}

                def fn():
                    held["o"] = fa2_varlen(q, pk, pv, cu_q_t, cu_k_t, sq, sk, seqused_k=used_t, block_table=table)
                return fn, held.clear, lambda i, r: (held["o"][cu_q[i] + r], None)
            bench.peer(row, "fa2", build_fa2, samples, kv_bytes)
        row["peers"]["contig"] = base["peers"].get("contig", {})
        row["peers"]["dense"] = base["peers"].get("dense", {})
        ratio(row, "x_contig", "paged", "contig")
        ratio(row, "x_dense", "paged", "dense")
        ratio(row, "x_cudnn", "paged", "cudnn")
        ratio(row, "x_fa2", "paged", "fa2")
        print_timing(row, ("paged", "cudnn", "fa2"))
        print(f"    paged / contig {row['ratios']['x_contig']}  / dense {row['ratios']['x_dense']}  "
              f"/ cuDNN paged {row['ratios']['x_cudnn']}", flush=True)
        rows.append(row)
    return rows


# ---- (d) decode-shaped --------------------------------------------------------------------------------------
def case_decode(bench, cfg, max_kv_gb):
    c = cfg["decode"]
    rows = []
    for sk in c["sk"]:
        for b in c["batch"]:
            kv_bytes = 2.0 * b * sk * HKV * D * ELEM
            if kv_bytes > max_kv_gb * 2**30:
                print(f"decode: batch {b} x {sk} keys skipped: K+V {kv_bytes / 2**30:.1f} GiB > --max-kv-gb {max_kv_gb}",
                      flush=True)
                rows.append(new_row("decode", f"b={b} sk={sk}", 0.0, batch=b, seqlen_k=sk, skipped="memory"))
                continue
            rows += decode_pool(bench, b, sk, c["sq"], c["page"], kv_bytes)
            torch.cuda.empty_cache()
    return rows


def decode_pool(bench, b, sk, query_counts, page, kv_bytes):
    """One paged pool (b sequences of sk keys, shuffled pages), every query count against it."""
    per_seq, pages = sk // page, b * sk // page
    pk, pv = randn(pages, page, HKV, D), randn(pages, page, HKV, D)
    perm = torch.randperm(pages, generator=torch.Generator().manual_seed(2000 + b))
    table = perm.to(device="cuda", dtype=torch.int32).view(b, per_seq).contiguous()
    used_t = i32([sk] * b)
    gathered = {}  # the keys of the sequences checked, gathered through the table
    for i in sorted({0, b - 1}):
        idx = table[i].long()
        gathered[i] = (pk[idx].reshape(sk, HKV, D), pv[idx].reshape(sk, HKV, D))
    rows = []
    for sq in query_counts:
        rows.append(decode_cell(bench, b, sq, sk, page, kv_bytes, pk, pv, table, used_t, gathered))
    return rows


def decode_cell(bench, b, sq, sk, page, kv_bytes, pk, pv, table, used_t, gathered):
    flops = b * useful_flops(visible_pairs(sq, sk))
    label = f"b={b} sq={sq} sk={sk}"
    print(f"decode: {label}, page {page} (K+V {kv_bytes / 2**30:.2f} GiB)", flush=True)
    row = new_row("decode", label, flops, batch=b, seqlen_q=sq, seqlen_k=sk, page_size=page, kv_bytes=kv_bytes)
    q = randn(b * sq, HQ, D)
    q4 = q.view(b, sq, HQ, D)
    o, lse = torch.empty_like(q), torch.empty(HQ, b * sq, device="cuda")
    cu_q = list(range(0, b * sq + 1, sq))
    cu_q_t, sq_t = i32(cu_q), i32([sq] * b)
    samples = bench.references([(i, q4[i], gathered[i][0], gathered[i][1]) for i in sorted(gathered)])

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))

    bounds = dict(seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=cu_q_t, seqused_k=used_t, block_table=table, scale=SCALE)
    bench.ours(row, "paged", SPEC_PAGED, engine_args(q, pk, pv, o, lse, **bounds),
               engine_args(q, pk, pv, o, None, **bounds), (q, pk, pv, o, lse, cu_q_t, used_t, table), poison,
               lambda i, r: (o[cu_q[i] + r], lse[:, cu_q[i] + r].t()), samples, kv_bytes)
    if bench.decode_peers:  # an HND copy only where it stays small
        builds = cudnn_paged_builds(bench, q4, pk, pv, table, sq_t, used_t, sk, kv_bytes <= 4 * 2**30)
        bench.peer(row, "cudnn", builds, samples, kv_bytes)
        ratio(row, "x_cudnn", "paged", "cudnn")
    p = row["peers"].get("paged", {})
    if "graph_us" in p:
        cudnn_us = row["peers"].get("cudnn", {}).get("graph_us")
        print(f"    flashjit {p['graph_us']:.1f} us (idle {p.get('idle_us', float('nan')):.1f}), "
              f"K/V {p['kv_tbps']:.2f} TB/s, {p['tflops']:.1f} TF/s" + (f"; cuDNN {cudnn_us} us" if cudnn_us else ""),
              flush=True)
    return row


# ---- the summary -------------------------------------------------------------------------------------------
def f1(x, width=7):
    return f"{x:{width}.1f}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def f2(x, width=6):
    return f"{x:{width}.2f}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def chk(row, names):
    marks = []
    for n in names:
        c = row["checks"].get(n)
        if c is not None:
            variant = f"[{row['variants'][n]}]" if n in row.get("variants", {}) else ""
            marks.append(f"{n}:{'ok' if c['ok'] else 'FAIL'}({c['o_err']:.1e}){variant}")
    return " ".join(marks)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def target_line(what, value, goal, lowest=False):
    if value is None:
        return f"  {what}: no figure"
    return f"  {what}: {value:.3f} ({'min' if lowest else 'value'}) target >= {goal}: {'met' if value >= goal else 'MISSED'}"


def summary(rows):
    lines = []
    by = lambda case: [r for r in rows if r["case"] == case]  # noqa: E731
    t = lambda r, n: tflops(r, n)  # noqa: E731
    if by("ragged"):
        lines.append("ragged prefill (TF/s, graph replay)    flashjit   cudnn     fa2  x cudnn  x fa2  checks")
        for r in by("ragged"):
            lines.append(f"  {r['label']:<36} {f1(t(r, 'flashjit'))} {f1(t(r, 'cudnn'))} {f1(t(r, 'fa2'))} "
                         f"{f2(r['ratios'].get('x_cudnn'))} {f2(r['ratios'].get('x_fa2'))}  {chk(r, ('flashjit', 'cudnn', 'fa2'))}")
    if by("equal"):
        lines.append("equal lengths (TF/s)                    varlen   dense  varlen/dense  checks")
        for r in by("equal"):
            lines.append(f"  {r['label']:<36} {f1(t(r, 'varlen'))} {f1(t(r, 'dense'))}        {f2(r['ratios'].get('varlen_over_dense'))}"
                         f"  {chk(r, ('varlen', 'dense'))}")
    if by("chunked"):
        lines.append("chunked prefill, paged (TF/s)           paged  contig   dense  cudnn    fa2  x contig x dense x cudnn  checks")
        for r in by("chunked"):
            if r["shape"].get("page_size") is None:
                lines.append(f"  {r['label']:<36} {f1(None)} {f1(t(r, 'contig'))} {f1(t(r, 'dense'))}"
                             f"{'':>40}  {chk(r, ('contig', 'dense'))}")
                continue
            lines.append(f"  {r['label']:<36} {f1(t(r, 'paged'))} {f1(t(r, 'contig'))} {f1(t(r, 'dense'))} {f1(t(r, 'cudnn'), 6)} "
                         f"{f1(t(r, 'fa2'), 6)}  {f2(r['ratios'].get('x_contig'))}  {f2(r['ratios'].get('x_dense'))}  "
                         f"{f2(r['ratios'].get('x_cudnn'))}  {chk(r, ('paged', 'cudnn', 'fa2'))}")
    if by("decode"):
        lines.append("decode, paged 16                        us/call  idle us  K/V TB/s   TF/s  cudnn us  checks")
        for r in by("decode"):
            p = r["peers"].get("paged", {})
            if r["shape"].get("skipped"):
                lines.append(f"  {r['label']:<36} skipped ({r['shape']['skipped']})")
                continue
            lines.append(f"  {r['label']:<36} {f1(p.get('graph_us'), 8)} {f1(p.get('idle_us'), 8)} {f2(p.get('kv_tbps'), 9)} "
                         f"{f1(p.get('tflops'), 6)} {f1(r['peers'].get('cudnn', {}).get('graph_us'), 9)}  {chk(r, ('paged', 'cudnn'))}")
    targets = []
    rg = by("ragged")
    if rg:
        targets.append(target_line("ragged flashjit / cuDNN", geomean([r["ratios"].get("x_cudnn") for r in rg]), 1.1))
        targets.append(target_line("ragged flashjit / FA2", geomean([r["ratios"].get("x_fa2") for r in rg]), 2.0))
    eq = [r["ratios"].get("varlen_over_dense") for r in by("equal") if r["ratios"].get("varlen_over_dense")]
    if eq:
        targets.append(target_line("equal lengths varlen / dense", min(eq), 0.97, lowest=True))
    ch = [r for r in by("chunked") if r["shape"].get("page_size")]
    for key, name in (("x_contig", "contig (varlen, seqused_k)"), ("x_dense", "dense")):
        big = [r["ratios"].get(key) for r in ch if r["shape"]["page_size"] >= 64 and r["ratios"].get(key)]
        p16 = [r["ratios"].get(key) for r in ch if r["shape"]["page_size"] == 16 and r["ratios"].get(key)]
        if big:
            targets.append(target_line(f"paged / {name} at page >= 64", min(big), 0.95, lowest=True))
        if p16:
            targets.append(target_line(f"paged / {name} at page 16", min(p16), 0.85, lowest=True))
    cu = [r["ratios"].get("x_cudnn") for r in ch if r["ratios"].get("x_cudnn")]
    if cu:
        targets.append(target_line("paged / cuDNN paged (where cuDNN runs)", min(cu), 1.1, lowest=True))
    p1 = [r for r in ch if r["shape"]["page_size"] == 1]
    if p1:
        ok = all(r["checks"].get("paged", {}).get("ok") for r in p1)
        targets.append(f"  page size 1: {'correct' if ok else 'FAILED'}; "
                       + ", ".join(f"{r['label']} {f1(t(r, 'paged')).strip()} TF/s" for r in p1))
    return lines, targets


def main():
    global torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path to libflashjit.so")
    ap.add_argument("--out", default="engine.json", help="JSON results")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ",".join(CASES))
    ap.add_argument("--reps", type=int, default=None, help="timed calls / graph replays per kernel, median (default 10; smoke 3)")
    ap.add_argument("--per-graph", type=int, default=None, help="calls captured per graph replay (default 10; smoke 2)")
    ap.add_argument("--rows", type=int, default=None, help="query rows checked per sampled sequence (default 64; smoke 16)")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--max-kv-gb", type=float, default=20.0,
                    help="skip decode cells whose K+V pools exceed this (GiB); batch 128 x 32768 keys needs 16 GiB")
    ap.add_argument("--no-decode-peers", action="store_true", help="decode: flashjit only (no cuDNN paged)")
    ap.add_argument("--smoke", action="store_true", help="every case at a tiny size (seconds)")
    ap.add_argument("--pages", default="", help="chunked: the page sizes to run, comma-separated (default 1,16,64,256)")
    ap.add_argument("--spec-extra", default="", help="keys added to every flashjit spec, e.g. scheduler=dynamic (an A/B in one build)")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {','.join(CASES)}")
    global SPEC_DENSE, SPEC_VARLEN, SPEC_PAGED
    if args.spec_extra:
        SPEC_DENSE, SPEC_VARLEN, SPEC_PAGED = (s + "," + args.spec_extra for s in (SPEC_DENSE, SPEC_VARLEN, SPEC_PAGED))
    cfg = SMOKE if args.smoke else FULL
    if args.pages:
        cfg = dict(cfg, chunked=dict(cfg["chunked"], pages=[int(x) for x in args.pages.split(",")]))
    reps = args.reps or cfg["reps"]
    per_graph = args.per_graph or (2 if args.smoke else 10)
    rows_checked = args.rows or cfg["rows"]

    import torch as torch_module
    torch = torch_module
    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 1
    torch.manual_seed(args.seed)
    fj = Flashjit(args.lib, torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {args.lib} on "
          f"{torch.cuda.get_device_name()} (torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}); "
          f"reps {reps}, per graph {per_graph}{', smoke' if args.smoke else ''}", flush=True)
    specs = {}
    for spec in (SPEC_DENSE, SPEC_VARLEN, SPEC_PAGED):  # compile/load before anything is timed or captured
        try:
            t0 = time.time()
            specs[spec] = fj.kernel(spec)[1]
            print(f"kernel {spec}: {specs[spec]} ({time.time() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001
            specs[spec] = short(e)
            print(f"kernel {spec}: FAILED {short(e)}", flush=True)
    bench = Bench(fj, reps, per_graph, rows_checked, args.seed, not args.no_decode_peers)
    rows = []
    for case in cases:
        t0 = time.time()
        try:
            if case == "ragged":
                rows += case_ragged(bench, cfg)
            elif case == "equal":
                rows += case_equal(bench, cfg)
            elif case == "chunked":
                rows += case_chunked(bench, cfg)
            elif case == "decode":
                rows += case_decode(bench, cfg, args.max_kv_gb)
        except Exception as e:  # noqa: BLE001 -- a case that breaks is reported; the next one runs
            traceback.print_exc()
            bench.failed.append(f"{case}: {short(e)}")
            rows.append(new_row(case, "case failed", 0.0, error=short(e, 600)))
        torch.cuda.empty_cache()
        print(f"({case}: {time.time() - t0:.0f} s)", flush=True)

    lines, targets = summary(rows)
    print()
    print("\n".join(lines))
    print("targets:")
    print("\n".join(targets) if targets else "  none measured")
    cud = bench._cudnn
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(),
                   "cudnn_frontend": getattr(cud, "frontend", None), "cudnn_backend": getattr(cud, "backend", None),
                   "flashjit": version, "specs": specs, "reps": reps, "per_graph": per_graph, "smoke": args.smoke,
                   "seed": args.seed, "rows": rows, "targets": targets, "failed": bench.failed}, f, indent=1)
    print(f"wrote {args.out}")
    if bench.failed:
        print("flashjit failures:\n  " + "\n  ".join(bench.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
