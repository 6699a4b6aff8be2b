//! What `--dataset` names, for every binary that takes one (`harness run`, `harness images
//! build`, `harness dataset export`, `trainer sft|grpo|predict`): `swerve-mini` is the bundled dataset, written out of the binary into swerve's
//! cache folder on first use (so an installed binary needs no source tree); a path is a
//! `.json` / `.jsonl` / `.parquet` file, or a folder holding `<split>.jsonl` / `<split>.json` /
//! `<split>.parquet`, a Hugging Face dataset's shards `data/<split>-00000-of-0000N.parquet` (a
//! folder `hf download --local-dir` wrote) or a single `.jsonl`.
//!
//! SWE-bench's names stand for Hugging Face datasets, as SWE-bench 5.0.2 takes them: the short
//! names of its CLI and of `load_swebench_dataset` ([`HUB_ALIASES`]: `verified`, `lite`, `full`,
//! `multilingual`, `multimodal`, `swe-bench`, …, in any case; and swerve's names of other
//! benchmarks, [`OTHER_HUB_ALIASES`]: `pro` for SWE-bench Pro, `swe-rebench-v2`) and hub ids `owner/name`
//! (`SWE-bench/SWE-bench_Verified`, `princeton-nlp/SWE-bench_Lite`). Hub datasets cannot be
//! fetched (no network): swerve reads the split's parquet files from the local Hugging Face hub
//! cache ([`hub_cache`]), where `hf download <id> --repo-type dataset` puts them, and when the
//! cache lacks them the error says so with that command. As in SWE-bench, a folder at the id's
//! own path (`SWE-bench/SWE-bench_Lite/test.parquet`) comes before the cache.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::bundled::{SWERVE_MINI, SWERVE_MINI_FILES, SWERVE_MINI_ROWS};
use crate::dataset::{self, DatasetError, Instance};

