#!/usr/bin/env bash
# Builds the flashjit wheel into dist/ from a build of the library (default build/): pure Python, no network.
#   bash python/build_wheel.sh [BUILD_DIR] [--out DIR] [--plat TAG]
exec python3 "$(dirname "${BASH_SOURCE[0]}")/build_wheel.py" "$@"
