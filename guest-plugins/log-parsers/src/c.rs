//! The parsers of SWE-bench 5.0.2's C and C++ repositories: `parse_log_redis`,
//! `parse_log_jq`, `parse_log_doctest`, `parse_log_micropython_test` and
//! `parse_log_googletest`.
//!
//! All but doctest match one pattern against each stripped line (`log.split('\n')`, Python's
//! `strip()`); a later line for the same name overwrites the status, in the first line's place.

use std::sync::LazyLock;

use regex::Regex;

use crate::error::{ParseError, PyException};
use crate::pyre;
use crate::pystr;
use crate::status::{StatusMap, TestStatus};
use crate::xml;

/// `[ok]: name (12 ms)`, `[err]: name in tests/unit/x.tcl`, `[skip]: name`, `[ignore]: name`.
static REDIS: LazyLock<Regex> = LazyLock::new(|| {
    pyre::compile_match(r"^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$")
});
/// The ` in <file>` tail that a failing redis test's line carries.
static REDIS_FILE: LazyLock<Regex> = LazyLock::new(|| pyre::compile(r"\s+in\s+\S+$"));
static JQ: LazyLock<Regex> = LazyLock::new(|| pyre::compile_match(r"^\s*(PASS|FAIL):\s(.+)$"));
static MICROPYTHON: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^(pass|FAIL|skip)\s+(.+)$"));
static GOOGLETEST: LazyLock<Regex> =
    LazyLock::new(|| pyre::compile_match(r"^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$"));

/// `parse_log_redis` (redis and valkey's `runtest`): `[ok]` passed, `[err]` failed, `[skip]`
/// and `[ignore]` skipped. The name is the shortest text before an optional ` (N ms)` tail;
/// `[err]` names also lose a trailing ` in <file>` (any whitespace around `in`).
pub(crate) fn parse_redis(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(caps) = REDIS.captures(pystr::strip(line)) else {
            continue;
        };
        let name = &caps[2];
        match &caps[1] {
            "ok" => map.insert(name, TestStatus::Passed),
            "err" => map.insert(REDIS_FILE.replace_all(name, ""), TestStatus::Failed),
            _ => map.insert(name, TestStatus::Skipped),
        }
    }
    map
}

