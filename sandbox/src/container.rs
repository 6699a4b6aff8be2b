//! Containers: start one that idles, run commands in it with a time limit that kills the
//! command's whole process tree, copy files in and out, and remove it — explicitly, on drop, or by
//! a label sweep for leftovers of crashed runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, ContainerSummary};
use bollard::query_parameters::{
    CreateContainerOptions, DownloadFromContainerOptions, ListContainersOptions,
    RemoveContainerOptions, UploadToContainerOptions,
};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{DockerError, Error, Result};
use crate::limits::Limits;
use crate::sandbox::{Client, Sandbox, connect_docker, is_not_found, within};

/// An exec's output: stdout and stderr frames as the engine sends them.
pub(crate) type ExecStream = std::pin::Pin<
    Box<
        dyn futures_util::Stream<
                Item = std::result::Result<bollard::container::LogOutput, bollard::errors::Error>,
            > + Send,
    >,
>;

/// An exec's input (its stdin, when attached).
pub(crate) type ExecInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Label every swerve container carries, so that [`Sandbox::sweep`] finds them.
pub const LABEL_MANAGED: &str = "swerve.managed";
/// Label holding the run id.
pub const LABEL_RUN_ID: &str = "swerve.run-id";
/// Label holding the instance id.
pub const LABEL_INSTANCE_ID: &str = "swerve.instance-id";

/// How much longer than the host-side limit the in-container `timeout` waits before it kills the
/// command itself; it only matters when the host cannot reach the engine to kill it.
const INNER_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for a killed command's output stream to close.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(10);

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// The image to run.
    pub image: String,
    /// Run id, put in the `swerve.run-id` label.
    pub run_id: String,
    /// Instance id, put in the `swerve.instance-id` label.
    pub instance_id: String,
    /// Container name; `None` lets the engine pick one.
    pub name: Option<String>,
    /// Resource and network limits. Default: [`Limits::default`].
    pub limits: Limits,
    /// Default working directory of commands; `None` is the image's.
    pub workdir: Option<String>,
    /// Environment variables for the container (`KEY`, `value`).
    pub env: Vec<(String, String)>,
}

impl ContainerSpec {
    /// A spec with default limits, no name, the image's working directory and no extra env.
    pub fn new(
        image: impl Into<String>,
        run_id: impl Into<String>,
        instance_id: impl Into<String>,
    ) -> Self {
        Self {
            image: image.into(),
            run_id: run_id.into(),
            instance_id: instance_id.into(),
            name: None,
            limits: Limits::default(),
            workdir: None,
            env: Vec::new(),
        }
    }
}

/// A command to run in a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// Program and arguments (no shell unless you ask for one, see [`ExecRequest::shell`]).
    pub cmd: Vec<String>,
    /// Wall-clock limit; when it runs out the command and every process in its process group
    /// (and every process that inherited its environment) are killed. Default: 30 min.
    pub timeout: Duration,
    /// Working directory; `None` is the container's.
    pub workdir: Option<String>,
    /// User (`name`, `uid` or `uid:gid`); `None` is the image's (root for swerve images).
    pub user: Option<String>,
    /// Extra environment variables (`KEY`, `value`).
    pub env: Vec<(String, String)>,
    /// Most bytes of output kept from the start; the rest is dropped (but for the tail, see
    /// [`ExecRequest::tail_output_bytes`]) and [`ExecOutput::truncated`] set. Default: 64 MiB.
    pub max_output_bytes: usize,
    /// Most bytes kept from the end of the output once the first `max_output_bytes` are taken
    /// ([`ExecOutput::tail`]); what falls between head and tail is counted in
    /// [`ExecOutput::elided_bytes`]. Memory stays bounded by the two limits however much the
    /// command prints. Default: 0 (no tail).
    #[serde(default)]
    pub tail_output_bytes: usize,
}

impl ExecRequest {
    /// Run `cmd` with the default limits.
    pub fn new<I, S>(cmd: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            cmd: cmd.into_iter().map(Into::into).collect(),
            timeout: Duration::from_secs(30 * 60),
            workdir: None,
            user: None,
            env: Vec::new(),
            max_output_bytes: 64 << 20,
            tail_output_bytes: 0,
        }
    }

    /// Run `script` with `/bin/sh -c`.
    pub fn shell(script: &str) -> Self {
        Self::new(["/bin/sh", "-c", script])
    }

    /// Set [`ExecRequest::timeout`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Set [`ExecRequest::workdir`].
    pub fn with_workdir(mut self, workdir: impl Into<String>) -> Self {
        self.workdir = Some(workdir.into());
        self
    }

    /// Keep at most `head` bytes from the start of the output and `tail` from its end
    /// ([`ExecRequest::max_output_bytes`], [`ExecRequest::tail_output_bytes`]).
    pub fn with_output_cap(mut self, head: usize, tail: usize) -> Self {
        self.max_output_bytes = head;
        self.tail_output_bytes = tail;
        self
    }

    /// Add one environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// How a path differs from the image.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FsChangeKind {
    /// Changed (content, metadata, or a directory with changes below it).
    Modified,
    /// Added.
    Added,
    /// Deleted.
    Deleted,
}

