//! Why a mirror could not be read: the mirror's path, the operation, and libgit2's message.

use std::path::PathBuf;

/// Why a mirror could not be opened or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    /// A repository name that is not `owner/name` with GitHub's characters (it could point
    /// outside the mirrors' folder).
    #[error("{name:?} is not an owner/name repository name")]
    NotARepoName {
        /// The name.
        name: String,
    },
    /// No mirror at the path the name gives.
    #[error("no mirror at {}", path.display())]
    Missing {
        /// Where it should be.
        path: PathBuf,
    },
    /// The mirror exists but an operation on it failed (not a repository, a missing or corrupt
    /// object, an unreadable pack).
    #[error("{}: cannot {operation}: {detail}", path.display())]
    Git {
        /// The mirror.
        path: PathBuf,
        /// What was being done (`open the repository`, `read blob <id>`, …).
        operation: String,
        /// libgit2's message.
        detail: String,
    },
}
