//! The GRPO training loop, as TRL's `GRPOTrainer` runs it: sample G completions per prompt with the policy, score
//! them with the reward functions, turn rewards into group advantages, and update the policy
//! with the clipped, optionally KL-penalised objective of [`crate::train::grpo_objective`], normalised by
//! the configured `loss_type`. [`Grpo`] is the loop's `Objective`; the training driver
//! (`crate::train::driver`) runs its steps, logs and checkpoints them.
//!
//! The loop follows TRL's schedule of micro-steps. A generation batch of
//! `generation_batch_size` completions is sampled every `steps_per_generation × num_iterations`
//! micro-steps, shuffled and split into `steps_per_generation` micro-batches, and replayed
//! `num_iterations` (μ) times; an optimiser step follows every `gradient_accumulation_steps`
//! micro-batches. Old log-probs are computed right after generation only when the data is
//! reused after an optimiser step (`gradient_accumulation_steps % (steps_per_generation × μ) !=
//! 0`); otherwise the ratio is taken against the detached current log-probs. Reference
//! log-probs are computed only when β > 0, with the frozen initial weights.
//!
//! Data-parallel ranks ([`crate::ranks`]) train as one process with the same global batch would:
//! the prompts of a generation batch are dealt to ranks in whole groups; each rank samples (row
//! by row from the row's own generator), executes and scores its share; the completions and
//! rewards are gathered, so that every rank computes the group statistics, advantages, metrics
//! and loss normalisers of the whole batch; every micro-batch is the one process's micro-batch
//! of `per_device_train_batch_size × ranks` rows, of which each rank computes its own
//! `per_device_train_batch_size` rows with token weights of the whole micro-batch; and the
//! gradients are summed over ranks before clipping and AdamW, so that every rank holds the same
//! parameters after every step. Rank 0 alone writes the run's files.
//!
//! Reproducibility: every random choice (the prompt order of each epoch, the sampling of each
//! generation batch, the shuffle of each generation batch) draws from a generator seeded with
//! `seed` and the counter of that epoch or batch, so a run is a function of its seed, and a run
//! resumed from a checkpoint continues exactly as the uninterrupted run would have. Checkpoints
//! are therefore only taken at steps where no generation batch is half used.

use std::collections::BTreeMap;

use dfdx::prelude::*;
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use swerve_host::{Execution, Sample};

use crate::checkpoint::RunState;
use crate::data::Prompter;
use crate::error::{Error, Result};
use crate::generate::{Generation, SamplingConfig, generate, generate_streaming};
use crate::grpo::advantages::{TRL_STD_EPS, batch_advantages};
use crate::grpo::loss::{MetricSums, MicroBatchScope, ObjectiveParams, entropy_threshold};
use crate::grpo::metrics::{completion_metrics, reward_metrics};
use crate::grpo::{GrpoConfig, GrpoError, Normalisation, aggregation};
use crate::model::{CausalLm, Kernels, ModelParams};
use crate::predict::patch::completion_patch;
use crate::ranks::Ranks;
use crate::report::plot;
use crate::tokenizer::Tokenizer;
use crate::train::arguments::TrainingArguments;
use crate::train::batch::{Packed, pack_to, pad_token};
use crate::train::derive_seed;
use crate::train::driver::{Objective, Resume, RunError, StepContext, Trainer};
use crate::train::grpo_objective::{MicroBatch, grpo_loss};
use crate::train::plan::PlanInputs;
use crate::train::rewards::{Executor, PendingExecution, RewardFunctions};
use swerve_swebench::Instance;

/// Seed streams: each kind of random choice has its own generator.
const STREAM_PROMPTS: u64 = 1;
const STREAM_SAMPLING: u64 = 2;
const STREAM_SHUFFLE: u64 = 3;

/// What a GRPO run works on: the tasks, how they become prompts, and who scores the answers.
pub struct GrpoInputs<'a> {
    /// The tasks (one prompt each).
    pub tasks: &'a [Instance],
    /// How a task becomes a prompt.
    pub prompter: Prompter,
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

/// A sampled and scored generation batch, row by row (row `i` is completion `i % G` of the
/// batch's prompt `i / G`), before it is shuffled into micro-batches.
struct ScoredBatch {
    prompts: Vec<Vec<u32>>,
    completions: Vec<Vec<u32>>,
    advantages: Vec<f64>,
    /// Rows the loss ignores ([`Grpo::loss_masked`]).
    masked: Vec<bool>,
}

