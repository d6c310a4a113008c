#!/usr/bin/env bash
# A/B of two builds' kernels on the dense grid, in one run on one GPU: `flashjit bench --grid GRID
# --json` of tool A, then B, then B, then A (ABBA, so the card's drift over the run cancels), and a
# per-cell table of B / A (graph-replay TFLOP/s, the mean of each tool's two passes) with the
# geomean, the lowest cell and the cells below 0.97 last.
#   bench/ab_dense.sh TOOL_A TOOL_B [GRID] [ITERS]     (GRID: fa3 by default; OUT: where the JSON goes)
set -euo pipefail
A=${1:?usage: ab_dense.sh TOOL_A TOOL_B [GRID] [ITERS]}
B=${2:?usage: ab_dense.sh TOOL_A TOOL_B [GRID] [ITERS]}
GRID=${3:-fa3}
ITERS=${4:-20}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# Separate caches: the two builds' kernels differ, and neither may see the other's tuning records.
for pass in a1 b1 b2 a2; do
  tool=$A; [ "${pass:0:1}" = b ] && tool=$B
  FLASHJIT_CACHE_DIR="$OUT/cache-${pass:0:1}" "$tool" bench --grid "$GRID" --iters "$ITERS" --json >"$OUT/ab-$pass.json"
done
python3 - "$OUT" <<'PY'
import json, math, sys
out = sys.argv[1]
load = lambda p: {(r["dtype"], r["head_dim"], r["causal"], r["seqlen_q"], r["heads_q"], r["heads_kv"]): r for r in json.load(open(f"{out}/ab-{p}.json"))}
a1, b1, b2, a2 = (load(p) for p in ("a1", "b1", "b2", "a2"))
rows, logs = [], []
print(f"{'dtype':5} {'d':>3} {'cau':>3} {'sq':>6} | {'A':>7} {'B':>7} | B/A   (A passes, B passes)")
for key in a1:
    ta = (a1[key]["tflops"] + a2[key]["tflops"]) / 2
    tb = (b1[key]["tflops"] + b2[key]["tflops"]) / 2
    ratio = tb / ta if ta > 0 else float("nan")
    logs.append(math.log(ratio))
    rows.append((ratio, key))
    print(f"{key[0]:5} {key[1]:3} {int(key[2]):3} {key[3]:6} | {ta:7.1f} {tb:7.1f} | {ratio:.3f} "
          f"({a1[key]['tflops']:.0f} {a2[key]['tflops']:.0f}, {b1[key]['tflops']:.0f} {b2[key]['tflops']:.0f})")
low = min(rows)
print(f"A/B over {len(rows)} cells: geomean B/A {math.exp(sum(logs) / len(logs)):.4f}, lowest {low[0]:.3f} at {low[1]}, "
      f"below 0.97: {sum(r < 0.97 for r, _ in rows)}")
PY
