//! Finite-difference gradient checks of the whole model and of the ops it is built from.
//!
//! Run in f64 on the CPU: central differences with h = 1e-5 then have truncation and rounding
//! errors near 1e-10, so a tolerance of 1e-6 relative separates a correct backward from a wrong
//! one by orders of magnitude (dfdx 0.13's CPU `slice` backward, which assigns the gradient
//! instead of adding it, gives errors near 1 through a sliced RoPE). The f32 kernels are the
//! same generic code as the f64 ones. Every check runs on both kernel sets: the fused CPU kernels
//! (what the trainer runs) and dfdx's own operations (what CUDA runs).

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::model::forward::ops;
use swerve_trainer::model::{CausalLm, KernelMode, ModelConfig, ModelParams, Param, TokenBatch};

type Dev = Cpu;
const H: f64 = 1e-5;
/// |analytic − numeric| ≤ ATOL + RTOL·|numeric| for every checked element.
const RTOL: f64 = 1e-6;
const ATOL: f64 = 1e-9;
const MODES: [KernelMode; 2] = [KernelMode::Fused, KernelMode::Reference];

fn model_with(config: &ModelConfig, seed: u64, mode: KernelMode) -> CausalLm<f64, Dev> {
    let mut model = CausalLm::new(
        config.clone(),
        ModelParams::random(config, &Dev::default(), seed, 0.5),
    );
    model.kernels = mode;
    model
}

/// Tiny configs with grouped-query attention (4 query heads over 2 kv heads): Qwen2 with q/k/v
/// biases and a separate LM head; Llama with biases on all four projections and tied embeddings.
fn configs() -> Vec<ModelConfig> {
    let base = json!({
        "vocab_size": 13, "hidden_size": 16, "intermediate_size": 20, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0
    });
    let mut qwen = base.clone();
    qwen["model_type"] = json!("qwen2");
    qwen["tie_word_embeddings"] = json!(false);
    let mut llama = base;
    llama["model_type"] = json!("llama");
    llama["attention_bias"] = json!(true);
    llama["tie_word_embeddings"] = json!(true);
    [qwen, llama]
        .into_iter()
        .map(|v| ModelConfig::from_json(v).unwrap())
        .collect()
}

/// Two rows of 7 tokens, the second left-padded by two; completions start at position 4.
fn batch() -> (TokenBatch, usize) {
    let ids = vec![3, 7, 1, 12, 5, 5, 9, 0, 0, 4, 2, 8, 11, 6];
    let mask = [1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1]
        .map(|m| m == 1)
        .to_vec();
    (TokenBatch::new(ids, mask, 2, 7).unwrap(), 4)
}

/// A weighted sum of the completion log-probs (one weight zero, like a completion mask) plus a
/// small square term so that the loss is not linear in the log-probs, plus a weighted sum of
/// the token entropies (GRPO's entropy bonus).
const WEIGHTS: [f64; 6] = [0.7, -1.3, 0.4, 0.0, 1.1, -0.6];
const ENTROPY_WEIGHTS: [f64; 6] = [0.3, 0.5, -0.2, 0.0, -0.4, 0.9];
const TEMPERATURE: f64 = 0.7;

fn loss_value(model: &CausalLm<f64, Dev>) -> f64 {
    let (batch, start) = batch();
    let out = model
        .token_logps_no_grad(&batch, start, TEMPERATURE)
        .unwrap();
    let lp = out.logps.as_vec();
    let entropy = out.entropy.as_vec();
    lp.iter()
        .zip(WEIGHTS)
        .map(|(l, w)| w * l + 0.05 * l * l)
        .chain(entropy.iter().zip(ENTROPY_WEIGHTS).map(|(h, v)| v * h))
        .sum()
}

fn analytic_grads(model: &CausalLm<f64, Dev>) -> Gradients<f64, Dev> {
    let (batch, start) = batch();
    let dev = Dev::default();
    let out = model
        .token_logps(&batch, start, TEMPERATURE, model.params.alloc_grads())
        .unwrap();
    let w = dev.tensor_from_vec(WEIGHTS.to_vec(), (2, 3));
    let v = dev.tensor_from_vec(ENTROPY_WEIGHTS.to_vec(), (2, 3));
    let lp = out.logps;
    let loss = (lp.retaped::<OwnedTape<f64, Dev>>() * w + lp.square() * 0.05).sum::<(), _>()
        + (out.entropy * v).sum::<(), _>();
    model.params.keep_param_grads(loss.backward())
}

/// Host copy of parameter `name`.
fn host_param(params: &ModelParams<f64, Dev>, name: &str) -> Vec<f64> {
    let (_, p) = params.named().into_iter().find(|(n, _)| n == name).unwrap();
    match p {
        Param::Vector(v) => v.as_vec(),
        Param::Matrix(m) => m.as_vec(),
    }
}

