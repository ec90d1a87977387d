//! # advm: the command line, as a library
//!
//! The `advm` binary (`src/main.rs`) is the product's command line: `advm
//! run | grad | check | disasm | bench | cfg | repl`, to the contract in
//! `../shared/docs/adasm.md` §5. Everything it does goes through
//! [`ad::Engine`]. This library half holds what the binary shares with the
//! tests, so that the tests check the very code the command line runs:
//!
//! * [`args`]: `--args` JSON to [`vm::Value`]s, and values to text and to
//!   JSON (non-finite f64 as `"inf"`, `"-inf"`, `"nan"`).
//! * [`fd`]: the gradient check of `advm check` (central finite
//!   differences and the tolerance), also used by the program corpus test
//!   for its `; check:` directives.
//!
//! ## Exit status of the binary
//!
//! | status | meaning |
//! |--------|---------|
//! | 0 | success (also `--help`, `--version`) |
//! | 1 | runtime trap; stderr: ``FILE: trap: MESSAGE in @f, block B, at `INSTRUCTION` (line N)`` |
//! | 2 | assembly or verification error: `file:line:col: error: message`, the source line and a caret |
//! | 3 | `advm check` found an entry where AD and finite differences disagree |
//! | 64 | bad usage: unknown subcommand or flag, a flag value out of range (`--max-depth 0`), a `--fn` naming no function of the file, `--args` that is not JSON or does not match the parameters (count, kind, a non-integer for an i64), an unreadable file or arguments file; `grad`/`check`/`bench` of a function that cannot be differentiated: one that does not return f64, or one whose derived function needs more registers than a frame holds (`cannot differentiate @f: its derived function @f.rev needs N registers, ...; split @f into smaller functions`) |
//! | 70 | an internal error of advm (a bug; please report it) |
//! | 74 | standard output could not be written (other than a closed pipe) |
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
//! * Limits on run, grad, check and bench: `--fuel N`, `--max-depth N`
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

pub mod args;
pub mod fd;
