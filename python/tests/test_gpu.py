#!/usr/bin/env python3
"""GPU tests of the flashjit package on a Hopper GPU with torch: every entry point against attention in
float64 and against torch SDPA on the same inputs, varlen with empty sequences, paged KV with shuffled pages
(page sizes 16, 64 and 7), GQA, LSE, torch.compile(fullgraph=True), a CUDA graph captured once and replayed
with new lengths, prewarm(load=True) before a capture, and wrong inputs raising errors that name them. An FP8
K/V cache (torch.float8_e4m3fn under a bf16 or fp16 q, FA3's k_descale / v_descale) against float64 on the
dequantised cache: paged (16, 64), packed and dense, descales per tensor, per K/V head and FA3's [batch,
heads_kv], through the fast path, torch.compile and a graph replay. V narrower than Q (FA3's head_dim_v:
192/128, 320/256, 128/64, padded 100/36) through all three functions, paged and split, out given. FP8 operands (q, k and v all
torch.float8_e4m3fn, FA3's FP8 with q_descale / k_descale / v_descale) against float64 on the dequantised inputs
within 2^-4 (P is rounded to e4m3 as FA3 does; src/verify/check.hpp's kFp8OperandsOErrorBound): dense, varlen
paged with an fp16 out, kvcache split-KV decode, the fast path, torch.compile, a graph replay, and the errors. FA3's
qv (the split MLA form, spec key qv=1; the "qv ..." cases): flash_attn_with_kvcache on a paged latent cache whose two
views are k_cache and v_cache (heads 16 and 128, 1 and 2 causal queries, pages of 64, q and qv views of one buffer or
apart, the fast path), flash_attn_varlen_func at 64 + 128 (packed, ragged) and on the paged latent cache, against
float64 on [qv | q] and [v | k] with V = v; torch.compile; the errors naming qv.

  python3 python/tests/test_gpu.py --lib build/libflashjit.so      # the source tree's package on that library
  python3 python/tests/test_gpu.py                                  # the installed wheel's package
  bash python/tests/wheel_check.sh BUILD_DIR --gpu                  # the wheel built, installed, tested here

Prints a pass/fail table; exits 1 on any failure. Without torch or a GPU it exits 0 with a notice, unless
FLASHJIT_REQUIRE_TORCH=1 (what a GPU run sets, so that it cannot pass by skipping): then it fails."""
import argparse
import math
import os
import random
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
O_BOUND = {"bf16": 6e-3, "fp16": 1e-3}  # relative L2 error of O against float64 (as src/verify/check.hpp)
LSE_BOUND = 1e-4                        # largest relative error of the LSE (1 below |LSE| = 1)
PEER_FACTOR = 2.0                       # ours may be at most this many times SDPA's own error (plus the bound / 4)
torch = flashjit = None
results = []


suffix = ""  # appended to the names the cases report (a case run again under another setting)


def report(name, ok, detail=""):
    name += suffix
    results.append((name, ok, detail))
    print(f"{'ok  ' if ok else 'FAIL'} {name:<52} {detail}", flush=True)


# ---- references ------------------------------------------------------------------------------------
def mask_of(sq, sk, causal, device):
    """Bottom-right causal: query i sees keys j <= i + sk - sq."""
    if not causal:
        return None
    i = torch.arange(sq, device=device).view(-1, 1)
    j = torch.arange(sk, device=device).view(1, -1)
    return j <= i + (sk - sq)


def reference(q, k, v, causal, scale):
    """One sequence, q [sq, hq, d], k [sk, hkv, d], v [sk, hkv, dv] (dv: d or below): (O [sq, hq, dv], LSE
    [sq, hq]) in float64; a row that sees no key has O = 0 and LSE = -inf."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    o = torch.zeros(sq, hq, v.shape[-1], dtype=torch.float64, device=q.device)
    lse = torch.full((sq, hq), float("-inf"), dtype=torch.float64, device=q.device)
    if sq == 0 or sk == 0:
        return o, lse
    qd = q.double().transpose(0, 1)                                 # [hq, sq, d]
    kd = k.double().transpose(0, 1).repeat_interleave(hq // hkv, 0)  # [hq, sk, d]
    vd = v.double().transpose(0, 1).repeat_interleave(hq // hkv, 0)
    s = qd @ kd.transpose(-1, -2) * scale
    m = mask_of(sq, sk, causal, q.device)
    if m is not None:
        s = s.masked_fill(~m, float("-inf"))
    l = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - l.unsqueeze(-1)), nan=0.0)
    return (p @ vd).transpose(0, 1), l.transpose(0, 1)


def sdpa(q, k, v, causal, scale):
    """torch SDPA on the same 16-bit inputs (one sequence), the peer; rows without keys left at 0."""
    import torch.nn.functional as F
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    if sq == 0 or sk == 0:
        return q.new_zeros(sq, hq, v.shape[-1])
    qd = q.transpose(0, 1).unsqueeze(0)
    kd = k.transpose(0, 1).repeat_interleave(hq // hkv, 0).unsqueeze(0)
    vd = v.transpose(0, 1).repeat_interleave(hq // hkv, 0).unsqueeze(0)
    m = mask_of(sq, sk, causal, q.device)
    o = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=m, scale=scale)[0].transpose(0, 1)
    if m is not None:
        o = torch.where(m.any(-1).view(-1, 1, 1), o, torch.zeros_like(o))
    return o


class Errors:
    """Accumulates O's relative L2 error (ours and SDPA's, against float64), our O against SDPA's, and the
    LSE's largest relative error, over the sequences added."""

    def __init__(self, dtype_name):
        self.bound = O_BOUND[dtype_name]
        self.d2 = self.r2 = self.p2 = self.x2 = 0.0
        self.lse = 0.0
        self.nan = False

    def add(self, o, q, k, v, causal, scale, lse=None):
        ref_o, ref_lse = reference(q, k, v, causal, scale)
        peer = sdpa(q, k, v, causal, scale).double()
        od = o.double()
        self.nan |= bool(torch.isnan(od).any())
        self.d2 += float(((od - ref_o) ** 2).sum())
        self.r2 += float((ref_o ** 2).sum())
        self.p2 += float(((peer - ref_o) ** 2).sum())
        self.x2 += float(((od - peer) ** 2).sum())
        if lse is not None and lse.numel():
            got = lse.double()
            finite = torch.isfinite(ref_lse)
            err = torch.where(finite, (got - ref_lse).abs() / ref_lse.abs().clamp(min=1.0),
                              torch.where(got == float("-inf"), 0.0, float("inf")))
            err = torch.where(torch.isnan(got), float("inf"), err)
            self.lse = max(self.lse, float(err.max()))

    def result(self):
        norm = math.sqrt(self.r2) or 1.0
        ours, peer, cross = math.sqrt(self.d2) / norm, math.sqrt(self.p2) / norm, math.sqrt(self.x2) / norm
        ok = (not self.nan and ours <= self.bound and ours <= PEER_FACTOR * peer + self.bound / 4
              and self.lse <= LSE_BOUND)
        return ok, f"O err {ours:.2e} (SDPA {peer:.2e}, ours-SDPA {cross:.2e})  LSE err {self.lse:.2e}"


# ---- inputs ----------------------------------------------------------------------------------------
def rand(gen, *shape, dtype):
    return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


class Paged:
    """A paged K/V cache for sequences of the given key counts: pools [num_pages, page_size, hkv, d] (plus
    spare pages), a shuffled int32 page table [batch, max_pages] (unused entries -1), seqused_k."""

    def __init__(self, gen, rng, keys, page_size, hkv, d, dtype, max_pages=None, spare=3, dv=None):
        self.page_size, self.keys = page_size, list(keys)
        need = [-(-sk // page_size) for sk in keys]
        self.max_pages = max_pages or max(max(need), 1)
        total = sum(need) + spare
        self.k = rand(gen, total, page_size, hkv, d, dtype=dtype)
        self.v = rand(gen, total, page_size, hkv, d if dv is None else dv, dtype=dtype)  # dv: V's head dim
        pool = list(range(total))
        rng.shuffle(pool)
        table = [[-1] * self.max_pages for _ in keys]
        for b, n in enumerate(need):
            for i in range(n):
                table[b][i] = pool.pop()
        self.table_host = table
        self.table = torch.tensor(table, dtype=torch.int32, device="cuda")
        self.seqused = torch.tensor(self.keys, dtype=torch.int32, device="cuda")

    def seq(self, b):
        """K, V of sequence b, gathered through the table: [keys, hkv, d]."""
        n = -(-self.keys[b] // self.page_size)
        pages = torch.tensor(self.table_host[b][:n], dtype=torch.long, device="cuda")
        k = self.k[pages].reshape(-1, *self.k.shape[2:])[:self.keys[b]]
        v = self.v[pages].reshape(-1, *self.v.shape[2:])[:self.keys[b]]
        return k, v


def cu_of(counts):
    cu = [0]
    for n in counts:
        cu.append(cu[-1] + n)
    return cu, torch.tensor(cu, dtype=torch.int32, device="cuda")


# ---- cases -----------------------------------------------------------------------------------------
def case_func_dense(name, dtype, d, causal, b, sq, sk, hq, hkv, packed=False):
    gen = torch.Generator(device="cuda").manual_seed(11)
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    if packed:
        qkv = rand(gen, b, sq, hq + 2 * hkv, d, dtype=tdt)
        q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
    else:
        q, k, v = rand(gen, b, sq, hq, d, dtype=tdt), rand(gen, b, sk, hkv, d, dtype=tdt), rand(gen, b, sk, hkv, d, dtype=tdt)
    out, lse = flashjit.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    only = flashjit.flash_attn_func(q, k, v, causal=causal)
    assert isinstance(only, torch.Tensor), "without return_attn_probs FA3 returns out alone"
    assert lse.shape == (b, hq, sq) and lse.dtype == torch.float32, lse.shape
    assert torch.equal(only, out), "the same call twice differs"
    torch.cuda.synchronize()
    errs = Errors(dtype)
    scale = d ** -0.5
    for i in range(b):
        errs.add(out[i], q[i], k[i], v[i], causal, scale, lse[i].transpose(0, 1))
    report(name, *errs.result())


def case_varlen_packed():
    """Packed K/V with cu_seqlens_k; sequences with no queries, no keys, more queries than keys."""
    gen, rng = torch.Generator(device="cuda").manual_seed(12), random.Random(12)
    seqs = [(1, 700), (0, 0), (129, 129), (0, 50), (300, 812), (3, 2), (17, 0)]
    hq, hkv, d = 16, 4, 128
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cuk_h, cuk = cu_of([s for _, s in seqs])
    q = rand(gen, cuq_h[-1], hq, d, dtype=torch.bfloat16)
    k, v = rand(gen, cuk_h[-1], hkv, d, dtype=torch.bfloat16), rand(gen, cuk_h[-1], hkv, d, dtype=torch.bfloat16)
    out, lse = flashjit.flash_attn_varlen_func(q, k, v, cuq, cuk, max(s for s, _ in seqs), max(s for _, s in seqs),
                                               causal=True, return_attn_probs=True)
    assert lse.shape == (hq, cuq_h[-1]), lse.shape
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(seqs)):
        r, c = slice(cuq_h[b], cuq_h[b + 1]), slice(cuk_h[b], cuk_h[b + 1])
        errs.add(out[r], q[r], k[c], v[c], True, d ** -0.5, lse[:, r].transpose(0, 1))
    report("varlen_func: packed K/V, empty sequences, GQA 16/4", *errs.result())
    del rng


def case_varlen_paged(page_size, causal=True, num_splits=1, label=""):
    """vLLM's call: packed Q against a paged cache (block_table, seqused_k), out given, LSE returned."""
    gen, rng = torch.Generator(device="cuda").manual_seed(13 + page_size), random.Random(13 + page_size)
    seqs = [(1, 1000), (1, 37), (4, 517), (0, 0), (300, 812), (129, 129), (3, 2), (1, 1)]
    hq, hkv, d = 32, 8, 128
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cache = Paged(gen, rng, [s for _, s in seqs], page_size, hkv, d, torch.bfloat16)
    q = rand(gen, cuq_h[-1] + 2, hq, d, dtype=torch.bfloat16)  # two spare rows past the last sequence
    out = torch.full_like(q, float("nan"))
    o, lse = flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, 320, cache.max_pages * page_size,
                                             seqused_k=cache.seqused, causal=causal, num_splits=num_splits,
                                             block_table=cache.table, out=out, return_softmax_lse=True)
    assert o is out, "out= is written in place and returned"
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(seqs)):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = cache.seq(b)
        errs.add(out[r], q[r], k, v, causal, d ** -0.5, lse[:, r].transpose(0, 1))
    ok, detail = errs.result()
    untouched = bool(torch.isnan(out[cuq_h[-1]:]).all())
    report(f"varlen_func: paged {page_size}, shuffled, mixed batch{label}", ok and untouched,
           detail + ("" if untouched else "  rows past the last sequence were written"))


def case_varlen_dense_kv():
    """Packed Q against K/V [batch, seqlen_k, hkv, d] with seqused_k (no cu_seqlens_k)."""
    gen = torch.Generator(device="cuda").manual_seed(14)
    seqs = [(5, 300), (1, 1), (64, 512), (0, 100)]
    hq, hkv, d = 8, 1, 64
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    q = rand(gen, cuq_h[-1], hq, d, dtype=torch.float16)
    k, v = rand(gen, len(seqs), 512, hkv, d, dtype=torch.float16), rand(gen, len(seqs), 512, hkv, d, dtype=torch.float16)
    used = torch.tensor([s for _, s in seqs], dtype=torch.int32, device="cuda")
    out = flashjit.flash_attn_varlen_func(q, k, v, cuq, None, 64, 512, seqused_k=used, causal=True)
    torch.cuda.synchronize()
    errs = Errors("fp16")
    for b, (_, sk) in enumerate(seqs):
        r = slice(cuq_h[b], cuq_h[b + 1])
        errs.add(out[r], q[r], k[b, :sk], v[b, :sk], True, d ** -0.5)
    report("varlen_func: K/V [batch, seqlen] + seqused_k, MQA fp16", *errs.result())


def kvcache_decode_inputs(seed, page_size, keys, queries=1, hq=32, hkv=8, d=128):
    gen, rng = torch.Generator(device="cuda").manual_seed(seed), random.Random(seed)
    cache = Paged(gen, rng, keys, page_size, hkv, d, torch.bfloat16)
    q = rand(gen, len(keys), queries, hq, d, dtype=torch.bfloat16)
    return q, cache


def check_kvcache(name, q, cache, out, lse, causal):
    torch.cuda.synchronize()
    errs = Errors("bf16")
    d = q.shape[-1]
    for b in range(q.shape[0]):
        k, v = cache.seq(b)
        errs.add(out[b], q[b], k, v, causal, d ** -0.5, None if lse is None else lse[b].transpose(0, 1))
    report(name, *errs.result())


def case_kvcache_paged(num_splits, page_size=16):
    keys = [3000, 17, 1, 2048, 4000, 64]
    q, cache = kvcache_decode_inputs(20 + num_splits, page_size, keys)
    out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused,
                                                page_table=cache.table, num_splits=num_splits,
                                                return_softmax_lse=True)
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.is_contiguous(), lse.shape
    check_kvcache(f"with_kvcache: paged {page_size} decode, num_splits={num_splits}", q, cache, out, lse, False)


