#!/usr/bin/env bash
# A/B of two libraries' MLA kernels in one run on one GPU: bench/mla_peers.py's PARTS (default
# decode: the absorbed decode through flashjit.flash_mla) as A B A B, so the card's drift shows in
# each side's two passes; cuDNN (prefill part) is timed in every pass. Prints per cell A's and B's
# milliseconds per call and B / A (below 1: B faster), the geomean last; exits 1 when no cell has a
# figure from both sides. Logs and JSON in $OUT (or ./out); a pass that fails or times out leaves the others.
#   bench/ab_mla.sh LIB_A LIB_B        (libflashjit.so of each build; one library twice: ARGS_A/ARGS_B)
#   env: PARTS (mla_peers --parts, default decode), ARGS (more mla_peers arguments for both sides, e.g.
#        --decode-forms vink), ARGS_A / ARGS_B (more mla_peers arguments for that
#        side, e.g. ARGS_B=--pdl), REPS (default 5), PASS_TIMEOUT (s, default 200), BUDGET_S (no pass
#        starts past it, default 480).
set -u -o pipefail
A=${1:?usage: ab_mla.sh LIB_A LIB_B}
B=${2:?usage: ab_mla.sh LIB_A LIB_B}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PARTS=${PARTS:-decode} LIMIT=${PASS_TIMEOUT:-200} BUDGET=${BUDGET_S:-480}
SECONDS=0
for pass in a1 b1 a2 b2; do
  side=${pass:0:1}; lib=$A; extra=${ARGS_A:-}
  [ "$side" = b ] && lib=$B extra=${ARGS_B:-}
  [ $SECONDS -lt "$BUDGET" ] || break
  # Separate caches: the two builds' kernels differ under equal spec texts.
  FLASHJIT_CACHE_DIR="$OUT/cache-$side" timeout "$LIMIT" python3 "$HERE/mla_peers.py" --lib "$lib" --parts "$PARTS" \
    --reps "${REPS:-5}" ${ARGS:-} $extra --out "$OUT/mla-$pass.json" >"$OUT/mla-$pass.txt" 2>&1
  echo "mla $pass: rc $? (${SECONDS} s)"
done
python3 - "$OUT" <<'EOF'
import json, math, os, sys
out = sys.argv[1]
passes = {}
for p in ("a1", "b1", "a2", "b2"):
    try:
        rows = json.load(open(os.path.join(out, f"mla-{p}.json")))["rows"]
    except (OSError, ValueError, KeyError):
        continue
    passes[p] = {r["cell"]: r.get("flashjit_ms") for r in rows if r.get("flashjit_passed")}
cells = sorted({c for rows in passes.values() for c in rows})
print(f"{'cell':32s} {'A ms (passes)':>22s} {'B ms (passes)':>22s}   B/A")
ratios = []
for c in cells:
    a = [passes[p][c] for p in ("a1", "a2") if c in passes.get(p, {}) and passes[p][c]]
    b = [passes[p][c] for p in ("b1", "b2") if c in passes.get(p, {}) and passes[p][c]]
    ratio = (sum(b) / len(b)) / (sum(a) / len(a)) if a and b else None
    if ratio:
        ratios.append(ratio)
    fmt = lambda v: ", ".join(f"{x:.4f}" for x in v) or "-"
    print(f"{c:32s} {fmt(a):>22s} {fmt(b):>22s}   {ratio:.3f}" if ratio else f"{c:32s} {fmt(a):>22s} {fmt(b):>22s}   -")
if ratios:
    print(f"geomean B/A over {len(ratios)} cells: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
else:
    print("no cell has a figure from both sides: see the passes' logs")
sys.exit(0 if ratios else 1)
EOF