/// Why a `--dataset` name does not name rows files.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    /// A hub dataset the Hugging Face cache does not hold.
    #[error(
        "dataset `{id}` is not in the Hugging Face cache {}; download it with `hf download {id} --repo-type dataset`",
        cache.display()
    )]
    NotCached {
        /// The hub id (an alias already expanded).
        id: String,
        /// The hub cache looked in.
        cache: PathBuf,
    },
    /// A cached hub dataset without (all the shards of) the split.
    #[error(
        "the Hugging Face cache holds `{id}` but not its whole `{split}` split ({split}.parquet or data/{split}-NNNNN-of-NNNNN.parquet in {}); download it with `hf download {id} --repo-type dataset`",
        snapshot.display()
    )]
    NoSplit {
        /// The hub id.
        id: String,
        /// The split.
        split: String,
        /// The snapshot folder looked in.
        snapshot: PathBuf,
    },
    /// A folder without a rows file for the split.
    #[error(
        "no {split}.jsonl / {split}.json / {split}.parquet, complete data/{split}-NNNNN-of-NNNNN.parquet shards or single .jsonl in {}",
        dir.display()
    )]
    NoRows {
        /// The folder.
        dir: PathBuf,
        /// The split.
        split: String,
    },
    /// The bundled dataset could not be written into the cache folder.
    #[error("cannot write the bundled dataset `swerve-mini` into {}", cache.display())]
    Bundled {
        /// swerve's cache folder.
        cache: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// SWE-bench 5.0.2's short names of its hub datasets, lower case (a name is trimmed and
/// lower-cased before it is looked up, as SWE-bench does): its CLI's (`swebench.cli._datasets`)
/// and `load_swebench_dataset`'s (`swebench.harness.utils`), the two places it expands them.
pub const HUB_ALIASES: [(&str, &str); 12] = [
    ("full", "SWE-bench/SWE-bench"),
    ("verified", "SWE-bench/SWE-bench_Verified"),
    ("multilingual", "SWE-bench/SWE-bench_Multilingual"),
    ("multimodal", "SWE-bench/SWE-bench_Multimodal"),
    ("swe-bench", "SWE-bench/SWE-bench"),
    ("swebench", "SWE-bench/SWE-bench"),
    ("swe_bench", "SWE-bench/SWE-bench"),
    ("swe-bench-lite", "SWE-bench/SWE-bench_Lite"),
    ("swebench-lite", "SWE-bench/SWE-bench_Lite"),
    ("swe_bench_lite", "SWE-bench/SWE-bench_Lite"),
    ("swe-bench_lite", "SWE-bench/SWE-bench_Lite"),
    ("lite", "SWE-bench/SWE-bench_Lite"),
];

/// swerve's short names of the other benchmarks' hub datasets whose rows it evaluates
/// ([`crate::dataset::TaskFormat`]), looked up like [`HUB_ALIASES`].
pub const OTHER_HUB_ALIASES: [(&str, &str); 5] = [
    ("pro", "ScaleAI/SWE-bench_Pro"),
    ("swe-bench-pro", "ScaleAI/SWE-bench_Pro"),
    ("swe-bench_pro", "ScaleAI/SWE-bench_Pro"),
    ("rebench-v2", "nebius/SWE-rebench-V2"),
    ("swe-rebench-v2", "nebius/SWE-rebench-V2"),
];

/// The files that hold one split's rows, read in this order: one file, or the shards of a
/// Hugging Face dataset's split. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsFiles(Vec<PathBuf>);

impl RowsFiles {
    fn one(path: PathBuf) -> RowsFiles {
        RowsFiles(vec![path])
    }

    /// The first file: the dataset's rows file, whose folder holds its `environments.json` and
    /// `repos/` (every dataset but a sharded Hugging Face one has exactly one file).
    pub fn first(&self) -> &Path {
        &self.0[0]
    }

    /// Every file, in reading order.
    pub fn files(&self) -> &[PathBuf] {
        &self.0
    }

    /// The rows of every file, in order ([`dataset::read_rows`] on each).
    pub fn read(&self) -> Result<Vec<Instance>, DatasetError> {
        let mut rows = Vec::new();
        for file in &self.0 {
            rows.extend(dataset::read_rows(file)?);
        }
        Ok(rows)
    }
}

/// The folder of the bundled dataset `swerve-mini` in swerve's cache folder, written on first
/// use: its rows ([`SWERVE_MINI_ROWS`]), `environments.json` and `repos/`.
pub fn swerve_mini_dir() -> Result<PathBuf, NameError> {
    swerve_cache::materialise("datasets", SWERVE_MINI, SWERVE_MINI_FILES).map_err(|source| {
        NameError::Bundled {
            cache: swerve_cache::cache_root(),
            source,
        }
    })
}

/// The rows files `name` stands for, with `split` choosing inside a folder or a hub dataset
/// (read from the Hugging Face cache, [`hub_cache`]). A path that does not exist is returned as
/// it is, for the reader to name in its error.
pub fn rows_files(name: impl AsRef<Path>, split: &str) -> Result<RowsFiles, NameError> {
    resolve(name.as_ref(), split, &hub_cache())
}

/// [`rows_files`] with the hub cache given.
fn resolve(path: &Path, split: &str, cache: &Path) -> Result<RowsFiles, NameError> {
    let text = path.to_str().unwrap_or_default();
    if text.eq_ignore_ascii_case(SWERVE_MINI) {
        return Ok(RowsFiles::one(swerve_mini_dir()?.join(SWERVE_MINI_ROWS)));
    }
    // An alias always means the hub dataset (as in SWE-bench, even beside a folder of that
    // name); an id only when no such file or folder exists.
    let hub_id = hub_alias(text).or_else(|| (!path.exists() && is_hub_id(text)).then_some(text));
    match hub_id {
        // SWE-bench reads `<id>/<split>.parquet` when there is one, before asking the hub.
        Some(id) => rows_in_dir(Path::new(id), split).or_else(|_| hub_rows(cache, id, split)),
        None if path.is_dir() => rows_in_dir(path, split),
        None => Ok(RowsFiles::one(path.to_owned())),
    }
}

/// The hub id a short name stands for ([`HUB_ALIASES`], then [`OTHER_HUB_ALIASES`]).
fn hub_alias(name: &str) -> Option<&'static str> {
    let name = name.trim().to_lowercase();
    HUB_ALIASES
        .iter()
        .chain(&OTHER_HUB_ALIASES)
        .find(|(alias, _)| *alias == name)
        .map(|(_, id)| *id)
}

