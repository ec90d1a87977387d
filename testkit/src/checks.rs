//! What the fuzz targets check, as plain functions of their input bytes, so
//! that the same logic runs under libFuzzer (`fuzz/fuzz_targets/*.rs`) and
//! as a deterministic smoke test in CI (`ad/tests/it/fuzz_smoke.rs`). Every function panics, with a message
//! that says how to reproduce, when a property fails.
//!
//! * [`assemble_input`]: arbitrary text through the assembler: never a panic;
//!   an accepted module lowers and verifies, and each of its functions runs
//!   (under tight limits) to the same value or trap class as the reference
//!   evaluator, and differentiates without an internal error, also with
//!   respect to a subset of its parameters chosen by the input.
//! * [`verify_input`]: arbitrary bytecode words through `vm::verify::decode`
//!   and `verify_function`: never a panic; what verifies runs under fuel
//!   with `Vm::call_raw`, in plain and in AD mode, without a panic.
//! * [`modes_input`]: the AD modes against each other on generated programs,
//!   by identities that need no finite differences (tangent = gradient·u;
//!   vᵀHu = uᵀHv).
//! * [`run_grad_input`]: programs from `crate::gen` and from the
//!   integer-heavy [`crate::intgen`] chosen by the input: the VM agrees with
//!   the reference evaluator, a gradient's forward value equals the primal
//!   value, and the gradient with respect to a subset of the f64 / f64[]
//!   parameters (chosen by the input) is those entries of the full one.

use crate::fd::{dot, random_dir};
use crate::intgen;
use crate::refeval::{self, vm_class, RefLimits};
use crate::same_gradient;
use ad::{AdError, Engine, Gradient};
use vm::bytecode::{BlockMark, CallSite, Function, Instr, Program};
use vm::ir::{FuncId, Module, RetType};
use vm::{Limits, Type, Value};

/// VM limits for fuzzing: small enough that no input runs long or
/// allocates much.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_call_depth: 64,
        fuel: Some(20_000),
        max_array_len: 4096,
        max_stack_bytes: 1 << 22,
        max_heap_bytes: 1 << 26,
        max_memory_bytes: 1 << 28,
        ad_budget: None,
    }
}

/// The reference evaluator's bounds matching [`fuzz_limits`] (its fuel is
/// larger: the VM may overrun its fuel by up to 1024 loop iterations, and
/// running out on either side is "inconclusive").
pub fn ref_limits(vm: &Limits) -> RefLimits {
    RefLimits {
        fuel: vm.fuel.map_or(10_000_000, |f| f.saturating_mul(20)),
        max_depth: vm.max_call_depth,
        max_array: vm.max_array_len,
    }
}

/// Trap classes that say a resource ran out rather than what the program
/// means: the VM and the reference evaluator count them differently (the
/// VM's call depth counts frames, and a frame of a function with inlined
/// calls runs several levels of the reference's).
pub fn is_resource(class: &str) -> bool {
    matches!(
        class,
        "out-of-fuel"
            | "stack-limit"
            | "heap-limit"
            | "memory-limit"
            | "out-of-memory"
            | "interrupted"
            | "call-depth"
    )
}

/// How a VM run and a reference run of the same call compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Same value, bit for bit.
    SameValue,
    /// Same trap class.
    SameTrap(&'static str),
    /// One side ran out of fuel: nothing to compare.
    Inconclusive,
    /// They differ: the description.
    Mismatch(String),
}

