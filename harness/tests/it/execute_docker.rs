//! The single-execution API (`swerve_harness::execution`) against the real Docker engine on
//! a swerve-mini row: the gold patch resolves it, a partial fix does not, an identical patch
//! runs once, an empty patch runs nothing; and the `tests-fixed` reward plugin scores the
//! results (1 for the gold patch, the fixed fraction for the partial one).
//!
//! Shares the content-addressed swerve-mini images with `run_docker.rs` (the first build takes
//! minutes).

use std::path::Path;

use swerve_harness::execution::{DatasetSource, ExecuteConfig, ExecutionOutcome, PatchExecutor};
use swerve_host::{BudgetOverrides, Execution, Host, HostConfig, Isolation, Sample};

const ID: &str = "swerve__inicfg-7";

/// The bundled "partial" prediction of `ID`: accepts yes/on/1 case-sensitively, so 2 of the 4
/// FAIL_TO_PASS tests pass and nothing else breaks.
fn partial_patch() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/swerve-mini/predictions-mixed.jsonl");
    let text = std::fs::read_to_string(path).expect("predictions");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|v| v["instance_id"] == ID)
        .and_then(|v| v["model_patch"].as_str().map(str::to_owned))
        .expect("a prediction for the instance")
}

fn passed(outcomes: &[swerve_host::TestOutcome]) -> usize {
    outcomes.iter().filter(|t| t.passed).count()
}

fn reward(execution: &Execution, host: &Host) -> Option<f64> {
    let plugin = host
        .load_reward(
            &swerve_host::bundled::require("tests-fixed").unwrap(),
            &BudgetOverrides::default(),
        )
        .expect("tests-fixed plugin");
    let sample = Sample {
        id: ID.to_owned(),
        completion: String::new(),
        execution: Some(execution.clone()),
        ..Sample::default()
    };
    let outcome = plugin.score(&[sample], Isolation::Batch).remove(0);
    outcome.expect("the plugin scores").reward
}

#[test]
fn gold_and_partial_patches_are_executed_and_rewarded() {
    let source = DatasetSource::resolve("swerve-mini", "test", None).expect("bundled dataset");
    let row = source
        .rows
        .iter()
        .find(|r| r.instance_id == ID)
        .expect("row")
        .clone();
    let gold = row.patch.clone().expect("gold patch");
    let partial = partial_patch();
    let host = Host::new(HostConfig::default()).expect("host");
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").unwrap(),
            &BudgetOverrides::default(),
        )
        .expect("evaluator");
    let dir = tempfile::tempdir().expect("temp dir");
    let executor = PatchExecutor::new(
        source,
        evaluator,
        ExecuteConfig {
            run_id: format!("t-execute-{}", std::process::id()),
            work_dir: dir.path().to_owned(),
            workers: 2,
            ..ExecuteConfig::default()
        },
    )
    .expect("docker");

    // Submitted together: both run in parallel; the second gold submission waits for the first.
    let pending = [
        executor.submit(ID, &gold),
        executor.submit(ID, &partial),
        executor.submit(ID, &gold),
    ];
    let [gold_run, partial_run, gold_again] = pending.map(|p| p.wait());
    assert_eq!(gold_run, gold_again);
    // What a reward plugin reads.
    let [gold_run, partial_run] = [gold_run, partial_run].map(|o| o.to_execution(&row));
    assert_eq!(executor.sandbox_runs(), 2, "identical patches run once");

    assert_eq!(gold_run.infra_error, None);
    assert!(gold_run.patch_applied && gold_run.resolved, "{gold_run:?}");
    assert_eq!(gold_run.fail_to_pass.len(), row.fail_to_pass.len());
    assert_eq!(passed(&gold_run.fail_to_pass), row.fail_to_pass.len());
    assert_eq!(passed(&gold_run.pass_to_pass), row.pass_to_pass.len());
    for test in row.fail_to_pass.iter().chain(&row.pass_to_pass) {
        assert!(gold_run.tests.contains_key(test), "{test} was not parsed");
    }

    assert_eq!(partial_run.infra_error, None);
    assert!(partial_run.patch_applied && !partial_run.resolved);
    assert_eq!(passed(&partial_run.fail_to_pass), 2, "{partial_run:?}");
    assert_eq!(passed(&partial_run.pass_to_pass), row.pass_to_pass.len());

    let empty = executor.execute(ID, "");
    assert_eq!(empty, ExecutionOutcome::NotApplied);
    let empty = empty.to_execution(&row);
    assert!(!empty.patch_applied && !empty.resolved);
    assert_eq!(executor.sandbox_runs(), 2, "an empty patch is not run");

    assert_eq!(reward(&gold_run, &host), Some(1.0));
    assert_eq!(
        reward(&partial_run, &host),
        Some(2.0 / row.fail_to_pass.len() as f64)
    );
    assert_eq!(reward(&empty, &host), Some(0.0));
    let broken = Execution {
        infra_error: Some("docker went away".into()),
        ..Execution::default()
    };
    assert_eq!(reward(&broken, &host), None);
}
