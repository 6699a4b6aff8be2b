//! Stage 7: the files other tools read. `tasks.jsonl`: one SWE-bench-style row per
//! task, sorted by repository and number, readable as a `swerve_swebench::Instance`.
//! `rejected.jsonl`: one row per other PR, same order, with a reason from [`Reason`].
//! `funnel.json`: events read, counts per stage and reason, input problems, time per stage.
//! Every file but the timings is a function of the input, so two runs write identical files.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CurateError;
use crate::events::InputProblem;
use crate::filter::Reason;

/// One task row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// `owner__name-N`.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// The PR number.
    pub pull_number: u64,
    /// Linked issues, ascending.
    pub issue_numbers: Vec<u64>,
    /// The merge base of the PR's base and head.
    pub base_commit: String,
    /// The head commit.
    pub head_commit: String,
    /// The merge, squash or last rebased commit, when known.
    pub merge_commit: Option<String>,
    /// When the PR was opened.
    pub created_at: String,
    /// When it was merged.
    pub merged_at: String,
    /// The linked issues' `title\nbody\n`, in number order.
    pub problem_statement: String,
    /// Edited code files (existing at the base) and relevant files: text at the base.
    pub code_context: BTreeMap<String, String>,
    /// Edited code files: text at the head (`""` when deleted).
    pub oracle_new_content: BTreeMap<String, String>,
    /// Every edited path.
    pub edited_files: Vec<String>,
    /// Edited code files (the oracle's paths).
    pub edited_code_files: Vec<String>,
    /// Edited test files (text).
    pub edited_test_files: Vec<String>,
    /// Edited binary files.
    pub binary_files: Vec<String>,
    /// Relevant unmodified files, best first.
    pub relevant_files: Vec<String>,
    /// Unified diff of every non-test file (what SWE-bench calls the gold patch).
    pub patch: String,
    /// Unified diff of the test files.
    pub test_patch: String,
    /// The dedup key of the code files' diff.
    pub code_patch_sha256: String,
}

/// One rejected PR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    /// `owner/name`.
    pub repo: String,
    /// The PR number.
    pub pull_number: u64,
    /// The first rule that applied.
    pub reason: Reason,
    /// What the rule found.
    pub detail: String,
    /// `owner/name#N` of the task this one duplicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// Merge time, for rows that took part in dedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_at: Option<String>,
    /// Dedup key, for rows that took part in dedup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_patch_sha256: Option<String>,
}

impl Task {
    /// The sort key of every output file: repository, then number.
    pub fn order(&self) -> (&str, u64) {
        (&self.repo, self.pull_number)
    }

    /// This task's row when it turns out to duplicate `original` (`owner/name#N`).
    pub fn into_duplicate(self, original: String) -> Rejected {
        Rejected {
            detail: duplicate_detail(&original),
            repo: self.repo,
            pull_number: self.pull_number,
            reason: Reason::Duplicate,
            duplicate_of: Some(original),
            merged_at: Some(self.merged_at),
            code_patch_sha256: Some(self.code_patch_sha256),
        }
    }
}

impl Rejected {
    /// The sort key of every output file: repository, then number.
    pub fn order(&self) -> (&str, u64) {
        (&self.repo, self.pull_number)
    }

    /// The dedup entry of a row that took part in dedup (it carries a merge time and a key).
    pub fn dedup_entry(&self) -> Option<DedupEntry> {
        Some(DedupEntry {
            merged_at: self.merged_at.clone()?,
            repo: self.repo.clone(),
            number: self.pull_number,
            key: self.code_patch_sha256.clone()?,
        })
    }

    /// This row when it turns out to duplicate `original`: dedup comes before the rules that
    /// rejected it after the clone stage, so the reason becomes `duplicate`.
    pub fn into_duplicate(mut self, original: String) -> Rejected {
        self.reason = Reason::Duplicate;
        self.detail = duplicate_detail(&original);
        self.duplicate_of = Some(original);
        self
    }
}

/// The detail of a duplicate's rejection.
pub(crate) fn duplicate_detail(original: &str) -> String {
    format!("same code patch as {original}")
}

/// What dedup needs of one candidate, owned (the rows themselves wait on disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupEntry {
    /// Merge time.
    pub merged_at: String,
    /// `owner/name`.
    pub repo: String,
    /// PR number.
    pub number: u64,
    /// The dedup key.
    pub key: String,
}

impl DedupEntry {
    /// The entry of a task.
    pub fn of_task(task: &Task) -> DedupEntry {
        DedupEntry {
            merged_at: task.merged_at.clone(),
            repo: task.repo.clone(),
            number: task.pull_number,
            key: task.code_patch_sha256.clone(),
        }
    }
}

