#!/usr/bin/env bash
# Builds the flashjit wheel into dist/ from a CMake build folder (default build/), building libflashjit.so and
# the tool there first when it lacks them: pure Python, no network (python/build_wheel.py says more).
#   bash python/build_wheel.sh [BUILD_DIR] [--out DIR] [--plat TAG] [--no-strip]
exec python3 "$(dirname "${BASH_SOURCE[0]}")/build_wheel.py" "$@"
