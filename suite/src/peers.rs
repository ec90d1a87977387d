//! The suite programs written against two tape-based reverse-mode AD crates,
//! as a user of each crate would write them:
//!
//! * [`ReversePeer`]: `reverse` 0.2 (`Tape` + `Var<'a>`; every operation
//!   appends a node with two weights to a `RefCell<Vec>`; `Var::grad`
//!   returns a fresh `Vec` of adjoints of every node). The tape is kept and
//!   cleared between calls, so its buffer is reused.
//! * [`EchidnaPeer`]: `echidna` 0.15 (`echidna::grad` with a closure over
//!   `Reverse<f64>`, an Adept-style two-stack tape that echidna pools per
//!   thread; it returns a fresh `Vec` gradient). The value is read from the
//!   closure's result.
//!
//! Both crates have every operation the suite needs (`sin`, `cos`, `exp`,
//! `ln`, `tanh`, comparisons). Differences that matter:
//!
//! * `reverse` has no constant `Var` (only tape variables), so sums start
//!   from their first term instead of `0.0` (the same rounding: `0.0 + t ==
//!   t`), and `powloop` starts from `x` instead of `1.0 * x`.
//! * `reverse` has no `max`; logsumexp selects with a comparison (`e > m`),
//!   which is what advm's `max.f` does, and its derivative is the same.
//!   echidna's `Float::max` keeps the left operand on ties, as advm does.
//! * `reverse` divides by a constant as `x * (1 / c)`, so logreg's final
//!   `loss / N` may round differently from advm (checked to 1e-9 instead of
//!   1e-12; at the suite's inputs it happens to be bit-identical); see
//!   [`crate::Input::peer_value_exact`].
//! * Both differentiate `tanh` as `1 / cosh^2` (advm and the native adjoint
//!   use `1 - tanh^2`), so mlp's gradients agree to rounding only.
//!
//! Beside them, echidna's forward mode and second order, with respect to
//! every f64 and f64[] parameter ([`Input::params`], as advm's `jvp` and
//! `hvp` are benchmarked):
//!
//! * [`EchidnaDual`]: the program over `echidna::Dual<f64>` (dual numbers,
//!   a value and a tangent each), the inputs seeded in a reused buffer;
//! * [`EchidnaHvp`]: `echidna::record` of the program over
//!   `BReverse<f64>` (echidna's bytecode tape, the `bytecode` feature),
//!   then `BytecodeTape::hvp` (forward over reverse on the tape), recorded
//!   again on every call as `echidna::hvp` does: the programs branch on
//!   their values, so a tape is only valid at the point it was recorded
//!   at. Both return fresh `Vec`s.
//!
//! Both run one generic program ([`program`]) over the flattened
//! parameters.
//!
//! The gradient is with respect to [`Input::wrt`] only: the other f64 data
//! (logreg's `X`, `y`; mlp's `x`) enter as constants (`f64` operands).

use crate::Input;
use echidna::{BReverse, Dual, Scalar};
use num_traits::Float;
use reverse::{Gradient, Tape, Var};
use std::ops::{Add, AddAssign, Div, Mul};

type R = echidna::Reverse<f64>;

/// `reverse` 0.2, with a tape reused across calls.
#[derive(Debug, Default)]
pub struct ReversePeer {
    tape: Tape,
}

impl ReversePeer {
    pub fn new() -> ReversePeer {
        ReversePeer::default()
    }

    /// Nodes on the tape after the last [`ReversePeer::grad`].
    pub fn tape_len(&self) -> usize {
        self.tape.len()
    }

