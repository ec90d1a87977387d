//! Bytecode to text (deterministic: the same function always prints the
//! same way).
//!
//! ```text
//! fn @pow(%x: f64, %n: i64) -> f64   ; 8 regs, 3 consts
//!   ; consts: r2 = 1.0, r3 = 0, r4 = 1
//! entry:
//!   0000  copy        %r, 1.0
//!   0001  copy        %k, %n
//! head:
//!   0002  jmp.if.le.i %k, 0, -> done (0005)
//! body:
//!   0003  mul.f       %r, %r, %x
//!   0004  jmp.step.if.gt.i %k -= 1, 0, -> body (0003)
//! done:
//!   0005  ret         %r
//! ```
//!
//! * A header with the signature, the frame size and the constant count,
//!   then the constant registers and their values.
//! * Block labels at their start pcs (several empty blocks may share one).
//! * One line per instruction: pc, mnemonic, operands in table order.
//!   Registers print as `%name` where the IR named them, else `r<N>`;
//!   constant registers print as their value; jump targets as
//!   `-> block (pc)`; call sites as `@callee(%a, %b)` (with `+= (...)` for
//!   the accumulators of `call.acc`); `blk.pop` tables as
//!   `[block: pc, ...]` in block-id order; `ret.n` lists as `(%a, %b)`.
//!   A fused step-and-branch prints its step as `%i += 1` (`-=` when it
//!   subtracts): `jmp.step.if.lt.i %i += 1, %n, -> body (0004)` adds 1 to
//!   `%i`, then jumps if `%i < %n`.
//!
//! [`instr_in_program`] formats one instruction for trap messages.

use crate::bytecode::{Function, Program};
use crate::ir::RetType;
use crate::op::{Fused, Op, Operand};
use crate::types::Type;
use std::fmt::Write;

/// Every function of a program.
pub fn program(p: &Program) -> String {
    let mut out = String::new();
    for f in p.funcs() {
        out.push_str(&function_in(f, Some(p)));
        out.push('\n');
    }
    out
}

/// One function (callees print as `fn<N>`).
pub fn function(f: &Function) -> String {
    function_in(f, None)
}

/// One function; callee names are looked up in `p`.
pub fn function_in(f: &Function, p: Option<&Program>) -> String {
    let mut out = String::new();
    let params: Vec<String> = f
        .param_types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{}: {t}", reg_name(f, i as u32)))
        .collect();
    let ret = match &f.ret {
        RetType::One(t) => format!(" -> {t}"),
        RetType::Unit => String::new(),
        RetType::Many(ts) => {
            let ts: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
            format!(" -> ({})", ts.join(", "))
        }
    };
    let _ = writeln!(
        out,
        "fn @{}({}){ret}   ; {} regs, {} consts",
        f.name,
        params.join(", "),
        f.reg_types.len(),
        f.consts.len()
    );
    if !f.consts.is_empty() {
        let np = f.param_types.len() as u32;
        let consts: Vec<String> = (0..f.consts.len() as u32)
            .map(|i| format!("{} = {}", reg_name(f, np + i), operand_text(f, np + i)))
            .collect();
        let _ = writeln!(out, "  ; consts: {}", consts.join(", "));
    }
    let mut next_block = 0;
    for pc in 0..f.code.len() {
        // The last block starting here is the one whose code this is; those
        // before it are empty (their jump fell through), so not listed.
        let mut label = None;
        while next_block < f.blocks.len() && f.blocks[next_block].start as usize <= pc {
            if f.blocks[next_block].start as usize == pc {
                label = Some(&f.blocks[next_block].name);
            }
            next_block += 1;
        }
        if let Some(name) = label {
            // Code inlined from another function ([`crate::inline`]),
            // named if `p` has it.
            match f.locs.get(pc).and_then(|l| l.inlined_from()) {
                Some(g) => match p.and_then(|p| p.get(g)) {
                    Some(func) => writeln!(out, "{name}:   ; inlined from @{}", func.name),
                    None => writeln!(out, "{name}:   ; inlined from {g}"),
                },
                None => writeln!(out, "{name}:"),
            }
            .ok();
        }
        let _ = writeln!(out, "  {pc:04}  {}", instr_in(f, pc, p, true));
    }
    out
}

/// One instruction, for trap messages: `div.i %q, %a, %b` (as in the
/// listing, without the column padding; `?` for a pc out of range).
/// Callees print as `fn<N>`; see [`instr_in_program`].
pub fn instr(f: &Function, pc: usize) -> String {
    instr_in(f, pc, None, false)
}

/// Like [`instr`], with callee names looked up in `p`: `call %r,
/// @deep(%m)`. What trap messages use.
pub fn instr_in_program(f: &Function, pc: usize, p: &Program) -> String {
    instr_in(f, pc, Some(p), false)
}

