//! Instructions, and the look-back peepholes that fuse them with what the
//! straight-line run just emitted: compare-and-branch, `sincos`, multiply-add,
//! fused products, `aget.add`, and counter steps.

use super::*;

impl Lowerer<'_> {
    pub(super) fn inst(&mut self, inst: &ir::Inst, block: &str) -> Result<(), LowerError> {
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
        if regs.len() >= 4 {
            x = Instr::pack_x(&regs);
        }
        let i = Instr::new(inst.op, reg(0) as Reg, reg(1) as Reg, reg(2) as Reg, x);
        if self.mul_add(i, inst) || self.tangent_choice(i, inst) {
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
        if inst.op == Op::Select {
            let once = inst
                .args
                .first()
                .is_some_and(|c| self.uses.get(c.index()) == Some(&1));
            self.select_once = match self.code.last() {
                Some(last) if once => Some((self.code.len() - 1, *last)),
                _ => None,
            };
        }
        Ok(())
    }

    /// A running `max.f` (`min.f`) and its tangent, for `i` = `max.f %m,
    /// %m, %e` about to be emitted right after `gt.f %c, %e, %m; select
    /// %dm, %c, %de, %dm` (`lt.f` for `min.f`), `%c` read by the `select`
    /// only: the three become `tmax.f %dm, %m, %e, %de` (`tmin.f`), which
    /// makes the same comparison once and, where it holds, writes `%e` to
    /// `%m` and `%de` to `%dm` (`true`: nothing else to emit). The four
    /// registers must differ (the three read each before the next writes)
    /// and the three stand in one block with no jump to patch among them.
    pub(super) fn tangent_choice(&mut self, i: Instr, inst: &ir::Inst) -> bool {
        let (fused, cmp) = match i.op {
            Op::MaxF => (Op::TMaxF, Op::GtF),
            Op::MinF => (Op::TMinF, Op::LtF),
            _ => return false,
        };
        let len = self.code.len();
        if len < self.block_start + 2 || self.select_once != Some((len - 1, self.code[len - 1])) {
            return false;
        }
        let (m, e) = (i.r1, i.r2);
        let (c, s) = (self.code[len - 2], self.code[len - 1]);
        let (dm, de) = (s.r0, s.r2);
        let distinct = [m, e, dm, de]
            .iter()
            .enumerate()
            .all(|(k, a)| [m, e, dm, de][k + 1..].iter().all(|b| a != b));
        let f64s = [dm, de]
            .iter()
            .all(|r| self.reg_types.get(*r as usize) == Some(&Type::F64));
        let shape = i.r0 == m
            && c.op == cmp
            && c.r1 == e
            && c.r2 == m
            && s.op == Op::Select
            && s.r1 == c.r0
            && s.x == u32::from(dm)
            && distinct
            && f64s;
        // Nothing may jump to the `select` or the `max.f`, or be a jump
        // still to patch among them, and they are of one block.
        let moved = self.fixups.last().is_some_and(|(pc, _)| *pc >= len - 2)
            || self
                .marks
                .last()
                .is_some_and(|mk| mk.start as usize > len - 2);
        if !shape || moved {
            return false;
        }
        self.code.truncate(len - 2);
        self.locs.truncate(len - 2);
        self.select_once = None;
        self.emit(Instr::new(fused, dm, m, e, u32::from(de)), inst.loc);
        true
    }

    /// For `add.mul.z` `i` right after the load `last` (`aget` or
    /// `aget.add`): the register of the product's other factor, if the
    /// loaded value is one factor, is not the sum `i` adds to, and is read
    /// by `i` only (IR `inst`), and the other factor fits the 16 bits a
    /// fused load has for it.
    fn summed_load_factor(&self, last: Instr, i: Instr, inst: &ir::Inst) -> Option<u32> {
        let factor = last.r0 == i.r2 || u32::from(last.r0) == i.x;
        let read_once = inst
            .args
            .iter()
            .skip(1)
            .find(|c| self.r(**c) == last.r0)
            .is_some_and(|c| self.uses.get(c.index()) == Some(&1));
        if !factor || last.r0 == i.r1 || !read_once {
            return None;
        }
        let other = if last.r0 == i.r2 {
            i.x
        } else {
            u32::from(i.r2)
        };
        (other <= 0xffff).then_some(other)
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
    pub(super) fn fuse(&self, i: Instr, inst: &ir::Inst) -> Option<Instr> {
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
            // The tangent of a running product: `mul.z %p, %t, %c;
            // add.mul.z %t, %p, %a, %b`, `%p` read there only, becomes
            // `tmul.z %t, %c, %a, %b`. `%p` is none of `%a`, `%b` (its one
            // reader reads it once), so reading everything first computes
            // what the two do.
            (Op::MulZ, Op::AddMulZ)
                if i.r1 == last.r0
                    && i.r0 == last.r1
                    && last.r0 != last.r1
                    && last.r0 != i.r2
                    && last.r0 as u32 != i.x
                    && inst
                        .args
                        .first()
                        .is_some_and(|p| self.uses.get(p.index()) == Some(&1)) =>
            {
                return Some(Instr::new(Op::TMulZ, i.r0, last.r2, i.r2, i.x));
            }
            // A product's tangent `ȧ⊙b + ḃ⊙a` elsewhere: `mul.z %p, %a, %b;
            // add.mul.z %y, %p, %c, %d`, `%p` read there only, becomes
            // `tprod.z %y, %a, %b, %c, %d`. `%p` has its own register and
            // is none of `%a`, `%b`, `%c`, `%d`.
            (Op::MulZ, Op::AddMulZ)
                if i.r1 == last.r0
                    && last.r0 != last.r1
                    && last.r0 != last.r2
                    && last.r0 != i.r2
                    && last.r0 as u32 != i.x
                    && i.x <= 0xffff
                    && inst
                        .args
                        .first()
                        .is_some_and(|p| self.uses.get(p.index()) == Some(&1)) =>
            {
                return Some(Instr::new(
                    Op::TProdZ,
                    i.r0,
                    last.r1,
                    last.r2,
                    Instr::pack_x(&[0, 0, 0, u32::from(i.r2), i.x]),
                ));
            }
            // A tangent array's element summed right away: `aget %c, %T,
            // %k; add.mul.z %y, %s, %c, %d` (or `%d, %c`), `%c` read there
            // only, becomes `add.mul.aget %y, %s, %T, %k, %d`. The two are
            // adjacent, so loading when summing computes (and traps) as
            // they do, and the product `%c ⊙ %d` is the same either way
            // round. `%c`'s register is its own (its one reader is no phi).
            (Op::AGet, Op::AddMulZ) => {
                let other = self.summed_load_factor(last, i, inst)?;
                return Some(Instr::new(
                    Op::AddMulAGet,
                    i.r0,
                    i.r1,
                    last.r1,
                    Instr::pack_x(&[0, 0, 0, u32::from(last.r2), other]),
                ));
            }
            // The same with a row-major index, summing in place: `aget.add
            // %c, %T, %p, %q; add.mul.z %y, %y, %c, %d` (or `%d, %c`)
            // becomes `acc.mul.aget.add %y, %T, %p, %q, %d` (six registers
            // otherwise).
            // A value's element and its tangent's at one index: `aget %x,
            // %A, %k; aget %t, %T, %k` standing for one instruction of the
            // program (the same location: the tangent code of an `aget`)
            // becomes `aget.pair %x, %t, %A, %T, %k`. A trap in either load
            // reports that one location, as the two would. `%x` is none of
            // `%t`, `%T`, `%k`, so reading everything first computes what
            // the two do in turn.
            (Op::AGet, Op::AGet)
                if last.r2 == i.r2
                    && last.r0 != i.r0
                    && last.r0 != i.r1
                    && last.r0 != last.r2
                    && self.locs.last() == Some(&inst.loc) =>
            {
                return Some(Instr::new(
                    Op::AGetPair,
                    last.r0,
                    i.r0,
                    last.r1,
                    Instr::pack_x(&[0, 0, 0, u32::from(i.r1), u32::from(i.r2)]),
                ));
            }
            (Op::AGetAdd, Op::AddMulZ) if i.r0 == i.r1 => {
                let other = self.summed_load_factor(last, i, inst)?;
                if last.x > 0xffff {
                    return None;
                }
                return Some(Instr::new(
                    Op::AccMulAGetAdd,
                    i.r0,
                    last.r1,
                    last.r2,
                    Instr::pack_x(&[0, 0, 0, last.x, other]),
                ));
            }
            // A product of three: `mul.z %p, %a, %b; mul.z %q, %p, %c`,
            // `%p` read there only, becomes `mul.mul.z %q, %a, %b, %c`
            // (summed in place later, `acc.mul.mul`: `mul_add`). `%p` is
            // none of `%a`, `%b`, `%c` and has no other reader, so leaving
            // its write out and reading everything first computes what the
            // two do.
            (Op::MulZ, Op::MulZ)
                if i.r1 == last.r0
                    && last.r0 != last.r1
                    && last.r0 != last.r2
                    && last.r0 != i.r2
                    && inst
                        .args
                        .first()
                        .is_some_and(|p| self.uses.get(p.index()) == Some(&1)) =>
            {
                return Some(Instr::new(
                    Op::MulMulZ,
                    i.r0,
                    last.r1,
                    last.r2,
                    u32::from(i.r2),
                ));
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
    /// target or pending jump changes). So may pure register instructions
    /// (and `add.mul.f`, `add.mul.aget`) that neither read nor write `%acc` or `%p` (tangent
    /// code between a product and its sum): the sum moves up past them.
    /// `%acc` is not `%p`: the product's one reader is this `add.f`, so its
    /// register is its own.
    ///
    /// A strong-zero product (`mul.z %p, %a, %b`, tangent code) summed so
    /// becomes `acc.mul %acc, %a, %b` likewise, `%acc + (%a ⊙ %b)` rounded
    /// as by the pair.
    pub(super) fn mul_add(&mut self, i: Instr, inst: &ir::Inst) -> bool {
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
                    if at > self.block_start {
                        self.dual(at - 1);
                    }
                    return true;
                }
                Op::MulZ if c.r0 == p => {
                    self.code[at] = Instr::new(Op::AccMul, acc, c.r1, c.r2, 0);
                    self.dual(at);
                    return true;
                }
                Op::MulMulZ if c.r0 == p => {
                    self.code[at] = Instr::new(Op::AccMulMul, acc, c.r1, c.r2, c.x);
                    self.dual(at);
                    return true;
                }
                Op::BlkPush => {}
                Op::CommsPush | Op::CommsPushR | Op::CommsReserve if c.r0 != acc && c.r0 != p => {}
                op if (op.facts().pure || op == Op::MulAddF || op == Op::AddMulAGet)
                    && !touches(c, acc, p) => {}
                _ => return false,
            }
        }
        false
    }

    /// A tangent sum in place at `at` right before its value's sum in
    /// place, the last instruction emitted: `acc.mul %ṡ, %ẋ, %c; add.mul.f
    /// %s, %x, %c` becomes `add.mul.t %s, %ṡ, %x, %ẋ, %c`, and
    /// `acc.mul.mul %ṡ, %ẋ, %x, %k; add.mul.f %s, %x, %x` (a square's)
    /// becomes `add.sq.t %s, %ṡ, %x, %ẋ, %k`. `%ṡ` is none of `%s`, `%x`,
    /// `%c`, so reading everything first computes what the two do in
    /// turn. The two are of one block's stretch (no mark starts at the
    /// second) and nothing jumps to the second or is a jump still to
    /// patch, so taking the last instruction out moves nothing else; an
    /// empty stretch after it (a join's copy whose sums were both taken
    /// in) starts one earlier.
    fn dual(&mut self, at: usize) {
        let Some(last) = self.code.len().checked_sub(1) else {
            return;
        };
        if at + 1 != last || at < self.block_start {
            return;
        }
        let (t, p) = (self.code[at], self.code[last]);
        if p.op != Op::MulAddF {
            return;
        }
        let (s, x, c) = (p.r0, p.r1, p.r2);
        let (op, factor) = match t.op {
            Op::AccMul if t.r2 == c => (Op::AddMulT, u32::from(c)),
            Op::AccMulMul if x == c && t.r2 == x => (Op::AddSqT, t.x),
            _ => return,
        };
        let (ds, dx) = (t.r0, t.r1);
        if ds == s || ds == x || ds == c || factor > 0xffff {
            return;
        }
        let moved = self.fixups.last().is_some_and(|(pc, _)| *pc >= at)
            || self
                .marks
                .iter()
                .any(|m| (m.start as usize) > at && (m.start as usize) <= last);
        if moved {
            return;
        }
        self.code[at] = Instr::new(
            op,
            s,
            ds,
            x,
            Instr::pack_x(&[0, 0, 0, u32::from(dx), factor]),
        );
        self.code.pop();
        self.locs.pop();
        for m in self.marks.iter_mut().rev() {
            if (m.start as usize) <= last {
                break;
            }
            m.start -= 1;
        }
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
    pub(super) fn take_step(
        &mut self,
        fused: Fused,
        cc: Cond,
        a: Reg,
        b: Reg,
        negate: bool,
    ) -> Option<Instr> {
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
}

/// Whether instruction `c` reads or writes register `a` or `b` (any of its
/// register operands, `x` included when it holds one).
fn touches(c: Instr, a: Reg, b: Reg) -> bool {
    (0..c.op.reg_operands().count()).any(|k| {
        let r = c.reg(k);
        r == u32::from(a) || r == u32::from(b)
    })
}
