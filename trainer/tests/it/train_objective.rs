//! The dfdx GRPO objective (`train::grpo_objective`) against the exact `f64` reference
//! (`grpo::loss`): on every case of the worked-example files (swerve's and TRL 1.16.0's) with
//! the log-probs fed in as a leaf tensor, in f64 (1e-12) and in f32 (1e-6), and on the log-probs
//! of a tiny model, for every loss type.

use std::ops::Range;
use std::path::{Path, PathBuf};

use dfdx::prelude::*;
use swerve_trainer::grpo::case::{CaseFile, OldLogpsFrom};
use swerve_trainer::grpo::loss::{LossInputs, MicroBatchScope, OldLogps, evaluate};
use swerve_trainer::grpo::{LossType, Normalisation, ObjectiveParams};
use swerve_trainer::model::{CausalLm, ModelConfig, ModelParams, TokenBatch};
use swerve_trainer::train::grpo_objective::{MicroBatch, grpo_loss};

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= abs.max(rel * b.abs())
}

fn case_files() -> Vec<PathBuf> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files = vec![data.join("grpo-worked-example.json")];
    let trl = data.join("trl-1.16");
    let mut more: Vec<PathBuf> = std::fs::read_dir(&trl)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("grpo-") && name.ends_with(".json")
        })
        .collect();
    more.sort();
    files.extend(more);
    files
}

/// Every micro-batch of every case through the tensor objective in `E`, against the `f64`
/// reference's micro-batch losses and gradients; returns the number of values compared and the
/// worst relative error (over values above 1e-9).
fn tensor_objective_matches<E: Dtype>(rel: f64, abs: f64, round: fn(f64) -> f64) -> (usize, f64)
where
    Cpu: Device<E>,
{
    let dev = Cpu::default();
    let (mut compared, mut worst) = (0, 0.0_f64);
    for path in case_files() {
        let mut file = CaseFile::load(&path).unwrap();
        // The tensor holds the log-probs in E: the reference sees the same values.
        for row in &mut file.inputs.cur_logps {
            row.iter_mut().for_each(|x| *x = round(*x));
        }
        let evaluation = file.evaluate().unwrap();
        let inputs = &file.inputs;
        let cols = inputs.cur_logps[0].len();
        let mask = &evaluation.batch.completion_mask;
        for (case, expected) in file.cases.iter().zip(&evaluation.cases) {
            let ranges: Vec<Range<usize>> = case
                .micro_batches
                .clone()
                .unwrap_or_else(|| vec![[0, inputs.cur_logps.len()]])
                .into_iter()
                .map(|[a, b]| a..b)
                .collect();
            let norm = Normalisation {
                max_completion_length: file.config.max_completion_length,
                gradient_accumulation_steps: case.gradient_accumulation_steps,
                steps_per_generation: case
                    .steps_per_generation
                    .unwrap_or(case.gradient_accumulation_steps),
                num_processes: 1,
                num_items_in_batch: evaluation.batch.num_items_in_batch,
            };
            let advantages = evaluation.batch.advantages(case.scale_rewards);
            for reference in &expected.report.loss_types {
                let params = ObjectiveParams {
                    loss_type: reference.loss_type,
                    ..case.objective_params()
                };
                let tag = format!("{} {} {:?}", file.name, case.name, reference.loss_type);
                for (k, range) in ranges.iter().enumerate() {
                    let rows = range.len();
                    let flat = |m: &[Vec<f64>]| m[range.clone()].concat();
                    let leaf: Tensor<(usize, usize), E, Cpu> = dev.tensor_from_vec(
                        flat(&inputs.cur_logps)
                            .into_iter()
                            .map(|x| E::from_f64(x).unwrap())
                            .collect(),
                        (rows, cols),
                    );
                    let old = inputs.old_logps.as_deref().map(flat);
                    let ref_logps = inputs.ref_logps.as_deref().map(flat);
                    let entropies = inputs.entropies.as_deref().map(flat);
                    let weights = norm
                        .token_weights(reference.loss_type, &mask[range.clone()])
                        .concat();
                    let batch = MicroBatch {
                        old_logps: match case.old_logps_from {
                            OldLogpsFrom::CurLogps => None,
                            OldLogpsFrom::OldLogps => old.as_deref(),
                        },
                        ref_logps: params.kl.and(ref_logps.as_deref()),
                        advantages: &advantages[range.clone()],
                        mask: &flat(mask),
                        weights: &weights,
                        scope: MicroBatchScope {
                            gradient_accumulation_steps: case.gradient_accumulation_steps,
                            ..MicroBatchScope::default()
                        },
                    };
                    let entropy_tensor = entropies.map(|e| {
                        let values = e.into_iter().map(|x| E::from_f64(x).unwrap()).collect();
                        dev.tensor_from_vec(values, (rows, cols))
                    });
                    let loss =
                        grpo_loss(leaf.leaky_trace(), entropy_tensor, &batch, &params).unwrap();
                    let want = reference.micro_batch_losses[k];
                    let mut check = |what: String, got: f64, want: f64| {
                        compared += 1;
                        if want.abs() > 1e-9 {
                            worst = worst.max((got - want).abs() / want.abs());
                        }
                        assert!(close(got, want, rel, abs), "{what}: {got} vs {want}");
                    };
                    check(format!("{tag} micro-batch {k}"), loss.value, want);
                    let grads = loss.surrogate.backward();
                    for (i, g) in grads.get(&leaf).as_vec().into_iter().enumerate() {
                        let (row, t) = (range.start + i / cols, i % cols);
                        check(
                            format!("{tag} grad[{row}][{t}]"),
                            g.to_f64().unwrap(),
                            reference.grad_wrt_cur_logps[row][t],
                        );
                    }
                }
            }
        }
    }
    (compared, worst)
}

