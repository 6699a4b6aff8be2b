//! `harness agent`: a model works on each dataset row as an agent — in a container of the row's
//! image, it runs commands, reads their output, edits and submits — and the submissions become
//! SWE-bench predictions that `harness run` grades as it grades any (`docs/agent.md`).
//!
//! The flow: resolve the rows as `harness run` does (`crate::run::source`), make each row's
//! image (`crate::images`) and check that its repository holds the base commit's history only
//! (cut where it does not), reuse trajectories whose content key matches, run the rest
//! (`episode.rs`) at most `max_workers` at once, then write the predictions file and the run's
//! summary. Every episode ends with an [`EndReason`]; nothing an agent does fails the run.
//!
//! The sandbox of an episode: no network, the container's CPU, memory and process limits, a
//! per-command time limit that kills the command's process tree, the output cut to its head and
//! tail, a per-file size limit (`ulimit -f`) and a disk limit on the container's writes, a step
//! limit, a wall limit and a context-token limit. The hidden tests are not in the image (they
//! come with the eval script when `harness run` grades), and the grading runs in a fresh
//! container from the submitted patch alone.

mod editor;
mod episode;
mod page;
pub mod policy;
pub mod protocol;
pub mod trajectory;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use sha2::{Digest as _, Sha256};
use swerve_sandbox::{Limits, Sandbox, SandboxConfig};
use swerve_swebench::Instance;

use crate::images;
use crate::run::error::RunError;
use crate::run::source::DatasetSource;
use episode::EpisodeSpec;
pub use policy::{Endpoint, Policy, PolicyError, PolicyRequest, Sampling, Scripted};
pub use protocol::Protocol;
pub use trajectory::{EndReason, Trajectory};

/// The trajectory file of an episode.
pub const TRAJECTORY_FILE: &str = "trajectory.json";

/// Bumped when the loop's behaviour changes, so that older trajectories are not reused.
const LOOP_VERSION: &str = "swerve-agent-1";

/// The limits of one episode; each ends it with its reason when reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeLimits {
    /// Model replies (`step_limit`). Default 250.
    pub steps: u32,
    /// Wall-clock time of the whole episode (`timeout`). Default 1 h.
    pub wall: Duration,
    /// One command's limit: the command is killed and the agent told, the episode goes on.
    /// Default 60 s.
    pub command_timeout: Duration,
    /// Tokens of the conversation (`context`): the server's count of the last request and reply
    /// plus an estimate of 4 bytes a token for what came after. Default 32,768.
    pub context_tokens: u64,
    /// Largest file a command may write (`ulimit -f`); a write past it fails in the command.
    /// Default 1 GiB.
    pub file_bytes: u64,
    /// Bytes the container may hold over its image (`disk_limit`, checked after each turn).
    /// Default 4 GiB.
    pub disk_bytes: u64,
}

impl Default for EpisodeLimits {
    fn default() -> Self {
        EpisodeLimits {
            steps: 250,
            wall: Duration::from_secs(3600),
            command_timeout: Duration::from_secs(60),
            context_tokens: 32_768,
            file_bytes: 1 << 30,
            disk_bytes: 4 << 30,
        }
    }
}

/// A validated `harness agent`.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Names the log folder, the containers and the output files.
    pub run_id: String,
    /// The rows, already filtered to `-i` ids.
    pub source: DatasetSource,
    /// How the agent speaks.
    pub protocol: Protocol,
    /// Each episode's limits.
    pub limits: EpisodeLimits,
    /// Each container's limits (network, CPU, memory, processes).
    pub container: Limits,
    /// Episodes at once (at least 1).
    pub max_workers: usize,
    /// The folder holding `agent/<run_id>/` (beside `harness run`'s `run_evaluation/`).
    pub log_root: PathBuf,
    /// The predictions file to write (SWE-bench JSONL).
    pub predictions: PathBuf,
}

/// Progress reports (the binary draws a bar).
pub trait AgentProgress: Send + Sync {
    /// A line for the user (stderr).
    fn message(&self, text: &str);
    /// Episodes start: `total`, `reused` of them from an earlier run.
    fn start(&self, total: usize, reused: usize);
    /// One episode ended (or was reused).
    fn done(&self, instance_id: &str, reason: EndReason);
}

/// One row's episode, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeResult {
    /// The row.
    pub instance_id: String,
    /// How it ended.
    pub reason: EndReason,
    /// Taken from an earlier run.
    pub reused: bool,
    /// Model replies.
    pub steps: u32,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct AgentSummary {
    /// Every episode, in dataset order.
    pub episodes: Vec<EpisodeResult>,
    /// The predictions file written.
    pub predictions: PathBuf,
    /// The run's summary file (`agent.json` in the run's log folder).
    pub summary_file: PathBuf,
    /// The run's HTML page (beside the predictions, `.html` for `.jsonl`).
    pub page_file: PathBuf,
}

