#!/usr/bin/env python3
"""Independent reference values for the corpus's `; run:` and `; grad:`
directives: each program re-implemented directly in Python, with
derivatives from forward-mode dual numbers (not from advm). Run it and
compare its output with the directives in programs/*.adasm."""
import math


class D:
    """Dual number a + b eps; `d` is a tuple of partial derivatives."""

    def __init__(self, v, d):
        self.v, self.d = v, tuple(d)

    def _c(o, n):
        return o if isinstance(o, D) else D(o, (0.0,) * n)

    def __add__(s, o):
        o = D._c(o, len(s.d)); return D(s.v + o.v, [a + b for a, b in zip(s.d, o.d)])
    __radd__ = __add__

    def __sub__(s, o):
        o = D._c(o, len(s.d)); return D(s.v - o.v, [a - b for a, b in zip(s.d, o.d)])

    def __rsub__(s, o):
        return D._c(o, len(s.d)) - s

    def __mul__(s, o):
        o = D._c(o, len(s.d)); return D(s.v * o.v, [a * o.v + s.v * b for a, b in zip(s.d, o.d)])
    __rmul__ = __mul__

    def __truediv__(s, o):
        o = D._c(o, len(s.d))
        return D(s.v / o.v, [(a * o.v - s.v * b) / (o.v * o.v) for a, b in zip(s.d, o.d)])

    def __neg__(s):
        return D(-s.v, [-a for a in s.d])


def f1(fn, df, x):
    return D(fn(x.v), [df(x.v) * a for a in x.d])


def sin(x): return f1(math.sin, math.cos, x)
def exp(x): return f1(math.exp, math.exp, x)
def log(x): return f1(math.log, lambda v: 1 / v, x)
def sqrt(x): return f1(math.sqrt, lambda v: 0.5 / math.sqrt(v), x)
def tanh(x): return f1(math.tanh, lambda v: 1 - math.tanh(v) ** 2, x)


def var(vals):
    n = len(vals)
    return [D(v, [1.0 if i == j else 0.0 for j in range(n)]) for i, v in enumerate(vals)]


def show(name, y):
    print(f"{name}: value {y.v!r} grad {[g for g in y.d]!r}")


def fib(x, n):
    a, b = x, D(1.0, [0.0])
    for _ in range(n):
        a, b = b, a + b
    return a


def series(x, n):
    s, p = D(0.0, [0.0]), D(1.0, [0.0])
    for _ in range(n):
        s, p = s + p, p * x
    return s


def piece(x):
    if x.v < -1:
        return -(x * x)
    if x.v >= 1:
        return exp(x - 1.0)
    return sin(x)


def helper(x, y):
    sq = lambda u: u * u
    return sq(x) + sq(y) + sq(x * y)


def inplace(x, y):
    a0 = x * y
    return a0 + x * x


def array_param(v, s):
    return sum((e * s) * (e * s) for e in v)


def array_build(x, n):
    p, acc = D(1.0, [0.0]), D(0.0, [0.0])
    for k in range(n):
        acc = acc + (k + 1) * p
        p = p * x
    return acc


def smm(x, y):
    hi = y if y.v > x.v else x
    lo = y if y.v < x.v else x
    d = x - y
    ad = d if d.v > 0 else (-d if d.v < 0 else d * 0.0)
    s = x if x.v < 0 else y
    return hi + lo * 2.0 + ad + s


def multi_ret(x):
    if x.v > 4:
        return sqrt(x)
    if x.v > 1:
        return log(x)
    return tanh(x)


def horner(c, x):
    acc = D(0.0, [0.0] * len(x.d))
    for ci in c:
        acc = acc * x + ci
    return acc


def nsqrt(a):
    y = a
    for _ in range(8):
        y = (y + a / y) / 2.0
    return y


def conversions(x):
    k = int(x.v * 10.0)
    k = min(max(k, -5), 5)
    return x * float(k) + float(-k)