/// Run `f` on `args` in `engine` (with its current limits) and in the
/// reference evaluator, and compare.
pub fn compare_run(engine: &mut Engine, module: &Module, f: FuncId, args: &[Value]) -> Outcome {
    let rl = ref_limits(engine.vm_mut().limits());
    let vm = engine.run(f, args);
    let rf = refeval::eval(module, f, args, &rl);
    match (vm, rf) {
        (Ok(a), Ok(b)) => {
            if refeval::same_value(&a, &b) {
                Outcome::SameValue
            } else {
                Outcome::Mismatch(format!("VM returned {a:?}, reference {b:?}"))
            }
        }
        (Err(AdError::Trap(t)), Err(r)) => {
            let (vc, rc) = (vm_class(&t.kind), r.kind.class());
            if is_resource(vc) || is_resource(rc) {
                Outcome::Inconclusive
            } else if vc != rc {
                Outcome::Mismatch(format!("VM {t}; reference {r}"))
            } else if t.func != r.func || t.block != r.block {
                Outcome::Mismatch(format!(
                    "same trap class in different places: VM {t}; reference {r}"
                ))
            } else {
                Outcome::SameTrap(rc)
            }
        }
        (Err(AdError::Trap(t)), Ok(b)) if is_resource(vm_class(&t.kind)) => {
            let _ = b;
            Outcome::Inconclusive
        }
        (Ok(_), Err(r)) if is_resource(r.kind.class()) => Outcome::Inconclusive,
        (vm, rf) => Outcome::Mismatch(format!("VM {vm:?}; reference {rf:?}")),
    }
}

/// Differentiate `f` at `args` if it returns f64, and check what can be
/// checked without finite differences: no internal error; a trap of the
/// primal run is a trap of the gradient's forward pass too (of the same
/// class, unless a resource ran out); a primal value is the gradient's value.
/// Then the same with respect to the subset of the `f64` and `f64[]`
/// parameters that `mask` selects (see [`wrt_mask`] and [`check_grad_wrt`]).
pub fn check_grad(engine: &mut Engine, f: FuncId, args: &[Value], mask: u64) -> Result<(), String> {
    if engine.module().func(f).ret != RetType::One(Type::F64) {
        return Ok(());
    }
    let primal = engine.run(f, args);
    let grad = engine.grad(f, args);
    consistent(&primal, &grad)?;
    let wrt = wrt_mask(engine.module(), f, mask);
    check_grad_wrt(engine, f, args, &primal, &grad, &wrt)
}

/// Whether a gradient (full or partial) is consistent with the primal run.
fn consistent(
    primal: &Result<Value, AdError>,
    grad: &Result<Gradient, AdError>,
) -> Result<(), String> {
    match (primal, grad) {
        (_, Err(AdError::Internal(m))) => Err(format!("internal error: {m}")),
        (Ok(Value::F64(y)), Ok(g)) => {
            if y.to_bits() == g.value.to_bits() || (y.is_nan() && g.value.is_nan()) {
                Ok(())
            } else {
                Err(format!("primal {y:?}, gradient value {:?}", g.value))
            }
        }
        (_, Err(AdError::Trap(t))) if is_resource(vm_class(&t.kind)) => Ok(()),
        (Err(AdError::Trap(p)), Err(AdError::Trap(t))) => {
            let (pc, tc) = (vm_class(&p.kind), vm_class(&t.kind));
            if pc == tc || is_resource(pc) {
                Ok(())
            } else {
                Err(format!("primal trapped with {p}, gradient with {t}"))
            }
        }
        (Err(AdError::Trap(p)), Ok(_)) if is_resource(vm_class(&p.kind)) => Ok(()),
        _ => Err(format!("primal {primal:?}, gradient {grad:?}")),
    }
}

/// One flag per parameter of `f`: the `k`-th `f64` or `f64[]` parameter is
/// selected when bit `k % 64` of `mask` is set; `i64` and `bool` never are.
pub fn wrt_mask(module: &Module, f: FuncId, mask: u64) -> Vec<bool> {
    let func = module.func(f);
    let mut k = 0;
    func.params
        .iter()
        .map(|p| {
            if !func.ty(*p).is_differentiable() {
                return false;
            }
            let on = (mask >> (k % 64)) & 1 == 1;
            k += 1;
            on
        })
        .collect()
}

