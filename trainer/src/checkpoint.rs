//! Checkpoints in Hugging Face layout, resumable.
//!
//! A checkpoint directory holds what `transformers` loads (`config.json`, `model.safetensors`
//! in f32, `tokenizer.json`, `tokenizer_config.json` and `chat_template.jinja` when given) plus,
//! for a training run, swerve's resume state: `optimizer.safetensors` (AdamW moments as
//! `<param>.exp_avg` / `<param>.exp_avg_sq`) and one file, `swerve_run_state.json`, with where
//! the run stands ([`RunState`]), the optimiser's step and its AdamW settings. The directory is
//! written under a temporary name and renamed into place, so an interrupted save never leaves a
//! half-written checkpoint under the final name, and the previous checkpoint of that name stays
//! until the new one is whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dfdx::prelude::{Device, Dtype, HasShape, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{CheckpointProblem, Error, IoOp, Result};
use crate::model::params::{Moments, Param};
use crate::model::safetensors_io::{self, HostTensor};
use crate::model::{AdamW, AdamWConfig, CausalLm, ModelParams};
use crate::train::driver::RunError;

/// Optimiser moments file.
pub(crate) const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The resume state file: [`RunState`] with the optimiser's step and settings.
pub const RUN_STATE_FILE: &str = "swerve_run_state.json";
/// The resume file of checkpoints of earlier swerve versions (and the Hugging Face Trainer's own
/// file, of another schema).
pub(crate) const EARLIER_STATE_FILE: &str = "trainer_state.json";
/// Tokenizer files copied into a checkpoint when present next to the given `tokenizer.json`
/// (the chat template too, so that `--prompt-format template` works on a checkpoint).
const TOKENIZER_FILES: [&str; 3] = [
    "tokenizer.json",
    crate::prompt::chat_template::CONFIG_FILE,
    crate::prompt::chat_template::JINJA_FILE,
];

/// Where a training run stands: with the seed, it fixes everything the run does next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The data-parallel ranks the run trains on (the global batch is the per-device batch
    /// times this); 1 in checkpoints written before ranks existed.
    #[serde(default = "one_rank")]
    pub num_processes: u64,
    /// GRPO's adaptive entropy bonus (`use_adaptive_entropy`): the coefficient now, when the
    /// controller has moved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy_coef: Option<f64>,
    /// The adaptive controller's last measured entropy (unset: none measured yet, +∞ in TRL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_world_entropy: Option<f64>,
    /// What the run trains on, where it writes and with which settings, so that `--resume`
    /// refuses another run's checkpoint or a conflicting setting (unset in checkpoints written
    /// before runs recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RunOrigin>,
}

/// A run's identity ([`RunState::origin`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOrigin {
    /// The training data as given on the command line (absolute).
    pub data: PathBuf,
    /// SHA-256 of the examples or tasks the run read, as JSON: the data's content, wherever it
    /// lives.
    pub data_sha256: String,
    /// The output folder (absolute).
    pub output: PathBuf,
    /// The settings the run was given: the settings file's table with the `--set` overrides
    /// (keys left out take their defaults).
    pub settings: toml::Table,
}

fn one_rank() -> u64 {
    1
}

impl Default for RunState {
    fn default() -> Self {
        Self {
            kind: String::new(),
            step: 0,
            micro_step: 0,
            generation: 0,
            num_tokens: 0,
            total_steps: 0,
            num_processes: one_rank(),
            entropy_coef: None,
            origin: None,
            last_world_entropy: None,
        }
    }
}

impl RunState {
    /// Refuses to continue this state on `ranks` ranks when it was written by another number:
    /// the global batch and each rank's place in the data depend on it.
    pub(crate) fn check_ranks(&self, ranks: usize) -> crate::error::Result<()> {
        if self.num_processes == ranks as u64 {
            return Ok(());
        }
        Err(Error::Run(RunError::OtherRanks {
            written: self.num_processes,
            ranks,
        }))
    }
}

/// `swerve_run_state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ResumeFile {
    #[serde(flatten)]
    run: RunState,
    /// AdamW's own step count (bias correction).
    optimizer_step: u64,
    /// AdamW settings in force.
    adamw: AdamWConfig,
}

