//! CPU throughput of the trainer's model: a GRPO-shaped training step and KV-cache generation,
//! for the bundled tiny config and the ~100M benchmark config, against PyTorch.
//!
//! ```text
//! cargo bench -p swerve-trainer --bench train_step                      # both configs
//! cargo bench -p swerve-trainer --bench train_step -- --python /tmp/refvenv/bin/python
//! cargo bench -p swerve-trainer --bench train_step -- --only tiny --steps 10
//! cargo bench -p swerve-trainer --bench train_step -- --decode --python /tmp/refvenv/bin/python
//! cargo bench -p swerve-trainer --bench train_step -- --ranks --steps 4
//! cargo bench -p swerve-trainer --bench train_step -- --products --only base-100m
//! ```
//!
//! A training step is what GRPO does per micro-batch: `B × S` tokens (prompt and completion, no
//! padding) go through the model with gradients; the log-probabilities of the last `C` tokens are
//! weighted by per-row advantages into a loss; backward; gradient clipping and an AdamW step.
//! Generation samples `G` new tokens per row after a `P`-token prompt with the KV cache.
//! `--decode` times generation alone over a grid of batch sizes and lengths (`B` ∈ {4, 16},
//! `G` ∈ {32, 256}, `P` = 64) and prints one row per cell with the ratio to PyTorch.
//!
//! Each case runs in a child process (this binary with `--case`), so that the peak resident
//! memory (`VmHWM`) belongs to that case alone. With `--python` the same cases also run through
//! `benches/pytorch/train_step.py` (transformers' `Qwen2ForCausalLM`, `torch.optim.AdamW`). All
//! runs use `--threads` threads (`RAYON_NUM_THREADS` for dfdx's matmul, `torch.set_num_threads`
//! for PyTorch). `--rounds N` alternates the two implementations N times per case and reports
//! medians, so that a noisy machine slows both alike. Results: one JSON object per run on
//! stderr, a Markdown table on stdout.
//!
//! `--products` times the linear layers' matrix products alone, on each case's shapes: two
//! products one after the other, each split over all threads, against the two side by side,
//! and the layer's backward (its input and weight gradients) on the same shape.
//!
//! `--ranks` times `trainer sft` (the `trainer` binary, built with `mpi` for the bench) on a
//! random model of each config with the same global batch as 1 process × `--threads` threads and
//! as `mpirun -np 2` ranks × `--threads / 2` threads: the median step time and tokens/s of the
//! steps after the first, and the bytes the ranks all-reduce per step (every gradient once, f32).
//!
//! The table's "step GFLOP/s" is the step's arithmetic ([`step_gflop`], counted from the config)
//! over its time. With `--python`, each case also times PyTorch's matrix product alone on the
//! model's linear-layer shapes (`train_step.py --matmul-peak`) and prints both steps' rates as
//! multiples of it: how close each comes to the machine's matrix-product rate as PyTorch's BLAS
//! sees it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use dfdx::prelude::*;
use serde_json::{Value, json};
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::generate::{SamplingConfig, generate};
use swerve_trainer::model::{
    AdamW, AdamWConfig, CausalLm, KernelMode, ModelConfig, ModelParams, TokenBatch,
};
use swerve_trainer::train::plan::PlanInputs;

