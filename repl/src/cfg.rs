//! Pictures of the code: Graphviz DOT of a function's CFG (`advm cfg`,
//! `:cfg` in the REPL) and of its forward and reverse CFGs side by side.
//!
//! Every block is one node (named `<cluster>_<block index>`) whose
//! HTML-like label lists the block's name, phis, instructions and
//! terminator; every successor edge of the IR is one DOT edge (`then` /
//! `else` on branches). The entry block has a bold border, blocks that
//! return a double one. In the AD picture:
//!
//! * reverse phi-edge blocks (`edge.*`) are filled orange, forward blocks
//!   that record a predecessor (`push.*`) blue;
//! * `blk.pop` dispatch edges are dashed red and labelled `blk.pop K`, K
//!   being the popped block id that selects them;
//! * `comms.push` / `comms.pop` lines are blue and marked `⇡` / `⇣`,
//!   `blk.push` lines red.
//!
//! Nothing else (no legend, no extra nodes inside the clusters), so a test
//! can match nodes and edges against the IR one for one.

use std::fmt::Write;
use vm::ir::{Function, Inst, Module, Term, ValueId};
use vm::op::Op;
use vm::Type;

/// Names callees by id.
pub type Names<'a> = &'a dyn Fn(vm::ir::FuncId) -> String;

const COMMS: &str = "#1565c0";
const BLK: &str = "#c62828";

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

fn block_name(f: &Function, b: vm::ir::BlockId) -> &str {
    f.blocks.get(b.index()).map_or("?", |b| b.name.as_str())
}

/// The text of one instruction and its colour (if any).
fn inst_text(names: Names, f: &Function, i: &Inst) -> (String, Option<&'static str>) {
    let mut s = String::new();
    let args: Vec<String> = i.args.iter().map(|a| value(f, *a)).collect();
    let dst = i.dst.map(|d| value(f, d));
    match i.op {
        Op::CommsPush => {
            let _ = write!(s, "⇡ comms.push {}", args.join(", "));
            return (s, Some(COMMS));
        }
        Op::CommsPop => {
            let _ = write!(s, "⇣ {} = comms.pop", dst.unwrap_or_default());
            return (s, Some(COMMS));
        }
        Op::BlkPush => {
            let _ = write!(s, "blk.push {}", i.imm);
            return (s, Some(BLK));
        }
        _ => {}
    }
    if let Some(d) = dst {
        let _ = write!(s, "{d} = ");
    }
    match i.op {
        Op::Call | Op::CallAcc => {
            let callee = i
                .callee
                .map_or_else(|| "?".to_string(), |c| format!("@{}", names(c)));
            let _ = write!(s, "{} {callee}({})", i.op.mnemonic(), args.join(", "));
            if !i.accs.is_empty() {
                let accs: Vec<String> = i.accs.iter().map(|a| value(f, *a)).collect();
                let _ = write!(s, " += ({})", accs.join(", "));
            }
        }
        op => {
            let _ = write!(s, "{} {}", op.mnemonic(), args.join(", "));
        }
    }
    (s.trim_end().to_string(), None)
}

/// Escape text for an HTML-like label.
fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Escape text for a quoted DOT string.
fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn row(out: &mut String, text: &str, color: Option<&str>, bold: bool) {
    let mut t = html(text);
    if bold {
        t = format!("<b>{t}</b>");
    }
    if let Some(c) = color {
        t = format!("<font color=\"{c}\">{t}</font>");
    }
    let _ = write!(out, "<tr><td align=\"left\">{t}</td></tr>");
}

