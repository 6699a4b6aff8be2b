//! The one training driver: [`Trainer`] runs any [`Objective`] (SFT, GRPO, a loop to come) as
//! TRL's `Trainer` runs its subclasses. It owns what every run has — the model, AdamW, the
//! learning-rate schedule, the run's [`RunState`], the data-parallel ranks — and does what every
//! run does: an optimiser step (the objective's micro-batches, the gradient sum over ranks,
//! clipping and AdamW at the scheduled rate), the step's metrics, the metrics log, checkpoints
//! and resuming from one. An objective adds what its loop alone knows: its data, its loss and
//! the forward and backward passes of one step's micro-batches.
//!
//! Metrics every step logs beside the objective's own: `loss`, `grad_norm`, `learning_rate`,
//! `num_tokens`, `step_time`, `tokens_per_second`, `epoch`, and with several ranks
//! `allreduce_time`.

use std::path::PathBuf;
use std::time::Instant;

use dfdx::prelude::Gradients;

use crate::checkpoint::RunState;
use crate::device::DeviceSpec;
use crate::error::{Error, Result};
use crate::model::{AdamW, CausalLm, Kernels, ModelParams};
use crate::ranks::Ranks;
use crate::report::metrics_log::{self, StepMetrics};
use crate::report::plot;
use crate::train::arguments::TrainingArguments;
use crate::train::plan::PlanInputs;
use crate::train::schedule::Schedule;
use crate::train::{MetricsAccumulator, RunOutput};

/// Why a run cannot start, resume or go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An SFT example longer than the model's context after truncation to `max_length`.
    #[error(
        "example {row} has {tokens} tokens after truncation to max_length, past the model's \
         context of {context} tokens (max_position_embeddings): set max_length to at most \
         {context}"
    )]
    PastContext {
        /// The example (from 0, in the data's order).
        row: usize,
        /// Its tokens, prompt and completion.
        tokens: usize,
        /// The model's context.
        context: usize,
    },
    /// The checkpoint is of another kind of run.
    #[error("cannot resume a `{run}` run from a `{checkpoint}` checkpoint")]
    OtherKind {
        /// This run's kind.
        run: &'static str,
        /// The checkpoint's.
        checkpoint: String,
    },
    /// A GRPO checkpoint taken inside a generation batch (the last of a run), which does not
    /// resume: the batch's buffer is not in it.
    #[error(
        "cannot resume at micro-step {micro_step} (GRPO resumes only between generation batches)"
    )]
    MidGeneration {
        /// The checkpoint's micro-step.
        micro_step: u64,
    },
    /// The checkpoint was written by a run on another number of ranks.
    #[error(
        "this checkpoint was written by a run of {written} rank(s) and this run has {ranks}: a \
         run resumes only on its own number of ranks (its global batch, \
         per_device_train_batch_size × ranks, and its place in the data depend on it). Resume \
         with {written} rank(s), or start a new run from the checkpoint's weights with --model \
         <checkpoint> (its optimiser state and step count are not carried over)"
    )]
    OtherRanks {
        /// The checkpoint's ranks.
        written: u64,
        /// This run's.
        ranks: usize,
    },
    /// The checkpoint is another run's: other data or another output folder.
    #[error(
        "this checkpoint is of another run: its {what} is {checkpoint}, this command's is {now}; \
         resume it with its own data and --output, or pass --allow-other-run to continue it with \
         these"
    )]
    OtherRun {
        /// What differs (`data`, `output folder`).
        what: &'static str,
        /// The checkpoint run's.
        checkpoint: String,
        /// This command line's.
        now: String,
    },
    /// A setting of the command line that does not mean the checkpoint's run.
    #[error(
        "--resume: `{key}` is {checkpoint} in the checkpoint's run and {now} on this command \
         line; give the run's value (or leave it out), or start a new run in another --output"
    )]
    SettingConflict {
        /// The setting.
        key: String,
        /// Its value in the checkpoint's run.
        checkpoint: String,
        /// Its value on this command line.
        now: String,
    },
    /// A new run into a folder that holds another run's checkpoints or metrics.
    #[error(
        "{} holds another run ({found}): {}write this run elsewhere (--output), or pass \
         --overwrite-output-dir to replace it",
        dir.display(),
        resume.as_ref().map_or_else(
            || "it has no checkpoint to continue; ".to_owned(),
            |c| format!("continue it with --resume {}, ", c.display())
        )
    )]
    OutputInUse {
        /// The output folder.
        dir: std::path::PathBuf,
        /// What was found there (`checkpoint-40`, `metrics.jsonl`).
        found: String,
        /// Its last checkpoint, when it has one.
        resume: Option<std::path::PathBuf>,
    },
    /// A GRPO task row with neither what its prompt nor what its reward needs.
    #[error(
        "{}: row `{instance_id}` has neither `code_context` nor `oracle_new_content` (GRPO shows \
         the files of `code_context` in the prompt and scores against `oracle_new_content`, \
         unless --execute runs the tests)",
        dataset.display()
    )]
    TaskWithout {
        /// The dataset.
        dataset: std::path::PathBuf,
        /// The row.
        instance_id: String,
    },
    /// SFT without examples.
    #[error("no SFT examples")]
    NoExamples,
    /// GRPO without tasks.
    #[error("no tasks to train on")]
    NoTasks,
    /// GRPO without a reward function.
    #[error("GRPO needs at least one reward function")]
    NoRewardFunctions,
    /// The model's config names no EOS token, which SFT appends to every completion.
    #[error("the model config names no eos_token_id")]
    NoEosToken,
    /// β > 0 without the reference weights.
    #[error("beta = {beta} needs the reference model (the initial weights)")]
    NoReference {
        /// The KL coefficient.
        beta: f64,
    },
    /// `sync_ref_model` with β = 0, where there is no reference model.
    #[error(
        "`sync_ref_model = true` with `beta = 0`: there is no reference model to synchronise; \
         set a non-zero `beta` or leave `sync_ref_model` unset"
    )]
    SyncWithoutReference,
    /// A batch without a prompt token or without a completion token.
    #[error("a batch needs at least one prompt token and one completion token")]
    EmptyBatch,
    /// A micro-batch's inputs do not match its log-probs.
    #[error("micro-batch inputs do not match its {rows}×{cols} log-probs")]
    MicroBatchShape {
        /// Rows of the log-probs.
        rows: usize,
        /// Their columns.
        cols: usize,
    },
    /// The GRPO objective refused a micro-batch.
    #[error("GRPO objective")]
    Objective(#[source] crate::grpo::GrpoError),
}

