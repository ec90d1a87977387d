//! Bytecode listings back to bytecode: the reader of what
//! [`vm::disasm::program`] prints (`advm disasm`, `advm disasm --ad`, the
//! `lower` stage files), for tests and tools ([`assemble_listing`]).
//!
//! A listing names what the bytecode holds: the header gives the
//! signature, the frame size and the constant count, the `; consts:` line
//! the constant registers, each line one instruction with its operands in
//! table order (registers as `%name` or `r<N>`, constants as their value,
//! `-> block (pc)` targets, `@callee(args) += (regs)` call sites, `[block:
//! pc, ...]` jump tables, `(regs)` return lists, `%i += 1` steps), and the
//! labels the block marks. What it does not give is found again:
//!
//! * a register's number: `r<N>` is register `N`; a named register gets a
//!   free number of the frame (so the listing reads back as itself, and
//!   the code runs as before: the lowering names the registers of a
//!   function distinctly, so a name is one register);
//! * a register's type: from the opcodes' operand types and the callees'
//!   signatures, as in register code (f64 where nothing says);
//! * source locations: none but the function code was inlined from (a
//!   trap names the instruction, not a line).
//!
//! The program is then checked by the VM's verifier, whose complaints are
//! errors at the function or the instruction.

use crate::diag::{Diagnostics, Sink, Span};
use hashbrown::{HashMap, HashSet};
use vm::bytecode::{BlockMark, CallSite, Function, Instr, Program, Reg};
use vm::ir::{FuncId, RetType};
use vm::op::{Fused, Op, Operand as Kind};
use vm::Type;

/// Read a bytecode listing (as [`vm::disasm::program`] prints it; `file`
/// names it in diagnostics) into a verified [`Program`], or report every
/// error found.
///
/// ```
/// let src = "fn @sq(%x: f64) -> f64 {\nentry:\n    %y = mul %x, %x\n    ret %y\n}\n";
/// let m = assembler::assemble(src, "sq.adasm").expect("assembles");
/// let p = vm::lower::lower_module(&m).expect("lowers");
/// let text = vm::disasm::program(&p);
/// let back = assembler::assemble_listing(&text, "sq.txt").expect("reads back");
/// assert_eq!(vm::disasm::program(&back), text);
/// let mut machine = vm::interp::Vm::default();
/// let y = machine.run(&back, vm::ir::FuncId(0), &[vm::Value::F64(3.0)]);
/// assert_eq!(y, Ok(vm::Value::F64(9.0)));
/// ```
pub fn assemble_listing(src: &str, file: &str) -> Result<Program, Diagnostics> {
    crate::compile_section(file, || assemble_listing_in_section(src, file))
}

fn assemble_listing_in_section(src: &str, file: &str) -> Result<Program, Diagnostics> {
    let mut sink = Sink::default();
    let lines: Vec<(usize, &str)> = {
        let mut off = 0;
        src.split('\n')
            .map(|l| {
                let at = off;
                off += l.len() + 1;
                (at, l.strip_suffix('\r').unwrap_or(l))
            })
            .collect()
    };
    // Functions: a header line and the lines up to the next.
    let mut funcs: Vec<(usize, usize)> = Vec::new();
    for (i, (_, l)) in lines.iter().enumerate() {
        if l.starts_with("fn @") {
            if let Some(last) = funcs.last_mut() {
                last.1 = i;
            }
            funcs.push((i, lines.len()));
        } else if funcs.is_empty() && !l.trim().is_empty() && !l.trim_start().starts_with(';') {
            sink.error(
                Span::new(lines[i].0, lines[i].0),
                "expected `fn @name(...)`",
            );
        }
    }
    let headers: Vec<Option<Header>> = funcs
        .iter()
        .map(|&(h, _)| header(lines[h].1, lines[h].0, &mut sink))
        .collect();
    let mut by_name: HashMap<&str, u32> = HashMap::new();
    for (i, h) in headers.iter().enumerate() {
        if let Some(h) = h {
            by_name.entry(h.name.as_str()).or_insert(i as u32);
        }
    }
    let mut program = Program::new();
    let mut spans: Vec<(Span, Vec<Span>)> = Vec::new();
    for (k, &(h, end)) in funcs.iter().enumerate() {
        let Some(head) = &headers[k] else { continue };
        let body = lines.get(h + 1..end).unwrap_or(&[]);
        let mut r = Reader {
            head,
            headers: &headers,
            by_name: &by_name,
            sink: &mut sink,
            consts: HashMap::new(),
        };
        if let Some((f, pcs)) = r.function(body) {
            program.push(f);
            spans.push((Span::new(lines[h].0, lines[h].0), pcs));
        }
    }
    if sink.is_empty() {
        for (i, (at, pcs)) in spans.iter().enumerate() {
            let id = FuncId(i as u32);
            if let Err(errs) = vm::verify::verify_function(&mut program, id) {
                for e in errs {
                    let span = crate::error_pc(&e)
                        .and_then(|pc| pcs.get(pc).copied())
                        .unwrap_or(*at);
                    sink.error(span, format!("the verifier rejects it: {e}"));
                }
            }
        }
    }
    if sink.is_empty() {
        Ok(program)
    } else {
        Err(sink.finish(file, src))
    }
}

