//! The reward- and completion-side metrics of a generation batch, under the names TRL logs them
//! with. The loss-side metrics (`clip_ratio/*`, `kl`, …) come from
//! [`MetricSums`](super::loss::MetricSums).

use std::collections::BTreeMap;

use super::GrpoError;
use super::advantages::{Advantages, GroupStats};
use super::aggregation::function_column;
use super::stats::{nanmean, nanstd};

/// The reward metrics: `reward` (nanmean of the weighted sums of the rewards), `reward_std`
/// (nanstd over the batch), `frac_reward_zero_std` (from `advantages`), and `rewards/<name>/mean` and `rewards/<name>/std` per
/// reward function (None skipped). `reward_names[k]` names column `k` of `rewards_per_func`.
pub(crate) fn reward_metrics(
    stats: &GroupStats,
    advantages: &Advantages,
    rewards_per_func: &[Vec<Option<f64>>],
    reward_names: &[String],
) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::from([
        ("reward".to_owned(), nanmean(&stats.rewards)),
        ("reward_std".to_owned(), stats.batch_std),
        (
            "frac_reward_zero_std".to_owned(),
            advantages.frac_reward_zero_std,
        ),
    ]);
    for (k, name) in reward_names.iter().enumerate() {
        let column = function_column(rewards_per_func, k);
        metrics.insert(format!("rewards/{name}/mean"), nanmean(&column));
        metrics.insert(format!("rewards/{name}/std"), nanstd(&column));
    }
    metrics
}

/// The completion metrics from each completion's token count and whether it was truncated (its
/// last token neither EOS nor padding): `completions/{mean,min,max}_length`,
/// `completions/{mean,min,max}_terminated_length` (completions that ended with EOS; all 0 when
/// none did, as in TRL) and `completions/clipped_ratio` (the truncated fraction).
pub(crate) fn completion_metrics(
    lengths: &[usize],
    truncated: &[bool],
) -> Result<BTreeMap<String, f64>, GrpoError> {
    if lengths.len() != truncated.len() {
        return Err(GrpoError::Shape {
            what: "truncated".into(),
            expected: lengths.len(),
            found: truncated.len(),
        });
    }
    let all: Vec<f64> = lengths.iter().map(|&n| n as f64).collect();
    let mut terminated: Vec<f64> = all
        .iter()
        .zip(truncated)
        .filter(|(_, cut)| !**cut)
        .map(|(n, _)| *n)
        .collect();
    let clipped_ratio = 1.0 - terminated.len() as f64 / all.len() as f64;
    if terminated.is_empty() {
        terminated.push(0.0);
    }
    let mut metrics = BTreeMap::new();
    for (prefix, values) in [("", &all), ("terminated_", &terminated)] {
        metrics.insert(format!("completions/mean_{prefix}length"), nanmean(values));
        metrics.insert(format!("completions/min_{prefix}length"), min(values));
        metrics.insert(format!("completions/max_{prefix}length"), max(values));
    }
    metrics.insert("completions/clipped_ratio".to_owned(), clipped_ratio);
    Ok(metrics)
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().reduce(f64::min).unwrap_or(f64::NAN)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().reduce(f64::max).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_terminated_completion_logs_zeros() {
        let metrics = completion_metrics(&[4, 4], &[true, true]).unwrap();
        assert_eq!(metrics["completions/mean_terminated_length"], 0.0);
        assert_eq!(metrics["completions/max_terminated_length"], 0.0);
        assert_eq!(metrics["completions/clipped_ratio"], 1.0);
        assert_eq!(metrics["completions/mean_length"], 4.0);
    }

    #[test]
    fn reward_metrics_skip_none() {
        let per_func = vec![vec![Some(1.0), None], vec![Some(0.0), Some(2.0)]];
        let stats = GroupStats::new(&[1.0, 2.0], 2).unwrap();
        let advantages = Advantages {
            values: vec![-1.0, 1.0],
            frac_reward_zero_std: 0.25,
        };
        let metrics = reward_metrics(&stats, &advantages, &per_func, &["a".into(), "b".into()]);
        assert_eq!(metrics["frac_reward_zero_std"], 0.25);
        assert_eq!(metrics["rewards/a/mean"], 0.5);
        assert_eq!(metrics["rewards/b/mean"], 2.0);
        assert!(metrics["rewards/b/std"].is_nan());
        assert_eq!(metrics["reward"], 1.5);
    }
}
