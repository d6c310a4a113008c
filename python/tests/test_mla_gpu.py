#!/usr/bin/env python3
"""GPU tests of flashjit.flash_mla, FlashMLA's interface (get_mla_metadata, flash_mla_with_kvcache), on a Hopper
GPU with torch: absorbed MLA decode against attention in float64 on the latent cache (K = its 576 columns, V =
its first 512), heads 16/32/64/128, 1-4 queries a sequence (MTP, causal bottom-right), pages of 64, 16 and 1,
split counts from none to 128, bf16 and fp16, head dim 512; cache slots past each length, spare pages and the
allocator's free memory poisoned with NaN; rows that see no key; the fast path; FlashMLA's metadata values
accepted and not read; a CUDA graph captured once and replayed after cache_seqlens, the block table and the
data change; the errors naming their argument. An FP8 latent cache (flashjit's extension: k_cache of
torch.float8_e4m3fn, kv_descale one element, [batch, 1] or none) against float64 on the dequantised cache, with
the e4m3 NaN code in every slot no sequence reads, through the fast path and a graph replay.

  python3 python/tests/test_mla_gpu.py --lib build/libflashjit.so    # these cases alone (test_gpu.py's runner)
  python3 python/tests/test_gpu.py --lib build/libflashjit.so        # every case, these included (-k flash_mla)

The cases run on test_gpu.py's runner (its torch, flashjit, report and table): test_gpu.py lists them with its
own (cases(), at the end of its CASES)."""
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
D, DV = 576, 512
base = None  # test_gpu's module: torch, flashjit, report, O_BOUND, LSE_BOUND (set by cases())


