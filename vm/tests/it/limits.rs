//! Resource limits of the VM through the library (`vm::Limits`): the heap
//! limit, the exact meaning of the depth limit, and what their traps say.
//! The same limits through the `advm` binary: `repl/tests/it/limits.rs`.

use testkit::ir::*;
use vm::bytecode::Program;
use vm::interp::{Limits, TrapKind, Vm};
use vm::ir::FuncId;
use vm::op::Op;
use vm::{Type, Value};

use Type::{Arr, Bool, F64, I64};

/// `fn @alloc(%n: i64, %m: i64) -> f64`: `n` times `anew m`, every array
/// kept alive (arrays live until the end of the top-level call).
fn allocator() -> vm::ir::Module {
    let mut b = B::new("alloc", &[("n", I64), ("m", I64)], F64);
    let entry = b.block("entry");
    let head = b.block("head");
    let body = b.block("body");
    let done = b.block("done");
    b.jmp(entry, head);
    let i = b.val("i", I64);
    let i2 = b.val("i2", I64);
    let (z, one) = (b.i64(0), b.i64(1));
    b.phi(head, i, &[(entry, z), (body, i2)]);
    let (n, m) = (b.p(0), b.p(1));
    let c = b.op(head, Op::LtI, Some(Bool), &[i, n]);
    b.br(head, c, body, done);
    let a = b.val("a", Arr);
    b.set(body, Op::ANew, a, &[m]);
    b.set(body, Op::AddI, i2, &[i, one]);
    b.jmp(body, head);
    let f = b.f64(0.0);
    b.ret(done, f);
    b.module()
}

/// `fn @first(%v: f64[]) -> f64`: `v[0]`.
fn first() -> vm::ir::Module {
    let mut b = B::new("first", &[("v", Arr)], F64);
    let entry = b.block("entry");
    let (v, z) = (b.p(0), b.i64(0));
    let x = b.op(entry, Op::AGet, Some(F64), &[v, z]);
    b.ret(entry, x);
    b.module()
}

/// Bytes one array of `n` elements costs: 8 per element (16 with its
/// shadow in AD mode) and 48 for its slot.
fn cost(n: usize, ad: bool) -> usize {
    n * if ad { 16 } else { 8 } + 48
}

#[test]
fn the_heap_limit_is_a_library_setting_with_a_sane_default() {
    let l = Limits::default();
    assert_eq!(l.max_heap_bytes, 1 << 32, "4 GiB");
    // One array of the largest length fits with its shadow (in a
    // gradient), and twice without (in a run).
    assert!(cost(l.max_array_len, true) <= l.max_heap_bytes);
    assert!(2 * cost(l.max_array_len, false) <= l.max_heap_bytes);
    let mut vm = Vm::new(Limits {
        max_heap_bytes: 1000,
        ..Limits::default()
    });
    assert_eq!(vm.limits().max_heap_bytes, 1000);
    vm.limits_mut().max_heap_bytes = 2000;
    assert_eq!(vm.limits().max_heap_bytes, 2000);
}

#[test]
fn a_loop_of_anew_hits_the_heap_limit() {
    let p = load(&allocator());
    let mut vm = Vm::default();
    let limit = 10 * cost(1000, false);
    vm.limits_mut().max_heap_bytes = limit;
    let args = |n: i64| [Value::I64(n), Value::I64(1000)];
    assert_eq!(vm.run(&p, FuncId(0), &args(10)), Ok(Value::F64(0.0)));
    let t = vm.run(&p, FuncId(0), &args(11)).expect_err("traps");
    assert_eq!(
        t.kind,
        TrapKind::HeapLimit {
            needed: limit + cost(1000, false),
            limit
        }
    );
    assert_eq!((t.func.as_str(), t.block.as_str()), ("alloc", "body"));
    let want = format!(
        "trap: arrays exceed the heap limit of {limit} bytes: the live arrays would hold {} \
         (raise it with --max-heap-bytes) in @alloc, block body, at `anew %a, %m`",
        limit + cost(1000, false)
    );
    assert!(t.to_string().starts_with(&want), "{t}");
    // Each top-level call starts with an empty heap: the same call again
    // fits, and so do many calls in a row.
    for _ in 0..3 {
        assert_eq!(vm.run(&p, FuncId(0), &args(10)), Ok(Value::F64(0.0)));
    }
    // A million arrays of 8 MB each (8 TB, far past any machine's memory)
    // end in a trap when the live arrays reach the limit, not in an abort.
    vm.limits_mut().max_heap_bytes = 64 << 20;
    let t = vm
        .run(&p, FuncId(0), &[Value::I64(1_000_000), Value::I64(1 << 20)])
        .expect_err("traps");
    assert!(matches!(t.kind, TrapKind::HeapLimit { .. }), "{t}");
}

