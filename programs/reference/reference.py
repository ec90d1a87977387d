#!/usr/bin/env python3
"""Independent reference values for the corpus's `; run:`, `; grad:`,
`; jvp:` and `; hvp:` directives.

Every program under programs/ is re-implemented here directly in Python
(standard library only), and derivatives come from forward-mode dual
numbers, never from advm: gradients from one dual component per scalar
input, directional derivatives (jvp) from one component seeded with the
direction, Hessian-vector products (hvp) from nested duals (duals whose
components are duals: the inner level carries the direction, the outer one
the unit vectors). Each value in a directive was copied from this script's
output (full precision, repr()).

    python3 reference.py            print the directive lines per program
    python3 reference.py --check    read every .adasm and .adl file (an .adl
                                    file computes what its .adasm twin
                                    beside it does) under programs/ and
                                    compare each run/grad/jvp/hvp/trap
                                    directive with this script's own
                                    computation; exit 1 on any mismatch, on
                                    a directive naming a function this
                                    script does not implement, or when a
                                    math function's nested-dual second
                                    derivative disagrees with differences of
                                    its first derivative

`repl/tests/it/corpus.rs` runs `--check`, so the directives cannot drift from
the reference. Semantics follow adasm.md §3: i64 division and remainder
truncate toward zero and trap on zero; `min`/`max` ties go to the first
operand; abs'(0) = 0; pow's b-cotangent is y ln(a) only where a > 0;
`ftoi` truncates and traps on nan or overflow; the call depth limit is the
VM's default, 100000 frames.
"""
import math
import os
import re
import sys

MAX_CALL_DEPTH = 100_000


class Trap(Exception):
    """A runtime trap of the VM (the test only checks that one happens)."""


# ---- dual numbers ------------------------------------------------------------


class D:
    """Dual number: value `v` and partial derivatives `d` (a tuple). The
    components are floats, or duals themselves (nested duals, for second
    derivatives: see `hessian_vector`); every operation and math function
    below works on both, recursively."""

    def __init__(self, v, d):
        self.v = v if isinstance(v, D) else float(v)
        self.d = tuple(d)

    def lift(self, o):
        return o if isinstance(o, D) else D(o, (0.0,) * len(self.d))

    def __add__(s, o):
        o = s.lift(o)
        return D(s.v + o.v, [a + b for a, b in zip(s.d, o.d)])

    def __radd__(s, o):
        return s.lift(o) + s

    def __sub__(s, o):
        o = s.lift(o)
        return D(s.v - o.v, [a - b for a, b in zip(s.d, o.d)])

    def __rsub__(s, o):
        return s.lift(o) - s

    def __mul__(s, o):
        o = s.lift(o)
        return D(s.v * o.v, [a * o.v + s.v * b for a, b in zip(s.d, o.d)])

    def __rmul__(s, o):
        return s.lift(o) * s

    def __truediv__(s, o):
        o = s.lift(o)
        return D(fdiv(s.v, o.v), [fdiv(a * o.v - s.v * b, o.v * o.v) for a, b in zip(s.d, o.d)])

    def __rtruediv__(s, o):
        return s.lift(o) / s

    def __neg__(s):
        return D(-s.v, [-a for a in s.d])

    # Comparisons look at the value only (they are not differentiable).
    def __lt__(s, o): return val(s) < val(o)
    def __le__(s, o): return val(s) <= val(o)
    def __gt__(s, o): return val(s) > val(o)
    def __ge__(s, o): return val(s) >= val(o)
    def __eq__(s, o): return val(s) == val(o)
    def __ne__(s, o): return val(s) != val(o)
    __hash__ = None


def val(x):
    """The plain float (or int, bool) value, through every level of nesting."""
    while isinstance(x, D):
        x = x.v
    return x


def is_zero(t):
    """A tangent that is exactly zero, at every level of nesting."""
    if isinstance(t, D):
        return is_zero(t.v) and all(is_zero(a) for a in t.d)
    return t == 0.0


def fdiv(a, b):
    """IEEE division (Python raises on division by zero); duals divide as
    duals."""
    if isinstance(a, D) or isinstance(b, D):
        return (a if isinstance(a, D) else b.lift(a)) / b
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def unary(f, df):
    """A math function: `f` on floats; on a dual, itself applied to the
    value and `df` (written with these same functions, so that it works on
    a dual value too: nested duals) times each partial."""
    def g(x):
        if isinstance(x, D):
            dv = df(x.v)
            return D(g(x.v), [dv * a for a in x.d])
        return f(x)
    return g


sin = unary(math.sin, lambda v: cos(v))
cos = unary(math.cos, lambda v: -sin(v))
tan = unary(math.tan, lambda v: 1.0 + tan(v) * tan(v))
exp = unary(math.exp, lambda v: exp(v))
log = unary(math.log, lambda v: fdiv(1.0, v))
sqrt = unary(math.sqrt, lambda v: fdiv(0.5, sqrt(v)))
tanh = unary(math.tanh, lambda v: 1.0 - tanh(v) * tanh(v))
fabs = unary(abs, lambda v: 1.0 if v > 0 else (-1.0 if v < 0 else 0.0))


# ---- adasm.md §7: more math ------------------------------------------------------
# Values from Python's math module (the C library, as Rust's f64 methods);
# derivatives from the textbook formulas, written here independently of advm.
# Where a formula divides by zero the IEEE value is used (inf), as advm's
# language reference documents.


def ieee(f):
    """f, but nan where Python raises ValueError (outside the domain) and
    inf where it raises OverflowError, as the C library answers."""
    def g(v):
        try:
            return f(v)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf
    return g


TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

