//! The forward pass against Hugging Face transformers, the KV cache against full recomputation,
//! and checkpoints, tokenizer and optimiser state round trips.
//!
//! `fixtures/tiny-qwen2` and its `reference.json` come from `scripts/make_reference_logits.py`
//! (PyTorch + transformers, float64 forward); see that script for how they were made.

use std::path::{Path, PathBuf};

use dfdx::prelude::*;
use serde_json::Value;
use swerve_trainer::checkpoint;
use swerve_trainer::generate::{SamplingConfig, generate};
use swerve_trainer::model::{
    AdamW, AdamWConfig, CausalLm, KvCache, ModelParams, Param, TokenBatch,
};
use swerve_trainer::tokenizer::Tokenizer;

fn fixture(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tiny-qwen2")
        .join(sub)
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn matrix_u32(v: &Value) -> Vec<Vec<u32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

fn reference_batch(r: &Value) -> TokenBatch {
    let ids = matrix_u32(&r["input_ids"]);
    let mask = matrix_u32(&r["attention_mask"]);
    let (rows, cols) = (ids.len(), ids[0].len());
    TokenBatch::new(
        ids.concat(),
        mask.concat().into_iter().map(|m| m == 1).collect(),
        rows,
        cols,
    )
    .unwrap()
}

/// Largest |ours − reference| over the real (unpadded) positions.
fn max_diff_vs_reference(dir: &str, key: &str) -> f64 {
    let r = reference();
    let batch = reference_batch(&r);
    let model = CausalLm::<f32, Cpu>::load(&fixture(dir), &Cpu::default()).unwrap();
    let v = model.config.vocab_size;
    let ours = model.logits(&batch).as_vec();
    let mut worst: f64 = 0.0;
    for (b, row) in r[key].as_array().unwrap().iter().enumerate() {
        for (s, logits) in row.as_array().unwrap().iter().enumerate() {
            if !batch.mask()[b * batch.cols() + s] {
                continue;
            }
            for (i, want) in logits.as_array().unwrap().iter().enumerate() {
                let got = f64::from(ours[(b * batch.cols() + s) * v + i]);
                worst = worst.max((got - want.as_f64().unwrap()).abs());
            }
        }
    }
    worst
}

#[test]
fn logits_match_transformers_for_f32_bf16_and_sharded_checkpoints() {
    // (directory, reference key): f32 logits are O(1); f32 rounding through two layers stays
    // near 1e-6, so 1e-4 leaves margin without hiding a real bug (a wrong RoPE or mask moves
    // logits by O(0.1)).
    for (dir, key) in [
        ("", "logits"),
        ("sharded", "logits"),
        ("bf16", "logits_bf16_weights"),
    ] {
        let diff = max_diff_vs_reference(dir, key);
        eprintln!("{dir:>8}: max |logit − transformers| = {diff:e}");
        assert!(diff < 1e-4, "{dir}: {diff}");
    }
    // The bf16 weights really are different numbers: comparing them with the f32 reference fails.
    assert!(max_diff_vs_reference("bf16", "logits") > 1e-4);
}

#[test]
fn greedy_generation_matches_transformers() {
    let r = reference();
    let model = CausalLm::<f32, Cpu>::load(&fixture(""), &Cpu::default()).unwrap();
    let prompts = matrix_u32(&r["greedy_prompts"]);
    let want = matrix_u32(&r["greedy_completions"]);
    let config = SamplingConfig {
        temperature: 0.0,
        max_new_tokens: want[0].len(),
        ..SamplingConfig::default()
    };
    // Batched (prompts of different lengths, left-padded) and one by one.
    let batched = generate(&model, &prompts, &config).unwrap();
    assert_eq!(batched.completions, want);
    for (p, w) in prompts.iter().zip(&want) {
        assert_eq!(
            &generate(&model, std::slice::from_ref(p), &config)
                .unwrap()
                .completions[0],
            w
        );
    }
}

#[test]
fn cached_incremental_logits_equal_full_recompute() {
    let dev = Cpu::default();
    let model = CausalLm::<f32, Cpu>::load(&fixture(""), &dev).unwrap();
    let v = model.config.vocab_size;
    let prompts = vec![vec![5, 9, 13, 17], vec![40, 2]];
    let steps: [[u32; 2]; 4] = [[3, 8], [60, 61], [7, 7], [1, 30]];
    let mut sequences = prompts.clone();
    let mut cache = KvCache::new(2);
    let mut logits = model
        .forward_cached(&TokenBatch::left_padded(&prompts, 0).unwrap(), &mut cache)
        .unwrap();
    let mut worst: f32 = 0.0;
    for step in steps {
        let full_batch = TokenBatch::left_padded(&sequences, 0).unwrap();
        let full = model.logits(&full_batch).as_vec();
        let cached = logits.as_vec();
        let cols = full_batch.cols();
        for row in 0..2 {
            let last = (row * cols + cols - 1) * v;
            for i in 0..v {
                worst = worst.max((full[last + i] - cached[row * v + i]).abs());
            }
        }
        for (seq, t) in sequences.iter_mut().zip(step) {
            seq.push(t);
        }
        let batch = TokenBatch::new(step.to_vec(), vec![true, true], 2, 1).unwrap();
        logits = model.forward_cached(&batch, &mut cache).unwrap();
    }
    eprintln!("max |cached − recomputed| = {worst:e}");
    assert!(worst < 1e-5, "{worst}");
    assert_eq!(cache.len(), 4 + 4);
}

#[test]
fn sampling_is_reproducible_and_stops_at_eos() {
    let model = CausalLm::<f32, Cpu>::load(&fixture(""), &Cpu::default()).unwrap();
    let prompts = vec![vec![5, 9], vec![12, 13, 14]];
    let mut config = SamplingConfig {
        temperature: 1.0,
        top_p: 0.9,
        top_k: 20,
        max_new_tokens: 12,
        seed: 42,
        ..SamplingConfig::default()
    };
    let a = generate(&model, &prompts, &config).unwrap();
    assert_eq!(a, generate(&model, &prompts, &config).unwrap());
    // Declare the first sampled token of row 0 an EOS: row 0 then stops right there.
    config.eos_token_ids = vec![a.completions[0][0]];
    let b = generate(&model, &prompts, &config).unwrap();
    assert_eq!(b.completions[0], vec![a.completions[0][0]]);
    assert!(b.finished[0]);
}

#[test]
fn tokenizer_round_trips_fixture_vocabulary() {
    let tok = Tokenizer::from_file(&fixture("tokenizer.json")).unwrap();
    let ids = tok.encode("w2 w10 w60 <eos>", false).unwrap();
    assert_eq!(ids, vec![5, 13, 63, 1]);
    assert_eq!(tok.decode(&ids, true).unwrap(), "w2 w10 w60");
    assert_eq!(tok.token_id("<eos>"), Some(1));
}

#[test]
fn checkpoint_round_trip_resumes_the_optimiser() {
    let dev = Cpu::default();
    let mut model = CausalLm::<f32, Cpu>::load(&fixture(""), &dev).unwrap();
    let batch = TokenBatch::left_padded(&[vec![5, 9, 13, 17, 21], vec![7, 3, 60]], 0).unwrap();
    let config = AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(config);
    let loss_of = |m: &CausalLm<f32, Cpu>| -> f32 {
        -m.token_logps_no_grad(&batch, 2, 1.0)
            .unwrap()
            .logps
            .as_vec()
            .iter()
            .sum::<f32>()
    };
    let before = loss_of(&model);
    for _ in 0..5 {
        let out = model
            .token_logps(&batch, 2, 1.0, model.params.alloc_grads())
            .unwrap();
        let grads = out.logps.sum::<(), _>().negate().backward();
        let mut grads = model.params.keep_param_grads(grads);
        opt.step(&mut model.params, &mut grads);
    }
    let after = loss_of(&model);
    assert!(after < before, "loss {before} → {after}");

    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("step-5");
    let run = checkpoint::RunState {
        kind: "sft".into(),
        step: 5,
        micro_step: 5,
        total_steps: 5,
        ..checkpoint::RunState::default()
    };
    checkpoint::save(
        &ckpt,
        &model,
        Some(&fixture("tokenizer.json")),
        Some((&opt, &run)),
        None,
    )
    .unwrap();
    // Saving again over an existing checkpoint replaces it.
    checkpoint::save(
        &ckpt,
        &model,
        Some(&fixture("tokenizer.json")),
        Some((&opt, &run)),
        None,
    )
    .unwrap();
    let checkpoint::Loaded {
        model: loaded,
        resume,
    } = checkpoint::load::<f32, Cpu>(&ckpt, &dev).unwrap();
    let (loaded_opt, loaded_run) = resume.unwrap();
    assert_eq!(loaded_run, run);
    assert_eq!(loaded_opt.step, 5);
    assert_eq!(loaded_opt.config, config);
    assert_eq!(loaded_opt.moments.len(), opt.moments.len());
    assert_eq!(host(&loaded.params), host(&model.params));
    assert!(Tokenizer::from_file(&ckpt.join("tokenizer.json")).is_ok());
    assert_eq!(loss_of(&loaded), after);

    // A folder with the Hugging Face Trainer's (or an earlier swerve's) resume file is not
    // taken for a run of this version.
    fs_err::remove_file(ckpt.join(checkpoint::RUN_STATE_FILE)).unwrap();
    fs_err::write(ckpt.join("trainer_state.json"), "{}").unwrap();
    let err = checkpoint::load::<f32, Cpu>(&ckpt, &dev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("trainer_state.json"), "{err}");
}

fn host(params: &ModelParams<f32, Cpu>) -> Vec<(String, Vec<f32>)> {
    params
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