/// `--execute`: hands each completion's patch to the executor as soon as sampling reports the
/// completion final, and keeps the pending executions in row order.
struct ExecutionSubmitter<'s> {
    executor: &'s dyn Executor,
    inputs: &'s GrpoInputs<'s>,
    /// The task of each row.
    tasks: &'s [usize],
    pending: Vec<Option<PendingExecution>>,
    /// The error of the last completion that could not be decoded: sampling cannot be stopped
    /// from its callback, so the error is reported once sampling returns.
    decode_error: Option<Error>,
}

impl<'s> ExecutionSubmitter<'s> {
    fn new(executor: &'s dyn Executor, inputs: &'s GrpoInputs<'s>, tasks: &'s [usize]) -> Self {
        Self {
            executor,
            inputs,
            tasks,
            pending: (0..tasks.len()).map(|_| None).collect(),
            decode_error: None,
        }
    }

    /// Starts executing the patch of `row`'s final `completion`.
    fn submit(&mut self, row: usize, completion: &[u32]) {
        match self.inputs.tokenizer.decode(completion, true) {
            Ok(text) => {
                let task = &self.inputs.tasks[self.tasks[row]];
                let patch = completion_patch(task, &text).unwrap_or_default();
                self.pending[row] = Some(self.executor.submit(task, &patch));
            }
            Err(e) => self.decode_error = Some(e),
        }
    }

    /// The pending execution of every row, or the decoding error.
    fn finish(self) -> Result<Vec<Option<PendingExecution>>> {
        match self.decode_error {
            Some(e) => Err(e),
            None => Ok(self.pending),
        }
    }
}

/// GRPO as an `Objective` of the training driver: the tasks and their prompts, the frozen (or
/// synced) reference, and the buffered micro-batches of the current generation batch.
pub struct Grpo<'a, D: Kernels<f32>> {
    config: GrpoConfig,
    inputs: GrpoInputs<'a>,
    /// Each task's prompt as text (what reward plugins see), rendered once.
    prompt_texts: Vec<String>,
    /// The same prompts as token ids.
    prompts: Vec<Vec<u32>>,
    reference: Option<CausalLm<f32, D>>,
    pad: u32,
    buffer: Vec<BufferedMicroBatch>,
    /// The adaptive entropy controller's window of the step in progress: Σ H·M' and Σ M'.
    window: [f64; 2],
}

/// A GRPO run in progress: the policy, the optimiser, the frozen reference and the counters.
pub type GrpoTrainer<'a, D> = Trainer<D, Grpo<'a, D>>;

impl<'a, D: Kernels<f32>> GrpoTrainer<'a, D> {
    /// Prepares a GRPO run of `policy` on `ranks` (this process is one of them;
    /// [`Ranks::single`] alone), with a fresh optimiser, or the `resume` optimiser and state of
    /// a checkpoint. `reference` is the frozen reference, the weights the run started from:
    /// needed when β > 0 (an error without it), dropped unused when β = 0, where TRL loads no
    /// reference model either (pass `None` then, so that no copy is ever made).
    pub fn new(
        config: GrpoConfig,
        inputs: GrpoInputs<'a>,
        policy: CausalLm<f32, D>,
        reference: Option<CausalLm<f32, D>>,
        resume: Option<Resume<D>>,
        ranks: Ranks,
    ) -> Result<Self> {
        let objective = Grpo::new(config, inputs, &policy, reference, &ranks)?;
        Trainer::with_objective(objective, policy, resume, ranks)
    }
}

