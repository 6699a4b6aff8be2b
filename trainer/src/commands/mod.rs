//! The library side of the `trainer` subcommands: each takes already parsed, typed arguments,
//! loads what they name, runs, and writes its outputs, so that the binary only parses flags and
//! draws progress. `sft`, `grpo` and `predict` are here; [`demo`] is the bundled end-to-end run,
//! [`loss`] the worked-case evaluation and [`train_tokenizer`] the bundled tokenizer's training.

pub mod demo;
pub mod loss;
pub mod train_tokenizer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[cfg(feature = "execute")]
use swerve_harness::execution::{DatasetSource, ExecuteConfig, PatchExecutor};
use swerve_host::{HostConfig, PluginSpec};

use crate::checkpoint::{self, RunState};
use crate::data::{PromptStyle, Prompter, gold_examples, read_sft_examples, read_tasks};
use crate::device::DeviceSpec;
use crate::error::{CheckpointProblem, Error, IoOp, Result, SettingsError};
use crate::generate::SamplingConfig;
use crate::grpo::GrpoConfig;
use crate::model::{CausalLm, Kernels, safetensors_io};
use crate::predict::retrieval::{ContextSettings, Localize, ModelLocalizer, Retriever};
use crate::predict::{PredictSettings, predict};
use crate::ranks::Ranks;
use crate::report::metrics_log::{ReportTo, StepMetrics};
use crate::tokenizer::Tokenizer;
use crate::train::RunOutput;
use crate::train::driver::{Objective, Resume, Trainer};
use crate::train::grpo_loop::{GrpoInputs, GrpoTrainer};
use crate::train::rewards::{ExecuteError, Executor, PluginRewards};
use crate::train::sft_loop::{SftConfig, SftTrainer};
use crate::train::{origin, plan};
use swerve_swebench::{Instance, Prediction};

/// One `KEY=VALUE` override as a TOML table of one key (a value that is not valid TOML is
/// taken as a string).
fn override_table(item: &str) -> Result<toml::Table> {
    let (key, value) = item.split_once('=').ok_or_else(|| Error::Override {
        item: item.to_owned(),
        source: SettingsError::NotKeyValue,
    })?;
    let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    Ok(toml::Table::from_iter([(key.trim().to_owned(), value)]))
}

