//! `trainer predict` on rows that carry no `code_context` (SWE-bench rows): each row's
//! repository is read at its base commit from a bare mirror (`<repos>/<owner>/<name>.git`, the
//! layout `curate` reads, through [`swerve_mirror::Mirror`]), its files are ranked by a retriever
//! (`crate::predict::ranking`), and files are added in rank order while the rendered prompt stays
//! within the token budget, counted with the model's own tokenizer.
//!
//! The `model` retriever localises, then repairs: the model sees the issue and the paths of the
//! repository's files (as many, in path order, as fit the budget) in a localisation prompt
//! rendered like the repair prompt ([`Prompter::render_localization`]), answers greedily through
//! a [`Localize`], and the files of the tree it names (`named_files`) are its ranking. When it
//! names none, BM25's ranking is used and the row's report says so (`fallback`); recall is
//! measured on the model's own list either way.
//!
//! A row that cannot be given a context (its mirror or base commit is missing, no file fits)
//! gets a [`RowRetrieval`] with an `error` and no files: the caller writes an empty prediction
//! for it and goes on.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use swerve_mirror::{Mirror, is_binary};
use swerve_swebench::Instance;

use crate::data::Prompter;
use crate::error::{Error, Result};
use crate::generate::{SamplingConfig, generate};
use crate::model::{CausalLm, Kernels};
use crate::predict::ranking::{Bm25, named_files, oracle_files, recall_at};
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
    /// The files the model itself names from the repository's file tree (localise, then
    /// repair); BM25's ranking when it names none.
    Model,
}

impl Retriever {
    /// The name used in flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Oracle => "oracle",
            Retriever::Bm25 => "bm25",
            Retriever::Model => "model",
        }
    }
}

/// What retrieval did for one row (a line of `<output>.retrieval.jsonl`).
#[derive(Debug, Clone, Serialize)]
pub struct RowRetrieval {
    /// The row.
    pub instance_id: String,
    /// `oracle`, `bm25` or `model`.
    pub retriever: &'static str,
    /// The files shown, in rank order.
    pub shown: Vec<String>,
    /// Ranked files that did not fit the budget (for BM25: those with a positive score).
    pub left_out: usize,
    /// Tokens of the final prompt.
    pub prompt_tokens: usize,
    /// The files the gold patch edits (empty without a gold patch).
    pub gold_files: Vec<String>,
    /// Recall of the ranking against `gold_files` at 1 and 5 (before the budget; for `model`,
    /// of the files the model named, before any fallback).
    pub recall_at_1: Option<f64>,
    /// See `recall_at_1`.
    pub recall_at_5: Option<f64>,
    /// Files of the tree not considered: binary, not UTF-8, or over [`MAX_FILE_BYTES`].
    pub skipped_files: usize,
    /// What the model retriever asked and answered (`model` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localization: Option<Localization>,
    /// Why the ranking is BM25's although the retriever is `model` (the model named no file of
    /// the tree, or its prompt did not fit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Why the row has no context (it is then predicted with an empty patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The model retriever's localisation of one row (the `localization` object of a report line).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Localization {
    /// Tokens of the localisation prompt (0 when not even the prompt without paths fits).
    pub prompt_tokens: usize,
    /// Paths of the tree listed in the prompt (the first in path order).
    pub paths_listed: usize,
    /// Paths of the tree left out of the prompt to stay within the budget.
    pub paths_left_out: usize,
    /// The model's answer, decoded without special tokens.
    pub answer: String,
    /// The files of the tree the answer names, in its order (`named_files`).
    pub named: Vec<String>,
}

/// Answers localisation prompts for the `model` retriever.
pub trait Localize {
    /// The answer to `prompt` (token ids), decoded.
    fn answer(&mut self, prompt: &[u32]) -> Result<String>;
}

/// A model as a [`Localize`]: greedy decoding of at most `max_new_tokens` tokens, stopping at the
/// sampling settings' EOS tokens.
pub(crate) struct ModelLocalizer<'a, D: Kernels<f32>> {
    model: &'a CausalLm<f32, D>,
    tokenizer: &'a Tokenizer,
    sampling: SamplingConfig,
}

