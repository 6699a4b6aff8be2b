//! The Python runners: pytest (plain, with parametrised options, the later format, the xdist
//! format of `parse_log_pytest_nebo`), Django's test runner, sympy's, seaborn's and
//! matplotlib's.

use std::sync::LazyLock;

use regex::Regex;

use super::{STATUS_WORDS, ends_with_status, group, starts_with_status};
use crate::error::{ParseError, PyException};
use crate::pystr::{self};
use crate::status::{Status, StatusMap, TestStatus};

/// The `(status token, test name)` of a pytest summary line: a line starting with a status
/// word has ` - ` replaced by a space when it starts with `FAILED`, then is split on
/// whitespace; the first token is the status (kept as written, so `PASSED:` is a token of its
/// own) and the second the name. `None` for other lines and for lines of a single token.
fn status_first(line: &str) -> Option<(String, String)> {
    if !starts_with_status(line) {
        return None;
    }
    let line = if line.starts_with("FAILED") {
        line.replace(" - ", " ")
    } else {
        line.to_owned()
    };
    match pystr::split(&line)[..] {
        [status, name, ..] => Some((status.to_owned(), name.to_owned())),
        _ => None,
    }
}

/// `parse_log_pytest`: every line of `log.split('\n')` that starts with `PASSED`, `FAILED`,
/// `SKIPPED` or `ERROR` and has a second whitespace-separated token maps that token to the
/// first one (see `status_first`); a later line for the same name overwrites it in place.
pub(super) fn parse_log_pytest(log: &str) -> Result<StatusMap, ParseError> {
    Ok(log
        .split('\n')
        .filter_map(status_first)
        .map(|(status, name)| (name, Status::from_token(&status)))
        .collect())
}

/// `parse_log_pytest_options`: `parse_log_pytest`, with the parametrisation of each name
/// rewritten. The name is searched for `(.*?)\[(.*)\]` (text up to the first `[`, then up to
/// the last `]`; anything after that `]` is dropped); when the option starts with a single `/`
/// and has no `*`, it is cut to `/` and its last `/`-separated piece (a path parameter keeps
/// only its file name). The name becomes `main[option]`.
pub(super) fn parse_log_pytest_options(log: &str) -> Result<StatusMap, ParseError> {
    static OPTION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(.*?)\[(.*)\]").expect("valid regex"));
    let mut map = StatusMap::new();
    for (status, name) in log.split('\n').filter_map(status_first) {
        let name = match OPTION.captures(&name) {
            Some(caps) => {
                let main = group(&caps, 1);
                let mut option = group(&caps, 2);
                if option.starts_with('/') && !option.starts_with("//") && !option.contains('*') {
                    option = option.rsplit('/').next().unwrap_or(option);
                    format!("{main}[/{option}]")
                } else {
                    format!("{main}[{option}]")
                }
            }
            None => name,
        };
        map.insert(name, Status::from_token(&status));
    }
    Ok(map)
}

/// A line with colour codes of the form `[<digits>m` removed (the `ESC` before them is not part
/// of the pattern) and then every control character U+0001–U+001F deleted (tabs, carriage
/// returns and U+001C–U+001F included; NUL is kept).
fn without_colour_and_controls(line: &str) -> String {
    static COLOUR: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\[(\d+)m").expect("valid regex"));
    COLOUR
        .replace_all(line, "")
        .chars()
        .filter(|c| !matches!(c, '\u{1}'..='\u{1F}'))
        .collect()
}

fn index_error(line: &str) -> ParseError {
    ParseError::new(
        PyException::IndexError,
        format!("a status line of one token: {line:?}"),
    )
}

/// `parse_log_pytest_v2`: each line of `log.split('\n')` is cleaned (see
/// `without_colour_and_controls`); one starting with a status word (after the `FAILED` ` - `
/// rewrite) maps its second token to its first, else one ending with a status word maps its
/// first token to its second (older pytest's `name STATUS`; for `a b PASSED` that is `b`).
///
/// Raises `IndexError` where the line has a single token (`PASSED` alone, `xFAILED`), as
/// upstream's unchecked `[1]` does.
pub(super) fn parse_log_pytest_v2(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    for raw in log.split('\n') {
        let mut line = without_colour_and_controls(raw);
        if starts_with_status(&line) {
            if line.starts_with("FAILED") {
                line = line.replace(" - ", " ");
            }
            match pystr::split(&line)[..] {
                [status, name, ..] => map.insert(name, Status::from_token(status)),
                _ => return Err(index_error(&line)),
            }
        } else if ends_with_status(&line) {
            match pystr::split(&line)[..] {
                [name, status, ..] => map.insert(name, Status::from_token(status)),
                _ => return Err(index_error(&line)),
            }
        }
    }
    Ok(map)
}

/// `parse_log_seaborn`, on each line of `log.split('\n')`:
/// - starting with `FAILED`: the second token is `FAILED`;
/// - else containing ` PASSED `: when the second token is exactly `PASSED`, the first token is
///   `PASSED`;
/// - else starting with `PASSED`: the second token is `PASSED`.
///
/// Raises `IndexError` when the token it reads is missing (`FAILED` alone, ` PASSED ` alone).
pub(super) fn parse_log_seaborn(log: &str) -> Result<StatusMap, ParseError> {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let tokens = pystr::split(line);
        let token = |at: usize| tokens.get(at).copied().ok_or_else(|| index_error(line));
        if line.starts_with("FAILED") {
            map.insert(token(1)?, TestStatus::Failed);
        } else if line.contains(" PASSED ") {
            if token(1)? == "PASSED" {
                map.insert(token(0)?, TestStatus::Passed);
            }
        } else if line.starts_with("PASSED") {
            map.insert(token(1)?, TestStatus::Passed);
        }
    }
    Ok(map)
}

