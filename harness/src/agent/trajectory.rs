//! What an episode leaves: its [`Trajectory`] (every message, reply, command and observation,
//! with timings, token ids and log-probs where the model gave them) and how it ended
//! ([`EndReason`]). Written whole as `trajectory.json` when the episode ends; a rerun reuses one
//! whose key matches.

use serde::{Deserialize, Serialize};

/// Why an episode ended. Trainers decide from it what the episode is worth: `submitted` and
/// `format_errors` are the model's doing and graded; `step_limit`, `timeout` and `context` are
/// truncations (masked out of the loss by compact filtering); `env_error` is swerve's or the
/// engine's failure, dropped and never rewarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The agent submitted (the text protocol's sentinel, or the `submit` tool).
    Submitted,
    /// The step limit was reached without a submission.
    StepLimit,
    /// The episode's wall-clock limit ran out.
    Timeout,
    /// The conversation reached the context-token limit (or the model refused it as too long).
    Context,
    /// Three format errors in a row (a reply with no action, or with several).
    FormatErrors,
    /// The agent's writes in the container went past the disk limit.
    DiskLimit,
    /// The container, the engine or the model's server failed.
    EnvError,
}

impl EndReason {
    /// Every reason, in the order summaries list them.
    pub const ALL: [EndReason; 7] = [
        EndReason::Submitted,
        EndReason::StepLimit,
        EndReason::Timeout,
        EndReason::Context,
        EndReason::FormatErrors,
        EndReason::DiskLimit,
        EndReason::EnvError,
    ];

    /// The name written in trajectories and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Submitted => "submitted",
            EndReason::StepLimit => "step_limit",
            EndReason::Timeout => "timeout",
            EndReason::Context => "context",
            EndReason::FormatErrors => "format_errors",
            EndReason::DiskLimit => "disk_limit",
            EndReason::EnvError => "env_error",
        }
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A chat message as OpenAI's API carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (may be empty for an assistant message that only calls tools).
    pub content: String,
    /// The tools an assistant message calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message of `role` with `content`.
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_owned(),
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// The message as OpenAI's chat API (and chat templates) take it: `role`, `content`, and
    /// `tool_calls` (`{id, type: function, function: {name, arguments}}`) or `tool_call_id`.
    pub fn openai_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"role": self.role, "content": self.content});
        if !self.tool_calls.is_empty() {
            v["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| {
                    serde_json::json!({"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
        }
        if let Some(id) = &self.tool_call_id {
            v["tool_call_id"] = serde_json::json!(id);
        }
        v
    }
}

/// One tool call of a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id (answered by a `tool` message with the same id).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments, a JSON object as text (as the API carries them).
    pub arguments: String,
}

/// What the model answered for one turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The reply's text.
    pub content: String,
    /// Tool calls (the tool-call protocol).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The sampled token ids, when the model gives them (vLLM's `return_tokens_as_token_ids`,
    /// swerve's own model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
    /// The sampled tokens' log-probabilities, when the model gives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<f64>>,
    /// Why the model stopped (`stop`, `length`, `tool_calls`), as the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Tokens of the prompt this reply answered, as the server counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Tokens of the reply, as the server counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
}

/// One command run in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// The tool (`bash` for the text protocol) and what it was asked.
    pub tool: String,
    /// The command or the tool's arguments.
    pub input: String,
    /// The exit status (`None`: killed, or no process ran).
    pub returncode: Option<i64>,
    /// The per-command limit ran out and the command was killed.
    pub timed_out: bool,
    /// Bytes the command printed.
    pub output_bytes: u64,
    /// Bytes left out of the observation (between its head and tail).
    pub elided_bytes: u64,
    /// How long it ran, in milliseconds.
    pub elapsed_ms: u64,
}

/// One turn: the model's reply and what the environment answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The reply.
    pub reply: Reply,
    /// Time the model took, in milliseconds.
    pub model_ms: u64,
    /// The commands the reply asked for (none after a format error).
    pub actions: Vec<Action>,
    /// What the agent was told back (empty when the turn ended the episode).
    pub observation: String,
    /// The reply broke the protocol's format.
    pub format_error: bool,
}

/// A whole episode, as `trajectory.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// The task.
    pub instance_id: String,
    /// The model's name (the predictions' `model_name_or_path`).
    pub model: String,
    /// `text` or `tools`.
    pub protocol: String,
    /// The content key: image, protocol, model settings, limits and prompt. A rerun with the
    /// same key reuses this file.
    pub key: String,
    /// How it ended.
    pub reason: EndReason,
    /// What `reason` came from, for `env_error` and limits (the error's chain, the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The submitted patch (empty unless submitted).
    pub patch: String,
    /// The image the agent ran in (after the history check).
    pub image: String,
    /// What the history check found, when it changed the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_check: Option<String>,
    /// Model replies.
    pub steps: u32,
    /// The whole episode, in milliseconds.
    pub wall_ms: u64,
    /// Time in the model, in milliseconds.
    pub model_ms: u64,
    /// Time in the sandbox (commands and tools), in milliseconds.
    pub sandbox_ms: u64,
    /// The last request's prompt tokens plus its reply's (the context used), where known.
    pub context_tokens: u64,
    /// The conversation as the model saw it last (system and task prompts, replies,
    /// observations).
    pub messages: Vec<Message>,
    /// Turn by turn.
    pub turns: Vec<Turn>,
}
