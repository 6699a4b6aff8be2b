//! Where GRPO's rewards come from: a set of named, weighted reward functions scored over a
//! generation batch ([`RewardFunctions`]), implemented by swerve's WebAssembly reward plugins
//! through `swerve-host` ([`PluginRewards`]) or by plain Rust closures in tests
//! ([`FnRewards`]); and the boundary to execution-based rewards ([`Executor`]), implemented by
//! the harness's sandbox executor ([`PatchExecutor`]) or by closures ([`FnExecutor`]).

#[cfg(feature = "execute")]
use swerve_harness::execution::PatchExecutor;
#[cfg(feature = "execute")]
use swerve_harness::execution::{RemoteConfig, SlurmExecutions};
use swerve_host::{Execution, Host, HostConfig, Sample, Scorer, ScorerConfig, WeightedPlugin};

use crate::error::{Error, Result};
use swerve_swebench::Instance;

/// Reward functions: one answer (a reward, or `None` for "not applicable") per function and
/// sample.
pub trait RewardFunctions {
    /// The functions' names, as metrics name them (`rewards/<name>/mean`).
    fn names(&self) -> Vec<String>;
    /// The functions' weights (TRL's `reward_weights`).
    fn weights(&self) -> Vec<f64>;
    /// `result[i][k]`: function `k`'s reward for `samples[i]`.
    fn score(&self, samples: &[Sample]) -> Result<Vec<Vec<Option<f64>>>>;
}

/// Reward plugins run by `swerve-host`: one weighted plugin per `--plugin` argument.
pub struct PluginRewards {
    names: Vec<String>,
    scorer: Scorer,
}

