//! # suite: advm's benchmark suite
//!
//! The seven programs of `programs/bench/` (inputs and reference values in
//! [`testkit::suite`]) implemented five ways, so that advm can be checked
//! against and timed against:
//!
//! * [`native`]: plain Rust primals and hand-written adjoints (a reverse
//!   sweep per program, no tape, no allocation with warm buffers);
//! * `peers` (with the `peers` feature): the same programs with the
//!   tape-based AD crates `reverse` (0.2) and `echidna` (0.15);
//! * [`advm`]: the `.adasm` programs run by advm's VM, primal and gradient
//!   (the forward and reverse bytecode functions of `ad::Engine`);
//!   [`modes`]: its tangent and Hessian-vector product, beside the native
//!   hand-written ones ([`native::Native::jvp`], [`native::Native::hvp`])
//!   and echidna's dual numbers and `hvp` (`peers`).
//!
//! Every implementation takes an [`Input`] (built from a
//! [`testkit::suite::Case`]) and writes the gradient with respect to the
//! *differentiated inputs* of [`Input::wrt`], flattened in argument order,
//! into a caller-provided slice of [`Input::grad_len`] elements.
//!
//! `tests/it/agree.rs` checks that all of them agree; `benches/suite.rs` times
//! them (docs/benchmarks.md). The peers are behind the `peers` feature so
//! that the workspace's tests do not build the peer crates:
//! `cargo test -p suite --features peers` checks them too, and
//! `cargo bench -p advm-bench --features peers` times them.

pub mod advm;
pub mod modes;
pub mod native;
#[cfg(feature = "peers")]
pub mod peers;
pub mod report;

use testkit::suite::Case;
use vm::Value;

/// The typed inputs of one suite program.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// `sin(cos(x))`.
    Sincos { x: f64 },
    /// `x^n` by `n` multiplications.
    Powloop { x: f64, n: i64 },
    /// `max v + log(sum exp(v - max v))`.
    Logsumexp { v: Vec<f64> },
    /// `sum (v[i] > 0 ? v[i]^2 : 0.01 v[i])`.
    Branchy { v: Vec<f64> },
    /// `rec(x, n) = n == 0 ? x : x sin(rec(x, n - 1))`.
    Recursion { x: f64, n: i64 },
    /// Logistic-regression loss; `x` is `n x d` row-major.
    Logreg {
        x: Vec<f64>,
        y: Vec<f64>,
        w: Vec<f64>,
        n: usize,
        d: usize,
    },
    /// `(W2 . tanh(W1 x + b1) + b2)^2`; `w1` is `h x d` row-major with
    /// `h = b1.len()`, `d = x.len()`.
    Mlp {
        x: Vec<f64>,
        w1: Vec<f64>,
        b1: Vec<f64>,
        w2: Vec<f64>,
        b2: f64,
    },
}

fn f64_arg(args: &[Value], i: usize) -> f64 {
    match args.get(i) {
        Some(Value::F64(x)) => *x,
        other => panic!("argument {i}: expected f64, got {other:?}"),
    }
}

fn i64_arg(args: &[Value], i: usize) -> i64 {
    match args.get(i) {
        Some(Value::I64(x)) => *x,
        other => panic!("argument {i}: expected i64, got {other:?}"),
    }
}

fn arr_arg(args: &[Value], i: usize) -> Vec<f64> {
    match args.get(i) {
        Some(Value::Arr(x)) => x.clone(),
        other => panic!("argument {i}: expected f64[], got {other:?}"),
    }
}

impl Input {
    /// The typed inputs of a suite case (panics on a case this suite does
    /// not know or on arguments of the wrong types).
    pub fn from_case(case: &Case) -> Input {
        Input::from_args(case.file, &case.args)
    }

    /// The typed inputs of program `file` (a `programs/bench/` stem) at
    /// `args`, the arguments of its `.adasm` function.
    pub fn from_args(file: &str, a: &[Value]) -> Input {
        match file {
            "sincos" => Input::Sincos { x: f64_arg(a, 0) },
            "powloop" => Input::Powloop {
                x: f64_arg(a, 0),
                n: i64_arg(a, 1),
            },
            "logsumexp" => Input::Logsumexp { v: arr_arg(a, 0) },
            "branchy" => Input::Branchy { v: arr_arg(a, 0) },
            "recursion" => Input::Recursion {
                x: f64_arg(a, 0),
                n: i64_arg(a, 1),
            },
            "logreg" => Input::Logreg {
                x: arr_arg(a, 0),
                y: arr_arg(a, 1),
                w: arr_arg(a, 2),
                n: usize::try_from(i64_arg(a, 3)).expect("N >= 0"),
                d: usize::try_from(i64_arg(a, 4)).expect("D >= 0"),
            },
            "mlp" => Input::Mlp {
                x: arr_arg(a, 0),
                w1: arr_arg(a, 1),
                b1: arr_arg(a, 2),
                w2: arr_arg(a, 3),
                b2: f64_arg(a, 4),
            },
            other => panic!("unknown suite program {other}"),
        }
    }

