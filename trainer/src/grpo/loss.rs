//! The GRPO objective of TRL 1.16.0's `GRPOTrainer` — its eight loss types, its options and its
//! loss-side metrics — as exact `f64` math over plain row-major matrices: one `Vec<f64>` per
//! completion, one entry per completion token position.
//!
//! # Per sequence and per token
//!
//! With `lr_t = logp_t − old_t` (`old = logp`, detached, when on-policy), `M` the completion mask
//! and `A` the completion's advantage:
//!
//! ```text
//! r        = exp(lr_t)                                   importance_sampling_level = "token"
//!          = exp(Σ_t lr_t M_t / max(1, Σ_t M_t))          "sequence" (GSPO): one ratio per sequence
//! policy term p, by loss_type:
//!   grpo, bnpo, dr_grpo, dapo, luspo   −min(c1 · A, clamp(r, 1 − ε_low, 1 + ε_high) · A)
//!                                      c1 = min(r, delta) with `delta` (two-sided clipping), else r
//!   cispo                              −sg(min(r, epsilon_high)) · A · logp_t
//!   sapo                               −sigmoid(τ (r − 1)) · 4/τ · A     τ = sapo_temperature_pos if A > 0, else _neg
//!   vespo                              −sg(φ) · A · logp_t                φ = exp(λ + k log w − λ w),
//!                                      log w = clamp(Σ_t clamp(lr_t, ±20) M_t, ln 1e-8, 20), (k, λ) by the sign of A
//! masks on p:   off_policy_mask_threshold: 0 for a sequence with A < 0 whose mean (old − logp) exceeds it;
//!               top_entropy_quantile: 0 for tokens below the micro-batch's entropy quantile
//! ℓ_t      = p · masks + β · k3_t · (r with use_bias_correction_kl)     k3 = exp(ref − logp) − (ref − logp) − 1
//! ```
//!
//! `sg` stops the gradient. With `epsilon_high` unset, cispo's cap is `epsilon` itself (0.2),
//! exactly as TRL; its documentation recommends 5.0.
//!
//! # Per micro-batch
//!
//! With `B` the micro-batch's number of completions, `L` = `max_completion_length`, `GAS` =
//! `gradient_accumulation_steps`, `SPG` = `steps_per_generation`, `P` the number of processes and
//! `N` = `num_items_in_batch` (mask sum of the whole generation batch over all processes):
//!
//! | loss type | micro-batch loss |
//! |---|---|
//! | `grpo`, `sapo` | `mean_i[Σ_t ℓM / max(1, Σ_t M)] / GAS` |
//! | `bnpo` | `Σ ℓM / max(1, Σ M) / GAS` |
//! | `dr_grpo` | `Σ ℓM / (B · L) / GAS` |
//! | `luspo` | `mean_i[Σ_t ℓM] / GAS` |
//! | `dapo`, `cispo`, `vespo` | `Σ ℓM / (max(N, 1) / P · GAS / SPG)` |
//!
//! With `entropy_coef` ≠ 0 the micro-batch loss loses `entropy_coef · Σ H M' / max(1, Σ M') /
//! GAS` (`M'` the mask times the entropy mask). The accumulated loss of an optimiser step is the
//! **sum** of its micro-batch losses, and so is the accumulated gradient.
//!
//! Every micro-batch loss is linear in the per-token losses: `loss = Σ_it w_it · ℓ_it`, with the
//! weights of [`Normalisation::token_weights`] (mask included, exactly 0 at padding, no
//! gradient). [`micro_batch_terms`] returns the loss and its exact gradient with respect to the
//! current log-probs; a tensor implementation multiplies the log-probs by that gradient and
//! backpropagates the sum (see [`crate::train::grpo_objective`]).
//!
//! # Metrics
//!
//! Per micro-batch, as TRL logs them: token means over the mask (a count below 1 counts as 1),
//! or, at sequence level, clip shares over the `B` sequences; `clip_ratio/low_min` and
//! `clip_ratio/high_max` are the minimum and maximum over sequences of each sequence's share
//! (NaN-skipping). A step's value is the NaN-skipping mean over its micro-batches. The partial
//! sums of one micro-batch ([`MetricSums`]) add up over ranks.
//!
//! Masked positions are skipped entirely (their ratio, loss and gradient are exactly 0), so
//! padding may hold any value, even a non-finite one.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::GrpoError;
use super::stats::nanmean;

/// TRL's `loss_type`: the policy term and how per-token losses are reduced (default `dapo`).
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
    /// CISPO (MiniMax-M1): REINFORCE weighted by the capped, detached ratio; dapo's normaliser.
    Cispo,
    /// SAPO: a sigmoid gate of the ratio instead of a hard clip; grpo's normaliser.
    Sapo,
    /// LUSPO: the clipped term summed over each sequence's tokens, sequences averaged.
    Luspo,
    /// VESPO: REINFORCE weighted by a gamma function of the sequence ratio; dapo's normaliser.
    Vespo,
}

impl LossType {
    /// Every loss type of TRL 1.16.0.
    pub const ALL: [LossType; 8] = [
        LossType::Grpo,
        LossType::Bnpo,
        LossType::DrGrpo,
        LossType::Dapo,
        LossType::Cispo,
        LossType::Sapo,
        LossType::Luspo,
        LossType::Vespo,
    ];

    /// The four normalisations of the clipped surrogate that a case without a `loss_type`
    /// evaluates at once.
    pub const CLASSIC: [LossType; 4] = [
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
            LossType::Cispo => "cispo",
            LossType::Sapo => "sapo",
            LossType::Luspo => "luspo",
            LossType::Vespo => "vespo",
        }
    }

    /// The loss type TRL calls `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether the policy term is PPO's clipped surrogate (and the `clip_ratio/*` metrics are
    /// logged).
    pub(crate) fn is_clipped(self) -> bool {
        matches!(
            self,
            LossType::Grpo | LossType::Bnpo | LossType::DrGrpo | LossType::Dapo | LossType::Luspo
        )
    }

    /// Whether TRL divides the micro-batch loss by GAS after taking `policy_loss` (the types
    /// whose normaliser does not already hold GAS).
    fn divides_by_gas(self) -> bool {
        matches!(
            self,
            LossType::Grpo | LossType::Bnpo | LossType::DrGrpo | LossType::Sapo | LossType::Luspo
        )
    }
}

/// Where importance ratios are taken (`importance_sampling_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportanceSamplingLevel {
    /// One ratio per token (default).
    #[default]
    Token,
    /// GSPO: one ratio per sequence, the exponential of the mean token log-ratio.
    Sequence,
}

/// The KL penalty towards the reference policy, present only when β ≠ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlPenalty {
    /// β, the KL coefficient (TRL `beta`; DeepSeekMath used 0.04).
    pub beta: f64,
    /// TRL's `use_bias_correction_kl`: multiply k3 by the (differentiable) ratio `r`.
    pub use_bias_correction: bool,
}

/// SAPO's temperatures (`sapo_temperature_pos`, `sapo_temperature_neg`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SapoTemperatures {
    /// τ for positive advantages. TRL default 1.0.
    pub positive: f64,
    /// τ for zero and negative advantages. TRL default 1.05.
    pub negative: f64,
}

impl Default for SapoTemperatures {
    fn default() -> Self {
        SapoTemperatures {
            positive: 1.0,
            negative: 1.05,
        }
    }
}

