#!/usr/bin/env bash
# Nsight Compute on chunked prefill against a paged cache: flashjit's paged kernel and its contiguous
# varlen twin on the same lengths (through `flashjit bench`), with the warp-state and per-instruction
# stall samples that say where the producer and the consumers wait. For locating the page-16
# prefill gap (bench/NOTES.md, version 62). Writes $OUT/ncu_{paged,contig}.{txt,ncu-rep,sass.csv}
# and prints each kernel's summary and its 15 SASS instructions with the most stall samples.
#   bench/profile_paged.sh FLASHJIT_BINARY [page_size] [queries] [keys] [batch] [extra spec keys]
set -u -o pipefail
TOOL=${1:?usage: profile_paged.sh path/to/flashjit [page_size] [queries] [keys] [batch] [extra]}
P=${2:-16} Q=${3:-2048} K=${4:-32768} B=${5:-4} EXTRA=${6:-}
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
SEQLENS=$(for _ in $(seq "$B"); do printf "%s:%s," "$Q" "$K"; done); SEQLENS=${SEQLENS%,}
BASE="dtype=bf16,head_dim=128,causal=1,varlen=1${EXTRA:+,$EXTRA}"
for kind in paged contig; do
  spec=$BASE; [ "$kind" = paged ] && spec="$BASE,paged=1"
  # The bench checks once (one launch) and warms up (five) before timing: skip those.
  ncu --kernel-name regex:flashjit_attention --launch-skip 6 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters -f -o "$OUT/ncu_$kind" \
    "$TOOL" bench --spec "$spec" --page-size "$P" --seqlens "$SEQLENS" --heads-q 32 --heads-kv 8 --iters 2 >"$OUT/ncu_$kind.log" 2>&1
  echo "$kind: ncu rc $?"
  ncu -i "$OUT/ncu_$kind.ncu-rep" --page details >"$OUT/ncu_$kind.txt" 2>&1
  ncu -i "$OUT/ncu_$kind.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_$kind.sass.csv" 2>&1
  echo "== $kind ($spec, page $P, $B x $Q queries x $K keys)"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Stall (Long|Barrier|Wait|Short|Math|Sleeping|Branch)|No Eligible" "$OUT/ncu_$kind.txt" | head -16
  python3 - "$OUT/ncu_$kind.sass.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if any("Source" == c or "Address" in c for c in r)), None)
if head is None:
    print("  no SASS table in the export"); sys.exit()
cols = rows[head]
pick = lambda *names: next((i for i, c in enumerate(cols) if all(n in c for n in names)), None)
src, addr, samples = pick("Source"), pick("Address"), pick("Warp Stall Sampling (All")
if samples is None:
    print("  no stall-sample column; columns:", cols[:12]); sys.exit()
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[head + 1:] if len(r) > samples]
total = sum(num(r[samples]) for r in body) or 1.0
for r in sorted(body, key=lambda r: -num(r[samples]))[:15]:
    print(f"  {100 * num(r[samples]) / total:5.1f} %  {r[addr] if addr is not None else '':>8}  {r[src][:90] if src is not None else ''}")
PY
done
