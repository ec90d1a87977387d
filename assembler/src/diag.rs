//! Diagnostics: located error messages and their rendering.
//!
//! The stages of the assembler report errors into a [`Sink`] as byte spans
//! and messages. [`Sink::finish`] sorts them by position and converts the
//! byte offsets to 1-based line and character columns in one pass over the
//! source, so reporting stays linear even for many errors on one long line.

use std::fmt;

/// A byte range `start..end` of the source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset just past the last byte.
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// One error: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line of the span's start; 0 for an error about no place
    /// of the source ([`Diagnostics::out_of_memory`]), rendered without
    /// line, column and snippet.
    pub line: u32,
    /// 1-based column of the span's start, counted in characters.
    pub col: u32,
    /// What is wrong, without location or `error:` prefix.
    pub message: String,
    /// The offending bytes of the source.
    pub span: Span,
}

/// Every error found in one source file, sorted by position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics {
    /// The file name used in rendered messages.
    pub file: String,
    /// The errors, sorted by position.
    pub items: Vec<Diagnostic>,
    /// The source text, kept to show the offending line under each message.
    pub source: String,
}

impl Diagnostic {
    /// The message of a call to a function the module does not define,
    /// with the closest defined name when one is close (see [`closest`]).
    pub(crate) fn unknown_function_message(name: &str, near: Option<&str>) -> String {
        match near {
            Some(n) => format!("{UNKNOWN_FUNCTION}`@{name}`; did you mean `@{n}`?"),
            None => format!("{UNKNOWN_FUNCTION}`@{name}`"),
        }
    }

    /// If this diagnostic is a call to a function the module does not
    /// define, that function's name (without `@`). The REPL keeps a
    /// definition whose only errors are such calls until the callee arrives.
    pub fn unknown_function(&self) -> Option<&str> {
        let rest = self
            .message
            .strip_prefix(UNKNOWN_FUNCTION)?
            .strip_prefix("`@")?;
        let end = rest.find('`')?;
        let after = &rest[end + 1..];
        (after.is_empty() || after.starts_with("; did you mean ")).then(|| &rest[..end])
    }
}

/// The candidate most likely meant by the misspelt `name`: the one at the
/// smallest edit distance (insertions, deletions, substitutions and swaps
/// of two neighbouring characters; a difference of letter case only is
/// preferred to any other), if that distance is at most a third of
/// `name`'s length (at least 1). Of equally close candidates the least in
/// string order wins (the answer does not depend on the candidates'
/// order); `name` itself is never suggested, and a name longer than 64
/// characters gets no suggestion (which bounds the work per candidate).
///
/// ```
/// let names = ["main", "pow", "power"];
/// assert_eq!(assembler::closest("powr", names), Some("pow"));
/// assert_eq!(assembler::closest("mian", names), Some("main"));
/// assert_eq!(assembler::closest("sin", names), None);
/// ```
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let chars = name.chars().count();
    if chars > CLOSEST_MAX_CHARS {
        return None;
    }
    let limit = (chars.max(3) / 3).max(1);
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        if c.eq_ignore_ascii_case(name) {
            // Closer than any edit: rank it below distance 1.
            if best.is_none_or(|(b, n)| b > 0 || c < n) {
                best = Some((0, c));
            }
            continue;
        }
        // Too different in length to be within the limit: skip the work.
        if c.chars().count().abs_diff(chars) > limit {
            continue;
        }
        let d = edit_distance(name, c);
        if d <= limit && best.is_none_or(|(b, n)| d < b || (d == b && c < n)) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The longest name [`closest`] finds a suggestion for, in characters.
pub const CLOSEST_MAX_CHARS: usize = 64;

