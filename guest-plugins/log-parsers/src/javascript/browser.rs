//! Browser test runners: `parse_log_karma`, `parse_log_chart_js`, `parse_log_bpmn_js`,
//! `parse_log_openlayers` and `parse_log_next` (Karma for its first version, Cypress-style
//! output for 1.27).

use std::sync::LazyLock;

use regex::Regex;

use super::{SuiteStack, ansi_escape};
use crate::error::{ParseError, PyException};
use crate::parser::LogContext;
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static KARMA: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^(\s*)?([✔✖])?\s(.*)$"));
static CHART_JS: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"(?m)Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$"));
/// bpmn-js's failure patterns, applied in this order; the third has the name in group 2.
static BPMN_JS: LazyLock<[(Regex, usize); 4]> = LazyLock::new(|| {
    [
        (
            pyre::compile(r"2KPhantomJS\s[\d\.]+\s\(Linux\s[\d\.]+\)\s(.*)FAILED\n"),
            1,
        ),
        (
            pyre::compile(r"2KPhantomJS\s[\d\.]+\s\(Linux\sx86\_64\)\s(.*)FAILED\n"),
            1,
        ),
        (
            pyre::compile(r"Chrome\sHeadless\s(.*)\s\(Linux\sx86\_64\)\s(.*)FAILED\n"),
            2,
        ),
        (
            pyre::compile(r"HeadlessChrome\s[\d\.]+\s\(Linux\s[\d\.]+\)\s(.*)FAILED\n"),
            1,
        ),
    ]
});
static OPENLAYERS: LazyLock<[Regex; 4]> = LazyLock::new(|| {
    [
        pyre::compile(r"(?m)Chrome\sHeadless\s[\d\.]+\s\(Linux\s[\d\.\_\S]+\)\s(.*)\sFAILED\n"),
        pyre::compile(r"(?m)Chrome\s[\d\.]+\s\(Linux\s[\d\.\_\S]+\)\s(.*)FAILED\n"),
        pyre::compile(r"(?m)^\s{2}\d+\)([\s\S]*?)Error:"),
        pyre::compile(r"(?m)^case\s(.*):\smismatch"),
    ]
});
static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\s+"));
static NEXT_ASSERTION: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"(?s)AssertionError:\s+#([\s\S]*?)\n\n"));
static NEXT_FAIL: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r".*?✗\s*(.*)"));
static NEXT_PASS: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r".*?✓\s*(.*)"));
static NEXT_SUITE: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile(r"Running:(.*)\)\n{3}\s{2}(.*)\n"));
static NEXT_V2_FAIL: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"(?m)^\s{4}\d+\)\s(.*)"));
static NEXT_V2_PASS: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"(?m)^\s{4}✓\s(.*)\("));

/// `parse_log_karma` (karma's mocha reporter): nothing counts before a line containing
/// `Starting browser` (such lines are skipped), and reading stops at a line starting with
/// `SUMMARY:`. Lines matching `^(\s*)?([✔✖])?\s(.*)$` (an optional indentation, an optional
/// mark, then one whitespace character) are read; the indentation group gets all but that
/// last whitespace character when there is no mark. An indented line without a mark is a
/// suite: deeper than the current depth it is pushed, shallower it pops one suite (whatever
/// the depth difference; popping with no suite raises `IndexError`), equal it does nothing. A
/// marked line is `✔` passed / `✖` failed under `" > ".join(suites + [name])`.
pub(crate) fn parse_karma(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    let mut depth: isize = -1;
    let mut suites: Vec<&str> = Vec::new();
    let mut started = false;
    for line in log.split('\n') {
        if line.starts_with("SUMMARY:") {
            break;
        }
        if line.contains("Starting browser") {
            started = true;
            continue;
        }
        if !started {
            continue;
        }
        let Some(caps) = KARMA.captures(line) else {
            continue;
        };
        let indent = caps.get(1).map_or("", |m| m.as_str());
        let mark = caps.get(2).map(|m| m.as_str());
        let name = caps.get(3).map_or("", |m| m.as_str());
        if !indent.is_empty() && mark.is_none() {
            let new_depth = indent.chars().count() as isize;
            if new_depth > depth {
                depth = new_depth;
                suites.push(name);
            } else if new_depth < depth {
                depth = new_depth;
                if suites.pop().is_none() {
                    return Err(ParseError::new(
                        PyException::IndexError,
                        "karma suite popped from an empty stack",
                    ));
                }
                continue;
            }
        }
        if let Some(mark) = mark {
            let status = if mark == "✔" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            let mut key = suites.join(" > ");
            if !suites.is_empty() {
                key.push_str(" > ");
            }
            key.push_str(name);
            map.insert(key, status);
        }
    }
    Ok(map)
}

