//! Group statistics and advantages, as TRL's `GRPOTrainer` computes them.
//!
//! Completions come in groups of `num_generations` (G) consecutive entries, one group per prompt.
//! With `r` the aggregated rewards (NaN = no reward, see [`rewards`]):
//!
//! ```text
//! mean_g = nanmean(r over group g)          std_g = nanstd(r over group g)   (Bessel, n − 1)
//! group: A_i = (r_i − mean_g) / (std_g + eps)
//! batch: A_i = (r_i − mean_g) / (std_batch + eps)     std_batch = nanstd over the whole batch
//! none:  A_i =  r_i − mean_g                           (Dr. GRPO)
//! then every NaN advantage becomes 0
//! ```
//!
//! `eps` is added to the std, not the variance: TRL uses [`TRL_STD_EPS`] = 1e-4. A std over fewer
//! than two rewards is NaN, so such a group's advantages are 0.

use serde::{Deserialize, Serialize};

use super::GrpoError;
use super::aggregation;
use super::config::MultiObjectiveAggregation;
use super::stats::{is_close_to_zero, nanmean, nanstd};

/// The epsilon TRL adds to the reward std before dividing (verl uses 1e-6).
pub(crate) const TRL_STD_EPS: f64 = 1e-4;

/// How advantages are scaled: TRL's `scale_rewards`.
///
/// Deserialises from `"group"`, `"batch"`, `"none"`, and TRL's boolean aliases `true` (=
/// `"group"`) and `false` (= `"none"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleRewards {
    /// Divide by the std of the completion's group (default).
    #[default]
    Group,
    /// Divide by the std of the whole generation batch; centre on the group mean still.
    Batch,
    /// Do not divide (Dr. GRPO).
    None,
}

impl ScaleRewards {
    /// The three modes: `group`, `batch`, `none`.
    pub const ALL: [ScaleRewards; 3] =
        [ScaleRewards::Group, ScaleRewards::Batch, ScaleRewards::None];

    /// TRL's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            ScaleRewards::Group => "group",
            ScaleRewards::Batch => "batch",
            ScaleRewards::None => "none",
        }
    }
}

impl<'de> Deserialize<'de> for ScaleRewards {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Name(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Flag(true) => Ok(ScaleRewards::Group),
            Raw::Flag(false) => Ok(ScaleRewards::None),
            Raw::Name(name) => match name.as_str() {
                "group" => Ok(ScaleRewards::Group),
                "batch" => Ok(ScaleRewards::Batch),
                "none" => Ok(ScaleRewards::None),
                other => Err(serde::de::Error::unknown_variant(
                    other,
                    &["group", "batch", "none", "true", "false"],
                )),
            },
        }
    }
}

/// Per-completion group statistics of a generation batch of aggregated rewards.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStats {
    /// The aggregated rewards, one per completion (NaN = no reward).
    pub rewards: Vec<f64>,
    /// The mean of each completion's group (nanmean), repeated per completion.
    pub group_mean: Vec<f64>,
    /// The std of each completion's group (Bessel nanstd), repeated per completion.
    pub group_std: Vec<f64>,
    /// The std over the whole batch (Bessel nanstd), used by [`ScaleRewards::Batch`] and logged
    /// as `reward_std`.
    pub batch_std: f64,
}

impl GroupStats {
    /// Computes the statistics of `rewards`, grouped by `num_generations` consecutive entries.
    ///
    /// Errors when `num_generations` is 0 or does not divide the number of rewards, or when there
    /// are no rewards.
    pub fn new(rewards: &[f64], num_generations: usize) -> Result<Self, GrpoError> {
        if num_generations == 0
            || rewards.is_empty()
            || !rewards.len().is_multiple_of(num_generations)
        {
            return Err(GrpoError::Shape {
                what: format!("rewards in groups of num_generations = {num_generations}"),
                expected: rewards.len().div_ceil(num_generations.max(1)) * num_generations.max(1),
                found: rewards.len(),
            });
        }
        let mut group_mean = Vec::with_capacity(rewards.len());
        let mut group_std = Vec::with_capacity(rewards.len());
        for group in rewards.chunks(num_generations) {
            let (mean, std) = (nanmean(group), nanstd(group));
            group_mean.extend(std::iter::repeat_n(mean, group.len()));
            group_std.extend(std::iter::repeat_n(std, group.len()));
        }
        Ok(GroupStats {
            rewards: rewards.to_vec(),
            group_mean,
            group_std,
            batch_std: nanstd(rewards),
        })
    }

