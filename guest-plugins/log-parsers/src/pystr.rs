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

/// CPython's `s.strip()` with no argument.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
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
/// `int()` would read it. Every `Nd` digit sits in a run of ten that starts at its zero, so a
/// digit is 0 exactly when it is one of these code points (Unicode 14, CPython 3.11).
pub(crate) fn digits_are_zero(digits: &str) -> bool {
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
        0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
        0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0,
        0xff10, 0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0,
        0x11650, 0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0,
        0x16b50, 0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
    ];
    digits.chars().all(|c| ZEROS.contains(&u32::from(c)))
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
