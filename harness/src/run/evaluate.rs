//! Grading a run's `test_output.txt` with an evaluator plugin as the parser: the plugin is the
//! parse step of the one evaluation (`swerve_log_parsers::evaluate_log_with` for compatible runs,
//! [`swerve_swebench::hardened::evaluate_hardened`] for hardened ones), and the report comes from
//! [`swerve_swebench::grading::grade_evaluation`], as for every other grade.

use swerve_log_parsers::{LogText, StatusMap, evaluate_log_with};
use swerve_swebench::Instance;
use swerve_swebench::grading::{Grading, PatchState, grade_evaluation};
use swerve_swebench::hardened::{HardenedRegion, evaluate_hardened};

/// A parser that failed (a trapped or erroring plugin): swerve cannot grade, not an outcome
/// of the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("log parser failed: {0}")]
pub(super) struct ParseFailure(pub String);

/// Parses a run's `test_output.txt` with an evaluator plugin and grades it against `instance`:
/// hardened runs (`region` given) read only the host's nonce-tagged section, compatible runs
/// follow `get_logs_eval`. Shared by `harness run`, report rewriting and single executions
/// ([`super::execute`]).
pub(super) fn grade_with_plugin(
    evaluator: &swerve_host::EvaluatorPlugin,
    context: &swerve_host::LogContext,
    instance: &Instance,
    log: &LogText<'_>,
    region: Option<&HardenedRegion>,
) -> Result<Grading, ParseFailure> {
    let parse = |text: &str| -> Result<StatusMap, ParseFailure> {
        evaluator
            .parse(text, context)
            .map_err(|f| ParseFailure(format!("{}: {}", f.class, f.message)))
    };
    let evaluation = match region {
        Some(region) => evaluate_hardened(log, region, parse),
        None => evaluate_log_with(log, parse),
    }?;
    Ok(grade_evaluation(
        instance,
        log,
        PatchState::Present,
        evaluation,
    ))
}
