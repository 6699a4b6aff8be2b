//! Whole training runs on the tiny fixture model (vocabulary `w0 … w60`): GRPO is a function of
//! its seed, resuming from a checkpoint continues exactly like the uninterrupted run, and SFT
//! lowers its loss.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dfdx::prelude::Cpu;
use swerve_host::Execution;
use swerve_swebench::Instance;
use swerve_trainer::checkpoint;
use swerve_trainer::data::{PromptStyle, SftExample};
use swerve_trainer::grpo::GrpoConfig;
use swerve_trainer::model::CausalLm;
use swerve_trainer::prompt::PromptFormat;
use swerve_trainer::ranks::Ranks;
use swerve_trainer::report::metrics_log::{self, ReportTo, StepMetrics};
use swerve_trainer::tokenizer::Tokenizer;
use swerve_trainer::train::RunOutput;
use swerve_trainer::train::arguments::TrainingArguments;
use swerve_trainer::train::grpo_loop::{GrpoInputs, GrpoTrainer};
use swerve_trainer::train::rewards::{FnExecutor, FnRewards};
use swerve_trainer::train::sft_loop::{SftConfig, SftTrainer};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2")
}

fn tasks() -> Vec<Instance> {
    (0..4)
        .map(|i| Instance {
            instance_id: format!("t__t-{i}"),
            problem_statement: Some(format!("w{i} w{} w{}", i + 10, i + 20)),
            ..Instance::default()
        })
        .collect()
}

/// Rewards completions by how often they say `w7` (and, as a second function, by length).
fn rewards() -> FnRewards {
    FnRewards {
        functions: vec![
            (
                "sevens".into(),
                1.0,
                Box::new(|s| {
                    let words = s.completion.split_whitespace().count().max(1);
                    Some(s.completion.matches("w7").count() as f64 / words as f64)
                }),
            ),
            (
                "short".into(),
                0.1,
                Box::new(|s| Some(-(s.completion.len() as f64) / 100.0)),
            ),
        ],
    }
}

fn config(beta: f64, num_iterations: usize) -> GrpoConfig {
    GrpoConfig::from_toml_str(&format!(
        r#"
        learning_rate = 5e-3
        lr_scheduler_type = "cosine"
        warmup_steps = 1
        max_steps = 4
        num_generations = 4
        per_device_train_batch_size = 4
        gradient_accumulation_steps = 2
        max_completion_length = 6
        beta = {beta}
        epsilon_high = 0.28
        num_iterations = {num_iterations}
        seed = 7
        "#
    ))
    .unwrap()
}

/// Metrics without the wall-clock ones.
fn comparable(history: &[StepMetrics]) -> Vec<BTreeMap<String, f64>> {
    history
        .iter()
        .map(|m| {
            m.values
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "step_time" | "tokens_per_second"))
                .map(|(k, v)| (k.clone(), if v.is_nan() { -999.0 } else { *v }))
                .collect()
        })
        .collect()
}

/// Runs GRPO in `dir` (resuming from `resume` when given) up to `stop_after` steps.
fn grpo_run(
    config: &GrpoConfig,
    dir: &Path,
    resume: Option<&Path>,
    stop_after: u64,
) -> Vec<StepMetrics> {
    let dev = Cpu::default();
    let tokenizer = Tokenizer::from_file(&fixture().join("tokenizer.json")).unwrap();
    let initial = CausalLm::<f32, Cpu>::load(&fixture(), &dev).unwrap();
    let tasks = tasks();
    let rewards = rewards();
    let (policy, resumed) = match resume {
        Some(ckpt) => {
            let (model, opt, run) = checkpoint::load_resumable(ckpt, &dev).unwrap();
            (model, Some((opt, run)))
        }
        None => (initial.clone(), None),
    };
    let resumed_at = resumed.as_ref().map_or(0, |(_, s)| s.step);
    let mut trainer = GrpoTrainer::new(
        config.clone(),
        GrpoInputs {
            tasks: &tasks,
            prompter: PromptStyle {
                format: PromptFormat::Bare,
                focus: None,
            }
            .into(),
            tokenizer: &tokenizer,
            rewards: &rewards,
            executor: None,
        },
        policy,
        (config.beta > 0.0).then(|| initial.clone()),
        resumed,
        Ranks::single(),
    )
    .unwrap();
    let mut output = RunOutput::in_dir(dir, resumed_at, 2, None, ReportTo::Jsonl).unwrap();
    while trainer.state.step < stop_after {
        let m = trainer.step().unwrap();
        output.metrics.append(&m).unwrap();
        if output.due(trainer.state.step) {
            trainer.save(&output).unwrap();
        }
    }
    metrics_log::read(output.metrics.path()).unwrap()
}

