//! Reading bare git mirrors — `<repos>/<owner>/<name>.git`, as `git clone --mirror` makes them —
//! for the crates that need a repository's history: `curate` (a pull request's merge base,
//! edited files, patches and merge evidence) and the trainer's retrieval (a task's repository
//! at its base commit). One type, [`Mirror`], with plain types in its API ([`ObjectId`],
//! [`Change`], [`Tree`], [`MergeEvidence`]) and one error, [`MirrorError`], that names the
//! mirror and the operation.
//!
//! What it is not: a git client. It never writes, fetches or checks out; libgit2 is built
//! without network transports.
//!
//! The library is `git2` (libgit2) rather than `gix`: merge bases, tree-to-tree diffs without
//! rename detection, blob reads and unified patches with git's own semantics, in one small
//! dependency that builds from vendored C. Binary files are decided as git's `--numstat` does
//! (a NUL byte in the first 8000 bytes of either side), not with libgit2's looser heuristic, so
//! the split agrees with `git diff`.

mod error;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::{DiffFormat, DiffOptions, Oid, Repository, Sort};

pub use error::MirrorError;

/// How far git looks for a NUL byte to call a file binary.
const BINARY_PROBE: usize = 8000;

/// git's rule: a NUL byte in the first 8000 bytes.
pub fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_PROBE)].contains(&0)
}

/// `owner/name` with GitHub's characters only, so that a name from an event can never point
/// outside the mirrors' folder.
pub fn is_repo_name(name: &str) -> bool {
    let mut parts = name.split('/');
    let ok = |part: Option<&str>| {
        part.is_some_and(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// The mirror of `owner/name` under `repos`.
pub fn mirror_path(repos: &Path, name: &str) -> PathBuf {
    repos.join(format!("{name}.git"))
}

/// A git object id (a commit, tree or blob), printed as its full hexadecimal name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(Oid);

impl ObjectId {
    /// The id a full hexadecimal name (40 digits) spells; `None` for anything else.
    pub fn parse(hex: &str) -> Option<ObjectId> {
        (hex.len() == 40)
            .then(|| Oid::from_str(hex).ok())
            .flatten()
            .map(ObjectId)
    }
}

impl std::fmt::Display for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectId({})", self.0)
    }
}

/// One edited path between two commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The path (`/`-separated; non-UTF-8 bytes replaced).
    pub path: String,
    /// Blob at the old commit (`None`: added).
    pub old: Option<ObjectId>,
    /// Blob at the new commit (`None`: deleted).
    pub new: Option<ObjectId>,
    /// A submodule pointer (gitlink) on either side: listed like git lists it, never read.
    pub submodule: bool,
}

/// What a branch's history says about a pull request whose payload does not (a trimmed GH
/// Archive event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeEvidence {
    /// The head is not reachable from the branch and no commit subject names the PR.
    NotMerged,
    /// Merged (the head is reachable, or a subject ends with `(#number)`), but no commit of the
    /// branch is its merge.
    Merged,
    /// Merged by this commit: the newest whose second parent is the head or whose subject ends
    /// with `(#number)`.
    MergedBy(ObjectId),
}

/// A commit's tree, for reading several paths of one commit.
pub struct Tree<'m> {
    tree: git2::Tree<'m>,
}

impl Tree<'_> {
    /// The blob at `path`, when the tree has a file there.
    pub fn blob(&self, path: &str) -> Option<ObjectId> {
        let entry = self.tree.get_path(Path::new(path)).ok()?;
        (entry.kind() == Some(git2::ObjectType::Blob)).then(|| ObjectId(entry.id()))
    }
}

/// A commit on a branch, for the merge checks of trimmed payloads.
#[derive(Debug, Clone)]
struct BranchCommit {
    id: Oid,
    second_parent: Option<Oid>,
    subject: String,
}

/// An open bare mirror.
pub struct Mirror {
    repo: Repository,
    path: PathBuf,
    /// Each branch's log, newest first, read once per mirror.
    branches: RefCell<HashMap<String, Vec<BranchCommit>>>,
}

