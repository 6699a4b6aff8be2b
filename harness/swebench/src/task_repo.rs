//! SWE-bench 5 task repositories, written from SWE-bench 5 rows: the folder layout that SWE-bench
//! 5's `swebench dataset check` accepts and `swebench dataset build` turns back into the same rows
//! (`../shared/specs/environments.md` §4).
//!
//! ```text
//! sweb.yaml                  datasets: [the dataset]; splits: [the split]
//! tasks/<instance_id>/
//!     task.yaml              every other field of the row, keys sorted, multi-line strings as
//!                            literal blocks; `split`, `datasets` and `image` (the derived name)
//!     tests.json             {"FAIL_TO_PASS": [...], "PASS_TO_PASS": [...]}, two-space indent,
//!                            non-ASCII kept, a trailing newline
//!     problem_statement.md   gold.patch   test.patch   eval.sh   hints.md (when not empty)
//!     Dockerfile             the image; its build context is the task folder
//! ```
//!
//! A row's fields go to files verbatim (`patch` → `gold.patch`, `test_patch` → `test.patch`,
//! `eval_script` → `eval.sh`, `problem_statement`, `hints_text`); the test lists may be lists or
//! JSON strings of lists (as on the hub), and are written as lists. The `image` of a task
//! repository is always SWE-bench's derived name ([`image_name`]); the Dockerfile says how that
//! image is made, and is the caller's.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The split a task repository's tasks are in unless told otherwise.
pub const DEFAULT_SPLIT: &str = "test";

/// Row fields that are files of the task folder, with their file names.
const AS_FILES: [(&str, &str); 4] = [
    ("patch", "gold.patch"),
    ("test_patch", "test.patch"),
    ("eval_script", "eval.sh"),
    ("problem_statement", "problem_statement.md"),
];

/// Why a task repository could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TaskRepoError {
    /// A file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A row lacks a field every task needs, or has it in a shape SWE-bench does not read.
    #[error("{instance_id}: {problem}")]
    Row {
        /// The row's instance id (empty when it has none).
        instance_id: String,
        /// What is wrong.
        problem: String,
    },
}

/// The image name SWE-bench 5 derives for a task and that `swebench dataset check` requires:
/// `swebench/sweb.eval.x86_64.<instance id>:latest`, lower-cased, every `__` as `_1776_`.
pub fn image_name(instance_id: &str) -> String {
    crate::dataset::instance_image_name("swebench", "x86_64", instance_id)
}

/// Writes `sweb.yaml` of a task repository in `root`: the datasets and splits its tasks name.
pub fn write_config(root: &Path, datasets: &[&str], splits: &[&str]) -> Result<(), TaskRepoError> {
    let mut config = Map::new();
    config.insert(
        "datasets".into(),
        datasets.iter().map(|d| Value::from(*d)).collect(),
    );
    config.insert(
        "splits".into(),
        splits.iter().map(|s| Value::from(*s)).collect(),
    );
    write(&root.join("sweb.yaml"), &yaml(&Value::Object(config))?)
}

/// Writes the folder `tasks/<instance_id>/` of a task repository in `root` from a SWE-bench 5
/// row, in `dataset` and `split`, with `dockerfile` as its image's Dockerfile; returns the
/// folder.
pub fn write_task(
    root: &Path,
    row: &Map<String, Value>,
    dataset: &str,
    split: &str,
    dockerfile: &str,
) -> Result<PathBuf, TaskRepoError> {
    let id = row
        .get("instance_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let problem = |problem: String| TaskRepoError::Row {
        instance_id: id.clone(),
        problem,
    };
    if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
        return Err(problem(format!("`{id}` cannot name a task folder")));
    }
    let dir = root.join("tasks").join(&id);
    let text = |field: &str| -> Result<&str, TaskRepoError> {
        match row.get(field) {
            None | Some(Value::Null) => Ok(""),
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(problem(format!("`{field}` is not text: {other}"))),
        }
    };
    for (field, file) in AS_FILES {
        write(&dir.join(file), text(field)?)?;
    }
    let hints = text("hints_text")?;
    if !hints.is_empty() {
        write(&dir.join("hints.md"), hints)?;
    }
    let mut tests = Map::new();
    for field in ["FAIL_TO_PASS", "PASS_TO_PASS"] {
        tests.insert(
            field.into(),
            Value::from(test_list(row, field).map_err(problem)?),
        );
    }
    // `json.dumps(tests, indent=2, ensure_ascii=False)`, as SWE-bench writes the file.
    let options = crate::pyjson::Dumps {
        indent: Some(2),
        sort_keys: false,
        ensure_ascii: false,
    };
    let mut tests_json =
        crate::pyjson::dumps(&Value::Object(tests), options).expect("lists of strings serialise");
    tests_json.push('\n');
    write(&dir.join("tests.json"), &tests_json)?;
    write(&dir.join("Dockerfile"), dockerfile)?;

    let mut meta: Map<String, Value> = row
        .iter()
        .filter(|(key, _)| {
            !AS_FILES.iter().any(|(field, _)| field == key)
                && !matches!(key.as_str(), "hints_text" | "FAIL_TO_PASS" | "PASS_TO_PASS")
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    meta.insert("split".into(), split.into());
    meta.insert("datasets".into(), Value::from(vec![dataset]));
    meta.insert("image".into(), image_name(&id).into());
    let sorted: std::collections::BTreeMap<String, Value> = meta.into_iter().collect();
    write(&dir.join("task.yaml"), &yaml(&sorted)?)?;
    Ok(dir)
}

/// A row's test list: a list of strings, or a JSON string holding one.
fn test_list(row: &Map<String, Value>, field: &str) -> Result<Vec<String>, String> {
    let parsed;
    let value = match row.get(field) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(text)) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("`{field}` is a string but not a JSON list: {e}"))?;
            &parsed
        }
        Some(value) => value,
    };
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .ok_or_else(|| format!("`{field}` is not a list of test names"))
}

