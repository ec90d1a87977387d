#!/usr/bin/env python3
"""advm's gradient against jax.jit(jax.grad(f)) on CPU, in one window.

The ADBench GMM objective (d=10, k=25, n=1000) and LSTM objective (l=2,
c=1024, b=14), written for advm in gmm.adl / lstm.adl beside this file and
for JAX below. For each: the same seeded inputs (written as JSON), advm's
gradient timed by the `grad_time` example of the native tier (both tiers,
the median over about 2 s of calls after a first, compiling call), JAX's by
the median over about 2 s of calls of the jitted gradient (after a first,
compiling call), the two values and gradients compared (relative 1e-9), and
the start-to-print time of `advm grad` on the GMM program (median of 20
runs of the release binary).

    python3 -m venv /work/venv-jax && /work/venv-jax/bin/pip install jax
    cargo build --release -p advm --bin advm
    cargo build --release -p advm-jit --example grad_time
    /work/venv-jax/bin/python scripts/jax/compare.py [TARGET_DIR]

TARGET_DIR defaults to $CARGO_TARGET_DIR, else target/. Without JAX only
the advm figures are printed.
"""

import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
ADVM = os.path.join(TARGET, "release", "advm")
GRAD_TIME = os.path.join(TARGET, "release", "examples", "grad_time")
WORK = os.path.join(TARGET, "jax-compare")

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:
    jax = None


def gmm_args(d, k, n, seed=2):
    r = random.Random(seed)
    t = d * (d + 1) // 2
    return [[r.gauss(0, 1) for _ in range(k)],
            [r.gauss(0, 1) for _ in range(k * d)],
            [r.gauss(0, 0.3) for _ in range(k * t)],
            [r.gauss(0, 1) for _ in range(n * d)],
            1.0, 0.0]


def lstm_args(l, c, b, seed=3):
    r = random.Random(seed)
    return [[r.gauss(0, 0.5) for _ in range(l * 8 * b)],
            [r.gauss(0, 0.5) for _ in range(3 * b)],
            [r.gauss(0, 0.5) for _ in range(2 * l * b)],
            [r.random() for _ in range(c * b)]]


def jax_gmm(d, k, n):
    t = d * (d + 1) // 2
    rows, cols = [], []
    for j in range(d):
        for r in range(j + 1, d):
            rows.append(r)
            cols.append(j)

    def f(alphas, means, icf, x, gamma, m):
        icf = icf.reshape(k, t)
        means = means.reshape(k, d)
        x = x.reshape(n, d)
        logq = icf[:, :d]
        qdiag = jnp.exp(logq)
        sumq = jnp.sum(logq, axis=1)
        L = jnp.zeros((k, d, d)).at[:, rows, cols].set(icf[:, d:])
        xc = x[:, None, :] - means[None, :, :]            # n k d
        qx = qdiag[None] * xc + jnp.einsum("kij,nkj->nki", L, xc)
        main = alphas[None] + sumq[None] - 0.5 * jnp.sum(qx * qx, axis=2)
        slse = jnp.sum(jax.scipy.special.logsumexp(main, axis=1))
        prior = jnp.sum(0.5 * gamma * gamma * (jnp.sum(qdiag * qdiag, axis=1)
                        + jnp.sum(icf[:, d:] ** 2, axis=1)) - m * sumq)
        cst = -0.5 * n * d * math.log(2.0 * 3.141592653589793)
        return cst + slse - n * jax.scipy.special.logsumexp(alphas) + prior

    return f, (0, 1, 2)


def jax_lstm(l, c, b):
    def f(main, extra, state, seq):
        main = main.reshape(l, 2, 4 * b)
        extra = extra.reshape(3, b)
        state = state.reshape(l, 2, b)
        seq = seq.reshape(c, b)

        def step(s, t):
            inp, gold = t
            x = inp * extra[0]
            hs = []
            for i in range(l):
                w, bias = main[i, 0], main[i, 1]
                h, ce = s[i, 0], s[i, 1]
                g = jnp.concatenate([x, h, x, h]) * w + bias
                fo = jax.nn.sigmoid(g[:b])
                ig = jax.nn.sigmoid(g[b:2 * b])
                og = jax.nn.sigmoid(g[2 * b:3 * b])
                ch = jnp.tanh(g[3 * b:])
                ce = ce * fo + ig * ch
                h = og * jnp.tanh(ce)
                hs.append(jnp.stack([h, ce]))
                x = h
            y = x * extra[1] + extra[2]
            yn = y - jnp.log(jnp.sum(jnp.exp(y)) + 2.0)
            return jnp.stack(hs), jnp.sum(gold * yn)

        _, totals = jax.lax.scan(step, state, (seq[:-1], seq[1:]))
        return -jnp.sum(totals) / ((c - 1) * b)

    return f, (0, 1)


