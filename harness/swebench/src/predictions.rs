//! The predictions file SWE-bench reads: JSONL, a JSON list, or a JSON object `{instance_id:
//! prediction}`; or `gold`, synthesised from the dataset's patches.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::Instance;

/// One model prediction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// The dataset instance it is for.
    pub instance_id: String,
    /// Names the log folder and the run report (`/` becomes `__`); `None` gives `None`.
    #[serde(default)]
    pub model_name_or_path: Option<String>,
    /// The unified diff; `None` (JSON null) and `""` are empty patches, which are not run.
    #[serde(default)]
    pub model_patch: Option<String>,
}

impl Prediction {
    /// The model's folder name: `model_name_or_path` with `/` replaced by `__`, `None` when
    /// absent (as Python's `str(None)`).
    pub fn model_dir_name(&self) -> String {
        self.model_name_or_path
            .as_deref()
            .unwrap_or("None")
            .replace('/', "__")
    }

    /// Whether the patch is `""` or null.
    pub fn is_empty_patch(&self) -> bool {
        self.model_patch.as_deref().is_none_or(str::is_empty)
    }
}

/// Why predictions could not be loaded. The messages are SWE-bench's.
#[derive(Debug, thiserror::Error)]
pub enum PredictionsError {
    /// The file could not be read.
    #[error("cannot read predictions {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Neither `.json` nor `.jsonl`.
    #[error("Predictions path must be .json or .jsonl")]
    UnknownFormat,
    /// Not valid JSON.
    #[error("invalid JSON in predictions {} (line {line})", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line (1 for `.json` files).
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// An entry that is not an object.
    #[error("Each prediction must be a dictionary, got {kind}")]
    NotAnObject {
        /// Python's type name of the entry.
        kind: &'static str,
    },
    /// An entry without `instance_id`.
    #[error("Each prediction must contain 'instance_id'")]
    NoInstanceId,
    /// A field of the wrong type.
    #[error("invalid prediction for {instance_id}")]
    Field {
        /// The prediction's id.
        instance_id: String,
        /// The type error.
        #[source]
        source: serde_json::Error,
    },
    /// Prediction ids that are not in the dataset.
    #[error(
        "Some prediction IDs not found in dataset!\nMissing IDs:\n{}",
        ids.iter().map(|id| shown_id(id)).collect::<Vec<_>>().join(" ")
    )]
    NotInDataset {
        /// The missing ids.
        ids: Vec<String>,
    },
}

/// An instance id as an error shows it: as it is, or quoted with escapes when it holds
/// whitespace or control characters (an id ending in a newline would look like a correct one).
fn shown_id(id: &str) -> std::borrow::Cow<'_, str> {
    if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        format!("{id:?}").into()
    } else {
        id.into()
    }
}

/// Python's type name of a JSON value, for error messages.
fn python_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "<class 'NoneType'>",
        serde_json::Value::Bool(_) => "<class 'bool'>",
        serde_json::Value::Number(n) if n.is_f64() => "<class 'float'>",
        serde_json::Value::Number(_) => "<class 'int'>",
        serde_json::Value::String(_) => "<class 'str'>",
        serde_json::Value::Array(_) => "<class 'list'>",
        serde_json::Value::Object(_) => "<class 'dict'>",
    }
}

fn from_value(value: serde_json::Value) -> Result<Prediction, PredictionsError> {
    let serde_json::Value::Object(map) = &value else {
        return Err(PredictionsError::NotAnObject {
            kind: python_type(&value),
        });
    };
    let Some(id) = map.get("instance_id") else {
        return Err(PredictionsError::NoInstanceId);
    };
    let instance_id = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
    serde_json::from_value(value).map_err(|source| PredictionsError::Field {
        instance_id,
        source,
    })
}

