//! PHP (Pest/PHPUnit testdox), Ruby, Julia, R (testthat, `R CMD check`, JUnit), Leiningen,
//! Swift XCTest and .NET test output.

use std::sync::LazyLock;

use regex::Regex;

use super::{Pattern, group, named, set_default, splitlines};
use crate::error::{ParseError, PyException};
use crate::pyre::{self, PY_NON_WORD};
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// The `⨯` (U+2A2F) a failing Pest test starts with.
const CROSS: &str = "\u{2A2F}";

/// `\s*$`-anchored timing suffixes `clean` removes, two or more spaces first.
static PHP_TIMING_WIDE: Pattern = LazyLock::new(|| pyre::compile(r"\s{2,}\d+(?:\.\d+)?s\s*$"));
static PHP_TIMING: Pattern = LazyLock::new(|| pyre::compile(r"\s+\d+(?:\.\d+)?s\s*$"));

/// Upstream writes `\d+\.?\d*s\b.*$`; after the word character `s`, Python's `\b.*$` means
/// "the end, or a non-word character and anything".
fn timed(prefix: &str, case_insensitive_s: bool) -> Regex {
    let s = if case_insensitive_s { "(?i:s)" } else { "s" };
    pyre::compile(&format!(
        r"{prefix}\s+(?P<name>.+?)\s{{2,}}\d+\.?\d*{s}(?:{PY_NON_WORD}.*)?$"
    ))
}

static PHP_PASS: Pattern = LazyLock::new(|| timed(r"^\s*(?:✓|✔)", false));
static PHP_PASS_BARE: Pattern = LazyLock::new(|| pyre::compile(r"^\s*(?:✓|✔)\s+(?P<name>.+?)\s*$"));
static PHP_FAIL: Pattern = LazyLock::new(|| timed(&format!(r"^\s*(?i:{CROSS}|x)"), true));
static PHP_FAIL_BARE: Pattern =
    LazyLock::new(|| pyre::compile(&format!(r"^\s*(?i:{CROSS}|x)\s+(?P<name>.+?)\s*$")));
static PHP_SUITE_FAIL: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s*(?i:FAIL(?:ED)?)\s+(?P<name>\S.+)$"));
static PHP_SKIP: Pattern = LazyLock::new(|| timed(r"^\s*-", false));
static PHP_SKIP_BARE: Pattern = LazyLock::new(|| pyre::compile(r"^\s*-\s+(?P<name>.+?)\s*$"));
/// `\(skipped\)|\bSKIPPED\b`, case-insensitive, with the boundaries spelled out (only whether
/// it occurs is asked).
static PHP_SKIP_MARKER: Pattern = LazyLock::new(|| {
    pyre::compile(&format!(
        r"(?i:\(skipped\))|(?:^|{PY_NON_WORD})(?i:SKIPPED)(?:{PY_NON_WORD}|$)"
    ))
});
static PHP_LEADING_MARK: Pattern =
    LazyLock::new(|| pyre::compile(&format!(r"^\s*(?:✓|✔|{CROSS}|x|-)\s+")));

/// Upstream's `clean`: right-strip, drop a trailing timing (`  0.03s`, then ` 0.03s`), strip.
fn php_clean(name: &str) -> String {
    let name = pystr::rstrip(name);
    let name = PHP_TIMING_WIDE.replace_all(name, "");
    let name = PHP_TIMING.replace_all(&name, "");
    pystr::strip(&name).to_owned()
}