/// `Engine::grad_wrt` with respect to `wrt` against the full gradient
/// `full` (and the primal run `primal`) of the same call: consistent with
/// the primal run like the full gradient; where both succeed, each selected
/// entry equals the full gradient's up to 1e-12 relative (the partial
/// derived code adds the same contributions, perhaps in another order), and
/// every other entry is `None`.
pub fn check_grad_wrt(
    engine: &mut Engine,
    f: FuncId,
    args: &[Value],
    primal: &Result<Value, AdError>,
    full: &Result<Gradient, AdError>,
    wrt: &[bool],
) -> Result<(), String> {
    let part = engine.grad_wrt(f, args, wrt);
    consistent(primal, &part).map_err(|m| format!("with respect to {wrt:?}: {m}"))?;
    let (Ok(full), Ok(part)) = (full, &part) else {
        return Ok(());
    };
    if part.grad.len() != args.len() {
        return Err(format!(
            "with respect to {wrt:?}: {} gradient entries for {} arguments",
            part.grad.len(),
            args.len()
        ));
    }
    for (i, w) in wrt.iter().enumerate() {
        let want = if *w { &full.grad[i] } else { &None };
        if !same_gradient(&part.grad[i], want) {
            return Err(format!(
                "with respect to {wrt:?}: entry {i} is {:?}, full gradient {:?}",
                part.grad[i], full.grad[i]
            ));
        }
    }
    Ok(())
}

/// Arguments for every parameter of `f`: `variant` 0 gives ordinary values,
/// 1 gives zeros and an empty array (to provoke traps).
pub fn default_args(module: &Module, f: FuncId, variant: usize) -> Vec<Value> {
    let func = module.func(f);
    func.params
        .iter()
        .map(|p| match (func.ty(*p), variant) {
            (Type::F64, 0) => Value::F64(1.25),
            (Type::F64, _) => Value::F64(0.0),
            (Type::I64, 0) => Value::I64(3),
            (Type::I64, _) => Value::I64(0),
            (Type::Bool, v) => Value::Bool(v == 0),
            (Type::Arr, 0) => Value::Arr(vec![0.5, -2.0, 3.0]),
            (Type::Arr, _) => Value::Arr(Vec::new()),
        })
        .collect()
}

/// The `assemble` target: arbitrary bytes as program text.
pub fn assemble_input(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let module = match assembler::assemble(&text, "fuzz.adasm") {
        Ok(m) => m,
        Err(d) => {
            let r = d.render();
            assert!(!r.is_empty(), "empty diagnostics for {text:?}");
            return;
        }
    };
    let mut program = match vm::lower::lower_module(&module) {
        Ok(p) => p,
        Err(e) => panic!("accepted module does not lower: {e}\n{text}"),
    };
    if let Err(e) = vm::verify::verify_program(&mut program) {
        panic!("accepted module failed verification: {e:?}\n{text}");
    }
    let mut engine = match Engine::new(module.clone()) {
        Ok(e) => e,
        Err(e) => panic!("accepted module has no engine: {e}\n{text}"),
    };
    *engine.vm_mut().limits_mut() = fuzz_limits();
    // The parameters to differentiate with respect to: chosen by the input.
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    for i in 0..module.funcs.len().min(4) {
        let f = FuncId(i as u32);
        for variant in 0..2 {
            let args = default_args(&module, f, variant);
            if let Outcome::Mismatch(m) = compare_run(&mut engine, &module, f, &args) {
                panic!(
                    "VM and reference disagree on @{}({args:?}): {m}\n{text}",
                    module.func(f).name
                );
            }
            let mask = hash.rotate_left((8 * i + 4 * variant) as u32);
            if let Err(m) = check_grad(&mut engine, f, &args, mask) {
                panic!(
                    "gradient of @{}({args:?}): {m}\n{text}",
                    module.func(f).name
                );
            }
        }
    }
}

fn ty(b: u8) -> Type {
    match b % 4 {
        0 => Type::F64,
        1 => Type::I64,
        2 => Type::Bool,
        _ => Type::Arr,
    }
}

