//! Resource limits, traps, non-finite values and gradients at kinks, on the
//! built `advm` binary (contract: adasm.md §3 and §5; docs/reliability.md).
//!
//! * Each limit is hit through its flag (`--fuel`, `--max-depth`,
//!   `--max-array`, `--max-stack-bytes`, `--max-heap-bytes`): exit status
//!   1, and stderr names the limit and the flag that raises it. An endless
//!   loop is only ever run with `--fuel`, a loop of `anew` only with a
//!   small `--max-heap-bytes`.
//! * A function too large to differentiate is refused with exit status 64
//!   (like one that does not return f64), never an internal error; so is a
//!   gradient, tangent or Hessian-vector product past `--max-compile-work`
//!   (the budgets measured through the library), which `bench` reports in
//!   place of the product's time.
//! * Traps (i64 division by zero, `aget` out of bounds, negative `anew`):
//!   exit status 1, with the function, block and instruction named.
//! * Non-finite results print as `inf` / `-inf` / `nan`, also in JSON.
//! * Gradients at kinks follow §3: `abs'(0) = 0`; `min`/`max` ties give the
//!   cotangent to the first operand.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const PROGRAM: &str = "
; An endless loop: only ever run with --fuel.
fn @spin(%x: f64) -> f64 {
entry:
    jmp head
head:
    %a = phi [entry: %x], [head: %b]
    %b = mul %a, 1.0
    jmp head
}

fn @deep(%n: i64) -> i64 {
entry:
    %z = le %n, 0
    br %z, base, step
base:
    ret 0
step:
    %m = sub %n, 1
    %r = call @deep(%m)
    %s = add %r, 1
    ret %s
}

fn @deepf(%x: f64, %n: i64) -> f64 {
entry:
    %z = le %n, 0
    br %z, base, step
base:
    ret %x
step:
    %m = sub %n, 1
    %r = call @deepf(%x, %m)
    %s = sin %r
    ret %s
}

; Allocates `n` arrays of `m` elements, all alive until the call ends.
fn @hog(%n: i64, %m: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %c = lt %i, %n
    br %c, body, done
body:
    %a = anew %m
    %i2 = add %i, 1
    jmp head
done:
    ret 0.0
}

; The same in a differentiable function.
fn @hogf(%x: f64, %n: i64, %m: i64) -> f64 {
entry:
    jmp head
head:
    %i = phi [entry: 0], [body: %i2]
    %s = phi [entry: %x], [body: %s2]
    %c = lt %i, %n
    br %c, body, done
body:
    %a = anew %m
    aset %a, 0, %s
    %s2 = aget %a, 0
    %i2 = add %i, 1
    jmp head
done:
    ret %s
}

fn @big(%n: i64) -> i64 {
entry:
    %a = anew %n
    %l = alen %a
    ret %l
}

; Every iteration keeps a value for the pullback (mul needs its operands).
fn @long(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %k = phi [entry: 0], [body: %k2]
    %p = phi [entry: 1.0], [body: %p2]
    %c = lt %k, %n
    br %c, body, done
body:
    %p2 = mul %p, %x
    %k2 = add %k, 1
    jmp head
done:
    ret %p
}

fn @divz(%a: i64, %b: i64) -> i64 {
entry:
    %q = div %a, %b
    ret %q
}

fn @remz(%a: i64, %b: i64) -> i64 {
entry:
    %q = rem %a, %b
    ret %q
}

fn @oob(%v: f64[], %i: i64) -> f64 {
entry:
    jmp fetch
fetch:
    %x = aget %v, %i
    ret %x
}

fn @negnew(%n: i64) -> f64 {
alloc:
    %a = anew %n
    %x = itof %n
    ret %x
}

fn @badconv(%x: f64) -> i64 {
entry:
    %i = ftoi %x
    ret %i
}

fn @quot(%a: f64, %b: f64) -> f64 {
entry:
    %q = div %a, %b
    ret %q
}

fn @pinf() -> f64 {
entry:
    %y = div 1.0, 0.0
    ret %y
}

fn @ninf() -> f64 {
entry:
    %y = div -1.0, 0.0
    ret %y
}

fn @nan() -> f64 {
entry:
    %y = div 0.0, 0.0
    ret %y
}

fn @infs() -> f64[] {
entry:
    %a = anew 3
    %p = div 1.0, 0.0
    %m = neg %p
    %n = sub %p, %p
    aset %a, 0, %p
    aset %a, 1, %m
    aset %a, 2, %n
    ret %a
}

fn @absf(%x: f64) -> f64 {
entry:
    %y = abs %x
    ret %y
}

fn @minxy(%x: f64, %y: f64) -> f64 {
entry:
    %m = min %x, %y
    ret %m
}

fn @minyx(%x: f64, %y: f64) -> f64 {
entry:
    %m = min %y, %x
    ret %m
}

fn @maxxy(%x: f64, %y: f64) -> f64 {
entry:
    %m = max %x, %y
    ret %m
}

fn @maxyx(%x: f64, %y: f64) -> f64 {
entry:
    %m = max %y, %x
    ret %m
}

; A kink inside a larger expression: d/dx (x * abs(x - 1)) at x = 1 is 0.
fn @kink(%x: f64) -> f64 {
entry:
    %d = sub %x, 1.0
    %a = abs %d
    %y = mul %x, %a
    ret %y
}
";

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("limits.adasm");
    std::fs::write(&path, PROGRAM).expect("writes");
    Fixture { _dir: dir, path }
}

