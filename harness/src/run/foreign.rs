//! Rows of other benchmarks, run as their own evaluations run them and graded by their own
//! rules: SWE-rebench V2 (`install_config`) and SWE-bench Pro (`before_repo_set_cmd`). See
//! `docs/swebench-compat.md`, "Task formats".
//!
//! - **SWE-rebench V2**: in the row's prebuilt image, at `/<repository name>`, `git reset --hard
//!   HEAD`, the patch then the test patch with `git apply -v --3way --recount
//!   --ignore-space-change --whitespace=nowarn`, then the row's `test_cmd` lines, all under
//!   `set -e`; the log is stdout followed by stderr; the row's named parser (one of SWE-rebench
//!   V2's, run in the evaluator plugin, names normalised as its evaluation does) reads it; the
//!   verdict is the exact-set rule unless `--verdict subset`. swerve runs the two applies and
//!   the tests as two steps of one shell state (the files), so that a patch that does not apply
//!   is told apart (`patch_apply_failed`) where upstream's `set -e` just stops.
//! - **SWE-bench Pro**: an entry script as its evaluation writes it (the `ENV` lines of the
//!   instance's two Dockerfiles as exports, reset and checkout of the base, `git apply -v`
//!   without `set -e` of the patch with binary hunks stripped, the last line of
//!   `before_repo_set_cmd`, `run_script.sh` with the selected test files comma-joined, stdout
//!   and stderr to separate files), then the instance's `parser.py` writes `output.json`; the
//!   verdict is the subset rule. The run scripts come from a checkout of SWE-bench Pro
//!   (`--pro-scripts DIR`).
//!
//! Hardened runs (the default) change three things, each said in `run_instance.log`: a
//! SWE-rebench V2 row's patch and test patch are applied in two steps with git hooks off, the
//! test infrastructure the patch contributes undone between them (`hardening::Undone`); a Pro
//! row's tests come from its `test_patch` rather than from the fix commit (which a scrubbed
//! image no longer holds); and `parser.py` reads the logs in a fresh container of the image,
//! where nothing the patch ran can have changed it. `--mode compat` runs both evaluations exactly.
//! Before either runs, the image's repository is checked for history past the base commit and,
//! where it has any, cut in a derived image ([`secure_image`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use swerve_host::EvaluatorPlugin;
use swerve_log_parsers::{REBENCH_PARSER_PREFIX, RebenchParser, StatusMap};
use swerve_sandbox::{Container, ContainerSpec, ExecRequest, Sandbox};
use swerve_swebench::grading::{Grading, VerdictRule, grade_listed};
use swerve_swebench::{Instance, TaskFormat};

use super::hardening::{self, Undone};
use super::instance::{InstanceError, Job, Mode, Record, RunContext};
use super::instance_log::InstanceLog;
use crate::run::cache::OutcomeKind;

/// SWE-bench Pro's repository folder in its images.
const PRO_REPO_DIR: &str = "/app";
/// Where the evaluation's files go in the container (Pro's `/workspace`; SWE-rebench V2's
/// patches folder is `/patches`).
const WORKSPACE: &str = "/workspace";
const PATCHES: &str = "/patches";
/// The most of one log or `output.json` read back from a container.
const READ_LIMIT: u64 = 64 << 20;

/// Why a row of another format cannot be run: its own fields or files are missing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForeignError {
    /// A field the format's evaluation reads.
    #[error("{format} row `{instance_id}` has no `{field}`")]
    Missing {
        format: &'static str,
        instance_id: String,
        field: &'static str,
    },
    /// A SWE-rebench V2 parser name swerve does not have.
    #[error(
        "row `{instance_id}` names the SWE-rebench V2 log parser `{name}`, which does not exist"
    )]
    UnknownParser { instance_id: String, name: String },
    /// Pro rows without `--pro-scripts`.
    #[error(
        "SWE-bench Pro row `{instance_id}` needs its run script and parser: pass --pro-scripts \
         with a checkout of SWE-bench Pro (run_scripts/ and dockerfiles/)"
    )]
    NoProScripts { instance_id: String },
    /// A file of the Pro checkout.
    #[error("cannot read {}", path.display())]
    ProFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How one row of another format runs: what [`evaluate`] needs beside the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForeignPlan {
    /// SWE-rebench V2.
    Rebench {
        /// The repository folder (`/<name>`).
        workdir: String,
        /// Reset and both applies, under `set -e`.
        apply: String,
        /// Hardened runs: git hooks off, and the test infrastructure the patch contributes
        /// undone between the patch and the test patch.
        hardened: bool,
        /// The `test_cmd` lines, under `set -e`.
        tests: String,
        /// The parser's name as the evaluator takes it.
        parser: String,
        /// How `resolved` is decided.
        rule: VerdictRule,
    },
    /// SWE-bench Pro.
    Pro {
        /// The entry script (without the parse line in hardened runs).
        entry: String,
        /// `run_script.sh`.
        run_script: String,
        /// `parser.py`.
        parser: String,
        /// Hardened runs: `parser.py` runs in a fresh container.
        parse_apart: bool,
        /// The test patch, uploaded when the tests come from it.
        test_patch: Option<String>,
        /// How `resolved` is decided.
        rule: VerdictRule,
    },
}

