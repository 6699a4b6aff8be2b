//! `cargo run -p swerve-tests --example tiny-chat-model -- DIR`: a tiny random-weight Qwen2
//! checkpoint with a chat template, written to `DIR/tiny-chat` (its path printed), for serving
//! (`trainer serve`) in the agent tests and benchmarks (`benches/harness/agent.sh`).

use std::path::{Path, PathBuf};

use dfdx::prelude::Cpu;
use serde_json::{Value, json};
use swerve_trainer::model::{CausalLm, ModelConfig, ModelParams};

#[cfg_attr(test, allow(dead_code))]
fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .expect("usage: tiny-chat-model DIR");
    println!("{}", chat_model(&dir).display());
}

/// A tiny random-weight Qwen2 checkpoint with the project's tokenizer, Qwen2.5's chat template
/// (it shows tools and takes tool calls) and a 4,096-token context, written to `dir`.
pub(crate) fn chat_model(dir: &Path) -> PathBuf {
    let trainer = swerve_tests::repo_root().join("trainer");
    let mut config: Value = serde_json::from_str(
        &fs_err::read_to_string(trainer.join("assets/tiny/config.json")).expect("config"),
    )
    .expect("json");
    config["max_position_embeddings"] = json!(4096);
    let config = ModelConfig::from_json(config).expect("model config");
    let dev = Cpu::default();
    let model: CausalLm<f32, Cpu> =
        CausalLm::new(config.clone(), ModelParams::random(&config, &dev, 7, 0.02));
    let model_dir = dir.join("tiny-chat");
    swerve_trainer::checkpoint::save(
        &model_dir,
        &model,
        Some(&trainer.join("assets/tiny/tokenizer.json")),
        None,
        None,
    )
    .expect("checkpoint");
    let qwen: Value = serde_json::from_str(
        &fs_err::read_to_string(
            trainer.join("tests/data/chat_templates/qwen2.5-instruct/tokenizer_config.json"),
        )
        .expect("template fixture"),
    )
    .expect("json");
    let tokenizer_config = json!({
        "chat_template": qwen["chat_template"],
        "eos_token": "<|endoftext|>",
        "pad_token": "<|pad|>",
    });
    fs_err::write(
        model_dir.join("tokenizer_config.json"),
        tokenizer_config.to_string(),
    )
    .expect("tokenizer_config.json");
    model_dir
}
