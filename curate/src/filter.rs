//! Stage 5: the ordered rejection rules. A pull request gets the **first** reason that applies,
//! in the order of [`Reason`]; one that passes them all is a [`Task`] row that still has dedup
//! and the prompt budget ahead of it. Everything a rule needs from the clone is read here, once, through
//! a [`swerve_mirror::Mirror`]; a rule never aborts the run.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::aggregate::{Aggregate, PullRequest};
use crate::config::Config;
use crate::decontaminate::Exclusions;
use crate::dedup::patch_key;
use crate::links::linked_issues;
use crate::output::Task;
use crate::paths::{PathClass, classify};
use crate::relevant;
use swerve_mirror::{Change, MergeEvidence, Mirror, MirrorError, ObjectId, is_binary};

/// Why a pull request is not a task, in the order the rules are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A SWE-bench (or user-excluded) repository, by name or `repo.id`.
    ExcludedRepo,
    /// The latest event is outside `--since`/`--until`.
    OutOfWindow,
    /// Closed without merging, never closed, or (trimmed payloads) not merged per the clone.
    NotMerged,
    /// Title, body or author contains `[bot]`, `dependabot`, `renovate`, `bump` or `automerge`.
    Bot,
    /// No `<repos>/<owner>/<name>.git`.
    MissingClone,
    /// `head.sha` or `base.sha` is not a commit in the clone (or the event has none).
    MissingCommit,
    /// The clone has the commits but an object could not be read (no merge base, bad blob).
    UnreadableClone,
    /// No file differs between the merge base and the head.
    EmptyDiff,
    /// More edited files than `max_edited_files`.
    TooLarge,
    /// No edited code file: only docs, CI, configuration, changelogs, lock files or tests.
    NoCodeChange,
    /// No closing reference to an issue of the repository.
    NoLinkedIssue,
    /// The same code patch as an earlier-merged task.
    Duplicate,
    /// No linked issue has an opened `IssuesEvent` with its text.
    NoIssueText,
    /// Issue plus edited files exceed the prompt budget.
    TooLong,
}

impl Reason {
    /// Every reason, in rule order.
    pub const ALL: [Reason; 14] = [
        Reason::ExcludedRepo,
        Reason::OutOfWindow,
        Reason::NotMerged,
        Reason::Bot,
        Reason::MissingClone,
        Reason::MissingCommit,
        Reason::UnreadableClone,
        Reason::EmptyDiff,
        Reason::TooLarge,
        Reason::NoCodeChange,
        Reason::NoLinkedIssue,
        Reason::Duplicate,
        Reason::NoIssueText,
        Reason::TooLong,
    ];

    /// The name written in `rejected.jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ExcludedRepo => "excluded_repo",
            Reason::OutOfWindow => "out_of_window",
            Reason::NotMerged => "not_merged",
            Reason::Bot => "bot",
            Reason::MissingClone => "missing_clone",
            Reason::MissingCommit => "missing_commit",
            Reason::UnreadableClone => "unreadable_clone",
            Reason::EmptyDiff => "empty_diff",
            Reason::TooLarge => "too_large",
            Reason::NoCodeChange => "no_code_change",
            Reason::NoLinkedIssue => "no_linked_issue",
            Reason::Duplicate => "duplicate",
            Reason::NoIssueText => "no_issue_text",
            Reason::TooLong => "too_long",
        }
    }
}

/// SWE-RL's bot words, applied literally (a human "Bump the minimum Python version" is one).
pub(crate) const BOT_WORDS: [&str; 5] = ["[bot]", "dependabot", "renovate", "bump", "automerge"];

/// Whether title, body or login contains a bot word, case-insensitively.
pub(crate) fn is_bot(title: &str, body: &str, login: &str) -> bool {
    let hay = format!("{title}\n{body}\n{login}").to_lowercase();
    BOT_WORDS.iter().any(|w| hay.contains(w))
}

/// A rejection: reason and a human-readable detail.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    /// The rule.
    pub reason: Reason,
    /// What it found.
    pub detail: String,
}

fn reject(reason: Reason, detail: impl Into<String>) -> Rejection {
    Rejection {
        reason,
        detail: detail.into(),
    }
}

/// What the rules need besides the PR.
pub(crate) struct Context<'a> {
    /// The run's settings.
    pub config: &'a Config,
    /// Exclusion lists.
    pub exclusions: &'a Exclusions,
    /// Issues' text.
    pub aggregate: &'a Aggregate,
    /// The relevant-file model, when configured.
    pub endpoint: Option<&'a crate::endpoint::Endpoint>,
}

/// The clone of a PR's repository as the rules see it: opened once per repository.
pub(crate) type CloneSlot<'a> = &'a Result<Mirror, MirrorError>;

