//! SWE-bench 5's `get_logs_eval` as pure functions over the text of `test_output.txt`: bad-code
//! markers, the start/end marker slice, the whole-log fallback, the evidence check and the
//! exit-code cross-check.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use crate::parser::{LogContext, Parser};
use crate::pystr::{self, PY_SPACE};
use crate::status::StatusMap;

/// The marker the eval script echoes (via `set -x`) right before the test command.
pub const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
/// The marker the eval script echoes right after the test command.
pub const END_TEST_OUTPUT: &str = ">>>>> End Test Output";
/// The line v5's eval script echoes with the test command's exit status.
pub const TEST_EXIT_CODE: &str = ">>>>> Test Exit Code:";

/// The text of a log as Python reads it in text mode: `\r\n` and lone `\r` translated to `\n`
/// (universal newlines). Every function of this crate that looks at a whole log takes one, so
/// the translation cannot be forgotten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogText<'a>(Cow<'a, str>);

impl<'a> LogText<'a> {
    /// Translates the newlines of a decoded log (borrows when it has no `\r`).
    pub fn new(raw: &'a str) -> LogText<'a> {
        LogText(pystr::translate_newlines(raw))
    }

    /// The translated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Legacy markers whose presence anywhere in the log makes it ungradeable (step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BadCode {
    /// `>>>>> Patch Apply Failed`
    PatchApplyFailed,
    /// `>>>>> Reset Failed`
    ResetFailed,
    /// `>>>>> Tests Errored`
    TestsErrored,
    /// `>>>>> Tests Timed Out`
    TestsTimedOut,
}

impl BadCode {
    /// All bad codes in the order upstream checks them.
    pub const ALL: [BadCode; 4] = [
        BadCode::PatchApplyFailed,
        BadCode::ResetFailed,
        BadCode::TestsErrored,
        BadCode::TestsTimedOut,
    ];

    /// The marker text.
    pub fn marker(self) -> &'static str {
        match self {
            BadCode::PatchApplyFailed => ">>>>> Patch Apply Failed",
            BadCode::ResetFailed => ">>>>> Reset Failed",
            BadCode::TestsErrored => ">>>>> Tests Errored",
            BadCode::TestsTimedOut => ">>>>> Tests Timed Out",
        }
    }
}

/// Which test-output markers a log lacks (step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MissingMarkers {
    /// No `>>>>> Start Test Output`.
    Start,
    /// No `>>>>> End Test Output` (for example a run killed at the timeout).
    End,
    /// Neither marker.
    Both,
}

/// Why a log is not gradeable: `get_logs_eval` returned `({}, False)`. The report then has
/// `patch_successfully_applied: false` and no `tests_status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogProblem {
    /// Step 1: a legacy bad-code marker occurs in the log (the first in [`BadCode::ALL`] order).
    BadCode(BadCode),
    /// Step 2: a test-output marker is missing.
    MissingMarkers(MissingMarkers),
    /// Step 5: neither the section nor the whole log parsed into any result, and the log shows
    /// no evidence that a test suite ran.
    NoTestResults,
    /// Step 6: the recorded exit code is not 0 but every parsed result is a success (no
    /// `FAILED` or `ERROR`): the results are not trusted (anti-spoofing, PR #620).
    ExitCodeContradictsResults {
        /// The exit code as written in the log.
        exit_code: ExitCode,
    },
    /// Hardened runs only: the eval script's setup part changed the container outside the
    /// repository where no rule allows it (a planted hook can report anything), as the host saw
    /// in the container's file-system diff.
    EnvironmentChanged {
        /// How many paths.
        paths: usize,
    },
    /// Strict runs only: the patch's product code reaches into the test runner (the host's
    /// tamper check on the patch).
    TamperSuspected {
        /// How many signals.
        signals: usize,
    },
}

impl fmt::Display for LogProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogProblem::BadCode(code) => write!(f, "log contains `{}`", code.marker()),
            LogProblem::MissingMarkers(MissingMarkers::Start) => {
                write!(f, "log lacks `{START_TEST_OUTPUT}`")
            }
            LogProblem::MissingMarkers(MissingMarkers::End) => {
                write!(f, "log lacks `{END_TEST_OUTPUT}`")
            }
            LogProblem::MissingMarkers(MissingMarkers::Both) => {
                write!(f, "log lacks both test-output markers")
            }
            LogProblem::NoTestResults => write!(f, "no test results and no sign a suite ran"),
            LogProblem::ExitCodeContradictsResults { exit_code } => write!(
                f,
                "exit code {} but no FAILED or ERROR result",
                exit_code.as_str()
            ),
            LogProblem::EnvironmentChanged { paths } => write!(
                f,
                "the setup changed {paths} path(s) outside the repository (see swerve.json)"
            ),
            LogProblem::TamperSuspected { signals } => write!(
                f,
                "the patch reaches into the test runner ({signals} tamper signal(s), see swerve.json)"
            ),
        }
    }
}