/// Optimal string alignment distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two rows back (for swaps), the previous one
    // and the current one.
    let mut back: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(back[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut back, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

const UNKNOWN_FUNCTION: &str = "unknown function ";

const OUT_OF_MEMORY: &str = "out of memory";

impl Diagnostics {
    /// Diagnostics for `source` (named `file`) with the given located items.
    pub fn new(file: &str, source: &str, items: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics {
            file: file.to_string(),
            items,
            source: source.to_string(),
        }
    }

    /// The error of an allocation that failed while assembling (see
    /// [`crate::assemble`]): one diagnostic `out of memory`, about no
    /// place of the source (`FILE: error: out of memory`), and no copy of
    /// the source. Its few bytes come from the allocator's reserve if need
    /// be ([`vm::oom::with_reserve`]).
    pub fn out_of_memory(file: &str) -> Diagnostics {
        vm::oom::with_reserve(|| Diagnostics {
            file: file.to_string(),
            items: vec![Diagnostic {
                line: 0,
                col: 0,
                message: OUT_OF_MEMORY.to_string(),
                span: Span::default(),
            }],
            source: String::new(),
        })
    }

    /// Whether this is [`Diagnostics::out_of_memory`]'s error (the command
    /// line reports it as the trap `out of memory`, exit status 1).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(&self.items[..], [d] if d.line == 0 && d.message == OUT_OF_MEMORY)
    }

    /// How many errors there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no errors.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// All diagnostics, each as `FILE:LINE:COL: error: MESSAGE`, then the
    /// source line with its line number in a gutter and a caret line under
    /// the offending span, separated by newlines (no newline after the last
    /// one). Plain text: see [`Diagnostics::render_color`] for a terminal.
    pub fn render(&self) -> String {
        self.render_with(false)
    }

    /// [`Diagnostics::render`] with ANSI colours (for a terminal: callers
    /// colour only when standard error is one).
    pub fn render_color(&self) -> String {
        self.render_with(true)
    }

    /// [`Diagnostics::render`] (`color` false) or
    /// [`Diagnostics::render_color`].
    pub fn render_with(&self, color: bool) -> String {
        let blocks: Vec<String> = self
            .items
            .iter()
            .map(|d| self.render_one(d, color))
            .collect();
        blocks.join("\n")
    }

    /// One diagnostic, rendered by `codespan-reporting`: its short form
    /// (`FILE:LINE:COL: error: MESSAGE`, the contract's first line), then
    /// the snippet of its rich form. The snippet is drawn from the shown
    /// window of the line ([`Window`]: escaped and cut), so the crate never
    /// sees the raw source.
    fn render_one(&self, d: &Diagnostic, color: bool) -> String {
        use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
        use codespan_reporting::term::{self, Config, DisplayStyle};
        let mut message = String::new();
        for (n, c) in d.message.chars().enumerate() {
            if n == MESSAGE_CHARS {
                message.push_str(ELLIPSIS);
                break;
            }
            push_shown(&mut message, c);
        }
        if d.line == 0 {
            // About no place of the source (out of memory).
            return format!("{}: error: {message}", self.file);
        }
        let w = Window::new(&self.source, d.span);
        let file = OneLine {
            name: &self.file,
            text: &w.text,
            line: d.line,
            col: d.col,
            span_start: w.span.start,
        };
        let header = Report::error()
            .with_message(message.clone())
            .with_label(Label::primary((), w.span.clone()));
        // Of the rich form only the source line and the caret line are
        // kept: its header (`error: `), locus (`┌─ FILE:LINE:COL`) and
        // empty border line are dropped, the short form says all that.
        let snippet = Report::error().with_label(Label::primary((), w.span.clone()));
        let short = Config {
            display_style: DisplayStyle::Short,
            ..Config::default()
        };
        let rich = Config::default();
        let (head, body) = if color {
            let emit = |config: &Config, report: &Report<()>| {
                let mut buf = term::termcolor::Buffer::ansi();
                term::emit_to_write_style(&mut buf, config, &file, report)
                    .map(|()| String::from_utf8_lossy(buf.as_slice()).into_owned())
            };
            (emit(&short, &header), emit(&rich, &snippet))
        } else {
            (
                term::emit_into_string(&short, &file, &header),
                term::emit_into_string(&rich, &file, &snippet),
            )
        };
        let (Ok(head), Ok(body)) = (head, body) else {
            // Not reached: `OneLine` answers every question about its one
            // line. Keep the contract's first line anyway.
            return format!("{}:{}:{}: error: {message}", self.file, d.line, d.col);
        };
        let body = body.splitn(4, '\n').nth(3).unwrap_or("");
        format!("{}\n{}", head.trim_end(), body.trim_end())
    }
}

/// The part of a diagnostic's line that is shown: up to [`LEFT_CONTEXT`]
/// columns before the span, then up to [`LINE_WIDTH`] columns in all (of
/// the escaped text), with [`ELLIPSIS`] where the line is cut; control and
/// invisible characters escaped (see [`escaped`]).
struct Window {
    text: String,
    /// The span's bytes in `text` (the part of it inside the window).
    span: std::ops::Range<usize>,
}

impl Window {
    fn new(src: &str, span: Span) -> Window {
        let start = floor_boundary(src, span.start);
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let line_end = if src[line_start..line_end].ends_with('\r') && start < line_end {
            line_end - 1
        } else {
            line_end
        };
        let end = floor_boundary(src, span.end.clamp(start, line_end.max(start)));
        let mut from = start;
        let mut cols = 0;
        for (i, c) in src[line_start..start].char_indices().rev() {
            cols += shown_width(c);
            if cols > LEFT_CONTEXT {
                break;
            }
            from = line_start + i;
        }
        let mut text = String::new();
        if from > line_start {
            text.push_str(ELLIPSIS);
        }
        let mut width = 0;
        let (mut lo, mut hi) = (None, None);
        let mut cut = false;
        for (i, c) in src[from..line_end].char_indices() {
            let at = from + i;
            let w = shown_width(c);
            if width + w > LINE_WIDTH {
                cut = true;
                break;
            }
            if at >= start && lo.is_none() {
                lo = Some(text.len());
            }
            width += w;
            push_shown(&mut text, c);
            if at < end {
                hi = Some(text.len());
            }
        }
        let lo = lo.unwrap_or(text.len());
        let hi = hi.unwrap_or(lo).max(lo);
        if cut {
            text.push_str(ELLIPSIS);
        }
        Window { text, span: lo..hi }
    }
}

/// The one shown line of a diagnostic as a `codespan-reporting` file: its
/// line and column numbers are the diagnostic's, in the whole source.
struct OneLine<'a> {
    name: &'a str,
    text: &'a str,
    line: u32,
    col: u32,
    /// Where the span starts in `text`: the column reported for it is
    /// `col`.
    span_start: usize,
}

