//! Why Slurm could not be used, one variant per failed operation.

use std::path::PathBuf;

/// Why Slurm could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A client command is not installed.
    #[error(
        "`{0}` not found on PATH: --executor slurm needs Slurm's client commands (sbatch, squeue, scancel, scontrol) where the command is submitted"
    )]
    NotInstalled(String),
    /// A client command could not be started at all (commands run under coreutils' `timeout`,
    /// so that a hung controller is an error).
    #[error("cannot run `timeout {program} …`: Slurm's commands run under coreutils' `timeout`")]
    Spawn {
        /// The Slurm command.
        program: String,
        /// The cause (`timeout` missing, no processes left, …).
        #[source]
        source: std::io::Error,
    },
    /// The controller does not answer.
    #[error("the Slurm controller cannot be reached (`scontrol ping`): {0}")]
    Unreachable(String),
    /// `sbatch` refused the job (a partition that does not exist, a bad option, a limit).
    #[error("sbatch refused the job array: {0}")]
    Refused(String),
    /// A client command failed.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output.
        detail: String,
    },
    /// An array task does not see the submitter's folder.
    #[error(
        "array task {index} on node {node} cannot see the submitter's marker {}: the run folder is not shared with this node; put it on a file system every node mounts at the same path",
        path.display()
    )]
    NotShared {
        /// The task index.
        index: usize,
        /// The node the task ran on.
        node: String,
        /// The marker it looked for.
        path: PathBuf,
    },
    /// An array task's environment lacks what the batch script and Slurm set.
    #[error("invalid environment for a swerve array task: {0}")]
    TaskEnv(String),
    /// A file of the round folder could not be read or written.
    #[error("cannot {op} {}", path.display())]
    Round {
        /// What was being done (`write`, `read`, `create`).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The path of the running binary (what array tasks run) is unknown.
    #[error("cannot find the path of this binary, which the array tasks run")]
    CurrentExe(#[source] std::io::Error),
    /// The submitting process was interrupted (Ctrl-C, SIGTERM): the array was cancelled.
    #[error("cancelled Slurm job {job}")]
    Cancelled {
        /// The array's job id.
        job: String,
        /// The signal.
        #[source]
        source: swerve_interrupt::Interrupted,
    },
}

impl SlurmError {
    /// A closure that wraps an I/O error of `op` on `path`.
    pub(crate) fn round(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> SlurmError {
        let path = path.into();
        move |source| SlurmError::Round { op, path, source }
    }
}
