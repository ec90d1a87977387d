//! Bytecode to Cranelift IR, one verified function at a time.
//!
//! ## Calling convention
//! A compiled function takes the context pointer (`native::Ctx`), then, if
//! it returns several values (`ret.n`), a pointer to where it writes them,
//! then its parameters (f64 parameters as `f64`, every other type as the
//! 64 bits of an `i64`). It returns its value (`ret`: `f64` or `i64`) or
//! nothing (`ret.n`). After a trap it returns at once (zeros); every
//! caller checks `ctx.trapped` after a call and returns too.
//!
//! ## Registers
//! Each register is a Cranelift variable of its type, defined on entry
//! (parameters, constants, zeros), so the SSA form comes from
//! `cranelift-frontend`.
//!
//! ## Instruction count, fuel, interrupt, depth
//! Every leader of the bytecode (entry, jump targets, table entries,
//! instructions after a jump) starts a Cranelift block, which adds its
//! instruction count to a steps variable `s` on entry. The count at an
//! instruction `pc` of a block ending at `end` is `s - (end - 1 - pc)`,
//! which is what traps report and what calls hand to the callee through
//! `ctx.steps` (the callee's count goes on from there, and the caller
//! takes it back after the call), so the count is the interpreter's
//! exactly. As in the interpreter, fuel is looked at on taken jumps and
//! calls (and, for the entry function, at its return: by the host), the
//! interrupt flag at taken backward jumps, and the depth limit at calls.
//!
//! ## Counted loops
//! An innermost loop stepped by a counter ([`Counted`]) is translated
//! twice: as above, and as an unchecked copy whose jumps within the loop
//! look at neither fuel nor the interrupt flag, and whose accesses and
//! stack operations that the guard has covered skip their checks. A guard
//! at the header ([`T::counted_loop`]) picks the unchecked copy only where
//! none of those checks could fire.

use crate::loops::{
    block_end, block_of, counted_loops, loop_views, Counted, Graph, Live, LoopViews,
    COUNTED_STEPS_MOST,
};
use crate::native::{
    site, sym, Sig, AV_DATA, AV_LEN, AV_SHADOW, AV_SHADOW_LEN, AV_SHIFT, OFF_ARR_N, OFF_ARR_TAB,
    OFF_BLK_CAP, OFF_BLK_LEN, OFF_BLK_PTR, OFF_COMMS_CAP, OFF_COMMS_LEN, OFF_COMMS_PTR, OFF_DEPTH,
    OFF_FUEL, OFF_INTERRUPT, OFF_MAX_DEPTH, OFF_RET_PC, OFF_STACK_LIMIT, OFF_STEPS, OFF_TRAPPED,
    T_BAD_BLOCK, T_CALL_DEPTH, T_DIV_BY_ZERO, T_FTOI, T_FUEL, T_INTERRUPTED, T_REM_BY_ZERO,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, ExtFuncData, ExternalName, FuncRef, InstBuilder, MemFlagsData,
    Signature, StackSlotData, StackSlotKind, Type as CType, UserExternalName, Value,
};
use cranelift_frontend::{FunctionBuilder, Switch, Variable};
use std::collections::{HashMap, HashSet};
use vm::bytecode::{Function, Instr, Program};
use vm::ir::{FuncId, RetType};
use vm::op::{Op, Operand};
use vm::Type;

/// The Cranelift type of a register of type `t`.
pub(crate) fn ctype(t: Type) -> CType {
    match t {
        Type::F64 => types::F64,
        _ => types::I64,
    }
}

/// How many values `f` returns through memory (`ret.n`), or `None` for a
/// function returning one value.
pub(crate) fn many(f: &Function) -> Option<usize> {
    match &f.ret {
        RetType::Many(ts) => Some(ts.len()),
        _ => None,
    }
}

/// The Cranelift type of `f`'s single result.
fn ret_ctype(f: &Function) -> Option<CType> {
    f.ret.carrier().map(ctype)
}

/// The signature of compiled `f` (see the module docs).
pub(crate) fn signature(f: &Function, mut sig: Signature) -> Signature {
    sig.params.push(AbiParam::new(types::I64));
    if many(f).is_some() {
        sig.params.push(AbiParam::new(types::I64));
    }
    for t in &f.param_types {
        sig.params.push(AbiParam::new(ctype(*t)));
    }
    if let Some(t) = ret_ctype(f) {
        sig.returns.push(AbiParam::new(t));
    }
    sig
}

/// The signature of a helper of class `s`.
pub(crate) fn helper_signature(s: Sig, mut sig: Signature) -> Signature {
    let i = AbiParam::new(types::I64);
    let fl = AbiParam::new(types::F64);
    // The helpers' calling convention (`native.rs`, `helper!`); the math
    // functions keep the platform's.
    if cfg!(target_arch = "x86_64") && !matches!(s, Sig::F1 | Sig::F2) {
        sig.call_conv = cranelift_codegen::isa::CallConv::WindowsFastcall;
    }
    match s {
        Sig::Void(n) | Sig::Int(n) | Sig::Float(n) => {
            sig.params.push(i);
            sig.params.push(i);
            for _ in 0..n {
                sig.params.push(i);
            }
            match s {
                Sig::Int(_) => sig.returns.push(i),
                Sig::Float(_) => sig.returns.push(fl),
                _ => {}
            }
        }
        Sig::VoidIIF => {
            sig.params.extend([i, i, i, i, fl]);
        }
        Sig::F1 => {
            sig.params.push(fl);
            sig.returns.push(fl);
        }
        Sig::F2 => {
            sig.params.extend([fl, fl]);
            sig.returns.push(fl);
        }
    }
    sig
}

/// The instruction indices that start a block: 0, jump targets, table
/// entries and the instruction after every jump or terminator.
pub(crate) fn leaders(f: &Function) -> Vec<usize> {
    let n = f.code.len();
    let mut is = vec![false; n + 1];
    is[0] = true;
    for (pc, ins) in f.code.iter().enumerate() {
        if ins.op.is_terminator() || ins.op.is_cond_jump() {
            is[pc + 1] = true;
        }
        if ins.op == Op::Jmp || ins.op.is_cond_jump() {
            if let Some(t) = is.get_mut(ins.x as usize) {
                *t = true;
            }
        }
        if ins.op == Op::BlkPop {
            if let Some(table) = f.tables.get(ins.x as usize) {
                for t in table {
                    if let Some(t) = is.get_mut(*t as usize) {
                        *t = true;
                    }
                }
            }
        }
    }
    (0..n).filter(|pc| is[*pc]).collect()
}

/// Whether `f` has a backward jump (a jump, conditional jump or block-table
/// entry to an instruction at or before it): a function without one runs
/// each instruction at most once per call.
pub(crate) fn has_loop(f: &Function) -> bool {
    f.code.iter().enumerate().any(|(pc, ins)| {
        if ins.op == Op::Jmp || ins.op.is_cond_jump() {
            ins.x as usize <= pc
        } else if ins.op == Op::BlkPop {
            f.tables
                .get(ins.x as usize)
                .is_some_and(|t| t.iter().any(|t| *t as usize <= pc))
        } else {
            false
        }
    })
}

/// A helper as the module declared it: its name, its id in the module
/// and its signature.
pub(crate) struct HelperDecl {
    pub name: &'static str,
    pub id: u32,
    pub sig: Signature,
}

/// Function references a function being translated calls.
pub(crate) struct Refs<'a> {
    /// Every helper; a function imports only those it calls, on first use
    /// ([`T::helper`]): a signature and an external function per helper
    /// in every function cost the code generator time in each of them.
    pub helpers: &'a [HelperDecl],
    /// Callees by bytecode id.
    pub callees: HashMap<FuncId, FuncRef>,
    /// The entry trampolines of the callees in a recursive call graph:
    /// a call of one of these looks at the stack pointer first and, below
    /// `ctx.stack_limit`, runs the callee through its trampoline on the
    /// next stack segment (`native::h_call_grown`).
    pub trampolines: HashMap<FuncId, FuncRef>,
}

struct T<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    prog: &'a Program,
    f: &'a Function,
    fid: u32,
    refs: &'a Refs<'a>,
    /// The helpers imported so far, by index in `refs.helpers`.
    imported: Vec<Option<FuncRef>>,
    regs: Vec<Variable>,
    s: Variable,
    ctx: Value,
    out: Option<Value>,
    fuel: Value,
    max_depth: Value,
    unwind: Block,
    blocks: HashMap<usize, Block>,
    /// The context fields kept in variables ([`CACHED`]).
    cached: [Variable; 8],
    /// End (exclusive) of the bytecode block being translated.
    end: usize,
    /// How many instructions write each register, and the `pc` of the last
    /// one ([`writes`]): a constant register that none writes holds its
    /// constant throughout.
    writes: Vec<(u32, usize)>,
    /// In a function with no `anew` and no call (so the views and the
    /// buffers they point at stay as they are), each array register no
    /// instruction writes (a parameter) that an access reads: its view,
    /// read on entry, so that an access compares the index with a length
    /// in a register instead of loading the view each time.
    hoisted: HashMap<u32, Hoisted>,
    /// Array registers written once, by an instruction of the entry block
    /// (which every other instruction follows): their views are read
    /// right after that instruction, by `pc`.
    hoist_at: HashMap<usize, Vec<u32>>,
    /// Where the function reads no view once ([`T::hoist_views`]): its
    /// innermost loops that read theirs on every edge into them
    /// ([`crate::loops`]), each with the variables its views are in.
    loop_views: Vec<(LoopViews, Vec<(u32, Hoisted)>)>,
    /// Per leader (by index): the loop of `loop_views` its block is in.
    loop_of: Vec<Option<usize>>,
    /// The loop of `loop_views` each header (`pc`) starts.
    loop_header: HashMap<usize, usize>,
    /// The index in `starts` of the block being translated.
    cur: usize,
    /// The counted loops ([`Counted`]), by their header's leader index.
    counted: HashMap<usize, Counted>,
    /// The copy of a counted loop being translated, if any.
    copy: Option<LoopCopy>,
    /// Where the function has counted loops: a stack slot holding one more
    /// than the most instructions that leave `COUNTED_STEPS_MOST` of fuel,
    /// or 0 if the fuel is less (so `s` below it says a counted loop's
    /// iterations cannot run out of fuel). In memory, not in a value: a
    /// value live through the function took a register from its loops.
    fuel_room: Option<cranelift_codegen::ir::StackSlot>,
    /// While a counted loop's checked copy is translated: the pushes on
    /// and pops from each stack of each instruction (comms pushes, comms
    /// pops, block pushes, block pops), as `push_in` and `pop_in` emit
    /// them, for the guard of the unchecked copy.
    effects: Option<HashMap<usize, [u64; 4]>>,
    /// The math helper calls emitted so far: a counted loop calls one if
    /// the count moved while its checked copy was translated (as the
    /// translation emitted the calls, no list of opcodes to keep in step),
    /// and an instruction that emitted one must be one [`calls_out`]
    /// lists (a debug assertion in [`T::block`]).
    math_calls: u64,
    /// Whether the function's own instructions use the AD stacks and the
    /// arrays ([`touches`]): the cached fields of the others are never
    /// read from the context nor written back.
    touch: Touch,
    /// The stack slot of [`StepsFrom`] (one per function: counted loops
    /// are innermost, so one runs at a time).
    steps_slot: Option<cranelift_codegen::ir::StackSlot>,
    /// The registers live on entry to each block, in functions with
    /// counted loops ([`T::leave`]).
    live: Option<Live>,
}

/// The instruction count in the unchecked copy of a one-block counted
/// loop, derived from the counter instead of kept in a register: every
/// iteration runs the block's `len` instructions, so with `base` (in
/// `slot`) the count on entry less (going up) or plus (going down) `len`
/// times the counter's first value, the count once an iteration with
/// counter `c` has begun is `base + len·(c + 1)` going up and `base -
/// len·(c - 1)` going down, in wrapping arithmetic. The loop then holds no
/// register for the count (a loop with a math call had to keep its
/// counter in a stack slot for want of one).
#[derive(Clone, Copy)]
struct StepsFrom {
    slot: cranelift_codegen::ir::StackSlot,
    len: i64,
    up: bool,
}

/// Which groups of cached context fields ([`CACHED`]) a function's own
/// instructions use. A call does not count: the callee reads what it
/// uses from the context, which the caller leaves as it found it when it
/// uses none of a group.
#[derive(Clone, Copy)]
struct Touch {
    stacks: bool,
    arrays: bool,
}

