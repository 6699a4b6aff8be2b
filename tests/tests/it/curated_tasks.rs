//! Curated tasks are trainer-ready as they are (curate → trainer): every row `curate run` writes
//! parses as a SWE-bench row whose gold SEARCH/REPLACE completion scores 1.0 with the SWE-RL
//! reward, on curate's own corpus and on the shared development fixture; and one SFT step on
//! the gold completions and one GRPO step rewarded by the bundled `swe-rl` plugin run on them,
//! through the library calls behind `trainer sft --dataset tasks.jsonl` and `trainer grpo
//! --dataset tasks.jsonl --plugin swe-rl`.

use std::path::{Path, PathBuf};

use swerve_curate::{Config, Inputs, Output};
use swerve_trainer::commands::{
    GrpoCommand, ModelSource, OutputSpec, SftCommand, SftData, run_grpo, run_sft,
};
use swerve_trainer::data::PromptStyle;
use swerve_trainer::grpo::GrpoConfig;
use swerve_trainer::prompt::PromptFormat;
use swerve_trainer::train::sft_loop::SftConfig;

/// Curates `root`'s `events/` and `repos/` into `root/curated`; returns its `tasks.jsonl`.
fn curate(root: &Path) -> PathBuf {
    let out = root.join("curated");
    let inputs = Inputs {
        events: vec![root.join("events")],
        repos: root.join("repos"),
    };
    let output = Output {
        dir: out.clone(),
        parquet: false,
    };
    swerve_curate::run(&inputs, &Config::default(), &output, &()).unwrap();
    out.join("tasks.jsonl")
}

/// Every task parses as a SWE-bench row, and its oracle answer scores 1.0 with the SWE-RL
/// reward (what `trainer grpo --plugin swe-rl` computes).
fn check_trainer_ready(tasks: &Path) {
    let rows = swerve_swebench::dataset::read_rows(tasks).unwrap();
    let lines = std::fs::read_to_string(tasks).unwrap().lines().count();
    assert_eq!(rows.len(), lines);
    assert!(!rows.is_empty());
    for row in &rows {
        assert!(!row.oracle_new_content.is_empty(), "{}", row.instance_id);
        assert!(
            row.problem_statement
                .as_deref()
                .is_some_and(|p| !p.is_empty())
        );
        let completion = swerve_trainer::data::gold_completion(row);
        let outcome = swerve_swe_rl::search_replace_reward(
            &row.code_context,
            &row.oracle_new_content,
            &completion,
        );
        assert_eq!(outcome.reward, 1.0, "{}: {outcome:?}", row.instance_id);
    }
}

#[test]
fn tasks_of_the_shared_development_fixture_are_trainer_ready() {
    let Some(script) =
        swerve_tests::shared_data("curation/make_fixture.py", "curation development fixture")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .status()
        .expect("python3 runs");
    assert!(status.success(), "make_fixture.py failed");
    check_trainer_ready(&curate(dir.path()));
}

#[test]
fn one_sft_and_one_grpo_step_on_curated_tasks() {
    let dir = tempfile::tempdir().unwrap();
    swerve_tests::curation::corpus::build(dir.path());
    let tasks = curate(dir.path());
    check_trainer_ready(&tasks);

    let model = swerve_tests::repo_root().join("trainer/fixtures/tiny-qwen2");
    let style = PromptStyle {
        format: PromptFormat::Bare,
        focus: Some(2),
    };
    let output = |name: &str| OutputSpec {
        dir: dir.path().join(name),
        save_steps: 0,
        report_to: Default::default(),
        overwrite: false,
        show_plan: false,
    };
    let source = ModelSource {
        model,
        resume: None,
        allow_other_run: false,
    };
    let sft = run_sft(
        &SftCommand {
            source: source.clone(),
            data: SftData::Gold(tasks.clone(), style),
            config: SftConfig::from_toml_str("max_steps = 1\nper_device_train_batch_size = 2\n")
                .unwrap(),
            settings: Default::default(),
            output: output("sft"),
            device: Default::default(),
            force: false,
            ranks: swerve_trainer::ranks::Ranks::single(),
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert!(sft.join("model.safetensors").is_file(), "{}", sft.display());

    let mut steps = 0;
    let grpo = run_grpo(
        &GrpoCommand {
            source,
            dataset: tasks,
            plugins: vec!["swe-rl".parse().unwrap()],
            config: GrpoConfig::from_toml_str(
                "max_steps = 1\nnum_generations = 2\nper_device_train_batch_size = 2\n\
                 max_completion_length = 8\n",
            )
            .unwrap(),
            prompt_style: style,
            settings: Default::default(),
            output: output("grpo"),
            reward_jobs: 1,
            execute: None,
            device: Default::default(),
            force: false,
            ranks: swerve_trainer::ranks::Ranks::single(),
        },
        &mut |metrics, _| {
            steps += 1;
            // Every completion of 8 tokens is malformed: the swe-rl reward is -1, not missing.
            assert_eq!(metrics.values["reward"], -1.0, "{:?}", metrics.values);
        },
    )
    .unwrap();
    assert_eq!(steps, 1);
    assert!(
        grpo.join("model.safetensors").is_file(),
        "{}",
        grpo.display()
    );
}
