//! Flags of `trainer sft`, `trainer grpo`, `trainer predict` and `trainer demo`, turned into the
//! typed commands of `swerve_trainer::commands`, with progress on stderr
//! ([`swerve_cli::Progress`]).

use std::path::PathBuf;

use anyhow::Context;
use swerve_cli::{Progress, Verbosity};
use swerve_host::PluginSpec;
use swerve_trainer::checkpoint::RunState;
use swerve_trainer::commands::demo::{self, DemoConfig};
use swerve_trainer::commands::{
    self, ExecuteSpec, GrpoCommand, ModelSource, OutputSpec, PredictCommand, SftCommand, SftData,
};
use swerve_trainer::data::PromptStyle;
use swerve_trainer::device::DeviceSpec;
use swerve_trainer::generate::SamplingConfig;
use swerve_trainer::prompt::PromptFormat;
use swerve_trainer::ranks::Ranks;
use swerve_trainer::report::metrics_log::{ReportTo, StepMetrics};
use swerve_trainer::train::rewards::PluginRewards;

/// `--report-to`: where metrics go besides `metrics.jsonl`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ReportToArg {
    /// metrics.jsonl only
    Jsonl,
    /// metrics.jsonl and a TensorBoard event file beside it (tags `train/<metric>`)
    Tensorboard,
}

/// `--device`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DeviceArgs {
    /// Device: cpu, or cuda / cuda:N (a build with the `cuda` feature; docs/gpu.md)
    #[arg(long, default_value = "cpu")]
    pub device: DeviceSpec,
}

/// Where a run starts and where it writes.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Initial model directory (config.json, model.safetensors, tokenizer.json)
    #[arg(long)]
    model: PathBuf,
    /// Continue from this checkpoint of the same run (written under --output): the run's data,
    /// folder and settings must be its own, but for how long it trains (max_steps,
    /// num_train_epochs), how often it logs and gradient_checkpointing, which this command line
    /// sets
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// With --resume: continue the checkpoint even when it is another run's (other data or
    /// another --output)
    #[arg(long, requires = "resume")]
    allow_other_run: bool,
    /// A new run may replace another run's checkpoints, metrics and plots in --output (without
    /// it such a folder is refused)
    #[arg(long, conflicts_with = "resume")]
    overwrite_output_dir: bool,
    /// Output directory: metrics.jsonl, checkpoint-STEP/, plots/
    #[arg(long)]
    output: PathBuf,
    /// Save a checkpoint every N steps (0: only at the end)
    #[arg(long, default_value_t = 0)]
    save_steps: u64,
    /// Settings file (TOML, TRL's key names)
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting: KEY=VALUE with a TOML value (repeatable), e.g. --set beta=0.04
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Where metrics go: metrics.jsonl is always written (plots and --resume read it);
    /// `tensorboard` adds an event file beside it for `tensorboard --logdir`
    #[arg(long, value_enum, default_value = "tensorboard")]
    report_to: ReportToArg,
    #[command(flatten)]
    device: DeviceArgs,
    /// Start even when the memory plan's estimate exceeds the device's memory
    #[arg(long)]
    force: bool,
}

/// How tasks become prompts.
#[derive(Debug, clap::Args)]
pub(crate) struct PromptArgs {
    /// Prompt format: plain (instructions as text), bare (task only), chatml (Qwen2's turns as
    /// swerve writes them) or template (the model's own chat template, from its
    /// tokenizer_config.json)
    #[arg(long, default_value = "plain")]
    prompt_format: PromptFormat,
    /// Show only the oracle's changed regions with N context lines (training shortcut)
    #[arg(long, value_name = "N")]
    focus: Option<usize>,
}

impl PromptArgs {
    fn style(&self) -> PromptStyle {
        PromptStyle {
            format: self.prompt_format,
            focus: self.focus,
        }
    }
}

/// `trainer sft`.
#[derive(Debug, clap::Args)]
pub(crate) struct SftArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Prompt/completion pairs (JSONL with `prompt` and `completion`; `"add_special_tokens":
    /// false` on a line whose prompt already starts with the model's BOS)
    #[arg(long, conflicts_with = "dataset", required_unless_present = "dataset")]
    data: Option<PathBuf>,
    /// Task rows instead: train on each task's gold SEARCH/REPLACE completion
    #[arg(long)]
    dataset: Option<PathBuf>,
    #[command(flatten)]
    prompt: PromptArgs,
}

