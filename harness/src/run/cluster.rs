//! `harness run --executor slurm` (`docs/cluster.md`): the same run, its instances placed on a
//! Slurm cluster as one job array.
//!
//! The submitting process selects the instances as a local run does and, when it reaches a
//! Docker engine, sweeps, makes the images and reuses finished results first, so that only
//! what is left is submitted. It deals those instances round-robin to the array's tasks
//! ([`swerve_slurm::deal`]), submits the array, follows it with `squeue` and reads each task's
//! progress lines (one per finished instance) from the shared run folder. Instances that
//! ended in an infrastructure error are submitted once more, as a second array; the run report
//! is then written from the instances' files exactly as a local run writes it.
//!
//! Each array task runs this binary with the same arguments ([`run_task`]): it sees the round
//! folder in its environment, evaluates its own instances against its node's engine with the
//! same code as a local run, and on SIGTERM (`scancel`, a time limit) removes its containers
//! before it exits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use swerve_host::EvaluatorPlugin;
use swerve_sandbox::{Sandbox, SandboxConfig};
use swerve_slurm::{ArrayEvent, ArrayTask, Placement, SlurmError};

use super::cache::OutcomeKind;
use super::{
    InstanceResult, RunConfig, RunError, RunProgress, RunSummary, evaluate_jobs, finish,
    prepare_all, run_dir, select, sweep, valid_run_id, write_run_json,
};

/// One finished instance, as a task reports it: a line of its progress file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Finished {
    instance_id: String,
    outcome: OutcomeKind,
    reused: bool,
}

impl Finished {
    fn of(result: &InstanceResult) -> Finished {
        Finished {
            instance_id: result.instance_id.clone(),
            outcome: result.outcome,
            reused: result.reused,
        }
    }

    fn into_result(self) -> InstanceResult {
        InstanceResult {
            instance_id: self.instance_id,
            outcome: self.outcome,
            reused: self.reused,
            overhead: Duration::ZERO,
            tests: Duration::ZERO,
            grading: None,
        }
    }
}

/// What one array (a round) did.
struct Round {
    /// Instances a task finished, by id.
    finished: BTreeMap<String, InstanceResult>,
    /// Instances of tasks that ended before finishing (killed, failed, not shared), with why.
    unfinished: Vec<(String, String)>,
}

/// Submits the run's instances as a job array, follows it, retries infrastructure failures once
/// as a second array, and writes the run report.
pub async fn submit(
    config: &RunConfig,
    split: &str,
    progress: &dyn RunProgress,
    options: &Placement,
) -> Result<RunSummary, RunError> {
    if !valid_run_id(&config.run_id) {
        return Err(RunError::RunId(config.run_id.clone()));
    }
    // Before any work: Slurm's commands, its controller, and whether sbatch takes the options.
    options.check()?;
    let to_run = select(config, progress)?;
    write_run_json(config, split)?;

    // The submitting machine's engine, when it has one, prepares the images once (so that tasks
    // on the same engine do not race to build them) and reuses finished results.
    let sandbox = match Sandbox::connect(SandboxConfig::default()).await {
        Ok(s) => Some(s),
        Err(e) => {
            progress.message(&format!(
                "No Docker engine on this machine ({e}); the array tasks make their images and reuse results themselves"
            ));
            None
        }
    };
    let (base, mut instances, ids) = match &sandbox {
        Some(sandbox) => {
            sweep(sandbox, &config.run_id, progress).await?;
            let (base, known, jobs) = prepare_all(config, sandbox, &to_run, progress).await?;
            // In dataset order, so that the same run deals the same shards.
            let queued: BTreeSet<&str> = jobs.iter().map(|j| j.row.instance_id.as_str()).collect();
            let ids: Vec<String> = to_run
                .iter()
                .map(|(r, _)| r.instance_id.clone())
                .filter(|id| queued.contains(id.as_str()))
                .collect();
            (base, known, ids)
        }
        None => {
            progress.start(to_run.len(), 0);
            let ids = to_run.iter().map(|(r, _)| r.instance_id.clone()).collect();
            (crate::images::BaseImages::default(), Vec::new(), ids)
        }
    };

    let slurm_dir = run_dir(&config.log_root, &config.run_id).join(".slurm");
    // Rounds of an earlier run of this id are history: their results are in the instances'
    // folders.
    let _ = fs_err::remove_dir_all(&slurm_dir);
    let mut pending = ids;
    let mut unfinished = Vec::new();
    for round in 1..=2 {
        if pending.is_empty() {
            break;
        }
        let last = round == 2;
        if last {
            progress.message(&format!(
                "Retrying {} instances after infrastructure errors: {}",
                pending.len(),
                pending.join(" ")
            ));
        }
        let dir = slurm_dir.join(format!("round-{round}"));
        let outcome = tokio::task::block_in_place(|| {
            run_round(config, options, dir, &pending, progress, last)
        });
        let done = match outcome {
            Ok(done) => done,
            Err(e) => {
                if let Some(sandbox) = &sandbox {
                    let _ = sweep(sandbox, &config.run_id, progress).await;
                }
                return Err(e);
            }
        };
        pending = Vec::new();
        for (id, result) in done.finished {
            if !last && result.outcome.is_infra() {
                pending.push(id);
            } else {
                instances.push(result);
            }
        }
        for (id, why) in done.unfinished {
            progress.message(&why);
            unfinished.push(id);
        }
    }
    unfinished.sort();
    unfinished.dedup();
    let mut summary = finish(config, sandbox.as_ref(), &base, instances, progress).await?;
    summary.unfinished = unfinished;
    Ok(summary)
}