impl<'a, D: Kernels<f32>> Grpo<'a, D> {
    /// Checks the settings for a run on `ranks` and renders every task's prompt for `policy`.
    /// `reference`: as `GrpoTrainer::new` takes it.
    pub fn new(
        mut config: GrpoConfig,
        inputs: GrpoInputs<'a>,
        policy: &CausalLm<f32, D>,
        reference: Option<CausalLm<f32, D>>,
        ranks: &Ranks,
    ) -> Result<Self> {
        config.num_processes = ranks.world_size();
        config.validate().map_err(Error::GrpoConfig)?;
        check_supported(&config)?;
        if config.bf16 {
            tracing::warn!(
                "bf16 = true: dfdx 0.13 has no bf16 arithmetic, so training runs in f32 \
                 (set bf16 = false to silence this)"
            );
        }
        if config.beta > 0.0 && reference.is_none() {
            return Err(Error::Run(RunError::NoReference { beta: config.beta }));
        }
        if inputs.tasks.is_empty() {
            return Err(Error::Run(RunError::NoTasks));
        }
        if inputs.rewards.names().is_empty() {
            return Err(Error::Run(RunError::NoRewardFunctions));
        }
        let prompt_texts = inputs
            .tasks
            .iter()
            .map(|t| inputs.prompter.render(t))
            .collect::<Result<Vec<_>>>()?;
        let add_special_tokens = inputs.prompter.add_special_tokens();
        let prompts = prompt_texts
            .iter()
            .map(|p| inputs.tokenizer.encode(p, add_special_tokens))
            .collect::<Result<Vec<_>>>()?;
        let reference = reference.filter(|_| config.beta > 0.0);
        Ok(Self {
            pad: pad_token(policy),
            config,
            inputs,
            prompt_texts,
            prompts,
            reference,
            buffer: Vec::new(),
            window: [0.0, 0.0],
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &GrpoConfig {
        &self.config
    }
}

impl<D: Kernels<f32>> Objective<D> for Grpo<'_, D> {
    const KIND: &'static str = "grpo";
    const PLOTS: &'static [&'static str] = &plot::GRPO_PLOTS;

    fn arguments(&self) -> &TrainingArguments {
        &self.config.training
    }

    /// `max_steps`, or enough for `num_train_epochs` passes over the tasks ([`total_steps`]).
    fn total_steps(&self, _world_size: usize) -> u64 {
        total_steps(&self.config, self.inputs.tasks.len())
    }

    /// GRPO resumes only between generation batches: the buffered one is not in a checkpoint.
    fn check_resume(&self, state: &RunState) -> Result<()> {
        if self.resumable_at(state) {
            return Ok(());
        }
        Err(Error::Run(RunError::MidGeneration {
            micro_step: state.micro_step,
        }))
    }

    /// `gradient_accumulation_steps` micro-batches, generating a batch whenever the buffer runs
    /// out.
    fn accumulate(
        &mut self,
        mut cx: StepContext<'_, D>,
        mut grads: Gradients<f32, D>,
    ) -> Result<(f64, Gradients<f32, D>)> {
        let mut loss = 0.0;
        let spg = self.config.steps_per_generation();
        self.window = [0.0, 0.0];
        for _ in 0..self.config.training.gradient_accumulation_steps {
            if cx
                .state
                .micro_step
                .is_multiple_of(generate_every(&self.config))
            {
                self.generate_batch(&mut cx)?;
            }
            let index = (cx.state.micro_step % spg as u64) as usize;
            let (value, new_grads, bonus) = self.micro_step(index, grads, &mut cx)?;
            grads = new_grads;
            loss += value;
            self.window[0] += bonus[0];
            self.window[1] += bonus[1];
            cx.state.micro_step += 1;
        }
        Ok((loss, grads))
    }

    /// The adaptive entropy controller's update, and TR-DPO's reference update, after the step
    /// as TRL's SyncRefModelCallback does it.
    fn after_step(&mut self, cx: StepContext<'_, D>) -> Result<()> {
        self.update_entropy_coef(cx.state);
        if self.entropy_bonus() {
            cx.metrics
                .record("entropy_coef", self.entropy_coef(cx.state));
        }
        if self.config.sync_ref_model
            && cx
                .state
                .step
                .is_multiple_of(self.config.ref_model_sync_steps as u64)
            && let Some(reference) = self.reference.as_mut()
        {
            cx.model
                .params
                .mix_into(&mut reference.params, self.config.ref_model_mixup_alpha);
        }
        Ok(())
    }

    fn epoch(&self, state: &RunState) -> f64 {
        (state.generation * self.prompts_per_generation() as u64) as f64
            / self.inputs.tasks.len() as f64
    }

    /// Only between generation batches.
    fn resumable_at(&self, state: &RunState) -> bool {
        state
            .micro_step
            .is_multiple_of(generate_every(&self.config))
    }

    /// The reference weights when the run moves them (`sync_ref_model`).
    fn checkpoint_reference(&self) -> Option<&ModelParams<f32, D>> {
        self.reference
            .as_ref()
            .filter(|_| self.config.sync_ref_model)
            .map(|r| &r.params)
    }

    /// Micro-batches of the longest prompt and a full-length completion, and this rank's share
    /// of whole generation batches.
    fn plan_inputs(&self, model: PlanInputs, ranks: &Ranks) -> PlanInputs {
        let prompt = self.prompts.iter().map(Vec::len).max().unwrap_or(0);
        let completion = self.config.max_completion_length;
        PlanInputs {
            rows: self.config.training.per_device_train_batch_size,
            seq: prompt + completion,
            completion,
            reference: self.reference.is_some(),
            generation: Some((
                self.config
                    .generation_batch_size()
                    .div_ceil(ranks.world_size()),
                prompt + completion,
            )),
            ..model
        }
    }
}

impl<D: Kernels<f32>> Grpo<'_, D> {
    fn prompts_per_generation(&self) -> usize {
        self.config.generation_batch_size() / self.config.num_generations
    }

