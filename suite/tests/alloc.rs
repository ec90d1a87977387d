//! Heap allocations per call after a warm-up call, counted by a global
//! allocator wrapper, for every suite program at its benchmark size:
//! advm's gradient (`Engine::grad_into`) and primal (`Vm::call_raw`) and the
//! native primal and adjoint must allocate nothing; the peers' counts are
//! printed for docs/benchmarks.md (`cargo test -p suite --features peers
//! --release --test alloc -- --nocapture`; without the feature, advm's and
//! the native ones only).

use suite::advm::Advm;
use suite::cases;
use suite::native::Native;
#[cfg(feature = "peers")]
use suite::peers::{EchidnaPeer, ReversePeer};
use testkit::alloc::allocs;

#[global_allocator]
static GLOBAL: testkit::alloc::Counting = testkit::alloc::Counting;

/// Allocations made by the second of two calls of `f`.
fn second_call(mut f: impl FnMut()) -> usize {
    f();
    let before = allocs();
    f();
    allocs() - before
}

#[test]
fn advm_and_native_allocate_nothing_per_call_after_warm_up() {
    let mut failures = Vec::new();
    for (case, input) in cases() {
        let mut advm = Advm::from_case(&case).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let mut g = vec![0.0; input.grad_len()];
        let mut native = Native::new();
        let counts = [
            (
                "advm grad",
                second_call(|| {
                    advm.grad().expect("advm gradient");
                }),
            ),
            (
                "advm primal",
                second_call(|| {
                    advm.primal().expect("advm primal");
                }),
            ),
            (
                "native primal",
                second_call(|| {
                    native.primal(&input);
                }),
            ),
            (
                "native adjoint",
                second_call(|| {
                    native.grad(&input, &mut g);
                }),
            ),
        ];
        // The peers' counts are printed, not required to be zero.
        #[cfg(feature = "peers")]
        let peer_counts = {
            let mut rev = ReversePeer::new();
            let mut ech = EchidnaPeer::new(&input);
            [
                (
                    "reverse",
                    second_call(|| {
                        rev.grad(&input, &mut g);
                    }),
                ),
                (
                    "echidna",
                    second_call(|| {
                        ech.grad(&mut g);
                    }),
                ),
            ]
        };
        #[cfg(not(feature = "peers"))]
        let peer_counts: [(&str, usize); 0] = [];
        let line: Vec<String> = counts
            .iter()
            .chain(&peer_counts)
            .map(|(w, n)| format!("{w} {n}"))
            .collect();
        println!("{:10} allocations per call: {}", case.file, line.join(", "));
        for (what, n) in &counts {
            if *n != 0 {
                failures.push(format!("{}: {what} made {n} allocations", case.file));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
