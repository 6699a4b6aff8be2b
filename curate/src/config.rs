//! Settings of a run: every threshold with its default, the decontamination lists, the date
//! window, the shard. The binary builds one from `--config` (TOML, the same field names) and its
//! flags; the library never sees a flag.

use std::path::Path;

use serde::Deserialize;

use crate::endpoint::EndpointConfig;
use crate::error::CurateError;

/// Settings of one `curate run`. Every field has the default named in its doc.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// More edited files than this (all kinds: code, tests, other, binary) is `too_large`.
    /// Default 50 (the fixtures' rule; SWE-rebench keeps 1–15, SWE-smith ≤ 8).
    pub max_edited_files: usize,
    /// Prompt budget in estimated tokens (bytes / 4) for the issue text plus the edited code
    /// files at the base; more is `too_long`. Relevant files only fill what is left. Default
    /// 16384 (SWE-RL's 16k context).
    pub max_prompt_tokens: usize,
    /// How many relevant unmodified files join the context; 0 turns the stage off. Default 3.
    pub relevant_files: usize,
    /// A relevant-file candidate larger than this many bytes is skipped. Default 100 000.
    pub max_relevant_bytes: usize,
    /// A chat model that suggests relevant files first (`[relevant_endpoint]`). Default none:
    /// the deterministic rule only.
    pub relevant_endpoint: Option<EndpointConfig>,
    /// More repositories to exclude by `owner/name` (case-insensitive), beside SWE-bench's.
    pub exclude_repos: Vec<String>,
    /// More GH Archive `repo.id`s to exclude, beside the known SWE-bench ones.
    pub exclude_repo_ids: Vec<u64>,
    /// Keep only PRs whose latest event is on or after this date (`YYYY-MM-DD`). Default none.
    pub since: Option<String>,
    /// Keep only PRs whose latest event is on or before this date (`YYYY-MM-DD`). Default none.
    pub until: Option<String>,
    /// Process only the repositories of this shard. Default: all.
    #[serde(skip)]
    pub shard: Option<Shard>,
    /// Worker threads for reading files and clones; 0 = one per core. Default 0.
    pub jobs: usize,
    /// Kept events wait on disk in this many partitions by repository, and one partition is in
    /// memory at a time. 0 = one per 16 MiB of input files as stored (e.g. gzip), so that
    /// memory stays flat as the corpus grows; at most 256 (shard beyond that). Default 0.
    pub partitions: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_edited_files: 50,
            max_prompt_tokens: 16_384,
            relevant_files: 3,
            max_relevant_bytes: 100_000,
            relevant_endpoint: None,
            exclude_repos: Vec::new(),
            exclude_repo_ids: Vec::new(),
            since: None,
            until: None,
            shard: None,
            jobs: 0,
            partitions: 0,
        }
    }
}

impl Config {
    /// Reads a TOML config file; missing fields keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config, CurateError> {
        let text = fs_err::read_to_string(path).map_err(|source| CurateError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| CurateError::Config {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Checks the dates; called before a run starts.
    pub fn validate(&self) -> Result<(), CurateError> {
        for (name, date) in [("since", &self.since), ("until", &self.until)] {
            if let Some(date) = date
                && !is_date(date)
            {
                return Err(CurateError::Setting {
                    name,
                    detail: format!("{date:?} is not YYYY-MM-DD"),
                });
            }
        }
        Ok(())
    }
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Shard `index` of `count`: the repositories whose name hash is `index` modulo `count`
/// (0-based, as array task ids are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl Shard {
    /// Parses `K/N` with `K < N`.
    pub fn parse(text: &str) -> Result<Shard, CurateError> {
        let bad = |detail: String| CurateError::Setting {
            name: "shard",
            detail,
        };
        let (k, n) = text
            .split_once('/')
            .ok_or_else(|| bad(format!("{text:?} is not K/N")))?;
        let index: u64 = k
            .trim()
            .parse()
            .map_err(|_| bad(format!("bad K in {text:?}")))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("bad N in {text:?}")))?;
        if count == 0 || index >= count {
            return Err(bad(format!("{text:?}: need 0 <= K < N")));
        }
        Ok(Shard { index, count })
    }

    /// Whether repository `name` (`owner/name`, compared lower-case) belongs to this shard. The
    /// hash is SHA-256, so every machine and release agrees.
    pub fn contains(&self, name: &str) -> bool {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(name.to_ascii_lowercase().as_bytes());
        let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        head % self.count == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, Shard};

    #[test]
    fn shards_partition_names() {
        let shards: Vec<Shard> = (0..3)
            .map(|k| Shard::parse(&format!("{k}/3")).unwrap())
            .collect();
        for name in ["a/b", "Quietpine/Slugkit", "x/y", "nimbusforge/ledgerline"] {
            assert_eq!(shards.iter().filter(|s| s.contains(name)).count(), 1);
        }
        assert!(Shard::parse("3/3").is_err());
        assert!(Shard::parse("1").is_err());
    }

    #[test]
    fn config_from_toml_and_dates() {
        let config: Config =
            toml::from_str("max_edited_files = 10\nsince = \"2015-01-01\"").unwrap();
        assert_eq!(config.max_edited_files, 10);
        assert_eq!(config.max_prompt_tokens, 16_384);
        config.validate().unwrap();
        let with_model: Config = toml::from_str(
            "relevant_files = 2\n[relevant_endpoint]\nurl = \"http://127.0.0.1:8000/v1\"\nmodel = \"qwen\"\n",
        )
        .unwrap();
        let endpoint = with_model.relevant_endpoint.unwrap();
        assert_eq!((endpoint.model.as_str(), endpoint.timeout_s), ("qwen", 120));
        assert!(
            toml::from_str::<Config>("max_files = 3").is_err(),
            "unknown keys are refused"
        );
        let bad = Config {
            until: Some("2024/08/31".into()),
            ..Config::default()
        };
        assert!(bad.validate().is_err());
    }
}
