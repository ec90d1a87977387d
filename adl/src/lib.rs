//! # adl: the structured language `.adl`, compiled to advm's SSA IR
//!
//! The pipeline, one module per stage:
//!
//! ```text
//! text --lexer--> tokens --parser--> syntax tree (ast)
//!      --types--> resolved, typed tree --ssa--> vm::ir::Module
//! ```
//!
//! * [`lexer`]: logos tokens; `//` comments and whitespace skipped.
//! * [`parser`]: recursive descent with error recovery (every independent
//!   syntax error at once); nesting and expression height are bounded.
//! * [`types`]: name resolution (scopes, shadowing, did-you-mean) and type
//!   checking; operators and built-ins become the typed opcodes of
//!   `vm::op`'s table (the built-ins are read from it).
//! * [`ssa`]: SSA construction after Braun et al. (2013), with trivial and
//!   unread phis removed: the same IR the assembler builds from `.adasm`.
//!
//! Errors are the assembler's [`assembler::Diagnostics`], so they render
//! exactly as `.adasm` ones: `file:line:col: error: message`, the source
//! line and a caret.
//!
//! ```
//! let src = "fn sq(x: f64) -> f64 {\n    return x * x;\n}\n";
//! let module = adl::compile(src, "sq.adl").expect("compiles");
//! let text = assembler::print_module(&module);
//! assert!(text.contains("mul %x, %x"));
//! let again = assembler::assemble(&text, "sq.adasm").expect("re-assembles");
//! assert_eq!(again.funcs[0].name, "sq");
//!
//! let err = adl::compile("fn f() -> f64 {\n    return 2;\n}\n", "f.adl").unwrap_err();
//! assert!(err.render().starts_with("f.adl:2:12: error: expected f64, found integer literal `2`; write `2.0`"));
//! ```

#![warn(missing_docs)]

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod ssa;
pub mod types;

use assembler::{Diagnostics, Span};
use vm::ir::{Module, RetType};

pub use types::{builtin_names, Sig};

/// The stack the compiler runs on: SSA construction recurses along chains
/// of blocks, and the parser's limits keep the rest shallow.
const STACK_BYTES: usize = 256 << 20;

/// Whether a path names an `.adl` file (by its extension).
pub fn is_adl(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "adl")
}

/// Compile `.adl` source text (named `file` in diagnostics) into an IR
/// module, or report every error found.
pub fn compile(src: &str, file: &str) -> Result<Module, Diagnostics> {
    compile_with(src, file, &Module::default()).map(|(m, _)| m)
}

/// Compile `.adl` text that may call the functions of `env` (the REPL's
/// session). The module holds the text's functions first, in order, then
/// a copy of every function of `env` that the text does not define (so
/// its calls resolve), and how many are the text's; [`print_own`] prints
/// only those.
pub fn compile_with(src: &str, file: &str, env: &Module) -> Result<(Module, usize), Diagnostics> {
    on_big_stack(|| compile_inner(src, file, env), file, src)
}

/// Run a compilation on a thread with a large stack (the passes recurse
/// on nesting, which the parser bounds); on the caller's thread if no
/// thread can be started. A panic becomes an internal-error diagnostic.
/// The compilation runs in a compile section ([`assembler::compile_section`]):
/// an allocation that fails is an `out of memory` diagnostic, not an
/// abort, when the global allocator is `vm::alloc_count::Reserve`.
fn on_big_stack<T: Send>(
    run: impl FnOnce() -> Result<T, Diagnostics> + Send,
    file: &str,
    src: &str,
) -> Result<T, Diagnostics> {
    let mut run = Some(run);
    let spawned = std::thread::scope(|s| {
        let job = run.take()?;
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn_scoped(s, move || assembler::compile_section(file, job))
            .ok()
            .map(|h| h.join())
    });
    match (spawned, run) {
        (Some(Ok(result)), _) => result,
        (Some(Err(_)), _) => {
            let mut errors = diag::Errors::default();
            errors.error(Span::default(), "internal error: the compiler panicked");
            Err(errors.finish(file, src))
        }
        (None, Some(run)) => assembler::compile_section(file, run),
        (None, None) => {
            let mut errors = diag::Errors::default();
            errors.error(
                Span::default(),
                "internal error: no thread for the compiler",
            );
            Err(errors.finish(file, src))
        }
    }
}

