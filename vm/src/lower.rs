//! SSA IR to register bytecode.
//!
//! * Every IR value gets its own register: parameters first (parameter `i`
//!   in register `i`), then constants (loaded from `consts` on frame entry),
//!   then everything else in value order, then scratch registers for
//!   breaking copy cycles. This needs no SSA: reverse functions from the AD
//!   stage write their accumulators many times and lower the same way.
//! * Phi coalescing: a value a phi receives shares the phi's register, so
//!   that edge's copy disappears, where that is safe: by syntactic rules
//!   for the common case (`coalesce`: read only by the phi, its block
//!   ending in `jmp`), then by liveness (`coalesce_live`: no two values of
//!   the merged classes live at once; a phi feeding a phi, a value also
//!   read by the branch after it). Only single-definition values take
//!   part, so reverse code's accumulators keep their own registers.
//! * Phis become parallel copies on the edge actually taken: `jmp B` emits
//!   `B`'s copies for this edge before the jump; `br c, T, E` jumps to an
//!   edge-local copy sequence for whichever side has copies. Copies are
//!   sequentialised so that cycles (the swap `a <- b, b <- a`) go through a
//!   scratch register.
//! * Blocks are laid out in IR order; a jump to the next block is omitted,
//!   and a `jmp` to a small join that does not follow becomes a copy of it
//!   (see `Lowerer::block`). A copy, and a block that no jump reaches
//!   (found by a first pass; see `lower_function`), continue the
//!   straight-line run before them, so the peepholes below see across
//!   their start.
//! * Fusion: a `br` on a comparison computed by the block's last
//!   instruction becomes one compare-and-branch (`jmp.if.<cc>.i`,
//!   `jmp.if.<cc>.f`, `jmp.ifnot.<cc>.f`: one opcode per condition); a `jmp`
//!   to a block that only compares and branches (a loop header) is threaded
//!   into the same; and a counter step `add.i %c, %c, s` or
//!   `sub.i %c, %c, k` (`k` a constant: it steps by the constant `-k`, see
//!   `negated_steps`) emitted just before an integer compare-and-branch on
//!   `%c` joins it as `jmp.step.if.<cc>.i` (see `Lowerer::take_step`), so a
//!   counted loop ends in one instruction.
//! * Fused math: a `sin` and a `cos` of the same register, one right after
//!   the other, become one `sincos` (one call to the C library's `sincos`
//!   in the interpreter), unless the first writes the register the second
//!   reads (see `Lowerer::fuse`). The AD stage's forward code writes
//!   such pairs (the pullback of one needs the other).
//! * Multiply-add: `mul.f %p, %a, %b; add.f %acc, %acc, %p`, with the
//!   `add.f` the product's only reader, becomes `add.mul.f %acc, %a, %b` (a
//!   dot product's step in one dispatch), also with block-id and comms
//!   pushes between the two (see `Lowerer::mul_add`).
//! * Fused products (derived code): a checked `comms.push %a` right before
//!   `mul.f %d, %a, %b` becomes `mul.push %d, %a, %b`, and `acc.mul.pop %s,
//!   %g` right before `mul.f %d, %g, %c` becomes `acc.mul.pop.mul` (see
//!   `Lowerer::fuse`): a product in a differentiated loop costs one
//!   dispatch in each direction, as in the primal.
//! * Batched reservation: a block's instructions are cut at every `call`,
//!   `call.acc` and `blk.push` (a callee pushes too, and growing the block
//!   stack may give back the comms stack's spare capacity); a stretch with
//!   `n >= 2` `comms.push`es has its first become `comms.reserve %v, n`
//!   (room for all `n`, then that push) and the others unchecked
//!   `comms.push.r`s, so the capacity is checked once, not per push (see
//!   `reservations`; the verifier's check 9 proves the result).

use crate::bits;
use crate::bytecode::{BlockMark, CallSite, Function, Instr, Program, Reg};
use crate::ir::{self, BlockId, Loc, Term, ValueId};
use crate::op::{Cond, Fused, Op, Operand};
use crate::types::Type;
use std::fmt;

/// Why a function could not be lowered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowerError {
    /// The frame would need more registers than a `u16` can name.
    TooManyRegisters { func: String, needed: usize },
    /// A phi has no incoming value for an edge that reaches its block.
    MissingPhiEdge { func: String, block: String },
    /// A `blk.pop` targets a block with phis (edge copies need a unique edge).
    PhiOnDispatchEdge { func: String, block: String },
    /// An instruction's operands do not fit its opcode.
    BadInstruction {
        func: String,
        block: String,
        detail: String,
    },
    /// More instructions than a `u32` jump target can name.
    TooMuchCode { func: String },
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::TooManyRegisters { func, needed } => {
                write!(
                    f,
                    "@{func} needs {needed} registers; a frame holds at most 65535"
                )
            }
            LowerError::MissingPhiEdge { func, block } => {
                write!(
                    f,
                    "@{func}: a phi of block {block} has no value for one of its incoming edges"
                )
            }
            LowerError::PhiOnDispatchEdge { func, block } => {
                write!(f, "@{func}: blk.pop targets block {block}, which has phis")
            }
            LowerError::BadInstruction {
                func,
                block,
                detail,
            } => {
                write!(f, "@{func}, block {block}: {detail}")
            }
            LowerError::TooMuchCode { func } => write!(f, "@{func} is too large"),
        }
    }
}

impl std::error::Error for LowerError {}

/// Lower every function of a module (same ids). The module is checked
/// first with [`check_module`].
pub fn lower_module(m: &ir::Module) -> Result<Program, LowerError> {
    check_module(m)?;
    let mut p = Program::new();
    for f in &m.funcs {
        p.push(lower_function(f)?);
    }
    Ok(p)
}

/// How a conditional branch tests its condition.
#[derive(Clone, Copy)]
enum Test {
    Reg(Reg),
    Fused(Fused, Cond, Reg, Reg),
}

/// Where a jump must be patched to.
enum Fixup {
    Block(BlockId),
    Pc(usize),
}

struct Lowerer<'f> {
    f: &'f ir::Function,
    reg: Vec<Reg>,
    reg_types: Vec<Type>,
    reg_names: Vec<String>,
    scratch: Vec<(Type, Reg)>,
    code: Vec<Instr>,
    locs: Vec<Loc>,
    fixups: Vec<(usize, Fixup)>,
    sites: Vec<CallSite>,
    tables: Vec<Vec<u32>>,
    table_blocks: Vec<Vec<BlockId>>,
    lists: Vec<Vec<Reg>>,
    /// How often each value is read.
    uses: &'f [u32],
    /// Where the code of the block being lowered starts.
    block_start: usize,
    /// Per block: whether a jump or jump table may reach it (all blocks
    /// in the first pass; see `lower_function`). One that none reaches
    /// continues the straight-line run before it.
    reached: &'f [bool],
    /// A mark per stretch of code of one block, in code order.
    marks: Vec<BlockMark>,
    /// What is left of [`COPY_BUDGET`] while blocks are being copied.
    budget: usize,
    /// How many blocks go to each block (the entry block one more, for
    /// the function's entry).
    preds: Vec<usize>,
    /// `(register of constant k, register of constant -k)` for the
    /// constant steps of `sub.i` (see `negated_steps`).
    neg_steps: Vec<(Reg, Reg)>,
}

/// Where the negation of a step constant is: an i64 constant of the
/// function, or extra constant `j` of the frame.
#[derive(Clone, Copy)]
enum Neg {
    Value(usize),
    Extra(usize),
}

