//! SWE-bench 5 grading: from a dataset row and the text of `test_output.txt` to the
//! per-instance report (`report.json`).
//!
//! Parsing and the gradeability checks of `get_logs_eval` live in `swerve-log-parsers`; this
//! module decides each FAIL_TO_PASS / PASS_TO_PASS test's outcome (with v5's skipped-test
//! semantics and truncated-id prefix matching), the resolution status, and, for logs that
//! cannot be graded, the advisory infrastructure-failure label. The label never changes the
//! score: it is reported beside it.

use swerve_log_parsers::{
    Evaluation, FailureTier, LogContext, LogProblem, LogText, ParsedRegion, Parser, RebenchParser,
    Status, StatusMap, TestStatus, classify_infra_failure, evaluate_log_with, normalize_test_name,
};

use crate::dataset::{EvalType, Instance, TaskFormat};
use crate::report::{InstanceReport, TestOutcomes, TestsStatus};

/// The prediction's `model_patch`, as far as grading cares: SWE-bench only checks for null.
/// An empty string is graded like any patch (such predictions are normally not run at all and
/// land in the run report's `empty_patch_ids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchState {
    /// `model_patch` was JSON null: the report only says `patch_is_None: true`.
    Null,
    /// `model_patch` was a string, possibly empty.
    Present,
}

impl PatchState {
    /// The state of a prediction's `model_patch`.
    pub fn of(model_patch: Option<&str>) -> PatchState {
        match model_patch {
            None => PatchState::Null,
            Some(_) => PatchState::Present,
        }
    }
}

/// SWE-bench's `ResolvedStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResolutionStatus {
    /// Every FAIL_TO_PASS and every PASS_TO_PASS test succeeded (the only `resolved: true`).
    Full,
    /// Some but not all FAIL_TO_PASS tests succeeded, and every PASS_TO_PASS test did.
    Partial,
    /// Anything else.
    No,
}

impl ResolutionStatus {
    /// `RESOLVED_FULL`, `RESOLVED_PARTIAL` or `RESOLVED_NO`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolutionStatus::Full => "RESOLVED_FULL",
            ResolutionStatus::Partial => "RESOLVED_PARTIAL",
            ResolutionStatus::No => "RESOLVED_NO",
        }
    }
}

/// How grading went, beyond what `report.json` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GradeOutcome {
    /// The patch was null; nothing was graded.
    PatchIsNone,
    /// The log was not gradeable (`patch_successfully_applied: false`).
    NotGradeable(LogProblem),
    /// The log was graded.
    Graded {
        /// The resolution status the tests give.
        resolution: ResolutionStatus,
        /// The status map and where it was parsed from.
        evaluation: Evaluation,
    },
}

/// The result of grading one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grading {
    /// The value under the instance id in `report.json`.
    pub report: InstanceReport,
    /// Details for logs and diagnostics.
    pub outcome: GradeOutcome,
}

impl Grading {
    /// The resolution, `None` when the patch was null or the log not gradeable.
    pub fn resolution(&self) -> Option<ResolutionStatus> {
        match &self.outcome {
            GradeOutcome::Graded { resolution, .. } => Some(*resolution),
            GradeOutcome::PatchIsNone | GradeOutcome::NotGradeable(_) => None,
        }
    }

    /// Why the log was not gradeable.
    pub fn problem(&self) -> Option<&LogProblem> {
        match &self.outcome {
            GradeOutcome::NotGradeable(problem) => Some(problem),
            GradeOutcome::PatchIsNone | GradeOutcome::Graded { .. } => None,
        }
    }

    /// The parsed status map, `None` when nothing was graded.
    pub fn status_map(&self) -> Option<&StatusMap> {
        match &self.outcome {
            GradeOutcome::Graded { evaluation, .. } => Some(&evaluation.status_map),
            GradeOutcome::PatchIsNone | GradeOutcome::NotGradeable(_) => None,
        }
    }
}

/// Why an instance could not be graded at all: swerve lacks what it needs, unlike an
/// ungradeable log, which is an outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GradeError {
    /// The row names a parser this crate does not have (a non-Python ecosystem), or names none
    /// and its repository has no parser.
    #[error("no log parser for {instance_id} (log_parser {log_parser:?}, repo {repo})")]
    NoParser {
        /// The instance.
        instance_id: String,
        /// The row's `log_parser`.
        log_parser: Option<String>,
        /// The row's `repo`.
        repo: String,
    },
    /// The parser raised on this log, as SWE-bench's does (a malformed doctest XML report, an
    /// unknown jekyll instance, ...): SWE-bench's evaluation of the instance ends with that
    /// exception, and so does the grading here.
    #[error("log parser {parser} raised on {instance_id}'s log: {source}")]
    ParserRaised {
        /// The instance.
        instance_id: String,
        /// The parser's registered name.
        parser: &'static str,
        /// The exception.
        #[source]
        source: swerve_log_parsers::ParseError,
    },
}

