//! A Hugging Face `config.json` for the Llama/Qwen2 family, validated into [`ModelConfig`].
//!
//! Only the fields that change the computation are read; the original JSON is kept so that a
//! checkpoint saved by swerve carries the same `config.json` it was loaded from.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, IoOp, Result};

/// Which Hugging Face architecture the weights follow. The two differ only in which projections
/// carry biases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `Qwen2ForCausalLM`: biases on the q, k and v projections, none on o.
    Qwen2,
    /// `LlamaForCausalLM`: biases on q, k, v and o only when `attention_bias` is true.
    Llama,
}

/// The validated shape and constants of a causal language model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Architecture family (`model_type`).
    pub family: Family,
    /// Vocabulary size (`vocab_size`): rows of the embedding and of the LM head.
    pub vocab_size: usize,
    /// Model width (`hidden_size`).
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP (`intermediate_size`).
    pub intermediate_size: usize,
    /// Number of decoder layers (`num_hidden_layers`).
    pub num_layers: usize,
    /// Number of query heads (`num_attention_heads`).
    pub num_heads: usize,
    /// Number of key/value heads (`num_key_value_heads`, defaults to `num_heads`); fewer than
    /// `num_heads` is grouped-query attention.
    pub num_kv_heads: usize,
    /// Width of one head (`head_dim`, defaults to `hidden_size / num_heads`).
    pub head_dim: usize,
    /// RoPE base (`rope_theta`, default 10000).
    pub rope_theta: f64,
    /// RMSNorm epsilon (`rms_norm_eps`, default 1e-6).
    pub rms_norm_eps: f64,
    /// Whether the LM head reuses the embedding matrix (`tie_word_embeddings`, default false).
    pub tie_word_embeddings: bool,
    /// Whether q, k and v projections have biases (always for Qwen2; `attention_bias` for Llama).
    pub qkv_bias: bool,
    /// Whether the o projection has a bias (`attention_bias` for Llama; never for Qwen2).
    pub o_bias: bool,
    /// Longest supported sequence (`max_position_embeddings`, default 32768).
    pub max_position_embeddings: usize,
    /// End-of-sequence ids (`eos_token_id`, a number or a list; may be empty).
    pub eos_token_ids: Vec<u32>,
    /// The JSON this config was read from, kept for saving.
    pub raw: Map<String, Value>,
}