/// `parse_log_php_v1`: Pest / PHPUnit testdox output. Per line (right-stripped, blank ones
/// skipped; lines whose stripped text starts with `___`, `---`, `Tests:` or `Duration:` are
/// ignored), first match wins:
///
/// * `FAIL <suite>` / `FAILED <suite>` (any case): the cleaned suite name is `FAILED`.
/// * `⨯ <name>` or `x <name>` (any case), with or without a timing: `FAILED` when the cleaned
///   name is not empty; the line is consumed either way.
/// * `- <name>`: `SKIPPED` when the cleaned name is not empty (consumed either way).
/// * `✓ <name>` / `✔ <name>`: `PASSED` unless the name already has a status (consumed).
/// * Any other line containing `(skipped)` or the word `SKIPPED` (any case): with a leading
///   mark and the timing removed, the text is `SKIPPED` unless already present.
///
/// Cleaning drops a trailing `<number>s` timing and surrounding whitespace.
pub(super) fn parse_log_php_v1(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::rstrip(raw);
        if line.is_empty() {
            continue;
        }
        let stripped = pystr::strip(line);
        if ["___", "---", "Tests:", "Duration:"]
            .iter()
            .any(|prefix| stripped.starts_with(prefix))
        {
            continue;
        }
        if let Some(caps) = PHP_SUITE_FAIL.captures(line) {
            results.insert(php_clean(named(&caps, "name")), TestStatus::Failed);
            continue;
        }
        let first_name = |patterns: [&Regex; 2]| {
            patterns
                .iter()
                .find_map(|re| re.captures(line))
                .map(|caps| php_clean(named(&caps, "name")))
        };
        if let Some(name) = first_name([&PHP_FAIL, &PHP_FAIL_BARE]) {
            if !name.is_empty() {
                results.insert(name, TestStatus::Failed);
            }
            continue;
        }
        if let Some(name) = first_name([&PHP_SKIP, &PHP_SKIP_BARE]) {
            if !name.is_empty() {
                results.insert(name, TestStatus::Skipped);
            }
            continue;
        }
        if let Some(name) = first_name([&PHP_PASS, &PHP_PASS_BARE]) {
            if !name.is_empty() {
                set_default(&mut results, &name, TestStatus::Passed);
            }
            continue;
        }
        if PHP_SKIP_MARKER.is_match(line) {
            let token = php_clean(&PHP_LEADING_MARK.replace(line, ""));
            if !token.is_empty() && !results.contains_key(&token) {
                results.insert(token, TestStatus::Skipped);
            }
        }
    }
    Ok(results)
}

static RUBY_RESULT: Pattern =
    LazyLock::new(|| pyre::compile(r"^(.+?#.+?)\s+=\s+[\d.]+\s+s\s+=\s+([.FES])$"));

/// `parse_log_ruby_v2`: minitest's verbose lines `Class#test_name = 5.30 s = <mark>` (stripped):
/// `.` is `PASSED`, `F` and `E` are `FAILED`, `S` is `SKIPPED`; later lines overwrite.
pub(super) fn parse_log_ruby_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        let Some(caps) = RUBY_RESULT.captures(line) else {
            continue;
        };
        let status = match group(&caps, 2) {
            "." => TestStatus::Passed,
            "S" => TestStatus::Skipped,
            _ => TestStatus::Failed,
        };
        results.insert(group(&caps, 1), status);
    }
    Ok(results)
}

static JULIA_ROW: Pattern = LazyLock::new(|| pyre::compile(r"^(\s*)(.+?)\s+\|(.+)$"));

/// Python's `str.isdigit()` for one character: a decimal digit, or one of the other digits
/// (superscripts, subscripts, circled and parenthesised digits...) that `int()` refuses.
fn is_py_digit(c: char) -> bool {
    pystr::decimal_value(c).is_some() || is_other_digit(c)
}

/// Characters with Unicode `Numeric_Type=Digit` (not decimal): `isdigit()` but not `int()`.
fn is_other_digit(c: char) -> bool {
    matches!(c,
        '\u{B2}' | '\u{B3}' | '\u{B9}' | '\u{2070}' | '\u{2074}'..='\u{2079}'
        | '\u{2080}'..='\u{2089}' | '\u{2460}'..='\u{2468}' | '\u{2474}'..='\u{247C}'
        | '\u{2488}'..='\u{2490}' | '\u{24EA}' | '\u{24F5}'..='\u{24FD}' | '\u{24FF}'
        | '\u{2776}'..='\u{277E}' | '\u{2780}'..='\u{2788}' | '\u{278A}'..='\u{2792}'
        | '\u{1369}'..='\u{1371}' | '\u{19DA}' | '\u{10A40}'..='\u{10A43}'
        | '\u{10E60}'..='\u{10E68}' | '\u{11052}'..='\u{1105A}' | '\u{1F100}'..='\u{1F10A}')
}

/// `int(token)` for a token made of `isdigit()` characters: its canonical value, or
/// `ValueError` when it holds a digit that is not decimal.
fn julia_int(token: &str) -> Result<String, ParseError> {
    if token.chars().any(is_other_digit) {
        return Err(ParseError::new(
            PyException::ValueError,
            format!("int() of {token:?}"),
        ));
    }
    Ok(super::py_int(token))
}