/// What a run continues with besides its model: the optimiser and the run's state, from a
/// checkpoint.
pub(crate) type Resume<D> = (AdamW<f32, D>, RunState);

/// What a training loop optimises, and how one optimiser step's gradients are computed; the
/// [`Trainer`] does the rest. A new loop implements this and runs on the same driver.
pub trait Objective<D: Kernels<f32>> {
    /// The run's kind as checkpoints record it (`sft`, `grpo`): a run resumes only a checkpoint
    /// of its own kind.
    const KIND: &'static str;

    /// The metrics plotted from the run's log when it ends (`crate::report::plot`).
    const PLOTS: &'static [&'static str];

    /// The training arguments in force.
    fn arguments(&self) -> &TrainingArguments;

    /// The run's optimiser steps on `world_size` ranks, when no checkpoint says otherwise.
    fn total_steps(&self, world_size: usize) -> u64;

    /// Refuses to continue from `state` (a checkpoint of this kind) when this objective cannot.
    fn check_resume(&self, _state: &RunState) -> Result<()> {
        Ok(())
    }

    /// One optimiser step's micro-batches: forward, loss and backward of each, their parameter
    /// gradients accumulated into `grads`. Advances `cx.state`'s `micro_step` and `num_tokens`
    /// (and the objective's own counters), records the objective's metrics in `cx.metrics`, and
    /// returns this rank's summed loss with the gradients; the driver sums both over ranks.
    fn accumulate(
        &mut self,
        cx: StepContext<'_, D>,
        grads: Gradients<f32, D>,
    ) -> Result<(f64, Gradients<f32, D>)>;

    /// Runs after AdamW stepped and `cx.state.step` counted the step (adaptive coefficients,
    /// reference updates).
    fn after_step(&mut self, _cx: StepContext<'_, D>) -> Result<()> {
        Ok(())
    }

    /// Passes over the data made, where `state` stands (the `epoch` metric).
    fn epoch(&self, state: &RunState) -> f64;

    /// Whether a checkpoint taken where `state` stands resumes (the last step is saved either
    /// way).
    fn resumable_at(&self, _state: &RunState) -> bool {
        true
    }

    /// Weights besides the model that a checkpoint must hold for the run to resume (GRPO's
    /// moved reference).
    fn checkpoint_reference(&self) -> Option<&ModelParams<f32, D>> {
        None
    }

    /// The memory plan's inputs: `model` filled in with the model's part and no batch, to be
    /// completed with what this objective holds at once on `ranks`.
    fn plan_inputs(&self, model: PlanInputs, ranks: &Ranks) -> PlanInputs;
}