/// The interpreter's step-and-branch only adds (one instruction less per
/// loop iteration than choosing between adding and subtracting), so a
/// counter counted down by a constant, `sub.i %c, %c, k`, fuses into a
/// step that adds `-k`. For every `sub.i` by an i64 constant `k` (other
/// than `i64::MIN`) that may be such a step, its result going to a phi or
/// an i64 comparison (a counter; `n - 1` passed to a call is not), this
/// finds the function's constant `-k`, or makes it an extra constant
/// register (the bits listed in the second result). First result: `(value
/// of k, where -k is)`.
fn negated_steps(f: &ir::Function, consts: &[usize]) -> (Vec<(usize, Neg)>, Vec<u64>) {
    let mut negs: Vec<(usize, Neg)> = Vec::new();
    let mut extra: Vec<u64> = Vec::new();
    let int_const = |v: usize| match &f.values.get(v) {
        Some(d) if d.ty == Type::I64 => d.konst.map(|b| b as i64),
        _ => None,
    };
    let mut counts = vec![false; f.values.len()];
    for b in &f.blocks {
        for (_, v) in b.phis.iter().flat_map(|phi| &phi.incoming) {
            if let Some(c) = counts.get_mut(v.index()) {
                *c = true;
            }
        }
        for inst in &b.insts {
            if matches!(
                inst.op,
                Op::LtI | Op::LeI | Op::GtI | Op::GeI | Op::EqI | Op::NeI
            ) {
                for v in &inst.args {
                    if let Some(c) = counts.get_mut(v.index()) {
                        *c = true;
                    }
                }
            }
        }
    }
    for inst in f.blocks.iter().flat_map(|b| &b.insts) {
        let (Op::SubI, [_, k]) = (inst.op, inst.args.as_slice()) else {
            continue;
        };
        if inst
            .dst
            .is_none_or(|d| counts.get(d.index()) != Some(&true))
        {
            continue;
        }
        let k = k.index();
        let Some(kv) = int_const(k) else { continue };
        if kv == i64::MIN || negs.iter().any(|(seen, _)| *seen == k) || !consts.contains(&k) {
            continue;
        }
        let want = kv.wrapping_neg();
        let neg = match consts.iter().find(|&&c| int_const(c) == Some(want)) {
            Some(&c) => Neg::Value(c),
            None => match extra.iter().position(|&b| b as i64 == want) {
                Some(j) => Neg::Extra(j),
                None => {
                    extra.push(want as u64);
                    Neg::Extra(extra.len() - 1)
                }
            },
        };
        negs.push((k, neg));
    }
    (negs, extra)
}

/// Lower one function.
///
/// Errors: more registers than a frame can name, more code than a jump
/// target can name, a phi without a value for one of its block's incoming
/// edges, a `blk.pop` edge into a block with phis, and malformed IR (value
/// or block ids out of range, instructions without their operands,
/// terminators among the instructions, no blocks). Anything else, e.g.
/// operand types, is left to the verifier.
pub fn lower_function(f: &ir::Function) -> Result<Function, LowerError> {
    check_ids(f)?;
    // Two passes. The first finds the blocks that some jump or jump table
    // reaches; in the second, a block that none reaches (it is entered
    // only by falling through from the block before it: the join of an
    // if/else whose other arm jumps to a copy of it) continues that
    // block's straight-line run, so the look-back peepholes see across its
    // start, as for copies (see `Lowerer::block`). Which blocks jumps reach
    // depends on terminators, threading and copies, not on the peepholes,
    // so the second pass reaches the same ones.
    // Registers (which values share one) are the same in both.
    let n = f.values.len();
    let mut is_param = vec![false; n];
    for p in &f.params {
        if p.index() < n {
            is_param[p.index()] = true;
        }
    }
    let uses = f.use_counts();
    let defs = definitions(f);
    let mut alias = coalesce(f, &is_param, &uses, &defs);
    coalesce_live(f, &is_param, &defs, &mut alias);
    let shared = Shared {
        is_param: &is_param,
        uses: &uses,
        alias: &alias,
    };
    let (_, reached) = lower_pass(f, &shared, &vec![true; f.blocks.len()])?;
    let (out, again) = lower_pass(f, &shared, &reached)?;
    debug_assert_eq!(reached, again);
    Ok(out)
}

/// What both passes of [`lower_function`] use: which values are
/// parameters, how often each is read, and which register each shares
/// (phi coalescing: [`coalesce`], then [`coalesce_live`]).
struct Shared<'a> {
    is_param: &'a [bool],
    uses: &'a [u32],
    alias: &'a [usize],
}

/// One lowering of `f` (whose ids `check_ids` accepted), with `reached`
/// as [`Lowerer::reached`]; the function, and the blocks its jumps and
/// jump tables reach.
fn lower_pass(
    f: &ir::Function,
    shared: &Shared,
    reached: &[bool],
) -> Result<(Function, Vec<bool>), LowerError> {
    let n = f.values.len();
    let mut order: Vec<usize> = f.params.iter().map(|p| p.index()).collect();
    let Shared {
        is_param,
        uses,
        alias,
    } = *shared;
    let consts: Vec<usize> = (0..n)
        .filter(|&i| f.values[i].konst.is_some() && !is_param[i])
        .collect();
    order.extend(&consts);
    // Negated step constants (`order` entries `n + j`), placed among the
    // constants: see `negated_steps`.
    let (negs, extra) = negated_steps(f, &consts);
    order.extend((0..extra.len()).map(|j| n + j));
    // Values coalesced into a phi share its register.
    order.extend((0..n).filter(|&i| !is_param[i] && f.values[i].konst.is_none() && alias[i] == i));
    if order.len() > u16::MAX as usize - 8 {
        return Err(LowerError::TooManyRegisters {
            func: f.name.clone(),
            needed: order.len(),
        });
    }
    let mut reg = vec![0 as Reg; n];
    let mut extra_reg = vec![0 as Reg; extra.len()];
    let mut reg_types = Vec::with_capacity(order.len());
    let mut reg_names = Vec::with_capacity(order.len());
    for (r, &v) in order.iter().enumerate() {
        if v < n {
            reg[v] = r as Reg;
            reg_types.push(f.values[v].ty);
            reg_names.push(f.values[v].name.clone().unwrap_or_default());
        } else {
            extra_reg[v - n] = r as Reg;
            reg_types.push(Type::I64);
            reg_names.push(String::new());
        }
    }
    for v in 0..n {
        if alias[v] != v {
            reg[v] = reg[alias[v]];
        }
    }
    let neg_steps = negs
        .iter()
        .map(|&(k, neg)| {
            let to = match neg {
                Neg::Value(v) => reg[v],
                Neg::Extra(j) => extra_reg[j],
            };
            (reg[k], to)
        })
        .collect();
    let mut l = Lowerer {
        f,
        reg,
        reg_types,
        reg_names,
        scratch: Vec::new(),
        code: Vec::new(),
        locs: Vec::new(),
        fixups: Vec::new(),
        sites: Vec::new(),
        tables: Vec::new(),
        table_blocks: Vec::new(),
        lists: Vec::new(),
        uses,
        block_start: 0,
        reached,
        marks: Vec::with_capacity(f.blocks.len()),
        budget: COPY_BUDGET,
        preds: f
            .predecessors()
            .iter()
            .enumerate()
            .map(|(i, p)| p.len() + usize::from(i == 0))
            .collect(),
        neg_steps,
    };
    let mut starts = vec![0u32; f.blocks.len()];
    for (bi, start) in starts.iter_mut().enumerate() {
        *start = l.code.len() as u32;
        let here = BlockId(bi as u32);
        l.block(here, Some(BlockId(here.0 + 1)), false)?;
    }
    if l.code.len() >= u32::MAX as usize {
        return Err(LowerError::TooMuchCode {
            func: f.name.clone(),
        });
    }
    let mut reached = vec![false; f.blocks.len()];
    let fixed = l.fixups.iter().filter_map(|(_, fix)| match fix {
        Fixup::Block(b) => Some(b),
        Fixup::Pc(_) => None,
    });
    for b in fixed.chain(l.table_blocks.iter().flatten()) {
        reached[b.index()] = true;
    }
    for (pc, fix) in std::mem::take(&mut l.fixups) {
        let target = match fix {
            Fixup::Block(b) => starts[b.index()],
            Fixup::Pc(p) => p as u32,
        };
        l.code[pc].x = target;
    }
    for (t, bs) in l.tables.iter_mut().zip(&l.table_blocks) {
        *t = bs.iter().map(|b| starts[b.index()]).collect();
    }
    let consts_bits = consts
        .iter()
        .map(|&i| f.values[i].konst.unwrap_or(0))
        .chain(extra)
        .collect();
    let out = Function {
        name: f.name.clone(),
        param_types: f.params.iter().map(|p| f.ty(*p)).collect(),
        ret: f.ret.clone(),
        reg_types: l.reg_types,
        consts: consts_bits,
        code: l.code,
        sites: l.sites,
        tables: l.tables,
        lists: l.lists,
        blocks: l.marks,
        locs: l.locs,
        reg_names: l.reg_names,
    };
    Ok((out, reached))
}