/// Applies the rules to `pr` in order.
pub(crate) fn evaluate(
    pr: &PullRequest,
    clone: CloneSlot<'_>,
    cx: &Context<'_>,
) -> Result<Task, Rejection> {
    let latest = &pr.latest;
    let object = &latest.pull_request;
    if let Some(why) = cx.exclusions.check(&pr.repo, latest.repo_id) {
        return Err(reject(Reason::ExcludedRepo, why));
    }
    let day = latest.order.created_at.get(..10).unwrap_or_default();
    if cx.config.since.as_deref().is_some_and(|s| day < s)
        || cx.config.until.as_deref().is_some_and(|u| day > u)
    {
        return Err(reject(Reason::OutOfWindow, format!("last event on {day}")));
    }
    let closed = latest.action.as_deref() == Some("closed");
    let trimmed = pr.is_trimmed();
    if !closed {
        let action = latest.action.as_deref().unwrap_or("none");
        return Err(reject(
            Reason::NotMerged,
            format!("latest action is {action}"),
        ));
    }
    let merged_flag = object.merged == Some(true) || object.merged_at.is_some();
    if !trimmed && !merged_flag {
        return Err(reject(Reason::NotMerged, "closed without merging"));
    }
    let head_sha = object.head.as_ref().and_then(|h| h.sha.clone());
    let base_sha = object.base.as_ref().and_then(|b| b.sha.clone());
    let commits = match (clone, &head_sha, &base_sha) {
        (Ok(clone), Some(h), Some(b)) => clone.commit(h).zip(clone.commit(b)),
        _ => None,
    };
    // Trimmed payloads say nothing about merging: ask the clone, when it can answer.
    let mut merge_commit = object.merge_commit_sha.clone();
    if trimmed && let (Ok(clone), Some((head, _))) = (clone, commits) {
        let branch = object.base.as_ref().and_then(|b| b.branch.as_deref());
        let merged = match branch {
            Some(branch) => clone
                .merged_into(branch, head, pr.number)
                .map_err(|e| reject(Reason::UnreadableClone, e.to_string()))?,
            None => MergeEvidence::NotMerged,
        };
        match merged {
            MergeEvidence::MergedBy(commit) => merge_commit = Some(commit.to_string()),
            MergeEvidence::Merged => merge_commit = None,
            MergeEvidence::NotMerged => {
                return Err(reject(
                    Reason::NotMerged,
                    "trimmed payload; the clone shows no merge of the head",
                ));
            }
        }
    }
    let (title, body) = pr
        .described
        .as_ref()
        .map_or(("", ""), |d| (d.title.as_str(), d.body.as_str()));
    let login = pr.author().unwrap_or_default();
    if is_bot(title, body, login) {
        return Err(reject(
            Reason::Bot,
            format!("author {login:?}, title {title:?}"),
        ));
    }
    let clone = clone
        .as_ref()
        .map_err(|why| reject(Reason::MissingClone, why.to_string()))?;
    let Some((head, base_tip)) = commits else {
        let missing = match (&head_sha, &base_sha) {
            (Some(h), _) if clone.commit(h).is_none() => format!("head {h} is not in the clone"),
            (_, Some(b)) if clone.commit(b).is_none() => format!("base {b} is not in the clone"),
            _ => "the events name no head or base commit".to_owned(),
        };
        return Err(reject(Reason::MissingCommit, missing));
    };
    let unreadable = |e: MirrorError| reject(Reason::UnreadableClone, e.to_string());
    let base = clone.merge_base(base_tip, head).map_err(unreadable)?;
    let changes = clone.changes(base, head).map_err(unreadable)?;
    if changes.is_empty() {
        return Err(reject(
            Reason::EmptyDiff,
            format!("{base}..{head} changes nothing"),
        ));
    }
    if changes.len() > cx.config.max_edited_files {
        return Err(reject(
            Reason::TooLarge,
            format!(
                "{} edited files (more than {})",
                changes.len(),
                cx.config.max_edited_files
            ),
        ));
    }
    let files = read_changes(clone, &changes).map_err(unreadable)?;
    let code_files: Vec<String> = files
        .iter()
        .filter(|f| f.class == Some(PathClass::Code))
        .map(|f| f.path.clone())
        .collect();
    if code_files.is_empty() {
        return Err(reject(
            Reason::NoCodeChange,
            format!("{} edited files, none is code", files.len()),
        ));
    }
    let messages = clone.messages(base, head).map_err(unreadable)?;
    let texts = [title, body]
        .into_iter()
        .chain(messages.iter().map(String::as_str));
    let issues = linked_issues(&pr.repo, pr.number, texts);
    if issues.is_empty() {
        return Err(reject(
            Reason::NoLinkedIssue,
            "no closing reference to an issue",
        ));
    }
    build(
        pr,
        clone,
        cx,
        Build {
            base,
            head,
            merge_commit,
            files,
            code_files,
            issues,
        },
    )
}

struct Build {
    base: ObjectId,
    head: ObjectId,
    merge_commit: Option<String>,
    files: Vec<EditedFile>,
    code_files: Vec<String>,
    issues: Vec<u64>,
}

