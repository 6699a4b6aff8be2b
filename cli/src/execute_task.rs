//! The flags of the hidden `execute-task` subcommand that `harness` and `trainer` both have: one
//! array task of a batch of executions (`trainer grpo --execute --executor slurm`), started by Slurm,
//! never by hand. The submitting side writes them with [`ExecuteTaskArgs::to_args`], from the
//! same definition the task parses.

use std::path::PathBuf;

use serde::Serialize;

use crate::{MaxWorkers, Timeout};

/// The defaults of `execute-task`'s shared flags: the submitter always writes both.
const EXECUTE_TIMEOUT_SECS: u64 = crate::DEFAULT_EXECUTE_TIMEOUT.as_secs();

/// `execute-task`'s flags, given by the submitter.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize)]
pub struct ExecuteTaskArgs {
    /// The harness dataset (`swerve-mini`, or a rows file or folder)
    #[arg(long)]
    pub dataset: String,
    /// Containers at once in this task.
    #[command(flatten)]
    #[serde(flatten)]
    pub workers: MaxWorkers<2>,
    /// The limit of one eval script.
    #[command(flatten)]
    #[serde(flatten)]
    pub timeout: Timeout<EXECUTE_TIMEOUT_SECS>,
    /// Where each execution's log files go
    #[arg(long)]
    pub work_dir: PathBuf,
}

impl ExecuteTaskArgs {
    /// The subcommand's name.
    pub const SUBCOMMAND: &'static str = "execute-task";

    /// The subcommand and its flags, as a task's command line after the binary.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![Self::SUBCOMMAND.to_owned()];
        args.extend(
            crate::argv::to_args(self)
                .expect("strings, numbers and a path always make arguments (tested below)"),
        );
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_parses_what_the_submitter_wrote() {
        let args = ExecuteTaskArgs {
            dataset: "/data/rows dir/instances.jsonl".into(),
            workers: MaxWorkers { max_workers: 3 },
            timeout: Timeout { seconds: 300 },
            work_dir: "/shared/out/executions".into(),
        };
        let argv = args.to_args();
        assert_eq!(argv[0], ExecuteTaskArgs::SUBCOMMAND);
        assert_eq!(
            crate::argv::parse::<ExecuteTaskArgs>(&argv[1..]).unwrap(),
            args
        );
        assert!(
            crate::argv::parse::<ExecuteTaskArgs>(&["--max-workers".into(), "0".into()]).is_err(),
            "a count refuses 0"
        );
    }
}
