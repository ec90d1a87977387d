//! Print the generated program for a seed: `cargo run -p testkit --example show -- SEED`.
fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let g = testkit::gen::program(seed, &testkit::gen::Config::default());
    println!("{}\n; args: {:?}", g.source, g.args);
}