/// VESPO's gamma weighting (`vespo_k_pos`, `vespo_lambda_pos`, `vespo_k_neg`, `vespo_lambda_neg`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VespoParams {
    /// k for A ≥ 0. TRL default 2.0.
    pub k_pos: f64,
    /// λ for A ≥ 0. TRL default 3.0.
    pub lambda_pos: f64,
    /// k for A < 0. TRL default 3.0.
    pub k_neg: f64,
    /// λ for A < 0. TRL default 2.0.
    pub lambda_neg: f64,
}

impl Default for VespoParams {
    fn default() -> Self {
        VespoParams {
            k_pos: 2.0,
            lambda_pos: 3.0,
            k_neg: 3.0,
            lambda_neg: 2.0,
        }
    }
}

/// The parameters of the objective, under TRL's names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveParams {
    /// The policy term and its normaliser.
    pub loss_type: LossType,
    /// ε_low: the ratio is clipped below at `1 − epsilon_low` (TRL `epsilon`, default 0.2).
    pub epsilon_low: f64,
    /// ε_high: the ratio is clipped above at `1 + epsilon_high` (TRL `epsilon_high`, default
    /// `epsilon`; DAPO uses 0.28); cispo's cap on the ratio itself.
    pub epsilon_high: f64,
    /// Two-sided clipping: the unclipped ratio is capped at `delta` (clipped loss types only).
    pub delta: Option<f64>,
    /// Token- or sequence-level ratios.
    pub importance_sampling_level: ImportanceSamplingLevel,
    /// Drop sequences with A < 0 whose mean `old − logp` exceeds this.
    pub off_policy_mask_threshold: Option<f64>,
    /// Train the policy term only on tokens at or above this entropy quantile; 1.0 keeps all.
    pub top_entropy_quantile: f64,
    /// The entropy bonus coefficient; 0 is off.
    pub entropy_coef: f64,
    /// SAPO's temperatures.
    pub sapo: SapoTemperatures,
    /// VESPO's gamma weighting.
    pub vespo: VespoParams,
    /// The KL penalty; `None` when β = 0 (no reference log-probs are needed then).
    pub kl: Option<KlPenalty>,
}

impl ObjectiveParams {
    /// TRL's defaults with these clip bounds and KL settings: `epsilon_high` defaults to
    /// `epsilon`, and `beta == 0` means no KL term at all.
    pub fn new(
        epsilon: f64,
        epsilon_high: Option<f64>,
        beta: f64,
        use_bias_correction_kl: bool,
    ) -> Self {
        ObjectiveParams {
            loss_type: LossType::default(),
            epsilon_low: epsilon,
            epsilon_high: epsilon_high.unwrap_or(epsilon),
            delta: None,
            importance_sampling_level: ImportanceSamplingLevel::Token,
            off_policy_mask_threshold: None,
            top_entropy_quantile: 1.0,
            entropy_coef: 0.0,
            sapo: SapoTemperatures::default(),
            vespo: VespoParams::default(),
            kl: (beta != 0.0).then_some(KlPenalty {
                beta,
                use_bias_correction: use_bias_correction_kl,
            }),
        }
    }

    /// Whether the policy term is restricted to high-entropy tokens (`top_entropy_quantile` <
    /// 1), so that token entropies are needed.
    pub(crate) fn masks_entropy(&self) -> bool {
        self.top_entropy_quantile < 1.0
    }

    /// Whether token entropies are needed at all (entropy mask or entropy bonus).
    pub(crate) fn needs_entropies(&self) -> bool {
        self.masks_entropy() || self.entropy_coef != 0.0
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

/// The per-token inputs of a generation batch or micro-batch, one row per completion.
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
    /// The policy's token entropies; required by `top_entropy_quantile` < 1 and `entropy_coef`
    /// ≠ 0, and logged as `entropy` when given. They carry no gradient here.
    pub entropies: Option<&'a [Vec<f64>]>,
}

impl<'a> LossInputs<'a> {
    /// The same inputs restricted to the rows `rows`.
    pub fn rows(&self, rows: Range<usize>) -> LossInputs<'a> {
        LossInputs {
            cur_logps: &self.cur_logps[rows.clone()],
            old_logps: match self.old_logps {
                OldLogps::Detached => OldLogps::Detached,
                OldLogps::Stored(old) => OldLogps::Stored(&old[rows.clone()]),
            },
            ref_logps: self.ref_logps.map(|r| &r[rows.clone()]),
            completion_mask: &self.completion_mask[rows.clone()],
            advantages: &self.advantages[rows.clone()],
            entropies: self.entropies.map(|e| &e[rows]),
        }
    }

