//! What other crates drive: single executions of a patch against a dataset row, here or on a
//! Slurm cluster, exactly as `harness run` evaluates a prediction (same image, eval script,
//! patch-apply chain, hardened mode and evaluator plugin), with a typed outcome instead of a
//! run report. The trainer's execution rewards and `curate validate` go through this module
//! only; how a run evaluates an instance stays inside the crate.
//!
//! - Executions: a [`PatchExecutor`] made from a [`DatasetSource`] and an [`ExecuteConfig`]
//!   ([`Mode`]: hardened, compatible or strict) runs (instance, patch) pairs with at most its
//!   `workers` containers at once; [`PatchExecutor::submit`] returns a [`Pending`] at once, and
//!   every execution ends as an [`ExecutionOutcome`] (graded: a [`GradedExecution`]). Identical
//!   work runs once per executor; infrastructure failures are retried, never cached.
//!   [`PatchExecutor::prepare`] makes a row's image and reports a [`PrepareFailure`] that tells
//!   the row's install failures from swerve's.
//! - On Slurm: [`SlurmExecutions`] with a [`RemoteConfig`] (a [`Placement`] and a shared
//!   folder) runs each batch as one job array whose tasks are a binary's hidden `execute-task`
//!   subcommand, which calls [`serve_from_env`].
//! - Datasets: [`DatasetSource::resolve`] reads what `--dataset` names (rows, their
//!   [`Environments`] of [`RepoEnv`] specs, repository sources), or a SWE-bench 5 task
//!   repository ([`DatasetSource::resolve_task_repo`]); a failure is a [`SourceError`].
//! - Environment specs and eval scripts, as `curate validate` writes them: [`RepoEnv`] with its
//!   [`Lines`] and [`TestCmd`], the base images' [`PYTHONS`], the stable image names
//!   ([`stable_image_name`] on [`swebench_arch`]), what making an image took ([`ImageTiming`];
//!   [`build_images`] for `harness images build`, failing with an [`ImagesError`]), the
//!   generated eval script ([`script_from_spec`]) and v5's exit-code lines ([`with_exit_code`]),
//!   the files a patch touches ([`diff_paths`]).
//! - Errors: what could not go on is a [`RunError`]; [`error_chain`] puts an error and its
//!   causes on one line, as run logs and reports say them.

pub use crate::images::{
    Environments, ImageTiming, ImagesError, Lines, PYTHONS, RepoEnv, TestCmd, build_images,
    stable_image_name, swebench_arch,
};
pub use crate::run::error::{RunError, error_chain};
pub use crate::run::eval_script::{diff_paths, script_from_spec, with_exit_code};
pub use crate::run::execute::{
    ExecuteConfig, ExecutionOutcome, GradedExecution, PatchExecutor, Pending, PrepareFailure,
};
pub use crate::run::instance::Mode;
pub use crate::run::remote::{Placement, RemoteConfig, SlurmExecutions, serve_from_env};
pub use crate::run::source::{DatasetSource, SourceError};
