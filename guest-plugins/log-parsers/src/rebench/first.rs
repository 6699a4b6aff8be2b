//! Ports of SWE-rebench V2's log parsers (part: first): the functions its `log_parsers.py`
//! defines from the top of the module through `parse_lue_nvim`, with the module-level helpers
//! they share (the status words, `ansi_escape`).
//!
//! Eighteen of them (Go, Cargo, Django, doctest, googletest, jq, MicroPython, Minitest,
//! Cucumber, Ruby unit, RSpec JSON, Ant, TAP, Chart.js, p5.js, Jest JSON, Vitest, Karma) are
//! SWE-bench 5.0.2's code unchanged and run the crate's ports of SWE-bench's (`swebench!`).
//! Module map of the rest: `python` (pytest and its relatives, sympy, seaborn, matplotlib),
//! `native` (Elixir, Ruby, Redis, PHPUnit, Maven, Kotlin/Gradle and the JUnit XML reports),
//! `cpp` (the C++ runners and Neovim's Lua tests), `js` (Calypso, marked, react-pdf, Jest).

use regex::{Captures, Regex};

use super::ParseFn;
use crate::pystr;

/// A `&'static Regex` compiled once from a Python pattern with `re.match` semantics (anchored
/// at the start, see [`crate::pyre::compile_match`]).
macro_rules! py_match {
    ($pattern:expr) => {{
        static RE: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| crate::pyre::compile_match($pattern));
        &*RE
    }};
}

/// A `&'static Regex` compiled once from a Python pattern with `re.search` semantics.
macro_rules! py_search {
    ($pattern:expr) => {{
        static RE: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| crate::pyre::compile($pattern));
        &*RE
    }};
}

/// A parser whose SWE-rebench V2 code is SWE-bench 5.0.2's, statement for statement (their
/// function bodies parse to the same syntax tree): the crate's port of SWE-bench's runs it,
/// and `tests/differential/rebench.rs` checks it against SWE-rebench V2's outputs too.
macro_rules! swebench {
    ($parser:ident) => {
        |log: &str| crate::Parser::$parser.try_parse(log, &crate::LogContext::default())
    };
}

mod cpp;
mod js;
mod native;
mod python;

/// Also part of SWE-rebench V2's `parse_java_mvn`.
pub(super) use native::parse_log_maven;

/// `(name, parser)` for every parser this part ports.
pub(super) const PARSERS: &[(&str, ParseFn)] = &[
    ("parse_log_pytest", python::parse_log_pytest),
    ("parse_log_pytest_options", python::parse_log_pytest_options),
    ("parse_log_django", swebench!(Django)),
    ("parse_log_pytest_v2", python::parse_log_pytest_v2),
    ("parse_log_seaborn", python::parse_log_seaborn),
    ("parse_log_sympy", python::parse_log_sympy),
    ("parse_log_matplotlib", python::parse_log_matplotlib),
    ("parse_log_pytest_nebo", python::parse_log_pytest_nebo),
    ("parse_test_report", native::parse_test_report),
    (
        "parse_combined_test_reports",
        native::parse_combined_test_reports,
    ),
    ("parse_log_gotest", swebench!(Gotest)),
    ("parse_log_elixir", native::parse_log_elixir),
    ("parse_log_ruby_v1", native::parse_log_ruby_v1),
    ("parse_log_redis", native::parse_log_redis),
    ("parse_log_jq", swebench!(Jq)),
    ("parse_log_doctest", swebench!(Doctest)),
    ("parse_log_micropython_test", swebench!(MicropythonTest)),
    ("parse_log_googletest", swebench!(Googletest)),
    ("parse_log_minitest", swebench!(Minitest)),
    ("parse_log_cucumber", swebench!(Cucumber)),
    ("parse_log_ruby_unit", swebench!(RubyUnit)),
    (
        "parse_log_rspec_transformed_json",
        swebench!(RspecTransformedJson),
    ),
    ("parse_log_cargo", swebench!(Cargo)),
    ("parse_log_phpunit", native::parse_log_phpunit),
    ("parse_log_maven", native::parse_log_maven),
    ("parse_log_ant", swebench!(Ant)),
    ("parse_logs_kotlin_junit", native::parse_logs_kotlin_junit),
    ("parse_log_gradle_custom", native::parse_log_gradle_custom),
    ("parse_log_tap", swebench!(Tap)),
    ("parse_log_calypso", js::parse_log_calypso),
    ("parse_log_chart_js", swebench!(ChartJs)),
    ("parse_log_marked", js::parse_log_marked),
    ("parse_log_p5js", swebench!(P5js)),
    ("parse_log_react_pdf", js::parse_log_react_pdf),
    ("parse_log_jest", js::parse_log_jest),
    ("parse_log_jest_json", swebench!(JestJson)),
    ("parse_log_vitest", swebench!(Vitest)),
    ("parse_log_karma", swebench!(Karma)),
    ("parse_log_cpp", cpp::parse_log_cpp),
    ("parse_log_cpp_v2", cpp::parse_log_cpp_v2),
    ("parse_log_cpp_v3", cpp::parse_log_cpp_v3),
    ("parse_log_cpp_v4", cpp::parse_log_cpp_v4),
    ("parse_lue_nvim", cpp::parse_lue_nvim),
];