/// `parse_log_sympy`: first, every non-overlapping match of `(_*) (.*)\.py:(.*) (_*)` in the
/// whole log (greedy, within one line) puts `{file}.py:{rest}` as `FAILED`. Then each stripped
/// line starting with `test_` has a trailing `[FAIL]` / `[OK]` cut off (from the last `[`,
/// stripped again) and, by its ending, its first token is put as `ERROR` (` E`), `FAILED`
/// (` F`) or `PASSED` (` ok`).
pub(super) fn parse_log_sympy(log: &str) -> Result<StatusMap, ParseError> {
    static HEADER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(_*) (.*)\.py:(.*) (_*)").expect("valid regex"));
    let mut map = StatusMap::new();
    for caps in HEADER.captures_iter(log) {
        map.insert(
            format!("{}.py:{}", group(&caps, 2), group(&caps, 3)),
            TestStatus::Failed,
        );
    }
    for raw in log.split('\n') {
        let mut line = pystr::strip(raw);
        if !line.starts_with("test_") {
            continue;
        }
        if line.ends_with("[FAIL]") || line.ends_with("[OK]") {
            line = pystr::strip(line.rfind('[').map_or(line, |at| &line[..at]));
        }
        let first = || pystr::split(line)[0];
        if line.ends_with(" E") {
            map.insert(first(), TestStatus::Error);
        }
        if line.ends_with(" F") {
            map.insert(first(), TestStatus::Failed);
        }
        if line.ends_with(" ok") {
            map.insert(first(), TestStatus::Passed);
        }
    }
    Ok(map)
}

/// `parse_log_matplotlib`: `parse_log_pytest` after replacing `MouseButton.LEFT` with `1` and
/// `MouseButton.RIGHT` with `3` in every line.
pub(super) fn parse_log_matplotlib(log: &str) -> Result<StatusMap, ParseError> {
    Ok(log
        .split('\n')
        .filter_map(|line| {
            status_first(
                &line
                    .replace("MouseButton.LEFT", "1")
                    .replace("MouseButton.RIGHT", "3"),
            )
        })
        .map(|(status, name)| (name, Status::from_token(&status)))
        .collect())
}

/// `parse_log_pytest_nebo`: each line of `log.splitlines()` is cleaned (see
/// `without_colour_and_controls`) and stripped, then the first of these that applies wins:
/// 1. `[gwN] [progress] WORD rest`, where `WORD` (a run of word characters) is one of the four
///    status words: the text of `rest` before its first ` in `, stripped, gets `WORD` (with
///    another word the line falls through to the next forms);
/// 2. `name STATUS [progress] in 1.5s` (name starting with a non-space): the stripped name
///    gets the status;
/// 3. `STATUS rest`: the text of `rest` before its first ` in `, stripped, gets the status.
pub(super) fn parse_log_pytest_nebo(log: &str) -> Result<StatusMap, ParseError> {
    let xdist = py_match!(r"^\[gw\d+\]\s+\[[^\]]*\]\s+(\w+)\s+(.*)$");
    static STANDARD: LazyLock<Regex> = LazyLock::new(|| {
        let words = STATUS_WORDS.join("|");
        crate::pyre::compile_match(&format!(
            r"^([^\s].*?)\s+({words})\s+\[[^\]]*\]\s+in\s+\d+(?:\.\d+)?s$"
        ))
    });
    static STATUS_FIRST: LazyLock<Regex> = LazyLock::new(|| {
        let words = STATUS_WORDS.join("|");
        crate::pyre::compile_match(&format!(r"^({words})\s+(.*)$"))
    });
    let before_in = |rest: &str| pystr::strip(pystr::before_first(rest, " in ")).to_owned();
    let mut map = StatusMap::new();
    for raw in pystr::splitlines(log) {
        let cleaned = without_colour_and_controls(raw);
        let line = pystr::strip(&cleaned);
        if let Some(caps) = xdist.captures(line) {
            let word = group(&caps, 1);
            if STATUS_WORDS.contains(&word) {
                map.insert(before_in(group(&caps, 2)), Status::from_token(word));
                continue;
            }
        }
        if let Some(caps) = STANDARD.captures(line) {
            map.insert(
                pystr::strip(group(&caps, 1)),
                Status::from_token(pystr::strip(group(&caps, 2))),
            );
            continue;
        }
        if let Some(caps) = STATUS_FIRST.captures(line) {
            map.insert(
                before_in(group(&caps, 2)),
                Status::from_token(pystr::strip(group(&caps, 1))),
            );
        }
    }
    Ok(map)
}
