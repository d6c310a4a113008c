#!/usr/bin/env python3
"""Masks and score modifiers (issue 38, Targets): flashjit's sliding windows, learnable sinks, softcap and ALiBi
against their peers, in one process, on the same inputs (bf16, causal, bottom-right aligned).

  python3 bench/feature_peers.py --lib build/libflashjit.so --out features.json [--cases window,gptoss,costs]
                                 [--cells PATTERNS] [--peers cudnn,flex,fa2] [--reps 10] [--per-graph 5] [--smoke]
  python3 bench/feature_peers.py --dry-run [--smoke] [--cases ...] [--cells ...]   # the cells; no torch, no GPU

A window of W keys is passed as engines pass it, window_left = W - 1 with causal: row i (key position
p = i + s_k - s_q) sees keys p - (W - 1) .. p, W keys with itself. cuDNN's diagonal_band_left_bound counts
the same window as W (it keeps keys j > p - left_bound), flex_attention's mask_mod keeps p - j <= W - 1 and
FlashAttention-2 takes window_size_left = W - 1.

Cases (cell ids in brackets; --cells takes comma-separated fnmatch patterns on them):
  window  [window/d128/h32-8/k32k/w4096] a 4096-key window over 32k keys (batch 1, 32/8 heads, d128, causal):
          flashjit "...,causal=1,window=1" (window_left 4095); flashjit's plain causal kernel over the same
          32k keys (flashjit_causal); cuDNN's band (frontend sdpa: diagonal_alignment BOTTOM_RIGHT,
          diagonal_band_right_bound 0, diagonal_band_left_bound 4096); flex_attention (sliding-window mask_mod
          and its block mask); FlashAttention-2 (aten._flash_attention_forward, window_size_left 4095,
          window_size_right 0). Targets: TF/s over the visible FLOPs >= 0.95x the causal kernel's (over its
          own visible FLOPs), >= 1.1x cuDNN's, >= 2x flex_attention's.
  gptoss  gpt-oss's attention (d64, 64/8 heads), a 128-key window with sinks, and sinks alone (float32 [64]):
          [gptoss/prefill/...] one 8k prefill: flashjit dense ("...,causal=1[,window=1],sinks=1"), and the
          engine's varlen paged kernel beside it (flashjit_paged, page 16, shuffled page table; no target);
          cuDNN (sink_token (1, h, 1, 1) float32, the band as above); flex_attention (mask_mod; the sinks
          applied after it from its LSE, O x sigmoid(LSE - sink), that step timed with it); FlashAttention-2
          with the window and no sinks (window cell only: less work than the cell asks, checked against a
          reference without sinks, shown beside and left out of the target).
          [gptoss/decode/...] decode, batch 64 at 8k keys, one query each: flashjit paged (page 16, shuffled
          page table) split-KV ("...,varlen=1,paged=1,pack_gqa=1,split_kv=1[,window=1],sinks=1", PDL); the
          peers on a contiguous copy of the same keys (cuDNN dense, flex_attention's decode path, FA2 window
          only). The window cell also times flashjit over sequences of 128 keys with sinks and no window
          (flashjit_wkeys): a windowed decode reads only the window.
          Targets: flashjit >= 1.0x the best peer that computes the same attention (cuDNN, flex_attention:
          peer time / flashjit time); windowed decode within 1.1x of the 128-key decode.
  costs   what a feature costs: flashjit with it against flashjit without, same inputs, causal.
          [costs/softcap/d64] b2 x 8k 32/8, [costs/softcap/d128] b2 x 8k 16/8, [costs/softcap/d256] b4 x 4k 8/4
          (softcap 50; targets <= 8 %, 5 %, 5 %), [costs/sinks/d64] b1 x 8k 64/8 (<= 2 %), [costs/alibi/d128]
          b2 x 8k 16/8 (slopes 2^(-8 (h + 1) / H), the ones cuDNN builds in; <= 5 %). Peers beside, each
          against itself: cuDNN (softcap through score_mod: the frontend allows no other mask with a score
          modifier, so the causal mask goes into the modifier and cuDNN computes every block; sink_token;
          use_alibi_mask with top-left causal, the only alignment it takes with ALiBi), flex_attention
          (score_mod; sinks after it), FlashAttention-2 (alibi_slopes; it adds slope x j under causal, which
          shifts the LSE and leaves O as the reference's).

Timings: a CUDA graph of --per-graph calls replayed --reps times, the median (us a call). A peer whose calls
cannot be captured is timed with CUDA events around --per-graph calls instead, and its row says so. TF/s count
useful FLOPs only: 4 x d x heads_q x visible (query, key) pairs (the window's; the causal kernel's own).
flashjit is timed without LSE.

Every kernel is first checked on the same inputs: outputs poisoned (NaN), one call, O (and flashjit's LSE, the
sink in it) on sampled query rows against attention_ctypes.reference_rows in float64 (bf16 O rel-L2 6e-3, LSE
1e-4); a flashjit check that misses the bound, or a flashjit call that fails, makes the exit status 1; a peer's
is reported beside its timing, and a peer that fails (API mismatch, feature not supported) prints why while the
others go on. Targets are reported met / MISSED; they do not change the exit status. --budget-s: once a run has
taken that long, the peers of the remaining cells are skipped (flashjit still runs and is checked), so a run
keeps to its time. FEATURE_PEERS_TRACEBACK=1 prints a failing peer's traceback.
"""
import argparse
import functools
import inspect
import json
import math
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
from attention_ctypes import (FLAG_PDL, Flashjit, default_lib, dense_args, engine_args, float32,  # noqa: E402
                              reference_rows)
from peer_common import (checks_text, compile_specs, compare_bf16, fmt, i32, klabel, print_check_line,  # noqa: E402
                         ratio, sample_rows, select_cells, short, time_events, time_graph)

torch = None  # imported in main: --help and --dry-run work without it

CASES = ("window", "gptoss", "costs")
PEERS = ("cudnn", "flex", "fa2")
ELEM = 2  # bytes of a bf16
K1 = 1024
MAX_SPLITS = 64
SOFTCAP = 50.0
COST_GOALS = {("softcap", 64): 0.08, ("softcap", 128): 0.05, ("softcap", 256): 0.05, ("sinks", 64): 0.02,
              ("alibi", 128): 0.05}

