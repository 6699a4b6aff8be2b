//! Worked GRPO cases: their JSON layout (the types below) and its evaluation.
//!
//! A case file describes one generation batch (config, inputs, optionally the expected reward
//! side) and a list of cases, each a way of computing the loss over it (on- or off-policy, ε, β,
//! micro-batches) with optionally its expected results. Every `expected` section is optional, so
//! a file written only to be evaluated (`trainer loss --case FILE`) needs inputs and case
//! parameters only; [`CaseFile::evaluate`] ignores the expectations, which tests compare.
//!
//! Unknown keys are ignored, so that files may carry more than this layout.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::GrpoError;
use super::advantages::{Advantages, GroupStats, ScaleRewards, TRL_STD_EPS, batch_advantages};
use super::config::GrpoConfig;
use super::config::MultiObjectiveAggregation;
use super::loss::{
    self, ImportanceSamplingLevel, LossInputs, LossReport, LossType, Normalisation,
    ObjectiveParams, OldLogps, SapoTemperatures,
};
use super::metrics::{completion_metrics, reward_metrics};

/// A matrix: one row per completion, one column per token position.
pub type Matrix = Vec<Vec<f64>>;

/// One case file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseFile {
    /// The file's name.
    pub name: String,
    /// What the file exercises.
    #[serde(default)]
    pub description: String,
    /// The batch's shape and reward settings.
    pub config: CaseConfig,
    /// The per-completion and per-token inputs.
    pub inputs: CaseInputs,
    /// The expected reward side, if recorded.
    #[serde(default)]
    pub expected: Option<BatchExpected>,
    /// The loss computations to run over the batch.
    pub cases: Vec<Case>,
}

/// `config` of a case file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseConfig {
    /// Number of prompts (groups).
    pub num_prompts: usize,
    /// Completions per prompt, G.
    pub num_generations: usize,
    /// L, `max_completion_length`.
    pub max_completion_length: usize,
    /// One name per reward function (for the `rewards/<name>/*` metrics).
    pub reward_names: Vec<String>,
    /// One weight per reward function.
    pub reward_weights: Vec<f64>,
    /// Reward aggregation (default `sum_then_normalize`).
    #[serde(default)]
    pub multi_objective_aggregation: MultiObjectiveAggregation,
    /// The epsilon added to the std (default TRL's 1e-4).
    #[serde(default = "default_std_eps")]
    pub std_eps: f64,
    /// Zero the mask rows of truncated completions.
    #[serde(default)]
    pub mask_truncated_completions: bool,
    /// P, the number of processes (default 1).
    #[serde(default = "one")]
    pub num_processes: usize,
}

/// `inputs` of a case file. Completions are in group order: 0…G−1 belong to prompt 0, and so on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseInputs {
    /// Token count of each completion.
    pub completion_lengths: Vec<usize>,
    /// Whether each completion was truncated (ended neither with EOS nor padding).
    pub truncated: Vec<bool>,
    /// The completion mask (before `mask_truncated_completions` is applied; applying it twice is
    /// harmless).
    pub completion_mask: Matrix,
    /// Each reward function's reward per completion; `null` is None.
    pub rewards_per_func: Vec<Vec<Option<f64>>>,
    /// Sampling-policy log-probs (needed by cases with `old_logps_from = "old_logps"`).
    #[serde(default)]
    pub old_logps: Option<Matrix>,
    /// Current-policy log-probs.
    pub cur_logps: Matrix,
    /// Reference log-probs (needed by cases with β ≠ 0).
    #[serde(default)]
    pub ref_logps: Option<Matrix>,
    /// The policy's token entropies (needed by `top_entropy_quantile` < 1 and `entropy_coef`
    /// ≠ 0; logged as `entropy` when given).
    #[serde(default)]
    pub entropies: Option<Matrix>,
}

/// The expected reward side of a case file; every field optional. `null` stands for NaN.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchExpected {
    /// Aggregated reward per completion.
    pub rewards: Option<Vec<Option<f64>>>,
    /// The std of each completion's group.
    pub group_std: Option<Vec<Option<f64>>>,
    /// Advantages per `scale_rewards` mode name (`group`, `batch`, `none`).
    pub advantages: Option<BTreeMap<String, Vec<f64>>>,
    /// Advantages under TRL's boolean `scale_rewards` (`true`, `false`).
    pub advantages_scale_rewards_bool: Option<BTreeMap<String, Vec<f64>>>,
    /// The completion mask after `mask_truncated_completions`.
    pub completion_mask_after_masking: Option<Matrix>,
    /// N, the active-token count of the batch.
    pub num_items_in_batch: Option<f64>,
    /// Reward and completion metrics by TRL name.
    pub metrics: Option<BTreeMap<String, Option<f64>>>,
}

