//! `curate merge`: joins the outputs of `curate run --shard K/N` into what one process writes.
//! Shards split repositories, so every rule but dedup is already final; dedup is run again over
//! the candidates of all shards (tasks and the rows that carry a dedup key), in merge order.
//! The shards' files are sorted, so they are read twice as streams (once for the dedup keys,
//! once merged into the output): memory holds the keys, not the rows.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::CurateError;
use crate::output::{DedupEntry, Funnel, Output, Row, Writer, duplicate_map, read_funnel};
use crate::spill::{MergedRows, RowKind, RowSource};

fn sources(shards: &[PathBuf]) -> Result<Vec<RowSource>, CurateError> {
    let mut out = Vec::new();
    for dir in shards {
        out.push(RowSource::new(dir.join("tasks.jsonl"), RowKind::Task)?);
        out.push(RowSource::new(
            dir.join("rejected.jsonl"),
            RowKind::Rejected,
        )?);
    }
    Ok(out)
}

/// Merges shard output folders into `output`; returns the funnel.
pub fn merge(shards: &[PathBuf], output: &Output) -> Result<Funnel, CurateError> {
    let funnels = shards
        .iter()
        .map(|dir| read_funnel(&dir.join("funnel.json")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut entries = Vec::new();
    for mut source in sources(shards)? {
        while let Some(row) = source.next_row()? {
            entries.extend(match &row {
                Row::Task(t) => Some(DedupEntry::of_task(t)),
                Row::Rejected(r) => r.dedup_entry(),
            });
        }
    }
    let duplicates = duplicate_map(&entries);
    drop(entries);
    let mut writer = Writer::create(output)?;
    let mut rows = MergedRows::new(sources(shards)?)?;
    while let Some(row) = rows.next_row()? {
        writer.push(row.deduplicated(&duplicates))?;
    }

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
    writer.finish(events, problems, timings)
}
