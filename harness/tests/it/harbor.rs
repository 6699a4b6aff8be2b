//! Harbor task folders (`harness dataset export --harbor`): the Python grader the verifier runs
//! (`tests/grade.py`) against swerve's own parsers and grading, the folders an export writes and
//! the rows it refuses, and the verifier run in the task's image as Harbor runs it: the tests
//! uploaded to `/tests`, `bash /tests/test.sh`, `/logs/verifier/reward.txt` read back — 1 after
//! the oracle's `solution/solve.sh`, 0 with no change.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::harness;
use serde_json::{Value, json};
use swerve_harness::harbor::{GRADE_PY, grader_family};
use swerve_log_parsers::{LogContext, Parser};
use swerve_swebench::Instance;
use swerve_swebench::grading::{PatchState, grade};

const FAMILIES: [&str; 7] = [
    "parse_log_pytest",
    "parse_log_pytest_options",
    "parse_log_pytest_v2",
    "parse_log_matplotlib",
    "parse_log_django",
    "parse_log_sympy",
    "parse_log_seaborn",
];

fn write_grader(dir: &Path) -> PathBuf {
    let path = dir.join("grade.py");
    std::fs::write(&path, GRADE_PY).expect("grade.py");
    path
}

fn python(args: &[&str]) -> String {
    let out = Command::new("python3")
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python3 {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Every log the parser crates' tests hold: real runner logs, the SWE-bench edge cases and the
/// SWE-rebench V2 cases (real pytest runs among them).
fn logs() -> Vec<(String, String)> {
    let parsers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-plugins/log-parsers/tests");
    let mut logs = Vec::new();
    for folder in ["runner-logs", "rebench-logs/first", "rebench-logs/second"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(parsers.join(folder))
            .expect("log folder")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).expect("log");
            logs.push((
                file.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    let cases = std::fs::read_to_string(parsers.join("cases.jsonl")).expect("cases");
    for (at, line) in cases.lines().enumerate() {
        let case: Value = serde_json::from_str(line).expect("case");
        logs.push((
            format!("cases.jsonl:{}", at + 1),
            case["log"].as_str().expect("log").to_owned(),
        ));
    }
    logs
}

/// Runs `grade.py`'s parsers on many logs in one Python process: `[family, log]` pairs in,
/// each status map as `[name, status]` pairs (or the class of the exception raised) out.
const DRIVER: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import grade

def run(family, log):
    try:
        return {"map": list(grade.PARSERS[family](log).items())}
    except Exception as error:
        return {"error": type(error).__name__}

json.dump([run(family, log) for family, log in json.load(sys.stdin)], sys.stdout)
"#;

#[test]
fn the_verifiers_grader_parses_as_swerves_parsers_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_grader(dir.path());
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    let mut labels = Vec::new();
    for (label, log) in logs() {
        for name in FAMILIES {
            let parser = Parser::from_log_parser_name(name).expect("a SWE-bench parser");
            let family = grader_family(name).expect("a family grade.py has");
            cases.push(json!([family, log]));
            ours.push(match parser.try_parse(&log, &LogContext::default()) {
                Ok(map) => json!({
                    "map": map
                        .iter()
                        .map(|(test, status)| json!([test, status.as_str()]))
                        .collect::<Vec<_>>(),
                }),
                Err(error) => json!({ "error": error.exception.as_str() }),
            });
            labels.push(format!("{name} on {label}"));
        }
    }
    let mut child = Command::new("python3")
        .args(["-c", DRIVER, &dir.path().display().to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    serde_json::to_writer(child.stdin.take().expect("stdin"), &cases).expect("cases");
    let out = child.wait_with_output().expect("python3 ends");
    assert!(out.status.success(), "the driver failed");
    let theirs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(theirs.len(), ours.len());
    for ((theirs, ours), label) in theirs.iter().zip(&ours).zip(&labels) {
        assert_eq!(theirs, ours, "{label}");
    }
    assert!(labels.len() > 700, "{} comparisons", labels.len());
    for name in [
        "parse_log_gotest",
        "parse_log_jest",
        "parse_log_cargo",
        "nope",
    ] {
        assert_eq!(grader_family(name), None, "{name}");
    }
    assert_eq!(grader_family("parse_log_astropy"), Some("pytest_v2"));
}

#[test]
fn the_verifiers_grader_grades_as_swerve_grades() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grader = write_grader(dir.path()).display().to_string();
    let section = |body: &str, exit: i32| {
        format!(
            "+ git apply\n+ : '>>>>> Start Test Output'\n{body}+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: {exit}\n"
        )
    };
    let f2p = ["t.py::test_a", "t.py::test_p[long"];
    let p2p = ["t.py::test_b", "t.py::test_s"];
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "resolved",
            section(
                "PASSED t.py::test_a\nPASSED t.py::test_p[long-1]\nPASSED t.py::test_b\nSKIPPED t.py::test_s\n",
                0,
            ),
            "pass_and_fail",
        ),
        (
            "a skipped FAIL_TO_PASS test",
            section(
                "SKIPPED t.py::test_a\nPASSED t.py::test_p[long-1]\nPASSED t.py::test_b\n",
                0,
            ),
            "pass_and_fail",
        ),
        (
            "truncated ids that disagree",
            section(
                "PASSED t.py::test_a\nPASSED t.py::test_p[long-1]\nFAILED t.py::test_p[long-2]\nPASSED t.py::test_b\n",
                1,
            ),
            "pass_and_fail",
        ),
        (
            "an exit code that contradicts the results",
            section(
                "PASSED t.py::test_a\nPASSED t.py::test_p[long-1]\nPASSED t.py::test_b\n",
                2,
            ),
            "pass_and_fail",
        ),
        (
            "no markers",
            "PASSED t.py::test_a\n".to_owned(),
            "pass_and_fail",
        ),
        (
            "a bad code",
            format!(
                ">>>>> Patch Apply Failed\n{}",
                section("PASSED t.py::test_a\n", 0)
            ),
            "pass_and_fail",
        ),
        (
            "results outside the section",
            format!(
                "PASSED t.py::test_a\nPASSED t.py::test_p[long-9]\nPASSED t.py::test_b\n{}",
                section("", 0)
            ),
            "pass_and_fail",
        ),
        (
            "fail_only, absent tests succeed",
            section("FAILED t.py::test_b - boom\n", 1),
            "fail_only",
        ),
        (
            "fail_only, nothing failed",
            section("PASSED t.py::other\n", 0),
            "fail_only",
        ),
        (
            "CRLF log",
            section(
                "PASSED t.py::test_a\r\nPASSED t.py::test_p[long-1]\r\nPASSED t.py::test_b\r\n",
                0,
            ),
            "pass_and_fail",
        ),
    ];
    let mut outcomes = Vec::new();
    for (label, log, eval_type) in cases {
        let row = Instance::from_json(
            &json!({
                "instance_id": "demo__t-1", "repo": "demo/t", "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": p2p, "log_parser": "parse_log_pytest", "eval_type": eval_type,
            })
            .to_string(),
        )
        .expect("row");
        let ours = grade(&row, &log, PatchState::Present).expect("graded");
        let config = dir.path().join("config.json");
        std::fs::write(
            &config,
            json!({"instance_id": "demo__t-1", "parser": "pytest", "FAIL_TO_PASS": f2p,
                   "PASS_TO_PASS": p2p, "eval_type": eval_type})
            .to_string(),
        )
        .expect("config");
        let log_file = dir.path().join("log.txt");
        std::fs::write(&log_file, &log).expect("log");
        let (reward, report) = (
            dir.path().join("reward.txt"),
            dir.path().join("report.json"),
        );
        let path = |p: &Path| p.display().to_string();
        python(&[
            &grader,
            &path(&config),
            &path(&log_file),
            &path(&reward),
            &path(&report),
        ]);
        let reward = std::fs::read_to_string(&reward).expect("reward");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
        let resolved = ours.report.resolved;
        assert_eq!(
            reward,
            if resolved { "1\n" } else { "0\n" },
            "{label}: {report:#}"
        );
        match &ours.report.tests_status {
            Some(tests) => {
                assert_eq!(
                    report["tests_status"]["FAIL_TO_PASS"],
                    serde_json::to_value(&tests.fail_to_pass).expect("json"),
                    "{label}"
                );
                assert_eq!(
                    report["tests_status"]["PASS_TO_PASS"],
                    serde_json::to_value(&tests.pass_to_pass).expect("json"),
                    "{label}"
                );
            }
            None => assert!(report["problem"].is_string(), "{label}: {report:#}"),
        }
        outcomes.push((label, resolved));
    }
    // The cases cover both verdicts.
    assert!(
        outcomes.iter().any(|(_, r)| *r) && outcomes.iter().any(|(_, r)| !r),
        "{outcomes:?}"
    );
}

#[test]
fn an_export_writes_harbor_task_folders_and_refuses_what_it_cannot_grade() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("harbor");
    let id = "swerve__inicfg-7";
    harness(
        dir.path(),
        &[
            "dataset",
            "export",
            "swerve-mini",
            "-i",
            id,
            "--harbor",
            &out.display().to_string(),
        ],
    );
    let task = out.join(id);
    let read = |name: &str| {
        std::fs::read_to_string(task.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let toml = read("task.toml");
    assert!(
        toml.contains("schema_version = \"1.4\"")
            && toml.contains(&format!("instance_id = \"{id}\""))
            && toml.contains("network_mode = \"no-network\"")
            && toml.contains("[verifier]\ntimeout_sec = 1800.0"),
        "{toml}"
    );
    let image = swerve_harness::execution::stable_image_name(
        id,
        swerve_harness::execution::swebench_arch(),
    );
    assert_eq!(
        read("environment/Dockerfile")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        [format!("FROM {image}").as_str(), "WORKDIR /testbed"]
    );
    let config: Value = serde_json::from_str(&read("tests/config.json")).expect("config");
    assert_eq!(config["parser"], "pytest");
    assert!(
        config["FAIL_TO_PASS"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    );
    assert!(read("tests/eval.sh").contains(">>>>> Start Test Output"));
    assert!(read("solution/solve.sh").contains("git apply -v - <<'SWERVE_GOLD_PATCH'"));
    assert!(read("instruction.md").contains("`/testbed`"));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(task.join("tests/test.sh"))
        .expect("test.sh")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "test.sh is executable");

    // A row graded by a parser the verifier does not have: refused, naming both.
    let rows = dir.path().join("go.jsonl");
    std::fs::write(
        &rows,
        json!({"instance_id": "demo__go-1", "repo": "demo/go", "patch": "x", "FAIL_TO_PASS": ["T"],
               "PASS_TO_PASS": [], "image": "demo", "eval_script": "true", "log_parser": "parse_log_gotest"})
        .to_string()
            + "\n",
    )
    .expect("rows");
    let refused = Command::new(crate::support::BIN)
        .current_dir(dir.path())
        .args([
            "dataset",
            "export",
            &rows.display().to_string(),
            "--harbor",
            "refused",
        ])
        .output()
        .expect("harness");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("row `demo__go-1` is graded by `parse_log_gotest`"),
        "{stderr}"
    );
    assert!(!dir.path().join("refused").exists(), "nothing written");
}

/// Runs the exported verifier in a container of the task's image as Harbor's verifier does:
/// `tests/` at `/tests`, `bash /tests/test.sh`, the reward from `/logs/verifier/reward.txt`;
/// with `oracle`, `solution/solve.sh` runs first (Harbor's oracle agent).
fn verify(image: &str, task: &Path, oracle: bool) -> String {
    let docker = |args: &[&str]| {
        let out = Command::new("docker").args(args).output().expect("docker");
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let container = docker(&[
        "run",
        "-d",
        "--network",
        "none",
        "--label",
        "swerve.managed=test",
        "-w",
        "/testbed",
        image,
        "sleep",
        "600",
    ]);
    let run = || {
        for folder in ["tests", "solution"] {
            docker(&[
                "cp",
                &task.join(folder).display().to_string(),
                &format!("{container}:/{folder}"),
            ]);
        }
        if oracle {
            docker(&["exec", &container, "bash", "/solution/solve.sh"]);
        }
        docker(&["exec", &container, "bash", "/tests/test.sh"]);
        docker(&["exec", &container, "cat", "/logs/verifier/reward.txt"])
    };
    let reward = std::panic::catch_unwind(run);
    docker(&["rm", "-f", &container]);
    reward.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Runs Harbor's own `harbor run` on `task` with `agent` (`oracle`: `solution/solve.sh`; `nop`:
/// no change) and returns the trial's reward from its `result.json`.
fn harbor_run(venv: &Path, dir: &Path, task: &Path, agent: &str) -> Value {
    let jobs = dir.join("jobs");
    let out = Command::new(venv.join("bin/harbor"))
        .current_dir(dir)
        .env("DOCKER_CONFIG", venv.join("docker-config"))
        .env("HARBOR_TELEMETRY", "0")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .args([
            "run",
            "-p",
            &task.display().to_string(),
            "-a",
            agent,
            "-e",
            "docker",
            "-o",
        ])
        .arg(&jobs)
        .args([
            "--job-name",
            agent,
            "-n",
            "1",
            "-y",
            "--extra-docker-compose",
        ])
        .arg(dir.join("no-network.yaml"))
        .output()
        .expect("harbor runs");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "harbor run -a {agent}: {log}");
    let trials: Vec<PathBuf> = std::fs::read_dir(jobs.join(agent))
        .expect("job folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("result.json").is_file())
        .collect();
    assert_eq!(trials.len(), 1, "{log}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(trials[0].join("result.json")).expect("result.json"),
    )
    .expect("json");
    let reward = result["verifier_result"]["rewards"]["reward"].clone();
    assert!(reward.is_number(), "{result:#}\n{log}");
    reward
}

#[test]
fn an_exported_task_rewards_the_oracle_1_and_no_change_0() {
    let dir = tempfile::tempdir().expect("temp dir");
    let id = "swerve__inicfg-7";
    let out = dir.path().join("harbor");
    harness(
        dir.path(),
        &["images", "build", "-d", "swerve-mini", "-i", id],
    );
    let out_arg = out.display().to_string();
    harness(
        dir.path(),
        &[
            "dataset",
            "export",
            "swerve-mini",
            "-i",
            id,
            "--harbor",
            &out_arg,
        ],
    );
    let task = out.join(id);
    let image = swerve_harness::execution::stable_image_name(
        id,
        swerve_harness::execution::swebench_arch(),
    );
    // The verifier as Harbor runs it, by hand.
    assert_eq!(verify(&image, &task, true), "1");
    assert_eq!(verify(&image, &task, false), "0");

    // Harbor itself. Its Docker environment enforces `network_mode = "no-network"` with a probe
    // and a sidecar image from Docker Hub, which this machine cannot reach: the key is taken out
    // and the network removed by a compose override instead (the whole trial runs without it).
    let Some(venv) = swerve_tests::harbor_venv("Harbor runs an exported task") else {
        return;
    };
    let toml = std::fs::read_to_string(task.join("task.toml")).expect("task.toml");
    let without: String = toml
        .lines()
        .filter(|line| !line.starts_with("network_mode"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(without, toml);
    std::fs::write(task.join("task.toml"), without).expect("task.toml");
    std::fs::write(
        dir.path().join("no-network.yaml"),
        "services:\n  main:\n    network_mode: none\n",
    )
    .expect("override");
    assert_eq!(harbor_run(&venv, dir.path(), &task, "oracle"), json!(1.0));
    assert_eq!(harbor_run(&venv, dir.path(), &task, "nop"), json!(0.0));
}

/// `harness run --harbor`: an exported task and a hand-written one (its image `FROM` the base,
/// a `reward.json` with two rewards), with `gold` (each task's oracle), with patches (one that
/// fixes nothing, one that does not apply), and again with the same run id (every result
/// reused).
#[test]
fn harness_run_takes_harbor_tasks_and_reports_their_rewards() {
    let dir = tempfile::tempdir().expect("temp dir");
    let id = "swerve__inicfg-7";
    let tasks = dir.path().join("tasks");
    harness(
        dir.path(),
        &["images", "build", "-d", "swerve-mini", "-i", id],
    );
    let tasks_arg = tasks.display().to_string();
    harness(
        dir.path(),
        &[
            "dataset",
            "export",
            "swerve-mini",
            "-i",
            id,
            "--harbor",
            &tasks_arg,
        ],
    );
    let answer = tasks.join("answer-42");
    for (name, text) in [
        ("instruction.md", "Write 42 to /app/answer.txt.\n".to_owned()),
        (
            "task.toml",
            "schema_version = \"1.4\"\n\n[verifier]\ntimeout_sec = 60.0\nenv = { WANT = \"42\" }\n\n[environment]\nworkdir = \"/app\"\n".to_owned(),
        ),
        (
            "environment/Dockerfile",
            format!("FROM {}\nRUN mkdir -p /app && cd /app && git init -q\nWORKDIR /app\n", crate::support::base_image()),
        ),
        ("solution/solve.sh", "#!/bin/bash\necho 42 > /app/answer.txt\n".to_owned()),
        (
            "tests/test.sh",
            "#!/bin/bash\nif [ \"$(cat /app/answer.txt 2>/dev/null)\" = \"$WANT\" ]; then r=1; else r=0; fi\n\
             echo \"{\\\"reward\\\": $r, \\\"style\\\": 0.5}\" > /logs/verifier/reward.json\n"
                .to_owned(),
        ),
    ] {
        let path = answer.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
        std::fs::write(path, text).expect("write");
    }
    let run = |run_id: &str, predictions: &str| -> (Value, String) {
        let out = harness(
            dir.path(),
            &[
                "run",
                "--harbor",
                &tasks_arg,
                "-p",
                predictions,
                "--run-id",
                run_id,
            ],
        );
        let model = if predictions == "gold" {
            "gold"
        } else {
            "model"
        };
        let report =
            std::fs::read_to_string(dir.path().join(format!("{model}.{run_id}.harbor.json")))
                .expect("report");
        (
            serde_json::from_str(&report).expect("json"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };

    let (gold, stdout) = run("t-harbor-gold", "gold");
    assert_eq!(
        gold["rewards"],
        json!({id: 1.0, "answer-42": 1.0}),
        "{gold:#}"
    );
    assert_eq!(gold["mean_reward"], json!(1.0));
    assert!(stdout.contains("Tasks with reward 1: 2"), "{stdout}");
    let answer_dir = dir
        .path()
        .join("logs/run_evaluation/t-harbor-gold/gold/answer-42");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(answer_dir.join("result.json")).expect("result"),
    )
    .expect("json");
    assert_eq!(result["rewards"], json!({"reward": 1.0, "style": 0.5}));

    let predictions = dir.path().join("model.jsonl");
    let comment = "diff --git a/answer.txt b/answer.txt\nnew file mode 100644\n--- /dev/null\n+++ b/answer.txt\n@@ -0,0 +1 @@\n+41\n";
    std::fs::write(
        &predictions,
        [
            json!({"instance_id": "answer-42", "model_name_or_path": "model", "model_patch": comment}),
            json!({"instance_id": id, "model_name_or_path": "model", "model_patch": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}),
        ]
        .map(|v| v.to_string() + "\n")
        .concat(),
    )
    .expect("predictions");
    let predictions = predictions.display().to_string();
    let (model, _) = run("t-harbor-model", &predictions);
    assert_eq!(
        model["rewards"],
        json!({id: 0.0, "answer-42": 0.0}),
        "{model:#}"
    );
    let instance = dir.path().join(format!(
        "logs/run_evaluation/t-harbor-model/model/{id}/result.json"
    ));
    assert!(
        std::fs::read_to_string(instance)
            .expect("result")
            .contains("\"not_applied\"")
    );

    // The same run again: nothing runs (no result is written again), the rewards are the same.
    let written = |task: &str| {
        std::fs::metadata(dir.path().join(format!(
            "logs/run_evaluation/t-harbor-model/model/{task}/result.json"
        )))
        .and_then(|m| m.modified())
        .expect("result.json")
    };
    let before = [written(id), written("answer-42")];
    let (again, stdout) = run("t-harbor-model", &predictions);
    assert_eq!([written(id), written("answer-42")], before);
    assert_eq!(again["rewards"], model["rewards"]);
    assert!(stdout.contains("Total tasks: 2"), "{stdout}");

    // A predictions file naming a task the folder does not have is refused.
    let stray = dir.path().join("stray.jsonl");
    std::fs::write(
        &stray,
        json!({"instance_id": "nope", "model_patch": "x"}).to_string() + "\n",
    )
    .expect("stray");
    let out = Command::new(crate::support::BIN)
        .current_dir(dir.path())
        .args([
            "run",
            "--harbor",
            &tasks_arg,
            "-p",
            &stray.display().to_string(),
            "--run-id",
            "t-stray",
        ])
        .output()
        .expect("harness");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("predictions for tasks that are not in"));
}