def main():
    x, = var([1.0]); show("fib(1.0, 10)", fib(x, 10))
    x, = var([0.5]); show("fib(0.5, 10)", fib(x, 10))
    x, = var([0.5]); show("series(0.5, 6)", series(x, 6))
    for v in (-2.0, 0.5, 2.0):
        x, = var([v]); show(f"piece({v})", piece(x))
    x, y = var([2.0, 3.0]); show("helper(2, 3)", helper(x, y))
    x, y = var([2.0, 3.0]); show("array_inplace(2, 3)", inplace(x, y))
    *v, s = var([1.0, 2.0, 3.0, 2.0]); show("array_param([1,2,3], 2)", array_param(v, s))
    x, = var([2.0]); show("array_build(2, 4)", array_build(x, 4))
    x, = var([3.0]); show("nograd(3): value", D(3.0 * 3.0 + 3.0, [3.0 + 1.0]))
    x, y = var([1.0, 3.0]); show("smm(1, 3)", smm(x, y))
    x, y = var([-2.0, 1.0]); show("smm(-2, 1)", smm(x, y))
    for v in (9.0, 2.0):
        x, = var([v]); show(f"multi_ret({v})", multi_ret(x))
    *c, x = var([1.0, -2.0, 3.0, 2.0]); show("horner([1,-2,3], 2)", horner(c, x))
    a, = var([4.0]); show("nsqrt(4)", nsqrt(a))
    x, = var([0.34]); show("conversions(0.34)", conversions(x))
    x, = var([-2.0]); show("conversions(-2)", conversions(x))
    print("gcd(48,18)", math.gcd(48, 18), "gcd(17,5)", math.gcd(17, 5), "gcd(-12,8)", math.gcd(-12, 8))
    n, s = 27, 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1; s += 1
    print("collatz(27)", s)
    print("sincos(0.9)", math.sin(math.cos(0.9)), -math.cos(math.cos(0.9)) * math.sin(0.9))


main()


def grid(x, y, n, m):
    s = D(0.0, [0.0, 0.0])
    for i in range(n):
        for j in range(m):
            s = s + sin(x * float(i) + y * float(j))
    return s


def walk(x, n):
    v, s = x, D(0.0, [0.0])
    for _ in range(n):
        v = v * v if v.v > 0.5 else v + 0.3
        s = s + v
    return s


def grow(x, limit, n):
    r = D(1.0, [0.0, 0.0])
    for _ in range(n):
        r2 = r * x
        if r2.v > limit.v:
            return r2 * 2.0
        r = r2
    return r


def even(x, n):
    if n == 0:
        return x
    return odd(sin(x), n - 1)


def odd(x, n):
    if n == 0:
        return -x
    return even(x * x, n - 1)


def mathf(x, y):
    t = f1(math.tan, lambda v: 1 + math.tan(v) ** 2, x)
    p = D(x.v ** y.v, [y.v * x.v ** (y.v - 1) * a + x.v ** y.v * math.log(x.v) * b for a, b in zip(x.d, y.d)])
    c = f1(math.cos, lambda v: -math.sin(v), x)
    return t / 3.0 + exp(-x) + log(x + 1.0) + sqrt(x) + tanh(x) + c + p


def logsumexp(v):
    m = v[0]
    for e in v[1:]:
        m = e if e.v > m.v else m
    s = D(0.0, [0.0] * len(v[0].d))
    for e in v:
        s = s + exp(e - m)
    return m + log(s)


def branchy(v):
    s = D(0.0, [0.0] * len(v[0].d))
    for e in v:
        s = s + (e * e if e.v > 0 else e * 0.01)
    return s


def logreg(X, y, w, N, Dm):
    loss = D(0.0, [0.0] * len(w[0].d))
    for k in range(N):
        dot = D(0.0, [0.0] * len(w[0].d))
        for j in range(Dm):
            dot = dot + X[k * Dm + j] * w[j]
        loss = loss + log(exp(-(y[k] * dot)) + 1.0)
    return loss / float(N)


def mlp(x, W1, b1, W2, b2):
    H, Dm = len(b1), len(x)
    o = b2
    for i in range(H):
        acc = b1[i]
        for j in range(Dm):
            acc = acc + W1[i * Dm + j] * x[j]
        o = o + W2[i] * tanh(acc)
    return o * o


def more():
    x, y = var([0.3, 0.7]); show("grid(0.3, 0.7, 4, 5)", grid(x, y, 4, 5))
    x, = var([0.45]); show("walk(0.45, 7)", walk(x, 7))
    x, l = var([1.5, 10.0]); show("grow(1.5, 10.0, 20)", grow(x, l, 20))
    x, = var([0.8]); show("even(0.8, 5)", even(x, 5))
    x, y = var([0.7, 1.3]); show("math(0.7, 1.3)", mathf(x, y))
    v = var([0.5, -1.25, 2.0, 0.75]); show("logsumexp([0.5, -1.25, 2.0, 0.75])", logsumexp(v))
    v = var([0.5, -1.25, 2.0, -0.75]); show("branchy([0.5, -1.25, 2.0, -0.75])", branchy(v))
    allv = var([0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.1, -0.2])
    X = [D(a.v, [0.0, 0.0]) for a in allv[:6]]
    w = var([0.1, -0.2])
    show("logreg(X, [1,-1,1], [0.1,-0.2], 3, 2) wrt w", logreg(X, [1.0, -1.0, 1.0], w, 3, 2))
    allv = var([0.5, -1.0, 0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.01, 0.02, 0.03, 0.1, -0.2, 0.3, 0.05])
    x, W1, b1, W2, b2 = allv[0:2], allv[2:8], allv[8:11], allv[11:14], allv[14]
    show("mlp(...) wrt x, W1, b1, W2, b2", mlp(x, W1, b1, W2, b2))


more()
