#!/usr/bin/env bash
# The install tree is complete, relocatable and usable: `cmake --install` into a temporary prefix,
# move the whole tree elsewhere, then build the C and C++ examples against it with
# find_package(flashjit) and the C one with pkg-config, and run all three (without a GPU they print
# "no GPU: ..." after their CPU part and exit 0). Also runs the installed tool.
# Usage: tests/api_install_check.sh BUILD_DIR SOURCE_DIR C_COMPILER CXX_COMPILER [CMAKE_ARGS...]
#   CMAKE_ARGS: the main build's toolchain settings (FLASHJIT_NESTED_CMAKE_ARGS), for the examples'
#   configure like every configure nested in the main build.
set -eu -o pipefail
build=${1:?BUILD_DIR} src=${2:?SOURCE_DIR} cc=${3:-cc} cxx=${4:-c++}
shift $(($# < 4 ? $# : 4))
cmake_args=("$@")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/flashjit-install-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export FLASHJIT_CACHE_DIR=$tmp/cache TMPDIR=$tmp

step() { echo "== $*"; }
step "install into $tmp/prefix, then move the tree to $tmp/moved"
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
mv "$tmp/prefix" "$tmp/moved"
prefix=$tmp/moved
for f in include/flashjit/flashjit.h include/flashjit/flashjit.hpp bin/flashjit; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
lib=$(find "$prefix" -name 'libflashjit.so' | head -1)
pc=$(find "$prefix" -name flashjit.pc | head -1)
config=$(find "$prefix" -name flashjitConfig.cmake | head -1)
[ -n "$lib" ] && [ -n "$pc" ] && [ -n "$config" ] || { echo "FAIL: library, flashjit.pc or flashjitConfig.cmake missing"; exit 1; }
grep -q 'R.*PATH.*\$ORIGIN' <<<"$(readelf -d "$lib")" || { echo "FAIL: libflashjit.so has no \$ORIGIN rpath"; exit 1; }
grep -q 'R.*PATH.*\$ORIGIN' <<<"$(readelf -d "$prefix/bin/flashjit")" || { echo "FAIL: the tool has no \$ORIGIN rpath"; exit 1; }
if grep -rq "$tmp/prefix" "$prefix"; then echo "FAIL: an installed file names the install prefix (not relocatable)"; exit 1; fi
bash "$src/tests/elf_rpath_check.sh" "$prefix" >"$tmp/rpath.log" || { cat "$tmp/rpath.log"; exit 1; }

# FLASHJIT_NESTED_CONFIGURE_ONLY=DIR: configure the examples into DIR/example-LANG and stop
# (tests/nested_configure_check.py).
configure_example() {  # LANG BUILD_DIR
  cmake -S "$src/examples/$1" -B "$2" --no-warn-unused-cli "${cmake_args[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" >"$tmp/configure-$1.log" 2>&1 ||
    { cat "$tmp/configure-$1.log"; exit 1; }
}
configure_only=${FLASHJIT_NESTED_CONFIGURE_ONLY:-}
if [ -n "$configure_only" ]; then
  for lang in c cpp; do configure_example "$lang" "$configure_only/example-$lang"; done
  exit 0
fi

step "installed tool"
"$prefix/bin/flashjit" prewarm --spec dtype=bf16,head_dim=64 >"$tmp/tool.log" 2>&1 || { cat "$tmp/tool.log"; exit 1; }

run() {  # name binary
  echo "-- $1"
  "$2" | sed 's/^/   /'
}
for lang in c cpp; do
  step "examples/$lang with find_package(flashjit)"
  configure_example "$lang" "$tmp/build-$lang"
  cmake --build "$tmp/build-$lang" >"$tmp/build-$lang.log" 2>&1 || { cat "$tmp/build-$lang.log"; exit 1; }
  run "examples/$lang" "$tmp/build-$lang/flashjit_example_$lang"
done
run "examples/c engine step" "$tmp/build-c/flashjit_engine_step_c"

step "examples/c with pkg-config"
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs flashjit)
echo "   pkg-config --cflags --libs flashjit: $flags"
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$src/examples/c/main.c" $flags -ldl -o "$tmp/example-pkgconfig"
run "examples/c (pkg-config)" "$tmp/example-pkgconfig"
echo "PASS: installed tree moved, examples built with CMake and pkg-config, all ran"
