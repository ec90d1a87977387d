//! The derivative rules of every AD mode are one `match` over every opcode
//! with no wildcard arm (`ad/src/rules/`), so that an opcode added to the
//! table without a rule is a compile error rather than a silent zero. This
//! test keeps a wildcard from creeping back in.

use std::path::Path;

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
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("").trim();
            // `_ =>`, `x =>` bindings and `_ if` guards all match any opcode.
            let wild = code.starts_with("_ =>")
                || code.starts_with("_ if")
                || code.starts_with("op =>")
                || code.starts_with("other =>");
            assert!(
                !wild,
                "{}:{}: a wildcard arm in a derivative-rule match: `{code}`",
                path.display(),
                n + 1
            );
        }
    }
    assert!(
        files >= 2,
        "expected the rules modules in {}",
        dir.display()
    );
}
