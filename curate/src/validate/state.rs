//! `validate_state.jsonl`: how each task ended, one line appended as soon as it is known, so
//! that a killed or failed run resumes without redoing or losing a task.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use swerve_harness::execution::RepoEnv;

use crate::error::CurateError;

use super::DropReason;

/// How one task ended: a line of `validate_state.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TaskEnd {
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

/// The ends recorded so far, by task key (a later line for a key wins: a retried task). A torn
/// last line — no newline after it, what a run killed while appending leaves — is ignored; any
/// other line that is not an end, or a file that cannot be read, is an error naming the file
/// and line. No file: nothing ended yet.
pub(super) fn read_state(path: &Path) -> Result<HashMap<String, TaskEnd>, CurateError> {
    // Bytes, not text: a kill may cut the last line inside a multi-byte character.
    let text = match fs_err::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(source) => {
            return Err(CurateError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let torn = !text.is_empty() && !text.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if !torn {
        // What follows the last newline: nothing.
        lines.pop();
    }
    let mut ends = HashMap::new();
    for (index, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<TaskEnd>(line) {
            Ok(end) => {
                ends.insert(end.key.clone(), end);
            }
            Err(_) if torn && index + 1 == lines.len() => {}
            Err(source) => {
                return Err(CurateError::Row {
                    path: path.to_owned(),
                    line: index + 1,
                    source,
                });
            }
        }
    }
    Ok(ends)
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
        // A torn last line of a killed run is cut off, so that the file holds whole lines only
        // and every end appended after it is a line of its own.
        let whole = match fs_err::read(path) {
            Ok(bytes) if !bytes.is_empty() && !bytes.ends_with(b"\n") => Some(
                bytes
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |newline| newline as u64 + 1),
            ),
            _ => None,
        };
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        if let Some(len) = whole {
            file.set_len(len).map_err(err)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn end(key: &str) -> String {
        let end = TaskEnd {
            key: key.to_owned(),
            instance_id: format!("o__r-{key}"),
            repo: "o/r".to_owned(),
            verdict: Verdict::Dropped {
                reason: DropReason::NoFailToPass,
                detail: "every test passes before the fix".to_owned(),
                log: None,
            },
            flaky: Vec::new(),
            seconds: BTreeMap::new(),
        };
        serde_json::to_string(&end).expect("serialises")
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_any_other_bad_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert!(
            read_state(&path).unwrap().is_empty(),
            "no file: nothing ended"
        );

        // A run killed while appending its third line.
        let third = end("c");
        let torn = format!("{}\n{}\n{}", end("a"), end("b"), &third[..third.len() / 2]);
        fs_err::write(&path, &torn).unwrap();
        let ends = read_state(&path).unwrap();
        assert_eq!(ends.len(), 2);
        assert!(ends.contains_key("a") && ends.contains_key("b"));

        // The same text in the middle of the file is corruption, named by its line.
        fs_err::write(
            &path,
            format!("{}\n{}\n", &third[..third.len() / 2], end("a")),
        )
        .unwrap();
        let error = read_state(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid row at {}:1", path.display())
        );
        // A torn line cut inside a multi-byte character is still only a torn line.
        let snowman = end("☃").into_bytes();
        let cut = snowman.iter().position(|&b| b >= 0x80).expect("non-ASCII") + 1;
        fs_err::write(
            &path,
            [format!("{}\n", end("a")).as_bytes(), &snowman[..cut]].concat(),
        )
        .unwrap();
        assert_eq!(read_state(&path).unwrap().len(), 1);
        // So is a whole last line that is not an end.
        fs_err::write(&path, format!("{}\n{{\"key\": 1}}\n", end("a"))).unwrap();
        assert!(matches!(
            read_state(&path),
            Err(CurateError::Row { line: 2, .. })
        ));

        // A folder where the file should be cannot be read: an error, not an empty state.
        let folder = dir.path().join("folder");
        fs_err::create_dir(&folder).unwrap();
        assert!(matches!(read_state(&folder), Err(CurateError::Read { .. })));
    }

    #[test]
    fn a_writer_cuts_a_torn_line_off_before_appending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let a = end("a");
        fs_err::write(&path, format!("{}\n{}", end("b"), &a[..10])).unwrap();
        let mut writer = StateWriter::open(&path).unwrap();
        writer
            .push(&serde_json::from_str(&end("a")).unwrap())
            .unwrap();
        drop(writer);
        let ends = read_state(&path).unwrap();
        assert_eq!(ends.len(), 2);
        assert_eq!(
            fs_err::read_to_string(&path).unwrap(),
            format!("{}\n{a}\n", end("b"))
        );
    }
}
