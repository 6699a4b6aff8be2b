//! Stage 1: stream GH Archive hour files. Each `.json.gz` is decoded as multi-member gzip (some
//! hours are concatenated members) and read line by line; only `PullRequestEvent`s and opened
//! `IssuesEvent`s are kept, in compact form, and handed to [`crate::spill`], so memory does not
//! grow with the corpus. Every field is optional: GH Archive's payloads shrank on 2025-10-07
//! and old dumps miss fields too. A line that is not JSON, and a file that ends early, are counted
//! with their file and line and the run goes on.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::decontaminate;
use crate::error::CurateError;

/// The order of events of one pull request: `created_at`, then the numeric id, then its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub(crate) struct EventOrder {
    /// ISO time as GH Archive writes it (`2020-02-17T07:45:00Z`), which sorts as text.
    pub created_at: String,
    /// The event id as a number (0 when it is not one).
    pub id: u64,
    /// The event id as written.
    pub id_text: String,
}

/// A user object; only the login matters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct User {
    /// The login, e.g. `dependabot[bot]`.
    #[serde(default)]
    pub login: Option<String>,
}

/// `base` / `head` of a pull request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct BranchTip {
    /// Branch name.
    #[serde(default, rename = "ref")]
    pub branch: Option<String>,
    /// Commit sha.
    #[serde(default)]
    pub sha: Option<String>,
}

/// The `pull_request` object, full (before 2025-10-07) or trimmed (after): every field optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct PullRequestObject {
    /// The PR number (also in the payload).
    #[serde(default)]
    pub number: Option<u64>,
    /// Title (full payloads).
    #[serde(default)]
    pub title: Option<String>,
    /// Body; `null` when empty.
    #[serde(default)]
    pub body: Option<String>,
    /// Author.
    #[serde(default)]
    pub user: Option<User>,
    /// Merge flag (absent in review events and trimmed payloads).
    #[serde(default)]
    pub merged: Option<bool>,
    /// Merge time.
    #[serde(default)]
    pub merged_at: Option<String>,
    /// GitHub's merge (or test-merge) commit.
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    /// Base branch and commit.
    #[serde(default)]
    pub base: Option<BranchTip>,
    /// Head branch and commit.
    #[serde(default)]
    pub head: Option<BranchTip>,
    /// When the PR was opened.
    #[serde(default)]
    pub created_at: Option<String>,
}

impl PullRequestObject {
    /// A trimmed payload (GH Archive from 2025-10-07): none of `merged`, `merged_at`, `title`,
    /// `user`.
    pub(crate) fn is_trimmed(&self) -> bool {
        self.merged.is_none()
            && self.merged_at.is_none()
            && self.title.is_none()
            && self.user.is_none()
    }
}

/// One kept `PullRequestEvent`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PullRequestEvent {
    /// Its place in the PR's history.
    pub order: EventOrder,
    /// `repo.name`.
    pub repo: String,
    /// `repo.id`.
    pub repo_id: Option<u64>,
    /// The PR number.
    pub number: u64,
    /// `opened`, `closed`, `reopened`, …
    pub action: Option<String>,
    /// The event's actor login.
    pub actor: Option<String>,
    /// The PR object (empty when the payload had none).
    pub pull_request: PullRequestObject,
}

/// One opened issue's text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct IssueOpened {
    /// Its place among events.
    pub order: EventOrder,
    /// `repo.name`.
    pub repo: String,
    /// Issue number.
    pub number: u64,
    /// Title (empty when absent).
    pub title: String,
    /// Body (empty when absent or null).
    pub body: String,
}

/// An event the later stages need (also the line format of the spilled partitions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Kept {
    /// A `PullRequestEvent` (boxed: it is much larger than an issue).
    PullRequest(Box<PullRequestEvent>),
    /// An `IssuesEvent` with action `opened`.
    IssueOpened(IssueOpened),
}

impl Kept {
    /// The event id as written.
    pub(crate) fn id(&self) -> &str {
        match self {
            Kept::PullRequest(e) => &e.order.id_text,
            Kept::IssueOpened(e) => &e.order.id_text,
        }
    }

    /// `repo.name`.
    pub(crate) fn repo(&self) -> &str {
        match self {
            Kept::PullRequest(e) => &e.repo,
            Kept::IssueOpened(e) => &e.repo,
        }
    }
}

