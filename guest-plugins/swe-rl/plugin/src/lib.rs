//! The `swe-rl` reward component: [`swerve_swe_rl::search_replace_reward`] behind the
//! `swerve:plugin/reward` world. The reward is the paper's (−1 for a malformed completion, else
//! the mean patch similarity in [0, 1]); the format error, if any, is the score's message.

use swerve_plugin_kit::reward::{File, PluginInfo, Sample, Score};

use swerve_swe_rl::FileMap;

struct SweRl;

fn file_map(files: &[File]) -> FileMap {
    files
        .iter()
        .map(|f| (f.path.clone(), f.content.clone()))
        .collect()
}

impl swerve_plugin_kit::RewardPlugin for SweRl {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "swe-rl".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description:
                "SWE-RL search/replace reward: -1 if malformed, else patch similarity to the oracle"
                    .into(),
        }
    }

    fn score(sample: &Sample) -> Result<Score, String> {
        let outcome = swerve_swe_rl::search_replace_reward(
            &file_map(&sample.code_context),
            &file_map(&sample.oracle_new_content),
            &sample.completion,
        );
        let mut score = Score::reward(outcome.reward)
            .with_metric("format_error", outcome.format_error.is_some() as u8 as f64)
            .with_metric("paths", outcome.similarities.len() as f64);
        if let Some(e) = outcome.format_error {
            score = score.with_message(e.to_string());
        }
        Ok(score)
    }
}

swerve_plugin_kit::export_reward!(SweRl);
