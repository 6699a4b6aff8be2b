//! [`GrpoConfig`]: the GRPO training settings under TRL's names and with TRL 1.16.0's defaults
//! (`GRPOConfig` plus the inherited `TrainingArguments`), read from TOML.
//!
//! A TRL user recognises every knob: the TOML keys are exactly TRL's argument names, and a key
//! that is left out takes TRL's default. Unknown keys are rejected (a misspelt `epsilon_hgih`
//! must not silently fall back to the default). Values are then range-checked by
//! [`GrpoConfig::validate`]; every error names the field.

use serde::{Deserialize, Deserializer, Serialize};

use super::GrpoError;
use super::advantages::ScaleRewards;
pub(super) use super::loss::ImportanceSamplingLevel;
use super::loss::{LossType, Normalisation, ObjectiveParams, SapoTemperatures, VespoParams};
use crate::train::arguments::{
    TrainingArguments, check, deserialize_flat, finite_at_least, positive, unit_closed, unit_open,
};

/// How several reward functions are combined (`multi_objective_aggregation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiObjectiveAggregation {
    /// Weighted nansum of the functions, then group normalisation (default; see the
    /// `aggregation` module).
    #[default]
    SumThenNormalize,
    /// GDPO: standardise each function within its group, take the weighted nansum, then
    /// standardise over the batch (`scale_rewards` does not apply; see the `advantages`
    /// module).
    NormalizeThenSum,
}

