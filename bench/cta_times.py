#!/usr/bin/env python3
"""Summarises the per-CTA times that bench/cta_times.sh's tool prints after each `flashjit bench` cell
("cta BLOCK sm SM entry T go T end0 T end1 T producer T", ns of %globaltimer, one launch a cell).

Per cell: when the CTAs entered and passed griddep_wait, when they ended (the later of the two consumer
warpgroups), how long each was busy, when its producer issued its last load and how long its consumers ran
after that (the loads then in flight, and the epilogue), the earliest and latest CTAs, and the mean end per
16 SMs (a pattern by GPC would show there). A grid of more CTAs than SMs runs in rounds: CTAs that enter
more than 20 us after the previous one start a new round.
  python3 bench/cta_times.py cells.txt"""
import statistics
import sys


def cells(lines):
    """Each cell's rows (the bench's own line ends a cell)."""
    rows = []
    for line in lines:
        f = line.split()
        if len(f) == 14 and f[0] == "cta":
            rows.append({"block": int(f[1]), "sm": int(f[3]), "entry": int(f[5]), "go": int(f[7]),
                         "end": max(int(f[9]), int(f[11])), "producer": int(f[13])})
        elif rows and f and not line.startswith("cta"):
            yield line.strip(), rows
            rows = []
    if rows:
        yield "", rows


def quantiles(v):
    v = sorted(v)
    q = lambda f: v[min(len(v) - 1, int(f * len(v)))]
    return f"min {v[0]:7.1f} p10 {q(.1):7.1f} p50 {q(.5):7.1f} p90 {q(.9):7.1f} max {v[-1]:7.1f} mean {statistics.mean(v):7.1f}"


def report(label, rows):
    rows.sort(key=lambda r: r["entry"])
    rounds, current = [], []
    for r in rows:
        if current and r["entry"] - current[-1]["entry"] > 20000:
            rounds.append(current)
            current = []
        current.append(r)
    rounds.append(current)
    t0 = rows[0]["entry"]
    us = lambda ns: (ns - t0) / 1e3
    print(f"{label}\n  {len(rows)} CTAs on {len({r['sm'] for r in rows})} SMs, {len(rounds)} round(s); us from the first entry")
    for i, rr in enumerate(rounds):
        print(f"  round {i}: {len(rr)} CTAs")
        print(f"    entry    {quantiles([us(r['entry']) for r in rr])}")
        print(f"    go       {quantiles([us(r['go']) for r in rr])}")
        print(f"    end      {quantiles([us(r['end']) for r in rr])}")
        print(f"    busy     {quantiles([(r['end'] - r['go']) / 1e3 for r in rr])}")
        print(f"    producer {quantiles([us(r['producer']) for r in rr])}")
        print(f"    after    {quantiles([(r['end'] - r['producer']) / 1e3 for r in rr])}")
    by_end = sorted(rows, key=lambda r: r["end"])
    show = lambda rr: " ".join(f"b{r['block']}/sm{r['sm']}:{us(r['end']):.1f}" for r in rr)
    print(f"  first ends: {show(by_end[:8])}\n  last ends:  {show(by_end[-8:])}")
    buckets = {}
    for r in rows:
        buckets.setdefault(r["sm"] // 16, []).append(us(r["end"]))
    print("  mean end by SM / 16: " + " ".join(f"{k}:{statistics.mean(v):.1f}" for k, v in sorted(buckets.items())))


if __name__ == "__main__":
    found = False
    for label, rows in cells(open(sys.argv[1])):
        found = True
        report(label, rows)
    if not found:
        sys.exit("cta_times.py: no 'cta' lines (a tool built by bench/cta_times.sh prints them)")