impl PluginRewards {
    /// Loads the plugins of `specs` (`--plugin` arguments; each spec's name names its metrics)
    /// with a host using `host_config`, scoring on `jobs` threads. `weights` (TRL's
    /// `reward_weights`), when given, replaces the specs' own weights and must have one entry
    /// per plugin.
    pub fn load(
        specs: &[swerve_host::PluginSpec],
        weights: Option<&[f64]>,
        host_config: HostConfig,
        jobs: usize,
    ) -> Result<Self> {
        if let Some(w) = weights.filter(|w| w.len() != specs.len()) {
            return Err(Error::Training {
                reason: format!(
                    "reward_weights has {} entries for {} reward plugins",
                    w.len(),
                    specs.len()
                ),
            });
        }
        let host = Host::new(host_config).map_err(Error::Reward)?;
        let plugins = specs
            .iter()
            .enumerate()
            .map(|(k, s)| {
                Ok(WeightedPlugin {
                    plugin: host
                        .load_reward(&s.path, &s.budgets)
                        .map_err(Error::Reward)?,
                    weight: weights.map_or(s.weight, |w| w[k]),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let config = ScorerConfig {
            jobs: jobs.max(1),
            ..ScorerConfig::default()
        };
        Ok(Self {
            names: specs.iter().map(|s| s.name.clone()).collect(),
            scorer: Scorer::new(plugins, config),
        })
    }
}

impl RewardFunctions for PluginRewards {
    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn weights(&self) -> Vec<f64> {
        self.scorer.plugins().iter().map(|p| p.weight).collect()
    }

    fn score(&self, samples: &[Sample]) -> Result<Vec<Vec<Option<f64>>>> {
        let scores = self.scorer.score(samples, &|_| {}).map_err(Error::Reward)?;
        Ok(scores
            .into_iter()
            .map(|s| s.plugins.into_iter().map(|p| p.reward).collect())
            .collect())
    }
}

/// A named reward function over a sample, for tests and library users.
pub(crate) type RewardFn = Box<dyn Fn(&Sample) -> Option<f64> + Send + Sync>;

/// Reward functions written in Rust.
pub struct FnRewards {
    /// `(name, weight, function)`.
    pub functions: Vec<(String, f64, RewardFn)>,
}

impl RewardFunctions for FnRewards {
    fn names(&self) -> Vec<String> {
        self.functions.iter().map(|f| f.0.clone()).collect()
    }

    fn weights(&self) -> Vec<f64> {
        self.functions.iter().map(|f| f.1).collect()
    }

    fn score(&self, samples: &[Sample]) -> Result<Vec<Vec<Option<f64>>>> {
        Ok(samples
            .iter()
            .map(|s| self.functions.iter().map(|f| (f.2)(s)).collect())
            .collect())
    }
}

/// Why the executor of `--execute` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// The harness dataset could not be read.
    #[cfg(feature = "execute")]
    #[error(transparent)]
    Dataset(#[from] swerve_harness::execution::SourceError),
    /// Docker, the images or Slurm could not be used.
    #[cfg(feature = "execute")]
    #[error(transparent)]
    Harness(#[from] swerve_harness::execution::RunError),
    /// The dataset has no rows to execute against.
    #[error("the dataset has no rows")]
    NoRows,
    /// A folder's absolute path could not be made.
    #[error("cannot resolve the folder {}", path.display())]
    Folder {
        /// The folder.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// This binary has no container client.
    #[error("this trainer was built without the `execute` feature (no Docker client)")]
    NotBuilt,
}

/// Runs a completion's patch against its task's tests (in the Docker sandbox, through the
/// harness) so that execution-aware reward plugins see `Sample.execution`.
///
/// The trainer submits each completion as soon as the model has finished it, after turning its
/// SEARCH/REPLACE edits into a unified diff (`crate::predict::patch::completion_patch`; an empty patch
/// when the completion has none), and waits for every result only before scoring, so that
/// sandboxes run while the rest of the batch is still being generated. Failures of the
/// infrastructure belong in [`Execution::infra_error`], not in an `Err`: the sample is still
/// scored.
pub trait Executor: Sync {
    /// Starts applying `patch` to `task`'s repository and running its tests; returns at once.
    fn submit(&self, task: &Instance, patch: &str) -> PendingExecution;
}

/// An execution that may still be running.
pub struct PendingExecution(Box<dyn FnOnce() -> Result<Execution> + Send>);

impl PendingExecution {
    /// A result that is already known.
    pub fn ready(execution: Execution) -> Self {
        Self(Box::new(move || Ok(execution)))
    }

    /// A result that `wait` produces when asked (blocking); an `Err` only when the run cannot
    /// go on ([`Error::Interrupted`]), never for a failed execution.
    pub fn later(wait: impl FnOnce() -> Result<Execution> + Send + 'static) -> Self {
        Self(Box::new(wait))
    }

    /// Blocks until the execution is done.
    pub fn wait(self) -> Result<Execution> {
        (self.0)()
    }
}

/// The harness's executor: each patch evaluated as `harness run` evaluates a prediction, in
/// parallel containers, identical patches once.
#[cfg(feature = "execute")]
impl Executor for PatchExecutor {
    fn submit(&self, task: &Instance, patch: &str) -> PendingExecution {
        let pending = PatchExecutor::submit(self, &task.instance_id, patch);
        let row = task.clone();
        PendingExecution::later(move || Ok(pending.wait().to_execution(&row)))
    }
}

/// `--execute --executor slurm`: the completions of a step are gathered as they are submitted, and the
/// first `wait` sends them all as one job array ([`SlurmExecutions`]); submissions after that
/// start the next batch. Same executions, limits and content cache as the local executor.
#[cfg(feature = "execute")]
pub(crate) struct SlurmExecutor {
    remote: std::sync::Arc<SlurmExecutions>,
    open: std::sync::Arc<std::sync::Mutex<std::sync::Arc<std::sync::Mutex<Batch>>>>,
}

/// Pairs gathered for one array, and their results once it ran.
#[cfg(feature = "execute")]
#[derive(Default)]
struct Batch {
    pairs: Vec<(String, String)>,
    results: Option<Vec<swerve_harness::execution::ExecutionOutcome>>,
}

#[cfg(feature = "execute")]
impl SlurmExecutor {
    /// Checks Slurm and the dataset; the tasks run `slurm.command` (a binary's `execute-task`
    /// subcommand).
    pub(crate) fn start(
        spec: &crate::commands::ExecuteSpec,
        slurm: &crate::commands::SlurmSpec,
        source: &swerve_harness::execution::DatasetSource,
    ) -> std::result::Result<Box<dyn Executor>, ExecuteError> {
        if source.rows.is_empty() {
            return Err(ExecuteError::NoRows);
        }
        let folder = |path: &std::path::Path| {
            let path = path.to_owned();
            move |source| ExecuteError::Folder { path, source }
        };
        let work_dir = std::path::absolute(&spec.work_dir).map_err(folder(&spec.work_dir))?;
        let remote = SlurmExecutions::new(RemoteConfig {
            placement: swerve_harness::execution::Placement {
                sbatch_args: slurm.sbatch_args.clone(),
                tasks: slurm.tasks,
                command: slurm.command.clone(),
                chdir: std::env::current_dir().map_err(folder(std::path::Path::new(".")))?,
            },
            dir: work_dir.join("slurm"),
        })?;
        Ok(Box::new(SlurmExecutor {
            remote: std::sync::Arc::new(remote),
            open: Default::default(),
        }))
    }
}

#[cfg(feature = "execute")]
impl Executor for SlurmExecutor {
    fn submit(&self, task: &Instance, patch: &str) -> PendingExecution {
        // The open batch stays locked while the pair goes in, so that a batch is never closed
        // between the two (lock order: the open slot, then a batch).
        let open = self.open.lock().expect("batch lock");
        let batch = std::sync::Arc::clone(&open);
        let index = {
            let mut b = batch.lock().expect("batch lock");
            b.pairs.push((task.instance_id.clone(), patch.to_owned()));
            b.pairs.len() - 1
        };
        drop(open);
        let (remote, open) = (
            std::sync::Arc::clone(&self.remote),
            std::sync::Arc::clone(&self.open),
        );
        let row = task.clone();
        PendingExecution::later(move || {
            // Close this batch: later submissions go to a new one.
            {
                let mut current = open.lock().expect("batch lock");
                if std::sync::Arc::ptr_eq(&current, &batch) {
                    *current = Default::default();
                }
            }
            let mut b = batch.lock().expect("batch lock");
            if b.results.is_none() {
                // Only an interrupt of this process (the array was cancelled) ends a batch
                // without results; every other failure is an execution's infrastructure error.
                let results = remote
                    .execute(&b.pairs)
                    .map_err(|e| Error::Interrupted(Box::new(e)))?;
                b.results = Some(results);
            }
            Ok(b.results.as_ref().expect("results")[index].to_execution(&row))
        })
    }
}

/// An executor written in Rust (for tests and library users): runs the function at once.
pub struct FnExecutor<F>(pub F);

impl<F: Fn(&Instance, &str) -> Execution + Sync> Executor for FnExecutor<F> {
    fn submit(&self, task: &Instance, patch: &str) -> PendingExecution {
        PendingExecution::ready((self.0)(task, patch))
    }
}
