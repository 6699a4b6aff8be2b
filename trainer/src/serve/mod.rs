//! `trainer serve`: a checkpoint behind the OpenAI-compatible HTTP API that agents and their
//! frameworks speak (`/v1/models`, `/v1/chat/completions` with the checkpoint's own chat
//! template, `/v1/completions`), with `n`, `temperature`, `top_p`, `top_k`, `min_p`,
//! `repetition_penalty`, `max_tokens`, `stop`, `seed`, `logprobs`/`top_logprobs`, and vLLM's
//! `return_tokens_as_token_ids` and `return_token_ids` for trainers that need the sampled ids
//! (`docs/agent.md`).
//!
//! The HTTP side runs on tokio (axum); the model runs on a thread of its own
//! (`worker.rs`), which batches the requests waiting when it is free. A prompt plus
//! `max_tokens` past the model's context is answered 400 with the context's length in the
//! message, as vLLM words it, so clients end an episode as over its context. With `tools`, the
//! template shows them to the model (when it reads `tools`) and the reply's Hermes-format
//! `<tool_call>` blocks become the answer's `tool_calls`. Not (yet): streamed answers,
//! continuous batching.

mod params;
mod worker;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::device::DeviceSpec;
use crate::error::{Error, Result};
use crate::model::CausalLm;
use crate::prompt::chat_template::ChatTemplate;
use crate::tokenizer::Tokenizer;
use params::{ApiError, Params};
use worker::{Choice, Job, Worker};

/// A validated `trainer serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The checkpoint folder (`config.json`, weights, `tokenizer.json`, and its chat template
    /// for `/v1/chat/completions`).
    pub model: PathBuf,
    /// The model's name in the API (requests must name it).
    pub served_name: String,
    /// Where to listen (port 0: one the system picks; the URL is printed).
    pub address: SocketAddr,
    /// Most sequences sampled in one batch.
    pub max_batch: usize,
    /// The device the model runs on.
    pub device: DeviceSpec,
}

/// What the handlers share.
struct App {
    name: String,
    context: usize,
    created: u64,
    tokenizer: Arc<Tokenizer>,
    template: Option<ChatTemplate>,
    jobs: std::sync::mpsc::Sender<Job>,
    next_id: AtomicU64,
}

/// Serves until the process is stopped; prints `http://ADDRESS/v1` on stdout once listening.
pub fn serve(config: &ServeConfig) -> Result<()> {
    let dir = crate::commands::model_dir(&config.model)?;
    let tokenizer = Arc::new(Tokenizer::from_file(&dir.join("tokenizer.json"))?);
    let template = ChatTemplate::from_checkpoint(dir)?;
    let mut eos: Vec<u32> = Vec::new();
    if let Some(token) = template.as_ref().and_then(ChatTemplate::eos_token) {
        eos.extend(tokenizer.token_id(token));
    }
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    let (ready, loaded) = std::sync::mpsc::channel::<Result<usize>>();
    let (device, max_batch, model_dir) = (config.device, config.max_batch, dir.to_path_buf());
    let worker_tokenizer = Arc::clone(&tokenizer);
    std::thread::Builder::new()
        .name("swerve-serve-model".to_owned())
        .spawn(move || {
            let run = || -> Result<()> {
                crate::on_device!(device, |dev| {
                    let model = match CausalLm::<f32, _>::load(&model_dir, dev) {
                        Ok(model) => model,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return Ok(());
                        }
                    };
                    let mut eos = eos;
                    eos.extend(model.config.eos_token_ids.iter().copied());
                    eos.dedup();
                    let _ = ready.send(Ok(model.config.max_position_embeddings));
                    let pad = model.config.eos_token_ids.first().copied().unwrap_or(0);
                    Worker {
                        model: &model,
                        tokenizer: &worker_tokenizer,
                        eos,
                        pad,
                        max_batch,
                    }
                    .run(&queue);
                    Ok(())
                })
            };
            if let Err(e) = run() {
                tracing::error!(error = %e, "the model's thread stopped");
            }
        })
        .map_err(|source| Error::Serve {
            address: config.address.to_string(),
            source,
        })?;
    let context = loaded.recv().map_err(|_| Error::Serve {
        address: config.address.to_string(),
        source: std::io::Error::other("the model's thread ended before the model was loaded"),
    })??;
    let app = Arc::new(App {
        name: config.served_name.clone(),
        context,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        tokenizer,
        template,
        jobs,
        next_id: AtomicU64::new(1),
    });
    let router = axum::Router::new()
        .route("/health", get(|| async { "" }))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .with_state(app);
    let serve_error = |source| Error::Serve {
        address: config.address.to_string(),
        source,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(serve_error)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.address)
            .await
            .map_err(serve_error)?;
        let bound = listener.local_addr().map_err(serve_error)?;
        println!("http://{bound}/v1");
        tracing::info!(%bound, model = %config.served_name, "serving");
        axum::serve(listener, router).await.map_err(serve_error)
    })
}

