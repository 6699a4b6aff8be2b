//! The JavaScript runners: Jest (verbose, through Calypso's wrapper, as a JSON transform),
//! Vitest, Karma, Mocha-style failure lists (Chart.js, marked, p5.js) and react-pdf's.

use super::{group, stripped_matches};
use crate::error::{ParseError, PyException};
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// `parse_log_calypso`: the log is cut at every ` ./node_modules/.bin/jest ` and each piece
/// after the first is read line by line (`split('\n')`) until a line starting with `Test
/// Suites` or `  ● `. The describe blocks are one stack kept across pieces.
///
/// A line whose stripped text starts with `✓` (`PASSED`) or `✕` (`FAILED`) is a result: when
/// the line has a `(12ms)` anywhere it must be whitespace, the mark, one whitespace character,
/// the title and `(12ms)` ending the line, else whitespace, the mark, one whitespace character
/// and the title; the key is the describe blocks and the title joined with ` - `, stripped (so
/// outside any block it starts with `- `). Any other line with leading whitespace (a blank
/// line too) is a describe block: entries indented as much or more are popped, then it is
/// pushed (stripped).
///
/// Raises `ValueError` when a result line does not have the required shape (no whitespace
/// before the mark, or a `(12ms)` not at the end).
pub(super) fn parse_log_calypso(log: &str) -> Result<StatusMap, ParseError> {
    let timing = py_search!(r"\(\d+ms\)");
    let passed_timed = py_match!(r"^\s+✓\s(.*)\(\d+ms\)$");
    let passed = py_match!(r"^\s+✓\s(.*)");
    let failed_timed = py_match!(r"^\s+✕\s(.*)\(\d+ms\)$");
    let failed = py_match!(r"^\s+✕\s(.*)");
    let mut map = StatusMap::new();
    let mut suite: Vec<(String, usize)> = Vec::new();
    for chunk in log.split(" ./node_modules/.bin/jest ").skip(1) {
        for line in chunk.split('\n') {
            if line.starts_with("Test Suites") || line.starts_with("  ● ") {
                break;
            }
            let stripped = pystr::strip(line);
            let timed = timing.is_match(line);
            let result = if stripped.starts_with('✓') {
                Some((
                    if timed { passed_timed } else { passed },
                    TestStatus::Passed,
                ))
            } else if stripped.starts_with('✕') {
                Some((
                    if timed { failed_timed } else { failed },
                    TestStatus::Failed,
                ))
            } else {
                None
            };
            if let Some((pattern, status)) = result {
                let caps = pattern.captures(line).ok_or_else(|| {
                    ParseError::new(
                        PyException::ValueError,
                        format!("a result line of an unexpected shape: {line:?}"),
                    )
                })?;
                let blocks: Vec<&str> = suite.iter().map(|(name, _)| name.as_str()).collect();
                let key = format!("{} - {}", blocks.join(" - "), group(&caps, 1));
                map.insert(pystr::strip(&key), status);
            } else {
                let indent = pystr::indent(line);
                if indent > 0 {
                    while suite.last().is_some_and(|&(_, last)| last >= indent) {
                        suite.pop();
                    }
                    suite.push((stripped.to_owned(), indent));
                }
            }
        }
    }
    Ok(map)
}

/// `parse_log_marked`: each line of `log.split('\n')` starting `N) ` (digits, `)`, one
/// whitespace character) puts the stripped rest `FAILED`. Only failures are reported.
pub(super) fn parse_log_marked(log: &str) -> Result<StatusMap, ParseError> {
    let failure = py_match!(r"^\d+\)\s(.*)");
    Ok(log
        .split('\n')
        .filter_map(|line| failure.captures(line))
        .map(|caps| (pystr::strip(group(&caps, 1)).to_owned(), TestStatus::Failed))
        .collect())
}

/// `parse_log_react_pdf`: each line of `log.split('\n')` starting `PASS` or `FAIL` and one
/// whitespace character puts the rest, without an optional final ` (1.2ms)` / ` (1.2 s)` and
/// right-stripped, as `PASSED` / `FAILED`.
pub(super) fn parse_log_react_pdf(log: &str) -> Result<StatusMap, ParseError> {
    let passed = py_match!(r"^PASS\s(.*?)(?:\s\([\d.]+\s*(?:ms|s)\))?$");
    let failed = py_match!(r"^FAIL\s(.*?)(?:\s\([\d.]+\s*(?:ms|s)\))?$");
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let found = passed
            .captures(line)
            .map(|caps| (caps, TestStatus::Passed))
            .or_else(|| failed.captures(line).map(|caps| (caps, TestStatus::Failed)));
        if let Some((caps, status)) = found {
            map.insert(pystr::rstrip(group(&caps, 1)), status);
        }
    }
    Ok(map)
}

/// `parse_log_jest` (`--verbose`): stripped lines `✓ title`, `✕ title` or `○ title`, with an
/// optional final ` (12 ms)` dropped, give `PASSED`, `FAILED` or `SKIPPED`. Titles alone are
/// the keys, so equal titles in different describe blocks share one entry.
pub(super) fn parse_log_jest(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$");
    Ok(stripped_matches(log, pattern)
        .map(|caps| {
            let status = match group(&caps, 1) {
                "✓" => TestStatus::Passed,
                "✕" => TestStatus::Failed,
                _ => TestStatus::Skipped,
            };
            (group(&caps, 2).to_owned(), status)
        })
        .collect())
}
