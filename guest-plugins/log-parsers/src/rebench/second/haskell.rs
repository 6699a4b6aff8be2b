//! Haskell test frameworks: tasty, hspec (both reporters) and HUnit.

use std::sync::LazyLock;

use regex::Regex;

use super::{Pattern, named, set_default, splitlines};
use crate::error::ParseError;
use crate::pyre::{self, PY_NON_WORD};
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static SGR: Pattern = LazyLock::new(|| pyre::compile(r"\x1b\[[0-9;]*m"));
/// Upstream ends the status word with `(?:\b|\s|$)`: after a word, that is "a non-word
/// character or the end", written here as one consumed character (nothing follows it).
static TASTY: Pattern = LazyLock::new(|| {
    pyre::compile(&format!(
        r"^\s*(?P<name>.+?)\s*:\s*(?P<status>OK|PASS|FAIL|ERROR|SKIP|PENDING)(?:{PY_NON_WORD}|$)"
    ))
});
static PENDING_INLINE: Pattern = LazyLock::new(|| {
    pyre::compile(&format!(
        r"^\s*(?P<name>.+?)\s*:\s*(?:SKIP|PENDING)(?:{PY_NON_WORD}.*)?$"
    ))
});
static HSPEC_PASS: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s*(?:✓|✔)\s+(?P<name>.+?)(?:\s+\(.*?\))?\s*$"));
static HSPEC_FAIL: Pattern = LazyLock::new(|| pyre::compile(r"^\s*(?:✗|✘)\s+(?P<name>.+?)\s*$"));
static BRACKET_PASS: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s+(?P<name>.+?)\s+\[(?:✓|✔)\]\s*$"));
static BRACKET_FAIL: Pattern =
    LazyLock::new(|| pyre::compile(r"^\s+(?P<name>.+?)\s+\[(?:✗|✘)\]\s*$"));
static FAILURE_HEADER: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\d+\)\s+(?P<name>.+?)\s*$"));
static HUNIT_FAILURE: Pattern =
    LazyLock::new(|| pyre::compile(r"^###\s+Failure\s+in:\s+(?P<name>.+)$"));
static HUNIT_ERROR: Pattern =
    LazyLock::new(|| pyre::compile(r"^###\s+Error\s+in:\s+(?P<name>.+)$"));

/// How a matched haskell line stores its (stripped) name.
#[derive(Clone, Copy)]
enum Store {
    /// Overwrite with this status.
    Set(TestStatus),
    /// `PASSED` unless the name already has a status.
    PassUnlessPresent,
}

/// `parse_log_haskell`: tasty, hspec and HUnit lines. Each line loses its SGR colour codes and
/// trailing whitespace; blank lines and lines mentioning `Test suite `, `Linking `,
/// `Building ` or `Running  ` are skipped. First match wins:
///
/// * `name: OK|PASS|FAIL|ERROR|SKIP|PENDING` (the word followed by a non-word character or the
///   end): `PASSED`, `PASSED`, `FAILED`, `ERROR`, `SKIPPED`, `SKIPPED`.
/// * `name: SKIP...` / `name: PENDING...` (never reached: the line above takes them).
/// * An indented `name [✔]` (or `[✓]`) is `PASSED` unless present; `name [✘]` (or `[✗]`)
///   `FAILED`.
/// * `✔ name` (or `✓`, an optional `(...)` after it) is `PASSED` unless present; `✘ name` (or
///   `✗`) `FAILED`.
/// * `1) name` is `FAILED`; `### Failure in: name` is `FAILED`; `### Error in: name` is
///   `ERROR`.
pub(super) fn parse_log_haskell(log: &str) -> Result<StatusMap, ParseError> {
    let rules: [(&Regex, Store); 8] = [
        (&PENDING_INLINE, Store::Set(TestStatus::Skipped)),
        (&BRACKET_PASS, Store::PassUnlessPresent),
        (&BRACKET_FAIL, Store::Set(TestStatus::Failed)),
        (&HSPEC_PASS, Store::PassUnlessPresent),
        (&HSPEC_FAIL, Store::Set(TestStatus::Failed)),
        (&FAILURE_HEADER, Store::Set(TestStatus::Failed)),
        (&HUNIT_FAILURE, Store::Set(TestStatus::Failed)),
        (&HUNIT_ERROR, Store::Set(TestStatus::Error)),
    ];
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let uncoloured = SGR.replace_all(raw, "");
        let line = pystr::rstrip(&uncoloured);
        if line.is_empty() {
            continue;
        }
        if ["Test suite ", "Linking ", "Building ", "Running  "]
            .iter()
            .any(|noise| line.contains(noise))
        {
            continue;
        }
        if let Some(caps) = TASTY.captures(line) {
            let status = match named(&caps, "status") {
                "OK" | "PASS" => TestStatus::Passed,
                "FAIL" => TestStatus::Failed,
                "ERROR" => TestStatus::Error,
                _ => TestStatus::Skipped,
            };
            results.insert(pystr::strip(named(&caps, "name")), status);
            continue;
        }
        for (pattern, store) in rules {
            let Some(caps) = pattern.captures(line) else {
                continue;
            };
            let name = pystr::strip(named(&caps, "name"));
            match store {
                Store::Set(status) => results.insert(name, status),
                Store::PassUnlessPresent => set_default(&mut results, name, TestStatus::Passed),
            }
            break;
        }
    }
    Ok(results)
}

