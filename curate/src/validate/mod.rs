//! `curate validate`: from curated tasks to executable SWE-bench 5 rows, with FAIL_TO_PASS and
//! PASS_TO_PASS derived by running the tests before and after the fix.
//!
//! For each task: the repository's files at the base commit give an environment `recipe`;
//! the test patch and the gold patch must apply at the base commit; then the test files the
//! test patch touches run `runs` times before the fix (base + test patch) and after it (base +
//! test patch + gold), each run in a fresh container, through `harness run`'s own path (the
//! same images, eval script, hardened mode, log parser and grading:
//! [`swerve_harness::execution::PatchExecutor`]).
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
mod stages;
mod state;

pub use rows::TASK_REPO;
pub(crate) use state::TaskEnd;
pub use state::{STATE_FILE, Verdict};

use rows::{TaskRow, read_tasks, write_outputs};
use stages::{Runnable, Stages};
use state::{StateWriter, is_retried, read_state};

pub mod cluster;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use swerve_harness::execution::{diff_paths, error_chain};
use swerve_mirror::Mirror;

use crate::endpoint::EndpointConfig;
use crate::error::CurateError;
use crate::recipe::{self, Files};
use crate::setup::{Ask, SetupModel};

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
    /// A chat model asked for a recipe where the rules make none or its install failed
    /// (`--setup-endpoint`, `--setup-model`).
    pub setup: Option<EndpointConfig>,
    /// Also write the kept rows as a SWE-bench 5 task repository, `task-repo/` in the output
    /// folder (`--task-repo`).
    pub task_repo: bool,
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
    /// `tests` (every run of both sides) and `confirm` (the kept rows' gold run); on Slurm,
    /// summed over the array's tasks.
    pub stage_seconds: BTreeMap<String, f64>,
    /// Environment (version-group) images the kept tasks use.
    pub environments: usize,
    /// Test runs in containers made by this run.
    pub sandbox_runs: u64,
    /// The images this run's tasks needed.
    pub images: ImagesFunnel,
    /// Recipes asked of the setup model.
    pub setup_answers: usize,
    /// Recipes of the setup model that were used (their images built).
    pub setup_recipes: usize,
    /// Tasks a Slurm array task did not end (it was lost); the next run validates them.
    #[serde(default)]
    pub unfinished: usize,
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
    /// Adds what an array task of a Slurm run did (its containers, images, model answers and
    /// stage seconds) to this funnel; what the output files decide is counted when they are
    /// written.
    pub(crate) fn absorb(&mut self, task: &ValidateFunnel) {
        for (stage, seconds) in &task.stage_seconds {
            self.add_seconds(stage, *seconds);
        }
        self.sandbox_runs += task.sandbox_runs;
        self.images.built += task.images.built;
        self.images.reused += task.images.reused;
        self.images.disk_bytes += task.images.disk_bytes;
        self.setup_answers += task.setup_answers;
        self.setup_recipes += task.setup_recipes;
    }

    /// Adds `seconds` to `stage`'s time (a Slurm run sums its array tasks').
    fn add_seconds(&mut self, stage: &str, seconds: f64) {
        *self.stage_seconds.entry(stage.to_owned()).or_default() += seconds;
    }

    /// One line for stderr.
    pub fn summary(&self) -> String {
        let dropped: usize = self.rejected.values().sum();
        let reasons: Vec<String> = self
            .rejected
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        let unfinished = if self.unfinished > 0 {
            format!("; {} unfinished", self.unfinished)
        } else {
            String::new()
        };
        format!(
            "{} tasks: {} validated, {} rejected{}; {} from an earlier run; {} test runs{unfinished}",
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
    let mut plan = Plan::read(config, progress)?;
    let mut state = StateWriter::open(&config.output.join(STATE_FILE))?;
    let mut funnel = std::mem::take(&mut plan.funnel);
    let mut ends = BTreeMap::new();
    validate_tasks(
        config,
        &evaluator,
        plan.pending().collect(),
        &mut |end| {
            state.push(&end)?;
            ends.insert(end.instance_id.clone(), end);
            Ok(())
        },
        &mut funnel,
        None,
        progress,
    )?;
    plan.funnel = funnel;
    plan.ends.extend(ends);
    plan.write(config)
}

/// A run's tasks and what earlier runs ended: the tasks it reuses and those it validates.
struct Plan {
    tasks: Vec<TaskRow>,
    /// Ends by instance id: reused ones, then this run's.
    ends: BTreeMap<String, TaskEnd>,
    funnel: ValidateFunnel,
}

impl Plan {
    /// Reads the tasks and the state file of `config.output` (made if missing).
    fn read(config: &ValidateConfig, progress: &dyn Fn(&str)) -> Result<Plan, CurateError> {
        let tasks = read_tasks(&config.tasks)?;
        fs_err::create_dir_all(&config.output).map_err(|source| CurateError::Write {
            path: config.output.clone(),
            source,
        })?;
        let earlier = read_state(&config.output.join(STATE_FILE))?;
        let mut funnel = ValidateFunnel {
            tasks_in: tasks.len(),
            ..ValidateFunnel::default()
        };
        let mut ends = BTreeMap::new();
        for task in &tasks {
            if let Some(end) = earlier.get(&task.key).filter(|end| !is_retried(end)) {
                funnel.reused += 1;
                ends.insert(task.instance_id.clone(), end.clone());
            }
        }
        if funnel.reused > 0 {
            progress(&format!(
                "{} tasks ended in an earlier run, skipping them",
                funnel.reused
            ));
        }
        Ok(Plan {
            tasks,
            ends,
            funnel,
        })
    }

    /// The tasks without an end.
    fn pending(&self) -> impl Iterator<Item = &TaskRow> {
        self.tasks
            .iter()
            .filter(|t| !self.ends.contains_key(&t.instance_id))
    }

    /// Writes the output files from the ends; returns the funnel.
    fn write(mut self, config: &ValidateConfig) -> Result<ValidateFunnel, CurateError> {
        write_outputs(
            &config.output,
            &self.tasks,
            &self.ends,
            &mut self.funnel,
            config.task_repo,
        )?;
        Ok(self.funnel)
    }
}

/// Validates `tasks` (static checks, then the container stages), handing each end to `record`
/// as soon as it is known; `shard` is the array task's index when this is one task of a Slurm
/// run (its containers are named apart from the other tasks').
fn validate_tasks(
    config: &ValidateConfig,
    evaluator: &swerve_host::EvaluatorPlugin,
    tasks: Vec<&TaskRow>,
    record: stages::Record<'_>,
    funnel: &mut ValidateFunnel,
    shard: Option<usize>,
    progress: &dyn Fn(&str),
) -> Result<(), CurateError> {
    let setup = config.setup.as_ref().map(SetupModel::new);
    let static_started = Instant::now();
    let mut runnable: Vec<Runnable<'_>> = Vec::new();
    for task in tasks {
        let started = Instant::now();
        match prepare(config, setup.as_ref(), task, started) {
            Ok(r) => {
                funnel.setup_answers += r.asked;
                funnel.setup_recipes += r.asked;
                runnable.push(r);
            }
            Err((reason, detail)) => record(dropped(task, reason, detail, None, started))?,
        }
    }
    funnel.add_seconds("static", static_started.elapsed().as_secs_f64());
    if runnable.is_empty() {
        return Ok(());
    }
    let stages = Stages {
        config,
        evaluator,
        setup: setup.as_ref(),
        shard,
        progress,
    };
    stages.run(&mut runnable, funnel, record)
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

/// The checks that need no container, and the recipe: the rules', else (with a setup model)
/// the model's.
fn prepare<'a>(
    config: &ValidateConfig,
    setup: Option<&SetupModel>,
    task: &'a TaskRow,
    started: Instant,
) -> Result<Runnable<'a>, (DropReason, String)> {
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
    let (recipe, asked) = match (recipe::derive(&files), setup) {
        (Ok(recipe), _) => (recipe, 0),
        (Err(e), None) => return Err(no_recipe(e.to_string())),
        (Err(e), Some(model)) => {
            let why = format!("the rules make no recipe: {e}");
            let recipe = model
                .recipe(&Ask {
                    repo: &task.repo,
                    files: &files,
                    failed: None,
                    failure: &why,
                })
                .map_err(|asked| no_recipe(format!("{why}; {}", error_chain(&asked))))?;
            (recipe, 1)
        }
    };
    Ok(Runnable {
        task,
        recipe,
        files,
        asked,
        started,
    })
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