/// The words of SWE-rebench V2's `TestStatus` enum, in its declaration order. Unlike
/// SWE-bench's, it has no `XFAIL`, so a line starting `XFAIL` is no status line here.
const STATUS_WORDS: [&str; 4] = ["PASSED", "FAILED", "SKIPPED", "ERROR"];

/// Whether `line` starts with one of the four status words.
fn starts_with_status(line: &str) -> bool {
    STATUS_WORDS.iter().any(|word| line.starts_with(word))
}

/// Whether `line` ends with one of the four status words.
fn ends_with_status(line: &str) -> bool {
    STATUS_WORDS.iter().any(|word| line.ends_with(word))
}

/// Group `at` of a match, `""` where it did not take part.
fn group<'t>(caps: &Captures<'t>, at: usize) -> &'t str {
    caps.get(at).map_or("", |m| m.as_str())
}

/// The captures of `re.match(pattern, line.strip())` for each line of `log.split('\n')` that
/// matches, in order.
fn stripped_matches<'t>(
    log: &'t str,
    pattern: &'static Regex,
) -> impl Iterator<Item = Captures<'t>> {
    log.split('\n')
        .filter_map(move |line| pattern.captures(pystr::strip(line)))
}

/// A regex fragment matching `word` as Python's `re.IGNORECASE` does for a `str` pattern:
/// besides the two ASCII cases, `i` also takes `İ` and `ı`, `k` the Kelvin sign and `s` the
/// long s. Only ASCII letters are expected.
fn ignore_case(word: &str) -> String {
    word.chars()
        .map(|c| match c.to_ascii_lowercase() {
            'i' => "[iIİı]".to_owned(),
            'k' => "[kKK]".to_owned(),
            's' => "[sSſ]".to_owned(),
            l if l.is_ascii_alphabetic() => format!("[{l}{}]", l.to_ascii_uppercase()),
            other => regex::escape(&other.to_string()),
        })
        .collect()
}

/// Whether `re.search(r"\bW1\b|\bW2\b|...", text, re.IGNORECASE)` finds anything, for ASCII
/// words `W`: some maximal run of Python word characters (letters, numbers, `_`) in `text`
/// equals one of the words, letter for letter under [`ignore_case`]'s folding.
fn has_bounded_word(text: &str, words: &[&str]) -> bool {
    static NON_WORD: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(&format!("{}+", crate::pyre::PY_NON_WORD)).expect("valid regex")
    });
    NON_WORD.split(text).any(|run| {
        words.iter().any(|word| {
            run.chars().count() == word.len()
                && run.chars().zip(word.chars()).all(|(have, want)| {
                    let want = want.to_ascii_lowercase();
                    have.to_ascii_lowercase() == want
                        || matches!((want, have), ('i', 'İ' | 'ı') | ('k', 'K') | ('s', 'ſ'))
                })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_words_fold_like_python() {
        assert!(has_bounded_word("3 tests FaIled", &["failed"]));
        assert!(has_bounded_word("x-failed.", &["failed"]));
        assert!(!has_bounded_word("unfailed", &["failed"]));
        assert!(!has_bounded_word("failed_x", &["failed"]));
        assert!(has_bounded_word("faıled", &["failed"]));
        assert!(has_bounded_word("ſkipped", &["skipped"]));
        assert!(!has_bounded_word("", &["ok"]));
    }

    #[test]
    fn ignore_case_classes() {
        let re = Regex::new(&format!("^{}$", ignore_case("skip"))).expect("valid");
        assert!(re.is_match("SKİP"));
        assert!(re.is_match("ſKıp"));
        assert!(!re.is_match("skiq"));
    }
}