    /// The advantage of each completion under `scale`, with `std_eps` added to the std (TRL:
    /// 1e-4); NaN advantages (no reward, or a std over fewer than two rewards) are 0.
    pub fn advantages(&self, scale: ScaleRewards, std_eps: f64) -> Vec<f64> {
        self.rewards
            .iter()
            .zip(&self.group_mean)
            .zip(&self.group_std)
            .map(|((reward, mean), group_std)| {
                let centred = reward - mean;
                let advantage = match scale {
                    ScaleRewards::Group => centred / (group_std + std_eps),
                    ScaleRewards::Batch => centred / (self.batch_std + std_eps),
                    ScaleRewards::None => centred,
                };
                if advantage.is_nan() { 0.0 } else { advantage }
            })
            .collect()
    }

    /// `frac_reward_zero_std` under `scale`: the fraction of completions whose std — the one the
    /// advantages divide by, so the group's under `group` and `none` and the batch's under
    /// `batch` — is close to 0 (`torch.isclose`); a NaN std (fewer than two rewards) does not
    /// count.
    pub fn frac_reward_zero_std(&self, scale: ScaleRewards) -> f64 {
        let zero = match scale {
            ScaleRewards::Group | ScaleRewards::None => self
                .group_std
                .iter()
                .filter(|s| is_close_to_zero(**s))
                .count(),
            ScaleRewards::Batch if is_close_to_zero(self.batch_std) => self.rewards.len(),
            ScaleRewards::Batch => 0,
        };
        zero as f64 / self.rewards.len() as f64
    }
}

/// A generation batch's advantages, with the `frac_reward_zero_std` TRL logs beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct Advantages {
    /// One advantage per completion (0 for a completion no reward function scored).
    pub values: Vec<f64>,
    /// The share of completions whose normalising std is close to 0.
    pub frac_reward_zero_std: f64,
}

/// The advantages of a batch from each function's rewards (`rewards_per_func[i][k]`, None for
/// "not applicable"), grouped by `num_generations`, as TRL's `multi_objective_aggregation` and
/// `scale_rewards` say, with `std_eps` added to every std; plus the group statistics of the
/// weighted sums, which the reward metrics are logged from whatever the aggregation.
///
/// `normalize_then_sum` (GDPO) standardises each function within its group, takes the weighted
/// nansum, then standardises over the batch: `(x − nanmean) / (nanstd + eps)`; `scale_rewards`
/// does not apply to it. A completion every function skipped gets advantage 0 either way.
pub(crate) fn batch_advantages(
    rewards_per_func: &[Vec<Option<f64>>],
    weights: &[f64],
    num_generations: usize,
    scale: ScaleRewards,
    aggregation: MultiObjectiveAggregation,
    std_eps: f64,
) -> Result<(GroupStats, Advantages), GrpoError> {
    aggregation::check_shape(rewards_per_func, weights)?;
    let aggregated = aggregation::aggregate(rewards_per_func, weights);
    let stats = GroupStats::new(&aggregated, num_generations)?;
    let advantages = match aggregation {
        MultiObjectiveAggregation::SumThenNormalize => Advantages {
            values: stats.advantages(scale, std_eps),
            frac_reward_zero_std: stats.frac_reward_zero_std(scale),
        },
        MultiObjectiveAggregation::NormalizeThenSum => {
            normalize_then_sum(rewards_per_func, weights, num_generations, std_eps)
        }
    };
    Ok((stats, advantages))
}