/// Where a case takes its sampling-policy log-probs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OldLogpsFrom {
    /// On-policy: the current log-probs, detached.
    CurLogps,
    /// The stored `inputs.old_logps`.
    OldLogps,
}

/// One loss computation over the batch. The objective's keys are TRL's `GRPOConfig` names, with
/// TRL's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The case's name (unique within the file; the key of `trainer loss` output).
    pub name: String,
    /// On- or off-policy.
    pub old_logps_from: OldLogpsFrom,
    /// The loss type; unset evaluates `grpo`, `bnpo`, `dr_grpo` and `dapo` at once.
    #[serde(default)]
    pub loss_type: Option<LossType>,
    /// Which advantages to use (default `group`).
    #[serde(default)]
    pub scale_rewards: ScaleRewards,
    /// ε_low (default 0.2).
    #[serde(default = "default_epsilon")]
    pub epsilon: f64,
    /// ε_high (default: `epsilon`).
    #[serde(default)]
    pub epsilon_high: Option<f64>,
    /// β (default 0).
    #[serde(default)]
    pub beta: f64,
    /// KL bias correction (default true, TRL 1.16).
    #[serde(default = "yes")]
    pub use_bias_correction_kl: bool,
    /// Two-sided clipping (default unset).
    #[serde(default)]
    pub delta: Option<f64>,
    /// Token- or sequence-level ratios (default `token`).
    #[serde(default)]
    pub importance_sampling_level: ImportanceSamplingLevel,
    /// The off-policy sequence mask's threshold (default unset).
    #[serde(default)]
    pub off_policy_mask_threshold: Option<f64>,
    /// The entropy quantile of the entropy mask (default 1.0, off).
    #[serde(default = "one_f64")]
    pub top_entropy_quantile: f64,
    /// The entropy bonus (default 0).
    #[serde(default)]
    pub entropy_coef: f64,
    /// SAPO's temperature for A > 0 (default 1.0).
    #[serde(default = "one_f64")]
    pub sapo_temperature_pos: f64,
    /// SAPO's temperature otherwise (default 1.05).
    #[serde(default = "sapo_negative")]
    pub sapo_temperature_neg: f64,
    /// VESPO's k for A ≥ 0 (default 2.0).
    #[serde(default = "two")]
    pub vespo_k_pos: f64,
    /// VESPO's λ for A ≥ 0 (default 3.0).
    #[serde(default = "three")]
    pub vespo_lambda_pos: f64,
    /// VESPO's k for A < 0 (default 3.0).
    #[serde(default = "three")]
    pub vespo_k_neg: f64,
    /// VESPO's λ for A < 0 (default 2.0).
    #[serde(default = "two")]
    pub vespo_lambda_neg: f64,
    /// GAS (default 1).
    #[serde(default = "one")]
    pub gradient_accumulation_steps: usize,
    /// SPG (default: GAS).
    #[serde(default)]
    pub steps_per_generation: Option<usize>,
    /// `[start, end)` row ranges, processed in order (default: one micro-batch of every row).
    #[serde(default)]
    pub micro_batches: Option<Vec<[usize; 2]>>,
    /// The expected results, if recorded.
    #[serde(default)]
    pub expected: Option<CaseExpected>,
}

/// The expected results of one case; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CaseExpected {
    /// Ratio per token, times the mask.
    pub ratio: Option<Matrix>,
    /// Per-token loss, times the mask.
    pub per_token_loss: Option<Matrix>,
    /// Accumulated loss per loss type name.
    pub loss: Option<BTreeMap<String, f64>>,
    /// Micro-batch losses per loss type name.
    pub micro_batch_losses: Option<BTreeMap<String, Vec<f64>>>,
    /// Accumulated gradient with respect to `cur_logps`, per loss type name.
    pub grad_wrt_cur_logps: Option<BTreeMap<String, Matrix>>,
    /// Loss-side metrics by TRL name, as logged for the step (the mean over micro-batches).
    pub metrics: Option<BTreeMap<String, Option<f64>>>,
    /// Each micro-batch's loss-side metrics.
    pub micro_batch_metrics: Option<Vec<BTreeMap<String, Option<f64>>>>,
    /// Reward-side metrics that differ from the file's under this case's `scale_rewards`.
    pub generation_metrics: Option<BTreeMap<String, Option<f64>>>,
    /// The entropy mask (1 = kept), rows in micro-batch order.
    pub entropy_mask: Option<Matrix>,
    /// The off-policy mask per sequence (1 = kept), in micro-batch order.
    pub off_policy_mask: Option<Vec<f64>>,
    /// VESPO's φ per sequence, in micro-batch order.
    pub phi_seq: Option<Vec<f64>>,
}

