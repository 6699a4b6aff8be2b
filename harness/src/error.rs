//! Errors of the harness's own operations (reading inputs, writing outputs, loading plugins).
//! Grading and dataset errors live with the SWE-bench model (`swerve_swebench::grading::GradeError`,
//! `swerve_swebench::dataset::DatasetError`), a run's in `run::RunError`.

use std::path::PathBuf;

/// An operation of the harness that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// An input file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A plugin could not be loaded or the host could not run.
    #[error(transparent)]
    Host(#[from] swerve_host::HostError),
}
