//! The bundled end-to-end run (`trainer demo`): on the swerve-mini dataset, from random weights
//! to SWE-bench predictions on a CPU in minutes.
//!
//! 1. Tokenizer: the project's tiny BPE tokenizer (`trainer/assets/tiny/tokenizer.json`, or
//!    trained the same way by `trainer tokenizer` when the asset is missing).
//! 2. Model: the tiny Qwen2 config (`trainer/assets/tiny/config.json` when present) with the
//!    run config's `[model]` keys laid over it, random weights from the seed.
//! 3. Data: each task's issue title and its changed regions ± `focus_lines` lines
//!    ([`crate::prompt::focus`]), prompted with [`PromptFormat::Bare`]; gold completions
//!    rendered as SEARCH/REPLACE blocks ([`crate::data::gold_completion`]).
//! 4. SFT (`[sft]`) on the gold completions, then GRPO (`[grpo]`) with the `swe-rl` reward
//!    plugin (or the plugins given); with `[demo] execute = true` every completion also runs in
//!    the Docker sandbox first and the `tests-fixed` execution reward joins in.
//! 5. Plots of both runs, and `predictions.jsonl` from the final checkpoint (greedy decoding),
//!    in the layout `harness run --predictions` reads.
//!
//! Everything is seeded: the same config and seed give the same metrics files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::checkpoint;
use crate::checkpoint::RunState;
use crate::data::{PromptStyle, Prompter, gold_examples, read_tasks};
use crate::device::DeviceSpec;
use crate::error::{Error, IoOp, Result};
use crate::generate::SamplingConfig;
use crate::grpo::GrpoConfig;
use crate::model::{CausalLm, Kernels, ModelConfig, ModelParams};
use crate::predict::{PredictSettings, predict};
use crate::prompt::PromptFormat;
use crate::ranks::Ranks;
use crate::report::metrics_log::{ReportTo, StepMetrics};
use crate::tokenizer::Tokenizer;
use crate::train::RunOutput;
use crate::train::grpo_loop::{GrpoInputs, GrpoTrainer};
use crate::train::rewards::{Executor, RewardFunctions};
use crate::train::sft_loop::{SftConfig, SftTrainer};
use swerve_swebench::Instance;

/// `model_name_or_path` of the demo's predictions (`harness run` names its run report
/// `swerve-mini-tiny.<run id>.json` after it).
pub(crate) const PREDICTIONS_MODEL_NAME: &str = "swerve-mini-tiny";

/// The bundled run's settings (`trainer/configs/swerve-mini-tiny.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoConfig {
    /// Model and data settings.
    pub demo: DemoSettings,
    /// Hugging Face `config.json` keys laid over the base tiny config.
    #[serde(default)]
    pub model: serde_json::Map<String, serde_json::Value>,
    /// The supervised warm-up.
    pub sft: SftConfig,
    /// The GRPO run.
    pub grpo: GrpoConfig,
}

/// The `[demo]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoSettings {
    /// Seed of the initial weights (the runs have their own `seed`s). Default 0.
    #[serde(default)]
    pub init_seed: u64,
    /// Standard deviation of the initial weights. Default 0.02.
    #[serde(default = "default_init_std")]
    pub init_std: f64,
    /// Context lines around each changed region in prompts. Default 3.
    #[serde(default = "default_focus")]
    pub focus_lines: usize,
    /// Show only the first line (the title) of each issue. Default true.
    #[serde(default = "default_true")]
    pub issue_title_only: bool,
    /// Most new tokens per prediction. Default 256.
    #[serde(default = "default_predict_tokens")]
    pub predict_max_new_tokens: usize,
    /// Run every GRPO completion's patch in the Docker sandbox and add the `tests-fixed`
    /// execution reward (`trainer grpo --execute`). Default false: the bundled run's time
    /// budget has no room for a container per completion on two cores.
    #[serde(default)]
    pub execute: bool,
    /// Containers at once when `execute` is on. Default 2.
    #[serde(default = "default_execute_workers")]
    pub execute_workers: usize,
}

fn default_execute_workers() -> usize {
    2
}

fn default_init_std() -> f64 {
    0.02
}
fn default_focus() -> usize {
    3
}
fn default_true() -> bool {
    true
}
fn default_predict_tokens() -> usize {
    256
}