/// `parse_log_chart_js` (karma, only failures): colour codes removed, then every line ending in
/// `FAILED` with `Chrome <version> (<platform>) ` before the name (the platform is the shortest
/// parenthesised text, and the spaces around it may not be newlines); the name runs to the
/// line's last `FAILED`.
pub(crate) fn parse_chart_js(log: &str) -> StatusMap {
    let log = ansi_escape(log);
    let mut map = StatusMap::new();
    for caps in CHART_JS.captures_iter(&log) {
        map.insert(&caps[1], TestStatus::Failed);
    }
    map
}

/// `parse_log_bpmn_js` (karma, only failures): four patterns for PhantomJS and headless Chrome
/// result lines, each run over the whole log in turn; a line needs `FAILED` right before its
/// newline (so a last line without one never counts), and the name runs to the line's last
/// `FAILED`. The Chrome Headless pattern's name follows ` (Linux x86_64) `.
pub(crate) fn parse_bpmn_js(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for (pattern, group) in BPMN_JS.iter() {
        for caps in pattern.captures_iter(log) {
            map.insert(
                caps.get(*group).map_or("", |m| m.as_str()),
                TestStatus::Failed,
            );
        }
    }
    map
}

/// `parse_log_openlayers` (karma and mocha, only failures): four patterns run over the whole
/// log in turn — `Chrome Headless <version> (Linux …) name FAILED` and `Chrome <version> (Linux
/// …) nameFAILED` lines ending in a newline, mocha's `  N) title … Error:` blocks (the shortest
/// text up to `Error:`, across lines) and `case name: mismatch` lines. Each name has its
/// whitespace runs collapsed to one space and is stripped.
pub(crate) fn parse_openlayers(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for pattern in OPENLAYERS.iter() {
        for caps in pattern.captures_iter(log) {
            let name = WHITESPACE.replace_all(&caps[1], " ");
            map.insert(pystr::strip(&name), TestStatus::Failed);
        }
    }
    map
}

/// `parse_log_next`: version `1.27` reads Cypress-style output ([`parse_next_v2`]), every other
/// version Karma output ([`parse_next_v1`]).
pub(crate) fn parse_next(log: &str, ctx: &LogContext) -> StatusMap {
    if ctx.version == "1.27" {
        parse_next_v2(log)
    } else {
        parse_next_v1(log)
    }
}

/// Karma output of alibaba-fusion/next: colour codes removed, then every `AssertionError:` +
/// whitespace + `#` up to the next blank line. Each piece after a ` xvfb-run ` is read from
/// after its last `Starting browser Chrome`, line by line until one starting with `TOTAL`:
/// lines whose stripped text starts with `ERROR`, `LOG`, `WARN`, `Check` or `in` (so also
/// `index …`, `invalid …`) are skipped; a line with `✗` fails, else one with `✓` passes, the
/// text after the first mark and any whitespace; other indented lines adjust the describe
/// stack ([`SuiteStack`], kept across pieces). Keys join suites and name with ` - `.
fn parse_next_v1(log: &str) -> StatusMap {
    let log = ansi_escape(log);
    let log = NEXT_ASSERTION.replace_all(&log, "");
    let mut map = StatusMap::new();
    let mut suites = SuiteStack::default();
    for piece in log.split(" xvfb-run ").skip(1) {
        let piece = piece
            .rsplit_once("Starting browser Chrome")
            .map_or(piece, |(_, after)| after);
        for line in piece.split('\n') {
            if line.starts_with("TOTAL") {
                break;
            }
            let stripped = pystr::strip(line);
            if ["ERROR", "LOG", "WARN", "Check", "in"]
                .iter()
                .any(|prefix| stripped.starts_with(prefix))
            {
                continue;
            }
            if let Some(caps) = NEXT_FAIL.captures(line) {
                map.insert(suites.key(&caps[1]), TestStatus::Failed);
            } else if let Some(caps) = NEXT_PASS.captures(line) {
                map.insert(suites.key(&caps[1]), TestStatus::Passed);
            } else {
                suites.adjust(line);
            }
        }
    }
    map
}

