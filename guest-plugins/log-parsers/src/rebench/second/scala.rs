//! ScalaTest under sbt, and the MUnit-style `+`/`x` reporter.

use std::sync::LazyLock;

use super::{Pattern, group, set_default, splitlines};
use crate::error::ParseError;
use crate::pyre;
use crate::pystr;
use crate::status::{Status, StatusMap, TestStatus};

static SCALA_FAILED: Pattern = LazyLock::new(|| {
    pyre::compile(r"^\[info\]\s+-\s+(.*?)\s+\*\*\*\s+FAILED\s+\*\*\*\s+\([^)]+\)$")
});
static SCALA_CANCELED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[info\]\s+-\s+(.*?)\s+!!!\s+CANCELED\s+!!!\s+\([^)]+\)$"));
static SCALA_IGNORED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[info\]\s+-\s+(.*?)\s+!!!\s+IGNORED\s+!!!"));
static SCALA_PASSED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[info\]\s+-\s+(.*?)\s+\([^)]+\)$"));

/// `parse_log_scala`: ScalaTest's `[info] - name (12 milliseconds)` lines (stripped), first
/// match wins: `name *** FAILED *** (time)` is `FAILED`; `name !!! CANCELED !!! (time)` and
/// `name !!! IGNORED !!!...` are `SKIPPED` (these overwrite); `name (time)` is `PASSED` unless
/// present. A line without a parenthesised time at its end (the usual `IGNORED` aside) is not
/// read.
pub(super) fn parse_log_scala(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = SCALA_FAILED.captures(line) {
            results.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = SCALA_CANCELED
            .captures(line)
            .or_else(|| SCALA_IGNORED.captures(line))
        {
            results.insert(group(&caps, 1), TestStatus::Skipped);
        } else if let Some(caps) = SCALA_PASSED.captures(line) {
            set_default(&mut results, group(&caps, 1), TestStatus::Passed);
        }
    }
    Ok(results)
}

/// SGR codes, with or without their ESC (`[32m` left behind by a stripped log).
static V2_COLOURS: Pattern = LazyLock::new(|| pyre::compile(r"\x1b\[[0-9;]*m|\[(?:[0-9]{1,2}m)"));
static V2_PASSED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\+\s+(.*?)\s+[\d.]+[mμn]?s\s*$"));
static V2_FAILED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*x\s+(.*?)\s+[\d.]+[mμn]?s\s*$"));
static V2_PASSED_COLOURED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s*\+\s+\[0m\[32m(.*?)\[0m\s+\[90m[\d.]+[mμn]?s\[0m\s*$"));
static V2_FAILED_COLOURED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s*x\s+\[0m\[31m(.*?)\[0m\s+\[90m[\d.]+[mμn]?s\[0m\s*$"));

/// `parse_log_scala_v2`: MUnit-style `+ name 0.01s` (passed) and `x name 0.01s` (failed)
/// lines. Each stripped line is tried as written against the colour-code-bearing shapes
/// (`+ [0m[32mname[0m [90m0.01s[0m`, which only match once a leading ESC sequence is stripped
/// off), and with its colour codes removed against the plain ones; failures are tried first.
/// Later lines overwrite.
pub(super) fn parse_log_scala_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        let clean = V2_COLOURS.replace_all(line, "");
        if let Some(caps) = V2_FAILED_COLOURED.captures(line) {
            results.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = V2_FAILED.captures(&clean) {
            results.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = V2_PASSED_COLOURED.captures(line) {
            results.insert(group(&caps, 1), TestStatus::Passed);
        } else if let Some(caps) = V2_PASSED.captures(&clean) {
            results.insert(group(&caps, 1), TestStatus::Passed);
        }
    }
    Ok(results)
}

static V3_TEST: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[info\]\s+-\s+(.*?)(?:\s+\*{3}\s+([A-Z]+)\s+\*{3})?$"));
static V3_SUITE: Pattern = LazyLock::new(|| pyre::compile(r"^\[info\]\s+([^\-].*)$"));
static V3_TIMING: Pattern = LazyLock::new(|| pyre::compile(r"\s*\(\d+\s+\w+\)$"));

/// Texts that mark an `[info]` line as sbt chatter rather than a suite name.
const NOT_A_SUITE: [&str; 10] = [
    "Run completed",
    "Total number",
    "Suites:",
    "Tests:",
    "All tests",
    "compiling",
    "done compiling",
    "loading",
    "welcome to",
    "set current",
];

/// `parse_log_scala_v3`: ScalaTest with suite names. Only stripped lines starting `[info]` are
/// read. One starting `[info] -` is a test: `- name` (a trailing `(12 milliseconds)` removed)
/// optionally followed by `*** WORD ***`, keyed `suite: name` once a suite is known. The word
/// maps `PASSED`, `FAILED`, `ERROR`/`ABORTED` (error), `SKIPPED`/`IGNORED`/`CANCELED`/
/// `CANCELLED`/`PENDING` (skipped), and any other word is stored as is (all overwrite); with
/// no word the test is `PASSED` unless present. Any other `[info]` line whose text does not
/// start with `-` becomes the current suite, unless it is empty or mentions sbt chatter.
pub(super) fn parse_log_scala_v3(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut suite: Option<&str> = None;
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if !line.starts_with("[info]") {
            continue;
        }
        if line.starts_with("[info] -") {
            let Some(caps) = V3_TEST.captures(line) else {
                continue;
            };
            let name = pystr::strip(group(&caps, 1));
            let name = V3_TIMING.replace_all(name, "");
            let full_name = match suite {
                Some(suite) => format!("{suite}: {name}"),
                None => name.into_owned(),
            };
            match caps.get(2).map(|m| m.as_str()) {
                Some(word) => {
                    let status = match word {
                        "PASSED" => Status::Known(TestStatus::Passed),
                        "FAILED" => Status::Known(TestStatus::Failed),
                        "ERROR" | "ABORTED" => Status::Known(TestStatus::Error),
                        "SKIPPED" | "IGNORED" | "CANCELED" | "CANCELLED" | "PENDING" => {
                            Status::Known(TestStatus::Skipped)
                        }
                        other => Status::from_token(other),
                    };
                    results.insert(full_name, status);
                }
                None => set_default(&mut results, &full_name, TestStatus::Passed),
            }
        } else if let Some(caps) = V3_SUITE.captures(line) {
            let candidate = pystr::strip(group(&caps, 1));
            if !candidate.is_empty() && !NOT_A_SUITE.iter().any(|word| candidate.contains(word)) {
                suite = Some(candidate);
            }
        }
    }
    Ok(results)
}
