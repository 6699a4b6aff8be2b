//! One SWE-bench dataset row ([`Instance`]) and the JSON / JSONL / parquet files that hold rows.
//! The same row type serves evaluation (`harness run`) and training (`trainer`): a training task
//! is a row that also carries the files a prompt shows and the gold change's new content.
//!
//! Rows come from the hub exports, where `FAIL_TO_PASS` and `PASS_TO_PASS` are strings holding
//! a JSON array, or from hand-made files, where they are real arrays; both are accepted.
//! Parquet files (the hub's storage format) are read row by row into the same JSON shape.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// How FAIL_TO_PASS / PASS_TO_PASS outcomes are decided (`eval_type`, v5 rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalType {
    /// Tests must pass (FAIL_TO_PASS) or keep passing (PASS_TO_PASS). Every Python row.
    #[default]
    PassAndFail,
    /// A test fails only if the log reports it `FAILED`; absent tests succeed (some JS repos).
    FailOnly,
}

impl EvalType {
    /// The dataset string (`pass_and_fail`, `fail_only`).
    pub fn as_str(self) -> &'static str {
        match self {
            EvalType::PassAndFail => "pass_and_fail",
            EvalType::FailOnly => "fail_only",
        }
    }
}

/// One task instance: the dataset fields the harness and the trainer read. Unknown fields are
/// ignored; the text fields a grader does not need are optional so that trimmed rows (like the
/// conformance fixtures) load, and the test lists default to empty so that training tasks
/// without tests (curated from history) load too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// `<owner>__<repo>-<PR number>`, e.g. `django__django-11099`.
    pub instance_id: String,
    /// `owner/name`, e.g. `django/django` (required to evaluate; see [`Instance::check_evaluable`]).
    #[serde(default)]
    pub repo: String,
    /// Environment version key (`"3.0"`); a number in a hand-made file is read as its text.
    #[serde(default, deserialize_with = "version_text")]
    pub version: Option<String>,
    /// Commit the task starts from.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// The gold patch.
    #[serde(default)]
    pub patch: Option<String>,
    /// The diff that adds or changes the tests.
    #[serde(default)]
    pub test_patch: Option<String>,
    /// The issue text.
    #[serde(default)]
    pub problem_statement: Option<String>,
    /// Issue comments before the fix.
    #[serde(default)]
    pub hints_text: Option<String>,
    /// ISO timestamp of the PR (a parquet timestamp column is read as its text).
    #[serde(default, deserialize_with = "version_text")]
    pub created_at: Option<String>,
    /// Commit whose requirement files define the environment.
    #[serde(default)]
    pub environment_setup_commit: Option<String>,
    /// Tests that must go from failing to passing, in dataset order (SWE-bench Pro's
    /// `fail_to_pass`, a Python list literal, is read here too).
    #[serde(
        rename = "FAIL_TO_PASS",
        alias = "fail_to_pass",
        default,
        deserialize_with = "test_list"
    )]
    pub fail_to_pass: Vec<String>,
    /// Tests that must keep passing, in dataset order (SWE-bench Pro's `pass_to_pass` too).
    #[serde(
        rename = "PASS_TO_PASS",
        alias = "pass_to_pass",
        default,
        deserialize_with = "test_list"
    )]
    pub pass_to_pass: Vec<String>,
    /// Verified only, e.g. `15 min - 1 hour`.
    #[serde(default)]
    pub difficulty: Option<String>,
    /// v5: the prebuilt image, e.g. `swebench/sweb.eval.x86_64.django_1776_django-11099:latest`
    /// (SWE-rebench V2's `image_name`).
    #[serde(default, alias = "image_name")]
    pub image: Option<String>,
    /// v5: the complete eval script.
    #[serde(default)]
    pub eval_script: Option<String>,
    /// v5: the parser name, e.g. `parse_log_django`; absent in older rows (then the repo picks).
    #[serde(default)]
    pub log_parser: Option<String>,
    /// v5: how tests are graded; absent in older rows (then `pass_and_fail`).
    #[serde(default)]
    pub eval_type: Option<EvalType>,
    /// v5 multimodal: binary files restored after the patches (object or JSON string).
    #[serde(default)]
    pub image_assets: Option<serde_json::Value>,
    /// SWE-rebench V2: how the row's image was installed and how its tests run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_config: Option<InstallConfig>,
    /// SWE-bench Pro: the commands run before the tests; its evaluation runs only the last line
    /// (which checks the test files out of the fix commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_repo_set_cmd: Option<String>,
    /// SWE-bench Pro: the test files given to `run_script.sh` (a Python list literal or a
    /// list).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_test_list"
    )]
    pub selected_test_files_to_run: Option<Vec<String>>,
    /// SWE-bench Pro: the tag of the row's image in `jefzda/sweap-images`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerhub_tag: Option<String>,
    /// Training: the files shown to the model, path → text at the base commit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub code_context: BTreeMap<String, String>,
    /// Training: the gold change's new text of every file it touches, path → text (the SWE-RL
    /// reward's oracle).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub oracle_new_content: BTreeMap<String, String>,
}