fn compile_inner(src: &str, file: &str, env: &Module) -> Result<(Module, usize), Diagnostics> {
    let mut errors = diag::Errors::default();
    let tokens = lexer::lex(src, &mut errors);
    let ast = parser::parse(&tokens, &mut errors);
    let externs: Vec<Sig> = env
        .funcs
        .iter()
        .filter(|f| !ast.funcs.iter().any(|g| g.name.name == f.name))
        .map(|f| Sig {
            name: f.name.clone(),
            params: f.param_types(),
            ret: match &f.ret {
                RetType::One(t) => Some(*t),
                _ => None,
            },
        })
        .collect();
    let checked = types::check(&ast, &externs, &mut errors);
    let lines = diag::Lines::new(src);
    let rules = check_rules(&ast, &externs, env, &lines, &mut errors);
    if !errors.is_empty() {
        return Err(errors.finish(file, src));
    }
    let mut module = Module::default();
    for f in &checked {
        match ssa::build(f, &lines) {
            Ok(func) => module.funcs.push(func),
            Err((span, msg)) => errors.error(span, msg),
        }
    }
    if !errors.is_empty() {
        return Err(errors.finish(file, src));
    }
    for s in &externs {
        if let Some(id) = env.find(&s.name) {
            module.funcs.push(env.func(id).clone());
        }
    }
    fix_extern_calls(&mut module, checked.len(), env);
    for (f, jvp, loc) in rules {
        if let (Some(f), Some(jvp)) = (module.find(&f), module.find(&jvp)) {
            module.rules.push(vm::ir::Rule { f, jvp, loc });
        }
    }
    Ok((module, checked.len()))
}

/// The rules of `ast` (`rule f jvp f_jvp`, §9 of the contract) and of
/// `env`, by name, with where each is written: both functions exist (in
/// the text or in `env`), `f` has one rule at most and is not its own
/// rule, and the signatures fit ([`vm::ir::rule_line_error`]); each
/// rule that does not is reported.
fn check_rules(
    ast: &ast::File,
    externs: &[Sig],
    env: &Module,
    lines: &diag::Lines,
    errors: &mut diag::Errors,
) -> Vec<(String, String, vm::ir::Loc)> {
    let own: Vec<Sig> = ast
        .funcs
        .iter()
        .map(|f| Sig {
            name: f.name.name.clone(),
            params: f.params.iter().map(|p| p.ty).collect(),
            ret: f.ret,
        })
        .collect();
    let sig = |name: &str| own.iter().chain(externs).find(|s| s.name == name);
    let mut out: Vec<(String, String, vm::ir::Loc)> = env
        .rules
        .iter()
        .filter_map(|r| {
            let f = env.funcs.get(r.f.index())?.name.clone();
            let jvp = env.funcs.get(r.jvp.index())?.name.clone();
            Some((f, jvp, r.loc))
        })
        .collect();
    for r in &ast.rules {
        let lookup = |id: &ast::Ident| {
            sig(&id.name).ok_or_else(|| {
                let names = own.iter().chain(externs).map(|s| s.name.as_str());
                let hint = assembler::closest(&id.name, names)
                    .map_or(String::new(), |n| format!("; did you mean `{n}`?"));
                (id.span, format!("unknown function `{}`{hint}", id.name))
            })
        };
        let checked = (|| {
            let (fs, js) = (lookup(&r.func)?, lookup(&r.rule)?);
            let earlier = out
                .iter()
                .find(|(f, _, _)| *f == r.func.name)
                .map(|(_, _, at)| at.line);
            let sigs = Some((&fs.params[..], fs.ret, &js.params[..], js.ret));
            match vm::ir::rule_line_error(&r.func.name, &r.rule.name, earlier, sigs) {
                Some((vm::ir::RuleSide::F, msg)) => Err((r.func.span, msg.replace('@', ""))),
                Some((vm::ir::RuleSide::Jvp, msg)) => Err((r.rule.span, msg.replace('@', ""))),
                None => Ok(()),
            }
        })();
        match checked {
            Ok(()) => out.push((
                r.func.name.clone(),
                r.rule.name.clone(),
                lines.loc(r.span.start),
            )),
            Err((span, msg)) => errors.error(span, msg),
        }
    }
    out
}

