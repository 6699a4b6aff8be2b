//! Single executions for execution-based rewards: one (dataset row, patch) evaluated exactly as
//! `harness run` evaluates a prediction — same image, eval script, patch-apply chain, hardened
//! mode and evaluator plugin ([`super::instance::run_instance`]) — with the result returned as a
//! typed [`ExecutionOutcome`] (the patch did not apply, the tests timed out, swerve's
//! infrastructure failed, or the tests were graded) instead of a run report. Callers read the
//! outcome, never the log text; a reward plugin sees it as the [`Execution`] record
//! ([`ExecutionOutcome::to_execution`]).
//!
//! [`PatchExecutor`] is for callers without an async runtime (the trainer, `curate validate`):
//! it owns a small tokio runtime, [`PatchExecutor::submit`] returns at once with a [`Pending`]
//! outcome to [`wait`](Pending::wait) on later, and at most `workers` containers run at once, so
//! sandboxes work while the caller goes on (the trainer submits each completion as soon as the
//! model has finished it). Identical work runs once: results are kept in an [`ExecutionCache`]
//! by (instance, patch) — the executor fixes the image, eval script and mode of an instance —
//! and a submission whose key is already running waits for that run. Infrastructure failures
//! are not cached, so a later submission retries them. The same cache serves executions on a
//! Slurm cluster ([`super::remote`]).
//!
//! Every execution leaves `harness run`'s files (`patch.diff`, `eval.sh`, `test_output.txt`,
//! `run_instance.log`, `report.json`, `swerve.json`) in `<work_dir>/<instance_id>/<key>/`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt as _, Shared};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use swerve_host::{EvaluatorPlugin, Execution, Status, TestOutcome};
use swerve_sandbox::{Limits, Sandbox, SandboxConfig};
use tokio::sync::{OnceCell, Semaphore};

use super::cache::{self, OutcomeKind};
use super::instance::{InstanceResult, Job, Mode, RunContext, run_instance};
use super::source::DatasetSource;
use super::{RunError, eval_script_for, valid_run_id};
use crate::images;
use swerve_swebench::dataset::Instance;

/// How single executions run.
#[derive(Debug, Clone)]
pub struct ExecuteConfig {
    /// Prefix of the run ids of the executions' containers (`<run_id>-<n>`, one per
    /// execution, so that two patches of one instance can run side by side); `harness clean
    /// --run-id <run_id>-<n>` or a plain `harness clean` removes leftovers of a crash.
    /// Default `execute`.
    pub run_id: String,
    /// Where each execution's log files go. Default `logs/execute`.
    pub work_dir: PathBuf,
    /// Containers at once (at least 1). Default 2.
    pub workers: usize,
    /// Limit for one eval script, as `harness run --timeout`. Default
    /// [`swerve_cli::DEFAULT_EXECUTE_TIMEOUT`].
    pub timeout: Duration,
    /// Hardened (default) or compatible, as `harness run --mode`.
    pub mode: Mode,
    /// Container limits, as `harness run`'s (default: [`Limits::default`], no network).
    pub limits: Limits,
    /// Whether an empty patch is evaluated (the row's tests on its base commit with its test
    /// patch, as `curate validate` needs before the fix) instead of counting as not run, as a
    /// reward sees an empty completion. Default `false`.
    pub run_empty_patches: bool,
}

impl Default for ExecuteConfig {
    fn default() -> Self {
        Self {
            run_id: "execute".to_owned(),
            work_dir: PathBuf::from("logs/execute"),
            workers: 2,
            timeout: swerve_cli::DEFAULT_EXECUTE_TIMEOUT,
            mode: Mode::Hardened,
            limits: Limits::default(),
            run_empty_patches: false,
        }
    }
}