/// The settings of a TOML file with `--set` overrides, read by `parse` (which does not
/// validate), and the merged table they came from (what a checkpoint records of its run's
/// settings). A file with a `[section]` table (`[grpo]`, `[sft]`: the bundled demo settings
/// hold both, and `[demo]`) gives that table's settings; any other file is the settings. The
/// file is read alone first and each override alone, so that an error points at the file's own
/// line and column or names the override; then the merged settings.
fn read_settings<T, E>(
    file: Option<&Path>,
    overrides: &[String],
    section: &str,
    parse: impl Fn(&str) -> std::result::Result<T, E>,
) -> Result<(T, toml::Table)>
where
    E: Into<SettingsError>,
{
    let mut table = toml::Table::new();
    if let Some(path) = file {
        let text = fs_err::read_to_string(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
        let settings = |source: SettingsError| Error::Settings {
            path: path.to_path_buf(),
            source,
        };
        table = toml::from_str(&text).map_err(|e| settings(e.into()))?;
        match table.remove(section) {
            Some(toml::Value::Table(own)) => {
                table = own;
                let text = toml::to_string(&table).expect("tables serialise");
                parse(&text).map_err(|e| settings(e.into()))?;
            }
            _ => {
                parse(&text).map_err(|e| settings(e.into()))?;
            }
        }
    }
    for item in overrides {
        let one = override_table(item)?;
        let text = toml::to_string(&one).expect("tables serialise");
        parse(&text).map_err(|e| Error::Override {
            item: item.clone(),
            source: SettingsError::explained(e.into(), one.keys().next().map_or("", |k| k)),
        })?;
        table.extend(one);
    }
    // Each part reads alone, so together they do (a later key replaces an earlier one).
    let text = toml::to_string(&table).expect("tables serialise");
    let settings = parse(&text).map_err(|e| Error::MergedSettings(e.into()))?;
    Ok((settings, table))
}

/// The GRPO settings of a TOML file (TRL's names; its `[grpo]` table when it has one) with
/// `--set` overrides, validated, and the table they came from.
pub fn grpo_settings(
    file: Option<&Path>,
    overrides: &[String],
) -> Result<(GrpoConfig, toml::Table)> {
    let (config, table) = read_settings(file, overrides, "grpo", GrpoConfig::parse_toml)?;
    config.validate().map_err(Error::GrpoConfig)?;
    Ok((config, table))
}

/// The GRPO settings alone ([`grpo_settings`]).
pub fn grpo_config(file: Option<&Path>, overrides: &[String]) -> Result<GrpoConfig> {
    grpo_settings(file, overrides).map(|(config, _)| config)
}

/// The SFT settings of a TOML file (its `[sft]` table when it has one) with `--set` overrides,
/// validated, and the table they came from.
pub fn sft_settings(file: Option<&Path>, overrides: &[String]) -> Result<(SftConfig, toml::Table)> {
    let (config, table) = read_settings(file, overrides, "sft", SftConfig::parse_toml)?;
    config.validate()?;
    Ok((config, table))
}

/// The SFT settings alone ([`sft_settings`]).
pub fn sft_config(file: Option<&Path>, overrides: &[String]) -> Result<SftConfig> {
    sft_settings(file, overrides).map(|(config, _)| config)
}

/// The plugin host's settings: the default budgets and precompile cache.
pub fn plugin_host_config() -> HostConfig {
    HostConfig {
        cache_dir: Some(swerve_host::default_precompile_dir()),
        ..HostConfig::default()
    }
}

/// The split a training command reads from a dataset folder (`train.jsonl`).
pub(crate) const TRAIN_SPLIT: &str = "train";
/// The split `predict` reads from a dataset folder (`test.jsonl`), as `harness run` does.
pub(crate) const TEST_SPLIT: &str = "test";

/// `--execute`: run each completion's patch in the Docker sandbox before scoring, as `harness
/// run` would, so that execution rewards (the `tests-fixed` plugin) see the test results.
#[derive(Debug, Clone)]
pub struct ExecuteSpec {
    /// The harness dataset the task rows belong to (a rows file beside its
    /// `environments.json` and `repos/`, or `swerve-mini`).
    pub dataset: PathBuf,
    /// Containers at once.
    pub workers: usize,
    /// Limit for one instance's tests.
    pub timeout: Duration,
    /// Where each execution's logs go.
    pub work_dir: PathBuf,
    /// Run the executions on a Slurm cluster instead of this machine's engine.
    pub slurm: Option<SlurmSpec>,
}

/// `--execute --executor slurm`: one job array per GRPO step.
#[derive(Debug, Clone)]
pub struct SlurmSpec {
    /// Array tasks per step, at most.
    pub tasks: usize,
    /// Extra `sbatch` arguments.
    pub sbatch_args: Vec<String>,
    /// What every array task runs: a binary (an absolute path) and its `execute-task`
    /// arguments, which the binary that parses them writes.
    pub command: Vec<String>,
}

/// Starts the harness's sandbox executor for `spec`, parsing logs with the bundled
/// `swebench-parsers` evaluator plugin.
#[cfg(feature = "execute")]
pub fn start_executor(spec: &ExecuteSpec) -> Result<Box<dyn Executor>> {
    use swerve_host::Host;
    let fail = |source: ExecuteError| Error::Execute {
        dataset: spec.dataset.clone(),
        source: Box::new(source),
    };
    let source = DatasetSource::resolve(&spec.dataset.to_string_lossy(), "test", None)
        .map_err(|e| fail(e.into()))?;
    if let Some(slurm) = &spec.slurm {
        return crate::train::rewards::SlurmExecutor::start(spec, slurm, &source).map_err(fail);
    }
    let host = Host::new(plugin_host_config()).map_err(Error::Reward)?;
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").map_err(Error::Reward)?,
            &Default::default(),
        )
        .map_err(Error::Reward)?;
    let config = ExecuteConfig {
        workers: spec.workers.max(1),
        timeout: spec.timeout,
        work_dir: spec.work_dir.clone(),
        run_id: format!("trainer-{}", std::process::id()),
        ..ExecuteConfig::default()
    };
    let executor = PatchExecutor::new(source, evaluator, config).map_err(|e| fail(e.into()))?;
    Ok(Box::new(executor))
}

