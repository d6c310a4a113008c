#!/usr/bin/env bash
# Every default variant's SASS has HGMMA (QGMMA for FP8 operands, dtype=e4m3), no local memory (LDL/STL), its mbarriers
# inside the shared memory the host allocates, and where the spec overlaps
# softmax with the PV GEMM, the exponentials really sit between the S wait (DEPBAR gsb0 <= 1) and the
# PV wait (DEPBAR gsb0 <= 0) in every loop (ptxas once hoisted the PV wait above them). Read from the cubins that
# `flashjit prewarm --defaults` put in a scratch cache, through `flashjit cache extract` + cuobjdump.
#   tests/gpu/check_sass.sh FLASHJIT_BINARY [SPEC...]   (specs beyond the defaults, e.g. decode's)
#   env: SASS_DEFAULTS=0 checks the given specs alone; SASS_REQUIRE=REGEX (grep -E) must match every
#   variant's SASS too (the FP8 cache's variants: the hardware's e4m3 widening, F2FP.F16.E4M3).
# Needs no GPU. Exit 0 when every variant passes, 1 otherwise, 77 when cuobjdump is missing.
set -u -o pipefail
FLASHJIT=${1:?usage: check_sass.sh path/to/flashjit [SPEC...]}
shift
extra=()
for spec in "$@"; do extra+=(--spec "$spec"); done
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null ||
  python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "bin", "cuobjdump"))' 2>/dev/null)}
if [ -z "$CUOBJDUMP" ] || [ ! -x "$CUOBJDUMP" ]; then echo "cuobjdump not found: SASS check not run"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
defaults=(--defaults)
[ "${SASS_DEFAULTS:-1}" = 0 ] && defaults=()
"$FLASHJIT" prewarm "${defaults[@]}" "${extra[@]}" --cache-dir "$work/cache" --json >"$work/prewarm.json" || { echo "prewarm failed"; exit 1; }
python3 - "$work/prewarm.json" >"$work/keys" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1])):
    print(row["key"], row["smem_bytes"], row["spec"])
PY
failed=0; total=0
while read -r key smem spec; do
  total=$((total + 1))
  "$FLASHJIT" cache extract "$key" "$work/k.cubin" --cache-dir "$work/cache" >/dev/null || { echo "FAIL extract $spec"; failed=$((failed + 1)); continue; }
  "$CUOBJDUMP" --dump-sass "$work/k.cubin" >"$work/k.sass" 2>&1
  hgmma=$(grep -cE "HGMMA|QGMMA" "$work/k.sass"); local_mem=$(grep -cE "\b(LDL|STL)\b" "$work/k.sass")
  # Overlapped loops without an exponential between the two waits (0 when none, or overlap is off).
  # v_in_k=1's and paired=1's first warpgroup waits its P V before its scores on purpose (the slot's
  # early release paces the ring; its softmax overlaps the second warpgroup's P V instead): not
  # checked there; nor with dim_split=1, whose warpgroups wait their P V before reading the peer
  # CTA's scores (P's registers free for them; the softmax overlaps the other warpgroup's GEMMs).
  serial=0
  if [[ "$spec" == *overlap=1* && "$spec" != *v_in_k=1* && "$spec" != *paired=1* && "$spec" != *dim_split=1* ]]; then
    serial=$(awk '/DEPBAR.LE gsb0, 0x1/ {open = 1; ex = 0; next}
                  open && /MUFU.EX2/ {ex++}
                  open && /DEPBAR.LE gsb0, 0x0/ {open = 0; if (ex == 0) bad++}
                  END {print bad + 0}' "$work/k.sass")
  fi
  required=1
  [ -n "${SASS_REQUIRE:-}" ] && required=$(grep -cE "$SASS_REQUIRE" "$work/k.sass")
  # The mbarriers the kernel initialises (SYNCS.EXCH.64 at an offset from the 1024-aligned base) must
  # lie inside the shared memory the host allocates, less the alignment's 1024: the kernel and the
  # host count the layout apart (an FP8 operands kernel once put them 16 KB past the allocation).
  bars_end=$(grep -oE "SYNCS\.EXCH\.64 URZ, \[UR[0-9]+\+0x[0-9a-f]+\]" "$work/k.sass" |
    sed -E 's/.*\+0x([0-9a-f]+)\]/\1/' | while read -r hex; do echo $((16#$hex + 8)); done | sort -n | tail -1)
  inside=1
  [ -n "$bars_end" ] && [ "$bars_end" -gt $((smem - 1024)) ] && inside=0
  if [ "$hgmma" -gt 0 ] && [ "$local_mem" -eq 0 ] && [ "$serial" -eq 0 ] && [ "$required" -gt 0 ] && [ "$inside" -eq 1 ]; then status=PASS; else status=FAIL; failed=$((failed + 1)); fi
  printf '%s GMMA=%-4s LDL/STL=%-3s unoverlapped-loops=%-2s barriers-end=%s/%s %s%s\n' "$status" "$hgmma" "$local_mem" "$serial" \
    "${bars_end:-?}" "$((smem - 1024))" "${SASS_REQUIRE:+$SASS_REQUIRE=$required }" "$spec"
done <"$work/keys"
echo "$((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
