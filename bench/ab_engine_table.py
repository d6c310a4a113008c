#!/usr/bin/env python3
"""The table bench/ab_engine.sh prints: from OUT/engine-{a1,b1,a2,b2}.json (bench/engine_peers.py) and
OUT/decode-{a1,b1,a2,b2}.json (bench/decode_peers.py), each row's A passes, B passes and B / A of the
passes' means, with the geomean of B / A per file kind, then each paged row's paged / contiguous per
pass beside issue 23's goals. Peers (measured in one pass) are listed once. A failed check marks the
value with '!'.

  python3 bench/ab_engine_table.py OUT"""
import json
import math
import os
import sys

PASSES = ("a1", "a2", "b1", "b2")


def load(out, kind):
    runs = {}
    for p in PASSES:
        path = os.path.join(out, f"{kind}-{p}.json")
        if os.path.exists(path):
            try:
                runs[p] = json.load(open(path))
            except (OSError, ValueError) as e:
                print(f"{path}: unreadable ({e})")
    return runs


def engine_values(run):
    """(row label, implementation) -> (TF/s, checks ok) of one engine_peers run; the contiguous and
    dense figures copied into each page row are left to the shape's own row."""
    values = {}
    for row in run.get("rows", []):
        ok = all(c.get("ok") for c in row.get("checks", {}).values())
        for name, t in row.get("peers", {}).items():
            if name in ("contig", "dense") and row.get("shape", {}).get("page_size"):
                continue
            values[(row["label"], name)] = (t.get("tflops"), ok)
    return values


def decode_values(run):
    values = {}
    for cell in run.get("cells", []):
        if cell.get("skipped"):
            continue
        for name, t in cell.get("impls", {}).items():
            ok = cell.get("checks", {}).get(name, {}).get("ok", True)
            values[(cell["id"], name)] = (t.get("us"), ok)
    return values


def table(runs, values_of, unit, ours):
    per = {p: values_of(r) for p, r in runs.items()}
    keys = []
    for p in PASSES:
        for k in per.get(p, {}):
            if k not in keys:
                keys.append(k)
    logs = []
    print(f"{'row':52} {'impl':16} {'A passes':>17} {'B passes':>17}  B/A  ({unit})")
    for k in keys:
        def cells(side):
            got = [per[p][k] for p in PASSES if p.startswith(side) and p in per and k in per[p] and per[p][k][0]]
            return got
        a, b = cells("a"), cells("b")
        fmt = lambda got: " ".join(f"{v:.1f}{'' if ok else '!'}" for v, ok in got) or "-"
        ratio = "-"
        if a and b:
            r = (sum(v for v, _ in b) / len(b)) / (sum(v for v, _ in a) / len(a))
            ratio = f"{r:.3f}"
            if k[1] in ours:
                logs.append(math.log(r))
        print(f"{k[0][:52]:52} {k[1][:16]:16} {fmt(a):>17} {fmt(b):>17}  {ratio}")
    if logs:
        print(f"geomean B/A over {len(logs)} rows of ours: {math.exp(sum(logs) / len(logs)):.3f}")


def paged_over_contig(runs):
    """Per page row, each side's paged / contiguous (the contiguous figure of the same pass), beside
    issue 23's goal for that page size (0.85 at 16, 0.95 from 64)."""
    ratios = {}
    for p, run in runs.items():
        for row in run.get("rows", []):
            page, peers = row.get("shape", {}).get("page_size"), row.get("peers", {})
            paged, contig = peers.get("paged", {}).get("tflops"), peers.get("contig", {}).get("tflops")
            if page and paged and contig:
                ratios.setdefault((row["label"], page), {}).setdefault(p[0], []).append(paged / contig)
    if not ratios:
        return
    print(f"{'paged / contiguous, same pass':52} {'A':>13} {'B':>13}  goal")
    for (label, page), sides in ratios.items():
        fmt = lambda side: " ".join(f"{r:.3f}" for r in sides.get(side, [])) or "-"
        goal = ">= 0.85" if page == 16 else ">= 0.95" if page >= 64 else ""
        print(f"{label[:52]:52} {fmt('a'):>13} {fmt('b'):>13}  {goal}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    engine, decode = load(out, "engine"), load(out, "decode")
    if engine:
        print("== engine_peers (TF/s, graph replay; B/A above 1: B faster)")
        table(engine, engine_values, "TF/s", ours={"flashjit", "varlen", "dense", "contig", "paged"})
        paged_over_contig(engine)
    if decode:
        print("== decode_peers (us per call; B/A below 1: B faster)")
        table(decode, decode_values, "us", ours={"flashjit"})
    if not engine and not decode:
        print(f"no engine-*.json or decode-*.json in {out}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
