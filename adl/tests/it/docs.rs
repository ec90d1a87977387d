//! docs/adl.md documents every built-in function (the list comes from the
//! opcode table, so a new math opcode must be added to the page).

#[test]
fn every_builtin_is_in_the_language_page() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/adl.md");
    let doc = std::fs::read_to_string(&path).expect("docs/adl.md");
    let missing: Vec<&str> = adl::builtin_names()
        .into_iter()
        .filter(|n| !doc.contains(&format!("`{n}`")) && !doc.contains(&format!("`{n}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/adl.md does not document: {missing:?}"
    );
    assert!(adl::builtin_names().len() >= 30);
}
