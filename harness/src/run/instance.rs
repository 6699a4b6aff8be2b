//! Running one instance (spec §6): container, patch, eval script, log files, grading.
//!
//! Every failure inside ends as an [`OutcomeKind`] recorded in `swerve.json` and
//! `run_instance.log`; the container is removed on every path (its handle removes it on drop).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use swerve_host::EvaluatorPlugin;
use swerve_log_parsers::{LogText, StatusMap};
use swerve_sandbox::{Container, ContainerSpec, ExecOutput, ExecRequest, Limits, Sandbox};

use super::apply::{ApplyOutcome, CONTAINER_PATCH_FILE, apply_patch};
use super::cache::{InstanceMeta, META_FILE, OutcomeKind, write_atomic};
use super::eval_script::{REPO_DIRECTORY, ScriptParts};
use super::evaluate::{Graded, HardenedRegion, grade_with_plugin};
use super::hardening::{self, Undone};
use super::instance_log::InstanceLog;
use crate::dataset::Instance;
use crate::report::render_instance_report;

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
}

impl Mode {
    /// `hardened` or `compat`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Hardened => "hardened",
            Mode::Compat => "compat",
        }
    }
}

/// What every instance of a run shares.
#[derive(Clone)]
pub struct RunContext {
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
pub struct Job {
    /// The dataset row.
    pub row: Instance,
    /// The model patch (not empty).
    pub patch: String,
    /// The eval script to write to `eval.sh`.
    pub eval_script: String,
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
    /// For a graded outcome (resolved or not) evaluated here: the grade and the parsed test
    /// statuses, so a caller that needs them (single executions) does not parse the log again.
    pub graded: Option<Box<(Graded, StatusMap)>>,
}

/// Everything recorded while evaluating, turned into `swerve.json` at the end.
struct Record {
    outcome: OutcomeKind,
    error: Option<String>,
    hardened: Option<HardenedRegion>,
    undone: Option<Undone>,
    tests: Duration,
    graded: Option<Box<(Graded, StatusMap)>>,
}

impl Record {
    fn new(outcome: OutcomeKind) -> Record {
        Record {
            outcome,
            error: None,
            hardened: None,
            undone: None,
            tests: Duration::ZERO,
            graded: None,
        }
    }

