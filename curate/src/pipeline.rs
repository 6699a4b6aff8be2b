//! `curate run`: the stages in order. Events are read file by file (in parallel, a few files
//! at a time, folded in path order); pull requests are grouped by repository and each
//! repository's clone is opened once and read by one worker; candidates are deduplicated in
//! merge order and fitted to the prompt budget; rows are written sorted.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use crate::aggregate::{Aggregate, PullRequest};
use crate::clone::Clone;
use crate::config::Config;
use crate::decontaminate::Exclusions;
use crate::dedup::{self, duplicates};
use crate::error::CurateError;
use crate::events::{self, InputProblem, Kept};
use crate::filter::{self, Candidate, Context, Reason, Rejection};
use crate::output::{EventCounts, Funnel, Rejected, Task, sort_rows};
use crate::progress;

/// Where a run reads from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Event files and folders of them.
    pub events: Vec<PathBuf>,
    /// The folder of bare mirrors `<owner>/<name>.git`.
    pub repos: PathBuf,
}

/// What a run produced, before it is written.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Tasks, sorted.
    pub tasks: Vec<Task>,
    /// Rejections, sorted.
    pub rejected: Vec<Rejected>,
    /// The funnel.
    pub funnel: Funnel,
}

impl Outcome {
    /// Writes `tasks.jsonl`, `rejected.jsonl` and `funnel.json` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), CurateError> {
        crate::output::write(dir, &self.tasks, &self.rejected, &self.funnel)
    }

    /// Writes `tasks.parquet` into `dir` (the rows of `tasks.jsonl`; see [`crate::table`]).
    pub fn write_parquet(&self, dir: &Path) -> Result<(), CurateError> {
        crate::table::write(dir, &self.tasks)
    }
}

fn pool(jobs: usize) -> Result<rayon::ThreadPool, CurateError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| CurateError::Setting {
            name: "jobs",
            detail: e.to_string(),
        })
}

