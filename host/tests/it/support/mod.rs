//! What the hostile-plugin test files share: samples that pick an attack, and the hostile
//! plugin under budgets small enough for tests.

use std::collections::BTreeMap;

use swerve_host::{BudgetOverrides, Host, RewardPlugin, Sample};

/// A sample whose `attack` metadata picks what the hostile plugin does (`None`: it behaves).
pub(crate) fn sample(id: &str, attack: Option<&str>) -> Sample {
    let mut metadata = BTreeMap::new();
    if let Some(a) = attack {
        metadata.insert("attack".to_owned(), a.to_owned());
    }
    Sample {
        id: id.to_owned(),
        completion: "x".into(),
        metadata,
        ..Sample::default()
    }
}

/// Budgets small enough that the suite runs in seconds: 200 M fuel, 64 MiB of memory.
pub(crate) fn hostile(host: &Host) -> RewardPlugin {
    let overrides = BudgetOverrides {
        fuel: Some(200_000_000),
        memory_bytes: Some(64 << 20),
        ..BudgetOverrides::default()
    };
    host.load_reward(
        &swerve_host::bundled::require("hostile").unwrap(),
        &overrides,
    )
    .expect("hostile plugin loads")
}
