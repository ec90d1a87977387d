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
//!
//! Beside them, hand-written tangents ([`Native::jvp`], dual numbers by
//! hand: each value's tangent computed next to it) and Hessian-vector
//! products ([`Native::hvp`], forward over reverse by hand: the adjoint
//! sweep above with the tangent of every value and of every adjoint next
//! to it). These two are with respect to every f64 and f64[] parameter
//! ([`Input::params`]), as advm's `jvp` and `hvp` are benchmarked: logreg's
//! data `X`, `y` and mlp's input `x` carry tangents too.

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

    /// The value and its derivative along `dir`, a direction over every
    /// f64 and f64[] parameter flattened in argument order (of length
    /// [`Input::params_len`]).
    pub fn jvp(&mut self, input: &Input, dir: &[f64]) -> (f64, f64) {
        match input {
            Input::Sincos { x } => sincos_jvp(*x, dir[0]),
            Input::Powloop { x, n } => powloop_jvp(*x, *n, dir[0]),
            Input::Logsumexp { v } => logsumexp_jvp(v, dir),
            Input::Branchy { v } => branchy_jvp(v, dir),
            Input::Recursion { x, n } => rec_jvp(*x, dir[0], *n),
            Input::Logreg { x, y, w, d, .. } => logreg_jvp(x, y, w, *d, dir),
            Input::Mlp { x, w1, b1, w2, b2 } => mlp_jvp(x, w1, b1, w2, *b2, dir),
        }
    }

    /// The value; the gradient with respect to every f64 and f64[]
    /// parameter in `g` and the Hessian-vector product `H dir` in `hv`, all
    /// flattened in argument order (of length [`Input::params_len`]).
    pub fn hvp(&mut self, input: &Input, dir: &[f64], g: &mut [f64], hv: &mut [f64]) -> f64 {
        let scalar = |(y, gx, hx): (f64, f64, f64), g: &mut [f64], hv: &mut [f64]| {
            g[0] = gx;
            hv[0] = hx;
            y
        };
        match input {
            Input::Sincos { x } => scalar(sincos_hvp(*x, dir[0]), g, hv),
            Input::Powloop { x, n } => scalar(powloop_hvp(*x, dir[0], *n, &mut self.tape), g, hv),
            Input::Logsumexp { v } => logsumexp_hvp(v, dir, g, hv),
            Input::Branchy { v } => branchy_hvp(v, dir, g, hv),
            Input::Recursion { x, n } => scalar(rec_hvp(*x, dir[0], *n, &mut self.tape), g, hv),
            Input::Logreg { x, y, w, d, .. } => logreg_hvp(x, y, w, *d, dir, g, hv),
            Input::Mlp { x, w1, b1, w2, b2 } => mlp_hvp(x, w1, b1, w2, *b2, dir, (g, hv)),
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

// Tangents (dual numbers by hand) and Hessian-vector products (forward over
// reverse by hand). Names: `dx` is the tangent of `x`, `x_bar` its adjoint,
// `dx_bar` the tangent of the adjoint.

/// Value and derivative of [`sincos`] along `dx`.
pub fn sincos_jvp(x: f64, dx: f64) -> (f64, f64) {
    let c = x.cos();
    let dc = -(x.sin() * dx);
    (c.sin(), c.cos() * dc)
}

/// Value, derivative and second derivative times `dx` of [`sincos`].
pub fn sincos_hvp(x: f64, dx: f64) -> (f64, f64, f64) {
    let (s, c) = (x.sin(), x.cos());
    let dc = -(s * dx);
    let y = c.sin();
    let c_bar = c.cos();
    let dc_bar = -(y * dc);
    let x_bar = -(c_bar * s);
    let dx_bar = -(dc_bar * s + c_bar * (c * dx));
    (y, x_bar, dx_bar)
}

/// Value and derivative of [`powloop`] along `dx`.
pub fn powloop_jvp(x: f64, n: i64, dx: f64) -> (f64, f64) {
    let (mut r, mut dr) = (1.0, 0.0);
    let mut k = n;
    while k > 0 {
        dr = dr * x + r * dx;
        r *= x;
        k -= 1;
    }
    (r, dr)
}

/// Value, derivative and second derivative times `dx` of [`powloop`]: the
/// forward loop records each iteration's `r` and its tangent.
pub fn powloop_hvp(x: f64, dx: f64, n: i64, tape: &mut Vec<f64>) -> (f64, f64, f64) {
    tape.clear();
    let (mut r, mut dr) = (1.0, 0.0);
    let mut k = n;
    while k > 0 {
        tape.push(r);
        tape.push(dr);
        dr = dr * x + r * dx;
        r *= x;
        k -= 1;
    }
    let (mut r_bar, mut dr_bar) = (1.0, 0.0);
    let (mut x_bar, mut dx_bar) = (0.0, 0.0);
    for rd in tape.chunks_exact(2).rev() {
        let (r_prev, dr_prev) = (rd[0], rd[1]);
        x_bar += r_bar * r_prev;
        dx_bar += dr_bar * r_prev + r_bar * dr_prev;
        dr_bar = dr_bar * x + r_bar * dx;
        r_bar *= x;
    }
    (r, x_bar, dx_bar)
}

/// First maximum of `v` and its index.
fn argmax(v: &[f64]) -> (f64, usize) {
    let (mut m, mut im) = (v[0], 0);
    for (i, &e) in v.iter().enumerate().skip(1) {
        if e > m {
            m = e;
            im = i;
        }
    }
    (m, im)
}

/// Value and derivative of [`logsumexp`] along `dv`.
pub fn logsumexp_jvp(v: &[f64], dv: &[f64]) -> (f64, f64) {
    let (m, im) = argmax(v);
    let dm = dv[im];
    let (mut s, mut ds) = (0.0, 0.0);
    for (&x, &dx) in v.iter().zip(dv) {
        let z = (x - m).exp();
        s += z;
        ds += z * (dx - dm);
    }
    (m + s.ln(), dm + ds / s)
}

/// Value of [`logsumexp`], gradient in `g`, `H dv` in `hv`. The
/// exponentials and their tangents wait in `g` and `hv` for the sum.
pub fn logsumexp_hvp(v: &[f64], dv: &[f64], g: &mut [f64], hv: &mut [f64]) -> f64 {
    let (m, im) = argmax(v);
    let dm = dv[im];
    let (mut s, mut ds) = (0.0, 0.0);
    for (((gi, hi), &x), &dx) in g.iter_mut().zip(hv.iter_mut()).zip(v).zip(dv) {
        let z = (x - m).exp();
        let dz = z * (dx - dm);
        *gi = z;
        *hi = dz;
        s += z;
        ds += dz;
    }
    let y = m + s.ln();
    let s_bar = 1.0 / s;
    let ds_bar = -(s_bar * (ds / s));
    let (mut m_bar, mut dm_bar) = (1.0, 0.0);
    for (gi, hi) in g.iter_mut().zip(hv.iter_mut()) {
        let x_bar = s_bar * *gi;
        let dx_bar = ds_bar * *gi + s_bar * *hi;
        *gi = x_bar;
        *hi = dx_bar;
        m_bar -= x_bar;
        dm_bar -= dx_bar;
    }
    g[im] += m_bar;
    hv[im] += dm_bar;
    y
}

/// Value and derivative of [`branchy`] along `dv`.
pub fn branchy_jvp(v: &[f64], dv: &[f64]) -> (f64, f64) {
    let (mut s, mut ds) = (0.0, 0.0);
    for (&x, &dx) in v.iter().zip(dv) {
        if x > 0.0 {
            s += x * x;
            ds += dx * x + x * dx;
        } else {
            s += x * 0.01;
            ds += dx * 0.01;
        }
    }
    (s, ds)
}

/// Value of [`branchy`], gradient in `g`, `H dv` in `hv`.
pub fn branchy_hvp(v: &[f64], dv: &[f64], g: &mut [f64], hv: &mut [f64]) -> f64 {
    let mut s = 0.0;
    for (((gi, hi), &x), &dx) in g.iter_mut().zip(hv.iter_mut()).zip(v).zip(dv) {
        if x > 0.0 {
            s += x * x;
            *gi = x + x;
            *hi = dx + dx;
        } else {
            s += x * 0.01;
            *gi = 0.01;
            *hi = 0.0;
        }
    }
    s
}

/// Value and derivative of [`rec`] along `dx`, recursively.
pub fn rec_jvp(x: f64, dx: f64, n: i64) -> (f64, f64) {
    if n == 0 {
        (x, dx)
    } else {
        let (r, dr) = rec_jvp(x, dx, n - 1);
        let s = r.sin();
        (x * s, dx * s + x * (r.cos() * dr))
    }
}

fn rec_hvp_fwd(x: f64, dx: f64, n: i64, tape: &mut Vec<f64>) -> (f64, f64) {
    if n == 0 {
        (x, dx)
    } else {
        let (r, dr) = rec_hvp_fwd(x, dx, n - 1, tape);
        let (s, c) = (r.sin(), r.cos());
        let ds = c * dr;
        tape.extend_from_slice(&[r, dr, s, ds]);
        (x * s, dx * s + x * ds)
    }
}

/// Value, derivative and second derivative times `dx` of [`rec`]: a
/// recursive forward pass recording each level's `r`, `sin r` and their
/// tangents, then a reverse loop from the outermost level in.
pub fn rec_hvp(x: f64, dx: f64, n: i64, tape: &mut Vec<f64>) -> (f64, f64, f64) {
    tape.clear();
    let (y, _) = rec_hvp_fwd(x, dx, n, tape);
    let (mut y_bar, mut dy_bar) = (1.0, 0.0);
    let (mut x_bar, mut dx_bar) = (0.0, 0.0);
    for l in tape.chunks_exact(4).rev() {
        let (r, dr, s, ds) = (l[0], l[1], l[2], l[3]);
        x_bar += y_bar * s;
        dx_bar += dy_bar * s + y_bar * ds;
        let (c, dc) = (r.cos(), -(s * dr));
        let xc = x * c;
        let dxc = dx * c + x * dc;
        dy_bar = dy_bar * xc + y_bar * dxc;
        y_bar *= xc;
    }
    (y, x_bar + y_bar, dx_bar + dy_bar)
}

/// Value and derivative of [`logreg`] along `dir` over `X`, `y`, `w`.
pub fn logreg_jvp(xs: &[f64], ys: &[f64], w: &[f64], d: usize, dir: &[f64]) -> (f64, f64) {
    let n = ys.len();
    let (dxs, rest) = dir.split_at(n * d);
    let (dys, dw) = rest.split_at(n);
    let (mut loss, mut dloss) = (0.0, 0.0);
    for k in 0..n {
        let (row, drow) = (&xs[k * d..k * d + d], &dxs[k * d..k * d + d]);
        let (mut dot, mut ddot) = (0.0, 0.0);
        for j in 0..d {
            dot += row[j] * w[j];
            ddot += drow[j] * w[j] + row[j] * dw[j];
        }
        let t = ys[k] * dot;
        let dt = dys[k] * dot + ys[k] * ddot;
        let e = (-t).exp();
        let de = -(e * dt);
        let o = e + 1.0;
        loss += o.ln();
        dloss += de / o;
    }
    let nf = n as f64;
    (loss / nf, dloss / nf)
}

/// Value of [`logreg`]; gradient and `H dir` over `X`, `y`, `w` in `g`
/// and `hv`. Each row's adjoint and its tangent run right after the row.
pub fn logreg_hvp(
    xs: &[f64],
    ys: &[f64],
    w: &[f64],
    d: usize,
    dir: &[f64],
    g: &mut [f64],
    hv: &mut [f64],
) -> f64 {
    let n = ys.len();
    let (dxs, rest) = dir.split_at(n * d);
    let (dys, dw) = rest.split_at(n);
    let (gx, rest) = g.split_at_mut(n * d);
    let (gy, gw) = rest.split_at_mut(n);
    let (hx, rest) = hv.split_at_mut(n * d);
    let (hy, hw) = rest.split_at_mut(n);
    gw.fill(0.0);
    hw.fill(0.0);
    let nf = n as f64;
    let l_bar = 1.0 / nf;
    let mut loss = 0.0;
    for k in 0..n {
        let r = k * d..k * d + d;
        let (row, drow) = (&xs[r.clone()], &dxs[r.clone()]);
        let (mut dot, mut ddot) = (0.0, 0.0);
        for j in 0..d {
            dot += row[j] * w[j];
            ddot += drow[j] * w[j] + row[j] * dw[j];
        }
        let (y, dy) = (ys[k], dys[k]);
        let t = y * dot;
        let dt = dy * dot + y * ddot;
        let e = (-t).exp();
        let de = -(e * dt);
        let o = e + 1.0;
        loss += o.ln();
        let o_bar = l_bar / o;
        let do_bar = -(o_bar * (de / o));
        let t_bar = -(o_bar * e);
        let dt_bar = -(do_bar * e + o_bar * de);
        gy[k] = t_bar * dot;
        hy[k] = dt_bar * dot + t_bar * ddot;
        let dot_bar = t_bar * y;
        let ddot_bar = dt_bar * y + t_bar * dy;
        let (gxr, hxr) = (&mut gx[r.clone()], &mut hx[r]);
        for j in 0..d {
            gw[j] += dot_bar * row[j];
            hw[j] += ddot_bar * row[j] + dot_bar * drow[j];
            gxr[j] = dot_bar * w[j];
            hxr[j] = ddot_bar * w[j] + dot_bar * dw[j];
        }
    }
    loss / nf
}

/// Value and derivative of [`mlp`] along `dir` over `x`, `W1`, `b1`, `W2`,
/// `b2`.
pub fn mlp_jvp(x: &[f64], w1: &[f64], b1: &[f64], w2: &[f64], b2: f64, dir: &[f64]) -> (f64, f64) {
    let (d, h) = (x.len(), b1.len());
    let (dx, rest) = dir.split_at(d);
    let (dw1, rest) = rest.split_at(h * d);
    let (db1, rest) = rest.split_at(h);
    let (dw2, db2) = rest.split_at(h);
    let (mut o, mut d_o) = (b2, db2[0]);
    for i in 0..h {
        let (row, drow) = (&w1[i * d..i * d + d], &dw1[i * d..i * d + d]);
        let (mut acc, mut dacc) = (b1[i], db1[i]);
        for j in 0..d {
            acc += row[j] * x[j];
            dacc += drow[j] * x[j] + row[j] * dx[j];
        }
        let hi = acc.tanh();
        let dhi = (1.0 - hi * hi) * dacc;
        o += w2[i] * hi;
        d_o += dw2[i] * hi + w2[i] * dhi;
    }
    (o * o, d_o * o + o * d_o)
}

/// Value of [`mlp`]; gradient and `H dir` over `x`, `W1`, `b1`, `W2`, `b2`
/// in `out.0` and `out.1`. The hidden activations and their tangents wait
/// in the `W2` parts until the output's adjoint is known.
pub fn mlp_hvp(
    x: &[f64],
    w1: &[f64],
    b1: &[f64],
    w2: &[f64],
    b2: f64,
    dir: &[f64],
    out: (&mut [f64], &mut [f64]),
) -> f64 {
    let (d, h) = (x.len(), b1.len());
    let (dx, rest) = dir.split_at(d);
    let (dw1, rest) = rest.split_at(h * d);
    let (db1, rest) = rest.split_at(h);
    let (dw2, db2) = rest.split_at(h);
    let (gx, rest) = out.0.split_at_mut(d);
    let (gw1, rest) = rest.split_at_mut(h * d);
    let (gb1, rest) = rest.split_at_mut(h);
    let (gw2, gb2) = rest.split_at_mut(h);
    let (hx, rest) = out.1.split_at_mut(d);
    let (hw1, rest) = rest.split_at_mut(h * d);
    let (hb1, rest) = rest.split_at_mut(h);
    let (hw2, hb2) = rest.split_at_mut(h);
    let (mut o, mut d_o) = (b2, db2[0]);
    for i in 0..h {
        let (row, drow) = (&w1[i * d..i * d + d], &dw1[i * d..i * d + d]);
        let (mut acc, mut dacc) = (b1[i], db1[i]);
        for j in 0..d {
            acc += row[j] * x[j];
            dacc += drow[j] * x[j] + row[j] * dx[j];
        }
        let hi = acc.tanh();
        let dhi = (1.0 - hi * hi) * dacc;
        gw2[i] = hi;
        hw2[i] = dhi;
        o += w2[i] * hi;
        d_o += dw2[i] * hi + w2[i] * dhi;
    }
    let o_bar = o + o;
    let do_bar = d_o + d_o;
    gb2[0] = o_bar;
    hb2[0] = do_bar;
    gx.fill(0.0);
    hx.fill(0.0);
    for i in 0..h {
        let (hi, dhi) = (gw2[i], hw2[i]);
        gw2[i] = o_bar * hi;
        hw2[i] = do_bar * hi + o_bar * dhi;
        let h_bar = o_bar * w2[i];
        let dh_bar = do_bar * w2[i] + o_bar * dw2[i];
        let t = 1.0 - hi * hi;
        let dt = -(2.0 * hi * dhi);
        let acc_bar = h_bar * t;
        let dacc_bar = dh_bar * t + h_bar * dt;
        gb1[i] = acc_bar;
        hb1[i] = dacc_bar;
        let r = i * d..i * d + d;
        let (row, drow) = (&w1[r.clone()], &dw1[r.clone()]);
        let (gr, hr) = (&mut gw1[r.clone()], &mut hw1[r]);
        for j in 0..d {
            gr[j] = acc_bar * x[j];
            hr[j] = dacc_bar * x[j] + acc_bar * dx[j];
            gx[j] += acc_bar * row[j];
            hx[j] += dacc_bar * row[j] + acc_bar * drow[j];
        }
    }
    o * o
}
