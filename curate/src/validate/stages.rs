//! The container stages of a validation, in order: the images of every runnable task (`jobs`
//! rows at once; with a setup model, a recipe whose install failed is replaced by the model's,
//! up to [`MAX_TRIES`] answers), `runs` runs of both sides (a fresh executor, so fresh
//! containers, per run; a task that timed out or failed is not run again), the lists of each
//! task, and one more gold run of the candidate rows as they will be written. Every task's end
//! is handed to `record` as soon as it is known.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use sha2::{Digest, Sha256};
use swerve_harness::execution::{
    DatasetSource, Environments, ExecuteConfig, ExecutionOutcome, ImageTiming, PatchExecutor,
    PrepareFailure, error_chain, stable_image_name, swebench_arch,
};
use swerve_host::EvaluatorPlugin;
use swerve_sandbox::ImageOrigin;
use swerve_swebench::dataset::Instance;

use crate::error::CurateError;
use crate::recipe::{Files, Recipe};
use crate::setup::{Ask, MAX_TRIES, SetupModel};

use super::lists::{Lists, Side, SideResult, collected, derive_lists, side_result, stops};
use super::rows::{TaskRow, instance, output_row};
use super::{DropReason, TaskEnd, ValidateConfig, ValidateFunnel, Verdict, dropped};

/// A task that passed the static checks, with its recipe.
pub(super) struct Runnable<'a> {
    pub(super) task: &'a TaskRow,
    pub(super) recipe: Recipe,
    /// The repository's packaging files at the base commit (what a setup model is shown).
    pub(super) files: Files,
    /// Recipes the setup model has given for this task so far.
    pub(super) asked: usize,
    pub(super) started: Instant,
}

/// Where a task's end goes (the state file and the run's table of ends).
pub(super) type Record<'r> = &'r mut dyn FnMut(TaskEnd) -> Result<(), CurateError>;

/// What the stages share.
pub(super) struct Stages<'a> {
    pub(super) config: &'a ValidateConfig,
    pub(super) evaluator: &'a EvaluatorPlugin,
    pub(super) setup: Option<&'a SetupModel>,
    /// The array task's index when this is one task of a Slurm run.
    pub(super) shard: Option<usize>,
    pub(super) progress: &'a dyn Fn(&str),
}