impl DemoConfig {
    /// Parses the TOML file.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let config: Self = toml::from_str(text).map_err(|e| Error::DemoConfig(e.into()))?;
        config.sft.validate()?;
        config.grpo.validate().map_err(Error::GrpoConfig)?;
        Ok(config)
    }
}

/// Where the demo finds the project's files.
#[derive(Debug, Clone)]
pub struct DemoPaths {
    /// The task rows (`swerve-mini.jsonl`).
    pub dataset: PathBuf,
    /// The tiny model assets (`trainer/assets/tiny`): `config.json`, `tokenizer.json`.
    pub assets: PathBuf,
    /// The repository root, when running from one (for training the tokenizer when the asset
    /// is missing).
    pub repo_root: Option<PathBuf>,
    /// Where everything is written.
    pub out: PathBuf,
}

/// The numbers a demo run reports (`summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoSummary {
    /// GRPO steps run.
    pub grpo_steps: u64,
    /// Mean `reward` over the first tenth of the GRPO steps.
    pub reward_first_tenth: f64,
    /// Mean `reward` over the last tenth.
    pub reward_last_tenth: f64,
    /// `reward` per GRPO step.
    pub reward_curve: Vec<f64>,
    /// SFT loss of the first and the last step.
    pub sft_loss_first_last: (f64, f64),
    /// Mean SWE-RL reward of the greedy predictions of the final checkpoint.
    pub prediction_reward_mean: f64,
    /// Predictions with a non-empty patch.
    pub predictions_with_patch: usize,
    /// Wall-clock seconds per phase: `sft`, `grpo`, `predict`, `total`.
    pub seconds: BTreeMap<String, f64>,
}

/// Runs the whole pipeline; `rewards` scores the GRPO completions, after `executor` ran them
/// when given; `on_step` sees every step of both runs (`"sft"` or `"grpo"`). The model trains
/// and predicts on `device`.
pub fn run(
    config: &DemoConfig,
    paths: &DemoPaths,
    rewards: &dyn RewardFunctions,
    executor: Option<&dyn Executor>,
    device: DeviceSpec,
    on_step: &mut dyn FnMut(&str, &StepMetrics, &RunState),
) -> Result<DemoSummary> {
    crate::on_device!(device, |dev| run_on(
        config, paths, rewards, executor, dev, on_step
    ))
}

