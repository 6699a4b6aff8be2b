//! The dfdx GRPO objective (`train::objective`) against the exact `f64` reference
//! (`grpo::loss`): on the worked example's log-probs fed in as a leaf tensor, and on the
//! log-probs of a tiny model, for every loss type.

use std::path::Path;

use dfdx::prelude::*;
use swerve_trainer::grpo::case::{CaseFile, OldLogpsFrom};
use swerve_trainer::grpo::loss::{LossInputs, OldLogps, evaluate};
use swerve_trainer::grpo::{LossType, Normalisation, ObjectiveParams};
use swerve_trainer::model::{CausalLm, ModelConfig, ModelParams, TokenBatch};
use swerve_trainer::train::grpo_objective::{MicroBatch, grpo_loss};

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= abs.max(rel * b.abs())
}

fn worked_example() -> CaseFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/grpo-worked-example.json");
    CaseFile::load(&path).unwrap()
}

#[test]
fn worked_example_losses_and_gradients_match_for_every_loss_type() {
    let file = worked_example();
    let evaluation = file.evaluate().unwrap();
    let dev = Cpu::default();
    let inputs = &file.inputs;
    let cols = inputs.cur_logps[0].len();
    for (case, expected) in file.cases.iter().zip(&evaluation.cases) {
        let params = ObjectiveParams::new(
            case.epsilon,
            case.epsilon_high,
            case.beta,
            case.use_bias_correction_kl,
        );
        let ranges: Vec<[usize; 2]> = case
            .micro_batches
            .clone()
            .unwrap_or_else(|| vec![[0, inputs.cur_logps.len()]]);
        let norm = Normalisation {
            max_completion_length: file.config.max_completion_length,
            gradient_accumulation_steps: case.gradient_accumulation_steps,
            steps_per_generation: case
                .steps_per_generation
                .unwrap_or(case.gradient_accumulation_steps),
            num_processes: 1,
            num_items_in_batch: evaluation.batch.num_items_in_batch,
        };
        let mask = &evaluation.batch.completion_mask;
        let advantages = evaluation.batch.advantages(case.scale_rewards);
        for loss_type in LossType::ALL {
            let reference = expected.report.by_type(loss_type);
            let mut total = 0.0;
            for (k, [start, end]) in ranges.iter().copied().enumerate() {
                let rows = end - start;
                let flat = |m: &[Vec<f64>]| m[start..end].concat();
                let leaf: Tensor<(usize, usize), f64, Cpu> =
                    dev.tensor_from_vec(flat(&inputs.cur_logps), (rows, cols));
                let old = flat(inputs.old_logps.as_ref().unwrap());
                let reference_logps = flat(inputs.ref_logps.as_ref().unwrap());
                let weights = norm.token_weights(loss_type, &mask[start..end]).concat();
                let batch = MicroBatch {
                    old_logps: match case.old_logps_from {
                        OldLogpsFrom::CurLogps => None,
                        OldLogpsFrom::OldLogps => Some(&old),
                    },
                    ref_logps: Some(&reference_logps),
                    advantages: &advantages[start..end],
                    mask: &flat(mask),
                    weights: &weights,
                };
                let (loss, _) = grpo_loss(leaf.leaky_trace(), &batch, &params).unwrap();
                let value = loss.array();
                assert!(
                    close(value, reference.micro_batch_losses[k], 1e-12, 1e-15),
                    "{} {loss_type:?} micro-batch {k}: {value} vs {}",
                    case.name,
                    reference.micro_batch_losses[k]
                );
                total += value;
                let grads = loss.backward();
                let grad = grads.get(&leaf).as_vec();
                for (i, g) in grad.iter().enumerate() {
                    let expected = reference.grad_wrt_cur_logps[start + i / cols][i % cols];
                    assert!(
                        close(*g, expected, 1e-12, 1e-15),
                        "{} {loss_type:?} grad[{}][{}]: {g} vs {expected}",
                        case.name,
                        start + i / cols,
                        i % cols
                    );
                }
            }
            assert!(close(total, reference.loss, 1e-12, 1e-15), "{}", case.name);
        }
    }
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

#[test]
fn model_step_matches_the_reference_for_every_loss_type() {
    let dev = Cpu::default();
    let model = tiny_model(&dev);
    // Two rows: prompt [5, 6 | 7] left-padded, completions of 3 and 2 tokens.
    let (rows, start, cols) = (2, 2, 5);
    let batch = TokenBatch::new(
        vec![5, 6, 9, 10, 11, 0, 7, 12, 13, 0],
        vec![true, true, true, true, true, false, true, true, true, false],
        rows,
        cols,
    )
    .unwrap();
    let c = cols - start;
    let mask = vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0];
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
        },
        &params,
        &norm,
        std::slice::from_ref(&(0..rows)),
    )
    .unwrap();
    assert!(
        report.metrics.clip_ratio_region_mean > 0.0,
        "the shifts clip some tokens"
    );
    for loss_type in LossType::ALL {
        let weights = norm.token_weights(loss_type, &mask_rows).concat();
        let micro = MicroBatch {
            old_logps: Some(&old),
            ref_logps: Some(&reference),
            advantages: &advantages,
            mask: &mask,
            weights: &weights,
        };
        let out = model
            .token_logps(&batch, start, 0.9, model.params.alloc_grads())
            .unwrap();
        let (loss, _) = grpo_loss(out.logps, &micro, &params).unwrap();
        let expected = report.by_type(loss_type);
        assert!(
            close(loss.array(), expected.loss, 1e-10, 1e-14),
            "{loss_type:?}: {} vs {}",
            loss.array(),
            expected.loss
        );
        let grads = model.params.keep_param_grads(loss.backward());
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