impl<'a> codespan_reporting::files::Files<'a> for OneLine<'a> {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, codespan_reporting::files::Error> {
        Ok(self.name)
    }

    fn source(&'a self, (): ()) -> Result<&'a str, codespan_reporting::files::Error> {
        Ok(self.text)
    }

    fn line_index(
        &'a self,
        (): (),
        _byte: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        Ok(0)
    }

    fn line_number(
        &'a self,
        (): (),
        _index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        Ok(self.line as usize)
    }

    fn column_number(
        &'a self,
        (): (),
        _index: usize,
        byte: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        // Only the span's start is asked for (the locus); any other byte
        // is counted from it.
        let shown = |a: usize, b: usize| {
            self.text
                .get(a.min(b)..a.max(b))
                .map_or(0, |t| t.chars().count())
        };
        let col = self.col as usize;
        Ok(if byte >= self.span_start {
            col + shown(self.span_start, byte)
        } else {
            col.saturating_sub(shown(byte, self.span_start)).max(1)
        })
    }

    fn line_range(
        &'a self,
        (): (),
        _index: usize,
    ) -> Result<std::ops::Range<usize>, codespan_reporting::files::Error> {
        Ok(0..self.text.len())
    }
}

/// Columns of the source line shown before an error's span at most.
const LEFT_CONTEXT: usize = 60;
/// Columns of the source line shown at most (a longer line is cut, with
/// [`ELLIPSIS`] where it is).
const LINE_WIDTH: usize = 160;
/// Characters of a message shown at most (messages quote source tokens).
const MESSAGE_CHARS: usize = 400;
const ELLIPSIS: &str = "...";

/// Whether `c` is shown escaped: control characters (ESC, which starts
/// terminal escape sequences, included), the invisible characters that
/// reorder or hide text (bidirectional overrides, zero-width), and every
/// other character a terminal shows in no column (combining marks), so
/// that a caret always has a column to stand under.
fn escaped(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        || (c != '\t' && unicode_width::UnicodeWidthChar::width(c) == Some(0))
}