impl<'a, D: Kernels<f32>> ModelLocalizer<'a, D> {
    /// Greedy answers of `model` of at most `max_new_tokens` tokens; `sampling` gives the EOS and
    /// padding tokens (its temperature and limit are replaced).
    pub(crate) fn new(
        model: &'a CausalLm<f32, D>,
        tokenizer: &'a Tokenizer,
        sampling: &SamplingConfig,
        max_new_tokens: usize,
    ) -> Self {
        Self {
            model,
            tokenizer,
            sampling: SamplingConfig {
                temperature: 0.0,
                max_new_tokens,
                ..sampling.clone()
            },
        }
    }
}

impl<D: Kernels<f32>> Localize for ModelLocalizer<'_, D> {
    fn answer(&mut self, prompt: &[u32]) -> Result<String> {
        let generation = generate(self.model, &[prompt.to_vec()], &self.sampling)?;
        self.tokenizer.decode(&generation.completions[0], true)
    }
}

/// How rows get their context: the retriever, where the repositories are, and the prompt and
/// budget the files must fit.
#[derive(Debug, Clone, Copy)]
pub struct ContextSettings<'a> {
    /// How files are chosen.
    pub retriever: Retriever,
    /// Folder of bare mirrors `<owner>/<name>.git`.
    pub repos: &'a Path,
    /// Renders the repair prompt (and the localisation prompt of [`Retriever::Model`]).
    pub prompter: &'a Prompter,
    /// The model's tokenizer, which counts the budget.
    pub tokenizer: &'a Tokenizer,
    /// Most tokens of a prompt (repair and localisation alike).
    pub max_prompt_tokens: usize,
}