/// SWE-rebench V2's `install_config`: the commands its image was installed with, the test
/// commands its evaluation runs and the parser it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallConfig {
    /// Commands run when the image was built (recorded; the prebuilt image already holds them).
    #[serde(default, deserialize_with = "command_list")]
    pub install: Vec<String>,
    /// The test commands, run in order under `set -e` (a string is one command).
    #[serde(default, deserialize_with = "command_list")]
    pub test_cmd: Vec<String>,
    /// The name of one of SWE-rebench V2's log parsers (`parse_log_gotest`, ...).
    #[serde(default)]
    pub log_parser: Option<String>,
    /// The base image the row's image was built from.
    #[serde(default)]
    pub base_image_name: Option<String>,
}

/// Where SWE-bench Pro's images live: `<repository>:<dockerhub_tag>`.
pub const PRO_IMAGE_REPOSITORY: &str = "jefzda/sweap-images";

/// Which benchmark's evaluation a row follows; decided by the fields it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskFormat {
    /// SWE-bench (and swerve's own rows): an eval script with markers, SWE-bench's parsers
    /// and verdict.
    SweBench,
    /// SWE-rebench V2 (`install_config`): the patches and `test_cmd` under `set -e` in the
    /// row's prebuilt image, one of its named parsers on the host, the exact-set verdict.
    Rebench,
    /// SWE-bench Pro (`before_repo_set_cmd`, `selected_test_files_to_run`): an entry script,
    /// the instance's `run_script.sh` and `parser.py` in the container, the subset verdict.
    Pro,
}

impl TaskFormat {
    /// `swe-bench`, `swe-rebench-v2` or `swe-bench-pro`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskFormat::SweBench => "swe-bench",
            TaskFormat::Rebench => "swe-rebench-v2",
            TaskFormat::Pro => "swe-bench-pro",
        }
    }
}

/// Why dataset rows could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A dataset file could not be read.
    #[error("cannot read dataset {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file name that is neither `.json`, `.jsonl` nor `.parquet`.
    #[error("dataset {} must be .json, .jsonl or .parquet", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A `.json` document that is not a list of rows, or a row that does not fit [`Instance`]
    /// (the cause names the field).
    #[error("invalid dataset JSON")]
    Json(#[source] serde_path_to_error::Error<serde_json::Error>),
    /// A `.parquet` file that cannot be decoded.
    #[error("cannot decode parquet dataset {}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The decoder's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// One row of a `.parquet` file that is not a valid row.
    #[error("invalid dataset row {row} of {}", path.display())]
    ParquetRow {
        /// The file.
        path: PathBuf,
        /// 1-based row number.
        row: usize,
        /// Why the row does not fit [`Instance`] (naming the field).
        #[source]
        source: serde_path_to_error::Error<serde_json::Error>,
    },
    /// A row that lacks what an evaluation needs.
    #[error("row `{instance_id}` cannot be evaluated: it has no `{missing}`")]
    NotEvaluable {
        /// The row.
        instance_id: String,
        /// The field it lacks (`repo`, or tests in `FAIL_TO_PASS`/`PASS_TO_PASS`).
        missing: &'static str,
    },
    /// One line of a `.jsonl` file that is not a valid row.
    #[error("invalid dataset row on line {line}")]
    JsonLine {
        /// 1-based line number.
        line: usize,
        /// The parse error (naming the field).
        #[source]
        source: serde_path_to_error::Error<serde_json::Error>,
    },
}

impl Instance {
    /// Parses one row (a JSON object).
    pub fn from_json(text: &str) -> Result<Instance, DatasetError> {
        from_json_text(text).map_err(DatasetError::Json)
    }

    /// Which benchmark's evaluation the row follows.
    pub fn format(&self) -> TaskFormat {
        if self.install_config.is_some() {
            TaskFormat::Rebench
        } else if self.before_repo_set_cmd.is_some() || self.selected_test_files_to_run.is_some() {
            TaskFormat::Pro
        } else {
            TaskFormat::SweBench
        }
    }

