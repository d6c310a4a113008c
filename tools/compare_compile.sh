#!/usr/bin/env bash
# Compile time of two flashjit builds on this machine, interleaved (A B A B ...), so that the
# machine's speed, which moves with its neighbours by half from one hour to the next, cancels out
# of the ratio (issue 22: the goals were set on an idle machine of this class at one moment):
#   1. cold compile of SPEC: `prewarm --no-cache --spec SPEC --json` compile_ms, PAIRS pairs
#   2. `prewarm --defaults` into an empty cache, wall time, PAIRS_DEFAULTS pairs (each build its own
#      default set)
# Prints each side's medians, the median of the pairs' ratios B / A, and, where REF_COLD_MS and
# REF_DEFAULTS_S give A's figures as measured at another time, B's figures scaled to that time
# (B = ratio x REF): what B would have read on the machine when A read REF.
#   tools/compare_compile.sh A_FLASHJIT B_FLASHJIT
#   env: SPEC (dtype=bf16,head_dim=128,causal=1), PAIRS (7), PAIRS_DEFAULTS (3), REF_COLD_MS, REF_DEFAULTS_S
set -euo pipefail
A=${1:?usage: compare_compile.sh A_FLASHJIT B_FLASHJIT}
B=${2:?usage: compare_compile.sh A_FLASHJIT B_FLASHJIT}
SPEC=${SPEC:-dtype=bf16,head_dim=128,causal=1}
PAIRS=${PAIRS:-7}
PAIRS_DEFAULTS=${PAIRS_DEFAULTS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }

cold_ms() { "$1" prewarm --no-cache --spec "$SPEC" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["compile_ms"])'; }
defaults_s() {
  rm -rf "$work/cache"
  local t0 t1
  t0=$(now)
  "$1" prewarm --defaults --cache-dir "$work/cache" --json >"$work/defaults.json"
  t1=$(now)
  python3 -c "import json; n = len(json.load(open('$work/defaults.json'))); print($t1 - $t0, n)"
}

echo "machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/cold"
for _ in $(seq "$PAIRS"); do echo "$(cold_ms "$A") $(cold_ms "$B")" >>"$work/cold"; done
: >"$work/defaults"
for _ in $(seq "$PAIRS_DEFAULTS"); do echo "$(defaults_s "$A") $(defaults_s "$B")" >>"$work/defaults"; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work/cold" "$work/defaults" "${REF_COLD_MS:-}" "${REF_DEFAULTS_S:-}" "$SPEC" <<'PY'
import statistics, sys
cold = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
dflt = [tuple(map(float, line.split())) for line in open(sys.argv[2]) if line.strip()]
ref_cold, ref_dflt, spec = sys.argv[3], sys.argv[4], sys.argv[5]
med = statistics.median
r_cold = med(b / a for a, b in cold)
print(f"cold compile {spec}, {len(cold)} pairs: A median {med(a for a, _ in cold):.0f} ms, B {med(b for _, b in cold):.0f} ms; "
      f"B / A median of pairs {r_cold:.3f} (A: {' '.join(f'{a:.0f}' for a, _ in cold)}; B: {' '.join(f'{b:.0f}' for _, b in cold)})")
r_dflt = med(b / a for a, _, b, _ in dflt) if dflt else None
if dflt:
    print(f"prewarm --defaults from empty, {len(dflt)} pairs: A median {med(d[0] for d in dflt):.2f} s ({int(dflt[0][1])} kernels), "
          f"B {med(d[2] for d in dflt):.2f} s ({int(dflt[0][3])} kernels); B / A median of pairs {r_dflt:.3f}")
if ref_cold:
    print(f"B scaled to A's reference: cold compile {r_cold * float(ref_cold):.0f} ms (A read {float(ref_cold):.0f})")
if ref_dflt and dflt:
    print(f"B scaled to A's reference: prewarm --defaults {r_dflt * float(ref_dflt):.2f} s (A read {float(ref_dflt):.2f})")
PY
