#!/usr/bin/env bash
# The main job: build the flashjit tool and library, compile the default kernel set into the cache
# (`flashjit prewarm --defaults`), and where a Hopper GPU is present run one default kernel on it
# against the float64 reference (`flashjit check`). Without a GPU the job ends after the prewarm.
# Installs what is missing first (tools/bootstrap.sh). The build holds what the README's later steps
# use: `cmake --install BUILD_DIR` and `bash python/build_wheel.sh BUILD_DIR` (the tool and libflashjit.so).
# Usage: bash tools/main_job.sh
#   BUILD_DIR=DIR          build folder (default: build)
#   FLASHJIT_BIN=PATH      use this flashjit binary: no bootstrap, no build (e.g. one built elsewhere)
#   FLASHJIT_CHECK_SPEC=S  the spec to check on the GPU (default: dtype=bf16,head_dim=128,causal=1)
#   FLASHJIT_CACHE_DIR     where the kernels are cached (default: $XDG_CACHE_HOME/flashjit, ~/.cache/flashjit)
# Exit status: 0 when every step passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
CHECK_SPEC=${FLASHJIT_CHECK_SPEC:-dtype=bf16,head_dim=128,causal=1}
step() { echo; echo "== $*"; }

# 1. The tool and the shared library (what install and the wheel take; the test suite is not built).
if [ -n "${FLASHJIT_BIN:-}" ]; then
  tool=$FLASHJIT_BIN
  [ -x "$tool" ] || { echo "main_job: FLASHJIT_BIN=$tool is not an executable" >&2; exit 1; }
else
  step "bootstrap"
  env_lines=$(bash tools/bootstrap.sh --env) || exit 1
  eval "$env_lines"
  step "build ($BUILD_DIR)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${FLASHJIT_CMAKE_ARGS[@]}" >/dev/null
  cmake --build "$BUILD_DIR" --target flashjit flashjit_shared -j"$(nproc)"
  tool=$BUILD_DIR/flashjit
fi

# 2. What this machine offers.
step "flashjit doctor"
"$tool" doctor
doctor_json=$("$tool" doctor --json)

# 3. Every default kernel, compiled (or found) in the cache: the table shows registers, spills, smem.
step "flashjit prewarm --defaults"
"$tool" prewarm --defaults

# 4. On a Hopper GPU: run and check one default kernel. The driver's own view decides; nvidia-smi
#    only tells a GPU that the driver could not use from no GPU at all.
hopper=$(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(sum(1 for x in d["devices"] if x["supported"]))' "$doctor_json" 2>/dev/null || echo 0)
devices=$(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])["devices"]))' "$doctor_json" 2>/dev/null || echo 0)
if [ "$hopper" -gt 0 ]; then
  step "flashjit check --spec $CHECK_SPEC"
  "$tool" check --spec "$CHECK_SPEC"
elif [ "$devices" -gt 0 ]; then
  echo; echo "main_job: the GPU here is not Hopper (sm_90): kernels compiled and cached, check skipped"
elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo; echo "main_job: nvidia-smi lists a GPU but flashjit's driver probe found none (see doctor above)" >&2
  exit 1
else
  echo; echo "main_job: no GPU: kernels compiled and cached, check skipped"
fi
echo; echo "main_job: done"
