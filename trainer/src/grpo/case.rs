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
use super::advantages::{GroupStats, ScaleRewards, TRL_STD_EPS};
use super::config::MultiObjectiveAggregation;
use super::loss::{self, LossInputs, LossReport, Normalisation, ObjectiveParams, OldLogps};
use super::metrics::{completion_metrics, reward_metrics};
use super::rewards;

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
    /// Reward aggregation; only `sum_then_normalize` is implemented.
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

/// One loss computation over the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// The case's name (unique within the file; the key of `trainer loss` output).
    pub name: String,
    /// On- or off-policy.
    pub old_logps_from: OldLogpsFrom,
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
    /// Clip and KL metrics by TRL name.
    pub metrics: Option<BTreeMap<String, Option<f64>>>,
}

/// The computed reward side of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchEvaluation {
    /// Group statistics, including the aggregated rewards (NaN = no reward).
    pub stats: GroupStats,
    /// Advantages per mode, in [`ScaleRewards::ALL`] order; see [`BatchEvaluation::advantages`].
    pub advantages_by_mode: [Vec<f64>; 3],
    /// The completion mask after `mask_truncated_completions`.
    pub completion_mask: Matrix,
    /// N, the active-token count of the batch.
    pub num_items_in_batch: f64,
    /// Reward and completion metrics by TRL name.
    pub metrics: BTreeMap<String, f64>,
}

impl BatchEvaluation {
    /// The advantages under one `scale_rewards` mode.
    pub fn advantages(&self, scale: ScaleRewards) -> &[f64] {
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
        if config.multi_objective_aggregation != MultiObjectiveAggregation::SumThenNormalize {
            return Err(GrpoError::Unsupported {
                what: "multi_objective_aggregation = \"normalize_then_sum\"".into(),
            });
        }
        rewards::check_shape(&inputs.rewards_per_func, &config.reward_weights)?;

        let aggregated = rewards::aggregate(&inputs.rewards_per_func, &config.reward_weights);
        let stats = GroupStats::new(&aggregated, config.num_generations)?;
        let advantages_by_mode =
            ScaleRewards::ALL.map(|mode| stats.advantages(mode, config.std_eps));
        let completion_mask = if config.mask_truncated_completions {
            loss::mask_truncated(&inputs.completion_mask, &inputs.truncated)?
        } else {
            inputs.completion_mask.clone()
        };
        let mut metrics = reward_metrics(&stats, &inputs.rewards_per_func, &config.reward_names);
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

    fn evaluate_case(&self, case: &Case, batch: &BatchEvaluation) -> Result<LossReport, GrpoError> {
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
        let params = ObjectiveParams::new(
            case.epsilon,
            case.epsilon_high,
            case.beta,
            case.use_bias_correction_kl,
        );
        let inputs = LossInputs {
            cur_logps: &self.inputs.cur_logps,
            old_logps,
            // Reference log-probs are only looked at when β ≠ 0, as TRL only computes them then.
            ref_logps: params.kl.and(self.inputs.ref_logps.as_deref()),
            completion_mask: &batch.completion_mask,
            advantages: batch.advantages(case.scale_rewards),
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
        loss::evaluate(&inputs, &params, &norm, &micro_batches)
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
        assert!(kl.per_token_loss[0].iter().all(|l| *l > 0.0));
        assert!(
            kl.by_type(LossType::Dapo).grad_wrt_cur_logps[0]
                .iter()
                .all(|g| *g != 0.0)
        );
        let no_kl = &evaluation.cases[1].report;
        assert!(no_kl.per_token_loss[0].iter().all(|l| *l == 0.0));
        assert!(kl.metrics.kl.is_some());
        assert!(no_kl.metrics.kl.is_none());
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
        let report = &masked.cases[0].report;
        assert!(report.per_token_loss[3].iter().all(|l| *l == 0.0));
        for loss_type in LossType::ALL {
            assert!(
                report.by_type(loss_type).grad_wrt_cur_logps[3]
                    .iter()
                    .all(|g| *g == 0.0)
            );
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

        let mut gdpo = file(false);
        gdpo.config.multi_objective_aggregation = MultiObjectiveAggregation::NormalizeThenSum;
        assert!(matches!(
            gdpo.evaluate(),
            Err(GrpoError::Unsupported { .. })
        ));
    }
}
