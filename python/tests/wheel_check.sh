#!/usr/bin/env bash
# The wheel end to end on a CPU machine: build it from BUILD_DIR, install it into a fresh virtual
# environment (no index, no dependencies), run python/tests/test_cpu.py against the installed package
# (library loads, supported(), prewarm() with a real NVRTC compile, the `flashjit` command), then again
# with NVRTC laid out as the nvidia-cuda-nvrtc wheel lays it out in that environment, checking that the
# package and the `flashjit` command compile with that one (NVRTC is dlopen'ed, found by soname or on
# the folder the command puts first); the bundled tool without any NVRTC still answers doctor and reads
# the cache, and refuses only to compile, saying how to get NVRTC; `python -m flashjit` answers as the
# `flashjit` command does. Exit 77 (skip) when python3 cannot make an environment with pip.
#   bash python/tests/wheel_check.sh BUILD_DIR
#
# With --gpu (on the H200; BUILD_DIR holds libflashjit.so and flashjit, e.g. build/): the
# wheel built the same way, installed into a fresh environment that sees python3's torch, and
# python/tests/test_gpu.py run against the installed package with FLASHJIT_REQUIRE_TORCH=1 (no torch or no
# GPU fails, never skips); the CPU checks are not run. python3's torch may live where a virtual environment
# does not look even with --system-site-packages (a PYTHONPATH entry, a user site, another prefix): its
# directory, as python3 imports it, goes into a .pth file of the environment, which puts it after the
# environment's site-packages (so the wheel's flashjit, not another on that path, is the one imported;
# checked before the test).
#   bash python/tests/wheel_check.sh BUILD_DIR --gpu
set -euo pipefail
GPU=0
ARGS=()
for a in "$@"; do
  case "$a" in
    --gpu) GPU=1 ;;
    *) ARGS+=("$a") ;;
  esac
