//! The flags of the hidden `execute-task` subcommand that `harness` and `trainer` both have: one
//! array task of a batch of executions (`trainer grpo --execute-on slurm`), started by Slurm,
//! never by hand. The submitting side writes them with [`ExecuteTaskArgs::to_args`], from the
//! same definition the task parses.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// The default limit for one execution's eval script (an execution reward's patch run), in
/// `trainer grpo --execute-timeout` and the harness's executor alike. `harness run`'s own
/// default is SWE-bench's 1800 s.
pub const DEFAULT_EXECUTE_TIMEOUT: Duration = Duration::from_secs(300);

/// `execute-task`'s flags. Every one is given by the submitter, so none has a default.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize)]
pub struct ExecuteTaskArgs {
    /// The harness dataset (`swerve-mini`, or a rows file or folder)
    #[arg(long)]
    pub dataset: String,
    /// Containers at once in this task
    #[arg(long, value_parser = crate::count)]
    pub workers: usize,
    /// Seconds for one eval script
    #[arg(long)]
    pub timeout: u64,
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
            workers: 2,
            timeout: 300,
            work_dir: "/shared/out/executions".into(),
        };
        let argv = args.to_args();
        assert_eq!(argv[0], ExecuteTaskArgs::SUBCOMMAND);
        assert_eq!(
            crate::argv::parse::<ExecuteTaskArgs>(&argv[1..]).unwrap(),
            args
        );
        assert!(
            crate::argv::parse::<ExecuteTaskArgs>(&["--workers".into(), "0".into()]).is_err(),
            "a count refuses 0"
        );
    }
}