/// `trainer grpo`.
#[derive(Debug, clap::Args)]
pub(crate) struct GrpoArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Task rows (JSONL with problem_statement, code_context, oracle_new_content; a folder of
    /// them, its train.jsonl; or `swerve-mini`, the bundled dataset)
    #[arg(long)]
    dataset: PathBuf,
    /// A reward plugin: `NAME|PATH[=WEIGHT][,fuel=N][,memory=SIZE][,timeout=DUR]`; repeatable
    #[arg(long = "plugin", required = true, value_name = "SPEC")]
    plugins: Vec<PluginSpec>,
    #[command(flatten)]
    prompt: PromptArgs,
    /// Threads that score rewards (default: all cores)
    #[arg(long, value_parser = swerve_cli::count)]
    reward_jobs: Option<usize>,
    /// Run each completion's patch against its instance's tests in the Docker sandbox (as
    /// `harness run` does) before scoring; plugins such as `tests-fixed` read the results.
    /// --dataset must then be a harness dataset file (beside its environments.json)
    #[arg(long)]
    execute: bool,
    #[command(flatten)]
    execution: ExecuteArgs,
}

/// The flags of `--execute`: where the patches run (on Slurm, one job array per GRPO step whose
/// tasks each run `--max-workers` containers; the output folder must be shared:
/// docs/cluster.md), containers at once, the limit of one run.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecuteArgs {
    #[command(flatten)]
    placement: swerve_cli::PlacementArgs,
    /// Containers at once with --execute (on Slurm: in each array task).
    #[command(flatten)]
    max_workers: swerve_cli::MaxWorkers<2>,
    /// The limit of one instance's tests with --execute.
    #[command(flatten)]
    timeout: swerve_cli::Timeout<{ swerve_cli::DEFAULT_EXECUTE_TIMEOUT.as_secs() }>,
}

impl ExecuteArgs {
    /// Without `--execute`, a flag of its group given another value than its default: an error
    /// naming it (the run would silently ignore it). clap's `requires` cannot see into the
    /// flattened groups, so the values are compared here.
    fn check_unused(&self) -> Result<(), swerve_cli::UsageError> {
        let unused = |flag: &str, value: String| {
            swerve_cli::UsageError::new(flag, value, "only used with --execute")
        };
        let defaults = ExecuteArgs {
            placement: swerve_cli::PlacementArgs::default(),
            max_workers: swerve_cli::MaxWorkers { max_workers: 2 },
            timeout: swerve_cli::Timeout {
                seconds: swerve_cli::DEFAULT_EXECUTE_TIMEOUT.as_secs(),
            },
        };
        if self.placement.executor != defaults.placement.executor {
            return Err(unused("--executor", "slurm".to_owned()));
        }
        if let Some(arg) = self.placement.slurm_args.first() {
            return Err(unused("--slurm-arg", arg.clone()));
        }
        if self.placement.slurm_tasks != 4 {
            return Err(unused(
                "--slurm-tasks",
                self.placement.slurm_tasks.to_string(),
            ));
        }
        if self.max_workers != defaults.max_workers {
            return Err(unused("--max-workers", self.max_workers.get().to_string()));
        }
        if self.timeout != defaults.timeout {
            return Err(unused("--timeout", self.timeout.seconds.to_string()));
        }
        Ok(())
    }
}

