//! Supervised fine-tuning on prompt/completion pairs: the loss is the mean negative log-likelihood
//! of the completion tokens (and the EOS appended to each completion) over all the completion
//! tokens of an optimiser step; prompt tokens carry no loss. AdamW with global-norm clipping,
//! a warm-up and decay schedule and gradient accumulation, as in TRL's `SFTTrainer` with
//! `completion_only_loss`.
//!
//! Examples are visited epoch by epoch in a seeded order; like GRPO, the run is a function of
//! its seed and resumes exactly from a checkpoint.
//!
//! With data-parallel ranks ([`crate::ranks`]), every micro-batch is the one process's
//! micro-batch of `per_device_train_batch_size × ranks` examples, each rank computing its share
//! with the loss normalised by the completion tokens of the whole step; losses, metric counts
//! and gradients are summed over ranks before clipping and AdamW.

use std::time::Instant;

use dfdx::prelude::*;
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

use crate::checkpoint::RunState;
use crate::data::SftExample;
use crate::device::DeviceSpec;
use crate::error::{Error, Result};
use crate::grpo::config::LrSchedulerType;
use crate::model::{AdamW, AdamWConfig, CausalLm, Kernels};
use crate::ranks::Ranks;
use crate::report::metrics_log::StepMetrics;
use crate::tokenizer::Tokenizer;
use crate::train::batch::pack_to;
use crate::train::plan::PlanInputs;
use crate::train::schedule::Schedule;
use crate::train::{MetricsAccumulator, RunOutput, derive_seed};

const STREAM_ORDER: u64 = 11;

/// SFT settings under TRL's `SFTConfig` / `TrainingArguments` names. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Peak learning rate. Default 2e-5 (TRL `SFTConfig`).
    pub learning_rate: f64,
    /// AdamW weight decay. Default 0.0.
    pub weight_decay: f64,
    /// AdamW β₁. Default 0.9.
    pub adam_beta1: f64,
    /// AdamW β₂. Default 0.999.
    pub adam_beta2: f64,
    /// AdamW ε. Default 1e-8.
    pub adam_epsilon: f64,
    /// Global gradient-norm clip; 0 is off. Default 1.0.
    pub max_grad_norm: f64,
    /// Schedule. Default `linear`.
    pub lr_scheduler_type: LrSchedulerType,
    /// Warm-up share of the steps. Default 0.0.
    pub warmup_ratio: f64,
    /// Warm-up steps (override `warmup_ratio` when > 0). Default 0.
    pub warmup_steps: usize,
    /// Passes over the data when `max_steps` is unset. Default 3.0.
    pub num_train_epochs: f64,
    /// Total optimiser steps; -1 derives them from `num_train_epochs`. Default -1.
    pub max_steps: i64,
    /// Examples per micro-batch. Default 8.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per optimiser step. Default 1.
    pub gradient_accumulation_steps: usize,
    /// Longest sequence (prompt + completion + EOS) in tokens; longer examples lose the start
    /// of their prompt, then the end of their completion. Default 1024.
    pub max_length: usize,
    /// Seed of the example order. Default 42.
    pub seed: u64,
    /// Recompute each decoder layer's activations in the backward pass instead of keeping
    /// them (TRL's key and default: true). Gradients are the same either way.
    pub gradient_checkpointing: bool,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            learning_rate: 2e-5,
            weight_decay: 0.0,
            adam_beta1: 0.9,
            adam_beta2: 0.999,
            adam_epsilon: 1e-8,
            max_grad_norm: 1.0,
            lr_scheduler_type: LrSchedulerType::Linear,
            warmup_ratio: 0.0,
            warmup_steps: 0,
            num_train_epochs: 3.0,
            max_steps: -1,
            per_device_train_batch_size: 8,
            gradient_accumulation_steps: 1,
            max_length: 1024,
            seed: 42,
            gradient_checkpointing: true,
        }
    }
}

