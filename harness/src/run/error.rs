//! Why a run or an execution could not go on, and an error with its causes on one line (what
//! run logs, reports and callers' messages say).

use std::path::PathBuf;

use super::source;
use crate::images;
use swerve_swebench::predictions::PredictionsError;

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An invalid run id.
    #[error("invalid run id `{0}`: use letters, digits, `.`, `_` and `-`")]
    RunId(String),
    /// The predictions do not fit the dataset.
    #[error(transparent)]
    Predictions(#[from] PredictionsError),
    /// Docker could not be reached or swept (the sandbox's error names the operation).
    #[error(transparent)]
    Sandbox(#[from] swerve_sandbox::Error),
    /// The base image could not be made.
    #[error(transparent)]
    Images(#[from] images::ImagesError),
    /// The async runtime that drives the containers could not be started.
    #[error("cannot start the async runtime for executions")]
    Runtime(#[source] std::io::Error),
    /// Slurm could not place the run (`--executor slurm`).
    #[error(transparent)]
    Slurm(#[from] swerve_slurm::SlurmError),
    /// The submitting process was interrupted; the job array was cancelled.
    #[error(
        "cancelled Slurm job {job}; {finished} of its {total} instances had finished; rerun the same command to complete the rest"
    )]
    Cancelled {
        /// The array's job id.
        job: String,
        /// Instances finished before the cancellation.
        finished: usize,
        /// Instances the array had.
        total: usize,
        /// The signal.
        #[source]
        source: swerve_interrupt::Interrupted,
    },
    /// An array task was told to stop (SIGTERM from `scancel` or a time limit, or SIGINT).
    #[error("this task's containers were removed")]
    Terminated(#[source] swerve_interrupt::Interrupted),
    /// The dataset could not be read.
    #[error(transparent)]
    Source(#[from] source::SourceError),
    /// `harness report` for a run id (and predictions' model) with no log folder.
    #[error(
        "no logs of this run: {} does not exist (check --run-id, --log-dir and the predictions' model name)",
        dir.display()
    )]
    NoLogs {
        /// The folder that should hold the run's logs.
        dir: PathBuf,
    },
    /// A hidden `execute-task` subcommand was started outside a Slurm array task.
    #[error("execute-task runs only as a task of a swerve job array (Slurm starts it)")]
    NotAnArrayTask,
    /// A line of an array task's input is not a request the submitter writes.
    #[error("{}:{line}: not an execution request", path.display())]
    TaskInput {
        /// The task's input file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// An error and its causes on one line, `: `-separated (what the run logs and reports say).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