/// The exit code recorded by the first `>>>>> Test Exit Code: N` line of a log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExitCode(String);

impl ExitCode {
    /// The code of a process's exit status, as the eval script would print it.
    pub fn from_status(status: i64) -> ExitCode {
        ExitCode(status.to_string())
    }

    /// The code as written (optional `-`, then Unicode decimal digits).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether Python's `int()` of the code is 0 (`-0` and `000` are).
    pub fn is_zero(&self) -> bool {
        pystr::digits_are_zero(self.0.trim_start_matches('-'))
    }
}

/// Where the status map of an [`Evaluation`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParsedRegion {
    /// The text between the markers.
    TestSection,
    /// The whole log: the section parsed into nothing (results printed outside the markers
    /// because of stream ordering).
    WholeLog,
}

/// A gradeable log: `get_logs_eval` returned `(status_map, True)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The parsed results (empty only when the evidence check of step 5 passed).
    pub status_map: StatusMap,
    /// Which text the map was parsed from.
    pub region: ParsedRegion,
}

static EXIT_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r">>>>> Test Exit Code:{PY_SPACE}*(-?\d+)")).expect("valid regex")
});

/// Summaries of (JavaScript) test runners that prove a suite ran even though the parser found
/// nothing; searched with `re.MULTILINE`.
static SUITE_EVIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    let s = PY_SPACE;
    let patterns = [
        r"Executed [1-9]\d* of \d+".to_owned(),
        r"TOTAL: [1-9]\d* (?:SUCCESS|FAILED)".to_owned(),
        r"[1-9]\d* passing".to_owned(),
        format!(r"Tests:{s}+[1-9]\d*"),
        format!(r"Test Suites:{s}+(?:\d+ \w+, )*[1-9]\d* total"),
        r"^# tests [1-9]\d*".to_owned(),
        r"[1-9]\d* specs?, \d+ failures?".to_owned(),
        r"': ok$".to_owned(),
    ];
    Regex::new(&format!("(?m){}", patterns.join("|"))).expect("valid regex")
});

/// Steps 1–3 of `get_logs_eval`: the text between the first start marker and the next start
/// marker (or the end of the log), cut at the first end marker within it.
///
/// The markers sit inside `+ : '>>>>> Start Test Output'` trace lines, so the section begins
/// with the rest of that line (`'`). A second start marker printed by the tests cuts the
/// section short, as upstream's `split(START)[1]` does.
pub fn extract_test_section<'t>(log: &'t LogText<'_>) -> Result<&'t str, LogProblem> {
    let text = log.as_str();
    if let Some(code) = BadCode::ALL.into_iter().find(|c| text.contains(c.marker())) {
        return Err(LogProblem::BadCode(code));
    }
    let start = text.find(START_TEST_OUTPUT);
    let has_end = text.contains(END_TEST_OUTPUT);
    let start = match (start, has_end) {
        (Some(start), true) => start,
        (None, true) => return Err(LogProblem::MissingMarkers(MissingMarkers::Start)),
        (Some(_), false) => return Err(LogProblem::MissingMarkers(MissingMarkers::End)),
        (None, false) => return Err(LogProblem::MissingMarkers(MissingMarkers::Both)),
    };
    let after_start = &text[start + START_TEST_OUTPUT.len()..];
    let piece = pystr::before_first(after_start, START_TEST_OUTPUT);
    Ok(pystr::before_first(piece, END_TEST_OUTPUT))
}

/// The first `>>>>> Test Exit Code: N` anywhere in the log (test output can forge it, and in
/// real logs it may even appear inside the test section).
pub fn test_exit_code(log: &LogText<'_>) -> Option<ExitCode> {
    EXIT_CODE
        .captures(log.as_str())
        .map(|caps| ExitCode(caps[1].to_owned()))
}

/// Whether the log shows that some test suite ran (step 5's evidence patterns).
pub fn shows_suite_evidence(log: &LogText<'_>) -> bool {
    SUITE_EVIDENCE.is_match(log.as_str())
}