/// What one execution of a patch came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ExecutionOutcome {
    /// The patch (or, for an empty patch, the row's test patch) did not apply, or the patch was
    /// empty and empty patches are not run: no test ran. The model's outcome.
    NotApplied,
    /// The patch applied, and the tests ran past the limit. The model's outcome.
    TimedOut,
    /// The tests ran and were graded.
    Graded(GradedExecution),
    /// swerve could not evaluate the patch (the engine, an image, the evaluator plugin, a lost
    /// Slurm task): not the patch's doing, never cached, retried by a later submission.
    Infrastructure {
        /// What failed, with its causes.
        error: String,
    },
}

/// The grade of an execution whose tests ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GradedExecution {
    /// Every test status the log parser found, by test name.
    pub tests: BTreeMap<String, Status>,
    /// The row's FAIL_TO_PASS tests and whether each passes, in the row's order.
    pub fail_to_pass: Vec<TestOutcome>,
    /// The row's PASS_TO_PASS tests and whether each passes, in the row's order.
    pub pass_to_pass: Vec<TestOutcome>,
    /// SWE-bench's verdict by the row's lists (hardened: also no tamper signal).
    pub resolved: bool,
}

impl ExecutionOutcome {
    /// An infrastructure failure.
    pub(crate) fn infrastructure(error: impl Into<String>) -> Self {
        ExecutionOutcome::Infrastructure {
            error: error.into(),
        }
    }

    /// Whether swerve's infrastructure failed (the outcome says nothing of the patch).
    pub(crate) fn is_infrastructure(&self) -> bool {
        matches!(self, ExecutionOutcome::Infrastructure { .. })
    }

    /// Whether the tests ran and the row's lists graded the patch resolved.
    pub fn resolved(&self) -> bool {
        matches!(self, ExecutionOutcome::Graded(graded) if graded.resolved)
    }

    /// The outcome as the [`Execution`] record a reward plugin reads for `row`: tests that did
    /// not run count as not passing, as SWE-bench grades an absent test.
    pub fn to_execution(&self, row: &Instance) -> Execution {
        match self {
            ExecutionOutcome::NotApplied => not_run(row, false),
            ExecutionOutcome::TimedOut => not_run(row, true),
            ExecutionOutcome::Graded(graded) => Execution {
                patch_applied: true,
                tests: graded.tests.clone(),
                fail_to_pass: graded.fail_to_pass.clone(),
                pass_to_pass: graded.pass_to_pass.clone(),
                resolved: graded.resolved,
                infra_error: None,
            },
            ExecutionOutcome::Infrastructure { error } => Execution {
                infra_error: Some(error.clone()),
                ..Execution::default()
            },
        }
    }
}

/// What every execution of one instance shares: its image and eval script.
#[derive(Debug, Clone)]
struct Prepared {
    image: String,
    image_id: String,
    eval_script: String,
    test_command: String,
    log_parser: String,
    /// What making the images took, base images included (the first preparation only).
    images: Vec<images::ImageTiming>,
    /// Lines for the instance log (the image's history check).
    notes: Vec<String>,
    /// How a row of another benchmark's format runs.
    foreign: Option<super::foreign::ForeignPlan>,
}

/// Why a row's image or eval script could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareFailure {
    /// A command of the row's environment recipe (an install step of its env or instance
    /// layer) failed: the row's doing, with the end of the build log.
    #[error("{0}")]
    Install(String),
    /// Anything else: the engine, a missing repository, a row without a spec.
    #[error("{0}")]
    Infra(String),
}

/// The executions of one executor's life (local or on a cluster), by [`ExecutionCache::key`]. A
/// key is run once: later requests for it share the first run's result, also while that run is
/// still going. Infrastructure failures are dropped from the cache when they complete, so that
/// the next request runs again.
#[derive(Clone, Default)]
pub(crate) struct ExecutionCache {
    entries: Arc<Mutex<HashMap<String, Shared<BoxFuture<'static, ExecutionOutcome>>>>>,
}

impl ExecutionCache {
    /// The key of evaluating `patch` on the row `instance_id` (a digest of both).
    pub(crate) fn key(instance_id: &str, patch: &str) -> String {
        let mut h = Sha256::new();
        h.update(instance_id.as_bytes());
        h.update([0]);
        h.update(patch.as_bytes());
        hex::encode(h.finalize())
    }