/// `value` as YAML: keys as given (sorted by the caller), block lists and maps, multi-line
/// strings as literal blocks.
fn yaml(value: &impl serde::Serialize) -> Result<String, TaskRepoError> {
    let options = serde_saphyr::ser_options! {
        prefer_block_scalars: true,
    };
    serde_saphyr::to_string_with_options(value, options).map_err(|e| TaskRepoError::Row {
        instance_id: String::new(),
        problem: format!("not writable as YAML: {e}"),
    })
}

fn write(path: &Path, text: &str) -> Result<(), TaskRepoError> {
    let err = |source| TaskRepoError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(err)?;
    }
    fs_err::write(path, text).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_are_swebenchs() {
        assert_eq!(
            image_name("fixture__Calc-1"),
            "swebench/sweb.eval.x86_64.fixture_1776_calc-1:latest"
        );
    }

    #[test]
    fn a_row_becomes_a_task_folder() {
        let dir = tempfile::tempdir().unwrap();
        let row: Map<String, Value> = serde_json::from_str(
            r##"{"instance_id": "o__r-1", "repo": "o/r", "version": "0.1", "base_commit": "abc",
                "patch": "diff --git a/x b/x\n", "test_patch": "diff --git a/t b/t\n",
                "problem_statement": "It is wrong.\n", "hints_text": "",
                "FAIL_TO_PASS": "[\"t::a\"]", "PASS_TO_PASS": ["t::b", "t::é"],
                "eval_script": "#!/bin/bash\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n",
                "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail",
                "image": "swerve/sweb.eval.x86_64.o_1776_r-1:latest", "pull_number": 1,
                "code_context": {"a.py": "line 1\nline 2\n"}}"##,
        )
        .unwrap();
        write_config(dir.path(), &["swerve/validated"], &[DEFAULT_SPLIT]).unwrap();
        let task = write_task(dir.path(), &row, "swerve/validated", "test", "FROM x\n").unwrap();
        let read = |name: &str| std::fs::read_to_string(task.join(name)).unwrap();
        assert_eq!(read("gold.patch"), "diff --git a/x b/x\n");
        assert_eq!(read("eval.sh"), row["eval_script"].as_str().unwrap());
        assert!(!task.join("hints.md").exists(), "empty hints are no file");
        assert_eq!(
            read("tests.json"),
            "{\n  \"FAIL_TO_PASS\": [\n    \"t::a\"\n  ],\n  \"PASS_TO_PASS\": [\n    \"t::b\",\n    \"t::é\"\n  ]\n}\n"
        );
        let meta = read("task.yaml");
        let keys: Vec<&str> = meta
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
            .filter_map(|l| l.split(':').next())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted, "{meta}");
        assert!(
            meta.contains("image: swebench/sweb.eval.x86_64.o_1776_r-1:latest"),
            "{meta}"
        );
        assert!(
            meta.contains("a.py: |"),
            "multi-line strings are literal blocks: {meta}"
        );
        assert!(!meta.contains("eval_script") && !meta.contains("FAIL_TO_PASS"));
        assert!(
            meta.contains("version: '0.1'") || meta.contains("version: \"0.1\""),
            "a version stays a string: {meta}"
        );
        let bad = serde_json::from_str::<Map<String, Value>>(r#"{"instance_id": "../x"}"#).unwrap();
        assert!(write_task(dir.path(), &bad, "d", "test", "").is_err());
    }
}
