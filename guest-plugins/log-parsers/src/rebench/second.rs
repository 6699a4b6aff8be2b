//! Ports of SWE-rebench V2's log parsers (part: second): the Maven/JUnit family, PHP, Ruby,
//! Haskell, the JavaScript variants, Gradle, Julia, R, Leiningen, Dart, Scala, OCaml, Swift and
//! C#.
//!
//! Each parser is a faithful port: the same names in the same insertion order with the same
//! statuses, and the same exception class where upstream raises. Upstream's quirks are kept
//! and described on each function. Where upstream iterates a Python `set` (whose order depends
//! on the interpreter's string hashing, so varies from run to run), the port uses first-seen
//! order.
//!
//! Module map: this file holds the table and the small helpers the parsers share (Python's
//! `\b`, `int()` of digits, the SGR colour pattern, OCaml status precedence; `str.splitlines`
//! and `ansi_escape` are the crate's); the parsers live in the submodules, grouped by
//! ecosystem.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::ParseFn;
use crate::pyre;
use crate::pystr;
use crate::status::{Status, StatusMap, TestStatus};

use crate::javascript::ansi_escape;
use crate::pystr::splitlines;

mod dart;
mod haskell;
mod java;
mod js;
mod misc;
mod ocaml;
mod scala;

/// `(name, parser)` for every parser this part ports.
pub(super) const PARSERS: &[(&str, ParseFn)] = &[
    ("parse_java_mvn", java::parse_java_mvn),
    ("parse_log_sbt", java::parse_log_sbt),
    ("parse_java_mvn_v2", java::parse_java_mvn_v2),
    ("parse_log_gradlew_v1", java::parse_log_gradlew_v1),
    ("parse_log_php_v1", misc::parse_log_php_v1),
    ("parse_log_ruby_v2", misc::parse_log_ruby_v2),
    ("parse_log_haskell", haskell::parse_log_haskell),
    ("parse_log_haskell_v2", haskell::parse_log_haskell_v2),
    ("parse_log_js", js::parse_log_js),
    ("parse_log_js_2", js::parse_log_js_2),
    ("parse_log_js_3", js::parse_log_js_3),
    ("parse_log_js_4", js::parse_log_js_4),
    ("parse_log_npx", js::parse_log_npx),
    ("parse_log_julia", misc::parse_log_julia),
    ("parse_log_r", misc::parse_log_r),
    ("parse_log_r_v2", misc::parse_log_r_v2),
    ("parse_logs_r_junit", misc::parse_logs_r_junit),
    ("parse_log_lein", misc::parse_log_lein),
    ("parse_log_dart", dart::parse_log_dart),
    ("parse_log_dart_v2", dart::parse_log_dart_v2),
    ("parse_log_dart_v3", dart::parse_log_dart_v3),
    ("parse_log_scala", scala::parse_log_scala),
    ("parse_log_scala_v2", scala::parse_log_scala_v2),
    ("parse_log_scala_v3", scala::parse_log_scala_v3),
    ("parse_log_ocaml", ocaml::parse_log_ocaml),
    ("parse_log_ocaml_v2", ocaml::parse_log_ocaml_v2),
    ("parse_log_ocaml_v3", ocaml::parse_log_ocaml_v3),
    ("parse_log_ocaml_v4", ocaml::parse_log_ocaml_v4),
    ("parse_log_swift", misc::parse_log_swift),
    ("parse_log_csharp", misc::parse_log_csharp),
];

/// A lazily compiled Python pattern (see [`pyre::compile`]).
type Pattern = LazyLock<Regex>;

/// Capture group `at`, or `""` where it did not take part (Python's `None`, never used so).
fn group<'t>(caps: &Captures<'t>, at: usize) -> &'t str {
    caps.get(at).map_or("", |m| m.as_str())
}

/// A named capture group, or `""` where it did not take part.
fn named<'t>(caps: &Captures<'t>, name: &str) -> &'t str {
    caps.name(name).map_or("", |m| m.as_str())
}

/// Python's `\w` for one character (`str.isalnum()` or `_`).
fn is_py_word(c: char) -> bool {
    static WORD: Pattern =
        LazyLock::new(|| Regex::new(&format!(r"\A{}\z", pyre::PY_WORD)).expect("valid"));
    WORD.is_match(c.encode_utf8(&mut [0; 4]))
}

/// Python's `\b` at byte offset `at` of `text`: exactly one side is a word character.
fn py_boundary(text: &str, at: usize) -> bool {
    let before = text[..at].chars().next_back().is_some_and(is_py_word);
    let after = text[at..].chars().next().is_some_and(is_py_word);
    before != after
}

/// `int(digits)` for a run of Unicode decimal digits (what `\d+` matched), as canonical ASCII
/// text (no leading zeros), so that two runs compare as Python's integers do.
fn py_int(digits: &str) -> String {
    let ascii: String = digits
        .chars()
        .map(|c| pystr::decimal_value(c).map_or(c, |d| char::from(b'0' + d)))
        .collect();
    let trimmed = ascii.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Upstream's module-level SGR (colour) pattern: `ESC [ digits-and-semicolons m`.
static ANSI_COLOR_DELIM: Pattern = LazyLock::new(|| pyre::compile(r"\x1B\[[0-9;]*m"));

/// Upstream's OCaml precedence: passed < skipped < failed < error (anything else ranks -1).
fn precedence(status: Option<TestStatus>) -> i8 {
    match status {
        Some(TestStatus::Passed) => 0,
        Some(TestStatus::Skipped) => 1,
        Some(TestStatus::Failed) => 2,
        Some(TestStatus::Error) => 3,
        Some(TestStatus::Xfail) | None => -1,
    }
}

/// Stores `status` for `name` unless the name is empty, or the stored status outranks it (an
/// equal rank overwrites).
fn update_by_precedence(map: &mut StatusMap, name: &str, status: TestStatus) {
    if name.is_empty() {
        return;
    }
    let keep = map
        .get(name)
        .is_some_and(|current| precedence(Some(status)) < precedence(current.known()));
    if !keep {
        map.insert(name, status);
    }
}

/// `dict.setdefault(name, status)`.
fn set_default(map: &mut StatusMap, name: &str, status: impl Into<Status>) {
    if !map.contains_key(name) {
        map.insert(name, status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_of_digits() {
        assert_eq!(py_int("007"), "7");
        assert_eq!(py_int("000"), "0");
        assert_eq!(py_int("\u{661}\u{660}"), "10");
    }

    #[test]
    fn word_boundaries() {
        assert!(py_boundary("ab c", 2));
        assert!(!py_boundary("ab", 1));
        assert!(py_boundary("a\u{301}", 1));
        assert!(py_boundary("a", 1));
    }
}