/// The `verify` target: an 8-byte header (frame size, parameter count,
/// register types, return type, jump table, return list, mode) and then
/// 12-byte instruction words. Returns whether the function verified (and
/// so ran).
pub fn verify_input(data: &[u8]) -> bool {
    if data.len() < 8 {
        return false;
    }
    let (head, rest) = data.split_at(8);
    let nregs = 1 + head[0] as usize % 16;
    let nparams = head[1] as usize % (nregs + 1);
    let reg_types: Vec<Type> = (0..nregs)
        .map(|i| ty(head[2].wrapping_add((i as u8).wrapping_mul(head[3]))))
        .collect();
    let words: Vec<[u8; 12]> = rest
        .chunks_exact(12)
        .map(|c| {
            let mut w = [0u8; 12];
            w.copy_from_slice(c);
            w
        })
        .collect();
    let Ok(code) = vm::verify::decode(&words) else {
        return false;
    };
    let ret = match head[4] % 6 {
        4 => RetType::Many(vec![Type::F64]),
        5 => RetType::Unit,
        _ => RetType::One(ty(head[4])),
    };
    // The one call site calls the function itself: `call` needs a site
    // without accumulators, `call.acc` one accumulator per returned value.
    let rets = match ret {
        RetType::Many(_) => vec![0],
        RetType::One(_) | RetType::Unit => Vec::new(),
    };
    let f = Function {
        name: "fuzz".into(),
        param_types: reg_types[..nparams].to_vec(),
        ret,
        reg_types: reg_types.clone(),
        consts: Vec::new(),
        code,
        sites: vec![CallSite {
            func: FuncId(0),
            args: (0..nparams as u16).collect(),
            rets,
        }],
        tables: vec![vec![0, head[5] as u32 % 8]],
        lists: vec![vec![head[6] as u16 % nregs as u16]],
        blocks: vec![BlockMark {
            name: "entry".into(),
            start: 0,
        }],
        locs: Vec::new(),
        reg_names: Vec::new(),
    };
    let mut p = Program::new();
    p.push(f);
    if vm::verify::verify_function(&mut p, FuncId(0)).is_ok() {
        let mut m = vm::Vm::new(fuzz_limits());
        m.limits_mut().fuel = Some(10_000);
        let args = vec![0u64; nparams];
        for ad_mode in [head[7] % 2 == 0, head[7] % 2 != 0] {
            m.begin(ad_mode);
            let _ = m.call_raw(&p, FuncId(0), &args);
        }
        return true;
    }
    false
}