    /// The finished result for `key`, if there is one (a run still going is not finished).
    pub(crate) fn finished(&self, key: &str) -> Option<ExecutionOutcome> {
        self.entries
            .lock()
            .expect("cache lock")
            .get(key)
            .and_then(|shared| shared.peek().cloned())
    }

    /// Keeps `outcome`, obtained elsewhere (a cluster task), as the result for `key`, unless it
    /// is an infrastructure failure.
    pub(crate) fn record(&self, key: &str, outcome: ExecutionOutcome) {
        if !outcome.is_infrastructure() {
            let ready = futures_util::future::ready(outcome).boxed().shared();
            // A finished future: polling it once makes `peek` see its output.
            let _ = ready.clone().now_or_never();
            self.entries
                .lock()
                .expect("cache lock")
                .insert(key.to_owned(), ready);
        }
    }

    /// The result for `key`: the cached (or running) one, else `run()`'s, started now.
    pub(crate) fn get_or_run(
        &self,
        key: &str,
        run: impl FnOnce() -> BoxFuture<'static, ExecutionOutcome>,
    ) -> Shared<BoxFuture<'static, ExecutionOutcome>> {
        let mut entries = self.entries.lock().expect("cache lock");
        if let Some(found) = entries.get(key) {
            return found.clone();
        }
        let this = self.clone();
        let owned = key.to_owned();
        let future = run();
        let shared = async move {
            let outcome = future.await;
            if outcome.is_infrastructure() {
                this.entries.lock().expect("cache lock").remove(&owned);
            }
            outcome
        }
        .boxed()
        .shared();
        entries.insert(key.to_owned(), shared.clone());
        shared
    }
}

/// An execution under way; [`wait`](Self::wait) blocks until it is done.
pub struct Pending {
    receiver: tokio::sync::oneshot::Receiver<ExecutionOutcome>,
}

impl Pending {
    /// The outcome. Must not be called from inside an async runtime.
    pub fn wait(self) -> ExecutionOutcome {
        self.receiver.blocking_recv().unwrap_or_else(|_| {
            ExecutionOutcome::infrastructure("the execution task ended without a result")
        })
    }
}

/// Runs patches against dataset rows in the Docker sandbox (see the module documentation).
pub struct PatchExecutor {
    runtime: tokio::runtime::Runtime,
    shared: Arc<ExecutorState>,
}

/// One instance's image and script, made by the first execution that needs them.
type PreparedCell = Arc<OnceCell<Result<Prepared, PrepareFailure>>>;

/// The state the executor's tasks share.
struct ExecutorState {
    rows: BTreeMap<String, Instance>,
    source: DatasetSource,
    config: ExecuteConfig,
    sandbox: Sandbox,
    evaluator: EvaluatorPlugin,
    bases: tokio::sync::Mutex<images::BaseImages>,
    prepared: Mutex<HashMap<String, PreparedCell>>,
    permits: Semaphore,
    cache: ExecutionCache,
    sequence: AtomicU64,
    runs: AtomicU64,
}