/// `trainer predict`.
#[derive(Debug, clap::Args)]
pub(crate) struct PredictArgs {
    /// Model directory (e.g. a checkpoint)
    #[arg(long)]
    model: PathBuf,
    /// Task rows
    #[arg(long)]
    dataset: PathBuf,
    /// Predictions file to write (SWE-bench JSONL)
    #[arg(long)]
    output: PathBuf,
    #[command(flatten)]
    prompt: PromptArgs,
    /// Most new tokens per task
    #[arg(long, default_value_t = 512, value_parser = swerve_cli::count)]
    max_new_tokens: usize,
    /// Sampling temperature; 0 is greedy
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Seed of the sampler
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tasks per generation batch
    #[arg(long, default_value_t = 8, value_parser = swerve_cli::count)]
    batch: usize,
    /// Build every row's context from its repository at its base commit: `bm25` (BM25 of the
    /// files against the issue), `oracle` (the files the gold patch edits) or `model` (the model
    /// names the files from the repository's file tree, then repairs); needs --repos
    #[arg(long, value_enum, requires = "repos")]
    retriever: Option<RetrieverArg>,
    /// Folder of bare mirrors `<owner>/<name>.git` (the layout `curate` reads)
    #[arg(long, requires = "retriever")]
    repos: Option<PathBuf>,
    /// Most tokens of a prompt with --retriever (default: the model's context length less
    /// --max-new-tokens); files that do not fit are left out in rank order
    #[arg(long, requires = "retriever", value_parser = swerve_cli::count)]
    max_prompt_tokens: Option<usize>,
    /// Most new tokens of the model's answer to its localisation prompt with --retriever model
    /// (greedy)
    #[arg(long, default_value_t = commands::DEFAULT_LOCALIZE_MAX_NEW_TOKENS, value_parser = swerve_cli::count)]
    localize_max_new_tokens: usize,
    #[command(flatten)]
    device: DeviceArgs,
}

/// `--retriever`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum RetrieverArg {
    /// BM25 over the repository's files, the issue as the query.
    Bm25,
    /// The files the gold patch edits.
    Oracle,
    /// The files the model names from the repository's file tree (BM25's ranking when it names
    /// none).
    Model,
}

/// `trainer demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// The run's settings (default: the bundled trainer/configs/swerve-mini-tiny.toml)
    #[arg(long)]
    config: Option<PathBuf>,
    /// A repository root to take the dataset and tiny model assets from (default: the copies
    /// this binary carries)
    #[arg(long)]
    root: Option<PathBuf>,
    /// Output directory
    #[arg(long, default_value = "target/swerve-mini-tiny")]
    output: PathBuf,
    /// Reward plugins (default: swe-rl)
    #[arg(long = "plugin", value_name = "SPEC")]
    plugins: Vec<PluginSpec>,
    #[command(flatten)]
    device: DeviceArgs,
}

fn source(run: &RunArgs) -> ModelSource {
    ModelSource {
        model: run.model.clone(),
        resume: run.resume.clone(),
        allow_other_run: run.allow_other_run,
    }
}

fn output(run: &RunArgs, verbosity: &Verbosity) -> OutputSpec {
    OutputSpec {
        dir: run.output.clone(),
        save_steps: run.save_steps,
        report_to: match run.report_to {
            ReportToArg::Jsonl => ReportTo::Jsonl,
            ReportToArg::Tensorboard => ReportTo::Tensorboard,
        },
        overwrite: run.overwrite_output_dir,
        show_plan: !verbosity.quiet,
    }
}

/// A `--set` override that is not a setting (or not a value of it) is a usage error, named as
/// clap names a bad value (exit 2); any other settings error is the run's.
fn usage_of_override(error: swerve_trainer::error::Error) -> anyhow::Error {
    match error {
        swerve_trainer::error::Error::Override { item, source } => {
            swerve_cli::UsageError::new("--set", item, source.to_string()).into()
        }
        other => other.into(),
    }
}

/// Progress over a run's steps showing the step, a metric and the ETA.
fn progress(
    kind: &'static str,
    metric: &'static str,
    verbosity: &Verbosity,
) -> anyhow::Result<impl FnMut(&StepMetrics, &RunState)> {
    let progress = Progress::new(kind, "step", verbosity)?;
    Ok(move |m: &StepMetrics, s: &RunState| {
        let message = m.get(metric).map(|v| format!("{metric} {v:.4}"));
        progress.set_total(s.total_steps);
        progress.set(s.step, message);
    })
}

/// This process's ranks (`mpirun`/`srun -n N`), and `run` with them. On several ranks, a rank
/// that fails prints its error naming itself and ends the whole job (MPI_Abort), so that the
/// others do not wait for it in a collective; a single process returns its error as usual.
fn with_ranks(run: impl FnOnce(&Ranks) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let ranks = Ranks::from_env()?;
    match run(&ranks) {
        Err(error) if ranks.world_size() > 1 => ranks.fail(&format_args!("{error:#}"), 1),
        other => other,
    }
}

