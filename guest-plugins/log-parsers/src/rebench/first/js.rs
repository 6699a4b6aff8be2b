//! The JavaScript runners: Jest (verbose, through Calypso's wrapper, as a JSON transform),
//! Vitest, Karma, Mocha-style failure lists (Chart.js, marked, p5.js) and react-pdf's.

use std::sync::LazyLock;

use regex::Regex;

use super::{group, stripped_matches};
use crate::error::{ParseError, PyException};
use crate::javascript::ansi_escape;
use crate::pyre::PY_WORD;
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

/// `parse_log_chart_js`: after `ansi_escape`, every match in the whole log of `Chrome`,
/// whitespace, a version of digits and dots, a space (not a line break), `(platform)`, a space,
/// then the title up to `FAILED` ending a line, puts the title `FAILED`. Only failures are
/// reported.
pub(super) fn parse_log_chart_js(log: &str) -> Result<StatusMap, ParseError> {
    let failure = py_search!(r"(?m)Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$");
    let log = ansi_escape(log);
    Ok(failure
        .captures_iter(&log)
        .map(|caps| (group(&caps, 1).to_owned(), TestStatus::Failed))
        .collect())
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

/// p5.js's `remove_json_blocks`: drops, from `log.split('\n')` (each line judged by its
/// right-stripped text), a line ending with `{` and every line after it up to and including a
/// line that is exactly `}`; likewise `[` ... `]` (the two kinds tracked separately, a new
/// opener while one is open changing nothing); and one-line `{...}` / `[...]` lines. The
/// lines kept are joined with `\n` unchanged.
fn remove_json_blocks(log: &str) -> String {
    let mut kept = Vec::new();
    let mut in_object = false;
    let mut in_list = false;
    for line in log.split('\n') {
        let text = pystr::rstrip(line);
        if text.ends_with('{') {
            in_object = true;
            continue;
        }
        if text.ends_with('[') {
            in_list = true;
            continue;
        }
        if text == "}" && in_object {
            in_object = false;
            continue;
        }
        if text == "]" && in_list {
            in_list = false;
            continue;
        }
        let one_line_block = (text.starts_with('{') && text.ends_with('}'))
            || (text.starts_with('[') && text.ends_with(']'));
        if !(in_object || in_list || one_line_block) {
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// The leftmost `<tag>...</tag>` of upstream's `<(\w+)>[\s\S]*?</\1>` in `text`: the first
/// `<` (from the left) that is followed by a run of word characters and `>`, and for which the
/// matching `</tag>` occurs later, paired with the first such closing tag. Returns the start,
/// the end and the tag name.
fn first_xml_block(text: &str) -> Option<(usize, usize, &str)> {
    static OPEN: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!(r"<({PY_WORD}+)>")).expect("valid regex"));
    let mut from = 0;
    while let Some(caps) = OPEN.captures_at(text, from) {
        let whole = caps.get(0).expect("group 0");
        let tag = group(&caps, 1);
        let close = format!("</{tag}>");
        if let Some(at) = text[whole.end()..].find(&close) {
            return Some((whole.start(), whole.end() + at + close.len(), tag));
        }
        // The next candidate starts at a later `<`; one inside this tag's name cannot exist.
        from = whole.start() + 1;
    }
    None
}

/// p5.js's `remove_xml_blocks`: while the text has an XML block (see `first_xml_block`), the
/// block is replaced by its opening tag repeated once less than the tag opens inside the block
/// (so nested openers survive), and the search starts again from the beginning.
fn remove_xml_blocks(log: String) -> String {
    let mut text = log;
    while let Some((start, end, tag)) = first_xml_block(&text) {
        let opener = format!("<{tag}>");
        let repeats = text[start..end].matches(&opener).count().saturating_sub(1);
        text = format!(
            "{}{}{}",
            &text[..start],
            opener.repeat(repeats),
            &text[end..]
        );
    }
    text
}

/// `parse_log_p5js` (Mocha's failure list): after `ansi_escape`, JSON-looking blocks and XML
/// blocks are removed (`remove_json_blocks`, `remove_xml_blocks`), then every non-overlapping
/// match of: a line start, any whitespace (line breaks too), digits, `)`, then the shortest
/// text (at most 1000 characters, line breaks included) up to a `:`. The match counts when the
/// lines of that text have strictly growing indentation starting above zero (each title line
/// of Mocha's failure header indented more than the last); its stripped lines joined with `:`
/// are then `FAILED`. Only failures are reported.
pub(super) fn parse_log_p5js(log: &str) -> Result<StatusMap, ParseError> {
    let failure = py_search!(r"(?ms)^\s*(\d+)\)(.{0,1000}?):");
    let text = remove_xml_blocks(remove_json_blocks(&ansi_escape(log)));
    let mut map = StatusMap::new();
    for caps in failure.captures_iter(&text) {
        let title = group(&caps, 2);
        let mut last = 0;
        let growing = title.split('\n').all(|line| {
            let indent = pystr::indent(line);
            let deeper = indent > last;
            last = indent;
            deeper
        });
        if growing {
            let names: Vec<&str> = title.split('\n').map(pystr::strip).collect();
            map.insert(names.join(":"), TestStatus::Failed);
        }
    }
    Ok(map)
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

/// `parse_log_jest_json`: stripped lines `[PASSED] name` / `[FAILED] name` (what a jq
/// transform of Jest's `--json` prints) give `PASSED` / `FAILED`.
pub(super) fn parse_log_jest_json(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^\[(PASSED|FAILED)\]\s(.+)$");
    Ok(stripped_matches(log, pattern)
        .map(|caps| {
            let status = if group(&caps, 1) == "PASSED" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            (group(&caps, 2).to_owned(), status)
        })
        .collect())
}

/// `parse_log_vitest` (`--reporter=verbose`): stripped lines `✓ title`, `× title` or
/// `↓ title`, with an optional final ` 12ms` (digits, optional space, optional `m`, optional
/// `s`: a bare trailing number goes too) or ` [skipped]` dropped, give `PASSED`, `FAILED` or
/// `SKIPPED`.
pub(super) fn parse_log_vitest(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$");
    Ok(stripped_matches(log, pattern)
        .map(|caps| {
            let status = match group(&caps, 1) {
                "✓" => TestStatus::Passed,
                "×" => TestStatus::Failed,
                _ => TestStatus::Skipped,
            };
            (group(&caps, 2).to_owned(), status)
        })
        .collect())
}

/// `parse_log_karma`: lines of `log.split('\n')` are read from the one after the first line
/// containing `Starting browser` (later such lines are skipped) until a line starting with
/// `SUMMARY:`. A line is optional leading whitespace, an optional `✔` / `✖`, one whitespace
/// character and the rest (the leading whitespace gives back its last character when no mark
/// follows). Without a mark, a line indented more than the current level pushes its rest as a
/// describe block and one indented less pops one block (only one, whatever the depth) and is
/// otherwise ignored. With a mark, the blocks and the rest joined with ` > ` are `PASSED` (`✔`)
/// or `FAILED` (`✖`).
///
/// Raises `IndexError` when a dedent pops from an empty stack.
pub(super) fn parse_log_karma(log: &str) -> Result<StatusMap, ParseError> {
    let pattern = py_match!(r"^(\s*)?([✔✖])?\s(.*)$");
    let mut map = StatusMap::new();
    let mut level: isize = -1;
    let mut suite: Vec<&str> = Vec::new();
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
        let Some(caps) = pattern.captures(line) else {
            continue;
        };
        let indent = group(&caps, 1);
        let mark = group(&caps, 2);
        let name = group(&caps, 3);
        if !indent.is_empty() && mark.is_empty() {
            let depth = isize::try_from(indent.chars().count()).unwrap_or(isize::MAX);
            if depth > level {
                level = depth;
                suite.push(name);
            } else if depth < level {
                level = depth;
                if suite.pop().is_none() {
                    return Err(ParseError::new(
                        PyException::IndexError,
                        format!("a dedent with no open describe block: {line:?}"),
                    ));
                }
                continue;
            }
        }
        if !mark.is_empty() {
            let mut parts = suite.clone();
            parts.push(name);
            let status = if mark == "✔" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            map.insert(parts.join(" > "), status);
        }
    }
    Ok(map)
}