impl PatchExecutor {
    /// Connects to Docker for executions of `source`'s rows, parsing logs with `evaluator`.
    /// Images are made on first use (the base image first: minutes on a fresh machine).
    pub fn new(
        source: DatasetSource,
        evaluator: EvaluatorPlugin,
        config: ExecuteConfig,
    ) -> Result<Self, RunError> {
        if !valid_run_id(&config.run_id) {
            return Err(RunError::RunId(config.run_id));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("swerve-execute")
            .enable_all()
            .build()
            .map_err(RunError::Runtime)?;
        let sandbox = runtime.block_on(Sandbox::connect(SandboxConfig::default()))?;
        let rows = source
            .rows
            .iter()
            .map(|r| (r.instance_id.clone(), r.clone()))
            .collect();
        let permits = Semaphore::new(config.workers.max(1));
        Ok(Self {
            runtime,
            shared: Arc::new(ExecutorState {
                rows,
                source,
                config,
                sandbox,
                evaluator,
                bases: tokio::sync::Mutex::default(),
                prepared: Mutex::new(HashMap::new()),
                permits,
                cache: ExecutionCache::default(),
                sequence: AtomicU64::new(0),
                runs: AtomicU64::new(0),
            }),
        })
    }

    /// Starts evaluating `patch` (a unified diff; empty: no change) on row `instance_id` and
    /// returns at once.
    pub fn submit(&self, instance_id: &str, patch: &str) -> Pending {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let shared = Arc::clone(&self.shared);
        let (id, patch) = (instance_id.to_owned(), patch.to_owned());
        self.runtime.spawn(async move {
            let _ = sender.send(shared.execute(&id, patch).await);
        });
        Pending { receiver }
    }

    /// Evaluates `patch` on row `instance_id` and waits for the result.
    pub fn execute(&self, instance_id: &str, patch: &str) -> ExecutionOutcome {
        self.submit(instance_id, patch).wait()
    }

    /// Makes the images of these rows (base, env and instance layers, `workers` rows at once)
    /// before any execution needs them; for each row, what making its images took (a row's
    /// later calls and executions reuse the result, failures included).
    pub fn prepare(
        &self,
        instance_ids: &[String],
    ) -> Vec<Result<Vec<images::ImageTiming>, PrepareFailure>> {
        use futures_util::StreamExt as _;
        let shared = Arc::clone(&self.shared);
        self.runtime.block_on(async move {
            futures_util::stream::iter(instance_ids)
                .map(|id| {
                    let shared = Arc::clone(&shared);
                    async move {
                        let Some(row) = shared.rows.get(id) else {
                            return Err(PrepareFailure::Infra(format!(
                                "instance `{id}` is not in the dataset"
                            )));
                        };
                        shared.prepare(row).await.map(|p| p.images)
                    }
                })
                .buffered(shared.config.workers.max(1))
                .collect()
                .await
        })
    }

    /// Removes the containers of this executor's executions that are still there (for a
    /// process that is being stopped); returns how many.
    pub(crate) fn sweep(&self) -> usize {
        self.sweep_prefix(&self.shared.config.run_id)
    }

    /// Puts `name` on the image the executions of `instance_id` run in (made by
    /// [`prepare`](Self::prepare) or an execution), so that a row naming `name` runs there.
    pub fn tag_image(&self, instance_id: &str, name: &str) -> Result<(), PrepareFailure> {
        let shared = Arc::clone(&self.shared);
        self.runtime.block_on(async move {
            let Some(row) = shared.rows.get(instance_id) else {
                return Err(PrepareFailure::Infra(format!(
                    "instance `{instance_id}` is not in the dataset"
                )));
            };
            let prepared = shared.prepare(row).await?;
            shared
                .sandbox
                .tag_image(&prepared.image_id, name)
                .await
                .map_err(|e| PrepareFailure::Infra(super::error_chain(&e)))
        })
    }

    /// Removes the containers whose run id starts with `prefix` and `-` (what an earlier,
    /// killed process of the same caller left: its executors' run ids share the prefix);
    /// returns how many (a sweep that failed is logged, and counts none: the leftovers it could
    /// not remove do not stop this run).
    pub fn sweep_prefix(&self, prefix: &str) -> usize {
        let sandbox = &self.shared.sandbox;
        match self.runtime.block_on(sandbox.sweep_run_prefix(prefix)) {
            Ok(removed) => removed.len(),
            Err(e) => {
                tracing::warn!(%prefix, error = %e, "cannot sweep an earlier run's containers");
                0
            }
        }
    }

    /// Sandbox evaluations actually started so far (cache hits and empty patches excluded).
    pub fn sandbox_runs(&self) -> u64 {
        self.shared.runs.load(Ordering::Relaxed)
    }
}

impl ExecutorState {
    async fn execute(self: &Arc<Self>, instance_id: &str, patch: String) -> ExecutionOutcome {
        let Some(row) = self.rows.get(instance_id) else {
            return ExecutionOutcome::infrastructure(format!(
                "instance `{instance_id}` is not in the dataset"
            ));
        };
        if patch.trim().is_empty() && !self.config.run_empty_patches {
            return ExecutionOutcome::NotApplied;
        }
        let key = ExecutionCache::key(instance_id, &patch);
        let this = Arc::clone(self);
        let row = row.clone();
        self.cache
            .get_or_run(&key, move || {
                async move {
                    let prepared = match this.prepare(&row).await {
                        Ok(p) => p,
                        Err(e) => return ExecutionOutcome::infrastructure(e.to_string()),
                    };
                    this.run(row, prepared, patch).await
                }
                .boxed()
            })
            .await
    }

