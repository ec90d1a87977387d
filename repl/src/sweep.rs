//! `advm sweep`: one function at many points (`docs/sweep.md`).
//!
//! The function is assembled and, for gradients, derived once; every
//! worker thread of a rayon pool runs its own clone of that engine (the
//! bytecode is shared, the VM state is not). The points are read in chunks
//! of [`CHUNK`] lines: a chunk is evaluated in parallel, its results are
//! written in input order and flushed, then the next chunk is read, so the
//! memory held does not grow with the input and an interrupted sweep
//! leaves a complete prefix of result lines.

use crate::commands::{
    apply_limits, load, pick, selection, selection_or_all, Fail, EXIT_OUTPUT, EXIT_TRAP,
};
use crate::out;
use crate::{Mode, SweepArgs};
use advm::points::{Job, Task, Worker};
use serde_json::Value as Json;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Input lines (of this shard) read and evaluated at a time.
pub const CHUNK: usize = 4096;

/// Exit status of a sweep stopped by Ctrl-C (SIGINT): 128 + 2, as a shell
/// reports a process that SIGINT ended.
pub const EXIT_INTERRUPTED: u8 = 130;

/// A chunk of input lines and their results, buffers reused from chunk to
/// chunk.
#[derive(Default)]
struct Chunk {
    /// Global index of each line.
    index: Vec<usize>,
    text: Vec<Vec<u8>>,
    out: Vec<String>,
    /// Whether each line's point failed.
    failed: Vec<bool>,
    len: usize,
}

impl Chunk {
    fn clear(&mut self) {
        self.len = 0;
    }

    /// A buffer for the next line, which has index `i`.
    fn next_line(&mut self, i: usize) -> &mut Vec<u8> {
        if self.len == self.text.len() {
            self.index.push(i);
            self.text.push(Vec::new());
            self.out.push(String::new());
            self.failed.push(false);
        }
        self.index[self.len] = i;
        let buf = &mut self.text[self.len];
        buf.clear();
        self.len += 1;
        buf
    }

    /// Drop the line last added (a blank one).
    fn drop_last(&mut self) {
        self.len -= 1;
    }
}

/// Usage errors of the flags, before anything is read.
fn check_flags(a: &SweepArgs) -> Result<(), Fail> {
    let takes_dir = matches!(a.mode, Mode::Jvp | Mode::Hvp);
    if a.dir.is_some() && !takes_dir {
        return Err(Fail::Usage(
            "--dir applies to --mode jvp and hvp, not to run or grad".into(),
        ));
    }
    if a.mode == Mode::Run && a.wrt.is_some() {
        return Err(Fail::Usage(
            "--wrt applies to --mode grad, jvp and hvp, not to run".into(),
        ));
    }
    if a.threads == Some(0) {
        return Err(Fail::Usage("--threads must be at least 1".into()));
    }
    Ok(())
}

/// `--shard I/N`: `(I, N)` with `N >= 1` and `I < N`.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not I/N (e.g. 0/4)"))?;
    let i: usize = i
        .trim()
        .parse()
        .map_err(|e| format!("`{s}`: shard index: {e}"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|e| format!("`{s}`: shard count: {e}"))?;
    if n == 0 {
        return Err(format!("`{s}`: the shard count must be at least 1"));
    }
    if i >= n {
        return Err(format!(
            "`{s}`: the shard index must be below the count (0 to {})",
            n - 1
        ));
    }
    Ok((i, n))
}

/// Where the results go.
enum Sink {
    Stdout,
    File(std::fs::File, String),
}

