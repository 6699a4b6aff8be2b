//! The fused CPU kernels against dfdx's own operations (`KernelMode::Reference`): same
//! log-probabilities, entropies, parameter gradients and cached-generation logits, on batches
//! long enough to span several attention query blocks, with left padding that leaves whole
//! blocks of queries without a visible key. Plus the accuracy of the vectorised `exp`.

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::model::kernels::cpu::exp_f32;
use swerve_trainer::model::{
    CausalLm, KernelMode, KvCache, ModelConfig, ModelParams, Param, TokenBatch,
};

fn config() -> ModelConfig {
    ModelConfig::from_json(json!({
        "model_type": "qwen2", "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true
    }))
    .unwrap()
}

/// Three rows of 150 tokens: one full, one left-padded by 20, one by 70 (so its first query
/// block of 64 sees no real key at all); completions start at 100.
fn batch() -> (TokenBatch, usize) {
    let (rows, cols) = (3, 150);
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    for (r, pad) in [0usize, 20, 70].into_iter().enumerate() {
        for c in 0..cols {
            ids.push(((r * 131 + c * 17 + c * c) % 61) as u32);
            mask.push(c >= pad);
        }
    }
    (TokenBatch::new(ids, mask, rows, cols).unwrap(), 100)
}

fn model<E: Dtype>(mode: KernelMode) -> CausalLm<E, Cpu>
where
    Cpu: Device<E>,
{
    let config = config();
    let mut m = CausalLm::new(
        config.clone(),
        ModelParams::random(&config, &Cpu::default(), 7, 0.3),
    );
    m.kernels = mode;
    m
}

fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Log-probabilities, entropies and every parameter's gradient by name.
type Outputs = (Vec<f64>, Vec<f64>, Vec<(String, Vec<f64>)>);

/// Loss = Σ wᵢ·logpᵢ over the completion positions, with a fixed pseudo-random weight each.
fn loss_grads(model: &CausalLm<f64, Cpu>) -> Outputs {
    let (batch, start) = batch();
    let out = model
        .token_logps(&batch, start, 0.8, model.params.alloc_grads())
        .unwrap();
    let (rows, c) = *out.logps.shape();
    let weights: Vec<f64> = (0..rows * c)
        .map(|i| ((i * 37 % 11) as f64 - 5.0) / 5.0)
        .collect();
    let w = Cpu::default().tensor_from_vec(weights, (rows, c));
    let logps = out.logps.retaped::<NoneTape>().as_vec();
    let entropy = out.entropy.as_vec();
    let grads = model
        .params
        .keep_param_grads((out.logps * w).sum::<(), _>().backward());
    let named = model
        .params
        .named()
        .into_iter()
        .map(|(name, p)| {
            let g = match p {
                Param::Vector(v) => grads.get(v).as_vec(),
                Param::Matrix(m) => grads.get(m).as_vec(),
            };
            (name, g)
        })
        .collect();
    (logps, entropy, named)
}

#[test]
fn fused_log_probs_entropies_and_gradients_equal_the_reference() {
    let (lp_f, ent_f, g_f) = loss_grads(&model(KernelMode::Fused));
    let (lp_r, ent_r, g_r) = loss_grads(&model(KernelMode::Reference));
    assert!(
        max_abs(&lp_f, &lp_r) < 1e-10,
        "logps {}",
        max_abs(&lp_f, &lp_r)
    );
    assert!(
        max_abs(&ent_f, &ent_r) < 1e-10,
        "entropy {}",
        max_abs(&ent_f, &ent_r)
    );
    assert_eq!(g_f.len(), g_r.len());
    for ((name, a), (name_r, b)) in g_f.iter().zip(&g_r) {
        assert_eq!(name, name_r);
        let scale = b.iter().map(|x| x.abs()).fold(0.0, f64::max);
        assert!(scale > 0.0, "{name}: no gradient reached it");
        let diff = max_abs(a, b);
        assert!(
            diff <= 1e-9 * scale,
            "{name}: fused vs reference gradient differs by {diff:e} (scale {scale:e})"
        );
    }
}