/// For every entry, in any order: which `(repo, number)` duplicates which `owner/name#N`
/// (see `crate::dedup::duplicates`).
pub(crate) fn duplicate_map(entries: &[DedupEntry]) -> HashMap<(String, u64), String> {
    let keys: Vec<crate::dedup::Candidate<'_>> = entries
        .iter()
        .map(|e| crate::dedup::Candidate {
            merged_at: &e.merged_at,
            repo: &e.repo,
            number: e.number,
            key: &e.key,
        })
        .collect();
    crate::dedup::duplicates(&keys)
        .into_iter()
        .zip(entries)
        .filter_map(|(dup, e)| Some(((e.repo.clone(), e.number), dup?)))
        .collect()
}

/// One output row: a task or a rejection (also the line format of spilled partitions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Row {
    /// A task.
    Task(Box<Task>),
    /// A rejected PR.
    Rejected(Rejected),
}

impl Row {
    /// The sort key: repository, then number.
    pub fn order(&self) -> (&str, u64) {
        match self {
            Row::Task(t) => t.order(),
            Row::Rejected(r) => r.order(),
        }
    }

    /// The row after dedup, given the duplicates found over all candidates.
    pub fn deduplicated(self, duplicates: &HashMap<(String, u64), String>) -> Row {
        let original = {
            let (repo, number) = self.order();
            duplicates.get(&(repo.to_owned(), number)).cloned()
        };
        match (self, original) {
            (Row::Task(t), Some(original)) => Row::Rejected(t.into_duplicate(original)),
            (Row::Rejected(r), Some(original)) => Row::Rejected(r.into_duplicate(original)),
            (row, None) => row,
        }
    }
}

/// Events counters of a run (the same in every shard: each reads every file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    /// Files read.
    pub files: u64,
    /// Files that ended early or could not be opened.
    pub broken_files: u64,
    /// Non-empty lines.
    pub lines: u64,
    /// Lines that were not a JSON event.
    pub invalid_lines: u64,
    /// Kept events seen again (same id).
    pub duplicate_events: u64,
    /// Distinct `PullRequestEvent`s.
    pub pull_request_events: u64,
    /// Of those, events with trimmed payloads (GH Archive's era from 2025-10-07: no title,
    /// body or merge status).
    #[serde(default)]
    pub trimmed_pull_request_events: u64,
    /// Distinct opened `IssuesEvent`s.
    pub opened_issues: u64,
}

/// One funnel stage: how many PRs are left after its rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// The rule (`excluded_repo`, …) whose survivors are counted.
    pub after: String,
    /// PRs left.
    pub remaining: u64,
}

/// `funnel.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Funnel {
    /// Events read.
    pub events: EventCounts,
    /// Pull requests seen (one per `(repo, number)` in this shard).
    pub pull_requests: u64,
    /// PRs left after each rule, in rule order.
    pub stages: Vec<Stage>,
    /// Rejections per reason (every reason, zero included).
    pub reasons: BTreeMap<String, u64>,
    /// Tasks written.
    pub tasks: u64,
    /// Invalid lines and broken files, with file and line (the first 1000).
    pub problems: Vec<InputProblem>,
    /// Wall-clock milliseconds per stage (the only part that differs between runs): `events`
    /// (reading and partitioning), `aggregate` (folding the partitions), `clones` (the clone
    /// stage and the rules), `dedup` (dedup and writing).
    pub timings_ms: BTreeMap<String, u64>,
}

/// At most this many input problems are listed (all are counted).
pub(crate) const MAX_PROBLEMS: usize = 1000;

impl Funnel {
    /// The funnel of the rows counted in `rows`.
    pub fn new(
        events: EventCounts,
        mut problems: Vec<InputProblem>,
        timings_ms: BTreeMap<String, u64>,
        rows: &RowCounts,
    ) -> Funnel {
        let mut reasons: BTreeMap<String, u64> = Reason::ALL
            .iter()
            .map(|r| (r.as_str().to_owned(), 0))
            .collect();
        for (reason, n) in &rows.rejected {
            *reasons.entry(reason.as_str().to_owned()).or_default() += n;
        }
        let total = rows.tasks + rows.rejected.values().sum::<u64>();
        let mut remaining = total;
        let stages = Reason::ALL
            .iter()
            .map(|r| {
                remaining -= reasons[r.as_str()];
                Stage {
                    after: r.as_str().to_owned(),
                    remaining,
                }
            })
            .collect();
        problems.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        problems.dedup();
        problems.truncate(MAX_PROBLEMS);
        Funnel {
            events,
            pull_requests: total,
            stages,
            reasons,
            tasks: rows.tasks,
            problems,
            timings_ms,
        }
    }

    /// The summary printed on stderr at the end of a run.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "events: {} lines in {} files ({} invalid, {} broken files)\npull requests: {}\n",
            self.events.lines,
            self.events.files,
            self.events.invalid_lines,
            self.events.broken_files,
            self.pull_requests
        );
        for stage in &self.stages {
            let dropped = self.reasons[&stage.after];
            if dropped > 0 {
                out += &format!(
                    "  {:<16} -{:<6} {} left\n",
                    stage.after, dropped, stage.remaining
                );
            }
        }
        out += &format!("tasks: {}", self.tasks);
        out
    }
}

