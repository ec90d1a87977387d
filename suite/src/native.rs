//! Native Rust versions of the suite programs: primals that perform the
//! same floating-point operations in the same order as the `.adasm`
//! programs (so their values are bit-identical to advm's), and hand-written
//! adjoints.
//!
//! Each adjoint is the reverse sweep a person (or a source-transformation
//! tool such as Tapenade) would write: the forward loop keeps only what the
//! reverse loop needs, in a reusable scratch buffer (powloop, recursion) or
//! in the output gradient itself (logsumexp, mlp), and where a row's
//! contribution is independent of the rest (logreg) the adjoint of the row
//! is done right after the row. No closed forms (`n x^(n-1)` for powloop):
//! the adjoints do the same work as advm's reverse functions, in native code.
//! After the first call with a given size nothing is allocated.

use crate::Input;

/// Native primal and adjoint of every suite program, with the scratch buffer
/// the adjoints of powloop and recursion reuse.
#[derive(Debug, Default)]
pub struct Native {
    tape: Vec<f64>,
}

impl Native {
    pub fn new() -> Native {
        Native::default()
    }

    /// The primal value.
    pub fn primal(&mut self, input: &Input) -> f64 {
        match input {
            Input::Sincos { x } => sincos(*x),
            Input::Powloop { x, n } => powloop(*x, *n),
            Input::Logsumexp { v } => logsumexp(v),
            Input::Branchy { v } => branchy(v),
            Input::Recursion { x, n } => rec(*x, *n),
            Input::Logreg { x, y, w, n, d } => logreg(x, y, w, *n, *d),
            Input::Mlp { x, w1, b1, w2, b2 } => mlp(x, w1, b1, w2, *b2),
        }
    }

    /// The value, and the gradient with respect to [`Input::wrt`] written to
    /// `g` (of length [`Input::grad_len`]).
    pub fn grad(&mut self, input: &Input, g: &mut [f64]) -> f64 {
        match input {
            Input::Sincos { x } => {
                let (y, dx) = sincos_grad(*x);
                g[0] = dx;
                y
            }
            Input::Powloop { x, n } => {
                let (y, dx) = powloop_grad(*x, *n, &mut self.tape);
                g[0] = dx;
                y
            }
            Input::Logsumexp { v } => logsumexp_grad(v, g),
            Input::Branchy { v } => branchy_grad(v, g),
            Input::Recursion { x, n } => {
                let (y, dx) = rec_grad(*x, *n, &mut self.tape);
                g[0] = dx;
                y
            }
            Input::Logreg { x, y, w, n, d } => logreg_grad(x, y, w, *n, *d, g),
            Input::Mlp { x, w1, b1, w2, b2 } => mlp_grad(x, w1, b1, w2, *b2, g),
        }
    }
}

/// `sin(cos(x))`.
pub fn sincos(x: f64) -> f64 {
    x.cos().sin()
}

/// Value and derivative of [`sincos`].
pub fn sincos_grad(x: f64) -> (f64, f64) {
    let c = x.cos();
    let y = c.sin();
    let c_bar = c.cos();
    (y, -(c_bar * x.sin()))
}

/// `x^n` by `n` multiplications (1 for `n <= 0`).
pub fn powloop(x: f64, n: i64) -> f64 {
    let mut r = 1.0;
    let mut k = n;
    while k > 0 {
        r *= x;
        k -= 1;
    }
    r
}

/// Value and derivative of [`powloop`]: the forward loop records each
/// iteration's `r` in `tape`, the reverse loop consumes it.
pub fn powloop_grad(x: f64, n: i64, tape: &mut Vec<f64>) -> (f64, f64) {
    tape.clear();
    let mut r = 1.0;
    let mut k = n;
    while k > 0 {
        tape.push(r);
        r *= x;
        k -= 1;
    }
    let (mut r_bar, mut x_bar) = (1.0, 0.0);
    for &r_prev in tape.iter().rev() {
        x_bar += r_bar * r_prev;
        r_bar *= x;
    }
    (r, x_bar)
}

/// `m + log(sum exp(v[i] - m))` with `m = max v` (first maximum wins, as
/// `max.f` keeps its left operand unless the right one is greater).
pub fn logsumexp(v: &[f64]) -> f64 {
    let mut m = v[0];
    for &e in &v[1..] {
        m = if e > m { e } else { m };
    }
    let mut s = 0.0;
    for &x in v {
        s += (x - m).exp();
    }
    m + s.ln()
}

/// Value of [`logsumexp`] and its gradient in `g` (`g.len() == v.len()`).
/// The exponentials wait in `g` for the sum; the max's cotangent (zero up
/// to rounding) goes to the element that won, as in advm.
pub fn logsumexp_grad(v: &[f64], g: &mut [f64]) -> f64 {
    let (mut m, mut im) = (v[0], 0);
    for (i, &e) in v.iter().enumerate().skip(1) {
        if e > m {
            m = e;
            im = i;
        }
    }
    let mut s = 0.0;
    for (gi, &x) in g.iter_mut().zip(v) {
        let z = (x - m).exp();
        *gi = z;
        s += z;
    }
    let y = m + s.ln();
    let s_bar = 1.0 / s;
    let mut m_bar = 1.0;
    for gi in g.iter_mut() {
        let z_bar = s_bar * *gi;
        *gi = z_bar;
        m_bar -= z_bar;
    }
    g[im] += m_bar;
    y
}