    /// The prebuilt image the row names: its `image` (SWE-rebench V2's `image_name`), else for a
    /// SWE-bench Pro row `jefzda/sweap-images:<dockerhub_tag>`.
    pub fn prebuilt_image(&self) -> Option<String> {
        self.image.clone().or_else(|| match self.format() {
            TaskFormat::Pro => self
                .dockerhub_tag
                .as_ref()
                .map(|tag| format!("{PRO_IMAGE_REPOSITORY}:{tag}")),
            TaskFormat::SweBench | TaskFormat::Rebench => None,
        })
    }

    /// Whether the row can be evaluated: a training task may lack its repository, a row to run
    /// and grade may not (every SWE-bench row names its repository). Empty test lists are
    /// graded as SWE-bench grades them (no test decides); a row file without the lists' keys
    /// is refused where it is read whole ([`check_test_list_keys`]).
    pub fn check_evaluable(&self) -> Result<(), DatasetError> {
        if self.repo.is_empty() {
            return Err(DatasetError::NotEvaluable {
                instance_id: self.instance_id.clone(),
                missing: "repo",
            });
        }
        Ok(())
    }
}

/// SWE-bench's name for an instance image, `<namespace>/sweb.eval.<arch>.<id>:latest`, with the
/// instance id lower-cased and every `__` in it written `_1776_`, as SWE-bench derives it.
pub fn instance_image_name(namespace: &str, arch: &str, instance_id: &str) -> String {
    format!(
        "{namespace}/sweb.eval.{arch}.{}:latest",
        instance_id.to_lowercase().replace("__", "_1776_")
    )
}

/// The test lists' keys a row (one JSON object) must have to be graded: SWE-bench reads both
/// `FAIL_TO_PASS` and `PASS_TO_PASS` and fails on a row without either (a row whose list is
/// present but empty is graded). The first missing key, named.
pub fn check_test_list_keys(row: &serde_json::Value) -> Result<(), DatasetError> {
    for key in ["FAIL_TO_PASS", "PASS_TO_PASS"] {
        // SWE-bench Pro spells them in lower case.
        if row.get(key).is_none() && row.get(key.to_lowercase()).is_none() {
            return Err(DatasetError::NotEvaluable {
                instance_id: row["instance_id"].as_str().unwrap_or_default().to_owned(),
                missing: key,
            });
        }
    }
    Ok(())
}

/// Parses a `.json` dataset: a list of rows.
pub fn parse_json_rows(text: &str) -> Result<Vec<Instance>, DatasetError> {
    from_json_text(text).map_err(DatasetError::Json)
}

/// `text` as a `T`, an error naming the field that does not fit (`FAIL_TO_PASS: …`,
/// `[3].repo: …`).
fn from_json_text<T: de::DeserializeOwned>(
    text: &str,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
}

/// Parses a `.jsonl` dataset: one row per line; blank lines are skipped.
pub fn parse_jsonl_rows(text: &str) -> Result<Vec<Instance>, DatasetError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(at, line)| {
            from_json_text(line).map_err(|source| DatasetError::JsonLine {
                line: at + 1,
                source,
            })
        })
        .collect()
}

/// Parses a `.parquet` dataset (as the Hugging Face hub stores them: one row group or many, any
/// of the usual codecs). Each row becomes the JSON object its columns spell, then an
/// [`Instance`], so list and string test columns, and number or string versions, are read the
/// same way as in JSON.
pub(crate) fn read_parquet_rows(path: &Path) -> Result<Vec<Instance>, DatasetError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let decode = |source| DatasetError::Parquet {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|source| DatasetError::Read {
        path: path.to_owned(),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(decode)?;
    let mut rows = Vec::with_capacity(
        usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0),
    );
    for (at, row) in reader.get_row_iter(None).map_err(decode)?.enumerate() {
        let value = row.map_err(decode)?.to_json_value();
        let instance =
            serde_path_to_error::deserialize(value).map_err(|source| DatasetError::ParquetRow {
                path: path.to_owned(),
                row: at + 1,
                source,
            })?;
        rows.push(instance);
    }
    Ok(rows)
}

/// Reads a local `.json`, `.jsonl` or `.parquet` dataset file.
pub fn read_rows(path: &Path) -> Result<Vec<Instance>, DatasetError> {
    let read = || {
        std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
            path: path.to_owned(),
            source,
        })
    };
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => parse_json_rows(&read()?),
        Some("jsonl") => parse_jsonl_rows(&read()?),
        Some("parquet") => read_parquet_rows(path),
        _ => Err(DatasetError::UnknownFormat {
            path: path.to_owned(),
        }),
    }
}

