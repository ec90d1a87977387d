//! The session's source text: where one input ends, how text splits into
//! functions, and how assembler diagnostics for the re-assembled module are
//! traced back to the file or input each function came from.

use assembler::{Diagnostic, Diagnostics, Span};
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

/// Where source text came from: a file (by the name the user gave and its
/// canonical path) or typed input.
#[derive(Debug)]
pub struct Source {
    /// Shown in diagnostics: the path as given, or `<input>`.
    pub origin: String,
    /// The canonical path of a loaded file (`None` for typed input).
    pub file: Option<std::path::PathBuf>,
    pub text: String,
    /// For `.adl` input, which the session keeps as the `.adasm` text it
    /// compiled to (`text`): the `.adl` input and its lines.
    pub adl: Option<Adl>,
}

/// `.adl` input behind a [`Source`] whose text is the `.adasm` generated
/// from it: the locations of traps and calls in that text are translated
/// back to this input's lines (see [`Combined::relocate`]).
#[derive(Debug)]
pub struct Adl {
    /// The `.adl` text as typed or loaded.
    pub text: String,
    /// `lines[k]`: the `.adl` line of line `k + 1` of the generated text
    /// (0 where unknown: the generated line is kept).
    pub lines: Vec<u32>,
}

impl Adl {
    /// The `.adl` line of line `line` of the generated text (0: unknown).
    pub fn line(&self, line: u32) -> u32 {
        line.checked_sub(1)
            .and_then(|k| self.lines.get(k as usize))
            .copied()
            .unwrap_or(0)
    }
}

/// One function's source text.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Name without `@` (empty if the text has no recognisable header; the
    /// assembler then reports the problem).
    pub name: String,
    pub source: Rc<Source>,
    /// Byte range of the function in `source.text`.
    pub range: Range<usize>,
    /// The 1-based line of `range.start` in `source.text`.
    pub line: u32,
}

impl Chunk {
    pub fn text(&self) -> &str {
        &self.source.text[self.range.clone()]
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.'
}

/// The chunk name of a rule for function `f` (`rule:f`: no function is
/// named so, and a later rule for the same `f` replaces it, as a later
/// definition replaces a function).
pub fn rule_chunk_name(f: &str) -> String {
    format!("rule:{f}")
}

/// The function a rule chunk (named by [`rule_chunk_name`]) is for.
pub fn rule_of_chunk(name: &str) -> Option<&str> {
    name.strip_prefix("rule:")
}

/// Byte offsets of every `fn` keyword outside braces and comments, and of
/// every `rule` keyword that starts a line there.
fn fn_keywords(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut comment = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if comment {
            comment = c != b'\n';
        } else {
            match c {
                b';' => comment = true,
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                b'f' if depth == 0
                    && b.get(i + 1) == Some(&b'n')
                    && (i == 0
                        || !(is_ident(b[i - 1]) || b[i - 1] == b'@' || b[i - 1] == b'%'))
                    && !b.get(i + 2).is_some_and(|c| is_ident(*c)) =>
                {
                    out.push(i);
                    i += 2;
                    continue;
                }
                b'r' if depth == 0
                    && text[i..].starts_with("rule")
                    && b.get(i + 4).is_some_and(|c| *c == b' ' || *c == b'\t')
                    && text[..i]
                        .rsplit('\n')
                        .next()
                        .is_some_and(|l| l.trim().is_empty()) =>
                {
                    out.push(i);
                    i += 4;
                    continue;
                }
                _ => {}
            }
        }
        i += 1;
    }
    out
}

/// The name after a `fn` keyword at `at` (for a `rule` keyword: the
/// chunk name of the rule, [`rule_chunk_name`] of the name after it).
fn name_after(text: &str, at: usize) -> String {
    if text[at..].starts_with("rule") {
        let rest = text[at + 4..].trim_start();
        let rest = rest.strip_prefix('@').unwrap_or(rest);
        let f: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        return rule_chunk_name(&f);
    }
    let rest = text[at + 2..].trim_start();
    match rest.strip_prefix('@') {
        Some(r) => r
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect(),
        None => String::new(),
    }
}

