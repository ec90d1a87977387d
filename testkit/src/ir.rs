//! Hand-built IR for tests, benches and examples of crates that do not
//! depend on the assembler (`vm`), and small modules several of them share
//! (powloop, fib, a deep recursion).

use vm::ir::{Block, BlockId, FuncId, Function, Inst, Loc, Module, Phi, RetType, Term, ValueId};
use vm::op::Op;
use vm::Type;

pub struct B {
    pub f: Function,
}

impl B {
    pub fn new(name: &str, params: &[(&str, Type)], ret: Type) -> B {
        let mut f = Function {
            name: name.into(),
            params: Vec::new(),
            ret: RetType::One(ret),
            values: Vec::new(),
            blocks: Vec::new(),
            loc: Loc::default(),
        };
        for (n, t) in params {
            let v = f.new_value(*t, Some(n.to_string()));
            f.params.push(v);
        }
        B { f }
    }
    pub fn p(&self, i: usize) -> ValueId {
        self.f.params[i]
    }
    pub fn block(&mut self, name: &str) -> BlockId {
        self.f.blocks.push(Block {
            name: name.into(),
            phis: Vec::new(),
            insts: Vec::new(),
            term: Term::RetN(Vec::new()),
            term_loc: Loc::default(),
        });
        BlockId(self.f.blocks.len() as u32 - 1)
    }
    pub fn val(&mut self, name: &str, t: Type) -> ValueId {
        self.f.new_value(t, Some(name.into()))
    }
    pub fn f64(&mut self, x: f64) -> ValueId {
        self.f.new_const(Type::F64, x.to_bits())
    }
    pub fn i64(&mut self, x: i64) -> ValueId {
        self.f.new_const(Type::I64, x as u64)
    }
    pub fn op(&mut self, b: BlockId, op: Op, t: Option<Type>, args: &[ValueId]) -> ValueId {
        let d = t.map(|t| self.f.new_value(t, None));
        self.f.blocks[b.index()]
            .insts
            .push(Inst::new(op, d, args.to_vec(), Loc::new(1, 1)));
        d.unwrap_or(ValueId(0))
    }
    pub fn call(&mut self, b: BlockId, callee: u32, t: Type, args: &[ValueId]) -> ValueId {
        let d = self.f.new_value(t, None);
        let mut i = Inst::new(Op::Call, Some(d), args.to_vec(), Loc::default());
        i.callee = Some(FuncId(callee));
        self.f.blocks[b.index()].insts.push(i);
        d
    }
    pub fn phi(&mut self, b: BlockId, dst: ValueId, incoming: &[(BlockId, ValueId)]) {
        self.f.blocks[b.index()].phis.push(Phi {
            dst,
            incoming: incoming.to_vec(),
            loc: Loc::default(),
        });
    }
    pub fn term(&mut self, b: BlockId, t: Term) {
        self.f.blocks[b.index()].term = t;
    }

