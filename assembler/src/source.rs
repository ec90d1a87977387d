//! Source files as bytes to source text.
//!
//! [`assemble`](crate::assemble) takes text; a file must first become text.
//! [`decode`] does that the same way for every caller (the command line and
//! the REPL's `:load`): one leading byte-order mark is skipped (it is an
//! encoding artefact, not part of line 1, so columns and the echoed source
//! line stay those the user sees), a carriage return not followed by a
//! line feed ends a line (a file with classic Mac line endings is read as
//! its lines, not as one), and bytes that are not UTF-8 are an ordinary
//! located diagnostic rather than an I/O error.

use crate::diag::{Diagnostics, Sink, Span};

/// The UTF-8 byte-order mark.
const BOM: &[u8] = "\u{FEFF}".as_bytes();

/// The text of a source file named `file` (for diagnostics): `bytes`
/// without one leading byte-order mark, or a diagnostic at the first byte
/// that is not UTF-8 (line and column of the text before it; the source
/// line is shown with U+FFFD in place of the bad bytes).
///
/// A second byte-order mark is left in the text, where the lexer reports it
/// like any other unexpected character.
///
/// ```
/// assert_eq!(assembler::decode(b"\xEF\xBB\xBFfn", "f.adasm").unwrap(), "fn");
/// let err = assembler::decode(b"; caf\xE9\n", "f.adasm").unwrap_err();
/// assert!(err.render().starts_with("f.adasm:1:6: error: invalid UTF-8: byte 0xE9"));
/// ```
///
/// Like [`assemble`](crate::assemble), it runs in a compile section
/// ([`crate::compile_section`]): the copy of the text failing is
/// [`Diagnostics::out_of_memory`].
pub fn decode(bytes: &[u8], file: &str) -> Result<String, Diagnostics> {
    crate::compile_section(file, || decode_in_section(bytes, file))
}

fn decode_in_section(bytes: &[u8], file: &str) -> Result<String, Diagnostics> {
    let skipped = if bytes.starts_with(BOM) { BOM.len() } else { 0 };
    let body = &bytes[skipped..];
    let e = match std::str::from_utf8(body) {
        Ok(text) => return Ok(lone_cr_to_lf(text)),
        Err(e) => e,
    };
    let at = e.valid_up_to();
    let byte = body.get(at).copied().unwrap_or(0);
    let offset = at + skipped;
    let message = match e.error_len() {
        Some(_) => format!(
            "invalid UTF-8: byte 0x{byte:02X} (byte {offset} of the file) is not part of a \
             UTF-8 character; source files must be UTF-8"
        ),
        None => format!(
            "invalid UTF-8: the file ends inside a character (byte 0x{byte:02X}, byte {offset} \
             of the file); source files must be UTF-8"
        ),
    };
    // The lossy text keeps the valid prefix as it is, so the first bad byte
    // is at `at` there too, shown as one U+FFFD.
    let shown = String::from_utf8_lossy(body);
    let mut sink = Sink::default();
    sink.error(
        Span::new(at, at + char::REPLACEMENT_CHARACTER.len_utf8()),
        message,
    );
    Err(sink.finish(file, &shown))
}

/// `text` with every `\r` that no `\n` follows replaced by `\n` (same
/// length, so byte offsets do not move; `\r\n` stays as it is).
fn lone_cr_to_lf(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if c == '\r' && b.get(i + 1) != Some(&b'\n') {
            out.push('\n');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_carriage_return_ends_a_line() {
        let text = decode(
            b"fn @f() -> f64 {\rentry: ; a comment\r    ret 1.0\r}\r",
            "f",
        )
        .expect("UTF-8");
        assert_eq!(
            text,
            "fn @f() -> f64 {\nentry: ; a comment\n    ret 1.0\n}\n"
        );
        assert!(crate::assemble(&text, "f").is_ok());
        // Windows line endings are left alone; a lone one beside them too.
        assert_eq!(decode(b"a\r\nb\rc", "f").ok().as_deref(), Some("a\r\nb\nc"));
        // An error is located on its own line.
        let text = decode(b"fn @f() -> f64 {\rentry:\r    ret %nope\r}\r", "f").expect("UTF-8");
        let d = crate::assemble(&text, "f").expect_err("unknown value");
        assert!(d.render().starts_with("f:3:"), "{}", d.render());
    }

    fn err(bytes: &[u8]) -> String {
        decode(bytes, "f").expect_err("not UTF-8").render()
    }

    #[test]
    fn one_leading_bom_is_skipped() {
        assert_eq!(decode(b"\xEF\xBB\xBFfn", "f").ok().as_deref(), Some("fn"));
        assert_eq!(
            decode(b"\xEF\xBB\xBF\xEF\xBB\xBFfn", "f").ok().as_deref(),
            Some("\u{FEFF}fn")
        );
        assert_eq!(
            decode(b"a\xEF\xBB\xBF", "f").ok().as_deref(),
            Some("a\u{FEFF}")
        );
        assert_eq!(decode(b"", "f").ok().as_deref(), Some(""));
    }

    #[test]
    fn the_first_bad_byte_is_located() {
        assert_eq!(
            err(b"fn\n  x \xE9t\xFF\n"),
            "f:2:5: error: invalid UTF-8: byte 0xE9 (byte 7 of the file) is not part of a UTF-8 \
             character; source files must be UTF-8\n2 │   x \u{FFFD}t\u{FFFD}\n  │     ^"
        );
        // Columns after a skipped BOM are those of the text; offsets count it.
        assert!(err(b"\xEF\xBB\xBF\xC3(")
            .starts_with("f:1:1: error: invalid UTF-8: byte 0xC3 (byte 3 "));
        assert!(err(b"ab\xE2\x82").contains("the file ends inside a character (byte 0xE2, byte 2"));
        assert!(err(b"\x80").starts_with("f:1:1: error: invalid UTF-8: byte 0x80"));
    }
}
