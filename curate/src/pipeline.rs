//! `curate run`: the stages in order. Events are read file by file (in parallel, a few files
//! at a time, in path order) into the partitions of [`crate::spill`]; then partition by
//! partition, pull requests are folded, grouped by repository, and each repository's clone is
//! opened once and read by one worker; every candidate is fitted to the prompt budget and its
//! dedup key kept; finally the partitions' sorted rows are merged, deduplicated in merge order,
//! and written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;

use crate::aggregate::PullRequest;
use crate::config::Config;
use crate::decontaminate::Exclusions;
use crate::error::CurateError;
use crate::events::{self, InputProblem};
use crate::filter::{self, Context, Reason, Rejection};
use crate::output::{
    DedupEntry, EventCounts, Funnel, Output, Rejected, Row, Task, Writer, duplicate_map,
};
use crate::progress::StageProgress;
use crate::spill::{self, Spill};
use swerve_mirror::Mirror;

/// Where a run reads from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Event files and folders of them.
    pub events: Vec<PathBuf>,
    /// The folder of bare mirrors `<owner>/<name>.git`.
    pub repos: PathBuf,
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

/// Runs every stage on `inputs` with `config` and writes the output files, reporting the long
/// stages to `progress`; returns the funnel.
pub fn run(
    inputs: &Inputs,
    config: &Config,
    output: &Output,
    progress: &dyn StageProgress,
) -> Result<Funnel, CurateError> {
    config.validate()?;
    let pool = pool(config.jobs)?;
    let mut timings = BTreeMap::new();
    let started = Instant::now();
    let files = events::event_files(&inputs.events)?;
    let input_bytes = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut spill = Spill::create(
        &output.dir,
        spill::partitions_for(input_bytes, config.partitions),
    )?;
    let (mut counts, problems, benchmark_ids) =
        read_events(&files, config, &pool, &mut spill, progress)?;
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
    progress.stage("clones", "pull requests", 0);
    let mut dedup = Vec::new();
    let mut folding = std::time::Duration::ZERO;
    for k in 0..spill.count() {
        let loading = Instant::now();
        let aggregate = spill.load(k, &mut counts)?;
        folding += loading.elapsed();
        progress.grow(aggregate.pull_requests.len() as u64);
        let cx = Context {
            config,
            exclusions: &exclusions,
            aggregate: &aggregate,
            endpoint: endpoint.as_ref(),
        };
        let rows = evaluate_partition(inputs, &cx, &pool, progress, &mut dedup);
        spill.write_rows(k, &rows)?;
    }
    progress.end();
    timings.insert("aggregate".to_owned(), folding.as_millis() as u64);
    timings.insert(
        "clones".to_owned(),
        (started.elapsed() - folding).as_millis() as u64,
    );

    let started = Instant::now();
    let duplicates = duplicate_map(&dedup);
    drop(dedup);
    let mut writer = Writer::create(output)?;
    let mut rows = spill.rows()?;
    while let Some(row) = rows.next_row()? {
        writer.push(row.deduplicated(&duplicates))?;
    }
    timings.insert("dedup".to_owned(), started.elapsed().as_millis() as u64);
    writer.finish(counts, problems, timings)
}

