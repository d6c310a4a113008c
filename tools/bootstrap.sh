#!/usr/bin/env bash
# Installs what flashjit's build and tests need, and only what is missing: a second run installs
# nothing and takes well under a second. Debian 12 / Ubuntu 24.04 class machines, as root (or with sudo).
#   apt   cmake (>= 3.25), ninja-build, g++, make, pkg-config, llvm-N-dev (N = 14..18; static LLVM Support),
#         libspdlog-dev, libfmt-dev, libgtest-dev, python3, clang + libclang-rt-dev (the fuzz test)
#         ('apt-get update' only when one is missing)
#   CUDA  a toolkit whose NVRTC is 13.x or newer: $CUDAToolkit_ROOT, $CUDA_HOME, /usr/local/cuda,
#         /usr/local/cuda-1*, the nvcc on PATH; else apt's nvidia-cuda-toolkit when apt offers 13 or newer
#         (Debian 12 and Ubuntu 24.04 offer 11.8 and 12.0: too old); else NVRTC 13.0 and the CUDA headers
#         from PyPI (nvidia-cuda-nvrtc, nvidia-cuda-runtime) into $FLASHJIT_PYPI_CUDA_DIR (default
#         /opt/flashjit/cuda13); when that fails too, it stops and says what to install
#   pip   nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm when no cuobjdump (with its nvdisasm) is
#         found (optional: only the SASS test uses them, and that test is skipped without cuobjdump);
#         auditwheel when python3 has none (the wheel's manylinux check, python/tests/wheel_manylinux_check.sh)
# Usage: bash tools/bootstrap.sh          install/check; reports on stderr
#        eval "$(bash tools/bootstrap.sh --env)"
#                                         the same, then prints on stdout the cmake hints it found, as
#                                         a bash array: FLASHJIT_CMAKE_ARGS=(-DCUDAToolkit_ROOT=... -DFLASHJIT_LLVM_ROOT=...)
set -euo pipefail
trap 'echo "bootstrap: ERROR: line $LINENO failed: $BASH_COMMAND" >&2' ERR

print_env=0
[ "${1:-}" = --env ] && print_env=1

say() { echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: ERROR: $*" >&2; exit 1; }

SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); fi
fi
export DEBIAN_FRONTEND=noninteractive

