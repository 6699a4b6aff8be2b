//! CPU versus GPU parity, then a short training-like loop on the GPU with throughput, then
//! memory against the plan on a real shape. Each stage reports on its own (a line starting
//! with its name), so that one run decides what works.
//!
//! Built only with `--features cuda` and run by `scripts/gpu-check.sh` on a machine with an
//! NVIDIA GPU. Stages:
//! 1. `ops`: every block the reference path (what CUDA runs) is made of — linear with bias and
//!    residual, RMSNorm, RoPE, masked grouped-query attention, SwiGLU, the token
//!    log-probabilities — values and input gradients on the GPU against the CPU's
//!    `KernelMode::Reference`.
//! 2. `parity`: on a small random model with grouped-query attention, the GPU's logits,
//!    gradients and cached decoding logits against the CPU's.
//! 3. `memory-changes`: on the GPU, gradients with gradient checkpointing and the chunked LM
//!    head against the plain pass.
//! 4. `grpo`: one GRPO step (the clipped objective with a KL term, AdamW) on both devices; the
//!    updated weights compared.
//! 5. `train`: AdamW steps on a larger model, tokens per second and MFU (against the H200's
//!    67 TFLOP/s of f32), and the memory plan's estimate for its shape.
//! 6. `memory`: the Qwen2.5-0.5B shape (random weights) at micro-batches 1, 2 and 4 of
//!    `--memory-seq` tokens (default 1024) with gradient checkpointing: the device's memory in
//!    use after each step (dfdx's allocation cache keeps the high-water mark; emptied between
//!    sizes) against the plan, and tokens per second.
//!
//! Exits non-zero when a parity stage fails.
//!
//! Arguments (all optional): `--steps N` (default 10), `--batch B` (8), `--seq S` (256),
//! `--hidden H` (512), `--layers L` (8), `--vocab V` (32000), `--checkpointing 0|1` (1:
//! recompute each layer in the backward pass, as training does by default), `--memory-seq N`
//! (1024; 0 skips the `memory` stage).

use std::time::Instant;

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::grpo::loss::ObjectiveParams;
use swerve_trainer::model::{
    AdamW, AdamWConfig, CausalLm, KernelMode, Kernels, KvCache, ModelConfig, ModelParams, Param,
    TokenBatch,
};
use swerve_trainer::train::grpo_objective::{MicroBatch, grpo_loss};
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
        let params = model.params.num_parameters() as f64;
        println!(
            "train: {:.0} tokens/s (forward + backward + AdamW, steps 1..{steps}), MFU {:.1} % of \
             67 TFLOP/s f32 (6 × parameters × tokens)",
            tokens / timed,
            600.0 * params * tokens / timed / 67e12
        );
    }
}

/// Deterministic pseudo-random values in [-scale, scale).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Every reference block on device `D` from the same host inputs: each output and the gradient
/// of `Σ out · r` with respect to its inputs, by name.
fn op_outputs<D: Kernels<f32>>(dev: &D) -> Vec<(String, Vec<f32>)> {
    let mode = KernelMode::Reference;
    let (n, d, f) = (12, 32, 48);
    let t2 = |shape: (usize, usize), seed| {
        dev.tensor_from_vec(values(shape.0 * shape.1, seed, 1.0), shape)
    };
    let mut out = Vec::new();
    let mut record = |name: &str, v: Vec<f32>| out.push((name.to_owned(), v));
    // linear with bias and residual
    let x = t2((n, d), 1);
    let w = t2((f, d), 2);
    let b = dev.tensor_from_vec(values(f, 3, 1.0), (f,));
    let res = t2((n, f), 4);
    let y = D::linear(x.leaky_trace(), &w, Some(&b), Some(res.retaped()), mode);
    record("linear", y.retaped::<NoneTape>().as_vec());
    let g = (y * t2((n, f), 5)).sum::<(), _>().backward();
    record("linear dx", g.get(&x).as_vec());
    // RMSNorm
    let nw = dev.tensor_from_vec(values(d, 6, 1.0), (d,));
    let y = D::rms_norm(x.leaky_trace(), &nw, 1e-6, mode);
    record("rms_norm", y.retaped::<NoneTape>().as_vec());
    let g = (y * t2((n, d), 7)).sum::<(), _>().backward();
    record("rms_norm dx", g.get(&x).as_vec());
    // SwiGLU
    let up = t2((n, f), 8);
    let gate = t2((n, f), 9);
    let y = D::swiglu(gate.leaky_trace(), up.retaped(), mode);
    record("swiglu", y.retaped::<NoneTape>().as_vec());
    let g = (y * t2((n, f), 10)).sum::<(), _>().backward();
    record("swiglu dgate", g.get(&gate).as_vec());
    // token log-probabilities
    let logits = t2((n, 61), 11);
    let targets: Vec<usize> = (0..n).map(|i| (i * 7) % 61).collect();
    let (lp, entropy) = D::token_logps(logits.leaky_trace(), &targets, 0.8, mode);
    record("token_logps", lp.retaped::<NoneTape>().as_vec());
    record("entropy", entropy.as_vec());
    let g = (lp * dev.tensor_from_vec(values(n, 12, 1.0), (n,)))
        .sum::<(), _>()
        .backward();
    record("token_logps dlogits", g.get(&logits).as_vec());
    out
}