    /// The image and eval script of `row`, made once per instance.
    async fn prepare(&self, row: &Instance) -> Result<Prepared, PrepareFailure> {
        let cell = Arc::clone(
            self.prepared
                .lock()
                .expect("prepared lock")
                .entry(row.instance_id.clone())
                .or_default(),
        );
        cell.get_or_init(|| async {
            let infra = |e: &dyn std::error::Error| PrepareFailure::Infra(super::error_chain(e));
            let envs = &self.source.environments;
            let mut made = Vec::new();
            // The base images made so far; building one holds the lock, so each is made once.
            let bases = {
                let mut bases = self.bases.lock().await;
                if let Some(env) = envs.get(row)
                    && bases.for_env(env).is_none()
                {
                    let suite = images::base_suite(env.python.as_deref());
                    let timing = images::ensure_base(&self.sandbox, suite)
                        .await
                        .map_err(|e| infra(&e))?;
                    bases.insert(suite, timing.info.name.clone());
                    made.push(timing);
                }
                bases.clone()
            };
            let recipe = self.source.recipe(row, &bases).map_err(|e| infra(&e))?;
            let timings = images::ensure(&self.sandbox, &recipe).await.map_err(|e| {
                match e.install_log() {
                    Some(log) => PrepareFailure::Install(format!(
                        "{}: an install step failed:\n{log}",
                        row.instance_id
                    )),
                    None => infra(&e),
                }
            })?;
            let info = timings
                .last()
                .map(|t| t.info.clone())
                .ok_or_else(|| PrepareFailure::Infra("no image was made".to_owned()))?;
            made.extend(timings);
            let plan = super::foreign::plan(
                row,
                self.config.mode,
                None,
                self.source.pro_scripts.as_deref(),
            )
            .map_err(|e| infra(&e))?;
            if let Some(plan) = plan {
                let (image, image_id, note) = super::foreign::secure_image(
                    &self.sandbox,
                    row,
                    self.config.mode,
                    recipe.image_name(),
                    info.id,
                )
                .await
                .map_err(|e| infra(&e))?;
                return Ok(Prepared {
                    image,
                    image_id,
                    eval_script: plan.script_text(),
                    test_command: plan.test_command(),
                    log_parser: String::new(),
                    images: made,
                    notes: note.into_iter().collect(),
                    foreign: Some(plan),
                });
            }
            let (eval_script, test_command) = eval_script_for(&self.source, row, self.config.mode)
                .ok_or_else(|| {
                    PrepareFailure::Infra(
                        "no environment spec and no eval_script in the row".to_owned(),
                    )
                })?;
            let log_parser = self.source.log_parser_for(row);
            Ok(Prepared {
                image: recipe.image_name(),
                image_id: info.id,
                eval_script,
                test_command,
                log_parser,
                images: made,
                notes: Vec::new(),
                foreign: None,
            })
        })
        .await
        .clone()
    }

