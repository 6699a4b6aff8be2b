//! The one error type of the GRPO math: bad configuration, inconsistent shapes, unreadable case
//! files.
//!
//! Numbers that are merely undefined (the std of a single reward, a clip ratio over zero tokens)
//! are not errors: they are NaN, as in TRL.

use std::path::PathBuf;

/// Why a GRPO computation or configuration could not go on.
#[derive(Debug, thiserror::Error)]
pub enum GrpoError {
    /// The TOML text of a [`GrpoConfig`](super::GrpoConfig) could not be read into the config:
    /// a syntax error, an unknown key or a value of the wrong type.
    #[error("invalid GRPO config{}: {message}", key_suffix(.key))]
    ConfigParse {
        /// The offending key, when it could be located.
        key: Option<String>,
        /// toml's own description of the problem (with its position in the text).
        message: String,
        /// The parser's error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A config value parsed but is out of range or contradicts another value.
    #[error("invalid GRPO config: `{field}` {reason}")]
    InvalidConfig {
        /// TRL's name of the field.
        field: &'static str,
        /// What is wrong with it, including the value found.
        reason: String,
    },
    /// Two inputs that must describe the same completions (or tokens) have different sizes.
    #[error("shape mismatch: {what} has {found} entries, expected {expected}")]
    Shape {
        /// Which input, e.g. `completion_mask row 3`.
        what: String,
        /// The size implied by the other inputs.
        expected: usize,
        /// The size found.
        found: usize,
    },
    /// A micro-batch row range is empty, out of bounds, or overlaps an earlier one.
    #[error("micro-batch [{start}, {end}) is invalid for {rows} completions: {reason}")]
    MicroBatch {
        /// First row of the range.
        start: usize,
        /// One past the last row.
        end: usize,
        /// Number of completions in the batch.
        rows: usize,
        /// What is wrong with the range.
        reason: &'static str,
    },
    /// β ≠ 0 but no reference log-probs were given.
    #[error("beta = {beta} needs reference log-probs, but none were given")]
    MissingRefLogps {
        /// The KL coefficient.
        beta: f64,
    },
    /// A feature that TRL has but swerve does not implement yet.
    #[error("unsupported: {what}")]
    Unsupported {
        /// The setting and its value.
        what: String,
    },
    /// A case file could not be read.
    #[error("cannot read GRPO case file {path}")]
    ReadCase {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A case file is not valid JSON in the layout of [`crate::grpo::case::CaseFile`].
    #[error("cannot parse GRPO case file {path}")]
    ParseCase {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Two cases of one file share a name, so their results could not be told apart.
    #[error("duplicate case name `{name}`")]
    DuplicateCase {
        /// The repeated name.
        name: String,
    },
}

fn key_suffix(key: &Option<String>) -> String {
    key.as_ref()
        .map(|k| format!(" key `{k}`"))
        .unwrap_or_default()
}

impl From<crate::train::arguments::InvalidSetting> for GrpoError {
    fn from(e: crate::train::arguments::InvalidSetting) -> Self {
        Self::InvalidConfig {
            field: e.field,
            reason: e.reason,
        }
    }
}