/// Fills `task.code_context` from its repository as `settings` say. `localizer` answers the
/// localisation prompts of [`Retriever::Model`] (which fails without one); other retrievers do
/// not use it.
pub fn fill_context(
    task: &mut Instance,
    settings: &ContextSettings<'_>,
    localizer: Option<&mut dyn Localize>,
) -> Result<RowRetrieval> {
    let ContextSettings {
        retriever,
        repos,
        prompter,
        tokenizer,
        max_prompt_tokens,
    } = *settings;
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
        localization: None,
        fallback: None,
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
    let query = task.problem_statement.as_deref().unwrap_or("");
    let bm25 = || -> Vec<String> {
        Bm25::new(files.iter().map(|(p, t)| (p.as_str(), t.as_str())))
            .rank(query)
            .into_iter()
            .filter(|(_, score)| *score > 0.0)
            .map(|(p, _)| p)
            .collect()
    };
    let (measured, ranked): (Vec<String>, Vec<String>) = match retriever {
        Retriever::Oracle => {
            let ranked: Vec<String> = gold_files
                .iter()
                .filter(|p| files.contains_key(*p))
                .cloned()
                .collect();
            (ranked.clone(), ranked)
        }
        Retriever::Bm25 => {
            let ranked = bm25();
            (ranked.clone(), ranked)
        }
        Retriever::Model => {
            let localizer = localizer.ok_or(Error::NoLocalizer)?;
            let localization = localize(query, &files, settings, localizer)?;
            let named = localization.named.clone();
            report.fallback = if localization.prompt_tokens == 0 {
                Some(format!(
                    "the localisation prompt does not fit --max-prompt-tokens {max_prompt_tokens} \
                     even without paths; BM25's ranking used"
                ))
            } else if named.is_empty() {
                Some("the model named no file of the tree; BM25's ranking used".to_owned())
            } else {
                None
            };
            report.localization = Some(localization);
            let ranked = if named.is_empty() {
                bm25()
            } else {
                named.clone()
            };
            (named, ranked)
        }
    };
    if !gold_files.is_empty() {
        report.recall_at_1 = Some(recall_at(&measured, &gold_files, 1));
        report.recall_at_5 = Some(recall_at(&measured, &gold_files, 5));
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

/// Asks `localizer` which of `files` to change for the issue `query`: the localisation prompt
/// lists as many paths as fit `settings.max_prompt_tokens` (the first in path order; the most
/// that fit is found by bisection, each try rendered and counted), and the answer's names of
/// paths of the tree are kept. When not even the prompt without paths fits, the model is not
/// asked (`prompt_tokens` 0, nothing named).
fn localize(
    query: &str,
    files: &BTreeMap<String, String>,
    settings: &ContextSettings<'_>,
    localizer: &mut dyn Localize,
) -> Result<Localization> {
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    let prompter = settings.prompter;
    let encode = |listed: usize| -> Result<Vec<u32>> {
        let text = prompter.render_localization(query, &paths[..listed], paths.len() - listed)?;
        settings
            .tokenizer
            .encode(&text, prompter.add_special_tokens())
    };
    let fits =
        |listed: usize| -> Result<bool> { Ok(encode(listed)?.len() <= settings.max_prompt_tokens) };
    if !fits(0)? {
        return Ok(Localization {
            paths_left_out: paths.len(),
            ..Localization::default()
        });
    }
    // The largest count that fits: `low` always fits, `high + 1` never does.
    let (mut low, mut high) = (0, paths.len());
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid)? {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let prompt = encode(low)?;
    let answer = localizer.answer(&prompt)?;
    Ok(Localization {
        prompt_tokens: prompt.len(),
        paths_listed: low,
        paths_left_out: paths.len() - low,
        named: named_files(&answer, |p| files.contains_key(p)),
        answer,
    })
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
    let mirror = Mirror::open(repos, &task.repo).map_err(|e| e.to_string())?;
    let commit = mirror.commit(base).ok_or_else(|| {
        format!(
            "base commit {base} is not in the mirror of {} under {}",
            task.repo,
            repos.display()
        )
    })?;
    let tree = mirror.tree(commit).map_err(|e| e.to_string())?;
    let mut files = BTreeMap::new();
    let mut skipped = 0;
    for path in mirror.files(commit).map_err(|e| e.to_string())? {
        let Some(id) = tree.blob(&path) else {
            continue;
        };
        let bytes = mirror.blob(id).map_err(|e| e.to_string())?;
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
/// left out, rows without a context; for the model retriever also the localisation prompts'
/// tokens, the paths they left out, and the rows that fell back to BM25.
pub fn summary(reports: &[RowRetrieval], budget: usize) -> String {
    let mean = |values: Vec<f64>| {
        if values.is_empty() {
            "n/a".to_owned()
        } else {
            format!("{:.3}", values.iter().sum::<f64>() / values.len() as f64)
        }
    };
    let ok: Vec<&RowRetrieval> = reports.iter().filter(|r| r.error.is_none()).collect();
    let retriever = reports.first().map_or("-", |r| r.retriever);
    let mut line = format!(
        "retrieval {retriever}: {} rows, recall@1 {}, recall@5 {}, prompt tokens mean {} (budget {budget}), {} files left out, {} rows without a context (empty patches)",
        reports.len(),
        mean(reports.iter().filter_map(|r| r.recall_at_1).collect()),
        mean(reports.iter().filter_map(|r| r.recall_at_5).collect()),
        mean(ok.iter().map(|r| r.prompt_tokens as f64).collect()),
        reports.iter().map(|r| r.left_out).sum::<usize>(),
        reports.len() - ok.len(),
    );
    if retriever == Retriever::Model.as_str() {
        let asked: Vec<&Localization> = reports
            .iter()
            .filter_map(|r| r.localization.as_ref())
            .collect();
        line.push_str(&format!(
            ", localisation prompt tokens mean {}, {} paths left out of localisation prompts, {} rows fell back to BM25",
            mean(
                asked
                    .iter()
                    .filter(|l| l.prompt_tokens > 0)
                    .map(|l| l.prompt_tokens as f64)
                    .collect()
            ),
            asked.iter().map(|l| l.paths_left_out).sum::<usize>(),
            reports.iter().filter(|r| r.fallback.is_some()).count(),
        ));
    }
    line
}
