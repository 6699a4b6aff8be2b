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

/// The cached forward as the fused blocks compute it (`cpu::attention_block` over the
/// concatenated past keys and values, `cpu::mlp_block`, the final norm and the LM head as
/// operations): the path generation took before it ran on host buffers, kept here as the
/// reference that host decoding must reproduce value for value.
struct BlocksCache {
    layers: Vec<swerve_trainer::model::kernels::KvPair<f32, Cpu>>,
    key_mask: Vec<bool>,
    len: usize,
}

fn blocks_forward(
    model: &CausalLm<f32, Cpu>,
    batch: &TokenBatch,
    cache: &mut BlocksCache,
) -> Vec<f32> {
    use swerve_trainer::model::kernels::{BlockShape, cpu};
    let (b, s, past) = (batch.rows(), batch.cols(), cache.len);
    let mut key_mask = Vec::new();
    for row in 0..b {
        key_mask.extend_from_slice(&cache.key_mask[row * past..(row + 1) * past]);
        key_mask.extend_from_slice(&batch.mask()[row * s..(row + 1) * s]);
    }
    let cfg = &model.config;
    let ctx = model.context(b, s, past, &key_mask);
    let shape = BlockShape {
        heads: cfg.num_heads,
        kv_heads: cfg.num_kv_heads,
        head_dim: cfg.head_dim,
        eps: cfg.rms_norm_eps,
    };
    let dev = Cpu::default();
    let ids: Vec<usize> = batch.ids().iter().map(|&t| t as usize).collect();
    let mut x = model
        .params
        .embed_tokens
        .clone()
        .gather(dev.tensor_from_vec(ids, (b * s,)));
    let mut layers = Vec::new();
    for (i, layer) in model.params.layers.iter().enumerate() {
        let (y, kv) = cpu::attention_block(x, layer, &ctx, cache.layers.get(i), true, shape);
        layers.push(kv.unwrap());
        x = cpu::mlp_block(y, layer, shape.eps);
    }
    let d = cfg.hidden_size;
    let hidden = cpu::rms_norm(x, &model.params.norm, shape.eps).reshape_like(&(b, s, d));
    let last: Tensor<(usize, usize), f32, Cpu> =
        hidden.select(dev.tensor_from_vec(vec![s - 1; b], (b,)));
    let head = model
        .params
        .lm_head
        .as_ref()
        .unwrap_or(&model.params.embed_tokens);
    *cache = BlocksCache {
        layers,
        key_mask,
        len: past + s,
    };
    cpu::linear(last, head, None, None).as_vec()
}

/// Generation through the blocks, one row after another, each from its own generator: the
/// completions and every step's logits.
fn blocks_generate(
    model: &CausalLm<f32, Cpu>,
    prompts: &[Vec<u32>],
    cfg: &swerve_trainer::generate::SamplingConfig,
) -> (Vec<Vec<u32>>, Vec<Vec<f32>>) {
    let rows = prompts.len();
    let vocab = model.config.vocab_size;
    let mut rngs: Vec<_> = (0..rows)
        .map(|r| swerve_trainer::generate::row_rng(cfg, r))
        .collect();
    let mut cache = BlocksCache {
        layers: Vec::new(),
        key_mask: Vec::new(),
        len: 0,
    };
    let batch = TokenBatch::left_padded(prompts, cfg.pad_token_id).unwrap();
    let mut logits = blocks_forward(model, &batch, &mut cache);
    let (mut completions, mut steps) = (vec![Vec::new(); rows], vec![logits.clone()]);
    let mut finished = vec![false; rows];
    for step in 0..cfg.max_new_tokens {
        let mut next = vec![cfg.pad_token_id; rows];
        let mut live = vec![false; rows];
        for row in 0..rows {
            if finished[row] {
                continue;
            }
            let row_logits: Vec<f64> = logits[row * vocab..(row + 1) * vocab]
                .iter()
                .map(|&x| f64::from(x))
                .collect();
            let token = swerve_trainer::generate::sample(&row_logits, cfg, &mut rngs[row]);
            completions[row].push(token);
            finished[row] = cfg.eos_token_ids.contains(&token);
            next[row] = token;
            live[row] = true;
        }
        if finished.iter().all(|&f| f) || step + 1 == cfg.max_new_tokens {
            break;
        }
        let batch = TokenBatch::new(next, live, rows, 1).unwrap();
        logits = blocks_forward(model, &batch, &mut cache);
        steps.push(logits.clone());
    }
    (completions, steps)
}