    /// A function returning several f64 values (`ret.n`).
    pub fn new_many(name: &str, params: &[(&str, Type)], nrets: usize) -> B {
        let mut b = B::new(name, params, Type::F64);
        b.f.ret = RetType::Many(vec![Type::F64; nrets]);
        b
    }
    pub fn bool(&mut self, x: bool) -> ValueId {
        self.f.new_const(Type::Bool, x as u64)
    }
    /// An instruction writing an existing value (non-SSA code, or a value
    /// made with [`B::val`]).
    pub fn set(&mut self, b: BlockId, op: Op, dst: ValueId, args: &[ValueId]) {
        self.f.blocks[b.index()].insts.push(Inst::new(
            op,
            Some(dst),
            args.to_vec(),
            Loc::new(1, 1),
        ));
    }
    /// An instruction without a destination (`aset`, `comms.push`, ...).
    pub fn eff(&mut self, b: BlockId, op: Op, args: &[ValueId]) {
        self.f.blocks[b.index()]
            .insts
            .push(Inst::new(op, None, args.to_vec(), Loc::new(1, 1)));
    }
    /// `call.acc @callee(args) += (accs)`.
    pub fn call_acc(&mut self, b: BlockId, callee: u32, args: &[ValueId], accs: &[ValueId]) {
        let mut i = Inst::new(Op::CallAcc, None, args.to_vec(), Loc::default());
        i.callee = Some(FuncId(callee));
        i.accs = accs.to_vec();
        self.f.blocks[b.index()].insts.push(i);
    }
    pub fn blk_push(&mut self, b: BlockId, id: u32) {
        let mut i = Inst::new(Op::BlkPush, None, Vec::new(), Loc::default());
        i.imm = id;
        self.f.blocks[b.index()].insts.push(i);
    }
    /// Set the source line of the block's last instruction.
    pub fn line(&mut self, b: BlockId, line: u32) {
        if let Some(i) = self.f.blocks[b.index()].insts.last_mut() {
            i.loc = Loc::new(line, 5);
        }
    }
    pub fn jmp(&mut self, b: BlockId, to: BlockId) {
        self.term(b, Term::Jmp(to));
    }
    pub fn br(&mut self, b: BlockId, cond: ValueId, then_: BlockId, else_: BlockId) {
        self.term(b, Term::Br { cond, then_, else_ });
    }
    pub fn ret(&mut self, b: BlockId, v: ValueId) {
        self.term(b, Term::Ret(v));
    }
    /// `@name(%x: f64) -> f64 { entry: ret %x }`.
    pub fn identity(name: &str) -> B {
        let mut b = B::new(name, &[("x", Type::F64)], Type::F64);
        let e = b.block("entry");
        let x = b.p(0);
        b.ret(e, x);
        b
    }

    pub fn module(self) -> Module {
        Module {
            funcs: vec![self.f],
            rules: Vec::new(),
        }
    }
}

/// Several functions, in order (ids 0, 1, ...).
pub fn module(fs: Vec<B>) -> Module {
    Module {
        funcs: fs.into_iter().map(|b| b.f).collect(),
        rules: Vec::new(),
    }
}

/// Lower and verify, panicking on failure (test programs are well formed).
pub fn load(m: &Module) -> vm::bytecode::Program {
    let mut p = vm::lower::lower_module(m).expect("lowers");
    if let Err(errs) = vm::verify::verify_program(&mut p) {
        panic!("verification failed: {errs:?}");
    }
    p
}

/// `fn @t(%a: ta, %b: tb) -> tr { entry: %r = op %a, %b; ret %r }`; one
/// parameter for unary opcodes (`tb = None`).
pub fn single(op: Op, ta: Type, tb: Option<Type>, tr: Type) -> Module {
    let mut params = vec![("a", ta)];
    if let Some(tb) = tb {
        params.push(("b", tb));
    }
    let mut b = B::new("t", &params, tr);
    let entry = b.block("entry");
    let args: Vec<ValueId> = (0..params.len()).map(|i| b.p(i)).collect();
    let r = b.val("r", tr);
    b.set(entry, op, r, &args);
    b.ret(entry, r);
    b.module()
}

/// powloop from adasm.md §1.
pub fn powloop() -> Module {
    let mut b = B::new("pow", &[("x", Type::F64), ("n", Type::I64)], Type::F64);
    let (x, n) = (b.p(0), b.p(1));
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    b.term(entry, Term::Jmp(head));
    let r = b.val("r", Type::F64);
    let k = b.val("k", Type::I64);
    let r2 = b.val("r2", Type::F64);
    let k2 = b.val("k2", Type::I64);
    let one = b.f64(1.0);
    let zero = b.i64(0);
    let ione = b.i64(1);
    b.phi(head, r, &[(entry, one), (body, r2)]);
    b.phi(head, k, &[(entry, n), (body, k2)]);
    let c = b.op(head, Op::GtI, Some(Type::Bool), &[k, zero]);
    b.term(
        head,
        Term::Br {
            cond: c,
            then_: body,
            else_: done,
        },
    );
    b.set(body, Op::MulF, r2, &[r, x]);
    b.set(body, Op::SubI, k2, &[k, ione]);
    b.term(body, Term::Jmp(head));
    b.term(done, Term::Ret(r));
    Module {
        funcs: vec![b.f],
        rules: Vec::new(),
    }
}

