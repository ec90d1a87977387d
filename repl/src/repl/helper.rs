//! The line editor's helper: completion, hints, highlighting and the
//! validator that keeps a `fn` definition open until its braces balance.

use super::session::{Known, COMMANDS};
use super::source;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::{Hint, Hinter};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

pub struct AdvmHelper {
    pub known: Rc<RefCell<Known>>,
    pub files: FilenameCompleter,
    /// ANSI colours (only when stdout is a terminal).
    pub color: bool,
}

impl AdvmHelper {
    pub fn new(known: Rc<RefCell<Known>>, color: bool) -> AdvmHelper {
        AdvmHelper {
            known,
            files: FilenameCompleter::new(),
            color,
        }
    }
}

/// Start of the word that ends at `pos`.
fn word_start(before: &str) -> usize {
    before
        .rfind(|c: char| c.is_whitespace() || matches!(c, '(' | ',' | '[' | '='))
        .map_or(0, |i| i + 1)
}

impl Completer for AdvmHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let Some(before) = line.get(..pos) else {
            return Ok((pos, Vec::new()));
        };
        let trimmed = before.trim_start();
        if trimmed.starts_with(":load ") || trimmed.starts_with(":l ") {
            return self.files.complete(line, pos, ctx);
        }
        let start = word_start(before);
        let word = &before[start..];
        let first_word = before[..start].trim().is_empty();
        let mut out = Vec::new();
        let name_wanted = word.starts_with('@')
            || (word.is_empty() || !word.starts_with(':'))
                && [
                    ":disasm", ":ad", ":jvp", ":hvp", ":cfg", "grad", "jvp", "hvp", "hessian",
                    ":time",
                ]
                .iter()
                .any(|c| trimmed.starts_with(&format!("{c} ")))
                && !trimmed.contains('(');
        if name_wanted {
            let prefix = word.strip_prefix('@').unwrap_or(word);
            for (name, sig) in &self.known.borrow().funcs {
                if name.starts_with(prefix) {
                    out.push(Pair {
                        display: format!("@{name}{sig}"),
                        replacement: format!("@{name}"),
                    });
                }
            }
        }
        if first_word && !word.starts_with('@') {
            for (c, _, _) in COMMANDS {
                if c.starts_with(word) {
                    out.push(Pair {
                        display: c.to_string(),
                        replacement: format!("{c} "),
                    });
                }
            }
        } else if trimmed.starts_with(":time ") && "grad".starts_with(word) && !word.is_empty() {
            out.push(Pair {
                display: "grad".into(),
                replacement: "grad ".into(),
            });
        }
        Ok((start, out))
    }
}

/// A hint: what is shown dimmed after the cursor, and what Right-arrow
/// inserts (only the part that is real input, never a signature).
pub struct AdvmHint {
    display: String,
    completion: Option<String>,
}

impl Hint for AdvmHint {
    fn display(&self) -> &str {
        &self.display
    }

    fn completion(&self) -> Option<&str> {
        self.completion.as_deref()
    }
}

impl Hinter for AdvmHelper {
    type Hint = AdvmHint;

