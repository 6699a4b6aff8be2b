//! swerve's evaluation harness as a library: scoring completions with reward plugins
//! (`harness reward`), plugin tooling (`harness plugin ...`), SWE-bench dataset rows, v5
//! grading and the report files, byte-compatible with the Python harness.
//!
//! The `harness` binary is a thin layer over this crate. Not here: running plugins (the
//! `swerve-host` crate), log parsing (`swerve-log-parsers`) and containers (`swerve-sandbox`).

pub mod dataset;
pub mod error;
pub mod export;
pub mod grading;
pub mod images;
pub mod plugin_spec;
pub mod predictions;
pub mod report;
pub mod run;
pub mod scaffold;
pub mod scoring;

pub use error::HarnessError;
