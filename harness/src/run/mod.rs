//! `harness run`: SWE-bench's `run_evaluation` on swerve's sandbox (`docs/harness.md`). A
//! [`RunConfig`] runs here with [`run`], or on Slurm with [`submit`] (one job array whose tasks
//! each [`run_task`]); [`rewrite_reports`] grades a finished run's logs again (`harness
//! report`). Single executions for other crates are [`crate::execution`].
//!
//! The flow: resolve the dataset (`source.rs`) and predictions, sweep containers left by an
//! earlier run with this id, make the images (`images.rs`), take each row's own eval script or
//! generate one (`eval_script.rs`), reuse results whose content key matches (`cache.rs`),
//! evaluate the rest with at most `max_workers` containers at once (`instance.rs`), and write
//! the run report with [`swerve_swebench::report`]. Hardened mode (default) is described in
//! `docs/hardening.md`.

mod apply;
mod assets;
pub(crate) mod cache;
mod cluster;
mod environment;
pub(crate) mod error;
pub(crate) mod eval_script;
mod evaluate;
pub(crate) mod execute;
mod foreign;
pub(crate) mod hardening;
pub(crate) mod instance;
mod instance_log;
pub(crate) mod remote;
mod rewrite;
pub(crate) mod source;
mod tamper;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use swerve_host::EvaluatorPlugin;
use swerve_log_parsers::{LogText, classify_infra_failure};
use swerve_sandbox::{Limits, Sandbox, SandboxConfig};

use crate::images::{self, ImageRecipe};
use cache::{InstanceMeta, META_FILE};
pub use cache::{OutcomeKind, Resume};
pub use cluster::{run_task, submit};
pub(crate) use error::{RunError, error_chain};
use eval_script::{ScriptParts, harden_test_cmd, script_from_spec, with_exit_code};
pub use instance::InstanceResult;
use instance::{Job, Mode, RunContext};
pub use rewrite::rewrite_reports;
use source::DatasetSource;
use swerve_swebench::Instance;
use swerve_swebench::predictions::{self, Prediction};
use swerve_swebench::report::{
    DockerLeftovers, RunResults, SubmittedPrediction, build_run_report, render_run_report,
    run_report_path,
};

/// A validated `harness run`.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The run id: log folder, container names and labels.
    pub run_id: String,
    /// The dataset, already filtered to `-i` ids.
    pub source: DatasetSource,
    /// The `-i` ids (for the missing-predictions warning).
    pub instance_ids: Vec<String>,
    /// Every prediction.
    pub predictions: Vec<Prediction>,
    /// Containers at once (at least 1).
    pub max_workers: usize,
    /// Limit for one instance's eval script.
    pub timeout: Duration,
    /// The folder holding `run_evaluation/` (SWE-bench: `logs`).
    pub log_root: PathBuf,
    /// Where the run report goes.
    pub report_dir: PathBuf,
    /// Hardened or compatible.
    pub mode: Mode,
    /// Which earlier results are reused.
    pub resume: Resume,
    /// Container limits.
    pub limits: Limits,
    /// The verdict rule for rows of other formats (`None`: each format's own; SWE-bench rows
    /// always get SWE-bench's).
    pub verdict: Option<swerve_swebench::grading::VerdictRule>,
}

/// Progress reports (the binary draws a bar).
pub trait RunProgress: Send + Sync {
    /// A line for the user (stderr).
    fn message(&self, text: &str);
    /// Evaluation starts: `total` instances, `reused` of them from an earlier run.
    fn start(&self, total: usize, reused: usize);
    /// One instance finished.
    fn done(&self, result: &InstanceResult);
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The run report and the printed summary's numbers.
    pub results: RunResults,
    /// The report file written.
    pub report_file: PathBuf,
    /// Every instance evaluated or reused.
    pub instances: Vec<InstanceResult>,
    /// Instances that a cluster task did not finish (it was killed or failed); a rerun
    /// completes them. Always empty for a local run.
    pub unfinished: Vec<String>,
}

impl RunSummary {
    /// Ids whose failure is swerve's (infrastructure or the log parser), not the model's.
    pub fn infra_errors(&self) -> Vec<&str> {
        self.instances
            .iter()
            .filter(|r| r.outcome.is_infra())
            .map(|r| r.instance_id.as_str())
            .collect()
    }
}