/// [`Touch`] of `f`. A function that uses neither (most primal code
/// without arrays) enters and returns without reading or writing the
/// stacks' or arrays' fields.
fn touches(f: &Function) -> Touch {
    let mut t = Touch {
        stacks: false,
        arrays: false,
    };
    for ins in &f.code {
        match ins.op {
            Op::BlkPush
            | Op::BlkPop
            | Op::CommsPush
            | Op::CommsPop
            | Op::CommsReserve
            | Op::CommsPushR
            | Op::AccMulPop
            | Op::AccMulPopMul
            | Op::MulPop
            | Op::MulPush => t.stacks = true,
            Op::ANew
            | Op::ALen
            | Op::AGet
            | Op::AGetAdd
            | Op::AGetPair
            | Op::AddMulAGet
            | Op::AccMulAGetAdd
            | Op::ASet
            | Op::ShadowAcc
            | Op::ShadowAccMul
            | Op::ShadowTake
            | Op::LenCheck => t.arrays = true,
            _ => {}
        }
    }
    t
}

/// One of the two copies of a [`Counted`] loop ([`T::counted_loop`]).
struct LoopCopy {
    /// Whether it is the copy run when the guard has found that no fuel,
    /// interrupt or bounds check of the loop would fire.
    unchecked: bool,
    /// The copy's blocks by `pc`: its header's (in the checked copy, the
    /// only one of its own: its other blocks are the function's), and in
    /// the unchecked copy every block's.
    blocks: HashMap<usize, Block>,
    /// The accesses (`pc`, array register, shadow?) the unchecked copy
    /// makes without a bounds check.
    accesses: HashSet<(usize, u32, bool)>,
    /// For each of `accesses` whose index is the counter plus invariant
    /// registers: the address of element `offsets` (the view's address
    /// plus 8 times their sum, computed by the guard), so that the access
    /// is at that address plus 8 times the counter. A value made for the
    /// loop, dead after it, instead of the view's address (live through the
    /// function) and the sum done again on every iteration.
    pointers: HashMap<(usize, u32, bool), Value>,
    /// The counter's register.
    counter: u32,
    /// In the unchecked copy of a one-block loop with a math call: where
    /// its instruction count comes from.
    steps_from: Option<StepsFrom>,
    /// Whether the unchecked copy pushes on (or pops from) the comms
    /// stack and the block stack without looking at its room (or length).
    stacks: [bool; 2],
    /// The registers the copy writes, which the edges into and out of it
    /// define again where they are live across a call ([`T::leave`]).
    written: Vec<u32>,
}

/// The context fields compiled code keeps in variables between helpers
/// and calls: the AD stacks' buffers, lengths and capacities and the
/// arrays' views. The lengths (the only ones compiled code changes) are
/// written back before every helper that uses the stacks, every call and
/// every return ([`T::spill`]); all are read again after a helper or call
/// that may change them ([`T::reload`]). So the stack lengths live in
/// machine registers across a loop instead of going through memory at
/// every push and pop.
const CACHED: [i32; 8] = [
    OFF_COMMS_PTR,
    OFF_COMMS_LEN,
    OFF_COMMS_CAP,
    OFF_BLK_PTR,
    OFF_BLK_LEN,
    OFF_BLK_CAP,
    OFF_ARR_TAB,
    OFF_ARR_N,
];

/// The helpers that use or change the AD stacks (`stacks` in `native.rs`).
const STACK_HELPERS: [&str; 6] = [
    "advm_comms_push",
    "advm_comms_reserve",
    "advm_comms_push_r",
    "advm_comms_pop",
    "advm_blk_push",
    "advm_blk_pop",
];

/// The most array views (an array's elements or its shadow) a function
/// reads once ([`T::hoist_views`]); a function accessing more reads none
/// once.
const HOIST_MOST: usize = 8;

/// An array register's view read once on entry ([`T::hoisted`]): the
/// lengths and addresses of its elements and shadow, or zeros for a
/// handle outside the views.
#[derive(Clone, Copy)]
struct Hoisted {
    len: Variable,
    data: Variable,
    shadow_len: Variable,
    shadow: Variable,
}

/// What an array access in place does with the element ([`T::in_place`]).
#[derive(Clone, Copy)]
enum Elem {
    /// Nothing: the length is the result (`alen`).
    Len,
    /// Read it (`aget`).
    Load,
    /// Write the value (`aset`).
    Store(Value),
    /// Add the value (`shadow.acc`).
    Add(Value),
    /// Read it and write 0 (`shadow.take`).
    Take,
}

/// Where a stack's buffer, length and capacity are in the context, and
/// the log2 of its element size.
#[derive(Clone, Copy)]
struct Stack {
    /// 0 for the comms stack, 1 for the block stack.
    index: usize,
    ptr: i32,
    len: i32,
    cap: i32,
    shift: i64,
}

const COMMS: Stack = Stack {
    index: 0,
    ptr: OFF_COMMS_PTR,
    len: OFF_COMMS_LEN,
    cap: OFF_COMMS_CAP,
    shift: 3,
};

const BLK: Stack = Stack {
    index: 1,
    ptr: OFF_BLK_PTR,
    len: OFF_BLK_LEN,
    cap: OFF_BLK_CAP,
    shift: 2,
};

fn mem() -> MemFlagsData {
    MemFlagsData::trusted()
}

impl T<'_, '_> {
    /// Helper `name`, imported into the function on first use. Every name
    /// used below is in `native::helpers` (a test checks that each helper
    /// translates).
    fn helper(&mut self, name: &str) -> FuncRef {
        let k = self
            .refs
            .helpers
            .iter()
            .position(|h| h.name == name)
            .unwrap_or_else(|| panic!("no helper {name}"));
        if let Some(r) = self.imported[k] {
            return r;
        }
        let h = &self.refs.helpers[k];
        let sig = self.b.import_signature(h.sig.clone());
        let name = self
            .b
            .func
            .declare_imported_user_function(UserExternalName::new(0, h.id));
        let r = self.b.import_function(ExtFuncData {
            name: ExternalName::user(name),
            signature: sig,
            // Helpers are imported symbols (`Linkage::Import`), as
            // `Module::declare_func_in_func` would declare them.
            colocated: false,
            patchable: false,
        });
        self.imported[k] = Some(r);
        r
    }

    fn site(&mut self, pc: usize) -> Value {
        self.b.ins().iconst(types::I64, site(self.fid, pc) as i64)
    }

    fn get(&mut self, r: u32) -> Value {
        self.b.use_var(self.regs[r as usize])
    }

    fn set(&mut self, r: u32, v: Value) {
        self.b.def_var(self.regs[r as usize], v)
    }

    fn ty(&self, r: u32) -> CType {
        ctype(self.f.reg_types[r as usize])
    }

    fn raw_bits(&mut self, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == types::F64 {
            self.b.ins().bitcast(types::I64, MemFlagsData::new(), v)
        } else {
            v
        }
    }

    /// Write 64 bits to register `r`.
    fn set_bits(&mut self, r: u32, v: Value) {
        let v = self.typed(v, self.ty(r));
        self.set(r, v)
    }

