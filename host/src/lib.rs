//! The swerve plugin host: runs untrusted reward and evaluator plugins (WebAssembly components
//! of the `swerve:plugin@0.1.0` worlds, `wit/plugin.wit`) with wasmtime, under deterministic
//! budgets, and turns whatever they do into classified outcomes.
//!
//! What it guarantees: a plugin gets no files, no network, no environment, fixed clocks and
//! fixed "random" bytes; it runs under fuel (deterministic), a memory cap, a wasm stack cap and
//! a wall-clock backstop; every failure is classified (`timeout`, `out_of_memory`, `trap`,
//! `plugin_error`, `invalid_plugin`) with the plugin's output tail; every string and list a
//! plugin returns is capped ([`limits`]); an instance that failed is never called again (a
//! store lives for one batch or one sample). Plugins are compiled once (in-memory and on-disk
//! precompile caches, the latter in swerve's cache folder of `swerve-cache`) and shared across
//! worker threads.
//!
//! It also owns what every binary needs to name a plugin: `--plugin` arguments
//! (`plugin_spec`) and the bundled plugins embedded in the binary ([`bundled`]).
//!
//! What it is not: it does not parse JSONL or print anything (the `harness` does), and it runs
//! no containers (the `sandbox` does). wasmtime types stay inside.

mod bindings;
mod budget;
pub mod bundled;
mod cache;
mod combine;
mod engine;
mod error;
mod evaluator;
pub mod limits;
mod outcome;
mod plugin;
mod plugin_spec;
mod reward;
mod scorer;
mod store;
mod types;
mod wasi;

pub use budget::{BudgetOverrides, Budgets};
pub use cache::default_precompile_dir;
pub use combine::{combine, effective_reward};
pub use engine::{EPOCH_TICK, MAX_WASM_STACK_BYTES};
pub use error::HostError;
pub use evaluator::EvaluatorPlugin;
pub use outcome::{Failure, FailureClass, Fallbacks};
pub use plugin::{ALLOWED_IMPORTS, Host, HostConfig, PluginReport, World};
pub use plugin_spec::{PluginSpec, PluginSpecError};
pub use reward::{Isolation, RewardPlugin, SampleOutcome};
pub use scorer::{
    PluginResult, SampleScores, Scorer, ScorerConfig, WORKER_STACK_BYTES, WeightedPlugin,
};
pub use swerve_log_parsers::{Status, StatusMap, TestStatus};
pub use types::{Execution, LogContext, PluginInfo, Sample, Score, TestOutcome};
pub use wasi::FIXED_WALL_CLOCK;