fn advm(fx: &Fixture, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_advm"));
    cmd.arg(args[0]).arg(&fx.path).args(&args[1..]);
    cmd.stdin(Stdio::null()).output().expect("advm runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit status 1; stderr contains every one of `needles`; no panic.
fn traps(fx: &Fixture, args: &[&str], needles: &[&str]) -> String {
    let o = advm(fx, args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: stderr lacks {n:?}:\n{err}");
    }
    assert_eq!(text(&o.stdout), "", "{args:?}: a trap prints no value");
    err
}

fn ok(fx: &Fixture, args: &[&str]) -> String {
    let o = advm(fx, args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

fn ok_json(fx: &Fixture, args: &[&str]) -> serde_json::Value {
    let out = ok(fx, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

// ---- limits ------------------------------------------------------------

#[test]
fn fuel_stops_an_endless_loop() {
    let fx = fixture();
    for cmd in ["run", "grad"] {
        let err = traps(
            &fx,
            &[cmd, "--fn", "spin", "--args", "[1.0]", "--fuel", "100000"],
            &["out of fuel", "--fuel", "100000", "@spin", "block head"],
        );
        assert!(err.lines().count() <= 3, "one short message: {err}");
    }
    // The same with --json: the error still goes to stderr.
    traps(
        &fx,
        &[
            "run", "--fn", "spin", "--args", "[1.0]", "--fuel", "5000", "--json",
        ],
        &["out of fuel", "--fuel"],
    );
}

#[test]
fn fuel_is_enough_for_a_finite_loop() {
    let fx = fixture();
    let out = ok(
        &fx,
        &[
            "run",
            "--fn",
            "long",
            "--args",
            "[1.0, 100]",
            "--fuel",
            "100000",
        ],
    );
    assert_eq!(out, "1\n");
}

#[test]
fn fuel_is_exact_at_backward_jumps() {
    let fx = fixture();
    // 100 iterations of a 5-instruction loop need about 500 instructions.
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "long",
            "--args",
            "[1.0, 100]",
            "--fuel",
            "10",
        ],
        &[
            "out of fuel",
            "more than 10 instructions",
            "--fuel",
            "@long",
        ],
    );
    traps(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0, 100]",
            "--fuel",
            "10",
        ],
        &["out of fuel", "--fuel"],
    );
}

#[test]
fn max_depth_stops_deep_recursion() {
    let fx = fixture();
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "deep",
            "--args",
            "[1000]",
            "--max-depth",
            "100",
            "--no-inline",
        ],
        &[
            "call depth",
            "limit 100",
            "--max-depth",
            "@deep",
            "block step",
            // The call names its callee (it used to print `fn3`).
            "at `%r = call @deep(%m)`",
        ],
    );
    // Inlined, eight levels of @deep run in one frame: still 125 frames.
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "deep",
            "--args",
            "[1000]",
            "--max-depth",
            "100",
        ],
        &[
            "call depth",
            "limit 100",
            "in @deep (inlined into @deep), block step, at `%r = call @deep(%m)`",
        ],
    );
    traps(
        &fx,
        &[
            "grad",
            "--fn",
            "deepf",
            "--args",
            "[0.5, 1000]",
            "--max-depth",
            "100",
        ],
        &["call depth", "--max-depth"],
    );
    // Under the default limit the same call succeeds.
    assert_eq!(
        ok(&fx, &["run", "--fn", "deep", "--args", "[1000]"]),
        "1000\n"
    );
    assert_eq!(
        ok(
            &fx,
            &[
                "run",
                "--fn",
                "deep",
                "--args",
                "[50]",
                "--max-depth",
                "100"
            ]
        ),
        "50\n"
    );
}

#[test]
fn max_array_stops_a_large_anew() {
    let fx = fixture();
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "big",
            "--args",
            "[1000]",
            "--max-array",
            "10",
        ],
        &[
            "1000 elements",
            "limit of 10",
            "--max-array",
            "@big",
            "anew",
        ],
    );
    assert_eq!(
        ok(
            &fx,
            &["run", "--fn", "big", "--args", "[10]", "--max-array", "10"]
        ),
        "10\n"
    );
    assert_eq!(
        ok(&fx, &["run", "--fn", "big", "--args", "[1000]"]),
        "1000\n"
    );
}

/// `--max-depth N` allows exactly N active frames, the entry function's
/// included; 0 would allow none and is refused as bad usage.
#[test]
fn max_depth_is_exact_and_at_least_one() {
    let fx = fixture();
    let depth = |n: &str, limit: &str| {
        let args = format!("[{n}]");
        advm(
            &fx,
            &[
                "run",
                "--fn",
                "deep",
                "--args",
                &args,
                "--max-depth",
                limit,
                "--no-inline",
            ],
        )
    };
    // Inlined, a frame runs eight levels of @deep: @deep(9) takes 2 frames
    // (9-2, 1-0).
    let inlined = |limit: &str| {
        advm(
            &fx,
            &["run", "--fn", "deep", "--args", "[9]", "--max-depth", limit],
        )
    };
    assert_eq!(text(&inlined("2").stdout), "9\n");
    assert_eq!(inlined("1").status.code(), Some(1));
    // Without inlining, @deep(n) needs n + 1 frames.
    for (n, limit) in [("0", "1"), ("1", "2"), ("9", "10")] {
        let o = depth(n, limit);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout), format!("{n}\n"));
    }
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "deep",
            "--args",
            "[1]",
            "--max-depth",
            "1",
            "--no-inline",
        ],
        &["call depth exceeded (limit 1; raise it with --max-depth)"],
    );
    let o = depth("0", "0");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(64), "{err}");
    assert!(
        err.contains("--max-depth") && err.contains("at least 1"),
        "{err}"
    );
    assert_eq!(text(&o.stdout), "");
}