erf = unary(math.erf, lambda v: TWO_OVER_SQRT_PI * exp(-v * v))
erfc = unary(math.erfc, lambda v: -TWO_OVER_SQRT_PI * exp(-v * v))
atan = unary(math.atan, lambda v: fdiv(1.0, 1.0 + v * v))
asin = unary(ieee(math.asin), lambda v: fdiv(1.0, fsqrt((1.0 - v) * (1.0 + v))))
acos = unary(ieee(math.acos), lambda v: -fdiv(1.0, fsqrt((1.0 - v) * (1.0 + v))))
sinh = unary(ieee(math.sinh), lambda v: cosh(v))
cosh = unary(ieee(math.cosh), lambda v: sinh(v))
log1p = unary(lambda v: -math.inf if v == -1.0 else ieee(math.log1p)(v),
              lambda v: fdiv(1.0, 1.0 + v))
iexp = unary(ieee(math.exp), lambda v: iexp(v))
expm1 = unary(ieee(math.expm1), lambda v: iexp(v))
log2 = unary(ieee(math.log2), lambda v: fdiv(1.0, v * math.log(2.0)))
log10 = unary(ieee(math.log10), lambda v: fdiv(1.0, v * math.log(10.0)))
cbrt = unary(math.cbrt, lambda v: fdiv(1.0, 3.0 * (cbrt(v) * cbrt(v))))
fsqrt = unary(ieee(math.sqrt), lambda v: fdiv(0.5, fsqrt(v)))


def _ln(v):
    """`log` with IEEE values at 0 (-inf) and below (nan)."""
    if v == 0.0:
        return -math.inf
    return ieee(math.log)(v)


flog = unary(_ln, lambda v: fdiv(1.0, v))


def binary(f, da, db):
    """A function of two f64 with partials da(a, b), db(a, b) (written with
    the functions of this file, so that they take duals too)."""
    def g(a, b):
        if not isinstance(a, D) and not isinstance(b, D):
            return f(a, b)
        n = len((a if isinstance(a, D) else b).d)
        a = a if isinstance(a, D) else D(a, (0.0,) * n)
        b = b if isinstance(b, D) else D(b, (0.0,) * n)
        pa, pb = da(a.v, b.v), db(a.v, b.v)
        return D(g(a.v, b.v), [pa * x + pb * y for x, y in zip(a.d, b.d)])
    return g


def _atan2_partials(a, b):
    """(∂/∂a, ∂/∂b) of atan2(a, b) = (b, -a)/(a² + b²), scaled so that
    1e±200 does not overflow; 0 at the origin."""
    m = fmax(fabs(a), fabs(b))
    if m == 0.0:
        return 0.0, 0.0
    sa, sb = fdiv(a, m), fdiv(b, m)
    r = (sa * sa + sb * sb) * m
    return fdiv(sb, r), -fdiv(sa, r)


def _hypot_partials(a, b):
    h = hypot(a, b)
    if h == 0.0:
        return 0.0, 0.0
    return fdiv(a, h), fdiv(b, h)


atan2 = binary(math.atan2, lambda a, b: _atan2_partials(a, b)[0],
               lambda a, b: _atan2_partials(a, b)[1])
hypot = binary(math.hypot, lambda a, b: _hypot_partials(a, b)[0],
               lambda a, b: _hypot_partials(a, b)[1])


def rust_round(v):
    """Rust's f64::round: half-way cases away from zero (Python's round()
    goes to even)."""
    if math.isinf(v) or math.isnan(v):
        return v
    a = abs(v)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1.0
    return math.copysign(r, v)


def flat(f):
    """A rounding function: derivative 0."""
    return unary(lambda v: float(f(v)) if math.isfinite(v) else v, lambda v: 0.0)


floor = flat(math.floor)
ceil = flat(math.ceil)
fround = unary(rust_round, lambda v: 0.0)
trunc = flat(math.trunc)


def ipow(a, b):
    """IEEE pow (C99 Annex F) where Python's math.pow raises."""
    try:
        return math.pow(a, b)
    except ValueError:
        if a == 0.0 and b < 0:
            odd = b == math.floor(b) and int(b) % 2 == 1
            return math.copysign(math.inf, a) if odd else math.inf
        return math.nan  # a < 0 and b not an integer
    except OverflowError:
        return math.inf


def fpow(a, b):
    if not isinstance(a, D) and not isinstance(b, D):
        return ipow(a, b)
    n = len((a if isinstance(a, D) else b).d)
    a = a if isinstance(a, D) else D(a, (0.0,) * n)
    b = b if isinstance(b, D) else D(b, (0.0,) * n)
    y = fpow(a.v, b.v)
    da = b.v * fpow(a.v, b.v - 1.0)
    db = y * flog(a.v) if a.v > 0 else 0.0
    # Each operand contributes only along the directions it depends on, as
    # the reverse rule adds to each operand's cotangent separately: an
    # infinite or nan partial times a zero tangent adds 0, not nan (so the
    # b-cotangent is 0 wherever a <= 0, even when y is infinite).
    def term(partial, tangent):
        return 0.0 if is_zero(tangent) else partial * tangent
    return D(y, [term(da, p) + term(db, q) for p, q in zip(a.d, b.d)])


def fmin(a, b):
    """`min a, b`: ties go to a."""
    return b if b < a else a


def fmax(a, b):
    """`max a, b`: ties go to a."""
    return b if b > a else a


def nograd(x):
    """A constant at every level of nesting."""
    return val(x)


def ftoi(x):
    x = val(x)
    if math.isnan(x) or math.isinf(x):
        raise Trap("ftoi")
    k = math.trunc(x)
    if not -(2 ** 63) <= k < 2 ** 63:
        raise Trap("ftoi")
    return k