apt_updated=0
apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found: install by hand: $*"
  if [ "$(id -u)" != 0 ] && [ ${#SUDO[@]} -eq 0 ]; then die "not root and no sudo: install by hand: $*"; fi
  say "apt-get update (missing: $*)"
  "${SUDO[@]}" apt-get update -qq >&2 || die "apt-get update failed"
  apt_updated=1
}
apt_install() {
  apt_update "$@"
  say "apt-get install $*"
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
}
# The candidate version apt offers for a package ('' when none); needs the lists (apt_update).
apt_candidate() {
  LC_ALL=C apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { if ($2 != "(none)") print $2 }'
}

# ---- 1. apt packages: each checked by what the build uses, not by the package name ----
missing=()
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
if ! command -v cmake >/dev/null; then
  missing+=(cmake)
elif ! version_ge "$(cmake --version | awk 'NR == 1 { print $3 }')" 3.25; then
  die "cmake $(cmake --version | awk 'NR == 1 { print $3 }') is older than 3.25: install a newer one (e.g. 'python3 -m pip install cmake')"
fi
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
# The install test builds the examples with CMake's default generator and with pkg-config.
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v python3 >/dev/null || missing+=(python3)
any_file() { local f; for f in "$@"; do [ -e "$f" ] && return 0; done; return 1; }
header() { [ -f "/usr/include/$1" ] || [ -f "/usr/local/include/$1" ]; }
# The bounded libFuzzer run (ctest Fuzz.ApiBounded) needs clang and its fuzzer runtime.
command -v clang++ >/dev/null || missing+=(clang)
any_file /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a /usr/lib/llvm-*/lib/clang/*/lib/x86_64-*/libclang_rt.fuzzer.a ||
  missing+=(libclang-rt-dev)
header spdlog/spdlog.h || missing+=(libspdlog-dev)
header fmt/format.h || missing+=(libfmt-dev)
if ! header gtest/gtest.h || ! any_file /usr/lib/libgtest.a /usr/lib/*/libgtest.a /usr/local/lib/libgtest.a; then
  missing+=(libgtest-dev)
fi
# LLVM Support, static: FLASHJIT_LLVM_ROOT, else the oldest of llvm-14..20 installed (14 is what is tested).
llvm_ok() { [ -f "$1/include/llvm/Support/SHA256.h" ] && [ -f "$1/lib/libLLVMSupport.a" ]; }
llvm_root=""
for candidate in ${FLASHJIT_LLVM_ROOT:-} /usr/lib/llvm-{14..20}; do
  if llvm_ok "$candidate"; then llvm_root=$candidate; break; fi
done

if [ ${#missing[@]} -gt 0 ] || [ -z "$llvm_root" ]; then
  if [ -z "$llvm_root" ]; then
    apt_update "${missing[@]}" llvm-dev
    for n in 14 15 16 17 18; do
      if [ -n "$(apt_candidate "llvm-$n-dev")" ]; then missing+=("llvm-$n-dev"); llvm_root=/usr/lib/llvm-$n; break; fi
    done
    [ -n "$llvm_root" ] || die "apt offers none of llvm-14-dev .. llvm-18-dev: install one, or set FLASHJIT_LLVM_ROOT to an LLVM prefix with lib/libLLVMSupport.a"
  fi
  apt_install "${missing[@]}"
  llvm_ok "$llvm_root" || die "$llvm_root has no include/llvm/Support/SHA256.h and lib/libLLVMSupport.a after the install"
fi

# pip for python3 (Debian's python3-pip when it has none).
ensure_pip() {
  python3 -m pip --version >/dev/null 2>&1 && return 0
  apt_update python3-pip
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-pip >&2 || { say "WARNING: could not install python3-pip"; return 1; }
}

# ---- 2. CUDA toolkit with NVRTC 13 or newer ----
# A root holds include/nvrtc.h, include/cuda.h and libnvrtc.so; its version is cuda.h's CUDA_VERSION.
cuda_major() {
  local v
  v=$(awk '/#define CUDA_VERSION/ { print $3; exit }' "$1/include/cuda.h" 2>/dev/null || true)
  if [ -n "$v" ]; then echo $((v / 1000)); fi
}
cuda_has_nvrtc() {
  [ -f "$1/include/nvrtc.h" ] && [ -f "$1/include/cuda.h" ] &&
    any_file "$1"/lib64/libnvrtc.so* "$1"/lib/libnvrtc.so* "$1"/targets/*/lib/libnvrtc.so* "$1"/lib/*-linux-gnu/libnvrtc.so*
}
pypi_cuda_dir=${FLASHJIT_PYPI_CUDA_DIR:-/opt/flashjit/cuda13}
pypi_cuda_root=$pypi_cuda_dir/nvidia/cu13
nvcc_root=""
command -v nvcc >/dev/null && nvcc_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
cuda_root=""
seen=()
for candidate in ${CUDAToolkit_ROOT:-} ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda $(ls -d /usr/local/cuda-1* 2>/dev/null | sort -rV) $nvcc_root /usr $pypi_cuda_root; do
  [ -d "$candidate" ] || continue
  if cuda_has_nvrtc "$candidate"; then
    major=$(cuda_major "$candidate")
    if [ -n "$major" ] && [ "$major" -ge 13 ]; then cuda_root=$candidate; break; fi
    seen+=("$candidate (CUDA ${major:-?})")
  fi
done
# Without one: apt's nvidia-cuda-toolkit when it is 13 or newer, else NVRTC 13.0 and the CUDA headers
# from PyPI (the nvidia-cuda-nvrtc and nvidia-cuda-runtime wheels) laid out as a toolkit root.
install_cuda_from_pypi() {
  local dir=$1 root=$1/nvidia/cu13
  ensure_pip || return 1
  say "installing NVRTC 13.0 and the CUDA headers from PyPI into $dir"
  python3 -m pip install -q --disable-pip-version-check --no-input --upgrade --target "$dir" \
    "nvidia-cuda-nvrtc==13.0.*" "nvidia-cuda-runtime==13.0.*" >&2 || return 1
  # NOTES: the wheels ship only versioned libraries and no nvcc. CMake's find_library wants the
  # unversioned names, and FindCUDAToolkit accepts a version.txt in place of nvcc.
  local lib
  for lib in nvrtc cudart; do [ -e "$root/lib/lib$lib.so" ] || ln -sf "lib$lib.so.13" "$root/lib/lib$lib.so"; done
  local v
  v=$(ls -d "$dir"/nvidia_cuda_nvrtc-*.dist-info 2>/dev/null | sed -E 's/.*nvrtc-([0-9.]+)\.dist-info/\1/' | head -1)
  [ -f "$root/version.txt" ] || echo "CUDA Version ${v:-13.0.0}" >"$root/version.txt"
  mkdir -p "$root/bin"
}
if [ -z "$cuda_root" ]; then
  apt_update nvidia-cuda-toolkit
  offered=$(apt_candidate nvidia-cuda-toolkit)
  offered_major=$(echo "$offered" | sed -E 's/^[0-9]+://; s/^([0-9]+).*/\1/')
  if [ -n "$offered" ] && [ "$offered_major" -ge 13 ] 2>/dev/null; then
    apt_install nvidia-cuda-toolkit
    cuda_has_nvrtc /usr && [ "$(cuda_major /usr)" -ge 13 ] && cuda_root=/usr
  else
    say "apt offers nvidia-cuda-toolkit ${offered:-(none)}: too old or absent (flashjit needs NVRTC 13.x)"
  fi
fi
if [ -z "$cuda_root" ]; then
  if install_cuda_from_pypi "$pypi_cuda_dir" && cuda_has_nvrtc "$pypi_cuda_root" && [ "$(cuda_major "$pypi_cuda_root")" -ge 13 ]; then
    cuda_root=$pypi_cuda_root
  else
    die "no CUDA toolkit with NVRTC 13.x found (looked at \$CUDAToolkit_ROOT, \$CUDA_HOME, /usr/local/cuda*, nvcc on PATH, /usr${seen:+; too old: ${seen[*]}}),
  apt offers nvidia-cuda-toolkit ${offered:-(none)} (older than 13 or absent), and installing the nvidia-cuda-nvrtc and
  nvidia-cuda-runtime 13.0 wheels from PyPI into $pypi_cuda_dir failed (see above).
  flashjit compiles sm_90a kernels with NVRTC 13.x and needs its headers (nvrtc.h, cuda.h) and libnvrtc.so.13.
  Install NVIDIA's CUDA Toolkit 13.x (e.g. cuda-toolkit-13-0 from NVIDIA's apt repository, into /usr/local/cuda),
  or point CUDAToolkit_ROOT at an existing 13.x toolkit, then run this again."
  fi