/// The computed reward side of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchEvaluation {
    /// Group statistics, including the aggregated rewards (NaN = no reward).
    pub stats: GroupStats,
    /// Advantages per mode, in [`ScaleRewards::ALL`] order; see [`BatchEvaluation::advantages`].
    pub advantages_by_mode: [Advantages; 3],
    /// The completion mask after `mask_truncated_completions`.
    pub completion_mask: Matrix,
    /// N, the active-token count of the batch.
    pub num_items_in_batch: f64,
    /// Reward and completion metrics by TRL name, under `scale_rewards = "group"`.
    pub metrics: BTreeMap<String, f64>,
}

impl BatchEvaluation {
    /// The advantages under one `scale_rewards` mode.
    pub fn advantages(&self, scale: ScaleRewards) -> &[f64] {
        &self.by_mode(scale).values
    }

    /// `frac_reward_zero_std` under one `scale_rewards` mode.
    pub fn frac_reward_zero_std(&self, scale: ScaleRewards) -> f64 {
        self.by_mode(scale).frac_reward_zero_std
    }

    fn by_mode(&self, scale: ScaleRewards) -> &Advantages {
        let index = ScaleRewards::ALL
            .iter()
            .position(|s| *s == scale)
            .unwrap_or(0);
        &self.advantages_by_mode[index]
    }
}

/// The computed results of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseEvaluation {
    /// The case's name.
    pub name: String,
    /// Losses, gradients and metrics.
    pub report: LossReport,
}

/// Everything computed from a case file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEvaluation {
    /// The reward side.
    pub batch: BatchEvaluation,
    /// One evaluation per case, in file order.
    pub cases: Vec<CaseEvaluation>,
}

