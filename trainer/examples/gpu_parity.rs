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
//!    `--memory-seq` tokens (default 1024) with gradient checkpointing, then (`--big 1`, the
//!    default) the plan's headline shapes, 0.5B at 1 × 4096 and 3B at 8 × 1024: the device's
//!    peak memory in use during the steps (sampled every 0.5 ms on a thread of its own) against
//!    the plan, and tokens per second.
//!
//! `--phases-only 1` runs only `phases` instead: where one step's memory goes (peak in use in
//! the forward pass, backward pass, gradient norm and AdamW update, and what stays in use after
//! the step) for 3B at 8 × 1024 and 0.5B at 1 × 1024, the measurements the plan's CUDA items
//! were calibrated with.
//!
//! Exits non-zero when a parity stage fails.
//!
//! Arguments (all optional): `--steps N` (default 10), `--batch B` (8), `--seq S` (256),
//! `--hidden H` (512), `--layers L` (8), `--vocab V` (32000), `--checkpointing 0|1` (1:
//! recompute each layer in the backward pass, as training does by default), `--memory-seq N`
//! (1024; 0 skips the 0.5B sizes of the `memory` stage), `--big 0|1` (1), `--phases-only 0|1`
//! (0).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use dfdx::prelude::*;
use serde_json::json;
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::grpo::loss::{MicroBatchScope, ObjectiveParams};
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
        scope: MicroBatchScope {
            gradient_accumulation_steps: 1,
            ..MicroBatchScope::default()
        },
    };
    let out = model
        .token_logps(&b, start, 1.0, model.params.alloc_grads())
        .expect("forward");
    let loss = grpo_loss(
        out.logps,
        Some(out.entropy),
        &micro,
        &ObjectiveParams::new(0.2, Some(0.28), 0.04, false),
    )
    .expect("loss");
    let mut grads = model.params.keep_param_grads(loss.surrogate.backward());
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

