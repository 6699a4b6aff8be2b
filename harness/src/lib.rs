//! swerve's evaluation harness as a library: `harness run` (SWE-bench's run_evaluation on the
//! Docker sandbox, and single executions for execution rewards), scoring completions with reward
//! plugins (`harness reward`), plugin tooling (`harness plugin ...`), images per dataset row, the
//! SWE-bench 5 row export and the HTML page of a run.
//!
//! The `harness` binary is a thin layer over this crate. Not here: the SWE-bench data model
//! (rows, predictions, grading, report files: `swerve-swebench`), running plugins
//! (`swerve-host`), log parsing (`swerve-log-parsers`) and containers (`swerve-sandbox`).

pub mod error;
pub mod export;
pub mod html;
pub mod images;
pub mod run;
pub mod scaffold;
pub mod scoring;

pub use error::HarnessError;
