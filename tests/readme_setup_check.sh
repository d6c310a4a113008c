#!/usr/bin/env bash
# README's set-up part (above its first '## ' heading) names, in backquotes, every package that
# tools/bootstrap.sh may install (apt and pip): someone installing by hand, or reading what a fresh
# machine gets, must not find one missing (issue 22: clang and libclang-rt-dev were).
# With --install-targets it checks instead that tools/main_job.sh (the README's first command) builds
# every target `cmake --install` installs, so the README's later steps (`cmake --install build`,
# `bash python/build_wheel.sh build/`) work on its build (issue 37: it built the tool alone).
# Usage: tests/readme_setup_check.sh SOURCE_DIR [--install-targets]
set -eu -o pipefail
src=${1:?SOURCE_DIR}

if [ "${2:-}" = --install-targets ]; then
  installed=$(grep -oE '^install\(TARGETS [A-Za-z0-9_ ]+' "$src/CMakeLists.txt" | sed -E 's/^install\(TARGETS //' |
              tr ' ' '\n' | grep -vxE 'EXPORT|[A-Z]+|' | sort -u)
  built=$(grep -E 'cmake --build .*--target' "$src/tools/main_job.sh" | sed -E 's/.*--target //; s/ -j.*//' | tr ' ' '\n')
  [ -n "$installed" ] || { echo "FAIL: no install(TARGETS ...) found in $src/CMakeLists.txt"; exit 1; }
  bad=0
  for t in $installed; do
    if grep -qxF "$t" <<<"$built"; then echo "ok: main_job.sh builds $t"; else echo "FAIL: tools/main_job.sh does not build \`$t\`, which cmake --install installs"; bad=1; fi
  done
  [ "$bad" = 0 ] && echo "PASS: main_job.sh builds every installed target"
  exit "$bad"
fi
bootstrap=$src/tools/bootstrap.sh
# The words inside its backquoted spans (`pip install a b` names a and b; version pins cut off).
named=$(sed '/^## /q' "$src/README.md" | grep -oE '`[^`]+`' | tr -d '`' | tr ' ,()' '\n' | sed -E 's/[=<>].*//' | sort -u)
# apt: missing+=(NAME) and the literal names after apt_install / apt-get install; pip: "nvidia-...".
pkgs=$( {
  grep -oE 'missing\+=\("?[^")]+' "$bootstrap" | sed -E 's/^missing\+=\("?//'
  grep -oE '(apt_install|apt-get install( -[a-z-]+)*) [a-z][a-z0-9.+-]+' "$bootstrap" | awk '{ print $NF }'
  grep -oE '"nvidia-[a-z-]+' "$bootstrap" | tr -d '"'
} | sort -u)
[ "$(wc -l <<<"$pkgs")" -ge 10 ] || { echo "FAIL: found only these packages in $bootstrap: $pkgs"; exit 1; }
bad=0
for p in $pkgs; do
  re=$(printf '%s' "$p" | sed -E 's/[.+]/\\&/g; s/\$n/[0-9]+/g')  # llvm-$n-dev: any llvm-N-dev
  if grep -qxE "$re" <<<"$named"; then echo "ok: $p"; else echo "FAIL: README's set-up part does not name \`$p\`"; bad=1; fi
done
[ "$bad" = 0 ] && echo "PASS: README names every package bootstrap installs"
exit "$bad"