/// What an objective's step works with.
pub struct StepContext<'a, D: Kernels<f32>> {
    /// The model as the last step left it.
    pub model: &'a CausalLm<f32, D>,
    /// Where the run stands.
    pub state: &'a mut RunState,
    /// The data-parallel ranks this process is one of.
    pub ranks: &'a Ranks,
    /// The step's metrics, logged as each name's mean.
    pub metrics: &'a mut MetricsAccumulator,
}

/// A run in progress: the model, its optimiser and where the run stands, trained on an
/// [`Objective`].
pub struct Trainer<D: Kernels<f32>, O: Objective<D>> {
    /// The model being trained.
    pub model: CausalLm<f32, D>,
    /// Its optimiser.
    pub optimizer: AdamW<f32, D>,
    /// Where the run stands.
    pub state: RunState,
    objective: O,
    schedule: Schedule,
    ranks: Ranks,
}

impl<D: Kernels<f32>, O: Objective<D>> Trainer<D, O> {
    /// Prepares a run of `model` on `objective`, with a fresh optimiser or a checkpoint's
    /// (`resume`), on `ranks` (this process is one of them; [`Ranks::single`] alone). Each
    /// objective's alias has a `new` that builds the objective too ([`SftTrainer::new`],
    /// [`GrpoTrainer::new`]).
    ///
    /// [`SftTrainer::new`]: crate::train::sft_loop::SftTrainer
    /// [`GrpoTrainer::new`]: crate::train::grpo_loop::GrpoTrainer
    pub(crate) fn with_objective(
        objective: O,
        mut model: CausalLm<f32, D>,
        resume: Option<Resume<D>>,
        ranks: Ranks,
    ) -> Result<Self> {
        let arguments = objective.arguments();
        model.gradient_checkpointing = arguments.gradient_checkpointing;
        let (optimizer, state) = match resume {
            Some((mut optimizer, state)) => {
                if state.kind != O::KIND {
                    return Err(Error::Run(RunError::OtherKind {
                        run: O::KIND,
                        checkpoint: state.kind,
                    }));
                }
                objective.check_resume(&state)?;
                state.check_ranks(ranks.world_size())?;
                optimizer.config = arguments.adamw();
                // How long the run goes is the command line's (train/origin.rs: the settings
                // that would change anything else were checked before).
                let mut state = state;
                state.total_steps = objective.total_steps(ranks.world_size());
                (optimizer, state)
            }
            None => (
                AdamW::new(arguments.adamw()),
                RunState {
                    kind: O::KIND.into(),
                    total_steps: objective.total_steps(ranks.world_size()),
                    num_processes: ranks.world_size() as u64,
                    ..RunState::default()
                },
            ),
        };
        Ok(Self {
            schedule: arguments.schedule(state.total_steps),
            model,
            optimizer,
            state,
            objective,
            ranks,
        })
    }

    /// The objective.
    pub fn objective(&self) -> &O {
        &self.objective
    }

    /// The data-parallel ranks this process is one of.
    pub fn ranks(&self) -> &Ranks {
        &self.ranks
    }

    /// What this run will hold on `device`, for its memory plan.
    pub(crate) fn plan_inputs(&self, device: DeviceSpec) -> PlanInputs {
        let model = PlanInputs {
            model: self.model.config.clone(),
            device,
            kernels: self.model.kernels,
            rows: 0,
            seq: 0,
            completion: 0,
            gradient_checkpointing: self.model.gradient_checkpointing,
            logits_chunk_rows: self.model.logits_chunk_rows,
            reference: false,
            generation: None,
        };
        self.objective.plan_inputs(model, &self.ranks)
    }

    /// Whether every planned step has been taken.
    pub fn finished(&self) -> bool {
        self.state.step >= self.state.total_steps
    }