    /// Checks that all matrices have the same shape as `cur_logps` and that the reference
    /// log-probs and entropies are there when `params` needs them; returns the number of
    /// completions.
    pub(crate) fn check_shapes(&self, params: &ObjectiveParams) -> Result<usize, GrpoError> {
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
        match self.entropies {
            Some(entropies) => matrices.push(("entropies", entropies)),
            None if params.needs_entropies() => {
                return Err(GrpoError::Shape {
                    what: "entropies (needed by top_entropy_quantile < 1 or entropy_coef ≠ 0)"
                        .into(),
                    expected: rows,
                    found: 0,
                });
            }
            None => {}
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
    pub(crate) fn dapo_normaliser(&self) -> f64 {
        self.num_items_in_batch.max(1.0) / self.num_processes as f64
            * self.gradient_accumulation_steps as f64
            / self.steps_per_generation as f64
    }

    /// The weight `w_it` of every token of one micro-batch (`mask` holds its rows, over all
    /// ranks) in that micro-batch's loss: `loss = Σ_it w_it · ℓ_it`. The mask is included, so
    /// padding weighs exactly 0; the weights are constants (no gradient flows through them).
    ///
    /// | loss type | `w_it` |
    /// |---|---|
    /// | `grpo`, `sapo` | `M_it / max(1, Σ_t M_it) / B / GAS` |
    /// | `bnpo` | `M_it / max(1, Σ M) / GAS` |
    /// | `dr_grpo` | `M_it / (B · L) / GAS` |
    /// | `luspo` | `M_it / B / GAS` |
    /// | `dapo`, `cispo`, `vespo` | `M_it / (max(N, 1) / P · GAS / SPG)` |
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
                            LossType::Grpo | LossType::Sapo => m / row_total / rows / gas,
                            LossType::Bnpo => m / total / gas,
                            LossType::DrGrpo => {
                                m / (rows * self.max_completion_length as f64) / gas
                            }
                            LossType::Luspo => m / rows / gas,
                            LossType::Dapo | LossType::Cispo | LossType::Vespo => {
                                m / self.dapo_normaliser()
                            }
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

/// The entropy threshold of `top_entropy_quantile` ρ over one micro-batch's unmasked token
/// entropies (over all ranks): `torch.quantile(entropies.float(), 1 − ρ)` in `f32`, as TRL
/// computes it (linear interpolation, `torch.lerp`'s two-sided formula). Tokens whose entropy is
/// at or above it keep their policy term. With no entropies at all it is +∞: no token is kept.
pub fn entropy_threshold(masked_entropies: &[f32], top_entropy_quantile: f64) -> f32 {
    if masked_entropies.is_empty() {
        return f32::INFINITY;
    }
    let mut sorted = masked_entropies.to_vec();
    sorted.sort_by(f32::total_cmp);
    let q = (1.0 - top_entropy_quantile) as f32;
    let rank = q * (sorted.len() - 1) as f32;
    let below = rank as usize;
    let above = (rank.ceil() as usize).min(sorted.len() - 1);
    let weight = rank - below as f32;
    let (start, end) = (sorted[below], sorted[above]);
    let diff = end - start;
    if weight.abs() < 0.5 {
        start + weight * diff
    } else {
        end - diff * (1.0 - weight)
    }
}

/// The partial sums behind one micro-batch's loss-side metrics. Ranks holding parts of one
/// micro-batch [`combine`](Self::combine) theirs into the micro-batch's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricSums {
    /// Σ M: the denominator of token means.
    pub tokens: f64,
    /// B: the number of sequences.
    pub sequences: f64,
    /// The denominator of the clip shares: tokens, or sequences at sequence level.
    pub clip_count: f64,
    /// Clipped below (`c1 < 1 − ε_low`, A < 0).
    pub low_clipped: f64,
    /// Clipped above (`c1 > 1 + ε_high`, A > 0).
    pub high_clipped: f64,
    /// Clipped either way.
    pub region_clipped: f64,
    /// The least share of low-clipped tokens of a sequence (+∞: none had tokens).
    pub low_min: f64,
    /// The greatest share of high-clipped tokens of a sequence (−∞: none had tokens).
    pub high_max: f64,
    /// cispo: capped with A > 0.
    pub cispo_clipped: f64,
    /// Σ of the KL term as used in the loss.
    pub kl: f64,
    /// Σ of the token entropies.
    pub entropy: f64,
    /// Σ of VESPO's φ over sequences.
    pub phi: f64,
    /// The micro-batch's policy loss (before the entropy bonus and, where TRL does so, before
    /// dividing by GAS).
    pub policy_loss: f64,
}

impl Default for MetricSums {
    fn default() -> Self {
        MetricSums {
            tokens: 0.0,
            sequences: 0.0,
            clip_count: 0.0,
            low_clipped: 0.0,
            high_clipped: 0.0,
            region_clipped: 0.0,
            low_min: f64::INFINITY,
            high_max: f64::NEG_INFINITY,
            cispo_clipped: 0.0,
            kl: 0.0,
            entropy: 0.0,
            phi: 0.0,
            policy_loss: 0.0,
        }
    }
}

impl MetricSums {
    /// Adds another part of the same micro-batch.
    pub fn combine(&mut self, other: &MetricSums) {
        self.tokens += other.tokens;
        self.sequences += other.sequences;
        self.clip_count += other.clip_count;
        self.low_clipped += other.low_clipped;
        self.high_clipped += other.high_clipped;
        self.region_clipped += other.region_clipped;
        self.low_min = self.low_min.min(other.low_min);
        self.high_max = self.high_max.max(other.high_max);
        self.cispo_clipped += other.cispo_clipped;
        self.kl += other.kl;
        self.entropy += other.entropy;
        self.phi += other.phi;
        self.policy_loss += other.policy_loss;
    }

    /// The micro-batch's metrics under TRL's names: the `clip_ratio/*` family for the clipped
    /// loss types, `cispo_clip_ratio`, `vespo/phi_seq_mean`, `kl` when β ≠ 0, `entropy` when
    /// entropies were given, and `policy_loss` with `entropy_coef` when the bonus is on.
    pub fn metrics(
        &self,
        params: &ObjectiveParams,
        with_entropy: bool,
    ) -> Vec<(&'static str, f64)> {
        let mean = |sum: f64, count: f64| sum / count.max(1.0);
        let mut metrics = Vec::new();
        if params.kl.is_some() {
            metrics.push(("kl", mean(self.kl, self.tokens)));
        }
        if with_entropy {
            metrics.push(("entropy", mean(self.entropy, self.tokens)));
        }
        if params.entropy_coef != 0.0 {
            metrics.push(("policy_loss", self.policy_loss));
            metrics.push(("entropy_coef", params.entropy_coef));
        }
        let finite_or_nan = |x: f64| if x.is_finite() { x } else { f64::NAN };
        match params.loss_type {
            t if t.is_clipped() => metrics.extend([
                (
                    "clip_ratio/low_mean",
                    mean(self.low_clipped, self.clip_count),
                ),
                ("clip_ratio/low_min", finite_or_nan(self.low_min)),
                (
                    "clip_ratio/high_mean",
                    mean(self.high_clipped, self.clip_count),
                ),
                ("clip_ratio/high_max", finite_or_nan(self.high_max)),
                (
                    "clip_ratio/region_mean",
                    mean(self.region_clipped, self.clip_count),
                ),
            ]),
            LossType::Cispo => metrics.push((
                "cispo_clip_ratio",
                mean(self.cispo_clipped, self.clip_count),
            )),
            LossType::Vespo => metrics.push(("vespo/phi_seq_mean", mean(self.phi, self.sequences))),
            _ => {}
        }
        metrics
    }
}

/// What one micro-batch's terms need from the whole micro-batch and the step, beyond its rows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MicroBatchScope {
    /// GAS, which the entropy bonus is divided by.
    pub gradient_accumulation_steps: usize,
    /// The micro-batch's [`entropy_threshold`] over all ranks; `None` computes it from these
    /// rows.
    pub entropy_threshold: Option<f32>,
    /// `Σ M'`, the tokens the entropy bonus averages over, of the whole micro-batch over all
    /// ranks; `None` counts these rows'.
    pub entropy_tokens: Option<f64>,
}

/// Everything [`micro_batch_terms`] computes for one micro-batch (or one rank's rows of it).
#[derive(Debug, Clone, PartialEq)]
pub struct MicroBatchTerms {
    /// The micro-batch loss `Σ w ℓ` (minus the entropy bonus).
    pub loss: f64,
    /// `d loss / d cur_logps`; exactly 0 at padding.
    pub grad: Vec<Vec<f64>>,
    /// `d loss / d entropy` of each token: `−entropy_coef · M' / max(1, Σ M') / GAS` (all 0
    /// without the bonus).
    pub entropy_grad: Vec<Vec<f64>>,
    /// The ratio `r` per token (a sequence's ratio on each of its tokens), times the mask; before
    /// `delta`.
    pub ratio: Vec<Vec<f64>>,
    /// The per-token loss `ℓ` (masks applied), times the mask.
    pub per_token_loss: Vec<Vec<f64>>,
    /// The metric sums.
    pub sums: MetricSums,
    /// With `top_entropy_quantile` < 1: which tokens kept their policy term.
    pub entropy_mask: Option<Vec<Vec<bool>>>,
    /// With `off_policy_mask_threshold`: which sequences were kept.
    pub off_policy_mask: Option<Vec<bool>>,
    /// With `vespo`: each sequence's φ.
    pub phi_seq: Option<Vec<f64>>,
}

/// The policy term at one token: its value and its derivatives with respect to the ratio `r`
/// (through which the gradient flows for the clipped types and sapo) and directly with respect
/// to the token's log-prob (cispo and vespo, whose weight is detached).
fn policy_term(params: &ObjectiveParams, r: f64, a: f64, logp: f64, phi: f64) -> (f64, f64, f64) {
    match params.loss_type {
        LossType::Cispo => {
            // torch.clamp(max=·) propagates NaN; a hand-written cap does too.
            let capped = if r > params.epsilon_high {
                params.epsilon_high
            } else {
                r
            };
            (-capped * a * logp, 0.0, -capped * a)
        }
        LossType::Vespo => (-phi * a * logp, 0.0, -phi * a),
        LossType::Sapo => {
            let tau = if a > 0.0 {
                params.sapo.positive
            } else {
                params.sapo.negative
            };
            let s = 1.0 / (1.0 + (-(tau * (r - 1.0))).exp());
            (-(s * 4.0 / tau) * a, -a * 4.0 * s * (1.0 - s), 0.0)
        }
        _ => {
            let (low, high) = (1.0 - params.epsilon_low, 1.0 + params.epsilon_high);
            // Hand-written clamps: `f64::clamp` panics on NaN bounds, and a NaN ratio must
            // propagate. torch.clamp passes the gradient where low <= r <= high.
            let c2 = if r < low {
                low
            } else if r > high {
                high
            } else {
                r
            };
            let dc2 = f64::from(u8::from((low..=high).contains(&r)));
            let (c1, dc1) = match params.delta {
                Some(delta) if r > delta => (delta, 0.0),
                _ => (r, 1.0),
            };
            let (x1, x2) = (c1 * a, c2 * a);
            // torch.minimum: NaN from either side, and a tie splits the gradient in halves.
            let (value, d_dr) = if x1.is_nan() || x2.is_nan() {
                (f64::NAN, f64::NAN)
            } else if x1 < x2 {
                (x1, a * dc1)
            } else if x2 < x1 {
                (x2, a * dc2)
            } else {
                (x1, a * (dc1 + dc2) / 2.0)
            };
            (-value, -d_dr, 0.0)
        }
    }
}

/// VESPO's φ for one sequence from its masked token log-ratios.
fn vespo_phi(params: &VespoParams, log_ratios: impl Iterator<Item = f64>, a: f64) -> f64 {
    let lower = 1e-8_f64.ln();
    let seq: f64 = log_ratios.map(|lr| lr.clamp(-20.0, 20.0)).sum();
    let log_w = seq.clamp(lower, 20.0);
    let w = log_w.exp();
    let (k, lambda) = if a >= 0.0 {
        (params.k_pos, params.lambda_pos)
    } else {
        (params.k_neg, params.lambda_neg)
    };
    let lambda = lambda.max(1e-4);
    let phi = (lambda + k * log_w - lambda * w).exp();
    if phi.is_finite() { phi } else { 0.0 }
}

/// The loss, gradients and metric sums of one micro-batch (`inputs` holds its rows; with several
/// ranks, this rank's rows of it), with `weights` from [`Normalisation::token_weights`] over the
/// whole micro-batch and `scope` the rest of what the whole micro-batch decides.
pub fn micro_batch_terms(
    inputs: &LossInputs<'_>,
    weights: &[Vec<f64>],
    params: &ObjectiveParams,
    scope: &MicroBatchScope,
) -> Result<MicroBatchTerms, GrpoError> {
    let entropy_threshold = scope.entropy_threshold;
    let rows = inputs.check_shapes(params)?;
    check_len("weights", rows, weights.len())?;
    for (row, (w, cur)) in weights.iter().zip(inputs.cur_logps).enumerate() {
        check_len(&format!("weights row {row}"), cur.len(), w.len())?;
    }
    let mask = inputs.completion_mask;
    let active = |row: usize| (0..mask[row].len()).filter(move |&t| mask[row][t] != 0.0);
    let old_of = |row: usize, t: usize| match inputs.old_logps {
        OldLogps::Detached => inputs.cur_logps[row][t],
        OldLogps::Stored(old) => old[row][t],
    };

    let entropy_mask: Option<Vec<Vec<bool>>> = match (params.masks_entropy(), inputs.entropies) {
        (true, Some(entropies)) => {
            let threshold = entropy_threshold.unwrap_or_else(|| {
                let local: Vec<f32> = (0..rows)
                    .flat_map(|i| active(i).map(move |t| entropies[i][t] as f32))
                    .collect();
                self::entropy_threshold(&local, params.top_entropy_quantile)
            });
            Some(
                (0..rows)
                    .map(|i| {
                        (0..mask[i].len())
                            .map(|t| {
                                mask[i][t] != 0.0
                                    && entropies[i][t] * mask[i][t] >= f64::from(threshold)
                            })
                            .collect()
                    })
                    .collect(),
            )
        }
        _ => None,
    };

    let shape: Vec<usize> = inputs.cur_logps.iter().map(Vec::len).collect();
    let zeros = || -> Vec<Vec<f64>> { shape.iter().map(|&n| vec![0.0; n]).collect() };
    let (mut ratio, mut loss_tok, mut grad) = (zeros(), zeros(), zeros());
    let mut sums = MetricSums {
        sequences: rows as f64,
        ..MetricSums::default()
    };
    let mut off_policy_mask = params.off_policy_mask_threshold.map(|_| vec![true; rows]);
    let mut phi_seq = (params.loss_type == LossType::Vespo).then(|| vec![0.0; rows]);
    let sequence_level = params.importance_sampling_level == ImportanceSamplingLevel::Sequence;
    let (low_bound, high_bound) = (1.0 - params.epsilon_low, 1.0 + params.epsilon_high);
    let mut loss = 0.0;

    for i in 0..rows {
        let a = inputs.advantages[i];
        let cur = &inputs.cur_logps[i];
        let tokens: f64 = active(i).map(|t| mask[i][t]).sum();
        let denominator = tokens.max(1.0);
        let seq_ratio = (active(i)
            .map(|t| (cur[t] - old_of(i, t)) * mask[i][t])
            .sum::<f64>()
            / denominator)
            .exp();
        let keep = match params.off_policy_mask_threshold {
            Some(threshold) => {
                let kl: f64 = active(i)
                    .map(|t| {
                        let d = old_of(i, t) - cur[t];
                        if d.is_nan() { 0.0 } else { d * mask[i][t] }
                    })
                    .sum::<f64>()
                    / denominator;
                let keep = a >= 0.0 || kl <= threshold;
                if let Some(m) = off_policy_mask.as_mut() {
                    m[i] = keep;
                }
                keep
            }
            None => true,
        };
        let phi = match phi_seq.as_mut() {
            Some(phis) => {
                let phi = vespo_phi(
                    &params.vespo,
                    active(i).map(|t| (cur[t] - old_of(i, t)) * mask[i][t]),
                    a,
                );
                phis[i] = phi;
                sums.phi += phi;
                phi
            }
            None => 0.0,
        };

        // d loss / d r_i at sequence level, spread over the sequence's tokens below.
        let mut seq_grad = 0.0;
        let (mut low_tokens, mut high_tokens) = (0.0, 0.0);
        for t in active(i) {
            let m = mask[i][t];
            let r = if sequence_level {
                seq_ratio
            } else {
                (cur[t] - old_of(i, t)).exp()
            };
            let (p, dp_dr, dp_dlogp) = policy_term(params, r, a, cur[t], phi);
            let kept = keep && entropy_mask.as_ref().is_none_or(|em| em[i][t]);
            let u = f64::from(u8::from(kept));
            let w = weights[i][t];
            let mut l = p * u;
            let mut g = w * u * dp_dlogp;
            let mut g_ratio = w * u * dp_dr;
            if let (Some(penalty), Some(reference)) = (params.kl, inputs.ref_logps) {
                let delta = reference[i][t] - cur[t];
                let exp_delta = delta.exp();
                let k3 = exp_delta - delta - 1.0;
                let (kl, r_factor) = if penalty.use_bias_correction {
                    (k3 * r, r)
                } else {
                    (k3, 1.0)
                };
                l += penalty.beta * kl;
                g += penalty.beta * w * (1.0 - exp_delta) * r_factor;
                if penalty.use_bias_correction {
                    g_ratio += penalty.beta * w * k3;
                }
                sums.kl += m * kl;
            }
            if sequence_level {
                seq_grad += g_ratio;
            } else {
                g += g_ratio * r;
            }
            grad[i][t] = g;
            ratio[i][t] = r * m;
            loss_tok[i][t] = l * m;
            loss += w * l;
            sums.tokens += m;
            if let Some(entropies) = inputs.entropies {
                sums.entropy += entropies[i][t] * m;
            }
            if !sequence_level {
                let (low, high, capped) = clip_flags(params, r, a, low_bound, high_bound);
                low_tokens += m * low;
                high_tokens += m * high;
                sums.low_clipped += m * low;
                sums.high_clipped += m * high;
                sums.region_clipped += m * f64::from(u8::from(low + high > 0.0));
                sums.cispo_clipped += m * capped;
                sums.clip_count += m;
            }
        }
        if sequence_level {
            for t in active(i) {
                grad[i][t] += seq_grad * seq_ratio * mask[i][t] / denominator;
            }
            let (low, high, capped) = clip_flags(params, seq_ratio, a, low_bound, high_bound);
            sums.low_clipped += low;
            sums.high_clipped += high;
            sums.region_clipped += f64::from(u8::from(low + high > 0.0));
            sums.cispo_clipped += capped;
            sums.clip_count += 1.0;
            sums.low_min = sums.low_min.min(low);
            sums.high_max = sums.high_max.max(high);
        } else if tokens > 0.0 {
            sums.low_min = sums.low_min.min(low_tokens / tokens);
            sums.high_max = sums.high_max.max(high_tokens / tokens);
        }
    }

    let gas = scope.gradient_accumulation_steps.max(1) as f64;
    sums.policy_loss = if params.loss_type.divides_by_gas() {
        loss * gas
    } else {
        loss
    };
    let mut entropy_grad = zeros();
    if params.entropy_coef != 0.0 {
        let entropies = inputs.entropies.expect("checked by check_shapes");
        let kept = |i: usize, t: usize| entropy_mask.as_ref().is_none_or(|em| em[i][t]);
        let local: f64 = (0..rows)
            .flat_map(|i| {
                active(i)
                    .filter(move |&t| kept(i, t))
                    .map(move |t| mask[i][t])
            })
            .sum();
        let count = scope.entropy_tokens.unwrap_or(local).max(1.0);
        let mut sum = 0.0;
        for i in 0..rows {
            for t in active(i).filter(|&t| kept(i, t)) {
                sum += entropies[i][t] * mask[i][t];
                entropy_grad[i][t] = -params.entropy_coef * mask[i][t] / count / gas;
            }
        }
        loss -= params.entropy_coef * (sum / count / gas);
    }
    Ok(MicroBatchTerms {
        loss,
        grad,
        entropy_grad,
        ratio,
        per_token_loss: loss_tok,
        sums,
        entropy_mask,
        off_policy_mask,
        phi_seq,
    })
}

/// Whether a ratio counts as clipped below, above (the clipped loss types, after `delta`) and
/// capped (cispo), as 0/1.
fn clip_flags(params: &ObjectiveParams, r: f64, a: f64, low: f64, high: f64) -> (f64, f64, f64) {
    let as_f64 = |b: bool| f64::from(u8::from(b));
    if params.loss_type.is_clipped() {
        let c1 = match params.delta {
            Some(delta) if r > delta => delta,
            _ => r,
        };
        (
            as_f64(c1 < low && a < 0.0),
            as_f64(c1 > high && a > 0.0),
            0.0,
        )
    } else if params.loss_type == LossType::Cispo {
        (0.0, 0.0, as_f64(r > params.epsilon_high && a > 0.0))
    } else {
        (0.0, 0.0, 0.0)
    }
}

/// The loss of one loss type over a generation batch, with what TRL logs for it.
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
    /// The ratio per token, times the mask.
    pub ratio: Vec<Vec<f64>>,
    /// The per-token loss `ℓ`, times the mask.
    pub per_token_loss: Vec<Vec<f64>>,
    /// The loss-side metrics as TRL logs them for the step: each the NaN-skipping mean of its
    /// micro-batch values.
    pub metrics: BTreeMap<String, f64>,
    /// Each micro-batch's metrics.
    pub micro_batch_metrics: Vec<BTreeMap<String, f64>>,
    /// The entropy mask, rows in micro-batch order (with `top_entropy_quantile` < 1).
    pub entropy_mask: Option<Vec<Vec<bool>>>,
    /// The off-policy mask, rows in micro-batch order (with `off_policy_mask_threshold`).
    pub off_policy_mask: Option<Vec<bool>>,
    /// VESPO's φ per sequence, rows in micro-batch order.
    pub phi_seq: Option<Vec<f64>>,
}

