//! The per-token GRPO loss, its gradient, its four normalisations and the loss-side metrics, as
//! TRL 1.16.0's `GRPOTrainer` computes them, in exact `f64` math over plain row-major matrices:
//! one `Vec<f64>` per completion, one entry per completion token position.
//!
//! # Per token (TRL, `importance_sampling_level = "token"`)
//!
//! ```text
//! r      = exp(logp − old_logp)               old_logp = logp, detached, when on-policy
//! pg     = −min(r · A, clamp(r, 1 − ε_low, 1 + ε_high) · A)
//! k3     = exp(ref − logp) − (ref − logp) − 1   only when β ≠ 0; kl = k3 · r with the bias correction
//! ℓ      = pg + β · kl
//! dℓ/dlogp = −A · r (0 where the clip is active: r > 1 + ε_high with A > 0, r < 1 − ε_low with
//!            A < 0)  +  β · (1 − exp(ref − logp))   or, bias-corrected, β · r · (1 − exp(ref − logp) + k3)
//! ```
//!
//! # Per micro-batch ([`LossType`])
//!
//! With `M` the completion mask, `B` the micro-batch's number of completions, `L` =
//! `max_completion_length`, `GAS` = `gradient_accumulation_steps`, `SPG` =
//! `steps_per_generation`, `P` the number of processes and `N` = `num_items_in_batch` (mask sum of
//! the whole generation batch over all processes, fixed at generation time):
//!
//! | loss type | micro-batch loss |
//! |---|---|
//! | `grpo` | `mean_i[Σ_t ℓM / max(1, Σ_t M)] / GAS` |
//! | `bnpo` | `Σ ℓM / max(1, Σ M) / GAS` |
//! | `dr_grpo` | `Σ ℓM / (B · L) / GAS` |
//! | `dapo` | `Σ ℓM / (max(N, 1) / P · GAS / SPG)` |
//!
//! The accumulated loss of an optimiser step is the **sum** of its micro-batch losses, and so is
//! the accumulated gradient.
//!
//! # For a tensor implementation
//!
//! Every micro-batch loss above is linear in the per-token losses: `loss = Σ_it w_it · ℓ_it`.
//! [`Normalisation::token_weights`] returns these `w_it` (mask included, exactly 0 at padding),
//! so an autodiff implementation can compute `ℓ` as a tensor, multiply it by a constant weight
//! tensor and sum; the gradient with respect to the log-probs is then `w_it · dℓ_it/dlogp_it`,
//! which is what [`evaluate`] returns per loss type. The weights depend only on the mask and the
//! [`Normalisation`], never on the log-probs, so they carry no gradient.
//!
//! Masked positions are skipped entirely (their ratio, loss and gradient are exactly 0), so
//! padding may hold any value, even a non-finite one.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::GrpoError;

/// How per-token losses are reduced to one scalar: TRL's `loss_type` (default `dapo`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum LossType {
    /// DeepSeekMath: each sequence averaged over its own length, then sequences averaged.
    Grpo,
    /// Token mean within each micro-batch.
    Bnpo,
    /// Dr. GRPO: token sum over the constant `B · max_completion_length`.
    DrGrpo,
    /// DAPO: token mean over every active token of the accumulated global batch (default).
    #[default]
    Dapo,
}

impl LossType {
    /// The four loss types, in the order of the table above (and of [`LossReport::by_type`]).
    pub const ALL: [LossType; 4] = [
        LossType::Grpo,
        LossType::Bnpo,
        LossType::DrGrpo,
        LossType::Dapo,
    ];

    /// TRL's name of the loss type.
    pub fn as_str(self) -> &'static str {
        match self {
            LossType::Grpo => "grpo",
            LossType::Bnpo => "bnpo",
            LossType::DrGrpo => "dr_grpo",
            LossType::Dapo => "dapo",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The KL penalty towards the reference policy, present only when β ≠ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlPenalty {
    /// β, the KL coefficient (TRL `beta`; DeepSeekMath used 0.04).
    pub beta: f64,
    /// TRL's `use_bias_correction_kl`: multiply k3 by the (differentiable) ratio `r`.
    pub use_bias_correction: bool,
}

/// The parameters of the per-token objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveParams {
    /// ε_low: the ratio is clipped below at `1 − epsilon_low` (TRL `epsilon`, default 0.2).
    pub epsilon_low: f64,
    /// ε_high: the ratio is clipped above at `1 + epsilon_high` (TRL `epsilon_high`, default
    /// `epsilon`; DAPO uses 0.28).
    pub epsilon_high: f64,
    /// The KL penalty; `None` when β = 0 (no reference log-probs are needed then).
    pub kl: Option<KlPenalty>,
}

impl ObjectiveParams {
    /// Builds the parameters from TRL's settings: `epsilon_high` defaults to `epsilon`, and
    /// `beta == 0` means no KL term at all.
    pub fn new(
        epsilon: f64,
        epsilon_high: Option<f64>,
        beta: f64,
        use_bias_correction_kl: bool,
    ) -> Self {
        ObjectiveParams {
            epsilon_low: epsilon,
            epsilon_high: epsilon_high.unwrap_or(epsilon),
            kl: (beta != 0.0).then_some(KlPenalty {
                beta,
                use_bias_correction: use_bias_correction_kl,
            }),
        }
    }
}

/// Everything the objective says about one (unmasked) token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenTerms {
    /// The importance ratio `r = exp(logp − old_logp)`.
    pub ratio: f64,
    /// The per-token loss `ℓ = pg + β · kl`.
    pub loss: f64,
    /// `dℓ / dlogp`, the derivative of the per-token loss with respect to the current log-prob.
    pub grad: f64,
    /// `r < 1 − ε_low` and `A < 0`: clipped below, in the direction that zeroes the gradient.
    pub low_clipped: bool,
    /// `r > 1 + ε_high` and `A > 0`: clipped above, in the direction that zeroes the gradient.
    pub high_clipped: bool,
    /// The KL term as used in the loss (k3, times `r` with the bias correction); `None` when β =
    /// 0 or no reference log-prob was given.
    pub kl: Option<f64>,
}

