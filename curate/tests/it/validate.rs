//! `curate validate` on the project's own fixture repositories (`swerve_tests::environments`),
//! in Docker for real: every case comes out as its author knows it must (every reason of
//! `rejected.jsonl`, each from a fixture made for it) and the rows it writes resolve with their
//! gold patches and not without them through the harness's execution path; without an engine
//! every task that needs one is an infrastructure error that the next run retries, and a run
//! killed once its first task has ended loses nothing and redoes nothing when resumed; a task
//! past its time limit is `timed_out`; a setup model's recipes stand in where the rules fail;
//! a Slurm run writes what a local run writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use swerve_harness::execution::{DatasetSource, ExecuteConfig, ExecutionOutcome, PatchExecutor};
use swerve_tests::environments::{self, Expected};

use crate::support;

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// `curate validate` on `tasks` into `out`, two containers at once, `runs` runs a side (one
/// where flakiness is not what a test is about: half the containers).
fn command(tasks: &Path, repos: &Path, out: &Path, runs: u32, timeout: u32) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_curate"));
    command
        .args([
            "validate",
            "--max-workers",
            "2",
            "--runs",
            &runs.to_string(),
        ])
        .args(["--timeout", &timeout.to_string()])
        .arg("--tasks")
        .arg(tasks)
        .arg("--repos")
        .arg(repos)
        .arg("--output")
        .arg(out);
    command
}

fn finished(output: Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "curate validate:\n{stderr}"
    );
    stderr
}

/// Rows of `rejected.jsonl` or `instances.jsonl` by instance id.
fn by_id(path: &Path) -> BTreeMap<String, Value> {
    jsonl(path)
        .into_iter()
        .map(|r| (r["instance_id"].as_str().unwrap().to_owned(), r))
        .collect()
}

/// The reasons that need no container: the same with or without an engine.
const STATIC: [&str; 4] = [
    "no_recipe",
    "no_test_files",
    "test_patch_failed",
    "gold_apply_failed",
];

#[test]
fn every_case_ends_as_its_author_knows_and_the_rows_run() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let out = dir.path().join("out");
    let stderr = finished(
        command(&fixture.tasks, &fixture.repos, &out, 2, 300)
            .output()
            .unwrap(),
        0,
    );
    let kept = by_id(&out.join("instances.jsonl"));
    let dropped = by_id(&out.join("rejected.jsonl"));
    for (id, expected) in &fixture.expected {
        match expected {
            Expected::Kept {
                fail_to_pass,
                pass_to_pass,
            } => {
                let row = kept
                    .get(id)
                    .unwrap_or_else(|| panic!("{id} not kept: {:?}\n{stderr}", dropped.get(id)));
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
                if !STATIC.contains(reason) {
                    let log = Path::new(row["log"].as_str().unwrap());
                    assert!(log.exists(), "{id}: {} is not there", log.display());
                }
            }
        }
    }
    assert_eq!(kept.len() + dropped.len(), fixture.expected.len());
    let funnel = json(&out.join("funnel.json"));
    assert_eq!(funnel["tasks_in"], fixture.expected.len());
    assert_eq!(funnel["validated"], kept.len());
    assert!(funnel["images"]["disk_bytes"].as_u64().unwrap() > 0);
    let envs = json(&out.join("environments.json"));
    let mut pythons = BTreeSet::new();
    for row in kept.values() {
        let (repo, version) = (
            row["repo"].as_str().unwrap(),
            row["version"].as_str().unwrap(),
        );
        let env = &envs[repo][version];
        assert!(env.is_object(), "{repo} {version}");
        pythons.insert(env["python"].as_str().unwrap().to_owned());
    }
    assert_eq!(pythons, BTreeSet::from(["3.11".into(), "3.13".into()]));

    // The rows as written, through the harness: gold resolves, the tests without the fix do
    // not (the row's tests on its base commit and test patch).
    let source = DatasetSource::resolve(
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
            run_empty_patches: true,
            ..ExecuteConfig::default()
        },
    )
    .unwrap();
    let pending: Vec<_> = kept
        .iter()
        .map(|(id, row)| {
            (
                id,
                executor.submit(id, row["patch"].as_str().unwrap()),
                executor.submit(id, ""),
            )
        })
        .collect();
    for (id, gold, before) in pending {
        let gold = gold.wait();
        assert!(gold.resolved(), "{id}: gold not resolved: {gold:?}");
        let before = before.wait();
        assert!(
            matches!(&before, ExecutionOutcome::Graded(graded) if !graded.resolved),
            "{id}: {before:?}"
        );
    }

    // A second run finds every task ended and runs nothing.
    let written = std::fs::read(out.join("instances.jsonl")).unwrap();
    finished(
        command(&fixture.tasks, &fixture.repos, &out, 2, 300)
            .output()
            .unwrap(),
        0,
    );
    let funnel = json(&out.join("funnel.json"));
    assert_eq!(funnel["reused"], fixture.expected.len());
    assert_eq!(funnel["sandbox_runs"], 0);
    assert_eq!(std::fs::read(out.join("instances.jsonl")).unwrap(), written);
}

