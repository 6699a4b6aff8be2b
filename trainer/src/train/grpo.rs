//! The GRPO training loop (grpo.md §1): sample G completions per prompt with the policy, score
//! them with the reward functions, turn rewards into group advantages, and update the policy
//! with the clipped, optionally KL-penalised objective of [`super::objective`], normalised by
//! the configured `loss_type`.
//!
//! The loop follows TRL's schedule of micro-steps. A generation batch of
//! `generation_batch_size` completions is sampled every `steps_per_generation × num_iterations`
//! micro-steps, shuffled and split into `steps_per_generation` micro-batches, and replayed
//! `num_iterations` (μ) times; an optimiser step follows every `gradient_accumulation_steps`
//! micro-batches. Old log-probs are computed right after generation only when the data is
//! reused after an optimiser step (`gradient_accumulation_steps % (steps_per_generation × μ) !=
//! 0`); otherwise the ratio is taken against the detached current log-probs (§8). Reference
//! log-probs are computed only when β > 0, with the frozen initial weights.
//!
//! Reproducibility: every random choice (the prompt order of each epoch, the sampling of each
//! generation batch, the shuffle of each generation batch) draws from a generator seeded with
//! `seed` and the counter of that epoch or batch, so a run is a function of its seed, and a run
//! resumed from a checkpoint continues exactly as the uninterrupted run would have. Checkpoints
//! are therefore only taken at steps where no generation batch is half used.

use std::collections::BTreeMap;
use std::time::Instant;

use dfdx::prelude::*;
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use swerve_host::{Execution, Sample};

use super::batch::{Packed, pack};
use super::data::{PromptStyle, TaskRow};
use super::metrics_log::StepMetrics;
use super::objective::{MicroBatch, ObjectiveSums, grpo_loss};
use super::patch::completion_patch;
use super::rewards::{Executor, PendingExecution, RewardFunctions};
use super::schedule::Schedule;
use super::state::RunState;
use super::{MetricsAccumulator, RunOutput, derive_seed};
use crate::error::{Error, Result};
use crate::generate::{SamplingConfig, generate_streaming};
use crate::grpo::advantages::TRL_STD_EPS;
use crate::grpo::config::MultiObjectiveAggregation;
use crate::grpo::loss::ObjectiveParams;
use crate::grpo::metrics::{completion_metrics, reward_metrics};
use crate::grpo::{GroupStats, GrpoConfig, rewards};
use crate::model::{AdamW, AdamWConfig, CausalLm, Kernels};
use crate::tokenizer::Tokenizer;

/// Seed streams: each kind of random choice has its own generator.
const STREAM_PROMPTS: u64 = 1;
const STREAM_SAMPLING: u64 = 2;
const STREAM_SHUFFLE: u64 = 3;

/// What a GRPO run works on: the tasks, how they become prompts, and who scores the answers.
pub struct GrpoInputs<'a> {
    /// The tasks (one prompt each).
    pub tasks: &'a [TaskRow],
    /// How a task becomes a prompt.
    pub prompt_style: PromptStyle,
    /// The policy's tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// The reward functions.
    pub rewards: &'a dyn RewardFunctions,
    /// Runs each completion's patch first when given (`--execute`), filling `Sample.execution`.
    pub executor: Option<&'a dyn Executor>,
}

/// One micro-batch of a generation batch, with everything its loss needs.
struct BufferedMicroBatch {
    packed: Packed,
    /// `[rows, completion_len]` after `mask_truncated_completions`.
    mask: Vec<f64>,
    weights: Vec<f64>,
    advantages: Vec<f64>,
    old_logps: Option<Vec<f64>>,
    ref_logps: Option<Vec<f64>>,
}

/// A GRPO run in progress: the policy, the optimiser, the frozen reference and the counters.
pub struct GrpoTrainer<'a, D: Kernels<f32>> {
    config: GrpoConfig,
    inputs: GrpoInputs<'a>,
    prompts: Vec<Vec<u32>>,
    /// The policy being trained.
    pub policy: CausalLm<f32, D>,
    reference: Option<CausalLm<f32, D>>,
    /// Its optimiser.
    pub optimizer: AdamW<f32, D>,
    /// Where the run stands.
    pub state: RunState,
    schedule: Schedule,
    pad: u32,
    buffer: Vec<BufferedMicroBatch>,
}