impl ForeignPlan {
    /// What `eval.sh` holds for this row (also part of the result's content key).
    pub(crate) fn script_text(&self) -> String {
        match self {
            ForeignPlan::Rebench {
                apply,
                hardened,
                tests,
                parser,
                rule,
                ..
            } => format!(
                "# SWE-rebench V2 evaluation; parser {parser}; verdict {}{}\n{apply}\n{tests}",
                rule.as_str(),
                if *hardened {
                    "; hardened: test infrastructure from the patch undone before the test patch"
                } else {
                    ""
                }
            ),
            ForeignPlan::Pro {
                entry,
                run_script,
                parser,
                test_patch,
                rule,
                ..
            } => format!(
                "# SWE-bench Pro evaluation; verdict {}\n# entryscript.sh\n{entry}\n# run_script.sh\n{run_script}\n# parser.py\n{parser}\n{}",
                rule.as_str(),
                test_patch
                    .as_deref()
                    .map(|patch| format!("# test_patch.diff\n{patch}"))
                    .unwrap_or_default()
            ),
        }
    }

    /// The test command for the parser's context.
    pub(crate) fn test_command(&self) -> String {
        match self {
            ForeignPlan::Rebench { tests, .. } => tests.clone(),
            ForeignPlan::Pro { .. } => "bash /workspace/run_script.sh".to_owned(),
        }
    }

    fn rule(&self) -> VerdictRule {
        match self {
            ForeignPlan::Rebench { rule, .. } | ForeignPlan::Pro { rule, .. } => *rule,
        }
    }
}

/// The plan of `row` when it is of another format (`None` for SWE-bench rows): its scripts as
/// its own evaluation writes them (hardened as the module says unless `mode` is compat), with
/// `verdict` overriding the format's rule.
pub(crate) fn plan(
    row: &Instance,
    mode: Mode,
    verdict: Option<VerdictRule>,
    pro_scripts: Option<&Path>,
) -> Result<Option<ForeignPlan>, ForeignError> {
    match row.format() {
        TaskFormat::SweBench => Ok(None),
        TaskFormat::Rebench => rebench_plan(row, mode, verdict).map(Some),
        TaskFormat::Pro => {
            let root = pro_scripts.ok_or_else(|| ForeignError::NoProScripts {
                instance_id: row.instance_id.clone(),
            })?;
            pro_plan(row, mode, verdict, root).map(Some)
        }
    }
}

fn missing(row: &Instance, format: TaskFormat, field: &'static str) -> ForeignError {
    ForeignError::Missing {
        format: format.as_str(),
        instance_id: row.instance_id.clone(),
        field,
    }
}

/// The repository folder of a row's image.
pub(crate) fn repo_dir(row: &Instance) -> Option<String> {
    match row.format() {
        TaskFormat::SweBench => None,
        TaskFormat::Rebench => row.repo.split_once('/').map(|(_, name)| format!("/{name}")),
        TaskFormat::Pro => Some(PRO_REPO_DIR.to_owned()),
    }
}

/// The flags SWE-rebench V2's evaluation applies both patches with.
const REBENCH_APPLY: &str =
    "git apply -v --3way --recount --ignore-space-change --whitespace=nowarn";

fn rebench_plan(
    row: &Instance,
    mode: Mode,
    verdict: Option<VerdictRule>,
) -> Result<ForeignPlan, ForeignError> {
    let format = TaskFormat::Rebench;
    let config = row
        .install_config
        .as_ref()
        .ok_or_else(|| missing(row, format, "install_config"))?;
    if config.test_cmd.is_empty() {
        return Err(missing(row, format, "install_config.test_cmd"));
    }
    let name = config
        .log_parser
        .as_deref()
        .filter(|name| !name.is_empty())
        .ok_or_else(|| missing(row, format, "install_config.log_parser"))?;
    if RebenchParser::from_name(name).is_none() {
        return Err(ForeignError::UnknownParser {
            instance_id: row.instance_id.clone(),
            name: name.to_owned(),
        });
    }
    let workdir = repo_dir(row).ok_or_else(|| missing(row, format, "repo"))?;
    let apply = format!(
        "set -e\ngit reset --hard HEAD\n{REBENCH_APPLY} {PATCHES}/patch.diff\n{REBENCH_APPLY} {PATCHES}/test_patch.diff"
    );
    let tests = format!("set -e\n{}", config.test_cmd.join("\n"));
    Ok(ForeignPlan::Rebench {
        workdir,
        apply,
        hardened: mode != Mode::Compat,
        tests,
        parser: format!("{REBENCH_PARSER_PREFIX}{name}"),
        rule: verdict.unwrap_or(VerdictRule::ExactSet),
    })
}