/// Without the `execute` feature the trainer links no container client: `--execute` is refused.
#[cfg(not(feature = "execute"))]
pub fn start_executor(spec: &ExecuteSpec) -> Result<Box<dyn Executor>> {
    Err(Error::Execute {
        dataset: spec.dataset.clone(),
        source: Box::new(ExecuteError::NotBuilt),
    })
}

/// `path` as a model folder: an error naming it when it is not a folder, before any of its files
/// is looked for.
pub fn model_dir(path: &Path) -> Result<&Path> {
    if path.is_dir() {
        Ok(path)
    } else {
        Err(Error::ModelDir {
            path: path.to_path_buf(),
        })
    }
}

/// Where a run starts from.
#[derive(Debug, Clone)]
pub struct ModelSource {
    /// The initial model directory (also the frozen GRPO reference).
    pub model: PathBuf,
    /// A checkpoint of this run to continue from.
    pub resume: Option<PathBuf>,
    /// Continue the checkpoint even when it is another run's (other data, another output
    /// folder): `--allow-other-run`.
    pub allow_other_run: bool,
}

/// Where a run writes.
#[derive(Debug, Clone)]
pub struct OutputSpec {
    /// The output directory: `metrics.jsonl`, `checkpoint-<step>/`, `plots/`.
    pub dir: PathBuf,
    /// Checkpoint every this many steps (0: only at the end).
    pub save_steps: u64,
    /// Where the metrics go besides `metrics.jsonl`.
    pub report_to: ReportTo,
    /// A new run may replace another run's checkpoints and metrics in the folder
    /// (`--overwrite-output-dir`, Hugging Face's name); without it such a folder is refused.
    pub overwrite: bool,
    /// Print the run's memory plan on stderr at its start (not with `-q`).
    pub show_plan: bool,
}

impl OutputSpec {
    /// The checkpoint of `step`.
    fn checkpoint_path(&self, step: u64) -> PathBuf {
        crate::train::checkpoint_path(&self.dir, step)
    }
}

/// `trainer grpo`.
#[derive(Debug, Clone)]
pub struct GrpoCommand {
    /// Initial model and resume point.
    pub source: ModelSource,
    /// Task rows (JSONL with `problem_statement`, `code_context`, `oracle_new_content`).
    pub dataset: PathBuf,
    /// Reward plugins.
    pub plugins: Vec<PluginSpec>,
    /// Settings.
    pub config: GrpoConfig,
    /// The settings table they came from (kept in checkpoints: `--resume` compares it).
    pub settings: toml::Table,
    /// Prompt rendering.
    pub prompt_style: PromptStyle,
    /// Outputs.
    pub output: OutputSpec,
    /// Threads that score rewards.
    pub reward_jobs: usize,
    /// Run each completion's patch before scoring (`--execute`).
    pub execute: Option<ExecuteSpec>,
    /// Where the model trains (with several ranks, `cuda` is each rank's own GPU:
    /// [`DeviceSpec::for_local_rank`]).
    pub device: DeviceSpec,
    /// Start even when the memory plan exceeds the device's memory.
    pub force: bool,
    /// The data-parallel ranks this process is one of.
    pub ranks: Ranks,
}

/// Runs `trainer grpo` on its device; returns the final checkpoint.
pub fn run_grpo(
    cmd: &GrpoCommand,
    on_step: &mut dyn FnMut(&StepMetrics, &RunState),
) -> Result<PathBuf> {
    let device = rank_device(cmd.device, &cmd.ranks);
    crate::on_device!(device, |dev| grpo_on(cmd, device, dev, on_step))
}

/// The device of this process's rank.
fn rank_device(device: DeviceSpec, ranks: &Ranks) -> DeviceSpec {
    device.for_local_rank(ranks.local_rank(), ranks.world_size())
}

/// Rank 0's outputs (`None` elsewhere): the metrics log, event file and checkpoints; rank 0
/// also prints the run's memory `plan`.
fn rank_output(
    spec: &OutputSpec,
    ranks: &Ranks,
    plan: &dyn std::fmt::Display,
    resumed_at: u64,
    tokenizer_json: PathBuf,
) -> Result<Option<RunOutput>> {
    if !ranks.is_root() {
        return Ok(None);
    }
    if resumed_at == 0 {
        claim_output(spec)?;
    }
    if spec.show_plan {
        eprintln!("{plan}");
    }
    RunOutput::in_dir(
        &spec.dir,
        resumed_at,
        spec.save_steps,
        Some(tokenizer_json),
        spec.report_to,
    )
    .map(Some)
}

