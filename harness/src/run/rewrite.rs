//! `harness report`: re-grade the `test_output.txt` files of a run without containers
//! (SWE-bench's `--rewrite_reports`) and write the run report again. Hardened results are
//! re-graded with the nonces and exit code recorded in `swerve.json`.

use std::path::PathBuf;

use swerve_host::EvaluatorPlugin;
use swerve_log_parsers::LogText;

use super::cache::{self, OutcomeKind};
use super::evaluate::grade_with_plugin;
use super::{RunConfig, RunError, eval_script_for, make_report, run_dir};
use swerve_swebench::report::{
    RunResults, render_instance_report, render_run_report, run_report_path,
};

/// Writes a re-graded instance's `report.json` and its outcome in `swerve.json`.
fn write_regraded(
    dir: &std::path::Path,
    row: &swerve_swebench::Instance,
    meta: Option<cache::InstanceMeta>,
    graded: &swerve_swebench::grading::Grading,
) -> Result<(), RunError> {
    let path = dir.join("report.json");
    swerve_cache::write_atomic(
        &path,
        render_instance_report(&row.instance_id, &graded.report),
    )
    .map_err(|source| RunError::Write { path, source })?;
    if let Some(mut meta) = meta {
        meta.outcome = OutcomeKind::of_grading(graded);
        let path = dir.join(cache::META_FILE);
        swerve_cache::write_atomic(&path, serde_json::to_string_pretty(&meta).expect("json"))
            .map_err(|source| RunError::Write { path, source })?;
    }
    Ok(())
}

/// Re-grades every instance folder that has a `test_output.txt`; returns the run report and
/// the file it was written to.
pub fn rewrite_reports(
    config: &RunConfig,
    evaluator: &EvaluatorPlugin,
) -> Result<(RunResults, PathBuf), RunError> {
    let model = config.predictions.first().map_or_else(
        || "None".to_owned(),
        swerve_swebench::predictions::Prediction::model_dir_name,
    );
    let model_dir = run_dir(&config.log_root, &config.run_id).join(&model);
    // A run id (or model) without logs is a mistake to say, not a report of errors to write.
    if !model_dir.is_dir() {
        return Err(RunError::NoLogs { dir: model_dir });
    }
    for row in &config.source.rows {
        let dir = model_dir.join(&row.instance_id);
        let Ok(raw) = fs_err::read_to_string(dir.join("test_output.txt")) else {
            continue;
        };
        let meta = cache::read_meta(&dir);
        let plan = super::foreign::plan(
            row,
            config.mode,
            config.verdict,
            config.source.pro_scripts.as_deref(),
        );
        let graded = match plan {
            Ok(None) => None,
            Ok(Some(plan)) => {
                // Rows of other formats: re-graded from what their evaluation left.
                let Some(graded) = super::foreign::regrade(evaluator, row, &plan, &dir) else {
                    tracing::warn!(instance = %row.instance_id, "cannot re-grade; report left as it is");
                    continue;
                };
                Some(graded)
            }
            Err(e) => {
                tracing::warn!(instance = %row.instance_id, error = %e, "cannot re-grade; report left as it is");
                continue;
            }
        };
        if let Some(graded) = graded {
            write_regraded(&dir, row, meta, &graded)?;
            continue;
        }
        let test_command = eval_script_for(&config.source, row, config.mode)
            .map(|(_, c)| c)
            .unwrap_or_default();
        let context = swerve_host::LogContext {
            repo: row.repo.clone(),
            instance_id: row.instance_id.clone(),
            test_command,
            version: row.version.clone().unwrap_or_default(),
            parser: config.source.log_parser_for(row),
        };
        let region = meta.as_ref().and_then(|m| m.hardened.as_ref());
        let Ok(graded) = grade_with_plugin(evaluator, &context, row, &LogText::new(&raw), region)
        else {
            tracing::warn!(instance = %row.instance_id, "log parser failed; report left as it is");
            continue;
        };
        write_regraded(&dir, row, meta, &graded)?;
    }
    let results = make_report(config, &model_dir, None);
    let file = run_report_path(&config.report_dir, &model, &config.run_id);
    fs_err::create_dir_all(&config.report_dir).map_err(|source| RunError::Write {
        path: config.report_dir.clone(),
        source,
    })?;
    swerve_cache::write_atomic(&file, render_run_report(&results.report)).map_err(|source| {
        RunError::Write {
            path: file.clone(),
            source,
        }
    })?;
    Ok((results, file))
}
