//! Reward plugin `tests-fixed`: an execution reward. With the results of running a completion's
//! patch in the sandbox (`harness`'s executor, `trainer grpo --execute`), the reward is the
//! fraction of the instance's FAIL_TO_PASS tests that pass now, or 0 when any PASS_TO_PASS test
//! no longer passes or the patch did not apply. An instance without FAIL_TO_PASS tests scores 1
//! when nothing broke.
//!
//! Not applicable (`None`, left out of the weighted sum) when the sample was not executed or the
//! execution failed for a reason that is not the model's (`infra-error`): a broken sandbox must
//! neither reward nor punish the policy.

use swerve_plugin_kit::reward::{PluginInfo, Sample, Score};

struct TestsFixed;

impl swerve_plugin_kit::RewardPlugin for TestsFixed {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "tests-fixed".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "fraction of FAIL_TO_PASS tests fixed, 0 if a PASS_TO_PASS test broke"
                .into(),
        }
    }

    fn score(sample: &Sample) -> Result<Score, String> {
        let Some(execution) = &sample.execution else {
            return Ok(Score::not_applicable("the sample was not executed"));
        };
        if let Some(error) = &execution.infra_error {
            return Ok(Score::not_applicable(format!("infrastructure: {error}")));
        }
        let fixed = execution.fail_to_pass.iter().filter(|t| t.passed).count();
        let broken = execution.pass_to_pass.iter().filter(|t| !t.passed).count();
        let total = execution.fail_to_pass.len();
        let reward = if !execution.patch_applied || broken > 0 {
            0.0
        } else if total == 0 {
            1.0
        } else {
            fixed as f64 / total as f64
        };
        let score = Score::reward(reward)
            .with_metric("fail_to_pass_fixed", fixed as f64)
            .with_metric("pass_to_pass_broken", broken as f64)
            .with_metric("resolved", f64::from(u8::from(execution.resolved)));
        Ok(if execution.patch_applied {
            score
        } else {
            score.with_message("the patch did not apply")
        })
    }
}

swerve_plugin_kit::export_reward!(TestsFixed);