/// Split `source` into one chunk per function. A chunk starts at the line
/// of its `fn` (or at the `fn` itself if other text precedes it on that
/// line); text before the first function (comments) belongs to the first.
pub fn split(source: &Rc<Source>) -> Vec<Chunk> {
    chunks_of(source, split_raw(&source.text))
}

/// A chunk of a text not yet shared as a [`Source`] (what [`split_raw`]
/// finds, on any thread).
pub struct RawChunk {
    name: String,
    range: Range<usize>,
    line: u32,
}

/// The chunks of `source`, from [`split_raw`] of its text.
pub fn chunks_of(source: &Rc<Source>, raw: Vec<RawChunk>) -> Vec<Chunk> {
    raw.into_iter()
        .map(|r| Chunk {
            name: r.name,
            source: source.clone(),
            range: r.range,
            line: r.line,
        })
        .collect()
}

/// [`split`] of a text, before it is a [`Source`].
pub fn split_raw(text: &str) -> Vec<RawChunk> {
    let keywords = fn_keywords(text);
    let starts: Vec<usize> = keywords
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            if k == 0 {
                return 0;
            }
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            if text[line_start..at].trim().is_empty() {
                line_start
            } else {
                at
            }
        })
        .collect();
    // Lines counted incrementally, so splitting stays linear in the text.
    let mut line = 1usize;
    let mut counted = 0;
    keywords
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            line += newlines(&text[counted..starts[k]]);
            counted = starts[k];
            RawChunk {
                name: name_after(text, at),
                range: starts[k]..starts.get(k + 1).copied().unwrap_or(text.len()),
                line: u32::try_from(line).unwrap_or(u32::MAX),
            }
        })
        .collect()
}

fn newlines(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'\n').count()
}

/// The names after `@` in `text`, outside `;` comments: the functions a
/// chunk's header and calls name (in `.adasm` only those use `@`).
pub fn references(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b';' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'@' => {
                let start = i + 1;
                i = start;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                if i > start {
                    out.push(&text[start..i]);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Is `input` a rule line, `rule @f jvp @f_jvp` (or `.adl`'s `rule f jvp
/// f_jvp`)?
pub fn is_rule_line(input: &str) -> bool {
    first_code_line(input).is_some_and(|l| {
        l.strip_prefix("rule")
            .is_some_and(|rest| rest.starts_with([' ', '\t']))
    })
}

/// `.adl`'s `rule f jvp f_jvp` (no `@`) as the `.adasm` line the session
/// keeps; `None` if `line` is no such line.
pub fn adl_rule_line(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["rule", f, "jvp", j, rest @ ..]
            if !f.starts_with('@')
                && !j.starts_with('@')
                && (rest.is_empty() || rest[0].starts_with("//")) =>
        {
            Some(format!("rule @{f} jvp @{j}\n"))
        }
        _ => None,
    }
}

/// Does `input` start (after blank and comment lines) with the `fn` keyword?
pub fn starts_definition(input: &str) -> bool {
    first_code_line(input).is_some_and(|l| {
        l.strip_prefix("fn")
            .is_some_and(|rest| !rest.bytes().next().is_some_and(is_ident))
    })
}

/// The first line with code (not blank, not only a `;` or `//` comment).
fn first_code_line(input: &str) -> Option<&str> {
    input
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") {
                ""
            } else {
                t.split(';').next().unwrap_or("").trim()
            }
        })
        .find(|l| !l.is_empty())
}

/// Is `input` an `.adl` definition (`fn name(`, no `@`) rather than an
/// `.adasm` one (`fn @name(`)?
pub fn is_adl_definition(input: &str) -> bool {
    starts_definition(input)
        && first_code_line(input).is_some_and(|l| {
            l.strip_prefix("fn")
                .is_some_and(|rest| !rest.trim_start().starts_with('@'))
        })
}

/// Is `input` a `fn` definition whose braces have not balanced yet (so the
/// REPL must keep reading)?
pub fn needs_more(input: &str) -> bool {
    if !starts_definition(input) {
        return false;
    }
    let mut braces = Braces::for_definition(input);
    input.lines().for_each(|l| braces.add_line(l));
    braces.open()
}

