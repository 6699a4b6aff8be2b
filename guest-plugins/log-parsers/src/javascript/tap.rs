//! `parse_log_tap`: Test Anything Protocol output (three.js, axios; Node's `--test-reporter
//! tap`).

use std::sync::LazyLock;

use regex::Regex;

use crate::pyre;
use crate::status::{StatusMap, TestStatus};

static RESULT: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^(ok|not ok) (\d+) (.+)$"));

/// `parse_log_tap`: stripped `ok N description` / `not ok N description` lines, passed /
/// failed under the whole description, so TAP's ` - ` separator stays in the name (`- adds`)
/// and directives too: `ok 3 - later # SKIP` is a passed test named `- later # SKIP`, and a
/// `# TODO` failure is failed. Subtests (indented) count under their own description, and the
/// description must follow the number after exactly one space.
pub(crate) fn parse_tap(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &RESULT, (3, 1), |word| match word {
        "ok" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn tap_lines() {
        check(
            Parser::Tap,
            "TAP version 13\n# Subtest: math\n    ok 1 - adds\n    not ok 2 - divides [by zero]\n    ok 3 - later # SKIP\n1..3\nnot ok 1 - math\nok 4\nok  5 - two spaces\n",
            &[
                ("- adds", "PASSED"),
                ("- divides [by zero]", "FAILED"),
                ("- later # SKIP", "PASSED"),
                ("- math", "FAILED"),
            ],
        );
    }
}