/// An argument array longer than `--max-array` is not reported as `anew`.
#[test]
fn max_array_bounds_argument_arrays_with_their_own_message() {
    let fx = fixture();
    for cmd in ["run", "grad"] {
        let err = traps(
            &fx,
            &[
                cmd,
                "--fn",
                "oob",
                "--args",
                "[[1.0, 2.0, 3.0], 0]",
                "--max-array",
                "2",
            ],
            &[
                "argument array of 3 elements exceeds the array limit of 2",
                "--max-array",
            ],
        );
        assert!(!err.contains("anew"), "{err}");
    }
}

/// Arrays live until the end of the call: a loop of `anew` used to grow
/// until the OS killed the process. The heap limit makes it a trap.
#[test]
fn max_heap_bytes_stops_a_loop_of_anew() {
    let fx = fixture();
    // 8 MB per array, 100 MB allowed: the 13th array is refused.
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "hog",
            "--args",
            "[1000000, 1000000]",
            "--max-heap-bytes",
            "100000000",
        ],
        &[
            "arrays exceed the heap limit of 100000000 bytes",
            "(raise it with --max-heap-bytes)",
            "@hog",
            "block body",
            "%a = anew %m",
        ],
    );
    // Under the limit the loop completes.
    assert_eq!(
        ok(
            &fx,
            &[
                "run",
                "--fn",
                "hog",
                "--args",
                "[12, 1000000]",
                "--max-heap-bytes",
                "100000000"
            ]
        ),
        "0\n"
    );
    // In a gradient the shadows count too: 6 arrays of 16 MB pass 96 MB.
    let hogf = |n: &str| {
        let args = format!("[1.5, {n}, 1000000]");
        let a = [
            "grad",
            "--fn",
            "hogf",
            "--args",
            &args,
            "--max-heap-bytes",
            "96000000",
        ];
        advm(&fx, &a)
    };
    let o = hogf("6");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for needle in [
        "heap limit of 96000000 bytes",
        "--max-heap-bytes",
        "@hogf (gradient's forward sweep)",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    let o = hogf("5");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "value = 1.5\n∂x = 1\n∂n = -\n∂m = -\n");
    // Argument arrays count too.
    traps(
        &fx,
        &[
            "run",
            "--fn",
            "oob",
            "--args",
            "[[1.0, 2.0, 3.0], 0]",
            "--max-heap-bytes",
            "64",
        ],
        &["heap limit of 64 bytes", "--max-heap-bytes"],
    );
}

#[test]
fn max_stack_bytes_stops_a_long_gradient() {
    let fx = fixture();
    traps(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0001, 100000]",
            "--max-stack-bytes",
            "4096",
        ],
        &["AD stacks", "4096 bytes", "--max-stack-bytes"],
    );
    // The primal run needs no AD stacks; the gradient fits the default.
    ok(
        &fx,
        &[
            "run",
            "--fn",
            "long",
            "--args",
            "[1.0001, 100000]",
            "--max-stack-bytes",
            "4096",
        ],
    );
    let g = ok_json(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0001, 100000]",
            "--json",
        ],
    );
    assert!(g["value"].as_f64().is_some_and(|v| v > 1.0), "{g}");
}

#[test]
fn ad_budget_checkpoints_every_derivative_that_stores_more() {
    let fx = fixture();
    let call = ["--fn", "long", "--args", "[1.0001, 10000]"];
    // One f64 per iteration, the counter and the entry value: 80016 bytes
    // for the reverse sweep (twice that, with tangents, for hvp and
    // hessian); a budget of 1000 bytes checkpoints the forward sweep and
    // gives the same output as storing everything.
    for (cmd, extra) in [
        ("grad", &[][..]),
        ("vjp", &["--seed", "1.0"][..]),
        ("check", &[][..]),
        ("hvp", &["--dir", "[1.0, null]"][..]),
        ("hessian", &[][..]),
    ] {
        let mut args = vec![cmd];
        args.extend(call);
        args.extend(extra);
        args.push("--json");
        // The same exit status and output (`check` of a power of 10^4
        // disagrees with its finite differences either way: status 3).
        let all = advm(&fx, &args);
        assert!(matches!(all.status.code(), Some(0 | 3)), "{args:?}");
        args.extend(["--ad-budget", "1000"]);
        let got = advm(&fx, &args);
        assert_eq!(got.status.code(), all.status.code(), "{args:?}");
        assert_eq!(text(&got.stdout), text(&all.stdout), "{args:?}");
        assert!(!text(&got.stdout).is_empty(), "{args:?}");
        // Below the minimum (the entry's arguments and one push): the trap
        // names the budget and the bytes needed.
        let n = args.len();
        args[n - 1] = "10";
        traps(
            &fx,
            &args,
            &["budget of 10 bytes", "need at least", "--ad-budget"],
        );
    }
    // Exactly enough stores everything; the smaller of the two limits
    // applies.
    let g = ok_json(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0001, 10000]",
            "--json",
        ],
    );
    let b = ok_json(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0001, 10000]",
            "--json",
            "--ad-budget",
            "80016",
        ],
    );
    assert_eq!(g, b);
    traps(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0001, 10000]",
            "--ad-budget",
            "80016",
            "--max-stack-bytes",
            "4096",
        ],
        &["AD stacks", "4096 bytes", "--max-stack-bytes"],
    );
    // Forward mode stores nothing: the Jacobian of one input is columns of
    // tangents.
    ok(
        &fx,
        &[
            "jacobian",
            "--fn",
            "long",
            "--args",
            "[1.0001, 10000]",
            "--ad-budget",
            "0",
        ],
    );
    let o = advm(
        &fx,
        &[
            "grad",
            "--fn",
            "long",
            "--args",
            "[1.0, 1]",
            "--ad-budget",
            "lots",
        ],
    );
    assert_eq!(o.status.code(), Some(64), "{}", text(&o.stderr));
}