impl ModelConfig {
    /// Reads and validates a `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = fs_err::read_to_string(path).map_err(|e| Error::io(IoOp::Read, path, e))?;
        let value: Value = serde_json::from_str(&text).map_err(|source| Error::Json {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(value).map_err(|source| Error::ModelConfig {
            path: path.to_path_buf(),
            source: Box::new(source),
        })
    }

    /// Validates a parsed `config.json`.
    pub fn from_json(value: Value) -> Result<Self> {
        let Value::Object(raw) = value else {
            return Err(Error::Config {
                field: "(root)",
                reason: "expected a JSON object".into(),
            });
        };
        let family = match str_field(&raw, "model_type")?.as_deref() {
            Some("qwen2") => Family::Qwen2,
            Some("llama") => Family::Llama,
            Some(other) => {
                return Err(Error::Config {
                    field: "model_type",
                    reason: format!("unsupported architecture `{other}` (qwen2 or llama)"),
                });
            }
            None => {
                return Err(Error::Config {
                    field: "model_type",
                    reason: "missing".into(),
                });
            }
        };
        let hidden_size = required_usize(&raw, "hidden_size")?;
        let num_heads = required_usize(&raw, "num_attention_heads")?;
        let num_kv_heads = usize_field(&raw, "num_key_value_heads")?.unwrap_or(num_heads);
        if num_heads == 0 || num_kv_heads == 0 || !num_heads.is_multiple_of(num_kv_heads) {
            return Err(Error::Config {
                field: "num_key_value_heads",
                reason: format!(
                    "{num_kv_heads} must be positive and divide num_attention_heads = {num_heads}"
                ),
            });
        }
        let head_dim = match usize_field(&raw, "head_dim")? {
            Some(d) => d,
            None if hidden_size.is_multiple_of(num_heads) => hidden_size / num_heads,
            None => {
                return Err(Error::Config {
                    field: "hidden_size",
                    reason: format!(
                        "{hidden_size} is not a multiple of num_attention_heads = {num_heads}"
                    ),
                });
            }
        };
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(Error::Config {
                field: "head_dim",
                reason: format!("{head_dim} must be positive and even for RoPE"),
            });
        }
        if let Some(act) = str_field(&raw, "hidden_act")?
            && act != "silu"
        {
            return Err(Error::Config {
                field: "hidden_act",
                reason: format!("unsupported activation `{act}` (only silu)"),
            });
        }
        // transformers 4.x writes `rope_theta` and `rope_scaling`; 5.x nests both in
        // `rope_parameters` (`rope_theta`, `rope_type`). Only unscaled ("default") RoPE is supported.
        for field in ["rope_scaling", "rope_parameters"] {
            if let Some(Value::Object(rope)) = raw.get(field) {
                let kind = rope
                    .get("rope_type")
                    .or_else(|| rope.get("type"))
                    .and_then(Value::as_str);
                if kind.is_some_and(|k| k != "default") {
                    return Err(Error::Config {
                        field,
                        reason: format!(
                            "RoPE type `{}` is not supported (only default)",
                            kind.unwrap_or("")
                        ),
                    });
                }
            } else if raw.get(field).is_some_and(|v| !v.is_null()) {
                return Err(Error::Config {
                    field,
                    reason: "expected an object".into(),
                });
            }
        }
        if bool_field(&raw, "use_sliding_window")?.unwrap_or(false) {
            return Err(Error::Config {
                field: "use_sliding_window",
                reason: "sliding-window attention is not supported".into(),
            });
        }
        if bool_field(&raw, "mlp_bias")?.unwrap_or(false) {
            return Err(Error::Config {
                field: "mlp_bias",
                reason: "MLP biases are not supported".into(),
            });
        }
        let attention_bias = bool_field(&raw, "attention_bias")?.unwrap_or(false);
        let (qkv_bias, o_bias) = match family {
            Family::Qwen2 => (true, false),
            Family::Llama => (attention_bias, attention_bias),
        };
        let rms_norm_eps = f64_field(&raw, "rms_norm_eps")?.unwrap_or(1e-6);
        if rms_norm_eps.is_nan() || rms_norm_eps <= 0.0 {
            return Err(Error::Config {
                field: "rms_norm_eps",
                reason: format!("{rms_norm_eps} must be positive"),
            });
        }
        let nested_theta = match raw.get("rope_parameters") {
            Some(Value::Object(rope)) => f64_field(rope, "rope_theta")?,
            _ => None,
        };
        let rope_theta = match nested_theta {
            Some(theta) => theta,
            None => f64_field(&raw, "rope_theta")?.unwrap_or(10_000.0),
        };
        if rope_theta.is_nan() || rope_theta <= 0.0 {
            return Err(Error::Config {
                field: "rope_theta",
                reason: format!("{rope_theta} must be positive"),
            });
        }
        let eos_token_ids = match raw.get("eos_token_id") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Number(n)) => vec![token_id(n)?],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Number(n) => token_id(n),
                    _ => Err(Error::Config {
                        field: "eos_token_id",
                        reason: "expected a number or a list of numbers".into(),
                    }),
                })
                .collect::<Result<_>>()?,
            Some(_) => {
                return Err(Error::Config {
                    field: "eos_token_id",
                    reason: "expected a number or a list of numbers".into(),
                });
            }
        };
        let config = Self {
            family,
            vocab_size: required_usize(&raw, "vocab_size")?,
            hidden_size,
            intermediate_size: required_usize(&raw, "intermediate_size")?,
            num_layers: required_usize(&raw, "num_hidden_layers")?,
            num_heads,
            num_kv_heads,
            head_dim,
            rope_theta,
            rms_norm_eps,
            tie_word_embeddings: bool_field(&raw, "tie_word_embeddings")?.unwrap_or(false),
            qkv_bias,
            o_bias,
            max_position_embeddings: usize_field(&raw, "max_position_embeddings")?
                .unwrap_or(32_768),
            eos_token_ids,
            raw,
        };
        for (field, value) in [
            ("vocab_size", config.vocab_size),
            ("hidden_size", config.hidden_size),
            ("intermediate_size", config.intermediate_size),
            ("num_hidden_layers", config.num_layers),
        ] {
            if value == 0 {
                return Err(Error::Config {
                    field,
                    reason: "must be positive".into(),
                });
            }
        }
        Ok(config)
    }

    /// The config as Hugging Face JSON (the original fields, unchanged).
    pub(crate) fn to_json(&self) -> Value {
        Value::Object(self.raw.clone())
    }
}

