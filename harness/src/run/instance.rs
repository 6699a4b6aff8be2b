//! Running one instance as SWE-bench's `run_instance` does: container, patch, eval script, log
//! files, grading.
//!
//! Every failure inside ends as an [`OutcomeKind`] recorded in `swerve.json` and
//! `run_instance.log`; the container is removed on every path (its handle removes it on drop).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use swerve_host::EvaluatorPlugin;
use swerve_log_parsers::LogText;
use swerve_sandbox::{Container, ContainerSpec, ExecOutput, ExecRequest, Limits, Sandbox};

use super::apply::{ApplyOutcome, CONTAINER_PATCH_FILE, apply_patch};
use super::cache::{InstanceMeta, META_FILE, OutcomeKind};
use super::environment::{self, EnvironmentCheck};
use super::eval_script::{REPO_DIRECTORY, ScriptParts};
use super::evaluate::grade_with_plugin;
use super::hardening::{self, Undone};
use super::instance_log::InstanceLog;
use super::tamper::{self, TamperSignal};
use swerve_cache::write_atomic;
use swerve_swebench::dataset::Instance;
use swerve_swebench::grading::Grading;
use swerve_swebench::hardened::HardenedRegion;
use swerve_swebench::report::render_instance_report;

/// How the eval script runs and is graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// swerve's default: test infrastructure from the patch undone, the script split at the
    /// markers into three execs with host nonces, exit code measured by the host.
    #[default]
    Hardened,
    /// SWE-bench 5 as it is: one exec of `eval.sh`, the log graded as upstream.
    Compat,
    /// Hardened, and a patch whose product code reaches into the test runner (the tamper
    /// check, `docs/hardening.md`) is not resolved.
    Strict,
}

impl Mode {
    /// `hardened`, `compat` or `strict`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Hardened => "hardened",
            Mode::Compat => "compat",
            Mode::Strict => "strict",
        }
    }
}

/// What every instance of a run shares.
#[derive(Clone)]
pub(crate) struct RunContext {
    /// The engine.
    pub sandbox: Sandbox,
    /// The log parser.
    pub evaluator: EvaluatorPlugin,
    /// The run id (container names and labels).
    pub run_id: String,
    /// Limit for the eval script (all parts together).
    pub timeout: Duration,
    /// Container limits.
    pub limits: Limits,
    /// Hardened or compatible.
    pub mode: Mode,
}

/// One instance to evaluate.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The dataset row.
    pub row: Instance,
    /// The model patch; empty only for a single execution of the base
    /// ([`super::execute::ExecuteConfig::run_empty_patches`]).
    pub patch: String,
    /// The eval script to write to `eval.sh` (with the assets' restore commands).
    pub eval_script: String,
    /// SWE-bench 5's patch assets to stage in the container before the eval script runs.
    pub assets: super::assets::Staging,
    /// The image to run in.
    pub image: String,
    /// Its engine id.
    pub image_id: String,
    /// The log folder.
    pub dir: PathBuf,
    /// Parser name for the plugin (row's `log_parser`, else the env spec's, else empty).
    pub log_parser: String,
    /// The test command (for the parser's context).
    pub test_command: String,
    /// The cache key.
    pub cache_key: String,
    /// Lines for the instance's log from preparing it (the image's history check).
    pub notes: Vec<String>,
    /// How a row of another benchmark's format runs (`None`: SWE-bench's way).
    pub foreign: Option<super::foreign::ForeignPlan>,
}

/// What an evaluation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceResult {
    /// The instance.
    pub instance_id: String,
    /// How it ended.
    pub outcome: OutcomeKind,
    /// The result came from a previous run.
    pub reused: bool,
    /// Container create to report written, tests excluded.
    pub overhead: Duration,
    /// Eval script run time.
    pub tests: Duration,
    /// For a graded outcome (resolved or not) evaluated here: the grade with its parsed test
    /// statuses, so a caller that needs them (single executions) does not parse the log again.
    pub grading: Option<Box<Grading>>,
}

