//! JavaScript runners: Mocha's spec reporter in three flavours, TAP with nested blocks, a
//! symbol-led reporter, and `npx` Mocha runs.

use std::sync::LazyLock;

use super::{Pattern, group, set_default, splitlines};
use crate::error::ParseError;
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

/// A trailing duration: optional parentheses around a number and `ms` or `s` (any case).
static DURATION_SUFFIX: Pattern =
    LazyLock::new(|| pyre::compile(r"\s*(?:\(\s*)?\d+(?:\.\d+)?\s*(?i:ms|s)\s*(?:\))?\s*$"));

/// A test name without a trailing duration such as `(53ms)` or `1.2s`, then stripped.
fn strip_duration(name: &str) -> String {
    pystr::strip(&DURATION_SUFFIX.replace_all(name, "")).to_owned()
}

static JS_PASSED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*✔\s+(.*?)$"));
static JS_SKIPPED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*-\s+(.*?)$"));
static JS_WARNED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\[W\]\s*\d+\)\s+(.*?)$"));
static JS_FAILED_HEADER: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\d+\)\s+(.*?):$"));
static JS_NUMBERED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\d+\)\s+(.*?)$"));

/// `parse_log_js`: Mocha's spec reporter with `[W]`-tagged failures. Per stripped, non-blank
/// line, first match wins: `- name` is `SKIPPED`; `1) name:` (a failure header, ending in a
/// colon) is `FAILED`; `[W] 1) name` is `FAILED`; `✔ name` is `PASSED` unless present. Names
/// lose a trailing duration, and an empty name stores nothing.
pub(super) fn parse_log_js(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = JS_SKIPPED.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                results.insert(name, TestStatus::Skipped);
            }
        } else if let Some(caps) = JS_FAILED_HEADER.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                results.insert(name, TestStatus::Failed);
            }
        } else if let Some(caps) = JS_WARNED.captures(line) {
            let name = strip_duration(pystr::rstrip(group(&caps, 1)));
            if !name.is_empty() {
                results.insert(name, TestStatus::Failed);
            }
        } else if let Some(caps) = JS_PASSED.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                set_default(&mut results, &name, TestStatus::Passed);
            }
        }
    }
    Ok(results)
}

/// `parse_log_js_2`: Mocha's spec reporter. Per stripped, non-blank line, first match wins:
/// `- name` is `SKIPPED`, `1) name` is `FAILED` (both overwrite), `✔ name` is `PASSED` unless
/// present. Names lose a trailing duration, and an empty name stores nothing.
pub(super) fn parse_log_js_2(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = JS_SKIPPED.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                results.insert(name, TestStatus::Skipped);
            }
        } else if let Some(caps) = JS_NUMBERED.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                results.insert(name, TestStatus::Failed);
            }
        } else if let Some(caps) = JS_PASSED.captures(line) {
            let name = strip_duration(group(&caps, 1));
            if !name.is_empty() {
                set_default(&mut results, &name, TestStatus::Passed);
            }
        }
    }
    Ok(results)
}

static TAP_LINE: Pattern = LazyLock::new(|| {
    pyre::compile(r"^(?P<status>not ok|ok)\s+\d+\s+-\s+(?P<name>.*?)(?:\s+#.*)?$")
});
static TAP_COMMENT: Pattern = LazyLock::new(|| pyre::compile(r"\s+#"));

/// `parse_log_js_3`: TAP with `{ ... }` blocks for nested suites. Per stripped, non-blank line:
/// a line of only `}` pops one suite per brace (while any remain); a trailing `{` is cut off
/// and, once the line is read, pushes its test name as a suite. `ok N - name` / `not ok N -
/// name` (a `# directive` may follow) gives the name before any whitespace-then-`#`, without a
/// duration; an empty name is skipped. The key joins the open suites and the name with
/// ` :: `. A line whose name part mentions `# skip` or `# todo` (any case) is `SKIPPED`;
/// otherwise `not ok` is `FAILED` (overwriting) and `ok` is `PASSED` unless present.
pub(super) fn parse_log_js_3(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut stack: Vec<String> = Vec::new();
    for raw in splitlines(log) {
        let mut line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if line.chars().all(|c| c == '}') {
            for _ in 0..line.len() {
                stack.pop();
            }
            continue;
        }
        let opens = line.ends_with('{');
        if opens {
            line = pystr::rstrip(&line[..line.len() - 1]);
        }
        let Some(caps) = TAP_LINE.captures(line) else {
            continue;
        };
        let raw_name = caps.name("name").map_or("", |m| m.as_str());
        let head = TAP_COMMENT
            .find(raw_name)
            .map_or(raw_name, |m| &raw_name[..m.start()]);
        let name = strip_duration(pystr::strip(head));
        if name.is_empty() {
            continue;
        }
        let lower = raw_name.to_lowercase();
        let skipped = ["# skip", "# skipped", "# todo"]
            .iter()
            .any(|marker| lower.contains(marker));
        let full_name = if stack.is_empty() {
            name.clone()
        } else {
            format!("{} :: {name}", stack.join(" :: "))
        };
        if skipped {
            results.insert(full_name, TestStatus::Skipped);
        } else if caps.name("status").is_some_and(|m| m.as_str() == "ok") {
            set_default(&mut results, &full_name, TestStatus::Passed);
        } else {
            results.insert(full_name, TestStatus::Failed);
        }
        if opens {
            stack.push(name);
        }
    }
    Ok(results)
}