/// A new run's output folder: refused when it holds another run's checkpoints or metrics
/// (they would mix with this run's), unless the user asked to replace them, which removes them.
fn claim_output(spec: &OutputSpec) -> Result<()> {
    let Ok(entries) = fs_err::read_dir(&spec.dir) else {
        return Ok(());
    };
    let mut checkpoints: Vec<(u64, PathBuf)> = Vec::new();
    let mut others = Vec::new();
    for entry in entries.filter_map(std::result::Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(step) = name
            .strip_prefix("checkpoint-")
            .and_then(|s| s.parse().ok())
        {
            checkpoints.push((step, entry.path()));
        } else if ["metrics.jsonl", "plots"].contains(&name.as_str())
            || name.starts_with("events.out.tfevents")
        {
            others.push(entry.path());
        }
    }
    checkpoints.sort();
    // A folder without checkpoints whose metrics log has no step holds nothing a run finished
    // (one stopped while it loaded its model): it is taken over as it is.
    let no_steps = fs_err::metadata(spec.dir.join("metrics.jsonl")).map_or(true, |m| m.len() == 0);
    if checkpoints.is_empty() && (others.is_empty() || no_steps) {
        return Ok(());
    }
    if !spec.overwrite {
        let (found, resume) = match checkpoints.last() {
            Some((step, path)) => (format!("checkpoint-{step}"), Some(path.clone())),
            None => (
                others[0]
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                None,
            ),
        };
        return Err(Error::Run(crate::train::RunError::OutputInUse {
            dir: spec.dir.clone(),
            found,
            resume,
        }));
    }
    for path in checkpoints.into_iter().map(|(_, p)| p).chain(others) {
        let removed = if path.is_dir() {
            fs_err::remove_dir_all(&path)
        } else {
            fs_err::remove_file(&path)
        };
        removed.map_err(|e| Error::io(IoOp::Remove, &path, e))?;
    }
    Ok(())
}

/// This command line's [`RunOrigin`](checkpoint::RunOrigin), checked against the checkpoint
/// it resumes ([`origin::check_resume`]).
fn run_origin<C: PartialEq, E>(
    source: &ModelSource,
    data: &Path,
    content: &impl serde::Serialize,
    output: &OutputSpec,
    settings: &toml::Table,
    resumed: Option<&RunState>,
    parse: impl Fn(&str) -> std::result::Result<C, E>,
) -> Result<checkpoint::RunOrigin> {
    let now = origin::origin_of(data, content, &output.dir, settings)?;
    if let Some(earlier) = resumed.and_then(|state| state.origin.as_ref()) {
        origin::check_resume(earlier, &now, source.allow_other_run, parse)?;
    }
    Ok(now)
}