/// The parser for a row: its `log_parser` name (v5), else the repository's parser (v4 rows).
pub(crate) fn parser_for(instance: &Instance) -> Result<Parser, GradeError> {
    let parser = match &instance.log_parser {
        Some(name) => Parser::from_log_parser_name(name),
        None => Parser::for_repo(&instance.repo),
    };
    parser.ok_or_else(|| GradeError::NoParser {
        instance_id: instance.instance_id.clone(),
        log_parser: instance.log_parser.clone(),
        repo: instance.repo.clone(),
    })
}

/// Grades one instance like SWE-bench 5.0.2's `get_eval_report`, parsing the log with the
/// row's built-in parser (`harness grade`).
///
/// `log` is the decoded text of `test_output.txt` (newlines are translated here). A null patch
/// gives `patch_is_None: true` without looking at the log (and needs no parser); otherwise the
/// log is evaluated ([`evaluate_log_with`] the parser, which may raise as SWE-bench's does) and
/// graded by [`grade_evaluation`].
pub fn grade(instance: &Instance, log: &str, patch: PatchState) -> Result<Grading, GradeError> {
    grade_as(instance, log, patch, None)
}

/// [`grade`] for a row of any format, `verdict` overriding the rule of a row of another
/// benchmark: a SWE-rebench V2 row's log (its stdout then stderr) is read by its named parser,
/// names normalised, and graded by the exact-set rule; a SWE-bench Pro row's "log" is the
/// `output.json` its `parser.py` wrote ([`pro_output_statuses`]), graded by the subset rule.
pub fn grade_as(
    instance: &Instance,
    log: &str,
    patch: PatchState,
    verdict: Option<VerdictRule>,
) -> Result<Grading, GradeError> {
    match instance.format() {
        TaskFormat::SweBench => {}
        TaskFormat::Rebench => {
            let name = instance
                .install_config
                .as_ref()
                .and_then(|config| config.log_parser.clone());
            let parser = name
                .as_deref()
                .and_then(RebenchParser::from_name)
                .ok_or_else(|| GradeError::NoParser {
                    instance_id: instance.instance_id.clone(),
                    log_parser: name.clone(),
                    repo: instance.repo.clone(),
                })?;
            let text = LogText::new(log);
            let map =
                parser
                    .try_parse(text.as_str())
                    .map_err(|source| GradeError::ParserRaised {
                        instance_id: instance.instance_id.clone(),
                        parser: parser.name(),
                        source,
                    })?;
            return Ok(grade_listed(
                instance,
                Some(map),
                verdict.unwrap_or(VerdictRule::ExactSet),
                &normalize_test_name,
            ));
        }
        TaskFormat::Pro => {
            return Ok(grade_listed(
                instance,
                pro_output_statuses(log.as_bytes()).ok(),
                verdict.unwrap_or(VerdictRule::Subset),
                &str::to_owned,
            ));
        }
    }
    let text = LogText::new(log);
    if patch == PatchState::Null {
        return Ok(grade_evaluation(
            instance,
            &text,
            patch,
            Err(LogProblem::NoTestResults),
        ));
    }
    let parser = parser_for(instance)?;
    let ctx = LogContext {
        repo: instance.repo.clone(),
        instance_id: instance.instance_id.clone(),
        test_command: String::new(),
        version: instance.version.clone().unwrap_or_default(),
    };
    let evaluation =
        evaluate_log_with(&text, |section| parser.try_parse(section, &ctx)).map_err(|source| {
            GradeError::ParserRaised {
                instance_id: instance.instance_id.clone(),
                parser: parser.name(),
                source,
            }
        })?;
    Ok(grade_evaluation(instance, &text, patch, evaluation))
}

/// Builds the per-instance report from an evaluation of the log, whichever parser made it (the
/// built-in one in [`grade`], an evaluator plugin in `harness run`), and whichever region was
/// read (compatible or hardened). This is the one place a report is decided.
///
/// A null patch gives `patch_is_None: true` and ignores the evaluation. An ungradeable log is
/// classified: `infra_failure` is true for an environment-tier signature and
/// `infra_failure_reason` names any matching signature; the label never changes the score. A
/// gradeable log yields `tests_status` and `resolved`.
pub fn grade_evaluation(
    instance: &Instance,
    log: &LogText<'_>,
    patch: PatchState,
    evaluation: Result<Evaluation, LogProblem>,
) -> Grading {
    let mut report = InstanceReport::default();
    if patch == PatchState::Null {
        report.patch_is_none = true;
        return Grading {
            report,
            outcome: GradeOutcome::PatchIsNone,
        };
    }
    report.patch_exists = true;
    let outcome = match evaluation {
        Err(problem) => {
            if let Some(reason) = classify_infra_failure(log) {
                report.infra_failure = reason.tier() == FailureTier::Environment;
                report.infra_failure_reason = Some(reason.as_str().to_owned());
            }
            GradeOutcome::NotGradeable(problem)
        }
        Ok(evaluation) => {
            let resolution = apply_status_map(&mut report, instance, &evaluation.status_map);
            GradeOutcome::Graded {
                resolution,
                evaluation,
            }
        }
    };
    Grading { report, outcome }
}

