#!/usr/bin/env bash
# The wheel end to end on a CPU machine: build it from BUILD_DIR, install it into a fresh virtual
# environment (no index, no dependencies), run python/tests/test_cpu.py against the installed package
# (library loads, supported(), prewarm() with a real NVRTC compile, the `flashjit` command), then again
# with NVRTC laid out as the nvidia-cuda-nvrtc wheel lays it out in that environment, checking that the
# package loaded that one. Exit 77 (skip) when python3 cannot make an environment with pip.
#   bash python/tests/wheel_check.sh BUILD_DIR
set -euo pipefail
BUILD_DIR=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export FLASHJIT_LOG_LEVEL=${FLASHJIT_LOG_LEVEL:-error}
unset FLASHJIT_LIBRARY FLASHJIT_NVRTC

echo "== build the wheel"
wheel=$(python3 "$HERE/../build_wheel.py" "$BUILD_DIR" --out "$WORK/dist")
echo "$wheel"

echo "== a fresh virtual environment"
if python3 -m venv "$WORK/venv" 2>"$WORK/venv.err"; then
  PIP=("$WORK/venv/bin/python" -m pip)
elif python3 -m venv --without-pip "$WORK/venv" && python3 -m pip --version >/dev/null 2>&1; then
  PIP=(python3 -m pip --python "$WORK/venv/bin/python")  # Debian without python3-venv: the host's pip
else
  echo "skipped: python3 cannot make a virtual environment with pip ($(cat "$WORK/venv.err"))"
  exit 77
fi
PY=$WORK/venv/bin/python
"${PIP[@]}" install -q --no-index --no-deps --disable-pip-version-check "$wheel"

echo "== the installed package (NVRTC from the library's own search)"
cd "$WORK"  # not the repository: the package must come from the environment
"$PY" "$HERE/test_cpu.py" --installed

echo "== NVRTC as the nvidia-cuda-nvrtc wheel installs it (nvidia/cu13/lib in site-packages)"
nvrtc=$(ldd "$BUILD_DIR/libflashjit.so" | awk '/libnvrtc\.so/ { print $3; exit }')
[ -f "$nvrtc" ] || { echo "FAIL: ldd finds no libnvrtc for $BUILD_DIR/libflashjit.so"; exit 1; }
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
mkdir -p "$site/nvidia/cu13/lib"
for f in "$(dirname "$nvrtc")"/libnvrtc.so.13 "$(dirname "$nvrtc")"/libnvrtc-builtins.so.13.*; do
  [ -f "$f" ] || continue
  ln "$(readlink -f "$f")" "$site/nvidia/cu13/lib/$(basename "$f")" 2>/dev/null || cp "$(readlink -f "$f")" "$site/nvidia/cu13/lib/$(basename "$f")"
done
"$PY" "$HERE/test_cpu.py" --installed --expect-nvrtc "$site/nvidia/cu13/lib/libnvrtc.so.13"
echo "wheel check: ok"
