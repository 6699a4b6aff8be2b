//! The JVM build tools: Maven (Surefire summaries, reactor summaries, `-Dtest=` runs), JUnit XML
//! fragments printed by sbt or a test script, and Gradle's JUnit XML reports.

use std::sync::LazyLock;

use super::{Pattern, group, named, py_boundary, py_int, set_default, splitlines};
use crate::error::ParseError;
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};
use crate::xml;

static MVN_RUNNING: Pattern =
    LazyLock::new(|| pyre::compile(r"^(?:\[INFO\]\s+)?Running\s+([A-Za-z0-9_$.]+)$"));
static MVN_SUMMARY: Pattern = LazyLock::new(|| {
    pyre::compile(r"Tests run:\s*(\d+),\s*Failures:\s*(\d+),\s*Errors:\s*(\d+),\s*Skipped:\s*(\d+)")
});

/// A character of the class and method names in an `[ERROR] Class.method` line.
fn is_member_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.')
}

/// Upstream matches `[ERROR]`, whitespace, then a greedy class name, a dot and a lazy method
/// name (both of `[A-Za-z0-9_$.]`), an optional `:line`, then a word boundary (Python's `\b`,
/// which Rust's `regex` defines differently, so the backtracking is spelled out here): the
/// class ends at the last dot from which some method length reaches a boundary, and the method
/// is the shortest such. Returns `(class, method)`.
fn mvn_failure(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("[ERROR]")?;
    let body = rest.trim_start_matches(pystr::is_space);
    if body.len() == rest.len() {
        return None;
    }
    let run = body
        .find(|c: char| !is_member_char(c))
        .unwrap_or(body.len());
    let dots = body[..run]
        .match_indices('.')
        .map(|(at, _)| at)
        .filter(|&at| at > 0);
    let dots: Vec<usize> = dots.collect();
    for &dot in dots.iter().rev() {
        for method_end in dot + 2..=run {
            if method_end == run
                && let Some(after_colon) = body[run..].strip_prefix(':')
            {
                let digit_ends: Vec<usize> = after_colon
                    .char_indices()
                    .take_while(|&(_, c)| pystr::decimal_value(c).is_some())
                    .map(|(at, c)| run + 1 + at + c.len_utf8())
                    .collect();
                if digit_ends.iter().rev().any(|&end| py_boundary(body, end)) {
                    return Some((&body[..dot], &body[dot + 1..method_end]));
                }
            }
            if py_boundary(body, method_end) {
                return Some((&body[..dot], &body[dot + 1..method_end]));
            }
        }
    }
    None
}

/// `parse_java_mvn`: Surefire output read line by line (each stripped, blank ones skipped):
///
/// * `Running <class>` (optionally after `[INFO]`) remembers the class as the current one and
///   as seen.
/// * `[ERROR] <class>.<method>...` stores `ERROR` for `class.method` when the line mentions
///   `Exception` but not `AssertionError`, otherwise `FAILED` (later lines overwrite), and
///   gives the class `FAILED` unless it already has a status.
/// * A line containing a `Tests run: N, Failures: F, Errors: E, Skipped: S` summary gives a
///   class, unless it already has a status, `PASSED` (no failures, errors or skips), `SKIPPED`
///   (only skips) or `FAILED`; the class is the text after the line's last ` in ` (stripped,
///   then trailing `.`, `:` and `;` removed), or else the current one; an empty name stores
///   nothing. Either way the current class is forgotten.
///
/// Then the JUnit fragments of [`parse_log_sbt`] and the `-Dtest=`/`BUILD` pairs of Maven's
/// plain parser fill in names not yet present. If nothing at all was found, every class seen
/// running is `PASSED`.
pub(super) fn parse_java_mvn(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut seen_running: Vec<&str> = Vec::new();
    let mut current: Option<&str> = None;
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = MVN_RUNNING.captures(line) {
            let class = group(&caps, 1);
            current = Some(class);
            if !seen_running.contains(&class) {
                seen_running.push(class);
            }
            continue;
        }
        if let Some((class, method)) = mvn_failure(line) {
            let status = if line.contains("Exception") && !line.contains("AssertionError") {
                TestStatus::Error
            } else {
                TestStatus::Failed
            };
            results.insert(format!("{class}.{method}"), status);
            set_default(&mut results, class, TestStatus::Failed);
            continue;
        }
        if let Some(caps) = MVN_SUMMARY.captures(line) {
            let class = match line.rsplit_once(" in ") {
                Some((_, tail)) => pystr::strip(tail).trim_end_matches(['.', ':', ';']),
                None => current.unwrap_or(""),
            };
            if !class.is_empty() {
                let zero = |at: usize| pystr::digits_are_zero(group(&caps, at));
                let status = if zero(2) && zero(3) {
                    if zero(4) {
                        TestStatus::Passed
                    } else {
                        TestStatus::Skipped
                    }
                } else {
                    TestStatus::Failed
                };
                set_default(&mut results, class, status);
            }
            current = None;
        }
    }
    for (name, status) in parse_log_sbt(log)?.iter() {
        set_default(&mut results, name, status.clone());
    }
    for (name, status) in crate::rebench::first::parse_log_maven(log)?.iter() {
        set_default(&mut results, name, status.clone());
    }
    if results.is_empty() {
        for class in seen_running {
            set_default(&mut results, class, TestStatus::Passed);
        }
    }
    Ok(results)
}

