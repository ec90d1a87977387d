//! # advm: the command line
//!
//! `advm run | grad | jvp | vjp | hvp | hessian | jacobian | check | disasm | bench | cfg | repl`
//! per the contract
//! in `../shared/docs/adasm.md` §5; the exit statuses and the extensions are
//! listed in the library's docs (`src/lib.rs`): 0 success, 1 runtime trap,
//! 2 assembly or verification error, 3 `check` found a disagreement, 64 bad
//! usage (also a function that cannot be differentiated), 70 internal
//! error, 74 standard output unwritable. Nothing ends in
//! a panic: clap's errors are mapped to 64 (help and version to 0, or 74
//! when stdout cannot take them), user
//! data is never unwrapped, and output goes through [`out`].
//!
//! Modules: `commands` (one function per subcommand, returning the exit
//! status), `repl` (the interactive REPL), `cfg` (Graphviz pictures),
//! `alloc_count` (the counting global allocator `bench` reads), `out`
//! (stdout without panics); argument conversion and the gradient check
//! live in the library half (`advm::args`, `advm::fd`).

mod alloc_count;
mod cfg;
mod commands;
mod out;
mod repl;

// The library half (`src/lib.rs`), shared with the tests.
use advm::args;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: alloc_count::Counting = alloc_count::Counting;

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
    /// callees are inlined; `--max-depth` then counts frames, of which an
    /// inlined call takes none).
    #[arg(long, global = true)]
    no_inline: bool,
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
    /// Most bytes all live arrays may hold during one call (with shadows).
    #[arg(long, value_name = "N")]
    pub max_heap_bytes: Option<usize>,
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
    /// Function name, with or without `@`.
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

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a function (default `@main`) and print its value.
    Run(CallArgs),
    /// Print the value and the gradient.
    Grad(CallArgs),
    /// Compare the AD gradient with central finite differences.
    Check {
        #[command(flatten)]
        call: CallArgs,
        /// 2: also compare the Hessian-vector product along max(1, |x|)
        /// per input with central differences of the gradient along it.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u8).range(1..=2))]
        order: u8,
    },
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
        file: PathBuf,
        #[arg(long = "fn", value_name = "NAME")]
        func: Option<String>,
        #[arg(long)]
        ad: bool,
        /// With --fn: the tangent (forward-mode) bytecode.
        #[arg(long, requires = "func")]
        jvp: bool,
        /// With --fn: the bytecode of Hessian-vector products (the tangents
        /// of the forward and reverse functions).
        #[arg(long, requires = "func", conflicts_with_all = ["ad", "jvp"])]
        hvp: bool,
        /// With --fn and --ad, --jvp or --hvp: derive with respect to these
        /// parameters only.
        #[arg(long, value_name = "NAMES", requires = "func")]
        wrt: Option<String>,
    },
    /// Time the primal and the gradient call; count allocations per call.
    Bench(CallArgs),
    /// The interactive REPL (also plain `advm`).
    Repl {
        file: Option<PathBuf>,
        /// The limits of every call and gradient the session runs.
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Graphviz DOT of a function's CFG; with --ad its forward and reverse CFGs.
    Cfg {
        file: PathBuf,
        #[arg(long = "fn", value_name = "NAME")]
        func: String,
        #[arg(long)]
        ad: bool,
        /// With --ad: derive with respect to these parameters only.
        #[arg(long, value_name = "NAMES", requires = "ad")]
        wrt: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
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
    advm::set_inlining(!cli.no_inline);
    let status = match cli.command {
        Some(Command::Run(a)) => commands::run(&a),
        Some(Command::Grad(a)) => commands::grad(&a),
        Some(Command::Check { call, order }) => commands::check(&call, order),
        Some(Command::Jvp { call, dir }) => commands::jvp(&call, &dir),
        Some(Command::Vjp { call, seed }) => commands::vjp(&call, &seed),
        Some(Command::Hvp { call, dir }) => commands::hvp(&call, &dir),
        Some(Command::Hessian(a)) => commands::hessian(&a),
        Some(Command::Jacobian(a)) => commands::jacobian(&a),
        Some(Command::Bench(a)) => commands::bench(&a),
        Some(Command::Disasm {
            file,
            func,
            ad,
            jvp,
            hvp,
            wrt,
        }) => {
            if wrt.is_some() && !ad && !jvp && !hvp {
                let e = "--wrt on disasm needs --ad, --jvp or --hvp";
                return ExitCode::from(commands::Fail::Usage(e.into()).report_code());
            }
            if hvp {
                commands::disasm_hvp(&file, func.as_deref(), wrt.as_deref())
            } else {
                commands::disasm(&file, func.as_deref(), ad, jvp, wrt.as_deref())
            }
        }
        Some(Command::Repl { file, limits }) => commands::repl(file.as_deref(), &limits),
        Some(Command::Cfg {
            file,
            func,
            ad,
            wrt,
        }) => commands::cfg(&file, &func, ad, wrt.as_deref()),
        None => commands::repl(None, &LimitArgs::default()),
    };
    ExitCode::from(status)
}
