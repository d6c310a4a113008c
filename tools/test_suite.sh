#!/usr/bin/env bash
# The whole test suite: install what is missing (tools/bootstrap.sh), configure, build everything,
# then ctest with each failing test's output. GPU tests skip themselves without a Hopper GPU, and the
# SASS check skips without cuobjdump. Ends with ctest's summary line; exits non-zero when a test failed.
# Usage: bash tools/test_suite.sh [CTEST_ARGS...]     e.g. bash tools/test_suite.sh -R Tool
#   BUILD_DIR=DIR   build folder (default: build)
#   JOBS=N          parallel build jobs and tests (default: the number of cores)
#   SANITIZE=1      the address and undefined-behaviour sanitized build (FLASHJIT_SANITIZE=ON) in
#                   build-asan (BUILD_DIR default); left out: the fuzz test (sanitized already) and the
#                   wheel checks (a wheel is never built from a sanitized library). Every other test runs
#                   under the leak check, with ASAN_OPTIONS intercept_tls_get_addr=0: the sanitizer runtime
#                   of GCC 12 (and up to GCC 13 / LLVM 16) takes a dynamic-TLS block that starts 16 bytes
#                   into a page for a pre-2.25 glibc block with a header and reads the two words before it
#                   as the block's address and size (google/sanitizers#1322). A block lands there by chance,
#                   so LeakSanitizer's tracer scanned a bogus range ("DTLS ... at 0x24e8") and died with
#                   "Tracer caught signal 11" after the test had passed, now and then, in whichever process
#                   had loaded NVRTC (variant compiles, the fake-driver API suite, the tool's check). With
#                   the interception off, dynamic TLS is not tracked and not scanned for roots: a pointer
#                   held only there would be reported as a leak, which fails the test rather than hides one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SANITIZE=${SANITIZE:-0}
BUILD_DIR=${BUILD_DIR:-$([ "$SANITIZE" = 1 ] && echo build-asan || echo build)}
JOBS=${JOBS:-$(nproc)}
sanitize_args=()
ctest_skip=()
if [ "$SANITIZE" = 1 ]; then
  sanitize_args=(-DFLASHJIT_SANITIZE=ON)
  ctest_skip=(-E '^(Fuzz\.|Python\.Wheel)')
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0"
  # UBSan's reports fail the test that meets one, as ASan's do.
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
fi

env_lines=$(bash tools/bootstrap.sh --env) || exit 1
eval "$env_lines"
echo "== configure ($BUILD_DIR)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHJIT_BUILD_TESTS=ON "${FLASHJIT_CMAKE_ARGS[@]}" \
  "${sanitize_args[@]}"
echo "== build (-j$JOBS)"
cmake --build "$BUILD_DIR" -j"$JOBS"
echo "== ctest"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j"$JOBS" "${ctest_skip[@]}" "$@"