fn set_param(params: &mut ModelParams<f64, Dev>, name: &str, data: Vec<f64>) {
    let dev = Dev::default();
    let (_, p) = params
        .named_mut()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap();
    match p {
        Param::Vector(v) => *v = dev.tensor_from_vec(data, *v.shape()),
        Param::Matrix(m) => *m = dev.tensor_from_vec(data, *m.shape()),
    }
}

fn grad_of(params: &ModelParams<f64, Dev>, grads: &Gradients<f64, Dev>, name: &str) -> Vec<f64> {
    let (_, p) = params.named().into_iter().find(|(n, _)| n == name).unwrap();
    match p {
        Param::Vector(v) => grads.get(v).as_vec(),
        Param::Matrix(m) => grads.get(m).as_vec(),
    }
}

/// Checks `analytic` against central differences of `f` at a few elements; returns the worst
/// relative error among elements whose gradient exceeds 1e-4 (below that, ATOL dominates).
fn compare(label: &str, analytic: &[f64], numeric: impl Fn(usize) -> f64, picks: &[usize]) -> f64 {
    let mut worst: f64 = 0.0;
    for &i in picks {
        let (a, n) = (analytic[i], numeric(i));
        assert!(
            (a - n).abs() <= ATOL + RTOL * n.abs(),
            "{label}[{i}]: analytic {a:e}, numeric {n:e}"
        );
        if n.abs() > 1e-4 {
            worst = worst.max((a - n).abs() / n.abs());
        }
    }
    worst
}

/// Up to `k` spread-out indices of a tensor of `len` elements.
fn picks(len: usize, k: usize) -> Vec<usize> {
    (0..k.min(len)).map(|j| (j * 7919 + 3) % len).collect()
}

#[test]
fn whole_model_gradients_match_finite_differences_for_every_tensor_kind() {
    let mut worst: f64 = 0.0;
    for (seed, config, mode) in configs()
        .into_iter()
        .enumerate()
        .flat_map(|(seed, c)| MODES.map(|m| (seed, c.clone(), m)))
    {
        let mut model = model_with(&config, seed as u64, mode);
        // The second config runs the LM head in chunks of 4 of its 6 rows (recomputed in the
        // backward pass, log-probs and entropies side by side).
        if seed == 1 {
            model.logits_chunk_rows = 4;
        }
        let grads = analytic_grads(&model);
        let names: Vec<String> = model.params.named().into_iter().map(|(n, _)| n).collect();
        // Every tensor kind: embeddings, norms, q/k/v/o weights and biases, MLP, LM head.
        for kind in [
            "embed_tokens",
            "layernorm",
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "mlp",
            "norm.weight",
        ] {
            assert!(
                names.iter().any(|n| n.contains(kind)),
                "{kind} missing from {names:?}"
            );
        }
        if !config.tie_word_embeddings {
            assert!(names.iter().any(|n| n == "lm_head.weight"));
        }
        assert!(names.iter().any(|n| n.ends_with("o_proj.bias")) == config.o_bias);
        for name in &names {
            let analytic = grad_of(&model.params, &grads, name);
            let base = host_param(&model.params, name);
            let mut idx = picks(base.len(), 4);
            // The embedding rows of tokens that occur in the batch carry the signal.
            if name.contains("embed_tokens") {
                idx.extend([3 * 16 + 1, 12 * 16 + 5, 8 * 16 + 15]);
            }
            let numeric = |i: usize| {
                let mut m = model.clone();
                let mut up = base.clone();
                up[i] += H;
                set_param(&mut m.params, name, up);
                let plus = loss_value(&m);
                let mut down = base.clone();
                down[i] -= H;
                set_param(&mut m.params, name, down);
                (plus - loss_value(&m)) / (2.0 * H)
            };
            worst = worst.max(compare(
                &format!("{mode:?} {name}"),
                &analytic,
                numeric,
                &idx,
            ));
        }
    }
    eprintln!("worst relative gradient error over all parameters: {worst:e}");
    assert!(worst < 1e-5);
}

fn random_tensor<S: Shape>(shape: S, seed: u64) -> Tensor<S, f64, Dev> {
    let dev = Dev::seed_from_u64(seed);
    dev.sample_normal_like(&shape)
}

/// Central differences of a scalar function of one tensor at the picked elements.
fn op_check<S: Shape>(
    label: &str,
    x: Tensor<S, f64, Dev>,
    f: impl Fn(Tensor<S, f64, Dev, OwnedTape<f64, Dev>>) -> Tensor<(), f64, Dev, OwnedTape<f64, Dev>>,
) -> f64 {
    let dev = Dev::default();
    let analytic = f(x.leaky_trace()).backward().get(&x).as_vec();
    let base = x.as_vec();
    let numeric = |i: usize| {
        let at = |delta: f64| {
            let mut v = base.clone();
            v[i] += delta;
            f(dev.tensor_from_vec(v, *x.shape()).leaky_traced()).array()
        };
        (at(H) - at(-H)) / (2.0 * H)
    };
    compare(
        label,
        &analytic,
        numeric,
        &(0..base.len()).collect::<Vec<_>>(),
    )
}

