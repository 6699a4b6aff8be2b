//! Harbor task folders (the task format SkyRL and TRL read): `harness dataset export --harbor`
//! writes one folder per row.
//!
//! A folder holds `instruction.md` (the issue), `task.toml` (the row's identity as metadata,
//! the verifier's and the agent's time limits, the environment without network and with the
//! repository at `/testbed` as its working folder), `environment/Dockerfile` (`FROM` the image
//! `harness images build` makes for the row, which has no registry to come from), `solution/
//! solve.sh` (the gold patch applied with `git apply`) and `tests/`: `test.sh` runs the row's
//! eval script as SWE-bench's procedure runs it (`--mode compat`: the test files reset, the test
//! patch applied, the tests between the markers, the exit-code line) into
//! `/logs/verifier/test_output.txt`, then `grade.py` grades that log as swerve grades it and
//! writes `1` or `0` to `/logs/verifier/reward.txt` (and the per-test outcomes to
//! `report.json` beside it). `grade.py` is swerve's grading with the log parsers of SWE-bench's
//! Python repositories (`parse_log_pytest`, `…_options`, `…_v2`, `…_matplotlib`,
//! `…_django`, `…_sympy`, `…_seaborn` and the repository names that stand for them) in
//! Python's standard library, so that the verifier needs nothing but the image's `python3`;
//! rows graded by another parser (the other languages') are refused, naming it. Its statuses and
//! verdicts are checked against the crate's own (`tests/it/harbor.rs`).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};
use swerve_log_parsers::Parser;
use swerve_swebench::TaskFormat;

mod run;

pub use run::{
    HarborError, HarborOutcome, HarborReport, HarborResult, HarborRunConfig, HarborSummary,
    HarborTask, read_tasks, run_harbor,
};

use crate::export::{ExportError, ExportSummary, export_lines};
use crate::run::eval_script::with_exit_code;
use crate::run::source::DatasetSource;

/// swerve's grader, copied into every task's `tests/`.
pub const GRADE_PY: &str = include_str!("grade.py");

/// The time the verifier (eval script and grading) may take, in seconds: `harness run`'s default.
const VERIFIER_TIMEOUT_SEC: f64 = 1800.0;
/// The time an agent may take, in seconds.
const AGENT_TIMEOUT_SEC: f64 = 3600.0;

/// The parser family `grade.py` implements for a row's parser name, `None` when it has none.
pub fn grader_family(log_parser: &str) -> Option<&'static str> {
    match Parser::from_log_parser_name(log_parser)? {
        Parser::Pytest => Some("pytest"),
        Parser::PytestOptions => Some("pytest_options"),
        Parser::PytestV2 => Some("pytest_v2"),
        Parser::Matplotlib => Some("matplotlib"),
        Parser::Django => Some("django"),
        Parser::Sympy => Some("sympy"),
        Parser::Seaborn => Some("seaborn"),
        _ => None,
    }
}

/// `task.toml`.
#[derive(Serialize)]
struct TaskToml {
    schema_version: &'static str,
    source: &'static str,
    metadata: Metadata,
    verifier: Timeout,
    agent: Timeout,
    environment: Environment,
}

#[derive(Serialize)]
struct Metadata {
    instance_id: String,
    repo: String,
    base_commit: String,
    log_parser: String,
    image: String,
}

#[derive(Serialize)]
struct Timeout {
    timeout_sec: f64,
}

#[derive(Serialize)]
struct Environment {
    build_timeout_sec: f64,
    workdir: &'static str,
    /// `no-network`: neither the agent nor the verifier reaches a network.
    network_mode: &'static str,
}

/// `tests/config.json`: what `grade.py` grades against.
#[derive(Serialize)]
struct GradeConfig<'r> {
    instance_id: &'r str,
    parser: &'static str,
    #[serde(rename = "FAIL_TO_PASS")]
    fail_to_pass: &'r [String],
    #[serde(rename = "PASS_TO_PASS")]
    pass_to_pass: &'r [String],
    eval_type: String,
}