/// Whether a run id is usable in container names and paths.
pub(crate) fn valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The folder of a row's repository in its image: `/testbed`, or where another benchmark's
/// images keep it.
pub(crate) fn foreign_repo_dir(row: &Instance) -> String {
    foreign::repo_dir(row).unwrap_or_else(|| eval_script::REPO_DIRECTORY.to_owned())
}

pub(crate) use foreign::secure_at;

/// `logs/run_evaluation/<run_id>/`.
pub(crate) fn run_dir(log_root: &Path, run_id: &str) -> PathBuf {
    log_root.join("run_evaluation").join(run_id)
}

/// The eval script of a row and the test command for the log parser's context. A row's own
/// `eval_script` (SWE-bench 5 rows) wins and runs verbatim, with only what v5 itself does to it
/// (header lines dropped and re-added, exit-code lines around the end marker); a
/// row without one gets the script generated from its environment spec (hardened: with
/// `-p no:cacheprovider`; a verbatim script gets it through `PYTEST_ADDOPTS` when it runs, see
/// [`ScriptParts::tests_script`]). `None` when the row has neither.
pub(crate) fn eval_script_for(
    source: &DatasetSource,
    row: &swerve_swebench::dataset::Instance,
    mode: Mode,
) -> Option<(String, String)> {
    if let Some(script) = row.eval_script.as_deref() {
        let script = with_exit_code(script);
        let test_command = ScriptParts::split(&script)
            .map(|parts| parts.tests.join("\n"))
            .unwrap_or_default();
        return Some((script, test_command));
    }
    let env = source.environments.get(row)?;
    let test_cmd = env.test_cmd.as_script_text();
    let test_cmd = match mode {
        Mode::Hardened | Mode::Strict => harden_test_cmd(&test_cmd),
        Mode::Compat => test_cmd,
    };
    let script = script_from_spec(row, env, &test_cmd);
    Some((with_exit_code(&script), test_cmd))
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), RunError> {
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(|source| RunError::Write {
            path: parent.to_owned(),
            source,
        })?;
    }
    swerve_cache::write_atomic(path, text).map_err(|source| RunError::Write {
        path: path.to_owned(),
        source,
    })
}

/// `run.json` (v5): dataset, split, task repository and creation time, 2-space JSON.
fn write_run_json(config: &RunConfig, split: &str) -> Result<(), RunError> {
    let value = serde_json::json!({
        "dataset": config.source.name,
        "split": split,
        "task_repo": config.source.task_repo.as_ref().map(|d| d.display().to_string()),
        "created_at": instance_log::iso_seconds(instance_log::now()),
    });
    let mut text = serde_json::to_string_pretty(&value).expect("json");
    text.push('\n');
    write(
        &run_dir(&config.log_root, &config.run_id).join("run.json"),
        &text,
    )
}

/// Records an instance that could not even start (image or script missing). An earlier
/// `report.json` goes first, so that it is never reused for this attempt; a file that cannot be
/// removed or written is logged as an error (the instance is an infrastructure error anyway).
fn record_failure(
    dir: &Path,
    instance_id: &str,
    outcome: OutcomeKind,
    error: String,
) -> InstanceResult {
    let logged = |what: &str, result: std::io::Result<()>| {
        if let Err(e) = result {
            tracing::error!(instance = instance_id, "cannot {what}: {e}");
        }
    };
    logged(
        "remove the earlier report.json",
        fs_err::remove_file(dir.join("report.json")).or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        }),
    );
    logged(
        "create the instance's log folder",
        fs_err::create_dir_all(dir),
    );
    logged(
        "write run_instance.log",
        instance_log::InstanceLog::create(&dir.join("run_instance.log"), instance_id)
            .map(|log| log.error(&format!("Error in evaluation for {instance_id}: {error}"))),
    );
    let meta = InstanceMeta {
        cache_key: String::new(),
        image_id: String::new(),
        mode: String::new(),
        outcome,
        error: Some(error),
        hardened: None,
        undone: None,
        tamper_suspected: Vec::new(),
        overhead_ms: 0,
        tests_ms: 0,
    };
    logged(
        "write swerve.json",
        swerve_cache::write_atomic(
            &dir.join(META_FILE),
            serde_json::to_string_pretty(&meta).expect("json"),
        ),
    );
    InstanceResult {
        instance_id: instance_id.to_owned(),
        outcome,
        reused: false,
        overhead: Duration::ZERO,
        tests: Duration::ZERO,
        grading: None,
    }
}