/// The braces of a definition read so far, counted line by line, so that a
/// definition read one line at a time costs time linear in its length.
#[derive(Clone, Copy, Debug, Default)]
pub struct Braces {
    open: usize,
    close: usize,
    /// An `.adl` definition: `//` starts a comment and `;` ends statements.
    adl: bool,
}

impl Braces {
    /// The count for a definition whose text starts with `first`.
    pub fn for_definition(first: &str) -> Braces {
        Braces {
            adl: is_adl_definition(first),
            ..Braces::default()
        }
    }

    /// Count the braces of one more line (those in a `;` comment, or a `//`
    /// comment of `.adl`, do not count).
    pub fn add_line(&mut self, line: &str) {
        let code = if self.adl {
            line.split("//").next().unwrap_or("")
        } else {
            line.split(';').next().unwrap_or("")
        };
        for b in code.bytes() {
            match b {
                b'{' => self.open += 1,
                b'}' => self.close += 1,
                _ => {}
            }
        }
    }

    /// Whether the definition goes on: no `{` yet, or more `{` than `}`.
    pub fn open(&self) -> bool {
        self.open == 0 || self.open > self.close
    }
}

/// Does this line, met while a definition is still open, clearly begin a new
/// command instead (so a definition missing its `}` does not swallow the
/// rest of a script)? No line of a function body starts like these.
pub fn starts_command(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with(':') || t.starts_with('@') || t.starts_with("grad ") || starts_definition(t)
}

/// 1-based line and character column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (u32, u32) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    (line as u32, col as u32)
}

