//! One episode: a container of the task's image, the conversation with the policy, each action
//! run under the per-command limits, the episode's own limits checked between turns, and the
//! trajectory. Never fails: what goes wrong ends the episode with its reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use swerve_sandbox::{Container, ContainerSpec, Limits, Sandbox, Session, SessionSpec};

use super::EpisodeLimits;
use super::editor::{Editor, ToolAnswer};
use super::policy::{Policy, PolicyError, PolicyRequest};
use super::protocol::{self, Captured, Protocol};
use super::trajectory::{Action, EndReason, Message, Reply, Trajectory, Turn};

/// Bytes of a command's output kept from its start (enough for any submitted patch).
const HEAD_BYTES: usize = 4 << 20;
/// Bytes kept from its end.
const TAIL_BYTES: usize = 64 << 10;
/// Format errors in a row that end an episode.
const FORMAT_ERRORS: u32 = 3;

/// What an episode runs with.
pub(crate) struct EpisodeSpec {
    pub instance_id: String,
    pub problem: String,
    pub image: String,
    pub history_check: Option<String>,
    pub repo_dir: String,
    pub run_id: String,
    pub key: String,
    pub protocol: Protocol,
    pub limits: EpisodeLimits,
    pub container: Limits,
}

/// The environment every command gets: no pager, no progress bars.
const ENV: [(&str, &str); 6] = [
    ("PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("LESS", "-R"),
    ("PIP_PROGRESS_BAR", "off"),
    ("TQDM_DISABLE", "1"),
];

/// The running state of an episode.
struct Episode<'a> {
    spec: &'a EpisodeSpec,
    container: Container,
    started: Instant,
    messages: Vec<Message>,
    turns: Vec<Turn>,
    model_ms: u64,
    sandbox_ms: u64,
    context_tokens: u64,
    /// Characters added to the conversation since the model last counted its prompt.
    unsent_chars: u64,
    editor: Editor,
    /// The shell that runs the agent's commands (opened at the first, again after one broke).
    session: Option<Session>,
}

/// How an episode ended.
struct Ending {
    reason: EndReason,
    detail: Option<String>,
    patch: String,
}

fn ending(reason: EndReason, detail: impl Into<Option<String>>) -> Ending {
    Ending {
        reason,
        detail: detail.into(),
        patch: String::new(),
    }
}

/// What one action gave.
enum Ran {
    /// Its observation text and record; `Some(patch)` when it submitted.
    Done {
        observation: String,
        action: Action,
        submitted: Option<String>,
    },
    /// The episode must end.
    End(Ending),
}

/// Runs one episode to its end.
pub(crate) async fn run_episode(
    sandbox: &Sandbox,
    policy: Arc<dyn Policy>,
    spec: &EpisodeSpec,
) -> Trajectory {
    let started = Instant::now();
    let system = protocol::system_prompt(spec.protocol);
    let task = protocol::task_prompt(spec.protocol, &spec.repo_dir, &spec.problem);
    let messages = vec![Message::new("system", system), Message::new("user", task)];
    let container = match start(sandbox, spec).await {
        Ok(c) => c,
        Err(e) => {
            let end = ending(
                EndReason::EnvError,
                format!(
                    "cannot start the container: {}",
                    crate::run::error_chain(&e)
                ),
            );
            return trajectory(
                spec,
                policy.as_ref(),
                end,
                messages,
                Vec::new(),
                started,
                0,
                0,
                0,
            );
        }
    };
    let unsent_chars = messages.iter().map(|m| m.content.len() as u64).sum();
    let mut episode = Episode {
        spec,
        container,
        started,
        messages,
        turns: Vec::new(),
        model_ms: 0,
        sandbox_ms: 0,
        context_tokens: 0,
        unsent_chars,
        editor: Editor::default(),
        session: None,
    };
    let end = episode.run(&policy).await;
    let Episode {
        container,
        messages,
        turns,
        model_ms,
        sandbox_ms,
        context_tokens,
        ..
    } = episode;
    if let Err(e) = container.remove().await {
        tracing::warn!(instance = %spec.instance_id, error = %e, "cannot remove the agent's container");
    }
    trajectory(
        spec,
        policy.as_ref(),
        end,
        messages,
        turns,
        started,
        model_ms,
        sandbox_ms,
        context_tokens,
    )
}