def case_kvcache_dense_int_lengths():
    gen = torch.Generator(device="cuda").manual_seed(30)
    b, s_cache, hq, hkv, d = 3, 1024, 16, 2, 128
    q = rand(gen, b, 2, hq, d, dtype=torch.bfloat16)
    kc, vc = rand(gen, b, s_cache, hkv, d, dtype=torch.bfloat16), rand(gen, b, s_cache, hkv, d, dtype=torch.bfloat16)
    out = flashjit.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=777, causal=True)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for i in range(b):
        errs.add(out[i], q[i], kc[i, :777], vc[i, :777], True, d ** -0.5)
    report("with_kvcache: dense cache, cache_seqlens=int, causal", *errs.result())


def case_kvcache_nan_past_lengths():
    """NaN in the cache past each sequence's length (uninitialised engine memory) must not reach the output:
    P is 0 there but 0 x NaN is NaN (flash-attention issues 1745 and 2374). Dense cache with cache_seqlens and a
    paged cache whose last pages are partly used, with and without splits."""
    gen = torch.Generator(device="cuda").manual_seed(32)
    b, s_cache, hq, hkv, d = 3, 300, 16, 4, 128
    lens = [1, 299, 130]
    q = rand(gen, b, 1, hq, d, dtype=torch.bfloat16)
    kc, vc = rand(gen, b, s_cache, hkv, d, dtype=torch.bfloat16), rand(gen, b, s_cache, hkv, d, dtype=torch.bfloat16)
    for i, n in enumerate(lens):
        kc[i, n:] = float("nan")
        vc[i, n:] = float("nan")
    used = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for num_splits in (1, 0):
        out = flashjit.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=used, num_splits=num_splits)
        torch.cuda.synchronize()
        errs = Errors("bf16")
        for i, n in enumerate(lens):
            errs.add(out[i], q[i], kc[i, :n], vc[i, :n], False, d ** -0.5)
        ok, detail = errs.result()
        finite = bool(torch.isfinite(out).all())
        report(f"with_kvcache: NaN past cache_seqlens, dense, num_splits={num_splits}", ok and finite,
               detail + ("" if finite else " (NaN in the output)"))
    # Paged, page 64: each sequence's last page holds NaN past its keys, the unused pages NaN throughout.
    rng = random.Random(32)
    cache = Paged(gen, rng, [1, 299, 130], 64, hkv, d, torch.bfloat16)
    with torch.no_grad():
        used_slots = torch.zeros(cache.k.shape[:2], dtype=torch.bool, device="cuda")
        for i, n in enumerate(cache.keys):
            for j in range(n):
                used_slots[cache.table_host[i][j // 64], j % 64] = True
        cache.k[~used_slots] = float("nan")
        cache.v[~used_slots] = float("nan")
    q2 = rand(gen, 3, 1, hq, d, dtype=torch.bfloat16)
    out = flashjit.flash_attn_with_kvcache(q2, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table)
    check_kvcache("with_kvcache: NaN past the keys, paged 64", q2, cache, out, None, False)


def case_kvcache_varlen_q():
    """Speculative decode: cu_seqlens_q (4, 1, 0, 3 queries) against a paged cache of page 64, causal."""
    gen, rng = torch.Generator(device="cuda").manual_seed(31), random.Random(31)
    counts, keys = [4, 1, 0, 3], [900, 64, 10, 2500]
    cuq_h, cuq = cu_of(counts)
    cache = Paged(gen, rng, keys, 64, 8, 128, torch.bfloat16)
    q = rand(gen, cuq_h[-1], 32, 128, dtype=torch.bfloat16)
    out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused,
                                                page_table=cache.table, cu_seqlens_q=cuq, max_seqlen_q=4, causal=True,
                                                return_softmax_lse=True)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(counts)):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = cache.seq(b)
        errs.add(out[r], q[r], k, v, True, 128 ** -0.5, lse[:, r].transpose(0, 1))
    report("with_kvcache: cu_seqlens_q (speculative), paged 64", *errs.result())


def case_op_matches_wrapper():
    """torch.ops.flashjit.fwd called directly (the dispatcher path) writes what the eager path writes."""
    q, cache = kvcache_decode_inputs(40, 16, [1500, 3, 700])
    want = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table)
    qr = q.select(1, 0)
    out = torch.empty_like(qr)
    cu = torch.arange(0, q.shape[0] + 1, dtype=torch.int32, device="cuda")
    torch.ops.flashjit.fwd(qr, cache.k, cache.v, out, cu, None, cache.seqused, cache.table, 1,
                           cache.max_pages * 16, 128 ** -0.5, False, 0, -1, False)
    torch.cuda.synchronize()
    report("torch.ops.flashjit.fwd == the eager path (bitwise)", torch.equal(out, want.select(1, 0)))


def case_compile():
    """torch.compile(fullgraph=True) over a layer-like function using two entry points; bitwise equal to eager."""
    gen, rng = torch.Generator(device="cuda").manual_seed(50), random.Random(50)
    seqs = [(1, 1000), (7, 300), (0, 0), (128, 128)]
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cache = Paged(gen, rng, [s for _, s in seqs], 16, 8, 128, torch.bfloat16)
    q = rand(gen, cuq_h[-1], 32, 128, dtype=torch.bfloat16)
    qd, dcache = kvcache_decode_inputs(51, 16, [2000, 5, 300])
    max_k = cache.max_pages * 16  # an upper bound the table covers (at least ceil(max_k / page) entries)

    def layer(q, k, v, cuq, used, table, qd, kd, vd, used_d, table_d):
        o1, lse1 = flashjit.flash_attn_varlen_func(q, k, v, cuq, None, 128, max_k, seqused_k=used, causal=True,
                                                   block_table=table, return_softmax_lse=True)
        o2 = flashjit.flash_attn_with_kvcache(qd, kd, vd, cache_seqlens=used_d, page_table=table_d)
        return o1 * 2, lse1 + 1, o2 + 1

    inputs = (q, cache.k, cache.v, cuq, cache.seqused, cache.table, qd, dcache.k, dcache.v, dcache.seqused, dcache.table)
    eager = layer(*inputs)
    compiled = torch.compile(layer, fullgraph=True)(*inputs)
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for a, b in zip(eager, compiled))
    report("torch.compile(fullgraph=True): varlen paged + kvcache", same,
           "" if same else "compiled differs from eager: " + ", ".join(
               f"{(a.float() - b.float()).abs().max().item():.2e}" for a, b in zip(eager, compiled)))


