#!/usr/bin/env bash
# Measures the compile-time targets (README.md, "Measured") with the flashjit tool, no GPU needed:
#   1. cold compile of one default variant: `prewarm --no-cache --spec SPEC --json`, RUNS times;
#      median of compile_ms (NVRTC + ptxas, as the tool reports it) and of the whole process's wall time
#   2. `prewarm --defaults` into an empty cache: wall time (RUNS_DEFAULTS times, each from empty),
#      and for the last run how busy the workers kept (the tail: cores idle at the end)
#   3. `prewarm --defaults` into the warm cache: wall time (RUNS times)
#   4. every default variant: spill bytes (prewarm's JSON) and ptxas C75xx warnings (kept in the
#      cache entries, which the tool does not print: read with grep)
#   5. where SPEC's compile time goes: NVRTC's time trace (FLASHJIT_NVRTC_TIME_TRACE) of RUNS_TRACE
#      more cold compiles, medians per phase: C++ front end, NVVM optimiser, NVVM code generation
#      (and the rest of libNVVM), ptxas
# Usage: tools/measure_compile.sh path/to/flashjit   env: RUNS (7), RUNS_DEFAULTS (3), RUNS_TRACE (3), SPEC
set -euo pipefail
TOOL=${1:?usage: measure_compile.sh path/to/flashjit}
RUNS=${RUNS:-7}
RUNS_DEFAULTS=${RUNS_DEFAULTS:-3}
RUNS_TRACE=${RUNS_TRACE:-3}
SPEC=${SPEC:-dtype=bf16,head_dim=128,causal=1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fmt() { awk '{ printf "%.3f", $1 }'; }

echo "machine: $(nproc) cores, $(uname -m); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nvrtc: $("$TOOL" doctor --json --cache-dir "$work/doctor" | python3 -c 'import json, sys; print(json.load(sys.stdin)["nvrtc"])')"

# 1. Cold compile of one variant.
: >"$work/cold_ms"; : >"$work/cold_wall"
for _ in $(seq "$RUNS"); do
  t0=$(now)
  "$TOOL" prewarm --no-cache --spec "$SPEC" --json >"$work/cold.json"
  t1=$(now)
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["compile_ms"])' "$work/cold.json" >>"$work/cold_ms"
  python3 -c "print($t1 - $t0)" >>"$work/cold_wall"
done
echo "cold compile $SPEC, $RUNS runs: compile_ms median $(median <"$work/cold_ms" | awk '{ printf "%.0f", $1 }') (all: $(sort -g "$work/cold_ms" | awk '{ printf "%.0f ", $1 }')); process wall median $(median <"$work/cold_wall" | fmt) s"

# 2. --defaults into an empty cache.
: >"$work/empty_wall"
for _ in $(seq "$RUNS_DEFAULTS"); do
  rm -rf "$work/cache"
  t0=$(now)
  "$TOOL" prewarm --defaults --cache-dir "$work/cache" --json >"$work/defaults.json"
  t1=$(now)
  python3 -c "print($t1 - $t0)" >>"$work/empty_wall"
done
echo "prewarm --defaults, empty cache, $RUNS_DEFAULTS runs: wall median $(median <"$work/empty_wall" | fmt) s (all: $(sort -g "$work/empty_wall" | awk '{ printf "%.2f ", $1 }'))"
# How well the pool's workers (one per core) kept busy in the last of those runs: the sum of the
# compiles' times over cores x wall, and the tail, the wall time beyond that sum / cores (the cores
# idling at the end, and what is not compiling: start-up, rendering, the cache). Both move less with
# the machine's speed than the wall time does.
python3 - "$work/defaults.json" "$(tail -1 "$work/empty_wall")" "$(nproc)" <<'PY'
import json, sys
rows, wall, cores = json.load(open(sys.argv[1])), float(sys.argv[2]), int(sys.argv[3])
busy = sum(r["compile_ms"] for r in rows) / 1000
print(f"  last run: compiles {busy:.2f} s in all, workers busy {100 * busy / (cores * wall):.1f} % of {cores} x {wall:.2f} s, tail {wall - busy / cores:.2f} s")
PY