fn read_pro_file(path: PathBuf) -> Result<String, ForeignError> {
    fs_err::read_to_string(&path).map_err(|source| ForeignError::ProFile { path, source })
}

fn pro_plan(
    row: &Instance,
    mode: Mode,
    verdict: Option<VerdictRule>,
    root: &Path,
) -> Result<ForeignPlan, ForeignError> {
    let format = TaskFormat::Pro;
    let id = &row.instance_id;
    let scripts = root.join("run_scripts").join(id);
    let run_script = read_pro_file(scripts.join("run_script.sh"))?;
    let parser = read_pro_file(scripts.join("parser.py"))?;
    let mut exports = Vec::new();
    for kind in ["base_dockerfile", "instance_dockerfile"] {
        let dockerfile = read_pro_file(
            root.join("dockerfiles")
                .join(kind)
                .join(id)
                .join("Dockerfile"),
        )?;
        exports.extend(env_exports(&dockerfile));
    }
    let base = row
        .base_commit
        .as_deref()
        .ok_or_else(|| missing(row, format, "base_commit"))?;
    let selected = row
        .selected_test_files_to_run
        .as_ref()
        .ok_or_else(|| missing(row, format, "selected_test_files_to_run"))?
        .join(",");
    let hardened = mode != Mode::Compat;
    let test_patch = row
        .test_patch
        .clone()
        .filter(|patch| !patch.trim().is_empty());
    let (before, test_patch) = match (hardened, test_patch) {
        (true, Some(patch)) => (
            format!("git apply -v {WORKSPACE}/test_patch.diff"),
            Some(patch),
        ),
        (_, _) => (
            row.before_repo_set_cmd
                .as_deref()
                .unwrap_or_default()
                .trim()
                .rsplit('\n')
                .next()
                .unwrap_or_default()
                .to_owned(),
            None,
        ),
    };
    let parse_line = if hardened {
        String::new()
    } else {
        format!(
            "# run parsing script\npython {WORKSPACE}/parser.py {WORKSPACE}/stdout.log {WORKSPACE}/stderr.log {WORKSPACE}/output.json\n"
        )
    };
    let entry = format!(
        "\n{exports}\n# apply patch\ncd {PRO_REPO_DIR}\ngit reset --hard {base}\ngit checkout {base}\ngit apply -v {WORKSPACE}/patch.diff\n{before}\n# run test and save stdout and stderr to separate files\nbash {WORKSPACE}/run_script.sh {selected} > {WORKSPACE}/stdout.log 2> {WORKSPACE}/stderr.log\n{parse_line}",
        exports = exports.join("\n"),
    );
    Ok(ForeignPlan::Pro {
        entry,
        run_script,
        parser,
        parse_apart: hardened,
        test_patch,
        rule: verdict.unwrap_or(VerdictRule::Subset),
    })
}

/// The `ENV` lines of a Dockerfile as `export` lines, as SWE-bench Pro's entry script writes
/// them (each line trimmed, its first `ENV` replaced; `ENV A b` becomes `export A b`).
fn env_exports(dockerfile: &str) -> Vec<String> {
    dockerfile
        .split('\n')
        .map(str::trim)
        .filter(|line| line.starts_with("ENV"))
        .map(|line| line.replacen("ENV", "export", 1))
        .collect()
}

/// A patch without the sections of binary files (`Binary files … differ`, `GIT binary patch`),
/// as SWE-bench Pro strips them before `git apply`; blank sections are dropped too.
pub(crate) fn strip_binary_hunks(patch: &str) -> String {
    if patch.is_empty() {
        return String::new();
    }
    let mut sections: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in patch.split_inclusive('\n') {
        if at > 0 && line.starts_with("diff --git ") {
            sections.push(&patch[start..at]);
            start = at;
        }
        at += line.len();
    }
    sections.push(&patch[start..]);
    sections
        .into_iter()
        .filter(|section| !section.trim().is_empty())
        .filter(|section| {
            !section.lines().any(|line| {
                line == "GIT binary patch"
                    || (line.starts_with("Binary files ") && line.ends_with(" differ"))
            })
        })
        .collect()
}