# ---- inputs and the reference ------------------------------------------------------------------------
class Latent:
    """A paged latent cache for sequences of the given key counts: pool [pages, page_size, 1, d] with NaN in every
    slot past a sequence's length and in the spare pages (no output may read them), a shuffled int32 block table
    [batch, max_blocks] (unused entries -1), cache_seqlens int32 [batch]."""

    def __init__(self, gen, rng, keys, page_size, dtype, d=D, max_blocks=None, spare=3):
        torch = base.torch
        self.page_size, self.keys, self.d = page_size, list(keys), d
        need = [-(-sk // page_size) for sk in keys]
        self.max_blocks = max_blocks or max(max(need), 1)
        total = sum(need) + spare
        if dtype == torch.float8_e4m3fn:  # the e4m3 NaN code 0x7F (filled as bytes)
            self.pool = torch.full((total, page_size, 1, d), 0x7F, dtype=torch.uint8, device="cuda").view(dtype)
        else:
            self.pool = torch.full((total, page_size, 1, d), float("nan"), dtype=dtype, device="cuda")
        pages = list(range(total))
        rng.shuffle(pages)
        table = [[-1] * self.max_blocks for _ in keys]
        for b, (n, sk) in enumerate(zip(need, keys)):
            for i in range(n):
                table[b][i] = p = pages.pop()
                used = min(page_size, sk - i * page_size)
                self.pool[p, :used] = rand(gen, used, 1, d, dtype=dtype)
        self.table_host = table
        self.table = torch.tensor(table, dtype=torch.int32, device="cuda")
        self.lens = torch.tensor(self.keys, dtype=torch.int32, device="cuda")

    def seq(self, b):
        """Sequence b's latent rows through the table: [keys, d]."""
        torch = base.torch
        n = -(-self.keys[b] // self.page_size)
        pages = torch.tensor(self.table_host[b][:n], dtype=torch.long, device="cuda")
        if self.pool.dtype == torch.float8_e4m3fn:  # gathered as bytes
            return self.pool.view(torch.uint8)[pages].reshape(-1, self.d)[:self.keys[b]].view(torch.float8_e4m3fn)
        return self.pool[pages].reshape(-1, self.d)[:self.keys[b]]


def rand(gen, *shape, dtype):
    torch = base.torch
    return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


def reference(q, kv, causal, scale, dv=DV):
    """One sequence, q [sq, hq, d], the latent rows kv [sk, d]: (O [sq, hq, dv], LSE [hq, sq]) in float64 with K =
    kv, V = kv[:, :dv]; query i sees keys j <= i + sk - sq when causal (FlashMLA's rule); a row that sees no key has
    O = 0 and LSE = -inf."""
    torch = base.torch
    sq, hq, _ = q.shape
    sk = kv.shape[0]
    o = torch.zeros(sq, hq, dv, dtype=torch.float64, device=q.device)
    lse = torch.full((hq, sq), float("-inf"), dtype=torch.float64, device=q.device)
    if sq == 0 or sk == 0:
        return o, lse
    k = kv.double()
    s = torch.einsum("qhd,kd->hqk", q.double(), k) * scale
    if causal:
        i = torch.arange(sq, device=q.device).view(-1, 1)
        j = torch.arange(sk, device=q.device).view(1, -1)
        s = s.masked_fill(~(j <= i + (sk - sq)), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse.unsqueeze(-1)), nan=0.0)
    return torch.einsum("hqk,kv->qhv", p, k[:, :dv]), lse


class MlaErrors:
    """O's relative L2 error against float64 over the sequences added, the LSE's largest relative error, NaN seen,
    and rows that see no key but do not have O = 0 and LSE = -inf exactly."""

    def __init__(self, dtype_name):
        self.bound = base.O_BOUND[dtype_name]
        self.d2 = self.r2 = self.lse = 0.0
        self.nan, self.empty_rows_wrong, self.empty_rows = False, 0, 0

    def add(self, o, lse, q, kv, causal, scale):
        """o [sq, hq, dv], lse [hq, sq] of one sequence."""
        torch = base.torch
        ref_o, ref_lse = reference(q, kv, causal, scale, o.shape[-1])
        od, got = o.double(), lse.double()
        self.nan |= bool(torch.isnan(od).any()) or bool(torch.isnan(got).any())
        self.d2 += float(((od - ref_o) ** 2).sum())
        self.r2 += float((ref_o ** 2).sum())
        finite = torch.isfinite(ref_lse)
        err = torch.where(finite, (got - ref_lse).abs() / ref_lse.abs().clamp(min=1.0),
                          torch.where(got == float("-inf"), 0.0, float("inf")))
        self.lse = max(self.lse, float(err.max())) if err.numel() else self.lse
        empty = ~finite  # [hq, sq]: rows that see no key
        self.empty_rows += int(empty.sum())
        if bool(empty.any()):
            rows_o = od.transpose(0, 1)[empty]  # [rows, dv]
            self.empty_rows_wrong += int((rows_o != 0).any(-1).sum()) + int((got[empty] != float("-inf")).sum())

    def result(self):
        ours = math.sqrt(self.d2) / (math.sqrt(self.r2) or 1.0)
        ok = (not self.nan and ours <= self.bound and self.lse <= base.LSE_BOUND and not self.empty_rows_wrong)
        detail = f"O err {ours:.2e}  LSE err {self.lse:.2e}"
        if self.empty_rows:
            detail += f"  rows without keys {self.empty_rows} ({self.empty_rows_wrong} wrong)"
        return ok, detail + ("  NaN" if self.nan else "")


def poison_allocator():
    """Frees blocks full of NaN into torch's caching allocator (a large one and a small one), so that outputs the
    next call allocates likely start as NaN: a row the kernel does not write shows."""
    torch = base.torch
    big = torch.full((32 << 20,), float("nan"), dtype=torch.float32, device="cuda")
    small = torch.full((200 << 10,), float("nan"), dtype=torch.float32, device="cuda")
    del big, small


def check(name, dtype_name, q, cache, out, lse, causal, scale, kv_descale="16-bit"):
    """kv_descale (an FP8 latent cache: a tensor, or None for 1.0): the reference runs on the codes as the kernel
    widens them, code x the sequence's scale in float32 rounded once to q's dtype; the bound doubles where a scale
    is not a power of two (tests/kv_fp8_gpu_test.cpp's rule: the kernel's rounding and the host's may differ by
    the last bit on a tie)."""
    torch = base.torch
    torch.cuda.synchronize()
    batch, sq, hq, _ = q.shape
    shapes_ok = (tuple(out.shape) == (batch, sq, hq, DV) and out.dtype == q.dtype and tuple(lse.shape) == (batch, hq, sq)
                 and lse.dtype == torch.float32)
    errs = MlaErrors(dtype_name)
    fp8 = not isinstance(kv_descale, str)
    scales = None
    if fp8:
        scales = (torch.ones(batch, dtype=torch.float32, device="cuda") if kv_descale is None
                  else kv_descale.float().reshape(-1).expand(batch) if kv_descale.numel() == 1 else kv_descale.reshape(batch))
        if not bool((torch.frexp(scales)[0].abs() == 0.5).all()):
            errs.bound *= 2
    for b in range(batch):
        kv = cache.seq(b)
        if fp8:
            kv = (kv.float() * scales[b]).to(q.dtype)
        errs.add(out[b], lse[b], q[b], kv, causal, scale)
    ok, detail = errs.result()
    base.report(name, ok and shapes_ok, detail + ("" if shapes_ok else f"  shapes {tuple(out.shape)} {tuple(lse.shape)}"))


DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
KEYS = [4097, 1, 63, 64, 65, 2000]  # around page boundaries, one long


def case_decode(heads, seqlen_q, page=64, dtype_name="bf16", num_splits=None, causal=True, keys=KEYS, scale=None,
                d=D, seed=0, label=""):
    torch, flashjit = base.torch, base.flashjit
    dtype = getattr(torch, DTYPES[dtype_name])
    seed = seed or 1000 + heads * 10 + seqlen_q + page
    gen, rng = torch.Generator(device="cuda").manual_seed(seed), random.Random(seed)
    cache = Latent(gen, rng, keys, page, dtype, d)
    q = rand(gen, len(keys), seqlen_q, heads, d, dtype=dtype)
    meta, splits = flashjit.get_mla_metadata(cache.lens, seqlen_q * heads, 1)
    poison_allocator()
    out, lse = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, meta,
                                               splits if num_splits is None else num_splits, softmax_scale=scale,
                                               causal=causal)
    name = (f"flash_mla: {dtype_name} h{heads} s_q {seqlen_q} page {page}"
            f"{'' if num_splits is None else f' splits {num_splits}'}{'' if causal else ' non-causal'}{label}")
    check(name, dtype_name, q, cache, out, lse, causal, d ** -0.5 if scale is None else scale)


def case_fp8_latent(heads, seqlen_q, page=64, dtype_name="bf16", descale="sequence", num_splits=None, keys=KEYS,
                    label=""):
    """An FP8 latent cache (k_cache of torch.float8_e4m3fn): kv_descale "tensor" (one element, 0.5), "sequence"
    ([batch, 1], not powers of two) or "none" (1.0); the unread slots hold the e4m3 NaN code."""
    torch, flashjit = base.torch, base.flashjit
    dtype = getattr(torch, DTYPES[dtype_name])
    seed = 3000 + heads * 10 + seqlen_q + page
    gen, rng = torch.Generator(device="cuda").manual_seed(seed), random.Random(seed)
    cache = Latent(gen, rng, keys, page, torch.float8_e4m3fn)
    q = rand(gen, len(keys), seqlen_q, heads, D, dtype=dtype)
    kv_descale = {"tensor": lambda: torch.tensor([0.5], device="cuda"),
                  "sequence": lambda: torch.rand(len(keys), 1, generator=gen, device="cuda") * 1.5 + 0.25,
                  "none": lambda: None}[descale]()
    meta, splits = flashjit.get_mla_metadata(cache.lens, seqlen_q * heads, 1)
    poison_allocator()
    out, lse = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, meta,
                                               splits if num_splits is None else num_splits, causal=True,
                                               kv_descale=kv_descale)
    check(f"flash_mla FP8 latent: {dtype_name} h{heads} s_q {seqlen_q} page {page}, kv_descale {descale}"
          f"{'' if num_splits is None else f', splits {num_splits}'}{label}", dtype_name, q, cache, out, lse, True,
          D ** -0.5, kv_descale)