/// The part of a js_4 line after its symbol: stripped, without a leading `[tag]:` (text up to
/// the first `]:`, when the payload starts with `[` and has one) and then without a leading
/// `:`.
fn js4_payload(payload: &str) -> &str {
    let mut payload = pystr::strip(payload);
    if payload.starts_with('[')
        && let Some((_, after)) = payload.split_once("]:")
    {
        payload = pystr::strip(after);
    }
    if let Some(after) = payload.strip_prefix(':') {
        payload = pystr::strip(after);
    }
    payload
}

/// `parse_log_js_4`: reporters that lead each result with a symbol. Per stripped, non-blank
/// line, by its first character: `✔` or `✓` is `PASSED` unless present; `✘`, `✖` or `×` is
/// `FAILED`; `○`, `◌`, `◦` or `⚪` is `SKIPPED` (the name is the rest of the line, see
/// [`js4_payload`], without a duration; empty names store nothing). Any other line that
/// contains `(skipped)`, `[skip]`, `[skipped]`, `[pending]` or `[todo]` in any case is
/// `SKIPPED` under the line with those markers (as written, lower case) removed.
pub(super) fn parse_log_js_4(log: &str) -> Result<StatusMap, ParseError> {
    const MARKERS: [&str; 5] = ["(skipped)", "[skip]", "[skipped]", "[pending]", "[todo]"];
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        let Some(symbol) = line.chars().next() else {
            continue;
        };
        let payload = &line[symbol.len_utf8()..];
        let status = match symbol {
            '✔' | '✓' => Some(TestStatus::Passed),
            '✘' | '✖' | '\u{D7}' => Some(TestStatus::Failed),
            '○' | '◌' | '◦' | '⚪' => Some(TestStatus::Skipped),
            _ => None,
        };
        if let Some(status) = status {
            let name = strip_duration(pystr::strip(js4_payload(payload)));
            if name.is_empty() {
                continue;
            }
            if status == TestStatus::Passed {
                set_default(&mut results, &name, status);
            } else {
                results.insert(name, status);
            }
            continue;
        }
        let lower = line.to_lowercase();
        if MARKERS.iter().any(|marker| lower.contains(marker)) {
            let mut candidate = line.to_owned();
            for marker in MARKERS {
                candidate = candidate.replace(marker, "");
            }
            let name = strip_duration(pystr::strip(&candidate));
            if !name.is_empty() {
                results.insert(name, TestStatus::Skipped);
            }
        }
    }
    Ok(results)
}

static NPX_PASSED: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s*✔\s+(.+?)(?:\s+\(\d+(?:ms)?\))?$"));
static NPX_FAILED: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\d+\)\s+(.+)$"));
static NPX_MODULE: Pattern = LazyLock::new(|| pyre::compile(r"\s+\([^)]+\)$"));

/// `parse_log_npx`: Mocha via `npx`. Per right-stripped, non-blank line: `✔ name` (an
/// optional `(12ms)` or `(12)` after it) is `PASSED`; `1) name` is `FAILED` with a trailing
/// `(something)` removed. Both overwrite.
pub(super) fn parse_log_npx(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::rstrip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = NPX_PASSED.captures(line) {
            results.insert(pystr::strip(group(&caps, 1)), TestStatus::Passed);
        } else if let Some(caps) = NPX_FAILED.captures(line) {
            let name = pystr::strip(group(&caps, 1));
            results.insert(
                NPX_MODULE.replace_all(name, "").into_owned(),
                TestStatus::Failed,
            );
        }
    }
    Ok(results)
}
