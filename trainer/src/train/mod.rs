//! The training loops: supervised warm-up ([`sft_loop`]) and GRPO ([`grpo_loop`]) of a
//! [`crate::model::CausalLm`], each an [`Objective`] that the one training driver
//! ([`Trainer`]) runs: steps, gradient accumulation over ranks, AdamW along a
//! [`Schedule`], metrics, checkpoints and resuming, with the [`arguments`] both share.
//!
//! The flow of a GRPO run: [`crate::data`] reads tasks and renders prompts ([`crate::prompt`]);
//! [`grpo_loop`] samples completions ([`crate::generate`]), scores them with [`rewards`] (swerve's
//! reward plugins through `swerve-host`, optionally after an [`rewards::Executor`] ran each
//! patch), computes advantages and the loss with the exact rules of [`crate::grpo`], evaluated
//! on dfdx tensors by [`grpo_objective`] over batches packed by `batch`, and steps AdamW along
//! a [`Schedule`]. Every step appends its metrics to the run's [`crate::report`]; checkpoints
//! that resume a run are [`crate::checkpoint`]'s.

pub mod arguments;
pub(crate) mod batch;
pub(crate) mod driver;
pub mod grpo_loop;
pub mod grpo_objective;
pub(crate) mod origin;
pub mod plan;
pub mod rewards;
mod schedule;
pub mod sft_loop;

pub use driver::{Objective, RunError, StepContext, Trainer};
pub use schedule::Schedule;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dfdx::prelude::Device;

use crate::checkpoint::{self, RunState};
use crate::error::Result;
use crate::model::{AdamW, CausalLm, ModelParams};
use crate::report::metrics_log::{MetricsLog, ReportTo};

/// Where a run writes: its metrics file and its checkpoints.
#[derive(Debug)]
pub struct RunOutput {
    /// The metrics file.
    pub metrics: MetricsLog,
    /// Checkpoints go to `<checkpoint_dir>/checkpoint-<step>`.
    pub checkpoint_dir: PathBuf,
    /// Save every this many steps (0: only at the end).
    pub save_steps: u64,
    /// Copied into every checkpoint, so that it is a complete model directory.
    pub tokenizer_json: Option<PathBuf>,
    /// Whether the command writing this output continues a stopped run with `--resume
    /// <checkpoint>` (`trainer sft`, `trainer grpo`; set by [`RunOutput::in_dir`]): a run a signal
    /// stops then says so. `trainer demo`, which starts over, clears it.
    pub resumed_by_flag: bool,
}

impl RunOutput {
    /// Whether a checkpoint is due after `step`.
    pub fn due(&self, step: u64) -> bool {
        self.save_steps > 0 && step.is_multiple_of(self.save_steps)
    }

    /// The checkpoint directory of `step`.
    pub fn checkpoint_path(&self, step: u64) -> PathBuf {
        checkpoint_path(&self.checkpoint_dir, step)
    }

    /// Saves a checkpoint at the state's step (with the reference weights when the run changes
    /// them).
    pub fn save<D: Device<f32>>(
        &self,
        model: &CausalLm<f32, D>,
        optimizer: &AdamW<f32, D>,
        state: &RunState,
        reference: Option<&ModelParams<f32, D>>,
    ) -> Result<PathBuf> {
        let dir = self.checkpoint_path(state.step);
        checkpoint::save(
            &dir,
            model,
            self.tokenizer_json.as_deref(),
            Some((optimizer, state)),
            reference,
        )?;
        tracing::info!(step = state.step, dir = %dir.display(), "saved checkpoint");
        Ok(dir)
    }

    /// Opens the output of a run in `dir`: `metrics.jsonl` (kept through step `resumed_at`),
    /// the TensorBoard event file when `report_to` says so, and checkpoints beside them.
    pub fn in_dir(
        dir: &Path,
        resumed_at: u64,
        save_steps: u64,
        tokenizer_json: Option<PathBuf>,
        report_to: ReportTo,
    ) -> Result<Self> {
        Ok(Self {
            metrics: MetricsLog::open(&dir.join("metrics.jsonl"), resumed_at, report_to)?,
            checkpoint_dir: dir.to_path_buf(),
            save_steps,
            tokenizer_json,
            resumed_by_flag: true,
        })
    }
}

/// Where a run writing to `dir` puts the checkpoint of `step`: `<dir>/checkpoint-<step>`.
pub fn checkpoint_path(dir: &Path, step: u64) -> PathBuf {
    dir.join(format!("checkpoint-{step}"))
}

/// Metric values recorded during one optimiser step (several micro-batches or generation
/// batches may record the same name); logged as their mean, as TRL logs its metric lists.
#[derive(Debug, Default)]
pub struct MetricsAccumulator {
    values: BTreeMap<String, Vec<f64>>,
}

impl MetricsAccumulator {
    /// Records one value.
    pub fn record(&mut self, name: &str, value: f64) {
        self.values.entry(name.to_owned()).or_default().push(value);
    }

    /// Records every value of a map.
    pub(crate) fn record_all(&mut self, values: BTreeMap<String, f64>) {
        for (name, value) in values {
            self.record(&name, value);
        }
    }

    /// The mean of each metric's values, skipping NaN as TRL's `log` does (NaN when every value
    /// is).
    pub fn means(&self) -> BTreeMap<String, f64> {
        self.values
            .iter()
            .map(|(name, v)| (name.clone(), crate::grpo::stats::nanmean(v)))
            .collect()
    }
}

/// The seed of the `index`-th generator of a `stream` (prompt order, sampling, shuffling) in a
/// run seeded with `seed`: SplitMix64 over the three, so nearby inputs give unrelated seeds.
pub(crate) fn derive_seed(seed: u64, stream: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(index.wrapping_mul(0xD1B5_4A32_D192_ED69));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
