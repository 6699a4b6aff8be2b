//! The optional chat model behind an OpenAI-compatible endpoint (what users run locally: vLLM,
//! SGLang, llama.cpp's server), for relevant files (`curate run --relevant-endpoint`) and for
//! environment recipes the rules cannot make (`curate validate --setup-endpoint`,
//! `crate::setup`). For relevant files it is given the issue, the edited paths and candidate
//! paths, and answers with paths, one per line. Its answer is a suggestion only:
//! `crate::relevant` validates every path (exists at the base, text, not edited) and falls
//! back to the deterministic rule when the endpoint fails or suggests nothing usable.
//! Requests use temperature 0 and a fixed seed, so a deterministic server gives stable output.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// Where the model is; `[relevant_endpoint]` in the config file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Base URL of the API, e.g. `http://127.0.0.1:8000/v1` (`/chat/completions` is appended).
    pub url: String,
    /// Model name sent in the request.
    pub model: String,
    /// Environment variable holding a bearer token, if the server wants one. Default none.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Per-request timeout in seconds. Default 120.
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// Most candidate paths listed in the prompt. Default 400.
    #[serde(default = "default_max_paths")]
    pub max_paths: usize,
}

impl EndpointConfig {
    /// `url` and `model` with the other fields at their defaults.
    pub fn new(url: &str, model: &str) -> EndpointConfig {
        EndpointConfig {
            url: url.to_owned(),
            model: model.to_owned(),
            api_key_env: None,
            timeout_s: default_timeout(),
            max_paths: default_max_paths(),
        }
    }
}

fn default_timeout() -> u64 {
    120
}

fn default_max_paths() -> usize {
    400
}

/// Why the endpoint gave no reply the caller can use. Each names the URL asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndpointError {
    /// The server answered with an HTTP error status (4xx, 5xx).
    #[error("{url} answered with HTTP status {status}")]
    Status {
        /// The chat completions URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// No answer came: the connection, the HTTP exchange or the timeout failed.
    #[error("no answer from {url}")]
    Request {
        /// The chat completions URL.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: ureq::Error,
    },
    /// The reply's body could not be read as JSON.
    #[error("the reply of {url} is not JSON")]
    Body {
        /// The chat completions URL.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: ureq::Error,
    },
    /// The reply's JSON lacks the field the answer is read from.
    #[error("the reply of {url} has no `{field}`")]
    Field {
        /// The chat completions URL.
        url: String,
        /// The field, as a path into the reply.
        field: &'static str,
    },
}

/// Where an OpenAI-compatible reply holds the answer's text.
const CONTENT: &str = "choices[0].message.content";

/// A connected client.
pub(crate) struct Endpoint {
    config: EndpointConfig,
    api_key: Option<String>,
    agent: ureq::Agent,
}

const SYSTEM: &str = "You help prepare software-engineering tasks. Given an issue, the files a \
developer edited to resolve it, and other files of the repository, list the other files whose \
content is most relevant to understanding the change but that were not edited. Answer with \
repository paths only, one per line, most relevant first, nothing else.";

