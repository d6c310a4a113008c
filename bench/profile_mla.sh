#!/usr/bin/env bash
# Where an absorbed MLA decode call's time goes (issue 40's decode targets), on the package's spec
# (v_in_k=1, batch 64 x KEYS keys, page 64) through `flashjit bench --v-in-k`:
#   1. per cell, the call's graph time (flashjit bench) beside Nsight Compute's duration of each of its
#      kernels (the attention kernel, and the combine kernel where the launch splits): graph time minus
#      the kernels' durations is what the launches cost between them;
#   2. per cell, the sections that say what holds the attention kernel (speed of light, memory and
#      shared-memory workload, warp states, the scheduler, the pipes' utilisation).
# Cells: h16 q1 (memory-bound, split), h128 q1 (compute-bound, one tile per SM, no split), h128 q2
# (causal, two rounds of tiles). Reports in $OUT (ncu_mla_<cell>.txt, bench_mla_<cell>.txt) and a
# summary on stdout. ncu runs with --clock-control none (the card's own clocks, as the benchmarks').
#   bench/profile_mla.sh FLASHJIT_BINARY [keys]
set -u -o pipefail
TOOL=${1:?usage: profile_mla.sh path/to/flashjit [keys]}
KEYS=${2:-4096}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
command -v ncu >/dev/null || { echo "profile_mla.sh: ncu not found"; exit 1; }
SECTIONS=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables
          --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats)
SPEC=dtype=bf16,head_dim=576,head_dim_v=512,varlen=1,paged=1,pack_gqa=1,split_kv=1,v_in_k=1
status=0
for cell in h16_q1:16:1:0 h128_q1:128:1:0 h128_q2:128:2:1; do
  IFS=: read -r name heads queries causal <<<"$cell"
  args=(--spec "$SPEC,causal=$causal" --v-in-k --page-size 64 --batch 64 --seqlen-q "$queries" --seqlen-k "$KEYS"
        --heads-q "$heads" --heads-kv 1)
  "$TOOL" bench "${args[@]}" --iters 20 >"$OUT/bench_mla_$name.txt" 2>&1 || status=1
  # Past the bench's first six kernel launches (its warm-up), four are profiled: the attention kernel and,
  # where the launch splits, its combine kernel, each on its own (ncu serialises them).
  ncu --clock-control none --kernel-name regex:flashjit_ --launch-skip 6 --launch-count 4 "${SECTIONS[@]}" \
    "$TOOL" bench "${args[@]}" --iters 3 >"$OUT/ncu_mla_$name.txt" 2>&1 || status=1
  echo "== $name ($heads heads x $queries queries, $KEYS keys)"
  grep -E '^custom' "$OUT/bench_mla_$name.txt" | head -2
  grep -E "^\s+flashjit_[a-z_]+|^\s+Duration|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Shared Memory|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Tensor|Grid Size" \
    "$OUT/ncu_mla_$name.txt" | head -40
done
exit $status