    /// The task of the `k`-th prompt of the run: epoch by epoch, each a seeded permutation.
    fn task_of(&self, k: u64) -> usize {
        let n = self.inputs.tasks.len() as u64;
        let mut order: Vec<usize> = (0..n as usize).collect();
        let mut rng = StdRng::seed_from_u64(derive_seed(
            self.config.training.seed,
            STREAM_PROMPTS,
            k / n,
        ));
        order.shuffle(&mut rng);
        order[(k % n) as usize]
    }

    /// Samples, scores and buffers one generation batch; records the reward and completion
    /// metrics.
    ///
    /// The phases run in this order (and draw their random numbers from their own seeded
    /// streams): sampling, scoring, the completion metrics, then the shuffle into micro-batches.
    ///
    /// With several ranks, this rank samples, executes and scores its share of the prompts
    /// ([`Ranks::share`], whole groups), and the completions and rewards of all shares are
    /// gathered in prompt order before anything else uses them.
    fn generate_batch(&mut self, cx: &mut StepContext<'_, D>) -> Result<()> {
        let tasks = self.batch_tasks(cx.state);
        let prompts: Vec<Vec<u32>> = tasks.iter().map(|&t| self.prompts[t].clone()).collect();
        let g = self.config.num_generations;
        let share = cx.ranks.share(tasks.len() / g);
        let rows = share.start * g..share.end * g;
        let (generation, executions) =
            self.sample_completions(cx, &tasks[rows.clone()], &prompts[rows.clone()], rows.start)?;
        let texts = generation
            .completions
            .iter()
            .map(|c| self.inputs.tokenizer.decode(c, true))
            .collect::<Result<Vec<_>>>()?;
        let per_func = self.score(cx, &tasks[rows.clone()], rows.start, &texts, executions)?;
        let (generation, per_func) = gather(cx.ranks, generation, per_func)?;
        let advantages = self.advantages(&per_func, cx)?;
        self.record_completions(&prompts, &generation, cx)?;
        let masked = self.loss_masked(&generation.finished);
        self.buffer_micro_batches(
            cx,
            &ScoredBatch {
                prompts,
                completions: generation.completions,
                advantages,
                masked,
            },
        )?;
        cx.state.generation += 1;
        Ok(())
    }

    /// The task of every row of the current generation batch: each of its prompts `G` times in
    /// a row.
    fn batch_tasks(&self, state: &RunState) -> Vec<usize> {
        let g = self.config.num_generations;
        let per_gen = self.prompts_per_generation();
        let first = state.generation * per_gen as u64;
        (0..per_gen as u64)
            .flat_map(|j| std::iter::repeat_n(self.task_of(first + j), g))
            .collect()
    }

    /// The sampling settings of the current generation batch, seeded with its counter.
    fn sampling_config(&self, cx: &StepContext<'_, D>) -> SamplingConfig {
        SamplingConfig {
            temperature: self.config.temperature,
            top_p: self.config.top_p,
            top_k: self.config.top_k,
            min_p: self.config.min_p,
            repetition_penalty: self.config.repetition_penalty,
            max_new_tokens: self.config.max_completion_length,
            eos_token_ids: cx.model.config.eos_token_ids.clone(),
            pad_token_id: self.pad,
            seed: derive_seed(
                self.config.training.seed,
                STREAM_SAMPLING,
                cx.state.generation,
            ),
            first_row: 0,
        }
    }