#[test]
fn fused_f32_log_probs_match_the_reference_to_f32_precision() {
    let (batch, start) = batch();
    let fused = model::<f32>(KernelMode::Fused)
        .token_logps_no_grad(&batch, start, 1.0)
        .unwrap();
    let reference = model::<f32>(KernelMode::Reference)
        .token_logps_no_grad(&batch, start, 1.0)
        .unwrap();
    let (a, b) = (fused.logps.as_vec(), reference.logps.as_vec());
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 2e-5, "f32 logps differ by {diff}");
}

/// Prefill 60 tokens then decode 5 one at a time, on left-padded rows.
fn cached_logits(model: &CausalLm<f64, Cpu>) -> Vec<f64> {
    let (batch, _) = batch();
    let (rows, cols) = (batch.rows(), batch.cols());
    let take = |lo: usize, hi: usize| {
        let mut ids = Vec::new();
        let mut mask = Vec::new();
        for r in 0..rows {
            ids.extend_from_slice(&batch.ids()[r * cols + lo..r * cols + hi]);
            mask.extend_from_slice(&batch.mask()[r * cols + lo..r * cols + hi]);
        }
        TokenBatch::new(ids, mask, rows, hi - lo).unwrap()
    };
    let mut cache = KvCache::new(rows);
    let mut out = model
        .forward_cached(&take(0, 80), &mut cache)
        .unwrap()
        .as_vec();
    for pos in 80..85 {
        out.extend(
            model
                .forward_cached(&take(pos, pos + 1), &mut cache)
                .unwrap()
                .as_vec(),
        );
    }
    out
}

#[test]
fn fused_cached_generation_logits_equal_the_reference() {
    let fused = cached_logits(&model(KernelMode::Fused));
    let reference = cached_logits(&model(KernelMode::Reference));
    let diff = max_abs(&fused, &reference);
    assert!(diff < 1e-10, "cached logits differ by {diff}");
}

#[test]
fn vectorised_exp_is_within_two_ulp_of_libm() {
    let mut worst: f32 = 0.0;
    let mut x = -87.0f32;
    while x < 88.0 {
        let (got, want) = (exp_f32(x), x.exp());
        worst = worst.max(((got - want) / want).abs());
        x += 0.0137;
    }
    assert!(worst < 2.5e-7, "relative error {worst:e}");
    assert_eq!(exp_f32(0.0), 1.0);
    assert_eq!(exp_f32(-100.0), 0.0);
    assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp_f32(100.0), f32::INFINITY);
    assert!(exp_f32(f32::NAN).is_nan());
}

#[test]
fn fused_adamw_step_equals_the_reference() {
    use swerve_trainer::model::{AdamW, AdamWConfig};
    let (batch, start) = batch();
    let cfg = AdamWConfig {
        lr: 0.01,
        beta1: 0.8,
        beta2: 0.95,
        eps: 1e-6,
        weight_decay: 0.3,
        max_grad_norm: Some(0.05),
    };
    let mut models = [
        model::<f64>(KernelMode::Fused),
        model::<f64>(KernelMode::Fused),
    ];
    let mut opts = [AdamW::new(cfg), AdamW::new(cfg)];
    opts[1].kernels = KernelMode::Reference;
    let mut norms = [0.0; 2];
    for step in 0..3 {
        for (i, (m, opt)) in models.iter_mut().zip(opts.iter_mut()).enumerate() {
            let out = m
                .token_logps(&batch, start, 1.0, m.params.alloc_grads())
                .unwrap();
            let mut grads = m
                .params
                .keep_param_grads(out.logps.sum::<(), _>().backward());
            norms[i] = opt.step(&mut m.params, &mut grads).grad_norm;
        }
        assert!(
            (norms[0] - norms[1]).abs() <= 1e-12 * norms[1],
            "step {step}: grad norms {norms:?}"
        );
        for ((name, a), (_, b)) in models[0]
            .params
            .named()
            .into_iter()
            .zip(models[1].params.named())
        {
            let (a, b) = match (a, b) {
                (Param::Vector(a), Param::Vector(b)) => (a.as_vec(), b.as_vec()),
                (Param::Matrix(a), Param::Matrix(b)) => (a.as_vec(), b.as_vec()),
                _ => unreachable!("same model"),
            };
            assert!(
                max_abs(&a, &b) < 1e-13,
                "step {step}: {name} differs by {}",
                max_abs(&a, &b)
            );
        }
    }
    assert_eq!(opts[0].moments.len(), opts[1].moments.len());
}