/// `owner/name` in the hub's characters, without a dataset file's extension: how hub ids look,
/// unlike a relative path to a rows file that is missing (which the reader then names).
fn is_hub_id(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    name.split_once('/')
        .is_some_and(|(owner, repo)| part(owner) && part(repo))
        && ![".json", ".jsonl", ".parquet"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

fn rows_in_dir(dir: &Path, split: &str) -> Result<RowsFiles, NameError> {
    for ext in ["jsonl", "json", "parquet"] {
        let p = dir.join(format!("{split}.{ext}"));
        if p.is_file() {
            return Ok(RowsFiles::one(p));
        }
    }
    if let Some(shards) = split_files(dir, split) {
        return Ok(shards);
    }
    let jsonl: Vec<PathBuf> = fs_err::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "jsonl")
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("predictions"))
                })
                .collect()
        })
        .unwrap_or_default();
    // A folder's only rows file stands for any split (a curated `instances.jsonl`), unless
    // its name is another split's: `--split dev` never reads `train.jsonl`.
    match jsonl.as_slice() {
        [one] if !is_other_split(one, split) => {
            tracing::warn!(
                "{} has no {split} split: reading its only rows file, {}",
                dir.display(),
                one.display()
            );
            Ok(RowsFiles::one(one.clone()))
        }
        _ => Err(NameError::NoRows {
            dir: dir.to_owned(),
            split: split.to_owned(),
        }),
    }
}

/// Whether `file` is named after a split other than `split` (`train.jsonl` for `dev`).
fn is_other_split(file: &Path, split: &str) -> bool {
    const SPLITS: [&str; 5] = ["train", "test", "dev", "validation", "val"];
    file.file_stem()
        .and_then(|stem| stem.to_str())
        .is_some_and(|stem| SPLITS.contains(&stem) && stem != split)
}

/// The Hugging Face hub cache, found as `huggingface_hub` finds it: `$HF_HUB_CACHE`, else
/// `$HUGGINGFACE_HUB_CACHE` (its older name), else `$HF_HOME/hub`, else
/// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`. Empty variables count as
/// unset.
pub fn hub_cache() -> PathBuf {
    hub_cache_from(|name| std::env::var_os(name))
}

/// [`hub_cache`] with the environment given.
fn hub_cache_from(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let var = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
        .or_else(|| var("HF_HOME").map(|home| home.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|cache| cache.join("huggingface/hub")))
        .or_else(|| var("HOME").map(|home| home.join(".cache/huggingface/hub")))
        .unwrap_or_else(|| PathBuf::from("~/.cache/huggingface/hub"))
}

/// The files of `split` of the hub dataset `id` in the hub cache `cache`, laid out as
/// `hf download <id> --repo-type dataset` writes it: `datasets--<owner>--<name>/`, whose
/// `refs/main` names the commit of the snapshot `snapshots/<commit>/` (links into `blobs/`).
fn hub_rows(cache: &Path, id: &str, split: &str) -> Result<RowsFiles, NameError> {
    let not_cached = || NameError::NotCached {
        id: id.to_owned(),
        cache: cache.to_owned(),
    };
    let repo = repo_dir(cache, id).ok_or_else(not_cached)?;
    let snapshot = snapshot_dir(&repo).ok_or_else(not_cached)?;
    split_files(&snapshot, split).ok_or_else(|| NameError::NoSplit {
        id: id.to_owned(),
        split: split.to_owned(),
        snapshot,
    })
}

