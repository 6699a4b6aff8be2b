//! swerve's trainer: GRPO reinforcement learning for software-engineering agents.
//!
//! Modules by what they hold:
//! - [`commands`]: the library side of the `trainer` subcommands (typed arguments in, files out);
//! - [`train`]: the training loops, SFT and GRPO, with their batches, schedules and rewards
//!   (plugins, executions);
//! - [`grpo`]: the GRPO objective as exact, tested `f64` math with TRL's names (config, reward
//!   aggregation, advantages, the loss types and their normalisations, metrics, worked-case
//!   files), which the loop's tensor objective follows;
//! - [`predict`]: SWE-bench predictions, and contexts retrieved from a repository for rows that
//!   carry none;
//! - [`report`]: the metrics log, TensorBoard event files and plots of a run;
//! - [`data`] (task rows and SFT examples) and [`prompt`] (prompts, chat templates);
//! - [`ranks`]: data-parallel ranks (`mpirun`/`srun -n N`) and their collectives over MPI or
//!   NCCL, through which the loops make N processes train as one with the same global batch;
//! - [`device`]: `--device cpu|cuda[:N]`, the one place a flag becomes a dfdx device (every
//!   command is generic over it), and [`train::plan`], the memory plan a run checks first;
//! - the model: [`model`], a Llama/Qwen2-family causal LM on dfdx with weights shaped at run
//!   time from a Hugging Face `config.json`, loaded from safetensors, with [`tokenizer`],
//!   batched KV-cache sampling in [`generate`] and Hugging Face-layout [`checkpoint`]s (which
//!   also hold what resumes a run). On the
//!   CPU its layers run as fused kernels recorded on dfdx's tape ([`model::kernels`]);
//!   [`runtime::init`] sets up the allocator and thread pool they need.
//!
//! It is not an inference server (no paged cache), nor a scheduler of its own (ranks come from
//! Slurm or `mpirun`), and not a general
//! model zoo: other architectures, RoPE scaling and quantised weights are rejected with an
//! [`error::Error`] naming the config field.

#[cfg(feature = "execute")]
pub mod agent;
pub mod checkpoint;
pub mod commands;
pub mod data;
pub mod device;
pub mod error;
pub mod generate;
pub mod grpo;
pub mod model;
pub mod predict;
pub mod prompt;
pub mod ranks;
pub mod report;
pub mod runtime;
#[cfg(feature = "serve")]
pub mod serve;
pub mod tokenizer;
pub mod train;