/// Everything [`evaluate`] computes for a generation batch: one report per loss type asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct LossReport {
    /// One report per loss type, in the order asked for; see [`LossReport::by_type`].
    pub loss_types: Vec<LossTypeReport>,
}

impl LossReport {
    /// The report of one loss type, if it was evaluated.
    pub fn by_type(&self, loss_type: LossType) -> Option<&LossTypeReport> {
        self.loss_types.iter().find(|r| r.loss_type == loss_type)
    }
}

/// Evaluates the objective over a generation batch processed as `micro_batches` (row ranges, in
/// order; they must not overlap), once for each of `loss_types` (`params.loss_type` is
/// replaced by each).
///
/// Errors when the inputs' shapes disagree, when β ≠ 0 without reference log-probs, when
/// entropies are needed and missing, when a micro-batch is empty, out of bounds or overlapping,
/// or when `norm` is invalid.
pub fn evaluate(
    inputs: &LossInputs<'_>,
    params: &ObjectiveParams,
    norm: &Normalisation,
    micro_batches: &[Range<usize>],
    loss_types: &[LossType],
) -> Result<LossReport, GrpoError> {
    norm.validate()?;
    let rows = inputs.check_shapes(params)?;
    check_micro_batches(micro_batches, rows)?;
    let shape: Vec<usize> = inputs.cur_logps.iter().map(Vec::len).collect();
    let zeros = || -> Vec<Vec<f64>> { shape.iter().map(|&n| vec![0.0; n]).collect() };

    let mut reports = Vec::with_capacity(loss_types.len());
    for &loss_type in loss_types {
        let params = ObjectiveParams {
            loss_type,
            ..*params
        };
        let mut report = LossTypeReport {
            loss_type,
            loss: 0.0,
            micro_batch_losses: Vec::with_capacity(micro_batches.len()),
            grad_wrt_cur_logps: zeros(),
            ratio: zeros(),
            per_token_loss: zeros(),
            metrics: BTreeMap::new(),
            micro_batch_metrics: Vec::with_capacity(micro_batches.len()),
            entropy_mask: None,
            off_policy_mask: None,
            phi_seq: None,
        };
        for range in micro_batches {
            let part = inputs.rows(range.clone());
            let weights = norm.token_weights(loss_type, part.completion_mask);
            let scope = MicroBatchScope {
                gradient_accumulation_steps: norm.gradient_accumulation_steps,
                ..MicroBatchScope::default()
            };
            let terms = micro_batch_terms(&part, &weights, &params, &scope)?;
            report.loss += terms.loss;
            report.micro_batch_losses.push(terms.loss);
            for (k, row) in range.clone().enumerate() {
                report.grad_wrt_cur_logps[row].clone_from(&terms.grad[k]);
                report.ratio[row].clone_from(&terms.ratio[k]);
                report.per_token_loss[row].clone_from(&terms.per_token_loss[k]);
            }
            if let Some(mask) = terms.entropy_mask {
                report.entropy_mask.get_or_insert_default().extend(mask);
            }
            if let Some(mask) = terms.off_policy_mask {
                report.off_policy_mask.get_or_insert_default().extend(mask);
            }
            if let Some(phi) = terms.phi_seq {
                report.phi_seq.get_or_insert_default().extend(phi);
            }
            report.micro_batch_metrics.push(
                terms
                    .sums
                    .metrics(&params, inputs.entropies.is_some())
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect(),
            );
        }
        report.metrics = mean_metrics(&report.micro_batch_metrics);
        reports.push(report);
    }
    Ok(LossReport {
        loss_types: reports,
    })
}

