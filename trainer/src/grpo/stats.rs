//! NaN-aware statistics, computed the way TRL computes them with PyTorch.
//!
//! A NaN stands for a missing value (a reward function that returned None) and is skipped.

/// Mean of the non-NaN values (`torch.nanmean`); NaN when there are none.
pub(crate) fn nanmean(values: &[f64]) -> f64 {
    let (sum, count) = values
        .iter()
        .filter(|v| !v.is_nan())
        .fold((0.0, 0_usize), |(sum, count), v| (sum + v, count + 1));
    if count == 0 {
        f64::NAN
    } else {
        sum / count as f64
    }
}

/// Bessel-corrected standard deviation of the non-NaN values: TRL's `nanstd`, which equals
/// `torch.std` (unbiased) when nothing is NaN. NaN with fewer than two non-NaN values.
///
/// Computed as TRL does: the mean of the squared deviations, times `count / (count − 1)`.
pub(crate) fn nanstd(values: &[f64]) -> f64 {
    let count = values.iter().filter(|v| !v.is_nan()).count();
    if count < 2 {
        return f64::NAN;
    }
    let mean = nanmean(values);
    let squares: Vec<f64> = values
        .iter()
        .filter(|v| !v.is_nan())
        .map(|v| (v - mean) * (v - mean))
        .collect();
    let n = count as f64;
    (nanmean(&squares) * (n / (n - 1.0))).sqrt()
}

/// Whether `value` is close to zero as `torch.isclose(value, 0)` decides (absolute tolerance
/// 1e-8); NaN is not close to anything.
pub(crate) fn is_close_to_zero(value: f64) -> bool {
    value.abs() <= 1e-8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanmean_skips_nan_and_is_nan_when_empty() {
        assert_eq!(nanmean(&[1.0, f64::NAN, 3.0]), 2.0);
        assert!(nanmean(&[f64::NAN]).is_nan());
        assert!(nanmean(&[]).is_nan());
    }

    #[test]
    fn nanstd_is_bessel_corrected() {
        // Var of [1.5, 0.5, 1.0, 0.0] with n − 1 = 3: 1.25 / 3.
        let std = nanstd(&[1.5, 0.5, 1.0, 0.0]);
        assert!((std - (1.25_f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((nanstd(&[1.0, f64::NAN, 3.0]) - 2.0_f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn nanstd_of_fewer_than_two_values_is_nan() {
        assert!(nanstd(&[1.0]).is_nan());
        assert!(nanstd(&[1.0, f64::NAN]).is_nan());
        assert!(nanstd(&[]).is_nan());
    }

    #[test]
    fn close_to_zero_follows_torch_isclose() {
        assert!(is_close_to_zero(0.0));
        assert!(is_close_to_zero(-1e-9));
        assert!(!is_close_to_zero(1e-7));
        assert!(!is_close_to_zero(f64::NAN));
    }
}
