//! The `advm` command line against the contract (adasm.md §5): text and
//! `--json` outputs of run, grad, check, disasm and bench, and every exit
//! status (0, 1, 2, 3, 64, 74), run on the built binary.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn advm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(args)
        .current_dir(testkit::workspace_root())
        .stdin(Stdio::null())
        .output()
        .expect("advm runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn status(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o.stdout)))
}

/// Status 0, nothing on stderr; the stdout.
fn ok(args: &[&str]) -> String {
    let o = advm(args);
    assert_eq!(status(&o), 0, "{args:?}: {}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "", "{args:?}");
    text(&o.stdout)
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = advm(args);
    assert_eq!(status(&o), 0, "{args:?}: {}", text(&o.stderr));
    // One JSON object on one line.
    assert_eq!(text(&o.stdout).trim().lines().count(), 1, "{args:?}");
    json(&o)
}

fn temp_program(src: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("p.adasm");
    std::fs::write(&path, src).expect("writes");
    (dir, path)
}

const POW: &str = "programs/powloop.adasm";

#[test]
fn run_prints_the_value() {
    assert_eq!(
        ok(&["run", POW, "--fn", "@pow", "--args", "[2.0, 10]"]),
        "1024\n"
    );
    assert_eq!(
        ok(&["run", POW, "--fn", "pow", "--args", "[2.0, 10]", "--json"]),
        "{\"value\":1024.0}\n"
    );
    // Floats round-trip.
    let v = ok(&["run", POW, "--fn", "pow", "--args", "[1.0001, 1000]"]);
    assert_eq!(v.trim().parse::<f64>().ok(), Some(1.1051653926032188));
    // i64 and bool results.
    let gcd = [
        "run",
        "programs/gcd.adasm",
        "--fn",
        "gcd",
        "--args",
        "[48, 18]",
    ];
    assert_eq!(ok(&gcd), "6\n");
    assert_eq!(ok_json(&[&gcd[..], &["--json"]].concat())["value"], 6);
    let b = [
        "run",
        "programs/bool_logic.adasm",
        "--fn",
        "f",
        "--args",
        "[true, false, 1.0, 2.0]",
    ];
    assert_eq!(ok(&b), "true\n");
    assert_eq!(ok_json(&[&b[..], &["--json"]].concat())["value"], true);
    // A function with no result (adasm.md §7): `none`, and a null value.
    let unit = [
        "run",
        "programs/no_result.adasm",
        "--fn",
        "fill",
        "--args",
        "[2.0]",
    ];
    assert_eq!(ok(&unit), "none\n");
    let j = ok_json(&[&unit[..], &["--json"]].concat());
    assert_eq!(j, serde_json::json!({"value": null}));
}

#[test]
fn run_defaults_to_main_and_reads_an_args_file() {
    let (dir, path) = temp_program(
        "fn @main(%x: f64, %n: i64) -> f64[] {\nentry:\n    %a = anew %n\n    aset %a, 0, %x\n    ret %a\n}\n",
    );
    let args = dir.path().join("args.json");
    std::fs::write(&args, "[1.5, 3]").expect("writes");
    let p = path.to_str().expect("utf8");
    let a = args.to_str().expect("utf8");
    assert_eq!(ok(&["run", p, "--args-file", a]), "[1.5, 0, 0]\n");
    assert_eq!(
        ok_json(&["run", p, "--args-file", a, "--json"])["value"],
        serde_json::json!([1.5, 0.0, 0.0])
    );
}

#[test]
fn grad_text_and_json() {
    assert_eq!(
        ok(&["grad", POW, "--fn", "pow", "--args", "[2.0, 10]"]),
        "value = 1024\n∂x = 5120\n∂n = -\n"
    );
    let j = ok_json(&["grad", POW, "--fn", "pow", "--args", "[2.0, 10]", "--json"]);
    assert_eq!(
        j,
        serde_json::json!({"value": 1024.0, "grad": [5120.0, null]})
    );
    let j = ok_json(&[
        "grad",
        "programs/horner.adasm",
        "--fn",
        "horner",
        "--args",
        "[[1, -2, 3], 2]",
        "--json",
    ]);
    assert_eq!(j["grad"], serde_json::json!([[4.0, 2.0, 1.0], 2.0]));
    assert_eq!(
        ok(&[
            "grad",
            "programs/horner.adasm",
            "--fn",
            "horner",
            "--args",
            "[[1, -2, 3], 2]"
        ]),
        "value = 3\n∂c = [4, 2, 1]\n∂x = 2\n"
    );
}

#[test]
fn long_array_gradients_print_in_full_on_the_command_line() {
    let twelve = format!("[[{}]]", ["0.5"; 12].join(", "));
    let args = [
        "grad",
        "programs/array_sum.adasm",
        "--fn",
        "sum",
        "--args",
        &twelve,
    ];
    // As `run` prints arrays: every element (only the REPL shortens).
    let ones = ["1"; 12].join(", ");
    assert_eq!(ok(&args), format!("value = 6\n∂v = [{ones}]\n"));
    let j = ok_json(&[&args[..], &["--json"]].concat());
    assert_eq!(j["grad"][0], serde_json::json!(vec![1.0; 12]));
}

#[test]
fn non_finite_values_print_as_strings_in_json() {
    let (_dir, path) = temp_program(
        "fn @f(%x: f64) -> f64 {\nentry:\n    %y = div 1.0, %x\n    ret %y\n}\n\
         fn @g(%x: f64) -> f64 {\nentry:\n    %y = sqrt %x\n    ret %y\n}\n\
         fn @h() -> f64[] {\nentry:\n    %a = anew 4\n    aset %a, 0, inf\n    aset %a, 1, nan\n    aset %a, 2, -inf\n    ret %a\n}\n",
    );
    let p = path.to_str().expect("utf8");
    assert_eq!(
        ok(&["run", p, "--fn", "f", "--args", "[0.0]", "--json"]),
        "{\"value\":\"inf\"}\n"
    );
    assert_eq!(ok(&["run", p, "--fn", "f", "--args", "[-0.0]"]), "-inf\n");
    assert_eq!(
        ok(&["run", p, "--fn", "g", "--args", "[-1.0]", "--json"]),
        "{\"value\":\"nan\"}\n"
    );
    // "inf" as an argument (an extension) and inside arrays.
    assert_eq!(
        ok(&["run", p, "--fn", "g", "--args", r#"["inf"]"#]),
        "inf\n"
    );
    assert_eq!(
        ok_json(&["run", p, "--fn", "h", "--json"])["value"],
        serde_json::json!(["inf", "nan", "-inf", 0.0])
    );
    // A non-finite gradient entry: d/da a^0.5 at a = 0.
    assert_eq!(
        ok_json(&[
            "grad",
            "programs/pow_rules.adasm",
            "--fn",
            "p",
            "--args",
            "[0.0, 0.5]",
            "--json"
        ]),
        serde_json::json!({"value": 0.0, "grad": ["inf", 0.0]})
    );
}

#[test]
fn check_prints_its_tolerance_and_exits_3_on_disagreement() {
    let out = ok(&[
        "check",
        "programs/recursion.adasm",
        "--fn",
        "rec",
        "--args",
        "[0.9, 100]",
    ]);
    assert!(out.contains("tolerance: |ad - fd| <= 1e-5"), "{out}");
    assert!(out.contains("ok   ∂x "), "{out}");
    // The gradient entry, then forward mode's tangent along max(1, |x|).
    assert!(out.contains("ok   jvp "), "{out}");
    assert!(out.ends_with("all 2 entries agree\n"), "{out}");
    let out = ok(&[
        "check",
        "programs/horner.adasm",
        "--fn",
        "horner",
        "--args",
        "[[0.5, 1.5, -1.0], 0.7]",
    ]);
    for entry in ["∂c[0]", "∂c[1]", "∂c[2]", "∂x"] {
        assert!(out.contains(entry), "{entry} in {out}");
    }
    // nograd makes AD and finite differences disagree on purpose.
    let args = [
        "check",
        "programs/nograd.adasm",
        "--fn",
        "f",
        "--args",
        "[3.0]",
    ];
    let o = advm(&args);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("FAIL ∂x")
            && out.contains("FAIL jvp")
            && out.contains("2 of 2 entries disagree"),
        "{out}"
    );
    let o = advm(&[&args[..], &["--json"]].concat());
    assert_eq!(status(&o), 3);
    let j = json(&o);
    assert_eq!(j["ok"], false);
    assert_eq!(j["tolerance"], 1e-5);
    assert_eq!(j["value"], 12.0);
    assert_eq!(j["entries"][0]["param"], "x");
    assert_eq!(j["entries"][0]["ad"], 4.0);
    assert_eq!(j["entries"][0]["ok"], false);
    let fd = j["entries"][0]["fd"].as_f64().expect("number");
    assert!((fd - 7.0).abs() < 1e-6, "{j}");
    // The tangent along s = max(1, |x|) = 3: AD 4·3, differences 7·3.
    assert_eq!(j["tangent"]["ad"], 12.0, "{j}");
    assert_eq!(j["tangent"]["ok"], false, "{j}");
    let fd = j["tangent"]["fd"].as_f64().expect("number");
    assert!((fd - 21.0).abs() < 1e-6, "{j}");
}

/// A trap in a finite-difference run (a neighbour of the point, h away)
/// says so: the point itself runs, and `check` names the neighbour.
#[test]
fn check_names_the_neighbour_where_finite_differences_trap() {
    let (_dir, path) = temp_program(
        "fn @f(%v: f64[], %x: f64) -> f64 {\nentry:\n    %i = ftoi %x\n    \
         %e = aget %v, %i\n    %y = mul %e, %x\n    ret %y\n}\n",
    );
    let path = path.to_str().expect("utf-8 path");
    let args = ["--fn", "f", "--args", "[[1.0, 2.0], 1.9999999999]"];
    assert!(ok(&[&["grad", path][..], &args].concat()).starts_with("value = 3.9999999998\n"));
    let o = advm(&[&["check", path][..], &args].concat());
    assert_eq!(status(&o), 1);
    let err = text(&o.stderr);
    assert!(
        err.contains("trap: array index 2 out of bounds for length 2 in @f")
            && err.contains("note: in a finite-difference run, with x = 2.0000019999 (x + h)"),
        "{err}"
    );
}

#[test]
fn disasm_with_and_without_ad() {
    let out = ok(&["disasm", "programs/mutual.adasm"]);
    assert!(
        out.contains("fn @even(") && out.contains("fn @odd("),
        "{out}"
    );
    let out = ok(&["disasm", POW, "--fn", "pow"]);
    assert!(
        out.contains("fn @pow(") && !out.contains("@pow.rev"),
        "{out}"
    );
    let out = ok(&["disasm", POW, "--fn", "@pow", "--ad"]);
    for m in ["@pow.fwd", "@pow.rev", "comms.push", "comms.pop"] {
        assert!(out.contains(m), "missing {m} in\n{out}");
    }
    // powloop's loop is counted: its reverse counts iterations down instead
    // of popping a block id per iteration.
    assert!(!out.contains("blk."), "{out}");
    // A branch that joins inside a loop is replayed from the block stack
    // (its condition reads a value the loop overwrites, so it is not
    // if-converted).
    let out = ok(&[
        "disasm",
        "programs/branch_in_loop.adasm",
        "--fn",
        "walk",
        "--ad",
    ]);
    for m in ["blk.push", "blk.pop"] {
        assert!(out.contains(m), "missing {m} in\n{out}");
    }
    // branchy's too, unless its small arms are if-converted: then
    // selects and no block ids.
    let out = ok(&[
        "disasm",
        "programs/bench/branchy.adasm",
        "--fn",
        "branchy",
        "--ad",
    ]);
    assert!(out.contains("blk.pop") && !out.contains("select"), "{out}");
    let out = ok(&[
        "disasm",
        "programs/bench/branchy.adasm",
        "--fn",
        "branchy",
        "--ad",
        "--if-convert",
    ]);
    assert!(out.contains("select") && !out.contains("blk."), "{out}");
    // Callees are derived with their caller (not inlined here).
    let out = ok(&[
        "disasm",
        "programs/mutual.adasm",
        "--fn",
        "even",
        "--ad",
        "--no-inline",
    ]);
    assert!(
        out.contains("@odd.fwd") && out.contains("@odd.rev"),
        "{out}"
    );
}

#[test]
fn bench_reports_json_and_text() {
    let args = [
        "bench",
        "programs/sincos.adasm",
        "--fn",
        "sincos",
        "--args",
        "[0.9, -0.4]",
    ];
    let j = ok_json(&[&args[..], &["--json"]].concat());
    for k in [
        "primal_ns",
        "grad_ns",
        "ratio",
        "allocs_per_primal",
        "allocs_per_grad",
        "jvp_ns",
        "allocs_per_jvp",
    ] {
        assert!(j[k].is_number(), "{k} in {j}");
    }
    assert!(j["primal_ns"].as_f64() > Some(0.0), "{j}");
    // Warm gradient and jvp calls reuse the engine's arenas.
    assert_eq!(j["allocs_per_grad"], 0.0, "{j}");
    assert_eq!(j["allocs_per_jvp"], 0.0, "{j}");
    let out = ok(&args);
    assert!(
        out.contains("primal:") && out.contains("grad:") && out.contains("ratio:"),
        "{out}"
    );
    assert!(out.contains("jvp:"), "{out}");
}

#[test]
fn help_and_version_exit_0() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["help", "grad"],
    ] {
        let o = advm(args);
        assert_eq!(status(&o), 0, "{args:?}: {}", text(&o.stderr));
        assert!(!o.stdout.is_empty(), "{args:?}");
    }
    let out = ok(&["--help"]);
    for cmd in ["run", "grad", "check", "disasm", "bench", "repl"] {
        assert!(out.contains(cmd), "{cmd} in {out}");
    }
}

