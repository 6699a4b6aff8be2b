//! `harness run --harbor DIR`: Harbor task folders evaluated in swerve's sandbox, as Harbor's
//! trial runs them, and their rewards reported.
//!
//! For each task (a folder with `task.toml`, or each such child of DIR): its image is
//! `[environment] docker_image`, else built from `environment/` (named by the folder's digest);
//! a container starts without network and with swerve's limits, in `[environment] workdir` or
//! the image's own; the prediction is applied there — `gold` runs the task's
//! `solution/solve.sh` from `/solution` (Harbor's oracle agent), a patch from a predictions file
//! (`instance_id` = the task folder's name) goes through `git apply`; then `tests/` is uploaded to
//! `/tests` and `bash /tests/test.sh` runs in the same container within `[verifier]
//! timeout_sec`, with `[verifier] env`; the reward is `/logs/verifier/reward.json` (an object of
//! numbers) or else `/logs/verifier/reward.txt` (one number). Harbor has no FAIL_TO_PASS: the
//! verdict is the number, and the run's report lists each task's rewards.
//!
//! Each task's folder under `logs/run_evaluation/<run id>/<model>/<task>/` holds the patch,
//! the solve and test outputs, the reward files as read and `result.json`, written last and
//! atomically; a rerun with the same run id reuses every result whose key (image, patch or
//! solution, tests, limit) is the same, so an interrupted run loses nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use swerve_sandbox::{Container, ContainerSpec, ExecRequest, Limits, Sandbox, SandboxConfig};
use swerve_swebench::predictions::Prediction;

/// The most of a reward file or an output read back.
const READ_LIMIT: u64 = 16 << 20;