/// Runs the evaluation and writes the run report: select the predictions to run, prepare each
/// one's image and job, reuse results whose content key matches, evaluate the rest in
/// containers, then write the report.
pub async fn run(
    config: &RunConfig,
    split: &str,
    evaluator: EvaluatorPlugin,
    progress: &dyn RunProgress,
) -> Result<RunSummary, RunError> {
    if !valid_run_id(&config.run_id) {
        return Err(RunError::RunId(config.run_id.clone()));
    }
    let to_run = select(config, progress)?;
    write_run_json(config, split)?;
    // Each instance's files are whole once its report.json is written; a rerun reuses them
    // (`--resume`) and removes the containers the stopped run left (the sweep below).
    swerve_interrupt::set_resume_hint(Some(format!(
        "the instances finished so far are kept under {}; run the same command again to \
         continue (they are reused, the rest are run)",
        run_dir(&config.log_root, &config.run_id)
            .join(model_name(config))
            .display()
    )));

    let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
    sweep(&sandbox, &config.run_id, progress).await?;
    let (base, mut instances, jobs) = prepare_all(config, &sandbox, &to_run, progress).await?;
    let evaluated = evaluate_jobs(config, &sandbox, evaluator, &jobs, progress).await;
    instances.extend(evaluated);
    let summary = finish(config, Some(&sandbox), &base, instances, progress).await;
    swerve_interrupt::set_resume_hint(None);
    summary
}

/// The model's log folder name: the first prediction's model, `None` without predictions.
fn model_name(config: &RunConfig) -> String {
    config
        .predictions
        .first()
        .map_or_else(|| "None".to_owned(), Prediction::model_dir_name)
}

/// Images and jobs of `to_run`, `max_workers` at a time (builds of one recipe are serialised
/// by the sandbox's build lock), split into results already known (reused, or failed to
/// prepare) and jobs to run; reports the known ones to `progress`. Returns the base images too.
async fn prepare_all(
    config: &RunConfig,
    sandbox: &Sandbox,
    to_run: &[(&Instance, &Prediction)],
    progress: &dyn RunProgress,
) -> Result<(images::BaseImages, Vec<InstanceResult>, Vec<Job>), RunError> {
    let envs = &config.source.environments;
    if to_run.iter().any(|(row, _)| envs.get(row).is_some()) {
        progress.message("Preparing images");
    }
    let (base, _) =
        images::BaseImages::ensure(sandbox, envs, to_run.iter().map(|(row, _)| *row)).await?;
    let model_dir = run_dir(&config.log_root, &config.run_id).join(model_name(config));
    let workers = config.max_workers.max(1);
    let prepared: Vec<Result<Job, InstanceResult>> = futures_util::stream::iter(to_run.iter())
        .map(|(row, pred)| prepare_job(config, sandbox, &base, &model_dir, row, pred))
        .buffer_unordered(workers)
        .collect()
        .await;
    let (instances, jobs) = reuse_or_queue(prepared, config.resume);
    let reused = instances.iter().filter(|r| r.reused).count();
    if reused > 0 {
        progress.message(&format!("{reused} instances already run, skipping..."));
    }
    progress.start(instances.len() + jobs.len(), reused);
    for r in &instances {
        progress.done(r);
    }
    Ok((base, instances, jobs))
}

/// Evaluates `jobs` in containers, `max_workers` at once.
async fn evaluate_jobs(
    config: &RunConfig,
    sandbox: &Sandbox,
    evaluator: EvaluatorPlugin,
    jobs: &[Job],
    progress: &dyn RunProgress,
) -> Vec<InstanceResult> {
    let ctx = RunContext {
        sandbox: sandbox.clone(),
        evaluator,
        run_id: config.run_id.clone(),
        timeout: config.timeout,
        limits: config.limits.clone(),
        mode: config.mode,
    };
    futures_util::stream::iter(jobs.iter())
        .map(|job| {
            let ctx = &ctx;
            async move {
                let result = instance::run_instance(ctx, job).await;
                progress.done(&result);
                result
            }
        })
        .buffer_unordered(config.max_workers.max(1))
        .collect()
        .await
}