#[test]
fn rope_matches_rotate_half_and_its_gradient_is_exact() {
    for mode in MODES {
        rope_check(mode);
    }
}

fn rope_check(mode: KernelMode) {
    let config = configs().remove(0);
    let model = model_with(&config, 0, mode);
    let (b, s, h, hd) = (2, 3, 2, config.head_dim);
    let x = random_tensor((b, s, h, hd), 11);
    // Forward against Hugging Face's formula x·cos + rotate_half(x)·sin at offset 5.
    let offset = 5;
    let got = ops::rope_at(&model, x.clone(), offset).as_vec();
    let xv = x.as_vec();
    for bi in 0..b {
        for si in 0..s {
            for hi in 0..h {
                let base = ((bi * s + si) * h + hi) * hd;
                for i in 0..hd {
                    let j = i % (hd / 2);
                    let angle =
                        (offset + si) as f64 / config.rope_theta.powf(2.0 * j as f64 / hd as f64);
                    let rotated = if i < hd / 2 {
                        -xv[base + i + hd / 2]
                    } else {
                        xv[base + i - hd / 2]
                    };
                    let want = xv[base + i] * angle.cos() + rotated * angle.sin();
                    assert!(
                        (got[base + i] - want).abs() < 1e-12,
                        "{mode:?} rope[{bi},{si},{hi},{i}]"
                    );
                }
            }
        }
    }
    let w = random_tensor((b, s, h, hd), 12);
    // x is used twice inside rope (x·cos and roll(x)·sin): both contributions must add up.
    let worst = op_check(&format!("{mode:?} rope"), x, |x| {
        (ops::rope_at(&model, x, offset) * w.clone()).sum()
    });
    eprintln!("{mode:?} rope worst relative error {worst:e}");
}

#[test]
fn rms_norm_gradient_is_exact() {
    let config = configs().remove(0);
    let weight: Tensor<(usize,), f64, Dev> = random_tensor((5,), 22);
    let w = random_tensor((3, 5), 23);
    for mode in MODES {
        let model = model_with(&config, 0, mode);
        let x = random_tensor((3, 5), 21);
        let worst = op_check(&format!("{mode:?} rms_norm"), x, |x| {
            (ops::rms_norm(&model, x, &weight, 1e-6) * w.clone()).sum()
        });
        eprintln!("{mode:?} rms_norm worst relative error {worst:e}");
    }
}

#[test]
fn gather_and_select_gradients_accumulate_over_repeated_indices() {
    let dev = Dev::default();
    let table = random_tensor((6, 4), 31);
    let w = random_tensor((5, 4), 32);
    // Row 2 is gathered three times: its gradient is the sum of three contributions.
    op_check("gather", table, |t| {
        (t.gather(dev.tensor_from_vec(vec![2, 0, 2, 5, 2], (5,))) * w.clone()).sum()
    });
    let logits = random_tensor((4, 6), 33);
    op_check("log_softmax+select", logits, |l| {
        let lp = l.log_softmax::<Axis<1>>();
        (lp.select(dev.tensor_from_vec(vec![1, 1, 5, 0], (4,)))
            * dev.tensor_from_vec(vec![0.3, -1.0, 2.0, 0.5], (4,)))
        .sum()
    });
}

#[test]
fn causal_and_padding_masks_hide_future_and_padded_tokens() {
    for mode in MODES {
        masks_check(mode);
    }
}

fn masks_check(mode: KernelMode) {
    let config = configs().remove(0);
    let model = model_with(&config, 3, mode);
    let (batch, _) = batch();
    let base = model.logits(&batch).as_vec();
    let v = config.vocab_size;
    let at = |logits: &[f64], row: usize, pos: usize| {
        logits[(row * 7 + pos) * v..(row * 7 + pos + 1) * v].to_vec()
    };
    // (row, position changed, new id): changing a future token leaves earlier positions alone;
    // changing a padded token leaves every real position alone.
    for (row, pos, new_id) in [(0, 5, 2), (1, 0, 9), (1, 1, 3)] {
        let mut ids = batch.ids().to_vec();
        ids[row * 7 + pos] = new_id;
        let changed = TokenBatch::new(ids, batch.mask().to_vec(), 2, 7).unwrap();
        let logits = model.logits(&changed).as_vec();
        let first_real = if row == 1 { 2 } else { 0 };
        let unchanged_until = if batch.mask()[row * 7 + pos] { pos } else { 7 };
        for p in first_real..unchanged_until {
            let (a, b) = (at(&base, row, p), at(&logits, row, p));
            let diff = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            assert!(
                diff < 1e-12,
                "{mode:?}: row {row} pos {p} changed by {diff} after editing pos {pos}"
            );
        }
        if unchanged_until < 7 {
            let (a, b) = (at(&base, row, pos), at(&logits, row, pos));
            assert!(
                a.iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-6),
                "edit at {pos} had no effect"
            );
        }
        // The other row never changes.
        let other = 1 - row;
        assert_eq!(at(&base, other, 6), at(&logits, other, 6));
    }
}