/// Why a Harbor run could not go on (a task's own failure is an outcome instead).
#[derive(Debug, thiserror::Error)]
pub enum HarborError {
    /// The tasks folder could not be read.
    #[error("cannot read Harbor tasks in {}", dir.display())]
    Read {
        /// The folder.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No task folder (one with a `task.toml`) there.
    #[error("no Harbor task (a folder with task.toml) in {}", dir.display())]
    NoTasks {
        /// The folder.
        dir: PathBuf,
    },
    /// A `task.toml` that is not one.
    #[error("{}: {source}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What does not fit (names the key).
        #[source]
        source: toml::de::Error,
    },
    /// A `[verifier] timeout_sec` that is not a number of seconds from 1 to 604800.
    #[error("{}: [verifier] timeout_sec = {value} is not a number of seconds from 1 to 604800", path.display())]
    Timeout {
        /// The file.
        path: PathBuf,
        /// The value.
        value: f64,
    },
    /// Predictions for tasks the folder does not have.
    #[error("predictions for tasks that are not in {}: {}", dir.display(), ids.join(" "))]
    UnknownTasks {
        /// The folder.
        dir: PathBuf,
        /// The ids.
        ids: Vec<String>,
    },
    /// A file of the run could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The Docker engine.
    #[error(transparent)]
    Sandbox(#[from] swerve_sandbox::Error),
}

/// What `task.toml` says that a run needs (other keys are Harbor's and ignored).
#[derive(Debug, Clone, Default, Deserialize)]
struct TaskFile {
    #[serde(default)]
    verifier: Verifier,
    #[serde(default)]
    environment: Environment,
    #[serde(default)]
    solution: Solution,
}

#[derive(Debug, Clone, Deserialize)]
struct Verifier {
    #[serde(default = "default_timeout")]
    timeout_sec: f64,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

impl Default for Verifier {
    fn default() -> Verifier {
        Verifier {
            timeout_sec: default_timeout(),
            env: BTreeMap::new(),
        }
    }
}

fn default_timeout() -> f64 {
    600.0
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Environment {
    docker_image: Option<String>,
    workdir: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Solution {
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// One task folder.
#[derive(Debug, Clone)]
pub struct HarborTask {
    /// The folder's name (what predictions name it by).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    config: TaskFile,
}

/// The tasks under `dir`: `dir` itself when it holds a `task.toml`, else each child folder that
/// does, by name.
pub fn read_tasks(dir: &Path) -> Result<Vec<HarborTask>, HarborError> {
    let read_error = |source| HarborError::Read {
        dir: dir.to_owned(),
        source,
    };
    let folders: Vec<PathBuf> = if dir.join("task.toml").is_file() {
        vec![dir.to_owned()]
    } else {
        let mut folders: Vec<PathBuf> = fs_err::read_dir(dir)
            .map_err(read_error)?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.join("task.toml").is_file())
            .collect();
        folders.sort();
        folders
    };
    if folders.is_empty() {
        return Err(HarborError::NoTasks {
            dir: dir.to_owned(),
        });
    }
    folders
        .into_iter()
        .map(|folder| {
            let path = folder.join("task.toml");
            let text = fs_err::read_to_string(&path).map_err(read_error)?;
            let config: TaskFile = toml::from_str(&text).map_err(|source| HarborError::Config {
                path: path.clone(),
                source,
            })?;
            let value = config.verifier.timeout_sec;
            if !(1.0..=604_800.0).contains(&value) {
                return Err(HarborError::Timeout { path, value });
            }
            let name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(HarborTask {
                name,
                dir: folder,
                config,
            })
        })
        .collect()
}

/// What a run of Harbor tasks is given.
#[derive(Debug, Clone)]
pub struct HarborRunConfig {
    /// The tasks.
    pub tasks: Vec<HarborTask>,
    /// The tasks folder (for messages).
    pub tasks_dir: PathBuf,
    /// `None`: every task's oracle (`gold`); else the predictions, by task name.
    pub predictions: Option<Vec<Prediction>>,
    /// Names the log folder, the containers and the report.
    pub run_id: String,
    /// The folder holding `run_evaluation/`.
    pub log_root: PathBuf,
    /// Where the report goes.
    pub report_dir: PathBuf,
    /// Tasks at once.
    pub max_workers: usize,
    /// Container limits (network off unless asked).
    pub limits: Limits,
}

/// How one task ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum HarborOutcome {
    /// The verifier wrote a reward.
    Rewarded {
        /// The main reward (`reward` of the object, or its one value, or the number).
        reward: Option<f64>,
        /// Every reward the verifier wrote.
        rewards: BTreeMap<String, f64>,
    },
    /// The verifier wrote no reward file (or one that is not a number or an object of them).
    NoReward {
        /// What was found.
        problem: String,
    },
    /// The patch did not apply, or the oracle's `solve.sh` failed: reward 0.
    NotApplied,
    /// The verifier ran past its limit.
    TimedOut,
    /// swerve could not evaluate the task (the engine, the image).
    InfraError {
        /// What failed.
        error: String,
    },
}

impl HarborOutcome {
    /// The reward the report counts: the verifier's, 0 for the model's failures, `None` where
    /// there is none to count.
    pub fn reward(&self) -> Option<f64> {
        match self {
            HarborOutcome::Rewarded { reward, .. } => *reward,
            HarborOutcome::NotApplied | HarborOutcome::TimedOut => Some(0.0),
            HarborOutcome::NoReward { .. } | HarborOutcome::InfraError { .. } => None,
        }
    }
}

/// One task's result (`result.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HarborResult {
    /// The task.
    pub task: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: HarborOutcome,
    /// What it was run with (image, patch or solution, tests, limit).
    pub key: String,
    /// Reused from an earlier run with this id.
    #[serde(skip)]
    pub reused: bool,
}

/// The run's report: `<model>.<run id>.harbor.json`.
#[derive(Debug, Clone, Serialize)]
pub struct HarborReport {
    /// Tasks in the run.
    pub total_tasks: usize,
    /// Tasks with a reward to count.
    pub rewarded_tasks: usize,
    /// The mean of the counted rewards.
    pub mean_reward: Option<f64>,
    /// Tasks whose reward is 1 or more.
    pub full_reward_ids: Vec<String>,
    /// Tasks without a reward (no reward file, or swerve's failure).
    pub error_ids: Vec<String>,
    /// Each task's counted reward (`null`: none).
    pub rewards: BTreeMap<String, Option<f64>>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct HarborSummary {
    /// Every task's result.
    pub results: Vec<HarborResult>,
    /// The report.
    pub report: HarborReport,
    /// Where it was written.
    pub report_file: PathBuf,
}

impl HarborRunConfig {
    /// The model name the log folder and the report carry (`gold` for the oracle).
    fn model(&self) -> String {
        match &self.predictions {
            None => "gold".to_owned(),
            Some(predictions) => predictions
                .first()
                .map_or_else(|| "None".to_owned(), Prediction::model_dir_name),
        }
    }
}

/// Runs every task that has a prediction (all of them for `gold`), `max_workers` at once, and
/// writes the report; `done` hears of each result as it comes.
pub async fn run_harbor(
    config: &HarborRunConfig,
    done: &(dyn Fn(&HarborResult) + Sync),
) -> Result<HarborSummary, HarborError> {
    let patches: Option<BTreeMap<&str, &str>> = config.predictions.as_ref().map(|predictions| {
        predictions
            .iter()
            .map(|p| {
                (
                    p.instance_id.as_str(),
                    p.model_patch.as_deref().unwrap_or_default(),
                )
            })
            .collect()
    });
    if let Some(patches) = &patches {
        let unknown: Vec<String> = patches
            .keys()
            .filter(|id| !config.tasks.iter().any(|t| t.name == **id))
            .map(|id| (*id).to_owned())
            .collect();
        if !unknown.is_empty() {
            return Err(HarborError::UnknownTasks {
                dir: config.tasks_dir.clone(),
                ids: unknown,
            });
        }
    }
    let to_run: Vec<(&HarborTask, Option<&str>)> = config
        .tasks
        .iter()
        .filter_map(|task| match &patches {
            None => Some((task, None)),
            Some(patches) => patches
                .get(task.name.as_str())
                .filter(|patch| !patch.trim().is_empty())
                .map(|patch| (task, Some(*patch))),
        })
        .collect();
    let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
    sandbox.sweep(Some(&config.run_id)).await?;
    let model_dir = crate::run::run_dir(&config.log_root, &config.run_id).join(config.model());
    let results: Vec<HarborResult> = futures_util::stream::iter(to_run)
        .map(|(task, patch)| {
            let sandbox = &sandbox;
            let dir = model_dir.join(&task.name);
            async move {
                let result = run_task(config, sandbox, task, patch, &dir).await;
                done(&result);
                result
            }
        })
        .buffer_unordered(config.max_workers.max(1))
        .collect()
        .await;
    let mut results = results;
    results.sort_by(|a, b| a.task.cmp(&b.task));
    let report = make_report(&results);
    fs_err::create_dir_all(&config.report_dir).map_err(|source| HarborError::Write {
        path: config.report_dir.clone(),
        source,
    })?;
    let report_file =
        config
            .report_dir
            .join(format!("{}.{}.harbor.json", config.model(), config.run_id));
    let text = serde_json::to_string_pretty(&report).expect("the report serialises") + "\n";
    swerve_cache::write_atomic(&report_file, text).map_err(|source| HarborError::Write {
        path: report_file.clone(),
        source,
    })?;
    Ok(HarborSummary {
        results,
        report,
        report_file,
    })
}

fn make_report(results: &[HarborResult]) -> HarborReport {
    let rewards: BTreeMap<String, Option<f64>> = results
        .iter()
        .map(|r| (r.task.clone(), r.outcome.reward()))
        .collect();
    let counted: Vec<f64> = rewards.values().flatten().copied().collect();
    HarborReport {
        total_tasks: results.len(),
        rewarded_tasks: counted.len(),
        mean_reward: (!counted.is_empty())
            .then(|| counted.iter().sum::<f64>() / counted.len() as f64),
        full_reward_ids: rewards
            .iter()
            .filter(|(_, r)| r.is_some_and(|r| r >= 1.0))
            .map(|(task, _)| task.clone())
            .collect(),
        error_ids: rewards
            .iter()
            .filter(|(_, r)| r.is_none())
            .map(|(task, _)| task.clone())
            .collect(),
        rewards,
    }
}

/// A digest of a folder's files (relative paths and contents, in path order).
fn digest_dir(dir: &Path, hasher: &mut Sha256) {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let Ok(entries) = fs_err::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    for file in files {
        let relative = file.strip_prefix(dir).unwrap_or(&file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(fs_err::read(&file).unwrap_or_default());
        hasher.update([0]);
    }
}

/// The image a task runs in, made if needed: its id and name.
async fn task_image(
    sandbox: &Sandbox,
    task: &HarborTask,
) -> Result<swerve_sandbox::ImageInfo, String> {
    if let Some(image) = &task.config.environment.docker_image {
        // Local, else pulled.
        return sandbox
            .ensure_image(image)
            .await
            .map_err(|e| crate::execution::error_chain(&e));
    }
    let folder = task.dir.join("environment");
    let mut hasher = Sha256::new();
    digest_dir(&folder, &mut hasher);
    let digest = hex::encode(hasher.finalize());
    let name: String = task
        .name
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let image = format!("swerve-harbor/{name}:{}", &digest[..16]);
    sandbox
        .ensure_dockerfile_image(&image, &folder)
        .await
        .map_err(|e| crate::execution::error_chain(&e))
}

async fn run_task(
    config: &HarborRunConfig,
    sandbox: &Sandbox,
    task: &HarborTask,
    patch: Option<&str>,
    dir: &Path,
) -> HarborResult {
    let result = |key: String, outcome| HarborResult {
        task: task.name.clone(),
        outcome,
        key,
        reused: false,
    };
    let image = match task_image(sandbox, task).await {
        Ok(info) => info,
        Err(error) => return result(String::new(), HarborOutcome::InfraError { error }),
    };
    let mut hasher = Sha256::new();
    hasher.update(image.id.as_bytes());
    hasher.update([0]);
    match patch {
        Some(patch) => hasher.update(patch.as_bytes()),
        None => digest_dir(&task.dir.join("solution"), &mut hasher),
    }
    hasher.update([0]);
    digest_dir(&task.dir.join("tests"), &mut hasher);
    hasher.update(task.config.verifier.timeout_sec.to_bits().to_le_bytes());
    let key = hex::encode(hasher.finalize());
    let result_file = dir.join("result.json");
    if let Ok(text) = fs_err::read_to_string(&result_file)
        && let Ok(earlier) = serde_json::from_str::<HarborResult>(&text)
        && earlier.key == key
        && !matches!(earlier.outcome, HarborOutcome::InfraError { .. })
    {
        return HarborResult {
            reused: true,
            ..earlier
        };
    }
    let outcome = match evaluate(config, sandbox, task, &image.name, patch, dir).await {
        Ok(outcome) => outcome,
        Err(error) => HarborOutcome::InfraError { error },
    };
    let done = result(key, outcome);
    let text = serde_json::to_string_pretty(&done).expect("a result serialises") + "\n";
    if let Err(e) =
        fs_err::create_dir_all(dir).and_then(|()| swerve_cache::write_atomic(&result_file, text))
    {
        tracing::error!(task = %task.name, error = %e, "cannot write result.json");
    }
    done
}

/// The container steps of one task; `Err` is swerve's failure.
async fn evaluate(
    config: &HarborRunConfig,
    sandbox: &Sandbox,
    task: &HarborTask,
    image: &str,
    patch: Option<&str>,
    dir: &Path,
) -> Result<HarborOutcome, String> {
    let chain = |e: &dyn std::error::Error| crate::execution::error_chain(e);
    fs_err::create_dir_all(dir).map_err(|e| chain(&e))?;
    let mut spec = ContainerSpec::new(image, &config.run_id, &task.name);
    spec.limits = config.limits.clone();
    spec.workdir = task.config.environment.workdir.clone();
    let container = sandbox.start(&spec).await.map_err(|e| chain(&e))?;
    let outcome = steps(&container, task, patch, dir).await;
    let removed = container.remove().await;
    let outcome = outcome?;
    removed.map_err(|e| chain(&e))?;
    Ok(outcome)
}

async fn steps(
    container: &Container,
    task: &HarborTask,
    patch: Option<&str>,
    dir: &Path,
) -> Result<HarborOutcome, String> {
    let chain = |e: &dyn std::error::Error| crate::execution::error_chain(e);
    let write =
        |name: &str, text: &[u8]| fs_err::write(dir.join(name), text).map_err(|e| chain(&e));
    let step = Duration::from_secs(600);
    let exec = |cmd: Vec<String>, env: &BTreeMap<String, String>, timeout: Duration| {
        let mut request = ExecRequest::new(cmd).with_timeout(timeout);
        if let Some(workdir) = &task.config.environment.workdir {
            request = request.with_workdir(workdir.clone());
        }
        for (key, value) in env {
            request = request.with_env(key.clone(), value.clone());
        }
        async move { container.exec(&request).await }
    };
    let strings = |cmd: &[&str]| cmd.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mkdir = strings(&[
        "mkdir",
        "-p",
        "/logs/agent",
        "/logs/verifier",
        "/logs/artifacts",
    ]);
    exec(mkdir, &BTreeMap::new(), step)
        .await
        .map_err(|e| chain(&e))?;
    let applied = match patch {
        Some(patch) => {
            write("patch.diff", patch.as_bytes())?;
            let mut patch = patch.to_owned();
            if !patch.ends_with('\n') {
                patch.push('\n');
            }
            container
                .write_file("/tmp/swerve-patch.diff", patch.as_bytes())
                .await
                .map_err(|e| chain(&e))?;
            let cmd = strings(&["git", "apply", "-v", "/tmp/swerve-patch.diff"]);
            exec(cmd, &BTreeMap::new(), step)
                .await
                .map_err(|e| chain(&e))?
        }
        None => {
            container
                .copy_in(&task.dir.join("solution"), "/")
                .await
                .map_err(|e| chain(&e))?;
            let cmd = strings(&["bash", "/solution/solve.sh"]);
            exec(cmd, &task.config.solution.env, step)
                .await
                .map_err(|e| chain(&e))?
        }
    };
    write("apply.txt", &applied.output)?;
    if !applied.success() {
        return Ok(HarborOutcome::NotApplied);
    }
    container
        .copy_in(&task.dir.join("tests"), "/")
        .await
        .map_err(|e| chain(&e))?;
    // Range-checked where task.toml is read.
    let timeout = Duration::from_secs_f64(task.config.verifier.timeout_sec);
    let cmd = strings(&["bash", "/tests/test.sh"]);
    let ran = exec(cmd, &task.config.verifier.env, timeout)
        .await
        .map_err(|e| chain(&e))?;
    write("test-stdout.txt", &ran.output)?;
    if ran.timed_out {
        return Ok(HarborOutcome::TimedOut);
    }
    let read = |path: &'static str| async move {
        container
            .read_file(path, READ_LIMIT)
            .await
            .map_err(|e| chain(&e))
    };
    if let Some(bytes) = read("/logs/verifier/reward.json").await? {
        write("reward.json", &bytes)?;
        return Ok(
            match serde_json::from_slice::<BTreeMap<String, f64>>(&bytes) {
                Ok(rewards) => HarborOutcome::Rewarded {
                    reward: main_reward(&rewards),
                    rewards,
                },
                Err(e) => HarborOutcome::NoReward {
                    problem: format!("reward.json is not an object of numbers: {e}"),
                },
            },
        );
    }
    if let Some(bytes) = read("/logs/verifier/reward.txt").await? {
        write("reward.txt", &bytes)?;
        let text = String::from_utf8_lossy(&bytes);
        return Ok(match text.trim().parse::<f64>() {
            Ok(reward) if reward.is_finite() => HarborOutcome::Rewarded {
                reward: Some(reward),
                rewards: BTreeMap::from([("reward".to_owned(), reward)]),
            },
            _ => HarborOutcome::NoReward {
                problem: format!("reward.txt is not a number: {:?}", text.trim()),
            },
        });
    }
    Ok(HarborOutcome::NoReward {
        problem: "the verifier wrote neither /logs/verifier/reward.json nor reward.txt".to_owned(),
    })
}

/// `reward` of the object, else its one value.
fn main_reward(rewards: &BTreeMap<String, f64>) -> Option<f64> {
    rewards.get("reward").copied().or_else(|| {
        let mut values = rewards.values();
        match (values.next(), values.next()) {
            (Some(only), None) => Some(*only),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_limit_that_is_not_seconds_is_refused_naming_the_file() {
        for value in ["nan", "0.0", "-5.0", "1e9", "inf"] {
            let dir = tempfile::tempdir().expect("temp dir");
            fs_err::write(
                dir.path().join("task.toml"),
                format!("[verifier]\ntimeout_sec = {value}\n"),
            )
            .expect("task.toml");
            let error = read_tasks(dir.path()).expect_err(value).to_string();
            assert!(
                error.contains("task.toml: [verifier] timeout_sec"),
                "{value}: {error}"
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        fs_err::write(
            dir.path().join("task.toml"),
            "[verifier]\ntimeout_sec = 30.0\n",
        )
        .expect("task.toml");
        assert_eq!(read_tasks(dir.path()).expect("a task").len(), 1);
    }
}