/// RoPE and masked grouped-query attention through a small model's context (left padding).
fn attention_outputs<D: Kernels<f32>>(dev: &D) -> Vec<(String, Vec<f32>)> {
    let cfg = config(64, 64, 1, 8, 2);
    let model = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, D>::random(&cfg, dev, 5, 0.1),
    );
    let (b, s, hd) = (2, 9, cfg.head_dim);
    let q_shape = (b, s, cfg.num_heads, hd);
    let kv_shape = (b, s, cfg.num_kv_heads, hd);
    let t4 = |shape: (usize, usize, usize, usize), seed| {
        dev.tensor_from_vec(
            values(shape.0 * shape.1 * shape.2 * shape.3, seed, 1.0),
            shape,
        )
    };
    let (q, k, v) = (t4(q_shape, 21), t4(kv_shape, 22), t4(kv_shape, 23));
    let mut mask = vec![true; b * s];
    mask[s..s + 3].fill(false);
    let ctx = model.context(b, s, 0, &mask);
    let mode = KernelMode::Reference;
    let roped = D::rope(q.leaky_trace(), &ctx, mode);
    let mut out = vec![("rope".to_owned(), roped.retaped::<NoneTape>().as_vec())];
    let g = (roped * t4(q_shape, 24)).sum::<(), _>().backward();
    out.push(("rope dq".to_owned(), g.get(&q).as_vec()));
    let a = D::attention(q.leaky_trace(), k.retaped(), v.retaped(), &ctx, mode);
    out.push(("attention".to_owned(), a.retaped::<NoneTape>().as_vec()));
    let width = cfg.num_heads * hd;
    let r = dev.tensor_from_vec(values(b * s * width, 25, 1.0), (b * s, width));
    let g = (a * r).sum::<(), _>().backward();
    out.push(("attention dq".to_owned(), g.get(&q).as_vec()));
    out
}

fn ops_parity() -> bool {
    let (cpu, gpu) = (Cpu::default(), Cuda::default());
    let mut ok = true;
    let cpu_out = [op_outputs(&cpu), attention_outputs(&cpu)].concat();
    let gpu_out = [op_outputs(&gpu), attention_outputs(&gpu)].concat();
    for ((name, c), (_, g)) in cpu_out.iter().zip(&gpu_out) {
        let scale = c.iter().map(|x| x.abs()).fold(0.0, f32::max).max(1e-6);
        let rel = max_abs(c, g) / scale;
        let pass = rel < 1e-4;
        ok &= pass;
        println!(
            "ops: {name:<22} max rel diff {rel:.2e} {}",
            if pass { "ok" } else { "MISMATCH" }
        );
    }
    ok
}

/// Gradients on the GPU with recomputed layers and a chunked LM head against the plain pass.
fn memory_changes_parity() -> bool {
    let cfg = config(256, 64, 3, 8, 2);
    let gpu = Cuda::default();
    let mut model = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, Cuda>::random(&cfg, &gpu, 3, 0.1),
    );
    let b = batch(3, 40, cfg.vocab_size);
    model.logits_chunk_rows = 1000;
    let plain = grads_by_name(&model, &b, 20);
    model.gradient_checkpointing = true;
    model.logits_chunk_rows = 7;
    let changed = grads_by_name(&model, &b, 20);
    let mut worst: f32 = 0.0;
    for ((_, a), (_, c)) in plain.iter().zip(&changed) {
        let scale = a.iter().map(|x| x.abs()).fold(0.0, f32::max).max(1e-6);
        worst = worst.max(max_abs(a, c) / scale);
    }
    let ok = worst < 1e-4;
    println!(
        "memory-changes: checkpointing + chunked head vs plain on the GPU: worst gradient rel diff \
         {worst:.2e} {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    ok
}

