//! # advm: the command line
//!
//! `advm run | grad | jvp | vjp | hvp | hessian | jacobian | check | disasm | bench | cfg |
//! sweep | repl` per the contract
//! in `../shared/docs/adasm.md` §5; the exit statuses and the extensions are
//! listed in the docs of `advm::cli` (`src/cli/mod.rs`): 0 success, 1 runtime trap,
//! 2 assembly or verification error, 3 `check` found a disagreement, 64 bad
//! usage (also a function that cannot be differentiated), 70 internal
//! error, 74 standard output unwritable, 130 a sweep stopped by Ctrl-C.
//! Nothing ends in
//! a panic: clap's errors are mapped to 64 (help and version to 0, or 74
//! when stdout cannot take them), user
//! data is never unwrapped, and output goes through [`out`].
//!
//! Modules: `commands` (one function per subcommand, returning the exit
//! status), `sweep` (`advm sweep`), `repl` (the interactive REPL), `cfg` (Graphviz pictures),
//! `out`
//! (stdout without panics); argument conversion, the gradient check and a
//! sweep's work per point live in the library (`advm::cli::args`,
//! `advm::cli::fd`, a re-export of `ad::fd`, `advm::cli::points`).

mod cfg;
mod commands;
mod out;
mod repl;
mod sweep;

// The command line as a library (`src/cli/`), shared with the tests.
use advm::args;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

// Counting (`advm bench` reads the count), with the reserve that makes an
// allocation failure in compile work an `out of memory` error, not an abort.
#[global_allocator]
static GLOBAL: advm::Reserve<vm::alloc_count::Counting> =
    advm::Reserve::new(vm::alloc_count::Counting);

#[derive(Parser, Debug)]
#[command(
    name = "advm",
    version,
    about = "A bytecode VM that differentiates programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Run every function as written, each call a call (by default small
    /// callees are inlined, and then loop-invariant instructions moved out
    /// of their loops; `--max-depth` then counts frames, of which an
    /// inlined call takes none).
    #[arg(long, global = true)]
    no_inline: bool,
    /// Run everything in the interpreter (by default the native tier runs
    /// what it supports: `advm disasm` tells which tier a function uses).
    #[arg(long, global = true)]
    no_jit: bool,
    /// Most bytes of a source file or an arguments file (default 256 MiB).
    #[arg(long, global = true, value_name = "BYTES")]
    max_source_bytes: Option<u64>,
    /// Most work units building one derivative may take (default 5·10^7,
    /// a few seconds): a larger one is refused.
    #[arg(long, global = true, value_name = "N")]
    max_compile_work: Option<u64>,
    /// Derive gradients (and what is built on them: vjp, hvp, Hessians)
    /// from code whose small conditionals compute both arms and select,
    /// so that the derived code records no branch taken: faster compiled
    /// where branches are hard to predict, slower interpreted.
    #[arg(long, global = true)]
    if_convert: bool,
}

/// Limits of the VM (each also settable from the library, `vm::Limits`).
#[derive(Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// Most instructions one call may execute.
    #[arg(long, value_name = "N")]
    pub fuel: Option<u64>,
    /// Most active frames, the entry function's included (at least 1;
    /// 1 allows no call).
    #[arg(long, value_name = "N", value_parser = parse_depth)]
    pub max_depth: Option<usize>,
    /// Largest array `anew` may create, and largest argument array (elements).
    #[arg(long, value_name = "N")]
    pub max_array: Option<usize>,
    /// Most bytes the AD stacks may hold during one gradient call.
    #[arg(long, value_name = "N")]
    pub max_stack_bytes: Option<usize>,
    /// Most bytes the values a derivative's forward code stores for its
    /// reverse code may hold at any moment (grad, vjp, check, bench, hvp,
    /// hessian, jacobian, sweep); past it the call traps, naming the bytes
    /// needed. With `--max-stack-bytes`, the smaller applies.
    #[arg(long, value_name = "BYTES")]
    pub ad_budget: Option<usize>,
    /// Most bytes all live arrays may hold during one call (with shadows).
    #[arg(long, value_name = "N")]
    pub max_heap_bytes: Option<usize>,
    /// Most bytes the VM may hold in all: registers, frames, AD stacks and
    /// arrays (default 4 GiB).
    #[arg(long, value_name = "BYTES")]
    pub max_memory: Option<usize>,
}

