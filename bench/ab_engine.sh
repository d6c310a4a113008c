#!/usr/bin/env bash
# A/B of two libraries' engine kernels in one run on one GPU: bench/engine_peers.py (ragged, equal
# lengths, chunked prefill against a paged cache) and, if DECODE_CELLS is set, bench/decode_peers.py,
# each as A B A B (the card's drift over the run shows in each side's two passes), the peers timed
# in the first A pass only where the script allows it. Prints per row A's passes, B's passes and
# B / A (TF/s for engine_peers, us per call for decode_peers, so there below 1 is faster), the
# geomean last. Logs and JSON in $OUT (or ./out); one pass that fails or times out leaves the others.
#   bench/ab_engine.sh LIB_A LIB_B        (libflashjit.so of each build)
#   env: CASES (engine_peers --cases, default ragged,equal,chunked; empty: skip), PAGES (--pages),
#        DECODE_CELLS (decode_peers --cells, e.g. 'paged,decode/d128/h32-8/b8/*'; default: skip),
#        EXTRA_A / EXTRA_B (--spec-extra for that side: an A/B of spec keys on one library),
#        PASS_TIMEOUT (s, default 150), BUDGET_S (no pass starts past it, default 480).
set -u -o pipefail
A=${1:?usage: ab_engine.sh LIB_A LIB_B}
B=${2:?usage: ab_engine.sh LIB_A LIB_B}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
CASES=${CASES-ragged,equal,chunked} PAGES=${PAGES:-} DECODE_CELLS=${DECODE_CELLS:-}
LIMIT=${PASS_TIMEOUT:-150} BUDGET=${BUDGET_S:-480}
SECONDS=0
for pass in a1 b1 a2 b2; do
  side=${pass:0:1}; lib=$A; extra=${EXTRA_A:-}
  [ "$side" = b ] && lib=$B extra=${EXTRA_B:-}
  # Separate caches: the two builds' kernels differ under equal spec texts.
  export FLASHJIT_CACHE_DIR="$OUT/cache-$side"
  if [ -n "$CASES" ] && [ $SECONDS -lt "$BUDGET" ]; then
    timeout "$LIMIT" python3 "$HERE/engine_peers.py" --lib "$lib" --cases "$CASES" --no-decode-peers ${PAGES:+--pages "$PAGES"} \
      ${extra:+--spec-extra "$extra"} --out "$OUT/engine-$pass.json" >"$OUT/engine-$pass.txt" 2>&1
    echo "engine $pass: rc $? (${SECONDS} s)"
  fi
  if [ -n "$DECODE_CELLS" ] && [ $SECONDS -lt "$BUDGET" ]; then
    peers=--no-peers; [ "$pass" = a1 ] && peers=
    timeout "$LIMIT" python3 "$HERE/decode_peers.py" --lib "$lib" --cells "$DECODE_CELLS" $peers \
      ${extra:+--spec-extra "$extra"} --out "$OUT/decode-$pass.json" >"$OUT/decode-$pass.txt" 2>&1
    echo "decode $pass: rc $? (${SECONDS} s)"
  fi
done
python3 "$HERE/ab_engine_table.py" "$OUT"
