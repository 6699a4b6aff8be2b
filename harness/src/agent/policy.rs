//! Who answers each turn: a [`Policy`]. [`Endpoint`] is any OpenAI-compatible server (vLLM,
//! SGLang, llama.cpp, `trainer serve`, hosted APIs); [`Scripted`] replays recorded replies (the
//! tests' gold and empty episodes, and re-running a recorded trajectory). The trainer implements
//! the trait for its own model in-process.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::trajectory::{Message, Reply, ToolCall};

/// What a turn asks the model.
pub struct PolicyRequest<'a> {
    /// The task.
    pub instance_id: &'a str,
    /// The conversation so far.
    pub messages: &'a [Message],
    /// OpenAI's `tools` (the tool-call protocol), else `None`.
    pub tools: Option<&'a Value>,
}

/// Why a policy gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The conversation is longer than the model takes: the episode ends as `context`.
    #[error("the conversation is over the model's context: {0}")]
    Context(String),
    /// Anything else: the episode ends as `env_error`.
    #[error("{0}")]
    Failed(String),
}

/// Answers the turns of episodes; one policy serves every episode of a run, from several
/// threads at once.
pub trait Policy: Send + Sync {
    /// A fingerprint of everything that decides the replies to `instance_id`'s episode (model,
    /// sampling settings, the script's replies for it): part of its trajectory's content key.
    fn fingerprint(&self, instance_id: &str) -> String;
    /// The model's name for the predictions' `model_name_or_path`.
    fn model_name(&self) -> String;
    /// The reply to `request`.
    fn reply(&self, request: &PolicyRequest<'_>) -> Result<Reply, PolicyError>;
}

/// Sampling settings sent with every request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// Temperature (`None`: the server's default).
    pub temperature: Option<f64>,
    /// Nucleus mass (`None`: the server's default).
    pub top_p: Option<f64>,
    /// Most tokens per reply (`None`: the server's default).
    pub max_tokens: Option<u64>,
    /// Seed (`None`: none sent).
    pub seed: Option<u64>,
    /// Ask for sampled token ids and their log-probs (`logprobs` with vLLM's
    /// `return_tokens_as_token_ids`).
    pub token_ids: bool,
}

/// An OpenAI-compatible chat completions endpoint.
pub struct Endpoint {
    url: String,
    model: String,
    api_key: Option<String>,
    sampling: Sampling,
    agent: ureq::Agent,
}

impl Endpoint {
    /// A client of `url` (the API's base, e.g. `http://127.0.0.1:8000/v1`) for `model`, with a
    /// bearer token when `api_key` is given and `timeout` per request.
    pub fn new(
        url: &str,
        model: &str,
        api_key: Option<String>,
        sampling: Sampling,
        timeout: Duration,
    ) -> Endpoint {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Endpoint {
            url: url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key,
            sampling,
            agent: ureq::Agent::new_with_config(config),
        }
    }

    fn body(&self, request: &PolicyRequest<'_>) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(Message::openai_json).collect();
        let mut body = json!({"model": self.model, "messages": messages});
        let s = &self.sampling;
        if let Some(t) = s.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = s.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(n) = s.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(seed) = s.seed {
            body["seed"] = json!(seed);
        }
        if s.token_ids {
            body["logprobs"] = json!(true);
            body["return_tokens_as_token_ids"] = json!(true);
        }
        if let Some(tools) = request.tools {
            body["tools"] = tools.clone();
        }
        body
    }
}

/// Whether an error answer says the prompt is over the model's context (vLLM, SGLang,
/// llama.cpp and OpenAI word it differently; all name the context or its length).
fn is_context_error(status: u16, body: &str) -> bool {
    let body = body.to_lowercase();
    (status == 400 || status == 413)
        && (body.contains("context length")
            || body.contains("context_length")
            || body.contains("maximum context")
            || body.contains("context window")
            || body.contains("exceed_context_size"))
}

