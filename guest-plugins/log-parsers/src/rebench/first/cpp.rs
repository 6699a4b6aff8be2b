//! The C++ runners (`parse_log_cpp` reads pytest's output of C extensions, the others ctest,
//! homegrown runners and Botan's) and Neovim's Lua test output (`parse_lue_nvim`, upstream's
//! spelling).

use std::sync::LazyLock;

use regex::Regex;

use super::{group, has_bounded_word, ignore_case};
use crate::error::ParseError;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// `parse_log_cpp`, over `log.splitlines()` stripped (blank lines skipped). Once a line starts
/// with pytest's 99-column `=== FAILURES ===` banner, every later line is only checked for a
/// `___________________________ NAME ___________________________` header (27 underscores each
/// side), which sets `NAME` `FAILED`. Before it, the first of these that matches wins: text
/// followed by whitespace and `PASSED` anywhere on the line (`PASSED` only if the name has no
/// status yet), then `FAILED`, `SKIPPED`, `ERROR` (each overwriting). The name is the text
/// before the first such status word, cut to the last piece of splitting it at `::` from the left.
pub(super) fn parse_log_cpp(log: &str) -> Result<StatusMap, ParseError> {
    const FAILURES_BANNER: &str =
        "=================================== FAILURES ===================================";
    static STATUS_LINES: LazyLock<[(Regex, TestStatus); 4]> = LazyLock::new(|| {
        [
            ("PASSED", TestStatus::Passed),
            ("FAILED", TestStatus::Failed),
            ("SKIPPED", TestStatus::Skipped),
            ("ERROR", TestStatus::Error),
        ]
        .map(|(word, status)| {
            (
                crate::pyre::compile_match(&format!(r"^(.*?)\s+{word}")),
                status,
            )
        })
    });
    let header = py_match!(r"^___________________________ (.*?) ___________________________$");
    let mut map = StatusMap::new();
    let mut in_failures = false;
    for raw in pystr::splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if line.starts_with(FAILURES_BANNER) {
            in_failures = true;
            continue;
        }
        if in_failures {
            if let Some(caps) = header.captures(line) {
                map.insert(group(&caps, 1), TestStatus::Failed);
            }
            continue;
        }
        let found = STATUS_LINES
            .iter()
            .find_map(|(pattern, status)| pattern.captures(line).map(|caps| (caps, *status)));
        let Some((caps, status)) = found else {
            continue;
        };
        let full = group(&caps, 1);
        // `split("::")[-1]`: pieces found from the left, so `a:::b` ends in `:b`.
        let name = full.split("::").last().unwrap_or(full);
        if status != TestStatus::Passed || !map.contains_key(name) {
            map.insert(name, status);
        }
    }
    Ok(map)
}

/// `parse_log_cpp_v2`, over `log.splitlines()` stripped: `Test NAME passed` sets `NAME`
/// `PASSED` unless it already has a status; `Test NAME failed` and `Test NAME skipped` set
/// `FAILED` and `SKIPPED` (lower-case words ending the line, whitespace around the name).
pub(super) fn parse_log_cpp_v2(log: &str) -> Result<StatusMap, ParseError> {
    let passed = py_match!(r"^Test\s+(.*?)\s+passed$");
    let failed = py_match!(r"^Test\s+(.*?)\s+failed$");
    let skipped = py_match!(r"^Test\s+(.*?)\s+skipped$");
    let mut map = StatusMap::new();
    for raw in pystr::splitlines(log) {
        let line = pystr::strip(raw);
        if let Some(caps) = passed.captures(line) {
            let name = group(&caps, 1);
            if !map.contains_key(name) {
                map.insert(name, TestStatus::Passed);
            }
        } else if let Some(caps) = failed.captures(line) {
            map.insert(group(&caps, 1), TestStatus::Failed);
        } else if let Some(caps) = skipped.captures(line) {
            map.insert(group(&caps, 1), TestStatus::Skipped);
        }
    }
    Ok(map)
}

const SKIP_WORDS: &[&str] = &["skipped"];
const FAIL_WORDS: &[&str] = &["failed", "fail", "failure"];
const PASS_WORDS: &[&str] = &["ok", "passed"];