impl Stages<'_> {
    fn logs(&self) -> PathBuf {
        self.config.output.join("logs")
    }

    /// The prefix of every container's run id: named after the output folder (and the array
    /// task), so that a later run finds what a killed one left and two array tasks on one
    /// engine keep apart.
    fn run_prefix(&self) -> String {
        let output =
            std::path::absolute(&self.config.output).unwrap_or_else(|_| self.config.output.clone());
        let digest = hex::encode(Sha256::digest(output.to_string_lossy().as_bytes()));
        match self.shard {
            Some(index) => format!("validate-{}-s{index}", &digest[..12]),
            None => format!("validate-{}", &digest[..12]),
        }
    }

    /// The harness rows of `runnable` (empty test lists) and their environments.
    fn rows(
        &self,
        runnable: &[Runnable<'_>],
    ) -> Result<(Vec<Instance>, Environments), CurateError> {
        let mut environments = Environments::default();
        let mut rows = Vec::new();
        for r in runnable {
            let version = r.recipe.version();
            environments
                .0
                .entry(r.task.repo.clone())
                .or_default()
                .insert(version.clone(), r.recipe.env.clone());
            rows.push(instance(r.task, &version, &self.config.tasks)?);
        }
        Ok((rows, environments))
    }

    /// An executor of `rows` whose logs go to `logs/<name>/`.
    fn executor(
        &self,
        rows: Vec<Instance>,
        environments: Environments,
        name: &str,
    ) -> Result<PatchExecutor, CurateError> {
        let source = DatasetSource {
            name: "curate-validate".to_owned(),
            rows_file: self.config.tasks.clone(),
            all_ids: rows.iter().map(|r| r.instance_id.clone()).collect(),
            rows,
            environments,
            repos_dir: self.config.repos.clone(),
            task_dirs: Default::default(),
            task_repo: None,
            pro_scripts: None,
        };
        let execute = ExecuteConfig {
            run_id: format!("{}-{name}", self.run_prefix()),
            work_dir: self.logs().join(name),
            workers: self.config.jobs.max(1),
            timeout: self.config.timeout,
            run_empty_patches: true,
            ..ExecuteConfig::default()
        };
        PatchExecutor::new(source, self.evaluator.clone(), execute).map_err(CurateError::Executor)
    }

    /// Every stage for `runnable`.
    pub(super) fn run(
        &self,
        runnable: &mut [Runnable<'_>],
        funnel: &mut ValidateFunnel,
        record: Record<'_>,
    ) -> Result<(), CurateError> {
        let started = Instant::now();
        let Some(mut ended) = self.images(runnable, funnel, record)? else {
            return Ok(());
        };
        funnel.add_seconds("images", started.elapsed().as_secs_f64());

        let started = Instant::now();
        let sides = self.tests(runnable, &mut ended, funnel)?;
        let seconds = started.elapsed().as_secs_f64();
        funnel.add_seconds("tests", seconds);

        let (rows, environments) = self.rows(runnable)?;
        let mut candidates = Vec::new();
        for (i, sides) in sides.into_iter().enumerate() {
            if let Some((before, after)) = sides
                && let Some((row, lists)) =
                    self.judge(&runnable[i], &rows[i], before, after, record)?
            {
                candidates.push((i, row, lists));
            }
        }

        let started = Instant::now();
        let per_task = seconds / runnable.len().max(1) as f64;
        self.confirm(runnable, environments, candidates, per_task, funnel, record)?;
        funnel.add_seconds("confirm", started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Makes every task's images; returns which tasks ended there (install or infrastructure
    /// failure), or `None` when there is no engine at all (every task then ended as an
    /// infrastructure error, which the next run retries).
    fn images(
        &self,
        runnable: &mut [Runnable<'_>],
        funnel: &mut ValidateFunnel,
        record: Record<'_>,
    ) -> Result<Option<Vec<bool>>, CurateError> {
        let (rows, environments) = self.rows(runnable)?;
        let executor = match self.executor(rows, environments, "images") {
            Ok(executor) => executor,
            Err(e) => {
                let why = error_chain(&e);
                (self.progress)(&format!("No sandbox: {why}"));
                for r in runnable.iter() {
                    record(dropped(
                        r.task,
                        DropReason::InfraError,
                        why.clone(),
                        None,
                        r.started,
                    ))?;
                }
                return Ok(None);
            }
        };
        // What a killed earlier run of this output folder left running.
        let swept = executor.sweep_prefix(&self.run_prefix());
        if swept > 0 {
            (self.progress)(&format!("Removed {swept} containers of an earlier run"));
        }
        let ids: Vec<String> = runnable
            .iter()
            .map(|r| r.task.instance_id.clone())
            .collect();
        (self.progress)(&format!("Making the images of {} tasks", ids.len()));
        let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
        let mut ended = vec![false; runnable.len()];
        for (i, made) in executor.prepare(&ids).into_iter().enumerate() {
            let made = match made {
                Err(PrepareFailure::Install(log)) if self.setup.is_some() => {
                    self.ask_setup(&mut runnable[i], log, funnel)
                }
                other => other,
            };
            match made {
                Ok(timings) => count_images(timings, funnel, &mut sizes),
                Err(failure) => {
                    ended[i] = true;
                    let (reason, detail) = match failure {
                        PrepareFailure::Install(log) => (DropReason::InstallFailed, log),
                        PrepareFailure::Infra(why) => (DropReason::InfraError, why),
                    };
                    let task = runnable[i].task;
                    let dir = self.logs().join("images");
                    let log = dir.join(format!("{}.log", task.instance_id));
                    let written =
                        fs_err::create_dir_all(&dir).and_then(|()| fs_err::write(&log, &detail));
                    record(dropped(
                        task,
                        reason,
                        detail,
                        written.is_ok().then_some(log),
                        runnable[i].started,
                    ))?;
                }
            }
        }
        funnel.images.disk_bytes += sizes.values().sum::<u64>();
        Ok(Some(ended))
    }

    /// Recipes from the setup model for a task whose install failed with `log`, until one
    /// builds or the task has had [`MAX_TRIES`] answers; the task's recipe becomes the one
    /// that built.
    fn ask_setup(
        &self,
        r: &mut Runnable<'_>,
        mut log: String,
        funnel: &mut ValidateFunnel,
    ) -> Result<Vec<ImageTiming>, PrepareFailure> {
        let Some(model) = self.setup else {
            return Err(PrepareFailure::Install(log));
        };
        while r.asked < MAX_TRIES {
            r.asked += 1;
            funnel.setup_answers += 1;
            (self.progress)(&format!(
                "{}: asking the setup model for a recipe ({} of {MAX_TRIES})",
                r.task.instance_id, r.asked
            ));
            let recipe = match model.recipe(&Ask {
                repo: &r.task.repo,
                files: &r.files,
                failed: Some(&r.recipe),
                failure: &log,
            }) {
                Ok(recipe) => recipe,
                Err(why) => {
                    // The model is shown this log when it is asked again: the causes matter.
                    log = format!("{log}\n\n{}", error_chain(&why));
                    continue;
                }
            };
            let tried = Runnable {
                task: r.task,
                recipe,
                files: Files::new(),
                asked: r.asked,
                started: r.started,
            };
            let rows = self
                .rows(std::slice::from_ref(&tried))
                .map_err(|e| PrepareFailure::Infra(e.to_string()))?;
            let name = format!("setup-{}", r.asked);
            let executor = self
                .executor(rows.0, rows.1, &name)
                .map_err(|e| PrepareFailure::Infra(error_chain(&e)))?;
            match executor
                .prepare(std::slice::from_ref(&r.task.instance_id))
                .remove(0)
            {
                Ok(timings) => {
                    r.recipe = tried.recipe;
                    funnel.setup_recipes += 1;
                    return Ok(timings);
                }
                Err(PrepareFailure::Install(next)) => {
                    r.recipe = tried.recipe;
                    log = next;
                }
                Err(infra) => return Err(infra),
            }
        }
        Err(PrepareFailure::Install(format!(
            "{log}\n\nno recipe of the setup model built in {MAX_TRIES} tries"
        )))
    }

    /// `runs` runs of both sides of every task that has not ended: each task's executions per
    /// side, `None` for a task that ended before.
    fn tests(
        &self,
        runnable: &[Runnable<'_>],
        ended: &mut [bool],
        funnel: &mut ValidateFunnel,
    ) -> Result<Vec<Option<Sides>>, CurateError> {
        let runs = self.config.runs.max(1);
        let left = ended.iter().filter(|e| !**e).count();
        (self.progress)(&format!(
            "Running the tests of {left} tasks, {runs} runs before and after the fix"
        ));
        let mut sides: Vec<Option<Sides>> = ended
            .iter()
            .map(|e| (!e).then(|| (Vec::new(), Vec::new())))
            .collect();
        // A task that timed out or failed in one run is not run again (its sides stay short;
        // the judge sees why).
        let mut stopped = ended.to_vec();
        for run in 0..runs {
            let (rows, environments) = self.rows(runnable)?;
            let executor = self.executor(rows, environments, &format!("run-{}", run + 1))?;
            let pending: Vec<_> = runnable
                .iter()
                .enumerate()
                .filter(|(i, _)| !stopped[*i])
                .map(|(i, r)| {
                    (
                        i,
                        executor.submit(&r.task.instance_id, ""),
                        executor.submit(&r.task.instance_id, &r.task.patch),
                    )
                })
                .collect();
            for (i, before, after) in pending {
                let (before, after) = (before.wait(), after.wait());
                stopped[i] = stops(&before).is_some() || stops(&after).is_some();
                if let Some((b, a)) = &mut sides[i] {
                    b.push(before);
                    a.push(after);
                }
            }
            funnel.sandbox_runs += executor.sandbox_runs();
            (self.progress)(&format!("run {} of {runs} done", run + 1));
        }
        Ok(sides)
    }

    /// The lists of one task from its runs: `Some` with the row to confirm, or `None` when the
    /// task ended here (recorded).
    fn judge(
        &self,
        r: &Runnable<'_>,
        row: &Instance,
        before: Vec<ExecutionOutcome>,
        after: Vec<ExecutionOutcome>,
        record: Record<'_>,
    ) -> Result<Option<(Instance, Lists)>, CurateError> {
        let (task, started) = (r.task, r.started);
        let log = Some(self.logs().join("run-1").join(&task.instance_id));
        let (before, after) = match (
            side_result(before, Side::Before),
            side_result(after, Side::After),
        ) {
            (SideResult::Failed(reason, detail), _) | (_, SideResult::Failed(reason, detail)) => {
                record(dropped(task, reason, detail, log, started))?;
                return Ok(None);
            }
            (SideResult::Statuses(b), SideResult::Statuses(a)) => (b, a),
        };
        if !before.iter().chain(&after).any(collected) {
            record(dropped(
                task,
                DropReason::TestsNotCollected,
                "no test was collected in any run (only collection errors, or nothing)".to_owned(),
                log,
                started,
            ))?;
            return Ok(None);
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
            let mut end = dropped(task, reason, detail, log, started);
            end.flaky = lists.flaky;
            record(end)?;
            return Ok(None);
        }
        let mut row = row.clone();
        row.fail_to_pass = lists.fail_to_pass.clone();
        row.pass_to_pass = lists.pass_to_pass.clone();
        Ok(Some((row, lists)))
    }

    /// The candidate rows as written, graded by the harness on one more gold run; a row that
    /// resolves is kept, and its image gets the name the row gives it.
    fn confirm(
        &self,
        runnable: &[Runnable<'_>],
        environments: Environments,
        candidates: Vec<(usize, Instance, Lists)>,
        tests_seconds: f64,
        funnel: &mut ValidateFunnel,
        record: Record<'_>,
    ) -> Result<(), CurateError> {
        if candidates.is_empty() {
            return Ok(());
        }
        (self.progress)(&format!(
            "Confirming {} tasks: gold patch graded by the derived lists",
            candidates.len()
        ));
        let rows = candidates.iter().map(|(_, row, _)| row.clone()).collect();
        let executor = self.executor(rows, environments, "confirm")?;
        let pending: Vec<_> = candidates
            .iter()
            .map(|(i, _, _)| {
                let task = runnable[*i].task;
                executor.submit(&task.instance_id, &task.patch)
            })
            .collect();
        for ((i, row, lists), pending) in candidates.into_iter().zip(pending) {
            let Runnable {
                task,
                recipe,
                started,
                ..
            } = &runnable[i];
            let outcome = pending.wait();
            let log = Some(self.logs().join("confirm").join(&task.instance_id));
            if let ExecutionOutcome::Infrastructure { error } = outcome {
                record(dropped(task, DropReason::InfraError, error, log, *started))?;
                continue;
            }
            if !outcome.resolved() {
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
            if let Err(e) = executor.tag_image(&task.instance_id, &image) {
                record(dropped(
                    task,
                    DropReason::InfraError,
                    format!("cannot name the image {image}: {e}"),
                    log,
                    *started,
                ))?;
                continue;
            }
            let seconds = BTreeMap::from([
                ("tests".to_owned(), tests_seconds),
                ("total".to_owned(), started.elapsed().as_secs_f64()),
            ]);
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
        funnel.sandbox_runs += executor.sandbox_runs();
        Ok(())
    }
}

/// One task's outcomes of its runs before and after the fix.
type Sides = (Vec<ExecutionOutcome>, Vec<ExecutionOutcome>);

/// Counts what making one task's images took: built or reused, and the disk each distinct
/// image adds to the one below it.
fn count_images(
    timings: Vec<ImageTiming>,
    funnel: &mut ValidateFunnel,
    sizes: &mut BTreeMap<String, u64>,
) {
    let mut below = 0;
    for timing in timings {
        match timing.info.origin {
            ImageOrigin::Built => funnel.images.built += 1,
            _ => funnel.images.reused += 1,
        }
        let own = timing.info.size_bytes.saturating_sub(below);
        below = timing.info.size_bytes;
        sizes.insert(timing.info.id, own);
    }
}
