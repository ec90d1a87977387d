//! The reverse function's values and blocks: constants, the reverse-frame copy
//! of a forward value, new blocks.

use super::*;

impl Transform<'_> {
    pub(super) fn kf(&mut self, x: f64) -> ValueId {
        self.konst(Type::F64, x.to_bits())
    }

    pub(super) fn konst(&mut self, ty: Type, bits: u64) -> ValueId {
        if let Some(v) = self.rev.consts.get(&(ty, bits)) {
            return *v;
        }
        let v = self.rev.func.new_const(ty, bits);
        self.rev.consts.insert((ty, bits), v);
        v
    }

    pub(super) fn mirror_of(&mut self, v: ValueId) -> ValueId {
        if self.rev.mirror.len() < self.fwd.func.values.len() {
            self.rev.mirror.resize(self.fwd.func.values.len(), None);
        }
        if let Some(m) = self.rev.mirror[v.index()] {
            return m;
        }
        let data = &self.fwd.func.values[v.index()];
        let m = self.rev.func.new_value(data.ty, data.name.clone());
        self.rev.mirror[v.index()] = Some(m);
        m
    }

    pub(super) fn new_block(&mut self, name: String) -> BlockId {
        self.rev.func.blocks.push(Block {
            name,
            phis: Vec::new(),
            insts: Vec::new(),
            term: Term::RetN(Vec::new()),
            term_loc: Loc::default(),
        });
        BlockId(self.rev.func.blocks.len() as u32 - 1)
    }

    /// Whether block `b` has an active f64 phi (its incoming edges then need
    /// reverse edge blocks).
    pub(super) fn has_active_phis(&self, b: usize) -> bool {
        self.primal.p.blocks[b]
            .phis
            .iter()
            .any(|phi| self.rev.cot[phi.dst.index()].is_some())
    }
}

pub(super) fn blk_push(k: u32) -> Inst {
    let mut i = Inst::new(Op::BlkPush, None, Vec::new(), Loc::default());
    i.imm = k;
    i
}
