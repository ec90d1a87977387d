//! Every implementation of every suite program agrees: native primal,
//! native adjoint, `reverse`, `echidna` and advm (primal by `Vm::call_raw`
//! and `Engine::run`, gradient by `Engine::grad_into`), on the value and on
//! the gradient with respect to the differentiated inputs, and all match
//! testkit's independent reference values. The native adjoint is also
//! checked against finite differences of the native primal, so that a
//! failure of advm is told apart from a wrong baseline. The peers are
//! checked with the `peers` feature (`cargo test -p suite --features
//! peers`); without it the rest runs.
//!
//! Tolerances (relative): values 1e-12 where the arithmetic is the same
//! operation for operation, 1e-9 where a peer rounds differently
//! (`Input::peer_value_exact`); gradients 1e-8.

use ad::fd::{check, Verdict};
use suite::advm::{Advm, InVmLoop};
use suite::native::Native;
#[cfg(feature = "peers")]
use suite::peers::{EchidnaPeer, ReversePeer};
#[cfg(feature = "peers")]
use suite::Peer;
use suite::{cases, close, first_mismatch, Input};
use testkit::suite::Case;
use vm::Value;

const VALUE_EXACT: f64 = 1e-12;
#[cfg(feature = "peers")]
const VALUE_LOOSE: f64 = 1e-9;
const GRAD: f64 = 1e-8;

fn assert_value(what: &str, case: &Case, got: f64, want: f64, tol: f64) {
    assert!(
        close(got, want, tol),
        "{}: {what} value {got:e} vs {want:e} (rel tol {tol:e})",
        case.file
    );
}

fn assert_grad(what: &str, case: &Case, got: &[f64], want: &[f64]) {
    if let Some((i, a, b)) = first_mismatch(got, want, GRAD) {
        panic!(
            "{}: {what} gradient[{i}] = {a:e} vs native adjoint {b:e} (of {} entries)",
            case.file,
            want.len()
        );
    }
}

/// The native adjoint's value and flattened gradient, checked against the
/// native primal, testkit's references and finite differences.
fn native_reference(case: &Case, input: &Input) -> (f64, Vec<f64>) {
    let mut native = Native::new();
    let primal = native.primal(input);
    assert_value(
        "native primal vs reference",
        case,
        primal,
        case.value,
        VALUE_EXACT,
    );
    let mut g = vec![f64::NAN; input.grad_len()];
    let value = native.grad(input, &mut g);
    assert_value("native adjoint vs primal", case, value, primal, VALUE_EXACT);
    if let Some(d) = case.dfirst {
        assert!(
            close(g[0], d, GRAD),
            "{}: native derivative {} vs reference {d}",
            case.file,
            g[0]
        );
    }
    // A second call with warm buffers gives the same result.
    let mut g2 = vec![f64::NAN; input.grad_len()];
    assert_eq!(native.grad(input, &mut g2), value);
    assert_eq!(g, g2, "{}: native adjoint not repeatable", case.file);
    (value, g)
}

/// `flat` (over `input.wrt()`) spread back to one entry per argument.
fn unflatten(input: &Input, args: &[Value], flat: &[f64]) -> Vec<Option<Value>> {
    let mut out = vec![None; args.len()];
    let mut at = 0;
    for &i in input.wrt() {
        out[i] = Some(match &args[i] {
            Value::F64(_) => {
                at += 1;
                Value::F64(flat[at - 1])
            }
            Value::Arr(xs) => {
                at += xs.len();
                Value::Arr(flat[at - xs.len()..at].to_vec())
            }
            other => panic!("argument {i} ({other:?}) is not differentiable"),
        });
    }
    assert_eq!(at, flat.len());
    out
}

#[test]
fn native_adjoints_match_finite_differences() {
    for (case, input) in cases() {
        let (_, g) = native_reference(&case, &input);
        let mut native = Native::new();
        let verdict = check(
            |args| Some(native.primal(&Input::from_args(case.file, args))),
            &case.args,
            &unflatten(&input, &case.args, &g),
        );
        match verdict {
            Verdict::Agree => {}
            // branchy's v[0] = sin(0) = 0 sits on its kink.
            Verdict::Unreliable(why) if case.file == "branchy" => eprintln!("branchy: {why}"),
            other => panic!(
                "{}: native adjoint vs finite differences: {other:?}",
                case.file
            ),
        }
    }
}