/// The image a row of another format runs in: in hardened runs its repository is checked for
/// history past the base commit and, when it has any, cut in a derived image
/// (`swerve/scrubbed:<image id>-<base>`, reused when an earlier run made it), which is returned
/// with a line for the log. Compat runs use the image as it is.
pub(crate) async fn secure_image(
    sandbox: &Sandbox,
    row: &Instance,
    mode: Mode,
    image: String,
    image_id: String,
) -> Result<(String, String, Option<String>), swerve_sandbox::Error> {
    let (Some(dir), Some(base)) = (repo_dir(row), row.base_commit.as_deref()) else {
        return Ok((image, image_id, None));
    };
    if mode == Mode::Compat {
        return Ok((image, image_id, None));
    }
    secure_at(sandbox, image, image_id, &dir, base).await
}

/// [`secure_image`] for the repository at `dir` whose base commit is `base`, whatever the row's
/// format (`harness agent` checks every image an agent runs in).
pub(crate) async fn secure_at(
    sandbox: &Sandbox,
    image: String,
    image_id: String,
    dir: &str,
    base: &str,
) -> Result<(String, String, Option<String>), swerve_sandbox::Error> {
    // The cut image is named by what it is cut from, and checked clean when it was made: an
    // earlier run's is used without checking the original again.
    let digest = image_id.trim_start_matches("sha256:");
    let name = format!(
        "swerve/scrubbed:{}-{}",
        &digest[..digest.len().min(32)],
        &base[..base.len().min(12)]
    );
    if let Some(info) = sandbox.image_info(&name).await? {
        let note = format!(
            "History check: {image} reaches past the base commit (found by an earlier run); \
             running in {name}, which is cut at it"
        );
        return Ok((name, info.id, Some(note)));
    }
    let leaks = sandbox.history_leaks(&image, dir, base).await?;
    if leaks.is_clean() {
        return Ok((image, image_id, None));
    }
    let (info, _) = sandbox.scrubbed_image(&image, dir, base, &name).await?;
    let note = format!(
        "History check: {image} reaches past the base commit ({}); running in {name}, which is cut at it",
        leaks.summary()
    );
    Ok((name, info.id, Some(note)))
}

/// The steps of one row of another format in its container; `Err` is an infrastructure
/// failure.
pub(super) async fn evaluate(
    ctx: &RunContext,
    job: &Job,
    plan: &ForeignPlan,
    log: &InstanceLog,
) -> Result<Record, InstanceError> {
    let id = &job.row.instance_id;
    let step = ctx.sandbox.config().timeouts.command;
    fs_err::write(job.dir.join("patch.diff"), &job.patch)?;
    fs_err::write(job.dir.join("eval.sh"), plan.script_text())?;
    let container = super::instance::start_container(ctx, job).await?;
    log.info(&format!("Container for {id} started: {}", container.id()));
    let started = Instant::now();
    let result = match plan {
        ForeignPlan::Rebench {
            workdir,
            apply,
            hardened,
            tests,
            ..
        } => {
            let steps = RebenchSteps {
                workdir,
                apply,
                hardened: *hardened,
                tests,
            };
            run_rebench(ctx, job, &container, steps, step, log).await
        }
        ForeignPlan::Pro {
            entry,
            run_script,
            parser,
            parse_apart,
            test_patch,
            ..
        } => {
            run_pro(
                ctx,
                job,
                &container,
                ProFiles {
                    entry,
                    run_script,
                    parser,
                    test_patch: test_patch.as_deref(),
                },
                *parse_apart,
                step,
                log,
            )
            .await
        }
    };
    let tests = started.elapsed();
    container.remove().await?;
    let ran = result?;
    let mut record = Record::new(OutcomeKind::Unresolved);
    record.tests = tests;
    record.undone = ran.undone.clone();
    let text = ran.log.clone();
    fs_err::write(job.dir.join("test_output.txt"), &text)?;
    log.info(&format!(
        "Test output for {id} written to {}",
        job.dir.join("test_output.txt").display()
    ));
    if ran.timed_out {
        log.error(&format!(
            "Test timed out after {} seconds.",
            ctx.timeout.as_secs()
        ));
        record.outcome = OutcomeKind::TimedOut;
        return Ok(record);
    }
    if !ran.applied {
        log.info(">>>>> Patch Apply Failed");
        record.outcome = OutcomeKind::PatchApplyFailed;
        return Ok(record);
    }
    let statuses = match plan {
        ForeignPlan::Rebench { parser, .. } => {
            match rebench_statuses(&ctx.evaluator, job, parser, &text) {
                Ok(map) => Some(map),
                Err(failure) => {
                    log.error(&failure);
                    record.outcome = OutcomeKind::EvaluatorFailed;
                    record.error = Some(failure);
                    return Ok(record);
                }
            }
        }
        ForeignPlan::Pro { .. } => {
            let output = ran.output_json.as_deref();
            if output.is_none() {
                log.info("Warning: output.json not found; graded as not resolved");
            }
            output.and_then(|bytes| pro_statuses(bytes, log))
        }
    };
    let grading = grade(&job.row, plan, statuses);
    super::instance::write_report(job, log, &grading, &mut record)?;
    record.grading = Some(Box::new(grading));
    Ok(record)
}