/// Trainer throughput benchmark (see the file's documentation)
#[derive(Debug, Parser)]
struct Args {
    /// Run only the named case (`tiny` or `base-100m`)
    #[arg(long)]
    only: Option<String>,
    /// Timed training steps per case (the median is reported), after one warm-up step
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Threads for both implementations
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Rounds per case: each round runs swerve then PyTorch, so that a busy or noisy machine
    /// slows both alike; the table reports medians over rounds (and the step's range)
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// A Python with torch and transformers, to run the PyTorch comparison
    #[arg(long)]
    python: Option<PathBuf>,
    /// PyTorch's attention implementation (`eager` or `sdpa`); with an attention mask, `sdpa`
    /// was the slower of the two on CPU (docs/benchmarks.md)
    #[arg(long, default_value = "eager")]
    torch_attn: String,
    /// Time generation alone over the grid of batch sizes and lengths (see the file's
    /// documentation) instead of the training step
    #[arg(long)]
    decode: bool,
    /// Peak memory and step time of the training step with each memory change on and off
    /// (gradient checkpointing, the chunked LM head) on the fused and the reference kernels,
    /// beside the memory plan's estimate (`swerve_trainer::train::plan`)
    #[arg(long)]
    memory: bool,
    /// Data-parallel ranks: `trainer sft` as one process against two ranks under `mpirun`,
    /// same global batch (see the file's documentation)
    #[arg(long)]
    ranks: bool,
    /// The linear layers' products alone on each case's shapes: two products of one shape one
    /// after the other, each on all threads, against the two side by side (what the kernels
    /// do for a layer's input and weight gradients, and for the gate and up products), and
    /// the layer's backward on the same shape
    #[arg(long)]
    products: bool,
    /// Internal: with `--case`, recompute layers in the backward pass
    #[arg(long, hide = true)]
    checkpointing: bool,
    /// Internal: with `--case`, rows of the LM head at once (0: the model's default)
    #[arg(long, hide = true, default_value_t = 0)]
    chunk_rows: usize,
    /// Internal: with `--case`, dfdx's own operations (what CUDA runs) instead of the fused
    /// kernels
    #[arg(long, hide = true)]
    reference: bool,
    /// Internal: run one case in this process and print its JSON (`name`)
    #[arg(long, hide = true)]
    case: Option<String>,
    /// Internal: with `--case`, time only the generation of `B,G` (rows, new tokens)
    #[arg(long, hide = true, value_parser = parse_pair)]
    gen_only: Option<(usize, usize)>,
    /// Passed by `cargo bench`; ignored
    #[arg(long, hide = true)]
    bench: bool,
}

/// One benchmark case: a config and the batch shapes.
#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    /// Path of the config.json relative to the trainer crate.
    config: &'static str,
    /// Rows B.
    batch: usize,
    /// Tokens per row S.
    seq: usize,
    /// Completion tokens per row C (the positions whose log-probabilities count).
    completion: usize,
    /// Prompt tokens per row for generation P.
    gen_prompt: usize,
    /// New tokens per row for generation G.
    gen_tokens: usize,
}

