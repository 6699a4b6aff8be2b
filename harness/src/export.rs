//! `harness dataset export`: a dataset's rows as SWE-bench 5 rows, so that SWE-bench's own
//! `run_evaluation` can evaluate them on the images `harness images build` makes.
//!
//! Every row gets the four fields SWE-bench 5 added to its rows: `image`, `eval_script`,
//! `log_parser` and `eval_type`. A row that has a field keeps it; a missing one is filled from
//! the row's environment spec: the stable image name ([`images::stable_image_name`]), the eval
//! script SWE-bench's generator makes (without the exit-code lines, which v5 adds when it runs
//! it), the spec's parser name (else the one SWE-bench uses for the repository), `pass_and_fail`.
//! `FAIL_TO_PASS` and `PASS_TO_PASS` are written as the hub rows hold them: a string with the
//! list as Python's `json.dumps` prints it. SWE-bench's fields come first, in its order; the
//! row's other fields follow as they were (from `.json`/`.jsonl` files; a parquet dataset is
//! exported from its parsed rows, so only the fields swerve reads).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use swerve_log_parsers::Parser;

use crate::images;
use crate::run::eval_script::script_from_spec;
use crate::run::source::DatasetSource;
use swerve_swebench::dataset::{EvalType, Instance};

/// SWE-bench's row fields, in the order its hub datasets have them; the v5 fields last.
const SWE_BENCH_FIELDS: [&str; 18] = [
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
    "difficulty",
    "image",
    "eval_script",
    "log_parser",
    "eval_type",
    "image_assets",
];

/// Why a dataset could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A row that cannot become a Harbor task (the problem says why).
    #[error("row `{instance_id}` {problem}")]
    Harbor {
        /// The row.
        instance_id: String,
        /// What it is or lacks.
        problem: String,
    },
    /// The task repository could not be written.
    #[error("cannot write the task repository {}", path.display())]
    TaskRepo {
        /// Its folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: swerve_swebench::task_repo::TaskRepoError,
    },
    /// The rows file could not be read again as JSON values.
    #[error("cannot read dataset {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A row that is not a JSON object.
    #[error("{}:{line}: invalid dataset row", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// 1-based line (`.jsonl`) or row number (`.json`).
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A v5 field the row lacks and its environment spec cannot supply.
    #[error(
        "{}:{line}: {instance_id} has no `{field}` and no environment spec for {spec} to make one", path.display()
    )]
    Missing {
        /// The rows file.
        path: PathBuf,
        /// 1-based line or row number.
        line: usize,
        /// The instance.
        instance_id: String,
        /// The field.
        field: &'static str,
        /// The spec looked for: `(<repo>, <version>) in <environments.json path>`.
        spec: String,
    },
    /// A row without a parser name whose repository SWE-bench has no parser for.
    #[error(
        "{}:{line}: {instance_id} has no `log_parser`, its spec names none, and SWE-bench has no parser for {repo}", path.display()
    )]
    NoParser {
        /// The rows file.
        path: PathBuf,
        /// 1-based line or row number.
        line: usize,
        /// The instance.
        instance_id: String,
        /// The repository.
        repo: String,
    },
    /// The output could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    /// Rows written.
    pub rows: usize,
    /// v5 fields filled in from environment specs (0 when every row had all four).
    pub filled: usize,
}

/// A row as read: its 1-based line (`.jsonl`) or position (`.json`), and its fields.
type RawRow = (usize, Map<String, Value>);

/// The rows as JSON objects in file order: a `.json`/`.jsonl` file read again as it is (so
/// fields swerve does not know survive), other files (parquet) from the parsed rows, null
/// fields left out.
fn raw_rows(source: &DatasetSource) -> Result<Vec<RawRow>, ExportError> {
    let path = &source.rows_file;
    if !path
        .extension()
        .is_some_and(|e| e == "json" || e == "jsonl")
    {
        return Ok(source
            .rows
            .iter()
            .enumerate()
            .map(|(at, row)| {
                let Ok(Value::Object(mut fields)) = serde_json::to_value(row) else {
                    unreachable!("a row serialises to an object");
                };
                fields.retain(|_, v| !v.is_null());
                (at + 1, fields)
            })
            .collect());
    }
    let text = fs_err::read_to_string(path).map_err(|source| ExportError::Read {
        path: path.to_owned(),
        source,
    })?;
    let row_error = |line, source| ExportError::Row {
        path: path.to_owned(),
        line,
        source,
    };
    if path.extension().is_some_and(|e| e == "json") {
        let rows: Vec<Map<String, Value>> =
            serde_json::from_str(&text).map_err(|e| row_error(1, e))?;
        return Ok(rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i + 1, r))
            .collect());
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(at, line)| {
            serde_json::from_str(line)
                .map(|row| (at + 1, row))
                .map_err(|e| row_error(at + 1, e))
        })
        .collect()
}

