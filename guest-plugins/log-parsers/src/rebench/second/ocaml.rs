//! OCaml: Alcotest/QCheck result lines, dune's `Running[N]`/`Output[N]` traces, bracketed
//! status lines, and ocamlbuild-style `PASSED name` lines.

use std::sync::LazyLock;

use super::{
    ANSI_COLOR_DELIM, Pattern, ansi_escape, named, py_int, set_default, splitlines,
    update_by_precedence,
};
use crate::error::ParseError;
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static ALCOTEST: Pattern = LazyLock::new(|| {
    pyre::compile(r"^\s*\[(?P<status>[A-Z]+)\]\s+(?P<suite>.*?)\s+(?P<index>\d+)\s+(?P<name>.+)$")
});

/// `parse_log_ocaml`: Alcotest lines `[OK] suite 3 description` (right-stripped), keyed by the
/// non-empty parts of suite, index and description joined with spaces. `OK`/`PASS` are `PASSED`
/// unless present; `FAIL`/`FAILED` are `FAILED`, `SKIP`/`SKIPPED`/`TODO` `SKIPPED`, and
/// `ERROR`, `ERR` or any other capitalised word `ERROR` (these overwrite).
pub(super) fn parse_log_ocaml(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let Some(caps) = ALCOTEST.captures(pystr::rstrip(raw)) else {
            continue;
        };
        let parts = [
            pystr::strip(named(&caps, "suite")),
            pystr::strip(named(&caps, "index")),
            pystr::strip(named(&caps, "name")),
        ];
        let parts: Vec<&str> = parts.into_iter().filter(|part| !part.is_empty()).collect();
        let name = parts.join(" ");
        let status = match named(&caps, "status") {
            "OK" | "PASS" => TestStatus::Passed,
            "FAIL" | "FAILED" => TestStatus::Failed,
            "SKIP" | "SKIPPED" | "TODO" => TestStatus::Skipped,
            _ => TestStatus::Error,
        };
        if status == TestStatus::Passed {
            set_default(&mut results, &name, status);
        } else {
            results.insert(name, status);
        }
    }
    Ok(results)
}

static DUNE_RUNNING: Pattern =
    LazyLock::new(|| pyre::compile(r"^Running\[(?P<id>\d+)\]:\s+\((?P<command>.+)\)$"));
static DUNE_OUTPUT: Pattern = LazyLock::new(|| pyre::compile(r"^Output\[(?P<id>\d+)]:"));

/// The test a dune command runs: the last `&&`-separated command, stripped, without a leading
/// `exec ` and `./`; the file name of its first word (empty when there is none).
fn dune_test_name(command: &str) -> &str {
    let mut command = pystr::strip(command.rsplit("&&").next().unwrap_or(""));
    if let Some(rest) = command.strip_prefix("exec ") {
        command = pystr::strip(rest);
    }
    if let Some(rest) = command.strip_prefix("./") {
        command = rest;
    }
    let binary = pystr::split(command).first().copied().unwrap_or("");
    binary.rsplit('/').next().unwrap_or("")
}

/// `parse_log_ocaml_v2`: dune's action trace. Per stripped, non-blank line:
/// `Running[N]: (command)` names run N after the test binary the command runs (or `run_N`) and
/// clears the active test; `Output[N]:` makes run N's test active (an unknown run clears it).
/// With a test active, every other line marks it as having output and, upper-cased, ranks it
/// (by the OCaml precedence) `FAILED` if it mentions `FAIL`, `ERROR`, `EXCEPTION`, `CRASH` or
/// `FATAL`, else `SKIPPED` if it mentions `SKIP`, else `PASSED` if it is exactly `OK`. At the
/// end, every test with output that has no status is `PASSED`.
pub(super) fn parse_log_ocaml_v2(log: &str) -> Result<StatusMap, ParseError> {
    const FAIL_WORDS: [&str; 5] = ["FAIL", "ERROR", "EXCEPTION", "CRASH", "FATAL"];
    let mut results = StatusMap::new();
    let mut runs: Vec<(String, String)> = Vec::new();
    let mut active: Option<String> = None;
    let mut with_output: Vec<String> = Vec::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = DUNE_RUNNING.captures(line) {
            let id = py_int(named(&caps, "id"));
            let name = dune_test_name(named(&caps, "command"));
            let name = if name.is_empty() {
                format!("run_{id}")
            } else {
                name.to_owned()
            };
            match runs.iter_mut().find(|(known, _)| *known == id) {
                Some((_, known_name)) => *known_name = name,
                None => runs.push((id, name)),
            }
            active = None;
            continue;
        }
        if let Some(caps) = DUNE_OUTPUT.captures(line) {
            let id = py_int(named(&caps, "id"));
            active = runs
                .iter()
                .find(|(known, _)| *known == id)
                .map(|(_, name)| name.clone());
            continue;
        }
        let Some(test) = &active else {
            continue;
        };
        if !with_output.contains(test) {
            with_output.push(test.clone());
        }
        let upper = line.to_uppercase();
        if FAIL_WORDS.iter().any(|word| upper.contains(word)) {
            update_by_precedence(&mut results, test, TestStatus::Failed);
        } else if upper.contains("SKIP") {
            update_by_precedence(&mut results, test, TestStatus::Skipped);
        } else if upper == "OK" {
            update_by_precedence(&mut results, test, TestStatus::Passed);
        }
    }
    for test in with_output {
        set_default(&mut results, &test, TestStatus::Passed);
    }
    Ok(results)
}

