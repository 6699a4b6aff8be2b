//! `harness run` against the real Docker engine on the bundled swerve-mini dataset: images,
//! gold / empty / mixed predictions with their expected outcomes, resume after SIGKILL
//! (exactly-once reports, no leaked containers), egress blocked, and the timeout outcome.
//!
//! Images are content-addressed and shared by all tests (the first build takes minutes, later
//! runs reuse them). Each test has its own temp folder and run id.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_harness");

fn dataset_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/swerve-mini")
}

/// A fresh folder and run id per test.
struct TestContext {
    dir: tempfile::TempDir,
    run_id: String,
}

impl TestContext {
    fn new(name: &str) -> TestContext {
        TestContext {
            dir: tempfile::tempdir().expect("temp dir"),
            run_id: format!("t-{name}-{}", std::process::id()),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, predictions: &str, extra: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(self.path())
            .args(["run", "-d", "swerve-mini", "-p", predictions, "--run-id"])
            .arg(&self.run_id)
            .args(["--max-workers", "2", "-q"])
            .args(extra);
        cmd
    }

    fn run(&self, predictions: &str, extra: &[&str]) -> Output {
        let out = self
            .command(predictions, extra)
            .output()
            .expect("harness runs");
        assert!(
            out.status.success(),
            "harness run failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn run_report(&self, model: &str) -> Value {
        let path = self.path().join(format!("{model}.{}.json", self.run_id));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(text.ends_with("}\n"));
        serde_json::from_str(&text).expect("run report is JSON")
    }

    fn instance_dir(&self, model: &str, id: &str) -> PathBuf {
        self.path()
            .join("logs/run_evaluation")
            .join(&self.run_id)
            .join(model)
            .join(id)
    }

    fn write_predictions(&self, name: &str, preds: &[(&str, Value)], model: &str) -> String {
        let path = self.path().join(name);
        let lines: Vec<String> = preds
            .iter()
            .map(|(id, patch)| {
                serde_json::json!({"instance_id": id, "model_name_or_path": model, "model_patch": patch})
                    .to_string()
            })
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").expect("write predictions");
        path.display().to_string()
    }

    /// Containers still labelled with this run id.
    fn leftover_containers(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-a", "-q", "--filter"])
            .arg(format!("label=swerve.run-id={}", self.run_id))
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("id list")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect()
}

fn rows() -> Vec<Value> {
    std::fs::read_to_string(dataset_dir().join("swerve-mini.jsonl"))
        .expect("rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

#[test]
fn gold_resolves_everything() {
    let ctx = TestContext::new("gold");
    let out = ctx.run("gold", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Instances resolved: 13"), "{stdout}");
    let report = ctx.run_report("gold");
    assert_eq!(report["resolved_instances"], 13, "{report:#}");
    assert_eq!(report["error_instances"], 0);
    assert_eq!(report["schema_version"], 2);
    assert_eq!(report["unstopped_instances"], 0);
    let dir = ctx.instance_dir("gold", "swerve__spans-2");
    for file in [
        "run_instance.log",
        "patch.diff",
        "eval.sh",
        "test_output.txt",
        "report.json",
        "swerve.json",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}",
            dir.display()
        );
    }
    // swerve-mini rows carry their eval_script (SWE-bench 5 rows): it runs verbatim, with v5's
    // exit-code lines; the hardened run turns pytest's cache off through PYTEST_ADDOPTS.
    let eval = std::fs::read_to_string(dir.join("eval.sh")).expect("eval.sh");
    assert!(
        eval.starts_with("#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\n")
    );
    assert!(eval.contains("\npytest -rA tests/"));
    assert!(eval.contains("SWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"\n"));
    let row = rows()
        .into_iter()
        .find(|r| r["instance_id"] == "swerve__spans-2")
        .expect("row");
    assert_eq!(
        eval,
        swerve_harness::execution::with_exit_code(row["eval_script"].as_str().expect("script"))
    );
    let report_json = std::fs::read_to_string(dir.join("report.json")).expect("report");
    assert!(
        report_json.starts_with("{\n    \"swerve__spans-2\": {\n        \"patch_is_None\": false,")
    );
    assert!(!report_json.ends_with('\n'));
    assert!(
        std::fs::read_to_string(
            ctx.path()
                .join("logs/run_evaluation")
                .join(&ctx.run_id)
                .join("run.json")
        )
        .expect("run.json")
        .contains("\"dataset\": \"swerve-mini\"")
    );
    assert!(ctx.leftover_containers().is_empty());
}

#[test]
fn empty_patches_are_not_run() {
    let ctx = TestContext::new("empty");
    let preds = ctx.write_predictions(
        "empty.jsonl",
        &[
            ("swerve__inicfg-3", Value::from("")),
            ("swerve__spans-5", Value::Null),
        ],
        "empty/model",
    );
    ctx.run(
        &preds,
        &["-i", "swerve__inicfg-3", "swerve__spans-5", "--no-html"],
    );
    let report = ctx.run_report("empty__model");
    let page = ctx.path().join(format!("empty__model.{}.html", ctx.run_id));
    assert!(!page.exists(), "--no-html wrote {}", page.display());
    assert_eq!(report["resolved_instances"], 0);
    assert_eq!(
        ids(&report["empty_patch_ids"]),
        ["swerve__inicfg-3", "swerve__spans-5"]
    );
    assert_eq!(report["total_instances"], 2);
}

/// The mixed predictions give their expected outcomes; the forge is not resolved.
#[test]
fn mixed_predictions_match_expected() {
    let ctx = TestContext::new("mixed");
    let subset = [
        "swerve__inicfg-3",
        "swerve__inicfg-7",
        "swerve__inicfg-12",
        "swerve__textkit-4",
        "swerve__textkit-6",
        "swerve__textkit-13",
        "swerve__spans-2",
        "swerve__spans-8",
        "swerve__spans-13",
    ];
    let preds = dataset_dir().join("predictions-mixed.jsonl");
    let mut args = vec!["-i"];
    args.extend(subset);
    ctx.run(&preds.display().to_string(), &args);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dataset_dir().join("predictions-mixed.expected.json"))
            .expect("expected"),
    )
    .expect("json");
    let report = ctx.run_report("swerve-mini-mixed");
    let resolved = ids(&report["resolved_ids"]);
    let empty = ids(&report["empty_patch_ids"]);
    let errors = ids(&report["error_ids"]);
    for id in subset {
        let want = &expected[id];
        assert_eq!(
            resolved.contains(&id.to_owned()),
            want["resolved"].as_bool().expect("bool"),
            "{id}: {want}"
        );
        let dir = ctx.instance_dir("swerve-mini-mixed", id);
        if want["kind"] == "empty" {
            assert!(empty.contains(&id.to_owned()), "{id}");
        } else if want["patch_applies"] == false {
            assert!(errors.contains(&id.to_owned()), "{id}");
            assert!(!dir.join("report.json").exists());
            let log = std::fs::read_to_string(dir.join("run_instance.log")).expect("log");
            assert!(log.contains(">>>>> Patch Apply Failed:"), "{id}");
        } else {
            assert!(dir.join("report.json").is_file(), "{id}");
        }
    }
    // The forge's conftest.py was removed before the tests ran.
    let meta = std::fs::read_to_string(
        ctx.instance_dir("swerve-mini-mixed", "swerve__textkit-13")
            .join("swerve.json"),
    )
    .expect("meta");
    assert!(meta.contains("tests/conftest.py"), "{meta}");
    // The run's HTML page beside the run report: a row per instance with the report's status,
    // and the forge among the hardening findings.
    let page = std::fs::read_to_string(
        ctx.path()
            .join(format!("swerve-mini-mixed.{}.html", ctx.run_id)),
    )
    .expect("the run's HTML page");
    for id in subset {
        let id = id.to_owned();
        let status = if resolved.contains(&id) {
            "resolved"
        } else if empty.contains(&id) {
            "empty_patch"
        } else if errors.contains(&id) {
            "error"
        } else {
            "unresolved"
        };
        let row = format!("<tr data-instance=\"{id}\" data-status=\"{status}\">");
        assert!(page.contains(&row), "{row}");
    }
    assert!(page.contains("<code>tests/conftest.py</code>"));
    assert!(ctx.leftover_containers().is_empty());
}

/// The same forge, run SWE-bench's way, is resolved: the hardening is what stops it.
#[test]
fn compat_mode_is_fooled_by_the_forge() {
    let ctx = TestContext::new("compat");
    let preds = dataset_dir().join("predictions-mixed.jsonl");
    ctx.run(
        &preds.display().to_string(),
        &["-i", "swerve__textkit-13", "--mode", "compat"],
    );
    let report = ctx.run_report("swerve-mini-mixed");
    assert_eq!(ids(&report["resolved_ids"]), ["swerve__textkit-13"]);
}

/// SIGKILL after the first report, rerun: every instance reported once, no container left;
/// then a changed patch under the same run id is evaluated again.
#[test]
fn resume_after_sigkill() {
    let ctx = TestContext::new("resume");
    let subset = [
        "swerve__inicfg-3",
        "swerve__spans-5",
        "swerve__textkit-9",
        "swerve__spans-10",
    ];
    let mut args = vec!["-i"];
    args.extend(subset);
    let mut child = ctx.command("gold", &args).spawn().expect("spawn");
    let any_report = || {
        subset
            .iter()
            .any(|id| ctx.instance_dir("gold", id).join("report.json").exists())
    };
    let started = Instant::now();
    while !any_report() && started.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let out = ctx.run("gold", &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = ctx.run_report("gold");
    assert_eq!(
        ids(&report["completed_ids"]),
        subset
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .tap_sort()
    );
    assert_eq!(report["resolved_instances"], 4, "{report:#}\n{stderr}");
    assert!(ctx.leftover_containers().is_empty());

    // A different patch for one instance under the same run id is evaluated again.
    let wrong =
        std::fs::read_to_string(dataset_dir().join("sources/predictions/swerve__textkit-9.diff"))
            .expect("diff");
    let gold_rows = rows();
    let mut preds = Vec::new();
    for id in subset {
        let patch = if id == "swerve__textkit-9" {
            Value::from(wrong.clone())
        } else {
            gold_rows
                .iter()
                .find(|r| r["instance_id"] == id)
                .expect("row")["patch"]
                .clone()
        };
        preds.push((id, patch));
    }
    let file = ctx.write_predictions("changed.jsonl", &preds, "gold");
    let before = std::fs::read_to_string(
        ctx.instance_dir("gold", "swerve__inicfg-3")
            .join("run_instance.log"),
    )
    .expect("log");
    ctx.run(&file, &args);
    let report = ctx.run_report("gold");
    assert_eq!(ids(&report["unresolved_ids"]), ["swerve__textkit-9"]);
    assert_eq!(report["resolved_instances"], 3);
    // The unchanged instances were reused, not rerun.
    let after = std::fs::read_to_string(
        ctx.instance_dir("gold", "swerve__inicfg-3")
            .join("run_instance.log"),
    )
    .expect("log");
    assert_eq!(before, after);
    assert!(ctx.leftover_containers().is_empty());
}

trait TapSort {
    fn tap_sort(self) -> Self;
}

impl TapSort for Vec<String> {
    fn tap_sort(mut self) -> Self {
        self.sort();
        self
    }
}

/// A patch whose module sleeps at import: the instance gets the timeout outcome.
#[test]
fn hanging_tests_time_out() {
    let ctx = TestContext::new("timeout");
    let row = rows()
        .into_iter()
        .find(|r| r["instance_id"] == "swerve__spans-5")
        .expect("row");
    let clone = ctx.path().join("spans");
    let git = |args: &[&str], dir: &Path| {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(
        &[
            "clone",
            "-q",
            &dataset_dir()
                .join("repos/spans.bundle")
                .display()
                .to_string(),
            &clone.display().to_string(),
        ],
        ctx.path(),
    );
    git(
        &["checkout", "-q", row["base_commit"].as_str().expect("base")],
        &clone,
    );
    let init = clone.join("spans/__init__.py");
    let text = std::fs::read_to_string(&init).expect("init");
    std::fs::write(&init, format!("import time\ntime.sleep(3600)\n{text}")).expect("write");
    let patch = git(&["diff"], &clone);
    let preds = ctx.write_predictions(
        "hang.jsonl",
        &[("swerve__spans-5", Value::from(patch))],
        "hang",
    );
    let started = Instant::now();
    ctx.run(&preds, &["-i", "swerve__spans-5", "--timeout", "15"]);
    assert!(started.elapsed() < Duration::from_secs(300));
    let dir = ctx.instance_dir("hang", "swerve__spans-5");
    assert!(!dir.join("report.json").exists());
    let output = std::fs::read_to_string(dir.join("test_output.txt")).expect("output");
    assert!(
        output.ends_with("\n\nTimeout error: 15 seconds exceeded."),
        "{output}"
    );
    let meta = std::fs::read_to_string(dir.join("swerve.json")).expect("meta");
    assert!(meta.contains("\"timed_out\""), "{meta}");
    let report = ctx.run_report("hang");
    assert_eq!(ids(&report["error_ids"]), ["swerve__spans-5"]);
    assert_eq!(
        report["failure_reasons"]["swerve__spans-5"],
        "tests_timed_out"
    );
    assert!(ctx.leftover_containers().is_empty());
}

/// Code run by the tests cannot reach the network: the gold patch plus a probe that breaks
/// the package's import when a connection succeeds still resolves.
#[test]
fn egress_is_blocked() {
    let ctx = TestContext::new("egress");
    let row = rows()
        .into_iter()
        .find(|r| r["instance_id"] == "swerve__spans-5")
        .expect("row");
    let clone = ctx.path().join("spans");
    let git = |args: &[&str], dir: &Path| {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(
        &[
            "clone",
            "-q",
            &dataset_dir()
                .join("repos/spans.bundle")
                .display()
                .to_string(),
            &clone.display().to_string(),
        ],
        ctx.path(),
    );
    git(
        &["checkout", "-q", row["base_commit"].as_str().expect("base")],
        &clone,
    );
    let gold = ctx.path().join("gold.diff");
    std::fs::write(&gold, row["patch"].as_str().expect("patch")).expect("write");
    git(&["apply", &gold.display().to_string()], &clone);
    let init = clone.join("spans/__init__.py");
    let text = std::fs::read_to_string(&init).expect("init");
    let probe = "import socket as _s\nfor _host in ('pypi.org', '1.1.1.1'):\n    try:\n        _s.create_connection((_host, 443), timeout=5).close()\n    except OSError:\n        continue\n    raise ImportError('egress is open')\n";
    std::fs::write(&init, format!("{text}{probe}")).expect("write");
    let patch = git(&["diff"], &clone);
    let preds = ctx.write_predictions(
        "egress.jsonl",
        &[("swerve__spans-5", Value::from(patch))],
        "egress",
    );
    ctx.run(&preds, &["-i", "swerve__spans-5", "--timeout", "120"]);
    let report = ctx.run_report("egress");
    let output = std::fs::read_to_string(
        ctx.instance_dir("egress", "swerve__spans-5")
            .join("test_output.txt"),
    )
    .expect("output");
    assert_eq!(
        ids(&report["resolved_ids"]),
        ["swerve__spans-5"],
        "{output}"
    );
}