    /// Zero bits as a value of type `t` (an `f64` made as one, not moved
    /// from an integer register).
    fn zero(&mut self, t: CType) -> Value {
        if t == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().iconst(types::I64, 0)
        }
    }

    fn typed(&mut self, v: Value, t: CType) -> Value {
        let vt = self.b.func.dfg.value_type(v);
        if vt == t {
            v
        } else {
            self.b.ins().bitcast(t, MemFlagsData::new(), v)
        }
    }

    /// The instructions executed once `pc` (of the current block) has.
    fn done(&mut self, pc: usize) -> Value {
        let s = match self.steps_from() {
            Some((d, counter)) => {
                let c = self.get(counter);
                self.steps_at(d, c, 1)
            }
            None => self.b.use_var(self.s),
        };
        let back = (self.end - 1 - pc) as i64;
        if back == 0 {
            s
        } else {
            self.b.ins().iadd_imm_s(s, -back)
        }
    }

    /// Where the count comes from in the loop copy being translated, if
    /// from its counter ([`StepsFrom`]), and the counter's register.
    fn steps_from(&self) -> Option<(StepsFrom, u32)> {
        let c = self.copy.as_ref()?;
        Some((c.steps_from?, c.counter))
    }

    /// The count of [`StepsFrom`] `d` with the counter at `c`: `base +
    /// len·(c + k)` going up, `base - len·(c - k)` going down (`k` 1 within
    /// an iteration, 0 on the way out, after the counter's step).
    fn steps_at(&mut self, d: StepsFrom, c: Value, k: i64) -> Value {
        let base = self.b.ins().stack_load(types::I64, types::I64, d.slot, 0);
        let sign = if d.up { 1 } else { -1 };
        let c = self.b.ins().iadd_imm_s(c, sign * k);
        let t = self.b.ins().imul_imm_s(c, d.len);
        if d.up {
            self.b.ins().iadd(base, t)
        } else {
            self.b.ins().isub(base, t)
        }
    }

    fn ctx_load(&mut self, off: i32) -> Value {
        self.b.ins().load(types::I64, mem(), self.ctx, off)
    }

    fn ctx_store(&mut self, v: Value, off: i32) {
        self.b.ins().store(mem(), v, self.ctx, off);
    }

    fn cvar(&self, off: i32) -> Variable {
        let k = CACHED.iter().position(|o| *o == off).unwrap_or(0);
        // A field of a group the function was found not to use is never
        // read from the context: an instruction missing from `touches`.
        debug_assert!(
            if k < 6 {
                self.touch.stacks
            } else {
                self.touch.arrays
            },
            "a cached context field used by an instruction `touches` does not list"
        );
        self.cached[k]
    }

    /// A cached context field ([`CACHED`]).
    fn cget(&mut self, off: i32) -> Value {
        let var = self.cvar(off);
        self.b.use_var(var)
    }

    fn cset(&mut self, off: i32, v: Value) {
        let var = self.cvar(off);
        self.b.def_var(var, v)
    }

    /// Write the stack lengths back to the context.
    fn spill(&mut self) {
        if !self.touch.stacks {
            return;
        }
        for off in [OFF_COMMS_LEN, OFF_BLK_LEN] {
            let v = self.cget(off);
            self.ctx_store(v, off);
        }
    }

    /// Read the stacks' fields (`stacks`) and the arrays' (`arrays`) from
    /// the context again.
    fn reload(&mut self, stacks: bool, arrays: bool) {
        let (stacks, arrays) = (stacks && self.touch.stacks, arrays && self.touch.arrays);
        for (k, off) in CACHED.iter().enumerate() {
            if (k < 6 && stacks) || (k >= 6 && arrays) {
                let v = self.ctx_load(*off);
                self.cset(*off, v);
            }
        }
    }

    /// If `cond`, trap with `code` at `pc`.
    fn trap_if(&mut self, cond: Value, pc: usize, code: i64, payload: Value) {
        self.trap_if_with(cond, pc, code, |_| payload);
    }

    /// If `cond`, trap with `code` at `pc` and payload 0 (made in the cold
    /// block, off the path that does not trap).
    fn trap_if_zero(&mut self, cond: Value, pc: usize, code: i64) {
        self.trap_if_with(cond, pc, code, |t| t.b.ins().iconst(types::I64, 0));
    }

    /// If `cond`, trap with `code` at `pc` and the payload `payload` makes
    /// in the cold block.
    fn trap_if_with(
        &mut self,
        cond: Value,
        pc: usize,
        code: i64,
        payload: impl FnOnce(&mut Self) -> Value,
    ) {
        let cold = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let payload = payload(self);
        self.trap_now(pc, code, payload);
        self.b.switch_to_block(cont);
    }

    /// Trap with `code` at `pc` (ends the current block).
    fn trap_now(&mut self, pc: usize, code: i64, payload: Value) {
        let site = self.site(pc);
        let code = self.b.ins().iconst(types::I64, code);
        let h = self.helper("advm_trap");
        let ctx = self.ctx;
        self.b.ins().call(h, &[ctx, site, code, payload]);
        self.unwind_from(pc);
    }

    /// After a trap at `pc`: hand the count at `pc` back and return through
    /// the unwind block (ends the current block).
    fn unwind_from(&mut self, pc: usize) {
        let done = self.done(pc);
        self.ctx_store(done, OFF_STEPS);
        self.b.ins().jump(self.unwind, &[]);
    }

    /// After a helper that may have trapped at `pc`.
    fn check_helper(&mut self, pc: usize) {
        let t = self.ctx_load(OFF_TRAPPED);
        let cold = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(t, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        self.unwind_from(pc);
        self.b.switch_to_block(cont);
    }

    /// Call helper `name` with the context, the site of `pc` and `args`.
    fn call_helper(&mut self, name: &str, pc: usize, args: &[Value]) -> Option<Value> {
        let h = self.helper(name);
        let site = self.site(pc);
        let mut all = vec![self.ctx, site];
        all.extend_from_slice(args);
        let stacks = STACK_HELPERS.contains(&name);
        if stacks {
            self.spill();
        }
        let call = self.b.ins().call(h, &all);
        let r = self.b.inst_results(call).first().copied();
        if stacks || name == "advm_anew" {
            self.reload(stacks, true);
        }
        r
    }

    /// A helper that always traps (an array access the views do not
    /// cover: a bad handle or an index out of bounds, for which the
    /// interpreter traps too): call it, then return through the unwind
    /// block. Ends the current block; `None`.
    fn trapping(&mut self, name: &str, pc: usize, args: &[Value]) -> Option<Value> {
        self.call_helper(name, pc, args);
        self.unwind_from(pc);
        None
    }

    /// A fallible helper: call, then check.
    fn fallible(&mut self, name: &str, pc: usize, args: &[Value]) -> Option<Value> {
        let r = self.call_helper(name, pc, args);
        self.check_helper(pc);
        r
    }

    fn math1(&mut self, name: &str, a: Value) -> Value {
        self.math_calls += 1;
        let h = self.helper(name);
        let call = self.b.ins().call(h, &[a]);
        self.b.inst_results(call)[0]
    }

    fn math2(&mut self, name: &str, a: Value, c: Value) -> Value {
        self.math_calls += 1;
        let h = self.helper(name);
        let call = self.b.ins().call(h, &[a, c]);
        self.b.inst_results(call)[0]
    }

    /// `a * b`, but 0 where either is zero and the product is nan
    /// (`vm::math::mul_z`). As in the interpreter, the common case is the
    /// product and one predicted branch (a select would put the compares
    /// on the product's dependency chain: a loop carrying it through
    /// `acc.mul.pop.mul` ran at a third of the speed); the nan case is
    /// a cold block.
    fn mul_z(&mut self, a: Value, c: Value) -> Value {
        let p = self.b.ins().fmul(a, c);
        self.nan_fixup(p, |t, p| {
            let zero = t.b.ins().f64const(0.0);
            let az = t.b.ins().fcmp(FloatCC::Equal, a, zero);
            let bz = t.b.ins().fcmp(FloatCC::Equal, c, zero);
            let z = t.b.ins().bor(az, bz);
            t.b.ins().select(z, zero, p)
        })
    }

    /// Whether register `r` is a constant register no instruction writes
    /// whose value is a finite nonzero `f64`: a strong-zero product with it
    /// is nan only where the other factor is nan (and so not zero), so it
    /// is the plain product, and a quotient by it likewise.
    fn finite_nonzero(&self, r: u32) -> bool {
        let np = self.f.param_types.len() as u32;
        if r < np || self.writes.get(r as usize).is_none_or(|w| w.0 > 0) {
            return false;
        }
        let c = self
            .f
            .consts
            .get((r - np) as usize)
            .map(|b| f64::from_bits(*b));
        self.f.reg_types.get(r as usize) == Some(&Type::F64)
            && c.is_some_and(|c| c.is_finite() && c != 0.0)
    }

    /// `mul_z` of registers `ra` and `rb`: the plain product where one of
    /// them is [`T::finite_nonzero`].
    fn mul_zr(&mut self, ra: u32, rb: u32) -> Value {
        let (a, c) = (self.get(ra), self.get(rb));
        let plain = self.finite_nonzero(ra) || self.finite_nonzero(rb);
        self.mul_z_or_plain(a, c, plain)
    }

    /// `mul_z(a, c)`, or where `plain` (a factor [`T::finite_nonzero`])
    /// the product itself.
    fn mul_z_or_plain(&mut self, a: Value, c: Value, plain: bool) -> Value {
        if plain {
            self.b.ins().fmul(a, c)
        } else {
            self.mul_z(a, c)
        }
    }

    /// `a / b`, but 0 where `a` is zero and the quotient nan
    /// (`vm::math::div_z`), likewise.
    fn div_z(&mut self, a: Value, c: Value) -> Value {
        let q = self.b.ins().fdiv(a, c);
        self.nan_fixup(q, |t, q| {
            let zero = t.b.ins().f64const(0.0);
            let az = t.b.ins().fcmp(FloatCC::Equal, a, zero);
            t.b.ins().select(az, zero, q)
        })
    }

    /// `v`, or where it is nan, `fix(v)` (computed in a cold block).
    fn nan_fixup(&mut self, v: Value, fix: impl FnOnce(&mut Self, Value) -> Value) -> Value {
        let nan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
        let cold = self.b.create_block();
        let join = self.b.create_block();
        let out = self.b.append_block_param(join, types::F64);
        self.b.set_cold_block(cold);
        self.b.ins().brif(nan, cold, &[], join, &[v.into()]);
        self.b.switch_to_block(cold);
        let w = fix(self, v);
        self.b.ins().jump(join, &[w.into()]);
        self.b.switch_to_block(join);
        out
    }

    fn bool64(&mut self, c: Value) -> Value {
        self.b.ins().uextend(types::I64, c)
    }

    fn truthy(&mut self, r: u32) -> Value {
        let v = self.get(r);
        self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
    }

    /// The block at leader `pc`: in a copy of a counted loop, the copy's.
    fn block_at(&self, pc: usize) -> Block {
        if let Some(b) = self.copy.as_ref().and_then(|c| c.blocks.get(&pc)) {
            return *b;
        }
        self.blocks[&pc]
    }

    /// Whether a jump to `target` stays in the unchecked copy of a counted
    /// loop: it looks at neither fuel nor the interrupt flag.
    fn unchecked_jump(&self, target: usize) -> bool {
        self.copy
            .as_ref()
            .is_some_and(|c| c.unchecked && c.blocks.contains_key(&target))
    }

    /// A taken jump at `pc` to `target`: fuel, then (backward) the
    /// interrupt flag, then the jump. Ends the current block.
    fn taken(&mut self, pc: usize, target: usize) {
        if !self.unchecked_jump(target) {
            self.poll(pc, target <= pc);
        }
        self.leave(target);
        self.entering(target);
        let blk = self.block_at(target);
        self.b.ins().jump(blk, &[]);
    }

    /// On an edge from the current block to the block at `target`: if
    /// that is the header of a loop of [`T::loop_views`] and the current
    /// block is outside the loop, read the loop's views.
    fn entering(&mut self, target: usize) {
        let Some(&l) = self.loop_header.get(&target) else {
            return;
        };
        if self.loop_views[l].0.contains(self.cur) {
            return;
        }
        for k in 0..self.loop_views[l].1.len() {
            let (r, view) = self.loop_views[l].1[k];
            self.read_view(r, view);
        }
    }

    /// Whether an edge from the current block to `target` reads views
    /// ([`T::entering`]).
    fn enters(&self, target: usize) -> bool {
        self.loop_header
            .get(&target)
            .is_some_and(|l| !self.loop_views[*l].0.contains(self.cur))
    }

    /// The look at fuel (and the interrupt flag) of a taken jump at `pc`.
    fn poll(&mut self, pc: usize, interrupt: bool) {
        let done = self.done(pc);
        let over = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, done, self.fuel);
        self.trap_if_zero(over, pc, T_FUEL);
        if interrupt {
            let p = self.ctx_load(OFF_INTERRUPT);
            let flag = self.b.ins().uload8(types::I32, mem(), p, 0);
            self.trap_if_zero(flag, pc, T_INTERRUPTED);
        }
    }

    /// On an edge out of a counted loop's unchecked copy to `target`:
    /// each register the loop writes that `target` reads and that is live
    /// across a call somewhere, defined again ([`T::define_again`]), so
    /// that the value in the loop and the value after it are different
    /// values to the register allocator. As one value, live both in a
    /// loop without a call and across a call after it, it was kept in a
    /// stack slot in the loop too (logsumexp's maximum: stored and loaded
    /// again on every iteration, on the loop's one dependency chain). The
    /// guard does the same on the edge in.
    fn leave(&mut self, target: usize) {
        let again = self.again_at(target);
        self.define_again(&again);
    }

    /// The registers [`T::leave`] defines again on an edge from the
    /// current block to `target`: none unless it leaves an unchecked copy.
    fn again_at(&self, target: usize) -> Vec<u32> {
        let (Some(c), Some(live)) = (self.copy.as_ref(), self.live.as_ref()) else {
            return Vec::new();
        };
        if !c.unchecked || c.blocks.contains_key(&target) {
            return Vec::new();
        }
        live.carried(&c.written, target)
    }

    /// Define registers `regs` again, each by an instruction that keeps
    /// its bits: an `f64` moved through an integer register, an integer
    /// plus zero (which the register allocator cannot join as a move).
    fn define_again(&mut self, regs: &[u32]) {
        for &r in regs {
            let v = self.get(r);
            let v = if self.ty(r) == types::F64 {
                let i = self.b.ins().bitcast(types::I64, MemFlagsData::new(), v);
                self.b.ins().bitcast(types::F64, MemFlagsData::new(), i)
            } else {
                self.b.ins().iadd_imm_s(v, 0)
            };
            self.set(r, v);
        }
    }

    /// Whether an edge from the current block to `target` leaves an
    /// unchecked copy with values to define again ([`T::leave`]).
    fn leaves(&self, target: usize) -> bool {
        !self.again_at(target).is_empty()
    }

    /// A conditional jump at `pc`: to `target` if `cond`, else on.
    fn branch(&mut self, pc: usize, cond: Value, target: usize) {
        let edge = self.b.create_block();
        let steps = self.steps_from();
        if steps.is_some() || self.enters(pc + 1) || self.leaves(pc + 1) {
            // The edge on has work of its own: in a one-block counted
            // loop's unchecked copy, the count derived from the stepped
            // counter on the way out; the views of a loop it enters; the
            // values of an unchecked copy it leaves.
            let on = self.b.create_block();
            self.b.ins().brif(cond, edge, &[], on, &[]);
            self.b.switch_to_block(on);
            if let Some((d, counter)) = steps {
                let c = self.get(counter);
                let s = self.steps_at(d, c, 0);
                self.b.def_var(self.s, s);
            }
            self.entering(pc + 1);
            self.leave(pc + 1);
            let next = self.block_at(pc + 1);
            self.b.ins().jump(next, &[]);
        } else {
            let next = self.block_at(pc + 1);
            self.b.ins().brif(cond, edge, &[], next, &[]);
        }
        self.b.switch_to_block(edge);
        self.taken(pc, target);
    }

    /// Translate the instruction at `pc`; `false` if it ended the block.
    fn instr(&mut self, pc: usize) -> bool {
        let ins = self.f.code[pc];
        let (r0, r1, r2, x) = (ins.r0 as u32, ins.r1 as u32, ins.r2 as u32, ins.x);
        macro_rules! ff {
            (|$a:ident, $c:ident| $e:expr) => {{
                let $a = self.get(r1);
                let $c = self.get(r2);
                let v = $e;
                self.set(r0, v);
            }};
        }
        macro_rules! uf {
            (|$a:ident| $e:expr) => {{
                let $a = self.get(r1);
                let v = $e;
                self.set(r0, v);
            }};
        }
        macro_rules! m1 {
            ($name:expr) => {
                uf!(|a| self.math1($name, a))
            };
        }
        macro_rules! fcmp {
            ($cc:expr) => {{
                let a = self.get(r1);
                let c = self.get(r2);
                let v = self.b.ins().fcmp($cc, a, c);
                let v = self.bool64(v);
                self.set(r0, v);
            }};
        }
        macro_rules! icmp {
            ($cc:expr) => {{
                let a = self.get(r1);
                let c = self.get(r2);
                let v = self.b.ins().icmp($cc, a, c);
                let v = self.bool64(v);
                self.set(r0, v);
            }};
        }
        macro_rules! jf {
            ($cc:expr, $neg:expr) => {{
                let a = self.get(r0);
                let c = self.get(r1);
                let mut v = self.b.ins().fcmp($cc, a, c);
                if $neg {
                    v = self.b.ins().bxor_imm_s(v, 1);
                }
                self.branch(pc, v, x as usize);
                return false;
            }};
        }
        macro_rules! ji {
            ($cc:expr) => {{
                let a = self.get(r0);
                let c = self.get(r1);
                let v = self.b.ins().icmp($cc, a, c);
                self.branch(pc, v, x as usize);
                return false;
            }};
        }
        macro_rules! jstep {
            ($cc:expr) => {{
                let a = self.get(r0);
                let st = self.get(r1);
                let v = self.b.ins().iadd(a, st);
                self.set(r0, v);
                let lim = self.get(r2);
                let c = self.b.ins().icmp($cc, v, lim);
                self.branch(pc, c, x as usize);
                return false;
            }};
        }
        match ins.op {
            Op::AddF => ff!(|a, c| self.b.ins().fadd(a, c)),
            Op::SubF => ff!(|a, c| self.b.ins().fsub(a, c)),
            Op::MulF => ff!(|a, c| self.b.ins().fmul(a, c)),
            Op::DivF => ff!(|a, c| self.b.ins().fdiv(a, c)),
            Op::PowF => ff!(|a, c| self.math2(sym::m_pow, a, c)),
            Op::MinF => ff!(|a, c| {
                let lt = self.b.ins().fcmp(FloatCC::LessThan, c, a);
                self.b.ins().select(lt, c, a)
            }),
            Op::MaxF => ff!(|a, c| {
                let gt = self.b.ins().fcmp(FloatCC::GreaterThan, c, a);
                self.b.ins().select(gt, c, a)
            }),
            Op::NegF => uf!(|a| self.b.ins().fneg(a)),
            Op::Sin => m1!(sym::m_sin),
            Op::Cos => m1!(sym::m_cos),
            Op::SinCos => {
                let a = self.get(r2);
                let s = self.math1(sym::m_sin, a);
                let c = self.math1(sym::m_cos, a);
                self.set(r0, s);
                self.set(r1, c);
            }
            Op::Tan => m1!(sym::m_tan),
            Op::Exp => m1!(sym::m_exp),
            Op::Log => m1!(sym::m_log),
            Op::Sqrt => uf!(|a| self.b.ins().sqrt(a)),
            Op::Tanh => m1!(sym::m_tanh),
            Op::AbsF => uf!(|a| self.b.ins().fabs(a)),
            Op::Erf => m1!(sym::m_erf),
            Op::Erfc => m1!(sym::m_erfc),
            Op::Atan => m1!(sym::m_atan),
            Op::Asin => m1!(sym::m_asin),
            Op::Acos => m1!(sym::m_acos),
            Op::Atan2 => ff!(|a, c| self.math2(sym::m_atan2, a, c)),
            Op::Sinh => m1!(sym::m_sinh),
            Op::Cosh => m1!(sym::m_cosh),
            Op::Log1p => m1!(sym::m_log1p),
            Op::Expm1 => m1!(sym::m_expm1),
            Op::Log2 => m1!(sym::m_log2),
            Op::Log10 => m1!(sym::m_log10),
            Op::Cbrt => m1!(sym::m_cbrt),
            Op::Hypot => ff!(|a, c| self.math2(sym::m_hypot, a, c)),
            Op::Floor => uf!(|a| self.b.ins().floor(a)),
            Op::Ceil => uf!(|a| self.b.ins().ceil(a)),
            Op::Round => m1!(sym::m_round),
            Op::Trunc => uf!(|a| self.b.ins().trunc(a)),
            Op::AddI => ff!(|a, c| self.b.ins().iadd(a, c)),
            Op::SubI => ff!(|a, c| self.b.ins().isub(a, c)),
            Op::MulI => ff!(|a, c| self.b.ins().imul(a, c)),
            Op::DivI | Op::RemI => {
                let a = self.get(r1);
                let div = ins.op == Op::DivI;
                let v = match self.const_divisor(r2) {
                    Some(k) => self.div_by_const(a, k, div),
                    None => self.div_checked(pc, a, r2, div),
                };
                self.set(r0, v);
            }
            Op::MinI => ff!(|a, c| {
                let lt = self.b.ins().icmp(IntCC::SignedLessThan, c, a);
                self.b.ins().select(lt, c, a)
            }),
            Op::MaxI => ff!(|a, c| {
                let gt = self.b.ins().icmp(IntCC::SignedGreaterThan, c, a);
                self.b.ins().select(gt, c, a)
            }),
            Op::NegI => uf!(|a| self.b.ins().ineg(a)),
            Op::LtF => fcmp!(FloatCC::LessThan),
            Op::LeF => fcmp!(FloatCC::LessThanOrEqual),
            Op::GtF => fcmp!(FloatCC::GreaterThan),
            Op::GeF => fcmp!(FloatCC::GreaterThanOrEqual),
            Op::EqF => fcmp!(FloatCC::Equal),
            Op::NeF => fcmp!(FloatCC::NotEqual),
            Op::LtI => icmp!(IntCC::SignedLessThan),
            Op::LeI => icmp!(IntCC::SignedLessThanOrEqual),
            Op::GtI => icmp!(IntCC::SignedGreaterThan),
            Op::GeI => icmp!(IntCC::SignedGreaterThanOrEqual),
            Op::EqI => icmp!(IntCC::Equal),
            Op::NeI => icmp!(IntCC::NotEqual),
            Op::And | Op::Or => {
                let a = self.truthy(r1);
                let c = self.truthy(r2);
                let v = if ins.op == Op::And {
                    self.b.ins().band(a, c)
                } else {
                    self.b.ins().bor(a, c)
                };
                let v = self.bool64(v);
                self.set(r0, v);
            }
            Op::Not => {
                let v = self.get(r1);
                let c = self.b.ins().icmp_imm_s(IntCC::Equal, v, 0);
                let c = self.bool64(c);
                self.set(r0, c);
            }
            Op::Select => {
                // The three registers are of one type: a select of the
                // values themselves (of `f64` values a move and a branch
                // over a second move on x86-64, not their bits through
                // integer registers).
                let c = self.truthy(r1);
                let a = self.get(r2);
                let d = self.get(x);
                let v = self.b.ins().select(c, a, d);
                let v = self.typed(v, self.ty(r0));
                self.set(r0, v);
            }
            Op::Mov | Op::NoGrad => {
                // Of registers of one machine type, the value itself (an
                // `f64` through an integer register and back was two
                // moves on every copy).
                let v = self.get(r1);
                let v = self.typed(v, self.ty(r0));
                self.set(r0, v);
            }
            Op::ItoF => uf!(|a| self.b.ins().fcvt_from_sint(types::F64, a)),
            Op::FtoI => {
                let a = self.get(r1);
                let t = self.b.ins().trunc(a);
                let lo = self.b.ins().f64const(-9.223_372_036_854_776e18);
                let hi = self.b.ins().f64const(9.223_372_036_854_776e18);
                let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, t, lo);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, t, hi);
                let ok = self.b.ins().band(ge, lt);
                let bad = self.b.ins().bxor_imm_s(ok, 1);
                // The operand's bits, the trap's payload, made in the cold
                // block.
                self.trap_if_with(bad, pc, T_FTOI, |t| t.raw_bits(a));
                let v = self.b.ins().fcvt_to_sint_sat(types::I64, t);
                self.set(r0, v);
            }
            Op::ANew => {
                let n = self.get(r1);
                let h = self.fallible("advm_anew", pc, &[n]);
                self.set_result(r0, h);
            }
            Op::ALen => {
                let n = self.in_place(pc, r1, None, AV_LEN, types::I64, Elem::Len, |t| {
                    let h = t.get(r1);
                    t.trapping("advm_alen", pc, &[h])
                });
                self.set_result(r0, n);
            }
            Op::AGet | Op::AGetAdd => {
                let mut i = self.get(r2);
                if ins.op == Op::AGetAdd {
                    let j = self.get(x);
                    i = self.b.ins().iadd(i, j);
                }
                let v = self.in_place(pc, r1, Some(i), AV_DATA, types::F64, Elem::Load, |t| {
                    let h = t.get(r1);
                    t.trapping("advm_aget", pc, &[h, i])
                });
                self.set_result(r0, v);
            }
            Op::AddMulAGet => {
                // `r0 = r1 + r2[x0] ⊙ x1`: the load first (it may trap),
                // then the product rounded and added, as the interpreter.
                let (k, f) = (ins.reg(3), ins.reg(4));
                let i = self.get(k);
                let v = self.in_place(pc, r2, Some(i), AV_DATA, types::F64, Elem::Load, |t| {
                    let h = t.get(r2);
                    t.trapping("advm_aget", pc, &[h, i])
                });
                if let Some(v) = v {
                    let v = self.typed(v, types::F64);
                    let s = self.get(r1);
                    let q = self.get(f);
                    let m = self.mul_z(v, q);
                    let v = self.b.ins().fadd(s, m);
                    self.set(r0, v);
                }
            }
            Op::AGetPair => {
                // `r0 = r2[x1]; r1 = x0[x1]`: the two loads in turn, each
                // as `aget` (the first traps before the second is tried),
                // then the two writes, as the interpreter.
                let (a2, k) = (ins.reg(3), ins.reg(4));
                let i = self.get(k);
                let v = self.in_place(pc, r2, Some(i), AV_DATA, types::F64, Elem::Load, |t| {
                    let h = t.get(r2);
                    t.trapping("advm_aget", pc, &[h, i])
                });
                let w = self.in_place(pc, a2, Some(i), AV_DATA, types::F64, Elem::Load, |t| {
                    let h2 = t.get(a2);
                    t.trapping("advm_aget", pc, &[h2, i])
                });
                self.set_result(r0, v);
                self.set_result(r1, w);
            }
            Op::AccMulAGetAdd => {
                // `r0 += r1[r2 + x0] ⊙ x1`, as `aget.add` then `acc.mul`.
                let (k, f) = (ins.reg(3), ins.reg(4));
                let i = self.get(r2);
                let j = self.get(k);
                let i = self.b.ins().iadd(i, j);
                let v = self.in_place(pc, r1, Some(i), AV_DATA, types::F64, Elem::Load, |t| {
                    let h = t.get(r1);
                    t.trapping("advm_aget", pc, &[h, i])
                });
                if let Some(v) = v {
                    let v = self.typed(v, types::F64);
                    let s = self.get(r0);
                    let q = self.get(f);
                    let m = self.mul_z(v, q);
                    let v = self.b.ins().fadd(s, m);
                    self.set(r0, v);
                }
            }
            Op::ASet => {
                let i = self.get(r1);
                let v = self.get(r2);
                self.in_place(pc, r0, Some(i), AV_DATA, types::F64, Elem::Store(v), |t| {
                    let h = t.get(r0);
                    t.trapping("advm_aset", pc, &[h, i, v])
                });
            }
            Op::Call | Op::CallAcc | Op::CallN => self.call(pc),
            Op::Ret => {
                let v = self.get(r0);
                self.finish_return(pc);
                let v = match ret_ctype(self.f) {
                    Some(t) => self.typed(v, t),
                    None => v,
                };
                self.b.ins().return_(&[v]);
                return false;
            }
            Op::RetN => {
                let list = &self.f.lists[x as usize];
                let out = self.out.unwrap_or(self.ctx);
                for (i, r) in list.clone().iter().enumerate() {
                    let v = self.get(*r as u32);
                    self.b.ins().store(mem(), v, out, (i * 8) as i32);
                }
                self.finish_return(pc);
                self.b.ins().return_(&[]);
                return false;
            }
            Op::Jmp => {
                self.taken(pc, x as usize);
                return false;
            }
            Op::JmpIf => {
                let c = self.truthy(r0);
                self.branch(pc, c, x as usize);
                return false;
            }
            Op::JmpIfNot => {
                let v = self.get(r0);
                let c = self.b.ins().icmp_imm_s(IntCC::Equal, v, 0);
                self.branch(pc, c, x as usize);
                return false;
            }
            Op::JmpLtI => ji!(IntCC::SignedLessThan),
            Op::JmpLeI => ji!(IntCC::SignedLessThanOrEqual),
            Op::JmpGtI => ji!(IntCC::SignedGreaterThan),
            Op::JmpGeI => ji!(IntCC::SignedGreaterThanOrEqual),
            Op::JmpEqI => ji!(IntCC::Equal),
            Op::JmpNeI => ji!(IntCC::NotEqual),
            Op::JmpLtF => jf!(FloatCC::LessThan, false),
            Op::JmpLeF => jf!(FloatCC::LessThanOrEqual, false),
            Op::JmpGtF => jf!(FloatCC::GreaterThan, false),
            Op::JmpGeF => jf!(FloatCC::GreaterThanOrEqual, false),
            Op::JmpEqF => jf!(FloatCC::Equal, false),
            Op::JmpNeF => jf!(FloatCC::NotEqual, false),
            Op::JmpNotLtF => jf!(FloatCC::LessThan, true),
            Op::JmpNotLeF => jf!(FloatCC::LessThanOrEqual, true),
            Op::JmpNotGtF => jf!(FloatCC::GreaterThan, true),
            Op::JmpNotGeF => jf!(FloatCC::GreaterThanOrEqual, true),
            Op::JmpNotEqF => jf!(FloatCC::Equal, true),
            Op::JmpNotNeF => jf!(FloatCC::NotEqual, true),
            Op::JmpStepLtI => jstep!(IntCC::SignedLessThan),
            Op::JmpStepLeI => jstep!(IntCC::SignedLessThanOrEqual),
            Op::JmpStepGtI => jstep!(IntCC::SignedGreaterThan),
            Op::JmpStepGeI => jstep!(IntCC::SignedGreaterThanOrEqual),
            Op::JmpStepEqI => jstep!(IntCC::Equal),
            Op::JmpStepNeI => jstep!(IntCC::NotEqual),
            Op::BlkPush => {
                let id = self.b.ins().iconst(types::I64, i64::from(x));
                self.push_in(pc, id, 1, "advm_blk_push", &[], BLK);
            }
            Op::BlkPop => {
                self.blk_pop(pc, x as usize);
                return false;
            }
            Op::CommsPush => {
                let v = self.get(r0);
                self.push_fast(pc, v, 1, "advm_comms_push", &[]);
            }
            Op::CommsReserve => {
                let v = self.get(r0);
                let n = self.b.ins().iconst(types::I64, i64::from(x));
                self.push_fast(pc, v, i64::from(x), "advm_comms_reserve", &[n]);
            }
            Op::CommsPushR => {
                let v = self.get(r0);
                self.push_fast(pc, v, 1, "advm_comms_push_r", &[]);
            }
            Op::CommsPop => {
                let v = self.pop_fast(pc, self.ty(r0));
                self.set(r0, v);
            }
            Op::Acc => {
                let a = self.get(r0);
                let c = self.get(r1);
                let v = self.b.ins().fadd(a, c);
                self.set(r0, v);
            }
            Op::AccNeg => {
                let a = self.get(r0);
                let c = self.get(r1);
                let v = self.b.ins().fsub(a, c);
                self.set(r0, v);
            }
            Op::AccMul => {
                let a = self.get(r0);
                let m = self.mul_zr(r1, r2);
                let v = self.b.ins().fadd(a, m);
                self.set(r0, v);
            }
            Op::MulAddF => {
                let a = self.get(r0);
                let p = self.get(r1);
                let q = self.get(r2);
                let m = self.b.ins().fmul(p, q);
                let v = self.b.ins().fadd(a, m);
                self.set(r0, v);
            }
            Op::MulZ => {
                let m = self.mul_zr(r1, r2);
                self.set(r0, m);
            }
            Op::TMaxF | Op::TMinF => {
                let m = self.get(r1);
                let e = self.get(r2);
                let cc = if ins.op == Op::TMaxF {
                    FloatCC::GreaterThan
                } else {
                    FloatCC::LessThan
                };
                let c = self.b.ins().fcmp(cc, e, m);
                let nm = self.b.ins().select(c, e, m);
                let dm = self.get(r0);
                let de = self.get(x);
                let nd = self.b.ins().select(c, de, dm);
                // `r1` first, then `r0`, as the interpreter writes them (a
                // listing may name one register for both: `r0` wins).
                self.set(r1, nm);
                self.set(r0, nd);
            }
            Op::TProdZ => {
                let (c, d) = (ins.reg(3), ins.reg(4));
                let m = self.mul_zr(r1, r2);
                let n = self.mul_zr(c, d);
                let v = self.b.ins().fadd(m, n);
                self.set(r0, v);
            }
            Op::AddMulT | Op::AddSqT => {
                // `r1 += x0 ⊙ x1; r0 += r2 * x1` (or, for a square,
                // `r1 += (x0 ⊙ r2) ⊙ x1; r0 += r2 * r2`), every operand
                // read first, as the interpreter.
                let (t, k) = (ins.reg(3), ins.reg(4));
                let xv = self.get(r2);
                let tv = self.get(t);
                let kv = self.get(k);
                let s = self.get(r0);
                let ds = self.get(r1);
                let (p, q) = if ins.op == Op::AddMulT {
                    (self.b.ins().fmul(xv, kv), self.mul_z(tv, kv))
                } else {
                    let m = self.mul_z(tv, xv);
                    (self.b.ins().fmul(xv, xv), self.mul_z(m, kv))
                };
                let s = self.b.ins().fadd(s, p);
                let ds = self.b.ins().fadd(ds, q);
                self.set(r1, ds);
                self.set(r0, s);
            }
            Op::MulMulZ | Op::AccMulMul => {
                let m = self.mul_zr(r1, r2);
                let c = self.get(x);
                let plain = self.finite_nonzero(x);
                let mut v = self.mul_z_or_plain(m, c, plain);
                if ins.op == Op::AccMulMul {
                    let s = self.get(r0);
                    v = self.b.ins().fadd(s, v);
                }
                self.set(r0, v);
            }
            Op::TMulZ => {
                let m = self.mul_zr(r0, r1);
                let n = self.mul_zr(r2, x);
                let v = self.b.ins().fadd(m, n);
                self.set(r0, v);
            }
            Op::AddMulZ => {
                let s = self.get(r1);
                let m = self.mul_zr(r2, x);
                let v = self.b.ins().fadd(s, m);
                self.set(r0, v);
            }
            Op::DivZ => {
                let a = self.get(r1);
                let c = self.get(r2);
                let q = if self.finite_nonzero(r2) {
                    // Nan only where `a` is, which is then not zero.
                    self.b.ins().fdiv(a, c)
                } else {
                    self.div_z(a, c)
                };
                self.set(r0, q);
            }
            Op::AccMulPop => {
                let v = self.popped(pc);
                let a = self.get(r0);
                let g = self.get(r1);
                let plain = self.finite_nonzero(r1);
                let m = self.mul_z_or_plain(g, v, plain);
                let s = self.b.ins().fadd(a, m);
                self.set(r0, s);
            }
            Op::MulPop => {
                let v = self.popped(pc);
                let g = self.get(r1);
                let plain = self.finite_nonzero(r1);
                let m = self.mul_z_or_plain(g, v, plain);
                self.set(r0, m);
            }
            Op::MulPush => {
                let a = self.get(r1);
                self.push_fast(pc, a, 1, "advm_comms_push", &[]);
                let c = self.get(r2);
                let v = self.b.ins().fmul(a, c);
                self.set(r0, v);
            }
            Op::AccMulPopMul => {
                let v = self.popped(pc);
                let g = self.get(r1);
                let product = self.mul_zr(r1, x);
                let plain = self.finite_nonzero(r1);
                let term = self.mul_z_or_plain(g, v, plain);
                let a = self.get(r0);
                let acc = self.b.ins().fadd(a, term);
                self.set(r2, product);
                self.set(r0, acc);
            }
            Op::Zero => {
                let z = self.zero(self.ty(r0));
                self.set(r0, z);
            }
            Op::LenCheck => {
                let a = self.get(r0);
                let c = self.get(r1);
                self.fallible("advm_len_check", pc, &[a, c]);
            }
            Op::Take => {
                let v = self.get(r1);
                let z = self.zero(self.ty(r1));
                self.set(r1, z);
                self.set_bits(r0, v);
            }
            Op::ShadowAcc | Op::ShadowAccMul => {
                let i = self.get(r1);
                let mut v = self.get(r2);
                if ins.op == Op::ShadowAccMul {
                    v = self.mul_zr(r2, x);
                }
                self.in_place(pc, r0, Some(i), AV_SHADOW, types::F64, Elem::Add(v), |t| {
                    let h = t.get(r0);
                    t.trapping("advm_shadow_add", pc, &[h, i, v])
                });
            }
            Op::ShadowTake => {
                let i = self.get(r2);
                let v = self.in_place(pc, r1, Some(i), AV_SHADOW, types::F64, Elem::Take, |t| {
                    let h = t.get(r1);
                    t.trapping("advm_shadow_take", pc, &[h, i])
                });
                self.set_result(r0, v);
            }
        }
        true
    }

    /// An array access at `pc` in place: element `i` of the array in
    /// register `hreg` (its data, or with `ptr` = `AV_SHADOW` its shadow;
    /// with `i` `None`, the length itself), when the handle is live and
    /// `i` is below the length in its view (read at the access, or once
    /// beforehand: [`T::hoisted`]); else `slow` (the helper, which traps as
    /// the interpreter does). The result (of type `ty`) for `Len`, `Load`
    /// and `Take`.
    #[allow(clippy::too_many_arguments)]
    fn in_place(
        &mut self,
        pc: usize,
        hreg: u32,
        i: Option<Value>,
        ptr: i32,
        ty: CType,
        what: Elem,
        slow: impl FnOnce(&mut Self) -> Option<Value>,
    ) -> Option<Value> {
        let gives = matches!(what, Elem::Len | Elem::Load | Elem::Take);
        if let (Some(i), Some(view)) = (i, self.hoisted.get(&hreg).copied()) {
            let key = (pc, hreg, ptr == AV_SHADOW);
            if self
                .copy
                .as_ref()
                .is_some_and(|c| c.accesses.contains(&key))
            {
                // The guard of the counted loop has checked the index.
                let join = self.b.create_block();
                let out = gives.then(|| self.b.append_block_param(join, ty));
                let at = self
                    .copy
                    .as_ref()
                    .and_then(|c| Some((*c.pointers.get(&key)?, c.counter)));
                match at {
                    // The element `offsets` on: the counter's.
                    Some((p, counter)) => {
                        let k = self.get(counter);
                        self.elem_op(p, k, what, join);
                    }
                    None => {
                        let data = if ptr == AV_SHADOW {
                            view.shadow
                        } else {
                            view.data
                        };
                        let base = self.b.use_var(data);
                        self.elem_op(base, i, what, join);
                    }
                }
                self.b.switch_to_block(join);
                return out;
            }
        }
        let slow_blk = self.b.create_block();
        let join = self.b.create_block();
        let out = gives.then(|| self.b.append_block_param(join, ty));
        self.b.set_cold_block(slow_blk);
        // Where the buffer's address is: in the view (at this address), or
        // in a variable (the view read beforehand).
        enum Base {
            View(Value),
            Read(Variable),
        }
        // The length, and the address. A view read beforehand serves
        // element accesses only: its length is 0 for a handle outside the
        // views, which `alen` must tell from an empty array.
        let (len, base) = match (i, self.hoisted.get(&hreg).copied()) {
            (Some(_), Some(view)) => {
                let (lv, bv) = if ptr == AV_SHADOW {
                    (view.shadow_len, view.shadow)
                } else {
                    (view.len, view.data)
                };
                (self.b.use_var(lv), Base::Read(bv))
            }
            _ => {
                let h = self.get(hreg);
                let (live, k) = self.view_live(h);
                let handle_ok = self.b.create_block();
                self.b.ins().brif(live, handle_ok, &[], slow_blk, &[]);
                self.b.switch_to_block(handle_ok);
                let e = self.view_at(k);
                let len_off = if ptr == AV_SHADOW {
                    AV_SHADOW_LEN
                } else {
                    AV_LEN
                };
                (
                    self.b.ins().load(types::I64, mem(), e, len_off),
                    Base::View(e),
                )
            }
        };
        match i {
            None => {
                self.b.ins().jump(join, &[len.into()]);
            }
            Some(i) => {
                let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, i, len);
                let fast = self.b.create_block();
                self.b.ins().brif(inside, fast, &[], slow_blk, &[]);
                self.b.switch_to_block(fast);
                let base = match base {
                    Base::View(e) => self.b.ins().load(types::I64, mem(), e, ptr),
                    Base::Read(var) => self.b.use_var(var),
                };
                self.elem_op(base, i, what, join);
            }
        }
        self.b.switch_to_block(slow_blk);
        // An access outside the views always traps (`trapping`): the slow
        // block has no way back, so nothing live after the access has to
        // survive the helper call.
        slow(self);
        self.b.switch_to_block(join);
        out
    }

    /// Whether handle `h` has a view (`h - 1` below the views' number,
    /// one unsigned compare), and `h - 1`.
    fn view_live(&mut self, h: Value) -> (Value, Value) {
        let n = self.cget(OFF_ARR_N);
        let k = self.b.ins().iadd_imm_s(h, -1);
        (self.b.ins().icmp(IntCC::UnsignedLessThan, k, n), k)
    }

    /// The address of view `k` (a live handle minus one) in the table.
    fn view_at(&mut self, k: Value) -> Value {
        let tab = self.cget(OFF_ARR_TAB);
        let off = self.b.ins().ishl_imm_s(k, AV_SHIFT);
        self.b.ins().iadd(tab, off)
    }

    /// Element `i` of the buffer at `base`: do `what` to it and jump to
    /// `join` (with the value read, if any).
    fn elem_op(&mut self, base: Value, i: Value, what: Elem, join: Block) {
        let off = self.b.ins().ishl_imm_s(i, 3);
        let addr = self.b.ins().iadd(base, off);
        let r = match what {
            Elem::Len => None,
            Elem::Load => Some(self.b.ins().load(types::F64, mem(), addr, 0)),
            Elem::Store(v) => {
                self.b.ins().store(mem(), v, addr, 0);
                None
            }
            Elem::Add(v) => {
                let a = self.b.ins().load(types::F64, mem(), addr, 0);
                let s = self.b.ins().fadd(a, v);
                self.b.ins().store(mem(), s, addr, 0);
                None
            }
            Elem::Take => {
                let a = self.b.ins().load(types::F64, mem(), addr, 0);
                let z = self.b.ins().f64const(0.0);
                self.b.ins().store(mem(), z, addr, 0);
                Some(a)
            }
        };
        match r {
            Some(v) => self.b.ins().jump(join, &[v.into()]),
            None => self.b.ins().jump(join, &[]),
        };
    }

    /// Push `v` (64 bits) on the comms stack in place if it has room for
    /// `need` more values, else through helper `name` (which grows the
    /// stack or traps at `pc`); `extra` are the helper's arguments after
    /// the value.
    fn push_fast(&mut self, pc: usize, v: Value, need: i64, name: &str, extra: &[Value]) {
        self.push_in(pc, v, need, name, extra, COMMS)
    }

    /// [`T::push_fast`] on either stack.
    fn push_in(&mut self, pc: usize, v: Value, need: i64, name: &str, extra: &[Value], st: Stack) {
        // A reservation counts the room it asks for (its own push and the
        // reserved pushes after it, which count nothing): what the check
        // the unchecked copy leaves out would have asked for.
        let asks = if name == "advm_comms_push_r" {
            0
        } else {
            need.max(1) as u64
        };
        self.effect(pc, st, 0, asks);
        let len = self.cget(st.len);
        if self.unchecked_stack(st) {
            // The guard of the counted loop has checked the room.
            self.push_here(v, len, st);
            return;
        }
        let cap = self.cget(st.cap);
        let spare = self.b.ins().isub(cap, len);
        let room = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, spare, need);
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(room, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        self.push_here(v, len, st);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(slow);
        let mut args = vec![self.raw_bits(v)];
        args.extend_from_slice(extra);
        self.fallible(name, pc, &args);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
    }

    /// Push `v` (an `f64` or 64 bits; on the block stack 32 bits) on
    /// stack `st` of length `len`, which has room.
    fn push_here(&mut self, v: Value, len: Value, st: Stack) {
        let ptr = self.cget(st.ptr);
        let off = self.b.ins().ishl_imm_s(len, st.shift);
        let addr = self.b.ins().iadd(ptr, off);
        if st.shift == 3 {
            self.b.ins().store(mem(), v, addr, 0);
        } else {
            self.b.ins().istore32(mem(), v, addr, 0);
        }
        let len1 = self.b.ins().iadd_imm_s(len, 1);
        self.cset(st.len, len1);
    }

    /// Count `n` pushes (`what` 0) or pops (1) on stack `st` at `pc` in
    /// [`T::effects`], if it is recording.
    fn effect(&mut self, pc: usize, st: Stack, what: usize, n: u64) {
        let k = 2 * st.index + what;
        if let Some(e) = self.effects.as_mut() {
            e.entry(pc).or_insert([0; 4])[k] += n;
        }
    }

    /// Whether the unchecked copy of a counted loop is being translated
    /// and its guard has checked stack `st` for all its pushes or pops.
    fn unchecked_stack(&self, st: Stack) -> bool {
        self.copy
            .as_ref()
            .is_some_and(|c| c.unchecked && c.stacks[st.index])
    }

    /// Pop 64 bits from the comms stack, as a value of type `ty`: in
    /// place if it is not empty, else through the helper (which traps at
    /// `pc`).
    fn pop_fast(&mut self, pc: usize, ty: CType) -> Value {
        self.pop_in(pc, "advm_comms_pop", COMMS, ty)
    }

    /// [`T::pop_fast`] on either stack (the block stack's values `i64`).
    fn pop_in(&mut self, pc: usize, name: &str, st: Stack, ty: CType) -> Value {
        self.effect(pc, st, 1, 1);
        let len = self.cget(st.len);
        if self.unchecked_stack(st) {
            // The guard of the counted loop has checked the length.
            return self.pop_here(len, st, ty);
        }
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let v = self.b.append_block_param(join, ty);
        self.b.set_cold_block(slow);
        self.b.ins().brif(len, fast, &[], slow, &[]);
        self.b.switch_to_block(fast);
        let x = self.pop_here(len, st, ty);
        self.b.ins().jump(join, &[x.into()]);
        self.b.switch_to_block(slow);
        let y = self
            .fallible(name, pc, &[])
            .unwrap_or_else(|| self.b.ins().iconst(types::I64, 0));
        let y = self.typed(y, ty);
        self.b.ins().jump(join, &[y.into()]);
        self.b.switch_to_block(join);
        v
    }

    /// Pop a value of type `ty` from stack `st` of length `len`, which is
    /// not empty: an `f64` is loaded as one (not as 64 bits moved to a
    /// vector register after).
    fn pop_here(&mut self, len: Value, st: Stack, ty: CType) -> Value {
        let len1 = self.b.ins().iadd_imm_s(len, -1);
        self.cset(st.len, len1);
        let ptr = self.cget(st.ptr);
        let off = self.b.ins().ishl_imm_s(len1, st.shift);
        let addr = self.b.ins().iadd(ptr, off);
        if st.shift == 3 {
            self.b.ins().load(ty, mem(), addr, 0)
        } else {
            self.b.ins().uload32(mem(), addr, 0)
        }
    }

    fn set_result(&mut self, r: u32, v: Option<Value>) {
        if let Some(v) = v {
            self.set_bits(r, v);
        }
    }

    /// A value popped from the comms stack, as an f64.
    fn popped(&mut self, pc: usize) -> Value {
        self.pop_fast(pc, types::F64)
    }

    /// A `ret` or `ret.n` at `pc`: hand the count and the `pc` back.
    fn finish_return(&mut self, pc: usize) {
        self.spill();
        let done = self.done(pc);
        self.ctx_store(done, OFF_STEPS);
        let p = self.b.ins().iconst(types::I64, pc as i64);
        self.ctx_store(p, OFF_RET_PC);
    }

    fn blk_pop(&mut self, pc: usize, table: usize) {
        let id = self.pop_in(pc, "advm_blk_pop", BLK, types::I64);
        let table = self.f.tables[table].clone();
        if table.is_empty() {
            self.trap_now(pc, T_BAD_BLOCK, id);
            return;
        }
        let out =
            self.b
                .ins()
                .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, id, table.len() as i64);
        self.trap_if(out, pc, T_BAD_BLOCK, id);
        if !table.iter().all(|t| self.unchecked_jump(*t as usize)) {
            self.poll(pc, table.iter().any(|t| *t as usize <= pc));
        }
        // The id is below the table's length here: one entry is a jump,
        // two a conditional jump (a reverse loop's two-way join), more a
        // jump table.
        match table[..] {
            [t] => {
                let t = self.block_at(t as usize);
                self.b.ins().jump(t, &[]);
            }
            [t0, t1] => {
                let (t0, t1) = (self.block_at(t0 as usize), self.block_at(t1 as usize));
                self.b.ins().brif(id, t1, &[], t0, &[]);
            }
            _ => {
                let mut sw = Switch::new();
                for (i, t) in table.iter().enumerate() {
                    sw.set_entry(i as u128, self.block_at(*t as usize));
                }
                let default = self.block_at(table[0] as usize);
                sw.emit(self.b, id, default);
            }
        }
    }

    fn call(&mut self, pc: usize) {
        let ins = self.f.code[pc];
        let site = &self.f.sites[ins.x as usize];
        let callee = self.prog.func(site.func);
        let fref = self.refs.callees[&site.func];
        // The depth limit, then fuel (the interpreter's order).
        let d = self.ctx_load(OFF_DEPTH);
        let deep = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, d, self.max_depth);
        self.trap_if_zero(deep, pc, T_CALL_DEPTH);
        self.poll(pc, false);
        let done = self.done(pc);
        self.ctx_store(done, OFF_STEPS);
        let d1 = self.b.ins().iadd_imm_s(d, 1);
        self.ctx_store(d1, OFF_DEPTH);
        let mut args = vec![self.ctx];
        let n = many(callee);
        let slot = n.map(|n| {
            let a = self.stack_words(n);
            args.push(a);
            a
        });
        for r in site.args.clone() {
            let v = self.get(u32::from(r));
            args.push(v);
        }
        self.spill();
        let result = match self.refs.trampolines.get(&site.func).copied() {
            None => {
                let call = self.b.ins().call(fref, &args);
                self.b.inst_results(call).first().copied()
            }
            Some(tramp) => self.checked_call(pc, fref, tramp, &args, slot, ret_ctype(callee)),
        };
        self.reload(true, true);
        self.ctx_store(d, OFF_DEPTH);
        // A trap in the callee: note this call for the trap's call stack
        // and return at once (the callee stored the count).
        let t = self.ctx_load(OFF_TRAPPED);
        let cold = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(t, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let h = self.helper("advm_trap_caller");
        let at = self.site(pc);
        let ctx = self.ctx;
        self.b.ins().call(h, &[ctx, at]);
        self.b.ins().jump(self.unwind, &[]);
        self.b.switch_to_block(cont);
        let steps = self.ctx_load(OFF_STEPS);
        let back = (self.end - 1 - pc) as i64;
        let s = self.b.ins().iadd_imm_s(steps, back);
        self.b.def_var(self.s, s);
        match (slot, result) {
            (None, Some(v)) => {
                self.set_bits(u32::from(ins.r0), v);
            }
            (Some(addr), _) => {
                let rets = site.rets.clone();
                for (i, r) in rets.iter().enumerate() {
                    let r = u32::from(*r);
                    let t = self.ty(r);
                    let v = self.b.ins().load(t, mem(), addr, (i * 8) as i32);
                    if ins.op == Op::CallN {
                        self.set(r, v);
                    } else {
                        let a = self.get(r);
                        let s = self.b.ins().fadd(a, v);
                        self.set(r, s);
                    }
                }
            }
            (None, None) => {}
        }
    }

    /// About to translate the block of leader index `k`: the views its
    /// loop read on entry, if any, are the ones read beforehand.
    fn in_block(&mut self, k: usize) {
        self.cur = k;
        if !self.loop_views.is_empty() {
            self.hoisted = match self.loop_of[k] {
                Some(l) => self.loop_views[l].1.iter().copied().collect(),
                None => HashMap::new(),
            };
        }
    }

    /// Translate the block of leader index `k` (of `starts`) into `blk`.
    fn block(&mut self, starts: &[usize], k: usize, blk: Block) {
        let start = starts[k];
        let end = block_end(starts, k, self.f.code.len());
        self.end = end;
        self.in_block(k);
        self.b.switch_to_block(blk);
        if self.steps_from().is_none() {
            let s0 = self.b.use_var(self.s);
            let s1 = self.b.ins().iadd_imm_s(s0, (end - start) as i64);
            self.b.def_var(self.s, s1);
        }
        let mut open = true;
        for pc in start..end {
            let math_before = self.math_calls;
            open = self.instr(pc);
            // The liveness takes the instructions that call out from
            // `calls_out`: one missing there would leave values live
            // across its call out of `Live::across_call`.
            debug_assert!(
                self.math_calls == math_before || calls_out(self.f.code[pc].op),
                "{:?} calls a math helper but `calls_out` does not list it",
                self.f.code[pc].op
            );
            if !open {
                break;
            }
            if let Some(regs) = self.hoist_at.remove(&pc) {
                for r in regs {
                    self.hoist_one(r);
                }
            }
        }
        if open {
            // Falls into the next leader (the verifier makes the last
            // instruction a terminator, so there is one).
            self.entering(end);
            let next = self.block_at(end);
            self.b.ins().jump(next, &[]);
        }
    }

    /// Translate counted loop `c` ([`Counted`]): at its header the guard,
    /// which picks the copy without checks when none would fire and the
    /// checked copy otherwise; then the two copies, each jumping within
    /// itself.
    fn counted_loop(&mut self, starts: &[usize], c: &Counted) {
        let k = block_of(starts, c.header);
        let guard = self.blocks[&c.header];
        self.b.switch_to_block(guard);
        self.in_block(k);
        let r = self.get(c.counter);
        let bound = self.get(c.bound);
        // The iterations less one, `tm1`: `bound - r - 1` going up,
        // `r - bound - 1` going down, in wrapping arithmetic. The counter
        // takes the `tm1 + 1` values from `lo` up (wrapping), also where it
        // starts on the wrong side of the bound and wraps around to it.
        // Where it starts on the wrong side and leaves after one
        // iteration, `tm1` is over `2^63` and the guard fails.
        let (tm1, lo) = if c.up {
            let d = self.b.ins().isub(bound, r);
            (self.b.ins().iadd_imm_s(d, -1), r)
        } else {
            let d = self.b.ins().isub(r, bound);
            let lo = self.b.ins().iadd_imm_s(bound, 1);
            (self.b.ins().iadd_imm_s(d, -1), lo)
        };
        // Each condition a branch to the checked copy if it fails.
        let checked_top = self.b.create_block();
        let fast: HashMap<usize, Block> = c
            .blocks
            .iter()
            .map(|b| (starts[*b], self.b.create_block()))
            .collect();
        let fast_top = fast[&c.header];
        let require = |t: &mut Self, cond: Value| {
            let next = t.b.create_block();
            t.b.ins().brif(cond, next, &[], checked_top, &[]);
            t.b.switch_to_block(next);
        };
        // At most `most` iterations, so at most `COUNTED_STEPS_MOST`
        // instructions (`s + iterations · steps` is the most any look at
        // fuel in the loop sees), and that much fuel left.
        let most = (COUNTED_STEPS_MOST / c.steps.max(1)) as i64;
        let few = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, tm1, most);
        require(self, few);
        // Most calls have fuel to spare: one compare with the room
        // computed once per call. Otherwise (near the end of the fuel, or
        // under a fuel below `COUNTED_STEPS_MOST`) the exact count, off the
        // main path.
        let s0 = self.b.use_var(self.s);
        let room = match self.fuel_room {
            Some(slot) => self.b.ins().stack_load(types::I64, types::I64, slot, 0),
            None => self.b.ins().iconst(types::I64, 0),
        };
        let ample = self.b.ins().icmp(IntCC::UnsignedLessThan, s0, room);
        let exact = self.b.create_block();
        let fuelled = self.b.create_block();
        self.b.set_cold_block(exact);
        self.b.ins().brif(ample, fuelled, &[], exact, &[]);
        self.b.switch_to_block(exact);
        let some = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, s0, self.fuel);
        let left = self.b.ins().isub(self.fuel, s0);
        let iterations = self.b.ins().iadd_imm_s(tm1, 1);
        let need = self.b.ins().imul_imm_s(iterations, c.steps as i64);
        let enough = self
            .b
            .ins()
            .icmp(IntCC::UnsignedLessThanOrEqual, need, left);
        let ok = self.b.ins().band(some, enough);
        self.b.ins().brif(ok, fuelled, &[], checked_top, &[]);
        self.b.switch_to_block(fuelled);
        // Each index within its length: the lowest value `w` below it and
        // (for an index that moves with the counter) `tm1` below what is
        // left above `w`.
        let mut accesses = HashSet::new();
        let mut pointers = HashMap::new();
        let mut checked: Vec<(u32, bool, bool, &[u32])> = Vec::new();
        // By array register, shadow or not, and offsets.
        let mut bases: HashMap<(u32, bool, &[u32]), Value> = HashMap::new();
        for a in &c.accesses {
            let Some(view) = self.hoisted.get(&a.array).copied() else {
                continue;
            };
            accesses.insert((a.pc, a.array, a.shadow));
            if a.counted {
                let pkey = (a.array, a.shadow, &a.offsets[..]);
                let p = match bases.get(&pkey) {
                    Some(p) => *p,
                    None => {
                        let data = if a.shadow { view.shadow } else { view.data };
                        let mut p = self.b.use_var(data);
                        for &o in &a.offsets {
                            let v = self.get(o);
                            let off = self.b.ins().ishl_imm_s(v, 3);
                            p = self.b.ins().iadd(p, off);
                        }
                        bases.insert(pkey, p);
                        p
                    }
                };
                pointers.insert((a.pc, a.array, a.shadow), p);
            }
            let key = (a.array, a.shadow, a.counted, &a.offsets[..]);
            if checked.contains(&key) {
                continue;
            }
            checked.push(key);
            let mut w = a.counted.then_some(lo);
            for &o in &a.offsets {
                let v = self.get(o);
                w = Some(match w {
                    Some(w) => self.b.ins().iadd(w, v),
                    None => v,
                });
            }
            let w = w.unwrap_or_else(|| self.b.ins().iconst(types::I64, 0));
            let len = self
                .b
                .use_var(if a.shadow { view.shadow_len } else { view.len });
            let below = self.b.ins().icmp(IntCC::UnsignedLessThan, w, len);
            require(self, below);
            if a.counted {
                let room = self.b.ins().isub(len, w);
                let fits = self.b.ins().icmp(IntCC::UnsignedLessThan, tm1, room);
                require(self, fits);
            }
        }
        // The bound as a value of its own in the unchecked copy (whose
        // live range the register allocator may then keep in a register).
        let bound_here = self.b.ins().iadd_imm_s(bound, 0);
        self.set(c.bound, bound_here);
        // The checked copy, counting what each instruction pushes and
        // pops as it is translated; the stacks' checks come after.
        let stack_checks = self.b.create_block();
        self.b.ins().jump(stack_checks, &[]);
        self.copy = Some(LoopCopy {
            unchecked: false,
            blocks: HashMap::from([(c.header, checked_top)]),
            accesses: HashSet::new(),
            pointers: HashMap::new(),
            counter: c.counter,
            steps_from: None,
            stacks: [false; 2],
            written: Vec::new(),
        });
        self.effects = Some(HashMap::new());
        let math_before = self.math_calls;
        for &b in &c.blocks {
            let blk = if b == k {
                checked_top
            } else {
                self.blocks[&starts[b]]
            };
            self.block(starts, b, blk);
        }
        let effects = self.effects.take().unwrap_or_default();
        // The most each iteration pushes and pops, over every path from
        // the header through the loop: its blocks in reverse (every edge
        // between them goes forward).
        let end_of = |b: usize| block_end(starts, b, self.f.code.len());
        let mut most: HashMap<usize, [u64; 4]> = HashMap::new();
        for (i, &b) in c.blocks.iter().enumerate().rev() {
            let mut here = [0u64; 4];
            for pc in starts[b]..end_of(b) {
                for (h, e) in here
                    .iter_mut()
                    .zip(effects.get(&pc).copied().unwrap_or_default())
                {
                    *h += e;
                }
            }
            let mut after = [0u64; 4];
            for s in &c.succs[i] {
                for (a, x) in after
                    .iter_mut()
                    .zip(most.get(s).copied().unwrap_or_default())
                {
                    *a = (*a).max(x);
                }
            }
            for (x, a) in here.iter_mut().zip(after) {
                *x += a;
            }
            most.insert(b, here);
        }
        let per = most.get(&k).copied().unwrap_or_default();
        // Each stack the loop only pushes on (only pops from): room for
        // (values on it for) the most each iteration pushes (pops), all
        // iterations together.
        //
        // A stack both pushed on and popped from keeps its checks, and
        // then so do the pushes on the other: growing one stack may give
        // back the other's spare room (`grow_stack`), and a refill may grow
        // either. Pops need values, which nothing takes away.
        self.b.switch_to_block(stack_checks);
        self.in_block(k);
        let mixed = |j: usize| per[2 * j] > 0 && per[2 * j + 1] > 0;
        let mut stacks = [false; 2];
        for st in [COMMS, BLK] {
            let j = st.index;
            let (push, pop) = (per[2 * j], per[2 * j + 1]);
            let n = match (push, pop) {
                (n, 0) if n > 0 && !mixed(1 - j) => n,
                (0, n) if n > 0 => n,
                _ => continue,
            };
            let need = self.b.ins().iadd_imm_s(tm1, 1);
            let need = self.b.ins().imul_imm_s(need, n as i64);
            let len = self.cget(st.len);
            let have = if push > 0 {
                let cap = self.cget(st.cap);
                self.b.ins().isub(cap, len)
            } else {
                len
            };
            let fits = self
                .b
                .ins()
                .icmp(IntCC::UnsignedLessThanOrEqual, need, have);
            require(self, fits);
            stacks[j] = true;
        }
        // A one-block loop with a math call counts from its counter: there
        // a register the call preserves is worth more than the count's
        // step (logsumexp's gradient 15 % faster; in loops without a call
        // the store and load around the loop cost as much as they saved).
        let mut steps_from = None;
        if c.blocks.len() == 1 && self.math_calls != math_before {
            // The count on entry less (plus) the block's length times the
            // counter's first value.
            let slot = match self.steps_slot {
                Some(slot) => slot,
                None => {
                    let data = StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3);
                    let slot = self.b.create_sized_stack_slot(data);
                    self.steps_slot = Some(slot);
                    slot
                }
            };
            let len = c.steps as i64;
            let t = self.b.ins().imul_imm_s(r, len);
            let base = if c.up {
                self.b.ins().isub(s0, t)
            } else {
                self.b.ins().iadd(s0, t)
            };
            self.b.ins().stack_store(types::I64, base, slot, 0);
            steps_from = Some(StepsFrom {
                slot,
                len,
                up: c.up,
            });
        }
        // On the edge into the unchecked copy, the registers the loop
        // writes that are live at its header and across a call defined
        // again, as the edges out of it do ([`T::leave`]).
        if let Some(live) = self.live.as_ref() {
            let again = live.carried(&c.written, c.header);
            self.define_again(&again);
        }
        self.b.ins().jump(fast_top, &[]);
        self.copy = Some(LoopCopy {
            unchecked: true,
            blocks: fast,
            accesses,
            pointers,
            counter: c.counter,
            steps_from,
            stacks,
            written: c.written.clone(),
        });
        for &b in &c.blocks {
            let blk = self.block_at(starts[b]);
            self.block(starts, b, blk);
        }
        self.copy = None;
    }
}