#[test]
fn bench_reports_its_recompute_factor() {
    let fx = fixture();
    let bench = |n: &str, budget: &str| {
        let args = format!("[1.0001, {n}]");
        ok_json(
            &fx,
            &[
                "bench",
                "--fn",
                "long",
                "--args",
                &args,
                "--json",
                "--ad-budget",
                budget,
            ],
        )
    };
    // Storing everything fits: nothing is recomputed.
    let b = bench("100", "4096");
    assert_eq!(b["recompute_factor"].as_f64(), Some(1.0), "{b}");
    // 80 kB under a budget of 4 kB: checkpointed, 40 segments and room
    // for about twenty snapshots.
    let b = bench("10000", "4096");
    let factor = b["recompute_factor"].as_f64().expect("a number");
    assert!(factor > 1.5 && factor < 5.0, "{b}");
}

#[test]
fn limit_flags_need_numbers() {
    let fx = fixture();
    for flag in [
        "--fuel",
        "--max-depth",
        "--max-array",
        "--max-stack-bytes",
        "--max-heap-bytes",
    ] {
        let o = advm(&fx, &["run", "--fn", "deep", "--args", "[1]", flag, "lots"]);
        assert_eq!(o.status.code(), Some(64), "{flag}: {}", text(&o.stderr));
    }
}

// ---- traps ---------------------------------------------------------------

#[test]
fn integer_division_by_zero_traps() {
    let fx = fixture();
    traps(
        &fx,
        &["run", "--fn", "divz", "--args", "[7, 0]"],
        &["division by zero", "@divz", "block entry", "div", "line"],
    );
    traps(
        &fx,
        &["run", "--fn", "remz", "--args", "[7, 0]", "--json"],
        &["remainder by zero", "@remz", "block entry", "rem"],
    );
    assert_eq!(
        ok(
            &fx,
            &[
                "run",
                "--fn",
                "divz",
                "--args",
                "[-9223372036854775808, -1]"
            ]
        ),
        "-9223372036854775808\n"
    );
}

#[test]
fn out_of_bounds_aget_traps() {
    let fx = fixture();
    for i in ["3", "-1"] {
        let args = format!("[[1.0, 2.0, 3.0], {i}]");
        traps(
            &fx,
            &["run", "--fn", "oob", "--args", &args],
            &["out of bounds", "length 3", "@oob", "block fetch", "aget"],
        );
    }
    assert_eq!(
        ok(
            &fx,
            &["run", "--fn", "oob", "--args", "[[1.0, 2.0, 3.0], 2]"]
        ),
        "3\n"
    );
}

#[test]
fn negative_anew_traps() {
    let fx = fixture();
    traps(
        &fx,
        &["run", "--fn", "negnew", "--args", "[-3]"],
        &["negative length -3", "@negnew", "block alloc", "anew"],
    );
    // And in a gradient (the forward pass traps the same way).
    traps(
        &fx,
        &["grad", "--fn", "negnew", "--args", "[-3]"],
        &["negative length -3", "anew"],
    );
}

#[test]
fn invalid_ftoi_traps() {
    let fx = fixture();
    for x in ["1e19", "-1e19"] {
        let args = format!("[{x}]");
        traps(
            &fx,
            &["run", "--fn", "badconv", "--args", &args],
            &["ftoi", "@badconv", "block entry"],
        );
    }
    assert_eq!(
        ok(&fx, &["run", "--fn", "badconv", "--args", "[-2.9]"]),
        "-2\n"
    );
}

// ---- non-finite values ---------------------------------------------------

#[test]
fn infinities_print_as_inf() {
    let fx = fixture();
    assert_eq!(ok(&fx, &["run", "--fn", "pinf"]), "inf\n");
    assert_eq!(ok(&fx, &["run", "--fn", "ninf"]), "-inf\n");
    assert_eq!(
        ok_json(&fx, &["run", "--fn", "pinf", "--json"]),
        serde_json::json!({"value": "inf"})
    );
    assert_eq!(
        ok_json(&fx, &["run", "--fn", "ninf", "--json"]),
        serde_json::json!({"value": "-inf"})
    );
    assert_eq!(
        ok_json(
            &fx,
            &["run", "--fn", "quot", "--args", "[1.0, 0.0]", "--json"]
        ),
        serde_json::json!({"value": "inf"})
    );
}