/// `parse_log_julia`: Julia's `Test Summary:` tables. Lines before the first line containing
/// `Test Summary:` are ignored; such a line (any of them) starts the table, and when it
/// contains `| Pass` it also records whether the header (the text between its first and second
/// `|`) names `Fail` and `Error` columns. After that, each line `name | columns` (the name is
/// stripped) is read by its whole-number tokens (`str.isdigit()`; a time like `1.2s` is not
/// one); with fewer than two it is skipped. The last number is the total, and:
///
/// * two numbers: `ERROR` when the columns text starts with ten or more whitespace characters
///   (no pass count) or the first number differs from the total, else `PASSED`;
/// * three: when the middle number is non-zero, `FAILED` if the header had `Fail` but not
///   `Error`, else `ERROR`; otherwise `PASSED`;
/// * four or more: `ERROR` if the third number is non-zero, else `FAILED` if the second is,
///   else `PASSED`.
///
/// Later rows overwrite. A digit token that `int()` refuses (a superscript) raises
/// `ValueError` when it is read.
pub(super) fn parse_log_julia(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut in_summary = false;
    let mut has_fail = false;
    let mut has_error = false;
    for raw in splitlines(log) {
        if raw.contains("Test Summary:") {
            in_summary = true;
            if raw.contains("| Pass") {
                let header = raw.split('|').nth(1).unwrap_or("");
                has_fail = header.contains("Fail");
                has_error = header.contains("Error");
            }
            continue;
        }
        if !in_summary {
            continue;
        }
        let Some(caps) = JULIA_ROW.captures(raw) else {
            continue;
        };
        let name = pystr::strip(group(&caps, 2));
        let columns = group(&caps, 3);
        let numbers: Vec<&str> = pystr::split(columns)
            .into_iter()
            .filter(|token| token.chars().all(is_py_digit))
            .collect();
        if numbers.len() < 2 {
            continue;
        }
        let total = julia_int(numbers[numbers.len() - 1])?;
        let nonzero = |token: &str| julia_int(token).map(|value| value != "0");
        let status = match numbers.len() {
            2 => {
                let first = julia_int(numbers[0])?;
                if pystr::indent(columns) >= 10 || first != total {
                    TestStatus::Error
                } else {
                    TestStatus::Passed
                }
            }
            3 => {
                if nonzero(numbers[1])? {
                    if has_fail && !has_error {
                        TestStatus::Failed
                    } else {
                        TestStatus::Error
                    }
                } else {
                    TestStatus::Passed
                }
            }
            _ => {
                let failed = nonzero(numbers[1])?;
                if nonzero(numbers[2])? {
                    TestStatus::Error
                } else if failed {
                    TestStatus::Failed
                } else {
                    TestStatus::Passed
                }
            }
        };
        results.insert(name, status);
    }
    Ok(results)
}

static R_CONTEXT_PASS: Pattern = LazyLock::new(|| pyre::compile(r"^✔\s+\|[^|]+\|\s+(.+)$"));
static R_CONTEXT_FAIL: Pattern = LazyLock::new(|| pyre::compile(r"^✖\s+\|[^|]+\|\s+(.+)$"));
static R_FAILURE: Pattern = LazyLock::new(|| pyre::compile(r"^Failure\s+\([^)]+\):\s+(.+)$"));
static R_ERROR: Pattern = LazyLock::new(|| pyre::compile(r"^Error\s+\([^)]+\):\s+(.+)$"));
static R_TIMING: Pattern = LazyLock::new(|| pyre::compile(r"\s*\[\s*\d+(?:\.\d+)?\s*[a-zA-Z]+\]$"));

/// A name with its `[1.2s]`-style suffix removed, then stripped.
fn r_name(name: &str) -> String {
    pystr::strip(&R_TIMING.replace_all(pystr::strip(name), "")).to_owned()
}