impl T<'_, '_> {
    /// Plan the views [`T::hoisted`] describes: read on entry those of
    /// the array registers no instruction writes, and right after the
    /// write those of the registers written once in the entry block
    /// (instructions before `block0_end`). A handle outside the views gets
    /// zero lengths, so that every access of it takes the slow path, which
    /// traps at that access as before.
    fn hoist_views(&mut self, block0_end: usize) -> bool {
        let f = self.f;
        let changes = f
            .code
            .iter()
            .any(|i| matches!(i.op, Op::ANew | Op::Call | Op::CallAcc | Op::CallN));
        if changes {
            return false;
        }
        // Each view read once keeps a length and an address live through
        // the function. Past a few, the registers they take cost more than
        // the loads they save (GMM's reverse function, a dozen arrays
        // across its loops, ran 10 % slower with all of them hoisted).
        let Some(regs) = accessed_views(f.code.iter(), HOIST_MOST) else {
            return false;
        };
        for r in regs {
            match self.writes.get(r as usize).copied() {
                Some((0, _)) => self.hoist_one(r),
                Some((1, pc)) if pc < block0_end => self.hoist_at.entry(pc).or_default().push(r),
                _ => {}
            }
        }
        true
    }

    /// Read the view of array register `r` here, into [`T::hoisted`].
    fn hoist_one(&mut self, r: u32) {
        let view = self.view_vars();
        self.read_view(r, view);
        self.hoisted.insert(r, view);
    }

