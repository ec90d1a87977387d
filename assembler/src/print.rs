//! Printing: SSA IR back to `.adasm` text.
//!
//! For a module the assembler produced, `assemble(print_module(m))` gives
//! an equal module up to source locations and value numbering: registers keep
//! their names, constants are printed as literals that parse back to the
//! same bits (except for NaN payloads: every NaN prints as `nan`), and
//! typed opcodes print as the overloaded mnemonic, which the operand types
//! resolve back to the same opcode.
//!
//! Printing never panics, whatever the module: values without a usable name
//! get `%v<index>`, labels `bb<index>`, functions `f<index>` (made unique),
//! and anything that does not exist in the text form (reverse-mode
//! opcodes, several return values, dangling indices) is printed in a
//! readable form that the assembler will reject.

use crate::check::{mnemonics, Family};
use hashbrown::HashSet;
use std::fmt::Write;
use vm::ir::{Block, BlockId, FuncId, Function, Inst, Module, RetType, Term, ValueId};
use vm::op::Op;
use vm::Type;

/// The text of a whole module: its functions in order, separated by blank
/// lines, then its rules (`rule @f jvp @f_jvp`), one a line.
pub fn print_module(m: &Module) -> String {
    let fnames = unique_names(m.funcs.iter().map(|f| Some(f.name.as_str())), is_name, "f");
    // Functions with no result: their calls print without a destination.
    let units: Vec<bool> = m.funcs.iter().map(|f| f.ret == RetType::Unit).collect();
    let mut out = String::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        FnPrinter::new(f, i, &fnames, &units).function(&mut out);
    }
    let name = |g: FuncId| fnames.get(g.index()).map_or("?", |n| n.as_str());
    for (k, r) in m.rules.iter().enumerate() {
        if k == 0 {
            out.push('\n');
        }
        out.push_str(&format!("rule @{} jvp @{}\n", name(r.f), name(r.jvp)));
    }
    out
}

/// Whether `s` can follow `%` or `@`.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Whether `s` lexes as a block label.
pub(crate) fn is_label(s: &str) -> bool {
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '.');
    first_ok && is_name(s) && !matches!(s, "fn" | "true" | "false" | "inf" | "nan")
}

