//! The reference docs keep up with the code, and stay reference:
//!
//! * every mnemonic the assembler accepts (`assembler::mnemonics`, checked
//!   here against what `assembler::assemble` really accepts) and every
//!   opcode of `vm::op::Op::ALL` (what listings print) is documented in
//!   docs/language.md as `` `name` ``;
//! * every subcommand and flag `advm --help` lists is in docs/cli.md;
//! * no file of docs/ and no README holds a work-log label (`Session 8`),
//!   a date of work or a commit hash: history lives in git.

use std::path::{Path, PathBuf};
use std::process::Command;
use vm::op::Op;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `doc` shows `name` as code: `` `name` `` or at the start of a
/// code span followed by its operands (`` `add a, b` ``).
fn documented(doc: &str, name: &str) -> bool {
    let open = format!("`{name}");
    doc.match_indices(&open)
        .any(|(at, _)| matches!(doc[at + open.len()..].chars().next(), Some('`') | Some(' ')))
}

#[test]
fn the_documented_check_tells_a_name_from_a_longer_one() {
    let doc = "`add a, b` and `mul.f` and `ret`";
    assert!(documented(doc, "add"));
    assert!(documented(doc, "mul.f"));
    assert!(documented(doc, "ret"));
    assert!(!documented(doc, "mul"), "`mul.f` does not document `mul`");
    assert!(!documented(doc, "re"));
    assert!(!documented(doc, "sub"));
}

/// Whether assembling one instruction spelled `m` reports an unknown
/// instruction (a known mnemonic may still make the line wrong in other
/// ways, which does not count).
fn unknown_instruction(m: &str) -> bool {
    let src = format!("fn @f(%x: f64) -> f64 {{\nentry:\n    %y = {m} %x\n    ret %x\n}}\n");
    match assembler::assemble(&src, "probe.adasm") {
        Ok(_) => false,
        Err(d) => d.render().contains("unknown instruction"),
    }
}

#[test]
fn the_mnemonic_list_is_what_the_assembler_accepts() {
    let list: Vec<&str> = assembler::mnemonics().collect();
    for m in [
        "add", "sin", "aset", "select", "copy", "phi", "call", "br", "ret",
    ] {
        assert!(
            list.contains(&m),
            "`{m}` missing from assembler::mnemonics()"
        );
    }
    for m in &list {
        // `jmp`, `br`, `ret`, `call`, `phi` with a wrong shape are syntax
        // errors, never "unknown instruction".
        assert!(!unknown_instruction(m), "`{m}` is listed but not accepted");
    }
    // The other way: no opcode's spelling (typed, or with its type suffix
    // dropped) is accepted unless it is listed, so a new text mnemonic
    // cannot escape the list and hence the docs.
    for op in Op::ALL {
        let full = op.mnemonic();
        let short = full
            .strip_suffix(".f")
            .or_else(|| full.strip_suffix(".i"))
            .unwrap_or(full);
        for spelling in [full, short] {
            if !list.contains(&spelling) {
                assert!(
                    unknown_instruction(spelling),
                    "`{spelling}` ({op:?}) is accepted but not in assembler::mnemonics()"
                );
            }
        }
    }
    assert!(unknown_instruction("frobnicate"));
}

#[test]
fn every_mnemonic_and_opcode_is_in_the_language_reference() {
    let doc = read("docs/language.md");
    let mut missing: Vec<String> = assembler::mnemonics()
        .filter(|m| !documented(&doc, m))
        .map(|m| format!("`{m}` (text)"))
        .collect();
    missing.extend(
        Op::ALL
            .iter()
            .filter(|op| !documented(&doc, op.mnemonic()))
            .map(|op| format!("`{}` ({op:?})", op.mnemonic())),
    );
    assert!(
        missing.is_empty(),
        "docs/language.md does not document: {}",
        missing.join(", ")
    );
    assert!(Op::ALL.len() > 80, "the opcode table looks empty");
}

/// The words of `advm ... --help` that start with `--`, and the commands
/// of the top-level help.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_advm"))
        .args(args)
        .output()
        .expect("advm runs");
    assert!(out.status.success(), "advm {args:?} --help failed");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

fn flags(help: &str) -> Vec<String> {
    help.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect()
}

#[test]
fn every_command_and_flag_is_in_the_cli_reference() {
    let doc = read("docs/cli.md");
    let top = help(&["--help"]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "commands not found in: {top}");
    let mut missing = Vec::new();
    for c in &commands {
        if !doc.contains(&format!("### `advm {c}`")) {
            missing.push(format!("a section `advm {c}`"));
        }
        for f in flags(&help(&[c, "--help"])) {
            if f != "--help" && !doc.contains(&f) {
                missing.push(format!("{f} (of {c})"));
            }
        }
    }
    for f in flags(&top) {
        if !doc.contains(&f) {
            missing.push(f);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/cli.md does not document: {}",
        missing.join(", ")
    );
}

/// Work-log residue in a line: a session label, a date, a commit hash.
fn work_log(line: &str) -> Option<&'static str> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    // `Session 8`, `*Session 9*`, `## Session 10 (...)`.
    for (at, _) in lower.match_indices("session ") {
        if bytes.get(at + 8).is_some_and(u8::is_ascii_digit) {
            return Some("a session label");
        }
    }
    // An ISO date, 2026-11-24.
    let b = line.as_bytes();
    for i in 0..b.len().saturating_sub(9) {
        let w = &b[i..i + 10];
        let digits = [0, 1, 2, 3, 5, 6, 8, 9]
            .iter()
            .all(|&k| w[k].is_ascii_digit());
        if digits && w[4] == b'-' && w[7] == b'-' && w[0] == b'2' && w[1] == b'0' {
            return Some("a date");
        }
    }
    // A commit hash: a backquoted run of 7 to 12 hex digits with a digit
    // and a letter, or hex after the word "commit".
    let hashlike = |w: &str| {
        (7..=40).contains(&w.len())
            && w.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
            && w.bytes().any(|c| c.is_ascii_digit())
            && w.bytes().any(|c| c.is_ascii_alphabetic())
    };
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 1 && part.len() <= 12 && hashlike(part) {
            return Some("a commit hash");
        }
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for pair in words.windows(2) {
        if matches!(pair[0], "commit" | "commits") && hashlike(pair[1]) {
            return Some("a commit hash");
        }
    }
    None
}

#[test]
fn the_work_log_check_finds_labels_dates_and_hashes() {
    for line in [
        "## Session 8: an adversarial probe",
        "the listing changed in *Session 7*.",
        "(session 10, same machine)",
        "Recorded on the machine (2026-11-23).",
        "re-run at commit `b291109`",
        "fixed in commit d4b0aac by the new",
    ] {
        assert!(work_log(line).is_some(), "not flagged: {line}");
    }
    for line in [
        "## Sessions and history",
        "the REPL session keeps its functions",
        "`deadbeef` is hex without a digit",
        "`add.f`, `1234567` and 2^27 elements",
        "x86 instructions per call: 211 811",
    ] {
        assert_eq!(work_log(line), None, "flagged: {line}");
    }
}

#[test]
fn docs_hold_no_work_log_labels_dates_or_commit_hashes() {
    let mut files = vec![root().join("README.md"), root().join("programs/README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 8, "docs not found: {files:?}");
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("a readable doc");
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = work_log(line) {
                found.push(format!("{}:{}: {what}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "docs are reference, history lives in git:\n{}",
        found.join("\n")
    );
}