const CASES: [Case; 2] = [
    Case {
        name: "tiny",
        config: "assets/tiny/config.json",
        batch: 8,
        seq: 256,
        completion: 128,
        gen_prompt: 64,
        gen_tokens: 64,
    },
    Case {
        name: "base-100m",
        config: "assets/base-100m/config.json",
        batch: 4,
        seq: 256,
        completion: 128,
        gen_prompt: 64,
        gen_tokens: 32,
    },
];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some(name) = &args.case {
        // What the trainer binary does first: see swerve_trainer::runtime.
        swerve_trainer::runtime::init()?;
        let case = find_case(name)?;
        let config = crate_dir.join(case.config);
        let result = match args.gen_only {
            Some((rows, tokens)) => run_generation(&case, &config, rows, tokens)?,
            None => run_case(&case, &config, &args)?,
        };
        println!("{result}");
        return Ok(());
    }
    let exe = std::env::current_exe().context("cannot find the benchmark binary")?;
    // Every table's figures hold for this CPU only (docs/benchmarks.md).
    println!("CPU: {}\n", swerve_trainer::runtime::cpu_label());
    if args.decode {
        return decode_grid(&args, &exe, crate_dir);
    }
    if args.memory {
        return memory_table(&args, &exe);
    }
    if args.ranks {
        return ranks_table(&args, crate_dir);
    }
    if args.products {
        return products_table(&args, crate_dir);
    }
    // (case, implementation) → one result per round, in order of first appearance.
    let mut rows: Vec<(&str, String, Vec<Value>)> = Vec::new();
    let mut record = |case: &'static str, r: Value| {
        let name = r["impl"].as_str().unwrap_or("?").to_string();
        match rows.iter_mut().find(|(c, n, _)| *c == case && *n == name) {
            Some((_, _, v)) => v.push(r),
            None => rows.push((case, name, vec![r])),
        }
    };
    // Per case: the best rate PyTorch's matrix product reaches on the model's shapes.
    let mut peaks: Vec<(&str, f64)> = Vec::new();
    for case in selected_cases(&args) {
        if let Some(python) = &args.python {
            let mut peak = torch_command(python, case, &args, crate_dir);
            peak.arg("--matmul-peak");
            let result = run_child(peak)?;
            peaks.push((
                case.name,
                result["matmul_gflops"].as_f64().unwrap_or(f64::NAN),
            ));
        }
        for _ in 0..args.rounds.max(1) {
            let mut rust = Command::new(&exe);
            rust.args(["--case", case.name, "--steps", &args.steps.to_string()])
                .env("RAYON_NUM_THREADS", args.threads.to_string());
            record(case.name, run_child(rust)?);
            if let Some(python) = &args.python {
                record(
                    case.name,
                    run_child(torch_command(python, case, &args, crate_dir))?,
                );
            }
        }
    }
    println!(
        "| case | implementation | params | B×S (C) | step s (range) | step GFLOP/s | train tok/s | gen tok/s (B×G) | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, implementation, runs) in &rows {
        let med = |k: &str| {
            let mut v: Vec<f64> = runs
                .iter()
                .map(|r| r[k].as_f64().unwrap_or(f64::NAN))
                .collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let steps: Vec<f64> = runs
            .iter()
            .map(|r| r["step_s"].as_f64().unwrap_or(f64::NAN))
            .collect();
        let (lo, hi) = steps.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
            (lo.min(*s), hi.max(*s))
        });
        let case = find_case(name)?;
        let gflop = step_gflop(
            &case,
            &ModelConfig::from_file(&crate_dir.join(case.config))?,
        );
        println!(
            "| {name} | {implementation} | {:.1}M | {}×{} ({}) | {:.3} ({:.3}–{:.3}) | {:.0} | {:.0} | {:.1} ({}×{}) | {:.0} |",
            med("params") / 1e6,
            case.batch,
            case.seq,
            case.completion,
            med("step_s"),
            lo,
            hi,
            gflop / med("step_s"),
            (case.batch * case.seq) as f64 / med("step_s"),
            med("gen_tok_s"),
            case.batch,
            case.gen_tokens,
            med("peak_rss_mib"),
        );
    }
    for (name, peak) in peaks {
        let case = find_case(name)?;
        let gflop = step_gflop(
            &case,
            &ModelConfig::from_file(&crate_dir.join(case.config))?,
        );
        let rates: Vec<String> = rows
            .iter()
            .filter(|(c, _, _)| *c == name)
            .map(|(_, implementation, runs)| {
                let step = median(runs.iter().filter_map(|r| r["step_s"].as_f64()).collect());
                format!("{implementation} {:.2}×", gflop / step / peak)
            })
            .collect();
        println!(
            "\n{name}: a step is {gflop:.1} GFLOP of matrix products and attention. PyTorch's \
             matrix product alone reaches {peak:.0} GFLOP/s on this model's shapes here ({} \
             threads); whole steps run at that rate times: {}.",
            args.threads,
            rates.join(", "),
        );
    }
    Ok(())
}

/// The arithmetic of one training step of `case`, in GFLOP (a multiply-add is two): the
/// linear layers over all `B × S` tokens, causal attention, and the LM head over the `C`
/// completion positions, forward; backward is twice the forward (gradients of the inputs and
/// of the weights). Norms, activations, the softmax and the optimiser are left out: they are a
/// few percent of it.
fn step_gflop(case: &Case, config: &ModelConfig) -> f64 {
    let (h, i, v) = (
        config.hidden_size as f64,
        config.intermediate_size as f64,
        config.vocab_size as f64,
    );
    let q = (config.num_heads * config.head_dim) as f64;
    let kv = (config.num_kv_heads * config.head_dim) as f64;
    let (b, s, c) = (case.batch as f64, case.seq as f64, case.completion as f64);
    let linear_per_token = h * (q + 2.0 * kv) + q * h + 3.0 * h * i;
    // Query–key products and the weighted sum of values, over the S (S + 1) / 2 causal pairs.
    let attention_per_row = 2.0 * q * s * (s + 1.0) / 2.0;
    let layers = config.num_layers as f64;
    let forward_macs = layers * (b * s * linear_per_token + b * attention_per_row) + b * c * h * v;
    3.0 * 2.0 * forward_macs / 1e9
}