impl Mirror {
    /// Opens the mirror of `name` under `repos`.
    ///
    /// The first call turns off libgit2's re-hashing of every object it reads (its "strict
    /// hash verification", a quarter of curation's clone stage): like git itself, a mirror's
    /// objects are trusted once `git clone --mirror` / `git fetch` verified them on arrival.
    pub fn open(repos: &Path, name: &str) -> Result<Mirror, MirrorError> {
        static TRUST_OBJECTS: std::sync::Once = std::sync::Once::new();
        TRUST_OBJECTS.call_once(|| git2::opts::strict_hash_verification(false));
        if !is_repo_name(name) {
            return Err(MirrorError::NotARepoName {
                name: name.to_owned(),
            });
        }
        let path = mirror_path(repos, name);
        if !path.is_dir() {
            return Err(MirrorError::Missing { path });
        }
        let repo = Repository::open_bare(&path).map_err(|e| MirrorError::Git {
            path: path.clone(),
            operation: "open the repository".into(),
            detail: e.message().to_owned(),
        })?;
        Ok(Mirror {
            repo,
            path,
            branches: RefCell::new(HashMap::new()),
        })
    }

    /// The mirror's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An error of `operation` on this mirror.
    fn fail(&self, operation: impl Into<String>) -> impl FnOnce(git2::Error) -> MirrorError {
        let (path, operation) = (self.path.clone(), operation.into());
        move |e| MirrorError::Git {
            path,
            operation,
            detail: e.message().to_owned(),
        }
    }

    /// The commit `sha` names, when it is a full or abbreviated id of a commit in the mirror.
    pub fn commit(&self, sha: &str) -> Option<ObjectId> {
        let oid = Oid::from_str(sha).ok()?;
        self.repo.find_commit(oid).ok().map(|c| ObjectId(c.id()))
    }

    /// `git merge-base a b`.
    pub fn merge_base(&self, a: ObjectId, b: ObjectId) -> Result<ObjectId, MirrorError> {
        self.repo
            .merge_base(a.0, b.0)
            .map(ObjectId)
            .map_err(self.fail(format!("find a merge base of {a} and {b}")))
    }