#[test]
fn nan_prints_as_nan() {
    let fx = fixture();
    // Rust's `{}` prints `NaN`; the contract's JSON form is "nan". The text
    // form is compared without case (see docs/reliability.md).
    let out = ok(&fx, &["run", "--fn", "nan"]);
    assert!(out.trim().eq_ignore_ascii_case("nan"), "{out:?}");
    assert_eq!(
        ok_json(&fx, &["run", "--fn", "nan", "--json"]),
        serde_json::json!({"value": "nan"})
    );
    assert_eq!(
        ok_json(&fx, &["run", "--fn", "infs", "--json"]),
        serde_json::json!({"value": ["inf", "-inf", "nan"]})
    );
}

#[test]
fn non_finite_gradients_are_json_strings() {
    let fx = fixture();
    // d/da (a / b) = 1 / b = inf at b = 0; d/db = -a / b^2 = -inf.
    let g = ok_json(
        &fx,
        &["grad", "--fn", "quot", "--args", "[1.0, 0.0]", "--json"],
    );
    assert_eq!(
        g,
        serde_json::json!({"value": "inf", "grad": ["inf", "-inf"]})
    );
    let g = ok_json(
        &fx,
        &["grad", "--fn", "quot", "--args", "[0.0, 0.0]", "--json"],
    );
    assert_eq!(g["value"], "nan", "{g}");
}

// ---- gradients at kinks ----------------------------------------------------

fn grad_json(fx: &Fixture, f: &str, args: &str) -> serde_json::Value {
    ok_json(fx, &["grad", "--fn", f, "--args", args, "--json"])
}

#[test]
fn abs_has_zero_derivative_at_zero() {
    let fx = fixture();
    assert_eq!(
        grad_json(&fx, "absf", "[0.0]"),
        serde_json::json!({"value": 0.0, "grad": [0.0]})
    );
    assert_eq!(
        grad_json(&fx, "absf", "[-0.0]")["grad"],
        serde_json::json!([0.0])
    );
    assert_eq!(
        grad_json(&fx, "absf", "[-2.0]")["grad"],
        serde_json::json!([-1.0])
    );
    assert_eq!(
        grad_json(&fx, "absf", "[2.0]")["grad"],
        serde_json::json!([1.0])
    );
    assert_eq!(
        grad_json(&fx, "kink", "[1.0]")["grad"],
        serde_json::json!([0.0])
    );
}

#[test]
fn min_max_ties_go_to_the_first_operand() {
    let fx = fixture();
    let first = serde_json::json!([1.0, 0.0]);
    let second = serde_json::json!([0.0, 1.0]);
    // `min %x, %y` / `max %x, %y` at x == y: all to x.
    assert_eq!(grad_json(&fx, "minxy", "[1.5, 1.5]")["grad"], first);
    assert_eq!(grad_json(&fx, "maxxy", "[1.5, 1.5]")["grad"], first);
    // `min %y, %x` / `max %y, %x` at x == y: all to y, the first operand.
    assert_eq!(grad_json(&fx, "minyx", "[1.5, 1.5]")["grad"], second);
    assert_eq!(grad_json(&fx, "maxyx", "[1.5, 1.5]")["grad"], second);
    // Away from the tie, to the chosen operand.
    assert_eq!(grad_json(&fx, "minxy", "[1.0, 2.0]")["grad"], first);
    assert_eq!(grad_json(&fx, "minxy", "[2.0, 1.0]")["grad"], second);
    assert_eq!(grad_json(&fx, "maxxy", "[1.0, 2.0]")["grad"], second);
    assert_eq!(grad_json(&fx, "maxxy", "[2.0, 1.0]")["grad"], first);
    // Signed zeros tie too.
    assert_eq!(grad_json(&fx, "minxy", "[0.0, -0.0]")["grad"], first);
    assert_eq!(grad_json(&fx, "maxyx", "[0.0, -0.0]")["grad"], second);
}

// ---- the AD stack limit, through the library ---------------------------

const LONG: &str = "
fn @long(%x: f64, %n: i64) -> f64 {
entry:
    jmp head
head:
    %k = phi [entry: 0], [body: %k2]
    %p = phi [entry: 1.0], [body: %p2]
    %c = lt %k, %n
    br %c, body, done
body:
    %p2 = mul %p, %x
    %k2 = add %k, 1
    jmp head
done:
    ret %p
}
";

fn long_engine() -> (ad::Engine, vm::ir::FuncId) {
    let module = assembler::assemble(LONG, "long.adasm").expect("assembles");
    let engine = ad::Engine::new(module).expect("verifies");
    let f = engine.find("long").expect("defined");
    (engine, f)
}

/// Bytes one iteration of `@long` keeps on the AD stacks: one f64 on the
/// comms stack and one block id.
const PER_ITER: usize = 8 + 4;

/// Regression (found by this test, fixed in vm/src/interp.rs): the limit
/// was only checked when a stack's buffer was full, and `try_reserve` could
/// grow a buffer past the room left, so the stacks reached up to about
/// twice `--max-stack-bytes` (peak 6144 bytes under a 4096-byte limit).
#[test]
fn stack_limit_is_not_exceeded() {
    for limit in [4096usize, 40_960, 409_600] {
        let (mut engine, f) = long_engine();
        engine.vm_mut().limits_mut().max_stack_bytes = limit;
        // Twice the iterations that fit would need twice the limit.
        let n = (limit / PER_ITER) as i64 * 15 / 10;
        let r = engine.grad(f, &[vm::Value::F64(1.0), vm::Value::I64(n)]);
        let peak = engine.vm_mut().peak_stack_bytes();
        assert!(
            r.is_err(),
            "limit {limit}: a gradient needing {} bytes succeeded (peak {peak})",
            n as usize * PER_ITER
        );
    }
}

