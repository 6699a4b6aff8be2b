//! Executions for execution rewards on a Slurm cluster (`docs/cluster.md`): a batch of
//! (instance, patch) pairs becomes one job array whose tasks evaluate their share with a
//! [`PatchExecutor`] against their node's engine — the same image, eval script, hardened mode,
//! evaluator plugin and limits as a local execution — and send back each [`ExecutionOutcome`]
//! as a progress line.
//!
//! The caller side is [`SlurmExecutions`]: it keeps the local executor's [`ExecutionCache`]
//! (identical work runs once per process; infrastructure failures are not cached, so a later
//! batch retries them) and
//! turns a task that ended without answering into infrastructure errors for its pairs, never
//! into a model's failure. The task side is [`serve_task`], run by a binary's hidden
//! `execute-task` subcommand.
//!
//! One array per batch, rather than long-lived workers: nothing stays allocated between GRPO
//! steps, no port is opened between nodes, and a dead node costs one batch's pairs, which are
//! infrastructure errors. The price is Slurm's start-up per batch (`docs/benchmarks.md`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
pub use swerve_slurm::Placement;
use swerve_slurm::{ArrayEvent, ArrayTask, SlurmError};

use super::RunError;
use super::execute::{ExecuteConfig, ExecutionCache, ExecutionOutcome, PatchExecutor};
use super::source::DatasetSource;

/// Where and how batches run.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// The tasks' command (a binary's `execute-task` subcommand), arguments and tasks per
    /// batch, at most.
    pub placement: Placement,
    /// A folder every node shares; batch `k` uses `<dir>/batch-<k>/`.
    pub dir: PathBuf,
}

/// One pair to execute, as a task's input line.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    n: usize,
    instance_id: String,
    patch: String,
}

/// One result, as a task's progress line.
#[derive(Debug, Serialize, Deserialize)]
struct Reply {
    n: usize,
    outcome: ExecutionOutcome,
}

/// Batches of executions on the cluster (see the module documentation).
pub struct SlurmExecutions {
    config: RemoteConfig,
    cache: ExecutionCache,
    batches: AtomicU64,
}

impl SlurmExecutions {
    /// Checks that Slurm answers and takes the options, before any batch.
    pub fn new(config: RemoteConfig) -> Result<SlurmExecutions, RunError> {
        config.placement.check()?;
        Ok(SlurmExecutions {
            config,
            cache: ExecutionCache::default(),
            batches: AtomicU64::new(0),
        })
    }

    /// Executes every `(instance_id, patch)` pair, one result each in order: cached pairs at
    /// once, the rest as one job array. `Err` only when this process was interrupted (the array
    /// is then cancelled).
    pub fn execute(&self, pairs: &[(String, String)]) -> Result<Vec<ExecutionOutcome>, RunError> {
        let mut results: Vec<Option<ExecutionOutcome>> = vec![None; pairs.len()];
        let mut first_of: HashMap<String, usize> = HashMap::new();
        let mut requests = Vec::new();
        for (i, (id, patch)) in pairs.iter().enumerate() {
            let key = ExecutionCache::key(id, patch);
            if let Some(found) = self.cache.finished(&key) {
                results[i] = Some(found);
            } else if let std::collections::hash_map::Entry::Vacant(slot) = first_of.entry(key) {
                slot.insert(i);
                requests.push(Request {
                    n: i,
                    instance_id: id.clone(),
                    patch: patch.clone(),
                });
            }
        }
        if !requests.is_empty() {
            for (n, outcome) in self.run_batch(requests)? {
                results[n] = Some(outcome);
            }
        }
        // Duplicates take their first's result; what succeeded is cached.
        let mut out = Vec::with_capacity(pairs.len());
        for (i, (id, patch)) in pairs.iter().enumerate() {
            let key = ExecutionCache::key(id, patch);
            let result = match first_of.get(&key) {
                Some(&first) => results[first].clone(),
                None => results[i].clone(),
            }
            .unwrap_or_else(|| ExecutionOutcome::infrastructure("no result came back"));
            self.cache.record(&key, result.clone());
            out.push(result);
        }
        Ok(out)
    }