/// How many columns `c` takes when shown (escaped ones as `\x1b` or
/// `\u{202e}`).
fn shown_width(c: char) -> usize {
    if !escaped(c) {
        1
    } else if (c as u32) < 0x80 {
        4
    } else {
        format!("{:x}", c as u32).len() + 4
    }
}

/// Append `c` to `out` as it is shown.
fn push_shown(out: &mut String, c: char) {
    use std::fmt::Write;
    if !escaped(c) {
        out.push(c);
    } else if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}

/// The largest char boundary of `s` at or below `i` (clamped to `s.len()`),
/// so that slicing never splits a character whatever offset we are given.
fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where the stages collect errors before they are located and sorted.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    items: Vec<(Span, String)>,
}

impl Sink {
    pub fn error(&mut self, span: Span, message: impl Into<String>) {
        self.items.push((span, message.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Sort by position (keeping report order for equal positions), drop
    /// exact duplicates and compute lines and columns.
    pub fn finish(mut self, file: &str, source: &str) -> Diagnostics {
        self.items.sort_by_key(|(span, _)| span.start);
        self.items.dedup();
        let mut cursor = Cursor::default();
        let items = self
            .items
            .into_iter()
            .map(|(span, message)| {
                let (line, col) = cursor.advance_to(source, span.start);
                Diagnostic {
                    line,
                    col,
                    message,
                    span,
                }
            })
            .collect();
        Diagnostics::new(file, source, items)
    }
}

/// Converts increasing byte offsets to lines and columns incrementally.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    offset: usize,
    line: u32,
    col: u32,
}

impl Default for Cursor {
    fn default() -> Cursor {
        Cursor {
            offset: 0,
            line: 1,
            col: 1,
        }
    }
}

impl Cursor {
    /// Move to `target` (which must not be below the previous target; a
    /// smaller one is treated as the previous one) and return its 1-based
    /// line and character column.
    pub fn advance_to(&mut self, source: &str, target: usize) -> (u32, u32) {
        let target = floor_boundary(source, target).max(self.offset);
        for c in source[self.offset..target].chars() {
            if c == '\n' {
                self.line = self.line.saturating_add(1);
                self.col = 1;
            } else {
                self.col = self.col.saturating_add(1);
            }
        }
        self.offset = target;
        (self.line, self.col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str, start: usize, end: usize, msg: &str) -> Diagnostics {
        let mut sink = Sink::default();
        sink.error(Span::new(start, end), msg);
        sink.finish("t.adasm", src)
    }

    #[test]
    fn out_of_memory_is_one_unlocated_line() {
        let d = Diagnostics::out_of_memory("f.adasm");
        assert!(d.is_out_of_memory());
        assert_eq!(d.render(), "f.adasm: error: out of memory");
        assert_eq!(d.render_color(), "f.adasm: error: out of memory");
        let located = one("x", 0, 1, "out of memory");
        assert!(!located.is_out_of_memory(), "at line 1: an ordinary error");
    }

    #[test]
    fn renders_the_contract_format() {
        let src = "fn @f() -> f64 {\nentry:\n    ret %y\n}\n";
        let start = src.find("%y").expect("present");
        let d = one(src, start, start + 2, "unknown register `%y`");
        assert_eq!(
            d.render(),
            "t.adasm:3:9: error: unknown register `%y`\n3 │     ret %y\n  │         ^^"
        );
        assert_eq!(d.to_string(), d.render());
    }

    /// `s` without its ANSI escape sequences (`ESC [ ... m`).
    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for d in chars.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn colour_is_the_plain_text_with_escapes() {
        let src = "fn @f() -> f64 {\nentry:\n    ret %y\n    ret %z\n}\n";
        let mut sink = Sink::default();
        for r in ["%y", "%z"] {
            let start = src.find(r).expect("present");
            sink.error(
                Span::new(start, start + 2),
                format!("unknown register `{r}`"),
            );
        }
        let d = sink.finish("t.adasm", src);
        let (plain, color) = (d.render(), d.render_color());
        assert!(!plain.contains('\x1b'), "{plain:?}");
        assert!(color.contains("\x1b["), "{color:?}");
        assert_eq!(strip_ansi(&color), plain);
        assert_eq!(d.render_with(false), plain);
        assert_eq!(d.render_with(true), color);
        // Both errors, each starting with the contract's first line.
        assert_eq!(
            plain,
            "t.adasm:3:9: error: unknown register `%y`\n3 │     ret %y\n  │         ^^\n\
             t.adasm:4:9: error: unknown register `%z`\n4 │     ret %z\n  │         ^^"
        );
        // The source's own escape sequences never reach the terminal.
        let evil = "\x1b[2J ret %y\n";
        let d = one(evil, 8, 10, "m");
        let color = d.render_color();
        assert!(!color.contains("\x1b[2J"), "{color:?}");
        assert!(strip_ansi(&color).contains("\\x1b[2J ret %y"), "{color:?}");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = "; é\n  é€ $x\n";
        let start = src.find('$').expect("present");
        let d = one(src, start, start + 1, "bad");
        assert_eq!((d.items[0].line, d.items[0].col), (2, 6));
        assert!(
            d.render().ends_with("\n2 │   é€ $x\n  │      ^"),
            "{}",
            d.render()
        );
    }

    #[test]
    fn spans_at_end_of_file_and_inside_characters_do_not_panic() {
        let src = "é";
        for (s, e) in [(0, 1), (1, 2), (2, 2), (5, 9), (1, 0)] {
            let d = one(src, s, e, "m");
            assert!(d.render().contains("error: m"));
        }
        let d = one("", 0, 0, "empty");
        assert_eq!(d.render(), "t.adasm:1:1: error: empty\n1 │ \n  │ ^");
    }

    #[test]
    fn tabs_are_expanded_alike_in_the_line_and_under_it() {
        let src = "\tret %y\n";
        let d = one(src, 5, 7, "m");
        assert_eq!((d.items[0].line, d.items[0].col), (1, 6));
        assert!(
            d.render().ends_with("\n1 │     ret %y\n  │         ^^"),
            "{}",
            d.render()
        );
    }

    #[test]
    fn a_long_line_is_cut_around_the_span_with_the_caret_under_it() {
        let mut src = "x".repeat(5_000_000);
        src.push_str(" $bad ");
        src.push_str(&"y".repeat(5_000_000));
        let start = src.find('$').expect("present");
        let d = one(&src, start, start + 4, "bad token");
        let r = d.render();
        assert!(r.len() < 1_000, "{} bytes", r.len());
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("1 │ ...x") && lines[1].ends_with("y..."));
        let caret = lines[2].find('^').expect("a caret");
        assert_eq!(&lines[1][caret..caret + 4], "$bad");
        assert_eq!(&lines[2][caret..], "^^^^");
        // A span longer than the window gets carets to the window's end.
        let d = one(&src, 0, src.len(), "all");
        let r = d.render();
        assert!(r.len() < 1_000, "{} bytes", r.len());
        assert!(r.ends_with(&format!(
            "1 │ {}...\n  │ {}",
            "x".repeat(LINE_WIDTH),
            "^".repeat(LINE_WIDTH)
        )));
    }

    #[test]
    fn control_characters_are_escaped_and_the_caret_still_lines_up() {
        let src = "  \x1b]0;title\x07 \u{202e}%y\n";
        let start = src.find('%').expect("present");
        let d = one(src, start, start + 2, "found `\x1b[31m`");
        let r = d.render();
        assert!(!r.contains('\x1b') && !r.contains('\x07') && !r.contains('\u{202e}'));
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "t.adasm:1:15: error: found `\\x1b[31m`");
        assert_eq!(lines[1], "1 │   \\x1b]0;title\\x07 \\u{202e}%y");
        let col = |l: &str, c: char| l.chars().position(|x| x == c);
        assert_eq!(col(lines[2], '^'), col(lines[1], '%'), "{r}");
        assert!(lines[2].ends_with(" ^^"), "{r}");
    }

    #[test]
    fn a_character_of_no_width_is_escaped_so_a_caret_stands_under_it() {
        // A combining mark alone (the lexer's error for it) and after a
        // letter.
        for src in ["x \u{736} y\n", "e\u{301} $\n"] {
            let start = src.find(['\u{736}', '\u{301}']).expect("present");
            let d = one(src, start, start + 2, "bad");
            for r in [d.render(), strip_ansi(&d.render_color())] {
                let lines: Vec<&str> = r.lines().collect();
                assert_eq!(lines.len(), 3, "{r}");
                assert!(lines[1].contains("\\u{"), "{r}");
                let col = |l: &str, c: char| l.chars().position(|x| x == c);
                assert_eq!(col(lines[2], '^'), col(lines[1], '\\'), "{r}");
            }
        }
    }

    #[test]
    fn a_long_message_is_cut() {
        let d = one("a", 0, 1, &"m".repeat(10_000));
        assert!(d.render().len() < 500 + 20);
        assert!(d
            .render()
            .contains(&format!("{}...", "m".repeat(MESSAGE_CHARS))));
    }

    #[test]
    fn edit_distances() {
        for (a, b, d) in [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("pow", "pow", 0),
            ("powr", "pow", 1),
            ("pow", "pwo", 1),
            ("laod", "load", 1),
            ("kitten", "sitting", 3),
            ("ca", "abc", 3),
            ("ünï", "uni", 2),
        ] {
            assert_eq!(edit_distance(a, b), d, "{a} {b}");
            assert_eq!(edit_distance(b, a), d, "{b} {a}");
        }
    }

    #[test]
    fn closest_names() {
        let names = ["main", "pow", "power", "f.rev", "Grad"];
        assert_eq!(closest("powr", names), Some("pow"));
        assert_eq!(closest("poewr", names), Some("power"));
        assert_eq!(closest("mian", names), Some("main"));
        assert_eq!(closest("MAIN", names), Some("main"));
        assert_eq!(closest("grad", names), Some("Grad"));
        assert_eq!(closest("f.reb", names), Some("f.rev"));
        // Nothing close, the name itself, or nothing at all.
        assert_eq!(closest("sin", names), None);
        assert_eq!(closest("pow", ["pow"]), None);
        assert_eq!(closest("xyzzy", names), None);
        assert_eq!(closest("x", std::iter::empty()), None);
        // A very long name gets none (the limit bounds the work).
        let long = "a".repeat(CLOSEST_MAX_CHARS);
        let longer = format!("{long}b");
        assert_eq!(closest(&long, [longer.as_str()]), Some(longer.as_str()));
        assert_eq!(closest(&format!("{long}c"), [longer.as_str()]), None);
        // Short names allow one edit; the least of equals wins, in any
        // order.
        assert_eq!(closest("g", ["f", "h"]), Some("f"));
        assert_eq!(closest("g", ["h", "f"]), Some("f"));
        assert_eq!(closest("ab", ["AB", "Ab"]), Some("AB"));
        assert_eq!(closest("ab", ["Ab", "AB"]), Some("AB"));
        assert_eq!(closest("ab", ["xy"]), None);
    }

    #[test]
    fn unknown_function_names_with_and_without_a_suggestion() {
        for near in [None, Some("pow")] {
            let d = Diagnostic {
                line: 1,
                col: 1,
                message: Diagnostic::unknown_function_message("powr", near),
                span: Span::default(),
            };
            assert_eq!(d.unknown_function(), Some("powr"), "{}", d.message);
        }
        let other = Diagnostic {
            line: 1,
            col: 1,
            message: "unknown function `@f` and more".into(),
            span: Span::default(),
        };
        assert_eq!(other.unknown_function(), None);
    }

    #[test]
    fn sorted_by_position_and_deduplicated() {
        let mut sink = Sink::default();
        sink.error(Span::new(11, 12), "b");
        sink.error(Span::new(0, 1), "a");
        sink.error(Span::new(11, 12), "b");
        let d = sink.finish("f", "0123456789\nabc");
        let got: Vec<_> = d
            .items
            .iter()
            .map(|i| (i.line, i.col, i.message.as_str()))
            .collect();
        assert_eq!(got, vec![(1, 1, "a"), (2, 1, "b")]);
    }
}