/// `parse_log_r`: testthat's progress reporter. First pass over the stripped lines: a context
/// row `✔ | counts | name` is `PASSED`, `✖ | counts | name` is `FAILED`. Second pass: after a
/// line starting `── Failed tests ──` or `== Failed tests ==` and until one starting `[ FAIL`
/// or `══ Results ══`, `Failure (file:line): name` is `FAILED` and `Error (file:line): name`
/// is `ERROR`. Names lose a trailing `[1.2s]` timing; later entries overwrite.
pub(super) fn parse_log_r(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let lines = splitlines(log);
    for raw in &lines {
        let line = pystr::strip(raw);
        if let Some(caps) = R_CONTEXT_PASS.captures(line) {
            results.insert(r_name(group(&caps, 1)), TestStatus::Passed);
        } else if let Some(caps) = R_CONTEXT_FAIL.captures(line) {
            results.insert(r_name(group(&caps, 1)), TestStatus::Failed);
        }
    }
    let mut in_failed = false;
    for raw in &lines {
        let line = pystr::strip(raw);
        if line.starts_with("── Failed tests ──") || line.starts_with("== Failed tests ==")
        {
            in_failed = true;
            continue;
        }
        if in_failed && (line.starts_with("[ FAIL") || line.starts_with("══ Results ══")) {
            break;
        }
        if !in_failed || line.is_empty() {
            continue;
        }
        if let Some(caps) = R_FAILURE.captures(line) {
            results.insert(r_name(group(&caps, 1)), TestStatus::Failed);
        } else if let Some(caps) = R_ERROR.captures(line) {
            results.insert(r_name(group(&caps, 1)), TestStatus::Error);
        }
    }
    Ok(results)
}

static R_CHECK_DONE: Pattern =
    LazyLock::new(|| pyre::compile(r"^\* checking (.+?) \.\.\. ([A-Z]+)$"));
static R_CHECK_OPEN: Pattern = LazyLock::new(|| pyre::compile(r"^\* checking (.+?) \.\.\.$"));

/// An `R CMD check` verdict word, upper-cased.
fn r_check_status(word: &str) -> Option<TestStatus> {
    Some(match word {
        "OK" | "NOTE" | "NOTES" => TestStatus::Passed,
        "WARNING" | "WARNINGS" | "FAIL" | "FAILED" => TestStatus::Failed,
        "ERROR" | "ERRORS" => TestStatus::Error,
        "SKIPPED" => TestStatus::Skipped,
        _ => return None,
    })
}

/// `parse_log_r_v2`: `R CMD check` output. Over the stripped, non-blank lines:
/// `* checking <what> ... WORD` stores the verdict (`OK`/`NOTE(S)` pass, `WARNING(S)` and
/// `FAIL(ED)` fail, `ERROR(S)` error, `SKIPPED`; an unknown upper-case word passes).
/// `* checking <what> ...` with no verdict leaves the check open: each following line's first
/// word (after stripping `.`, `:` and `!` from the line's ends, upper-cased) closes it when it
/// is a verdict, and is otherwise passed over; while open, no other line is read. A line that
/// is nothing but `.`, `:` and `!` has no first word and raises `IndexError`. A check still
/// open at the end passes unless it already has a status.
pub(super) fn parse_log_r_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut pending: Option<&str> = None;
    for raw in splitlines(log) {
        let stripped = pystr::strip(raw);
        if stripped.is_empty() {
            continue;
        }
        if let Some(check) = pending {
            let trimmed = stripped.trim_matches(['.', ':', '!']);
            let Some(first) = pystr::split(trimmed).first().copied() else {
                return Err(ParseError::new(
                    PyException::IndexError,
                    "a line after an open check has no word",
                ));
            };
            if let Some(status) = r_check_status(&first.to_uppercase()) {
                results.insert(check, status);
                pending = None;
            }
            continue;
        }
        if let Some(caps) = R_CHECK_DONE.captures(stripped) {
            let status =
                r_check_status(&group(&caps, 2).to_uppercase()).unwrap_or(TestStatus::Passed);
            results.insert(group(&caps, 1), status);
            continue;
        }
        if let Some(caps) = R_CHECK_OPEN.captures(stripped) {
            pending = Some(group(&caps, 1));
        }
    }
    if let Some(check) = pending {
        set_default(&mut results, check, TestStatus::Passed);
    }
    Ok(results)
}

/// `parse_logs_r_junit`: testthat's JUnit reporter. The XML runs from the first `<?xml` to the
/// first `</testsuites>` after it (or the end); no `<?xml` or malformed XML gives an empty map.
/// Every `testsuite` below the root, and each of its `testcase` children, is keyed
/// `classname::name` (just `name` without a class) and is `FAILED` with a `failure` child, else
/// `ERROR` with an `error` child, else `SKIPPED` with a `skipped` child, else `PASSED`.
pub(super) fn parse_logs_r_junit(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let Some(start) = log.find("<?xml") else {
        return Ok(results);
    };
    let mut xml = &log[start..];
    if let Some(end) = xml.find("</testsuites>") {
        xml = &xml[..end + "</testsuites>".len()];
    }
    let Some(doc) = super::java::parse_xml(xml) else {
        return Ok(results);
    };
    for suite in doc.descendants_named(doc.root(), "testsuite") {
        for case in doc.children_named(suite, "testcase") {
            let name = doc.attribute(case, "name").unwrap_or("");
            let class = doc.attribute(case, "classname").unwrap_or("");
            let full_name = if class.is_empty() {
                name.to_owned()
            } else {
                format!("{class}::{name}")
            };
            let has = |child: &str| doc.children_named(case, child).next().is_some();
            let status = if has("failure") {
                TestStatus::Failed
            } else if has("error") {
                TestStatus::Error
            } else if has("skipped") {
                TestStatus::Skipped
            } else {
                TestStatus::Passed
            };
            results.insert(full_name, status);
        }
    }
    Ok(results)
}