/// Bytes for [`verify_input`] that often verify: opcodes are valid and
/// register operands have the types the opcode wants, the last word is a
/// terminator, and a `comms.push.r` mostly follows a `comms.reserve`. For
/// the smoke test, where uniformly random words would
/// almost never pass the verifier.
pub fn plausible_bytecode(rng: &mut crate::gen::Rng) -> Vec<u8> {
    use vm::op::{Op, Operand, Ty};
    let nregs = 1 + rng.below(10);
    let mut head = [0u8; 8];
    for b in head.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    head[0] = nregs as u8 - 1;
    head[1] = rng.below(3) as u8;
    let reg_types: Vec<Type> = (0..nregs)
        .map(|i| ty(head[2].wrapping_add((i as u8).wrapping_mul(head[3]))))
        .collect();
    let mut out = head.to_vec();
    let of_type = |rng: &mut crate::gen::Rng, t: Option<Type>| -> u16 {
        let fit: Vec<usize> = (0..nregs)
            .filter(|i| t.is_none_or(|t| reg_types[*i] == t))
            .collect();
        if fit.is_empty() || rng.chance(0.05) {
            rng.below(nregs) as u16
        } else {
            fit[rng.below(fit.len())] as u16
        }
    };
    let n = 1 + rng.below(12);
    for i in 0..n {
        let op = if i + 1 == n {
            [Op::Ret, Op::Jmp, Op::RetN, Op::BlkPop][rng.below(4)]
        } else {
            Op::ALL[rng.below(Op::ALL.len())]
        };
        let poly = Some(reg_types[rng.below(nregs)]);
        let mut regs = Vec::new();
        let mut x = if rng.chance(0.9) {
            rng.below(n.max(2)) as u32
        } else {
            rng.next_u64() as u32
        };
        for operand in op.operands() {
            if let Operand::Def(t) | Operand::Use(t) | Operand::InOut(t) = operand {
                let want = if *t == Ty::T { poly } else { t.fixed() };
                regs.push(of_type(rng, want));
            }
        }
        if regs.len() >= 4 {
            let words: Vec<u32> = regs.iter().map(|r| *r as u32).collect();
            x = Instr::pack_x(&words);
        }
        let indexed = op
            .operands()
            .iter()
            .any(|o| matches!(o, Operand::Site | Operand::Table | Operand::List));
        if indexed && rng.chance(0.8) {
            x = 0;
        }
        // Make the function's return type fit a final `ret` / `ret.n`.
        if i + 1 == n {
            match op {
                Op::Ret => {
                    let t = reg_types[regs[0] as usize];
                    let code = [Type::F64, Type::I64, Type::Bool, Type::Arr]
                        .iter()
                        .position(|u| *u == t)
                        .unwrap_or(0) as u8;
                    out[4] = code;
                }
                Op::RetN => {
                    out[4] = 4;
                    if let Some(r) = (0..nregs).find(|r| reg_types[*r] == Type::F64) {
                        out[6] = r as u8;
                    }
                }
                _ => {}
            }
        }
        // A reserved push verifies only where a `comms.reserve` covers it:
        // most of the time, put one right before it.
        if op == Op::CommsPushR && rng.chance(0.8) {
            let mut r = [0u8; 12];
            r[0] = Op::CommsReserve as u8;
            r[8..12].copy_from_slice(&(1 + rng.below(3) as u32).to_le_bytes());
            out.extend_from_slice(&r);
        }
        let mut w = [0u8; 12];
        w[0] = op as u8;
        // The flags byte is reserved (zero): mostly zero, sometimes junk
        // the verifier must reject.
        w[1] = if !rng.chance(0.9) {
            rng.next_u64() as u8
        } else {
            op.flag_bits()
        };
        for (k, r) in regs.iter().take(3).enumerate() {
            w[2 + 2 * k..4 + 2 * k].copy_from_slice(&r.to_le_bytes());
        }
        w[8..12].copy_from_slice(&x.to_le_bytes());
        out.extend_from_slice(&w);
    }
    out
}

/// The `run_grad` target: bytes 0..8 are a seed, byte 8 picks the family
/// and the size, byte 9 the nesting depth, byte 10 (if any) the parameters
/// of the partial gradient (bit `k`: the `k`-th f64 or f64[] parameter;
/// without byte 10, bits of the seed).
pub fn run_grad_input(data: &[u8]) {
    let mut seed = [0u8; 8];
    for (i, b) in data.iter().take(8).enumerate() {
        seed[i] = *b;
    }
    let seed = u64::from_le_bytes(seed);
    let knob = data.get(8).copied().unwrap_or(0);
    let mask = data
        .get(10)
        .map_or(seed.rotate_left(29) ^ knob as u64, |b| *b as u64);
    if knob & 1 == 1 {
        let g = intgen::program(seed);
        differential(
            &g.source,
            &g.entry,
            &g.args,
            mask,
            &format!("intgen seed {seed} mask {mask:#x}"),
        );
    } else {
        let cfg = crate::gen::Config {
            statements: 4 + (knob >> 1) as usize % 8,
            depth: 1 + data.get(9).copied().unwrap_or(0) as usize % 3,
            kinks: true,
        };
        let g = crate::gen::program(seed, &cfg);
        differential(
            &g.source,
            &g.entry,
            &g.args,
            mask,
            &format!("gen seed {seed} {cfg:?} mask {mask:#x}"),
        );
    }
}