FULL = dict(
    window=dict(b=1, s=32 * K1, hq=32, hkv=8, d=128, w=4096),
    gptoss=dict(hq=64, hkv=8, d=64, w=128, prefill=dict(b=1, s=8 * K1), decode=dict(b=64, sk=8 * K1, page=16)),
    costs=dict(softcap=[(64, 2, 8 * K1, 32, 8), (128, 2, 8 * K1, 16, 8), (256, 4, 4 * K1, 8, 4)],
               sinks=(64, 1, 8 * K1, 64, 8), alibi=(128, 2, 8 * K1, 16, 8)),
    rows=32, reps=10, per_graph=5,
)
SMOKE = dict(  # every path at a small size; the decode length does not fill its last page
    window=dict(b=1, s=2 * K1, hq=32, hkv=8, d=128, w=256),
    gptoss=dict(hq=64, hkv=8, d=64, w=128, prefill=dict(b=1, s=K1), decode=dict(b=4, sk=1000, page=16)),
    costs=dict(softcap=[(64, 1, K1, 32, 8), (128, 1, K1, 16, 8), (256, 1, 512, 8, 4)],
               sinks=(64, 1, K1, 64, 8), alibi=(128, 1, K1, 16, 8)),
    rows=8, reps=3, per_graph=2,
)


# ---- cells (no torch) ----------------------------------------------------------------------------------------
def visible_pairs(sq, sk, left=-1):
    """(query, key) pairs a causal mask with a window of left + 1 keys (left -1: none) lets through; row i at
    p = i + sk - sq sees max(0, p - left) <= j <= min(sk - 1, p)."""
    total = 0
    for i in range(sq):
        p = i + sk - sq
        lo = 0 if left < 0 else max(0, p - left)
        hi = min(sk - 1, p)
        if hi >= lo:
            total += hi - lo + 1
    return total


def spec_of(d, kind="dense", extra="", **features):
    """flashjit's spec: dense (causal), paged (varlen paged prefill) or decode (paged split-KV, GQA packed),
    with the feature keys asked for (window, softcap, sinks, alibi)."""
    parts = ["dtype=bf16", f"head_dim={d}", "causal=1"]
    if kind in ("paged", "decode"):
        parts += ["varlen=1", "paged=1"]
    if kind == "decode":
        parts += ["pack_gqa=1", "split_kv=1"]
    parts += [f"{key}=1" for key in ("window", "softcap", "sinks", "alibi") if features.get(key)]
    if extra:
        parts.append(extra)
    return ",".join(parts)


def new_cell(cid, case, kind, b, sq, sk, hq, hkv, d, **more):
    c = dict(id=cid, case=case, kind=kind, b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, w=0, sinks=False, feature=None,
             page=None, goal=None)
    c.update(more)
    return c


def make_cells(cfg):
    cells = []
    w = cfg["window"]
    cells.append(new_cell(f"window/d{w['d']}/h{w['hq']}-{w['hkv']}/k{klabel(w['s'])}/w{w['w']}", "window", "prefill",
                          w["b"], w["s"], w["s"], w["hq"], w["hkv"], w["d"], w=w["w"]))
    g = cfg["gptoss"]
    for win in (g["w"], 0):
        tag = f"window{win}+sinks" if win else "sinks"
        p = g["prefill"]
        cells.append(new_cell(f"gptoss/prefill/k{klabel(p['s'])}/{tag}", "gptoss", "prefill", p["b"], p["s"], p["s"],
                              g["hq"], g["hkv"], g["d"], w=win, sinks=True))
    for win in (g["w"], 0):
        tag = f"window{win}+sinks" if win else "sinks"
        p = g["decode"]
        cells.append(new_cell(f"gptoss/decode/b{p['b']}/k{klabel(p['sk'])}/{tag}", "gptoss", "decode", p["b"], 1,
                              p["sk"], g["hq"], g["hkv"], g["d"], w=win, sinks=True, page=p["page"]))
    c = cfg["costs"]
    shapes = [("softcap", s) for s in c["softcap"]] + [("sinks", c["sinks"]), ("alibi", c["alibi"])]
    for feature, (d, b, s, hq, hkv) in shapes:
        cells.append(new_cell(f"costs/{feature}/d{d}", "costs", "prefill", b, s, s, hq, hkv, d, feature=feature,
                              goal=COST_GOALS[(feature, d)]))
    return cells


def cell_specs(c, extra=""):
    """flashjit's kernels of a cell: name -> spec."""
    d = c["d"]
    if c["case"] == "window":
        return {"flashjit": spec_of(d, extra=extra, window=True), "flashjit_causal": spec_of(d, extra=extra)}
    if c["case"] == "gptoss":
        win = c["w"] > 0
        if c["kind"] == "prefill":
            return {"flashjit": spec_of(d, extra=extra, window=win, sinks=True),
                    "flashjit_paged": spec_of(d, "paged", extra, window=win, sinks=True)}
        specs = {"flashjit": spec_of(d, "decode", extra, window=win, sinks=True)}
        if win:
            specs["flashjit_wkeys"] = spec_of(d, "decode", extra, sinks=True)
        return specs
    return {"flashjit_off": spec_of(d, extra=extra), "flashjit_on": spec_of(d, extra=extra, **{c["feature"]: True})}


def cell_peers(c, peers):
    """The peers' entries of a cell (each name starts with its peer's)."""
    if c["case"] == "costs":
        names = [f"{p}_{s}" for p in ("cudnn", "flex") for s in ("off", "on")]
        if c["feature"] == "alibi":
            names += ["fa2_off", "fa2_on"]
    else:
        names = ["cudnn", "flex"] + (["fa2"] if c["w"] else [])
    return [n for n in names if n.split("_")[0] in peers]


def cell_flops(c):
    """Useful FLOPs of the cell's attention (window and causal)."""
    return 4.0 * c["d"] * c["hq"] * c["b"] * visible_pairs(c["sq"], c["sk"], c["w"] - 1 if c["w"] else -1)


def describe(c):
    shape = f"b{c['b']} q{c['sq']} k{c['sk']} h{c['hq']}/{c['hkv']} d{c['d']}"
    what = []
    if c["w"]:
        what.append(f"window {c['w']} (left {c['w'] - 1})")
    if c["sinks"]:
        what.append("sinks")
    if c["feature"]:
        what.append({"softcap": f"softcap {SOFTCAP:g}", "sinks": "sinks", "alibi": "ALiBi"}[c["feature"]]
                    + f" on/off, target cost <= {c['goal'] * 100:g} %")
    if c["page"]:
        what.append(f"paged {c['page']}, split-KV")
    return shape + ("; " + ", ".join(what) if what else "")


