//! Runners that are not Python's, JavaScript's or C++'s: `go test`, ExUnit, Minitest and
//! test-unit, Redis's and jq's test suites, doctest's XML reporter, MicroPython's, googletest,
//! cucumber, RSpec (through a JSON transform), `cargo test`, PHPUnit's testdox, Maven, Ant,
//! Surefire summaries, Gradle, TAP and JUnit XML reports.

use super::{group, ignore_case, stripped_matches};
use crate::error::ParseError;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};
use crate::xml;

/// `parse_test_report`: one JUnit XML document. Every `testcase` element below the root (the
/// root itself excluded) is keyed `{classname}::{name}` (a missing attribute reads `None`) and
/// is `FAILED` with a `failure` child, else `SKIPPED` with a `skipped` child, else `ERROR` with
/// an `error` child, else `PASSED` (children only, not deeper descendants). A later test case
/// with the same key overwrites the status in place. A document ElementTree cannot parse gives
/// an empty map (the error is caught, never raised).
pub(super) fn parse_test_report(xml_content: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    let Ok(document) = xml::parse(xml_content) else {
        return Ok(map);
    };
    for case in document.descendants_named(document.root(), "testcase") {
        let attribute = |name| document.attribute(case, name).unwrap_or("None");
        let has = |child| document.children_named(case, child).next().is_some();
        let status = if has("failure") {
            TestStatus::Failed
        } else if has("skipped") {
            TestStatus::Skipped
        } else if has("error") {
            TestStatus::Error
        } else {
            TestStatus::Passed
        };
        map.insert(
            format!("{}::{}", attribute("classname"), attribute("name")),
            status,
        );
    }
    Ok(map)
}

/// `parse_combined_test_reports`: the JUnit XML documents printed one after another in the
/// log. From the start, each `<?xml` up to and including the first `</testsuites>` after it is
/// one document, read with `parse_test_report` and merged into the result (a later report's
/// status wins, the first report's order stays); scanning resumes after that `</testsuites>`.
/// An `<?xml` with no `</testsuites>` after it is skipped (scanning resumes just past the
/// `<?xml`), and a document that does not parse adds nothing.
pub(super) fn parse_combined_test_reports(content: &str) -> Result<StatusMap, ParseError> {
    const START: &str = "<?xml";
    const END: &str = "</testsuites>";
    let mut combined = StatusMap::new();
    let mut pos = 0;
    while pos < content.len() {
        let Some(start) = content[pos..].find(START).map(|at| pos + at) else {
            break;
        };
        let Some(end) = content[start..].find(END).map(|at| start + at + END.len()) else {
            pos = start + START.len();
            continue;
        };
        for (name, status) in parse_test_report(&content[start..end])?.iter() {
            combined.insert(name, status.clone());
        }
        pos = end;
    }
    Ok(combined)
}

/// `parse_log_elixir`: ExUnit's `--trace` output, over `log.splitlines()` stripped (blank lines
/// skipped), first form that matches:
/// - `* test NAME (skipped) [L#12]` sets `NAME` `SKIPPED`;
/// - `1) test NAME (Module)` (a failure header) sets `NAME` `FAILED`;
/// - `* test NAME (12.3ms) [L#12]` and `* test NAME [L#12]` set `NAME` `PASSED` only when it
///   has no status yet (a failure reported before keeps `FAILED`).
pub(super) fn parse_log_elixir(log: &str) -> Result<StatusMap, ParseError> {
    let skipped = py_match!(r"^\*\s+test\s+(.*?)\s+\(skipped\)\s+\[L#\d+\]$");
    let timed = py_match!(r"^\*\s+test\s+(.*?)\s+\([0-9]+(?:\.[0-9]+)?ms\)\s+\[L#\d+\]$");
    let basic = py_match!(r"^\*\s+test\s+(.*?)\s+\[L#\d+\]$");
    let failure = py_match!(r"^\d+\)\s+test\s+(.*?)\s+\([^)]+\)$");
    let mut map = StatusMap::new();
    for raw in pystr::splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = skipped.captures(line) {
            map.insert(group(&caps, 1), TestStatus::Skipped);
        } else if let Some(caps) = failure.captures(line) {
            map.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = timed.captures(line).or_else(|| basic.captures(line)) {
            let name = group(&caps, 1);
            if !map.contains_key(name) {
                map.insert(name, TestStatus::Passed);
            }
        }
    }
    Ok(map)
}