/// `FAIL_TO_PASS` / `PASS_TO_PASS`: a JSON array of strings, or a string that holds one.
fn test_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct TestListVisitor;

    impl<'de> Visitor<'de> for TestListVisitor {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of test names, or a string holding a JSON list of them")
        }

        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut tests = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(test) = seq.next_element::<String>()? {
                tests.push(test);
            }
            Ok(tests)
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            serde_json::from_str(text).or_else(|err| {
                crate::pyliteral::string_list(text).map_err(|_| {
                    E::custom(format!(
                        "test list string is neither a JSON array of strings nor a Python \
                         list of strings: {err}"
                    ))
                })
            })
        }
    }

    deserializer.deserialize_any(TestListVisitor)
}

/// [`test_list`] where the key may be absent or null.
fn optional_test_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    struct Wrapped(#[serde(deserialize_with = "test_list")] Vec<String>);
    Ok(Option::<Wrapped>::deserialize(deserializer)?.map(|Wrapped(tests)| tests))
}

/// A list of shell commands, or one command as a string (SWE-rebench V2 writes both); blank
/// entries are dropped, as its evaluation drops them.
fn command_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Commands {
        One(String),
        Many(Vec<String>),
        None(()),
    }
    let commands = match Commands::deserialize(deserializer)? {
        Commands::One(command) => vec![command],
        Commands::Many(commands) => commands,
        Commands::None(()) => Vec::new(),
    };
    Ok(commands
        .into_iter()
        .filter(|command| !command.trim().is_empty())
        .collect())
}

