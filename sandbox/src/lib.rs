//! Docker sandbox for swerve: builds images offline (a debootstrapped Debian base, a
//! per-repository environment layer, a per-instance layer holding the repository cut at its base
//! commit), starts labelled containers with network, CPU, memory and pid limits, runs commands in
//! them with time limits that kill the whole process tree, copies files in and out, and
//! guarantees removal (on drop, explicitly, or by a label sweep).
//!
//! It is not the evaluation harness: it knows nothing of patches, eval scripts, logs or grading,
//! and it does not install a tracing subscriber. The Docker client library stays inside; the API
//! is plain types. Every Docker call is bounded by a [`Timeouts`] limit; outcomes of commands
//! inside a container (exit status, timeout, OOM kill) are data in [`ExecOutput`], and [`Error`]
//! is for when the sandbox itself cannot go on.
//!
//! ```no_run
//! # async fn demo() -> swerve_sandbox::Result<()> {
//! use swerve_sandbox::{BaseRecipe, ContainerSpec, ExecRequest, Sandbox, SandboxConfig};
//! let sandbox = Sandbox::connect(SandboxConfig::default()).await?;
//! let base = sandbox.ensure_base_image(&BaseRecipe::default()).await?;
//! let container = sandbox.start(&ContainerSpec::new(&base.name, "run-1", "demo")).await?;
//! let out = container.exec(&ExecRequest::shell("python3 --version")).await?;
//! assert!(out.success());
//! container.remove().await?;
//! # Ok(()) }
//! ```
//!
//! The exact base-image commands are in [`BaseRecipe`]'s docs.

mod base;
mod changes;
mod container;
mod context;
mod error;
mod host;
mod image;
mod layer;
mod leaks;
mod limits;
mod repo;
mod sandbox;
mod session;

pub use base::{BaseRecipe, apt_mirror};
pub use container::{
    Container, ContainerSpec, ExecOutput, ExecRequest, FsChange, FsChangeKind, LABEL_INSTANCE_ID,
    LABEL_MANAGED, LABEL_RUN_ID,
};
pub use error::{DockerError, Error, Result};
pub use image::{ImageInfo, ImageOrigin};
pub use layer::{EnvSpec, InstanceSpec, TESTBED, VENV};
pub use leaks::HistoryLeaks;
pub use limits::{Limits, Network};
pub use repo::RepoSource;
pub use sandbox::{Sandbox, SandboxConfig, Timeouts};
pub use session::{Session, SessionSpec};