    /// Samples a completion for every row (`first_row` is the first row's index in the
    /// generation batch). With an executor (`--execute`), each completion goes to it as soon as
    /// it is final, so that its sandbox runs while the other rows are still being sampled;
    /// without one, the executions are all `None`.
    fn sample_completions(
        &self,
        cx: &StepContext<'_, D>,
        tasks: &[usize],
        prompts: &[Vec<u32>],
        first_row: usize,
    ) -> Result<(Generation, Vec<Option<PendingExecution>>)> {
        let sampling = SamplingConfig {
            first_row: first_row as u64,
            ..self.sampling_config(cx)
        };
        let Some(executor) = self.inputs.executor else {
            let generation = generate(cx.model, prompts, &sampling)?;
            return Ok((generation, (0..tasks.len()).map(|_| None).collect()));
        };
        let mut submitter = ExecutionSubmitter::new(executor, &self.inputs, tasks);
        let generation = generate_streaming(cx.model, prompts, &sampling, &mut |row, c| {
            submitter.submit(row, c)
        })?;
        Ok((generation, submitter.finish()?))
    }

    /// Scores every row (the first is row `first_row` of the generation batch) with the reward
    /// functions, waiting for its execution first when it has one: `result[i][k]` is function
    /// `k`'s reward for row `i`.
    fn score(
        &self,
        cx: &StepContext<'_, D>,
        tasks: &[usize],
        first_row: usize,
        texts: &[String],
        executions: Vec<Option<PendingExecution>>,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        let samples: Vec<Sample> = tasks
            .iter()
            .zip(texts)
            .zip(executions)
            .enumerate()
            .map(|(i, ((&t, text), execution))| {
                let execution = execution.map(PendingExecution::wait).transpose()?;
                Ok(self.sample(cx.state.generation, t, first_row + i, text, execution))
            })
            .collect::<Result<_>>()?;
        let per_func = self.inputs.rewards.score(&samples)?;
        aggregation::check_shape(&per_func, &self.inputs.rewards.weights())
            .map_err(|e| batch_error(cx.state, e))?;
        Ok(per_func)
    }

    /// Turns the whole batch's rewards into advantages (`multi_objective_aggregation`,
    /// `scale_rewards`); records the reward metrics.
    fn advantages(
        &self,
        per_func: &[Vec<Option<f64>>],
        cx: &mut StepContext<'_, D>,
    ) -> Result<Vec<f64>> {
        let weights = self.inputs.rewards.weights();
        let (stats, advantages) = batch_advantages(
            per_func,
            &weights,
            self.config.num_generations,
            self.config.scale_rewards,
            self.config.multi_objective_aggregation,
            TRL_STD_EPS,
        )
        .map_err(|e| batch_error(cx.state, e))?;
        cx.metrics.record_all(reward_metrics(
            &stats,
            &advantages,
            per_func,
            &self.inputs.rewards.names(),
        ));
        Ok(advantages.values)
    }

    /// Records the completion metrics and counts the batch's prompt and completion tokens.
    fn record_completions(
        &mut self,
        prompts: &[Vec<u32>],
        generation: &Generation,
        cx: &mut StepContext<'_, D>,
    ) -> Result<()> {
        let lengths: Vec<usize> = generation.completions.iter().map(Vec::len).collect();
        let truncated: Vec<bool> = generation.finished.iter().map(|f| !f).collect();
        let metrics =
            completion_metrics(&lengths, &truncated).map_err(|e| batch_error(cx.state, e))?;
        cx.metrics.record_all(metrics);
        cx.state.num_tokens += prompts
            .iter()
            .chain(&generation.completions)
            .map(|s| s.len() as u64)
            .sum::<u64>();
        Ok(())
    }

    /// The rows the loss ignores: completions cut off at `max_completion_length`, when
    /// `mask_truncated_completions` is set.
    fn loss_masked(&self, finished: &[bool]) -> Vec<bool> {
        let mask_truncated = self.config.mask_truncated_completions;
        finished.iter().map(|&f| mask_truncated && !f).collect()
    }