def itof(k):
    return float(k)


def idiv(a, b):
    """i64 division, truncating toward zero."""
    if b == 0:
        raise Trap("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def irem(a, b):
    """i64 remainder with the sign of a (Rust's `%`)."""
    if b == 0:
        raise Trap("integer remainder by zero")
    return a - b * idiv(a, b)


def anew(n):
    if n < 0:
        raise Trap("negative length")
    return [0.0] * n


def aget(a, i):
    if not 0 <= i < len(a):
        raise Trap("out of bounds")
    return a[i]


def aset(a, i, x):
    if not 0 <= i < len(a):
        raise Trap("out of bounds")
    a[i] = x


def depth(n):
    if n > MAX_CALL_DEPTH:
        raise Trap("call depth")


# ---- the programs, one function per adasm function -----------------------------
# Each mirrors the adasm text operation by operation, in the same order, so
# that values agree to the last bit and gradients to rounding.


def array_build_f(x, n):
    a = anew(n)
    p, k = 1.0, 0
    while k < n:
        aset(a, k, p)
        p = p * x
        k += 1
    s = 0.0
    for j in range(len(a)):
        s = s + itof(j + 1) * aget(a, j)
    return s


def array_return_powers(x, n):
    a = anew(n)
    p, k = 1.0, 0
    while k < n:
        aset(a, k, p)
        p = p * x
        k += 1
    return a


def array_return_f(x, n):
    a = array_return_powers(x, n)
    s = 0.0
    for j in range(len(a)):
        s = s + itof(j + 1) * aget(a, j)
    return s


def array_inplace_f(x, y):
    a = anew(2)
    aset(a, 0, x)
    aset(a, 1, x)
    aset(a, 0, aget(a, 0) * y)
    return aget(a, 0) + aget(a, 1) * x


def array_param_f(v, s):
    v = list(v)  # the caller's array is scaled in place; ours is a copy
    for i in range(len(v)):
        aset(v, i, aget(v, i) * s)
    acc = 0.0
    for j in range(len(v)):
        x = aget(v, j)
        acc = acc + x * x
    return acc


def array_reread_overwrite(v, s):
    v = list(v)  # the caller's array is overwritten in place; ours is a copy
    acc = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        aset(v, i, x * s)
        acc = acc + x * x
    return acc


def array_reread_clear(w):
    for i in range(len(w)):
        aset(w, i, 0.0)
    return len(w)


def array_reread_weighted(v):
    w = anew(len(v))
    for i in range(len(v)):
        aset(w, i, itof(i) + 1.0)
    acc = 0.0
    for j in range(len(v)):
        x = aget(v, j)
        acc = acc + x * aget(w, j) * x
    array_reread_clear(w)
    return acc


def array_reread_pair(v, w):
    acc = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        aset(w, i, x * 3.0)
        acc = acc + x * x
    return acc


def array_reread_same(v):
    v = list(v)  # the caller's array is overwritten in place; ours is a copy
    return array_reread_pair(v, v)


def array_reread_scaled(v):
    w = anew(len(v))
    acc = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        aset(w, i, x * 3.0)
        acc = acc + x * x
    return acc


def array_sum_sum(v):
    s = 0.0
    for i in range(len(v)):
        s = s + aget(v, i)
    return s


def array_sum_dot(v, w):
    s = 0.0
    for i in range(fmin(len(v), len(w))):
        s = s + aget(v, i) * aget(w, i)
    return s


def bool_logic_f(a, b, x, y):
    l = a and not b
    r1 = x >= y and x != 0.0
    r2 = x <= y and x == y
    return l or (r1 or r2)


def branch_in_loop_walk(x, n):
    v, s, k = x, 0.0, 0
    while k < n:
        v = v * v if v > 0.5 else v + 0.3
        s = s + v
        k += 1
    return s


def collatz(n):
    if n <= 0:
        return idiv(n, 0)
    x, s = n, 0
    while x != 1:
        x = idiv(x, 2) if irem(x, 2) == 0 else x * 3 + 1
        s += 1
    return s


def conversions_f(x):
    k = ftoi(x * 10.0)
    k2 = fmin(fmax(k, -5), 5)
    return itof(k2) * x + itof(-k2)


def early_ret_grow(x, limit, n):
    r, k = 1.0, 0
    while k < n:
        r2 = r * x
        if r2 > limit:
            return r2 * 2.0
        r, k = r2, k + 1
    return r


def fib(x, n):
    a, b, k = x, 1.0, 0
    while k < n:
        a, b, k = b, a + b, k + 1
    return a


def gcd(a, b):
    if b == 0:
        return irem(a, b)
    x, y = a, b
    while y != 0:
        x, y = y, irem(x, y)
    return -x if x < 0 else x


def sq(u):
    return u * u


def helper_f(x, y):
    return (sq(x) + sq(y)) + sq(x * y)


def horner(c, x):
    acc = 0.0
    for i in range(len(c)):
        acc = acc * x + aget(c, i)
    return acc


def invariants_rows(a, x, n, b):
    s = 0.0
    for i in range(n):
        w = i * b
        s2 = s
        for j in range(b):
            k = w + (b * 2 + 1) + j
            idiv(n, b)
            e = aget(a, k)
            s2 = s2 + e * e * x
        s = s2
    return s


def logsumexp_amax(v):
    m = aget(v, 0)
    for i in range(1, len(v)):
        m = fmax(m, aget(v, i))
    return m


def logsumexp_lse(v):
    m = logsumexp_amax(v)
    s = 0.0
    for i in range(len(v)):
        s = s + exp(aget(v, i) - m)
    return m + log(s)


def math_f(x, y):
    r = tan(x) / 3.0 + exp(-x)
    r = r + log(x + 1.0)
    r = r + sqrt(x)
    r = r + tanh(x)
    r = r + cos(x)
    return r + fpow(x, y)


def multi_ret_f(x):
    if x > 4.0:
        return sqrt(x)
    if x > 1.0:
        return log(x)
    return tanh(x)


def mutual_even(x, n):
    if n == 0:
        return x
    return mutual_odd(sin(x), n - 1)


def mutual_odd(x, n):
    if n == 0:
        return -x
    return mutual_even(x * x, n - 1)


def nested_grid(x, y, n, m):
    s = 0.0
    for i in range(n):
        xi = x * itof(i)
        for j in range(m):
            s = s + sin(xi + y * itof(j))
    return s


def newton_nsqrt(a):
    y = a
    for _ in range(8):
        y = (y + a / y) / 2.0
    return y


def nograd_f(x):
    return x * nograd(x) + x  # the last term is `copy %x`


def pow_rules_p(a, b):
    return fpow(a, b)


def powloop(x, n):
    r, k = 1.0, n
    while k > 0:
        r, k = r * x, k - 1
    return r


def rec(x, n):
    depth(n + 1)
    r = x
    for _ in range(n):
        r = x * sin(r)
    return r


def select_minmax_abs_f(x, y):
    hi = fmax(x, y)
    lo = fmin(x, y)
    ad = fabs(x - y)
    s = x if x < 0.0 else y
    return ((hi + lo * 2.0) + ad) + s


def series(x, n):
    s, p, k = 0.0, 1.0, 0
    while k < n:
        s, p, k = s + p, p * x, k + 1
    return s


def sincos(x, y):
    return sin(x) * cos(y) + cos(sin(x * y))


def piece(x):
    if x < -1.0:
        return -(x * x)
    if x >= 1.0:
        return exp(x - 1.0)
    return sin(x)


def traps_pick(v, i):
    x = aget(v, i)
    return x * x


def traps_put(i):
    aset(anew(2), i, 1.0)
    return 0.0


def traps_neg(n):
    anew(n)
    return 0.0


# Benchmark-suite programs (programs/bench/).


def bench_sincos(x):
    return sin(cos(x))


def branchy(v):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        s = s + (x * x if x > 0.0 else x * 0.01)
    return s


def bench_logsumexp(v):
    m = aget(v, 0)
    for i in range(1, len(v)):
        m = fmax(m, aget(v, i))
    s = 0.0
    for j in range(len(v)):
        s = s + exp(aget(v, j) - m)
    return m + log(s)


def logreg(X, y, w, N, Dm):
    loss = 0.0
    for k in range(N):
        dot = 0.0
        for j in range(Dm):
            dot = dot + aget(X, k * Dm + j) * aget(w, j)
        loss = loss + log(exp(-(aget(y, k) * dot)) + 1.0)
    return loss / itof(N)


def mlp(x, W1, b1, W2, b2):
    H, Dm = len(b1), len(x)
    o = b2
    for i in range(H):
        acc = aget(b1, i)
        for j in range(Dm):
            acc = acc + aget(W1, i * Dm + j) * aget(x, j)
        o = o + aget(W2, i) * tanh(acc)
    return o * o


def math_inverse_atan(x):
    return atan(x)


def math_inverse_asin(x):
    return asin(x)


def math_inverse_acos(x):
    return acos(x)


def math_inverse_angle(y, x):
    return atan2(y, x) * 2.0


def math_hyperbolic_sinh(x):
    return sinh(x)


def math_hyperbolic_cosh(x):
    return cosh(x)


def math_logs_log1p(x):
    return log1p(x)


def math_logs_expm1(x):
    return expm1(x)


def math_logs_log2(x):
    return log2(x)


def math_logs_log10(x):
    return log10(x)


def math_logs_cbrt(x):
    return cbrt(x)


def math_erf_erf(x):
    return erf(x)


def math_erf_erfc(x):
    return erfc(x)


def math_hypot_norm(x, y):
    return hypot(x, y) * 3.0


def math_rounding_steps(x):
    return ((floor(x) + ceil(x)) + (fround(x) + trunc(x))) + x


def where_sqrt(x):
    s = fsqrt(x)
    return s if x > 0.0 else x


def where_log(x):
    lg = flog(x)
    return lg if x > 0.0 else x


def where_div(x, z):
    q = fdiv_d(z, x)
    t = q * z
    return t if val(x) != 0.0 else z


def where_asin(x):
    a = asin(x)
    return a if fabs(x) < 1.0 else x


def where_min(x):
    s = fsqrt(x)
    return fmin(x, s)


def where_pow(x):
    p = fpow(x, 0.5)
    return p if x > 0.0 else x * 3.0


def fdiv_d(a, b):
    """Division of duals with IEEE values where b is 0."""
    return a / b


def no_result_scale(a, c):
    for i in range(len(a)):
        aset(a, i, aget(a, i) * c)


def no_result_fill(c):
    a = anew(3)
    aset(a, 0, c)
    no_result_scale(a, c)


def no_result_total(v, c):
    no_result_scale(v, c)
    s = 0.0
    for i in range(len(v)):
        s = s + aget(v, i)
    return s


# Custom rules: each function with a rule is one primitive whose derivative
# is the rule's closed form (as the rule says; the programs compute the
# value another way: Newton steps, a stable formula, a loop).
def _sigmoid_value(v):
    e = math.exp(-abs(v))
    return 1.0 / (1.0 + e) if v >= 0.0 else e / (1.0 + e)


sigmoid = unary(_sigmoid_value, lambda v: sigmoid(v) * (1.0 - sigmoid(v)))
softplus = unary(lambda v: max(v, 0.0) + math.log1p(math.exp(-abs(v))),
                 lambda v: sigmoid(v))


def rule_cbrt_cbrt(x):
    return cbrt(x)


def rule_cbrt_wave(x, a):
    return sin(cbrt(x) * a)


def rule_softplus_softplus(x):
    return softplus(x)


def rule_norm_sumsq(v):
    s = 0.0
    for i in range(len(v)):
        s = s + aget(v, i) * aget(v, i)
    return s


def rule_norm_energy(v, s):
    q = rule_norm_sumsq(v)
    return (s * sqrt(q) + q) + s * s


def rule_norm_mass(v, s):
    w = [s * aget(v, i) for i in range(len(v))]
    return rule_norm_sumsq(w)


def conditionals_clip(v, lo):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        s = s + (x * x if x > lo else lo * x)
    return s


def conditionals_ramp(v):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        t = x * 0.5 if x < 0.0 else x
        s = s + t * t
    return s


def conditionals_ramp_else(v):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        t = x if x >= 0.0 else x * 0.5
        s = s + t * t
    return s


def conditionals_nested(v):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        if x > 0.0:
            t = x * x if x > 1.0 else x
        else:
            t = x * 0.1
        s = s + t
    return s


def conditionals_overflow(x):
    if x > 1e100:
        return x
    y = x * x
    return y * y


def conditionals_tally(v):
    s, k, seen = 0.0, 0, False
    for i in range(len(v)):
        x = aget(v, i)
        if x > 0.0:
            k += 1
            seen = True
            s = s + x * x
        else:
            s = s + 0.0
    return s * itof(k) + (1.0 if seen else 0.0)


def conditionals_costly(v):
    s = 0.0
    for i in range(len(v)):
        x = aget(v, i)
        s = s + (exp(x) if x > 0.0 else x)
    return s


# (file relative to programs/, function name) -> implementation.
PROGRAMS = {
    ("array_build.adasm", "f"): array_build_f,
    ("array_inplace.adasm", "f"): array_inplace_f,
    ("array_param.adasm", "f"): array_param_f,
    ("array_reread.adasm", "overwrite"): array_reread_overwrite,
    ("array_reread.adasm", "clear"): array_reread_clear,
    ("array_reread.adasm", "weighted"): array_reread_weighted,
    ("array_reread.adasm", "pair"): array_reread_pair,
    ("array_reread.adasm", "same"): array_reread_same,
    ("array_reread.adasm", "scaled"): array_reread_scaled,
    ("array_return.adasm", "f"): array_return_f,
    ("array_return.adasm", "powers"): array_return_powers,
    ("array_sum.adasm", "sum"): array_sum_sum,
    ("array_sum.adasm", "dot"): array_sum_dot,
    ("bool_logic.adasm", "f"): bool_logic_f,
    ("branch_in_loop.adasm", "walk"): branch_in_loop_walk,
    ("collatz.adasm", "collatz"): collatz,
    ("conditionals.adasm", "clip"): conditionals_clip,
    ("conditionals.adasm", "ramp"): conditionals_ramp,
    ("conditionals.adasm", "ramp_else"): conditionals_ramp_else,
    ("conditionals.adasm", "nested"): conditionals_nested,
    ("conditionals.adasm", "overflow"): conditionals_overflow,
    ("conditionals.adasm", "tally"): conditionals_tally,
    ("conditionals.adasm", "costly"): conditionals_costly,
    ("conversions.adasm", "f"): conversions_f,
    ("early_ret.adasm", "grow"): early_ret_grow,
    ("fib_swap.adasm", "fib"): fib,
    ("gcd.adasm", "gcd"): gcd,
    ("helper_calls.adasm", "f"): helper_f,
    ("horner.adasm", "horner"): horner,
    ("invariants.adasm", "rows"): invariants_rows,
    ("logsumexp.adasm", "lse"): logsumexp_lse,
    ("logsumexp.adasm", "amax"): logsumexp_amax,
    ("math.adasm", "f"): math_f,
    ("multi_ret.adasm", "f"): multi_ret_f,
    ("mutual.adasm", "even"): mutual_even,
    ("mutual.adasm", "odd"): mutual_odd,
    ("nested_loops.adasm", "grid"): nested_grid,
    ("newton_sqrt.adasm", "nsqrt"): newton_nsqrt,
    ("nograd.adasm", "f"): nograd_f,
    ("pow_rules.adasm", "p"): pow_rules_p,
    ("powloop.adasm", "pow"): powloop,
    ("recursion.adasm", "rec"): rec,
    ("select_minmax_abs.adasm", "f"): select_minmax_abs_f,
    ("several_phis.adasm", "series"): series,
    ("sincos.adasm", "sincos"): sincos,
    ("three_way.adasm", "piece"): piece,
    ("traps.adasm", "pick"): traps_pick,
    ("traps.adasm", "put"): traps_put,
    ("traps.adasm", "neg"): traps_neg,
    ("math_inverse.adasm", "atan"): math_inverse_atan,
    ("math_inverse.adasm", "asin"): math_inverse_asin,
    ("math_inverse.adasm", "acos"): math_inverse_acos,
    ("math_inverse.adasm", "angle"): math_inverse_angle,
    ("math_hyperbolic.adasm", "sinh"): math_hyperbolic_sinh,
    ("math_hyperbolic.adasm", "cosh"): math_hyperbolic_cosh,
    ("math_logs.adasm", "log1p"): math_logs_log1p,
    ("math_logs.adasm", "expm1"): math_logs_expm1,
    ("math_logs.adasm", "log2"): math_logs_log2,
    ("math_logs.adasm", "log10"): math_logs_log10,
    ("math_logs.adasm", "cbrt"): math_logs_cbrt,
    ("math_erf.adasm", "erf"): math_erf_erf,
    ("math_erf.adasm", "erfc"): math_erf_erfc,
    ("math_hypot.adasm", "norm"): math_hypot_norm,
    ("math_rounding.adasm", "steps"): math_rounding_steps,
    ("no_result.adasm", "fill"): no_result_fill,
    ("no_result.adasm", "total"): no_result_total,
    ("where.adasm", "sqrt_where"): where_sqrt,
    ("where.adasm", "log_where"): where_log,
    ("where.adasm", "div_where"): where_div,
    ("where.adasm", "asin_where"): where_asin,
    ("where.adasm", "min_where"): where_min,
    ("where.adasm", "pow_where"): where_pow,
    ("rule_cbrt.adasm", "cbrt"): rule_cbrt_cbrt,
    ("rule_cbrt.adasm", "wave"): rule_cbrt_wave,
    ("rule_softplus.adasm", "softplus"): rule_softplus_softplus,
    ("rule_norm.adasm", "sumsq"): rule_norm_sumsq,
    ("rule_norm.adasm", "energy"): rule_norm_energy,
    ("rule_norm.adasm", "mass"): rule_norm_mass,
    ("bench/branchy.adasm", "branchy"): branchy,
    ("bench/logreg.adasm", "logreg"): logreg,
    ("bench/logsumexp.adasm", "logsumexp"): bench_logsumexp,
    ("bench/mlp.adasm", "mlp"): mlp,
    ("bench/powloop.adasm", "pow"): powloop,
    ("bench/recursion.adasm", "rec"): rec,
    ("bench/sincos.adasm", "sincos"): bench_sincos,
}


# ---- evaluation ----------------------------------------------------------------


def is_float(a):
    return isinstance(a, float)


def gradient(f, args):
    """Value and gradient of f at args: f64 and f64[] arguments are seeded
    (one unit direction per scalar); i64/bool get None."""
    n = sum(1 if is_float(a) else len(a) if isinstance(a, list) else 0 for a in args)
    seeds, k = [], 0

    def unit():
        nonlocal k
        d = [0.0] * n
        d[k] = 1.0
        k += 1
        return d

    for a in args:
        if is_float(a):
            seeds.append(D(a, unit()))
        elif isinstance(a, list):
            seeds.append([D(x, unit()) for x in a])
        else:
            seeds.append(a)
    y = f(*seeds)
    d = y.d if isinstance(y, D) else (0.0,) * n
    grads, k = [], 0
    for a in args:
        if is_float(a):
            grads.append(d[k])
            k += 1
        elif isinstance(a, list):
            grads.append(list(d[k:k + len(a)]))
            k += len(a)
        else:
            grads.append(None)
    return val(y), grads


def jacobian_vector(f, args, dirs):
    """Value and directional derivative of f at args along dirs (one entry
    per argument: a float per f64, a list per f64[], None for i64/bool or a
    zero direction): one pass of single-level duals seeded with the
    direction. The tangent is a float for an f64 result, a list for an
    f64[] result."""
    seeds = []
    for a, t in zip(args, dirs):
        if is_float(a):
            seeds.append(D(a, (0.0 if t is None else float(t),)))
        elif isinstance(a, list):
            ts = [0.0] * len(a) if t is None else [float(x) for x in t]
            if len(ts) != len(a):
                raise ValueError(f"direction of length {len(ts)} for an array of {len(a)}")
            seeds.append([D(x, (u,)) for x, u in zip(a, ts)])
        else:
            seeds.append(a)
    y = f(*seeds)

    def tangent(x):
        return x.d[0] if isinstance(x, D) else 0.0
    if isinstance(y, list):
        return [val(x) for x in y], [tangent(x) for x in y]
    return val(y), tangent(y)


def hessian_vector(f, args, dirs):
    """Value, gradient and Hessian-vector product H·dirs of f at args, from
    nested duals (duals whose components are duals): each scalar input x_i
    is D(D(x_i, [dir_i]), [D(e_i[j], [0]) for each j]) -- the inner level
    carries the direction, the outer one the unit vectors -- so that the
    result's outer partial j is D(∂f/∂x_j, [(H·dir)_j]). Shaped like
    `gradient`: None for i64/bool arguments."""
    n = sum(1 if is_float(a) else len(a) if isinstance(a, list) else 0 for a in args)
    seeds, k = [], 0

    def seed(x, t):
        nonlocal k
        d = [D(1.0 if j == k else 0.0, (0.0,)) for j in range(n)]
        k += 1
        return D(D(x, (t,)), d)

    for a, t in zip(args, dirs):
        if is_float(a):
            seeds.append(seed(a, 0.0 if t is None else float(t)))
        elif isinstance(a, list):
            ts = [0.0] * len(a) if t is None else [float(x) for x in t]
            if len(ts) != len(a):
                raise ValueError(f"direction of length {len(ts)} for an array of {len(a)}")
            seeds.append([seed(x, u) for x, u in zip(a, ts)])
        else:
            seeds.append(a)
    y = f(*seeds)
    zero = D(0.0, (0.0,))
    outer = y.d if isinstance(y, D) else (zero,) * n
    lift = [p if isinstance(p, D) else D(p, (0.0,)) for p in outer]
    grad = [val(p) for p in lift]
    hv = [val(p.d[0]) for p in lift]
    grads, hvps, k = [], [], 0
    for a in args:
        if is_float(a):
            grads.append(grad[k])
            hvps.append(hv[k])
            k += 1
        elif isinstance(a, list):
            grads.append(grad[k:k + len(a)])
            hvps.append(hv[k:k + len(a)])
            k += len(a)
        else:
            grads.append(None)
            hvps.append(None)
    return val(y), grads, hvps


# ---- the directive syntax (assembler::parse_call literals) ------------------------

TOKEN = re.compile(r"\s*(?:(\[)|(\])|(,)|(true|false)|(-?inf|nan)|"
                   r"(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))")


def parse_literals(text):
    """`1.0, 2, [1.0, 2.0], true, nan` -> Python values (int for integer
    literals, float otherwise)."""
    pos, out, stack = 0, [], []
    cur = out
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"cannot read literal at `{text[pos:]}`")
        pos = m.end()
        lb, rb, comma, b, special, num = m.groups()
        if lb:
            stack.append(cur)
            cur.append([])
            cur = cur[-1]
        elif rb:
            cur = stack.pop()
        elif comma:
            pass
        elif b:
            cur.append(b == "true")
        elif special:
            cur.append(float(special))
        else:
            is_int = re.fullmatch(r"-?[0-9]+", num) is not None
            cur.append(int(num) if is_int else float(num))
    if stack:
        raise ValueError(f"unbalanced brackets in `{text}`")
    return out