    /// One sandbox evaluation, as `harness run` makes it, read back as its outcome.
    async fn run(
        self: Arc<Self>,
        row: Instance,
        prepared: Prepared,
        patch: String,
    ) -> ExecutionOutcome {
        // The folder is named as `harness run` names its cache entries: by content.
        let key = cache::cache_key(
            &prepared.image_id,
            &patch,
            &prepared.eval_script,
            self.config.mode.as_str(),
        );
        let _permit = self.permits.acquire().await.expect("semaphore not closed");
        self.runs.fetch_add(1, Ordering::Relaxed);
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        let ctx = RunContext {
            sandbox: self.sandbox.clone(),
            evaluator: self.evaluator.clone(),
            run_id: format!("{}-{n}", self.config.run_id),
            timeout: self.config.timeout,
            limits: self.config.limits.clone(),
            mode: self.config.mode,
        };
        let job = Job {
            dir: self.config.work_dir.join(&row.instance_id).join(&key[..16]),
            row,
            patch,
            eval_script: prepared.eval_script,
            // Rows executed for training and curation carry no SWE-bench patch assets.
            assets: Default::default(),
            image: prepared.image,
            image_id: prepared.image_id,
            log_parser: prepared.log_parser,
            test_command: prepared.test_command,
            cache_key: key,
            notes: prepared.notes,
            foreign: prepared.foreign,
        };
        let result = run_instance(&ctx, &job).await;
        read_back(&job, result)
    }
}

/// The outcome of a finished `run_instance`, from its typed result (never from its log text):
/// for graded outcomes, the grade and test statuses `run_instance` parsed from the log.
fn read_back(job: &Job, result: InstanceResult) -> ExecutionOutcome {
    let row = &job.row;
    let outcome = result.outcome;
    match outcome {
        // A changed environment is graded (not resolved) like any other model outcome.
        OutcomeKind::Resolved
        | OutcomeKind::Unresolved
        | OutcomeKind::EnvironmentChanged
        | OutcomeKind::TamperSuspected => {}
        OutcomeKind::PatchApplyFailed | OutcomeKind::EmptyPatch => {
            return ExecutionOutcome::NotApplied;
        }
        // The patch applied but its tests ran past the limit: the model's outcome.
        OutcomeKind::TimedOut => return ExecutionOutcome::TimedOut,
        OutcomeKind::EvaluatorFailed | OutcomeKind::InfraError => {
            let error = cache::read_meta(&job.dir)
                .and_then(|m| m.error)
                .unwrap_or_else(|| outcome.as_str().to_owned());
            return ExecutionOutcome::infrastructure(error);
        }
    }
    let Some(grading) = result.grading else {
        return ExecutionOutcome::infrastructure(format!("`{}` has no grade", row.instance_id));
    };
    let report = &grading.report;
    if report.infra_failure {
        let reason = report.infra_failure_reason.clone().unwrap_or_default();
        return ExecutionOutcome::infrastructure(format!(
            "environment failure in the test log: {reason}"
        ));
    }
    let tests_status = report.tests_status.clone().unwrap_or_default();
    let outcomes = |tests: &[String], passed: &[String]| -> Vec<TestOutcome> {
        tests
            .iter()
            .map(|t| TestOutcome {
                name: t.clone(),
                passed: passed.contains(t),
            })
            .collect()
    };
    ExecutionOutcome::Graded(GradedExecution {
        tests: grading
            .status_map()
            .into_iter()
            .flat_map(|map| map.iter())
            .map(|(name, status)| (name.to_owned(), status.clone()))
            .collect(),
        fail_to_pass: outcomes(&row.fail_to_pass, &tests_status.fail_to_pass.success),
        pass_to_pass: outcomes(&row.pass_to_pass, &tests_status.pass_to_pass.success),
        resolved: report.resolved,
    })
}

/// An execution whose tests did not run (or did not finish): every listed test counts as not
/// passing, as SWE-bench grades an absent test.
fn not_run(row: &Instance, patch_applied: bool) -> Execution {
    let failed = |tests: &[String]| {
        tests
            .iter()
            .map(|t| TestOutcome {
                name: t.clone(),
                passed: false,
            })
            .collect()
    };
    Execution {
        patch_applied,
        tests: BTreeMap::new(),
        fail_to_pass: failed(&row.fail_to_pass),
        pass_to_pass: failed(&row.pass_to_pass),
        resolved: false,
        infra_error: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A run that counts its calls and takes a moment, so that a second request arrives while
    /// the first is still running.
    fn counted(
        calls: &Arc<AtomicUsize>,
        execution: ExecutionOutcome,
    ) -> impl FnOnce() -> BoxFuture<'static, ExecutionOutcome> + use<> {
        let calls = Arc::clone(calls);
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                execution
            }
            .boxed()
        }
    }

    fn resolved() -> ExecutionOutcome {
        ExecutionOutcome::Graded(GradedExecution {
            resolved: true,
            ..GradedExecution::default()
        })
    }

    #[tokio::test]
    async fn the_same_patch_twice_runs_once() {
        let cache = ExecutionCache::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let key = ExecutionCache::key("demo__demo-1", "diff");
        // Both requests arrive before the first run ends.
        let first = cache.get_or_run(&key, counted(&calls, resolved()));
        let second = cache.get_or_run(&key, counted(&calls, resolved()));
        assert_eq!(first.await, resolved());
        assert_eq!(second.await, resolved());
        // And once it has ended.
        assert_eq!(
            cache.get_or_run(&key, counted(&calls, resolved())).await,
            resolved()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Another patch is another key.
        let other = ExecutionCache::key("demo__demo-1", "diff2");
        assert_ne!(other, ExecutionCache::key("demo__demo-2", "diff"));
        cache.get_or_run(&other, counted(&calls, resolved())).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.entries.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn infrastructure_failures_are_retried() {
        let cache = ExecutionCache::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let failed = ExecutionOutcome::infrastructure("docker went away");
        assert_eq!(
            cache.get_or_run("k", counted(&calls, failed.clone())).await,
            failed
        );
        assert!(cache.entries.lock().unwrap().is_empty());
        assert_eq!(
            cache.get_or_run("k", counted(&calls, resolved())).await,
            resolved()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn results_from_elsewhere_are_kept_unless_infrastructure_failed() {
        let cache = ExecutionCache::default();
        let key = ExecutionCache::key("demo__demo-1", "diff");
        assert_eq!(cache.finished(&key), None);
        cache.record(&key, ExecutionOutcome::infrastructure("node lost"));
        assert_eq!(cache.finished(&key), None);
        cache.record(&key, resolved());
        assert_eq!(cache.finished(&key), Some(resolved()));
    }

    #[test]
    fn outcomes_read_as_the_execution_a_plugin_sees() {
        let row = Instance::from_json(
            r#"{"instance_id": "o__r-1", "repo": "o/r", "FAIL_TO_PASS": ["a"], "PASS_TO_PASS": "[\"b\"]"}"#,
        )
        .expect("row");
        // Tests that did not run count as failing; a timeout says the patch applied.
        for (outcome, applied) in [
            (ExecutionOutcome::NotApplied, false),
            (ExecutionOutcome::TimedOut, true),
        ] {
            let e = outcome.to_execution(&row);
            assert!(e.patch_applied == applied && !e.resolved && e.infra_error.is_none());
            assert_eq!(
                (e.fail_to_pass[0].passed, e.pass_to_pass[0].name.as_str()),
                (false, "b")
            );
        }
        let e = ExecutionOutcome::infrastructure("no engine").to_execution(&row);
        assert_eq!(e.infra_error.as_deref(), Some("no engine"));
        assert!(resolved().to_execution(&row).resolved && resolved().resolved());
        // What a Slurm task sends back parses into the same outcome.
        for outcome in [
            ExecutionOutcome::NotApplied,
            ExecutionOutcome::TimedOut,
            ExecutionOutcome::infrastructure("lost"),
            resolved(),
        ] {
            let line = serde_json::to_string(&outcome).expect("serialises");
            assert_eq!(
                serde_json::from_str::<ExecutionOutcome>(&line).ok(),
                Some(outcome)
            );
        }
        assert_eq!(
            serde_json::to_string(&ExecutionOutcome::TimedOut).expect("serialises"),
            r#"{"outcome":"timed_out"}"#
        );
    }
}