def case_fp8_latent_fast_path_and_graph():
    """The FP8 latent cache's fast path (a second call, new descale values in a new tensor) and a CUDA graph
    captured once and replayed after the lengths, the table, the codes and the descale values change in place
    (case_graph_replay)."""
    torch, flashjit = base.torch, base.flashjit
    gen, rng = torch.Generator(device="cuda").manual_seed(86), random.Random(86)
    heads, sq = 32, 2
    cache = Latent(gen, rng, KEYS, 64, torch.float8_e4m3fn)
    q = rand(gen, len(KEYS), sq, heads, D, dtype=torch.bfloat16)
    s1 = torch.rand(len(KEYS), 1, generator=gen, device="cuda") + 0.5
    flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, None, None, causal=True, kv_descale=s1)
    s2 = torch.rand(len(KEYS), 1, generator=gen, device="cuda") + 0.5
    out, lse = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, None, None, causal=True,
                                               kv_descale=s2)
    check("flash_mla FP8 latent: fast path, new kv_descale", "bf16", q, cache, out, lse, True, D ** -0.5, s2)

    case_graph_replay(", FP8 latent cache", fp8=True)


def case_rows_without_keys():
    """cache_seqlens 0, and causal queries before the first key (4 queries, 2 keys): O = 0, LSE = -inf (FlashMLA
    writes +inf there; flashjit's -inf is what merging states expects)."""
    case_decode(16, 4, keys=[0, 2, 700, 0, 1], label=", rows without keys")