/// The `--decode` grid: (rows, new tokens) per cell.
const DECODE_GRID: [(usize, usize); 4] = [(4, 32), (16, 32), (4, 256), (16, 256)];

fn parse_pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once(',').ok_or("expected B,G")?;
    let num = |x: &str| x.trim().parse::<usize>().map_err(|e| format!("`{x}`: {e}"));
    Ok((num(a)?, num(b)?))
}

/// Generation alone over [`DECODE_GRID`], swerve and (with `--python`) PyTorch alternating per
/// round; medians over rounds.
fn decode_grid(args: &Args, exe: &Path, crate_dir: &Path) -> anyhow::Result<()> {
    let mut table = Vec::new();
    for case in selected_cases(args) {
        for (rows, tokens) in DECODE_GRID {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for _ in 0..args.rounds.max(1) {
                let mut rust = Command::new(exe);
                rust.args([
                    "--case",
                    case.name,
                    "--gen-only",
                    &format!("{rows},{tokens}"),
                ])
                .env("RAYON_NUM_THREADS", args.threads.to_string());
                ours.push(run_child(rust)?["gen_tok_s"].as_f64().unwrap_or(f64::NAN));
                if let Some(python) = &args.python {
                    let shaped = Case {
                        batch: rows,
                        gen_tokens: tokens,
                        ..*case
                    };
                    let mut torch = torch_command(python, &shaped, args, crate_dir);
                    torch.arg("--gen-only");
                    theirs.push(run_child(torch)?["gen_tok_s"].as_f64().unwrap_or(f64::NAN));
                }
            }
            table.push((case.name, rows, tokens, median(ours), median(theirs)));
        }
    }
    println!("| case | B×G (P = 64) | swerve gen tok/s | PyTorch gen tok/s | swerve / PyTorch |");
    println!("|---|---|---|---|---|");
    for (name, rows, tokens, ours, theirs) in table {
        println!(
            "| {name} | {rows}×{tokens} | {ours:.1} | {theirs:.1} | {:.2}× |",
            ours / theirs
        );
    }
    Ok(())
}

/// A token id in `2..vocab` from a xorshift generator: reproducible ids without another
/// dependency.
fn random_token(state: &mut u64, vocab: usize) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % (vocab as u64 - 2)) as u32 + 2
}