fn grpo_on<D: Kernels<f32>>(
    cmd: &GrpoCommand,
    device: DeviceSpec,
    dev: &D,
    on_step: &mut dyn FnMut(&StepMetrics, &RunState),
) -> Result<PathBuf> {
    let tokenizer_path = model_dir(&cmd.source.model)?.join("tokenizer.json");
    let tokenizer = Tokenizer::from_file(&tokenizer_path)?;
    let prompter = Prompter::for_model(cmd.prompt_style, &cmd.source.model)?;
    let tasks = read_tasks(&cmd.dataset, TRAIN_SPLIT)?;
    let rewards = PluginRewards::load(
        &cmd.plugins,
        cmd.config.reward_weights.as_deref(),
        plugin_host_config(),
        cmd.reward_jobs,
    )?;
    if cmd.execute.is_none()
        // One of the two may be empty (a fix that only adds files has no context, one that only
        // deletes them has no new content); a row with neither has nothing to prompt with or
        // score against.
        && let Some(task) = tasks
            .iter()
            .find(|t| t.code_context.is_empty() && t.oracle_new_content.is_empty())
    {
        return Err(Error::Run(crate::train::RunError::TaskWithout {
            dataset: cmd.dataset.clone(),
            instance_id: task.instance_id.clone(),
        }));
    }
    let (policy, resume) = start_model(&cmd.source, dev)?;
    // The frozen reference (the initial weights) only when β > 0, as TRL loads a reference
    // model only then; no copy of the initial weights otherwise.
    let reference = match (cmd.config.beta > 0.0, cmd.source.resume.as_deref()) {
        (false, _) => None,
        (true, None) => Some(policy.clone()),
        // `sync_ref_model` moves the reference: the checkpoint holds where it stood.
        (true, Some(dir)) if cmd.config.sync_ref_model => {
            let folder = model_dir(dir)?.join(checkpoint::REFERENCE_DIR);
            if !folder.is_dir() {
                return Err(Error::Checkpoint {
                    path: dir.to_path_buf(),
                    problem: CheckpointProblem::NoSyncedReference,
                });
            }
            let params = safetensors_io::load_params(&folder, &policy.config, dev)?;
            Some(CausalLm::new(policy.config.clone(), params))
        }
        (true, Some(_)) => Some(CausalLm::<f32, D>::load(&cmd.source.model, dev)?),
    };
    let executor = cmd.execute.as_ref().map(start_executor).transpose()?;
    let mut trainer = GrpoTrainer::new(
        cmd.config.clone(),
        GrpoInputs {
            tasks: &tasks,
            prompter,
            tokenizer: &tokenizer,
            rewards: &rewards,
            executor: executor.as_deref(),
        },
        policy,
        reference,
        resume,
        cmd.ranks.clone(),
    )?;
    // After the trainer checked the checkpoint's kind and ranks: then whether it is this run.
    let resumed = cmd.source.resume.is_some().then_some(&trainer.state);
    let origin = run_origin(
        &cmd.source,
        &cmd.dataset,
        &tasks,
        &cmd.output,
        &cmd.settings,
        resumed,
        GrpoConfig::parse_toml,
    )?;
    trainer.state.origin = Some(origin);
    run_to_end(
        trainer,
        device,
        cmd.force,
        &cmd.output,
        tokenizer_path,
        on_step,
    )
}

/// Runs `trainer` to its end on `device`: rank 0 prints the memory plan (refused when it does
/// not fit, unless `force`), writes the metrics and checkpoints into `spec`'s folder and draws
/// the plots. Returns the final checkpoint.
fn run_to_end<D: Kernels<f32>, O: Objective<D>>(
    mut trainer: Trainer<D, O>,
    device: DeviceSpec,
    force: bool,
    spec: &OutputSpec,
    tokenizer_json: PathBuf,
    on_step: &mut dyn FnMut(&StepMetrics, &RunState),
) -> Result<PathBuf> {
    let plan = plan::check(&trainer.plan_inputs(device).plan(), force)?;
    let resumed_at = trainer.state.step;
    let mut output = rank_output(spec, trainer.ranks(), &plan, resumed_at, tokenizer_json)?;
    trainer.train(output.as_mut(), on_step)?;
    if let Some(output) = &output {
        trainer.plot(output)?;
    }
    Ok(spec.checkpoint_path(trainer.state.step))
}

/// A run's starting model, with what it resumes when it continues a checkpoint.
type Start<D> = (CausalLm<f32, D>, Option<Resume<D>>);

/// The model a run starts from: `source.model`, or the checkpoint `source.resume` with the
/// optimiser and run state it continues with.
fn start_model<D: Kernels<f32>>(source: &ModelSource, dev: &D) -> Result<Start<D>> {
    match source.resume.as_deref() {
        None => Ok((CausalLm::<f32, D>::load(&source.model, dev)?, None)),
        Some(dir) => {
            let (model, optimizer, run) = checkpoint::load_resumable(model_dir(dir)?, dev)?;
            Ok((model, Some((optimizer, run))))
        }
    }
}

/// Where SFT examples come from.
#[derive(Debug, Clone)]
pub enum SftData {
    /// A JSONL file of `{"prompt", "completion"}` lines.
    Pairs(PathBuf),
    /// Task rows, each with its gold SEARCH/REPLACE completion, prompted with this style.
    Gold(PathBuf, PromptStyle),
}

