//! Reward plugin `format`: the SWE-RL format check alone. A completion is well-formed when its
//! think/solution tags, its SEARCH/REPLACE blocks and the edits themselves are valid against the
//! code context (steps 1–3 of the SWE-RL reward); it scores 0, and a malformed one −1 with the
//! reason as its message. Combine it with a correctness reward to penalise broken output only.

use swerve_plugin_kit::reward::{PluginInfo, Sample, Score};
use swerve_swe_rl::FileMap;

struct Format;

impl swerve_plugin_kit::RewardPlugin for Format {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "format".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "SWE-RL format check: -1 for a malformed completion, 0 otherwise".into(),
        }
    }

    fn score(sample: &Sample) -> Result<Score, String> {
        let context: FileMap = sample
            .code_context
            .iter()
            .map(|f| (f.path.clone(), f.content.clone()))
            .collect();
        Ok(
            match swerve_swe_rl::parse_and_apply(&context, &sample.completion) {
                Ok(edits) => Score::reward(0.0).with_metric("blocks", edits.blocks.len() as f64),
                Err(e) => Score::reward(-1.0).with_message(e.to_string()),
            },
        )
    }
}

swerve_plugin_kit::export_reward!(Format);
