//! The GRPO loss of one micro-batch on dfdx tensors (clipped surrogate, KL term, weighted sum),
//! mirroring the `f64` reference in [`crate::grpo::loss`]:
//!
//! ```text
//! r   = exp(logp − old_logp)                      old_logp = logp's values (detached) on-policy
//! pg  = −A · r          where the clip is inactive
//!       −A · (1 ± ε)    where it is active (r > 1 + ε_high with A > 0, r < 1 − ε_low with A < 0)
//! kl  = exp(ref − logp) − (ref − logp) − 1        (× r with the bias correction; only when β ≠ 0)
//! loss = Σ_it w_it · (pg + β · kl)                w from Normalisation::token_weights
//! ```
//!
//! `pg` is TRL's `−min(r·A, clamp(r)·A)` written case by case: the two agree everywhere, and
//! writing the clipped case as a constant gives exactly TRL's gradient (0 where the clip is
//! active) without relying on how dfdx's `minimum` and `clamp` split gradients at ties. Which
//! tokens are clipped is decided on the host from the same values, so the clip metrics and the
//! gradient cannot disagree.

use dfdx::prelude::*;

use crate::error::{Error, Result};
use crate::grpo::loss::{ObjectiveParams, token_terms};

type T2<E, D, T> = Tensor<(usize, usize), E, D, T>;

/// The constants of one micro-batch, each row-major `[rows, cols]` unless said otherwise.
#[derive(Debug, Clone, Copy)]
pub struct MicroBatch<'a> {
    /// The sampling policy's log-probs; `None` when on-policy (the current values, detached).
    pub old_logps: Option<&'a [f64]>,
    /// The reference policy's log-probs; required when β ≠ 0.
    pub ref_logps: Option<&'a [f64]>,
    /// One advantage per row.
    pub advantages: &'a [f64],
    /// The completion mask (1 = the token counts).
    pub mask: &'a [f64],
    /// Each token's weight in the loss ([`crate::grpo::Normalisation::token_weights`]).
    pub weights: &'a [f64],
}

/// Masked sums over one micro-batch's tokens, for the loss-side metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ObjectiveSums {
    /// Σ mask.
    pub tokens: f64,
    /// Tokens with `r < 1 − ε_low` and `A < 0`.
    pub low_clipped: f64,
    /// Tokens with `r > 1 + ε_high` and `A > 0`.
    pub high_clipped: f64,
    /// Σ of the KL term as used in the loss (bias correction included); 0 when β = 0.
    pub kl: f64,
}

impl std::ops::AddAssign for ObjectiveSums {
    fn add_assign(&mut self, o: Self) {
        self.tokens += o.tokens;
        self.low_clipped += o.low_clipped;
        self.high_clipped += o.high_clipped;
        self.kl += o.kl;
    }
}

/// The micro-batch loss (a scalar on `logps`' tape) and its metric sums.
pub fn grpo_loss<E: Dtype, D: Device<E>, T: Tape<E, D>>(
    logps: T2<E, D, T>,
    batch: &MicroBatch<'_>,
    params: &ObjectiveParams,
) -> Result<(Tensor<(), E, D, T>, ObjectiveSums)> {
    let (rows, cols) = *logps.shape();
    let n = rows * cols;
    let shape_ok = batch.advantages.len() == rows
        && batch.mask.len() == n
        && batch.weights.len() == n
        && batch.old_logps.is_none_or(|o| o.len() == n)
        && batch.ref_logps.is_none_or(|r| r.len() == n);
    if !shape_ok {
        return Err(Error::Training {
            reason: format!("micro-batch inputs do not match its {rows}×{cols} log-probs"),
        });
    }
    if params.kl.is_some() && batch.ref_logps.is_none() {
        return Err(Error::Training {
            reason: "beta > 0 needs reference log-probs".into(),
        });
    }
    let dev = logps.device().clone();
    let cur: Vec<f64> = logps
        .as_vec()
        .into_iter()
        .map(|x| x.to_f64().unwrap_or(f64::NAN))
        .collect();
    let old: Vec<f64> = match batch.old_logps {
        Some(old) => old.to_vec(),
        None => cur.clone(),
    };
    let mut sums = ObjectiveSums::default();
    // Per token: the coefficient of r in pg (−A, or 0 where clipped) and pg's constant part.
    let mut ratio_coef = vec![0.0; n];
    let mut pg_const = vec![0.0; n];
    for i in 0..n {
        let m = batch.mask[i];
        if m == 0.0 {
            continue;
        }
        let a = batch.advantages[i / cols];
        let reference = batch.ref_logps.map(|r| r[i]);
        let terms = token_terms(cur[i], old[i], reference, a, params);
        sums.tokens += m;
        sums.kl += m * terms.kl.unwrap_or(0.0);
        if terms.low_clipped {
            sums.low_clipped += m;
            pg_const[i] = -a * (1.0 - params.epsilon_low);
        } else if terms.high_clipped {
            sums.high_clipped += m;
            pg_const[i] = -a * (1.0 + params.epsilon_high);
        } else {
            ratio_coef[i] = -a;
        }
    }
    let constant = |values: Vec<f64>| -> T2<E, D, NoneTape> {
        let values = values
            .into_iter()
            .map(|x| E::from_f64(x).expect("finite constants"))
            .collect();
        dev.tensor_from_vec(values, (rows, cols))
    };
    let weights = constant(batch.weights.to_vec());
    let one = E::from_f64(1.0).expect("one");
    // Every use but the last takes a `retaped` copy (same tensor id, so gradients add up); the
    // last use takes the original, whose tape holds the forward pass.
    let kl = match (params.kl, batch.ref_logps) {
        (Some(penalty), Some(reference)) => {
            let delta = logps.retaped::<T>().negate() + constant(reference.to_vec());
            let k3 = delta.retaped::<T>().exp() - delta - one;
            Some((penalty, k3))
        }
        _ => None,
    };
    let ratio = (logps - constant(old)).exp();
    let loss_tok = match kl {
        Some((penalty, k3)) => {
            let beta = E::from_f64(penalty.beta).expect("finite beta");
            if penalty.use_bias_correction {
                let pg = ratio.retaped::<T>() * constant(ratio_coef) + constant(pg_const);
                pg + k3 * ratio * beta
            } else {
                ratio * constant(ratio_coef) + constant(pg_const) + k3 * beta
            }
        }
        None => ratio * constant(ratio_coef) + constant(pg_const),
    };
    let loss = (loss_tok * weights).sum::<(), _>();
    Ok((loss, sums))
}