/// A function's header line.
struct Header {
    name: String,
    /// Each parameter's register text (`%x` or `r0`) and type.
    params: Vec<(String, Type)>,
    ret: RetType,
    nregs: usize,
    nconsts: usize,
    span: Span,
}

fn ty(s: &str) -> Option<Type> {
    match s.trim() {
        "f64" => Some(Type::F64),
        "i64" => Some(Type::I64),
        "bool" => Some(Type::Bool),
        "f64[]" => Some(Type::Arr),
        _ => None,
    }
}

/// `fn @name(%x: f64, r1: i64) -> f64   ; 8 regs, 3 consts`.
fn header(line: &str, off: usize, sink: &mut Sink) -> Option<Header> {
    let span = Span::new(off, off + line.len());
    let bad = |sink: &mut Sink, what: &str| {
        sink.error(span, format!("expected {what} in the function header"));
        None
    };
    let (sig, counts) = match line.split_once(';') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => return bad(sink, "`; N regs, M consts`"),
    };
    let rest = sig.strip_prefix("fn @").unwrap_or(sig);
    let Some((name, rest)) = rest.split_once('(') else {
        return bad(sink, "`(`");
    };
    if !crate::print::is_name(name) {
        return bad(sink, "a function name");
    }
    let Some((params, ret)) = rest.split_once(')') else {
        return bad(sink, "`)`");
    };
    let mut ps = Vec::new();
    for p in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let named = |n: &str| match n.strip_prefix('%') {
            Some(n) => crate::print::is_name(n),
            None => n
                .strip_prefix('r')
                .is_some_and(|k| k.parse::<u32>().is_ok()),
        };
        match p
            .split_once(':')
            .and_then(|(n, t)| Some((n.trim(), ty(t)?)))
        {
            Some((n, t)) if named(n) => ps.push((n.to_string(), t)),
            _ => return bad(sink, "`%name: type` parameters"),
        }
    }
    let ret = match ret.trim().strip_prefix("->").map(str::trim) {
        None if ret.trim().is_empty() => RetType::Unit,
        None => return bad(sink, "`-> type`"),
        Some(r) => match r.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            Some(list) => {
                let ts: Option<Vec<Type>> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(ty)
                    .collect();
                match ts {
                    Some(ts) => RetType::Many(ts),
                    None => return bad(sink, "result types"),
                }
            }
            None => match ty(r) {
                Some(t) => RetType::One(t),
                None => return bad(sink, "a result type"),
            },
        },
    };
    let mut words = counts.split_whitespace();
    let nregs = words.next().and_then(|w| w.parse::<usize>().ok());
    let regs_word = words.next();
    let nconsts = words.next().and_then(|w| w.parse::<usize>().ok());
    match (nregs, regs_word, nconsts) {
        (Some(nregs), Some("regs,"), Some(_)) if nregs > usize::from(Reg::MAX) => {
            let msg = format!("a frame holds at most {} registers", Reg::MAX);
            sink.error(span, msg);
            None
        }
        (Some(nregs), Some("regs,"), Some(nconsts)) => Some(Header {
            name: name.to_string(),
            params: ps,
            ret,
            nregs,
            nconsts,
            span,
        }),
        _ => bad(sink, "`; N regs, M consts`"),
    }
}

