#!/usr/bin/env python3
"""Time and recompute factor of powloop's gradient against the AD budget.

    scripts/ckpt_curve.py [--no-jit] [ADVM_BINARY]

Runs `advm bench --json` of programs/bench/powloop.adasm at n = 10^6 (8 MB
stored without a budget) under 12 budgets spaced evenly on a log scale
from 1 KB to storing everything (8,000,024 bytes), and without one, and
writes docs/ckpt_curve.csv (budget, grad_ns, recompute_factor, time over
the time storing everything) and docs/ckpt_curve.svg (time ratio and
recompute factor against the budget, log scale), drawn here without
plotting libraries. The binary defaults to the release build (`cargo build
--release -p advm`) in $CARGO_TARGET_DIR or target/; `--no-jit` runs
everything in the interpreter (by default the native tier runs what it
can: the forward sweep that is checkpointed runs in the interpreter).
"""

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 1_000_000
STORE_ALL = 8_000_024


NO_JIT = "--no-jit" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--no-jit"]
POINTS = 12


def binary():
    if ARGS:
        return ARGS[0]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "advm")


def budgets():
    lo, hi = math.log(1024), math.log(STORE_ALL)
    return [round(math.exp(lo + (hi - lo) * i / (POINTS - 1))) for i in range(POINTS)]


def bench(exe, budget):
    cmd = [exe, "bench", "programs/bench/powloop.adasm", "--args",
           f"[1.0000001, {N}]", "--json"]
    if budget is not None:
        cmd += ["--ad-budget", str(budget)]
    if NO_JIT:
        cmd.append("--no-jit")
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def svg(rows, base_ns):
    tier = "interpreter" if NO_JIT else "native tier on"
    w, h, left, right, top, bottom = 640, 360, 60, 60, 30, 50
    xs = [math.log10(b) for b, _, _ in rows]
    x0, x1 = min(xs), max(xs)
    tmax = max(max(t for _, t, _ in rows) / base_ns, 1.0) * 1.1
    fmax = max(max(f for _, _, f in rows), 1.0) * 1.1

    def px(b):
        return left + (math.log10(b) - x0) / (x1 - x0) * (w - left - right)

    def py(v, vmax):
        return top + (1 - v / vmax) * (h - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="16" text-anchor="middle">powloop gradient, n = 10^6 '
           f'(8 MB stored without a budget), {tier}</text>']
    # Axes.
    out.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<line x1="{w - right}" y1="{top}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>')
    for e in range(math.ceil(x0), math.floor(x1) + 1):
        x = left + (e - x0) / (x1 - x0) * (w - left - right)
        out.append(f'<line x1="{x}" y1="{h - bottom}" x2="{x}" y2="{h - bottom + 4}" stroke="black"/>')
        out.append(f'<text x="{x}" y="{h - bottom + 16}" text-anchor="middle">10^{e}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">AD budget (bytes)</text>')
    for i in range(5):
        v = tmax * i / 4
        y = py(v, tmax)
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end" fill="#1f77b4">{v:.1f}</text>')
        fv = fmax * i / 4
        out.append(f'<text x="{w - right + 6}" y="{y + 4}" fill="#d62728">{fv:.1f}</text>')
    out.append(f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle" '
               'fill="#1f77b4">time / time storing everything</text>')
    out.append(f'<text x="{w - 10}" y="{h / 2}" transform="rotate(90 {w - 10} {h / 2})" '
               'text-anchor="middle" fill="#d62728">recompute factor</text>')
    t_pts = " ".join(f"{px(b):.1f},{py(t / base_ns, tmax):.1f}" for b, t, _ in rows)
    f_pts = " ".join(f"{px(b):.1f},{py(f, fmax):.1f}" for b, _, f in rows)
    out.append(f'<polyline points="{t_pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    out.append(f'<polyline points="{f_pts}" fill="none" stroke="#d62728" stroke-width="2" '
               'stroke-dasharray="5,3"/>')
    # Points and a legend.
    for b, t, fac in rows:
        out.append(f'<circle cx="{px(b):.1f}" cy="{py(t / base_ns, tmax):.1f}" r="3" fill="#1f77b4"/>')
        out.append(f'<circle cx="{px(b):.1f}" cy="{py(fac, fmax):.1f}" r="3" fill="#d62728"/>')
    lx, ly = w - right - 190, top + 12
    out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="#1f77b4" stroke-width="2"/>')
    out.append(f'<text x="{lx + 30}" y="{ly + 4}">time / storing everything</text>')
    out.append(f'<line x1="{lx}" y1="{ly + 16}" x2="{lx + 24}" y2="{ly + 16}" stroke="#d62728" '
               'stroke-width="2" stroke-dasharray="5,3"/>')
    out.append(f'<text x="{lx + 30}" y="{ly + 20}">recompute factor</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    exe = binary()
    base = bench(exe, None)
    rows = []
    for b in budgets():
        r = bench(exe, b)
        rows.append((b, r["grad_ns"], r["recompute_factor"]))
        print(f"{b:>10} {r['grad_ns'] / 1e6:9.2f} ms  x{r['grad_ns'] / base['grad_ns']:6.2f}"
              f"  factor {r['recompute_factor']:.3f}", flush=True)
    print(f"{'none':>10} {base['grad_ns'] / 1e6:9.2f} ms")
    with open(os.path.join(ROOT, "docs", "ckpt_curve.csv"), "w") as f:
        f.write("budget_bytes,grad_ns,recompute_factor,time_ratio\n")
        f.write(f"none,{base['grad_ns']:.0f},{base['recompute_factor']:.4f},1.00\n")
        for b, t, fac in rows:
            f.write(f"{b},{t:.0f},{fac:.4f},{t / base['grad_ns']:.2f}\n")
    with open(os.path.join(ROOT, "docs", "ckpt_curve.svg"), "w") as f:
        f.write(svg(rows, base["grad_ns"]))


if __name__ == "__main__":
    main()
