//! Sampling's logits processing against `transformers` 5.25.0's own processors (the cases in
//! `tests/data/trl-1.16/sampling.json`, written by its `generate.py`): `min_p`,
//! `repetition_penalty`, and the processor list `generate` builds for TRL's sampling settings,
//! alone and combined with temperature, top-k and top-p. Then the sampler draws from exactly
//! those probabilities.

use std::path::Path;

use rand::{SeedableRng, rngs::StdRng};
use serde_json::Value;
use swerve_trainer::generate::{SamplingConfig, processed_logits, repetition_penalty, sample};

/// A JSON matrix, each entry read by `entry`.
fn matrix<T>(value: &Value, entry: impl Fn(&Value) -> T) -> Vec<Vec<T>> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row.as_array().unwrap().iter().map(&entry).collect())
        .collect()
}

/// A JSON matrix of numbers, `null` read as −∞.
fn numbers(value: &Value) -> Vec<Vec<f64>> {
    matrix(value, |x| x.as_f64().unwrap_or(f64::NEG_INFINITY))
}

fn softmax(scores: &[f64]) -> Vec<f64> {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 1e-12 * w.abs().max(1.0)
        };
        assert!(ok, "{what}[{i}]: {g} vs {w}");
    }
}

#[test]
fn logits_processors_match_transformers() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trl-1.16/sampling.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let logits = numbers(&file["inputs"]["logits"]);
    let input_ids = matrix(&file["inputs"]["input_ids"], |x| x.as_u64().unwrap() as u32);
    // Left padding: the leading zeros of the attention mask.
    let padding: Vec<usize> = matrix(&file["inputs"]["attention_mask"], Value::as_u64)
        .iter()
        .map(|row| row.iter().take_while(|m| **m == Some(0)).count())
        .collect();
    let mut checked = 0;
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let want = numbers(&case["processed_logits"]);
        let want_probs = numbers(&case["probs"]);
        let settings = &case["settings"];
        let number = |v: &Value, default: f64| v.as_f64().unwrap_or(default);
        for (row, logits) in logits.iter().enumerate() {
            let (got, config) = match case["processor"].as_str().unwrap() {
                "MinPLogitsWarper" => {
                    let config = SamplingConfig {
                        min_p: Some(number(&case["min_p"], 0.0)),
                        ..SamplingConfig::default()
                    };
                    (processed_logits(logits, &config), config)
                }
                "RepetitionPenaltyLogitsProcessor" => {
                    let config = SamplingConfig {
                        repetition_penalty: number(&case["repetition_penalty"], 1.0),
                        ..SamplingConfig::default()
                    };
                    let skip = case["prompt_ignore_length"]
                        .as_array()
                        .map_or(0, |v| v[row].as_u64().unwrap() as usize);
                    (
                        repetition_penalty(logits, &input_ids[row][skip..], &config),
                        config,
                    )
                }
                "GenerationMixin._get_logits_processor" => {
                    let config = SamplingConfig {
                        temperature: number(&settings["temperature"], 1.0),
                        top_k: settings["top_k"].as_u64().unwrap() as usize,
                        top_p: number(&settings["top_p"], 1.0),
                        min_p: settings["min_p"].as_f64(),
                        repetition_penalty: number(&settings["repetition_penalty"], 1.0),
                        ..SamplingConfig::default()
                    };
                    let penalised =
                        repetition_penalty(logits, &input_ids[row][padding[row]..], &config);
                    (processed_logits(&penalised, &config), config)
                }
                other => panic!("{name}: unknown processor {other}"),
            };
            assert_close(&format!("{name} row {row}"), &got, &want[row]);
            assert_close(
                &format!("{name} row {row} probs"),
                &softmax(&got),
                &want_probs[row],
            );
            checked += 1;

            // The sampler draws from these probabilities: every draw is a kept token, and the
            // frequencies are those of `probs` (2,000 draws: within 0.04, over 3.5 standard deviations).
            if case["processor"] != "RepetitionPenaltyLogitsProcessor" {
                let sampler_input = if config.repetition_penalty == 1.0 {
                    logits.clone()
                } else {
                    repetition_penalty(logits, &input_ids[row][padding[row]..], &config)
                };
                let mut rng = StdRng::seed_from_u64(row as u64);
                let mut counts = vec![0usize; logits.len()];
                for _ in 0..2000 {
                    counts[sample(&sampler_input, &config, &mut rng) as usize] += 1;
                }
                for (token, (&count, &p)) in counts.iter().zip(&want_probs[row]).enumerate() {
                    let freq = count as f64 / 2000.0;
                    assert!(
                        (freq - p).abs() < 0.04 && (p > 0.0 || count == 0),
                        "{name} row {row} token {token}: drawn {freq}, probability {p}"
                    );
                }
            }
        }
    }
    assert_eq!(checked, 3 * file["cases"].as_array().unwrap().len());
    assert!(checked >= 60, "{checked}");
}