/// `parse_log_jq`: `PASS: name` and `FAIL: name` lines (jq's `tests/*test` scripts), the name
/// being everything after the single whitespace character that follows the colon.
pub(crate) fn parse_jq(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &JQ, (2, 1), |word| match word {
        "PASS" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_micropython_test` (`run-tests.py`): `pass name`, `FAIL name`, `skip name`; the
/// case of the word matters (`PASS` or `fail` lines are ignored).
pub(crate) fn parse_micropython_test(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &MICROPYTHON, (2, 1), |word| match word {
        "pass" => Some(TestStatus::Passed),
        "FAIL" => Some(TestStatus::Failed),
        _ => Some(TestStatus::Skipped),
    })
}

/// `parse_log_googletest`: lines ending in `(...)` with an `[ OK ]` or `[ FAILED ]` marker
/// before the name. The leading `.*` is greedy, so the last marker on the line that still
/// leaves ` name (...)` after it wins; the name runs up to the last ` (` of the line. Neither
/// `[ RUN ]` nor `[ SKIPPED ]` counts, so skipped tests are absent; `[  FAILED  ] Suite.t` lines
/// of the final summary have no `(...)` and do not count either, but `[  FAILED  ] 1 test,
/// listed below:`-style lines with a parenthesis would.
pub(crate) fn parse_googletest(log: &str) -> StatusMap {
    pyre::match_stripped_lines(log, &GOOGLETEST, (2, 1), |word| match word {
        "OK" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

/// `parse_log_doctest` (the test binary run with `-s -r=xml`): the XML report is cut out of the
/// log from the first `<doctest` to the first `</doctest>` after it and parsed with
/// ElementTree. Every `SubCase` anywhere under every `TestCase` anywhere under the root gives
/// `"{TestCase name} > {SubCase name}"` (a missing attribute reads `None`), passed when every
/// `Expression` anywhere under the subcase has `success="true"` (so a subcase without
/// expressions passes), else failed. Test cases without subcases are not reported.
///
/// Quirk: when `</doctest>` is missing, upstream's end index is `-1 + len("</doctest>")` = 9, so
/// the cut is `log[start:9]` — never well-formed XML, so the parse raises `ParseError`, as it
/// does for any other malformed report. No `<doctest` at all gives an empty map.
pub(crate) fn parse_doctest(log: &str) -> Result<StatusMap, ParseError> {
    const START: &str = "<doctest";
    const END: &str = "</doctest>";
    let mut map = StatusMap::new();
    let Some(start) = log.find(START) else {
        return Ok(map);
    };
    let report = match log[start..].find(END) {
        Some(end) => &log[start..start + end + END.len()],
        // `log[start:9]`, counted in characters as Python slices.
        None => {
            let nine = log.char_indices().nth(9).map_or(log.len(), |(at, _)| at);
            log.get(start..nine).unwrap_or("")
        }
    };
    let document = xml::parse(report)
        .map_err(|err| ParseError::new(PyException::XmlParseError, err.to_string()))?;
    for case in document.descendants_named(document.root(), "TestCase") {
        let case_name = document.attribute(case, "name").unwrap_or("None");
        for subcase in document.descendants_named(case, "SubCase") {
            let subcase_name = document.attribute(subcase, "name").unwrap_or("None");
            let passed = document
                .descendants_named(subcase, "Expression")
                .all(|expr| document.attribute(expr, "success") == Some("true"));
            let status = if passed {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            map.insert(format!("{case_name} > {subcase_name}"), status);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use crate::parser::Parser;
    use crate::parser::check_parser as check;

    #[test]
    fn redis_lines() {
        check(
            Parser::Redis,
            "[ok]: PING works (2 ms)\n[err]: SET fails in tests/unit/type.tcl\n  [skip]: slow one\n[ignore]: not here\n[ok]: PING works\n",
            &[
                ("PING works", "PASSED"),
                ("SET fails", "FAILED"),
                ("slow one", "SKIPPED"),
                ("not here", "SKIPPED"),
            ],
        );
        // The duration group is optional and the name lazy: `(2ms)` is a duration too.
        check(Parser::Redis, "[ok]: a (b) (2ms)", &[("a (b)", "PASSED")]);
        check(Parser::Redis, "[ok]:x\n[OK]: y\n", &[]);
    }

    #[test]
    fn jq_and_micropython_lines() {
        check(
            Parser::Jq,
            "PASS: tests/jqtest\n  FAIL: tests/mantest \nPASS:x\n",
            &[("tests/jqtest", "PASSED"), ("tests/mantest", "FAILED")],
        );
        check(
            Parser::MicropythonTest,
            "pass  basics/a.py\nFAIL basics/b.py\nskip c.py\nPASS d.py\n",
            &[
                ("basics/a.py", "PASSED"),
                ("basics/b.py", "FAILED"),
                ("c.py", "SKIPPED"),
            ],
        );
    }

    #[test]
    fn googletest_lines() {
        check(
            Parser::Googletest,
            "[ RUN      ] Math.Adds\n[       OK ] Math.Adds (0 ms)\n[  FAILED  ] Math.Breaks (1 ms)\n[  SKIPPED ] Math.Later (0 ms)\n[  FAILED  ] Math.Breaks\n[==========] 3 tests ran. (1 ms total)\n",
            &[("Math.Adds", "PASSED"), ("Math.Breaks", "FAILED")],
        );
        // Parameterised names keep their `/0` and the ` (...)` is the last one on the line.
        check(
            Parser::Googletest,
            "[  FAILED  ] P/T.Is/0, where GetParam() = 1 (0 ms)",
            &[("P/T.Is/0, where GetParam() = 1", "FAILED")],
        );
    }

    #[test]
    fn doctest_report() {
        let log = r#"noise <doctest binary="t"><TestSuite><TestCase name="vec &lt;int&gt;"><SubCase name="push"><Expression success="true"/></SubCase><SubCase name="pop"><Expression success="true"/><Expression success="false"/></SubCase></TestCase><TestCase name="empty"/><TestCase><SubCase/></TestCase></TestSuite></doctest> tail"#;
        check(
            Parser::Doctest,
            log,
            &[
                ("vec <int> > push", "PASSED"),
                ("vec <int> > pop", "FAILED"),
                ("None > None", "PASSED"),
            ],
        );
        check(Parser::Doctest, "no report here", &[]);
        let raises = |log: &str| {
            let err = Parser::Doctest
                .try_parse(log, &Default::default())
                .unwrap_err();
            assert_eq!(err.exception.as_str(), "ParseError", "{log:?}");
        };
        raises("<doctest><TestCase>");
        raises("<doctest><a></b></doctest>");
        raises("xxxxxxxxxxxxx<doctest></doctest2>");
    }
}
