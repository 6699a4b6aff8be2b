//! swerve's model against Hugging Face `transformers` on a random-weight checkpoint of a real
//! model's shape (`trainer/scripts/make_real_shape.py` writes it with its reference logits;
//! `trainer/scripts/real-shape-check.sh` runs both).
//!
//! ```text
//! cargo run --release -p swerve-trainer --example real_shape -- DIR
//! ```
//!
//! Loads `DIR` (config.json, safetensors) on the CPU, runs the reference's token ids (two rows,
//! no padding) through the model and compares the last position's logits over the whole
//! vocabulary and every position's log-sum-exp with transformers' float32 forward. Prints the
//! largest differences and exits non-zero when one exceeds 1e-3 (float32 through 24 layers;
//! the two sum in different orders).

use std::path::PathBuf;

use anyhow::{Context, bail};
use dfdx::prelude::*;
use serde_json::Value;
use swerve_trainer::model::{CausalLm, TokenBatch};

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).context("usage: real_shape DIR")?);
    swerve_trainer::runtime::init()?;
    let text = std::fs::read_to_string(dir.join("reference.json"))
        .with_context(|| format!("{}/reference.json", dir.display()))?;
    let reference: Value = serde_json::from_str(&text)?;
    let rows: Vec<Vec<u32>> = serde_json::from_value(reference["input_ids"].clone())?;
    let last: Vec<Vec<f32>> = serde_json::from_value(reference["last_logits"].clone())?;
    let lse: Vec<Vec<f32>> = serde_json::from_value(reference["logsumexp"].clone())?;
    let started = std::time::Instant::now();
    let model = CausalLm::<f32, Cpu>::load(&dir, &Cpu::default())?;
    let loaded = started.elapsed().as_secs_f64();
    let (b, s, v) = (rows.len(), rows[0].len(), model.config.vocab_size);
    let batch = TokenBatch::new(rows.concat(), vec![true; b * s], b, s)?;
    let logits = model.logits(&batch).as_vec();
    let (mut last_diff, mut lse_diff, mut scale) = (0f32, 0f32, 0f32);
    for r in 0..b {
        for p in 0..s {
            let row = &logits[(r * s + p) * v..][..v];
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f64 = row.iter().map(|&x| f64::from(x - max).exp()).sum();
            let ours = max + sum.ln() as f32;
            lse_diff = lse_diff.max((ours - lse[r][p]).abs());
            if p == s - 1 {
                for (a, e) in row.iter().zip(&last[r]) {
                    last_diff = last_diff.max((a - e).abs());
                    scale = scale.max(e.abs());
                }
            }
        }
    }
    println!(
        "{}: {} parameters, loaded in {loaded:.1} s; last-position logits (|max| {scale:.3}): \
         max |diff| {last_diff:.2e}; log-sum-exp of every position: max |diff| {lse_diff:.2e}",
        reference["shape"].as_str().unwrap_or("?"),
        model.params.num_parameters(),
    );
    if last_diff > 1e-3 || lse_diff > 1e-3 {
        bail!("logits differ from transformers' beyond 1e-3");
    }
    Ok(())
}
