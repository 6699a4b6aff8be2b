//! Grading a run's `test_output.txt` with an evaluator plugin as the parser.
//!
//! [`crate::grading::grade`] uses the built-in parsers; a run gets its status maps from an
//! evaluator plugin (the bundled `swebench-parsers` component or the user's `--log-parser`),
//! so this module redoes `get_logs_eval` (spec §7.2) around a parse callback, using the pure
//! steps `swerve-log-parsers` exports, then builds the report with the grading module's rules.
//!
//! Hardened runs grade only the region between the nonce-tagged markers the host printed, and
//! take the exit code the host measured (see `docs/hardening.md`).

use swerve_log_parsers::{
    END_TEST_OUTPUT, Evaluation, FailureTier, LogProblem, LogText, MissingMarkers, ParsedRegion,
    START_TEST_OUTPUT, Status, StatusMap, TestStatus, classify_infra_failure, extract_test_section,
    shows_suite_evidence, test_exit_code,
};

use crate::dataset::Instance;
use crate::grading::{PatchState, ResolutionStatus, apply_status_map};
use crate::report::InstanceReport;

/// What a hardened run recorded outside the container about its test region.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HardenedRegion {
    /// Tag of the start marker, written into the container only when the tests started.
    pub start_nonce: String,
    /// Tag of the end marker, written into the container only after every process of the
    /// tests was killed.
    pub end_nonce: String,
    /// The test exec's own exit status.
    pub exit_code: i64,
}

/// A parser that failed (a trapped or erroring plugin): swerve cannot grade, not an outcome
/// of the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("log parser failed: {0}")]
pub struct ParseFailure(pub String);

/// A parse callback: text in, status map out.
pub type ParseFn<'a> = dyn Fn(&str) -> Result<StatusMap, ParseFailure> + 'a;

fn exit_code_problem(code: i64) -> LogProblem {
    let text = format!("{}{code}", swerve_log_parsers::TEST_EXIT_CODE);
    let exit_code = test_exit_code(&LogText::new(&text)).expect("the line matches the pattern");
    LogProblem::ExitCodeContradictsResults { exit_code }
}

fn no_failures(map: &StatusMap) -> bool {
    !map.iter()
        .any(|(_, status)| matches!(status.known(), Some(TestStatus::Failed | TestStatus::Error)))
}

/// `get_logs_eval` of SWE-bench 5 with `parse` as the parser (compatibility mode).
pub fn evaluate_compat(
    log: &LogText<'_>,
    parse: &ParseFn<'_>,
) -> Result<Result<Evaluation, LogProblem>, ParseFailure> {
    let section = match extract_test_section(log) {
        Ok(s) => s,
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
    if let Some(code) = test_exit_code(log)
        && !code.is_zero()
        && !map.is_empty()
        && no_failures(map)
    {
        return Ok(Err(LogProblem::ExitCodeContradictsResults {
            exit_code: code,
        }));
    }
    Ok(Ok(evaluation))
}

/// The text between the nonce-tagged start marker and the nonce-tagged end marker.
pub fn hardened_section<'t>(
    log: &'t LogText<'_>,
    region: &HardenedRegion,
) -> Result<&'t str, LogProblem> {
    let text = log.as_str();
    let start = format!("{START_TEST_OUTPUT} {}", region.start_nonce);
    let end = format!("{END_TEST_OUTPUT} {}", region.end_nonce);
    let from = text.find(&start).map(|at| at + start.len());
    let to = text.find(&end);
    match (from, to) {
        (Some(from), Some(to)) if from <= to => Ok(&text[from..to]),
        (Some(_), Some(_)) | (None, None) => Err(LogProblem::MissingMarkers(MissingMarkers::Both)),
        (None, Some(_)) => Err(LogProblem::MissingMarkers(MissingMarkers::Start)),
        (Some(_), None) => Err(LogProblem::MissingMarkers(MissingMarkers::End)),
    }
}

/// Hardened `get_logs_eval`: bad-code markers anywhere (they can only hurt the patch), the
/// section between the host's nonce markers, no whole-log fallback (the rest of the log holds
/// output of model code run at install time), and the exit-code cross-check against the exit
/// status the host measured instead of a line in the log.
pub fn evaluate_hardened(
    log: &LogText<'_>,
    region: &HardenedRegion,
    parse: &ParseFn<'_>,
) -> Result<Result<Evaluation, LogProblem>, ParseFailure> {
    if let Err(problem @ LogProblem::BadCode(_)) = extract_test_section(log) {
        return Ok(Err(problem));
    }
    let section = match hardened_section(log, region) {
        Ok(s) => s,
        Err(problem) => return Ok(Err(problem)),
    };
    let evaluation = Evaluation {
        status_map: parse(section)?,
        region: ParsedRegion::TestSection,
    };
    let map = &evaluation.status_map;
    if map.is_empty() && !shows_suite_evidence(&LogText::new(section)) {
        return Ok(Err(LogProblem::NoTestResults));
    }
    if region.exit_code != 0 && !map.is_empty() && no_failures(map) {
        return Ok(Err(exit_code_problem(region.exit_code)));
    }
    Ok(Ok(evaluation))
}

/// The graded report of one instance and its resolution (when gradeable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graded {
    /// The value under the instance id in `report.json`.
    pub report: InstanceReport,
    /// The resolution, `None` when the log was not gradeable or the patch null.
    pub resolution: Option<ResolutionStatus>,
    /// Why the log was not gradeable.
    pub problem: Option<LogProblem>,
}