/// Regression (same place): buffers kept from an earlier, larger gradient
/// were never full, so a later gradient under a lower limit was not
/// checked at all.
#[test]
fn stack_limit_applies_to_a_reused_vm() {
    let (mut engine, f) = long_engine();
    // A first, large gradient leaves big stack buffers behind.
    engine
        .grad(f, &[vm::Value::F64(1.0), vm::Value::I64(100_000)])
        .expect("fits the default limit");
    engine.vm_mut().limits_mut().max_stack_bytes = 4096;
    let r = engine.grad(f, &[vm::Value::F64(1.0), vm::Value::I64(10_000)]);
    assert!(
        matches!(&r, Err(ad::AdError::Trap(t)) if matches!(t.kind, vm::TrapKind::StackLimit { .. })),
        "a 120 kB gradient under a 4 kB limit: {:?}",
        r.map(|g| g.value)
    );
}

// ---- size limits -----------------------------------------------------------

/// A straight-line function of `n` f64 values: `sin`, then `n - 1` `mul`s.
fn chain(n: usize) -> String {
    let mut s = String::from("fn @big(%x: f64) -> f64 {\nentry:\n    %v0 = sin %x\n");
    for i in 1..n {
        s.push_str(&format!("    %v{i} = mul %v{}, %x\n", i - 1));
    }
    s.push_str(&format!("    ret %v{}\n}}\n", n - 1));
    s
}

fn write_program(src: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.adasm");
    std::fs::write(&path, src).expect("writes");
    Fixture { _dir: dir, path }
}

#[test]
fn a_large_function_runs_and_differentiates() {
    let fx = write_program(&chain(20_000));
    assert!(ok(&fx, &["run", "--fn", "big", "--args", "[1.0]"]).starts_with("0.84147"));
    let g = ok_json(&fx, &["grad", "--fn", "big", "--args", "[1.0]", "--json"]);
    assert!(g["grad"][0].as_f64().is_some_and(|d| d > 1.0), "{g}");
}

