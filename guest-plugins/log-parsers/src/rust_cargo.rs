//! `parse_log_cargo`, SWE-bench 5.0.2's parser for Rust repositories (`cargo test`).

use std::sync::LazyLock;

use regex::Regex;

use crate::pyre;
use crate::status::{StatusMap, TestStatus};

static RESULT: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$"));

/// `parse_log_cargo`: libtest's `test path::name ... ok` / `... FAILED` lines, stripped. The
/// name is one whitespace-free token, so doc tests (`test src/lib.rs - f (line 3) ... ok`) and
/// anything with a space never count; `ignored` (and `ignored, reason`) tests are left out, as
/// is a line whose outcome is followed by anything (libtest's `ok` after captured output on
/// the same line, for instance).
pub(crate) fn parse_cargo(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &RESULT, (1, 2), |outcome| match outcome {
        "ok" => Some(TestStatus::Passed),
        "FAILED" => Some(TestStatus::Failed),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn cargo_lines() {
        check(
            Parser::Cargo,
            "running 3 tests\ntest tests::adds ... ok\ntest tests::broken ... FAILED\ntest tests::later ... ignored\ntest src/lib.rs - f (line 3) ... ok\n  test   m::spaced   ...   ok  \ntest result: FAILED. 1 passed; 1 failed\n",
            &[
                ("tests::adds", "PASSED"),
                ("tests::broken", "FAILED"),
                ("m::spaced", "PASSED"),
            ],
        );
        check(Parser::Cargo, "test a ... ok, slow", &[]);
    }
}