/// `parse_log_ruby_v1`: Minitest's verbose `rake test` output over `log.splitlines()`, each
/// line right-stripped (blank lines and `Finished in ` lines skipped).
///
/// A line not starting with a space that is one identifier starting with an uppercase ASCII
/// letter (`[A-Z][A-Za-z0-9_]*`) becomes the current suite. A status line is optional
/// whitespace, a name starting with `test` that has no uppercase ASCII letter and no newline,
/// whitespace, a status token (`PASS`, `PASSED`, `FAIL`, `FAILURE`, `ERROR`, `SKIP`,
/// `SKIPPED`) and optionally a duration `(0.01s)`; its key is `Suite::name` once a suite is
/// known, else the name. A repeated key is overwritten only by a more severe status (`PASSED`
/// and `SKIPPED` rank 0, `FAILED` 1, `ERROR` 2), so a later `SKIPPED` never replaces `PASSED`.
pub(super) fn parse_log_ruby_v1(log: &str) -> Result<StatusMap, ParseError> {
    // Upstream's pattern has a `\b` after the status token; what may follow the token (a
    // duration after whitespace, or the end) always makes that a word boundary, so it is left
    // out here.
    let status_line = py_match!(
        r"^\s*(test[^A-Z\n]+?)\s+(PASS|PASS(?:ED)?|FAIL|FAILURE|ERROR|SKIP|SKIPPED)(?:\s*\([0-9.]+s\))?$"
    );
    let suite_line = py_match!(r"^[A-Z][A-Za-z0-9_]*$");
    let rank = |status: TestStatus| match status {
        TestStatus::Error => 2,
        TestStatus::Failed => 1,
        _ => 0,
    };
    let mut map = StatusMap::new();
    let mut suite: Option<&str> = None;
    for raw in pystr::splitlines(log) {
        let line = pystr::rstrip(raw);
        if line.is_empty() || line.starts_with("Finished in ") {
            continue;
        }
        if !line.starts_with(' ') && suite_line.is_match(line) {
            suite = Some(line);
            continue;
        }
        let Some(caps) = status_line.captures(line) else {
            continue;
        };
        let name = pystr::strip(group(&caps, 1));
        let key = match suite {
            Some(suite) => format!("{suite}::{name}"),
            None => name.to_owned(),
        };
        let status = match group(&caps, 2) {
            "PASS" | "PASSED" => TestStatus::Passed,
            "FAIL" | "FAILURE" => TestStatus::Failed,
            "SKIP" | "SKIPPED" => TestStatus::Skipped,
            _ => TestStatus::Error,
        };
        let replaces = match map.get(&key).and_then(|old| old.known()) {
            None => true,
            Some(old) => rank(status) > rank(old),
        };
        if replaces {
            map.insert(key, status);
        }
    }
    Ok(map)
}

/// `parse_log_redis`: stripped lines `[ok]: name`, `[err]: name`, `[skip]: name` or
/// `[ignore]: name`, with an optional ` (12 ms)` duration dropped, give `PASSED`, `FAILED`,
/// `SKIPPED` and `SKIPPED`. A failed name also loses a final ` in <file>` (whitespace, `in`,
/// whitespace, one non-space run at the end).
pub(super) fn parse_log_redis(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$");
    let location = py_search!(r"\s+in\s+\S+$");
    let mut map = StatusMap::new();
    for caps in stripped_matches(log, pattern) {
        let name = group(&caps, 2);
        match group(&caps, 1) {
            "ok" => map.insert(name, TestStatus::Passed),
            "err" => map.insert(location.replace(name, ""), TestStatus::Failed),
            _ => map.insert(name, TestStatus::Skipped),
        }
    }
    Ok(map)
}

