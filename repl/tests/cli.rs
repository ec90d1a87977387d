//! The `advm` command line against the contract (adasm.md §5): outputs,
//! JSON shapes and every exit status.

use std::path::PathBuf;
use std::process::{Command, Output};

fn advm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(args)
        .current_dir(testkit::workspace_root())
        .output()
        .expect("advm runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn status(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn temp_program(src: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("p.adasm");
    std::fs::write(&path, src).expect("writes");
    (dir, path)
}

#[test]
fn run_prints_the_value() {
    let o = advm(&[
        "run",
        "programs/bench/powloop.adasm",
        "--fn",
        "@pow",
        "--args",
        "[2.0, 10]",
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "1024");
    let o = advm(&[
        "run",
        "programs/bench/powloop.adasm",
        "--fn",
        "pow",
        "--args",
        "[2.0, 10]",
        "--json",
    ]);
    assert_eq!(text(&o.stdout).trim(), r#"{"value":1024.0}"#);
}

#[test]
fn run_defaults_to_main_and_reads_an_args_file() {
    let (dir, path) =
        temp_program("fn @main(%x: f64) -> f64 {\nentry:\n    %y = mul %x, 3.0\n    ret %y\n}\n");
    let args = dir.path().join("args.json");
    std::fs::write(&args, "[1.5]").expect("writes");
    let o = advm(&[
        "run",
        path.to_str().expect("utf8"),
        "--args-file",
        args.to_str().expect("utf8"),
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "4.5");
}

#[test]
fn grad_text_and_json() {
    let o = advm(&[
        "grad",
        "programs/bench/powloop.adasm",
        "--fn",
        "pow",
        "--args",
        "[2.0, 10]",
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "value = 1024\n∂x = 5120\n∂n = -\n");
    let o = advm(&[
        "grad",
        "programs/bench/powloop.adasm",
        "--fn",
        "pow",
        "--args",
        "[2.0, 10]",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(j["value"], 1024.0);
    assert_eq!(j["grad"], serde_json::json!([5120.0, null]));
    let o = advm(&[
        "grad",
        "programs/horner.adasm",
        "--fn",
        "horner",
        "--args",
        "[[1, -2, 3], 2]",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(j["grad"], serde_json::json!([[4.0, 2.0, 1.0], 2.0]));
}

#[test]
fn check_prints_its_tolerance_and_fails_on_disagreement() {
    let o = advm(&[
        "check",
        "programs/bench/recursion.adasm",
        "--fn",
        "rec",
        "--args",
        "[0.9, 100]",
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("tolerance"), "{}", text(&o.stdout));
    // nograd makes AD and finite differences disagree on purpose.
    let o = advm(&[
        "check",
        "programs/nograd.adasm",
        "--fn",
        "f",
        "--args",
        "[3.0]",
    ]);
    assert_eq!(status(&o), 3, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("FAIL"));
}

#[test]
fn disasm_with_and_without_ad() {
    let o = advm(&["disasm", "programs/bench/powloop.adasm"]);
    assert_eq!(status(&o), 0);
    assert!(text(&o.stdout).contains("fn @pow("));
    let o = advm(&[
        "disasm",
        "programs/bench/powloop.adasm",
        "--fn",
        "pow",
        "--ad",
    ]);
    let out = text(&o.stdout);
    for m in [
        "@pow.fwd",
        "@pow.rev",
        "blk.push",
        "blk.pop",
        "comms.push",
        "comms.pop",
    ] {
        assert!(out.contains(m), "missing {m} in\n{out}");
    }
}

#[test]
fn bench_reports_json() {
    let o = advm(&[
        "bench",
        "programs/bench/sincos.adasm",
        "--fn",
        "sincos",
        "--args",
        "[0.9]",
        "--json",
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for k in [
        "primal_ns",
        "grad_ns",
        "ratio",
        "allocs_per_primal",
        "allocs_per_grad",
    ] {
        assert!(j[k].is_number(), "{k} in {j}");
    }
    assert_eq!(j["allocs_per_grad"], 0.0, "{j}");
}

#[test]
fn traps_exit_1_with_location() {
    let cases = [
        (
            vec![
                "run",
                "programs/traps.adasm",
                "--fn",
                "oob",
                "--args",
                "[5]",
            ],
            "out of bounds",
        ),
        (
            vec![
                "run",
                "programs/traps.adasm",
                "--fn",
                "neg",
                "--args",
                "[-3]",
            ],
            "negative length",
        ),
        (
            vec![
                "run",
                "programs/gcd.adasm",
                "--fn",
                "gcd",
                "--args",
                "[3, 0]",
            ],
            "remainder by zero",
        ),
        (
            vec![
                "run",
                "programs/collatz.adasm",
                "--fn",
                "collatz",
                "--args",
                "[0]",
            ],
            "division by zero",
        ),
        (
            vec![
                "run",
                "programs/mutual.adasm",
                "--fn",
                "even",
                "--args",
                "[0.5, 1000]",
                "--max-depth",
                "50",
            ],
            "call depth",
        ),
    ];
    for (args, msg) in cases {
        let o = advm(&args);
        assert_eq!(status(&o), 1, "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(
            err.contains(msg) && err.contains(" in @") && err.contains("block"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn assembly_errors_exit_2_with_file_line_col_and_caret() {
    let (_dir, path) =
        temp_program("fn @f(%x: f64) -> f64 {\nentry:\n    %y = add %x, 2\n    ret %y\n}\n");
    let o = advm(&[
        "run",
        path.to_str().expect("utf8"),
        "--fn",
        "f",
        "--args",
        "[1.0]",
    ]);
    assert_eq!(status(&o), 2);
    let err = text(&o.stderr);
    assert!(err.contains("p.adasm:3:18: error:"), "{err}");
    assert!(err.contains("2.0"), "{err}");
    assert!(err.contains('^'), "{err}");
}

#[test]
fn usage_errors_exit_64() {
    let cases: Vec<Vec<&str>> = vec![
        vec!["frobnicate"],
        vec!["run", "programs/bench/powloop.adasm", "--bogus"],
        vec![
            "run",
            "programs/bench/powloop.adasm",
            "--fn",
            "nope",
            "--args",
            "[]",
        ],
        vec![
            "run",
            "programs/bench/powloop.adasm",
            "--fn",
            "pow",
            "--args",
            "[2.0, ",
        ],
        vec![
            "run",
            "programs/bench/powloop.adasm",
            "--fn",
            "pow",
            "--args",
            "[2.0]",
        ],
        vec![
            "run",
            "programs/bench/powloop.adasm",
            "--fn",
            "pow",
            "--args",
            "[2.0, 1.5]",
        ],
        vec![
            "run",
            "programs/bench/powloop.adasm",
            "--fn",
            "pow",
            "--args-file",
            "/nonexistent/args.json",
        ],
        vec!["run", "/nonexistent/file.adasm"],
        vec![
            "grad",
            "programs/gcd.adasm",
            "--fn",
            "gcd",
            "--args",
            "[4, 6]",
        ],
    ];
    for args in cases {
        let o = advm(&args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert!(!text(&o.stderr).is_empty(), "{args:?}");
    }
}

#[test]
fn non_finite_values_print_as_strings_in_json() {
    let (_dir, path) = temp_program(
        "fn @f(%x: f64) -> f64 {\nentry:\n    %y = div 1.0, %x\n    ret %y\n}\nfn @g(%x: f64) -> f64 {\nentry:\n    %y = sqrt %x\n    ret %y\n}\n",
    );
    let p = path.to_str().expect("utf8");
    let o = advm(&["run", p, "--fn", "f", "--args", "[0.0]", "--json"]);
    assert_eq!(text(&o.stdout).trim(), r#"{"value":"inf"}"#);
    let o = advm(&["run", p, "--fn", "f", "--args", "[-0.0]"]);
    assert_eq!(text(&o.stdout).trim(), "-inf");
    let o = advm(&["run", p, "--fn", "g", "--args", "[-1.0]", "--json"]);
    assert_eq!(text(&o.stdout).trim(), r#"{"value":"nan"}"#);
    let o = advm(&["run", p, "--fn", "g", "--args", r#"["inf"]"#]);
    assert_eq!(text(&o.stdout).trim(), "inf");
}
