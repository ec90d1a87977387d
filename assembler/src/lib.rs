//! # assembler: `.adasm` text to checked SSA IR
//!
//! The pipeline is
//!
//! ```text
//! text --lexer--> tokens --parser--> AST --check--> checked functions --lower--> vm::ir::Module
//! ```
//!
//! * `lexer`: logos tokens; newlines are tokens because an instruction
//!   ends at the end of its line; bad characters are reported here.
//! * `parser`: a line-oriented parser producing one AST per function; it
//!   recovers at the next line inside a function body, at the body's `{`
//!   after a bad header, and at the next `fn` elsewhere.
//! * `check`: resolves names (functions, registers, labels, mnemonics),
//!   checks each `rule @f jvp @f_jvp` line (functions known, signatures
//!   that fit, one rule per function; [`vm::ir::Rule`]),
//!   infers and checks types (overloaded mnemonics become typed opcodes),
//!   and checks SSA form (single assignment, dominance, phi entries equal to
//!   the block's predecessors, one terminator at the end of each block).
//! * `regcheck`: the checker of register code ([`Code::Register`], for
//!   tests and tools): the IR the AD stage writes, not SSA, every IR opcode
//!   by its table mnemonic; the module is then lowered and verified by the
//!   VM instead of being checked for SSA form.
//! * `lower`: translates checked functions to [`vm::ir`].
//! * [`print_module`]: the way back, IR to text.
//! * [`assemble_listing`]: a bytecode listing (what `vm::disasm` prints)
//!   back to a verified bytecode program, for tests and tools.
//! * [`decode`]: a source file's bytes to text (one leading byte-order
//!   mark skipped; bytes that are not UTF-8 are a located diagnostic).
//! * [`parse_call`] and [`literals_to_values`]: argument literals such as
//!   `@f(1.0, 2, [1.0, 2.5])` for the REPL and test directives.
//!
//! Errors are [`Diagnostics`], rendered as
//! `file:line:col: error: message`, the source line and a caret line.
//!
//! **Invariant:** assembling never panics; it returns a module or every
//! independent error (each mistake once: values whose type is unknown
//! because of an earlier error are accepted silently everywhere). No stage
//! recurses on the input, so nesting or length cannot exhaust the stack, and
//! a function with more than 60,000 values is an error rather than a module
//! the bytecode could not address.
//!
//! **Invariant:** an accepted module is in SSA form, every value has a
//! concrete type, every `Inst` uses a typed opcode whose operand types match
//! [`vm::op::Op::operands`], and every phi has exactly one entry per
//! predecessor.
//!
//! ```
//! let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";
//! let module = assembler::assemble(src, "sq.adasm").expect("assembles");
//! assert_eq!(module.funcs[0].name, "sq");
//! let text = assembler::print_module(&module);
//! assert!(text.contains("%y = mul %x, %x"));
//!
//! let err = assembler::assemble("fn @f() -> f64 {\nentry:\n    ret 2\n}\n", "f.adasm")
//!     .expect_err("an integer literal is not an f64");
//! assert!(err.render().starts_with("f.adasm:3:9: error: expected f64"));
//! ```

#![warn(missing_docs)]

mod check;
mod diag;
mod lexer;
mod listing;
mod literal;
mod lower;
mod parser;
mod print;
mod regcheck;
mod source;

pub use diag::{closest, Diagnostic, Diagnostics, Span};
pub use lexer::f64_value;
pub use listing::assemble_listing;
pub use literal::{literals_to_values, parse_call, Literal};
pub use print::print_module;
pub use source::decode;

/// The most values (parameters, registers and distinct constants) one
/// function may have.
pub const MAX_VALUES: usize = check::MAX_VALUES;

/// Every instruction mnemonic the text accepts: the ordinary ones (an
/// overloaded mnemonic such as `add` once, for both of its typed opcodes)
/// and `phi`, `call`, `jmp`, `br`, `ret`. docs/language.md documents each
/// (`repl/tests/it/docs.rs`).
pub fn mnemonics() -> impl Iterator<Item = &'static str> {
    check::mnemonics()
        .map(|(m, _)| m)
        .chain(parser::KEYWORD_MNEMONICS.iter().copied())
}

/// What text [`assemble_with`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Code {
    /// A user's program (`.adasm` files, the REPL): SSA, the opcodes of
    /// the text only. What [`assemble`] reads.
    #[default]
    User,
    /// Register code, for tests and tools: the IR the AD stage writes (and
    /// [`print_module`] prints), which is not SSA (a register may be
    /// written many times and read before its first write, when it holds
    /// zero) and may use every IR opcode, those only the AD stage writes
    /// included, by their table mnemonic (`acc`, `comms.pop`,
    /// `call.acc @g(%a) -> [%d.a]`, `ret.n %d.x`, `blk.pop [a, b]`,
    /// `-> (f64, f64)`). A register's type comes from where it appears.
    /// No SSA check: the module is lowered and the VM's verifier checks
    /// every function instead, and what either rejects is an error at the
    /// function (or the instruction) it is about. Opcodes only the
    /// lowering makes are bytecode, not IR, and are rejected.
    Register,
}

/// How [`assemble_with`] reads its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// User text or register code.
    pub code: Code,
}

/// Assemble `.adasm` source text (named `file` in diagnostics) into an IR
/// module, or report every error found.
pub fn assemble(src: &str, file: &str) -> Result<vm::ir::Module, Diagnostics> {
    assemble_with(src, file, &Options::default())
}

