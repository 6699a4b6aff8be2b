//! swerve's evaluation harness as a library: `harness run` (SWE-bench's run_evaluation on the
//! Docker sandbox, and single executions for execution rewards), scoring completions with reward
//! plugins (`harness reward`), plugin tooling (`harness plugin ...`), images per dataset row, the
//! SWE-bench 5 row export and the HTML page of a run.
//!
//! The public surface:
//! - [`execution`], what other crates drive: single executions of a patch against a dataset
//!   row ([`execution::PatchExecutor`], locally or on Slurm), the dataset and environment types
//!   they run on, and the run's error type. The trainer and `curate validate` use this module
//!   only.
//! - [`run`]: `harness run` over a whole dataset and its report, for the binary and end-to-end
//!   tests.
//! - One module per remaining command of the `harness` binary: [`scoring`] (`harness reward`),
//!   [`scaffold`] (`harness plugin new`), [`export`] (`harness dataset export`), [`harbor`]
//!   (its Harbor task folders), [`html`] (a run's HTML page), with [`HarnessError`].
//!
//! The `harness` binary is a thin layer over this crate. Not here: the SWE-bench data model
//! (rows, predictions, grading, report files: `swerve-swebench`), running plugins
//! (`swerve-host`), log parsing (`swerve-log-parsers`) and containers (`swerve-sandbox`).

pub mod agent;
mod error;
pub mod execution;
pub mod export;
pub mod harbor;
pub mod html;
mod images;
pub mod run;
pub mod scaffold;
pub mod scoring;

pub use error::HarnessError;