/// What a training checkpoint restores: the model, its optimiser and the run state.
pub(crate) type Resumed<D> = (CausalLm<f32, D>, AdamW<f32, D>, RunState);

/// The folder of a checkpoint that holds the run's reference model's weights, when the run
/// changes them (GRPO's `sync_ref_model`).
pub const REFERENCE_DIR: &str = "reference";

/// Writes `model` (and, for resuming a run, its optimiser and run state, and the reference
/// weights when the run changes them) to `dir` in Hugging Face layout, copying the tokenizer
/// files from the directory of `tokenizer_json` when given. Replaces `dir` if it exists, only
/// once the new checkpoint is whole.
pub fn save<E: Dtype, D: Device<E>>(
    dir: &Path,
    model: &CausalLm<E, D>,
    tokenizer_json: Option<&Path>,
    resume: Option<(&AdamW<E, D>, &RunState)>,
    reference: Option<&ModelParams<E, D>>,
) -> Result<()> {
    let partial = sibling(dir, "partial");
    if partial.exists() {
        fs_err::remove_dir_all(&partial).map_err(|e| Error::io(IoOp::Remove, &partial, e))?;
    }
    fs_err::create_dir_all(&partial).map_err(|e| Error::io(IoOp::CreateDir, &partial, e))?;
    let config =
        serde_json::to_string_pretty(&model.config.to_json()).expect("JSON values serialise");
    let config_path = partial.join("config.json");
    fs_err::write(&config_path, config).map_err(|e| Error::io(IoOp::Write, &config_path, e))?;
    safetensors_io::save_params(&model.params, &partial.join(safetensors_io::SINGLE_FILE))?;
    if let Some(tok) = tokenizer_json {
        let src_dir = tok.parent().unwrap_or(Path::new("."));
        fs_err::copy(tok, partial.join("tokenizer.json"))
            .map_err(|e| Error::io(IoOp::Copy, tok, e))?;
        for name in &TOKENIZER_FILES[1..] {
            let src = src_dir.join(name);
            if src.exists() {
                fs_err::copy(&src, partial.join(name))
                    .map_err(|e| Error::io(IoOp::Copy, &src, e))?;
            }
        }
    }
    if let Some(reference) = reference {
        let folder = partial.join(REFERENCE_DIR);
        fs_err::create_dir_all(&folder).map_err(|e| Error::io(IoOp::CreateDir, &folder, e))?;
        safetensors_io::save_params(reference, &folder.join(safetensors_io::SINGLE_FILE))?;
    }
    if let Some((opt, run)) = resume {
        let mut tensors = BTreeMap::new();
        for (name, moments) in &opt.moments {
            let (m, v) = match moments {
                Moments::Vector(m, v) => (host(m), host(v)),
                Moments::Matrix(m, v) => (host(m), host(v)),
                Moments::Host { shape, m, v } => {
                    let f32s = |x: &[E]| x.iter().map(|x| x.to_f32().unwrap_or(f32::NAN)).collect();
                    (
                        HostTensor {
                            shape: shape.clone(),
                            data: f32s(m),
                        },
                        HostTensor {
                            shape: shape.clone(),
                            data: f32s(v),
                        },
                    )
                }
            };
            tensors.insert(format!("{name}.exp_avg"), m);
            tensors.insert(format!("{name}.exp_avg_sq"), v);
        }
        safetensors_io::write_tensors(&tensors, &partial.join(OPTIMIZER_FILE))?;
        let state = ResumeFile {
            run: run.clone(),
            optimizer_step: opt.step,
            adamw: opt.config,
        };
        let path = partial.join(RUN_STATE_FILE);
        let text = serde_json::to_string_pretty(&state).expect("run state serialises");
        fs_err::write(&path, text).map_err(|e| Error::io(IoOp::Write, &path, e))?;
    }
    let old = sibling(dir, "old");
    if dir.exists() {
        fs_err::rename(dir, &old).map_err(|e| Error::io(IoOp::Rename, dir, e))?;
    }
    fs_err::rename(&partial, dir).map_err(|e| Error::io(IoOp::Rename, &partial, e))?;
    if old.exists() {
        fs_err::remove_dir_all(&old).map_err(|e| Error::io(IoOp::Remove, &old, e))?;
    }
    Ok(())
}

