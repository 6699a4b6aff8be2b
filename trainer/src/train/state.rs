//! Resumable training checkpoints: the Hugging Face layout of [`crate::checkpoint`] (loadable
//! by `trainer generate` and `transformers`) plus [`RunState`], the counters that, with the
//! seed, fix everything a run does next. A checkpoint is staged under a temporary name and
//! renamed into place, so an interrupted save leaves the previous checkpoint intact.

use std::path::{Path, PathBuf};

use dfdx::prelude::Device;
use serde::{Deserialize, Serialize};

use crate::checkpoint;
use crate::error::{Error, Result};
use crate::model::{AdamW, CausalLm};

/// The run-state file inside a checkpoint.
pub const RUN_STATE_FILE: &str = "swerve_run_state.json";

/// Where a run stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// `sft` or `grpo`.
    pub kind: String,
    /// Optimiser steps taken.
    pub step: u64,
    /// Micro-batches processed.
    pub micro_step: u64,
    /// Generation batches sampled (GRPO).
    pub generation: u64,
    /// Prompt and completion tokens seen (`num_tokens`).
    pub num_tokens: u64,
    /// The steps the run is planned for (the schedule depends on it).
    pub total_steps: u64,
}

/// Writes a checkpoint of `model`, `optimizer` and `state` to `dir` (replacing it).
pub fn save<D: Device<f32>>(
    dir: &Path,
    model: &CausalLm<f32, D>,
    tokenizer_json: Option<&Path>,
    optimizer: &AdamW<f32, D>,
    state: &RunState,
) -> Result<()> {
    let staging = with_suffix(dir, "staging");
    checkpoint::save(&staging, model, tokenizer_json, Some(optimizer))?;
    let path = staging.join(RUN_STATE_FILE);
    let text = serde_json::to_string_pretty(state).expect("run state serialises");
    fs_err::write(&path, text).map_err(|e| Error::io(&path, e))?;
    if dir.exists() {
        fs_err::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    fs_err::rename(&staging, dir).map_err(|e| Error::io(&staging, e))
}

/// What a training checkpoint restores: the model, its optimiser and the run state.
pub type Resumed<D> = (CausalLm<f32, D>, AdamW<f32, D>, RunState);

/// Loads a checkpoint written by [`save`]: the model, its optimiser and the run state.
pub fn load<D: Device<f32>>(dir: &Path, dev: &D) -> Result<Resumed<D>> {
    let loaded = checkpoint::load(dir, dev)?;
    let optimizer = loaded.optimizer.ok_or_else(|| Error::Checkpoint {
        path: dir.to_path_buf(),
        reason: "no optimiser state to resume from".into(),
    })?;
    let path = dir.join(RUN_STATE_FILE);
    let text = fs_err::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let state = serde_json::from_str(&text).map_err(|source| Error::Json { path, source })?;
    Ok((loaded.model, optimizer, state))
}

fn with_suffix(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}
