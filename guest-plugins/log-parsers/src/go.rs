//! `parse_log_gotest`, SWE-bench 5.0.2's parser for Go repositories (`go test -v`).

use std::sync::LazyLock;

use regex::Regex;

use crate::pyre;
use crate::status::{StatusMap, TestStatus};

static RESULT: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$"));

/// `parse_log_gotest`: the `--- PASS: TestName (0.00s)` lines of `go test -v`, stripped, so
/// subtests (`--- FAIL: TestX/case_1`, indented) count under their full slash path. The name is
/// greedy: it runs to the last ` (` of the line. `=== RUN` lines, package `ok`/`FAIL` lines and
/// `-json` output do not count.
pub(crate) fn parse_gotest(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &RESULT, (2, 1), |word| match word {
        "PASS" => Some(TestStatus::Passed),
        "FAIL" => Some(TestStatus::Failed),
        _ => Some(TestStatus::Skipped),
    })
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn gotest_lines() {
        check(
            Parser::Gotest,
            "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n    --- FAIL: TestAdd/neg_(x) (0.01s)\n--- SKIP: TestLater (0.00s)\nFAIL\nok  \tpkg\t0.1s\n--- PASS: TestAdd (0.00s)",
            &[
                ("TestAdd", "PASSED"),
                ("TestAdd/neg_(x)", "FAILED"),
                ("TestLater", "SKIPPED"),
            ],
        );
        check(Parser::Gotest, "--- PASS: TestNoTime", &[]);
        check(Parser::Gotest, "--- BENCH: X (1s)", &[]);
    }
}