#[cfg(feature = "peers")]
#[test]
fn peers_agree_with_native() {
    let mut rev = ReversePeer::new();
    for (case, input) in cases() {
        let (value, g) = native_reference(&case, &input);
        let mut got = vec![f64::NAN; input.grad_len()];
        for peer in [Peer::Reverse, Peer::Echidna] {
            got.fill(f64::NAN);
            let v = match peer {
                Peer::Reverse => rev.grad(&input, &mut got),
                Peer::Echidna => EchidnaPeer::new(&input).grad(&mut got),
            };
            let tol = if input.peer_value_exact(peer) {
                VALUE_EXACT
            } else {
                VALUE_LOOSE
            };
            let name = format!("{peer:?}");
            assert_value(&name, &case, v, value, tol);
            assert_value(&name, &case, v, case.value, tol);
            assert_grad(&name, &case, &got, &g);
        }
    }
}

#[test]
fn advm_agrees_with_native() {
    for (case, input) in cases() {
        let (value, g) = native_reference(&case, &input);
        let mut advm = Advm::from_case(&case).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let p = advm
            .primal()
            .unwrap_or_else(|e| panic!("{}: advm primal: {e}", case.file));
        assert_value("advm primal (call_raw)", &case, p, value, VALUE_EXACT);
        // Again: scalar arguments are converted once and reused, arrays
        // are copied into the heap again after `Vm::begin`.
        let p = advm
            .primal()
            .unwrap_or_else(|e| panic!("{}: advm primal again: {e}", case.file));
        assert_value("advm primal (second call)", &case, p, value, VALUE_EXACT);
        let r = advm
            .run()
            .unwrap_or_else(|e| panic!("{}: advm Engine::run: {e}", case.file));
        assert_value("advm Engine::run", &case, r, value, VALUE_EXACT);
        // Twice: the second call runs on warm buffers.
        for round in 0..2 {
            let v = advm
                .grad()
                .unwrap_or_else(|e| panic!("{}: advm gradient: {e}", case.file));
            assert_value(
                &format!("advm grad (round {round})"),
                &case,
                v,
                value,
                VALUE_EXACT,
            );
            let mut got = vec![f64::NAN; input.grad_len()];
            advm.flat_grad(&mut got);
            assert_grad(&format!("advm (round {round})"), &case, &got, &g);
            if let Some(d) = case.dfirst {
                assert!(close(got[0], d, GRAD), "{}: advm derivative", case.file);
            }
        }
    }
}

/// New arguments reach `Advm::primal`, whose scalar arguments are converted
/// once and then reused.
#[test]
fn advm_primal_sees_new_arguments() {
    let mut advm = Advm::load("sincos", "sincos", vec![Value::F64(0.9)]).expect("sincos loads");
    let at = |x: f64| x.cos().sin();
    assert_eq!(advm.primal().expect("primal"), at(0.9));
    advm.set_args(vec![Value::F64(0.25)]);
    assert_eq!(advm.primal().expect("primal"), at(0.25));
    assert_eq!(advm.primal().expect("primal"), at(0.25));
}

/// The in-VM driver (`advm_primal_in_vm`, the like-for-like timing against
/// Lua) computes the same value as the primal, once and many times.
#[test]
fn the_in_vm_loop_returns_the_primal_value() {
    for (case, input) in cases() {
        let (value, _) = native_reference(&case, &input);
        let mut l = InVmLoop::from_case(&case).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let mut executed = Vec::new();
        for reps in [1, 2, 7] {
            let v = l
                .run(reps)
                .unwrap_or_else(|e| panic!("{}: in-VM loop: {e}", case.file));
            assert_value(&format!("in-VM loop x{reps}"), &case, v, value, VALUE_EXACT);
            executed.push(l.executed());
        }
        // Each further call costs the function's own instructions plus the
        // loop's two (`call`, `jmp.step.if.lt.i`).
        let primal = Advm::from_case(&case)
            .and_then(|mut a| a.instruction_counts())
            .unwrap_or_else(|e| panic!("{}: {e}", case.file))
            .primal;
        assert_eq!(executed[1] - executed[0], primal + 2, "{}", case.file);
        assert_eq!(executed[2] - executed[0], 6 * (primal + 2), "{}", case.file);
    }
}