/// Writes one Harbor task folder per row (after `-i` filtering) under `dir`, named by its
/// instance id. Rows of other benchmarks' formats and rows whose parser `grade.py` does not
/// implement are refused before anything is written.
pub fn export_harbor(source: &DatasetSource, dir: &Path) -> Result<ExportSummary, ExportError> {
    let (lines, filled) = export_lines(source)?;
    let mut tasks = Vec::with_capacity(lines.len());
    for line in &lines {
        let fields: Map<String, Value> =
            serde_json::from_str(line).expect("export lines are JSON objects");
        let id = text(&fields, "instance_id");
        let row = source
            .rows
            .iter()
            .find(|row| row.instance_id == id)
            .expect("an exported line comes from a row");
        let folder_name = Path::new(&id).file_name().and_then(|name| name.to_str());
        if folder_name != Some(id.as_str()) {
            return Err(ExportError::Harbor {
                instance_id: id,
                problem: "has an instance id that cannot name a task folder".to_owned(),
            });
        }
        if row.format() != TaskFormat::SweBench {
            return Err(ExportError::Harbor {
                instance_id: id,
                problem: format!(
                    "is a {} row; Harbor export writes SWE-bench rows and swerve's own",
                    row.format().as_str()
                ),
            });
        }
        let parser = text(&fields, "log_parser");
        let Some(family) = grader_family(&parser) else {
            return Err(ExportError::Harbor {
                instance_id: id,
                problem: format!(
                    "is graded by `{parser}`; the Harbor verifier grades with the parsers of \
                     SWE-bench's Python repositories (parse_log_pytest, parse_log_pytest_options, \
                     parse_log_pytest_v2, parse_log_matplotlib, parse_log_django, \
                     parse_log_sympy, parse_log_seaborn and the repository names for them)"
                ),
            });
        };
        let gold = row.patch.clone().unwrap_or_default();
        if gold.trim().is_empty() {
            return Err(ExportError::Harbor {
                instance_id: id,
                problem: "has no gold patch for solution/solve.sh".to_owned(),
            });
        }
        tasks.push((row, fields, family, gold));
    }
    for (row, fields, family, gold) in &tasks {
        let folder = dir.join(&row.instance_id);
        let config = GradeConfig {
            instance_id: &row.instance_id,
            parser: family,
            fail_to_pass: &row.fail_to_pass,
            pass_to_pass: &row.pass_to_pass,
            eval_type: text(fields, "eval_type"),
        };
        let toml = TaskToml {
            schema_version: "1.4",
            source: "swerve",
            metadata: Metadata {
                instance_id: row.instance_id.clone(),
                repo: row.repo.clone(),
                base_commit: row.base_commit.clone().unwrap_or_default(),
                log_parser: text(fields, "log_parser"),
                image: text(fields, "image"),
            },
            verifier: Timeout {
                timeout_sec: VERIFIER_TIMEOUT_SEC,
            },
            agent: Timeout {
                timeout_sec: AGENT_TIMEOUT_SEC,
            },
            environment: Environment {
                build_timeout_sec: 600.0,
                workdir: "/testbed",
                network_mode: "no-network",
            },
        };
        let files: [(&str, String, bool); 8] = [
            ("instruction.md", instruction(row), false),
            (
                "task.toml",
                toml::to_string(&toml).expect("task.toml serialises"),
                false,
            ),
            (
                "environment/Dockerfile",
                format!(
                    "# The image `harness images build` makes for this row (build it first: there\n\
                     # is no registry to pull it from).\nFROM {}\nWORKDIR /testbed\n",
                    text(fields, "image")
                ),
                false,
            ),
            ("solution/solve.sh", solve_sh(gold), true),
            ("tests/test.sh", TEST_SH.to_owned(), true),
            (
                "tests/eval.sh",
                with_exit_code(&text(fields, "eval_script")),
                true,
            ),
            ("tests/grade.py", GRADE_PY.to_owned(), true),
            (
                "tests/config.json",
                serde_json::to_string_pretty(&config).expect("config serialises") + "\n",
                false,
            ),
        ];
        for (name, contents, executable) in files {
            write_file(&folder.join(name), &contents, executable)?;
        }
    }
    Ok(ExportSummary {
        rows: tasks.len(),
        filled,
    })
}

