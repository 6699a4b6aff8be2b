//! `parse_log_quarto_cli`: quarto-cli's Deno test output (`[smoke] > file.qmd ... ok`).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::{NoExpand, Regex};

use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static TEST_LINE: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\[(smoke|unit)\]"));
/// Temporary paths that vary between runs, replaced by a per-log counter.
static TMP_PATHS: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        pyre::compile(r"/tmp/(\w+)\.qmd"),
        pyre::compile(r"/tmp/(\w+)/"),
    ]
});
static RESULT_LINE: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match("test result:"));

/// `parse_log_quarto_cli`: reading stops at the first line containing `ERRORS` or
/// `failures:`. A line containing `[smoke]` or `[unit]` is a test line: first, for each of
/// `/tmp/<word>.qmd` and `/tmp/<word>/` in turn, if the line has one, the first such path gets
/// the next number (once per log: the same path keeps its number) and every path of that kind
/// on the line is replaced by `/tmp/<number>` (all of them by the first one's number, the
/// `.qmd` or `/` included). The name is the text before the first `...`, stripped. A line that
/// starts with `test result:`, or contains `passed`, `failed` and `steps`, or `34mINFO`, is
/// not a result; otherwise `32mok` (a green `ok`) passes it, `31mFAILED` fails it, and a name
/// not yet in the map is failed.
pub(crate) fn parse_quarto_cli(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let mut numbers: HashMap<String, usize> = HashMap::new();
    for line in log.split('\n') {
        if line.contains("ERRORS") || line.contains("failures:") {
            break;
        }
        if !TEST_LINE.is_match(line) {
            continue;
        }
        let mut line = line.to_owned();
        for pattern in TMP_PATHS.iter() {
            let Some(found) = pattern.find(&line) else {
                continue;
            };
            let next = numbers.len();
            let number = *numbers.entry(found.as_str().to_owned()).or_insert(next);
            let replacement = format!("/tmp/{number}");
            line = pattern
                .replace_all(&line, NoExpand(&replacement))
                .into_owned();
        }
        let name = pystr::strip(pystr::before_first(&line, "..."));
        let rejected = RESULT_LINE.is_match(&line)
            || (line.contains("passed") && line.contains("failed") && line.contains("steps"))
            || line.contains("34mINFO");
        if rejected {
            continue;
        }
        if line.contains("32mok") {
            map.insert(name, TestStatus::Passed);
        } else if line.contains("31mFAILED") || !map.contains_key(name) {
            // A red `FAILED`, or no status at all for a name not seen yet.
            map.insert(name, TestStatus::Failed);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn quarto_lines() {
        check(
            Parser::QuartoCli,
            "[smoke] > docs/a.qmd ... \x1b[0m\x1b[32mok\x1b[0m (1s)\n[smoke] > /tmp/abc.qmd and /tmp/xyz.qmd ... \x1b[31mFAILED\x1b[0m\n[smoke] > /tmp/abc.qmd ... 32mok\n[unit] > pending ...\n[unit] > docs/a.qmd ...\n[smoke] test result: FAILED. 1 passed; 1 failed\n[unit] > \x1b[34mINFO x\nERRORS\n[smoke] > after ... 32mok\n",
            &[
                ("[smoke] > docs/a.qmd", "PASSED"),
                ("[smoke] > /tmp/0 and /tmp/0", "FAILED"),
                ("[smoke] > /tmp/0", "PASSED"),
                ("[unit] > pending", "FAILED"),
                ("[unit] > docs/a.qmd", "FAILED"),
                // Without `steps` the summary line is a test line like any other.
                ("[smoke] test result: FAILED. 1 passed; 1 failed", "FAILED"),
            ],
        );
    }
}
