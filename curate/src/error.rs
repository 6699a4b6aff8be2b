//! The one error type of the curation library. Bad input (a truncated gzip, a line that is not
//! JSON, a missing clone or commit) is *not* an error: it is counted and reported as data. `Err`
//! is for what stops a run: unreadable arguments, an output folder that cannot be written.

use std::path::PathBuf;

/// Why curation could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CurateError {
    /// A file or folder named on the command line could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--config` file is not valid TOML for [`crate::Config`].
    #[error("invalid config {}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// An argument or setting that cannot be used (a shard `K/N` with `K >= N`, a bad date).
    #[error("invalid setting {name}: {detail}")]
    Setting {
        /// The flag or setting.
        name: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// A shard output line that is not a row `curate run` writes.
    #[error("invalid row at {}:{line}", path.display())]
    Row {
        /// The shard file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A `curate validate` task row without a field it needs.
    #[error("{}:{line}: field `{field}` is missing or not a string", path.display())]
    Field {
        /// The tasks file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The field.
        field: &'static str,
    },
    /// The sandbox executor of `curate validate` could not be started.
    #[cfg(feature = "validate")]
    #[error("cannot start the sandbox executor")]
    Executor(#[source] swerve_harness::execution::RunError),
    /// `tasks.parquet` could not be written.
    #[error("cannot write parquet {}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The writer's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The SWE-bench 5 task repository (`curate validate --task-repo`) could not be written.
    #[error("cannot write the task repository {}", path.display())]
    TaskRepo {
        /// Its folder.
        path: PathBuf,
        /// What failed.
        #[source]
        source: swerve_swebench::task_repo::TaskRepoError,
    },
    /// Slurm could not place or follow the work (`--executor slurm`).
    #[error("cannot run on Slurm")]
    Slurm(#[source] swerve_slurm::SlurmError),
}