/// The driver takes its parameter types from the arguments: arguments that
/// do not fit the function, or a function that does not exist, are an
/// assembly error naming the problem, not a panic.
#[test]
fn the_in_vm_loop_rejects_arguments_that_do_not_fit() {
    let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";
    let mut ok = InVmLoop::from_source(src, "sq.adasm", "sq", vec![Value::F64(3.0)])
        .expect("fitting arguments assemble");
    assert_eq!(ok.run(3).expect("runs"), 9.0);
    for (func, args) in [
        ("sq", vec![Value::I64(3)]),
        ("sq", vec![Value::F64(3.0), Value::F64(1.0)]),
        ("nope", vec![Value::F64(3.0)]),
    ] {
        let err = InVmLoop::from_source(src, "sq.adasm", func, args)
            .err()
            .unwrap_or_else(|| panic!("@{func}: accepted"));
        assert!(err.contains("sq.adasm:"), "no location: {err}");
    }
}

/// The native tangent against central differences of the native primal
/// along a direction, and the native Hessian-vector product against
/// central differences of the native HVP's gradient, so that a wrong
/// native reference is told apart from a wrong advm.
#[test]
fn native_tangents_and_hvps_match_finite_differences() {
    const H: f64 = 1e-6;
    for (case, input) in cases() {
        let at = input.flatten_params();
        // branchy's v[0] = sin(0) = 0 sits on its kink: not moved.
        let dir: Vec<f64> = suite::modes::direction(&input)
            .iter()
            .zip(&at)
            .map(|(d, x)| if *x == 0.0 { 0.0 } else { *d })
            .collect();
        let moved = |s: f64| {
            let p: Vec<f64> = at.iter().zip(&dir).map(|(x, d)| x + s * H * d).collect();
            input.with_params(&p)
        };
        let mut native = Native::new();
        let (_, dy) = native.jvp(&input, &dir);
        let fd = (native.primal(&moved(1.0)) - native.primal(&moved(-1.0))) / (2.0 * H);
        assert!(
            close(dy, fd, 1e-6),
            "{}: native tangent {dy:e} vs finite differences {fd:e}",
            case.file
        );
        let len = input.params_len();
        let (mut g, mut hv) = (vec![0.0; len], vec![0.0; len]);
        native.hvp(&input, &dir, &mut g, &mut hv);
        let (mut gp, mut gm, mut scratch) = (vec![0.0; len], vec![0.0; len], vec![0.0; len]);
        native.hvp(&moved(1.0), &dir, &mut gp, &mut scratch);
        native.hvp(&moved(-1.0), &dir, &mut gm, &mut scratch);
        let fd: Vec<f64> = gp
            .iter()
            .zip(&gm)
            .map(|(p, m)| (p - m) / (2.0 * H))
            .collect();
        if let Some((i, a, b)) = suite::modes::vec_mismatch(&hv, &fd, 1e-4) {
            panic!(
                "{}: native hvp[{i}] = {a:e} vs finite differences {b:e}",
                case.file
            );
        }
    }
}

/// advm's jvp and hvp (and echidna's dual numbers and hvp with the `peers`
/// feature) agree with the native tangent and HVP, along all ones (as
/// benchmarked) and along a direction that is not.
#[test]
fn tangents_and_hvps_agree_with_native() {
    for (case, input) in cases() {
        for dir in [
            vec![1.0; input.params_len()],
            suite::modes::direction(&input),
        ] {
            if let Err(e) = suite::modes::check_modes(&case, &dir) {
                panic!("{e}");
            }
        }
    }
}