/// What a run calls after each step.
type OnStep<'v> = Box<dyn FnMut(&StepMetrics, &RunState) + 'v>;

/// Rank 0's progress over a run's steps; the other ranks show none.
fn rank_progress<'v>(
    ranks: &Ranks,
    kind: &'static str,
    metric: &'static str,
    verbosity: &'v Verbosity,
) -> anyhow::Result<OnStep<'v>> {
    if ranks.is_root() {
        Ok(Box::new(progress(kind, metric, verbosity)?))
    } else {
        Ok(Box::new(|_: &StepMetrics, _: &RunState| {}))
    }
}

pub(crate) fn run_sft(args: &SftArgs, verbosity: &Verbosity) -> anyhow::Result<()> {
    with_ranks(|ranks| sft_on_ranks(args, verbosity, ranks))
}

fn sft_on_ranks(args: &SftArgs, verbosity: &Verbosity, ranks: &Ranks) -> anyhow::Result<()> {
    let data = match (&args.data, &args.dataset) {
        (Some(pairs), _) => SftData::Pairs(pairs.clone()),
        (None, Some(tasks)) => SftData::Gold(tasks.clone(), args.prompt.style()),
        (None, None) => anyhow::bail!("give --data or --dataset"),
    };
    let (config, settings) =
        commands::sft_settings(args.run.config.as_deref(), &args.run.overrides)
            .map_err(usage_of_override)?;
    let cmd = SftCommand {
        source: source(&args.run),
        data,
        config,
        settings,
        output: output(&args.run, verbosity),
        device: args.run.device.device,
        force: args.run.force,
        ranks: ranks.clone(),
    };
    let last = commands::run_sft(&cmd, &mut rank_progress(ranks, "sft", "loss", verbosity)?)?;
    if ranks.is_root() {
        println!("{}", last.display());
    }
    Ok(())
}

pub(crate) fn run_grpo(args: &GrpoArgs, verbosity: &Verbosity) -> anyhow::Result<()> {
    with_ranks(|ranks| grpo_on_ranks(args, verbosity, ranks))
}

fn grpo_on_ranks(args: &GrpoArgs, verbosity: &Verbosity, ranks: &Ranks) -> anyhow::Result<()> {
    let (config, settings) =
        commands::grpo_settings(args.run.config.as_deref(), &args.run.overrides)
            .map_err(usage_of_override)?;
    let cmd = GrpoCommand {
        source: source(&args.run),
        dataset: args.dataset.clone(),
        plugins: args.plugins.clone(),
        config,
        settings,
        prompt_style: args.prompt.style(),
        output: output(&args.run, verbosity),
        reward_jobs: args
            .reward_jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        execute: if args.execute {
            Some(execute_spec(args)?)
        } else {
            args.execution.check_unused()?;
            None
        },
        device: args.run.device.device,
        force: args.run.force,
        ranks: ranks.clone(),
    };
    let last = commands::run_grpo(
        &cmd,
        &mut rank_progress(ranks, "grpo", "reward", verbosity)?,
    )?;
    if ranks.is_root() {
        println!("{}", last.display());
    }
    Ok(())
}

/// `--execute` and its flags; with `--executor slurm`, the command every array task runs: this
/// binary's `execute-task` with flags written from the definition that parses them.
fn execute_spec(args: &GrpoArgs) -> anyhow::Result<ExecuteSpec> {
    let work_dir = args.run.output.join("executions");
    let execution = &args.execution;
    execution.placement.check_local()?;
    let slurm = match execution.placement.executor {
        swerve_cli::Executor::Local => None,
        swerve_cli::Executor::Slurm => {
            let task = swerve_cli::ExecuteTaskArgs {
                dataset: args.dataset.to_string_lossy().into_owned(),
                workers: execution.max_workers,
                timeout: execution.timeout,
                work_dir: std::path::absolute(&work_dir)
                    .with_context(|| format!("the folder {}", work_dir.display()))?,
            };
            let exe = std::env::current_exe().context("the path of this binary")?;
            let mut command = vec![exe.display().to_string()];
            command.extend(task.to_args());
            Some(commands::SlurmSpec {
                tasks: execution.placement.slurm_tasks,
                sbatch_args: execution.placement.slurm_args.clone(),
                command,
            })
        }
    };
    Ok(ExecuteSpec {
        dataset: args.dataset.clone(),
        workers: execution.max_workers.get(),
        timeout: execution.timeout.get(),
        work_dir,
        slurm,
    })
}