def case_metadata_values():
    """FlashMLA's metadata in each form, or none: the same launch, bitwise."""
    torch, flashjit = base.torch, base.flashjit
    gen, rng = torch.Generator(device="cuda").manual_seed(81), random.Random(81)
    cache = Latent(gen, rng, KEYS, 64, torch.bfloat16)
    q = rand(gen, len(KEYS), 1, 32, D, dtype=torch.bfloat16)
    meta, splits = flashjit.get_mla_metadata(cache.lens, 32, 1)
    shapes_ok = (tuple(meta.shape) == (0, 8) and meta.dtype == torch.int32 and tuple(splits.shape) == (len(KEYS) + 1,)
                 and splits.dtype == torch.int32)
    runs = [flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, m, s)
            for m, s in ((meta, splits), (None, None), flashjit.get_mla_metadata())]
    same = all(torch.equal(o, runs[0][0]) and torch.equal(lse, runs[0][1]) for o, lse in runs[1:])
    base.report("flash_mla: metadata values accepted, not read", shapes_ok and same,
                f"metadata {tuple(meta.shape)}, num_splits {tuple(splits.shape)}; same results: {same}")


def case_fast_path():
    """A second call with the same shapes takes the fast path: the same result bitwise; new tensors read right."""
    torch, flashjit = base.torch, base.flashjit
    gen, rng = torch.Generator(device="cuda").manual_seed(82), random.Random(82)
    cache = Latent(gen, rng, KEYS, 64, torch.bfloat16)
    q = rand(gen, len(KEYS), 2, 64, D, dtype=torch.bfloat16)
    first = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, None, None, causal=True)
    again = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, None, None, causal=True)
    same = torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    q2 = rand(gen, *q.shape, dtype=q.dtype)
    poison_allocator()
    out, lse = flashjit.flash_mla_with_kvcache(q2, cache.pool, cache.table, cache.lens, DV, None, None, causal=True)
    if not same:
        base.report("flash_mla: fast path", False, "the same call twice differs")
        return
    check("flash_mla: fast path, new q", "bf16", q2, cache, out, lse, True, D ** -0.5)