/// Builds the per-instance report (spec §8.4) from an evaluation, as
/// [`crate::grading::grade`] does.
pub fn grade_evaluation(
    instance: &Instance,
    log: &LogText<'_>,
    patch: PatchState,
    evaluation: Result<Evaluation, LogProblem>,
) -> Graded {
    let mut report = InstanceReport::default();
    if patch == PatchState::Null {
        report.patch_is_none = true;
        return Graded {
            report,
            resolution: None,
            problem: None,
        };
    }
    report.patch_exists = true;
    match evaluation {
        Err(problem) => {
            if let Some(reason) = classify_infra_failure(log) {
                report.infra_failure = reason.tier() == FailureTier::Environment;
                report.infra_failure_reason = Some(reason.as_str().to_owned());
            }
            Graded {
                report,
                resolution: None,
                problem: Some(problem),
            }
        }
        Ok(evaluation) => {
            let resolution = apply_status_map(&mut report, instance, &evaluation.status_map);
            Graded {
                report,
                resolution: Some(resolution),
                problem: None,
            }
        }
    }
}

/// Parses a run's `test_output.txt` with an evaluator plugin and grades it against `instance`:
/// hardened runs (`region` given) read only the host's nonce-tagged section, compatible runs
/// follow `get_logs_eval`. Shared by `harness run` and single executions ([`super::execute`]).
pub fn grade_with_plugin(
    evaluator: &swerve_host::EvaluatorPlugin,
    context: &swerve_host::LogContext,
    instance: &Instance,
    log: &LogText<'_>,
    region: Option<&HardenedRegion>,
) -> Result<(Graded, StatusMap), ParseFailure> {
    let parse = |t: &str| {
        evaluator
            .parse(t, context)
            .map(status_map)
            .map_err(|f| ParseFailure(format!("{}: {}", f.class, f.message)))
    };
    let evaluation = match region {
        Some(r) => evaluate_hardened(log, r, &parse),
        None => evaluate_compat(log, &parse),
    }?;
    let map = evaluation
        .as_ref()
        .map(|e| e.status_map.clone())
        .unwrap_or_default();
    Ok((
        grade_evaluation(instance, log, PatchState::Present, evaluation),
        map,
    ))
}

/// Converts an evaluator plugin's pairs into a status map (later pairs override earlier ones).
pub fn status_map(pairs: Vec<(String, swerve_host::TestStatus)>) -> StatusMap {
    pairs
        .into_iter()
        .map(|(name, status)| (name, Status::from_token(status.as_str())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use swerve_log_parsers::{LogContext, Parser};

    fn pytest(text: &str) -> Result<StatusMap, ParseFailure> {
        Ok(Parser::Pytest.parse(text, &LogContext::default()))
    }

    fn region(code: i64) -> HardenedRegion {
        HardenedRegion {
            start_nonce: "s1".into(),
            end_nonce: "e1".into(),
            exit_code: code,
        }
    }

    #[test]
    fn forged_markers_before_the_real_ones_do_not_count() {
        // Model code printed a fake section (install time) ahead of the genuine one.
        let log = "+ : '>>>>> Start Test Output'\nPASSED t::a\n+ : '>>>>> End Test Output'\n\
                   + : '>>>>> Start Test Output s1'\nFAILED t::a - boom\n\
                   + : '>>>>> End Test Output e1'\n>>>>> Test Exit Code: 1\n";
        let text = LogText::new(log);
        // Upstream grades the first (forged) section; only its exit-code cross-check objects.
        let compat = evaluate_compat(&text, &pytest);
        assert!(
            format!("{compat:?}").contains("ExitCodeContradictsResults"),
            "{compat:?}"
        );
        let hard = evaluate_hardened(&text, &region(1), &pytest)
            .unwrap()
            .unwrap();
        assert_eq!(hard.status_map.get("t::a").unwrap().as_str(), "FAILED");
    }

    #[test]
    fn host_exit_code_rejects_all_passed_logs() {
        let log = "+ : '>>>>> Start Test Output s1'\nPASSED t::a\n+ : '>>>>> End Test Output e1'\n>>>>> Test Exit Code: 0\n";
        let text = LogText::new(log);
        // The forged exit-code line says 0; the host measured 1.
        assert!(matches!(
            evaluate_hardened(&text, &region(1), &pytest).unwrap(),
            Err(LogProblem::ExitCodeContradictsResults { .. })
        ));
        assert!(
            evaluate_hardened(&text, &region(0), &pytest)
                .unwrap()
                .is_ok()
        );
        // A missing end nonce (killed at the timeout) is not gradeable.
        let cut = LogText::new("+ : '>>>>> Start Test Output s1'\nPASSED t::a\n");
        assert_eq!(
            evaluate_hardened(&cut, &region(0), &pytest).unwrap(),
            Err(LogProblem::MissingMarkers(MissingMarkers::End))
        );
    }

    #[test]
    fn compat_matches_the_builtin_grader() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data/swebench-logs");
        for case in fs_err::read_dir(&dir).expect("fixtures") {
            let case = case.expect("entry").path();
            let row = fs_err::read_to_string(case.join("instance.json")).expect("row");
            let instance = Instance::from_json(&row).expect("row");
            let raw = fs_err::read_to_string(case.join("test_output.txt")).expect("log");
            let parser = crate::grading::parser_for(&instance).expect("parser");
            let parse = |t: &str| Ok(parser.parse(t, &LogContext::default()));
            let text = LogText::new(&raw);
            let evaluation = evaluate_compat(&text, &parse).expect("parse");
            let graded = grade_evaluation(&instance, &text, PatchState::Present, evaluation);
            let builtin =
                crate::grading::grade(&instance, &raw, PatchState::Present).expect("grade");
            assert_eq!(graded.report, builtin.report, "{}", case.display());
        }
    }
}