/// The reply in an OpenAI chat completion: text, tool calls, token ids and log-probs (vLLM's
/// `token_id:N` tokens), the finish reason and usage.
pub(crate) fn parse_completion(reply: &Value) -> Result<Reply, String> {
    let choice = &reply["choices"][0];
    let message = &choice["message"];
    if !message.is_object() {
        return Err("the reply has no choices[0].message".to_owned());
    }
    let content = message["content"].as_str().unwrap_or_default().to_owned();
    let mut tool_calls = Vec::new();
    for (i, call) in message["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let function = &call["function"];
        let name = function["name"]
            .as_str()
            .ok_or_else(|| format!("tool_calls[{i}] has no function.name"))?;
        let arguments = match &function["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => "{}".to_owned(),
            other => other.to_string(),
        };
        tool_calls.push(ToolCall {
            id: call["id"]
                .as_str()
                .map_or_else(|| format!("call_{i}"), str::to_owned),
            name: name.to_owned(),
            arguments,
        });
    }
    let (token_ids, logprobs) = match choice["logprobs"]["content"].as_array() {
        Some(entries) => {
            let ids: Option<Vec<u32>> = entries
                .iter()
                .map(|e| {
                    e["token"]
                        .as_str()
                        .and_then(|t| t.strip_prefix("token_id:"))
                        .and_then(|n| n.parse().ok())
                })
                .collect();
            let lps: Option<Vec<f64>> = entries.iter().map(|e| e["logprob"].as_f64()).collect();
            (ids, lps)
        }
        None => (None, None),
    };
    Ok(Reply {
        content,
        tool_calls,
        token_ids,
        logprobs,
        finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
        prompt_tokens: reply["usage"]["prompt_tokens"].as_u64(),
        completion_tokens: reply["usage"]["completion_tokens"].as_u64(),
    })
}

impl Policy for Endpoint {
    fn fingerprint(&self, _instance_id: &str) -> String {
        format!(
            "endpoint {} model {} sampling {:?}",
            self.url, self.model, self.sampling
        )
    }

    fn model_name(&self) -> String {
        self.model.clone()
    }

    fn reply(&self, request: &PolicyRequest<'_>) -> Result<Reply, PolicyError> {
        let url = format!("{}/chat/completions", self.url);
        let mut http = self.agent.post(&url);
        if let Some(key) = &self.api_key {
            http = http.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = http
            .send_json(self.body(request))
            .map_err(|e| PolicyError::Failed(format!("no answer from {url}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| PolicyError::Failed(format!("cannot read the answer of {url}: {e}")))?;
        if status >= 400 {
            let short: String = text.chars().take(500).collect();
            return Err(if is_context_error(status, &text) {
                PolicyError::Context(format!("{url} answered {status}: {short}"))
            } else {
                PolicyError::Failed(format!("{url} answered HTTP status {status}: {short}"))
            });
        }
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| PolicyError::Failed(format!("the answer of {url} is not JSON: {e}")))?;
        parse_completion(&value).map_err(|e| PolicyError::Failed(format!("{url}: {e}")))
    }
}

/// Replies recorded per task, given in order whatever the observations say. A file of JSON
/// lines `{"instance_id": ID, "replies": [REPLY, ...]}`, each reply a string (the text
/// protocol's reply) or an object `{"content": TEXT, "tool_calls": [{"name": N, "arguments":
/// {...}}]}`. A task whose replies run out ends as `env_error`.
pub struct Scripted {
    name: String,
    replies: BTreeMap<String, Vec<Reply>>,
}

impl Scripted {
    /// Reads a script file; errors name the file, the line and the field.
    pub fn read(path: &Path, name: &str) -> Result<Scripted, String> {
        let text = fs_err::read_to_string(path).map_err(|e| e.to_string())?;
        let mut replies = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = || format!("{}:{}", path.display(), n + 1);
            let value: Value =
                serde_json::from_str(line).map_err(|e| format!("{}: not JSON: {e}", at()))?;
            let id = value["instance_id"]
                .as_str()
                .ok_or_else(|| format!("{}: no `instance_id` string", at()))?;
            let list = value["replies"]
                .as_array()
                .ok_or_else(|| format!("{}: no `replies` list", at()))?;
            let parsed = list
                .iter()
                .enumerate()
                .map(|(i, r)| scripted_reply(r).map_err(|e| format!("{}: replies[{i}]: {e}", at())))
                .collect::<Result<Vec<_>, _>>()?;
            replies.insert(id.to_owned(), parsed);
        }
        Ok(Scripted {
            name: name.to_owned(),
            replies,
        })
    }
}

fn scripted_reply(value: &Value) -> Result<Reply, String> {
    match value {
        Value::String(text) => Ok(Reply {
            content: text.clone(),
            finish_reason: Some("stop".to_owned()),
            ..Reply::default()
        }),
        Value::Object(map) => {
            let content = map
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut calls = Vec::new();
            for (i, call) in map
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let name = call["name"]
                    .as_str()
                    .ok_or_else(|| format!("tool_calls[{i}]: no `name`"))?;
                calls.push(ToolCall {
                    id: format!("call_{i}"),
                    name: name.to_owned(),
                    arguments: call
                        .get("arguments")
                        .map_or_else(|| "{}".to_owned(), Value::to_string),
                });
            }
            Ok(Reply {
                content: content.to_owned(),
                finish_reason: Some(
                    if calls.is_empty() {
                        "stop"
                    } else {
                        "tool_calls"
                    }
                    .to_owned(),
                ),
                tool_calls: calls,
                ..Reply::default()
            })
        }
        _ => Err("a reply is a string or an object".to_owned()),
    }
}

impl Policy for Scripted {
    fn fingerprint(&self, instance_id: &str) -> String {
        let replies = self
            .replies
            .get(instance_id)
            .map(|r| serde_json::to_string(r).expect("json"));
        format!("script {}", replies.unwrap_or_default())
    }