/// The GRPO settings, with TRL's names and defaults. See the module documentation.
///
/// `GrpoConfig::default()` is TRL 1.16.0's default configuration, the same as parsing an empty
/// TOML document.
// `remote = "Self"`: the derived deserializer reads GRPO's own keys, as an inherent
// `GrpoConfig::deserialize`, which the `Deserialize` impl below runs beside the training
// arguments' keys.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct GrpoConfig {
    // ---- optimiser, schedule, batch shape (TrainingArguments) ----
    /// The settings every loop shares, at the top level of the table. GRPO's defaults:
    /// `learning_rate` **1e-6** (GRPOConfig overrides TrainingArguments' 5e-5) and
    /// `gradient_checkpointing` true; the others are `TrainingArguments`'.
    #[serde(skip)]
    pub training: TrainingArguments,
    /// Optimiser steps between two metric logs. Default 10.
    pub logging_steps: usize,
    /// Train in bf16. Default true (dfdx has no bf16: the model code decides what this means).
    pub bf16: bool,
    /// Turn dropout off in the policy and reference models. Default false.
    pub disable_dropout: bool,

    // ---- generation: batch shape and sampling ----
    /// Completions per prompt, G (at least 2). Default 8.
    pub num_generations: usize,
    /// Maximum new tokens per completion, L (also the `dr_grpo` constant). Default 512.
    pub max_completion_length: usize,
    /// Micro-batches per generation batch (SPG). Default: `gradient_accumulation_steps`.
    /// Exclusive with `generation_batch_size`.
    pub steps_per_generation: Option<usize>,
    /// Completions per generation batch, over all processes. Default:
    /// `per_device_train_batch_size × processes × steps_per_generation`. Exclusive with
    /// `steps_per_generation`.
    pub generation_batch_size: Option<usize>,
    /// The number of data-parallel processes (ranks). Not a TOML key: set by the trainer from
    /// its ranks (TRL takes it from accelerate). Default 1.
    #[serde(skip)]
    pub num_processes: usize,
    /// Sampling temperature; the training log-probs divide the logits by it too. Default 1.0.
    pub temperature: f64,
    /// Nucleus sampling threshold; 1.0 is off. Default 1.0.
    pub top_p: f64,
    /// Top-k sampling; 0 is off. Default 0.
    pub top_k: usize,
    /// Min-p sampling; unset is off. Default unset.
    pub min_p: Option<f64>,
    /// Repetition penalty; 1.0 is off. Default 1.0.
    pub repetition_penalty: f64,

    // ---- objective: rewards, advantages, clipping, KL, loss reduction ----
    /// KL coefficient β; 0 means no reference model and no KL term. Default **0.0**.
    pub beta: f64,
    /// Lower clip ε_low (and upper clip when `epsilon_high` is unset). Default 0.2.
    pub epsilon: f64,
    /// Upper clip ε_high; cispo's cap on the ratio. Default: `epsilon` (DAPO recommends 0.28,
    /// CISPO 5.0).
    pub epsilon_high: Option<f64>,
    /// Two-sided clipping: cap the unclipped ratio at `delta` (> 1 + ε_high recommended; the
    /// clipped loss types only). Default unset.
    pub delta: Option<f64>,
    /// Passes μ over each generation batch. Default 1.
    pub num_iterations: usize,
    /// The policy term and its normaliser. Default **`dapo`**.
    pub loss_type: LossType,
    /// SAPO's gate temperature for positive advantages. Default 1.0.
    pub sapo_temperature_pos: f64,
    /// SAPO's gate temperature for other advantages. Default 1.05.
    pub sapo_temperature_neg: f64,
    /// VESPO's k for A ≥ 0. Default 2.0.
    pub vespo_k_pos: f64,
    /// VESPO's λ for A ≥ 0. Default 3.0.
    pub vespo_lambda_pos: f64,
    /// VESPO's k for A < 0. Default 3.0.
    pub vespo_k_neg: f64,
    /// VESPO's λ for A < 0. Default 2.0.
    pub vespo_lambda_neg: f64,
    /// Advantage scaling: `group`, `batch` or `none` (also `true`/`false`). Default `group`.
    pub scale_rewards: ScaleRewards,
    /// Zero the mask of truncated completions (DAPO overlong filtering). Default false.
    pub mask_truncated_completions: bool,
    /// Token- or sequence-level (GSPO) importance ratios. Default `token`.
    pub importance_sampling_level: ImportanceSamplingLevel,
    /// Drop sequences with a negative advantage whose mean `old − current` log-prob exceeds
    /// this (DeepSeek-V3.2's off-policy sequence mask). Default unset.
    pub off_policy_mask_threshold: Option<f64>,
    /// Multiply the k3 KL estimate by the ratio. Default true (TRL 1.16; older main: false).
    pub use_bias_correction_kl: bool,
    /// One weight per reward function. Default: all 1.0 (unset).
    pub reward_weights: Option<Vec<f64>>,
    /// How reward functions are combined. Default `sum_then_normalize`.
    pub multi_objective_aggregation: MultiObjectiveAggregation,
    /// Train the policy term only on the tokens at or above this entropy quantile of each
    /// micro-batch; 1.0 keeps all. Default 1.0.
    pub top_entropy_quantile: f64,
    /// Entropy bonus coefficient. Default 0.0.
    pub entropy_coef: f64,
    /// Adapt `entropy_coef` towards `entropy_target` after every step. Default false.
    pub use_adaptive_entropy: bool,
    /// The adaptive coefficient's floor. Default 0.0.
    pub entropy_coef_min: f64,
    /// The adaptive coefficient's ceiling. Default 1.0.
    pub entropy_coef_max: f64,
    /// The adaptive coefficient's step. Default 0.005.
    pub entropy_coef_delta: f64,
    /// The entropy the adaptive coefficient aims at. Default 0.2.
    pub entropy_target: f64,
    /// Periodically mix the policy into the reference model (TR-DPO). Default false.
    pub sync_ref_model: bool,
    /// Mixing weight α of `sync_ref_model`: `ref ← α · policy + (1 − α) · ref`. Default 0.6.
    pub ref_model_mixup_alpha: f64,
    /// Optimiser steps between two reference syncs. Default 512.
    pub ref_model_sync_steps: usize,
}

