//! Print a generated program (testkit) and its AD code, and run its
//! gradient: `cargo run -p advm-ad --example gen_ad -- SEED`.
fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let g = testkit::gen::program(seed, &testkit::gen::Config::default());
    println!("{}", g.source);
    let module = match assembler::assemble(&g.source, "gen.adasm") {
        Ok(m) => m,
        Err(d) => return eprintln!("{d}"),
    };
    let mut e = match ad::Engine::new(module) {
        Ok(e) => e,
        Err(err) => return eprintln!("{err}"),
    };
    let Some(f) = e.find(&g.entry) else { return };
    match e.disasm_ad(f) {
        Ok(t) => println!("{t}"),
        Err(err) => eprintln!("{err}"),
    }
    println!(
        "args {:?}\nprimal {:?}\ngrad {:?}",
        g.args,
        e.run(f, &g.args),
        e.grad(f, &g.args)
    );
}