#[test]
fn every_case_matches_in_f64() {
    let (compared, worst) = tensor_objective_matches::<f64>(1e-12, 1e-15, |x| x);
    println!("f64: {compared} values, worst relative error {worst:e}");
    assert!(compared > 5000, "{compared}");
}

/// In f32, on the same (f32-rounded) log-probs: the gradient the tensor carries is rounded to
/// f32 once. (Against the unrounded f64 inputs, the rounding of the log-probs themselves moves
/// near-cancelling terms such as the KL gradient `1 − exp(ref − logp)` by up to 6e-5 relative,
/// under 1e-8 absolute: a property of f32 log-probs, in TRL as here.)
#[test]
fn every_case_matches_in_f32() {
    let (compared, worst) = tensor_objective_matches::<f32>(1e-6, 1e-15, |x| f64::from(x as f32));
    println!("f32: {compared} values, worst relative error {worst:e}");
    assert!(compared > 5000, "{compared}");
}

/// A tiny random Qwen2 in f64, so that the comparison is exact up to rounding.
fn tiny_model(dev: &Cpu) -> CausalLm<f64, Cpu> {
    let text = fs_err::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2/config.json"),
    )
    .unwrap();
    let config = ModelConfig::from_json(serde_json::from_str(&text).unwrap()).unwrap();
    let params = ModelParams::random(&config, dev, 3, 0.2);
    CausalLm::new(config, params)
}

/// Two rows: prompt [5, 6 | 7] left-padded, completions of 3 and 2 tokens: the batch, its rows,
/// completion start and columns, and the completion mask.
fn two_rows() -> (TokenBatch, usize, usize, usize, Vec<f64>) {
    let (rows, start, cols) = (2, 2, 5);
    let batch = TokenBatch::new(
        vec![5, 6, 9, 10, 11, 0, 7, 12, 13, 0],
        vec![true, true, true, true, true, false, true, true, true, false],
        rows,
        cols,
    )
    .unwrap();
    (batch, rows, start, cols, vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
}

#[test]
fn model_step_matches_the_reference_for_every_loss_type() {
    let dev = Cpu::default();
    let model = tiny_model(&dev);
    let (batch, rows, start, cols, mask) = two_rows();
    let c = cols - start;
    let mask_rows: Vec<Vec<f64>> = mask.chunks(c).map(<[f64]>::to_vec).collect();
    let advantages = [0.8, -1.3];
    let cur: Vec<f64> = model
        .token_logps_no_grad(&batch, start, 0.9)
        .unwrap()
        .logps
        .as_vec();
    // Old and reference log-probs a little away from the current ones, so that some tokens clip.
    let shift = [0.3, -0.25, 0.05, -0.4, 0.2, 0.0];
    let old: Vec<f64> = cur.iter().zip(shift).map(|(x, s)| x + s).collect();
    let reference: Vec<f64> = cur.iter().zip(shift).map(|(x, s)| x - 0.5 * s).collect();
    let norm = Normalisation {
        max_completion_length: 4,
        gradient_accumulation_steps: 1,
        steps_per_generation: 1,
        num_processes: 1,
        num_items_in_batch: 5.0,
    };
    let params = ObjectiveParams::new(0.2, Some(0.28), 0.04, true);
    let to_rows = |v: &[f64]| v.chunks(c).map(<[f64]>::to_vec).collect::<Vec<_>>();
    let report = evaluate(
        &LossInputs {
            cur_logps: &to_rows(&cur),
            old_logps: OldLogps::Stored(&to_rows(&old)),
            ref_logps: Some(&to_rows(&reference)),
            completion_mask: &mask_rows,
            advantages: &advantages,
            entropies: None,
        },
        &params,
        &norm,
        std::slice::from_ref(&(0..rows)),
        &LossType::ALL,
    )
    .unwrap();
    assert!(
        report.loss_types[0].metrics["clip_ratio/region_mean"] > 0.0,
        "the shifts clip some tokens"
    );
    for loss_type in LossType::ALL {
        let params = ObjectiveParams {
            loss_type,
            ..params
        };
        let weights = norm.token_weights(loss_type, &mask_rows).concat();
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
            .token_logps(&batch, start, 0.9, model.params.alloc_grads())
            .unwrap();
        let loss = grpo_loss(
            out.logps,
            None::<Tensor<(usize, usize), f64, Cpu>>,
            &micro,
            &params,
        )
        .unwrap();
        let expected = report.by_type(loss_type).unwrap();
        assert!(
            close(loss.value, expected.loss, 1e-10, 1e-14),
            "{loss_type:?}: {} vs {}",
            loss.value,
            expected.loss
        );
        let grads = model.params.keep_param_grads(loss.surrogate.backward());
        // The same parameter gradient from the reference's d loss / d logp through the model:
        // the surrogate Σ g·logp has exactly that gradient.
        let out = model
            .token_logps(&batch, start, 0.9, model.params.alloc_grads())
            .unwrap();
        let g = dev.tensor_from_vec(expected.grad_wrt_cur_logps.concat(), (rows, c));
        let surrogate = (out.logps * g).sum::<(), _>();
        let want = model.params.keep_param_grads(surrogate.backward());
        for (name, p) in model.params.named() {
            let (a, b) = match p {
                swerve_trainer::model::Param::Vector(t) => {
                    (grads.get(t).as_vec(), want.get(t).as_vec())
                }
                swerve_trainer::model::Param::Matrix(t) => {
                    (grads.get(t).as_vec(), want.get(t).as_vec())
                }
            };
            let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-9 * scale.max(1e-12),
                    "{loss_type:?} {name}: {x} vs {y}"
                );
            }
        }
    }
}