impl Default for GrpoConfig {
    fn default() -> Self {
        GrpoConfig {
            training: TrainingArguments {
                learning_rate: 1e-6,
                gradient_checkpointing: true,
                ..TrainingArguments::default()
            },
            logging_steps: 10,
            bf16: true,
            disable_dropout: false,
            num_generations: 8,
            max_completion_length: 512,
            steps_per_generation: None,
            generation_batch_size: None,
            num_processes: 1,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: None,
            repetition_penalty: 1.0,
            beta: 0.0,
            epsilon: 0.2,
            epsilon_high: None,
            delta: None,
            num_iterations: 1,
            loss_type: LossType::Dapo,
            sapo_temperature_pos: 1.0,
            sapo_temperature_neg: 1.05,
            vespo_k_pos: 2.0,
            vespo_lambda_pos: 3.0,
            vespo_k_neg: 3.0,
            vespo_lambda_neg: 2.0,
            scale_rewards: ScaleRewards::Group,
            mask_truncated_completions: false,
            importance_sampling_level: ImportanceSamplingLevel::Token,
            off_policy_mask_threshold: None,
            use_bias_correction_kl: true,
            reward_weights: None,
            multi_objective_aggregation: MultiObjectiveAggregation::SumThenNormalize,
            top_entropy_quantile: 1.0,
            entropy_coef: 0.0,
            use_adaptive_entropy: false,
            entropy_coef_min: 0.0,
            entropy_coef_max: 1.0,
            entropy_coef_delta: 0.005,
            entropy_target: 0.2,
            sync_ref_model: false,
            ref_model_mixup_alpha: 0.6,
            ref_model_sync_steps: 512,
        }
    }
}

impl<'de> Deserialize<'de> for GrpoConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `GrpoConfig::deserialize` is the derived, inherent one (own keys only).
        let (config, training) =
            deserialize_flat(deserializer, GrpoConfig::default().training, |own| {
                GrpoConfig::deserialize(own)
            })?;
        Ok(Self { training, ..config })
    }
}

impl GrpoConfig {
    /// Parses a TOML document with TRL's key names and validates it.
    pub fn from_toml_str(text: &str) -> Result<Self, GrpoError> {
        let config = Self::parse_toml(text)?;
        config.validate()?;
        Ok(config)
    }

    /// The settings a TOML text spells (TRL's names; missing keys take TRL's defaults), not yet
    /// [validated](Self::validate): errors are the text's own (syntax, unknown keys, types).
    pub(crate) fn parse_toml(text: &str) -> Result<Self, GrpoError> {
        toml::from_str(text).map_err(|source| GrpoError::ConfigParse {
            key: offending_key(text, &source),
            message: source.message().to_owned(),
            source: Box::new(source),
        })
    }

    /// Checks every value's range and the combinations TRL rejects, assuming one process (the
    /// generation batch must hold whole groups of `num_generations`).
    pub fn validate(&self) -> Result<(), GrpoError> {
        self.training.validate()?;
        positive("logging_steps", self.logging_steps)?;

        check("num_generations", self.num_generations >= 2, || {
            format!(
                "must be at least 2 (GRPO compares completions within a group), got {}",
                self.num_generations
            )
        })?;
        positive("max_completion_length", self.max_completion_length)?;
        if let Some(steps) = self.steps_per_generation {
            positive("steps_per_generation", steps)?;
            check(
                "generation_batch_size",
                self.generation_batch_size.is_none(),
                || "cannot be set together with `steps_per_generation`".to_owned(),
            )?;
        }
        positive("num_processes", self.num_processes)?;
        if let Some(size) = self.generation_batch_size {
            let step = self.training.per_device_train_batch_size * self.num_processes;
            check(
                "generation_batch_size",
                size > 0 && size % step == 0,
                || {
                    format!(
                        "must be a positive multiple of per_device_train_batch_size × processes \
                         = {step}, got {size}"
                    )
                },
            )?;
        }
        let generation_batch = self.generation_batch_size();
        check(
            "num_generations",
            generation_batch.is_multiple_of(self.num_generations),
            || {
                format!(
                    "must divide the generation batch size {generation_batch} (whole groups only), got {}",
                    self.num_generations
                )
            },
        )?;
        check(
            "temperature",
            self.temperature.is_finite() && self.temperature > 0.0,
            || format!("must be a finite number > 0, got {}", self.temperature),
        )?;
        check("top_p", self.top_p > 0.0 && self.top_p <= 1.0, || {
            format!("must be in (0, 1], got {}", self.top_p)
        })?;
        if let Some(min_p) = self.min_p {
            unit_closed("min_p", min_p)?;
        }
        check(
            "repetition_penalty",
            self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0,
            || {
                format!(
                    "must be a finite number > 0, got {}",
                    self.repetition_penalty
                )
            },
        )?;

        finite_at_least("beta", self.beta, 0.0)?;
        unit_open("epsilon", self.epsilon)?;
        if let Some(high) = self.epsilon_high {
            finite_at_least("epsilon_high", high, 0.0)?;
        }
        if let Some(delta) = self.delta {
            check("delta", delta.is_finite() && delta > 0.0, || {
                format!("must be a finite number > 0, got {delta}")
            })?;
        }
        positive("num_iterations", self.num_iterations)?;
        for (field, value) in [
            ("sapo_temperature_pos", self.sapo_temperature_pos),
            ("sapo_temperature_neg", self.sapo_temperature_neg),
        ] {
            check(field, value.is_finite() && value > 0.0, || {
                format!("must be a finite number > 0, got {value}")
            })?;
        }
        for (field, value) in [
            ("vespo_k_pos", self.vespo_k_pos),
            ("vespo_lambda_pos", self.vespo_lambda_pos),
            ("vespo_k_neg", self.vespo_k_neg),
            ("vespo_lambda_neg", self.vespo_lambda_neg),
        ] {
            finite_at_least(field, value, 0.0)?;
        }
        if let Some(threshold) = self.off_policy_mask_threshold {
            check("off_policy_mask_threshold", threshold.is_finite(), || {
                format!("must be a finite number, got {threshold}")
            })?;
        }
        if let Some(weights) = &self.reward_weights {
            check(
                "reward_weights",
                weights.iter().all(|w| w.is_finite()),
                || format!("must all be finite, got {weights:?}"),
            )?;
        }
        unit_closed("top_entropy_quantile", self.top_entropy_quantile)?;
        finite_at_least("entropy_coef", self.entropy_coef, 0.0)?;
        finite_at_least("entropy_coef_min", self.entropy_coef_min, 0.0)?;
        finite_at_least(
            "entropy_coef_max",
            self.entropy_coef_max,
            self.entropy_coef_min,
        )?;
        finite_at_least("entropy_coef_delta", self.entropy_coef_delta, 0.0)?;
        finite_at_least("entropy_target", self.entropy_target, 0.0)?;
        unit_closed("ref_model_mixup_alpha", self.ref_model_mixup_alpha)?;
        positive("ref_model_sync_steps", self.ref_model_sync_steps)?;
        Ok(())
    }