#[test]
fn help_and_version_to_an_unwritable_stdout_exit_74() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["help", "grad"],
    ] {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return; // not Linux
        };
        let o = Command::new(env!("CARGO_BIN_EXE_advm"))
            .args(args)
            .stdout(full)
            .output()
            .expect("advm runs");
        assert_eq!(status(&o), 74, "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).starts_with("advm: cannot write to standard output: "),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn disasm_ad_prints_every_derived_function_once() {
    let (_dir, path) = temp_program(&testkit::r#gen::call_chain(4));
    let out = ok(&[
        "disasm",
        path.to_str().expect("utf8"),
        "--ad",
        "--no-inline",
    ]);
    let heads: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("fn @"))
        .map(|l| l.split('(').next().unwrap_or(""))
        .collect();
    // The functions, then depth first from each in file order: forward
    // functions down the chain, then reverse ones.
    assert_eq!(
        heads,
        [
            "f0", "f1", "f2", "f3", "f0.fwd", "f1.fwd", "f2.fwd", "f3.fwd", "f0.rev", "f1.rev",
            "f2.rev", "f3.rev"
        ],
        "{out}"
    );
    // One function's listing is unchanged: it and its callees, once each.
    let (_dir, path) = temp_program(&testkit::r#gen::call_chain(3));
    let out = ok(&[
        "disasm",
        path.to_str().expect("utf8"),
        "--fn",
        "f1",
        "--ad",
        "--no-inline",
    ]);
    let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("fn @")).collect();
    assert_eq!(heads.len(), 5, "{out}");
    // Long chains stay linear (it printed 9.5 million lines for 1 000).
    let (_dir, path) = temp_program(&testkit::r#gen::call_chain(1000));
    let out = ok(&[
        "disasm",
        path.to_str().expect("utf8"),
        "--ad",
        "--no-inline",
    ]);
    assert_eq!(out.lines().filter(|l| l.starts_with("fn @")).count(), 3000);
}

#[test]
fn a_file_that_is_not_utf8_is_an_assembly_error_at_the_first_bad_byte() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("latin1.adasm");
    std::fs::write(
        &path,
        b"; caf\xE9\nfn @main() -> f64 {\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    for cmd in ["run", "grad", "disasm", "cfg"] {
        let mut args = vec![cmd, path.to_str().expect("utf8")];
        if cmd == "cfg" {
            args.extend(["--fn", "main"]);
        }
        let o = advm(&args);
        assert_eq!(status(&o), 2, "{cmd}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(
            err.contains(
                "latin1.adasm:1:6: error: invalid UTF-8: byte 0xE9 (byte 5 of the file) is not \
                 part of a UTF-8 character; source files must be UTF-8\n1 │ ; caf\u{FFFD}\n  │      ^"
            ),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn one_leading_bom_is_skipped_and_a_second_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let one = dir.path().join("one.adasm");
    std::fs::write(
        &one,
        "\u{FEFF}fn @main() -> f64 { $\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    let o = advm(&["run", one.to_str().expect("utf8")]);
    assert_eq!(status(&o), 2, "{}", text(&o.stderr));
    // Column 21 of the line as seen, which is shown without the mark.
    assert!(
        text(&o.stderr).contains(
            "one.adasm:1:21: error: unexpected character `$`\n1 │ fn @main() -> f64 { $\n  │                     ^"
        ),
        "{}",
        text(&o.stderr)
    );
    std::fs::write(
        &one,
        "\u{FEFF}fn @main() -> f64 {\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    assert_eq!(ok(&["run", one.to_str().expect("utf8")]), "1\n");
    let two = dir.path().join("two.adasm");
    std::fs::write(
        &two,
        "\u{FEFF}\u{FEFF}fn @main() -> f64 {\nentry:\n    ret 1.0\n}\n",
    )
    .expect("writes");
    let o = advm(&["run", two.to_str().expect("utf8")]);
    assert_eq!(status(&o), 2, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("two.adasm:1:1: error: unexpected byte-order mark (U+FEFF)"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn usage_messages_say_what_the_user_wrote() {
    let err = |args: &[&str]| {
        let o = advm(args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        text(&o.stderr)
    };
    let e = err(&["run", POW, "--fn", "@@pow", "--args", "[2.0, 1]"]);
    assert!(
        e.starts_with("advm: --fn `@@pow` is not a function name: write NAME or @NAME"),
        "{e}"
    );
    let e = err(&["run", POW, "--fn", "@nope", "--args", "[2.0, 1]"]);
    assert!(e.contains("has no function @nope (it defines @pow)"), "{e}");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("args.json");
    std::fs::write(&file, "[2.0, 1").expect("writes");
    let f = file.to_str().expect("utf8");
    let e = err(&["run", POW, "--fn", "pow", "--args-file", f]);
    assert!(
        e.starts_with(&format!("advm: the arguments file {f} is not valid JSON: ")),
        "{e}"
    );
    std::fs::write(&file, "[2.0, 1.5]").expect("writes");
    let e = err(&["run", POW, "--fn", "pow", "--args-file", f]);
    assert!(
        e.contains(&format!("the arguments file {f}, argument 2: ")),
        "{e}"
    );
    // Saved with a byte-order mark: still JSON.
    std::fs::write(&file, "\u{FEFF}[2.0, 3]").expect("writes");
    assert_eq!(ok(&["run", POW, "--fn", "pow", "--args-file", f]), "8\n");
    for big in ["9223372036854775808", "-9223372036854775809", "1e30"] {
        let args = format!("[2.0, {big}]");
        let e = err(&["run", POW, "--fn", "pow", "--args", &args]);
        assert!(
            e.contains("argument 2: the parameter is i64: ")
                && e.contains(
                    "is out of the i64 range (-9223372036854775808 to 9223372036854775807)"
                ),
            "{e}"
        );
    }
    let e = err(&["run", POW, "--fn", "pow", "--args", "[2.0, 2.5]"]);
    assert!(e.contains("expected an integer, found 2.5"), "{e}");
}

#[test]
fn traps_exit_1_naming_function_block_and_instruction() {
    let cases: [(&[&str], &str); 9] = [
        (
            &[
                "run",
                "programs/traps.adasm",
                "--fn",
                "pick",
                "--args",
                "[[1.0, 2.0], 5]",
            ],
            "array index 5 out of bounds for length 2",
        ),
        (
            &[
                "run",
                "programs/traps.adasm",
                "--fn",
                "put",
                "--args",
                "[-1]",
            ],
            "out of bounds",
        ),
        (
            &[
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
            &[
                "run",
                "programs/collatz.adasm",
                "--fn",
                "collatz",
                "--args",
                "[0]",
            ],
            "integer division by zero",
        ),
        (
            &[
                "run",
                "programs/gcd.adasm",
                "--fn",
                "gcd",
                "--args",
                "[3, 0]",
            ],
            "integer remainder by zero",
        ),
        (
            &[
                "grad",
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
        (
            &[
                "run",
                POW,
                "--fn",
                "pow",
                "--args",
                "[1.0, 1000000]",
                "--fuel",
                "1000",
            ],
            "out of fuel",
        ),
        (
            &[
                "check",
                "programs/array_build.adasm",
                "--fn",
                "f",
                "--args",
                "[0.5, 100]",
                "--max-array",
                "10",
            ],
            "array limit",
        ),
        (
            &[
                "grad",
                "programs/conversions.adasm",
                "--fn",
                "f",
                "--args",
                r#"["nan"]"#,
            ],
            "ftoi",
        ),
    ];
    for (args, msg) in cases {
        let o = advm(args);
        let err = text(&o.stderr);
        assert_eq!(status(&o), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        // FILE: trap: MESSAGE in @f, block B, at `INSTRUCTION` (line N)
        assert!(
            err.starts_with(&format!("{}: trap: ", args[1]))
                && err.contains(msg)
                && err.contains(" in @")
                && err.contains("block")
                && err.contains("(line "),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn assembly_errors_exit_2_with_file_line_col_and_caret() {
    let (_dir, path) = temp_program(
        "fn @f(%x: f64) -> f64 {\nentry:\n    %y = add %x, 2\n    %z = mul %y, %nope\n    ret %z\n}\n",
    );
    let p = path.to_str().expect("utf8");
    for cmd in ["run", "grad", "check", "disasm", "bench"] {
        let o =
            advm(&[cmd, p, "--fn", "f", "--args", "[1.0]"][..if cmd == "disasm" { 4 } else { 6 }]);
        assert_eq!(status(&o), 2, "{cmd}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        // Every error, each with its location, source line and caret.
        assert!(err.contains("p.adasm:3:18: error:"), "{err}");
        assert!(err.contains("2.0"), "{err}");
        assert!(err.contains("p.adasm:4:"), "{err}");
        assert!(
            err.contains("    %y = add %x, 2") && err.contains('^'),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn usage_errors_exit_64() {
    let (dir, _) = temp_program("");
    let args_dir = dir.path().to_str().expect("utf8");
    let cases: Vec<Vec<&str>> = vec![
        // Unknown subcommand or flag, missing FILE.
        vec!["frobnicate"],
        vec!["run", POW, "--bogus"],
        vec!["run"],
        vec!["grad", POW, "--fn"],
        // --fn naming no function, with or without `@`.
        vec!["run", POW, "--fn", "nope", "--args", "[]"],
        vec!["grad", POW, "--fn", "@nope", "--args", "[1.0, 2]"],
        vec!["disasm", POW, "--fn", "nope"],
        vec!["run", POW],
        // --args not JSON, not an array, wrong count or kinds.
        vec!["run", POW, "--fn", "pow", "--args", "[2.0, "],
        vec!["run", POW, "--fn", "pow", "--args", "{\"x\": 1}"],
        vec!["run", POW, "--fn", "pow", "--args", "[2.0]"],
        vec!["run", POW, "--fn", "pow", "--args", "[2.0, 10, 1]"],
        vec!["run", POW, "--fn", "pow", "--args", "[2.0, 1.5]"],
        vec!["run", POW, "--fn", "pow", "--args", "[2.0, 10.0]"],
        vec!["run", POW, "--fn", "pow", "--args", "[2.0, \"10\"]"],
        vec!["run", POW, "--fn", "pow", "--args", "[true, 10]"],
        vec!["run", POW, "--fn", "pow", "--args", "[[2.0], 10]"],
        vec![
            "run",
            POW,
            "--fn",
            "pow",
            "--args",
            "[2.0, 99999999999999999999]",
        ],
        vec![
            "grad",
            "programs/horner.adasm",
            "--fn",
            "horner",
            "--args",
            "[1.0, 2.0]",
        ],
        vec![
            "grad",
            "programs/horner.adasm",
            "--fn",
            "horner",
            "--args",
            "[[1.0, true], 2.0]",
        ],
        vec![
            "run",
            "programs/bool_logic.adasm",
            "--fn",
            "f",
            "--args",
            "[1, false, 1.0, 2.0]",
        ],
        // A parameterised function without --args.
        vec!["grad", POW, "--fn", "pow"],
        // Unreadable arguments file; both --args and --args-file.
        vec![
            "run",
            POW,
            "--fn",
            "pow",
            "--args-file",
            "/nonexistent/args.json",
        ],
        vec!["run", POW, "--fn", "pow", "--args-file", args_dir],
        vec![
            "run",
            POW,
            "--fn",
            "pow",
            "--args",
            "[2.0, 1]",
            "--args-file",
            "a.json",
        ],
        // Missing or unreadable program file.
        vec!["run", "/nonexistent/file.adasm"],
        vec!["disasm", args_dir],
        // Differentiating a function that does not return f64.
        vec![
            "grad",
            "programs/gcd.adasm",
            "--fn",
            "gcd",
            "--args",
            "[4, 6]",
        ],
        vec![
            "check",
            "programs/bool_logic.adasm",
            "--fn",
            "f",
            "--args",
            "[true, false, 1.0, 2.0]",
        ],
        // A bad limit.
        vec![
            "run", POW, "--fn", "pow", "--args", "[2.0, 1]", "--fuel", "-5",
        ],
    ];
    for args in cases {
        let o = advm(&args);
        let err = text(&o.stderr);
        assert_eq!(status(&o), 64, "{args:?}: {err}");
        assert!(
            !err.is_empty() && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // Messages name the file or the function.
    let err = text(&advm(&["run", POW, "--fn", "nope", "--args", "[]"]).stderr);
    assert!(
        err.contains("powloop.adasm") && err.contains("@nope") && err.contains("@pow"),
        "{err}"
    );
    let err = text(&advm(&["run", "/nonexistent/file.adasm"]).stderr);
    assert!(err.contains("/nonexistent/file.adasm"), "{err}");
    let err = text(&advm(&["run", POW, "--fn", "pow", "--args", "[2.0, 1.5]"]).stderr);
    assert!(
        err.contains("argument 2") && err.contains("integer"),
        "{err}"
    );
}

#[test]
fn a_closed_pipe_is_not_a_panic() {
    let (_dir, path) =
        temp_program("fn @main(%n: i64) -> f64[] {\nentry:\n    %a = anew %n\n    ret %a\n}\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["run", path.to_str().expect("utf8"), "--args", "[2000000]"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm runs");
    // Nobody reads: close our end before advm writes its 6 MB line.
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("advm ends");
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

#[test]
fn an_unwritable_stdout_exits_74() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not Linux
    };
    let o = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["run", POW, "--fn", "pow", "--args", "[2.0, 10]"])
        .current_dir(testkit::workspace_root())
        .stdout(full)
        .output()
        .expect("advm runs");
    assert_eq!(status(&o), 74, "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("cannot write to standard output"));
}

#[test]
fn grad_with_respect_to_some_parameters() {
    let logreg = "programs/bench/logreg.adasm";
    let args = "[[0.5, -1.0, 0.25, 2.0, -0.5, 1.5], [1.0, -1.0, 1.0], [0.1, -0.2], 3, 2]";
    let full = ok_json(&["grad", logreg, "--fn", "logreg", "--args", args, "--json"]);
    let part = ok_json(&[
        "grad", logreg, "--fn", "logreg", "--args", args, "--json", "--wrt", "%w",
    ]);
    assert_eq!(part["value"], full["value"]);
    assert_eq!(part["grad"][2], full["grad"][2], "the same numbers for w");
    for i in [0, 1, 3, 4] {
        assert!(part["grad"][i].is_null(), "{part}");
    }
    // Several names, with or without %, comma-separated.
    let two = ok_json(&[
        "grad", logreg, "--fn", "logreg", "--args", args, "--json", "--wrt", "w,%y",
    ]);
    assert_eq!(two["grad"][1], full["grad"][1]);
    assert_eq!(two["grad"][2], full["grad"][2]);
    assert!(two["grad"][0].is_null(), "{two}");
    // Text output marks the unselected parameters like integers.
    let out = ok(&[
        "grad", logreg, "--fn", "logreg", "--args", args, "--wrt", "w",
    ]);
    assert!(out.contains("∂X = -") && out.contains("∂w = ["), "{out}");
    // check compares the selected entries only.
    let c = ok_json(&[
        "check", logreg, "--fn", "logreg", "--args", args, "--json", "--wrt", "w",
    ]);
    let entries = c["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{c}");
    assert!(entries
        .iter()
        .all(|e| e["param"].as_str().is_some_and(|p| p.starts_with("w"))));
    // The derived code is named after the selection.
    let text = ok(&["disasm", logreg, "--fn", "logreg", "--ad", "--wrt", "w"]);
    assert!(text.contains("@logreg.rev.wrt.w("), "{text}");
    // Bad selections are bad usage.
    for (wrt, why) in [
        ("N", "%N: it is i64"),
        ("nope", "no parameter %nope"),
        ("", "names no parameter"),
    ] {
        let o = advm(&[
            "grad", logreg, "--fn", "logreg", "--args", args, "--wrt", wrt,
        ]);
        assert_eq!(status(&o), 64, "{wrt:?}");
        assert!(text_of(&o).contains(why), "{wrt:?}: {}", text_of(&o));
        assert!(o.stdout.is_empty());
    }
    let o = advm(&[
        "run", logreg, "--fn", "logreg", "--args", args, "--wrt", "w",
    ]);
    assert_eq!(status(&o), 64);
    assert!(
        text_of(&o).contains("--wrt applies to grad"),
        "{}",
        text_of(&o)
    );
    // disasm --wrt needs --ad, and --fn when the file has several
    // functions (this one has only @logreg).
    assert_eq!(
        ok(&["disasm", logreg, "--ad", "--wrt", "w"]),
        ok(&["disasm", logreg, "--ad", "--wrt", "w", "--fn", "logreg"])
    );
    assert_eq!(status(&advm(&["disasm", logreg, "--wrt", "w"])), 64);
}

fn text_of(o: &Output) -> String {
    text(&o.stderr)
}

/// `--args` reads decimals correctly rounded: every f64 printed by advm
/// (Rust's shortest round-trip form) comes back as the same f64.
#[test]
fn args_read_floats_exactly() {
    let (_dir, path) = temp_program("fn @id(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n");
    let p = path.to_str().expect("utf-8");
    for x in [
        "-0.11683628085894873",
        "0.1",
        "1.1051653926032188",
        "2.2250738585072014e-308",
        "5e-324",
        "1.7976931348623157e308",
        "0.30000000000000004",
    ] {
        let args = format!("[{x}]");
        let out = ok(&["run", p, "--fn", "id", "--args", &args]);
        let back: f64 = out.trim().parse().expect("a float");
        let want: f64 = x.parse().expect("a float");
        assert_eq!(back.to_bits(), want.to_bits(), "{x} came back as {out}");
    }
}

#[test]
fn jvp_text_and_json() {
    // pow(x, n) = x^n: tangent n x^(n-1) dx.
    let args = [
        "jvp",
        POW,
        "--fn",
        "pow",
        "--args",
        "[1.5, 4]",
        "--dir",
        "[2.0, null]",
    ];
    let want = 2.0 * 4.0 * 1.5f64.powi(3);
    assert_eq!(
        ok(&args),
        format!("value = {}\ntangent = {want}\n", 1.5f64.powi(4))
    );
    let j = ok_json(&[&args[..], &["--json"]].concat());
    assert_eq!(j["value"], 1.5f64.powi(4));
    assert_eq!(j["tangent"], want);
    assert!(j.get("arg_tangents").is_none(), "{j}");
    // `--wrt` and a zero direction outside it.
    let j = ok_json(&[&args[..], &["--wrt", "x", "--json"]].concat());
    assert_eq!(j["tangent"], want);

    // An array result: value and tangent are arrays.
    let j = ok_json(&[
        "jvp",
        "programs/array_return.adasm",
        "--fn",
        "powers",
        "--args",
        "[2.0, 4]",
        "--dir",
        "[1, null]",
        "--json",
    ]);
    assert_eq!(j["value"], serde_json::json!([1.0, 2.0, 4.0, 8.0]));
    assert_eq!(j["tangent"], serde_json::json!([0.0, 1.0, 4.0, 12.0]));

    // An array parameter written in place: its tangent after the call.
    let arr = [
        "jvp",
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--args",
        "[[1, 2, 3], 2.0]",
        "--dir",
        "[[1, 1, 1], 0.5]",
    ];
    let j = ok_json(&[&arr[..], &["--json"]].concat());
    // f = s² Σ v²; v becomes s v, with tangent s dv + v ds.
    assert_eq!(j["value"], 56.0);
    assert_eq!(j["tangent"], 8.0 + 16.0 + 24.0 + 56.0 * 0.5);
    assert_eq!(
        j["arg_tangents"],
        serde_json::json!([[2.5, 3.0, 3.5], null])
    );
    assert_eq!(
        ok(&arr),
        "value = 56\ntangent = 76\ntangent of %v = [2.5, 3, 3.5]\n"
    );
}

#[test]
fn jvp_usage_errors_exit_64() {
    let base = ["jvp", POW, "--fn", "pow", "--args", "[1.5, 4]"];
    for (dir, wrt, says) in [
        ("[2.0]", None, "--dir has 1 entries"),
        ("[2.0, 1]", None, "write null"),
        ("[[2.0], null]", None, "expected a number"),
        ("not json", None, "--dir is not valid JSON"),
        ("{}", None, "JSON array"),
        ("[2.0, null]", Some("n"), "not f64 or f64[]"),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["--dir", dir]);
        if let Some(w) = wrt {
            args.extend(["--wrt", w]);
        }
        let o = advm(&args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
    // No --dir at all.
    assert_eq!(status(&advm(&base)), 64);
    // A nonzero direction for a parameter outside --wrt, and an array
    // direction of the wrong length.
    let arr = [
        "jvp",
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--args",
        "[[1, 2, 3], 2.0]",
    ];
    for (dir, wrt, says) in [
        ("[[1, 1, 1], 0.5]", Some("s"), "not in --wrt"),
        (
            "[[1, 1], 0.5]",
            None,
            "2 element(s), but the argument has 3",
        ),
    ] {
        let mut args: Vec<&str> = arr.to_vec();
        args.extend(["--dir", dir]);
        if let Some(w) = wrt {
            args.extend(["--wrt", w]);
        }
        let o = advm(&args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    // A trap in the tangent code is a trap (status 1).
    let o = advm(&[
        "jvp",
        "programs/traps.adasm",
        "--fn",
        "pick",
        "--args",
        "[[1, 2], 5]",
        "--dir",
        "[[1, 1], null]",
    ]);
    assert_eq!(status(&o), 1, "{}", text(&o.stderr));
}

#[test]
fn disasm_jvp_prints_the_tangent_code() {
    let out = ok(&["disasm", POW, "--fn", "pow", "--jvp"]);
    // The primal, then the tangent function: no stack traffic.
    assert!(
        out.contains("fn @pow(") && out.contains("fn @pow.jvp("),
        "{out}"
    );
    assert!(out.contains("ret.n"), "{out}");
    assert!(!out.contains("comms.") && !out.contains("blk."), "{out}");
    let part = ok(&[
        "disasm",
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--jvp",
        "--wrt",
        "s",
    ]);
    assert!(part.contains("fn @f.jvp.wrt.s("), "{part}");
    // --jvp needs --fn when the file has several functions; --wrt needs
    // --ad or --jvp.
    let o = advm(&["disasm", "programs/mutual.adasm", "--jvp"]);
    assert_eq!(status(&o), 64, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "advm: --jvp needs --fn NAME: programs/mutual.adasm defines @even, @odd\n"
    );
    assert_eq!(
        status(&advm(&["disasm", POW, "--fn", "pow", "--wrt", "x"])),
        64
    );
}

#[test]
fn vjp_and_jacobian_text_and_json() {
    // powers(x, n) = [1, x, x², x³]: seedᵀ J = Σ seed_k k x^(k-1).
    let vjp = [
        "vjp",
        "programs/array_return.adasm",
        "--fn",
        "powers",
        "--args",
        "[2.0, 4]",
        "--seed",
        "[1, 0.5, 1, 1]",
    ];
    let j = ok_json(&[&vjp[..], &["--json"]].concat());
    assert_eq!(j["value"], serde_json::json!([1.0, 2.0, 4.0, 8.0]));
    assert_eq!(j["grad"], serde_json::json!([0.5 + 4.0 + 12.0, null]));
    assert_eq!(ok(&vjp), "value = [1, 2, 4, 8]\n∂x = 16.5\n∂n = -\n");
    // An f64 result: grad is vjp with seed 1.
    let j = ok_json(&[
        "vjp",
        POW,
        "--fn",
        "pow",
        "--args",
        "[2.0, 10]",
        "--seed",
        "2",
        "--json",
    ]);
    assert_eq!(j["grad"], serde_json::json!([2.0 * 5120.0, null]));

    let jac = [
        "jacobian",
        "programs/array_return.adasm",
        "--fn",
        "powers",
        "--args",
        "[2.0, 4]",
    ];
    let j = ok_json(&[&jac[..], &["--json"]].concat());
    assert_eq!(j["value"], serde_json::json!([1.0, 2.0, 4.0, 8.0]));
    assert_eq!(
        j["jacobian"],
        serde_json::json!([[0.0], [1.0], [4.0], [12.0]])
    );
    assert!(ok(&jac).contains("jacobian (4 × 1"));
    // Columns over the flattened inputs: f(v, s) = s² Σ v².
    let j = ok_json(&[
        "jacobian",
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--args",
        "[[1, 2, 3], 2.0]",
        "--json",
    ]);
    assert_eq!(j["jacobian"], serde_json::json!([[8.0, 16.0, 24.0, 56.0]]));
    let j = ok_json(&[
        "jacobian",
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--args",
        "[[1, 2, 3], 2.0]",
        "--wrt",
        "s",
        "--json",
    ]);
    assert_eq!(j["jacobian"], serde_json::json!([[56.0]]));

    // Bad seeds and results without a derivative: status 64.
    for args in [
        &vjp[..6],
        &[&vjp[..6], &["--seed", "1.0"]].concat()[..],
        &[&vjp[..6], &["--seed", "[1, 2]"]].concat()[..],
        &[&vjp[..6], &["--seed", "[1, 2"]].concat()[..],
        &[
            "vjp",
            "programs/gcd.adasm",
            "--fn",
            "gcd",
            "--args",
            "[4, 6]",
            "--seed",
            "1",
        ],
        &[
            "jacobian",
            "programs/gcd.adasm",
            "--fn",
            "gcd",
            "--args",
            "[4, 6]",
        ],
    ] {
        let o = advm(args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
}

/// Sum of squares of an array, and a copy whose element 5 (and only it)
/// goes through `nograd`: its gradient entry is wrong on purpose.
const SUM_SQ: &str = "fn @ss(%v: f64[]) -> f64 {
entry:
    %n = alen %v
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %five = eq %i, 5
    %xn = nograd %x
    %y = select %five, %xn, %x
    %q = mul %y, %x
    %s2 = add %s, %q
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
fn @good(%v: f64[]) -> f64 {
entry:
    %n = alen %v
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: 0.0], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %v, %i
    %q = mul %x, %x
    %s2 = add %s, %q
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}
";

/// `check` of a large input compares along a few random directions: two
/// runs each, not two per entry (10^5 entries took minutes entry by entry),
/// and still catches a wrong entry.
#[test]
fn check_of_a_large_input_compares_along_directions() {
    let (dir, path) = temp_program(SUM_SQ);
    let n = 100_000;
    let xs: Vec<String> = (0..n)
        .map(|i| format!("{}", 1.0 + (i % 7) as f64 * 0.25))
        .collect();
    let args_path = dir.path().join("args.json");
    std::fs::write(&args_path, format!("[[{}]]", xs.join(","))).expect("writes");
    let (p, a) = (
        path.to_str().expect("utf-8"),
        args_path.to_str().expect("utf-8"),
    );
    let started = std::time::Instant::now();
    let out = ok(&["check", p, "--fn", "good", "--args-file", a]);
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    assert!(
        out.contains("100000 gradient entries: compared along 4 pseudo-random directions"),
        "{out}"
    );
    assert!(
        out.contains("ok   ∂direction 1 ")
            && out.ends_with("all 5 comparisons (directions and the tangent) agree\n"),
        "{out}"
    );
    let o = advm(&["check", p, "--fn", "ss", "--args-file", a, "--json"]);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    let j = json(&o);
    assert_eq!(j["mode"], "directions");
    assert_eq!(j["ok"], false);
    assert_eq!(j["entries"].as_array().map(Vec::len), Some(4));
    assert_eq!(j["entries"][0]["param"], "direction 1");
    // Small inputs are still compared entry by entry, and --full does so
    // for any size: the wrong entry is named.
    let small = format!("[[{}]]", xs[..65].join(","));
    let o = advm(&["check", p, "--fn", "ss", "--args", &small, "--full"]);
    assert_eq!(status(&o), 3);
    let out = text(&o.stdout);
    assert!(
        // The wrong entry, and the tangent along a direction that moves it.
        out.contains("FAIL ∂v[5] ") && out.contains("2 of 66 entries disagree"),
        "{out}"
    );
    let o = advm(&["check", p, "--fn", "ss", "--args", &small]);
    assert_eq!(status(&o), 3);
    assert!(
        text(&o.stdout).contains("5 of 5 comparisons (directions and the tangent) disagree"),
        "{}",
        text(&o.stdout)
    );
    let at_64 = format!("[[{}]]", xs[..64].join(","));
    let out = text(&advm(&["check", p, "--fn", "ss", "--args", &at_64]).stdout);
    assert!(
        out.contains("FAIL ∂v[5] ") && out.contains("2 of 65 entries disagree"),
        "{out}"
    );
}

/// An input of 1e-6 to log or sqrt: the step stays below it.
#[test]
fn check_at_a_tiny_input_has_no_false_failure() {
    let (_dir, path) = temp_program(
        "fn @f(%x: f64) -> f64 {\nentry:\n    %l = log %x\n    %s = sqrt %x\n    %y = add %l, %s\n    ret %y\n}\n",
    );
    let out = ok(&[
        "check",
        path.to_str().expect("utf-8"),
        "--fn",
        "f",
        "--args",
        "[1e-6]",
    ]);
    // The gradient entry and the tangent (forward mode).
    assert!(out.ends_with("all 2 entries agree\n"), "{out}");
}

/// The step is relative to each input (`h = 1e-6 · max(1, |x|)`, at most
/// `|x| / 1000`): inputs of 1e-6 and 1e6 in one call (a cube near 1e18 and
/// a log near its pole), either way round, and a cube alone at ±1e6, give
/// no false failure.
#[test]
fn check_steps_relative_to_each_input() {
    let (_dir, path) = temp_program(
        "fn @f(%x: f64, %w: f64) -> f64 {\nentry:\n    %c = mul %x, %x\n    %d = mul %c, %x\n    \
         %l = log %w\n    %y = add %d, %l\n    ret %y\n}\n\
         fn @cube(%x: f64) -> f64 {\nentry:\n    %c = mul %x, %x\n    %d = mul %c, %x\n    ret %d\n}\n",
    );
    let p = path.to_str().expect("utf-8");
    for (func, args) in [
        ("f", "[1e6, 1e-6]"),
        ("f", "[1e-6, 1e6]"),
        ("cube", "[1e6]"),
        ("cube", "[-1e6]"),
    ] {
        let j = ok_json(&["check", p, "--fn", func, "--args", args, "--json"]);
        assert_eq!(j["ok"], serde_json::json!(true), "{func} {args}: {j}");
    }
}

#[test]
fn hvp_and_hessian_text_and_json() {
    // pow(x, 4) = x⁴: gradient 4x³, Hessian 12x².
    let args = [
        "hvp",
        POW,
        "--fn",
        "pow",
        "--args",
        "[1.5, 4]",
        "--dir",
        "[2.0, null]",
    ];
    assert_eq!(
        ok(&args),
        "value = 5.0625\n∂x = 13.5    (H·dir)_x = 54\n∂n = -    (H·dir)_n = -\n"
    );
    let j = ok_json(&[&args[..], &["--json"]].concat());
    assert_eq!(
        j,
        serde_json::json!({"value": 5.0625, "grad": [13.5, null], "hvp": [54.0, null]})
    );
    let j = ok_json(&[&args[..], &["--wrt", "x", "--json"]].concat());
    assert_eq!(j["hvp"], serde_json::json!([54.0, null]));

    // f = s² Σ v² (array_param.adasm scales v by s in place first):
    // H_vv = 2s² I, H_vs = 4s v, H_ss = 2 Σ v².
    let arr = [
        "programs/array_param.adasm",
        "--fn",
        "f",
        "--args",
        "[[1, 2, 3], 2.0]",
    ];
    let j = ok_json(&[&["hvp"], &arr[..], &["--dir", "[[1, 0, 0], 0.5]", "--json"]].concat());
    assert_eq!(
        j,
        serde_json::json!({"value": 56.0, "grad": [[8.0, 16.0, 24.0], 56.0],
                           "hvp": [[12.0, 8.0, 12.0], 22.0]})
    );
    let j = ok_json(&[&["hessian"], &arr[..], &["--json"]].concat());
    assert_eq!(
        j["hessian"],
        serde_json::json!([
            [8.0, 0.0, 0.0, 8.0],
            [0.0, 8.0, 0.0, 16.0],
            [0.0, 0.0, 8.0, 24.0],
            [8.0, 16.0, 24.0, 28.0]
        ])
    );
    assert_eq!(j["grad"], serde_json::json!([[8.0, 16.0, 24.0], 56.0]));
    // With respect to s only: one row, `null` for v.
    let j = ok_json(&[&["hessian"], &arr[..], &["--wrt", "s", "--json"]].concat());
    assert_eq!(j["hessian"], serde_json::json!([[28.0]]));
    assert_eq!(j["grad"], serde_json::json!([null, 56.0]));
    let out = ok(&[&["hessian"], &arr[..]].concat());
    assert!(
        out.contains("hessian (4 × 4 over the flattened inputs) =\n[8, 0, 0, 8]\n"),
        "{out}"
    );
}

#[test]
fn hvp_and_hessian_usage_errors_exit_64() {
    for (args, says) in [
        // No --dir.
        (
            vec!["hvp", POW, "--fn", "pow", "--args", "[1.5, 4]"],
            "--dir",
        ),
        (
            vec![
                "hvp", POW, "--fn", "pow", "--args", "[1.5, 4]", "--dir", "[2.0]",
            ],
            "--dir has 1 entries",
        ),
        (
            vec![
                "hvp", POW, "--fn", "pow", "--args", "[1.5, 4]", "--dir", "[2.0, 1]",
            ],
            "write null",
        ),
        (
            vec![
                "hessian", POW, "--fn", "pow", "--args", "[1.5, 4]", "--wrt", "n",
            ],
            "not f64 or f64[]",
        ),
        (
            vec!["hessian", POW, "--fn", "nope", "--args", "[1.5, 4]"],
            "nope",
        ),
        (
            vec![
                "hvp",
                "programs/array_return.adasm",
                "--fn",
                "powers",
                "--args",
                "[2.0, 4]",
                "--dir",
                "[1, null]",
            ],
            "returns f64[], not f64",
        ),
        (
            vec![
                "check", POW, "--fn", "pow", "--args", "[1.5, 4]", "--order", "3",
            ],
            "--order",
        ),
    ] {
        let o = advm(&args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
    // A trap while computing the product is a trap (status 1).
    let o = advm(&[
        "hvp",
        "programs/traps.adasm",
        "--fn",
        "pick",
        "--args",
        "[[1, 2], 5]",
        "--dir",
        "[[1, 1], null]",
    ]);
    assert_eq!(status(&o), 1, "{}", text(&o.stderr));
}

#[test]
fn check_order_2_compares_hvps_with_differences_of_gradients() {
    let out = ok(&[
        "check",
        "programs/bench/logsumexp.adasm",
        "--fn",
        "logsumexp",
        "--args",
        "[[1, 2, 3]]",
        "--order",
        "2",
    ]);
    for row in ["ok   H·d v[0]", "ok   H·d v[2]", "all 7 entries agree"] {
        assert!(out.contains(row), "{out}");
    }
    let j = ok_json(&[
        "check", POW, "--fn", "pow", "--args", "[1.5, 4]", "--order", "2", "--json",
    ]);
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["hvp"][0]["param"], "x", "{j}");
    // Along max(1, |x|) = 1.5: H·d = 12 x² · 1.5.
    assert_eq!(j["hvp"][0]["ad"], 12.0 * 1.5 * 1.5 * 1.5, "{j}");
    // Order 1 (the default) has no second-order rows.
    let j = ok_json(&["check", POW, "--fn", "pow", "--args", "[1.5, 4]", "--json"]);
    assert!(j.get("hvp").is_none(), "{j}");
    // A stop-gradient: first and second order disagree with differences
    // on purpose (exit 3), the second-order row named.
    let o = advm(&[
        "check",
        "programs/nograd.adasm",
        "--fn",
        "f",
        "--args",
        "[3.0]",
        "--order",
        "2",
    ]);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("FAIL H·d x"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn disasm_hvp_and_bench_hvp_ns() {
    let out = ok(&["disasm", POW, "--fn", "pow", "--hvp"]);
    for head in ["fn @pow(", "fn @pow.fwd.jvp(", "fn @pow.rev.jvp("] {
        assert!(out.contains(head), "{out}");
    }
    // The tangent of the pullback pops each tangent and value.
    assert!(out.contains("comms.pop   %t.x"), "{out}");
    let o = advm(&["disasm", "programs/mutual.adasm", "--hvp"]);
    assert_eq!(status(&o), 64, "--hvp needs --fn with several functions");
    assert!(
        text(&o.stderr).contains("--hvp needs --fn NAME"),
        "{}",
        text(&o.stderr)
    );
    let o = advm(&["disasm", POW, "--fn", "pow", "--hvp", "--ad"]);
    assert_eq!(status(&o), 64, "--hvp and --ad conflict");
    let j = ok_json(&["bench", POW, "--fn", "pow", "--args", "[1.5, 4]", "--json"]);
    assert!(j["hvp_ns"].as_f64().is_some_and(|x| x > 0.0), "{j}");
    assert_eq!(j["allocs_per_hvp"], 0.0, "{j}");
}

#[test]
fn did_you_mean_for_functions_subcommands_and_flags() {
    let usage = |args: &[&str]| {
        let o = advm(args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        text(&o.stderr)
    };
    // --fn: the closest function, and none when nothing is close.
    assert_eq!(
        usage(&["run", POW, "--fn", "powr", "--args", "[2.0, 1]"]),
        "advm: programs/powloop.adasm has no function @powr; did you mean @pow? \
         (it defines @pow)\n"
    );
    let e = usage(&[
        "grad",
        "programs/mutual.adasm",
        "--fn",
        "@ood",
        "--args",
        "[1.0, 2]",
    ]);
    assert!(e.contains("no function @ood; did you mean @odd?"), "{e}");
    let e = usage(&["run", POW, "--fn", "sin", "--args", "[2.0, 1]"]);
    assert!(!e.contains("did you mean"), "{e}");
    // A subcommand with swapped letters (clap's own measure finds none).
    let e = usage(&["rnu", POW]);
    assert!(e.contains("tip: a similar subcommand exists: 'run'"), "{e}");
    let e = usage(&["hesisan", POW]);
    assert!(
        e.contains("tip: a similar subcommand exists: 'hessian'"),
        "{e}"
    );
    // Flags: of the subcommand used, and the global ones.
    let e = usage(&["run", POW, "--fnn", "pow"]);
    assert!(e.contains("tip: a similar argument exists: '--fn'"), "{e}");
    let e = usage(&["check", POW, "--odrer", "2"]);
    assert!(
        e.contains("tip: a similar argument exists: '--order'"),
        "{e}"
    );
    let e = usage(&["run", POW, "--no-inlien"]);
    assert!(
        e.contains("tip: a similar argument exists: '--no-inline'"),
        "{e}"
    );
    // `--points` is sweep's flag, not run's: no tip names it.
    let e = usage(&["run", POW, "--ponits", "x"]);
    assert!(!e.contains("--points"), "{e}");
    let e = usage(&["zzzzzz", POW]);
    assert!(!e.contains("tip:"), "{e}");
}

#[test]
fn an_unknown_function_called_in_a_file_is_located_with_a_suggestion() {
    let (_dir, path) = temp_program(
        "fn @square(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n\
         fn @main(%x: f64) -> f64 {\nentry:\n    %y = call @sqaure(%x)\n    ret %y\n}\n",
    );
    let p = path.to_str().expect("utf-8");
    let o = advm(&["run", p, "--args", "[2.0]"]);
    assert_eq!(status(&o), 2, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("p.adasm:8:15: error: unknown function `@sqaure`; did you mean `@square`?"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn fn_is_optional_when_the_file_has_one_function() {
    // One function: every command uses it, as if --fn named it.
    let same = |args: &[&str]| {
        let with: Vec<&str> = args.iter().copied().chain(["--fn", "pow"]).collect();
        assert_eq!(ok(args), ok(&with), "{args:?}");
    };
    same(&["run", POW, "--args", "[2.0, 10]"]);
    same(&["grad", POW, "--args", "[2.0, 10]", "--json"]);
    same(&["check", POW, "--args", "[1.5, 3]"]);
    same(&["jvp", POW, "--args", "[1.5, 3]", "--dir", "[1.0, null]"]);
    same(&["vjp", POW, "--args", "[1.5, 3]", "--seed", "2.0"]);
    same(&["hvp", POW, "--args", "[1.5, 3]", "--dir", "[1.0, null]"]);
    same(&["hessian", POW, "--args", "[1.5, 3]"]);
    same(&["jacobian", POW, "--args", "[1.5, 3]"]);
    same(&["disasm", POW, "--jvp"]);
    same(&["disasm", POW, "--hvp"]);
    same(&["disasm", POW, "--ad", "--wrt", "x"]);
    same(&["cfg", POW]);
    same(&["cfg", POW, "--ad"]);
    assert_eq!(ok(&["run", POW, "--args", "[2.0, 10]"]), "1024\n");

    // Several functions: `@main` by default; without one, the functions
    // are listed. Commands with no default need --fn.
    let (_dir, path) = temp_program(
        "fn @helper(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n\
         fn @main(%x: f64) -> f64 {\nentry:\n    %y = call @helper(%x)\n    ret %y\n}\n",
    );
    let p = path.to_str().expect("utf-8");
    assert_eq!(ok(&["run", p, "--args", "[3.0]"]), "9\n");
    assert_eq!(ok(&["run", p, "--fn", "helper", "--args", "[3.0]"]), "9\n");
    let mutual = "programs/mutual.adasm";
    for cmd in ["run", "grad", "hessian"] {
        let o = advm(&[cmd, mutual, "--args", "[1.0, 2]"]);
        assert_eq!(status(&o), 64, "{cmd}");
        assert_eq!(
            text(&o.stderr),
            "advm: programs/mutual.adasm has no function @main (it defines @even, @odd): \
             pass --fn NAME\n",
            "{cmd}"
        );
    }
    for (args, what) in [
        (&["cfg", mutual][..], "cfg"),
        (&["cfg", mutual, "--ad"][..], "cfg"),
        (&["disasm", mutual, "--ad", "--wrt", "x"][..], "--wrt"),
    ] {
        let o = advm(args);
        assert_eq!(status(&o), 64, "{args:?}");
        assert_eq!(
            text(&o.stderr),
            format!("advm: {what} needs --fn NAME: programs/mutual.adasm defines @even, @odd\n")
        );
    }
    // Plain disasm still prints every function.
    let all = ok(&["disasm", mutual]);
    assert!(
        all.contains("fn @even(") && all.contains("fn @odd("),
        "{all}"
    );
}

/// Three calls deep: `@main` calls `@g` (line 19), which calls `@h` (line
/// 12), whose `aget` (line 4) reads out of bounds.
const DEEP: &str = "; a trap three calls deep
fn @h(%v: f64[], %i: i64) -> f64 {
entry:
    %x = aget %v, %i   ; the read
    %y = mul %x, %x
    ret %y
}

fn @g(%v: f64[], %i: i64) -> f64 {
entry:
    %j = add %i, 1
    %y = call @h(%v, %j)
    %z = mul %y, 2.0
    ret %z
}

fn @main(%v: f64[], %i: i64) -> f64 {
entry:
    %y = call @g(%v, %i)
    %z = sin %y
    ret %z
}
";

#[test]
fn traps_name_the_source_line_and_the_calls_that_led_there() {
    let (_dir, path) = temp_program(DEEP);
    let p = path.to_str().expect("utf8");
    let head = format!("{p}: trap: array index 2 out of bounds for length 2 in @h");
    let at = ", block entry, at `%x = aget %v, %i` (line 4)";
    let stack = |code: &str| {
        format!("\n  called from @g{code}, line 12\n  called from @main{code}, line 19\n")
    };
    let cases: Vec<(Vec<&str>, String)> = vec![
        // Primal code: the instruction as written (no comment), then the
        // callers, innermost first.
        (
            vec!["--no-inline", "run", p, "--args", "[[1.0, 2.0], 1]"],
            format!("{head}{at}{}", stack("")),
        ),
        // Derived code is named by the user's function.
        (
            vec!["--no-inline", "grad", p, "--args", "[[1.0, 2.0], 1]"],
            format!(
                "{head} (gradient's forward sweep){at}{}",
                stack(" (gradient's forward sweep)")
            ),
        ),
        (
            vec![
                "--no-inline",
                "jvp",
                p,
                "--args",
                "[[1.0, 2.0], 1]",
                "--dir",
                "[[1.0, 0.0], null]",
            ],
            format!("{head} (tangent code){at}{}", stack(" (tangent code)")),
        ),
        // Inlined, @h's and @g's code runs in @main's frame: no caller.
        (
            vec!["run", p, "--args", "[[1.0, 2.0], 1]"],
            format!("{head} (inlined into @main){at}\n"),
        ),
        (
            vec!["grad", p, "--args", "[[1.0, 2.0], 1]"],
            format!("{head} (inlined into @main, gradient's forward sweep){at}\n"),
        ),
    ];
    for (args, want) in cases {
        let o = advm(&args);
        assert_eq!(status(&o), 1, "{args:?}");
        assert_eq!(text(&o.stderr), want, "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // Read from a pipe, the file cannot be read again: the bytecode stays.
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args([
            "--no-inline",
            "run",
            "/dev/stdin",
            "--args",
            "[[1.0, 2.0], 1]",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(DEEP.as_bytes()).expect("writes");
    }
    let o = child.wait_with_output().expect("finishes");
    assert_eq!(status(&o), 1);
    let err = text(&o.stderr);
    assert!(
        err.contains("at `aget %x, %v, %i` (line 4)\n  called from @g, line 12\n"),
        "{err}"
    );
}

#[test]
fn a_deep_recursion_shows_five_callers_and_counts_the_others() {
    let o = advm(&[
        "--no-inline",
        "run",
        "programs/recursion.adasm",
        "--max-depth",
        "50",
        "--args",
        "[0.5, 100]",
    ]);
    assert_eq!(status(&o), 1);
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("programs/recursion.adasm: trap: call depth exceeded (limit 50")
            && lines[0].ends_with(" in @rec, block step, at `%r = call @rec(%x, %m)` (line 19)"),
        "{err}"
    );
    // 49 suspended callers: 5 shown, 44 counted.
    assert_eq!(&lines[1..6], &["  called from @rec, line 19"; 5], "{err}");
    assert_eq!(lines[6], "  ... and 44 more calls", "{err}");
    assert_eq!(lines.len(), 7, "{err}");
}

/// Assembly errors are plain text into a pipe, coloured with
/// `CLICOLOR_FORCE`, and plain again with `NO_COLOR`; the coloured text
/// without its escape sequences is the plain text.
#[test]
fn assembly_errors_are_coloured_only_on_request_or_a_terminal() {
    let (_dir, path) =
        temp_program("fn @f(%x: f64) -> f64 {\nentry:\n    %z = mul %x, %nope\n    ret %q\n}\n");
    let p = path.to_str().expect("utf8");
    let run = |env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_advm"));
        c.args(["run", p, "--args", "[1.0]"])
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .stdin(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().expect("advm runs");
        assert_eq!(status(&o), 2, "{env:?}");
        text(&o.stderr)
    };
    let plain = run(&[]);
    assert_eq!(
        plain,
        "p.adasm:3:18: error: unknown register `%nope`\n\
         3 │     %z = mul %x, %nope\n  │                  ^^^^^\n\
         p.adasm:4:9: error: unknown register `%q`\n\
         4 │     ret %q\n  │         ^^\n"
            .replace("p.adasm", p)
    );
    let color = run(&[("CLICOLOR_FORCE", "1")]);
    assert!(color.contains("\x1b["), "{color:?}");
    let mut stripped = String::new();
    let mut in_escape = false;
    for c in color.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (false, c) => stripped.push(c),
            (true, 'm') => in_escape = false,
            (true, _) => {}
        }
    }
    assert_eq!(stripped, plain);
    assert_eq!(run(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]), plain);
    assert_eq!(run(&[("CLICOLOR_FORCE", "0")]), plain);
}

/// A wrong custom rule (the derivative of x³ given as 2x): `check` compares
/// with differences of the body, exits 3 and names the rule; a right one
/// passes, and the other modes use the rule too.
#[test]
fn check_finds_a_wrong_rule_and_names_it() {
    const SRC: &str = "\
fn @cube(%x: f64) -> f64 {
entry:
    %a = mul %x, %x
    %b = mul %a, %x
    ret %b
}
fn @cube_jvp(%x: f64, %dx: f64) -> f64 {
entry:
    %a = mul 2.0, %x
    %t = mul %a, %dx
    ret %t
}
fn @cube_right(%x: f64, %dx: f64) -> f64 {
entry:
    %a = mul %x, %x
    %b = mul 3.0, %a
    %t = mul %b, %dx
    ret %t
}
fn @outer(%x: f64) -> f64 {
entry:
    %c = call @cube(%x)
    %s = sin %c
    ret %s
}
";
    let (_dir, wrong) = temp_program(&format!("{SRC}rule @cube jvp @cube_jvp\n"));
    let wrong = wrong.to_str().expect("utf-8 path").to_string();
    let o = advm(&["check", &wrong, "--fn", "outer", "--args", "[1.5]"]);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("FAIL ∂x"), "{out}");
    assert!(out.contains("FAIL jvp"), "{out}");
    assert!(out.contains("uses rule @cube jvp @cube_jvp"), "{out}");
    let o = advm(&["check", &wrong, "--fn", "cube", "--args", "[1.5]", "--json"]);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    assert_eq!(
        json(&o)["rules"],
        serde_json::json!(["rule @cube jvp @cube_jvp"])
    );
    // The gradient is the rule's, 2x, in reverse mode as in forward mode.
    let g = ok_json(&["grad", &wrong, "--fn", "cube", "--args", "[1.5]", "--json"]);
    assert_eq!(g, serde_json::json!({"value": 3.375, "grad": [3.0]}));
    let (_dir2, right) = temp_program(&format!("{SRC}rule @cube jvp @cube_right\n"));
    let right = right.to_str().expect("utf-8 path").to_string();
    let out = ok(&[
        "check", &right, "--fn", "outer", "--args", "[1.5]", "--order", "2",
    ]);
    assert!(out.contains("all 3 entries agree"), "{out}");
    assert!(!out.contains("uses rule"), "{out}");
    let out = ok(&["disasm", &right, "--fn", "cube", "--ad"]);
    assert!(out.contains("; from rule @cube jvp @cube_right"), "{out}");
    // A rule that does not fit is an assembly error at its line.
    let (_dir3, bad) = temp_program(&format!("{SRC}rule @cube jvp @outer\n"));
    let o = advm(&[
        "grad",
        bad.to_str().expect("utf-8"),
        "--fn",
        "cube",
        "--args",
        "[1.5]",
    ]);
    assert_eq!(status(&o), 2);
    let err = text(&o.stderr);
    assert!(err.contains(":26:16: error: `@outer` must take"), "{err}");
}

/// A rule on a function returning `f64[]` (`ad/tests/rules_array.adasm`):
/// a right one passes `check` of a scalar caller (gradient, tangent and
/// HVP); a wrong one makes `check` exit 3 naming it; `jvp` and `vjp` of the
/// array function itself use the rule; a rule whose result type does not
/// fit the array result is an assembly error at its line (exit 2); a rule
/// whose tangent array has another length than the result is a trap at
/// its line in every command (exit 1), and the listings show the check.
#[test]
fn rules_on_array_results_are_checked_and_used() {
    let src = std::fs::read_to_string(testkit::workspace_root().join("ad/tests/rules_array.adasm"))
        .expect("readable");
    let (_dir, right) = temp_program(&src);
    let right = right.to_str().expect("utf-8 path").to_string();
    let args = "[[0.3, -1.2, 2.5], 0.8]";
    let out = ok(&[
        "check", &right, "--fn", "energy", "--args", args, "--order", "2",
    ]);
    assert!(
        out.contains("entries agree") && !out.contains("FAIL"),
        "{out}"
    );
    let t = ok_json(&[
        "jvp",
        &right,
        "--fn",
        "unit",
        "--args",
        args,
        "--dir",
        "[[1.0, 0.0, 0.0], 0.0]",
        "--json",
    ]);
    let v = ok_json(&[
        "vjp",
        &right,
        "--fn",
        "unit",
        "--args",
        args,
        "--seed",
        "[1.0, 0.0, 0.0]",
        "--json",
    ]);
    // ∂w₀/∂v₀ both ways (the Jacobian's corner).
    let (a, b) = (
        t["tangent"][0].as_f64().expect("number"),
        v["grad"][0][0].as_f64().expect("number"),
    );
    assert!((a - b).abs() <= 1e-14 * a.abs(), "{a} vs {b}");
    let (_dir2, wrong) =
        temp_program(&src.replace("rule @unit jvp @unit_jvp", "rule @unit jvp @unit_wrong"));
    let wrong = wrong.to_str().expect("utf-8 path").to_string();
    let o = advm(&["check", &wrong, "--fn", "energy", "--args", args]);
    assert_eq!(status(&o), 3, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("uses rule @unit jvp @unit_wrong"), "{out}");
    let (_dir3, bad) =
        temp_program(&src.replace("rule @unit jvp @unit_jvp", "rule @unit jvp @norm"));
    let o = advm(&[
        "jvp",
        bad.to_str().expect("utf-8"),
        "--fn",
        "unit",
        "--args",
        args,
        "--dir",
        "[[1.0, 0.0, 0.0], 0.0]",
    ]);
    assert_eq!(status(&o), 2);
    let err = text(&o.stderr);
    assert!(err.contains(":6:16: error: `@norm` must take"), "{err}");
    // A rule whose tangent array is longer than the result (one zero
    // appended) is a trap at the rule's line in every command, with the
    // two lengths, never a derivative of the wrong shape.
    let long = src.replace("rule @unit jvp @unit_jvp", "rule @unit jvp @unit_long")
        + "
fn @unit_long(%v: f64[], %s: f64, %dv: f64[], %ds: f64) -> f64[] {
entry:
    %t = call @unit_jvp(%v, %s, %dv, %ds)
    %n = alen %t
    %m = add %n, 1
    %u = anew %m
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %x = aget %t, %i
    aset %u, %i, %x
    %i2 = add %i, 1
    jmp head
done:
    ret %u
}
";
    let (_dir4, long) = temp_program(&long);
    let long = long.to_str().expect("utf-8 path").to_string();
    let dir = "[[1.0, 0.0, 0.0], 0.0]";
    for cmd in [
        vec!["jvp", &long, "--fn", "unit", "--args", args, "--dir", dir],
        vec![
            "vjp",
            &long,
            "--fn",
            "unit",
            "--args",
            args,
            "--seed",
            "[1.0, 0.0, 0.0]",
        ],
        vec!["jacobian", &long, "--fn", "unit", "--args", args],
        vec!["grad", &long, "--fn", "energy", "--args", args],
        vec![
            "grad",
            &long,
            "--fn",
            "energy",
            "--args",
            args,
            "--ad-budget",
            "64",
        ],
        vec!["hvp", &long, "--fn", "energy", "--args", args, "--dir", dir],
        vec!["hessian", &long, "--fn", "energy", "--args", args],
        vec!["check", &long, "--fn", "energy", "--args", args],
    ] {
        let o = advm(&cmd);
        assert_eq!(status(&o), 1, "{cmd:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(
            err.contains("custom rule returned a tangent of 4 elements for a result of 3")
                && err.contains("at `rule @unit jvp @unit_long` (line 6)"),
            "{cmd:?}: {err}"
        );
    }
    for listing in ["--jvp", "--ad"] {
        let f = if listing == "--ad" { "energy" } else { "unit" };
        let out = ok(&["disasm", &long, "--fn", f, listing]);
        assert!(out.contains("len.check"), "{listing}: {out}");
    }
}

#[test]
fn native_tier_is_default_and_no_jit_switches_it_off() {
    let call = [
        "programs/bench/powloop.adasm",
        "--fn",
        "pow",
        "--args",
        "[1.5, 4]",
    ];
    let bench = |extra: &[&str]| ok_json(&[&["bench"][..], &call, &["--json"], extra].concat());
    let j = bench(&[]);
    assert_eq!(j["tier"], "jit", "{j}");
    assert_eq!(j["grad_tier"], "jit", "{j}");
    let j = bench(&["--no-jit"]);
    assert_eq!(j["tier"], "interp", "{j}");
    assert_eq!(j["grad_tier"], "interp", "{j}");
    // The same output either way, traps included.
    for cmd in ["run", "grad", "jvp"] {
        let mut args = vec![cmd];
        args.extend_from_slice(&call);
        if cmd == "jvp" {
            args.extend_from_slice(&["--dir", "[1.0, null]"]);
        }
        let native = advm(&args);
        args.push("--no-jit");
        let interp = advm(&args);
        assert_eq!(native.stdout, interp.stdout, "{cmd}");
        assert_eq!(status(&native), status(&interp), "{cmd}");
    }
    let trap = [
        "run",
        "programs/traps.adasm",
        "--fn",
        "pick",
        "--args",
        "[[1.0], 3]",
    ];
    let (a, b) = (advm(&trap), advm(&[&trap[..], &["--no-jit"]].concat()));
    assert_eq!(status(&a), 1);
    assert_eq!((text(&a.stderr), status(&a)), (text(&b.stderr), status(&b)));
    // disasm --tier: recursion runs compiled, and traps at the depth
    // limit (100 000 frames deep, on the tier's stack segments) as the
    // interpreter does.
    let out = ok(&["disasm", "programs/recursion.adasm", "--tier"]);
    assert_eq!(out.trim(), "@rec: jit");
    let deep = [
        "grad",
        "programs/recursion.adasm",
        "--fn",
        "rec",
        "--args",
        "[0.9, 1000000]",
    ];
    let (a, b) = (advm(&deep), advm(&[&deep[..], &["--no-jit"]].concat()));
    assert_eq!(status(&a), 1);
    assert!(text(&a.stderr).contains("call depth exceeded (limit 100000"));
    assert_eq!((text(&a.stderr), status(&a)), (text(&b.stderr), status(&b)));
    let out = ok(&["disasm", "programs/bench/powloop.adasm", "--tier"]);
    assert_eq!(out.trim(), "@pow: jit");
    // A small loop-free function runs interpreted, and says so.
    let out = ok(&["disasm", "programs/bench/sincos.adasm", "--tier"]);
    assert!(out.starts_with("@sincos: interp (loop-free"), "{out}");
    let j = ok_json(&[
        "bench",
        "programs/bench/sincos.adasm",
        "--fn",
        "sincos",
        "--args",
        "[0.9]",
        "--json",
    ]);
    assert_eq!(j["tier"], "interp", "{j}");
    assert_eq!(j["grad_tier"], "interp", "{j}");
    let out = ok(&[
        "disasm",
        "programs/bench/powloop.adasm",
        "--tier",
        "--no-jit",
    ]);
    assert_eq!(out.trim(), "@pow: interp (--no-jit)");
}

/// `disasm --native` prints the code the native tier compiles for each
/// function (callees first, each with its Cranelift IR and machine code),
/// and with `--ad` that of the forward and reverse functions; it does not
/// combine with `--tier`.
#[test]
fn disasm_native_lists_compiled_code() {
    let out = ok(&["disasm", "programs/bench/powloop.adasm", "--native"]);
    assert!(
        out.starts_with(";; a call of @pow from the host\n; @pow: "),
        "{out}"
    );
    let ir = out.find("function u0:").expect("Cranelift IR");
    let code = out.find("; machine code").expect("machine code");
    assert!(ir < code, "{out}");
    // The body returns, and its loop jumps back.
    assert!(out.contains("return"), "{out}");
    let out = ok(&["disasm", "programs/bench/sincos.adasm", "--native", "--ad"]);
    let fwd = out
        .find(";; a call of @sincos.fwd")
        .expect("forward function");
    let rev = out.find(";; a call of @sincos.rev").expect("pullback");
    assert!(fwd < rev, "{out}");
    // The forward function's math calls are named.
    assert!(out.contains("= advm_cos"), "{out}");
    let a = advm(&[
        "disasm",
        "programs/bench/powloop.adasm",
        "--native",
        "--tier",
    ]);
    assert_eq!(status(&a), 64);
}

/// `--if-convert` (global) derives the gradient from if-converted code:
/// the same value and gradient as without (programs/conditionals.adasm's
/// diamonds, triangles and an arm that overflows where not taken), and the
/// derived listing shows `select`s where there were block ids.
#[test]
fn if_convert_gives_the_same_gradient() {
    for (f, args) in [
        ("clip", "[[1.5, -2.0, 0.25, 3.0], 0.5]"),
        ("nested", "[[1.5, -2.0, 0.25, 3.0, 0.5]]"),
        ("overflow", "[1e200]"),
    ] {
        let base = [
            "grad",
            "programs/conditionals.adasm",
            "--fn",
            f,
            "--args",
            args,
            "--json",
        ];
        let plain = ok(&base);
        let mut converted = base.to_vec();
        converted.push("--if-convert");
        assert_eq!(ok(&converted), plain, "@{f}");
        let listing = |extra: &[&str]| {
            let mut a = vec!["disasm", "programs/conditionals.adasm", "--fn", f, "--ad"];
            a.extend_from_slice(extra);
            ok(&a)
        };
        let (with, without) = (listing(&["--if-convert"]), listing(&[]));
        assert!(
            with.contains("select") && !with.contains("blk."),
            "@{f}:\n{with}"
        );
        assert!(without.contains("blk."), "@{f}:\n{without}");
    }
}
