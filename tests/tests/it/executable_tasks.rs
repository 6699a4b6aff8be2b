//! The loop closed on the project's own fixture (`swerve_tests::environments`): `curate run`
//! makes tasks from events and mirrors, `curate validate` makes them executable rows, and the
//! consumers run those rows as written — `harness run --dataset OUT/instances.jsonl
//! --predictions gold` resolves every row and empty patches none, `harness agent` with a
//! scripted agent that applies each fix in the row's container submits patches `harness run`
//! resolves, `trainer grpo --execute --plugin tests-fixed` takes a step on them, and SWE-bench
//! 5.0.2's own harness grades them on the images swerve built with the same `report.json`
//! files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use swerve_curate::validate::ValidateConfig;
use swerve_curate::{Config, Inputs, Output};
use swerve_harness::execution::{DatasetSource, Mode};
use swerve_harness::run::{self, InstanceResult, Resume, RunConfig, RunProgress};
use swerve_swebench::predictions::Prediction;
use swerve_trainer::commands::{ExecuteSpec, GrpoCommand, ModelSource, OutputSpec, run_grpo};
use swerve_trainer::data::PromptStyle;
use swerve_trainer::grpo::GrpoConfig;
use swerve_trainer::prompt::PromptFormat;

/// What the kept tasks are, by the fixture's author.
const KEPT: [&str; 3] = ["fixture__calc-1", "fixture__modern-1", "fixture__words-1"];

struct Quiet;

impl RunProgress for Quiet {
    fn message(&self, _: &str) {}
    fn start(&self, _: usize, _: usize) {}
    fn done(&self, _: &InstanceResult) {}
}

fn evaluator() -> swerve_host::EvaluatorPlugin {
    let host = swerve_host::Host::new(swerve_host::HostConfig::default()).unwrap();
    host.load_evaluator(
        &swerve_host::bundled::require("swebench-parsers").unwrap(),
        &Default::default(),
    )
    .unwrap()
}