/// Regression: the assembler accepts up to 60 000 values per function, but
/// the reverse function of a function with more than about 32 700 active
/// values needs more than 65 535 registers. `advm grad` used to end with
/// exit status 70, "internal error (please report): lowering big.rev: ...".
/// It is a documented limit: exit status 64, like any function that cannot
/// be differentiated, with a message that says what to do.
#[test]
fn grad_of_an_accepted_function_is_no_internal_error() {
    let fx = write_program(&chain(33_000));
    assert!(ok(&fx, &["run", "--fn", "big", "--args", "[1.0]"]).starts_with("0.84147"));
    for cmd in ["grad", "check"] {
        let o = advm(&fx, &[cmd, "--fn", "big", "--args", "[1.0]", "--json"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(64), "{cmd}: {err}");
        assert_eq!(text(&o.stdout), "", "{cmd}");
        for needle in [
            "cannot differentiate @big:",
            "@big.rev needs 66003 registers",
            "at most 65535",
            "split @big into smaller functions",
        ] {
            assert!(
                err.contains(needle),
                "{cmd}: stderr lacks {needle:?}:\n{err}"
            );
        }
        assert!(!err.contains("internal error"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

// ---- the memory budget and the input size limit ---------------------------

/// A recursive function with a large frame: `k` additions (about `k`
/// registers), then a call of itself while `n > 0`.
fn wide(k: usize) -> String {
    let mut s =
        String::from("fn @wide(%n: i64, %x: f64) -> f64 {\nentry:\n    %a0 = add %x, 1.0\n");
    for i in 1..k {
        s.push_str(&format!("    %a{i} = add %a{}, %x\n", i - 1));
    }
    s.push_str(&format!(
        "    %c = gt %n, 0\n    br %c, rec, done\nrec:\n    %m = sub %n, 1\n    \
         %r = call @wide(%m, %a{})\n    ret %r\ndone:\n    ret %a{0}\n}}\n",
        k - 1
    ));
    s
}

/// A 0.6 MB recursive program at depth 99 000 (under the depth limit):
/// its registers would need 16 GB. Under an address-space limit of 1.5
/// GiB, `--max-memory` ends it with a trap (status 1), quickly, where it
/// used to be killed by the OS.
#[test]
fn deep_recursion_is_stopped_by_the_memory_budget_not_the_os() {
    let fx = write_program(&wide(20_000));
    assert!(std::fs::metadata(&fx.path).expect("written").len() > 500_000);
    let script = format!(
        "ulimit -v 1500000 && exec '{}' run '{}' --fn wide --args '[99000, 1.0]' --max-memory 536870912",
        env!("CARGO_BIN_EXE_advm"),
        fx.path.display()
    );
    let started = std::time::Instant::now();
    let o = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("trap: memory exceeds the limit of 536870912 bytes")
            && err.contains("raise it with --max-memory) in @wide"),
        "{err}"
    );
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    // Within the budget it runs.
    let o = advm(
        &fx,
        &[
            "run",
            "--fn",
            "wide",
            "--args",
            "[10, 1.0]",
            "--max-memory",
            "536870912",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// `/dev/zero` as a source or an arguments file: refused after the limit
/// (status 64, naming --max-source-bytes), quickly; a file just within
/// the limit is read.
#[test]
fn endless_and_oversized_input_files_are_refused() {
    let bin = env!("CARGO_BIN_EXE_advm");
    let run = |args: &[&str]| {
        Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("advm runs")
    };
    let fx = fixture();
    let p = fx.path.to_str().expect("utf-8");
    for args in [
        vec!["run", "/dev/zero"],
        vec!["check", p, "--fn", "absf", "--args-file", "/dev/zero"],
        vec![
            "run",
            p,
            "--fn",
            "absf",
            "--args-file",
            "/dev/zero",
            "--max-source-bytes",
            "100",
        ],
        vec![
            "run",
            p,
            "--fn",
            "absf",
            "--args",
            "[1.0]",
            "--max-source-bytes",
            "100",
        ],
    ] {
        let started = std::time::Instant::now();
        let o = run(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {err}");
        assert!(
            err.contains("raise the limit with --max-source-bytes"),
            "{args:?}: {err}"
        );
        assert!(
            started.elapsed().as_secs() < 10,
            "{args:?}: {:?}",
            started.elapsed()
        );
    }
    let size = std::fs::metadata(&fx.path)
        .expect("exists")
        .len()
        .to_string();
    let o = run(&[
        "run",
        p,
        "--fn",
        "absf",
        "--args",
        "[-2.0]",
        "--max-source-bytes",
        &size,
    ]);
    assert_eq!(
        (o.status.code(), text(&o.stdout).as_str()),
        (Some(0), "2\n"),
        "{}",
        text(&o.stderr)
    );
    // The REPL's :load too; the session goes on.
    let mut child = Command::new(bin)
        .args(["repl", "--max-source-bytes", "100"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm repl runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        writeln!(stdin, ":load /dev/zero\n:funcs").expect("writes");
    }
    let o = child.wait_with_output().expect("ends");
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(all.contains("/dev/zero is larger than 100 bytes"), "{all}");
    assert_eq!(o.status.code(), Some(0), "{all}");
}

/// `--max-compile-work`: a budget too small for the derivative is refused
/// with status 64, naming the function and the flag (for `grad` and for
/// `disasm --ad`, which derive), and the same command within the budget
/// succeeds; `run` derives nothing, so the flag does not stop it.
#[test]
fn a_compile_budget_too_small_is_refused_naming_the_flag() {
    let fx = fixture();
    for args in [
        vec![
            "grad",
            "--fn",
            "absf",
            "--args",
            "[1.0]",
            "--max-compile-work",
            "10",
        ],
        vec!["disasm", "--ad", "--fn", "absf", "--max-compile-work", "10"],
    ] {
        let o = advm(&fx, &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {err}");
        for part in [
            "cannot differentiate @absf",
            "compile budget of 10",
            "--max-compile-work",
        ] {
            assert!(err.contains(part), "{args:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = advm(
        &fx,
        &[
            "grad",
            "--fn",
            "absf",
            "--args",
            "[1.0]",
            "--max-compile-work",
            "100000",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = advm(
        &fx,
        &[
            "run",
            "--fn",
            "absf",
            "--args",
            "[1.0]",
            "--max-compile-work",
            "0",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// The REPL applies `--max-compile-work` to the engines it builds: a
/// gradient past the budget is refused with the message, a run is not, and
/// the session goes on.
#[test]
fn the_repl_refuses_a_gradient_past_the_compile_budget() {
    let fx = fixture();
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["repl", "--max-compile-work", "10"])
        .arg(&fx.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm repl runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        writeln!(stdin, "grad @absf(-2.0)\n@absf(-2.0)").expect("writes");
    }
    let o = child.wait_with_output().expect("ends");
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(
        all.contains("compile budget of 10 work units") && all.contains("--max-compile-work"),
        "{all}"
    );
    assert!(
        text(&o.stdout).lines().any(|l| l == "2"),
        "the run still runs: {all}"
    );
    assert_eq!(o.status.code(), Some(0), "{all}");
}

// ---- the compile budget of tangents and Hessian-vector products --------

/// The least compile budget under which `steps`, run in order on one
/// fresh engine of `PROGRAM`'s `@name` (inlining as the command line does
/// by default), all succeed: a bisection, since a derivation that fits a
/// budget fits every larger one.
fn least_budget(name: &str, steps: &dyn Fn(&mut ad::Engine, vm::ir::FuncId) -> bool) -> u64 {
    let module = assembler::assemble(PROGRAM, "limits.adasm").expect("assembles");
    let fits = |budget: u64| {
        let mut e =
            ad::Engine::with_inlining(module.clone(), &ad::Policy::default()).expect("verifies");
        e.set_max_compile_work(budget);
        let f = e.find(name).expect("defined");
        steps(&mut e, f)
    };
    let (mut lo, mut hi) = (0u64, ad::compile_work::DEFAULT_MAX_COMPILE_WORK);
    assert!(!fits(lo) && fits(hi), "@{name}: no budget between");
    // `lo` never fits, `hi` always does.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The budgets of `@long` (x differentiated, n not): the least under which
/// the gradient and the tangent function are built, and the least under
/// which the Hessian-vector product's functions are built after them (as
/// `advm bench` builds them), and a budget between the two.
fn long_budgets() -> (u64, u64, u64) {
    let mask = [true, false];
    let first = least_budget("long", &|e, f| {
        e.derive(f).is_ok() && e.derive_jvp(f, &mask).is_ok()
    });
    let all = least_budget("long", &|e, f| {
        e.derive(f).is_ok() && e.derive_jvp(f, &mask).is_ok() && e.derive_hvp(f, &mask).is_ok()
    });
    assert!(
        first < all,
        "the gradient and tangent need {first} units, with the HVP {all}: no budget between"
    );
    println!("@long: gradient and tangent {first} units, with the HVP {all}");
    (first, first + (all - first) / 2, all)
}

/// Exit status 64 and the documented refusal (docs/cli.md, "Limits").
fn refused_for_work(fx: &Fixture, args: &[&str], budget: u64) {
    let o = advm(fx, args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(64), "{args:?}: {err}");
    for part in [
        "advm: cannot differentiate @long: building its derived code takes more than the compile \
         budget of "
            .to_string(),
        format!("budget of {budget} work units ("),
        "raise it with --max-compile-work N".to_string(),
    ] {
        assert!(
            err.contains(&part),
            "{args:?}: stderr lacks {part:?}: {err}"
        );
    }
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(text(&o.stdout), "", "{args:?}");
}

/// `jvp`, `hvp` and `hessian` refuse a derivation past `--max-compile-work`
/// with status 64 and the message: `jvp` under a budget too small for the
/// tangent function, `hvp` and `hessian` under one that the gradient and
/// the tangent fit but the Hessian-vector product does not. The same
/// commands under the least budget that fits succeed.
#[test]
fn tangents_and_hvps_past_the_compile_budget_are_refused() {
    let fx = fixture();
    let (first, between, all) = long_budgets();
    let jvp_least = least_budget("long", &|e, f| e.derive_jvp(f, &[true, false]).is_ok());
    let cmd = |verb: &'static str, budget: &str| -> Vec<String> {
        let mut v = vec![verb, "--fn", "long", "--args", "[1.5, 3]"];
        if verb != "hessian" {
            v.extend(["--dir", "[1.0, null]"]);
        }
        v.push("--max-compile-work");
        let mut v: Vec<String> = v.into_iter().map(String::from).collect();
        v.push(budget.to_string());
        v
    };
    let run = |args: &[String]| advm(&fx, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let refuse = |args: &[String], budget: u64| {
        refused_for_work(
            &fx,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            budget,
        )
    };
    refuse(&cmd("jvp", &(jvp_least - 1).to_string()), jvp_least - 1);
    for verb in ["hvp", "hessian"] {
        refuse(&cmd(verb, &between.to_string()), between);
    }
    for (verb, budget) in [("jvp", jvp_least), ("hvp", all), ("hessian", all)] {
        let o = run(&cmd(verb, &budget.to_string()));
        assert_eq!(o.status.code(), Some(0), "{verb}: {}", text(&o.stderr));
    }
    // x³ at 1.5: 3.375, its derivative 6.75, its second derivative 9.
    let mut json = cmd("hvp", &all.to_string());
    json.push("--json".to_string());
    let out = text(&run(&json).stdout);
    assert_eq!(
        out.trim(),
        r#"{"grad":[6.75,null],"hvp":[9.0,null],"value":3.375}"#
    );
    assert!(first <= between && between < all);
}

/// `advm bench` under a budget that the gradient and the tangent fit but
/// the Hessian-vector product does not: every other figure, the refusal
/// as `"hvp_error"` (JSON, no `"hvp_ns"`) or `hvp:    refused: ...`
/// (text), exit status 0. Under the least budget that fits all, the
/// product is timed instead.
#[test]
fn bench_reports_an_hvp_past_the_compile_budget_and_goes_on() {
    let fx = fixture();
    let (_, between, all) = long_budgets();
    let bench = |budget: u64, json: bool| {
        let budget = budget.to_string();
        let mut args = vec![
            "bench",
            "--fn",
            "long",
            "--args",
            "[1.5, 3]",
            "--max-compile-work",
            &budget,
        ];
        if json {
            args.push("--json");
        }
        let o = advm(&fx, &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let out = bench(between, true);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    let msg = v["hvp_error"]
        .as_str()
        .unwrap_or_else(|| panic!("no hvp_error: {out}"));
    assert!(
        msg.starts_with("cannot differentiate @long")
            && msg.contains(&format!("compile budget of {between} work units"))
            && msg.contains("--max-compile-work"),
        "{msg}"
    );
    assert!(v.get("hvp_ns").is_none(), "{out}");
    for key in ["primal_ns", "grad_ns", "jvp_ns"] {
        assert!(v[key].as_f64().is_some_and(|t| t > 0.0), "{key}: {out}");
    }
    let out = bench(between, false);
    let line = out
        .lines()
        .find(|l| l.starts_with("hvp:"))
        .unwrap_or_else(|| panic!("no hvp line: {out}"));
    assert!(
        line.starts_with("hvp:    refused: cannot differentiate @long")
            && line.contains(&format!("compile budget of {between} work units")),
        "{line}"
    );
    assert!(out.lines().any(|l| l.starts_with("jvp:    ")), "{out}");
    let out = bench(all, true);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert!(v["hvp_ns"].as_f64().is_some(), "{out}");
    assert!(v.get("hvp_error").is_none(), "{out}");
}