/// Grades a parsed log into `report` (the patch applied; per-test outcomes; `resolved`) and
/// returns the resolution status.
fn apply_status_map(
    report: &mut InstanceReport,
    instance: &Instance,
    status_map: &StatusMap,
) -> ResolutionStatus {
    report.patch_successfully_applied = true;
    let tests = tests_status(
        status_map,
        &instance.fail_to_pass,
        &instance.pass_to_pass,
        instance.eval_type.unwrap_or_default(),
    );
    let resolution = resolution_status(&tests);
    report.resolved = resolution == ResolutionStatus::Full;
    report.tests_status = Some(tests);
    resolution
}

/// The status a dataset test id resolves to (v5, PR #617): the id's own entry; otherwise, only
/// for an id with more `[` than `]` (a parametrised id the dataset truncated), the keys that
/// start with it, provided there is at least one and they all agree on pass (`PASSED`/`XFAIL`)
/// versus not-pass — then the first such key in map order.
pub(crate) fn resolve_test<'m>(test: &str, map: &'m StatusMap) -> Option<&'m Status> {
    if let Some(status) = map.get(test) {
        return Some(status);
    }
    if test.matches('[').count() <= test.matches(']').count() {
        return None;
    }
    let mut candidates = map
        .iter()
        .filter(|(key, _)| key.starts_with(test))
        .map(|(_, status)| status);
    let first = candidates.next()?;
    let pass = first.is_pass();
    candidates
        .all(|status| status.is_pass() == pass)
        .then_some(first)
}

/// How one test fared against the status map under `pass_and_fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// `PASSED` or `XFAIL`.
    Passed,
    /// `SKIPPED`: maintained for PASS_TO_PASS, failed for FAIL_TO_PASS (v5).
    Skipped,
    /// Absent, `FAILED` or `ERROR`.
    Failed,
    /// Any other stored token (`ERROR:` ...): neither success nor failure.
    Neither,
}

fn verdict(test: &str, map: &StatusMap) -> Verdict {
    match resolve_test(test, map).map(Status::known) {
        None => Verdict::Failed,
        Some(Some(TestStatus::Passed | TestStatus::Xfail)) => Verdict::Passed,
        Some(Some(TestStatus::Skipped)) => Verdict::Skipped,
        Some(Some(TestStatus::Failed | TestStatus::Error)) => Verdict::Failed,
        Some(None) => Verdict::Neither,
    }
}

/// The `tests_status` of a gradeable log. Lists keep dataset order.
///
/// `pass_and_fail`: a FAIL_TO_PASS test succeeds when it passed and fails when it is absent,
/// `FAILED`, `ERROR` or `SKIPPED`; a PASS_TO_PASS test succeeds when it passed or was skipped
/// and fails when absent, `FAILED` or `ERROR`. A test whose stored status is none of the five
/// words lands in neither list. `fail_only`: a test fails only when its exact id is `FAILED`.
pub fn tests_status(
    map: &StatusMap,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
    eval_type: EvalType,
) -> TestsStatus {
    let split = |tests: &[String], maintained: bool| {
        let mut outcomes = TestOutcomes::default();
        for test in tests {
            let succeeded = match eval_type {
                EvalType::FailOnly => {
                    Some(map.get(test).and_then(Status::known) != Some(TestStatus::Failed))
                }
                EvalType::PassAndFail => match verdict(test, map) {
                    Verdict::Passed => Some(true),
                    Verdict::Skipped => Some(maintained),
                    Verdict::Failed => Some(false),
                    Verdict::Neither => None,
                },
            };
            match succeeded {
                Some(true) => outcomes.success.push(test.clone()),
                Some(false) => outcomes.failure.push(test.clone()),
                None => {}
            }
        }
        outcomes
    };
    TestsStatus {
        fail_to_pass: split(fail_to_pass, false),
        pass_to_pass: split(pass_to_pass, true),
        fail_to_fail: TestOutcomes::default(),
        pass_to_fail: TestOutcomes::default(),
    }
}

