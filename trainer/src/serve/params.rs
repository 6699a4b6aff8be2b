//! A request's sampling parameters, read from its JSON body with OpenAI's names (and vLLM's
//! extensions `top_k`, `min_p`, `repetition_penalty`, `return_tokens_as_token_ids`,
//! `return_token_ids`), each range-checked: a bad one is a 400 answer naming the field.

use serde_json::Value;

/// Most completions one request may ask for.
pub(crate) const MAX_N: usize = 16;
/// Most top log-probabilities per token (OpenAI's limit).
pub(crate) const MAX_TOP_LOGPROBS: usize = 20;

/// An answer with an error status: OpenAI's error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub status: u16,
    pub message: String,
    pub param: Option<String>,
    pub kind: &'static str,
}

impl ApiError {
    pub(crate) fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            param: Some(param.to_owned()),
            kind: "invalid_request_error",
        }
    }

    pub(crate) fn body(&self) -> Value {
        serde_json::json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.status,
        }})
    }
}

/// What a request asks of the sampler and of the answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Params {
    pub n: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub top_k: usize,
    pub min_p: Option<f64>,
    pub repetition_penalty: f64,
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    pub seed: Option<u64>,
    pub logprobs: bool,
    pub top_logprobs: usize,
    /// Tokens in log-probs written `token_id:N` (vLLM's `return_tokens_as_token_ids`).
    pub tokens_as_ids: bool,
    /// The prompt's and each completion's token ids in the answer (vLLM's `return_token_ids`).
    pub return_token_ids: bool,
}

fn number(body: &Value, key: &str) -> Result<Option<f64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("`{key}` must be a number"))),
    }
}

fn integer(body: &Value, key: &str) -> Result<Option<i64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("`{key}` must be an integer"))),
    }
}

fn flag(body: &Value, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(
            key,
            format!("`{key}` must be true or false"),
        )),
    }
}

impl Params {
    /// The parameters of a chat (`chat = true`: `logprobs` is a flag and `top_logprobs` a
    /// count) or a completions request (`logprobs` is the count).
    pub(crate) fn read(body: &Value, chat: bool) -> Result<Params, ApiError> {
        let n = integer(body, "n")?.unwrap_or(1);
        if !(1..=MAX_N as i64).contains(&n) {
            return Err(ApiError::invalid(
                "n",
                format!("`n` must be in 1..={MAX_N}"),
            ));
        }
        let temperature = number(body, "temperature")?.unwrap_or(1.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::invalid(
                "temperature",
                "`temperature` must be in [0, 2]",
            ));
        }
        let top_p = number(body, "top_p")?.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::invalid("top_p", "`top_p` must be in (0, 1]"));
        }
        let top_k = match integer(body, "top_k")?.unwrap_or(0) {
            -1 | 0 => 0,
            k if k > 0 => k as usize,
            _ => {
                return Err(ApiError::invalid(
                    "top_k",
                    "`top_k` must be -1, 0 or positive",
                ));
            }
        };
        let min_p = match number(body, "min_p")? {
            None => None,
            Some(0.0) => None,
            Some(p) if (0.0..=1.0).contains(&p) => Some(p),
            Some(_) => return Err(ApiError::invalid("min_p", "`min_p` must be in [0, 1]")),
        };
        let repetition_penalty = number(body, "repetition_penalty")?.unwrap_or(1.0);
        if repetition_penalty <= 0.0 {
            return Err(ApiError::invalid(
                "repetition_penalty",
                "`repetition_penalty` must be positive",
            ));
        }
        let max_tokens =
            match integer(body, "max_completion_tokens")?.or(integer(body, "max_tokens")?) {
                None => None,
                Some(m) if m >= 1 => Some(m as usize),
                Some(_) => {
                    return Err(ApiError::invalid(
                        "max_tokens",
                        "`max_tokens` must be at least 1",
                    ));
                }
            };
        let stop = match body.get("stop") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ApiError::invalid("stop", "`stop` must be a string or a list of strings")
                })?,
            Some(_) => {
                return Err(ApiError::invalid(
                    "stop",
                    "`stop` must be a string or a list of strings",
                ));
            }
        };
        if stop.iter().any(String::is_empty) {
            return Err(ApiError::invalid("stop", "a stop string must not be empty"));
        }
        let seed = match body.get("seed") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .map(|s| s as u64)
                    .or_else(|| v.as_u64())
                    .ok_or_else(|| ApiError::invalid("seed", "`seed` must be an integer"))?,
            ),
        };
        let (logprobs, top_logprobs) = if chat {
            let top = integer(body, "top_logprobs")?.unwrap_or(0);
            (flag(body, "logprobs")?, top)
        } else {
            match integer(body, "logprobs")? {
                None => (false, 0),
                Some(k) => (true, k),
            }
        };
        if !(0..=MAX_TOP_LOGPROBS as i64).contains(&top_logprobs) {
            let key = if chat { "top_logprobs" } else { "logprobs" };
            return Err(ApiError::invalid(
                key,
                format!("`{key}` must be in 0..={MAX_TOP_LOGPROBS}"),
            ));
        }
        if flag(body, "stream")? {
            return Err(ApiError::invalid(
                "stream",
                "streamed answers are not supported: send `stream: false`",
            ));
        }
        Ok(Params {
            n: n as usize,
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            max_tokens,
            stop,
            seed,
            logprobs: logprobs || top_logprobs > 0,
            top_logprobs: top_logprobs as usize,
            tokens_as_ids: flag(body, "return_tokens_as_token_ids")?,
            return_token_ids: flag(body, "return_token_ids")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_vllm_extensions_are_read() {
        let p = Params::read(&json!({"messages": []}), true).unwrap();
        assert_eq!((p.n, p.temperature, p.top_p, p.top_k), (1, 1.0, 1.0, 0));
        assert!(!p.logprobs && p.stop.is_empty() && p.max_tokens.is_none());
        let p = Params::read(
            &json!({"n": 2, "top_k": -1, "min_p": 0.05, "stop": "\n", "seed": 7,
                    "logprobs": true, "top_logprobs": 3, "return_tokens_as_token_ids": true,
                    "max_completion_tokens": 9}),
            true,
        )
        .unwrap();
        assert_eq!((p.n, p.top_k, p.min_p, p.seed), (2, 0, Some(0.05), Some(7)));
        assert_eq!(
            (p.logprobs, p.top_logprobs, p.tokens_as_ids),
            (true, 3, true)
        );
        assert_eq!((p.stop, p.max_tokens), (vec!["\n".to_owned()], Some(9)));
        let p = Params::read(&json!({"logprobs": 2}), false).unwrap();
        assert_eq!((p.logprobs, p.top_logprobs), (true, 2));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (body, param) in [
            (json!({"n": 0}), "n"),
            (json!({"temperature": 3}), "temperature"),
            (json!({"top_p": 0}), "top_p"),
            (json!({"max_tokens": 0}), "max_tokens"),
            (json!({"stop": [1]}), "stop"),
            (json!({"top_logprobs": 21}), "top_logprobs"),
            (json!({"stream": true}), "stream"),
            (json!({"temperature": "hot"}), "temperature"),
        ] {
            let e = Params::read(&body, true).unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}");
        }
    }
}
