//! `curate validate` on the project's own fixture repositories (`swerve_tests::environments`),
//! in Docker for real: every case comes out as its author knows it must, the rows it writes
//! resolve with their gold patches and not without them through the harness's execution path,
//! and a second run reuses every task.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use swerve_harness::run::execute::{ExecuteConfig, PatchExecutor};
use swerve_tests::environments::{self, Expected};

fn curate() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_curate"))
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn validate(fixture: &environments::Fixture, out: &Path) -> String {
    let output = Command::new(curate())
        .args(["validate", "--jobs", "2", "--runs", "2", "--timeout", "300"])
        .arg("--tasks")
        .arg(&fixture.tasks)
        .arg("--repos")
        .arg(&fixture.repos)
        .arg("--output")
        .arg(out)
        .output()
        .expect("curate runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "curate validate failed:\n{stderr}");
    stderr
}

#[test]
fn every_case_ends_as_its_author_knows_and_the_rows_run() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let out = dir.path().join("out");
    validate(&fixture, &out);

    let kept: BTreeMap<String, Value> = jsonl(&out.join("instances.jsonl"))
        .into_iter()
        .map(|r| (r["instance_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let dropped: BTreeMap<String, Value> = jsonl(&out.join("rejected.jsonl"))
        .into_iter()
        .map(|r| (r["instance_id"].as_str().unwrap().to_owned(), r))
        .collect();
    for (id, expected) in &fixture.expected {
        match expected {
            Expected::Kept {
                fail_to_pass,
                pass_to_pass,
            } => {
                let row = kept
                    .get(id)
                    .unwrap_or_else(|| panic!("{id} not kept: {:?}", dropped.get(id)));
                assert_eq!(&strings(&row["FAIL_TO_PASS"]), fail_to_pass, "{id}");
                assert_eq!(&strings(&row["PASS_TO_PASS"]), pass_to_pass, "{id}");
                for field in ["image", "eval_script", "log_parser", "eval_type", "version"] {
                    assert!(row[field].is_string(), "{id}: {field}");
                }
                assert!(row["code_context"].is_object(), "training fields are kept");
            }
            Expected::Dropped(reason) => {
                let row = dropped
                    .get(id)
                    .unwrap_or_else(|| panic!("{id} not rejected: kept as {:?}", kept.get(id)));
                assert_eq!(row["reason"], *reason, "{id}: {row}");
            }
        }
    }
    assert_eq!(kept.len() + dropped.len(), fixture.expected.len());
    let funnel: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("funnel.json")).unwrap()).unwrap();
    assert_eq!(funnel["tasks_in"], fixture.expected.len());
    assert_eq!(funnel["validated"], kept.len());
    let envs: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("environments.json")).unwrap())
            .unwrap();
    for row in kept.values() {
        let repo = row["repo"].as_str().unwrap();
        let version = row["version"].as_str().unwrap();
        assert!(envs[repo][version].is_object(), "{repo} {version}");
    }

    // The rows as written, through the harness: gold resolves, an empty patch does not.
    let source = swerve_harness::run::source::resolve(
        out.join("instances.jsonl").to_str().unwrap(),
        "test",
        Some(&fixture.repos),
    )
    .expect("the rows read as a dataset");
    let host = swerve_host::Host::new(swerve_host::HostConfig::default()).unwrap();
    let evaluator = host
        .load_evaluator(
            &swerve_host::bundled::require("swebench-parsers").unwrap(),
            &Default::default(),
        )
        .unwrap();
    let executor = PatchExecutor::new(
        source,
        evaluator,
        ExecuteConfig {
            run_id: format!("t-validated-{}", std::process::id()),
            work_dir: dir.path().join("execute"),
            ..ExecuteConfig::default()
        },
    )
    .unwrap();
    for (id, row) in &kept {
        let gold = executor.execute(id, row["patch"].as_str().unwrap());
        assert_eq!(gold.infra_error, None, "{id}");
        assert!(gold.resolved, "{id}: gold not resolved: {gold:?}");
        let empty = executor.execute(id, "");
        assert!(!empty.resolved, "{id}: an empty patch resolved");
    }

    // A second run finds every task ended and runs nothing.
    let before = std::fs::read(out.join("instances.jsonl")).unwrap();
    validate(&fixture, &out);
    let funnel: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("funnel.json")).unwrap()).unwrap();
    assert_eq!(funnel["reused"], fixture.expected.len());
    assert_eq!(funnel["sandbox_runs"], 0);
    assert_eq!(std::fs::read(out.join("instances.jsonl")).unwrap(), before);
}