fn floor(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The session's functions concatenated for the assembler, remembering
/// where each chunk went so that diagnostics can be traced back.
pub struct Combined {
    pub text: String,
    /// Per chunk (in the order given to [`Combined::new`]): its offset in
    /// `text` and the 1-based line there. Offsets ascend.
    starts: Vec<(usize, usize)>,
}

impl Combined {
    pub fn new(chunks: &[Chunk]) -> Combined {
        let mut text = String::new();
        let mut starts = Vec::with_capacity(chunks.len());
        let mut line = 1;
        for c in chunks {
            starts.push((text.len(), line));
            text.push_str(c.text());
            line += newlines(c.text());
            if !text.ends_with('\n') {
                text.push('\n');
                line += 1;
            }
        }
        Combined { text, starts }
    }

    /// The index of the chunk holding byte `at` of `self.text`.
    pub fn chunk_at(&self, at: usize) -> usize {
        self.starts
            .partition_point(|(off, _)| *off <= at)
            .saturating_sub(1)
    }

    /// Make the source locations of `module` (assembled from `self.text`)
    /// lines of the files and inputs the functions came from, so that trap
    /// messages name the line the user wrote.
    pub fn relocate(&self, module: &mut vm::ir::Module, chunks: &[Chunk]) {
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(chunks.len());
        for (k, c) in chunks.iter().enumerate() {
            by_name.entry(c.name.as_str()).or_insert(k);
        }
        for f in &mut module.funcs {
            let Some(&k) = by_name.get(f.name.as_str()) else {
                continue;
            };
            let (Some(chunk), Some(&(_, here))) = (chunks.get(k), self.starts.get(k)) else {
                continue;
            };
            let (here, there) = (here as i64, i64::from(chunk.line));
            let adl = chunk.source.adl.as_ref();
            let fix = |loc: &mut vm::ir::Loc| {
                if loc.line > 0 {
                    loc.line = (loc.line as i64 - here + there).clamp(1, u32::MAX as i64) as u32;
                    // Generated from `.adl`: the line of the `.adl` input.
                    if let Some(line) = adl.map(|a| a.line(loc.line)).filter(|l| *l > 0) {
                        loc.line = line;
                    }
                }
            };
            fix(&mut f.loc);
            for b in &mut f.blocks {
                b.phis.iter_mut().for_each(|p| fix(&mut p.loc));
                b.insts.iter_mut().for_each(|i| fix(&mut i.loc));
                fix(&mut b.term_loc);
            }
        }
        // A rule's line, in the input or file it was written in.
        let names: Vec<String> = module.funcs.iter().map(|f| f.name.clone()).collect();
        for r in &mut module.rules {
            let Some(f) = names.get(r.f.index()) else {
                continue;
            };
            let Some(&k) = by_name.get(rule_chunk_name(f).as_str()) else {
                continue;
            };
            let (Some(chunk), Some(&(_, here))) = (chunks.get(k), self.starts.get(k)) else {
                continue;
            };
            if r.loc.line > 0 {
                let line = r.loc.line as i64 - here as i64 + i64::from(chunk.line);
                r.loc.line = line.clamp(1, u32::MAX as i64) as u32;
                if let Some(l) = chunk.source.adl.as_ref().map(|a| a.line(r.loc.line))
                    && l > 0
                {
                    r.loc.line = l;
                }
            }
        }
    }

    /// Render `diags` (of `self.text`) against the files and inputs the
    /// chunks came from. Diagnostics inside functions that are not part of
    /// `current` (the text just entered) say which function they are in.
    pub fn render(&self, diags: &Diagnostics, chunks: &[Chunk], current: &Rc<Source>) -> String {
        let mut out: Vec<String> = Vec::new();
        // Diagnostics come sorted by position, so lines are counted on from
        // the previous one in the same chunk: linear in the text overall.
        let mut cursor: Option<(usize, usize, usize)> = None; // (chunk, byte, line)
        for d in &diags.items {
            if d.line == 0 {
                // About no place of the source (out of memory).
                out.push(format!("{}: error: {}", current.origin, d.message));
                continue;
            }
            let k = self.chunk_at(d.span.start);
            let (Some(chunk), Some(&(base, _))) = (chunks.get(k), self.starts.get(k)) else {
                out.push(format!("{}: error: {}", current.origin, d.message));
                continue;
            };
            let src = &chunk.source.text;
            let start = floor(src, chunk.range.start + d.span.start.saturating_sub(base));
            let start = start.min(chunk.range.end);
            let end = floor(src, chunk.range.start + d.span.end.saturating_sub(base))
                .clamp(start, chunk.range.end);
            let (from, from_line) = match cursor {
                Some((c, at, line)) if c == k && at <= start => (at, line),
                _ => (chunk.range.start, chunk.line as usize),
            };
            let line = from_line + newlines(&src[from..start]);
            cursor = Some((k, start, line));
            let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
            let col = src[line_start..start].chars().count() + 1;
            // Only the line is needed to show it with a caret.
            let one = Diagnostics::new(
                &chunk.source.origin,
                &src[line_start..line_end],
                vec![Diagnostic {
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    col: u32::try_from(col).unwrap_or(u32::MAX),
                    message: d.message.clone(),
                    span: Span::new(start - line_start, end.min(line_end) - line_start),
                }],
            );
            let mut text = one.render_with(crate::out::color());
            if !Rc::ptr_eq(&chunk.source, current) {
                let what = if chunk.name.is_empty() {
                    "a function".to_string()
                } else {
                    format!("@{}", chunk.name)
                };
                text.push_str(&format!(
                    "\n   note: this is in {what}, defined before; redefine it or load its file again"
                ));
            }
            out.push(text);
        }
        out.join("\n")
    }
}

/// An error about one input line, optionally pointing at a byte range of it.
#[derive(Debug)]
pub struct Problem {
    pub message: String,
    pub at: Option<Range<usize>>,
    /// A trap, whose instruction the session shows as the line of source
    /// it came from before printing it (then `message` is empty).
    pub trap: Option<Box<vm::Trap>>,
}

impl Problem {
    pub fn plain(message: impl Into<String>) -> Problem {
        Problem {
            message: message.into(),
            at: None,
            trap: None,
        }
    }

    pub fn at(message: impl Into<String>, at: Range<usize>) -> Problem {
        Problem {
            message: message.into(),
            at: Some(at),
            trap: None,
        }
    }

    /// As the assembler renders diagnostics: `<input>:1:COL: error: ...`,
    /// the line, and a caret under the range.
    pub fn render(&self, line: &str) -> String {
        if let Some(t) = &self.trap {
            return t.to_string();
        }
        let Some(at) = &self.at else {
            return self.message.clone();
        };
        let start = floor(line, at.start);
        let end = floor(line, at.end).max(start);
        let (l, col) = line_col(line, start);
        Diagnostics::new(
            "<input>",
            line,
            vec![Diagnostic {
                line: l,
                col,
                message: self.message.clone(),
                span: Span::new(start, end),
            }],
        )
        .render_with(crate::out::color())
    }
}

/// Byte ranges in a call text `@f(a, b, ...)`: the name, the parenthesised
/// argument list, and each argument (split at top-level commas).
pub struct CallShape {
    pub name: Range<usize>,
    pub args: Range<usize>,
    pub each: Vec<Range<usize>>,
}

pub fn call_shape(text: &str) -> CallShape {
    let open = text.find('(').unwrap_or(text.len());
    let name_end = text[..open].trim_end().len();
    let mut each = Vec::new();
    let mut depth = 0i32;
    let mut piece = open + 1;
    let mut close = text.len();
    for (i, c) in text.char_indices().skip_while(|(i, _)| *i <= open) {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth <= 0 => {
                each.push(trimmed(text, piece..i));
                piece = i + 1;
            }
            ')' if depth <= 0 => {
                close = i + 1;
                if !text[piece..i].trim().is_empty() || !each.is_empty() {
                    each.push(trimmed(text, piece..i));
                }
                piece = text.len();
                break;
            }
            _ => {}
        }
    }
    if piece < text.len() && !text[piece..].trim().is_empty() {
        each.push(trimmed(text, piece..text.len()));
    }
    CallShape {
        name: 0..name_end.max(1).min(text.len()),
        args: open.min(text.len())..close,
        each,
    }
}