    /// The value, and the gradient with respect to [`Input::wrt`] in `g`.
    pub fn grad(&mut self, input: &Input, g: &mut [f64]) -> f64 {
        let t = &self.tape;
        t.clear();
        match input {
            Input::Sincos { x } => {
                let x = t.add_var(*x);
                let y = x.cos().sin();
                g[0] = y.grad().wrt(&x);
                y.val()
            }
            Input::Powloop { x, n } => {
                let xv = t.add_var(*x);
                if *n <= 0 {
                    g[0] = 0.0;
                    return 1.0;
                }
                let mut r = xv;
                let mut k = n - 1;
                while k > 0 {
                    r = r * xv;
                    k -= 1;
                }
                g[0] = r.grad().wrt(&xv);
                r.val()
            }
            Input::Logsumexp { v } => {
                let vs = t.add_vars(v);
                let mut m = vs[0];
                for &e in &vs[1..] {
                    m = if e > m { e } else { m };
                }
                let mut s = (vs[0] - m).exp();
                for &x in &vs[1..] {
                    s = s + (x - m).exp();
                }
                let y = m + s.ln();
                fill(g, &y.grad(), &vs);
                y.val()
            }
            Input::Branchy { v } => {
                let vs = t.add_vars(v);
                fn term(x: Var<'_>) -> Var<'_> {
                    if x > 0.0 {
                        x * x
                    } else {
                        x * 0.01
                    }
                }
                let mut s = term(vs[0]);
                for &x in &vs[1..] {
                    s = s + term(x);
                }
                fill(g, &s.grad(), &vs);
                s.val()
            }
            Input::Recursion { x, n } => {
                fn rec<'a>(x: Var<'a>, n: i64) -> Var<'a> {
                    if n == 0 {
                        x
                    } else {
                        x * rec(x, n - 1).sin()
                    }
                }
                let xv = t.add_var(*x);
                let y = rec(xv, *n);
                g[0] = y.grad().wrt(&xv);
                y.val()
            }
            Input::Logreg { x, y, w, n, d } => {
                let ws = t.add_vars(w);
                let (n, d) = (*n, *d);
                let row_loss = |k: usize| {
                    let row = &x[k * d..k * d + d];
                    let mut dot = ws[0] * row[0];
                    for j in 1..d {
                        dot = dot + ws[j] * row[j];
                    }
                    let e = (-(dot * y[k])).exp();
                    (e + 1.0).ln()
                };
                let mut loss = row_loss(0);
                for k in 1..n {
                    loss = loss + row_loss(k);
                }
                let r = loss / n as f64;
                fill(g, &r.grad(), &ws);
                r.val()
            }
            Input::Mlp { x, w1, b1, w2, b2 } => {
                let w1s = t.add_vars(w1);
                let b1s = t.add_vars(b1);
                let w2s = t.add_vars(w2);
                let b2v = t.add_var(*b2);
                let d = x.len();
                let mut o = b2v;
                for i in 0..b1.len() {
                    let mut acc = b1s[i];
                    for j in 0..d {
                        acc = acc + w1s[i * d + j] * x[j];
                    }
                    o = o + w2s[i] * acc.tanh();
                }
                let r = o * o;
                let adj = r.grad();
                let (h, hd) = (b1.len(), w1.len());
                fill(&mut g[..hd], &adj, &w1s);
                fill(&mut g[hd..hd + h], &adj, &b1s);
                fill(&mut g[hd + h..hd + 2 * h], &adj, &w2s);
                g[hd + 2 * h] = adj.wrt(&b2v);
                r.val()
            }
        }
    }
}