#[allow(clippy::too_many_arguments)]
fn trajectory(
    spec: &EpisodeSpec,
    policy: &dyn Policy,
    end: Ending,
    messages: Vec<Message>,
    turns: Vec<Turn>,
    started: Instant,
    model_ms: u64,
    sandbox_ms: u64,
    context_tokens: u64,
) -> Trajectory {
    Trajectory {
        instance_id: spec.instance_id.clone(),
        model: policy.model_name(),
        protocol: spec.protocol.as_str().to_owned(),
        key: spec.key.clone(),
        reason: end.reason,
        detail: end.detail,
        patch: end.patch,
        image: spec.image.clone(),
        history_check: spec.history_check.clone(),
        steps: turns.len() as u32,
        wall_ms: started.elapsed().as_millis() as u64,
        model_ms,
        sandbox_ms,
        context_tokens,
        messages,
        turns,
    }
}

/// The episode's container: `swerve.agent.<id>.<run_id>`, labelled with the run id, idle
/// until commands come.
async fn start(sandbox: &Sandbox, spec: &EpisodeSpec) -> swerve_sandbox::Result<Container> {
    let mut c = ContainerSpec::new(&spec.image, &spec.run_id, &spec.instance_id);
    c.limits = spec.container.clone();
    c.workdir = Some(spec.repo_dir.clone());
    c.name = Some(format!(
        "swerve.agent.{}.{}",
        spec.instance_id.to_lowercase(),
        spec.run_id
    ));
    c.env = ENV
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    sandbox.start(&c).await
}