impl Sink {
    /// Write `bytes` and flush. `Ok(false)`: standard output is a closed
    /// pipe (nobody reads the results any more); `Err`: the exit status
    /// (74), the error reported.
    fn write(&mut self, bytes: &[u8]) -> Result<bool, u8> {
        match self {
            Sink::Stdout => {
                let mut o = io::stdout().lock();
                match o.write_all(bytes).and_then(|()| o.flush()) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
                    Err(e) => {
                        out::stdout_failed(&e);
                        Err(EXIT_OUTPUT)
                    }
                }
            }
            Sink::File(f, name) => f
                .write_all(bytes)
                .and_then(|()| f.flush())
                .map(|()| true)
                .map_err(|e| {
                    out::err(format_args!("advm: cannot write to {name}: {e}"));
                    EXIT_OUTPUT
                }),
        }
    }
}

/// The Ctrl-C state: the first SIGINT asks the sweep to stop after the
/// chunk it is on; a second one also interrupts the running calls (that
/// chunk is then dropped, not written).
struct Interrupt {
    presses: Arc<AtomicUsize>,
    vm_flag: Arc<AtomicBool>,
}

impl Interrupt {
    fn install(vm_flag: Arc<AtomicBool>) -> Interrupt {
        let presses = Arc::new(AtomicUsize::new(0));
        let (p, v) = (presses.clone(), vm_flag.clone());
        let handler = move || {
            if p.fetch_add(1, Ordering::SeqCst) >= 1 {
                v.store(true, Ordering::SeqCst);
            }
        };
        if let Err(e) = ctrlc::set_handler(handler) {
            out::err(format_args!(
                "advm: Ctrl-C will not stop the sweep cleanly: {e}"
            ));
        }
        Interrupt { presses, vm_flag }
    }

    fn requested(&self) -> bool {
        self.presses.load(Ordering::SeqCst) > 0
    }

    fn calls_interrupted(&self) -> bool {
        self.vm_flag.load(Ordering::SeqCst)
    }
}

/// Lines in `path` (a regular file), for the progress bar's total; `None`
/// when unknown.
fn count_lines(path: &Path) -> Option<usize> {
    // Only a regular file can be read twice (not a pipe, `<(cmd)`).
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let (mut lines, mut last) = (0usize, b'\n');
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count();
        last = buf[n - 1];
    }
    Some(lines + usize::from(last != b'\n'))
}

/// The progress bar on stderr, only when stderr is a terminal.
fn progress(a: &SweepArgs, shard: (usize, usize)) -> Option<indicatif::ProgressBar> {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    if !io::stderr().is_terminal() {
        return None;
    }
    let total = (a.points.as_os_str() != "-")
        .then(|| count_lines(&a.points))
        .flatten()
        .map(|lines| (lines + shard.1 - 1 - shard.0) / shard.1);
    let pb = ProgressBar::with_draw_target(total.map(|t| t as u64), ProgressDrawTarget::stderr());
    let template = if total.is_some() {
        "{bar:40} {pos}/{len} points  {rate}  ETA {eta}"
    } else {
        "{spinner} {pos} points  {rate}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.with_key(
            "rate",
            |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} points/s", s.per_sec());
            },
        ));
    }
    Some(pb)
}

pub fn sweep(a: &SweepArgs, opts: &advm::Options) -> u8 {
    match run_sweep(a, opts) {
        Ok(code) => code,
        Err(f) => f.in_file(&a.file).report_code(),
    }
}