/// `trainer sft`.
#[derive(Debug, Clone)]
pub struct SftCommand {
    /// Initial model and resume point.
    pub source: ModelSource,
    /// The examples.
    pub data: SftData,
    /// Settings.
    pub config: SftConfig,
    /// The settings table they came from (kept in checkpoints: `--resume` compares it).
    pub settings: toml::Table,
    /// Outputs.
    pub output: OutputSpec,
    /// Where the model trains (with several ranks, `cuda` is each rank's own GPU).
    pub device: DeviceSpec,
    /// Start even when the memory plan exceeds the device's memory.
    pub force: bool,
    /// The data-parallel ranks this process is one of.
    pub ranks: Ranks,
}

/// Runs `trainer sft` on its device; returns the final checkpoint.
pub fn run_sft(
    cmd: &SftCommand,
    on_step: &mut dyn FnMut(&StepMetrics, &RunState),
) -> Result<PathBuf> {
    let device = rank_device(cmd.device, &cmd.ranks);
    crate::on_device!(device, |dev| sft_on(cmd, device, dev, on_step))
}

fn sft_on<D: Kernels<f32>>(
    cmd: &SftCommand,
    device: DeviceSpec,
    dev: &D,
    on_step: &mut dyn FnMut(&StepMetrics, &RunState),
) -> Result<PathBuf> {
    let tokenizer_path = model_dir(&cmd.source.model)?.join("tokenizer.json");
    let tokenizer = Tokenizer::from_file(&tokenizer_path)?;
    let examples = match &cmd.data {
        SftData::Pairs(path) => read_sft_examples(path)?,
        SftData::Gold(path, style) => gold_examples(
            &read_tasks(path, TRAIN_SPLIT)?,
            &Prompter::for_model(*style, &cmd.source.model)?,
        )?,
    };
    let (model, resume) = start_model(&cmd.source, dev)?;
    let data = match &cmd.data {
        SftData::Pairs(path) | SftData::Gold(path, _) => path,
    };
    let mut trainer = SftTrainer::new(
        cmd.config.clone(),
        &examples,
        &tokenizer,
        model,
        resume,
        cmd.ranks.clone(),
    )?;
    // After the trainer checked the checkpoint's kind and ranks: then whether it is this run.
    let resumed = cmd.source.resume.is_some().then_some(&trainer.state);
    let origin = run_origin(
        &cmd.source,
        data,
        &examples,
        &cmd.output,
        &cmd.settings,
        resumed,
        SftConfig::parse_toml,
    )?;
    trainer.state.origin = Some(origin);
    run_to_end(
        trainer,
        device,
        cmd.force,
        &cmd.output,
        tokenizer_path,
        on_step,
    )
}

/// `trainer predict`.
#[derive(Debug, Clone)]
pub struct PredictCommand {
    /// The model directory (a checkpoint).
    pub model: PathBuf,
    /// Task rows.
    pub dataset: PathBuf,
    /// Prompt rendering (as in training).
    pub prompt_style: PromptStyle,
    /// Sampling; temperature 0 is greedy.
    pub sampling: SamplingConfig,
    /// Tasks per generation batch.
    pub batch: usize,
    /// The predictions file (SWE-bench JSONL).
    pub output: PathBuf,
    /// Build each row's context from its repository (rows without `code_context`).
    pub retrieval: Option<RetrievalSpec>,
    /// Where the model runs.
    pub device: DeviceSpec,
}

/// `trainer predict --retriever …`: where repositories are and how files are chosen.
#[derive(Debug, Clone)]
pub struct RetrievalSpec {
    /// The retriever.
    pub retriever: Retriever,
    /// Folder of bare mirrors `<owner>/<name>.git`.
    pub repos: PathBuf,
    /// Most prompt tokens (default: the model's context less `max_new_tokens`).
    pub max_prompt_tokens: Option<usize>,
    /// Most new tokens of the model's answer to a localisation prompt (the `model` retriever).
    pub localize_max_new_tokens: usize,
}

/// `--localize-max-new-tokens`'s default: room for a handful of paths.
pub const DEFAULT_LOCALIZE_MAX_NEW_TOKENS: usize = 128;

/// `<output>` with `.retrieval.jsonl` in place of its extension: where retrieval's per-row
/// report goes.
pub(crate) fn retrieval_report_path(output: &Path) -> PathBuf {
    output.with_extension("retrieval.jsonl")
}