/// An answer, or its error with the error's status.
fn respond(answer: std::result::Result<Value, ApiError>) -> Response {
    match answer {
        Ok(v) => Json(v).into_response(),
        Err(e) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            (status, Json(e.body())).into_response()
        }
    }
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({"object": "list", "data": [{
        "id": app.name, "object": "model", "created": app.created, "owned_by": "swerve",
        "root": app.name, "max_model_len": app.context,
    }]}))
}

/// The body as JSON, or a 400 answer.
fn json_body(body: &[u8]) -> std::result::Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid("body", format!("the body is not JSON: {e}")))
}

impl App {
    fn check_model(&self, body: &Value) -> std::result::Result<(), ApiError> {
        match body.get("model").and_then(Value::as_str) {
            Some(name) if name == self.name => Ok(()),
            Some(name) => Err(ApiError {
                status: 404,
                message: format!(
                    "The model `{name}` does not exist; this server serves `{}`",
                    self.name
                ),
                param: Some("model".to_owned()),
                kind: "NotFoundError",
            }),
            None => Err(ApiError::invalid("model", "`model` is required")),
        }
    }

    /// The request's new-token limit, refused when the prompt and it exceed the context.
    fn max_new_tokens(
        &self,
        prompt: usize,
        params: &Params,
    ) -> std::result::Result<usize, ApiError> {
        let wanted = params
            .max_tokens
            .unwrap_or(self.context.saturating_sub(prompt));
        if wanted == 0 || prompt + wanted > self.context {
            return Err(ApiError::invalid(
                "messages",
                format!(
                    "This model's maximum context length is {} tokens. However, you requested {} \
                     tokens ({prompt} in the prompt, {wanted} for the completion).",
                    self.context,
                    prompt + wanted.max(1)
                ),
            ));
        }
        Ok(wanted)
    }

    /// Runs `prompt` through the model's thread.
    async fn sample(
        &self,
        prompt: Vec<u32>,
        params: Params,
    ) -> std::result::Result<Vec<Choice>, ApiError> {
        let max_new_tokens = self.max_new_tokens(prompt.len(), &params)?;
        let seed = params.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                ^ self.next_id.load(Ordering::Relaxed).rotate_left(32)
        });
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            prompt,
            params,
            max_new_tokens,
            seed,
            reply,
        };
        let internal = |message: String| ApiError {
            status: 500,
            message,
            param: None,
            kind: "InternalServerError",
        };
        self.jobs
            .send(job)
            .map_err(|_| internal("the model's thread has stopped".to_owned()))?;
        answer
            .await
            .map_err(|_| internal("the model's thread dropped the request".to_owned()))?
            .map_err(internal)
    }

    /// Samples `prompt` and answers with the choices `render` writes (each with its token ids
    /// when asked) in the envelope: id, object, model, token counts (and the prompt's ids when
    /// asked).
    async fn complete(
        &self,
        prompt: Vec<u32>,
        params: &Params,
        (id_prefix, object): (&str, &str),
        render: impl Fn(usize, &Choice) -> Value,
    ) -> std::result::Result<Value, ApiError> {
        let prompt_tokens = prompt.len();
        let prompt_ids = params.return_token_ids.then(|| prompt.clone());
        let choices = self.sample(prompt, params.clone()).await?;
        let completion_tokens: usize = choices.iter().map(|c| c.tokens.len()).sum();
        let choices: Vec<Value> = choices
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut choice = render(i, c);
                if params.return_token_ids {
                    choice["token_ids"] = json!(c.tokens);
                }
                choice
            })
            .collect();
        let mut answer = json!({
            "id": format!("{id_prefix}-{}", self.next_id.fetch_add(1, Ordering::Relaxed)),
            "object": object,
            "created": self.created,
            "model": self.name,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        });
        if let Some(ids) = prompt_ids {
            answer["prompt_token_ids"] = json!(ids);
        }
        Ok(answer)
    }

    /// A token as log-probs name it: `token_id:N` when asked, else its text.
    fn token_text(&self, id: u32, params: &Params) -> String {
        if params.tokens_as_ids {
            format!("token_id:{id}")
        } else {
            self.tokenizer.decode(&[id], false).unwrap_or_default()
        }
    }
}

/// An error with its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// A message's text: a string, or the text parts of a list of parts.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p.get("type").and_then(Value::as_str) {
                Some("text") => p.get("text").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|t| t.concat()),
        _ => None,
    }
}

async fn chat(State(app): State<Arc<App>>, body: axum::body::Bytes) -> Response {
    respond(chat_answer(&app, &body).await)
}

