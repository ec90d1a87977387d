//! Pictures of the code: Graphviz DOT of a function's CFG and, with `--ad`,
//! of its forward and reverse CFGs side by side.
//!
//! Blocks are boxes listing their phis, instructions and terminator. In the
//! reverse CFG, phi-edge blocks (`edge.*`) are shaded, `blk.pop` dispatch
//! edges are dashed and labelled with the block id they pop, and
//! `comms.push` / `comms.pop` lines are marked with `⇡` / `⇣`.

use std::fmt::Write;
use vm::ir::{Function, Inst, Module, Term, ValueId};
use vm::op::Op;
use vm::Type;

fn value(f: &Function, v: ValueId) -> String {
    let Some(d) = f.values.get(v.index()) else {
        return format!("%v{}", v.0);
    };
    if let Some(bits) = d.konst {
        return match d.ty {
            Type::F64 => format!("{:?}", f64::from_bits(bits)),
            Type::I64 => (bits as i64).to_string(),
            Type::Bool => (bits != 0).to_string(),
            Type::Arr => "?".into(),
        };
    }
    match &d.name {
        Some(n) => format!("%{n}"),
        None => format!("%v{}", v.0),
    }
}

/// Names callees by id.
pub type Names<'a> = &'a dyn Fn(vm::ir::FuncId) -> String;

fn inst_text(names: Names, f: &Function, i: &Inst) -> String {
    let mut s = String::new();
    if let Some(d) = i.dst {
        let _ = write!(s, "{} = ", value(f, d));
    }
    let args: Vec<String> = i.args.iter().map(|a| value(f, *a)).collect();
    match i.op {
        Op::Call | Op::CallAcc => {
            let callee = i
                .callee
                .map_or("?".to_string(), |c| format!("@{}", names(c)));
            let _ = write!(s, "{} {callee}({})", i.op.mnemonic(), args.join(", "));
            if !i.accs.is_empty() {
                let accs: Vec<String> = i.accs.iter().map(|a| value(f, *a)).collect();
                let _ = write!(s, " += ({})", accs.join(", "));
            }
        }
        Op::BlkPush => {
            let _ = write!(s, "blk.push {}", i.imm);
        }
        Op::CommsPush => {
            let _ = write!(s, "⇡ comms.push {}", args.join(", "));
        }
        Op::CommsPop => {
            s = format!(
                "⇣ comms.pop {}",
                i.dst.map(|d| value(f, d)).unwrap_or_default()
            );
        }
        op => {
            let _ = write!(s, "{} {}", op.mnemonic(), args.join(", "));
        }
    }
    s
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' | '\\' | '{' | '}' | '<' | '>' | '|' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Nodes and edges of one function as a DOT cluster (or graph body).
fn cluster(out: &mut String, names: Names, f: &Function, prefix: &str, title: &str) {
    let _ = writeln!(out, "  subgraph cluster_{prefix} {{");
    let _ = writeln!(out, "    label=\"{}\";", escape(title));
    for (bi, b) in f.blocks.iter().enumerate() {
        let mut label = format!("{}:\\l", escape(&b.name));
        for phi in &b.phis {
            let inc: Vec<String> = phi
                .incoming
                .iter()
                .map(|(l, v)| {
                    format!(
                        "[{}: {}]",
                        f.blocks.get(l.index()).map_or("?", |b| b.name.as_str()),
                        value(f, *v)
                    )
                })
                .collect();
            let _ = write!(
                label,
                "  {}\\l",
                escape(&format!("{} = phi {}", value(f, phi.dst), inc.join(", ")))
            );
        }
        for i in &b.insts {
            let _ = write!(label, "  {}\\l", escape(&inst_text(names, f, i)));
        }
        let term = match &b.term {
            Term::Jmp(t) => format!("jmp {}", f.blocks[t.index()].name),
            Term::Br { cond, then_, else_ } => format!(
                "br {}, {}, {}",
                value(f, *cond),
                f.blocks[then_.index()].name,
                f.blocks[else_.index()].name
            ),
            Term::Ret(v) => format!("ret {}", value(f, *v)),
            Term::RetN(vs) => {
                let vs: Vec<String> = vs.iter().map(|v| value(f, *v)).collect();
                format!("ret.n ({})", vs.join(", "))
            }
            Term::BlkPop(_) => "blk.pop".to_string(),
        };
        let _ = write!(label, "  {}\\l", escape(&term));
        let style = if b.name.starts_with("edge.") {
            ", style=filled, fillcolor=\"#fde9c8\""
        } else if b.name.starts_with("push.") {
            ", style=filled, fillcolor=\"#e3f0fb\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    {prefix}_{bi} [shape=box, fontname=\"monospace\", label=\"{label}\"{style}];"
        );
    }
    for (bi, b) in f.blocks.iter().enumerate() {
        match &b.term {
            Term::Jmp(t) => {
                let _ = writeln!(out, "    {prefix}_{bi} -> {prefix}_{};", t.0);
            }
            Term::Br { then_, else_, .. } => {
                let _ = writeln!(
                    out,
                    "    {prefix}_{bi} -> {prefix}_{} [label=\"then\"];",
                    then_.0
                );
                let _ = writeln!(
                    out,
                    "    {prefix}_{bi} -> {prefix}_{} [label=\"else\"];",
                    else_.0
                );
            }
            Term::BlkPop(ts) => {
                for (k, t) in ts.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "    {prefix}_{bi} -> {prefix}_{} [style=dashed, color=\"#c0392b\", label=\"blk.pop {k}\"];",
                        t.0
                    );
                }
            }
            Term::Ret(_) | Term::RetN(_) => {}
        }
    }
    let _ = writeln!(out, "  }}");
}

/// DOT of one function's CFG.
pub fn primal_dot(module: &Module, f: &Function) -> String {
    let names = |c: vm::ir::FuncId| {
        module
            .funcs
            .get(c.index())
            .map_or("?".into(), |g| g.name.clone())
    };
    let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", escape(&f.name));
    cluster(&mut out, &names, f, "primal", &format!("@{}", f.name));
    out.push_str("}\n");
    out
}

/// DOT of the forward and reverse CFGs side by side.
pub fn ad_dot(names: Names, fwd: &Function, rev: &Function) -> String {
    let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", escape(&fwd.name));
    cluster(
        &mut out,
        names,
        fwd,
        "fwd",
        &format!("@{} (forward)", fwd.name),
    );
    cluster(
        &mut out,
        names,
        rev,
        "rev",
        &format!("@{} (reverse)", rev.name),
    );
    out.push_str("}\n");
    out
}