    /// Fresh variables for a view read beforehand.
    fn view_vars(&mut self) -> Hoisted {
        Hoisted {
            len: self.b.declare_var(types::I64),
            data: self.b.declare_var(types::I64),
            shadow_len: self.b.declare_var(types::I64),
            shadow: self.b.declare_var(types::I64),
        }
    }

    /// Read the view of array register `r` here, into `view`'s variables
    /// (zeros for a handle outside the views).
    fn read_view(&mut self, r: u32, view: Hoisted) {
        let h = self.get(r);
        let (live, k) = self.view_live(h);
        let read = self.b.create_block();
        let none = self.b.create_block();
        let join = self.b.create_block();
        self.b.ins().brif(live, read, &[], none, &[]);
        self.b.switch_to_block(read);
        let e = self.view_at(k);
        for (var, at) in [
            (view.len, AV_LEN),
            (view.data, AV_DATA),
            (view.shadow_len, AV_SHADOW_LEN),
            (view.shadow, AV_SHADOW),
        ] {
            let v = self.b.ins().load(types::I64, mem(), e, at);
            self.b.def_var(var, v);
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(none);
        let zero = self.b.ins().iconst(types::I64, 0);
        for var in [view.len, view.data, view.shadow_len, view.shadow] {
            self.b.def_var(var, zero);
        }
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
    }

    /// The value of register `r` if it is a constant register no
    /// instruction writes and its value is a divisor whose quotient needs
    /// no machine division: a power of two, or its negation, other than 1
    /// and `i64::MIN`.
    fn const_divisor(&self, r: u32) -> Option<i64> {
        let np = self.f.param_types.len() as u32;
        if r < np || r >= np + self.f.consts.len() as u32 || self.writes[r as usize].0 > 0 {
            return None;
        }
        let c = self.f.consts[(r - np) as usize] as i64;
        let m = c.unsigned_abs();
        (c != i64::MIN && m > 1 && m.is_power_of_two()).then_some(c)
    }

    /// `a / r` (`div`) or `a % r` for register `r`, as the interpreter:
    /// a zero divisor traps at `pc`, and `MIN / -1` wraps.
    fn div_checked(&mut self, pc: usize, a: Value, r: u32, div: bool) -> Value {
        let c = self.get(r);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
        let code = if div { T_DIV_BY_ZERO } else { T_REM_BY_ZERO };
        self.trap_if_zero(zero, pc, code);
        // Wrapping: `MIN / -1` is `MIN`, `MIN % -1` is 0, and
        // neither may reach the machine's division, which faults.
        let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, c, -1);
        let one = self.b.ins().iconst(types::I64, 1);
        let safe = self.b.ins().select(m1, one, c);
        if div {
            let q = self.b.ins().sdiv(a, safe);
            let n = self.b.ins().ineg(a);
            self.b.ins().select(m1, n, q)
        } else {
            let r = self.b.ins().srem(a, safe);
            let z = self.b.ins().iconst(types::I64, 0);
            self.b.ins().select(m1, z, r)
        }
    }

