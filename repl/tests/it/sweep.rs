//! `advm sweep` (docs/sweep.md) on the built binary: every result line is
//! the `--json` output of the single call (`advm run` / `advm grad`) at that
//! point, plus its index; shards run as separate processes partition the
//! input and merge to the unsharded output; failing and blank lines; points
//! on standard input; Ctrl-C leaves a complete prefix; usage errors.

use serde_json::Value as Json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// Every line of `out` parsed as JSON (each must be one object).
fn lines(out: &str) -> Vec<Json> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn index(j: &Json) -> u64 {
    j["i"].as_u64().unwrap_or_else(|| panic!("no index in {j}"))
}

fn points_file(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("writes points");
    path
}

const POW: &str = "programs/bench/powloop.adasm";
const TRAPS: &str = "programs/traps.adasm";
const ARRAYS: &str = "programs/array_sum.adasm";

/// Each output line of a sweep equals the single call's `--json` output
/// at that point (with `"i"` added), or, for a point whose single call
/// traps, carries the single call's message.
fn agrees_with_single_calls(file: &str, func: &str, mode: &str, extra: &[&str], points: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let owned: Vec<String> = points.iter().map(|s| s.to_string()).collect();
    let pts = points_file(dir.path(), "p.jsonl", &owned);
    let pts = pts.to_str().expect("utf-8 path");
    let mut args = vec!["sweep", file, "--fn", func, "--points", pts, "--mode", mode];
    args.extend_from_slice(extra);
    let o = advm(&args);
    let out = lines(&text(&o.stdout));
    assert_eq!(out.len(), points.len(), "{}", text(&o.stderr));
    let mut any_failed = false;
    for (i, (line, point)) in out.iter().zip(points).enumerate() {
        assert_eq!(index(line), i as u64, "{line}");
        let mut single = vec![mode, file, "--fn", func, "--args", point, "--json"];
        single.extend_from_slice(extra);
        let s = advm(&single);
        if status(&s) == 0 {
            let mut expected: Json = serde_json::from_slice(&s.stdout).expect("JSON");
            expected["i"] = Json::from(i);
            assert_eq!(line, &expected, "point {point}");
        } else {
            any_failed = true;
            assert_eq!(status(&s), 1, "{}", text(&s.stderr));
            let message = line["error"].as_str().expect("an error line");
            assert_eq!(
                text(&s.stderr).trim_end(),
                format!("{file}: {message}"),
                "point {point}"
            );
            assert_eq!(line.as_object().map(|o| o.len()), Some(2), "{line}");
        }
    }
    assert_eq!(
        status(&o),
        if any_failed { 1 } else { 0 },
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn grad_lines_equal_single_grad_calls() {
    agrees_with_single_calls(
        POW,
        "pow",
        "grad",
        &[],
        &[
            "[2.0, 10]",
            "[1.0001, 1000]",
            "[-0.5, 3]",
            "[0.0, 0]",
            "[\"inf\", 2]",
            "[1e300, 2]",
        ],
    );
}

/// `--ad-budget` on a sweep: each worker's derivatives are checkpointed
/// where they store more than the budget (powloop at n = 5000 stores
/// 40 kB), and every line, `grad` and `hvp` alike, is the one without a
/// budget bit for bit (and the single call's with the budget).
#[test]
fn lines_under_an_ad_budget_equal_those_without_one() {
    let points = [
        "[1.0001, 5000]",
        "[0.9999, 4000]",
        "[2.0, 10]",
        "[1.00001, 3000]",
    ];
    for (mode, extra) in [("grad", &[][..]), ("hvp", &["--dir", "[1.0, null]"][..])] {
        let mut budget = extra.to_vec();
        budget.extend(["--ad-budget", "2048"]);
        agrees_with_single_calls(POW, "pow", mode, &budget, &points);
        let dir = tempfile::tempdir().expect("temp dir");
        let owned: Vec<String> = points.iter().map(|s| s.to_string()).collect();
        let pts = points_file(dir.path(), "p.jsonl", &owned);
        let pts = pts.to_str().expect("utf-8 path");
        let run = |more: &[&str]| {
            let mut args = vec!["sweep", POW, "--fn", "pow", "--points", pts, "--mode", mode];
            args.extend_from_slice(more);
            let o = advm(&args);
            assert_eq!(status(&o), 0, "{}", text(&o.stderr));
            let mut out = lines(&text(&o.stdout));
            out.sort_by_key(index);
            out
        };
        assert_eq!(run(&budget), run(extra), "{mode}");
        // The budget is in force in the workers: below the minimum, a trap.
        let mut args = vec!["sweep", POW, "--fn", "pow", "--points", pts, "--mode", mode];
        args.extend_from_slice(extra);
        args.extend(["--ad-budget", "10"]);
        let o = advm(&args);
        assert_eq!(status(&o), 1, "{}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("budget of 10 bytes"),
            "{}",
            text(&o.stdout)
        );
    }
}

#[test]
fn grad_lines_with_arrays_traps_and_wrt_equal_single_calls() {
    agrees_with_single_calls(
        TRAPS,
        "pick",
        "grad",
        &[],
        &[
            "[[1.0, 3.0], 1]",
            "[[1.0, 3.0], 2]",
            "[[2.5], 0]",
            "[[1.0], -1]",
        ],
    );
    agrees_with_single_calls(
        ARRAYS,
        "dot",
        "grad",
        &["--wrt", "w"],
        &[
            "[[1.0, 2.0, 3.0], [4.0, 5.0]]",
            "[[0.5, -1.5], [2.0, 0.25, 8.0]]",
            "[[], []]",
        ],
    );
}

#[test]
fn jvp_lines_equal_single_jvp_calls() {
    agrees_with_single_calls(
        POW,
        "pow",
        "jvp",
        &["--dir", "[1.0, null]"],
        &["[2.0, 10]", "[1.0001, 1000]", "[-0.5, 3]", "[\"inf\", 2]"],
    );
    // Arrays of different lengths per point, the direction's shape checked
    // per point (a wrong one is that line's error), --wrt.
    agrees_with_single_calls(
        ARRAYS,
        "dot",
        "jvp",
        &["--dir", "[0.0, [1.0, 2.0]]", "--wrt", "w"],
        &["[[1.0, 2.0, 3.0], [4.0, 5.0]]", "[[0.5], [2.0, 0.25]]"],
    );
}

#[test]
fn hvp_lines_equal_single_hvp_calls() {
    agrees_with_single_calls(
        POW,
        "pow",
        "hvp",
        &["--dir", "[1.0, null]"],
        &["[2.0, 10]", "[1.0001, 1000]", "[-0.5, 3]"],
    );
    agrees_with_single_calls(
        ARRAYS,
        "dot",
        "hvp",
        &["--dir", "[[1.0, 0.5], [2.0, -1.0]]"],
        &["[[1.0, 2.0], [4.0, 5.0]]", "[[0.5, 3.0], [2.0, 0.25]]"],
    );
}

#[test]
fn run_lines_equal_single_run_calls() {
    agrees_with_single_calls(
        TRAPS,
        "pick",
        "run",
        &[],
        &["[[1.0, 3.0], 1]", "[[1.0, 3.0], 7]", "[[\"nan\", 2.0], 0]"],
    );
    agrees_with_single_calls(ARRAYS, "sum", "run", &[], &["[[1.5, 2.25, -0.75]]", "[[]]"]);
}

/// `n` points of `@pow` whose cost varies from line to line (so that
/// parallel workers finish out of order).
fn pow_points(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("[{}, {}]", 1.0 + i as f64 * 1e-5, (i * 7919) % 300))
        .collect()
}

#[test]
fn shards_partition_the_input_and_merge_to_the_single_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    // More than one chunk of 4096 lines.
    let n = 10_000;
    let pts = points_file(dir.path(), "p.jsonl", &pow_points(n));
    let pts = pts.to_str().expect("utf-8 path");
    let whole = advm(&["sweep", POW, "--fn", "pow", "--points", pts]);
    assert_eq!(status(&whole), 0, "{}", text(&whole.stderr));
    // Standard error is a pipe here: no progress bar, nothing at all.
    assert_eq!(text(&whole.stderr), "");
    let whole_lines = lines(&text(&whole.stdout));
    let indices: Vec<u64> = whole_lines.iter().map(index).collect();
    assert_eq!(indices, (0..n as u64).collect::<Vec<_>>(), "input order");
    // One thread writes the same bytes.
    let one = advm(&[
        "sweep",
        POW,
        "--fn",
        "pow",
        "--points",
        pts,
        "--threads",
        "1",
    ]);
    assert_eq!(text(&one.stdout), text(&whole.stdout));

    // Three shards, three processes at once, each to its own file.
    let children: Vec<(usize, PathBuf, std::process::Child)> = (0..3)
        .map(|k| {
            let out = dir.path().join(format!("out.{k}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_advm"))
                .args(["sweep", POW, "--fn", "pow", "--points", pts])
                .args(["--shard", &format!("{k}/3"), "--threads", "1"])
                .arg("--out")
                .arg(&out)
                .current_dir(testkit::workspace_root())
                .stdout(Stdio::null())
                .spawn()
                .expect("advm runs");
            (k, out, child)
        })
        .collect();
    let mut merged = Vec::new();
    let mut parts = Vec::new();
    for (k, out, mut child) in children {
        assert!(child.wait().expect("waits").success(), "shard {k}");
        let part = lines(&std::fs::read_to_string(&out).expect("shard output"));
        assert!(
            part.iter().all(|j| index(j) % 3 == k as u64),
            "shard {k} holds only indices ≡ {k} (mod 3)"
        );
        assert!(
            part.windows(2).all(|w| index(&w[0]) < index(&w[1])),
            "shard {k} in input order"
        );
        merged.extend(part);
        parts.push(out);
    }
    merged.sort_by_key(index);
    assert_eq!(
        merged, whole_lines,
        "the merged shards equal the single run"
    );
    // The merge docs/sweep.md gives yields the single run's bytes.
    let sorted = Command::new("sort")
        .env("LC_ALL", "C")
        .args(["-m", "-t:", "-k2,2n"])
        .args(&parts)
        .output()
        .expect("sort runs");
    assert!(sorted.status.success(), "{}", text(&sorted.stderr));
    assert_eq!(text(&sorted.stdout), text(&whole.stdout), "sort -m merge");
}