fn instr_in(f: &Function, pc: usize, p: Option<&Program>, pad: bool) -> String {
    let Some(ins) = f.code.get(pc) else {
        return String::from("?");
    };
    let mut ops: Vec<String> = Vec::new();
    let mut slot = 0;
    let is_step = matches!(ins.op.branch(), Some(b) if b.fused == Fused::StepI);
    for operand in ins.op.operands() {
        match operand {
            Operand::Def(_) | Operand::Use(_) | Operand::InOut(_) => {
                let text = operand_text(f, ins.reg(slot));
                if is_step && slot == 1 {
                    // `%i += 1`: the step joins the counter; a negative
                    // constant step (a counter counted down) reads `-= 1`.
                    let step = match text.strip_prefix('-') {
                        Some(k) if is_const(f, ins.reg(slot)) => format!("-= {k}"),
                        _ => format!("+= {text}"),
                    };
                    if let Some(counter) = ops.pop() {
                        ops.push(format!("{counter} {step}"));
                    }
                } else {
                    ops.push(text);
                }
                slot += 1;
            }
            Operand::Target => ops.push(target_text(f, ins.x)),
            Operand::Imm => ops.push(ins.x.to_string()),
            Operand::Table => {
                let entries: Vec<String> = f
                    .tables
                    .get(ins.x as usize)
                    .map(|t| {
                        t.iter()
                            .map(|pc| match block_at(f, *pc) {
                                Some(name) => format!("{name}: {pc:04}"),
                                None => format!("{pc:04}"),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                ops.push(format!("[{}]", entries.join(", ")));
            }
            Operand::List => {
                let regs: Vec<String> = f
                    .lists
                    .get(ins.x as usize)
                    .map(|l| l.iter().map(|r| operand_text(f, *r as u32)).collect())
                    .unwrap_or_default();
                ops.push(format!("({})", regs.join(", ")));
            }
            Operand::Site => {
                let Some(site) = f.sites.get(ins.x as usize) else {
                    ops.push("<bad site>".into());
                    continue;
                };
                let name = p
                    .and_then(|p| p.get(site.func))
                    .map(|g| format!("@{}", g.name))
                    .unwrap_or_else(|| format!("{}", site.func));
                let args: Vec<String> = site
                    .args
                    .iter()
                    .map(|r| operand_text(f, *r as u32))
                    .collect();
                let mut text = format!("{name}({})", args.join(", "));
                if !site.rets.is_empty() {
                    let rets: Vec<String> = site
                        .rets
                        .iter()
                        .map(|r| operand_text(f, *r as u32))
                        .collect();
                    let arrow = if ins.op == Op::CallN { "->" } else { "+=" };
                    let _ = write!(text, " {arrow} ({})", rets.join(", "));
                }
                ops.push(text);
            }
        }
    }
    let mnemonic = ins.op.mnemonic();
    if ops.is_empty() {
        mnemonic.to_string()
    } else if pad {
        format!("{mnemonic:<11} {}", ops.join(", "))
    } else {
        format!("{mnemonic} {}", ops.join(", "))
    }
}

/// The block starting at `pc`. Empty blocks share their start with the
/// next block: name the last, the one whose code is there.
fn block_at(f: &Function, pc: u32) -> Option<&str> {
    f.blocks
        .iter()
        .rev()
        .find(|b| b.start == pc)
        .map(|b| b.name.as_str())
}

fn target_text(f: &Function, pc: u32) -> String {
    match block_at(f, pc) {
        Some(name) => format!("-> {name} ({pc:04})"),
        None => format!("-> {pc:04}"),
    }
}

fn operand_text(f: &Function, r: u32) -> String {
    let np = f.param_types.len() as u32;
    let nc = f.consts.len() as u32;
    if r >= np && r < np + nc {
        let bits = f.consts[(r - np) as usize];
        return match f.reg_types.get(r as usize) {
            Some(Type::F64) => format!("{:?}", f64::from_bits(bits)),
            Some(Type::I64) => (bits as i64).to_string(),
            Some(Type::Bool) => (bits != 0).to_string(),
            _ => format!("r{r}"),
        };
    }
    reg_name(f, r)
}

/// Whether register `r` is one of `f`'s constants.
fn is_const(f: &Function, r: u32) -> bool {
    let np = f.param_types.len() as u32;
    r >= np && r < np + f.consts.len() as u32
}

fn reg_name(f: &Function, r: u32) -> String {
    match f.reg_names.get(r as usize) {
        Some(n) if !n.is_empty() => format!("%{n}"),
        _ => format!("r{r}"),
    }
}
