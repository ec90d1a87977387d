//! Test support shared by the tiering and recursion tests: a program's
//! engine with no tier, the default tier or the eager one, and the value,
//! gradient and HVP of one function in it with the tier each ran in.

use ad::Engine;
use vm::{Limits, Tier, Value};

/// Which tier an engine has.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    /// None: everything interpreted.
    Interp,
    /// `jit::install`.
    Default,
    /// `jit::install_eager`.
    Eager,
}

/// An engine for `src` (no inlining: every call a frame), under `limits`
/// if given.
pub fn engine(src: &str, kind: Kind, limits: Option<&Limits>) -> Engine {
    let module = assembler::assemble(src, "three_calls").unwrap_or_else(|d| panic!("{d}"));
    let mut e = Engine::with_inlining(module, &ad::Policy::NONE).expect("verifies");
    if let Some(l) = limits {
        *e.vm_mut().limits_mut() = l.clone();
    }
    match kind {
        Kind::Interp => {}
        Kind::Default => jit::install(e.vm_mut()),
        Kind::Eager => jit::install_eager(e.vm_mut()),
    }
    e
}

/// Value, gradient and HVP (along 0.5 in each f64 parameter) of `f` at
/// `args` in `e` (bits, via `Debug`; a trap as its `Debug`), called twice
/// (the first call compiles or declines, the second uses the cache), and
/// the tiers of the primal call, of the gradient's last call and of the
/// HVP's last call.
pub fn outcome(e: &mut Engine, f: &str, args: &[Value]) -> (String, [Tier; 3]) {
    let id = e.find(f).expect("exists");
    let dir: Vec<Option<Value>> = args
        .iter()
        .map(|a| matches!(a, Value::F64(_)).then_some(Value::F64(0.5)))
        .collect();
    let mut out = String::new();
    let mut tiers = [Tier::Interp; 3];
    for _ in 0..2 {
        let r = e.run(id, args);
        tiers[0] = e.vm_mut().last_tier();
        let g = e
            .grad(id, args)
            .map(|g| format!("{:x} {:?}", g.value.to_bits(), g.grad));
        tiers[1] = e.vm_mut().last_tier();
        let h = e
            .hvp(id, args, &dir)
            .map(|h| format!("{:x} {:?} {:?}", h.value.to_bits(), h.grad, h.hvp));
        tiers[2] = e.vm_mut().last_tier();
        out = format!("{r:?}\n{g:?}\n{h:?}");
    }
    (out, tiers)
}