impl SftConfig {
    /// Parses TOML with the names above and checks the values.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let config = Self::parse_toml(text).map_err(|e| Error::Training {
            reason: format!("SFT settings: {}", e.message()),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// The settings a TOML text spells (missing keys take their defaults), not yet
    /// [validated](Self::validate): errors are the text's own (syntax, unknown keys, types).
    pub fn parse_toml(text: &str) -> std::result::Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Checks ranges; every error names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, reason: &str| {
            Err(Error::Training {
                reason: format!("SFT setting `{field}` {reason}"),
            })
        };
        if !(self.learning_rate.is_finite() && self.learning_rate >= 0.0) {
            return bad("learning_rate", "must be a finite number >= 0");
        }
        if self.per_device_train_batch_size == 0 {
            return bad("per_device_train_batch_size", "must be at least 1");
        }
        if self.gradient_accumulation_steps == 0 {
            return bad("gradient_accumulation_steps", "must be at least 1");
        }
        if self.max_length < 2 {
            return bad("max_length", "must be at least 2");
        }
        if self.max_steps == 0 || self.max_steps < -1 {
            return bad("max_steps", "must be -1 (unset) or positive");
        }
        Ok(())
    }

    fn adamw(&self) -> AdamWConfig {
        AdamWConfig {
            lr: self.learning_rate,
            beta1: self.adam_beta1,
            beta2: self.adam_beta2,
            eps: self.adam_epsilon,
            weight_decay: self.weight_decay,
            max_grad_norm: (self.max_grad_norm > 0.0).then_some(self.max_grad_norm),
        }
    }
}

/// A tokenised example: prompt ids and completion ids (EOS included).
type Tokenised = (Vec<u32>, Vec<u32>);

/// An SFT run in progress.
pub struct SftTrainer<D: Kernels<f32>> {
    config: SftConfig,
    examples: Vec<Tokenised>,
    /// The model being trained.
    pub model: CausalLm<f32, D>,
    /// Its optimiser.
    pub optimizer: AdamW<f32, D>,
    /// Where the run stands.
    pub state: RunState,
    schedule: Schedule,
    pad: u32,
    ranks: Ranks,
}

impl<D: Kernels<f32>> SftTrainer<D> {
    /// Prepares a run on `ranks` (this process is one of them; [`Ranks::single`] alone);
    /// `resume` continues from a checkpoint's optimiser and state.
    pub fn new(
        config: SftConfig,
        examples: &[SftExample],
        tokenizer: &Tokenizer,
        mut model: CausalLm<f32, D>,
        resume: Option<(AdamW<f32, D>, RunState)>,
        ranks: Ranks,
    ) -> Result<Self> {
        config.validate()?;
        model.gradient_checkpointing = config.gradient_checkpointing;
        if examples.is_empty() {
            return Err(Error::Training {
                reason: "no SFT examples".into(),
            });
        }
        let eos = *model
            .config
            .eos_token_ids
            .first()
            .ok_or_else(|| Error::Training {
                reason: "the model config names no eos_token_id".into(),
            })?;
        let examples = examples
            .iter()
            .map(|e| {
                // A prompt rendered through a chat template already starts with the BOS.
                let mut prompt = tokenizer.encode(&e.prompt, e.add_special_tokens)?;
                let mut completion = tokenizer.encode(&e.completion, false)?;
                completion.push(eos);
                let max = config.max_length;
                if prompt.len() + completion.len() > max {
                    let keep_prompt = prompt
                        .len()
                        .min(max.saturating_sub(completion.len()))
                        .max(1);
                    prompt.drain(..prompt.len() - keep_prompt);
                    completion.truncate(max - keep_prompt);
                }
                Ok((prompt, completion))
            })
            .collect::<Result<Vec<_>>>()?;
        let per_step = config.per_device_train_batch_size
            * config.gradient_accumulation_steps
            * ranks.world_size();
        let total = if config.max_steps > 0 {
            config.max_steps as u64
        } else {
            ((config.num_train_epochs * examples.len() as f64 / per_step as f64).ceil() as u64)
                .max(1)
        };
        let (optimizer, state) = match resume {
            Some((mut opt, state)) if state.kind == "sft" => {
                state.check_ranks(ranks.world_size())?;
                opt.config = config.adamw();
                (opt, state)
            }
            Some((_, state)) => {
                return Err(Error::Training {
                    reason: format!("cannot resume SFT from a `{}` checkpoint", state.kind),
                });
            }
            None => (
                AdamW::new(config.adamw()),
                RunState {
                    kind: "sft".into(),
                    total_steps: total,
                    num_processes: ranks.world_size() as u64,
                    ..RunState::default()
                },
            ),
        };
        let schedule = Schedule::new(
            config.learning_rate,
            config.lr_scheduler_type,
            config.warmup_steps,
            config.warmup_ratio,
            state.total_steps as usize,
        );
        Ok(Self {
            pad: crate::train::grpo_loop::pad_token(&model),
            config,
            examples,
            model,
            optimizer,
            state,
            schedule,
            ranks,
        })
    }

