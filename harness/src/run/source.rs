//! `--dataset NAME|PATH`: the rows, their environment specs and the folder of repository
//! sources. What a name stands for is [`swerve_swebench::names`]'s rule, the same in every
//! binary; hub datasets are read from the local Hugging Face cache, never fetched (no network;
//! see `docs/harness.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::images::{self, BaseImages, Environments, ImageRecipe, ImagesError};
use swerve_swebench::dataset::{DatasetError, Instance};
use swerve_swebench::names::{self, NameError};
use swerve_swebench::task_repo::{self, TaskRepoError};

/// A resolved dataset.
#[derive(Debug, Clone)]
pub struct DatasetSource {
    /// What the user passed (recorded in `run.json`).
    pub name: String,
    /// The rows file (the first shard of a sharded Hugging Face dataset's split), whose folder
    /// holds `environments.json` and `repos/`.
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
    /// For rows of a SWE-bench 5 task repository (`--task-repo`): each instance's task folder,
    /// whose `Dockerfile` builds its image with the folder as context. Empty otherwise.
    pub task_dirs: BTreeMap<String, PathBuf>,
    /// The task repository the rows come from (`run.json`'s `task_repo`).
    pub task_repo: Option<PathBuf>,
    /// A checkout of SWE-bench Pro whose `run_scripts/<id>/` and `dockerfiles/` its rows run
    /// with (`--pro-scripts`).
    pub pro_scripts: Option<PathBuf>,
}

/// Why a dataset could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The name names no rows file.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The rows could not be read.
    #[error(transparent)]
    Rows(#[from] DatasetError),
    /// The environment specs could not be read.
    #[error(transparent)]
    Environments(#[from] ImagesError),
    /// A task repository that cannot be read, or one of its tasks.
    #[error(transparent)]
    TaskRepo(#[from] TaskRepoError),
    /// Ids given with `-i` that are not in the dataset (SWE-bench's message).
    #[error("Some instance IDs not found in dataset!\nMissing IDs:\n{}", ids.join(" "))]
    MissingIds {
        /// The ids.
        ids: Vec<String>,
    },
}

impl DatasetSource {
    /// Resolves `--dataset` with `--split`.
    pub fn resolve(
        name: &str,
        split: &str,
        repos_override: Option<&Path>,
    ) -> Result<Self, SourceError> {
        let files = names::rows_files(name, split)?;
        let rows = files.read()?;
        let path = files.first().to_owned();
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
        Ok(Self {
            all_ids,
            name: name.to_owned(),
            rows_file: path,
            rows,
            environments,
            repos_dir: repos_override.map_or_else(|| dir.join("repos"), Path::to_owned),
            task_dirs: BTreeMap::new(),
            task_repo: None,
            pro_scripts: None,
        })
    }

    /// Resolves `--task-repo DIR` (SWE-bench 5's layout, `swerve_swebench::task_repo`): the tasks
    /// named by `ids` from any split, else every task of `split`, as SWE-bench's `load_instances`
    /// picks them; each row's image is built from its task folder's `Dockerfile`.
    pub fn resolve_task_repo(dir: &Path, split: &str, ids: &[String]) -> Result<Self, SourceError> {
        let tasks = task_repo::read_tasks(dir, ids, split)?;
        let mut rows = Vec::with_capacity(tasks.len());
        let mut task_dirs = BTreeMap::new();
        for task in &tasks {
            let row = Instance::from_json(&serde_json::Value::Object(task.row.clone()).to_string())
                .map_err(|e| TaskRepoError::Row {
                    instance_id: task.instance_id().to_owned(),
                    problem: format!("not a SWE-bench 5 row: {e}"),
                })?;
            row.check_evaluable()?;
            task_dirs.insert(row.instance_id.clone(), task.dir.clone());
            rows.push(row);
        }
        Ok(Self {
            name: dir.display().to_string(),
            rows_file: dir.to_owned(),
            all_ids: rows.iter().map(|r| r.instance_id.clone()).collect(),
            rows,
            environments: Environments::default(),
            repos_dir: dir.join("repos"),
            task_dirs,
            task_repo: Some(dir.to_owned()),
            pro_scripts: None,
        })
    }

    /// How `row`'s image is obtained: its task folder's `Dockerfile` for a task repository's
    /// rows, else [`images::recipe`] (built from its environment spec, or the row's `image`).
    pub(crate) fn recipe(
        &self,
        row: &Instance,
        bases: &BaseImages,
    ) -> Result<ImageRecipe, ImagesError> {
        match self.task_dirs.get(&row.instance_id) {
            Some(folder) => Ok(ImageRecipe::Dockerfile {
                image: row
                    .image
                    .clone()
                    .unwrap_or_else(|| task_repo::image_name(&row.instance_id)),
                folder: folder.clone(),
            }),
            None => images::recipe(row, &self.environments, &self.repos_dir, bases),
        }
    }

    /// The evaluator's parser name for `row`: its own `log_parser` (v5 rows), else its
    /// environment spec's, else empty (the bundled evaluator then picks by repo).
    pub(crate) fn log_parser_for(&self, row: &Instance) -> String {
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
        let mut ds = DatasetSource::resolve("swerve-mini", "test", None).expect("bundled");
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
            DatasetSource::resolve("swerve-tests/no-such-dataset", "test", None),
            Err(SourceError::Name(NameError::NotCached { .. }))
        ));
        let dir = DatasetSource::resolve(
            &names::swerve_mini_dir().unwrap().display().to_string(),
            "test",
            None,
        )
        .expect("folder");
        assert_eq!(dir.rows.len(), 13);
    }
}