/// One path of [`Container::changes`].
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct FsChange {
    /// Absolute path in the container.
    pub path: String,
    /// How it differs.
    pub kind: FsChangeKind,
}

/// How a command ended. A failing or timed-out command is an outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutput {
    /// Exit status; 137 when killed with SIGKILL (the out-of-memory killer, or the time limit).
    /// `None` when the engine no longer knew it (the command outlived the kill).
    pub exit_code: Option<i64>,
    /// stdout and stderr interleaved as the engine delivered them.
    pub output: Vec<u8>,
    /// The time limit ran out and the command was killed.
    pub timed_out: bool,
    /// Output past [`ExecRequest::max_output_bytes`] was dropped (all of it, or what the tail
    /// did not keep).
    pub truncated: bool,
    /// The last bytes of the output past the head, at most [`ExecRequest::tail_output_bytes`].
    #[serde(default)]
    pub tail: Vec<u8>,
    /// Bytes printed between [`ExecOutput::output`] and [`ExecOutput::tail`] and dropped.
    #[serde(default)]
    pub elided_bytes: u64,
    /// Wall-clock time from start to end (or kill).
    pub elapsed: Duration,
}

impl ExecOutput {
    /// The output decoded as UTF-8, invalid bytes replaced (as SWE-bench v5 does).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }

    /// Exit status 0 and no timeout.
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }
}

/// A command's output as it streams in, kept as [`ExecRequest::max_output_bytes`] and
/// [`ExecRequest::tail_output_bytes`] say: a head, a tail and the count between (memory bounded
/// by the two limits however much is printed).
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    past_head: u64,
    head_limit: usize,
    tail_limit: usize,
}

impl Capture {
    pub(crate) fn new(head_limit: usize, tail_limit: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            past_head: 0,
            head_limit,
            tail_limit,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let room = self.head_limit.saturating_sub(self.head.len());
        let (head, rest) = bytes.split_at(bytes.len().min(room));
        self.head.extend_from_slice(head);
        self.past_head += rest.len() as u64;
        let rest = &rest[rest.len().saturating_sub(self.tail_limit)..];
        let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow.min(self.tail.len()));
        self.tail.extend(rest);
    }

    /// The command's outcome with what was kept.
    pub(crate) fn finish(
        self,
        exit_code: Option<i64>,
        timed_out: bool,
        elapsed: Duration,
    ) -> ExecOutput {
        let tail: Vec<u8> = self.tail.into();
        let elided_bytes = self.past_head - tail.len() as u64;
        ExecOutput {
            exit_code,
            output: self.head,
            timed_out,
            truncated: elided_bytes > 0,
            tail,
            elided_bytes,
            elapsed,
        }
    }
}

/// A running container. Dropping it removes the container (forcibly, blocking until done);
/// [`Container::remove`] does the same asynchronously and reports errors.
pub struct Container {
    client: Arc<Client>,
    id: String,
    removed: bool,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container").field("id", &self.id).finish()
    }
}

/// A token unique within this host for marking one exec's processes.
pub(crate) fn exec_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

