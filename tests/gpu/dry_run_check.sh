#!/usr/bin/env bash
# What the H200 run needs, checked without a GPU: the run script and the A/B scripts parse, a part name
# it does not know is refused, the GPU test binary lists cases of every GPU suite the gate's filter
# names, and every benchmark the run starts parses its arguments (--help, or --dry-run on the target
# cells, which must each match a cell); the flashjit tool beside the test binary (or FLASHJIT_TEST_TOOL)
# takes every `check` of the gate's feature list (3c) and every `bench` of 6g's list: run with no driver
# and no NVRTC, each must get past its argument checks (exit 1, not the usage error's 2).
#   tests/gpu/dry_run_check.sh TESTS_BINARY
set -u -o pipefail
TESTS=${1:?usage: dry_run_check.sh TESTS_BINARY}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for f in tests/gpu/*.sh bench/*.sh; do
  bash -n "$f" || bad "$f does not parse"
done
FLASHJIT_PART=nonsense bash tests/gpu/run_h200.sh /nonexistent >/dev/null 2>&1
[ $? -eq 2 ] || bad "run_h200.sh: an unknown FLASHJIT_PART is not refused with exit 2"
# The gate parts' filters, as the script sets them: together they list every GPU suite.
filter=$(sed -n 's/.*FLASHJIT_GPU_FILTER:=\([^}-][^}]*\)}.*/\1/p' tests/gpu/run_h200.sh | paste -sd: -)
[ -n "$filter" ] || bad "run_h200.sh: no gate filter found"
suites=$("$TESTS" --gtest_list_tests --gtest_filter="$filter" | grep -v '^ ' | tr -d . | sort -u | tr '\n' ' ')
all_gpu=$("$TESTS" --gtest_list_tests | grep -v '^ ' | tr -d . | grep -E 'Gpu|GpuDriver' | sort -u | tr '\n' ' ')
for s in AttentionGpu AttentionEngineGpu ApiGpu GpuDriver $all_gpu; do
  case " $suites " in *" $s "*) ;; *) bad "the gate parts' filters '$filter' list no case of $s (lists: $suites)" ;; esac
done
for py in bench/peers.py bench/engine_peers.py bench/decode_peers.py bench/feature_peers.py bench/fp8_peers.py \
          bench/mla_peers.py python/bench/call_overhead.py; do
  python3 "$py" --help >/dev/null 2>&1 || bad "$py --help fails"
done
# The features part's cells: its arguments parse and select cells.
fargs=$(sed -n 's/.*FLASHJIT_FEATURE_PEERS_ARGS:=\([^}]*\)}.*/\1/p' tests/gpu/run_h200.sh | head -1)
[ -n "$fargs" ] || bad "run_h200.sh: no FLASHJIT_FEATURE_PEERS_ARGS default found"
n=$(python3 bench/feature_peers.py --dry-run $fargs 2>&1 | sed -n 's/^\([0-9]*\) cells$/\1/p')
[ "${n:-0}" -gt 0 ] || bad "bench/feature_peers.py --dry-run $fargs selects no cell"
# The FP8 targets' cells (bench/fp8_peers.py): the default grid, the smoke one, the paper's full seqlens, and the
# arguments run_h200.sh passes it where it names them (FLASHJIT_FP8_PEERS_ARGS).
p8args=$(sed -n 's/.*FLASHJIT_FP8_PEERS_ARGS:=\([^}]*\)}.*/\1/p' tests/gpu/run_h200.sh | head -1)
for args in "" "--smoke" "--seqlens all" ${p8args:+"$p8args"}; do
  n=$(python3 bench/fp8_peers.py --dry-run $args 2>&1 | sed -n 's/^\([0-9]*\) cells$/\1/p')
  [ "${n:-0}" -gt 0 ] || bad "bench/fp8_peers.py --dry-run $args selects no cell"
