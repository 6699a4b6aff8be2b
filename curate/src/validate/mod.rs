//! `curate validate`: from curated tasks to executable SWE-bench 5 rows, with FAIL_TO_PASS and
//! PASS_TO_PASS derived by running the tests (`../shared/specs/environments.md` §2).
//!
//! For each task: the repository's files at the base commit give an environment [`recipe`];
//! the test patch and the gold patch must apply at the base commit; then the test files the
//! test patch touches run `runs` times before the fix (base + test patch) and after it (base +
//! test patch + gold), each run in a fresh container, through `harness run`'s own path (the
//! same images, eval script, hardened mode, log parser and grading: [`PatchExecutor`]).
//! FAIL_TO_PASS: failed or absent in every run before and passed in every run after;
//! PASS_TO_PASS: passed in every run of both sides; a test whose status differs between runs
//! of one side is flaky and in neither list. A task is kept when FAIL_TO_PASS is not empty and
//! its gold patch is then graded resolved, in one more run, by the row as written.
//!
//! Every task ends as one line of `validate_state.jsonl` (kept or dropped with a
//! [`DropReason`]), appended when it ends: a killed run resumes from that file, redoing only
//! tasks without a line and those that ended in an infrastructure error. The output files are
//! rewritten from it at the end of every run.
//!
//! Network: only while an environment or instance image is built; the tests run without it.

mod lists;
mod rows;
mod state;

pub use state::{STATE_FILE, TaskEnd, Verdict};

use lists::{Lists, Side, SideResult, collected, derive_lists, side_result, timed_out};
use rows::{TaskRow, instance, output_row, read_tasks, write_outputs};
use state::{StateWriter, is_retried, read_state};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use swerve_harness::images::{Environments, stable_image_name, swebench_arch};
use swerve_harness::run::eval_script::diff_paths;
use swerve_harness::run::execute::{ExecuteConfig, PatchExecutor, PrepareFailure};
use swerve_harness::run::source::DatasetSource;
use swerve_host::Execution;
use swerve_mirror::Mirror;
use swerve_sandbox::ImageOrigin;
use swerve_swebench::dataset::Instance;

use crate::error::CurateError;
use crate::recipe::{self, Files, Recipe};

/// A `curate validate` run.
#[derive(Debug, Clone)]
pub struct ValidateConfig {
    /// `tasks.jsonl` of `curate run`, or any rows with `repo`, `base_commit`, `patch` and
    /// `test_patch`.
    pub tasks: PathBuf,
    /// The bare mirrors, `<owner>/<name>.git`, as `curate run` reads them.
    pub repos: PathBuf,
    /// Where the output files go.
    pub output: PathBuf,
    /// Containers at once.
    pub jobs: usize,
    /// Runs of each side.
    pub runs: usize,
    /// Limit for one run's tests.
    pub timeout: Duration,
}

/// Why a task was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The repository's files give no environment recipe (or no mirror or base commit).
    NoRecipe,
    /// Building the environment or instance image failed.
    InstallFailed,
    /// The test patch touches no file, or there is none.
    NoTestFiles,
    /// No test was collected on either side.
    TestsNotCollected,
    /// The test patch does not apply at the base commit.
    TestPatchFailed,
    /// The gold patch does not apply at the base commit.
    GoldApplyFailed,
    /// Tests still fail after the gold patch (or the gold patch is not graded resolved).
    GoldFails,
    /// No test fails before and passes after.
    NoFailToPass,
    /// The only candidates changed status between runs.
    Flaky,
    /// A run hit the time limit (not the task's fault).
    TimedOut,
    /// The infrastructure failed (not the task's fault); retried on resume.
    InfraError,
}

impl DropReason {
    /// The reason as written in `rejected.jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::NoRecipe => "no_recipe",
            DropReason::InstallFailed => "install_failed",
            DropReason::NoTestFiles => "no_test_files",
            DropReason::TestsNotCollected => "tests_not_collected",
            DropReason::TestPatchFailed => "test_patch_failed",
            DropReason::GoldApplyFailed => "gold_apply_failed",
            DropReason::GoldFails => "gold_fails",
            DropReason::NoFailToPass => "no_fail_to_pass",
            DropReason::Flaky => "flaky",
            DropReason::TimedOut => "timed_out",
            DropReason::InfraError => "infra_error",
        }
    }
}