/// Nodes and edges of one function as a DOT cluster.
fn cluster(out: &mut String, names: Names, f: &Function, prefix: &str, title: &str) {
    let _ = writeln!(out, "  subgraph cluster_{prefix} {{");
    let _ = writeln!(out, "    label=\"{}\";", quoted(title));
    for (bi, b) in f.blocks.iter().enumerate() {
        let mut rows = String::new();
        row(&mut rows, &format!("{}:", b.name), None, true);
        for phi in &b.phis {
            let inc: Vec<String> = phi
                .incoming
                .iter()
                .map(|(l, v)| format!("[{}: {}]", block_name(f, *l), value(f, *v)))
                .collect();
            let text = format!("  {} = phi {}", value(f, phi.dst), inc.join(", "));
            row(&mut rows, &text, None, false);
        }
        for i in &b.insts {
            let (text, color) = inst_text(names, f, i);
            row(&mut rows, &format!("  {text}"), color, false);
        }
        let (term, color) = match &b.term {
            Term::Jmp(t) => (format!("jmp {}", block_name(f, *t)), None),
            Term::Br { cond, then_, else_ } => (
                format!(
                    "br {}, {}, {}",
                    value(f, *cond),
                    block_name(f, *then_),
                    block_name(f, *else_)
                ),
                None,
            ),
            Term::Ret(v) => (format!("ret {}", value(f, *v)), None),
            Term::RetN(vs) => {
                let vs: Vec<String> = vs.iter().map(|v| value(f, *v)).collect();
                (format!("ret.n {}", vs.join(", ")), None)
            }
            Term::BlkPop(ts) => {
                let ts: Vec<String> = ts
                    .iter()
                    .enumerate()
                    .map(|(k, t)| format!("{k}: {}", block_name(f, *t)))
                    .collect();
                (format!("blk.pop [{}]", ts.join(", ")), Some(BLK))
            }
        };
        row(&mut rows, &format!("  {term}"), color, false);
        let mut style = String::new();
        if b.name.starts_with("edge.") {
            style.push_str(", style=filled, fillcolor=\"#fde2c0\"");
        } else if b.name.starts_with("push.") {
            style.push_str(", style=filled, fillcolor=\"#dcecfb\"");
        }
        if bi == 0 {
            style.push_str(", penwidth=2");
        }
        if matches!(b.term, Term::Ret(_) | Term::RetN(_)) {
            style.push_str(", peripheries=2");
        }
        let _ = writeln!(
            out,
            "    {prefix}_{bi} [label=<<table border=\"0\" cellspacing=\"0\" cellpadding=\"1\">{rows}</table>>{style}];"
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
                        "    {prefix}_{bi} -> {prefix}_{} [style=dashed, color=\"{BLK}\", fontcolor=\"{BLK}\", label=\"blk.pop {k}\"];",
                        t.0
                    );
                }
            }
            Term::Ret(_) | Term::RetN(_) => {}
        }
    }
    let _ = writeln!(out, "  }}");
}

fn header(name: &str) -> String {
    format!(
        "digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n",
        quoted(name)
    )
}

/// `@name(%x: f64, ...) -> T`
fn title(f: &Function, what: &str) -> String {
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", value(f, *p), f.ty(*p)))
        .collect();
    let ret = match &f.ret {
        vm::ir::RetType::One(t) => t.to_string(),
        vm::ir::RetType::Unit => "none".to_string(),
        vm::ir::RetType::Many(ts) => {
            let ts: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
            format!("({})", ts.join(", "))
        }
    };
    format!("@{}({}) -> {ret}{what}", f.name, params.join(", "))
}

/// DOT of one function's CFG.
pub fn primal_dot(module: &Module, f: &Function) -> String {
    let names = |c: vm::ir::FuncId| {
        module
            .funcs
            .get(c.index())
            .map_or_else(|| "?".into(), |g| g.name.clone())
    };
    let mut out = header(&f.name);
    cluster(&mut out, &names, f, "primal", &title(f, ""));
    out.push_str("}\n");
    out
}

/// DOT of the forward and reverse CFGs side by side.
pub fn ad_dot(names: Names, fwd: &Function, rev: &Function) -> String {
    let mut out = header(&fwd.name);
    cluster(&mut out, names, fwd, "fwd", &title(fwd, "  (forward)"));
    cluster(&mut out, names, rev, "rev", &title(rev, "  (reverse)"));
    out.push_str("}\n");
    out
}
