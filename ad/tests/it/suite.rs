//! The benchmark suite (`programs/bench/`) at its benchmark inputs: values
//! and gradients against the independent reference values, and gradients of
//! the array programs against finite differences.

use ad::Engine;
use testkit::fd::{check, close, Verdict};
use testkit::suite::{cases, path};
use vm::Value;

#[test]
fn suite_values_and_gradients_match_references() {
    let root = testkit::workspace_root();
    for case in cases() {
        let src = std::fs::read_to_string(root.join(path(&case))).expect("program exists");
        let module = assembler::assemble(&src, &path(&case)).unwrap_or_else(|d| panic!("{d}"));
        let mut engine = Engine::new(module).expect("verifies");
        let f = engine.find(case.func).expect("function exists");
        let g = engine
            .grad(f, &case.args)
            .unwrap_or_else(|e| panic!("{}: {e}", case.file));
        assert!(
            close(g.value, case.value, 1e-12),
            "{}: value {} vs reference {}",
            case.file,
            g.value,
            case.value
        );
        if let Some(d) = case.dfirst {
            let Some(Value::F64(got)) = g.grad[0] else {
                panic!("{}: no f64 gradient", case.file)
            };
            assert!(
                close(got, d, 1e-9),
                "{}: derivative {got} vs reference {d}",
                case.file
            );
        }
        let verdict = check(
            |args| match engine.run(f, args) {
                Ok(Value::F64(y)) => Some(y),
                _ => None,
            },
            &case.args,
            &g.grad,
        );
        match verdict {
            Verdict::Agree => {}
            // branchy's v[0] = sin(0) = 0 sits on its kink.
            Verdict::Unreliable(why) if case.file == "branchy" => eprintln!("branchy: {why}"),
            other => panic!("{}: {other:?}", case.file),
        }
    }
}