/// Input that could not be read as events: a line that is not JSON or a file that ended early.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputProblem {
    /// The file.
    pub file: String,
    /// 1-based line number (of the line read when a file broke off).
    pub line: u64,
    /// What went wrong.
    pub error: String,
}

/// What reading one file gave.
#[derive(Debug, Default)]
pub(crate) struct FileEvents {
    /// Kept events, in file order.
    pub kept: Vec<Kept>,
    /// Non-empty lines read.
    pub lines: u64,
    /// Lines that were not a JSON event.
    pub invalid_lines: u64,
    /// Whether the file ended early (truncated gzip, I/O error).
    pub broken: bool,
    /// Invalid lines and breaks, with file and line.
    pub problems: Vec<InputProblem>,
    /// `repo.id`s carried by events whose `repo.name` is a SWE-bench repository.
    pub benchmark_ids: BTreeSet<u64>,
}

/// `id` is a string in GH Archive; accept a number too.
fn id_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(u64),
    }
    Ok(Option::<Id>::deserialize(d)?.map(|id| match id {
        Id::Text(t) => t,
        Id::Number(n) => n.to_string(),
    }))
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, deserialize_with = "id_text")]
    id: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    actor: Option<User>,
    #[serde(default)]
    repo: Option<RepoRef>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
    #[serde(default)]
    created_at: Option<String>,
}

#[derive(Deserialize)]
struct RepoRef {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct PullRequestPayload {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    number: Option<u64>,
    #[serde(default)]
    pull_request: Option<PullRequestObject>,
}

#[derive(Deserialize)]
struct IssuesPayload {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    issue: Option<IssueObject>,
}

#[derive(Deserialize)]
struct IssueObject {
    #[serde(default)]
    number: Option<u64>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
}

/// The event files named by `inputs`: files as given, folders searched (recursively) for
/// `*.json.gz` and `*.json`; sorted by path, without repeats.
pub(crate) fn event_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, CurateError> {
    let mut files = BTreeSet::new();
    for input in inputs {
        let meta = fs_err::metadata(input).map_err(|source| CurateError::Read {
            path: input.clone(),
            source,
        })?;
        if !meta.is_dir() {
            files.insert(input.clone());
            continue;
        }
        let mut stack = vec![input.clone()];
        while let Some(dir) = stack.pop() {
            let entries = fs_err::read_dir(&dir).map_err(|source| CurateError::Read {
                path: dir.clone(),
                source,
            })?;
            for entry in entries {
                let path = entry
                    .map_err(|source| CurateError::Read {
                        path: dir.clone(),
                        source,
                    })?
                    .path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".json.gz") || n.ends_with(".json"))
                {
                    files.insert(path);
                }
            }
        }
    }
    Ok(files.into_iter().collect())
}

/// Reads one hour file. Never fails: an unopenable or truncated file is a problem in the result.
pub(crate) fn read_file(path: &Path) -> FileEvents {
    let mut out = FileEvents::default();
    let name = path.display().to_string();
    let file = match fs_err::File::open(path) {
        Ok(file) => file,
        Err(error) => {
            out.broken = true;
            out.problems.push(InputProblem {
                file: name,
                line: 0,
                error: error.to_string(),
            });
            return out;
        }
    };
    let reader: Box<dyn Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    read_lines(BufReader::with_capacity(1 << 20, reader), &name, &mut out);
    out
}

fn read_lines(mut reader: impl BufRead, name: &str, out: &mut FileEvents) {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                out.broken = true;
                out.problems.push(InputProblem {
                    file: name.to_owned(),
                    line: line_no + 1,
                    error: format!("file ends early: {error}"),
                });
                break;
            }
        }
        line_no += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.lines += 1;
        if let Err(error) = parse_line(&buf, out) {
            out.invalid_lines += 1;
            out.problems.push(InputProblem {
                file: name.to_owned(),
                line: line_no,
                error,
            });
        }
    }
}