/// `parse_log_phpunit` (`--testdox`), on the raw lines of `log.split('\n')`: a line
/// `Word... (Class\Name)` (starting with a word character, ending with a parenthesised part)
/// sets the current suite to the text before the last ` (`; a line of optional whitespace,
/// `✔`, `✘` or `↩`, optional whitespace and a name keys `{suite} > {name}` (`None` before any
/// suite) as `PASSED`, `FAILED` or `SKIPPED`. The name loses a trailing timing `[1.34 ms]` /
/// `[2 s]` (any case, spaces allowed inside) and is then stripped.
pub(super) fn parse_log_phpunit(log: &str) -> Result<StatusMap, ParseError> {
    use std::sync::LazyLock;
    let suite_line = py_match!(r"^(\w.+) \(.+\)$");
    let test_line = py_match!(r"^\s*([✔✘↩])\s*(.*)$");
    static TIMING: LazyLock<regex::Regex> = LazyLock::new(|| {
        crate::pyre::compile(&format!(
            r"\s*\[\s*\d+(?:\.\d+)?\s*(?:{}|{})\s*\]\s*$",
            ignore_case("ms"),
            ignore_case("s")
        ))
    });
    let mut map = StatusMap::new();
    let mut suite: Option<&str> = None;
    for line in log.split('\n') {
        if let Some(caps) = suite_line.captures(line) {
            suite = Some(group(&caps, 1));
            continue;
        }
        let Some(caps) = test_line.captures(line) else {
            continue;
        };
        let name = TIMING.replace(group(&caps, 2), "");
        let key = format!("{} > {}", suite.unwrap_or("None"), pystr::strip(&name));
        let status = match group(&caps, 1) {
            "✔" => TestStatus::Passed,
            "✘" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        map.insert(key, status);
    }
    Ok(map)
}

/// `parse_log_maven` (each test run on its own under `set -x`): a stripped line containing
/// `-Dtest=NAME` makes the non-space run `NAME` the current test (the last `-Dtest=` on the
/// line that is followed by one), and a stripped line ending in `BUILD SUCCESS` / `BUILD
/// FAILURE` sets the current test `PASSED` / `FAILED` (before any `-Dtest=` the key is
/// `---NO TEST NAME FOUND YET---`). One line can do both.
pub(in crate::rebench) fn parse_log_maven(log: &str) -> Result<StatusMap, ParseError> {
    let test_name = py_match!(r"^.*-Dtest=(\S+).*$");
    let result = py_match!(r"^.*BUILD (SUCCESS|FAILURE)$");
    let mut map = StatusMap::new();
    let mut current = String::from("---NO TEST NAME FOUND YET---");
    for raw in log.split('\n') {
        let line = pystr::strip(raw);
        if let Some(caps) = test_name.captures(line) {
            current = group(&caps, 1).to_owned();
        }
        if let Some(caps) = result.captures(line) {
            let status = if group(&caps, 1) == "SUCCESS" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            map.insert(current.clone(), status);
        }
    }
    Ok(map)
}

/// `parse_logs_kotlin_junit` (Surefire's per-class summaries), over `log.splitlines()`
/// stripped: `Running CLASS` makes `CLASS` current; a following `Tests run: N, Failures: F,
/// Errors: E, Skipped: S` line gives it `FAILED` when `F` or `E` is non-zero, else `SKIPPED`
/// when `S` is, else `PASSED`, and forgets it. A summary with no current class is ignored.
pub(super) fn parse_logs_kotlin_junit(log: &str) -> Result<StatusMap, ParseError> {
    let running = py_match!(r"^Running\s+(.+)$");
    let summary = py_match!(
        r"^Tests run:\s+(\d+),\s+Failures:\s+(\d+),\s+Errors:\s+(\d+),\s+Skipped:\s+(\d+)"
    );
    let mut map = StatusMap::new();
    let mut current: Option<&str> = None;
    for raw in pystr::splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = running.captures(line) {
            current = Some(group(&caps, 1));
        } else if let Some(caps) = summary.captures(line)
            && let Some(class) = current.take()
        {
            let nonzero = |at| !pystr::digits_are_zero(group(&caps, at));
            let status = if nonzero(2) || nonzero(3) {
                TestStatus::Failed
            } else if nonzero(4) {
                TestStatus::Skipped
            } else {
                TestStatus::Passed
            };
            map.insert(class, status);
        }
    }
    Ok(map)
}

/// `parse_log_gradle_custom`: stripped lines `name PASSED` / `name FAILED`, optionally with a
/// duration `(1.5s)`, where the name does not start with `>`, give `PASSED` / `FAILED`.
pub(super) fn parse_log_gradle_custom(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^([^>].+?)\s+(PASSED|FAILED)(?:\s+\(\d+(?:\.\d+)?s\))?$");
    Ok(stripped_matches(log, pattern)
        .map(|caps| {
            let status = if group(&caps, 2) == "PASSED" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            (group(&caps, 1).to_owned(), status)
        })
        .collect())
}