impl<'a, D: Kernels<f32>> GrpoTrainer<'a, D> {
    /// Prepares a run of `policy` (with a fresh optimiser, or the `resume` optimiser and state
    /// of a checkpoint). The frozen reference is a copy of `initial`, the weights the run
    /// started from, and is kept only when β > 0.
    pub fn new(
        config: GrpoConfig,
        inputs: GrpoInputs<'a>,
        policy: CausalLm<f32, D>,
        initial: &CausalLm<f32, D>,
        resume: Option<(AdamW<f32, D>, RunState)>,
    ) -> Result<Self> {
        config.validate().map_err(Error::GrpoConfig)?;
        check_supported(&config)?;
        if inputs.tasks.is_empty() {
            return Err(Error::Training {
                reason: "no tasks to train on".into(),
            });
        }
        let names = inputs.rewards.names();
        if names.is_empty() {
            return Err(Error::Training {
                reason: "GRPO needs at least one reward function".into(),
            });
        }
        let prompts = inputs
            .tasks
            .iter()
            .map(|t| {
                inputs
                    .tokenizer
                    .encode(&inputs.prompt_style.render(t), true)
            })
            .collect::<Result<Vec<_>>>()?;
        let generate_every = generate_every(&config);
        let total_steps = total_steps(&config, inputs.tasks.len());
        let (optimizer, state) = match resume {
            Some((mut optimizer, state)) => {
                if state.kind != "grpo" || state.micro_step % generate_every != 0 {
                    return Err(Error::Training {
                        reason: format!(
                            "cannot resume a `{}` checkpoint at micro-step {} (GRPO resumes \
                             only between generation batches)",
                            state.kind, state.micro_step
                        ),
                    });
                }
                optimizer.config = adamw_config(&config);
                (optimizer, state)
            }
            None => (
                AdamW::new(adamw_config(&config)),
                RunState {
                    kind: "grpo".into(),
                    total_steps: total_steps as u64,
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
        let pad = pad_token(&policy);
        let reference = (config.beta > 0.0).then(|| initial.clone());
        Ok(Self {
            config,
            inputs,
            prompts,
            policy,
            reference,
            optimizer,
            state,
            schedule,
            pad,
            buffer: Vec::new(),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &GrpoConfig {
        &self.config
    }

    /// Whether every planned step has been taken.
    pub fn finished(&self) -> bool {
        self.state.step >= self.state.total_steps
    }

    /// Runs the remaining steps, appending each step's metrics to `output`'s log, calling
    /// `on_step` after each, and checkpointing as `output` says (always after the last step).
    pub fn train(
        &mut self,
        output: &mut RunOutput,
        on_step: &mut dyn FnMut(&StepMetrics, &RunState),
    ) -> Result<()> {
        while !self.finished() {
            let metrics = self.step()?;
            output.metrics.append(&metrics)?;
            on_step(&metrics, &self.state);
            let at_boundary = self
                .state
                .micro_step
                .is_multiple_of(generate_every(&self.config));
            if at_boundary && (output.due(self.state.step) || self.finished()) {
                output.save(&self.policy, &self.optimizer, &self.state)?;
            }
        }
        Ok(())
    }

    /// One optimiser step: `gradient_accumulation_steps` micro-batches (generating when the
    /// buffer runs out), clipping and AdamW. Returns the step's metrics.
    pub fn step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let tokens_before = self.state.num_tokens;
        let mut acc = MetricsAccumulator::default();
        let mut grads = self.policy.params.alloc_grads();
        let mut loss = 0.0;
        let spg = self.config.steps_per_generation();
        for _ in 0..self.config.gradient_accumulation_steps {
            if self
                .state
                .micro_step
                .is_multiple_of(generate_every(&self.config))
            {
                self.generate_batch(&mut acc)?;
            }
            let index = (self.state.micro_step % spg as u64) as usize;
            let (value, new_grads) = self.micro_step(index, grads, &mut acc)?;
            grads = new_grads;
            loss += value;
            self.state.micro_step += 1;
        }
        let lr = self.schedule.lr(self.state.step as usize);
        self.optimizer.config.lr = lr;
        let stats = self.optimizer.step(&mut self.policy.params, &mut grads);
        self.state.step += 1;
        let elapsed = started.elapsed().as_secs_f64();
        let mut values = acc.means();
        let tokens = (self.state.num_tokens - tokens_before) as f64;
        values.extend([
            ("loss".to_owned(), loss),
            ("grad_norm".to_owned(), stats.grad_norm),
            ("learning_rate".to_owned(), lr),
            ("num_tokens".to_owned(), self.state.num_tokens as f64),
            ("step_time".to_owned(), elapsed),
            ("tokens_per_second".to_owned(), tokens / elapsed.max(1e-9)),
            (
                "epoch".to_owned(),
                (self.state.generation * self.prompts_per_generation() as u64) as f64
                    / self.inputs.tasks.len() as f64,
            ),
        ]);
        Ok(StepMetrics {
            step: self.state.step,
            values,
        })
    }

    fn prompts_per_generation(&self) -> usize {
        self.config.generation_batch_size() / self.config.num_generations
    }

    /// The task of the `k`-th prompt of the run: epoch by epoch, each a seeded permutation.
    fn task_of(&self, k: u64) -> usize {
        let n = self.inputs.tasks.len() as u64;
        let mut order: Vec<usize> = (0..n as usize).collect();
        let mut rng = StdRng::seed_from_u64(derive_seed(self.config.seed, STREAM_PROMPTS, k / n));
        order.shuffle(&mut rng);
        order[(k % n) as usize]
    }

    /// Samples, scores and buffers one generation batch; records the reward and completion
    /// metrics in `acc`.
    fn generate_batch(&mut self, acc: &mut MetricsAccumulator) -> Result<()> {
        let g = self.config.num_generations;
        let per_gen = self.prompts_per_generation();
        let first = self.state.generation * per_gen as u64;
        let tasks: Vec<usize> = (0..per_gen as u64)
            .flat_map(|j| std::iter::repeat_n(self.task_of(first + j), g))
            .collect();
        let prompts: Vec<Vec<u32>> = tasks.iter().map(|&t| self.prompts[t].clone()).collect();
        let sampling = SamplingConfig {
            temperature: self.config.temperature,
            top_p: self.config.top_p,
            top_k: self.config.top_k,
            max_new_tokens: self.config.max_completion_length,
            eos_token_ids: self.policy.config.eos_token_ids.clone(),
            pad_token_id: self.pad,
            seed: derive_seed(self.config.seed, STREAM_SAMPLING, self.state.generation),
        };
        // Each completion goes to the executor (when there is one) as soon as it is final, so
        // that its sandbox runs while the other rows are still being sampled.
        let mut pending: Vec<Option<PendingExecution>> = (0..tasks.len()).map(|_| None).collect();
        let mut decode_error = None;
        let generation = {
            let tokenizer = self.inputs.tokenizer;
            let executor = self.inputs.executor;
            let all_tasks = self.inputs.tasks;
            let mut on_done = |row: usize, completion: &[u32]| {
                let Some(executor) = executor else { return };
                match tokenizer.decode(completion, true) {
                    Ok(text) => {
                        let task = &all_tasks[tasks[row]];
                        let patch = completion_patch(task, &text).unwrap_or_default();
                        pending[row] = Some(executor.submit(task, &patch));
                    }
                    Err(e) => decode_error = Some(e),
                }
            };
            generate_streaming(&self.policy, &prompts, &sampling, &mut on_done)?
        };
        if let Some(e) = decode_error {
            return Err(e);
        }
        let texts = generation
            .completions
            .iter()
            .map(|c| self.inputs.tokenizer.decode(c, true))
            .collect::<Result<Vec<_>>>()?;

        // Rewards.
        let samples: Vec<Sample> = tasks
            .iter()
            .zip(&texts)
            .zip(pending)
            .enumerate()
            .map(|(i, ((&t, text), execution))| {
                self.sample(t, i, text, execution.map(PendingExecution::wait))
            })
            .collect();
        let per_func = self.inputs.rewards.score(&samples)?;
        let weights = self.inputs.rewards.weights();
        rewards::check_shape(&per_func, &weights).map_err(Error::GrpoConfig)?;
        let aggregated = rewards::aggregate(&per_func, &weights);
        let stats = GroupStats::new(&aggregated, g).map_err(Error::GrpoConfig)?;
        let advantages = stats.advantages(self.config.scale_rewards, TRL_STD_EPS);
        let lengths: Vec<usize> = generation.completions.iter().map(Vec::len).collect();
        let truncated: Vec<bool> = generation.finished.iter().map(|f| !f).collect();
        acc.record_all(reward_metrics(
            &stats,
            &per_func,
            &self.inputs.rewards.names(),
        ));
        acc.record_all(completion_metrics(&lengths, &truncated).map_err(Error::GrpoConfig)?);
        self.state.num_tokens += prompts
            .iter()
            .chain(&generation.completions)
            .map(|s| s.len() as u64)
            .sum::<u64>();

        // Masks and the dapo normaliser over the whole generation batch.
        let mask_truncated = self.config.mask_truncated_completions;
        let masked = |i: usize| mask_truncated && truncated[i];
        let num_items: f64 = (0..tasks.len())
            .filter(|&i| !masked(i))
            .map(|i| lengths[i] as f64)
            .sum();
        let norm = self.config.normalisation(num_items, 1);

        // Shuffle and split into micro-batches.
        let mut order: Vec<usize> = (0..tasks.len()).collect();
        let mut rng = StdRng::seed_from_u64(derive_seed(
            self.config.seed,
            STREAM_SHUFFLE,
            self.state.generation,
        ));
        order.shuffle(&mut rng);
        let bs = self.config.per_device_train_batch_size;
        let need_old = need_old_logps(&self.config);
        self.buffer.clear();
        for rows in order.chunks(bs) {
            let pairs: Vec<(&[u32], &[u32])> = rows
                .iter()
                .map(|&i| (prompts[i].as_slice(), generation.completions[i].as_slice()))
                .collect();
            let packed = pack(&pairs, self.pad)?;
            let c = packed.completion_len;
            let mut mask = packed.completion_mask.clone();
            for (r, &i) in rows.iter().enumerate() {
                if masked(i) {
                    mask[r * c..(r + 1) * c].iter_mut().for_each(|m| *m = 0.0);
                }
            }
            let mask_rows: Vec<Vec<f64>> = mask.chunks(c).map(<[f64]>::to_vec).collect();
            let weights = norm
                .token_weights(self.config.loss_type, &mask_rows)
                .concat();
            let temperature = self.config.temperature;
            let logps_of = |model: &CausalLm<f32, D>| -> Result<Vec<f64>> {
                let out = model.token_logps_no_grad(
                    &packed.batch,
                    packed.completion_start,
                    temperature,
                )?;
                Ok(out.logps.as_vec().into_iter().map(f64::from).collect())
            };
            let old_logps = need_old.then(|| logps_of(&self.policy)).transpose()?;
            let ref_logps = self.reference.as_ref().map(logps_of).transpose()?;
            self.buffer.push(BufferedMicroBatch {
                advantages: rows.iter().map(|&i| advantages[i]).collect(),
                packed,
                mask,
                weights,
                old_logps,
                ref_logps,
            });
        }
        self.state.generation += 1;
        Ok(())
    }

    /// The reward sample of completion `index` (of task `task`), with its execution result
    /// when it was executed.
    fn sample(
        &self,
        task: usize,
        index: usize,
        completion: &str,
        execution: Option<Execution>,
    ) -> Sample {
        let row = &self.inputs.tasks[task];
        Sample {
            id: format!("{}:{}:{index}", row.instance_id, self.state.generation),
            prompt: self.inputs.prompt_style.render(row),
            completion: completion.to_owned(),
            code_context: row.code_context.clone(),
            oracle_new_content: row.oracle_new_content.clone(),
            reference_patch: row.patch.clone(),
            execution,
            metadata: BTreeMap::from([("instance_id".to_owned(), row.instance_id.clone())]),
        }
    }

    /// Forward, loss and backward of buffered micro-batch `index`; returns the loss value and
    /// the accumulated parameter gradients.
    fn micro_step(
        &self,
        index: usize,
        grads: Gradients<f32, D>,
        acc: &mut MetricsAccumulator,
    ) -> Result<(f64, Gradients<f32, D>)> {
        let mb = &self.buffer[index];
        let out = self.policy.token_logps(
            &mb.packed.batch,
            mb.packed.completion_start,
            self.config.temperature,
            grads,
        )?;
        let entropy = out.entropy.as_vec();
        let batch = MicroBatch {
            old_logps: mb.old_logps.as_deref(),
            ref_logps: mb.ref_logps.as_deref(),
            advantages: &mb.advantages,
            mask: &mb.mask,
            weights: &mb.weights,
        };
        let params = self.config.objective_params();
        let (loss, sums) = grpo_loss(out.logps, &batch, &params)?;
        let value = f64::from(loss.as_vec()[0]);
        let grads = self.policy.params.keep_param_grads(loss.backward());
        record_loss_metrics(acc, &sums, &params, &entropy, &mb.mask);
        Ok((value, grads))
    }
}

/// TRL's per-micro-batch loss metrics: masked means, averaged over micro-batches at logging.
fn record_loss_metrics(
    acc: &mut MetricsAccumulator,
    sums: &ObjectiveSums,
    params: &ObjectiveParams,
    entropy: &[f32],
    mask: &[f64],
) {
    let tokens = sums.tokens;
    let share = |x: f64| if tokens > 0.0 { x / tokens } else { f64::NAN };
    acc.record("clip_ratio/low_mean", share(sums.low_clipped));
    acc.record("clip_ratio/low_min", share(sums.low_clipped));
    acc.record("clip_ratio/high_mean", share(sums.high_clipped));
    acc.record("clip_ratio/high_max", share(sums.high_clipped));
    acc.record(
        "clip_ratio/region_mean",
        share(sums.low_clipped + sums.high_clipped),
    );
    if params.kl.is_some() {
        acc.record("kl", share(sums.kl));
    }
    let entropy_sum: f64 = entropy
        .iter()
        .zip(mask)
        .map(|(&e, &m)| f64::from(e) * m)
        .sum();
    acc.record("entropy", share(entropy_sum));
}

/// The padding id: the config's `pad_token_id`, else its first EOS id, else 0. Padding is
/// always masked, so the choice only has to be a valid id.
pub fn pad_token<D: Kernels<f32>>(model: &CausalLm<f32, D>) -> u32 {
    model
        .config
        .raw
        .get("pad_token_id")
        .and_then(serde_json::Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .or(model.config.eos_token_ids.first().copied())
        .unwrap_or(0)
}

/// Micro-steps between two generation batches: `steps_per_generation × num_iterations`.
pub fn generate_every(config: &GrpoConfig) -> u64 {
    (config.steps_per_generation() * config.num_iterations) as u64
}

/// Whether old log-probs are stored at generation time (grpo.md §8).
pub fn need_old_logps(config: &GrpoConfig) -> bool {
    !(config.gradient_accumulation_steps as u64).is_multiple_of(generate_every(config))
}

/// The run's optimiser steps: `max_steps`, or enough for `num_train_epochs` passes over the
/// tasks (each generation batch serving `steps_per_generation × μ / GAS` steps).
pub fn total_steps(config: &GrpoConfig, tasks: usize) -> usize {
    if config.max_steps > 0 {
        return config.max_steps as usize;
    }
    let per_gen = (config.generation_batch_size() / config.num_generations) as f64;
    let steps_per_batch = generate_every(config) as f64 / config.gradient_accumulation_steps as f64;
    ((config.num_train_epochs * tasks as f64 / per_gen * steps_per_batch).ceil() as usize).max(1)
}

/// AdamW from TRL's names.
pub fn adamw_config(config: &GrpoConfig) -> AdamWConfig {
    AdamWConfig {
        lr: config.learning_rate,
        beta1: config.adam_beta1,
        beta2: config.adam_beta2,
        eps: config.adam_epsilon,
        weight_decay: config.weight_decay,
        max_grad_norm: (config.max_grad_norm > 0.0).then_some(config.max_grad_norm),
    }
}

/// Rejects the TRL settings that validate but that this trainer does not implement yet, so
/// that none is silently ignored.
fn check_supported(config: &GrpoConfig) -> Result<()> {
    let unsupported = [
        ("min_p", config.min_p.is_some()),
        ("repetition_penalty", config.repetition_penalty != 1.0),
        ("top_entropy_quantile", config.top_entropy_quantile != 1.0),
        ("entropy_coef", config.entropy_coef != 0.0),
        ("sync_ref_model", config.sync_ref_model),
        (
            "multi_objective_aggregation",
            config.multi_objective_aggregation != MultiObjectiveAggregation::SumThenNormalize,
        ),
    ];
    match unsupported.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Error::Training {
            reason: format!("`{field}` is not supported by swerve's trainer yet; leave it unset"),
        }),
        None => Ok(()),
    }
}
