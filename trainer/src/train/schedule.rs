//! Learning-rate schedules as Hugging Face `transformers` computes them (`get_scheduler`): the
//! rate at optimiser step `s` (counted from 0) is `learning_rate · λ(s)`.
//!
//! | schedule | λ(s) during warm-up (`s < W`) | λ(s) after |
//! |---|---|---|
//! | `linear` | `s / W` | `(T − s) / (T − W)`, at least 0 |
//! | `cosine` | `s / W` | `½ (1 + cos(π · (s − W) / (T − W)))` |
//! | `constant` | 1 | 1 |
//! | `constant_with_warmup` | `s / W` | 1 |
//!
//! `T` is the number of training steps and `W` the warm-up steps: `warmup_steps` when positive,
//! else `ceil(warmup_ratio · T)`. As in `transformers`, the first step of a warm-up uses rate 0.

use crate::train::arguments::LrSchedulerType;

/// A learning-rate schedule over a fixed number of steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// The peak rate (`learning_rate`).
    pub learning_rate: f64,
    /// The curve.
    pub kind: LrSchedulerType,
    /// Warm-up steps W.
    pub warmup_steps: usize,
    /// Training steps T.
    pub total_steps: usize,
}

impl Schedule {
    /// A schedule with `transformers`' warm-up rule: `warmup_steps` when positive, else
    /// `ceil(warmup_ratio · total_steps)`.
    pub fn new(
        learning_rate: f64,
        kind: LrSchedulerType,
        warmup_steps: usize,
        warmup_ratio: f64,
        total_steps: usize,
    ) -> Self {
        let warmup = if warmup_steps > 0 {
            warmup_steps
        } else {
            (warmup_ratio * total_steps as f64).ceil() as usize
        };
        Self {
            learning_rate,
            kind,
            warmup_steps: warmup,
            total_steps,
        }
    }

    /// The learning rate of optimiser step `step` (0-based).
    pub fn lr(&self, step: usize) -> f64 {
        self.learning_rate * self.factor(step)
    }

    fn factor(&self, step: usize) -> f64 {
        let (s, w, t) = (
            step as f64,
            self.warmup_steps as f64,
            self.total_steps as f64,
        );
        let warming = step < self.warmup_steps;
        match self.kind {
            LrSchedulerType::Constant => 1.0,
            _ if warming => s / w.max(1.0),
            LrSchedulerType::ConstantWithWarmup => 1.0,
            LrSchedulerType::Linear => ((t - s) / (t - w).max(1.0)).max(0.0),
            LrSchedulerType::Cosine => {
                let progress = (s - w) / (t - w).max(1.0);
                (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(kind: LrSchedulerType, warmup: usize, total: usize) -> Vec<f64> {
        let s = Schedule::new(1.0, kind, warmup, 0.0, total);
        (0..total).map(|i| (s.lr(i) * 1e6).round() / 1e6).collect()
    }

    #[test]
    fn schedules_match_transformers() {
        // (schedule, warm-up, total, expected λ per step)
        let cases = [
            (LrSchedulerType::Linear, 0, 4, vec![1.0, 0.75, 0.5, 0.25]),
            (LrSchedulerType::Linear, 2, 4, vec![0.0, 0.5, 1.0, 0.5]),
            (
                LrSchedulerType::Cosine,
                0,
                4,
                vec![1.0, 0.853553, 0.5, 0.146447],
            ),
            (LrSchedulerType::Cosine, 1, 3, vec![0.0, 1.0, 0.5]),
            (LrSchedulerType::Constant, 2, 3, vec![1.0, 1.0, 1.0]),
            (
                LrSchedulerType::ConstantWithWarmup,
                2,
                3,
                vec![0.0, 0.5, 1.0],
            ),
        ];
        for (kind, warmup, total, expected) in cases {
            assert_eq!(rates(kind, warmup, total), expected, "{kind:?} W={warmup}");
        }
    }

    #[test]
    fn warmup_ratio_rounds_up() {
        let s = Schedule::new(1.0, LrSchedulerType::Linear, 0, 0.1, 25);
        assert_eq!(s.warmup_steps, 3);
        let s = Schedule::new(1.0, LrSchedulerType::Linear, 5, 0.1, 25);
        assert_eq!(s.warmup_steps, 5);
    }
}