#[test]
fn a_bad_line_gets_its_error_and_the_rest_still_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let points: Vec<String> = [
        "[2.0, 10]",
        "[2.0, 10",
        "",
        "   ",
        "[2.0]",
        "{\"x\": 1}",
        "[3.0, 2]",
        "[3.0, 2.5]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let pts = points_file(dir.path(), "p.jsonl", &points);
    let o = advm(&[
        "sweep",
        POW,
        "--fn",
        "pow",
        "--points",
        pts.to_str().expect("utf-8"),
    ]);
    assert_eq!(status(&o), 1, "{}", text(&o.stderr));
    let out = lines(&text(&o.stdout));
    // Blank lines (2 and 3) are skipped, but counted.
    let indices: Vec<u64> = out.iter().map(index).collect();
    assert_eq!(indices, [0, 1, 4, 5, 6, 7]);
    assert_eq!(out[0]["value"], Json::from(1024.0));
    assert_eq!(out[4]["grad"][0], Json::from(6.0));
    let error = |k: usize| out[k]["error"].as_str().unwrap_or("").to_string();
    assert!(error(1).contains("not valid JSON"), "{}", error(1));
    assert!(error(2).contains("has 1 entries"), "{}", error(2));
    assert!(error(3).contains("must hold a JSON array"), "{}", error(3));
    assert!(
        error(5).contains("expected an integer, found 2.5"),
        "{}",
        error(5)
    );
    assert!(
        text(&o.stderr).contains("4 of 6 point(s) failed (the first at line index 1:"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn points_from_standard_input_with_crlf_and_a_byte_order_mark() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args([
            "sweep", POW, "--fn", "@pow", "--points", "-", "--mode", "run",
        ])
        .current_dir(testkit::workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all("\u{FEFF}[2.0, 10]\r\n[0.5, 2]\r\n[3.0, 3]".as_bytes())
        .expect("writes");
    let o = child.wait_with_output().expect("waits");
    assert_eq!(status(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        lines(&text(&o.stdout)),
        lines("{\"i\":0,\"value\":1024.0}\n{\"i\":1,\"value\":0.25}\n{\"i\":2,\"value\":27.0}")
    );
}

#[test]
fn usage_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pts = points_file(dir.path(), "p.jsonl", &["[2.0, 10]".to_string()]);
    let pts = pts.to_str().expect("utf-8");
    let missing = dir.path().join("missing.jsonl");
    let no_dir = dir.path().join("no/such/dir/out.jsonl");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--mode", "jvp"], "--mode jvp needs --dir JSON"),
        (vec!["--mode", "hvp"], "--mode hvp needs --dir JSON"),
        (
            vec!["--mode", "grad", "--dir", "[1.0, null]"],
            "--dir applies to --mode jvp and hvp",
        ),
        (
            vec!["--mode", "run", "--wrt", "x"],
            "--wrt applies to --mode grad",
        ),
        (vec!["--wrt", "n"], "it is i64"),
        (vec!["--threads", "0"], "--threads must be at least 1"),
        (vec!["--shard", "3/3"], "below the count"),
        (vec!["--shard", "0/0"], "at least 1"),
        (vec!["--shard", "1"], "is not I/N"),
        (vec!["--mode", "mean"], "invalid value 'mean'"),
    ];
    for (extra, message) in cases {
        let mut args = vec!["sweep", POW, "--fn", "pow", "--points", pts];
        args.extend(extra.iter());
        let o = advm(&args);
        assert_eq!(status(&o), 64, "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(message),
            "{args:?}: {}",
            text(&o.stderr)
        );
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
    let o = advm(&[
        "sweep",
        POW,
        "--fn",
        "pow",
        "--points",
        missing.to_str().expect("utf-8"),
    ]);
    assert_eq!(status(&o), 64);
    assert!(
        text(&o.stderr).contains("cannot read points file"),
        "{}",
        text(&o.stderr)
    );
    let o = advm(&[
        "sweep",
        POW,
        "--fn",
        "pow",
        "--points",
        pts,
        "--out",
        no_dir.to_str().expect("utf-8"),
    ]);
    assert_eq!(status(&o), 64);
    assert!(
        text(&o.stderr).contains("cannot create"),
        "{}",
        text(&o.stderr)
    );
    // A function that cannot be differentiated: refused before any point.
    let o = advm(&[
        "sweep",
        "programs/gcd.adasm",
        "--fn",
        "gcd",
        "--points",
        pts,
    ]);
    assert_eq!(status(&o), 64, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("cannot differentiate"),
        "{}",
        text(&o.stderr)
    );
    let o = advm(&["sweep", POW, "--fn", "nope", "--points", pts]);
    assert_eq!(status(&o), 64);
}

/// Lines of `path` once it holds at least one complete line.
fn wait_for_output(path: &Path, child: &mut std::process::Child) {
    let start = Instant::now();
    loop {
        let so_far = std::fs::read_to_string(path).unwrap_or_default();
        if so_far.contains('\n') {
            return;
        }
        assert!(
            child.try_wait().expect("polls").is_none(),
            "the sweep ended before writing anything"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no output in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(child: &std::process::Child) {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
}

/// The output of an interrupted sweep: every line parses and the indices
/// are exactly 0..k.
fn complete_prefix(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).expect("output");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a partial last line"
    );
    let out = lines(&text);
    for (k, j) in out.iter().enumerate() {
        assert_eq!(index(j), k as u64, "line {k} of the prefix");
        assert!(j.get("value").is_some(), "{j}");
    }
    out.len()
}

#[test]
fn ctrl_c_stops_after_the_current_chunk_leaving_a_complete_prefix() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Points that each take a while (n = 20 000 multiplications), so that
    // the sweep is still running when the signal comes.
    let n = 40_000;
    let points: Vec<String> = (0..n).map(|i| format!("[1.0000{i}, 20000]")).collect();
    let pts = points_file(dir.path(), "p.jsonl", &points);
    let out = dir.path().join("out.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["sweep", POW, "--fn", "pow", "--threads", "2", "--points"])
        .arg(&pts)
        .arg("--out")
        .arg(&out)
        .current_dir(testkit::workspace_root())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm runs");
    wait_for_output(&out, &mut child);
    sigint(&child);
    let o = child.wait_with_output().expect("waits");
    assert_eq!(status(&o), 130, "{}", text(&o.stderr));
    let k = complete_prefix(&out);
    assert!(k >= 4096 && k < n, "{k} lines");
    assert!(
        text(&o.stderr).contains(&format!(
            "the output holds the results of the first {k} point"
        )),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_second_ctrl_c_interrupts_the_running_chunk_and_drops_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Few points, very slow ones: the first chunk holds them all and would
    // run for minutes.
    let points: Vec<String> = (0..64).map(|_| "[1.0, 2000000000]".to_string()).collect();
    let pts = points_file(dir.path(), "p.jsonl", &points);
    let out = dir.path().join("out.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["sweep", POW, "--fn", "pow", "--threads", "2", "--points"])
        .arg(&pts)
        .arg("--out")
        .arg(&out)
        .current_dir(testkit::workspace_root())
        .stderr(Stdio::piped())
        .spawn()
        .expect("advm runs");
    // The output file exists once the sweep has started (the handler is
    // installed right after), then give it time to enter the chunk.
    let start = Instant::now();
    while !out.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    sigint(&child);
    std::thread::sleep(Duration::from_millis(100));
    sigint(&child);
    let o = child.wait_with_output().expect("waits");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "stopped promptly"
    );
    assert_eq!(status(&o), 130, "{}", text(&o.stderr));
    assert_eq!(complete_prefix(&out), 0, "the interrupted chunk is dropped");
}

/// On a terminal (`script` gives the sweep one), the progress bar shows
/// the points done, the rate and the time left; the results are the same.
#[test]
fn a_progress_bar_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("note: `script` (util-linux) is not installed; progress bar not checked");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let n = 10_000;
    let pts = points_file(dir.path(), "p.jsonl", &pow_points(n));
    let out = dir.path().join("out.jsonl");
    let command = format!(
        "{} sweep {POW} --fn pow --threads 1 --points {} --out {}",
        env!("CARGO_BIN_EXE_advm"),
        pts.display(),
        out.display()
    );
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(testkit::workspace_root())
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let screen = text(&o.stdout);
    assert!(
        screen.contains(&format!("4096/{n} points")) && screen.contains("points/s"),
        "{screen}"
    );
    assert!(screen.contains("ETA"), "{screen}");
    let lines = lines(&std::fs::read_to_string(&out).expect("output"));
    assert_eq!(lines.len(), n);
}

#[test]
fn fn_may_be_left_out_for_a_file_of_one_function() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pts = points_file(dir.path(), "p.jsonl", &pow_points(20));
    let pts = pts.to_str().expect("utf-8 path");
    let without = advm(&["sweep", POW, "--points", pts, "--threads", "1"]);
    let with = advm(&[
        "sweep",
        POW,
        "--fn",
        "pow",
        "--points",
        pts,
        "--threads",
        "1",
    ]);
    assert_eq!(status(&without), 0, "{}", text(&without.stderr));
    assert_eq!(lines(&text(&without.stdout)).len(), 20);
    assert_eq!(without.stdout, with.stdout);
    // Several functions and no @main: bad usage naming them.
    let o = advm(&["sweep", ARRAYS, "--points", pts]);
    assert_eq!(status(&o), 64, "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("has no function @main (it defines @sum, @dot): pass --fn NAME"),
        "{}",
        text(&o.stderr)
    );
}