def print_cells(cells, extra, peers):
    print(f"{len(cells)} cells")
    for c in cells:
        print(f"  {c['id']:<40} {describe(c)}; {cell_flops(c) / 1e9:.1f} GFLOP visible")
        for name, spec in cell_specs(c, extra).items():
            print(f"      {name:<16} {spec}")
        names = cell_peers(c, peers)
        print(f"      peers            {', '.join(names) if names else '-'}")


# ---- helpers (torch) -------------------------------------------------------------------------------------------
def randn(*shape, gen):
    return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)


def mpt_slopes(hq):
    """ALiBi slopes 2^(-8 (h + 1) / H) (MPT, Bloom at a power of two heads; cuDNN's get_alibi_slope there)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / hq) for h in range(hq)], device="cuda", dtype=torch.float32)


def paged_copy(k, v, page, gen):
    """Page pools holding k and v [b, sk, h, d] (each sequence's last page zero-filled past its keys) through a
    shuffled page table: pool[table[i][j]] is page j of sequence i. Returns (k pool, v pool, table int32 [b, pages])."""
    b, sk, h, d = k.shape
    per = -(-sk // page)
    perm = torch.randperm(b * per, generator=gen).to("cuda")
    pools = []
    for t in (k, v):
        padded = t if per * page == sk else torch.cat([t, t.new_zeros(b, per * page - sk, h, d)], 1)
        pool = torch.empty(b * per, page, h, d, device="cuda", dtype=t.dtype)
        pool[perm] = padded.reshape(b * per, page, h, d)
        pools.append(pool)
    return pools[0], pools[1], perm.to(torch.int32).view(b, per).contiguous()


# ---- cuDNN through the frontend's Python graph API ---------------------------------------------------------------
class Cudnn:
    """cuDNN SDPA forward graphs (nvidia-cudnn-frontend, `import cudnn`) on [b, s, h, d] tensors seen as
    [b, h, s, d]. The masks and modifiers are the frontend's sdpa arguments: diagonal_alignment,
    diagonal_band_left_bound / diagonal_band_right_bound (the band), sink_token (float32 (1, h_q, 1, 1)),
    use_alibi_mask (its own slopes; right bound 0), score_mod (a callback building pointwise ops on the scaled
    scores; no other mask may be set with it)."""

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

    def _bhsd(self, g, name, t):
        b, s, h, d = t.shape
        return g.tensor(name=name, dim=[b, h, s, d], stride=[t.stride(0), t.stride(2), t.stride(1), 1],
                        data_type=self.c.data_type.BFLOAT16)

    def _scalar(self, g, name, value, pack):
        t = g.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True,
                     data_type=self.c.data_type.FLOAT)
        pack[t] = torch.full((1, 1, 1, 1), value, dtype=torch.float32)
        return t

    @staticmethod
    def _softcap_causal(graph, score, cap, neg_inf, c):
        """score_mod: cap x tanh(score / cap), then keys right of the diagonal to neg_inf (s_q == s_k)."""
        x = graph.div(a=score, b=cap)
        x = graph.tanh(input=x)
        x = graph.mul(a=x, b=cap)
        row = graph.gen_index(input=x, axis=2)
        row.set_data_type(c.data_type.INT32)
        col = graph.gen_index(input=x, axis=3)
        col.set_data_type(c.data_type.INT32)
        keep = graph.cmp_ge(input=row, comparison=col, compute_data_type=c.data_type.BOOLEAN)
        keep.set_data_type(c.data_type.BOOLEAN)
        return graph.binary_select(input0=x, input1=neg_inf, mask=keep)

    def dense(self, q4, k4, v4, o4, scale, *, left_bound=None, sinks=None, alibi=False, softcap=0.0, top_left=False):
        """A causal forward on q4, o4 [b, s_q, hq, d] and k4, v4 [b, s_k, hkv, d] (strided, d contiguous), the
        diagonal bottom-right (top_left: top-left, the same where s_q == s_k). left_bound: cuDNN's band (keys
        j > p - left_bound); sinks float32 [hq]; alibi: its ALiBi (top-left causal); softcap: through score_mod
        with the causal mask in it (s_q == s_k)."""
        c = self.c
        b, sq, hq, d = q4.shape
        g = self._graph()
        tq, tk, tv = self._bhsd(g, "Q", q4), self._bhsd(g, "K", k4), self._bhsd(g, "V", v4)
        pack = {}
        kw = dict(name="sdpa", q=tq, k=tk, v=tv, generate_stats=False, attn_scale=scale)
        if softcap > 0:
            assert sq == k4.shape[1], "the modifier's causal mask is top-left"
            cap, neg_inf = self._scalar(g, "softcap", softcap, pack), self._scalar(g, "neg_inf", -1e9, pack)
            kw["score_mod"] = functools.partial(self._softcap_causal, cap=cap, neg_inf=neg_inf, c=c)
        else:
            align = c.diagonal_alignment.TOP_LEFT if alibi or top_left else c.diagonal_alignment.BOTTOM_RIGHT
            kw.update(diagonal_alignment=align, diagonal_band_right_bound=0)
            if alibi:
                kw["use_alibi_mask"] = True
        if left_bound:
            kw["diagonal_band_left_bound"] = int(left_bound)
        if sinks is not None:
            ts = g.tensor(name="sink_token", dim=[1, hq, 1, 1], stride=[hq, 1, 1, 1], data_type=c.data_type.FLOAT)
            kw["sink_token"] = ts
            pack[ts] = sinks.float().view(1, hq, 1, 1).contiguous()
        to, _ = g.sdpa(**kw)
        to.set_output(True).set_dim([b, hq, sq, d]).set_stride([o4.stride(0), o4.stride(2), o4.stride(1), 1])
        to.set_data_type(c.data_type.BFLOAT16)
        pack.update({tq: q4, tk: k4, tv: v4, to: o4})
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


# ---- flex_attention -------------------------------------------------------------------------------------------------
class Flex:
    """torch.nn.attention.flex_attention, compiled once (dynamic=False; recompiles for each new shape, mask and
    modifier, so the recompile limits are raised); block masks cached by (s_q, s_k, window)."""

    def __init__(self):
        import torch._dynamo as dynamo
        from torch.nn.attention import flex_attention as fa
        for name, value in (("cache_size_limit", 64), ("recompile_limit", 64), ("accumulated_cache_size_limit", 512),
                            ("accumulated_recompile_limit", 512)):
            if hasattr(dynamo.config, name):
                setattr(dynamo.config, name, value)
        self.module = fa
        self.fn = torch.compile(fa.flex_attention, dynamic=False)
        self.aux = "return_aux" in inspect.signature(fa.flex_attention).parameters and hasattr(fa, "AuxRequest")
        self.masks = {}

    def block_mask(self, sq, sk, left):
        key = (sq, sk, left)
        if key not in self.masks:
            offset = sk - sq

            def causal(b, h, q_idx, kv_idx):
                return kv_idx <= q_idx + offset

            def window(b, h, q_idx, kv_idx):
                p = q_idx + offset
                return (kv_idx <= p) & (p - kv_idx <= left)
            self.masks[key] = self.module.create_block_mask(window if left >= 0 else causal, None, None, sq, sk,
                                                            device="cuda")
            torch.cuda.empty_cache()  # the dense mask it went through
        return self.masks[key]

    def __call__(self, q, k, v, block_mask, scale, score_mod=None, lse=False):
        """O [b, hq, s_q, d] (and LSE [b, hq, s_q], natural log) of q [b, hq, s_q, d] against k, v [b, hkv, s_k, d]."""
        kw = dict(score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
        if not lse:
            return self.fn(q, k, v, **kw)
        if self.aux:
            out, aux = self.fn(q, k, v, return_aux=self.module.AuxRequest(lse=True), **kw)
            return out, aux.lse
        return self.fn(q, k, v, return_lse=True, **kw)


def fa2_forward(q4, k4, v4, scale, **extra):
    """FlashAttention-2 as PyTorch ships it, dense and causal: aten::_flash_attention_forward(query, key, value,
    cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, *, scale, window_size_left,
    window_size_right, seqused_k, alibi_slopes) on [b, s, h, d]; returns O [b, s_q, hq, d]."""
    return torch.ops.aten._flash_attention_forward(q4, k4, v4, None, None, q4.shape[1], k4.shape[1], 0.0, True, False,
                                                   scale=scale, **extra)[0]


# ---- the harness -----------------------------------------------------------------------------------------------------
def new_row(c):
    return dict(id=c["id"], case=c["case"], kind=c["kind"], label=describe(c),
                shape={k: c[k] for k in ("b", "sq", "sk", "hq", "hkv", "d", "w", "page")},
                feature=c["feature"], goal=c["goal"], flops=cell_flops(c), specs={}, kernels={}, checks={}, impls={},
                variants={}, ratios={}, notes=[])


class Bench:
    def __init__(self, fj, opts, cfg):
        self.fj, self.opts = fj, opts
        self.reps, self.per_graph, self.rows = opts.reps, opts.per_graph, opts.rows
        self.rng = random.Random(opts.seed)
        self.gen = torch.Generator(device="cuda").manual_seed(opts.seed)
        self.cpu_gen = torch.Generator().manual_seed(opts.seed)
        self.failed = []  # flashjit checks and calls that failed: exit status 1
        self.workspaces = []  # flashjit's workspaces, alive to the end
        self.started = time.time()
        self._cudnn = self._flex = None

    # -- peers' set-up, once --
    def _once(self, attr, make, what):
        value = getattr(self, attr)
        if value is None:
            try:
                value = make()
            except Exception as e:  # noqa: BLE001
                value = RuntimeError(f"{what} unavailable: {short(e)}")
            setattr(self, attr, value)
            if isinstance(value, Cudnn):
                print(f"cuDNN frontend {value.frontend}, backend {value.backend}", flush=True)
            elif isinstance(value, Flex):
                print(f"flex_attention: torch.compile(dynamic=False), LSE through "
                      f"{'return_aux' if value.aux else 'return_lse'}", flush=True)
        if isinstance(value, Exception):
            raise value
        return value

    def cudnn(self):
        return self._once("_cudnn", Cudnn, "cudnn frontend")

    def flex(self):
        return self._once("_flex", Flex, "flex_attention")

    def over_budget(self):
        return self.opts.budget_s > 0 and time.time() - self.started > self.opts.budget_s

    # -- checks --
    def references(self, seqs, features):
        """[(sequence, rows, ref O, ref LSE)] for seqs = [(index, rows, q [s_q, hq, d], k [s_k, hkv, d], v)]."""
        out = []
        for i, rows, q, k, v in seqs:
            r = torch.tensor(rows, device="cuda", dtype=torch.long)
            out.append((i, r) + reference_rows(q, k, v, r, True, self.scale_of(q.shape[-1]), **features))
        torch.cuda.synchronize()
        return out

    @staticmethod
    def scale_of(d):
        return float32(1.0 / math.sqrt(d))

    compare = staticmethod(compare_bf16)

    @staticmethod
    def print_check(name, chk):
        print_check_line(name, chk, 28)

    # -- timing --
    def time(self, fn, flops, kv_bytes=None, events_ok=False):
        try:
            ms, how = time_graph(fn, self.reps, self.per_graph), "graph"
        except Exception as e:  # noqa: BLE001
            if not events_ok:
                raise
            torch.cuda.synchronize()
            ms, how = time_events(fn, self.reps, self.per_graph), f"events (no graph: {short(e, 160)})"
        out = {"us": round(ms * 1e3, 2), "tflops": round(flops / ms / 1e9, 1), "timing": how}
        if kv_bytes:
            out["kv_tbps"] = round(kv_bytes / ms / 1e9, 3)
        return out

    @staticmethod
    def print_timing(name, p, extra=""):
        how = "" if p.get("timing") == "graph" else f"  [{p.get('timing')}]"
        kv = f"  K/V {p['kv_tbps']:.2f} TB/s" if "kv_tbps" in p else ""
        print(f"    {name:<28} {p['us']:10.1f} us  {p['tflops']:7.1f} TF/s{kv}{extra}{how}", flush=True)

    # -- flashjit --
    def ours(self, row, name, spec, args_check, args_time, keep, poison, get, samples, flops=None, kv_bytes=None,
             metadata=False):
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
            chk = row["checks"][name] = self.compare(samples, get, True)
            self.print_check(name, chk)
            if not chk["ok"]:
                self.failed.append(f"{row['id']} {name}: check failed (O err {chk['o_err']:.2e}, LSE err {chk['lse_err']:.2e})")
            row["kernels"][name] = self.fj.launch_spec(spec, args_time)
            p = row["impls"][name] = self.time(self.fj.launcher(spec, args_time, tuple(keep) + (ws,)),
                                               flops or row["flops"], kv_bytes)
            self.print_timing(name, p, f"  [{row['kernels'][name]}]")
        except Exception as e:  # noqa: BLE001
            row["impls"][name] = {"error": short(e, 600)}
            self.failed.append(f"{row['id']} {name}: {short(e)}")
            print(f"    {name}: FAILED {short(e, 600)}", flush=True)

    # -- peers --
    def peer(self, row, name, builds, samples, flops=None, kv_bytes=None):
        """A peer: builds = [(variant, build), ...], build() -> (fn, poison, get), tried in order until one builds
        and matches the reference (the last one is reported whatever its check says); one call checked (O only),
        then timed. Any failure is printed and recorded; the others go on."""
        if name.split("_")[0] not in self.opts.peers:
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
                chk = self.compare(samples, get, False)
                self.print_check(title, chk)
                if not chk["ok"] and not last:
                    print(f"    {title}: output differs from the reference; trying {builds[n + 1][0]}", flush=True)
                    continue
                row["checks"][name] = chk
                if variant:
                    row["variants"][name] = variant
                p = row["impls"][name] = self.time(fn, flops or row["flops"], kv_bytes, events_ok=True)
                self.print_timing(name, p, f"  [{variant}]" if variant else "")
                return
            except Exception as e:  # noqa: BLE001
                print(f"    {title}: {short(e, 600)}", flush=True)
                if os.environ.get("FEATURE_PEERS_TRACEBACK"):
                    traceback.print_exc()
                if last:
                    row["impls"][name] = {"error": short(e, 600)}
            finally:
                torch.cuda.synchronize()


# ---- the peers' builds -------------------------------------------------------------------------------------------------
def cudnn_builds(bench, label, q4, k4, v4, scale, **kw):
    """cuDNN with the diagonal bottom-right, then (a fallback where s_q == s_k: the same mask) top-left."""
    builds = [(label + ", bottom-right", cudnn_build(bench, q4, k4, v4, scale, **kw))]
    if q4.shape[1] == k4.shape[1] and not kw.get("alibi") and not kw.get("softcap"):
        builds.append((label + ", top-left", cudnn_build(bench, q4, k4, v4, scale, top_left=True, **kw)))
    return builds


def cudnn_build(bench, q4, k4, v4, scale, **kw):
    def build():
        o4 = torch.empty_like(q4)
        fn = bench.cudnn().dense(q4, k4, v4, o4, scale, **kw)
        fn.held = (fn.held, o4)
        return fn, lambda: o4.fill_(float("nan")), lambda i, r: (o4[i][r], None)
    return build


def flex_builds(bench, q4, k4, v4, scale, left=-1, sinks=None, score_mod=None):
    """flex_attention on [b, h, s, d] views of the [b, s, h, d] tensors, then (a fallback) on contiguous copies.
    sinks: applied after it from its LSE, O x sigmoid(LSE - sink) (in float32, then bf16), in the timed call."""
    sq, sk, hq = q4.shape[1], k4.shape[1], q4.shape[2]

    def build_for(copy):
        def build():
            flex = bench.flex()
            mask = flex.block_mask(sq, sk, left)
            qt, kt, vt = (t.transpose(1, 2) for t in (q4, k4, v4))
            if copy:
                qt, kt, vt = qt.contiguous(), kt.contiguous(), vt.contiguous()
            held = {}
            sink = sinks.float().view(1, hq, 1) if sinks is not None else None

            def fn():
                if sink is None:
                    held["o"] = flex(qt, kt, vt, mask, scale, score_mod)
                else:
                    out, lse = flex(qt, kt, vt, mask, scale, score_mod, lse=True)
                    held["o"] = (out.float() * torch.sigmoid(lse - sink).unsqueeze(-1)).to(torch.bfloat16)
            fn.held = (qt, kt, vt, mask, sink)
            return fn, held.clear, lambda i, r: (held["o"][i][:, r].transpose(0, 1), None)
        return build
    return [("bhsd views", build_for(False)), ("bhsd copies", build_for(True))]


def fa2_build(q4, k4, v4, scale, **extra):
    def build():
        held = {}

        def fn():
            held["o"] = fa2_forward(q4, k4, v4, scale, **extra)
        return fn, held.clear, lambda i, r: (held["o"][i][r], None)
    return build


def softcap_mod(score, b, h, q_idx, kv_idx):
    return SOFTCAP * torch.tanh(score / SOFTCAP)


def alibi_mod(slopes, offset):
    def mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx + offset - kv_idx).abs()
    return mod


# ---- the cells -----------------------------------------------------------------------------------------------------------
class Dense:
    """One cell's dense tensors: Q, O [b, s_q, hq, d], K, V [b, s_k, hkv, d], LSE [b, hq, s_q], and the rows
    checked (sequence 0 and the last)."""

    def __init__(self, bench, c):
        b, sq, sk, hq, hkv, d = (c[k] for k in ("b", "sq", "sk", "hq", "hkv", "d"))
        g = bench.gen
        self.q, self.k, self.v = randn(b, sq, hq, d, gen=g), randn(b, sk, hkv, d, gen=g), randn(b, sk, hkv, d, gen=g)
        self.o = torch.empty_like(self.q)
        self.lse = torch.empty(b, hq, sq, device="cuda", dtype=torch.float32)
        self.picks = [(i, sample_rows(sq, bench.rows, bench.rng)) for i in sorted({0, b - 1})]
        self.bench, self.scale = bench, bench.scale_of(d)

    def samples(self, features):
        return self.bench.references([(i, rows, self.q[i], self.k[i], self.v[i]) for i, rows in self.picks], features)

    def poison(self):
        self.o.fill_(float("nan"))
        self.lse.fill_(float("nan"))

    def get(self, i, r):
        return self.o[i][r], self.lse[i][:, r].t()

    def flashjit(self, row, name, spec, features, samples, flops=None):
        a_check = dense_args(self.q, self.k, self.v, self.o, self.lse, self.scale, **features)
        a_time = dense_args(self.q, self.k, self.v, self.o, None, self.scale, **features)
        keep = (self.q, self.k, self.v, self.o, self.lse) + tuple(t for t in features.values() if hasattr(t, "data_ptr"))
        self.bench.ours(row, name, spec, a_check, a_time, keep, self.poison, self.get, samples, flops)


def run_window(bench, c, specs):
    row = new_row(c)
    t = Dense(bench, c)
    left = c["w"] - 1
    features = dict(window=(left, 0))
    samples = t.samples(features)
    t.flashjit(row, "flashjit", specs["flashjit"], features, samples)
    causal_flops = 4.0 * c["d"] * c["hq"] * c["b"] * visible_pairs(c["sq"], c["sk"])
    row["flops_causal"] = causal_flops
    t.flashjit(row, "flashjit_causal", specs["flashjit_causal"], {}, t.samples({}), causal_flops)
    bench.peer(row, "cudnn", cudnn_builds(bench, "band", t.q, t.k, t.v, t.scale, left_bound=c["w"]), samples)
    bench.peer(row, "flex", flex_builds(bench, t.q, t.k, t.v, t.scale, left=left), samples)
    bench.peer(row, "fa2", [("window_size_left/right", fa2_build(t.q, t.k, t.v, t.scale, window_size_left=left,
                                                                  window_size_right=0))], samples)
    for key, other in (("x_causal", "flashjit_causal"), ("x_cudnn", "cudnn"), ("x_flex", "flex"), ("x_fa2", "fa2")):
        ratio(row, key, "flashjit", other)
    return row


def gptoss_sinks(bench, hq):
    """gpt-oss-like sink logits: one a head, uniform in [0, 8) (a 128-key window's LSE is about 5, 8k keys' 9)."""
    return (torch.rand(hq, generator=bench.gen, device="cuda") * 8.0).float()


def best_peer(row, names):
    """(name, us) of the fastest peer among names that passed its check, or None."""
    best = None
    for n in names:
        p, chk = row["impls"].get(n, {}), row["checks"].get(n, {})
        if p.get("us") and chk.get("ok") and (best is None or p["us"] < best[1]):
            best = (n, p["us"])
    return best


def peer_ratios(row, names=("cudnn", "flex", "fa2")):
    for n in names:
        ratio(row, f"x_{n}", "flashjit", n, "us", invert=True)
    best = best_peer(row, ("cudnn", "flex"))
    ours = row["impls"].get("flashjit", {}).get("us") if row["checks"].get("flashjit", {}).get("ok") else None
    row["ratios"]["best_peer"] = best[0] if best else None
    row["ratios"]["x_best"] = round(best[1] / ours, 3) if best and ours else None


def run_gptoss_prefill(bench, c, specs):
    row = new_row(c)
    t = Dense(bench, c)
    sinks = gptoss_sinks(bench, c["hq"])
    left = c["w"] - 1 if c["w"] else -1
    features = dict(sinks=sinks, **(dict(window=(left, 0)) if c["w"] else {}))
    samples = t.samples(features)
    t.flashjit(row, "flashjit", specs["flashjit"], features, samples)
    # the engine's kernel: packed queries, a shuffled paged copy of the same keys
    b, sq, sk, hq, d = c["b"], c["sq"], c["sk"], c["hq"], c["d"]
    pk, pv, table = paged_copy(t.k, t.v, 16, bench.cpu_gen)
    qp, op = t.q.view(b * sq, hq, d), torch.empty(b * sq, hq, d, device="cuda", dtype=torch.bfloat16)
    lp = torch.empty(hq, b * sq, device="cuda", dtype=torch.float32)
    cu = list(range(0, b * sq + 1, sq))
    cu_t, used = i32(cu), i32([sk] * b)
    bounds = dict(seqlen_q=sq, seqlen_k=sk, cu_seqlens_q=cu_t, seqused_k=used, block_table=table, scale=t.scale,
                  **features)

    def poison():
        op.fill_(float("nan"))
        lp.fill_(float("nan"))
    bench.ours(row, "flashjit_paged", specs["flashjit_paged"], engine_args(qp, pk, pv, op, lp, **bounds),
               engine_args(qp, pk, pv, op, None, **bounds), (qp, pk, pv, op, lp, cu_t, used, table, sinks), poison,
               lambda i, r: (op[cu[i] + r], lp[:, cu[i] + r].t()), samples, metadata=True)
    bench.peer(row, "cudnn", cudnn_builds(bench, "sink_token" + (", band" if c["w"] else ""), t.q, t.k, t.v, t.scale,
                                          left_bound=c["w"] or None, sinks=sinks), samples)
    bench.peer(row, "flex", flex_builds(bench, t.q, t.k, t.v, t.scale, left=left, sinks=sinks), samples)
    if c["w"]:
        bench.peer(row, "fa2", [("window only, no sinks", fa2_build(t.q, t.k, t.v, t.scale, window_size_left=left,
                                                                      window_size_right=0))],
                   t.samples(dict(window=(left, 0))))
    peer_ratios(row)
    ratio(row, "paged_over_dense", "flashjit_paged", "flashjit")
    return row


def run_gptoss_decode(bench, c, specs):
    row = new_row(c)
    b, sk, hq, hkv, d, page, w = c["b"], c["sk"], c["hq"], c["hkv"], c["d"], c["page"], c["w"]
    g = bench.gen
    scale = bench.scale_of(d)
    k, v = randn(b, sk, hkv, d, gen=g), randn(b, sk, hkv, d, gen=g)  # the peers' contiguous keys
    pk, pv, table = paged_copy(k, v, page, bench.cpu_gen)
    q = randn(b, hq, d, gen=g)  # packed: one query a sequence
    o, lse = torch.empty_like(q), torch.empty(hq, b, device="cuda", dtype=torch.float32)
    cu_t, used = i32(list(range(b + 1))), i32([sk] * b)
    sinks = gptoss_sinks(bench, hq)
    left = w - 1 if w else -1
    features = dict(sinks=sinks, **(dict(window=(left, 0)) if w else {}))
    picks = sorted({0, b - 1, bench.rng.randrange(b)})
    samples = bench.references([(i, [0], q[i:i + 1], k[i], v[i]) for i in picks], features)
    visible = min(sk, w) if w else sk
    kv_bytes = 2.0 * b * visible * hkv * d * ELEM  # K and V of the keys the rows see
    row["kv_bytes"] = kv_bytes

    def poison():
        o.fill_(float("nan"))
        lse.fill_(float("nan"))

    def get(i, r):
        return o[i + r], lse[:, i + r].t()

    def args(keys, used_t, feats, with_lse):
        return engine_args(q, pk, pv, o, lse if with_lse else None, seqlen_q=1, seqlen_k=keys, cu_seqlens_q=cu_t,
                           seqused_k=used_t, block_table=table, scale=scale, flags=FLAG_PDL, max_splits=MAX_SPLITS,
                           **feats)
    keep = (q, pk, pv, o, lse, cu_t, used, table, sinks)
    bench.ours(row, "flashjit", specs["flashjit"], args(sk, used, features, True), args(sk, used, features, False),
               keep, poison, get, samples, kv_bytes=kv_bytes, metadata=True)
    if w:  # the same kernel family over sequences of w keys (their first w), sinks and no window
        used_w = i32([w] * b)
        samples_w = bench.references([(i, [0], q[i:i + 1], k[i][:w], v[i][:w]) for i in picks], dict(sinks=sinks))
        bench.ours(row, "flashjit_wkeys", specs["flashjit_wkeys"], args(w, used_w, dict(sinks=sinks), True),
                   args(w, used_w, dict(sinks=sinks), False), keep + (used_w,), poison, get, samples_w,
                   kv_bytes=kv_bytes, metadata=True)
        ratio(row, "window_over_wkeys", "flashjit", "flashjit_wkeys", "us")
    q4 = q.view(b, 1, hq, d)
    bench.peer(row, "cudnn", cudnn_builds(bench, "sink_token" + (", band" if w else "") + ", contiguous K/V", q4, k, v,
                                          scale, left_bound=w or None, sinks=sinks), samples, kv_bytes=kv_bytes)
    bench.peer(row, "flex", flex_builds(bench, q4, k, v, scale, left=left, sinks=sinks), samples, kv_bytes=kv_bytes)
    if w:
        bench.peer(row, "fa2", [("window only, no sinks, contiguous K/V",
                                 fa2_build(q4, k, v, scale, window_size_left=left, window_size_right=0))],
                   bench.references([(i, [0], q[i:i + 1], k[i], v[i]) for i in picks], dict(window=(left, 0))),
                   kv_bytes=kv_bytes)
    peer_ratios(row)
    return row


def run_cost(bench, c, specs):
    row = new_row(c)
    t = Dense(bench, c)
    feature, hq = c["feature"], c["hq"]
    on, cudnn_kw, flex_kw, fa2_kw = {}, {}, {}, None
    if feature == "softcap":
        on, cudnn_kw, flex_kw = dict(softcap=SOFTCAP), dict(softcap=SOFTCAP), dict(score_mod=softcap_mod)
    elif feature == "sinks":
        sinks = gptoss_sinks(bench, hq)
        on, cudnn_kw, flex_kw = dict(sinks=sinks), dict(sinks=sinks), dict(sinks=sinks)
    else:
        slopes = mpt_slopes(hq)
        on, cudnn_kw = dict(alibi_slopes=slopes), dict(alibi=True)
        flex_kw, fa2_kw = dict(score_mod=alibi_mod(slopes, c["sk"] - c["sq"])), dict(alibi_slopes=slopes)
    samples_off, samples_on = t.samples({}), t.samples(on)
    t.flashjit(row, "flashjit_off", specs["flashjit_off"], {}, samples_off)
    t.flashjit(row, "flashjit_on", specs["flashjit_on"], on, samples_on)
    bench.peer(row, "cudnn_off", cudnn_builds(bench, "causal", t.q, t.k, t.v, t.scale), samples_off)
    label = {"softcap": "score_mod: softcap and the causal mask", "sinks": "sink_token, causal",
             "alibi": "use_alibi_mask, causal"}[feature]
    bench.peer(row, "cudnn_on", cudnn_builds(bench, label, t.q, t.k, t.v, t.scale, **cudnn_kw), samples_on)
    bench.peer(row, "flex_off", flex_builds(bench, t.q, t.k, t.v, t.scale), samples_off)
    bench.peer(row, "flex_on", flex_builds(bench, t.q, t.k, t.v, t.scale, **flex_kw), samples_on)
    if fa2_kw is not None:
        bench.peer(row, "fa2_off", [("causal", fa2_build(t.q, t.k, t.v, t.scale))], samples_off)
        bench.peer(row, "fa2_on", [("alibi_slopes", fa2_build(t.q, t.k, t.v, t.scale, **fa2_kw))], samples_on)
    for who in ("flashjit", "cudnn", "flex", "fa2"):
        r = ratio(row, f"{who}_on_over_off", f"{who}_on", f"{who}_off", "us")
        row["ratios"][f"cost_{who}"] = round(r - 1.0, 4) if r is not None else None
    for who in ("cudnn", "flex", "fa2"):
        ratio(row, f"x_{who}_on", "flashjit_on", f"{who}_on", "us", invert=True)
    return row


RUNNERS = {("window", "prefill"): run_window, ("gptoss", "prefill"): run_gptoss_prefill,
           ("gptoss", "decode"): run_gptoss_decode, ("costs", "prefill"): run_cost}


# ---- the summary ---------------------------------------------------------------------------------------------------------
def verdict(what, value, goal, higher=True, unit="", scale=1.0):
    if value is None:
        return f"  {what}: no figure (target {'>=' if higher else '<='} {goal * scale:g}{unit})"
    met = value >= goal if higher else value <= goal
    shown = f"{value * scale:+.1f}" if unit.strip() == "%" else f"{value * scale:.3f}"
    return (f"  {what}: {shown}{unit} target {'>=' if higher else '<='} {goal * scale:g}{unit}: "
            f"{'met' if met else 'MISSED'}")


def tables(rows):
    lines, targets = [], []
    imp = lambda r, n, f: r["impls"].get(n, {}).get(f)  # noqa: E731
    win = [r for r in rows if r["case"] == "window"]
    if win:
        lines.append(f"{'window (TF/s over the visible FLOPs, graph)':<44} {'flashjit':>8} {'causal':>7} {'cudnn':>7} "
                     f"{'flex':>7} {'fa2':>7}  x causal x cudnn  x flex   x fa2  checks")
        for r in win:
            x = r["ratios"]
            lines.append(f"  {r['id']:<42} {fmt(imp(r, 'flashjit', 'tflops'), width=8)} "
                         + " ".join(fmt(imp(r, n, "tflops")) for n in ("flashjit_causal", "cudnn", "flex", "fa2"))
                         + f"  {fmt(x.get('x_causal'), '.3f', 8)} {fmt(x.get('x_cudnn'), '.3f', 7)} "
                         f"{fmt(x.get('x_flex'), '.3f', 7)} {fmt(x.get('x_fa2'), '.3f', 7)}  {checks_text(r)}")
            targets.append(verdict(f"{r['id']}: flashjit window / flashjit causal (TF/s)", x.get("x_causal"), 0.95))
            targets.append(verdict(f"{r['id']}: flashjit / cuDNN band", x.get("x_cudnn"), 1.1))
            targets.append(verdict(f"{r['id']}: flashjit / flex_attention", x.get("x_flex"), 2.0))
    gpt = [r for r in rows if r["case"] == "gptoss"]
    if gpt:
        lines.append(f"{'gpt-oss (us a call, graph)':<44} {'flashjit':>8} {'paged':>7} {'wkeys':>7} {'cudnn':>7} "
                     f"{'flex':>7} {'fa2*':>7}  x best (peer)   x fa2*  checks")
        for r in gpt:
            x = r["ratios"]
            lines.append(f"  {r['id']:<42} {fmt(imp(r, 'flashjit', 'us'), width=8)} "
                         + " ".join(fmt(imp(r, n, "us")) for n in ("flashjit_paged", "flashjit_wkeys", "cudnn", "flex", "fa2"))
                         + f"  {fmt(x.get('x_best'), '.3f', 7)} ({x.get('best_peer') or '-':<5}) "
                         f"{fmt(x.get('x_fa2'), '.3f', 7)}  {checks_text(r)}")
            targets.append(verdict(f"{r['id']}: flashjit / best peer computing the same attention "
                                   f"({x.get('best_peer') or 'none'}; peer us / flashjit us)", x.get("x_best"), 1.0))
            if r["ratios"].get("window_over_wkeys") is not None or r["impls"].get("flashjit_wkeys"):
                targets.append(verdict(f"{r['id']}: windowed decode / decode of {r['shape']['w']} keys (time)",
                                       x.get("window_over_wkeys"), 1.1, higher=False))
        lines.append("  (fa2*: FlashAttention-2 with the window and no sinks, less work than the cell: beside, not in "
                     "the target; wkeys: flashjit over sequences of the window's length, no window)")
    costs = [r for r in rows if r["case"] == "costs"]
    if costs:
        lines.append(f"{'costs (us a call, graph; cost = on / off - 1)':<44} {'fj off':>8} {'fj on':>7} {'cost':>7}  "
                     f"{'cudnn':>7} {'on':>7} {'cost':>7}  {'flex':>7} {'on':>7} {'cost':>7}  {'fa2':>7} {'on':>7} "
                     f"{'cost':>7}  checks")
        for r in costs:
            x = r["ratios"]
            cells = []
            for who in ("flashjit", "cudnn", "flex", "fa2"):
                cost = x.get(f"cost_{who}")
                cost_text = f"{cost * 100:+6.1f}%" if cost is not None else f"{'-':>7}"
                cells.append(f"{fmt(imp(r, who + '_off', 'us'), width=8 if who == 'flashjit' else 7)} "
                             f"{fmt(imp(r, who + '_on', 'us'))} {cost_text}")
            lines.append(f"  {r['id']:<42} " + "  ".join(cells) + f"  {checks_text(r)}")
            targets.append(verdict(f"{r['id']}: flashjit's cost of {r['feature']}", x.get("cost_flashjit"), r["goal"],
                                   higher=False, unit=" %", scale=100.0))
        lines.append("  (cudnn's softcap goes through score_mod, which takes no other mask: the causal mask is in the "
                     "modifier and every block is computed)")
    return lines, targets


# ---- main ---------------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    first, _, rest = __doc__.partition("\n\n")
    ap = argparse.ArgumentParser(description=first, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    ap.add_argument("--lib", default=None, help="path to libflashjit.so (default: build/libflashjit.so if there)")
    ap.add_argument("--out", default="features.json", help="JSON results (default features.json)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ",".join(CASES))
    ap.add_argument("--cells", default="", help="comma-separated fnmatch patterns on cell ids (e.g. 'gptoss/decode/*,"
                    "costs/softcap/*'); default all of --cases")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers to run: " + ",".join(PEERS)
                    + " (none: flashjit only)")
    ap.add_argument("--reps", type=int, default=None, help="graph replays a kernel, median (default 10; smoke 3)")
    ap.add_argument("--per-graph", type=int, default=None, help="calls captured per graph (default 5; smoke 2)")
    ap.add_argument("--rows", type=int, default=None, help="query rows checked per sampled sequence (default 32; smoke 8)")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="seconds after which the remaining cells' peers are skipped (flashjit still runs); 0: none")
    ap.add_argument("--spec-extra", default="", help="keys added to every flashjit spec (an A/B in one build)")
    ap.add_argument("--smoke", action="store_true", help="every cell at a small size (seconds)")
    ap.add_argument("--dry-run", action="store_true", help="list the cells, their specs and peers and exit (no torch)")
    ap.add_argument("--seed", type=int, default=38)
    opts = ap.parse_args(argv)
    cfg = SMOKE if opts.smoke else FULL
    opts.reps = opts.reps or cfg["reps"]
    opts.per_graph = opts.per_graph or cfg["per_graph"]
    opts.rows = opts.rows or cfg["rows"]
    if opts.reps < 1 or opts.per_graph < 1 or opts.rows < 4:
        ap.error("--reps and --per-graph: at least 1; --rows: at least 4")
    opts.case_list = [c.strip() for c in opts.cases.split(",") if c.strip()]
    unknown = [c for c in opts.case_list if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {','.join(CASES)}")
    opts.peers = [p.strip() for p in opts.peers.split(",") if p.strip() and p.strip() != "none"]
    unknown = [p for p in opts.peers if p not in PEERS]
    if unknown:
        ap.error(f"unknown peer(s) {unknown}; known: {','.join(PEERS)}")
    opts.patterns = [p.strip() for p in opts.cells.split(",") if p.strip()]
    return opts, cfg


def main(argv=None):
    global torch
    opts, cfg = parse_args(argv)
    cells = select_cells(make_cells(cfg), opts.case_list, opts.patterns)
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
            rows.append(RUNNERS[(c["case"], c["kind"])](bench, c, cell_specs(c, opts.spec_extra)))
        except Exception as e:  # noqa: BLE001 -- a cell that breaks is reported; the next one runs
            traceback.print_exc()
            bench.failed.append(f"{c['id']}: {short(e)}")
            row = new_row(c)
            row["error"] = short(e, 600)
            rows.append(row)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        print(f"    ({time.time() - t0:.0f} s; {time.time() - bench.started:.0f} s in all)", flush=True)

    lines, targets = tables(rows)
    print()
    print("\n".join(lines))
    print("targets (issue 38; reported, not failures):")
    print("\n".join(targets) if targets else "  none measured")
    cud = bench._cudnn if not isinstance(bench._cudnn, Exception) else None
    with open(opts.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "cudnn_frontend": getattr(cud, "frontend", None),
                   "cudnn_backend": getattr(cud, "backend", None), "flashjit": version, "lib": lib, "specs": specs,
                   "options": {k: v for k, v in vars(opts).items() if k not in ("patterns", "case_list")},
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
