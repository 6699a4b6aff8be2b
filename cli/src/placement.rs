//! `--executor`, `--slurm-arg` and `--slurm-tasks`: where a command's work runs, the same three
//! flags in every command that can place work on Slurm (`harness run`, `curate run`, `curate
//! validate`, `trainer grpo --execute`), turned into the [`swerve_slurm::Placement`] the
//! libraries take.

use anyhow::Context as _;

/// Where the work runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Executor {
    /// This machine (its Docker engine, its cores).
    #[default]
    Local,
    /// A Slurm cluster: one job array whose tasks run this same command on their nodes
    /// (docs/cluster.md).
    Slurm,
}

/// The placement flags (flatten into a command's arguments).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct PlacementArgs {
    /// Where the work runs: this machine, or a Slurm cluster (one job array whose tasks run this
    /// command on their nodes; the folders it reads and writes must be on a file system every
    /// node shares: docs/cluster.md)
    #[arg(long, value_enum, default_value = "local")]
    pub executor: Executor,
    /// An argument for `sbatch` (repeatable), e.g. `--slurm-arg=--partition=cpu`
    /// `--slurm-arg=--time=4:00:00`
    #[arg(long = "slurm-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub slurm_args: Vec<String>,
    /// Array tasks of a Slurm run, at most
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = crate::count)]
    pub slurm_tasks: usize,
}

impl PlacementArgs {
    /// Whether the work goes to Slurm.
    pub fn on_slurm(&self) -> bool {
        self.executor == Executor::Slurm
    }

    /// This command (the running binary with the same arguments) placed on Slurm from the
    /// current folder, in at most `--slurm-tasks` array tasks.
    pub fn placement(&self) -> anyhow::Result<swerve_slurm::Placement> {
        Ok(swerve_slurm::Placement {
            sbatch_args: self.slurm_args.clone(),
            tasks: self.slurm_tasks,
            command: swerve_slurm::this_command()?,
            chdir: std::env::current_dir().context("the current folder")?,
        })
    }

    /// The flags that only mean something on Slurm, given while the work stays local: an error
    /// naming the first (a local run would silently ignore them).
    pub fn check_local(&self) -> Result<(), crate::UsageError> {
        if self.on_slurm() {
            return Ok(());
        }
        match self.slurm_args.first() {
            Some(arg) => Err(crate::UsageError::new(
                "--slurm-arg",
                arg,
                "only used with --executor slurm",
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        placement: PlacementArgs,
    }

    fn parse(args: &[&str]) -> Result<PlacementArgs, clap::error::ErrorKind> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map(|c| c.placement)
            .map_err(|e| e.kind())
    }

    #[test]
    fn local_by_default_and_slurm_flags_parse() {
        assert_eq!(
            parse(&[]),
            Ok(PlacementArgs {
                executor: Executor::Local,
                slurm_args: vec![],
                slurm_tasks: 4,
            })
        );
        let slurm = parse(&[
            "--executor",
            "slurm",
            "--slurm-arg=--partition=cpu",
            "--slurm-arg",
            "--time=1:00:00",
            "--slurm-tasks",
            "8",
        ])
        .expect("parses");
        assert!(slurm.on_slurm());
        assert_eq!(slurm.slurm_args, ["--partition=cpu", "--time=1:00:00"]);
        assert_eq!(slurm.slurm_tasks, 8);
        assert_eq!(
            parse(&["--slurm-tasks", "0"]),
            Err(clap::error::ErrorKind::ValueValidation)
        );
        assert_eq!(
            parse(&["--executor", "kubernetes"]),
            Err(clap::error::ErrorKind::InvalidValue)
        );
    }

    #[test]
    fn slurm_arguments_without_slurm_are_refused() {
        let local = parse(&["--slurm-arg=--partition=cpu"]).expect("parses");
        let error = local.check_local().expect_err("refused");
        assert_eq!(
            error.to_string(),
            "invalid value '--partition=cpu' for '--slurm-arg': only used with --executor slurm"
        );
        assert!(parse(&[]).expect("parses").check_local().is_ok());
    }
}