def case_graph_replay():
    """An engine's decode step: one CUDA graph captured once (after one eager call), replayed after the lengths,
    the page table and the data change in place; split-KV (num_splits=0 picks it at batch 6)."""
    steps = [[3000, 17, 1, 2048, 500, 64], [3001, 18, 2, 2049, 0, 65], [3002, 0, 3, 4000, 1, 4096]]
    hq, hkv, d, ps, batch, max_k = 32, 8, 128, 16, 6, 4096
    gen, rng = torch.Generator(device="cuda").manual_seed(60), random.Random(60)
    max_pages = max_k // ps
    pool_k = torch.empty(batch * max_pages + 4, ps, hkv, d, dtype=torch.bfloat16, device="cuda")
    pool_v = torch.empty_like(pool_k)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32, device="cuda")
    lens = torch.zeros(batch, dtype=torch.int32, device="cuda")
    q = torch.empty(batch, 1, hq, d, dtype=torch.bfloat16, device="cuda")

    def load(keys):
        """New lengths, a new shuffled table and new data, written into the same tensors."""
        pages = list(range(pool_k.shape[0]))
        rng.shuffle(pages)
        host = [[-1] * max_pages for _ in keys]
        for b, sk in enumerate(keys):
            for i in range(-(-sk // ps)):
                host[b][i] = pages.pop()
        with torch.no_grad():
            table.copy_(torch.tensor(host, dtype=torch.int32))
            lens.copy_(torch.tensor(keys, dtype=torch.int32))
            q.copy_(rand(gen, *q.shape, dtype=q.dtype))
            pool_k.copy_(rand(gen, *pool_k.shape, dtype=pool_k.dtype))
            pool_v.copy_(rand(gen, *pool_v.shape, dtype=pool_v.dtype))
        cache = argparse.Namespace(k=pool_k, v=pool_v, page_size=ps, keys=list(keys), table_host=host)
        cache.seq = lambda b: Paged.seq(cache, b)
        return cache

    def step():
        return flashjit.flash_attn_with_kvcache(q, pool_k, pool_v, cache_seqlens=lens, page_table=table,
                                                return_softmax_lse=True)

    load(steps[0])
    step()  # the kernel is fetched here, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for i, keys in enumerate(steps):
        cache = load(keys)
        out.fill_(float("nan"))
        graph.replay()
        check_kvcache(f"CUDA graph replay {i}: new lengths/table/data", q, cache, out, lse, False)


def case_capture_without_warmup_raises():
    """A kernel never fetched, asked for inside a capture: a clear error, and the capture ends cleanly."""
    gen = torch.Generator(device="cuda").manual_seed(70)
    q = rand(gen, 1, 64, 4, 96, dtype=torch.float16)  # fp16 head dim 96, causal: fetched by no other case
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            flashjit.flash_attn_func(q, q, q, causal=True)
        report("capture before the first call raises", False, "no error")
    except flashjit.FlashjitError as e:
        report("capture before the first call raises", "before capturing" in str(e) and "prewarm" in str(e), str(e)[:90])
    except Exception as e:  # noqa: BLE001 - the capture's own failure is a failure of this case
        report("capture before the first call raises", False, f"{type(e).__name__}: {e}"[:120])


def case_prewarm_then_capture():
    """prewarm(load=True) fetches the kernel onto the device: the first call may then be inside a capture."""
    gen = torch.Generator(device="cuda").manual_seed(71)
    q, k = rand(gen, 2, 128, 8, 64, dtype=torch.bfloat16), rand(gen, 2, 256, 2, 64, dtype=torch.bfloat16)
    v = rand(gen, 2, 256, 2, 64, dtype=torch.bfloat16)
    flashjit.prewarm(["dtype=bf16,head_dim=64,causal=0"], load=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashjit.flash_attn_func(q, k, v)
    graph.replay()
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for i in range(2):
        errs.add(out[i], q[i], k[i], v[i], False, 64 ** -0.5)
    report("prewarm(load=True), then the first call in a capture", *errs.result())


def case_fast_path():
    """The fast path (a call like an earlier checked one reuses its plan): repeated calls with new tensors of
    the same shapes, new values and new lengths in the metadata, through all three entry points, out given
    and not; each result against float64. Then calls that differ from a remembered one only in what the
    checks read (a dtype, requires_grad) still raise."""
    from flashjit import _torch_backend as tb
    gen, rng = torch.Generator(device="cuda").manual_seed(90), random.Random(90)
    hq, hkv, d, page = 32, 8, 128, 16
    hits_before, ok_all, details = len(tb._fast), True, []
    # The full path runs the tensor checks; the fast path does not: counting them shows which ran.
    checks, full_checks = [0], tb.check_attention_tensors

    def counted(*args):
        checks[0] += 1
        return full_checks(*args)
    tb.check_attention_tensors = counted
    for step in range(3):  # decode through with_kvcache: dense q [b, 1, h, d], page 16, out None then given
        keys = [rng.randint(1, 3000) for _ in range(6)]
        cache = Paged(gen, rng, keys, page, hkv, d, torch.bfloat16, max_pages=200, spare=1200 - sum(-(-n // page) for n in keys))
        q = rand(gen, 6, 1, hq, d, dtype=torch.bfloat16)
        out = None if step == 0 else torch.full_like(q, float("nan"))
        o = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused,
                                             page_table=cache.table, out=out)
        torch.cuda.synchronize()
        errs = Errors("bf16")
        for b in range(6):
            k, v = cache.seq(b)
            errs.add(o[b], q[b], k, v, False, d ** -0.5)
        ok, detail = errs.result()
        ok_all &= ok
        details.append(detail)
    seqs = [(1, 1000), (4, 517), (0, 0), (300, 812), (1, 1)]
    for step in range(3):  # vLLM's mixed batch through varlen_func, new lengths each step (the bounds kept)
        seqs = [(s, max(s, rng.randint(0, 900))) for s, _ in seqs]
        cuq_h, cuq = cu_of([s for s, _ in seqs])
        cache = Paged(gen, rng, [k for _, k in seqs], page, hkv, d, torch.bfloat16, max_pages=64,
                      spare=300 - sum(-(-n // page) for _, n in seqs))  # the same pool shape every step
        q = rand(gen, cuq_h[-1], hq, d, dtype=torch.bfloat16)
        o = flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, 300, 64 * page, seqused_k=cache.seqused,
                                            causal=True, block_table=cache.table)
        torch.cuda.synchronize()
        errs = Errors("bf16")
        for b in range(len(seqs)):
            r = slice(cuq_h[b], cuq_h[b + 1])
            k, v = cache.seq(b)
            errs.add(o[r], q[r], k, v, True, d ** -0.5)
        ok, detail = errs.result()
        ok_all &= ok
    for step in range(2):  # dense
        q, k, v = (rand(gen, 2, 300, 8, 64, dtype=torch.float16) for _ in range(3))
        o = flashjit.flash_attn_func(q, k, v, causal=True)
        torch.cuda.synchronize()
        errs = Errors("fp16")
        for i in range(2):
            errs.add(o[i], q[i], k[i], v[i], True, 64 ** -0.5)
        ok, detail = errs.result()
        ok_all &= ok
    tb.check_attention_tensors = full_checks
    remembered = len(tb._fast) - hits_before
    report("fast path: repeated calls with new data and lengths", ok_all and remembered == 4 and checks[0] == 4,
           f"{remembered} plans remembered and {checks[0]} full checks for 8 calls of 4 signatures (expected 4 and 4); "
           f"{details[-1]}")
    # What the checks read still reaches them once a signature is remembered.
    cases = [("requires grad", lambda: flashjit.flash_attn_func(q.clone().requires_grad_(True), k, v, causal=True),
              r"q: requires grad"),
             ("seqused_k int64", lambda: flashjit.flash_attn_varlen_func(q2, cache.k, cache.v, cuq, None, 300, 64 * page,
                                                                          seqused_k=cache.seqused.long(), causal=True,
                                                                          block_table=cache.table),
              r"seqused_k: dtype torch.int64"),
             ("v float32", lambda: flashjit.flash_attn_func(q, k, v.float(), causal=True), r"v: dtype torch.float32")]
    q2 = rand(gen, cuq_h[-1], hq, d, dtype=torch.bfloat16)
    expect_raises("fast path: {} still raises", cases)


def expect_raises(name, cases):
    """Each (label, call, pattern): the call raises an error whose text matches the pattern."""
    import re
    for label, call, pattern in cases:
        try:
            call()
            report(name.format(label), False, "no error")
        except (ValueError, TypeError, RuntimeError) as e:
            report(name.format(label), re.search(pattern, str(e)) is not None, str(e)[:100])


def case_fa3_arguments_ignored():
    """Arguments FA3 ignores when their feature is off change nothing (bitwise): the descales on bf16 tensors,
    rotary_seqlens / rotary_interleaved without rotary tensors, cu_seqlens_k_new without k, scheduler_metadata,
    softcap 0; window_size=(-1, 0) is causal, a window wider than the keys is none."""
    q, cache = kvcache_decode_inputs(100, 16, [900, 33, 2000], queries=3)
    base = dict(cache_seqlens=cache.seqused, page_table=cache.table)
    want = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, causal=True, **base)
    ones = torch.ones(3, 8, dtype=torch.float32, device="cuda")
    got = flashjit.flash_attn_with_kvcache(
        q, cache.k, cache.v, rotary_seqlens=cache.seqused, rotary_interleaved=False,
        cu_seqlens_k_new=torch.zeros(4, dtype=torch.int32, device="cuda"), q_descale=ones, k_descale=ones,
        v_descale=ones, scheduler_metadata=torch.zeros(7, dtype=torch.int32, device="cuda"), window_size=(-1, 0),
        **base)
    wide = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, causal=True,
                                           window_size=(cache.max_pages * 16, 5), **base)
    torch.cuda.synchronize()
    report("FA3's ignored arguments change nothing (bitwise)", torch.equal(got, want) and torch.equal(wide, want))


def expect_not_implemented(name, cases):
    """Each (label, call, pattern): the call raises NotImplementedError itself (not ValueError, TypeError or
    FlashjitError) whose text matches the pattern."""
    import re
    for label, call, pattern in cases:
        try:
            call()
            report(name.format(label), False, "no error")
        except Exception as e:  # noqa: BLE001 - the type is what is checked
            ok = type(e) is NotImplementedError and re.search(pattern, str(e)) is not None
            report(name.format(label), ok, f"{type(e).__name__}: {e}"[:100])


def case_fa3_not_implemented():
    gen = torch.Generator(device="cuda").manual_seed(101)
    q, k = rand(gen, 2, 16, 8, 128, dtype=torch.bfloat16), rand(gen, 2, 32, 2, 128, dtype=torch.bfloat16)
    cases = [("an e5m2 q, k, v", lambda: flashjit.flash_attn_func(*(t.to(torch.float8_e5m2) for t in (q, k, k))),
              r"q: dtype torch.float8_e5m2 \(FP8\)"),
             ("an e5m2 k_cache", lambda: flashjit.flash_attn_with_kvcache(q, k.to(torch.float8_e5m2),
                                                                          k.to(torch.float8_e5m2), cache_seqlens=9),
              r"k_cache: dtype torch.float8_e5m2"),
             ("V head dim above Q's", lambda: flashjit.flash_attn_func(q[..., :64], k[..., :64], k),
              r"v: head dim 128 above q's 64"),
             ("head dim 288", lambda: flashjit.flash_attn_func(*(rand(gen, 1, 8, 2, 288, dtype=torch.bfloat16),) * 3),
              r"head dim 288")]
    expect_not_implemented("not implemented: {}", cases)


def feature_reference(q, k, v, causal, scale, left=-1, right=-1, chunk=0, softcap=0.0, sinks=None, slopes=None):
    """One sequence's float64 (O, LSE) with flashjit.h's MASKS AND SCORES: p = i + sk - sq; window p - left <= j <=
    p + right (-1 unbounded; causal: right 0); chunk j // C == p // C; softcap c tanh(s scale / c) before the mask;
    ALiBi -slope |p - j| on the scaled score; the sink a key with no value, in the LSE. A row with no key: O = 0,
    LSE = -inf, or the sink's logit."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    qd = q.double().transpose(0, 1)
    kd = k.double().transpose(0, 1).repeat_interleave(hq // hkv, 0)
    vd = v.double().transpose(0, 1).repeat_interleave(hq // hkv, 0)
    s = qd @ kd.transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    p = torch.arange(sq, device=q.device).view(-1, 1) + sk - sq
    j = torch.arange(sk, device=q.device).view(1, -1)
    if slopes is not None:
        s = s - slopes.double().view(-1, 1, 1) * (p - j).abs().double()
    seen = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal or right >= 0:
        seen &= j <= p + (0 if causal else right)
    if left >= 0:
        seen &= j >= p - left
    if chunk > 0:
        seen &= torch.div(j, chunk, rounding_mode="floor") == torch.div(p, chunk, rounding_mode="floor")
    s = s.masked_fill(~seen, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double().view(-1, 1, 1).expand(hq, sq, 1)], -1)
        vd = torch.cat([vd, torch.zeros(hq, 1, d, dtype=torch.float64, device=q.device)], 1)
    lse = torch.logsumexp(s, -1)
    w = torch.nan_to_num(torch.exp(s - lse.unsqueeze(-1)), nan=0.0)
    return (w @ vd).transpose(0, 1), lse.transpose(0, 1)


def case_masks_and_scores():
    """window_size, attention_chunk, softcap, alibi_slopes and s_aux through flash_attn_func, flash_attn_varlen_func
    (paged) and flash_attn_with_kvcache (decode, split) against float64; a library without a feature's spec key
    raises NotImplementedError naming it (reported as such, not as a pass)."""
    gen = torch.Generator(device="cuda").manual_seed(38)
    b, sq, sk, hq, hkv, d = 2, 300, 1000, 8, 2, 128
    q, k, v = (rand(gen, b, n, h, d, dtype=torch.bfloat16) for n, h in ((sq, hq), (sk, hkv), (sk, hkv)))
    sinks = torch.randn(hq, generator=gen, device="cuda", dtype=torch.float32) * 4
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / hq) for h in range(hq)], device="cuda", dtype=torch.float32)
    per_batch = torch.stack([slopes, slopes * 0.5])
    settings = [
        ("window 127 causal", dict(window_size=(127, 0)), dict(causal=True, left=127)),
        ("window 0 causal", dict(window_size=(0, 0)), dict(causal=True, left=0)),
        ("window (128, 129)", dict(window_size=(128, 129)), dict(left=128, right=129)),
        ("window right only", dict(window_size=(-1, 64)), dict(right=64)),
        ("chunk 256 causal", dict(causal=True, attention_chunk=256), dict(causal=True, chunk=256)),
        ("softcap 30", dict(softcap=30.0), dict(softcap=30.0)),
        ("softcap 50 causal", dict(causal=True, softcap=50.0), dict(causal=True, softcap=50.0)),
        ("sinks", dict(s_aux=sinks), dict(sinks=sinks)),
        ("sinks very negative, window", dict(window_size=(128, 0), s_aux=sinks - 80), dict(causal=True, left=128, sinks=sinks - 80)),
        ("sinks large bf16", dict(s_aux=(sinks + 30).bfloat16()), dict(sinks=(sinks + 30).bfloat16())),
        ("alibi per head", dict(causal=True, alibi_slopes=slopes), dict(causal=True, slopes=slopes)),
        ("alibi per batch", dict(alibi_slopes=per_batch), dict(slopes=per_batch)),
        ("all", dict(window_size=(200, 0), attention_chunk=512, softcap=50.0, s_aux=sinks, alibi_slopes=slopes),
         dict(causal=True, left=200, chunk=512, softcap=50.0, sinks=sinks, slopes=slopes)),
    ]
    scale = d ** -0.5
    for label, kw, ref in settings:
        name = f"masks and scores: func {label}"
        try:
            out, lse = flashjit.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
        except NotImplementedError as e:
            report(name, False, f"not in this build: {e}"[:100])
            continue
        torch.cuda.synchronize()
        worst_o = worst_lse = 0.0
        for i in range(b):
            r = dict(ref)
            if r.get("slopes") is not None and r["slopes"].dim() == 2:
                r["slopes"] = r["slopes"][i]
            o_ref, lse_ref = feature_reference(q[i], k[i], v[i], scale=scale, **{"causal": False, **r})
            worst_o = max(worst_o, ((out[i].double() - o_ref).norm() / o_ref.norm().clamp_min(1e-30)).item())
            got = lse[i].transpose(0, 1).double()
            both_inf = torch.isinf(got) & torch.isinf(lse_ref)
            worst_lse = max(worst_lse, (got - lse_ref).abs().masked_fill(both_inf, 0).max().item())
        report(name, worst_o <= 6e-3 and worst_lse <= 1e-3, f"O {worst_o:.2e} LSE {worst_lse:.2e}")
    # decode through the paged cache, split, with a window and sinks (gpt-oss's sliding layers)
    name = "masks and scores: kvcache split window 128 + sinks"
    cache_k, cache_v = rand(gen, 64, 16, hkv, d, dtype=torch.bfloat16), rand(gen, 64, 16, hkv, d, dtype=torch.bfloat16)
    table = torch.randperm(64, device="cuda", dtype=torch.int32)[:2 * 32].view(2, 32)
    lengths = torch.tensor([500, 37], device="cuda", dtype=torch.int32)
    qd = rand(gen, 2, 1, hq, d, dtype=torch.bfloat16)
    try:
        out, lse = flashjit.flash_attn_with_kvcache(qd, cache_k, cache_v, cache_seqlens=lengths, page_table=table,
                                                    causal=True, window_size=(128, 0), s_aux=sinks, num_splits=0,
                                                    return_softmax_lse=True)
    except NotImplementedError as e:
        report(name, False, f"not in this build: {e}"[:100])
        return
    torch.cuda.synchronize()
    worst = 0.0
    for i, n in enumerate(lengths.tolist()):
        keys = cache_k[table[i].long()].reshape(-1, hkv, d)[:n]
        vals = cache_v[table[i].long()].reshape(-1, hkv, d)[:n]
        o_ref, _ = feature_reference(qd[i], keys, vals, True, scale, left=128, sinks=sinks)
        worst = max(worst, ((out[i].double() - o_ref).norm() / o_ref.norm().clamp_min(1e-30)).item())
    report(name, worst <= 6e-3, f"O {worst:.2e}")


def case_seqused_q():
    """seqused_q: sequence b's first seqused_q[b] query rows are its queries (causal bottom-right on that count),
    the rest of its rows untouched; paged K/V; against float64, eager and in a graph replay."""
    gen, rng = torch.Generator(device="cuda").manual_seed(102), random.Random(102)
    counts, used_counts, keys = [5, 1, 40, 0, 9], [3, 1, 17, 0, 9], [300, 64, 700, 20, 9]
    cuq_h, cuq = cu_of(counts)
    cache = Paged(gen, rng, keys, 16, 4, 128, torch.bfloat16)
    q = rand(gen, cuq_h[-1] + 2, 16, 128, dtype=torch.bfloat16)
    used = torch.tensor(used_counts, dtype=torch.int32, device="cuda")
    ok_all, detail = True, ""
    for mode in ("eager", "graph"):
        out = torch.full_like(q, float("nan"))

        def call():
            return flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, 40, cache.max_pages * 16,
                                                   seqused_q=used, seqused_k=cache.seqused, causal=True,
                                                   block_table=cache.table, out=out, return_softmax_lse=True)
        if mode == "eager":
            o, lse = call()
        else:
            call()
            torch.cuda.synchronize()
            out.fill_(float("nan"))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                o, lse = call()
            out.fill_(float("nan"))
            graph.replay()
        torch.cuda.synchronize()
        errs, untouched = Errors("bf16"), True
        for b, (n, u) in enumerate(zip(counts, used_counts)):
            r = slice(cuq_h[b], cuq_h[b] + u)
            kb, vb = cache.seq(b)
            errs.add(out[r], q[r], kb, vb, True, 128 ** -0.5, lse[:, r].transpose(0, 1))
            untouched &= bool(torch.isnan(out[cuq_h[b] + u:cuq_h[b + 1]]).all())
        untouched &= bool(torch.isnan(out[cuq_h[-1]:]).all())
        ok, detail = errs.result()
        ok_all &= ok and untouched and o is out
        report(f"varlen_func: seqused_q, paged 16, {mode}", ok and untouched and o is out,
               detail + ("" if untouched else "  rows past seqused_q were written"))


def case_zero_keys():
    """max_seqlen_k = 0 (no sequence has keys), a dense K of no keys, a page table of no pages: O = 0 and
    LSE = -inf (FA3's answer), eager and captured in a graph."""
    gen = torch.Generator(device="cuda").manual_seed(103)
    q = rand(gen, 7, 8, 64, dtype=torch.bfloat16)
    cuq = torch.tensor([0, 3, 7], dtype=torch.int32, device="cuda")
    cuk = torch.zeros(3, dtype=torch.int32, device="cuda")
    k0 = torch.empty(0, 2, 64, dtype=torch.bfloat16, device="cuda")
    qd = rand(gen, 2, 5, 8, 64, dtype=torch.bfloat16)
    kd = torch.empty(2, 0, 2, 64, dtype=torch.bfloat16, device="cuda")
    pool = rand(gen, 4, 16, 2, 64, dtype=torch.bfloat16)
    no_pages = torch.empty(2, 0, dtype=torch.int32, device="cuda")

    def calls():
        out = torch.full_like(q, float("nan"))
        a = flashjit.flash_attn_varlen_func(q, k0, k0, cuq, cuk, 4, 0, causal=True, out=out, return_softmax_lse=True)
        b = flashjit.flash_attn_func(qd, kd, kd, return_attn_probs=True)
        c = flashjit.flash_attn_with_kvcache(qd, pool, pool, cache_seqlens=0, page_table=no_pages,
                                             return_softmax_lse=True)
        return a, b, c

    def zero(results):
        return all(bool((o == 0).all()) and bool((lse == float("-inf")).all()) for o, lse in results)
    eager = calls()
    torch.cuda.synchronize()
    report("max_seqlen_k = 0: O = 0, LSE = -inf", zero(eager))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = calls()
    for o, lse in captured:
        o.fill_(float("nan"))
        lse.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    report("max_seqlen_k = 0 in a graph replay", zero(captured))


def case_head_dim_padded():
    """Head dims that are not a multiple of 8 (FA3's interface pads them): 36, 65 and 100 through the three
    entry points, against float64 with scale 1/sqrt(the true head dim)."""
    gen, rng = torch.Generator(device="cuda").manual_seed(104), random.Random(104)
    for d in (36, 65, 100):
        q, k, v = (rand(gen, 2, 130, 4, d, dtype=torch.bfloat16) for _ in range(3))
        out, lse = flashjit.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
        torch.cuda.synchronize()
        errs = Errors("bf16")
        for i in range(2):
            errs.add(out[i], q[i], k[i], v[i], True, d ** -0.5, lse[i].transpose(0, 1))
        ok, detail = errs.result()
        report(f"func: head dim {d} (padded)", ok and out.shape == q.shape, detail)
    d, keys = 65, [300, 17]
    cache = Paged(gen, rng, keys, 16, 2, d, torch.bfloat16)
    qd = rand(gen, 2, 1, 8, d, dtype=torch.bfloat16)
    out = torch.full_like(qd, float("nan"))
    o = flashjit.flash_attn_with_kvcache(qd, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table,
                                         out=out)
    check_kvcache("with_kvcache: head dim 65 (padded), out given", qd, cache, out, None, False)
    report("with_kvcache: head dim 65 writes out in place", o is out)


def case_scheduler_metadata():
    """vLLM's FA3 path: get_scheduler_metadata once a step, passed to every layer's varlen call; the same
    results as without it (bitwise)."""
    gen, rng = torch.Generator(device="cuda").manual_seed(105), random.Random(105)
    seqs = [(1, 1000), (4, 517), (1, 37)]
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cache = Paged(gen, rng, [k for _, k in seqs], 16, 8, 128, torch.bfloat16)
    metadata = flashjit.get_scheduler_metadata(len(seqs), 4, cache.max_pages * 16, 32, 8, 128, cache.seqused,
                                               qkv_dtype=torch.bfloat16, cu_seqlens_q=cuq, page_size=16, causal=True,
                                               num_splits=0)
    same = isinstance(metadata, torch.Tensor) and metadata.dtype == torch.int32
    for layer in range(3):
        q = rand(gen, cuq_h[-1], 32, 128, dtype=torch.bfloat16)
        args = (q, cache.k, cache.v, cuq, None, 4, cache.max_pages * 16)
        kw = dict(seqused_k=cache.seqused, causal=True, block_table=cache.table, num_splits=0)
        with_md = flashjit.flash_attn_varlen_func(*args, scheduler_metadata=metadata, **kw)
        without = flashjit.flash_attn_varlen_func(*args, **kw)
        torch.cuda.synchronize()
        same &= torch.equal(with_md, without)
    report("get_scheduler_metadata: each layer's result unchanged", same)


def case_combine():
    """flash_attn_combine against the merge in float64: splits 1, 2 and 5, rows whose every split is empty
    (LSE -inf), out_dtype float32 and bf16, head dims 64 and 100 (padded), out given."""
    gen = torch.Generator(device="cuda").manual_seed(106)
    for splits, d, dtype in ((1, 64, torch.float32), (2, 64, torch.bfloat16), (5, 100, torch.float32),
                             (5, 128, torch.bfloat16)):
        b, l, h = 3, 7, 4
        o_part = torch.randn(splits, b, l, h, d, generator=gen, device="cuda")
        lse_part = torch.randn(splits, b, l, h, generator=gen, device="cuda") * 3
        lse_part[:, 0, 0, :] = float("-inf")                 # a row no split saw a key for
        lse_part[0, 1, :, 0] = float("-inf")                 # a split with no keys for some rows
        out = torch.full((b, l, h, d), float("nan"), dtype=dtype, device="cuda") if splits == 5 else None
        o, lse = flashjit.flash_attn_combine(o_part, lse_part, out=out, out_dtype=dtype)
        torch.cuda.synchronize()
        ld = lse_part.double()
        want_lse = torch.logsumexp(ld, 0)
        w = torch.nan_to_num(torch.exp(ld - want_lse), nan=0.0)
        want_o = torch.nan_to_num((w.unsqueeze(-1) * o_part.double()).sum(0), nan=0.0)
        finite = torch.isfinite(want_lse)
        o_err = float((o.double() - want_o).abs().max())
        lse_ok = bool(torch.equal(torch.isfinite(lse), finite)) and float((lse.double() - want_lse)[finite].abs().max()) < 1e-4
        bound = 1e-4 if dtype == torch.float32 else 3e-2
        ok = o_err < bound and lse_ok and o.dtype == dtype and (out is None or o is out) and lse.shape == (b, l, h)
        report(f"flash_attn_combine: {splits} splits, d{d}, {str(dtype)[6:]}", ok, f"O err {o_err:.1e}")


# ---- the FP8 cache (flashjit.h, FP8 K/V CACHE) ------------------------------------------------------------
def fp8_codes(gen, *shape):
    """Random e4m3 codes: N(0, 1) samples rounded to e4m3."""
    return rand(gen, *shape, dtype=torch.float8_e4m3fn)


def descale_rows(t, batch, hkv):
    """[batch, hkv]: the scale of each sequence's K/V heads as the kernel reads the descale t (None: 1.0)."""
    if t is None:
        return torch.ones(batch, hkv, dtype=torch.float32, device="cuda")
    if t.numel() == 1:
        return t.reshape(1, 1).expand(batch, hkv)
    if t.dim() == 1:
        return t.view(1, hkv).expand(batch, hkv)
    return t.expand(batch, hkv)


def dequantised(codes, scales, dtype):
    """codes [keys, hkv, d] with one scale a K/V head ([hkv]) as the kernel widens them: code x scale in float32,
    one rounding to dtype (flashjit.h, FP8 K/V CACHE). The float64 reference runs on these values: exact for
    scales that are powers of two, one rounding from code x scale otherwise."""
    return (codes.float() * scales.reshape(-1, 1)).to(dtype)


def fp8_seq(cache, b):
    """K, V codes of sequence b of a Paged cache of e4m3 pools, gathered through the table (as bytes)."""
    as_bytes = argparse.Namespace(k=cache.k.view(torch.uint8), v=cache.v.view(torch.uint8), page_size=cache.page_size,
                                  keys=cache.keys, table_host=cache.table_host)
    k, v = Paged.seq(as_bytes, b)
    return k.view(torch.float8_e4m3fn), v.view(torch.float8_e4m3fn)


def poison_unused(cache):
    """The e4m3 NaN code 0x7F in every pool slot no sequence reads (past each sequence's keys, spare pages)."""
    used = torch.zeros(cache.k.shape[:2], dtype=torch.bool, device="cuda")
    for b, n in enumerate(cache.keys):
        for j in range(n):
            used[cache.table_host[b][j // cache.page_size], j % cache.page_size] = True
    with torch.no_grad():
        cache.k.view(torch.uint8)[~used] = 0x7F
        cache.v.view(torch.uint8)[~used] = 0x7F


def fp8_errors(dtype_name, *descales):
    """Errors at the 16-bit kernel's bounds; doubled where a scale is not a power of two (the widening rounds there,
    and the kernel's float product and the host's may differ by the dtype's last bit on a tie), as
    tests/kv_fp8_gpu_test.cpp bounds them."""
    errs = Errors(dtype_name)
    for t in descales:
        if t is not None and not bool((torch.frexp(t.float())[0].abs() == 0.5).all()):
            errs.bound *= 2
            break
    return errs


def fp8_descales(gen, batch, hkv):
    """The descale layouts engines pass, as (label, k_descale, v_descale): one element (powers of two), vLLM's
    per-tensor scale expanded to [batch, heads_kv] (strides 0), per K/V head [heads_kv], FA3's [batch, heads_kv]
    (a strided view), none (1.0)."""
    def uniform(*shape):
        return torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) * 1.5 + 0.5
    wide = uniform(batch, 2 * hkv)
    pow2 = torch.tensor([2.0 ** (i % 3 - 1) for i in range(hkv)], device="cuda")
    return [("per tensor, one element", torch.tensor([2.0], device="cuda"), torch.tensor([0.5], device="cuda")),
            ("per tensor, vLLM's expand", uniform(1).reshape(()).expand(batch, hkv), uniform(1).reshape(()).expand(batch, hkv)),
            ("per K/V head", uniform(hkv), pow2),
            ("FA3's [batch, heads_kv], strided", wide[:, ::2], uniform(batch, hkv)),
            ("no descales (1.0)", None, None)]


def check_fp8_kvcache(name, q, cache, out, lse, k_descale, v_descale, causal=False):
    torch.cuda.synchronize()
    batch, hkv, d = q.shape[0], cache.k.shape[2], q.shape[-1]
    ks, vs = descale_rows(k_descale, batch, hkv), descale_rows(v_descale, batch, hkv)
    errs = fp8_errors("bf16" if q.dtype == torch.bfloat16 else "fp16", k_descale, v_descale)
    for b in range(batch):
        k, v = fp8_seq(cache, b)
        errs.add(out[b], q[b], dequantised(k, ks[b], q.dtype), dequantised(v, vs[b], q.dtype), causal, d ** -0.5,
                 None if lse is None else lse[b].transpose(0, 1))
    ok, detail = errs.result()
    finite = bool(torch.isfinite(out).all())
    report(name, ok and finite, detail + ("" if finite else " (NaN in the output)"))


def case_fp8_kvcache(page_size, num_splits=0, poison=False):
    """flash_attn_with_kvcache on a paged e4m3 cache (decode, GQA 32/8, d128), each descale layout; page 64 with the
    NaN code in every slot no sequence reads."""
    gen, rng = torch.Generator(device="cuda").manual_seed(200 + page_size), random.Random(200 + page_size)
    keys = [3000, 17, 1, 2048, 640, 64]
    hq, hkv, d = 32, 8, 128
    cache = Paged(gen, rng, keys, page_size, hkv, d, torch.float8_e4m3fn)
    if poison:
        poison_unused(cache)
    q = rand(gen, len(keys), 1, hq, d, dtype=torch.bfloat16)
    for label, k_descale, v_descale in fp8_descales(gen, len(keys), hkv):
        out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused,
                                                    page_table=cache.table, k_descale=k_descale, v_descale=v_descale,
                                                    num_splits=num_splits, return_softmax_lse=True)
        check_fp8_kvcache(f"FP8 kvcache: paged {page_size}{', NaN codes unused' if poison else ''}, "
                          f"num_splits={num_splits}, {label}", q, cache, out, lse, k_descale, v_descale)


def case_fp8_kvcache_speculative():
    """Speculative queries (cu_seqlens_q: 4, 1, 0, 3) against a paged 64 e4m3 cache, causal, fp16, per-head scales."""
    gen, rng = torch.Generator(device="cuda").manual_seed(210), random.Random(210)
    counts, keys, hq, hkv, d = [4, 1, 0, 3], [900, 64, 10, 2500], 16, 4, 128
    cuq_h, cuq = cu_of(counts)
    cache = Paged(gen, rng, keys, 64, hkv, d, torch.float8_e4m3fn)
    q = rand(gen, cuq_h[-1], hq, d, dtype=torch.float16)
    k_descale = torch.rand(hkv, generator=gen, device="cuda") + 0.5
    v_descale = torch.rand(hkv, generator=gen, device="cuda") + 0.5
    out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table,
                                                cu_seqlens_q=cuq, max_seqlen_q=4, causal=True, k_descale=k_descale,
                                                v_descale=v_descale, return_softmax_lse=True)
    torch.cuda.synchronize()
    errs = fp8_errors("fp16", k_descale, v_descale)
    for b in range(len(counts)):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = fp8_seq(cache, b)
        errs.add(out[r], q[r], dequantised(k, k_descale, q.dtype), dequantised(v, v_descale, q.dtype), True,
                 d ** -0.5, lse[:, r].transpose(0, 1))
    report("FP8 kvcache: cu_seqlens_q (speculative), paged 64, fp16", *errs.result())


def case_fp8_varlen():
    """flash_attn_varlen_func with e4m3 K/V: packed (cu_seqlens_k; fp16 d64 GQA 8/2, per-head descales, causal,
    empty sequences) and vLLM's call on a paged cache (page 16, FA3's [batch, heads_kv] descales, out given, LSE)."""
    gen, rng = torch.Generator(device="cuda").manual_seed(220), random.Random(220)
    seqs = [(1, 700), (0, 0), (129, 129), (0, 50), (300, 812), (3, 2), (17, 0)]
    hq, hkv, d = 8, 2, 64
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cuk_h, cuk = cu_of([s for _, s in seqs])
    q = rand(gen, cuq_h[-1], hq, d, dtype=torch.float16)
    k, v = fp8_codes(gen, cuk_h[-1], hkv, d), fp8_codes(gen, cuk_h[-1], hkv, d)
    k_descale = torch.rand(hkv, generator=gen, device="cuda") + 0.5
    v_descale = torch.tensor([0.25, 4.0], device="cuda")
    out, lse = flashjit.flash_attn_varlen_func(q, k, v, cuq, cuk, max(s for s, _ in seqs), max(s for _, s in seqs),
                                               causal=True, k_descale=k_descale, v_descale=v_descale,
                                               return_attn_probs=True)
    torch.cuda.synchronize()
    errs = fp8_errors("fp16", k_descale, v_descale)
    for b in range(len(seqs)):
        r, c = slice(cuq_h[b], cuq_h[b + 1]), slice(cuk_h[b], cuk_h[b + 1])
        errs.add(out[r], q[r], dequantised(k[c], k_descale, q.dtype), dequantised(v[c], v_descale, q.dtype), True,
                 d ** -0.5, lse[:, r].transpose(0, 1))
    report("FP8 varlen_func: packed K/V, fp16 d64 GQA 8/2, per head", *errs.result())

    seqs = [(1, 1000), (1, 37), (4, 517), (0, 0), (300, 812), (129, 129), (3, 2), (1, 1)]
    hq, hkv, d, page = 32, 8, 128, 16
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cache = Paged(gen, rng, [s for _, s in seqs], page, hkv, d, torch.float8_e4m3fn)
    q = rand(gen, cuq_h[-1] + 2, hq, d, dtype=torch.bfloat16)
    batch = len(seqs)
    k_descale = (torch.rand(batch, 2 * hkv, generator=gen, device="cuda") + 0.5)[:, 1::2]  # strides (16, 2)
    v_descale = torch.rand(batch, hkv, generator=gen, device="cuda") + 0.5
    out = torch.full_like(q, float("nan"))
    o, lse = flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, 320, cache.max_pages * page,
                                             seqused_k=cache.seqused, causal=True, block_table=cache.table, out=out,
                                             k_descale=k_descale, v_descale=v_descale, return_softmax_lse=True)
    torch.cuda.synchronize()
    errs = fp8_errors("bf16", k_descale, v_descale)
    for b in range(batch):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = fp8_seq(cache, b)
        errs.add(out[r], q[r], dequantised(k, k_descale[b], q.dtype), dequantised(v, v_descale[b], q.dtype), True,
                 d ** -0.5, lse[:, r].transpose(0, 1))
    ok, detail = errs.result()
    untouched = o is out and bool(torch.isnan(out[cuq_h[-1]:]).all())
    report("FP8 varlen_func: paged 16, vLLM's call, [batch, heads_kv]", ok and untouched,
           detail + ("" if untouched else "  out not written in place, or rows past the last sequence written"))


def case_fp8_func_dense():
    """flash_attn_func with e4m3 K/V: no descales (1.0), then a per-tensor one; bf16 d128 causal GQA 16/4, sq < sk."""
    gen = torch.Generator(device="cuda").manual_seed(230)
    b, sq, sk, hq, hkv, d = 2, 300, 1000, 16, 4, 128
    q = rand(gen, b, sq, hq, d, dtype=torch.bfloat16)
    k, v = fp8_codes(gen, b, sk, hkv, d), fp8_codes(gen, b, sk, hkv, d)
    for label, k_descale, v_descale in (("no descales", None, None),
                                        ("per tensor", torch.tensor([1.7], device="cuda"), torch.tensor([0.5], device="cuda"))):
        out, lse = flashjit.flash_attn_func(q, k, v, causal=True, k_descale=k_descale, v_descale=v_descale,
                                            return_attn_probs=True)
        torch.cuda.synchronize()
        ks, vs = descale_rows(k_descale, b, hkv), descale_rows(v_descale, b, hkv)
        errs = fp8_errors("bf16", k_descale, v_descale)
        for i in range(b):
            errs.add(out[i], q[i], dequantised(k[i], ks[i], q.dtype), dequantised(v[i], vs[i], q.dtype), True, d ** -0.5,
                     lse[i].transpose(0, 1))
        report(f"FP8 func: dense d128 causal GQA 16/4, {label}", *errs.result())


def case_fp8_fast_path():
    """The fast path with an FP8 cache: calls of one signature with different descale tensors (same shapes and
    strides) and descale values changed in place each use their own scales (no stale pointers); a call without
    descales is a signature of its own. Each result against float64."""
    from flashjit import _torch_backend as tb
    gen, rng = torch.Generator(device="cuda").manual_seed(240), random.Random(240)
    keys, hq, hkv, d = [1500, 3, 700, 64], 32, 8, 128
    cache = Paged(gen, rng, keys, 16, hkv, d, torch.float8_e4m3fn)
    q = rand(gen, len(keys), 1, hq, d, dtype=torch.bfloat16)
    before, ok_all, detail = len(tb._fast), True, ""
    a = torch.rand(len(keys), hkv, generator=gen, device="cuda") + 0.5
    b_ = torch.rand(len(keys), hkv, generator=gen, device="cuda") * 3 + 0.25
    steps = [(a, b_), (b_, a), (a, a), (None, None), (b_, b_)]
    for i, (k_descale, v_descale) in enumerate(steps):
        if i == 2:
            with torch.no_grad():
                a.mul_(2.5)  # new values, same tensor
        out = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table,
                                               k_descale=k_descale, v_descale=v_descale)
        torch.cuda.synchronize()
        ks, vs = descale_rows(k_descale, len(keys), hkv), descale_rows(v_descale, len(keys), hkv)
        errs = fp8_errors("bf16", k_descale, v_descale)
        for s in range(len(keys)):
            k, v = fp8_seq(cache, s)
            errs.add(out[s], q[s], dequantised(k, ks[s], q.dtype), dequantised(v, vs[s], q.dtype), False, d ** -0.5)
        ok, detail = errs.result()
        ok_all &= ok
    remembered = len(tb._fast) - before
    report("FP8 fast path: new descales each call", ok_all and remembered == 2,
           f"{remembered} plans remembered for 5 calls of 2 signatures (expected 2); {detail}")


def case_fp8_compile():
    """torch.compile(fullgraph=True) over an FP8-cache decode with descales: bitwise equal to eager."""
    gen, rng = torch.Generator(device="cuda").manual_seed(250), random.Random(250)
    keys, hkv = [2000, 5, 300], 8
    cache = Paged(gen, rng, keys, 16, hkv, 128, torch.float8_e4m3fn)
    q = rand(gen, len(keys), 1, 32, 128, dtype=torch.bfloat16)
    k_descale = torch.rand(len(keys), hkv, generator=gen, device="cuda") + 0.5
    v_descale = torch.rand(hkv, generator=gen, device="cuda") + 0.5

    def layer(q, kc, vc, used, table, kd, vd):
        return flashjit.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=used, page_table=table, k_descale=kd,
                                                v_descale=vd) * 2

    inputs = (q, cache.k, cache.v, cache.seqused, cache.table, k_descale, v_descale)
    eager = layer(*inputs)
    compiled = torch.compile(layer, fullgraph=True)(*inputs)
    torch.cuda.synchronize()
    report("FP8 torch.compile(fullgraph=True): kvcache with descales", torch.equal(eager, compiled),
           "" if torch.equal(eager, compiled) else f"max diff {(eager.float() - compiled.float()).abs().max().item():.2e}")


def case_fp8_graph_replay():
    """An engine's decode step on an FP8 cache: one CUDA graph captured once (after one eager call), replayed after
    the lengths, the page table, the codes and the K descales ([batch, heads_kv]) change in place; V without a
    descale (1.0); split-KV (num_splits=0 at batch 6)."""
    steps = [[3000, 17, 1, 2048, 500, 64], [3001, 18, 2, 2049, 0, 65], [3002, 0, 3, 4000, 1, 4096]]
    hq, hkv, d, ps, batch, max_k = 32, 8, 128, 16, 6, 4096
    gen, rng = torch.Generator(device="cuda").manual_seed(260), random.Random(260)
    max_pages = max_k // ps
    pool_k = torch.empty(batch * max_pages + 4, ps, hkv, d, dtype=torch.float8_e4m3fn, device="cuda")
    pool_v = torch.empty_like(pool_k)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32, device="cuda")
    lens = torch.zeros(batch, dtype=torch.int32, device="cuda")
    q = torch.empty(batch, 1, hq, d, dtype=torch.bfloat16, device="cuda")
    k_descale = torch.empty(batch, hkv, dtype=torch.float32, device="cuda")

    def load(keys):
        """New lengths, a new shuffled table, new codes and new K descales, written into the same tensors."""
        pages = list(range(pool_k.shape[0]))
        rng.shuffle(pages)
        host = [[-1] * max_pages for _ in keys]
        for b, sk in enumerate(keys):
            for i in range(-(-sk // ps)):
                host[b][i] = pages.pop()
        with torch.no_grad():
            table.copy_(torch.tensor(host, dtype=torch.int32))
            lens.copy_(torch.tensor(keys, dtype=torch.int32))
            q.copy_(rand(gen, *q.shape, dtype=q.dtype))
            pool_k.view(torch.uint8).copy_(fp8_codes(gen, *pool_k.shape).view(torch.uint8))
            pool_v.view(torch.uint8).copy_(fp8_codes(gen, *pool_v.shape).view(torch.uint8))
            k_descale.copy_(torch.rand(batch, hkv, generator=gen, device="cuda") + 0.5)
        cache = argparse.Namespace(k=pool_k, v=pool_v, page_size=ps, keys=list(keys), table_host=host)
        return cache

    def step():
        return flashjit.flash_attn_with_kvcache(q, pool_k, pool_v, cache_seqlens=lens, page_table=table,
                                                k_descale=k_descale, return_softmax_lse=True)

    load(steps[0])
    step()  # the kernel is fetched here, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for i, keys in enumerate(steps):
        cache = load(keys)
        out.fill_(float("nan"))
        graph.replay()
        check_fp8_kvcache(f"FP8 CUDA graph replay {i}: new lengths/table/codes/descales", q, cache, out, lse, k_descale,
                          None)


def case_fp8_wrong_inputs():
    """What an FP8 cache refuses, naming the argument: q_descale with the 16-bit q, descales of the wrong dtype,
    shape or device, K and V of different dtypes."""
    gen = torch.Generator(device="cuda").manual_seed(270)
    q = rand(gen, 2, 1, 8, 128, dtype=torch.bfloat16)
    k8, v8 = fp8_codes(gen, 2, 64, 2, 128), fp8_codes(gen, 2, 64, 2, 128)
    kv = flashjit.flash_attn_with_kvcache
    ones = torch.ones(2, 2, device="cuda")
    cases = [
        ("q_descale with a bf16 q", lambda: kv(q, k8, v8, cache_seqlens=9, q_descale=ones), r"q_descale: .*16-bit q"),
        ("k_descale float16", lambda: kv(q, k8, v8, cache_seqlens=9, k_descale=ones.half()),
         r"k_descale: dtype torch.float16; expected torch.float32"),
        ("v_descale [3, 2]", lambda: kv(q, k8, v8, cache_seqlens=9, v_descale=torch.ones(3, 2, device="cuda")),
         r"v_descale: shape \(3, 2\)"),
        ("k_descale on the CPU", lambda: kv(q, k8, v8, cache_seqlens=9, k_descale=ones.cpu()), r"k_descale: is on cpu"),
        ("K e4m3, V bf16", lambda: kv(q, k8, v8.to(torch.bfloat16), cache_seqlens=9),
         r"k_cache and v_cache: dtypes torch.float8_e4m3fn and torch.bfloat16 differ"),
    ]
    expect_raises("FP8 wrong input: {}", cases)


# ---- FP8 operands (flashjit.h, FP8 OPERANDS; FA3's FP8) ------------------------------------------------
FP8_O_BOUND = 2.0 ** -4  # O's relative L2 error (src/verify/check.hpp's kFp8OperandsOErrorBound, the argument there)


def fp8_outlier_codes(gen, *shape, outliers=0):
    """e4m3 codes of N(0, 1) samples [batch, seqlen, heads, d] (or [rows, heads, d]); `outliers` rows of dim 1 of
    each batch entry (dim 0 for 3-D) 50x before rounding (their scores about 50x the rest)."""
    x = torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32)
    if outliers:
        rows = torch.randint(0, shape[-3], (outliers,), generator=gen, device="cuda")
        if len(shape) == 4:
            x[:, rows] *= 50
        else:
            x[rows] *= 50
    return x.to(torch.float8_e4m3fn)


def fp8_dequantised(codes, rows, group):
    """codes [n, heads, d] (e4m3) times their K/V head's descale rows [heads_kv] (a query head, group to a K/V head,
    takes its K/V head's), in float64: the exact values the float64 reference reads."""
    return codes.double() * rows.double().repeat_interleave(group).view(1, -1, 1)


def fp8_score_magnitude(q, k, causal, scale):
    """Each row's score magnitude [sq, hq] (src/verify/check.hpp's Reference::magnitude): scale x the largest sum of
    |q_c k_c| over the keys the row sees (0 where it sees none), on the dequantised float64 inputs."""
    sq, hq, _ = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    if sq == 0 or sk == 0:
        return torch.zeros(sq, hq, dtype=torch.float64, device=q.device)
    qa = q.double().abs().transpose(0, 1)
    ka = k.double().abs().transpose(0, 1).repeat_interleave(hq // hkv, 0)
    mag = qa @ ka.transpose(-1, -2) * abs(scale)  # [hq, sq, sk]
    m = mask_of(sq, sk, causal, q.device)
    if m is not None:
        mag = mag.masked_fill(~m, 0.0)
    return mag.amax(-1).transpose(0, 1)


# The LSE's error per unit of its row's score magnitude that FP8 operands may add (check.cpp's fp8_lse_error with
# exact copies: the float64 reference reads codes x descales exactly, as the kernel does): Hopper's FP8 wgmma
# sums at reduced precision (about 14 bits), so each score is off by up to about 2^-12 of its summed |q_c k_c|
# (2.6e-4 at most on an H100, bench/NOTES.md, c99bc0a).
FP8_LSE_PER_MAGNITUDE = 2.0 ** -10


class Fp8OperandErrors:
    """O's relative L2 error against float64 on the dequantised inputs and the LSE's largest error in units of its
    bound, over the sequences added: O within FP8_O_BOUND; each LSE within LSE_BOUND x max(1, |LSE|) +
    FP8_LSE_PER_MAGNITUDE x its row's score magnitude (check.cpp's fp8_lse_error), so self.lse <= LSE_BOUND."""

    def __init__(self):
        self.d2 = self.r2 = self.lse = self.lse_plain = 0.0
        self.nan = False

    def add(self, o, q, k, v, causal, scale, lse=None):
        ref_o, ref_lse = reference(q, k, v, causal, scale)
        od = o.double()
        self.nan |= bool(torch.isnan(od).any())
        self.d2 += float(((od - ref_o) ** 2).sum())
        self.r2 += float((ref_o ** 2).sum())
        if lse is not None and lse.numel():
            got = lse.double()
            finite = torch.isfinite(ref_lse)
            allowed = ref_lse.abs().clamp(min=1.0) + fp8_score_magnitude(q, k, causal, scale) * (FP8_LSE_PER_MAGNITUDE / LSE_BOUND)
            err = torch.where(finite, (got - ref_lse).abs() / allowed, torch.where(got == float("-inf"), 0.0, float("inf")))
            err = torch.where(torch.isnan(got), float("inf"), err)
            self.lse = max(self.lse, float(err.max()))
            plain = torch.where(finite, (got - ref_lse).abs() / ref_lse.abs().clamp(min=1.0), torch.zeros_like(got))
            self.lse_plain = max(self.lse_plain, float(torch.nan_to_num(plain, nan=float("inf")).max()))

    def result(self):
        ours = math.sqrt(self.d2) / (math.sqrt(self.r2) or 1.0)
        ok = not self.nan and ours <= FP8_O_BOUND and self.lse <= LSE_BOUND
        return ok, (f"O err {ours:.2e} (bound {FP8_O_BOUND:.2e})  LSE err {self.lse_plain:.2e} "
                    f"({self.lse / LSE_BOUND:.2f} of its bound)")


def fp8_operand_descales(gen, batch, hkv):
    """(label, q_descale, k_descale, v_descale) as engines pass them: per tensor (powers of two), FA3's [batch,
    heads_kv] (one a strided view), per K/V head, none (1.0)."""
    def uniform(*shape):
        return torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) * 1.5 + 0.5
    wide = uniform(batch, 2 * hkv)
    return [("per tensor", torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda"),
             torch.tensor([0.25], device="cuda")),
            ("FA3's [batch, heads_kv]", uniform(batch, hkv), wide[:, ::2], uniform(batch, hkv)),
            ("per K/V head, no q_descale", None, uniform(hkv), uniform(hkv)),
            ("no descales (1.0)", None, None, None)]


def check_fp8_operands(name, out, lse, seqs, causal, scale, want_dtype):
    """seqs: (o rows, q codes, k codes, v codes, q, k, v descale rows [hkv]) of each sequence; lse rows
    [sq, hq] or None."""
    torch.cuda.synchronize()
    errs = Fp8OperandErrors()
    for o, q, k, v, qs, ks, vs, lse_rows in seqs:
        group = q.shape[1] // k.shape[1]
        errs.add(o, fp8_dequantised(q, qs, group), fp8_dequantised(k, ks, 1), fp8_dequantised(v, vs, 1), causal, scale,
                 lse_rows)
    ok, detail = errs.result()
    ok_dtype = out.dtype == want_dtype
    report(name, ok and ok_dtype and bool(torch.isfinite(out).all()),
           detail + ("" if ok_dtype else f" (out {out.dtype}, expected {want_dtype})"))


def case_fp8_operands_func(d, causal):
    """flash_attn_func on e4m3 q, k and v (GQA 16/4, 300 queries against 1000 keys, outlier keys), each descale
    layout; O bf16."""
    gen = torch.Generator(device="cuda").manual_seed(300 + d + causal)
    b, sq, sk, hq, hkv = 2, 300, 1000, 16, 4
    q, k, v = fp8_outlier_codes(gen, b, sq, hq, d), fp8_outlier_codes(gen, b, sk, hkv, d, outliers=3), \
        fp8_outlier_codes(gen, b, sk, hkv, d)
    for label, qd, kd, vd in fp8_operand_descales(gen, b, hkv):
        out, lse = flashjit.flash_attn_func(q, k, v, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd,
                                            return_attn_probs=True)
        qs, ks, vs = (descale_rows(t, b, hkv) for t in (qd, kd, vd))
        seqs = [(out[i], q[i], k[i], v[i], qs[i], ks[i], vs[i], lse[i].transpose(0, 1)) for i in range(b)]
        check_fp8_operands(f"FP8 operands func: d{d}{' causal' if causal else ''}, {label}", out, lse, seqs, causal,
                           d ** -0.5, torch.bfloat16)


def case_fp8_operands_varlen_paged(page_size):
    """flash_attn_varlen_func on packed e4m3 q against paged e4m3 pools (NaN codes in every unread slot), an fp16
    out given (written in place), causal, FA3's [batch, heads_kv] descales."""
    gen, rng = torch.Generator(device="cuda").manual_seed(320 + page_size), random.Random(320 + page_size)
    counts, keys, hq, hkv, d = [5, 1, 0, 300, 37], [700, 64, 10, 300, 2000], 16, 4, 128
    cuq_h, cuq = cu_of(counts)
    cache = Paged(gen, rng, keys, page_size, hkv, d, torch.float8_e4m3fn)
    poison_unused(cache)
    q = fp8_outlier_codes(gen, cuq_h[-1], hq, d)
    qd, kd, vd = (torch.rand(len(keys), hkv, generator=gen, device="cuda") + 0.5 for _ in range(3))
    out = torch.full((cuq_h[-1], hq, d), float("nan"), dtype=torch.float16, device="cuda")
    result, lse = flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, max(counts), max(keys),
                                                  seqused_k=cache.seqused, causal=True, q_descale=qd, k_descale=kd,
                                                  v_descale=vd, block_table=cache.table, out=out,
                                                  return_softmax_lse=True)
    seqs = []
    for b in range(len(counts)):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = fp8_seq(cache, b)
        seqs.append((out[r], q[r], k, v, qd[b], kd[b], vd[b], lse[:, r].transpose(0, 1)))
    check_fp8_operands(f"FP8 operands varlen: paged {page_size}, NaN codes unused, fp16 out", out, lse, seqs, True,
                       d ** -0.5, torch.float16)
    report(f"FP8 operands varlen: paged {page_size}, out written in place", result is out)


def case_fp8_operands_kvcache(num_splits):
    """flash_attn_with_kvcache on e4m3 q against a paged e4m3 cache (decode, GQA 32/8, d128), each descale layout."""
    gen, rng = torch.Generator(device="cuda").manual_seed(340 + num_splits), random.Random(340 + num_splits)
    keys, hq, hkv, d = [3000, 17, 1, 2048, 640, 64], 32, 8, 128
    cache = Paged(gen, rng, keys, 16, hkv, d, torch.float8_e4m3fn)
    q = fp8_outlier_codes(gen, len(keys), 1, hq, d)
    for label, qd, kd, vd in fp8_operand_descales(gen, len(keys), hkv):
        out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused,
                                                    page_table=cache.table, q_descale=qd, k_descale=kd, v_descale=vd,
                                                    num_splits=num_splits, return_softmax_lse=True)
        qs, ks, vs = (descale_rows(t, len(keys), hkv) for t in (qd, kd, vd))
        seqs = []
        for b in range(len(keys)):
            k, v = fp8_seq(cache, b)
            seqs.append((out[b], q[b], k, v, qs[b], ks[b], vs[b], lse[b].transpose(0, 1)))
        check_fp8_operands(f"FP8 operands kvcache: num_splits={num_splits}, {label}", out, lse, seqs, False, d ** -0.5,
                           torch.bfloat16)


