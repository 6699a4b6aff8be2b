//! The task side: this process as one task of a swerve job array.

use std::io::Write as _;
use std::path::PathBuf;

use crate::{DIR_ENV, MARKER, SlurmError, TOKEN_ENV};

/// This process as a task of a swerve job array.
#[derive(Debug, Clone)]
pub struct ArrayTask {
    /// Its index in the array (`SLURM_ARRAY_TASK_ID`).
    pub index: usize,
    /// The array's size (`SLURM_ARRAY_TASK_COUNT`).
    pub count: usize,
    /// The round folder.
    pub dir: PathBuf,
    /// The node it runs on.
    pub node: String,
}

impl ArrayTask {
    /// `None` when this process is not a swerve array task; an error when it is one but does not
    /// see the submitter's round folder (a folder that is not shared) or lacks Slurm's variables.
    pub fn from_env() -> Result<Option<ArrayTask>, SlurmError> {
        ArrayTask::from_vars(|name| std::env::var(name).ok())
    }

    /// [`ArrayTask::from_env`] with the variables `get` returns.
    pub(crate) fn from_vars(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ArrayTask>, SlurmError> {
        let Some(dir) = get(DIR_ENV) else {
            return Ok(None);
        };
        let var =
            |name: &str| get(name).ok_or_else(|| SlurmError::TaskEnv(format!("{name} is not set")));
        let number = |name: &str| -> Result<usize, SlurmError> {
            var(name)?
                .parse()
                .map_err(|_| SlurmError::TaskEnv(format!("{name} is not a number")))
        };
        let token = var(TOKEN_ENV)?;
        let index = number("SLURM_ARRAY_TASK_ID")?;
        let count = number("SLURM_ARRAY_TASK_COUNT")?;
        let node = get("SLURMD_NODENAME").unwrap_or_else(hostname);
        let dir = PathBuf::from(dir);
        let marker = dir.join(MARKER);
        match std::fs::read_to_string(&marker) {
            Ok(found) if found == token => Ok(Some(ArrayTask {
                index,
                count,
                dir,
                node,
            })),
            _ => Err(SlurmError::NotShared {
                index,
                node,
                path: marker,
            }),
        }
    }

    fn file(&self, kind: &str) -> PathBuf {
        self.dir.join(format!("task-{}.{kind}", self.index))
    }

    /// The file holding the input the submitter wrote for this task.
    pub fn input_path(&self) -> PathBuf {
        self.file("input")
    }

    /// The input text the submitter wrote for this task.
    pub fn input(&self) -> Result<String, SlurmError> {
        let path = self.input_path();
        std::fs::read_to_string(&path).map_err(SlurmError::round("read", path))
    }

    /// Appends one progress line (one finished unit of work) and syncs it, so that the
    /// submitter sees it and a task killed next loses nothing it reported.
    pub fn record(&self, line: &str) -> Result<(), SlurmError> {
        debug_assert!(!line.contains('\n'));
        let path = self.file("progress");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(SlurmError::round("open", &path))?;
        file.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(SlurmError::round("append to", path))
    }

    /// Says that the task finished its whole input (`note`: anything the submitter should
    /// read, e.g. the node name).
    pub fn finish(&self, note: &str) -> Result<(), SlurmError> {
        // Whole or not at all: the submitter reads a marker it sees as the task's last word.
        let path = self.file("done");
        swerve_cache::write_atomic(&path, note).map_err(SlurmError::round("write", path))
    }
}

/// For an array task: on SIGTERM (`scancel`, a time limit) or SIGINT, run `cleanup` (remove the
/// task's containers) and exit with the signal's status (143, 130). Call once, and not in a
/// process that follows an array.
pub fn on_terminate(cleanup: impl FnOnce() + Send + 'static) {
    if let Err(e) = swerve_interrupt::install() {
        tracing::warn!(error = %e, "a stopped task may leave containers");
        return;
    }
    // The cooperation lives as long as the process: the first signal waits for the cleanup.
    let cooperation = swerve_interrupt::cooperate();
    let spawned = std::thread::Builder::new()
        .name("swerve-task-cleanup".to_owned())
        .spawn(move || {
            let _cooperation = cooperation;
            let signal = swerve_interrupt::wait();
            cleanup();
            std::process::exit(i32::from(signal.exit_code()));
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot watch for SIGTERM: a stopped task may leave containers");
    }
}

/// This machine's host name.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_proves_it_sees_the_round_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MARKER), "tok-1").unwrap();
        let vars = |token: &'static str| {
            let dir = dir.path().display().to_string();
            move |name: &str| match name {
                DIR_ENV => Some(dir.clone()),
                TOKEN_ENV => Some(token.to_owned()),
                "SLURM_ARRAY_TASK_ID" => Some("1".to_owned()),
                "SLURM_ARRAY_TASK_COUNT" => Some("2".to_owned()),
                "SLURMD_NODENAME" => Some("node7".to_owned()),
                _ => None,
            }
        };
        let task = ArrayTask::from_vars(vars("tok-1"))
            .unwrap()
            .expect("a task");
        assert_eq!(
            (task.index, task.count, task.node.as_str()),
            (1, 2, "node7")
        );
        task.record("one").unwrap();
        task.record("two").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("task-1.progress")).unwrap(),
            "one\ntwo\n"
        );
        // A marker of another round, or none (a folder this node does not share).
        let err = ArrayTask::from_vars(vars("tok-2")).unwrap_err();
        assert!(
            matches!(err, SlurmError::NotShared { index: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("node7"), "{err}");
        assert!(ArrayTask::from_vars(|_| None).unwrap().is_none());
        let missing = ArrayTask::from_vars(|name| (name == DIR_ENV).then(|| "/x".to_owned()));
        assert!(matches!(missing, Err(SlurmError::TaskEnv(_))));
        // A missing input names the file.
        let err = task.input().unwrap_err();
        assert!(err.to_string().contains("task-1.input"), "{err}");
    }
}
