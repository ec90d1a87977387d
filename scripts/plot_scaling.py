#!/usr/bin/env python3
"""Draw docs/pictures/scaling.svg from the scaling table of
docs/benchmarks.md (*Scaling: powloop gradient*): time of the gradient and
of the primal, and peak AD stack bytes, against n, on log-log axes.
Standard library only:

    python3 scripts/plot_scaling.py
"""
import math
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
OUT = os.path.join(ROOT, "docs", "pictures", "scaling.svg")

UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def seconds(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def table():
    """(n, bytes, grad seconds, primal seconds) rows of the scaling table."""
    text = open(DOC, encoding="utf-8").read()
    start = text.index("### Scaling: powloop gradient")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("###"):
            break
        m = re.match(r"\| 10\^(\d) \| ([\d ]+) \| [\d.]+ \| ([^|]+) \| [\d.]+ \| ([^|]+) \|", line)
        if m:
            rows.append((10 ** int(m.group(1)), int(m.group(2).replace(" ", "")),
                         seconds(m.group(3).strip()), seconds(m.group(4).strip())))
    if not rows:
        raise SystemExit("no scaling table found in docs/benchmarks.md")
    return rows


def plot(rows):
    w, h, left, right, top, bottom = 640, 400, 70, 170, 30, 50
    pw, ph = w - left - right, h - top - bottom
    ns = [r[0] for r in rows]
    xs = (math.log10(min(ns)), math.log10(max(ns)))
    ts = [t for r in rows for t in (r[2], r[3])]
    ys = (math.floor(math.log10(min(ts))), math.ceil(math.log10(max(ts))))

    def px(n):
        return left + (math.log10(n) - xs[0]) / (xs[1] - xs[0]) * pw

    def py(t):
        return top + ph - (math.log10(t) - ys[0]) / (ys[1] - ys[0]) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">powloop: time per call against n '
           f'(log-log; docs/benchmarks.md, Scaling)</text>']
    for e in range(int(xs[0]), int(xs[1]) + 1):
        x = px(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">10^{e}</text>')
    for e in range(ys[0], ys[1] + 1):
        y = py(10 ** e)
        label = {-9: "1 ns", -8: "10 ns", -7: "100 ns", -6: "1 µs", -5: "10 µs",
                 -4: "100 µs", -3: "1 ms", -2: "10 ms", -1: "100 ms", 0: "1 s"}.get(e, f"1e{e} s")
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">n (loop iterations)</text>')
    for idx, (name, color) in enumerate([("gradient", "#c0392b"), ("primal", "#2471a3")]):
        pts = " ".join(f"{px(r[0]):.1f},{py(r[2 + idx]):.1f}" for r in rows)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{px(r[0]):.1f}" cy="{py(r[2 + idx]):.1f}" r="3" fill="{color}"/>')
        ly = top + 20 + 22 * idx
        out.append(f'<line x1="{left + pw + 15}" y1="{ly}" x2="{left + pw + 40}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 46}" y="{ly + 4}">{name}</text>')
    per = rows[-1][1] / rows[-1][0]
    out.append(f'<text x="{left + pw + 15}" y="{top + 90}">AD stack:</text>')
    out.append(f'<text x="{left + pw + 15}" y="{top + 106}">{per:.2f} bytes</text>')
    out.append(f'<text x="{left + pw + 15}" y="{top + 122}">per iteration</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(plot(table()))
    print("wrote", os.path.relpath(OUT, ROOT))
