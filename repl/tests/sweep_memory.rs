//! `advm sweep` streams: its peak memory does not grow with the input. A
//! sweep reads its points from a pipe; once every result has come back
//! (the inputs are whole chunks of 4096 lines, so the process has written
//! them all and waits for more input, still alive), its peak resident
//! set (`VmHWM` in `/proc/PID/status`) is read and compared between a
//! small input and one far larger than the bound. (Its own test binary:
//! nothing else runs beside it.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// The peak resident set of process `pid`, in kB.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in kB")
}

/// Sweep `lines` copies of `line` through `@sum` of array_sum.adasm (a
/// gradient per point), reading every result; the peak memory (kB) while
/// the process is still alive, and the bytes of input.
fn peak_for(lines: usize, line: &str) -> (u64, usize) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(["sweep", "programs/array_sum.adasm", "--fn", "sum"])
        .args(["--points", "-", "--threads", "2"])
        .current_dir(testkit::workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("advm runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let text = format!("{line}\n");
    let writer = std::thread::spawn(move || {
        for _ in 0..lines {
            stdin.write_all(text.as_bytes()).expect("writes a point");
        }
        stdin.flush().expect("flushes");
        // Keep the pipe open (the sweep waits for more) until measured.
        let _ = done_rx.recv();
        drop(stdin);
    });
    let mut results = BufReader::new(child.stdout.take().expect("stdout"));
    let mut buf = String::new();
    for k in 0..lines {
        buf.clear();
        let n = results.read_line(&mut buf).expect("reads a result");
        assert!(n > 0, "the sweep ended after {k} results");
        assert!(buf.starts_with(&format!("{{\"i\":{k},\"value\":")), "{buf}");
    }
    let peak = peak_kb(child.id());
    let _ = done_tx.send(());
    writer.join().expect("writer");
    assert!(child.wait().expect("waits").success());
    (peak, lines * (line.len() + 1))
}

#[test]
fn peak_memory_does_not_grow_with_the_input() {
    // One point: 200 numbers, about 3.6 kB of JSON.
    let xs: Vec<String> = (0..200)
        .map(|i| format!("{:.12}", 1.0 + i as f64 / 7.0))
        .collect();
    let line = format!("[[{}]]", xs.join(", "));
    let (small, _) = peak_for(4096, &line);
    let (large, bytes) = peak_for(11 * 4096, &line);
    let input_kb = (bytes / 1024) as u64;
    eprintln!(
        "peak RSS: {small} kB for one chunk, {large} kB for 11 chunks ({input_kb} kB of input)"
    );
    // Holding the input alone would take more than 140 MB; a chunk of 4096
    // lines and its results take about 20 MB.
    assert!(input_kb > 140_000, "{input_kb} kB of input");
    assert!(
        large < small + 16_000,
        "peak {large} kB for 11 chunks against {small} kB for one"
    );
    assert!(
        large < input_kb / 2,
        "peak {large} kB for {input_kb} kB of input"
    );
}
