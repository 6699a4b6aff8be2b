//! The GRPO loss of one micro-batch on dfdx tensors: the exact `f64` objective of
//! [`crate::grpo::loss`], attached to the policy's log-prob tensor so that the backward pass
//! carries its gradient into the model.
//!
//! ```text
//! (loss, g, h) = micro_batch_terms(logp, H, …)   on the host, in f64: g = d loss / d logp and
//!                                                 h = d loss / d H (the entropy bonus), exact
//! surrogate    = Σ_it g_it · logp_it + Σ_it h_it · H_it     on the tapes of logp and H
//! ```
//!
//! The surrogate's gradients with respect to the log-probs and the entropies are `g` and `h`
//! themselves, so the model's parameters receive exactly `d loss / d θ = Σ g · d logp / d θ +
//! Σ h · d H / d θ`. Every loss type, the
//! sequence-level ratio, `delta`, the off-policy and entropy masks and the KL term are thus
//! computed once, in one place, with the detached quantities TRL detaches (cispo's capped ratio,
//! VESPO's φ, the masks) and the tie rules of `torch.minimum`. The surrogate's value is not the
//! loss; the loss value is returned beside it.

use dfdx::prelude::*;

use crate::error::{Error, Result};
use crate::grpo::loss::{
    LossInputs, MetricSums, MicroBatchScope, ObjectiveParams, OldLogps, micro_batch_terms,
};
use crate::train::driver::RunError;

type T2<E, D, T> = Tensor<(usize, usize), E, D, T>;

/// The constants of one micro-batch (this rank's rows of it), each row-major `[rows, cols]`
/// unless said otherwise.
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
    /// Each token's weight in the loss ([`crate::grpo::Normalisation::token_weights`] over the
    /// whole micro-batch).
    pub weights: &'a [f64],
    /// What the whole micro-batch decides beyond these rows.
    pub scope: MicroBatchScope,
}

/// What one micro-batch's objective gives: the surrogate to backpropagate, the loss value and
/// the metric sums.
pub struct MicroBatchLoss<E: Dtype, D: Device<E>, T> {
    /// `Σ g · logp` on the log-probs' tape: backpropagate this.
    pub surrogate: Tensor<(), E, D, T>,
    /// The micro-batch loss, in `f64`.
    pub value: f64,
    /// The loss-side metric sums of these rows.
    pub sums: MetricSums,
}

/// The micro-batch loss of `logps` (on a tape) and the policy's token `entropies` (needed by the
/// entropy mask and the entropy bonus, through whose tape the bonus's gradient flows) under
/// `params`.
pub fn grpo_loss<E: Dtype, D: Device<E>, T: Tape<E, D> + Merge<R>, R: Tape<E, D>>(
    logps: T2<E, D, T>,
    entropies: Option<T2<E, D, R>>,
    batch: &MicroBatch<'_>,
    params: &ObjectiveParams,
) -> Result<MicroBatchLoss<E, D, T>> {
    let (rows, cols) = *logps.shape();
    let n = rows * cols;
    let shape_ok = batch.advantages.len() == rows
        && batch.mask.len() == n
        && batch.weights.len() == n
        && batch.old_logps.is_none_or(|o| o.len() == n)
        && batch.ref_logps.is_none_or(|r| r.len() == n)
        && entropies
            .as_ref()
            .is_none_or(|e| *e.shape() == (rows, cols));
    if !shape_ok {
        return Err(Error::Run(RunError::MicroBatchShape { rows, cols }));
    }
    let to_rows =
        |flat: &[f64]| -> Vec<Vec<f64>> { flat.chunks(cols.max(1)).map(<[f64]>::to_vec).collect() };
    let cur: Vec<f64> = logps
        .as_vec()
        .into_iter()
        .map(|x| x.to_f64().unwrap_or(f64::NAN))
        .collect();
    let cur_rows = to_rows(&cur);
    let old_rows = batch.old_logps.map(to_rows);
    let ref_rows = batch.ref_logps.map(to_rows);
    let mask_rows = to_rows(batch.mask);
    let entropy_rows = entropies.as_ref().map(|e| {
        let values: Vec<f64> = e
            .as_vec()
            .into_iter()
            .map(|x| x.to_f64().unwrap_or(f64::NAN))
            .collect();
        to_rows(&values)
    });
    let inputs = LossInputs {
        cur_logps: &cur_rows,
        old_logps: match &old_rows {
            Some(old) => OldLogps::Stored(old),
            None => OldLogps::Detached,
        },
        ref_logps: ref_rows.as_deref(),
        completion_mask: &mask_rows,
        advantages: batch.advantages,
        entropies: entropy_rows.as_deref(),
    };
    let terms = micro_batch_terms(&inputs, &to_rows(batch.weights), params, &batch.scope)
        .map_err(|e| Error::Run(RunError::Objective(e)))?;
    let dev = logps.device().clone();
    let constant = |values: &[Vec<f64>]| -> T2<E, D, NoneTape> {
        let values = values
            .iter()
            .flatten()
            .map(|&g| E::from_f64(g).unwrap_or_default())
            .collect();
        dev.tensor_from_vec(values, (rows, cols))
    };
    let mut surrogate = (logps * constant(&terms.grad)).sum::<(), _>();
    if params.entropy_coef != 0.0
        && let Some(entropies) = entropies
    {
        surrogate = surrogate + (entropies * constant(&terms.entropy_grad)).sum::<(), _>();
    }
    Ok(MicroBatchLoss {
        surrogate,
        value: terms.loss,
        sums: terms.sums,
    })
}