    fn model_name(&self) -> String {
        self.name.clone()
    }

    fn reply(&self, request: &PolicyRequest<'_>) -> Result<Reply, PolicyError> {
        let list = self.replies.get(request.instance_id).ok_or_else(|| {
            PolicyError::Failed(format!(
                "the script has no replies for {}",
                request.instance_id
            ))
        })?;
        // The turn is the number of assistant messages so far: a resumed or repeated episode
        // replays from its start.
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == "assistant")
            .count();
        list.get(turn).cloned().ok_or_else(|| {
            PolicyError::Failed(format!(
                "the script's {} replies for {} are used up",
                list.len(),
                request.instance_id
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vllm_completion_gives_text_tool_calls_ids_and_logprobs() {
        let reply = json!({
            "choices": [{
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}
                ]},
                "logprobs": {"content": [
                    {"token": "token_id:151", "logprob": -0.5},
                    {"token": "token_id:7", "logprob": -1.25}
                ]},
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 120, "completion_tokens": 2}
        });
        let r = parse_completion(&reply).expect("parses");
        assert_eq!(r.content, "");
        assert_eq!(r.tool_calls[0].name, "bash");
        assert_eq!(r.tool_calls[0].arguments, "{\"command\": \"ls\"}");
        assert_eq!(r.token_ids, Some(vec![151, 7]));
        assert_eq!(r.logprobs, Some(vec![-0.5, -1.25]));
        assert_eq!((r.prompt_tokens, r.completion_tokens), (Some(120), Some(2)));
        // Plain tokens (no vLLM flag): log-probs kept, no ids.
        let plain = json!({"choices": [{"message": {"content": "hi"},
            "logprobs": {"content": [{"token": "hi", "logprob": -0.1}]}}]});
        let r = parse_completion(&plain).expect("parses");
        assert_eq!((r.token_ids, r.logprobs), (None, Some(vec![-0.1])));
        assert!(parse_completion(&json!({"error": "x"})).is_err());
    }

    #[test]
    fn context_errors_are_told_apart() {
        assert!(is_context_error(
            400,
            "This model's maximum context length is 4096 tokens"
        ));
        assert!(is_context_error(
            400,
            "{\"type\":\"exceed_context_size_error\"}"
        ));
        assert!(!is_context_error(500, "maximum context length"));
        assert!(!is_context_error(400, "invalid temperature"));
    }
}