/// fib by `a, b = b, a + b` on one back edge (the phi swap).
pub fn fib() -> Module {
    let mut b = B::new("fib", &[("n", Type::I64)], Type::F64);
    let n = b.p(0);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    b.term(entry, Term::Jmp(head));
    let a = b.val("a", Type::F64);
    let bb = b.val("b", Type::F64);
    let k = b.val("k", Type::I64);
    let (f0, f1, i0, i1) = (b.f64(0.0), b.f64(1.0), b.i64(0), b.i64(1));
    let s = b.val("s", Type::F64);
    let k2 = b.val("k2", Type::I64);
    b.phi(head, a, &[(entry, f0), (body, bb)]);
    b.phi(head, bb, &[(entry, f1), (body, s)]);
    b.phi(head, k, &[(entry, i0), (body, k2)]);
    let c = b.op(head, Op::LtI, Some(Type::Bool), &[k, n]);
    b.term(
        head,
        Term::Br {
            cond: c,
            then_: body,
            else_: done,
        },
    );
    b.set(body, Op::AddF, s, &[a, bb]);
    b.set(body, Op::AddI, k2, &[k, i1]);
    b.term(body, Term::Jmp(head));
    b.term(done, Term::Ret(a));
    Module {
        funcs: vec![b.f],
        rules: Vec::new(),
    }
}

/// rec(n) = n <= 0 ? 0 : 1 + rec(n - 1), as f64.
pub fn deep() -> Module {
    let mut b = B::new("deep", &[("n", Type::I64)], Type::F64);
    let n = b.p(0);
    let entry = b.block("entry");
    let base = b.block("base");
    let step = b.block("step");
    let (i0, i1, f0, f1) = (b.i64(0), b.i64(1), b.f64(0.0), b.f64(1.0));
    let c = b.op(entry, Op::LeI, Some(Type::Bool), &[n, i0]);
    b.term(
        entry,
        Term::Br {
            cond: c,
            then_: base,
            else_: step,
        },
    );
    b.term(base, Term::Ret(f0));
    let m = b.op(step, Op::SubI, Some(Type::I64), &[n, i1]);
    let r = b.call(step, 0, Type::F64, &[m]);
    let s = b.op(step, Op::AddF, Some(Type::F64), &[r, f1]);
    b.term(step, Term::Ret(s));
    Module {
        funcs: vec![b.f],
        rules: Vec::new(),
    }
}

/// `s = sum_{i < n} sin(itof(i))`.
pub fn sumsin() -> Module {
    let mut b = B::new("sumsin", &[("n", Type::I64)], Type::F64);
    let n = b.p(0);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    b.term(entry, Term::Jmp(head));
    let i = b.val("i", Type::I64);
    let s = b.val("s", Type::F64);
    let i2 = b.val("i2", Type::I64);
    let s2 = b.val("s2", Type::F64);
    let (i0, i1, f0) = (b.i64(0), b.i64(1), b.f64(0.0));
    b.phi(head, i, &[(entry, i0), (body, i2)]);
    b.phi(head, s, &[(entry, f0), (body, s2)]);
    let c = b.op(head, Op::LtI, Some(Type::Bool), &[i, n]);
    b.term(
        head,
        Term::Br {
            cond: c,
            then_: body,
            else_: done,
        },
    );
    let x = b.op(body, Op::ItoF, Some(Type::F64), &[i]);
    let y = b.op(body, Op::Sin, Some(Type::F64), &[x]);
    b.set(body, Op::AddF, s2, &[s, y]);
    b.set(body, Op::AddI, i2, &[i, i1]);
    b.term(body, Term::Jmp(head));
    b.term(done, Term::Ret(s));
    Module {
        funcs: vec![b.f],
        rules: Vec::new(),
    }
}
