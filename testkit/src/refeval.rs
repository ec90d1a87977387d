//! A reference evaluator of the SSA IR, for differential testing.
//!
//! It is deliberately simple and shares nothing with `vm::interp` or
//! `vm::lower`: it walks the blocks of a [`vm::ir::Module`] (as produced by
//! `assembler::assemble`) directly, keeps every SSA value in a `Vec` indexed
//! by [`ValueId`], evaluates a block's phis as one parallel assignment on the
//! edge actually taken, and calls functions by Rust recursion with an
//! explicit depth bound. Each opcode is implemented from the contract
//! (`adasm.md` §3), not from the interpreter:
//!
//! * i64 `add`/`sub`/`mul`/`neg` wrap; `div`/`rem` by zero trap;
//!   `i64::MIN / -1` wraps to `i64::MIN` and `i64::MIN rem -1` is 0;
//! * `min a, b` / `max a, b` give `b` only when `b` is strictly smaller /
//!   larger, so ties (and a nan `b`) go to `a`;
//! * `ftoi` truncates toward zero and traps on nan and on values outside
//!   `[-2^63, 2^63)`;
//! * arrays live in a heap of the call, are passed by reference, are
//!   bounds-checked; `anew` of a negative length traps, and so does one
//!   above [`RefLimits::max_array`].
//!
//! Fuel counts every executed instruction and terminator (not phis); it is
//! a termination guard, not a model of the VM's fuel accounting, so a
//! differential test treats running out of fuel on either side as
//! "inconclusive" rather than as a mismatch.
//!
//! Only user opcodes are supported: the reverse-mode opcodes of the AD stage
//! (`blk.push`, `comms.pop`, `ret.n`, ...) give
//! [`RefTrapKind::Unsupported`].

use std::fmt;
use vm::ir::{BlockId, FuncId, Function, Module, RetType, Term, ValueId};
use vm::op::Op;
use vm::{Type, Value};

/// Bounds of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefLimits {
    /// Instructions and terminators the whole evaluation may execute.
    pub fuel: u64,
    /// Most active frames (the entry function is frame 1), as the VM's
    /// `Limits::max_call_depth`. Each frame is a Rust stack frame here, so
    /// keep this in the hundreds.
    pub max_depth: usize,
    /// Largest array `anew` may create, as the VM's `Limits::max_array_len`.
    pub max_array: usize,
}

impl Default for RefLimits {
    fn default() -> RefLimits {
        RefLimits {
            fuel: 10_000_000,
            max_depth: 200,
            max_array: 1 << 20,
        }
    }
}

/// What made the evaluation stop.
#[derive(Clone, Debug, PartialEq)]
pub enum RefTrapKind {
    DivByZero,
    RemByZero,
    OutOfBounds {
        index: i64,
        len: usize,
    },
    NegativeLength(i64),
    ArrayTooLarge(i64),
    FtoiInvalid(f64),
    CallDepth,
    OutOfFuel,
    /// Arguments that do not fit the parameters.
    BadArgs(String),
    /// Something outside the user subset of the IR (a reverse-mode opcode,
    /// a value read before it is defined, a phi without an entry for the
    /// edge taken): a malformed module, not a program trap.
    Unsupported(String),
}

impl RefTrapKind {
    /// The trap class, comparable with [`vm_class`].
    pub fn class(&self) -> &'static str {
        match self {
            RefTrapKind::DivByZero => "div-by-zero",
            RefTrapKind::RemByZero => "rem-by-zero",
            RefTrapKind::OutOfBounds { .. } => "out-of-bounds",
            RefTrapKind::NegativeLength(_) => "negative-length",
            RefTrapKind::ArrayTooLarge(_) => "array-too-large",
            RefTrapKind::FtoiInvalid(_) => "ftoi-invalid",
            RefTrapKind::CallDepth => "call-depth",
            RefTrapKind::OutOfFuel => "out-of-fuel",
            RefTrapKind::BadArgs(_) => "bad-args",
            RefTrapKind::Unsupported(_) => "unsupported",
        }
    }
}

