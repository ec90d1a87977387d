//! The verifier on arbitrary bytecode: decoding and verifying never panic,
//! and whatever verifies runs (under fuel, with bounds-checked registers)
//! without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vm::bytecode::{BlockMark, CallSite, Function, Program};
use vm::ir::{FuncId, RetType};
use vm::Type;

fn ty(b: u8) -> Type {
    match b % 4 {
        0 => Type::F64,
        1 => Type::I64,
        2 => Type::Bool,
        _ => Type::Arr,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (head, rest) = data.split_at(8);
    let nregs = 1 + head[0] as usize % 16;
    let nparams = head[1] as usize % (nregs + 1);
    let reg_types: Vec<Type> = (0..nregs).map(|i| ty(head[2].wrapping_add(i as u8 * head[3]))).collect();
    let words: Vec<[u8; 12]> = rest
        .chunks_exact(12)
        .map(|c| {
            let mut w = [0u8; 12];
            w.copy_from_slice(c);
            w
        })
        .collect();
    let Ok(code) = vm::verify::decode(&words) else { return };
    let ret = if head[4] % 5 == 4 { RetType::Many(vec![Type::F64]) } else { RetType::One(ty(head[4])) };
    let f = Function {
        name: "fuzz".into(),
        param_types: reg_types[..nparams].to_vec(),
        ret,
        reg_types: reg_types.clone(),
        consts: Vec::new(),
        code,
        sites: vec![CallSite { func: FuncId(0), args: (0..nparams as u16).collect(), rets: vec![0] }],
        tables: vec![vec![0, head[5] as u32 % 8]],
        lists: vec![vec![head[6] as u16 % nregs as u16]],
        blocks: vec![BlockMark { name: "entry".into(), start: 0 }],
        locs: Vec::new(),
        reg_names: Vec::new(),
    };
    let mut p = Program::new();
    p.push(f);
    if vm::verify::verify_program(&mut p).is_ok() {
        let mut m = vm::Vm::default();
        m.limits_mut().fuel = Some(10_000);
        m.limits_mut().max_call_depth = 64;
        m.begin(head[7] % 2 == 0);
        let args = vec![0u64; nparams];
        let _ = m.call_raw(&p, FuncId(0), &args);
    }
});
