//! trainer's integration tests, one binary (one link of everything they use): a module per
//! area.

mod chat_templates;
mod cli;
mod grpo_worked_example;
mod model_gradcheck;
mod model_kernels;
mod model_logits;
mod model_memory;
mod model_optim;
mod ranks;
mod relocatable;
mod sampling_trl;
mod tokenizer_asset;
mod train_objective;
mod train_reporting;
mod train_runs;
