//! The derivative rules of every AD mode are one `match` over every opcode
//! with no wildcard arm (`ad/src/rules/`), so that an opcode added to the
//! table without a rule is a compile error rather than a silent zero.
//! Two guards keep a wildcard from creeping back in: the rule functions
//! deny clippy's `wildcard_enum_match_arm` and
//! `match_wildcard_for_single_variants` (so `cargo clippy -- -D warnings`
//! fails on one), and this test reads the rules' source.

use std::path::Path;

/// The arms of `text` (Rust source) that match any opcode: `_`, a `_`
/// guard, a lone binding (`op =>`, `other if ...`), or an alternative
/// ending in `_` (`Op::Sin | _ =>`), as `(line, code)`.
fn wildcard_arms(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        let Some(arm) = code.split_once("=>").map(|(p, _)| p.trim()) else {
            continue;
        };
        // The pattern without its guard, and its last alternative.
        let pattern = arm.split(" if ").next().unwrap_or("").trim();
        let last = pattern.rsplit('|').next().unwrap_or("").trim();
        let binding = !last.is_empty()
            && last
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !matches!(last, "true" | "false");
        if last == "_" || binding {
            found.push((n + 1, code.to_string()));
        }
    }
    found
}

#[test]
fn no_rule_match_has_a_wildcard_arm() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("ad/src/rules exists") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).expect("readable");
        let found = wildcard_arms(&text);
        assert!(
            found.is_empty(),
            "{}: wildcard arms in a derivative-rule match: {found:?}",
            path.display()
        );
    }
    assert!(
        files >= 2,
        "expected the rules modules in {}",
        dir.display()
    );
}

/// The check finds each shape of wildcard arm, and none in the arms the
/// rules write.
#[test]
fn the_wildcard_check_finds_wildcards() {
    for wild in [
        "        _ => {}",
        "        _ => return Err(NoRule(inst.op)),",
        "        _ if x > 1 => {}",
        "        op => rule_of(op),",
        "        other if other.is_pure() => {}",
        "        Op::Sin | _ => {}",
        "        | Op::Trunc | _x => {}",
    ] {
        assert_eq!(wildcard_arms(wild).len(), 1, "`{wild}` is not found");
    }
    for fine in [
        "        Op::AddF => {",
        "        Op::MinF | Op::MaxF => {",
        "        | Op::Trunc => {}",
        "        Some(t) => Rule::Tangent(t),",
        "        None => Rule::Zero,",
        "            let k = if inst.op == Op::Erf { 1.0 } else { -1.0 }; // x => y",
        "        Op::Select if a == b => {}",
    ] {
        assert!(wildcard_arms(fine).is_empty(), "`{fine}` is found");
    }
    // The real rules, with one arm turned into a wildcard, are caught.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules/reverse.rs");
    let text = std::fs::read_to_string(path).expect("readable");
    let broken = text.replacen("Op::AddF =>", "_ =>", 1);
    assert_ne!(broken, text);
    assert_eq!(wildcard_arms(&broken).len(), 1);
}
