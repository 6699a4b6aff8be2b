//! `parse_log_phpunit`, SWE-bench 5.0.2's parser for PHP repositories (`phpunit --testdox`).

use std::sync::LazyLock;

use regex::Regex;

use crate::pyre;
use crate::status::{StatusMap, TestStatus};

/// A testdox class heading, `Calculator (Tests\Calculator)`, matched on the raw line.
static SUITE: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^(\w.+) \(.+\)$"));
/// A testdox result, ` ✔ Adds numbers`, matched on the raw line.
static TEST: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^\s*([✔✘↩])\s*(.*)$"));

/// `parse_log_phpunit`: `--testdox` output. A line starting with a word character and ending
/// in ` (...)` sets the suite (its text up to the last ` (` that leaves a non-empty `(...)`);
/// a `✔` / `✘` / `↩` line is passed / failed / skipped under `"{suite} > {text}"`, where the
/// text is everything after the mark and any whitespace, and the suite reads `None` before the
/// first heading. Incomplete (`∅`) and risky (`☢`) tests are left out; a heading-like line
/// inside a failure's details (`Failed asserting that 1 matches expected 2 (x).`) becomes the
/// suite of the results after it.
pub(crate) fn parse_phpunit(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let mut suite: Option<&str> = None;
    for line in log.split('\n') {
        if let Some(caps) = SUITE.captures(line) {
            suite = caps.get(1).map(|m| m.as_str());
            continue;
        }
        let Some(caps) = TEST.captures(line) else {
            continue;
        };
        let status = match &caps[1] {
            "✔" => TestStatus::Passed,
            "✘" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        map.insert(
            format!("{} > {}", suite.unwrap_or("None"), &caps[2]),
            status,
        );
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn phpunit_testdox() {
        check(
            Parser::Phpunit,
            " ✔ Orphan\nCalculator (Tests\\Calculator)\n ✔ Adds numbers\n ✘ Divides [by zero]\n   │ Failed asserting that 1 matches expected 2.\n ↩ Later\n ∅ Incomplete\n",
            &[
                ("None > Orphan", "PASSED"),
                ("Calculator > Adds numbers", "PASSED"),
                ("Calculator > Divides [by zero]", "FAILED"),
                ("Calculator > Later", "SKIPPED"),
            ],
        );
        // A suite heading is any word-initial line ending in `(...)`.
        check(
            Parser::Phpunit,
            "Time: 00:00.010, Memory: 4.00 MB (x)\n✔a",
            &[("Time: 00:00.010, Memory: 4.00 MB > a", "PASSED")],
        );
    }
}
