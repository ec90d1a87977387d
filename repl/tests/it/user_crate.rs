//! The crate in `examples/user/` uses advm as a user would: the `advm`
//! facade only, without the command line (`default-features = false`), from
//! outside the workspace. This test runs its tests (`cargo test --offline`
//! on its manifest), so that `cargo test --workspace` checks the facade
//! from a user's side: parse, gradients by parameter name against finite
//! differences, a gradient-descent loop reaching a known minimum, errors
//! through `Display`.
//!
//! It builds in a target directory of its own under this one's `tmp/`: the
//! cargo running this test still holds the lock on its own.

use std::path::Path;
use std::process::Command;

#[test]
fn user_crate_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = root.join("examples/user/Cargo.toml");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("user-crate");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["test", "--offline", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo test of examples/user failed:\n{stdout}\n{stderr}"
    );
    // The user crate's four tests ran (not an empty run that passes).
    assert!(
        stdout.contains("test result: ok. 4 passed"),
        "expected the user crate's 4 tests:\n{stdout}"
    );
}
