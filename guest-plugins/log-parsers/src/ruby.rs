//! The parsers of SWE-bench 5.0.2's Ruby repositories: `parse_log_minitest`,
//! `parse_log_cucumber`, `parse_log_ruby_unit`, `parse_log_rspec_transformed_json` and the
//! per-instance dispatcher `parse_log_jekyll`.
//!
//! Each matches one pattern at the start of every stripped line.

use std::sync::LazyLock;

use regex::Regex;

use crate::error::{ParseError, PyException};
use crate::parser::LogContext;
use crate::pyre::{self, PY_NON_WORD};
use crate::status::{StatusMap, TestStatus};

static MINITEST: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^(.+)\. .*=.*(\.|F|E).*$"));
static CUCUMBER: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^(.*) \.+(\.|F)"));
/// Upstream's `(\.|E\b|F\b|O\b)`, with Python's `\b` after a word character spelled out as "a
/// non-word character or the end".
static RUBY_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    pyre::compile_match(&format!(
        r"^\s*(?:test: )?(.+):\s+(\.|[EFO](?:{PY_NON_WORD}|$))"
    ))
});
static RSPEC: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"(.+) - (passed|failed)"));

/// `parse_log_minitest`: a line with `". "` somewhere, a `=` after it and one of `.`, `F`, `E`
/// after that. Every part is greedy: the name is the text before the last `". "` that still
/// leaves such a tail, and the outcome is the last `.`/`F`/`E` after the last `=` that has one
/// after it: `.` passed, `F` or `E` failed. So `name. = 0.00 s = S` (a skip) passes on the `.`
/// of `0.00`, and the stock `-v` format (`Class#test = 0.00 s = .`, no `". "`) never matches.
pub(crate) fn parse_minitest(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &MINITEST, (1, 2), |outcome| match outcome {
        "." => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_cucumber` (`--format progress` with scenario names): a line containing ` .` where
/// the run of dots ends in one more `.` (passed) or an `F` (failed); the name is the text
/// before the last such run. Anything may follow.
pub(crate) fn parse_cucumber(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &CUCUMBER, (1, 2), |outcome| match outcome {
        "." => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_ruby_unit` (test-unit's verbose output, `test_name(Class): .`): an optional
/// `test: ` prefix, the name up to the last `:` followed by whitespace and an outcome, which is
/// `.` (passed), or `E`/`F` (failed) or `O` (omitted: skipped) not followed by a word character.
/// Pending (`P`) and notifications (`N`) do not count.
pub(crate) fn parse_ruby_unit(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &RUBY_UNIT, (1, 2), |outcome| {
        match outcome.chars().next() {
            Some('.') => Some(TestStatus::Passed),
            Some('O') => Some(TestStatus::Skipped),
            _ => Some(TestStatus::Failed),
        }
    })
}

/// `parse_log_rspec_transformed_json`: rspec's JSON report turned into `full description -
/// passed` lines (by the eval script). Anything before the last ` - passed` / ` - failed` on
/// the line is the name, and anything may follow the word (`- failedX` counts). Upstream's
/// `pending` branch is unreachable, so pending examples are absent.
pub(crate) fn parse_rspec_transformed_json(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &RSPEC, (1, 2), |outcome| match outcome {
        "passed" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_jekyll`: jekyll's instances ran different runners, so the parser is chosen by the
/// second `-`-separated field of the instance id (`jekyll__jekyll-9141` → `9141`): 9141, 8047
/// and 8167 use [`parse_minitest`], 8761 and 8771 [`parse_cucumber`]. Any other instance raises
/// `ValueError`, and an id without `-` raises `IndexError`.
pub(crate) fn parse_jekyll(log: &str, ctx: &LogContext) -> Result<StatusMap, ParseError> {
    let Some(pr) = ctx.instance_id.split('-').nth(1) else {
        return Err(ParseError::new(
            PyException::IndexError,
            format!("instance id `{}` has no `-`", ctx.instance_id),
        ));
    };
    match pr {
        "9141" | "8047" | "8167" => Ok(parse_minitest(log)),
        "8761" | "8771" => Ok(parse_cucumber(log)),
        _ => Err(ParseError::new(
            PyException::ValueError,
            format!("unknown jekyll instance id `{}`", ctx.instance_id),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::parser::check_parser as check;
    use crate::parser::{LogContext, Parser};

    #[test]
    fn minitest_lines() {
        check(
            Parser::Minitest,
            "TestSite#test_a. = 0.00 s = .\nTestSite#test_b. = 0.01 s = F\nTestSite#test_c. = 0.00 s = E\nTestSite#test_d. = 0.00 s = S\n",
            &[
                ("TestSite#test_a", "PASSED"),
                ("TestSite#test_b", "FAILED"),
                ("TestSite#test_c", "FAILED"),
                ("TestSite#test_d", "PASSED"),
            ],
        );
        // The stock `-v` format has no `". "` before the `=`.
        check(Parser::Minitest, "TestSite#test_a = 0.00 s = .", &[]);
    }

    #[test]
    fn cucumber_and_ruby_unit_lines() {
        check(
            Parser::Cucumber,
            "Scenario one ....\nScenario two ..F--\nnothing\n",
            &[("Scenario one", "PASSED"), ("Scenario two", "FAILED")],
        );
        check(
            Parser::RubyUnit,
            "test_a(TestX): .\ntest: b c(TestX):\tE\ntest_d(TestX): Ox\ntest_e(TestX): O\ntest_f(TestX): F: boom\n",
            &[
                ("test_a(TestX)", "PASSED"),
                ("b c(TestX)", "FAILED"),
                ("test_e(TestX)", "SKIPPED"),
                ("test_f(TestX)", "FAILED"),
            ],
        );
    }

    #[test]
    fn rspec_and_jekyll() {
        check(
            Parser::RspecTransformedJson,
            "A thing does x - passed\nA thing - does y - failed\nA thing z - pending\n",
            &[("A thing does x", "PASSED"), ("A thing - does y", "FAILED")],
        );
        let ctx = |id: &str| LogContext {
            instance_id: id.to_owned(),
            ..LogContext::default()
        };
        let log = "T#t. = 0 = .\nScenario ..F\n";
        let parsed = |id: &str| {
            Parser::Jekyll
                .try_parse(log, &ctx(id))
                .map(|map| map.len())
                .map_err(|err| err.exception.as_str())
        };
        assert_eq!(parsed("jekyll__jekyll-9141"), Ok(1));
        assert_eq!(parsed("jekyll__jekyll-8771"), Ok(1));
        assert_eq!(parsed("jekyll__jekyll-1"), Err("ValueError"));
        assert_eq!(parsed("jekyll"), Err("IndexError"));
    }
}
