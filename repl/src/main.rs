//! # advm: the command line
//!
//! `advm run | grad | check | disasm | bench | repl` per the contract in
//! `../shared/docs/adasm.md` §5. Exit status: 0 success; 1 runtime trap;
//! 2 assembly or verification error; 3 `check` found a disagreement;
//! 64 bad usage (unknown subcommand or flag, a `--fn` naming no function,
//! bad `--args`, unreadable files); 70 an internal error (a bug in advm).
//! Nothing ends in a panic.

mod alloc_count;
mod args;
mod cfg;
mod commands;
mod repl;

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
}

/// Limits of the VM (each also settable from the library, `vm::Limits`).
#[derive(Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// Most instructions one call may execute.
    #[arg(long, value_name = "N")]
    pub fuel: Option<u64>,
    /// Deepest call nesting.
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// Largest array `anew` may create (elements).
    #[arg(long, value_name = "N")]
    pub max_array: Option<usize>,
    /// Most bytes the AD stacks may hold during one gradient call.
    #[arg(long, value_name = "N")]
    pub max_stack_bytes: Option<usize>,
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
    Check(CallArgs),
    /// Print bytecode; with --ad the forward and reverse bytecode too.
    Disasm {
        file: PathBuf,
        #[arg(long = "fn", value_name = "NAME")]
        func: Option<String>,
        #[arg(long)]
        ad: bool,
    },
    /// Time the primal and the gradient call; count allocations per call.
    Bench(CallArgs),
    /// The interactive REPL (also plain `advm`).
    Repl { file: Option<PathBuf> },
    /// Graphviz DOT of a function's CFG; with --ad its forward and reverse CFGs.
    Cfg {
        file: PathBuf,
        #[arg(long = "fn", value_name = "NAME")]
        func: String,
        #[arg(long)]
        ad: bool,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => 0,
                _ => 64,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let status = match cli.command {
        Some(Command::Run(a)) => commands::run(&a),
        Some(Command::Grad(a)) => commands::grad(&a),
        Some(Command::Check(a)) => commands::check(&a),
        Some(Command::Bench(a)) => commands::bench(&a),
        Some(Command::Disasm { file, func, ad }) => commands::disasm(&file, func.as_deref(), ad),
        Some(Command::Repl { file }) => commands::repl(file.as_deref()),
        Some(Command::Cfg { file, func, ad }) => commands::cfg(&file, &func, ad),
        None => commands::repl(None),
    };
    ExitCode::from(status)
}