fn text(fields: &Map<String, Value>, key: &str) -> String {
    fields
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The verifier: the eval script's output to the log, then the grade; a reward is written even
/// when the grader cannot run.
const TEST_SH: &str = "#!/bin/bash
# swerve's verifier: the row's eval script as SWE-bench runs it, graded as swerve grades it.
mkdir -p /logs/verifier
bash /tests/eval.sh > /logs/verifier/test_output.txt 2>&1
python3 /tests/grade.py /tests/config.json /logs/verifier/test_output.txt \\
    /logs/verifier/reward.txt /logs/verifier/report.json \\
    || echo 0 > /logs/verifier/reward.txt
";

fn instruction(row: &swerve_swebench::Instance) -> String {
    let mut text = row.problem_statement.clone().unwrap_or_default();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = write!(
        text,
        "\n---\n\nThe repository `{}` is checked out at `/testbed`. Change its code so that the \
         issue above is resolved; tests that check it will be run after you finish.\n",
        row.repo
    );
    text
}

/// `solution/solve.sh`: the gold patch applied in `/testbed`, from a here-document whose
/// delimiter the patch does not contain.
fn solve_sh(patch: &str) -> String {
    let mut delimiter = "SWERVE_GOLD_PATCH".to_owned();
    while patch.lines().any(|line| line == delimiter) {
        delimiter.push('_');
    }
    let mut patch = patch.to_owned();
    if !patch.ends_with('\n') {
        patch.push('\n');
    }
    format!(
        "#!/bin/bash\n# The gold patch.\nset -euo pipefail\ncd /testbed\ngit apply -v - <<'{delimiter}'\n{patch}{delimiter}\n"
    )
}

fn write_file(path: &Path, contents: &str, executable: bool) -> Result<(), ExportError> {
    let error = |source| ExportError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(error)?;
    }
    swerve_cache::write_atomic(path, contents).map_err(error)?;
    if executable {
        use std::os::unix::fs::PermissionsExt as _;
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(rows: &str) -> (tempfile::TempDir, DatasetSource) {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("rows.jsonl");
        fs_err::write(&file, rows).expect("rows");
        let source =
            DatasetSource::resolve(&file.display().to_string(), "test", None).expect("a dataset");
        (dir, source)
    }

    #[test]
    fn an_instance_id_that_is_not_a_folder_name_is_refused() {
        for id in ["../escape", "a/b", "..", "."] {
            let row = serde_json::json!({
                "instance_id": id, "repo": "o/r", "patch": "p", "FAIL_TO_PASS": [], "PASS_TO_PASS": [],
                "image": "i", "eval_script": "true", "log_parser": "parse_log_pytest",
            });
            let (dir, source) = source(&format!("{row}\n"));
            let out = dir.path().join("out");
            let error = export_harbor(&source, &out).expect_err(id).to_string();
            assert!(error.contains("cannot name a task folder"), "{id}: {error}");
            assert!(!out.exists() && !dir.path().join("escape").exists(), "{id}");
        }
    }

    #[test]
    fn the_solution_heredoc_never_ends_inside_the_patch() {
        let patch =
            "diff --git a/x b/x\n+SWERVE_GOLD_PATCH\n SWERVE_GOLD_PATCH\nSWERVE_GOLD_PATCH\n";
        let script = solve_sh(patch);
        assert!(script.contains("<<'SWERVE_GOLD_PATCH_'\n"), "{script}");
        assert!(
            script.ends_with("SWERVE_GOLD_PATCH\nSWERVE_GOLD_PATCH_\n"),
            "{script}"
        );
    }
}