/// The trap class of a VM trap, comparable with [`RefTrapKind::class`].
pub fn vm_class(kind: &vm::TrapKind) -> &'static str {
    use vm::TrapKind as K;
    match kind {
        K::DivByZero => "div-by-zero",
        K::RemByZero => "rem-by-zero",
        K::OutOfBounds { .. } => "out-of-bounds",
        K::NegativeLength(_) => "negative-length",
        K::ArrayTooLarge { .. } => "array-too-large",
        K::ArgArrayTooLarge { .. } => "arg-array-too-large",
        K::HeapLimit { .. } => "heap-limit",
        K::FtoiInvalid(_) => "ftoi-invalid",
        K::CallDepth { .. } => "call-depth",
        K::OutOfFuel { .. } => "out-of-fuel",
        K::ArgMismatch(_) => "bad-args",
        K::Interrupted => "interrupted",
        K::StackLimit { .. } => "stack-limit",
        K::AdBudget { .. } => "ad-budget",
        K::MemoryLimit { .. } => "memory-limit",
        K::OutOfMemory => "out-of-memory",
        K::StackUnderflow => "stack-underflow",
        K::BadHandle => "bad-handle",
        K::NoShadow => "no-shadow",
        K::BadBlockId(_) => "bad-block-id",
        K::NotVerified => "not-verified",
        K::RuleTangentLength { .. } => "rule-tangent-length",
    }
}

/// A trap of the reference evaluator: what and where.
#[derive(Clone, Debug, PartialEq)]
pub struct RefTrap {
    pub kind: RefTrapKind,
    /// The function (without `@`) and block executing when it happened;
    /// empty for argument errors.
    pub func: String,
    pub block: String,
}

impl fmt::Display for RefTrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reference trap {} ({:?}) in @{}, block {}",
            self.kind.class(),
            self.kind,
            self.func,
            self.block
        )
    }
}

impl std::error::Error for RefTrap {}

/// Evaluate `func` of `module` on `args`.
pub fn eval(
    module: &Module,
    func: FuncId,
    args: &[Value],
    limits: &RefLimits,
) -> Result<Value, RefTrap> {
    let bad = |m: String| RefTrap {
        kind: RefTrapKind::BadArgs(m),
        func: String::new(),
        block: String::new(),
    };
    let Some(f) = module.funcs.get(func.index()) else {
        return Err(bad(format!("no function {func}")));
    };
    if f.params.len() != args.len() {
        return Err(bad(format!(
            "@{} takes {} argument(s), got {}",
            f.name,
            f.params.len(),
            args.len()
        )));
    }
    let mut ev = Evaluator {
        module,
        limits,
        fuel: limits.fuel,
        heap: Vec::new(),
    };
    let mut raw = Vec::with_capacity(args.len());
    for (i, (a, p)) in args.iter().zip(&f.params).enumerate() {
        let want = f.ty(*p);
        let v = match (a, want) {
            (Value::F64(x), Type::F64) => Rv::F(*x),
            (Value::I64(x), Type::I64) => Rv::I(*x),
            (Value::Bool(x), Type::Bool) => Rv::B(*x),
            (Value::Arr(xs), Type::Arr) => {
                ev.heap.push(xs.clone());
                Rv::A(ev.heap.len() - 1)
            }
            _ => {
                return Err(bad(format!(
                    "argument {} of @{} must be {want}, got {}",
                    i + 1,
                    f.name,
                    a.ty()
                )))
            }
        };
        raw.push(v);
    }
    let r = ev.call(func, raw, 1)?;
    Ok(match r {
        Rv::F(x) => Value::F64(x),
        Rv::I(x) => Value::I64(x),
        Rv::B(x) => Value::Bool(x),
        Rv::A(h) => Value::Arr(ev.heap[h].clone()),
    })
}

/// Whether two host values are the same bit for bit (f64 compared by
/// `to_bits`, except that every nan equals every nan).
pub fn same_value(a: &Value, b: &Value) -> bool {
    fn f(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }
    match (a, b) {
        (Value::F64(x), Value::F64(y)) => f(*x, *y),
        (Value::I64(x), Value::I64(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Arr(xs), Value::Arr(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| f(*x, *y))
        }
        _ => false,
    }
}

/// A runtime value: arrays are indices into the evaluation's heap.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rv {
    F(f64),
    I(i64),
    B(bool),
    A(usize),
}

