//! AdamW with decoupled weight decay and global-norm clipping against a host implementation of
//! PyTorch's formulas (`torch.optim.AdamW`, `torch.nn.utils.clip_grad_norm_`).

use std::collections::BTreeMap;

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::model::{
    AdamW, AdamWConfig, CausalLm, ModelConfig, ModelParams, Param, TokenBatch,
};

fn host_values(
    params: &ModelParams<f64, Cpu>,
    grads: Option<&Gradients<f64, Cpu>>,
) -> BTreeMap<String, Vec<f64>> {
    params
        .named()
        .into_iter()
        .map(|(n, p)| {
            let v = match (p, grads) {
                (Param::Vector(t), None) => t.as_vec(),
                (Param::Matrix(t), None) => t.as_vec(),
                (Param::Vector(t), Some(g)) => g.get(t).as_vec(),
                (Param::Matrix(t), Some(g)) => g.get(t).as_vec(),
            };
            (n, v)
        })
        .collect()
}

#[test]
fn adamw_step_matches_pytorch_formulas_with_clipping_and_decay() {
    let dev = Cpu::default();
    let config = ModelConfig::from_json(json!({
        "model_type": "qwen2", "vocab_size": 11, "hidden_size": 8, "intermediate_size": 12,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "tie_word_embeddings": true
    }))
    .unwrap();
    let mut model = CausalLm::new(
        config.clone(),
        ModelParams::<f64, Cpu>::random(&config, &dev, 5, 0.5),
    );
    let batch = TokenBatch::left_padded(&[vec![1, 2, 3, 4, 5], vec![6, 7, 8]], 0).unwrap();
    // (lr, beta1, beta2, eps, weight decay, max grad norm): the norm 0.05 forces clipping.
    let cfg = AdamWConfig {
        lr: 0.01,
        beta1: 0.8,
        beta2: 0.95,
        eps: 1e-6,
        weight_decay: 0.3,
        max_grad_norm: Some(0.05),
    };
    let mut opt = AdamW::new(cfg);
    let mut reference = host_values(&model.params, None);
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut v: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for t in 1..=3 {
        let out = model
            .token_logps(&batch, 2, 1.0, model.params.alloc_grads())
            .unwrap();
        let mut grads = model
            .params
            .keep_param_grads(out.logps.sum::<(), _>().negate().backward());
        let g = host_values(&model.params, Some(&grads));
        let norm = g.values().flatten().map(|x| x * x).sum::<f64>().sqrt();
        let clip = (cfg.max_grad_norm.unwrap() / (norm + 1e-6)).min(1.0);
        assert!(clip < 1.0, "the test means to exercise clipping");
        for (name, p) in reference.iter_mut() {
            let (mm, vv) = (
                m.entry(name.clone()).or_insert(vec![0.0; p.len()]),
                v.entry(name.clone()).or_insert(vec![0.0; p.len()]),
            );
            for i in 0..p.len() {
                let gi = g[name][i] * clip;
                p[i] *= 1.0 - cfg.lr * cfg.weight_decay;
                mm[i] = cfg.beta1 * mm[i] + (1.0 - cfg.beta1) * gi;
                vv[i] = cfg.beta2 * vv[i] + (1.0 - cfg.beta2) * gi * gi;
                let mhat = mm[i] / (1.0 - cfg.beta1.powi(t));
                let vhat = vv[i] / (1.0 - cfg.beta2.powi(t));
                p[i] -= cfg.lr * mhat / (vhat.sqrt() + cfg.eps);
            }
        }
        let stats = opt.step(&mut model.params, &mut grads);
        assert!((stats.grad_norm - norm).abs() < 1e-12 * norm.max(1.0));
        let ours = host_values(&model.params, None);
        for (name, want) in &reference {
            let worst = ours[name]
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-12, "step {t} {name}: {worst}");
        }
    }
}

/// `sync_ref_model`'s update, tensor by tensor: `ref ← (1 − α) · ref + α · policy`, as TRL's
/// `SyncRefModelCallback` computes it.
#[test]
fn mixing_the_policy_into_the_reference_is_trls_update() {
    use swerve_trainer::model::{ModelConfig, ModelParams, Param};
    let text = fs_err::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2/config.json"),
    )
    .unwrap();
    let config = ModelConfig::from_json(serde_json::from_str(&text).unwrap()).unwrap();
    let dev = dfdx::prelude::Cpu::default();
    let policy = ModelParams::<f64, _>::random(&config, &dev, 1, 0.2);
    let before = ModelParams::<f64, _>::random(&config, &dev, 2, 0.2);
    let mut reference = before.clone();
    policy.mix_into(&mut reference, 0.6);
    let host = |p: swerve_trainer::model::params::ParamRef<'_, f64, dfdx::prelude::Cpu>| match p {
        Param::Vector(t) => t.as_vec(),
        Param::Matrix(t) => t.as_vec(),
    };
    let mut checked = 0;
    for (((name, p), (_, b)), (_, r)) in policy
        .named()
        .into_iter()
        .zip(before.named())
        .zip(reference.named())
    {
        let (p, b, r): (Vec<f64>, Vec<f64>, Vec<f64>) = (host(p), host(b), host(r));
        for ((p, b), r) in p.iter().zip(&b).zip(&r) {
            assert!((r - (b * 0.4 + p * 0.6)).abs() < 1e-15, "{name}");
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
}