fn run_on<D: Kernels<f32>>(
    config: &DemoConfig,
    paths: &DemoPaths,
    rewards: &dyn RewardFunctions,
    executor: Option<&dyn Executor>,
    dev: &D,
    on_step: &mut dyn FnMut(&str, &StepMetrics, &RunState),
) -> Result<DemoSummary> {
    let started = Instant::now();
    let mut seconds = BTreeMap::new();
    fs_err::create_dir_all(&paths.out).map_err(|e| Error::io(IoOp::CreateDir, &paths.out, e))?;
    let tokenizer_path = tokenizer_file(paths)?;
    let tokenizer = Tokenizer::from_file(&tokenizer_path)?;
    let model_config = model_config(config, paths, &tokenizer)?;
    let init = CausalLm::new(
        model_config.clone(),
        ModelParams::random(
            &model_config,
            dev,
            config.demo.init_seed,
            config.demo.init_std,
        ),
    );
    let init_dir = paths.out.join("init");
    checkpoint::save(&init_dir, &init, Some(&tokenizer_path), None, None)?;
    tracing::info!(
        parameters = init.params.num_parameters(),
        dir = %init_dir.display(),
        "initial model"
    );

    let tasks = demo_tasks(
        &read_tasks(&paths.dataset, super::TRAIN_SPLIT)?,
        config.demo.issue_title_only,
    );
    let style = PromptStyle {
        format: PromptFormat::Bare,
        focus: Some(config.demo.focus_lines),
    };
    let prompter = Prompter::from(style);

    // Supervised warm-up.
    let phase = Instant::now();
    let sft_dir = paths.out.join("sft");
    let examples = gold_examples(&tasks, &prompter)?;
    let mut sft = SftTrainer::new(
        config.sft.clone(),
        &examples,
        &tokenizer,
        init,
        None,
        Ranks::single(),
    )?;
    let mut output = RunOutput::in_dir(
        &sft_dir,
        0,
        0,
        Some(tokenizer_path.clone()),
        ReportTo::Tensorboard,
    )?;
    output.resumed_by_flag = false;
    sft.train(Some(&mut output), &mut |m, s| on_step("sft", m, s))?;
    let sft_checkpoint = output.checkpoint_path(sft.state.step);
    let sft_history = sft.plot(&output)?;
    seconds.insert("sft".to_owned(), phase.elapsed().as_secs_f64());

    // GRPO from the warmed-up weights.
    let phase = Instant::now();
    let grpo_dir = paths.out.join("grpo");
    let warm = sft.model;
    let reference = (config.grpo.beta > 0.0).then(|| warm.clone());
    let mut grpo = GrpoTrainer::new(
        config.grpo.clone(),
        GrpoInputs {
            tasks: &tasks,
            prompter: prompter.clone(),
            tokenizer: &tokenizer,
            rewards,
            executor,
        },
        warm,
        reference,
        None,
        Ranks::single(),
    )?;
    let mut output = RunOutput::in_dir(
        &grpo_dir,
        0,
        0,
        Some(tokenizer_path.clone()),
        ReportTo::Tensorboard,
    )?;
    output.resumed_by_flag = false;
    grpo.train(Some(&mut output), &mut |m, s| on_step("grpo", m, s))?;
    let final_checkpoint = output.checkpoint_path(grpo.state.step);
    let history = grpo.plot(&output)?;
    seconds.insert("grpo".to_owned(), phase.elapsed().as_secs_f64());

    // Predictions from the final checkpoint, as `trainer predict` makes them.
    let phase = Instant::now();
    let model = CausalLm::<f32, D>::load(&final_checkpoint, dev)?;
    let sampling = SamplingConfig {
        temperature: 0.0,
        max_new_tokens: config.demo.predict_max_new_tokens,
        eos_token_ids: model.config.eos_token_ids.clone(),
        pad_token_id: crate::train::batch::pad_token(&model),
        ..SamplingConfig::default()
    };
    let predicted = predict(
        &model,
        &tokenizer,
        &tasks,
        PredictSettings {
            prompter: &prompter,
            sampling: &sampling,
            batch: tasks.len(),
            model_name: PREDICTIONS_MODEL_NAME,
            first_row: 0,
        },
        &mut |_, _, _| Ok(()),
    )?;
    let predictions_path = paths.out.join("predictions.jsonl");
    let lines: String = predicted
        .iter()
        .map(|p| serde_json::to_string(&p.prediction).expect("predictions serialise") + "\n")
        .collect();
    swerve_cache::write_atomic(&predictions_path, lines)
        .map_err(|e| Error::io(IoOp::Write, &predictions_path, e))?;
    seconds.insert("predict".to_owned(), phase.elapsed().as_secs_f64());
    seconds.insert("total".to_owned(), started.elapsed().as_secs_f64());

    let curve: Vec<f64> = history
        .iter()
        .map(|m| m.values.get("reward").copied().unwrap_or(f64::NAN))
        .collect();
    let tenth = curve.len().div_ceil(10).max(1);
    let loss = |m: Option<&StepMetrics>| m.and_then(|m| m.get("loss")).unwrap_or(f64::NAN);
    let summary = DemoSummary {
        grpo_steps: grpo.state.step,
        reward_first_tenth: mean(&curve[..tenth.min(curve.len())]),
        reward_last_tenth: mean(&curve[curve.len().saturating_sub(tenth)..]),
        reward_curve: curve,
        sft_loss_first_last: (loss(sft_history.first()), loss(sft_history.last())),
        prediction_reward_mean: mean(
            &predicted
                .iter()
                .map(|p| p.swe_rl_reward)
                .collect::<Vec<_>>(),
        ),
        predictions_with_patch: predicted
            .iter()
            .filter(|p| !p.prediction.is_empty_patch())
            .count(),
        seconds,
    };
    let summary_path = paths.out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).expect("summary serialises");
    swerve_cache::write_atomic(&summary_path, text)
        .map_err(|e| Error::io(IoOp::Write, &summary_path, e))?;
    tracing::info!(checkpoint = %sft_checkpoint.display(), "SFT checkpoint");
    Ok(summary)
}

/// The tasks as the demo shows them: the issue cut to its title when asked.
pub(crate) fn demo_tasks(tasks: &[Instance], title_only: bool) -> Vec<Instance> {
    tasks
        .iter()
        .map(|t| Instance {
            problem_statement: if title_only {
                t.problem_statement
                    .as_deref()
                    .map(|p| p.lines().next().unwrap_or("").to_owned())
            } else {
                t.problem_statement.clone()
            },
            ..t.clone()
        })
        .collect()
}

