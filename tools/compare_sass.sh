#!/usr/bin/env bash
# Whether two flashjit builds produce the same machine code for every default kernel: each binary
# compiles `prewarm --defaults` into a scratch cache, every cubin is extracted (`flashjit cache
# extract KEY`) and disassembled (`cuobjdump -sass`, encodings included, and `-res-usage`), and the
# dumps are compared spec by spec (the cache keys differ whenever the source or the options do).
# For a compile-time change that must not touch any kernel (issue 22): run it before committing.
#   tools/compare_sass.sh OLD_FLASHJIT NEW_FLASHJIT
#   env: KEEP=DIR keeps the dumps there (DIR/old/N.sass, DIR/new/N.sass, DIR/specs); CUOBJDUMP
# Needs no GPU. Exit 0 when every kernel's SASS and resource usage are identical, 1 when one
# differs or a binary's kernel set differs, 77 when cuobjdump is missing.
set -u -o pipefail
OLD=${1:?usage: compare_sass.sh OLD_FLASHJIT NEW_FLASHJIT}
NEW=${2:?usage: compare_sass.sh OLD_FLASHJIT NEW_FLASHJIT}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null ||
  python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "bin", "cuobjdump"))' 2>/dev/null)}
if [ -z "$CUOBJDUMP" ] || [ ! -x "$CUOBJDUMP" ]; then echo "cuobjdump not found: SASS not compared"; exit 77; fi
if [ -n "${KEEP:-}" ]; then work=$KEEP; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi

# dump BINARY SIDE: compile the defaults, then one .sass per kernel, numbered in prewarm's order.
dump() {
  local tool=$1 side=$2
  rm -rf "$work/$side" "$work/$side.cache"; mkdir -p "$work/$side"
  "$tool" prewarm --defaults --cache-dir "$work/$side.cache" --json >"$work/$side.json" || { echo "prewarm failed: $tool"; return 1; }
  python3 -c 'import json, sys
for row in json.load(open(sys.argv[1])): print(row["key"], row["spec"])' "$work/$side.json" >"$work/$side/keys"
  local n=0 key spec
  while read -r key spec; do
    "$tool" cache extract "$key" "$work/$side/$n.cubin" --cache-dir "$work/$side.cache" >/dev/null || { echo "extract failed: $spec"; return 1; }
    { "$CUOBJDUMP" -sass "$work/$side/$n.cubin" && "$CUOBJDUMP" -res-usage "$work/$side/$n.cubin"; } >"$work/$side/$n.sass" 2>&1
    echo "$spec" >>"$work/$side/specs"
    n=$((n + 1))
  done <"$work/$side/keys"
}
dump "$OLD" old || exit 1
dump "$NEW" new || exit 1
cp "$work/new/specs" "$work/specs"
if ! cmp -s "$work/old/specs" "$work/new/specs"; then
  echo "the two builds have different default kernel sets:"; diff "$work/old/specs" "$work/new/specs"; exit 1
fi
same=0; differ=0; n=0
while read -r spec; do
  lines=$(grep -c '/\*[0-9a-f]\{4,\}\*/' "$work/old/$n.sass")
  if cmp -s "$work/old/$n.sass" "$work/new/$n.sass"; then
    same=$((same + 1)); printf 'same      %5s instructions  %s\n' "$lines" "$spec"
  else
    differ=$((differ + 1)); printf 'DIFFERENT %5s instructions  %s (%s changed lines)\n' "$lines" "$spec" \
      "$(diff "$work/old/$n.sass" "$work/new/$n.sass" | grep -c '^[<>]')"
  fi
  n=$((n + 1))
done <"$work/specs"
echo "$n kernels: $same identical, $differ different (SASS with encodings, and resource usage)"
[ "$differ" -eq 0 ]
