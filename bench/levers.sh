#!/usr/bin/env bash
# Measures one lever at a time on headline cells (bf16, kernel time from graph replay).
#   bench/levers.sh FLASHJIT_BINARY [SET]
# SET picks the experiments (default: all); each line prints the bench row of one spec.
set -u
TOOL=${1:?usage: levers.sh path/to/flashjit [set]}
SET=${2:-all}
run() {  # label, bench args...
  local label=$1; shift
  printf '%-40s ' "$label"
  "$TOOL" bench --iters 20 "$@" | tail -1
}
d128="--batch 2 --seqlen-q 8192 --seqlen-k 8192 --heads-q 16"
d256="--batch 4 --seqlen-q 4096 --seqlen-k 4096 --heads-q 8"
d64="--batch 1 --seqlen-q 16384 --seqlen-k 16384 --heads-q 32"
if [ "$SET" = all ] || [ "$SET" = pipeline ]; then
  for pp in 0 1; do
    run "d128 pingpong=$pp" --spec dtype=bf16,head_dim=128,pingpong=$pp $d128
    run "d256 pingpong=$pp" --spec dtype=bf16,head_dim=256,pingpong=$pp $d256
    run "d64 pingpong=$pp" --spec dtype=bf16,head_dim=64,pingpong=$pp $d64
  done
fi
if [ "$SET" = all ] || [ "$SET" = tiles ]; then
  for bn in 64 96 128 144 160 176 192; do run "d128 block_n=$bn" --spec dtype=bf16,head_dim=128,block_n=$bn $d128; done
  for bn in 64 80 96; do run "d256 block_n=$bn" --spec dtype=bf16,head_dim=256,block_n=$bn $d256; done
  for st in 2 3 4; do run "d64 stages=$st" --spec dtype=bf16,head_dim=64,stages=$st $d64; done
  for bn in 64 128 176 192; do run "d64 block_n=$bn" --spec dtype=bf16,head_dim=64,block_n=$bn $d64; done
  for bn in 64 128 176; do run "d128 causal block_n=$bn" --spec dtype=bf16,head_dim=128,causal=1,block_n=$bn $d128; done
fi
if [ "$SET" = all ] || [ "$SET" = cluster ]; then
  for cl in 1 2; do
    run "d128 cluster=$cl" --spec dtype=bf16,head_dim=128,cluster=$cl $d128
    run "d256 cluster=$cl" --spec dtype=bf16,head_dim=256,cluster=$cl $d256
    run "d64 cluster=$cl" --spec dtype=bf16,head_dim=64,cluster=$cl $d64
    run "d128 causal cluster=$cl" --spec dtype=bf16,head_dim=128,causal=1,cluster=$cl $d128
    run "d64 causal cluster=$cl" --spec dtype=bf16,head_dim=64,causal=1,cluster=$cl $d64
  done
  run "d128 cluster=2 block_n=176" --spec dtype=bf16,head_dim=128,cluster=2,block_n=176 $d128
  run "d128 cluster=2 block_n=192" --spec dtype=bf16,head_dim=128,cluster=2,block_n=192 $d128
  run "d64 cluster=2 stages=3" --spec dtype=bf16,head_dim=64,cluster=2,stages=3 $d64
fi
if [ "$SET" = all ] || [ "$SET" = short ]; then
  # Short sequences (the paper grid's 16k tokens: batch = 16384 / seqlen, heads = 2048 / head dim),
  # where per-CTA fill and drain weigh most: which existing knobs would a seqlen-aware choice pick?
  cell() { echo "--batch $((16384 / $1)) --seqlen-q $1 --seqlen-k $1 --heads-q $((2048 / $2))"; }
  for L in 512 1024 2048; do for c in 0 1; do
    for v in "" ,consumer_wgs=2 ,consumer_wgs=2,pingpong=0 ,block_n=64; do
      run "d64 L=$L causal=$c$v" --spec dtype=bf16,head_dim=64,causal=$c$v $(cell $L 64)
    done
  done; done
  for L in 512 1024; do for c in 0 1; do
    for v in "" ,block_n=64 ,block_n=192 ,consumer_wgs=1 ,pingpong=0 ,stages=3; do
      run "d128 L=$L causal=$c$v" --spec dtype=bf16,head_dim=128,causal=$c$v $(cell $L 128)
    done
  done; done
  for c in 0 1; do for v in "" ,block_n=64 ,consumer_wgs=1; do
    run "d256 L=512 causal=$c$v" --spec dtype=bf16,head_dim=256,causal=$c$v $(cell 512 256)
  done; done
fi
