//! Shared fixtures for swerve's end-to-end tests and benchmarks: where the repository, the
//! `shared/` folder beside it and the built `harness` binary are, and the SWE-RL development
//! vectors. Test code only; nothing here ships.

use std::path::PathBuf;

use serde::Deserialize;

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the repository")
        .to_owned()
}

/// The `shared/` folder beside the checkout (CI clones the repository elsewhere with a copy of
/// it beside the clone).
pub fn shared_dir() -> PathBuf {
    repo_root().join("../shared")
}

/// One SWE-RL development vector's inputs and expected reward bits.
#[derive(Debug, Clone, Deserialize)]
pub struct DevVector {
    /// The vector's id.
    pub id: String,
    /// path → original text.
    pub code_context: std::collections::BTreeMap<String, String>,
    /// path → the oracle's text.
    pub oracle_new_content: std::collections::BTreeMap<String, String>,
    /// The completion.
    pub output: String,
    /// The reference's results.
    pub expected: serde_json::Value,
}

impl DevVector {
    /// Every reward value the reference accepts for this vector (several for order-sensitive
    /// vectors), as f64 bits.
    pub fn accepted_bits(&self) -> Vec<u64> {
        let bits = |v: &serde_json::Value| {
            u64::from_str_radix(v.as_str().expect("hex bits"), 16).expect("hex bits")
        };
        let e = &self.expected;
        let mut out = vec![bits(&e["reward_bits"])];
        if let Some(all) = e.get("reward_all_orders_bits").and_then(|v| v.as_array()) {
            out.extend(all.iter().map(bits));
        }
        if let Some(f) = e.get("reward_fsum_mean_bits") {
            out.push(bits(f));
        }
        out
    }
}

/// The SWE-RL development vectors.
pub fn dev_vectors() -> Vec<DevVector> {
    let path = shared_dir().join("data/swerl-dev-vectors.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a development vector"))
        .collect()
}
