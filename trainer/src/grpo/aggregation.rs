//! Aggregation of several reward functions into one reward per completion (TRL's
//! `multi_objective_aggregation = "sum_then_normalize"`).
//!
//! A reward function may answer None ("not applicable") for a completion. The aggregate is TRL's
//! weighted `nansum` over the functions that did answer; when **no** function answered, the
//! aggregate is NaN, so the completion is left out of its group's mean and std and gets advantage
//! 0 (see [`advantages`](super::advantages)), while its tokens still count in the loss.

/// The weighted reward of each completion: `r_i = nansum_k(w_k · r_ik)`, or NaN when every
/// function returned None (or NaN) for completion `i`.
///
/// `rewards_per_func[i][k]` is function `k`'s reward for completion `i`; `weights[k]` is
/// `reward_weights[k]` (TRL's default is 1.0 for each function). A weighted term that is NaN
/// (an explicit NaN, or `0 · ∞`) is skipped like None. When some completion got no reward at all,
/// one `tracing` warning names the first such completion and the count, like TRL's
/// "All reward functions returned None" warning; [`all_none_rows`] lists them all.
///
/// # Panics
///
/// When a row does not have one entry per weight. [`check_shape`] reports that as an error
/// instead.
pub(crate) fn aggregate(rewards_per_func: &[Vec<Option<f64>>], weights: &[f64]) -> Vec<f64> {
    let rewards: Vec<f64> = rewards_per_func
        .iter()
        .enumerate()
        .map(|(row, values)| {
            assert_eq!(
                values.len(),
                weights.len(),
                "completion {row} has {} rewards for {} reward weights",
                values.len(),
                weights.len()
            );
            weighted_nansum(values, weights)
        })
        .collect();
    let missing = all_none_rows(rewards_per_func);
    if let Some(first) = missing.first() {
        tracing::warn!(
            completion = first,
            count = missing.len(),
            "all reward functions returned None for completion {first} ({} completion(s) in all); \
             make sure that at least one reward function returns a valid reward",
            missing.len()
        );
    }
    rewards
}

/// Checks that every row of `rewards_per_func` has one entry per weight.
pub(crate) fn check_shape(
    rewards_per_func: &[Vec<Option<f64>>],
    weights: &[f64],
) -> Result<(), super::GrpoError> {
    for (row, values) in rewards_per_func.iter().enumerate() {
        if values.len() != weights.len() {
            return Err(super::GrpoError::Shape {
                what: format!("rewards_per_func row {row}"),
                expected: weights.len(),
                found: values.len(),
            });
        }
    }
    Ok(())
}

/// The completions for which every reward function returned None (or NaN): those whose
/// aggregated reward is NaN.
pub(crate) fn all_none_rows(rewards_per_func: &[Vec<Option<f64>>]) -> Vec<usize> {
    rewards_per_func
        .iter()
        .enumerate()
        .filter(|(_, values)| values.iter().all(|v| v.is_none_or(f64::is_nan)))
        .map(|(row, _)| row)
        .collect()
}

/// One function's column of `rewards_per_func`, with None as NaN (how TRL stores it).
pub(crate) fn function_column(rewards_per_func: &[Vec<Option<f64>>], function: usize) -> Vec<f64> {
    rewards_per_func
        .iter()
        .map(|values| values.get(function).copied().flatten().unwrap_or(f64::NAN))
        .collect()
}

fn weighted_nansum(values: &[Option<f64>], weights: &[f64]) -> f64 {
    let mut sum = 0.0;
    let mut answered = false;
    for (value, weight) in values.iter().zip(weights) {
        let Some(value) = value.filter(|v| !v.is_nan()) else {
            continue;
        };
        answered = true;
        let term = weight * value;
        if !term.is_nan() {
            sum += term;
        }
    }
    if answered { sum } else { f64::NAN }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_sum_skips_none() {
        let rewards = vec![
            vec![Some(1.0), Some(1.0)],
            vec![Some(0.0), Some(1.0)],
            vec![Some(0.0), None],
            vec![None, Some(1.0)],
        ];
        assert_eq!(aggregate(&rewards, &[1.0, 0.5]), vec![1.5, 0.5, 0.0, 0.5]);
    }

    #[test]
    fn all_none_is_nan_and_listed() {
        let rewards = vec![
            vec![None, None],
            vec![Some(1.0), None],
            vec![None, Some(f64::NAN)],
        ];
        let aggregated = aggregate(&rewards, &[1.0, 1.0]);
        assert!(aggregated[0].is_nan());
        assert_eq!(aggregated[1], 1.0);
        assert!(aggregated[2].is_nan());
        assert_eq!(all_none_rows(&rewards), vec![0, 2]);
    }

    #[test]
    fn no_reward_functions_means_no_reward() {
        let aggregated = aggregate(&[vec![], vec![]], &[]);
        assert!(aggregated.iter().all(|r| r.is_nan()));
    }

    #[test]
    fn shape_check_names_the_row() {
        let err = check_shape(&[vec![Some(1.0)], vec![]], &[1.0]).unwrap_err();
        assert!(err.to_string().contains("row 1"), "{err}");
    }

    #[test]
    fn function_column_turns_none_into_nan() {
        let column = function_column(&[vec![Some(1.0), None], vec![None, Some(2.0)]], 1);
        assert!(column[0].is_nan());
        assert_eq!(column[1], 2.0);
    }
}
