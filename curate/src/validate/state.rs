//! `validate_state.jsonl`: how each task ended, one line appended as soon as it is known, so
//! that a killed or failed run resumes without redoing or losing a task.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use swerve_harness::images::RepoEnv;

use crate::error::CurateError;

use super::DropReason;

/// How one task ended: a line of `validate_state.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEnd {
    /// The task's content key (its row's digest): an edited row is validated again.
    pub key: String,
    /// The instance id.
    pub instance_id: String,
    /// The repository.
    pub repo: String,
    /// Kept (the SWE-bench 5 row and its environment) or dropped.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Flaky tests seen (in neither list).
    #[serde(default)]
    pub flaky: Vec<String>,
    /// Seconds per stage.
    #[serde(default)]
    pub seconds: BTreeMap<String, f64>,
}

/// A task's verdict.
// One per task, written once: the kept variant's size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Validated.
    Kept {
        /// The SWE-bench 5 row (the task's own fields kept).
        row: Map<String, Value>,
        /// Its environment spec.
        env: RepoEnv,
    },
    /// Dropped.
    Dropped {
        /// Why.
        reason: DropReason,
        /// What showed it.
        detail: String,
        /// The log folder that shows it, when tests ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<PathBuf>,
    },
}

/// The state file in the output folder.
pub const STATE_FILE: &str = "validate_state.jsonl";

/// Whether an earlier end is redone on resume (an infrastructure failure).
pub(super) fn is_retried(end: &TaskEnd) -> bool {
    matches!(
        end.verdict,
        Verdict::Dropped {
            reason: DropReason::InfraError,
            ..
        }
    )
}

/// The ends recorded so far, by task key; a torn last line (a killed run) is ignored.
pub(super) fn read_state(path: &Path) -> HashMap<String, TaskEnd> {
    let Ok(text) = fs_err::read_to_string(path) else {
        return HashMap::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<TaskEnd>(l).ok())
        .map(|e| (e.key.clone(), e))
        .collect()
}

/// Appends ends to the state file, one flushed line each.
pub(super) struct StateWriter {
    path: PathBuf,
    file: fs_err::File,
}

impl StateWriter {
    pub(super) fn open(path: &Path) -> Result<StateWriter, CurateError> {
        let err = |source| CurateError::Write {
            path: path.to_owned(),
            source,
        };
        // A torn last line of a killed run gets its own line ended first.
        let torn = fs_err::read(path).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n"));
        let mut file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        if torn {
            file.write_all(b"\n").map_err(err)?;
        }
        Ok(StateWriter {
            path: path.to_owned(),
            file,
        })
    }

    pub(super) fn push(&mut self, end: &TaskEnd) -> Result<(), CurateError> {
        let mut line = serde_json::to_string(end).expect("json");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|source| CurateError::Write {
                path: self.path.clone(),
                source,
            })
    }
}