fn run_sweep(a: &SweepArgs, opts: &advm::Options) -> Result<u8, Fail> {
    check_flags(a)?;
    let shard = a.shard.unwrap_or((0, 1));
    let mut engine = load(&a.file, opts)?;
    apply_limits(engine.vm_mut().limits_mut(), &a.limits);
    let f = pick(&engine, a.func.as_deref(), &a.file)?;
    let job = match a.mode {
        Mode::Run => Job::Run,
        Mode::Grad => {
            let mask = selection(&engine, f, a.wrt.as_deref())?;
            // Derive once, before the engine is cloned: every worker then
            // finds the derived code built (and a function that cannot be
            // differentiated is refused before any point runs).
            match &mask {
                Some(m) => engine.derive_wrt(f, m)?,
                None => engine.derive(f)?,
            };
            Job::Grad(mask)
        }
        // Each mode to come is one arm here (its `Job`) and one in
        // `advm::points::Worker::result_line` (its fields).
        Mode::Jvp | Mode::Hvp => {
            let mask = selection_or_all(&engine, f, a.wrt.as_deref())?;
            let Some(dir) = a.dir.clone() else {
                return Err(Fail::Usage(format!(
                    "--mode {} needs --dir JSON",
                    if a.mode == Mode::Jvp { "jvp" } else { "hvp" }
                )));
            };
            // Derived once, before the engine is cloned (as for grad).
            if a.mode == Mode::Jvp {
                engine.derive_jvp(f, &mask)?;
            } else {
                engine.derive_hvp(f, &mask)?;
            }
            let names = dir_names(engine.module().func(f));
            if a.mode == Mode::Jvp {
                Job::Jvp { mask, dir, names }
            } else {
                Job::Hvp { mask, dir, names }
            }
        }
    };
    let mut task = Task::new(&engine, f, job);
    task.source = crate::commands::reread(&a.file).map(std::sync::Arc::from);

    let input: Box<dyn BufRead> = if a.points.as_os_str() == "-" {
        Box::new(BufReader::with_capacity(1 << 16, io::stdin()))
    } else {
        let file = std::fs::File::open(&a.points).map_err(|e| {
            Fail::Usage(format!(
                "cannot read points file {}: {e}",
                a.points.display()
            ))
        })?;
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    let mut sink = match &a.out {
        None => Sink::Stdout,
        Some(p) => Sink::File(
            std::fs::File::create(p)
                .map_err(|e| Fail::Usage(format!("cannot create {}: {e}", p.display())))?,
            p.display().to_string(),
        ),
    };

    let vm_flag = engine.vm_mut().interrupt_handle();
    let interrupt = Interrupt::install(vm_flag);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(0))
        .build()
        .map_err(|e| {
            Fail::Usage(format!(
                "cannot start {} worker threads: {e}",
                a.threads.map_or("the".to_string(), |n| n.to_string())
            ))
        })?;
    let workers: Vec<Mutex<Worker>> = (0..pool.current_num_threads().max(1))
        .map(|_| Mutex::new(Worker::new(engine.clone())))
        .collect();
    let bar = progress(a, shard);
    let points_name = if a.points.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        a.points.display().to_string()
    };

    let mut reader = Lines {
        input,
        next: 0,
        shard,
        done: false,
    };
    let mut chunk = Chunk::default();
    let mut bytes = Vec::new();
    let (mut done, mut failed) = (0usize, 0usize);
    let mut first_failure: Option<(usize, String)> = None;
    let mut status = 0;
    loop {
        if interrupt.requested() {
            status = EXIT_INTERRUPTED;
            break;
        }
        let read = reader
            .fill(&mut chunk, &interrupt)
            .map_err(|e| Fail::Usage(format!("cannot read points from {points_name}: {e}")))?;
        if chunk.len == 0 && reader.done {
            break;
        }
        pool.install(|| evaluate(&workers, &task, &mut chunk));
        if interrupt.calls_interrupted() {
            // A second Ctrl-C cut this chunk's calls short: its results
            // are not the function's, write none of them.
            status = EXIT_INTERRUPTED;
            break;
        }
        bytes.clear();
        for k in 0..chunk.len {
            let line = &chunk.out[k];
            if chunk.failed[k] {
                failed += 1;
                if first_failure.is_none() {
                    let message = serde_json::from_str::<Json>(line)
                        .ok()
                        .and_then(|j| j.get("error").and_then(Json::as_str).map(str::to_string))
                        .unwrap_or_default();
                    first_failure = Some((chunk.index[k], message));
                }
            }
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        done += chunk.len;
        match sink.write(&bytes) {
            Ok(true) => {}
            // Standard output is a closed pipe: nobody reads any more.
            Ok(false) => break,
            Err(code) => return Ok(code),
        }
        if let Some(pb) = &bar {
            pb.inc(read as u64);
        }
    }
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    if status == EXIT_INTERRUPTED {
        out::err(format_args!(
            "advm: interrupted: the output holds the results of the first {done} point(s) read"
        ));
        return Ok(EXIT_INTERRUPTED);
    }
    if let Some((i, message)) = first_failure {
        out::err(format_args!(
            "advm: {failed} of {done} point(s) failed (the first at line index {i}: {message})"
        ));
        return Ok(EXIT_TRAP);
    }
    Ok(0)
}