/// Writes `text` to `path` whole or not at all, making its folder.
fn write_file(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir).map_err(|e| Error::io(IoOp::CreateDir, dir, e))?;
    }
    swerve_cache::write_atomic(path, text).map_err(|e| Error::io(IoOp::Write, path, e))
}

/// What `trainer predict` did: the mean SWE-RL reward of this run's completions, and how many
/// predictions it kept from an interrupted run it continued.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictSummary {
    /// The mean SWE-RL reward of the completions this run made (0 without any).
    pub mean_reward: f64,
    /// The completions this run made.
    pub predicted: usize,
    /// Predictions kept from an earlier run of the same command.
    pub kept: usize,
}

/// Runs `trainer predict`. `on_batch` sees the tasks done and the total after every generation
/// batch.
///
/// The predictions are written as they are made, one write per batch, to `<output>.partial`
/// ([`swerve_cache::PartialLines`]), renamed over `<output>` when every row is predicted: an
/// interrupted run leaves the previous output untouched and the predictions made so far, which
/// the same command continues (the key is the model's files, the dataset and the settings that
/// change a prediction; rows sample as their place in the dataset says, so a continued run's
/// predictions are those of an uninterrupted one).
pub fn run_predict(
    cmd: &PredictCommand,
    on_batch: &mut dyn FnMut(usize, usize),
) -> Result<PredictSummary> {
    // The output is opened before the model loads: a folder or an unwritable path is refused
    // at once, not after every generation.
    if cmd.output.is_dir() {
        return Err(Error::io(
            IoOp::Write,
            &cmd.output,
            std::io::Error::other("--output is a folder; name a predictions file"),
        ));
    }
    if let Some(dir) = cmd.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir).map_err(|e| Error::io(IoOp::CreateDir, dir, e))?;
    }
    let key = predict_key(cmd)?;
    let (partial, reopened) = swerve_cache::PartialLines::open(&cmd.output, &key)
        .map_err(|e| Error::io(IoOp::Write, &cmd.output, e))?;
    if reopened == swerve_cache::Reopened::Restarted {
        tracing::warn!(
            "{} was another run's (other model, dataset or settings): starting over",
            partial.partial_path().display()
        );
    }
    swerve_interrupt::set_resume_hint(Some(format!(
        "the predictions made so far are kept in {}; run the same command again to continue after them",
        partial.partial_path().display()
    )));
    let summary = crate::on_device!(cmd.device, |dev| predict_on(cmd, dev, partial, on_batch))?;
    swerve_interrupt::set_resume_hint(None);
    Ok(summary)
}