/// `trainer execute-task`: one array task of `grpo --execute --executor slurm`.
#[cfg(feature = "execute")]
pub(crate) fn run_execute_task(args: &swerve_cli::ExecuteTaskArgs) -> anyhow::Result<()> {
    let host = swerve_host::Host::new(commands::plugin_host_config())?;
    let evaluator = host.load_evaluator(
        &swerve_host::bundled::require("swebench-parsers")?,
        &Default::default(),
    )?;
    let config = swerve_harness::execution::ExecuteConfig {
        workers: args.workers.get(),
        timeout: args.timeout.get(),
        work_dir: args.work_dir.clone(),
        ..Default::default()
    };
    swerve_harness::execution::serve_from_env(&args.dataset, config, evaluator)?;
    Ok(())
}

pub(crate) fn run_predict(args: &PredictArgs, verbosity: &Verbosity) -> anyhow::Result<()> {
    let cmd = PredictCommand {
        model: args.model.clone(),
        dataset: args.dataset.clone(),
        prompt_style: args.prompt.style(),
        sampling: SamplingConfig {
            temperature: args.temperature,
            max_new_tokens: args.max_new_tokens,
            seed: args.seed,
            ..SamplingConfig::default()
        },
        batch: args.batch,
        output: args.output.clone(),
        retrieval: args.retriever.map(|r| commands::RetrievalSpec {
            retriever: match r {
                RetrieverArg::Bm25 => swerve_trainer::predict::retrieval::Retriever::Bm25,
                RetrieverArg::Oracle => swerve_trainer::predict::retrieval::Retriever::Oracle,
                RetrieverArg::Model => swerve_trainer::predict::retrieval::Retriever::Model,
            },
            repos: args.repos.clone().unwrap_or_default(),
            max_prompt_tokens: args.max_prompt_tokens,
            localize_max_new_tokens: args.localize_max_new_tokens,
        }),
        device: args.device.device,
    };
    let progress = Progress::new("predict", "task", verbosity)?;
    let summary = commands::run_predict(&cmd, &mut |done, total| {
        progress.set_total(total as u64);
        progress.set(done as u64, None);
    })?;
    progress.clear();
    if !verbosity.quiet {
        let kept = match summary.kept {
            0 => String::new(),
            kept => format!(" ({kept} predictions kept from the interrupted run)"),
        };
        eprintln!(
            "mean swe-rl reward {:.4} over {} completions{kept}",
            summary.mean_reward, summary.predicted
        );
    }
    println!("{}", args.output.display());
    Ok(())
}

pub(crate) fn run_demo(args: &DemoArgs, verbosity: &Verbosity) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => DemoConfig::from_toml_str(&fs_err::read_to_string(path)?)
            .with_context(|| format!("cannot read {}", path.display()))?,
        None => {
            DemoConfig::from_toml_str(demo::BUNDLED_CONFIG).context("the bundled demo settings")?
        }
    };
    let plugins = match (args.plugins.is_empty(), config.demo.execute) {
        (false, _) => args.plugins.clone(),
        (true, false) => vec!["swe-rl".parse::<PluginSpec>()?],
        (true, true) => vec!["swe-rl".parse()?, "tests-fixed".parse()?],
    };
    let rewards = PluginRewards::load(
        &plugins,
        config.grpo.reward_weights.as_deref(),
        commands::plugin_host_config(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    )?;
    let paths = match &args.root {
        Some(root) => demo::repository_paths(root, &args.output),
        None => demo::bundled_paths(&args.output)?,
    };
    let executor = config
        .demo
        .execute
        .then(|| {
            commands::start_executor(&ExecuteSpec {
                dataset: paths.dataset.clone(),
                workers: config.demo.execute_workers,
                timeout: swerve_cli::DEFAULT_EXECUTE_TIMEOUT,
                work_dir: args.output.join("executions"),
                slurm: None,
            })
        })
        .transpose()?;
    let mut sft_bar = progress("sft", "loss", verbosity)?;
    let mut grpo_bar = progress("grpo", "reward", verbosity)?;
    let executor = executor.as_deref();
    let summary = demo::run(
        &config,
        &paths,
        &rewards,
        executor,
        args.device.device,
        &mut |kind, m, s| match kind {
            "sft" => sft_bar(m, s),
            _ => grpo_bar(m, s),
        },
    )?;
    if !verbosity.quiet {
        eprintln!(
            "reward: first tenth {:.4}, last tenth {:.4} over {} GRPO steps; predictions: mean \
             swe-rl reward {:.4}, {} with a patch; {:.0} s",
            summary.reward_first_tenth,
            summary.reward_last_tenth,
            summary.grpo_steps,
            summary.prediction_reward_mean,
            summary.predictions_with_patch,
            summary.seconds.get("total").copied().unwrap_or(0.0),
        );
    }
    println!("{}", args.output.join("summary.json").display());
    Ok(())
}