/// Cypress-style output (next 1.27): each `Running: …)` followed by three newlines, two
/// whitespace characters and a suite line starts a section that runs to the next such header.
/// In it, lines of four whitespace characters + `N) name` are failed and four + `✓ name (` are
/// passed (the name up to the line's last `(`), each as `suite: name` (failures stripped,
/// passes stripped too).
fn parse_next_v2(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let headers: Vec<_> = NEXT_SUITE.captures_iter(log).collect();
    for (at, caps) in headers.iter().enumerate() {
        let Some(whole) = caps.get(0) else { continue };
        let suite = caps.get(2).map_or("", |m| m.as_str());
        let end = headers
            .get(at + 1)
            .and_then(|next| next.get(0))
            .map_or(log.len(), |m| m.start());
        let section = &log[whole.end()..end];
        for (pattern, status) in [
            (&*NEXT_V2_FAIL, TestStatus::Failed),
            (&*NEXT_V2_PASS, TestStatus::Passed),
        ] {
            for found in pattern.captures_iter(section) {
                map.insert(format!("{suite}: {}", pystr::strip(&found[1])), status);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::check_parser as check;
    use crate::parser::{LogContext, Parser};

    #[test]
    fn karma_suites_by_indentation() {
        check(
            Parser::Karma,
            "✔ before start\nINFO Starting browser ChromeHeadless\n  render\n    ✔ works\n    ✖ breaks [x]\n    nested\n      ✔ deep\n  other\n    ✔ y\nSUMMARY:\n✔ after\n",
            &[
                ("render > works", "PASSED"),
                ("render > breaks [x]", "FAILED"),
                ("render > nested > deep", "PASSED"),
                ("render > y", "PASSED"),
            ],
        );
        let err = Parser::Karma
            .try_parse(
                "Starting browser\n    a\n   b\n  c\n",
                &LogContext::default(),
            )
            .unwrap_err();
        assert_eq!(err.exception.as_str(), "IndexError");
    }

    #[test]
    fn chart_js_bpmn_js_openlayers_failures() {
        check(
            Parser::ChartJs,
            "\x1b[31mChrome 120.0.0.0 (Linux x86_64) Chart.helpers works FAILED\x1b[39m\nChrome 1 (Linux) ok SUCCESS\n",
            &[("Chart.helpers works ", "FAILED")],
        );
        check(
            Parser::BpmnJs,
            "HeadlessChrome 120.0 (Linux 0.0.0) Modeler should import FAILED\nChrome Headless 120 (Linux x86_64) Viewer x FAILED\n",
            // Pattern by pattern, not line by line: the Chrome Headless line comes first.
            &[
                ("Viewer x ", "FAILED"),
                ("Modeler should import ", "FAILED"),
            ],
        );
        check(
            Parser::Openlayers,
            "Chrome Headless 120.0 (Linux x86_64) ol/Map  renders FAILED\n  1) ol/View\n     fits:\n     Error: x\ncase rendering/a: mismatch 0.3\n",
            &[
                ("ol/Map renders", "FAILED"),
                ("ol/View fits:", "FAILED"),
                ("rendering/a", "FAILED"),
            ],
        );
    }

    #[test]
    fn next_by_version() {
        let v1 = "+ xvfb-run karma\nnoise ✓ ignored\nStarting browser Chrome\n  Button\n    ✓ renders\n    ✗ clicks\n    info line\n    in progress ✓ x\nTOTAL: 1 FAILED\n";
        check(
            Parser::Next,
            v1,
            &[
                ("Button - renders", "PASSED"),
                ("Button - clicks", "FAILED"),
            ],
        );
        let ctx = LogContext {
            version: "1.27".to_owned(),
            ..LogContext::default()
        };
        let v2 = "  Running:  a.cy.js (1 of 2)\n\n\n  Table\n    ✓ sorts (12ms)\n    1) filters\n";
        let map = Parser::Next.parse(v2, &ctx);
        let got: Vec<_> = map.iter().map(|(k, s)| (k, s.as_str())).collect();
        assert_eq!(
            got,
            [("Table: filters", "FAILED"), ("Table: sorts", "PASSED")]
        );
    }
}