/// TRL's logged value of each metric over several micro-batches: the mean of the values that are
/// not NaN (NaN when none is).
pub(crate) fn mean_metrics(micro_batches: &[BTreeMap<String, f64>]) -> BTreeMap<String, f64> {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for metrics in micro_batches {
        for (name, value) in metrics {
            values.entry(name.clone()).or_default().push(*value);
        }
    }
    values
        .into_iter()
        .map(|(name, v)| (name, nanmean(&v)))
        .collect()
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

    fn inputs<'a>(
        cur: &'a [Vec<f64>],
        old: &'a [Vec<f64>],
        reference: &'a [Vec<f64>],
        mask: &'a [Vec<f64>],
        advantages: &'a [f64],
    ) -> LossInputs<'a> {
        LossInputs {
            cur_logps: cur,
            old_logps: OldLogps::Stored(old),
            ref_logps: Some(reference),
            completion_mask: mask,
            advantages,
            entropies: None,
        }
    }

    fn run(
        inputs: &LossInputs<'_>,
        params: &ObjectiveParams,
        micro_batches: &[Range<usize>],
    ) -> LossTypeReport {
        let n = norm(
            num_items_in_batch(inputs.completion_mask),
            micro_batches.len(),
        );
        evaluate(inputs, params, &n, micro_batches, &[params.loss_type])
            .unwrap()
            .loss_types
            .remove(0)
    }

    /// Central finite differences against the analytic gradient for every loss type whose
    /// gradient is that of its value (cispo and vespo detach their weights), at token and
    /// sequence level, with and without `delta` and the KL bias correction, over two
    /// micro-batches and a padded position.
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
        let differentiable = [
            LossType::Grpo,
            LossType::Bnpo,
            LossType::DrGrpo,
            LossType::Dapo,
            LossType::Sapo,
            LossType::Luspo,
        ];
        for loss_type in differentiable {
            for level in [
                ImportanceSamplingLevel::Token,
                ImportanceSamplingLevel::Sequence,
            ] {
                for (bias, delta) in [(false, None), (true, None), (true, Some(1.1))] {
                    let params = ObjectiveParams {
                        loss_type,
                        importance_sampling_level: level,
                        delta,
                        ..ObjectiveParams::new(0.2, Some(0.28), 0.04, bias)
                    };
                    let at = |c: &[Vec<f64>]| {
                        run(
                            &inputs(c, &old, &reference, &mask, &advantages),
                            &params,
                            &micro_batches,
                        )
                    };
                    let analytic = at(&cur).grad_wrt_cur_logps;
                    for (row, t) in (0..3).flat_map(|row| (0..3).map(move |t| (row, t))) {
                        let h = 1e-6;
                        let shifted = |d: f64| {
                            let mut c = cur.clone();
                            c[row][t] += d;
                            at(&c).loss
                        };
                        let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
                        let exact = analytic[row][t];
                        assert!(
                            (numeric - exact).abs() <= 1e-8,
                            "{loss_type:?} {level:?} bias={bias} delta={delta:?} [{row}][{t}]: \
                             numeric {numeric} analytic {exact}"
                        );
                    }
                    assert_eq!(analytic[1][2], 0.0, "padding gets exactly 0");
                }
            }
        }
    }

    /// cispo and vespo: the weight is detached, so the gradient is the weight times −A times
    /// the token's normaliser, whatever the log-prob.
    #[test]
    fn detached_weights_give_reinforce_gradients() {
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![vec![1.0; 3]; 3];
        let advantages = [1.1, -0.4, 0.3];
        let cispo = ObjectiveParams {
            loss_type: LossType::Cispo,
            ..ObjectiveParams::new(0.2, Some(1.05), 0.0, true)
        };
        let report = run(
            &inputs(&cur, &old, &reference, &mask, &advantages),
            &cispo,
            &[0..3],
        );
        let w = 1.0 / 9.0;
        for row in 0..3 {
            for t in 0..3 {
                let r = (CUR[row][t] - OLD[row][t]).exp();
                let capped = r.min(1.05);
                let expected = -capped * advantages[row] * w;
                assert!((report.grad_wrt_cur_logps[row][t] - expected).abs() < 1e-15);
            }
        }
        // Row 0, token 1 has r = e^-0.3 < 1.05 and token 0 has r = e^0.1 > 1.05 with A > 0.
        assert_eq!(report.metrics["cispo_clip_ratio"], 2.0 / 9.0);

        let vespo = ObjectiveParams {
            loss_type: LossType::Vespo,
            ..ObjectiveParams::new(0.2, None, 0.0, true)
        };
        let report = run(
            &inputs(&cur, &old, &reference, &mask, &advantages),
            &vespo,
            &[0..3],
        );
        let phi = report.phi_seq.clone().unwrap();
        // Row 1: Σ log-ratios = −0.25 + 0.05 − 0.1 = −0.3, A < 0 → k = 3, λ = 2.
        let w1 = (-0.3_f64).exp();
        let expected = (2.0 + 3.0 * -0.3 - 2.0 * w1).exp();
        assert!(
            (phi[1] - expected).abs() < 1e-15,
            "{} vs {expected}",
            phi[1]
        );
        assert!(
            (report.grad_wrt_cur_logps[1][0] - phi[1] * 0.4 * w).abs() < 1e-15,
            "{:?}",
            report.grad_wrt_cur_logps
        );
        // On-policy, φ = exp(λ − λ) = 1.
        let on_policy = LossInputs {
            old_logps: OldLogps::Detached,
            ..inputs(&cur, &old, &reference, &mask, &advantages)
        };
        let report = run(&on_policy, &vespo, &[0..3]);
        assert_eq!(report.phi_seq.unwrap(), vec![1.0; 3]);
    }

    #[test]
    fn token_weights_of_every_loss_type() {
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
            assert!(weights[2].iter().all(|w| *w == 0.0));
            assert_eq!(weights[1][1], 0.0);
        }
        let first = |t| n.token_weights(t, &mask)[0][0];
        assert_eq!(first(LossType::Grpo), 1.0 / 3.0 / 3.0 / 2.0);
        assert_eq!(first(LossType::Sapo), first(LossType::Grpo));
        assert_eq!(first(LossType::Bnpo), 1.0 / 4.0 / 2.0);
        assert_eq!(first(LossType::DrGrpo), 1.0 / 12.0 / 2.0);
        assert_eq!(first(LossType::Luspo), 1.0 / 3.0 / 2.0);
        let dapo = 1.0 / (9.0 / 2.0 * 2.0 / 4.0);
        for t in [LossType::Dapo, LossType::Cispo, LossType::Vespo] {
            assert_eq!(first(t), dapo);
        }
    }

    #[test]
    fn every_token_masked_gives_zero_loss_and_zero_shares() {
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![vec![0.0; 3]; 3];
        for loss_type in LossType::ALL {
            let params = ObjectiveParams {
                loss_type,
                ..ObjectiveParams::new(0.2, None, 0.04, true)
            };
            let report = run(
                &inputs(&cur, &old, &reference, &mask, &[1.0, -1.0, 0.5]),
                &params,
                &[0..3],
            );
            assert_eq!(report.loss, 0.0, "{loss_type:?}");
            assert!(
                report
                    .grad_wrt_cur_logps
                    .iter()
                    .flatten()
                    .all(|g| *g == 0.0)
            );
            assert!(report.per_token_loss.iter().flatten().all(|l| *l == 0.0));
            // TRL divides by a count clamped to 1; a share of a sequence without tokens is NaN.
            assert_eq!(report.metrics["kl"], 0.0);
            if loss_type.is_clipped() {
                assert_eq!(report.metrics["clip_ratio/low_mean"], 0.0);
                assert!(report.metrics["clip_ratio/low_min"].is_nan());
            }
        }
    }

    #[test]
    fn padding_may_hold_anything() {
        let cur = vec![vec![-0.5, f64::NEG_INFINITY]];
        let old = vec![vec![-0.4, f64::NAN]];
        let mask = vec![vec![1.0, 0.0]];
        for loss_type in LossType::ALL {
            for level in [
                ImportanceSamplingLevel::Token,
                ImportanceSamplingLevel::Sequence,
            ] {
                let params = ObjectiveParams {
                    loss_type,
                    importance_sampling_level: level,
                    off_policy_mask_threshold: Some(0.1),
                    ..ObjectiveParams::new(0.2, None, 0.1, false)
                };
                let report = run(&inputs(&cur, &old, &cur, &mask, &[1.0]), &params, &[0..1]);
                assert!(report.loss.is_finite(), "{loss_type:?} {level:?}");
                assert_eq!(report.grad_wrt_cur_logps[0][1], 0.0);
            }
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
        let loss_of = |loss_type, rows: usize| {
            let params = ObjectiveParams {
                loss_type,
                ..ObjectiveParams::new(0.2, None, 0.04, false)
            };
            run(
                &inputs(
                    &cur[..rows],
                    &old[..rows],
                    &reference[..rows],
                    &masked[..rows],
                    &[1.1, -0.4, 0.3][..rows],
                ),
                &params,
                &[0..rows],
            )
        };
        // Only B (the row count) still sees the masked row: grpo and dr_grpo average over it.
        for loss_type in [LossType::Bnpo, LossType::Dapo] {
            assert_eq!(loss_of(loss_type, 3).loss, loss_of(loss_type, 2).loss);
            assert_eq!(loss_of(loss_type, 3).metrics, loss_of(loss_type, 2).metrics);
        }
        let grpo_ratio = loss_of(LossType::Grpo, 3).loss / loss_of(LossType::Grpo, 2).loss;
        assert!((grpo_ratio - 2.0 / 3.0).abs() < 1e-15);
        assert!(
            loss_of(LossType::Dapo, 3).grad_wrt_cur_logps[2]
                .iter()
                .all(|g| *g == 0.0)
        );
        assert!(mask_truncated(&mask, &[true]).is_err());
    }

    #[test]
    fn asymmetric_clip_bounds_and_delta() {
        let params = ObjectiveParams {
            loss_type: LossType::Grpo,
            ..ObjectiveParams::new(0.2, Some(0.28), 0.0, false)
        };
        let term = |r: f64, a: f64, p: &ObjectiveParams| policy_term(p, r, a, -1.0, 0.0);
        // r = 1.25: inside [0.8, 1.28], so not clipped although above 1 + ε_low.
        assert_eq!(term(1.25, 2.0, &params), (-2.5, -2.0, 0.0));
        // r = 1.3 > 1.28 with A > 0: clipped, loss at 1.28 · A, no gradient.
        let (value, d_dr, _) = term(1.3, 2.0, &params);
        assert!((value + 2.56).abs() < 1e-15);
        assert_eq!(d_dr, 0.0);
        // The same ratio with A < 0 is not clipped: the unclipped term is the pessimistic one.
        assert_eq!(term(1.3, -2.0, &params).1, 2.0);
        // r = 0.75 < 0.8 with A < 0: clipped below.
        let (value, d_dr, _) = term(0.75, -1.0, &params);
        assert!((value - 0.8).abs() < 1e-15);
        assert_eq!(d_dr, 0.0);
        // delta caps the ratio of A < 0 too: r = 3 with delta 2 costs 2 · |A| and no gradient.
        let two_sided = ObjectiveParams {
            delta: Some(2.0),
            ..params
        };
        assert_eq!(term(3.0, -1.0, &params), (3.0, 1.0, 0.0));
        assert_eq!(term(3.0, -1.0, &two_sided), (2.0, 0.0, 0.0));
        assert_eq!(clip_flags(&two_sided, 3.0, 1.0, 0.8, 1.28), (0.0, 1.0, 0.0));
        // With delta below 1 + ε_high, the capped ratio never counts as high-clipped.
        let low_delta = ObjectiveParams {
            delta: Some(1.1),
            ..params
        };
        assert_eq!(clip_flags(&low_delta, 3.0, 1.0, 0.8, 1.28), (0.0, 0.0, 0.0));
        // sapo: the gate's slope at r = 1 is 4 · ¼ = 1, the REINFORCE gradient.
        let sapo = ObjectiveParams {
            loss_type: LossType::Sapo,
            ..params
        };
        let (value, d_dr, _) = term(1.0, 0.5, &sapo);
        assert!((value + 1.0).abs() < 1e-15 && (d_dr + 0.5).abs() < 1e-15);
    }

    #[test]
    fn clip_metrics_count_only_gradient_zeroing_tokens_and_sequences() {
        let cur = vec![
            vec![1.3_f64.ln(), 1.3_f64.ln()],
            vec![0.75_f64.ln(), 1.0_f64.ln()],
        ];
        let old = vec![vec![0.0; 2]; 2];
        let mask = vec![vec![1.0; 2]; 2];
        let params = ObjectiveParams {
            loss_type: LossType::Dapo,
            ..ObjectiveParams::new(0.2, Some(0.28), 0.0, false)
        };
        let lossless = LossInputs {
            ref_logps: None,
            ..inputs(&cur, &old, &old, &mask, &[1.0, -1.0])
        };
        let report = run(&lossless, &params, &[0..2]);
        assert_eq!(report.metrics["clip_ratio/high_mean"], 0.5);
        assert_eq!(report.metrics["clip_ratio/low_mean"], 0.25);
        assert_eq!(report.metrics["clip_ratio/region_mean"], 0.75);
        // Per sequence: row 0 has all its tokens high-clipped, row 1 half of them low-clipped.
        assert_eq!(report.metrics["clip_ratio/high_max"], 1.0);
        assert_eq!(report.metrics["clip_ratio/low_min"], 0.0);
        // At sequence level each sequence counts once: row 1's ratio is √0.75 ≈ 0.87, inside.
        let sequence = ObjectiveParams {
            importance_sampling_level: ImportanceSamplingLevel::Sequence,
            ..params
        };
        let report = run(&lossless, &sequence, &[0..2]);
        assert_eq!(report.metrics["clip_ratio/high_mean"], 0.5);
        assert_eq!(report.metrics["clip_ratio/low_mean"], 0.0);
        let flipped = LossInputs {
            advantages: &[-1.0, 1.0],
            ..lossless
        };
        let report = run(&flipped, &params, &[0..2]);
        assert_eq!(report.metrics["clip_ratio/region_mean"], 0.0);
    }

    #[test]
    fn off_policy_mask_drops_only_negative_far_sequences() {
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![vec![1.0; 3]; 3];
        // Mean (old − cur): row 0 0.0667, row 1 0.1, row 2 −0.05.
        let params = ObjectiveParams {
            loss_type: LossType::Dapo,
            off_policy_mask_threshold: Some(0.08),
            ..ObjectiveParams::new(0.2, None, 0.0, true)
        };
        let advantages = [-1.0, -0.5, 1.5];
        let report = run(
            &inputs(&cur, &old, &reference, &mask, &advantages),
            &params,
            &[0..3],
        );
        assert_eq!(report.off_policy_mask, Some(vec![true, false, true]));
        assert!(report.grad_wrt_cur_logps[1].iter().all(|g| *g == 0.0));
        // Row 0 is kept: its first token (r = e^0.1, A < 0, unclipped) has a gradient.
        assert!(report.grad_wrt_cur_logps[0][0] != 0.0);
    }

    #[test]
    fn entropy_threshold_is_torch_quantile_in_f32() {
        let values = [3.0_f32, 0.0, 2.0, 1.0];
        // q = 0.8: rank 2.4 between 2 and 3.
        assert_eq!(entropy_threshold(&values, 0.2), 2.0 + 0.4_f32 * 1.0);
        assert_eq!(entropy_threshold(&values, 1.0), 0.0);
        assert_eq!(entropy_threshold(&values, 0.0), 3.0);
        assert_eq!(entropy_threshold(&[], 0.5), f32::INFINITY);
        // The policy term keeps the tokens at or above it; the KL term stays on every token.
        let (cur, old, reference) = (matrix(&CUR), matrix(&OLD), matrix(&REF));
        let mask = vec![vec![1.0; 3]; 3];
        let entropies = vec![
            vec![0.5, 2.0, 1.0],
            vec![3.0, 0.25, 1.5],
            vec![0.0, 2.5, 1.0],
        ];
        let params = ObjectiveParams {
            loss_type: LossType::Dapo,
            top_entropy_quantile: 0.5,
            ..ObjectiveParams::new(0.2, None, 0.0, true)
        };
        let report = run(
            &LossInputs {
                entropies: Some(&entropies),
                ..inputs(&cur, &old, &reference, &mask, &[1.0, -1.0, 0.5])
            },
            &params,
            &[0..3],
        );
        let kept = report.entropy_mask.unwrap();
        assert_eq!(
            kept,
            vec![
                vec![false, true, true],
                vec![true, false, true],
                vec![false, true, true]
            ]
        );
        assert_eq!(report.grad_wrt_cur_logps[0][0], 0.0);
        assert!((report.metrics["entropy"] - 11.75 / 9.0).abs() < 1e-15);
    }

    #[test]
    fn beta_zero_has_no_kl_and_needs_no_reference() {
        let (cur, old) = (matrix(&CUR), matrix(&OLD));
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.0, true);
        assert!(params.kl.is_none());
        let no_ref = LossInputs {
            ref_logps: None,
            ..inputs(&cur, &old, &old, &mask, &[1.0, 0.0, -1.0])
        };
        let report = run(&no_ref, &params, &[0..3]);
        assert!(!report.metrics.contains_key("kl"));
        // A zero advantage and no KL: the row contributes nothing.
        assert!(report.per_token_loss[1].iter().all(|l| *l == 0.0));
        // β ≠ 0 without reference log-probs is an error.
        let with_kl = ObjectiveParams::new(0.2, None, 0.04, true);
        assert!(matches!(
            evaluate(&no_ref, &with_kl, &norm(9.0, 1), &[0..3], &[LossType::Dapo]),
            Err(GrpoError::MissingRefLogps { .. })
        ));
        // An entropy mask without entropies is an error too.
        let masked = ObjectiveParams {
            top_entropy_quantile: 0.5,
            ..params
        };
        let err =
            evaluate(&no_ref, &masked, &norm(9.0, 1), &[0..3], &[LossType::Dapo]).unwrap_err();
        assert!(err.to_string().contains("entropies"), "{err}");
    }

    #[test]
    fn on_policy_ratio_is_one_with_reinforce_gradient() {
        let cur = matrix(&CUR);
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams {
            loss_type: LossType::Grpo,
            ..ObjectiveParams::new(0.2, None, 0.0, false)
        };
        let on_policy = LossInputs {
            old_logps: OldLogps::Detached,
            ref_logps: None,
            ..inputs(&cur, &cur, &cur, &mask, &[1.0, -0.5, -0.5])
        };
        for level in [
            ImportanceSamplingLevel::Token,
            ImportanceSamplingLevel::Sequence,
        ] {
            let params = ObjectiveParams {
                importance_sampling_level: level,
                ..params
            };
            let report = run(&on_policy, &params, &[0..3]);
            assert!(report.ratio.iter().flatten().all(|r| *r == 1.0));
            // grpo on-policy = −mean(A) = 0, while the gradient is −A / (B · |o|).
            assert!(report.loss.abs() < 1e-16);
            assert!((report.grad_wrt_cur_logps[0][0] + 1.0 / 9.0).abs() < 1e-16);
        }
    }

    #[test]
    fn bad_micro_batches_and_shapes_are_errors() {
        let cur = matrix(&CUR);
        let mask = vec![vec![1.0; 3]; 3];
        let params = ObjectiveParams::new(0.2, None, 0.0, false);
        let on_policy = LossInputs {
            old_logps: OldLogps::Detached,
            ref_logps: None,
            ..inputs(&cur, &cur, &cur, &mask, &[1.0, -0.5, -0.5])
        };
        let eval = |inputs: &LossInputs<'_>, n: &Normalisation, ranges: &[Range<usize>]| {
            evaluate(inputs, &params, n, ranges, &LossType::ALL)
        };
        for ranges in [vec![0..2, 1..3], vec![0..4], vec![2..2], vec![]] {
            let result = eval(&on_policy, &norm(9.0, 1), &ranges);
            assert!(
                matches!(result, Err(GrpoError::MicroBatch { .. })),
                "{ranges:?}"
            );
        }
        let short = LossInputs {
            advantages: &[1.0],
            ..on_policy
        };
        assert!(matches!(
            eval(&short, &norm(9.0, 1), &[0..3]),
            Err(GrpoError::Shape { .. })
        ));
        let ragged_mask = vec![vec![1.0; 3], vec![1.0; 2], vec![1.0; 3]];
        let ragged = LossInputs {
            completion_mask: &ragged_mask,
            ..on_policy
        };
        let err = eval(&ragged, &norm(9.0, 1), &[0..3]).unwrap_err();
        assert!(err.to_string().contains("completion_mask row 1"), "{err}");
        let zero_gas = Normalisation {
            gradient_accumulation_steps: 0,
            ..norm(9.0, 1)
        };
        assert!(matches!(
            eval(&on_policy, &zero_gas, &[0..3]),
            Err(GrpoError::InvalidConfig {
                field: "gradient_accumulation_steps",
                ..
            })
        ));
    }
}
