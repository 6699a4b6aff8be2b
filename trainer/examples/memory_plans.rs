//! The memory plan (`swerve_trainer::train::plan`) of a GRPO run of the Qwen2.5 shapes on one
//! GPU, before and after the memory changes, as the table in `docs/benchmarks.md`.
//!
//! ```text
//! cargo run --release -p swerve-trainer --example memory_plans
//! ```
//!
//! "Before" is what the trainer held until then: a copy of the initial weights whatever β, every
//! layer's activations, the whole LM head's logits. "After" is the default now: no reference at
//! β = 0, gradient checkpointing, the LM head in chunks. Micro-batches of `rows × tokens`, half
//! of them completion; generation of the same rows and length; f32 throughout; dfdx's own
//! operations (what CUDA runs).

use serde_json::json;
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::model::{KernelMode, ModelConfig};
use swerve_trainer::train::plan::PlanInputs;

/// A Qwen2.5 config.json's shape: name, hidden, intermediate, layers, heads, kv heads, vocab,
/// tied embeddings.
type Shape = (&'static str, usize, usize, usize, usize, usize, usize, bool);

const SHAPES: [Shape; 4] = [
    ("Qwen2.5-0.5B", 896, 4864, 24, 14, 2, 151_936, true),
    ("Qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 151_936, true),
    ("Qwen2.5-3B", 2048, 11008, 36, 16, 2, 151_936, true),
    ("Qwen2.5-7B", 3584, 18944, 28, 28, 4, 152_064, false),
];

/// One H200 as the device tool reports it.
const DEVICE_GIB: f64 = 139.0;

fn main() -> anyhow::Result<()> {
    println!("| model | rows × tokens | before GiB | after GiB | fits {DEVICE_GIB} GiB (after) |");
    println!("|---|---|---|---|---|");
    for (name, hidden, inter, layers, heads, kv, vocab, tied) in SHAPES {
        let model = ModelConfig::from_json(json!({
            "model_type": "qwen2", "vocab_size": vocab, "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "rms_norm_eps": 1e-6,
            "rope_theta": 1_000_000.0, "tie_word_embeddings": tied
        }))?;
        for (rows, tokens) in [(8, 1024), (1, 4096), (8, 4096)] {
            let inputs = |after: bool| PlanInputs {
                model: model.clone(),
                device: DeviceSpec::Cuda(0),
                kernels: KernelMode::Reference,
                rows,
                seq: tokens,
                completion: tokens / 2,
                gradient_checkpointing: after,
                logits_chunk_rows: if after { 0 } else { usize::MAX / 2 },
                reference: !after,
                generation: Some((rows, tokens)),
            };
            let gib = |after: bool| inputs(after).plan().peak as f64 / (1u64 << 30) as f64;
            let (before, after) = (gib(false), gib(true));
            println!(
                "| {name} | {rows} × {tokens} | {before:.1} | {after:.1} | {} |",
                if after <= DEVICE_GIB { "yes" } else { "no" }
            );
        }
    }
    Ok(())
}