    /// ε_high: `epsilon_high`, or `epsilon` when unset.
    pub fn epsilon_high(&self) -> f64 {
        self.epsilon_high.unwrap_or(self.epsilon)
    }

    /// SPG: `steps_per_generation`, or `generation_batch_size / (per_device_train_batch_size ×
    /// processes)`, or `gradient_accumulation_steps`.
    pub fn steps_per_generation(&self) -> usize {
        match (self.steps_per_generation, self.generation_batch_size) {
            (Some(steps), _) => steps,
            (None, Some(size)) => {
                size / (self.training.per_device_train_batch_size * self.num_processes).max(1)
            }
            (None, None) => self.training.gradient_accumulation_steps,
        }
    }

    /// Completions per generation batch over all processes: `per_device_train_batch_size ×
    /// processes × steps_per_generation`.
    pub fn generation_batch_size(&self) -> usize {
        self.generation_batch_size.unwrap_or(
            self.training.per_device_train_batch_size
                * self.num_processes
                * self.steps_per_generation(),
        )
    }

    /// The objective's parameters (loss type, clip bounds, masks, β and the KL bias correction).
    pub fn objective_params(&self) -> ObjectiveParams {
        ObjectiveParams {
            loss_type: self.loss_type,
            delta: self.delta,
            importance_sampling_level: self.importance_sampling_level,
            off_policy_mask_threshold: self.off_policy_mask_threshold,
            top_entropy_quantile: self.top_entropy_quantile,
            entropy_coef: self.entropy_coef,
            sapo: SapoTemperatures {
                positive: self.sapo_temperature_pos,
                negative: self.sapo_temperature_neg,
            },
            vespo: VespoParams {
                k_pos: self.vespo_k_pos,
                lambda_pos: self.vespo_lambda_pos,
                k_neg: self.vespo_k_neg,
                lambda_neg: self.vespo_lambda_neg,
            },
            ..ObjectiveParams::new(
                self.epsilon,
                self.epsilon_high,
                self.beta,
                self.use_bias_correction_kl,
            )
        }
    }