/// Which run `trainer plan` estimates.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum PlanKind {
    /// `trainer grpo`: generation, a reference model when beta > 0.
    Grpo,
    /// `trainer sft`.
    Sft,
}

/// `trainer plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    /// Model directory (its config.json is read; no weights are loaded)
    #[arg(long)]
    model: PathBuf,
    /// Settings file (TOML, TRL's key names)
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting: KEY=VALUE with a TOML value (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// The run to plan
    #[arg(long, value_enum, default_value = "grpo")]
    kind: PlanKind,
    /// Tokens of the longest prompt (GRPO; SFT plans max_length tokens)
    #[arg(long, default_value_t = 512, value_parser = swerve_cli::count)]
    prompt_tokens: usize,
    #[command(flatten)]
    device: DeviceArgs,
}

/// `trainer plan`: the memory plan a run of these settings would print at its start.
pub(crate) fn run_plan(args: &PlanArgs) -> anyhow::Result<()> {
    use swerve_trainer::model::{KernelMode, ModelConfig};
    use swerve_trainer::train::plan::{self, PlanInputs};
    let dir = commands::model_dir(&args.model)?;
    let model = ModelConfig::from_file(&dir.join("config.json"))?;
    let device = args.device.device;
    device.check_available()?;
    let chunk = 0;
    let inputs = match args.kind {
        PlanKind::Grpo => {
            let c = commands::grpo_config(args.config.as_deref(), &args.overrides)
                .map_err(usage_of_override)?;
            let seq = args
                .prompt_tokens
                .checked_add(c.max_completion_length)
                .filter(|&seq| seq <= model.max_position_embeddings)
                .ok_or_else(|| {
                    swerve_cli::UsageError::new(
                        "--prompt-tokens",
                        args.prompt_tokens.to_string(),
                        format!(
                            "with max_completion_length {} a sequence is longer than the \
                             model's context of {} tokens (max_position_embeddings)",
                            c.max_completion_length, model.max_position_embeddings
                        ),
                    )
                })?;
            PlanInputs {
                model,
                device,
                kernels: KernelMode::Fused,
                rows: c.training.per_device_train_batch_size,
                seq,
                completion: c.max_completion_length,
                gradient_checkpointing: c.training.gradient_checkpointing,
                logits_chunk_rows: chunk,
                reference: c.beta > 0.0,
                generation: Some((c.generation_batch_size(), seq)),
            }
        }
        PlanKind::Sft => {
            let c = commands::sft_config(args.config.as_deref(), &args.overrides)
                .map_err(usage_of_override)?;
            // The longest sequence a run has: max_length, or the model's context where a run
            // would refuse a row past it.
            let seq = c.max_length.min(model.max_position_embeddings);
            PlanInputs {
                model,
                device,
                kernels: KernelMode::Fused,
                rows: c.training.per_device_train_batch_size,
                seq,
                completion: seq.saturating_sub(1),
                gradient_checkpointing: c.training.gradient_checkpointing,
                logits_chunk_rows: chunk,
                reference: false,
                generation: None,
            }
        }
    };
    let plan = inputs.plan();
    let available = plan::device_memory(device);
    println!("{}", plan.render(available));
    if let Some(have) = available.filter(|&have| plan.peak > have) {
        let fits = plan.suggestions(have);
        if fits.is_empty() {
            println!("does not fit; no smaller micro-batch fits either");
        } else {
            println!("does not fit; settings that would: {}", fits.join(", "));
        }
    }
    Ok(())
}