    /// Shuffles the batch's rows with the batch's own seed into micro-batches of
    /// `per_device_train_batch_size × ranks` rows, and buffers this rank's share of each.
    fn buffer_micro_batches(&mut self, cx: &StepContext<'_, D>, batch: &ScoredBatch) -> Result<()> {
        // The dapo normaliser counts the unmasked tokens of the whole generation batch, over all
        // ranks; the ranks' gradients are summed, not averaged, so it is divided by no process
        // count (P = 1).
        let num_items: f64 = batch
            .completions
            .iter()
            .zip(&batch.masked)
            .filter(|&(_, &masked)| !masked)
            .map(|(c, _)| c.len() as f64)
            .sum();
        let norm = self.config.normalisation(num_items, 1);
        let mut order: Vec<usize> = (0..batch.completions.len()).collect();
        let mut rng = StdRng::seed_from_u64(derive_seed(
            self.config.training.seed,
            STREAM_SHUFFLE,
            cx.state.generation,
        ));
        order.shuffle(&mut rng);
        self.buffer.clear();
        let ranks = cx.ranks;
        let global = self.config.training.per_device_train_batch_size * ranks.world_size();
        for rows in order.chunks(global) {
            let mine = &rows[ranks.share(rows.len())];
            let weights = self.row_weights(batch, rows, &norm);
            let width = (
                rows.iter()
                    .map(|&i| batch.prompts[i].len())
                    .max()
                    .unwrap_or(0),
                rows.iter()
                    .map(|&i| batch.completions[i].len())
                    .max()
                    .unwrap_or(0),
            );
            let micro_batch = self.micro_batch(
                cx.model,
                batch,
                mine,
                &weights[ranks.share(rows.len())],
                width,
            )?;
            self.buffer.push(micro_batch);
        }
        Ok(())
    }

    /// The token weights of the rows `rows` of `batch` that form one micro-batch (over all
    /// ranks), each row as long as its completion.
    fn row_weights(
        &self,
        batch: &ScoredBatch,
        rows: &[usize],
        norm: &Normalisation,
    ) -> Vec<Vec<f64>> {
        let mask: Vec<Vec<f64>> = rows
            .iter()
            .map(|&i| {
                let m = if batch.masked[i] { 0.0 } else { 1.0 };
                vec![m; batch.completions[i].len()]
            })
            .collect();
        norm.token_weights(self.config.loss_type, &mask)
    }

    /// The micro-batch of `rows` of `batch` (`row_weights`: their token weights, from
    /// [`Self::row_weights`]; `width`: the whole micro-batch's prompt and completion widths):
    /// packed sequences, loss mask, token weights, and the old and reference log-probs when the
    /// loss needs them.
    fn micro_batch(
        &self,
        policy: &CausalLm<f32, D>,
        batch: &ScoredBatch,
        rows: &[usize],
        row_weights: &[Vec<f64>],
        width: (usize, usize),
    ) -> Result<BufferedMicroBatch> {
        let pairs: Vec<(&[u32], &[u32])> = rows
            .iter()
            .map(|&i| (batch.prompts[i].as_slice(), batch.completions[i].as_slice()))
            .collect();
        let packed = pack_to(&pairs, self.pad, width)?;
        let c = packed.completion_len;
        let mut mask = packed.completion_mask.clone();
        for (r, &i) in rows.iter().enumerate() {
            if batch.masked[i] {
                mask[r * c..(r + 1) * c].iter_mut().for_each(|m| *m = 0.0);
            }
        }
        let weights: Vec<f64> = row_weights
            .iter()
            .flat_map(|w| {
                w.iter()
                    .copied()
                    .chain(std::iter::repeat_n(0.0, c - w.len()))
            })
            .collect();
        let temperature = self.config.temperature;
        let logps_of = |model: &CausalLm<f32, D>| -> Result<Vec<f64>> {
            let out =
                model.token_logps_no_grad(&packed.batch, packed.completion_start, temperature)?;
            Ok(out.logps.as_vec().into_iter().map(f64::from).collect())
        };
        let old_logps = need_old_logps(&self.config)
            .then(|| logps_of(policy))
            .transpose()?;
        let ref_logps = self.reference.as_ref().map(logps_of).transpose()?;
        Ok(BufferedMicroBatch {
            advantages: rows.iter().map(|&i| batch.advantages[i]).collect(),
            packed,
            mask,
            weights,
            old_logps,
            ref_logps,
        })
    }

