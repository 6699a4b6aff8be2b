//! Stage 7: the files other tools read. `tasks.jsonl`: one SWE-bench-style row per
//! task, sorted by repository and number, readable as a `swerve_swebench::Instance`.
//! `rejected.jsonl`: one row per other PR, same order, with a reason from [`Reason`].
//! `funnel.json`: events read, counts per stage and reason, input problems, time per stage.
//! Every file but the timings is a function of the input, so two runs write identical files.

use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::CurateError;
use crate::events::InputProblem;
use crate::filter::{Candidate, Reason};

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
    /// The row of a candidate that passed every rule.
    pub fn from_candidate(c: Candidate) -> Task {
        let mut code_context = c.code_context;
        let relevant_files = c.relevant.iter().map(|(p, _)| p.clone()).collect();
        code_context.extend(c.relevant);
        Task {
            instance_id: format!("{}-{}", c.repo.replace('/', "__"), c.number),
            repo: c.repo,
            pull_number: c.number,
            issue_numbers: c.issues,
            base_commit: c.base,
            head_commit: c.head,
            merge_commit: c.merge_commit,
            created_at: c.created_at,
            merged_at: c.merged_at,
            problem_statement: c.problem_statement,
            code_context,
            oracle_new_content: c.oracle_new_content,
            edited_files: c.edited_files,
            edited_code_files: c.code_files,
            edited_test_files: c.test_files,
            binary_files: c.binary_files,
            relevant_files,
            patch: c.patch,
            test_patch: c.test_patch,
            code_patch_sha256: c.key,
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
    /// Wall-clock milliseconds per stage (the only part that differs between runs).
    pub timings_ms: BTreeMap<String, u64>,
}

/// At most this many input problems are listed (all are counted).
pub const MAX_PROBLEMS: usize = 1000;

impl Funnel {
    /// The funnel of `tasks` and `rejected`.
    pub fn new(
        events: EventCounts,
        mut problems: Vec<InputProblem>,
        timings_ms: BTreeMap<String, u64>,
        tasks: &[Task],
        rejected: &[Rejected],
    ) -> Funnel {
        let mut reasons: BTreeMap<String, u64> = Reason::ALL
            .iter()
            .map(|r| (r.as_str().to_owned(), 0))
            .collect();
        for row in rejected {
            *reasons.entry(row.reason.as_str().to_owned()).or_default() += 1;
        }
        let total = (tasks.len() + rejected.len()) as u64;
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
            tasks: tasks.len() as u64,
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

/// Sorts rows by repository and number (the stable order of every output file).
pub fn sort_rows(tasks: &mut [Task], rejected: &mut [Rejected]) {
    tasks.sort_by(|a, b| (&a.repo, a.pull_number).cmp(&(&b.repo, b.pull_number)));
    rejected.sort_by(|a, b| (&a.repo, a.pull_number).cmp(&(&b.repo, b.pull_number)));
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> CurateError + '_ {
    move |source| CurateError::Write {
        path: path.to_owned(),
        source,
    }
}

fn write_jsonl<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), CurateError> {
    let file = fs_err::File::create(path).map_err(write_error(path))?;
    let mut out = BufWriter::new(file);
    for row in rows {
        serde_json::to_writer(&mut out, row).map_err(|e| write_error(path)(e.into()))?;
        out.write_all(b"\n").map_err(write_error(path))?;
    }
    out.flush().map_err(write_error(path))
}

/// Writes the three files into `dir` (created when missing).
pub fn write(
    dir: &Path,
    tasks: &[Task],
    rejected: &[Rejected],
    funnel: &Funnel,
) -> Result<(), CurateError> {
    fs_err::create_dir_all(dir).map_err(write_error(dir))?;
    write_jsonl(&dir.join("tasks.jsonl"), tasks)?;
    write_jsonl(&dir.join("rejected.jsonl"), rejected)?;
    let path = dir.join("funnel.json");
    let mut text =
        serde_json::to_string_pretty(funnel).map_err(|e| write_error(&path)(e.into()))?;
    text.push('\n');
    fs_err::write(&path, text).map_err(write_error(&path))
}

/// Reads a JSONL file of rows written by [`write()`].
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
