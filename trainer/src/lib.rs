//! swerve's trainer: GRPO reinforcement learning for software-engineering agents.
//!
//! [`grpo`] holds the objective as exact, tested `f64` math (reward aggregation, advantages, the
//! per-token loss and its normalisations, metrics and the worked-example case files); [`cli`]
//! holds the library side of the `trainer` subcommands.
//!
//! The policy model lives in [`model`]: a Llama/Qwen2-family causal LM on dfdx with weights
//! shaped at run time from a Hugging Face `config.json`, loaded from safetensors, with
//! [`tokenizer`], batched KV-cache sampling in [`generate`] and resumable Hugging Face-layout
//! [`checkpoint`]s. On the CPU its layers run as fused kernels recorded on dfdx's tape
//! ([`model::kernels`]); [`runtime::init`] sets up the allocator and thread pool they need. It
//! is not an inference server (one process, one device, no paged cache)
//! and not a general model zoo: other architectures, RoPE scaling and quantised weights are
//! rejected with an [`error::Error`] naming the config field.

pub mod chat_template;
pub mod checkpoint;
pub mod cli;
pub mod error;
pub mod generate;
pub mod grpo;
pub mod model;
pub mod prompt;
pub mod retrieve;
pub mod runtime;
pub mod tokenizer;
pub mod train;
