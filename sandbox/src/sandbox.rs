//! The connection to the Docker engine: [`Sandbox`] (public, plain types) over the crate-private
//! [`Client`] that owns the bollard handle.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use serde::{Deserialize, Serialize};

use crate::error::{DockerError, Error, Result};

/// How long each kind of Docker call may take before it is abandoned with [`Error::Timeout`].
///
/// Every call the crate makes to the engine is bounded by one of these; a hung engine or
/// registry therefore fails an operation instead of hanging a whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeouts {
    /// Short calls: inspect, create, start, exec setup, list, tag, remove. Default: 60 s.
    pub api: Duration,
    /// Copies into and out of a container and pushes. Default: 10 min.
    pub transfer: Duration,
    /// One image pull attempt. Default: 30 min.
    pub pull: Duration,
    /// One image build, including the `debootstrap` of the base image. Default: 60 min.
    pub build: Duration,
    /// One of swerve's own short commands inside a container (copying a patch in, applying it,
    /// `git diff`, hardening's file and process sweeps), as opposed to the eval script, which
    /// has its own limit. Default: 2 min.
    #[serde(default = "default_command_timeout")]
    pub command: Duration,
}

fn default_command_timeout() -> Duration {
    Duration::from_secs(120)
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            api: Duration::from_secs(60),
            transfer: Duration::from_secs(10 * 60),
            pull: Duration::from_secs(30 * 60),
            build: Duration::from_secs(60 * 60),
            command: default_command_timeout(),
        }
    }
}

/// Settings of a [`Sandbox`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxConfig {
    /// OCI runtime for containers (e.g. `runsc` for gVisor). Used only when the engine lists it;
    /// otherwise a warning is logged and the engine's default runtime is used. Default: `None`.
    pub runtime: Option<String>,
    /// Platform for pulls (e.g. `linux/amd64`); `None` lets the engine choose. Default: `None`.
    pub platform: Option<String>,
    /// Host CA bundle copied into image builds so that pip and git inside can verify TLS through
    /// the host's proxy. Default: `/etc/ssl/certs/ca-certificates.crt`.
    pub ca_bundle: PathBuf,
    /// How many times a failed pull is retried (with 2 s, 4 s, 8 s, ... backoff); a "not found"
    /// answer is not retried. Default: 3.
    pub pull_retries: u32,
    /// Per-call time limits.
    pub timeouts: Timeouts,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            runtime: None,
            platform: None,
            ca_bundle: PathBuf::from("/etc/ssl/certs/ca-certificates.crt"),
            pull_retries: 3,
            timeouts: Timeouts::default(),
        }
    }
}

/// A connection to the local Docker engine (`DOCKER_HOST` or the default socket) that builds
/// images and starts containers. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Sandbox {
    pub(crate) client: Arc<Client>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.client.config)
            .field("runtime", &self.client.runtime)
            .finish()
    }
}

/// The crate-private client: the bollard handle, the configuration and what was learnt from the
/// engine at connection time.
pub(crate) struct Client {
    pub(crate) docker: Docker,
    pub(crate) config: SandboxConfig,
    /// The runtime actually used: the configured one if the engine lists it.
    pub(crate) runtime: Option<String>,
}

impl Sandbox {
    /// Connect to the engine, agree on an API version and check the configured runtime.
    pub async fn connect(config: SandboxConfig) -> Result<Sandbox> {
        let docker = connect_docker(&config).await?;
        let runtime = match &config.runtime {
            None => None,
            Some(wanted) => {
                let info = within(config.timeouts.api, "info", "engine", docker.info())
                    .await?
                    .map_err(|e| Error::Connect { source: e.into() })?;
                let listed = info.runtimes.unwrap_or_default();
                if listed.contains_key(wanted) {
                    Some(wanted.clone())
                } else {
                    tracing::warn!(
                        runtime = %wanted,
                        available = ?listed.keys().collect::<Vec<_>>(),
                        "OCI runtime not listed by the engine; using the default runtime"
                    );
                    None
                }
            }
        };
        Ok(Sandbox {
            client: Arc::new(Client {
                docker,
                config,
                runtime,
            }),
        })
    }

    /// The configuration this sandbox was connected with.
    pub fn config(&self) -> &SandboxConfig {
        &self.client.config
    }

    /// The OCI runtime containers are created with; `None` is the engine's default.
    pub fn runtime(&self) -> Option<&str> {
        self.client.runtime.as_deref()
    }
}

/// Open a bollard client on the local engine and negotiate the API version down to the engine's.
///
/// bollard's own per-request limit only covers waiting for response headers; this crate bounds
/// every call itself, so bollard's is set to the longest of ours.
pub(crate) async fn connect_docker(config: &SandboxConfig) -> Result<Docker> {
    let t = &config.timeouts;
    let longest = [t.api, t.transfer, t.pull, t.build]
        .into_iter()
        .max()
        .unwrap_or(t.api);
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| Error::Connect { source: e.into() })?
        .with_timeout(longest);
    within(
        t.api,
        "version negotiation",
        "engine",
        docker.negotiate_version(),
    )
    .await?
    .map_err(|e| Error::Connect { source: e.into() })
}

/// Run `fut` with a time limit, naming the operation and the object in the timeout error.
pub(crate) async fn within<T>(
    limit: Duration,
    operation: &'static str,
    id: &str,
    fut: impl Future<Output = T>,
) -> Result<T> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| Error::Timeout {
            operation,
            id: id.to_owned(),
            after: limit,
        })
}

/// True when a bollard error is the engine's 404.
pub(crate) fn is_not_found(error: &DockerError) -> bool {
    error.status_code() == Some(404)
}