fn parse_line(line: &[u8], out: &mut FileEvents) -> Result<(), String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON event: {e}"))?;
    let (repo_id, repo) = match envelope.repo {
        Some(RepoRef {
            id,
            name: Some(name),
        }) => (id, name),
        _ => return Ok(()),
    };
    if let Some(id) = repo_id.filter(|_| decontaminate::is_benchmark_name(&repo)) {
        out.benchmark_ids.insert(id);
    }
    let order = EventOrder {
        created_at: envelope.created_at.unwrap_or_default(),
        id: envelope
            .id
            .as_deref()
            .and_then(|id| id.parse().ok())
            .unwrap_or(0),
        id_text: envelope.id.unwrap_or_default(),
    };
    let Some(payload) = envelope.payload else {
        return Ok(());
    };
    match envelope.kind.as_deref() {
        Some("PullRequestEvent") => {
            let payload: PullRequestPayload = serde_json::from_str(payload.get())
                .map_err(|e| format!("bad PullRequestEvent payload: {e}"))?;
            let pull_request = payload.pull_request.unwrap_or_default();
            let Some(number) = payload.number.or(pull_request.number) else {
                return Ok(());
            };
            out.kept.push(Kept::PullRequest(Box::new(PullRequestEvent {
                order,
                repo,
                repo_id,
                number,
                action: payload.action,
                actor: envelope.actor.and_then(|a| a.login),
                pull_request,
            })));
        }
        Some("IssuesEvent") => {
            let payload: IssuesPayload = serde_json::from_str(payload.get())
                .map_err(|e| format!("bad IssuesEvent payload: {e}"))?;
            let (Some("opened"), Some(issue)) = (payload.action.as_deref(), payload.issue) else {
                return Ok(());
            };
            let Some(number) = issue.number else {
                return Ok(());
            };
            out.kept.push(Kept::IssueOpened(IssueOpened {
                order,
                repo,
                number,
                title: issue.title.unwrap_or_default(),
                body: issue.body.unwrap_or_default(),
            }));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{Kept, read_file};

    fn gz(text: &str) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap()
    }

    const PR: &str = r#"{"id":"7","type":"PullRequestEvent","actor":{"login":"ann"},"repo":{"id":5,"name":"a/b"},"payload":{"action":"closed","number":3,"pull_request":{"title":"t","body":null,"merged":true,"base":{"ref":"main","sha":"aa"},"head":{"sha":"bb","repo":null}}},"created_at":"2020-01-01T00:00:00Z"}"#;
    const TRIMMED: &str = r#"{"id":"8","type":"PullRequestEvent","repo":{"id":5,"name":"a/b"},"payload":{"action":"opened","number":4,"pull_request":{"url":"u","id":1,"number":4,"head":{"ref":"x","sha":"cc"},"base":{"ref":"main","sha":"dd"}}},"created_at":"2025-11-01T00:00:00Z"}"#;
    const ISSUE: &str = r#"{"id":"9","type":"IssuesEvent","repo":{"id":596892,"name":"pallets/flask"},"payload":{"action":"opened","issue":{"number":2,"title":"T","body":"B"}},"created_at":"2020-01-01T00:00:00Z"}"#;

    #[test]
    fn multi_member_gzip_invalid_lines_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = gz(&format!("{PR}\n{{\"id\": \"cut\n"));
        bytes.extend(gz(&format!(
            "\n{TRIMMED}\n{ISSUE}\n{{\"type\":\"WatchEvent\"}}\n"
        )));
        let whole = dir.path().join("2020-01-01-0.json.gz");
        std::fs::write(&whole, &bytes).unwrap();
        let read = read_file(&whole);
        assert_eq!((read.lines, read.invalid_lines, read.broken), (5, 1, false));
        assert_eq!(read.problems[0].line, 2);
        assert_eq!(read.kept.len(), 3);
        assert!(read.benchmark_ids.contains(&596892));
        let Kept::PullRequest(pr) = &read.kept[0] else {
            panic!()
        };
        assert_eq!((pr.number, pr.pull_request.merged), (3, Some(true)));
        assert!(!pr.pull_request.is_trimmed());
        let Kept::PullRequest(trimmed) = &read.kept[1] else {
            panic!()
        };
        assert!(trimmed.pull_request.is_trimmed());

        let cut = dir.path().join("2020-01-01-1.json.gz");
        std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
        let read = read_file(&cut);
        assert!(read.broken);
        assert!(!read.kept.is_empty(), "what came before the cut is kept");
    }
}