fn trimmed(text: &str, r: Range<usize>) -> Range<usize> {
    let s = &text[r.clone()];
    let lead = s.len() - s.trim_start().len();
    let start = r.start + lead;
    (start..start + s.trim().len()).clone()
}

/// Where in `text` an error message from `assembler::parse_call` or
/// `literals_to_values` points, and the message without its column note.
pub fn locate_call_error(text: &str, message: &str) -> (String, Range<usize>) {
    let whole = 0..text.len();
    // "... at column N"
    if let Some(pos) = message.rfind(" at column ")
        && let Ok(col) = message[pos + " at column ".len()..].trim().parse::<usize>()
    {
        let start = text
            .char_indices()
            .nth(col.saturating_sub(1))
            .map_or(text.len(), |(i, _)| i);
        let end = text[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
        return (message[..pos].to_string(), start..end);
    }
    let shape = call_shape(text);
    // "argument K: ..."
    if let Some(rest) = message.strip_prefix("argument ") {
        let k: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Some(r) = k
            .parse::<usize>()
            .ok()
            .and_then(|k| shape.each.get(k.wrapping_sub(1)))
        {
            return (message.to_string(), r.clone());
        }
    }
    if message.starts_with("expected ") && message.contains(" argument") {
        return (message.to_string(), shape.args);
    }
    // "unexpected character `#`" and the like: the quoted text.
    if let Some(open) = message.find('`')
        && let Some(len) = message[open + 1..].find('`')
    {
        let quoted = &message[open + 1..open + 1 + len];
        if let Some(at) = (!quoted.is_empty()).then(|| text.find(quoted)).flatten() {
            return (message.to_string(), at..at + quoted.len());
        }
    }
    (message.to_string(), whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Rc<Source> {
        Rc::new(Source {
            origin: "t".into(),
            file: None,
            text: text.into(),
            adl: None,
        })
    }

    #[test]
    fn splits_functions_with_comments_and_braces() {
        let s = src("; fn @nope() {\n; header\nfn @a() -> f64 { ; }\nentry:\n ret 1.0\n}\n\n  fn  @b.c(%x: f64) -> f64 {\nentry:\n ret %x\n} fn @d() -> f64 {\n}\nfn @fn() -> f64 {\n}\n");
        let chunks = split(&s);
        let names: Vec<&str> = chunks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b.c", "d", "fn"]);
        assert!(chunks[0].text().starts_with("; fn @nope"));
        assert!(chunks[1].text().starts_with("  fn  @b.c"));
        assert!(chunks[2].text().starts_with("fn @d"));
        assert!(chunks[3].text().starts_with("fn @fn"));
        let total: usize = chunks.iter().map(|c| c.range.len()).sum();
        assert_eq!(total, s.text.len());
    }

    #[test]
    fn definitions_continue_until_braces_balance() {
        assert!(needs_more("fn @f(%x: f64) -> f64 {"));
        assert!(needs_more("fn"));
        assert!(needs_more("; c\nfn @f() -> f64\n"));
        assert!(needs_more("fn @f() -> f64 { ; }\nentry:"));
        assert!(!needs_more("fn @f() -> f64 {\nentry:\n ret 1.0\n}"));
        assert!(!needs_more("fnord"));
        assert!(!needs_more(":funcs"));
        assert!(!needs_more("@f(1.0)"));
        assert!(starts_command("grad @f(1.0)"));
        assert!(starts_command("fn @g() -> f64 {"));
        assert!(!starts_command("grad:"));
        assert!(!starts_command("  %x = add %a, %b"));
    }

    #[test]
    fn braces_are_counted_line_by_line() {
        let mut b = Braces::default();
        b.add_line("fn @f() -> f64");
        assert!(b.open(), "no brace yet");
        b.add_line("{ ; }}}");
        assert!(b.open());
        b.add_line("entry: ret 1.0 }");
        assert!(!b.open());
    }

    #[test]
    fn references_are_the_names_after_at_outside_comments() {
        let text = "fn @f.a(%x: f64) -> f64 { ; calls @nope\n %y = call @g_2(%x)\n@\n ret @ }";
        assert_eq!(references(text), ["f.a", "g_2"]);
        assert!(references("").is_empty());
    }

    #[test]
    fn chunks_know_their_lines_and_diagnostics_are_traced_back() {
        let s = src(
            "; one\nfn @a() -> f64 {\nentry:\n ret 1.0\n}\nfn @b() -> f64 {\nentry:\n ret 2\n}\n",
        );
        let chunks = split(&s);
        let lines: Vec<u32> = chunks.iter().map(|c| c.line).collect();
        assert_eq!(lines, [1, 6]);
        // Assembled in the other order: @b's error is still on line 8.
        let order = vec![chunks[1].clone(), chunks[0].clone()];
        let combined = Combined::new(&order);
        let diags = assembler::assemble(&combined.text, "t").expect_err("ret 2");
        let text = combined.render(&diags, &order, &s);
        assert!(text.starts_with("t:8:6: error: expected f64"), "{text}");
        assert!(text.ends_with("\n8 │  ret 2\n  │      ^"), "{text}");
        assert_eq!(combined.chunk_at(0), 0);
        assert_eq!(combined.chunk_at(combined.text.len()), 1);
    }

    #[test]
    fn call_errors_are_located() {
        let t = "@f(1.0,, 2)";
        let (m, r) = locate_call_error(t, "expected a literal, found `,` at column 8");
        assert_eq!((m.as_str(), r), ("expected a literal, found `,`", 7..8));
        let (_, r) = locate_call_error("@f(1.0, [1, 2], true)", "argument 3: expected f64");
        assert_eq!(r, 16..20);
        let (_, r) = locate_call_error("@f(1.0, [1, 2])", "argument 2: x");
        assert_eq!(r, 8..14);
        let (_, r) = locate_call_error("@f(1.0, 2.0)", "expected 1 argument, found 2");
        assert_eq!(r, 2..12);
        let (_, r) = locate_call_error("@f(#)", "unexpected character `#`");
        assert_eq!(r, 3..4);
        let shape = call_shape("@g()");
        assert!(shape.each.is_empty());
        assert_eq!(shape.name, 0..2);
        // Never panics on odd input.
        for t in [
            "",
            "(",
            ")",
            "@",
            "@f(",
            "@f(,",
            "@f([",
            "é(ü,",
            "@f(1.0] ,)",
        ] {
            let _ = call_shape(t);
            let _ = locate_call_error(t, "argument 9: x at column 99");
            let _ = locate_call_error(t, "argument 2: x");
            let _ = locate_call_error(t, "bad `é`");
        }
    }

    #[test]
    fn problems_render_with_a_caret() {
        let p = Problem::at("no function @g", 5..7);
        assert_eq!(
            p.render("grad @g(1.0)"),
            "<input>:1:6: error: no function @g\n1 │ grad @g(1.0)\n  │      ^^"
        );
    }
}