/// The objective at one token: `logp` the current log-prob, `old_logp` the sampling policy's
/// (pass `logp` itself when on-policy), `ref_logp` the reference policy's, `advantage` the
/// completion's advantage.
pub fn token_terms(
    logp: f64,
    old_logp: f64,
    ref_logp: Option<f64>,
    advantage: f64,
    params: &ObjectiveParams,
) -> TokenTerms {
    let ratio = (logp - old_logp).exp();
    let (low, high) = (1.0 - params.epsilon_low, 1.0 + params.epsilon_high);
    // A hand-written clamp: `f64::clamp` panics on NaN bounds, and a NaN ratio must propagate.
    let clipped = if ratio < low {
        low
    } else if ratio > high {
        high
    } else {
        ratio
    };
    let (unclipped_term, clipped_term) = (ratio * advantage, clipped * advantage);
    // torch.min propagates NaN from either side; `unclipped_term` is NaN whenever the ratio is.
    let pg = -(if clipped_term < unclipped_term {
        clipped_term
    } else {
        unclipped_term
    });
    let low_clipped = ratio < low && advantage < 0.0;
    let high_clipped = ratio > high && advantage > 0.0;
    let pg_grad = if low_clipped || high_clipped {
        0.0
    } else {
        -advantage * ratio
    };

    let (mut loss, mut grad, mut kl) = (pg, pg_grad, None);
    if let (Some(penalty), Some(ref_logp)) = (params.kl, ref_logp) {
        let delta = ref_logp - logp;
        let exp_delta = delta.exp();
        let k3 = exp_delta - delta - 1.0;
        let (term, term_grad) = if penalty.use_bias_correction {
            (k3 * ratio, ratio * (1.0 - exp_delta + k3))
        } else {
            (k3, 1.0 - exp_delta)
        };
        loss += penalty.beta * term;
        grad += penalty.beta * term_grad;
        kl = Some(term);
    }
    TokenTerms {
        ratio,
        loss,
        grad,
        low_clipped,
        high_clipped,
        kl,
    }
}

/// Where the sampling policy's log-probs come from: the current ones, detached, when each batch
/// is used once right after generating it; stored ones when it is reused.
#[derive(Debug, Clone, Copy)]
pub enum OldLogps<'a> {
    /// On-policy: `old_logp = logp.detach()`, so `r ≡ 1` but `dr/dlogp = 1`.
    Detached,
    /// Stored log-probs computed at generation time (needed when the data is reused after an
    /// optimiser step).
    Stored(&'a [Vec<f64>]),
}

/// The per-token inputs of a generation batch, one row per completion.
#[derive(Debug, Clone, Copy)]
pub struct LossInputs<'a> {
    /// Current policy log-probs `logp` (the variable of the gradient).
    pub cur_logps: &'a [Vec<f64>],
    /// Sampling policy log-probs.
    pub old_logps: OldLogps<'a>,
    /// Reference policy log-probs; required when β ≠ 0.
    pub ref_logps: Option<&'a [Vec<f64>]>,
    /// The completion mask (1 up to and including EOS; 0 after it and for masked truncated
    /// completions, see [`mask_truncated`]).
    pub completion_mask: &'a [Vec<f64>],
    /// One advantage per completion.
    pub advantages: &'a [f64],
}

/// The constants by which the summed per-token losses are divided (see the per-micro-batch
/// table in the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalisation {
    /// L, `max_completion_length` (the `dr_grpo` constant).
    pub max_completion_length: usize,
    /// GAS, `gradient_accumulation_steps`.
    pub gradient_accumulation_steps: usize,
    /// SPG, `steps_per_generation` (TRL's default: `gradient_accumulation_steps`).
    pub steps_per_generation: usize,
    /// P, the number of training processes.
    pub num_processes: usize,
    /// N, `num_items_in_batch`: the mask sum of the whole generation batch over all processes
    /// (see [`num_items_in_batch`]).
    pub num_items_in_batch: f64,
}

