//! swerve's hardened reading of a run's `test_output.txt` (`docs/hardening.md`): only the region
//! between the start and end markers tagged with per-run nonces the host printed, with the exit
//! code the host measured instead of a line in the log.
//!
//! Compatible runs read the log as SWE-bench does (`swerve_log_parsers::evaluate_log_with`);
//! both kinds of evaluation are graded by [`crate::grading::grade_evaluation`].

use swerve_log_parsers::{
    END_TEST_OUTPUT, Evaluation, ExitCode, LogProblem, LogText, MissingMarkers, ParsedRegion,
    START_TEST_OUTPUT, StatusMap, extract_test_section, shows_suite_evidence,
};

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
    /// Changes outside the repository that the setup part made and no rule allows (`A /path`,
    /// `C /path`, `D /path`, from the container's file-system diff taken by the host): the
    /// instance is not resolved when there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_changes: Vec<String>,
    /// Signals of the tamper check that make the instance not resolved (`--mode strict`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tamper_suspected: Vec<String>,
}

/// The text between the nonce-tagged start marker and the nonce-tagged end marker.
pub(crate) fn hardened_section<'t>(
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

/// Hardened `get_logs_eval`: no grade when the setup changed the environment outside the
/// repository (`environment_changes`), bad-code markers anywhere (they can only hurt the patch), the
/// section between the host's nonce markers, no whole-log fallback (the rest of the log holds
/// output of model code run at install time), and the exit-code cross-check against the exit
/// status the host measured instead of a line in the log.
pub fn evaluate_hardened<E>(
    log: &LogText<'_>,
    region: &HardenedRegion,
    mut parse: impl FnMut(&str) -> Result<StatusMap, E>,
) -> Result<Result<Evaluation, LogProblem>, E> {
    if !region.environment_changes.is_empty() {
        return Ok(Err(LogProblem::EnvironmentChanged {
            paths: region.environment_changes.len(),
        }));
    }
    if !region.tamper_suspected.is_empty() {
        return Ok(Err(LogProblem::TamperSuspected {
            signals: region.tamper_suspected.len(),
        }));
    }
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
    if region.exit_code != 0 && !map.is_empty() && !map.has_failures() {
        return Ok(Err(LogProblem::ExitCodeContradictsResults {
            exit_code: ExitCode::from_status(region.exit_code),
        }));
    }
    Ok(Ok(evaluation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use swerve_log_parsers::{LogContext, Parser, evaluate_log_with};

    fn pytest(text: &str) -> Result<StatusMap, std::convert::Infallible> {
        Ok(Parser::Pytest.parse(text, &LogContext::default()))
    }

    fn region(code: i64) -> HardenedRegion {
        HardenedRegion {
            start_nonce: "s1".into(),
            end_nonce: "e1".into(),
            exit_code: code,
            environment_changes: Vec::new(),
            tamper_suspected: Vec::new(),
        }
    }

    #[test]
    fn a_changed_environment_is_not_graded() {
        let log =
            LogText::new(">>>>> Start Test Output s1\nPASSED t.py::a\n>>>>> End Test Output e1\n");
        assert!(evaluate_hardened(&log, &region(0), pytest).unwrap().is_ok());
        let mut changed = region(0);
        changed.environment_changes = vec!["A /usr/local/bin/pytest".into()];
        assert_eq!(
            evaluate_hardened(&log, &changed, pytest)
                .unwrap()
                .unwrap_err(),
            LogProblem::EnvironmentChanged { paths: 1 }
        );
    }

    #[test]
    fn forged_markers_before_the_real_ones_do_not_count() {
        // Model code printed a fake section (install time) ahead of the genuine one.
        let log = "+ : '>>>>> Start Test Output'\nPASSED t::a\n+ : '>>>>> End Test Output'\n\
                   + : '>>>>> Start Test Output s1'\nFAILED t::a - boom\n\
                   + : '>>>>> End Test Output e1'\n>>>>> Test Exit Code: 1\n";
        let text = LogText::new(log);
        // Upstream grades the first (forged) section; only its exit-code cross-check objects.
        let compat = evaluate_log_with(&text, pytest);
        assert!(
            format!("{compat:?}").contains("ExitCodeContradictsResults"),
            "{compat:?}"
        );
        let hard = evaluate_hardened(&text, &region(1), pytest)
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
            evaluate_hardened(&text, &region(1), pytest).unwrap(),
            Err(LogProblem::ExitCodeContradictsResults { .. })
        ));
        assert!(
            evaluate_hardened(&text, &region(0), pytest)
                .unwrap()
                .is_ok()
        );
        // A missing end nonce (killed at the timeout) is not gradeable.
        let cut = LogText::new("+ : '>>>>> Start Test Output s1'\nPASSED t::a\n");
        assert_eq!(
            evaluate_hardened(&cut, &region(0), pytest).unwrap(),
            Err(LogProblem::MissingMarkers(MissingMarkers::End))
        );
    }
}