impl Endpoint {
    /// A client for `config` (reads the API key variable once).
    pub(crate) fn new(config: &EndpointConfig) -> Endpoint {
        let agent_config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(config.timeout_s)))
            .build();
        Endpoint {
            api_key: config
                .api_key_env
                .as_ref()
                .and_then(|var| std::env::var(var).ok()),
            config: config.clone(),
            agent: ureq::Agent::new_with_config(agent_config),
        }
    }

    /// The prompt's user message.
    fn prompt(issue: &str, edited: &[&str], candidates: &[&str], count: usize) -> String {
        format!(
            "Issue:\n{issue}\n\nEdited files:\n{}\n\nOther files:\n{}\n\nList up to {count} of \
             the other files.",
            edited.join("\n"),
            candidates.join("\n"),
        )
    }

    /// Paths the model suggests, in its order (unvalidated).
    pub(crate) fn suggest(
        &self,
        issue: &str,
        edited: &[&str],
        candidates: &[&str],
        count: usize,
    ) -> Result<Vec<String>, EndpointError> {
        let candidates = &candidates[..candidates.len().min(self.config.max_paths)];
        let content = self.chat(
            SYSTEM,
            &Self::prompt(issue, edited, candidates, count),
            64 * count.max(1) + 64,
        )?;
        Ok(parse_paths(&content))
    }

    /// One chat completion at temperature 0 with a fixed seed: the reply's text.
    pub(crate) fn chat(
        &self,
        system: &str,
        user: &str,
        max_tokens: usize,
    ) -> Result<String, EndpointError> {
        let body = json!({
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "seed": 0,
            "max_tokens": max_tokens,
        });
        let url = format!("{}/chat/completions", self.config.url.trim_end_matches('/'));
        let mut request = self.agent.post(&url);
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = match request.send_json(&body) {
            Ok(response) => response,
            // ureq reports 4xx and 5xx answers as errors (its default).
            Err(ureq::Error::StatusCode(status)) => {
                return Err(EndpointError::Status { url, status });
            }
            Err(e) => {
                return Err(EndpointError::Request { url, source: e });
            }
        };
        let reply: Value = match response.body_mut().read_json() {
            Ok(reply) => reply,
            Err(e) => {
                return Err(EndpointError::Body { url, source: e });
            }
        };
        match reply["choices"][0]["message"]["content"].as_str() {
            Some(content) => Ok(content.to_owned()),
            None => Err(EndpointError::Field {
                url,
                field: CONTENT,
            }),
        }
    }
}

/// Paths in a model's answer: one per line, list markers, numbering and quotes removed.
pub(crate) fn parse_paths(content: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in content.lines() {
        let mut line = line.trim();
        line = line.trim_start_matches(['-', '*', '•']).trim_start();
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && line[digits..].starts_with(['.', ')']) {
            line = line[digits + 1..].trim_start();
        }
        let path = line
            .trim_matches(|c| matches!(c, '`' | '"' | '\'' | ' '))
            .trim_start_matches("./");
        if !path.is_empty() && !path.contains(' ') && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// A local server that answers one request with `status` and `body`; its base URL.
    fn answering(status: &str, body: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let status = status.to_owned();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            // The request: headers, then a body of Content-Length bytes.
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        });
        url
    }

    fn chat(url: &str) -> Result<String, EndpointError> {
        Endpoint::new(&EndpointConfig::new(url, "m")).chat("s", "u", 8)
    }

    #[test]
    fn failures_name_the_url_and_what_failed() {
        let url = answering(
            "200 OK",
            r#"{"choices": [{"message": {"content": "a.py"}}]}"#,
        );
        assert_eq!(chat(&url).unwrap(), "a.py");

        let url = answering("503 Service Unavailable", "{}");
        let e = chat(&url).unwrap_err();
        assert!(
            matches!(&e, EndpointError::Status { status: 503, url: u } if u.ends_with("/v1/chat/completions")),
            "{e:?}"
        );

        let url = answering("200 OK", "not json");
        assert!(matches!(chat(&url), Err(EndpointError::Body { .. })));

        let url = answering("200 OK", r#"{"choices": []}"#);
        let e = chat(&url).unwrap_err();
        assert!(
            matches!(&e, EndpointError::Field { field: CONTENT, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("choices[0].message.content"), "{e}");

        // Nothing listens on a port whose listener has been dropped.
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = chat(&format!("http://{closed}/v1")).unwrap_err();
        assert!(matches!(&e, EndpointError::Request { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn answers_become_paths() {
        let got = parse_paths(
            "1. `src/a.py`\n- ./src/b.py\n* \"c.py\"\n\nHere you go: done\nsrc/a.py\n2) d/e.rs",
        );
        assert_eq!(got, ["src/a.py", "src/b.py", "c.py", "d/e.rs"]);
    }
}
