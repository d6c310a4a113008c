#!/usr/bin/env bash
# Builds a `flashjit` tool whose attention kernels record, per CTA, when it entered, passed griddep_wait,
# ended (each consumer warpgroup) and issued its last load (%globaltimer), and whose `bench` prints the
# last graph-replayed launch's times after each cell (bench/cta_times.patch). Where a launch's time goes
# between the CTAs' start, their spread of ends (the tail) and what lies outside their span; read the
# output with bench/cta_times.py. The patch is applied to a worktree of HEAD, not to this checkout.
#   bench/cta_times.sh OUT_DIR [cmake args...]   -> OUT_DIR/flashjit
# Then, on the GPU:  OUT_DIR/flashjit bench --spec ... > cells.txt; python3 bench/cta_times.py cells.txt
set -euo pipefail
OUT_DIR=${1:?usage: cta_times.sh OUT_DIR [cmake args...]}; shift
ROOT=$(git rev-parse --show-toplevel)
SCRATCH=$(mktemp -d)
TREE=$SCRATCH/flashjit-cta-times
git -C "$ROOT" worktree add --detach "$TREE" HEAD >/dev/null 2>&1
trap 'git -C "$ROOT" worktree remove --force "$TREE"; rm -rf "$SCRATCH"' EXIT
git -C "$TREE" apply "$ROOT/bench/cta_times.patch"
cmake -S "$TREE" -B "$TREE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$TREE/build" flashjit >/dev/null
mkdir -p "$OUT_DIR" && cp "$TREE/build/flashjit" "$OUT_DIR/flashjit"
echo "$OUT_DIR/flashjit"
