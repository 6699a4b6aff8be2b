//! CPU versus GPU parity, then a short training-like loop on the GPU with throughput.
//!
//! Built only with `--features cuda` and run by `scripts/gpu-check.sh` on a machine with an
//! NVIDIA GPU. It checks, on a small random model with grouped-query attention, that dfdx's CUDA
//! kernels give the same logits, the same gradients and the same cached decoding logits as the
//! CPU path (which the gradient checks and the transformers reference cover), then times AdamW
//! steps on a larger model and prints tokens per second. Exits non-zero on a mismatch.
//!
//! Arguments (all optional): `--steps N` (default 10), `--batch B` (8), `--seq S` (256),
//! `--hidden H` (512), `--layers L` (8), `--vocab V` (32000), `--checkpointing 0|1` (1:
//! recompute each layer in the backward pass, as training does by default). The loop prints
//! the memory plan's estimate for its shape (`swerve_trainer::train::plan`) beside the peak
//! that `gpu-check.sh` samples with `nvidia-smi`.

use std::time::Instant;

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::model::{
    AdamW, AdamWConfig, CausalLm, Kernels, KvCache, ModelConfig, ModelParams, Param, TokenBatch,
};
use swerve_trainer::train::plan::PlanInputs;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("numeric argument"))
        .unwrap_or(default)
}

fn config(
    vocab: usize,
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
) -> ModelConfig {
    ModelConfig::from_json(json!({
        "model_type": "qwen2", "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": hidden * 8 / 3, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "tie_word_embeddings": false
    }))
    .expect("valid config")
}

fn batch(rows: usize, cols: usize, vocab: usize) -> TokenBatch {
    let mut ids = Vec::with_capacity(rows * cols);
    let mut mask = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let pad = (r * 3) % (cols / 4).max(1);
        for c in 0..cols {
            ids.push(((r * 7919 + c * 104_729) % vocab) as u32);
            mask.push(c >= pad);
        }
    }
    TokenBatch::new(ids, mask, rows, cols).expect("consistent batch")
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn grads_by_name<D: Kernels<f32>>(
    model: &CausalLm<f32, D>,
    b: &TokenBatch,
    start: usize,
) -> Vec<(String, Vec<f32>)> {
    let out = model
        .token_logps(b, start, 0.9, model.params.alloc_grads())
        .expect("forward");
    let grads = model
        .params
        .keep_param_grads(out.logps.sum::<(), _>().negate().backward());
    model
        .params
        .named()
        .into_iter()
        .map(|(n, p)| {
            let g = match p {
                Param::Vector(t) => grads.get(t).as_vec(),
                Param::Matrix(t) => grads.get(t).as_vec(),
            };
            (n, g)
        })
        .collect()
}

fn parity() -> bool {
    let cfg = config(256, 64, 2, 8, 2);
    let cpu = Cpu::default();
    let gpu = Cuda::default();
    let on_cpu = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, Cpu>::random(&cfg, &cpu, 1, 0.1),
    );
    let on_gpu = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, Cuda>::random(&cfg, &gpu, 1, 0.1),
    );
    let b = batch(4, 24, cfg.vocab_size);
    let logits = max_abs(&on_cpu.logits(&b).as_vec(), &on_gpu.logits(&b).as_vec());
    println!("parity: max |logits cpu - gpu| = {logits:e}");
    let mut ok = logits < 1e-3;
    let mut worst_rel: f32 = 0.0;
    for ((name, gc), (_, gg)) in grads_by_name(&on_cpu, &b, 10)
        .iter()
        .zip(grads_by_name(&on_gpu, &b, 10))
    {
        let scale = gc.iter().map(|x| x.abs()).fold(0.0, f32::max).max(1e-6);
        let rel = max_abs(gc, &gg) / scale;
        if rel > 1e-3 {
            println!("parity: gradient of {name} differs: max rel {rel:e}");
            ok = false;
        }
        worst_rel = worst_rel.max(rel);
    }
    println!(
        "parity: worst gradient difference relative to the tensor's largest entry = {worst_rel:e}"
    );
    let prompts = vec![vec![1, 2, 3, 4], vec![9, 8]];
    let step = TokenBatch::new(vec![5, 6], vec![true, true], 2, 1).expect("batch");
    let first = TokenBatch::left_padded(&prompts, 0).expect("batch");
    let (mut cc, mut gc) = (KvCache::new(2), KvCache::new(2));
    on_cpu.forward_cached(&first, &mut cc).expect("cpu prompt");
    on_gpu.forward_cached(&first, &mut gc).expect("gpu prompt");
    let lc = on_cpu.forward_cached(&step, &mut cc).expect("cpu step");
    let lg = on_gpu.forward_cached(&step, &mut gc).expect("gpu step");
    let cached = max_abs(&lc.as_vec(), &lg.as_vec());
    println!("parity: max |cached decoding logits cpu - gpu| = {cached:e}");
    ok && cached < 1e-3
}

fn train_loop() {
    let (steps, rows, cols) = (arg("--steps", 10), arg("--batch", 8), arg("--seq", 256));
    let (hidden, layers, vocab) = (
        arg("--hidden", 512),
        arg("--layers", 8),
        arg("--vocab", 32000),
    );
    let cfg = config(vocab, hidden, layers, hidden / 64, (hidden / 64 / 4).max(1));
    let gpu = Cuda::default();
    let mut model = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, Cuda>::random(&cfg, &gpu, 2, 0.02),
    );
    model.gradient_checkpointing = arg("--checkpointing", 1) == 1;
    println!(
        "train: {} parameters, batch {rows}×{cols}, {layers} layers, hidden {hidden}, vocab \
         {vocab}, gradient checkpointing {}",
        model.params.num_parameters(),
        model.gradient_checkpointing,
    );
    let plan = PlanInputs {
        model: cfg.clone(),
        device: DeviceSpec::Cuda(0),
        kernels: model.kernels,
        rows,
        seq: cols,
        completion: cols - cols / 2,
        gradient_checkpointing: model.gradient_checkpointing,
        logits_chunk_rows: model.logits_chunk_rows,
        reference: false,
        generation: None,
    }
    .plan();
    println!("train: {}", plan.render(None));
    let b = batch(rows, cols, vocab);
    let start = cols / 2;
    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-4,
        ..AdamWConfig::default()
    });
    let mut timed = 0.0;
    for step in 0..steps {
        let t0 = Instant::now();
        let out = model
            .token_logps(&b, start, 1.0, model.params.alloc_grads())
            .expect("forward");
        let loss = out.logps.sum::<(), _>().negate();
        let loss_value = loss.retaped::<NoneTape>().as_vec()[0];
        let mut grads = model.params.keep_param_grads(loss.backward());
        let stats = opt.step(&mut model.params, &mut grads);
        gpu.synchronize();
        let dt = t0.elapsed().as_secs_f64();
        if step > 0 {
            timed += dt;
        }
        println!(
            "train: step {step} loss {loss_value:.4} grad_norm {:.4} {:.1} ms",
            stats.grad_norm,
            dt * 1e3
        );
    }
    if steps > 1 {
        let tokens = (rows * cols * (steps - 1)) as f64;
        println!(
            "train: {:.0} tokens/s (forward + backward + AdamW, steps 1..{steps})",
            tokens / timed
        );
    }
}

fn main() {
    let ok = parity();
    train_loop();
    if !ok {
        eprintln!("gpu_parity: CPU and GPU disagree");
        std::process::exit(1);
    }
    println!("gpu_parity: ok");
}