/// The rule that decides `resolved` from a status map, named in the report of every row that is
/// not graded as SWE-bench grades (`verdict_rule`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictRule {
    /// SWE-bench's: each listed test succeeds under v5's rules (skips, truncated ids).
    #[default]
    SweBench,
    /// SWE-rebench V2's `passed_match`: the sorted `PASSED` names equal the sorted
    /// FAIL_TO_PASS + PASS_TO_PASS exactly; any other passing test, or a listed test twice,
    /// makes it unresolved.
    ExactSet,
    /// Every listed test is `PASSED`; other tests do not matter (SWE-bench Pro, and Prime's
    /// verifiers on SWE-rebench V2). An empty list is resolved.
    Subset,
}

impl VerdictRule {
    /// `swe-bench`, `exact-set` or `subset`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictRule::SweBench => "swe-bench",
            VerdictRule::ExactSet => "exact-set",
            VerdictRule::Subset => "subset",
        }
    }
}

/// Grades a status map that another benchmark's evaluation produced (SWE-rebench V2's parsers,
/// SWE-bench Pro's `parser.py`) under `rule`, which the report names. `normalize` maps a listed
/// test to the name the map uses (SWE-rebench V2 strips timing suffixes from both sides); the
/// report lists the dataset's names, in dataset order: a listed test succeeds when its status is
/// `PASSED`. `None` for the map: the evaluation gave no results (the patch did not apply, or
/// no output was written), graded as not applied and unresolved.
pub fn grade_listed(
    instance: &Instance,
    status_map: Option<StatusMap>,
    rule: VerdictRule,
    normalize: &dyn Fn(&str) -> String,
) -> Grading {
    let mut report = InstanceReport {
        patch_exists: true,
        verdict_rule: Some(rule.as_str().to_owned()),
        ..InstanceReport::default()
    };
    let Some(status_map) = status_map else {
        return Grading {
            report,
            outcome: GradeOutcome::NotGradeable(LogProblem::NoTestResults),
        };
    };
    report.patch_successfully_applied = true;
    let passed = |test: &str| {
        status_map.get(&normalize(test)).and_then(Status::known) == Some(TestStatus::Passed)
    };
    let split = |tests: &[String]| {
        let mut outcomes = TestOutcomes::default();
        for test in tests {
            if passed(test) {
                outcomes.success.push(test.clone());
            } else {
                outcomes.failure.push(test.clone());
            }
        }
        outcomes
    };
    let tests = TestsStatus {
        fail_to_pass: split(&instance.fail_to_pass),
        pass_to_pass: split(&instance.pass_to_pass),
        ..TestsStatus::default()
    };
    let resolved = match rule {
        VerdictRule::SweBench | VerdictRule::Subset => {
            tests.fail_to_pass.failure.is_empty() && tests.pass_to_pass.failure.is_empty()
        }
        VerdictRule::ExactSet => {
            let mut expected: Vec<String> = instance
                .fail_to_pass
                .iter()
                .chain(&instance.pass_to_pass)
                .map(|test| normalize(test))
                .collect();
            expected.sort();
            let mut actual: Vec<&str> = status_map
                .iter()
                .filter(|(_, status)| status.known() == Some(TestStatus::Passed))
                .map(|(name, _)| name)
                .collect();
            actual.sort_unstable();
            actual == expected
        }
    };
    let resolution = if resolved {
        ResolutionStatus::Full
    } else {
        match resolution_status(&tests) {
            ResolutionStatus::Full => ResolutionStatus::No,
            other => other,
        }
    };
    report.resolved = resolved;
    report.tests_status = Some(tests);
    Grading {
        report,
        outcome: GradeOutcome::Graded {
            resolution,
            evaluation: Evaluation {
                status_map,
                region: ParsedRegion::WholeLog,
            },
        },
    }
}

/// SWE-bench Pro's `output.json` (`{"tests": [{"name", "status"}]}`) as a status map: a test
/// that is `PASSED` in any entry is passed, as SWE-bench Pro collects the passed names into a
/// set; any other status is kept where no entry passed. An error says why the text is not one.
pub fn pro_output_statuses(bytes: &[u8]) -> Result<StatusMap, String> {
    #[derive(serde::Deserialize)]
    struct Output {
        tests: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        name: String,
        status: String,
    }
    let output: Output = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut map = StatusMap::new();
    for entry in output.tests {
        let passed = map.get(&entry.name).and_then(Status::known) == Some(TestStatus::Passed);
        if !passed {
            map.insert(entry.name, Status::from_token(&entry.status));
        }
    }
    Ok(map)
}