/// The copied functions of the environment call each other by the
/// environment's ids: renumber those calls to the module's.
fn fix_extern_calls(module: &mut Module, own: usize, env: &Module) {
    let names: Vec<String> = module.funcs.iter().map(|f| f.name.clone()).collect();
    for f in module.funcs.iter_mut().skip(own) {
        for b in &mut f.blocks {
            for i in &mut b.insts {
                if let Some(c) = i.callee.as_mut() {
                    if let Some(g) = env.funcs.get(c.index()) {
                        if let Some(k) = names.iter().position(|n| *n == g.name) {
                            *c = vm::ir::FuncId(k as u32);
                        }
                    }
                }
            }
        }
    }
}

/// Whether `src` is one `.adl` expression, syntactically (the REPL tells
/// an expression from a mistyped command with it).
pub fn is_expression(src: &str) -> bool {
    let mut errors = diag::Errors::default();
    let tokens = lexer::lex(src, &mut errors);
    errors.is_empty() && parser::parse_expr(&tokens, &mut errors).is_some()
}

/// An expression compiled for the REPL: a function that takes the REPL's
/// variables and returns the expression's value.
#[derive(Clone, Debug)]
pub struct ExprModule {
    /// `env`'s functions (same ids), then the expression's function.
    pub module: Module,
    /// The expression's function (the last one).
    pub func: vm::ir::FuncId,
    /// Its result type; `None` for a call of a function with no result.
    pub ty: Option<vm::Type>,
}

/// Compile one `.adl` expression (the REPL's `sin(1.0) * pow(2.0, 3)`)
/// that may read the variables `vars` and call the functions of `env`:
/// the module is `env` with one more function, named `name`, whose
/// parameters are `vars` in order and whose result is the expression.
pub fn compile_expr(
    src: &str,
    file: &str,
    name: &str,
    vars: &[(String, vm::Type)],
    env: &Module,
) -> Result<ExprModule, Diagnostics> {
    on_big_stack(|| compile_expr_inner(src, file, name, vars, env), file, src)
}

fn compile_expr_inner(
    src: &str,
    file: &str,
    name: &str,
    vars: &[(String, vm::Type)],
    env: &Module,
) -> Result<ExprModule, Diagnostics> {
    let mut errors = diag::Errors::default();
    let tokens = lexer::lex(src, &mut errors);
    let expr = parser::parse_expr(&tokens, &mut errors);
    let sigs: Vec<Sig> = env
        .funcs
        .iter()
        .map(|f| Sig {
            name: f.name.clone(),
            params: f.param_types(),
            ret: match &f.ret {
                RetType::One(t) => Some(*t),
                _ => None,
            },
        })
        .collect();
    let checked = match (expr, errors.is_empty()) {
        (Some(e), true) => types::check_expr(&e, vars, &sigs, &mut errors),
        _ => None,
    };
    let Some(mut tf) = checked.filter(|_| errors.is_empty()) else {
        if errors.is_empty() {
            errors.error(
                Span::default(),
                "internal error: an expression was rejected without a diagnostic",
            );
        }
        return Err(errors.finish(file, src));
    };
    tf.name = name.to_string();
    let lines = diag::Lines::new(src);
    let func = ssa::build(&tf, &lines).map_err(|(span, msg)| {
        let mut e = diag::Errors::default();
        e.error(span, msg);
        e.finish(file, src)
    })?;
    let mut module = env.clone();
    module.funcs.push(func);
    Ok(ExprModule {
        func: vm::ir::FuncId(module.funcs.len() as u32 - 1),
        module,
        ty: tf.ret,
    })
}

/// The `.adasm` text of the first `own` functions of `module` (those a
/// [`compile_with`] text defined), which re-assembles together with the
/// functions they call.
pub fn print_own(module: &Module, own: usize) -> String {
    let text = assembler::print_module(module);
    split_functions(&text)
        .into_iter()
        .take(own)
        .collect::<Vec<String>>()
        .join("\n")
}