    fn infra(error: impl std::fmt::Display) -> Record {
        Record {
            error: Some(format!("{error:#}")),
            ..Record::new(OutcomeKind::InfraError)
        }
    }
}

/// Evaluates one instance; never fails (failures are outcomes).
pub async fn run_instance(ctx: &RunContext, job: &Job) -> InstanceResult {
    let started = Instant::now();
    let log = match prepare_dir(job) {
        Ok(log) => log,
        Err(e) => {
            tracing::error!(instance = %job.row.instance_id, error = %e, "cannot prepare the log folder");
            return finish(job, ctx, Record::infra(e), started);
        }
    };
    let log = Arc::new(log);
    let record = match evaluate(ctx, job, &log).await {
        Ok(record) => record,
        Err(e) => {
            log.error(&format!(
                "Error in evaluation for {}: {e:#}",
                job.row.instance_id
            ));
            Record::infra(e)
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
        graded: record.graded,
    }
}

/// Starts the container `sweb.eval.<id>.<run_id>`; a name conflict (another run with this
/// id) retries with a `.<unix time>` suffix, as v5 does.
async fn start_container(ctx: &RunContext, job: &Job) -> anyhow::Result<Container> {
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
) -> anyhow::Result<ExecOutput> {
    let request = ExecRequest::new(cmd)
        .with_timeout(timeout)
        .with_workdir(REPO_DIRECTORY);
    Ok(container.exec(&request).await?)
}

fn strings(cmd: &[&str]) -> Vec<String> {
    cmd.iter().map(|s| (*s).to_owned()).collect()
}

/// The in-container steps; `Err` is an infrastructure failure.
async fn evaluate(ctx: &RunContext, job: &Job, log: &InstanceLog) -> anyhow::Result<Record> {
    let id = &job.row.instance_id;
    let api = Duration::from_secs(120);
    fs_err::write(job.dir.join("patch.diff"), &job.patch)?;
    let container = start_container(ctx, job).await?;
    log.info(&format!("Container for {id} started: {}", container.id()));

    // A patch text needs a final newline for git apply; SWE-bench writes it as it is.
    let mut patch = job.patch.clone();
    if !patch.ends_with('\n') {
        patch.push('\n');
    }
    let upload = async {
        container
            .write_file(CONTAINER_PATCH_FILE, patch.as_bytes())
            .await
            .map_err(anyhow::Error::from)
    };
    // Hardened: hooks off, the idle process and the untracked files, in one exec while the
    // patch is copied in.
    let (idle_pid, untracked_before) = if ctx.mode == Mode::Hardened {
        let prepare = exec(
            &container,
            strings(&["sh", "-c", &hardening::prepare_script()]),
            api,
        );
        let (out, ()) = tokio::try_join!(prepare, upload)?;
        hardening::parse_prepare(&out.output)
    } else {
        upload.await?;
        (0, Default::default())
    };
    log.info(&format!(
        "Intermediate patch for {id} written to {}, now applying to container...",
        job.dir.join("patch.diff").display()
    ));
    match apply_patch(&container, api).await? {
        ApplyOutcome::Applied { output, .. } => {
            log.info(&format!(">>>>> Applied Patch:\n{output}"))
        }
        ApplyOutcome::AlreadyApplied => log.info(">>>>> Applied Patch: verified already applied"),
        ApplyOutcome::Failed { output } => {
            log.info(&format!(">>>>> Patch Apply Failed:\n{output}"));
            container.remove().await?;
            return Ok(Record::new(OutcomeKind::PatchApplyFailed));
        }
    }

    let diff_cmd = strings(&["git", "-c", "core.fileMode=false", "diff"]);
    let mut undone = None;
    let before = if ctx.mode == Mode::Hardened {
        let base = job
            .row
            .base_commit
            .clone()
            .unwrap_or_else(|| "HEAD".to_owned());
        // Untracked and changed files, and the diff, in one exec.
        let inspect = exec(
            &container,
            vec![
                "sh".to_owned(),
                "-c".to_owned(),
                hardening::INSPECT_SCRIPT.to_owned(),
                "sh".to_owned(),
                base.clone(),
            ],
            api,
        )
        .await?;
        let (untracked_after, changed, mut before) = hardening::parse_inspect(&inspect.output);
        let u = Undone::compute(&untracked_before, &untracked_after, &changed);
        for cmd in u.commands(&base) {
            let out = exec(&container, cmd.clone(), api).await?;
            log.info(&format!(
                "Hardening: `{}` ->\n{}",
                cmd.join(" "),
                out.text()
            ));
        }
        if !u.is_empty() {
            log.info(&format!(
                "Hardening: undid test infrastructure from the patch (restored {:?}, removed {:?})",
                u.restored, u.removed
            ));
            before = exec(&container, diff_cmd.clone(), api).await?.text();
        }
        undone = Some(u);
        before
    } else {
        exec(&container, diff_cmd.clone(), api).await?.text()
    };
    log.info(&format!("Git diff before:\n{before}"));

    let eval_file = job.dir.join("eval.sh");
    fs_err::write(&eval_file, &job.eval_script)?;
    log.info(&format!(
        "Eval script for {id} written to {}; copying to container...",
        eval_file.display()
    ));
    let tests_started = Instant::now();
    let run = match ctx.mode {
        Mode::Compat => run_compat(&container, job, ctx.timeout).await?,
        Mode::Hardened => run_hardened(&container, job, ctx.timeout, idle_pid, api).await?,
    };
    let tests = tests_started.elapsed();
    log.info(&format!("Test runtime: {:.2} seconds", tests.as_secs_f64()));
    let test_output = job.dir.join("test_output.txt");
    let mut text = run.text;
    if run.timed_out {
        text.push_str(&format!(
            "\n\nTimeout error: {} seconds exceeded.",
            ctx.timeout.as_secs()
        ));
    }
    fs_err::write(&test_output, &text)?;
    log.info(&format!(
        "Test output for {id} written to {}",
        test_output.display()
    ));
    let mut record = Record::new(OutcomeKind::Unresolved);
    record.tests = run.script_time;
    record.hardened = run.region.clone();
    record.undone = undone;
    if run.timed_out {
        log.error(&format!(
            "Test timed out after {} seconds.",
            ctx.timeout.as_secs()
        ));
        container.remove().await?;
        record.outcome = OutcomeKind::TimedOut;
        return Ok(record);
    }
    let after = exec(&container, diff_cmd, api).await?.text();
    log.info(&format!("Git diff after:\n{after}"));
    if after != before {
        log.info("Git diff changed after running eval script");
    }
    let context = swerve_host::LogContext {
        repo: job.row.repo.clone(),
        instance_id: id.clone(),
        test_command: job.test_command.clone(),
        version: job.row.version.clone().unwrap_or_default(),
        parser: job.log_parser.clone(),
    };
    let evaluator = ctx.evaluator.clone();
    let row = job.row.clone();
    let region = run.region;
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
    let (removed, graded) = tokio::join!(container.remove(), grading);
    removed?;
    let graded = graded?;
    let (graded, statuses) = match graded {
        Ok(g) => g,
        Err(failure) => {
            log.error(&failure.to_string());
            record.outcome = OutcomeKind::EvaluatorFailed;
            record.error = Some(failure.0);
            return Ok(record);
        }
    };
    if let Some(problem) = &graded.problem {
        log.info(&format!("Log not gradeable: {problem}"));
    }
    let report = render_instance_report(id, &graded.report);
    record.outcome = if graded.report.resolved {
        OutcomeKind::Resolved
    } else {
        OutcomeKind::Unresolved
    };
    // swerve.json is written after report.json by the caller; a crash in between leaves a
    // report without its key, which a content resume re-evaluates.
    write_atomic(&job.dir.join("report.json"), &report)?;
    log.info(&format!(
        "report: {report}\nResult for {id}: resolved: {}",
        if graded.report.resolved {
            "True"
        } else {
            "False"
        }
    ));
    record.graded = Some(Box::new((graded, statuses)));
    Ok(record)
}

/// The eval script's output and what the host knows about it.
struct ScriptRun {
    text: String,
    timed_out: bool,
    region: Option<HardenedRegion>,
    /// Time spent inside the eval script's own execs (the tests themselves); the rest of the
    /// instance's time (container, copies, hardening's process sweeps) is overhead.
    script_time: Duration,
}

async fn run_compat(
    container: &Container,
    job: &Job,
    timeout: Duration,
) -> anyhow::Result<ScriptRun> {
    container
        .write_file("/eval.sh", job.eval_script.as_bytes())
        .await?;
    let out = exec(container, strings(&["/bin/bash", "/eval.sh"]), timeout).await?;
    Ok(ScriptRun {
        text: out.text(),
        timed_out: out.timed_out,
        region: None,
        script_time: out.elapsed,
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
    idle_pid: u32,
    api: Duration,
) -> anyhow::Result<ScriptRun> {
    const ENV_FILE: &str = "/run/swerve-eval.env";
    let parts = ScriptParts::split(&job.eval_script)?;
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let kill = hardening::kill_all_script(idle_pid);
    let mut text = String::new();

    let setup = exec(
        container,
        vec![
            "/bin/bash".to_owned(),
            "-c".to_owned(),
            parts.setup_script(ENV_FILE),
        ],
        left(),
    )
    .await?;
    text.push_str(&setup.text());
    let mut script_time = setup.elapsed;
    if setup.timed_out {
        return Ok(ScriptRun {
            text,
            timed_out: true,
            region: None,
            script_time,
        });
    }
    exec(container, strings(&["sh", "-c", &kill]), api).await?;

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
    exec(container, strings(&["sh", "-c", &kill]), api).await?;
    if tests.timed_out {
        return Ok(ScriptRun {
            text,
            timed_out: true,
            region: None,
            script_time,
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
        }),
    })
}