/// `sum (v[i] > 0 ? v[i] * v[i] : v[i] * 0.01)`.
pub fn branchy(v: &[f64]) -> f64 {
    let mut s = 0.0;
    for &x in v {
        let t = if x > 0.0 { x * x } else { x * 0.01 };
        s += t;
    }
    s
}

/// Value of [`branchy`] and its gradient in `g`.
pub fn branchy_grad(v: &[f64], g: &mut [f64]) -> f64 {
    let mut s = 0.0;
    for (gi, &x) in g.iter_mut().zip(v) {
        if x > 0.0 {
            s += x * x;
            *gi = x + x;
        } else {
            s += x * 0.01;
            *gi = 0.01;
        }
    }
    s
}

/// `rec(x, n) = n == 0 ? x : x * sin(rec(x, n - 1))`, recursively (as the
/// program does; Rust does not turn this into a loop since the call is not
/// in tail position).
pub fn rec(x: f64, n: i64) -> f64 {
    if n == 0 {
        x
    } else {
        x * rec(x, n - 1).sin()
    }
}

fn rec_fwd(x: f64, n: i64, tape: &mut Vec<f64>) -> f64 {
    if n == 0 {
        x
    } else {
        let r = rec_fwd(x, n - 1, tape);
        let s = r.sin();
        tape.push(r);
        tape.push(s);
        x * s
    }
}

/// Value and derivative of [`rec`]: a recursive forward pass that records
/// each level's `r` and `sin r`, then a reverse loop from the outermost
/// level in.
pub fn rec_grad(x: f64, n: i64, tape: &mut Vec<f64>) -> (f64, f64) {
    tape.clear();
    let y = rec_fwd(x, n, tape);
    let (mut y_bar, mut x_bar) = (1.0, 0.0);
    for rs in tape.chunks_exact(2).rev() {
        let (r, s) = (rs[0], rs[1]);
        x_bar += y_bar * s;
        y_bar = y_bar * x * r.cos();
    }
    (y, x_bar + y_bar)
}

/// `(1/n) sum_k log(1 + exp(-y[k] * (X[k,:] . w)))`, `X` row-major `n x d`.
pub fn logreg(xs: &[f64], ys: &[f64], w: &[f64], n: usize, d: usize) -> f64 {
    let mut loss = 0.0;
    for k in 0..n {
        let row = &xs[k * d..k * d + d];
        let mut dot = 0.0;
        for (xkj, wj) in row.iter().zip(&w[..d]) {
            dot += xkj * wj;
        }
        let e = (-(ys[k] * dot)).exp();
        loss += (e + 1.0).ln();
    }
    loss / n as f64
}

/// Value of [`logreg`] and its gradient with respect to `w` in `gw`. Each
/// row's adjoint runs right after the row (the loss is a sum).
pub fn logreg_grad(xs: &[f64], ys: &[f64], w: &[f64], n: usize, d: usize, gw: &mut [f64]) -> f64 {
    gw.fill(0.0);
    let nf = n as f64;
    let l_bar = 1.0 / nf;
    let mut loss = 0.0;
    for k in 0..n {
        let row = &xs[k * d..k * d + d];
        let mut dot = 0.0;
        for (xkj, wj) in row.iter().zip(&w[..d]) {
            dot += xkj * wj;
        }
        let e = (-(ys[k] * dot)).exp();
        let o = e + 1.0;
        loss += o.ln();
        let dot_bar = -(l_bar / o * e) * ys[k];
        for (g, xkj) in gw[..d].iter_mut().zip(row) {
            *g += dot_bar * xkj;
        }
    }
    loss / nf
}

/// `(b2 + sum_i W2[i] tanh(b1[i] + sum_j W1[i,j] x[j]))^2`.
pub fn mlp(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: f64) -> f64 {
    let d = x.len();
    let mut o = b2;
    for (i, (&bi, &w2i)) in b1.iter().zip(w2).enumerate() {
        let row = &w1[i * d..i * d + d];
        let mut acc = bi;
        for (wij, xj) in row.iter().zip(x) {
            acc += wij * xj;
        }
        o += w2i * acc.tanh();
    }
    o * o
}

/// Value of [`mlp`] and its gradient in `g`, laid out as `W1` (`h x d`),
/// `b1` (`h`), `W2` (`h`), `b2` (1). The hidden activations wait in the
/// `W2` part of `g` until the output's cotangent is known.
pub fn mlp_grad(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: f64, g: &mut [f64]) -> f64 {
    let (d, h) = (x.len(), b1.len());
    let (gw1, rest) = g.split_at_mut(h * d);
    let (gb1, rest) = rest.split_at_mut(h);
    let (gw2, gb2) = rest.split_at_mut(h);
    let mut o = b2;
    for i in 0..h {
        let row = &w1[i * d..i * d + d];
        let mut acc = b1[i];
        for (wij, xj) in row.iter().zip(x) {
            acc += wij * xj;
        }
        let hi = acc.tanh();
        gw2[i] = hi;
        o += w2[i] * hi;
    }
    let o_bar = o + o;
    gb2[0] = o_bar;
    for i in 0..h {
        let hi = gw2[i];
        gw2[i] = o_bar * hi;
        let acc_bar = o_bar * w2[i] * (1.0 - hi * hi);
        gb1[i] = acc_bar;
        for (g, xj) in gw1[i * d..i * d + d].iter_mut().zip(x) {
            *g = acc_bar * xj;
        }
    }
    o * o
}