impl CaseFile {
    /// Reads and parses a case file.
    pub fn load(path: &Path) -> Result<Self, GrpoError> {
        let text = std::fs::read_to_string(path).map_err(|source| GrpoError::ReadCase {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| GrpoError::ParseCase {
            path: path.to_owned(),
            source,
        })
    }

    /// Computes the reward side and every case from the inputs (the `expected` sections are not
    /// read).
    pub fn evaluate(&self) -> Result<FileEvaluation, GrpoError> {
        let batch = self.evaluate_batch()?;
        let mut seen = std::collections::BTreeSet::new();
        let cases = self
            .cases
            .iter()
            .map(|case| {
                if !seen.insert(case.name.as_str()) {
                    return Err(GrpoError::DuplicateCase {
                        name: case.name.clone(),
                    });
                }
                Ok(CaseEvaluation {
                    name: case.name.clone(),
                    report: self.evaluate_case(case, &batch)?,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(FileEvaluation { batch, cases })
    }

    fn evaluate_batch(&self) -> Result<BatchEvaluation, GrpoError> {
        let (config, inputs) = (&self.config, &self.inputs);
        let rows = config.num_prompts * config.num_generations;
        check_len("completion_lengths", rows, inputs.completion_lengths.len())?;
        check_len("completion_mask", rows, inputs.completion_mask.len())?;
        check_len("rewards_per_func", rows, inputs.rewards_per_func.len())?;
        check_len(
            "reward_names",
            config.reward_weights.len(),
            config.reward_names.len(),
        )?;
        let by_mode = |mode| {
            batch_advantages(
                &inputs.rewards_per_func,
                &config.reward_weights,
                config.num_generations,
                mode,
                config.multi_objective_aggregation,
                config.std_eps,
            )
        };
        let (stats, group) = by_mode(ScaleRewards::Group)?;
        let advantages_by_mode = [
            group,
            by_mode(ScaleRewards::Batch)?.1,
            by_mode(ScaleRewards::None)?.1,
        ];
        let completion_mask = if config.mask_truncated_completions {
            loss::mask_truncated(&inputs.completion_mask, &inputs.truncated)?
        } else {
            inputs.completion_mask.clone()
        };
        let mut metrics = reward_metrics(
            &stats,
            &advantages_by_mode[0],
            &inputs.rewards_per_func,
            &config.reward_names,
        );
        metrics.extend(completion_metrics(
            &inputs.completion_lengths,
            &inputs.truncated,
        )?);
        Ok(BatchEvaluation {
            num_items_in_batch: loss::num_items_in_batch(&completion_mask),
            stats,
            advantages_by_mode,
            completion_mask,
            metrics,
        })
    }

    /// Evaluates one case over a batch's reward side (normally [`Self::evaluate`]'s; a test
    /// may pass one with other advantages to check the loss side alone).
    pub fn evaluate_case(
        &self,
        case: &Case,
        batch: &BatchEvaluation,
    ) -> Result<LossReport, GrpoError> {
        let rows = batch.completion_mask.len();
        let old_logps = match case.old_logps_from {
            OldLogpsFrom::CurLogps => OldLogps::Detached,
            OldLogpsFrom::OldLogps => {
                OldLogps::Stored(self.inputs.old_logps.as_deref().ok_or_else(|| {
                    GrpoError::Shape {
                        what: format!("inputs.old_logps (needed by case `{}`)", case.name),
                        expected: rows,
                        found: 0,
                    }
                })?)
            }
        };
        let params = case.objective_params();
        let inputs = LossInputs {
            cur_logps: &self.inputs.cur_logps,
            old_logps,
            // Reference log-probs are only looked at when β ≠ 0, as TRL only computes them then.
            ref_logps: params.kl.and(self.inputs.ref_logps.as_deref()),
            completion_mask: &batch.completion_mask,
            advantages: batch.advantages(case.scale_rewards),
            entropies: self.inputs.entropies.as_deref(),
        };
        let norm = Normalisation {
            max_completion_length: self.config.max_completion_length,
            gradient_accumulation_steps: case.gradient_accumulation_steps,
            steps_per_generation: case
                .steps_per_generation
                .unwrap_or(case.gradient_accumulation_steps),
            num_processes: self.config.num_processes,
            num_items_in_batch: batch.num_items_in_batch,
        };
        let micro_batches: Vec<Range<usize>> = match &case.micro_batches {
            Some(ranges) => ranges.iter().map(|[start, end]| *start..*end).collect(),
            None => std::iter::once(0..rows).collect(),
        };
        let loss_types = match case.loss_type {
            Some(loss_type) => vec![loss_type],
            None => LossType::CLASSIC.to_vec(),
        };
        loss::evaluate(&inputs, &params, &norm, &micro_batches, &loss_types)
    }
}

impl Case {
    /// The objective's parameters the case spells: its keys read as a `GRPOConfig`'s, through
    /// [`GrpoConfig::objective_params`].
    pub fn objective_params(&self) -> ObjectiveParams {
        GrpoConfig {
            loss_type: self.loss_type.unwrap_or_default(),
            epsilon: self.epsilon,
            epsilon_high: self.epsilon_high,
            beta: self.beta,
            use_bias_correction_kl: self.use_bias_correction_kl,
            delta: self.delta,
            importance_sampling_level: self.importance_sampling_level,
            off_policy_mask_threshold: self.off_policy_mask_threshold,
            top_entropy_quantile: self.top_entropy_quantile,
            entropy_coef: self.entropy_coef,
            sapo_temperature_pos: self.sapo_temperature_pos,
            sapo_temperature_neg: self.sapo_temperature_neg,
            vespo_k_pos: self.vespo_k_pos,
            vespo_lambda_pos: self.vespo_lambda_pos,
            vespo_k_neg: self.vespo_k_neg,
            vespo_lambda_neg: self.vespo_lambda_neg,
            ..GrpoConfig::default()
        }
        .objective_params()
    }
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

fn default_std_eps() -> f64 {
    TRL_STD_EPS
}

fn default_epsilon() -> f64 {
    0.2
}

fn one() -> usize {
    1
}

fn one_f64() -> f64 {
    1.0
}

fn two() -> f64 {
    2.0
}

fn three() -> f64 {
    3.0
}

fn sapo_negative() -> f64 {
    SapoTemperatures::default().negative
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpo::LossType;

    /// 2 prompts × 2 completions: completion 0 got no reward at all (every function None) and
    /// completion 3 is truncated and masked out.
    fn file(mask_truncated_completions: bool) -> CaseFile {
        serde_json::from_value(serde_json::json!({
            "name": "edge",
            "config": {
                "num_prompts": 2, "num_generations": 2, "max_completion_length": 2,
                "reward_names": ["a", "b"], "reward_weights": [1.0, 2.0],
                "mask_truncated_completions": mask_truncated_completions
            },
            "inputs": {
                "completion_lengths": [2, 2, 1, 2],
                "truncated": [false, false, false, true],
                "completion_mask": [[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]],
                "rewards_per_func": [[null, null], [1.0, null], [0.0, 0.0], [1.0, 0.5]],
                "cur_logps": [[-0.5, -1.0], [-0.2, -0.3], [-0.7, 0.0], [-0.1, -0.4]],
                "ref_logps": [[-0.6, -0.9], [-0.2, -0.4], [-0.5, 0.0], [-0.3, -0.4]]
            },
            "cases": [
                {"name": "kl", "old_logps_from": "cur_logps", "beta": 0.1},
                {"name": "no_kl", "old_logps_from": "cur_logps", "beta": 0.0}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn all_none_completion_has_zero_advantage_but_keeps_its_tokens() {
        let evaluation = file(true).evaluate().unwrap();
        let batch = &evaluation.batch;
        assert!(batch.stats.rewards[0].is_nan());
        // Group 0 has one reward left: its std is NaN, so both advantages are 0 in every mode.
        assert!(batch.stats.group_std[0].is_nan());
        for scale in ScaleRewards::ALL {
            assert_eq!(&batch.advantages(scale)[..2], &[0.0, 0.0]);
        }
        // nanmean of [NaN, 1.0, 0.0, 2.0].
        assert_eq!(batch.metrics["reward"], 1.0);
        let kl = &evaluation.cases[0].report;
        // Completion 0's tokens still carry the KL term and still count in N.
        assert!(kl.loss_types[0].per_token_loss[0].iter().all(|l| *l > 0.0));
        assert!(
            kl.by_type(LossType::Dapo).unwrap().grad_wrt_cur_logps[0]
                .iter()
                .all(|g| *g != 0.0)
        );
        let no_kl = &evaluation.cases[1].report.loss_types[0];
        assert!(no_kl.per_token_loss[0].iter().all(|l| *l == 0.0));
        assert!(kl.loss_types[0].metrics.contains_key("kl"));
        assert!(!no_kl.metrics.contains_key("kl"));
    }

    #[test]
    fn truncated_completion_keeps_its_reward_but_loses_its_tokens() {
        let masked = file(true).evaluate().unwrap();
        let kept = file(false).evaluate().unwrap();
        // The truncated completion still shapes group 1's statistics…
        // (Compared as text: the all-None reward is NaN, and NaN != NaN.)
        assert_eq!(
            format!("{:?}", masked.batch.stats),
            format!("{:?}", kept.batch.stats)
        );
        assert!(masked.batch.advantages(ScaleRewards::Group)[3] > 0.0);
        // …but none of its tokens count.
        assert_eq!(masked.batch.num_items_in_batch, 5.0);
        assert_eq!(kept.batch.num_items_in_batch, 7.0);
        assert_eq!(masked.batch.completion_mask[3], vec![0.0, 0.0]);
        for report in &masked.cases[0].report.loss_types {
            assert!(report.per_token_loss[3].iter().all(|l| *l == 0.0));
            assert!(report.grad_wrt_cur_logps[3].iter().all(|g| *g == 0.0));
        }
        assert_eq!(masked.batch.metrics["completions/clipped_ratio"], 0.25);
    }

    #[test]
    fn bad_files_are_errors() {
        let mut duplicate = file(false);
        duplicate.cases[1].name = "kl".into();
        assert!(matches!(
            duplicate.evaluate(),
            Err(GrpoError::DuplicateCase { .. })
        ));

        let mut off_policy = file(false);
        off_policy.cases[0].old_logps_from = OldLogpsFrom::OldLogps;
        let err = off_policy.evaluate().unwrap_err();
        assert!(err.to_string().contains("old_logps"), "{err}");

        let mut short = file(false);
        short.inputs.truncated.pop();
        assert!(short.evaluate().is_err());

        let mut entropy_mask = file(false);
        entropy_mask.cases[0].top_entropy_quantile = 0.5;
        let err = entropy_mask.evaluate().unwrap_err();
        assert!(err.to_string().contains("entropies"), "{err}");
    }
}