async fn chat_answer(app: &App, body: &[u8]) -> std::result::Result<Value, ApiError> {
    let body = json_body(body)?;
    app.check_model(&body)?;
    let params = Params::read(&body, true)?;
    let Some(template) = &app.template else {
        return Err(ApiError::invalid(
            "messages",
            "the model has no chat template (chat_template.jinja, or chat_template in \
             tokenizer_config.json): use /v1/completions",
        ));
    };
    let tools = body
        .get("tools")
        .filter(|t| t.as_array().is_some_and(|t| !t.is_empty()));
    if tools.is_some() && !template.takes_tools() {
        return Err(ApiError::invalid(
            "tools",
            "the model's chat template shows no tools to the model: send the request without \
             `tools`",
        ));
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err(ApiError::invalid("messages", "`messages` must be a list"));
    };
    let mut turns = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        let content = content_text(m.get("content").unwrap_or(&Value::Null));
        match (role, content) {
            (Some(_), Some(content)) => {
                let mut turn = m.clone();
                turn["content"] = json!(content);
                turns.push(turn);
            }
            _ => {
                return Err(ApiError::invalid(
                    "messages",
                    format!("messages[{i}] needs a `role` and a text `content`"),
                ));
            }
        }
    }
    let add_generation_prompt = body
        .get("add_generation_prompt")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let text = template
        .render_chat(&turns, tools, add_generation_prompt)
        .map_err(|e| ApiError::invalid("messages", chain(&e)))?;
    let prompt = app
        .tokenizer
        .encode(&text, false)
        .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
    app.complete(prompt, &params, ("chatcmpl", "chat.completion"), |i, c| {
        let (content, calls) = if tools.is_some() {
            crate::prompt::tool_calls::parse(&c.text)
        } else {
            (c.text.clone(), Vec::new())
        };
        let mut message = json!({"role": "assistant", "content": content});
        let mut finish_reason = c.finish_reason;
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
            finish_reason = "tool_calls";
        }
        json!({
            "index": i,
            "message": message,
            "logprobs": chat_logprobs(app, c, &params),
            "finish_reason": finish_reason,
        })
    })
    .await
}

fn chat_logprobs(app: &App, c: &Choice, params: &Params) -> Value {
    if !params.logprobs {
        return Value::Null;
    }
    let entry = |id: u32, lp: f64| {
        let token = app.token_text(id, params);
        json!({"token": token, "logprob": lp, "bytes": token.as_bytes()})
    };
    let content: Vec<Value> = c
        .tokens
        .iter()
        .zip(&c.logprobs)
        .enumerate()
        .map(|(i, (&id, &lp))| {
            let mut e = entry(id, lp);
            e["top_logprobs"] = c
                .top
                .get(i)
                .map(|best| best.iter().map(|&(t, l)| entry(t, l)).collect())
                .unwrap_or_else(|| json!([]));
            e
        })
        .collect();
    json!({"content": content})
}

async fn completions(State(app): State<Arc<App>>, body: axum::body::Bytes) -> Response {
    respond(completions_answer(&app, &body).await)
}

async fn completions_answer(app: &App, body: &[u8]) -> std::result::Result<Value, ApiError> {
    let body = json_body(body)?;
    app.check_model(&body)?;
    let params = Params::read(&body, false)?;
    let prompt = match body.get("prompt") {
        Some(Value::String(text)) => app
            .tokenizer
            .encode(text, true)
            .map_err(|e| ApiError::invalid("prompt", e.to_string()))?,
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => app
            .tokenizer
            .encode(items[0].as_str().expect("string"), true)
            .map_err(|e| ApiError::invalid("prompt", e.to_string()))?,
        Some(Value::Array(items)) if !items.is_empty() && items.iter().all(Value::is_u64) => items
            .iter()
            .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| ApiError::invalid("prompt", "a token id is out of range"))?,
        _ => {
            return Err(ApiError::invalid(
                "prompt",
                "`prompt` must be a string, a list of one string, or a list of token ids",
            ));
        }
    };
    if prompt.is_empty() {
        return Err(ApiError::invalid("prompt", "the prompt is empty"));
    }
    let vocab = app.tokenizer.vocab_size();
    if let Some(bad) = prompt.iter().find(|&&t| t as usize >= vocab) {
        return Err(ApiError::invalid(
            "prompt",
            format!("token id {bad} is past the vocabulary ({vocab})"),
        ));
    }
    app.complete(prompt, &params, ("cmpl", "text_completion"), |i, c| {
        let logprobs = if params.logprobs {
            let tokens: Vec<String> = c
                .tokens
                .iter()
                .map(|&t| app.token_text(t, &params))
                .collect();
            let mut offset = 0;
            let offsets: Vec<usize> = tokens
                .iter()
                .map(|t| {
                    let at = offset;
                    offset += t.len();
                    at
                })
                .collect();
            let top: Vec<Value> = c
                .top
                .iter()
                .map(|best| {
                    let map: serde_json::Map<String, Value> = best
                        .iter()
                        .map(|&(t, l)| (app.token_text(t, &params), json!(l)))
                        .collect();
                    Value::Object(map)
                })
                .collect();
            json!({"tokens": tokens, "token_logprobs": c.logprobs,
                   "top_logprobs": if params.top_logprobs > 0 { json!(top) } else { Value::Null },
                   "text_offset": offsets})
        } else {
            Value::Null
        };
        json!({"index": i, "text": c.text, "logprobs": logprobs,
               "finish_reason": c.finish_reason})
    })
    .await
}