static FAILURES_ENTRY: Pattern = LazyLock::new(|| pyre::compile(r"^\s*\d+\)\s+(.*)$"));
static LEAF_FAILED: Pattern = LazyLock::new(|| pyre::compile(r"^(.*?)\s+FAILED\s*\[\d+\]$"));
static LEAF_PENDING: Pattern = LazyLock::new(|| {
    pyre::compile(&format!(
        r"^(.*?)\s+(?i:PENDING|SKIPPED)(?:{PY_NON_WORD}.*)?$"
    ))
});

/// Words that rule a line out as the start of the hspec tree when there is no `RUNNING...`
/// marker.
const NOT_A_TREE_START: [&str; 14] = [
    "Downloading",
    "Building",
    "Installing",
    "Completed",
    "Starting",
    "Preprocessing",
    "Configuring",
    "Linking",
    "Resolving dependencies",
    "Build profile",
    "In order, the following will be built",
    "Error:",
    "Test suite ",
    "Running ",
];

/// Whether a stripped tree line carries no test (blank, or golden-test chatter).
fn is_filler(stripped: &str) -> bool {
    stripped.is_empty() || stripped == "Golden and Actual output didn't change"
}

/// Leading ASCII spaces, in characters (tabs do not count).
fn leading_spaces(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// `parse_log_haskell_v2`: hspec's tree reporter, rebuilt from indentation.
///
/// The `Failures:` section starts at the first line that is exactly `Failures:` once stripped.
/// In it, until a line starting `To rerun use:`, `Randomized with seed`, `Finished in ` or
/// `Test suite `, each `N) a, b, c` entry names the failed test `a.b.c` (the header split at
/// commas, each part stripped).
///
/// The tree starts after the first line starting `Test suite ` that contains `: RUNNING...`,
/// or else at the first line that is not indented, contains a `.` and mentions none of the
/// build-chatter words (or else at the top), and ends at `Failures:` (or the end). Each tree
/// line (blank and golden chatter lines skipped) sits at level indent/2 (leading spaces) and
/// replaces that level of the path (deeper levels dropped, skipped levels left empty). A line
/// `name FAILED [N]` is a failing leaf, a line `name PENDING...` / `name SKIPPED...` (any case)
/// a skipped one. A line is a leaf unless the next tree line is indented further; a leaf stores
/// its path (non-empty parts joined with `.`) as `FAILED`, `SKIPPED` or `PASSED`. Finally every
/// name from `Failures:` is set to `FAILED`.
pub(super) fn parse_log_haskell_v2(log: &str) -> Result<StatusMap, ParseError> {
    let lines = splitlines(log);
    let failures_at = lines
        .iter()
        .position(|line| pystr::strip(line) == "Failures:");
    let mut failed: Vec<String> = Vec::new();
    if let Some(at) = failures_at {
        for line in &lines[at + 1..] {
            let stripped = pystr::strip(line);
            if stripped.is_empty() {
                continue;
            }
            if [
                "To rerun use:",
                "Randomized with seed",
                "Finished in ",
                "Test suite ",
            ]
            .iter()
            .any(|stop| stripped.starts_with(stop))
            {
                break;
            }
            if let Some(caps) = FAILURES_ENTRY.captures(stripped) {
                let header = pystr::strip(caps.get(1).map_or("", |m| m.as_str()));
                let full: Vec<&str> = header.split(',').map(pystr::strip).collect();
                let full = full.join(".");
                if !failed.contains(&full) {
                    failed.push(full);
                }
            }
        }
    }
    let start = lines
        .iter()
        .position(|line| line.starts_with("Test suite ") && line.contains(": RUNNING..."))
        .map(|at| at + 1)
        .or_else(|| {
            lines.iter().position(|line| {
                !line.is_empty()
                    && !line.starts_with(' ')
                    && line.contains('.')
                    && !NOT_A_TREE_START.iter().any(|word| line.contains(word))
            })
        })
        .unwrap_or(0);
    let end = failures_at.unwrap_or(lines.len());
    let mut results = StatusMap::new();
    let mut stack: Vec<String> = Vec::new();
    let mut at = start;
    while at < end {
        let raw = lines[at];
        let stripped = pystr::strip(raw);
        if is_filler(stripped) {
            at += 1;
            continue;
        }
        let indent = leading_spaces(raw);
        let level = indent / 2;
        let (core, hint) = if let Some(caps) = LEAF_FAILED.captures(stripped) {
            let name = pystr::strip(caps.get(1).map_or("", |m| m.as_str()));
            (name, Some(TestStatus::Failed))
        } else if let Some(caps) = LEAF_PENDING.captures(stripped) {
            let name = pystr::strip(caps.get(1).map_or("", |m| m.as_str()));
            (name, Some(TestStatus::Skipped))
        } else {
            (stripped, None)
        };
        if level < stack.len() {
            stack.truncate(level);
        } else {
            stack.resize(level, String::new());
        }
        stack.push(core.to_owned());
        let next = (at + 1..end).find(|&next| !is_filler(pystr::strip(lines[next])));
        let is_leaf = next.is_none_or(|next| leading_spaces(lines[next]) <= indent);
        if is_leaf {
            let parts: Vec<&str> = stack
                .iter()
                .map(String::as_str)
                .filter(|part| !part.is_empty())
                .collect();
            results.insert(parts.join("."), hint.unwrap_or(TestStatus::Passed));
        }
        at += 1;
    }
    for name in failed {
        results.insert(name, TestStatus::Failed);
    }
    Ok(results)
}