def parse_call(text):
    m = re.fullmatch(r"\s*@?([A-Za-z0-9_.]+)\((.*)\)\s*", text)
    if not m:
        raise ValueError(f"not a call: `{text}`")
    args = parse_literals(m.group(2))
    # Arrays are f64[]: their integer literals are floats.
    return m.group(1), [[float(x) for x in a] if isinstance(a, list) else a for a in args]


def show_float(x):
    return repr(x)


def show_json(x):
    if x is None:
        return "null"
    if isinstance(x, list):
        return "[" + ", ".join(show_json(e) for e in x) + "]"
    if math.isnan(x):
        return '"nan"'
    if math.isinf(x):
        return '"inf"' if x > 0 else '"-inf"'
    return repr(x)


def show_value(v):
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(repr(x) for x in v) + "]"
    return repr(v)


def close(a, b, tol):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(b, float) and math.isnan(b):
        return False
    return a == b or abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def same_value(got, want):
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, int) and not isinstance(got, bool):
        return isinstance(want, int) and got == want
    if isinstance(got, list):
        return isinstance(want, list) and len(got) == len(want) and all(
            close(g, w, 1e-12) for g, w in zip(got, want))
    return isinstance(want, (int, float)) and close(got, float(want), 1e-12)


def same_grad_entry(got, want):
    if want == "_":
        return True
    if got is None or want is None:
        return got is None and want is None
    if isinstance(got, list):
        return isinstance(want, list) and len(got) == len(want) and all(
            same_grad_entry(g, w) for g, w in zip(got, want))
    if isinstance(want, str):
        want = float(want)
    return isinstance(want, (int, float)) and close(got, float(want), 1e-12)


