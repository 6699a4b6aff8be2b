//! The one error type of the sandbox crate.
//!
//! A variant per failed operation, carrying the id it failed on (image, container, path) and the
//! cause. Outcomes of the commands run *inside* a container (a non-zero exit, a timeout, an
//! out-of-memory kill) are not errors: they are fields of [`crate::ExecOutput`].

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the sandbox could not do what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Docker engine could not be reached or did not answer its version.
    #[error("cannot connect to the Docker engine")]
    Connect {
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// A Docker call did not finish within its limit.
    #[error("{operation} on {id} did not finish within {after:?}")]
    Timeout {
        /// What was being done (`pull`, `build`, `exec`, `remove`, ...).
        operation: &'static str,
        /// The image or container it was done on.
        id: String,
        /// The limit that ran out.
        after: Duration,
    },
    /// Inspecting or listing an image failed for a reason other than its absence.
    #[error("cannot inspect image {image}")]
    ImageInspect {
        /// The image name.
        image: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// The registry does not have the image.
    #[error("image {image} not found locally or in its registry")]
    ImageNotFound {
        /// The image name.
        image: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Pulling an image failed (after the configured retries).
    #[error("cannot pull image {image}")]
    Pull {
        /// The image name.
        image: String,
        /// The last attempt's error.
        #[source]
        source: DockerError,
    },
    /// Pushing an image failed.
    #[error("cannot push image {image}")]
    Push {
        /// The image name.
        image: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Tagging or removing an image failed.
    #[error("cannot {action} image {image}")]
    ImageManage {
        /// `tag` or `remove`.
        action: &'static str,
        /// The image name.
        image: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Building an image from a Dockerfile failed; `log_tail` holds the end of the build log.
    #[error("cannot build image {image}:\n{log_tail}")]
    Build {
        /// The tag being built.
        image: String,
        /// The last lines of the build output.
        log_tail: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// A command of the image's recipe (an install step) exited with a non-zero code: the
    /// recipe's failure, not the engine's; `log_tail` holds the end of the build log.
    #[error("cannot build image {image}: a step exited with code {exit_code}:\n{log_tail}")]
    BuildStep {
        /// The tag being built.
        image: String,
        /// The step's exit code.
        exit_code: i64,
        /// The last lines of the build output.
        log_tail: String,
    },
    /// Importing a root filesystem tar as an image failed.
    #[error("cannot import root filesystem as image {image}")]
    Import {
        /// The tag being imported.
        image: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// No Debian mirror for the suite was found in the host's apt configuration.
    #[error("no Debian mirror for suite {suite} in the apt configuration under /etc/apt")]
    MirrorNotFound {
        /// The Debian suite, e.g. `bookworm`.
        suite: String,
    },
    /// A host program (`debootstrap`, `tar`, `git`, `apt-get`) exited unsuccessfully.
    #[error("`{command}` failed ({status}):\n{output_tail}")]
    HostCommand {
        /// The command line, for the message.
        command: String,
        /// How it ended.
        status: String,
        /// The last lines of its output.
        output_tail: String,
    },
    /// The prepared repository still reaches commits that are not ancestors of the base commit.
    #[error(
        "repository for {instance} still holds {count} commit(s) not reachable from base {base}, e.g. {example}"
    )]
    FutureCommits {
        /// The instance id.
        instance: String,
        /// The base commit.
        base: String,
        /// How many extra commits exist.
        count: usize,
        /// One of them.
        example: String,
    },
    /// A prebuilt image's repository could not be checked for later history, or still reaches
    /// past its base commit after scrubbing.
    #[error("history check of image {image}: {detail}")]
    HistoryCheck {
        /// The image.
        image: String,
        /// What went wrong (the check's own `error …` line, or what is left).
        detail: String,
    },
    /// A host file operation failed.
    #[error("I/O error on {path}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Creating or starting a container failed.
    #[error("cannot {action} container {id}")]
    Container {
        /// `create`, `start` or `inspect`.
        action: &'static str,
        /// The container id, or the image name when the container does not exist yet.
        id: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Running a command in a container failed (not: the command failed — that is an outcome).
    #[error("cannot exec in container {container}")]
    Exec {
        /// The container id.
        container: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Listing a container's file-system changes failed.
    #[error("cannot list the file-system changes of container {container}")]
    Changes {
        /// The container id.
        container: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// Copying into or out of a container failed.
    #[error("cannot copy {path} {direction} container {container}")]
    Copy {
        /// The container id.
        container: String,
        /// The path being copied (host path for `into`, container path for `out of`).
        path: String,
        /// `into` or `out of`.
        direction: &'static str,
        /// The cause.
        #[source]
        source: DockerError,
    },
    /// Removing a container failed.
    #[error("cannot remove container {container}")]
    Remove {
        /// The container id.
        container: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// The runtime that removes a dropped container on its own thread could not be started.
    #[error("cannot start the runtime that removes dropped container {container}")]
    RemovalRuntime {
        /// The container id.
        container: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Listing containers for a sweep failed.
    #[error("cannot list swerve containers")]
    List {
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
}

/// An error reported by the Docker engine or its client library, kept opaque so that the
/// client library's types stay inside this crate.
pub struct DockerError(
    Box<dyn std::error::Error + Send + Sync + 'static>,
    Option<u16>,
);

impl DockerError {
    /// The HTTP status the engine answered with, when there was one (404: no such object).
    pub fn status_code(&self) -> Option<u16> {
        self.1
    }

    /// An error that did not come from the client library (a host I/O error while streaming).
    pub(crate) fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(error.into(), None)
    }
}

impl From<bollard::errors::Error> for DockerError {
    fn from(error: bollard::errors::Error) -> Self {
        let status = match &error {
            bollard::errors::Error::DockerResponseServerError { status_code, .. } => {
                Some(*status_code)
            }
            _ => None,
        };
        Self(Box::new(error), status)
    }
}

impl fmt::Debug for DockerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for DockerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for DockerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Keep the last `max_lines` lines of a log, for error messages.
pub(crate) fn tail(text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max_lines);
    lines[start..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(tail("", 5), "");
    }
}