/// The end of a run: sweep what carries the run id, note what is left on the engine (when one
/// is reachable), and write the run report from the instances' files.
async fn finish(
    config: &RunConfig,
    sandbox: Option<&Sandbox>,
    base: &images::BaseImages,
    mut instances: Vec<InstanceResult>,
    progress: &dyn RunProgress,
) -> Result<RunSummary, RunError> {
    instances.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let model = model_name(config);
    let model_dir = run_dir(&config.log_root, &config.run_id).join(&model);
    // Every container of this run is removed when its instance ends, so what still carries the
    // run id comes from a killed run with the same id whose container create was still in
    // flight at the first sweep (the engine finishes it after the client died), or from a
    // cluster task that was killed.
    let docker = match sandbox {
        Some(sandbox) => {
            sweep(sandbox, &config.run_id, progress).await?;
            Some(leftovers(sandbox, &config.run_id, &config.source, base).await)
        }
        None => None,
    };
    let results = make_report(config, &model_dir, docker);
    let file = run_report_path(&config.report_dir, &model, &config.run_id);
    write(&file, &render_run_report(&results.report))?;
    Ok(RunSummary {
        results,
        report_file: file,
        instances,
        unfinished: Vec::new(),
    })
}

/// The dataset rows that have a prediction with a non-empty patch, in dataset order; warns
/// about requested instances without a prediction, as SWE-bench does.
fn select<'c>(
    config: &'c RunConfig,
    progress: &dyn RunProgress,
) -> Result<Vec<(&'c Instance, &'c Prediction)>, RunError> {
    predictions::check_in_dataset(&config.predictions, &config.source.all_ids)?;
    let by_id: BTreeMap<&str, &Prediction> = config
        .predictions
        .iter()
        .map(|p| (p.instance_id.as_str(), p))
        .collect();
    let missing = config
        .instance_ids
        .iter()
        .filter(|id| !by_id.contains_key(id.as_str()))
        .count();
    if missing > 0 {
        progress.message(&format!(
            "Warning: Missing predictions for {missing} instance IDs."
        ));
    }
    Ok(config
        .source
        .rows
        .iter()
        .filter_map(|row| by_id.get(row.instance_id.as_str()).map(|p| (row, *p)))
        .filter(|(_, p)| !p.is_empty_patch())
        .collect())
}

/// Removes the containers an earlier run with this id left, saying so.
async fn sweep(
    sandbox: &Sandbox,
    run_id: &str,
    progress: &dyn RunProgress,
) -> Result<(), RunError> {
    let swept = sandbox.sweep(Some(run_id)).await?;
    if !swept.is_empty() {
        progress.message(&format!(
            "Removed {} containers left by an earlier run of {run_id}",
            swept.len(),
        ));
    }
    Ok(())
}

/// One prediction's image (built or pulled) and job; an instance that cannot start is recorded
/// as failed in its log folder.
async fn prepare_job(
    config: &RunConfig,
    sandbox: &Sandbox,
    base: &images::BaseImages,
    model_dir: &Path,
    row: &Instance,
    pred: &Prediction,
) -> Result<Job, InstanceResult> {
    let dir = model_dir.join(&row.instance_id);
    let fail = |e: String| record_failure(&dir, &row.instance_id, OutcomeKind::InfraError, e);
    let recipe = config
        .source
        .recipe(row, base)
        .map_err(|e| fail(format!("{e:#}")))?;
    let image = recipe.image_name();
    let info = match images::ensure(sandbox, &recipe).await {
        Ok(timings) => timings
            .last()
            .map(|t| t.info.clone())
            .expect("one image at least"),
        Err(e) => return Err(fail(image_error(&recipe, &e, &row.instance_id))),
    };
    let patch = pred.model_patch.clone().unwrap_or_default();
    let plan = foreign::plan(
        row,
        config.mode,
        config.verdict,
        config.source.pro_scripts.as_deref(),
    )
    .map_err(|e| fail(e.to_string()))?;
    if let Some(plan) = plan {
        let (image, image_id, note) =
            foreign::secure_image(sandbox, row, config.mode, image, info.id)
                .await
                .map_err(|e| fail(format!("history check: {}", error_chain(&e))))?;
        let eval_script = plan.script_text();
        return Ok(Job {
            cache_key: cache::cache_key(&image_id, &patch, &eval_script, config.mode.as_str()),
            row: row.clone(),
            patch,
            eval_script,
            assets: assets::Staging::default(),
            image,
            image_id,
            dir,
            log_parser: String::new(),
            test_command: plan.test_command(),
            notes: note.into_iter().collect(),
            foreign: Some(plan),
        });
    }
    let Some((eval_script, test_command)) = eval_script_for(&config.source, row, config.mode)
    else {
        return Err(fail(
            "no environment spec and no eval_script in the row".to_owned(),
        ));
    };
    // SWE-bench 5's patch assets: restored by the eval script from files staged in the
    // container, their contents part of the result's key.
    let staging = assets::stage(
        row,
        config
            .source
            .task_dirs
            .get(&row.instance_id)
            .map(PathBuf::as_path),
    )
    .map_err(|e| fail(e.to_string()))?;
    let eval_script = staging.inject(&eval_script);
    let keyed_script = format!("{eval_script}{}", staging.digest());
    Ok(Job {
        cache_key: cache::cache_key(&info.id, &patch, &keyed_script, config.mode.as_str()),
        row: row.clone(),
        patch,
        eval_script,
        assets: staging,
        image,
        image_id: info.id,
        dir,
        log_parser: config.source.log_parser_for(row),
        test_command,
        notes: Vec::new(),
        foreign: None,
    })
}