#[test]
fn same_seed_same_metrics() {
    let config = config(0.04, 1);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = grpo_run(&config, a.path(), None, 4);
    let second = grpo_run(&config, b.path(), None, 4);
    assert_eq!(first.len(), 4);
    for name in [
        "reward",
        "rewards/sevens/mean",
        "kl",
        "loss",
        "grad_norm",
        "entropy",
    ] {
        assert!(
            first[3].values.contains_key(name),
            "{name} missing: {:?}",
            first[3]
        );
    }
    assert!(
        first[3].get("kl").unwrap() > 0.0,
        "the policy moved away from the reference"
    );
    assert_eq!(comparable(&first), comparable(&second));
    let other = grpo_run(
        &GrpoConfig {
            training: TrainingArguments {
                seed: 8,
                ..config.training.clone()
            },
            ..config.clone()
        },
        tempfile::tempdir().unwrap().path(),
        None,
        4,
    );
    assert_ne!(comparable(&first), comparable(&other), "the seed matters");
}

#[test]
fn resume_equals_uninterrupted() {
    // μ = 2 also exercises stored old log-probs and a generation batch spanning two steps; the
    // adaptive entropy controller's state travels in the checkpoint.
    let adaptive = GrpoConfig {
        use_adaptive_entropy: true,
        entropy_coef: 0.01,
        entropy_target: 100.0,
        ..config(0.0, 1)
    };
    for config in [config(0.0, 1), config(0.04, 2), adaptive] {
        let whole = tempfile::tempdir().unwrap();
        let uninterrupted = grpo_run(&config, whole.path(), None, 4);
        let split = tempfile::tempdir().unwrap();
        grpo_run(&config, split.path(), None, 3);
        let resumed = grpo_run(
            &config,
            split.path(),
            Some(&split.path().join("checkpoint-2")),
            4,
        );
        assert_eq!(resumed.len(), 4);
        assert_eq!(
            comparable(&uninterrupted),
            comparable(&resumed),
            "{config:?}"
        );
    }
}