    /// The reward sample of completion `index` (of task `task`), with its execution result
    /// when it was executed.
    fn sample(
        &self,
        generation: u64,
        task: usize,
        index: usize,
        completion: &str,
        execution: Option<Execution>,
    ) -> Sample {
        let row = &self.inputs.tasks[task];
        Sample {
            id: format!("{}:{generation}:{index}", row.instance_id),
            prompt: self.prompt_texts[task].clone(),
            completion: completion.to_owned(),
            code_context: row.code_context.clone(),
            oracle_new_content: row.oracle_new_content.clone(),
            reference_patch: row.patch.clone(),
            execution,
            metadata: BTreeMap::from([("instance_id".to_owned(), row.instance_id.clone())]),
        }
    }

    /// Forward, loss and backward of buffered micro-batch `index`; returns the loss value, the
    /// accumulated parameter gradients and the entropy bonus's `[Σ H·M', Σ M']` (over all
    /// ranks; zeros without the bonus), and records the micro-batch's loss-side metrics (of the
    /// whole micro-batch, over all ranks).
    fn micro_step(
        &self,
        index: usize,
        grads: Gradients<f32, D>,
        cx: &mut StepContext<'_, D>,
    ) -> Result<(f64, Gradients<f32, D>, [f64; 2])> {
        let mb = &self.buffer[index];
        let out = cx.model.token_logps(
            &mb.packed.batch,
            mb.packed.completion_start,
            self.config.temperature,
            grads,
        )?;
        let entropies: Vec<f64> = out.entropy.as_vec().into_iter().map(f64::from).collect();
        let params = ObjectiveParams {
            entropy_coef: self.applied_entropy_coef(cx.state),
            ..self.config.objective_params()
        };
        let ranks = cx.ranks;
        // The entropy quantile is the whole micro-batch's, over every rank's unmasked tokens.
        let entropy_threshold = if params.masks_entropy() {
            let local: Vec<f32> = entropies
                .iter()
                .zip(&mb.mask)
                .filter(|&(_, &m)| m != 0.0)
                .map(|(&e, _)| e as f32)
                .collect();
            let all: Vec<f32> = ranks.gather(local)?.into_iter().flatten().collect();
            Some(entropy_threshold(&all, params.top_entropy_quantile))
        } else {
            None
        };
        // The entropy bonus averages over the tokens the entropy mask keeps, over all ranks
        // (and the adaptive controller measures their mean entropy).
        let mut bonus = [0.0, 0.0];
        if self.entropy_bonus() {
            for (&e, &m) in entropies.iter().zip(&mb.mask) {
                if m != 0.0 && entropy_threshold.is_none_or(|t| e * m >= f64::from(t)) {
                    bonus[0] += e * m;
                    bonus[1] += m;
                }
            }
            ranks.sum(&mut bonus)?;
        }
        let batch = MicroBatch {
            old_logps: mb.old_logps.as_deref(),
            ref_logps: mb.ref_logps.as_deref(),
            advantages: &mb.advantages,
            mask: &mb.mask,
            weights: &mb.weights,
            scope: MicroBatchScope {
                gradient_accumulation_steps: self.config.training.gradient_accumulation_steps,
                entropy_threshold,
                entropy_tokens: Some(bonus[1]),
            },
        };
        let loss = grpo_loss(out.logps, Some(out.entropy), &batch, &params)?;
        let grads = cx.model.params.keep_param_grads(loss.surrogate.backward());
        // The metrics are the whole micro-batch's, over all ranks.
        let mut sums = MetricSums::default();
        for part in ranks.gather(loss.sums)? {
            sums.combine(&part);
        }
        for (name, value) in sums.metrics(&params, true) {
            // The adaptive coefficient is logged once per step, after its update.
            if name == "policy_loss" || name == "entropy_coef" {
                continue;
            }
            cx.metrics.record(name, value);
        }
        if self.entropy_bonus() {
            cx.metrics.record("policy_loss", sums.policy_loss);
        }
        Ok((loss.value, grads, bonus))
    }

    /// Whether the entropy bonus is on: a static `entropy_coef`, or the adaptive controller.
    fn entropy_bonus(&self) -> bool {
        self.config.entropy_coef != 0.0 || self.config.use_adaptive_entropy
    }

