//! A fixed gradient workload for instruction counts under
//! `valgrind --tool=callgrind`: `cargo run --release -p advm-ad --example
//! workload -- FILE FUNC N` runs N gradient calls of a suite program at its
//! benchmark inputs (testkit::suite).
fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().unwrap_or_else(|| "powloop".into());
    let n: usize = args.nth(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let Some(case) = testkit::suite::cases().into_iter().find(|c| c.file == file) else {
        return eprintln!("no suite program {file}");
    };
    let src = std::fs::read_to_string(testkit::workspace_root().join(testkit::suite::path(&case)))
        .expect("program");
    let module = assembler::assemble(&src, case.file).expect("assembles");
    let mut e = ad::Engine::new(module).expect("verifies");
    let f = e.find(case.func).expect("function");
    let mut out = ad::Gradient::default();
    let primal = std::env::var("PRIMAL").is_ok();
    for _ in 0..n {
        if primal {
            e.run(f, &case.args).expect("run");
        } else {
            e.grad_into(f, &case.args, &mut out).expect("grad");
        }
    }
    println!("{}", out.value);
}
