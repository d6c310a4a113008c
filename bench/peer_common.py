"""What the peers benchmarks (feature_peers.py, fp8_peers.py, mla_peers.py, engine_peers.py, decode_peers.py) share:
cell ids and selection, CUDA-graph and CUDA-event timing, the device's read bandwidth (the figure decode cells'
"% BW" is of), the float64 check of bf16 rows and its line, the table helpers, and the kernels' compilation
before the cells run.

The scripts put this folder on sys.path and import what they use by name. torch is imported inside the functions
that need it, so the scripts' --help and --dry-run still work without it.
"""

import fnmatch
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
from attention_ctypes import LSE_BOUND, O_BOUND, ErrorSum  # noqa: E402

K1 = 1024


# ---- cells -----------------------------------------------------------------------------------------------------
def klabel(n):
    return f"{n // K1}k" if n % K1 == 0 else str(n)


def select_cells(cells, cases, patterns):
    cells = [c for c in cells if c["case"] in cases]
    if patterns:
        cells = [c for c in cells if any(fnmatch.fnmatchcase(c["id"], p) or p == c["case"] for p in patterns)]
    return cells


# ---- helpers ---------------------------------------------------------------------------------------------------
def short(e, n=300):
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:n]


def device_state():
    """The card's SM clock (MHz), temperature (C) and power (W) now, each where torch can read it (through pynvml; {}
    where it cannot): beside a cell's figure, so that a cell run on a card clocked down (hot after long cells) shows."""
    import torch
    state = {}
    for key, read in (("sm_mhz", torch.cuda.clock_rate), ("temp_c", torch.cuda.temperature),
                      ("power_w", lambda: torch.cuda.power_draw() / 1000.0)):
        try:
            state[key] = round(float(read()), 1)
        except Exception:  # noqa: BLE001 (no pynvml, or a driver without the query)
            pass
    return state


def median(values):
    return sorted(values)[len(values) // 2]


def i32(values):
    import torch
    return torch.tensor(values, device="cuda", dtype=torch.int32)


def sample_rows(sq, n, rng):
    """n query rows of a sequence of sq: the first, the middle, the last and random others (all when sq <= n)."""
    if sq <= n:
        return list(range(sq))
    return sorted({0, sq // 2, sq - 1} | set(rng.sample(range(sq), n - 3)))


# ---- timing ----------------------------------------------------------------------------------------------------
def time_graph(fn, reps, per_graph):
    """ms a call in the replay of a CUDA graph of per_graph calls, median of reps replays (kernel time)."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # first-call work outside the capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(per_graph):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / per_graph)
    del g
    return median(times)


def measure_bandwidth(gb, reps):
    """GB/s of torch.sum over a gb-GB bf16 tensor (a graph of 5 sums, median of max(reps, 5) replays): the read
    bandwidth measured in the same run as the decode cells, what their "% BW" is of (decode_peers.py, mla_peers.py)."""
    import torch
    n = int(gb * 1e9) // 2  # bf16 elements
    held = [torch.empty(n, device="cuda", dtype=torch.bfloat16)]
    held[0].normal_()

    def read():
        torch.sum(held[0])
    ms = time_graph(read, max(reps, 5), 5)
    nbytes = n * 2
    held.clear()
    torch.cuda.empty_cache()
    return dict(gbps=round(nbytes / ms / 1e6, 1), bytes=nbytes, ms=round(ms, 4),
                method="torch.sum over a bf16 tensor, CUDA graph of 5, median")


def time_events(fn, reps, per_graph):
    """ms a call: CUDA events around per_graph calls launched back to back, median of reps."""
    import torch
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per_graph):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / per_graph)
    return median(times)


# ---- checks against float64 (bf16 outputs) ---------------------------------------------------------------------
def compare_bf16(samples, get, with_lse):
    """samples = [(sequence, rows, ref O, ref LSE)], get(sequence, rows) -> (O, LSE): the check's dict."""
    errs = ErrorSum()
    for i, rows, ref_o, ref_lse in samples:
        o, lse = get(i, rows)
        errs.add(o, lse if with_lse else None, ref_o, ref_lse)
    return {"o_err": errs.o, "lse_err": errs.lse if with_lse else None, "rows": errs.rows,
            "sequences": len(samples), "nan_rows": errs.nan_rows, "reference": "float64",
            "ok": errs.passed(O_BOUND["bf16"], LSE_BOUND if with_lse else None)}


def print_check_line(name, chk, width, note=""):
    """A check's line: name padded to width; note (e.g. ', float64 reference') after the sequences' count."""
    lse = f"  LSE err {chk['lse_err']:.2e}" if chk["lse_err"] is not None else ""
    nan = f"  unwritten rows {chk['nan_rows']}" if chk["nan_rows"] else ""
    print(f"    check {name:<{width}} O err {chk['o_err']:.2e}{lse}{nan}  ({chk['rows']} rows of {chk['sequences']} "
          f"sequences{note})  {'ok' if chk['ok'] else 'FAIL'}", flush=True)


# ---- tables ----------------------------------------------------------------------------------------------------
def ratio(row, key, a, b, field="tflops", invert=False):
    """a's figure over b's (field tflops: higher is better; us with invert: b's time over a's); None where either
    is missing or failed its check (then kept as key_raw)."""
    x, y = row["impls"].get(a, {}).get(field), row["impls"].get(b, {}).get(field)
    value = None
    if x and y:
        value = round(y / x, 3) if invert else round(x / y, 3)
        if any(row["checks"].get(n, {}).get("ok") is False for n in (a, b)):
            row["ratios"][key + "_raw"] = value
            value = None
    row["ratios"][key] = value
    return value


def fmt(x, spec=".1f", width=7):
    """x right-aligned in width with spec (a leading + asks for the sign), '-' for a missing figure."""
    if x is None:
        return f"{'-':>{width}}"
    sign = "+" if spec.startswith("+") else ""
    return format(x, f"{sign}{width}{spec.lstrip('+')}")


def checks_text(row):
    marks = [f"{n}:{'ok' if c['ok'] else 'FAIL'}" for n, c in row["checks"].items()]
    for n, p in row["impls"].items():
        if "error" in p:
            marks.append(f"{n}:error")
        elif "skipped" in p:
            marks.append(f"{n}:skipped")
    return " ".join(marks)


# ---- the run ---------------------------------------------------------------------------------------------------
def compile_specs(fj, names):
    """{spec: kernel name, or 'FAILED ...'}: every spec compiled in parallel first (a no-op for those in the
    cache), then looked up one by one (a spec that fails is named)."""
    specs = {s: None for s in names}
    t0 = time.time()
    try:  # compile every kernel in parallel first (a no-op for those in the cache)
        fj.prewarm(list(specs))
        print(f"prewarm: {len(specs)} specs ({time.time() - t0:.1f} s)", flush=True)
    except Exception as e:  # noqa: BLE001 -- each spec that failed fails again, by name, in its cell
        print(f"prewarm: {short(e, 600)} ({time.time() - t0:.1f} s)", flush=True)
    for spec in specs:
        try:
            specs[spec] = fj.kernel(spec)[1]
        except Exception as e:  # noqa: BLE001
            specs[spec] = "FAILED " + short(e)
            print(f"kernel {spec}: FAILED {short(e)}", flush=True)
    return specs