done
# The mla part's cells (bench/mla_peers.py, its arguments as run_h200.sh passes them, and the smoke grid).
# (the mla and mla-decode parts each pass their own).
mapfile -t margs < <(sed -n 's/.*FLASHJIT_MLA_PEERS_ARGS:=\([^}]*\)}.*/\1/p' tests/gpu/run_h200.sh)
[ ${#margs[@]} -ge 2 ] || bad "run_h200.sh: the mla and mla-decode parts' FLASHJIT_MLA_PEERS_ARGS not found"
for args in "" "--smoke" "--smoke --parts decode" "--smoke --parts decode --decode-forms vink" "${margs[@]}"; do
  n=$(python3 bench/mla_peers.py --dry-run $args 2>&1 | sed -n 's/^\([0-9]*\) cells$/\1/p')
  [ "${n:-0}" -gt 0 ] || bad "bench/mla_peers.py --dry-run $args selects no cell"
done
# The mla-anatomy part's cell patterns (--only REGEX): each selects a decode cell.
for only in $(grep -o -- '--only [^ "]*' tests/gpu/run_h200.sh | cut -d' ' -f2 | sort -u); do
  n=$(python3 bench/mla_peers.py --dry-run --parts decode --only "$only" 2>&1 | sed -n 's/^\([0-9]*\) cells$/\1/p')
  [ "${n:-0}" -gt 0 ] || bad "bench/mla_peers.py --only '$only' (run_h200.sh) selects no decode cell"
done
# The targets part's decode cells: every pattern must select a cell.
cells=$(sed -n 's/.*FLASHJIT_DECODE_PEERS_ARGS:=--cells \([^ ]*\) .*/\1/p' tests/gpu/run_h200.sh | head -1)
combine=$(sed -n 's/^COMBINE_CELLS=\${FLASHJIT_COMBINE_CELLS:-\([^}]*\)}.*/\1/p' tests/gpu/run_h200.sh | head -1)
regress=$(sed -n 's/.*export DECODE_CELLS=\${DECODE_CELLS-\([^}]*\)}.*/\1/p' tests/gpu/run_h200.sh | head -1)
for list in "$cells" "$combine" "$regress"; do
  [ -n "$list" ] || { bad "run_h200.sh: a decode cell list was not found"; continue; }
  IFS=, read -ra pats <<<"$list"
  for pat in "${pats[@]}"; do
    n=$(python3 bench/decode_peers.py --dry-run --cells "$pat" 2>&1 | sed -n 's/^\([0-9]*\) cells, \([0-9]*\) to run.*/\2/p')
    [ "${n:-0}" -gt 0 ] || bad "decode cell pattern '$pat' selects no cell"
  done
done
# The tool's cells: 3c's CHECKS and 6g's BENCHES heredocs (6g's lengths variables set as the script sets them).
tool=${FLASHJIT_TEST_TOOL:-}
for t in "$(dirname "$TESTS")/flashjit" "$(dirname "$TESTS")/../flashjit"; do [ -z "$tool" ] && [ -x "$t" ] && tool=$t; done
if [ -n "$tool" ]; then
  heredoc() { sed -n "/<<'\?$1'\?\$/,/^$1\$/p" tests/gpu/run_h200.sh | sed '1d;$d'; }
  eval "$(sed -n 's/^  \([a-z0-9_]*=\$(printf .*\)$/\1/p' tests/gpu/run_h200.sh)"
  empty=$(mktemp -d)
  n=0
  while read -r command line; do
    [ -n "$line" ] || continue
    if [ "$command" = bench ]; then read -r _ spec flags <<<"$line"; else read -r spec flags <<<"$line"; fi
    n=$((n + 1))
    FLASHJIT_LIBCUDA=/nonexistent/libcuda.so.1 FLASHJIT_NVRTC=/nonexistent/libnvrtc.so timeout 60 \
      "$tool" "$command" --spec "$spec" $flags --cache-dir "$empty" >"$empty/out" 2>&1
    rc=$?
    [ $rc -eq 1 ] || bad "run_h200.sh: flashjit $command --spec $spec $flags: exit $rc, not 1 (no driver): $(tail -1 "$empty/out")"
  done < <(heredoc CHECKS | sed 's/^/check /'; eval "cat <<BENCHES
$(heredoc BENCHES)
BENCHES" | sed 's/^/bench /')
  rm -rf "$empty"
  [ $n -gt 20 ] || bad "run_h200.sh: only $n check and bench cells found in 3c and 6g"
else
  echo "dry run: no flashjit tool beside $TESTS (FLASHJIT_TEST_TOOL): the check and bench cells not tried"
fi
[ $fail -eq 0 ] && echo "dry run: the GPU run's scripts, suites and benchmarks are ready"
exit $fail