/// Reject references to values and blocks that do not exist (so that the
/// rest of the lowering can index freely), terminators among the
/// instructions, and functions without blocks.
/// Check that `m` is well formed enough for the passes that take a whole
/// module ([`crate::inline`], [`lower_module`]) to work on it without
/// panicking: every function passes the checks of [`lower_function`] on
/// ids (values, blocks, no terminators among the instructions, at least
/// one block), every call names a function of `m` and passes it as many
/// arguments as it has parameters. Types and everything else are the
/// verifier's.
pub fn check_module(m: &ir::Module) -> Result<(), LowerError> {
    if u32::try_from(m.funcs.len()).is_err() {
        return Err(LowerError::BadInstruction {
            func: String::new(),
            block: "-".into(),
            detail: "more functions than a function id can name".into(),
        });
    }
    m.funcs.iter().try_for_each(|f| check_function(m, f))
}

/// The checks of [`check_module`] on one function `f` whose calls name
/// functions of `m`.
pub fn check_function(m: &ir::Module, f: &ir::Function) -> Result<(), LowerError> {
    check_ids(f)?;
    for b in &f.blocks {
        for inst in &b.insts {
            let bad = |detail: String| LowerError::BadInstruction {
                func: f.name.clone(),
                block: b.name.clone(),
                detail,
            };
            let callee = match (inst.callee, inst.op) {
                (None, Op::Call | Op::CallAcc) => {
                    return Err(bad(format!("{} names no callee", inst.op.mnemonic())))
                }
                (None, _) => continue,
                (Some(g), _) => g,
            };
            let Some(g) = m.funcs.get(callee.index()) else {
                return Err(bad(format!(
                    "{} names no function: {callee} (the module has {})",
                    inst.op.mnemonic(),
                    m.funcs.len()
                )));
            };
            if matches!(inst.op, Op::Call | Op::CallAcc) && inst.args.len() != g.params.len() {
                return Err(bad(format!(
                    "{} passes {} arguments to @{}, which takes {}",
                    inst.op.mnemonic(),
                    inst.args.len(),
                    g.name,
                    g.params.len()
                )));
            }
        }
    }
    Ok(())
}

fn check_ids(f: &ir::Function) -> Result<(), LowerError> {
    let nv = f.values.len();
    let nb = f.blocks.len();
    let bad = |block: &str, detail: String| LowerError::BadInstruction {
        func: f.name.clone(),
        block: block.to_string(),
        detail,
    };
    if nb == 0 {
        return Err(bad("-", "the function has no blocks".into()));
    }
    if let Some(p) = f.params.iter().find(|p| p.index() >= nv) {
        return Err(bad("-", format!("parameter {p} is not a value")));
    }
    for b in &f.blocks {
        let value = |v: &ValueId| -> Result<(), LowerError> {
            if v.index() < nv {
                Ok(())
            } else {
                Err(bad(&b.name, format!("no value {v}")))
            }
        };
        let block = |t: &BlockId| -> Result<(), LowerError> {
            if t.index() < nb {
                Ok(())
            } else {
                Err(bad(&b.name, format!("no block {t}")))
            }
        };
        for phi in &b.phis {
            value(&phi.dst)?;
            for (pred, v) in &phi.incoming {
                block(pred)?;
                value(v)?;
            }
        }
        for inst in &b.insts {
            if inst.op.is_terminator() || inst.op.is_cond_jump() {
                return Err(bad(
                    &b.name,
                    format!("{} is a terminator, not an instruction", inst.op.mnemonic()),
                ));
            }
            if inst.op.is_lowering_only() {
                return Err(bad(
                    &b.name,
                    format!(
                        "{} is made by the lowering, not an IR instruction",
                        inst.op.mnemonic()
                    ),
                ));
            }
            inst.dst
                .iter()
                .chain(&inst.args)
                .chain(&inst.accs)
                .try_for_each(value)?;
        }
        match &b.term {
            Term::Jmp(t) => block(t)?,
            Term::Br { cond, then_, else_ } => {
                value(cond)?;
                block(then_)?;
                block(else_)?;
            }
            Term::Ret(v) => value(v)?,
            Term::RetN(vs) => vs.iter().try_for_each(value)?,
            Term::BlkPop(ts) => ts.iter().try_for_each(block)?,
        }
    }
    Ok(())
}

/// How an instruction of a block is lowered with respect to batched
/// reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Push {
    /// As it is (every instruction but the `comms.push`es of a batch).
    Plain,
    /// The first `comms.push` of a batch of `n`: `comms.reserve n`, which
    /// makes room for the batch and does this push.
    Reserve(u32),
    /// A later `comms.push` of a batch: `comms.push.r`.
    Reserved,
}

/// The fewest `comms.push`es of a stretch that get one `comms.reserve`
/// instead of a capacity check each (one alone keeps its check: a
/// reservation would only add an instruction).
const MIN_BATCH: usize = 2;

/// Batched reservation for one block's instructions: cut them at every
/// `call`, `call.acc` and `blk.push` (where the verifier's budget of
/// reserved pushes drops to 0: a callee pushes too, and growing the block
/// stack may shrink the comms stack's capacity), and make each stretch's
/// `comms.push`es one batch if there are at least [`MIN_BATCH`] of them.
/// One entry per instruction.
fn reservations(insts: &[ir::Inst]) -> Vec<Push> {
    let mut plan = vec![Push::Plain; insts.len()];
    let cuts = |i: &ir::Inst| matches!(i.op, Op::Call | Op::CallAcc | Op::CallN | Op::BlkPush);
    let mut start = 0;
    while start < insts.len() {
        let end = insts[start..]
            .iter()
            .position(cuts)
            .map_or(insts.len(), |k| start + k);
        let pushes: Vec<usize> = (start..end)
            .filter(|&k| insts[k].op == Op::CommsPush)
            .collect();
        if let [first, rest @ ..] = pushes.as_slice() {
            if pushes.len() >= MIN_BATCH {
                // A block has far fewer than 2^32 instructions (the
                // lowering rejects more code than a `u32` can address).
                let n = u32::try_from(pushes.len()).unwrap_or(u32::MAX);
                plan[*first] = Push::Reserve(n);
                for &k in rest {
                    plan[k] = Push::Reserved;
                }
            }
        }
        start = end + 1;
    }
    plan
}