/// What an image failure is recorded as: SWE-bench's message for a prebuilt image that is not
/// there, else the error with its causes.
fn image_error(recipe: &ImageRecipe, e: &images::ImagesError, instance_id: &str) -> String {
    match (recipe, e) {
        (
            ImageRecipe::Prebuilt(name),
            images::ImagesError::Sandbox {
                source: swerve_sandbox::Error::ImageNotFound { .. },
                ..
            },
        ) => format!("Image {name} not found for {instance_id}"),
        _ => error_chain(e),
    }
}

/// Splits prepared jobs into results to reuse (their content key matches a finished result) and
/// jobs to run; failures to prepare are results already.
fn reuse_or_queue(
    prepared: Vec<Result<Job, InstanceResult>>,
    resume: Resume,
) -> (Vec<InstanceResult>, Vec<Job>) {
    let mut instances = Vec::new();
    let mut jobs = Vec::new();
    for p in prepared {
        match p {
            Ok(job) if cache::reusable(&job.dir, &job.cache_key, resume) => {
                let outcome =
                    cache::read_meta(&job.dir).map_or(OutcomeKind::Unresolved, |m| m.outcome);
                instances.push(InstanceResult {
                    instance_id: job.row.instance_id.clone(),
                    outcome,
                    reused: true,
                    overhead: Duration::ZERO,
                    tests: Duration::ZERO,
                    grading: None,
                });
            }
            Ok(job) => jobs.push(job),
            Err(failed) => instances.push(failed),
        }
    }
    (instances, jobs)
}

/// Containers still labelled with the run id, and dataset images present locally.
async fn leftovers(
    sandbox: &Sandbox,
    run_id: &str,
    source: &DatasetSource,
    base: &images::BaseImages,
) -> DockerLeftovers {
    let containers = sandbox.list(Some(run_id)).await.unwrap_or_default();
    let mut images = Vec::new();
    for row in &source.rows {
        let Ok(recipe) = source.recipe(row, base) else {
            continue;
        };
        let name = recipe.image_name();
        if matches!(sandbox.image_info(&name).await, Ok(Some(_))) {
            images.push(name);
        }
    }
    let mut containers = containers;
    containers.sort();
    images.sort();
    DockerLeftovers {
        unstopped_instances: containers.len(),
        unstopped_containers: containers,
        unremoved_images: images,
    }
}

/// The run report from the files under the model's log folder.
pub(crate) fn make_report(
    config: &RunConfig,
    model_dir: &Path,
    docker: Option<DockerLeftovers>,
) -> RunResults {
    let dataset_ids: Vec<String> = config
        .source
        .rows
        .iter()
        .map(|r| r.instance_id.clone())
        .collect();
    let submitted: Vec<SubmittedPrediction<'_>> = config
        .predictions
        .iter()
        .map(|p| SubmittedPrediction {
            instance_id: &p.instance_id,
            model_patch: p.model_patch.as_deref(),
        })
        .collect();
    build_run_report(
        &dataset_ids,
        &submitted,
        |id| fs_err::read_to_string(model_dir.join(id).join("report.json")).ok(),
        |id| {
            let dir = model_dir.join(id);
            let mut text = fs_err::read_to_string(dir.join("test_output.txt")).unwrap_or_default();
            text.push('\n');
            text.push_str(
                &fs_err::read_to_string(dir.join("run_instance.log")).unwrap_or_default(),
            );
            classify_infra_failure(&LogText::new(&text))
        },
        docker,
    )
}
