//! `swerve-curate` turns software history into SWE-RL training tasks: it streams GH Archive
//! events, aggregates every pull request, reads its code from a bare mirror (merge base, edited
//! files at the base and the head, the linked issues' text), applies SWE-RL's filters in a fixed
//! order, removes duplicates and benchmark repositories, and writes SWE-bench-style rows that
//! `trainer sft`/`trainer grpo` and the SWE-RL reward read as they are (`tasks.jsonl`), with a
//! reason for every other PR (`rejected.jsonl`) and the funnel (`funnel.json`).
//!
//! `curate validate` (`validate`, feature `validate`, on by default) then makes tasks
//! executable: an environment recipe (`recipe`) from each repository's own files (or, where
//! those give none that installs, from a chat model the user runs: `setup`), and FAIL_TO_PASS /
//! PASS_TO_PASS derived by running the tests before and after the fix through the harness's own
//! execution path. Without the feature the crate is `curate run`'s pure pipeline: no container
//! client, no plugin host (`cargo install --path curate --no-default-features`).
//!
//! It is not a GitHub client (it reads local files and clones only; the optional network calls
//! are to the chat model the user runs for relevant files or recipes, and PyPI while an environment image is built),
//! not a judge of whether an issue describes a bug, and not a second harness: validation runs
//! through `swerve-harness`.
//!
//! Stages, one module each: `events` → `spill` (partitions on disk, so memory stays
//! flat) → `aggregate` → each repository's bare mirror read through `swerve-mirror` (with
//! `paths`, `links`, `relevant`, optionally [`endpoint`]) → `filter` → `dedup` → [`output`] (and `table` for `tasks.parquet`);
//! `decontaminate` holds the excluded repositories; `pipeline` runs the stages (reporting
//! to a [`progress::StageProgress`]) and [`merge`] joins shards.

mod aggregate;
mod config;
mod decontaminate;
mod dedup;
pub mod endpoint;
mod error;
mod events;
mod filter;
mod links;
pub mod merge;
pub mod output;
mod paths;
mod pipeline;
pub mod progress;
#[cfg(feature = "validate")]
mod recipe;
mod relevant;
#[cfg(feature = "validate")]
mod setup;
mod spill;
mod table;
#[cfg(feature = "validate")]
pub mod validate;

pub use config::{Config, Shard};
pub use error::CurateError;
pub use events::InputProblem;
pub use filter::Reason;
pub use output::{Funnel, Output, Rejected, Row, Task};
pub use pipeline::{Inputs, run};