/// The grade of a row of another format from its status map.
fn grade(row: &Instance, plan: &ForeignPlan, statuses: Option<StatusMap>) -> Grading {
    match plan {
        ForeignPlan::Rebench { rule, .. } => grade_listed(
            row,
            statuses,
            *rule,
            &swerve_log_parsers::normalize_test_name,
        ),
        ForeignPlan::Pro { .. } => grade_listed(row, statuses, plan.rule(), &str::to_owned),
    }
}

/// Re-grades a finished instance folder of a row of another format without containers
/// (`harness report`): SWE-rebench V2 from `test_output.txt`, SWE-bench Pro from the
/// `output.json` kept beside it. `None` when the folder holds nothing to grade or the parser
/// fails.
pub(super) fn regrade(
    evaluator: &EvaluatorPlugin,
    row: &Instance,
    plan: &ForeignPlan,
    dir: &Path,
) -> Option<Grading> {
    let statuses = match plan {
        ForeignPlan::Rebench { parser, .. } => {
            let text = fs_err::read_to_string(dir.join("test_output.txt")).ok()?;
            let context = context_for(row, parser);
            Some(evaluator.parse(&universal_newlines(&text), &context).ok()?)
        }
        ForeignPlan::Pro { .. } => {
            fs_err::read_to_string(dir.join("test_output.txt")).ok()?;
            let bytes = fs_err::read(dir.join("output.json")).ok();
            bytes.and_then(|bytes| swerve_swebench::grading::pro_output_statuses(&bytes).ok())
        }
    };
    Some(grade(row, plan, statuses))
}

fn context_for(row: &Instance, parser: &str) -> swerve_host::LogContext {
    swerve_host::LogContext {
        repo: row.repo.clone(),
        instance_id: row.instance_id.clone(),
        test_command: String::new(),
        version: row.version.clone().unwrap_or_default(),
        parser: parser.to_owned(),
    }
}

/// The text as Python's `subprocess.run(..., text=True)` hands it to SWE-rebench V2's
/// parsers: `\r\n` and `\r` read as `\n`.
fn universal_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

fn rebench_statuses(
    evaluator: &EvaluatorPlugin,
    job: &Job,
    parser: &str,
    text: &str,
) -> Result<StatusMap, String> {
    evaluator
        .parse(&universal_newlines(text), &context_for(&job.row, parser))
        .map_err(|f| format!("log parser failed: {}: {}", f.class, f.message))
}

/// What the container steps left.
struct Ran {
    /// The log: SWE-rebench V2's stdout then stderr; SWE-bench Pro's entry script output,
    /// then its `stdout.log` and `stderr.log`.
    log: String,
    timed_out: bool,
    /// SWE-rebench V2: both applies succeeded. SWE-bench Pro: always (its script goes on).
    applied: bool,
    /// SWE-bench Pro's `output.json`, when written.
    output_json: Option<Vec<u8>>,
    /// Hardened SWE-rebench V2 runs: the test infrastructure from the patch that was undone.
    undone: Option<Undone>,
}

/// One script's run: how the exec ended and its stdout and stderr, apart.
struct Captured {
    exec: swerve_sandbox::ExecOutput,
    stdout: String,
    stderr: String,
}

