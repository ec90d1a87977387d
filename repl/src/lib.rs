//! # advm: the command line, as a library
//!
//! The `advm` binary (`src/main.rs`) is the product's command line: `advm
//! run | grad | check | disasm | bench | cfg | sweep | repl`, to the contract in
//! `../shared/docs/adasm.md` §5. Everything it does goes through
//! [`ad::Engine`]. This library half holds what the binary shares with the
//! tests, so that the tests check the very code the command line runs:
//!
//! * [`args`]: `--args` JSON to [`vm::Value`]s, and values to text and to
//!   JSON (non-finite f64 as `"inf"`, `"-inf"`, `"nan"`).
//! * [`fd`]: the gradient check of `advm check` (central finite
//!   differences and the tolerance), also used by the program corpus test
//!   for its `; check:` directives.
//! * [`points`]: one point of `advm sweep`, a line of JSON arguments to a
//!   line of JSON results (also used by the `sweep` benchmark).
//!
//! ## Exit status of the binary
//!
//! | status | meaning |
//! |--------|---------|
//! | 0 | success (also `--help`, `--version`) |
//! | 1 | runtime trap; stderr: ``FILE: trap: MESSAGE in @f, block B, at `INSTRUCTION` (line N)`` |
//! | 2 | assembly or verification error: `file:line:col: error: message`, the source line and a caret; also a source file that is not UTF-8 (located at its first bad byte, which the message names). One byte-order mark at the start of a file is skipped; another is an error. A carriage return not followed by a line feed ends a line |
//! | 3 | `advm check` found an entry where AD and finite differences disagree |
//! | 64 | bad usage: unknown subcommand or flag, a flag value out of range (`--max-depth 0`), a `--fn` that is not a name (`@@f`) or names no function of the file, `--args` (or an `--args-file`, named in the message) that is not JSON or does not match the parameters (count, kind, a non-integer for an i64), an unreadable file or arguments file; `grad`/`check`/`bench` of a function that cannot be differentiated: one that does not return f64, or one whose derived function needs more registers than a frame holds (`cannot differentiate @f: its derived function @f.rev needs N registers, ...; split @f into smaller functions`) |
//! | 70 | an internal error of advm (a bug; please report it) |
//! | 74 | standard output could not be written (other than a closed pipe); also for `--help`, `--version` and the REPL; for `sweep`, also its `--out` file |
//! | 130 | `advm sweep` stopped by Ctrl-C (SIGINT); its output holds the results of a complete prefix of its points |
//!
//! Output to a closed pipe (`advm run big.adasm | head -1`) is dropped
//! silently and does not change the status. Nothing ends in a panic.
//!
//! ## Extensions to the contract
//!
//! * `--args` accepts the strings `"inf"`, `"-inf"`, `"nan"` for an f64
//!   (also inside arrays), the spelling `--json` output uses.
//! * `grad`, `check`, `bench` default `--fn` to `main` like `run`; `check`
//!   and `bench` accept `--args-file` too.
//! * `advm check --json` prints `{"value": V, "tolerance": T, "ok": B,
//!   "entries": [{"param": "x", "ad": A, "fd": F, "ok": B}, ...]}`.
//! * `advm cfg FILE --fn NAME [--ad]` prints Graphviz DOT of the CFG.
//! * `advm disasm FILE --ad` (without `--fn`) prints the file's functions,
//!   then every derived function once: depth first from each function of
//!   the file in turn (its forward function, then its reverse one), through
//!   call sites (callees in order of creation), skipping those already
//!   printed. With `--fn` the same walk starts from that one function.
//! * `run` and `grad` print arrays in full in text output (the REPL
//!   shortens long ones).
//! * An `--args-file` may start with a byte-order mark.
//! * Limits on run, grad, check, bench and repl: `--fuel N`, `--max-depth N`
//!   (at least 1), `--max-array N`, `--max-stack-bytes N`,
//!   `--max-heap-bytes N` (see `vm::interp::Limits` and
//!   `docs/reliability.md`); hitting one is a trap (status 1).
//! * Status 64 also for a function too large to differentiate (above).
//! * `--wrt NAMES` on grad, check, bench, `disasm --ad --fn` and `cfg --ad`:
//!   differentiate with respect to the named parameters only (comma-
//!   separated, `%` optional; each an f64 or f64[] parameter, else status
//!   64). The other parameters get no gradient (`-` in text, `null` in
//!   JSON, skipped by `check`), and the derived code does none of their
//!   work. In the REPL: `grad @f(args) wrt x, y`.
//! * `--no-inline` (any subcommand, and the REPL): run every function as
//!   written, each call a call. By default small callees are inlined
//!   ([`vm::inline`]): faster, and `--max-depth` then counts frames, of
//!   which an inlined call takes none; listings mark inlined blocks.
//! * An f64 literal too large for an f64 (`1e999`, in a program or a REPL
//!   argument) is an error (status 2 in a file), as an out-of-range i64
//!   literal is, not infinity: `inf` is how infinity is written.
//! * `advm sweep FILE --fn NAME --points FILE.jsonl [--mode run|grad]
//!   [--wrt NAMES] [--threads N] [--shard I/N] [--out FILE]` (adasm.md
//!   §12; `docs/sweep.md`): `--points -` reads standard input; blank lines
//!   are skipped but counted; `--fn` defaults to `main` and `--mode` to
//!   `grad`; `--mode jvp|hvp` (and `--dir`) are accepted and refused as not
//!   available yet (64); a failing point is its `{"i": I, "error": M}`
//!   line and status 1; Ctrl-C ends with status 130 after the chunk it is
//!   on (a second one drops that chunk).
//! * The REPL's `:quit` takes no argument, like `:help` (`:quit now` is an
//!   error and the session goes on).

pub mod args;
pub mod fd;
pub mod points;

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the engines this process builds inline small callees (see
/// `--no-inline`).
static INLINING: AtomicBool = AtomicBool::new(true);

/// Turn inlining on or off for the engines built from now on.
pub fn set_inlining(on: bool) {
    INLINING.store(on, Ordering::Relaxed);
}

/// An engine for `module`, inlining as [`set_inlining`] last said
/// (default: on, [`ad::Policy::default`]).
pub fn engine(module: vm::ir::Module) -> Result<ad::Engine, ad::AdError> {
    let policy = if INLINING.load(Ordering::Relaxed) {
        ad::Policy::default()
    } else {
        ad::Policy::NONE
    };
    ad::Engine::with_inlining(module, &policy)
}