/// The `--products` table: per linear-layer shape `rows × in → out` of each case (the
/// decoder's four over the `B·S` rows, the LM head over the `B·C` completion rows), the GFLOP/s
/// of two such products one after the other on all `--threads` threads and of the two side by
/// side ([`math::side_by_side`]), and of the layer's backward ([`math::linear_bwd`]) on the
/// same shape; medians of `max(--rounds, 5)` rounds alternating the three.
fn products_table(args: &Args, crate_dir: &Path) -> anyhow::Result<()> {
    use swerve_trainer::model::kernels::cpu::math;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    println!(
        "| case | rows × in → out | one after the other, GFLOP/s | side by side, GFLOP/s | ratio | backward, GFLOP/s |"
    );
    println!("|---|---|---|---|---|---|");
    for case in selected_cases(args) {
        let config = ModelConfig::from_file(&crate_dir.join(case.config))?;
        let (h, f) = (config.hidden_size, config.intermediate_size);
        let (n, c) = (case.batch * case.seq, case.batch * case.completion);
        let q = config.num_heads * config.head_dim;
        let mut shapes = vec![
            (n, h, f),
            (n, f, h),
            (n, h, q),
            (n, q, h),
            (c, h, config.vocab_size),
        ];
        shapes.dedup();
        for (rows, k, m) in shapes {
            let x: Vec<f32> = (0..rows * k).map(|i| (i % 97) as f32 * 1e-2).collect();
            let w: [Vec<f32>; 2] =
                std::array::from_fn(|j| (0..m * k).map(|i| ((i + j) % 89) as f32 * 1e-2).collect());
            let gflop = 2.0 * 2.0 * (rows * k * m) as f64 / 1e9;
            let product =
                |t: usize, w: &[f32]| math::linear_fwd_on(t, &x, w, None, None, (rows, k, m));
            // The layer's backward (`linear_bwd`: input and weight gradients, the same
            // arithmetic as the two forward products), into gradients it adds to.
            let dy: Vec<f32> = (0..rows * m).map(|i| (i % 83) as f32 * 1e-2).collect();
            let (mut dx, mut dw) = (vec![0.0f32; rows * k], vec![0.0f32; m * k]);
            let (mut shared, mut beside, mut backward) = (Vec::new(), Vec::new(), Vec::new());
            pool.install(|| {
                // One of each first: the outputs' pages and the packing buffers are faulted in.
                std::hint::black_box(math::side_by_side(
                    |t| product(t, &w[0]),
                    |t| product(t, &w[1]),
                ));
                math::linear_bwd(&dy, &x, &w[0], (rows, k, m), &mut dx, &mut dw, None);
                for _ in 0..args.rounds.max(5) {
                    let start = Instant::now();
                    std::hint::black_box((
                        product(args.threads, &w[0]),
                        product(args.threads, &w[1]),
                    ));
                    shared.push(gflop / start.elapsed().as_secs_f64());
                    let start = Instant::now();
                    std::hint::black_box(math::side_by_side(
                        |t| product(t, &w[0]),
                        |t| product(t, &w[1]),
                    ));
                    beside.push(gflop / start.elapsed().as_secs_f64());
                    let start = Instant::now();
                    math::linear_bwd(&dy, &x, &w[0], (rows, k, m), &mut dx, &mut dw, None);
                    backward.push(gflop / start.elapsed().as_secs_f64());
                }
            });
            let (shared, beside, backward) = (median(shared), median(beside), median(backward));
            println!(
                "| {} | {rows} × {k} → {m} | {shared:.1} | {beside:.1} | {:.2}× | {backward:.1} |",
                case.name,
                beside / shared
            );
        }
    }
    Ok(())
}

/// The median (NaN for none).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Times one generation of `rows` × `tokens` after a warm-up of two tokens, in this process.
fn run_generation(
    case: &Case,
    config_path: &Path,
    rows: usize,
    tokens: usize,
) -> anyhow::Result<Value> {
    let dev = Cpu::default();
    let config = ModelConfig::from_file(config_path)?;
    let params = ModelParams::<f32, Cpu>::random(&config, &dev, 0, 0.02);
    let model = CausalLm::new(config.clone(), params);
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let prompts: Vec<Vec<u32>> = (0..rows)
        .map(|_| {
            (0..case.gen_prompt)
                .map(|_| random_token(&mut state, config.vocab_size))
                .collect()
        })
        .collect();
    timed_generation(&model, &prompts, 2)?;
    let (gen_s, gen_tok_s) = timed_generation(&model, &prompts, tokens)?;
    Ok(json!({
        "impl": "swerve (dfdx 0.13, fused CPU kernels)",
        "config": config_path,
        "batch": rows,
        "gen_tokens": tokens,
        "threads": rayon_threads(),
        "gen_s": gen_s,
        "gen_tok_s": gen_tok_s,
        "peak_rss_mib": peak_rss_mib(),
    }))
}

/// Samples `tokens` new tokens per prompt (temperature 1, no EOS) and returns the seconds it
/// took and the tokens per second.
fn timed_generation(
    model: &CausalLm<f32, Cpu>,
    prompts: &[Vec<u32>],
    tokens: usize,
) -> anyhow::Result<(f64, f64)> {
    let sampling = SamplingConfig {
        max_new_tokens: tokens,
        eos_token_ids: Vec::new(),
        pad_token_id: 1,
        ..SamplingConfig::default()
    };
    let t0 = Instant::now();
    let out = generate(model, prompts, &sampling)?;
    let gen_s = t0.elapsed().as_secs_f64();
    let generated: usize = out.completions.iter().map(Vec::len).sum();
    Ok((gen_s, generated as f64 / gen_s))
}