/// `funnel.json`: what a validation did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ValidateFunnel {
    /// Task rows read.
    pub tasks_in: usize,
    /// Tasks kept.
    pub validated: usize,
    /// Dropped tasks per reason.
    pub rejected: BTreeMap<String, usize>,
    /// Flaky tests seen over all tasks.
    pub flaky_tests: usize,
    /// Tasks ended in earlier runs and reused.
    pub reused: usize,
    /// Wall-clock seconds of this run's stages: `static` (patch and recipe checks), `images`,
    /// `tests` (every run of both sides) and `confirm` (the kept rows' gold run).
    pub stage_seconds: BTreeMap<String, f64>,
    /// Environment (version-group) images the kept tasks use.
    pub environments: usize,
    /// Test runs in containers made by this run.
    pub sandbox_runs: u64,
    /// The images this run's tasks needed.
    pub images: ImagesFunnel,
}

/// Images in `funnel.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImagesFunnel {
    /// Images (base, environment and instance layers) built by this run.
    pub built: usize,
    /// Images found already made (another task's environment, an earlier run).
    pub reused: usize,
    /// Disk the distinct images take, each counted by what it adds to the image below it.
    pub disk_bytes: u64,
}

impl ValidateFunnel {
    /// One line for stderr.
    pub fn summary(&self) -> String {
        let dropped: usize = self.rejected.values().sum();
        let reasons: Vec<String> = self
            .rejected
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        format!(
            "{} tasks: {} validated, {} rejected{}; {} from an earlier run; {} test runs",
            self.tasks_in,
            self.validated,
            dropped,
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            },
            self.reused,
            self.sandbox_runs
        )
    }
}

/// Runs the validation and writes the output files; returns the funnel.
pub fn validate(
    config: &ValidateConfig,
    evaluator: swerve_host::EvaluatorPlugin,
    progress: &dyn Fn(&str),
) -> Result<ValidateFunnel, CurateError> {
    let tasks = read_tasks(&config.tasks)?;
    fs_err::create_dir_all(&config.output).map_err(|source| CurateError::Write {
        path: config.output.clone(),
        source,
    })?;
    let state_path = config.output.join(STATE_FILE);
    let earlier = read_state(&state_path);
    let mut funnel = ValidateFunnel {
        tasks_in: tasks.len(),
        ..ValidateFunnel::default()
    };
    let mut ends: BTreeMap<String, TaskEnd> = BTreeMap::new();
    let mut pending = Vec::new();
    for task in &tasks {
        match earlier.get(&task.key) {
            Some(end) if !is_retried(end) => {
                funnel.reused += 1;
                ends.insert(task.instance_id.clone(), end.clone());
            }
            _ => pending.push(task),
        }
    }
    if funnel.reused > 0 {
        progress(&format!(
            "{} tasks ended in an earlier run, skipping them",
            funnel.reused
        ));
    }
    let mut state = StateWriter::open(&state_path)?;

    // Static checks and recipes.
    let static_started = Instant::now();
    let mut runnable: Vec<(&TaskRow, Recipe, Instant)> = Vec::new();
    for task in pending {
        let started = Instant::now();
        match prepare(config, task) {
            Ok(recipe) => runnable.push((task, recipe, started)),
            Err((reason, detail)) => {
                let end = dropped(task, reason, detail, None, started);
                state.push(&end)?;
                ends.insert(task.instance_id.clone(), end);
            }
        }
    }

    funnel
        .stage_seconds
        .insert("static".to_owned(), static_started.elapsed().as_secs_f64());
    if !runnable.is_empty() {
        progress(&format!(
            "Running the tests of {} tasks, {} runs before and after the fix",
            runnable.len(),
            config.runs
        ));
        // Each end is on disk as soon as it is known: a killed run keeps what it finished.
        let mut record = |end: TaskEnd| -> Result<(), CurateError> {
            state.push(&end)?;
            ends.insert(end.instance_id.clone(), end);
            Ok(())
        };
        run_tests(
            config,
            &evaluator,
            &runnable,
            &mut funnel,
            progress,
            &mut record,
        )?;
    }

    write_outputs(&config.output, &tasks, &ends, &mut funnel)?;
    Ok(funnel)
}