static BRACKETED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\[(?P<token>[A-Za-z][A-Za-z0-9_-]*)\]\s+(?P<body>.+)$"));
static WHITESPACE_RUN: Pattern = LazyLock::new(|| pyre::compile(r"\s+"));

/// A bracketed status word, upper-cased.
fn bracket_status(token: &str) -> Option<TestStatus> {
    Some(match token {
        "OK" | "PASS" | "PASSED" | "SUCCESS" => TestStatus::Passed,
        "SKIP" | "SKIPPED" | "TODO" | "PENDING" | "DISABLED" => TestStatus::Skipped,
        "FAIL" | "FAILED" | "ERROR" | "EXCEPTION" | "CRASH" | "FATAL" | "KO" | "PANIC" => {
            TestStatus::Failed
        }
        _ => return None,
    })
}

/// `parse_log_ocaml_v3`: stripped lines `[WORD] body`, the word (any case) one of the pass
/// words (`OK`, `PASS`, `PASSED`, `SUCCESS`), skip words (`SKIP`, `SKIPPED`, `TODO`,
/// `PENDING`, `DISABLED`) or failure words (`FAIL`, `FAILED`, `ERROR`, `EXCEPTION`, `CRASH`,
/// `FATAL`, `KO`, `PANIC`, all `FAILED`). The body, whitespace runs collapsed to one space and
/// stripped, is the name; statuses combine by the OCaml precedence.
pub(super) fn parse_log_ocaml_v3(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        let Some(caps) = BRACKETED.captures(line) else {
            continue;
        };
        let Some(status) = bracket_status(&named(&caps, "token").to_ascii_uppercase()) else {
            continue;
        };
        let name = WHITESPACE_RUN.replace_all(named(&caps, "body"), " ");
        update_by_precedence(&mut results, pystr::strip(&name), status);
    }
    Ok(results)
}

static STATUS_PREFIX: Pattern =
    LazyLock::new(|| pyre::compile(r"^(PASSED|FAILED|SKIPPED|ERROR)\s+(.*)$"));
static WIDE_GAP: Pattern = LazyLock::new(|| pyre::compile(r"\s{2,}"));

/// `parse_log_ocaml_v4` (also `parse_log_ocaml_v5`): lines `PASSED name  details` after SGR
/// codes become spaces and other escape sequences are removed (then stripped). The name is
/// the text after the status word up to the first run of two or more whitespace characters;
/// statuses combine by the OCaml precedence.
pub(super) fn parse_log_ocaml_v4(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let spaced = ANSI_COLOR_DELIM.replace_all(raw, " ");
        let cleaned = ansi_escape(&spaced);
        let line = pystr::strip(&cleaned);
        let Some(caps) = STATUS_PREFIX.captures(line) else {
            continue;
        };
        let remainder = pystr::strip(caps.get(2).map_or("", |m| m.as_str()));
        if remainder.is_empty() {
            continue;
        }
        let first = WIDE_GAP
            .find(remainder)
            .map_or(remainder, |gap| &remainder[..gap.start()]);
        let name = pystr::strip(first);
        let Some(status) = TestStatus::from_word(caps.get(1).map_or("", |m| m.as_str())) else {
            continue;
        };
        update_by_precedence(&mut results, name, status);
    }
    Ok(results)
}