/// The PyTorch side of `case`.
fn torch_command(python: &Path, case: &Case, args: &Args, crate_dir: &Path) -> Command {
    let script = crate_dir.join("../benches/pytorch/train_step.py");
    let mut torch = Command::new(python);
    torch
        .arg(script)
        .arg("--config")
        .arg(crate_dir.join(case.config))
        .args([
            "--batch",
            &case.batch.to_string(),
            "--seq",
            &case.seq.to_string(),
            "--completion",
            &case.completion.to_string(),
            "--steps",
            &args.steps.to_string(),
            "--gen-prompt",
            &case.gen_prompt.to_string(),
            "--gen-tokens",
            &case.gen_tokens.to_string(),
            "--threads",
            &args.threads.to_string(),
            "--attn",
            &args.torch_attn,
        ])
        .env("OMP_NUM_THREADS", args.threads.to_string());
    torch
}

/// The cases `--only` selects (all without it).
fn selected_cases(args: &Args) -> impl Iterator<Item = &'static Case> + '_ {
    CASES
        .iter()
        .filter(|c| args.only.as_deref().is_none_or(|o| o == c.name))
}

fn find_case(name: &str) -> anyhow::Result<Case> {
    match CASES.iter().find(|c| c.name == name) {
        Some(c) => Ok(*c),
        None => bail!("unknown case `{name}` (tiny, base-100m)"),
    }
}

/// Runs a child that prints one JSON object as its last stdout line.
fn run_child(mut cmd: Command) -> anyhow::Result<Value> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    eprintln!("{line}");
    serde_json::from_str(line).with_context(|| format!("{cmd:?} printed no JSON: {stdout}"))
}