/// Assemble a generated program, compare VM and reference on it, and check
/// its gradient's consistency, also with respect to the parameters `mask`
/// selects (see [`wrt_mask`]). Returns the outcome of the comparison.
pub fn differential(source: &str, entry: &str, args: &[Value], mask: u64, what: &str) -> Outcome {
    let module = assembler::assemble(source, "gen.adasm")
        .unwrap_or_else(|d| panic!("{what}: generated program rejected:\n{d}\n{source}"));
    let mut engine = Engine::new(module.clone())
        .unwrap_or_else(|e| panic!("{what}: generated program: {e}\n{source}"));
    let mut limits = fuzz_limits();
    limits.fuel = Some(200_000);
    limits.max_call_depth = 200;
    *engine.vm_mut().limits_mut() = limits;
    let f = engine
        .find(entry)
        .unwrap_or_else(|| panic!("{what}: no @{entry}"));
    let outcome = compare_run(&mut engine, &module, f, args);
    if let Outcome::Mismatch(m) = &outcome {
        panic!("{what}: VM and reference disagree on args {args:?}: {m}\n{source}");
    }
    if let Err(m) = check_grad(&mut engine, f, args, mask) {
        panic!("{what}: gradient on args {args:?}: {m}\n{source}");
    }
    outcome
}

/// The gradient under an AD budget below what storing everything took
/// (a checkpointed forward sweep, [`Engine::set_ad_budget`]) has the bits
/// of the stored one, `all`; a budget below the minimum is the budget
/// trap. Then without a budget again, the same gradient.
fn checkpointed_as_stored(
    engine: &mut Engine,
    f: FuncId,
    args: &[Value],
    all: &Gradient,
    rng: &mut crate::gen::Rng,
    what: &str,
) {
    let stored = engine.vm_mut().peak_stack_bytes();
    if stored == 0 {
        return;
    }
    let budget = match rng.below(3) {
        0 => rng.below(64),
        1 => stored / 2 + rng.below(stored / 2 + 1),
        _ => stored.saturating_sub(1),
    };
    engine.set_ad_budget(Some(budget));
    match engine.grad(f, args) {
        Ok(got) => {
            let same = got.value.to_bits() == all.value.to_bits()
                && crate::all_same_bits(&got.grad, &all.grad);
            assert!(
                same,
                "{what}: checkpointed under {budget} bytes (stored {stored}): {got:?} vs {all:?}"
            );
        }
        Err(AdError::Trap(t)) if matches!(t.kind, vm::TrapKind::AdBudget { .. }) => {}
        Err(e) => panic!("{what}: under an AD budget of {budget} bytes (stored {stored}): {e}"),
    }
    engine.set_ad_budget(None);
}