/// [`assemble`] with options: [`Code::Register`] reads register code.
///
/// ```
/// let src = "fn @f.rev(%seed: f64) -> (f64) {\nstart:\n    %x = comms.pop\n    \
///            acc.mul %d.x, %seed, %x\n    ret.n %d.x\n}\n";
/// let options = assembler::Options { code: assembler::Code::Register };
/// let m = assembler::assemble_with(src, "rev.adasm", &options).expect("register code");
/// assert_eq!(assembler::print_module(&m), src);
/// // User text has none of it.
/// let err = assembler::assemble(src, "rev.adasm").expect_err("not user text");
/// assert!(err.render().contains("unknown instruction `comms.pop`"));
/// ```
///
/// The work runs in a compile section ([`compile_section`]): an allocation
/// that fails is the error [`Diagnostics::out_of_memory`], not an abort,
/// when the global allocator is [`vm::alloc_count::Reserve`].
pub fn assemble_with(
    src: &str,
    file: &str,
    options: &Options,
) -> Result<vm::ir::Module, Diagnostics> {
    compile_section(file, || assemble_in_section(src, file, options))
}

/// Run `f`, the work of compiling `file`, in a compile section
/// ([`vm::oom::section`]): if an allocation fails during it (served from
/// the reserve of [`vm::alloc_count::Reserve`], when that is the global
/// allocator), what `f` returned is dropped and the result is
/// [`Diagnostics::out_of_memory`]. [`assemble`], [`assemble_with`],
/// [`assemble_listing`], [`decode`] and the `adl` compiler run in one.
pub fn compile_section<T>(
    file: &str,
    f: impl FnOnce() -> Result<T, Diagnostics>,
) -> Result<T, Diagnostics> {
    vm::oom::section(f).unwrap_or_else(|_| Err(Diagnostics::out_of_memory(file)))
}

fn assemble_in_section(
    src: &str,
    file: &str,
    options: &Options,
) -> Result<vm::ir::Module, Diagnostics> {
    let mut sink = diag::Sink::default();
    let tokens = lexer::lex(src, &mut sink);
    let register = options.code == Code::Register;
    // After an allocation failed (the section's result is out of
    // memory), each stage is work for nothing.
    let oom = || Err(Diagnostics::out_of_memory(file));
    if vm::oom::failed() {
        return oom();
    }
    let (funcs, rules) = parser::parse(tokens, &mut sink, register);
    if vm::oom::failed() {
        return oom();
    }
    let (checked, rules) = if register {
        let checked = regcheck::check_module(&funcs, &mut sink);
        (checked, check::check_rules_only(&funcs, &rules, &mut sink))
    } else {
        check::check_module(&funcs, &rules, &mut sink)
    };
    if vm::oom::failed() {
        return oom();
    }
    if sink.is_empty() {
        if let Some(checked) = checked.into_iter().collect::<Option<Vec<_>>>() {
            let mut module = lower::lower_module(checked);
            module.rules = rules;
            if register {
                verify(&module, &funcs, src, &mut sink);
            }
            if sink.is_empty() {
                return Ok(module);
            }
            return Err(sink.finish(file, src));
        }
        // Every rejected function reports why; this only guards the
        // invariant that an error result is never empty.
        sink.error(
            Span::default(),
            "internal error: a function was rejected without a diagnostic",
        );
    }
    Err(sink.finish(file, src))
}

/// Lower `module` and run the VM's verifier on every function, reporting
/// what either rejects at the function's name (or at the instruction the
/// verifier names, where it has a location).
fn verify(module: &vm::ir::Module, funcs: &[parser::FuncAst], src: &str, sink: &mut diag::Sink) {
    let at = |i: usize| funcs.get(i).map_or(Span::default(), |f| f.name.span);
    if let Err(e) = vm::lower::check_module(module) {
        sink.error(at(0), format!("cannot lower the module: {e}"));
        return;
    }
    let mut program = vm::bytecode::Program::new();
    for (i, f) in module.funcs.iter().enumerate() {
        match vm::lower::lower_function(f) {
            Ok(bf) => {
                program.push(bf);
            }
            Err(e) => {
                sink.error(at(i), format!("cannot lower it: {e}"));
                return;
            }
        }
    }
    for i in 0..module.funcs.len() {
        let id = vm::ir::FuncId(i as u32);
        if let Err(errs) = vm::verify::verify_function(&mut program, id) {
            for e in errs {
                let span = error_pc(&e)
                    .and_then(|pc| program.get(id)?.locs.get(pc).copied())
                    .and_then(|loc| regcheck::span_at(src, loc))
                    .unwrap_or(at(i));
                sink.error(span, format!("the verifier rejects it: {e}"));
            }
        }
    }
}

/// The instruction a verifier error is about, if it names one.
fn error_pc(e: &vm::verify::VerifyError) -> Option<usize> {
    use vm::verify::VerifyError as E;
    match e {
        E::RegisterOutOfRange { pc, .. }
        | E::TypeMismatch { pc, .. }
        | E::BadIndex { pc, .. }
        | E::BadCall { pc, .. }
        | E::BadReturn { pc, .. }
        | E::BadFlags { pc, .. }
        | E::UnreservedPush { pc, .. } => Some(*pc),
        _ => None,
    }
}
