//! The command line, as a library (feature `cli`, on by default).
//!
//! The `advm` binary (`src/main.rs`) is the product's command line: `advm
//! run | grad | jvp | vjp | jacobian | check | disasm | bench | cfg | sweep | repl`, to the contract in
//! `../shared/docs/adasm.md` §5. Everything it does goes through
//! [`ad::Engine`]. This module holds what the binary shares with the
//! tests, so that the tests check the very code the command line runs:
//!
//! * [`args`]: `--args` JSON to [`vm::Value`]s, and values to text and to
//!   JSON (non-finite f64 as `"inf"`, `"-inf"`, `"nan"`).
//! * [`fd`]: `ad::fd`, re-exported: the gradient check of `advm check` (central finite
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
//! * `--fn` may be left out when the file defines exactly one function
//!   (every command then uses it); with several, `grad`, `check`, `bench`
//!   (and the other call commands) default `--fn` to `main` like `run`,
//!   while `cfg` and `disasm --jvp`/`--hvp`/`--wrt` need it. A `--fn`
//!   naming no function, an unknown subcommand or an unknown flag is told
//!   the closest name when one is close (`did you mean @pow?`); `check`
//!   and `bench` accept `--args-file` too.
//! * `advm check --json` prints `{"value": V, "tolerance": T, "ok": B,
//!   "entries": [{"param": "x", "ad": A, "fd": F, "ok": B}, ...],
//!   "tangent": {"ad": A, "fd": F, "ok": B}}`. `check` also compares
//!   forward mode (adasm.md §8): the tangent along `s = max(1, |x|)` for
//!   each differentiated input (each input's own step scale) against the
//!   central difference `(f(x + h s) - f(x - h s)) / 2h`, `h = 1e-6`, by
//!   the same tolerance: one more row, `jvp`, in text (counted in the
//!   summary), `"tangent"` in JSON (absent when nothing is
//!   differentiated); a disagreement there is status 3 too.
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
//!   `--max-heap-bytes N`, `--max-memory N` (see `vm::interp::Limits` and
//!   `docs/reliability.md`); hitting one is a trap (status 1).
//! * `--max-source-bytes N` (any subcommand, default 256 MiB): the most
//!   bytes read from a source file (also by the REPL's `:load`) or an
//!   arguments file; a larger one is refused with status 64.
//! * `advm check --full` compares every gradient entry; without it an
//!   input of more than 64 differentiated entries is compared along 4
//!   seeded pseudo-random directions ([`fd`]).
//! * Status 64 also for a function too large to differentiate (above).
//! * `--wrt NAMES` on grad, jvp, vjp, jacobian, check, bench, `disasm --ad
//!   --fn`, `disasm --jvp --fn` and `cfg --ad`:
//!   differentiate with respect to the named parameters only (comma-
//!   separated, `%` optional; each an f64 or f64[] parameter, else status
//!   64). The other parameters get no gradient (`-` in text, `null` in
//!   JSON, skipped by `check`), and the derived code does none of their
//!   work. In the REPL: `grad @f(args) wrt x, y`.
//! * `--no-inline` (any subcommand, and the REPL): run every function as
//!   written, each call a call. By default small callees are inlined
//!   ([`vm::inline`]): faster, and `--max-depth` then counts frames, of
//!   which an inlined call takes none; listings mark inlined blocks.
//! * `--no-jit` (any subcommand that runs code, and the REPL): run
//!   everything in the interpreter. By default verified bytecode runs in
//!   the native tier (`advm-jit`, adasm.md §12) where it can;
//!   `disasm --tier` says which tier runs each function and why, and
//!   `bench --json` reports `"tier"` and `"grad_tier"`.
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
//! * `advm jvp FILE --fn NAME --args JSON --dir JSON [--wrt NAMES]
//!   [--json]` (adasm.md §8): forward mode. `--dir` is parsed by
//!   [`args::parse_json_dir`]: one entry per parameter, `null` a zero
//!   direction (and the only entry an `i64` or `bool` parameter takes), a
//!   parameter outside `--wrt` takes `null` or 0, an `f64[]` one an array
//!   of its argument's length; anything else is status 64. Text output:
//!   `value = V`, `tangent = T` (`-` for an `i64` or `bool` result), then
//!   `tangent of %v = [...]` per differentiated `f64[]` parameter; JSON:
//!   `{"value": V, "tangent": T}`, with `"arg_tangents"` whenever an
//!   `f64[]` parameter is differentiated. REPL: `jvp @f(args) dir [...]
//!   [wrt x, y]` and `:jvp @f`.
//! * `advm vjp FILE --fn NAME --args JSON --seed JSON [--wrt NAMES]
//!   [--json]`: reverse mode with output cotangent `--seed` (a number for
//!   an `f64` result, an array of the result's length for an `f64[]` one;
//!   anything else, or an `i64` or `bool` result, is status 64). Output as
//!   `grad`'s, the value an array for an `f64[]` result.
//! * `advm jacobian FILE --fn NAME --args JSON [--wrt NAMES] [--json]`: the
//!   dense Jacobian by forward mode, rows the result's elements (one row
//!   for an `f64` result), columns the flattened inputs. JSON: `{"value":
//!   V, "jacobian": [[...], ...]}`; text: `value = V`, a line `jacobian (R
//!   × C: ...) =`, then one line per row.
//! * `advm bench` also times forward mode along all ones over the
//!   differentiated inputs: `"jvp_ns"` and `"allocs_per_jvp"` in JSON, a
//!   `jvp:` line in text.
//! * `advm disasm FILE --fn NAME --jvp [--wrt NAMES]`: the primal, then the
//!   tangent function `@NAME.jvp` and every tangent function it calls
//!   (with `--ad` too, the forward and reverse functions before them).