def parse_json_grad(text):
    """The gradient list of a grad directive (JSON, with "inf"/"nan"/"_")."""
    import json
    return json.loads(text)


# ---- driver ------------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRECTIVE = re.compile(r"^(?:;|//) (run|grad|jvp|hvp|trap|check|check-fails): (.*)$")
DIR_CALL = re.compile(r"^(.*\))\s+dir\s+(\[.*\])\s*$")


def split_dir(call):
    """`@f(ARGS) dir [D, ...]` -> (`@f(ARGS)`, the JSON direction list)."""
    import json
    m = DIR_CALL.match(call.strip())
    if not m:
        raise ValueError(f"expected `@f(ARGS) dir [D, ...]`, found `{call.strip()}`")
    dirs = json.loads(m.group(2))
    if not isinstance(dirs, list):
        raise ValueError("the direction must be a JSON list")
    return m.group(1), dirs


def directional(rel, kind, call):
    """A jvp or hvp directive's call recomputed: (value, tangent or
    product, the call without its direction, the direction's text)."""
    call_text, dirs = split_dir(call)
    name, args, f = compute(rel, call_text)
    if len(dirs) != len(args):
        raise ValueError(f"{len(dirs)} direction entries for {len(args)} arguments")
    if kind == "jvp":
        v, t = jacobian_vector(f, args, dirs)
        return v, t
    v, _, hv = hessian_vector(f, args, dirs)
    return v, hv