/// Times the training step and generation of `case` in this process.
fn run_case(case: &Case, config_path: &Path, args: &Args) -> anyhow::Result<Value> {
    let steps = args.steps;
    let dev = Cpu::default();
    let config = ModelConfig::from_file(config_path)?;
    let params = ModelParams::<f32, Cpu>::random(&config, &dev, 0, 0.02);
    let num_params = params.num_parameters();
    let mut model = CausalLm::new(config.clone(), params);
    model.gradient_checkpointing = args.checkpointing;
    model.logits_chunk_rows = args.chunk_rows;
    if args.reference {
        model.kernels = KernelMode::Reference;
    }
    let mut opt = AdamW::new(AdamWConfig::default());

    let (b, s, c) = (case.batch, case.seq, case.completion);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next_token = || random_token(&mut state, config.vocab_size);
    let ids: Vec<u32> = (0..b * s).map(|_| next_token()).collect();
    let batch = TokenBatch::new(ids, vec![true; b * s], b, s)?;
    let advantages: Vec<f32> = (0..b)
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();

    // Seconds of (whole step, forward, backward, optimiser).
    let mut step = |model: &mut CausalLm<f32, Cpu>| -> anyhow::Result<[f64; 4]> {
        let t0 = Instant::now();
        let out = model.token_logps(&batch, s - c, 1.0, model.params.alloc_grads())?;
        let adv = dev
            .tensor_from_vec(advantages.clone(), (b,))
            .broadcast_like::<_, Axis<1>>(&(b, c));
        let loss = (out.logps * adv).mean::<(), _>().negate();
        let t1 = Instant::now();
        let mut grads = model.params.keep_param_grads(loss.backward());
        let t2 = Instant::now();
        opt.step(&mut model.params, &mut grads);
        let t3 = Instant::now();
        Ok([t3 - t0, t1 - t0, t2 - t1, t3 - t2].map(|d| d.as_secs_f64()))
    };
    step(&mut model)?;
    let times = (0..steps.max(1))
        .map(|_| step(&mut model))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let median = |i: usize| {
        let mut v: Vec<f64> = times.iter().map(|t| t[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let step_s = median(0);
    let train_peak = peak_rss_mib();
    let plan = PlanInputs {
        model: config.clone(),
        device: DeviceSpec::Cpu,
        kernels: model.kernels,
        rows: b,
        seq: s,
        completion: c,
        gradient_checkpointing: model.gradient_checkpointing,
        logits_chunk_rows: model.logits_chunk_rows,
        reference: false,
        generation: None,
    }
    .plan();
    if args.memory {
        return Ok(json!({
            "step_s": step_s,
            "train_peak_rss_mib": train_peak,
            "plan_mib": plan.peak as f64 / (1u64 << 20) as f64,
        }));
    }

    let prompts: Vec<Vec<u32>> = (0..b)
        .map(|_| (0..case.gen_prompt).map(|_| next_token()).collect())
        .collect();
    let (gen_s, gen_tok_s) = timed_generation(&model, &prompts, case.gen_tokens)?;

    Ok(json!({
        "impl": "swerve (dfdx 0.13, fused CPU kernels)",
        "config": config_path,
        "params": num_params,
        "batch": b,
        "seq": s,
        "completion": c,
        "threads": rayon_threads(),
        "step_s": step_s,
        "steps_ms": times.iter().map(|t| (t[0] * 1e3).round()).collect::<Vec<_>>(),
        "forward_s": median(1),
        "backward_s": median(2),
        "optimizer_s": median(3),
        "train_tok_s": (b * s) as f64 / step_s,
        "gen_s": gen_s,
        "gen_tok_s": gen_tok_s,
        "train_peak_rss_mib": train_peak,
        "plan_train_mib": plan.peak as f64 / (1u64 << 20) as f64,
        "peak_rss_mib": peak_rss_mib(),
    }))
}

/// `--memory`: per case, the training step with each memory change on and off, on both kernel
/// paths; one child process per run, so that each peak is its own.
fn memory_table(args: &Args, exe: &Path) -> anyhow::Result<()> {
    println!(
        "| case | kernels | gradient checkpointing | LM head | step s | peak RSS MiB | plan MiB | plan / measured |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for case in selected_cases(args) {
        let rows = case.batch * case.completion;
        let chunk = (rows / 8).max(1);
        for reference in [false, true] {
            for (checkpointing, chunked) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let mut child = Command::new(exe);
                child
                    .args([
                        "--case",
                        case.name,
                        "--steps",
                        &args.steps.to_string(),
                        "--memory",
                    ])
                    .args([
                        "--chunk-rows",
                        &(if chunked { chunk } else { rows }).to_string(),
                    ])
                    .env("RAYON_NUM_THREADS", args.threads.to_string());
                if checkpointing {
                    child.arg("--checkpointing");
                }
                if reference {
                    child.arg("--reference");
                }
                let r = run_child(child)?;
                let (measured, plan) = (
                    r["train_peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
                    r["plan_mib"].as_f64().unwrap_or(f64::NAN),
                );
                println!(
                    "| {} | {} | {} | {} | {:.3} | {measured:.0} | {plan:.0} | {:.2} |",
                    case.name,
                    if reference {
                        "reference (CUDA's)"
                    } else {
                        "fused"
                    },
                    if checkpointing { "on" } else { "off" },
                    if chunked {
                        format!("chunks of {chunk} rows")
                    } else {
                        "whole".into()
                    },
                    r["step_s"].as_f64().unwrap_or(f64::NAN),
                    plan / measured,
                );
            }
        }
    }
    Ok(())
}

fn rayon_threads() -> Option<usize> {
    std::env::var("RAYON_NUM_THREADS").ok()?.parse().ok()
}

/// The resident-set high-water mark of this process (`VmHWM` in /proc/self/status), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// `--ranks`: `trainer sft` as one process and as two ranks on the same global batch,
/// alternating `--rounds` times; medians over rounds of each run's median step.
fn ranks_table(args: &Args, crate_dir: &Path) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let tokenizer = crate_dir.join("assets/tiny/tokenizer.json");
    println!(
        "| case | layout | per-device batch | step s | tokens/s | all-reduced per step | all-reduce s | vs one process |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for case in selected_cases(args) {
        let config = ModelConfig::from_file(&crate_dir.join(case.config))?;
        let model = CausalLm::<f32, Cpu>::new(
            config.clone(),
            ModelParams::random(&config, &Cpu::default(), 1, 0.02),
        );
        let model_dir = work.path().join(case.name);
        swerve_trainer::checkpoint::save(&model_dir, &model, Some(&tokenizer), None, None)?;
        let bytes = 4 * model.params.num_parameters();
        drop(model);
        // Prompts and completions of the fixture vocabulary's words, distinct per example.
        let words = |i: usize, n: usize| -> String {
            (0..n)
                .map(|k| format!("w{}", (i * 7 + k * 13) % 97))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let examples = case.batch * (args.steps + 1);
        let pairs: String = (0..examples)
            .map(|i| {
                json!({"prompt": words(i, case.seq / 2), "completion": words(i + 1, case.completion)})
                    .to_string()
                    + "\n"
            })
            .collect();
        let data = work.path().join(format!("{}.jsonl", case.name));
        std::fs::write(&data, pairs)?;
        let layouts = [(1, args.threads), (2, (args.threads / 2).max(1))];
        // Per layout: (step s, tokens/s, all-reduce s) of each round.
        let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); layouts.len()];
        for _ in 0..args.rounds.max(1) {
            for (k, &(ranks, threads)) in layouts.iter().enumerate() {
                let out = work.path().join(format!("{}-{ranks}", case.name));
                if out.exists() {
                    std::fs::remove_dir_all(&out)?;
                }
                runs[k].push(sft_run(
                    &model_dir, &data, &out, case, args.steps, ranks, threads,
                )?);
            }
        }
        let median = |v: Vec<f64>| -> f64 {
            let mut v = v;
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        let mut one_step = f64::NAN;
        for (k, &(ranks, threads)) in layouts.iter().enumerate() {
            let step = median(runs[k].iter().map(|r| r.0).collect());
            let rate = median(runs[k].iter().map(|r| r.1).collect());
            let reduce = median(runs[k].iter().map(|r| r.2).collect());
            let batch = case.batch / ranks;
            let (layout, reduced, reduce_time, ratio) = if ranks == 1 {
                one_step = step;
                (
                    format!("1 process × {threads} threads"),
                    "—".to_owned(),
                    "—".to_owned(),
                    "1.00×".to_owned(),
                )
            } else {
                (
                    format!("{ranks} ranks × {threads} thread(s)"),
                    format!("{:.1} MB", bytes as f64 / 1e6),
                    format!("{reduce:.3}"),
                    format!("{:.2}× the step time", step / one_step),
                )
            };
            println!(
                "| {} | {layout} | {batch} | {step:.3} | {rate:.0} | {reduced} | {reduce_time} | {ratio} |",
                case.name
            );
            eprintln!(
                "{}",
                json!({"case": case.name, "ranks": ranks, "threads": threads, "step_s": step,
                       "tokens_per_s": rate, "allreduce_s": reduce,
                       "allreduce_bytes": if ranks > 1 { bytes } else { 0 }, "rounds": runs[k]})
            );
        }
    }
    Ok(())
}

/// One `trainer sft` run of `steps + 1` steps: the medians of step time, tokens/s and
/// all-reduce time over the steps after the first.
fn sft_run(
    model_dir: &Path,
    data: &Path,
    out: &Path,
    case: &Case,
    steps: usize,
    ranks: usize,
    threads: usize,
) -> anyhow::Result<(f64, f64, f64)> {
    let trainer = Path::new(env!("CARGO_BIN_EXE_trainer"));
    let mut cmd = if ranks == 1 {
        Command::new(trainer)
    } else {
        let mut c = Command::new("mpirun");
        c.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-np", &ranks.to_string()])
        .arg(trainer)
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
        c
    };
    cmd.arg("sft")
        .arg("--model")
        .arg(model_dir)
        .arg("--data")
        .arg(data)
        .arg("--output")
        .arg(out)
        .args(["--set", &format!("max_steps={}", steps + 1)])
        .args([
            "--set",
            &format!("per_device_train_batch_size={}", case.batch / ranks),
        ])
        .args(["--set", &format!("max_length={}", case.seq)])
        .args(["--report-to", "jsonl"])
        .env("RAYON_NUM_THREADS", threads.to_string());
    let status = cmd.output()?;
    if !status.status.success() {
        bail!(
            "trainer sft ({ranks} rank(s)): {}",
            String::from_utf8_lossy(&status.stderr)
        );
    }
    let logged = swerve_trainer::report::metrics_log::read(&out.join("metrics.jsonl"))?;
    let median = |name: &str| -> f64 {
        let mut v: Vec<f64> = logged.iter().skip(1).filter_map(|m| m.get(name)).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    Ok((
        median("step_time"),
        median("tokens_per_second"),
        median("allreduce_time"),
    ))
}