impl Normalisation {
    /// Checks that every count is at least 1 and N is finite and non-negative.
    pub fn validate(&self) -> Result<(), GrpoError> {
        let counts = [
            ("max_completion_length", self.max_completion_length),
            (
                "gradient_accumulation_steps",
                self.gradient_accumulation_steps,
            ),
            ("steps_per_generation", self.steps_per_generation),
            ("num_processes", self.num_processes),
        ];
        for (field, value) in counts {
            if value == 0 {
                return Err(GrpoError::InvalidConfig {
                    field,
                    reason: "must be at least 1, got 0".into(),
                });
            }
        }
        if !(self.num_items_in_batch.is_finite() && self.num_items_in_batch >= 0.0) {
            return Err(GrpoError::InvalidConfig {
                field: "num_items_in_batch",
                reason: format!("must be finite and >= 0, got {}", self.num_items_in_batch),
            });
        }
        Ok(())
    }

    /// The `dapo` divisor: `max(N, 1) / P · GAS / SPG`.
    pub fn dapo_normaliser(&self) -> f64 {
        self.num_items_in_batch.max(1.0) / self.num_processes as f64
            * self.gradient_accumulation_steps as f64
            / self.steps_per_generation as f64
    }

    /// The loss of one micro-batch, computed in TRL's order of operations. `per_token_loss` and
    /// `mask` hold the micro-batch's rows only; the loss is multiplied by the mask here (and
    /// masked positions are skipped, whatever they hold).
    pub fn micro_batch_loss(
        &self,
        loss_type: LossType,
        per_token_loss: &[Vec<f64>],
        mask: &[Vec<f64>],
    ) -> f64 {
        let gas = self.gradient_accumulation_steps as f64;
        let rows = mask.len() as f64;
        let row_sums = per_token_loss
            .iter()
            .zip(mask)
            .map(|(l, m)| masked_dot(l, m));
        match loss_type {
            LossType::Grpo => {
                let per_sequence: f64 = row_sums
                    .zip(mask)
                    .map(|(sum, m)| sum / m.iter().sum::<f64>().max(1.0))
                    .sum();
                per_sequence / rows / gas
            }
            LossType::Bnpo => row_sums.sum::<f64>() / mask_sum(mask).max(1.0) / gas,
            LossType::DrGrpo => {
                row_sums.sum::<f64>() / (rows * self.max_completion_length as f64) / gas
            }
            LossType::Dapo => row_sums.sum::<f64>() / self.dapo_normaliser(),
        }
    }