/// The points file, line by line: its lines of this shard, their global
/// indices, blank lines skipped (but counted).
struct Lines {
    input: Box<dyn BufRead>,
    /// Index of the next line.
    next: usize,
    shard: (usize, usize),
    done: bool,
}

impl Lines {
    /// Read up to [`CHUNK`] lines of this shard into `chunk` (blank lines
    /// are read and dropped); stops early at the end of the input or when
    /// an interrupt is requested. Returns how many lines of this shard
    /// were read, blank ones included.
    fn fill(&mut self, chunk: &mut Chunk, interrupt: &Interrupt) -> io::Result<usize> {
        chunk.clear();
        let mut read = 0;
        while !self.done && read < CHUNK && !interrupt.requested() {
            let i = self.next;
            if i % self.shard.1 != self.shard.0 {
                // Another shard's line: skip it unread.
                if self.input.skip_until(b'\n')? == 0 {
                    self.done = true;
                } else {
                    self.next += 1;
                }
                continue;
            }
            let buf = chunk.next_line(i);
            if self.input.read_until(b'\n', buf)? == 0 {
                chunk.drop_last();
                self.done = true;
                break;
            }
            self.next += 1;
            read += 1;
            if buf.last() == Some(&b'\n') {
                buf.pop();
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
            }
            if i == 0 && buf.starts_with("\u{FEFF}".as_bytes()) {
                buf.drain(..3);
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                chunk.drop_last();
            }
        }
        Ok(read)
    }
}

/// Evaluate every line of `chunk` on the current pool, writing each
/// result line (without its newline) into `chunk.out`.
fn evaluate(workers: &[Mutex<Worker>], task: &Task, chunk: &mut Chunk) {
    use rayon::prelude::*;
    let n = chunk.len;
    chunk.index[..n]
        .par_iter()
        .zip(chunk.text[..n].par_iter())
        .zip(chunk.out[..n].par_iter_mut())
        .zip(chunk.failed[..n].par_iter_mut())
        .for_each(|(((i, text), out), failed)| {
            let me = rayon::current_thread_index().unwrap_or(0) % workers.len();
            // A poisoned lock means a worker panicked, which no input
            // should make happen; its engine is still usable.
            let mut w = workers[me].lock().unwrap_or_else(|e| e.into_inner());
            *failed = !w.result_line(task, *i, text, out);
        });
}

/// The parameters' names in messages about `--dir`: as everywhere else in
/// advm (`arg0`, `arg1`, ... for unnamed ones).
fn dir_names(func: &vm::ir::Function) -> Vec<String> {
    crate::commands::param_names(func)
}

#[cfg(test)]
mod tests {
    use vm::ir::{Function, RetType};
    use vm::Type;

    #[test]
    fn unnamed_parameters_are_arg_n() {
        let mut f = Function {
            name: "f".into(),
            params: Vec::new(),
            ret: RetType::One(Type::F64),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Default::default(),
        };
        let a = f.new_value(Type::F64, None);
        let b = f.new_value(Type::F64, Some("x".into()));
        let c = f.new_value(Type::Arr, None);
        f.params = vec![a, b, c];
        assert_eq!(super::dir_names(&f), ["arg0", "x", "arg2"]);
    }
}
