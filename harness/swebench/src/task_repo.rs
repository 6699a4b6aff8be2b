//! SWE-bench 5 task repositories, written from SWE-bench 5 rows: the folder layout that SWE-bench
//! 5's `swebench dataset check` accepts and `swebench dataset build` turns back into the same rows
//! (`harness/tests/it/swebench_task_repo.rs` checks both with SWE-bench itself).
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
//!
//! Read back ([`read_tasks`]) a task folder is the row SWE-bench's `load_task` makes of it:
//! `task.yaml`'s keys, the four files as their fields (newlines verbatim), `hints.md` as
//! `hints_text` (empty when absent) and `tests.json`'s two lists; with its folder, which is its
//! Dockerfile's build context and holds its `test_assets/`.

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
    /// A file of a task repository could not be read or is not what SWE-bench reads.
    #[error("task repository {}: {problem}", path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong.
        problem: String,
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

/// Writes a whole task repository in `root` (replacing what was there): `sweb.yaml` naming
/// `dataset` and the default split, and a task folder per row with the Dockerfile
/// `dockerfile(row)` returns. The one writer of task repositories (`harness dataset export
/// --task-repo`, `curate validate`).
pub fn write_repo<'a>(
    root: &Path,
    dataset: &str,
    rows: impl IntoIterator<Item = &'a Map<String, Value>>,
    dockerfile: impl Fn(&Map<String, Value>) -> String,
) -> Result<(), TaskRepoError> {
    if root.join("tasks").is_dir() || root.join("sweb.yaml").is_file() {
        fs_err::remove_dir_all(root).map_err(|source| TaskRepoError::Write {
            path: root.to_owned(),
            source,
        })?;
    }
    write_config(root, &[dataset], &[DEFAULT_SPLIT])?;
    for row in rows {
        write_task(root, row, dataset, DEFAULT_SPLIT, &dockerfile(row))?;
    }
    Ok(())
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

/// One task of a task repository: its row and its folder.
#[derive(Debug, Clone)]
pub struct TaskFolder {
    /// `tasks/<instance_id>/`: its Dockerfile's build context, and where its `test_assets/` are.
    pub dir: PathBuf,
    /// The SWE-bench 5 row the folder holds (see the module documentation).
    pub row: Map<String, Value>,
}

impl TaskFolder {
    /// The row's `instance_id` (the folder's name).
    pub fn instance_id(&self) -> &str {
        self.row
            .get("instance_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The image its Dockerfile builds: the row's `image`, else SWE-bench's derived name.
    pub fn image(&self) -> String {
        self.row
            .get("image")
            .and_then(Value::as_str)
            .map_or_else(|| image_name(self.instance_id()), str::to_owned)
    }
}

/// The task folders of `root` (those holding a `task.yaml`), sorted by name.
fn task_dirs(root: &Path) -> Result<Vec<PathBuf>, TaskRepoError> {
    let tasks = root.join("tasks");
    let read_err = |problem: String| TaskRepoError::Read {
        path: tasks.clone(),
        problem,
    };
    let mut dirs: Vec<PathBuf> = fs_err::read_dir(&tasks)
        .map_err(|e| read_err(format!("no tasks/ folder ({e})")))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|dir| dir.join("task.yaml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Reads one task folder as the row SWE-bench's `load_task` makes of it.
pub(crate) fn read_task(dir: &Path) -> Result<TaskFolder, TaskRepoError> {
    let read = |name: &str| -> Result<String, TaskRepoError> {
        let path = dir.join(name);
        // Bytes as they are: CRLF inside a patch survives, as Python's newline="" keeps it.
        fs_err::read_to_string(&path).map_err(|e| TaskRepoError::Read {
            path,
            problem: e.to_string(),
        })
    };
    let bad = |name: &str, problem: String| TaskRepoError::Read {
        path: dir.join(name),
        problem,
    };
    let meta: Value = serde_saphyr::from_str(&read("task.yaml")?)
        .map_err(|e| bad("task.yaml", format!("not YAML: {e}")))?;
    let Value::Object(mut row) = meta else {
        return Err(bad("task.yaml", "not a mapping of keys".into()));
    };
    for (field, file) in AS_FILES {
        row.insert(field.into(), read(file)?.into());
    }
    let hints = if dir.join("hints.md").is_file() {
        read("hints.md")?
    } else {
        String::new()
    };
    row.insert("hints_text".into(), hints.into());
    let tests: Value = serde_json::from_str(&read("tests.json")?)
        .map_err(|e| bad("tests.json", format!("not JSON: {e}")))?;
    let Value::Object(tests) = tests else {
        return Err(bad("tests.json", "not an object".into()));
    };
    row.extend(tests);
    let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    if row.get("instance_id").and_then(Value::as_str) != folder.as_deref() {
        return Err(bad(
            "task.yaml",
            format!(
                "instance_id {} is not the folder's name",
                row.get("instance_id").unwrap_or(&Value::Null)
            ),
        ));
    }
    Ok(TaskFolder {
        dir: dir.to_owned(),
        row,
    })
}

/// The tasks a run of `root` acts on, as SWE-bench's `load_instances` picks them: the named
/// `instance_ids` from any split (an id with no folder is an error naming it), or else every
/// task in `split` (none is an error naming the splits there are).
pub fn read_tasks(
    root: &Path,
    instance_ids: &[String],
    split: &str,
) -> Result<Vec<TaskFolder>, TaskRepoError> {
    let dirs = task_dirs(root)?;
    if !instance_ids.is_empty() {
        let by_id = |id: &String| {
            dirs.iter()
                .find(|d| d.file_name().is_some_and(|n| n == id.as_str()))
        };
        let mut missing: Vec<&str> = instance_ids
            .iter()
            .filter(|id| by_id(id).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            return Err(TaskRepoError::Read {
                path: root.join("tasks"),
                problem: format!("no task folder for {}", missing.join(" ")),
            });
        }
        return instance_ids
            .iter()
            .map(|id| read_task(by_id(id).expect("checked above")))
            .collect();
    }
    let tasks = dirs
        .iter()
        .map(|d| read_task(d))
        .collect::<Result<Vec<_>, _>>()?;
    let split_of = |t: &TaskFolder| {
        t.row
            .get("split")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let wanted: Vec<TaskFolder> = tasks
        .iter()
        .filter(|t| split_of(t).as_deref() == Some(split))
        .cloned()
        .collect();
    if wanted.is_empty() {
        let mut splits: Vec<String> = tasks.iter().filter_map(split_of).collect();
        splits.sort();
        splits.dedup();
        return Err(TaskRepoError::Read {
            path: root.to_owned(),
            problem: format!(
                "no tasks in split `{split}`; it has: {}",
                if splits.is_empty() {
                    "none".to_owned()
                } else {
                    splits.join(" ")
                }
            ),
        });
    }
    Ok(wanted)
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
    swerve_cache::write_atomic(path, text).map_err(err)
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

        // Read back: the same row, with hints_text empty, the lists as lists and the image
        // SWE-bench's derived name; the folder is the build context.
        let tasks = read_tasks(dir.path(), &[], "test").unwrap();
        assert_eq!(tasks.len(), 1);
        let back = &tasks[0];
        assert_eq!(back.dir, task);
        assert_eq!(back.instance_id(), "o__r-1");
        assert_eq!(back.image(), "swebench/sweb.eval.x86_64.o_1776_r-1:latest");
        for field in [
            "patch",
            "test_patch",
            "eval_script",
            "problem_statement",
            "repo",
        ] {
            assert_eq!(back.row[field], row[field], "{field}");
        }
        assert_eq!(back.row["hints_text"], "");
        assert_eq!(back.row["FAIL_TO_PASS"], serde_json::json!(["t::a"]));
        assert_eq!(back.row["PASS_TO_PASS"], row["PASS_TO_PASS"]);
        assert_eq!(back.row["version"], "0.1");
        assert_eq!(back.row["code_context"], row["code_context"]);
        let instance =
            crate::dataset::Instance::from_json(&Value::Object(back.row.clone()).to_string())
                .unwrap();
        assert_eq!(instance.fail_to_pass, ["t::a"]);

        let err = read_tasks(dir.path(), &[], "dev").unwrap_err().to_string();
        assert!(
            err.contains("no tasks in split `dev`; it has: test"),
            "{err}"
        );
        let named = read_tasks(dir.path(), &["o__r-1".to_owned()], "dev").unwrap();
        assert_eq!(named.len(), 1, "named ids come from any split");
        let err = read_tasks(dir.path(), &["o__r-2".into()], "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no task folder for o__r-2"), "{err}");
    }
}