impl Episode<'_> {
    fn limits(&self) -> &EpisodeLimits {
        &self.spec.limits
    }

    fn wall_left(&self) -> Option<Duration> {
        self.limits().wall.checked_sub(self.started.elapsed())
    }

    /// Tokens the next request will hold: the model's last count plus an estimate (4 bytes a
    /// token) of what was added since.
    fn next_context(&self) -> u64 {
        self.context_tokens + self.unsent_chars.div_ceil(4)
    }

    fn push(&mut self, message: Message) {
        self.unsent_chars += message.content.len() as u64
            + message
                .tool_calls
                .iter()
                .map(|c| c.arguments.len() as u64)
                .sum::<u64>();
        self.messages.push(message);
    }

    async fn run(&mut self, policy: &Arc<dyn Policy>) -> Ending {
        let mut format_errors = 0;
        loop {
            if self.turns.len() as u32 >= self.limits().steps {
                return ending(
                    EndReason::StepLimit,
                    format!("{} steps", self.limits().steps),
                );
            }
            let Some(left) = self.wall_left() else {
                return ending(
                    EndReason::Timeout,
                    format!("{} s", self.limits().wall.as_secs()),
                );
            };
            if self.next_context() >= self.limits().context_tokens {
                return ending(
                    EndReason::Context,
                    format!(
                        "the next request would hold about {} tokens (limit {})",
                        self.next_context(),
                        self.limits().context_tokens
                    ),
                );
            }
            let asked = Instant::now();
            let reply = match self.ask(policy, left).await {
                Ok(reply) => reply,
                Err(end) => return end,
            };
            let model_ms = asked.elapsed().as_millis() as u64;
            self.model_ms += model_ms;
            self.account(&reply);
            let mut turn = Turn {
                reply: reply.clone(),
                model_ms,
                actions: Vec::new(),
                observation: String::new(),
                format_error: false,
            };
            let mut assistant = Message::new("assistant", reply.content.clone());
            assistant.tool_calls = reply.tool_calls.clone();
            self.push(assistant);
            if self.context_tokens >= self.limits().context_tokens {
                self.turns.push(turn);
                return ending(
                    EndReason::Context,
                    format!(
                        "{} tokens after the reply (limit {})",
                        self.context_tokens,
                        self.limits().context_tokens
                    ),
                );
            }
            let outcome = match self.spec.protocol {
                Protocol::Text => self.text_turn(&reply, &mut turn).await,
                Protocol::Tools => self.tools_turn(&reply, &mut turn).await,
            };
            self.turns.push(turn);
            match outcome {
                TurnOutcome::Continue { format_error } => {
                    format_errors = if format_error { format_errors + 1 } else { 0 };
                    if format_errors >= FORMAT_ERRORS {
                        return ending(
                            EndReason::FormatErrors,
                            format!("{FORMAT_ERRORS} format errors in a row"),
                        );
                    }
                }
                TurnOutcome::End(end) => return end,
            }
            if let Some(end) = self.check_disk().await {
                return end;
            }
        }
    }

    /// The model's reply, within the wall time left.
    async fn ask(&self, policy: &Arc<dyn Policy>, left: Duration) -> Result<Reply, Ending> {
        let tools = (self.spec.protocol == Protocol::Tools).then(protocol::tool_schemas);
        let messages = self.messages.clone();
        let instance_id = self.spec.instance_id.clone();
        let policy = Arc::clone(policy);
        // The policy blocks (HTTP, or a model computing): on a blocking thread, so the other
        // episodes go on; past the wall time left the episode ends without waiting for it.
        let asked = tokio::task::spawn_blocking(move || {
            policy.reply(&PolicyRequest {
                instance_id: &instance_id,
                messages: &messages,
                tools: tools.as_ref(),
            })
        });
        let asked = match tokio::time::timeout(left, asked).await {
            Ok(Ok(asked)) => asked,
            Ok(Err(e)) => Err(PolicyError::Failed(format!(
                "the model's thread failed: {e}"
            ))),
            Err(_) => {
                return Err(ending(
                    EndReason::Timeout,
                    format!(
                        "{} s (waiting for the model's reply)",
                        self.limits().wall.as_secs()
                    ),
                ));
            }
        };
        if self.wall_left().is_none() {
            return Err(ending(
                EndReason::Timeout,
                format!(
                    "{} s (the model's reply came after {} s)",
                    self.limits().wall.as_secs(),
                    left.as_secs()
                ),
            ));
        }
        match asked {
            Ok(reply) => Ok(reply),
            Err(PolicyError::Context(detail)) => Err(ending(EndReason::Context, detail)),
            Err(PolicyError::Failed(detail)) => Err(ending(EndReason::EnvError, detail)),
        }
    }

    /// Counts the reply's tokens: the server's usage where given, else the estimate.
    fn account(&mut self, reply: &Reply) {
        match (reply.prompt_tokens, reply.completion_tokens) {
            (Some(prompt), completion) => {
                let completion = completion
                    .or(reply.token_ids.as_ref().map(|t| t.len() as u64))
                    .unwrap_or((reply.content.len() as u64).div_ceil(4));
                self.context_tokens = prompt + completion;
                self.unsent_chars = 0;
            }
            (None, _) => {
                let reply_chars = reply.content.len() as u64;
                self.context_tokens += (self.unsent_chars + reply_chars).div_ceil(4);
                self.unsent_chars = 0;
            }
        }
    }

    async fn text_turn(&mut self, reply: &Reply, turn: &mut Turn) -> TurnOutcome {
        let blocks = protocol::command_blocks(&reply.content);
        let [command] = blocks.as_slice() else {
            turn.format_error = true;
            turn.observation = protocol::format_error_message(blocks.len());
            self.push(Message::new("user", turn.observation.clone()));
            return TurnOutcome::Continue { format_error: true };
        };
        match self.bash(command).await.settle(turn) {
            Err(end) => end,
            Ok(observation) => {
                turn.observation = observation.clone();
                self.push(Message::new("user", observation));
                TurnOutcome::Continue {
                    format_error: false,
                }
            }
        }
    }

    async fn tools_turn(&mut self, reply: &Reply, turn: &mut Turn) -> TurnOutcome {
        if reply.tool_calls.is_empty() {
            turn.format_error = true;
            turn.observation = "Format error: your reply called no tool. Call exactly one of \
                                `bash`, `str_replace_editor`, `search` or `submit`."
                .to_owned();
            self.push(Message::new("user", turn.observation.clone()));
            return TurnOutcome::Continue { format_error: true };
        }
        let mut observations = Vec::new();
        for call in &reply.tool_calls {
            let args: Value = match serde_json::from_str(&call.arguments) {
                Ok(v @ Value::Object(_)) => v,
                _ => Value::Null,
            };
            let answer = if args.is_null() {
                Ran::Done {
                    observation: format!(
                        "Error: the arguments of `{}` are not a JSON object",
                        call.name
                    ),
                    action: record(&call.name, &call.arguments, None, 0, 0),
                    submitted: None,
                }
            } else {
                self.tool(&call.name, &args, &call.arguments).await
            };
            let observation = match answer.settle(turn) {
                Ok(observation) => observation,
                Err(end) => return end,
            };
            let steps_left = self
                .limits()
                .steps
                .saturating_sub(self.turns.len() as u32 + 1);
            let text = format!("{observation}\n[Steps remaining: {steps_left}]");
            observations.push(text.clone());
            let mut message = Message::new("tool", text);
            message.tool_call_id = Some(call.id.clone());
            self.push(message);
        }
        turn.observation = observations.join("\n\n");
        TurnOutcome::Continue {
            format_error: false,
        }
    }

    async fn tool(&mut self, name: &str, args: &Value, raw: &str) -> Ran {
        let timeout = self.command_timeout();
        let started = Instant::now();
        // The file tools need a running container (`bash` and `submit` see to it themselves).
        let note = match name {
            "str_replace_editor" | "search" => self.revived().await,
            _ => None,
        };
        let answered = match name {
            "bash" => {
                let Some(command) = args["command"].as_str() else {
                    return done_text("Error: `bash` needs a `command` string", name, raw);
                };
                let ran = self.bash(command).await;
                return match ran {
                    // `bash` in the tool protocol never submits by sentinel.
                    Ran::Done {
                        observation,
                        action,
                        ..
                    } => Ran::Done {
                        observation,
                        action,
                        submitted: None,
                    },
                    end => end,
                };
            }
            "str_replace_editor" => {
                let repo = self.spec.repo_dir.clone();
                self.editor
                    .edit(&self.container, &repo, args, timeout)
                    .await
            }
            "search" => Editor::search(&self.container, &self.spec.repo_dir, args, timeout).await,
            "submit" => return self.submit_diff(raw).await,
            other => Ok(ToolAnswer {
                text: format!(
                    "Error: no tool named {other:?}; the tools are bash, str_replace_editor, \
                     search and submit"
                ),
                ok: false,
            }),
        };
        let elapsed = started.elapsed().as_millis() as u64;
        self.sandbox_ms += elapsed;
        match answered {
            Ok(answer) => {
                let captured = Captured {
                    head: answer.text.into_bytes(),
                    ..Captured::default()
                };
                let (mut text, left_out) = protocol::render_output(&captured);
                if let Some(note) = note {
                    text = format!("{note}\n{text}");
                }
                let mut action = record(
                    name,
                    raw,
                    Some(if answer.ok { 0 } else { 1 }),
                    captured.total_bytes(),
                    elapsed,
                );
                action.elided_bytes = left_out;
                Ran::Done {
                    observation: text,
                    action,
                    submitted: None,
                }
            }
            Err(e) => self.recover(name, raw, &e).await,
        }
    }

    fn command_timeout(&self) -> Duration {
        let left = self.wall_left().unwrap_or(Duration::ZERO);
        self.limits()
            .command_timeout
            .min(left)
            .max(Duration::from_secs(1))
    }

    /// Runs a shell command as the agent's action.
    async fn bash(&mut self, command: &str) -> Ran {
        let timeout = self.command_timeout();
        let (out, note) = match self.in_session(command, timeout).await {
            Ok(done) => done,
            Err(e) => return self.recover("bash", command, &e).await,
        };
        self.sandbox_ms += out.elapsed.as_millis() as u64;
        let captured = Captured {
            head: out.output,
            tail: out.tail,
            elided: out.elided_bytes,
        };
        let mut action = record(
            "bash",
            command,
            out.exit_code,
            captured.total_bytes(),
            out.elapsed.as_millis() as u64,
        );
        action.timed_out = out.timed_out;
        if !out.timed_out
            && let Some(whole) = captured.whole()
            && let Some(patch) = protocol::submission(out.exit_code, &whole)
        {
            return Ran::Done {
                observation: String::new(),
                action,
                submitted: Some(patch),
            };
        }
        let (text, left_out) = protocol::render_output(&captured);
        action.elided_bytes = left_out;
        let mut observation = protocol::observation(
            out.exit_code,
            &text,
            out.timed_out.then_some(timeout.as_secs()),
        );
        if let Some(note) = note {
            observation.push('\n');
            observation.push_str(&note);
        }
        Ran::Done {
            observation,
            action,
            submitted: None,
        }
    }

    /// The tool protocol's `submit`: the repository's changes (`git add -A && git diff
    /// --cached`) are the patch.
    async fn submit_diff(&mut self, raw: &str) -> Ran {
        let diff = "git add -A && git -c core.fileMode=false diff --cached";
        let timeout = self.command_timeout();
        match self.in_session(diff, timeout).await.map(|(out, _)| out) {
            Ok(out) if out.success() && !out.truncated => Ran::Done {
                observation: String::new(),
                action: record(
                    "submit",
                    raw,
                    out.exit_code,
                    out.output.len() as u64,
                    out.elapsed.as_millis() as u64,
                ),
                submitted: Some(out.text()),
            },
            Ok(out) => done_text(
                &format!(
                    "Error: the diff of your changes could not be taken (exit {:?}{}): {}",
                    out.exit_code,
                    if out.truncated { ", over 4 MiB" } else { "" },
                    out.text().chars().take(2000).collect::<String>()
                ),
                "submit",
                raw,
            ),
            Err(e) => self.recover("submit", raw, &e).await,
        }
    }

    /// After an engine error: a container whose init was killed is started again (its files
    /// kept) and the agent told; anything else ends the episode as `env_error`.
    async fn recover(&mut self, tool: &str, input: &str, e: &swerve_sandbox::Error) -> Ran {
        match self.revived().await {
            Some(note) => Ran::Done {
                observation: format!("<returncode>killed</returncode>\n{note}"),
                action: record(tool, input, None, 0, 0),
                submitted: None,
            },
            None => Ran::End(ending(
                EndReason::EnvError,
                format!("{tool}: {}", crate::run::error_chain(e)),
            )),
        }
    }

    /// Starts the container again when a command stopped it; the note for the agent, or `None`
    /// when it was running (or could not be started, which the next command finds).
    async fn revived(&self) -> Option<String> {
        self.revived_within(Duration::ZERO).await
    }

    /// [`Episode::revived`], waiting up to `wait` for a container that is stopping to stop.
    async fn revived_within(&self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        let running = loop {
            match self.container.running().await {
                Ok(true) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => break other,
            }
        };
        match running {
            Ok(true) | Err(_) => None,
            Ok(false) => match self.container.revive().await {
                Ok(()) => Some(
                    "<warning>The command stopped the container (its init process ended). It \
                     was started again: files are kept, running processes are gone.</warning>"
                        .to_owned(),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the stopped container again");
                    None
                }
            },
        }
    }

    /// Runs an agent's command in the episode's shell session (`swerve_sandbox::Session`: a
    /// fresh `bash -c` per command, with the file-size limit and the agent's environment). A
    /// container stopped by an earlier command (its init killed) is started again first and a
    /// new session opened; a command that ends the session (it killed the session's shell, or
    /// the container's init) is not run again: the agent is told, and the next command gets a
    /// new session. Returns the note for the agent when one is due.
    async fn in_session(
        &mut self,
        command: &str,
        timeout: Duration,
    ) -> swerve_sandbox::Result<(swerve_sandbox::ExecOutput, Option<String>)> {
        let mut note = self.revived().await;
        if note.is_some() {
            self.session = None;
        }
        if self.session.is_none() {
            let spec = SessionSpec {
                env: ENV
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                workdir: Some(self.spec.repo_dir.clone()),
                file_bytes: Some(self.limits().file_bytes),
            };
            let opened = match self.container.session(&spec).await {
                Ok(session) => session,
                Err(e) => match self.revived_within(STOPPING).await {
                    Some(again) => {
                        note = Some(again);
                        self.container.session(&spec).await?
                    }
                    None => return Err(e),
                },
            };
            self.session = Some(opened);
        }
        let session = self.session.as_mut().expect("opened above");
        let started = Instant::now();
        match session
            .run(&self.container, command, timeout, HEAD_BYTES, TAIL_BYTES)
            .await
        {
            Ok(out) => Ok((out, note)),
            Err(e) => {
                tracing::debug!(error = %e, "the agent's shell session ended");
                self.session = None;
                let why = self
                    .revived_within(Duration::from_secs(2))
                    .await
                    .unwrap_or_else(|| {
                        "<warning>The command ended the shell that runs commands; a new one runs \
                         the next command.</warning>"
                            .to_owned()
                    });
                let ended = swerve_sandbox::ExecOutput {
                    exit_code: None,
                    output: Vec::new(),
                    timed_out: false,
                    truncated: false,
                    tail: Vec::new(),
                    elided_bytes: 0,
                    elapsed: started.elapsed(),
                };
                Ok((ended, Some(why)))
            }
        }
    }

    /// Ends the episode when the container's writes are past the disk limit.
    async fn check_disk(&self) -> Option<Ending> {
        let limit = self.limits().disk_bytes;
        match self.container.written_bytes().await {
            Ok(Some(written)) if written > limit => Some(ending(
                EndReason::DiskLimit,
                format!("{written} bytes written (limit {limit})"),
            )),
            _ => None,
        }
    }
}