/// A loaded checkpoint.
#[derive(Debug)]
pub struct Loaded<E: Dtype, D: Device<E>> {
    /// The model.
    pub model: CausalLm<E, D>,
    /// The optimiser and where the run stood, when the checkpoint holds resume state.
    pub resume: Option<(AdamW<E, D>, RunState)>,
}

/// Loads a checkpoint to resume a run from: the model, its optimiser and the run state; a
/// checkpoint without resume state (an exported model) is an error naming the folder.
pub fn load_resumable<D: Device<f32>>(dir: &Path, dev: &D) -> Result<Resumed<D>> {
    let loaded = load(dir, dev)?;
    let (optimizer, run) = loaded.resume.ok_or_else(|| Error::Checkpoint {
        path: dir.to_path_buf(),
        problem: CheckpointProblem::NoRunState,
    })?;
    Ok((loaded.model, optimizer, run))
}

/// Loads a checkpoint: the model, and the optimiser when the directory has resume state.
pub fn load<E: Dtype, D: Device<E>>(dir: &Path, dev: &D) -> Result<Loaded<E, D>> {
    let model = CausalLm::load(dir, dev)?;
    let state_path = dir.join(RUN_STATE_FILE);
    let earlier = || Error::Checkpoint {
        path: dir.to_path_buf(),
        problem: CheckpointProblem::EarlierRunState,
    };
    let has_earlier = dir.join(EARLIER_STATE_FILE).exists();
    if !state_path.exists() {
        if has_earlier {
            return Err(earlier());
        }
        return Ok(Loaded {
            model,
            resume: None,
        });
    }
    let text =
        fs_err::read_to_string(&state_path).map_err(|e| Error::io(IoOp::Read, &state_path, e))?;
    let state: ResumeFile = serde_json::from_str(&text).map_err(|source| {
        if has_earlier {
            earlier()
        } else {
            Error::Json {
                path: state_path.clone(),
                source,
            }
        }
    })?;
    let mut stored = safetensors_io::read_tensors(&dir.join(OPTIMIZER_FILE), None)?;
    let mut opt = AdamW::new(state.adamw);
    opt.step = state.optimizer_step;
    let present: std::collections::BTreeSet<String> = stored.keys().cloned().collect();
    let mut take = |name: &str, shape: Vec<usize>| -> Result<Vec<E>> {
        let t = stored.remove(name).ok_or_else(|| Error::Checkpoint {
            path: dir.to_path_buf(),
            problem: CheckpointProblem::MissingMoments(name.to_owned()),
        })?;
        if t.shape != shape {
            return Err(Error::TensorShape {
                name: name.to_owned(),
                expected: shape,
                found: t.shape,
            });
        }
        Ok(t.data
            .into_iter()
            .map(|x| E::from_f32(x).expect("f32 converts"))
            .collect())
    };
    for (name, p) in model.params.named() {
        if !present.contains(&format!("{name}.exp_avg")) {
            continue;
        }
        // A parameter without moments was never stepped; AdamW creates them lazily.
        let moments = match p {
            Param::Vector(t) => {
                let shape = *t.shape();
                let m = take(&format!("{name}.exp_avg"), vec![shape.0])?;
                let v = take(&format!("{name}.exp_avg_sq"), vec![shape.0])?;
                Moments::Vector(dev.tensor_from_vec(m, shape), dev.tensor_from_vec(v, shape))
            }
            Param::Matrix(t) => {
                let shape = *t.shape();
                let m = take(&format!("{name}.exp_avg"), vec![shape.0, shape.1])?;
                let v = take(&format!("{name}.exp_avg_sq"), vec![shape.0, shape.1])?;
                Moments::Matrix(dev.tensor_from_vec(m, shape), dev.tensor_from_vec(v, shape))
            }
        };
        opt.moments.insert(name, moments);
    }
    Ok(Loaded {
        model,
        resume: Some((opt, state.run)),
    })
}

fn host<S: dfdx::prelude::Shape, E: Dtype, D: Device<E>>(t: &Tensor<S, E, D>) -> HostTensor {
    HostTensor {
        shape: t.shape().concrete().into_iter().collect(),
        data: t
            .as_vec()
            .into_iter()
            .map(|x| x.to_f32().unwrap_or(f32::NAN))
            .collect(),
    }
}

fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}