    /// `a / c` (`div`) or `a % c` (`!div`) for a constant `c = ±2^k`
    /// (`const_divisor`), as `i64::wrapping_div` and `wrapping_rem` give
    /// them, without a machine division: the quotient rounds toward
    /// zero, so a negative `a` is biased by `2^k - 1` before the shift.
    fn div_by_const(&mut self, a: Value, c: i64, div: bool) -> Value {
        let k = i64::from(c.unsigned_abs().trailing_zeros());
        let sign = self.b.ins().sshr_imm_s(a, 63);
        let bias = self.b.ins().ushr_imm_s(sign, 64 - k);
        let biased = self.b.ins().iadd(a, bias);
        let q = self.b.ins().sshr_imm_s(biased, k);
        if div {
            if c < 0 {
                self.b.ins().ineg(q)
            } else {
                q
            }
        } else {
            // a % c = a - (a / |c|) * |c|, whose sign is a's.
            let m = self.b.ins().ishl_imm_s(q, k);
            self.b.ins().isub(a, m)
        }
    }

    /// The address of a new slot of this frame for `n` 64-bit words (at
    /// least one), 8-byte aligned.
    fn stack_words(&mut self, n: usize) -> Value {
        let ss = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (n.max(1) * 8) as u32,
            3,
        ));
        self.b.ins().stack_addr(types::I64, ss, 0)
    }

    /// A call of a function of a recursive call graph (`args`: the context,
    /// the result slot `slot` if it returns several values, the
    /// parameters): directly while the stack pointer is at or above
    /// `ctx.stack_limit`, else through the callee's trampoline `tramp` on
    /// the next stack segment. The single result (of type `rty`), if any.
    fn checked_call(
        &mut self,
        pc: usize,
        fref: FuncRef,
        tramp: FuncRef,
        args: &[Value],
        slot: Option<Value>,
        rty: Option<CType>,
    ) -> Option<Value> {
        let rty = if slot.is_some() { None } else { rty };
        let sp = self.b.ins().get_stack_pointer(types::I64);
        let lim = self.ctx_load(OFF_STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, lim);
        let direct = self.b.create_block();
        let grow = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(grow);
        let r = rty.map(|t| self.b.append_block_param(join, t));
        self.b.ins().brif(low, grow, &[], direct, &[]);
        self.b.switch_to_block(direct);
        let call = self.b.ins().call(fref, args);
        let v: Vec<_> = self
            .b
            .inst_results(call)
            .iter()
            .map(|v| (*v).into())
            .collect();
        self.b.ins().jump(join, &v);
        self.b.switch_to_block(grow);
        let first = if slot.is_some() { 2 } else { 1 };
        let params = &args[first..];
        let argp = self.stack_words(params.len());
        for (i, p) in params.iter().enumerate() {
            self.b.ins().store(mem(), *p, argp, (i * 8) as i32);
        }
        let out = match slot {
            Some(a) => a,
            None => self.stack_words(1),
        };
        let h = self.helper("advm_call_grown");
        let at = self.site(pc);
        let code = self.b.ins().func_addr(types::I64, tramp);
        let ctx = self.ctx;
        let c = self.b.ins().call(h, &[ctx, at, code, argp, out]);
        let failed = self.b.inst_results(c)[0];
        // No segment: the trap is at this call (not in the callee), so
        // unwind without noting the call as a caller.
        let ok = self.b.create_block();
        self.b.ins().brif(failed, self.unwind, &[], ok, &[]);
        self.b.switch_to_block(ok);
        let v: Vec<_> = rty
            .map(|t| self.b.ins().load(t, mem(), out, 0).into())
            .into_iter()
            .collect();
        self.b.ins().jump(join, &v);
        self.b.switch_to_block(join);
        r
    }
}