#[test]
fn shadows_count_in_ad_mode() {
    let p = load(&allocator());
    let mut vm = Vm::default();
    vm.limits_mut().max_heap_bytes = 10 * cost(1000, false);
    // 10 arrays fit a run; with shadows only 5 fit.
    vm.begin(true);
    vm.call_raw(&p, FuncId(0), &[5, 1000]).expect("5 fit");
    vm.begin(true);
    let t = vm.call_raw(&p, FuncId(0), &[6, 1000]).expect_err("traps");
    assert!(matches!(t.kind, TrapKind::HeapLimit { .. }), "{t}");
}

#[test]
fn argument_arrays_count_against_the_heap_limit() {
    let p = load(&first());
    let mut vm = Vm::default();
    vm.limits_mut().max_heap_bytes = cost(100, false);
    let v = |n: usize| [Value::Arr(vec![1.5; n])];
    assert_eq!(vm.run(&p, FuncId(0), &v(100)), Ok(Value::F64(1.5)));
    let t = vm.run(&p, FuncId(0), &v(101)).expect_err("traps");
    assert!(matches!(t.kind, TrapKind::HeapLimit { .. }), "{t}");
    assert!(t.to_string().contains("--max-heap-bytes"), "{t}");
    // Several argument arrays add up (as in the AD driver's `begin`).
    vm.begin(false);
    vm.alloc_array(&[0.0; 50]).expect("fits");
    let t = vm.alloc_array(&[0.0; 50]).expect_err("the second does not");
    assert!(matches!(t.kind, TrapKind::HeapLimit { .. }), "{t}");
}

/// An argument longer than `max_array_len` is not reported as an `anew`.
#[test]
fn an_oversized_argument_array_has_its_own_message() {
    let p = load(&first());
    let mut vm = Vm::default();
    vm.limits_mut().max_array_len = 3;
    let t = vm
        .run(&p, FuncId(0), &[Value::Arr(vec![0.0; 4])])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::ArgArrayTooLarge { len: 4, limit: 3 });
    assert_eq!(
        t.to_string(),
        "trap: argument array of 4 elements exceeds the array limit of 3 (raise it with --max-array)"
    );
}

/// The limit also bounds the buffers kept for reuse: lowered after a
/// large call, the memory held is given back.
#[test]
fn a_lowered_heap_limit_applies_to_a_reused_vm() {
    let p = load(&allocator());
    let mut vm = Vm::default();
    vm.run(&p, FuncId(0), &[Value::I64(100), Value::I64(10_000)])
        .expect("8 MB fit the default");
    vm.limits_mut().max_heap_bytes = 10 * cost(1000, false);
    assert!(vm
        .run(&p, FuncId(0), &[Value::I64(11), Value::I64(1000)])
        .is_err());
    assert_eq!(
        vm.run(&p, FuncId(0), &[Value::I64(10), Value::I64(1000)]),
        Ok(Value::F64(0.0))
    );
}

/// With `limit` frames allowed, `@deep(limit - 1)` (which needs `limit`
/// frames) runs and `@deep(limit)` traps at its deepest call.
fn depth_limit_is_exact(vm: &mut Vm, p: &Program, limit: usize) {
    vm.limits_mut().max_call_depth = limit;
    let n = limit as i64 - 1;
    assert_eq!(
        vm.run(p, FuncId(0), &[Value::I64(n)]),
        Ok(Value::F64(n as f64)),
        "limit {limit}"
    );
    let t = vm
        .run(p, FuncId(0), &[Value::I64(n + 1)])
        .expect_err("one frame too many");
    assert_eq!(t.kind, TrapKind::CallDepth { limit }, "{t}");
    assert_eq!((t.func.as_str(), t.block.as_str()), ("deep", "step"));
    assert!(t.instr.starts_with("call "), "{}", t.instr);
}

#[test]
fn the_depth_limit_counts_frames_exactly() {
    let p = load(&deep());
    let mut vm = Vm::default();
    // `@deep(n)` needs n + 1 frames.
    for limit in [1usize, 2, 5] {
        depth_limit_is_exact(&mut vm, &p, limit);
    }
    // 0 allows no frame at all: even a call-free run traps, at the entry.
    vm.limits_mut().max_call_depth = 0;
    let t = vm.run(&p, FuncId(0), &[Value::I64(0)]).expect_err("traps");
    assert_eq!(t.kind, TrapKind::CallDepth { limit: 0 });
    assert_eq!((t.func.as_str(), t.pc), ("deep", 0));
}

/// Trap messages name a call's callee (`@deep`), not its id.
#[test]
fn a_trapping_call_names_its_callee() {
    let p = load(&deep());
    let mut vm = Vm::default();
    vm.limits_mut().max_call_depth = 3;
    let t = vm.run(&p, FuncId(0), &[Value::I64(10)]).expect_err("traps");
    assert!(t.instr.starts_with("call "), "{}", t.instr);
    assert!(t.instr.contains("@deep("), "{}", t.instr);
    assert!(!t.instr.contains("fn0"), "{}", t.instr);
    assert!(t.to_string().contains("@deep("), "{t}");
}

