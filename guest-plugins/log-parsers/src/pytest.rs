//! The pytest-family parsers: `parse_log_pytest`, `parse_log_pytest_options`,
//! `parse_log_pytest_v2` and `parse_log_matplotlib` (SWE-bench 5.0.2).
//!
//! All of them read pytest's `-rA` short summary (`PASSED path::test`, `FAILED path::test - msg`)
//! line by line and key the map on a token of the line, quirks included: any line that merely
//! starts with a status word counts, and the stored status is the raw first token.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use crate::pystr;
use crate::status::{Status, StatusMap, TestStatus};

/// `SKIPPED [3] path:12: reason` summary lines count skips, not tests; v5 ignores them.
static SKIP_COUNT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[\d+\]$").expect("valid regex"));

/// Remnants of ANSI colour codes (`ESC[31m` once the escape is gone) that pytest_v2 removes.
static ANSI_REMNANT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[(\d+)m").expect("valid regex"));

fn is_skip_summary(status: &str, name: &str) -> bool {
    status == TestStatus::Skipped.as_str() && SKIP_COUNT.is_match(name)
}

/// The entry one line gives under `parse_log_pytest`: for a line starting with a status word,
/// `FAILED` lines first get every ` - ` replaced by a space, then the second token is the key
/// and the first token the status.
fn summary_entry(line: &str) -> Option<(String, Status)> {
    let status = TestStatus::prefix_of(line)?;
    let line = if status == TestStatus::Failed {
        Cow::Owned(line.replace(" - ", " "))
    } else {
        Cow::Borrowed(line)
    };
    let tokens = pystr::split(&line);
    if tokens.len() < 2 || is_skip_summary(tokens[0], tokens[1]) {
        return None;
    }
    Some((tokens[1].to_owned(), Status::from_token(tokens[0])))
}

/// `parse_log_pytest`.
pub(crate) fn parse_pytest(log: &str) -> StatusMap {
    log.split('\n').filter_map(summary_entry).collect()
}

/// `parse_log_matplotlib`: `parse_log_pytest` after replacing `MouseButton.LEFT` by `1` and
/// `MouseButton.RIGHT` by `3` in every line (the dataset's ids use the numbers).
pub(crate) fn parse_matplotlib(log: &str) -> StatusMap {
    log.split('\n')
        .filter_map(|line| {
            let line = line
                .replace("MouseButton.LEFT", "1")
                .replace("MouseButton.RIGHT", "3");
            summary_entry(&line)
        })
        .collect()
}

/// `parse_log_pytest_options`: `parse_log_pytest` with parametrised ids normalised so that
/// temporary paths do not leak into keys.
pub(crate) fn parse_pytest_options(log: &str) -> StatusMap {
    log.split('\n')
        .filter_map(summary_entry)
        .map(|(name, status)| (normalize_option(&name), status))
        .collect()
}

/// The key `parse_log_pytest_options` stores for a test id.
///
/// Upstream searches `(.*?)\[(.*)\]`: main = the text before the first `[`, option = the text
/// between that `[` and the last `]` (whatever follows the last `]` is dropped). An option that
/// starts with `/` but not `//` and has no `*` is cut to `/` + its last `/`-component. The key
/// is `main[option]` whenever the pattern matched. (Ids are whitespace-split tokens, so they
/// never contain the `\n` that `.` would refuse.)
fn normalize_option(name: &str) -> String {
    let Some(open) = name.find('[') else {
        return name.to_owned();
    };
    let close = match name.rfind(']') {
        Some(close) if close > open => close,
        _ => return name.to_owned(),
    };
    let main = &name[..open];
    let mut option = &name[open + 1..close];
    if option.starts_with('/') && !option.starts_with("//") && !option.contains('*') {
        option = option.rsplit('/').next().unwrap_or(option);
        return format!("{main}[/{option}]");
    }
    format!("{main}[{option}]")
}

/// `parse_log_pytest_v2` (v5), per line:
/// 1. remove every `\[(\d+)m`, then delete U+0001–U+001F (tabs included);
/// 2. a line starting with a status word: `FAILED` lines are cut at the first ` - `; with at
///    least two tokens and not a `SKIPPED [N]` summary, key = all tokens after the first joined
///    by single spaces (ids with spaces survive), status = the first token;
/// 3. else a line ending with a status word (`path::test PASSED`, old `-v` style) with at
///    least two tokens: key = all tokens but the last, status = the last token.
pub(crate) fn parse_pytest_v2(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for raw in log.split('\n') {
        let line: String = ANSI_REMNANT
            .replace_all(raw, "")
            .chars()
            .filter(|c| !('\u{1}'..='\u{1F}').contains(c))
            .collect();
        if let Some(status) = TestStatus::prefix_of(&line) {
            let line = if status == TestStatus::Failed {
                pystr::before_first(&line, " - ")
            } else {
                &line
            };
            let tokens = pystr::split(line);
            if tokens.len() >= 2 && !is_skip_summary(tokens[0], tokens[1]) {
                map.insert(tokens[1..].join(" "), Status::from_token(tokens[0]));
            }
        } else if TestStatus::is_suffix_of(&line) {
            let tokens = pystr::split(&line);
            if let [name @ .., status] = tokens.as_slice()
                && !name.is_empty()
            {
                map.insert(name.join(" "), Status::from_token(status));
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn pytest_summary_lines() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Pytest, log, expect);
        check(
            "PASSED tests/x.py::test_a\nFAILED tests/x.py::test_b - AssertionError: boom\n",
            &[
                ("tests/x.py::test_a", "PASSED"),
                ("tests/x.py::test_b", "FAILED"),
            ],
        );
        // Progress lines and indented lines do not count.
        check(
            "tests/x.py ..F.s [ 97%]\n  PASSED tests/x.py::test_a\n",
            &[],
        );
        // Any line starting with a status word counts; the status is the raw first token.
        check("ERROR: file not found: x.py", &[("file", "ERROR:")]);
        check("PASSEDfoo bar", &[("bar", "PASSEDfoo")]);
        // Ids with spaces are cut at the first space.
        check(
            "PASSED tests/x.py::test[a b]",
            &[("tests/x.py::test[a", "PASSED")],
        );
        // A bare status word has fewer than two tokens.
        check("PASSED\nFAILED   \n", &[]);
        // v5 skips `SKIPPED [N]` summary lines, but not other SKIPPED lines.
        check(
            "SKIPPED [1] tests/x.py:12: no numpy\nSKIPPED tests/x.py::test_c\n",
            &[("tests/x.py::test_c", "SKIPPED")],
        );
        check("SKIPPED [1a] x", &[("[1a]", "SKIPPED")]);
        // A wrapped progress line gives the key `[100%]` (pytest-5262 and 7521 expect it).
        check("PASSED [100%]", &[("[100%]", "PASSED")]);
        // `FAILED` replaces every ` - ` by a space before tokenising.
        check("FAILED a - b - c", &[("a", "FAILED")]);
        check("FAILED  - x", &[("x", "FAILED")]);
        // Later lines overwrite earlier ones and keep the first position.
        check(
            "FAILED t1\nPASSED t2\nPASSED t1\n",
            &[("t1", "PASSED"), ("t2", "PASSED")],
        );
        // Python whitespace includes U+001C..U+001F.
        check("PASSED\u{1F}t_x", &[("t_x", "PASSED")]);
        check("XFAIL t_x - reason", &[("t_x", "XFAIL")]);
    }

    #[test]
    fn pytest_options_normalises_paths_in_parameters() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::PytestOptions, log, expect);
        check(
            "PASSED tests/t.py::test_a[/tmp/pytest-1/x/file.txt]",
            &[("tests/t.py::test_a[/file.txt]", "PASSED")],
        );
        check("PASSED t::a[//net/x]", &[("t::a[//net/x]", "PASSED")]);
        check("PASSED t::a[/tmp/*.py]", &[("t::a[/tmp/*.py]", "PASSED")]);
        check("PASSED t::a[/tmp/x/]", &[("t::a[/]", "PASSED")]);
        check("PASSED t::a[rel/x]", &[("t::a[rel/x]", "PASSED")]);
        // Text after the last `]` is dropped; the option runs to the last `]`.
        check("PASSED t::a[x]tail", &[("t::a[x]", "PASSED")]);
        check("PASSED t::a[x][/y/z]", &[("t::a[x][/y/z]", "PASSED")]);
        check("PASSED t::a[/p/q]]", &[("t::a[/q]]", "PASSED")]);
        // No `]` after the first `[`: unchanged.
        check("PASSED t::a]b[c", &[("t::a]b[c", "PASSED")]);
        check("PASSED t::a[]", &[("t::a[]", "PASSED")]);
        check(
            "FAILED tests/test_numversion.py - ImportError",
            &[("tests/test_numversion.py", "FAILED")],
        );
    }

    #[test]
    fn pytest_v2_lines() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::PytestV2, log, expect);
        // ANSI remnants and control characters are removed.
        check(
            "\u{1b}[32mPASSED\u{1b}[0m a/t.py::test_x",
            &[("a/t.py::test_x", "PASSED")],
        );
        // Multi-parameter sequences are only partly removed.
        check("\u{1b}[1;31mFAILED t", &[]);
        // `[10m` inside an id is eaten too.
        check("PASSED t::a[10m]", &[("t::a]", "PASSED")]);
        // Tabs are deleted, not treated as separators.
        check("PASSED a\tb", &[("ab", "PASSED")]);
        // Ids with spaces survive; FAILED cuts at the first ` - `.
        check("PASSED t::a[x y]", &[("t::a[x y]", "PASSED")]);
        check(
            "FAILED t::a[x - y] - AssertionError",
            &[("t::a[x", "FAILED")],
        );
        check(
            "XFAIL t::b - reason: flaky",
            &[("t::b - reason: flaky", "XFAIL")],
        );
        // Old `-v` style: the status comes last.
        check(
            "astropy/x.py::test_y PASSED",
            &[("astropy/x.py::test_y", "PASSED")],
        );
        check("a b   FAILED", &[("a b", "FAILED")]);
        check("a::bPASSED", &[]);
        check("x a::bPASSED", &[("x", "a::bPASSED")]);
        check("PASSED", &[]);
        check("SKIPPED [2] a.py:3: why", &[]);
        // A line that starts with a status word never takes the suffix branch.
        check("PASSED", &[]);
        check("ERROR", &[]);
    }

    #[test]
    fn matplotlib_replaces_mouse_buttons() {
        let check = |log: &str, expect: &[(&str, &str)]| check(Parser::Matplotlib, log, expect);
        check(
            "PASSED lib/t.py::test_a[MouseButton.LEFT-MouseButton.RIGHT]",
            &[("lib/t.py::test_a[1-3]", "PASSED")],
        );
        check("SKIPPED [10] lib/c.py:285: reason", &[]);
        check("FAILED lib/t.py::b - x", &[("lib/t.py::b", "FAILED")]);
    }
}
