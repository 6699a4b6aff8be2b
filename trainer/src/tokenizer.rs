//! The model's tokenizer, loaded from a Hugging Face `tokenizer.json` with the `tokenizers`
//! crate (built with its pure-Rust regex backend, so no C toolchain is needed).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A loaded `tokenizer.json`.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner =
            tokenizers::Tokenizer::from_file(path).map_err(|source| Error::TokenizerLoad {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self {
            inner,
            path: path.to_path_buf(),
        })
    }

    /// The file this tokenizer was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Token ids of `text`; `add_special_tokens` applies the tokenizer's post-processor (BOS and
    /// the like).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|source| Error::Tokenize {
                operation: "encode",
                source,
            })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`, leaving out special tokens when `skip_special_tokens`.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|source| Error::Tokenize {
                operation: "decode",
                source,
            })
    }

    /// The id of a token such as `<|endoftext|>`, if the vocabulary has it.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