/// Runs `script` in `bash` at `workdir` with its stdout and stderr in two files of the
/// container, each cut at [`READ_LIMIT`], and reads them back: SWE-rebench V2's log is every
/// stdout line before every stderr line.
async fn run_captured(
    container: &Container,
    script: &str,
    name: &str,
    workdir: &str,
    timeout: Duration,
) -> Result<Captured, InstanceError> {
    let path = format!("{PATCHES}/{name}.sh");
    container.write_file(&path, script.as_bytes()).await?;
    let (out, err) = (
        format!("{PATCHES}/{name}.stdout"),
        format!("{PATCHES}/{name}.stderr"),
    );
    let wrapper = format!(
        "bash {path} >{out} 2>{err}; status=$?; truncate -s '<{READ_LIMIT}' {out} {err} 2>/dev/null; exit $status"
    );
    let request = ExecRequest::new(["/bin/bash", "-c", &wrapper])
        .with_timeout(timeout)
        .with_workdir(workdir);
    let exec = container.exec(&request).await?;
    if exec.timed_out {
        // The killed script may still hold the files; cut them before reading.
        let cut = format!("truncate -s '<{READ_LIMIT}' {out} {err} 2>/dev/null; true");
        container
            .exec(&ExecRequest::new(["/bin/sh", "-c", &cut]).with_timeout(timeout))
            .await?;
    }
    let read = |file: String| async move {
        Ok::<_, InstanceError>(
            container
                .read_file(&file, READ_LIMIT)
                .await?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default(),
        )
    };
    Ok(Captured {
        stdout: read(out).await?,
        stderr: read(err).await?,
        exec,
    })
}

/// A SWE-rebench V2 run's scripts.
struct RebenchSteps<'p> {
    workdir: &'p str,
    /// Upstream's reset and applies, as one script (compat runs).
    apply: &'p str,
    hardened: bool,
    tests: &'p str,
}

async fn run_rebench(
    ctx: &RunContext,
    job: &Job,
    container: &Container,
    steps: RebenchSteps<'_>,
    step: Duration,
    log: &InstanceLog,
) -> Result<Ran, InstanceError> {
    let workdir = steps.workdir;
    let test_patch = job.row.test_patch.clone().unwrap_or_default();
    container
        .write_file(&format!("{PATCHES}/patch.diff"), job.patch.as_bytes())
        .await?;
    container
        .write_file(&format!("{PATCHES}/test_patch.diff"), test_patch.as_bytes())
        .await?;
    // Every captured script's stdout, then every one's stderr: upstream's one script's log.
    let mut parts: Vec<Captured> = Vec::new();
    let joined = |parts: &[Captured]| {
        let mut text: String = parts.iter().map(|p| p.stdout.as_str()).collect();
        text.extend(parts.iter().map(|p| p.stderr.as_str()));
        text
    };
    let not_applied = |parts: &[Captured], undone| Ran {
        log: joined(parts),
        timed_out: parts.last().is_some_and(|p| p.exec.timed_out),
        applied: false,
        output_json: None,
        undone,
    };
    let mut undone = None;
    if steps.hardened {
        let run = |cmd: &[&str]| {
            let request = ExecRequest::new(cmd.iter().copied())
                .with_timeout(step)
                .with_workdir(workdir);
            async move { container.exec(&request).await }
        };
        run(&hardening::NO_HOOKS_CMD).await?;
        let reset = run_captured(
            container,
            "set -e\ngit reset --hard HEAD",
            "reset",
            workdir,
            step,
        )
        .await?;
        let ok = reset.exec.success();
        parts.push(reset);
        if !ok {
            return Ok(not_applied(&parts, None));
        }
        let before = hardening::nul_list(&run(&hardening::UNTRACKED_CMD).await?.output);
        let script = format!("set -e\n{REBENCH_APPLY} {PATCHES}/patch.diff");
        let patch = run_captured(container, &script, "patch", workdir, step).await?;
        let ok = patch.exec.success();
        parts.push(patch);
        if !ok {
            return Ok(not_applied(&parts, None));
        }
        let inspect = run(&["sh", "-c", hardening::INSPECT_SCRIPT, "sh", "HEAD"]).await?;
        let (after, changed, _) = hardening::parse_inspect(&inspect.output);
        let mut undo = Undone::compute(&before, &after, &changed);
        // `--3way` stages what it applies: a file the patch added is a tracked change, which
        // the base does not have to restore; it is removed (from the index too) instead.
        if !undo.restored.is_empty() {
            let mut ls = vec!["git", "ls-tree", "--name-only", "-z", "HEAD", "--"];
            ls.extend(undo.restored.iter().map(String::as_str));
            let at_base = hardening::nul_list(&run(&ls).await?.output);
            let (kept, added): (Vec<String>, Vec<String>) = undo
                .restored
                .drain(..)
                .partition(|path| at_base.contains(path));
            undo.restored = kept;
            if !added.is_empty() {
                let mut unstage = vec!["git", "rm", "-q", "--cached", "--ignore-unmatch", "--"];
                unstage.extend(added.iter().map(String::as_str));
                run(&unstage).await?;
                undo.removed.extend(added);
                undo.removed.sort();
            }
        }
        for cmd in undo.commands("HEAD") {
            let words: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let out = run(&words).await?;
            log.info(&format!(
                "Hardening: `{}` ->\n{}",
                cmd.join(" "),
                out.text()
            ));
        }
        if !undo.is_empty() {
            log.info(&format!(
                "Hardening: undid test infrastructure from the patch (restored {:?}, removed {:?})",
                undo.restored, undo.removed
            ));
        }
        undone = Some(undo);
        let script = format!("set -e\n{REBENCH_APPLY} {PATCHES}/test_patch.diff");
        let tests = run_captured(container, &script, "test-patch", workdir, step).await?;
        let ok = tests.exec.success();
        parts.push(tests);
        if !ok {
            return Ok(not_applied(&parts, undone));
        }
    } else {
        let applied = run_captured(container, steps.apply, "apply", workdir, step).await?;
        let ok = applied.exec.success();
        parts.push(applied);
        if !ok {
            return Ok(not_applied(&parts, None));
        }
    }
    log.info(&format!(
        ">>>>> Applied the patch and the test patch:\n{}",
        joined(&parts)
    ));
    let ran = run_captured(container, steps.tests, "tests", workdir, ctx.timeout).await?;
    log.info(&format!(
        "Test runtime: {:.2} seconds; exit code {:?}",
        ran.exec.elapsed.as_secs_f64(),
        ran.exec.exit_code
    ));
    let timed_out = ran.exec.timed_out;
    parts.push(ran);
    Ok(Ran {
        log: joined(&parts),
        timed_out,
        applied: true,
        output_json: None,
        undone,
    })
}