/// `g[i] = d/d vars[i]` from the adjoint vector of `Var::grad`.
fn fill(g: &mut [f64], adj: &Vec<f64>, vars: &[Var<'_>]) {
    for (gi, v) in g.iter_mut().zip(vars) {
        *gi = adj.wrt(v);
    }
}

/// `echidna` 0.15 through `echidna::grad` (thread-local pooled tape), for
/// one input.
#[derive(Debug)]
pub struct EchidnaPeer {
    input: Input,
    /// The differentiated inputs, flattened once (`echidna::grad` takes
    /// them as a slice).
    flat: Vec<f64>,
}

impl EchidnaPeer {
    pub fn new(input: &Input) -> EchidnaPeer {
        EchidnaPeer {
            input: input.clone(),
            flat: flatten(input),
        }
    }

    /// The value, and the gradient with respect to [`Input::wrt`] in `g`.
    pub fn grad(&mut self, g: &mut [f64]) -> f64 {
        let mut value = 0.0;
        let input = &self.input;
        let grad = echidna::grad(
            |p: &[R]| {
                let y = echidna_program(input, p);
                value = y.value();
                y
            },
            &self.flat,
        );
        g.copy_from_slice(&grad);
        value
    }
}

/// The differentiated inputs of `input`, flattened in [`Input::wrt`] order.
pub fn flatten(input: &Input) -> Vec<f64> {
    match input {
        Input::Sincos { x } | Input::Powloop { x, .. } | Input::Recursion { x, .. } => vec![*x],
        Input::Logsumexp { v } | Input::Branchy { v } => v.clone(),
        Input::Logreg { w, .. } => w.clone(),
        Input::Mlp { w1, b1, w2, b2, .. } => {
            let mut f = Vec::with_capacity(w1.len() + b1.len() + w2.len() + 1);
            f.extend_from_slice(w1);
            f.extend_from_slice(b1);
            f.extend_from_slice(w2);
            f.push(*b2);
            f
        }
    }
}

fn echidna_program(input: &Input, p: &[R]) -> R {
    match input {
        Input::Sincos { .. } => p[0].cos().sin(),
        Input::Powloop { n, .. } => {
            let x = p[0];
            let mut r = R::constant(1.0);
            let mut k = *n;
            while k > 0 {
                r *= x;
                k -= 1;
            }
            r
        }
        Input::Logsumexp { .. } => {
            let mut m = p[0];
            for &e in &p[1..] {
                m = m.max(e);
            }
            let mut s = R::constant(0.0);
            for &x in p {
                s += (x - m).exp();
            }
            m + s.ln()
        }
        Input::Branchy { .. } => {
            let mut s = R::constant(0.0);
            for &x in p {
                let t = if x.value() > 0.0 { x * x } else { x * 0.01 };
                s += t;
            }
            s
        }
        Input::Recursion { n, .. } => {
            fn rec(x: R, n: i64) -> R {
                if n == 0 {
                    x
                } else {
                    x * rec(x, n - 1).sin()
                }
            }
            rec(p[0], *n)
        }
        Input::Logreg { x, y, n, d, .. } => {
            let (n, d) = (*n, *d);
            let mut loss = R::constant(0.0);
            for k in 0..n {
                let row = &x[k * d..k * d + d];
                let mut dot = R::constant(0.0);
                for (xkj, &wj) in row.iter().zip(&p[..d]) {
                    dot += wj * *xkj;
                }
                let e = (-(dot * y[k])).exp();
                loss += (e + 1.0).ln();
            }
            loss / n as f64
        }
        Input::Mlp { x, w1, b1, .. } => {
            let (d, h, hd) = (x.len(), b1.len(), w1.len());
            let (pw1, rest) = p.split_at(hd);
            let (pb1, rest) = rest.split_at(h);
            let (pw2, pb2) = rest.split_at(h);
            let mut o = pb2[0];
            for i in 0..h {
                let mut acc = pb1[i];
                for (wij, xj) in pw1[i * d..i * d + d].iter().zip(x) {
                    acc += *wij * *xj;
                }
                o += pw2[i] * acc.tanh();
            }
            o * o
        }
    }
}

/// The scalar types [`program`] runs over: echidna's active numbers with
/// the arithmetic the suite needs, including with `f64` constants.
pub trait Active:
    Scalar<Float = f64>
    + Add<f64, Output = Self>
    + Mul<f64, Output = Self>
    + Div<f64, Output = Self>
    + AddAssign
{
}

impl<S> Active for S where
    S: Scalar<Float = f64>
        + Add<f64, Output = S>
        + Mul<f64, Output = S>
        + Div<f64, Output = S>
        + AddAssign
{
}

/// The suite program of `input` over `p`, every f64 and f64[] parameter
/// flattened in argument order ([`Input::flatten_params`]); the i64
/// parameters (`n`, `N`, `D`) come from `input`. Same operations in the
/// same order as `programs/bench/`.
pub fn program<S: Active>(input: &Input, p: &[S]) -> S {
    match input {
        Input::Sincos { .. } => p[0].cos().sin(),
        Input::Powloop { n, .. } => {
            let x = p[0];
            let mut r = S::from_f(1.0);
            let mut k = *n;
            while k > 0 {
                r = r * x;
                k -= 1;
            }
            r
        }
        Input::Logsumexp { .. } => {
            let mut m = p[0];
            for &e in &p[1..] {
                m = m.max(e);
            }
            let mut s = S::from_f(0.0);
            for &x in p {
                s += (x - m).exp();
            }
            m + s.ln()
        }
        Input::Branchy { .. } => {
            let mut s = S::from_f(0.0);
            for &x in p {
                let t = if x.value() > 0.0 { x * x } else { x * 0.01 };
                s += t;
            }
            s
        }
        Input::Recursion { n, .. } => {
            fn rec<S: Active>(x: S, n: i64) -> S {
                if n == 0 {
                    x
                } else {
                    x * rec(x, n - 1).sin()
                }
            }
            rec(p[0], *n)
        }
        Input::Logreg { n, d, .. } => {
            let (n, d) = (*n, *d);
            let (xs, rest) = p.split_at(n * d);
            let (ys, w) = rest.split_at(n);
            let mut loss = S::from_f(0.0);
            for k in 0..n {
                let mut dot = S::from_f(0.0);
                for (&xkj, &wj) in xs[k * d..k * d + d].iter().zip(w) {
                    dot += xkj * wj;
                }
                let e = (-(ys[k] * dot)).exp();
                loss += (e + 1.0).ln();
            }
            loss / n as f64
        }
        Input::Mlp { x, b1, .. } => {
            let (d, h) = (x.len(), b1.len());
            let (px, rest) = p.split_at(d);
            let (pw1, rest) = rest.split_at(h * d);
            let (pb1, rest) = rest.split_at(h);
            let (pw2, pb2) = rest.split_at(h);
            let mut o = pb2[0];
            for i in 0..h {
                let mut acc = pb1[i];
                for (&wij, &xj) in pw1[i * d..i * d + d].iter().zip(px) {
                    acc += wij * xj;
                }
                o += pw2[i] * acc.tanh();
            }
            o * o
        }
    }
}

/// echidna's forward mode: [`program`] over `Dual<f64>`.
#[derive(Debug)]
pub struct EchidnaDual {
    input: Input,
    flat: Vec<f64>,
    duals: Vec<Dual<f64>>,
}

impl EchidnaDual {
    pub fn new(input: &Input) -> EchidnaDual {
        let flat = input.flatten_params();
        EchidnaDual {
            input: input.clone(),
            duals: Vec::with_capacity(flat.len()),
            flat,
        }
    }

    /// The value and its derivative along `dir` (over [`Input::params`]).
    pub fn jvp(&mut self, dir: &[f64]) -> (f64, f64) {
        self.duals.clear();
        self.duals
            .extend(self.flat.iter().zip(dir).map(|(&x, &v)| Dual::new(x, v)));
        let y = program(&self.input, &self.duals);
        (y.re, y.eps)
    }
}

/// echidna's Hessian-vector product: [`program`] recorded on a bytecode
/// tape, then `BytecodeTape::hvp`.
#[derive(Debug)]
pub struct EchidnaHvp {
    input: Input,
    flat: Vec<f64>,
}

impl EchidnaHvp {
    pub fn new(input: &Input) -> EchidnaHvp {
        EchidnaHvp {
            input: input.clone(),
            flat: input.flatten_params(),
        }
    }

    /// The value; the gradient and `H dir` (over [`Input::params`]) in `g`
    /// and `hv`.
    pub fn hvp(&mut self, dir: &[f64], g: &mut [f64], hv: &mut [f64]) -> f64 {
        let input = &self.input;
        let (tape, value) = echidna::record(|p: &[BReverse<f64>]| program(input, p), &self.flat);
        let (grad, prod) = tape.hvp(&self.flat, dir);
        g.copy_from_slice(&grad);
        hv.copy_from_slice(&prod);
        value
    }
}
