#!/usr/bin/env bash
# A/B of two spec texts of one tool on dense cells, in one run on one GPU: for each shape, `flashjit
# bench --spec A --spec B`, then B before A (ABAB across the two passes, so the card's drift cancels),
# and a table of B / A (graph-replay TFLOP/s, the mean of each side's two passes) with the geomean and
# the lowest cell last. Used for the scheduler's default on dense shapes (dynamic against the static
# deal with its held-back tiles).
#   bench/ab_specs.sh TOOL EXTRA_B [SHAPES]     e.g. bench/ab_specs.sh build/flashjit scheduler=dynamic
#   SHAPES: "d:causal:batch:seqlen:heads ..." (default: d64 and d128, causal and not, 512 to 16k, 16k tokens)
#   env: ITERS (default 20), OUT (JSON per pass; default ./out)
set -euo pipefail
TOOL=${1:?usage: ab_specs.sh TOOL EXTRA_B [SHAPES]}
EXTRA=${2:?usage: ab_specs.sh TOOL EXTRA_B [SHAPES]}
SHAPES=${3:-"64:0:32:512:32 64:1:32:512:32 64:0:8:2048:32 64:1:8:2048:32 64:0:2:8192:32 64:1:2:8192:32 64:1:1:16384:32
128:0:32:512:16 128:1:32:512:16 128:0:8:2048:16 128:1:8:2048:16 128:0:2:8192:16 128:1:2:8192:16 128:1:1:16384:16"}
ITERS=${ITERS:-20}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
for shape in $SHAPES; do
  IFS=: read -r d causal batch seq heads <<<"$shape"
  a="dtype=bf16,head_dim=$d,causal=$causal"; b="$a,$EXTRA"
  common=(--batch "$batch" --seqlen-q "$seq" --seqlen-k "$seq" --heads-q "$heads" --iters "$ITERS" --json)
  "$TOOL" bench --spec "$a" --spec "$b" "${common[@]}" >"$OUT/ab-$d-$causal-$seq-1.json"
  "$TOOL" bench --spec "$b" --spec "$a" "${common[@]}" >"$OUT/ab-$d-$causal-$seq-2.json"
done
python3 - "$OUT" "$EXTRA" <<'PY'
import glob, json, math, sys
out, extra = sys.argv[1], sys.argv[2]
cells = {}
for path in sorted(glob.glob(f"{out}/ab-*-1.json")):
    rows = json.load(open(path)) + json.load(open(path[:-7] + "-2.json"))
    for r in rows:
        if r.get("error"):
            print(f"{r['spec']}: {r['error']}")
            continue
        key = (r["head_dim"], r["causal"], r["batch"], r["seqlen_q"], r["heads_q"])
        side = "b" if extra in r["spec"] else "a"
        cells.setdefault(key, {"a": [], "b": []})[side].append(r["tflops"])
logs = []
print(f"{'d':>3} {'cau':>3} {'batch':>5} {'seq':>6} {'hq':>3} | {'A TF/s':>14} {'B TF/s':>14} | B/A   (B: +{extra})")
for key, v in sorted(cells.items()):
    if len(v["a"]) != 2 or len(v["b"]) != 2:
        continue
    ta, tb = sum(v["a"]) / 2, sum(v["b"]) / 2
    logs.append(math.log(tb / ta))
    print(f"{key[0]:>3} {key[1]:>3} {key[2]:>5} {key[3]:>6} {key[4]:>3} | {v['a'][0]:6.1f} {v['a'][1]:6.1f} "
          f"{v['b'][0]:6.1f} {v['b'][1]:6.1f} | {tb / ta:.3f}")
if logs:
    print(f"geomean B/A {math.exp(sum(logs) / len(logs)):.4f} over {len(logs)} cells, lowest {math.exp(min(logs)):.3f}")
else:
    print("no cell timed on both sides")
    sys.exit(1)
PY