    /// Runs the remaining steps, appending each step's metrics to `output`'s log, calling
    /// `on_step` after each, and checkpointing as `output` says where a checkpoint resumes
    /// (always after the last step). `output` is rank 0's alone (`None` on the other ranks,
    /// which write nothing).
    pub fn train(
        &mut self,
        mut output: Option<&mut RunOutput>,
        on_step: &mut dyn FnMut(&StepMetrics, &RunState),
    ) -> Result<()> {
        let mut first = true;
        // A first Ctrl-C or SIGTERM is taken at the end of the step it falls in (or the next
        // step where a checkpoint resumes): the run saves one and stops, losing nothing. A
        // second one stops the process at once, with the last checkpoint named.
        let _cooperation = swerve_interrupt::cooperate();
        while !self.finished() {
            let metrics = self.step()?;
            // The ranks' parameters agree after this process's first step and the last (checked).
            if std::mem::take(&mut first) || self.finished() {
                self.ranks
                    .check_same_params(&self.model.params, metrics.step)?;
            }
            on_step(&metrics, &self.state);
            let resumable = self.objective.resumable_at(&self.state);
            let stop = if resumable { self.signalled()? } else { None };
            let Some(output) = output.as_deref_mut() else {
                if let Some(signal) = stop {
                    return Err(Error::Signalled(signal));
                }
                continue;
            };
            output.metrics.append(&metrics)?;
            // The last step always saves, also where the checkpoint does not resume (it holds
            // the final weights; `new` refuses to continue from it).
            let due = resumable && output.due(self.state.step);
            if due || self.finished() || stop.is_some() {
                let checkpoint = self.save(output)?;
                if resumable && output.resumed_by_flag {
                    swerve_interrupt::set_resume_hint(Some(crate::error::stopped_line(
                        &checkpoint,
                        true,
                    )));
                }
                if let Some(signal) = stop {
                    return Err(Error::Stopped {
                        signal,
                        resume: output.resumed_by_flag,
                        checkpoint,
                    });
                }
            }
        }
        Ok(())
    }

    /// The signal that stops the run here, when one was received: by any rank, so that every
    /// rank stops at the same step (one sum over the ranks; nothing on one rank).
    fn signalled(&self) -> Result<Option<swerve_interrupt::Interrupted>> {
        let received = swerve_interrupt::received();
        let mut flags = [
            f64::from(u8::from(
                received == Some(swerve_interrupt::Signal::Interrupt),
            )),
            f64::from(u8::from(
                received == Some(swerve_interrupt::Signal::Terminate),
            )),
        ];
        self.ranks.sum(&mut flags)?;
        Ok(match flags {
            [_, terminate] if terminate > 0.0 => Some(swerve_interrupt::Signal::Terminate),
            [interrupt, _] if interrupt > 0.0 => Some(swerve_interrupt::Signal::Interrupt),
            _ => None,
        }
        .map(|signal| swerve_interrupt::Interrupted { signal }))
    }

    /// Draws the run's plots (the objective's `PLOTS`) from `output`'s metrics log into
    /// `<folder>/plots`, titled with the run's kind and folder; returns the log.
    pub fn plot(&self, output: &RunOutput) -> Result<Vec<StepMetrics>> {
        let history = metrics_log::read(output.metrics.path())?;
        let dir = &output.checkpoint_dir;
        plot::plot_metrics(
            &history,
            O::PLOTS,
            &dir.join("plots"),
            &format!("{} run {}", O::KIND, dir.display()),
        )?;
        Ok(history)
    }

    /// Saves a checkpoint of the run as it stands into `output`'s folder.
    pub fn save(&self, output: &RunOutput) -> Result<PathBuf> {
        output.save(
            &self.model,
            &self.optimizer,
            &self.state,
            self.objective.checkpoint_reference(),
        )
    }

    /// One optimiser step: the objective's micro-batches, the gradients summed over ranks,
    /// clipping and AdamW at the scheduled rate. Returns the step's metrics.
    pub fn step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let tokens_before = self.state.num_tokens;
        let mut metrics = MetricsAccumulator::default();
        let grads = self.model.params.alloc_grads();
        let (loss, mut grads) = self.objective.accumulate(
            StepContext {
                model: &self.model,
                state: &mut self.state,
                ranks: &self.ranks,
                metrics: &mut metrics,
            },
            grads,
        )?;
        let reduce = Instant::now();
        self.ranks
            .all_reduce_grads(&self.model.params, &mut grads)?;
        let reduce = reduce.elapsed().as_secs_f64();
        let mut total = [loss];
        self.ranks.sum(&mut total)?;
        let [loss] = total;
        let lr = self.schedule.lr(self.state.step as usize);
        self.optimizer.config.lr = lr;
        let stats = self.optimizer.step(&mut self.model.params, &mut grads);
        self.state.step += 1;
        self.objective.after_step(StepContext {
            model: &self.model,
            state: &mut self.state,
            ranks: &self.ranks,
            metrics: &mut metrics,
        })?;
        let elapsed = started.elapsed().as_secs_f64();
        let mut values = metrics.means();
        let tokens = (self.state.num_tokens - tokens_before) as f64;
        values.extend([
            ("loss".to_owned(), loss),
            ("grad_norm".to_owned(), stats.grad_norm),
            ("learning_rate".to_owned(), lr),
            ("num_tokens".to_owned(), self.state.num_tokens as f64),
            ("step_time".to_owned(), elapsed),
            ("tokens_per_second".to_owned(), tokens / elapsed.max(1e-9)),
            ("epoch".to_owned(), self.objective.epoch(&self.state)),
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