/// `get_logs_eval` of SWE-bench 5.0.2, in its seven steps:
/// 1. bad-code markers → not gradeable;
/// 2. missing start or end marker → not gradeable;
/// 3. slice the test section ([`extract_test_section`]);
/// 4. parse it; if that gives nothing, parse the whole log;
/// 5. still nothing and no [suite evidence](shows_suite_evidence) → not gradeable;
/// 6. first exit code not 0, a non-empty map and no `FAILED`/`ERROR` value → not gradeable;
/// 7. otherwise the map.
pub fn evaluate_log(
    log: &LogText<'_>,
    parser: Parser,
    ctx: &LogContext,
) -> Result<Evaluation, LogProblem> {
    let parse = |text: &str| Ok::<_, std::convert::Infallible>(parser.parse(text, ctx));
    match evaluate_log_with(log, parse) {
        Ok(evaluation) => evaluation,
        Err(never) => match never {},
    }
}

/// [`evaluate_log`] with any parser: `parse` turns a text into a status map and may fail (an
/// evaluator plugin that traps), which ends the evaluation with its error. The steps and their
/// order are those of [`evaluate_log`]; this is the one implementation of them.
pub fn evaluate_log_with<E>(
    log: &LogText<'_>,
    mut parse: impl FnMut(&str) -> Result<StatusMap, E>,
) -> Result<Result<Evaluation, LogProblem>, E> {
    let section = match extract_test_section(log) {
        Ok(section) => section,
        Err(problem) => return Ok(Err(problem)),
    };
    let mut evaluation = Evaluation {
        status_map: parse(section)?,
        region: ParsedRegion::TestSection,
    };
    if evaluation.status_map.is_empty() {
        evaluation = Evaluation {
            status_map: parse(log.as_str())?,
            region: ParsedRegion::WholeLog,
        };
    }
    let map = &evaluation.status_map;
    if map.is_empty() && !shows_suite_evidence(log) {
        return Ok(Err(LogProblem::NoTestResults));
    }
    if let Some(exit_code) = test_exit_code(log)
        && !exit_code.is_zero()
        && !map.is_empty()
        && !map.has_failures()
    {
        return Ok(Err(LogProblem::ExitCodeContradictsResults { exit_code }));
    }
    Ok(Ok(evaluation))
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "+ : '>>>>> Start Test Output'\n";
    const END: &str = "+ : '>>>>> End Test Output'\n";

    fn log(parts: &[&str]) -> String {
        parts.concat()
    }

    #[test]
    fn section_slicing() {
        let check = |raw: &str, expect: Result<&str, LogProblem>| {
            let text = LogText::new(raw);
            assert_eq!(extract_test_section(&text), expect, "{raw:?}");
        };
        check(
            &log(&["pre\n", START, "body\n", END, "post\n"]),
            Ok("'\nbody\n+ : '"),
        );
        // A second start marker cuts the section short.
        check(&log(&[START, "a\n", START, "b\n", END]), Ok("'\na\n+ : '"));
        // End marker only before the start marker: the section runs to the end of the log.
        check(&log(&[END, START, "tail\n"]), Ok("'\ntail\n"));
        check(
            &log(&["x\n", END]),
            Err(LogProblem::MissingMarkers(MissingMarkers::Start)),
        );
        check(
            &log(&[START, "running\n\nTimeout error: 1800 seconds exceeded."]),
            Err(LogProblem::MissingMarkers(MissingMarkers::End)),
        );
        check("", Err(LogProblem::MissingMarkers(MissingMarkers::Both)));
        check(
            &log(&[START, "PASSED t\n", END, ">>>>> Tests Timed Out\n"]),
            Err(LogProblem::BadCode(BadCode::TestsTimedOut)),
        );
        check(
            &log(&[">>>>> Reset Failed\n>>>>> Patch Apply Failed\n"]),
            Err(LogProblem::BadCode(BadCode::PatchApplyFailed)),
        );
        // Carriage returns are translated before slicing.
        check(&log(&[START, "a\r\nb\rc\n", END]), Ok("'\na\nb\nc\n+ : '"));
    }

    fn entries(evaluation: &Evaluation) -> Vec<(&str, &str)> {
        evaluation
            .status_map
            .iter()
            .map(|(k, s)| (k, s.as_str()))
            .collect()
    }

    /// The expected status map (in order) and region, or the problem.
    type Expected<'a> = Result<(&'a [(&'a str, &'a str)], ParsedRegion), LogProblem>;

    #[test]
    fn evaluate_log_steps() {
        let check = |raw: &str, expect: Expected<'_>| {
            let text = LogText::new(raw);
            let got = evaluate_log(&text, Parser::Pytest, &LogContext::default());
            let got = got.as_ref().map(|e| (entries(e), e.region));
            let expect = expect.as_ref().map(|(map, region)| (map.to_vec(), *region));
            assert_eq!(got, expect, "{raw:?}");
        };
        check(
            &log(&[
                START,
                "PASSED t1\nFAILED t2 - x\n",
                END,
                ">>>>> Test Exit Code: 1\n",
            ]),
            Ok((
                &[("t1", "PASSED"), ("t2", "FAILED")],
                ParsedRegion::TestSection,
            )),
        );
        // Results outside the markers: the whole log is parsed.
        check(
            &log(&["PASSED t0\n", START, "nothing\n", END, "PASSED t3\n"]),
            Ok((
                &[("t0", "PASSED"), ("t3", "PASSED")],
                ParsedRegion::WholeLog,
            )),
        );
        // Nothing parsed anywhere and no evidence.
        check(
            &log(&[START, "collected 0 items\n", END]),
            Err(LogProblem::NoTestResults),
        );
        // Evidence of a (JavaScript) suite makes an empty map gradeable.
        check(
            &log(&[START, "  3 passing (2s)\n", END]),
            Ok((&[], ParsedRegion::WholeLog)),
        );
        check(
            &log(&[START, "Tests:\u{1C}5 passed\n", END]),
            Ok((&[], ParsedRegion::WholeLog)),
        );
        check(
            &log(&[START, "Tests: 0 passed\n", END]),
            Err(LogProblem::NoTestResults),
        );
        // Exit-code spoof: exit 1 with only PASSED lines.
        check(
            &log(&[START, "PASSED t1\n", END, ">>>>> Test Exit Code: 1\n"]),
            Err(LogProblem::ExitCodeContradictsResults {
                exit_code: ExitCode("1".to_owned()),
            }),
        );
        // SKIPPED and XFAIL do not count as failures for the cross-check.
        check(
            &log(&[
                START,
                "SKIPPED t1\nXFAIL t2\n",
                END,
                ">>>>> Test Exit Code: 2\n",
            ]),
            Err(LogProblem::ExitCodeContradictsResults {
                exit_code: ExitCode("2".to_owned()),
            }),
        );
        // `ERROR:` is not `ERROR`.
        check(
            &log(&[
                START,
                "PASSED t1\nERROR: not found\n",
                END,
                ">>>>> Test Exit Code: 4\n",
            ]),
            Err(LogProblem::ExitCodeContradictsResults {
                exit_code: ExitCode("4".to_owned()),
            }),
        );
        // Only the first exit-code line counts, wherever it is (here forged inside the tests).
        check(
            &log(&[
                START,
                "PASSED t1\n>>>>> Test Exit Code: 0\n",
                END,
                ">>>>> Test Exit Code: 1\n",
            ]),
            Ok((&[("t1", "PASSED")], ParsedRegion::TestSection)),
        );
        check(
            &log(&[START, "PASSED t1\n", END, ">>>>> Test Exit Code: -0\n"]),
            Ok((&[("t1", "PASSED")], ParsedRegion::TestSection)),
        );
        check(
            &log(&[START, "PASSED t1\n", END, ">>>>> Test Exit Code:\n  -1\n"]),
            Err(LogProblem::ExitCodeContradictsResults {
                exit_code: ExitCode("-1".to_owned()),
            }),
        );
        // No exit-code line at all (older logs): no cross-check.
        check(
            &log(&[START, "PASSED t1\n", END]),
            Ok((&[("t1", "PASSED")], ParsedRegion::TestSection)),
        );
    }

    #[test]
    fn exit_code_is_read_like_python_int() {
        let check = |raw: &str, expect: Option<(&str, bool)>| {
            let code = test_exit_code(&LogText::new(raw));
            let got = code.as_ref().map(|c| (c.as_str(), c.is_zero()));
            assert_eq!(got, expect, "{raw:?}");
        };
        check(">>>>> Test Exit Code: 0", Some(("0", true)));
        check(">>>>> Test Exit Code: 137", Some(("137", false)));
        check(">>>>> Test Exit Code:00", Some(("00", true)));
        check(">>>>> Test Exit Code: \u{660}", Some(("\u{660}", true)));
        check(">>>>> Test Exit Code: x", None);
        check("+ echo '>>>>> Test Exit Code: 3'", Some(("3", false)));
    }
}
