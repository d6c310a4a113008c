#!/usr/bin/env python3
"""A paged decode loop as an engine runs it, on the flashjit package: fixed-size buffers (queries, a paged
KV cache, the page table, the lengths) allocated once, one step captured once in a CUDA graph, then replayed
every step after the engine writes the new lengths and pages into the same buffers, as sequences grow,
finish and start. Each replay is checked against float64 attention.

  python3 examples/python/paged_decode_loop.py [--lib build/libflashjit.so]   # H200 + torch

Without --lib it uses the installed package (pip install dist/flashjit-*.whl)."""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, HEADS_Q, HEADS_KV, HEAD_DIM, PAGE, MAX_KEYS, LAYERS = 8, 32, 8, 128, 16, 8192, 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", help="libflashjit.so: use this repository's python/ package with it")
    args = parser.parse_args()
    if args.lib:
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
        os.environ["FLASHJIT_LIBRARY"] = os.path.abspath(args.lib)
    try:
        import torch
    except ImportError as e:
        print(f"skipped: PyTorch is not installed ({e})")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no GPU (torch.cuda.is_available() is False)")
        return 0
    import flashjit
    rng = random.Random(7)
    bf16, dev = torch.bfloat16, "cuda"
    # 1. The engine's buffers, sized for the largest step (what the graph keeps: addresses and bounds).
    pages_per_seq = MAX_KEYS // PAGE
    num_pages = BATCH * pages_per_seq
    k_cache = [torch.randn(num_pages, PAGE, HEADS_KV, HEAD_DIM, dtype=bf16, device=dev) for _ in range(LAYERS)]
    v_cache = [torch.randn_like(k) for k in k_cache]
    q = torch.zeros(BATCH, 1, HEADS_Q, HEAD_DIM, dtype=bf16, device=dev)
    page_table = torch.full((BATCH, pages_per_seq), -1, dtype=torch.int32, device=dev)
    seq_lens = torch.zeros(BATCH, dtype=torch.int32, device=dev)  # 0 = an empty slot (a no-op in the kernel)
    outs = [torch.empty_like(q) for _ in range(LAYERS)]

    def step():  # one layer loop of a decode step: what the graph holds
        for layer in range(LAYERS):
            flashjit.flash_attn_with_kvcache(q, k_cache[layer], v_cache[layer], cache_seqlens=seq_lens,
                                             page_table=page_table, out=outs[layer])

    # 2. The scheduler's state on the host: each slot's length and pages (free pages shuffled).
    free = list(range(num_pages))
    rng.shuffle(free)
    lens, pages = [0] * BATCH, [[] for _ in range(BATCH)]

    def grow(slot, n):
        lens[slot] += n
        while len(pages[slot]) * PAGE < lens[slot]:
            pages[slot].append(free.pop())

    def finish(slot):
        free.extend(pages[slot])
        lens[slot], pages[slot] = 0, []

    def write_step():  # the engine's per-step metadata, written in place (same tensors, same addresses)
        table = [p + [-1] * (pages_per_seq - len(p)) for p in pages]
        page_table.copy_(torch.tensor(table, dtype=torch.int32))
        seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        q.copy_(torch.randn_like(q))

    for slot, n in enumerate([3000, 17, 1, 2048, 500, 64, 8000, 0]):
        if n:
            grow(slot, n)
    write_step()
    # 3. Warm up once (fetches the kernels: never inside a capture), then capture the step.
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    # 4. The loop: every sequence gains a token; one finishes at step 2, a new one starts at step 3.
    worst = 0.0
    for it in range(6):
        for slot in range(BATCH):
            if lens[slot]:
                grow(slot, 1)
        if it == 2:
            finish(1)
        if it == 3:
            grow(7, 100)
        write_step()
        graph.replay()
        torch.cuda.synchronize()
        worst = max(worst, check(torch, q, k_cache[-1], v_cache[-1], outs[-1], lens, pages))
        print(f"step {it}: lengths {lens}  O error vs float64 {worst:.2e}")
    ok = worst <= 6e-3
    print("ok" if ok else "FAIL: error above 6e-3")
    return 0 if ok else 1


def check(torch, q, k_cache, v_cache, out, lens, pages):
    """Largest relative L2 error of a layer's O over the active slots, against float64 attention."""
    worst = 0.0
    for b, n in enumerate(lens):
        if n == 0:
            continue
        idx = torch.tensor(pages[b], dtype=torch.long, device=q.device)
        k = k_cache[idx].reshape(-1, k_cache.shape[2], k_cache.shape[3])[:n].double()
        v = v_cache[idx].reshape(-1, v_cache.shape[2], v_cache.shape[3])[:n].double()
        group = q.shape[2] // k.shape[1]
        qd = q[b, 0].double()                                         # [hq, d]
        kd, vd = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)  # [n, hq, d]
        s = torch.einsum("hd,nhd->hn", qd, kd) * q.shape[-1] ** -0.5
        ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), vd)
        worst = max(worst, float((out[b, 0].double() - ref).norm() / ref.norm()))
    return worst


if __name__ == "__main__":
    sys.exit(main())