/// The device's memory in use, sampled every half millisecond on a thread of its own
/// (`cuMemGetInfo` on the primary context dfdx uses), so that a step's transient peak is seen
/// and not only what is left allocated after it.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakSampler {
    fn start() -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            let dev = cudarc::driver::CudaDevice::new(0).expect("CUDA device 0");
            dev.bind_to_thread().expect("bind the context");
            while !s.load(Ordering::Relaxed) {
                if let Ok((free, total)) = cudarc::driver::result::mem_get_info() {
                    p.fetch_max((total - free) as u64, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        });
        PeakSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// The peak since the last reset (MiB), and a new start.
    fn take(&self) -> f64 {
        self.peak.swap(0, Ordering::Relaxed) as f64 / (1u64 << 20) as f64
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A Qwen2.5 shape ([`cheap_params`]) at the given micro-batches: the device's peak memory in
/// use during the steps against the plan (both include the CUDA context), and tokens/s.
fn memory_stage(name: &str, cfg: serde_json::Value, seq: usize, sizes: &[usize], steps: usize) {
    let cfg = ModelConfig::from_json(cfg).expect("Qwen2.5 config");
    let gpu = Cuda::default();
    let sampler = PeakSampler::start();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let idle = sampler.take();
    let mut model = CausalLm::new(cfg.clone(), cheap_params(&cfg, &gpu));
    model.gradient_checkpointing = true;
    let params = model.params.num_parameters();
    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-5,
        ..AdamWConfig::default()
    });
    println!(
        "memory: Qwen2.5-{name} shape, {params} parameters, {seq} tokens per row, device at {idle:.0} MiB before the weights"
    );
    for &rows in sizes {
        gpu.empty_cache();
        gpu.synchronize();
        sampler.take();
        let b = batch(rows, seq, cfg.vocab_size);
        let mut timed = Vec::new();
        for _ in 0..steps {
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
        let peak = sampler.take();
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
        let planned = plan.peak as f64 / (1u64 << 20) as f64;
        println!(
            "memory: {name} micro-batch {rows}×{seq}: peak {peak:.0} MiB in use, plan {planned:.0} MiB \
             (plan/measured {:.2}); step {step:.3} s, {:.0} tokens/s, MFU {:.1} % of 67 TFLOP/s f32",
            planned / peak,
            tokens / step,
            mfu * 100.0,
        );
    }
}

/// Weights uniform in ±0.02 from a linear congruential generator: for memory and speed the
/// values do not matter, and the 3B shape's 3 billion normal samples took minutes of device
/// time on the host.
fn cheap_params(cfg: &ModelConfig, gpu: &Cuda) -> ModelParams<f32, Cuda> {
    let mut k = 0u32;
    ModelParams::from_host(cfg, gpu, |_, shape| {
        let n: usize = shape.iter().product();
        Ok((0..n)
            .map(|_| {
                k = k.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (k >> 9) as f32 / (1u32 << 23) as f32 * 0.04 - 0.02
            })
            .collect())
    })
    .expect("weights")
}

/// `phases`: where one training step's memory goes on the GPU, for the plan's calibration. The
/// Qwen2.5-0.5B shape (cheap deterministic weights: values do not change memory) at `rows` ×
/// `seq`; the peak in use during the forward pass, the backward pass, the gradient norm and the
/// AdamW update, and what stays in use after the step, with dfdx's allocation cache as it is by
/// default, emptied after each step, and disabled.
fn phases_stage(name: &str, cfg: serde_json::Value, rows: usize, seq: usize, variants: &[&str]) {
    let cfg = ModelConfig::from_json(cfg).expect("config");
    let sampler = PeakSampler::start();
    // What is in use right now (the sampler gives peaks); dfdx's context is current here.
    let now = || {
        cudarc::driver::result::mem_get_info().map_or(f64::NAN, |(free, total)| {
            (total - free) as f64 / (1u64 << 20) as f64
        })
    };
    for &variant in variants {
        let gpu = Cuda::default();
        if variant == "no cache" {
            gpu.disable_cache();
        }
        let mut model = CausalLm::new(cfg.clone(), cheap_params(&cfg, &gpu));
        model.gradient_checkpointing = true;
        let mut opt = AdamW::new(AdamWConfig {
            lr: 1e-5,
            ..AdamWConfig::default()
        });
        let b = batch(rows, seq, cfg.vocab_size);
        gpu.synchronize();
        sampler.take();
        let weights = now();
        for step in 0..2 {
            let out = model
                .token_logps(&b, seq / 2, 1.0, model.params.alloc_grads())
                .expect("forward");
            let loss = out.logps.sum::<(), _>().negate();
            gpu.synchronize();
            let forward = sampler.take();
            let mut grads = model.params.keep_param_grads(loss.backward());
            gpu.synchronize();
            let backward = sampler.take();
            let _ = opt.grad_norm(&model.params, &mut grads);
            gpu.synchronize();
            let norm = sampler.take();
            opt.step(&mut model.params, &mut grads);
            gpu.synchronize();
            let update = sampler.take();
            drop(grads);
            if variant == "emptied after each step" {
                gpu.empty_cache();
            }
            gpu.synchronize();
            std::thread::sleep(std::time::Duration::from_millis(5));
            sampler.take();
            let after = now();
            println!(
                "phases: {name} {variant}, {rows}×{seq}, step {step}: weights loaded {weights:.0} MiB; peak in forward {forward:.0}, backward {backward:.0}, grad norm {norm:.0}, AdamW {update:.0}; in use after the step {after:.0}"
            );
        }
    }
}

fn qwen25(hidden: usize, inter: usize, layers: usize, heads: usize) -> serde_json::Value {
    json!({
        "model_type": "qwen2", "vocab_size": 151936, "hidden_size": hidden,
        "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
        "tie_word_embeddings": true
    })
}

fn main() {
    if arg("--phases-only", 0) == 1 {
        phases_stage("3B", qwen25(2048, 11008, 36, 16), 8, 1024, &["cache"]);
        phases_stage("0.5B", qwen25(896, 4864, 24, 14), 1, 1024, &["cache"]);
        return;
    }
    let mut ok = ops_parity();
    ok &= parity();
    ok &= memory_changes_parity();
    ok &= grpo_parity();
    train_loop();
    let memory_seq = arg("--memory-seq", 1024);
    if memory_seq > 0 {
        memory_stage("0.5B", qwen25(896, 4864, 24, 14), memory_seq, &[1, 2, 4], 3);
    }
    if arg("--big", 1) == 1 {
        // The plan's headline shapes (docs/benchmarks.md, "Memory"): 0.5B at one 4096-token
        // row, 3B at 8 rows of 1024.
        memory_stage("0.5B", qwen25(896, 4864, 24, 14), 4096, &[1], 3);
        memory_stage("3B", qwen25(2048, 11008, 36, 16), 1024, &[8], 2);
    }
    if !ok {
        eprintln!("gpu_parity: CPU and GPU disagree");
        std::process::exit(1);
    }
    println!("gpu_parity: ok");
}