/// The functions of a module's text as [`assembler::print_module`] prints
/// it, one text each (from its `fn` line to its closing brace and newline).
pub fn split_functions(text: &str) -> Vec<String> {
    let mut starts: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("fn @") {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts.push(text.len());
    starts
        .windows(2)
        .map(|w| format!("{}\n", text[w[0]..w[1]].trim_end()))
        .collect()
}

/// [`print_own`], with the line of `module`'s locations (the `.adl` text)
/// behind each line of the printed text: `lines[k]` for line `k + 1`. The
/// printed module is assembled again and its instructions paired with
/// `module`'s; a line with no instruction of its own (a label, a brace)
/// takes the line of the one before it; all 0 if the pairing fails.
pub fn print_own_lines(module: &Module, own: usize) -> (String, Vec<u32>) {
    let whole = assembler::print_module(module);
    let text = split_functions(&whole)
        .into_iter()
        .take(own)
        .collect::<Vec<String>>()
        .join("\n");
    // The rules, printed after every function, end the last piece when
    // all functions are own: taken out, and the own functions' rules put
    // back below (with their `.adl` lines).
    let stripped: String = text
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("rule @"))
        .collect();
    let (mut text, mut lines) = own_lines(module, own, &whole, &stripped);
    for r in module.rules.iter().filter(|r| r.f.index() < own) {
        text.push_str(&format!(
            "rule @{} jvp @{}\n",
            module.func(r.f).name,
            module.func(r.jvp).name
        ));
        lines.push(r.loc.line);
    }
    (text, lines)
}

/// The `.adl` line behind each line of `text`, the printed own functions
/// of `module` (see [`print_own_lines`]); `whole` is all of it printed.
fn own_lines(module: &Module, own: usize, whole: &str, text: &str) -> (String, Vec<u32>) {
    let text = text.to_string();
    let mut lines = vec![0u32; text.lines().count()];
    if !whole.starts_with(&text) {
        return (text, lines);
    }
    let Ok(again) = assembler::assemble(whole, "<generated>") else {
        return (text, lines);
    };
    let mut note = |at: vm::ir::Loc, from: vm::ir::Loc| {
        let slot = at
            .line
            .checked_sub(1)
            .and_then(|k| lines.get_mut(k as usize));
        if let (Some(slot), true) = (slot, from.line > 0) {
            *slot = from.line;
        }
    };
    for (f, g) in module.funcs.iter().zip(&again.funcs).take(own) {
        if f.name != g.name || f.blocks.len() != g.blocks.len() {
            continue;
        }
        note(g.loc, f.loc);
        for (a, b) in f.blocks.iter().zip(&g.blocks) {
            if a.phis.len() != b.phis.len() || a.insts.len() != b.insts.len() {
                continue;
            }
            for (p, q) in a.phis.iter().zip(&b.phis) {
                note(q.loc, p.loc);
            }
            for (i, j) in a.insts.iter().zip(&b.insts) {
                note(j.loc, i.loc);
            }
            note(b.term_loc, a.term_loc);
        }
    }
    let mut last = 0;
    for l in &mut lines {
        if *l == 0 {
            *l = last;
        } else {
            last = *l;
        }
    }
    (text, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_lines_map_to_adl_lines() {
        let src = "fn g(x: f64) -> f64 {\n    return x * 2.0;\n}\n\
                   fn f(x: f64, i: i64) -> f64 {\n    let k = i - 3;\n\n    let q = 10 / k;\n    \
                   if q > 0 {\n        return g(x);\n    }\n    return x;\n}\n";
        let m = compile(src, "t.adl").expect("compiles");
        let (text, lines) = print_own_lines(&m, m.funcs.len());
        assert_eq!(text, print_own(&m, m.funcs.len()));
        assert_eq!(lines.len(), text.lines().count());
        let adl: Vec<&str> = src.lines().collect();
        // Each generated instruction's line maps to the `.adl` line it
        // came from; labels and braces to the line before.
        let want = |generated: &str| -> &str {
            if generated.contains("div ") {
                "let q = 10 / k"
            } else if generated.contains("call @g") {
                "return g(x)"
            } else if generated.contains("mul ") {
                "return x * 2.0"
            } else if generated.contains("sub ") {
                "let k = i - 3"
            } else {
                ""
            }
        };
        let mut checked = 0;
        for (k, generated) in text.lines().enumerate() {
            let w = want(generated);
            if w.is_empty() {
                continue;
            }
            let l = lines[k] as usize;
            assert!(
                l > 0 && adl[l - 1].contains(w),
                "{generated:?} maps to line {l}\n{text}"
            );
            checked += 1;
        }
        assert_eq!(checked, 4, "{text}");
        assert!(lines.iter().all(|l| *l > 0), "{lines:?}");
    }
}