    /// The tree of `commit`.
    pub fn tree(&self, commit: ObjectId) -> Result<Tree<'_>, MirrorError> {
        self.git_tree(commit).map(|tree| Tree { tree })
    }

    fn git_tree(&self, commit: ObjectId) -> Result<git2::Tree<'_>, MirrorError> {
        self.repo
            .find_commit(commit.0)
            .and_then(|c| c.tree())
            .map_err(self.fail(format!("read the tree of {commit}")))
    }

    /// The edited paths between `from` and `to` (`git diff --no-renames`: a rename is a
    /// deletion plus an addition), sorted by path.
    pub fn changes(&self, from: ObjectId, to: ObjectId) -> Result<Vec<Change>, MirrorError> {
        let (old, new) = (self.git_tree(from)?, self.git_tree(to)?);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), None)
            .map_err(self.fail(format!("diff {from}..{to}")))?;
        let oid = |f: git2::DiffFile<'_>| Some(f.id()).filter(|id| !id.is_zero()).map(ObjectId);
        let mut changes: Vec<Change> = diff
            .deltas()
            .map(|d| {
                let file = d.new_file().path_bytes().or(d.old_file().path_bytes());
                Change {
                    path: String::from_utf8_lossy(file.unwrap_or_default()).into_owned(),
                    old: oid(d.old_file()),
                    new: oid(d.new_file()),
                    submodule: [d.old_file().mode(), d.new_file().mode()]
                        .contains(&git2::FileMode::Commit),
                }
            })
            .collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// A blob's bytes.
    pub fn blob(&self, id: ObjectId) -> Result<Vec<u8>, MirrorError> {
        self.repo
            .find_blob(id.0)
            .map(|b| b.content().to_vec())
            .map_err(self.fail(format!("read blob {id}")))
    }

    /// Whether `patch` applies cleanly to `commit`'s tree (`git apply --check`; nothing is
    /// written). `Ok(false)` when it does not apply or is not a diff at all.
    pub fn applies(&self, commit: ObjectId, patch: &str) -> Result<bool, MirrorError> {
        let tree = self.git_tree(commit)?;
        let Ok(diff) = git2::Diff::from_buffer(patch.as_bytes()) else {
            return Ok(false);
        };
        Ok(self.repo.apply_to_tree(&tree, &diff, None).is_ok())
    }

    /// Every file path (blobs) in `commit`'s tree.
    pub fn files(&self, commit: ObjectId) -> Result<Vec<String>, MirrorError> {
        let tree = self.git_tree(commit)?;
        let mut out = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                out.push(format!(
                    "{dir}{}",
                    String::from_utf8_lossy(entry.name_bytes())
                ));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(self.fail(format!("walk the tree of {commit}")))?;
        Ok(out)
    }

    /// The messages of the commits in `from..to` (a pull request's own commits).
    pub fn messages(&self, from: ObjectId, to: ObjectId) -> Result<Vec<String>, MirrorError> {
        let commits = self.walk(to.0, Some(from.0), Sort::NONE)?;
        Ok(commits
            .iter()
            .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
            .collect())
    }

    /// The commits reachable from `tip` and not from `hide`, in `sort` order.
    fn walk(
        &self,
        tip: Oid,
        hide: Option<Oid>,
        sort: Sort,
    ) -> Result<Vec<git2::Commit<'_>>, MirrorError> {
        let operation = format!("walk the history of {tip}");
        let walked = (|| {
            let mut walk = self.repo.revwalk()?;
            walk.set_sorting(sort)?;
            walk.push(tip)?;
            if let Some(hide) = hide {
                walk.hide(hide)?;
            }
            walk.map(|id| self.repo.find_commit(id?))
                .collect::<Result<Vec<_>, git2::Error>>()
        })();
        walked.map_err(self.fail(operation))
    }

    /// `git diff --no-renames -U3 from to -- paths` for each group of paths, from one diff
    /// (with `GIT binary patch` sections for binary files, so that `git apply` can apply it);
    /// a file's section is the same whichever other files are diffed with it. A group that is
    /// empty gets an empty patch.
    pub fn patches(
        &self,
        from: ObjectId,
        to: ObjectId,
        groups: &[&[&str]],
    ) -> Result<Vec<String>, MirrorError> {
        let mut member: HashMap<&str, u64> = HashMap::new();
        for (i, group) in groups.iter().enumerate() {
            for path in *group {
                *member.entry(path).or_default() |= 1 << i;
            }
        }
        let mut out = vec![Vec::new(); groups.len()];
        if member.is_empty() {
            return Ok(vec![String::new(); groups.len()]);
        }
        let (old, new) = (self.git_tree(from)?, self.git_tree(to)?);
        let mut opts = DiffOptions::new();
        opts.ignore_submodules(true)
            .show_binary(true)
            .context_lines(3)
            .disable_pathspec_match(true);
        for path in member.keys() {
            opts.pathspec(*path);
        }
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
            .map_err(self.fail(format!("diff {from}..{to}")))?;
        diff.print(DiffFormat::Patch, |delta, _, line| {
            let path = delta
                .new_file()
                .path_bytes()
                .or(delta.old_file().path_bytes());
            let path = String::from_utf8_lossy(path.unwrap_or_default());
            let groups = member.get(path.as_ref()).copied().unwrap_or(0);
            for (i, out) in out.iter_mut().enumerate() {
                if groups & (1 << i) != 0 {
                    if matches!(line.origin(), '+' | '-' | ' ') {
                        out.push(line.origin() as u8);
                    }
                    out.extend_from_slice(line.content());
                }
            }
            true
        })
        .map_err(self.fail(format!("print the diff {from}..{to}")))?;
        Ok(out
            .into_iter()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .collect())
    }

    /// What `refs/heads/<branch>` says of pull request `number` with head `head`
    /// ([`MergeEvidence`]). A branch the mirror does not have is [`MergeEvidence::NotMerged`].
    pub fn merged_into(
        &self,
        branch: &str,
        head: ObjectId,
        number: u64,
    ) -> Result<MergeEvidence, MirrorError> {
        let reference = format!("refs/heads/{branch}");
        let Ok(tip) = self.repo.refname_to_id(&reference) else {
            return Ok(MergeEvidence::NotMerged);
        };
        let reachable = tip == head.0
            || self
                .repo
                .graph_descendant_of(tip, head.0)
                .map_err(self.fail(format!("check whether {reference} contains {head}")))?;
        let suffix = format!("(#{number})");
        let mut cache = self.branches.borrow_mut();
        if !cache.contains_key(&reference) {
            cache.insert(reference.clone(), self.branch_log(tip)?);
        }
        let log = &cache[&reference];
        let found = log
            .iter()
            .find(|c| c.second_parent == Some(head.0) || c.subject.trim_end().ends_with(&suffix));
        let squashed = log.iter().any(|c| c.subject.trim_end().ends_with(&suffix));
        Ok(match (reachable || squashed, found) {
            (false, _) => MergeEvidence::NotMerged,
            (true, None) => MergeEvidence::Merged,
            (true, Some(c)) => MergeEvidence::MergedBy(ObjectId(c.id)),
        })
    }

    fn branch_log(&self, tip: Oid) -> Result<Vec<BranchCommit>, MirrorError> {
        Ok(self
            .walk(tip, None, Sort::TIME)?
            .iter()
            .map(|commit| BranchCommit {
                id: commit.id(),
                second_parent: commit.parent_id(1).ok(),
                subject: commit
                    .summary_bytes()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_stay_inside_repos() {
        assert!(is_repo_name("quietpine/slugkit"));
        assert!(is_repo_name("a-b/c_d.e"));
        for bad in ["../x", "a/..", "a", "a/b/c", "/a/b", "a/b c", ""] {
            assert!(!is_repo_name(bad), "{bad}");
        }
    }

    #[test]
    fn binary_is_a_nul_in_the_first_8000_bytes() {
        assert!(is_binary(b"PNG\0\x01"));
        assert!(!is_binary("naïve ’ text".as_bytes()));
        let mut late = vec![b'a'; 9000];
        late[8500] = 0;
        assert!(!is_binary(&late));
    }

    #[test]
    fn errors_name_the_mirror_and_what_failed() {
        let repos = tempfile::tempdir().unwrap();
        let err = Mirror::open(repos.path(), "../etc").err().unwrap();
        assert_eq!(
            err.to_string(),
            "\"../etc\" is not an owner/name repository name"
        );
        let err = Mirror::open(repos.path(), "a/b").err().unwrap();
        assert_eq!(
            err,
            MirrorError::Missing {
                path: repos.path().join("a/b.git")
            }
        );
        std::fs::create_dir_all(repos.path().join("a/c.git")).unwrap();
        let err = Mirror::open(repos.path(), "a/c").err().unwrap().to_string();
        assert!(
            err.contains("a/c.git: cannot open the repository:"),
            "{err}"
        );
        let mirror = {
            let path = repos.path().join("a/d.git");
            Repository::init_bare(&path).unwrap();
            Mirror::open(repos.path(), "a/d").unwrap()
        };
        let missing = ObjectId::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
        let err = mirror.blob(missing).unwrap_err().to_string();
        assert!(
            err.contains("a/d.git: cannot read blob 0123456789abcdef0123456789abcdef01234567:"),
            "{err}"
        );
        assert!(mirror.commit("0123456").is_none());
        assert_eq!(ObjectId::parse("0123"), None);
    }
}