    /// The program's name (file stem under `programs/bench/`).
    pub fn name(&self) -> &'static str {
        match self {
            Input::Sincos { .. } => "sincos",
            Input::Powloop { .. } => "powloop",
            Input::Logsumexp { .. } => "logsumexp",
            Input::Branchy { .. } => "branchy",
            Input::Recursion { .. } => "recursion",
            Input::Logreg { .. } => "logreg",
            Input::Mlp { .. } => "mlp",
        }
    }

    /// Indices of the arguments the gradient is taken with respect to.
    pub fn wrt(&self) -> &'static [usize] {
        match self {
            Input::Sincos { .. }
            | Input::Powloop { .. }
            | Input::Logsumexp { .. }
            | Input::Branchy { .. }
            | Input::Recursion { .. } => &[0],
            Input::Logreg { .. } => &[2],
            Input::Mlp { .. } => &[1, 2, 3, 4],
        }
    }

    /// Length of the flattened gradient with respect to [`Input::wrt`].
    pub fn grad_len(&self) -> usize {
        match self {
            Input::Sincos { .. } | Input::Powloop { .. } | Input::Recursion { .. } => 1,
            Input::Logsumexp { v } | Input::Branchy { v } => v.len(),
            Input::Logreg { w, .. } => w.len(),
            Input::Mlp { w1, b1, w2, .. } => w1.len() + b1.len() + w2.len() + 1,
        }
    }

    /// Indices of every f64 and f64[] argument: what advm's `jvp` and
    /// `hvp` are benchmarked with respect to (`ad::analysis::all_params`),
    /// and the layout of the directions of [`native::Native::jvp`] and
    /// [`native::Native::hvp`]. Wider than [`Input::wrt`] for logreg (its
    /// data `X` and `y`) and mlp (its input `x`).
    pub fn params(&self) -> &'static [usize] {
        match self {
            Input::Logreg { .. } => &[0, 1, 2],
            Input::Mlp { .. } => &[0, 1, 2, 3, 4],
            _ => &[0],
        }
    }

    /// Length of the flattened [`Input::params`].
    pub fn params_len(&self) -> usize {
        match self {
            Input::Logreg { x, y, w, .. } => x.len() + y.len() + w.len(),
            Input::Mlp { x, .. } => x.len() + self.grad_len(),
            _ => self.grad_len(),
        }
    }

    /// The values of [`Input::params`], flattened in argument order.
    pub fn flatten_params(&self) -> Vec<f64> {
        let mut f = Vec::with_capacity(self.params_len());
        match self {
            Input::Sincos { x } | Input::Powloop { x, .. } | Input::Recursion { x, .. } => {
                f.push(*x)
            }
            Input::Logsumexp { v } | Input::Branchy { v } => f.extend_from_slice(v),
            Input::Logreg { x, y, w, .. } => {
                f.extend_from_slice(x);
                f.extend_from_slice(y);
                f.extend_from_slice(w);
            }
            Input::Mlp { x, w1, b1, w2, b2 } => {
                f.extend_from_slice(x);
                f.extend_from_slice(w1);
                f.extend_from_slice(b1);
                f.extend_from_slice(w2);
                f.push(*b2);
            }
        }
        f
    }

    /// The same program with its [`Input::params`] replaced by `flat`
    /// (flattened as by [`Input::flatten_params`]).
    pub fn with_params(&self, flat: &[f64]) -> Input {
        assert_eq!(flat.len(), self.params_len(), "parameter count");
        let take = |at: &mut usize, k: usize| {
            *at += k;
            flat[*at - k..*at].to_vec()
        };
        let mut at = 0;
        match self {
            Input::Sincos { .. } => Input::Sincos { x: flat[0] },
            Input::Powloop { n, .. } => Input::Powloop { x: flat[0], n: *n },
            Input::Recursion { n, .. } => Input::Recursion { x: flat[0], n: *n },
            Input::Logsumexp { .. } => Input::Logsumexp { v: flat.to_vec() },
            Input::Branchy { .. } => Input::Branchy { v: flat.to_vec() },
            Input::Logreg { x, y, w, n, d } => Input::Logreg {
                x: take(&mut at, x.len()),
                y: take(&mut at, y.len()),
                w: take(&mut at, w.len()),
                n: *n,
                d: *d,
            },
            Input::Mlp { x, w1, b1, w2, .. } => Input::Mlp {
                x: take(&mut at, x.len()),
                w1: take(&mut at, w1.len()),
                b1: take(&mut at, b1.len()),
                w2: take(&mut at, w2.len()),
                b2: flat[flat.len() - 1],
            },
        }
    }

    /// Whether an implementation that computes the primal with exactly the
    /// same floating-point operations in the same order as the `.adasm`
    /// program must give a bit-identical value. False where a peer crate
    /// necessarily rounds differently (documented in `peers`).
    pub fn peer_value_exact(&self, peer: Peer) -> bool {
        !matches!((peer, self), (Peer::Reverse, Input::Logreg { .. }))
    }
}