pub mod args;
pub use ad::fd;
pub mod points;

use std::io::Read;
use std::path::Path;

/// Default of `--max-source-bytes`: 256 MiB.
pub const DEFAULT_MAX_SOURCE_BYTES: u64 = 1 << 28;

/// Options of the command line that hold for a whole invocation (`advm
/// --no-inline`, `--max-source-bytes`), passed to what loads a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Inline small callees into their callers ([`ad::Policy::default`]);
    /// off with `--no-inline` ([`ad::Policy::NONE`]).
    pub inlining: bool,
    /// Run code in the native tier (`advm-jit`) where it can; off with
    /// `--no-jit` (the interpreter runs everything).
    pub jit: bool,
    /// The most bytes a source or arguments file may have.
    pub max_source_bytes: u64,
    /// The compile budget of each derivation, in work units
    /// (`--max-compile-work`, [`ad::Engine::set_max_compile_work`]).
    pub max_compile_work: u64,
    /// Derive gradients from if-converted code (`--if-convert`,
    /// [`ad::Engine::set_if_conversion`]).
    pub if_convert: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            inlining: true,
            jit: true,
            max_source_bytes: DEFAULT_MAX_SOURCE_BYTES,
            max_compile_work: ad::compile_work::DEFAULT_MAX_COMPILE_WORK,
            if_convert: false,
        }
    }
}

/// Read a source or arguments file, at most `limit` bytes of it
/// (`--max-source-bytes`): a
/// longer file (or an endless one, `/dev/zero`) is an error naming the
/// flag, found after reading at most one byte past the limit.
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let too_large = || {
        format!(
            "{} is larger than {limit} bytes (raise the limit with --max-source-bytes)",
            path.display()
        )
    };
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() > limit)
    {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// An engine for `module`, inlining small callees (default policy,
/// [`ad::Policy::default`]) or not ([`ad::Policy::NONE`]), with the native
/// tier installed unless `--no-jit` ([`Options::jit`]), the compile
/// budget of `--max-compile-work` and if-conversion with `--if-convert`.
pub fn engine(module: vm::ir::Module, opts: Options) -> Result<ad::Engine, ad::AdError> {
    let policy = if opts.inlining {
        ad::Policy::default()
    } else {
        ad::Policy::NONE
    };
    let mut engine = ad::Engine::with_inlining(module, &policy)?;
    engine.set_max_compile_work(opts.max_compile_work);
    engine.set_if_conversion(opts.if_convert);
    if opts.jit {
        jit::install(engine.vm_mut());
    }
    Ok(engine)
}