/// `harness run --dataset ROWS --predictions … --run-id RUN_ID` in `dir`, as the binary runs it;
/// returns each instance's `report.json` folder.
fn harness_run(rows: &Path, dir: &Path, run_id: &str, patch: impl Fn(&str) -> String) -> PathBuf {
    let source = DatasetSource::resolve(rows.to_str().unwrap(), "test", None).unwrap();
    let predictions: Vec<Prediction> = source
        .rows
        .iter()
        .map(|row| Prediction {
            instance_id: row.instance_id.clone(),
            model_name_or_path: Some(run_id.to_owned()),
            model_patch: Some(patch(&row.instance_id)),
        })
        .collect();
    let config = RunConfig {
        run_id: run_id.to_owned(),
        source,
        instance_ids: Vec::new(),
        predictions,
        max_workers: 2,
        timeout: Duration::from_secs(300),
        log_root: dir.join("logs"),
        report_dir: dir.to_owned(),
        mode: Mode::Hardened,
        resume: Resume::Content,
        limits: Default::default(),
        verdict: None,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let summary = runtime
        .block_on(run::run(&config, "test", evaluator(), &Quiet))
        .unwrap();
    assert!(summary.infra_errors().is_empty(), "{summary:?}");
    dir.join("logs/run_evaluation").join(run_id).join(run_id)
}

fn resolved(report_dir: &Path, id: &str) -> bool {
    let text = std::fs::read_to_string(report_dir.join(id).join("report.json"))
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    report[id]["resolved"] == true
}

#[test]
fn curated_tasks_become_rows_that_harness_trainer_and_swebench_run() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = swerve_tests::environments::build(dir.path());

    // curate run: the merged pull requests that fix an issue.
    let curated = dir.path().join("curated");
    swerve_curate::run(
        &Inputs {
            events: vec![fixture.events.clone()],
            repos: fixture.repos.clone(),
        },
        &Config::default(),
        &Output {
            dir: curated.clone(),
            parquet: false,
        },
        &(),
    )
    .unwrap();
    let tasks = curated.join("tasks.jsonl");
    let ids: BTreeSet<String> = swerve_swebench::dataset::read_rows(&tasks)
        .unwrap()
        .into_iter()
        .map(|r| r.instance_id)
        .collect();
    assert_eq!(ids, KEPT.map(str::to_owned).into());

    // curate validate: every one is executable.
    let out = dir.path().join("validated");
    let funnel = swerve_curate::validate::validate(
        &ValidateConfig {
            tasks,
            repos: fixture.repos.clone(),
            output: out.clone(),
            jobs: 2,
            // Flakiness is the curate tests' subject, not this one's.
            runs: 1,
            timeout: Duration::from_secs(300),
            setup: None,
            task_repo: true,
        },
        evaluator(),
        &|_| {},
    )
    .unwrap();
    assert_eq!(funnel.validated, KEPT.len(), "{funnel:?}");
    let rows = out.join("instances.jsonl");

    // harness run on the rows as written (no mirrors needed: the rows name their images).
    let runs = dir.path().join("harness");
    let gold = harness_run(&rows, &runs, "gold", |id| {
        swerve_swebench::dataset::read_rows(&rows)
            .unwrap()
            .into_iter()
            .find(|r| r.instance_id == id)
            .and_then(|r| r.patch)
            .unwrap()
    });
    for id in KEPT {
        assert!(resolved(&gold, id), "{id}: gold not resolved");
    }
    let empty = harness_run(&rows, &runs, "empty", |_| String::new());
    for id in KEPT {
        assert!(
            !empty.join(id).join("report.json").exists() || !resolved(&empty, id),
            "{id}: an empty patch resolved"
        );
    }

    // harness agent: a scripted agent that applies each row's fix in the row's container submits
    // patches that `harness run` resolves.
    let patches = agent_gold(&rows, dir.path());
    let agent = harness_run(&rows, &runs, "agent", |id| patches[id].clone());
    for id in KEPT {
        assert!(
            resolved(&agent, id),
            "{id}: the agent's submission not resolved"
        );
    }

    swebench_agrees(
        &rows,
        &out.join(swerve_curate::validate::TASK_REPO),
        &gold,
        dir.path(),
    );

    // trainer grpo --execute --plugin tests-fixed: one step on the same file.
    let model = swerve_tests::repo_root().join("trainer/fixtures/tiny-qwen2");
    let mut steps = 0;
    run_grpo(
        &GrpoCommand {
            source: ModelSource {
                model,
                resume: None,
                allow_other_run: false,
            },
            dataset: rows.clone(),
            plugins: vec!["tests-fixed".parse().unwrap()],
            config: GrpoConfig::from_toml_str(
                "max_steps = 1\nnum_generations = 2\nper_device_train_batch_size = 2\n\
                 max_completion_length = 8\n",
            )
            .unwrap(),
            settings: Default::default(),
            prompt_style: PromptStyle {
                format: PromptFormat::Bare,
                focus: Some(2),
            },
            output: OutputSpec {
                dir: dir.path().join("grpo"),
                save_steps: 0,
                report_to: Default::default(),
                overwrite: false,
                show_plan: false,
            },
            reward_jobs: 1,
            execute: Some(ExecuteSpec {
                dataset: rows.clone(),
                workers: 2,
                timeout: Duration::from_secs(300),
                work_dir: dir.path().join("executions"),
                slurm: None,
            }),
            device: Default::default(),
            force: false,
            ranks: swerve_trainer::ranks::Ranks::single(),
        },
        &mut |metrics, _| {
            steps += 1;
            assert!(
                metrics.values.contains_key("rewards/tests-fixed/mean"),
                "{:?}",
                metrics.values
            );
        },
    )
    .unwrap();
    assert_eq!(steps, 1);
}