# 3. --defaults into the warm cache.
: >"$work/warm_wall"
for _ in $(seq "$RUNS"); do
  t0=$(now)
  "$TOOL" prewarm --defaults --cache-dir "$work/cache" --json >"$work/warm.json"
  t1=$(now)
  python3 -c "print($t1 - $t0)" >>"$work/warm_wall"
done
echo "prewarm --defaults, warm cache, $RUNS runs: wall median $(median <"$work/warm_wall" | fmt) s (all: $(sort -g "$work/warm_wall" | awk '{ printf "%.3f ", $1 }'))"

# 4. Spills and ptxas warnings of every default variant.
python3 - "$work/defaults.json" "$work/warm.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
warm = json.load(open(sys.argv[2]))
print(f"default variants: {len(rows)}; statuses (empty cache): {sorted(set(r['status'] for r in rows))}; "
      f"(warm cache): {sorted(set(r['status'] for r in warm))}")
print(f"spill bytes: total {sum(r['spill_bytes'] for r in rows)}; variants with spills: "
      f"{[r['spec'] for r in rows if r['spill_bytes']] or 'none'}")
regs = [r['registers'] for r in rows]
print(f"registers per thread: min {min(regs)}, max {max(regs)}; shared memory bytes: min {min(r['smem_bytes'] for r in rows)}, max {max(r['smem_bytes'] for r in rows)}")
print(f"compile_ms per variant (parallel, empty cache): min {min(r['compile_ms'] for r in rows):.0f}, max {max(r['compile_ms'] for r in rows):.0f}")
PY
c7508=$( (grep -l "C7508" "$work"/cache/*.entry 2>/dev/null || true) | wc -l)
echo "cache entries with ptxas C7508: $c7508 of $(ls "$work"/cache/*.entry | wc -l)"
other=$(grep -ahoE "\(C75[0-9][0-9]\)[^']*" "$work"/cache/*.entry 2>/dev/null | sort | uniq -c || true)
echo "other ptxas C75xx warnings (count, text): ${other:-none}"

# 5. The phases of SPEC's compile (a traced compile takes a few ms longer than an untraced one).
for r in $(seq "$RUNS_TRACE"); do
  mkdir -p "$work/trace$r"
  FLASHJIT_NVRTC_TIME_TRACE="$work/trace$r" "$TOOL" prewarm --no-cache --spec "$SPEC" --json >"$work/trace$r.json"
done
python3 - "$work" "$RUNS_TRACE" <<'PY'
import glob, json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
phases = {"front end": [], "NVVM optimiser": [], "NVVM code generation": [], "NVVM other": [], "ptxas": [], "rest": [], "compile_ms": []}
for r in range(1, runs + 1):
    files = glob.glob(f"{work}/trace{r}/*.json")
    if len(files) != 1:
        print(f"time trace: run {r} wrote {len(files)} files, expected 1"); sys.exit(0)
    total = {}
    for e in json.load(open(files[0]))["traceEvents"]:
        if e.get("ph") == "X" and e.get("tid", 0) == 0:
            total[e["name"]] = total.get(e["name"], 0) + e["dur"] / 1000
    phases["front end"].append(total.get("CUDA C++ Front-End", 0))
    phases["NVVM optimiser"].append(total.get("NVVM Optimizer", 0))
    phases["NVVM code generation"].append(total.get("NVVM CodeGen", 0))
    phases["NVVM other"].append(total.get("LibNVVM", 0) - total.get("NVVM Optimizer", 0) - total.get("NVVM CodeGen", 0))
    phases["ptxas"].append(total.get("Total PTXAS Time", 0))
    phases["compile_ms"].append(json.load(open(f"{work}/trace{r}.json"))[0]["compile_ms"])
    # The rest: NVRTC outside the traced phases (program set-up, the cubin, the log) and the report.
    phases["rest"].append(phases["compile_ms"][-1] - total.get("CUDA C++ Front-End", 0) - total.get("LibNVVM", 0) - total.get("Total PTXAS Time", 0))
med = {k: statistics.median(v) for k, v in phases.items()}
parts = ", ".join(f"{k} {med[k]:.0f} ms ({100 * med[k] / med['compile_ms']:.0f} %)" for k in phases if k != "compile_ms")
print(f"where the time goes, {runs} traced compiles, medians: {parts}; compile_ms {med['compile_ms']:.0f}")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
