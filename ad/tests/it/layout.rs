//! The source layout the design asks for, checked: every file of
//! `ad/src` and `vm/src` opens with a `//!` that says what it owns (one
//! pass or concern per file), and no Rust file of the workspace includes
//! another by `#[path]` (shared code is a module of a crate: `testkit`,
//! or the `advm-bench` library).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, but build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !matches!(name, "target" | ".git") && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// A `#[path = ...]` attribute in `text`, outside comments.
fn path_include(text: &str) -> Option<String> {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .find(|code| code.starts_with("#[path"))
        .map(str::to_string)
}

#[test]
fn every_source_file_of_ad_and_vm_says_what_it_owns() {
    let mut files = Vec::new();
    rust_files(&root().join("ad/src"), &mut files);
    rust_files(&root().join("vm/src"), &mut files);
    assert!(files.len() > 60, "{} files", files.len());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        assert!(
            text.starts_with("//!"),
            "{}: does not open with a `//!` saying what it owns",
            f.display()
        );
    }
}

#[test]
fn no_file_is_included_by_path() {
    let mut files = Vec::new();
    for member in [
        "vm",
        "assembler",
        "adl",
        "ad",
        "repl",
        "testkit",
        "suite",
        "jit",
        "bench",
        "fuzz",
    ] {
        rust_files(&root().join(member), &mut files);
    }
    assert!(files.len() > 200, "{} files", files.len());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        if let Some(code) = path_include(&text) {
            panic!("{}: `{code}` (make it a module of a crate)", f.display());
        }
    }
    assert!(path_include("#[path = \"corpus/mod.rs\"]\nmod corpus;").is_some());
    assert!(path_include("// #[path = \"x.rs\"]").is_none());
}