fn token_id(n: &serde_json::Number) -> Result<u32> {
    n.as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| Error::Config {
            field: "eos_token_id",
            reason: format!("{n} is not a token id"),
        })
}

fn required_usize(raw: &Map<String, Value>, field: &'static str) -> Result<usize> {
    usize_field(raw, field)?.ok_or_else(|| Error::Config {
        field,
        reason: "missing".into(),
    })
}

fn usize_field(raw: &Map<String, Value>, field: &'static str) -> Result<Option<usize>> {
    match raw.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|v| usize::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| Error::Config {
                field,
                reason: format!("{n} is not a non-negative integer"),
            }),
        Some(other) => Err(Error::Config {
            field,
            reason: format!("expected an integer, found {other}"),
        }),
    }
}

fn f64_field(raw: &Map<String, Value>, field: &'static str) -> Result<Option<f64>> {
    match raw.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(Error::Config {
            field,
            reason: format!("expected a number, found {other}"),
        }),
    }
}

fn bool_field(raw: &Map<String, Value>, field: &'static str) -> Result<Option<bool>> {
    match raw.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(Error::Config {
            field,
            reason: format!("expected true or false, found {other}"),
        }),
    }
}

fn str_field(raw: &Map<String, Value>, field: &'static str) -> Result<Option<String>> {
    match raw.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Error::Config {
            field,
            reason: format!("expected a string, found {other}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn base() -> Value {
        json!({
            "model_type": "qwen2", "vocab_size": 64, "hidden_size": 16,
            "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "tie_word_embeddings": true, "eos_token_id": [1, 2]
        })
    }

    fn with(field: &str, value: Value) -> Value {
        let mut v = base();
        v[field] = value;
        v
    }

    #[test]
    fn reads_qwen2_defaults_and_gqa() {
        let c = ModelConfig::from_json(base()).unwrap();
        assert_eq!(
            (
                c.head_dim,
                c.num_heads / c.num_kv_heads,
                c.qkv_bias,
                c.o_bias
            ),
            (4, 2, true, false)
        );
        assert_eq!(c.eos_token_ids, vec![1, 2]);
    }

    #[test]
    fn reads_rope_theta_from_transformers_5_rope_parameters() {
        let v = with(
            "rope_parameters",
            json!({"rope_theta": 1e6, "rope_type": "default"}),
        );
        assert_eq!(ModelConfig::from_json(v).unwrap().rope_theta, 1e6);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (with("num_key_value_heads", json!(3)), "num_key_value_heads"),
            (with("hidden_size", json!("16")), "hidden_size"),
            (with("model_type", json!("gpt2")), "model_type"),
            (
                with("rope_scaling", json!({"type": "linear"})),
                "rope_scaling",
            ),
            (
                with("rope_parameters", json!({"rope_type": "yarn"})),
                "rope_parameters",
            ),
            (
                with("use_sliding_window", json!(true)),
                "use_sliding_window",
            ),
            (with("hidden_act", json!("gelu")), "hidden_act"),
            (with("eos_token_id", json!("x")), "eos_token_id"),
        ];
        for (value, field) in cases {
            match ModelConfig::from_json(value) {
                Err(Error::Config { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected an error on {field}, got {other:?}"),
            }
        }
    }
}