    /// The rest of a command and its arguments; the rest of a unique
    /// function name and its signature; inside `@f(...)`, the signature.
    fn hint(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> Option<AdvmHint> {
        if pos != line.len() || line.contains('\n') {
            return None;
        }
        let known = self.known.borrow();
        // A command being typed.
        if line.starts_with(':') && !line.contains(' ') && line.len() > 1 {
            let mut matches = COMMANDS.iter().filter(|(c, _, _)| c.starts_with(line));
            if let (Some((c, args, _)), None) = (matches.next(), matches.next()) {
                let rest = &c[line.len()..];
                return Some(AdvmHint {
                    display: format!("{rest}{args}"),
                    completion: (!rest.is_empty()).then(|| rest.to_string()),
                });
            }
            return None;
        }
        let at = line.rfind('@')?;
        let after = &line[at + 1..];
        match after.find('(') {
            // `@na`: complete a unique name.
            None => {
                if after.contains(|c: char| c.is_whitespace()) {
                    return None;
                }
                let mut matches = known.funcs.iter().filter(|(n, _)| n.starts_with(after));
                let (Some((name, sig)), None) = (matches.next(), matches.next()) else {
                    return None;
                };
                let rest = &name[after.len()..];
                Some(AdvmHint {
                    display: format!("{rest}{sig}"),
                    completion: (!rest.is_empty()).then(|| rest.to_string()),
                })
            }
            // Inside an unclosed `@name(`: the signature.
            Some(open) if !after[open..].contains(')') => {
                let name = &after[..open];
                let (_, sig) = known.funcs.iter().find(|(n, _)| n == name)?;
                Some(AdvmHint {
                    display: format!("    ; @{name}{sig}"),
                    completion: None,
                })
            }
            Some(_) => None,
        }
    }
}

/// The `.adasm` words that are coloured as keywords.
const KEYWORDS: &[&str] = &[
    "fn", "phi", "ret", "br", "jmp", "call", "grad", "f64", "i64", "bool", "true", "false",
];

/// Whether `word` is an instruction mnemonic of the text (the opcode
/// table's spellings).
fn is_mnemonic(word: &str) -> bool {
    vm::op::Op::ALL
        .iter()
        .any(|op| op.facts().text == Some(word))
}

/// ANSI colours: keywords and commands, mnemonics, `%registers`,
/// `@functions`, `labels:`, literals and comments.
pub fn highlight(line: &str) -> String {
    let mut out = String::with_capacity(line.len() * 2);
    let paint = |out: &mut String, color: &str, text: &str| {
        if color.is_empty() {
            out.push_str(text);
        } else {
            out.push_str("\x1b[");
            out.push_str(color);
            out.push('m');
            out.push_str(text);
            out.push_str("\x1b[0m");
        }
    };
    let mut rest = line;
    let mut line_start = true;
    while let Some(c) = rest.chars().next() {
        if c == ';' {
            let end = rest.find('\n').unwrap_or(rest.len());
            paint(&mut out, "2", &rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.');
        let starts_word = is_word(c)
            || matches!(c, '%' | '@')
            || (c == ':' && line_start)
            || (c == '-' && rest[1..].starts_with(|d: char| d.is_ascii_digit() || d == 'i'));
        if !starts_word {
            if c == '\n' {
                line_start = true;
            } else if !c.is_whitespace() {
                line_start = false;
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        // Numbers may have an exponent sign: `1.5e-3`.
        let numeric = c.is_ascii_digit() || c == '-';
        let mut len = c.len_utf8();
        let mut prev = c;
        for d in rest[len..].chars() {
            let sign = numeric && matches!(d, '+' | '-') && matches!(prev, 'e' | 'E');
            if !(is_word(d) || sign) {
                break;
            }
            len += d.len_utf8();
            prev = d;
        }
        let word = &rest[..len];
        let next = rest[len..].chars().next();
        let color = if word.starts_with('%') {
            "33"
        } else if word.starts_with('@') {
            "36"
        } else if word.starts_with(':') || KEYWORDS.contains(&word) {
            "35;1"
        } else if word.starts_with(|d: char| d.is_ascii_digit() || d == '-')
            || matches!(word, "inf" | "nan")
        {
            "32"
        } else if next == Some(':') {
            "34;1"
        } else if is_mnemonic(word) {
            "34"
        } else {
            ""
        };
        paint(&mut out, color, word);
        line_start = false;
        rest = &rest[len..];
    }
    out
}

impl Highlighter for AdvmHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if self.color {
            Cow::Owned(highlight(line))
        } else {
            Cow::Borrowed(line)
        }
    }

    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        if self.color {
            Cow::Owned(format!("\x1b[1;32m{prompt}\x1b[0m"))
        } else {
            Cow::Borrowed(prompt)
        }
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.color {
            Cow::Owned(format!("\x1b[2m{hint}\x1b[0m"))
        } else {
            Cow::Borrowed(hint)
        }
    }

    fn highlight_char(&self, _line: &str, _pos: usize, _kind: CmdKind) -> bool {
        self.color
    }
}

impl Validator for AdvmHelper {
    /// A `fn` definition goes on until its braces balance.
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        if source::needs_more(ctx.input()) {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

impl Helper for AdvmHelper {}

#[cfg(test)]
mod tests {
    use super::*;
    use rustyline::history::DefaultHistory;

    fn helper() -> AdvmHelper {
        let known = Rc::new(RefCell::new(Known {
            funcs: vec![
                ("pow".into(), "(%x: f64, %n: i64) -> f64".into()),
                ("poly".into(), "(%x: f64) -> f64".into()),
                ("sq".into(), "(%x: f64) -> f64".into()),
            ],
        }));
        AdvmHelper::new(known, true)
    }

    fn complete(h: &AdvmHelper, line: &str) -> (usize, Vec<String>) {
        let history = DefaultHistory::new();
        let ctx = Context::new(&history);
        let (start, pairs) = h.complete(line, line.len(), &ctx).expect("completes");
        (start, pairs.into_iter().map(|p| p.replacement).collect())
    }

    fn hint(h: &AdvmHelper, line: &str) -> Option<(String, Option<String>)> {
        let history = DefaultHistory::new();
        let ctx = Context::new(&history);
        h.hint(line, line.len(), &ctx)
            .map(|h| (h.display, h.completion))
    }

    #[test]
    fn completes_commands_names_and_arguments() {
        let h = helper();
        assert_eq!(complete(&h, ":fu"), (0, vec![":funcs ".to_string()]));
        assert_eq!(complete(&h, ":d").1, [":disasm "]);
        assert_eq!(complete(&h, "gr").1, ["grad "]);
        assert_eq!(complete(&h, "@po").1, ["@pow", "@poly"]);
        assert_eq!(complete(&h, "grad @s"), (5, vec!["@sq".to_string()]));
        assert_eq!(complete(&h, ":ad ").1, ["@pow", "@poly", "@sq"]);
        assert_eq!(complete(&h, ":time gr").1, ["grad "]);
        assert_eq!(complete(&h, ":time grad @p").1, ["@pow", "@poly"]);
        assert!(complete(&h, "@pow(1.0, ").1.is_empty());
    }

    #[test]
    fn completes_file_paths_after_load() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("prog_one.adasm"), "").expect("writes");
        let h = helper();
        let line = format!(":load {}/prog_o", dir.path().display());
        let (_, got) = complete(&h, &line);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].ends_with("prog_one.adasm"), "{got:?}");
    }