    /// One array over `requests`; every request gets a result (an infrastructure error when its
    /// task ended without answering).
    fn run_batch(
        &self,
        requests: Vec<Request>,
    ) -> Result<Vec<(usize, ExecutionOutcome)>, RunError> {
        let k = self.batches.fetch_add(1, Ordering::Relaxed);
        let dir = self.config.dir.join(format!("batch-{k}"));
        let _ = fs_err::remove_dir_all(&dir);
        let shards = swerve_slurm::deal(
            &requests.iter().collect::<Vec<_>>(),
            self.config.placement.tasks,
        );
        let inputs = shards
            .iter()
            .map(|shard| {
                shard
                    .iter()
                    .map(|r| serde_json::to_string(r).expect("json") + "\n")
                    .collect::<String>()
            })
            .collect();
        let spec = self.config.placement.array("swerve-execute", dir, inputs);
        let mut answered: HashMap<usize, ExecutionOutcome> = HashMap::new();
        let end = swerve_slurm::run_array(&spec, Duration::from_millis(200), |event| {
            if let ArrayEvent::Line { task, line } = event {
                match serde_json::from_str::<Reply>(line) {
                    Ok(reply) => {
                        answered.insert(reply.n, reply.outcome);
                    }
                    Err(e) => tracing::warn!(task, error = %e, "unreadable execution line"),
                }
            }
        });
        let end = match end {
            Ok(end) => end,
            Err(SlurmError::Cancelled { job, source }) => {
                return Err(RunError::Cancelled {
                    job,
                    finished: answered.len(),
                    total: requests.len(),
                    source,
                });
            }
            // Not the model's doing: every pair of the batch is an infrastructure error.
            Err(e) => {
                let why = format!("Slurm could not run the batch: {e}");
                return Ok(requests
                    .iter()
                    .map(|r| (r.n, ExecutionOutcome::infrastructure(why.clone())))
                    .collect());
            }
        };
        let mut out = Vec::with_capacity(requests.len());
        for (index, shard) in shards.iter().enumerate() {
            let lost = end.lost.iter().find(|l| l.index == index);
            for r in shard {
                let outcome = answered.remove(&r.n).unwrap_or_else(|| {
                    ExecutionOutcome::infrastructure(lost.map_or_else(
                        || "the task finished without answering for this patch".to_owned(),
                        |lost| format!("not executed: {lost}"),
                    ))
                });
                out.push((r.n, outcome));
            }
        }
        Ok(out)
    }
}

/// Runs this process as an array task of a batch (a binary's hidden `execute-task`
/// subcommand): the executor for `dataset` with `config` (its `run_id` is set here), containers
/// swept if Slurm stops the task, then the task's pairs executed, one progress line per result
/// in input order. An error when the process is not a swerve array task.
pub fn serve_from_env(
    dataset: &str,
    config: ExecuteConfig,
    evaluator: swerve_host::EvaluatorPlugin,
) -> Result<(), RunError> {
    let task = ArrayTask::from_env()?.ok_or(RunError::NotAnArrayTask)?;
    let source = DatasetSource::resolve(dataset, "test", None)?;
    let config = ExecuteConfig {
        run_id: format!("execute-{}", std::process::id()),
        ..config
    };
    let executor = std::sync::Arc::new(PatchExecutor::new(source, evaluator, config)?);
    let sweeper = std::sync::Arc::clone(&executor);
    swerve_slurm::on_terminate(move || {
        let removed = sweeper.sweep();
        eprintln!("terminated: removed {removed} containers");
    });
    serve_task(&task, &executor)
}

/// An array task of a batch: executes its pairs with `executor` (at most its `workers` containers
/// at once), one progress line per result in input order, then marks the task finished.
pub(crate) fn serve_task(task: &ArrayTask, executor: &PatchExecutor) -> Result<(), RunError> {
    let input = task.input()?;
    let mut pending = Vec::new();
    for (number, line) in input.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let request: Request =
            serde_json::from_str(line).map_err(|source| RunError::TaskInput {
                path: task.input_path(),
                line: number + 1,
                source,
            })?;
        pending.push((
            request.n,
            executor.submit(&request.instance_id, &request.patch),
        ));
    }
    for (n, pending) in pending {
        let reply = Reply {
            n,
            outcome: pending.wait(),
        };
        task.record(&serde_json::to_string(&reply).expect("json"))?;
    }
    task.finish(&task.node)?;
    Ok(())
}
