//! A Llama/Qwen2-family causal language model on dfdx with runtime-shaped weights.
//!
//! `config` validates a Hugging Face `config.json`; [`params`] holds the weights by Hugging
//! Face name and the AdamW step; [`forward`] computes training log-probabilities and cached
//! generation logits; `safetensors_io` reads and writes the weights. The model is generic over
//! the dtype `E` (f32 for use, f64 for gradient checks) and the dfdx device `D` (`Cpu`, or
//! `Cuda` with the `cuda` feature).

mod config;
pub mod forward;
pub mod kernels;
pub mod params;
mod recompute;
pub(crate) mod safetensors_io;

pub use config::{Family, ModelConfig};
pub use forward::{CausalLm, KvCache, LOGITS_CHUNK_ELEMENTS, TokenBatch, TokenLogps};
pub use kernels::{KernelMode, Kernels};
pub use params::{AdamW, AdamWConfig, LayerParams, Linear, ModelParams, Param, StepStats};

use std::path::Path;

use dfdx::prelude::{Device, Dtype};

use crate::error::Result;

impl<E: Dtype, D: Device<E>> CausalLm<E, D> {
    /// Loads `config.json` and the safetensors weights (single or sharded) from a Hugging Face
    /// model directory.
    pub fn load(dir: &Path, dev: &D) -> Result<Self> {
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        let params = safetensors_io::load_params(dir, &config, dev)?;
        Ok(Self::new(config, params))
    }
}
