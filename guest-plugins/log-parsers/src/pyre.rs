//! Python `re` patterns compiled with Rust's `regex`, with Python's meaning of the shorthand
//! classes.
//!
//! The two engines agree on the syntax the SWE-bench parsers use and, for patterns without
//! back-references or look-around, on which match and which captures a search finds (both are
//! leftmost-first, with greedy and lazy priorities). They disagree on what the shorthand classes
//! mean: Python's `\s` also takes U+001C–U+001F, and Python's `\w` is `str.isalnum()` plus `_`
//! (letters and every kind of number, but not combining marks). [`compile`] rewrites those.
//!
//! Left as they are: `$` without `(?m)` is `\z` in Rust but also matches before a final `\n` in
//! Python, so the callers only use it on text without a `\n` (a line of `split('\n')`); `\b`
//! has no rewrite here (its one user spells the boundary out).

use regex::Regex;

use crate::pystr::{self, PY_SPACE};
use crate::status::{StatusMap, TestStatus};

/// Python's `\S`.
const PY_NON_SPACE: &str = r"[^\s\x1C-\x1F]";
/// Python's `\w` for `str` patterns: `isalnum()` or `_`.
pub(crate) const PY_WORD: &str = r"[\p{L}\p{N}_]";
/// Python's `\W`.
pub(crate) const PY_NON_WORD: &str = r"[^\p{L}\p{N}_]";

/// Rewrites `\s`, `\S`, `\w` and `\W` of a Python pattern into classes with Python's meaning.
/// Inside a bracket class the rewrite is a nested class, which Rust's syntax unions (so
/// `[^\S\r\n]` keeps meaning "whitespace but CR and LF").
pub(crate) fn translate(python: &str) -> String {
    let mut out = String::with_capacity(python.len() + 16);
    let mut chars = python.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('s') => out.push_str(PY_SPACE),
            Some('S') => out.push_str(PY_NON_SPACE),
            Some('w') => out.push_str(PY_WORD),
            Some('W') => out.push_str(PY_NON_WORD),
            Some(escaped) => {
                out.push('\\');
                out.push(escaped);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Compiles a Python pattern (see [`translate`]); the patterns are constants of this crate, so a
/// bad one is a bug.
pub(crate) fn compile(python: &str) -> Regex {
    let rust = translate(python);
    Regex::new(&rust).unwrap_or_else(|err| panic!("pattern {python:?} ({rust:?}): {err}"))
}

/// `re.match(pattern, text)`: a match that starts at the beginning of `text` (not necessarily
/// ending at its end).
pub(crate) fn compile_match(python: &str) -> Regex {
    compile(&format!(r"\A(?:{python})"))
}

/// The loop most SWE-bench parsers are: `re.match(pattern, line.strip())` on every line of
/// `log.split('\n')`, storing `status(group word)` under group `name` for each match (a word
/// that `status` maps to `None` stores nothing). A later line for the same name overwrites the
/// status in the first line's place.
pub(crate) fn match_stripped_lines(
    log: &str,
    pattern: &Regex,
    (name, word): (usize, usize),
    status: impl Fn(&str) -> Option<TestStatus>,
) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(caps) = pattern.captures(pystr::strip(line)) else {
            continue;
        };
        let group = |at: usize| caps.get(at).map_or("", |m| m.as_str());
        if let Some(status) = status(group(word)) {
            map.insert(group(name), status);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthand_classes_take_python_meaning() {
        let check = |pattern: &str, text: &str, expect: bool| {
            assert_eq!(
                compile(pattern).is_match(text),
                expect,
                "{pattern} on {text:?}"
            );
        };
        check(r"^\s$", "\u{1C}", true);
        check(r"^\S$", "\u{1F}", false);
        check(r"^\w$", "\u{B2}", true); // superscript two: a number, so a word character
        check(r"^\w$", "\u{301}", false); // combining acute accent: not alphanumeric
        check(r"^\W$", "\u{301}", true);
        check(r"^[^\S\r\n]$", "\t", true);
        check(r"^[^\S\r\n]$", "\n", false);
        check(r"^\\s$", "\\s", true);
        check(r"^[\d\.\_\S]+$", "1._x", true);
    }

    #[test]
    fn match_is_anchored_at_the_start_only() {
        let re = compile_match(r"a|b");
        assert!(re.is_match("bc"));
        assert!(!re.is_match("cb"));
    }
}