def case_fp8_operands_fast_path():
    """The fast path with FP8 operands: calls of one signature with different q/k/v descale tensors (same shapes and
    strides) and values changed in place each use their own (no stale pointers); a call without q_descale is a
    signature of its own; no tensor is made for a missing q_descale (the device's 1.0 is made once, for K and V)."""
    from flashjit import _torch_backend as tb
    gen, rng = torch.Generator(device="cuda").manual_seed(360), random.Random(360)
    keys, hq, hkv, d = [1500, 3, 700, 64], 32, 8, 128
    cache = Paged(gen, rng, keys, 16, hkv, d, torch.float8_e4m3fn)
    q = fp8_outlier_codes(gen, len(keys), 1, hq, d)
    before, ok_all, detail = len(tb._fast), True, ""
    a = torch.rand(len(keys), hkv, generator=gen, device="cuda") + 0.5
    b_ = torch.rand(len(keys), hkv, generator=gen, device="cuda") * 3 + 0.25
    steps = [(a, b_, a), (b_, a, b_), (a, a, a), (None, b_, a), (b_, b_, b_)]
    ones = tb.device(q.get_device()).ones
    for i, (qd, kd, vd) in enumerate(steps):
        if i == 2:
            with torch.no_grad():
                a.mul_(2.5)  # new values, same tensor
        out = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table,
                                               q_descale=qd, k_descale=kd, v_descale=vd)
        qs, ks, vs = (descale_rows(t, len(keys), hkv) for t in (qd, kd, vd))
        torch.cuda.synchronize()
        errs = Fp8OperandErrors()
        for s_ in range(len(keys)):
            k, v = fp8_seq(cache, s_)
            errs.add(out[s_], fp8_dequantised(q[s_], qs[s_], hq // hkv), fp8_dequantised(k, ks[s_], 1),
                     fp8_dequantised(v, vs[s_], 1), False, d ** -0.5)
        ok, detail = errs.result()
        ok_all &= ok and out.dtype == torch.bfloat16
    remembered = len(tb._fast) - before
    same_ones = tb.device(q.get_device()).ones is ones
    report("FP8 operands fast path: new descales each call", ok_all and remembered == 2 and same_ones,
           f"{remembered} plans remembered for 5 calls of 2 signatures (expected 2), ones kept {same_ones}; {detail}")


def case_fp8_operands_compile():
    """torch.compile(fullgraph=True) over an FP8-operands decode with all three descales: bitwise equal to eager."""
    gen, rng = torch.Generator(device="cuda").manual_seed(370), random.Random(370)
    keys, hkv = [2000, 5, 300], 8
    cache = Paged(gen, rng, keys, 16, hkv, 128, torch.float8_e4m3fn)
    q = fp8_outlier_codes(gen, len(keys), 1, 32, 128)
    qd, kd = (torch.rand(len(keys), hkv, generator=gen, device="cuda") + 0.5 for _ in range(2))
    vd = torch.rand(hkv, generator=gen, device="cuda") + 0.5

    def layer(q, kc, vc, used, table, qd, kd, vd):
        return flashjit.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=used, page_table=table, q_descale=qd,
                                                k_descale=kd, v_descale=vd) * 2

    inputs = (q, cache.k, cache.v, cache.seqused, cache.table, qd, kd, vd)
    eager = layer(*inputs)
    compiled = torch.compile(layer, fullgraph=True)(*inputs)
    torch.cuda.synchronize()
    report("FP8 operands torch.compile(fullgraph=True): kvcache with descales", torch.equal(eager, compiled),
           "" if torch.equal(eager, compiled) else f"max diff {(eager.float() - compiled.float()).abs().max().item():.2e}")