/// How many rows a run wrote: tasks, and rejections per reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowCounts {
    /// Tasks.
    pub tasks: u64,
    /// Rejections per reason.
    pub rejected: BTreeMap<Reason, u64>,
}

/// Where a run writes: the folder, and whether `tasks.parquet` joins the JSONL files.
#[derive(Debug, Clone)]
pub struct Output {
    /// The output folder (created when missing).
    pub dir: PathBuf,
    /// Write `tasks.parquet` too.
    pub parquet: bool,
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> CurateError + '_ {
    move |source| CurateError::Write {
        path: path.to_owned(),
        source,
    }
}

/// A JSONL file written row by row, at its path whole once finished (a run that stops leaves
/// the previous run's file).
struct Jsonl {
    path: PathBuf,
    out: swerve_cache::AtomicFile,
}

impl Jsonl {
    fn create(path: PathBuf) -> Result<Jsonl, CurateError> {
        let out = swerve_cache::AtomicFile::create(&path).map_err(write_error(&path))?;
        Ok(Jsonl { out, path })
    }

    fn push<T: Serialize>(&mut self, row: &T) -> Result<(), CurateError> {
        serde_json::to_writer(&mut self.out, row).map_err(|e| write_error(&self.path)(e.into()))?;
        self.out.write_all(b"\n").map_err(write_error(&self.path))
    }

    fn finish(self) -> Result<(), CurateError> {
        self.out.commit().map_err(write_error(&self.path))
    }
}

/// Writes the output files row by row, in the order given (callers give rows sorted by
/// repository and number), and `funnel.json` at the end.
pub struct Writer {
    dir: PathBuf,
    tasks: Jsonl,
    rejected: Jsonl,
    parquet: Option<crate::table::TableWriter>,
    counts: RowCounts,
    last: Option<(String, u64)>,
}

impl Writer {
    /// Creates `tasks.jsonl`, `rejected.jsonl` (and `tasks.parquet`) in `output.dir`.
    pub fn create(output: &Output) -> Result<Writer, CurateError> {
        let dir = &output.dir;
        fs_err::create_dir_all(dir).map_err(write_error(dir))?;
        Ok(Writer {
            tasks: Jsonl::create(dir.join("tasks.jsonl"))?,
            rejected: Jsonl::create(dir.join("rejected.jsonl"))?,
            parquet: output
                .parquet
                .then(|| crate::table::TableWriter::create(dir))
                .transpose()?,
            dir: dir.clone(),
            counts: RowCounts::default(),
            last: None,
        })
    }

    /// Writes one row.
    pub fn push(&mut self, row: Row) -> Result<(), CurateError> {
        if cfg!(debug_assertions) {
            let (repo, number) = row.order();
            assert!(
                self.last
                    .as_ref()
                    .is_none_or(|(r, n)| (r.as_str(), *n) < (repo, number)),
                "rows out of order at {repo}#{number}"
            );
            self.last = Some((repo.to_owned(), number));
        }
        match row {
            Row::Task(task) => {
                self.counts.tasks += 1;
                self.tasks.push(&task)?;
                if let Some(table) = &mut self.parquet {
                    table.push(*task)?;
                }
            }
            Row::Rejected(rejected) => {
                *self.counts.rejected.entry(rejected.reason).or_default() += 1;
                self.rejected.push(&rejected)?;
            }
        }
        Ok(())
    }

    /// Flushes the rows and writes `funnel.json`; returns the funnel.
    pub fn finish(
        self,
        events: EventCounts,
        problems: Vec<InputProblem>,
        timings_ms: BTreeMap<String, u64>,
    ) -> Result<Funnel, CurateError> {
        self.tasks.finish()?;
        self.rejected.finish()?;
        if let Some(table) = self.parquet {
            table.finish()?;
        }
        let funnel = Funnel::new(events, problems, timings_ms, &self.counts);
        let path = self.dir.join("funnel.json");
        let mut text =
            serde_json::to_string_pretty(&funnel).map_err(|e| write_error(&path)(e.into()))?;
        text.push('\n');
        swerve_cache::write_atomic(&path, text).map_err(write_error(&path))?;
        Ok(funnel)
    }
}

/// Reads a JSONL file of rows written by a [`Writer`].
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, CurateError> {
    let read_error = |source| CurateError::Read {
        path: path.to_owned(),
        source,
    };
    let file = fs_err::File::open(path).map_err(read_error)?;
    let mut rows = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        if line.trim().is_empty() {
            continue;
        }
        rows.push(
            serde_json::from_str(&line).map_err(|source| CurateError::Row {
                path: path.to_owned(),
                line: i + 1,
                source,
            })?,
        );
    }
    Ok(rows)
}

/// Reads `funnel.json`.
pub fn read_funnel(path: &Path) -> Result<Funnel, CurateError> {
    let text = fs_err::read_to_string(path).map_err(|source| CurateError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CurateError::Row {
        path: path.to_owned(),
        line: 1,
        source,
    })
}