/// The clone stage and the rules after it for one partition: its rows, sorted; every candidate
/// that reached dedup is added to `dedup`.
fn evaluate_partition(
    inputs: &Inputs,
    cx: &Context<'_>,
    pool: &rayon::ThreadPool,
    progress: &dyn StageProgress,
    dedup: &mut Vec<DedupEntry>,
) -> Vec<Row> {
    let mut by_repo: BTreeMap<&str, Vec<&PullRequest>> = BTreeMap::new();
    for pr in cx.aggregate.pull_requests.values() {
        by_repo.entry(pr.repo.as_str()).or_default().push(pr);
    }
    let verdicts: Vec<(&PullRequest, Result<Task, Rejection>)> = pool.install(|| {
        by_repo
            .par_iter()
            .flat_map_iter(|(name, prs)| {
                let clone = Mirror::open(&inputs.repos, name);
                let out: Vec<_> = prs
                    .iter()
                    .map(|pr| {
                        let verdict = filter::evaluate(pr, &clone, cx);
                        progress.advance();
                        (*pr, verdict)
                    })
                    .collect();
                out
            })
            .collect()
    });
    verdicts
        .into_iter()
        .map(|(pr, verdict)| match verdict {
            Ok(task) => {
                dedup.push(DedupEntry::of_task(&task));
                fit(task, cx.config)
            }
            Err(rejection) => {
                if matches!(
                    rejection.reason,
                    Reason::MissingClone | Reason::MissingCommit | Reason::UnreadableClone
                ) {
                    tracing::debug!(repo = %pr.repo, number = pr.number, reason = rejection.reason.as_str(), "{}", rejection.detail);
                }
                Row::Rejected(Rejected {
                    repo: pr.repo.clone(),
                    pull_number: pr.number,
                    reason: rejection.reason,
                    detail: rejection.detail,
                    duplicate_of: None,
                    merged_at: None,
                    code_patch_sha256: None,
                })
            }
        })
        .collect()
}

type EventsRead = (EventCounts, Vec<InputProblem>, BTreeSet<u64>);

fn read_events(
    files: &[PathBuf],
    config: &Config,
    pool: &rayon::ThreadPool,
    spill: &mut Spill,
    progress: &dyn StageProgress,
) -> Result<EventsRead, CurateError> {
    progress.stage("events", "files", files.len() as u64);
    let mut counts = EventCounts::default();
    let mut problems = Vec::new();
    let mut benchmark_ids = BTreeSet::new();
    let partitions = spill.count();
    // A few files per worker at a time: parallel decoding and encoding, bounded memory, path
    // order kept.
    let chunk = pool.current_num_threads().max(1) * 2;
    for group in files.chunks(chunk) {
        let read: Vec<_> = pool.install(|| {
            group
                .par_iter()
                .map(|path| {
                    let mut read = events::read_file(path);
                    let kept = std::mem::take(&mut read.kept)
                        .into_iter()
                        .filter(|e| config.shard.is_none_or(|s| s.contains(e.repo())));
                    let encoded = Spill::encode(partitions, kept);
                    progress.advance();
                    (read, encoded)
                })
                .collect()
        });
        for (file, encoded) in read {
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
            spill.append(&encoded)?;
        }
    }
    spill.seal()?;
    progress.end();
    Ok((counts, problems, benchmark_ids))
}

/// Estimated tokens of a text: bytes / 4, rounded up.
fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// The rules after the clone stage that need no other PR: the issue text and the prompt
/// budget; relevant files fill the budget that is left, best first.
fn fit(mut task: Task, config: &Config) -> Row {
    let relevant: BTreeSet<&String> = task.relevant_files.iter().collect();
    let budget_used = tokens(&task.problem_statement)
        + task
            .code_context
            .iter()
            .filter(|(path, _)| !relevant.contains(path))
            .map(|(_, text)| tokens(text))
            .sum::<usize>();
    let rejection = if task.problem_statement.is_empty() {
        Some((
            Reason::NoIssueText,
            format!("no opened IssuesEvent for issues {:?}", task.issue_numbers),
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
    if let Some((reason, detail)) = rejection {
        return Row::Rejected(Rejected {
            repo: task.repo,
            pull_number: task.pull_number,
            reason,
            detail,
            duplicate_of: None,
            merged_at: Some(task.merged_at),
            code_patch_sha256: Some(task.code_patch_sha256),
        });
    }
    let mut used = budget_used;
    let code_context = &mut task.code_context;
    task.relevant_files.retain(|path| {
        let size = code_context.get(path).map_or(0, |t| tokens(t));
        let fits = used + size <= config.max_prompt_tokens;
        if fits {
            used += size;
        } else {
            code_context.remove(path);
        }
        fits
    });
    Row::Task(Box::new(task))
}
