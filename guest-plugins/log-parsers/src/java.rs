//! The parsers of SWE-bench 5.0.2's Java repositories: `parse_log_maven`, `parse_log_ant` and
//! `parse_log_gradle_custom`.

use std::collections::VecDeque;
use std::sync::LazyLock;

use regex::Regex;

use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};

static MAVEN_TEST: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^.*-Dtest=(\S+).*$"));
static MAVEN_RESULT: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^.*BUILD (SUCCESS|FAILURE)$"));
static ANT: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$"));
static GRADLE_FULL: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^([^>].+)\s+(PASSED|FAILED)$"));
static GRADLE_NAME: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^([^>]\S*\s+>\s+\S+)$"));

fn maven_status(word: &str) -> TestStatus {
    if word == "SUCCESS" {
        TestStatus::Passed
    } else {
        TestStatus::Failed
    }
}

/// `parse_log_maven`: one `mvn ... -Dtest=Name ...` command per test, traced by `set -x`, and
/// its `BUILD SUCCESS` / `BUILD FAILURE` line. Per stripped line: a `-Dtest=` (the last one on
/// the line, value up to the next whitespace) queues a name; a line ending in `BUILD SUCCESS`
/// or `BUILD FAILURE` (possibly the same line) gives the oldest queued name that status, or,
/// with none queued, is kept for later. At the end, names still queued take the kept results
/// in order. Names that never get a result are left out (upstream prints a warning).
pub(crate) fn parse_maven(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let mut pending: VecDeque<&str> = VecDeque::new();
    let mut unmatched: VecDeque<&str> = VecDeque::new();
    for line in log.split('\n') {
        let line = pystr::strip(line);
        if let Some(caps) = MAVEN_TEST.captures(line) {
            pending.push_back(caps.get(1).map_or("", |m| m.as_str()));
        }
        if let Some(caps) = MAVEN_RESULT.captures(line) {
            let word = caps.get(1).map_or("", |m| m.as_str());
            match pending.pop_front() {
                Some(name) => map.insert(name, maven_status(word)),
                None => unmatched.push_back(word),
            }
        }
    }
    while let (Some(name), Some(word)) = (pending.front(), unmatched.front()) {
        map.insert(*name, maven_status(word));
        pending.pop_front();
        unmatched.pop_front();
    }
    map
}

/// `parse_log_ant`: `[junit] [PASS] name` lines (a custom JUnit formatter), stripped; `[FAIL]`
/// and `[ERR]` are failures. The name is what follows the whitespace after the bracket.
pub(crate) fn parse_ant(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &ANT, (2, 1), |word| match word {
        "PASS" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

fn gradle_status(word: &str) -> TestStatus {
    if word == "PASSED" {
        TestStatus::Passed
    } else {
        TestStatus::Failed
    }
}

/// `parse_log_gradle_custom`: Gradle's `Class > method PASSED` lines, stripped. A line not
/// starting with `>` and ending in whitespace + `PASSED`/`FAILED` is a result; the name keeps
/// all but the last of the whitespace before the word (the name part is greedy). A line that is
/// just `Name > method` (one token before the `>`, one after) is remembered, and a later line
/// that is exactly `PASSED` or `FAILED` gives it that status (output interleaved between the
/// two is skipped); a result line or a new name line replaces what is remembered. `SKIPPED` is
/// never read.
pub(crate) fn parse_gradle_custom(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let mut pending: Option<&str> = None;
    for line in log.split('\n') {
        let line = pystr::strip(line);
        if let Some(caps) = GRADLE_FULL.captures(line) {
            let name = caps.get(1).map_or("", |m| m.as_str());
            map.insert(name, gradle_status(&caps[2]));
            pending = None;
            continue;
        }
        if let Some(caps) = GRADLE_NAME.captures(line) {
            pending = caps.get(1).map(|m| m.as_str());
            continue;
        }
        if let Some(name) = pending
            && matches!(line, "PASSED" | "FAILED")
        {
            map.insert(name, gradle_status(line));
            pending = None;
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn maven_pairs_commands_with_results() {
        check(
            Parser::Maven,
            "+ mvn test -Dtest=ATest#one -q\n[INFO] BUILD SUCCESS\n+ mvn test -Dtest=ATest#two\n+ mvn test -Dtest=ATest#three\n[INFO] BUILD FAILURE\n[INFO] BUILD SUCCESS\n",
            &[
                ("ATest#one", "PASSED"),
                ("ATest#two", "FAILED"),
                ("ATest#three", "PASSED"),
            ],
        );
        // Results before their commands are kept and paired at the end, in order.
        check(
            Parser::Maven,
            "BUILD FAILURE\nBUILD SUCCESS\n-Dtest=a\n-Dtest=b\n-Dtest=c\n",
            &[("a", "FAILED"), ("b", "PASSED")],
        );
        // One line can queue and resolve.
        check(Parser::Maven, "-Dtest=x BUILD SUCCESS", &[("x", "PASSED")]);
    }

    #[test]
    fn ant_lines() {
        check(
            Parser::Ant,
            "    [junit] [PASS] a.B.c\n[junit]  [ERR]  a.B.d\n[junit] [FAIL] a.B.e\n[junit] [SKIP] a.B.f\n",
            &[
                ("a.B.c", "PASSED"),
                ("a.B.d", "FAILED"),
                ("a.B.e", "FAILED"),
            ],
        );
    }

    #[test]
    fn gradle_lines() {
        check(
            Parser::GradleCustom,
            "a.BTest > one PASSED\na.BTest > two  FAILED\na.BTest > three\nWARNING: noise\nPASSED\nPASSED\n> Task :test FAILED\na.BTest > four SKIPPED\n",
            &[
                ("a.BTest > one", "PASSED"),
                ("a.BTest > two ", "FAILED"),
                ("a.BTest > three", "PASSED"),
            ],
        );
    }
}