    /// The entropy coefficient the controller has reached (the configured one until it moves).
    fn entropy_coef(&self, state: &RunState) -> f64 {
        state.entropy_coef.unwrap_or(self.config.entropy_coef)
    }

    /// The coefficient this step's micro-batches apply: the static one, or the adaptive one
    /// while the entropy measured at the end of the previous step is at most `entropy_target`
    /// (none measured yet counts as +∞: no bonus), as TRL does.
    fn applied_entropy_coef(&self, state: &RunState) -> f64 {
        if !self.config.use_adaptive_entropy {
            return self.config.entropy_coef;
        }
        let last = state.last_world_entropy.unwrap_or(f64::INFINITY);
        if last <= self.config.entropy_target {
            self.entropy_coef(state)
        } else {
            0.0
        }
    }

    /// The adaptive controller's update at the end of a step from the step's `[Σ H·M', Σ M']`:
    /// raise the coefficient by `entropy_coef_delta` (up to `entropy_coef_max`) when the
    /// entropy is at most `entropy_target`, lower it (down to `entropy_coef_min`) otherwise.
    fn update_entropy_coef(&self, state: &mut RunState) {
        if !self.config.use_adaptive_entropy {
            return;
        }
        let entropy = self.window[0] / self.window[1].max(1.0);
        let c = &self.config;
        let coef = if entropy <= c.entropy_target {
            (self.entropy_coef(state) + c.entropy_coef_delta).min(c.entropy_coef_max)
        } else {
            (self.entropy_coef(state) - c.entropy_coef_delta).max(c.entropy_coef_min)
        };
        state.entropy_coef = Some(coef);
        state.last_world_entropy = Some(entropy);
    }
}

/// Every rank's completions and rewards, concatenated in rank order (= row order, since
/// ranks hold consecutive shares).
fn gather(
    ranks: &Ranks,
    generation: Generation,
    per_func: Vec<Vec<Option<f64>>>,
) -> Result<(Generation, Vec<Vec<Option<f64>>>)> {
    if ranks.world_size() == 1 {
        return Ok((generation, per_func));
    }
    let shares = ranks.gather((
        generation.completions,
        generation.finished,
        generation.logprobs,
        per_func,
    ))?;
    let mut all = (
        Generation {
            completions: Vec::new(),
            finished: Vec::new(),
            logprobs: Vec::new(),
        },
        Vec::new(),
    );
    for (completions, finished, logprobs, per_func) in shares {
        all.0.completions.extend(completions);
        all.0.finished.extend(finished);
        all.0.logprobs.extend(logprobs);
        all.1.extend(per_func);
    }
    Ok(all)
}

/// A generation batch's rewards or completions that do not fit together (a reward function
/// that returned the wrong number of scores, say).
fn batch_error(state: &RunState, source: GrpoError) -> Error {
    Error::GrpoBatch {
        generation: state.generation,
        source,
    }
}

/// Micro-steps between two generation batches: `steps_per_generation × num_iterations`.
pub(crate) fn generate_every(config: &GrpoConfig) -> u64 {
    (config.steps_per_generation() * config.num_iterations) as u64
}

/// Whether old log-probs are stored at generation time: only when a generation batch is still
/// replayed after an optimiser step, so the policy that sampled it is gone by then.
pub(crate) fn need_old_logps(config: &GrpoConfig) -> bool {
    !(config.training.gradient_accumulation_steps as u64).is_multiple_of(generate_every(config))
}

/// The run's optimiser steps: `max_steps`, or enough for `num_train_epochs` passes over the
/// tasks (each generation batch serving `steps_per_generation × μ / GAS` steps).
pub fn total_steps(config: &GrpoConfig, tasks: usize) -> u64 {
    let per_gen = (config.generation_batch_size() / config.num_generations) as f64;
    let steps_per_batch =
        generate_every(config) as f64 / config.training.gradient_accumulation_steps as f64;
    config
        .training
        .total_steps(|epochs| epochs * tasks as f64 / per_gen * steps_per_batch)
}

/// Rejects the TRL settings that validate but do not fit together in a run.
fn check_supported(config: &GrpoConfig) -> Result<()> {
    if config.sync_ref_model && config.beta == 0.0 {
        return Err(Error::Run(RunError::SyncWithoutReference));
    }
    Ok(())
}
