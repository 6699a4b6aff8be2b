//! What `--dataset` names, for every binary (`harness run`, `trainer sft|grpo|predict`, `curate
//! validate`): `swerve-mini` is the bundled dataset, written out of the binary into swerve's
//! cache folder on first use (so an installed binary needs no source tree); a path is a
//! `.json` / `.jsonl` / `.parquet` file, or a folder holding `<split>.jsonl` / `<split>.json` /
//! `<split>.parquet` (or a single `.jsonl`). Hub dataset ids cannot be fetched (no network).

use std::path::{Path, PathBuf};

use crate::bundled::{SWERVE_MINI, SWERVE_MINI_FILES, SWERVE_MINI_ROWS};

/// Why a `--dataset` name does not name a rows file.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    /// A hub id: nothing can be downloaded.
    #[error(
        "dataset `{name}` is a hub id; swerve cannot download datasets — pass a local .json/.jsonl file (or `swerve-mini`)"
    )]
    Hub {
        /// The id.
        name: String,
    },
    /// A folder without a rows file for the split.
    #[error("no {split}.jsonl / {split}.json / {split}.parquet (or single .jsonl) in {}", dir.display())]
    NoRows {
        /// The folder.
        dir: PathBuf,
        /// The split.
        split: String,
    },
    /// The bundled dataset could not be written into the cache folder.
    #[error("cannot write the bundled dataset `swerve-mini` into {}", cache.display())]
    Bundled {
        /// swerve's cache folder.
        cache: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Names of SWE-bench's hub datasets a user may type (refused with [`NameError::Hub`]).
const HUB_ALIASES: [&str; 9] = [
    "swe-bench",
    "swebench",
    "swe_bench",
    "swe-bench-lite",
    "swebench-lite",
    "swe_bench_lite",
    "swe-bench_lite",
    "lite",
    "verified",
];

/// The folder of the bundled dataset `swerve-mini` in swerve's cache folder, written on first
/// use: its rows ([`SWERVE_MINI_ROWS`]), `environments.json` and `repos/`.
pub fn swerve_mini_dir() -> Result<PathBuf, NameError> {
    swerve_cache::materialise("datasets", SWERVE_MINI, SWERVE_MINI_FILES).map_err(|source| {
        NameError::Bundled {
            cache: swerve_cache::cache_root(),
            source,
        }
    })
}

/// The rows file `name` stands for, with `split` choosing inside a folder. A path that does
/// not exist is returned as it is, for the reader to name in its error.
pub fn rows_file(name: impl AsRef<Path>, split: &str) -> Result<PathBuf, NameError> {
    let path = name.as_ref();
    let text = path.to_str().unwrap_or_default();
    if text.eq_ignore_ascii_case(SWERVE_MINI) {
        return Ok(swerve_mini_dir()?.join(SWERVE_MINI_ROWS));
    }
    if path.is_dir() {
        rows_in_dir(path, split)
    } else if !path.exists()
        && (HUB_ALIASES.contains(&text.to_ascii_lowercase().as_str()) || is_hub_id(text))
    {
        Err(NameError::Hub {
            name: text.to_owned(),
        })
    } else {
        Ok(path.to_owned())
    }
}

/// `owner/name` without a dataset file's extension: how hub ids look, unlike a relative path
/// to a rows file that is missing (which the reader then names).
fn is_hub_id(name: &str) -> bool {
    name.contains('/')
        && ![".json", ".jsonl", ".parquet"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

fn rows_in_dir(dir: &Path, split: &str) -> Result<PathBuf, NameError> {
    for ext in ["jsonl", "json", "parquet"] {
        let p = dir.join(format!("{split}.{ext}"));
        if p.is_file() {
            return Ok(p);
        }
    }
    let jsonl: Vec<PathBuf> = fs_err::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "jsonl")
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("predictions"))
                })
                .collect()
        })
        .unwrap_or_default();
    match jsonl.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(NameError::NoRows {
            dir: dir.to_owned(),
            split: split.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_rows_files() {
        let mini = rows_file("swerve-mini", "test").unwrap();
        assert!(
            mini.ends_with(SWERVE_MINI_ROWS) && mini.is_file(),
            "{}",
            mini.display()
        );
        assert_eq!(rows_file("SWERVE-MINI", "train").unwrap(), mini);
        assert!(matches!(
            rows_file("princeton-nlp/SWE-bench_Verified", "test"),
            Err(NameError::Hub { .. })
        ));
        assert!(matches!(
            rows_file("verified", "test"),
            Err(NameError::Hub { .. })
        ));
        for missing in ["missing.jsonl", "data/missing.jsonl"] {
            assert_eq!(rows_file(missing, "test").unwrap(), PathBuf::from(missing));
        }
        let dir = tempfile::tempdir().unwrap();
        let err = rows_file(dir.path(), "dev").unwrap_err();
        assert!(err.to_string().starts_with("no dev.jsonl"), "{err}");
        fs_err::write(dir.path().join("tasks.jsonl"), "").unwrap();
        fs_err::write(dir.path().join("predictions.jsonl"), "").unwrap();
        assert_eq!(
            rows_file(dir.path(), "dev").unwrap(),
            dir.path().join("tasks.jsonl")
        );
        fs_err::write(dir.path().join("dev.parquet"), "").unwrap();
        assert_eq!(
            rows_file(dir.path(), "dev").unwrap(),
            dir.path().join("dev.parquet")
        );
    }
}
