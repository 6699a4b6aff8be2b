//! Weighted combination of several plugins over a pool of threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use swerve_host::{
    BudgetOverrides, FailureClass, Fallbacks, Host, HostConfig, Isolation, Sample, Scorer,
    ScorerConfig, WeightedPlugin,
};

#[test]
fn combines_weighted_plugins_in_input_order_with_fallbacks() {
    let host = Host::new(HostConfig::default()).unwrap();
    let load = |name: &str| {
        host.load_reward(
            &swerve_host::bundled::require(name).unwrap(),
            &BudgetOverrides {
                fuel: Some(50_000_000),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let plugins = vec![
        WeightedPlugin {
            plugin: load("rust-length"),
            weight: 1.0,
        },
        WeightedPlugin {
            plugin: load("hostile"),
            weight: 0.5,
        },
    ];
    let mut fallbacks = Fallbacks::default();
    fallbacks.set(FailureClass::Timeout, Some(-1.0));
    let samples: Vec<Sample> = (0..40)
        .map(|i| {
            let mut s = Sample {
                id: format!("s{i}"),
                completion: "word ".repeat(i),
                ..Sample::default()
            };
            if i % 10 == 3 {
                s.metadata.insert("attack".into(), "loop".into());
            }
            if i % 10 == 7 {
                s.metadata.insert("attack".into(), "error".into());
            }
            s
        })
        .collect();
    let done = AtomicUsize::new(0);
    let config = ScorerConfig {
        jobs: 2,
        batch_size: 8,
        isolation: Isolation::Batch,
        fallbacks,
    };
    let scores = Scorer::new(plugins, config)
        .score(&samples, &|n| {
            done.fetch_add(n, Ordering::Relaxed);
        })
        .unwrap();
    assert_eq!(done.load(Ordering::Relaxed), 40);
    assert_eq!(scores.len(), 40);
    for (i, s) in scores.iter().enumerate() {
        let length = 1.0 / (1.0 + i as f64 / 100.0);
        assert_eq!(s.plugins[0].reward, Some(length), "sample {i}");
        let (hostile, expect) = match i % 10 {
            3 => (Some(-1.0), Some(length - 0.5)),
            7 => (None, Some(length)),
            _ => (Some(1.0), Some(length + 0.5)),
        };
        assert_eq!(s.plugins[1].reward, hostile, "sample {i}");
        assert_eq!(s.reward, expect, "sample {i}");
        assert_eq!(s.plugins[1].plugin, "hostile");
    }
}
