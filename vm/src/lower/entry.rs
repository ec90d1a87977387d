//! The lowering of one function: its two passes (the first finds the blocks a
//! jump reaches), the registers of values (phi coalescing shared), and the
//! code, marks and side tables it builds.

use super::*;

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
pub(super) struct Shared<'a> {
    is_param: &'a [bool],
    uses: &'a [u32],
    alias: &'a [usize],
}

/// One lowering of `f` (whose ids `check_ids` accepted), with `reached`
/// as [`Lowerer::reached`]; the function, and the blocks its jumps and
/// jump tables reach.
pub(super) fn lower_pass(
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
    // Registers the code reads claim their names before those of values
    // nothing reads (which clean-up leaves in the value table).
    let read = |r: usize| order[r] < n && (is_param[order[r]] || uses[order[r]] > 0);
    distinct_names(&mut reg_names, read);
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
        join_phis: super::join_phis(f),
        select_once: None,
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

/// Make the register names of one function distinct, so that its listing
/// names each register once (`assembler::assemble_listing` reads a name
/// as one register). Of the registers of one name, the first for which
/// `first` holds keeps it (the first of all if none does: those for which
/// it holds are taken first), each other becomes `<name>.<k>`, the
/// smallest `k >= 1` that no register of the function is named. Derived
/// code has such repeats (reverse functions and the tangent functions of
/// Hessian-vector products name some values alike); unnamed registers
/// stay unnamed, and a function without repeats keeps its names as they
/// are.
fn distinct_names(names: &mut [String], first: impl Fn(usize) -> bool) {
    let repeats = {
        let mut seen = hashbrown::HashSet::with_capacity(names.len());
        !names
            .iter()
            .all(|n| n.is_empty() || seen.insert(n.as_str()))
    };
    if !repeats {
        return;
    }
    let mut taken: hashbrown::HashSet<String> =
        names.iter().filter(|n| !n.is_empty()).cloned().collect();
    let mut kept = hashbrown::HashSet::new();
    // The next suffix to try, per repeated name.
    let mut next: hashbrown::HashMap<String, usize> = hashbrown::HashMap::new();
    let (early, late): (Vec<usize>, Vec<usize>) = (0..names.len()).partition(|&r| first(r));
    for r in early.into_iter().chain(late) {
        let name = &mut names[r];
        if name.is_empty() || kept.insert(name.clone()) {
            continue;
        }
        let k = next.entry(name.clone()).or_insert(1);
        while taken.contains(&format!("{name}.{k}")) {
            *k += 1;
        }
        let new = format!("{name}.{k}");
        *k += 1;
        taken.insert(new.clone());
        kept.insert(new.clone());
        *name = new;
    }
}