/// One exported row and how many v5 fields were filled in.
fn export_row(
    source: &DatasetSource,
    line: usize,
    raw: Map<String, Value>,
    row: &Instance,
) -> Result<(Map<String, Value>, usize), ExportError> {
    let env = source.environments.get(row);
    let missing = |field| ExportError::Missing {
        path: source.rows_file.clone(),
        line,
        instance_id: row.instance_id.clone(),
        field,
        spec: format!(
            "({}, {}) in {}",
            row.repo,
            row.version.as_deref().unwrap_or_default(),
            environments_file(source).display()
        ),
    };
    let mut filled = 0;
    let mut fill =
        |present: Option<String>, make: &dyn Fn() -> Result<String, ExportError>| match present {
            Some(value) => Ok(value),
            None => {
                filled += 1;
                make()
            }
        };
    let image = fill(row.image.clone(), &|| {
        env.map(|_| images::stable_image_name(&row.instance_id, images::swebench_arch()))
            .ok_or_else(|| missing("image"))
    })?;
    let eval_script = fill(row.eval_script.clone(), &|| {
        env.map(|env| script_from_spec(row, env, &env.test_cmd.as_script_text()))
            .ok_or_else(|| missing("eval_script"))
    })?;
    let log_parser = fill(row.log_parser.clone(), &|| {
        env.and_then(|env| env.log_parser.clone())
            .or_else(|| Parser::log_parser_name_for_repo(&row.repo).map(str::to_owned))
            .ok_or_else(|| ExportError::NoParser {
                path: source.rows_file.clone(),
                line,
                instance_id: row.instance_id.clone(),
                repo: row.repo.clone(),
            })
    })?;
    let eval_type = fill(row.eval_type.map(|t| t.as_str().to_owned()), &|| {
        Ok(EvalType::PassAndFail.as_str().to_owned())
    })?;

    let mut fields = raw;
    fields.insert("image".into(), image.into());
    fields.insert("eval_script".into(), eval_script.into());
    fields.insert("log_parser".into(), log_parser.into());
    fields.insert("eval_type".into(), eval_type.into());
    fields.insert(
        "FAIL_TO_PASS".into(),
        swerve_swebench::pyjson::dumps_default(&row.fail_to_pass).into(),
    );
    fields.insert(
        "PASS_TO_PASS".into(),
        swerve_swebench::pyjson::dumps_default(&row.pass_to_pass).into(),
    );
    if let Some(version) = &row.version {
        fields.insert("version".into(), version.clone().into());
    }
    let mut out = Map::new();
    for name in SWE_BENCH_FIELDS {
        if let Some(value) = fields.shift_remove(name) {
            out.insert(name.to_owned(), value);
        }
    }
    out.extend(fields);
    Ok((out, filled))
}

fn environments_file(source: &DatasetSource) -> PathBuf {
    source
        .rows_file
        .parent()
        .unwrap_or(Path::new("."))
        .join("environments.json")
}

/// The dataset's rows (after `-i` filtering) as SWE-bench 5 JSONL lines.
pub(crate) fn export_lines(source: &DatasetSource) -> Result<(Vec<String>, usize), ExportError> {
    let mut lines = Vec::new();
    let mut filled = 0;
    let raw = raw_rows(source)?;
    for (line, fields) in raw {
        let id = fields.get("instance_id").and_then(Value::as_str);
        let Some(row) = source
            .rows
            .iter()
            .find(|r| Some(r.instance_id.as_str()) == id)
        else {
            continue;
        };
        let (out, n) = export_row(source, line, fields, row)?;
        filled += n;
        lines.push(Value::Object(out).to_string());
    }
    Ok((lines, filled))
}

/// Writes the export to `output` (one row per line, no blank lines: SWE-bench's `.jsonl`
/// reader parses every line).
pub fn export(source: &DatasetSource, output: &Path) -> Result<ExportSummary, ExportError> {
    let (lines, filled) = export_lines(source)?;
    let mut text = lines.join("\n");
    text.push('\n');
    let write_error = |source| ExportError::Write {
        path: output.to_owned(),
        source,
    };
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs_err::create_dir_all(parent).map_err(write_error)?;
    }
    swerve_cache::write_atomic(output, text).map_err(write_error)?;
    Ok(ExportSummary {
        rows: lines.len(),
        filled,
    })
}

