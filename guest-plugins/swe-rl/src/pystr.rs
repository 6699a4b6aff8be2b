//! Python `str` semantics that the reward depends on and that Rust's `str` does not share:
//! `str.isspace()` / `str.strip()` (29 code points, not Rust's 25) and `str.splitlines()`
//! (11 kinds of line boundary, not just `\n`).

/// Whether `c` is whitespace for Python's `str.isspace()`.
///
/// This is the 29-code-point set U+0009–U+000D, U+001C–U+001F, U+0020, U+0085, U+00A0, U+1680,
/// U+2000–U+200A, U+2028, U+2029, U+202F, U+205F and U+3000. It differs from
/// [`char::is_whitespace`] by including U+001C–U+001F (the "information separators"), which
/// Python counts as whitespace and Unicode's White_Space property does not.
pub(crate) fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\u{09}'..='\u{0D}'
            | '\u{1C}'..='\u{20}'
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
    )
}

/// Python's `s.strip()` with no argument: removes leading and trailing [`is_py_space`] characters.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `s.splitlines()` (without `keepends`).
///
/// Boundaries are `\n`, `\r\n` (one boundary), `\r`, U+000B, U+000C, U+001C, U+001D, U+001E,
/// U+0085, U+2028 and U+2029. Terminators are removed and a final terminator does not produce an
/// extra empty line: `"a\n"` gives `["a"]`, `"\n"` gives `[""]` and `""` gives `[]`.
pub(crate) fn splitlines(s: &str) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut lines = Vec::with_capacity(bytes.len() / 32 + 1);
    let mut start = 0;
    let mut i = 0;
    // Every boundary starts with a byte that can only begin a character (ASCII, 0xC2 or 0xE2), so
    // scanning bytes always cuts on a character boundary.
    while i < bytes.len() {
        // Two words per iteration where the text allows (half the loop's overhead, which in
        // the wasm guest includes its fuel and epoch checks), then one.
        let word = |at: usize| {
            bytes
                .get(at..at + 8)
                .map(|w| boundary_candidates(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
        };
        if let (Some(low), Some(high)) = (word(i), word(i + 8)) {
            if low | high == 0 {
                i += 16;
                continue;
            }
            // The lowest flagged byte is the first candidate of the word (a flag is only ever
            // wrong above a true one), so the bytes before it hold no boundary.
            i += if low != 0 {
                (low.trailing_zeros() / 8) as usize
            } else {
                8 + (high.trailing_zeros() / 8) as usize
            };
        } else if let Some(flagged) = word(i) {
            if flagged == 0 {
                i += 8;
                continue;
            }
            i += (flagged.trailing_zeros() / 8) as usize;
        }
        let terminator_len = match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
            b'\n' | b'\r' | 0x0B | 0x0C | 0x1C..=0x1E => 1,
            // U+0085 is C2 85 in UTF-8.
            0xC2 if bytes.get(i + 1) == Some(&0x85) => 2,
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
            0xE2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                3
            }
            _ => 0,
        };
        if terminator_len == 0 {
            i += 1;
        } else {
            lines.push(&s[start..i]);
            i += terminator_len;
            start = i;
        }
    }
    if start < bytes.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// The high bit of each byte of `word` (little-endian) that may begin a line boundary: every
/// byte below 0x1F or above 0x7F is flagged, and the lowest flagged byte is exactly the first
/// such byte; bytes above it may be flagged wrongly. Zero when no byte of `word` can begin one.
fn boundary_candidates(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    // Subtracting 0x1F sets the high bit of the lowest byte below 0x1F (borrows can only add
    // false positives above it); OR-ing the word itself catches bytes of 0x80 and up.
    (word.wrapping_sub(ONES * 0x1F) | word) & HIGH_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_set_has_29_code_points() {
        let count = (0..=0x10FFFF_u32)
            .filter_map(char::from_u32)
            .filter(|&c| is_py_space(c))
            .count();
        assert_eq!(count, 29);
        // The four separators Rust does not treat as whitespace.
        for c in '\u{1C}'..='\u{1F}' {
            assert!(is_py_space(c) && !c.is_whitespace(), "{c:?}");
        }
        // Whitespace in neither language.
        assert!(!is_py_space('\u{200B}'));
        assert!(!is_py_space('\u{FEFF}'));
    }

    #[test]
    fn strip() {
        fn check(input: &str, expect: &str) {
            assert_eq!(py_strip(input), expect, "input {input:?}");
        }
        check("", "");
        check("  a b \n", "a b");
        check("\u{1C}\u{1D}\u{1E}\u{1F}", "");
        check("\u{1F}x\u{1C}", "x");
        check(
            "\u{85}\u{A0}\u{3000}x\u{2028}\u{2029}\u{202F}\u{205F}\u{1680}\u{200A}",
            "x",
        );
        check("\u{200B}x\u{FEFF}", "\u{200B}x\u{FEFF}");
    }

    #[test]
    fn splitlines_boundaries() {
        fn check(input: &str, expect: &[&str]) {
            assert_eq!(splitlines(input), expect, "input {input:?}");
        }
        check("", &[]);
        check("\n", &[""]);
        check("a", &["a"]);
        check("a\n", &["a"]);
        check("a\n\n", &["a", ""]);
        check("a\r\nb", &["a", "b"]);
        check("a\r\rb", &["a", "", "b"]);
        check("a\n\rb", &["a", "", "b"]);
        check("a\rb\r", &["a", "b"]);
        check("a\u{0B}b\u{0C}c", &["a", "b", "c"]);
        check(
            "a\u{1C}b\u{1D}c\u{1E}d\u{1F}e",
            &["a", "b", "c", "d\u{1F}e"],
        );
        check("a\u{85}b\u{2028}c\u{2029}d", &["a", "b", "c", "d"]);
        check("x\u{2028}", &["x"]);
        // Look-alikes that are not boundaries.
        check(
            "a\u{2027}b\u{202A}c\u{84}d\u{A0}e",
            &["a\u{2027}b\u{202A}c\u{84}d\u{A0}e"],
        );
        check("é\u{0C}€\r\n😀", &["é", "€", "😀"]);
        // Boundaries at every offset of a long ASCII run (the 8-byte skip must not miss any).
        for boundary in [
            "\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\u{1C}", "\u{1D}", "\u{1E}", "\u{85}",
            "\u{2028}", "\u{2029}",
        ] {
            for at in 0..20 {
                let text = format!("{}{boundary}{}", "x".repeat(at), "y".repeat(19 - at));
                let (xs, ys) = ("x".repeat(at), "y".repeat(19 - at));
                let expect: &[&str] = if ys.is_empty() { &[&xs] } else { &[&xs, &ys] };
                check(&text, expect);
            }
        }
    }
}
