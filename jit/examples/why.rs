fn main() {
    for path in std::env::args().skip(1) {
        let src = std::fs::read_to_string(&path).unwrap();
        let module = assembler::assemble(&src, &path).unwrap();
        let e = ad::Engine::new(module).unwrap();
        let prog = e.program();
        let mut j = jit::Jit::new();
        for i in 0..prog.len() {
            let f = vm::ir::FuncId(i as u32);
            println!(
                "{path} @{}: {:?} {:?}",
                prog.func(f).name,
                jit::tier_of(prog, f),
                j.prepare(prog, f)
            );
        }
    }
}