/// The tiny tokenizer: the committed asset, or one trained the same way into the output folder.
fn tokenizer_file(paths: &DemoPaths) -> Result<PathBuf> {
    let asset = paths.assets.join("tokenizer.json");
    if asset.exists() {
        return Ok(asset);
    }
    let Some(root) = &paths.repo_root else {
        return Err(Error::io(
            IoOp::Read,
            &asset,
            std::io::ErrorKind::NotFound.into(),
        ));
    };
    let out = paths.out.join("tokenizer").join("tokenizer.json");
    let spec = crate::commands::train_tokenizer::TokenizerSpec::bundled(root);
    crate::commands::train_tokenizer::run(&spec, &out).map_err(|source| Error::TokenizerTrain {
        path: out.clone(),
        source,
    })?;
    Ok(out)
}

/// The base tiny config with the `[model]` keys laid over it; the vocabulary follows the
/// tokenizer.
fn model_config(
    config: &DemoConfig,
    paths: &DemoPaths,
    tokenizer: &Tokenizer,
) -> Result<ModelConfig> {
    let asset = paths.assets.join("config.json");
    let mut json = if asset.exists() {
        let text = fs_err::read_to_string(&asset).map_err(|e| Error::io(IoOp::Read, &asset, e))?;
        serde_json::from_str::<serde_json::Value>(&text).map_err(|source| Error::Json {
            path: asset.clone(),
            source,
        })?
    } else {
        serde_json::json!({
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_act": "silu",
            "hidden_size": 64,
            "intermediate_size": 176,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "tie_word_embeddings": true,
        })
    };
    let obj = json.as_object_mut().ok_or_else(|| Error::Config {
        field: "config.json",
        reason: "not a JSON object".into(),
    })?;
    for (k, v) in &config.model {
        obj.insert(k.clone(), v.clone());
    }
    obj.insert("vocab_size".into(), tokenizer.vocab_size().into());
    if let Some(eos) = tokenizer.token_id("<|endoftext|>") {
        obj.entry("eos_token_id").or_insert(eos.into());
    }
    ModelConfig::from_json(json)
}

fn mean(values: &[f64]) -> f64 {
    let defined: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    defined.iter().sum::<f64>() / defined.len() as f64
}

/// The locations inside the repository at `root`, writing to `out`.
pub fn repository_paths(root: &Path, out: &Path) -> DemoPaths {
    DemoPaths {
        dataset: root.join("harness/datasets/swerve-mini/swerve-mini.jsonl"),
        assets: root.join("trainer/assets/tiny"),
        repo_root: Some(root.to_path_buf()),
        out: out.to_path_buf(),
    }
}

/// The bundled run's settings (`trainer/configs/swerve-mini-tiny.toml`), carried by the binary.
pub const BUNDLED_CONFIG: &str = include_str!("../../configs/swerve-mini-tiny.toml");

/// The tiny model's assets (`trainer/assets/tiny`), carried by the binary.
const TINY_ASSETS: &[(&str, &[u8])] = &[
    (
        "config.json",
        include_bytes!("../../assets/tiny/config.json"),
    ),
    (
        "tokenizer.json",
        include_bytes!("../../assets/tiny/tokenizer.json"),
    ),
];

/// The files the binary carries (the tiny assets and `swerve-mini`), written once into swerve's
/// cache folder, writing to `out`: what `trainer demo` uses outside a source tree.
pub fn bundled_paths(out: &Path) -> Result<DemoPaths> {
    let write = |kind: &str, name: &str, files| {
        swerve_cache::materialise(kind, name, files)
            .map_err(|e| Error::io(IoOp::Write, swerve_cache::cache_root().join(kind), e))
    };
    let dataset = write(
        "datasets",
        swerve_swebench::bundled::SWERVE_MINI,
        swerve_swebench::bundled::SWERVE_MINI_FILES,
    )?;
    Ok(DemoPaths {
        dataset: dataset.join(swerve_swebench::bundled::SWERVE_MINI_ROWS),
        assets: write("trainer-assets", "tiny", TINY_ASSETS)?,
        repo_root: None,
        out: out.to_path_buf(),
    })
}