pub(crate) fn env_pairs(env: &[(String, String)]) -> Vec<String> {
    env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Force-remove a container with its anonymous volumes; a container that is already gone counts
/// as removed.
async fn remove_container(docker: &bollard::Docker, id: &str, limit: Duration) -> Result<()> {
    let options = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    match within(
        limit,
        "remove container",
        id,
        docker.remove_container(id, Some(options)),
    )
    .await?
    {
        Ok(()) => Ok(()),
        Err(e) => {
            let e = DockerError::from(e);
            if is_not_found(&e) {
                Ok(())
            } else if is_removal_conflict(&e) {
                // Another client (a killed harness's last request, or a concurrent sweep) is
                // removing it: done once the engine no longer knows the container.
                wait_until_gone(docker, id, limit)
                    .await
                    .map_err(|()| Error::Remove {
                        container: id.to_owned(),
                        source: e,
                    })
            } else {
                Err(Error::Remove {
                    container: id.to_owned(),
                    source: e,
                })
            }
        }
    }
}

/// True when the engine refused a forced removal with 409 Conflict, which means that another
/// removal of the same container is under way ("removal of container … is already in progress").
///
/// The status is the whole signal: Docker's error body carries only a human-readable message, no
/// error code, and its wording is not part of the API. With `force: true` the other removal
/// conflict (a running container) cannot happen; should the engine answer 409 for some other
/// reason, waiting for the container to disappear only delays the same error by the wait's limit.
fn is_removal_conflict(error: &DockerError) -> bool {
    error.status_code() == Some(409)
}

/// Polls until the engine answers 404 for `id`; `Err` if it still exists after `limit`.
async fn wait_until_gone(
    docker: &bollard::Docker,
    id: &str,
    limit: Duration,
) -> std::result::Result<(), ()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match docker.inspect_container(id, None).await {
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(()),
            _ if tokio::time::Instant::now() >= deadline => return Err(()),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

impl Sandbox {
    /// Create and start a container from `spec` that idles (`sleep infinity` under Docker's init,
    /// which also reaps orphaned processes) until commands are run in it.
    pub async fn start(&self, spec: &ContainerSpec) -> Result<Container> {
        let client = &self.client;
        let limit = client.config.timeouts.api;
        let mut host_config = spec.limits.host_config();
        host_config.init = Some(true);
        host_config.runtime = client.runtime.clone();
        let labels = [
            (LABEL_MANAGED, "true"),
            (LABEL_RUN_ID, spec.run_id.as_str()),
            (LABEL_INSTANCE_ID, spec.instance_id.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".to_owned(), "infinity".to_owned()]),
            labels: Some(labels),
            working_dir: spec.workdir.clone(),
            env: Some(env_pairs(&spec.env)),
            host_config: Some(host_config),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: spec.name.clone(),
            ..Default::default()
        };
        let created = within(
            limit,
            "create container",
            &spec.image,
            client.docker.create_container(Some(options), body),
        )
        .await?
        .map_err(|e| Error::Container {
            action: "create",
            id: spec.image.clone(),
            source: e.into(),
        })?;
        // From here on the handle owns the container: an early return removes it.
        let container = Container {
            client: Arc::clone(client),
            id: created.id,
            removed: false,
        };
        within(
            limit,
            "start container",
            &container.id,
            client.docker.start_container(&container.id, None),
        )
        .await?
        .map_err(|e| Error::Container {
            action: "start",
            id: container.id.clone(),
            source: e.into(),
        })?;
        tracing::debug!(id = %container.id, image = %spec.image, "started container");
        Ok(container)
    }

    /// Every container labelled `swerve.managed=true` (and, with `run_id`, also labelled with
    /// that run id), running or not, with its labels.
    async fn managed(&self, run_id: Option<&str>) -> Result<Vec<ContainerSummary>> {
        let client = &self.client;
        let mut labels = vec![format!("{LABEL_MANAGED}=true")];
        if let Some(run) = run_id {
            labels.push(format!("{LABEL_RUN_ID}={run}"));
        }
        let options = ListContainersOptions {
            all: true,
            filters: Some([("label".to_owned(), labels)].into_iter().collect()),
            ..Default::default()
        };
        within(
            client.config.timeouts.api,
            "list containers",
            "swerve",
            client.docker.list_containers(Some(options)),
        )
        .await?
        .map_err(|e| Error::List { source: e.into() })
    }

    /// Removes the containers `ids`; returns them.
    /// Removes every container of `ids`: one that cannot be removed does not stop the others
    /// from being tried; the first such error is returned once all were.
    async fn remove_all(&self, ids: Vec<String>) -> Result<Vec<String>> {
        let limit = self.client.config.timeouts.api;
        let mut first_error = None;
        for id in &ids {
            if let Err(e) = remove_container(&self.client.docker, id, limit).await {
                tracing::warn!(container = %id, error = %e, "cannot remove a leftover container");
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(ids),
        }
    }

    /// The ids of every container labelled `swerve.managed=true` (and, with `run_id`, also
    /// labelled with that run id), running or not.
    pub async fn list(&self, run_id: Option<&str>) -> Result<Vec<String>> {
        let found = self.managed(run_id).await?;
        Ok(found.into_iter().filter_map(|c| c.id).collect())
    }

    /// Remove every container [`Sandbox::list`] finds for `run_id` (all swerve containers with
    /// `None`), running or not: the leftovers of crashed runs. Returns the ids removed.
    pub async fn sweep(&self, run_id: Option<&str>) -> Result<Vec<String>> {
        let removed = self.remove_all(self.list(run_id).await?).await?;
        if !removed.is_empty() {
            tracing::info!(count = removed.len(), ?run_id, "swept containers");
        }
        Ok(removed)
    }

    /// Remove the containers whose run id is `<prefix>-<anything>`, running or not: what one
    /// executor's executions (`<prefix>-<n>` each) left when its process was stopped. Returns the
    /// ids removed.
    pub async fn sweep_run_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let wanted = format!("{prefix}-");
        let ids = self
            .managed(None)
            .await?
            .into_iter()
            .filter(|c| {
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_RUN_ID))
                    .is_some_and(|run| run.starts_with(&wanted))
            })
            .filter_map(|c| c.id)
            .collect();
        self.remove_all(ids).await
    }

    /// Remove the containers of `run_id` labelled with one of `instance_ids`, running or not: what
    /// an earlier attempt at these instances left, without touching the run's other instances
    /// (a cluster task sweeps only its own). Returns the ids removed.
    pub async fn sweep_instances(
        &self,
        run_id: &str,
        instance_ids: &[String],
    ) -> Result<Vec<String>> {
        let ids = self
            .managed(Some(run_id))
            .await?
            .into_iter()
            .filter(|c| {
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_INSTANCE_ID))
                    .is_some_and(|id| instance_ids.contains(id))
            })
            .filter_map(|c| c.id)
            .collect();
        self.remove_all(ids).await
    }
}