fn build(pr: &PullRequest, clone: &Mirror, cx: &Context<'_>, b: Build) -> Result<Task, Rejection> {
    let unreadable = |e: MirrorError| reject(Reason::UnreadableClone, e.to_string());
    let mut code_context = BTreeMap::new();
    let mut oracle_new_content = BTreeMap::new();
    for file in b.files.iter().filter(|f| f.class == Some(PathClass::Code)) {
        if let Some(old) = &file.old {
            code_context.insert(file.path.clone(), text(old));
        }
        oracle_new_content.insert(
            file.path.clone(),
            file.new.as_deref().map(text).unwrap_or_default(),
        );
    }
    let select = |keep: &dyn Fn(&EditedFile) -> bool| -> Vec<&str> {
        b.files
            .iter()
            .filter(|f| keep(f))
            .map(|f| f.path.as_str())
            .collect()
    };
    let is_test = |f: &EditedFile| classify(&f.path) == PathClass::Test;
    let test_paths = select(&|f| is_test(f));
    let other_paths = select(&|f| !is_test(f));
    let code_paths: Vec<&str> = b.code_files.iter().map(String::as_str).collect();
    let [code_patch, patch, test_patch]: [String; 3] = clone
        .patches(b.base, b.head, &[&code_paths, &other_paths, &test_paths])
        .map_err(unreadable)?
        .try_into()
        .expect("three groups, three patches");
    let key = patch_key(&code_patch);
    let problem_statement = cx.aggregate.problem_statement(&pr.repo, &b.issues);
    let edited: BTreeSet<String> = b.files.iter().map(|f| f.path.clone()).collect();
    let relevant = relevant::select(
        clone,
        &relevant::Request {
            base: b.base,
            edited: &edited,
            edited_code: &code_context,
            issue: &problem_statement,
            count: cx.config.relevant_files,
            max_bytes: cx.config.max_relevant_bytes,
            endpoint: cx.endpoint,
        },
    );
    let object = &pr.latest.pull_request;
    let relevant_files = relevant.iter().map(|(p, _)| p.clone()).collect();
    code_context.extend(relevant);
    Ok(Task {
        instance_id: format!("{}-{}", pr.repo.replace('/', "__"), pr.number),
        repo: pr.repo.clone(),
        pull_number: pr.number,
        issue_numbers: b.issues,
        base_commit: b.base.to_string(),
        head_commit: b.head.to_string(),
        merge_commit: b.merge_commit,
        created_at: pr.created_at(),
        merged_at: object
            .merged_at
            .clone()
            .unwrap_or_else(|| pr.latest.order.created_at.clone()),
        problem_statement,
        code_context,
        oracle_new_content,
        edited_files: edited.into_iter().collect(),
        edited_code_files: b.code_files,
        edited_test_files: test_paths
            .iter()
            .map(|p| (*p).to_owned())
            .filter(|p| !b.files.iter().any(|f| f.path == *p && f.class.is_none()))
            .collect(),
        binary_files: b
            .files
            .iter()
            .filter(|f| f.class.is_none())
            .map(|f| f.path.clone())
            .collect(),
        relevant_files,
        patch,
        test_patch,
        code_patch_sha256: key,
    })
}

/// UTF-8 text of a non-binary file; invalid bytes are replaced.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An edited path with both sides read; `class` is `None` for a binary file.
struct EditedFile {
    path: String,
    class: Option<PathClass>,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
}

fn read_changes(clone: &Mirror, changes: &[Change]) -> Result<Vec<EditedFile>, MirrorError> {
    changes
        .iter()
        .map(|c| {
            if c.submodule {
                return Ok(EditedFile {
                    path: c.path.clone(),
                    class: Some(PathClass::Other),
                    old: None,
                    new: None,
                });
            }
            let old = c.old.map(|id| clone.blob(id)).transpose()?;
            let new = c.new.map(|id| clone.blob(id)).transpose()?;
            let binary =
                old.as_deref().is_some_and(is_binary) || new.as_deref().is_some_and(is_binary);
            Ok(EditedFile {
                path: c.path.clone(),
                class: (!binary).then(|| classify(&c.path)),
                old,
                new,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Reason, is_bot};

    #[test]
    fn bot_words_literally() {
        assert!(is_bot("Bump the minimum Python version to 3.8", "", "ann"));
        assert!(is_bot("Fix x", "please AutoMerge", "ann"));
        assert!(is_bot("Fix x", "", "renovate-bot"));
        assert!(is_bot("Fix x", "", "github-actions[bot]"));
        assert!(!is_bot("Fix the parser", "Fixes #3", "ann"));
    }

    #[test]
    fn reasons_are_in_rule_order() {
        let mut sorted = Reason::ALL;
        sorted.sort();
        assert_eq!(sorted, Reason::ALL);
        let names: Vec<_> = Reason::ALL
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        for (r, n) in Reason::ALL.iter().zip(names) {
            assert_eq!(n, format!("\"{}\"", r.as_str()));
        }
    }
}