fi

# NVRTC dlopens libnvrtc-builtins by name, and the wheels' libnvrtc has no RUNPATH: the dynamic
# loader must know the folder (as the toolkit's own packages arrange in /etc/ld.so.conf.d).
if [ "$cuda_root" = "$pypi_cuda_root" ] && ! grep -qF "$pypi_cuda_root/lib/libnvrtc-builtins" <<<"$(ldconfig -p 2>/dev/null)"; then
  say "registering $pypi_cuda_root/lib with the dynamic loader (/etc/ld.so.conf.d/flashjit-cuda13.conf)"
  echo "$pypi_cuda_root/lib" | "${SUDO[@]}" tee /etc/ld.so.conf.d/flashjit-cuda13.conf >/dev/null &&
    "${SUDO[@]}" ldconfig ||
    say "WARNING: could not register it: export LD_LIBRARY_PATH=$pypi_cuda_root/lib before running flashjit"
fi

# ---- 3. cuobjdump (and the nvdisasm it runs) for the SASS test (optional) ----
# Found as tests/gpu/check_sass.sh looks: PATH, the toolkit's bin, python3's nvidia/cu13/bin.
find_cuobjdump() {
  local p=""
  if command -v cuobjdump >/dev/null; then p=$(command -v cuobjdump)
  elif [ -x "$cuda_root/bin/cuobjdump" ]; then p=$cuda_root/bin/cuobjdump
  else
    p=$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "bin", "cuobjdump"))' 2>/dev/null) || return 1
  fi
  [ -x "$p" ] && { [ -x "$(dirname "$p")/nvdisasm" ] || command -v nvdisasm >/dev/null; }
}
if ! find_cuobjdump; then
  say "cuobjdump/nvdisasm not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (for the SASS check test)"
  ensure_pip || true
  pip_args=(install -q --disable-pip-version-check --no-input "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14")
  # NOTES: Debian's own python3 refuses pip installs outside a venv (PEP 668) unless told otherwise.
  python3 -m pip "${pip_args[@]}" >&2 2>/dev/null || python3 -m pip "${pip_args[@]}" --break-system-packages >&2 ||
    say "WARNING: could not install them; the SASS check test will be skipped"
  find_cuobjdump || say "WARNING: cuobjdump or nvdisasm still not found; the SASS check test will be skipped"
fi

# ---- 3b. auditwheel, which the wheel's manylinux check asks whether the wheel's tag holds ----
if ! python3 -m auditwheel --version >/dev/null 2>&1; then
  say "auditwheel not found for python3: pip install auditwheel (for the wheel's manylinux check)"
  ensure_pip || true
  pip_args=(install -q --disable-pip-version-check --no-input "auditwheel>=6,<7")
  python3 -m pip "${pip_args[@]}" >&2 2>/dev/null || python3 -m pip "${pip_args[@]}" --break-system-packages >&2 ||
    say "WARNING: could not install auditwheel; the wheel's manylinux check will fail"
fi

# ---- 4. CMake 3.25.0/3.25.1's FindCUDAToolkit fails on CUDA 12.9+ (no libnvToolsExt): a stand-in target ----
cmake_args=(-DCUDAToolkit_ROOT="$cuda_root" -DFLASHJIT_LLVM_ROOT="$llvm_root")
cmake_version=$(cmake --version | awk 'NR == 1 { print $3 }')
find_cuda_module=$(dirname "$(readlink -f "$(command -v cmake)")")/../share/cmake-${cmake_version%.*}/Modules/FindCUDAToolkit.cmake
if grep -qE '^ *if\(CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25\)' "$find_cuda_module" 2>/dev/null; then
  say "this CMake's FindCUDAToolkit needs CUDA::nvToolsExt (CMake < 3.25.2): adding tools/cmake_workarounds.cmake"
  cmake_args+=(-DCMAKE_PROJECT_INCLUDE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cmake_workarounds.cmake")
fi

say "ok: cmake $(cmake --version | awk 'NR == 1 { print $3 }'), LLVM $llvm_root, CUDA $cuda_root (NVRTC $(cuda_major "$cuda_root").x)"
if [ "$print_env" = 1 ]; then
  printf 'FLASHJIT_CMAKE_ARGS=('; printf '%q ' "${cmake_args[@]}"; printf ')\n'
fi