/// Everything recorded while evaluating, turned into `swerve.json` at the end.
pub(super) struct Record {
    pub(super) outcome: OutcomeKind,
    pub(super) error: Option<String>,
    hardened: Option<HardenedRegion>,
    pub(super) undone: Option<Undone>,
    tamper: Vec<String>,
    pub(super) tests: Duration,
    pub(super) grading: Option<Box<Grading>>,
}

impl Record {
    pub(super) fn new(outcome: OutcomeKind) -> Record {
        Record {
            outcome,
            error: None,
            hardened: None,
            undone: None,
            tamper: Vec::new(),
            tests: Duration::ZERO,
            grading: None,
        }
    }

    fn infra(error: &dyn std::error::Error) -> Record {
        Record {
            error: Some(super::error_chain(error)),
            ..Record::new(OutcomeKind::InfraError)
        }
    }
}

/// Why one instance's steps could not go on: an infrastructure failure, recorded as the
/// instance's `infra_error` with its causes (never the model's outcome).
#[derive(Debug, thiserror::Error)]
pub(super) enum InstanceError {
    /// A file of the instance's log folder (the error names the file and the operation).
    #[error(transparent)]
    Files(#[from] std::io::Error),
    /// The container or the engine.
    #[error(transparent)]
    Sandbox(#[from] swerve_sandbox::Error),
    /// The container showed no idle process to spare: hardened mode's process sweeps would
    /// stop it.
    #[error("the container's init started no idle process within 10 s")]
    NoIdleProcess,
    /// Hardened mode's setup found no reading of the environment from before the patch.
    #[error("the environment was not read before the setup")]
    EnvironmentUnread,
    /// The eval script cannot be run by hardened mode.
    #[error(transparent)]
    Script(#[from] super::eval_script::NoMarkers),
    /// The thread parsing the log with the evaluator plugin panicked or was cancelled.
    #[error("the log parser's thread ended without a result")]
    Grader(#[from] tokio::task::JoinError),
}

/// Evaluates one instance; never fails (failures are outcomes).
pub(crate) async fn run_instance(ctx: &RunContext, job: &Job) -> InstanceResult {
    let started = Instant::now();
    let log = match prepare_dir(job) {
        Ok(log) => log,
        Err(e) => {
            tracing::error!(instance = %job.row.instance_id, error = %e, "cannot prepare the log folder");
            return finish(job, ctx, Record::infra(&e), started);
        }
    };
    for note in &job.notes {
        log.info(note);
    }
    let log = Arc::new(log);
    let evaluated = match &job.foreign {
        Some(plan) => super::foreign::evaluate(ctx, job, plan, &log).await,
        None => evaluate(ctx, job, &log).await,
    };
    let record = match evaluated {
        Ok(record) => record,
        Err(e) => {
            let record = Record::infra(&e);
            log.error(&format!(
                "Error in evaluation for {}: {}",
                job.row.instance_id,
                record.error.as_deref().unwrap_or_default()
            ));
            record
        }
    };
    finish(job, ctx, record, started)
}

fn prepare_dir(job: &Job) -> std::io::Result<InstanceLog> {
    fs_err::create_dir_all(&job.dir)?;
    for stale in ["report.json", "test_output.txt", META_FILE] {
        let path = job.dir.join(stale);
        if path.exists() {
            fs_err::remove_file(path)?;
        }
    }
    InstanceLog::create(&job.dir.join("run_instance.log"), &job.row.instance_id)
}

fn finish(job: &Job, ctx: &RunContext, record: Record, started: Instant) -> InstanceResult {
    let overhead = started.elapsed().saturating_sub(record.tests);
    let meta = InstanceMeta {
        cache_key: job.cache_key.clone(),
        image_id: job.image_id.clone(),
        mode: ctx.mode.as_str().to_owned(),
        outcome: record.outcome,
        error: record.error,
        hardened: record.hardened,
        undone: record.undone,
        tamper_suspected: record.tamper,
        overhead_ms: overhead.as_millis() as u64,
        tests_ms: record.tests.as_millis() as u64,
    };
    let text = serde_json::to_string_pretty(&meta).expect("meta serialises");
    if let Err(e) = write_atomic(&job.dir.join(META_FILE), &text) {
        tracing::error!(instance = %job.row.instance_id, error = %e, "cannot write swerve.json");
    }
    InstanceResult {
        instance_id: job.row.instance_id.clone(),
        outcome: record.outcome,
        reused: false,
        overhead,
        tests: record.tests,
        grading: record.grading,
    }
}

/// Starts the container `sweb.eval.<id>.<run_id>`; a name conflict (another run with this
/// id) retries with a `.<unix time>` suffix, as v5 does.
pub(super) async fn start_container(
    ctx: &RunContext,
    job: &Job,
) -> Result<Container, InstanceError> {
    let name = format!(
        "sweb.eval.{}.{}",
        job.row.instance_id.to_lowercase(),
        ctx.run_id
    );
    let mut spec = ContainerSpec::new(&job.image, &ctx.run_id, &job.row.instance_id);
    spec.limits = ctx.limits.clone();
    spec.workdir = Some(REPO_DIRECTORY.to_owned());
    spec.name = Some(name.clone());
    match ctx.sandbox.start(&spec).await {
        Ok(c) => Ok(c),
        Err(first) => {
            tracing::debug!(error = %first, "container create failed; retrying with a suffixed name");
            spec.name = Some(format!("{name}.{}", super::instance_log::now().as_secs()));
            Ok(ctx.sandbox.start(&spec).await?)
        }
    }
}

async fn exec(
    container: &Container,
    cmd: Vec<String>,
    timeout: Duration,
) -> Result<ExecOutput, InstanceError> {
    let request = ExecRequest::new(cmd)
        .with_timeout(timeout)
        .with_workdir(REPO_DIRECTORY);
    Ok(container.exec(&request).await?)
}

fn strings(cmd: &[&str]) -> Vec<String> {
    cmd.iter().map(|s| (*s).to_owned()).collect()
}

/// Copies the job's patch assets into the container (and the log folder's `image_assets/`)
/// for the eval script's restore commands, logging what SWE-bench logs.
async fn stage_assets(
    container: &Container,
    job: &Job,
    log: &InstanceLog,
) -> Result<(), InstanceError> {
    let staging = &job.assets;
    for warning in &staging.warnings {
        log.info(warning);
    }
    if staging.assets.is_empty() {
        return Ok(());
    }
    let local = job.dir.join("image_assets");
    fs_err::create_dir_all(&local)?;
    for asset in &staging.assets {
        fs_err::write(local.join(&asset.flat), &asset.bytes)?;
        container
            .write_file(
                &format!("{}/{}", super::assets::CONTAINER_DIR, asset.flat),
                &asset.bytes,
            )
            .await?;
    }
    log.info(&format!(
        "Staged {n} patch asset(s) for restore after git apply ({n} from the local mirror, 0 fetched)",
        n = staging.assets.len()
    ));
    Ok(())
}

/// The in-container steps; `Err` is an infrastructure failure. The flow is the same in both
/// modes; what differs (preparing, the state before the tests, running the script) is in
/// [`ModeSteps`].
async fn evaluate(ctx: &RunContext, job: &Job, log: &InstanceLog) -> Result<Record, InstanceError> {
    let id = &job.row.instance_id;
    let step = ctx.sandbox.config().timeouts.command;
    fs_err::write(job.dir.join("patch.diff"), &job.patch)?;
    let container = start_container(ctx, job).await?;
    log.info(&format!("Container for {id} started: {}", container.id()));

    let mut steps = ModeSteps::copy_patch(ctx.mode, &container, &job.patch, step).await?;
    log.info(&format!(
        "Intermediate patch for {id} written to {}, now applying to container...",
        job.dir.join("patch.diff").display()
    ));
    // Hardened mode reads the environment's files (outside the repository) while the patch is
    // applied and the repository inspected (inside it).
    let hardened = matches!(steps, ModeSteps::Hardened { .. });
    let env_read = async {
        if hardened {
            Some(read_environment(&container, step, None).await)
        } else {
            None
        }
    };
    let apply = async {
        if job.patch.trim().is_empty() {
            // Only single executions that ask for it get here (`curate validate`'s runs before
            // the fix): the row's tests on the base commit and its test patch.
            log.info(">>>>> No patch to apply: the tests run on the base commit");
        } else {
            match apply_patch(&container, step).await? {
                ApplyOutcome::Applied { output, .. } => {
                    log.info(&format!(">>>>> Applied Patch:\n{output}"));
                }
                ApplyOutcome::AlreadyApplied => {
                    log.info(">>>>> Applied Patch: verified already applied");
                }
                ApplyOutcome::Failed { output } => {
                    log.info(&format!(">>>>> Patch Apply Failed:\n{output}"));
                    return Ok::<_, InstanceError>(None);
                }
            }
        }
        Ok(Some(steps.diff_before(&container, job, log, step).await?))
    };
    let (before, env_before) = tokio::join!(apply, env_read);
    let Some(before) = before? else {
        container.remove().await?;
        return Ok(Record::new(OutcomeKind::PatchApplyFailed));
    };
    if let (
        Some(read),
        ModeSteps::Hardened {
            env_before: slot, ..
        },
    ) = (env_before, &mut steps)
    {
        *slot = Some(Box::new(read?));
    }
    log.info(&format!("Git diff before:\n{before}"));

    stage_assets(&container, job, log).await?;
    let eval_file = job.dir.join("eval.sh");
    fs_err::write(&eval_file, &job.eval_script)?;
    log.info(&format!(
        "Eval script for {id} written to {}; copying to container...",
        eval_file.display()
    ));
    let tests_started = Instant::now();
    let run = steps.run_script(&container, job, ctx.timeout, step).await?;
    log.info(&format!(
        "Test runtime: {:.2} seconds",
        tests_started.elapsed().as_secs_f64()
    ));
    if let Some(check) = &run.environment {
        for line in &check.allowed {
            log.info(&format!(
                "Hardening: allowed change outside the repository: {line}"
            ));
        }
        if !check.findings.is_empty() {
            log.info(&format!(
                "Hardening: the setup changed the environment outside the repository; not resolved:\n{}",
                check.findings.join("\n")
            ));
        }
    }
    let text = write_test_output(job, log, &run, ctx.timeout)?;
    let mut record = Record::new(OutcomeKind::Unresolved);
    record.tests = run.script_time;
    record.hardened = run.region.clone();
    record.tamper = steps.tamper().iter().map(ToString::to_string).collect();
    record.undone = steps.into_undone();
    if run.timed_out {
        log.error(&format!(
            "Test timed out after {} seconds.",
            ctx.timeout.as_secs()
        ));
        container.remove().await?;
        record.outcome = OutcomeKind::TimedOut;
        return Ok(record);
    }
    let after = exec(&container, git_diff(), step).await?.text();
    log.info(&format!("Git diff after:\n{after}"));
    if after != before {
        log.info("Git diff changed after running eval script");
    }
    grade(ctx, job, log, container, text, run.region, record).await
}

/// `git diff` of the repository, ignoring mode changes.
fn git_diff() -> Vec<String> {
    strings(&["git", "-c", "core.fileMode=false", "diff"])
}

/// Writes `test_output.txt` (with SWE-bench's timeout line when the script ran out of time) and
/// returns its text.
fn write_test_output(
    job: &Job,
    log: &InstanceLog,
    run: &ScriptRun,
    timeout: Duration,
) -> Result<String, InstanceError> {
    let mut text = run.text.clone();
    if run.timed_out {
        text.push_str(&format!(
            "\n\nTimeout error: {} seconds exceeded.",
            timeout.as_secs()
        ));
    }
    let test_output = job.dir.join("test_output.txt");
    fs_err::write(&test_output, &text)?;
    log.info(&format!(
        "Test output for {} written to {}",
        job.row.instance_id,
        test_output.display()
    ));
    Ok(text)
}

/// Parses the log with the evaluator plugin while the container is removed, then writes
/// `report.json` and fills in the record's outcome.
async fn grade(
    ctx: &RunContext,
    job: &Job,
    log: &InstanceLog,
    container: Container,
    text: String,
    region: Option<HardenedRegion>,
    mut record: Record,
) -> Result<Record, InstanceError> {
    let id = &job.row.instance_id;
    let context = swerve_host::LogContext {
        repo: job.row.repo.clone(),
        instance_id: id.clone(),
        test_command: job.test_command.clone(),
        version: job.row.version.clone().unwrap_or_default(),
        parser: job.log_parser.clone(),
    };
    let evaluator = ctx.evaluator.clone();
    let row = job.row.clone();
    // The container goes while the log is parsed: nothing after the diff needs it.
    let grading = tokio::task::spawn_blocking(move || {
        grade_with_plugin(
            &evaluator,
            &context,
            &row,
            &LogText::new(&text),
            region.as_ref(),
        )
    });
    let (removed, grading) = tokio::join!(container.remove(), grading);
    removed?;
    let grading = match grading? {
        Ok(grading) => grading,
        Err(failure) => {
            log.error(&failure.to_string());
            record.outcome = OutcomeKind::EvaluatorFailed;
            record.error = Some(failure.0);
            return Ok(record);
        }
    };
    write_report(job, log, &grading, &mut record)?;
    record.grading = Some(Box::new(grading));
    Ok(record)
}

/// Writes `report.json` for a graded instance and sets the record's outcome.
pub(super) fn write_report(
    job: &Job,
    log: &InstanceLog,
    grading: &Grading,
    record: &mut Record,
) -> Result<(), InstanceError> {
    let id = &job.row.instance_id;
    if let Some(problem) = grading.problem() {
        log.info(&format!("Log not gradeable: {problem}"));
    }
    let resolved = grading.report.resolved;
    let report = render_instance_report(id, &grading.report);
    record.outcome = OutcomeKind::of_grading(grading);
    // swerve.json is written after report.json by the caller; a crash in between leaves a
    // report without its key, which a content resume re-evaluates.
    write_atomic(&job.dir.join("report.json"), &report)?;
    log.info(&format!(
        "report: {report}\nResult for {id}: resolved: {}",
        if resolved { "True" } else { "False" }
    ));
    Ok(())
}

/// The steps in which the two modes differ, and what hardened mode carries between them.
enum ModeSteps {
    /// SWE-bench as it is.
    Compat,
    /// Test infrastructure from the patch undone; the script in three execs with nonces.
    Hardened {
        /// The container's idle process, which the process sweeps spare.
        idle_pid: std::num::NonZeroU32,
        /// Untracked files before the patch.
        untracked_before: BTreeSet<String>,
        /// What was undone, once known.
        undone: Option<Undone>,
        /// The tamper check's signals on the patch, once known.
        tamper: Vec<TamperSignal>,
        /// Signals make the instance not resolved (`--mode strict`).
        strict: bool,
        /// The files outside the repository the environment rules compare, read before the
        /// setup part (while the patch is applied: the two touch different files).
        env_before: Option<Box<environment::Snapshot>>,
    },
}

impl ModeSteps {
    /// Copies the patch into the container (with the final newline `git apply` needs; SWE-bench
    /// writes it as it is). Hardened mode also turns hooks off and records the idle process and
    /// the untracked files, in one exec while the patch is copied.
    async fn copy_patch(
        mode: Mode,
        container: &Container,
        patch: &str,
        step: Duration,
    ) -> Result<ModeSteps, InstanceError> {
        let mut patch = patch.to_owned();
        if !patch.ends_with('\n') {
            patch.push('\n');
        }
        let upload = async {
            container
                .write_file(CONTAINER_PATCH_FILE, patch.as_bytes())
                .await
                .map_err(InstanceError::from)
        };
        match mode {
            Mode::Compat => {
                upload.await?;
                Ok(ModeSteps::Compat)
            }
            Mode::Hardened | Mode::Strict => {
                let prepare = exec(
                    container,
                    strings(&["sh", "-c", &hardening::prepare_script()]),
                    step,
                );
                let (out, ()) = tokio::try_join!(prepare, upload)?;
                let (idle_pid, untracked_before) = hardening::parse_prepare(&out.output);
                let idle_pid = idle_pid.ok_or(InstanceError::NoIdleProcess)?;
                Ok(ModeSteps::Hardened {
                    idle_pid,
                    untracked_before,
                    undone: None,
                    tamper: Vec::new(),
                    strict: mode == Mode::Strict,
                    env_before: None,
                })
            }
        }
    }

    /// The `git diff` after the patch. Hardened mode first undoes the test infrastructure the
    /// patch touched.
    async fn diff_before(
        &mut self,
        container: &Container,
        job: &Job,
        log: &InstanceLog,
        step: Duration,
    ) -> Result<String, InstanceError> {
        match self {
            ModeSteps::Compat => Ok(exec(container, git_diff(), step).await?.text()),
            ModeSteps::Hardened {
                untracked_before,
                undone,
                tamper,
                ..
            } => {
                let (u, before) =
                    undo_test_infrastructure(container, job, log, untracked_before, step).await?;
                *undone = Some(u);
                *tamper = tamper_check(container, job, step).await?;
                if !tamper.is_empty() {
                    log.info(&format!(
                        "Hardening: the patch's product code reaches into the test runner (tamper check):\n{}",
                        tamper.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
                    ));
                }
                Ok(before)
            }
        }
    }

    /// Runs the eval script.
    async fn run_script(
        &self,
        container: &Container,
        job: &Job,
        timeout: Duration,
        step: Duration,
    ) -> Result<ScriptRun, InstanceError> {
        match self {
            ModeSteps::Compat => run_compat(container, job, timeout).await,
            ModeSteps::Hardened {
                idle_pid,
                tamper,
                strict,
                env_before,
                ..
            } => {
                let unresolving = if *strict { tamper.as_slice() } else { &[] };
                let before = env_before
                    .as_ref()
                    .ok_or(InstanceError::EnvironmentUnread)?;
                run_hardened(
                    container,
                    job,
                    timeout,
                    *idle_pid,
                    unresolving,
                    before,
                    step,
                )
                .await
            }
        }
    }

    /// The tamper check's signals (none in compatible mode).
    fn tamper(&self) -> &[TamperSignal] {
        match self {
            ModeSteps::Compat => &[],
            ModeSteps::Hardened { tamper, .. } => tamper,
        }
    }

    /// What hardened mode undid (`None` in compatible mode).
    fn into_undone(self) -> Option<Undone> {
        match self {
            ModeSteps::Compat => None,
            ModeSteps::Hardened { undone, .. } => undone,
        }
    }
}

/// Restores the tracked test infrastructure the patch changed and removes what it added, then
/// returns what was undone and the `git diff` after that (untracked and changed files and the
/// diff come from one exec).
async fn undo_test_infrastructure(
    container: &Container,
    job: &Job,
    log: &InstanceLog,
    untracked_before: &BTreeSet<String>,
    step: Duration,
) -> Result<(Undone, String), InstanceError> {
    let base = job
        .row
        .base_commit
        .clone()
        .unwrap_or_else(|| "HEAD".to_owned());
    let inspect = exec(
        container,
        vec![
            "sh".to_owned(),
            "-c".to_owned(),
            hardening::INSPECT_SCRIPT.to_owned(),
            "sh".to_owned(),
            base.clone(),
        ],
        step,
    )
    .await?;
    let (untracked_after, changed, mut before) = hardening::parse_inspect(&inspect.output);
    let undone = Undone::compute(untracked_before, &untracked_after, &changed);
    for cmd in undone.commands(&base) {
        let out = exec(container, cmd.clone(), step).await?;
        log.info(&format!(
            "Hardening: `{}` ->\n{}",
            cmd.join(" "),
            out.text()
        ));
    }
    if !undone.is_empty() {
        log.info(&format!(
            "Hardening: undid test infrastructure from the patch (restored {:?}, removed {:?})",
            undone.restored, undone.removed
        ));
        before = exec(container, git_diff(), step).await?.text();
    }
    Ok((undone, before))
}

/// The eval script's output and what the host knows about it.
struct ScriptRun {
    text: String,
    timed_out: bool,
    region: Option<HardenedRegion>,
    /// Time spent inside the eval script's own execs (the tests themselves); the rest of the
    /// instance's time (container, copies, hardening's process sweeps) is overhead.
    script_time: Duration,
    /// Hardened runs: what the setup part changed outside the repository.
    environment: Option<EnvironmentCheck>,
}

async fn run_compat(
    container: &Container,
    job: &Job,
    timeout: Duration,
) -> Result<ScriptRun, InstanceError> {
    container
        .write_file("/eval.sh", job.eval_script.as_bytes())
        .await?;
    let out = exec(container, strings(&["/bin/bash", "/eval.sh"]), timeout).await?;
    Ok(ScriptRun {
        text: out.text(),
        timed_out: out.timed_out,
        region: None,
        script_time: out.elapsed,
        environment: None,
    })
}

/// The hardened execution: setup, tests and teardown as three execs. Between them every
/// process but the container's init and idle process is killed, so nothing the patch started
/// outlives its part; the start nonce enters the container only with the test part and the end
/// nonce only after the tests' processes are dead. Each part is passed on its exec's command
/// line rather than copied in as a file: one Docker round trip less per part, and a nonce is
/// visible in the container no earlier than its part starts.
async fn run_hardened(
    container: &Container,
    job: &Job,
    timeout: Duration,
    idle_pid: std::num::NonZeroU32,
    tamper: &[TamperSignal],
    env_before: &environment::Snapshot,
    step: Duration,
) -> Result<ScriptRun, InstanceError> {
    const ENV_FILE: &str = "/run/swerve-eval.env";
    let parts = ScriptParts::split(&job.eval_script)?;
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let kill = hardening::kill_all_script(idle_pid);
    let mut text = String::new();

    // Bytecode off for the setup only: an import there then writes nothing outside the
    // repository, so that any `.pyc` that appears was written on purpose.
    let setup_request = ExecRequest::new([
        "/bin/bash".to_owned(),
        "-c".to_owned(),
        parts.setup_script(ENV_FILE),
    ])
    .with_timeout(left())
    .with_workdir(REPO_DIRECTORY)
    .with_env("PYTHONDONTWRITEBYTECODE", "1");
    let setup = container.exec(&setup_request).await?;
    text.push_str(&setup.text());
    let mut script_time = setup.elapsed;
    if setup.timed_out {
        return Ok(ScriptRun {
            text,
            timed_out: true,
            region: None,
            script_time,
            environment: None,
        });
    }
    // Kill what the setup left and read the files the rules need, in one exec; then list the
    // changes of that same, still state.
    let after = read_environment(container, step, Some(&kill)).await?;
    let changes = container.changes().await?;
    let mut environment = environment::check(&job.row.repo, &changes, env_before, &after);
    check_assets(container, job, &mut environment).await;

    let start_nonce = hardening::nonce()?;
    let tests = exec(
        container,
        vec![
            "/bin/bash".to_owned(),
            "-c".to_owned(),
            parts.tests_script(ENV_FILE, &start_nonce),
        ],
        left(),
    )
    .await?;
    text.push_str(&tests.text());
    script_time += tests.elapsed;
    exec(container, strings(&["sh", "-c", &kill]), step).await?;
    if tests.timed_out {
        return Ok(ScriptRun {
            text,
            timed_out: true,
            region: None,
            script_time,
            environment: Some(environment),
        });
    }
    let exit_code = tests.exit_code.unwrap_or(-1);

    let end_nonce = hardening::nonce()?;
    let teardown = exec(
        container,
        vec![
            "/bin/bash".to_owned(),
            "-c".to_owned(),
            parts.teardown_script(exit_code, &end_nonce),
        ],
        left().max(Duration::from_secs(30)),
    )
    .await?;
    text.push_str(&teardown.text());
    script_time += teardown.elapsed;
    Ok(ScriptRun {
        text,
        timed_out: false,
        script_time,
        region: Some(HardenedRegion {
            start_nonce,
            end_nonce,
            exit_code,
            environment_changes: environment.findings.clone(),
            tamper_suspected: tamper.iter().map(ToString::to_string).collect(),
        }),
        environment: Some(environment),
    })
}

/// Hardened runs: each staged patch asset, in `/image_assets` and where the setup's restore
/// command put it in the repository, read back through the engine and compared with the staged
/// bytes. A setup that rewrote a baseline (before its restore, or a process it left behind after)
/// is a finding like any other change outside the rules.
async fn check_assets(container: &Container, job: &Job, environment: &mut EnvironmentCheck) {
    for asset in &job.assets.assets {
        let limit = asset.bytes.len() as u64;
        for path in [
            format!("{}/{}", super::assets::CONTAINER_DIR, asset.flat),
            format!("{REPO_DIRECTORY}/{}", asset.path),
        ] {
            if container
                .read_file(&path, limit)
                .await
                .ok()
                .flatten()
                .as_ref()
                != Some(&asset.bytes)
            {
                environment
                    .findings
                    .push(format!("C {path} (not the staged patch asset)"));
            }
        }
    }
}

/// The tamper check on the job's patch, with the base text of each file that has a signal
/// (`git show BASE:PATH`; a file the base lacks has none).
async fn tamper_check(
    container: &Container,
    job: &Job,
    step: Duration,
) -> Result<Vec<TamperSignal>, InstanceError> {
    let first = tamper::signals(&job.patch, &job.row.repo, |_| None);
    if first.is_empty() {
        return Ok(first);
    }
    let base = job.row.base_commit.as_deref().unwrap_or("HEAD");
    let mut texts = std::collections::BTreeMap::new();
    for path in first
        .iter()
        .map(|s| s.path.clone())
        .collect::<BTreeSet<_>>()
    {
        let out = exec(
            container,
            strings(&["git", "show", &format!("{base}:{path}")]),
            step,
        )
        .await?;
        texts.insert(path, out.success().then(|| out.text()));
    }
    Ok(tamper::signals(&job.patch, &job.row.repo, |path| {
        texts.get(path).cloned().flatten()
    }))
}

/// The files the environment rules read ([`environment::snapshot_script`]): before the setup,
/// or, with `kill`, right after it (its processes killed first, in the same exec).
async fn read_environment(
    container: &Container,
    step: Duration,
    kill: Option<&str>,
) -> Result<environment::Snapshot, InstanceError> {
    let script = match kill {
        Some(kill) => environment::after_setup_script(kill),
        None => environment::snapshot_script(false),
    };
    let mut cmd = strings(&["sh", "-c", &script, "sh"]);
    cmd.extend(environment::WATCHED.map(str::to_owned));
    let read = exec(container, cmd, step).await?;
    Ok(environment::Snapshot::parse(&read.output))
}
