//! `curate validate --executor slurm`: the same validation placed on a Slurm cluster as one job
//! array, as `harness run --executor slurm` places its instances (`swerve-slurm`'s one loop).
//!
//! The submitter reads the state file, deals the tasks without an end among the array's tasks
//! (the task keys are each array task's input) and follows the array. Each array task runs this
//! same command on its node: it validates its keys through the same code as a local run
//! (`validate_tasks`), against its node's engine, with the output folder's `logs/`
//! for its logs, and appends each end to a state file of its own in the round folder as soon
//! as it is known (one progress line each). The submitter then appends every end the tasks
//! wrote to the output folder's state file and writes the output files from it, as a local run
//! does. A task that Slurm lost keeps what it ended; its other tasks are left for the next run
//! (exit 3), like infrastructure errors. The output folder, the tasks file and the mirrors
//! must be on a file system every node shares.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use swerve_slurm::{ArrayEvent, ArrayTask, Placement};

use crate::error::CurateError;

use super::rows::read_tasks;
use super::state::{StateWriter, read_state};
use super::{Plan, STATE_FILE, TaskEnd, ValidateConfig, ValidateFunnel, validate_tasks};

/// The round folder of a Slurm run in the output folder.
const ROUND: &str = ".slurm";

fn shard_state(round: &Path, index: usize) -> PathBuf {
    round.join(format!("state-{index}.jsonl"))
}

fn shard_funnel(round: &Path, index: usize) -> PathBuf {
    round.join(format!("funnel-{index}.json"))
}

/// Validates the tasks without an end as one job array; writes the output files and returns
/// the funnel, with `unfinished` counting the tasks an array task did not end.
pub fn submit(
    config: &ValidateConfig,
    placement: &Placement,
    progress: &dyn Fn(&str),
) -> Result<ValidateFunnel, CurateError> {
    let mut plan = Plan::read(config, progress)?;
    let keys: Vec<String> = plan.pending().map(|t| t.key.clone()).collect();
    if keys.is_empty() {
        return plan.write(config);
    }
    placement.check().map_err(CurateError::Slurm)?;
    let round = config.output.join(ROUND);
    // What an earlier attempt's tasks wrote is in the state file already: the round is redone.
    let _ = fs_err::remove_dir_all(&round);
    let shards = swerve_slurm::deal(&keys, placement.tasks);
    let spec = placement.array(
        "swerve-validate",
        round.clone(),
        shards.iter().map(|keys| keys.join("\n") + "\n").collect(),
    );
    let end = swerve_slurm::run_array(&spec, Duration::from_secs(1), |event| match event {
        ArrayEvent::Submitted { job, tasks } => {
            progress(&format!("Submitted Slurm job {job} ({tasks} tasks)"));
        }
        ArrayEvent::Line { line, .. } => progress(line),
    })
    .map_err(CurateError::Slurm)?;
    for lost in &end.lost {
        progress(&lost.to_string());
    }

    // Every end an array task wrote, into this output folder's state file.
    let mut state = StateWriter::open(&config.output.join(STATE_FILE))?;
    let by_key: std::collections::HashMap<&str, &str> = plan
        .tasks
        .iter()
        .map(|t| (t.key.as_str(), t.instance_id.as_str()))
        .collect();
    let mut ended = BTreeSet::new();
    for (index, shard) in shards.iter().enumerate() {
        let ends = read_state(&shard_state(&round, index))?;
        for key in shard {
            if let Some(end) = ends.get(key) {
                state.push(end)?;
                ended.insert(key.clone());
                plan.ends
                    .insert(by_key[key.as_str()].to_owned(), end.clone());
            }
        }
        if let Ok(text) = fs_err::read_to_string(shard_funnel(&round, index))
            && let Ok(funnel) = serde_json::from_str::<ValidateFunnel>(&text)
        {
            plan.funnel.absorb(&funnel);
        }
    }
    plan.funnel.unfinished = keys.len() - ended.len();
    if end.lost.is_empty() {
        let _ = fs_err::remove_dir_all(&round);
    }
    plan.write(config)
}

/// One array task: validates the tasks whose keys are its input, appending each end to its own
/// state file in the round folder (and a progress line), then its funnel, then marks the task
/// finished.
pub fn serve_task(
    config: &ValidateConfig,
    task: &ArrayTask,
    evaluator: &swerve_host::EvaluatorPlugin,
    progress: &dyn Fn(&str),
) -> Result<(), CurateError> {
    let slurm = CurateError::Slurm;
    let keys: BTreeSet<String> = task
        .input()
        .map_err(slurm)?
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let tasks = read_tasks(&config.tasks)?;
    let mine: Vec<_> = tasks.iter().filter(|t| keys.contains(&t.key)).collect();
    let path = shard_state(&task.dir, task.index);
    let mut state = StateWriter::open(&path)?;
    let mut funnel = ValidateFunnel::default();
    let mut record = |end: TaskEnd| -> Result<(), CurateError> {
        state.push(&end)?;
        let outcome = match &end.verdict {
            super::Verdict::Kept { .. } => "kept",
            super::Verdict::Dropped { reason, .. } => reason.as_str(),
        };
        task.record(&format!("{}: {outcome}", end.instance_id))
            .map_err(CurateError::Slurm)
    };
    validate_tasks(
        config,
        evaluator,
        mine,
        &mut record,
        &mut funnel,
        Some(task.index),
        progress,
    )?;
    let funnel_path = shard_funnel(&task.dir, task.index);
    let mut text = serde_json::to_string_pretty(&funnel).expect("json");
    text.push('\n');
    swerve_cache::write_atomic(&funnel_path, text).map_err(|source| CurateError::Write {
        path: funnel_path,
        source,
    })?;
    task.finish(&task.node).map_err(slurm)
}