/// The cache's folder of dataset `id`, `datasets--<owner>--<name>`; when it is not there under
/// the id's own spelling, one whose name differs only in case (the hub matches ids so, and the
/// folder keeps the spelling the download used).
fn repo_dir(cache: &Path, id: &str) -> Option<PathBuf> {
    let name = format!("datasets--{}", id.replace('/', "--"));
    let exact = cache.join(&name);
    if exact.is_dir() {
        return Some(exact);
    }
    let mut found: Vec<PathBuf> = fs_err::read_dir(cache)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().eq_ignore_ascii_case(&name))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The snapshot `refs/main` names, else the only one (a download of a commit by its hash
/// writes no ref).
fn snapshot_dir(repo: &Path) -> Option<PathBuf> {
    let snapshots = repo.join("snapshots");
    if let Ok(commit) = fs_err::read_to_string(repo.join("refs/main")) {
        let commit = commit.trim();
        if !commit.is_empty() && snapshots.join(commit).is_dir() {
            return Some(snapshots.join(commit));
        }
    }
    let mut dirs = fs_err::read_dir(&snapshots)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir());
    match (dirs.next(), dirs.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// The parquet files of `split` in a Hugging Face dataset folder (a hub snapshot, or a folder
/// `hf download --local-dir` wrote): the shards `data/<split>-00000-of-00002.parquet`,
/// `data/<split>-00001-of-00002.parquet` in order (a name may go on after the count, as some
/// `datasets` versions write it), all of them or none; else `data/<split>.parquet` or
/// `<split>.parquet`. The shards are listed by name, so that a link whose blob is missing is
/// reported by the reader rather than skipped.
fn split_files(dir: &Path, split: &str) -> Option<RowsFiles> {
    let data = dir.join("data");
    let mut shards: Vec<(u64, u64, PathBuf)> = fs_err::read_dir(&data)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let (index, count) = shard_number(&name, split)?;
                    Some((index, count, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    shards.sort();
    let complete = shards
        .iter()
        .enumerate()
        .all(|(at, (index, count, _))| *index == at as u64 && *count == shards.len() as u64);
    if !shards.is_empty() {
        return complete.then(|| RowsFiles(shards.into_iter().map(|(_, _, p)| p).collect()));
    }
    [
        data.join(format!("{split}.parquet")),
        dir.join(format!("{split}.parquet")),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .map(RowsFiles::one)
}

/// `(index, count)` of a shard named `<split>-<index>-of-<count>[-…].parquet`.
fn shard_number(name: &str, split: &str) -> Option<(u64, u64)> {
    let rest = name
        .strip_prefix(split)?
        .strip_prefix('-')?
        .strip_suffix(".parquet")?;
    let (index, rest) = rest.split_once("-of-")?;
    let count_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (count, tail) = rest.split_at(count_len);
    if !(tail.is_empty() || tail.starts_with('-')) || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((index.parse().ok()?, count.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;

    /// Writes a parquet file of rows with these ids, its columns as the hub's (strings).
    fn write_parquet(path: &Path, ids: &[&str]) {
        use parquet::data_type::{ByteArray, ByteArrayType};
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        let schema = parse_message_type(
            "message row {
                REQUIRED BYTE_ARRAY instance_id (UTF8);
                REQUIRED BYTE_ARRAY repo (UTF8);
                REQUIRED BYTE_ARRAY FAIL_TO_PASS (UTF8);
                REQUIRED BYTE_ARRAY PASS_TO_PASS (UTF8);
            }",
        )
        .unwrap();
        let file = fs_err::File::create(path).unwrap();
        let mut writer =
            SerializedFileWriter::new(file, Arc::new(schema), Default::default()).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let column = |text: &str| vec![ByteArray::from(text); ids.len()];
        let columns = [
            ids.iter().map(|id| ByteArray::from(*id)).collect(),
            column("o/r"),
            column(r#"["t"]"#),
            column("[]"),
        ];
        for values in columns {
            let mut writer = group.next_column().unwrap().unwrap();
            writer
                .typed::<ByteArrayType>()
                .write_batch(&values, None, None)
                .unwrap();
            writer.close().unwrap();
        }
        group.close().unwrap();
        writer.close().unwrap();
    }

    /// Writes dataset `id` into the hub cache `cache` as `hf download` does: each file a blob,
    /// linked from the snapshot that `refs/main` names. Files are written in the order given.
    fn cache_dataset(cache: &Path, id: &str, files: &[(&str, &[&str])]) -> PathBuf {
        let repo = cache.join(format!("datasets--{}", id.replace('/', "--")));
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let snapshot = repo.join("snapshots").join(commit);
        fs_err::create_dir_all(repo.join("blobs")).unwrap();
        fs_err::create_dir_all(repo.join("refs")).unwrap();
        fs_err::write(repo.join("refs/main"), commit).unwrap();
        for (at, (file, ids)) in files.iter().enumerate() {
            let blob = repo.join("blobs").join(format!("blob{at}"));
            write_parquet(&blob, ids);
            let link = snapshot.join(file);
            fs_err::create_dir_all(link.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&blob, &link).unwrap();
        }
        snapshot
    }

    fn ids(files: &RowsFiles) -> Vec<String> {
        let rows = files.read().unwrap();
        rows.into_iter().map(|r| r.instance_id).collect()
    }

    #[test]
    fn names_resolve_to_rows_files() {
        let mini = rows_files("swerve-mini", "test").unwrap();
        assert!(
            mini.first().ends_with(SWERVE_MINI_ROWS) && mini.first().is_file(),
            "{}",
            mini.first().display()
        );
        assert_eq!(rows_files("SWERVE-MINI", "train").unwrap(), mini);
        for missing in ["missing.jsonl", "data/missing.jsonl", "a/b/c"] {
            assert_eq!(
                rows_files(missing, "test").unwrap().files(),
                [PathBuf::from(missing)]
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let err = rows_files(dir.path(), "dev").unwrap_err();
        assert!(err.to_string().starts_with("no dev.jsonl"), "{err}");
        fs_err::write(dir.path().join("tasks.jsonl"), "").unwrap();
        fs_err::write(dir.path().join("predictions.jsonl"), "").unwrap();
        assert_eq!(
            rows_files(dir.path(), "dev").unwrap().first(),
            dir.path().join("tasks.jsonl")
        );
        fs_err::write(dir.path().join("dev.parquet"), "").unwrap();
        assert_eq!(
            rows_files(dir.path(), "dev").unwrap().first(),
            dir.path().join("dev.parquet")
        );
        // The only rows file is another split's: never read for this one.
        let other = tempfile::tempdir().unwrap();
        fs_err::write(other.path().join("train.jsonl"), "").unwrap();
        let err = rows_files(other.path(), "dev").unwrap_err();
        assert!(err.to_string().starts_with("no dev.jsonl"), "{err}");
        assert_eq!(
            rows_files(other.path(), "train").unwrap().first(),
            other.path().join("train.jsonl")
        );
    }

    #[test]
    fn hub_names_read_every_shard_from_the_hugging_face_cache() {
        let cache = tempfile::tempdir().unwrap();
        // The second shard first: the order comes from the names, not from the folder.
        let snapshot = cache_dataset(
            cache.path(),
            "SWE-bench/SWE-bench_Verified",
            &[
                ("data/test-00001-of-00002.parquet", &["c", "d"]),
                ("data/test-00000-of-00002.parquet", &["a", "b"]),
                ("data/dev-00000-of-00001.parquet", &["x"]),
                ("README.md", &[]),
            ],
        );
        cache_dataset(
            cache.path(),
            "princeton-nlp/SWE-bench_Verified",
            &[("data/test-00000-of-00001.parquet", &["p"])],
        );
        let shards = [
            snapshot.join("data/test-00000-of-00002.parquet"),
            snapshot.join("data/test-00001-of-00002.parquet"),
        ];
        for name in [
            "verified",
            " Verified",
            "SWE-bench/SWE-bench_Verified",
            "swe-bench/swe-bench_verified",
        ] {
            let files = resolve(Path::new(name), "test", cache.path()).unwrap();
            assert_eq!(files.files(), shards, "{name}");
            assert_eq!(ids(&files), ["a", "b", "c", "d"], "{name}");
        }
        let dev = resolve(Path::new("verified"), "dev", cache.path()).unwrap();
        assert_eq!(ids(&dev), ["x"]);
        // princeton-nlp's copy is a dataset of its own on the hub, read from its own folder.
        let princeton = resolve(
            Path::new("princeton-nlp/SWE-bench_Verified"),
            "test",
            cache.path(),
        );
        assert_eq!(ids(&princeton.unwrap()), ["p"]);

        // A download of a commit by hash writes no ref: the only snapshot is read.
        let repo = cache.path().join("datasets--SWE-bench--SWE-bench_Verified");
        fs_err::remove_file(repo.join("refs/main")).unwrap();
        let files = resolve(Path::new("verified"), "test", cache.path()).unwrap();
        assert_eq!(files.files(), shards);

        // A folder `hf download --local-dir` wrote reads the same.
        assert_eq!(rows_files(&snapshot, "test").unwrap().files(), shards);

        // `pro` is SWE-bench Pro's hub dataset, read from the same cache.
        cache_dataset(
            cache.path(),
            "ScaleAI/SWE-bench_Pro",
            &[("data/test-00000-of-00001.parquet", &["instance_o__r-1"])],
        );
        let pro = resolve(Path::new("pro"), "test", cache.path()).unwrap();
        assert_eq!(ids(&pro), ["instance_o__r-1"]);
    }

    #[test]
    fn missing_hub_datasets_name_the_download_command() {
        let cache = tempfile::tempdir().unwrap();
        let message = |name: &str, split: &str| {
            resolve(Path::new(name), split, cache.path())
                .unwrap_err()
                .to_string()
        };
        let not_cached = |id: &str| {
            format!(
                "dataset `{id}` is not in the Hugging Face cache {}; download it with `hf download {id} --repo-type dataset`",
                cache.path().display()
            )
        };
        assert_eq!(
            message("lite", "test"),
            not_cached("SWE-bench/SWE-bench_Lite")
        );
        assert_eq!(message("FULL", "test"), not_cached("SWE-bench/SWE-bench"));
        assert_eq!(message("pro", "test"), not_cached("ScaleAI/SWE-bench_Pro"));
        assert_eq!(
            message("SWE-rebench-V2", "train"),
            not_cached("nebius/SWE-rebench-V2")
        );
        assert_eq!(
            message("princeton-nlp/SWE-bench_Lite", "test"),
            not_cached("princeton-nlp/SWE-bench_Lite")
        );
        let missing_cache = cache.path().join("nowhere");
        assert!(matches!(
            resolve(Path::new("multimodal"), "test", &missing_cache),
            Err(NameError::NotCached { id, .. }) if id == "SWE-bench/SWE-bench_Multimodal"
        ));

        let snapshot = cache_dataset(
            cache.path(),
            "SWE-bench/SWE-bench_Multilingual",
            &[("data/test-00001-of-00002.parquet", &["b"])],
        );
        let no_split = |split: &str| {
            format!(
                "the Hugging Face cache holds `SWE-bench/SWE-bench_Multilingual` but not its whole `{split}` split ({split}.parquet or data/{split}-NNNNN-of-NNNNN.parquet in {}); download it with `hf download SWE-bench/SWE-bench_Multilingual --repo-type dataset`",
                snapshot.display()
            )
        };
        // One shard of two, and a split the snapshot does not hold.
        assert_eq!(message("multilingual", "test"), no_split("test"));
        assert_eq!(message("multilingual", "dev"), no_split("dev"));
        // A shard whose blob is missing is the reader's error, naming the file.
        let repo = cache
            .path()
            .join("datasets--SWE-bench--SWE-bench_Multilingual");
        std::os::unix::fs::symlink(
            repo.join("blobs/missing"),
            snapshot.join("data/test-00000-of-00002.parquet"),
        )
        .unwrap();
        let files = resolve(Path::new("multilingual"), "test", cache.path()).unwrap();
        let err = files.read().unwrap_err().to_string();
        assert!(err.contains("test-00000-of-00002.parquet"), "{err}");
    }

    #[test]
    fn shard_names() {
        let check = |name: &str, expect: Option<(u64, u64)>| {
            assert_eq!(shard_number(name, "test"), expect, "{name}");
        };
        check("test-00000-of-00001.parquet", Some((0, 1)));
        check("test-00002-of-00010-8a7b.parquet", Some((2, 10)));
        check("test.parquet", None);
        check("test-00000-of-00001.json", None);
        check("testing-00000-of-00001.parquet", None);
        check("test-x-of-00001.parquet", None);
        check("test-00000-of-1x.parquet", None);
    }

    #[test]
    fn hub_cache_is_found_as_huggingface_hub_finds_it() {
        let check = |vars: &[(&str, &str)], expect: &str| {
            let env: BTreeMap<&str, &str> = vars.iter().copied().collect();
            let found = hub_cache_from(|name| env.get(name).map(OsString::from));
            assert_eq!(found, PathBuf::from(expect), "{vars:?}");
        };
        let all = [
            ("HF_HUB_CACHE", "/hub"),
            ("HUGGINGFACE_HUB_CACHE", "/old-hub"),
            ("HF_HOME", "/hf"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ];
        check(&all, "/hub");
        check(&all[1..], "/old-hub");
        check(&all[2..], "/hf/hub");
        check(&all[3..], "/xdg/huggingface/hub");
        check(&all[4..], "/home/u/.cache/huggingface/hub");
        check(&[("HF_HUB_CACHE", ""), ("HF_HOME", "/hf")], "/hf/hub");
        check(&[], "~/.cache/huggingface/hub");
    }
}
