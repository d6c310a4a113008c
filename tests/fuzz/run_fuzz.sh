#!/usr/bin/env bash
# Builds tests/fuzz/fuzz_api.cpp (libFuzzer + ASan + UBSan, clang) in its own build folder and runs
# it for SECONDS (default 60). Exits non-zero when the fuzzer finds a crash, a leak or a broken
# invariant; the input that did it is left in <build>/fuzz-artifacts/.
#   tests/fuzz/run_fuzz.sh [SECONDS [CMAKE_ARGS...]]   (FLASHJIT_FUZZ_BUILD=dir, FLASHJIT_FUZZ_JOBS=n to override)
# CMAKE_ARGS: the main build's toolchain (ctest passes FLASHJIT_NESTED_CMAKE_ARGS; by hand, bootstrap's
# "${FLASHJIT_CMAKE_ARGS[@]}"): without them the configure looks for CUDA on its own and, where it is
# not in /usr/local/cuda, finds none.
set -eu -o pipefail
seconds=${1:-60}
[ $# -eq 0 ] || shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLASHJIT_FUZZ_BUILD:-$root/build-fuzz}
jobs=${FLASHJIT_FUZZ_JOBS:-2}
# Exit 77 (a skip for ctest) when clang is missing; 2 when the build fails; 1+ when the fuzzer finds something.
command -v clang++ >/dev/null || { echo "fuzz run not done: clang++ not found (libFuzzer needs clang): apt-get install clang"; exit 77; }
# FLASHJIT_NESTED_CONFIGURE_ONLY=DIR: configure into DIR/fuzz and stop (tests/nested_configure_check.py).
configure_only=${FLASHJIT_NESTED_CONFIGURE_ONLY:-}
[ -z "$configure_only" ] || build=$configure_only/fuzz

# The whole library is instrumented for coverage (fuzzer-no-link) and sanitized; the target links
# libFuzzer's main.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja "$@" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFLASHJIT_FUZZ=ON -DFLASHJIT_BUILD_TESTS=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 2; }
[ -z "$configure_only" ] || exit 0
cmake --build "$build" -j"$jobs" --target flashjit_fuzz_api >"$build/build.log" 2>&1 || { tail -40 "$build/build.log"; exit 2; }

# Seeds: one input per target, so every branch starts from something that parses.
corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
mkdir -p "$corpus" "$artifacts"
printf '\000\100dtype=bf16,head_dim=128,causal=1,stages=2' >"$corpus/seed-spec"
printf '\000\010head_dim=64,block_n=96,consumer_wgs=1' >"$corpus/seed-spec-tiles"
printf '\001\000' >"$corpus/seed-raw-args"
printf '\002\001\060\010\001\002\003\004\005\006\007\010' >"$corpus/seed-overwrite"
printf '\003\050\000\000\000\377\377\377\377' >"$corpus/seed-options"
printf '\004' >"$corpus/seed-forward"
printf '\005FJBUNDLE\001\000\000\000\001\000\000\000' >"$corpus/seed-bundle"

export FLASHJIT_LOG_LEVEL=off FLASHJIT_LIBCUDA=${FLASHJIT_LIBCUDA:-/nonexistent/libcuda.so.1}
echo "fuzzing for ${seconds}s: $build/flashjit_fuzz_api (artifacts in $artifacts)"
"$build/flashjit_fuzz_api" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus"