/// GDPO's advantages (see [`batch_advantages`]); `num_generations` divides the batch (checked
/// by the caller through [`GroupStats::new`]).
fn normalize_then_sum(
    rewards_per_func: &[Vec<Option<f64>>],
    weights: &[f64],
    num_generations: usize,
    std_eps: f64,
) -> Advantages {
    let unscorable = aggregation::all_none_rows(rewards_per_func);
    let mut summed = vec![0.0; rewards_per_func.len()];
    for (k, weight) in weights.iter().enumerate() {
        let column = aggregation::function_column(rewards_per_func, k);
        for (g, group) in column.chunks(num_generations).enumerate() {
            let (mean, std) = (nanmean(group), nanstd(group));
            for (j, x) in group.iter().enumerate() {
                let term = (x - mean) / (std + std_eps) * weight;
                // nansum: a function that skipped the completion, or a group std over fewer than
                // two rewards, adds nothing.
                if !term.is_nan() {
                    summed[g * num_generations + j] += term;
                }
            }
        }
    }
    for row in unscorable {
        summed[row] = f64::NAN;
    }
    let (mean, std) = (nanmean(&summed), nanstd(&summed));
    let values = summed
        .iter()
        .map(|x| {
            let advantage = (x - mean) / (std + std_eps);
            if advantage.is_nan() { 0.0 } else { advantage }
        })
        .collect();
    Advantages {
        values,
        frac_reward_zero_std: if is_close_to_zero(std) { 1.0 } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(expected) {
            assert!(
                (a - e).abs() <= 1e-12 * e.abs().max(1.0),
                "{actual:?} != {expected:?}"
            );
        }
    }

    #[test]
    fn zero_std_group_gets_zero_advantage_and_counts() {
        let stats = GroupStats::new(&[1.0, 0.0, 1.5, 1.5], 2).unwrap();
        assert_eq!(stats.group_std[2], 0.0);
        for scale in ScaleRewards::ALL {
            let advantages = stats.advantages(scale, TRL_STD_EPS);
            assert_eq!(&advantages[2..], &[0.0, 0.0], "{scale:?}");
        }
        assert_eq!(stats.frac_reward_zero_std(ScaleRewards::Group), 0.5);
        assert_eq!(stats.frac_reward_zero_std(ScaleRewards::Batch), 0.0);
    }

    #[test]
    fn three_modes() {
        let rewards = [1.5, 0.5, 1.0, 0.0];
        let stats = GroupStats::new(&rewards, 2).unwrap();
        let s = 0.5_f64.sqrt();
        assert_close(
            &stats.advantages(ScaleRewards::Group, TRL_STD_EPS),
            &[
                0.5 / (s + 1e-4),
                -0.5 / (s + 1e-4),
                0.5 / (s + 1e-4),
                -0.5 / (s + 1e-4),
            ],
        );
        let b = (1.25_f64 / 3.0).sqrt();
        assert_close(
            &stats.advantages(ScaleRewards::Batch, 0.0),
            &[0.5 / b, -0.5 / b, 0.5 / b, -0.5 / b],
        );
        assert_close(
            &stats.advantages(ScaleRewards::None, TRL_STD_EPS),
            &[0.5, -0.5, 0.5, -0.5],
        );
    }

    #[test]
    fn nan_reward_is_left_out_and_gets_zero() {
        let stats = GroupStats::new(&[f64::NAN, 1.0, 0.0, 2.0], 4).unwrap();
        assert_eq!(stats.group_mean[0], 1.0);
        assert_eq!(stats.group_std[0], 1.0);
        let advantages = stats.advantages(ScaleRewards::Group, 0.0);
        assert_close(&advantages, &[0.0, 0.0, -1.0, 1.0]);
    }

    #[test]
    fn all_none_group_has_nan_std_not_counted_as_zero() {
        let stats = GroupStats::new(&[f64::NAN, f64::NAN, 1.0, 2.0], 2).unwrap();
        assert!(stats.group_std[0].is_nan());
        assert_eq!(stats.frac_reward_zero_std(ScaleRewards::Group), 0.0);
        for scale in ScaleRewards::ALL {
            assert_eq!(&stats.advantages(scale, TRL_STD_EPS)[..2], &[0.0, 0.0]);
        }
    }

    #[test]
    fn single_reward_in_group_gives_zero_advantage() {
        let stats = GroupStats::new(&[f64::NAN, 3.0], 2).unwrap();
        assert!(stats.group_std[1].is_nan());
        assert_eq!(
            stats.advantages(ScaleRewards::Group, TRL_STD_EPS),
            vec![0.0, 0.0]
        );
        // Centring still works without a std.
        assert_eq!(
            stats.advantages(ScaleRewards::None, TRL_STD_EPS),
            vec![0.0, 0.0]
        );
    }

    #[test]
    fn groups_must_be_whole() {
        assert!(GroupStats::new(&[1.0, 2.0, 3.0], 2).is_err());
        assert!(GroupStats::new(&[1.0, 2.0], 0).is_err());
        assert!(GroupStats::new(&[], 2).is_err());
    }

    #[test]
    fn scale_rewards_accepts_trl_aliases() {
        let parse = |s: &str| serde_json::from_str::<ScaleRewards>(s);
        assert_eq!(parse("true").unwrap(), ScaleRewards::Group);
        assert_eq!(parse("false").unwrap(), ScaleRewards::None);
        assert_eq!(parse("\"batch\"").unwrap(), ScaleRewards::Batch);
        assert!(parse("\"sequence\"").is_err());
    }
}