/// The whole chain with the entropy bonus and the KL term, on a tiny f64 model with both kernel
/// sets and a chunked LM head: the parameter gradient the training step backpropagates (through
/// the log-probs and the entropies) against central differences of the micro-batch loss.
#[test]
fn entropy_bonus_gradient_matches_finite_differences() {
    use swerve_trainer::model::{KernelMode, Param};
    let dev = Cpu::default();
    let (batch, rows, start, cols, mask) = two_rows();
    let c = cols - start;
    let advantages = [0.8, -1.3];
    let weights = vec![1.0 / 5.0; 6];
    for (mode, chunk) in [
        (KernelMode::Fused, usize::MAX),
        (KernelMode::Reference, usize::MAX),
        (KernelMode::Fused, 4),
    ] {
        let mut model = tiny_model(&dev);
        model.kernels = mode;
        model.logits_chunk_rows = chunk;
        let cur = model.token_logps_no_grad(&batch, start, 0.9).unwrap();
        let shift = [0.3, -0.25, 0.05, -0.4, 0.2, 0.0];
        let old: Vec<f64> = cur
            .logps
            .as_vec()
            .iter()
            .zip(shift)
            .map(|(x, s)| x + s)
            .collect();
        let reference: Vec<f64> = old.iter().map(|x| x - 0.1).collect();
        let params = ObjectiveParams {
            loss_type: LossType::Dapo,
            entropy_coef: 0.5,
            ..ObjectiveParams::new(0.2, Some(0.28), 0.04, true)
        };
        let micro = MicroBatch {
            old_logps: Some(&old),
            ref_logps: Some(&reference),
            advantages: &advantages,
            mask: &mask,
            weights: &weights,
            scope: MicroBatchScope {
                gradient_accumulation_steps: 2,
                ..MicroBatchScope::default()
            },
        };
        let loss_at = |m: &CausalLm<f64, Cpu>| {
            let out = m.token_logps_no_grad(&batch, start, 0.9).unwrap();
            grpo_loss(out.logps, Some(out.entropy), &micro, &params)
                .unwrap()
                .value
        };
        let out = model
            .token_logps(&batch, start, 0.9, model.params.alloc_grads())
            .unwrap();
        assert_eq!(out.entropy.shape(), &(rows, c));
        let loss = grpo_loss(out.logps, Some(out.entropy), &micro, &params).unwrap();
        let grads = model.params.keep_param_grads(loss.surrogate.backward());
        let mut checked = 0;
        for (name, p) in model.params.named() {
            let (analytic, base) = match p {
                Param::Vector(t) => (grads.get(t).as_vec(), t.as_vec()),
                Param::Matrix(t) => (grads.get(t).as_vec(), t.as_vec()),
            };
            for i in [0, base.len() / 2, base.len() - 1] {
                let h = 1e-5;
                let shifted = |d: f64| {
                    let mut m = model.clone();
                    let mut values = base.clone();
                    values[i] += d;
                    for (n, q) in m.params.named_mut() {
                        if n == name {
                            match q {
                                Param::Vector(t) => t.copy_from(&values),
                                Param::Matrix(t) => t.copy_from(&values),
                            }
                        }
                    }
                    loss_at(&m)
                };
                let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
                assert!(
                    close(analytic[i], numeric, 1e-6, 1e-9),
                    "{mode:?} chunk {chunk} {name}[{i}]: analytic {} numeric {numeric}",
                    analytic[i]
                );
                checked += 1;
            }
        }
        assert!(checked > 20);
        // The bonus is in the loss: without it the value changes.
        let plain = ObjectiveParams {
            entropy_coef: 0.0,
            ..params
        };
        let out = model.token_logps_no_grad(&batch, start, 0.9).unwrap();
        let without = grpo_loss(out.logps, Some(out.entropy), &micro, &plain)
            .unwrap()
            .value;
        assert!((without - loss_at(&model)).abs() > 1e-3);
    }
}
