#!/usr/bin/env bash
# No built executable or shared library has an empty or relative RPATH/RUNPATH entry: the loader
# reads an empty entry ('a::b', a leading or trailing ':') as the current directory, and a
# relative one against it, so a libnvrtc.so.13 (or any NEEDED library) in whatever directory the
# tool is started from would be loaded first. Folders holding their own CMakeCache.txt below DIR
# are nested builds of other tests (tests/fuzz/run_fuzz.sh), maybe half-written: left out.
# Usage: tests/elf_rpath_check.sh DIR      (a build tree or an install prefix)
set -eu -o pipefail
dir=${1:?DIR}
checked=0 bad=0
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  paths=$(readelf -d "$f" 2>/dev/null | sed -nE 's/.*\((RPATH|RUNPATH)\).*\[(.*)\]$/\2/p')
  [ -n "$paths" ] || continue
  checked=$((checked + 1)) before=$bad
  while IFS= read -r p; do
    if [[ ":$p:" == *::* ]]; then echo "FAIL: ${f#"$dir"/}: empty entry in [$p]"; bad=$((bad + 1)); fi
    IFS=: read -ra entries <<<"$p"
    for e in "${entries[@]}"; do
      case $e in '' | /* | '$ORIGIN'* | '${ORIGIN}'*) ;; *) echo "FAIL: ${f#"$dir"/}: relative entry '$e' in [$p]"; bad=$((bad + 1)) ;; esac
    done
  done <<<"$paths"
  [ "$bad" -gt "$before" ] || echo "ok: ${f#"$dir"/}: [$paths]"
done < <(find "$dir" \( -type d ! -path "$dir" -exec test -e '{}/CMakeCache.txt' \; -prune \) -o \
  -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0)
[ "$checked" -gt 0 ] || { echo "FAIL: no ELF file with an RPATH/RUNPATH under $dir"; exit 1; }
[ "$bad" -eq 0 ] || { echo "FAIL: $bad bad entries"; exit 1; }
echo "PASS: $checked ELF files, no empty or relative RPATH/RUNPATH entry"
