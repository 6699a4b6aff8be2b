//! Combining several reward plugins into one reward, with weights and TRL's `None` semantics:
//! `r = Σ_k w_k · r_k` over the plugins that gave a reward; when none did, the combined reward
//! is `None` (TRL's NaN: left out of group statistics, advantage forced to 0).

use crate::outcome::{Failure, Fallbacks};
use crate::types::Score;

/// The reward a plugin contributes for one sample: its own, or the fallback for its failure
/// class, or `None`.
pub fn effective_reward(outcome: &Result<Score, Failure>, fallbacks: &Fallbacks) -> Option<f64> {
    match outcome {
        Ok(score) => score.reward,
        Err(failure) => fallbacks.get(failure.class),
    }
}

/// The weighted sum of the rewards that are present (`nansum`); `None` when every reward is
/// absent (or there are none).
pub fn combine(weighted: impl IntoIterator<Item = (f64, Option<f64>)>) -> Option<f64> {
    weighted
        .into_iter()
        .filter_map(|(w, r)| r.map(|r| w * r))
        .fold(None, |acc, x| Some(acc.unwrap_or(0.0) + x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailureClass;

    /// (weight, reward) per plugin, and the combined reward.
    type Case<'a> = (&'a [(f64, Option<f64>)], Option<f64>);

    #[test]
    fn weighted_sum_skips_none() {
        let cases: &[Case<'_>] = &[
            (&[], None),
            (&[(1.0, None), (2.0, None)], None),
            (&[(1.0, Some(0.5))], Some(0.5)),
            (&[(1.0, Some(0.5)), (2.0, None)], Some(0.5)),
            (&[(1.0, Some(0.5)), (2.0, Some(-1.0))], Some(-1.5)),
            (&[(0.0, Some(3.0))], Some(0.0)),
        ];
        for (input, expect) in cases {
            assert_eq!(combine(input.iter().copied()), *expect, "{input:?}");
        }
    }

    #[test]
    fn failures_use_the_fallback_of_their_class() {
        let mut fallbacks = Fallbacks::default();
        fallbacks.set(FailureClass::Timeout, Some(-1.0));
        let timeout = Err(Failure {
            class: FailureClass::Timeout,
            ..Failure::invalid("t")
        });
        let trap = Err(Failure {
            class: FailureClass::Trap,
            ..Failure::invalid("t")
        });
        assert_eq!(effective_reward(&timeout, &fallbacks), Some(-1.0));
        assert_eq!(effective_reward(&trap, &fallbacks), None);
        assert_eq!(
            effective_reward(
                &Ok(Score {
                    reward: Some(0.25),
                    ..Score::default()
                }),
                &fallbacks
            ),
            Some(0.25)
        );
    }
}