fn dropped(
    task: &TaskRow,
    reason: DropReason,
    detail: String,
    log: Option<PathBuf>,
    started: Instant,
) -> TaskEnd {
    TaskEnd {
        key: task.key.clone(),
        instance_id: task.instance_id.clone(),
        repo: task.repo.clone(),
        verdict: Verdict::Dropped {
            reason,
            detail,
            log,
        },
        flaky: Vec::new(),
        seconds: BTreeMap::from([("total".to_owned(), started.elapsed().as_secs_f64())]),
    }
}

/// The checks that need no container, and the recipe.
fn prepare(config: &ValidateConfig, task: &TaskRow) -> Result<Recipe, (DropReason, String)> {
    if diff_paths(&task.test_patch).is_empty() {
        return Err((
            DropReason::NoTestFiles,
            "the test patch touches no file".to_owned(),
        ));
    }
    let no_recipe = |e: String| (DropReason::NoRecipe, e);
    let mirror = Mirror::open(&config.repos, &task.repo).map_err(|e| no_recipe(e.to_string()))?;
    let base = mirror.commit(&task.base_commit).ok_or_else(|| {
        no_recipe(format!(
            "base commit {} is not in {}",
            task.base_commit,
            mirror.path().display()
        ))
    })?;
    let applies = |patch: &str| {
        mirror
            .applies(base, patch)
            .map_err(|e| no_recipe(e.to_string()))
    };
    if !applies(&task.test_patch)? {
        return Err((
            DropReason::TestPatchFailed,
            format!("the test patch does not apply at {}", task.base_commit),
        ));
    }
    if !applies(&task.patch)? {
        return Err((
            DropReason::GoldApplyFailed,
            format!("the gold patch does not apply at {}", task.base_commit),
        ));
    }
    let tree = mirror.tree(base).map_err(|e| no_recipe(e.to_string()))?;
    let mut files = Files::new();
    for path in mirror
        .files(base)
        .map_err(|e| no_recipe(e.to_string()))?
        .into_iter()
        .filter(|p| recipe::is_recipe_file(p))
    {
        if let Some(id) = tree.blob(&path) {
            let bytes = mirror.blob(id).map_err(|e| no_recipe(e.to_string()))?;
            files.insert(path, String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    recipe::derive(&files).map_err(|e| no_recipe(e.to_string()))
}

/// Runs both sides `runs` times, derives the lists, and confirms the kept tasks' gold patches.
fn run_tests(
    config: &ValidateConfig,
    evaluator: &swerve_host::EvaluatorPlugin,
    runnable: &[(&TaskRow, Recipe, Instant)],
    funnel: &mut ValidateFunnel,
    progress: &dyn Fn(&str),
    record: &mut dyn FnMut(TaskEnd) -> Result<(), CurateError>,
) -> Result<(), CurateError> {
    let logs = config.output.join("logs");
    let mut environments = Environments::default();
    let mut rows = Vec::new();
    for (task, recipe, _) in runnable {
        let version = recipe.version();
        environments
            .0
            .entry(task.repo.clone())
            .or_default()
            .insert(version.clone(), recipe.env.clone());
        rows.push(instance(task, &version, &config.tasks)?);
    }
    let source = |rows: Vec<Instance>| DatasetSource {
        name: "curate-validate".to_owned(),
        rows_file: config.tasks.clone(),
        all_ids: rows.iter().map(|r| r.instance_id.clone()).collect(),
        rows,
        environments: environments.clone(),
        repos_dir: config.repos.clone(),
    };
    // Containers are named after the output folder, so that a later run finds what a killed
    // one left.
    let run_prefix = format!(
        "validate-{}",
        &hex::encode(Sha256::digest(
            std::path::absolute(&config.output)
                .unwrap_or_else(|_| config.output.clone())
                .to_string_lossy()
                .as_bytes()
        ))[..12]
    );
    let executor = |rows: Vec<Instance>, name: String| {
        let execute = ExecuteConfig {
            run_id: format!("{run_prefix}-{name}"),
            work_dir: logs.join(&name),
            workers: config.jobs.max(1),
            timeout: config.timeout,
            run_empty_patches: true,
            ..ExecuteConfig::default()
        };
        PatchExecutor::new(source(rows), evaluator.clone(), execute).map_err(|e| {
            CurateError::Executor {
                what: "the sandbox executor",
                source: e.into(),
            }
        })
    };

    // The images first, `jobs` rows at once: a recipe whose install fails is the task's end.
    let images_started = Instant::now();
    // No engine to run on is nobody's task's fault: every task ends as an infrastructure
    // error, which the next run retries.
    let first = match executor(rows.clone(), "run-1".to_owned()) {
        Ok(first) => first,
        Err(e) => {
            let why = swerve_harness::run::error_chain(&e);
            progress(&format!("No sandbox: {why}"));
            for (task, _, started) in runnable {
                record(dropped(
                    task,
                    DropReason::InfraError,
                    why.clone(),
                    None,
                    *started,
                ))?;
            }
            return Ok(());
        }
    };
    // What a killed earlier run of this output folder left running.
    let swept = first.sweep_prefix(&run_prefix);
    if swept > 0 {
        progress(&format!("Removed {swept} containers of an earlier run"));
    }
    let ids: Vec<String> = runnable
        .iter()
        .map(|(task, _, _)| task.instance_id.clone())
        .collect();
    progress(&format!("Making the images of {} tasks", ids.len()));
    let mut failed: Vec<bool> = vec![false; runnable.len()];
    let mut no_images: Vec<bool> = vec![false; runnable.len()];
    let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
    for (i, made) in first.prepare(&ids).into_iter().enumerate() {
        let (task, _, started) = &runnable[i];
        match made {
            Ok(timings) => {
                let mut below = 0;
                for timing in timings {
                    match timing.info.origin {
                        ImageOrigin::Built => funnel.images.built += 1,
                        _ => funnel.images.reused += 1,
                    }
                    // What a layer adds to the one below it.
                    let own = timing.info.size_bytes.saturating_sub(below);
                    below = timing.info.size_bytes;
                    sizes.insert(timing.info.id, own);
                }
            }
            Err(failure) => {
                failed[i] = true;
                no_images[i] = true;
                let (reason, detail) = match failure {
                    PrepareFailure::Install(log) => (DropReason::InstallFailed, log),
                    PrepareFailure::Infra(why) => (DropReason::InfraError, why),
                };
                let log = logs
                    .join("images")
                    .join(format!("{}.log", task.instance_id));
                let written = fs_err::create_dir_all(logs.join("images"))
                    .and_then(|()| fs_err::write(&log, &detail));
                record(dropped(
                    task,
                    reason,
                    detail,
                    written.is_ok().then_some(log),
                    *started,
                ))?;
            }
        }
    }
    funnel.images.disk_bytes = sizes.values().sum();
    *funnel.stage_seconds.entry("images".to_owned()).or_default() +=
        images_started.elapsed().as_secs_f64();

    // runs × (before, after), one executor per run so that each run is a fresh container; a
    // task that timed out or failed in one run is not run again.
    let mut sides: Vec<(Vec<Execution>, Vec<Execution>)> =
        vec![(Vec::new(), Vec::new()); runnable.len()];
    let tests_started = Instant::now();
    let mut first = Some(first);
    for run in 0..config.runs.max(1) {
        let exec = match first.take() {
            Some(exec) => exec,
            None => executor(rows.clone(), format!("run-{}", run + 1))?,
        };
        let pending: Vec<_> = runnable
            .iter()
            .enumerate()
            .filter(|(i, _)| !failed[*i])
            .map(|(i, (task, _, _))| {
                (
                    i,
                    exec.submit(&task.instance_id, ""),
                    exec.submit(&task.instance_id, &task.patch),
                )
            })
            .collect();
        for (i, before, after) in pending {
            let (before, after) = (before.wait(), after.wait());
            let id = &runnable[i].0.instance_id;
            let ended = |e: &Execution, side| {
                e.infra_error.is_some() || (e.tests.is_empty() && timed_out(&logs, run, id, side))
            };
            failed[i] = ended(&before, Side::Before) || ended(&after, Side::After);
            sides[i].0.push(before);
            sides[i].1.push(after);
        }
        funnel.sandbox_runs += exec.sandbox_runs();
        progress(&format!("run {} of {} done", run + 1, config.runs.max(1)));
    }
    let tests_seconds = tests_started.elapsed().as_secs_f64();
    *funnel.stage_seconds.entry("tests".to_owned()).or_default() += tests_seconds;
    let tests_seconds = tests_seconds / runnable.len() as f64;

    let mut candidates: Vec<(usize, Instance, Lists)> = Vec::new();
    for (i, ((task, _, started), (before, after))) in runnable.iter().zip(sides).enumerate() {
        if no_images[i] {
            continue;
        }
        let log = Some(logs.join("run-1").join(&task.instance_id));
        let (before, after) = match (
            side_result(before, &logs, &task.instance_id, Side::Before),
            side_result(after, &logs, &task.instance_id, Side::After),
        ) {
            (SideResult::Failed(reason, detail), _) | (_, SideResult::Failed(reason, detail)) => {
                record(dropped(task, reason, detail, log, *started))?;
                continue;
            }
            (SideResult::Statuses(b), SideResult::Statuses(a)) => (b, a),
        };
        if !before.iter().chain(&after).any(collected) {
            record(dropped(
                task,
                DropReason::TestsNotCollected,
                "no test was collected in any run (only collection errors, or nothing)".to_owned(),
                log,
                *started,
            ))?;
            continue;
        }
        let lists = derive_lists(&before, &after);
        if lists.fail_to_pass.is_empty() {
            let (reason, detail) = if !lists.flaky.is_empty() {
                (
                    DropReason::Flaky,
                    format!("flaky between runs: {}", lists.flaky.join(", ")),
                )
            } else if !lists.failing_after.is_empty() {
                (
                    DropReason::GoldFails,
                    format!("failing after the fix: {}", lists.failing_after.join(", ")),
                )
            } else {
                (
                    DropReason::NoFailToPass,
                    "every test passes before the fix".to_owned(),
                )
            };
            let mut end = dropped(task, reason, detail, log, *started);
            end.flaky = lists.flaky;
            record(end)?;
            continue;
        }
        let mut row = rows[i].clone();
        row.fail_to_pass = lists.fail_to_pass.clone();
        row.pass_to_pass = lists.pass_to_pass.clone();
        candidates.push((i, row, lists));
    }

    // The rows as written, graded by the harness on one more gold run.
    let confirm_started = Instant::now();
    if !candidates.is_empty() {
        progress(&format!(
            "Confirming {} tasks: gold patch graded by the derived lists",
            candidates.len()
        ));
        let exec = executor(
            candidates.iter().map(|(_, row, _)| row.clone()).collect(),
            "confirm".to_owned(),
        )?;
        let pending: Vec<_> = candidates
            .iter()
            .map(|(i, _, _)| exec.submit(&runnable[*i].0.instance_id, &runnable[*i].0.patch))
            .collect();
        for ((i, row, lists), pending) in candidates.into_iter().zip(pending) {
            let (task, recipe, started) = &runnable[i];
            let execution = pending.wait();
            let log = Some(logs.join("confirm").join(&task.instance_id));
            if let Some(error) = execution.infra_error {
                record(dropped(task, DropReason::InfraError, error, log, *started))?;
                continue;
            }
            if !execution.resolved {
                record(dropped(
                    task,
                    DropReason::GoldFails,
                    "the gold patch is not graded resolved by the derived lists".to_owned(),
                    log,
                    *started,
                ))?;
                continue;
            }
            // The row names its image: harness run, the trainer's executions and SWE-bench's
            // harness find it by that name, with or without the mirrors.
            let image = stable_image_name(&task.instance_id, swebench_arch());
            if let Err(e) = exec.tag_image(&task.instance_id, &image) {
                record(dropped(
                    task,
                    DropReason::InfraError,
                    format!("cannot name the image {image}: {e}"),
                    log,
                    *started,
                ))?;
                continue;
            }
            let mut seconds = BTreeMap::new();
            seconds.insert("tests".to_owned(), tests_seconds);
            seconds.insert("total".to_owned(), started.elapsed().as_secs_f64());
            record(TaskEnd {
                key: task.key.clone(),
                instance_id: task.instance_id.clone(),
                repo: task.repo.clone(),
                verdict: Verdict::Kept {
                    row: output_row(task, &row, &recipe.env),
                    env: recipe.env.clone(),
                },
                flaky: lists.flaky,
                seconds,
            })?;
        }
        funnel.sandbox_runs += exec.sandbox_runs();
    }
    *funnel
        .stage_seconds
        .entry("confirm".to_owned())
        .or_default() += confirm_started.elapsed().as_secs_f64();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_snake_case() {
        let json = serde_json::to_string(&DropReason::TestPatchFailed).unwrap();
        assert_eq!(json, "\"test_patch_failed\"");
        assert_eq!(DropReason::TestPatchFailed.as_str(), "test_patch_failed");
    }
}