    /// What this run will hold on `device`, for its memory plan: micro-batches of the longest
    /// example, all of it counted as completion (the worst case).
    pub fn plan_inputs(&self, device: DeviceSpec) -> PlanInputs {
        let longest = self
            .examples
            .iter()
            .map(|(p, c)| p.len() + c.len())
            .max()
            .unwrap_or(0);
        PlanInputs {
            model: self.model.config.clone(),
            device,
            kernels: self.model.kernels,
            rows: self.config.per_device_train_batch_size,
            seq: longest,
            completion: longest.saturating_sub(1),
            gradient_checkpointing: self.model.gradient_checkpointing,
            logits_chunk_rows: self.model.logits_chunk_rows,
            reference: false,
            generation: None,
        }
    }

    /// Whether every planned step has been taken.
    pub fn finished(&self) -> bool {
        self.state.step >= self.state.total_steps
    }

    /// Runs the remaining steps, logging and checkpointing like GRPO (`output`: rank 0's alone).
    pub fn train(
        &mut self,
        mut output: Option<&mut RunOutput>,
        on_step: &mut dyn FnMut(&StepMetrics, &RunState),
    ) -> Result<()> {
        let mut first = true;
        while !self.finished() {
            let metrics = self.step()?;
            // The ranks' parameters agree after this process's first step and the last (checked).
            if std::mem::take(&mut first) || self.finished() {
                self.ranks
                    .check_same_params(&self.model.params, metrics.step)?;
            }
            on_step(&metrics, &self.state);
            let Some(output) = output.as_deref_mut() else {
                continue;
            };
            output.metrics.append(&metrics)?;
            if output.due(self.state.step) || self.finished() {
                output.save(&self.model, &self.optimizer, &self.state, None)?;
            }
        }
        Ok(())
    }

    /// The example at position `k` of the run's stream: epoch by epoch, each in seeded order.
    fn example_at(&self, k: u64) -> usize {
        let n = self.examples.len() as u64;
        let mut order: Vec<usize> = (0..n as usize).collect();
        let mut rng = StdRng::seed_from_u64(derive_seed(self.config.seed, STREAM_ORDER, k / n));
        order.shuffle(&mut rng);
        order[(k % n) as usize]
    }