/// The key of a `trainer predict` run's partial output: the model's and the dataset's files
/// (path, size, modification time) and every setting that changes a prediction (not `--batch`:
/// a row's sample does not depend on it).
fn predict_key(cmd: &PredictCommand) -> Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut add = |path: &Path| -> Result<()> {
        let meta = fs_err::metadata(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
        hasher.update(format!(
            "{}\0{}\0{:?}\n",
            path.display(),
            meta.len(),
            meta.modified().ok()
        ));
        Ok(())
    };
    add(&cmd.dataset)?;
    let dir = model_dir(&cmd.model)?;
    let mut files: Vec<PathBuf> = fs_err::read_dir(dir)
        .map_err(|e| Error::io(IoOp::Read, dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    for file in &files {
        add(file)?;
    }
    hasher.update(format!(
        "{:?}\n{:?}\n{:?}\n",
        cmd.prompt_style, cmd.sampling, cmd.retrieval
    ));
    Ok(hex::encode(hasher.finalize()))
}

fn predict_on<D: Kernels<f32>>(
    cmd: &PredictCommand,
    dev: &D,
    mut partial: swerve_cache::PartialLines,
    on_batch: &mut dyn FnMut(usize, usize),
) -> Result<PredictSummary> {
    let partial_file = partial.partial_path().to_owned();
    let write_err = |e| Error::io(IoOp::Write, &partial_file, e);
    let tokenizer = Tokenizer::from_file(&model_dir(&cmd.model)?.join("tokenizer.json"))?;
    let prompter = Prompter::for_model(cmd.prompt_style, &cmd.model)?;
    let model = CausalLm::<f32, D>::load(&cmd.model, dev)?;
    let mut tasks = read_tasks(&cmd.dataset, TEST_SPLIT)?;
    let sampling = SamplingConfig {
        eos_token_ids: model.config.eos_token_ids.clone(),
        pad_token_id: crate::train::batch::pad_token(&model),
        ..cmd.sampling.clone()
    };
    let model_name = cmd.model.display().to_string();
    // Rows without a context (a missing mirror or commit, nothing fits): an empty prediction.
    let mut failed = BTreeMap::new();
    if let Some(spec) = &cmd.retrieval {
        let budget = spec.max_prompt_tokens.unwrap_or_else(|| {
            model
                .config
                .max_position_embeddings
                .saturating_sub(sampling.max_new_tokens)
        });
        let settings = ContextSettings {
            retriever: spec.retriever,
            repos: &spec.repos,
            prompter: &prompter,
            tokenizer: &tokenizer,
            max_prompt_tokens: budget,
        };
        let mut localizer = (spec.retriever == Retriever::Model).then(|| {
            ModelLocalizer::new(&model, &tokenizer, &sampling, spec.localize_max_new_tokens)
        });
        let mut lines = String::new();
        let mut reports = Vec::new();
        for task in &mut tasks {
            let localize = localizer.as_mut().map(|l| l as &mut dyn Localize);
            let report = crate::predict::retrieval::fill_context(task, &settings, localize)?;
            if let Some(error) = &report.error {
                eprintln!(
                    "{}: {error}; predicted with an empty patch",
                    task.instance_id
                );
                failed.insert(task.instance_id.clone(), ());
            }
            lines.push_str(&serde_json::to_string(&report).expect("json"));
            lines.push('\n');
            reports.push(report);
        }
        let path = retrieval_report_path(&cmd.output);
        write_file(&path, &lines)?;
        eprintln!("{}", crate::predict::retrieval::summary(&reports, budget));
    }
    let order: Vec<String> = tasks.iter().map(|t| t.instance_id.clone()).collect();
    // The kept predictions are the dataset's first rows, in its order.
    let kept = partial.done();
    let kept_ids: Vec<String> = partial
        .kept_lines()
        .map_err(write_err)?
        .iter()
        .map(|line| serde_json::from_str::<Prediction>(line).map(|p| p.instance_id))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| write_err(std::io::Error::other(e)))?;
    if kept > order.len() || kept_ids[..] != order[..kept] {
        return Err(write_err(std::io::Error::other(
            "the kept predictions are not the dataset's first rows; remove the .partial file",
        )));
    }
    let (to_generate, _): (Vec<Instance>, Vec<Instance>) = tasks
        .into_iter()
        .partition(|t| !failed.contains_key(&t.instance_id));
    let start = order[..kept]
        .iter()
        .filter(|id| !failed.contains_key(*id))
        .count();
    let empty = |id: &str| Prediction {
        instance_id: id.to_owned(),
        model_name_or_path: Some(model_name.clone()),
        model_patch: Some(String::new()),
    };
    // Lines go out in the dataset's order: before each prediction, the rows without a context
    // that come before it, with an empty patch.
    let mut next = kept;
    let emit = |partial: &mut swerve_cache::PartialLines, prediction: &Prediction| {
        let line = serde_json::to_vec(prediction).expect("predictions serialise");
        partial.write_line(&line);
    };
    let total_rows = to_generate.len();
    let predicted = predict(
        &model,
        &tokenizer,
        &to_generate[start..],
        PredictSettings {
            prompter: &prompter,
            sampling: &sampling,
            batch: cmd.batch,
            model_name: &model_name,
            first_row: start,
        },
        &mut |batch, done, _| {
            for p in batch {
                while order[next] != p.prediction.instance_id {
                    emit(&mut partial, &empty(&order[next]));
                    next += 1;
                }
                emit(&mut partial, &p.prediction);
                next += 1;
            }
            partial.flush().map_err(write_err)?;
            on_batch(start + done, total_rows);
            Ok(())
        },
    )?;
    for id in &order[next..] {
        emit(&mut partial, &empty(id));
    }
    partial.commit().map_err(write_err)?;
    let total: f64 = predicted.iter().map(|p| p.swe_rl_reward).sum();
    Ok(PredictSummary {
        mean_reward: total / predicted.len().max(1) as f64,
        predicted: predicted.len(),
        kept,
    })
}