/// Phi coalescing: the value `v` a phi `p` receives on edge `P -> B` may
/// live in `p`'s register, which turns that edge's copy into nothing, when
/// writing `v` there cannot clobber a `p` that is still needed:
///
/// * `v` is defined by an instruction in `P` and used only by this phi;
/// * `P` ends in `jmp B`, so after `v`'s definition control reaches `B`,
///   where `p` is redefined anyway;
/// * no instruction of `P` after `v`'s definition reads `p`, and no other
///   phi of `B` reads `p` on this edge (the swap `a <- b, b <- a + b`).
///
/// Values coalesced into the same phi come from different predecessors and
/// are each read only by the phi, so their live ranges do not overlap. Only
/// values (and phis) with exactly one definition qualify, so this never
/// touches the accumulators of non-SSA (reverse) code.
fn coalesce(f: &ir::Function, is_param: &[bool], uses: &[u32], (def, ndefs): &Defs) -> Vec<usize> {
    let n = f.values.len();
    let mut alias: Vec<usize> = (0..n).collect();
    for (bi, b) in f.blocks.iter().enumerate() {
        for phi in &b.phis {
            let p = phi.dst;
            for (pred, v) in &phi.incoming {
                let vi = v.index();
                if is_param[vi]
                    || f.values[vi].konst.is_some()
                    || uses[vi] != 1
                    || ndefs[vi] != 1
                    || ndefs[p.index()] != 1
                    || alias[vi] != vi
                {
                    continue;
                }
                let Some((db, Some(di))) = def[vi] else {
                    continue;
                };
                let pb = &f.blocks[pred.index()];
                if db != pred.index() || pb.term != Term::Jmp(BlockId(bi as u32)) {
                    continue;
                }
                let read_later = pb.insts[di + 1..]
                    .iter()
                    .any(|i| i.args.contains(&p) || i.accs.contains(&p));
                let read_by_phi = b
                    .phis
                    .iter()
                    .any(|q| q.dst != p && q.incoming.iter().any(|(l, w)| l == pred && *w == p));
                if !read_later && !read_by_phi && f.values[vi].ty == f.values[p.index()].ty {
                    alias[vi] = p.index();
                }
            }
        }
    }
    alias
}

/// The registers of a call site that the call reads: `call.acc` adds to
/// its accumulators (reads and writes them); `call.n` only writes its
/// result registers.
fn reads_accs(inst: &ir::Inst) -> &[ValueId] {
    if inst.op == Op::CallN {
        &[]
    } else {
        &inst.accs
    }
}

/// The result registers a `call.n` writes (none for other instructions:
/// `call.acc`'s accumulators are read too, see [`reads_accs`]).
fn writes_accs(inst: &ir::Inst) -> &[ValueId] {
    if inst.op == Op::CallN {
        &inst.accs
    } else {
        &[]
    }
}

/// Where a value is defined: its block and instruction, `None` for a phi
/// (defined at its block's start).
type Def = (usize, Option<usize>);

/// [`definitions`]: each value's definition and its number of definitions.
type Defs = (Vec<Option<Def>>, Vec<u32>);

/// Where each value is defined (its last definition; single-definition
/// values are the ones that matter) and how many definitions each value
/// has (phis, instruction results, in-out operands and `call.acc`
/// accumulators).
fn definitions(f: &ir::Function) -> Defs {
    let n = f.values.len();
    let mut def = vec![None; n];
    let mut ndefs = vec![0u32; n];
    for (bi, b) in f.blocks.iter().enumerate() {
        for phi in &b.phis {
            def[phi.dst.index()] = Some((bi, None));
            ndefs[phi.dst.index()] += 1;
        }
        for (ii, inst) in b.insts.iter().enumerate() {
            if let Some(d) = inst.dst {
                def[d.index()] = Some((bi, Some(ii)));
                ndefs[d.index()] += 1;
            }
            for a in &inst.accs {
                ndefs[a.index()] += 1;
                if inst.op == Op::CallN {
                    // `call.n` writes its result registers outright.
                    def[a.index()] = Some((bi, Some(ii)));
                }
            }
            if !inst.op.operands().contains(&Operand::Site) {
                let reads = inst
                    .op
                    .operands()
                    .iter()
                    .filter(|o| matches!(o, Operand::Use(_) | Operand::InOut(_)));
                for (o, a) in reads.zip(&inst.args) {
                    if matches!(o, Operand::InOut(_)) {
                        ndefs[a.index()] += 1;
                    }
                }
            }
        }
    }
    (def, ndefs)
}

/// Liveness bit sets are skipped above this many words (blocks times
/// values / 64; four sets of 2 MiB at the limit, e.g. 1 000 blocks of a
/// function of 16 000 values): a function that large keeps the coalescing
/// of [`coalesce`] only.
const LIVENESS_WORDS: usize = 1 << 18;

