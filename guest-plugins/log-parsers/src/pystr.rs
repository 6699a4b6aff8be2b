//! The few CPython `str` operations the SWE-bench parsers are built from, with CPython's exact
//! semantics.
//!
//! Rust's `split_whitespace` and `trim` use the Unicode `White_Space` property (25 code points);
//! CPython's `str.split()` and `str.strip()` also treat U+001C–U+001F as whitespace (29 code
//! points). Test ids are produced by tokenising on that set, so the difference is observable.

use std::borrow::Cow;

/// A regex character class matching what CPython's `\s` matches in a `str` pattern: the Unicode
/// `White_Space` set (Rust's `\s`) plus U+001C–U+001F.
pub(crate) const PY_SPACE: &str = r"[\s\x1C-\x1F]";

/// CPython's `str.isspace()` for one character.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1C}'..='\u{1F}')
}

/// CPython's `s.split()` with no argument: runs of whitespace separate, empty pieces dropped.
pub(crate) fn split(s: &str) -> Vec<&str> {
    s.split(is_space)
        .filter(|piece| !piece.is_empty())
        .collect()
}

/// CPython's `s.splitlines()` (no `keepends`): lines end at `\n`, `\r`, `\r\n`, `\x0b`,
/// `\x0c`, `\x1c`, `\x1d`, `\x1e`, `\x85`, U+2028 or U+2029; a final line break does not
/// start an empty last line, and an empty text has no lines.
pub(crate) fn splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if !is_break {
            continue;
        }
        lines.push(&s[start..at]);
        start = at + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, next)| next == '\n') {
            chars.next();
            start += 1;
        }
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// CPython's `s.strip()` with no argument.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// CPython's `s.rstrip()` with no argument.
pub(crate) fn rstrip(s: &str) -> &str {
    s.trim_end_matches(is_space)
}

/// `len(s) - len(s.lstrip())`: how many whitespace characters (code points, not bytes) `s`
/// starts with; the JavaScript parsers read a line's indentation this way.
pub(crate) fn indent(s: &str) -> usize {
    s.chars().take_while(|&c| is_space(c)).count()
}

/// CPython's `float(s)` for a `str`, `None` where it raises `ValueError`: surrounding whitespace
/// is ignored, any Unicode decimal digit counts as its ASCII digit, single underscores may
/// separate digits (PEP 515), and `inf`, `infinity` and `nan` are accepted in any case, signed.
pub(crate) fn float(s: &str) -> Option<f64> {
    let ascii: String = strip(s)
        .chars()
        .map(|c| decimal_value(c).map_or(c, |d| char::from(b'0' + d)))
        .collect();
    let unsigned = ascii.strip_prefix(['+', '-']).unwrap_or(&ascii);
    let lower = unsigned.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return ascii.parse().ok();
    }
    if !is_python_float_literal(unsigned) {
        return None;
    }
    ascii.replace('_', "").parse().ok()
}

/// Python's grammar for the unsigned part of a float: `digits [. [digits]] | . digits`, then an
/// optional exponent `e [sign] digits`, where `digits` are ASCII digits with single underscores
/// between them.
fn is_python_float_literal(s: &str) -> bool {
    fn digits(s: &str) -> usize {
        let bytes = s.as_bytes();
        let mut end = 0;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
            if end + 1 < bytes.len() && bytes[end] == b'_' && bytes[end + 1].is_ascii_digit() {
                end += 1;
            }
        }
        end
    }
    let int = digits(s);
    let mut rest = &s[int..];
    let mut mantissa = int > 0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let frac = digits(after_dot);
        mantissa |= frac > 0;
        rest = &after_dot[frac..];
    }
    if !mantissa {
        return false;
    }
    if let Some(exponent) = rest.strip_prefix(['e', 'E']) {
        let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        let len = digits(exponent);
        return len > 0 && len == exponent.len();
    }
    rest.is_empty()
}

/// The first piece of CPython's `s.split(sep)`: the text before the first `sep`, or all of `s`.
pub(crate) fn before_first<'a>(s: &'a str, sep: &str) -> &'a str {
    s.split_once(sep).map_or(s, |(head, _)| head)
}

/// Python's universal-newline translation, applied when `test_output.txt` is opened in text
/// mode: `\r\n` and a lone `\r` both become `\n`. Borrows when there is no `\r` at all.
pub(crate) fn translate_newlines(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Whether a string of Unicode decimal digits (what `\d` matched) has the value 0, as Python's
/// `int()` would read it.
pub(crate) fn digits_are_zero(digits: &str) -> bool {
    digits.chars().all(|c| decimal_value(c) == Some(0))
}

/// The value of a Unicode decimal digit (`Nd`), as Python's `int()` and `float()` read it.
/// Every `Nd` digit sits in a run of ten that starts at one of these zeros (Unicode 14, CPython
/// 3.11).
pub(crate) fn decimal_value(c: char) -> Option<u8> {
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
        0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
        0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0,
        0xff10, 0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0,
        0x11650, 0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0,
        0x16b50, 0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
    ];
    let code = u32::from(c);
    // The zeros are sorted: the candidate is the last zero at or below `code`.
    let at = ZEROS.partition_point(|&zero| zero <= code).checked_sub(1)?;
    let value = code - ZEROS[at];
    u8::try_from(value)
        .ok()
        .filter(|&v| v < 10 && c.is_numeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_uses_the_python_whitespace_set() {
        let check = |input: &str, expect: &[&str]| assert_eq!(split(input), expect, "{input:?}");
        check("  a  b\tc\n", &["a", "b", "c"]);
        check("a\u{1C}b\u{1F}c", &["a", "b", "c"]);
        check("a\u{85}b\u{A0}c\u{3000}d", &["a", "b", "c", "d"]);
        check("a\u{200B}b", &["a\u{200B}b"]); // zero-width space is not whitespace
        check("", &[]);
        check(" \u{1D} ", &[]);
    }

    #[test]
    fn strip_uses_the_python_whitespace_set() {
        assert_eq!(strip("\u{1E} x y \u{2028}"), "x y");
        assert_eq!(strip("\u{0}x"), "\u{0}x");
    }

    #[test]
    fn splitlines_uses_the_python_line_boundaries() {
        let check =
            |input: &str, expect: &[&str]| assert_eq!(splitlines(input), expect, "{input:?}");
        check("a\nb\r\nc\rd", &["a", "b", "c", "d"]);
        check("a\n", &["a"]);
        check("a\n\n", &["a", ""]);
        check("", &[]);
        check("\n", &[""]);
        check(
            "a\x0bb\x0cc\x1cd\u{85}e\u{2028}f\u{2029}g\x1fh",
            &["a", "b", "c", "d", "e", "f", "g\x1fh"],
        );
        check("a\r\r\nb", &["a", "", "b"]);
    }

    #[test]
    fn universal_newlines() {
        let check = |input: &str, expect: &str| assert_eq!(translate_newlines(input), expect);
        check("a\r\nb\rc\n", "a\nb\nc\n");
        check("\r\r\n\n", "\n\n\n");
        check("plain\n", "plain\n");
    }

    #[test]
    fn zero_digits() {
        let check =
            |input: &str, expect: bool| assert_eq!(digits_are_zero(input), expect, "{input}");
        check("0", true);
        check("000", true);
        check("\u{660}", true);
        check("1", false);
        check("10", false);
        check("\u{661}", false);
    }
}