/// The array registers an element or shadow access reads (the first `k`
/// of the two), and whether it is the shadow: what a view read
/// beforehand serves ([`T::hoisted`]).
pub(crate) fn accessed_arrays(ins: &Instr) -> Option<([u32; 2], usize, bool)> {
    let one = |r: u16, shadow| Some(([u32::from(r), 0], 1, shadow));
    match ins.op {
        Op::AGet | Op::AGetAdd | Op::AccMulAGetAdd => one(ins.r1, false),
        Op::ShadowTake => one(ins.r1, true),
        Op::AddMulAGet => one(ins.r2, false),
        Op::ASet => one(ins.r0, false),
        Op::ShadowAcc | Op::ShadowAccMul => one(ins.r0, true),
        Op::AGetPair => Some(([u32::from(ins.r2), ins.reg(3)], 2, false)),
        _ => None,
    }
}

/// The index registers of an element or shadow access (the first `k` of
/// the two, summed wrapping), as [`accessed_arrays`] names its arrays.
pub(crate) fn access_index(ins: &Instr) -> Option<([u32; 2], usize)> {
    let one = |r: u32| Some(([r, 0], 1));
    match ins.op {
        Op::AGet | Op::ShadowTake => one(ins.reg(2)),
        Op::AGetAdd | Op::AccMulAGetAdd => Some(([ins.reg(2), ins.reg(3)], 2)),
        Op::AddMulAGet => one(ins.reg(3)),
        Op::ASet | Op::ShadowAcc | Op::ShadowAccMul => one(ins.reg(1)),
        Op::AGetPair => one(ins.reg(4)),
        _ => None,
    }
}