def corpus_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if d != "reference")
        for name in sorted(filenames):
            if name.endswith(".adasm") or name.endswith(".adl"):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), path


def compute(rel, call):
    name, args = parse_call(call)
    # An `.adl` program computes what its `.adasm` twin beside it does.
    if rel.endswith(".adl"):
        rel = rel[: -len(".adl")] + ".adasm"
    f = PROGRAMS.get((rel, name))
    if f is None:
        raise KeyError(f"no reference implementation of @{name} in {rel}")
    return name, args, f


def check_directive(rel, kind, body):
    """None if the directive agrees with the reference, else a message."""
    if kind in ("check", "check-fails"):
        compute(rel, body)  # the function must at least be known
        return None
    call, _, rest = body.partition("=>")
    if kind in ("jvp", "hvp"):
        value_text, _, want_text = rest.partition(";")
        got_value, got = directional(rel, kind, call)
        want_value = parse_literals(value_text)
        want = parse_json_grad(want_text)
        if len(want_value) != 1 or not same_value(got_value, want_value[0]):
            return f"reference value {show_value(got_value)}, directive says {value_text.strip()}"
        if not same_grad_entry(got, want):
            what = "tangent" if kind == "jvp" else "Hessian-vector product"
            return f"reference {what} {show_json(got)}, directive says {want_text.strip()}"
        return None
    name, args, f = compute(rel, call)
    if kind == "trap":
        try:
            v = f(*args)
        except Trap:
            return None
        return f"the reference returns {show_value(v)}, not a trap"
    if kind == "run" and rest.strip() == "none":
        got = f(*args)
        return None if got is None else f"reference value {show_value(got)}, directive says none"
    if kind == "run":
        want = parse_literals(rest)
        if len(want) != 1:
            return f"expected one value after `=>`, found `{rest.strip()}`"
        got = f(*args)
        if not same_value(got, want[0]):
            return f"reference value {show_value(got)}, directive says {rest.strip()}"
        return None
    value_text, _, grad_text = rest.partition(";")
    want_value = parse_literals(value_text)
    want_grad = parse_json_grad(grad_text)
    got_value, got_grad = gradient(f, args)
    if len(want_value) != 1 or not same_value(got_value, want_value[0]):
        return f"reference value {show_float(got_value)}, directive says {value_text.strip()}"
    if not same_grad_entry(got_grad, want_grad):
        return f"reference gradient {show_json(got_grad)}, directive says {grad_text.strip()}"
    return None


