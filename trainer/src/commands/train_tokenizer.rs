//! `trainer tokenizer`: train the project's own byte-level BPE tokenizer on the text the repository
//! ships, and write it as a Hugging Face `tokenizer.json`.
//!
//! The corpus is the swerve-mini dataset (`problem_statement`, every `code_context` file and every
//! `oracle_new_content` file of each instance) followed by the sample completions (`prompt` and
//! `completion`), read in file order. Training is deterministic: the same inputs give the same
//! bytes, which `trainer/tests/it/tokenizer_asset.rs` checks against the committed
//! `trainer/assets/tiny/tokenizer.json`.
//!
//! The layout follows Qwen2's tokenizer: no normaliser, a byte-level pre-tokeniser with GPT-2's
//! split regex and no prefix space, byte-level decoding, and the special tokens first
//! (`<|endoftext|>` = 0, `<|pad|>` = 1), so that the tiny model config in
//! `trainer/assets/tiny/config.json` can name them as `eos_token_id` and `pad_token_id`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, TokenizerBuilder};

/// The end-of-text token, id 0.
pub const END_OF_TEXT: &str = "<|endoftext|>";
/// The padding token, id 1.
pub const PAD: &str = "<|pad|>";

/// Why the tokenizer could not be trained or written.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A corpus file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A corpus line is not JSON.
    #[error("{}:{line}: not a JSON object", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The corpus files hold no text.
    #[error("no text found in {} and {}", dataset.display(), samples.display())]
    NoText {
        /// The dataset file.
        dataset: PathBuf,
        /// The sample completions file.
        samples: PathBuf,
    },
    /// The tokenizers library failed a step (`assemble`, `train`, `serialise`).
    #[error("cannot {step} the tokenizer")]
    Tokenizers {
        /// The step.
        step: &'static str,
        /// The library's error.
        #[source]
        source: tokenizers::Error,
    },
    /// The tokenizer file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file, or its folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What to train on and how big a vocabulary to learn.
#[derive(Debug, Clone)]
pub struct TokenizerSpec {
    /// The swerve-mini dataset (`swerve-mini.jsonl`).
    pub dataset: PathBuf,
    /// The sample completions (`swerve-mini-completions.jsonl`).
    pub samples: PathBuf,
    /// Vocabulary size, special tokens and the 256 byte tokens included.
    pub vocab_size: usize,
}

impl TokenizerSpec {
    /// The committed tokenizer's inputs, relative to the repository root `root`: vocabulary 2048.
    pub fn bundled(root: &Path) -> Self {
        Self {
            dataset: root.join("harness/datasets/swerve-mini/swerve-mini.jsonl"),
            samples: root.join("harness/samples/swerve-mini-completions.jsonl"),
            vocab_size: 2048,
        }
    }
}

/// Reads the corpus of `spec`, in a fixed order, one document per string.
pub fn corpus(spec: &TokenizerSpec) -> Result<Vec<String>, TrainError> {
    let mut docs = Vec::new();
    for record in read_jsonl(&spec.dataset)? {
        docs.extend(string_field(&record, "problem_statement"));
        docs.extend(file_contents(&record, "code_context"));
        docs.extend(file_contents(&record, "oracle_new_content"));
    }
    for record in read_jsonl(&spec.samples)? {
        docs.extend(string_field(&record, "prompt"));
        docs.extend(string_field(&record, "completion"));
    }
    if docs.is_empty() {
        return Err(TrainError::NoText {
            dataset: spec.dataset.clone(),
            samples: spec.samples.clone(),
        });
    }
    Ok(docs)
}

/// Trains the tokenizer and returns its `tokenizer.json` text (pretty-printed, newline-terminated).
pub fn build(spec: &TokenizerSpec) -> Result<String, TrainError> {
    let docs = corpus(spec)?;
    let specials = [END_OF_TEXT, PAD].map(|t| AddedToken::from(t, true));
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(spec.vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(specials.to_vec())
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let byte_level = ByteLevel::new(false, false, true);
    let mut tokenizer =
        TokenizerBuilder::<BPE, NormalizerWrapper, ByteLevel, ByteLevel, ByteLevel>::new()
            .with_model(BPE::default())
            .with_normalizer(None)
            .with_pre_tokenizer(Some(byte_level))
            .with_post_processor(Some(byte_level))
            .with_decoder(Some(byte_level))
            .build()
            .map_err(failed_to("assemble"))?;
    tokenizer
        .train(&mut trainer, docs.iter())
        .map_err(failed_to("train"))?;
    tokenizer.add_special_tokens(&specials);
    let tokenizer = tokenizers::Tokenizer::from(tokenizer);
    let mut json = tokenizer.to_string(true).map_err(failed_to("serialise"))?;
    json.push('\n');
    Ok(json)
}

/// Trains the tokenizer of `spec` and writes it to `out`; returns the vocabulary size.
pub fn run(spec: &TokenizerSpec, out: &Path) -> Result<usize, TrainError> {
    let json = build(spec)?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir).map_err(|source| TrainError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    swerve_cache::write_atomic(out, json.as_bytes()).map_err(|source| TrainError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    // The text just written, read as `trainer` reads a tokenizer.
    let tokenizer: tokenizers::Tokenizer = json.parse().map_err(failed_to("read back"))?;
    Ok(tokenizer.get_vocab_size(true))
}

/// The error of the tokenizers library's `step`.
fn failed_to(step: &'static str) -> impl Fn(tokenizers::Error) -> TrainError {
    move |source| TrainError::Tokenizers { step, source }
}

fn read_jsonl(path: &Path) -> Result<Vec<Value>, TrainError> {
    let text = fs_err::read_to_string(path).map_err(|source| TrainError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| TrainError::Json {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

fn string_field(record: &Value, field: &str) -> Option<String> {
    record
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The file contents of a `{path: content}` field, in key order.
fn file_contents(record: &Value, field: &str) -> Vec<String> {
    let Some(files) = record.get(field).and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut entries: Vec<(&String, &Value)> = files.iter().collect();
    entries.sort_by_key(|(path, _)| *path);
    entries
        .into_iter()
        .filter_map(|(_, content)| content.as_str().map(str::to_owned))
        .collect()
}