/// One compare stands for both the depth limit and the frame stack's
/// capacity: the limit stays exact on either side of the stack's growth
/// (64 frames, then doubling), on a fresh VM and on one whose frame stack
/// grew larger earlier, and a limit lowered or raised between calls
/// applies to the next call.
#[test]
fn the_depth_limit_is_exact_whatever_the_frame_stack_holds() {
    let p = load(&deep());
    let check = |vm: &mut Vm, limit: usize| depth_limit_is_exact(vm, &p, limit);
    let limits = [63, 64, 65, 66, 127, 128, 129, 130, 257, 1000];
    for limit in limits {
        check(&mut Vm::default(), limit);
    }
    let mut vm = Vm::default();
    vm.limits_mut().max_call_depth = 5000;
    vm.run(&p, FuncId(0), &[Value::I64(4000)]).expect("fits");
    for limit in limits.iter().rev().chain(&limits) {
        check(&mut vm, *limit);
    }
}

/// `fn @wide(%n: i64, %x: f64) -> f64`: a chain of `k` additions (a frame
/// of about `k` registers), then `wide(n - 1, x)` while `n > 0`.
fn wide(k: usize) -> vm::ir::Module {
    let mut b = B::new("wide", &[("n", I64), ("x", F64)], F64);
    let entry = b.block("entry");
    let rec = b.block("rec");
    let done = b.block("done");
    let (n, x) = (b.p(0), b.p(1));
    let mut acc = x;
    for _ in 0..k {
        acc = b.op(entry, Op::AddF, Some(F64), &[acc, x]);
    }
    let zero = b.i64(0);
    let c = b.op(entry, Op::GtI, Some(Bool), &[n, zero]);
    b.br(entry, c, rec, done);
    let one = b.i64(1);
    let m = b.op(rec, Op::SubI, Some(I64), &[n, one]);
    let r = b.call(rec, 0, F64, &[m, acc]);
    b.ret(rec, r);
    b.ret(done, acc);
    b.module()
}

#[test]
fn the_memory_budget_is_a_library_setting_with_a_default_that_covers_the_others() {
    let l = Limits::default();
    assert_eq!(l.max_memory_bytes, 1 << 32, "4 GiB");
    // The largest array fits with its shadow, and with half the AD
    // stacks' limit.
    assert!(cost(l.max_array_len, true) + l.max_stack_bytes / 2 <= l.max_memory_bytes);
    assert!(l.max_heap_bytes <= l.max_memory_bytes);
}

/// Deep recursion with large frames: the register stack is bounded by the
/// memory budget (it was bounded only by the depth limit: 100 000 frames
/// of a large function took more memory than the machine had).
#[test]
fn deep_recursion_with_large_frames_hits_the_memory_budget() {
    let p = load(&wide(2000));
    let mut vm = Vm::default();
    let budget = 16 << 20;
    vm.limits_mut().max_memory_bytes = budget;
    let args = |n: i64| [Value::I64(n), Value::F64(1.0)];
    assert!(vm.run(&p, FuncId(0), &args(100)).is_ok());
    let t = vm.run(&p, FuncId(0), &args(99_000)).expect_err("traps");
    assert_eq!(t.kind, TrapKind::MemoryLimit { limit: budget });
    assert!(
        t.to_string().starts_with(&format!(
            "trap: memory exceeds the limit of {budget} bytes (registers, frames, AD stacks and \
             arrays together; raise it with --max-memory) in @wide"
        )),
        "{t}"
    );
    // It traps near the budget: about budget / (8 * 2000) frames ran.
    let t = vm.run(&p, FuncId(0), &args(1100)).expect_err("traps");
    assert!(matches!(t.kind, TrapKind::MemoryLimit { .. }), "{t}");
    assert!(vm.run(&p, FuncId(0), &args(900)).is_ok());
    // Lowering the budget between calls gives memory back.
    vm.limits_mut().max_memory_bytes = 1 << 20;
    assert!(vm.run(&p, FuncId(0), &args(20)).is_ok());
    assert!(vm.run(&p, FuncId(0), &args(100)).is_err());
}

/// Arrays count against the budget when it is smaller than the heap limit.
#[test]
fn arrays_count_against_the_memory_budget() {
    let p = load(&allocator());
    let mut vm = Vm::default();
    vm.limits_mut().max_memory_bytes = 1 << 20;
    let t = vm
        .run(&p, FuncId(0), &[Value::I64(1000), Value::I64(1000)])
        .expect_err("traps");
    assert_eq!(t.kind, TrapKind::MemoryLimit { limit: 1 << 20 });
    assert!(t.to_string().contains("--max-memory"), "{t}");
    assert!(vm
        .run(&p, FuncId(0), &[Value::I64(100), Value::I64(1000)])
        .is_ok());
    let first = load(&first());
    let t = vm
        .run(&first, FuncId(0), &[Value::Arr(vec![0.5; 1 << 17])])
        .expect_err("an argument array over the budget");
    assert_eq!(t.kind, TrapKind::MemoryLimit { limit: 1 << 20 });
}