# Each math function at points inside its domain, for `nested_duals_agree`
# (not nograd, whose derivative differences contradict on purpose, nor pow
# at a <= 0, whose b-partial is 0 by the rule above; the corpus has both).
UNARY_POINTS = [
    (sin, 0.7), (cos, 0.7), (tan, 0.4), (exp, 0.3), (log, 1.7), (sqrt, 2.5),
    (tanh, 0.6), (fabs, -1.3), (erf, 0.4), (erfc, -0.6), (atan, 1.2),
    (asin, 0.3), (acos, -0.4), (sinh, 0.8), (cosh, -0.9), (log1p, 0.5),
    (expm1, -0.7), (log2, 3.0), (log10, 0.2), (cbrt, -2.0), (fsqrt, 0.8),
    (flog, 2.2), (iexp, 1.1), (floor, 1.5), (ceil, 1.5), (fround, 1.2),
    (trunc, -1.7),
]
BINARY_POINTS = [
    (atan2, 0.6, -1.1), (hypot, -0.8, 1.3), (fpow, 1.7, 2.3), (fpow, 0.6, -1.4),
    (fdiv, 0.9, -1.6), (fmin, 0.4, 0.9), (fmax, 0.4, 0.9),
    (lambda a, b: a * b - b, 1.2, -0.7), (lambda a, b: a if a > b else b * b, 0.3, 0.8),
]


