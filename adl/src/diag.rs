//! Collecting located errors and turning them into the assembler's
//! [`Diagnostics`], so `.adl` errors render exactly as `.adasm` ones.

use assembler::{Diagnostic, Diagnostics, Span};
use vm::ir::Loc;

/// Errors found so far, as byte spans and messages.
#[derive(Debug, Default)]
pub struct Errors {
    items: Vec<(Span, String)>,
}

impl Errors {
    /// Report `message` about the source bytes `span`.
    pub fn error(&mut self, span: Span, message: impl Into<String>) {
        self.items.push((span, message.into()));
    }

    /// How many errors were reported (duplicates included).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no error was reported.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The errors sorted by position (each identical one once), with lines
    /// and columns.
    pub fn finish(mut self, file: &str, src: &str) -> Diagnostics {
        self.items.sort_by_key(|(span, _)| (span.start, span.end));
        self.items.dedup();
        let lines = Lines::new(src);
        let items = self
            .items
            .into_iter()
            .map(|(span, message)| {
                let loc = lines.loc(span.start);
                Diagnostic {
                    line: loc.line,
                    col: loc.col,
                    message,
                    span,
                }
            })
            .collect();
        Diagnostics::new(file, src, items)
    }
}

/// Byte offsets to 1-based lines and character columns.
pub struct Lines<'s> {
    src: &'s str,
    starts: Vec<usize>,
}

impl<'s> Lines<'s> {
    /// The line starts of `src`, found in one pass.
    pub fn new(src: &'s str) -> Lines<'s> {
        let mut starts = vec![0];
        starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Lines { src, starts }
    }

    /// The line and column of byte `offset` (clamped to the text).
    pub fn loc(&self, offset: usize) -> Loc {
        let offset = offset.min(self.src.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let col = self
            .src
            .get(start..offset)
            .map_or(offset - start, |t| t.chars().count());
        Loc::new(line as u32, col as u32 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns() {
        let l = Lines::new("ab\ncé d\n");
        assert_eq!(l.loc(0), Loc::new(1, 1));
        assert_eq!(l.loc(3), Loc::new(2, 1));
        assert_eq!(l.loc(6), Loc::new(2, 3));
        assert_eq!(l.loc(100), Loc::new(3, 1));
    }
}