static LEIN_TEST: Pattern = LazyLock::new(|| pyre::compile(r"^lein test (.+)$"));

/// `parse_log_lein`: Leiningen, per namespace. Over the stripped, non-blank lines:
/// `lein test <namespaces...>` marks each listed namespace `PASSED` (unless present) and makes
/// the last one current; `lein test :only ns/test` does so for `ns` (nothing after `:only`, or
/// an empty `ns`, clears the current namespace). `FAIL in ...` and `ERROR in ...` then mark
/// the current namespace `FAILED` or `ERROR`.
pub(super) fn parse_log_lein(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut current: Option<String> = None;
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = LEIN_TEST.captures(line) {
            let tokens = pystr::split(group(&caps, 1));
            current = None;
            if tokens.first() == Some(&":only") {
                let target = tokens[1..].join(" ");
                let base = pystr::strip(pystr::before_first(&target, "/"));
                if !base.is_empty() {
                    set_default(&mut results, base, TestStatus::Passed);
                    current = Some(base.to_owned());
                }
            } else {
                for token in tokens {
                    set_default(&mut results, token, TestStatus::Passed);
                    current = Some(token.to_owned());
                }
            }
            continue;
        }
        if let Some(namespace) = &current {
            if line.starts_with("FAIL in") {
                results.insert(namespace.as_str(), TestStatus::Failed);
            } else if line.starts_with("ERROR in") {
                results.insert(namespace.as_str(), TestStatus::Error);
            }
        }
    }
    Ok(results)
}

static SWIFT_RESULT: Pattern = LazyLock::new(|| {
    pyre::compile(r"^Test Case '([^']+)'\s+(passed|failed)\s+\([0-9.]+\s+seconds\)$")
});

/// `parse_log_swift`: XCTest's `Test Case 'Class.test' passed (0.01 seconds)` lines (stripped);
/// `passed` is `PASSED`, `failed` is `FAILED`, later lines overwrite.
pub(super) fn parse_log_swift(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        if let Some(caps) = SWIFT_RESULT.captures(pystr::strip(raw)) {
            let status = if group(&caps, 2) == "passed" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            results.insert(group(&caps, 1), status);
        }
    }
    Ok(results)
}

static CS_PASSED: Pattern = LazyLock::new(|| pyre::compile(r"^\s+Passed\s+(.+?)\s+\[.+?\]$"));
static CS_FAILED: Pattern = LazyLock::new(|| pyre::compile(r"^\s+Failed\s+(.+?)\s+\[.+?\]$"));
static CS_SKIPPED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s+Skipped\s+(.+?)(?:\s+\[.+?\])?$"));
static CS_XUNIT_FAIL: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[xUnit\.net\s+[\d:\.]+\]\s+(.+?)\s+\[FAIL\]$"));

/// `parse_log_csharp`: `dotnet test` output, per right-stripped line: `[xUnit.net 00:00:01.23]
/// <name> [FAIL]` and an indented `Failed <name> [time]` are `FAILED`, an indented
/// `Skipped <name> [time]` (the time optional) is `SKIPPED` (all overwrite), and an indented
/// `Passed <name> [time]` is `PASSED` unless the name already has a status.
pub(super) fn parse_log_csharp(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::rstrip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = CS_XUNIT_FAIL
            .captures(line)
            .or_else(|| CS_FAILED.captures(line))
        {
            results.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = CS_SKIPPED.captures(line) {
            results.insert(group(&caps, 1), TestStatus::Skipped);
        } else if let Some(caps) = CS_PASSED.captures(line) {
            set_default(&mut results, group(&caps, 1), TestStatus::Passed);
        }
    }
    Ok(results)
}
