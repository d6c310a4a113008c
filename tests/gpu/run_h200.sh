#!/usr/bin/env bash
# Runs the GPU checks on the H200 in one call and prints a pass/fail table last.
#   tests/gpu/run_h200.sh [BIN_DIR]
# BIN_DIR holds flashjit_tests and flashjit built elsewhere (carried); without it, builds here.
# Full logs go to $OUT (or ./out).
set -u -o pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
BIN=${1:-}
if [ -z "$BIN" ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  BIN=build-gpu
  TESTS=$BIN/tests/flashjit_tests
else
  TESTS=$BIN/flashjit_tests
fi
declare -a rows
row() { rows+=("$(printf '%-44s %-6s %s' "$1" "$2" "$3")"); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$OUT/gpu.txt" 2>&1
head -2 "$OUT/gpu.txt"

# 1. GoogleTest GPU suites (correctness against the float64 reference, driver, API).
FILTER=${FLASHJIT_GPU_FILTER:-'AttentionGpu*:Driver*:*Gpu*'}
timeout -s KILL "${FLASHJIT_GPU_TIMEOUT:-420}" "$TESTS" --gtest_filter="$FILTER" >"$OUT/gtest_gpu.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/gtest_gpu.log" | head -40
for suite in $(grep -oE "^\[ +(OK|FAILED) +\] [A-Za-z0-9_./]+" "$OUT/gtest_gpu.log" | awk '{print $NF}' | sort -u); do
  if grep -qE "^\[  FAILED  \] $suite( |$)" "$OUT/gtest_gpu.log"; then row "$suite" FAIL ""; else row "$suite" pass ""; fi
done
[ $rc -eq 0 ] || row "gtest exit status" FAIL "rc=$rc (137 = timed out)"
grep -E "cases, [0-9]+ failed" "$OUT/gtest_gpu.log" | sed 's/^/  /'
grep -E "^FAIL " "$OUT/gtest_gpu.log" | head -20

echo
printf '%-44s %-6s %s\n' CHECK RESULT DETAIL
printf '%s\n' "${rows[@]}"
