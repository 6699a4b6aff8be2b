//! `trainer predict` on rows that carry no `code_context` (SWE-bench rows): each row's
//! repository is read at its base commit from a bare mirror (`<repos>/<owner>/<name>.git`, the
//! layout `curate` reads, through [`swerve_curate::clone`]), its files are ranked by a retriever
//! ([`crate::retrieve`]), and files are added in rank order while the rendered prompt stays
//! within the token budget, counted with the model's own tokenizer.
//!
//! A row that cannot be given a context (its mirror or base commit is missing, no file fits)
//! gets a [`RowRetrieval`] with an `error` and no files: the caller writes an empty prediction
//! for it and goes on.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use swerve_curate::clone::{Clone as Mirror, is_binary};
use swerve_swebench::Instance;

use super::data::Prompter;
use crate::error::Result;
use crate::retrieve::{Bm25, oracle_files, recall_at};
use crate::tokenizer::Tokenizer;

/// Files larger than this are not shown (generated data, vendored bundles).
pub const MAX_FILE_BYTES: usize = 512 * 1024;

/// How the files to show are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retriever {
    /// The files the gold patch edits (SWE-bench's oracle setting; for ablations).
    Oracle,
    /// BM25 of the files against the problem statement (SWE-bench's BM25 setting).
    Bm25,
}

impl Retriever {
    /// The name used in flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Oracle => "oracle",
            Retriever::Bm25 => "bm25",
        }
    }
}

/// What retrieval did for one row (a line of `<output>.retrieval.jsonl`).
#[derive(Debug, Clone, Serialize)]
pub struct RowRetrieval {
    /// The row.
    pub instance_id: String,
    /// `oracle` or `bm25`.
    pub retriever: &'static str,
    /// The files shown, in rank order.
    pub shown: Vec<String>,
    /// Ranked files that did not fit the budget (for BM25: those with a positive score).
    pub left_out: usize,
    /// Tokens of the final prompt.
    pub prompt_tokens: usize,
    /// The files the gold patch edits (empty without a gold patch).
    pub gold_files: Vec<String>,
    /// Recall of the ranking against `gold_files` at 1 and 5 (before the budget).
    pub recall_at_1: Option<f64>,
    /// See `recall_at_1`.
    pub recall_at_5: Option<f64>,
    /// Files of the tree not considered: binary, not UTF-8, or over [`MAX_FILE_BYTES`].
    pub skipped_files: usize,
    /// Why the row has no context (it is then predicted with an empty patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Fills `task.code_context` from its repository with `retriever`, within `max_prompt_tokens`.
pub fn fill_context(
    task: &mut Instance,
    repos: &Path,
    retriever: Retriever,
    prompter: &Prompter,
    tokenizer: &Tokenizer,
    max_prompt_tokens: usize,
) -> Result<RowRetrieval> {
    let gold_files = task.patch.as_deref().map(oracle_files).unwrap_or_default();
    let mut report = RowRetrieval {
        instance_id: task.instance_id.clone(),
        retriever: retriever.as_str(),
        shown: Vec::new(),
        left_out: 0,
        prompt_tokens: 0,
        gold_files: gold_files.clone(),
        recall_at_1: None,
        recall_at_5: None,
        skipped_files: 0,
        error: None,
    };
    task.code_context.clear();
    let files = match read_tree(task, repos) {
        Ok((files, skipped)) => {
            report.skipped_files = skipped;
            files
        }
        Err(e) => {
            report.error = Some(e);
            return Ok(report);
        }
    };
    let ranked: Vec<String> = match retriever {
        Retriever::Oracle => gold_files
            .iter()
            .filter(|p| files.contains_key(*p))
            .cloned()
            .collect(),
        Retriever::Bm25 => {
            let index = Bm25::new(files.iter().map(|(p, t)| (p.as_str(), t.as_str())));
            let query = task.problem_statement.as_deref().unwrap_or("");
            index
                .rank(query)
                .into_iter()
                .filter(|(_, score)| *score > 0.0)
                .map(|(p, _)| p)
                .collect()
        }
    };
    if !gold_files.is_empty() {
        report.recall_at_1 = Some(recall_at(&ranked, &gold_files, 1));
        report.recall_at_5 = Some(recall_at(&ranked, &gold_files, 5));
    }
    // Files in rank order while the prompt fits; the first that does not ends the context.
    let count = |task: &Instance| -> Result<usize> {
        Ok(tokenizer
            .encode(&prompter.render(task)?, prompter.add_special_tokens())?
            .len())
    };
    report.prompt_tokens = count(task)?;
    for (i, path) in ranked.iter().enumerate() {
        task.code_context.insert(path.clone(), files[path].clone());
        let tokens = count(task)?;
        if tokens > max_prompt_tokens {
            task.code_context.remove(path);
            report.left_out = ranked.len() - i;
            break;
        }
        report.prompt_tokens = tokens;
        report.shown.push(path.clone());
    }
    if report.shown.is_empty() {
        report.error = Some(if ranked.is_empty() {
            format!("the {} retriever found no file to show", retriever.as_str())
        } else {
            format!(
                "no file fits in --max-prompt-tokens {max_prompt_tokens} (the prompt without files has {} tokens)",
                report.prompt_tokens
            )
        });
    }
    Ok(report)
}

/// The UTF-8 text files of `task`'s repository at its base commit, and how many were skipped.
fn read_tree(
    task: &Instance,
    repos: &Path,
) -> std::result::Result<(BTreeMap<String, String>, usize), String> {
    let base = task
        .base_commit
        .as_deref()
        .ok_or("the row has no base_commit")?;
    let mirror = Mirror::open(repos, &task.repo)?;
    let commit = mirror.commit(base).ok_or_else(|| {
        format!(
            "base commit {base} is not in the mirror of {} under {}",
            task.repo,
            repos.display()
        )
    })?;
    let tree = mirror.tree(commit)?;
    let mut files = BTreeMap::new();
    let mut skipped = 0;
    for path in mirror.files(commit)? {
        let Some(id) = Mirror::blob_in(&tree, &path) else {
            continue;
        };
        let bytes = mirror.blob(id)?;
        if bytes.len() > MAX_FILE_BYTES || is_binary(&bytes) {
            skipped += 1;
            continue;
        }
        match String::from_utf8(bytes) {
            Ok(text) => {
                files.insert(path, text);
            }
            Err(_) => skipped += 1,
        }
    }
    Ok((files, skipped))
}

/// One line for the log: rows, recall@1/@5 where a gold patch is known, prompt tokens, files
/// left out, rows without a context.
pub fn summary(reports: &[RowRetrieval], budget: usize) -> String {
    let mean = |values: Vec<f64>| {
        if values.is_empty() {
            "n/a".to_owned()
        } else {
            format!("{:.3}", values.iter().sum::<f64>() / values.len() as f64)
        }
    };
    let ok: Vec<&RowRetrieval> = reports.iter().filter(|r| r.error.is_none()).collect();
    format!(
        "retrieval {}: {} rows, recall@1 {}, recall@5 {}, prompt tokens mean {} (budget {budget}), {} files left out, {} rows without a context (empty patches)",
        reports.first().map_or("-", |r| r.retriever),
        reports.len(),
        mean(reports.iter().filter_map(|r| r.recall_at_1).collect()),
        mean(reports.iter().filter_map(|r| r.recall_at_5).collect()),
        mean(ok.iter().map(|r| r.prompt_tokens as f64).collect()),
        reports.iter().map(|r| r.left_out).sum::<usize>(),
        reports.len() - ok.len(),
    )
}