    /// One optimiser step over `gradient_accumulation_steps` micro-batches.
    pub fn step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        // Examples per micro-batch over all ranks.
        let bs = (self.config.per_device_train_batch_size * self.ranks.world_size()) as u64;
        let micro: Vec<Vec<usize>> = (0..self.config.gradient_accumulation_steps as u64)
            .map(|m| {
                let first = (self.state.micro_step + m) * bs;
                (first..first + bs).map(|k| self.example_at(k)).collect()
            })
            .collect();
        let total_tokens: usize = micro
            .iter()
            .flatten()
            .map(|&i| self.examples[i].1.len())
            .sum();
        let seen: u64 = micro
            .iter()
            .flatten()
            .map(|&i| (self.examples[i].0.len() + self.examples[i].1.len()) as u64)
            .sum();
        let mut acc = MetricsAccumulator::default();
        let mut grads = self.model.params.alloc_grads();
        let mut loss_sum = 0.0;
        for rows in &micro {
            // Packed as wide as the whole micro-batch (over all ranks).
            let width = (
                rows.iter()
                    .map(|&i| self.examples[i].0.len())
                    .max()
                    .unwrap_or(0),
                rows.iter()
                    .map(|&i| self.examples[i].1.len())
                    .max()
                    .unwrap_or(0),
            );
            let rows = &rows[self.ranks.share(rows.len())];
            let pairs: Vec<(&[u32], &[u32])> = rows
                .iter()
                .map(|&i| (self.examples[i].0.as_slice(), self.examples[i].1.as_slice()))
                .collect();
            let packed = pack_to(&pairs, self.pad, width)?;
            let out = self
                .model
                .token_logps(&packed.batch, packed.completion_start, 1.0, grads)?;
            let (rows_n, cols) = *out.logps.shape();
            let weights: Vec<f32> = packed
                .completion_mask
                .iter()
                .map(|&m| (-m / total_tokens as f64) as f32)
                .collect();
            let entropy = out.entropy.as_vec();
            let tokens: f64 = packed.completion_mask.iter().sum();
            let entropy_sum: f64 = entropy
                .iter()
                .zip(&packed.completion_mask)
                .map(|(&e, &m)| f64::from(e) * m)
                .sum();
            // The whole micro-batch's mean, over all ranks.
            let mut totals = [entropy_sum, tokens];
            self.ranks.sum(&mut totals)?;
            let [entropy_sum, tokens] = totals;
            acc.record("entropy", entropy_sum / tokens.max(1.0));
            let dev = out.logps.device().clone();
            let loss = (out.logps * dev.tensor_from_vec(weights, (rows_n, cols))).sum::<(), _>();
            loss_sum += f64::from(loss.as_vec()[0]);
            grads = self.model.params.keep_param_grads(loss.backward());
        }
        let reduce = Instant::now();
        self.ranks
            .all_reduce_grads(&self.model.params, &mut grads)?;
        let reduce = reduce.elapsed().as_secs_f64();
        let mut total = [loss_sum];
        self.ranks.sum(&mut total)?;
        let [loss_sum] = total;
        self.state.micro_step += micro.len() as u64;
        self.state.num_tokens += seen;
        let lr = self.schedule.lr(self.state.step as usize);
        self.optimizer.config.lr = lr;
        let stats = self.optimizer.step(&mut self.model.params, &mut grads);
        self.state.step += 1;
        let elapsed = started.elapsed().as_secs_f64();
        let mut values = acc.means();
        values.extend([
            ("loss".to_owned(), loss_sum),
            ("grad_norm".to_owned(), stats.grad_norm),
            ("learning_rate".to_owned(), lr),
            ("num_tokens".to_owned(), self.state.num_tokens as f64),
            ("step_time".to_owned(), elapsed),
            (
                "tokens_per_second".to_owned(),
                seen as f64 / elapsed.max(1e-9),
            ),
            (
                "epoch".to_owned(),
                (self.state.micro_step * bs) as f64 / self.examples.len() as f64,
            ),
        ]);
        if self.ranks.world_size() > 1 {
            // The collective's share of the step (swerve's own metric; several ranks only).
            values.insert("allreduce_time".to_owned(), reduce);
        }
        Ok(StepMetrics {
            step: self.state.step,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use serde_json::json;
    use swerve_swebench::Instance;

    use super::*;
    use crate::data::{PromptStyle, Prompter, gold_examples};
    use crate::prompt::PromptFormat;

    const BOS: u32 = 3;

    /// A chat template writes the BOS itself; the tokenizer's post-processor must not add a
    /// second one (Llama 3's `{{ bos_token }}` with its `TemplateProcessing`).
    #[test]
    fn a_chat_template_prompt_starts_with_one_bos() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
        let dir = tempfile::tempdir().unwrap();
        // The fixture's word-level tokenizer with `w0` (id 3) as a BOS its post-processor adds.
        let mut tokenizer: serde_json::Value =
            serde_json::from_str(&fs_err::read_to_string(fixture.join("tokenizer.json")).unwrap())
                .unwrap();
        let bos = json!({"SpecialToken": {"id": "w0", "type_id": 0}});
        tokenizer["post_processor"] = json!({
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"w0": {"id": "w0", "ids": [BOS], "tokens": ["w0"]}},
        });
        fs_err::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let config = json!({
            "chat_template": "{{ bos_token }}{% for m in messages %} {{ m.content }}{% endfor %}",
            "bos_token": "w0",
            "eos_token": "<eos>",
        });
        fs_err::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
        let tokenizer = Tokenizer::from_file(&dir.path().join("tokenizer.json")).unwrap();
        assert_eq!(tokenizer.encode("w5", true).unwrap(), [BOS, 8]);

        let task = Instance {
            instance_id: "o__r-1".into(),
            problem_statement: Some("w5 w6".into()),
            code_context: BTreeMap::from([("m.py".to_owned(), "w7\n".to_owned())]),
            oracle_new_content: BTreeMap::from([("m.py".to_owned(), "w8\n".to_owned())]),
            ..Instance::default()
        };
        let style = PromptStyle {
            format: PromptFormat::Template,
            focus: None,
        };
        let prompter = Prompter::for_model(style, dir.path()).unwrap();
        let mut examples = gold_examples(&[task], &prompter).unwrap();
        assert!(
            examples[0].prompt.starts_with("w0 "),
            "{}",
            examples[0].prompt
        );
        // A plain prompt/completion pair still gets the tokenizer's BOS.
        examples.push(SftExample {
            prompt: "w5 w6".into(),
            completion: "w9".into(),
            add_special_tokens: true,
        });
        let model = CausalLm::<f32, Cpu>::load(&fixture, &Cpu::default()).unwrap();
        let trainer = SftTrainer::new(
            SftConfig::default(),
            &examples,
            &tokenizer,
            model,
            None,
            Ranks::single(),
        )
        .unwrap();
        let templated = &trainer.examples[0].0;
        assert_eq!(templated[0], BOS);
        assert_ne!(templated[1], BOS, "two BOS tokens: {templated:?}");
        assert_eq!(trainer.examples[1].0, [BOS, 8, 9]);
    }
}