impl Container {
    /// The engine's container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn exec_error(&self, e: impl Into<DockerError>) -> Error {
        Error::Exec {
            container: self.id.clone(),
            source: e.into(),
        }
    }

    /// Create and start an exec with stdout and stderr attached; returns its id and stream.
    async fn start_exec(
        &self,
        cmd: Vec<String>,
        env: Vec<String>,
        workdir: Option<String>,
        user: Option<String>,
    ) -> Result<(String, ExecStream)> {
        let (id, output, _) = self.start_exec_with(cmd, env, workdir, user, false).await?;
        Ok((id, output))
    }

    /// Create and start an exec with stdin, stdout and stderr attached (a [`crate::Session`]'s
    /// shell); returns its id, its output and its input.
    pub(crate) async fn start_attached_exec(
        &self,
        cmd: Vec<String>,
        env: Vec<String>,
        workdir: Option<String>,
    ) -> Result<(String, ExecStream, ExecInput)> {
        self.start_exec_with(cmd, env, workdir, None, true).await
    }

    async fn start_exec_with(
        &self,
        cmd: Vec<String>,
        env: Vec<String>,
        workdir: Option<String>,
        user: Option<String>,
        stdin: bool,
    ) -> Result<(String, ExecStream, ExecInput)> {
        let docker = &self.client.docker;
        let limit = self.client.config.timeouts.api;
        let options = CreateExecOptions {
            attach_stdin: Some(stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(cmd),
            env: Some(env),
            working_dir: workdir,
            user,
            ..Default::default()
        };
        let exec = within(
            limit,
            "create exec",
            &self.id,
            docker.create_exec(&self.id, options),
        )
        .await?
        .map_err(|e| self.exec_error(e))?;
        let started = within(
            limit,
            "start exec",
            &self.id,
            docker.start_exec(&exec.id, Some(StartExecOptions::default())),
        )
        .await?
        .map_err(|e| self.exec_error(e))?;
        match started {
            StartExecResults::Attached { output, input } => Ok((exec.id, output, input)),
            StartExecResults::Detached => {
                Err(self.exec_error(DockerError::other("the engine started the exec detached")))
            }
        }
    }

    pub(crate) fn exec_failed(&self, e: impl Into<DockerError>) -> Error {
        self.exec_error(e)
    }

    /// Run a command and wait for it, up to `request.timeout`.
    ///
    /// The command runs as `timeout -s KILL <limit + 5 s> CMD...` (so the image needs a
    /// `timeout`: coreutils or busybox) with a unique `SWERVE_EXEC`
    /// token in its environment. Docker starts each exec as a session and process-group leader
    /// (and `timeout` makes itself a group leader otherwise), so the command's children share its
    /// process group. When the host-side limit runs out, a second exec kills every process whose
    /// environment holds the token together with its whole process group — children that
    /// detached into their own session included — then the output stream is drained. The
    /// in-container `timeout` is a backstop for when the host cannot reach the engine. `setsid`
    /// is not used: the exec already leads its session, and `setsid --wait` turns a death by
    /// signal into a misleading exit status. A process that both clears its environment and
    /// leaves the process group escapes the kill; removing the container ends it.
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput> {
        let token = exec_token();
        let inner = request.timeout + INNER_GRACE;
        let mut cmd = vec![
            "timeout".to_owned(),
            "-s".to_owned(),
            "KILL".to_owned(),
            // Whole seconds: both GNU and busybox `timeout` take them.
            inner.as_secs_f64().ceil().to_string(),
        ];
        cmd.extend(request.cmd.iter().cloned());
        let mut env = env_pairs(&request.env);
        env.push(format!("SWERVE_EXEC={token}"));

        let started = Instant::now();
        let (exec_id, mut stream) = self
            .start_exec(cmd, env, request.workdir.clone(), request.user.clone())
            .await?;
        let mut capture = Capture::new(request.max_output_bytes, request.tail_output_bytes);
        let mut collect = |chunk: bollard::container::LogOutput| capture.push(&chunk.into_bytes());
        let deadline = tokio::time::Instant::from_std(started + request.timeout);
        let finished = tokio::time::timeout_at(deadline, async {
            while let Some(chunk) = stream.next().await {
                collect(chunk?);
            }
            Ok::<(), bollard::errors::Error>(())
        })
        .await;
        let timed_out = match finished {
            Ok(result) => {
                result.map_err(|e| self.exec_error(e))?;
                false
            }
            Err(_) => {
                tracing::debug!(container = %self.id, ?request.timeout, "exec timed out; killing its process tree");
                // The output is read while the kill runs: a command that floods its output
                // would otherwise fill the engine's buffers and hold the kill's exec up.
                // Whatever the command printed before it died is still part of its output.
                // Reading stops when the stream closes, or DRAIN_AFTER_KILL after the kill.
                let (killed, mut kill_done) = tokio::sync::oneshot::channel::<()>();
                let kill = async {
                    self.kill_exec(&token).await;
                    let _ = killed.send(());
                };
                let drain = async {
                    let mut deadline = None;
                    loop {
                        let past_deadline = async {
                            match deadline {
                                Some(at) => tokio::time::sleep_until(at).await,
                                None => std::future::pending().await,
                            }
                        };
                        tokio::select! {
                            chunk = stream.next() => match chunk {
                                Some(Ok(chunk)) => collect(chunk),
                                _ => break,
                            },
                            _ = &mut kill_done, if deadline.is_none() => {
                                deadline = Some(tokio::time::Instant::now() + DRAIN_AFTER_KILL);
                            }
                            () = past_deadline => break,
                        }
                    }
                };
                tokio::join!(kill, drain);
                true
            }
        };
        let elapsed = started.elapsed();
        let inspect = within(
            self.client.config.timeouts.api,
            "inspect exec",
            &self.id,
            self.client.docker.inspect_exec(&exec_id),
        )
        .await?
        .map_err(|e| self.exec_error(e))?;
        let exit_code = match inspect.running {
            Some(true) => None,
            _ => inspect.exit_code,
        };
        Ok(capture.finish(exit_code, timed_out, elapsed))
    }

    /// Kill every process whose environment holds the exec's token, and the process group of
    /// each. Failures are logged: the container's removal kills everything anyway.
    pub(crate) async fn kill_exec(&self, token: &str) {
        // Field 5 of /proc/PID/stat is the process group; the command name before it is in
        // parentheses and may contain spaces, so the fields are counted after the last ") ".
        // dash's `kill` takes `-9 -PGID` but not `--` or `-s KILL -PGID`.
        let script = format!(
            "for p in /proc/[0-9]*; do \
               grep -qsz '^SWERVE_EXEC={token}$' \"$p/environ\" || continue; \
               pid=${{p#/proc/}}; stat=$(cat \"$p/stat\" 2>/dev/null) || continue; \
               set -- ${{stat##*) }}; \
               [ \"$3\" -gt 1 ] && kill -9 \"-$3\" 2>/dev/null; \
               kill -9 \"$pid\" 2>/dev/null; \
             done; true"
        );
        let cmd = vec!["/bin/sh".to_owned(), "-c".to_owned(), script];
        let kill = async {
            let (_, mut stream) = self.start_exec(cmd, Vec::new(), None, None).await?;
            while stream.next().await.is_some() {}
            Ok::<(), Error>(())
        };
        match tokio::time::timeout(self.client.config.timeouts.api, kill).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(container = %self.id, error = %e, "cannot kill timed-out exec")
            }
            Err(_) => tracing::warn!(container = %self.id, "killing a timed-out exec timed out"),
        }
    }

    /// Run `mkdir -p dir` (needed before an upload into a directory that may not exist).
    async fn mkdir(&self, dir: &str) -> Result<()> {
        let out = self
            .exec(
                &ExecRequest::new(["mkdir", "-p", dir])
                    .with_timeout(self.client.config.timeouts.api),
            )
            .await?;
        if out.success() {
            Ok(())
        } else {
            Err(Error::Copy {
                container: self.id.clone(),
                path: dir.to_owned(),
                direction: "into",
                source: DockerError::other(format!("mkdir -p {dir} failed: {}", out.text())),
            })
        }
    }

    async fn upload(&self, tar_path: &Path, dir: &str, what: &str) -> Result<()> {
        self.mkdir(dir).await?;
        self.upload_into(tar_path, dir, what).await
    }

    /// Unpack the tar at `tar_path` into the existing container folder `dir`.
    async fn upload_into(&self, tar_path: &Path, dir: &str, what: &str) -> Result<()> {
        let options = UploadToContainerOptions {
            path: dir.to_owned(),
            ..Default::default()
        };
        let body = bollard::body_try_stream(crate::context::open_body(tar_path).await?);
        within(
            self.client.config.timeouts.transfer,
            "copy into container",
            &self.id,
            self.client
                .docker
                .upload_to_container(&self.id, Some(options), body),
        )
        .await?
        .map_err(|e| Error::Copy {
            container: self.id.clone(),
            path: what.to_owned(),
            direction: "into",
            source: e.into(),
        })
    }

    /// Copy the host file or directory `host` into the container directory `container_dir`
    /// (created if missing), keeping its base name: `/a/b` into `/x` becomes `/x/b`.
    pub async fn copy_in(&self, host: &Path, container_dir: &str) -> Result<()> {
        let name = host
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| Error::Io {
                path: host.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
            })?;
        let dir = crate::image::temp_dir("swerve-copy-")?;
        let tar_path = dir.path().join("in.tar");
        let host_owned = host.to_owned();
        let tar_path = tokio::task::spawn_blocking(move || {
            let mut ctx = Context::create(tar_path)?;
            if host_owned.is_dir() {
                ctx.add_dir(&name, &host_owned)?;
            } else {
                ctx.add_file(&name, &host_owned)?;
            }
            ctx.finish()
        })
        .await
        .expect("the tar task does not panic")?;
        self.upload(&tar_path, container_dir, &host.display().to_string())
            .await
    }

    /// Write `contents` to the file `container_path` (mode 0644, parent created if missing).
    pub async fn write_file(&self, container_path: &str, contents: &[u8]) -> Result<()> {
        let dir = crate::image::temp_dir("swerve-copy-")?;
        let mut ctx = Context::create(dir.path().join("in.tar"))?;
        match container_path.strip_prefix('/') {
            // One upload into `/` whose entry is the whole path: the engine makes the missing
            // folders above it (no `mkdir -p` exec first, one round trip instead of two).
            Some(relative) if !relative.is_empty() => {
                ctx.add_bytes(relative, contents, 0o644)?;
                let tar_path = ctx.finish()?;
                self.upload_into(&tar_path, "/", container_path).await
            }
            _ => {
                let (parent, name) = container_path
                    .rsplit_once('/')
                    .unwrap_or((".", container_path));
                ctx.add_bytes(name, contents, 0o644)?;
                let tar_path = ctx.finish()?;
                self.upload(&tar_path, parent, container_path).await
            }
        }
    }

    /// Copy the container file or directory `container_path` into the host directory
    /// `host_dir` (which must exist), keeping its base name. Returns the host path of the copy.
    pub async fn copy_out(&self, container_path: &str, host_dir: &Path) -> Result<PathBuf> {
        let archive = self.download(container_path).await?;
        let target = host_dir.to_owned();
        tokio::task::spawn_blocking(move || {
            // `unpack` refuses entries that would land outside `target`.
            tar::Archive::new(archive.as_slice()).unpack(&target)
        })
        .await
        .expect("the untar task does not panic")
        .map_err(|e| self.copy_error(container_path, DockerError::other(e)))?;
        let name = container_path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(container_path);
        Ok(host_dir.join(name))
    }

    /// The contents of the regular file `container_path`, read through the engine (nothing in
    /// the container can forge them); `None` when it is missing or not a regular file. At most
    /// `limit` bytes are read: a larger file is an error.
    pub async fn read_file(&self, container_path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let archive = match self.download(container_path).await {
            Ok(a) => a,
            Err(Error::Copy { source, .. }) if crate::sandbox::is_not_found(&source) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut tar = tar::Archive::new(archive.as_slice());
        let mut read = || -> std::io::Result<Option<Vec<u8>>> {
            let Some(entry) = tar.entries()?.next() else {
                return Ok(None);
            };
            let mut entry = entry?;
            if !entry.header().entry_type().is_file() {
                return Ok(None);
            }
            if entry.size() > limit {
                return Err(std::io::Error::other(format!(
                    "{} bytes, over the {limit} read",
                    entry.size()
                )));
            }
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            std::io::Read::read_to_end(&mut entry, &mut bytes)?;
            Ok(Some(bytes))
        };
        read().map_err(|e| self.copy_error(container_path, DockerError::other(e)))
    }

    fn copy_error(&self, container_path: &str, source: DockerError) -> Error {
        Error::Copy {
            container: self.id.clone(),
            path: container_path.to_owned(),
            direction: "out of",
            source,
        }
    }

    /// The engine's tar archive of `container_path`.
    async fn download(&self, container_path: &str) -> Result<Vec<u8>> {
        let options = DownloadFromContainerOptions {
            path: container_path.to_owned(),
        };
        let mut stream = self
            .client
            .docker
            .download_from_container(&self.id, Some(options));
        let mut archive = Vec::new();
        let download = async {
            while let Some(chunk) = stream.next().await {
                archive.extend_from_slice(&chunk?);
            }
            Ok::<(), bollard::errors::Error>(())
        };
        within(
            self.client.config.timeouts.transfer,
            "copy out of container",
            &self.id,
            download,
        )
        .await?
        .map_err(|e| self.copy_error(container_path, e.into()))?;
        Ok(archive)
    }

    /// The paths whose state differs from the image's, as the engine sees them: nothing in the
    /// container can forge this list. Mounts (tmpfs, volumes) are not in it. Read from the
    /// container's upper layer when the engine keeps it on this host (the `changes` module: the
    /// same list, without `docker diff`'s walk of the whole tree on `fuse-overlayfs`), else
    /// [`Container::engine_changes`].
    pub async fn changes(&self) -> Result<Vec<FsChange>> {
        /// More entries than this in the upper layer: the engine lists them.
        const LIMIT: usize = 200_000;
        if let Some(layers) = self.local_layers().await? {
            let read = tokio::task::spawn_blocking(move || layers.changes(LIMIT))
                .await
                .expect("the layer walk does not panic");
            match read {
                Ok(Some(changes)) => return Ok(changes),
                Ok(None) => tracing::debug!(container = %self.id, "over {LIMIT} changes"),
                Err(e) => {
                    tracing::debug!(container = %self.id, error = %e, "upper layer unreadable");
                }
            }
        }
        self.engine_changes().await
    }

    /// The container's layers on this host, when its storage driver is an overlay one whose
    /// directories this process can read.
    async fn local_layers(&self) -> Result<Option<crate::changes::Layers>> {
        let inspected = within(
            self.client.config.timeouts.api,
            "inspect container",
            &self.id,
            self.client.docker.inspect_container(&self.id, None),
        )
        .await?
        .map_err(|e| Error::Changes {
            container: self.id.clone(),
            source: DockerError::from(e),
        })?;
        Ok(inspected
            .graph_driver
            .and_then(|d| crate::changes::Layers::from_driver(&d.name, &d.data)))
    }

    /// The engine's own diff (`docker diff`) of the container against its image.
    pub async fn engine_changes(&self) -> Result<Vec<FsChange>> {
        let found = within(
            self.client.config.timeouts.api,
            "list changes",
            &self.id,
            self.client.docker.container_changes(&self.id),
        )
        .await?
        .map_err(|e| Error::Changes {
            container: self.id.clone(),
            source: DockerError::from(e),
        })?;
        Ok(found
            .unwrap_or_default()
            .into_iter()
            .map(|c| FsChange {
                kind: match c.kind {
                    bollard::models::ChangeType::_0 => FsChangeKind::Modified,
                    bollard::models::ChangeType::_1 => FsChangeKind::Added,
                    bollard::models::ChangeType::_2 => FsChangeKind::Deleted,
                },
                path: c.path,
            })
            .collect())
    }

    /// Whether the container's main process is still running (a command that killed its init
    /// stops it; [`Container::revive`] starts it again).
    pub async fn running(&self) -> Result<bool> {
        let inspected = within(
            self.client.config.timeouts.api,
            "inspect container",
            &self.id,
            self.client.docker.inspect_container(&self.id, None),
        )
        .await?
        .map_err(|e| self.exec_error(e))?;
        Ok(inspected
            .state
            .and_then(|state| state.running)
            .unwrap_or(false))
    }

    /// Starts a stopped container again with the same writable layer: files written before it
    /// stopped are kept, processes are not. A running container is left as it is.
    pub async fn revive(&self) -> Result<()> {
        if self.running().await? {
            return Ok(());
        }
        within(
            self.client.config.timeouts.api,
            "start container",
            &self.id,
            self.client.docker.start_container(&self.id, None),
        )
        .await?
        .map_err(|e| Error::Container {
            action: "start",
            id: self.id.clone(),
            source: e.into(),
        })?;
        tracing::debug!(id = %self.id, "restarted a stopped container");
        Ok(())
    }

    /// Bytes the container has written over its image (what its writable layer holds), `None`
    /// when the engine does not say. Mounts are not counted. Read from the upper layer where the
    /// engine keeps it on this host (milliseconds), else the engine's `SizeRw` (seconds on
    /// `fuse-overlayfs`).
    pub async fn written_bytes(&self) -> Result<Option<u64>> {
        /// Entries walked at most (a lower bound past them).
        const LIMIT: usize = 1_000_000;
        if let Some(layers) = self.local_layers().await? {
            let walked = tokio::task::spawn_blocking(move || layers.upper_bytes(LIMIT))
                .await
                .expect("the layer walk does not panic");
            match walked {
                Ok(bytes) => return Ok(Some(bytes)),
                Err(e) => {
                    tracing::debug!(container = %self.id, error = %e, "upper layer unreadable");
                }
            }
        }
        let options = bollard::query_parameters::InspectContainerOptions { size: true };
        let inspected = within(
            self.client.config.timeouts.api,
            "inspect container size",
            &self.id,
            self.client
                .docker
                .inspect_container(&self.id, Some(options)),
        )
        .await?
        .map_err(|e| self.exec_error(e))?;
        Ok(inspected.size_rw.and_then(|n| u64::try_from(n).ok()))
    }

    /// Remove the container now (forcibly), reporting failure instead of logging it. After a
    /// failure the handle's drop tries once more.
    pub async fn remove(mut self) -> Result<()> {
        let outcome = remove_container(
            &self.client.docker,
            &self.id,
            self.client.config.timeouts.api,
        )
        .await;
        self.removed = outcome.is_ok();
        outcome
    }
}