/// A register as the listing names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RegRef {
    Named(String),
    Num(u32),
}

/// An instruction as read, before registers have numbers.
struct PInstr {
    op: Op,
    regs: Vec<RegRef>,
    x: X,
}

/// The non-register operand of an instruction.
enum X {
    None,
    Word(u32),
    Table(Vec<u32>),
    List(Vec<RegRef>),
    Site {
        func: u32,
        args: Vec<RegRef>,
        rets: Vec<RegRef>,
    },
}

struct Reader<'a, 's> {
    head: &'a Header,
    headers: &'a [Option<Header>],
    by_name: &'a HashMap<&'a str, u32>,
    sink: &'s mut Sink,
    /// Constant text to its register.
    consts: HashMap<String, u32>,
}

/// Split at the commas outside brackets and parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// The bits and type of a constant as the listing prints it.
fn const_value(s: &str) -> Option<(Type, u64)> {
    match s {
        "true" => return Some((Type::Bool, 1)),
        "false" => return Some((Type::Bool, 0)),
        _ => {}
    }
    if let Ok(n) = s.parse::<i64>() {
        return Some((Type::I64, n as u64));
    }
    s.parse::<f64>().ok().map(|x| (Type::F64, x.to_bits()))
}

/// Of a trailing `(0012)` or a bare `0012`, the pc.
fn pc_of(s: &str) -> Option<u32> {
    let s = s.trim();
    let inner = match s.rfind('(') {
        Some(i) => s.get(i + 1..)?.strip_suffix(')')?,
        None => s,
    };
    inner.trim().parse().ok()
}

impl Reader<'_, '_> {
    fn error(&mut self, span: Span, msg: impl Into<String>) {
        self.sink.error(span, msg);
    }

    fn reg(&self, s: &str) -> Option<RegRef> {
        if let Some(n) = s.strip_prefix('%') {
            return crate::print::is_name(n).then(|| RegRef::Named(n.to_string()));
        }
        if let Some(k) = s.strip_prefix('r').and_then(|d| d.parse::<u32>().ok()) {
            return Some(RegRef::Num(k));
        }
        self.consts.get(s).map(|&r| RegRef::Num(r))
    }

    fn regs(&self, s: &str) -> Option<Vec<RegRef>> {
        let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
        split_top(inner).into_iter().map(|r| self.reg(r)).collect()
    }