/// `version`: a string, null, or (in hand-made files) a number, kept as its JSON text.
fn version_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct VersionVisitor;

    impl<'de> Visitor<'de> for VersionVisitor {
        type Value = Option<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a version string, number or null")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(
                serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string()),
            ))
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(VersionVisitor)
        }
    }

    deserializer.deserialize_option(VersionVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_lists_may_be_json_strings() {
        let check = |row: &str, f2p: &[&str], p2p: &[&str]| {
            let instance = Instance::from_json(row).expect("valid row");
            assert_eq!(instance.fail_to_pass, f2p, "{row}");
            assert_eq!(instance.pass_to_pass, p2p, "{row}");
        };
        check(
            r#"{"instance_id":"a__b-1","repo":"a/b","FAIL_TO_PASS":["t1"],"PASS_TO_PASS":[]}"#,
            &["t1"],
            &[],
        );
        check(
            r#"{"instance_id":"a__b-1","repo":"a/b","FAIL_TO_PASS":"[\"t1\", \"t \\u00e9\"]","PASS_TO_PASS":"[]"}"#,
            &["t1", "t \u{e9}"],
            &[],
        );
    }

    #[test]
    fn swe_rebench_v2_rows_read_with_their_install_config() {
        let row = Instance::from_json(
            r#"{"instance_id":"o__r-7","repo":"o/r","base_commit":"abc","patch":"p","test_patch":"t",
                "FAIL_TO_PASS":["a"],"PASS_TO_PASS":[],"image_name":"swerebenchv2/o-r:7-abc1234",
                "install_config":{"install":["make"],"test_cmd":"go test -v ./...","log_parser":"parse_log_gotest"}}"#,
        )
        .expect("a SWE-rebench V2 row");
        assert_eq!(row.format(), TaskFormat::Rebench);
        assert_eq!(row.image.as_deref(), Some("swerebenchv2/o-r:7-abc1234"));
        let config = row.install_config.as_ref().expect("install_config");
        assert_eq!(config.test_cmd, ["go test -v ./..."]);
        assert_eq!(config.install, ["make"]);
        assert_eq!(config.log_parser.as_deref(), Some("parse_log_gotest"));
        let lists = Instance::from_json(
            r#"{"instance_id":"x","install_config":{"test_cmd":["a", " ", "b"],"install":null}}"#,
        )
        .expect("lists");
        assert_eq!(lists.install_config.expect("config").test_cmd, ["a", "b"]);
    }

    #[test]
    fn swe_bench_pro_rows_read_with_python_literal_lists() {
        let text = r#"{"instance_id":"instance_o__r-1f","repo":"o/r","base_commit":"abc",
            "fail_to_pass":"['test/a.js | it works', \"test/a.js | it's fine\"]","pass_to_pass":"[]",
            "selected_test_files_to_run":"['test/a.js']","before_repo_set_cmd":"git reset\ngit checkout fix -- test/a.js",
            "dockerhub_tag":"o.r-1f"}"#;
        let row = Instance::from_json(text).expect("a SWE-bench Pro row");
        assert_eq!(row.format(), TaskFormat::Pro);
        assert_eq!(
            row.prebuilt_image().as_deref(),
            Some("jefzda/sweap-images:o.r-1f")
        );
        assert_eq!(
            row.fail_to_pass,
            ["test/a.js | it works", "test/a.js | it's fine"]
        );
        assert!(row.pass_to_pass.is_empty());
        assert_eq!(
            row.selected_test_files_to_run.as_deref(),
            Some(&["test/a.js".to_owned()][..])
        );
        check_test_list_keys(&serde_json::from_str(text).expect("json")).expect("lower-case keys");
        let swebench = Instance::from_json(r#"{"instance_id":"a","repo":"a/b"}"#).expect("row");
        assert_eq!(swebench.format(), TaskFormat::SweBench);
        let bad = Instance::from_json(r#"{"instance_id":"a","fail_to_pass":"['a' 'b"}"#)
            .expect_err("an unclosed literal");
        assert!(bad.to_string().contains("invalid dataset JSON"), "{bad}");
    }

    #[test]
    fn invalid_rows_are_errors() {
        let check = |row: &str| assert!(Instance::from_json(row).is_err(), "{row}");
        check(r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":"t1","PASS_TO_PASS":[]}"#);
        check(r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":[1],"PASS_TO_PASS":[]}"#);
        check(
            r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":[],"PASS_TO_PASS":[],"eval_type":"x"}"#,
        );
    }

    #[test]
    fn training_rows_load_and_only_evaluable_rows_pass_the_check() {
        let task = Instance::from_json(
            r#"{"instance_id":"a","problem_statement":"p","code_context":{"m.py":"x"}}"#,
        )
        .unwrap();
        assert_eq!(task.code_context["m.py"], "x");
        assert!(task.fail_to_pass.is_empty() && task.repo.is_empty());
        let missing = |row: &str| match Instance::from_json(row).unwrap().check_evaluable() {
            Err(DatasetError::NotEvaluable { missing, .. }) => Some(missing),
            Err(e) => panic!("{e}"),
            Ok(()) => None,
        };
        assert_eq!(
            missing(r#"{"instance_id":"a","FAIL_TO_PASS":["t"]}"#),
            Some("repo")
        );
        // Empty lists are graded, as SWE-bench grades them.
        assert_eq!(
            missing(r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":[],"PASS_TO_PASS":[]}"#),
            None
        );
        // A row without a list's key is refused where the row is read whole.
        let keys = |row: &str| match check_test_list_keys(&serde_json::from_str(row).unwrap()) {
            Err(DatasetError::NotEvaluable { missing, .. }) => Some(missing),
            Err(e) => panic!("{e}"),
            Ok(()) => None,
        };
        assert_eq!(
            keys(r#"{"instance_id":"a","repo":"a/b","PASS_TO_PASS":[]}"#),
            Some("FAIL_TO_PASS")
        );
        assert_eq!(
            keys(r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":["t"]}"#),
            Some("PASS_TO_PASS")
        );
        assert_eq!(
            keys(r#"{"instance_id":"a","FAIL_TO_PASS":"[]","PASS_TO_PASS":[]}"#),
            None
        );
    }

    #[test]
    fn versions_and_v5_fields() {
        let check = |version: &str, expect: Option<&str>| {
            let row = format!(
                r#"{{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":[],"PASS_TO_PASS":[],"version":{version},"eval_type":"fail_only","log_parser":"parse_log_pytest"}}"#
            );
            let instance = Instance::from_json(&row).expect("valid row");
            assert_eq!(instance.version.as_deref(), expect, "{version}");
            assert_eq!(instance.eval_type, Some(EvalType::FailOnly));
            assert_eq!(instance.log_parser.as_deref(), Some("parse_log_pytest"));
        };
        check(r#""3.0""#, Some("3.0"));
        check("null", None);
        check("3.0", Some("3.0"));
        check("5", Some("5"));
    }

    #[test]
    fn jsonl_reports_the_line() {
        let good = r#"{"instance_id":"a","repo":"a/b","FAIL_TO_PASS":[],"PASS_TO_PASS":[]}"#;
        let rows = parse_jsonl_rows(&format!("{good}\n\n{good}\n")).expect("valid");
        assert_eq!(rows.len(), 2);
        let err = parse_jsonl_rows(&format!("{good}\n{{\n")).expect_err("bad line");
        assert!(
            matches!(err, DatasetError::JsonLine { line: 2, .. }),
            "{err:?}"
        );
        let rows = parse_json_rows(&format!("[{good}]")).expect("valid");
        assert_eq!(rows[0].instance_id, "a");
    }
}