#[test]
fn sft_loss_decreases() {
    let dev = Cpu::default();
    let tokenizer = Tokenizer::from_file(&fixture().join("tokenizer.json")).unwrap();
    let model = CausalLm::<f32, Cpu>::load(&fixture(), &dev).unwrap();
    let examples: Vec<SftExample> = (0..6)
        .map(|i| SftExample {
            prompt: format!("w{i} w{}", i + 1),
            completion: format!("w{} w{} w{} w40", i + 30, i + 31, i + 32),
            add_special_tokens: true,
        })
        .collect();
    let config = SftConfig {
        training: TrainingArguments {
            learning_rate: 1e-2,
            max_steps: 30,
            per_device_train_batch_size: 3,
            gradient_accumulation_steps: 2,
            warmup_steps: 2,
            ..SftConfig::default().training
        },
        ..SftConfig::default()
    };
    let mut trainer =
        SftTrainer::new(config, &examples, &tokenizer, model, None, Ranks::single()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut output = RunOutput::in_dir(dir.path(), 0, 0, None, ReportTo::Jsonl).unwrap();
    trainer.train(Some(&mut output), &mut |_, _| {}).unwrap();
    let history = metrics_log::read(output.metrics.path()).unwrap();
    let loss = |i: usize| history[i].get("loss").unwrap();
    assert_eq!(history.len(), 30);
    assert!(loss(29) < 0.3 * loss(0), "{} → {}", loss(0), loss(29));
    // The final checkpoint is a model directory `trainer generate` loads.
    let last = output.checkpoint_path(30);
    CausalLm::<f32, Cpu>::load(&last, &dev).unwrap();
}

#[test]
fn every_completion_is_executed_before_it_is_scored() {
    let dev = Cpu::default();
    let tokenizer = Tokenizer::from_file(&fixture().join("tokenizer.json")).unwrap();
    let initial = CausalLm::<f32, Cpu>::load(&fixture(), &dev).unwrap();
    let tasks = tasks();
    let submitted = Mutex::new(Vec::new());
    let executor = FnExecutor(|task: &Instance, patch: &str| {
        submitted
            .lock()
            .unwrap()
            .push((task.instance_id.clone(), patch.to_owned()));
        Execution {
            patch_applied: true,
            resolved: task.instance_id == "t__t-1",
            ..Execution::default()
        }
    });
    // Rewards only what the executor said: `None` (left out) for an unexecuted sample.
    let rewards = FnRewards {
        functions: vec![(
            "resolved".into(),
            1.0,
            Box::new(|s| {
                s.execution
                    .as_ref()
                    .map(|e| f64::from(u8::from(e.resolved)))
            }),
        )],
    };
    let config = config(0.0, 1);
    let mut trainer = GrpoTrainer::new(
        config.clone(),
        GrpoInputs {
            tasks: &tasks,
            prompter: PromptStyle {
                format: PromptFormat::Bare,
                focus: None,
            }
            .into(),
            tokenizer: &tokenizer,
            rewards: &rewards,
            executor: Some(&executor),
        },
        initial,
        None,
        None,
        Ranks::single(),
    )
    .unwrap();
    for _ in 0..2 {
        let m = trainer.step().unwrap();
        let runs = submitted.lock().unwrap().drain(..).collect::<Vec<_>>();
        // One generation batch per step: every completion submitted once, by whole groups.
        assert_eq!(runs.len(), config.generation_batch_size());
        let resolved = runs.iter().filter(|(id, _)| id == "t__t-1").count();
        assert_eq!(resolved % config.num_generations, 0);
        let expected_resolved = resolved as f64 / runs.len() as f64;
        assert_eq!(m.get("rewards/resolved/mean"), Some(expected_resolved));
    }
}

/// The 2025–26 objectives of TRL 1.16 run on the tiny model, and their metrics show that each
/// is in force (the exact numbers are the `f64` objective's, checked against TRL's own in
/// `grpo_worked_example`).
#[test]
fn trl_objectives_run_and_show_in_the_metrics() {
    let run = |extra: &str| {
        let config = GrpoConfig::from_toml_str(&format!(
            r#"
            learning_rate = 5e-3
            max_steps = 2
            num_generations = 4
            per_device_train_batch_size = 4
            gradient_accumulation_steps = 2
            max_completion_length = 6
            num_iterations = 2
            seed = 7
            {extra}
            "#
        ))
        .unwrap();
        grpo_run(&config, tempfile::tempdir().unwrap().path(), None, 2)
    };
    let value = |history: &[StepMetrics], step: usize, name: &str| {
        *history[step]
            .values
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing: {:?}", history[step]))
    };
    let token = run("");
    // GSPO: one ratio per sequence, so each micro-batch's clip shares are multiples of 1/4 and
    // `clip_ratio/high_max` is 0 or 1 per micro-batch.
    let gspo = run(r#"importance_sampling_level = "sequence"
        epsilon = 0.001
        epsilon_high = 0.001"#);
    let low = value(&gspo, 1, "clip_ratio/low_mean") + value(&gspo, 1, "clip_ratio/high_mean");
    assert!(
        low > 0.0,
        "the tight bounds clip some sequences: {:?}",
        gspo[1]
    );
    assert_eq!(
        (low * 8.0).fract(),
        0.0,
        "{low}: whole sequences of two micro-batches"
    );
    assert_ne!(value(&gspo, 1, "loss"), value(&token, 1, "loss"));
    // The entropy mask at ρ = 0 keeps one token per micro-batch: a far smaller gradient.
    let masked = run("top_entropy_quantile = 0.0");
    assert!(
        value(&masked, 0, "grad_norm") < 0.5 * value(&token, 0, "grad_norm"),
        "{} vs {}",
        value(&masked, 0, "grad_norm"),
        value(&token, 0, "grad_norm")
    );
    // The other loss types log their own metrics.
    let cispo = run("loss_type = \"cispo\"\nepsilon_high = 5.0");
    assert!(cispo[1].values.contains_key("cispo_clip_ratio"));
    assert!(!cispo[1].values.contains_key("clip_ratio/low_mean"));
    let vespo = run("loss_type = \"vespo\"");
    let phi = value(&vespo, 1, "vespo/phi_seq_mean");
    assert!(
        phi > 0.0 && phi != 1.0,
        "φ moves off 1 once off-policy: {phi}"
    );
    for loss_type in ["sapo", "luspo", "bnpo", "dr_grpo", "grpo"] {
        let history = run(&format!(
            "loss_type = \"{loss_type}\"\nimportance_sampling_level = \"sequence\"\ndelta = 1.5\noff_policy_mask_threshold = 0.1"
        ));
        assert!(value(&history, 1, "loss").is_finite(), "{loss_type}");
    }
    // Sampling: min_p = 1 keeps only the most likely token, so the G completions of a prompt
    // are the same and every group's rewards are equal; the repetition penalty changes which.
    let greedy = run("min_p = 1.0");
    let penalised = run("min_p = 1.0\nrepetition_penalty = 2.0");
    for history in [&greedy, &penalised] {
        assert_eq!(value(history, 0, "frac_reward_zero_std"), 1.0);
    }
    assert!(value(&token, 0, "frac_reward_zero_std") < 1.0);
    assert_ne!(
        (
            value(&greedy, 0, "reward"),
            value(&greedy, 0, "completions/mean_length")
        ),
        (
            value(&penalised, 0, "reward"),
            value(&penalised, 0, "completions/mean_length")
        )
    );
    // The entropy bonus: logged as TRL logs it, and in the loss.
    let bonus = run("entropy_coef = 0.01");
    assert_eq!(value(&bonus, 1, "entropy_coef"), 0.01);
    assert!(bonus[1].values.contains_key("policy_loss"));
    assert_ne!(value(&bonus, 0, "loss"), value(&token, 0, "loss"));
    assert!(!token[1].values.contains_key("policy_loss"));
    // The adaptive controller: the first step applies no bonus (no entropy measured yet), then
    // the coefficient climbs by entropy_coef_delta while the entropy is under the target.
    let adaptive = run(
        "use_adaptive_entropy = true\nentropy_coef = 0.01\nentropy_coef_delta = 0.005\nentropy_target = 100.0",
    );
    assert_eq!(value(&adaptive, 0, "loss"), value(&token, 0, "loss"));
    assert_eq!(value(&adaptive, 0, "entropy_coef"), 0.015);
    assert_eq!(value(&adaptive, 1, "entropy_coef"), 0.02);
    assert_ne!(value(&adaptive, 1, "loss"), value(&token, 1, "loss"));
    // GDPO standardises over the batch: the advantages differ from the group-normalised ones.
    let gdpo = run(r#"multi_objective_aggregation = "normalize_then_sum""#);
    assert_ne!(value(&gdpo, 0, "loss"), value(&token, 0, "loss"));
    assert_eq!(value(&gdpo, 0, "reward"), value(&token, 0, "reward"));
}

/// `sync_ref_model` with α = 1 copies the policy into the reference after every step, so the
/// next step starts with no KL at all; without it the KL grows.
#[test]
fn sync_ref_model_moves_the_reference() {
    let config = |sync: bool| {
        GrpoConfig::from_toml_str(&format!(
            r#"
            learning_rate = 5e-3
            max_steps = 3
            num_generations = 4
            per_device_train_batch_size = 4
            max_completion_length = 6
            beta = 0.04
            seed = 7
            sync_ref_model = {sync}
            ref_model_mixup_alpha = 1.0
            ref_model_sync_steps = 1
            "#
        ))
        .unwrap()
    };
    let synced = grpo_run(&config(true), tempfile::tempdir().unwrap().path(), None, 3);
    let frozen = grpo_run(&config(false), tempfile::tempdir().unwrap().path(), None, 3);
    let kl = |h: &[StepMetrics], step: usize| *h[step].values.get("kl").unwrap();
    assert_eq!(kl(&synced, 0), kl(&frozen, 0));
    for step in 1..3 {
        assert_eq!(kl(&synced, step), 0.0, "step {step}: {:?}", synced[step]);
        assert!(kl(&frozen, step) > 0.0);
    }
    // The reference goes into the checkpoints of such a run.
    let dir = tempfile::tempdir().unwrap();
    grpo_run(&config(true), dir.path(), None, 2);
    let reference = dir
        .path()
        .join("checkpoint-2")
        .join(checkpoint::REFERENCE_DIR);
    assert!(
        reference.join("model.safetensors").is_file(),
        "{}",
        reference.display()
    );
}