    #[test]
    fn hints_rest_of_names_and_signatures() {
        let h = helper();
        assert_eq!(
            hint(&h, ":rel"),
            Some(("oad".to_string(), Some("oad".to_string())))
        );
        assert_eq!(
            hint(&h, ":lo"),
            Some(("ad FILE".to_string(), Some("ad".to_string())))
        );
        assert_eq!(
            hint(&h, "grad @pow"),
            Some(("(%x: f64, %n: i64) -> f64".to_string(), None))
        );
        assert_eq!(
            hint(&h, "@s"),
            Some(("q(%x: f64) -> f64".to_string(), Some("q".to_string())))
        );
        assert_eq!(
            hint(&h, "grad @pow(1.0, "),
            Some(("    ; @pow(%x: f64, %n: i64) -> f64".to_string(), None))
        );
        assert_eq!(hint(&h, "@po"), None);
        assert_eq!(hint(&h, "@pow(1.0, 2)"), None);
        assert_eq!(hint(&h, "@nope("), None);
    }

    #[test]
    fn odd_lines_never_panic() {
        let h = helper();
        let pieces = [
            "@", "po", "w", "(", ")", ":", "lo", "ad ", "grad ", ":time ", "é", "ü", "-", "1e",
            "+", "%", ";", "\n", " ", "[", ",", "fn", "{", "}", "\u{0}", "\t", "🙂",
        ];
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..3000 {
            let mut line = String::new();
            for _ in 0..(state % 9) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                line.push_str(pieces[(state % pieces.len() as u64) as usize]);
            }
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let history = DefaultHistory::new();
            let ctx = Context::new(&history);
            for (pos, _) in line.char_indices().chain([(line.len(), ' ')]) {
                let _ = h.complete(&line, pos, &ctx);
                let _ = h.hint(&line, pos, &ctx);
            }
            let _ = highlight(&line);
            let _ = source::needs_more(&line);
        }
    }

    #[test]
    fn highlights_tokens() {
        let s = highlight("  %y = mul %x, 2.0 ; c");
        assert!(s.contains("\x1b[33m%y\x1b[0m"), "{s:?}");
        assert!(s.contains("\x1b[34mmul\x1b[0m"), "{s:?}");
        assert!(s.contains("\x1b[32m2.0\x1b[0m"), "{s:?}");
        assert!(s.contains("\x1b[2m; c\x1b[0m"), "{s:?}");
        let s = highlight("fn @f() -> f64 {\nentry:\n  ret -1.5e-3\n}");
        assert!(s.contains("\x1b[35;1mfn\x1b[0m"), "{s:?}");
        assert!(s.contains("\x1b[36m@f\x1b[0m"), "{s:?}");
        assert!(s.contains("\x1b[34;1mentry\x1b[0m:"), "{s:?}");
        assert!(s.contains("\x1b[32m-1.5e-3\x1b[0m"), "{s:?}");
        assert!(highlight(":load x").starts_with("\x1b[35;1m:load\x1b[0m"));
        // Stripping the colours gives the line back, whatever it is.
        for line in [
            "fn @f() -> f64 {",
            "a-b",
            "é%ü@",
            "-",
            "--1",
            ":",
            "x:y",
            "1e+5",
        ] {
            let plain = highlight(line)
                .replace("\x1b[0m", "")
                .replace("\x1b[33m", "")
                .replace("\x1b[36m", "")
                .replace("\x1b[35;1m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[34;1m", "")
                .replace("\x1b[34m", "")
                .replace("\x1b[2m", "");
            assert_eq!(plain, line);
        }
    }
}
