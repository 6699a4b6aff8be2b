//! `harness run` on SWE-bench 5 rows (their own `image`, `eval_script`, `log_parser` and
//! `eval_type`) next to rows without those fields (generated script, built image), against the
//! real Docker engine; and `harness dataset export` read back by `harness run` with no
//! environment specs at all (the pure v5 path: the exported image names, found locally).
//!
//! The rows are swerve-mini's, changed so that each v5 field shows whether it was used.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::harness;
use serde_json::{Map, Value};
use swerve_harness::execution::with_exit_code;

fn mini() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/swerve-mini")
}

fn rows() -> Vec<Map<String, Value>> {
    std::fs::read_to_string(mini().join("swerve-mini.jsonl"))
        .expect("rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

fn row(id: &str) -> Map<String, Value> {
    rows()
        .into_iter()
        .find(|r| r["instance_id"] == id)
        .expect("row")
}

fn script(row: &Map<String, Value>) -> String {
    row["eval_script"].as_str().expect("eval_script").to_owned()
}

fn write_rows(path: &Path, rows: &[Map<String, Value>]) {
    let text: Vec<String> = rows
        .iter()
        .map(|r| Value::Object(r.clone()).to_string())
        .collect();
    std::fs::write(path, text.join("\n") + "\n").expect("write rows");
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ids(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .expect("id list")
        .iter()
        .map(|v| v.as_str().expect("id"))
        .collect()
}

fn leftover_containers(run_id: &str) -> String {
    let out = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label=swerve.run-id={run_id}"))
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// One dataset, both kinds of rows, hardened run with gold patches:
/// - spans-5: its own script with an extra line, which must run verbatim;
/// - inicfg-3: no v5 fields, so the generated (hardened) script;
/// - textkit-4: `eval_type` `fail_only` and a FAIL_TO_PASS test that does not exist, which
///   only `fail_only` grades as a success;
/// - spans-10: its test line ends in `&& false`, so every test passes but the test command
///   exits 1: the exit-code cross-check makes the log ungradeable;
/// - textkit-6: a `log_parser` no plugin knows, so the evaluator fails on that name.
#[test]
fn v5_rows_use_their_fields_and_other_rows_keep_the_generated_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run_id = format!("t-v5-{}", std::process::id());
    std::fs::copy(
        mini().join("environments.json"),
        dir.path().join("environments.json"),
    )
    .expect("copy specs");

    let mut verbatim = row("swerve__spans-5");
    let own = script(&verbatim).replace(
        ": '>>>>> Start Test Output'",
        "echo 'verbatim script of the row'\n: '>>>>> Start Test Output'",
    );
    verbatim.insert("eval_script".into(), own.clone().into());

    let mut generated = row("swerve__inicfg-3");
    for field in ["image", "eval_script", "log_parser", "eval_type"] {
        generated.shift_remove(field);
    }

    let mut fail_only = row("swerve__textkit-4");
    fail_only.insert("eval_type".into(), "fail_only".into());
    let mut f2p = fail_only["FAIL_TO_PASS"].as_array().expect("list").clone();
    f2p.push("tests/test_absent.py::test_never_run".into());
    fail_only.insert("FAIL_TO_PASS".into(), f2p.into());

    let mut exit_1 = row("swerve__spans-10");
    let lines: Vec<String> = script(&exit_1)
        .split('\n')
        .map(|l| {
            if l.starts_with("pytest -rA ") {
                format!("{l} && false")
            } else {
                l.to_owned()
            }
        })
        .collect();
    exit_1.insert("eval_script".into(), lines.join("\n").into());

    let mut bad_parser = row("swerve__textkit-6");
    bad_parser.insert("log_parser".into(), "parse_log_no_such_parser".into());

    let rows_file = dir.path().join("v5.jsonl");
    write_rows(
        &rows_file,
        &[verbatim, generated, fail_only, exit_1, bad_parser],
    );
    let out = harness(
        dir.path(),
        &[
            "run",
            "-d",
            &rows_file.display().to_string(),
            "--repos",
            &mini().join("repos").display().to_string(),
            "-p",
            "gold",
            "--run-id",
            &run_id,
            "--max-workers",
            "2",
            "-q",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value =
        serde_json::from_str(&read(dir.path().join(format!("gold.{run_id}.json")))).expect("json");
    let instance = |id: &str, file: &str| {
        read(
            dir.path()
                .join("logs/run_evaluation")
                .join(&run_id)
                .join("gold")
                .join(id)
                .join(file),
        )
    };

    assert_eq!(
        ids(&report["resolved_ids"]),
        ["swerve__inicfg-3", "swerve__spans-5", "swerve__textkit-4"],
        "{report:#}\n{stderr}"
    );
    // The row's own script, exactly as SWE-bench 5 runs it.
    assert_eq!(instance("swerve__spans-5", "eval.sh"), with_exit_code(&own));
    // The echo's output line (its `set -x` trace ends in a quote instead). The engine may cut
    // stderr's trace line where stdout's output lands, so the line start is not asserted.
    let output = instance("swerve__spans-5", "test_output.txt");
    assert!(output.contains("verbatim script of the row\n"), "{output}");
    // The row without the fields: the generated, hardened script in a built image.
    let generated = instance("swerve__inicfg-3", "eval.sh");
    assert!(
        generated.contains("\npytest -rA -p no:cacheprovider tests/"),
        "{generated}"
    );
    assert!(!generated.contains("verbatim"));
    // fail_only: the absent FAIL_TO_PASS test is a success.
    let fail_only = instance("swerve__textkit-4", "report.json");
    assert!(
        fail_only.contains("\"tests/test_absent.py::test_never_run\""),
        "{fail_only}"
    );
    // The measured exit code contradicts the all-passed log: not gradeable.
    assert_eq!(ids(&report["unresolved_ids"]), ["swerve__spans-10"]);
    let contradicted = instance("swerve__spans-10", "report.json");
    assert!(
        contradicted.contains("\"patch_successfully_applied\": false"),
        "{contradicted}"
    );
    assert!(instance("swerve__spans-10", "swerve.json").contains("\"exit_code\": 1"));
    // The row's parser name reached the evaluator plugin.
    let meta = instance("swerve__textkit-6", "swerve.json");
    assert!(meta.contains("\"evaluator_failed\""), "{meta}");
    assert!(meta.contains("parse_log_no_such_parser"), "{meta}");
    assert!(stderr.contains("swerve__textkit-6"), "{stderr}");

    // The verbatim row's image is the stable name, now present locally.
    let inspect = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}"])
        .arg(row("swerve__spans-5")["image"].as_str().expect("image"))
        .output()
        .expect("docker image inspect");
    assert!(inspect.status.success(), "stable image name missing");
    assert_eq!(leftover_containers(&run_id), "");
}

/// `harness dataset export` writes SWE-bench rows; `harness run --mode compat` evaluates them
/// with no environment specs beside them (images by their exported names, scripts verbatim),
/// like SWE-bench's own harness would, and the exit-code line in the log does the cross-check.
#[test]
fn exported_rows_run_on_their_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run_id = format!("t-export-{}", std::process::id());
    let export = dir.path().join("exported/swerve-mini.jsonl");
    let ids_wanted = ["swerve__spans-5", "swerve__spans-10"];
    let mut args = vec!["dataset", "export", "swerve-mini", "-o"];
    let export_arg = export.display().to_string();
    args.push(&export_arg);
    args.push("-i");
    args.extend(ids_wanted);
    harness(dir.path(), &args);
    let exported: Vec<Map<String, Value>> = read(export.clone())
        .lines()
        .map(|l| serde_json::from_str(l).expect("exported row"))
        .collect();
    assert_eq!(exported.len(), 2);
    for r in &exported {
        assert!(r["FAIL_TO_PASS"].is_string(), "{r:?}");
        assert!(
            r["image"]
                .as_str()
                .expect("image")
                .starts_with("swerve/sweb.eval.")
        );
    }
    // The images must exist under their exported names: build them.
    harness(
        dir.path(),
        &[
            "images",
            "build",
            "-d",
            "swerve-mini",
            "-i",
            ids_wanted[0],
            ids_wanted[1],
        ],
    );
    // Break spans-10 the same way as above, now graded from the log's exit-code line.
    let mut rows = exported;
    let broken = script(&rows[1]).replace(
        "\n: '>>>>> End Test Output'",
        " && false\n: '>>>>> End Test Output'",
    );
    rows[1].insert("eval_script".into(), broken.into());
    write_rows(&export, &rows);

    harness(
        dir.path(),
        &[
            "run",
            "-d",
            &export_arg,
            "-p",
            "gold",
            "--run-id",
            &run_id,
            "--mode",
            "compat",
            "-q",
        ],
    );
    let report: Value =
        serde_json::from_str(&read(dir.path().join(format!("gold.{run_id}.json")))).expect("json");
    assert_eq!(
        ids(&report["resolved_ids"]),
        ["swerve__spans-5"],
        "{report:#}"
    );
    assert_eq!(ids(&report["unresolved_ids"]), ["swerve__spans-10"]);
    let images: Vec<&str> = ids(&report["unremoved_images"]);
    assert_eq!(
        images,
        [
            "swerve/sweb.eval.x86_64.swerve_1776_spans-10:latest",
            "swerve/sweb.eval.x86_64.swerve_1776_spans-5:latest"
        ]
    );
    let dir5 = dir
        .path()
        .join("logs/run_evaluation")
        .join(&run_id)
        .join("gold/swerve__spans-5");
    assert_eq!(
        read(dir5.join("eval.sh")),
        with_exit_code(&script(&row("swerve__spans-5")))
    );
    assert!(read(dir5.join("test_output.txt")).contains(">>>>> Test Exit Code: 0"));
    assert_eq!(leftover_containers(&run_id), "");
}