impl AgentSummary {
    /// Episodes per ending, in [`EndReason::ALL`]'s order, zero counts left out.
    pub fn by_reason(&self) -> Vec<(EndReason, usize)> {
        EndReason::ALL
            .iter()
            .map(|r| (*r, self.episodes.iter().filter(|e| e.reason == *r).count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// `<log_root>/agent/<run_id>/<model>/`: one folder per row holding its trajectory.
pub fn model_dir(log_root: &Path, run_id: &str, model: &str) -> PathBuf {
    log_root
        .join("agent")
        .join(run_id)
        .join(model.replace('/', "__"))
}

/// Runs the agent on every row and writes the predictions.
pub async fn run(
    config: &AgentConfig,
    policy: Arc<dyn Policy>,
    progress: &dyn AgentProgress,
) -> Result<AgentSummary, RunError> {
    if !crate::run::valid_run_id(&config.run_id) {
        return Err(RunError::RunId(config.run_id.clone()));
    }
    let model = policy.model_name();
    let dir = model_dir(&config.log_root, &config.run_id, &model);
    swerve_interrupt::set_resume_hint(Some(format!(
        "the finished episodes are kept under {}; run the same command again to continue \
         (they are reused, the rest are run)",
        dir.display()
    )));
    let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
    let swept = sandbox.sweep(Some(&config.run_id)).await?;
    if !swept.is_empty() {
        progress.message(&format!(
            "Removed {} containers left by an earlier run of {}",
            swept.len(),
            config.run_id
        ));
    }
    let rows = &config.source.rows;
    if rows
        .iter()
        .any(|row| config.source.environments.get(row).is_some())
    {
        progress.message("Preparing images");
    }
    let (base, _) =
        images::BaseImages::ensure(&sandbox, &config.source.environments, rows.iter()).await?;
    let workers = config.max_workers.max(1);
    let prepared: Vec<Prepared> = futures_util::stream::iter(rows.iter())
        .map(|row| prepare(config, &sandbox, &base, policy.as_ref(), &dir, row))
        .buffered(workers)
        .collect()
        .await;
    let reused = prepared
        .iter()
        .filter(|p| matches!(p, Prepared::Reused(_)))
        .count();
    if reused > 0 {
        progress.message(&format!("{reused} episodes already run, skipping..."));
    }
    progress.start(prepared.len(), reused);
    let episodes: Vec<(Trajectory, bool)> = futures_util::stream::iter(prepared)
        .map(|p| {
            let (sandbox, policy, dir) = (&sandbox, Arc::clone(&policy), &dir);
            async move {
                let (trajectory, reused) = match p {
                    Prepared::Reused(t) => (*t, true),
                    Prepared::Run(spec) => {
                        let t = episode::run_episode(sandbox, policy, &spec).await;
                        (t, false)
                    }
                    Prepared::Failed(t) => (*t, false),
                };
                if !reused {
                    let path = dir.join(&trajectory.instance_id).join(TRAJECTORY_FILE);
                    if let Err(e) = write_json(&path, &trajectory) {
                        tracing::error!(error = %e, "cannot write a trajectory");
                    }
                }
                progress.done(&trajectory.instance_id, trajectory.reason);
                (trajectory, reused)
            }
        })
        .buffered(workers)
        .collect()
        .await;
    let summary = finish(config, &model, &dir, &episodes)?;
    swerve_interrupt::set_resume_hint(None);
    Ok(summary)
}

/// A row ready to run, reused, or failed before its episode could start.
enum Prepared {
    Run(Box<EpisodeSpec>),
    Reused(Box<Trajectory>),
    Failed(Box<Trajectory>),
}

/// A row's image, history check and content key; its earlier trajectory when the key matches.
async fn prepare(
    config: &AgentConfig,
    sandbox: &Sandbox,
    base: &images::BaseImages,
    policy: &dyn Policy,
    dir: &Path,
    row: &Instance,
) -> Prepared {
    let id = &row.instance_id;
    let repo_dir = crate::run::foreign_repo_dir(row);
    let failed = |detail: String| {
        Prepared::Failed(Box::new(Trajectory {
            instance_id: id.clone(),
            model: policy.model_name(),
            protocol: config.protocol.as_str().to_owned(),
            key: String::new(),
            reason: EndReason::EnvError,
            detail: Some(detail),
            patch: String::new(),
            image: String::new(),
            history_check: None,
            steps: 0,
            wall_ms: 0,
            model_ms: 0,
            sandbox_ms: 0,
            context_tokens: 0,
            messages: Vec::new(),
            turns: Vec::new(),
        }))
    };
    let recipe = match config.source.recipe(row, base) {
        Ok(recipe) => recipe,
        Err(e) => return failed(format!("image: {}", crate::run::error_chain(&e))),
    };
    let info = match images::ensure(sandbox, &recipe).await {
        Ok(timings) => timings.last().map(|t| t.info.clone()).expect("one image"),
        Err(e) => return failed(format!("image: {}", crate::run::error_chain(&e))),
    };
    let Some(base_commit) = row.base_commit.as_deref() else {
        return failed(
            "the row has no base_commit: the image's history cannot be checked".to_owned(),
        );
    };
    let (image, image_id, note) = match crate::run::secure_at(
        sandbox,
        recipe.image_name(),
        info.id,
        &repo_dir,
        base_commit,
    )
    .await
    {
        Ok(secured) => secured,
        Err(e) => return failed(format!("history check: {}", crate::run::error_chain(&e))),
    };
    let problem = row.problem_statement.clone().unwrap_or_default();
    let key = content_key(&[
        LOOP_VERSION,
        &image_id,
        config.protocol.as_str(),
        &policy.fingerprint(id),
        &format!("{:?} {:?}", config.limits, config.container),
        &repo_dir,
        &problem,
    ]);
    let path = dir.join(id).join(TRAJECTORY_FILE);
    // An environment's failure is not the episode's result: it runs again.
    if let Some(earlier) =
        read_trajectory(&path).filter(|t| t.key == key && t.reason != EndReason::EnvError)
    {
        return Prepared::Reused(Box::new(earlier));
    }
    Prepared::Run(Box::new(EpisodeSpec {
        instance_id: id.clone(),
        problem,
        image,
        history_check: note,
        repo_dir,
        run_id: config.run_id.clone(),
        key,
        protocol: config.protocol,
        limits: config.limits.clone(),
        container: config.container.clone(),
    }))
}

fn content_key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// An earlier trajectory, when its file is whole and readable.
fn read_trajectory(path: &Path) -> Option<Trajectory> {
    let text = fs_err::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), RunError> {
    let mut text = serde_json::to_string_pretty(value).expect("serialises");
    text.push('\n');
    crate::run::write(path, &text)
}

/// Writes the predictions (dataset order; an episode that did not submit gets an empty patch)
/// and `agent.json`, the run's summary.
fn finish(
    config: &AgentConfig,
    model: &str,
    dir: &Path,
    episodes: &[(Trajectory, bool)],
) -> Result<AgentSummary, RunError> {
    let reused = episodes.iter().filter(|(_, r)| *r).count();
    let mut lines = String::new();
    for (t, _) in episodes {
        let line = serde_json::json!({
            "instance_id": t.instance_id,
            "model_name_or_path": model,
            "model_patch": t.patch,
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    crate::run::write(&config.predictions, &lines)?;
    let mut reasons = BTreeMap::new();
    for (t, _) in episodes {
        *reasons.entry(t.reason.as_str()).or_insert(0u64) += 1;
    }
    let summary_file = dir.join("agent.json");
    let steps: u64 = episodes.iter().map(|(t, _)| u64::from(t.steps)).sum();
    let value = serde_json::json!({
        "run_id": config.run_id,
        "model": model,
        "protocol": config.protocol.as_str(),
        "episodes": episodes.len(),
        "reused": reused,
        "endings": reasons,
        "steps": steps,
        "model_ms": episodes.iter().map(|(t, _)| t.model_ms).sum::<u64>(),
        "sandbox_ms": episodes.iter().map(|(t, _)| t.sandbox_ms).sum::<u64>(),
        "predictions": config.predictions.display().to_string(),
    });
    write_json(&summary_file, &value)?;
    let page_file = config.predictions.with_extension("html");
    let shown: Vec<&Trajectory> = episodes.iter().map(|(t, _)| t).collect();
    crate::run::write(
        &page_file,
        &page::render(&config.run_id, model, config.protocol.as_str(), &shown),
    )?;
    Ok(AgentSummary {
        episodes: episodes
            .iter()
            .map(|(t, reused)| EpisodeResult {
                instance_id: t.instance_id.clone(),
                reason: t.reason,
                reused: *reused,
                steps: t.steps,
            })
            .collect(),
        predictions: config.predictions.clone(),
        summary_file,
        page_file,
    })
}
