//! Error files: data-driven negative tests shared by the assembler
//! (`assembler/tests/errors/*.adasm`) and the `.adl` front end
//! (`adl/tests/errors/*.adl`). Every file must fail to compile with exactly
//! the diagnostics its directives announce, each rendered in the plain form.
//!
//! A directive is a comment `MARKER LINE:COL: TEXT` anywhere in a file (the
//! marker is `; error:` in `.adasm`, `// error:` in `.adl`): some diagnostic
//! must be at LINE:COL with TEXT in its message. Every diagnostic must be
//! announced by a directive, and every directive must match a diagnostic
//! (one each). The checks take the diagnostics as plain data so that the
//! assembler's own tests can use them (testkit cannot depend on the
//! assembler there).

use std::path::{Path, PathBuf};

/// One directive: a diagnostic expected at `line`:`col` whose message
/// contains `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// A part of the message.
    pub text: String,
}

/// A rejected file: its plain rendering and its diagnostics (line, column,
/// message) in order.
pub struct Rejection {
    /// The plain rendering of every diagnostic.
    pub rendered: String,
    /// Line, column and message of each diagnostic.
    pub items: Vec<(u32, u32, String)>,
}

/// The directives of `src`, whose comments start with `marker`.
pub fn directives(src: &str, marker: &str) -> Vec<Expected> {
    let mut out = Vec::new();
    for (i, l) in src.lines().enumerate() {
        let Some((_, rest)) = l.split_once(marker) else {
            continue;
        };
        let mut parts = rest.trim().splitn(3, ':');
        let (Some(line), Some(col), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("line {}: malformed directive {l:?}", i + 1);
        };
        out.push(Expected {
            line: line.trim().parse().expect("directive line number"),
            col: col.trim().parse().expect("directive column"),
            text: text.trim().to_string(),
        });
    }
    out
}

/// The files of `dir` with extension `ext`, sorted.
pub fn error_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the error-file directory exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// The mismatches between the directives (`marker`) of the file at `path`
/// and what `compile(source, file name)` reports (`None`: it compiled).
pub fn file_problems(
    path: &Path,
    marker: &str,
    compile: impl Fn(&str, &str) -> Option<Rejection>,
) -> Vec<String> {
    let src = std::fs::read_to_string(path).expect("readable");
    let name = path
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let mut expected = directives(&src, marker);
    let mut problems = Vec::new();
    if expected.is_empty() {
        problems.push(format!("{name}: no `{marker}` directives"));
    }
    let Some(rejection) = compile(&src, &name) else {
        problems.push(format!("{name}: compiled without errors"));
        return problems;
    };
    let items: Vec<(u32, u32, &str)> = rejection
        .items
        .iter()
        .map(|(l, c, m)| (*l, *c, m.as_str()))
        .collect();
    problems.extend(rendering_problems(&rejection.rendered, &name, &items));
    for &(line, col, message) in &items {
        let found = expected
            .iter()
            .position(|e| e.line == line && e.col == col && message.contains(&e.text));
        match found {
            Some(i) => {
                expected.remove(i);
            }
            None => problems.push(format!("{name}: unexpected {line}:{col}: {message}")),
        }
    }
    for e in expected {
        problems.push(format!("{name}: missing {}:{}: {}", e.line, e.col, e.text));
    }
    problems
}

/// Problems with the plain rendering `text` of the diagnostics `items`
/// (line, column, message) of the file `name`: per diagnostic, the header
/// `name:line:col: error: message`, the source line after its line number
/// in a gutter (`12 │ `), and a caret line whose caret sits under the
/// column (the files have no tabs, which the rendering expands).
pub fn rendering_problems(text: &str, name: &str, items: &[(u32, u32, &str)]) -> Vec<String> {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() != 3 * items.len() {
        return vec![format!(
            "{name}: render has {} lines for {} diagnostics",
            lines.len(),
            items.len()
        )];
    }
    let mut problems = Vec::new();
    for (&(line, col, message), chunk) in items.iter().zip(lines.chunks(3)) {
        let head = format!("{name}:{line}:{col}: error: {message}");
        let gutter = format!("{line} │ ");
        let blank = format!("{} │ ", " ".repeat(gutter.chars().count() - 3));
        let caret_col = chunk[2]
            .chars()
            .position(|c| c == '^')
            .map(|p| (p + 1).saturating_sub(gutter.chars().count()));
        if chunk[0] != head
            || !chunk[1].starts_with(&gutter)
            || !chunk[2].starts_with(&blank)
            || caret_col != Some(col as usize)
        {
            problems.push(format!("{name}: bad rendering:\n{}", chunk.join("\n")));
        }
    }
    problems
}