/// The tape-based AD crates the suite compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// `reverse` 0.2.
    Reverse,
    /// `echidna` 0.15.
    Echidna,
}

/// All suite cases (inputs at their benchmark sizes) with their inputs.
pub fn cases() -> Vec<(Case, Input)> {
    testkit::suite::cases()
        .into_iter()
        .map(|c| {
            let i = Input::from_case(&c);
            (c, i)
        })
        .collect()
}

/// Relative closeness: `a == b`, or `|a - b| <= tol * max(|a|, |b|)`.
/// Strictly relative (no floor at 1, unlike `testkit::fd::close`): the
/// suite's values range from 1e-5 (recursion) to 250 (branchy).
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return false;
    }
    a == b || (a - b).abs() <= tol * a.abs().max(b.abs())
}

/// Index and values of the first pair of elements of `a` and `b` that are
/// not [`close`], or of a length mismatch.
pub fn first_mismatch(a: &[f64], b: &[f64], tol: f64) -> Option<(usize, f64, f64)> {
    if a.len() != b.len() {
        return Some((a.len().min(b.len()), f64::NAN, f64::NAN));
    }
    a.iter()
        .zip(b)
        .enumerate()
        .find(|(_, (x, y))| !close(**x, **y, tol))
        .map(|(i, (x, y))| (i, *x, *y))
}

/// Run every implementation of `case` once (two gradient rounds for the
/// ones with reusable state) and check that they agree with each other and
/// with testkit's references, with the tolerances of `tests/it/agree.rs`.
/// The benches call this before timing anything.
pub fn check_agreement(case: &Case) -> Result<(), String> {
    const VALUE_EXACT: f64 = 1e-12;
    const GRAD: f64 = 1e-8;
    let input = Input::from_case(case);
    let name = case.file;
    let value_ok = |what: &str, got: f64, want: f64, tol: f64| {
        if close(got, want, tol) {
            Ok(())
        } else {
            Err(format!("{name}: {what} value {got:e} vs {want:e}"))
        }
    };
    let grad_ok = |what: &str, got: &[f64], want: &[f64]| match first_mismatch(got, want, GRAD) {
        None => Ok(()),
        Some((i, a, b)) => Err(format!(
            "{name}: {what} gradient[{i}] = {a:e} vs native adjoint {b:e}"
        )),
    };
    let mut native = native::Native::new();
    let primal = native.primal(&input);
    value_ok(
        "native primal vs reference",
        primal,
        case.value,
        VALUE_EXACT,
    )?;
    let mut want = vec![f64::NAN; input.grad_len()];
    let value = native.grad(&input, &mut want);
    value_ok("native adjoint", value, primal, VALUE_EXACT)?;
    if let Some(d) = case.dfirst {
        if !close(want[0], d, GRAD) {
            return Err(format!(
                "{name}: native derivative {} vs reference {d}",
                want[0]
            ));
        }
    }
    let mut got = vec![f64::NAN; input.grad_len()];
    #[cfg(feature = "peers")]
    {
        const VALUE_LOOSE: f64 = 1e-9;
        let v = peers::ReversePeer::new().grad(&input, &mut got);
        let tol = |p| {
            if input.peer_value_exact(p) {
                VALUE_EXACT
            } else {
                VALUE_LOOSE
            }
        };
        value_ok("reverse", v, value, tol(Peer::Reverse))?;
        grad_ok("reverse", &got, &want)?;
        let v = peers::EchidnaPeer::new(&input).grad(&mut got);
        value_ok("echidna", v, value, tol(Peer::Echidna))?;
        grad_ok("echidna", &got, &want)?;
    }
    let mut a = advm::Advm::from_case(case)?;
    let p = a
        .primal()
        .map_err(|e| format!("{name}: advm primal: {e}"))?;
    value_ok("advm primal", p, value, VALUE_EXACT)?;
    // Twice on warm buffers as benchmarked (`grad`: the prepared path for
    // scalar programs), then by `grad_wrt_into` (`grad_general`).
    for general in [false, false, true] {
        let (label, v) = if general {
            ("advm grad_wrt_into", a.grad_general())
        } else {
            ("advm grad", a.grad())
        };
        let v = v.map_err(|e| format!("{name}: {label}: {e}"))?;
        value_ok(label, v, value, VALUE_EXACT)?;
        a.flat_grad(&mut got);
        grad_ok(label, &got, &want)?;
    }
    Ok(())
}
