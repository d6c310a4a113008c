#!/usr/bin/env python3
"""FP8 (issue 39, Targets): flashjit's FP8 operands (spec dtype=e4m3) against cuDNN's FP8 SDPA, and its 16-bit
queries against an FP8 K/V cache (spec kv_dtype=e4m3) against the same kernels on a bf16 cache, in one process, on
the same inputs.

  python3 bench/fp8_peers.py --lib build/libflashjit.so --out fp8.json [--cases fp8_prefill,fp8_cache_decode,...]
                             [--cells PATTERNS] [--seqlens 1k,4k,8k,16k|all] [--peers cudnn|none] [--reps 10]
                             [--per-graph 5] [--budget-s 0] [--smoke]
  python3 bench/fp8_peers.py --dry-run [--smoke] [--cases ...] [--cells ...]   # the cells; no torch, no GPU

Inputs: e4m3 codes with one scale a tensor, a power of two (attention_ctypes.quantize_e4m3: 448 / amax rounded down
to a power of two, the cuDNN frontend's FP8 guide), so code x scale is exact in bf16 and every kernel of a cell,
FP8 or 16-bit, computes the same attention on the same values; the float64 reference runs on those dequantised
values (code x scale).

Cases (cell ids in brackets; --cells takes comma-separated fnmatch patterns on them, or a case's name):
  fp8_prefill       [fp8_prefill/d128/s8k/full] the FlashAttention-3 paper's grid in FP8, as bench/peers.py's bf16
                    one: batch x seqlen = 16384 tokens, hidden 2048 (2048 / d heads, as many K/V heads), head dims
                    64, 128, 256, causal and not (causal / full), seqlens 1k, 4k, 8k, 16k (--seqlens all: the
                    paper's 512 to 16k). Q ~ N(0, 4), K ~ N(0, 1/4), V ~ N(0, 1) (scores of standard deviation 1
                    after the softmax scale), each quantised to e4m3 with its own descale (2^-5, 2^-7 and 2^-6 at
                    the grid's size).
                    flashjit "dtype=e4m3,head_dim=D,causal=C" (O bf16, q_scale / k_scale / v_scale one element);
                    flashjit's bf16 kernel on the same values (flashjit_bf16, beside: no target); cuDNN's FP8 SDPA
                    through nvidia-cudnn-frontend (cudnn8; see Peers).
                    Targets: flashjit >= 1100 TF/s (1.1 PFLOP/s) at d128 and d256, non-causal, 8k and 16k; >= 1.0x
                    cuDNN FP8 (TF/s) in every cell cuDNN runs; O's error against float64 <= cuDNN FP8's on the
                    same rows.
  fp8_cache_decode  [fp8_cache_decode/d128/h32-8/b64/k32k] decode, one bf16 query a sequence against an e4m3 paged
                    cache (page 16, shuffled page table; vLLM's per-tensor k_scale 2^-5, v_scale 2^-4), 32/8 heads,
                    d128, causal, split-KV with GQA packing ("dtype=bf16,head_dim=128,causal=1,varlen=1,paged=1,
                    pack_gqa=1,split_kv=1,kv_dtype=e4m3", max_splits --max-splits, PDL), against the same spec on a
                    bf16 cache holding the same values (flashjit_bf16). Batches x lengths with K/V >= 256 MB in FP8
                    bytes (2 x b x keys x 8 heads x 128 B): 1 x 128k (256 MiB), 8 x 32k (512 MiB), 32 x 8k
                    (512 MiB), 8 x 128k (2 GiB), 64 x 32k (4 GiB), 128 x 16k (4 GiB); the bf16 cache twice that.
                    K/V read bandwidth counted in FP8 bytes (bytes the sequences' keys occupy / time) against a
                    device-to-device copy's bandwidth measured in the same run (torch copy_ of a 1 GiB buffer, a
                    CUDA graph replayed as the kernels are, (bytes read + bytes written) / time: the denominator,
                    printed and written to the JSON as copy_tbps); tokens a second (b / time) FP8 over bf16.
                    Targets (cells of >= 256 MB): >= 90 % of the copy's bandwidth; >= 1.8x the bf16 cache's tokens/s.
  fp8_cache_chunked [fp8_cache_chunked/d128/h32-8/b4/q2k/k32k/p16] chunked prefill: 4 sequences of 2048 bf16 queries
                    against 32k keys each (bottom-right causal), paged 16, "dtype=bf16,head_dim=128,causal=1,
                    varlen=1,paged=1,kv_dtype=e4m3" against the same spec on a bf16 cache of the same values.
                    Target: FP8 cache >= 0.9x the bf16 cache's TF/s.

Peers: cuDNN's FP8 SDPA (nvidia-cudnn-frontend, graph.sdpa_fp8(q, k, v, descale_q, descale_k, descale_v, descale_s,
scale_s, scale_o, attn_scale=, generate_stats=False, use_causal_mask=) -> (o, stats, amax_s, amax_o), on a pygraph
of io_data_type FP8_E4M3): Q, K, V the same codes as [b, h, s, d] views, descale_q/k/v the same per-tensor descales
(float32 (1, 1, 1, 1): cuDNN takes one a tensor); P scaled into e4m3's range by scale_s = 256 (448 / amax(P) = 448
rounded down to a power of two; descale_s 1/256); causal as use_causal_mask (top-left: the frontend refuses a
bottom-right FP8 mask before Blackwell, and with s_q = s_k the two are the same). On Hopper its O is e4m3 (the
frontend 1.32 refuses bf16 or fp16 FP8 output there: "sdpa fp8 forward with HALF/BFLOAT16 output is only supported
on Blackwell architecture with cuDNN version 9.13.0 and newer"), so its error includes O's own e4m3 rounding: O is
read as code / scale_o, scale_o = 448 / amax_o rounded down to a power of two, amax_o from a first call with
scale_o = 1 (delayed scaling, as an engine sets it; where amax_o is not an output, from amax |V|). amax_s and amax_o
are graph outputs (the frontend's older contract), else amax_s virtual (its newer one), else both. Head dim 256 in
FP8 needs cuDNN 9.26 (the frontend's check): with an older backend the d256 cells print cuDNN's refusal and carry no
cuDNN ratio. No peer runs bf16 queries against an FP8 K/V cache with a Hopper kernel of this class: FlashAttention-3
needs Q, K and V of one dtype (its flash_api.cpp; engines quantise Q for it), FlashAttention-4 has no FP8 on sm90,
FlashInfer dequantises an FP8 cache only on its FA2-style path, vLLM's FlashAttention fork only on its CuTe path,
and cuDNN's FP8 SDPA takes FP8 Q, K and V together: the FP8 cache cases are measured against flashjit's own bf16
cache, on the same values.

Timings: a CUDA graph of --per-graph calls replayed --reps times, the median (us a call). A peer whose calls cannot be
captured is timed with CUDA events around --per-graph calls instead, and its row says so. TF/s count useful FLOPs only:
4 x d x heads_q x visible (query, key) pairs (causal: the lower triangle). flashjit is timed without LSE.

Checks: every kernel is first checked on the same inputs: outputs poisoned (NaN; e4m3 code 0x7F), one call, O (and
flashjit's LSE) on sampled query rows against attention_ctypes.reference_rows in float64 on the dequantised inputs.
Bounds (relative L2 of O; LSE's largest relative error 1e-4 for flashjit, and for its FP8 operands 1e-4 x max(1,
|LSE|) + 2^-10 x the row's score magnitude, as src/verify/check.cpp's: Hopper's FP8 wgmma sums at reduced
precision): bf16 O 6e-3 (the 16-bit kernels, and the
FP8 cache: the kernel widens code x scale to bf16 exactly here, powers of two); flashjit FP8 operands 2^-4
(attention_ctypes.FP8_O_BOUND: P rounded to e4m3 for the P V GEMM, as FlashAttention-3 does; the derivation is
there: expected about 0.027); cuDNN FP8 2^-3 (P's and O's e4m3 roundings, 2^-4 each). A flashjit check that misses
its bound, or a flashjit call that fails, makes the exit status 1; a peer's is reported beside its timing, and a peer
that fails (API mismatch, shape not supported) prints why while the others go on. Targets are reported met / MISSED;
they do not change the exit status. --budget-s: once a run has taken that long, the peers of the remaining cells are
skipped (flashjit still runs and is checked), so a run keeps to its time. FP8_PEERS_TRACEBACK=1 prints a failing
peer's traceback.
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
from attention_ctypes import (E4M3_MAX, FLAG_PDL, FP8_O_BOUND, LSE_BOUND, O_BOUND, ErrorSum, Flashjit,  # noqa: E402
                              default_lib, dense_args, dequantize, engine_args, float32, quantize_e4m3, reference_rows)
from peer_common import (checks_text, compile_specs, i32, klabel, ratio, sample_rows, select_cells,  # noqa: E402
                         short, time_events, time_graph)


# The LSE's error per unit of its row's score magnitude that FP8 operands may add (src/verify/check.cpp's
# fp8_lse_error with exact copies; python/tests/test_gpu.py's FP8_LSE_PER_MAGNITUDE).
FP8_LSE_PER_MAGNITUDE = 2.0 ** -10


def score_magnitude(q, k, rows, causal, scale):
    """The rows' score magnitudes [rows, hq] (src/verify/check.hpp's Reference::magnitude): scale x the largest sum of
    |q_c k_c| over the keys a row sees (bottom-right causal; 0 where it sees none), float64 on the inputs given."""
    sq, hq, _ = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    if sk == 0:
        return torch.zeros(rows.numel(), hq, dtype=torch.float64, device=q.device)
    qa = q[rows].double().abs().transpose(0, 1)                             # [hq, r, d]
    ka = k.double().abs().transpose(0, 1).repeat_interleave(hq // hkv, 0)   # [hq, sk, d]
    mag = qa @ ka.transpose(-1, -2) * abs(float(scale))                    # [hq, r, sk]
    if causal:
        seen = torch.arange(sk, device=q.device).view(1, -1) <= rows.view(-1, 1) + (sk - sq)
        mag = mag.masked_fill(~seen, 0.0)
    return mag.amax(-1).transpose(0, 1)


def lse_error_units(lse, ref_lse, magnitude, per_magnitude):
    """The largest |LSE - ref| / (LSE_BOUND x max(1, |ref|) + per_magnitude x magnitude) over the rows (a NaN, or a
    finite LSE where the reference's is -inf: inf)."""
    got = lse.double()
    finite = torch.isfinite(ref_lse)
    allowed = LSE_BOUND * ref_lse.abs().clamp(min=1.0) + per_magnitude * magnitude
    err = torch.where(finite, (got - ref_lse).abs() / allowed, torch.where(got == float("-inf"), 0.0, float("inf")))
    err = torch.where(torch.isnan(got), float("inf"), err)
    return float(err.max().item()) if err.numel() else 0.0

torch = None  # imported in main: --help and --dry-run work without it

CASES = ("fp8_prefill", "fp8_cache_decode", "fp8_cache_chunked")
PEERS = ("cudnn",)
K1 = 1024
MB256 = 256 * 10 ** 6  # the decode target's floor: cells with at least 256 MB of K/V in FP8 bytes
CUDNN_FP8_O_BOUND = 2.0 ** -3  # cuDNN's FP8 O on Hopper: P's e4m3 rounding (2^-4) and O's own (2^-4)
SCALE_S = 256.0  # cuDNN's P scale: 448 / amax(P) = 448, rounded down to a power of two
PREFILL_TARGET_TFLOPS = 1100.0
SEQLENS_ALL = (512, K1, 2 * K1, 4 * K1, 8 * K1, 16 * K1)  # the FlashAttention-3 paper's grid
KV_SCALES = (2.0 ** -5, 2.0 ** -4)  # the FP8 cache's per-tensor k_scale, v_scale (codes = N(0, 1) values / scale)
QKV_STD = (2.0, 0.5, 1.0)  # prefill: Q, K, V standard deviations (a score's is 2 x 0.5 x sqrt(d) / sqrt(d) = 1)

FULL = dict(
    prefill=dict(tokens=16 * K1, hidden=2048, dims=(64, 128, 256), seqlens=(K1, 4 * K1, 8 * K1, 16 * K1)),
    decode=dict(hq=32, hkv=8, d=128, page=16,
                shapes=[(1, 128 * K1), (8, 32 * K1), (32, 8 * K1), (8, 128 * K1), (64, 32 * K1), (128, 16 * K1)]),
    chunked=dict(hq=32, hkv=8, d=128, page=16, b=4, sq=2 * K1, sk=32 * K1),
    copy_bytes=2 ** 30, rows=32, reps=10, per_graph=5,
)
SMOKE = dict(  # every path at a small size (no cell reaches 256 MB: the decode targets say so); lengths that do
    # not fill their last page
    prefill=dict(tokens=2 * K1, hidden=1024, dims=(64, 128, 256), seqlens=(512, 2 * K1)),
    decode=dict(hq=32, hkv=8, d=128, page=16, shapes=[(2, 1000), (4, 3000)]),
    chunked=dict(hq=32, hkv=8, d=128, page=16, b=2, sq=256, sk=2000),
    copy_bytes=64 * 2 ** 20, rows=8, reps=3, per_graph=2,
)


# ---- cells (no torch) ----------------------------------------------------------------------------------------
def parse_length(text):
    text = text.strip().lower()
    return int(text[:-1]) * K1 if text.endswith("k") else int(text)


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


def new_cell(cid, case, b, sq, sk, hq, hkv, d, causal, **more):
    c = dict(id=cid, case=case, b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, causal=causal, page=None)
    c.update(more)
    return c


def make_cells(cfg, seqlens=None):
    cells = []
    p = cfg["prefill"]
    for d in p["dims"]:
        for s in (seqlens or p["seqlens"]):
            if p["tokens"] % s:
                continue
            for causal in (False, True):
                h = p["hidden"] // d
                cells.append(new_cell(f"fp8_prefill/d{d}/s{klabel(s)}/{'causal' if causal else 'full'}", "fp8_prefill",
                                      p["tokens"] // s, s, s, h, h, d, causal))
    dc = cfg["decode"]
    for b, sk in dc["shapes"]:
        cells.append(new_cell(f"fp8_cache_decode/d{dc['d']}/h{dc['hq']}-{dc['hkv']}/b{b}/k{klabel(sk)}", "fp8_cache_decode",
                              b, 1, sk, dc["hq"], dc["hkv"], dc["d"], True, page=dc["page"]))
    ch = cfg["chunked"]
    cells.append(new_cell(f"fp8_cache_chunked/d{ch['d']}/h{ch['hq']}-{ch['hkv']}/b{ch['b']}/q{klabel(ch['sq'])}/"
                          f"k{klabel(ch['sk'])}/p{ch['page']}", "fp8_cache_chunked", ch["b"], ch["sq"], ch["sk"], ch["hq"],
                          ch["hkv"], ch["d"], True, page=ch["page"]))
    return cells


def cell_specs(c, extra=""):
    """flashjit's kernels of a cell: name -> spec (flashjit: the FP8 one; flashjit_bf16: the 16-bit one)."""
    tail = ("," + extra) if extra else ""
    d, causal = c["d"], int(c["causal"])
    if c["case"] == "fp8_prefill":
        return {"flashjit": f"dtype=e4m3,head_dim={d},causal={causal}{tail}",
                "flashjit_bf16": f"dtype=bf16,head_dim={d},causal={causal}{tail}"}
    base = f"dtype=bf16,head_dim={d},causal={causal},varlen=1,paged=1"
    if c["case"] == "fp8_cache_decode":
        base += ",pack_gqa=1,split_kv=1"
    return {"flashjit": f"{base}{tail},kv_dtype=e4m3", "flashjit_bf16": f"{base}{tail}"}


def cell_peers(c, peers):
    return [p for p in (("cudnn",) if c["case"] == "fp8_prefill" else ()) if p in peers]


def cell_flops(c):
    return 4.0 * c["d"] * c["hq"] * c["b"] * visible_pairs(c["sq"], c["sk"], c["causal"])


def kv_bytes(c, element_bytes=1):
    """Bytes of the K and V the cell's sequences hold (2 x b x keys x heads_kv x d x element bytes)."""
    return 2.0 * c["b"] * c["sk"] * c["hkv"] * c["d"] * element_bytes


def describe(c):
    shape = f"b{c['b']} q{c['sq']} k{c['sk']} h{c['hq']}/{c['hkv']} d{c['d']} {'causal' if c['causal'] else 'non-causal'}"
    if c["page"]:
        fp8 = kv_bytes(c)
        shape += (f", paged {c['page']}; K/V {fp8 / 2 ** 20:.0f} MiB in FP8 ({'>=' if fp8 >= MB256 else 'below'} 256 MB), "
                  f"{2 * fp8 / 2 ** 20:.0f} MiB in bf16")
    return shape


def print_cells(cells, extra, peers):
    print(f"{len(cells)} cells")
    for c in cells:
        print(f"  {c['id']:<46} {describe(c)}; {cell_flops(c) / 1e9:.1f} GFLOP")
        for name, spec in cell_specs(c, extra).items():
            print(f"      {name:<16} {spec}")
        names = cell_peers(c, peers)
        print(f"      peers            {', '.join(names) if names else '-'}")


# ---- helpers (torch) -------------------------------------------------------------------------------------------
def poison_e4m3(t):
    t.view(torch.uint8).fill_(0x7F)  # e4m3fn's NaN code


def rows_e4m3(t, index):
    """t[index] of an e4m3 tensor (indexed as bytes: index kernels need not take float8)."""
    return t.view(torch.uint8)[index].view(torch.float8_e4m3fn)


# ---- cuDNN's FP8 SDPA through the frontend's Python graph API --------------------------------------------------
class CudnnFp8:
    """cuDNN FP8 SDPA forward graphs (nvidia-cudnn-frontend, `import cudnn`: graph.sdpa_fp8) on [b, s, h, d] e4m3
    tensors seen as [b, h, s, d]; see the module's docstring, Peers."""

    def __init__(self):
        import cudnn
        self.c = cudnn
        self.handle = cudnn.create_handle()
        self.backend = cudnn.backend_version()
        self.frontend = getattr(cudnn, "__version__", "?")

    def prefill(self, q8, k8, v8, o8, descales, scale, causal, amax_outputs, v_amax):
        """A forward on the e4m3 codes q8, k8, v8 [b, s, h, d] into o8 (e4m3, same layout), descales (q, k, v) float32
        one-element tensors; amax_outputs (amax_s, amax_o): which of the two are graph outputs. Returns run() with
        run.scale_o (O = o8 code / scale_o) set by a first call's amax_o (else from v_amax)."""
        c = self.c
        dt = c.data_type
        b, sq, hq, d = q8.shape
        g = c.pygraph(io_data_type=dt.FP8_E4M3, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT,
                      handle=self.handle)

        def bhsd(name, t):
            return g.tensor(name=name, dim=[t.shape[0], t.shape[2], t.shape[1], t.shape[3]],
                            stride=[t.stride(0), t.stride(2), t.stride(1), 1], data_type=dt.FP8_E4M3)

        tq, tk, tv = bhsd("Q", q8), bhsd("K", k8), bhsd("V", v8)
        names = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
        ts = {n: g.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt.FLOAT) for n in names}
        kw = dict(name="sdpa_fp8", q=tq, k=tk, v=tv, attn_scale=scale, **ts)
        if causal:
            kw["use_causal_mask"] = True
        try:
            to, _, amax_s, amax_o = g.sdpa_fp8(generate_stats=False, **kw)
        except TypeError:  # a frontend before generate_stats
            to, _, amax_s, amax_o = g.sdpa_fp8(is_inference=True, **kw)
        to.set_output(True).set_dim([b, hq, sq, d]).set_stride([o8.stride(0), o8.stride(2), o8.stride(1), 1])
        to.set_data_type(dt.FP8_E4M3)
        amax = {}
        for t, out, key in ((amax_s, amax_outputs[0], "s"), (amax_o, amax_outputs[1], "o")):
            t.set_output(out).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(dt.FLOAT)
            if out:
                amax[key] = (t, torch.zeros(1, 1, 1, 1, device="cuda", dtype=torch.float32))
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([c.heur_mode.A, c.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        workspace = torch.empty(max(1, g.get_workspace_size()), device="cuda", dtype=torch.uint8)

        def scalar(x):
            return torch.full((1, 1, 1, 1), x, device="cuda", dtype=torch.float32)
        values = dict(descale_q=descales[0].view(1, 1, 1, 1), descale_k=descales[1].view(1, 1, 1, 1),
                      descale_v=descales[2].view(1, 1, 1, 1), descale_s=scalar(1.0 / SCALE_S), scale_s=scalar(SCALE_S),
                      scale_o=scalar(1.0))
        pack = {ts[n]: values[n] for n in names}
        pack.update({tq: q8, tk: k8, tv: v8, to: o8})
        pack.update({t: buf for t, buf in amax.values()})
        handle = self.handle

        def run():
            c.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
            g.execute(pack, workspace, handle=handle)
        run()  # scale_o 1: amax_o for the scale of the calls that count (delayed scaling)
        torch.cuda.synchronize()
        got = float(amax["o"][1].item()) if "o" in amax else 0.0
        run.amax_o = got if got > 0 and math.isfinite(got) else float(v_amax)
        run.scale_o = 2.0 ** math.floor(math.log2(E4M3_MAX / run.amax_o))
        values["scale_o"].fill_(run.scale_o)
        run.held = (g, pack, workspace)
        return run


# ---- the harness -----------------------------------------------------------------------------------------------
def new_row(c):
    return dict(id=c["id"], case=c["case"], label=describe(c),
                shape={k: c[k] for k in ("b", "sq", "sk", "hq", "hkv", "d", "causal", "page")},
                flops=cell_flops(c), specs={}, kernels={}, checks={}, impls={}, variants={}, ratios={}, notes=[])


class Bench:
    def __init__(self, fj, opts, cfg):
        self.fj, self.opts, self.cfg = fj, opts, cfg
        self.reps, self.per_graph, self.rows = opts.reps, opts.per_graph, opts.rows
        self.rng = random.Random(opts.seed)
        self.gen = torch.Generator(device="cuda").manual_seed(opts.seed)
        self.cpu_gen = torch.Generator().manual_seed(opts.seed)
        self.failed = []  # flashjit checks and calls that failed: exit status 1
        self.workspaces = []  # flashjit's workspaces, alive to the end
        self.started = time.time()
        self._cudnn = None
        self.copy = None  # the device-to-device copy's figures (copy_bandwidth)

    def cudnn(self):
        if self._cudnn is None:
            try:
                self._cudnn = CudnnFp8()
                print(f"cuDNN frontend {self._cudnn.frontend}, backend {self._cudnn.backend}", flush=True)
            except Exception as e:  # noqa: BLE001
                self._cudnn = RuntimeError(f"cudnn frontend unavailable: {short(e)}")
        if isinstance(self._cudnn, Exception):
            raise self._cudnn
        return self._cudnn

    def over_budget(self):
        return self.opts.budget_s > 0 and time.time() - self.started > self.opts.budget_s

    def copy_bandwidth(self):
        """The denominator of the decode bandwidth: a device-to-device copy of cfg copy_bytes (torch copy_, graph
        replays as the kernels are timed), (bytes read + bytes written) / time, in TB/s; measured once."""
        if self.copy is None:
            n = self.cfg["copy_bytes"]
            src = torch.empty(n, device="cuda", dtype=torch.uint8).random_(0, 256, generator=self.gen)
            dst = torch.empty_like(src)
            ms = time_graph(lambda: dst.copy_(src), self.reps, self.per_graph)
            self.copy = {"bytes": n, "us": round(ms * 1e3, 2), "tbps": round(2.0 * n / ms / 1e9, 3)}
            print(f"device-to-device copy of {n / 2 ** 20:.0f} MiB: {ms * 1e3:.1f} us, {self.copy['tbps']:.3f} TB/s "
                  "(bytes read + written): the decode bandwidth's denominator", flush=True)
            del src, dst
            torch.cuda.empty_cache()
        return self.copy

    # -- checks --
    def references(self, seqs, causal, magnitudes=False):
        """[(sequence, rows, ref O, ref LSE, magnitude)] for seqs = [(index, rows, q [s_q, hq, d], k [s_k, hkv, d], v)],
        float64 inputs (dequantised) or 16-bit ones; magnitude: the rows' score magnitudes [rows, hq] (the FP8
        operands' LSE bound), or None."""
        out = []
        for i, rows, q, k, v in seqs:
            r = torch.tensor(rows, device="cuda", dtype=torch.long)
            scale = float32(1.0 / math.sqrt(q.shape[-1]))
            mag = score_magnitude(q, k, r, causal, scale) if magnitudes else None
            out.append((i, r) + reference_rows(q, k, v, r, causal, scale) + (mag,))
        torch.cuda.synchronize()
        return out

    @staticmethod
    def compare(samples, get, with_lse, o_bound, lse_per_magnitude=0.0):
        """O's error and (with_lse) the LSE's: within LSE_BOUND relative, or with lse_per_magnitude > 0 (FP8
        operands) within LSE_BOUND x max(1, |LSE|) + lse_per_magnitude x the row's score magnitude."""
        errs = ErrorSum()
        units = 0.0  # the LSE's largest error in units of its bound (lse_per_magnitude > 0)
        for i, rows, ref_o, ref_lse, magnitude in samples:
            o, lse = get(i, rows)
            errs.add(o, lse if with_lse else None, ref_o, ref_lse)
            if with_lse and lse_per_magnitude > 0:
                units = max(units, lse_error_units(lse, ref_lse, magnitude, lse_per_magnitude))
        lse_ok = not with_lse or (units <= 1.0 if lse_per_magnitude > 0 else errs.lse <= LSE_BOUND)
        return {"o_err": errs.o, "lse_err": errs.lse if with_lse else None, "rows": errs.rows, "o_bound": o_bound,
                "lse_of_bound": units if with_lse and lse_per_magnitude > 0 else None,
                "sequences": len(samples), "nan_rows": errs.nan_rows, "reference": "float64, dequantised inputs",
                "ok": errs.passed(o_bound) and lse_ok}

    @staticmethod
    def print_check(name, chk):
        lse = f"  LSE err {chk['lse_err']:.2e}" if chk["lse_err"] is not None else ""
        if chk.get("lse_of_bound") is not None:
            lse += f" ({chk['lse_of_bound']:.2f} of its bound)"
        nan = f"  unwritten rows {chk['nan_rows']}" if chk["nan_rows"] else ""
        print(f"    check {name:<30} O err {chk['o_err']:.2e} (bound {chk['o_bound']:.2g}){lse}{nan}  ({chk['rows']} "
              f"rows of {chk['sequences']} sequences)  {'ok' if chk['ok'] else 'FAIL'}", flush=True)

    # -- timing --
    def time(self, fn, flops, kv=None, events_ok=False):
        try:
            ms, how = time_graph(fn, self.reps, self.per_graph), "graph"
        except Exception as e:  # noqa: BLE001
            if not events_ok:
                raise
            torch.cuda.synchronize()
            ms, how = time_events(fn, self.reps, self.per_graph), f"events (no graph: {short(e, 160)})"
        out = {"us": round(ms * 1e3, 2), "tflops": round(flops / ms / 1e9, 1), "timing": how}
        if kv:
            out["kv_bytes"] = kv
            out["kv_tbps"] = round(kv / ms / 1e9, 3)
        return out

    @staticmethod
    def print_timing(name, p, extra=""):
        how = "" if p.get("timing") == "graph" else f"  [{p.get('timing')}]"
        kv = f"  K/V {p['kv_tbps']:.3f} TB/s" if "kv_tbps" in p else ""
        print(f"    {name:<30} {p['us']:10.1f} us  {p['tflops']:7.1f} TF/s{kv}{extra}{how}", flush=True)

    # -- flashjit --
    def ours(self, row, name, spec, args_check, args_time, keep, poison, get, samples, o_bound, kv=None, metadata=False,
             lse_per_magnitude=0.0):
        """A flashjit kernel: one launch with LSE on poisoned outputs against the reference, then timed without
        LSE. A failure marks the run failed (exit status 1)."""
        try:
            row["specs"][name] = spec
            ws = self.fj.alloc_workspace(spec, args_check, args_time)  # split-KV partials; None for other specs
            self.workspaces.append(ws)
            if metadata:
                self.fj.check_metadata(spec, args_check)
            poison()
            self.fj.launch(spec, args_check)
            torch.cuda.synchronize()
            chk = row["checks"][name] = self.compare(samples, get, True, o_bound, lse_per_magnitude)
            self.print_check(name, chk)
            if not chk["ok"]:
                self.failed.append(f"{row['id']} {name}: check failed (O err {chk['o_err']:.2e} bound {o_bound:.2g}, "
                                   f"LSE err {chk['lse_err']:.2e})")
            row["kernels"][name] = self.fj.launch_spec(spec, args_time)
            p = row["impls"][name] = self.time(self.fj.launcher(spec, args_time, tuple(keep) + (ws,)), row["flops"], kv)
            self.print_timing(name, p, f"  [{row['kernels'][name]}]")
        except Exception as e:  # noqa: BLE001
            row["impls"][name] = {"error": short(e, 600)}
            self.failed.append(f"{row['id']} {name}: {short(e)}")
            print(f"    {name}: FAILED {short(e, 600)}", flush=True)

    # -- peers --
    def peer(self, row, name, builds, samples, o_bound):
        """A peer: builds = [(variant, build), ...], build() -> (fn, poison, get), tried in order until one builds
        and matches the reference (the last one is reported whatever its check says); one call checked (O only),
        then timed. Any failure is printed and recorded; the others go on."""
        if name not in self.opts.peers:
            return
        if self.over_budget():
            row["impls"][name] = {"skipped": f"--budget-s {self.opts.budget_s:g} spent"}
            print(f"    {name}: skipped (--budget-s {self.opts.budget_s:g} spent)", flush=True)
            return
        for n, (variant, build) in enumerate(builds):
            last = n == len(builds) - 1
            title = name + (f" ({variant})" if variant else "")
            try:
                fn, poison, get = build()
                poison()
                fn()
                torch.cuda.synchronize()
                chk = self.compare(samples, get, False, o_bound)
                self.print_check(title, chk)
                if not chk["ok"] and not last:
                    print(f"    {title}: output differs from the reference; trying {builds[n + 1][0]}", flush=True)
                    continue
                row["checks"][name] = chk
                if variant:
                    row["variants"][name] = variant
                p = row["impls"][name] = self.time(fn, row["flops"], events_ok=True)
                self.print_timing(name, p, f"  [{variant}]" if variant else "")
                return
            except Exception as e:  # noqa: BLE001
                print(f"    {title}: {short(e, 600)}", flush=True)
                if os.environ.get("FP8_PEERS_TRACEBACK"):
                    traceback.print_exc()
                if last:
                    row["impls"][name] = {"error": short(e, 600)}
            finally:
                torch.cuda.synchronize()


# ---- fp8_prefill -------------------------------------------------------------------------------------------------
def cudnn_fp8_builds(bench, q8, k8, v8, descales, scale, causal, v_amax):
    """cuDNN FP8 with amax_s and amax_o outputs, then amax_s virtual, then both virtual."""
    def build_for(amax_outputs):
        def build():
            o8 = torch.empty(q8.shape, device="cuda", dtype=torch.float8_e4m3fn)
            fn = bench.cudnn().prefill(q8, k8, v8, o8, descales, scale, causal, amax_outputs, v_amax)
            fn.held = (fn.held, o8)
            so = fn.scale_o
            return fn, lambda: poison_e4m3(o8), lambda i, r: (rows_e4m3(o8[i], r).float() / so, None)
        return build
    return [("amax_s and amax_o outputs", build_for((True, True))), ("amax_s virtual", build_for((False, True))),
            ("amax_s and amax_o virtual", build_for((False, False)))]


def run_prefill(bench, c, specs):
    row = new_row(c)
    b, s, h, d, causal = c["b"], c["sq"], c["hq"], c["d"], c["causal"]
    g = bench.gen
    codes, descales = [], []
    for std in QKV_STD:
        x8, ds = quantize_e4m3(torch.randn(b, s, h, d, generator=g, device="cuda", dtype=torch.float32) * std)
        codes.append(x8)
        descales.append(ds)
    q8, k8, v8 = codes
    dq, dk, dv = descales
    row["descales"] = [float(t.item()) for t in descales]
    scale = float32(1.0 / math.sqrt(d))
    qb, kb, vb = (dequantize(t, ds, torch.bfloat16) for t, ds in zip(codes, descales))  # exact: powers of two
    o = torch.empty(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    picks = [(i, sample_rows(s, bench.rows, bench.rng)) for i in sorted({0, b - 1})]
    samples = bench.references([(i, rows, dequantize(q8[i], dq), dequantize(k8[i], dk), dequantize(v8[i], dv))
                                for i, rows in picks], causal, magnitudes=True)

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))

    def get(i, r):
        return o[i][r], lse[i][:, r].t()

    fp8 = dict(k_scale=dk, v_scale=dv, q_scale=dq)
    bench.ours(row, "flashjit", specs["flashjit"], dense_args(q8, k8, v8, o, lse, scale, **fp8),
               dense_args(q8, k8, v8, o, None, scale, **fp8), (q8, k8, v8, o, lse, dq, dk, dv), poison, get, samples,
               FP8_O_BOUND, lse_per_magnitude=FP8_LSE_PER_MAGNITUDE)
    bench.ours(row, "flashjit_bf16", specs["flashjit_bf16"], dense_args(qb, kb, vb, o, lse, scale),
               dense_args(qb, kb, vb, o, None, scale), (qb, kb, vb, o, lse), poison, get, samples, O_BOUND["bf16"])
    v_amax = float(v8.float().abs().max().item()) * float(dv.item())
    bench.peer(row, "cudnn", cudnn_fp8_builds(bench, q8, k8, v8, (dq, dk, dv), scale, causal, v_amax), samples,
               CUDNN_FP8_O_BOUND)
    ratio(row, "x_cudnn", "flashjit", "cudnn")
    ratio(row, "e4m3_over_bf16", "flashjit", "flashjit_bf16")
    ours, theirs = row["checks"].get("flashjit", {}).get("o_err"), row["checks"].get("cudnn", {}).get("o_err")
    row["ratios"]["err_over_cudnn"] = round(ours / theirs, 3) if ours is not None and theirs else None
    return row


# ---- the FP8 cache cases -----------------------------------------------------------------------------------------
class Fp8Cache:
    """b sequences of sk keys in paged pools (page, shuffled page table): K and V e4m3 codes of N(0, 1) values with
    the per-tensor KV_SCALES (powers of two), the same values in bf16 pools (code x scale, exact) for the 16-bit
    kernel, table int32 [b, pages a sequence], and each checked sequence's dequantised K/V (float64)."""

    def __init__(self, bench, c):
        b, sk, hkv, d, page = c["b"], c["sk"], c["hkv"], c["d"], c["page"]
        per = -(-sk // page)
        pages = b * per
        self.scales = [torch.tensor([s], device="cuda", dtype=torch.float32) for s in KV_SCALES]
        self.k8, self.v8 = (torch.empty(pages, page, hkv, d, device="cuda", dtype=torch.float8_e4m3fn) for _ in range(2))
        self.kb, self.vb = (torch.empty(pages, page, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        step = max(1, (1 << 26) // (page * hkv * d))  # pages a chunk: 64 Mi float32 values at a time
        for codes, wide, s in ((self.k8, self.kb, KV_SCALES[0]), (self.v8, self.vb, KV_SCALES[1])):
            for start in range(0, pages, step):
                n = min(step, pages - start)
                x = torch.randn(n, page, hkv, d, generator=bench.gen, device="cuda", dtype=torch.float32)
                x8 = (x / s).clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
                codes[start:start + n].copy_(x8)
                wide[start:start + n].copy_((x8.float() * s).to(torch.bfloat16))
                del x, x8
        perm = torch.randperm(pages, generator=bench.cpu_gen).to(device="cuda", dtype=torch.int32)
        self.table = perm.view(b, per).contiguous()
        self.used = i32([sk] * b)
        self.sk = sk

    def keys(self, i):
        """Sequence i's K and V as float64 [sk, hkv, d]: code x scale (what both caches hold)."""
        idx = self.table[i].long()
        k = rows_e4m3(self.k8, idx).reshape(-1, *self.k8.shape[2:])[:self.sk]
        v = rows_e4m3(self.v8, idx).reshape(-1, *self.v8.shape[2:])[:self.sk]
        return dequantize(k, self.scales[0]), dequantize(v, self.scales[1])


def run_cache(bench, c, specs):
    """fp8_cache_decode and fp8_cache_chunked: the FP8 cache's kernel and the bf16 cache's, packed bf16 queries."""
    row = new_row(c)
    b, sq, sk, hq, d = c["b"], c["sq"], c["sk"], c["hq"], c["d"]
    decode = c["case"] == "fp8_cache_decode"
    cache = Fp8Cache(bench, c)
    q = torch.randn(b * sq, hq, d, generator=bench.gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    o, lse = torch.empty_like(q), torch.empty(hq, b * sq, device="cuda", dtype=torch.float32)
    cu = list(range(0, b * sq + 1, sq))
    cu_t = i32(cu)
    picks = sorted({0, b - 1, bench.rng.randrange(b)}) if decode else sorted({0, b - 1})
    seqs = []
    for i in picks:
        k, v = cache.keys(i)
        seqs.append((i, sample_rows(sq, bench.rows, bench.rng), q[cu[i]:cu[i + 1]], k, v))
    samples = bench.references(seqs, True)  # one set for both: the bf16 cache holds the dequantised values exactly
    del seqs
    torch.cuda.empty_cache()
    fp8_bytes = kv_bytes(c)
    row["kv_bytes_fp8"] = fp8_bytes
    row["kv_scales"] = list(KV_SCALES)

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))

    def get(i, r):
        return o[cu[i] + r], lse[:, cu[i] + r].t()

    def args(k, v, with_lse, **scales):
        return engine_args(q, k, v, o, lse if with_lse else None, seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=cu_t,
                           seqused_k=cache.used, block_table=cache.table, scale=float32(1.0 / math.sqrt(d)),
                           flags=FLAG_PDL if decode else 0, max_splits=bench.opts.max_splits if decode else 0, **scales)
    ks, vs = cache.scales
    keep = (q, o, lse, cu_t, cache.used, cache.table)
    bench.ours(row, "flashjit", specs["flashjit"], args(cache.k8, cache.v8, True, k_scale=ks, v_scale=vs),
               args(cache.k8, cache.v8, False, k_scale=ks, v_scale=vs), keep + (cache.k8, cache.v8, ks, vs), poison, get,
               samples, O_BOUND["bf16"], kv=fp8_bytes, metadata=True)
    bench.ours(row, "flashjit_bf16", specs["flashjit_bf16"], args(cache.kb, cache.vb, True), args(cache.kb, cache.vb, False),
               keep + (cache.kb, cache.vb), poison, get, samples, O_BOUND["bf16"], kv=2 * fp8_bytes, metadata=True)
    if decode:
        copy = bench.copy_bandwidth()
        row["copy_tbps"] = copy["tbps"]
        ratio(row, "tokens_fp8_over_bf16", "flashjit", "flashjit_bf16", "us", invert=True)
        fj = row["impls"].get("flashjit", {})
        ok = row["checks"].get("flashjit", {}).get("ok")
        row["ratios"]["bw_of_copy"] = round(fj["kv_tbps"] / copy["tbps"], 3) if ok and fj.get("kv_tbps") else None
    else:
        ratio(row, "fp8_over_bf16", "flashjit", "flashjit_bf16")
    return row


RUNNERS = {"fp8_prefill": run_prefill, "fp8_cache_decode": run_cache, "fp8_cache_chunked": run_cache}


# ---- the summary ---------------------------------------------------------------------------------------------------
def fmt(x, spec=".1f", width=7):
    """x right-aligned in width with spec, '-' for a missing figure."""
    if not isinstance(x, (int, float)):
        return f"{'-':>{width}}"
    return format(x, f"{width}{spec}")


def verdict(what, value, goal, higher=True, shown=None):
    op = ">=" if higher else "<="
    if value is None:
        return f"  {what}: no figure (target {op} {goal:g})"
    result = "met" if met_goal(value, goal, higher) else "MISSED"
    return f"  {what}: {shown or format(value, '.3f')} target {op} {goal:g}: {result}"


def met_goal(value, goal, higher=True):
    return value >= goal if higher else value <= goal


def mark(value, goal, higher=True):
    """A table's verdict mark: met, MISSED or - (no figure)."""
    return "-" if value is None else "met" if met_goal(value, goal, higher) else "MISSED"


def why_missing(row, name):
    p = row["impls"].get(name, {})
    return p.get("error") or p.get("skipped") or ""


def is_pflops_cell(r):
    s = r["shape"]
    return s["d"] in (128, 256) and not s["causal"] and s["sq"] >= 8 * K1


def worst(rows, key, goal, higher, what):
    """Targets over every cell with a figure: the worst one's verdict, and the cells that miss."""
    got = [(r["ratios"][key], r["id"]) for r in rows if r["ratios"].get(key) is not None]
    if not got:
        return [verdict(what, None, goal, higher)]
    value, cid = (min if higher else max)(got)
    out = [verdict(f"{what}, {'lowest' if higher else 'highest'} of {len(got)} cells ({cid})", value, goal, higher)]
    missed = [f"{c} {v:.3f}" for v, c in got if not met_goal(v, goal, higher)]
    if missed:
        out.append(f"    MISSED in {len(missed)}: " + ", ".join(missed))
    return out


def tables(rows, copy):
    lines, targets = [], []
    imp = lambda r, n, f: r["impls"].get(n, {}).get(f)  # noqa: E731
    chk = lambda r, n: r["checks"].get(n, {}).get("o_err")  # noqa: E731
    W = 46
    pre = [r for r in rows if r["case"] == "fp8_prefill"]
    if pre:
        lines.append(f"{'fp8_prefill (TF/s, graph)':<{W + 2}} {'e4m3':>7} {'bf16':>7} {'cudnn8':>7} {'x cudnn':>8} "
                     f"{'e4m3/bf16':>9} {'O err e4m3':>10} {'cudnn8':>8}  {'PF/s':<6} {'x cud':<6} {'err':<6}  checks")
        for r in pre:
            x = r["ratios"]
            err_fj, err_cu = chk(r, "flashjit"), chk(r, "cudnn")
            tf = imp(r, "flashjit", "tflops") if r["checks"].get("flashjit", {}).get("ok") else None
            pf = mark(tf, PREFILL_TARGET_TFLOPS) if is_pflops_cell(r) else ""
            lines.append(f"  {r['id']:<{W}} {fmt(imp(r, 'flashjit', 'tflops'))} {fmt(imp(r, 'flashjit_bf16', 'tflops'))} "
                         f"{fmt(imp(r, 'cudnn', 'tflops'))} {fmt(x.get('x_cudnn'), '.3f', 8)} "
                         f"{fmt(x.get('e4m3_over_bf16'), '.3f', 9)} {fmt(err_fj, '.2e', 10)} {fmt(err_cu, '.2e', 8)}  "
                         f"{pf:<6} {mark(x.get('x_cudnn'), 1.0):<6} {mark(x.get('err_over_cudnn'), 1.0, False):<6}  "
                         f"{checks_text(r)}")
            if is_pflops_cell(r):
                targets.append(verdict(f"{r['id']}: flashjit FP8 TF/s", tf, PREFILL_TARGET_TFLOPS,
                                       shown=None if tf is None else f"{tf:.1f}"))
        targets += worst(pre, "x_cudnn", 1.0, True, "fp8_prefill: flashjit / cuDNN FP8 (TF/s)")
        targets += worst(pre, "err_over_cudnn", 1.0, False, "fp8_prefill: O error flashjit / cuDNN FP8 (same rows)")
        gone = [r for r in pre if r["ratios"].get("x_cudnn") is None]
        if gone:
            reasons = sorted({why_missing(r, "cudnn")[:160] or "no figure" for r in gone})
            targets.append(f"    no cuDNN figure in {len(gone)} cells ({', '.join(r['id'] for r in gone)}): "
                           + "; ".join(reasons))
        lines.append("  (cudnn8: cuDNN's FP8 SDPA, O in e4m3 on Hopper (its error includes O's rounding); bf16: flashjit's "
                     "bf16 kernel on the same values; PF/s: >= 1100 TF/s where targeted, x cud: >= 1.0x cuDNN, err: "
                     "O error <= cuDNN's)")
    dec = [r for r in rows if r["case"] == "fp8_cache_decode"]
    if dec:
        lines.append(f"{'fp8_cache_decode (us a call, graph)':<{W + 2}} {'fp8 us':>8} {'bf16 us':>8} {'fp8 TB/s':>8} "
                     f"{'of copy':>7} {'bf16 TB/s':>9} {'tok x':>6} {'FP8 MiB':>8}  {'bw':<6} {'tok':<6}  checks")
        for r in dec:
            x = r["ratios"]
            big = r.get("kv_bytes_fp8", 0) >= MB256
            mib = kv_bytes(r["shape"]) / 2 ** 20
            lines.append(f"  {r['id']:<{W}} {fmt(imp(r, 'flashjit', 'us'), width=8)} "
                         f"{fmt(imp(r, 'flashjit_bf16', 'us'), width=8)} "
                         f"{fmt(imp(r, 'flashjit', 'kv_tbps'), '.3f', 8)} {fmt(x.get('bw_of_copy'), '.3f', 7)} "
                         f"{fmt(imp(r, 'flashjit_bf16', 'kv_tbps'), '.3f', 9)} {fmt(x.get('tokens_fp8_over_bf16'), '.3f', 6)} "
                         f"{mib:8.0f}  {mark(x.get('bw_of_copy'), 0.9) if big else '':<6} "
                         f"{mark(x.get('tokens_fp8_over_bf16'), 1.8) if big else '':<6}  {checks_text(r)}")
            if big:
                targets.append(verdict(f"{r['id']}: FP8-byte K/V bandwidth / the copy's", x.get("bw_of_copy"), 0.90))
                targets.append(verdict(f"{r['id']}: tokens/s FP8 cache / bf16 cache", x.get("tokens_fp8_over_bf16"), 1.8))
            else:
                targets.append(f"  {r['id']}: K/V below 256 MB in FP8 bytes: no bandwidth or tokens/s target")
        lines.append(f"  (TB/s: K/V bytes the sequences hold / time, FP8 bytes for fp8, bf16 bytes for bf16; of copy: over the "
                     f"device-to-device copy's {copy['tbps'] if copy else '-'} TB/s, (read + written) / time; tok x: bf16 us "
                     f"/ fp8 us; bw >= 0.9 and tok >= 1.8 where K/V >= 256 MB)")
    ch = [r for r in rows if r["case"] == "fp8_cache_chunked"]
    if ch:
        lines.append(f"{'fp8_cache_chunked (TF/s, graph)':<{W + 2}} {'fp8':>7} {'bf16':>7} {'fp8/bf16':>8}  {'x bf16':<6}  "
                     "checks")
        for r in ch:
            x = r["ratios"]
            lines.append(f"  {r['id']:<{W}} {fmt(imp(r, 'flashjit', 'tflops'))} {fmt(imp(r, 'flashjit_bf16', 'tflops'))} "
                         f"{fmt(x.get('fp8_over_bf16'), '.3f', 8)}  {mark(x.get('fp8_over_bf16'), 0.9):<6}  {checks_text(r)}")
            targets.append(verdict(f"{r['id']}: TF/s FP8 cache / bf16 cache", x.get("fp8_over_bf16"), 0.9))
    for r in rows:
        if r.get("error"):
            lines.append(f"  {r['id']}: cell failed: {r['error'][:200]}")
    return lines, targets


# ---- main ---------------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    first, _, rest = __doc__.partition("\n\n")
    ap = argparse.ArgumentParser(description=first, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    ap.add_argument("--lib", default=None, help="path to libflashjit.so (default: build/libflashjit.so if there)")
    ap.add_argument("--out", default="fp8.json", help="JSON results (default fp8.json)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ",".join(CASES))
    ap.add_argument("--cells", default="", help="comma-separated fnmatch patterns on cell ids (e.g. 'fp8_prefill/d128/*,"
                    "fp8_cache_decode/*/b64/*'); default all of --cases")
    ap.add_argument("--seqlens", default="", help="fp8_prefill's seqlens, comma-separated (512, 1k, ...), or 'all' (512 to "
                    "16k); default 1k,4k,8k,16k (smoke 512,2k)")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers to run: " + ",".join(PEERS)
                    + " (none: flashjit only)")
    ap.add_argument("--reps", type=int, default=None, help="graph replays a kernel, median (default 10; smoke 3)")
    ap.add_argument("--per-graph", type=int, default=None, help="calls captured per graph (default 5; smoke 2)")
    ap.add_argument("--rows", type=int, default=None, help="query rows checked per sampled sequence (default 32; smoke 8)")
    ap.add_argument("--max-splits", type=int, default=64, help="fp8_cache_decode: args.max_splits (default 64)")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="seconds after which the remaining cells' peers are skipped (flashjit still runs); 0: none")
    ap.add_argument("--spec-extra", default="", help="keys added to every flashjit spec (an A/B in one build)")
    ap.add_argument("--smoke", action="store_true", help="every case at a small size (seconds)")
    ap.add_argument("--dry-run", action="store_true", help="list the cells, their specs and peers and exit (no torch)")
    ap.add_argument("--seed", type=int, default=39)
    opts = ap.parse_args(argv)
    cfg = SMOKE if opts.smoke else FULL
    opts.reps = opts.reps or cfg["reps"]
    opts.per_graph = opts.per_graph or cfg["per_graph"]
    opts.rows = opts.rows or cfg["rows"]
    if opts.reps < 1 or opts.per_graph < 1 or opts.rows < 4 or not 1 <= opts.max_splits <= 128:
        ap.error("--reps and --per-graph: at least 1; --rows: at least 4; --max-splits: 1..128")
    opts.case_list = [c.strip() for c in opts.cases.split(",") if c.strip()]
    unknown = [c for c in opts.case_list if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {','.join(CASES)}")
    opts.peers = [p.strip() for p in opts.peers.split(",") if p.strip() and p.strip() != "none"]
    unknown = [p for p in opts.peers if p not in PEERS]
    if unknown:
        ap.error(f"unknown peer(s) {unknown}; known: {','.join(PEERS)}")
    opts.patterns = [p.strip() for p in opts.cells.split(",") if p.strip()]
    opts.seqlen_list = None
    if opts.seqlens.strip() == "all":
        opts.seqlen_list = SEQLENS_ALL
    elif opts.seqlens.strip():
        try:
            opts.seqlen_list = tuple(parse_length(x) for x in opts.seqlens.split(",") if x.strip())
        except ValueError:
            ap.error(f"--seqlens {opts.seqlens!r}: comma-separated lengths (512, 1k, 16384) or 'all'")
        bad = [s for s in opts.seqlen_list if s <= 0 or cfg["prefill"]["tokens"] % s]
        if bad:
            ap.error(f"--seqlens: {bad} do not divide the grid's {cfg['prefill']['tokens']} tokens")
    return opts, cfg


def main(argv=None):
    global torch
    opts, cfg = parse_args(argv)
    cells = select_cells(make_cells(cfg, opts.seqlen_list), opts.case_list, opts.patterns)
    if not cells:
        print(f"no cell matches --cases {opts.cases!r} --cells {opts.cells!r}")
        return 2
    if opts.dry_run:
        print(f"reps {opts.reps}, per graph {opts.per_graph}, rows {opts.rows}, peers {','.join(opts.peers) or 'none'}"
              f"{f', budget {opts.budget_s:g} s' if opts.budget_s else ''}{', smoke' if opts.smoke else ''}")
        print_cells(cells, opts.spec_extra, opts.peers)
        return 0
    try:
        import torch as torch_module
    except ImportError as e:
        print(f"PyTorch is needed to run the cells ({e}); --dry-run lists them without it")
        return 1
    torch = torch_module
    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 1
    torch.manual_seed(opts.seed)
    lib = opts.lib or default_lib()
    fj = Flashjit(lib, torch.cuda.current_device())
    version = fj.lib.flashjit_get_version()
    print(f"flashjit {version // 10000}.{version // 100 % 100}.{version % 100} from {lib} on {torch.cuda.get_device_name()} "
          f"(torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}); reps {opts.reps}, per graph "
          f"{opts.per_graph}, peers {','.join(opts.peers) or 'none'}{', smoke' if opts.smoke else ''}", flush=True)
    specs = compile_specs(fj, {s: None for c in cells for s in cell_specs(c, opts.spec_extra).values()})

    bench = Bench(fj, opts, cfg)
    rows = []
    for c in cells:
        t0 = time.time()
        print(f"{c['id']}: {describe(c)}", flush=True)
        try:
            rows.append(RUNNERS[c["case"]](bench, c, cell_specs(c, opts.spec_extra)))
        except Exception as e:  # noqa: BLE001 -- a cell that breaks is reported; the next one runs
            traceback.print_exc()
            bench.failed.append(f"{c['id']}: {short(e)}")
            row = new_row(c)
            row["error"] = short(e, 600)
            rows.append(row)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        print(f"    ({time.time() - t0:.0f} s; {time.time() - bench.started:.0f} s in all)", flush=True)

    lines, targets = tables(rows, bench.copy)
    print()
    print("\n".join(lines))
    print("targets (issue 39; reported, not failures):")
    print("\n".join(targets) if targets else "  none measured")
    cud = bench._cudnn if not isinstance(bench._cudnn, Exception) else None
    with open(opts.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "cudnn_frontend": getattr(cud, "frontend", None),
                   "cudnn_backend": getattr(cud, "backend", None), "flashjit": version, "lib": lib, "specs": specs,
                   "copy": bench.copy, "options": {k: v for k, v in vars(opts).items() if k not in ("patterns", "case_list")},
                   "rows": rows, "targets": targets, "failed": bench.failed,
                   "seconds": round(time.time() - bench.started, 1)}, f, indent=1)
    print(f"wrote {opts.out}")
    fj.close()
    if bench.failed:
        print("flashjit failures:\n  " + "\n  ".join(bench.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