done
BUILD_DIR=$(cd "${ARGS[0]:-build}" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export FLASHJIT_LOG_LEVEL=${FLASHJIT_LOG_LEVEL:-error}
unset FLASHJIT_LIBRARY FLASHJIT_NVRTC

echo "== build the wheel"
wheel=$(python3 "$HERE/../build_wheel.py" "$BUILD_DIR" --out "$WORK/dist")
echo "$wheel"

echo "== a fresh virtual environment"
VENV_OPTS=()
[ "$GPU" = 1 ] && VENV_OPTS=(--system-site-packages)
if python3 -m venv ${VENV_OPTS[@]+"${VENV_OPTS[@]}"} "$WORK/venv" 2>"$WORK/venv.err"; then
  PIP=("$WORK/venv/bin/python" -m pip)
elif python3 -m venv ${VENV_OPTS[@]+"${VENV_OPTS[@]}"} --without-pip "$WORK/venv" && python3 -m pip --version >/dev/null 2>&1; then
  PIP=(python3 -m pip --python "$WORK/venv/bin/python")  # Debian without python3-venv: the host's pip
else
  echo "skipped: python3 cannot make a virtual environment with pip ($(cat "$WORK/venv.err"))"
  [ "$GPU" = 1 ] && { echo "FAIL: --gpu needs the environment"; exit 1; }
  exit 77
fi
PY=$WORK/venv/bin/python
"${PIP[@]}" install -q --no-index --no-deps --disable-pip-version-check "$wheel"
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

if [ "$GPU" = 1 ]; then
  echo "== python3's torch, visible to the environment"
  torch_dir=$(cd "$WORK" && python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') ||
    { echo "FAIL: $(command -v python3) cannot import torch"; exit 1; }
  echo "$torch_dir"
  echo "$torch_dir" >"$site/zz_flashjit_check_torch.pth"
  cd "$WORK"  # not the repository: the package must come from the environment
  where=$("$PY" -c 'import flashjit; print(flashjit.__file__)')
  echo "flashjit from $where"
  case "$(realpath "$where")" in
    "$(realpath "$WORK/venv")"/*) ;;
    *) echo "FAIL: flashjit imported from $where, not from the environment ($site)"; exit 1 ;;
  esac
  echo "== test_gpu.py against the installed package"
  FLASHJIT_REQUIRE_TORCH=1 "$PY" "$HERE/test_gpu.py"
  echo "wheel check (GPU): ok"
  exit 0
fi

echo "== the installed package (NVRTC from the library's own search)"
cd "$WORK"  # not the repository: the package must come from the environment
"$PY" "$HERE/test_cpu.py" --installed

echo "== python -m flashjit answers as the flashjit command does"
for args in "--version" "--help" "source --help"; do
  # shellcheck disable=SC2086  # the arguments are words
  script_out=$("$WORK/venv/bin/flashjit" $args 2>&1) || { echo "FAIL: flashjit $args exited $?"; exit 1; }
  # shellcheck disable=SC2086
  module_out=$("$PY" -m flashjit $args 2>&1) || { echo "FAIL: python -m flashjit $args exited $?: $module_out"; exit 1; }
  [ "$module_out" = "$script_out" ] || { echo "FAIL: python -m flashjit $args printed"; echo "$module_out"; echo "where flashjit $args printed"; echo "$script_out"; exit 1; }
  echo "ok: python -m flashjit $args"
done

echo "== NVRTC as the nvidia-cuda-nvrtc wheel installs it (nvidia/cu13/lib in site-packages)"
# The NVRTC this build was configured with (the library is not linked to it: no ldd).
nvrtc=$(sed -n 's/^NVRTC_LIB:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null)
[ -f "$nvrtc" ] || { echo "FAIL: $BUILD_DIR/CMakeCache.txt names no NVRTC library (NVRTC_LIB)"; exit 1; }
nvrtc=$(dirname "$(readlink -f "$nvrtc")")/libnvrtc.so.13
[ -f "$nvrtc" ] || { echo "FAIL: no $nvrtc beside the build's NVRTC_LIB"; exit 1; }
mkdir -p "$site/nvidia/cu13/lib"
for f in "$(dirname "$nvrtc")"/libnvrtc.so.13 "$(dirname "$nvrtc")"/libnvrtc-builtins.so.13.*; do
  [ -f "$f" ] || continue
  ln "$(readlink -f "$f")" "$site/nvidia/cu13/lib/$(basename "$f")" 2>/dev/null || cp "$(readlink -f "$f")" "$site/nvidia/cu13/lib/$(basename "$f")"
done
"$PY" "$HERE/test_cpu.py" --installed --expect-nvrtc "$site/nvidia/cu13/lib/libnvrtc.so.13"
wheel_nvrtc=$(realpath "$site/nvidia/cu13/lib/libnvrtc.so.13")
doctor=$("$WORK/venv/bin/flashjit" doctor --cache-dir "$WORK/tool-cache") || { echo "FAIL: flashjit doctor exited $?"; exit 1; }
grep -q "^nvrtc .*($wheel_nvrtc, " <<<"$(sed "s|$site|$(realpath "$site")|g" <<<"$doctor")" ||
  { echo "FAIL: the flashjit command did not load $wheel_nvrtc:"; echo "$doctor"; exit 1; }
echo "ok: the flashjit command loads the wheel's NVRTC"
prewarm=$("$WORK/venv/bin/flashjit" prewarm --spec dtype=fp16,head_dim=64,causal=0 --cache-dir "$WORK/tool-cache") ||
  { echo "FAIL: flashjit prewarm exited $?: $prewarm"; exit 1; }
grep -q "1 compiled, 0 hits, 0 failed" <<<"$prewarm" || { echo "FAIL: flashjit prewarm compiled nothing: $prewarm"; exit 1; }
echo "ok: the flashjit command compiles a kernel"

echo "== the bundled tool without NVRTC"
tool=$site/flashjit/_bin/flashjit
no_nvrtc=(env FLASHJIT_NVRTC=/nonexistent/libnvrtc.so.13)
out=$("${no_nvrtc[@]}" "$tool" doctor --cache-dir "$WORK/tool-cache") || { echo "FAIL: doctor without NVRTC exited $?: $out"; exit 1; }
grep -q "^nvrtc       none: .*/nonexistent/libnvrtc.so.13" <<<"$out" || { echo "FAIL: doctor does not say NVRTC is missing: $out"; exit 1; }
out=$("${no_nvrtc[@]}" "$tool" cache list --cache-dir "$WORK/tool-cache") || { echo "FAIL: cache list without NVRTC exited $?: $out"; exit 1; }
grep -q "head_dim=64" <<<"$out" || { echo "FAIL: cache list without NVRTC does not list the kernel: $out"; exit 1; }
out=$("${no_nvrtc[@]}" "$tool" prewarm --spec dtype=fp16,head_dim=64,causal=0 --cache-dir "$WORK/tool-cache") ||
  { echo "FAIL: a cache hit without NVRTC exited $?: $out"; exit 1; }
if out=$("${no_nvrtc[@]}" "$tool" prewarm --spec dtype=bf16,head_dim=64,causal=0 --cache-dir "$WORK/tool-cache" 2>&1); then
  echo "FAIL: a compile without NVRTC succeeded: $out"; exit 1
fi
grep -q "pip install 'nvidia-cuda-nvrtc==" <<<"$out" || { echo "FAIL: a compile without NVRTC does not say how to get it: $out"; exit 1; }
echo "ok: without NVRTC the tool reads the cache and refuses only to compile"
echo "wheel check: ok"
