//! The host's lifting of plugin results: the hostile plugin's `echo` attack turns the input into
//! any shape of `score` result (errors, NaN or infinite rewards and metrics, up to 1023 metrics,
//! strings up to 4 MiB), which the component model lowers in the guest and lifts in the host, and
//! the host checks and caps (`swerve_host::limits`). Whatever comes back is one classified outcome
//! within the caps, and it serialises to JSON as `harness reward` writes it.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use swerve_host::{BudgetOverrides, Host, HostConfig, Isolation, RewardPlugin, Sample, limits};

/// Room for the marker `cap_text` appends to a cut string.
const MARKER: usize = 64;

fn plugin() -> &'static RewardPlugin {
    static PLUGIN: OnceLock<RewardPlugin> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        let host = Host::new(HostConfig::default()).expect("host");
        let budgets = BudgetOverrides {
            fuel: Some(2_000_000_000),
            memory_bytes: Some(128 << 20),
            ..BudgetOverrides::default()
        };
        host.load_reward(&swerve_host::bundled::require("hostile").expect("hostile is bundled"), &budgets)
            .expect("hostile plugin loads")
    })
}

fuzz_target!(
    // Compiling the plugin takes seconds: done before fuzzing, outside the per-input timeout.
    init: {
        plugin();
    },
    |data: &[u8]| {
    let sample = Sample {
        id: "fuzz".into(),
        completion: String::from_utf8_lossy(data).into_owned(),
        metadata: BTreeMap::from([("attack".to_owned(), "echo".to_owned())]),
        ..Sample::default()
    };
    let outcomes = plugin().score(std::slice::from_ref(&sample), Isolation::Strict);
    assert_eq!(outcomes.len(), 1);
    match &outcomes[0] {
        Ok(score) => {
            assert!(
                score.reward.is_none_or(f64::is_finite),
                "{:?}",
                score.reward
            );
            assert!(score.metrics.len() <= limits::MAX_METRICS);
            for (name, value) in &score.metrics {
                assert!(name.len() <= limits::MAX_METRIC_NAME_BYTES + MARKER);
                assert!(value.is_finite());
            }
            let message = score.message.as_deref().unwrap_or("");
            assert!(message.len() <= limits::MAX_MESSAGE_BYTES + MARKER);
            serde_json::to_string(score).expect("a score serialises");
        }
        Err(failure) => {
            assert!(failure.message.len() <= limits::MAX_MESSAGE_BYTES + 2 * MARKER + 256);
            serde_json::to_string(failure).expect("a failure serialises");
        }
    }
}
);