/// Phi coalescing by liveness, after [`coalesce`]: an incoming value `v`
/// of a phi `p` (and everything already sharing `v`'s register) shares
/// `p`'s register when no two of the values involved are ever live at
/// once. This catches what the syntactic rules of [`coalesce`] miss: a
/// value also read after its definition (the `%i2` a bottom-tested loop
/// compares), a predecessor ending in a branch, and a phi feeding a phi
/// (the join of an if/else inside a loop, carried to the loop header),
/// whose copy would otherwise run on every iteration.
///
/// Values interfere when one is live right after the other's definition
/// (for SSA values, live ranges that overlap always overlap there). A
/// phi's definition is at its block's start, after the edge's copies; its
/// operands are read at the end of the predecessor. Those edge copies are
/// parallel (see [`Lowerer::copies`]), so an operand may share a register
/// with a phi of the same edge. Two phis of one block never share.
///
/// Only single-definition values that are neither parameters nor
/// constants take part, with equal types, so reverse code's accumulators
/// are untouched. The liveness is only sound for strict SSA (every use
/// after its definition on every path): if any such value is live on
/// entry to the function, nothing is coalesced here.
fn coalesce_live(f: &ir::Function, is_param: &[bool], (def, ndefs): &Defs, alias: &mut [usize]) {
    let n = f.values.len();
    let nb = f.blocks.len();
    let words = bits::words(n);
    // Reverse code has no phis: nothing to do.
    if n == 0
        || nb.saturating_mul(words) > LIVENESS_WORDS
        || f.blocks.iter().all(|b| b.phis.is_empty())
    {
        return;
    }
    let candidate = |v: usize| !is_param[v] && f.values[v].konst.is_none() && ndefs[v] == 1;
    let (bit, set_bit) = (bits::has, bits::insert);

    // gen: read before any definition in the block; kill: defined in it
    // (phis included); phi_out: read by a successor's phi on this edge.
    let mut gen = vec![0u64; nb * words];
    let mut kill = vec![0u64; nb * words];
    let mut phi_out = vec![0u64; nb * words];
    for (bi, b) in f.blocks.iter().enumerate() {
        let (g, k) = (bi * words, bi * words + words);
        for phi in &b.phis {
            set_bit(&mut kill[g..k], phi.dst.index());
            for (pred, v) in &phi.incoming {
                let pi = pred.index();
                if pi < nb {
                    set_bit(&mut phi_out[pi * words..pi * words + words], v.index());
                }
            }
        }
        for inst in &b.insts {
            for u in inst.args.iter().chain(reads_accs(inst)) {
                if !bit(&kill[g..k], u.index()) {
                    set_bit(&mut gen[g..k], u.index());
                }
            }
            for d in inst.dst.iter().chain(writes_accs(inst)) {
                set_bit(&mut kill[g..k], d.index());
            }
        }
        for u in b.term.uses() {
            if !bit(&kill[g..k], u.index()) {
                set_bit(&mut gen[g..k], u.index());
            }
        }
    }
    // live_in excludes the block's own phis; live_out includes the phi
    // operands read on the way out.
    let mut live_in = gen.clone();
    let mut live_out = vec![0u64; nb * words];
    let succs: Vec<Vec<BlockId>> = f.blocks.iter().map(|b| b.term.successors()).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for bi in (0..nb).rev() {
            let g = bi * words;
            for w in 0..words {
                let mut out = phi_out[g + w];
                for s in &succs[bi] {
                    if s.index() < nb {
                        out |= live_in[s.index() * words + w];
                    }
                }
                let inn = gen[g + w] | (out & !kill[g + w]);
                if out != live_out[g + w] || inn != live_in[g + w] {
                    live_out[g + w] = out;
                    live_in[g + w] = inn;
                    changed = true;
                }
            }
        }
    }
    // Strict SSA: no candidate is live on entry.
    if (0..n).any(|v| candidate(v) && bit(&live_in[..words], v)) {
        return;
    }
    // The last reader of each value in each block that reads it: its
    // instruction's index, the terminator counting as `insts.len()`.
    let mut last_use: hashbrown::HashMap<(usize, usize), usize> = hashbrown::HashMap::new();
    for (bi, b) in f.blocks.iter().enumerate() {
        for (ii, inst) in b.insts.iter().enumerate() {
            for u in inst.args.iter().chain(reads_accs(inst)) {
                last_use.insert((u.index(), bi), ii);
            }
        }
        for u in b.term.uses() {
            last_use.insert((u.index(), bi), b.insts.len());
        }
    }
    // Is `x` live right after `y`'s definition?
    let live_at_def = |x: usize, y: usize| -> bool {
        let Some((b, at)) = def[y] else { return true };
        let (g, k) = (b * words, b * words + words);
        let Some(ii) = at else {
            // y is a phi of block b.
            return matches!(def[x], Some((bx, None)) if bx == b) || bit(&live_in[g..k], x);
        };
        // Defined later in the same block: not yet live.
        if let Some((bx, Some(jx))) = def[x] {
            if bx == b && jx > ii {
                return false;
            }
        }
        bit(&live_out[g..k], x) || last_use.get(&(x, b)).is_some_and(|&j| j > ii)
    };
    let interfere = |x: usize, y: usize| live_at_def(x, y) || live_at_def(y, x);

    // Classes: root -> members, starting from `coalesce`'s.
    let mut members: Vec<Vec<usize>> = (0..n).map(|v| vec![v]).collect();
    for v in 0..n {
        if alias[v] != v {
            members[v].clear();
            members[alias[v]].push(v);
        }
    }
    for b in &f.blocks {
        for phi in &b.phis {
            let p = phi.dst.index();
            if !candidate(p) {
                continue;
            }
            for (_, v) in &phi.incoming {
                let v = v.index();
                if !candidate(v) || f.values[v].ty != f.values[p].ty {
                    continue;
                }
                let (rp, rv) = (alias[p], alias[v]);
                if rp == rv || members[rp].len() * members[rv].len() > 4096 {
                    continue;
                }
                let clash = members[rv]
                    .iter()
                    .any(|&x| members[rp].iter().any(|&y| interfere(x, y)));
                if clash {
                    continue;
                }
                let moved = std::mem::take(&mut members[rv]);
                for &x in &moved {
                    alias[x] = rp;
                }
                members[rp].extend(moved);
            }
        }
    }
}

/// How much code may be copied in place of one `jmp` (see
/// [`Lowerer::block`]): a block costs its instructions plus one for its
/// terminator.
const COPY_BUDGET: usize = 5;

