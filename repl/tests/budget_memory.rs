//! `--ad-budget` bounds the process's memory: the gradient of powloop
//! (`programs/bench/powloop.adasm`) at n = 10^7 stores 80 MB for its
//! reverse sweep; with a 1 MB budget the forward sweep is checkpointed, the
//! gradient is the same bit for bit, and the whole process stays under 40 MB
//! of peak resident memory, while without one it goes past it. The peak is the child's maximum resident set as
//! GNU time (`/usr/bin/time -f %M`) reports it. (Its own test binary:
//! nothing else runs beside it.)

use std::process::Command;

/// Exit status, stdout, stderr and peak resident memory (kB) of `advm grad`
/// of powloop at `n`, with `extra` flags.
fn grad_peak_kb(n: u64, extra: &[&str]) -> (Option<i32>, String, String, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("time.txt");
    let o = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&out)
        .arg(env!("CARGO_BIN_EXE_advm"))
        .args(["grad", "programs/bench/powloop.adasm", "--args"])
        .arg(format!("[1.0000001, {n}]"))
        .args(extra)
        .current_dir(testkit::workspace_root())
        .output()
        .expect("/usr/bin/time (GNU time) runs advm");
    let text = std::fs::read_to_string(&out).expect("time's report");
    let kb = text
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text:?}"));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        kb,
    )
}

#[test]
fn a_one_megabyte_budget_keeps_powloop_at_ten_million_under_40_mb() {
    let n = 10_000_000;
    let (code, out, err, kb) = grad_peak_kb(n, &["--ad-budget", "1000000", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(kb < 40 * 1024, "peak {kb} kB with a 1 MB budget");
    // Without a budget, storing everything goes past the bound, and the
    // gradient (printed with every bit, as JSON) is the same.
    let (code, all_out, err, all) = grad_peak_kb(n, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(all > 40 * 1024, "peak {all} kB storing everything");
    assert_eq!(out, all_out);
    assert!(out.contains("grad"), "{out}");
}