    /// The function, and the span of each instruction (for the verifier's
    /// complaints).
    fn function(&mut self, body: &[(usize, &str)]) -> Option<(Function, Vec<Span>)> {
        let head = self.head;
        let np = head.params.len();
        let before = self.sink.len();
        let mut consts: Vec<(u64, Type)> = Vec::new();
        let mut names: HashMap<u32, String> = HashMap::new();
        let mut code: Vec<PInstr> = Vec::new();
        let mut spans = Vec::new();
        let mut blocks: Vec<BlockMark> = Vec::new();
        // Where each instruction comes from: only inlining is listed.
        let mut locs = Vec::new();
        let mut inlined = 0u32;
        for (i, (n, _)) in head.params.iter().enumerate() {
            if let Some(name) = n.strip_prefix('%') {
                names.insert(i as u32, name.to_string());
            }
        }
        for &(off, line) in body {
            let span = Span::new(off, off + line.len());
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            if let Some(list) = t.strip_prefix("; consts:") {
                for item in split_top(list) {
                    let Some((lhs, value)) = item.split_once(" = ") else {
                        self.error(span, format!("expected `register = value`, found `{item}`"));
                        continue;
                    };
                    let Some((ty, bits)) = const_value(value.trim()) else {
                        self.error(span, format!("`{value}` is no constant"));
                        continue;
                    };
                    let r = (np + consts.len()) as u32;
                    if let Some(name) = lhs.trim().strip_prefix('%') {
                        names.insert(r, name.to_string());
                    }
                    self.consts.entry(value.trim().to_string()).or_insert(r);
                    consts.push((bits, ty));
                }
                continue;
            }
            if t.starts_with(';') {
                continue;
            }
            if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                let pc = code.len();
                locs.push(vm::ir::Loc {
                    line: 0,
                    col: 0,
                    inlined,
                });
                match self.instr(t, pc, span) {
                    Some(i) => code.push(i),
                    None => code.push(PInstr {
                        op: Op::Jmp,
                        regs: Vec::new(),
                        x: X::None,
                    }),
                }
                spans.push(span);
                continue;
            }
            let (label, comment) = t.split_once(';').unwrap_or((t, ""));
            match label.trim().strip_suffix(':') {
                Some(name) if crate::print::is_label(name) => blocks.push(BlockMark {
                    name: name.to_string(),
                    start: code.len() as u32,
                }),
                _ => self.error(
                    span,
                    format!("expected an instruction or a label, found `{t}`"),
                ),
            }
            // `entry:   ; inlined from @g`: the block's code is `@g`'s.
            inlined = 0;
            if let Some(g) = comment.trim().strip_prefix("inlined from ") {
                let id = match g.strip_prefix('@') {
                    Some(n) => self.by_name.get(n).copied(),
                    None => g.strip_prefix("fn").and_then(|k| k.parse().ok()),
                };
                match id {
                    Some(id) => inlined = id + 1,
                    None => self.error(span, format!("no function `{g}`")),
                }
            }
        }
        if consts.len() != head.nconsts {
            let msg = format!(
                "the header says {} constants, the `; consts:` line has {}",
                head.nconsts,
                consts.len()
            );
            self.error(head.span, msg);
        }
        if self.sink.len() != before {
            return None;
        }
        // Numbers for named registers: the free ones, in order of first
        // appearance.
        let nregs = head.nregs;
        let mut number: HashMap<String, u32> = HashMap::new();
        for (r, n) in &names {
            number.entry(n.clone()).or_insert(*r);
        }
        let mut used: HashSet<u32> = (0..(np + consts.len()) as u32).collect();
        let mut order: Vec<String> = Vec::new();
        let mut ordered: HashSet<String> = HashSet::new();
        let mut note = |r: &RegRef, used: &mut HashSet<u32>| match r {
            RegRef::Num(k) => {
                used.insert(*k);
            }
            RegRef::Named(n) => {
                if !number.contains_key(n) && ordered.insert(n.clone()) {
                    order.push(n.clone());
                }
            }
        };
        for i in &code {
            let extra: Vec<&RegRef> = match &i.x {
                X::List(l) => l.iter().collect(),
                X::Site { args, rets, .. } => args.iter().chain(rets).collect(),
                _ => Vec::new(),
            };
            for r in i.regs.iter().chain(extra) {
                note(r, &mut used);
            }
        }
        let mut next = 0u32;
        for n in order {
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            names.insert(next, n.clone());
            number.insert(n, next);
        }
        if let Some(&top) = used.iter().max() {
            if top as usize >= nregs {
                let msg = format!(
                    "the code uses {} registers; the header says {nregs}",
                    top as usize + 1
                );
                self.error(head.span, msg);
                return None;
            }
        }
        let num = |r: &RegRef| match r {
            RegRef::Num(k) => *k,
            RegRef::Named(n) => number.get(n).copied().unwrap_or(0),
        };
        let mut types = Types::new(nregs);
        for (i, (_, t)) in head.params.iter().enumerate() {
            types.fix(i as u32, *t);
        }
        for (k, (_, t)) in consts.iter().enumerate() {
            types.fix((np + k) as u32, *t);
        }
        // Every instruction's operand types.
        for i in &code {
            let mut group = Vec::new();
            for (slot, kind) in i.op.reg_operands().enumerate() {
                let Some(r) = i.regs.get(slot) else { continue };
                match kind {
                    Kind::Def(t) | Kind::Use(t) | Kind::InOut(t) => match t.fixed() {
                        Some(t) => types.fix(num(r), t),
                        None => group.push(num(r)),
                    },
                    _ => {}
                }
            }
            types.union(&group);
            match &i.x {
                X::Site { func, args, rets } => {
                    let Some(Some(callee)) = self.headers.get(*func as usize) else {
                        continue;
                    };
                    for (a, (_, t)) in args.iter().zip(&callee.params) {
                        types.fix(num(a), *t);
                    }
                    match (&callee.ret, i.op) {
                        (RetType::Many(ts), Op::CallN) => {
                            for (r, t) in rets.iter().zip(ts) {
                                types.fix(num(r), *t);
                            }
                        }
                        (r, Op::Call) => {
                            if let (Some(t), Some(d)) = (r.carrier(), i.regs.first()) {
                                types.fix(num(d), t);
                            }
                        }
                        _ => {
                            for r in rets {
                                types.fix(num(r), Type::F64);
                            }
                        }
                    }
                }
                X::List(l) => {
                    if let RetType::Many(ts) = &head.ret {
                        for (r, t) in l.iter().zip(ts) {
                            types.fix(num(r), *t);
                        }
                    }
                }
                _ => {}
            }
            if i.op == Op::Ret {
                if let (Some(t), Some(r)) = (head.ret.carrier(), i.regs.first()) {
                    types.fix(num(r), t);
                }
            }
        }
        let mut reg_types = types.finish();
        for (i, (_, t)) in head.params.iter().enumerate() {
            reg_types[i] = *t;
        }
        for (k, (_, t)) in consts.iter().enumerate() {
            reg_types[np + k] = *t;
        }
        let mut sites = Vec::new();
        let mut tables = Vec::new();
        let mut lists = Vec::new();
        let mut out = Vec::with_capacity(code.len());
        for i in &code {
            let mut words = [0u32; 5];
            for (slot, r) in i.regs.iter().enumerate().take(5) {
                words[slot] = num(r);
            }
            let n = i.regs.len();
            let x = match &i.x {
                X::None => Instr::pack_x(&words[..n.min(5)]),
                X::Word(w) => *w,
                X::Table(t) => {
                    tables.push(t.clone());
                    tables.len() as u32 - 1
                }
                X::List(l) => {
                    lists.push(l.iter().map(|r| num(r) as Reg).collect());
                    lists.len() as u32 - 1
                }
                X::Site { func, args, rets } => {
                    sites.push(CallSite {
                        func: FuncId(*func),
                        args: args.iter().map(|r| num(r) as Reg).collect(),
                        rets: rets.iter().map(|r| num(r) as Reg).collect(),
                    });
                    sites.len() as u32 - 1
                }
            };
            let reg = |k: usize| if k < n { words[k] as Reg } else { 0 };
            out.push(Instr::new(i.op, reg(0), reg(1), reg(2), x));
        }
        let mut reg_names = vec![String::new(); nregs];
        for (r, n) in names {
            if let Some(slot) = reg_names.get_mut(r as usize) {
                *slot = n;
            }
        }
        Some((
            Function {
                name: head.name.clone(),
                param_types: head.params.iter().map(|(_, t)| *t).collect(),
                ret: head.ret.clone(),
                reg_types,
                consts: consts.iter().map(|(b, _)| *b).collect(),
                code: out,
                sites,
                tables,
                lists,
                blocks,
                locs,
                reg_names,
            },
            spans,
        ))
    }

    /// `0012  mnemonic operands` at pc `pc`.
    fn instr(&mut self, t: &str, pc: usize, span: Span) -> Option<PInstr> {
        let (pc_text, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
        if pc_text.parse::<usize>().ok() != Some(pc) {
            self.error(
                span,
                format!("expected instruction {pc:04}, found `{pc_text}`"),
            );
            return None;
        }
        let rest = rest.trim_start();
        let (m, ops) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let Some(&op) = Op::ALL.iter().find(|o| o.mnemonic() == m) else {
            self.error(span, format!("unknown opcode `{m}`"));
            return None;
        };
        let mut pieces = split_top(ops.trim()).into_iter();
        let step = matches!(op.branch(), Some(b) if b.fused == Fused::StepI);
        let mut regs = Vec::new();
        let mut x = X::None;
        let mut kinds = op.operands().iter().enumerate();
        let bad = |me: &mut Self, what: &str| {
            me.error(span, format!("`{m}`: expected {what}"));
            None
        };
        while let Some((k, kind)) = kinds.next() {
            if step && k == 0 {
                // `%i += s` or `%i -= k` (a constant step of `-k`).
                let Some(p) = pieces.next() else {
                    return bad(self, "`%counter += step`");
                };
                let parsed = if let Some((c, s)) = p.split_once(" += ") {
                    self.reg(c.trim()).zip(self.reg(s.trim()))
                } else if let Some((c, s)) = p.split_once(" -= ") {
                    self.reg(c.trim()).zip(self.reg(&format!("-{}", s.trim())))
                } else {
                    None
                };
                let Some((c, s)) = parsed else {
                    return bad(self, "`%counter += step`");
                };
                regs.push(c);
                regs.push(s);
                kinds.next();
                continue;
            }
            let Some(p) = pieces.next() else {
                return bad(self, "more operands");
            };
            match kind {
                Kind::Def(_) | Kind::Use(_) | Kind::InOut(_) => match self.reg(p) {
                    Some(r) => regs.push(r),
                    None => return bad(self, &format!("a register, found `{p}`")),
                },
                Kind::Target => match p.strip_prefix("->").and_then(pc_of) {
                    Some(t) => x = X::Word(t),
                    None => return bad(self, &format!("`-> block (pc)`, found `{p}`")),
                },
                Kind::Imm => match p.parse::<u32>() {
                    Ok(w) => x = X::Word(w),
                    Err(_) => return bad(self, &format!("an immediate, found `{p}`")),
                },
                Kind::Table => {
                    let inner = p.strip_prefix('[').and_then(|p| p.strip_suffix(']'));
                    let entries: Option<Vec<u32>> = inner.and_then(|i| {
                        split_top(i)
                            .into_iter()
                            .map(|e| pc_of(e.rsplit(':').next().unwrap_or(e)))
                            .collect::<Option<Vec<u32>>>()
                    });
                    match entries {
                        Some(e) => x = X::Table(e),
                        None => return bad(self, &format!("`[block: pc, ...]`, found `{p}`")),
                    }
                }
                Kind::List => match self.regs(p) {
                    Some(l) => x = X::List(l),
                    None => return bad(self, &format!("`(registers)`, found `{p}`")),
                },
                Kind::Site => match self.site(p) {
                    Some(s) => x = s,
                    None => return bad(self, &format!("`@callee(args)`, found `{p}`")),
                },
            }
        }
        if let Some(p) = pieces.next() {
            return bad(self, &format!("no more operands, found `{p}`"));
        }
        Some(PInstr { op, regs, x })
    }

    /// `@g(%a, %b)`, `@g(%a) += (%d.a)` or `@g(%a) -> (%y, %d.y)`.
    fn site(&self, p: &str) -> Option<X> {
        let p = p.strip_prefix('@')?;
        let open = p.find('(')?;
        let name = &p[..open];
        let func = *self.by_name.get(name)?;
        let rest = &p[open..];
        let close = rest.find(')')?;
        let args = self.regs(&rest[..=close])?;
        let tail = rest[close + 1..].trim();
        let rets = if tail.is_empty() {
            Vec::new()
        } else {
            let list = tail
                .strip_prefix("+=")
                .or_else(|| tail.strip_prefix("->"))?;
            self.regs(list)?
        };
        Some(X::Site { func, args, rets })
    }
}

