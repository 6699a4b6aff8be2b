//! The optional chat model behind an OpenAI-compatible endpoint (what users run locally: vLLM,
//! SGLang, llama.cpp's server), for relevant files (`curate run --relevant-endpoint`) and for
//! environment recipes the rules cannot make (`curate validate --setup-endpoint`,
//! [`crate::setup`]). For relevant files it is given the issue, the edited paths and candidate
//! paths, and answers with paths, one per line. Its answer is a suggestion only:
//! [`crate::relevant`] validates every path (exists at the base, text, not edited) and falls
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

/// A connected client.
pub struct Endpoint {
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
    pub fn new(config: &EndpointConfig) -> Endpoint {
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
    pub fn suggest(
        &self,
        issue: &str,
        edited: &[&str],
        candidates: &[&str],
        count: usize,
    ) -> Result<Vec<String>, String> {
        let candidates = &candidates[..candidates.len().min(self.config.max_paths)];
        let content = self.chat(
            SYSTEM,
            &Self::prompt(issue, edited, candidates, count),
            64 * count.max(1) + 64,
        )?;
        Ok(parse_paths(&content))
    }

    /// One chat completion at temperature 0 with a fixed seed: the reply's text.
    pub fn chat(&self, system: &str, user: &str, max_tokens: usize) -> Result<String, String> {
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
        let mut response = request
            .send_json(&body)
            .map_err(|e| format!("{url}: {e}"))?;
        let reply: Value = response
            .body_mut()
            .read_json()
            .map_err(|e| format!("{url}: {e}"))?;
        reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{url}: no choices[0].message.content in the reply"))
    }
}

/// Paths in a model's answer: one per line, list markers, numbering and quotes removed.
pub fn parse_paths(content: &str) -> Vec<String> {
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
    use super::parse_paths;

    #[test]
    fn answers_become_paths() {
        let got = parse_paths(
            "1. `src/a.py`\n- ./src/b.py\n* \"c.py\"\n\nHere you go: done\nsrc/a.py\n2) d/e.rs",
        );
        assert_eq!(got, ["src/a.py", "src/b.py", "c.py", "d/e.rs"]);
    }
}