def time_jax(f, argnums, args):
    g = jax.jit(jax.value_and_grad(f, argnums=argnums))
    a = [jnp.asarray(x) for x in args]
    t0 = time.perf_counter()
    v, gr = g(*a)
    jax.block_until_ready(gr)
    first = time.perf_counter() - t0
    samples = []
    start = time.perf_counter()
    while len(samples) < 5 or time.perf_counter() - start < 2.0:
        t = time.perf_counter()
        v, gr = g(*a)
        jax.block_until_ready(gr)
        samples.append(time.perf_counter() - t)
    flat = [float(x) for part in gr for x in jnp.ravel(part)]
    return first, statistics.median(samples), float(v), flat


def advm_grad_json(src, fn, args_file, wrt_names):
    out = subprocess.run([ADVM, "grad", src, "--fn", fn, "--args-file", args_file,
                          "--wrt", wrt_names, "--json"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    flat = []
    for g in j["grad"]:
        if isinstance(g, list):
            flat.extend(g)
        elif isinstance(g, (int, float)):
            flat.append(g)
    return j["value"], flat


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def start_to_print(src, fn, args_file, wrt_names, runs=20):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([ADVM, "grad", src, "--fn", fn, "--args-file", args_file,
                        "--wrt", wrt_names], check=True, capture_output=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), min(ts)


def main():
    os.makedirs(WORK, exist_ok=True)
    print("load average:", open("/proc/loadavg").read().split()[:3])
    cases = [
        ("gmm", "gmm.adl", gmm_args(10, 25, 1000), "0,1,2", "alphas,means,icf",
         jax_gmm(10, 25, 1000) if jax else None, "d=10, k=25, n=1000"),
        ("lstm", "lstm.adl", lstm_args(2, 1024, 14), "0,1", "main,extra",
         jax_lstm(2, 1024, 14) if jax else None, "l=2, c=1024, b=14"),
    ]
    for name, adl, args, wrt_idx, wrt_names, jf, size in cases:
        src = os.path.join(HERE, adl)
        args_file = os.path.join(WORK, name + ".json")
        with open(args_file, "w") as fh:
            json.dump(args, fh)
        adasm = os.path.join(WORK, name + ".adasm")
        with open(adasm, "w") as fh:
            fh.write(subprocess.run([ADVM, "disasm", src, "--ir"], check=True,
                                    capture_output=True, text=True).stdout)
        print(f"== {name} ({size})")
        v_cli, g_cli = advm_grad_json(src, name, args_file, wrt_names)
        out = subprocess.run([GRAD_TIME, adasm, name, args_file, wrt_idx, "2000"],
                             check=True, capture_output=True, text=True).stdout
        print(out, end="")
        if jf is not None:
            f, argnums = jf
            first, med, v, g = time_jax(f, argnums, args)
            ok = close(v, v_cli) and len(g) == len(g_cli) and all(
                close(a, b) for a, b in zip(g, g_cli))
            worst = max((abs(a - b) / max(1.0, abs(a), abs(b)) for a, b in zip(g, g_cli)),
                        default=0.0)
            print(f"jax: first call {first * 1e3:.1f} ms, median {med * 1e3:.3f} ms, "
                  f"value {v:.17e}; advm and JAX agree: {ok} "
                  f"(value {v_cli:.17e}, largest relative gradient difference {worst:.1e})")
        if name == "gmm":
            med, best = start_to_print(src, name, args_file, wrt_names)
            print(f"advm grad start to print: median {med * 1e3:.1f} ms, best {best * 1e3:.1f} ms "
                  "(20 runs)")
    print("load average:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