/// A union-find of registers that must have one type.
struct Types {
    parent: Vec<u32>,
    ty: Vec<Option<Type>>,
}

impl Types {
    fn new(n: usize) -> Types {
        Types {
            parent: (0..n as u32).collect(),
            ty: vec![None; n],
        }
    }

    fn find(&mut self, mut v: u32) -> u32 {
        while let Some(&p) = self.parent.get(v as usize) {
            if p == v {
                break;
            }
            // Path halving: chains of copies stay short.
            let gp = self.parent[p as usize];
            self.parent[v as usize] = gp;
            v = gp;
        }
        v
    }

    fn fix(&mut self, v: u32, t: Type) {
        let r = self.find(v) as usize;
        if let Some(slot) = self.ty.get_mut(r) {
            *slot = slot.or(Some(t));
        }
    }

    fn union(&mut self, vs: &[u32]) {
        let Some(&first) = vs.first() else { return };
        let root = self.find(first);
        for &v in &vs[1..] {
            let r = self.find(v);
            if r != root && (r as usize) < self.parent.len() {
                self.parent[r as usize] = root;
                let t = self.ty[r as usize];
                let slot = &mut self.ty[root as usize];
                *slot = slot.or(t);
            }
        }
    }

    fn finish(mut self) -> Vec<Type> {
        (0..self.parent.len() as u32)
            .map(|v| {
                let r = self.find(v) as usize;
                self.ty[r].unwrap_or(Type::F64)
            })
            .collect()
    }
}
