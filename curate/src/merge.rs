//! `curate merge`: joins the outputs of `curate run --shard K/N` into what one process writes.
//! Shards split repositories, so every rule but dedup is already final; dedup is run again over
//! the candidates of all shards (tasks and the rows that carry a dedup key), in merge order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::dedup::{self, duplicates};
use crate::error::CurateError;
use crate::filter::Reason;
use crate::output::{Funnel, Rejected, Task, read_funnel, read_jsonl, sort_rows};
use crate::pipeline::{Outcome, duplicate_detail};

/// Merges shard output folders.
pub fn merge(shards: &[PathBuf]) -> Result<Outcome, CurateError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut rejected: Vec<Rejected> = Vec::new();
    let mut funnels = Vec::new();
    for dir in shards {
        tasks.extend(read_jsonl::<Task>(&dir.join("tasks.jsonl"))?);
        rejected.extend(read_jsonl::<Rejected>(&dir.join("rejected.jsonl"))?);
        funnels.push(read_funnel(&dir.join("funnel.json"))?);
    }
    // Dedup again across shards.
    enum Row {
        Task(usize),
        Rejected(usize),
    }
    let mut rows = Vec::new();
    let mut keys = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        rows.push(Row::Task(i));
        keys.push(dedup::Candidate {
            merged_at: &t.merged_at,
            repo: &t.repo,
            number: t.pull_number,
            key: &t.code_patch_sha256,
        });
    }
    for (i, r) in rejected.iter().enumerate() {
        if let (Some(merged_at), Some(key)) = (&r.merged_at, &r.code_patch_sha256) {
            rows.push(Row::Rejected(i));
            keys.push(dedup::Candidate {
                merged_at,
                repo: &r.repo,
                number: r.pull_number,
                key,
            });
        }
    }
    let dups = duplicates(&keys);
    let mut drop_tasks = vec![false; tasks.len()];
    let mut updates = Vec::new();
    let mut added = Vec::new();
    for (row, dup) in rows.iter().zip(dups) {
        let Some(original) = dup else { continue };
        match *row {
            Row::Task(i) => {
                drop_tasks[i] = true;
                let t = &tasks[i];
                added.push(Rejected {
                    repo: t.repo.clone(),
                    pull_number: t.pull_number,
                    reason: Reason::Duplicate,
                    detail: duplicate_detail(&original),
                    duplicate_of: Some(original),
                    merged_at: Some(t.merged_at.clone()),
                    code_patch_sha256: Some(t.code_patch_sha256.clone()),
                });
            }
            Row::Rejected(i) => updates.push((i, original)),
        }
    }
    for (i, original) in updates {
        let r = &mut rejected[i];
        r.reason = Reason::Duplicate;
        r.detail = duplicate_detail(&original);
        r.duplicate_of = Some(original);
    }
    let mut keep = drop_tasks.iter().map(|d| !d);
    tasks.retain(|_| keep.next().unwrap_or(true));
    rejected.extend(added);
    sort_rows(&mut tasks, &mut rejected);

    let mut events = funnels
        .first()
        .map(|f| f.events.clone())
        .unwrap_or_default();
    let (mut dup_events, mut pr_events, mut trimmed, mut issues) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    let mut timings: BTreeMap<String, u64> = BTreeMap::new();
    for f in &funnels {
        dup_events += f.events.duplicate_events;
        pr_events += f.events.pull_request_events;
        trimmed += f.events.trimmed_pull_request_events;
        issues += f.events.opened_issues;
        problems.extend(f.problems.iter().cloned());
        for (stage, ms) in &f.timings_ms {
            *timings.entry(stage.clone()).or_default() += ms;
        }
    }
    events.duplicate_events = dup_events;
    events.pull_request_events = pr_events;
    events.trimmed_pull_request_events = trimmed;
    events.opened_issues = issues;
    let funnel = Funnel::new(events, problems, timings, &tasks, &rejected);
    Ok(Outcome {
        tasks,
        rejected,
        funnel,
    })
}