/// `--max-depth`: a count of frames, so 0 (no frame, not even the entry
/// function's) is refused as bad usage rather than trapping every run.
fn parse_depth(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => {
            Err("must be at least 1: the entry function's frame counts (1 allows no call)".into())
        }
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Which function, with which arguments.
#[derive(Args, Debug, Clone)]
pub struct CallArgs {
    /// The source file.
    pub file: PathBuf,
    /// Function name, with or without `@` (default: the file's only
    /// function, else `main`).
    #[arg(long = "fn", value_name = "NAME")]
    pub func: Option<String>,
    /// Arguments as a JSON array, one entry per parameter.
    #[arg(long, value_name = "JSON", conflicts_with = "args_file")]
    pub args: Option<String>,
    /// Read the arguments' JSON from a file.
    #[arg(long, value_name = "PATH")]
    pub args_file: Option<PathBuf>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Differentiate with respect to these parameters only (comma-separated
    /// names; grad, jvp, vjp, hvp, hessian, jacobian, check and bench). The others get no
    /// gradient.
    #[arg(long, value_name = "NAMES")]
    pub wrt: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// `check`: a call, and how to compare.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub call: CallArgs,
    /// Compare every gradient entry (two runs each). By default an input
    /// of more than 64 differentiated entries is compared along 4
    /// pseudo-random directions (two runs each) instead.
    #[arg(long)]
    pub full: bool,
    /// 2: also compare the Hessian-vector product, along the direction that
    /// moves each input by its own step, with central differences of the
    /// gradient along it.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=2))]
    pub order: u8,
}

/// What `advm sweep` computes at each point.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The value, as `advm run --json`.
    Run,
    /// Value and gradient, as `advm grad --json`.
    Grad,
    /// Value and tangent along `--dir`, as `advm jvp --json`.
    Jvp,
    /// Value, gradient and Hessian-vector product along `--dir`, as `advm
    /// hvp --json`.
    Hvp,
}

/// `advm sweep`: one function at many points.
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// The source file.
    pub file: PathBuf,
    /// Function name, with or without `@` (default: the file's only
    /// function, else `main`).
    #[arg(long = "fn", value_name = "NAME")]
    pub func: Option<String>,
    /// The points: a file of one JSON array of arguments per line (like
    /// --args); `-` reads standard input.
    #[arg(long, value_name = "FILE.jsonl")]
    pub points: PathBuf,
    /// What to compute at each point.
    #[arg(long, value_enum, default_value = "grad")]
    pub mode: Mode,
    /// Differentiate with respect to these parameters only (comma-separated
    /// names; --mode grad and jvp).
    #[arg(long, value_name = "NAMES")]
    pub wrt: Option<String>,
    /// The direction, shaped like the arguments (--mode jvp and hvp).
    #[arg(long, value_name = "JSON")]
    pub dir: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Only the lines whose index is I modulo N (0 <= I < N); the output
    /// keeps the global line indices.
    #[arg(long, value_name = "I/N", value_parser = sweep::parse_shard)]
    pub shard: Option<(usize, usize)>,
    /// Write the results to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a function (default `@main`) and print its value.
    Run(CallArgs),
    /// Print the value and the gradient.
    Grad(CallArgs),
    /// Compare the AD gradient with central finite differences.
    Check(CheckArgs),
    /// Forward mode: the value and its derivative along --dir.
    Jvp {
        #[command(flatten)]
        call: CallArgs,
        /// The direction, a JSON array shaped like --args (null for i64
        /// and bool parameters, null or 0 for those outside --wrt).
        #[arg(long, value_name = "JSON")]
        dir: String,
    },
    /// Hessian-vector product along --dir (forward-over-reverse), with the
    /// value and the gradient.
    Hvp {
        #[command(flatten)]
        call: CallArgs,
        /// The direction, a JSON array shaped like --args (null for i64
        /// and bool parameters, null or 0 for those outside --wrt).
        #[arg(long, value_name = "JSON")]
        dir: String,
    },
    /// The dense Hessian over the flattened inputs, with value and gradient.
    Hessian(CallArgs),
    /// Reverse mode with a given output cotangent (grad is vjp with seed 1).
    Vjp {
        #[command(flatten)]
        call: CallArgs,
        /// The result's cotangent: a number, or an array for an f64[] result.
        #[arg(long, value_name = "JSON")]
        seed: String,
    },
    /// The Jacobian over the flattened inputs, by forward mode.
    Jacobian(CallArgs),
    /// Print bytecode; with --ad the forward and reverse bytecode too.
    Disasm {
        /// The source file.
        file: PathBuf,
        /// Only this function (with or without `@`); default: all of them.
        #[arg(long = "fn", value_name = "NAME")]
        func: Option<String>,
        /// Also the forward and reverse functions derived for each function
        /// that returns f64.
        #[arg(long)]
        ad: bool,
        /// The tangent (forward-mode) bytecode of the function --fn names
        /// (needed unless the file has only one function).
        #[arg(long)]
        jvp: bool,
        /// The bytecode of Hessian-vector products (the tangents of the
        /// forward and reverse functions) of the function --fn names
        /// (needed unless the file has only one function).
        #[arg(long, conflicts_with_all = ["ad", "jvp"])]
        hvp: bool,
        /// Print the file's SSA IR as `.adasm` text instead of bytecode
        /// (for an `.adl` file: the code its compiler generated, which
        /// re-assembles).
        #[arg(long, conflicts_with_all = ["ad", "jvp", "hvp", "wrt"])]
        ir: bool,
        /// With --ad, --jvp or --hvp: derive with respect to these
        /// parameters only (of the function --fn names, needed unless the
        /// file has only one function).
        #[arg(long, value_name = "NAMES")]
        wrt: Option<String>,
        /// Instead of the bytecode, which tier runs each function (`jit`,
        /// or `interp` and why).
        #[arg(long, conflicts_with_all = ["ad", "jvp", "hvp", "wrt"])]
        tier: bool,
        /// Instead of the bytecode, the code the native tier compiles for
        /// a call of each function (with --ad, of the forward and reverse
        /// functions of the function --fn names): Cranelift IR and machine
        /// code.
        #[arg(long, conflicts_with_all = ["jvp", "hvp", "ir", "tier"])]
        native: bool,
    },
    /// Time the primal and the gradient call; count allocations per call.
    Bench(CallArgs),
    /// One function at many points: one JSON line of arguments in, one
    /// JSON line of results out, in parallel.
    Sweep(SweepArgs),
    /// The interactive REPL (also plain `advm`).
    Repl {
        /// A source file to load first.
        file: Option<PathBuf>,
        /// The limits of every call and gradient the session runs.
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Graphviz DOT of a function's CFG; with --ad its forward and reverse CFGs.
    Cfg {
        /// The source file.
        file: PathBuf,
        /// The function, with or without `@` (needed unless the file has
        /// only one function).
        #[arg(long = "fn", value_name = "NAME")]
        func: Option<String>,
        /// The forward and reverse CFGs instead of the function's own.
        #[arg(long)]
        ad: bool,
        /// With --ad: derive with respect to these parameters only.
        #[arg(long, value_name = "NAMES", requires = "ad")]
        wrt: Option<String>,
    },
}

/// Add a "similar subcommand/argument" tip to clap's error for an unknown
/// subcommand or long flag when clap found none itself (its measure misses
/// swapped letters, `rnu` for `run`): the closest name by edit distance
/// ([`assembler::closest`]), among the subcommands, or among the flags of
/// the subcommand `args` name (and the global ones).
fn suggest(e: &mut clap::Error, args: impl Iterator<Item = String>) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    let cmd = Cli::command();
    let written = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let (written, names, suggested) = match e.kind() {
        ErrorKind::InvalidSubcommand => {
            let Some(w) = written(ContextKind::InvalidSubcommand) else {
                return;
            };
            let names: Vec<String> = cmd
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            (w, names, ContextKind::SuggestedSubcommand)
        }
        ErrorKind::UnknownArgument => {
            let Some(w) = written(ContextKind::InvalidArg) else {
                return;
            };
            let Some(flag) = w.strip_prefix("--") else {
                return;
            };
            let flag = flag.split('=').next().unwrap_or(flag).to_string();
            let args: Vec<String> = args.collect();
            let sub = args
                .iter()
                .find_map(|a| cmd.get_subcommands().find(|c| c.get_name() == a));
            let names: Vec<String> = cmd
                .get_arguments()
                .chain(sub.into_iter().flat_map(|c| c.get_arguments()))
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect();
            (flag, names, ContextKind::SuggestedArg)
        }
        _ => return,
    };
    if e.get(suggested).is_some() {
        return;
    }
    if let Some(near) = assembler::closest(&written, names.iter().map(String::as_str)) {
        let near = match suggested {
            ContextKind::SuggestedArg => format!("--{near}"),
            _ => near.to_string(),
        };
        e.insert(suggested, ContextValue::String(near));
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut e) => {
            suggest(&mut e, std::env::args().skip(1));
            use clap::error::ErrorKind;
            let printed = e
                .print()
                .and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
            let code = match e.kind() {
                // Help and version go to stdout: it must take them (a closed
                // pipe is fine, as everywhere).
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match printed {
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                        out::stdout_failed(&e);
                        commands::EXIT_OUTPUT
                    }
                    _ => 0,
                },
                _ => commands::EXIT_USAGE,
            };
            return ExitCode::from(code);
        }
    };
    let opts = advm::Options {
        inlining: !cli.no_inline,
        jit: !cli.no_jit,
        max_source_bytes: cli
            .max_source_bytes
            .unwrap_or(advm::DEFAULT_MAX_SOURCE_BYTES),
        max_compile_work: cli
            .max_compile_work
            .unwrap_or(ad::compile_work::DEFAULT_MAX_COMPILE_WORK),
        if_convert: cli.if_convert,
    };
    let opts = &opts;
    let status = match cli.command {
        Some(Command::Run(a)) => commands::run(&a, opts),
        Some(Command::Grad(a)) => commands::grad(&a, opts),
        Some(Command::Check(a)) => commands::check(&a.call, opts, a.full, a.order),
        Some(Command::Jvp { call, dir }) => commands::jvp(&call, opts, &dir),
        Some(Command::Vjp { call, seed }) => commands::vjp(&call, opts, &seed),
        Some(Command::Hvp { call, dir }) => commands::hvp(&call, opts, &dir),
        Some(Command::Hessian(a)) => commands::hessian(&a, opts),
        Some(Command::Jacobian(a)) => commands::jacobian(&a, opts),
        Some(Command::Bench(a)) => commands::bench(&a, opts),
        Some(Command::Sweep(a)) => sweep::sweep(&a, opts),
        Some(Command::Disasm {
            file,
            func,
            ad,
            jvp,
            hvp,
            ir,
            wrt,
            tier,
            native,
        }) => {
            if native {
                return ExitCode::from(commands::disasm_native(
                    &file,
                    opts,
                    func.as_deref(),
                    ad,
                    wrt.as_deref(),
                ));
            }
            if ir {
                return ExitCode::from(commands::disasm_ir(&file, opts, func.as_deref()));
            }
            if tier {
                return ExitCode::from(commands::disasm_tiers(&file, opts, func.as_deref()));
            }
            if wrt.is_some() && !ad && !jvp && !hvp {
                let e = "--wrt on disasm needs --ad, --jvp or --hvp";
                return ExitCode::from(commands::Fail::Usage(e.into()).report_code());
            }
            if hvp {
                commands::disasm_hvp(&file, opts, func.as_deref(), wrt.as_deref())
            } else {
                commands::disasm(&file, opts, func.as_deref(), ad, jvp, wrt.as_deref())
            }
        }
        Some(Command::Repl { file, limits }) => commands::repl(file.as_deref(), opts, &limits),
        Some(Command::Cfg {
            file,
            func,
            ad,
            wrt,
        }) => commands::cfg(&file, opts, func.as_deref(), ad, wrt.as_deref()),
        None => commands::repl(None, opts, &LimitArgs::default()),
    };
    ExitCode::from(status)
}