    /// The weight `w_it` of every token of one micro-batch (`mask` holds its rows only) in that
    /// micro-batch's loss: `loss = Σ_it w_it · ℓ_it`. The mask is included, so padding weighs
    /// exactly 0; the weights are constants (no gradient flows through them).
    ///
    /// | loss type | `w_it` |
    /// |---|---|
    /// | `grpo` | `M_it / max(1, Σ_t M_it) / B / GAS` |
    /// | `bnpo` | `M_it / max(1, Σ M) / GAS` |
    /// | `dr_grpo` | `M_it / (B · L) / GAS` |
    /// | `dapo` | `M_it / (max(N, 1) / P · GAS / SPG)` |
    pub fn token_weights(&self, loss_type: LossType, mask: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let gas = self.gradient_accumulation_steps as f64;
        let rows = mask.len() as f64;
        let total = mask_sum(mask).max(1.0);
        mask.iter()
            .map(|row| {
                let row_total = row.iter().sum::<f64>().max(1.0);
                row.iter()
                    .map(|&m| {
                        if m == 0.0 {
                            return 0.0;
                        }
                        match loss_type {
                            LossType::Grpo => m / row_total / rows / gas,
                            LossType::Bnpo => m / total / gas,
                            LossType::DrGrpo => {
                                m / (rows * self.max_completion_length as f64) / gas
                            }
                            LossType::Dapo => m / self.dapo_normaliser(),
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// N, `num_items_in_batch`: the number of active tokens (mask sum) of `mask`. Pass the mask of the
/// whole generation batch, after [`mask_truncated`]; with several processes, sum this over all of
/// them.
pub fn num_items_in_batch(mask: &[Vec<f64>]) -> f64 {
    mask_sum(mask)
}

/// The completion mask with the rows of truncated completions zeroed, as TRL does with
/// `mask_truncated_completions = true` (DAPO's overlong filtering). The completions keep their
/// rewards and their place in the group statistics; none of their tokens count in the loss, the
/// normalisers or the metrics.
pub fn mask_truncated(mask: &[Vec<f64>], truncated: &[bool]) -> Result<Vec<Vec<f64>>, GrpoError> {
    check_len("truncated", mask.len(), truncated.len())?;
    Ok(mask
        .iter()
        .zip(truncated)
        .map(|(row, &cut)| {
            if cut {
                vec![0.0; row.len()]
            } else {
                row.clone()
            }
        })
        .collect())
}

/// The loss, the micro-batch losses and the gradient for one loss type.
#[derive(Debug, Clone, PartialEq)]
pub struct LossTypeReport {
    /// The loss type.
    pub loss_type: LossType,
    /// The accumulated loss: the sum of the micro-batch losses.
    pub loss: f64,
    /// One loss per micro-batch, in the order given.
    pub micro_batch_losses: Vec<f64>,
    /// `d loss / d cur_logps`, accumulated over the micro-batches; exactly 0 at padding and in
    /// rows that no micro-batch covers.
    pub grad_wrt_cur_logps: Vec<Vec<f64>>,
}

/// The loss-side metrics under TRL's names, masked means over every token of the micro-batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossMetrics {
    /// `clip_ratio/low_mean`: share of tokens with `r < 1 − ε_low` and `A < 0`.
    pub clip_ratio_low_mean: f64,
    /// `clip_ratio/high_mean`: share of tokens with `r > 1 + ε_high` and `A > 0`.
    pub clip_ratio_high_mean: f64,
    /// `clip_ratio/region_mean`: share of tokens clipped either way.
    pub clip_ratio_region_mean: f64,
    /// `kl`: the mean KL term as used in the loss (bias correction included); `None` when β = 0.
    pub kl: Option<f64>,
}

impl LossMetrics {
    /// The metrics under TRL's names. With one process `clip_ratio/low_min` and
    /// `clip_ratio/high_max` (min/max over processes of each process's share) equal the means.
    /// A share over zero tokens is NaN, as in TRL.
    pub fn to_trl_names(&self) -> Vec<(&'static str, f64)> {
        let mut metrics = vec![
            ("clip_ratio/low_mean", self.clip_ratio_low_mean),
            ("clip_ratio/low_min", self.clip_ratio_low_mean),
            ("clip_ratio/high_mean", self.clip_ratio_high_mean),
            ("clip_ratio/high_max", self.clip_ratio_high_mean),
            ("clip_ratio/region_mean", self.clip_ratio_region_mean),
        ];
        if let Some(kl) = self.kl {
            metrics.push(("kl", kl));
        }
        metrics
    }
}

/// Everything [`evaluate`] computes for a generation batch.
#[derive(Debug, Clone, PartialEq)]
pub struct LossReport {
    /// The ratio `r` per token, times the mask.
    pub ratio: Vec<Vec<f64>>,
    /// The per-token loss `ℓ`, times the mask.
    pub per_token_loss: Vec<Vec<f64>>,
    /// `dℓ/dlogp` per token (before any normalisation), 0 at padding.
    pub per_token_grad: Vec<Vec<f64>>,
    /// One report per loss type, in [`LossType::ALL`] order; see [`LossReport::by_type`].
    pub loss_types: [LossTypeReport; 4],
    /// Clip and KL metrics.
    pub metrics: LossMetrics,
}

impl LossReport {
    /// The report of one loss type.
    pub fn by_type(&self, loss_type: LossType) -> &LossTypeReport {
        &self.loss_types[loss_type.index()]
    }
}

/// Evaluates the objective over a generation batch processed as `micro_batches` (row ranges, in
/// order; they must not overlap), for all four loss types at once.
///
/// Errors when the inputs' shapes disagree, when β ≠ 0 without reference log-probs, when a
/// micro-batch is empty, out of bounds or overlapping, or when `norm` is invalid.
pub fn evaluate(
    inputs: &LossInputs<'_>,
    params: &ObjectiveParams,
    norm: &Normalisation,
    micro_batches: &[Range<usize>],
) -> Result<LossReport, GrpoError> {
    norm.validate()?;
    let rows = inputs.check_shapes(params)?;
    let covered = check_micro_batches(micro_batches, rows)?;

    let shape: Vec<usize> = inputs.cur_logps.iter().map(Vec::len).collect();
    let zeros = || -> Vec<Vec<f64>> { shape.iter().map(|&n| vec![0.0; n]).collect() };
    let (mut ratio, mut loss, mut grad) = (zeros(), zeros(), zeros());
    let (mut low_sum, mut high_sum, mut region_sum, mut kl_sum, mut mask_total) =
        (0.0, 0.0, 0.0, 0.0, 0.0);
    for row in 0..rows {
        for t in 0..shape[row] {
            let m = inputs.completion_mask[row][t];
            if m == 0.0 {
                continue;
            }
            let logp = inputs.cur_logps[row][t];
            let old = match inputs.old_logps {
                OldLogps::Detached => logp,
                OldLogps::Stored(old) => old[row][t],
            };
            let reference = inputs.ref_logps.map(|r| r[row][t]);
            let terms = token_terms(logp, old, reference, inputs.advantages[row], params);
            ratio[row][t] = terms.ratio * m;
            loss[row][t] = terms.loss;
            grad[row][t] = terms.grad;
            if covered[row] {
                mask_total += m;
                low_sum += m * f64::from(u8::from(terms.low_clipped));
                high_sum += m * f64::from(u8::from(terms.high_clipped));
                region_sum += m * f64::from(u8::from(terms.low_clipped || terms.high_clipped));
                kl_sum += m * terms.kl.unwrap_or(0.0);
            }
        }
    }

    let loss_types = LossType::ALL.map(|loss_type| {
        let mut total = 0.0;
        let mut micro_batch_losses = Vec::with_capacity(micro_batches.len());
        let mut grad_wrt_cur_logps = zeros();
        for range in micro_batches {
            let mask = &inputs.completion_mask[range.clone()];
            let value = norm.micro_batch_loss(loss_type, &loss[range.clone()], mask);
            total += value;
            micro_batch_losses.push(value);
            let weights = norm.token_weights(loss_type, mask);
            for (row, weights) in range.clone().zip(weights) {
                for (t, w) in weights.into_iter().enumerate() {
                    if w != 0.0 {
                        grad_wrt_cur_logps[row][t] += w * grad[row][t];
                    }
                }
            }
        }
        LossTypeReport {
            loss_type,
            loss: total,
            micro_batch_losses,
            grad_wrt_cur_logps,
        }
    });

    let per_token_loss = loss
        .iter()
        .zip(inputs.completion_mask)
        .map(|(l, m)| {
            l.iter()
                .zip(m)
                .map(|(l, m)| if *m == 0.0 { 0.0 } else { l * m })
                .collect()
        })
        .collect();
    Ok(LossReport {
        ratio,
        per_token_loss,
        per_token_grad: grad,
        loss_types,
        metrics: LossMetrics {
            clip_ratio_low_mean: low_sum / mask_total,
            clip_ratio_high_mean: high_sum / mask_total,
            clip_ratio_region_mean: region_sum / mask_total,
            kl: params.kl.map(|_| kl_sum / mask_total),
        },
    })
}

impl LossInputs<'_> {
    /// Checks that all matrices have the same shape as `cur_logps` and that the reference
    /// log-probs are there when `params` has a KL term; returns the number of completions.
    pub fn check_shapes(&self, params: &ObjectiveParams) -> Result<usize, GrpoError> {
        let rows = self.cur_logps.len();
        check_len("advantages", rows, self.advantages.len())?;
        let mut matrices = vec![("completion_mask", self.completion_mask)];
        if let OldLogps::Stored(old) = self.old_logps {
            matrices.push(("old_logps", old));
        }
        match (self.ref_logps, params.kl) {
            (Some(reference), _) => matrices.push(("ref_logps", reference)),
            (None, Some(penalty)) => return Err(GrpoError::MissingRefLogps { beta: penalty.beta }),
            (None, None) => {}
        }
        for (name, matrix) in matrices {
            check_len(name, rows, matrix.len())?;
            for (row, (values, cur)) in matrix.iter().zip(self.cur_logps).enumerate() {
                check_len(&format!("{name} row {row}"), cur.len(), values.len())?;
            }
        }
        Ok(rows)
    }
}

/// Checks the micro-batch ranges and returns which rows they cover.
fn check_micro_batches(
    micro_batches: &[Range<usize>],
    rows: usize,
) -> Result<Vec<bool>, GrpoError> {
    let mut covered = vec![false; rows];
    if micro_batches.is_empty() {
        return Err(GrpoError::MicroBatch {
            start: 0,
            end: 0,
            rows,
            reason: "there must be at least one micro-batch",
        });
    }
    for range in micro_batches {
        let invalid = |reason| GrpoError::MicroBatch {
            start: range.start,
            end: range.end,
            rows,
            reason,
        };
        if range.start >= range.end {
            return Err(invalid("it is empty"));
        }
        if range.end > rows {
            return Err(invalid("it ends past the last completion"));
        }
        for seen in &mut covered[range.clone()] {
            if *seen {
                return Err(invalid("it overlaps an earlier micro-batch"));
            }
            *seen = true;
        }
    }
    Ok(covered)
}

fn check_len(what: &str, expected: usize, found: usize) -> Result<(), GrpoError> {
    if expected == found {
        Ok(())
    } else {
        Err(GrpoError::Shape {
            what: what.to_owned(),
            expected,
            found,
        })
    }
}

/// `Σ_t ℓ_t · M_t`, skipping masked positions.
fn masked_dot(loss: &[f64], mask: &[f64]) -> f64 {
    loss.iter()
        .zip(mask)
        .filter(|(_, m)| **m != 0.0)
        .map(|(l, m)| l * m)
        .sum()
}

fn mask_sum(mask: &[Vec<f64>]) -> f64 {
    mask.iter().map(|row| row.iter().sum::<f64>()).sum()
}

#[cfg(test)]
// Micro-batches are lists of row ranges; a list of one range is the common case, not a mistake.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    const CUR: [[f64; 3]; 3] = [
        [-0.4, -1.5, -0.3],
        [-0.95, -0.05, -2.0],
        [-1.2, -0.45, -1.0],
    ];
    const OLD: [[f64; 3]; 3] = [[-0.5, -1.2, -0.3], [-0.7, -0.1, -1.9], [-1.5, -0.4, -0.9]];
    const REF: [[f64; 3]; 3] = [
        [-0.45, -1.3, -0.35],
        [-0.8, -0.1, -2.2],
        [-1.4, -0.5, -0.95],
    ];

    fn matrix(rows: &[[f64; 3]]) -> Vec<Vec<f64>> {
        rows.iter().map(|r| r.to_vec()).collect()
    }

    fn norm(num_items_in_batch: f64, gas: usize) -> Normalisation {
        Normalisation {
            max_completion_length: 4,
            gradient_accumulation_steps: gas,
            steps_per_generation: gas,
            num_processes: 1,
            num_items_in_batch,
        }
    }

    fn all_losses(
        cur: &[Vec<f64>],
        old: &[Vec<f64>],
        reference: &[Vec<f64>],
        mask: &[Vec<f64>],
        advantages: &[f64],
        params: &ObjectiveParams,
        micro_batches: &[Range<usize>],
    ) -> LossReport {
        let inputs = LossInputs {
            cur_logps: cur,
            old_logps: OldLogps::Stored(old),
            ref_logps: Some(reference),
            completion_mask: mask,
            advantages,
        };
        evaluate(
            &inputs,
            params,
            &norm(num_items_in_batch(mask), micro_batches.len()),
            micro_batches,
        )
        .unwrap()
    }

    /// Central finite differences of every loss type against the analytic gradient, with and
    /// without the KL bias correction, over two micro-batches and a padded position.
    #[test]
    fn gradient_matches_finite_differences() {
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![
            vec![1.0, 1.0, 1.0],
            vec![1.0, 1.0, 0.0],
            vec![1.0, 1.0, 1.0],
        ];
        let advantages = [1.1, -0.4, 0.3];
        let micro_batches = [0..2, 2..3];
        for bias in [false, true] {
            let params = ObjectiveParams::new(0.2, Some(0.28), 0.04, bias);
            let report = all_losses(
                &cur,
                &old,
                &reference,
                &mask,
                &advantages,
                &params,
                &micro_batches,
            );
            for loss_type in LossType::ALL {
                let analytic = &report.by_type(loss_type).grad_wrt_cur_logps;
                for (row, t) in (0..3).flat_map(|row| (0..3).map(move |t| (row, t))) {
                    let h = 1e-6;
                    let at = |delta: f64| {
                        let mut shifted = cur.clone();
                        shifted[row][t] += delta;
                        all_losses(
                            &shifted,
                            &old,
                            &reference,
                            &mask,
                            &advantages,
                            &params,
                            &micro_batches,
                        )
                        .by_type(loss_type)
                        .loss
                    };
                    let numeric = (at(h) - at(-h)) / (2.0 * h);
                    let exact = analytic[row][t];
                    assert!(
                        (numeric - exact).abs() <= 1e-8,
                        "{loss_type:?} bias={bias} [{row}][{t}]: numeric {numeric} analytic {exact}"
                    );
                }
                assert_eq!(analytic[1][2], 0.0, "padding gets exactly 0");
            }
        }
    }

    #[test]
    fn token_weights_reproduce_the_micro_batch_loss() {
        let cur = matrix(&CUR);
        let mask = vec![
            vec![1.0, 1.0, 1.0],
            vec![1.0, 0.0, 0.0],
            vec![0.0, 0.0, 0.0],
        ];
        let n = Normalisation {
            steps_per_generation: 4,
            num_processes: 2,
            ..norm(9.0, 2)
        };
        for loss_type in LossType::ALL {
            let weights = n.token_weights(loss_type, &mask);
            let weighted: f64 = weights
                .iter()
                .zip(&cur)
                .flat_map(|(w, l)| w.iter().zip(l).map(|(w, l)| w * l))
                .sum();
            let direct = n.micro_batch_loss(loss_type, &cur, &mask);
            assert!(
                (weighted - direct).abs() <= 1e-15,
                "{loss_type:?}: {weighted} vs {direct}"
            );
            assert!(weights[2].iter().all(|w| *w == 0.0));
            assert_eq!(weights[1][1], 0.0);
        }
        // The constants themselves, per the module docs' table.
        assert_eq!(
            n.token_weights(LossType::Grpo, &mask)[0][0],
            1.0 / 3.0 / 3.0 / 2.0
        );
        assert_eq!(
            n.token_weights(LossType::Bnpo, &mask)[0][0],
            1.0 / 4.0 / 2.0
        );
        assert_eq!(
            n.token_weights(LossType::DrGrpo, &mask)[0][0],
            1.0 / 12.0 / 2.0
        );
        assert_eq!(
            n.token_weights(LossType::Dapo, &mask)[0][0],
            1.0 / (9.0 / 2.0 * 2.0 / 4.0)
        );
    }

    #[test]
    fn every_token_masked_gives_zero_loss_and_nan_shares() {
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![vec![0.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.04, true);
        let report = all_losses(
            &cur,
            &old,
            &reference,
            &mask,
            &[1.0, -1.0, 0.5],
            &params,
            &[0..3],
        );
        for loss_type in LossType::ALL {
            let by_type = report.by_type(loss_type);
            assert_eq!(by_type.loss, 0.0, "{loss_type:?}");
            assert!(
                by_type
                    .grad_wrt_cur_logps
                    .iter()
                    .flatten()
                    .all(|g| *g == 0.0)
            );
        }
        assert!(report.per_token_loss.iter().flatten().all(|l| *l == 0.0));
        assert!(report.metrics.clip_ratio_low_mean.is_nan());
        assert!(report.metrics.kl.unwrap().is_nan());
    }

    #[test]
    fn padding_may_hold_anything() {
        let cur = vec![vec![-0.5, f64::NEG_INFINITY]];
        let old = vec![vec![-0.4, f64::NAN]];
        let mask = vec![vec![1.0, 0.0]];
        let params = ObjectiveParams::new(0.2, None, 0.1, false);
        let report = all_losses(&cur, &old, &cur, &mask, &[1.0], &params, &[0..1]);
        for loss_type in LossType::ALL {
            assert!(report.by_type(loss_type).loss.is_finite());
            assert_eq!(report.by_type(loss_type).grad_wrt_cur_logps[0][1], 0.0);
        }
    }

    #[test]
    fn truncated_rows_are_masked_out_of_loss_and_counts() {
        let mask = vec![
            vec![1.0, 1.0, 1.0],
            vec![1.0, 1.0, 0.0],
            vec![1.0, 1.0, 1.0],
        ];
        let masked = mask_truncated(&mask, &[false, false, true]).unwrap();
        assert_eq!(masked[2], vec![0.0; 3]);
        assert_eq!(num_items_in_batch(&masked), 5.0);
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let params = ObjectiveParams::new(0.2, None, 0.04, false);
        let full = all_losses(
            &cur,
            &old,
            &reference,
            &masked,
            &[1.1, -0.4, 0.3],
            &params,
            &[0..3],
        );
        let kept = all_losses(
            &cur[..2],
            &old[..2],
            &reference[..2],
            &masked[..2],
            &[1.1, -0.4],
            &params,
            &[0..2],
        );
        // Only B (the row count) still sees the masked row: grpo and dr_grpo average over it.
        for loss_type in [LossType::Bnpo, LossType::Dapo] {
            assert_eq!(full.by_type(loss_type).loss, kept.by_type(loss_type).loss);
        }
        let grpo_ratio = full.by_type(LossType::Grpo).loss / kept.by_type(LossType::Grpo).loss;
        assert!((grpo_ratio - 2.0 / 3.0).abs() < 1e-15);
        assert!(
            full.by_type(LossType::Dapo).grad_wrt_cur_logps[2]
                .iter()
                .all(|g| *g == 0.0)
        );
        assert_eq!(full.metrics, kept.metrics);
        assert!(mask_truncated(&mask, &[true]).is_err());
    }

    #[test]
    fn asymmetric_clip_bounds() {
        let params = ObjectiveParams::new(0.2, Some(0.28), 0.0, false);
        // r = 1.25: inside [0.8, 1.28], so not clipped although above 1 + ε_low.
        let up = token_terms(1.25_f64.ln(), 0.0, None, 2.0, &params);
        assert!(!up.high_clipped);
        assert!((up.grad + 2.0 * 1.25).abs() < 1e-15);
        assert!((up.loss + 2.0 * 1.25).abs() < 1e-15);
        // r = 1.3 > 1.28 with A > 0: clipped, loss at 1.28 · A, no gradient.
        let above = token_terms(1.3_f64.ln(), 0.0, None, 2.0, &params);
        assert!(above.high_clipped && !above.low_clipped);
        assert_eq!(above.grad, 0.0);
        assert!((above.loss + 2.0 * 1.28).abs() < 1e-15);
        // The same ratio with A < 0 is not clipped: the unclipped term is the pessimistic one.
        let above_negative = token_terms(1.3_f64.ln(), 0.0, None, -2.0, &params);
        assert!(!above_negative.high_clipped);
        assert!((above_negative.grad - 2.0 * 1.3).abs() < 1e-15);
        // r = 0.75 < 0.8 with A < 0: clipped below.
        let below = token_terms(0.75_f64.ln(), 0.0, None, -1.0, &params);
        assert!(below.low_clipped);
        assert_eq!(below.grad, 0.0);
        assert!((below.loss - 0.8).abs() < 1e-15);
        // With symmetric bounds r = 1.25 is clipped.
        let symmetric = ObjectiveParams::new(0.2, None, 0.0, false);
        assert!(token_terms(1.25_f64.ln(), 0.0, None, 2.0, &symmetric).high_clipped);
    }

    #[test]
    fn clip_metrics_count_only_gradient_zeroing_tokens() {
        let cur = vec![
            vec![1.3_f64.ln(), 1.3_f64.ln()],
            vec![0.75_f64.ln(), 0.75_f64.ln()],
        ];
        let old = vec![vec![0.0; 2]; 2];
        let mask = vec![vec![1.0; 2]; 2];
        let params = ObjectiveParams::new(0.2, Some(0.28), 0.0, false);
        let inputs = LossInputs {
            cur_logps: &cur,
            old_logps: OldLogps::Stored(&old),
            ref_logps: None,
            completion_mask: &mask,
            advantages: &[1.0, -1.0],
        };
        let report = evaluate(&inputs, &params, &norm(4.0, 1), &[0..2]).unwrap();
        assert_eq!(report.metrics.clip_ratio_high_mean, 0.5);
        assert_eq!(report.metrics.clip_ratio_low_mean, 0.5);
        assert_eq!(report.metrics.clip_ratio_region_mean, 1.0);
        let flipped = LossInputs {
            advantages: &[-1.0, 1.0],
            ..inputs
        };
        let report = evaluate(&flipped, &params, &norm(4.0, 1), &[0..2]).unwrap();
        assert_eq!(report.metrics.clip_ratio_region_mean, 0.0);
    }

    #[test]
    fn beta_zero_has_no_kl_and_needs_no_reference() {
        let (cur, old) = (matrix(&CUR), matrix(&OLD));
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.0, true);
        assert!(params.kl.is_none());
        let inputs = LossInputs {
            cur_logps: &cur,
            old_logps: OldLogps::Stored(&old),
            ref_logps: None,
            completion_mask: &mask,
            advantages: &[1.0, 0.0, -1.0],
        };
        let report = evaluate(&inputs, &params, &norm(9.0, 1), &[0..3]).unwrap();
        assert!(report.metrics.kl.is_none());
        assert!(
            !report
                .metrics
                .to_trl_names()
                .iter()
                .any(|(name, _)| *name == "kl")
        );
        // A zero advantage and no KL: the row contributes nothing.
        assert!(report.per_token_loss[1].iter().all(|l| *l == 0.0));
        // β ≠ 0 without reference log-probs is an error.
        let with_kl = ObjectiveParams::new(0.2, None, 0.04, true);
        assert!(matches!(
            evaluate(&inputs, &with_kl, &norm(9.0, 1), &[0..3]),
            Err(GrpoError::MissingRefLogps { .. })
        ));
    }

    #[test]
    fn on_policy_ratio_is_one_with_reinforce_gradient() {
        let cur = matrix(&CUR);
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.0, false);
        let inputs = LossInputs {
            cur_logps: &cur,
            old_logps: OldLogps::Detached,
            ref_logps: None,
            completion_mask: &mask,
            advantages: &[1.0, -0.5, -0.5],
        };
        let report = evaluate(&inputs, &params, &norm(9.0, 1), &[0..3]).unwrap();
        assert!(report.ratio.iter().flatten().all(|r| *r == 1.0));
        // grpo on-policy = −mean(A) = 0, while the gradient is −A / (B · |o|).
        assert!(report.by_type(LossType::Grpo).loss.abs() < 1e-16);
        assert!(
            (report.by_type(LossType::Grpo).grad_wrt_cur_logps[0][0] + 1.0 / 9.0).abs() < 1e-16
        );
    }

    #[test]
    fn bad_micro_batches_and_shapes_are_errors() {
        let cur = matrix(&CUR);
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.0, false);
        let inputs = LossInputs {
            cur_logps: &cur,
            old_logps: OldLogps::Detached,
            ref_logps: None,
            completion_mask: &mask,
            advantages: &[1.0, -0.5, -0.5],
        };
        for ranges in [vec![0..2, 1..3], vec![0..4], vec![2..2], vec![]] {
            let result = evaluate(&inputs, &params, &norm(9.0, 1), &ranges);
            assert!(
                matches!(result, Err(GrpoError::MicroBatch { .. })),
                "{ranges:?}"
            );
        }
        let short = LossInputs {
            advantages: &[1.0],
            ..inputs
        };
        assert!(matches!(
            evaluate(&short, &params, &norm(9.0, 1), &[0..3]),
            Err(GrpoError::Shape { .. })
        ));
        let ragged_mask = vec![vec![1.0; 3], vec![1.0; 2], vec![1.0; 3]];
        let ragged = LossInputs {
            completion_mask: &ragged_mask,
            ..inputs
        };
        let err = evaluate(&ragged, &params, &norm(9.0, 1), &[0..3]).unwrap_err();
        assert!(err.to_string().contains("completion_mask row 1"), "{err}");
        let zero_gas = Normalisation {
            gradient_accumulation_steps: 0,
            ..norm(9.0, 1)
        };
        assert!(matches!(
            evaluate(&inputs, &params, &zero_gas, &[0..3]),
            Err(GrpoError::InvalidConfig {
                field: "gradient_accumulation_steps",
                ..
            })
        ));
    }
}
