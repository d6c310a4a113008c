#!/usr/bin/env bash
# README's set-up part (above its first '## ' heading) names, in backquotes, every package that
# tools/bootstrap.sh may install (apt and pip): someone installing by hand, or reading what a fresh
# machine gets, must not find one missing (issue 22: clang and libclang-rt-dev were).
# Usage: tests/readme_setup_check.sh SOURCE_DIR
set -eu -o pipefail
src=${1:?SOURCE_DIR}
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