/// The array registers the element and shadow accesses of `code` read,
/// each once, in order of first use; `None` if they use more than `most`
/// views (an array's elements and its shadow count as two).
pub(crate) fn accessed_views<'i>(
    code: impl Iterator<Item = &'i Instr>,
    most: usize,
) -> Option<Vec<u32>> {
    let mut regs: Vec<u32> = Vec::new();
    // The (register, shadow?) pairs: the views.
    let mut pairs: Vec<(u32, bool)> = Vec::new();
    for ins in code {
        let Some((accessed, k, shadow)) = accessed_arrays(ins) else {
            continue;
        };
        for &r in &accessed[..k] {
            if !regs.contains(&r) {
                regs.push(r);
            }
            if !pairs.contains(&(r, shadow)) {
                if pairs.len() == most {
                    return None;
                }
                pairs.push((r, shadow));
            }
        }
    }
    Some(regs)
}

/// Whether the translation of `op` calls out of the function: a call of
/// a function or of a math helper (which keep no `f64` register the
/// caller uses). Translating an instruction that calls a math helper and
/// is not listed here fails a debug assertion ([`T::block`]).
pub(crate) fn calls_out(op: Op) -> bool {
    matches!(
        op,
        Op::Call
            | Op::CallAcc
            | Op::CallN
            | Op::PowF
            | Op::Sin
            | Op::Cos
            | Op::SinCos
            | Op::Tan
            | Op::Exp
            | Op::Log
            | Op::Tanh
            | Op::Erf
            | Op::Erfc
            | Op::Atan
            | Op::Asin
            | Op::Acos
            | Op::Atan2
            | Op::Sinh
            | Op::Cosh
            | Op::Log1p
            | Op::Expm1
            | Op::Log2
            | Op::Log10
            | Op::Cbrt
            | Op::Hypot
            | Op::Round
    )
}

/// The registers `ins` writes through its operands (those it writes, or
/// reads and writes; not a call's results).
pub(crate) fn operands_written(ins: &Instr) -> impl Iterator<Item = u32> + '_ {
    ins.op
        .reg_operands()
        .enumerate()
        .filter(|(_, o)| matches!(o, Operand::Def(_) | Operand::InOut(_)))
        .map(|(k, _)| ins.reg(k))
}

/// How many instructions of verified `f` write each register (its
/// register operands written or read and written, and the results of its
/// calls), and the `pc` of the last one.
pub(crate) fn writes(f: &Function) -> Vec<(u32, usize)> {
    let mut w = vec![(0u32, 0usize); f.reg_types.len()];
    for (pc, ins) in f.code.iter().enumerate() {
        let mut mark = |r: u32| {
            if let Some(x) = w.get_mut(r as usize) {
                *x = (x.0.saturating_add(1), pc);
            }
        };
        operands_written(ins).for_each(&mut mark);
        if matches!(ins.op, Op::Call | Op::CallAcc | Op::CallN) {
            if let Some(site) = f.sites.get(ins.x as usize) {
                for r in &site.rets {
                    mark(u32::from(*r));
                }
            }
        }
    }
    w
}

/// Translate verified `f` (id `fid`) into the builder's function, whose
/// signature is [`signature`] of `f`.
pub(crate) fn translate(b: &mut FunctionBuilder<'_>, prog: &Program, fid: FuncId, refs: &Refs) {
    let f = prog.func(fid);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let ctx = params[0];
    let (out, first) = if many(f).is_some() {
        (Some(params[1]), 2)
    } else {
        (None, 1)
    };
    let regs: Vec<Variable> = f
        .reg_types
        .iter()
        .map(|t| b.declare_var(ctype(*t)))
        .collect();
    let s = b.declare_var(types::I64);
    let np = f.param_types.len();
    for (i, var) in regs.iter().enumerate() {
        let t = ctype(f.reg_types[i]);
        let v = if i < np {
            params[first + i]
        } else {
            let bits = f.consts.get(i - np).copied().unwrap_or(0);
            if t == types::F64 {
                b.ins().f64const(f64::from_bits(bits))
            } else {
                b.ins().iconst(types::I64, bits as i64)
            }
        };
        b.def_var(*var, v);
    }
    let steps = b.ins().load(types::I64, mem(), ctx, OFF_STEPS);
    b.def_var(s, steps);
    let fuel = b.ins().load(types::I64, mem(), ctx, OFF_FUEL);
    let max_depth = b.ins().load(types::I64, mem(), ctx, OFF_MAX_DEPTH);
    let unwind = b.create_block();
    b.set_cold_block(unwind);
    let starts = leaders(f);
    let mut blocks = HashMap::new();
    for pc in &starts {
        blocks.insert(*pc, b.create_block());
    }
    let cached = [(); 8].map(|_| b.declare_var(types::I64));
    let mut t = T {
        b,
        prog,
        f,
        fid: fid.0,
        refs,
        imported: vec![None; refs.helpers.len()],
        regs,
        s,
        ctx,
        out,
        fuel,
        max_depth,
        unwind,
        blocks,
        cached,
        end: 0,
        writes: writes(f),
        hoisted: HashMap::new(),
        hoist_at: HashMap::new(),
        loop_views: Vec::new(),
        loop_of: vec![None; starts.len()],
        loop_header: HashMap::new(),
        cur: 0,
        counted: HashMap::new(),
        copy: None,
        fuel_room: None,
        effects: None,
        math_calls: 0,
        touch: touches(f),
        steps_slot: None,
        live: None,
    };
    t.reload(true, true);
    // The loops (a function without a backward jump has none).
    let graph = has_loop(f).then(|| Graph::new(f, &starts));
    let hoisted = t.hoist_views(block_end(&starts, 0, f.code.len()));
    if let (false, Some(graph)) = (hoisted, &graph) {
        for lv in loop_views(f, &starts, graph, &t.writes, HOIST_MOST) {
            let l = t.loop_views.len();
            for &k in &lv.blocks {
                t.loop_of[k] = Some(l);
            }
            t.loop_header.insert(lv.header, l);
            let vars = lv.regs.iter().map(|r| (*r, t.view_vars())).collect();
            t.loop_views.push((lv, vars));
        }
    }
    if let Some(graph) = &graph {
        for c in counted_loops(f, &starts, graph, &t.writes) {
            let k = block_of(&starts, c.header);
            t.counted.insert(k, c);
        }
        if !t.counted.is_empty() {
            t.live = graph.live_in(f, &starts);
        }
    }
    if !t.counted.is_empty() {
        let most = COUNTED_STEPS_MOST as i64;
        let ample =
            t.b.ins()
                .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, fuel, most);
        let room = t.b.ins().iadd_imm_s(fuel, 1 - most);
        let zero = t.b.ins().iconst(types::I64, 0);
        let room = t.b.ins().select(ample, room, zero);
        let slot =
            t.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        t.b.ins().stack_store(types::I64, room, slot, 0);
        t.fuel_room = Some(slot);
    }
    let first = t.blocks[&0];
    t.b.ins().jump(first, &[]);
    // The blocks of the counted loops, translated with their header.
    let mut done = vec![false; starts.len()];
    for k in 0..starts.len() {
        if let Some(c) = t.counted.remove(&k) {
            t.counted_loop(&starts, &c);
            for &b in &c.blocks {
                done[b] = true;
            }
        } else if !done[k] {
            let blk = t.blocks[&starts[k]];
            t.block(&starts, k, blk);
        }
    }
    t.b.switch_to_block(unwind);
    t.spill();
    match ret_ctype(f) {
        Some(ty) if ty == types::F64 => {
            let z = t.b.ins().f64const(0.0);
            t.b.ins().return_(&[z]);
        }
        Some(_) => {
            let z = t.b.ins().iconst(types::I64, 0);
            t.b.ins().return_(&[z]);
        }
        None => {
            t.b.ins().return_(&[]);
        }
    }
    t.b.seal_all_blocks();
}

/// The entry trampoline of `f`: `(ctx, args, out)`, loading the arguments
/// from `args`, calling `body` and storing its result(s) to `out`.
pub(crate) fn trampoline(b: &mut FunctionBuilder<'_>, f: &Function, body: FuncRef) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, argp, outp) = (p[0], p[1], p[2]);
    let mut args = vec![ctx];
    if many(f).is_some() {
        args.push(outp);
    }
    for (i, t) in f.param_types.iter().enumerate() {
        let v = b.ins().load(ctype(*t), mem(), argp, (i * 8) as i32);
        args.push(v);
    }
    let call = b.ins().call(body, &args);
    if let Some(v) = b.inst_results(call).first().copied() {
        b.ins().store(mem(), v, outp, 0);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
}