/// Runs every stage on `inputs` with `config`.
pub fn run(inputs: &Inputs, config: &Config) -> Result<Outcome, CurateError> {
    config.validate()?;
    let pool = pool(config.jobs)?;
    let mut timings = BTreeMap::new();
    let started = Instant::now();
    let (aggregate, counts, problems, benchmark_ids) = read_events(inputs, config, &pool)?;
    timings.insert("events".to_owned(), started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let exclusions = Exclusions::new(
        &config.exclude_repos,
        &config.exclude_repo_ids,
        &benchmark_ids,
    );
    let endpoint = config
        .relevant_endpoint
        .as_ref()
        .filter(|_| config.relevant_files > 0)
        .map(crate::endpoint::Endpoint::new);
    let cx = Context {
        config,
        exclusions: &exclusions,
        aggregate: &aggregate,
        endpoint: endpoint.as_ref(),
    };
    let mut by_repo: BTreeMap<&str, Vec<&PullRequest>> = BTreeMap::new();
    for pr in aggregate.pull_requests.values() {
        by_repo.entry(pr.repo.as_str()).or_default().push(pr);
    }
    let bar = progress::bar(aggregate.pull_requests.len(), "clones");
    let verdicts: Vec<(&PullRequest, Result<Candidate, Rejection>)> = pool.install(|| {
        by_repo
            .par_iter()
            .flat_map_iter(|(name, prs)| {
                let clone = Clone::open(&inputs.repos, name);
                let out: Vec<_> = prs
                    .iter()
                    .map(|pr| {
                        let verdict = filter::evaluate(pr, &clone, &cx);
                        bar.inc(1);
                        (*pr, verdict)
                    })
                    .collect();
                out
            })
            .collect()
    });
    bar.finish_and_clear();
    timings.insert("clones".to_owned(), started.elapsed().as_millis() as u64);

    let started = Instant::now();
    let mut rejected = Vec::new();
    let mut candidates = Vec::new();
    for (pr, verdict) in verdicts {
        match verdict {
            Ok(candidate) => candidates.push(candidate),
            Err(rejection) => {
                if matches!(
                    rejection.reason,
                    Reason::MissingClone | Reason::MissingCommit | Reason::UnreadableClone
                ) {
                    tracing::debug!(repo = %pr.repo, number = pr.number, reason = rejection.reason.as_str(), "{}", rejection.detail);
                }
                rejected.push(Rejected {
                    repo: pr.repo.clone(),
                    pull_number: pr.number,
                    reason: rejection.reason,
                    detail: rejection.detail,
                    duplicate_of: None,
                    merged_at: None,
                    code_patch_sha256: None,
                });
            }
        }
    }
    let mut tasks = finish(candidates, config, &mut rejected);
    timings.insert("dedup".to_owned(), started.elapsed().as_millis() as u64);
    sort_rows(&mut tasks, &mut rejected);
    let funnel = Funnel::new(counts, problems, timings, &tasks, &rejected);
    Ok(Outcome {
        tasks,
        rejected,
        funnel,
    })
}

type EventsRead = (Aggregate, EventCounts, Vec<InputProblem>, BTreeSet<u64>);

fn read_events(
    inputs: &Inputs,
    config: &Config,
    pool: &rayon::ThreadPool,
) -> Result<EventsRead, CurateError> {
    let files = events::event_files(&inputs.events)?;
    let bar = progress::bar(files.len(), "events");
    let mut aggregate = Aggregate::default();
    let mut counts = EventCounts::default();
    let mut problems = Vec::new();
    let mut benchmark_ids = BTreeSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    // A few files per worker at a time: parallel decoding, bounded memory, path order kept.
    let chunk = pool.current_num_threads().max(1) * 2;
    for group in files.chunks(chunk) {
        let read: Vec<_> = pool.install(|| {
            group
                .par_iter()
                .map(|path| {
                    let read = events::read_file(path);
                    bar.inc(1);
                    read
                })
                .collect()
        });
        for file in read {
            counts.files += 1;
            counts.broken_files += u64::from(file.broken);
            counts.lines += file.lines;
            counts.invalid_lines += file.invalid_lines;
            for problem in &file.problems {
                tracing::warn!(file = %problem.file, line = problem.line, "{}", problem.error);
            }
            if problems.len() < crate::output::MAX_PROBLEMS {
                problems.extend(file.problems);
            }
            benchmark_ids.extend(file.benchmark_ids);
            for event in file.kept {
                if config.shard.is_some_and(|s| !s.contains(event.repo())) {
                    continue;
                }
                // Events without an id cannot be told apart: each is kept.
                if !event.id().is_empty() && !seen.insert(event.id().to_owned()) {
                    counts.duplicate_events += 1;
                    continue;
                }
                match event {
                    Kept::PullRequest(e) => {
                        counts.pull_request_events += 1;
                        counts.trimmed_pull_request_events +=
                            u64::from(e.pull_request.is_trimmed());
                        aggregate.add_pull_request(*e);
                    }
                    Kept::IssueOpened(e) => {
                        counts.opened_issues += 1;
                        aggregate.add_issue(e);
                    }
                }
            }
        }
    }
    bar.finish_and_clear();
    Ok((aggregate, counts, problems, benchmark_ids))
}

/// Estimated tokens of a text: bytes / 4, rounded up.
fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// The detail of a duplicate's rejection (the same in `run` and `merge`).
pub fn duplicate_detail(original: &str) -> String {
    format!("same code patch as {original}")
}

/// Dedup in merge order, then the issue-text and budget rules; relevant files fill the budget
/// that is left, best first.
fn finish(candidates: Vec<Candidate>, config: &Config, rejected: &mut Vec<Rejected>) -> Vec<Task> {
    let keys: Vec<dedup::Candidate<'_>> = candidates
        .iter()
        .map(|c| dedup::Candidate {
            merged_at: &c.merged_at,
            repo: &c.repo,
            number: c.number,
            key: &c.key,
        })
        .collect();
    let dups = duplicates(&keys);
    let mut tasks = Vec::new();
    for (mut c, dup) in candidates.into_iter().zip(dups) {
        let budget_used = tokens(&c.problem_statement)
            + c.code_context.values().map(|t| tokens(t)).sum::<usize>();
        let rejection = if let Some(original) = &dup {
            Some((Reason::Duplicate, duplicate_detail(original)))
        } else if c.problem_statement.is_empty() {
            Some((
                Reason::NoIssueText,
                format!("no opened IssuesEvent for issues {:?}", c.issues),
            ))
        } else if budget_used > config.max_prompt_tokens {
            Some((
                Reason::TooLong,
                format!(
                    "about {budget_used} tokens (budget {})",
                    config.max_prompt_tokens
                ),
            ))
        } else {
            None
        };
        match rejection {
            Some((reason, detail)) => rejected.push(Rejected {
                repo: c.repo,
                pull_number: c.number,
                reason,
                detail,
                duplicate_of: dup,
                merged_at: Some(c.merged_at),
                code_patch_sha256: Some(c.key),
            }),
            None => {
                let mut used = budget_used;
                c.relevant.retain(|(_, text)| {
                    let fits = used + tokens(text) <= config.max_prompt_tokens;
                    if fits {
                        used += tokens(text);
                    }
                    fits
                });
                tasks.push(Task::from_candidate(c));
            }
        }
    }
    tasks
}