/// One GRPO step (clipped objective, KL term, AdamW) from the same weights on `dev`: the
/// updated weights by name.
fn grpo_step<D: Kernels<f32>>(dev: &D) -> Vec<(String, Vec<f32>)> {
    let cfg = config(256, 64, 2, 8, 2);
    let mut model = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, D>::random(&cfg, dev, 4, 0.1),
    );
    let b = batch(4, 24, cfg.vocab_size);
    let start = 12;
    let (rows, cols) = (4, 24 - start);
    let old: Vec<f64> = model
        .token_logps_no_grad(&b, start, 1.0)
        .expect("old logps")
        .logps
        .as_vec()
        .iter()
        .map(|&x| f64::from(x) - 0.05)
        .collect();
    let reference: Vec<f64> = old.iter().map(|x| x - 0.1).collect();
    let advantages = [1.0, -0.5, 0.25, -0.75];
    let mask = vec![1.0; rows * cols];
    let weights = vec![1.0 / (rows * cols) as f64; rows * cols];
    let micro = MicroBatch {
        old_logps: Some(&old),
        ref_logps: Some(&reference),
        advantages: &advantages,
        mask: &mask,
        weights: &weights,
    };
    let out = model
        .token_logps(&b, start, 1.0, model.params.alloc_grads())
        .expect("forward");
    let (loss, _) = grpo_loss(
        out.logps,
        &micro,
        &ObjectiveParams::new(0.2, Some(0.28), 0.04, false),
    )
    .expect("loss");
    let mut grads = model.params.keep_param_grads(loss.backward());
    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    });
    opt.step(&mut model.params, &mut grads);
    model
        .params
        .named()
        .into_iter()
        .map(|(n, p)| {
            let v = match p {
                Param::Vector(t) => t.as_vec(),
                Param::Matrix(t) => t.as_vec(),
            };
            (n, v)
        })
        .collect()
}

fn grpo_parity() -> bool {
    let mut cpu_model = grpo_step(&Cpu::default());
    let gpu_model = grpo_step(&Cuda::default());
    let mut worst: f32 = 0.0;
    for ((name, c), (_, g)) in cpu_model.iter_mut().zip(&gpu_model) {
        let d = max_abs(c, g);
        if d > 1e-4 {
            println!("grpo: {name} differs by {d:.2e} after the step");
        }
        worst = worst.max(d);
    }
    let ok = worst < 1e-4;
    println!(
        "grpo: weights after one step, max |cpu - gpu| = {worst:.2e} {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    ok
}

/// The device's memory in use (MiB), as `nvidia-smi` reports it.
fn device_memory_used() -> Option<f64> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
            "--id=0",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The Qwen2.5-0.5B shape at micro-batches 1, 2 and 4: memory against the plan, tokens/s.
fn memory_stage(seq: usize) {
    let cfg = ModelConfig::from_json(json!({
        "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
        "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
        "tie_word_embeddings": true
    }))
    .expect("Qwen2.5-0.5B config");
    let gpu = Cuda::default();
    let idle = device_memory_used().unwrap_or(f64::NAN);
    let mut model = CausalLm::new(
        cfg.clone(),
        ModelParams::<f32, Cuda>::random(&cfg, &gpu, 6, 0.02),
    );
    model.gradient_checkpointing = true;
    let params = model.params.num_parameters();
    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-5,
        ..AdamWConfig::default()
    });
    println!(
        "memory: Qwen2.5-0.5B shape, {params} parameters, {seq} tokens per row, device idle at {idle:.0} MiB"
    );
    for rows in [1, 2, 4] {
        gpu.empty_cache();
        let b = batch(rows, seq, cfg.vocab_size);
        let mut timed = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            let out = model
                .token_logps(&b, seq / 2, 1.0, model.params.alloc_grads())
                .expect("forward");
            let loss = out.logps.sum::<(), _>().negate();
            let mut grads = model.params.keep_param_grads(loss.backward());
            opt.step(&mut model.params, &mut grads);
            gpu.synchronize();
            timed.push(t0.elapsed().as_secs_f64());
        }
        let used = device_memory_used().unwrap_or(f64::NAN) - idle;
        let plan = PlanInputs {
            model: cfg.clone(),
            device: DeviceSpec::Cuda(0),
            kernels: model.kernels,
            rows,
            seq,
            completion: seq - seq / 2,
            gradient_checkpointing: true,
            logits_chunk_rows: model.logits_chunk_rows,
            reference: false,
            generation: None,
        }
        .plan();
        let step = timed[1..].iter().sum::<f64>() / (timed.len() - 1) as f64;
        let tokens = (rows * seq) as f64;
        let mfu = 6.0 * params as f64 * tokens / step / 67e12;
        println!(
            "memory: micro-batch {rows}×{seq}: {used:.0} MiB in use, plan {:.0} MiB (plan/measured \
             {:.2}); step {step:.3} s, {:.0} tokens/s, MFU {:.1} % of 67 TFLOP/s f32",
            plan.peak as f64 / (1u64 << 20) as f64,
            plan.peak as f64 / (1u64 << 20) as f64 / used,
            tokens / step,
            mfu * 100.0,
        );
    }
}

fn main() {
    let mut ok = ops_parity();
    ok &= parity();
    ok &= memory_changes_parity();
    ok &= grpo_parity();
    train_loop();
    let memory_seq = arg("--memory-seq", 1024);
    if memory_seq > 0 {
        memory_stage(memory_seq);
    }
    if !ok {
        eprintln!("gpu_parity: CPU and GPU disagree");
        std::process::exit(1);
    }
    println!("gpu_parity: ok");
}