def case_fp8_operands_graph_replay():
    """One CUDA graph captured once (after one eager call) and replayed after the lengths, the table, the codes and
    the q/k descales ([batch, heads_kv]) change in place; V without a descale (1.0); split-KV."""
    steps = [[3000, 17, 1, 2048, 500, 64], [3001, 18, 2, 2049, 0, 65], [3002, 0, 3, 4000, 1, 4096]]
    hq, hkv, d, ps, batch, max_k = 32, 8, 128, 16, 6, 4096
    gen, rng = torch.Generator(device="cuda").manual_seed(380), random.Random(380)
    max_pages = max_k // ps
    pool_k = torch.empty(batch * max_pages + 4, ps, hkv, d, dtype=torch.float8_e4m3fn, device="cuda")
    pool_v = torch.empty_like(pool_k)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32, device="cuda")
    lens = torch.zeros(batch, dtype=torch.int32, device="cuda")
    q = torch.empty(batch, 1, hq, d, dtype=torch.float8_e4m3fn, device="cuda")
    q_descale = torch.empty(batch, hkv, dtype=torch.float32, device="cuda")
    k_descale = torch.empty(batch, hkv, dtype=torch.float32, device="cuda")

    def load(keys):
        pages = list(range(pool_k.shape[0]))
        rng.shuffle(pages)
        host = [[-1] * max_pages for _ in keys]
        for b, sk in enumerate(keys):
            for i in range(-(-sk // ps)):
                host[b][i] = pages.pop()
        with torch.no_grad():
            table.copy_(torch.tensor(host, dtype=torch.int32))
            lens.copy_(torch.tensor(keys, dtype=torch.int32))
            q.view(torch.uint8).copy_(fp8_codes(gen, *q.shape).view(torch.uint8))
            pool_k.view(torch.uint8).copy_(fp8_codes(gen, *pool_k.shape).view(torch.uint8))
            pool_v.view(torch.uint8).copy_(fp8_codes(gen, *pool_v.shape).view(torch.uint8))
            q_descale.copy_(torch.rand(batch, hkv, generator=gen, device="cuda") + 0.5)
            k_descale.copy_(torch.rand(batch, hkv, generator=gen, device="cuda") + 0.5)
        return argparse.Namespace(k=pool_k, v=pool_v, page_size=ps, keys=list(keys), table_host=host)

    def step():
        return flashjit.flash_attn_with_kvcache(q, pool_k, pool_v, cache_seqlens=lens, page_table=table,
                                                q_descale=q_descale, k_descale=k_descale, return_softmax_lse=True)

    load(steps[0])
    step()  # the kernel is fetched here, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for i, keys in enumerate(steps):
        cache = load(keys)
        out.fill_(float("nan"))
        graph.replay()
        qs, ks, vs = (descale_rows(t, batch, hkv) for t in (q_descale, k_descale, None))
        seqs = []
        for b in range(batch):
            k, v = fp8_seq(cache, b)
            seqs.append((out[b], q[b], k, v, qs[b], ks[b], vs[b], lse[b].transpose(0, 1)))
        check_fp8_operands(f"FP8 operands CUDA graph replay {i}: new lengths/table/codes/descales", out, lse, seqs,
                           False, d ** -0.5, torch.bfloat16)


def case_fp8_operands_wrong_inputs():
    """What FP8 operands refuse, naming the argument: an e4m3 q with 16-bit K and V, an out of float32, a q_descale
    of the wrong shape or device."""
    gen = torch.Generator(device="cuda").manual_seed(390)
    q8 = fp8_codes(gen, 2, 1, 8, 128)
    k8, v8 = fp8_codes(gen, 2, 64, 2, 128), fp8_codes(gen, 2, 64, 2, 128)
    kb = rand(gen, 2, 64, 2, 128, dtype=torch.bfloat16)
    kv, fa = flashjit.flash_attn_with_kvcache, flashjit.flash_attn_func
    ones = torch.ones(2, 2, device="cuda")
    cases = [
        ("an e4m3 q with bf16 K and V", lambda: fa(q8, kb, kb), r"q, k and v: dtypes torch.float8_e4m3fn, torch.bfloat16"),
        ("an e4m3 q with a bf16 cache", lambda: kv(q8, kb, kb, cache_seqlens=9),
         r"q, k_cache and v_cache: dtypes torch.float8_e4m3fn"),
        ("out float32", lambda: kv(q8, k8, v8, cache_seqlens=9, out=torch.empty(2, 1, 8, 128, device="cuda")),
         r"out: torch.float32 .*expected torch.bfloat16 or torch.float16"),
        ("q_descale [3, 2]", lambda: kv(q8, k8, v8, cache_seqlens=9, q_descale=torch.ones(3, 2, device="cuda")),
         r"q_descale: shape \(3, 2\)"),
        ("q_descale on the CPU", lambda: kv(q8, k8, v8, cache_seqlens=9, q_descale=ones.cpu()), r"q_descale: is on cpu"),
    ]
    expect_raises("FP8 operands wrong input: {}", cases)


def case_wrong_inputs():
    gen = torch.Generator(device="cuda").manual_seed(80)
    bf = torch.bfloat16
    q, k = rand(gen, 2, 16, 8, 128, dtype=bf), rand(gen, 2, 32, 2, 128, dtype=bf)
    cuq = torch.tensor([0, 8, 16], dtype=torch.int32, device="cuda")
    qp, kp = q.reshape(32, 8, 128)[:16], rand(gen, 10, 16, 2, 128, dtype=bf)
    table = torch.zeros(2, 4, dtype=torch.int32, device="cuda")
    used = torch.tensor([5, 9], dtype=torch.int32, device="cuda")
    fa, va, kv = flashjit.flash_attn_func, flashjit.flash_attn_varlen_func, flashjit.flash_attn_with_kvcache
    leaf = q.clone().requires_grad_(True)
    odd = torch.empty(2, 16, 8, 130, dtype=bf, device="cuda")[..., 1:129]  # head_dim contiguous, 2-byte offset
    cases = [
        ("q on the CPU", lambda: fa(q.cpu(), k, k), r"q: is on cpu"),
        ("q float32", lambda: fa(q.float(), k, k), r"q: dtype torch.float32 is not supported"),
        ("k fp16 with q bf16", lambda: fa(q, k.half(), k), r"k: dtype torch.float16 differs"),
        ("q head_dim not contiguous", lambda: fa(q.transpose(1, 3).contiguous().transpose(1, 3), k, k),
         r"q: the last dimension \(head_dim\) must be contiguous"),
        ("q 3-D in flash_attn_func", lambda: fa(q[0], k, k), r"q: expected 4 dimensions"),
        ("heads 8 over 3", lambda: fa(q, k[:, :, :1].expand(2, 32, 3, 128), k[:, :, :1].expand(2, 32, 3, 128)),
         r"q: 8 heads is not a multiple of k's 3"),
        ("cu_seqlens_q int64", lambda: va(qp, kp, kp, cuq.long(), None, 8, 64, seqused_k=used, block_table=table),
         r"cu_seqlens_q: dtype torch.int64; expected torch.int32"),
        ("block_table without seqused_k", lambda: va(qp, kp, kp, cuq, None, 8, 64, block_table=table),
         r"seqused_k: is required with block_table"),
        ("page_table with 1 row for 2 sequences", lambda: kv(q, kp, kp, cache_seqlens=used, page_table=table[:1]),
         r"page_table: has 1 entries; expected 2"),
        ("out of the wrong shape", lambda: va(qp, kp, kp, cuq, None, 8, 64, seqused_k=used, block_table=table,
                                             out=qp[:8]), r"out: shape \(8, 8, 128\); expected \(16, 8, 128\)"),
        ("requires grad", lambda: fa(leaf, k, k), r"q: requires grad, but flashjit has no backward"),
        ("q misaligned, strides of 130 (library check)", lambda: fa(odd, k, k), r"flashjit: q: "),
    ]
    expect_raises("wrong input: {}", cases)


# ---- V narrower than Q (FA3's head_dim_v; spec key head_dim_v) ---------------------------------------
def case_head_dim_v_func():
    """flash_attn_func with v (and out) of a head dim below q's: DeepSeek's 192/128 (bf16 and fp16, causal or not,
    GQA), 320/256, 128/64, and 100/36 (both padded to multiples of 8); out [b, sq, hq, dv], LSE as usual; then
    the same call again (the fast path) and under torch.compile(fullgraph=True), bitwise equal."""
    gen = torch.Generator(device="cuda").manual_seed(140)
    for dtype, d, dv, causal, b, sq, sk, hq, hkv in (("bf16", 192, 128, True, 2, 300, 1000, 16, 4),
                                                     ("bf16", 192, 128, False, 1, 777, 777, 8, 8),
                                                     ("fp16", 192, 128, True, 2, 257, 257, 8, 2),
                                                     ("bf16", 320, 256, True, 1, 500, 500, 4, 2),
                                                     ("fp16", 128, 64, False, 2, 129, 300, 8, 2),
                                                     ("bf16", 100, 36, True, 2, 130, 130, 4, 4)):
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        q, k, v = rand(gen, b, sq, hq, d, dtype=tdt), rand(gen, b, sk, hkv, d, dtype=tdt), rand(gen, b, sk, hkv, dv, dtype=tdt)
        out, lse = flashjit.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
        again = flashjit.flash_attn_func(q, k, v, causal=causal)
        again2 = flashjit.flash_attn_func(q, k, v, causal=causal)  # a remembered plan: the fast path
        torch.cuda.synchronize()
        errs = Errors(dtype)
        for i in range(b):
            errs.add(out[i], q[i], k[i], v[i], causal, d ** -0.5, lse[i].transpose(0, 1))
        ok, detail = errs.result()
        shaped = out.shape == (b, sq, hq, dv) and lse.shape == (b, hq, sq) and again2.shape == out.shape
        same = torch.equal(again, out) and torch.equal(again2, out)
        report(f"func: head dims {d}/{dv} {dtype}{' causal' if causal else ''}", ok and shaped and same,
               detail + ("" if shaped else f"  out {tuple(out.shape)}") + ("" if same else "  a repeated call differs"))
    q, k, v = (rand(gen, 2, 200, 8, 192, dtype=torch.bfloat16), rand(gen, 2, 200, 8, 192, dtype=torch.bfloat16),
               rand(gen, 2, 200, 8, 128, dtype=torch.bfloat16))

    def layer(q, k, v):
        return flashjit.flash_attn_func(q, k, v, causal=True) + 1
    eager = layer(q, k, v)
    compiled = torch.compile(layer, fullgraph=True)(q, k, v)
    torch.cuda.synchronize()
    report("func: head dims 192/128 under torch.compile(fullgraph=True)",
           compiled.shape == (2, 200, 8, 128) and torch.equal(eager, compiled))


def large_head_dim_calls(label):
    """flash_attn_func at 512/512 and 384/384 (bf16 and fp16, causal or not, GQA and MHA, lengths off the blocks) and
    flash_attn_varlen_func at 512/512 against a paged cache (pages of 16, NaN past every length, empty sequences,
    out given with NaN first), each against float64; the repeated call bitwise equal."""
    gen, rng = torch.Generator(device="cuda").manual_seed(150), random.Random(150)
    for dtype, d, causal, b, sq, sk, hq, hkv in (("bf16", 512, True, 2, 300, 1000, 8, 4),
                                                 ("fp16", 512, False, 1, 777, 500, 4, 4),
                                                 ("bf16", 384, True, 2, 257, 129, 8, 2)):
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        q, k, v = rand(gen, b, sq, hq, d, dtype=tdt), rand(gen, b, sk, hkv, d, dtype=tdt), rand(gen, b, sk, hkv, d, dtype=tdt)
        out, lse = flashjit.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
        again = flashjit.flash_attn_func(q, k, v, causal=causal)
        torch.cuda.synchronize()
        errs = Errors(dtype)
        for i in range(b):
            errs.add(out[i], q[i], k[i], v[i], causal, d ** -0.5, lse[i].transpose(0, 1))
        ok, detail = errs.result()
        same = torch.equal(again, out)
        report(f"func {label}: head dims {d}/{d} {dtype}{' causal' if causal else ''}", ok and same,
               detail + ("" if same else "  a repeated call differs"))
    paged_varlen_case(gen, rng, [(1, 1000), (0, 0), (129, 129), (300, 812), (3, 2), (17, 0)], 16, 8, 2, 512, 512, 1,
                      f"varlen_func {label}: head dims 512/512, paged 16")


def case_paired_q_regs():
    """_plan.PAIRED on (spec keys paired=1,q_reg_dims=N: a tile's two consumer warpgroups share its scores, the first
    holding Q's first N head dims in registers): large_head_dim_calls against float64; every plan made is a paired=1
    kernel's with q_reg_dims (specs_planned_with: the calls plan afresh)."""
    made = specs_planned_with("PAIRED", lambda: large_head_dim_calls("paired q_reg_dims"))
    ok = bool(made) and all(",paired=1," in spec and ",q_reg_dims=" in spec for spec in made)
    report("paired q_reg_dims: the plans are paired=1 with q_reg_dims", ok, "; ".join(made) or "no plan made")


def case_dim_split():
    """_plan.DIM_SPLIT on and _plan.PAIRED off (spec key dim_split=1: a cluster's two CTAs share out the head dims of
    each tile): large_head_dim_calls against float64; every plan made is a dim_split=1 kernel's (specs_planned_with:
    the calls plan afresh)."""
    made = specs_planned_with("DIM_SPLIT", lambda: large_head_dim_calls("dim_split"), off=("PAIRED",))
    ok = bool(made) and all(spec.endswith(",dim_split=1") for spec in made)
    report("dim_split: the plans are dim_split=1", ok, "; ".join(made) or "no plan made")


def case_head_dim_v_varlen():
    """flash_attn_varlen_func at 192/128: packed K/V, and vLLM's call against a paged cache (pages of 16 and 64,
    V's pool 128 wide) with out given [total_q, hq, 128] (NaN first; rows past the last sequence untouched), with
    and without splits."""
    gen, rng = torch.Generator(device="cuda").manual_seed(141), random.Random(141)
    d, dv, hq, hkv = 192, 128, 16, 4
    seqs = [(1, 700), (0, 0), (129, 129), (300, 812), (3, 2), (17, 0)]
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cuk_h, cuk = cu_of([s for _, s in seqs])
    q = rand(gen, cuq_h[-1], hq, d, dtype=torch.bfloat16)
    k, v = rand(gen, cuk_h[-1], hkv, d, dtype=torch.bfloat16), rand(gen, cuk_h[-1], hkv, dv, dtype=torch.bfloat16)
    out, lse = flashjit.flash_attn_varlen_func(q, k, v, cuq, cuk, 300, 812, causal=True, return_attn_probs=True)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(seqs)):
        r, c = slice(cuq_h[b], cuq_h[b + 1]), slice(cuk_h[b], cuk_h[b + 1])
        errs.add(out[r], q[r], k[c], v[c], True, d ** -0.5, lse[:, r].transpose(0, 1))
    ok, detail = errs.result()
    report("varlen_func: head dims 192/128, packed K/V", ok and out.shape == (cuq_h[-1], hq, dv), detail)
    seqs = [(1, 1000), (1, 37), (4, 517), (0, 0), (300, 812), (129, 129), (3, 2)]
    for page_size, num_splits in ((16, 1), (64, 1), (16, 0)):
        paged_varlen_case(gen, rng, seqs, page_size, hq, hkv, d, dv, num_splits,
                          f"varlen_func: head dims 192/128, paged {page_size}, num_splits={num_splits}")


def paged_varlen_case(gen, rng, seqs, page_size, hq, hkv, d, dv, num_splits, name):
    """vLLM's flash_attn_varlen_func against a paged bf16 cache (seqs: (queries, keys) a sequence; V's pool dv wide)
    with out given [total_q + 2, hq, dv] (NaN first; the rows past the last sequence must stay untouched), causal,
    against float64."""
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cache = Paged(gen, rng, [s for _, s in seqs], page_size, hkv, d, torch.bfloat16, dv=dv)
    q = rand(gen, cuq_h[-1] + 2, hq, d, dtype=torch.bfloat16)
    out = torch.full((cuq_h[-1] + 2, hq, dv), float("nan"), dtype=torch.bfloat16, device="cuda")
    o, lse = flashjit.flash_attn_varlen_func(q, cache.k, cache.v, cuq, None, max(s for s, _ in seqs), cache.max_pages * page_size,
                                             seqused_k=cache.seqused, causal=True, num_splits=num_splits,
                                             block_table=cache.table, out=out, return_softmax_lse=True)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(seqs)):
        r = slice(cuq_h[b], cuq_h[b + 1])
        k, v = cache.seq(b)
        errs.add(out[r], q[r], k, v, True, d ** -0.5, lse[:, r].transpose(0, 1))
    ok, detail = errs.result()
    untouched = bool(torch.isnan(out[cuq_h[-1]:]).all())
    report(name, ok and untouched and o is out, detail + ("" if untouched else "  rows past the last sequence were written"))