/// One array over `ids`: submit, follow until every task ended, collect what they finished.
/// Infrastructure failures are held back from `progress` unless this is the `last` round.
fn run_round(
    config: &RunConfig,
    options: &Placement,
    dir: PathBuf,
    ids: &[String],
    progress: &dyn RunProgress,
    last: bool,
) -> Result<Round, RunError> {
    let shards = swerve_slurm::deal(ids, options.tasks);
    let spec = options.array(
        &format!("swerve-{}", config.run_id),
        dir,
        shards.iter().map(|s| s.join("\n")).collect(),
    );
    let mut finished = BTreeMap::new();
    let end = swerve_slurm::run_array(&spec, Duration::from_millis(500), |event| match event {
        ArrayEvent::Submitted { job, tasks } => progress.message(&format!(
            "Submitted Slurm job {job} ({tasks} array tasks) for {} instances",
            ids.len()
        )),
        ArrayEvent::Line { task, line } => match serde_json::from_str::<Finished>(line) {
            Ok(f) => {
                let result = f.into_result();
                if last || !result.outcome.is_infra() {
                    progress.done(&result);
                }
                finished.insert(result.instance_id.clone(), result);
            }
            Err(e) => tracing::warn!(task, %line, error = %e, "unreadable progress line"),
        },
    });
    let end = match end {
        Err(SlurmError::Cancelled { job, source }) => {
            return Err(RunError::Cancelled {
                job,
                finished: finished.len(),
                total: ids.len(),
                source,
            });
        }
        other => other?,
    };
    let mut unfinished = Vec::new();
    for lost in &end.lost {
        let ids: Vec<&String> = shards[lost.index]
            .iter()
            .filter(|id| !finished.contains_key(*id))
            .collect();
        let why = format!(
            "{} instances not evaluated ({}): {lost}",
            ids.len(),
            ids.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
        );
        unfinished.extend(ids.into_iter().map(|id| (id.clone(), why.clone())));
    }
    Ok(Round {
        finished,
        unfinished,
    })
}

/// Writes a progress line per finished instance.
struct Recorder<'t> {
    task: &'t ArrayTask,
    error: Mutex<Option<swerve_slurm::SlurmError>>,
}

impl RunProgress for Recorder<'_> {
    fn message(&self, text: &str) {
        eprintln!("{text}");
    }

    fn start(&self, total: usize, reused: usize) {
        eprintln!(
            "Slurm task {} on {}: {total} instances ({reused} reused)",
            self.task.index, self.task.node
        );
    }

    fn done(&self, result: &InstanceResult) {
        let line = serde_json::to_string(&Finished::of(result)).expect("json");
        if let Err(e) = self.task.record(&line) {
            eprintln!("cannot record {}: {e}", result.instance_id);
            self.error.lock().expect("lock").get_or_insert(e);
        }
    }
}

/// An array task: evaluates the instances the submitter dealt to it against this node's engine,
/// one progress line each, then marks the task finished. SIGTERM or SIGINT removes its
/// containers and ends it with [`RunError::Terminated`], naming the signal.
pub async fn run_task(
    config: &RunConfig,
    evaluator: EvaluatorPlugin,
    task: &ArrayTask,
) -> Result<(), RunError> {
    let input = task.input()?;
    let ids: BTreeSet<&str> = input.lines().filter(|l| !l.is_empty()).collect();
    let recorder = Recorder {
        task,
        error: Mutex::new(None),
    };
    let to_run: Vec<_> = select(config, &recorder)?
        .into_iter()
        .filter(|(row, _)| ids.contains(row.instance_id.as_str()))
        .collect();
    let own: Vec<String> = to_run.iter().map(|(r, _)| r.instance_id.clone()).collect();
    let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
    // What an earlier attempt at these instances left (a killed task, a retried round).
    sandbox.sweep_instances(&config.run_id, &own).await?;

    let work = async {
        let (_, known, jobs) = prepare_all(config, &sandbox, &to_run, &recorder).await?;
        let evaluated = evaluate_jobs(config, &sandbox, evaluator, &jobs, &recorder).await;
        Ok::<_, RunError>(known.len() + evaluated.len())
    };
    // The first signal stops the work here (its containers are removed below) instead of
    // ending the process.
    swerve_interrupt::install().map_err(|e| RunError::Runtime(std::io::Error::other(e)))?;
    let _cooperation = swerve_interrupt::cooperate();
    // Polled, not waited for on a blocking thread: the runtime's shutdown would wait for that
    // thread, which only a signal ends.
    let signalled = async {
        loop {
            if let Some(signal) = swerve_interrupt::received() {
                return signal;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let outcome = tokio::select! {
        done = work => Ok(done),
        signal = signalled => Err(signal),
    };
    // On a signal the evaluations were dropped mid-way; their containers go now.
    let swept = sandbox.sweep_instances(&config.run_id, &own).await?;
    let done = match outcome {
        Ok(done) => done,
        Err(signal) => {
            eprintln!(
                "Slurm task {} stopped by {}: removed {} containers",
                task.index,
                signal.name(),
                swept.len()
            );
            return Err(RunError::Terminated(swerve_interrupt::Interrupted {
                signal,
            }));
        }
    };
    let count = done?;
    if let Some(e) = recorder.error.lock().expect("lock").take() {
        return Err(e.into());
    }
    task.finish(&format!("{} instances on {}\n", count, task.node))?;
    Ok(())
}