/// `harness agent` on `rows` with recorded replies (write the row's fix with a heredoc and
/// `git apply` it, then submit by mini-swe-agent's sentinel); every episode must submit. Returns
/// the submitted patches by instance id.
fn agent_gold(rows: &Path, dir: &Path) -> std::collections::BTreeMap<String, String> {
    use swerve_harness::agent::{self, AgentConfig, AgentProgress, EndReason, Protocol, Scripted};
    struct Silent;
    impl AgentProgress for Silent {
        fn message(&self, _: &str) {}
        fn start(&self, _: usize, _: usize) {}
        fn done(&self, _: &str, _: EndReason) {}
    }
    let command = |c: &str| format!("THOUGHT: next.\n\n```mswea_bash_command\n{c}\n```");
    let script: String = swerve_swebench::dataset::read_rows(rows)
        .unwrap()
        .into_iter()
        .map(|r| {
            let patch = r.patch.unwrap();
            let fix = format!(
                "cat > /tmp/fix.diff <<'SWERVE_EOF'\n{patch}SWERVE_EOF\ngit apply /tmp/fix.diff"
            );
            let submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached";
            serde_json::json!({"instance_id": r.instance_id, "replies": [command(&fix), command(submit)]})
                .to_string()
                + "\n"
        })
        .collect();
    let script_file = dir.join("agent-gold.jsonl");
    fs_err::write(&script_file, script).unwrap();
    let config = AgentConfig {
        run_id: "agent-gold".to_owned(),
        source: DatasetSource::resolve(rows.to_str().unwrap(), "test", None).unwrap(),
        protocol: Protocol::Text,
        limits: Default::default(),
        container: Default::default(),
        max_workers: 2,
        log_root: dir.join("agent-logs"),
        predictions: dir.join("agent-gold.predictions.jsonl"),
    };
    let policy = std::sync::Arc::new(Scripted::read(&script_file, "gold-agent").unwrap());
    let summary = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(agent::run(&config, policy, &Silent))
        .unwrap();
    for episode in &summary.episodes {
        assert_eq!(episode.reason, EndReason::Submitted, "{episode:?}");
    }
    fs_err::read_to_string(&summary.predictions)
        .unwrap()
        .lines()
        .map(|line| {
            let p: Prediction = serde_json::from_str(line).unwrap();
            (p.instance_id, p.model_patch.unwrap_or_default())
        })
        .collect()
}

/// SWE-bench 5.0.2 in its own virtual environment: `swebench dataset check` accepts the task
/// repository, and its `run_evaluation` grades the rows' gold patches on the images swerve
/// built with the same `report.json` files as `harness run` (`gold`: its report folder).
fn swebench_agrees(rows: &Path, task_repo: &Path, gold: &Path, dir: &Path) {
    let Some(venv) = swerve_tests::swebench_venv("SWE-bench 5.0.2 on validated rows") else {
        return;
    };
    let check = Command::new(venv.join("bin/swebench"))
        .args(["dataset", "check"])
        .arg(task_repo)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "dataset check: {stdout}");
    assert!(stdout.contains("looks well formed"), "{stdout}");

    let work = dir.join("swebench");
    std::fs::create_dir_all(&work).unwrap();
    let run = Command::new(venv.join("bin/python"))
        .args(["-m", "swebench.harness.run_evaluation", "--dataset_name"])
        .arg(rows)
        .args([
            "--predictions_path",
            "gold",
            "--max_workers",
            "2",
            "--run_id",
            "gold",
        ])
        .args(["--timeout", "300"])
        .current_dir(&work)
        .output()
        .unwrap();
    let log = || {
        format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
    };
    assert!(run.status.success(), "run_evaluation: {}", log());
    let theirs = work.join("logs/run_evaluation/gold/gold");
    for id in KEPT {
        let read = |dir: &Path| std::fs::read(dir.join(id).join("report.json"));
        let ours = read(gold).unwrap();
        let swebench = read(&theirs).unwrap_or_else(|e| panic!("{id}: {e}\n{}", log()));
        assert_eq!(
            String::from_utf8_lossy(&swebench),
            String::from_utf8_lossy(&ours),
            "{id}: the reports differ"
        );
    }
}
