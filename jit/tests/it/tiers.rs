//! The comparison the tests of this binary share: one call in an engine
//! without the native tier and in one with it.

use ad::Engine;
use vm::{Tier, Value};

/// What [`same`] saw of the native engine's call.
pub(crate) struct Both {
    /// The primal's result or trap, as `Debug` prints it.
    pub text: String,
    /// Whether the native tier ran the primal.
    pub native: bool,
    /// Whether the primal trapped.
    pub trapped: bool,
}

/// Run and differentiate `name` on `args` in `a` (the interpreter) and
/// `b` (the native tier), each under the limits it has: the same results,
/// traps, instruction counts and gradients.
pub(crate) fn same(a: &mut Engine, b: &mut Engine, name: &str, args: &[Value]) -> Both {
    let limits = b.vm_mut().limits().clone();
    let f = a.find(name).expect("exists");
    let (ra, rb) = (a.run(f, args), b.run(f, args));
    let text = format!("{rb:?}");
    assert_eq!(format!("{ra:?}"), text, "run {name} {args:?} {limits:?}");
    assert_eq!(
        a.vm_mut().executed(),
        b.vm_mut().executed(),
        "count {name} {args:?} {limits:?}"
    );
    let native = b.vm_mut().last_tier() == Tier::Native;
    let (ga, gb) = (a.grad(f, args), b.grad(f, args));
    assert_eq!(
        format!("{ga:?}"),
        format!("{gb:?}"),
        "grad {name} {args:?} {limits:?}"
    );
    Both {
        text,
        native,
        trapped: rb.is_err(),
    }
}