def nested_duals_agree():
    """Every math function on nested duals: the second derivatives of
    `hessian_vector` agree with central differences of first-order
    duals' derivatives (h = 1e-6, relative 1e-6), the first derivatives
    with differences of values, and nested values with plain floats. The
    messages of the disagreements."""
    h, bad = 1e-6, []

    def near(a, b):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))

    cases = [(f, [x]) for f, x in UNARY_POINTS] + [(f, [a, b]) for f, a, b in BINARY_POINTS]
    for f, args in cases:
        name = getattr(f, "__name__", "?")
        n = len(args)
        for i in range(n):
            unit = [1.0 if j == i else 0.0 for j in range(n)]
            v, g, hv = hessian_vector(f, args, unit)
            plus = [a + h * u for a, u in zip(args, unit)]
            minus = [a - h * u for a, u in zip(args, unit)]
            fd_g = (f(*plus) - f(*minus)) / (2 * h)
            gp, gm = gradient(f, plus)[1], gradient(f, minus)[1]
            fd_h = [(p - q) / (2 * h) for p, q in zip(gp, gm)]
            row = [hv[j] for j in range(n)]
            if v != f(*args) or not near(g[i], fd_g) or not all(map(near, row, fd_h)):
                bad.append(f"nested duals: {name}{tuple(args)} along e{i}: value {v}, "
                           f"gradient {g}, product {row}; differences {fd_g}, {fd_h}")
    return bad


def check():
    failures, count = nested_duals_agree(), 0
    for rel, path in corpus_files():
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                m = DIRECTIVE.match(line.rstrip("\n"))
                if not m:
                    continue
                count += 1
                try:
                    why = check_directive(rel, m.group(1), m.group(2))
                except Exception as e:  # a parse error or a missing program
                    why = f"{type(e).__name__}: {e}"
                if why:
                    failures.append(f"programs/{rel}:{lineno}: {m.group(1)}: {why}")
    for f in failures:
        print(f)
    print(f"{count} directives, {len(failures)} disagree with the reference")
    return 1 if failures else 0


def show():
    """Print the directive lines the corpus uses, recomputed."""
    for rel, path in corpus_files():
        print(f"== programs/{rel}")
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                m = DIRECTIVE.match(line.rstrip("\n"))
                if not m or m.group(1) not in ("run", "grad", "jvp", "hvp"):
                    continue
                call = m.group(2).partition("=>")[0].strip()
                try:
                    if m.group(1) in ("jvp", "hvp"):
                        v, t = directional(rel, m.group(1), call)
                        print(f"; {m.group(1)}: {call} => {show_value(v)} ; {show_json(t)}")
                        continue
                    name, args, f = compute(rel, call)
                    if m.group(1) == "run":
                        print(f"; run: {call} => {show_value(f(*args))}")
                    else:
                        v, g = gradient(f, args)
                        print(f"; grad: {call} => {show_float(v)} ; {show_json(g)}")
                except Trap as e:
                    print(f"; trap: {call} => {e}")
                except Exception as e:
                    print(f"; ERROR {call}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    sys.exit(check() if sys.argv[1:] == ["--check"] else show())