/// Writes the export as a SWE-bench 5 task repository in `dir` (`swerve_swebench::task_repo`):
/// dataset `swerve/<name>` in the default split, each task's Dockerfile `FROM` the image its
/// exported row names (the one `harness images build` makes), so that SWE-bench's own build
/// makes the same image under its derived name.
pub fn export_task_repo(source: &DatasetSource, dir: &Path) -> Result<ExportSummary, ExportError> {
    let (lines, filled) = export_lines(source)?;
    let rows: Vec<Map<String, Value>> = lines
        .iter()
        .map(|line| serde_json::from_str(line).expect("export lines are JSON objects"))
        .collect();
    let name = Path::new(&source.name).file_stem().map_or_else(
        || "dataset".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let dataset = format!("swerve/{name}");
    let dockerfile = |row: &Map<String, Value>| {
        let image = row.get("image").and_then(Value::as_str).unwrap_or_default();
        format!(
            "# The image `harness images build` makes for this row (build it first: there is no\n\
             # registry to pull it from).\nFROM {image}\n"
        )
    };
    swerve_swebench::task_repo::write_repo(dir, &dataset, &rows, dockerfile).map_err(|e| {
        ExportError::TaskRepo {
            path: dir.to_owned(),
            source: e,
        }
    })?;
    Ok(ExportSummary {
        rows: rows.len(),
        filled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::Environments;

    /// The rows' v5 fields that differ from what an export would make from their environment
    /// specs (images named for x86_64, as the bundled rows are), as `instance: field`.
    fn v5_fields_mismatches(rows: &[Instance], envs: &Environments) -> Vec<String> {
        let mut bad = Vec::new();
        for row in rows {
            let Some(env) = envs.get(row) else {
                bad.push(format!("{}: no environment spec", row.instance_id));
                continue;
            };
            let expect = [
                (
                    "image",
                    Some(images::stable_image_name(&row.instance_id, "x86_64")),
                ),
                (
                    "eval_script",
                    Some(script_from_spec(row, env, &env.test_cmd.as_script_text())),
                ),
                ("log_parser", env.log_parser.clone()),
                ("eval_type", Some(EvalType::PassAndFail.as_str().to_owned())),
            ];
            let have = [
                row.image.clone(),
                row.eval_script.clone(),
                row.log_parser.clone(),
                row.eval_type.map(|t| t.as_str().to_owned()),
            ];
            for ((field, want), got) in expect.into_iter().zip(have) {
                if want != got {
                    bad.push(format!("{}: {field}", row.instance_id));
                }
            }
        }
        bad
    }

    /// The bundled rows carry exactly what an export would fill in from their specs, so that
    /// the Python generator in build_bundles.py and the Rust one agree.
    #[test]
    fn bundled_rows_carry_the_v5_fields() {
        let ds = DatasetSource::resolve("swerve-mini", "test", None).expect("bundled");
        assert_eq!(v5_fields_mismatches(&ds.rows, &ds.environments), [""; 0]);
        let (lines, filled) = export_lines(&ds).expect("export");
        assert_eq!((lines.len(), filled), (13, 0));
        for (line, row) in lines.iter().zip(&ds.rows) {
            let value: Value = serde_json::from_str(line).expect("json");
            let keys: Vec<&str> = value
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys[..2], ["repo", "instance_id"]);
            assert!(value["FAIL_TO_PASS"].is_string(), "{line}");
            let reread = Instance::from_json(line).expect("row");
            assert_eq!(&reread, row);
        }
    }

    /// Rows without the v5 fields get them from the spec; without a spec the error names the
    /// file, line, instance and field.
    #[test]
    fn fills_from_specs_and_names_what_is_missing() {
        let bundled = swerve_swebench::names::swerve_mini_dir().expect("bundled dataset");
        let dir = tempfile::tempdir().expect("temp dir");
        let text = fs_err::read_to_string(bundled.join("swerve-mini.jsonl")).expect("rows");
        let mut stripped = Vec::new();
        for line in text.lines().take(2) {
            let mut row: Map<String, Value> = serde_json::from_str(line).expect("row");
            for field in ["image", "eval_script", "log_parser", "eval_type"] {
                row.shift_remove(field);
            }
            stripped.push(Value::Object(row).to_string());
        }
        let rows = dir.path().join("rows.jsonl");
        fs_err::write(&rows, stripped.join("\n") + "\n").expect("write");
        let resolve = || DatasetSource::resolve(&rows.display().to_string(), "test", None);

        let err = export_lines(&resolve().expect("rows")).expect_err("no spec");
        let message = err.to_string();
        assert!(
            message.contains("rows.jsonl:1: swerve__inicfg-3 has no `image`"),
            "{message}"
        );

        fs_err::copy(
            bundled.join("environments.json"),
            dir.path().join("environments.json"),
        )
        .expect("copy");
        let ds = resolve().expect("rows");
        let (lines, filled) = export_lines(&ds).expect("export");
        assert_eq!(filled, 8);
        let full = DatasetSource::resolve("swerve-mini", "test", None).expect("bundled");
        let (bundled_lines, _) = export_lines(&full).expect("export");
        for (made, bundled) in lines.iter().zip(&bundled_lines) {
            let made: Map<String, Value> = serde_json::from_str(made).expect("json");
            let bundled: Map<String, Value> = serde_json::from_str(bundled).expect("json");
            let differ: Vec<&String> = bundled
                .keys()
                .filter(|k| made.get(*k) != bundled.get(*k))
                .collect();
            assert_eq!(differ, [""; 0].iter().collect::<Vec<_>>());
            assert!(made.keys().eq(bundled.keys()));
        }
    }
}
