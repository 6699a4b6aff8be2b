//! The SWE-bench data model, in one place for every swerve tool: dataset rows ([`dataset`]),
//! predictions ([`predictions`]), grading a test log into the per-instance report
//! ([`grading`], with swerve's hardened reading in [`hardened`]) and the report files, byte for
//! byte as SWE-bench 5 writes them ([`report`], through [`pyjson`]: Python's `json.dumps`,
//! which the trainer's chat templates use too); what `--dataset` names ([`names`]) and the
//! bundled dataset `swerve-mini` ([`bundled`]).
//!
//! `harness` evaluates with it and `trainer` reads rows and writes predictions with it. Not
//! here: parsing logs (`swerve-log-parsers`, which also owns the test-status types), running
//! containers (`swerve-sandbox`), plugins (`swerve-host`) or anything that needs Docker.

pub mod bundled;
pub mod dataset;
pub mod grading;
pub mod hardened;
pub mod names;
pub mod predictions;
pub mod pyjson;
mod pyliteral;
pub mod report;
pub mod task_repo;

pub use dataset::{InstallConfig, Instance, TaskFormat};
pub use predictions::Prediction;