def case_head_dim_v_kvcache():
    """flash_attn_with_kvcache at 192/128: paged split-KV decode (1 and 4 causal queries, GQA 32/8) and a dense
    cache with cache_seqlens=int; 320/256 paged decode."""
    gen, rng = torch.Generator(device="cuda").manual_seed(142), random.Random(142)
    for d, dv, queries, page_size in ((192, 128, 1, 16), (192, 128, 4, 64), (320, 256, 1, 16)):
        keys = [3000, 17, 1, 2048, 4000, 64]
        cache = Paged(gen, rng, keys, page_size, 8, d, torch.bfloat16, dv=dv)
        q = rand(gen, len(keys), queries, 32, d, dtype=torch.bfloat16)
        out, lse = flashjit.flash_attn_with_kvcache(q, cache.k, cache.v, cache_seqlens=cache.seqused, page_table=cache.table,
                                                    causal=queries > 1, return_softmax_lse=True)
        check_kvcache(f"with_kvcache: head dims {d}/{dv}, paged {page_size}, {queries} queries, split", q, cache, out, lse,
                      queries > 1)
        if out.shape != (len(keys), queries, 32, dv):
            report(f"with_kvcache: head dims {d}/{dv} out shape", False, str(tuple(out.shape)))
    b, s_cache = 3, 1024
    q = rand(gen, b, 2, 16, 192, dtype=torch.bfloat16)
    kc, vc = rand(gen, b, s_cache, 2, 192, dtype=torch.bfloat16), rand(gen, b, s_cache, 2, 128, dtype=torch.bfloat16)
    out = torch.full((b, 2, 16, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    o = flashjit.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=777, causal=True, out=out)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for i in range(b):
        errs.add(out[i], q[i], kc[i, :777], vc[i, :777], True, 192 ** -0.5)
    ok, detail = errs.result()
    report("with_kvcache: head dims 192/128, dense cache, out given", ok and o is out, detail)


def case_head_dim_v_wrong_inputs():
    """Errors name the argument: V's head dim above Q's (NotImplementedError), out with q's head dim instead of
    V's (ValueError), V of another shape but for the head dim (ValueError)."""
    gen = torch.Generator(device="cuda").manual_seed(143)
    q, k = rand(gen, 2, 16, 8, 192, dtype=torch.bfloat16), rand(gen, 2, 32, 2, 192, dtype=torch.bfloat16)
    v = rand(gen, 2, 32, 2, 128, dtype=torch.bfloat16)
    cu = torch.tensor([0, 16, 32], dtype=torch.int32, device="cuda")
    expect_not_implemented("head_dim_v: {}", [
        ("V above Q", lambda: flashjit.flash_attn_func(q[..., :128], k[..., :128], k), r"v: head dim 192 above q's 128"),
        ("v_cache above q", lambda: flashjit.flash_attn_with_kvcache(q[..., :128], k[..., :128], k, cache_seqlens=9),
         r"v_cache: head dim 192 above q's 128"),
    ])
    expect_raises("head_dim_v: {}", [
        ("out with q's head dim", lambda: flashjit.flash_attn_varlen_func(
            q.reshape(32, 8, 192), k.reshape(64, 2, 192), v.reshape(64, 2, 128), cu, cu, 16, 32,
            out=torch.empty(32, 8, 192, dtype=torch.bfloat16, device="cuda")), r"out: shape \(32, 8, 192\); expected \(32, 8, 128\)"),
        ("v of other keys", lambda: flashjit.flash_attn_func(q, k, v[:, :16]), r"v: shape \(2, 16, 2, 128\) differs from k's"),
    ])


# ---- FA3's qv: the split MLA form (flashjit.h, MLA SPLIT FORM; spec key qv=1) --------------------------------------
QV_KEYS = [4097, 1, 63, 64, 65, 2000]  # around pages of 64, one long (test_mla_gpu's)


def qv_queries(gen, batch, queries, heads, dq, dv, dtype, views):
    """(q, qv): q [batch, queries, heads, dq] (the rotary part) and qv [.., dv] (the latent part); views: both views of
    one [.., dv + dq] buffer (qv its first dv columns, q the rest: q's rows dv + dq apart), else two tensors."""
    if views:
        full = rand(gen, batch, queries, heads, dv + dq, dtype=dtype)
        return full[..., dv:], full[..., :dv]
    return rand(gen, batch, queries, heads, dq, dtype=dtype), rand(gen, batch, queries, heads, dv, dtype=dtype)


def check_qv_latent(name, dtype_name, q, qv, cache, out, lse, causal, scale):
    """O and the LSE of a call on the latent cache (test_mla_gpu.Latent: [v | k] rows) against float64 attention
    on the concatenated rows: Q = [qv | q], K = the latent rows [v | k], V = v (test_mla_gpu's reference and
    errors, empty rows O = 0 and LSE = -inf included)."""
    torch.cuda.synchronize()
    batch, sq, hq, _ = q.shape
    dv = qv.shape[-1]
    shaped = tuple(out.shape) == (batch, sq, hq, dv) and tuple(lse.shape) == (batch, hq, sq)
    errs = test_mla_gpu.MlaErrors(dtype_name)
    for b in range(batch):
        errs.add(out[b], lse[b], torch.cat([qv[b], q[b]], -1), cache.seq(b), causal, scale)
    ok, detail = errs.result()
    report(name, ok and shaped, detail + ("" if shaped else f"  shapes {tuple(out.shape)} {tuple(lse.shape)}"))


def case_qv_kvcache_paged(heads, queries, views, page=64, dtype_name="bf16", label=""):
    """FA3's flash_attn_with_kvcache in the split MLA form, as vLLM's FlashAttention MLA backend calls it: q the
    rotary part (64), qv the latent part (512), k_cache and v_cache two views of one paged latent cache [pages, 64, 1,
    576] (v_cache = latent[..., :512], k_cache = latent[..., 512:]; NaN past every length and in spare pages), causal,
    the default scale (576^-0.5). Against float64 on [qv | q] and the latent rows with V = v; then the fast path (a
    remembered plan, new q and qv) bitwise equal to the full path on the same inputs."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    seed = 3000 + heads * 10 + queries
    gen, rng = torch.Generator(device="cuda").manual_seed(seed), random.Random(seed)
    cache = test_mla_gpu.Latent(gen, rng, QV_KEYS, page, dtype)
    k_cache, v_cache = cache.pool[..., 512:], cache.pool[..., :512]
    q, qv = qv_queries(gen, len(QV_KEYS), queries, heads, 64, 512, dtype, views)

    def call(q, qv, lse):
        return flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, qv=qv, cache_seqlens=cache.lens,
                                                page_table=cache.table, causal=True, return_softmax_lse=lse)
    test_mla_gpu.poison_allocator()
    out, lse = call(q, qv, True)
    name = (f"with_kvcache qv (split MLA 64+512): {dtype_name} h{heads} s_q {queries} page {page}, "
            f"{'q/qv views' if views else 'q, qv apart'}{label}")
    check_qv_latent(name, dtype_name, q, qv, cache, out, lse, True, 576 ** -0.5)
    call(q, qv, False)  # remembered: later calls like it take the fast path
    q2, qv2 = qv_queries(gen, len(QV_KEYS), queries, heads, 64, 512, dtype, views)
    test_mla_gpu.poison_allocator()
    fast = call(q2, qv2, False)
    full, lse2 = call(q2, qv2, True)
    torch.cuda.synchronize()
    same = torch.equal(fast, full)
    check_qv_latent(name + ", new q/qv", dtype_name, q2, qv2, cache, full, lse2, True, 576 ** -0.5)
    report(name + ", fast path", same, "" if same else
           f"fast path differs from the full path by {(fast.float() - full.float()).abs().max().item():.2e}")


def specs_planned_with(switch, fn, off=()):
    """fn() with the package's plan switch _plan.<switch> on (and those named in off, off) and the remembered plans
    and fast paths cleared around it (its calls plan afresh, and what they planned is not kept); returns the specs of
    the plans fn made."""
    from flashjit import _plan, _torch_backend
    dev = _torch_backend.device(torch.cuda.current_device())
    kept = dict(dev.plans)
    dev.plans.clear()
    saved = {name: getattr(_plan, name) for name in (switch, *off)}
    for name in saved:
        setattr(_plan, name, name == switch)
    _torch_backend._fast.clear()
    try:
        fn()
    finally:
        for name, value in saved.items():
            setattr(_plan, name, value)
        _torch_backend._fast.clear()
        made = [planned[1] for planned in dev.plans.values()]  # (handle, spec, max_splits)
        dev.plans.clear()
        dev.plans.update(kept)
    return made


def with_qv_v_in_k(fn):
    """fn() with the package's qv plan on the shared-scores kernels (_plan.QV_V_IN_K: qv=1 with v_in_k=1); reports
    whether every plan fn made is such a kernel's."""
    made = specs_planned_with("QV_V_IN_K", fn)
    ok = bool(made) and all(",qv=1,v_in_k=1" in spec for spec in made)
    report("qv on the shared-scores kernels: the plans are qv=1,v_in_k=1", ok, "; ".join(made) or "no plan made")


def case_qv_varlen():
    """FA3's flash_attn_varlen_func with qv: a 192/128 split as q 64 + qv 128 against packed k 64 + v 128 (ragged:
    sequences without queries or keys, more queries than keys), GQA 16/4, causal, the default scale (192^-0.5),
    LSE; against float64 (and SDPA) on [qv | q], [v | k], V = v. Then vLLM's decode call: packed q_rope / q_nope
    against the paged latent cache (block_table, seqused_k), 2 queries a sequence, against float64."""
    gen, rng = torch.Generator(device="cuda").manual_seed(3100), random.Random(3100)
    seqs = [(1, 700), (0, 0), (129, 129), (0, 50), (300, 812), (3, 2), (17, 0)]
    hq, hkv, dq, dv = 16, 4, 64, 128
    cuq_h, cuq = cu_of([s for s, _ in seqs])
    cuk_h, cuk = cu_of([s for _, s in seqs])
    q, qv = rand(gen, cuq_h[-1], hq, dq, dtype=torch.bfloat16), rand(gen, cuq_h[-1], hq, dv, dtype=torch.bfloat16)
    k, v = rand(gen, cuk_h[-1], hkv, dq, dtype=torch.bfloat16), rand(gen, cuk_h[-1], hkv, dv, dtype=torch.bfloat16)
    out, lse = flashjit.flash_attn_varlen_func(q, k, v, cuq, cuk, max(s for s, _ in seqs), max(s for _, s in seqs),
                                               causal=True, qv=qv, return_attn_probs=True)
    torch.cuda.synchronize()
    errs = Errors("bf16")
    for b in range(len(seqs)):
        r, c = slice(cuq_h[b], cuq_h[b + 1]), slice(cuk_h[b], cuk_h[b + 1])
        errs.add(out[r], torch.cat([qv[r], q[r]], -1), torch.cat([v[c], k[c]], -1), v[c], True, (dq + dv) ** -0.5,
                 lse[:, r].transpose(0, 1))
    ok, detail = errs.result()
    shaped = tuple(out.shape) == (cuq_h[-1], hq, dv) and tuple(lse.shape) == (hq, cuq_h[-1])
    report("varlen_func qv (split 64+128 = 192/128): packed K/V, ragged, GQA 16/4", ok and shaped, detail)
    # vLLM's FlashAttention MLA decode: packed rows, the paged latent cache's two views
    heads, queries = 16, 2
    cache = test_mla_gpu.Latent(gen, rng, QV_KEYS, 64, torch.bfloat16)
    total = len(QV_KEYS) * queries
    cu = torch.arange(len(QV_KEYS) + 1, dtype=torch.int32, device="cuda") * queries
    q_full = rand(gen, total, heads, 576, dtype=torch.bfloat16)
    q_rope, q_nope = q_full[..., 512:], q_full[..., :512]
    test_mla_gpu.poison_allocator()
    out, lse = flashjit.flash_attn_varlen_func(q_rope, cache.pool[..., 512:], cache.pool[..., :512], cu, None, queries,
                                               cache.max_blocks * 64, seqused_k=cache.lens, causal=True, qv=q_nope,
                                               block_table=cache.table, return_softmax_lse=True)
    shape4 = (len(QV_KEYS), queries, heads)
    check_qv_latent("varlen_func qv (split MLA 64+512): paged latent views, packed rows, s_q 2", "bf16",
                    q_rope.reshape(*shape4, 64), q_nope.reshape(*shape4, 512), cache, out.view(*shape4, 512),
                    lse.view(heads, len(QV_KEYS), queries).transpose(0, 1), True, 576 ** -0.5)


def case_qv_compile():
    """torch.compile(fullgraph=True) over flash_attn_with_kvcache with qv (the op flashjit::fwd takes qv): bitwise
    equal to eager."""
    gen, rng = torch.Generator(device="cuda").manual_seed(3200), random.Random(3200)
    cache = test_mla_gpu.Latent(gen, rng, [900, 5, 300], 64, torch.bfloat16)
    q, qv = qv_queries(gen, 3, 2, 16, 64, 512, torch.bfloat16, True)

    def layer(q, qv, latent, lens, table):
        o = flashjit.flash_attn_with_kvcache(q, latent[..., 512:], latent[..., :512], qv=qv, cache_seqlens=lens,
                                             page_table=table, causal=True)
        return o * 2

    inputs = (q, qv, cache.pool, cache.lens, cache.table)
    eager = layer(*inputs)
    compiled = torch.compile(layer, fullgraph=True)(*inputs)
    torch.cuda.synchronize()
    same = torch.equal(eager, compiled)
    report("torch.compile(fullgraph=True): kvcache qv (split MLA)", same, "" if same else
           f"compiled differs from eager by {(eager.float() - compiled.float()).abs().max().item():.2e}")


def case_qv_wrong_inputs():
    """qv flashjit does not take raises naming qv: widths the library refuses (NotImplementedError with its reason),
    FP8 (NotImplementedError), another dtype (TypeError), another shape or a strided last dimension (ValueError)."""
    gen, rng = torch.Generator(device="cuda").manual_seed(3300), random.Random(3300)
    cache = test_mla_gpu.Latent(gen, rng, [100, 7], 64, torch.bfloat16)
    k_cache, v_cache = cache.pool[..., 512:], cache.pool[..., :512]
    q, qv = qv_queries(gen, 2, 1, 16, 64, 512, torch.bfloat16, False)

    def call(q=q, qv=qv, k=k_cache, v=v_cache, **kw):
        return flashjit.flash_attn_with_kvcache(q, k, v, qv=qv, cache_seqlens=cache.lens, page_table=cache.table, **kw)
    expect_not_implemented("qv error: {}", [
        ("q 32 + qv 512", lambda: call(q[..., :32], qv, cache.pool[..., 512:544]), r"qv: 32 columns of q with 512 of qv"),
        ("FP8 cache", lambda: call(k=k_cache.to(torch.float8_e4m3fn), v=v_cache.to(torch.float8_e4m3fn)),
         r"qv=.*FP8 K/V cache"),
    ])
    expect_raises("qv error: {}", [
        ("fp16 qv under bf16 q", lambda: call(qv=qv.half()), r"qv: dtype torch.float16 differs from q's torch.bfloat16"),
        ("qv 256 wide", lambda: call(qv=qv[..., :256]), r"qv: shape \(2, 1, 16, 256\); expected \(2, 1, 16, 512\)"),
        ("qv strided", lambda: call(qv=torch.cat([qv, qv], -1)[..., ::2]), r"qv: the last dimension"),
    ])


CASES = [
    ("func: bf16 d128 causal GQA 16/4, sq < sk", lambda: case_func_dense("func: bf16 d128 causal GQA 16/4, sq < sk", "bf16", 128, True, 2, 300, 1000, 16, 4)),
    ("func: fp16 d64 MHA", lambda: case_func_dense("func: fp16 d64 MHA", "fp16", 64, False, 1, 777, 777, 8, 8)),
    ("func: packed qkv views, d256", lambda: case_func_dense("func: packed qkv views, d256", "bf16", 256, True, 2, 200, 200, 4, 2, packed=True)),
    ("varlen packed", case_varlen_packed),
    ("varlen paged 16", lambda: case_varlen_paged(16)),
    ("varlen paged 64", lambda: case_varlen_paged(64)),
    ("varlen paged 7", lambda: case_varlen_paged(7)),
    ("varlen paged 16 split", lambda: case_varlen_paged(16, num_splits=4, label=", num_splits=4")),
    ("varlen dense kv", case_varlen_dense_kv),
    ("kvcache split", lambda: case_kvcache_paged(0)),
    ("kvcache no split", lambda: case_kvcache_paged(1)),
    ("kvcache page 64", lambda: case_kvcache_paged(0, page_size=64)),
    ("kvcache dense", case_kvcache_dense_int_lengths),
    ("kvcache varlen q", case_kvcache_varlen_q),
    ("kvcache nan padding", case_kvcache_nan_past_lengths),
    ("op", case_op_matches_wrapper),
    ("compile", case_compile),
    ("graph", case_graph_replay),
    ("capture raises", case_capture_without_warmup_raises),
    ("prewarm capture", case_prewarm_then_capture),
    ("wrong inputs", case_wrong_inputs),
    ("fast path", case_fast_path),
    ("fa3 ignored arguments", case_fa3_arguments_ignored),
    ("fa3 not implemented", case_fa3_not_implemented),
    ("seqused_q", case_seqused_q),
    ("masks and scores", case_masks_and_scores),
    ("zero keys", case_zero_keys),
    ("head dim padded", case_head_dim_padded),
    ("scheduler metadata", case_scheduler_metadata),
    ("combine", case_combine),
    ("fp8 kvcache page 16", lambda: case_fp8_kvcache(16)),
    ("fp8 kvcache page 16 no split", lambda: case_fp8_kvcache(16, num_splits=1)),
    ("fp8 kvcache page 64", lambda: case_fp8_kvcache(64, poison=True)),
    ("fp8 kvcache speculative", case_fp8_kvcache_speculative),
    ("fp8 varlen", case_fp8_varlen),
    ("fp8 func", case_fp8_func_dense),
    ("fp8 fast path", case_fp8_fast_path),
    ("fp8 compile", case_fp8_compile),
    ("fp8 graph", case_fp8_graph_replay),
    ("fp8 wrong inputs", case_fp8_wrong_inputs),
    ("fp8 operands func d64", lambda: case_fp8_operands_func(64, False)),
    ("fp8 operands func d128 causal", lambda: case_fp8_operands_func(128, True)),
    ("fp8 operands func d256 causal", lambda: case_fp8_operands_func(256, True)),
    ("fp8 operands varlen paged 16", lambda: case_fp8_operands_varlen_paged(16)),
    ("fp8 operands varlen paged 1", lambda: case_fp8_operands_varlen_paged(1)),
    ("fp8 operands kvcache split", lambda: case_fp8_operands_kvcache(0)),
    ("fp8 operands kvcache no split", lambda: case_fp8_operands_kvcache(1)),
    ("fp8 operands fast path", case_fp8_operands_fast_path),
    ("fp8 operands compile", case_fp8_operands_compile),
    ("fp8 operands graph", case_fp8_operands_graph_replay),
    ("fp8 operands wrong inputs", case_fp8_operands_wrong_inputs),
    ("head_dim_v func", case_head_dim_v_func),
    ("head_dim_v varlen", case_head_dim_v_varlen),
    ("head_dim_v kvcache", case_head_dim_v_kvcache),
    ("head_dim_v wrong inputs", case_head_dim_v_wrong_inputs),
    ("dim_split", case_dim_split),
    ("paired q_regs", case_paired_q_regs),
    ("qv kvcache paged 64 h16 s_q 1", lambda: case_qv_kvcache_paged(16, 1, views=True)),
    ("qv kvcache paged 64 h16 s_q 2", lambda: case_qv_kvcache_paged(16, 2, views=False)),
    ("qv kvcache paged 64 h128 s_q 1", lambda: case_qv_kvcache_paged(128, 1, views=False)),
    ("qv kvcache paged 64 h128 s_q 2", lambda: case_qv_kvcache_paged(128, 2, views=True)),
    ("qv kvcache paged 64 h16 fp16", lambda: case_qv_kvcache_paged(16, 2, views=True, dtype_name="fp16")),
    ("qv varlen", case_qv_varlen),
    # qv=1 with v_in_k=1 (the package's plan once _plan.QV_V_IN_K is on)
    ("qv v_in_k kvcache paged 64 h16 s_q 1", lambda: with_qv_v_in_k(lambda: case_qv_kvcache_paged(
        16, 1, views=True, label=", v_in_k=1"))),
    ("qv v_in_k kvcache paged 64 h128 s_q 2", lambda: with_qv_v_in_k(lambda: case_qv_kvcache_paged(
        128, 2, views=True, label=", v_in_k=1"))),
    ("qv v_in_k kvcache paged 16 h64 fp16", lambda: with_qv_v_in_k(lambda: case_qv_kvcache_paged(
        64, 4, views=False, page=16, dtype_name="fp16", label=", v_in_k=1"))),
    ("qv compile", case_qv_compile),
    ("qv wrong inputs", case_qv_wrong_inputs),
]
import test_mla_gpu  # noqa: E402 - FlashMLA's interface (flashjit.flash_mla): its cases run on this runner too
CASES += test_mla_gpu.cases(sys.modules[__name__])


def main():
    global torch, flashjit
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="libflashjit.so: use the source tree's package with it (default: the installed one)")
    parser.add_argument("-k", default="", help="run only the cases whose key contains this")
    parser.add_argument("--skip", default="", help="skip the cases whose key contains this")
    args = parser.parse_args()
    if args.lib:
        sys.path.insert(0, os.path.join(HERE, ".."))
        os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(args.lib)
    required = os.environ.get("FLASHJIT_REQUIRE_TORCH", "") not in ("", "0")

    def unavailable(why):
        if required:
            print(f"FAIL: {why}; FLASHJIT_REQUIRE_TORCH is set, so this does not skip (python {sys.executable}, "
                  f"sys.path {sys.path})")
            return 1
        print(f"skipped: {why}")
        return 0
    try:
        import torch as _torch
    except ImportError as e:
        return unavailable(f"PyTorch is not installed ({e})")
    torch = _torch
    if not torch.cuda.is_available():
        return unavailable("no GPU (torch.cuda.is_available() is False)")
    import flashjit as _flashjit
    flashjit = _flashjit
    lib = flashjit.library()
    print(f"flashjit {lib.version()} ({flashjit.__file__}, library {lib.path}, NVRTC {lib.nvrtc_loaded}) on "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    for key, case in CASES:
        if (args.k and args.k not in key) or (args.skip and args.skip in key):
            continue
        try:
            case()
        except Exception as e:  # noqa: BLE001 - a failing case is reported; the others still run
            report(key, False, f"{type(e).__name__}: {e}"[:200])
            traceback.print_exc()
    failed = [r for r in results if not r[1]]
    print(f"\n{'case':<58} result")
    for name, ok, detail in results:
        print(f"{name:<58} {'pass' if ok else 'FAIL'}  {detail[:70]}")
    print(f"{len(results) - len(failed)} of {len(results)} passed" + (": ok" if not failed else ""))
    print("loaded specs:", ", ".join(flashjit.loaded_specs()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
