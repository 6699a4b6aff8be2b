//! The memory changes of the training forward pass against the plain one: recomputing each
//! decoder layer in the backward pass (`gradient_checkpointing`) and the chunked LM head and
//! log-softmax give the same log-probabilities, entropies and parameter gradients, on the
//! fused CPU kernels and on dfdx's own operations (`KernelMode::Reference`, what CUDA runs).

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::model::{CausalLm, KernelMode, ModelConfig, ModelParams, Param, TokenBatch};

fn config(tied: bool) -> ModelConfig {
    ModelConfig::from_json(json!({
        "model_type": "qwen2", "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": tied
    }))
    .unwrap()
}

/// Two rows of 40 tokens, the second left-padded by 9; completions start at 25.
fn batch() -> (TokenBatch, usize) {
    let (rows, cols) = (2, 40);
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    for (r, pad) in [0usize, 9].into_iter().enumerate() {
        for c in 0..cols {
            ids.push(((r * 131 + c * 17 + c * c) % 61) as u32);
            mask.push(c >= pad);
        }
    }
    (TokenBatch::new(ids, mask, rows, cols).unwrap(), 25)
}

/// Log-probabilities, entropies and every parameter's gradient by name, after two micro-batches
/// accumulated into one store (as training does).
type Outputs = (Vec<f32>, Vec<f32>, Vec<(String, Vec<f32>)>);

fn run(model: &CausalLm<f32, Cpu>) -> Outputs {
    let (batch, start) = batch();
    let mut grads = model.params.alloc_grads();
    let (mut logps, mut entropy) = (Vec::new(), Vec::new());
    for pass in 0..2 {
        let out = model.token_logps(&batch, start, 0.8, grads).unwrap();
        let (rows, c) = *out.logps.shape();
        let weights: Vec<f32> = (0..rows * c)
            .map(|i| (((i + pass) * 37 % 11) as f32 - 5.0) / 5.0)
            .collect();
        let w = Cpu::default().tensor_from_vec(weights, (rows, c));
        logps = out.logps.retaped::<NoneTape>().as_vec();
        entropy = out.entropy.as_vec();
        grads = model
            .params
            .keep_param_grads((out.logps * w).sum::<(), _>().backward());
    }
    let named = model
        .params
        .named()
        .into_iter()
        .map(|(name, p)| {
            let g = match p {
                Param::Vector(t) => grads.get(t).as_vec(),
                Param::Matrix(t) => grads.get(t).as_vec(),
            };
            (name, g)
        })
        .collect();
    (logps, entropy, named)
}

fn model(mode: KernelMode, tied: bool) -> CausalLm<f32, Cpu> {
    let config = config(tied);
    let mut m = CausalLm::new(
        config.clone(),
        ModelParams::random(&config, &Cpu::default(), 11, 0.3),
    );
    m.kernels = mode;
    m
}

fn max_abs(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
}

fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = a.iter().map(|x| f64::from(x.abs())).fold(1e-6, f64::max);
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from((x - y).abs()) / scale)
        .fold(0.0, f64::max)
}

#[test]
fn gradient_checkpointing_gives_the_same_gradients_bit_for_bit() {
    for mode in [KernelMode::Fused, KernelMode::Reference] {
        for tied in [true, false] {
            let mut m = model(mode, tied);
            let plain = run(&m);
            m.gradient_checkpointing = true;
            let recomputed = run(&m);
            assert_eq!(plain.0, recomputed.0, "{mode:?} logps");
            assert_eq!(plain.1, recomputed.1, "{mode:?} entropy");
            for ((name, a), (_, b)) in plain.2.iter().zip(&recomputed.2) {
                assert!(
                    a.iter().any(|&g| g != 0.0),
                    "{mode:?} {name} has no gradient"
                );
                assert_eq!(a, b, "{mode:?} tied={tied} gradient of {name}");
            }
        }
    }
}

#[test]
fn chunked_head_gives_the_same_logps_and_gradients() {
    for mode in [KernelMode::Fused, KernelMode::Reference] {
        for tied in [true, false] {
            let mut m = model(mode, tied);
            // 30 completion positions: one chunk holds them all (the unchunked path).
            m.logits_chunk_rows = 1000;
            let plain = run(&m);
            // Chunks of 7 rows (the last one shorter), with and without recomputed layers.
            for checkpointing in [false, true] {
                m.logits_chunk_rows = 7;
                m.gradient_checkpointing = checkpointing;
                let chunked = run(&m);
                // Each row's log-probability is computed alone either way, but a product of a
                // few rows may take another micro-kernel: the same to rounding.
                assert!(max_abs(&plain.0, &chunked.0) < 1e-5, "{mode:?} logps");
                assert!(max_abs(&plain.1, &chunked.1) < 1e-5, "{mode:?} entropy");
                // Weight gradients sum over rows chunk by chunk: the same to rounding.
                let bad: Vec<String> = plain
                    .2
                    .iter()
                    .zip(&chunked.2)
                    .map(|((name, a), (_, b))| (name, max_rel(a, b)))
                    .filter(|(_, rel)| *rel >= 1e-5)
                    .map(|(name, rel)| format!("{name}: relative {rel:e}"))
                    .collect();
                assert!(
                    bad.is_empty(),
                    "{mode:?} tied={tied} ckpt={checkpointing}: {bad:#?}"
                );
            }
        }
    }
}

#[test]
fn no_tape_paths_agree() {
    let mut m = model(KernelMode::Fused, true);
    let (batch, start) = batch();
    let plain = m.token_logps_no_grad(&batch, start, 1.0).unwrap();
    m.gradient_checkpointing = true;
    m.logits_chunk_rows = 4;
    let other = m.token_logps_no_grad(&batch, start, 1.0).unwrap();
    assert!(max_abs(&plain.logps.as_vec(), &other.logps.as_vec()) < 1e-5);
    assert!(max_abs(&plain.entropy.as_vec(), &other.entropy.as_vec()) < 1e-5);
}