/// Host decoding (weights copied once, keys and values written in place, few-row products for
/// the projections and the LM head, rows sampled in parallel) gives bit for bit the logits the
/// fused blocks give, and so samples the same tokens for the same seed: on f32, with left
/// padding, rows that end early at an EOS, the KV cache growing past its first capacity, and
/// greedy, top-k and top-p sampling.
#[test]
fn host_decoding_samples_what_the_fused_blocks_sample() {
    use swerve_trainer::generate::{SamplingConfig, generate};
    let config = ModelConfig::from_json(json!({
        "model_type": "llama", "vocab_size": 256, "hidden_size": 256, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
        "attention_bias": true
    }))
    .unwrap();
    let model = CausalLm::new(
        config.clone(),
        ModelParams::<f32, Cpu>::random(&config, &Cpu::default(), 11, 0.25),
    );
    let prompts: Vec<Vec<u32>> = [3usize, 17, 9, 1, 30]
        .iter()
        .enumerate()
        .map(|(r, &len)| {
            (0..len)
                .map(|i| ((r * 37 + i * 11) % 95 + 2) as u32)
                .collect()
        })
        .collect();
    for (temperature, top_k, top_p, seed) in [
        (1.0, 0, 1.0, 1),
        (0.7, 20, 0.9, 2),
        (0.0, 0, 1.0, 3),
        (1.3, 0, 0.95, 4),
    ] {
        let cfg = SamplingConfig {
            temperature,
            top_k,
            top_p,
            seed,
            max_new_tokens: 24,
            eos_token_ids: vec![5, 6],
            pad_token_id: 0,
            first_row: 0,
            ..SamplingConfig::default()
        };
        let (want, want_logits) = blocks_generate(&model, &prompts, &cfg);
        let got = generate(&model, &prompts, &cfg).unwrap();
        assert_eq!(got.completions, want, "{cfg:?}");
        // The host path's logits, step by step, bit for bit.
        let batch = TokenBatch::left_padded(&prompts, 0).unwrap();
        let mut cache = KvCache::new(prompts.len());
        let mut logits = model.forward_cached(&batch, &mut cache).unwrap().as_vec();
        for (step, want) in want_logits.iter().enumerate() {
            assert_eq!(
                logits.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "step {step} of {cfg:?}"
            );
            let (next, live): (Vec<u32>, Vec<bool>) = (0..prompts.len())
                .map(|r| match got.completions[r].get(step) {
                    Some(&t) => (t, true),
                    None => (0, false),
                })
                .unzip();
            if step + 1 < want_logits.len() {
                let batch = TokenBatch::new(next, live, prompts.len(), 1).unwrap();
                logits = model.forward_cached(&batch, &mut cache).unwrap().as_vec();
            }
        }
    }
}

/// Deterministic `x: [n, k]`, `W: [m, k]` and `bias: [m]` for the product tests.
fn product_operands(n: usize, k: usize, m: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x = (0..n * k)
        .map(|i| ((i * 7919) % 1013) as f32 * 1.3e-3 - 0.6)
        .collect();
    let w = (0..m * k)
        .map(|i| ((i * 104_729) % 997) as f32 * 1.1e-3 - 0.5)
        .collect();
    let bias = (0..m).map(|i| (i % 11) as f32 * 0.07 - 0.3).collect();
    (x, w, bias)
}

/// A product split across threads (by bands of rows when it has at least as many rows as
/// columns, by bands of columns when it has more columns and over 64 rows) sums every output
/// as one single-threaded `gemm` call does, bit for bit, so results do not depend on the
/// number of threads.
#[test]
fn split_products_equal_one_product_bit_for_bit() {
    use swerve_trainer::model::kernels::cpu::math;
    let pool = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    };
    let (one, three) = (pool(1), pool(3));
    // (rows, depth, columns): column bands, column bands of uneven width, row bands.
    for (n, k, m) in [
        (65, 768, 2048),
        (100, 300, 701),
        (300, 200, 64),
        (257, 96, 255),
    ] {
        let (x, w, bias) = product_operands(n, k, m);
        for b in [false, true] {
            let bias = b.then_some(&bias[..]);
            let run = |p: &rayon::ThreadPool| {
                p.install(|| math::linear_fwd(&x, &w, bias, None, (n, k, m)))
            };
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            assert_eq!(
                bits(run(&three)),
                bits(run(&one)),
                "{n}×{k}·{k}×{m}, bias {b}"
            );
        }
    }
}

/// Decoding's few-row products give `gemm`'s results bit for bit, with and without a residual
/// and a bias, over depths of one block and several (uneven) blocks, band widths that are and
/// are not a multiple of the band, and the shapes `gemm` computes another way (one row, at most
/// 256 outputs), which stay with `gemm`.
#[test]
fn few_row_products_are_gemms_bit_for_bit() {
    use swerve_trainer::model::kernels::cpu::math::{self, HostMatrix};
    let shapes = [
        (2, 768, 256),
        (4, 768, 768),
        (3, 2048, 200),
        (16, 1100, 96),
        (5, 3001, 130),
        (7, 64, 1000),
        (1, 500, 300),
        (4, 40, 60),
        (9, 3, 40),
    ];
    for (n, k, m) in shapes {
        let (x, w, bias) = product_operands(n, k, m);
        let residual: Vec<f32> = (0..n * m).map(|i| (i % 5) as f32 * 0.3 - 0.6).collect();
        let host = HostMatrix::new(w.clone(), m);
        for (b, r) in [(false, false), (true, false), (false, true), (true, true)] {
            let bias = b.then_some(&bias[..]);
            let want = math::linear_fwd(&x, &w, bias, r.then(|| residual.clone()), (n, k, m));
            let got =
                math::linear_fwd_host(&x, &host, bias, r.then(|| residual.clone()), (n, k, m));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{n}×{k}·{k}×{m}, bias {b}, residual {r}"
            );
        }
    }
}