impl Lowerer<'_> {
    /// Lower block `here` at the end of the code, with its mark; `next` is
    /// the block whose code follows (fall-through), if any.
    ///
    /// Tail duplication: a `jmp` to a small block that does not follow
    /// (the join of an if/else, from the arm laid out first; the exit of a
    /// reverse loop body) is replaced by a copy of that block's code and
    /// terminator, which saves a dispatch on that path. The copy's own
    /// `jmp`s may copy further while the budget lasts ([`COPY_BUDGET`] in
    /// all: every copy spends some, so cycles of small blocks end). Each
    /// copy gets a mark with its block's name, so a trap in it names the
    /// same block as in the original; jumps and tables still go to the
    /// original. Nothing but that fall-through reaches a copy (`copy`), so
    /// it continues the straight-line run of the block that jumped to it:
    /// the look-back peepholes (`fuse`, `mul_add`, `take_step`) see across
    /// its start, so a counter stepped at the end of a loop body fuses with
    /// the copied header's compare-and-branch. So does a block that no jump
    /// reaches (`reached`, from the first pass), entered only by falling
    /// through. The peepholes only fuse with arithmetic, loads and pushes,
    /// never with a branch, so a run that holds the previous block's
    /// conditional jump is safe too.
    fn block(
        &mut self,
        here: BlockId,
        next: Option<BlockId>,
        copy: bool,
    ) -> Result<(), LowerError> {
        let b = &self.f.blocks[here.index()];
        if !copy && self.reached.get(here.index()).copied().unwrap_or(true) {
            self.block_start = self.code.len();
        }
        self.marks.push(BlockMark {
            name: b.name.clone(),
            start: self.code.len() as u32,
        });
        for (inst, push) in b.insts.iter().zip(reservations(&b.insts)) {
            self.inst(inst, &b.name)?;
            if let Some(last) = self.code.last_mut() {
                match push {
                    Push::Plain => {}
                    Push::Reserve(n) => {
                        last.op = Op::CommsReserve;
                        last.x = n;
                    }
                    Push::Reserved => last.op = Op::CommsPushR,
                }
            }
        }
        self.term(here, b, next)
    }

    /// Go to `then_` if `test` holds, else to `else_`, with no copies on
    /// either edge: one conditional jump, falling through to `next` if
    /// that is one of the two; else the conditional jump goes to the
    /// earlier block (a loop's body, from a copy of its latch) and a `jmp`
    /// to the other.
    fn two_way(&mut self, test: Test, then_: BlockId, else_: BlockId, next: BlockId, loc: Loc) {
        if then_ == next || (else_ != next && else_.0 < then_.0) {
            self.cond_jump(test, true, Fixup::Block(else_), loc);
            if then_ != next {
                self.jump(Op::Jmp, 0, Fixup::Block(then_), loc);
            }
        } else {
            self.cond_jump(test, false, Fixup::Block(then_), loc);
            if else_ != next {
                self.jump(Op::Jmp, 0, Fixup::Block(else_), loc);
            }
        }
    }

    /// What copying block `to` in place of a `jmp` from `here` costs, if
    /// it may: it is a join (a block with one predecessor would only move,
    /// leaving its original dead), not `here` itself, fits the budget left,
    /// and has no call (a copy would need its own call site) and no
    /// `blk.pop`.
    fn copy_cost(&self, here: BlockId, to: BlockId) -> Option<usize> {
        let b = &self.f.blocks[to.index()];
        let cost = b.insts.len() + 1;
        let plain = !b
            .insts
            .iter()
            .any(|i| matches!(i.op, Op::Call | Op::CallAcc | Op::CallN))
            && !matches!(b.term, Term::BlkPop(_));
        let join = self.preds.get(to.index()).is_some_and(|&n| n >= 2);
        (join && to != here && cost <= self.budget && plain).then_some(cost)
    }

    fn r(&self, v: ValueId) -> Reg {
        self.reg.get(v.index()).copied().unwrap_or(0)
    }

    fn emit(&mut self, i: Instr, loc: Loc) -> usize {
        self.code.push(i);
        self.locs.push(loc);
        self.code.len() - 1
    }

    fn bad(&self, block: &str, detail: String) -> LowerError {
        LowerError::BadInstruction {
            func: self.f.name.clone(),
            block: block.to_string(),
            detail,
        }
    }

    fn inst(&mut self, inst: &ir::Inst, block: &str) -> Result<(), LowerError> {
        let mut regs: Vec<u32> = Vec::with_capacity(4);
        let mut args = inst.args.iter();
        let mut x = 0u32;
        for operand in inst.op.operands() {
            match operand {
                Operand::Def(_) => {
                    let d = inst.dst.ok_or_else(|| {
                        self.bad(block, format!("{} needs a destination", inst.op.mnemonic()))
                    })?;
                    regs.push(self.r(d) as u32);
                }
                Operand::Use(_) | Operand::InOut(_) => {
                    let a = args.next().ok_or_else(|| {
                        self.bad(
                            block,
                            format!("{} is missing an operand", inst.op.mnemonic()),
                        )
                    })?;
                    regs.push(self.r(*a) as u32);
                }
                Operand::Site => {
                    let callee = inst
                        .callee
                        .ok_or_else(|| self.bad(block, "call without a callee".into()))?;
                    // For calls, `args` are the call arguments, not operands.
                    self.sites.push(CallSite {
                        func: callee,
                        args: inst.args.iter().map(|a| self.r(*a)).collect(),
                        rets: inst.accs.iter().map(|a| self.r(*a)).collect(),
                    });
                    x = self.sites.len() as u32 - 1;
                }
                Operand::Imm => x = inst.imm,
                Operand::Target | Operand::Table | Operand::List => {
                    return Err(self.bad(block, format!("{} is a terminator", inst.op.mnemonic())));
                }
            }
        }
        let reg = |i: usize| regs.get(i).copied().unwrap_or(0);
        if regs.len() == 4 {
            x = reg(3);
        }
        let i = Instr::new(inst.op, reg(0) as Reg, reg(1) as Reg, reg(2) as Reg, x);
        if self.mul_add(i, inst) {
            return Ok(());
        }
        if let Some(fused) = self.fuse(i, inst) {
            // In place of the block's last instruction, whose location it
            // keeps (for a push or pop, the half that can trap) except for
            // an indexed load, where it is the `aget` that can.
            if let Some(last) = self.code.last_mut() {
                *last = fused;
            }
            if fused.op == Op::AGetAdd {
                if let Some(loc) = self.locs.last_mut() {
                    *loc = inst.loc;
                }
            }
            return Ok(());
        }
        self.emit(i, inst.loc);
        Ok(())
    }

    /// Fusion with the block's last emitted instruction, for `i` about to
    /// be emitted right after it; `None` where nothing fuses.
    ///
    /// * Products: `comms.push %a; mul.f %d, %a, %b` becomes `mul.push %d,
    ///   %a, %b`, and `acc.mul.pop %s, %g; mul.f %d, %g, %c` becomes
    ///   `acc.mul.pop.mul %s, %g, %d, %c` (when `%s` is none of `%g`, `%d`,
    ///   `%c`). Only with the shared register as the first factor, so that
    ///   the product is computed exactly as written. A reserved push
    ///   (`comms.reserve`, `comms.push.r`) is left alone.
    /// * Fused math: `sin %s, %x; cos %c, %x` (in either order) becomes
    ///   `sincos %s, %c, %x` if that computes the same as the two in turn:
    ///   the first must not write `%x` (`sincos` reads it before writing),
    ///   and the two must write different registers.
    /// * Indexed load: `add.i %k, %a, %b; aget %d, %arr, %k` becomes
    ///   `aget.add %d, %arr, %a, %b` when the `aget` is the only reader of
    ///   `%k` (IR `inst`'s index argument): `%k`'s register is its own (a
    ///   value shares a phi's register only if the phi is its one reader),
    ///   so no one misses the write left out.
    fn fuse(&self, i: Instr, inst: &ir::Inst) -> Option<Instr> {
        if self.code.len() <= self.block_start {
            return None;
        }
        let last = *self.code.last()?;
        match (last.op, i.op) {
            (Op::AddI, Op::AGet)
                if last.r0 == i.r2
                    && inst
                        .args
                        .get(1)
                        .is_some_and(|k| self.uses.get(k.index()) == Some(&1)) =>
            {
                return Some(Instr::new(
                    Op::AGetAdd,
                    i.r0,
                    i.r1,
                    last.r1,
                    u32::from(last.r2),
                ));
            }
            (Op::Sin, Op::Cos) | (Op::Cos, Op::Sin)
                if last.r1 == i.r1 && last.r0 != last.r1 && last.r0 != i.r0 =>
            {
                let (s, c) = if last.op == Op::Sin {
                    (last.r0, i.r0)
                } else {
                    (i.r0, last.r0)
                };
                return Some(Instr::new(Op::SinCos, s, c, i.r1, 0));
            }
            (_, Op::MulF | Op::MulZ) => {}
            _ => return None,
        }
        match last.op {
            Op::CommsPush if i.op == Op::MulF && last.r0 == i.r1 => {
                Some(Instr::new(Op::MulPush, i.r0, i.r1, i.r2, 0))
            }
            // The accumulator must be none of the other registers (the
            // interpreter reads every operand before writing). Both
            // products are strong-zero ones.
            Op::AccMulPop
                if i.op == Op::MulZ
                    && last.r1 == i.r1
                    && last.r0 != i.r1
                    && last.r0 != i.r2
                    && last.r0 != i.r0 =>
            {
                Some(Instr::new(
                    Op::AccMulPopMul,
                    last.r0,
                    last.r1,
                    i.r0,
                    u32::from(i.r2),
                ))
            }
            _ => None,
        }
    }

    /// Multiply-add, for `i` = `add.f %acc, %acc, %p` about to be emitted:
    /// if `%p` is written by a `mul.f %p, %a, %b` earlier in the block's
    /// straight-line run and the `add.f` is `%p`'s only reader (a dot
    /// product's step), that `mul.f` becomes `add.mul.f %acc, %a, %b` and
    /// `i` is not emitted (`true`). `add.mul.f` computes `%acc + %a * %b`
    /// with two roundings, as the pair does (Rust does not contract it to
    /// a fused multiply-add), and reads every operand before it writes;
    /// only the form with `%acc` first, the order `add.mul.f` adds in.
    ///
    /// Between the two may stand `blk.push`es and comms pushes that read
    /// neither `%acc` nor `%p` (the derived forward code records a block
    /// id or a value there): they touch no other register, so the sum
    /// done before them is not seen by them, and nothing moves (no jump
    /// target or pending jump changes). `%acc` is not `%p`: the product's
    /// one reader is this `add.f`, so its register is its own.
    fn mul_add(&mut self, i: Instr, inst: &ir::Inst) -> bool {
        let (acc, p) = (i.r1, i.r2);
        let once = inst
            .args
            .get(1)
            .is_some_and(|v| self.uses.get(v.index()) == Some(&1));
        if i.op != Op::AddF || i.r0 != acc || p == acc || !once {
            return false;
        }
        for at in (self.block_start..self.code.len()).rev() {
            let c = self.code[at];
            match c.op {
                Op::MulF if c.r0 == p => {
                    self.code[at] = Instr::new(Op::MulAddF, acc, c.r1, c.r2, 0);
                    return true;
                }
                Op::BlkPush => {}
                Op::CommsPush | Op::CommsPushR | Op::CommsReserve if c.r0 != acc && c.r0 != p => {}
                _ => return false,
            }
        }
        false
    }

    /// The parallel copies of the edge `from -> to`, as (dst, src) registers.
    fn edge_copies(&self, from: BlockId, to: BlockId) -> Result<Vec<(Reg, Reg)>, LowerError> {
        let target = &self.f.blocks[to.index()];
        let mut copies = Vec::with_capacity(target.phis.len());
        for phi in &target.phis {
            let v = phi
                .incoming
                .iter()
                .find(|(l, _)| *l == from)
                .map(|(_, v)| *v)
                .ok_or_else(|| LowerError::MissingPhiEdge {
                    func: self.f.name.clone(),
                    block: target.name.clone(),
                })?;
            copies.push((self.r(phi.dst), self.r(v)));
        }
        Ok(copies)
    }

    fn scratch(&mut self, ty: Type) -> Reg {
        if let Some((_, r)) = self.scratch.iter().find(|(t, _)| *t == ty) {
            return *r;
        }
        let r = self.reg_types.len() as Reg;
        self.reg_types.push(ty);
        self.reg_names.push(String::new());
        self.scratch.push((ty, r));
        r
    }

    /// Emit a parallel copy as a sequence of moves.
    fn copies(&mut self, mut pending: Vec<(Reg, Reg)>, loc: Loc) {
        pending.retain(|(d, s)| d != s);
        while !pending.is_empty() {
            // A copy whose destination no other copy still reads can go now.
            if let Some(i) = (0..pending.len()).find(|&i| {
                let d = pending[i].0;
                !pending.iter().any(|(_, s)| *s == d)
            }) {
                let (d, s) = pending.remove(i);
                self.emit(Instr::new(Op::Mov, d, s, 0, 0), loc);
                continue;
            }
            // Only cycles remain: save one destination's old value and let
            // its readers read the saved copy.
            let d = pending[0].0;
            let t = self.scratch(self.reg_types[d as usize]);
            self.emit(Instr::new(Op::Mov, t, d, 0, 0), loc);
            for (_, s) in &mut pending {
                if *s == d {
                    *s = t;
                }
            }
        }
    }

    /// How a `br` on `cond` at the end of block `b` tests it: as a fused
    /// compare-and-branch when `cond` is computed by the block's last
    /// instruction, a comparison, and used nowhere else (the comparison,
    /// already emitted, is taken back), else as a bool register.
    fn branch_test(&mut self, b: &ir::Block, cond: ValueId) -> Test {
        let fusable = b.insts.last().filter(|last| {
            last.dst == Some(cond)
                && self.uses.get(cond.index()) == Some(&1)
                && last.args.len() == 2
        });
        if let Some(last) = fusable {
            if let Some((cc, fused)) = Cond::of(last.op) {
                let (ra, rb) = (self.r(last.args[0]), self.r(last.args[1]));
                self.code.pop();
                self.locs.pop();
                return Test::Fused(fused, cc, ra, rb);
            }
        }
        Test::Reg(self.r(cond))
    }

    /// If block `to` is nothing but a `blk.pop`, its targets.
    fn pop_only(&self, to: BlockId) -> Option<Vec<BlockId>> {
        let b = &self.f.blocks[to.index()];
        match &b.term {
            Term::BlkPop(targets) if b.insts.is_empty() && b.phis.is_empty() => {
                Some(targets.clone())
            }
            _ => None,
        }
    }

    /// If block `to` is a single comparison feeding its `br`, with no copies
    /// on either outgoing edge, its fused test and targets.
    fn threadable(&self, to: BlockId) -> Result<Option<(Test, BlockId, BlockId)>, LowerError> {
        let b = &self.f.blocks[to.index()];
        let Term::Br { cond, then_, else_ } = &b.term else {
            return Ok(None);
        };
        let [cmp] = b.insts.as_slice() else {
            return Ok(None);
        };
        if cmp.dst != Some(*cond) || self.uses.get(cond.index()) != Some(&1) || cmp.args.len() != 2
        {
            return Ok(None);
        }
        let Some((cc, fused)) = Cond::of(cmp.op) else {
            return Ok(None);
        };
        let trivial = |c: Vec<(Reg, Reg)>| c.iter().all(|(d, s)| d == s);
        if !trivial(self.edge_copies(to, *then_)?) || !trivial(self.edge_copies(to, *else_)?) {
            return Ok(None);
        }
        let test = Test::Fused(fused, cc, self.r(cmp.args[0]), self.r(cmp.args[1]));
        Ok(Some((test, *then_, *else_)))
    }

    /// Jump to `fix` when the test holds (or, with `negate`, fails).
    fn cond_jump(&mut self, test: Test, negate: bool, fix: Fixup, loc: Loc) {
        let ins = match test {
            Test::Reg(c) => Instr::new(if negate { Op::JmpIfNot } else { Op::JmpIf }, c, 0, 0, 0),
            Test::Fused(fused, cc, a, b) => match self.take_step(fused, cc, a, b, negate) {
                Some(i) => i,
                None => Instr::new(Op::fused_branch(fused, cc, negate), a, b, 0, 0),
            },
        };
        let pc = self.emit(ins, loc);
        self.fixups.push((pc, fix));
    }

    /// Step-and-branch fusion, for the compare-and-branch `a cc b` about to
    /// be emitted: if the block's last emitted instruction is a counter
    /// step `add.i %c, %c, %s` or `sub.i %c, %c, %s` and the comparison
    /// reads `%c`, take the step back and return the step-and-branch
    /// `jmp.step.if.<cc>.i %c, %s, other` (condition swapped if `%c` is the
    /// right operand, inverted if `negate`; target left to the caller). `blk.push`es after the step, which touch no
    /// register, stay where they are and so run before it.
    ///
    /// Decided on registers, not SSA facts, so it also fires on the
    /// counters of reverse code, which are written many times.
    fn take_step(&mut self, fused: Fused, cc: Cond, a: Reg, b: Reg, negate: bool) -> Option<Instr> {
        if fused != Fused::CmpI {
            return None;
        }
        let mut at = self.code.len();
        while at > self.block_start && self.code[at - 1].op == Op::BlkPush {
            at -= 1;
        }
        if at == self.block_start {
            return None;
        }
        let step = self.code[at - 1];
        // The step register: as is for `add.i`; for `sub.i` by a constant,
        // the constant's negation (anything else stays unfused).
        let by = match step.op {
            Op::AddI => step.r2,
            Op::SubI => self
                .neg_steps
                .iter()
                .find(|(k, _)| *k == step.r2)
                .map(|(_, neg)| *neg)?,
            _ => return None,
        };
        let c = step.r0;
        if step.r1 != c {
            return None;
        }
        let (cc, other) = if a == c {
            (cc, b)
        } else if b == c {
            (cc.swapped(), a)
        } else {
            return None;
        };
        // The instructions after the step move up by one: nothing may jump
        // to them (nothing jumps into the middle of a block) or be one of
        // the jumps still to patch (the block has emitted none).
        if self.fixups.last().is_some_and(|(pc, _)| *pc >= at - 1) {
            return None;
        }
        self.code.remove(at - 1);
        self.locs.remove(at - 1);
        // The mark of a block that continues the run after the step (a
        // copy, or a block no jump reaches; see `block`) moves up with its
        // instructions. Such a block's start is no jump target.
        for m in self.marks.iter_mut().rev() {
            if (m.start as usize) < at {
                break;
            }
            m.start -= 1;
        }
        let op = Op::fused_branch(Fused::StepI, cc, negate);
        Some(Instr::new(op, c, by, other, 0))
    }

    fn jump(&mut self, op: Op, cond: Reg, fix: Fixup, loc: Loc) {
        let pc = self.emit(Instr::new(op, cond, 0, 0, 0), loc);
        self.fixups.push((pc, fix));
    }

    fn term(
        &mut self,
        here: BlockId,
        b: &ir::Block,
        next: Option<BlockId>,
    ) -> Result<(), LowerError> {
        let loc = b.term_loc;
        let fall = next;
        // A block id no block has, where nothing falls through.
        let next = next.unwrap_or(BlockId(u32::MAX));
        match &b.term {
            Term::Jmp(to) => {
                let copies = self.edge_copies(here, *to)?;
                self.copies(copies, loc);
                if *to == next {
                    return Ok(());
                }
                if let Some(targets) = self.pop_only(*to) {
                    // `to` only pops a block id and dispatches (a reverse
                    // loop header): dispatch here.
                    self.tables.push(Vec::new());
                    self.table_blocks.push(targets);
                    let x = self.tables.len() as u32 - 1;
                    self.emit(Instr::new(Op::BlkPop, 0, 0, 0, x), loc);
                } else if let Some((test, then_, else_)) = self.threadable(*to)? {
                    // Jump threading: `to` only tests and branches (a loop
                    // header), so test here and go straight to its targets;
                    // a loop then costs one jump per iteration, not two.
                    self.two_way(test, then_, else_, next, loc);
                } else if let Some(cost) = self.copy_cost(here, *to) {
                    // The copy is followed by what follows `here`.
                    self.budget -= cost;
                    let copied = self.block(*to, fall, true);
                    self.budget += cost;
                    copied?;
                } else {
                    self.jump(Op::Jmp, 0, Fixup::Block(*to), loc);
                }
            }
            Term::Br { cond, then_, else_ } => {
                let ct = self.edge_copies(here, *then_)?;
                let ce = self.edge_copies(here, *else_)?;
                let ct_trivial = ct.iter().all(|(d, s)| d == s);
                let ce_trivial = ce.iter().all(|(d, s)| d == s);
                let test = self.branch_test(b, *cond);
                if ct_trivial && ce_trivial {
                    self.two_way(test, *then_, *else_, next, loc);
                } else if ct_trivial {
                    // jump-if -> then; [else copies]; jmp else
                    self.cond_jump(test, false, Fixup::Block(*then_), loc);
                    self.copies(ce, loc);
                    if *else_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*else_), loc);
                    }
                } else if ce_trivial {
                    self.cond_jump(test, true, Fixup::Block(*else_), loc);
                    self.copies(ct, loc);
                    if *then_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*then_), loc);
                    }
                } else {
                    let skip = self.code.len();
                    self.cond_jump(test, true, Fixup::Pc(0), loc);
                    self.copies(ct, loc);
                    self.jump(Op::Jmp, 0, Fixup::Block(*then_), loc);
                    let else_pc = self.code.len();
                    if let Some(f) = self.fixups.iter_mut().find(|(pc, _)| *pc == skip) {
                        f.1 = Fixup::Pc(else_pc);
                    }
                    self.copies(ce, loc);
                    if *else_ != next {
                        self.jump(Op::Jmp, 0, Fixup::Block(*else_), loc);
                    }
                }
            }
            Term::Ret(v) => {
                let r = self.r(*v);
                self.emit(Instr::new(Op::Ret, r, 0, 0, 0), loc);
            }
            Term::RetN(vs) => {
                let list = vs.iter().map(|v| self.r(*v)).collect();
                self.lists.push(list);
                let x = self.lists.len() as u32 - 1;
                self.emit(Instr::new(Op::RetN, 0, 0, 0, x), loc);
            }
            Term::BlkPop(targets) => {
                for t in targets {
                    if !self.f.blocks[t.index()].phis.is_empty() {
                        return Err(LowerError::PhiOnDispatchEdge {
                            func: self.f.name.clone(),
                            block: self.f.blocks[t.index()].name.clone(),
                        });
                    }
                }
                self.tables.push(Vec::new());
                self.table_blocks.push(targets.clone());
                let x = self.tables.len() as u32 - 1;
                self.emit(Instr::new(Op::BlkPop, 0, 0, 0, x), loc);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lowerer over an empty function with `types` as its registers.
    fn lowerer<'f>(f: &'f ir::Function, types: &[Type]) -> Lowerer<'f> {
        Lowerer {
            f,
            reg: Vec::new(),
            reg_types: types.to_vec(),
            reg_names: vec![String::new(); types.len()],
            scratch: Vec::new(),
            code: Vec::new(),
            locs: Vec::new(),
            fixups: Vec::new(),
            sites: Vec::new(),
            tables: Vec::new(),
            table_blocks: Vec::new(),
            lists: Vec::new(),
            uses: &[],
            block_start: 0,
            reached: &[],
            marks: Vec::new(),
            budget: COPY_BUDGET,
            preds: Vec::new(),
            neg_steps: Vec::new(),
        }
    }

    fn empty() -> ir::Function {
        ir::Function {
            name: "t".into(),
            params: Vec::new(),
            ret: ir::RetType::One(Type::F64),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Loc::default(),
        }
    }

    /// Run the emitted moves on `regs`.
    fn simulate(code: &[Instr], regs: &mut Vec<u64>) {
        for i in code {
            assert_eq!(i.op, Op::Mov);
            let v = regs[i.r1 as usize];
            if regs.len() <= i.r0 as usize {
                regs.resize(i.r0 as usize + 1, 0);
            }
            regs[i.r0 as usize] = v;
        }
    }

    #[test]
    fn a_swap_goes_through_one_scratch_register() {
        let f = empty();
        let mut l = lowerer(&f, &[Type::F64, Type::F64]);
        l.copies(vec![(0, 1), (1, 0)], Loc::default());
        assert_eq!(l.code.len(), 3);
        assert_eq!(l.reg_types, vec![Type::F64; 3], "one f64 scratch");
        let mut regs = vec![10, 20];
        simulate(&l.code, &mut regs);
        assert_eq!(&regs[..2], &[20, 10]);
    }

    #[test]
    fn chains_need_no_scratch_and_self_copies_vanish() {
        let f = empty();
        let mut l = lowerer(&f, &[Type::I64; 4]);
        // a <- b, b <- c, d <- d
        l.copies(vec![(0, 1), (1, 2), (3, 3)], Loc::default());
        assert_eq!(l.code.len(), 2);
        assert_eq!(l.reg_types.len(), 4, "no scratch");
        let mut regs = vec![1, 2, 3, 4];
        simulate(&l.code, &mut regs);
        assert_eq!(regs, vec![2, 3, 3, 4]);
    }

    #[test]
    fn scratch_registers_are_per_type_and_reused() {
        let f = empty();
        let mut l = lowerer(&f, &[Type::F64, Type::F64, Type::I64, Type::I64]);
        l.copies(vec![(0, 1), (1, 0), (2, 3), (3, 2)], Loc::default());
        l.copies(vec![(0, 1), (1, 0)], Loc::default());
        assert_eq!(l.reg_types.len(), 6, "one f64 and one i64 scratch");
        let mut regs = vec![1, 2, 3, 4];
        simulate(&l.code, &mut regs);
        assert_eq!(&regs[..4], &[1, 2, 4, 3]);
    }
}
