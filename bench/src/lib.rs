//! What the benches and the `compile` binary of `advm-bench` share: the
//! compile-time corpus ([`corpus`]). A library target of this package, not
//! a `#[path]` include, so that the `native` bench and the `compile`
//! binary read the same code; it depends on no benchmark harness, and
//! `cargo test --workspace` builds none of this package (its targets set
//! `test = false`).

pub mod corpus;
