//! Experiment, not part of advm: dispatch by tail calls ("threaded
//! code"), the interpreter design docs/benchmarks.md (*Dispatch and code placement*,
//! *What is left*) weighs against `Vm::exec` (`vm/src/interp/exec.rs`)'s `match` loop.
//!
//! Seven opcodes (`copy`, `add.f`, `sub.f`, `mul.f`, a step-and-branch
//! with a relative target, `call`, `ret`), each a function that ends by
//! calling the next instruction's handler through a table: in a release
//! build LLVM turns that call into a `jmp *`, so every handler has its own
//! dispatch and its own register allocation. Nothing guarantees it (Rust
//! has no stable guaranteed tail calls): the last run executes 10^8
//! instructions and would overflow the stack if one handler did not
//! tail-call. A debug build does not, so a real interpreter would need a
//! trampoline there. No fuel, limits, traps, frame images or verifier:
//! raw pointers throughout, which is why this is not in the workspace.
//!
//! Run: `cargo new thr && cp docs/experiments/threaded_dispatch.rs
//! thr/src/main.rs && cd thr && cargo run --release`. It prints ns per
//! operation over 1 000 iterations of 8 operations, like the `dispatch`
//! group of `cargo bench -p advm-bench --bench ad` (median of 200 runs, as criterion reports
//! medians).

use std::hint::black_box;
use std::time::Instant;

#[derive(Clone, Copy)]
#[repr(C)]
struct Ins { op: u8, _f: u8, a: u16, b: u16, c: u16, x: u32 }

struct St { frames: Vec<(*const Ins, *mut u64)>, funcs: Vec<(*const Ins, usize)>, steps: u64 }

type H = fn(&mut St, *const Ins, *mut u64) -> u64;

const MOV: u8 = 0; const ADDF: u8 = 1; const MULF: u8 = 2; const JSTEP: u8 = 3; const RET: u8 = 4; const CALL: u8 = 5; const SUBF: u8 = 6;

static T: [H; 7] = [op_mov, op_addf, op_mulf, op_jstep, op_ret, op_call, op_subf];

#[inline(always)]
fn next(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 {
    let op = unsafe { (*ip).op } as usize;
    unsafe { T.get_unchecked(op)(st, ip, r) }
}
#[inline(always)]
fn g(r: *mut u64, i: u16) -> u64 { unsafe { *r.add(i as usize) } }
#[inline(always)]
fn s(r: *mut u64, i: u16, v: u64) { unsafe { *r.add(i as usize) = v } }
#[inline(always)]
fn gf(r: *mut u64, i: u16) -> f64 { f64::from_bits(g(r, i)) }

fn op_mov(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 { let i = unsafe { *ip }; s(r, i.a, g(r, i.b)); next(st, unsafe { ip.add(1) }, r) }
fn op_addf(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 { let i = unsafe { *ip }; s(r, i.a, (gf(r, i.b) + gf(r, i.c)).to_bits()); next(st, unsafe { ip.add(1) }, r) }
fn op_subf(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 { let i = unsafe { *ip }; s(r, i.a, (gf(r, i.b) - gf(r, i.c)).to_bits()); next(st, unsafe { ip.add(1) }, r) }
fn op_mulf(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 { let i = unsafe { *ip }; s(r, i.a, (gf(r, i.b) * gf(r, i.c)).to_bits()); next(st, unsafe { ip.add(1) }, r) }
fn op_jstep(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 {
    let i = unsafe { *ip };
    let v = g(r, i.a).wrapping_add(g(r, i.b));
    s(r, i.a, v);
    if (v as i64) < (g(r, i.c) as i64) {
        st.steps += 1;
        // relative displacement in instructions
        next(st, unsafe { ip.offset(i.x as i32 as isize) }, r)
    } else {
        next(st, unsafe { ip.add(1) }, r)
    }
}
fn op_ret(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 {
    let i = unsafe { *ip };
    let v = g(r, i.a);
    match st.frames.pop() {
        None => v,
        Some((ret_ip, ret_r)) => {
            let c = unsafe { *ret_ip };
            s(ret_r, c.a, v);
            next(st, unsafe { ret_ip.add(1) }, ret_r)
        }
    }
}
fn op_call(st: &mut St, ip: *const Ins, r: *mut u64) -> u64 {
    let i = unsafe { *ip };
    let (code, nregs) = st.funcs[i.x as usize];
    st.frames.push((ip, r));
    let nr = unsafe { r.add(nregs) };
    s(nr, 0, g(r, i.b));
    next(st, code, nr)
}

fn ins(op: u8, a: u16, b: u16, c: u16, x: u32) -> Ins { Ins { op, _f: 0, a, b, c, x } }

fn run(code: &[Ins], funcs: &[(*const Ins, usize)], regs: &mut [u64]) -> u64 {
    let mut st = St { frames: Vec::with_capacity(64), funcs: funcs.to_vec(), steps: 0 };
    next(&mut st, code.as_ptr(), regs.as_mut_ptr())
}

fn main() {
    // regs: 0 = i, 1 = step 1, 2 = n, 3 = x, 4 = y
    let per = 8;
    let iters = 1000u64;
    let ident = vec![ins(RET, 0, 0, 0, 0)];
    for (name, op) in [("copy", MOV), ("add.f", ADDF), ("sub.f", SUBF), ("mul.f", MULF), ("call", CALL)] {
        let mut code = Vec::new();
        for _ in 0..per {
            code.push(match op { MOV => ins(MOV, 4, 3, 0, 0), CALL => ins(CALL, 4, 3, 0, 0), o => ins(o, 4, 3, 3, 0) });
        }
        code.push(ins(JSTEP, 0, 1, 2, (-(per as i32)) as u32));
        code.push(ins(RET, 4, 0, 0, 0));
        let funcs = vec![(ident.as_ptr(), 8usize)];
        let mut regs = vec![0u64; 8 + 8 * 64];
        let mut times = Vec::with_capacity(200);
        for _ in 0..200 {
            regs[0] = 0; regs[1] = 1; regs[2] = iters; regs[3] = 1.5f64.to_bits();
            let t = Instant::now();
            black_box(run(black_box(&code), &funcs, &mut regs));
            times.push(t.elapsed().as_nanos() as f64);
        }
        times.sort_by(f64::total_cmp);
        let best = times[times.len() / 2];
        println!("{name:6} {:.2} ns per op ({:.1} us per {} ops)", best / (iters * per as u64) as f64, best / 1000.0, iters * per as u64);
    }
    // deep: 10^8 instructions to prove tail calls
    let code = vec![ins(MOV, 4, 3, 0, 0), ins(JSTEP, 0, 1, 2, (-1i32) as u32), ins(RET, 4, 0, 0, 0)];
    let mut regs = vec![0u64; 8];
    regs[1] = 1; regs[2] = 50_000_000; regs[3] = 7;
    println!("long run: {}", run(&code, &[], &mut regs));
}
