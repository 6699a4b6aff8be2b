//! The task rows read from `--tasks`, the harness row each becomes, and the output files
//! written from the tasks' ends.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use swerve_harness::execution::{
    Environments, RepoEnv, script_from_spec, stable_image_name, swebench_arch,
};
use swerve_swebench::dataset::Instance;
use swerve_swebench::task_repo;

use crate::error::CurateError;

use super::{TaskEnd, ValidateFunnel, Verdict};

/// One task row read from `--tasks`.
pub(super) struct TaskRow {
    pub(super) line: usize,
    pub(super) row: Map<String, Value>,
    pub(super) instance_id: String,
    pub(super) repo: String,
    pub(super) base_commit: String,
    pub(super) patch: String,
    pub(super) test_patch: String,
    pub(super) key: String,
}

/// Reads the task rows; a row without `repo`, `base_commit`, `patch` or `test_patch` is an
/// error naming its line.
pub(super) fn read_tasks(path: &Path) -> Result<Vec<TaskRow>, CurateError> {
    let text = fs_err::read_to_string(path).map_err(|source| CurateError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_no = i + 1;
        let row: Map<String, Value> =
            serde_json::from_str(line).map_err(|source| CurateError::Row {
                path: path.to_owned(),
                line: line_no,
                source,
            })?;
        let field = |name: &'static str| -> Result<String, CurateError> {
            row.get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| CurateError::Field {
                    path: path.to_owned(),
                    line: line_no,
                    field: name,
                })
        };
        let repo = field("repo")?;
        let base_commit = field("base_commit")?;
        let patch = field("patch")?;
        let test_patch = field("test_patch")?;
        let instance_id = match row.get("instance_id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => match row.get("pull_number").and_then(Value::as_u64) {
                Some(n) => format!("{}-{n}", repo.replace('/', "__")),
                None => field("instance_id")?,
            },
        };
        let key = hex::encode(Sha256::digest(line.trim().as_bytes()));
        out.push(TaskRow {
            line: line_no,
            row,
            instance_id,
            repo,
            base_commit,
            patch,
            test_patch,
            key,
        });
    }
    Ok(out)
}

/// The harness row of a task: the task's fields, its recipe's version, and empty test lists.
pub(super) fn instance(
    task: &TaskRow,
    version: &str,
    tasks: &Path,
) -> Result<Instance, CurateError> {
    let mut row = task.row.clone();
    row.insert("instance_id".into(), task.instance_id.clone().into());
    row.insert("version".into(), version.into());
    row.insert("FAIL_TO_PASS".into(), Value::Array(Vec::new()));
    row.insert("PASS_TO_PASS".into(), Value::Array(Vec::new()));
    for field in ["image", "eval_script", "log_parser", "eval_type"] {
        row.remove(field);
    }
    serde_json::from_value(Value::Object(row)).map_err(|source| CurateError::Row {
        path: tasks.to_owned(),
        line: task.line,
        source,
    })
}

/// The SWE-bench 5 row written to `instances.jsonl`: the task's own fields, then the row's.
pub(super) fn output_row(task: &TaskRow, row: &Instance, env: &RepoEnv) -> Map<String, Value> {
    let mut out = task.row.clone();
    let test_cmd = env.test_cmd.as_script_text();
    let set = |out: &mut Map<String, Value>, k: &str, v: Value| {
        out.insert(k.to_owned(), v);
    };
    set(&mut out, "instance_id", row.instance_id.clone().into());
    set(
        &mut out,
        "version",
        row.version.clone().unwrap_or_default().into(),
    );
    set(&mut out, "FAIL_TO_PASS", row.fail_to_pass.clone().into());
    set(&mut out, "PASS_TO_PASS", row.pass_to_pass.clone().into());
    set(
        &mut out,
        "image",
        stable_image_name(&row.instance_id, swebench_arch()).into(),
    );
    set(
        &mut out,
        "eval_script",
        script_from_spec(row, env, &test_cmd).into(),
    );
    set(
        &mut out,
        "log_parser",
        env.log_parser.clone().unwrap_or_default().into(),
    );
    set(&mut out, "eval_type", "pass_and_fail".into());
    out.entry("problem_statement")
        .or_insert_with(|| Value::String(String::new()));
    out
}

