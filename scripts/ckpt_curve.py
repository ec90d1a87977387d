#!/usr/bin/env python3
"""Time and recompute factor of powloop's gradient against the AD budget.

    scripts/ckpt_curve.py [ADVM_BINARY]

Runs `advm bench --json` of programs/bench/powloop.adasm at n = 10^6 (8 MB
stored without a budget) under 12 budgets spaced evenly on a log scale
from 1 KB to storing everything (8,000,024 bytes), and without one (the
faster of two runs each), in
the interpreter (`--no-jit`) and with the native tier (the default: the
forward sweep that is checkpointed runs in the interpreter, the reverse
sweep natively). Writes docs/ckpt_curve.csv (tier, budget, grad_ns,
recompute_factor, time over the same tier's time storing everything) and
docs/ckpt_curve.svg (the time ratios and the recompute factor against the
budget, log scale), drawn here without plotting libraries. The binary
defaults to the release build (`cargo build --release -p advm`) in
$CARGO_TARGET_DIR or target/.
"""

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 1_000_000
STORE_ALL = 8_000_024
POINTS = 12
TIERS = [("interp", ["--no-jit"]), ("jit", [])]
BLUE, GREEN, RED = "#1f77b4", "#2ca02c", "#d62728"


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "advm")


def budgets():
    lo, hi = math.log(1024), math.log(STORE_ALL)
    return [round(math.exp(lo + (hi - lo) * i / (POINTS - 1))) for i in range(POINTS)]


def bench(exe, budget, flags):
    """The faster of two `bench --json` runs (the machine may be shared)."""
    cmd = [exe, "bench", "programs/bench/powloop.adasm", "--args",
           f"[1.0000001, {N}]", "--json"] + flags
    if budget is not None:
        cmd += ["--ad-budget", str(budget)]
    runs = []
    for _ in range(2):
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
        runs.append(json.loads(out.stdout))
    return min(runs, key=lambda r: r["grad_ns"])


def svg(curves):
    """`curves`: tier -> (rows of (budget, time ratio, factor))."""
    w, h, left, right, top, bottom = 680, 380, 60, 60, 30, 50
    rows = [r for rs in curves.values() for r in rs]
    xs = [math.log10(b) for b, _, _ in rows]
    x0, x1 = min(xs), max(xs)
    tmax = max(max(t for _, t, _ in rows), 1.0) * 1.1
    fmax = max(max(f for _, _, f in rows), 1.0) * 1.1

    def px(b):
        return left + (math.log10(b) - x0) / (x1 - x0) * (w - left - right)

    def py(v, vmax):
        return top + (1 - v / vmax) * (h - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="16" text-anchor="middle">powloop gradient, n = 10^6 '
           '(8 MB stored without a budget): time and recomputation against the budget</text>']
    out.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<line x1="{w - right}" y1="{top}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>')
    for e in range(math.ceil(x0), math.floor(x1) + 1):
        x = left + (e - x0) / (x1 - x0) * (w - left - right)
        out.append(f'<line x1="{x:.1f}" y1="{h - bottom}" x2="{x:.1f}" y2="{h - bottom + 4}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">10^{e}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">AD budget (bytes, log scale)</text>')
    for i in range(5):
        v = tmax * i / 4
        y = py(v, tmax)
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.1f}</text>')
        fv = fmax * i / 4
        out.append(f'<text x="{w - right + 6}" y="{y + 4:.1f}" fill="{RED}">{fv:.1f}</text>')
    out.append(f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">'
               'time / time storing everything (same tier)</text>')
    out.append(f'<text x="{w - 10}" y="{h / 2}" transform="rotate(90 {w - 10} {h / 2})" '
               f'text-anchor="middle" fill="{RED}">recompute factor</text>')
    legend = []
    for (tier, rs), colour in zip(curves.items(), [BLUE, GREEN]):
        pts = " ".join(f"{px(b):.1f},{py(t, tmax):.1f}" for b, t, _ in rs)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for b, t, _ in rs:
            out.append(f'<circle cx="{px(b):.1f}" cy="{py(t, tmax):.1f}" r="3" fill="{colour}"/>')
        legend.append((colour, "", f"time, {'interpreter' if tier == 'interp' else 'native tier on'}"))
    # The recompute factor of the interpreter (the native tier's differs
    # only where its first run filled the budget).
    rs = curves["interp"]
    pts = " ".join(f"{px(b):.1f},{py(f, fmax):.1f}" for b, _, f in rs)
    out.append(f'<polyline points="{pts}" fill="none" stroke="{RED}" stroke-width="2" '
               'stroke-dasharray="5,3"/>')
    for b, _, f in rs:
        out.append(f'<circle cx="{px(b):.1f}" cy="{py(f, fmax):.1f}" r="3" fill="{RED}"/>')
    legend.append((RED, "5,3", "recompute factor (interpreter)"))
    lx, ly = w - right - 210, top + 12
    for i, (colour, dash, text) in enumerate(legend):
        y = ly + 16 * i
        out.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 24}" y2="{y}" stroke="{colour}" '
                   f'stroke-width="2" stroke-dasharray="{dash or "none"}"/>')
        out.append(f'<text x="{lx + 30}" y="{y + 4}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    exe = binary()
    curves = {}
    lines = ["tier,budget_bytes,grad_ns,recompute_factor,time_ratio"]
    for tier, flags in TIERS:
        base = bench(exe, None, flags)["grad_ns"]
        lines.append(f"{tier},none,{base:.0f},1.0000,1.00")
        print(f"{tier:>6} {'none':>10} {base / 1e6:9.2f} ms", flush=True)
        rows = []
        for b in budgets():
            r = bench(exe, b, flags)
            t, f = r["grad_ns"], r["recompute_factor"]
            rows.append((b, t / base, f))
            lines.append(f"{tier},{b},{t:.0f},{f:.4f},{t / base:.2f}")
            print(f"{tier:>6} {b:>10} {t / 1e6:9.2f} ms  x{t / base:6.2f}  factor {f:.3f}", flush=True)
        curves[tier] = rows
    with open(os.path.join(ROOT, "docs", "ckpt_curve.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(ROOT, "docs", "ckpt_curve.svg"), "w") as f:
        f.write(svg(curves))


if __name__ == "__main__":
    main()
