//! The `swe-rl` and `format` plugins, run sandboxed in the host, agree bit for bit with the
//! SWE-RL reference on every development vector, in batch and strict isolation.

use swerve_host::{BudgetOverrides, Host, HostConfig, Isolation, Sample};
use swerve_tests::dev_vectors;

fn samples() -> Vec<Sample> {
    dev_vectors()
        .into_iter()
        .map(|v| Sample {
            id: v.id,
            completion: v.output,
            code_context: v.code_context,
            oracle_new_content: v.oracle_new_content,
            ..Sample::default()
        })
        .collect()
}

#[test]
fn swe_rl_plugin_reproduces_every_development_vector() {
    let vectors = dev_vectors();
    let samples = samples();
    let host = Host::new(HostConfig::default()).unwrap();
    let plugin = host
        .load_reward(
            &swerve_host::bundled::require("swe-rl").unwrap(),
            &BudgetOverrides::default(),
        )
        .unwrap();
    for isolation in [Isolation::Batch, Isolation::Strict] {
        let outcomes = plugin.score(&samples, isolation);
        let mut mismatches = Vec::new();
        for (v, o) in vectors.iter().zip(&outcomes) {
            let score = o.as_ref().unwrap_or_else(|f| panic!("{}: {f:?}", v.id));
            let bits = score.reward.expect("swe-rl always rewards").to_bits();
            if !v.accepted_bits().contains(&bits) {
                mismatches.push(v.id.clone());
            }
            let format_error = v.expected["format_error"].as_bool().unwrap();
            assert_eq!(
                score.metrics["format_error"] == 1.0,
                format_error,
                "{}",
                v.id
            );
            if format_error {
                assert_eq!(
                    score.message.as_deref(),
                    v.expected["error"].as_str(),
                    "{}",
                    v.id
                );
            }
        }
        assert!(
            mismatches.is_empty(),
            "{isolation:?}: {} mismatches: {mismatches:?}",
            mismatches.len()
        );
    }
}

#[test]
fn format_plugin_is_minus_one_exactly_for_format_errors() {
    let vectors = dev_vectors();
    let host = Host::new(HostConfig::default()).unwrap();
    let plugin = host
        .load_reward(
            &swerve_host::bundled::require("format").unwrap(),
            &BudgetOverrides::default(),
        )
        .unwrap();
    for (v, o) in vectors
        .iter()
        .zip(plugin.score(&samples(), Isolation::Batch))
    {
        let expect = if v.expected["format_error"].as_bool().unwrap() {
            -1.0
        } else {
            0.0
        };
        assert_eq!(o.unwrap().reward, Some(expect), "{}", v.id);
    }
}