/// How long a container that is stopping is given to stop before it is started again.
const STOPPING: Duration = Duration::from_secs(10);

impl Ran {
    /// Records the action in `turn`; the observation to answer with, or how the turn ends the
    /// episode (a submission, or the episode's end).
    fn settle(self, turn: &mut Turn) -> Result<String, TurnOutcome> {
        match self {
            Ran::End(end) => Err(TurnOutcome::End(end)),
            Ran::Done {
                observation,
                action,
                submitted,
            } => {
                turn.actions.push(action);
                match submitted {
                    Some(patch) => Err(TurnOutcome::End(Ending {
                        reason: EndReason::Submitted,
                        detail: None,
                        patch,
                    })),
                    None => Ok(observation),
                }
            }
        }
    }
}

/// What a turn left.
enum TurnOutcome {
    Continue { format_error: bool },
    End(Ending),
}

fn record(tool: &str, input: &str, returncode: Option<i64>, bytes: u64, elapsed_ms: u64) -> Action {
    Action {
        tool: tool.to_owned(),
        input: input.to_owned(),
        returncode,
        timed_out: false,
        output_bytes: bytes,
        elided_bytes: 0,
        elapsed_ms,
    }
}

fn done_text(text: &str, tool: &str, raw: &str) -> Ran {
    Ran::Done {
        observation: text.to_owned(),
        action: record(tool, raw, Some(1), text.len() as u64, 0),
        submitted: None,
    }
}
