//! Writing to standard output and standard error without panicking.
//!
//! `println!` panics when stdout is a closed pipe (`advm run f.adasm | head
//! -1`). Here a closed pipe makes every later write a no-op instead (nobody
//! reads the output any more; the exit status still reports the result),
//! and any other write error is returned for the caller to report (exit 74).

use std::fmt::Display;
use std::io::{self, ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether standard output has been found to be a closed pipe.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Write `text` to standard output, without a newline.
pub fn print(text: impl Display) -> io::Result<()> {
    if closed() {
        return Ok(());
    }
    let mut o = io::stdout().lock();
    match write!(o, "{text}").and_then(|()| o.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r,
    }
}

/// Write `text` and a newline to standard output.
pub fn line(text: impl Display) -> io::Result<()> {
    print(format_args!("{text}\n"))
}

/// Write `text` and a newline to standard error; errors are ignored (there
/// is nowhere left to report them).
pub fn err(text: impl Display) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// Report on stderr that standard output could not be written (every
/// caller then ends with exit status 74).
pub fn stdout_failed(e: &io::Error) {
    err(format_args!("advm: cannot write to standard output: {e}"));
}

/// Whether diagnostics on standard error are coloured: when it is a
/// terminal, unless `NO_COLOR` is set (not empty); `CLICOLOR_FORCE` set
/// (not empty, not `0`) colours them even into a pipe or file.
pub fn color() -> bool {
    use std::io::IsTerminal;
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    if set("CLICOLOR_FORCE") && std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    io::stderr().is_terminal()
}
