#!/usr/bin/env python3
"""The decode plot of BENCHMARKS.md: per decode cell, flashjit's and its peers' K/V read rate as a share of
the device's read bandwidth measured in the same run (bench/decode_peers.py's JSON), as an SVG. No plotting
library: the H200's Python and the build hosts need nothing beyond the standard library.

  python3 bench/decode_plot.py RUN.json [MORE.json ...] -o bench/decode.svg

With several runs a cell's figures come from the last run that has them (a run with --no-peers and a
--spec-extra adds flashjit's figures over an earlier run's, keeping that run's peers); each bar is
labelled with its microseconds per call. Cells that failed a check or were skipped are left out."""
import argparse
import json
import sys
from xml.sax.saxutils import escape

SERIES = (("flashjit", "flashjit", "#1f77b4"), ("cudnn", "cuDNN (SDPA)", "#ff7f0e"),
          ("cudnn_paged", "cuDNN paged (frontend)", "#d62728"), ("fa2", "FlashAttention-2", "#7f7f7f"))
BAR, GAP, TOP, LEFT, HEIGHT = 12, 18, 80, 60, 260  # pixels


def load_cells(paths):
    """Cell id -> {impl: (pct_bw, us)} and the runs' read bandwidths, in the order cells first appear."""
    cells, order, bandwidth = {}, [], []
    for path in paths:
        run = json.load(open(path))
        bandwidth.append(run.get("bandwidth", {}).get("reference_gbps"))
        for cell in run.get("cells", []):
            if cell.get("skipped"):
                continue
            row = cells.setdefault(cell["id"], {})
            if cell["id"] not in order:
                order.append(cell["id"])
            for name, _, _ in SERIES:
                figure, check = cell.get("impls", {}).get(name), cell.get("checks", {}).get(name, {})
                if figure and figure.get("pct_bw") is not None and check.get("ok", False):
                    row[name] = (figure["pct_bw"], figure["us"])
    return cells, [c for c in order if cells[c].get("flashjit")], [b for b in bandwidth if b]


def short(cell_id):
    """decode/d128/h32-8/b8/q1/k32k -> 'b8 k32k' (+ page, d and heads where not the default)."""
    parts = cell_id.split("/")
    text = [p for p in parts[3:] if not p.startswith("q1")]
    if parts[1] != "d128":
        text.insert(0, parts[1])
    if parts[2] != "h32-8":
        text.insert(0, parts[2])
    return " ".join(text)


def svg(cells, order, bandwidth):
    scale = max(110.0, max(v[0] for c in order for v in cells[c].values()) + 5)
    y = lambda pct: TOP + HEIGHT * (1 - pct / scale)
    groups = [(c, [s for s in SERIES if s[0] in cells[c]]) for c in order]
    width = max(640, LEFT + sum(len(s) * BAR + GAP for _, s in groups) + 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{TOP + HEIGHT + 120}" '
           'font-family="sans-serif" font-size="10">', '<rect width="100%" height="100%" fill="white"/>']
    bw = ", ".join(f"{b:.0f}" for b in bandwidth)
    out.append(f'<text x="{LEFT}" y="20" font-size="13">Decode, bf16, one query a sequence: K/V read rate</text>'
               f'<text x="{LEFT}" y="36">% of the read bandwidth measured in the same run ({escape(bw)} GB/s)</text>')
    for pct in range(0, int(scale) + 1, 20):
        out.append(f'<line x1="{LEFT}" x2="{width - 10}" y1="{y(pct):.1f}" y2="{y(pct):.1f}" stroke="#ddd"/>'
                   f'<text x="{LEFT - 6}" y="{y(pct) + 3:.1f}" text-anchor="end">{pct}</text>')
    for pct, label in ((100, "read bandwidth"), (90, "issue 24: 90 %")):
        out.append(f'<line x1="{LEFT}" x2="{width - 10}" y1="{y(pct):.1f}" y2="{y(pct):.1f}" stroke="#555" '
                   f'stroke-dasharray="4 3"/><text x="{width - 12}" y="{y(pct) - 3:.1f}" text-anchor="end">{label}</text>')
    x = LEFT + GAP / 2
    for cell, series in groups:
        start = x
        for name, _, colour in series:
            pct, us = cells[cell][name]
            out.append(f'<rect x="{x:.1f}" y="{y(pct):.1f}" width="{BAR - 1}" height="{y(0) - y(pct):.1f}" fill="{colour}">'
                       f'<title>{escape(cell)} {name}: {pct} % of the read bandwidth, {us} us</title></rect>')
            out.append(f'<text transform="translate({x + BAR / 2 + 3:.1f},{y(pct) - 3:.1f}) rotate(-90)">{us:g}</text>')
            x += BAR
        mid = (start + x) / 2
        out.append(f'<text transform="translate({mid:.1f},{y(0) + 10:.1f}) rotate(45)">{escape(short(cell))}</text>')
        x += GAP
    legend_y = TOP + HEIGHT + 100
    lx = LEFT
    for _, label, colour in SERIES:
        out.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{lx + 14}" y="{legend_y}">{escape(label)}</text>')
        lx += 30 + 7 * len(label)
    out.append(f'<text x="{lx}" y="{legend_y}">bar labels: us per call</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="bench/decode_peers.py JSON files (later ones override a cell's figures)")
    ap.add_argument("-o", "--out", default="decode.svg")
    args = ap.parse_args()
    cells, order, bandwidth = load_cells(args.runs)
    if not order:
        sys.exit("decode_plot: no cell with a checked flashjit figure")
    open(args.out, "w").write(svg(cells, order, bandwidth))
    print(f"wrote {args.out}: {len(order)} cells")


if __name__ == "__main__":
    main()
