#!/usr/bin/env bash
# Nsight Compute on one decode cell: flashjit's split-KV kernel (through `flashjit bench`) and
# cuDNN's SDPA (through torch) on the same shape, the sections that say where a streaming kernel's
# time goes (speed of light, memory workload, warp states, scheduler). For locating the decode gap
# (bench/NOTES.md, version 59). Writes $OUT/ncu_flashjit.txt and $OUT/ncu_cudnn.txt.
#   bench/profile_decode.sh FLASHJIT_BINARY [batch] [seqlen_k] [extra spec keys]
set -u -o pipefail
TOOL=${1:?usage: profile_decode.sh path/to/flashjit [batch] [seqlen_k] [extra]}
B=${2:-8} K=${3:-32768} EXTRA=${4:-}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
SECTIONS=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy)
SPEC="dtype=bf16,head_dim=128,varlen=1,pack_gqa=1,split_kv=1${EXTRA:+,$EXTRA}"
ncu --kernel-name regex:flashjit_attention --launch-skip 6 --launch-count 2 "${SECTIONS[@]}" \
  "$TOOL" bench --spec "$SPEC" --batch "$B" --seqlen-q 1 --seqlen-k "$K" --heads-q 32 --heads-kv 8 --iters 3 >"$OUT/ncu_flashjit.txt" 2>&1
echo "flashjit: rc $? ($(grep -cE '^\s+flashjit_attention' "$OUT/ncu_flashjit.txt") kernels profiled)"
ncu --kernel-name regex:'sdpa|fmha|cudnn|flash' --launch-skip 4 --launch-count 1 "${SECTIONS[@]}" python3 - "$B" "$K" >"$OUT/ncu_cudnn.txt" 2>&1 <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
b, k = int(sys.argv[1]), int(sys.argv[2])
q = torch.randn(b, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
kv = torch.randn(2, b, 8, k, 128, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(8):
        torch.nn.functional.scaled_dot_product_attention(q, kv[0], kv[1], enable_gqa=True)
torch.cuda.synchronize()
PY
echo "cudnn: rc $?"
for f in "$OUT/ncu_flashjit.txt" "$OUT/ncu_cudnn.txt"; do
  echo "== $(basename "$f")"
  grep -E "^\s+[a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit|Achieved Occupancy|Registers Per|Grid Size|Block Size|Dynamic Shared|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Compute \(SM\) Throughput|Mem Busy|Max Bandwidth|DRAM Frequency" "$f" | head -40
done