/// `parse_log_cpp_v3`, over `log.splitlines()` stripped (blank lines skipped), first that
/// applies:
/// 1. Botan's group summary `NAME ran N tests in 1.5 msec TAIL` (`ran`, `tests`, `in`, `msec` /
///    `sec` in any case): the key drops the timing, `NAME ran N tests TAIL` (name and tail
///    stripped), and is `FAILED` when the tail has the word `failed` in any case, else
///    `PASSED`;
/// 2. `[3/10] NAME ... WORD` (the counter optional, `WORD` a run of word characters ending the
///    line): the stripped name is `SKIPPED` when the upper-cased word or the line has the word
///    `SKIPPED`, else `FAILED` for `FAILED`, `FAIL` or `FAILURE`, else `PASSED` for `OK` or
///    `PASSED` (all as whole words in any case), else `ERROR`;
/// 3. otherwise the whole line is the key, with the same word checks on the line (`SKIPPED`,
///    then the failure words, then the pass words; a line with none is not recorded).
pub(super) fn parse_log_cpp_v3(log: &str) -> Result<StatusMap, ParseError> {
    static BOTAN: LazyLock<Regex> = LazyLock::new(|| {
        crate::pyre::compile_match(&format!(
            r"^(.*?)\s+{ran}\s+(\d+)\s+{tests}\s+{in_}\s+[\d.]+\s+(?:{msec}|{sec})\s+(.+)$",
            ran = ignore_case("ran"),
            tests = ignore_case("tests"),
            in_ = ignore_case("in"),
            msec = ignore_case("msec"),
            sec = ignore_case("sec"),
        ))
    });
    let result_line = py_match!(r"^(?:\[[0-9]+/[0-9]+\]\s*)?(.*?)\s*\.\.\.\s*(\w+)$");
    let mut map = StatusMap::new();
    for raw in pystr::splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = BOTAN.captures(line) {
            let tail = pystr::strip(group(&caps, 3));
            let key = format!(
                "{} ran {} tests {tail}",
                pystr::strip(group(&caps, 1)),
                group(&caps, 2)
            );
            let status = if has_bounded_word(tail, &["failed"]) {
                TestStatus::Failed
            } else {
                TestStatus::Passed
            };
            map.insert(key, status);
            continue;
        }
        if let Some(caps) = result_line.captures(line) {
            let token = group(&caps, 2).to_uppercase();
            let either =
                |words: &[&str]| has_bounded_word(&token, words) || has_bounded_word(line, words);
            let status = if either(SKIP_WORDS) {
                TestStatus::Skipped
            } else if either(FAIL_WORDS) {
                TestStatus::Failed
            } else if either(PASS_WORDS) {
                TestStatus::Passed
            } else {
                TestStatus::Error
            };
            map.insert(pystr::strip(group(&caps, 1)), status);
            continue;
        }
        if has_bounded_word(line, SKIP_WORDS) {
            map.insert(line, TestStatus::Skipped);
        } else if has_bounded_word(line, FAIL_WORDS) {
            map.insert(line, TestStatus::Failed);
        } else if has_bounded_word(line, PASS_WORDS) {
            map.insert(line, TestStatus::Passed);
        }
    }
    Ok(map)
}

/// `parse_log_cpp_v4` (ctest's summary), over the non-blank lines of `log.splitlines()`, not
/// stripped: `  1/10 Test  #1: NAME .......   Passed    0.01 sec` (words in any case, the
/// status a whole word) gives the stripped name `PASSED` for `Passed`, `FAILED` for `Failed` or
/// `Timeout`, and `SKIPPED` otherwise (`Skipped`, or a spelling whose upper case is none of
/// those, such as one with a dotted capital I).
pub(super) fn parse_log_cpp_v4(log: &str) -> Result<StatusMap, ParseError> {
    static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
        // Upstream ends with `\b`; the status words end in a word character, so that is "then the
        // end or a non-word character", and nothing of the match is used past the status.
        crate::pyre::compile_match(&format!(
            r"^\s*\d+/\d+\s+{test}\s+#\d+:\s+(.+?)\s+\.+\s+({passed}|{failed}|{skipped}|{timeout})(?:\z|\W)",
            test = ignore_case("Test"),
            passed = ignore_case("Passed"),
            failed = ignore_case("Failed"),
            skipped = ignore_case("Skipped"),
            timeout = ignore_case("Timeout"),
        ))
    });
    let mut map = StatusMap::new();
    for line in pystr::splitlines(log) {
        let Some(caps) = SUMMARY.captures(line) else {
            continue;
        };
        let status = match pystr::strip(group(&caps, 2)).to_uppercase().as_str() {
            "PASSED" => TestStatus::Passed,
            "FAILED" | "TIMEOUT" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        map.insert(pystr::strip(group(&caps, 1)), status);
    }
    Ok(map)
}

/// `parse_lue_nvim` (plenary.nvim's busted-style output), over the non-blank lines of
/// `log.splitlines()`, each with colour codes `ESC[...m` removed and right-stripped. A line
/// whose text before its first tab has a `:` and that has no `||` anywhere is a summary
/// counter and is skipped. Then `Fail || NAME` / `Failed || NAME` sets the stripped `NAME`
/// `FAILED`; `Skip || NAME` / `Skipped || NAME` (any case) sets it `SKIPPED` and `Success ||
/// NAME` `PASSED`, both only when it has no status yet.
pub(super) fn parse_lue_nvim(log: &str) -> Result<StatusMap, ParseError> {
    let colour = py_search!(r"\x1b\[[0-9;]*m");
    let success = py_match!(r"^Success\s*\|\|\s*(.+?)\s*$");
    let fail = py_match!(r"^(?:Fail|Failed)\s*\|\|\s*(.+?)\s*$");
    static SKIP: LazyLock<Regex> = LazyLock::new(|| {
        crate::pyre::compile_match(&format!(
            r"^(?:{}|{})\s*\|\|\s*(.+?)\s*$",
            ignore_case("Skip"),
            ignore_case("Skipped")
        ))
    });
    let mut map = StatusMap::new();
    for raw in pystr::splitlines(log) {
        if pystr::strip(raw).is_empty() {
            continue;
        }
        let uncoloured = colour.replace_all(raw, "");
        let line = pystr::rstrip(&uncoloured);
        if pystr::before_first(line, "\t").contains(':') && !line.contains("||") {
            continue;
        }
        if let Some(caps) = fail.captures(line) {
            map.insert(pystr::strip(group(&caps, 1)), TestStatus::Failed);
            continue;
        }
        let tentative = SKIP
            .captures(line)
            .map(|caps| (caps, TestStatus::Skipped))
            .or_else(|| {
                success
                    .captures(line)
                    .map(|caps| (caps, TestStatus::Passed))
            });
        if let Some((caps, status)) = tentative {
            let name = pystr::strip(group(&caps, 1));
            if !map.contains_key(name) {
                map.insert(name, status);
            }
        }
    }
    Ok(map)
}