/// `parse_log_sbt` (also `parse_log_junit`): the `<testcase ...>` tags found anywhere in the
/// text, keyed `classname name`; see [`junit_testcases`].
pub(super) fn parse_log_sbt(log: &str) -> Result<StatusMap, ParseError> {
    Ok(junit_testcases(log, " "))
}

static JUNIT_ATTRIBUTE: Pattern = LazyLock::new(|| pyre::compile(r#"(\w+)="([^"]*)""#));

/// The first `<testcase` at or after byte `from` that is followed by a word boundary (Python's
/// `\b`) and, later, a `>`: its start, the text between the name and the `>`, and the offset
/// after the `>`.
fn next_open_tag(log: &str, from: usize) -> Option<(&str, usize)> {
    const OPEN: &str = "<testcase";
    let mut search = from;
    loop {
        let at = search + log[search..].find(OPEN)?;
        let after = at + OPEN.len();
        if py_boundary(log, after) {
            let close = after + log[after..].find('>')?;
            return Some((&log[after..close], close + 1));
        }
        search = at + 1;
    }
}

/// Upstream's `_parse_junit_testcases_from_text`: scans for `<testcase ...>` opening tags in
/// raw text (any attribute order, self-closing or not, several documents mixed with noise).
/// The attributes are every `word="value"` in the tag (the last of a repeated one wins, no
/// entity decoding). A tag without a non-empty `name` is skipped. Unless the tag ends in `/`,
/// its content runs to the next `</testcase>` (scanning resumes after it) or, with none, is the
/// next 4096 characters (scanning resumes after the tag). The key is `classname`, the joiner
/// and `name`, stripped, or just `name` when `classname` is missing or empty; the status is
/// `FAILED` if the content contains `<failure`, else `ERROR` for `<error`, else `SKIPPED` for
/// `<skipped`, else `PASSED`.
fn junit_testcases(log: &str, joiner: &str) -> StatusMap {
    let mut results = StatusMap::new();
    let mut pos = 0;
    while let Some((raw_attrs, tag_end)) = next_open_tag(log, pos) {
        let mut name = None;
        let mut classname = None;
        for caps in JUNIT_ATTRIBUTE.captures_iter(raw_attrs) {
            match group(&caps, 1) {
                "name" => name = Some(group(&caps, 2)),
                "classname" => classname = Some(group(&caps, 2)),
                _ => {}
            }
        }
        let Some(name) = name.filter(|name| !name.is_empty()) else {
            pos = tag_end;
            continue;
        };
        let content = if pystr::strip(raw_attrs).ends_with('/') {
            pos = tag_end;
            ""
        } else if let Some(close) = log[tag_end..].find("</testcase>") {
            pos = tag_end + close + "</testcase>".len();
            &log[tag_end..tag_end + close]
        } else {
            pos = tag_end;
            let rest = &log[tag_end..];
            let cut = rest
                .char_indices()
                .nth(4096)
                .map_or(rest.len(), |(at, _)| at);
            &rest[..cut]
        };
        let full_name = match classname.filter(|class| !class.is_empty()) {
            Some(class) => pystr::strip(&format!("{class}{joiner}{name}")).to_owned(),
            None => name.to_owned(),
        };
        let status = if content.contains("<failure") {
            TestStatus::Failed
        } else if content.contains("<error") {
            TestStatus::Error
        } else if content.contains("<skipped") {
            TestStatus::Skipped
        } else {
            TestStatus::Passed
        };
        results.insert(full_name, status);
    }
    results
}

static MVN_REACTOR: Pattern = LazyLock::new(|| {
    pyre::compile(
        r"^\[INFO\]\s+(?P<name>.+?)\s+\.\.+\s+(?P<status>SUCCESS|FAILURE|SKIPPED)(?:\s|\[|$)",
    )
});

/// `parse_java_mvn_v2`: Maven's reactor summary. Over the stripped, non-blank lines:
/// `[INFO] <module> ..... SUCCESS|FAILURE|SKIPPED` stores `PASSED`, `FAILED` or `SKIPPED` for
/// the module (later lines overwrite); otherwise a `Tests run: N, Failures: F, Errors: E,
/// Skipped: S` summary sets `__suite__`, once (the first summary wins), to `FAILED` if F > 0,
/// else `ERROR` if E > 0, else `SKIPPED` if S equals N, else `PASSED`.
pub(super) fn parse_java_mvn_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    for raw in splitlines(log) {
        let line = pystr::strip(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(caps) = MVN_REACTOR.captures(line) {
            let status = match named(&caps, "status") {
                "SUCCESS" => TestStatus::Passed,
                "FAILURE" => TestStatus::Failed,
                _ => TestStatus::Skipped,
            };
            results.insert(named(&caps, "name"), status);
            continue;
        }
        if let Some(caps) = MVN_SUMMARY.captures(line) {
            let status = if !pystr::digits_are_zero(group(&caps, 2)) {
                TestStatus::Failed
            } else if !pystr::digits_are_zero(group(&caps, 3)) {
                TestStatus::Error
            } else if py_int(group(&caps, 4)) == py_int(group(&caps, 1)) {
                TestStatus::Skipped
            } else {
                TestStatus::Passed
            };
            set_default(&mut results, "__suite__", status);
        }
    }
    Ok(results)
}

/// `ET.fromstring`: the text (an XML declaration at its start read as expat reads one) as a
/// document, `None` where ElementTree raises.
pub(super) fn parse_xml(text: &str) -> Option<xml::Document> {
    xml::parse(text).ok()
}

/// `parse_log_gradlew_v1`: JUnit XML reports printed into the log. Over `log.split('\n')`, a
/// line whose stripped text starts with `<?xml` starts a block (dropping any open one), and
/// inside a block a line whose stripped text starts with `</testsuite>` ends it. Each block is
/// parsed as XML (a malformed one, including one whose `<?xml` is indented, is skipped); every
/// `testcase` below the root is keyed `name (classname)` (just `name` if either is empty) and
/// is `SKIPPED` with a `skipped` child, else `FAILED` with a `failure` child, else `ERROR` with
/// an `error` child, else `PASSED`.
pub(super) fn parse_log_gradlew_v1(log: &str) -> Result<StatusMap, ParseError> {
    let mut results = StatusMap::new();
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_xml = false;
    for line in log.split('\n') {
        let stripped = pystr::strip(line);
        if stripped.starts_with("<?xml") {
            in_xml = true;
            current = vec![line];
        } else if in_xml {
            current.push(line);
            if stripped.starts_with("</testsuite>") {
                blocks.push(current.join("\n"));
                current.clear();
                in_xml = false;
            }
        }
    }
    for block in &blocks {
        let Some(doc) = parse_xml(block) else {
            continue;
        };
        for case in doc.descendants_named(doc.root(), "testcase") {
            let name = doc.attribute(case, "name").unwrap_or("");
            let class = doc.attribute(case, "classname").unwrap_or("");
            let full_name = if !class.is_empty() && !name.is_empty() {
                format!("{name} ({class})")
            } else {
                name.to_owned()
            };
            let has = |child: &str| doc.children_named(case, child).next().is_some();
            let status = if has("skipped") {
                TestStatus::Skipped
            } else if has("failure") {
                TestStatus::Failed
            } else if has("error") {
                TestStatus::Error
            } else {
                TestStatus::Passed
            };
            results.insert(full_name, status);
        }
    }
    Ok(results)
}