struct Evaluator<'m> {
    module: &'m Module,
    limits: &'m RefLimits,
    fuel: u64,
    heap: Vec<Vec<f64>>,
}

/// One function activation.
struct Frame<'m> {
    f: &'m Function,
    env: Vec<Option<Rv>>,
    block: BlockId,
}

impl<'m> Frame<'m> {
    fn trap(&self, kind: RefTrapKind) -> RefTrap {
        RefTrap {
            kind,
            func: self.f.name.clone(),
            block: self
                .f
                .blocks
                .get(self.block.index())
                .map(|b| b.name.clone())
                .unwrap_or_default(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> RefTrap {
        self.trap(RefTrapKind::Unsupported(what.into()))
    }

    fn get(&self, v: ValueId) -> Result<Rv, RefTrap> {
        let Some(data) = self.f.values.get(v.index()) else {
            return Err(self.unsupported(format!("no value {v}")));
        };
        if let Some(bits) = data.konst {
            return match data.ty {
                Type::F64 => Ok(Rv::F(f64::from_bits(bits))),
                Type::I64 => Ok(Rv::I(bits as i64)),
                Type::Bool => Ok(Rv::B(bits != 0)),
                Type::Arr => Err(self.unsupported("an array constant")),
            };
        }
        match self.env[v.index()] {
            Some(x) => Ok(x),
            None => Err(self.unsupported(format!("{v} read before it is defined"))),
        }
    }

    fn f64(&self, v: ValueId) -> Result<f64, RefTrap> {
        match self.get(v)? {
            Rv::F(x) => Ok(x),
            other => Err(self.unsupported(format!("{v} is {other:?}, expected f64"))),
        }
    }

    fn i64(&self, v: ValueId) -> Result<i64, RefTrap> {
        match self.get(v)? {
            Rv::I(x) => Ok(x),
            other => Err(self.unsupported(format!("{v} is {other:?}, expected i64"))),
        }
    }

    fn bool(&self, v: ValueId) -> Result<bool, RefTrap> {
        match self.get(v)? {
            Rv::B(x) => Ok(x),
            other => Err(self.unsupported(format!("{v} is {other:?}, expected bool"))),
        }
    }

    fn arr(&self, v: ValueId) -> Result<usize, RefTrap> {
        match self.get(v)? {
            Rv::A(x) => Ok(x),
            other => Err(self.unsupported(format!("{v} is {other:?}, expected f64[]"))),
        }
    }

    fn set(&mut self, v: Option<ValueId>, x: Rv) -> Result<(), RefTrap> {
        let Some(v) = v else {
            return Err(self.unsupported("an instruction without a destination"));
        };
        match self.env.get_mut(v.index()) {
            Some(slot) => {
                *slot = Some(x);
                Ok(())
            }
            None => Err(self.unsupported(format!("no value {v}"))),
        }
    }
}

/// `min`: `b` only if strictly below `a` (ties and a nan `b` give `a`).
fn min_f(a: f64, b: f64) -> f64 {
    match b.partial_cmp(&a) {
        Some(std::cmp::Ordering::Less) => b,
        _ => a,
    }
}

fn max_f(a: f64, b: f64) -> f64 {
    match b.partial_cmp(&a) {
        Some(std::cmp::Ordering::Greater) => b,
        _ => a,
    }
}

/// `ftoi`: truncation toward zero, `None` for nan and out of range.
fn ftoi(x: f64) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() {
        return None;
    }
    let t = x.trunc();
    if !(-TWO_63..TWO_63).contains(&t) {
        return None;
    }
    Some(t as i64)
}

/// i64 division with wrapping of `MIN / -1`; `None` for division by zero.
fn div_i(a: i64, b: i64) -> Option<i64> {
    match (a, b) {
        (_, 0) => None,
        (i64::MIN, -1) => Some(i64::MIN),
        _ => Some(a / b),
    }
}

/// i64 remainder (sign of the dividend); `None` for remainder by zero.
fn rem_i(a: i64, b: i64) -> Option<i64> {
    match (a, b) {
        (_, 0) => None,
        (_, -1) => Some(0),
        _ => Some(a % b),
    }
}

impl<'m> Evaluator<'m> {
    fn burn(&mut self, frame: &Frame<'m>) -> Result<(), RefTrap> {
        if self.fuel == 0 {
            return Err(frame.trap(RefTrapKind::OutOfFuel));
        }
        self.fuel -= 1;
        Ok(())
    }

    fn call(&mut self, fid: FuncId, args: Vec<Rv>, depth: usize) -> Result<Rv, RefTrap> {
        let module = self.module;
        let f = module.func(fid);
        let mut frame = Frame {
            f,
            env: vec![None; f.values.len()],
            block: BlockId(0),
        };
        if f.blocks.is_empty() {
            return Err(frame.unsupported("a function without blocks"));
        }
        if !matches!(f.ret, RetType::One(_) | RetType::Unit) {
            return Err(frame.unsupported("a function returning several values"));
        }
        for (p, a) in f.params.iter().zip(args) {
            frame.env[p.index()] = Some(a);
        }
        let mut prev: Option<BlockId> = None;
        loop {
            let Some(block) = f.blocks.get(frame.block.index()) else {
                return Err(frame.unsupported(format!("no block {}", frame.block)));
            };
            // Phis: read every incoming value for the edge taken, then write
            // them all (a parallel assignment).
            if !block.phis.is_empty() {
                let Some(p) = prev else {
                    return Err(frame.unsupported("phis in the entry block"));
                };
                let mut updates = Vec::with_capacity(block.phis.len());
                for phi in &block.phis {
                    let Some((_, v)) = phi.incoming.iter().find(|(b, _)| *b == p) else {
                        return Err(frame.unsupported(format!("a phi has no entry for {p}")));
                    };
                    updates.push((phi.dst, frame.get(*v)?));
                }
                for (dst, x) in updates {
                    frame.set(Some(dst), x)?;
                }
            }
            for inst in &block.insts {
                self.burn(&frame)?;
                self.exec(&mut frame, inst, depth)?;
            }
            self.burn(&frame)?;
            match &block.term {
                Term::Jmp(t) => {
                    prev = Some(frame.block);
                    frame.block = *t;
                }
                Term::Br { cond, then_, else_ } => {
                    let c = frame.bool(*cond)?;
                    prev = Some(frame.block);
                    frame.block = if c { *then_ } else { *else_ };
                }
                Term::Ret(v) => return frame.get(*v),
                Term::RetN(_) | Term::BlkPop(_) => {
                    return Err(frame.unsupported("a reverse-mode terminator"))
                }
            }
        }
    }

    fn exec(
        &mut self,
        fr: &mut Frame<'m>,
        inst: &vm::ir::Inst,
        depth: usize,
    ) -> Result<(), RefTrap> {
        let a = |i: usize| -> Result<ValueId, RefTrap> {
            inst.args
                .get(i)
                .copied()
                .ok_or_else(|| fr.unsupported(format!("{:?} lacks operand {i}", inst.op)))
        };
        let dst = inst.dst;
        macro_rules! f2 {
            ($e:expr) => {{
                let (x, y) = (fr.f64(a(0)?)?, fr.f64(a(1)?)?);
                let g: fn(f64, f64) -> f64 = $e;
                fr.set(dst, Rv::F(g(x, y)))
            }};
        }
        macro_rules! f1 {
            ($e:expr) => {{
                let x = fr.f64(a(0)?)?;
                let g: fn(f64) -> f64 = $e;
                fr.set(dst, Rv::F(g(x)))
            }};
        }
        macro_rules! i2 {
            ($e:expr) => {{
                let (x, y) = (fr.i64(a(0)?)?, fr.i64(a(1)?)?);
                let g: fn(i64, i64) -> i64 = $e;
                fr.set(dst, Rv::I(g(x, y)))
            }};
        }
        macro_rules! cf {
            ($e:expr) => {{
                let (x, y) = (fr.f64(a(0)?)?, fr.f64(a(1)?)?);
                let g: fn(f64, f64) -> bool = $e;
                fr.set(dst, Rv::B(g(x, y)))
            }};
        }
        macro_rules! ci {
            ($e:expr) => {{
                let (x, y) = (fr.i64(a(0)?)?, fr.i64(a(1)?)?);
                let g: fn(i64, i64) -> bool = $e;
                fr.set(dst, Rv::B(g(x, y)))
            }};
        }
        match inst.op {
            Op::AddF => f2!(|x, y| x + y),
            Op::SubF => f2!(|x, y| x - y),
            Op::MulF => f2!(|x, y| x * y),
            Op::DivF => f2!(|x, y| x / y),
            Op::PowF => f2!(f64::powf),
            Op::MinF => f2!(min_f),
            Op::MaxF => f2!(max_f),
            Op::NegF => f1!(|x| -x),
            Op::Sin => f1!(f64::sin),
            Op::Cos => f1!(f64::cos),
            Op::Tan => f1!(f64::tan),
            Op::Exp => f1!(f64::exp),
            Op::Log => f1!(f64::ln),
            Op::Sqrt => f1!(f64::sqrt),
            Op::Tanh => f1!(f64::tanh),
            Op::AbsF => f1!(f64::abs),
            Op::Erf => f1!(libm::erf),
            Op::Erfc => f1!(libm::erfc),
            Op::Atan => f1!(f64::atan),
            Op::Asin => f1!(f64::asin),
            Op::Acos => f1!(f64::acos),
            Op::Atan2 => f2!(f64::atan2),
            Op::Sinh => f1!(f64::sinh),
            Op::Cosh => f1!(f64::cosh),
            Op::Log1p => f1!(f64::ln_1p),
            Op::Expm1 => f1!(f64::exp_m1),
            Op::Log2 => f1!(f64::log2),
            Op::Log10 => f1!(f64::log10),
            Op::Cbrt => f1!(f64::cbrt),
            Op::Hypot => f2!(f64::hypot),
            Op::Floor => f1!(f64::floor),
            Op::Ceil => f1!(f64::ceil),
            Op::Round => f1!(f64::round),
            Op::Trunc => f1!(f64::trunc),
            Op::AddI => i2!(i64::wrapping_add),
            Op::SubI => i2!(i64::wrapping_sub),
            Op::MulI => i2!(i64::wrapping_mul),
            Op::DivI => {
                let (x, y) = (fr.i64(a(0)?)?, fr.i64(a(1)?)?);
                match div_i(x, y) {
                    Some(q) => fr.set(dst, Rv::I(q)),
                    None => Err(fr.trap(RefTrapKind::DivByZero)),
                }
            }
            Op::RemI => {
                let (x, y) = (fr.i64(a(0)?)?, fr.i64(a(1)?)?);
                match rem_i(x, y) {
                    Some(r) => fr.set(dst, Rv::I(r)),
                    None => Err(fr.trap(RefTrapKind::RemByZero)),
                }
            }
            Op::MinI => i2!(|x, y| if y < x { y } else { x }),
            Op::MaxI => i2!(|x, y| if y > x { y } else { x }),
            Op::NegI => {
                let x = fr.i64(a(0)?)?;
                fr.set(dst, Rv::I(0i64.wrapping_sub(x)))
            }
            Op::LtF => cf!(|x, y| x < y),
            Op::LeF => cf!(|x, y| x <= y),
            Op::GtF => cf!(|x, y| x > y),
            Op::GeF => cf!(|x, y| x >= y),
            Op::EqF => cf!(|x, y| x == y),
            Op::NeF => cf!(|x, y| x != y),
            Op::LtI => ci!(|x, y| x < y),
            Op::LeI => ci!(|x, y| x <= y),
            Op::GtI => ci!(|x, y| x > y),
            Op::GeI => ci!(|x, y| x >= y),
            Op::EqI => ci!(|x, y| x == y),
            Op::NeI => ci!(|x, y| x != y),
            Op::And => {
                let (x, y) = (fr.bool(a(0)?)?, fr.bool(a(1)?)?);
                fr.set(dst, Rv::B(x && y))
            }
            Op::Or => {
                let (x, y) = (fr.bool(a(0)?)?, fr.bool(a(1)?)?);
                fr.set(dst, Rv::B(x || y))
            }
            Op::Not => {
                let x = fr.bool(a(0)?)?;
                fr.set(dst, Rv::B(!x))
            }
            Op::Select => {
                let c = fr.bool(a(0)?)?;
                let v = if c { fr.get(a(1)?)? } else { fr.get(a(2)?)? };
                fr.set(dst, v)
            }
            Op::Mov => {
                let v = fr.get(a(0)?)?;
                fr.set(dst, v)
            }
            Op::NoGrad => f1!(|x| x),
            Op::ItoF => {
                let x = fr.i64(a(0)?)?;
                fr.set(dst, Rv::F(x as f64))
            }
            Op::FtoI => {
                let x = fr.f64(a(0)?)?;
                match ftoi(x) {
                    Some(i) => fr.set(dst, Rv::I(i)),
                    None => Err(fr.trap(RefTrapKind::FtoiInvalid(x))),
                }
            }
            Op::ANew => {
                let n = fr.i64(a(0)?)?;
                if n < 0 {
                    return Err(fr.trap(RefTrapKind::NegativeLength(n)));
                }
                if n as u64 > self.limits.max_array as u64 {
                    return Err(fr.trap(RefTrapKind::ArrayTooLarge(n)));
                }
                self.heap.push(vec![0.0; n as usize]);
                fr.set(dst, Rv::A(self.heap.len() - 1))
            }
            Op::ALen => {
                let h = fr.arr(a(0)?)?;
                fr.set(dst, Rv::I(self.heap[h].len() as i64))
            }
            Op::AGet => {
                let h = fr.arr(a(0)?)?;
                let i = fr.i64(a(1)?)?;
                let arr = &self.heap[h];
                if i < 0 || i as u64 >= arr.len() as u64 {
                    return Err(fr.trap(RefTrapKind::OutOfBounds {
                        index: i,
                        len: arr.len(),
                    }));
                }
                let x = arr[i as usize];
                fr.set(dst, Rv::F(x))
            }
            Op::ASet => {
                let h = fr.arr(a(0)?)?;
                let i = fr.i64(a(1)?)?;
                let x = fr.f64(a(2)?)?;
                let arr = &mut self.heap[h];
                if i < 0 || i as u64 >= arr.len() as u64 {
                    return Err(fr.trap(RefTrapKind::OutOfBounds {
                        index: i,
                        len: arr.len(),
                    }));
                }
                arr[i as usize] = x;
                Ok(())
            }
            Op::Call => {
                let Some(callee) = inst.callee else {
                    return Err(fr.unsupported("a call without a callee"));
                };
                if callee.index() >= self.module.funcs.len() {
                    return Err(fr.unsupported(format!("call of missing {callee}")));
                }
                let vals = inst
                    .args
                    .iter()
                    .map(|v| fr.get(*v))
                    .collect::<Result<Vec<_>, _>>()?;
                if self.module.func(callee).params.len() != vals.len() {
                    return Err(fr.unsupported("a call with the wrong argument count"));
                }
                if depth + 1 > self.limits.max_depth {
                    return Err(fr.trap(RefTrapKind::CallDepth));
                }
                let r = self.call(callee, vals, depth + 1)?;
                fr.set(dst, r)
            }
            other => Err(fr.unsupported(format!("opcode {}", other.mnemonic()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_edge_cases() {
        assert_eq!(div_i(i64::MIN, -1), Some(i64::MIN));
        assert_eq!(rem_i(i64::MIN, -1), Some(0));
        assert_eq!(rem_i(-7, 3), Some(-1));
        assert_eq!(div_i(-7, 2), Some(-3));
        assert_eq!(div_i(1, 0), None);
        assert_eq!(ftoi(-0.9), Some(0));
        assert_eq!(ftoi(-9_223_372_036_854_775_808.0), Some(i64::MIN));
        assert_eq!(ftoi(9_223_372_036_854_775_808.0), None);
        assert_eq!(ftoi(f64::NAN), None);
        assert_eq!(ftoi(f64::NEG_INFINITY), None);
        assert_eq!(min_f(0.0, -0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(max_f(-0.0, 0.0).to_bits(), (-0.0f64).to_bits());
        assert!(min_f(f64::NAN, 1.0).is_nan());
        assert_eq!(min_f(1.0, f64::NAN), 1.0);
    }
}
