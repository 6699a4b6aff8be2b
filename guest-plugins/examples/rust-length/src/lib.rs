//! Example reward plugin: `1 / (1 + words / 100)` of the completion, with the word count as a
//! metric. It shows the whole of a plugin author's work (one trait, one macro) and serves the
//! host's tests as a well-behaved plugin. Not a reward anyone should train on.

use swerve_plugin_kit::reward::{PluginInfo, Sample, Score};

struct Length;

impl swerve_plugin_kit::RewardPlugin for Length {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "rust-length".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Rewards short completions: 1 / (1 + words / 100)".into(),
        }
    }

    fn score(sample: &Sample) -> Result<Score, String> {
        if sample.meta("fail").is_some() {
            return Err(format!("sample {} asked to fail", sample.id));
        }
        let words = sample.completion.split_whitespace().count() as f64;
        Ok(Score::reward(1.0 / (1.0 + words / 100.0)).with_metric("words", words))
    }
}

swerve_plugin_kit::export_reward!(Length);
