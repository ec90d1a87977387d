//! Validation of IR handed to the lowering (the library boundary): value, block
//! and function ids in range, calls with the right argument count, terminators
//! only at block ends, so that lowering cannot panic on user-built IR.

use super::*;

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

pub(super) fn check_ids(f: &ir::Function) -> Result<(), LowerError> {
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