    /// The loss normalisation for a generation batch of `num_items_in_batch` active tokens over
    /// `num_processes` processes.
    pub fn normalisation(&self, num_items_in_batch: f64, num_processes: usize) -> Normalisation {
        Normalisation {
            max_completion_length: self.max_completion_length,
            gradient_accumulation_steps: self.training.gradient_accumulation_steps,
            steps_per_generation: self.steps_per_generation(),
            num_processes,
            num_items_in_batch,
        }
    }
}

/// The key a TOML error points at: an unknown field's name from the message, or the key written
/// before `=` on the line of the error's span.
fn offending_key(text: &str, error: &toml::de::Error) -> Option<String> {
    let message = error.message();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        return rest.split('`').next().map(str::to_owned);
    }
    let start = error.span()?.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let (key, _) = text[line_start..line_end].split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_is_trl_defaults() {
        let config = GrpoConfig::from_toml_str("").unwrap();
        assert_eq!(config, GrpoConfig::default());
        assert_eq!(config.loss_type, LossType::Dapo);
        assert_eq!(config.training.learning_rate, 1e-6);
        assert_eq!(config.beta, 0.0);
        assert_eq!(config.epsilon_high(), 0.2);
        assert_eq!(config.steps_per_generation(), 1);
        assert!(config.objective_params().kl.is_none());
    }

    #[test]
    fn trl_names_are_read() {
        let config = GrpoConfig::from_toml_str(
            r#"
            loss_type = "dr_grpo"
            scale_rewards = false
            epsilon = 0.2
            epsilon_high = 0.28
            beta = 0.04
            learning_rate = 2e-6
            num_generations = 16
            per_device_train_batch_size = 16
            gradient_accumulation_steps = 4
            mask_truncated_completions = true
            lr_scheduler_type = "constant_with_warmup"
            reward_weights = [1.0, 0.5]
            max_completion_length = 1024
            "#,
        )
        .unwrap();
        assert_eq!(config.loss_type, LossType::DrGrpo);
        assert_eq!(config.scale_rewards, ScaleRewards::None);
        assert_eq!(config.epsilon_high(), 0.28);
        assert_eq!(config.steps_per_generation(), 4);
        assert_eq!(config.generation_batch_size(), 64);
        let params = config.objective_params();
        assert_eq!(params.kl.unwrap().beta, 0.04);
        assert!(params.kl.unwrap().use_bias_correction);
        let norm = config.normalisation(100.0, 1);
        assert_eq!(norm.max_completion_length, 1024);
        assert_eq!(norm.gradient_accumulation_steps, 4);
    }

    fn parse_error(text: &str) -> String {
        GrpoConfig::from_toml_str(text).unwrap_err().to_string()
    }

    #[test]
    fn unknown_key_is_named() {
        let message = parse_error("epsilon = 0.2\nepsilon_hgih = 0.28\n");
        assert!(message.contains("`epsilon_hgih`"), "{message}");
    }

    #[test]
    fn wrongly_typed_value_names_its_key() {
        let message = parse_error("beta = 0.0\nepsilon = \"0.2\"\n");
        assert!(message.contains("`epsilon`"), "{message}");
        let message = parse_error("loss_type = \"ppo\"\n");
        assert!(message.contains("`loss_type`"), "{message}");
    }

    #[test]
    fn out_of_range_value_names_its_field() {
        for (text, field) in [
            ("epsilon = 1.5", "`epsilon`"),
            ("beta = -0.1", "`beta`"),
            ("num_generations = 1", "`num_generations`"),
            ("num_generations = 3", "`num_generations`"),
            ("temperature = 0.0", "`temperature`"),
            (
                "gradient_accumulation_steps = 0",
                "`gradient_accumulation_steps`",
            ),
            ("top_p = 1.5", "`top_p`"),
            (
                "importance_sampling_level = \"sentence\"",
                "`importance_sampling_level`",
            ),
            ("top_entropy_quantile = 1.5", "`top_entropy_quantile`"),
            ("delta = 0.0", "`delta`"),
            ("sapo_temperature_neg = 0.0", "`sapo_temperature_neg`"),
            (
                "steps_per_generation = 2\ngeneration_batch_size = 16",
                "`generation_batch_size`",
            ),
        ] {
            let message = parse_error(text);
            assert!(message.contains(field), "{text}: {message}");
        }
    }
}
