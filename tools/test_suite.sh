#!/usr/bin/env bash
# The whole test suite: install what is missing (tools/bootstrap.sh), configure, build everything,
# then ctest with each failing test's output. GPU tests skip themselves without a Hopper GPU, and the
# SASS check skips without cuobjdump. Ends with ctest's summary line; exits non-zero when a test failed.
# Usage: bash tools/test_suite.sh [CTEST_ARGS...]     e.g. bash tools/test_suite.sh -R Tool
#   BUILD_DIR=DIR   build folder (default: build)
#   JOBS=N          parallel build jobs and tests (default: the number of cores)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

env_lines=$(bash tools/bootstrap.sh --env) || exit 1
eval "$env_lines"
echo "== configure ($BUILD_DIR)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHJIT_BUILD_TESTS=ON "${FLASHJIT_CMAKE_ARGS[@]}"
echo "== build (-j$JOBS)"
cmake --build "$BUILD_DIR" -j"$JOBS"
echo "== ctest"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j"$JOBS" "$@"