/// Reads a predictions file: `.jsonl` (one object per line, blank lines skipped) or `.json`
/// (a list of objects, or an object whose values are the predictions).
pub fn read_predictions(path: &Path) -> Result<Vec<Prediction>, PredictionsError> {
    let ext = path.extension().and_then(|e| e.to_str());
    if !matches!(ext, Some("json" | "jsonl")) {
        return Err(PredictionsError::UnknownFormat);
    }
    let text = fs_err::read_to_string(path).map_err(|source| PredictionsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let predictions = parse_predictions(&text, ext == Some("jsonl"), path)?;
    warn_duplicates(&predictions, path);
    Ok(predictions)
}

/// Says which instance ids have more than one prediction: the last one of each is evaluated
/// (as SWE-bench does, silently).
fn warn_duplicates(predictions: &[Prediction], path: &Path) {
    let mut seen = std::collections::HashSet::new();
    let mut repeated: Vec<&str> = predictions
        .iter()
        .map(|p| p.instance_id.as_str())
        .filter(|id| !seen.insert(*id))
        .collect();
    repeated.sort_unstable();
    repeated.dedup();
    if let Some(first) = repeated.first() {
        tracing::warn!(
            "{}: {} instance ids have more than one prediction (the first: {}); the last \
             prediction of each is evaluated",
            path.display(),
            repeated.len(),
            shown_id(first)
        );
    }
}

/// Parses predictions text as [`read_predictions`] does (`jsonl`: one object per line, else a
/// JSON list or object); `path` names the source in errors.
pub fn parse_predictions(
    text: &str,
    jsonl: bool,
    path: &Path,
) -> Result<Vec<Prediction>, PredictionsError> {
    let json_error = |line, source| PredictionsError::Json {
        path: path.to_owned(),
        line,
        source,
    };
    if jsonl {
        return text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(at, l)| from_value(serde_json::from_str(l).map_err(|e| json_error(at + 1, e))?))
            .collect();
    }
    match serde_json::from_str(text).map_err(|e| json_error(1, e))? {
        serde_json::Value::Array(items) => items.into_iter().map(from_value).collect(),
        serde_json::Value::Object(map) => map.into_iter().map(|(_, v)| from_value(v)).collect(),
        other => Err(PredictionsError::NotAnObject {
            kind: python_type(&other),
        }),
    }
}

/// The `gold` predictions: every row's own patch, model `gold`.
pub fn gold(rows: &[Instance]) -> Vec<Prediction> {
    rows.iter()
        .map(|r| Prediction {
            instance_id: r.instance_id.clone(),
            model_name_or_path: Some("gold".to_owned()),
            model_patch: r.patch.clone(),
        })
        .collect()
}

/// Fails when a prediction names an instance the dataset does not have.
pub fn check_in_dataset(
    predictions: &[Prediction],
    dataset_ids: &[String],
) -> Result<(), PredictionsError> {
    let known: std::collections::HashSet<&str> = dataset_ids.iter().map(String::as_str).collect();
    let ids: Vec<String> = predictions
        .iter()
        .filter(|p| !known.contains(p.instance_id.as_str()))
        .map(|p| p.instance_id.clone())
        .collect();
    if ids.is_empty() {
        Ok(())
    } else {
        Err(PredictionsError::NotInDataset { ids })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn missing_ids_are_shown_so_that_a_stray_newline_is_seen() {
        let error = check_in_dataset(
            &[
                Prediction {
                    instance_id: "a__b-1\n".to_owned(),
                    model_name_or_path: None,
                    model_patch: None,
                },
                Prediction {
                    instance_id: "c__d-2".to_owned(),
                    model_name_or_path: None,
                    model_patch: None,
                },
            ],
            &["a__b-1".to_owned()],
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Some prediction IDs not found in dataset!\nMissing IDs:\n\"a__b-1\\n\" c__d-2"
        );
    }

    #[test]
    fn three_shapes_and_errors() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        let one = r#"{"instance_id": "a", "model_name_or_path": "m/x", "model_patch": null}"#;
        let jsonl = read_predictions(&write(d, "p.jsonl", &format!("{one}\n\n{one}\n"))).unwrap();
        assert_eq!(jsonl.len(), 2);
        assert_eq!(jsonl[0].model_dir_name(), "m__x");
        assert!(jsonl[0].is_empty_patch());
        let list = read_predictions(&write(d, "l.json", &format!("[{one}]"))).unwrap();
        assert_eq!(list, jsonl[..1]);
        let dict = read_predictions(&write(d, "d.json", &format!("{{\"a\": {one}}}"))).unwrap();
        assert_eq!(dict, jsonl[..1]);
        let err = |name: &str, text: &str| {
            read_predictions(&write(d, name, text))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err("p.txt", ""), "Predictions path must be .json or .jsonl");
        assert_eq!(
            err("n.json", "[1]"),
            "Each prediction must be a dictionary, got <class 'int'>"
        );
        assert_eq!(
            err("k.jsonl", "{\"model_patch\": \"\"}"),
            "Each prediction must contain 'instance_id'"
        );
    }

    #[test]
    fn missing_ids_message() {
        let p = Prediction {
            instance_id: "zz".into(),
            model_name_or_path: None,
            model_patch: None,
        };
        let err = check_in_dataset(&[p], &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Some prediction IDs not found in dataset!\nMissing IDs:\nzz"
        );
    }
}