/// Writes `instances.jsonl`, `environments.json`, `rejected.jsonl` and `funnel.json` from the
/// tasks' ends, in the tasks' order.
pub(super) fn write_outputs(
    dir: &Path,
    tasks: &[TaskRow],
    ends: &BTreeMap<String, TaskEnd>,
    funnel: &mut ValidateFunnel,
    task_repo: bool,
) -> Result<(), CurateError> {
    if task_repo {
        let kept = tasks
            .iter()
            .filter_map(|t| match &ends.get(&t.instance_id)?.verdict {
                Verdict::Kept { row, .. } => Some(row),
                Verdict::Dropped { .. } => None,
            });
        write_task_repo(&dir.join(TASK_REPO), kept)?;
    }
    let mut instances = String::new();
    let mut rejected = String::new();
    let mut environments = Environments::default();
    for task in tasks {
        let Some(end) = ends.get(&task.instance_id) else {
            continue;
        };
        funnel.flaky_tests += end.flaky.len();
        match &end.verdict {
            Verdict::Kept { row, env } => {
                funnel.validated += 1;
                instances.push_str(&serde_json::to_string(row).expect("json"));
                instances.push('\n');
                let version = row
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                environments
                    .0
                    .entry(end.repo.clone())
                    .or_default()
                    .insert(version.to_owned(), env.clone());
            }
            Verdict::Dropped {
                reason,
                detail,
                log,
            } => {
                *funnel
                    .rejected
                    .entry(reason.as_str().to_owned())
                    .or_default() += 1;
                let line = serde_json::json!({
                    "instance_id": end.instance_id,
                    "repo": end.repo,
                    "reason": reason.as_str(),
                    "detail": detail,
                    "log": log,
                });
                rejected.push_str(&line.to_string());
                rejected.push('\n');
            }
        }
    }
    funnel.environments = environments.0.values().map(BTreeMap::len).sum();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        swerve_cache::write_atomic(&path, text)
            .map_err(|source| CurateError::Write { path, source })
    };
    write("instances.jsonl", instances)?;
    write("rejected.jsonl", rejected)?;
    let mut env_text = serde_json::to_string_pretty(&environments).expect("json");
    env_text.push('\n');
    write("environments.json", env_text)?;
    let mut funnel_text = serde_json::to_string_pretty(funnel).expect("json");
    funnel_text.push('\n');
    write("funnel.json", funnel_text)
}

/// The task repository's folder in the output folder (`--task-repo`).
pub const TASK_REPO: &str = "task-repo";

/// Writes the kept rows as a SWE-bench 5 task repository in `root` (made afresh): dataset
/// `swerve/<output folder name>`, split `test`, each task's Dockerfile starting from the image
/// the validation made and named.
fn write_task_repo<'a>(
    root: &Path,
    kept: impl Iterator<Item = &'a Map<String, Value>>,
) -> Result<(), CurateError> {
    let output = root.parent().unwrap_or(root);
    let name: String = std::path::absolute(output)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dataset = format!(
        "swerve/{}",
        if name.is_empty() { "validated" } else { &name }
    );
    let dockerfile = |row: &Map<String, Value>| {
        let id = row
            .get("instance_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let field = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default();
        format!(
            "# {id} as `curate validate` made it: {} at {} in the environment {} of \
             environments.json\n# (`harness images build` makes the image again from that file and \
             the mirrors).\nFROM {}\n",
            field("repo"),
            field("base_commit"),
            field("version"),
            stable_image_name(id, swebench_arch()),
        )
    };
    task_repo::write_repo(root, &dataset, kept, dockerfile).map_err(|e| CurateError::TaskRepo {
        path: root.to_owned(),
        source: e,
    })
}