/// Without an engine every task that needs one is an infrastructure error and the rest is
/// final; a run killed as soon as its first task has ended keeps that end; the run after it
/// retries the infrastructure errors, redoes nothing that ended, and every task ends once.
#[test]
fn no_engine_then_a_kill_then_a_resume_lose_and_redo_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let ids = [
        "fixture__calc-1",
        "fixture__calc-3",
        "fixture__plain-1",
        "fixture__broken-1",
        "fixture__words-1",
    ];
    let tasks = subset(&fixture, &ids, dir.path());
    let out = dir.path().join("out");
    let validate = || command(&tasks, &fixture.repos, &out, 1, 300);
    let state = out.join("validate_state.jsonl");
    let expected: BTreeMap<&str, &Expected> = fixture
        .expected
        .iter()
        .filter(|(id, _)| ids.contains(&id.as_str()))
        .map(|(id, e)| (id.as_str(), e))
        .collect();

    let stderr = finished(
        validate()
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .output()
            .unwrap(),
        3,
    );
    assert!(stderr.contains("rerun the same command"), "{stderr}");
    let rejected = by_id(&out.join("rejected.jsonl"));
    let mut statics = 0;
    for (id, e) in &expected {
        let reason = rejected[*id]["reason"].as_str().unwrap();
        match e {
            Expected::Dropped(r) if STATIC.contains(r) => {
                statics += 1;
                assert_eq!(reason, *r, "{id}");
            }
            _ => assert_eq!(reason, "infra_error", "{id}"),
        }
    }
    let first_lines = std::fs::read_to_string(&state).unwrap().lines().count();
    assert_eq!(first_lines, ids.len());

    // Killed as soon as its first task has ended (`broken`, whose install fails first).
    let mut child = validate()
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(900);
    while std::fs::read_to_string(&state).unwrap().lines().count() == first_lines {
        assert!(Instant::now() < deadline, "no task ended");
        assert!(child.try_wait().unwrap().is_none(), "ended before its kill");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // A kill may tear the last line; the next run ends it and ignores it.
    let ended_before_kill: BTreeSet<String> = std::fs::read_to_string(&state)
        .unwrap()
        .lines()
        .skip(first_lines)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["reason"] != "infra_error")
        .map(|e| e["instance_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ended_before_kill.is_empty());

    let stderr = finished(validate().output().unwrap(), 0);
    let funnel = json(&out.join("funnel.json"));
    assert_eq!(
        funnel["reused"],
        statics + ended_before_kill.len(),
        "{stderr}"
    );
    let kept = by_id(&out.join("instances.jsonl"));
    let dropped = by_id(&out.join("rejected.jsonl"));
    for (id, e) in &expected {
        match e {
            Expected::Kept { fail_to_pass, .. } => {
                assert_eq!(&strings(&kept[*id]["FAIL_TO_PASS"]), fail_to_pass, "{id}");
            }
            Expected::Dropped(reason) => assert_eq!(dropped[*id]["reason"], *reason, "{id}"),
        }
    }
    let mut ends: BTreeMap<String, usize> = BTreeMap::new();
    let text = std::fs::read_to_string(&state).unwrap();
    for end in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if end["reason"] != "infra_error" {
            *ends
                .entry(end["instance_id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert!(ends.values().all(|n| *n == 1), "{ends:?}");
    assert_eq!(ends.len(), ids.len());
}

/// A test that outlasts the limit: `timed_out`, found in the first run of each side and not run
/// again.
#[test]
fn a_task_past_its_time_limit_is_timed_out_once() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let out = dir.path().join("slow");
    finished(
        command(&fixture.slow, &fixture.repos, &out, 2, 30)
            .output()
            .unwrap(),
        0,
    );
    let rejected = jsonl(&out.join("rejected.jsonl"));
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["reason"], "timed_out", "{}", rejected[0]);
    let funnel = json(&out.join("funnel.json"));
    assert_eq!(funnel["sandbox_runs"], 2, "one run of each side");
}

/// The rows of `fixture`'s tasks file whose instance ids are `ids`, as a tasks file of their own.
fn subset(fixture: &environments::Fixture, ids: &[&str], to: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&fixture.tasks).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            ids.contains(&row["instance_id"].as_str().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), ids.len());
    let path = to.join(format!("{}.jsonl", ids.join("+")));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// A recipe as a setup model answers it.
fn answer(python: &str, pre_install: &[&str], install: &[&str]) -> String {
    // Without build isolation the build backend must be in the environment.
    format!(
        "```json\n{}\n```",
        serde_json::json!({
            "python": python, "pip_packages": ["pytest", "setuptools"], "pre_install": pre_install,
            "install": install, "test_cmd": "pytest -rA", "log_parser": "parse_log_pytest",
        })
    )
}

/// With `--setup-endpoint`, a model's recipe stands in where the rules make none (`plain`, no
/// packaging file) and where the rules' install fails (`broken`, a dependency PyPI lacks): it is
/// shown the failing log, its first answer fails too, its second builds; both tasks are kept
/// and their recipes are in `environments.json`. A model whose answers never build gets three
/// tries, then the task is `install_failed`.
#[test]
fn a_setup_model_makes_the_recipes_the_rules_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let tasks = subset(
        &fixture,
        &["fixture__plain-1", "fixture__broken-1"],
        dir.path(),
    );
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, bool)>::new()));
    let seen = asked.clone();
    let (url, served) = support::mock_chat_server_with(move |request| {
        let prompt = request["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        let shows_log = prompt.contains("swerve-fixture-no-such-distribution");
        let mut seen = seen.lock().unwrap();
        if prompt.contains("Repository: fixture/plain") {
            seen.push(("plain".into(), prompt.contains("make no recipe")));
            answer("3.11", &[], &[])
        } else {
            let tries = seen.iter().filter(|(r, _)| r == "broken").count();
            seen.push(("broken".into(), shows_log));
            // First the rules' install again, then one without the missing dependency.
            if tries == 0 {
                answer(
                    "3.13",
                    &[],
                    &["python -m pip install --no-build-isolation -e ."],
                )
            } else {
                answer(
                    "3.13",
                    &[],
                    &["python -m pip install --no-build-isolation --no-deps -e ."],
                )
            }
        }
    });
    let out = dir.path().join("setup");
    finished(
        command(&tasks, &fixture.repos, &out, 1, 300)
            .args(["--setup-endpoint", &url, "--setup-model", "fixture-model"])
            .output()
            .unwrap(),
        0,
    );
    let kept = by_id(&out.join("instances.jsonl"));
    assert_eq!(
        kept.len(),
        2,
        "{}",
        std::fs::read_to_string(out.join("rejected.jsonl")).unwrap()
    );
    assert_eq!(
        strings(&kept["fixture__plain-1"]["FAIL_TO_PASS"]),
        ["test_plain.py::test_x"]
    );
    assert_eq!(
        strings(&kept["fixture__broken-1"]["FAIL_TO_PASS"]),
        ["tests/test_value.py::test_value"]
    );
    assert_eq!(
        *asked.lock().unwrap(),
        [
            ("plain".to_owned(), true),
            ("broken".to_owned(), true),
            ("broken".to_owned(), true)
        ]
    );
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 3);
    let funnel = json(&out.join("funnel.json"));
    assert_eq!(
        (
            funnel["setup_answers"].as_u64(),
            funnel["setup_recipes"].as_u64()
        ),
        (Some(3), Some(2))
    );
    let envs = json(&out.join("environments.json"));
    let broken = &kept["fixture__broken-1"];
    let env = &envs["fixture/broken"][broken["version"].as_str().unwrap()];
    assert_eq!(
        env["install"][0],
        "python -m pip install --no-build-isolation --no-deps -e ."
    );

    // Answers that never build: three tries, then install_failed.
    let tasks = subset(&fixture, &["fixture__broken-1"], dir.path());
    let (url, served) = support::mock_chat_server(&answer("3.13", &["exit 3"], &[]));
    let out = dir.path().join("never");
    finished(
        command(&tasks, &fixture.repos, &out, 1, 300)
            .args(["--setup-endpoint", &url, "--setup-model", "fixture-model"])
            .output()
            .unwrap(),
        0,
    );
    let rejected = jsonl(&out.join("rejected.jsonl"));
    assert_eq!(rejected[0]["reason"], "install_failed", "{}", rejected[0]);
    assert!(rejected[0]["detail"].as_str().unwrap().contains("3 tries"));
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// `--executor slurm` writes what a local run writes: the same rows, rejections (their logs in
/// the output folder's `logs/`, as a local run's), environments and task repository, from a job
/// array whose tasks validate their share on the node.
#[test]
fn validation_on_slurm_writes_what_a_local_run_writes() {
    if !swerve_tests::slurm_up("curate validate --executor slurm") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fixture = environments::build(dir.path());
    let tasks = subset(
        &fixture,
        &["fixture__calc-1", "fixture__calc-3", "fixture__words-1"],
        dir.path(),
    );
    // Folders of one name: the task repository's dataset is named after it.
    let (local, cluster) = (dir.path().join("a/out"), dir.path().join("b/out"));
    finished(
        command(&tasks, &fixture.repos, &local, 1, 300)
            .arg("--task-repo")
            .output()
            .unwrap(),
        0,
    );
    let stderr = finished(
        command(&tasks, &fixture.repos, &cluster, 1, 300)
            .args(["--task-repo", "--executor", "slurm", "--slurm-tasks", "2"])
            .output()
            .unwrap(),
        0,
    );
    assert!(stderr.contains("Submitted Slurm job"), "{stderr}");
    let read = |out: &Path, file: &str| {
        std::fs::read_to_string(out.join(file))
            .unwrap()
            .replace(out.to_str().unwrap(), "OUT")
    };
    for file in [
        "instances.jsonl",
        "rejected.jsonl",
        "environments.json",
        "task-repo/tasks/fixture__calc-1/task.yaml",
        "task-repo/tasks/fixture__words-1/tests.json",
    ] {
        assert_eq!(read(&local, file), read(&cluster, file), "{file}");
    }
    let counts = |out: &Path| {
        let funnel = json(&out.join("funnel.json"));
        (funnel["validated"].clone(), funnel["rejected"].clone())
    };
    assert_eq!(counts(&local), counts(&cluster));
    assert_eq!(by_id(&cluster.join("instances.jsonl")).len(), 2);
    assert!(
        !cluster.join(".slurm").exists(),
        "the round folder is removed"
    );
    // Every task ended once in the state file.
    assert_eq!(jsonl(&cluster.join("validate_state.jsonl")).len(), 3);
}
