//! `--dataset NAME|PATH`: the rows, their environment specs and the folder of repository
//! sources. `swerve-mini` names the bundled dataset; a path is a `.json`/`.jsonl`/`.parquet` file
//! or a folder holding `<split>.jsonl`/`<split>.json`/`<split>.parquet` (or a single `.jsonl`).
//! Hub dataset ids cannot be fetched (no network; see `docs/harness.md`).

use std::path::{Path, PathBuf};

use crate::images::{Environments, ImagesError};
use swerve_swebench::bundled::{SWERVE_MINI, SWERVE_MINI_FILES, SWERVE_MINI_ROWS};
use swerve_swebench::dataset::{self, DatasetError, Instance};

/// The folder of the bundled dataset `swerve-mini`, written out of the binary into swerve's cache
/// folder on first use (so an installed `harness` needs no source tree).
pub fn swerve_mini_dir() -> Result<PathBuf, SourceError> {
    swerve_host::materialise("datasets", SWERVE_MINI, SWERVE_MINI_FILES).map_err(|source| {
        SourceError::Bundled {
            cache: swerve_host::cache_root(),
            source,
        }
    })
}

/// A resolved dataset.
#[derive(Debug, Clone)]
pub struct DatasetSource {
    /// What the user passed (recorded in `run.json`).
    pub name: String,
    /// The rows file.
    pub rows_file: PathBuf,
    /// The rows, in file order (after `-i` filtering).
    pub rows: Vec<Instance>,
    /// Every instance id of the rows file, before filtering: predictions are checked against
    /// these, as SWE-bench checks them against the whole dataset.
    pub all_ids: Vec<String>,
    /// Environment specs (empty when the dataset has no `environments.json`).
    pub environments: Environments,
    /// Folder of repository bundles / clones.
    pub repos_dir: PathBuf,
}

/// Why a dataset could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
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
    /// The rows could not be read.
    #[error(transparent)]
    Rows(#[from] DatasetError),
    /// The environment specs could not be read.
    #[error(transparent)]
    Environments(#[from] ImagesError),
    /// Ids given with `-i` that are not in the dataset (SWE-bench's message).
    #[error("Some instance IDs not found in dataset!\nMissing IDs:\n{}", ids.join(" "))]
    MissingIds {
        /// The ids.
        ids: Vec<String>,
    },
}

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

/// Resolves `--dataset` with `--split`.
pub fn resolve(
    name: &str,
    split: &str,
    repos_override: Option<&Path>,
) -> Result<DatasetSource, SourceError> {
    let path = if name.eq_ignore_ascii_case(SWERVE_MINI) {
        swerve_mini_dir()?.join(SWERVE_MINI_ROWS)
    } else {
        let p = PathBuf::from(name);
        if p.is_dir() {
            rows_in_dir(&p, split)?
        } else if p.exists() {
            p
        } else if HUB_ALIASES.contains(&name.to_ascii_lowercase().as_str()) || name.contains('/') {
            return Err(SourceError::Hub {
                name: name.to_owned(),
            });
        } else {
            p
        }
    };
    let rows = dataset::read_rows(&path)?;
    for row in &rows {
        row.check_evaluable()?;
    }
    let dir = path.parent().unwrap_or(Path::new(".")).to_owned();
    let env_file = dir.join("environments.json");
    let environments = if env_file.is_file() {
        Environments::read(&env_file)?
    } else {
        Environments::default()
    };
    let all_ids = rows.iter().map(|r| r.instance_id.clone()).collect();
    Ok(DatasetSource {
        all_ids,
        name: name.to_owned(),
        rows_file: path,
        rows,
        environments,
        repos_dir: repos_override.map_or_else(|| dir.join("repos"), Path::to_owned),
    })
}

fn rows_in_dir(dir: &Path, split: &str) -> Result<PathBuf, SourceError> {
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
        _ => Err(SourceError::NoRows {
            dir: dir.to_owned(),
            split: split.to_owned(),
        }),
    }
}

impl DatasetSource {
    /// The evaluator's parser name for `row`: its own `log_parser` (v5 rows), else its
    /// environment spec's, else empty (the bundled evaluator then picks by repo).
    pub fn log_parser_for(&self, row: &Instance) -> String {
        row.log_parser
            .clone()
            .or_else(|| {
                self.environments
                    .get(row)
                    .and_then(|e| e.log_parser.clone())
            })
            .unwrap_or_default()
    }

    /// Keeps only the rows named by `ids` (all when empty); unknown ids are an error.
    pub fn filter(&mut self, ids: &[String]) -> Result<(), SourceError> {
        if ids.is_empty() {
            return Ok(());
        }
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !self.rows.iter().any(|r| &r.instance_id == *id))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(SourceError::MissingIds { ids: missing });
        }
        self.rows.retain(|r| ids.contains(&r.instance_id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_and_errors() {
        let mut ds = resolve("swerve-mini", "test", None).expect("bundled");
        assert_eq!(ds.rows.len(), 13);
        assert!(ds.repos_dir.ends_with("repos"));
        let err = ds.filter(&["nope".to_owned()]).unwrap_err().to_string();
        assert_eq!(
            err,
            "Some instance IDs not found in dataset!\nMissing IDs:\nnope"
        );
        ds.filter(&["swerve__spans-2".to_owned()]).expect("known");
        assert_eq!(ds.rows.len(), 1);
        assert!(matches!(
            resolve("SWE-bench/SWE-bench_Lite", "test", None),
            Err(SourceError::Hub { .. })
        ));
        let dir = resolve(
            &swerve_mini_dir().unwrap().display().to_string(),
            "test",
            None,
        )
        .expect("folder");
        assert_eq!(dir.rows.len(), 13);
    }
}