/// The resolution status: with `f2p` and `p2p` the success ratios (1 when a category is
/// empty), `Full` iff both are 1, `Partial` iff 0 < f2p < 1 and p2p is 1, else `No`.
pub(crate) fn resolution_status(tests: &TestsStatus) -> ResolutionStatus {
    let f2p = &tests.fail_to_pass;
    let p2p_all = tests.pass_to_pass.failure.is_empty();
    if f2p.failure.is_empty() && p2p_all {
        ResolutionStatus::Full
    } else if !f2p.success.is_empty() && !f2p.failure.is_empty() && p2p_all {
        ResolutionStatus::Partial
    } else {
        ResolutionStatus::No
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::render_instance_report;

    const START: &str = "+ : '>>>>> Start Test Output'\n";
    const END: &str = "+ : '>>>>> End Test Output'\n";

    fn instance(log_parser: &str, f2p: &[&str], p2p: &[&str]) -> Instance {
        Instance::from_json(
            &serde_json::json!({
                "instance_id": "o__r-1",
                "repo": "o/r",
                "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": p2p,
                "log_parser": log_parser,
                "eval_type": "pass_and_fail",
            })
            .to_string(),
        )
        .expect("valid row")
    }

    fn pytest_log(body: &str, exit_code: u32) -> String {
        format!(
            "+ git apply -v -\n{START}+ pytest -rA t.py\n{body}+ SWEBENCH_TEST_EXIT_CODE={exit_code}\n{END}+ echo '>>>>> Test Exit Code: {exit_code}'\n>>>>> Test Exit Code: {exit_code}\n"
        )
    }

    fn ids(list: &[String]) -> Vec<&str> {
        list.iter().map(String::as_str).collect()
    }

    /// Grades `log` for an instance with the given tests and checks flags and outcome lists.
    struct Expect<'a> {
        applied: bool,
        resolved: bool,
        infra: Option<(bool, &'a str)>,
        f2p: (&'a [&'a str], &'a [&'a str]),
        p2p: (&'a [&'a str], &'a [&'a str]),
    }

    fn check(inst: &Instance, log: &str, expect: Expect<'_>) {
        let grading = grade(inst, log, PatchState::Present).expect("parser known");
        let r = &grading.report;
        assert!(!r.patch_is_none && r.patch_exists, "{log}");
        assert_eq!(r.patch_successfully_applied, expect.applied, "{log}");
        assert_eq!(r.resolved, expect.resolved, "{log}");
        let infra = r
            .infra_failure_reason
            .as_deref()
            .map(|reason| (r.infra_failure, reason));
        assert_eq!(infra, expect.infra, "{log}");
        if r.infra_failure_reason.is_none() {
            assert!(!r.infra_failure);
        }
        match &r.tests_status {
            None => assert!(!expect.applied, "{log}"),
            Some(t) => {
                assert_eq!(
                    (ids(&t.fail_to_pass.success), ids(&t.fail_to_pass.failure)),
                    (expect.f2p.0.to_vec(), expect.f2p.1.to_vec()),
                    "F2P of {log}"
                );
                assert_eq!(
                    (ids(&t.pass_to_pass.success), ids(&t.pass_to_pass.failure)),
                    (expect.p2p.0.to_vec(), expect.p2p.1.to_vec()),
                    "P2P of {log}"
                );
                assert!(t.fail_to_fail == TestOutcomes::default());
                assert!(t.pass_to_fail == TestOutcomes::default());
            }
        }
    }

    const NOT_APPLIED: Expect<'static> = Expect {
        applied: false,
        resolved: false,
        infra: None,
        f2p: (&[], &[]),
        p2p: (&[], &[]),
    };

    #[test]
    fn gradeable_logs() {
        let inst = instance("parse_log_pytest", &["t.py::f1", "t.py::f2"], &["t.py::p1"]);
        check(
            &inst,
            &pytest_log("PASSED t.py::f1\nPASSED t.py::f2\nPASSED t.py::p1\n", 0),
            Expect {
                applied: true,
                resolved: true,
                infra: None,
                f2p: (&["t.py::f1", "t.py::f2"], &[]),
                p2p: (&["t.py::p1"], &[]),
            },
        );
        // Partial: resolved stays false.
        check(
            &inst,
            &pytest_log("PASSED t.py::f1\nFAILED t.py::f2 - x\nPASSED t.py::p1\n", 1),
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&["t.py::f1"], &["t.py::f2"]),
                p2p: (&["t.py::p1"], &[]),
            },
        );
        // Skipped FAIL_TO_PASS fails in v5; skipped PASS_TO_PASS is maintained; absent fails.
        check(
            &inst,
            &pytest_log("SKIPPED t.py::f1\nXFAIL t.py::f2\nSKIPPED t.py::p1\n", 0),
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&["t.py::f2"], &["t.py::f1"]),
                p2p: (&["t.py::p1"], &[]),
            },
        );
        check(
            &inst,
            &pytest_log("PASSED t.py::f1\nPASSED t.py::f2\nERROR t.py::other\n", 1),
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&["t.py::f1", "t.py::f2"], &[]),
                p2p: (&[], &["t.py::p1"]),
            },
        );
        // A status token that is none of the five words puts the test in neither list.
        check(
            &inst,
            &pytest_log(
                "PASSED t.py::f1\nFAILED t.py::f2\nERROR: t.py::p1 boom\n",
                1,
            ),
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&["t.py::f1"], &["t.py::f2"]),
                p2p: (&[], &[]),
            },
        );
    }

    #[test]
    fn ungradeable_logs() {
        let inst = instance("parse_log_pytest", &["t.py::f1"], &[]);
        // Exit-code spoof: exit 1 with only PASSED lines.
        check(&inst, &pytest_log("PASSED t.py::f1\n", 1), NOT_APPLIED);
        // Timeout: no end marker, the harness's timeout line at the end.
        check(
            &inst,
            &format!("{START}+ pytest -rA\nt.py ..\n\nTimeout error: 1800 seconds exceeded."),
            Expect {
                infra: Some((false, "tests_timed_out")),
                ..NOT_APPLIED
            },
        );
        // Missing start marker.
        check(&inst, &format!("PASSED t.py::f1\n{END}"), NOT_APPLIED);
        // Missing end marker, environment-tier signature.
        check(
            &inst,
            &format!("{START}PASSED t.py::f1\nKilled\n"),
            Expect {
                infra: Some((true, "out_of_memory")),
                ..NOT_APPLIED
            },
        );
        // A patch that failed to apply (legacy marker) is never graded, even with results.
        check(
            &inst,
            &format!(
                ">>>>> Patch Apply Failed:\nerror: patch failed\n{START}PASSED t.py::f1\n{END}"
            ),
            NOT_APPLIED,
        );
        // No results, no evidence, an ambiguous signature.
        check(
            &inst,
            &pytest_log("collected 0 items\n", 5),
            Expect {
                infra: Some((false, "no_tests_collected")),
                ..NOT_APPLIED
            },
        );
    }

    #[test]
    fn sympy_exit_code_line_inside_the_section_with_failures() {
        // `>>>>> Test Exit Code: 1` printed before the end marker; the map has a FAILED
        // entry, so the cross-check does not fire and the log is graded.
        let inst = instance("parse_log_sympy", &["test_b"], &["test_a"]);
        let log = format!(
            "{START}+ bin/test -C --verbose x.py\ntest_a ok\ntest_b F\ntest_c ok     [FAIL]\n\n>>>>> Test Exit Code: 1\n+ SWEBENCH_TEST_EXIT_CODE=1\n{END}"
        );
        check(
            &inst,
            &log,
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&[], &["test_b"]),
                p2p: (&["test_a"], &[]),
            },
        );
    }

    #[test]
    fn null_and_empty_patches() {
        let inst = instance("parse_log_pytest", &["t.py::f1"], &[]);
        let grading = grade(&inst, "", PatchState::of(None)).expect("no parser needed");
        assert_eq!(grading.outcome, GradeOutcome::PatchIsNone);
        assert_eq!(
            render_instance_report("o__r-1", &grading.report),
            "{\n    \"o__r-1\": {\n        \"patch_is_None\": true,\n        \"patch_exists\": false,\n        \"patch_successfully_applied\": false,\n        \"resolved\": false,\n        \"infra_failure\": false\n    }\n}"
        );
        // An empty (no-op) patch is graded normally.
        assert_eq!(PatchState::of(Some("")), PatchState::Present);
        check(
            &inst,
            &pytest_log("FAILED t.py::f1\n", 1),
            Expect {
                applied: true,
                resolved: false,
                infra: None,
                f2p: (&[], &["t.py::f1"]),
                p2p: (&[], &[]),
            },
        );
    }

    #[test]
    fn truncated_parametrised_ids_match_by_prefix() {
        let map: StatusMap = [
            ("t.py::a[x-1]", TestStatus::Passed),
            ("t.py::a[x-2]", TestStatus::Xfail),
            ("t.py::b[y-1]", TestStatus::Passed),
            ("t.py::b[y-2]", TestStatus::Failed),
            ("t.py::c[z-1]", TestStatus::Skipped),
            ("t.py::c[z-2]", TestStatus::Failed),
            ("t.py::d", TestStatus::Passed),
        ]
        .into_iter()
        .collect();
        let check = |test: &str, expect: Option<&str>| {
            assert_eq!(
                resolve_test(test, &map).map(Status::as_str),
                expect,
                "{test}"
            );
        };
        check("t.py::a[x", Some("PASSED"));
        check("t.py::b[y", None);
        // SKIPPED and FAILED agree on "not passed": the first key decides.
        check("t.py::c[z", Some("SKIPPED"));
        check("t.py::d", Some("PASSED"));
        // Balanced brackets: exact match only.
        check("t.py::a[x-1", Some("PASSED"));
        check("t.py::", None);
        check("t.py::e[", None);
        let tests = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>();
        let status = tests_status(
            &map,
            &tests(&["t.py::a[x", "t.py::b[y", "t.py::c[z"]),
            &tests(&["t.py::c[z"]),
            EvalType::PassAndFail,
        );
        assert_eq!(ids(&status.fail_to_pass.success), ["t.py::a[x"]);
        assert_eq!(
            ids(&status.fail_to_pass.failure),
            ["t.py::b[y", "t.py::c[z"]
        );
        assert_eq!(ids(&status.pass_to_pass.success), ["t.py::c[z"]);
    }

    #[test]
    fn fail_only_counts_only_exact_failed_entries() {
        let map: StatusMap = [
            ("a", TestStatus::Failed),
            ("b", TestStatus::Error),
            ("c[x-1]", TestStatus::Failed),
        ]
        .into_iter()
        .collect();
        let tests = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>();
        let status = tests_status(
            &map,
            &tests(&["a", "b", "absent", "c[x"]),
            &tests(&["a", "b"]),
            EvalType::FailOnly,
        );
        assert_eq!(ids(&status.fail_to_pass.success), ["b", "absent", "c[x"]);
        assert_eq!(ids(&status.fail_to_pass.failure), ["a"]);
        assert_eq!(ids(&status.pass_to_pass.success), ["b"]);
        assert_eq!(ids(&status.pass_to_pass.failure), ["a"]);
    }

    #[test]
    fn resolution_statuses() {
        let outcomes = |s: usize, f: usize| TestOutcomes {
            success: vec!["s".to_owned(); s],
            failure: vec!["f".to_owned(); f],
        };
        let check = |f2p: (usize, usize), p2p: (usize, usize), expect: ResolutionStatus| {
            let tests = TestsStatus {
                fail_to_pass: outcomes(f2p.0, f2p.1),
                pass_to_pass: outcomes(p2p.0, p2p.1),
                ..TestsStatus::default()
            };
            assert_eq!(resolution_status(&tests), expect, "{f2p:?} {p2p:?}");
        };
        check((1, 0), (3, 0), ResolutionStatus::Full);
        check((0, 0), (0, 0), ResolutionStatus::Full);
        check((2, 1), (0, 0), ResolutionStatus::Partial);
        check((2, 1), (1, 1), ResolutionStatus::No);
        check((0, 1), (1, 0), ResolutionStatus::No);
        check((1, 0), (1, 1), ResolutionStatus::No);
        assert_eq!(ResolutionStatus::Partial.as_str(), "RESOLVED_PARTIAL");
    }

    #[test]
    fn parser_selection() {
        let mut inst = instance("parse_log_xarray", &[], &[]);
        assert_eq!(parser_for(&inst), Ok(Parser::Pytest));
        inst.log_parser = Some("parse_log_jest".to_owned());
        assert_eq!(
            parser_for(&inst).map(|p| p.name()),
            Ok("parse_log_jest"),
            "every language's parser is registered"
        );
        inst.log_parser = Some("parse_log_no_such_runner".to_owned());
        assert!(matches!(
            grade(&inst, "", PatchState::Present),
            Err(GradeError::NoParser { .. })
        ));
        inst.log_parser = None;
        inst.repo = "django/django".to_owned();
        assert_eq!(parser_for(&inst), Ok(Parser::Django));
    }

    fn listed(f2p: &[&str], p2p: &[&str]) -> Instance {
        instance("", f2p, p2p)
    }

    fn statuses(pairs: &[(&str, &str)]) -> StatusMap {
        pairs
            .iter()
            .map(|(name, status)| (*name, Status::from_token(status)))
            .collect()
    }

    #[test]
    fn the_exact_set_rule_wants_the_passing_tests_to_be_the_listed_ones() {
        let row = listed(&["t::b"], &["t::a"]);
        let same = |name: &str| name.to_owned();
        let grade =
            |pairs: &[(&str, &str)], rule| grade_listed(&row, Some(statuses(pairs)), rule, &same);
        let exact = grade(
            &[("t::a", "PASSED"), ("t::b", "PASSED"), ("t::c", "FAILED")],
            VerdictRule::ExactSet,
        );
        assert!(exact.report.resolved);
        assert_eq!(exact.resolution(), Some(ResolutionStatus::Full));
        // One more passing test: exact-set says no, subset says yes.
        let more = [("t::a", "PASSED"), ("t::b", "PASSED"), ("t::c", "PASSED")];
        let exact = grade(&more, VerdictRule::ExactSet);
        assert!(!exact.report.resolved);
        assert_eq!(exact.resolution(), Some(ResolutionStatus::No));
        assert_eq!(exact.report.verdict_rule.as_deref(), Some("exact-set"));
        assert!(grade(&more, VerdictRule::Subset).report.resolved);
        // A skipped listed test fails both rules (only PASSED counts).
        let skipped = [("t::a", "SKIPPED"), ("t::b", "PASSED")];
        let subset = grade(&skipped, VerdictRule::Subset);
        assert!(!subset.report.resolved);
        let tests = subset.report.tests_status.expect("graded");
        assert_eq!(tests.pass_to_pass.failure, ["t::a"]);
        assert_eq!(tests.fail_to_pass.success, ["t::b"]);
        // The report names the rule, after the flags SWE-bench writes.
        let text = render_instance_report("o__r-1", &grade(&more, VerdictRule::Subset).report);
        assert!(text.contains("\"verdict_rule\": \"subset\""), "{text}");
    }

    #[test]
    fn listed_grading_compares_normalised_names_and_reports_dataset_names() {
        let row = listed(&["Suite adds (12ms)"], &[]);
        let strip = |name: &str| name.trim_end_matches(" (12ms)").to_owned();
        let grading = grade_listed(
            &row,
            Some(statuses(&[("Suite adds", "PASSED")])),
            VerdictRule::ExactSet,
            &strip,
        );
        assert!(grading.report.resolved);
        let tests = grading.report.tests_status.expect("graded");
        assert_eq!(tests.fail_to_pass.success, ["Suite adds (12ms)"]);
    }

    #[test]
    fn no_results_is_not_applied_and_unresolved_and_an_empty_list_is_resolved_by_subset() {
        let none = grade_listed(
            &listed(&["a"], &[]),
            None,
            VerdictRule::Subset,
            &str::to_owned,
        );
        assert!(!none.report.patch_successfully_applied && !none.report.resolved);
        assert_eq!(none.problem(), Some(&LogProblem::NoTestResults));
        let empty = grade_listed(
            &listed(&[], &[]),
            Some(statuses(&[("x", "FAILED")])),
            VerdictRule::Subset,
            &str::to_owned,
        );
        assert!(empty.report.resolved);
        let exact = grade_listed(
            &listed(&[], &[]),
            Some(statuses(&[("x", "PASSED")])),
            VerdictRule::ExactSet,
            &str::to_owned,
        );
        assert!(!exact.report.resolved);
    }

    #[test]
    fn rows_of_other_benchmarks_are_graded_by_their_own_parsers_and_rules() {
        let rebench = Instance::from_json(
            r#"{"instance_id":"o__r-1","repo":"o/r","FAIL_TO_PASS":["TestAdd"],"PASS_TO_PASS":[],
                "install_config":{"test_cmd":"go test -v ./...","log_parser":"parse_log_gotest"}}"#,
        )
        .expect("row");
        let log = "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestSub\n--- PASS: TestSub (0.00s)\nPASS\n";
        let exact = grade(&rebench, log, PatchState::Present).expect("graded");
        assert!(
            !exact.report.resolved,
            "TestSub passes too: {:?}",
            exact.report
        );
        assert_eq!(exact.report.verdict_rule.as_deref(), Some("exact-set"));
        let subset = grade_as(
            &rebench,
            log,
            PatchState::Present,
            Some(VerdictRule::Subset),
        )
        .expect("graded");
        assert!(subset.report.resolved);

        let pro = Instance::from_json(
            r#"{"instance_id":"p","repo":"o/r","fail_to_pass":"['a']","pass_to_pass":"['b']",
                "selected_test_files_to_run":"['t.py']"}"#,
        )
        .expect("row");
        let output = r#"{"tests":[{"name":"a","status":"PASSED"},{"name":"b","status":"PASSED"},{"name":"c","status":"FAILED"}]}"#;
        let graded = grade(&pro, output, PatchState::Present).expect("graded");
        assert!(graded.report.resolved);
        assert_eq!(graded.report.verdict_rule.as_deref(), Some("subset"));
        let broken = grade(&pro, "not json", PatchState::Present).expect("graded");
        assert!(!broken.report.resolved && !broken.report.patch_successfully_applied);
    }

    #[test]
    fn pro_output_keeps_a_pass_once_seen() {
        let map = pro_output_statuses(
            br#"{"tests":[{"name":"a","status":"PASSED"},{"name":"a","status":"FAILED"},{"name":"b","status":"FAILED"},{"name":"b","status":"PASSED"},{"name":"c","status":"SKIPPED"}]}"#,
        )
        .expect("valid");
        let got: Vec<(&str, &str)> = map.iter().map(|(n, s)| (n, s.as_str())).collect();
        assert_eq!(got, [("a", "PASSED"), ("b", "PASSED"), ("c", "SKIPPED")]);
        assert!(pro_output_statuses(b"{\"tests\": 3}").is_err());
        assert!(pro_output_statuses(b"not json").is_err());
    }
}