/// One distinct name per item: its own if valid and not taken, else
/// `<prefix><index>` (with a `.<k>` suffix if even that is taken).
fn unique_names<'n>(
    names: impl Iterator<Item = Option<&'n str>>,
    valid: fn(&str) -> bool,
    prefix: &str,
) -> Vec<String> {
    let names: Vec<Option<&str>> = names.collect();
    let mut taken: HashSet<String> = HashSet::new();
    let mut out: Vec<Option<String>> = names
        .iter()
        .map(|n| match n {
            Some(n) if valid(n) && taken.insert(n.to_string()) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    for (i, slot) in out.iter_mut().enumerate() {
        if slot.is_none() {
            let mut name = format!("{prefix}{i}");
            let mut k = 0;
            while !taken.insert(name.clone()) {
                k += 1;
                name = format!("{prefix}{i}.{k}");
            }
            *slot = Some(name);
        }
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// The text of a constant of type `ty` with the given bits.
pub(crate) fn const_text(ty: Type, bits: u64) -> String {
    match ty {
        Type::F64 => {
            let x = f64::from_bits(bits);
            if x.is_nan() {
                "nan".to_string()
            } else if x.is_infinite() {
                if x > 0.0 { "inf" } else { "-inf" }.to_string()
            } else {
                // `{:?}` always has a `.` or an exponent, so it reads back
                // as an f64 literal, and it round-trips exactly.
                format!("{x:?}")
            }
        }
        Type::I64 => (bits as i64).to_string(),
        Type::Bool => (bits != 0).to_string(),
        Type::Arr => "<array constant>".to_string(),
    }
}

/// The text mnemonic of an opcode: the overloaded one for user opcodes,
/// the table's mnemonic for the others.
fn mnemonic(op: Op) -> &'static str {
    mnemonics()
        .find(|(_, fam)| match *fam {
            Family::Fixed(o) | Family::Any(o) => o == op,
            Family::Num(f, i) => f == op || i == op,
        })
        .map_or(op.mnemonic(), |(m, _)| m)
}

struct FnPrinter<'a> {
    f: &'a Function,
    /// The function's index in the module.
    index: usize,
    fnames: &'a [String],
    /// Which functions of the module have no result.
    units: &'a [bool],
    /// Operand text of every value: `%name` or a literal.
    values: Vec<String>,
    labels: Vec<String>,
}

impl<'a> FnPrinter<'a> {
    fn new(
        f: &'a Function,
        index: usize,
        fnames: &'a [String],
        units: &'a [bool],
    ) -> FnPrinter<'a> {
        let regs = unique_names(
            f.values.iter().map(|v| {
                if v.konst.is_some() {
                    None
                } else {
                    v.name.as_deref()
                }
            }),
            is_name,
            "v",
        );
        let values = f
            .values
            .iter()
            .zip(regs)
            .map(|(v, reg)| match v.konst {
                Some(bits) => const_text(v.ty, bits),
                None => format!("%{reg}"),
            })
            .collect();
        let labels = unique_names(
            f.blocks.iter().map(|b| Some(b.name.as_str())),
            is_label,
            "bb",
        );
        FnPrinter {
            f,
            index,
            fnames,
            units,
            values,
            labels,
        }
    }

    fn val(&self, v: ValueId) -> String {
        self.values
            .get(v.index())
            .cloned()
            .unwrap_or_else(|| format!("%?{v}"))
    }

    fn vals(&self, vs: &[ValueId]) -> String {
        let texts: Vec<String> = vs.iter().map(|v| self.val(*v)).collect();
        texts.join(", ")
    }

    fn label(&self, b: BlockId) -> String {
        self.labels
            .get(b.index())
            .cloned()
            .unwrap_or_else(|| format!("?{b}"))
    }

    fn fname(&self, id: FuncId) -> String {
        self.fnames
            .get(id.index())
            .cloned()
            .unwrap_or_else(|| format!("?{id}"))
    }

    fn ty(&self, v: ValueId) -> String {
        self.f
            .values
            .get(v.index())
            .map_or("?".to_string(), |d| d.ty.to_string())
    }

    fn function(&self, out: &mut String) {
        let params: Vec<String> = self
            .f
            .params
            .iter()
            .map(|p| format!("{}: {}", self.val(*p), self.ty(*p)))
            .collect();
        let ret = match &self.f.ret {
            RetType::One(t) => format!(" -> {t}"),
            RetType::Unit => String::new(),
            RetType::Many(ts) => {
                let ts: Vec<String> = ts.iter().map(Type::to_string).collect();
                format!(" -> ({})", ts.join(", "))
            }
        };
        let name = self.fname(FuncId(self.index as u32));
        let _ = writeln!(out, "fn @{name}({}){ret} {{", params.join(", "));
        for (i, b) in self.f.blocks.iter().enumerate() {
            self.block(out, i, b);
        }
        out.push_str("}\n");
    }

    fn block(&self, out: &mut String, i: usize, b: &Block) {
        let _ = writeln!(out, "{}:", self.labels.get(i).map_or("?", String::as_str));
        for p in &b.phis {
            let arms: Vec<String> = p
                .incoming
                .iter()
                .map(|(b, v)| format!("[{}: {}]", self.label(*b), self.val(*v)))
                .collect();
            let _ = writeln!(out, "    {} = phi {}", self.val(p.dst), arms.join(", "));
        }
        for inst in &b.insts {
            let _ = writeln!(out, "    {}", self.inst(inst));
        }
        let _ = writeln!(out, "    {}", self.term(&b.term));
    }

    fn inst(&self, i: &Inst) -> String {
        let unit_call = i.op == Op::Call
            && i.callee
                .is_some_and(|c| self.units.get(c.index()).copied().unwrap_or(false));
        let lhs = match i.dst {
            Some(d) if !unit_call => format!("{} = ", self.val(d)),
            _ => String::new(),
        };
        let m = mnemonic(i.op);
        let rhs = match i.op {
            Op::Call => {
                let callee = i.callee.map_or("?".to_string(), |c| self.fname(c));
                format!("call @{callee}({})", self.vals(&i.args))
            }
            // The callee's results are added to (`call.acc`) or written
            // to (`call.n`) the registers in brackets.
            Op::CallAcc | Op::CallN => {
                let callee = i.callee.map_or("?".to_string(), |c| self.fname(c));
                format!(
                    "{m} @{callee}({}) -> [{}]",
                    self.vals(&i.args),
                    self.vals(&i.accs)
                )
            }
            Op::BlkPush => format!("{m} {}", i.imm),
            _ if i.args.is_empty() => m.to_string(),
            _ => format!("{m} {}", self.vals(&i.args)),
        };
        format!("{lhs}{rhs}")
    }

    fn term(&self, t: &Term) -> String {
        match t {
            Term::Jmp(b) => format!("jmp {}", self.label(*b)),
            Term::Br { cond, then_, else_ } => format!(
                "br {}, {}, {}",
                self.val(*cond),
                self.label(*then_),
                self.label(*else_)
            ),
            Term::Ret(_) if self.f.ret == RetType::Unit => "ret".to_string(),
            Term::Ret(v) => format!("ret {}", self.val(*v)),
            Term::RetN(vs) => format!("ret.n {}", self.vals(vs)),
            Term::BlkPop(bs) => {
                let ls: Vec<String> = bs.iter().map(|b| self.label(*b)).collect();
                format!("blk.pop [{}]", ls.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_print_as_literals_that_read_back() {
        for x in [
            1.0,
            -0.0,
            0.1,
            1e300,
            2.5e-10,
            f64::MIN_POSITIVE,
            123456789.0,
        ] {
            let t = const_text(Type::F64, f64::to_bits(x));
            assert!(t.contains('.') || t.contains('e'), "{t}");
            assert_eq!(t.parse::<f64>().map(f64::to_bits), Ok(x.to_bits()), "{t}");
        }
        assert_eq!(const_text(Type::F64, f64::INFINITY.to_bits()), "inf");
        assert_eq!(const_text(Type::F64, f64::NEG_INFINITY.to_bits()), "-inf");
        assert_eq!(const_text(Type::F64, f64::NAN.to_bits()), "nan");
        assert_eq!(
            const_text(Type::I64, i64::MIN as u64),
            "-9223372036854775808"
        );
        assert_eq!(const_text(Type::Bool, 1), "true");
    }

    #[test]
    fn names_are_made_valid_and_unique() {
        let names = unique_names(
            [
                Some("x"),
                None,
                Some("x"),
                Some("v1"),
                Some("a b"),
                Some(""),
            ]
            .into_iter(),
            is_name,
            "v",
        );
        assert_eq!(names, vec!["x", "v1.1", "v2", "v1", "v4", "v5"]);
        assert!(!is_label("1a"));
        assert!(!is_label("fn"));
        assert!(is_label("entry.2"));
    }
}