impl Drop for Container {
    /// Remove the container, blocking until the engine confirms it.
    ///
    /// The removal runs on a new thread with its own single-threaded runtime and its own engine
    /// connection: the caller may have no runtime, a runtime that is shutting down, or a
    /// current-thread runtime whose only thread is this one — and bollard's pooled connections
    /// are driven by tasks on the runtime that opened them, so reusing the caller's client from
    /// another runtime could deadlock. Joining the thread makes removal complete before `drop`
    /// returns (also at the end of a test or `main`); on a multi-threaded runtime the join runs
    /// under `block_in_place` so other tasks keep going.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let id = self.id.clone();
        let config = self.client.config.clone();
        let worker = std::thread::Builder::new()
            .name("swerve-container-drop".to_owned())
            .spawn(move || -> Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|source| Error::RemovalRuntime {
                        container: id.clone(),
                        source,
                    })?;
                runtime.block_on(async {
                    let docker = connect_docker(&config).await?;
                    remove_container(&docker, &id, config.timeouts.api).await
                })
            });
        let worker = match worker {
            Ok(handle) => handle,
            Err(e) => {
                tracing::error!(container = %self.id, error = %e, "cannot spawn the removal thread; run a sweep");
                return;
            }
        };
        let join = || worker.join();
        let joined = match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(join)
            }
            _ => join(),
        };
        match joined {
            Ok(Ok(())) => tracing::debug!(container = %self.id, "removed container on drop"),
            Ok(Err(e)) => {
                tracing::error!(container = %self.id, error = %e, "cannot remove container on drop; run a sweep")
            }
            Err(_) => tracing::error!(container = %self.id, "the removal thread panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail_and_counts_between() {
        let mut c = Capture::new(3, 2);
        c.push(b"abcdef");
        c.push(b"gh");
        let out = c.finish(Some(0), false, Duration::ZERO);
        assert_eq!(
            (out.output.as_slice(), out.tail.as_slice()),
            (&b"abc"[..], &b"gh"[..])
        );
        assert_eq!((out.elided_bytes, out.truncated), (3, true));
        let mut whole = Capture::new(8, 2);
        whole.push(b"abc");
        let out = whole.finish(Some(0), false, Duration::ZERO);
        assert_eq!(
            (out.output.as_slice(), out.elided_bytes, out.truncated),
            (&b"abc"[..], 0, false)
        );
    }

    fn server_error(status_code: u16, message: &str) -> DockerError {
        DockerError::from(bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: message.to_owned(),
        })
    }

    #[test]
    fn only_a_conflict_counts_as_a_removal_in_progress() {
        let cases = [
            (
                server_error(409, "removal of container abc is already in progress"),
                true,
            ),
            // The status decides, not the engine's wording.
            (server_error(409, "conflict"), true),
            (server_error(404, "No such container: abc"), false),
            (
                server_error(500, "removal of container abc is already in progress"),
                false,
            ),
            (DockerError::other("connection reset"), false),
        ];
        for (error, expected) in cases {
            assert_eq!(is_removal_conflict(&error), expected, "{error}");
        }
    }
}