/// The files a Pro evaluation uploads.
struct ProFiles<'p> {
    entry: &'p str,
    run_script: &'p str,
    parser: &'p str,
    test_patch: Option<&'p str>,
}

#[allow(clippy::too_many_arguments)]
async fn run_pro(
    ctx: &RunContext,
    job: &Job,
    container: &Container,
    files: ProFiles<'_>,
    parse_apart: bool,
    step: Duration,
    log: &InstanceLog,
) -> Result<Ran, InstanceError> {
    let patch = strip_binary_hunks(&job.patch);
    if patch != job.patch {
        log.info("Stripped binary diff hunks from the patch");
    }
    let mut uploads = vec![
        ("patch.diff", patch.as_str()),
        ("run_script.sh", files.run_script),
        ("entryscript.sh", files.entry),
    ];
    if !parse_apart {
        uploads.push(("parser.py", files.parser));
    }
    if let Some(test_patch) = files.test_patch {
        log.info(
            "Tests from the row's test_patch, not checked out of the fix commit (hardened: the \
             image holds no history past the base)",
        );
        uploads.push(("test_patch.diff", test_patch));
    }
    for (name, text) in uploads {
        container
            .write_file(&format!("{WORKSPACE}/{name}"), text.as_bytes())
            .await?;
    }
    let request = ExecRequest::new(["/bin/bash", &format!("{WORKSPACE}/entryscript.sh")])
        .with_timeout(ctx.timeout)
        .with_workdir(PRO_REPO_DIR);
    let ran = container.exec(&request).await?;
    log.info(&format!(
        "Test runtime: {:.2} seconds; entry script exit code {:?}",
        ran.elapsed.as_secs_f64(),
        ran.exit_code
    ));
    let read = |name: &'static str| async move {
        container
            .read_file(&format!("{WORKSPACE}/{name}"), READ_LIMIT)
            .await
    };
    let stdout = read("stdout.log").await?.unwrap_or_default();
    let stderr = read("stderr.log").await?.unwrap_or_default();
    fs_err::write(job.dir.join("stdout.log"), &stdout)?;
    fs_err::write(job.dir.join("stderr.log"), &stderr)?;
    let mut text = ran.text();
    for (name, bytes) in [("stdout.log", &stdout), ("stderr.log", &stderr)] {
        text.push_str(&format!(
            "\n>>>>> {name}\n{}",
            String::from_utf8_lossy(bytes)
        ));
    }
    let output_json = if ran.timed_out {
        None
    } else if parse_apart {
        log.info("Parsing with parser.py in a fresh container of the image");
        parse_in_fresh_container(ctx, job, files.parser, &stdout, &stderr, step).await?
    } else {
        read("output.json").await?
    };
    if let Some(bytes) = &output_json {
        fs_err::write(job.dir.join("output.json"), bytes)?;
    }
    Ok(Ran {
        log: text,
        timed_out: ran.timed_out,
        applied: true,
        output_json,
        undone: None,
    })
}