/// The AD modes against each other on a generated program chosen by the
/// input, with identities that need no finite differences (so they hold to
/// rounding, and a wrong rule in any mode breaks them):
///
/// * forward against reverse: the tangent along `u` equals the gradient's
///   dot product with `u` (`ȳ·(J u) = (Jᵀ ȳ)·u` with `ȳ = 1`);
/// * second order: `vᵀ H u = uᵀ H v` (the Hessian is symmetric), with both
///   products computed by forward-over-reverse;
/// * the value of every mode equals the primal's;
/// * checkpointing: the gradient under an AD budget below what storing
///   everything took has the stored gradient's bits;
/// * if-conversion (when bit 0 of the input's 11th byte is set): the
///   gradient and a Hessian-vector product derived from if-converted code
///   have the bits of those derived from the branches, but for the sign of
///   a zero, and the checks above then run on the converted code.
///
/// Non-finite values (overflow in a generated program) skip the identity
/// they would make meaningless. Panics with a message naming the seed when
/// an identity fails.
pub fn modes_input(data: &[u8]) {
    let mut seed = [0u8; 8];
    for (i, b) in data.iter().take(8).enumerate() {
        seed[i] = *b;
    }
    let seed = u64::from_le_bytes(seed);
    let knob = data.get(8).copied().unwrap_or(0);
    let cfg = crate::gen::Config {
        statements: 3 + (knob as usize) % 6,
        depth: 1 + data.get(9).copied().unwrap_or(0) as usize % 2,
        kinks: knob & 0x80 != 0,
    };
    let g = crate::gen::program(seed, &cfg);
    let what = format!("modes: gen seed {seed} {cfg:?}");
    let module = match assembler::assemble(&g.source, "gen.adasm") {
        Ok(m) => m,
        Err(e) => panic!("{what}: a generated program does not assemble: {e}"),
    };
    let convert = data.get(10).is_some_and(|b| b & 1 == 1);
    let new_engine = |convert: bool| {
        let mut e = match Engine::new(module.clone()) {
            Ok(e) => e,
            Err(e) => panic!("{what}: no engine: {e}"),
        };
        *e.vm_mut().limits_mut() = fuzz_limits();
        e.set_if_conversion(convert);
        e
    };
    let mut engine = new_engine(false);
    let Some(f) = engine.find(&g.entry) else {
        panic!("{what}: no entry function {}", g.entry)
    };
    let args = g.args.clone();
    let Ok(primal) = engine.run(f, &args) else {
        return; // a trap (a resource limit): nothing to compare
    };
    let mut grad = match engine.grad(f, &args) {
        Ok(g) => g,
        Err(e) => panic!("{what}: the primal ran but the gradient failed: {e}"),
    };
    let mut rng = crate::gen::Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15);
    if convert {
        let mut conv = new_engine(true);
        let cg = match conv.grad(f, &args) {
            Ok(g) => g,
            Err(e) => panic!("{what}: the gradient of converted code failed: {e}"),
        };
        let same = cg.value.to_bits() == grad.value.to_bits()
            && crate::all_same_but_zero_sign(&cg.grad, &grad.grad);
        assert!(
            same,
            "{what}: converted gradient {cg:?}, from the branches {grad:?}"
        );
        let w = random_dir(&args, &mut rng);
        if let (Ok(a), Ok(b)) = (conv.hvp(f, &args, &w), engine.hvp(f, &args, &w)) {
            let same = crate::all_same_but_zero_sign(&a.hvp, &b.hvp);
            assert!(same, "{what}: converted hvp {a:?}, from the branches {b:?}");
        }
        engine = conv;
        grad = cg;
    }
    checkpointed_as_stored(&mut engine, f, &args, &grad, &mut rng, &what);
    let (u, v) = (random_dir(&args, &mut rng), random_dir(&args, &mut rng));
    let close = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-9 * scale.max(1.0);
    // Forward against reverse.
    let t = match engine.jvp(f, &args, &u) {
        Ok(t) => t,
        Err(e) => panic!("{what}: jvp failed where grad ran: {e}"),
    };
    assert_eq!(
        t.value.to_string(),
        primal.to_string(),
        "{what}: jvp's value is not the primal's"
    );
    if let Some(Value::F64(tangent)) = t.tangent {
        let (gu, scale) = dot(&grad.grad, &u);
        if tangent.is_finite() && gu.is_finite() && scale.is_finite() {
            assert!(
                close(tangent, gu, scale.max(tangent.abs())),
                "{what}: the tangent along u is {tangent}, the gradient·u {gu}"
            );
        }
    }
    // Second order: both products, then the symmetry.
    let hu = match engine.hvp(f, &args, &u) {
        Ok(h) => h,
        Err(e) => panic!("{what}: hvp failed where grad ran: {e}"),
    };
    let hv = match engine.hvp(f, &args, &v) {
        Ok(h) => h,
        Err(e) => panic!("{what}: hvp failed where grad ran: {e}"),
    };
    assert_eq!(
        hu.value.to_bits(),
        grad.value.to_bits(),
        "{what}: hvp's value is not the gradient's"
    );
    let (vhu, s1) = dot(&hu.hvp, &v);
    let (uhv, s2) = dot(&hv.hvp, &u);
    let scale = s1.max(s2);
    if vhu.is_finite() && uhv.is_finite() && scale.is_finite() {
        assert!(
            (vhu - uhv).abs() <= 1e-8 * scale.max(1.0),
            "{what}: vᵀHu = {vhu} but uᵀHv = {uhv}"
        );
    }
}