def case_strided_q():
    """q sliced from larger buffers: one query with a batch stride of its own (read in place), two queries whose
    batch and seqlen do not merge (read through a copy)."""
    torch, flashjit = base.torch, base.flashjit
    gen, rng = torch.Generator(device="cuda").manual_seed(83), random.Random(83)
    cache = Latent(gen, rng, KEYS, 64, torch.bfloat16)
    for sq, room in ((1, 3), (2, 4)):
        buf = rand(gen, len(KEYS), room, 16, D, dtype=torch.bfloat16)
        q = buf[:, :sq]
        out, lse = flashjit.flash_mla_with_kvcache(q, cache.pool, cache.table, cache.lens, DV, None, None, causal=True)
        check(f"flash_mla: q a slice [:, :{sq}] of [b, {room}, h, d]", "bf16", q, cache, out, lse, True, D ** -0.5)


def case_graph_replay(label="", fp8=False, heads=None, sq=2):
    """An engine's MTP decode step (2 queries, causal, split-KV; sq sets the queries): one CUDA graph captured once
    after an eager call, replayed after cache_seqlens, the block table and the data change in place (lengths
    growing, a sequence going idle at 0, one jumping). fp8: an FP8 latent cache whose kv_descale ([batch, 1])
    changes in place too. heads: 32 with fp8, else 16 unless given."""
    torch, flashjit = base.torch, base.flashjit
    steps = [[3000, 17, 1, 2048, 500, 64], [3001, 18, 2, 2049, 0, 65], [3002, 0, 3, 4000, 1, 4096]]
    heads, ps, batch, max_k = heads or (32 if fp8 else 16), 64, 6, 4096
    gen, rng = torch.Generator(device="cuda").manual_seed(84), random.Random(84)
    max_blocks = max_k // ps
    pool = torch.empty(batch * max_blocks + 4, ps, 1, D, dtype=torch.float8_e4m3fn if fp8 else torch.bfloat16,
                       device="cuda")
    descale = torch.ones(batch, 1, dtype=torch.float32, device="cuda") if fp8 else None
    table = torch.full((batch, max_blocks), -1, dtype=torch.int32, device="cuda")
    lens = torch.zeros(batch, dtype=torch.int32, device="cuda")
    q = torch.empty(batch, sq, heads, D, dtype=torch.bfloat16, device="cuda")

    def load(keys):
        pages = list(range(pool.shape[0]))
        rng.shuffle(pages)
        host = [[-1] * max_blocks for _ in keys]
        for b, sk in enumerate(keys):
            for i in range(-(-sk // ps)):
                host[b][i] = pages.pop()
        with torch.no_grad():
            table.copy_(torch.tensor(host, dtype=torch.int32))
            lens.copy_(torch.tensor(keys, dtype=torch.int32))
            q.copy_(rand(gen, *q.shape, dtype=q.dtype))
            pool.copy_(rand(gen, *pool.shape, dtype=pool.dtype))
            if fp8:
                descale.copy_(torch.rand(batch, 1, generator=gen, device="cuda") + 0.5)
        cache = Latent.__new__(Latent)
        cache.page_size, cache.keys, cache.d, cache.table_host, cache.pool = ps, list(keys), D, host, pool
        return cache

    meta, splits = flashjit.get_mla_metadata(lens, sq * heads, 1)

    def step():
        if fp8:
            return flashjit.flash_mla_with_kvcache(q, pool, table, lens, DV, meta, splits, causal=True, kv_descale=descale)
        return flashjit.flash_mla_with_kvcache(q, pool, table, lens, DV, meta, splits, causal=True)

    load(steps[0])
    step()  # the kernel is fetched here, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for i, keys in enumerate(steps):
        cache = load(keys)
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        graph.replay()
        check(f"flash_mla: CUDA graph replay {i}: new cache_seqlens/table/data{' and kv_descale' if fp8 else ''}{label}",
              "bf16", q, cache, out, lse, True, D ** -0.5, descale if fp8 else "16-bit")


def case_wrong_inputs():
    """What flashjit does not take raises, naming the argument; nothing is launched."""
    torch, flashjit = base.torch, base.flashjit
    gen, rng = torch.Generator(device="cuda").manual_seed(85), random.Random(85)
    cache = Latent(gen, rng, [100, 7], 64, torch.bfloat16)
    q = rand(gen, 2, 1, 16, D, dtype=torch.bfloat16)
    fn = flashjit.flash_mla_with_kvcache
    cases = [
        ("FP8 cache", NotImplementedError, "is_fp8_kvcache", lambda: fn(q, cache.pool, cache.table, cache.lens, DV,
                                                                        None, None, is_fp8_kvcache=True)),
        ("e5m2 k_cache", NotImplementedError, "k_cache", lambda: fn(q, cache.pool.to(torch.float8_e5m2), cache.table,
                                                                    cache.lens, DV, None, None)),
        ("kv_descale with a bf16 cache", ValueError, "kv_descale", lambda: fn(
            q, cache.pool, cache.table, cache.lens, DV, None, None, kv_descale=torch.ones(1, device="cuda"))),
        ("kv_descale [batch]", ValueError, "kv_descale", lambda: fn(
            q, cache.pool.to(torch.float8_e4m3fn), cache.table, cache.lens, DV, None, None,
            kv_descale=torch.ones(2, device="cuda"))),
        ("sparse indices", NotImplementedError, "indices", lambda: fn(q, cache.pool, None, None, DV, None, None,
                                                                      indices=torch.zeros(2, 1, 64, dtype=torch.int32,
                                                                                          device="cuda"))),
        ("head_dim_v 256", ValueError, "head_dim_v", lambda: fn(q, cache.pool, cache.table, cache.lens, 256, None, None)),
        ("two latent heads", NotImplementedError, "k_cache", lambda: fn(
            q, cache.pool.expand(-1, -1, 2, -1), cache.table, cache.lens, DV, None, None)),
        ("int64 cache_seqlens", TypeError, "cache_seqlens", lambda: fn(q, cache.pool, cache.table, cache.lens.long(), DV,
                                                                       None, None)),
        ("fp16 k_cache under bf16 q", TypeError, "k_cache", lambda: fn(q, cache.pool.half(), cache.table, cache.lens, DV,
                                                                       None, None)),
        ("metadata fp8", NotImplementedError, "is_fp8_kvcache", lambda: flashjit.get_mla_metadata(
            cache.lens, 16, 1, is_fp8_kvcache=True)),
    ]
    for label, exc, name, call in cases:
        try:
            call()
            base.report(f"flash_mla error: {label}", False, "no error")
        except exc as e:
            base.report(f"flash_mla error: {label}", f" {name}" in str(e) or f": {name}" in str(e), str(e)[:90])
        except Exception as e:  # noqa: BLE001 - another exception is a failure of this case
            base.report(f"flash_mla error: {label}", False, f"{type(e).__name__}: {e}"[:120])


def cases(runner):
    """The cases as (key, function) for test_gpu.py's runner (runner: its module)."""
    global base
    base = runner
    out = []
    for heads in (16, 32, 64, 128):
        for sq in (1, 2, 3, 4):
            out.append((f"flash_mla h{heads} s_q {sq}", lambda h=heads, s=sq: case_decode(h, s)))
    out += [
        ("flash_mla page 16", lambda: case_decode(64, 2, page=16)),
        ("flash_mla page 1", lambda: case_decode(32, 1, page=1, keys=[300, 1, 77, 0, 129])),
        ("flash_mla no split", lambda: case_decode(128, 1, num_splits=1)),
        ("flash_mla 2 splits", lambda: case_decode(32, 2, num_splits=2, keys=[8000, 3, 5000])),
        ("flash_mla 7 splits", lambda: case_decode(32, 1, num_splits=7, keys=[8000, 3, 5000])),
        ("flash_mla 128 splits", lambda: case_decode(16, 1, num_splits=128, keys=[16000, 129])),
        ("flash_mla fp16", lambda: case_decode(128, 1, dtype_name="fp16")),
        ("flash_mla fp16 s_q 3", lambda: case_decode(64, 3, dtype_name="fp16")),
        ("flash_mla non-causal s_q 2", lambda: case_decode(32, 2, causal=False)),
        ("flash_mla softmax_scale", lambda: case_decode(128, 2, scale=0.1352, label=", softmax_scale 0.1352")),
        ("flash_mla head dim 512", lambda: case_decode(16, 1, d=512, label=", head dim 512 (V = K)")),
        ("flash_mla rows without keys", case_rows_without_keys),
        ("flash_mla metadata", case_metadata_values),
        ("flash_mla fast path", case_fast_path),
        ("flash_mla strided q", case_strided_q),
        ("flash_mla graph", case_graph_replay),
        ("flash_mla wrong inputs", case_wrong_inputs),
        # an FP8 latent cache (flashjit's extension): the O-in-parts kernels with kv_dtype=e4m3
        ("flash_mla FP8 h16 s_q 1", lambda: case_fp8_latent(16, 1, descale="tensor")),
        ("flash_mla FP8 h128 s_q 2", lambda: case_fp8_latent(128, 2)),
        ("flash_mla FP8 h64 s_q 4 page 16", lambda: case_fp8_latent(64, 4, page=16, descale="none")),
        ("flash_mla FP8 fp16 h32 page 1", lambda: case_fp8_latent(32, 1, page=1, dtype_name="fp16",
                                                                   keys=[300, 1, 77, 0, 129])),
        ("flash_mla FP8 no split", lambda: case_fp8_latent(128, 1, num_splits=1)),
        ("flash_mla FP8 fast path and graph", case_fp8_latent_fast_path_and_graph),
    ]
    # flashjit.flash_mla.V_IN_K = False: the O-in-parts kernels (the default is v_in_k=1's shared scores)
    for label, fn in (("h16 s_q 1", lambda: case_decode(16, 1, label=", O in parts")),
                      ("h128 s_q 2", lambda: case_decode(128, 2, label=", O in parts")),
                      ("h64 s_q 4 page 16", lambda: case_decode(64, 4, page=16, label=", O in parts")),
                      ("fp16 h128 no split", lambda: case_decode(128, 1, dtype_name="fp16", num_splits=1, label=", O in parts")),
                      ("head dim 512", lambda: case_decode(32, 1, d=512, label=", head dim 512, O in parts")),
                      ("rows without keys", lambda: case_decode(16, 4, keys=[0, 2, 700, 0, 1], label=", rows without keys, O in parts")),
                      ("graph", lambda: case_graph_replay(", O in parts"))):
        out.append((f"flash_mla O in parts {label}", lambda fn=fn: with_o_in_parts(fn)))
    # flashjit.flash_mla.SEESAW = True: v_in_k=1's kernels with the seesaw schedule (seesaw=1)
    for label, fn in (("h16 s_q 1", lambda: case_decode(16, 1, label=", seesaw")),
                      ("h128 s_q 2", lambda: case_decode(128, 2, label=", seesaw")),
                      ("h64 s_q 4 page 16", lambda: case_decode(64, 4, page=16, label=", seesaw")),
                      ("fp16 h128 no split", lambda: case_decode(128, 1, dtype_name="fp16", num_splits=1, label=", seesaw")),
                      ("rows without keys", lambda: case_decode(16, 4, keys=[0, 2, 700, 0, 1], label=", rows without keys, seesaw")),
                      ("graph", lambda: case_graph_replay(", seesaw"))):
        out.append((f"flash_mla seesaw {label}", lambda fn=fn: with_seesaw(fn)))
    # flashjit.flash_mla.EARLY_RELEASE = True and HALF_RELEASE = True: each warpgroup's part of a slot back on its own
    for label, fn in (("h16 s_q 1", lambda: case_decode(16, 1, label=", half_release")),
                      ("h128 s_q 2", lambda: case_decode(128, 2, label=", half_release")),
                      ("h64 s_q 4 page 16", lambda: case_decode(64, 4, page=16, label=", half_release")),
                      ("fp16 h128 no split", lambda: case_decode(128, 1, dtype_name="fp16", num_splits=1,
                                                                 label=", half_release")),
                      ("rows without keys", lambda: case_decode(16, 4, keys=[0, 2, 700, 0, 1],
                                                                label=", rows without keys, half_release")),
                      ("graph", lambda: case_graph_replay(", half_release"))):
        out.append((f"flash_mla half_release {label}", lambda fn=fn: with_half_release(fn)))
    # flashjit.flash_mla.INLINE_COMBINE = True: split launches of at most 16 rows a tile merge in the attention kernel
    # (combine=inline): the merge counters in the workspace zeroed once eagerly, in a capture the counters alone, and
    # left at zero by every launch, so the graph's replays after the lengths change merge right
    for label, fn in (("h16 s_q 1", lambda: case_decode(16, 1, label=", inline combine")),
                      ("h8 s_q 2 page 16", lambda: case_decode(8, 2, page=16, label=", inline combine")),
                      ("128 splits", lambda: case_decode(16, 1, num_splits=128, keys=[16000, 129], label=", inline combine")),
                      ("fp16 rows without keys", lambda: case_decode(16, 1, dtype_name="fp16", keys=[0, 2, 700, 0, 1],
                                                                     label=", rows without keys, inline combine")),
                      ("graph", lambda: case_graph_replay(", inline combine", heads=16, sq=1))):
        out.append((f"flash_mla inline combine {label}", lambda fn=fn: with_inline_combine(fn)))
    return out


def with_flash_mla(fn, required=None, **attrs):
    """fn() with flashjit.flash_mla's module attributes set as attrs, put back after; with required, fails unless
    every call's plan has that spec key (the plan of every call checked, not just one)."""
    import flashjit.flash_mla as fm
    before = {name: getattr(fm, name) for name in attrs}
    specs, plan = [], fm.mla_plan

    def recording(*a, **k):
        spec = plan(*a, **k)
        specs.append(spec[0])
        return spec
    for name, value in attrs.items():
        setattr(fm, name, value)
    fm.mla_plan = recording
    try:
        fn()
    finally:
        for name, value in before.items():
            setattr(fm, name, value)
        fm.mla_plan = plan
    if required is not None:
        assert specs and all(required in s for s in specs), f"plans without {required}: {specs}"


def with_half_release(fn):
    """fn() with EARLY_RELEASE and HALF_RELEASE on (the hand-over's half_release=1 kernels)."""
    with_flash_mla(fn, "half_release=1", EARLY_RELEASE=True, HALF_RELEASE=True)


def with_inline_combine(fn):
    """fn() with INLINE_COMBINE on (combine=inline on every call's plan: each case's tiles hold at most 16 rows)."""
    with_flash_mla(fn, "combine=inline", INLINE_COMBINE=True)


def with_seesaw(fn):
    """fn() with SEESAW on (v_in_k=1's seesaw=1 kernels)."""
    with_flash_mla(fn, "seesaw=1", SEESAW=True)


def with_o_in_parts(fn):
    """fn() with V_IN_K off (the O-in-parts kernels)."""
    with_flash_mla(fn, V_IN_K=False)


def main():
    """test_gpu.py's runner with these cases only."""
    sys.path.insert(0, HERE)
    import test_gpu
    test_gpu.CASES[:] = [(key, case) for key, case in test_gpu.CASES if key.startswith("flash_mla")]
    return test_gpu.main()


if __name__ == "__main__":
    sys.exit(main())