/// Runs `parser.py` on the two logs in a new container of the job's image (nothing the
/// patch's code did is in it) and returns the `output.json` it wrote.
async fn parse_in_fresh_container(
    ctx: &RunContext,
    job: &Job,
    parser: &str,
    stdout: &[u8],
    stderr: &[u8],
    step: Duration,
) -> Result<Option<Vec<u8>>, InstanceError> {
    let mut spec = ContainerSpec::new(&job.image, &ctx.run_id, &job.row.instance_id);
    spec.limits = ctx.limits.clone();
    let container = ctx.sandbox.start(&spec).await?;
    let result = async {
        for (name, bytes) in [
            ("parser.py", parser.as_bytes()),
            ("stdout.log", stdout),
            ("stderr.log", stderr),
        ] {
            container
                .write_file(&format!("{WORKSPACE}/{name}"), bytes)
                .await?;
        }
        let request = ExecRequest::new([
            "python",
            &format!("{WORKSPACE}/parser.py"),
            &format!("{WORKSPACE}/stdout.log"),
            &format!("{WORKSPACE}/stderr.log"),
            &format!("{WORKSPACE}/output.json"),
        ])
        .with_timeout(step)
        .with_workdir(WORKSPACE);
        container.exec(&request).await?;
        Ok::<_, InstanceError>(
            container
                .read_file(&format!("{WORKSPACE}/output.json"), READ_LIMIT)
                .await?,
        )
    }
    .await;
    container.remove().await?;
    result
}

fn pro_statuses(bytes: &[u8], log: &InstanceLog) -> Option<StatusMap> {
    match swerve_swebench::grading::pro_output_statuses(bytes) {
        Ok(map) => Some(map),
        Err(problem) => {
            log.info(&format!(
                "Warning: output.json is not a parser's result ({problem}); graded as not resolved"
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(json: &str) -> Instance {
        Instance::from_json(json).expect("row")
    }

    #[test]
    fn rows_that_cannot_run_say_what_they_lack() {
        let message = |row: &Instance, scripts: Option<&Path>| {
            plan(row, Mode::Hardened, None, scripts)
                .expect_err("refused")
                .to_string()
        };
        let unknown = row(
            r#"{"instance_id":"a","repo":"o/r","install_config":{"test_cmd":"x","log_parser":"parse_log_nope"}}"#,
        );
        assert_eq!(
            message(&unknown, None),
            "row `a` names the SWE-rebench V2 log parser `parse_log_nope`, which does not exist"
        );
        let no_tests = row(
            r#"{"instance_id":"a","repo":"o/r","install_config":{"log_parser":"parse_log_gotest"}}"#,
        );
        assert_eq!(
            message(&no_tests, None),
            "swe-rebench-v2 row `a` has no `install_config.test_cmd`"
        );
        let pro = row(
            r#"{"instance_id":"p","repo":"o/r","base_commit":"b","selected_test_files_to_run":"['t.py']"}"#,
        );
        assert!(message(&pro, None).contains("pass --pro-scripts"));
        let empty = tempfile::tempdir().expect("temp dir");
        let missing = message(&pro, Some(empty.path()));
        assert!(
            missing.starts_with("cannot read ") && missing.contains("run_scripts/p/run_script.sh"),
            "{missing}"
        );
        let swebench = row(r#"{"instance_id":"s","repo":"o/r"}"#);
        assert_eq!(
            plan(&swebench, Mode::Hardened, None, None).expect("plan"),
            None
        );
    }

    #[test]
    fn binary_sections_are_stripped_as_swe_bench_pro_strips_them() {
        let text = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n";
        let binary = "diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\n";
        let literal = "diff --git a/j.bin b/j.bin\nGIT binary patch\nliteral 3\nabc\n";
        let patch = format!("{text}{binary}{text}{literal}");
        assert_eq!(strip_binary_hunks(&patch), format!("{text}{text}"));
        assert_eq!(strip_binary_hunks(text), text);
        assert_eq!(strip_binary_hunks(""), "");
        // A line that only mentions the words inside a text hunk is not a binary marker.
        let mention = "diff --git a/r.md b/r.md\n@@ -1 +1 @@\n-a\n+Binary files x differ!\n";
        assert_eq!(strip_binary_hunks(mention), mention);
    }

    #[test]
    fn env_lines_become_exports() {
        let dockerfile =
            "FROM x\n  ENV PATH=/opt/bin:$PATH\nENV LANG C.UTF-8\nRUN echo ENV\nENVX=1\n";
        assert_eq!(
            env_exports(dockerfile),
            [
                "export PATH=/opt/bin:$PATH",
                "export LANG C.UTF-8",
                "exportX=1"
            ]
        );
    }
}
